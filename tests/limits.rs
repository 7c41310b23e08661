//! Run limits (`tessera run --max-cycles`, `--kernels`): the cut is at a simulated time that
//! does not depend on threads, placement or partitioning, and the stats say the run is
//! partial; `--kernels` simulates only the launches selected.

mod common;

use common::{stderr, tessera, tessera_ok};
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

fn cfg(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("configs")
        .join(name)
}

/// The stream workload (5 kernels: copy, mul, add, triad, dot) recorded into `dir`.
fn stream(dir: &Path) -> PathBuf {
    let t = dir.join("stream.tst");
    tessera_ok(&[
        "trace".as_ref(),
        "gen".as_ref(),
        "stream".as_ref(),
        "-o".as_ref(),
        t.as_os_str(),
    ]);
    t
}

/// `tessera run` of `trace` on `config` with `extra` arguments: the stats without their
/// `run` object (what must be the same bytes on any threads and cut) and the overrides
/// (the partitioning keys are kept apart already; the others are removed too, so runs of
/// other cuts compare).
fn run(dir: &Path, trace: &Path, config: &str, extra: &[&str]) -> Value {
    let out = dir.join(format!(
        "stats-{}.json",
        extra.join("_").replace(['/', '='], "-")
    ));
    let mut args: Vec<OsString> = vec![
        "run".into(),
        "--config".into(),
        cfg(config).into(),
        "--trace".into(),
        trace.into(),
        "--stats-out".into(),
        out.clone().into(),
    ];
    args.extend(extra.iter().map(OsString::from));
    tessera_ok(&args);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let m = v.as_object_mut().unwrap();
    m.remove("run");
    v
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
    let full = run(tmp.path(), &t, "a100-4chiplet.yaml", &[]);
    let c = CUT.to_string();
    let one = run(tmp.path(), &t, "a100-4chiplet.yaml", &["--max-cycles", &c]);
    check_cut(&one, &full);
    for extra in [
        &["--threads", "2"][..],
        &["--threads", "4", "--placement", "round_robin"][..],
    ] {
        let mut args = vec!["--max-cycles", &c];
        args.extend(extra);
        let other = run(tmp.path(), &t, "a100-4chiplet.yaml", &args);
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
    let full = run(tmp.path(), &t, "default.yaml", &[]);
    let c = CUT.to_string();
    let whole = run(tmp.path(), &t, "default.yaml", &["--max-cycles", &c]);
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
        let s = run(tmp.path(), &t, "default.yaml", &args);
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
    let full = run(tmp.path(), &t, "default.yaml", &[]);
    let mut s = run(
        tmp.path(),
        &t,
        "default.yaml",
        &["--max-cycles", "100000000"],
    );
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
    let full = run(tmp.path(), &t, "default.yaml", &[]);
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
        let s = run(tmp.path(), &t, "default.yaml", &["--kernels", range]);
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
    let c = cfg("default.yaml");
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
        let o = tessera(&[
            "run".as_ref(),
            "--config".as_ref(),
            c.as_os_str(),
            "--trace".as_ref(),
            t.as_os_str(),
            "--kernels".as_ref(),
            range.as_ref(),
        ] as &[&std::ffi::OsStr]);
        assert!(!o.status.success(), "--kernels {range} ran");
        let e = stderr(&o);
        assert!(e.contains(says), "--kernels {range}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    let o = tessera(&[
        "run".as_ref(),
        "--config".as_ref(),
        c.as_os_str(),
        "--trace".as_ref(),
        t.as_os_str(),
        "--max-cycles".as_ref(),
        "0".as_ref(),
    ] as &[&std::ffi::OsStr]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--max-cycles"), "{}", stderr(&o));
    let o = tessera(&[
        "run".as_ref(),
        "--config".as_ref(),
        c.as_os_str(),
        "--trace".as_ref(),
        t.as_os_str(),
        "--max-warp-insts".as_ref(),
        "0".as_ref(),
    ] as &[&std::ffi::OsStr]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--max-warp-insts"), "{}", stderr(&o));
}

/// `--max-warp-insts`: the stop is the first multiple of 1000 core cycles at which the
/// count is reached, so the same stats on any threads, placement and cut.
#[test]
fn max_warp_insts_stops_the_same_on_threads_and_cuts() {
    const N: u64 = 50_000;
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let full = run(tmp.path(), &t, "a100-4chiplet.yaml", &[]);
    let n = N.to_string();
    let one = run(
        tmp.path(),
        &t,
        "a100-4chiplet.yaml",
        &["--max-warp-insts", &n],
    );
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
        let other = run(tmp.path(), &t, "a100-4chiplet.yaml", &args);
        assert!(
            one == other,
            "--max-warp-insts {n} {extra:?} differs from one thread"
        );
    }
    // A count the run never reaches leaves it whole.
    let mut s = run(
        tmp.path(),
        &t,
        "a100-4chiplet.yaml",
        &["--max-warp-insts", "100000000"],
    );
    let lim = s.as_object_mut().unwrap().remove("run_limit").unwrap();
    assert_eq!(lim["partial"], false, "{lim}");
    assert!(
        s == full,
        "a limit the run never reaches changes nothing else"
    );
}
