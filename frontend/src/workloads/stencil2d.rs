//! `stencil2d`: iterative 5-point Jacobi on an `nx` × `ny` f32 grid (row-major, `ny` rows
//! of `nx` cells), one kernel launch per iteration, ping-ponging between two arrays. The
//! boundary cells are fixed (both arrays start as the same grid and the kernel writes only
//! the interior). One thread per interior cell, `block` × `block` CTAs tiling the interior:
//! thread (tx, ty) of CTA (cx, cy) updates row `i = 1 + cy*block + ty`, column
//! `j = 1 + cx*block + tx`:
//! `out[i][j] = (((in[i][j] + in[i-1][j]) + in[i+1][j]) + in[i][j-1]) + in[i][j+1]) * 0.2`,
//! four `FADD` and one `FMUL` in that order (the reference computes the same f32 ops, so
//! the result is bit-exact).
//!
//! Per warp, as recorded: `MOV` (prologue), `S2R` ×4 (tid.x, tid.y, ctaid.x, ctaid.y),
//! `IMAD`, `IADD3` (j), `IMAD`, `IADD3` (i), `ISETP` ×2 (j >= nx-1, i >= ny-1), `@P0 EXIT`
//! (lanes outside the interior), then for warps with an interior lane: `IMAD` (i*nx+j),
//! `IMAD.WIDE`, `LDG.E` (centre), `LDG.E` ×2 (left and right: the same address register
//! with offsets -4 and +4, as nvcc folds them into the instruction), `IADD3`, `IMAD.WIDE`,
//! `LDG.E` (up), `IADD3`, `IMAD.WIDE`, `LDG.E` (down), `FADD` ×4, `FMUL` (by the literal
//! 0.2), `IMAD.WIDE`, `STG.E`, `EXIT`: five global loads and one store per interior
//! thread.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Buffer, Cmp, LaunchSpec, Pred, Recorder, Val, WARP};
use tessera_traces::schema::RZ;
use tessera_traces::{Access, ArrayAnnotation, CtaRange};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "stencil2d",
    help: "iterative 5-point Jacobi on an f32 grid, one launch per iteration (ping-pong)",
    params: &[
        ParamSpec {
            name: "nx",
            default: "256",
            help: "grid columns (cells per row, boundary included)",
        },
        ParamSpec {
            name: "ny",
            default: "256",
            help: "grid rows (boundary included)",
        },
        ParamSpec {
            name: "iters",
            default: "4",
            help: "Jacobi iterations (kernel launches)",
        },
        ParamSpec {
            name: "block",
            default: "16",
            help: "CTA side: block x block threads per CTA (at most 32)",
        },
        ParamSpec {
            name: "seed",
            default: "1",
            help: "input generator seed",
        },
    ],
    run,
};

/// Validated sizes.
#[derive(Clone, Copy, Debug)]
struct Dims {
    nx: u32,
    ny: u32,
    iters: u32,
    block: u32,
    /// CTAs along x and y.
    gx: u32,
    gy: u32,
}

fn dims(p: &Params) -> Result<Dims, GenError> {
    let nx = p.u32("nx")?;
    let ny = p.u32("ny")?;
    let iters = p.u32("iters")?;
    let block = p.u32("block")?;
    if nx < 3 || ny < 3 {
        return Err(p.invalid(&format!(
            "a {nx} x {ny} grid has no interior cell: nx and ny must be at least 3"
        )));
    }
    if block > 32 {
        return Err(p.invalid(&format!(
            "block {block} gives {} threads per CTA; at most 32 x 32 = 1024",
            block as u64 * block as u64
        )));
    }
    if nx as u64 * ny as u64 > i32::MAX as u64 {
        return Err(p.invalid(&format!(
            "a {nx} x {ny} grid has more than 2^31-1 cells (32-bit indices)"
        )));
    }
    Ok(Dims {
        nx,
        ny,
        iters,
        block,
        gx: (nx - 2).div_ceil(block),
        gy: (ny - 2).div_ceil(block),
    })
}

/// `iters` Jacobi sweeps in plain Rust, in the kernel's order of f32 operations.
fn reference(init: &[f32], d: Dims) -> Vec<f32> {
    let (nx, ny) = (d.nx as usize, d.ny as usize);
    let mut a = init.to_vec();
    let mut b = init.to_vec();
    for _ in 0..d.iters {
        for i in 1..ny - 1 {
            for j in 1..nx - 1 {
                let k = i * nx + j;
                let mut s = a[k] + a[k - nx];
                s += a[k + nx];
                s += a[k - 1];
                s += a[k + 1];
                b[k] = s * 0.2f32;
            }
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}

/// The same address register with a constant byte offset folded into the load
/// (`LDG.E R, [R2.64+0x4]`): no instruction, the lanes' addresses shifted.
fn offset(a: &Val<u64>, bytes: i64) -> Val<u64> {
    Val {
        v: a.v.map(|x| x.wrapping_add_signed(bytes)),
        reg: a.reg,
    }
}

/// Byte ranges of CTA (cx, cy) in the source and destination arrays: the hulls of what it
/// reads (its tile plus the halo: the row above, the row below, the column on each side)
/// and of what it writes (its tile), from the first to the last element touched.
fn cta_ranges(d: Dims, src: u64, dst: u64) -> (Vec<CtaRange>, Vec<CtaRange>) {
    let (nx, b) = (d.nx as u64, d.block as u64);
    let (mut rs, mut ws) = (Vec::new(), Vec::new());
    for cy in 0..d.gy {
        for cx in 0..d.gx {
            let first_cta = cy * d.gx + cx;
            // Interior rows and columns of the tile.
            let (r0, c0) = (1 + cy as u64 * b, 1 + cx as u64 * b);
            let r1 = (cy as u64 * b + b).min(d.ny as u64 - 2);
            let c1 = (cx as u64 * b + b).min(nx - 2);
            // Reads: from (r0-1, c0) (halo row above) to (r1+1, c1) (halo row below).
            rs.push(CtaRange {
                first_cta,
                n_ctas: 1,
                lo: src + ((r0 - 1) * nx + c0) * 4,
                hi: src + ((r1 + 1) * nx + c1 + 1) * 4,
            });
            ws.push(CtaRange {
                first_cta,
                n_ctas: 1,
                lo: dst + (r0 * nx + c0) * 4,
                hi: dst + (r1 * nx + c1 + 1) * 4,
            });
        }
    }
    (rs, ws)
}

/// Records one sweep `src` → `dst`.
fn sweep(rec: &mut Recorder, d: Dims, src: Buffer<f32>, dst: Buffer<f32>) -> Result<(), GenError> {
    let (nx, ny, block) = (d.nx, d.ny, d.block);
    let mut spec = LaunchSpec::new("_Z8jacobi2dPKfPfii", [d.gx, d.gy, 1], [block, block, 1]);
    spec.blocking = false;
    let (rs, ws) = cta_ranges(d, src.base, dst.base);
    spec.annotations = vec![
        ArrayAnnotation {
            name: "in".into(),
            base: src.base,
            bytes: src.bytes(),
            access: Access::Read,
            ranges: rs,
        },
        ArrayAnnotation {
            name: "out".into(),
            base: dst.base,
            bytes: dst.bytes(),
            access: Access::ReadWrite,
            ranges: ws,
        },
    ];
    rec.launch(&spec, &|w| {
        let tx = w.tid(0);
        let ty = w.tid(1);
        let cx = w.ctaid(0);
        let cy = w.ctaid(1);
        let j0 = w.imad_imm(&cx, block, &tx);
        let j = w.iadd_imm(&j0, 1);
        let i0 = w.imad_imm(&cy, block, &ty);
        let i = w.iadd_imm(&i0, 1);
        let pj = w.icmp_imm(Cmp::Ge, &j, nx - 1);
        let pi = w.icmp_imm(Cmp::Ge, &i, ny - 1);
        w.exit_if(Pred(pj.0 | pi.0));
        let k = w.imad_imm(&i, nx, &j);
        let a = w.addr(&src, &k);
        let c = w.ld::<f32>(&a);
        let left = w.ld::<f32>(&offset(&a, -4));
        let right = w.ld::<f32>(&offset(&a, 4));
        let ku = w.iadd_imm(&k, nx.wrapping_neg());
        let up = w.load(&src, &ku);
        let kd = w.iadd_imm(&k, nx);
        let down = w.load(&src, &kd);
        let s = w.fadd(&c, &up);
        let s = w.fadd(&s, &down);
        let s = w.fadd(&s, &left);
        let s = w.fadd(&s, &right);
        // The literal operand of `FMUL R, R, 0.2`: no register, no instruction.
        let fifth = Val {
            v: [0.2f32; WARP],
            reg: RZ,
        };
        let o = w.fmul(&s, &fifth);
        w.store(&dst, &k, &o);
    })?;
    Ok(())
}

/// The recorded result and the reference.
struct Outcome {
    got: Vec<f32>,
    want: Vec<f32>,
    dims: Dims,
}

fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let d = dims(p)?;
    let cells = d.nx as u64 * d.ny as u64;
    let mut rng = SplitMix64(p.u64_any("seed")?);
    let init: Vec<f32> = (0..cells).map(|_| rng.unit_f32()).collect();
    let a = rec.alloc::<f32>("grid_a", cells)?;
    let b = rec.alloc::<f32>("grid_b", cells)?;
    // Both arrays hold the boundary: the kernel never writes it.
    rec.upload(a, &init)?;
    rec.upload(b, &init)?;
    let (mut src, mut dst) = (a, b);
    for _ in 0..d.iters {
        sweep(rec, d, src, dst)?;
        std::mem::swap(&mut src, &mut dst);
    }
    Ok(Outcome {
        got: rec.download(src)?,
        want: reference(&init, d),
        dims: d,
    })
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    let got: Vec<u32> = o.got.iter().map(|x| x.to_bits()).collect();
    let want: Vec<u32> = o.want.iter().map(|x| x.to_bits()).collect();
    check_eq("stencil2d", "grid (f32 bits)", &got, &want)?;
    let d = o.dims;
    Ok(format!(
        "{} Jacobi sweeps of a {} x {} grid verified bit-exact",
        d.iters, d.nx, d.ny
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::generate;
    use tessera_traces::{OpClass, TraceFile};

    use crate::workloads::test_support::{param_error, params};

    /// A grid whose interior (38 x 19) does not tile by 16 in either direction.
    const SMALL: &[(&str, &str)] = &[("nx", "40"), ("ny", "21"), ("iters", "3"), ("seed", "7")];

    #[test]
    fn final_grid_equals_the_reference_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        for kv in [
            SMALL,
            &[("nx", "3"), ("ny", "3"), ("iters", "2")][..],
            &[][..],
        ] {
            let p = Params::parse(&SPEC, &params(kv)).unwrap();
            let mut rec = Recorder::create(&dir.path().join("s.tst"), 80, "test").unwrap();
            let o = compute(&p, &mut rec).unwrap();
            let got: Vec<u32> = o.got.iter().map(|x| x.to_bits()).collect();
            let want: Vec<u32> = o.want.iter().map(|x| x.to_bits()).collect();
            assert_eq!(got, want, "{kv:?}");
            // The sweeps changed the interior (the test is not vacuous).
            let p0 = Params::parse(&SPEC, &params(kv)).unwrap();
            let mut rng = SplitMix64(p0.u64_any("seed").unwrap());
            let init: Vec<f32> = (0..o.got.len()).map(|_| rng.unit_f32()).collect();
            assert_ne!(o.got, init);
        }
    }

    /// Counts by hand: nx = 40, ny = 21, block = 16: the interior is 38 x 19 cells, tiled
    /// by gx = ceil(38/16) = 3 by gy = ceil(19/16) = 2 CTAs of 256 threads = 8 warps, warp
    /// w of a CTA holding tile rows 2w and 2w+1 (all 16 columns of a tile row are in one
    /// warp). Tile row t of CTA row cy is grid row 1 + 16*cy + t, interior iff < 20, so
    /// in CTA row 0 all 8 warps have interior lanes, in CTA row 1 only warps 0 and 1
    /// (rows 17, 18 and 19): W = 3 * (8 + 2) = 30 warps with interior lanes per launch
    /// (every CTA column has an interior column in each warp: 16*cx + 1 < 39). Each such
    /// warp records 5 LDG and 1 STG, so per kernel LoadGlobal = 5 W = 150,
    /// StoreGlobal = W = 30, and over the active lanes 5 * 38 * 19 loads and 38 * 19
    /// stores; kernels = iters = 3. In general W = sum over CTAs and warps of
    /// [the warp has a lane with j < nx-1 and i < ny-1], which the test also evaluates.
    #[test]
    fn counts_follow_the_hand_formula() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tst");
        generate("stencil2d", &params(SMALL), 80, &path).unwrap();
        let t = TraceFile::open(&path).unwrap();
        tessera_traces::verify(&t).unwrap();
        let (nx, ny, b, iters) = (40u32, 21u32, 16u32, 3usize);
        let (gx, gy) = ((nx - 2).div_ceil(b), (ny - 2).div_ceil(b));
        let mut w_int = 0u64;
        for cy in 0..gy {
            for cx in 0..gx {
                for w in 0..(b * b).div_ceil(32) {
                    let interior = (0..32).map(|l| w * 32 + l).any(|th| {
                        let (tx, ty) = (th % b, th / b);
                        th < b * b && 1 + cx * b + tx < nx - 1 && 1 + cy * b + ty < ny - 1
                    });
                    w_int += u64::from(interior);
                }
            }
        }
        assert_eq!(w_int, 30);
        assert_eq!(t.kernels().len(), iters);
        let cells = 38u64 * 19;
        let mut dec = t.decoder();
        for (ki, k) in t.kernels().iter().enumerate() {
            let c = &k.counts;
            assert_eq!(c.ctas, (gx * gy) as u64);
            assert_eq!(c.class_warp_insts[OpClass::LoadGlobal as usize], 5 * w_int);
            assert_eq!(c.class_warp_insts[OpClass::StoreGlobal as usize], w_int);
            let (mut ld_lanes, mut st_lanes) = (0u64, 0u64);
            for cta in 0..c.ctas as u32 {
                let d = dec.kernel_cta(ki, cta).unwrap();
                for i in &d.insts {
                    match i.class {
                        OpClass::LoadGlobal => ld_lanes += i.mask.count_ones() as u64,
                        OpClass::StoreGlobal => st_lanes += i.mask.count_ones() as u64,
                        _ => {}
                    }
                }
            }
            assert_eq!(ld_lanes, 5 * cells);
            assert_eq!(st_lanes, cells);
        }
    }

    /// Each CTA's annotated ranges are exactly the hulls of the addresses it loads (tile
    /// plus halo) and stores (tile), and the arrays swap roles between launches.
    #[test]
    fn annotations_are_the_exact_hulls_of_each_cta() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tst");
        generate("stencil2d", &params(SMALL), 80, &path).unwrap();
        let t = TraceFile::open(&path).unwrap();
        let mut dec = t.decoder();
        for (ki, k) in t.kernels().iter().enumerate() {
            let (rd, wr) = (&k.annotations[0], &k.annotations[1]);
            assert_eq!((rd.access, wr.access), (Access::Read, Access::ReadWrite));
            if ki > 0 {
                let prev = &t.kernels()[ki - 1].annotations;
                assert_eq!((rd.base, wr.base), (prev[1].base, prev[0].base));
            }
            for cta in 0..k.counts.ctas as u32 {
                let d = dec.kernel_cta(ki, cta).unwrap().clone();
                let (mut lo_r, mut hi_r, mut lo_w, mut hi_w) = (u64::MAX, 0, u64::MAX, 0);
                for i in &d.insts {
                    for (_, a) in d.lane_addrs(i) {
                        match i.class {
                            OpClass::LoadGlobal => {
                                lo_r = lo_r.min(a);
                                hi_r = hi_r.max(a + 4);
                            }
                            OpClass::StoreGlobal => {
                                lo_w = lo_w.min(a);
                                hi_w = hi_w.max(a + 4);
                            }
                            _ => {}
                        }
                    }
                }
                let (r, w) = (&rd.ranges[cta as usize], &wr.ranges[cta as usize]);
                assert_eq!(
                    (r.first_cta, r.n_ctas, w.first_cta, w.n_ctas),
                    (cta, 1, cta, 1)
                );
                assert_eq!((r.lo, r.hi), (lo_r, hi_r), "kernel {ki} CTA {cta} reads");
                assert_eq!((w.lo, w.hi), (lo_w, hi_w), "kernel {ki} CTA {cta} writes");
            }
        }
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let err = |kv: &[(&str, &str)]| param_error("stencil2d", kv);
        for kv in [
            &[("bogus", "1")][..],
            &[("nx", "0")],
            &[("iters", "0")],
            &[("block", "0")],
            &[("nx", "2")],
            &[("ny", "1")],
            &[("block", "33")],
            &[("nx", "x")],
        ] {
            let m = err(kv);
            assert!(
                m.contains("valid parameters: nx (default 256), ny (default 256)"),
                "{kv:?}: {m}"
            );
        }
        assert!(err(&[("nx", "2")]).contains("no interior cell"));
        assert!(err(&[("bogus", "1")]).contains("no parameter 'bogus'"));
    }
}
