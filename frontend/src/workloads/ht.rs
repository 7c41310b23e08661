//! `ht`: chained hash-table insertion with a lock per bucket, the critical section of
//! eltantawy-2018-inter-thread-synchronization-simt.txt Fig 1.2a (the HT benchmark of its
//! section 6.4, after CUDA by Example): each thread inserts its own key. It fills its
//! node (`pool[tid]`: key, then `next` under the lock), hashes the key to a bucket, and
//! spins `while (!done) { if (atomicCAS(&lock[b], 0, 1) == 0) { __threadfence();
//! node.next = head[b]; head[b] = node; __threadfence(); atomicExch(&lock[b], 0); done =
//! true; } }`: the release inside the loop, the thesis's workaround for the SIMT deadlock
//! of Fig 1.1. Fewer buckets, more contention (Fig 1.2b-e sweep 128 to 4,096).
//!
//! The loop is a spin region (format version 3, [`crate::record::Warp::spin`]): head the
//! lane's CAS on its bucket's lock (value 0), exit when it returned 0; tail the insertion
//! and the release, on the lanes that won. Lanes of one warp whose keys share a bucket
//! take it one after the other (the CASes of one instruction apply in lane order). The
//! locks are sync words, checked to end at 0; heads and nodes are plain data.
//!
//! The host reference walks every bucket's chain: each key appears exactly once, in its
//! own bucket, and each bucket holds as many nodes as keys hash to it.
//!
//! Per warp: `MOV` (prologue), `S2R`, `S2R`, `IMAD` (tid), `ISETP`, `@P EXIT` (threads past
//! `insertions`), `IMAD.WIDE`, `LDG.E` (key), `IMAD.WIDE`, `STG.E` (node key), `LOP3`/
//! `IMAD.HI`+`IMAD` (bucket), `IMAD.WIDE` (lock), `MOV`, `MOV`, then the region: head
//! `ATOMG.E.CAS.STRONG.GPU`, `ISETP.EQ`; test `BRA`; tail `MEMBAR.SC.GPU`, `IMAD.WIDE`,
//! `LDG.E` (head), `IMAD.WIDE`, `STG.E` (next), `IMAD.WIDE`, `STG.E` (head),
//! `MEMBAR.SC.GPU`, `ATOMG.E.EXCH.STRONG.GPU`; back-edge `BRA`; `EXIT`.

use super::{GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Atom, Cmp, Exit, LaunchSpec, Recorder, SyncCmp};
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "ht",
    help: "chained hash-table insertion, a CAS spin lock per bucket released inside the loop (ElTantawy Fig 1.2a)",
    params: &[
        ParamSpec { name: "buckets", default: "256", help: "hash buckets, each with its lock (128 to 4096)" },
        ParamSpec { name: "insertions", default: "4096", help: "keys inserted, one per thread" },
        ParamSpec { name: "block", default: "128", help: "threads per CTA (a multiple of 32)" },
        ParamSpec { name: "seed", default: "1", help: "key generator seed" },
        ParamSpec { name: "resident", default: "16", help: "CTAs the recorder runs at once (its residency; at least 1)" },
        ParamSpec { name: "backoff", default: "0", help: "spin back-off base in core cycles, doubling up to 32x (0: none)" },
    ],
    run,
};

/// No node: the end of a chain.
const NIL: u32 = u32::MAX;

/// What the table holds after the kernel.
pub(crate) struct Outcome {
    pub keys: Vec<u32>,
    pub buckets: u32,
    pub heads: Vec<u32>,
    pub next: Vec<u32>,
    pub node_keys: Vec<u32>,
    pub locks: Vec<u32>,
    /// Lock attempts (CASes) the recorder ran, over all lanes.
    pub attempts: u64,
}

/// `n` distinct keys.
fn keys(n: u32, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64(seed);
    let mut seen = std::collections::HashSet::with_capacity(n as usize);
    let mut v = Vec::with_capacity(n as usize);
    while v.len() < n as usize {
        let k = rng.next_u64() as u32;
        if seen.insert(k) {
            v.push(k);
        }
    }
    v
}

pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let buckets = p.u32("buckets")?;
    let n = p.u32("insertions")?;
    let block = p.u32("block")?;
    let resident = p.u32("resident")?;
    let base = u32::try_from(p.u64_any("backoff")?)
        .map_err(|_| p.invalid("backoff must fit in 32 bits"))?;
    let backoff = (base, base.saturating_mul(32));
    if !(128..=4096).contains(&buckets) {
        return Err(p.invalid("buckets must be from 128 to 4096"));
    }
    if block % 32 != 0 || block > 1024 {
        return Err(p.invalid("block must be a multiple of 32 from 32 to 1024"));
    }
    if n > 1 << 24 {
        return Err(p.invalid("insertions must be at most 16777216"));
    }
    let keys = keys(n, p.u64_any("seed")?);
    let ctas = n.div_ceil(block);
    let key_buf = rec.alloc::<u32>("keys", n as u64)?;
    let node_key = rec.alloc::<u32>("pool_key", n as u64)?;
    let next = rec.alloc::<u32>("pool_next", n as u64)?;
    let heads = rec.alloc::<u32>("heads", buckets as u64)?;
    let lock = rec.alloc::<u32>("locks", buckets as u64)?;
    rec.upload(key_buf, &keys)?;
    rec.upload_iter(heads, std::iter::repeat_n(NIL, buckets as usize))?;
    rec.upload_iter(lock, std::iter::repeat_n(0, buckets as usize))?;
    rec.sync_words(lock, true)?;
    let mut spec = LaunchSpec::new("_Z9ht_insertPKjPjS1_S1_S1_j", [ctas, 1, 1], [block, 1, 1]);
    spec.resident_ctas = resident;
    let whole = ArrayAnnotation::whole;
    spec.annotations = vec![
        whole("keys", key_buf.base, key_buf.bytes(), Access::Read),
        whole(
            "pool_key",
            node_key.base,
            node_key.bytes(),
            Access::ReadWrite,
        ),
        whole("pool_next", next.base, next.bytes(), Access::ReadWrite),
        whole("heads", heads.base, heads.bytes(), Access::ReadWrite),
        whole("locks", lock.base, lock.bytes(), Access::ReadWrite),
    ];
    let attempts = std::sync::atomic::AtomicU64::new(0);
    rec.launch(&spec, &|w| {
        let tid = w.global_id_x();
        let past = w.icmp_imm(Cmp::Ge, &tid, n);
        w.exit_if(past);
        let key = w.load(&key_buf, &tid);
        w.store(&node_key, &tid, &key);
        let b = w.rem_imm(&key, buckets);
        let la = w.addr(&lock, &b);
        let zero = w.konst(0u32);
        let one = w.konst(1u32);
        w.spin(
            "bucket lock acquired",
            backoff,
            |w| {
                let lanes = w.active().count_ones();
                attempts.fetch_add(u64::from(lanes), std::sync::atomic::Ordering::Relaxed);
                w.atomic_cas(&la, &zero, &one);
                Exit::when_imm(0, SyncCmp::Eq, 0)
            },
            |w| {
                w.fence_gpu();
                let h = w.load(&heads, &b);
                w.store(&next, &tid, &h);
                w.store(&heads, &b, &tid);
                w.fence_gpu();
                w.atomic(Atom::Exch, &la, &zero, false);
            },
        );
    })?;
    Ok(Outcome {
        keys,
        buckets,
        heads: rec.download(heads)?,
        next: rec.download(next)?,
        node_keys: rec.download(node_key)?,
        locks: rec.download(lock)?,
        attempts: attempts.into_inner(),
    })
}

/// The host reference: every bucket's chain holds exactly the keys that hash to it, each
/// once; every lock is free. Returns the longest chain.
pub(crate) fn check(o: &Outcome) -> Result<u32, GenError> {
    let bad = |detail: String| GenError::Mismatch {
        workload: "ht",
        detail,
    };
    let n = o.keys.len();
    if let Some(b) = o.locks.iter().position(|&l| l != 0) {
        return Err(bad(format!(
            "lock {b} is {} at the end (expected 0)",
            o.locks[b]
        )));
    }
    let mut want = vec![0u32; o.buckets as usize];
    for k in &o.keys {
        want[(k % o.buckets) as usize] += 1;
    }
    let mut seen = vec![false; n];
    let mut longest = 0;
    for (b, &head) in o.heads.iter().enumerate() {
        let mut len = 0u32;
        let mut node = head;
        while node != NIL {
            let i = node as usize;
            if i >= n || seen[i] {
                return Err(bad(format!(
                    "bucket {b}: node {node} is not a fresh node (a cycle or a double insertion)"
                )));
            }
            seen[i] = true;
            if o.node_keys[i] != o.keys[i] || o.keys[i] % o.buckets != b as u32 {
                return Err(bad(format!(
                    "bucket {b}: node {i} holds key {} (inserted {}, which hashes to bucket {})",
                    o.node_keys[i],
                    o.keys[i],
                    o.keys[i] % o.buckets
                )));
            }
            len += 1;
            node = o.next[i];
        }
        if len != want[b] {
            return Err(bad(format!(
                "bucket {b} holds {len} nodes, expected {}",
                want[b]
            )));
        }
        longest = longest.max(len);
    }
    if let Some(i) = seen.iter().position(|s| !s) {
        return Err(bad(format!(
            "key {} (thread {i}) is in no chain",
            o.keys[i]
        )));
    }
    Ok(longest)
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    let longest = check(&o)?;
    Ok(format!(
        "{} keys in {} buckets (longest chain {longest}), {} lock attempts, locks free",
        o.keys.len(),
        o.buckets,
        o.attempts
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::{param_error, params};
    use tessera_traces::{OpClass, TraceFile};

    #[test]
    fn every_key_is_inserted_once_and_the_locks_end_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let args = params(&[("buckets", "128"), ("insertions", "1000"), ("block", "64")]);
        let p = Params::parse(&SPEC, &args).unwrap();
        let o = compute(&p, &mut rec).unwrap();
        // Merging tails grows buffers on the scheduler's thread only.
        assert_eq!(rec.stats.warp_thread_allocs, 0);
        rec.finish().unwrap();
        check(&o).unwrap();
        // 1,000 keys on 128 locks: lanes collide, inside warps and across them.
        assert!(o.attempts > 1000, "{} attempts", o.attempts);
        let t = TraceFile::open(&path).unwrap();
        tessera_traces::verify(&t).unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.spin_regions.len(), 1);
        let r = &k.spin_regions[0];
        assert_eq!(
            (r.terms.len(), r.terms[0].value, r.terms[0].cmp),
            (1, 0, SyncCmp::Eq)
        );
        // One CAS and one release per warp (the region recorded once), on 16 CTAs of 2
        // warps (the last partly filled).
        let c = |cl: OpClass| k.counts.class_warp_insts[cl as usize];
        let warps = 1000u64.div_ceil(32);
        assert_eq!(c(OpClass::AtomicGlobal), 2 * warps);
        let sw = &t.index().sync_words;
        assert_eq!(sw.len(), 1);
        assert_eq!((sw[0].init.len(), sw[0].expect.len()), (128, 128));
        assert!(sw[0].expect.iter().all(|&v| v == 0));
        // The tail's release ran on every valid lane: the merged masks cover them.
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let insts = d.warp(0);
        let end = insts.iter().position(|i| i.pc == r.end_pc).unwrap();
        assert_eq!(insts[end - 1].mask, u32::MAX);
    }

    #[test]
    fn bucket_counts_are_checked() {
        for kv in [
            [("buckets", "64")],
            [("buckets", "8192")],
            [("block", "48")],
        ] {
            let m = param_error("ht", &kv);
            assert!(m.contains("workload ht"), "{m}");
        }
    }
}
