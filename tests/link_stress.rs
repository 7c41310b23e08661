//! Stress of the links and the NoC (issue 22, "Must show"): links saturated in both
//! directions at once (the package links, the GPU fabric) complete at their configured
//! bandwidth within their buffers, and the slowest NoC the
//! configuration allows keeps memory bounded by the simulated state. The expectations are
//! the configured bandwidth and the run at the preset's own NoC clock, not goldens.

mod common;

use common::*;

fn stats_file(path: &std::path::Path) -> serde_json::Value {
    json(&std::fs::read_to_string(path).unwrap())
}

/// Runs `args` on `cfg` and returns the stats.
fn run(cfg: &str, args: &[&str]) -> serde_json::Value {
    json(&run_stats_full(cfg, args).0)
}

#[test]
fn a_remote_stream_saturates_every_link_both_ways() {
    // STREAM copy on 4 chiplets with pages interleaved: 3/4 of each chiplet's reads and
    // writes go to other chiplets, requests and writes one way, replies the other. The
    // links are narrowed to 64 B per cycle so that they, not DRAM, limit the copy; the
    // steady state is the difference of two sizes (ramp-up and tail cancel).
    let bw = 64.0 * 1.41e9; // bytes/s: 64 B per 1.41 GHz link cycle (a100-4chiplet.yaml)
    let set = ["--set", "package.link.bandwidth_bytes_per_cycle=64"];
    let go = |n: &str| {
        let mut a = vec!["--workload", "stream", "-p", n, "-p", "kernels=copy"];
        a.extend(set);
        run("a100-4chiplet.yaml", &a)
    };
    let (small, big) = (go("n=262144"), go("n=524288"));
    let span = |d: &serde_json::Value| {
        let k = &d["kernels"][0];
        (k["end_ps"].as_u64().unwrap() - k["start_ps"].as_u64().unwrap()) as f64 * 1e-12
    };
    let dt = span(&big) - span(&small);
    let links = big["links"].as_array().unwrap();
    assert_eq!(links.len(), 8, "4 chiplets, up to and down from the switch");
    for (a, b) in small["links"].as_array().unwrap().iter().zip(links) {
        let bytes = b["wire_bytes"].as_f64().unwrap() - a["wire_bytes"].as_f64().unwrap();
        let share = bytes / dt / bw;
        assert!(
            (0.9..=1.0 + 1e-9).contains(&share),
            "{} -> {}: {:.1}% of the link bandwidth in the steady state",
            b["from"],
            b["to"],
            100.0 * share
        );
    }
}

#[test]
fn a_peer_stream_saturates_the_gpu_fabric_both_ways_within_its_buffers() {
    // peer_stream on 8 GPUs behind the NVSwitch: each GPU reads half its inputs from the
    // next GPU, so each GPU's port to the switch carries its requests and its replies to
    // the previous GPU, and the port down carries the replies it asked for and the next
    // GPU's requests: data both ways on every direction. The GPU links are narrowed to
    // 16 B per cycle so that they, not DRAM, limit the kernels; the steady state is the
    // difference of two sizes over the GPUs' mean kernel span (their launches are
    // staggered). Every direction stays within its bandwidth and at least 90% of it, and
    // no link's receive buffer ever holds more than its configured depth.
    let bw = 16.0 * 1.41e9; // bytes/s: 16 B per 1.41 GHz cycle (dgx-8gpu.yaml's gpu_link clock)
    let go = |n: &str| {
        run(
            "dgx-8gpu.yaml",
            &[
                "--workload",
                "peer_stream",
                "-p",
                n,
                "--set",
                "system.gpu_link.bandwidth_bytes_per_cycle=16",
            ],
        )
    };
    let (small, big) = (go("n=65536"), go("n=131072"));
    let mean_span = |d: &serde_json::Value| {
        let ks = d["kernels"].as_array().unwrap();
        let sum: f64 = ks
            .iter()
            .map(|k| (k["end_ps"].as_u64().unwrap() - k["start_ps"].as_u64().unwrap()) as f64)
            .sum();
        sum * 1e-12 / ks.len() as f64
    };
    let dt = mean_span(&big) - mean_span(&small);
    let links = big["links"].as_array().unwrap();
    assert_eq!(links.len(), 16, "8 GPUs, up to and down from the switch");
    for (a, b) in small["links"].as_array().unwrap().iter().zip(links) {
        let bytes = b["wire_bytes"].as_f64().unwrap() - a["wire_bytes"].as_f64().unwrap();
        let share = bytes / dt / bw;
        assert!(
            (0.9..=1.0).contains(&share),
            "{} -> {}: {:.1}% of the link bandwidth in the steady state",
            b["from"],
            b["to"],
            100.0 * share
        );
        let (peak, depth) = (b["peak_buffer_bytes"].as_u64(), b["buffer_bytes"].as_u64());
        assert!(
            peak <= depth,
            "{} -> {}: {peak:?} > {depth:?}",
            b["from"],
            b["to"]
        );
    }
}

#[test]
fn the_slowest_noc_keeps_memory_bounded_by_the_simulated_state() {
    // vectorAdd of 8 M elements on rtx3070.yaml at the lowest `noc.clock_hz` validation
    // allows (1 MHz, 1,500 times slower than the preset): every request waits at the NoC,
    // but loads are bounded by the L1 MSHRs and stores, which wait for their
    // acknowledgements, by the resident CTAs, so the peak memory is that of the run at the
    // preset's clock (the trace and the simulated state), not of the packets waiting.
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "vectoradd", &["n=8388608"]);
    let t = tst.to_str().unwrap();
    let slow_out = tmp.path().join("slow.json");
    let fast_out = tmp.path().join("fast.json");
    let cfg = config("rtx3070.yaml");
    let c = cfg.to_str().unwrap();
    tessera_ok(&[
        "run",
        "--config",
        c,
        "--trace",
        t,
        "--set",
        "noc.clock_hz=1000000",
        "--stats-out",
        slow_out.to_str().unwrap(),
    ]);
    tessera_ok(&[
        "run",
        "--config",
        c,
        "--trace",
        t,
        "--stats-out",
        fast_out.to_str().unwrap(),
    ]);
    let (slow, fast) = (stats_file(&slow_out), stats_file(&fast_out));
    let rss = |d: &serde_json::Value| d["run"]["peak_rss_mib"].as_f64().unwrap();
    let cycles = |d: &serde_json::Value| d["totals"]["gpu_tot_sim_cycle"].as_f64().unwrap();
    assert!(
        cycles(&slow) > 100.0 * cycles(&fast),
        "the NoC limits the slow run"
    );
    assert!(
        rss(&slow) <= rss(&fast) * 1.25 + 16.0,
        "peak RSS {} MiB at a 1 MHz NoC, {} MiB at the preset's",
        rss(&slow),
        rss(&fast)
    );
}
