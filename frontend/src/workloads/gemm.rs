//! `gemm`: `C = A × B` in f32 (A is m×k, B is k×n, all row-major), the classic
//! shared-memory tiled kernel of the CUDA programming guide. A CTA of tile×tile threads
//! computes a tile×tile block of C; thread (tx, ty) owns `C[row][col]` with
//! `row = blockIdx.y * tile + ty`, `col = blockIdx.x * tile + tx`. For each step of k by
//! `tile`, every thread loads one element of A's tile and one of B's into shared memory,
//! `__syncthreads()`, accumulates `tile` fused multiply-adds from shared memory, and
//! `__syncthreads()` again. The tile size is a runtime parameter, so both loops are the
//! rolled loops nvcc emits for a runtime trip count (counter `IADD3`, `ISETP`, back-edge
//! `BRA` per iteration).
//!
//! Per warp, as recorded: `MOV` (prologue), 4 `S2R` (tid.x, tid.y, ctaid.x, ctaid.y),
//! `IMAD` (row), `IMAD` (col), `IMAD` (ty*tile+tx), `LEA` (&As[ty][tx]), `LEA`
//! (&Bs[ty][tx]), `IMAD` (ty*tile), `LEA` (&As[ty][0]), `LEA` (&Bs[0][tx]), `IMAD`
//! (row*k+tx), `IMAD` (ty*n+col), `MOV` (acc = 0): 16; per k step `IADD3`, `IMAD.WIDE`,
//! `LDG.E` (A), `IADD3`, `IMAD.WIDE`, `LDG.E` (B), `STS`, `STS`, `BAR.SYNC`, per inner
//! step `IADD3`, `LDS` (As[ty][kk]), `IADD3`, `LDS` (Bs[kk][tx]), `FFMA`, `IADD3`,
//! `ISETP.NE.U32.AND`, `BRA`, then `BAR.SYNC`, `IADD3`, `ISETP.NE.U32.AND`, `BRA`: 13 + 8
//! tile; then `IMAD` (row*n+col), `IMAD.WIDE`, `STG.E`, `EXIT`: 4.
//!
//! The reference is a plain triple loop with `f32::mul_add` in the kernel's order (k
//! ascending from 0.0), so C matches bit for bit.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Buffer, LaunchSpec, Recorder, SharedArr};
use tessera_traces::{Access, ArrayAnnotation, CtaRange};

/// Largest matrix, in elements: every index fits in 32 bits, 1 GiB per matrix.
const MAX_ELEMS: u64 = 1 << 28;

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "gemm",
    help: "C = A x B in f32 (m x k times k x n), shared-memory tiled",
    params: &[
        ParamSpec {
            name: "m",
            default: "128",
            help: "rows of A and C (a multiple of tile)",
        },
        ParamSpec {
            name: "n",
            default: "128",
            help: "columns of B and C (a multiple of tile)",
        },
        ParamSpec {
            name: "k",
            default: "128",
            help: "columns of A, rows of B (a multiple of tile)",
        },
        ParamSpec {
            name: "tile",
            default: "16",
            help: "CTA tile edge: tile x tile threads, tile*tile <= 1024",
        },
        ParamSpec {
            name: "seed",
            default: "1",
            help: "input generator seed",
        },
    ],
    run,
};

/// The functional result (`got`) and the reference (`want`), C row-major.
pub(crate) struct Outcome {
    pub got: Vec<f32>,
    pub want: Vec<f32>,
}

/// Runs of `gx` consecutive CTAs (one row of the grid) touch `rows_per_cta` whole rows of
/// a row-major matrix with `cols` columns of f32.
fn row_ranges(base: u64, gx: u32, gy: u32, rows_per_cta: u64, cols: u64) -> Vec<CtaRange> {
    let bytes = rows_per_cta * cols * 4;
    (0..gy)
        .map(|by| CtaRange {
            first_cta: by * gx,
            n_ctas: gx,
            lo: base + by as u64 * bytes,
            hi: base + (by as u64 + 1) * bytes,
        })
        .collect()
}

fn annotation(
    name: &str,
    buf: Buffer<f32>,
    access: Access,
    ranges: Vec<CtaRange>,
) -> ArrayAnnotation {
    ArrayAnnotation {
        name: name.into(),
        base: buf.base,
        bytes: buf.bytes(),
        access,
        ranges,
    }
}

/// Records the kernel and returns its result with the reference.
pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let m = p.u32("m")?;
    let n = p.u32("n")?;
    let k = p.u32("k")?;
    let tile = p.u32("tile")?;
    let seed = p.u64_any("seed")?;
    if tile > 32 {
        return Err(p.invalid(&format!(
            "tile={tile}: a CTA of tile*tile = {} threads is more than 1024",
            tile as u64 * tile as u64
        )));
    }
    if m % tile != 0 || n % tile != 0 || k % tile != 0 {
        return Err(p.invalid(&format!(
            "m={m}, n={n}, k={k} must all be multiples of tile={tile}"
        )));
    }
    for (what, e) in [
        ("m*k", m as u64 * k as u64),
        ("k*n", k as u64 * n as u64),
        ("m*n", m as u64 * n as u64),
    ] {
        if e > MAX_ELEMS {
            return Err(p.invalid(&format!("{what} = {e} elements is more than {MAX_ELEMS}")));
        }
    }
    let mut rng = SplitMix64(seed);
    let a_h: Vec<f32> = (0..m as u64 * k as u64).map(|_| rng.unit_f32()).collect();
    let b_h: Vec<f32> = (0..k as u64 * n as u64).map(|_| rng.unit_f32()).collect();
    let a = rec.alloc::<f32>("A", a_h.len() as u64)?;
    let b = rec.alloc::<f32>("B", b_h.len() as u64)?;
    let c = rec.alloc::<f32>("C", m as u64 * n as u64)?;
    rec.upload(a, &a_h)?;
    rec.upload(b, &b_h)?;

    let (gx, gy) = (n / tile, m / tile);
    let as_ = SharedArr::<f32>::new(0, tile * tile);
    let bs = SharedArr::<f32>::new(as_.end(), tile * tile);
    let mut spec = LaunchSpec::new("_Z11sgemm_tiledPKfS0_Pfiii", [gx, gy, 1], [tile, tile, 1]);
    spec.shmem_bytes = bs.end();
    spec.annotations = vec![
        annotation(
            "A",
            a,
            Access::Read,
            row_ranges(a.base, gx, gy, tile as u64, k as u64),
        ),
        // Every CTA of a grid column reads a column strip of B: spread over all of B.
        annotation("B", b, Access::Read, Vec::new()),
        annotation(
            "C",
            c,
            Access::ReadWrite,
            row_ranges(c.base, gx, gy, tile as u64, n as u64),
        ),
    ];
    rec.launch(&spec, &|w| {
        let tx = w.tid(0);
        let ty = w.tid(1);
        let bx = w.ctaid(0);
        let by = w.ctaid(1);
        let row = w.imad_imm(&by, tile, &ty);
        let col = w.imad_imm(&bx, tile, &tx);
        let own = w.imad_imm(&ty, tile, &tx);
        let as_st = w.shared_addr(&as_, &own);
        let bs_st = w.shared_addr(&bs, &own);
        let row0 = w.imul_imm(&ty, tile);
        let as_row = w.shared_addr(&as_, &row0);
        let bs_col = w.shared_addr(&bs, &tx);
        let a_i = w.imad_imm(&row, k, &tx);
        let b_i = w.imad_imm(&ty, n, &col);
        let mut acc = w.konst(0.0f32);
        w.for_range(k / tile, |w, t| {
            let ai = w.iadd_imm(&a_i, t * tile);
            let x = w.load(&a, &ai);
            let bi = w.iadd_imm(&b_i, t * tile * n);
            let y = w.load(&b, &bi);
            w.sts(&as_st, &x);
            w.sts(&bs_st, &y);
            w.barrier();
            w.for_range(tile, |w, kk| {
                let pa = w.iadd_imm(&as_row, 4 * kk);
                let xa = w.lds::<f32>(&pa);
                let pb = w.iadd_imm(&bs_col, 4 * kk * tile);
                let xb = w.lds::<f32>(&pb);
                w.ffma_acc(&mut acc, &xa, &xb);
            });
            w.barrier();
        });
        let ci = w.imad_imm(&row, n, &col);
        w.store(&c, &ci, &acc);
    })?;
    let got = rec.download(c)?;
    let want = reference(&a_h, &b_h, m as usize, n as usize, k as usize);
    Ok(Outcome { got, want })
}

/// `C = A × B` with one fused multiply-add per term, k ascending.
fn reference(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for p in 0..k {
                acc = a[i * k + p].mul_add(b[p * n + j], acc);
            }
            c[i * n + j] = acc;
        }
    }
    c
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check_eq("gemm", "C", &o.got, &o.want)?;
    let (m, n, k) = (p.u32("m")?, p.u32("n")?, p.u32("k")?);
    Ok(format!("C = A x B verified for {m}x{k} times {k}x{n}"))
}

#[cfg(test)]
mod tests {
    use super::{compute, SPEC};
    use crate::record::Recorder;
    use crate::workloads::{generate, GenError, Params};
    use tessera_traces::{OpClass, TraceFile};

    use crate::workloads::test_support::params;

    /// The recorded run equals the triple-loop reference bit for bit (square, rectangular,
    /// a partial warp with tile 4, the largest tile).
    #[test]
    fn result_equals_reference() {
        let d = tempfile::tempdir().unwrap();
        for kv in [
            &[("m", "32"), ("n", "48"), ("k", "64"), ("tile", "8")][..],
            &[
                ("m", "12"),
                ("n", "8"),
                ("k", "20"),
                ("tile", "4"),
                ("seed", "3"),
            ][..],
            &[("m", "32"), ("n", "32"), ("k", "64"), ("tile", "32")][..],
        ] {
            let p = Params::parse(&SPEC, &params(kv)).unwrap();
            let mut rec = Recorder::create(&d.path().join("g.tst"), 80, "test").unwrap();
            let o = compute(&p, &mut rec).unwrap();
            assert_eq!(o.got.len(), o.want.len());
            assert!(o.got == o.want, "{kv:?}");
        }
    }

    /// Counts by hand from the sequence in the module docs: every warp of a CTA records
    /// 20 + (k/tile) * (13 + 8 tile) instructions, all with its L = min(32, tile² - 32w)
    /// lanes (no divergence), among them 2 k/tile LDG, 1 STG, 2 k LDS, 2 k/tile STS,
    /// 2 k/tile BAR.SYNC and k FFMA.
    #[test]
    fn counts_match_the_hand_formulas() {
        let dir = tempfile::tempdir().unwrap();
        for (m, n, k, tile) in [(32u64, 48u64, 64u64, 8u64), (12, 8, 20, 4)] {
            let path = dir.path().join("g.tst");
            let p = params(&[
                ("m", &m.to_string()),
                ("n", &n.to_string()),
                ("k", &k.to_string()),
                ("tile", &tile.to_string()),
            ]);
            generate("gemm", &p, 80, &path).unwrap();
            let t = TraceFile::open(&path).unwrap();
            let kk = &t.kernels()[0];
            let ctas = (m / tile) * (n / tile);
            let threads = tile * tile;
            let warps_per_cta = threads.div_ceil(32);
            let per_warp = 20 + (k / tile) * (13 + 8 * tile);
            let lanes: u64 = (0..warps_per_cta).map(|w| (threads - 32 * w).min(32)).sum();
            let warps = ctas * warps_per_cta;
            let class = |c: OpClass| kk.counts.class_warp_insts[c as usize];
            assert_eq!(kk.counts.ctas, ctas);
            assert_eq!(kk.counts.warps, warps);
            assert_eq!(kk.counts.warp_insts, warps * per_warp);
            assert_eq!(kk.counts.thread_insts, ctas * lanes * per_warp);
            assert_eq!(class(OpClass::LoadGlobal), warps * 2 * k / tile);
            assert_eq!(class(OpClass::StoreGlobal), warps);
            assert_eq!(class(OpClass::LoadShared), warps * 2 * k);
            assert_eq!(class(OpClass::StoreShared), warps * 2 * k / tile);
            assert_eq!(class(OpClass::Barrier), warps * 2 * k / tile);
            assert_eq!(class(OpClass::Fp32), warps * k);
            assert_eq!(kk.shmem_bytes as u64, 2 * threads * 4);
        }
    }

    /// Bad parameters are `GenError::Params` whose message lists the valid parameters.
    #[test]
    fn bad_parameters_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.tst");
        for (kv, needle) in [
            (&[("rows", "10")][..], "no parameter 'rows'"),
            (&[("m", "0")][..], "m=0"),
            (&[("k", "0")][..], "k=0"),
            (&[("tile", "0")][..], "tile=0"),
            (&[("m", "100")][..], "multiples of tile=16"),
            (&[("n", "64"), ("tile", "24")][..], "multiples of tile=24"),
            (&[("tile", "64")][..], "more than 1024"),
            (&[("m", "65536"), ("n", "65536")][..], "m*n"),
        ] {
            let e = generate("gemm", &params(kv), 80, &path).unwrap_err();
            let GenError::Params(msg) = &e else {
                panic!("{kv:?}: {e}")
            };
            assert!(msg.contains(needle), "{kv:?}: {msg}");
            assert!(
                msg.contains("valid parameters: m (default 128), n (default 128), k (default 128), tile (default 16)"),
                "{kv:?}: {msg}"
            );
        }
    }
}
