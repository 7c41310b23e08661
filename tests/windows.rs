//! The engine's windows and placements from the command line (issue 23): per-pair and
//! global windows, and a weighted placement (from a profile or an earlier run's stats),
//! give the same simulated bytes as one thread; the per-pair windows exchange between
//! workers less often on a system of multi-chiplet GPUs; bad weights are clear errors.

mod common;

use common::*;

fn engine(full: &str) -> serde_json::Value {
    json(full)["run"]["engine"].clone()
}

#[test]
fn windows_and_placements_give_the_same_bytes_and_fewer_exchanges() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "peer_stream", &["gpus=4", "n=8192"]);
    let t = tst.display().to_string();
    // Four GPUs of four chiplets: 16 partitions, chiplet links 19 ns, GPU links 250 ns.
    let base = [
        "--trace",
        &t,
        "--set",
        "system.gpus=4",
        "--set",
        "system.gpu_link.topology=nvswitch",
    ];
    let cfg = "dgx-8gpu-4chiplet.yaml";
    let with = |extra: &[&str]| -> (String, serde_json::Value) {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        let (full, _) = run_stats_full(cfg, &a);
        (simulated(&full), engine(&full))
    };
    let (one, _) = with(&["--threads", "1", "--windows", "global"]);
    let (global2, g) = with(&["--threads", "2", "--windows", "global"]);
    let (pair2, p) = with(&["--threads", "2", "--windows", "pair"]);
    let (pair3, _) = with(&["--threads", "3", "--placement", "round_robin"]);
    assert!(
        one == global2,
        "global windows on 2 threads changed the stats"
    );
    assert!(
        one == pair2,
        "per-pair windows on 2 threads changed the stats"
    );
    assert!(one == pair3, "per-pair windows, round robin on 3 threads");
    // Two GPUs per worker: the workers meet at the GPU links' pace, not the chiplets'.
    let (gw, pw) = (
        g["windows"].as_u64().unwrap(),
        p["windows"].as_u64().unwrap(),
    );
    assert!(pw * 3 < gw, "per-pair {pw} exchanges vs global {gw}");
    assert_eq!(g["messages"], p["messages"]);
    // Both workers' host time, and the imbalance, are in the stats.
    assert_eq!(p["workers"].as_array().unwrap().len(), 2);
    assert!(p["imbalance"].as_f64().unwrap() >= 1.0, "{p}");
    let hist: u64 = p["workers"][0]["busy_hist"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(hist, pw, "one histogram entry per window");
    let parts = p["partition_busy_s"].as_array().unwrap();
    assert_eq!(parts.len(), 16);

    // A weighted placement from a profile, and from this run's stats.
    let (weighted, w) = with(&["--threads", "2", "--placement", "weighted"]);
    assert!(one == weighted, "weighted placement changed the stats");
    assert_eq!(w["workers"].as_array().unwrap().len(), 2);
    let prev = tmp.path().join("prev.json");
    let mut a = run_args(cfg, &base);
    a.extend(["--threads", "2", "--stats-out"].map(String::from));
    a.push(prev.display().to_string());
    tessera_ok(&a);
    let (from_file, _) = with(&[
        "--threads",
        "2",
        "--placement",
        "weighted",
        "--weights",
        prev.to_str().unwrap(),
    ]);
    assert!(one == from_file, "weighted placement from a stats file");
    let full = std::fs::read_to_string(&prev).unwrap();
    assert_eq!(json(&full)["run"]["placement"], "contiguous");
}

#[test]
fn bad_weights_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "vectoradd", &["n=4096"]);
    let t = tst.to_str().unwrap();
    // A stats file of another partitioning (1 partition) for a run of 4.
    let one = tmp.path().join("one.json");
    let mut a = run_args("a100.yaml", &["--trace", t]);
    a.extend(["--stats-out".to_string(), one.display().to_string()]);
    tessera_ok(&a);
    let args = |w: &std::path::Path| {
        run_args(
            "a100-4chiplet.yaml",
            &[
                "--trace",
                t,
                "--threads",
                "2",
                "--placement",
                "weighted",
                "--weights",
                w.to_str().unwrap(),
            ],
        )
    };
    let o = tessera(&args(&one));
    assert_clean_failure(
        &o,
        &[
            "one.json",
            "partition_busy_s has 1 partitions",
            "this run has 4",
        ],
    );
    // Costs without the placement that reads them.
    let mut a = run_args("a100-4chiplet.yaml", &["--trace", t, "--weights"]);
    a.push(one.display().to_string());
    assert_clean_failure(&tessera(&a), &["--weights", "--placement weighted"]);
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"run\": {}}").unwrap();
    assert_clean_failure(
        &tessera(&args(&bad)),
        &["bad.json", "no run.engine.partition_busy_s"],
    );
    std::fs::write(&bad, "not json").unwrap();
    assert_clean_failure(&tessera(&args(&bad)), &["bad.json", "not a stats file"]);
    let o = tessera(&run_args(
        "a100-4chiplet.yaml",
        &["--trace", t, "--windows", "sometimes"],
    ));
    // clap's own usage error (with its hint line).
    let err = stderr(&o);
    assert!(!o.status.success() && !err.contains("panicked"), "{err}");
    assert!(
        err.contains("'sometimes'") && err.contains("expected pair or global"),
        "{err}"
    );
}
