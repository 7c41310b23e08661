//! `spinlock`: one global lock guards a counter. In each warp, lane 0 (the lanes of a warp
//! are serialized behind one leader, as in TSP's rare critical sections,
//! eltantawy-2018-inter-thread-synchronization-simt.txt section 6.4) takes the lock `iters`
//! times: `while (atomicCAS(&lock, 0, 1) != 0) back off;`, then the critical section reads
//! the counter, adds one and writes it back, `__threadfence()`, and releases with
//! `atomicExch(&lock, 0)`. The host reference: the counter equals warps x iters and the
//! lock is free at the end.
//!
//! The acquire loop is a spin region (format version 3, [`crate::record::Warp::spin`]):
//! recorded once per critical section, its CAS repeated by the timing model until the
//! simulated lock word lets it through, with the back-off `backoff` cycles doubling up to
//! 32 times that. `lock` is a sync word, checked to end at 0; the counter is plain data
//! the lock protects.
//!
//! Per warp: `S2R` (lane), `ISETP` (lane 0), `BSSY`, `BRA`, then for the leader `MOV`,
//! `MOV`, `IMAD.WIDE.U32` x2, and per critical section the region: head
//! `ATOMG.E.CAS.STRONG.GPU` (value 0), `ISETP.EQ`; test `BRA` (exit when the CAS returned
//! 0); tail `LDG.E`, `IADD3`, `STG.E`, `MEMBAR.SC.GPU`, `ATOMG.E.EXCH.STRONG.GPU`;
//! back-edge `BRA`; the loop's `IADD3`, `ISETP`, `BRA`; then `BSYNC`, `EXIT`.

use super::{GenError, ParamSpec, Params, WorkloadSpec};
use crate::record::{Atom, Cmp, Exit, LaunchSpec, Recorder, SyncCmp};
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "spinlock",
    help: "one global lock (atomicCAS spin region with back-off, atomicExch release) guarding a counter; a leader lane per warp",
    params: &[
        ParamSpec { name: "ctas", default: "16", help: "CTAs" },
        ParamSpec { name: "block", default: "128", help: "threads per CTA (a multiple of 32)" },
        ParamSpec { name: "iters", default: "4", help: "critical sections per warp" },
        ParamSpec { name: "resident", default: "16", help: "CTAs the recorder runs at once (its residency; at least 1)" },
        ParamSpec { name: "backoff", default: "0", help: "spin back-off base in core cycles, doubling up to 32x (0: none)" },
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
    let base = u32::try_from(p.u64_any("backoff")?)
        .map_err(|_| p.invalid("backoff must fit in 32 bits"))?;
    let backoff = (base, base.saturating_mul(32));
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
    rec.sync_words(lock, true)?;
    let mut spec = LaunchSpec::new("_Z8spinlockPjS_j", [ctas, 1, 1], [block, 1, 1]);
    spec.resident_ctas = resident;
    spec.annotations = vec![
        ArrayAnnotation::whole("lock", lock.base, 4, Access::ReadWrite),
        ArrayAnnotation::whole("counter", counter.base, 4, Access::ReadWrite),
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
                w.spin(
                    "lock acquired",
                    backoff,
                    |w| {
                        attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        w.atomic_cas(&la, &zero, &one);
                        Exit::when_imm(0, SyncCmp::Eq, 0)
                    },
                    |w| {
                        // The recorder switches warps only where one waits: let the
                        // others try while this one holds the lock (their attempts fail,
                        // as they would while the critical section takes time on a GPU).
                        // Emits nothing.
                        w.spin_yield();
                        let c = w.ld::<u32>(&ca);
                        let c1 = w.iadd_imm(&c, 1);
                        w.st(&ca, &c1);
                        w.fence_gpu();
                        w.atomic(Atom::Exch, &la, &zero, false);
                    },
                );
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
        // failure); the trace holds one CAS per critical section (the region's head,
        // repeated by the timing model) and one release.
        assert!(o.attempts > u64::from(o.want), "{} attempts", o.attempts);
        let t = TraceFile::open(&path).unwrap();
        let k = &t.kernels()[0];
        let c = |cl: OpClass| k.counts.class_warp_insts[cl as usize];
        assert_eq!(c(OpClass::AtomicGlobal), 2 * u64::from(o.want));
        let cas = k
            .opcodes
            .iter()
            .find(|x| x.name == "ATOMG.E.CAS.STRONG.GPU")
            .expect("CAS recorded");
        assert_eq!(cas.class, OpClass::AtomicGlobal);
        assert!(!k.opcodes.iter().any(|x| x.name == "NANOSLEEP"));
        // One region: exit when the CAS (value 0) returned 0.
        assert_eq!(k.spin_regions.len(), 1, "{:?}", k.spin_regions);
        let r = &k.spin_regions[0];
        assert_eq!(r.terms, [tessera_traces::ExitTerm::own(0, SyncCmp::Eq)]);
        assert!(r.all);
        assert_eq!((r.backoff_base, r.backoff_max), (0, 0));
        assert_eq!(r.label, "lock acquired");
        let start = k.statics.iter().find(|s| s.pc == r.start_pc).unwrap();
        assert_eq!(
            k.opcodes[start.opcode as usize].name,
            "ATOMG.E.CAS.STRONG.GPU"
        );
        // The lock is a sync word that starts and must end at 0.
        let sw = &t.index().sync_words;
        assert_eq!(sw.len(), 1);
        assert_eq!(
            (sw[0].name.as_str(), &sw[0].init[..], &sw[0].expect[..]),
            ("lock", &[0][..], &[0][..])
        );
        tessera_traces::verify(&t).unwrap();
    }

    /// The back-off parameter goes into the region: base and 32 times base.
    #[test]
    fn backoff_is_the_regions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.tst");
        let args = crate::workloads::test_support::params(&[("ctas", "2"), ("backoff", "100")]);
        crate::workloads::generate("spinlock", &args, 80, &path).unwrap();
        let t = TraceFile::open(&path).unwrap();
        let r = &t.kernels()[0].spin_regions[0];
        assert_eq!((r.backoff_base, r.backoff_max), (100, 3200));
    }
}
