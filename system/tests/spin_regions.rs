//! Spin regions and sync values end to end (issue 24) on a trace written with the trace
//! writer: a producer CTA does a chain of dependent loads and then sets a flag with an
//! atomic exchange; a consumer CTA spins on the flag with a strong load. How many times
//! the consumer goes round is decided by the simulated timing, not by the trace.

use std::path::{Path, PathBuf};
use tessera_frontend::opcodes::{decode_opcode, ArchFamily};
use tessera_partitions::config::GpuConfig;
use tessera_partitions::stats::RunStats;
use tessera_traces::{
    AddrRecord, Command, ExitTerm, KernelMeta, RawInst, RegionKind, SpinRegion, SyncCmp, SyncWords,
    TraceFile, TraceWriter, WriterOptions,
};

const DATA: u64 = 0x7f00_0000_0000;
const FLAG: u64 = 0x7f00_0010_0000;

fn config(name: &str, overrides: &[(&str, &str)]) -> GpuConfig {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(name);
    let o: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    GpuConfig::load(p, &o).unwrap()
}

/// The producer-consumer trace: CTA 0 runs `work` dependent loads, then `flag = 1`
/// (`ATOMG.E.EXCH`, unless `set_flag` is false: a flag nobody sets); CTA 1 spins while
/// `flag != 1` (one strong load per round). `expect`: the flag's value the recorder saw
/// at the end.
fn write_trace(dir: &Path, work: u32, set_flag: bool, expect: Option<u32>) -> PathBuf {
    let path = dir.join(format!("spin-{work}-{set_flag}.tst"));
    let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
    w.add_command(Command::Alloc {
        device: 0,
        addr: DATA,
        bytes: 1 << 20,
    })
    .unwrap();
    w.add_command(Command::Alloc {
        device: 0,
        addr: FLAG,
        bytes: 4,
    })
    .unwrap();
    w.add_sync_words(SyncWords {
        name: "flag".into(),
        device: 0,
        addr: FLAG,
        init: vec![0],
        expect: expect.map_or(Vec::new(), |e| vec![e]),
    });
    let mut meta = KernelMeta::new("_Z8producerPjS_", [2, 1, 1], [32, 1, 1]);
    meta.records_operands = true;
    meta.spin_regions = vec![SpinRegion {
        kind: RegionKind::Spin,
        start_pc: 0x100,
        test_pc: 0x110,
        end_pc: 0x120,
        terms: vec![ExitTerm::own(0, SyncCmp::Eq)],
        all: true,
        backoff_base: 0,
        backoff_max: 0,
        label: "flag set".into(),
        rebased: Vec::new(),
    }];
    let k = w.begin_kernel(meta).unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let op = |w: &mut TraceWriter, name: &str| {
        w.add_opcode(decode_opcode(ArchFamily::Ampere, name).unwrap())
            .unwrap()
    };
    let (ldg, exch, ldg_strong, bra, exit) = (
        op(&mut w, "LDG.E"),
        op(&mut w, "ATOMG.E.EXCH.STRONG.GPU"),
        op(&mut w, "LDG.E.STRONG.GPU"),
        op(&mut w, "BRA"),
        op(&mut w, "EXIT"),
    );
    let inst =
        |pc: u32, opcode: u16, mask: u32, dsts: &'static [u16], srcs: &'static [u16]| RawInst {
            pc,
            mask,
            opcode,
            dsts,
            srcs,
            mem_width: 0,
            imm: None,
            line: None,
            addrs: AddrRecord::None,
        };
    let flag_addr = [FLAG];
    // CTA 0: the producer.
    w.begin_cta([0, 0, 0], None).unwrap();
    w.begin_warp(0).unwrap();
    for i in 0..work {
        let a = [DATA + 4096 * i as u64];
        let mut x = inst(0x10, ldg, 1, &[2], &[2]);
        x.mem_width = 4;
        x.addrs = AddrRecord::List { mode: 0, addrs: &a };
        w.push(&x).unwrap();
    }
    if set_flag {
        let mut x = inst(0x20, exch, 1, &[], &[2]);
        x.mem_width = 4;
        x.addrs = AddrRecord::List {
            mode: 0,
            addrs: &flag_addr,
        };
        w.push_with_operands(&x, &[1]).unwrap();
    }
    w.push(&inst(0x30, exit, u32::MAX, &[], &[])).unwrap();
    w.end_warp().unwrap();
    w.end_cta().unwrap();
    // CTA 1: the consumer, one round of its spin loop recorded (after a load of its own,
    // so that the region's addresses are not the first of its warp's).
    w.begin_cta([1, 0, 0], None).unwrap();
    w.begin_warp(0).unwrap();
    let own = [DATA + 64, DATA + 192];
    let mut x = inst(0x90, ldg, 0b11, &[6], &[]);
    x.mem_width = 4;
    x.addrs = AddrRecord::List {
        mode: 0,
        addrs: &own,
    };
    w.push(&x).unwrap();
    let mut x = inst(0x100, ldg_strong, 1, &[4], &[]);
    x.mem_width = 4;
    x.addrs = AddrRecord::List {
        mode: 0,
        addrs: &flag_addr,
    };
    w.push(&x).unwrap();
    w.push_with_operands(&inst(0x110, bra, 1, &[], &[]), &[1])
        .unwrap();
    w.push(&inst(0x120, bra, 1, &[], &[])).unwrap();
    w.push(&inst(0x130, exit, u32::MAX, &[], &[])).unwrap();
    w.end_warp().unwrap();
    w.end_cta().unwrap();
    w.end_kernel().unwrap();
    w.finish().unwrap();
    path
}

fn run(cfg: &GpuConfig, path: &Path, threads: usize) -> RunStats {
    let trace = TraceFile::open(path).unwrap();
    tessera_system::run_gpu_threads(cfg, &trace, threads)
        .unwrap()
        .0
}

#[test]
fn the_spin_count_comes_from_the_simulated_timing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("default.yaml", &[]);
    let mut rounds = Vec::new();
    for work in [4, 16] {
        let s = run(&cfg, &write_trace(dir.path(), work, true, Some(1)), 1);
        let sync = s
            .sync
            .clone()
            .expect("a trace with sync words reports them");
        assert_eq!(sync.words.len(), 1);
        assert_eq!(sync.words[0].check, "ok", "{:?}", sync.words);
        assert!(sync.spin_iterations >= 1);
        // Every round is one strong load at the flag's home.
        assert_eq!(sync.loads, sync.spin_iterations);
        assert_eq!(sync.spin_exits, 1);
        rounds.push(sync.spin_iterations);
    }
    // The producer's longer chain keeps the consumer spinning longer.
    assert!(
        rounds[1] > rounds[0] + 4,
        "16 dependent loads before the flag gave {} rounds, 4 gave {}",
        rounds[1],
        rounds[0]
    );
    // A slower L2 makes each round and the producer's chain slower alike, so the count
    // moves, and not in proportion to either.
    let slow = config("default.yaml", &[("l2.hit_latency_cycles", "600")]);
    let s = run(&slow, &write_trace(dir.path(), 16, true, Some(1)), 1);
    assert_ne!(s.sync.unwrap().spin_iterations, rounds[1]);
}

#[test]
fn a_value_that_differs_from_the_recorders_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("default.yaml", &[]);
    let trace = TraceFile::open(&write_trace(dir.path(), 4, true, Some(7))).unwrap();
    let e = tessera_system::run_gpu_threads(&cfg, &trace, 1).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("\"flag\"") && m.contains("is 1") && m.contains("left 7"),
        "{m}"
    );
}

#[test]
fn spinning_is_the_same_on_any_threads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("a100-4chiplet.yaml", &[]);
    let path = write_trace(dir.path(), 16, true, Some(1));
    let one = run(&cfg, &path, 1);
    assert!(one.sync.as_ref().unwrap().spin_iterations > 1);
    for threads in [2, 4] {
        let many = run(&cfg, &path, threads);
        assert_eq!(
            serde_json::to_string(&many).unwrap(),
            serde_json::to_string(&one).unwrap(),
            "{threads} threads"
        );
    }
}

/// A flag nobody sets: the consumer spins on a value that never changes while nothing
/// else runs. The watchdog stops the run within `watchdog.livelock_cycles` and reports a
/// deadlock with the spinning warp, at the same cycle on any threads.
#[test]
fn a_flag_nobody_sets_is_reported_as_a_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        "a100-4chiplet.yaml",
        &[
            ("watchdog.check_cycles", "1000"),
            ("watchdog.livelock_cycles", "20000"),
        ],
    );
    let path = write_trace(dir.path(), 4, false, Some(1));
    let one = run(&cfg, &path, 1);
    let w = one.watchdog.as_ref().expect("the watchdog stops the run");
    assert_eq!(w.verdict, "deadlock");
    assert!(w.cycle - w.no_progress_since_cycle >= 20_000, "{w:?}");
    assert!(w.cycle - w.no_progress_since_cycle < 22_000, "{w:?}");
    assert_eq!(w.live_warps, 1);
    assert_eq!(w.warps.len(), 1);
    let x = &w.warps[0];
    assert_eq!((x.cta, x.state.as_str()), ([1, 0, 0], "spin"));
    let spin = x.spin.as_ref().unwrap();
    assert_eq!(
        (spin.region_pc, spin.values.as_slice()),
        (0x100, &[0u64][..])
    );
    assert!(spin.rounds > 10);
    // A run that did not finish is not checked against the recorder's values.
    assert_eq!(one.sync.as_ref().unwrap().words[0].check, "partial");
    let four = run(&cfg, &path, 4);
    assert_eq!(
        serde_json::to_string(&four).unwrap(),
        serde_json::to_string(&one).unwrap()
    );
}

/// A lock that is never released: CTA 0 takes it with a compare-and-swap and exits holding
/// it; CTA 1 spins on the same compare-and-swap, every round answered 1. The watchdog
/// reports it within `watchdog.livelock_cycles` (a deadlock: the value never changes).
#[test]
fn a_lock_never_released_is_reported_within_the_livelock_window() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock.tst");
    let lock = FLAG;
    let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
    for (addr, bytes) in [(DATA, 1 << 20), (lock, 4)] {
        w.add_command(Command::Alloc {
            device: 0,
            addr,
            bytes,
        })
        .unwrap();
    }
    w.add_sync_words(SyncWords {
        name: "lock".into(),
        device: 0,
        addr: lock,
        init: vec![0],
        expect: Vec::new(),
    });
    let mut meta = KernelMeta::new("_Z4holdPj", [2, 1, 1], [32, 1, 1]);
    meta.records_operands = true;
    meta.spin_regions = vec![SpinRegion {
        kind: RegionKind::Spin,
        start_pc: 0x100,
        test_pc: 0x110,
        end_pc: 0x120,
        terms: vec![ExitTerm::own(0, SyncCmp::Eq)],
        all: true,
        backoff_base: 8,
        backoff_max: 256,
        label: "lock acquired".into(),
        rebased: Vec::new(),
    }];
    let k = w.begin_kernel(meta).unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let op = |w: &mut TraceWriter, name: &str| {
        w.add_opcode(decode_opcode(ArchFamily::Ampere, name).unwrap())
            .unwrap()
    };
    let (ldg, cas, bra, exit) = (
        op(&mut w, "LDG.E"),
        op(&mut w, "ATOMG.E.CAS.STRONG.GPU"),
        op(&mut w, "BRA"),
        op(&mut w, "EXIT"),
    );
    let plain = |pc: u32, opcode: u16, mask: u32| RawInst {
        pc,
        mask,
        opcode,
        dsts: &[],
        srcs: &[],
        mem_width: 0,
        imm: None,
        line: None,
        addrs: AddrRecord::None,
    };
    let at = [lock];
    let take = |pc: u32| {
        let mut x = plain(pc, cas, 1);
        x.dsts = &[4];
        x.mem_width = 4;
        x.addrs = AddrRecord::List {
            mode: 0,
            addrs: &at,
        };
        x
    };
    // CTA 0 takes the lock and leaves.
    w.begin_cta([0, 0, 0], None).unwrap();
    w.begin_warp(0).unwrap();
    w.push_with_operands(&take(0x20), &[0, 1]).unwrap();
    w.push(&plain(0x30, exit, u32::MAX)).unwrap();
    w.end_warp().unwrap();
    w.end_cta().unwrap();
    // CTA 1 loads a few lines first (CTA 0 gets there first), then spins for the lock.
    w.begin_cta([1, 0, 0], None).unwrap();
    w.begin_warp(0).unwrap();
    for i in 0..4u64 {
        let a = [DATA + 4096 * i];
        let mut x = plain(0x90, ldg, 1);
        x.dsts = &[2];
        x.srcs = &[2];
        x.mem_width = 4;
        x.addrs = AddrRecord::List { mode: 0, addrs: &a };
        w.push(&x).unwrap();
    }
    w.push_with_operands(&take(0x100), &[0, 1]).unwrap();
    w.push_with_operands(&plain(0x110, bra, 1), &[0]).unwrap();
    w.push(&plain(0x120, bra, 1)).unwrap();
    w.push(&plain(0x130, exit, u32::MAX)).unwrap();
    w.end_warp().unwrap();
    w.end_cta().unwrap();
    w.end_kernel().unwrap();
    w.finish().unwrap();

    let livelock = 50_000u64;
    let cfg = config(
        "a100-4chiplet.yaml",
        &[
            ("watchdog.check_cycles", "5000"),
            ("watchdog.livelock_cycles", "50000"),
        ],
    );
    let s = run(&cfg, &path, 2);
    let w = s.watchdog.as_ref().expect("the watchdog stops the run");
    assert_eq!(w.verdict, "deadlock");
    // Reported within the window (rounded up to the next check).
    assert!(
        w.cycle - w.no_progress_since_cycle < livelock + 5_000,
        "{w:?}"
    );
    let spin = w.warps[0].spin.as_ref().unwrap();
    assert_eq!(
        (spin.label.as_str(), spin.values.as_slice()),
        ("lock acquired", &[1u64][..])
    );
    let sync = s.sync.as_ref().unwrap();
    assert_eq!(sync.cas_won, 1, "only CTA 0 got it");
    assert!(sync.cas_lost > 5);
    assert_eq!(w.sync_words.len(), 1);
    assert_eq!(
        (w.sync_words[0].name.as_str(), w.sync_words[0].value),
        ("lock[0]", 1)
    );
}
