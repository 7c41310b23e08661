//! `vectoradd`: `c[i] = a[i] + b[i]`, the CUDA sample the bundled real trace comes from.
//!
//! Per warp, as recorded (compare the sm_80 trace in ../shared/traces/accelsim-vectoradd,
//! which has 17 instructions per in-range warp because nvcc also materializes the element
//! size and a uniform parameter; this kernel has 14):
//! `MOV` (prologue), `S2R`, `S2R`, `IMAD` (i), `ISETP.GE.U32.AND` (i >= n), `@P0 EXIT`
//! (lanes past n), then for warps with a lane in range `IMAD.WIDE`, `LDG.E`, `IMAD.WIDE`,
//! `LDG.E`, `FADD`, `IMAD.WIDE`, `STG.E`, `EXIT`.

use super::{block_ranges, check_eq_from, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Buffer, Cmp, LaunchSpec, Recorder};
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "vectoradd",
    help: "c[i] = a[i] + b[i] over n floats (the CUDA sample)",
    params: &[
        ParamSpec {
            name: "n",
            default: "50000",
            help: "elements",
        },
        ParamSpec {
            name: "block",
            default: "256",
            help: "threads per CTA",
        },
        ParamSpec {
            name: "seed",
            default: "1",
            help: "input generator seed",
        },
    ],
    run,
};

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let n = p.u32("n")?;
    let block = p.u32("block")?;
    if block > 1024 {
        return Err(p.invalid("block must be at most 1024 threads"));
    }
    // Inputs are generated straight into device memory and the result is checked piece
    // by piece, so that host memory is the device arrays alone (768 MiB at n = 64 Mi).
    let seed = p.u64_any("seed")?;
    let mut rng = SplitMix64(seed);
    let a = rec.alloc::<f32>("a", n as u64)?;
    let b = rec.alloc::<f32>("b", n as u64)?;
    let c = rec.alloc::<f32>("c", n as u64)?;
    rec.upload_iter(a, (0..n).map(|_| rng.unit_f32()))?;
    rec.upload_iter(b, (0..n).map(|_| rng.unit_f32()))?;
    let ctas = n.div_ceil(block);
    let mut spec = LaunchSpec::new("_Z9vectorAddPKfS0_Pfi", [ctas, 1, 1], [block, 1, 1]);
    spec.blocking = false;
    spec.annotations = vec![
        ArrayAnnotation {
            name: "a".into(),
            base: a.base,
            bytes: a.bytes(),
            access: Access::Read,
            ranges: block_ranges(&a, block, ctas),
        },
        ArrayAnnotation {
            name: "b".into(),
            base: b.base,
            bytes: b.bytes(),
            access: Access::Read,
            ranges: block_ranges(&b, block, ctas),
        },
        ArrayAnnotation {
            name: "c".into(),
            base: c.base,
            bytes: c.bytes(),
            access: Access::ReadWrite,
            ranges: block_ranges(&c, block, ctas),
        },
    ];
    rec.launch(&spec, &|w| {
        let i = w.global_id_x();
        let out = w.icmp_imm(Cmp::Ge, &i, n);
        w.exit_if(out);
        let x = w.load(&a, &i);
        let y = w.load(&b, &i);
        let s = w.fadd(&x, &y);
        w.store(&c, &i, &s);
    })?;
    check(rec, c, seed, 1 << 20)?;
    Ok(format!("c = a + b verified for {n} elements"))
}

/// Checks `c` against the reference, `piece` elements at a time. The reference
/// regenerates a and b from the seed (a's n values, then b's) as `run` uploaded them.
fn check(rec: &mut Recorder, c: Buffer<f32>, seed: u64, piece: u64) -> Result<(), GenError> {
    let n = c.len;
    let mut ra = SplitMix64(seed);
    let mut rb = SplitMix64(seed);
    for _ in 0..n {
        rb.next_u64();
    }
    let mut first = 0u64;
    while first < n {
        let len = piece.max(1).min(n - first);
        let got = rec.download_range(c, first, len)?;
        let want: Vec<f32> = (0..len).map(|_| ra.unit_f32() + rb.unit_f32()).collect();
        check_eq_from("vectoradd", "c", first, &got, &want)?;
        first += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::record::Recorder;
    use crate::workloads::{generate, GenError, SplitMix64};

    /// The piecewise check passes on the right result and names the first wrong
    /// element by its index in the whole array.
    #[test]
    fn the_check_goes_piece_by_piece() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::create(&dir.path().join("c.tst"), 80, "test").unwrap();
        let (n, seed) = (1000u64, 7u64);
        let mut rng = SplitMix64(seed);
        let a: Vec<f32> = (0..n).map(|_| rng.unit_f32()).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.unit_f32()).collect();
        let mut sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let c = rec.alloc::<f32>("c", n).unwrap();
        rec.upload(c, &sum).unwrap();
        for piece in [1, 64, 999, 1000, 5000] {
            check(&mut rec, c, seed, piece).unwrap();
        }
        sum[777] += 1.0;
        rec.upload(c, &sum).unwrap();
        for piece in [64, 1000] {
            match check(&mut rec, c, seed, piece) {
                Err(GenError::Mismatch { detail, .. }) => {
                    assert!(detail.starts_with("c[777] = "), "{detail}")
                }
                other => panic!("expected a mismatch, got {other:?}"),
            }
        }
    }
    use tessera_traces::{Addrs, OpClass, TraceFile};

    /// Counts by hand, from the instruction sequence in the module docs: a warp whose
    /// first thread index `f` is below `n` records 14 instructions: 5 with all 32 lanes
    /// (MOV, S2R, S2R, IMAD, ISETP), the `@P0 EXIT` with the `32 - k` lanes past the end,
    /// and 8 with the `k = min(32, n - f)` lanes in range; a warp past the end records 6
    /// (the same 5 and an EXIT of all 32 lanes).
    #[test]
    fn counts_and_addresses_match_the_hand_formula() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("va.tst");
        let (n, block) = (1000u64, 128u64);
        let params = [
            ("n".to_string(), n.to_string()),
            ("block".to_string(), block.to_string()),
        ];
        generate("vectoradd", &params, 80, &path).unwrap();
        let t = TraceFile::open(&path).unwrap();
        let k = &t.kernels()[0];
        let ctas = n.div_ceil(block);
        let warps = ctas * block / 32;
        let (mut wi, mut ti, mut loads) = (0u64, 0u64, 0u64);
        for w in 0..warps {
            let f = w * 32;
            if f < n {
                let kk = (n - f).min(32);
                wi += 14;
                ti += 5 * 32 + (32 - kk) + 8 * kk;
                loads += 2;
            } else {
                wi += 6;
                ti += 5 * 32 + 32;
            }
        }
        assert_eq!(k.counts.ctas, ctas);
        assert_eq!(k.counts.warps, warps);
        assert_eq!(k.counts.warp_insts, wi);
        assert_eq!(k.counts.thread_insts, ti);
        assert_eq!(
            k.counts.class_warp_insts[OpClass::LoadGlobal as usize],
            loads
        );
        assert_eq!(
            k.counts.class_warp_insts[OpClass::StoreGlobal as usize],
            loads / 2
        );
        // Every global access of thread i is element i of its array: a stride-4 run from
        // base + 4 * (first active thread).
        let bases: Vec<u64> = t
            .commands()
            .iter()
            .filter_map(|c| match c {
                tessera_traces::Command::Alloc { addr, .. } => Some(*addr),
                _ => None,
            })
            .collect();
        assert_eq!(bases.len(), 3);
        let mut dec = t.decoder();
        for cta in 0..ctas as u32 {
            let d = dec.kernel_cta(0, cta).unwrap().clone();
            for (wpos, w) in d.warps.iter().enumerate() {
                let f = cta as u64 * block + wpos as u64 * 32;
                for inst in &d.insts[w.insts.clone()] {
                    if !inst.class.is_memory() || inst.mask == 0 {
                        continue;
                    }
                    let Addrs::Stride { base, stride } = inst.addrs else {
                        panic!("vectoradd accesses are stride-coded");
                    };
                    assert_eq!(stride, 4);
                    assert!(
                        bases.iter().any(|b| base == b + 4 * f),
                        "base {base:#x} for thread {f}"
                    );
                }
            }
        }
    }
}
