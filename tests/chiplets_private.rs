//! End-to-end tests of the private-L2 hierarchy (`package.l2: private`, DESIGN.md section
//! 5) on `configs/radeon7-4chiplet.yaml`, the CPCoh baseline GPU (dalmia-2023 Table 5.1):
//! kernel-boundary flushes show in the stats and cost launch-path time, a memory-side L2
//! shows none, and threads and partitioning never change the bytes of the stats.

mod common;

use common::*;
use std::path::Path;

/// `tessera run --config configs/radeon7-4chiplet.yaml --trace <tst> <extra...>`: the stats
/// JSON text.
fn run(tst: &Path, extra: &[&str]) -> String {
    let t = tst.to_str().unwrap();
    run_stats("radeon7-4chiplet.yaml", &[&["--trace", t], extra].concat()).0
}

const FLUSH_KEYS: [&str; 3] = [
    "l2_flush_writeback_sectors",
    "l2_flush_invalidated_lines",
    "l2_flush_lost_hits",
];

/// Stencil2d (one kernel per Jacobi iteration, each reading what the last one wrote) on the
/// CPCoh baseline: every boundary writes back the chiplets' dirty lines and invalidates
/// their L2s, and the next kernel misses on lines it would have hit (the reuse CPCoh keeps,
/// dalmia-2023 section 5.2). The same trace with a memory-side L2 flushes nothing.
#[test]
fn stencil2d_flushes_private_l2s_and_memory_side_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stencil2d", &["nx=128", "ny=128", "iters=3"]);
    let private = json(&run(&tst, &[]));
    let t = &private["totals"];
    for k in FLUSH_KEYS {
        assert!(
            t[k].as_u64().unwrap() > 0,
            "{k} is 0 with a private L2: {t}"
        );
    }
    assert!(t["llc_accesses"].as_u64().unwrap() > 0);
    // Per chiplet too, and the totals are their sums.
    for k in FLUSH_KEYS {
        let per: u64 = private["chiplets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["memory"][k].as_u64().unwrap())
            .sum();
        assert_eq!(per, t[k].as_u64().unwrap(), "{k}");
    }
    let side = json(&run(&tst, &["--set", "package.l2=memory_side"]));
    let m = &side["totals"];
    for k in FLUSH_KEYS
        .iter()
        .chain(&["llc_accesses", "llc_hits", "llc_misses"])
    {
        assert_eq!(m[k].as_u64(), Some(0), "{k} with a memory-side L2: {m}");
    }
    assert_eq!(m["warp_insts"], t["warp_insts"]);
    // One chiplet: its CP is both global and local CP, and still flushes.
    let one = json(&run(&tst, &["--set", "chiplets=1"]));
    for k in FLUSH_KEYS {
        assert!(one["totals"][k].as_u64().unwrap() > 0, "{k} with 1 chiplet");
    }
}

/// The flush rides the launch path (gpu/cp.rs): the global CP's request to each local CP takes
/// `launch.gcp_to_lcp_ps` (and the acknowledgement `completion_ps`), on top of the slice
/// dispatch. One more microsecond of `gcp_to_lcp_ps` delays each of the 3 kernels twice
/// (slice, flush), so the run by 6 us (within 0.1%: the rest of the run shifts with it).
#[test]
fn kernel_boundary_flush_costs_a_cp_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stencil2d", &["nx=128", "ny=128", "iters=3"]);
    let time = |gcp: &str| {
        let s = json(&run(
            &tst,
            &[
                "--set",
                "dram.t_refi_ps=0",
                "--set",
                &format!("launch.gcp_to_lcp_ps={gcp}"),
            ],
        ));
        assert_eq!(s["totals"]["kernels"].as_u64(), Some(3));
        s["totals"]["sim_time_ps"].as_u64().unwrap() as f64
    };
    let delta = time("3000000") - time("2000000");
    let want = 3.0 * 2.0 * 1e6;
    assert!(
        (delta - want).abs() < 1e-3 * want,
        "+1 us of gcp_to_lcp_ps moved the end by {delta} ps, not {want}"
    );
}

/// DESIGN.md section 3: threads and partitioning never change results, with the LLC
/// packets and flushes crossing partitions (chiplets on different threads; each chiplet cut
/// in two by SM cluster, its L2 slices and LLC slices on both sides).
#[test]
fn threads_and_partitioning_never_change_results() {
    let tmp = tempfile::tempdir().unwrap();
    for (w, params) in [
        ("stencil2d", &["nx=128", "ny=128", "iters=3"][..]),
        ("gemm", &["m=128", "n=128", "k=64"][..]),
    ] {
        let tst = gen(tmp.path(), w, params);
        let one = run(&tst, &["--threads", "1"]);
        assert!(json(&one)["totals"]["l2_flush_invalidated_lines"].as_u64() > Some(0));
        for threads in ["2", "4"] {
            assert!(
                run(&tst, &["--threads", threads]) == one,
                "{w}: {threads} threads differ from 1"
            );
        }
        let cut = run(
            &tst,
            &[
                "--set",
                "partitioning.mode=sm_cluster",
                "--set",
                "partitioning.sm_clusters=2",
                "--threads",
                "4",
            ],
        );
        assert!(cut == one, "{w}: 2 SM clusters per chiplet differ from 1");
    }
}
