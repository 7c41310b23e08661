//! Calibration of the timing model against measured hardware, not against the config:
//! each expectation names the study and table it comes from
//! (../shared/reference/hardware-figures.md). The measurements live in
//! `tests/common/calib.rs`, shared with the mutation test (`calibration_mutation.rs`);
//! tests the model fails today are ignored with the measured value in the reason, and
//! analytical checks say so (docs/calibration.md has the table).

mod common;

#[path = "common/calib.rs"]
mod calib;

use calib::{cycles, total, within, FIGURES};

/// Runs `workload` with `params` on a100.yaml; returns the stats JSON.
fn run(workload: &str, params: &[&str]) -> serde_json::Value {
    calib::run("a100", workload, params, &[])
}

/// As [`run`], with `--set` overrides of a100.yaml.
fn run_set(workload: &str, params: &[&str], sets: &[&str]) -> serde_json::Value {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    calib::run("a100", workload, params, &sets)
}

fn figure(name: &str) -> &'static calib::Figure {
    FIGURES.iter().find(|f| f.name == name).unwrap()
}

/// Measures the [`FIGURES`] entry `name` on its unchanged preset and checks it against its
/// measured figure; returns the measurement.
fn check_figure(name: &str) -> f64 {
    let f = figure(name);
    let got = (f.measure)(&[]).unwrap();
    assert!(
        f.ok(got),
        "{}: {got:.3} {} vs the measured {} +/- {:.1}% ({})",
        f.name,
        f.unit,
        f.want,
        100.0 * f.tol,
        f.source
    );
    got
}

/// A100 pointer-chase latencies within 10% of measurements:
/// - L1 hit (16 KiB footprint, warm): LUO24 Table IV, A100 PCIe: 37.9 cycles;
/// - L2 hit (1 MiB, warm, beyond L1): LUO25 Table 4, near L2 hit: 208.0 cycles;
/// - DRAM (64 MiB at a 4 KiB stride, cold): LUO25 Table 3, A100: 566 cycles.
#[test]
fn pointer_chase_latencies_match_a100_measurements() {
    let l1 = check_figure("l1_hit");
    let l2 = check_figure("l2_hit");
    let dram = check_figure("dram_latency");
    assert!(l1 < l2 && l2 < dram);
}

/// Back-to-back launches of empty kernels on A100 follow one another every 2.62 us (GB
/// `gpu-small-kernels/a100_80.txt`, hardware-figures.md section 4), within 10%: nothing in
/// the launch path, dispatch or completion adds to the host's launch period.
///
/// Not independent calibration: a100.yaml sets `launch.host_to_gcp_ps` from this same
/// figure, so this checks the preset's own number and that the GPU side (0.8 us per kernel,
/// see the next test) hides under it. The tests below check the launch path against
/// figures the preset was not set from.
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
    check_figure("launch_period");
}

/// With the host out of the way (`launch.host_to_gcp_ps=1`, what a CUDA graph does to the
/// host's share), back-to-back empty kernels complete one every `gcp_to_lcp_ps + dispatch +
/// run + completion_ps`; that must not exceed what A100 takes per kernel of a CUDA graph,
/// 1.34 us (GB `gpu-small-kernels/a100_80_graph.txt`, hardware-figures.md section 4), which
/// also includes the graph's own per-node cost and a tiny kernel's run. A bound, not a
/// figure with a tolerance: the preset's GPU-side segments come from a Kepler model fit
/// (WANG15) and assumptions, independent of this figure, and the model gives 0.82 us.
/// It does not count for the mutation test.
#[test]
fn gpu_side_launch_period_fits_under_the_measured_graph_period() {
    let v = run_set("launch_gap", &["kernels=16"], &["launch.host_to_gcp_ps=1"]);
    let ks = v["kernels"].as_array().unwrap();
    let ends: Vec<f64> = ks.iter().map(|k| k["end_ps"].as_f64().unwrap()).collect();
    for w in ends.windows(2) {
        let us = (w[1] - w[0]) / 1e6;
        assert!(
            us > 0.0 && us <= 1.34,
            "GPU-side period {us} us vs <= 1.34 us"
        );
    }
}

/// One empty kernel on TITAN V takes 7,257.6 core cycles from launch to completion, within
/// 10% (Accel-Sim tuner `kernel_lat`, ASIM-OUT, hardware-figures.md section 4; the tool says
/// it "can be slightly higher than real"). titanv.yaml's `host_to_gcp_ps` is this figure
/// minus its other segments, so the test checks that the segments add up to it with the
/// kernel's own run on top.
#[test]
fn titanv_launch_latency_matches_the_tuner() {
    check_figure("titanv_launch_latency");
}

/// L2 bandwidth on A100: GB `gpu-l2-cache/a100_80.txt` (hardware-figures.md section 2b)
/// reads 5,170-5,482 GB/s for footprints of 2-28 MB on an A100 80GB (same 40 MB L2, 108
/// SMs at 1.41 GHz as a100.yaml); we take 5.33 TB/s +/- 10%. Simulated: the `l2_stream`
/// probe, passes 4 minus passes 2 over 13.5 MiB, at full occupancy (`calib::l2_stream`).
#[test]
#[ignore = "finding: the model streams 3.57 TB/s vs the measured 5.17-5.48 TB/s (-33%): Accel-Sim's 40 B flit at 1.41 GHz carries at most 4.5 TB/s over 80 slice ports, a 136 B reply in 4 flits (3.9 TB/s of data); the ports model without a crossbar streamed 4.25"]
fn a100_l2_bandwidth_matches_the_measured_plateau() {
    check_figure("a100_l2_bandwidth");
}

/// L2 bandwidth on TITAN V: the Accel-Sim tuner's `l2_bw_32f/64f/128` read 1,365.4-1,384.5
/// bytes per clock (ASIM-OUT, hardware-figures.md section 2b); we take 1,375 +/- 10%.
/// Simulated: the `l2_stream` probe over 2.5 MiB (the L2 is 4.5 MB), passes 4 minus 2,
/// in bytes per 1.2 GHz core cycle, through the crossbar (iSLIP over virtual output
/// queues, as Accel-Sim's `-icnt_arbiter_algo 1`).
#[test]
fn titanv_l2_bandwidth_matches_the_tuner() {
    check_figure("titanv_l2_bandwidth");
}

/// The same without the crossbar (`noc.model: ports`): every slice streams at its peak.
#[test]
#[ignore = "finding: the ports model streams 1,534 B/clk vs the measured 1,365-1,385 (+11.5%): it reaches 99.8% of the 48 slices x 32 B L2 peak, the hardware 89-90%"]
fn titanv_l2_bandwidth_without_the_crossbar_matches_the_tuner() {
    let f = figure("titanv_l2_bandwidth");
    let got = (f.measure)(&["noc.model=ports".to_string()]).unwrap();
    assert!(f.ok(got), "{got:.1} {} vs the measured {}", f.unit, f.want);
}

/// With FIFO inputs (`noc.arbiter: fifo`) the crossbar blocks at its inputs' heads.
#[test]
#[ignore = "finding: the FIFO crossbar streams 933 B/clk vs the measured 1,365-1,385 (-32%): 4-flit replies from 48 slices block at their heads, below Karol's 58.6% of 48 x 40 B"]
fn titanv_l2_bandwidth_with_a_fifo_crossbar_matches_the_tuner() {
    let f = figure("titanv_l2_bandwidth");
    let sets = ["noc.arbiter=fifo".to_string()];
    let got = (f.measure)(&sets).unwrap();
    assert!(f.ok(got), "{got:.1} {} vs the measured {}", f.unit, f.want);
}

/// The DRAM row-buffer penalty as a dependent chase sees it, on a100.yaml without refresh
/// (cold chases, 256 and 512 loads differenced, clear of the tail that the upload leaves in
/// L2):
/// - row misses: a 64 KiB stride; the chain visits 5 of the 40 channels in turn and steps
///   8 KiB (8 rows of 1 KiB) in each, so every access opens a new row in a bank that has
///   another open: `t_rp + t_rcd`;
/// - row hits: a 10 KiB stride (40 channels x 256 B), each load in the same channel 256 B
///   after the last, so 3 of 4 loads are on the row the previous one opened (no cost) and
///   one in 4 opens the next, in a bank with another row open: `(t_rp + t_rcd) / 4`.
///
/// Expected difference per load `3/4 (t_rp + t_rcd)`: an analytical expectation from the
/// preset's ASIM-CFG timings (RCD = RP = 22 at 1.215 GHz: 38.3 core cycles; measured 38.25).
/// No study in hardware-figures.md measures a row-miss penalty, so this is not a measured
/// figure and does not count for the mutation test.
#[test]
fn dram_row_miss_costs_the_row_timing() {
    // Without refresh: with it a serial chase phase-locks to the staggered refreshes and
    // each load waits for one to end, which hides the activate (both chases took 550.1
    // and 550.4 cycles per load, and `t_rcd` from 1 to 33 moved a 4 KiB chase by 0.3).
    let no_refresh = ["dram.t_refi_ps=0".to_string()];
    let miss = calib::chase_loads("a100", "134217728", "65536", "0", 256, &no_refresh).unwrap();
    let hit = calib::chase_loads("a100", "83886080", "10240", "0", 256, &no_refresh).unwrap();
    let cfg = a100_config();
    let core_per_dram = cfg.core.clock_hz as f64 / cfg.dram.clock_hz as f64;
    let (rcd, rp) = (
        cfg.dram.t_rcd_cycles as f64 * core_per_dram,
        cfg.dram.t_rp_cycles as f64 * core_per_dram,
    );
    let want = 0.75 * (rp + rcd);
    let (lo, hi) = (want - 2.0, want + 2.0);
    let d = miss - hit;
    assert!(
        (lo..=hi).contains(&d),
        "row-miss chase {miss:.1} - row-hit chase {hit:.1} = {d:.1} cycles, want {lo:.1} to {hi:.1}"
    );
}

/// STREAM triad's sustained DRAM bandwidth on A100, measured the cheap way the mutation
/// test can afford (`calib::triad_bandwidth`: 2^22 minus 2^21 elements, L2 starting empty):
/// GB `gpu-stream/a100_40.txt` triad 1,375 GB/s (hardware-figures.md section 2a), within
/// 5 points of the 1,555 GB/s peak as the full-size test below.
#[test]
fn triad_bandwidth_matches_the_measurement() {
    check_figure("triad_bandwidth");
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
    tessera_partitions::config::GpuConfig::load(calib::preset("a100"), &[]).unwrap()
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
    // Against the measurement itself: ABD Table V, 2 cycles per independent FFMA on a
    // sub-core (`calib::fma_issue` measures the same difference).
    let per_subcore = d_cycles * sched / d_ffma;
    let f = figure("fma_issue");
    assert!(
        f.ok(per_subcore),
        "{per_subcore} cycles per FFMA per sub-core vs {} ({})",
        f.want,
        f.source
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
    // Against the measurement itself: ABD's dependent add.f32, 4 cycles (hardware-figures.md
    // section 3d), within 10%, loop overhead included (`calib::fma_dependent`).
    let f = figure("fma_dependent");
    assert!(
        f.ok(got / d_iters),
        "{} cycles per dependent FFMA vs {} ({})",
        got / d_iters,
        f.want,
        f.source
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
