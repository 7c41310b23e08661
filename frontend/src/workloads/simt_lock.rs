//! `simt_lock`: every thread takes one global lock, the lanes of each warp contending for
//! it, the example of eltantawy-2018-inter-thread-synchronization-simt.txt chapter 1
//! (Fig 1.1 and its workaround Fig 1.2). Each thread, `iters` times, acquires the lock
//! with `atomicCAS(&lock, 0, 1)`, and in the critical section appends its id to a log
//! (`c = count; log[c] = tid; count = c + 1`), `__threadfence()`, and releases with
//! `atomicExch(&lock, 0)`. The host reference: the log holds every thread exactly `iters`
//! times, the count is `threads x iters`, and the lock is free at the end. `lock` is a
//! checked sync word (it ends at 0); `count` and `log` are plain data the lock protects.
//!
//! Two shapes of the same program (`release_inside`):
//!
//! - `release_inside=0`, Fig 1.1: `while (atomicCAS(&lock, 0, 1) != 0); critical
//!   section; atomicExch(&lock, 0);`. On a SIMT stack (pre-Volta) the lane that won waits
//!   at the loop's reconvergence point for its warp's other lanes, which spin on the lock
//!   it holds: the SIMT deadlock. Under Volta's independent thread scheduling it
//!   completes: the winner runs its critical section and release while the others go
//!   round. The recorder runs it that way ([`crate::record::Warp::while_its`]: per round
//!   the CAS, `ISETP.NE` and the exit `BRA` on the lanes still trying, then the critical
//!   section and release on the lane that won, then the others retry) and the trace has
//!   **no spin region**: the timing model replays the rounds as recorded. The timing
//!   model's spin regions cannot express this shape under its `its` policy today, where
//!   lanes that left a region wait at its back-edge for those still spinning (a lock
//!   held by a waiting lane would never be released); modelling the SIMT deadlock, and
//!   ITS that lets leaving lanes run on, belongs to the reconvergence issue (25). The
//!   lock is still a declared sync word, so the model performs the CASes and exchanges
//!   on its value at the word's home; the control flow stays the recorded one whatever
//!   the values, and the end check holds because every warp's last operation on the
//!   lock is a release. (A CAS the recorder saw win may lose in the model's order; its
//!   critical section runs all the same: the stats' `cas_won` can be below the number
//!   of critical sections.)
//! - `release_inside=1`, Fig 1.2: `done = false; while (!done) { if
//!   (atomicCAS(&lock, 0, 1) == 0) { critical section; atomicExch(&lock, 0); done =
//!   true; } }`. Recorded as a
//!   spin region (as `ht` is): head the CAS (value 0), exit when it returned 0; tail the
//!   critical section and the release, run by the lanes that won. The timing model
//!   repeats the head until every lane has had the lock: the CASes of one instruction
//!   apply in lane order, so one lane of a warp wins per round at most.
//!
//! Per warp: `MOV` (prologue), `S2R`, `S2R`, `IMAD` (tid), `MOV` x2, `IMAD.WIDE` x2
//! (lock, count), then per acquisition: with `release_inside=0` `BSSY`, per round
//! `ATOMG.E.CAS.STRONG.GPU`, `ISETP.NE`, `BRA` and, on the lane that won, `LDG.E`
//! (count), `IMAD.WIDE`, `STG.E` (log), `IADD3`, `STG.E` (count), `MEMBAR.SC.GPU`,
//! `ATOMG.E.EXCH.STRONG.GPU`; then `BSYNC`. With `release_inside=1` the region: head
//! `ATOMG.E.CAS.STRONG.GPU`, `ISETP.EQ`; test `BRA`; tail the critical section and
//! release as above; back-edge `BRA`. Then the counted loop's `IADD3`, `ISETP`, `BRA`,
//! and `EXIT`.

use super::{check_eq, GenError, ParamSpec, Params, WorkloadSpec};
use crate::record::{Atom, Buffer, Cmp, Exit, LaunchSpec, Recorder, SyncCmp, Val, Warp};
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "simt_lock",
    help: "one global lock taken by every lane of every warp (atomicCAS spin, atomicExch release; ElTantawy Fig 1.1, or Fig 1.2 with release_inside=1)",
    params: &[
        ParamSpec { name: "ctas", default: "2", help: "CTAs" },
        ParamSpec { name: "block", default: "64", help: "threads per CTA (a multiple of 32)" },
        ParamSpec { name: "iters", default: "1", help: "critical sections per thread" },
        ParamSpec { name: "release_inside", default: "0", help: "1: the release inside the spin loop (Fig 1.2), a spin region; 0: the loop then the critical section (Fig 1.1), replayed as recorded" },
        ParamSpec { name: "backoff", default: "0", help: "spin back-off base in core cycles, doubling up to 32x (0: none; release_inside=1 only)" },
    ],
    run,
};

/// What the kernel left, and what it must be.
pub(crate) struct Outcome {
    pub threads: u32,
    pub iters: u32,
    pub count: u32,
    pub lock: u32,
    pub log: Vec<u32>,
    /// Lock attempts (CASes) the recorder ran, over all lanes.
    pub attempts: u64,
}

/// The critical section and the release, on the active lanes (one, as the lock admits).
/// Its instructions have this function's PCs, wherever it is called from.
fn critical(w: &mut Warp, log: &Buffer<u32>, at: [&Val<u64>; 2], zero: &Val<u32>, tid: &Val<u32>) {
    let [ca, la] = at;
    // The recorder switches warps only where one waits: let the others try while this
    // lane holds the lock (their attempts fail, as they would while the critical section
    // takes time on a GPU). Emits nothing.
    w.spin_yield();
    let c = w.ld::<u32>(ca);
    w.store(log, &c, tid);
    let c1 = w.iadd_imm(&c, 1);
    w.st(ca, &c1);
    w.fence_gpu();
    w.atomic(Atom::Exch, la, zero, false);
}

pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let ctas = p.u32("ctas")?;
    let block = p.u32("block")?;
    let iters = p.u32("iters")?;
    let inside = p.choice("release_inside", &["0", "1"])? == "1";
    let base = u32::try_from(p.u64_any("backoff")?)
        .map_err(|_| p.invalid("backoff must fit in 32 bits"))?;
    let backoff = (base, base.saturating_mul(32));
    if block % 32 != 0 || block > 1024 {
        return Err(p.invalid("block must be a multiple of 32 from 32 to 1024"));
    }
    let threads = u64::from(ctas) * u64::from(block);
    let total = threads * u64::from(iters);
    if total > 1 << 20 {
        return Err(p.invalid("ctas x block x iters must be at most 1048576"));
    }
    let (threads, total) = (threads as u32, total as u32);
    let lock = rec.alloc::<u32>("lock", 1)?;
    let count = rec.alloc::<u32>("count", 1)?;
    let log = rec.alloc::<u32>("log", u64::from(total))?;
    rec.upload(lock, &[0])?;
    rec.upload(count, &[0])?;
    rec.sync_words(lock, true)?;
    let mut spec = LaunchSpec::new("_Z9simt_lockPjS_S_j", [ctas, 1, 1], [block, 1, 1]);
    // Every lane of every warp waits for the lock: run every CTA at once, as a GPU that
    // holds them does.
    spec.resident_ctas = ctas;
    let whole =
        |name: &str, b: u64, bytes: u64| ArrayAnnotation::whole(name, b, bytes, Access::ReadWrite);
    spec.annotations = vec![
        whole("lock", lock.base, lock.bytes()),
        whole("count", count.base, count.bytes()),
        whole("log", log.base, log.bytes()),
    ];
    let attempts = std::sync::atomic::AtomicU64::new(0);
    let tried = |w: &Warp| {
        attempts.fetch_add(
            u64::from(w.active().count_ones()),
            std::sync::atomic::Ordering::Relaxed,
        );
    };
    rec.launch(&spec, &|w| {
        let tid = w.global_id_x();
        let zero = w.konst(0u32);
        let one = w.konst(1u32);
        let la = w.addr(&lock, &zero);
        let ca = w.addr(&count, &zero);
        w.for_range(iters, |w, _| {
            if inside {
                w.spin(
                    "lock acquired",
                    backoff,
                    |w| {
                        tried(w);
                        w.atomic_cas(&la, &zero, &one);
                        Exit::when_imm(0, SyncCmp::Eq, 0)
                    },
                    |w| critical(w, &log, [&ca, &la], &zero, &tid),
                );
            } else {
                w.while_its(
                    |w| {
                        tried(w);
                        let old = w.atomic_cas(&la, &zero, &one);
                        w.icmp_imm(Cmp::Ne, &old, 0)
                    },
                    // The losers let the others run before they try again.
                    |w| w.spin_yield(),
                    |w| critical(w, &log, [&ca, &la], &zero, &tid),
                );
            }
        });
    })?;
    Ok(Outcome {
        threads,
        iters,
        count: rec.download(count)?[0],
        lock: rec.download(lock)?[0],
        log: rec.download(log)?,
        attempts: attempts.into_inner(),
    })
}

/// The host reference: the lock is free, the count is every critical section, and the log
/// holds each thread `iters` times (no two holders wrote one slot).
pub(crate) fn check(o: &Outcome) -> Result<(), GenError> {
    let total = o.threads as usize * o.iters as usize;
    check_eq("simt_lock", "lock at the end", &[o.lock], &[0])?;
    check_eq("simt_lock", "count", &[o.count as usize], &[total])?;
    let mut per = vec![0u32; o.threads as usize];
    for &t in &o.log {
        match per.get_mut(t as usize) {
            Some(n) => *n += 1,
            None => {
                return Err(GenError::Mismatch {
                    workload: "simt_lock",
                    detail: format!("the log holds {t}, not a thread"),
                })
            }
        }
    }
    check_eq(
        "simt_lock",
        "critical sections per thread",
        &per,
        &vec![o.iters; per.len()],
    )
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check(&o)?;
    Ok(format!(
        "{} critical sections by {} threads, {} lock attempts, lock free",
        o.count, o.threads, o.attempts
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::{param_error, params};
    use tessera_traces::{OpClass, TraceFile};

    fn record(kv: &[(&str, &str)]) -> (Outcome, TraceFile, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let p = Params::parse(&SPEC, &params(kv)).unwrap();
        let o = compute(&p, &mut rec).unwrap();
        assert_eq!(rec.stats.warp_thread_allocs, 0);
        rec.finish().unwrap();
        check(&o).unwrap();
        let t = TraceFile::open(&path).unwrap();
        tessera_traces::verify(&t).unwrap();
        (o, t, dir)
    }

    fn opcode_count(t: &TraceFile, name: &str) -> u64 {
        let k = &t.kernels()[0];
        let mut dec = t.decoder();
        let mut n = 0;
        for c in 0..k.counts.ctas as u32 {
            let d = dec.kernel_cta(0, c).unwrap().clone();
            for wi in 0..d.warps.len() {
                for i in d.warp(wi) {
                    let op = &k.opcodes[k.statics[i.slot as usize].opcode as usize];
                    if op.name == name {
                        n += 1;
                    }
                }
            }
        }
        n
    }

    /// Fig 1.1 under ITS: every lane acquires once per iteration, a CAS per round in the
    /// trace (as recorded, no region), the lock a checked sync word.
    #[test]
    fn release_outside_is_recorded_round_by_round() {
        let (o, t, _d) = record(&[("ctas", "2"), ("block", "64"), ("iters", "2")]);
        assert_eq!((o.count, o.lock), (256, 0));
        let k = &t.kernels()[0];
        assert!(k.spin_regions.is_empty());
        // Lanes of a warp contend: at least 32 rounds per warp and acquisition.
        let cas = opcode_count(&t, "ATOMG.E.CAS.STRONG.GPU");
        assert!(cas >= 4 * 2 * 32, "{cas} CAS instructions");
        assert_eq!(opcode_count(&t, "ATOMG.E.EXCH.STRONG.GPU"), 256);
        assert!(o.attempts > 256, "{} attempts", o.attempts);
        let sw = &t.index().sync_words;
        assert_eq!(
            (sw.len(), &sw[0].init[..], &sw[0].expect[..]),
            (1, &[0][..], &[0][..])
        );
        // The critical section runs on one lane at a time, between the rounds.
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let exch: Vec<u32> = d
            .warp(0)
            .iter()
            .filter(|i| {
                k.opcodes[k.statics[i.slot as usize].opcode as usize].name
                    == "ATOMG.E.EXCH.STRONG.GPU"
            })
            .map(|i| i.mask)
            .collect();
        assert_eq!(exch.len(), 64);
        assert!(exch.iter().all(|m| m.count_ones() == 1), "{exch:x?}");
    }

    /// Fig 1.2: a spin region whose tail is the critical section and the release.
    #[test]
    fn release_inside_is_a_spin_region() {
        let (o, t, _d) = record(&[("ctas", "2"), ("block", "64"), ("release_inside", "1")]);
        assert_eq!((o.count, o.lock), (128, 0));
        assert!(o.attempts > 128, "{} attempts", o.attempts);
        let k = &t.kernels()[0];
        assert_eq!(k.spin_regions.len(), 1);
        let r = &k.spin_regions[0];
        assert_eq!(
            (r.terms.len(), r.terms[0].value, r.terms[0].cmp),
            (1, 0, SyncCmp::Eq)
        );
        // The region recorded once per warp: one CAS and one (merged) release each.
        let c = |cl: OpClass| k.counts.class_warp_insts[cl as usize];
        assert_eq!(c(OpClass::AtomicGlobal), 2 * 4);
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 1).unwrap().clone();
        let insts = d.warp(1);
        let end = insts.iter().position(|i| i.pc == r.end_pc).unwrap();
        assert_eq!(insts[end - 1].mask, u32::MAX);
    }

    #[test]
    fn parameters_are_checked() {
        let m = param_error("simt_lock", &[("release_inside", "2")]);
        assert!(m.contains("release_inside"), "{m}");
        let m = param_error("simt_lock", &[("block", "48")]);
        assert!(m.contains("multiple of 32"), "{m}");
    }
}
