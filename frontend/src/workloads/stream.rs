//! `stream`: the BabelStream kernels (Deakin et al.) on f64 arrays, in BabelStream order:
//! copy `c = a`, mul `b = scalar * c`, add `c = a + b`, triad `a = b + scalar * c`, dot
//! `sum(a * b)`, with `scalar = 0.4` as in BabelStream. The CUDA version's kernels, one
//! thread per element, with a bound check so that any `n` works (BabelStream requires `n`
//! to be a multiple of the block size instead).
//!
//! Per warp, as recorded: `MOV` (prologue), `S2R`, `S2R`, `IMAD` (i), `ISETP.GE.U32.AND`,
//! `@P0 EXIT` (lanes past n), then for warps with a lane in range:
//! - copy: `IMAD.WIDE`, `LDG.E.64`, `IMAD.WIDE`, `STG.E.64`, `EXIT`;
//! - mul: `IMAD.WIDE`, `LDG.E.64`, `DMUL` (the scalar is a constant-bank operand),
//!   `IMAD.WIDE`, `STG.E.64`, `EXIT`;
//! - add: `IMAD.WIDE`, `LDG.E.64`, `IMAD.WIDE`, `LDG.E.64`, `DADD`, `IMAD.WIDE`,
//!   `STG.E.64`, `EXIT`;
//! - triad: the same with `DFMA` (nvcc contracts `b + scalar * c`) in place of `DADD`.
//!
//! dot follows BabelStream's `dot_kernel`: `dot_ctas` CTAs; each thread accumulates
//! `a[i] * b[i]` over a grid-stride loop in a register (`DFMA`), stores it to shared
//! memory, then a tree reduction halves the active threads with a `BAR.SYNC` before each
//! step, and thread 0 writes the CTA's partial sum to `sums[blockIdx.x]`; the host adds
//! the partials in CTA order (BabelStream's choice too: deterministic, no atomics). Per
//! warp: `MOV`, `S2R` (tid), `S2R` (ctaid), `IMAD` (i), `LEA` (&tb_sum[tid]), `MOV`
//! (acc = 0), `BSSY`, per loop iteration `ISETP.LT.U32.AND`, `BRA` (lanes leaving),
//! `IMAD.WIDE`, `LDG.E.64`, `IMAD.WIDE`, `LDG.E.64`, `DFMA`, `IADD3` (i += stride), and a
//! last `ISETP`, `BRA`; `BSYNC`, `STS.64`; per reduction step `BAR.SYNC`,
//! `ISETP.LT.U32.AND`, `BSSY`, `BRA`, for warps with a lane below the offset `LDS.64`,
//! `IADD3`, `LEA`, `LDS.64`, `DADD`, `STS.64`, then `BSYNC`; finally `ISETP.EQ.U32.AND`,
//! `BSSY`, `BRA`, in warp 0 `LDS.64`, `IMAD.WIDE`, `STG.E.64` (lane 0), `BSYNC`, `EXIT`.
//!
//! The reference applies the same operations in the same order (fused multiply-adds
//! included), so every array, every partial sum and the dot product match bit for bit.

use super::{block_ranges, check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Buffer, Cmp, LaunchSpec, Recorder, SharedArr};
use std::cell::Cell;
use tessera_traces::{Access, ArrayAnnotation, CtaRange};

/// BabelStream's `startScalar`.
pub const SCALAR: f64 = 0.4;

/// The kernels, in BabelStream (and launch) order.
pub const KERNELS: [&str; 5] = ["copy", "mul", "add", "triad", "dot"];

/// Largest `n`: 2 GiB per array, and every index fits in 32 bits with room for a stride.
const MAX_N: u32 = 1 << 28;
/// Largest `dot_ctas` (CUDA's limit on gridDim.y; keeps the grid stride within 32 bits).
const MAX_DOT_CTAS: u32 = 65535;

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "stream",
    help: "BabelStream copy, mul, add, triad and dot over n doubles",
    params: &[
        ParamSpec {
            name: "n",
            default: "65536",
            help: "elements per array",
        },
        ParamSpec {
            name: "block",
            default: "256",
            help: "threads per CTA (a power of two when dot runs)",
        },
        ParamSpec {
            name: "dot_ctas",
            default: "64",
            help: "CTAs of the dot kernel (grid-stride loop; BabelStream uses 256)",
        },
        ParamSpec {
            name: "kernels",
            default: "all",
            help: "all, or a comma list of copy,mul,add,triad,dot (run in that order)",
        },
        ParamSpec {
            name: "seed",
            default: "1",
            help: "input generator seed",
        },
    ],
    run,
};

/// Validated parameters.
#[derive(Clone, Copy, Debug)]
struct Config {
    n: u32,
    block: u32,
    dot_ctas: u32,
    seed: u64,
    /// Which of [`KERNELS`] run.
    run: [bool; 5],
}

fn config(p: &Params) -> Result<Config, GenError> {
    let n = p.u32("n")?;
    let block = p.u32("block")?;
    let dot_ctas = p.u32("dot_ctas")?;
    let seed = p.u64_any("seed")?;
    if n > MAX_N {
        return Err(p.invalid(&format!("n={n} is more than {MAX_N} elements")));
    }
    if block > 1024 {
        return Err(p.invalid(&format!("block={block}: at most 1024 threads per CTA")));
    }
    if dot_ctas > MAX_DOT_CTAS {
        return Err(p.invalid(&format!("dot_ctas={dot_ctas}: at most {MAX_DOT_CTAS}")));
    }
    let run = selection(p)?;
    if run[4] && !block.is_power_of_two() {
        return Err(p.invalid(&format!(
            "block={block}: the dot kernel's tree reduction needs a power of two"
        )));
    }
    Ok(Config {
        n,
        block,
        dot_ctas,
        seed,
        run,
    })
}

/// The `kernels` parameter: `all` or a comma list of kernel names.
fn selection(p: &Params) -> Result<[bool; 5], GenError> {
    let raw = p.str("kernels")?;
    if raw == "all" {
        return Ok([true; 5]);
    }
    let mut run = [false; 5];
    for item in raw.split(',') {
        let item = item.trim();
        match KERNELS.iter().position(|k| *k == item) {
            Some(i) => run[i] = true,
            None => {
                return Err(p.invalid(&format!(
                    "kernels={raw}: unknown kernel '{item}'; expected all or a comma list of {}",
                    KERNELS.join(", ")
                )))
            }
        }
    }
    Ok(run)
}

/// Array contents after the selected kernels ran.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Arrays {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub c: Vec<f64>,
    /// Per-CTA partial sums of dot (empty when dot did not run).
    pub partials: Vec<f64>,
    /// The dot product, summed on the host in CTA order.
    pub dot: Option<f64>,
}

/// The functional result (`got`) and the reference (`want`).
pub(crate) struct Outcome {
    pub got: Arrays,
    pub want: Arrays,
}

/// Uniform in `[0, 1)` with 53 bits.
fn unit_f64(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn annotation(
    name: &str,
    buf: Buffer<f64>,
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

/// Records the selected kernels and returns their result with the reference.
pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let cfg = config(p)?;
    let Config {
        n, block, dot_ctas, ..
    } = cfg;
    let mut rng = SplitMix64(cfg.seed);
    let a_h: Vec<f64> = (0..n).map(|_| unit_f64(&mut rng)).collect();
    let b_h: Vec<f64> = (0..n).map(|_| unit_f64(&mut rng)).collect();
    let c_h: Vec<f64> = (0..n).map(|_| unit_f64(&mut rng)).collect();
    let a = rec.alloc::<f64>("a", n as u64)?;
    let b = rec.alloc::<f64>("b", n as u64)?;
    let c = rec.alloc::<f64>("c", n as u64)?;
    rec.upload(a, &a_h)?;
    rec.upload(b, &b_h)?;
    rec.upload(c, &c_h)?;
    let ctas = n.div_ceil(block);
    let ann = |name: &str, buf: Buffer<f64>, access: Access| {
        annotation(name, buf, access, block_ranges(&buf, block, ctas))
    };
    let elementwise = |name: &str, anns: Vec<ArrayAnnotation>| {
        let mut spec = LaunchSpec::new(name, [ctas, 1, 1], [block, 1, 1]);
        spec.blocking = false;
        spec.annotations = anns;
        spec
    };
    let mut want = Arrays {
        a: a_h,
        b: b_h,
        c: c_h,
        partials: Vec::new(),
        dot: None,
    };
    let mut partials_got = Vec::new();
    let mut dot_got = None;

    if cfg.run[0] {
        let spec = elementwise(
            "_Z11copy_kernelIdEvPKT_PS0_",
            vec![ann("a", a, Access::Read), ann("c", c, Access::ReadWrite)],
        );
        rec.launch(&spec, &|w| {
            let i = w.global_id_x();
            let out = w.icmp_imm(Cmp::Ge, &i, n);
            w.exit_if(out);
            let x = w.load(&a, &i);
            w.store(&c, &i, &x);
        })?;
        want.c.copy_from_slice(&want.a);
    }
    if cfg.run[1] {
        let spec = elementwise(
            "_Z10mul_kernelIdEvPT_PKS0_",
            vec![ann("b", b, Access::ReadWrite), ann("c", c, Access::Read)],
        );
        rec.launch(&spec, &|w| {
            let i = w.global_id_x();
            let out = w.icmp_imm(Cmp::Ge, &i, n);
            w.exit_if(out);
            let x = w.load(&c, &i);
            let y = w.fmul_param(&x, SCALAR);
            w.store(&b, &i, &y);
        })?;
        for (b, c) in want.b.iter_mut().zip(&want.c) {
            *b = SCALAR * c;
        }
    }
    if cfg.run[2] {
        let spec = elementwise(
            "_Z10add_kernelIdEvPKT_S2_PS0_",
            vec![
                ann("a", a, Access::Read),
                ann("b", b, Access::Read),
                ann("c", c, Access::ReadWrite),
            ],
        );
        rec.launch(&spec, &|w| {
            let i = w.global_id_x();
            let out = w.icmp_imm(Cmp::Ge, &i, n);
            w.exit_if(out);
            let x = w.load(&a, &i);
            let y = w.load(&b, &i);
            let s = w.fadd(&x, &y);
            w.store(&c, &i, &s);
        })?;
        for ((c, a), b) in want.c.iter_mut().zip(&want.a).zip(&want.b) {
            *c = a + b;
        }
    }
    if cfg.run[3] {
        let spec = elementwise(
            "_Z12triad_kernelIdEvPT_PKS0_S3_",
            vec![
                ann("a", a, Access::ReadWrite),
                ann("b", b, Access::Read),
                ann("c", c, Access::Read),
            ],
        );
        rec.launch(&spec, &|w| {
            let i = w.global_id_x();
            let out = w.icmp_imm(Cmp::Ge, &i, n);
            w.exit_if(out);
            let x = w.load(&b, &i);
            let y = w.load(&c, &i);
            let s = w.ffma_param(&y, SCALAR, &x);
            w.store(&a, &i, &s);
        })?;
        for ((a, b), c) in want.a.iter_mut().zip(&want.b).zip(&want.c) {
            *a = c.mul_add(SCALAR, *b);
        }
    }
    if cfg.run[4] {
        let sums = rec.alloc::<f64>("sums", dot_ctas as u64)?;
        let stride = dot_ctas * block;
        let tb = SharedArr::<f64>::new(0, block);
        let mut spec = LaunchSpec::new(
            "_Z10dot_kernelIdEvPKT_S2_PS0_i",
            [dot_ctas, 1, 1],
            [block, 1, 1],
        );
        spec.shmem_bytes = tb.end();
        spec.annotations = vec![
            // Grid-stride: every CTA reads across the whole of a and b.
            annotation("a", a, Access::Read, Vec::new()),
            annotation("b", b, Access::Read, Vec::new()),
            annotation(
                "sums",
                sums,
                Access::ReadWrite,
                block_ranges(&sums, 1, dot_ctas),
            ),
        ];
        rec.launch(&spec, &|w| {
            let t = w.tid(0);
            let cta = w.ctaid(0);
            let i = Cell::new(w.imad_imm(&cta, block, &t));
            let slot = w.shared_addr(&tb, &t);
            let mut acc = w.konst(0.0f64);
            w.while_(
                |w| w.icmp_imm(Cmp::Lt, &i.get(), n),
                |w| {
                    let x = w.load(&a, &i.get());
                    let y = w.load(&b, &i.get());
                    w.ffma_acc(&mut acc, &x, &y);
                    i.set(w.iadd_imm(&i.get(), stride));
                },
            );
            w.sts(&slot, &acc);
            let mut s = block / 2;
            while s > 0 {
                w.barrier();
                let p = w.icmp_imm(Cmp::Lt, &t, s);
                w.if_(p, |w| {
                    let x = w.lds::<f64>(&slot);
                    let o = w.iadd_imm(&t, s);
                    let q = w.shared_addr(&tb, &o);
                    let y = w.lds::<f64>(&q);
                    let z = w.fadd(&x, &y);
                    w.sts(&slot, &z);
                });
                s /= 2;
            }
            let first = w.icmp_imm(Cmp::Eq, &t, 0);
            w.if_(first, |w| {
                let x = w.lds::<f64>(&slot);
                w.store(&sums, &cta, &x);
            });
        })?;
        partials_got = rec.download(sums)?;
        dot_got = Some(partials_got.iter().fold(0.0, |s, x| s + x));
        want.partials = dot_reference(&want.a, &want.b, block, dot_ctas);
        want.dot = Some(want.partials.iter().fold(0.0, |s, x| s + x));
    }
    let got = Arrays {
        a: rec.download(a)?,
        b: rec.download(b)?,
        c: rec.download(c)?,
        partials: partials_got,
        dot: dot_got,
    };
    Ok(Outcome { got, want })
}

/// Per-CTA partial sums of the dot kernel, in its order: each thread's grid-stride
/// `fma` chain, then the shared-memory tree.
fn dot_reference(a: &[f64], b: &[f64], block: u32, ctas: u32) -> Vec<f64> {
    let (n, block) = (a.len(), block as usize);
    let stride = block * ctas as usize;
    (0..ctas as usize)
        .map(|c| {
            let mut tb: Vec<f64> = (0..block)
                .map(|t| {
                    (c * block + t..n)
                        .step_by(stride)
                        .fold(0.0, |acc, i| a[i].mul_add(b[i], acc))
                })
                .collect();
            let mut s = block / 2;
            while s > 0 {
                for t in 0..s {
                    tb[t] += tb[t + s];
                }
                s /= 2;
            }
            tb[0]
        })
        .collect()
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check_eq("stream", "a", &o.got.a, &o.want.a)?;
    check_eq("stream", "b", &o.got.b, &o.want.b)?;
    check_eq("stream", "c", &o.got.c, &o.want.c)?;
    check_eq("stream", "sums", &o.got.partials, &o.want.partials)?;
    let got_dot: Vec<f64> = o.got.dot.into_iter().collect();
    let want_dot: Vec<f64> = o.want.dot.into_iter().collect();
    check_eq("stream", "dot", &got_dot, &want_dot)?;
    let ran: Vec<&str> = KERNELS
        .iter()
        .zip(config(p)?.run)
        .filter_map(|(k, r)| r.then_some(*k))
        .collect();
    let n = o.got.a.len();
    Ok(match o.got.dot {
        Some(d) => format!(
            "{} verified for {n} elements (dot = {d:.6e})",
            ran.join(", ")
        ),
        None => format!("{} verified for {n} elements", ran.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::{compute, SPEC};
    use crate::record::Recorder;
    use crate::workloads::{generate, GenError, Params};
    use tessera_traces::{KernelMeta, OpClass, TraceFile};

    use crate::workloads::test_support::params;

    /// The recorded run equals the plain Rust reference, bit for bit, for every array,
    /// every partial sum and the dot product.
    #[test]
    fn result_equals_reference() {
        let d = tempfile::tempdir().unwrap();
        for kv in [
            &[("n", "1000"), ("block", "64"), ("dot_ctas", "3")][..],
            &[
                ("n", "4096"),
                ("block", "128"),
                ("dot_ctas", "4"),
                ("seed", "7"),
            ][..],
            &[("n", "77"), ("block", "32"), ("kernels", "triad, dot")][..],
        ] {
            let p = Params::parse(&SPEC, &params(kv)).unwrap();
            let mut rec = Recorder::create(&d.path().join("s.tst"), 80, "test").unwrap();
            let o = compute(&p, &mut rec).unwrap();
            assert_eq!(o.got, o.want, "{kv:?}");
            assert!(o.got.dot.is_some());
            assert_eq!(o.got.partials.len(), o.want.partials.len());
        }
    }

    fn class(k: &KernelMeta, c: OpClass) -> u64 {
        k.counts.class_warp_insts[c as usize]
    }

    /// Counts by hand from the sequences in the module docs, for `n` not a multiple of the
    /// block (partial warps, warps past the end) and a dot grid stride that does not
    /// divide `n` (lanes that loop once more than others).
    #[test]
    fn counts_match_the_hand_formulas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tst");
        let (n, block, dot_ctas) = (1000u64, 64u64, 3u64);
        let p = params(&[("n", "1000"), ("block", "64"), ("dot_ctas", "3")]);
        generate("stream", &p, 80, &path).unwrap();
        let t = TraceFile::open(&path).unwrap();
        let ks = t.kernels();
        assert_eq!(ks.len(), 5);

        // Elementwise kernels: a warp whose first thread f is below n records 6 + B
        // instructions: 5 with all 32 lanes (MOV, S2R, S2R, IMAD, ISETP), @P0 EXIT with
        // the 32 - k lanes past n, and B with the k = min(32, n - f) lanes in range
        // (B = 5 for copy, 6 for mul, 8 for add and triad); a warp past the end records
        // 6 (the same 5 and an EXIT of 32 lanes). Loads L (1, 1, 2, 2), one store and F
        // FP64 instructions (0, 1, 1, 1) per warp in range.
        let ctas = n.div_ceil(block);
        let warps = ctas * block / 32;
        for (ki, (body, loads, fp64)) in [(5u64, 1u64, 0u64), (6, 1, 1), (8, 2, 1), (8, 2, 1)]
            .into_iter()
            .enumerate()
        {
            let k = &ks[ki];
            let (mut wi, mut ti, mut in_range) = (0u64, 0u64, 0u64);
            for w in 0..warps {
                let f = w * 32;
                if f < n {
                    let kk = (n - f).min(32);
                    wi += 6 + body;
                    ti += 5 * 32 + (32 - kk) + body * kk;
                    in_range += 1;
                } else {
                    wi += 6;
                    ti += 5 * 32 + 32;
                }
            }
            assert_eq!(k.counts.ctas, ctas, "kernel {ki}");
            assert_eq!(k.counts.warps, warps, "kernel {ki}");
            assert_eq!(k.counts.warp_insts, wi, "kernel {ki}");
            assert_eq!(k.counts.thread_insts, ti, "kernel {ki}");
            assert_eq!(
                class(k, OpClass::LoadGlobal),
                loads * in_range,
                "kernel {ki}"
            );
            assert_eq!(class(k, OpClass::StoreGlobal), in_range, "kernel {ki}");
            assert_eq!(class(k, OpClass::Fp64), fp64 * in_range, "kernel {ki}");
            assert_eq!(class(k, OpClass::LoadShared), 0);
            assert_eq!(class(k, OpClass::StoreShared), 0);
            assert_eq!(class(k, OpClass::Barrier), 0);
        }

        // dot: lane with global index g loops it(g) = ceil((n - g) / S) times (0 past n),
        // S = dot_ctas * block; J = max over the warp. Per warp:
        // - 6 full-lane instructions (MOV, S2R, S2R, IMAD, LEA, MOV), BSSY, BSYNC, STS.64,
        //   final ISETP, BSSY, BSYNC, EXIT: 13 with 32 lanes;
        // - loop: for j in 0..=J an ISETP with #{it >= j} lanes and a BRA with #{it == j};
        //   for j in 0..J six body instructions with #{it > j} lanes (2 LDG, 1 DFMA);
        // - per reduction step s = block/2 .. 1: BAR, ISETP, BSSY, BSYNC with 32 lanes,
        //   BRA with #{tid >= s} lanes, and when #{tid < s} > 0 six instructions with
        //   those lanes (2 LDS, 1 STS, 1 DADD);
        // - final BRA with the lanes other than thread 0; in warp 0 LDS, IMAD.WIDE, STG
        //   with lane 0.
        let k = &ks[4];
        let s_total = dot_ctas * block;
        let steps = block.trailing_zeros() as u64;
        let (mut wi, mut ti) = (0u64, 0u64);
        let (mut ldg, mut lds, mut sts, mut fp64) = (0u64, 0u64, 0u64, 0u64);
        for c in 0..dot_ctas {
            for w in 0..block / 32 {
                let it: Vec<u64> = (0..32)
                    .map(|l| {
                        let g = c * block + w * 32 + l;
                        if g < n {
                            (n - g).div_ceil(s_total)
                        } else {
                            0
                        }
                    })
                    .collect();
                let big_j = *it.iter().max().unwrap();
                let count = |f: &dyn Fn(u64) -> bool| it.iter().filter(|&&x| f(x)).count() as u64;
                wi += 13;
                ti += 13 * 32;
                sts += 1;
                for j in 0..=big_j {
                    wi += 2;
                    ti += count(&|x| x >= j) + count(&|x| x == j);
                }
                for j in 0..big_j {
                    wi += 6;
                    ti += 6 * count(&|x| x > j);
                    ldg += 2;
                    fp64 += 1;
                }
                for st in 0..steps {
                    let s = block >> (st + 1);
                    let below = (0..32).filter(|l| w * 32 + l < s).count() as u64;
                    wi += 5;
                    ti += 4 * 32 + (32 - below);
                    if below > 0 {
                        wi += 6;
                        ti += 6 * below;
                        lds += 2;
                        sts += 1;
                        fp64 += 1;
                    }
                }
                let lane0 = u64::from(w == 0);
                wi += 1 + 3 * lane0;
                ti += 32 - lane0 + 3 * lane0;
                lds += lane0;
            }
        }
        assert_eq!(k.counts.ctas, dot_ctas);
        assert_eq!(k.counts.warps, dot_ctas * block / 32);
        assert_eq!(k.counts.warp_insts, wi);
        assert_eq!(k.counts.thread_insts, ti);
        assert_eq!(class(k, OpClass::LoadGlobal), ldg);
        assert_eq!(class(k, OpClass::StoreGlobal), dot_ctas);
        assert_eq!(class(k, OpClass::LoadShared), lds);
        assert_eq!(class(k, OpClass::StoreShared), sts);
        assert_eq!(class(k, OpClass::Fp64), fp64);
        assert_eq!(class(k, OpClass::Barrier), dot_ctas * block / 32 * steps);
        assert_eq!(k.shmem_bytes, (block * 8) as u32);
    }

    /// Only the selected kernels are launched, in BabelStream order.
    #[test]
    fn kernel_selection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tst");
        let p = params(&[("n", "256"), ("kernels", "dot,copy")]);
        let r = generate("stream", &p, 80, &path).unwrap();
        assert!(r.summary.starts_with("copy, dot verified"), "{}", r.summary);
        let t = TraceFile::open(&path).unwrap();
        let names: Vec<&str> = t.kernels().iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "_Z11copy_kernelIdEvPKT_PS0_",
                "_Z10dot_kernelIdEvPKT_S2_PS0_i"
            ]
        );
    }

    /// Bad parameters are `GenError::Params` whose message lists the valid parameters.
    #[test]
    fn bad_parameters_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tst");
        for (kv, needle) in [
            (&[("size", "10")][..], "no parameter 'size'"),
            (&[("n", "0")][..], "n=0"),
            (&[("block", "0")][..], "block=0"),
            (&[("dot_ctas", "0")][..], "dot_ctas=0"),
            (&[("block", "2048")][..], "at most 1024"),
            (&[("block", "96")][..], "power of two"),
            (&[("kernels", "copy,scale")][..], "unknown kernel 'scale'"),
            (&[("kernels", "")][..], "unknown kernel ''"),
            (&[("n", "ten")][..], "whole number"),
        ] {
            let e = generate("stream", &params(kv), 80, &path).unwrap_err();
            let GenError::Params(msg) = &e else {
                panic!("{kv:?}: {e}")
            };
            assert!(msg.contains(needle), "{kv:?}: {msg}");
            assert!(
                msg.contains("valid parameters: n (default 65536), block (default 256)"),
                "{kv:?}: {msg}"
            );
            assert!(!path.exists());
        }
        // A block that is not a power of two is fine without dot.
        generate(
            "stream",
            &params(&[("n", "500"), ("block", "96"), ("kernels", "copy,triad")]),
            80,
            &path,
        )
        .unwrap();
    }
}
