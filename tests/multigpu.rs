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
