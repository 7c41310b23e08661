//! `reduce`: a sum of `n` u32 values in one kernel, the "threadFenceReduction" pattern of
//! the CUDA samples: each CTA reduces its elements in shared memory (`BAR.SYNC` per tree
//! step), thread 0 writes the CTA's partial sum, issues `__threadfence()`
//! (`MEMBAR.SC.GPU`) so that the partial is visible device-wide before it announces it,
//! and takes a ticket with `atomicAdd(&count, 1)` (`ATOMG.E.ADD.STRONG.GPU`, operands
//! recorded); the CTA that draws the last ticket sums all partials with its warp 0. This
//! is the workload that emits a device-scope fence whose purpose the timing model must
//! honour (a partial read by another CTA in the same kernel).
//!
//! The ticket and the last CTA's sum are a branch region (format version 4,
//! [`crate::record::Warp::branch`], label `last CTA`) entered by the CTA's warp 0 (lanes 0
//! to 31): thread 0 draws the ticket, and every lane tests lane 0's
//! ([`Exit::when_lane`]`(0, 0, Eq, ctas - 1)`, a broadcast). `count` is a sync word (0 at
//! the start, `ctas` at the end), and the timing model decides on its simulated value
//! which CTA takes the tail. So every CTA's warp 0 records the tail (as a dry pass: the
//! stores leave memory as it is); only the last one runs it in the recorder. The tail is
//! warp-wide, so its size grows with `ctas / 32`, not `ctas`: lane `l` sums partials `l`,
//! `l + 32`, ... (coalesced loads), five `SHFL.DOWN` steps sum the lanes, and lane 0
//! stores the total.
//!
//! Per warp: `MOV` (prologue), `S2R`, `S2R`, `IMAD` (i), `S2R` (t), `ISETP` (i < n),
//! `MOV` (0), `BSSY`, `BRA`, [`IMAD.WIDE`, `LDG.E` for lanes in range], `BSYNC`, `LEA`,
//! `STS`; then per tree step (`log2(block)` of them) `BAR.SYNC`, `ISETP`, `BSSY`, `BRA`,
//! [`IADD3`, `LEA`, `LDS`, `LDS`, `IADD3`, `STS` for lanes below the step], `BSYNC`;
//! then `ISETP` (t < 32), `BSSY`, `BRA`, and for warp 0: `ISETP` (t == 0), `BSSY`,
//! `BRA`, [`LDS`, `S2R`, `IMAD.WIDE`, `STG.E` (the partial), `MEMBAR.SC.GPU` for thread
//! 0], `BSYNC`, `MOV`, `IMAD.WIDE`, `MOV`, then the branch region, every instruction
//! on all 32 lanes but thread 0's: head `BSSY`, `BRA`, [`ATOMG.E.ADD.STRONG.GPU` (the
//! ticket, value 0) on lane 0], `BSYNC`, `ISETP.EQ.U32.AND`; test `BRA` (operands per
//! lane: `ctas - 1`, then lane 0's ticket, the template value); tail `MOV` (the sum),
//! `MOV` (the index, t), `BSSY`, per step (`ceil(ctas / 32)`) `ISETP` (index < ctas),
//! `BRA`, `IMAD.WIDE.U32`, `LDG.E` (partial index), `IADD3` (sum), `IADD3` (index + 32),
//! then `ISETP`, `BRA`, `BSYNC`, five `SHFL.DOWN`, `IADD3` (offsets 16 to 1), `BSSY`,
//! `BRA`, [`IMAD.WIDE.U32`, `STG.E` (the total) on lane 0], `BSYNC`; end `BRA`; then
//! `BSYNC`, `EXIT`.

use super::{block_ranges, check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Atom, Cmp, Exit, LaunchSpec, Recorder, SharedArr, SyncCmp};
use std::cell::Cell;
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "reduce",
    help: "sum of n u32 values: per-CTA shared-memory trees, __threadfence, last CTA totals (threadFenceReduction)",
    params: &[
        ParamSpec { name: "n", default: "65536", help: "elements" },
        ParamSpec { name: "block", default: "256", help: "threads per CTA (a power of two)" },
        ParamSpec { name: "seed", default: "1", help: "input generator seed" },
    ],
    run,
};

/// The device's partial sums and total, and the reference's.
pub(crate) struct Outcome {
    pub got: (Vec<u32>, u32),
    pub want: (Vec<u32>, u32),
}

pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let n = p.u32("n")?;
    let block = p.u32("block")?;
    if !block.is_power_of_two() || !(32..=1024).contains(&block) {
        return Err(p.invalid("block must be a power of two from 32 to 1024"));
    }
    let ctas = n.div_ceil(block);
    let mut rng = SplitMix64(p.u64_any("seed")?);
    let input: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let x = rec.alloc::<u32>("in", n as u64)?;
    let partial = rec.alloc::<u32>("partial", ctas as u64)?;
    let count = rec.alloc::<u32>("count", 1)?;
    let out = rec.alloc::<u32>("out", 1)?;
    rec.upload(x, &input)?;
    rec.upload(count, &[0])?;
    rec.sync_words(count, true)?;
    let mut spec = LaunchSpec::new("_Z6reducePKjPjS1_S1_j", [ctas, 1, 1], [block, 1, 1]);
    spec.shmem_bytes = block * 4;
    spec.annotations = vec![
        ArrayAnnotation {
            name: "in".into(),
            base: x.base,
            bytes: x.bytes(),
            access: Access::Read,
            ranges: block_ranges(&x, block, ctas),
        },
        // The last CTA reads every partial: no per-CTA ranges for it.
        ArrayAnnotation {
            name: "partial".into(),
            base: partial.base,
            bytes: partial.bytes(),
            access: Access::ReadWrite,
            ranges: Vec::new(),
        },
        ArrayAnnotation {
            name: "count".into(),
            base: count.base,
            bytes: 4,
            access: Access::ReadWrite,
            ranges: Vec::new(),
        },
        ArrayAnnotation {
            name: "out".into(),
            base: out.base,
            bytes: 4,
            access: Access::ReadWrite,
            ranges: Vec::new(),
        },
    ];
    let sh = SharedArr::<u32>::new(0, block);
    rec.launch(&spec, &|w| {
        let i = w.global_id_x();
        let t = w.tid(0);
        let inside = w.icmp_imm(Cmp::Lt, &i, n);
        let mut v = w.konst(0u32);
        w.if_(inside, |w| {
            let loaded = w.load(&x, &i);
            for l in 0..32 {
                if w.is_active(l) {
                    v.v[l] = loaded.v[l];
                }
            }
            v.reg = loaded.reg;
        });
        let a = w.shared_addr(&sh, &t);
        w.sts(&a, &v);
        let mut s = block / 2;
        while s > 0 {
            w.barrier();
            let below = w.icmp_imm(Cmp::Lt, &t, s);
            w.if_(below, |w| {
                let o = w.iadd_imm(&t, s);
                let b = w.shared_addr(&sh, &o);
                let p = w.lds::<u32>(&a);
                let q = w.lds::<u32>(&b);
                let r = w.iadd(&p, &q);
                w.sts(&a, &r);
            });
            s /= 2;
        }
        // Warp 0 (threads 0 to 31: `t` is the lane) takes part in the last CTA's path.
        let warp0 = w.icmp_imm(Cmp::Lt, &t, 32);
        w.if_(warp0, |w| {
            let first = w.icmp_imm(Cmp::Eq, &t, 0);
            w.if_(first, |w| {
                let total = w.lds::<u32>(&a);
                let c = w.ctaid(0);
                w.store(&partial, &c, &total);
                w.fence_gpu();
            });
            let zero = w.konst(0u32);
            let ca = w.addr(&count, &zero);
            let one = w.konst(1u32);
            w.branch(
                "last CTA",
                |w| {
                    // Thread 0 draws the ticket; the warp reads it from lane 0.
                    w.if_(first, |w| {
                        w.atomic(Atom::Add, &ca, &one, true);
                    });
                    Exit::when_lane(0, 0, SyncCmp::Eq, ctas - 1)
                },
                |w, _ticket| {
                    // Lane l sums partials l, l + 32, ...: one coalesced load per step.
                    let mut acc = w.konst(0u32);
                    let k = Cell::new(w.mov(&t));
                    w.while_(
                        |w| w.icmp_imm(Cmp::Lt, &k.get(), ctas),
                        |w| {
                            let mut i = k.get();
                            let pk = w.load(&partial, &i);
                            w.iadd_acc(&mut acc, &pk);
                            w.iadd_imm_acc(&mut i, 32);
                            k.set(i);
                        },
                    );
                    // The warp's sum in lane 0: five shuffle steps.
                    for d in [16u32, 8, 4, 2, 1] {
                        w.unrolled(d.trailing_zeros() as u8, |w| {
                            let o = w.shfl_down(&acc, d);
                            w.iadd_acc(&mut acc, &o);
                        });
                    }
                    w.if_(first, |w| w.store(&out, &zero, &acc));
                },
            );
        });
    })?;
    let got = (rec.download(partial)?, rec.download(out)?[0]);
    let parts: Vec<u32> = input
        .chunks(block as usize)
        .map(|c| c.iter().fold(0u32, |s, &v| s.wrapping_add(v)))
        .collect();
    let total = parts.iter().fold(0u32, |s, &v| s.wrapping_add(v));
    Ok(Outcome {
        got,
        want: (parts, total),
    })
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check_eq("reduce", "partial", &o.got.0, &o.want.0)?;
    check_eq("reduce", "out", &[o.got.1], &[o.want.1])?;
    Ok(format!(
        "sum {} of {} partials verified",
        o.got.1,
        o.got.0.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{generate, GenError, Params};
    use tessera_traces::{ExitTerm, OpClass, RegionKind, Scope, TraceFile};

    fn params(n: u32, block: u32) -> Vec<(String, String)> {
        vec![
            ("n".into(), n.to_string()),
            ("block".into(), block.to_string()),
        ]
    }

    fn record(dir: &std::path::Path, n: u32, block: u32) -> TraceFile {
        let path = dir.join("r.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let p = Params::parse(&SPEC, &params(n, block)).unwrap();
        let o = compute(&p, &mut rec).unwrap();
        rec.finish().unwrap();
        assert_eq!(o.got, o.want);
        TraceFile::open(&path).unwrap()
    }

    /// Instructions of the last CTA's tail per CTA: `MOV` (the sum), `MOV` (the index),
    /// `BSSY`, per step (`ceil(ctas / 32)`) `ISETP`, `BRA`, `IMAD.WIDE.U32`, `LDG.E`,
    /// `IADD3`, `IADD3`, then `ISETP`, `BRA`, `BSYNC`, five `SHFL.DOWN`, `IADD3`, then
    /// `BSSY`, `BRA`, `IMAD.WIDE.U32`, `STG.E`, `BSYNC`.
    fn tail_len(ctas: u32) -> usize {
        3 + 6 * ctas.div_ceil(32) as usize + 3 + 10 + 5
    }

    #[test]
    fn sums_match_and_the_fence_and_tickets_are_recorded() {
        let (n, block) = (5000u32, 128u32);
        let dir = tempfile::tempdir().unwrap();
        let t = record(dir.path(), n, block);
        let k = &t.kernels()[0];
        let ctas = n.div_ceil(block) as u64;
        let warps = ctas * block as u64 / 32;
        let c = |cl: OpClass| k.counts.class_warp_insts[cl as usize];
        // One fence and one ticket per CTA (thread 0's warp), with device scope.
        assert_eq!(c(OpClass::Fence), ctas);
        assert_eq!(c(OpClass::AtomicGlobal), ctas);
        let fence = k
            .opcodes
            .iter()
            .find(|o| o.class == OpClass::Fence)
            .unwrap();
        assert_eq!(
            (fence.name.as_str(), fence.scope),
            ("MEMBAR.SC.GPU", Scope::Gpu)
        );
        // log2(block) barriers in every warp.
        assert_eq!(c(OpClass::Barrier), warps * block.trailing_zeros() as u64);
        // Global loads: one per warp with a lane in range, plus ceil(ctas / 32) coalesced
        // partial loads in every CTA's recorded tail; stores: one partial per CTA and
        // each tail's total; five shuffles per tail.
        let in_range = (0..warps).filter(|w| w * 32 < n as u64).count() as u64;
        assert_eq!(c(OpClass::LoadGlobal), in_range + ctas * ctas.div_ceil(32));
        assert_eq!(c(OpClass::StoreGlobal), 2 * ctas);
        assert_eq!(c(OpClass::WarpShuffle), 5 * ctas);
        // The last CTA's branch: taken when lane 0's ticket is ctas - 1; nothing rebased.
        assert_eq!(k.spin_regions.len(), 1);
        let r = &k.spin_regions[0];
        assert_eq!(r.kind, RegionKind::Branch);
        assert_eq!(
            r.terms,
            [ExitTerm {
                value: 0,
                cmp: SyncCmp::Eq,
                lane: 0
            }]
        );
        assert_eq!(r.label, "last CTA");
        assert!(r.rebased.is_empty());
        assert_eq!((r.backoff_base, r.backoff_max), (0, 0));
        let op_at = |pc: u32| {
            let s = k.statics.iter().find(|s| s.pc == pc).unwrap();
            k.opcodes[s.opcode as usize].name.as_str()
        };
        assert_eq!(op_at(r.start_pc), "BSSY");
        // `count` is a sync word from 0 to one ticket per CTA.
        let sw = &t.index().sync_words;
        assert_eq!(
            (sw[0].name.as_str(), &sw[0].init[..], &sw[0].expect[..]),
            ("count", &[0][..], &[ctas as u32][..])
        );
        // Each CTA's warp 0 enters the region on all 32 lanes: thread 0 alone draws the
        // ticket, the test and the tail run on every lane; the test records per lane the
        // constant, then lane 0's ticket (the template value).
        let mut dec = t.decoder();
        let mut tickets = Vec::new();
        for cta in 0..ctas as u32 {
            let d = dec.kernel_cta(0, cta).unwrap().clone();
            let insts = d.warp(0);
            let at = |pc: u32| insts.iter().position(|i| i.pc == pc).unwrap();
            let (start, test, end) = (at(r.start_pc), at(r.test_pc), at(r.end_pc));
            let head: Vec<(&str, u32)> = insts[start..test]
                .iter()
                .map(|i| (op_at(i.pc), i.mask))
                .collect();
            assert_eq!(
                head,
                [
                    ("BSSY", u32::MAX),
                    ("BRA", !1),
                    ("ATOMG.E.ADD.STRONG.GPU", 1),
                    ("BSYNC", u32::MAX),
                    ("ISETP.EQ.U32.AND", u32::MAX),
                ]
            );
            assert_eq!((insts[test].mask, insts[end].mask), (u32::MAX, u32::MAX));
            assert_eq!(end - test - 1, tail_len(ctas as u32));
            // The partials are read coalesced: lane l reads partial l + 32 j.
            let loads: Vec<_> = insts[test..end]
                .iter()
                .filter(|i| op_at(i.pc) == "LDG.E")
                .collect();
            assert_eq!(loads.len() as u64, ctas.div_ceil(32));
            assert_eq!(loads[0].mask, u32::MAX);
            assert_eq!(
                loads.last().unwrap().mask,
                u32::MAX >> (32 - (ctas - 1) % 32 - 1)
            );
            let ops = d
                .operands_of(d.warps[0].insts.start + test, r.test_operands() as u8)
                .unwrap();
            assert_eq!(ops.len(), 32 * r.test_operands());
            assert!(ops.chunks(2).all(|o| o == [ctas - 1, ops[1]]));
            tickets.push(ops[1]);
            // Only warp 0 takes part.
            let w1 = d.warp(1);
            assert!(w1.iter().all(|i| i.pc != r.test_pc));
        }
        tickets.sort_unstable();
        assert_eq!(tickets, (0..ctas).collect::<Vec<u64>>());
        tessera_traces::verify(&t).unwrap();
    }

    /// The tails recorded in every CTA read ceil(ctas / 32) coalesced partials each, not
    /// ctas: at n = 65536 (256 CTAs) at least 20x fewer instructions than a tail in which
    /// thread 0 alone loads every partial (7 instructions each, ctas * ctas in all).
    #[test]
    fn the_tails_grow_with_ctas_over_32() {
        let (n, block) = (65536u32, 256u32);
        let dir = tempfile::tempdir().unwrap();
        let t = record(dir.path(), n, block);
        let k = &t.kernels()[0];
        let ctas = u64::from(n / block);
        let tails = ctas * tail_len(ctas as u32) as u64;
        assert!(tails * 20 <= 7 * ctas * ctas, "{tails} tail instructions");
        // Global loads: the inputs (one per warp) and the tails' partials.
        let loads = k.counts.class_warp_insts[OpClass::LoadGlobal as usize];
        assert_eq!(loads, u64::from(n / 32) + ctas * ctas / 32);
        assert!((loads - u64::from(n / 32)) * 20 <= ctas * ctas);
        // The whole trace: the CTA trees and the tails, well under ctas * ctas * 7.
        assert!(
            k.counts.warp_insts * 2 < 7 * ctas * ctas,
            "{}",
            k.counts.warp_insts
        );
        tessera_traces::verify(&t).unwrap();
    }

    #[test]
    fn block_must_be_a_power_of_two() {
        let dir = tempfile::tempdir().unwrap();
        let e = generate("reduce", &params(100, 96), 80, &dir.path().join("x.tst")).unwrap_err();
        assert!(matches!(e, GenError::Params(_)));
        assert!(
            e.to_string().contains("power of two") && e.to_string().contains("valid parameters"),
            "{e}"
        );
    }
}
