//! Run limits (`tessera run --max-cycles`, `--kernels`): the cut is at a simulated time that
//! does not depend on threads, placement or partitioning, and the stats say the run is
//! partial; `--kernels` simulates only the launches selected.

mod common;

use common::{gen, run_args, run_json, stderr, tessera};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The stream workload (5 kernels: copy, mul, add, triad, dot) recorded into `dir`.
fn stream(dir: &Path) -> PathBuf {
    gen(dir, "stream", &[])
}

/// `tessera run` of `trace` on `config` with `extra` arguments: the stats without their
/// `run` object (what must be the same bytes on any threads and cut; the partitioning
/// overrides are kept out of `provenance` already, so runs of other cuts compare).
fn run(trace: &Path, config: &str, extra: &[&str]) -> Value {
    let t = trace.to_str().unwrap();
    run_json(config, &[&["--trace", t][..], extra].concat())
}

/// `tessera run` of `trace` on default.yaml with `extra`, which must fail cleanly: its
/// stderr.
fn refused(trace: &Path, extra: &[&str]) -> String {
    let t = trace.to_str().unwrap();
    let o = tessera(&run_args(
        "default.yaml",
        &[&["--trace", t][..], extra].concat(),
    ));
    assert!(!o.status.success(), "{extra:?} ran");
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "{e}");
    e
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing"))
}

const CUT: u64 = 9000;

/// A cut run's stats: stopped at `CUT` cycles, partial, fewer instructions than `full`.
fn check_cut(s: &Value, full: &Value) {
    assert_eq!(u(s, "/totals/gpu_tot_sim_cycle"), CUT);
    let ps = u(s, "/totals/sim_time_ps");
    assert_eq!(ps % CUT, 0, "the cut is at a whole number of core cycles");
    // The end is the cut, not the last event before it: the core period times N.
    let full_ps = u(full, "/totals/sim_time_ps");
    let full_cycles = u(full, "/totals/gpu_tot_sim_cycle");
    assert!(ps < full_ps);
    assert_eq!(ps / CUT, full_ps.div_ceil(full_cycles), "core period");
    let lim = &s["run_limit"];
    assert_eq!(lim["partial"], true, "{lim}");
    assert_eq!(u(lim, "/max_cycles"), CUT);
    assert_eq!(u(lim, "/kernel_launches"), 5);
    let done = u(lim, "/kernels_completed");
    assert!(done < 5, "{lim}");
    assert_eq!(s["kernels"].as_array().unwrap().len() as u64, done);
    assert!(u(s, "/totals/warp_insts") < u(full, "/totals/warp_insts"));
    assert!(u(s, "/totals/warp_insts") > 0);
    assert!(
        full.get("run_limit").is_none(),
        "no run_limit without limits"
    );
}

#[test]
fn max_cycles_cuts_the_same_on_threads_and_chiplets() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let full = run(&t, "a100-4chiplet.yaml", &[]);
    let c = CUT.to_string();
    let one = run(&t, "a100-4chiplet.yaml", &["--max-cycles", &c]);
    check_cut(&one, &full);
    for extra in [
        &["--threads", "2"][..],
        &["--threads", "4", "--placement", "round_robin"][..],
    ] {
        let mut args = vec!["--max-cycles", &c];
        args.extend(extra);
        let other = run(&t, "a100-4chiplet.yaml", &args);
        assert!(
            one == other,
            "--max-cycles {c} {extra:?} differs from one thread"
        );
    }
}

#[test]
fn max_cycles_cuts_the_same_on_sm_clusters() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let full = run(&t, "default.yaml", &[]);
    let c = CUT.to_string();
    let whole = run(&t, "default.yaml", &["--max-cycles", &c]);
    check_cut(&whole, &full);
    let cut = [
        "--set",
        "partitioning.mode=sm_cluster",
        "--set",
        "partitioning.sm_clusters=2",
    ];
    for threads in ["1", "2"] {
        let mut args = vec!["--max-cycles", &c, "--threads", threads];
        args.extend(cut);
        let s = run(&t, "default.yaml", &args);
        assert!(
            whole == s,
            "2 SM clusters on {threads} thread(s) differ from one partition"
        );
    }
}

#[test]
fn max_cycles_past_the_end_is_the_whole_run() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let full = run(&t, "default.yaml", &[]);
    let mut s = run(&t, "default.yaml", &["--max-cycles", "100000000"]);
    let lim = s.as_object_mut().unwrap().remove("run_limit").unwrap();
    assert_eq!(lim["partial"], false, "{lim}");
    assert_eq!(u(&lim, "/kernels_completed"), 5);
    assert!(
        s == full,
        "a limit the run never reaches changes nothing else"
    );
}

#[test]
fn kernels_selects_launches() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let full = run(&t, "default.yaml", &[]);
    let names = |s: &Value| -> Vec<String> {
        s["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap().to_string())
            .collect()
    };
    let all = names(&full);
    assert_eq!(all.len(), 5);
    for (range, want, shown) in [
        ("2..4", 2..4, "2..4"),
        ("3", 3..4, "3..4"),
        ("3..", 3..5, "3..5"),
        ("..2", 0..2, "0..2"),
        ("1..=3", 1..4, "1..4"),
    ] {
        let s = run(&t, "default.yaml", &["--kernels", range]);
        assert_eq!(names(&s), all[want.clone()], "--kernels {range}");
        // A kernel's instructions are the trace's, whatever ran before it.
        for (k, i) in want.clone().enumerate() {
            assert_eq!(
                s["kernels"][k]["warp_insts"], full["kernels"][i]["warp_insts"],
                "--kernels {range}: kernel {i}"
            );
        }
        let insts: u64 = want
            .clone()
            .map(|i| u(&full, &format!("/kernels/{i}/warp_insts")))
            .sum();
        assert_eq!(u(&s, "/totals/warp_insts"), insts);
        let lim = &s["run_limit"];
        assert_eq!(lim["partial"], false);
        assert_eq!(lim["kernels"], shown);
        assert_eq!(u(lim, "/kernel_launches"), want.len() as u64);
        assert_eq!(u(lim, "/kernels_completed"), want.len() as u64);
    }
}

#[test]
fn bad_limits_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    for (range, says) in [
        ("5..", "the trace launches 5 kernel(s), ranks 0 to 4"),
        ("0..9", "the trace launches 5 kernel(s), ranks 0 to 4"),
        ("7", "the trace launches 5 kernel(s)"),
        ("3..3", "selects no kernel launch"),
        ("4..2", "selects no kernel launch"),
        ("x", "not a launch rank"),
        ("1..b", "not a launch rank"),
        ("1.5", "not a launch rank"),
    ] {
        let e = refused(&t, &["--kernels", range]);
        assert!(e.contains(says), "--kernels {range}: {e}");
    }
    for flag in ["--max-cycles", "--max-warp-insts"] {
        let e = refused(&t, &[flag, "0"]);
        assert!(e.contains(flag), "{e}");
    }
}

/// `--max-warp-insts`: the stop is the first multiple of 1000 core cycles at which the
/// count is reached, so the same stats on any threads, placement and cut.
#[test]
fn max_warp_insts_stops_the_same_on_threads_and_cuts() {
    const N: u64 = 50_000;
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let full = run(&t, "a100-4chiplet.yaml", &[]);
    let n = N.to_string();
    let one = run(&t, "a100-4chiplet.yaml", &["--max-warp-insts", &n]);
    let insts = u(&one, "/totals/warp_insts");
    assert!(insts >= N, "{insts} warp instructions, fewer than {N}");
    assert!(insts < u(&full, "/totals/warp_insts"));
    assert_eq!(u(&one, "/totals/gpu_tot_sim_cycle") % 1000, 0);
    let lim = &one["run_limit"];
    assert_eq!(lim["partial"], true, "{lim}");
    assert_eq!(u(lim, "/max_warp_insts"), N);
    assert!(lim.get("max_cycles").is_none(), "{lim}");
    for extra in [
        &["--threads", "2"][..],
        &["--threads", "4", "--placement", "round_robin"][..],
        &[
            "--threads",
            "2",
            "--set",
            "partitioning.mode=sm_cluster",
            "--set",
            "partitioning.sm_clusters=2",
        ][..],
    ] {
        let mut args = vec!["--max-warp-insts", &n];
        args.extend(extra);
        let other = run(&t, "a100-4chiplet.yaml", &args);
        assert!(
            one == other,
            "--max-warp-insts {n} {extra:?} differs from one thread"
        );
    }
    // A count the run never reaches leaves it whole.
    let mut s = run(&t, "a100-4chiplet.yaml", &["--max-warp-insts", "100000000"]);
    let lim = s.as_object_mut().unwrap().remove("run_limit").unwrap();
    assert_eq!(lim["partial"], false, "{lim}");
    assert!(
        s == full,
        "a limit the run never reaches changes nothing else"
    );
}
