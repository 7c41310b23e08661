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
    run_set(workload, params, &[])
}

/// As [`run`], with `--set` overrides of a100.yaml.
fn run_set(workload: &str, params: &[&str], sets: &[&str]) -> serde_json::Value {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s.json");
    let cfg = a100();
    let mut args = vec!["run", "--config", &cfg, "--workload", workload];
    for p in params {
        args.push("-p");
        args.push(p);
    }
    for s in sets {
        args.push("--set");
        args.push(s);
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
    let cfg = a100_config();
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

fn a100_config() -> tessera_partitions::config::GpuConfig {
    tessera_partitions::config::GpuConfig::load(a100(), &[]).unwrap()
}

fn total(v: &serde_json::Value, key: &str) -> f64 {
    v["totals"][key].as_f64().unwrap()
}

fn stall(v: &serde_json::Value, key: &str) -> f64 {
    v["totals"]["stalls"][key].as_f64().unwrap()
}

/// Independent FFMA streams reach at least 90% of A100's peak FP32 issue rate, and never
/// more.
///
/// Peak, from a100.yaml: `core.schedulers_per_sm` (4) sub-cores each issue an FP32 warp
/// instruction every `core.op_latency.fp32.initiation_cycles` (2, ABD's measured
/// independent-FFMA rate, hardware-figures.md section 3d) cycles: 4 / 2 = 2 warp FFMAs per
/// core cycle per SM (64 FP32 lanes).
///
/// Measured: the probe (one CTA of 16 warps, 4 per sub-core, each with 8 independent
/// accumulators, unroll 4) run with 1,024 and 2,048 FFMAs per accumulator; the difference
/// cancels the launch path, prologue and stores, leaving 16 x 8 x 1,024 = 131,072 FFMAs
/// (and 16 x 3 x 256 loop IADD3/ISETP/BRA, on other units). The instruction counts are
/// checked against the probe's formula, 8 + 2s + i s + 3i/u per warp (`record_fma_streams`).
#[test]
fn fma_streams_reach_the_peak_fp32_issue_rate() {
    let cfg = a100_config();
    let sched = cfg.core.schedulers_per_sm as f64;
    let ii = cfg.core.op_latency.fp32.initiation_cycles as f64;
    assert_eq!((sched, ii), (4.0, 2.0));
    let peak_per_cycle = sched / ii;
    let (warps, s, u) = (16u64, 8u64, 4u64);
    let runs: Vec<(u64, serde_json::Value)> = [1024u64, 2048]
        .into_iter()
        .map(|i| {
            let v = run(
                "fma_streams",
                &["warps=16", "streams=8", "unroll=4", &format!("iters={i}")],
            );
            assert_eq!(
                total(&v, "warp_insts") as u64,
                warps * (8 + 2 * s + i * s + 3 * i / u),
                "iters={i}: the probe's instruction count"
            );
            (i, v)
        })
        .collect();
    let d_ffma = (warps * s * (runs[1].0 - runs[0].0)) as f64;
    let d_cycles = cycles(&runs[1].1) - cycles(&runs[0].1);
    let rate = d_ffma / d_cycles / peak_per_cycle;
    assert!(
        (0.9..=1.0).contains(&rate),
        "{d_ffma} FFMAs in {d_cycles} cycles: {:.1}% of the peak {peak_per_cycle} per cycle",
        100.0 * rate
    );
}

/// A dependent FFMA chain runs at a100.yaml's FP32 latency per instruction.
///
/// Hand count (`record_fma_chain`): per warp MOV, S2R, I2F, MOV, MOV, then iters / U loop
/// iterations of U dependent `FFMA x, x, a, b`, IADD3, ISETP, BRA, then IMAD.WIDE, STG,
/// EXIT: 8 + iters + 3 iters / U warp instructions. Each FFMA waits for the previous one's
/// result: `core.op_latency.fp32.latency_cycles` (4, ABD's dependent add.f32, section 3d)
/// apart; the loop's IADD3 issues the cycle after the last FFMA, ISETP int latency (4)
/// later, BRA the cycle after (predicates are not scoreboarded), and the next FFMA the
/// cycle after that: U x 4 + 3 cycles per iteration. With U = 32, going from 1,024 to
/// 2,048 FFMAs adds 32 iterations: 32 x (32 x 4 + 3) = 4,192 cycles, 4.094 per FFMA.
#[test]
fn fma_chain_runs_at_the_configured_fp32_latency() {
    let cfg = a100_config();
    let lat = cfg.core.op_latency.fp32.latency_cycles as f64;
    assert_eq!(lat, 4.0);
    let u = 32u64;
    let runs: Vec<(u64, serde_json::Value)> = [1024u64, 2048]
        .into_iter()
        .map(|i| {
            let v = run("fma_chain", &["unroll=32", &format!("iters={i}")]);
            assert_eq!(total(&v, "warp_insts") as u64, 8 + i + 3 * i / u);
            (i, v)
        })
        .collect();
    let d_iters = (runs[1].0 - runs[0].0) as f64;
    let want = d_iters / u as f64 * (u as f64 * lat + 3.0);
    assert_eq!(want, 4192.0);
    let got = cycles(&runs[1].1) - cycles(&runs[0].1);
    assert!(
        within(got, want, 0.01),
        "{got} cycles for {d_iters} more dependent FFMAs, want {want} ({} per FFMA)",
        got / d_iters
    );
}

/// A CTA barrier holds every warp until the last arrives (CUDA's `__syncthreads`).
///
/// The barrier probe with one CTA of 5 warps, so that sub-core 0 holds warps 0 and 4 and
/// sub-cores 1-3 one warp each, and the integer unit slowed to one instruction per 40
/// cycles (`--set core.op_latency.int.initiation_cycles=40`; latency stays 4) so that the
/// imbalance dominates. A round (`record_barrier`) is LEA, LEA, LDS, LDS, IMAD, LEA, STS,
/// BAR.SYNC, IADD3, ISETP, BRA: 5 integer instructions (LEA x 3, IADD3, ISETP).
/// - Sub-core 0 needs 2 x 5 x 40 = 400 cycles of its integer unit per round, and nothing
///   else is on its critical path (the loads' 29 cycles hide under the other warp's
///   integer work), so a round lasts 400 cycles.
/// - A lone warp, from the barrier's release: IADD3 at 0, ISETP at 40, BRA at 41, LEA at
///   80 and 120 (its LDS data back at 124 + 29 = 153, IMAD then), LEA at 160, STS at 164
///   (LEA latency 4), BAR.SYNC at 165; it waits from 166 to the release at 400: 234
///   scheduler-cycles of barrier stall per round, 702 for the three sub-cores.
///
/// Without the barrier the lone warps would run ahead at 166 cycles per round and their
/// sub-cores would finish early (no-warp stalls, not barrier stalls). Differences between
/// 64 and 128 rounds cancel the prologue, launch and epilogue.
#[test]
fn barrier_holds_every_warp_until_the_last_arrives() {
    let slow = ["core.op_latency.int.initiation_cycles=40"];
    let a = run_set("barrier", &["threads=160", "iters=64"], &slow);
    let b = run_set("barrier", &["threads=160", "iters=128"], &slow);
    let rounds = 64.0;
    // 5 warps x 11 instructions per round.
    assert_eq!(
        (total(&b, "warp_insts") - total(&a, "warp_insts")) / rounds,
        55.0
    );
    let per_round = (cycles(&b) - cycles(&a)) / rounds;
    assert!(
        within(per_round, 400.0, 0.01),
        "{per_round} cycles per round, want 400"
    );
    let bar = (stall(&b, "barrier") - stall(&a, "barrier")) / rounds;
    assert!(
        within(bar, 3.0 * 234.0, 0.03),
        "{bar} barrier-stall slots per round, want 3 x 234"
    );
}
