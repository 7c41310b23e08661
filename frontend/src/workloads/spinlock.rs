//! `spinlock`: one global lock guards a counter. In each warp, lane 0 (the lanes of a warp
//! are serialized behind one leader, as in TSP's rare critical sections) takes the lock
//! `iters` times: `while (atomicCAS(&lock, 0, 1) != 0) __nanosleep(...)`, then the critical
//! section reads the counter, adds one and writes it back, `__threadfence()`, and releases
//! with `atomicExch(&lock, 0)`. The host reference: the counter equals warps x iters and
//! the lock is free at the end.
//!
//! The spin loop's iterations are the ones the recorder saw (it runs `resident` CTAs at a
//! time, switches warps at every failed attempt, and once while a leader holds the lock):
//! until the timing model evaluates sync values (issue 24), the trace replays them as
//! recorded.
//!
//! Per warp: `S2R` (lane), `ISETP` (lane 0), `BSSY`, `BRA`, then for the leader per
//! critical section: `BSSY`, per attempt `ATOMG.E.CAS.STRONG.GPU`, `ISETP.NE`, `BRA` and,
//! while it fails, `NANOSLEEP`; `BSYNC`, `LDG.E`, `IADD3`, `STG.E`, `MEMBAR.SC.GPU`,
//! `ATOMG.E.EXCH.STRONG.GPU`; the loop's `IADD3`, `ISETP`, `BRA`; then `BSYNC`, `EXIT`.

use super::{GenError, ParamSpec, Params, WorkloadSpec};
use crate::record::{Atom, Cmp, LaunchSpec, Recorder};
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "spinlock",
    help: "one global lock (atomicCAS spin with __nanosleep, atomicExch release) guarding a counter; a leader lane per warp",
    params: &[
        ParamSpec { name: "ctas", default: "16", help: "CTAs" },
        ParamSpec { name: "block", default: "128", help: "threads per CTA (a multiple of 32)" },
        ParamSpec { name: "iters", default: "4", help: "critical sections per warp" },
        ParamSpec { name: "resident", default: "16", help: "CTAs the recorder runs at once (its residency; at least 1)" },
    ],
    run,
};

/// The counter and lock after the kernel, and what they must be.
pub(crate) struct Outcome {
    pub counter: u32,
    pub lock: u32,
    pub want: u32,
    pub attempts: u64,
}

pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let ctas = p.u32("ctas")?;
    let block = p.u32("block")?;
    let iters = p.u32("iters")?;
    let resident = p.u32("resident")?;
    if block == 0 || block % 32 != 0 || block > 1024 {
        return Err(p.invalid("block must be a multiple of 32 from 32 to 1024"));
    }
    if ctas == 0 || iters == 0 || resident == 0 {
        return Err(p.invalid("ctas, iters and resident must be at least 1"));
    }
    let lock = rec.alloc::<u32>("lock", 1)?;
    let counter = rec.alloc::<u32>("counter", 1)?;
    rec.upload(lock, &[0])?;
    rec.upload(counter, &[0])?;
    let mut spec = LaunchSpec::new("_Z8spinlockPjS_j", [ctas, 1, 1], [block, 1, 1]);
    spec.resident_ctas = resident;
    spec.annotations = vec![
        ArrayAnnotation {
            name: "lock".into(),
            base: lock.base,
            bytes: 4,
            access: Access::ReadWrite,
            ranges: Vec::new(),
        },
        ArrayAnnotation {
            name: "counter".into(),
            base: counter.base,
            bytes: 4,
            access: Access::ReadWrite,
            ranges: Vec::new(),
        },
    ];
    let attempts = std::sync::atomic::AtomicU64::new(0);
    rec.launch(&spec, &|w| {
        let lane = w.lane_id();
        let leader = w.icmp_imm(Cmp::Eq, &lane, 0);
        w.if_(leader, |w| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let la = w.addr(&lock, &zero);
            let ca = w.addr(&counter, &zero);
            w.for_range(iters, |w, _| {
                w.while_(
                    |w| {
                        attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let old = w.atomic_cas(&la, &zero, &one);
                        w.icmp_imm(Cmp::Ne, &old, 0)
                    },
                    |w| w.nanosleep(),
                );
                // The recorder switches warps only where one waits: let the others try
                // while this one holds the lock (their attempts fail, as they would while
                // the critical section takes time on a GPU). Emits nothing.
                w.spin_yield();
                let c = w.ld::<u32>(&ca);
                let c1 = w.iadd_imm(&c, 1);
                w.st(&ca, &c1);
                w.fence_gpu();
                w.atomic(Atom::Exch, &la, &zero, false);
            });
        });
    })?;
    Ok(Outcome {
        counter: rec.download(counter)?[0],
        lock: rec.download(lock)?[0],
        want: ctas * (block / 32) * iters,
        attempts: attempts.into_inner(),
    })
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    if o.counter != o.want || o.lock != 0 {
        return Err(GenError::Mismatch {
            workload: "spinlock",
            detail: format!(
                "counter {} (expected {}), lock {} (expected 0 at the end)",
                o.counter, o.want, o.lock
            ),
        });
    }
    Ok(format!(
        "counter {} after {} critical sections, {} lock attempts, lock free",
        o.counter, o.want, o.attempts
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::Params;
    use tessera_traces::{OpClass, TraceFile};

    #[test]
    fn every_critical_section_counts_once_and_the_lock_ends_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let args: Vec<(String, String)> = [("ctas", "6"), ("block", "64"), ("iters", "3")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let p = Params::parse(&SPEC, &args).unwrap();
        let o = compute(&p, &mut rec).unwrap();
        rec.finish().unwrap();
        assert_eq!((o.counter, o.lock), (6 * 2 * 3, 0));
        // Contention: some attempts failed (12 leaders on one lock, switching at every
        // failure), and every success is one CAS of the trace.
        assert!(o.attempts > u64::from(o.want), "{} attempts", o.attempts);
        let t = TraceFile::open(&path).unwrap();
        let k = &t.kernels()[0];
        let c = |cl: OpClass| k.counts.class_warp_insts[cl as usize];
        // Every attempt (CAS) and every release (EXCH) is a global atomic of the leaders.
        assert_eq!(c(OpClass::AtomicGlobal), o.attempts + u64::from(o.want));
        let cas = k
            .opcodes
            .iter()
            .find(|x| x.name == "ATOMG.E.CAS.STRONG.GPU")
            .expect("CAS recorded");
        assert_eq!(cas.class, OpClass::AtomicGlobal);
        assert!(k.opcodes.iter().any(|x| x.name == "NANOSLEEP"));
    }
}
