//! Time series (`tessera run --sample-every CYCLES`): each series sums to the run's
//! totals, the intervals are aligned, and the object is the same bytes on any threads and
//! cut (and with `--max-cycles`); runs without the flag carry no `timeseries`.

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

/// The stream workload (5 kernels) recorded into `dir`.
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
/// `run` object.
fn run(dir: &Path, trace: &Path, config: &str, extra: &[&str]) -> Value {
    let out = dir.join(format!(
        "stats-{config}-{}.json",
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
        "-q".into(),
    ];
    args.extend(extra.iter().map(OsString::from));
    tessera_ok(&args);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("run");
    v
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing"))
}

fn series(v: &Value, key: &str) -> Vec<u64> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} missing"))
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn floats(v: &Value, key: &str) -> Vec<Option<f64>> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} missing"))
        .iter()
        .map(Value::as_f64)
        .collect()
}

/// The checks every sampled run passes: interval boundaries, one value per interval in
/// every series, sums equal to the run's counters.
fn check(s: &Value, every: u64) {
    let ts = &s["timeseries"];
    assert_eq!(u(ts, "/interval_cycles"), every);
    let ip = u(ts, "/interval_ps");
    let end = u(s, "/totals/sim_time_ps");
    let cycles = u(s, "/totals/gpu_tot_sim_cycle");
    assert_eq!(
        ip,
        every * end.div_ceil(cycles),
        "interval_ps is cycles x period"
    );
    let ends = series(ts, "end_ps");
    let k = ends.len();
    assert_eq!(k as u64, end.div_ceil(ip).max(1));
    for (i, &e) in ends.iter().enumerate() {
        if i + 1 < k {
            assert_eq!(e, (i as u64 + 1) * ip, "interval {i} ends at a boundary");
        }
        if i > 0 {
            assert!(e > ends[i - 1], "end_ps strictly increasing");
        }
    }
    assert_eq!(ends[k - 1], end, "the last interval ends at the run's end");
    let chiplets = s["chiplets"].as_array().unwrap();
    let tc = ts["chiplets"].as_array().unwrap();
    assert_eq!(tc.len(), chiplets.len());
    let sum = |v: &Value, key: &str| -> u64 { series(v, key).iter().sum() };
    for (c, t) in chiplets.iter().zip(tc) {
        assert_eq!(t["id"], c["id"]);
        assert_eq!(t["gpu"], c["gpu"]);
        for key in [
            "warp_insts",
            "l1d_accesses",
            "l1d_hits",
            "l2_accesses",
            "l2_hits",
            "dram_bytes",
            "ctas_launched",
            "ctas_retired",
        ] {
            assert_eq!(series(t, key).len(), k, "{key} has one value per interval");
        }
        for key in [
            "ipc",
            "active_warps",
            "l1d_hit_rate",
            "l2_hit_rate",
            "dram_gbps",
        ] {
            assert_eq!(floats(t, key).len(), k, "{key} has one value per interval");
        }
        assert_eq!(sum(t, "warp_insts"), u(c, "/warp_insts"));
        assert_eq!(sum(t, "ctas_launched"), u(c, "/ctas"));
        if s.get("run_limit").is_none() {
            assert_eq!(sum(t, "ctas_retired"), u(c, "/ctas"));
        }
        for key in [
            "l1d_accesses",
            "l1d_hits",
            "l2_accesses",
            "l2_hits",
            "dram_bytes",
        ] {
            assert_eq!(
                sum(t, key),
                u(c, &format!("/memory/{key}")),
                "chiplet {} {key}",
                c["id"]
            );
        }
        // Thread instructions: IPC times each interval's cycles adds up to the chiplet's.
        let period = end.div_ceil(cycles);
        let ipc = floats(t, "ipc");
        let mut threads = 0.0;
        for (i, x) in ipc.iter().enumerate() {
            let from = i as u64 * every;
            let to = (ends[i].div_ceil(period)).min((i as u64 + 1) * every);
            threads += x.unwrap() * (to - from) as f64;
        }
        let want = u(c, "/thread_insts") as f64;
        assert!(
            (threads - want).abs() <= want * 1e-9 + 1e-6,
            "{threads} vs {want}"
        );
        let sms = t["sms"].as_array().unwrap();
        assert_eq!(sms.len() as u64, u(c, "/sms"));
        let mut per_sm = vec![0u64; k];
        for sm in sms {
            for (a, b) in per_sm.iter_mut().zip(series(sm, "warp_insts")) {
                *a += b;
            }
            assert_eq!(floats(sm, "ipc").len(), k);
        }
        assert_eq!(
            per_sm,
            series(t, "warp_insts"),
            "the SMs add up to the chiplet"
        );
        for (r, (h, a)) in floats(t, "l2_hit_rate")
            .iter()
            .zip(series(t, "l2_hits").iter().zip(series(t, "l2_accesses")))
        {
            assert_eq!(r.is_none(), a == 0, "null hit rate exactly when no access");
            if let Some(r) = r {
                assert!((r - *h as f64 / a as f64).abs() < 1e-12);
            }
        }
        assert!(floats(t, "active_warps")
            .iter()
            .all(|w| w.is_some_and(|w| w >= 0.0)));
    }
    let links = s["links"].as_array().unwrap();
    let tl = ts["links"].as_array().unwrap();
    assert_eq!(tl.len(), links.len());
    for (l, t) in links.iter().zip(tl) {
        assert_eq!(t["from"], l["from"]);
        assert_eq!(t["to"], l["to"]);
        assert_eq!(sum(t, "bytes"), u(l, "/bytes"));
        // Each packet's transmission rounded to whole picoseconds.
        let busy = sum(t, "busy_ps") as i64;
        let want = u(l, "/busy_ps") as i64;
        assert!(
            (busy - want).abs() <= u(l, "/packets") as i64,
            "{busy} vs {want}"
        );
        assert_eq!(floats(t, "utilization").len(), k);
    }
}

#[test]
fn series_sum_to_the_totals_on_chiplets_and_are_the_same_on_any_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let every = ["--sample-every", "2000"];
    let one = run(tmp.path(), &t, "a100-4chiplet.yaml", &every);
    check(&one, 2000);
    assert!(one["timeseries"]["links"].as_array().unwrap().len() > 1);
    for extra in [
        &["--threads", "2"][..],
        &["--threads", "4", "--placement", "round_robin"][..],
        // Another cut: 8 partitions, dealt to 3 threads.
        &[
            "--threads",
            "3",
            "--set",
            "partitioning.mode=sm_cluster",
            "--set",
            "partitioning.sm_clusters=2",
        ][..],
    ] {
        let mut args = every.to_vec();
        args.extend(extra);
        let other = run(tmp.path(), &t, "a100-4chiplet.yaml", &args);
        assert!(
            one == other,
            "--sample-every {extra:?} differs from one thread"
        );
    }
    // Without the flag: the same stats, no timeseries.
    let plain = run(tmp.path(), &t, "a100-4chiplet.yaml", &[]);
    assert!(plain.get("timeseries").is_none());
    let mut stripped = one.clone();
    stripped.as_object_mut().unwrap().remove("timeseries");
    assert!(stripped == plain, "sampling changed the stats");
}

#[test]
fn series_are_the_same_on_sm_clusters_and_count_dram() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    // The copies left out of L2: the kernels read DRAM.
    let base = ["--sample-every", "1500", "--set", "memcpy.fills_l2=false"];
    let whole = run(tmp.path(), &t, "default.yaml", &base);
    check(&whole, 1500);
    let dram: u64 = series(&whole["timeseries"]["chiplets"][0], "dram_bytes")
        .iter()
        .sum();
    assert!(dram > 0, "the run reads DRAM");
    let cut = [
        "--set",
        "partitioning.mode=sm_cluster",
        "--set",
        "partitioning.sm_clusters=3",
    ];
    for threads in ["1", "2"] {
        let mut args = base.to_vec();
        args.extend(["--threads", threads]);
        args.extend(cut);
        let s = run(tmp.path(), &t, "default.yaml", &args);
        assert!(
            whole["timeseries"] == s["timeseries"],
            "3 SM clusters on {threads} thread(s) differ from one partition"
        );
    }
    // Units running one event per visit, not ahead of the others: the same intervals.
    let mut args = base.to_vec();
    args.extend(["--set", "partitioning.run_ahead=false"]);
    let s = run(tmp.path(), &t, "default.yaml", &args);
    assert!(
        whole["timeseries"] == s["timeseries"],
        "run_ahead off differs"
    );
}

#[test]
fn series_with_a_private_l2_sum_to_the_totals() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let s = run(
        tmp.path(),
        &t,
        "radeon7-2chiplet.yaml",
        &["--sample-every", "777"],
    );
    check(&s, 777);
    let other = run(
        tmp.path(),
        &t,
        "radeon7-2chiplet.yaml",
        &["--sample-every", "777", "--threads", "2"],
    );
    assert!(s == other);
}

#[test]
fn series_of_a_cut_run_end_at_the_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let args = ["--sample-every", "1000", "--max-cycles", "9500"];
    let s = run(tmp.path(), &t, "a100-4chiplet.yaml", &args);
    assert_eq!(s["run_limit"]["partial"], true);
    check(&s, 1000);
    let ends = series(&s["timeseries"], "end_ps");
    assert_eq!(ends.len(), 10, "9 whole intervals and a half");
    let mut more = args.to_vec();
    more.extend(["--threads", "3"]);
    assert!(s == run(tmp.path(), &t, "a100-4chiplet.yaml", &more));
}

#[test]
fn sample_every_zero_or_too_many_intervals_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = stream(tmp.path());
    let refuse = |extra: &[&str], want: &str| {
        let mut args: Vec<OsString> = vec![
            "run".into(),
            "--config".into(),
            cfg("default.yaml").into(),
            "--trace".into(),
            t.clone().into(),
            "-q".into(),
        ];
        args.extend(extra.iter().map(OsString::from));
        let o = tessera(&args);
        assert!(!o.status.success(), "{extra:?} accepted");
        let err = stderr(&o);
        assert!(err.contains("--sample-every"), "{err}");
        assert!(err.contains(want), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    refuse(&["--sample-every", "0"], "at least one cycle");
    refuse(
        &["--sample-every", "1", "--max-cycles", "2000000"],
        "more than 1000000",
    );
}
