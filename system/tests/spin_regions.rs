//! Spin regions and sync values end to end (issue 24) on a trace written with the trace
//! writer: a producer CTA does a chain of dependent loads and then sets a flag with an
//! atomic exchange; a consumer CTA spins on the flag with a strong load. How many times
//! the consumer goes round is decided by the simulated timing, not by the trace.

mod common;

use common::{alloc, config, launch, opcode, raw};
use std::path::{Path, PathBuf};
use tessera_frontend::opcodes::ArchFamily;
use tessera_partitions::config::GpuConfig;
use tessera_partitions::stats::RunStats;
use tessera_traces::{
    AddrRecord, ExitTerm, KernelMeta, RawInst, RegionKind, SpinRegion, SyncCmp, SyncWords,
    TraceFile, TraceWriter, WriterOptions,
};

const DATA: u64 = 0x7f00_0000_0000;
const FLAG: u64 = 0x7f00_0010_0000;

/// The producer-consumer trace: CTA 0 runs `work` dependent loads, then `flag = 1`
/// (`ATOMG.E.EXCH`, unless `set_flag` is false: a flag nobody sets); CTA 1 spins while
/// `flag != 1` (one strong load per round). `expect`: the flag's value the recorder saw
/// at the end.
fn write_trace(dir: &Path, work: u32, set_flag: bool, expect: Option<u32>) -> PathBuf {
    write_trace_with(dir, work, set_flag, expect, "LDG.E.STRONG.GPU")
}

/// [`write_trace`] with the consumer's spin load `load` (`LDG.E`: a weak load).
fn write_trace_with(
    dir: &Path,
    work: u32,
    set_flag: bool,
    expect: Option<u32>,
    load: &str,
) -> PathBuf {
    let path = dir.join(format!("spin-{work}-{set_flag}-{load}.tst"));
    let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
    alloc(&mut w, DATA, 1 << 20);
    alloc(&mut w, FLAG, 4);
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
    launch(&mut w, meta);
    let op = |w: &mut TraceWriter, name: &str| opcode(w, ArchFamily::Ampere, name);
    let (ldg, exch, ldg_strong, bra, exit) = (
        op(&mut w, "LDG.E"),
        op(&mut w, "ATOMG.E.EXCH.STRONG.GPU"),
        op(&mut w, load),
        op(&mut w, "BRA"),
        op(&mut w, "EXIT"),
    );
    let inst =
        |pc: u32, opcode: u16, mask: u32, dsts: &'static [u16], srcs: &'static [u16]| RawInst {
            dsts,
            srcs,
            ..raw(pc, opcode, mask, &[])
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
        alloc(&mut w, addr, bytes);
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
    launch(&mut w, meta);
    let op = |w: &mut TraceWriter, name: &str| opcode(w, ArchFamily::Ampere, name);
    let (ldg, cas, bra, exit) = (
        op(&mut w, "LDG.E"),
        op(&mut w, "ATOMG.E.CAS.STRONG.GPU"),
        op(&mut w, "BRA"),
        op(&mut w, "EXIT"),
    );
    let plain = |pc: u32, opcode: u16, mask: u32| raw(pc, opcode, mask, &[]);
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

// Value-dependent paths (format version 4): branch and work-queue regions.

const HEAD: u64 = 0x7f00_0020_0000;
const DONE: u64 = 0x7f00_0030_0000;

/// The opcodes of the value-path traces.
struct Ops {
    ldg: u16,
    add: u16,
    exch: u16,
    bra: u16,
    exit: u16,
}

fn ops(w: &mut TraceWriter) -> Ops {
    let mut op = |name: &str| opcode(w, ArchFamily::Ampere, name);
    Ops {
        ldg: op("LDG.E"),
        add: op("ATOMG.E.ADD.STRONG.GPU"),
        exch: op("ATOMG.E.EXCH.STRONG.GPU"),
        bra: op("BRA"),
        exit: op("EXIT"),
    }
}

/// A work queue: `ctas` CTAs of one warp pop `items` items from `head` with
/// `atomicAdd(&head, 1)` per lane (`leader`: lane 0 pops 32 for its warp, `atomicAdd(&head,
/// 32)`, and the lanes compare its value, broadcast), leave when the index reaches
/// `items`, and otherwise load `data[idx]` and add 1 to `done[idx]`. The tail is recorded
/// once per warp with template index `lane` (leader: 0, and `lane` added), its two accesses
/// rebased by the popped index (stride 4). Every item is done exactly once whoever pops it:
/// `done` must end all ones, which only holds if the tail's addresses follow the simulated
/// values.
fn write_queue(dir: &Path, items: u32, ctas: u32, leader: bool) -> PathBuf {
    let path = dir.join(format!("queue-{items}-{ctas}-{leader}.tst"));
    let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
    alloc(&mut w, DATA, 1 << 20);
    alloc(&mut w, HEAD, 4);
    alloc(&mut w, DONE, 4 * items as u64);
    let lanes = 32 * ctas;
    w.add_sync_words(SyncWords {
        name: "head".into(),
        device: 0,
        addr: HEAD,
        init: vec![0],
        // Each lane (each leader: 32) pops once more than it gets an item.
        expect: vec![items + lanes],
    });
    w.add_sync_words(SyncWords {
        name: "done".into(),
        device: 0,
        addr: DONE,
        init: vec![0; items as usize],
        expect: vec![1; items as usize],
    });
    let mut meta = KernelMeta::new("_Z5queuePjS_", [ctas, 1, 1], [32, 1, 1]);
    meta.records_operands = true;
    meta.spin_regions = vec![SpinRegion {
        kind: RegionKind::Queue,
        start_pc: 0x100,
        test_pc: 0x110,
        end_pc: 0x140,
        terms: vec![ExitTerm {
            value: 0,
            cmp: SyncCmp::Ge,
            lane: if leader { 0 } else { tessera_traces::OWN_LANE },
        }],
        all: true,
        backoff_base: 0,
        backoff_max: 0,
        label: "item popped".into(),
        rebased: vec![
            tessera_traces::RebasedAccess {
                pc: 0x120,
                stride: 4,
            },
            tessera_traces::RebasedAccess {
                pc: 0x130,
                stride: 4,
            },
        ],
    }];
    launch(&mut w, meta);
    let o = ops(&mut w);
    let head = [HEAD; 32];
    let data: Vec<u64> = (0..32).map(|l| DATA + 4 * l).collect();
    let done: Vec<u64> = (0..32).map(|l| DONE + 4 * l).collect();
    for c in 0..ctas {
        w.begin_cta([c, 0, 0], None).unwrap();
        w.begin_warp(0).unwrap();
        if leader {
            w.push_with_operands(&raw(0x100, o.add, 1, &head[..1]), &[32])
                .unwrap();
        } else {
            w.push_with_operands(&raw(0x100, o.add, u32::MAX, &head), &[1; 32])
                .unwrap();
        }
        // Per lane: the exit constant, then the template index.
        let test: Vec<u64> = (0..32u64)
            .flat_map(|l| [items as u64, if leader { 0 } else { l }])
            .collect();
        w.push_with_operands(&raw(0x110, o.bra, u32::MAX, &[]), &test)
            .unwrap();
        w.push(&raw(0x120, o.ldg, u32::MAX, &data)).unwrap();
        w.push_with_operands(&raw(0x130, o.add, u32::MAX, &done), &[1; 32])
            .unwrap();
        w.push(&raw(0x140, o.bra, u32::MAX, &[])).unwrap();
        w.push(&raw(0x150, o.exit, u32::MAX, &[])).unwrap();
        w.end_warp().unwrap();
        w.end_cta().unwrap();
    }
    w.end_kernel().unwrap();
    w.finish().unwrap();
    path
}

/// Work queues: every item is processed once (`done` all ones, checked against the
/// recorder's values at the end, and `queue_items` equals the items), every lane leaves
/// once, with per-lane pops and with a leader's pop broadcast to its warp; the same on any
/// threads.
#[test]
fn a_work_queue_pops_every_item_once_at_the_simulated_index() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("a100-4chiplet.yaml", &[]);
    for leader in [false, true] {
        let path = write_queue(dir.path(), 512, 4, leader);
        let one = run(&cfg, &path, 1);
        let s = one.sync.as_ref().unwrap();
        let checks: Vec<&str> = s.words.iter().map(|w| w.check.as_str()).collect();
        assert_eq!(checks, ["ok", "ok"], "leader {leader}: {:?}", s.words);
        assert_eq!(s.queue_items, 512, "leader {leader}");
        assert_eq!(s.queue_exits, 4 * 32, "leader {leader}");
        // Each warp goes round once per 32 items it pops, and once more to find the
        // queue empty.
        assert_eq!(s.queue_rounds, 512 / 32 + 4, "leader {leader}");
        assert_eq!(s.spin_iterations, 0);
        let two = run(&cfg, &path, 2);
        assert_eq!(
            serde_json::to_string(&two).unwrap(),
            serde_json::to_string(&one).unwrap()
        );
    }
}

/// Which CTA arrives last, and so runs the branch's tail, comes from the timing: CTA `c`
/// does `work[c]` dependent loads before it takes its ticket, and the tail writes its own
/// id to `winner`. Exactly one lane takes the tail per launch.
fn write_last_cta(dir: &Path, work: &[u32], mutate: impl Fn(&mut SpinRegion)) -> PathBuf {
    let ctas = work.len() as u32;
    let path = dir.join(format!("last-{}.tst", work.iter().sum::<u32>()));
    let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
    alloc(&mut w, DATA, 1 << 20);
    alloc(&mut w, HEAD, 8);
    w.add_sync_words(SyncWords {
        name: "count".into(),
        device: 0,
        addr: HEAD,
        init: vec![0],
        expect: vec![ctas],
    });
    w.add_sync_words(SyncWords {
        name: "winner".into(),
        device: 0,
        addr: HEAD + 4,
        init: vec![u32::MAX],
        expect: Vec::new(),
    });
    let mut meta = KernelMeta::new("_Z4lastPj", [ctas, 1, 1], [32, 1, 1]);
    meta.records_operands = true;
    meta.spin_regions = vec![SpinRegion {
        kind: RegionKind::Branch,
        start_pc: 0x100,
        test_pc: 0x110,
        end_pc: 0x130,
        terms: vec![ExitTerm::own(0, SyncCmp::Eq)],
        all: true,
        backoff_base: 0,
        backoff_max: 0,
        label: "last CTA".into(),
        rebased: Vec::new(),
    }];
    mutate(&mut meta.spin_regions[0]);
    launch(&mut w, meta);
    let o = ops(&mut w);
    for (c, &n) in work.iter().enumerate() {
        w.begin_cta([c as u32, 0, 0], None).unwrap();
        w.begin_warp(0).unwrap();
        for i in 0..n {
            let a = [DATA + 4096 * i as u64 + 128 * c as u64];
            let mut x = raw(0x10, o.ldg, 1, &a);
            (x.dsts, x.srcs) = (&[2], &[2]);
            w.push(&x).unwrap();
        }
        let mut t = raw(0x100, o.add, 1, &[HEAD]);
        t.dsts = &[4];
        w.push_with_operands(&t, &[1]).unwrap();
        // The exit constant (ctas - 1), the template ticket (what the recorder drew: c).
        w.push_with_operands(&raw(0x110, o.bra, 1, &[]), &[ctas as u64 - 1, c as u64])
            .unwrap();
        w.push_with_operands(&raw(0x120, o.exch, 1, &[HEAD + 4]), &[c as u64])
            .unwrap();
        w.push(&raw(0x130, o.bra, 1, &[])).unwrap();
        w.push(&raw(0x140, o.exit, u32::MAX, &[])).unwrap();
        w.end_warp().unwrap();
        w.end_cta().unwrap();
    }
    w.end_kernel().unwrap();
    w.finish().unwrap();
    path
}

#[test]
fn the_last_cta_is_the_one_the_timing_makes_last() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("a100-4chiplet.yaml", &[]);
    for slow in [2usize, 5] {
        let mut work = vec![1u32; 8];
        work[slow] = 12;
        let s = run(&cfg, &write_last_cta(dir.path(), &work, |_| {}), 1);
        let sync = s.sync.as_ref().unwrap();
        assert_eq!(
            (sync.branch_taken, sync.branch_passed),
            (1, 7),
            "slow {slow}"
        );
        assert_eq!(sync.words[0].check, "ok");
        // The winner word holds the id of the CTA that ran the tail.
        assert_eq!(sync.words[1].sum, slow as u64, "slow {slow}");
    }
}

/// A branch region with a back-off, and a rebased access at a PC without memory, are
/// refused when the trace is opened, naming the kernel and region.
#[test]
fn a_malformed_value_path_names_the_kernel_and_region() {
    type Mutation = Box<dyn Fn(&mut SpinRegion)>;
    let cases: [(&str, Mutation); 3] = [
        (
            "runs once and has no back-off",
            Box::new(|r| (r.backoff_base, r.backoff_max) = (8, 8)),
        ),
        (
            "rebased access at pc 0x110 is no memory instruction",
            Box::new(|r| {
                r.rebased = vec![tessera_traces::RebasedAccess {
                    pc: 0x110,
                    stride: 4,
                }]
            }),
        ),
        ("reads lane 40's value", Box::new(|r| r.terms[0].lane = 40)),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (what, mutate) in cases {
        let path = write_last_cta(dir.path(), &[1, 1], mutate);
        let m = TraceFile::open(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            m.contains("kernel 0 (_Z4lastPj): branch region 0") && m.contains(what),
            "{what}: {m}"
        );
    }
}

/// A spin on a weak load (`LDG.E`, not `.STRONG.GPU`) reads the consumer SM's L1 copy of
/// the flag after its first round: L1s are not coherent, so the producer's exchange at the
/// flag's home is never seen and the watchdog reports a deadlock (the round's value stays
/// 0), as a spin on a non-volatile flag hangs on a GPU. Without an L1 every round reads the
/// home, and the spin ends as the strong load's does.
#[test]
fn a_spin_on_a_weak_load_sees_its_l1_copy_and_never_ends() {
    let dir = tempfile::tempdir().unwrap();
    let watch = [
        ("watchdog.check_cycles", "1000"),
        ("watchdog.livelock_cycles", "20000"),
    ];
    let path = write_trace_with(dir.path(), 4, true, Some(1), "LDG.E");
    let s = run(&config("a100-4chiplet.yaml", &watch), &path, 1);
    let w = s.watchdog.as_ref().expect("the watchdog stops the run");
    assert_eq!(w.verdict, "deadlock");
    let spin = w.warps[0].spin.as_ref().unwrap();
    assert_eq!(spin.values, [0u64]);
    let sync = s.sync.as_ref().unwrap();
    assert!(sync.l1_sync_hits > 10, "{sync:?}");
    // The flag did change at its home: the producer's exchange.
    assert_eq!(w.sync_words[0].value, 1);
    let no_l1 = [watch[0], watch[1], ("l1d.enabled", "false")];
    let s = run(&config("a100-4chiplet.yaml", &no_l1), &path, 1);
    assert!(s.watchdog.is_none());
    let sync = s.sync.unwrap();
    assert_eq!((sync.l1_sync_hits, sync.spin_exits), (0, 1));
    assert_eq!(sync.words[0].check, "ok");
}
