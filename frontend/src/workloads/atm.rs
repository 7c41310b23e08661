//! `atm`: bank transfers between accounts, each under the locks of both accounts (the
//! ATM benchmark of eltantawy-2018-inter-thread-synchronization-simt.txt section 6.4, "two
//! nested locks": 122K transactions by 24K threads on 1,000 accounts there). Each thread
//! moves `amount` from one account to another, holding the lower-numbered account's lock
//! while it takes the other's (ordered nesting: no wait-for cycle, no deadlock).
//!
//! Each acquire is a spin region (format version 3, [`crate::record::Warp::spin`]): the
//! first, `while (atomicCAS(&lock[lo], 0, me) != 0);` (head the CAS, value 0, exit when it
//! returned 0, empty tail); the second, `while (atomicCAS(&lock[hi], 0, me) != 0);` whose
//! tail is the transfer and both releases (`atomicExch(.., 0)`), `me` being `tid + 1`.
//! A lane waits for its second lock while holding its first, so the lanes of a warp take
//! turns (`for (l = 0; l < 32; l++) if (lane == l) { ... }`): two lanes of one warp
//! spinning together would hold first locks the other needs until both had their first
//! (a SIMT-induced deadlock, the thesis's Fig 1.1 with two locks), and a warp kept in the
//! first loop by one lane would keep the others' locks from warps in the second. A
//! single try-lock region over both locks cannot be replayed without value-dependent
//! paths (a lane that won one lock must release it), and without releasing them the
//! lanes of a warp can livelock in lockstep. The locks are sync words, checked to end at
//! 0; the balances are plain data.
//!
//! The host reference: every account's balance is its initial one plus what it received
//! minus what it sent, the total is conserved, and every lock is free.
//!
//! Per warp: `MOV` (prologue), `S2R`, `S2R`, `IMAD` (tid), `ISETP`, `@P EXIT`, `S2R` (lane),
//! three `IMAD.WIDE` + `LDG.E` (from, to, amount), `IMNMX` x2, `IADD3` (me), `IMAD.WIDE`
//! x2, `MOV`; per lane `l` (a counted loop of 32: `IADD3`, `ISETP`, `BRA`) `ISETP`, `BSSY`,
//! `BRA` and, for the lane whose turn it is, the first region (head
//! `ATOMG.E.CAS.STRONG.GPU`, `ISETP.EQ`; test `BRA`; back-edge `BRA`) and the second (head
//! `ATOMG.E.CAS.STRONG.GPU`, `ISETP.EQ`; test `BRA`; tail `MEMBAR.SC.GPU`, `IMAD.WIDE`,
//! `LDG.E`, `IMAD.WIDE`, `LDG.E`, `IADD3`, `IADD3`, `IMAD.WIDE`, `STG.E`, `IMAD.WIDE`,
//! `STG.E`, `MEMBAR.SC.GPU`, `ATOMG.E.EXCH.STRONG.GPU` x2; back-edge `BRA`), `BSYNC`;
//! then `EXIT`.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Atom, Cmp, Exit, LaunchSpec, Recorder, SyncCmp, WARP};
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "atm",
    help: "bank transfers under two nested CAS spin locks (lower account first), the lanes of a warp taking turns",
    params: &[
        ParamSpec { name: "accounts", default: "1000", help: "accounts, each with its lock (at least 2)" },
        ParamSpec { name: "transfers", default: "4096", help: "transfers, one per thread" },
        ParamSpec { name: "block", default: "128", help: "threads per CTA (a multiple of 32)" },
        ParamSpec { name: "seed", default: "1", help: "transfer generator seed" },
        ParamSpec { name: "resident", default: "16", help: "CTAs the recorder runs at once (its residency; at least 1)" },
        ParamSpec { name: "backoff", default: "0", help: "spin back-off base in core cycles, doubling up to 32x (0: none)" },
    ],
    run,
};

/// Every account's opening balance.
const OPENING: u32 = 1_000_000;

/// The balances and locks after the kernel, and the transfers.
pub(crate) struct Outcome {
    pub balances: Vec<u32>,
    pub locks: Vec<u32>,
    pub want: Vec<u32>,
    /// Lock tries the recorder ran, over all lanes.
    pub attempts: u64,
}

pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let accounts = p.u32("accounts")?;
    let n = p.u32("transfers")?;
    let block = p.u32("block")?;
    let resident = p.u32("resident")?;
    let base = u32::try_from(p.u64_any("backoff")?)
        .map_err(|_| p.invalid("backoff must fit in 32 bits"))?;
    let backoff = (base, base.saturating_mul(32));
    if !(2..=1 << 24).contains(&accounts) {
        return Err(p.invalid("accounts must be from 2 to 16777216"));
    }
    if block % 32 != 0 || block > 1024 {
        return Err(p.invalid("block must be a multiple of 32 from 32 to 1024"));
    }
    if n >= u32::MAX / 2 {
        return Err(p.invalid("too many transfers"));
    }
    let mut rng = SplitMix64(p.u64_any("seed")?);
    let (mut src, mut dst, mut amt) = (Vec::new(), Vec::new(), Vec::new());
    let mut want = vec![OPENING; accounts as usize];
    for _ in 0..n {
        let from = rng.below(accounts as u64) as u32;
        let to = (from + 1 + rng.below(accounts as u64 - 1) as u32) % accounts;
        let a = 1 + rng.below(100) as u32;
        want[from as usize] = want[from as usize].wrapping_sub(a);
        want[to as usize] = want[to as usize].wrapping_add(a);
        src.push(from);
        dst.push(to);
        amt.push(a);
    }
    let ctas = n.div_ceil(block);
    let src_buf = rec.alloc::<u32>("from", n as u64)?;
    let dst_buf = rec.alloc::<u32>("to", n as u64)?;
    let amt_buf = rec.alloc::<u32>("amount", n as u64)?;
    let balance = rec.alloc::<u32>("balance", accounts as u64)?;
    let lock = rec.alloc::<u32>("locks", accounts as u64)?;
    rec.upload(src_buf, &src)?;
    rec.upload(dst_buf, &dst)?;
    rec.upload(amt_buf, &amt)?;
    rec.upload_iter(balance, std::iter::repeat_n(OPENING, accounts as usize))?;
    rec.upload_iter(lock, std::iter::repeat_n(0, accounts as usize))?;
    rec.sync_words(lock, true)?;
    let mut spec = LaunchSpec::new("_Z3atmPKjS0_S0_PjS1_j", [ctas, 1, 1], [block, 1, 1]);
    spec.resident_ctas = resident;
    let whole = ArrayAnnotation::whole;
    spec.annotations = vec![
        whole("from", src_buf.base, src_buf.bytes(), Access::Read),
        whole("to", dst_buf.base, dst_buf.bytes(), Access::Read),
        whole("amount", amt_buf.base, amt_buf.bytes(), Access::Read),
        whole("balance", balance.base, balance.bytes(), Access::ReadWrite),
        whole("locks", lock.base, lock.bytes(), Access::ReadWrite),
    ];
    let attempts = std::sync::atomic::AtomicU64::new(0);
    rec.launch(&spec, &|w| {
        let tid = w.global_id_x();
        let past = w.icmp_imm(Cmp::Ge, &tid, n);
        w.exit_if(past);
        let lane = w.lane_id();
        let from = w.load(&src_buf, &tid);
        let to = w.load(&dst_buf, &tid);
        let a = w.load(&amt_buf, &tid);
        let lo = w.imin(&from, &to);
        let hi = w.imax(&from, &to);
        let me = w.iadd_imm(&tid, 1);
        let la = w.addr(&lock, &lo);
        let lb = w.addr(&lock, &hi);
        let zero = w.konst(0u32);
        w.for_range(WARP as u32, |w, l| {
            let turn = w.icmp_imm(Cmp::Eq, &lane, l);
            w.if_(turn, |w| {
                w.spin(
                    "lower account locked",
                    backoff,
                    |w| {
                        attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        w.atomic_cas(&la, &zero, &me);
                        Exit::when_imm(0, SyncCmp::Eq, 0)
                    },
                    |_| {},
                );
                w.spin(
                    "both accounts locked",
                    backoff,
                    |w| {
                        attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        w.atomic_cas(&lb, &zero, &me);
                        Exit::when_imm(0, SyncCmp::Eq, 0)
                    },
                    |w| {
                        w.fence_gpu();
                        let bf = w.load(&balance, &from);
                        let bt = w.load(&balance, &to);
                        let nf = w.isub(&bf, &a);
                        let nt = w.iadd(&bt, &a);
                        w.store(&balance, &from, &nf);
                        w.store(&balance, &to, &nt);
                        w.fence_gpu();
                        w.atomic(Atom::Exch, &lb, &zero, false);
                        w.atomic(Atom::Exch, &la, &zero, false);
                    },
                );
            });
        });
    })?;
    Ok(Outcome {
        balances: rec.download(balance)?,
        locks: rec.download(lock)?,
        want,
        attempts: attempts.into_inner(),
    })
}

fn check(o: &Outcome) -> Result<(), GenError> {
    check_eq("atm", "balance", &o.balances, &o.want)?;
    let total: u64 = o.balances.iter().map(|&b| u64::from(b)).sum();
    let opening = u64::from(OPENING) * o.balances.len() as u64;
    if total != opening {
        return Err(GenError::Mismatch {
            workload: "atm",
            detail: format!("total {total}, expected {opening} (money created or lost)"),
        });
    }
    check_eq("atm", "lock", &o.locks, &vec![0; o.locks.len()])
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check(&o)?;
    Ok(format!(
        "{} accounts, total conserved, {} lock tries, locks free",
        o.balances.len(),
        o.attempts
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::{param_error, params};
    use tessera_traces::{ExitTerm, TraceFile};

    #[test]
    fn balances_are_right_and_the_locks_end_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        // Few accounts: lanes and warps contend for them.
        let args = params(&[("accounts", "24"), ("transfers", "800"), ("block", "64")]);
        let p = Params::parse(&SPEC, &args).unwrap();
        let o = compute(&p, &mut rec).unwrap();
        assert_eq!(rec.stats.warp_thread_allocs, 0);
        rec.finish().unwrap();
        check(&o).unwrap();
        assert!(o.attempts > 800, "{} tries", o.attempts);
        let t = TraceFile::open(&path).unwrap();
        tessera_traces::verify(&t).unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.spin_regions.len(), 2);
        let eq0 = [ExitTerm::own(0, SyncCmp::Eq)];
        for r in &k.spin_regions {
            assert_eq!((&r.terms[..], r.all), (&eq0[..], true));
            let start = k.statics.iter().find(|s| s.pc == r.start_pc).unwrap();
            assert_eq!(
                k.opcodes[start.opcode as usize].name,
                "ATOMG.E.CAS.STRONG.GPU"
            );
        }
        let sw = &t.index().sync_words[0];
        assert_eq!((sw.name.as_str(), sw.expect.len()), ("locks", 24));
        // One lane at a time: every region instance runs on one lane, its test's
        // constant 0.
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let first = d.warps[0].insts.start;
        let tests: Vec<usize> = (0..d.warp(0).len())
            .filter(|&j| k.spin_regions.iter().any(|r| r.test_pc == d.warp(0)[j].pc))
            .collect();
        assert_eq!(tests.len(), 64);
        for j in tests {
            assert_eq!(d.warp(0)[j].mask.count_ones(), 1);
            assert_eq!(d.operands_of(first + j, 1), Some(&[0u64][..]));
        }
    }

    #[test]
    fn parameters_are_checked() {
        for kv in [[("accounts", "1")], [("block", "100")]] {
            let m = param_error("atm", &kv);
            assert!(m.contains("workload atm"), "{m}");
        }
    }
}
