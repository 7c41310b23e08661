//! Multi-GPU systems end to end (`configs/dgx-8gpu.yaml`): a hand-written trace with a
//! kernel on each of the 8 devices, each reading its neighbour's memory, gives byte-identical
//! stats on 1, 2 and 4 worker threads (the 8 GPUs are 8 partitions), and the stats show the
//! kernels on their GPUs and the peer traffic through NVSwitch.

mod common;

use common::{json, run_stats, write_peer_trace};

#[test]
fn dgx_stats_are_identical_on_1_2_and_4_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("peer.tst");
    let n = 4096;
    write_peer_trace(&tst, 8, n);
    let tst = tst.to_str().unwrap();
    let (one, _) = run_stats("dgx-8gpu.yaml", &["--trace", tst, "--threads", "1"]);
    for threads in ["2", "4"] {
        let (other, _) = run_stats("dgx-8gpu.yaml", &["--trace", tst, "--threads", threads]);
        assert!(one == other, "--threads {threads} changed the stats");
    }
    let s = json(&one);
    assert_eq!(s["totals"]["gpus"], 8);
    let kernels = s["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 8);
    for (g, k) in kernels.iter().enumerate() {
        assert_eq!(
            k["gpu"], g as u64,
            "kernels in trace order, on their device"
        );
    }
    // Each kernel loads n/32 warps x 128 B of its neighbour's b: one peer request per warp
    // (a 128 B line), none for its own a and c.
    let ctas = n / 32;
    assert_eq!(s["totals"]["peer_requests"], 8 * ctas);
    let chiplets = s["chiplets"].as_array().unwrap();
    assert_eq!(chiplets.len(), 8);
    for (g, c) in chiplets.iter().enumerate() {
        assert_eq!(c["gpu"], g as u64);
        assert_eq!(c["memory"]["peer_requests"], ctas);
    }
    let links = s["links"].as_array().unwrap();
    assert_eq!(
        links.len(),
        16,
        "each GPU's port up to NVSwitch and NVSwitch's port down"
    );
    for l in links {
        assert_eq!(l["packets"], 2 * ctas, "{l}: requests and replies");
    }
    // Kernels of different GPUs overlap: each is submitted before the previous completes.
    for w in kernels.windows(2) {
        let (end, next) = (w[0]["end_ps"].as_u64(), w[1]["start_ps"].as_u64());
        assert!(next < end, "{} then {}", w[0], w[1]);
    }
}

/// Two GPUs of 4 chiplets (`a100-4chiplet.yaml`, `system.gpus=2`: 8 partitions): peer loads
/// cross each chiplet's own port to the switch and the package links inside each GPU, and
/// the stats are the same bytes on 1, 3 and 8 threads.
#[test]
fn two_gpus_of_four_chiplets_give_identical_stats_on_any_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("peer2.tst");
    let n = 8192;
    write_peer_trace(&tst, 2, n);
    let tst = tst.to_str().unwrap();
    let run = |threads: &str| {
        run_stats(
            "a100-4chiplet.yaml",
            &[
                "--trace",
                tst,
                "--set",
                "system.gpus=2",
                "--threads",
                threads,
            ],
        )
        .0
    };
    let one = run("1");
    for threads in ["3", "8"] {
        assert!(one == run(threads), "--threads {threads} changed the stats");
    }
    let s = json(&one);
    assert_eq!(s["totals"]["peer_requests"], 2 * n / 32);
    let chiplets = s["chiplets"].as_array().unwrap();
    assert_eq!(chiplets.len(), 8);
    assert_eq!(chiplets[4]["gpu"], 1);
    let links = s["links"].as_array().unwrap();
    let port = |from: &str, to: &str| {
        links
            .iter()
            .find(|l| l["from"] == from && l["to"] == to)
            .unwrap_or_else(|| panic!("no {from} -> {to}"))["packets"]
            .as_u64()
            .unwrap()
    };
    let up: u64 = (0..8)
        .map(|k| port(&format!("gpu{}.chiplet{k}", k / 4), "nvswitch"))
        .sum();
    assert_eq!(
        up,
        2 * (2 * n / 32),
        "every peer request and reply goes up once"
    );
    assert!(
        port("chiplet0", "gpu0.switch") > 0,
        "package links inside GPU 0"
    );
}

/// The frontend's `peer_stream` workload (device `g` adds `a_g` and the next GPU's `b`) on
/// dgx-8gpu: the same bytes on 1 and 4 threads and with each GPU cut into 3 partitions, a
/// kernel per GPU in trace order, and peer requests on every GPU.
#[test]
fn peer_stream_workload_runs_on_dgx() {
    let args = ["--workload", "peer_stream", "--param", "n=16384"];
    let (one, _) = run_stats("dgx-8gpu.yaml", &[&args[..], &["--threads", "1"]].concat());
    let (four, _) = run_stats("dgx-8gpu.yaml", &[&args[..], &["--threads", "4"]].concat());
    assert!(one == four, "--threads 4 changed the stats");
    // GPUs dealt round robin (0, 2, 4, 6 on one thread, 1, 3, 5, 7 on the other).
    let rr = ["--threads", "2", "--placement", "round_robin"];
    let (rr, _) = run_stats("dgx-8gpu.yaml", &[&args[..], &rr[..]].concat());
    assert!(one == rr, "round-robin placement changed the stats");
    // Cut further, each GPU into 3 SM clusters (24 partitions): the same bytes again.
    let cut = [
        "--set",
        "partitioning.mode=sm_cluster",
        "--set",
        "partitioning.sm_clusters=3",
        "--threads",
        "4",
    ];
    let (cut, _) = run_stats("dgx-8gpu.yaml", &[&args[..], &cut[..]].concat());
    assert!(one == cut, "the SM-cluster cut changed the stats");
    let s = json(&one);
    let kernels = s["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 8);
    for (g, k) in kernels.iter().enumerate() {
        assert_eq!(k["gpu"], g as u64);
    }
    for c in s["chiplets"].as_array().unwrap() {
        assert!(c["memory"]["peer_requests"].as_u64().unwrap() > 0, "{c}");
    }
}
