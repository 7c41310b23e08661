//! Synchronization as values from the command line (issue 24): older traces replay as
//! recorded and say so, a malformed spin region is a clear error, and the recorded
//! synchronization workloads run with their spin counts from the simulated timing.

mod common;

use common::*;
use tessera_traces::{
    AddrRecord, Command, ExitTerm, KernelMeta, OpClass, OpcodeInfo, RawInst, RegionKind,
    SpinRegion, SyncCmp, TraceWriter, WriterOptions,
};

/// The region of the hand-written traces below: start at 0x10, test at 0x20 (exit when
/// value 0 equals the lane's constant), back-edge at 0x30.
fn flag_region() -> SpinRegion {
    SpinRegion {
        kind: RegionKind::Spin,
        start_pc: 0x10,
        test_pc: 0x20,
        end_pc: 0x30,
        terms: vec![ExitTerm::own(0, SyncCmp::Eq)],
        all: true,
        backoff_base: 0,
        backoff_max: 0,
        label: "flag set".into(),
        rebased: Vec::new(),
    }
}

/// A recorded trace of format version 2 (written by the build before version 3: spinlock,
/// 4 CTAs of 64 threads, 2 critical sections per warp) still runs, replaying its spin
/// iterations as recorded, and the stats say so.
#[test]
fn a_format_2_trace_replays_its_synchronization_as_recorded() {
    let tst = data("spinlock-format2.tst");
    let b = std::fs::read(&tst).unwrap();
    assert_eq!(u32::from_le_bytes([b[8], b[9], b[10], b[11]]), 2);
    let v = run_json("a100-4chiplet.yaml", &["--trace", tst.to_str().unwrap()]);
    assert_eq!(v["provenance"]["input"]["sync"], "as recorded");
    assert!(v.get("sync").is_none(), "no sync object without sync words");
    assert_eq!(
        v["totals"]["warp_insts"], 520,
        "every recorded instruction, once"
    );
}

/// A recorded trace of format version 3 (written by the build before version 4: `ht`,
/// 128 buckets, 256 insertions) still runs with its synchronization as values, its spin
/// regions read as spin loops: the numbers the version-3 build gave on a100-4chiplet
/// (578 warp instructions, 38 spin rounds, 256 locks won, 11,394 cycles).
#[test]
fn a_format_3_trace_runs_its_spin_regions_as_before() {
    let tst = data("ht-format3.tst");
    let b = std::fs::read(&tst).unwrap();
    assert_eq!(u32::from_le_bytes([b[8], b[9], b[10], b[11]]), 3);
    let v = run_json("a100-4chiplet.yaml", &["--trace", tst.to_str().unwrap()]);
    assert_eq!(v["provenance"]["input"]["sync"], "values");
    assert_eq!(v["totals"]["warp_insts"], 578);
    assert_eq!(v["totals"]["gpu_tot_sim_cycle"], 11394);
    let s = &v["sync"];
    assert_eq!(
        (s["spin_iterations"].as_u64(), s["cas_won"].as_u64()),
        (Some(38), Some(256))
    );
    assert_eq!(s["words"][0]["check"], "ok");
    assert_eq!(s["branch_taken"], 0);
}

/// A spin region whose test is not a branch is refused when the trace is opened, naming the
/// kernel and the region's PCs.
#[test]
fn a_malformed_spin_region_names_the_kernel_and_region() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("bad.tst");
    let mut w = TraceWriter::create(&tst, WriterOptions::default()).unwrap();
    let mut meta = KernelMeta::new("_Z4spinv", [1, 1, 1], [32, 1, 1]);
    meta.records_operands = true;
    meta.spin_regions = vec![flag_region()];
    let k = w.begin_kernel(meta).unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let add = w
        .add_opcode(OpcodeInfo::simple("IADD3", OpClass::Int))
        .unwrap();
    let exit = w
        .add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit))
        .unwrap();
    w.begin_cta([0, 0, 0], None).unwrap();
    w.begin_warp(0).unwrap();
    for (pc, op) in [(0x10, add), (0x20, add), (0x30, add), (0x40, exit)] {
        // The test's constants, one per term and lane.
        let consts = if pc == 0x20 {
            vec![0u64; 32]
        } else {
            Vec::new()
        };
        w.push_with_operands(
            &RawInst {
                pc,
                mask: u32::MAX,
                opcode: op,
                dsts: &[],
                srcs: &[],
                mem_width: 0,
                imm: None,
                line: None,
                addrs: AddrRecord::None,
            },
            &consts,
        )
        .unwrap();
    }
    w.end_warp().unwrap();
    w.end_cta().unwrap();
    w.end_kernel().unwrap();
    w.finish().unwrap();
    let o = tessera(&run_args("a100.yaml", &["--trace", tst.to_str().unwrap()]));
    assert_clean_failure(
        &o,
        &[
            "kernel 0 (_Z4spinv): spin region 0 (pc 0x10, test 0x20, end 0x30)",
            "its test must be a branch, not int",
        ],
    );
}

/// `ht` (per-bucket locks, the release inside the spin loop) spins as many rounds as the
/// simulated timing makes it: the count moves with the CTAs an SM holds, the DRAM latency
/// and the warp scheduler, while every insertion takes its lock exactly once (one won
/// compare-and-swap each) and every lock ends free (the recorder's values, checked).
#[test]
fn ht_spin_counts_move_with_occupancy_latency_and_scheduler() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "ht", &["buckets=128", "insertions=2048"]);
    let t = tst.to_str().unwrap();
    let info = info_json(&tst);
    assert_eq!(info["format_version"], 4);
    assert_eq!(
        info["kernels"][0]["spin_regions"].as_array().unwrap().len(),
        1
    );
    assert_eq!(info["sync_words"][0]["name"], "locks");
    assert_eq!(info["sync_words"][0]["words"], 128);
    let rounds = |set: &[&str]| -> u64 {
        // Two SMs per chiplet: 16 CTAs compete for 8 SMs, so occupancy matters.
        let mut a = vec!["--trace", t, "--set", "core.sm_count=2"];
        for s in set {
            a.push("--set");
            a.push(s);
        }
        let v = run_json("a100-4chiplet.yaml", &a);
        let s = &v["sync"];
        assert_eq!(v["provenance"]["input"]["sync"], "values");
        assert_eq!(s["words"][0]["check"], "ok", "{set:?}: {s}");
        assert_eq!(s["cas_won"], 2048, "{set:?}: one won CAS per insertion");
        assert_eq!(s["spin_exits"], 2048, "{set:?}");
        assert!(
            s["cas_lost"].as_u64().unwrap() > 0,
            "{set:?}: no contention"
        );
        s["spin_iterations"].as_u64().unwrap()
    };
    let (one, eight) = (
        rounds(&["core.max_ctas_per_sm=1"]),
        rounds(&["core.max_ctas_per_sm=8"]),
    );
    assert_ne!(one, eight, "1 and 8 CTAs per SM spun alike");
    // The copies leave the table and locks in DRAM only (otherwise every access hits the
    // L2 the copies filled, and DRAM's latency never shows).
    let (near, far) = (
        rounds(&["memcpy.fills_l2=false", "dram.latency_ps=218788"]),
        rounds(&["memcpy.fills_l2=false", "dram.latency_ps=800000"]),
    );
    assert_ne!(near, far, "two DRAM latencies spun alike");
    let (lrr, gto) = (
        rounds(&["core.scheduler=lrr"]),
        rounds(&["core.scheduler=gto"]),
    );
    assert_ne!(lrr, gto, "lrr and gto spun alike");
}

/// The software grid barriers complete when every CTA is resident and deadlock when the
/// GPU holds fewer CTAs than the grid (liu-2018 chapter 4, eltantawy-2018 section 1.2):
/// the watchdog stops the run, the stats file says where every warp waits, and `tessera
/// run` exits with status 3.
#[test]
fn grid_barriers_over_more_ctas_than_the_gpu_holds_are_deadlocks() {
    // Four SMs of at most two CTAs: 8 resident at once.
    let small = [
        "--set",
        "core.sm_count=4",
        "--set",
        "core.max_ctas_per_sm=2",
        "--set",
        "watchdog.check_cycles=1000",
        "--set",
        "watchdog.livelock_cycles=20000",
    ];
    for w in ["atomic_barrier", "flag_barrier"] {
        let fits = tempfile::tempdir().unwrap();
        let tst = gen(fits.path(), w, &["ctas=8", "episodes=2"]);
        let mut a = vec!["--trace", tst.to_str().unwrap()];
        a.extend_from_slice(&small);
        let v = run_json("a100.yaml", &a);
        assert!(v.get("watchdog").is_none(), "{w}: 8 CTAs on 8 slots");
        assert!(v["sync"]["words"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["check"] == "ok"));

        let over = tempfile::tempdir().unwrap();
        let tst = gen(over.path(), w, &["ctas=16", "episodes=2"]);
        let out = over.path().join("stats.json");
        let mut a = run_args("a100.yaml", &["--trace", tst.to_str().unwrap()]);
        a.extend(small.iter().map(|s| s.to_string()));
        a.push("--stats-out".into());
        a.push(out.display().to_string());
        let o = tessera(&a);
        assert_eq!(o.status.code(), Some(3), "{w}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("watchdog: deadlock at cycle"),
            "{}",
            stderr(&o)
        );
        let v = json(&std::fs::read_to_string(&out).unwrap());
        let d = &v["watchdog"];
        assert_eq!(d["verdict"], "deadlock", "{w}");
        assert!(d["live_warps"].as_u64().unwrap() >= 8, "{w}: {d}");
        let states: Vec<&str> = d["warps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["state"].as_str().unwrap())
            .collect();
        assert!(states.contains(&"spin"), "{w}: {states:?}");
        // Nothing ran past the 8 resident CTAs: no CTA of the second half started.
        assert!(d["warps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["cta"][0].as_u64().unwrap() < 8));
        assert!(v["sync"]["words"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["check"] == "partial"));
    }
}

/// `nw` (a wavefront of tiles spinning on their neighbours' flags) and `simt_lock` (the
/// lanes of a warp contending for one lock, with the release after the loop, replayed as
/// recorded, or inside it, a spin region) run to completion on the 4-chiplet preset with
/// their sync words as the recorder left them (`nw`'s flags all set, the lock free). `nw`
/// also completes on 2 SMs holding fewer CTAs than its grid: a tile waits only for
/// earlier CTAs, which in-order dispatch has already placed.
#[test]
fn nw_and_simt_lock_complete_and_check() {
    let all_ok = |v: &serde_json::Value| {
        assert!(v.get("watchdog").is_none(), "{}", v["watchdog"]);
        assert_eq!(v["provenance"]["input"]["sync"], "values");
        let words = v["sync"]["words"].as_array().unwrap();
        assert!(!words.is_empty());
        assert!(words.iter().all(|x| x["check"] == "ok"), "{words:?}");
        v["sync"]["spin_iterations"].as_u64().unwrap()
    };
    let tmp = tempfile::tempdir().unwrap();
    let nw = gen(tmp.path(), "nw", &["tiles=6"]);
    let nw = nw.to_str().unwrap();
    let v = run_json("a100-4chiplet.yaml", &["--trace", nw]);
    assert!(all_ok(&v) > 0);
    assert_eq!(
        v["sync"]["spin_exits"], 36,
        "one leader per tile leaves once"
    );

    // Beyond residency: 100 CTAs on 2 SMs of 32 slots, and 36 on 2 SMs of 2.
    let big = tempfile::tempdir().unwrap();
    let nw10 = gen(big.path(), "nw", &["tiles=10"]);
    let nw10 = nw10.to_str().unwrap();
    for (trace, ctas, set) in [
        (nw10, 100, vec!["--set", "core.sm_count=2"]),
        (
            nw,
            36,
            vec![
                "--set",
                "core.sm_count=2",
                "--set",
                "core.max_ctas_per_sm=2",
            ],
        ),
    ] {
        let mut a = vec!["--trace", trace];
        a.extend_from_slice(&set);
        let v = run_json("a100.yaml", &a);
        all_ok(&v);
        let k = &v["kernels"][0];
        assert_eq!(k["ctas"], ctas);
        assert!(
            k["ctas_per_sm"].as_u64().unwrap() * 2 < ctas,
            "{set:?}: {k}"
        );
    }

    for (inside, spins) in [("0", false), ("1", true)] {
        let d = tempfile::tempdir().unwrap();
        let p = format!("release_inside={inside}");
        let tst = gen(d.path(), "simt_lock", &[&p]);
        let v = run_json("a100-4chiplet.yaml", &["--trace", tst.to_str().unwrap()]);
        let n = all_ok(&v);
        assert_eq!(n > 0, spins, "{p}: {n} spin iterations");
        // At least one CAS round and one release per critical section (128 threads) were
        // performed at the lock's home.
        let s = &v["sync"];
        assert!(s["atomics"].as_u64().unwrap() >= 2 * 128, "{p}: {s}");
    }
}

/// A warp whose stream enters a spin region and ends without leaving it (the trace's
/// region is not one) stops the run with an error naming the CTA, the warp and the region.
#[test]
fn a_stream_that_ends_inside_a_spin_region_is_an_error() {
    use tessera_frontend::opcodes::{decode_opcode, ArchFamily};
    use tessera_traces::SyncWords;
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("open-region.tst");
    let flag = 0x7f00_0000_0000u64;
    let mut w = TraceWriter::create(&tst, WriterOptions::default()).unwrap();
    w.add_command(Command::Alloc {
        device: 0,
        addr: flag,
        bytes: 4,
    })
    .unwrap();
    w.add_sync_words(SyncWords {
        name: "flag".into(),
        device: 0,
        addr: flag,
        init: vec![1],
        expect: Vec::new(),
    });
    let mut meta = KernelMeta::new("_Z4openv", [1, 1, 1], [64, 1, 1]);
    meta.records_operands = true;
    meta.spin_regions = vec![flag_region()];
    let k = w.begin_kernel(meta).unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let op = |w: &mut TraceWriter, n: &str| {
        w.add_opcode(decode_opcode(ArchFamily::Ampere, n).unwrap())
            .unwrap()
    };
    let (ld, bra, exit) = (
        op(&mut w, "LDG.E.STRONG.GPU"),
        op(&mut w, "BRA"),
        op(&mut w, "EXIT"),
    );
    let at = [flag];
    let inst = |pc: u32, opcode: u16, mask: u32| RawInst {
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
    let load = || {
        let mut x = inst(0x10, ld, 1);
        x.dsts = &[4];
        x.mem_width = 4;
        x.addrs = AddrRecord::List {
            mode: 0,
            addrs: &at,
        };
        x
    };
    w.begin_cta([0, 0, 0], None).unwrap();
    // Warp 0: the region whole (the flag is already set: one round).
    w.begin_warp(0).unwrap();
    w.push(&load()).unwrap();
    w.push_with_operands(&inst(0x20, bra, 1), &[1]).unwrap();
    w.push(&inst(0x30, bra, 1)).unwrap();
    w.push(&inst(0x40, exit, u32::MAX)).unwrap();
    w.end_warp().unwrap();
    // Warp 1: enters the region and exits.
    w.begin_warp(1).unwrap();
    w.push(&load()).unwrap();
    w.push(&inst(0x40, exit, u32::MAX)).unwrap();
    w.end_warp().unwrap();
    w.end_cta().unwrap();
    w.end_kernel().unwrap();
    w.finish().unwrap();
    let o = tessera(&run_args("a100.yaml", &["--trace", tst.to_str().unwrap()]));
    assert_clean_failure(
        &o,
        &[
            "kernel 0 (_Z4openv)",
            "CTA (0,0,0) warp 1, pc 0x40",
            "ends inside spin region 0",
        ],
    );
}

/// The lock-holder checking mode (`watchdog.check_lock_holders`): on `ht` (a lock per
/// bucket) and `atm` (two nested locks per transfer) on a 4-chiplet preset, every lock
/// acquired is one hold, released before the next holder takes it (the run would end with
/// an error naming both holders otherwise; a model that counted losing lanes as holders
/// fails it). Off by default: the stats then say nothing about holds.
#[test]
fn lock_holders_never_overlap() {
    for (wl, params, holds) in [
        ("ht", ["-p", "insertions=1024"], 1024),
        ("atm", ["-p", "transfers=1024"], 2048),
    ] {
        let mut args = vec!["--workload", wl];
        args.extend(params);
        let off = run_json("a100-4chiplet.yaml", &args);
        assert!(off["sync"].get("lock_holds").is_none());
        args.extend(["--set", "watchdog.check_lock_holders=true"]);
        let on = run_json("a100-4chiplet.yaml", &args);
        let s = &on["sync"];
        assert_eq!(s["lock_holds"], holds, "{wl}");
        assert_eq!(s["cas_won"], holds, "{wl}");
        // Checking changes nothing in the simulation.
        assert_eq!(on["totals"], off["totals"], "{wl}");
    }
}

/// `sense_barrier` (a sense-reversing grid barrier): in every episode exactly one CTA's
/// thread 0 takes the last-arriver path (a branch region chosen by the simulated order of
/// its `atomicAdd`s), resets the counter and releases the others; `count` ends at 0 and
/// `flag` at the episodes (the recorder's values, checked). More CTAs than the GPU holds
/// deadlock, as for the other grid barriers.
#[test]
fn exactly_one_last_arriver_per_barrier_episode() {
    for episodes in [1u64, 3, 6] {
        let e = format!("episodes={episodes}");
        let v = run_json(
            "a100-4chiplet.yaml",
            &["--workload", "sense_barrier", "-p", "ctas=32", "-p", &e],
        );
        let s = &v["sync"];
        assert_eq!(s["branch_taken"], episodes, "{episodes} episodes");
        assert_eq!(s["branch_passed"], 31 * episodes);
        let checks: Vec<&str> = s["words"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["check"].as_str().unwrap())
            .collect();
        assert_eq!(checks, ["ok", "ok"]);
    }
    let tmp = tempfile::tempdir().unwrap();
    let over = gen(tmp.path(), "sense_barrier", &["ctas=16", "episodes=1"]);
    let o = tessera(&run_args(
        "a100.yaml",
        &[
            "--trace",
            over.to_str().unwrap(),
            "--set",
            "core.sm_count=4",
            "--set",
            "core.max_ctas_per_sm=2",
            "--set",
            "watchdog.livelock_cycles=20000",
        ],
    ));
    assert_eq!(o.status.code(), Some(3), "{o:?}");
}

/// `warp_specialized` with mbarriers (full and empty per CTA, the kernel recorded as
/// sm_90): producers and consumers hand every tile over, each phase completing once per
/// round on each barrier (`barriers` counts the CTA barrier after the inits too), and the
/// run retires what the trace holds.
#[test]
fn mbarrier_pipelines_complete_phase_by_phase() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(
        tmp.path(),
        "warp_specialized",
        &["sync=mbarrier", "ctas=4", "rounds=3"],
    );
    let info = info_json(&tst);
    assert_eq!(info["kernels"][0]["mbarrier_insts"], 6);
    assert_eq!(info["kernels"][0]["binary_version"], 90);
    let v = run_json("a100.yaml", &["--trace", tst.to_str().unwrap()]);
    assert_eq!(v["totals"]["warp_insts"], info["totals"]["warp_insts"]);
    let barriers: u64 = v["chiplets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["barriers"].as_u64().unwrap())
        .sum();
    // Per CTA: the barrier after the inits, 3 phases of "full" and 3 of "empty".
    assert_eq!(barriers, 4 * (1 + 3 + 3));
}

/// `flag_barrier weak=1` spins on its flags with weak loads (non-volatile flags): each SM's
/// L1 keeps answering with the copy it read first, so the barrier never completes on a GPU
/// with L1s and the watchdog stops it (exit status 3, a deadlock); without L1s every
/// round reads the flags' homes and it completes with the recorder's values.
#[test]
fn a_grid_barrier_spinning_on_weak_loads_hangs_on_stale_l1_copies() {
    let run = |extra: &[&str]| {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("s.json");
        let mut a = run_args(
            "a100-4chiplet.yaml",
            &[
                "--workload",
                "flag_barrier",
                "-p",
                "ctas=16",
                "-p",
                "weak=1",
                "--set",
                "watchdog.livelock_cycles=20000",
            ],
        );
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push("--stats-out".into());
        a.push(out.display().to_string());
        let o = tessera(&a);
        (
            o.status.code(),
            json(&std::fs::read_to_string(&out).unwrap()),
        )
    };
    let (code, v) = run(&[]);
    assert_eq!(code, Some(3));
    assert_eq!(v["watchdog"]["verdict"], "deadlock");
    assert!(v["sync"]["l1_sync_hits"].as_u64().unwrap() > 1000);
    let (code, v) = run(&["--set", "l1d.enabled=false"]);
    assert_eq!(code, Some(0));
    assert_eq!(v["sync"]["l1_sync_hits"], 0);
    assert!(v.get("watchdog").is_none());
    for w in v["sync"]["words"].as_array().unwrap() {
        assert_eq!(w["check"], "ok");
    }
}
