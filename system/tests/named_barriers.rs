//! Named barriers in the SM (issue 24): `BAR.ARV id, n` counts a warp without making it
//! wait, `BAR.SYNC id, n` waits until `n` threads have arrived; written with the trace
//! writer: two producer warps arrive after a chain of dependent loads, two consumer warps
//! wait for them. And mbarrier objects (format version 4): arrive and wait split, phase by
//! phase.

mod common;

use common::{alloc, launch, opcode, raw};
use std::path::{Path, PathBuf};
use tessera_frontend::opcodes::ArchFamily;
use tessera_partitions::config::GpuConfig;
use tessera_traces::{
    AddrRecord, KernelMeta, MBarrierKind, MBarrierOp, NamedBarrier, TraceFile, TraceWriter,
    WriterOptions,
};

const DATA: u64 = 0x7f00_0000_0000;

/// One CTA of four warps: warps 0 and 1 load `chain` dependent lines and arrive at barrier
/// 1 (`BAR.ARV 1, threads`); warps 2 and 3 load `late` lines and wait at it (`BAR.SYNC 1,
/// threads`); all exit.
fn write_trace(dir: &Path, chain: u32, threads: u32, late: u32) -> PathBuf {
    let path = dir.join(format!("bar-{chain}-{threads}-{late}.tst"));
    let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
    alloc(&mut w, DATA, 1 << 20);
    let mut meta = KernelMeta::new("_Z8pipelinev", [1, 1, 1], [128, 1, 1]);
    meta.named_barriers = vec![
        NamedBarrier {
            pc: 0x20,
            id: 1,
            threads,
            arrive: true,
        },
        NamedBarrier {
            pc: 0x40,
            id: 1,
            threads,
            arrive: false,
        },
    ];
    launch(&mut w, meta);
    let op = |w: &mut TraceWriter, name: &str| opcode(w, ArchFamily::Ampere, name);
    let (ldg, arv, sync, exit) = (
        op(&mut w, "LDG.E"),
        op(&mut w, "BAR.ARV"),
        op(&mut w, "BAR.SYNC"),
        op(&mut w, "EXIT"),
    );
    let plain = |pc: u32, opcode: u16| raw(pc, opcode, u32::MAX, &[]);
    w.begin_cta([0, 0, 0], None).unwrap();
    for warp in 0..4u32 {
        w.begin_warp(warp).unwrap();
        let n = if warp < 2 { chain } else { late };
        for i in 0..n {
            {
                let a = [DATA + 4096 * (i as u64 + 64 * warp as u64)];
                let mut x = plain(0x10, ldg);
                x.mask = 1;
                x.dsts = &[2];
                x.srcs = &[2];
                x.mem_width = 4;
                x.addrs = AddrRecord::List { mode: 0, addrs: &a };
                w.push(&x).unwrap();
            }
        }
        if warp < 2 {
            w.push(&plain(0x20, arv)).unwrap();
        } else {
            w.push(&plain(0x40, sync)).unwrap();
        }
        w.push(&plain(0x50, exit)).unwrap();
        w.end_warp().unwrap();
    }
    w.end_cta().unwrap();
    w.end_kernel().unwrap();
    w.finish().unwrap();
    path
}

fn config() -> GpuConfig {
    common::config("a100.yaml", &[])
}

#[test]
fn consumers_wait_for_the_producers_arrivals_only() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config();
    let run = |chain: u32| {
        let t = TraceFile::open(&write_trace(dir.path(), chain, 128, 0)).unwrap();
        tessera_system::run_gpu(&cfg, &t).unwrap().0
    };
    let (short, long) = (run(1), run(12));
    // One completion of barrier 1 per run; the consumers leave when the producers'
    // chains are done, so a longer chain ends the kernel later.
    assert_eq!(short.chiplets[0].barriers, 1);
    assert_eq!(long.chiplets[0].barriers, 1);
    assert!(
        long.totals.gpu_tot_sim_cycle > short.totals.gpu_tot_sim_cycle + 1000,
        "{} vs {}",
        long.totals.gpu_tot_sim_cycle,
        short.totals.gpu_tot_sim_cycle
    );
    // The stalls at the barrier are the consumers' only.
    assert!(long.totals.stalls.barrier > short.totals.stalls.barrier);
}

/// Producers that arrive first do not wait (`BAR.ARV`): with the consumers arriving last,
/// nobody stalls at the barrier, where a whole-CTA barrier would hold the producers until
/// the consumers came.
#[test]
fn arriving_warps_do_not_wait() {
    let dir = tempfile::tempdir().unwrap();
    let t = TraceFile::open(&write_trace(dir.path(), 1, 128, 12)).unwrap();
    let s = tessera_system::run_gpu(&config(), &t).unwrap().0;
    assert_eq!(s.chiplets[0].barriers, 1);
    // Only the consumers' cycle between the release and their next issue (a whole-CTA
    // barrier holds the producers for the consumers' thousands of cycles of loads).
    assert!(s.totals.stalls.barrier <= 8, "{:?}", s.totals.stalls);
}

/// A named barrier waiting for more threads than can arrive never completes: the SM
/// reports the deadlock (no spin region: nothing else runs), naming the waiting warps.
#[test]
fn a_named_barrier_that_cannot_complete_is_a_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let t = TraceFile::open(&write_trace(dir.path(), 2, 160, 0)).unwrap();
    let e = tessera_system::run_gpu(&config(), &t)
        .unwrap_err()
        .to_string();
    assert!(e.contains("deadlock"), "{e}");
}

// mbarrier objects (format version 4): split arrive and wait.

/// One CTA of four warps and mbarrier 0, initialized by warp 0 for the two producer warps'
/// 64 arrivals (`SYNCS.EXCH.64`, then the CTA's barrier so that nobody arrives before the
/// init, unless `init` is false). Producers (warps 0 and 1) run `chain` dependent loads
/// and arrive (`SYNCS.ARRIVE.TRANS64.A1T0`), twice: phases 0 and 1. Consumers (warps 2
/// and 3) wait for each phase of `waits` (`SYNCS.PHASECHK.TRANS64.TRYWAIT`) and exit.
fn write_mbar(dir: &Path, chain: u32, waits: &[u32], init: bool) -> PathBuf {
    let path = dir.join(format!("mbar-{chain}-{waits:?}-{init}.tst"));
    let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
    alloc(&mut w, DATA, 1 << 20);
    let mut meta = KernelMeta::new("_Z8mbarpipev", [1, 1, 1], [128, 1, 1]);
    meta.records_operands = true;
    meta.mbarriers = vec![
        MBarrierOp {
            pc: 0x08,
            id: 0,
            kind: MBarrierKind::Init,
        },
        MBarrierOp {
            pc: 0x20,
            id: 0,
            kind: MBarrierKind::Arrive,
        },
        MBarrierOp {
            pc: 0x40,
            id: 0,
            kind: MBarrierKind::Wait,
        },
    ];
    if !init {
        meta.mbarriers.remove(0);
    }
    launch(&mut w, meta);
    let op = |w: &mut TraceWriter, name: &str| opcode(w, ArchFamily::Hopper, name);
    let (ldg, exch, bar, arrive, wait, exit) = (
        op(&mut w, "LDG.E"),
        op(&mut w, "SYNCS.EXCH.64"),
        op(&mut w, "BAR.SYNC"),
        op(&mut w, "SYNCS.ARRIVE.TRANS64.A1T0"),
        op(&mut w, "SYNCS.PHASECHK.TRANS64.TRYWAIT"),
        op(&mut w, "EXIT"),
    );
    let plain = |pc: u32, opcode: u16, mask: u32| raw(pc, opcode, mask, &[]);
    w.begin_cta([0, 0, 0], None).unwrap();
    for warp in 0..4u32 {
        w.begin_warp(warp).unwrap();
        if warp == 0 && init {
            w.push_with_operands(&plain(0x08, exch, 1), &[64]).unwrap();
        }
        w.push(&plain(0x10, bar, u32::MAX)).unwrap();
        if warp < 2 {
            for phase in 0..2u64 {
                for i in 0..chain {
                    let a = [DATA + 4096 * (i as u64 + 64 * (2 * warp as u64 + phase))];
                    let mut x = plain(0x18, ldg, 1);
                    x.dsts = &[2];
                    x.srcs = &[2];
                    x.mem_width = 4;
                    x.addrs = AddrRecord::List { mode: 0, addrs: &a };
                    w.push(&x).unwrap();
                }
                w.push_with_operands(&plain(0x20, arrive, u32::MAX), &[1; 32])
                    .unwrap();
            }
        } else {
            for &p in waits {
                w.push_with_operands(&plain(0x40, wait, u32::MAX), &[p as u64; 32])
                    .unwrap();
            }
        }
        w.push(&plain(0x50, exit, u32::MAX)).unwrap();
        w.end_warp().unwrap();
    }
    w.end_cta().unwrap();
    w.end_kernel().unwrap();
    w.finish().unwrap();
    path
}

/// Consumers leave when the producers' second arrival completes phase 1: a longer chain
/// ends the kernel later; the producers never wait (only the consumers stall at it); the
/// CTA barrier and the two phases are three completions.
#[test]
fn mbarrier_waits_follow_the_phases_the_producers_complete() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config();
    let run = |chain: u32| {
        let t = TraceFile::open(&write_mbar(dir.path(), chain, &[0, 1], true)).unwrap();
        tessera_system::run_gpu(&cfg, &t).unwrap().0
    };
    let (short, long) = (run(1), run(12));
    assert_eq!(short.chiplets[0].barriers, 3);
    assert_eq!(long.chiplets[0].barriers, 3);
    assert!(
        long.totals.gpu_tot_sim_cycle > short.totals.gpu_tot_sim_cycle + 1000,
        "{} vs {}",
        long.totals.gpu_tot_sim_cycle,
        short.totals.gpu_tot_sim_cycle
    );
    assert!(long.totals.stalls.barrier > short.totals.stalls.barrier + 1000);
    // Waiting for phase 0 alone lets the consumers leave after the first arrivals.
    let t = TraceFile::open(&write_mbar(dir.path(), 12, &[0], true)).unwrap();
    let first = tessera_system::run_gpu(&cfg, &t).unwrap().0;
    assert!(first.totals.stalls.barrier < long.totals.stalls.barrier);
}

/// A wait for a phase nobody completes is a deadlock; an arrival before the init is an
/// error naming the CTA, warp and PC.
#[test]
fn mbarrier_misuse_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config();
    let t = TraceFile::open(&write_mbar(dir.path(), 1, &[0, 2], true)).unwrap();
    let e = tessera_system::run_gpu(&cfg, &t).unwrap_err().to_string();
    assert!(e.contains("deadlock"), "{e}");
    let t = TraceFile::open(&write_mbar(dir.path(), 1, &[0], false)).unwrap();
    let e = tessera_system::run_gpu(&cfg, &t).unwrap_err().to_string();
    assert!(
        e.contains("mbarrier 0 arrived at before its init") && e.contains("pc 0x20"),
        "{e}"
    );
}
