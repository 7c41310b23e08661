//! `flag_barrier`, `atomic_barrier` and `sense_barrier`: software grid barriers, the two baselines of
//! liu-2018-efficient-synchronization-for-gpgpu.txt section 3.1.2 ("Atomic Operations and
//! Memory Flags") that its chapter 4 replaces with a hardware `__globalSync()`: a kernel
//! of `ctas` CTAs runs `episodes` barriers in a row, with some work between them. Both
//! need every CTA resident at once: on a GPU that holds fewer, the CTAs that wait keep
//! the missing ones from being dispatched and the kernel deadlocks (Liu section 4.3;
//! finding that is the timing model's job). The recorder runs all `ctas` CTAs at once.
//!
//! Per episode `e` (goal `e + 1`), every thread does the work: it loads its input, runs
//! `work` multiply-adds (`IMAD`, unrolled) and stores the result in the episode's half of
//! a double-buffered `slots` array; `__syncthreads()`; thread 0 counts the CTA's arrival
//! (`RED.E.ADD` on `arrived[e][cta]`, plain data for the host check), `__threadfence()`,
//! and arrives:
//!
//! - `atomic_barrier`: `atomicAdd(&count, 1)` (`RED.E.ADD`), then spins while
//!   `ld.strong(count) < ctas * (e + 1)` (a spin region: head `LDG.E.STRONG.GPU`,
//!   `ISETP.GE`; test `BRA` exiting on `(0, >=, ctas * (e + 1))`; empty tail; back-edge
//!   `BRA`). `count` is a sync word, checked to end at
//!   `ctas * episodes`.
//! - `sense_barrier`: a sense-reversing counter barrier with exactly one last arriver,
//!   as cooperative groups' grid sync is built: `old = atomicAdd(&count, 1)` in a branch
//!   region (label `last arriver`: head `ATOMG.E.ADD.STRONG.GPU`, `ISETP.EQ`; test `BRA`
//!   taken on `(0, ==, ctas - 1)`); its tail, which only the last arriver of the episode
//!   takes, resets the counter (`st.strong(count, 0)`: `STG.E.STRONG.GPU`),
//!   `__threadfence()` (`MEMBAR.SC.GPU`: the reset is visible before the release), and
//!   releases the others by `st.strong(flag, goal)` (`MOV`, `STG.E.STRONG.GPU`; the
//!   episode's goal `e + 1` stands for the sense, so the release value only ever grows);
//!   then every thread 0 spins while `ld.strong(flag) < goal` (a spin region, label
//!   `barrier passed`: head `LDG.E.STRONG.GPU`, `ISETP.GE`; test `BRA` exiting on `(0,
//!   >=, goal)`, a constant per episode; empty tail). `count` and `flag` are sync words,
//!   checked to end at 0 and `episodes`.
//! - `flag_barrier` (the lock-free barrier of Xiao and Feng that Liu cites as [25]): it
//!   raises its own flag, `st.strong(in[cta], goal)`; in CTA 0, thread `t` (for `t <
//!   ctas`) watches flags `t`, `t + block`, ... (at most 8; clamped to the last flag) in a
//!   spin region (head one `LDG.E.STRONG.GPU` per flag, then one `ISETP.GE` per flag;
//!   exit when every one `>= goal`; empty tail),
//!   then `__syncthreads()`, then raises the same release flags `st.strong(out[..],
//!   goal)`; every CTA's thread 0 spins on `out[cta] >= goal`. `in` and `out` are sync
//!   words, checked to end at `episodes`.
//!
//! `__syncthreads()` again, then every thread reads what the next CTA (cyclically) stored
//! this episode and adds it to its sum; the sums go to `out` at the end. The host
//! reference: every CTA arrived exactly once per episode, the barrier counters or flags
//! hold their final values, and every sum is right, which it is only if no CTA passed a
//! barrier before its neighbour had stored its slots.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Atom, Cmp, Exit, LaunchSpec, Recorder, SyncCmp, Val, Warp, WARP};
use tessera_traces::schema::RZ;
use tessera_traces::{Access, ArrayAnnotation};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "ctas",
        default: "64",
        help: "CTAs, all resident in the recorder (flag_barrier: at most 8 x block)",
    },
    ParamSpec {
        name: "block",
        default: "64",
        help: "threads per CTA (a multiple of 32, at most 1024)",
    },
    ParamSpec {
        name: "episodes",
        default: "4",
        help: "barriers in a row",
    },
    ParamSpec {
        name: "work",
        default: "4",
        help: "multiply-adds per thread between barriers (at most 64)",
    },
    ParamSpec {
        name: "seed",
        default: "1",
        help: "input generator seed",
    },
    ParamSpec {
        name: "backoff",
        default: "0",
        help: "spin back-off base in core cycles, doubling up to 32x (0: none)",
    },
    ParamSpec {
        name: "weak",
        default: "0",
        help: "1: spin with weak loads (LDG.E, a non-volatile flag), which an SM's L1 answers with its stale copy: the barrier never completes on a GPU with L1s (the watchdog reports it)",
    },
];

pub static FLAG_BARRIER: WorkloadSpec = WorkloadSpec {
    name: "flag_barrier",
    help: "lock-free software grid barrier (arrival flags watched by CTA 0, release flags), episodes with work between",
    params: PARAMS,
    run: run_flag,
};

pub static ATOMIC_BARRIER: WorkloadSpec = WorkloadSpec {
    name: "atomic_barrier",
    help: "software grid barrier on one atomic counter (atomicAdd, spin on a strong load), episodes with work between",
    params: PARAMS,
    run: run_atomic,
};

pub static SENSE_BARRIER: WorkloadSpec = WorkloadSpec {
    name: "sense_barrier",
    help: "sense-reversing software grid barrier: the last arriver (a branch region) resets the counter and releases the others through a flag they spin on",
    params: PARAMS,
    run: run_sense,
};

/// The multiply-add of the work: a linear congruential step.
const MUL: u32 = 1_664_525;
const ADD: u32 = 1_013_904_223;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Flag,
    Atomic,
    Sense,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Flag => "flag_barrier",
            Kind::Atomic => "atomic_barrier",
            Kind::Sense => "sense_barrier",
        }
    }
}

/// The device's results and the reference's.
pub(crate) struct Outcome {
    pub sums: Vec<u32>,
    pub want_sums: Vec<u32>,
    pub arrived: Vec<u32>,
    /// `count` (atomic), the `in` then `out` flags (flag), or `count` then `flag`
    /// (sense).
    pub sync: Vec<u32>,
    pub want_sync: Vec<u32>,
}

pub(crate) fn compute(kind: Kind, p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let ctas = p.u32("ctas")?;
    let block = p.u32("block")?;
    let episodes = p.u32("episodes")?;
    let work = p.u64_any("work")?;
    let base = u32::try_from(p.u64_any("backoff")?)
        .map_err(|_| p.invalid("backoff must fit in 32 bits"))?;
    let backoff = (base, base.saturating_mul(32));
    let weak = match p.u64_any("weak")? {
        0 => false,
        1 => true,
        _ => return Err(p.invalid("weak must be 0 or 1")),
    };
    if block % 32 != 0 || block > 1024 {
        return Err(p.invalid("block must be a multiple of 32 from 32 to 1024"));
    }
    if work > 64 {
        return Err(p.invalid("work must be at most 64"));
    }
    let work = work as u8;
    // Flags each watcher of CTA 0 reads.
    let per = ctas.div_ceil(block);
    if kind == Kind::Flag && per > 8 {
        return Err(p.invalid("flag_barrier: ctas must be at most 8 x block (CTA 0's threads watch 8 flags each at most)"));
    }
    let goal_max = u64::from(ctas) * u64::from(episodes);
    if goal_max > u64::from(u32::MAX) || episodes > 1 << 16 || ctas > 1 << 16 {
        return Err(p.invalid("ctas and episodes must be at most 65536, their product below 2^32"));
    }
    let threads = ctas as usize * block as usize;
    let n = threads as u32;
    let mut rng = SplitMix64(p.u64_any("seed")?);
    let input: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let in_buf = rec.alloc::<u32>("input", n as u64)?;
    let slots = rec.alloc::<u32>("slots", 2 * n as u64)?;
    let sums = rec.alloc::<u32>("sums", n as u64)?;
    let arrived = rec.alloc::<u32>("arrived", goal_max)?;
    rec.upload(in_buf, &input)?;
    let mut release = None;
    let (count, flags_in, flags_out) = match kind {
        Kind::Atomic => {
            let c = rec.alloc::<u32>("count", 1)?;
            rec.sync_words(c, true)?;
            (Some(c), None, None)
        }
        Kind::Sense => {
            let c = rec.alloc::<u32>("count", 1)?;
            let f = rec.alloc::<u32>("flag", 1)?;
            rec.sync_words(c, true)?;
            rec.sync_words(f, true)?;
            release = Some(f);
            (Some(c), None, None)
        }
        Kind::Flag => {
            let fi = rec.alloc::<u32>("flags_in", ctas as u64)?;
            let fo = rec.alloc::<u32>("flags_out", ctas as u64)?;
            rec.sync_words(fi, true)?;
            rec.sync_words(fo, true)?;
            (None, Some(fi), Some(fo))
        }
    };
    let name = match kind {
        Kind::Atomic => "_Z14atomic_barrierPKjPjS1_S1_S1_jj",
        Kind::Flag => "_Z12flag_barrierPKjPjS1_S1_S1_S1_jj",
        Kind::Sense => "_Z13sense_barrierPKjPjS1_S1_S1_S1_jj",
    };
    let mut spec = LaunchSpec::new(name, [ctas, 1, 1], [block, 1, 1]);
    // Every CTA waits for every other: all must be live at once.
    spec.resident_ctas = ctas;
    let whole = ArrayAnnotation::whole;
    spec.annotations = vec![
        whole("input", in_buf.base, in_buf.bytes(), Access::Read),
        whole("slots", slots.base, slots.bytes(), Access::ReadWrite),
        whole("sums", sums.base, sums.bytes(), Access::ReadWrite),
        whole("arrived", arrived.base, arrived.bytes(), Access::ReadWrite),
    ];
    for (name, b) in [
        ("count", count),
        ("flag", release),
        ("flags_in", flags_in),
        ("flags_out", flags_out),
    ] {
        if let Some(b) = b {
            spec.annotations
                .push(whole(name, b.base, b.bytes(), Access::ReadWrite));
        }
    }
    rec.launch(&spec, &|w| {
        let gid = w.global_id_x();
        let t = w.tid(0);
        let c = w.ctaid(0);
        let leader = w.icmp_imm(Cmp::Eq, &t, 0);
        let first_cta = w.icmp_imm(Cmp::Eq, &c, 0);
        let watcher = w.icmp_imm(Cmp::Lt, &t, ctas);
        let one = w.konst(1u32);
        let add = w.konst(ADD);
        let zero = w.konst(0u32);
        // The neighbour's thread of the same index.
        let c1 = w.iadd_imm(&c, 1);
        let cn = w.rem_imm(&c1, ctas);
        let nb = w.imad_imm(&cn, block, &t);
        // CTA 0's watchers: the addresses of their flags (flag_barrier).
        let empty = Val {
            v: [0u64; WARP],
            reg: RZ,
        };
        let mut watch_in = [empty; 8];
        let mut watch_out = [empty; 8];
        if let (Some(fi), Some(fo)) = (flags_in, flags_out) {
            let last = w.konst(ctas - 1);
            for j in 0..per as usize {
                let (a, b) = w.unrolled(j as u8, |w| {
                    let i = w.iadd_imm(&t, j as u32 * block);
                    let i = w.imin(&i, &last);
                    (w.addr(&fi, &i), w.addr(&fo, &i))
                });
                watch_in[j] = a;
                watch_out[j] = b;
            }
        }
        let mut sum = w.konst(0u32);
        w.for_range(episodes, |w, e| {
            let goal = e + 1;
            let half = (e % 2) * n;
            // The work.
            let mut v = w.load(&in_buf, &gid);
            v = w.iadd_imm(&v, e);
            for j in 0..work {
                v = w.unrolled(j, |w| w.imad_imm(&v, MUL, &add));
            }
            let mine = w.iadd_imm(&gid, half);
            w.store(&slots, &mine, &v);
            w.barrier();
            w.if_(leader, |w| {
                let k = w.iadd_imm(&c, e * ctas);
                let ka = w.addr(&arrived, &k);
                w.atomic(Atom::Add, &ka, &one, false);
                w.fence_gpu();
                match (count, flags_in) {
                    (Some(cnt), _) if kind == Kind::Sense => {
                        let ca = w.addr(&cnt, &zero);
                        let Some(fl) = release else {
                            return;
                        };
                        let fa = w.addr(&fl, &zero);
                        w.branch(
                            "last arriver",
                            |w| {
                                w.atomic(Atom::Add, &ca, &one, true);
                                Exit::when_imm(0, SyncCmp::Eq, ctas - 1)
                            },
                            |w, _old| {
                                // Reset for the next episode, then release.
                                w.st_strong(&ca, &zero);
                                w.fence_gpu();
                                let g = w.konst(goal);
                                w.st_strong(&fa, &g);
                            },
                        );
                        w.spin(
                            "barrier passed",
                            backoff,
                            |w| {
                                spin_read(w, &fa, weak);
                                Exit::when_imm(0, SyncCmp::Ge, goal)
                            },
                            |_| {},
                        );
                    }
                    (Some(cnt), _) => {
                        let ca = w.addr(&cnt, &zero);
                        w.atomic(Atom::Add, &ca, &one, false);
                        w.spin(
                            "grid barrier passed",
                            backoff,
                            |w| {
                                spin_read(w, &ca, weak);
                                Exit::when_imm(0, SyncCmp::Ge, goal * ctas)
                            },
                            |_| {},
                        );
                    }
                    (None, Some(fi)) => {
                        let fa = w.addr(&fi, &c);
                        let g = w.konst(goal);
                        w.st_strong(&fa, &g);
                    }
                    _ => {}
                }
            });
            if flags_in.is_some() {
                flag_release(
                    w, first_cta, watcher, per, goal, backoff, weak, &watch_in, &watch_out,
                );
                if let Some(fo) = flags_out {
                    w.if_(leader, |w| {
                        let oa = w.addr(&fo, &c);
                        w.spin(
                            "grid barrier passed",
                            backoff,
                            |w| {
                                spin_read(w, &oa, weak);
                                Exit::when_imm(0, SyncCmp::Ge, goal)
                            },
                            |_| {},
                        );
                    });
                }
            }
            w.barrier();
            let theirs = w.iadd_imm(&nb, half);
            let x = w.load(&slots, &theirs);
            w.iadd_acc(&mut sum, &x);
        });
        w.store(&sums, &gid, &sum);
    })?;
    // The reference.
    let step = |e: u32, g: usize| {
        let mut v = input[g].wrapping_add(e);
        for _ in 0..work {
            v = v.wrapping_mul(MUL).wrapping_add(ADD);
        }
        v
    };
    let mut want_sums = vec![0u32; threads];
    for (g, s) in want_sums.iter_mut().enumerate() {
        let (cta, t) = (g / block as usize, g % block as usize);
        let nb = (cta + 1) % ctas as usize * block as usize + t;
        for e in 0..episodes {
            *s = s.wrapping_add(step(e, nb));
        }
    }
    let (sync, want_sync) = match (count, flags_in, flags_out) {
        (Some(cnt), ..) if kind == Kind::Sense => {
            let mut v = rec.download(cnt)?;
            if let Some(fl) = release {
                v.extend(rec.download(fl)?);
            }
            (v, vec![0, episodes])
        }
        (Some(cnt), ..) => (rec.download(cnt)?, vec![ctas * episodes]),
        (_, Some(fi), Some(fo)) => {
            let mut v = rec.download(fi)?;
            v.extend(rec.download(fo)?);
            (v, vec![episodes; 2 * ctas as usize])
        }
        _ => (Vec::new(), Vec::new()),
    };
    Ok(Outcome {
        sums: rec.download(sums)?,
        want_sums,
        arrived: rec.download(arrived)?,
        sync,
        want_sync,
    })
}

/// CTA 0's part of the flag barrier: its watchers spin until every arrival flag reaches
/// `goal`, `__syncthreads()`, then they raise the release flags.
/// A spin head's read of a barrier word: strong (`LDG.E.STRONG.GPU`), or with `weak` a
/// plain load (`LDG.E`, a non-volatile flag), which an SM's L1 may answer from a stale copy.
/// The instruction takes the caller's PC.
#[track_caller]
fn spin_read(w: &mut Warp, a: &Val<u64>, weak: bool) {
    if weak {
        w.ld::<u32>(a);
    } else {
        w.ld_strong(a);
    }
}

#[allow(clippy::too_many_arguments)]
fn flag_release(
    w: &mut Warp,
    first_cta: crate::record::Pred,
    watcher: crate::record::Pred,
    per: u32,
    goal: u32,
    backoff: (u32, u32),
    weak: bool,
    watch_in: &[Val<u64>; 8],
    watch_out: &[Val<u64>; 8],
) {
    w.if_(first_cta, |w| {
        w.if_(watcher, |w| {
            w.spin(
                "every CTA arrived",
                backoff,
                |w| {
                    let mut ex = Exit::when_imm(0, SyncCmp::Ge, goal);
                    for (j, a) in watch_in.iter().enumerate().take(per as usize) {
                        w.unrolled(j as u8, |w| spin_read(w, a, weak));
                        if j > 0 {
                            ex = ex.and_imm(j, SyncCmp::Ge, goal);
                        }
                    }
                    ex
                },
                |_| {},
            );
        });
        w.barrier();
        w.if_(watcher, |w| {
            let g = w.konst(goal);
            for (j, a) in watch_out.iter().enumerate().take(per as usize) {
                w.unrolled(j as u8, |w| w.st_strong(a, &g));
            }
        });
    });
}

fn check(kind: Kind, o: &Outcome) -> Result<(), GenError> {
    let name = kind.name();
    check_eq(
        name,
        "arrivals per episode and CTA",
        &o.arrived,
        &vec![1; o.arrived.len()],
    )?;
    check_eq(name, "barrier words", &o.sync, &o.want_sync)?;
    check_eq(name, "neighbour sums", &o.sums, &o.want_sums)
}

fn run_kind(kind: Kind, p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(kind, p, rec)?;
    check(kind, &o)?;
    Ok(format!(
        "{} barrier episodes over {} CTAs: every CTA arrived once per episode, every neighbour's slots seen",
        p.u32("episodes")?,
        p.u32("ctas")?
    ))
}

fn run_flag(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    run_kind(Kind::Flag, p, rec)
}

fn run_atomic(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    run_kind(Kind::Atomic, p, rec)
}

fn run_sense(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    run_kind(Kind::Sense, p, rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::{param_error, params};
    use tessera_traces::TraceFile;

    fn record(kind: Kind, kv: &[(&str, &str)]) -> (Outcome, TraceFile, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let spec = match kind {
            Kind::Flag => &FLAG_BARRIER,
            Kind::Atomic => &ATOMIC_BARRIER,
            Kind::Sense => &SENSE_BARRIER,
        };
        let p = Params::parse(spec, &params(kv)).unwrap();
        let o = compute(kind, &p, &mut rec).unwrap();
        assert_eq!(rec.stats.warp_thread_allocs, 0);
        rec.finish().unwrap();
        check(kind, &o).unwrap();
        let t = TraceFile::open(&path).unwrap();
        tessera_traces::verify(&t).unwrap();
        (o, t, dir)
    }

    #[test]
    fn atomic_barrier_episodes_hold() {
        let (o, t, _d) = record(Kind::Atomic, &[("ctas", "12"), ("episodes", "3")]);
        assert_eq!(o.sync, [36]);
        let k = &t.kernels()[0];
        assert_eq!(k.spin_regions.len(), 1);
        let r = &k.spin_regions[0];
        assert_eq!((r.terms[0].value, r.terms[0].cmp), (0, SyncCmp::Ge));
        let sw = &t.index().sync_words;
        assert_eq!(
            (sw.len(), &sw[0].init[..], &sw[0].expect[..]),
            (1, &[0][..], &[36][..])
        );
        // Each leader's test holds its episode's goal.
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 5).unwrap().clone();
        let first = d.warps[0].insts.start;
        let goals: Vec<u64> = d
            .warp(0)
            .iter()
            .enumerate()
            .filter(|(_, i)| i.pc == r.test_pc)
            .map(|(j, _)| d.operands_of(first + j, 1).unwrap()[0])
            .collect();
        assert_eq!(goals, [12, 24, 36]);
    }

    #[test]
    fn sense_barrier_episodes_hold() {
        let (o, t, _d) = record(Kind::Sense, &[("ctas", "12"), ("episodes", "3")]);
        assert_eq!(o.sync, [0, 3]);
        let k = &t.kernels()[0];
        assert_eq!(k.spin_regions.len(), 2);
        let last = k
            .spin_regions
            .iter()
            .find(|r| r.label == "last arriver")
            .unwrap();
        assert_eq!(last.kind, tessera_traces::RegionKind::Branch);
        assert_eq!(
            (last.terms.len(), last.terms[0].value, last.terms[0].cmp),
            (1, 0, SyncCmp::Eq)
        );
        let passed = k
            .spin_regions
            .iter()
            .find(|r| r.label == "barrier passed")
            .unwrap();
        assert_eq!(passed.kind, tessera_traces::RegionKind::Spin);
        assert_eq!(
            (passed.terms[0].value, passed.terms[0].cmp),
            (0, SyncCmp::Ge)
        );
        // count and flag: 0 and 0 at the start, 0 and `episodes` at the end.
        let sw = &t.index().sync_words;
        assert_eq!(sw.len(), 2);
        assert_eq!(
            (sw[0].name.as_str(), &sw[0].init[..], &sw[0].expect[..]),
            ("count", &[0][..], &[0][..])
        );
        assert_eq!(
            (sw[1].name.as_str(), &sw[1].init[..], &sw[1].expect[..]),
            ("flag", &[0][..], &[3][..])
        );
        // The tail: the reset, the fence, then the release, in program order.
        let tail: Vec<&str> = k
            .statics
            .iter()
            .filter(|s| s.pc > last.test_pc && s.pc < last.end_pc)
            .map(|s| k.opcodes[s.opcode as usize].name.as_str())
            .collect();
        assert_eq!(
            tail,
            [
                "STG.E.STRONG.GPU",
                "MEMBAR.SC.GPU",
                "MOV",
                "STG.E.STRONG.GPU"
            ]
        );
        // Each leader's branch test holds ctas - 1, its spin test its episode's goal.
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 5).unwrap().clone();
        let first = d.warps[0].insts.start;
        let at = |pc: u32, n: u8| -> Vec<Vec<u64>> {
            d.warp(0)
                .iter()
                .enumerate()
                .filter(|(_, i)| i.pc == pc)
                .map(|(j, _)| d.operands_of(first + j, n).unwrap().to_vec())
                .collect()
        };
        assert!(at(last.test_pc, 2).iter().all(|o| o[0] == 11));
        assert_eq!(at(passed.test_pc, 1), [[1], [2], [3]]);
    }

    #[test]
    fn flag_barrier_episodes_hold() {
        // 70 CTAs of 32 threads: CTA 0's watchers read 3 flags each.
        let (o, t, _d) = record(
            Kind::Flag,
            &[("ctas", "70"), ("block", "32"), ("episodes", "3")],
        );
        assert!(o.sync.iter().all(|&f| f == 3));
        let k = &t.kernels()[0];
        assert_eq!(k.spin_regions.len(), 2);
        let watch = k
            .spin_regions
            .iter()
            .find(|r| r.label == "every CTA arrived")
            .unwrap();
        assert_eq!(watch.terms.len(), 3);
        assert!(watch.all);
        let sw = &t.index().sync_words;
        assert_eq!(sw.len(), 2);
        assert!(sw.iter().all(|s| s.expect == vec![3; 70]));
        let strong = k
            .opcodes
            .iter()
            .find(|x| x.name == "STG.E.STRONG.GPU")
            .unwrap();
        assert_eq!(strong.class, tessera_traces::OpClass::StoreGlobal);
    }

    /// Hundreds of CTAs all resident (warp threads from a pool as large as the grid).
    #[test]
    fn a_grid_of_hundreds_of_ctas_is_recorded_resident() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.tst");
        let args = params(&[
            ("ctas", "300"),
            ("block", "128"),
            ("episodes", "2"),
            ("work", "1"),
        ]);
        let r = crate::workloads::generate("atomic_barrier", &args, 80, &path).unwrap();
        assert_eq!(r.stats.peak_warp_threads, 300 * 4);
        assert_eq!(r.stats.warp_thread_allocs, 0);
        let args = params(&[
            ("ctas", "300"),
            ("block", "64"),
            ("episodes", "2"),
            ("work", "1"),
        ]);
        crate::workloads::generate("flag_barrier", &args, 80, &path).unwrap();
        let args = params(&[
            ("ctas", "300"),
            ("block", "32"),
            ("episodes", "2"),
            ("work", "1"),
        ]);
        crate::workloads::generate("sense_barrier", &args, 80, &path).unwrap();
        // Its regions and sync words survive Accel-Sim text.
        let ex = dir.path().join("ex");
        crate::accelsim::export_dir(&path, &ex).unwrap();
        let b = dir.path().join("b.tst");
        crate::accelsim::import_dir(&ex, &b, &Default::default()).unwrap();
        let (ta, tb) = (
            TraceFile::open(&path).unwrap(),
            TraceFile::open(&b).unwrap(),
        );
        assert_eq!(ta.kernels()[0].spin_regions, tb.kernels()[0].spin_regions);
        assert_eq!(ta.index().sync_words, tb.index().sync_words);
        tessera_traces::verify(&tb).unwrap();
    }

    #[test]
    fn parameters_are_checked() {
        let m = param_error("flag_barrier", &[("ctas", "300"), ("block", "32")]);
        assert!(m.contains("at most 8 x block"), "{m}");
        let m = param_error("atomic_barrier", &[("work", "65")]);
        assert!(m.contains("work"), "{m}");
    }
}
