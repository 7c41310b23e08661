//! End-to-end tests of multi-chiplet GPUs (`configs/a100-4chiplet.yaml`): the thread count
//! and the partitioning never change the stats (DESIGN.md section 3), every traced
//! instruction retires once across the chiplets, remote traffic really crosses the links,
//! and the smallest legal link latency runs exactly.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// `tessera run --config a100-4chiplet.yaml --trace <tst> <extra...>`: the stats text.
fn run(tst: &Path, extra: &[&str]) -> String {
    let t = tst.to_str().unwrap();
    run_stats("a100-4chiplet.yaml", &[&["--trace", t], extra].concat()).0
}

fn sum(s: &Value, f: impl Fn(&Value) -> u64) -> u64 {
    s["chiplets"].as_array().unwrap().iter().map(f).sum()
}

/// Three workloads on 4 chiplets (stream with 3/4 of its lines homed on other chiplets,
/// gemm, stencil2d over several kernels): the sequential transport (`--threads 1`), 2 and 4
/// threads, and a second partitioning (each chiplet cut in 2 by SM cluster, on 1 and 3
/// threads) give the same bytes.
#[test]
fn threads_and_partitionings_never_change_results_on_4_chiplets() {
    let tmp = tempfile::tempdir().unwrap();
    for (w, params) in [
        ("stream", &["n=65536"][..]),
        ("gemm", &["m=128", "n=128", "k=64"][..]),
        ("stencil2d", &["nx=128", "ny=128", "iters=3"][..]),
    ] {
        let tst = gen(tmp.path(), w, params);
        let seq = run(&tst, &["--threads", "1"]);
        let s = json(&seq);
        // Every traced instruction once, split over the chiplets.
        let info = info_json(&tst);
        assert_eq!(s["totals"]["warp_insts"], info["totals"]["warp_insts"]);
        assert_eq!(s["totals"]["ctas"], info["totals"]["ctas"]);
        assert_eq!(
            sum(&s, |c| c["warp_insts"].as_u64().unwrap()),
            s["totals"]["warp_insts"].as_u64().unwrap()
        );
        assert_eq!(s["chiplets"].as_array().unwrap().len(), 4);
        for c in s["chiplets"].as_array().unwrap() {
            assert!(
                c["warp_insts"].as_u64().unwrap() > 0,
                "{w}: an idle chiplet"
            );
        }
        for extra in [
            &["--threads", "2"][..],
            &["--threads", "4"][..],
            &[
                "--set",
                "partitioning.mode=sm_cluster",
                "--set",
                "partitioning.sm_clusters=2",
            ][..],
            &[
                "--set",
                "partitioning.mode=sm_cluster",
                "--set",
                "partitioning.sm_clusters=2",
                "--threads",
                "3",
            ][..],
        ] {
            assert!(
                run(&tst, extra) == seq,
                "{w} {extra:?} differs from --threads 1"
            );
        }
    }
}

/// Pages go to chiplets in turn, so 3 of every 4 lines a chiplet's SMs touch are homed
/// elsewhere: stream's requests mostly cross the links, and the links carry them.
#[test]
fn stream_on_4_chiplets_is_mostly_remote_traffic() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let s = json(&run(&tst, &[]));
    let remote = sum(&s, |c| c["memory"]["remote_requests"].as_u64().unwrap());
    let requests = sum(&s, |c| c["memory"]["l1d_miss_requests"].as_u64().unwrap());
    assert!(
        remote * 10 >= requests * 6,
        "{remote} remote of {requests} L1 miss requests"
    );
    // Switch topology: each chiplet's link up to the switch and the switch's down to it.
    let links = s["links"].as_array().unwrap();
    assert_eq!(links.len(), 8);
    let packets: u64 = links
        .iter()
        .filter(|l| l["to"] == "switch")
        .map(|l| l["packets"].as_u64().unwrap())
        .sum();
    let down: u64 = links
        .iter()
        .filter(|l| l["from"] == "switch")
        .map(|l| l["packets"].as_u64().unwrap())
        .sum();
    // Every packet that goes up comes down; requests and replies both cross.
    assert_eq!(packets, down);
    assert!(
        packets >= remote,
        "{packets} link packets for {remote} requests"
    );
    let end = s["totals"]["sim_time_ps"].as_u64().unwrap();
    for l in links {
        assert!(l["busy_ps"].as_u64().unwrap() <= end, "{l}");
    }
}

/// The smallest legal link latency (1 ps) is the lookahead of the chiplet cut: windows of
/// 1 ps. Every packet is checked against its receiver's time (inside a partition and at
/// partition boundaries); two threads give the sequential bytes.
#[test]
fn smallest_link_latency_runs_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=16384", "kernels=triad"]);
    let one = ["--set", "package.link.latency_ps=1"];
    let seq = run(&tst, &[&one[..], &["--threads", "1"]].concat());
    let two = run(&tst, &[&one[..], &["--threads", "2"]].concat());
    assert!(seq == two);
    // A longer link makes the run slower, not different in what retires.
    let slow = json(&run(&tst, &["--set", "package.link.latency_ps=200000"]));
    let fast = json(&seq);
    assert_eq!(slow["totals"]["warp_insts"], fast["totals"]["warp_insts"]);
    assert!(
        slow["totals"]["sim_time_ps"].as_u64() > fast["totals"]["sim_time_ps"].as_u64(),
        "a 200 ns link did not slow the run"
    );
}

/// A link latency of zero would make the lookahead zero: a config error naming the key.
#[test]
fn zero_link_latency_is_an_error_naming_the_key() {
    let cfg = config("a100-4chiplet.yaml");
    let o = tessera(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--workload",
        "vectoradd",
        "--set",
        "package.link.latency_ps=0",
    ]);
    let e = assert_clean_failure(&o, &["package.link.latency_ps", "lookahead"]);
    assert!(e.contains("--set"), "{e}");
}

/// `package.home: first_touch` homes each page where the annotated footprint of the CTAs
/// that touch it first runs: a stencil's rows (1 KiB, 4 to a page) stay on the chiplet that
/// sweeps them (64 rows each), and only the pages at the halos cross (the CPCoh study's placement, dalmia-2023 section 5.4.3.1).
/// Page interleave sends 3 of every 4 lines elsewhere. Threads still change nothing.
#[test]
fn first_touch_keeps_a_stencil_local() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stencil2d", &["nx=256", "ny=256", "iters=3"]);
    let remote = |home: &str| {
        let set = format!("package.home={home}");
        let text = run(&tst, &["--set", &set]);
        assert!(run(&tst, &["--set", &set, "--threads", "2"]) == text);
        let s = json(&text);
        sum(&s, |c| c["memory"]["remote_requests"].as_u64().unwrap())
    };
    let (ft, pi) = (remote("first_touch"), remote("page_interleave"));
    assert!(
        ft * 10 < pi,
        "first touch {ft} remote requests, page interleave {pi}"
    );
}
