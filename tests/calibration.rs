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
