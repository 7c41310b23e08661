//! Credits on the package links and the GPU fabric (issue 22, item 3): a sender without
//! credit waits, the receive buffers never hold more than their configured bytes, a link
//! with small buffers carries at most what its credits allow per round trip (an analytical
//! bound), multi-hop routes with the smallest buffers do not deadlock, and none of it
//! depends on threads or cuts. The default buffers (bandwidth x round trip) are checked
//! not to throttle by tests/link_stress.rs.

mod common;

use common::*;
use serde_json::Value;

fn links(s: &Value) -> &Vec<Value> {
    s["links"].as_array().unwrap()
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// Every link's buffer as configured, and never fuller than it.
fn assert_within_buffers(s: &Value, buffer: u64) {
    for l in links(s) {
        let b = u(l, "buffer_bytes");
        assert!(
            b == buffer || b == 0,
            "{l}: buffer {b}, configured {buffer}"
        );
        assert!(u(l, "peak_buffer_bytes") <= b, "{l}: over its buffer");
    }
}

#[test]
fn small_buffers_bound_a_link_by_its_credits_per_round_trip() {
    // Two chiplets, one link each way, pages interleaved: half of a STREAM copy's requests
    // cross, requests one way and replies the other, each class on its own virtual channel
    // with `buffer` bytes. A packet's credit comes back at the earliest one link latency
    // after its last byte arrives, which is itself one latency after it left: each channel
    // carries at most `buffer` bytes per `2 x latency`, the link at most `buffer /
    // latency` for its two channels, here 28% of its bandwidth.
    let buffer = 2048u64;
    let latency_s = 19_174e-12; // package.link.latency_ps of a100-4chiplet.yaml
    let bound = buffer as f64 / latency_s;
    let bw = 272.0 * 1.41e9;
    assert!(bound < 0.3 * bw);
    let go = |n: &str, buffer: &str| {
        run_json(
            "a100-4chiplet.yaml",
            &[
                "--workload",
                "stream",
                "-p",
                n,
                "-p",
                "kernels=copy",
                "--set",
                "chiplets=2",
                "--set",
                "package.topology=fully_connected",
                "--set",
                &format!("package.link.buffer_bytes={buffer}"),
            ],
        )
    };
    let (small, big) = (go("n=131072", "2048"), go("n=262144", "2048"));
    assert_within_buffers(&big, buffer);
    let span = |d: &Value| {
        let k = &d["kernels"][0];
        (u(k, "end_ps") - u(k, "start_ps")) as f64 * 1e-12
    };
    let dt = span(&big) - span(&small);
    assert_eq!(links(&big).len(), 2);
    for (a, b) in links(&small).iter().zip(links(&big)) {
        let rate = (u(b, "wire_bytes") - u(a, "wire_bytes")) as f64 / dt;
        assert!(
            rate <= bound * 1.01,
            "{} -> {}: {:.1} GB/s over the credit bound {:.1} GB/s",
            b["from"],
            b["to"],
            rate * 1e-9,
            bound * 1e-9
        );
        assert!(
            rate >= 0.25 * bound,
            "{} -> {}: {:.1} GB/s, far below the credit bound {:.1} GB/s",
            b["from"],
            b["to"],
            rate * 1e-9,
            bound * 1e-9
        );
        assert!(u(b, "credit_waits") > 0, "{b}: nothing waited for credit");
    }
    // The default buffers let the same copy go faster.
    let free = go("n=262144", "0");
    assert!(span(&free) < 0.8 * span(&big));
    let default = u(&links(&free)[0], "buffer_bytes");
    assert!(default > 10_000, "bandwidth x round trip, got {default}");
}

#[test]
fn the_smallest_buffers_on_a_ring_neither_deadlock_nor_depend_on_threads_or_cuts() {
    // On a ring of 4 chiplets a packet may cross two links; with buffers of one largest
    // packet (8 B header, 128 B line, 8 B overhead) every buffer fills, and only the
    // virtual channels by distance keep the waits from forming a cycle.
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let t = tst.to_str().unwrap();
    let base = [
        "--trace",
        t,
        "--set",
        "package.topology=ring",
        "--set",
        "package.link.buffer_bytes=144",
    ];
    let run = |extra: &[&str]| run_stats("a100-4chiplet.yaml", &[&base[..], extra].concat()).0;
    let seq = run(&["--threads", "1"]);
    let s = json(&seq);
    assert_within_buffers(&s, 144);
    let waits: u64 = links(&s).iter().map(|l| u(l, "credit_waits")).sum();
    assert!(waits > 0, "nothing waited for credit");
    assert!(links(&s).iter().any(|l| u(l, "peak_buffer_bytes") == 144));
    for extra in [
        &["--threads", "2"][..],
        &["--threads", "4"][..],
        &[
            "--set",
            "partitioning.mode=sm_cluster",
            "--set",
            "partitioning.sm_clusters=2",
            "--threads",
            "3",
        ][..],
    ] {
        assert!(run(extra) == seq, "{extra:?} differs from --threads 1");
    }
}

#[test]
fn the_gpu_fabric_waits_for_credit_the_same_way_on_any_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("peer.tst");
    write_peer_trace(&tst, 4, 32 * 1024);
    let t = tst.to_str().unwrap();
    let base = [
        "--trace",
        t,
        "--set",
        "system.gpus=4",
        "--set",
        "system.gpu_link.buffer_bytes=304",
    ];
    let run = |extra: &[&str]| run_stats("dgx-8gpu.yaml", &[&base[..], extra].concat()).0;
    let seq = run(&["--threads", "1"]);
    let s = json(&seq);
    assert_within_buffers(&s, 304);
    let up: Vec<&Value> = links(&s).iter().filter(|l| l["to"] == "nvswitch").collect();
    assert_eq!(up.len(), 4);
    assert!(up.iter().all(|l| u(l, "credit_waits") > 0));
    for extra in [&["--threads", "2"][..], &["--threads", "4"][..]] {
        assert!(run(extra) == seq, "{extra:?} differs from --threads 1");
    }
}

#[test]
fn a_buffer_that_cannot_hold_the_largest_packet_is_refused() {
    for (key, need) in [
        ("package.link.buffer_bytes", "144"),
        ("system.gpu_link.buffer_bytes", "152"),
    ] {
        let o = tessera(&run_args(
            "a100-4chiplet.yaml",
            &[
                "--workload",
                "vectoradd",
                "--set",
                "system.gpus=2",
                "--set",
                &format!("{key}=100"),
            ],
        ));
        assert_clean_failure(&o, &[key, need, "largest packet"]);
    }
}
