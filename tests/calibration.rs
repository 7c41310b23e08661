//! Calibration of the timing model against measured hardware, not against the config:
//! each expectation names the study and table it comes from
//! (../shared/reference/hardware-figures.md).

mod common;

use common::*;
use std::path::Path;

fn a100() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("configs/a100.yaml")
        .display()
        .to_string()
}

/// Runs `workload` with `params` on a100.yaml; returns the stats JSON.
fn run(workload: &str, params: &[&str]) -> serde_json::Value {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s.json");
    let cfg = a100();
    let mut args = vec!["run", "--config", &cfg, "--workload", workload];
    for p in params {
        args.push("-p");
        args.push(p);
    }
    let out_s = out.to_str().unwrap().to_string();
    args.push("--stats-out");
    args.push(&out_s);
    tessera_ok(&args);
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

fn cycles(v: &serde_json::Value) -> f64 {
    v["totals"]["gpu_tot_sim_cycle"].as_f64().unwrap()
}

/// Per-load latency of the pointer-chase probe, in core cycles: the difference between a
/// run of 2,048 and one of 1,024 dependent loads, divided by 1,024, which cancels the
/// launch path, the warm-up pass and the prologue.
fn chase(footprint: &str, stride: &str, warmup: &str) -> f64 {
    let f = format!("footprint={footprint}");
    let s = format!("stride={stride}");
    let w = format!("warmup={warmup}");
    let short = run("pointer_chase", &[&f, &s, &w, "loads=1024"]);
    let long = run("pointer_chase", &[&f, &s, &w, "loads=2048"]);
    (cycles(&long) - cycles(&short)) / 1024.0
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want
}

/// A100 pointer-chase latencies within 10% of measurements:
/// - L1 hit (16 KiB footprint, warm): LUO24 Table IV, A100 PCIe: 37.9 cycles;
/// - L2 hit (1 MiB, warm, beyond L1): LUO25 Table 4, near L2 hit: 208.0 cycles;
/// - DRAM (64 MiB at a 4 KiB stride, cold): LUO25 Table 3, A100: 566 cycles.
#[test]
fn pointer_chase_latencies_match_a100_measurements() {
    let l1 = chase("16384", "128", "1");
    let l2 = chase("1048576", "128", "1");
    let dram = chase("67108864", "4096", "0");
    assert!(
        within(l1, 37.9, 0.10),
        "L1 hit {l1} cycles vs 37.9 (LUO24 Table IV)"
    );
    assert!(
        within(l2, 208.0, 0.10),
        "L2 hit {l2} cycles vs 208.0 (LUO25 Table 4)"
    );
    assert!(
        within(dram, 566.0, 0.10),
        "DRAM {dram} cycles vs 566 (LUO25 Table 3)"
    );
    assert!(l1 < l2 && l2 < dram);
}

/// Back-to-back launches of empty kernels on A100 follow one another every 2.62 us (GB
/// `gpu-small-kernels/a100_80.txt`, hardware-figures.md section 4), within 10%: nothing in
/// the launch path, dispatch or completion adds to the host's launch period.
#[test]
fn launch_gap_matches_the_measured_back_to_back_period() {
    let v = run("launch_gap", &["kernels=16"]);
    let ks = v["kernels"].as_array().unwrap();
    assert_eq!(ks.len(), 16);
    let starts: Vec<f64> = ks.iter().map(|k| k["start_ps"].as_f64().unwrap()).collect();
    for w in starts.windows(2) {
        let gap_us = (w[1] - w[0]) / 1e6;
        assert!(
            within(gap_us, 2.62, 0.10),
            "launch gap {gap_us} us vs 2.62 us"
        );
    }
}

/// Resident CTAs per SM at run time match the occupancy calculation for A100 (65,536
/// registers, 164 KiB shared memory, 2,048 threads per SM: CUDA's occupancy calculator for
/// compute capability 8.0): 4 register-limited, 3 shared-memory-limited, 2 thread-limited
/// CTAs for the occupancy probe's three kernels.
#[test]
fn resident_ctas_match_the_occupancy_calculation() {
    let v = run("occupancy", &[]);
    let per_sm: Vec<u64> = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["ctas_per_sm"].as_u64().unwrap())
        .collect();
    assert_eq!(per_sm, vec![4, 3, 2]);
}

/// STREAM triad on A100 reaches the measured fraction of the DRAM peak within 5 points, and
/// never more than the peak.
///
/// Measured: GB `gpu-stream/a100_40.txt` (hardware-figures.md section 2a), A100 40GB triad
/// `A[i] = B[i] * 1.2 + C[i]` on three 1 GiB arrays, best over occupancy: 1,375 GB/s of
/// the 1,555 GB/s peak = 88.4% (1,360 GB/s = 87.5% at full occupancy, the workload's 8
/// CTAs of 256 threads per SM).
///
/// Simulated: the stream workload's triad alone on three arrays of 15,728,640 doubles
/// (120 MiB each, 3x the 40 MiB L2, so the L2 holds at most a third of one array).
/// - Peak from the config: `dram.channels x dram.bandwidth_bytes_per_cycle x
///   dram.clock_hz` = 40 x 32 B x 1.215 GHz = 1,555.2 GB/s.
/// - Achieved = DRAM bytes (reads of b and c, write-backs of a; what stays dirty in L2 at
///   the end never crosses the bus and is not counted) / the kernel's time on the GPU: its
///   span in the stats (`end_ps - start_ps`, submission to completion seen by the host)
///   minus the launch path's `launch.host_to_gcp_ps + gcp_to_lcp_ps + completion_ps`, which
///   GB's back-to-back launches (the time of two, halved) overlap with the previous kernel.
/// - What the model loses (dram.rs unit test, 88.2% for the DRAM alone): all-bank refresh,
///   350 ns every 3.9 us (9.0%), and a read/write turnaround pair, 29 bus cycles, per drain
///   of 76 writes (3.1%).
#[test]
fn stream_triad_reaches_the_measured_fraction_of_dram_peak() {
    let n: u64 = 15_728_640;
    let v = run("stream", &["kernels=triad", &format!("n={n}")]);
    let cfg = tessera_partitions::config::GpuConfig::load(a100(), &[]).unwrap();
    let peak = cfg.dram_peak_bytes_per_s() as f64;
    assert_eq!(peak, 1_555_200_000_000.0);
    let t = &v["totals"];
    let k = &v["kernels"][0];
    assert_eq!(k["name"], "_Z12triad_kernelIdEvPT_PKS0_S3_");
    // Every load misses to DRAM: b and c, 8n bytes each, in 32 B sectors.
    assert_eq!(t["dram_reads"].as_u64().unwrap(), 2 * 8 * n / 32);
    let bytes = t["dram_bytes"].as_f64().unwrap();
    let span_ps = k["end_ps"].as_f64().unwrap() - k["start_ps"].as_f64().unwrap();
    let l = &cfg.launch;
    let launch_ps = (l.host_to_gcp_ps + l.gcp_to_lcp_ps + l.completion_ps) as f64;
    let gpu_ps = span_ps - launch_ps;
    let frac = bytes / (gpu_ps * 1e-12) / peak;
    let frac_span = bytes / (span_ps * 1e-12) / peak;
    let measured = 1375.0 / 1555.0;
    assert!(
        (frac - measured).abs() <= 0.05,
        "triad {:.1}% of DRAM peak ({:.0} GB/s) vs the measured {:.1}% (GB a100_40)",
        100.0 * frac,
        frac * peak / 1e9,
        100.0 * measured
    );
    assert!(frac <= 1.0 && frac_span <= 1.0, "{frac} {frac_span}");
}
