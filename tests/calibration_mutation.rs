//! Calibration that can fail (issue 22 item 5): every latency, bandwidth and DRAM-timing
//! key that the calibration docs cite is changed by -30% and +30% in turn, and the
//! measured-figure calibrations of `tests/common/calib.rs` ([`FIGURES`]) must notice: at
//! least one measurement must leave its measured figure's tolerance. Keys that no measured
//! figure can detect are listed in [`UNDETECTABLE`] with the reason; the test fails if a
//! key on that list is detected (the list stays honest) or a key off it is not.
//!
//! Only measurements within their tolerance on the unchanged presets count: one that misses
//! its figure today (`known_miss`, an ignored test in `tests/calibration.rs`) cannot leave a
//! tolerance it is already outside of, so it is not run on mutants. Analytical checks and
//! bounds (`tests/calibration.rs`: the DRAM row-miss penalty, the GPU-side launch bound,
//! the barrier, occupancy) do not count either.
//!
//! Runtime: the baseline once (all figures), then for each (key, factor) the figures in
//! [`FIGURES`] order (cheapest first) until one leaves its tolerance, so a detected key
//! costs a few runs and an undetected one all of them (about 6 s of runs). Two mutants run
//! at a time. The table of outcomes is printed (`--nocapture`) and is the one in
//! docs/calibration.md.

mod common;

#[path = "common/calib.rs"]
mod calib;

use calib::{preset, Figure, FIGURES};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tessera_partitions::config::GpuConfig;

/// The keys the calibration docs cite (docs/config.md "Latency composition", the presets'
/// derivations, docs/calibration.md), each changed by these factors.
const KEYS: &[&str] = &[
    "dram.t_rcd_cycles",
    "dram.t_rp_cycles",
    "dram.t_rfc_ps",
    "dram.t_refi_ps",
    "dram.latency_ps",
    "dram.bandwidth_bytes_per_cycle",
    "l2.hit_latency_cycles",
    "l2.bandwidth_bytes_per_cycle",
    "noc.bandwidth_bytes_per_cycle",
    "noc.latency_cycles",
    "l1d.hit_latency_cycles",
    "shared_mem.latency_cycles",
    "launch.host_to_gcp_ps",
    "launch.gcp_to_lcp_ps",
    "launch.cta_dispatch_ps",
    "launch.completion_ps",
    "core.op_latency.fp32.latency_cycles",
    "core.op_latency.fp32.initiation_cycles",
    "core.op_latency.int.latency_cycles",
];

const FACTORS: [f64; 2] = [0.7, 1.3];
const BOTH: [f64; 2] = FACTORS;

/// Keys no measured-figure calibration detects, the factors at which it does not, and why.
const UNDETECTABLE: &[(&str, &[f64], &str)] = &[
    (
        "dram.t_rcd_cycles",
        &BOTH,
        "no measured figure isolates the row-buffer timing, and the DRAM chase (566 \
         cycles) does not move with it: the serial chase phase-locks to the channels' \
         refreshes, whose wait hides the activate (t_rcd 1 to 33 gives 550.2-550.5 cycles; \
         with refresh off, dram_row_miss_costs_the_row_timing sees it, against an analytical \
         expectation, which does not count here)",
    ),
    (
        "dram.t_rp_cycles",
        &BOTH,
        "as dram.t_rcd_cycles: no measured row-miss figure, and the chase does not see it",
    ),
    (
        "dram.t_rfc_ps",
        &BOTH,
        "refresh costs the triad about 9% of the peak; 30% of that is under 3 points, \
         inside the 5-point tolerance of the GB triad figure; no measured refresh figure",
    ),
    (
        "dram.t_refi_ps",
        &BOTH,
        "as dram.t_rfc_ps: the refresh share moves the triad by under 3 points",
    ),
    (
        "l2.bandwidth_bytes_per_cycle",
        &[1.3],
        "x1.3: the TITAN V L2 stream is then bound by the crossbar's 40 B flits (1,455 \
         B/clk, inside the tolerance), and the A100 one misses its figure today (-34%, \
         crossbar-bound) so it is not run; x0.7 is detected",
    ),
    (
        "noc.latency_cycles",
        &BOTH,
        "2 x 20 NoC cycles are 40 of the 208-cycle L2 hit; 30% of them is 12 cycles (5.8%), \
         inside the 10% tolerance; no study isolates the SM-L2 crossbar latency",
    ),
    (
        "shared_mem.latency_cycles",
        &BOTH,
        "no calibration probe with a measured figure loads shared memory (the LUO24 29-cycle \
         figure has no test)",
    ),
    (
        "launch.gcp_to_lcp_ps",
        &BOTH,
        "0.4 us of the TITAN V 6.2 us launch latency: 30% is 2%, inside its 10%; the A100 \
         back-to-back period is host-bound; the graph figure (1.34 us) is only a bound",
    ),
    (
        "launch.cta_dispatch_ps",
        &BOTH,
        "an assumed crossbar leg (10 NoC cycles) per CTA, paid twice in the TITAN V launch \
         latency (dispatch and completion report): 30% is 6 of its 7,443 cycles, inside \
         the 10% tolerance; no measured figure isolates a per-CTA dispatch",
    ),
    (
        "launch.completion_ps",
        &BOTH,
        "as launch.gcp_to_lcp_ps: 2% of the TITAN V launch latency",
    ),
    (
        "core.op_latency.int.latency_cycles",
        &BOTH,
        "only the FMA chain's loop test depends on it, 1 cycle per 32 FFMAs (0.8%), inside \
         the 10% tolerance; no integer-latency probe",
    ),
];

/// The value of `key` in `cfg`.
fn value(cfg: &GpuConfig, key: &str) -> u64 {
    let ol = &cfg.core.op_latency;
    match key {
        "dram.t_rcd_cycles" => cfg.dram.t_rcd_cycles as u64,
        "dram.t_rp_cycles" => cfg.dram.t_rp_cycles as u64,
        "dram.t_rfc_ps" => cfg.dram.t_rfc_ps,
        "dram.t_refi_ps" => cfg.dram.t_refi_ps,
        "dram.latency_ps" => cfg.dram.latency_ps,
        "dram.bandwidth_bytes_per_cycle" => cfg.dram.bandwidth_bytes_per_cycle as u64,
        "l2.hit_latency_cycles" => cfg.l2.hit_latency_cycles as u64,
        "l2.bandwidth_bytes_per_cycle" => cfg.l2.bandwidth_bytes_per_cycle as u64,
        "noc.bandwidth_bytes_per_cycle" => cfg.noc.bandwidth_bytes_per_cycle as u64,
        "noc.latency_cycles" => cfg.noc.latency_cycles as u64,
        "l1d.hit_latency_cycles" => cfg.l1d.hit_latency_cycles as u64,
        "shared_mem.latency_cycles" => cfg.shared_mem.latency_cycles as u64,
        "launch.host_to_gcp_ps" => cfg.launch.host_to_gcp_ps,
        "launch.gcp_to_lcp_ps" => cfg.launch.gcp_to_lcp_ps,
        "launch.cta_dispatch_ps" => cfg.launch.cta_dispatch_ps,
        "launch.completion_ps" => cfg.launch.completion_ps,
        "core.op_latency.fp32.latency_cycles" => ol.fp32.latency_cycles as u64,
        "core.op_latency.fp32.initiation_cycles" => ol.fp32.initiation_cycles as u64,
        "core.op_latency.int.latency_cycles" => ol.int.latency_cycles as u64,
        _ => panic!("unknown key {key}"),
    }
}

/// `key=round(value x factor)` on the preset `config` (at least 1).
fn mutation(config: &str, key: &str, factor: f64) -> String {
    let cfg = GpuConfig::load(preset(config), &[]).unwrap();
    let v = value(&cfg, key);
    let m = ((v as f64 * factor).round() as u64).max(1);
    assert_ne!(m, v, "{key}={v} on {config} does not change by x{factor}");
    format!("{key}={m}")
}

/// The outcome for one (key, factor).
struct Outcome {
    key: &'static str,
    factor: f64,
    /// The figure that left its tolerance and the value measured, if one did.
    detected_by: Option<(&'static str, f64)>,
    /// Figures run, with their values (or a rejected configuration).
    measured: Vec<(&'static str, Result<f64, String>)>,
}

fn counted() -> Vec<&'static Figure> {
    FIGURES.iter().filter(|f| f.known_miss.is_none()).collect()
}

fn mutate(key: &'static str, factor: f64) -> Outcome {
    let mut out = Outcome {
        key,
        factor,
        detected_by: None,
        measured: Vec::new(),
    };
    for f in counted() {
        let sets = vec![mutation(f.config, key, factor)];
        let got = (f.measure)(&sets);
        if let Ok(v) = &got {
            if !f.ok(*v) {
                out.detected_by = Some((f.name, *v));
            }
        }
        out.measured.push((f.name, got));
        if out.detected_by.is_some() {
            break;
        }
    }
    out
}

/// Runs `jobs` on at most two threads, in order of completion.
fn parallel<T: Send, R: Send>(jobs: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let jobs: Vec<Mutex<Option<T>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let job = job.lock().unwrap().take().unwrap();
                let r = f(job);
                results.lock().unwrap().push(r);
            });
        }
    });
    results.into_inner().unwrap()
}

#[test]
fn every_cited_key_is_detected_or_listed_with_its_reason() {
    for (k, _, _) in UNDETECTABLE {
        assert!(
            KEYS.contains(k),
            "{k} is listed as undetectable but not mutated"
        );
    }
    // Baseline: every counted figure is within its tolerance, every known miss outside it.
    let base = parallel(FIGURES.iter().collect(), |f| (f, (f.measure)(&[])));
    for (f, got) in &base {
        let got = got.as_ref().unwrap();
        println!(
            "baseline {}: {got:.3} {} (figure {})",
            f.name, f.unit, f.want
        );
        match f.known_miss {
            None => assert!(f.ok(*got), "{} misses its figure: {got}", f.name),
            Some(why) => assert!(
                !f.ok(*got),
                "{} now matches its figure ({got}): drop its known_miss ({why})",
                f.name
            ),
        }
    }
    let base_of = |name: &str| -> f64 {
        let (_, got) = base.iter().find(|(f, _)| f.name == name).unwrap();
        *got.as_ref().unwrap()
    };
    let jobs: Vec<(&'static str, f64)> = KEYS
        .iter()
        .flat_map(|k| FACTORS.iter().map(move |f| (*k, *f)))
        .collect();
    let mut outcomes = parallel(jobs, |(k, f)| mutate(k, f));
    outcomes.sort_by(|a, b| {
        let ka = KEYS.iter().position(|k| *k == a.key);
        let kb = KEYS.iter().position(|k| *k == b.key);
        (ka, a.factor.to_bits()).cmp(&(kb, b.factor.to_bits()))
    });
    println!("| key | x0.7 | x1.3 |\n|---|---|---|");
    let mut errors = Vec::new();
    for k in KEYS {
        let cell = |f: f64| {
            let o = outcomes
                .iter()
                .find(|o| o.key == *k && o.factor == f)
                .unwrap();
            match o.detected_by {
                Some((name, v)) => format!("{name} ({v:.3})"),
                None => {
                    let rejected = o.measured.iter().find_map(|(_, r)| r.as_ref().err());
                    if let Some(e) = rejected {
                        let why = e.rsplit("error: ").next().unwrap_or(e).trim();
                        return format!("rejected: {why}");
                    }
                    // The measurement that moved most, relative to its figure's tolerance.
                    let (name, v, moved) = o
                        .measured
                        .iter()
                        .map(|(n, r)| {
                            let f = FIGURES.iter().find(|f| f.name == *n).unwrap();
                            let v = *r.as_ref().unwrap();
                            let b = base_of(n);
                            (*n, v, (v - b).abs() / (f.tol * f.want))
                        })
                        .fold(("", 0.0, -1.0), |a, x| if x.2 > a.2 { x } else { a });
                    if moved < 0.005 {
                        return "undetected (no measurement moved)".into();
                    }
                    format!(
                        "undetected (most moved: {name} {v:.3}, {:.0}% of its tolerance)",
                        100.0 * moved
                    )
                }
            }
        };
        let (lo, hi) = (cell(0.7), cell(1.3));
        println!("| `{k}` | {lo} | {hi} |");
        for f in FACTORS {
            let detected = outcomes
                .iter()
                .any(|o| o.key == *k && o.factor == f && o.detected_by.is_some());
            let listed = UNDETECTABLE
                .iter()
                .any(|(u, fs, _)| u == k && fs.contains(&f));
            if listed && detected {
                errors.push(format!(
                    "{k} x{f} is listed as undetectable but is detected ({lo}; {hi}): drop it from the list"
                ));
            }
            if !listed && !detected {
                errors.push(format!(
                    "{k} x{f} is not detected by any measured-figure calibration ({lo}; {hi})"
                ));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
