//! `histogram`: `bins` counters of `n` u32 inputs (`bin = x % bins`, skewed toward low
//! bins), device-scope atomics, grid-stride loop: thread `g` of the `ctas * block` threads
//! handles elements `g, g + stride, g + 2 stride, ...` (`stride = ctas * block`).
//!
//! - `shared=0`: every element is one `atomicAdd(&hist[bin], 1)` with the result unused:
//!   `RED.E.ADD.STRONG.GPU`. Per warp: `MOV` (prologue), `S2R`, `S2R`, `IMAD` (g), `MOV`
//!   (the constant 1), `BSSY`, then per iteration `ISETP` (i < n), `BRA` (lanes leaving),
//!   and for the remaining lanes `IMAD.WIDE`, `LDG.E`, the `% bins` (`LOP3.LUT` for a power
//!   of two, else `IMAD.HI.U32`, `IMAD`), `IMAD.WIDE`, `RED`, `IADD3` (i += stride, in
//!   place); finally `BSYNC`, `EXIT`.
//! - `shared=1`: a privatized histogram in shared memory: the CTA zeroes it (`STS`),
//!   `BAR.SYNC`, counts with `ATOMS.ADD`, `BAR.SYNC`, then flushes every non-zero private
//!   bin with one `RED.E.ADD.STRONG.GPU` of its count.
//!
//! No `MEMBAR.SC.GPU` is needed: the global atomics are device-scope read-modify-writes
//! whose results no thread reads during the kernel (the host reads the bins after the
//! kernel completes, and the kernel boundary orders them), and the shared-memory phases
//! are ordered by `BAR.SYNC`, which orders memory at CTA scope. A fence would be needed
//! only if a CTA read other CTAs' results inside the kernel (a "last CTA finishes the
//! reduction" pattern), which this kernel does not do.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Atom, Cmp, LaunchSpec, Recorder, SharedArr};
use std::cell::Cell;
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "histogram",
    help: "bins of n u32 inputs with device-scope atomics (grid-stride), optionally privatized in shared memory",
    params: &[
        ParamSpec {
            name: "n",
            default: "65536",
            help: "input elements",
        },
        ParamSpec {
            name: "bins",
            default: "256",
            help: "histogram bins (bin = x % bins)",
        },
        ParamSpec {
            name: "block",
            default: "256",
            help: "threads per CTA",
        },
        ParamSpec {
            name: "ctas",
            default: "16",
            help: "CTAs of the grid-stride loop",
        },
        ParamSpec {
            name: "shared",
            default: "0",
            help: "1: privatized histogram in shared memory, flushed with global RED",
        },
        ParamSpec {
            name: "seed",
            default: "1",
            help: "input generator seed",
        },
    ],
    run,
};

/// Static shared memory a kernel may declare without opting in: 48 KiB.
const MAX_STATIC_SHMEM: u32 = 48 * 1024;

/// Validated parameters.
#[derive(Clone, Copy, Debug)]
struct Setup {
    n: u32,
    bins: u32,
    block: u32,
    ctas: u32,
    shared: bool,
    seed: u64,
}

fn setup(p: &Params) -> Result<Setup, GenError> {
    let s = Setup {
        n: p.u32("n")?,
        bins: p.u32("bins")?,
        block: p.u32("block")?,
        ctas: p.u32("ctas")?,
        shared: p.choice("shared", &["0", "1"])? == "1",
        seed: p.u64_any("seed")?,
    };
    if s.block > 1024 {
        return Err(p.invalid("block must be at most 1024 threads"));
    }
    let stride = s.ctas as u64 * s.block as u64;
    if s.n as u64 + stride > u32::MAX as u64 {
        return Err(p.invalid(&format!(
            "n + ctas * block = {} overflows the kernel's 32-bit index",
            s.n as u64 + stride
        )));
    }
    if s.shared && s.bins as u64 * 4 > MAX_STATIC_SHMEM as u64 {
        return Err(p.invalid(&format!(
            "shared=1 keeps {} bins of 4 bytes in shared memory; at most {} bins (48 KiB)",
            s.bins,
            MAX_STATIC_SHMEM / 4
        )));
    }
    Ok(s)
}

/// The inputs: `x % bins` is the smaller of two uniform draws (a linearly decreasing
/// density), the rest of `x` random.
fn inputs(s: &Setup) -> Vec<u32> {
    let mut rng = SplitMix64(s.seed);
    let bins = s.bins as u64;
    let hi = u32::MAX as u64 / bins;
    (0..s.n)
        .map(|_| {
            let b = rng.below(bins).min(rng.below(bins));
            (b + bins * rng.below(hi)) as u32
        })
        .collect()
}

fn reference(x: &[u32], bins: u32) -> Vec<u32> {
    let mut h = vec![0u32; bins as usize];
    for &v in x {
        h[(v % bins) as usize] += 1;
    }
    h
}

/// The recorded bins and the reference.
struct Outcome {
    got: Vec<u32>,
    want: Vec<u32>,
}

fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let s = setup(p)?;
    let x = inputs(&s);
    let input = rec.alloc::<u32>("input", s.n as u64)?;
    let hist = rec.alloc::<u32>("hist", s.bins as u64)?;
    rec.upload(input, &x)?;
    // cudaMemset(hist, 0): the allocation is zero-filled, the copy records the command.
    rec.upload(hist, &vec![0u32; s.bins as usize])?;
    let (n, bins, block) = (s.n, s.bins, s.block);
    let stride = s.ctas * s.block;
    let annotations = vec![
        // Grid-stride: every CTA's elements are spread over the whole input.
        ArrayAnnotation {
            name: "input".into(),
            base: input.base,
            bytes: input.bytes(),
            access: Access::Read,
            ranges: Vec::new(),
        },
        ArrayAnnotation {
            name: "hist".into(),
            base: hist.base,
            bytes: hist.bytes(),
            access: Access::ReadWrite,
            ranges: Vec::new(),
        },
    ];
    if !s.shared {
        let mut spec = LaunchSpec::new("_Z9histogramPKjPjjj", [s.ctas, 1, 1], [block, 1, 1]);
        spec.blocking = false;
        spec.annotations = annotations;
        rec.launch(&spec, &|w| {
            let i = w.global_id_x();
            let one = w.konst(1u32);
            let ic = Cell::new(i);
            w.while_(
                |w| w.icmp_imm(Cmp::Lt, &ic.get(), n),
                |w| {
                    let mut i = ic.get();
                    let v = w.load(&input, &i);
                    let b = w.rem_imm(&v, bins);
                    let a = w.addr(&hist, &b);
                    w.atomic(Atom::Add, &a, &one, false);
                    w.iadd_imm_acc(&mut i, stride);
                    ic.set(i);
                },
            );
        })?;
    } else {
        let mut spec =
            LaunchSpec::new("_Z16histogram_sharedPKjPjjj", [s.ctas, 1, 1], [block, 1, 1]);
        spec.shmem_bytes = bins * 4;
        spec.annotations = annotations;
        let sh = SharedArr::<u32>::new(0, bins);
        rec.launch(&spec, &|w| {
            let t = w.tid(0);
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            // for (j = tid; j < bins; j += blockDim.x) sh[j] = 0;
            let jc = Cell::new(w.mov(&t));
            w.while_(
                |w| w.icmp_imm(Cmp::Lt, &jc.get(), bins),
                |w| {
                    let mut j = jc.get();
                    let a = w.shared_addr(&sh, &j);
                    w.sts(&a, &zero);
                    w.iadd_imm_acc(&mut j, block);
                    jc.set(j);
                },
            );
            w.barrier();
            let c = w.ctaid(0);
            let ic = Cell::new(w.imad_imm(&c, block, &t));
            w.while_(
                |w| w.icmp_imm(Cmp::Lt, &ic.get(), n),
                |w| {
                    let mut i = ic.get();
                    let v = w.load(&input, &i);
                    let b = w.rem_imm(&v, bins);
                    let a = w.shared_addr(&sh, &b);
                    w.atomic_shared_add(&a, &one);
                    w.iadd_imm_acc(&mut i, stride);
                    ic.set(i);
                },
            );
            w.barrier();
            // for (j = tid; j < bins; j += blockDim.x) if (sh[j]) atomicAdd(&hist[j], sh[j]);
            let jc = Cell::new(w.mov(&t));
            w.while_(
                |w| w.icmp_imm(Cmp::Lt, &jc.get(), bins),
                |w| {
                    let mut j = jc.get();
                    let a = w.shared_addr(&sh, &j);
                    let cnt = w.lds::<u32>(&a);
                    let nz = w.icmp_imm(Cmp::Ne, &cnt, 0);
                    w.if_(nz, |w| {
                        let g = w.addr(&hist, &j);
                        w.atomic(Atom::Add, &g, &cnt, false);
                    });
                    w.iadd_imm_acc(&mut j, block);
                    jc.set(j);
                },
            );
        })?;
    }
    Ok(Outcome {
        got: rec.download(hist)?,
        want: reference(&x, bins),
    })
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check_eq("histogram", "hist", &o.got, &o.want)?;
    let total: u64 = o.got.iter().map(|&c| c as u64).sum();
    Ok(format!(
        "{} bins of {total} elements verified (largest bin {})",
        o.got.len(),
        o.got.iter().max().copied().unwrap_or(0)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::generate;
    use tessera_traces::{OpClass, TraceFile};

    use crate::workloads::test_support::{param_error, params};

    /// n = 10000 does not divide by stride = 3 * 128 = 384; 100 bins is not a power of
    /// two (the `IMAD.HI` remainder).
    const SMALL: &[(&str, &str)] = &[
        ("n", "10000"),
        ("bins", "100"),
        ("block", "128"),
        ("ctas", "3"),
        ("seed", "5"),
    ];

    fn with(extra: (&'static str, &'static str)) -> Vec<(&'static str, &'static str)> {
        let mut v = SMALL.to_vec();
        v.push(extra);
        v
    }

    #[test]
    fn bins_equal_the_reference() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            with(("shared", "0")),
            with(("shared", "1")),
            vec![("shared", "0")],
            vec![("shared", "1")],
            vec![
                ("n", "77"),
                ("bins", "3"),
                ("block", "40"),
                ("ctas", "2"),
                ("shared", "1"),
            ],
        ];
        for kv in cases {
            let p = Params::parse(&SPEC, &params(&kv)).unwrap();
            let mut rec = Recorder::create(&dir.path().join("h.tst"), 80, "test").unwrap();
            let o = compute(&p, &mut rec).unwrap();
            assert_eq!(o.got, o.want, "{kv:?}");
            assert_eq!(o.got.iter().sum::<u32>(), p.u32("n").unwrap());
            // Skewed: the lower half of the bins holds most elements.
            let half = o.got.len() / 2;
            let low: u32 = o.got[..half].iter().sum();
            let high: u32 = o.got[o.got.len() - half..].iter().sum();
            assert!(low > high, "{kv:?}: {low} <= {high}");
        }
    }

    /// Per-instruction sums over the Reduction class of every warp of the trace:
    /// (RED warp instructions, active lanes, sum of recorded operands).
    fn reductions(path: &std::path::Path) -> (u64, u64, u64, u64) {
        let t = TraceFile::open(path).unwrap();
        tessera_traces::verify(&t).unwrap();
        let k = &t.kernels()[0];
        let mut dec = t.decoder();
        let (mut insts, mut lanes, mut ops, mut shared_lanes) = (0u64, 0u64, 0u64, 0u64);
        for cta in 0..k.counts.ctas as u32 {
            let d = dec.kernel_cta(0, cta).unwrap();
            for (x, i) in d.insts.iter().enumerate() {
                match i.class {
                    OpClass::Reduction => {
                        insts += 1;
                        lanes += i.mask.count_ones() as u64;
                        ops += d.operands_of(x, 1).unwrap().iter().sum::<u64>();
                    }
                    OpClass::AtomicShared => shared_lanes += i.mask.count_ones() as u64,
                    _ => {}
                }
            }
        }
        assert_eq!(
            k.counts.class_warp_insts[OpClass::Reduction as usize],
            insts
        );
        (insts, lanes, ops, shared_lanes)
    }

    /// shared=0, by hand: n = 10000, stride = 384, 12 warps; warp w (threads 32w..32w+31)
    /// runs loop iteration k with an active lane iff 32w + 384k < n, i.e.
    /// ceil((n - 32w) / 384) iterations: warp 0 has 27 (26 * 384 = 9984 < 10000), warps
    /// 1..11 have 26 (32 + 9984 >= 10000): one RED per (warp, iteration) pair = 27 + 11 * 26
    /// = 313 RED instructions, whose active lanes sum to n = 10000 (each element once),
    /// every operand 1.
    #[test]
    fn global_reductions_follow_the_hand_formula() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.tst");
        generate("histogram", &params(&with(("shared", "0"))), 80, &path).unwrap();
        let (n, stride) = (10000u64, 384u64);
        let pairs: u64 = (0..12u64)
            .filter(|w| 32 * w < n)
            .map(|w| (n - 32 * w).div_ceil(stride))
            .sum();
        assert_eq!(pairs, 313);
        assert_eq!(reductions(&path), (pairs, n, n, 0));
    }

    /// shared=1, by hand: every element is one ATOMS lane (n lanes in all); the flush
    /// issues, per CTA, one RED lane per non-zero private bin, with the bin's count as
    /// operand: the RED lanes are the sum over CTAs of their distinct bins, the operands
    /// sum to n. With 100 bins and a 128-thread CTA, the flush loop runs one iteration, so
    /// each warp with a non-zero bin among its lanes records one RED.
    #[test]
    fn shared_flush_follows_the_hand_formula() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.tst");
        generate("histogram", &params(&with(("shared", "1"))), 80, &path).unwrap();
        let p = Params::parse(&SPEC, &params(&with(("shared", "1")))).unwrap();
        let s = setup(&p).unwrap();
        let x = inputs(&s);
        let stride = (s.ctas * s.block) as usize;
        let mut seen = vec![vec![false; s.bins as usize]; s.ctas as usize];
        for (e, v) in x.iter().enumerate() {
            seen[e % stride / s.block as usize][(v % s.bins) as usize] = true;
        }
        let red_lanes: u64 = seen.iter().flatten().map(|&b| b as u64).sum();
        let red_warps: u64 = seen
            .iter()
            .flat_map(|c| c.chunks(32))
            .map(|w| w.iter().any(|&b| b) as u64)
            .sum();
        let n = s.n as u64;
        assert_eq!(reductions(&path), (red_warps, red_lanes, n, n));
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let err = |kv: &[(&str, &str)]| param_error("histogram", kv);
        for kv in [
            &[("bogus", "1")][..],
            &[("n", "0")],
            &[("bins", "0")],
            &[("block", "0")],
            &[("ctas", "0")],
            &[("shared", "2")],
            &[("block", "1025")],
            &[("shared", "1"), ("bins", "20000")],
            &[("n", "4294967295")],
        ] {
            let m = err(kv);
            assert!(
                m.contains("valid parameters: n (default 65536), bins (default 256)"),
                "{kv:?}: {m}"
            );
        }
        assert!(err(&[("bogus", "1")]).contains("no parameter 'bogus'"));
        assert!(err(&[("n", "0")]).contains("must be at least 1"));
    }
}
