//! End-to-end tests of the regression tools: `corpus check` (the shipped corpus, goldens
//! that fail with a readable delta, `--update`, bad manifests), `diff`, `collect` and
//! `sweep`.

mod common;

use common::*;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes `manifest.yaml` into `dir` with `text` (configs named `CFG/<name>` are the
/// repository's) and returns its path.
fn manifest(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("manifest.yaml");
    let cfgs = repo().join("configs");
    std::fs::write(&p, text.replace("CFG/", &format!("{}/", cfgs.display()))).unwrap();
    p
}

fn check(m: &Path, extra: &[&str]) -> std::process::Output {
    let mut a: Vec<&std::ffi::OsStr> = vec!["corpus".as_ref(), "check".as_ref(), m.as_os_str()];
    a.extend(extra.iter().map(std::ffi::OsStr::new));
    tessera(&a)
}

/// The report's row of `case`: its status word and the rest.
fn row(out: &str, case: &str) -> (String, String) {
    let line = out
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(case))
        .unwrap_or_else(|| panic!("no row for {case}:\n{out}"));
    let mut words = line.split_whitespace();
    let status = words.next().unwrap().to_string();
    words.next();
    (status, words.collect::<Vec<_>>().join(" "))
}

const SMALL: &str = "cases:
  - name: va
    workload: vectoradd
    params: {n: 4096}
    config: CFG/default.yaml
  - name: gemm4c
    workload: gemm
    params: {m: 32, n: 32, k: 32}
    config: CFG/a100-4chiplet.yaml
  - name: gemm4c-t2
    same_as: gemm4c
    threads: 2
    placement: round_robin
";

/// The repository's corpus passes: at least 20 cases, with the determinism matrix, and no
/// golden missing.
#[test]
fn the_shipped_corpus_passes() {
    let m = repo().join("corpus/manifest.yaml");
    let o = check(&m, &[]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    let pass = out
        .lines()
        .filter(|l| l.trim_start().starts_with("pass "))
        .count();
    let identical = out.matches("identical to").count();
    assert!(pass >= 20, "{pass} cases pass:\n{out}");
    assert!(identical >= 10, "{identical} determinism cases:\n{out}");
    assert!(!out.contains("NEW") && !out.contains("FAIL"), "{out}");
}

/// A golden perturbed by hand fails with the metric, both values and the delta; `--update`
/// records it again, and the next check passes. A tolerance admits a small change.
#[test]
fn a_perturbed_golden_fails_with_a_readable_delta_then_update_passes() {
    let d = tempfile::tempdir().unwrap();
    let m = manifest(d.path(), SMALL);
    // No goldens yet: new cases fail the check until recorded.
    let o = check(&m, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(row(&stdout(&o), "va").0, "NEW");
    assert_eq!(row(&stdout(&o), "gemm4c-t2").0, "pass");
    let o = check(&m, &["--update"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let golden = d.path().join("golden/va.json");
    let text = std::fs::read_to_string(&golden).unwrap();
    assert!(
        !text.contains("\"run\""),
        "a golden keeps no `run`:\n{text}"
    );
    assert!(check(&m, &[]).status.success());

    let mut v = json(&text);
    let cycles = v["totals"]["gpu_tot_sim_cycle"].as_u64().unwrap();
    v["totals"]["gpu_tot_sim_cycle"] = (cycles + 7).into();
    std::fs::write(&golden, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let o = check(&m, &["--junit", d.path().join("j.xml").to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let (status, detail) = row(&out, "va");
    assert_eq!(status, "FAIL", "{out}");
    assert_eq!(
        detail,
        format!(
            "totals.gpu_tot_sim_cycle: {} -> {cycles} (-7, {:+.3}%)",
            cycles + 7,
            -700.0 / (cycles + 7) as f64
        ),
        "{out}"
    );
    assert_eq!(row(&out, "gemm4c").0, "pass");
    let xml = std::fs::read_to_string(d.path().join("j.xml")).unwrap();
    assert!(xml.contains("failures=\"1\"") && xml.contains("totals.gpu_tot_sim_cycle"));

    // A tolerance in the manifest admits it.
    let tolerant = manifest(
        d.path(),
        &SMALL.replace(
            "cases:",
            "tolerance: {totals.gpu_tot_sim_cycle: 50}\ncases:",
        ),
    );
    let o = check(&tolerant, &[]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(row(&stdout(&o), "va").1.contains("within tolerance"));

    let m = manifest(d.path(), SMALL);
    let o = check(&m, &["--update"]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert_eq!(row(&stdout(&o), "va").0, "updated");
    assert!(!partial(&golden).exists());
    let o = check(&m, &[]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert_eq!(row(&stdout(&o), "va").0, "pass");
}

/// A case with an unknown key: an error naming the manifest, the case and the key.
#[test]
fn a_manifest_with_an_unknown_key_names_the_case() {
    let d = tempfile::tempdir().unwrap();
    let m = manifest(d.path(), &SMALL.replace("threads: 2", "thread: 2"));
    let err = assert_clean_failure(&check(&m, &[]), &["manifest.yaml", "case 'gemm4c-t2'"]);
    assert!(err.contains("unknown field `thread`"), "{err}");
    let m = manifest(d.path(), &SMALL.replace("same_as: gemm4c", "same_as: gemm"));
    assert_clean_failure(
        &check(&m, &[]),
        &["case 'gemm4c-t2'", "'gemm' is not a case"],
    );
}

/// A missing trace fails its case, by name; the other cases still run and pass.
#[test]
fn a_missing_trace_fails_its_case_and_the_others_run() {
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "{SMALL}  - name: lost\n    trace: nowhere/lost.tst\n    config: CFG/a100.yaml\n  - name: optional\n    trace: nowhere/x.tst\n    config: CFG/a100.yaml\n    skip_if_missing: true\n"
    );
    let m = manifest(d.path(), &text);
    let o = check(&m, &["--update"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let (status, detail) = row(&out, "lost");
    assert_eq!(status, "FAIL");
    assert!(detail.contains("nowhere/lost.tst: not found"), "{detail}");
    assert_eq!(row(&out, "optional").0, "skipped");
    assert_eq!(row(&out, "va").0, "NEW");
    assert_eq!(row(&out, "gemm4c-t2").0, "pass");
    assert!(d.path().join("golden/va.json").exists());
}

/// A case whose run fails (a bad override) is reported failed with the run's error.
#[test]
fn a_case_that_fails_to_run_is_reported_with_its_error() {
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "{SMALL}  - name: broken\n    workload: vectoradd\n    config: CFG/a100.yaml\n    set: {{core.no_such_key: 1}}\n"
    );
    let m = manifest(d.path(), &text);
    let o = check(&m, &["--update"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let (status, detail) = row(&out, "broken");
    assert_eq!(status, "FAIL");
    assert!(
        detail.contains("did not run") && detail.contains("core.no_such_key"),
        "{detail}"
    );
    assert_eq!(row(&out, "va").0, "NEW");
}

/// A golden of an older stats layout: a failure naming the case and both versions.
#[test]
fn a_golden_from_an_older_stats_version_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let m = manifest(d.path(), SMALL);
    assert!(check(&m, &["--update"]).status.success());
    let golden = d.path().join("golden/gemm4c.json");
    let mut v = json(&std::fs::read_to_string(&golden).unwrap());
    v["stats_version"] = 5.into();
    std::fs::write(&golden, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let o = check(&m, &[]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let (status, detail) = row(&out, "gemm4c");
    assert_eq!(status, "FAIL");
    assert!(
        detail.contains("stats_version 5") && detail.contains("--update"),
        "{detail}"
    );
}

/// `diff` of a default run and a `--set core.scheduler=gto` run: non-zero, and the
/// overridden key is the first difference shown.
#[test]
fn diff_shows_the_overridden_key_first() {
    let d = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        let cfg = config("a100.yaml");
        let mut a = vec![
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--workload",
            "stream",
            "-p",
            "n=16384",
            "--stats-out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        tessera_ok(&a);
        out
    };
    let a = run("a.json", &[]);
    let b = run("b.json", &["--set", "core.scheduler=gto"]);
    let a2 = run("a2.json", &["--threads", "2"]);
    let o = tessera(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("configuration and input: 1 difference"),
        "{out}"
    );
    assert_eq!(
        lines[1].trim(),
        "core.scheduler: lrr -> gto (overridden)",
        "{out}"
    );
    assert!(out.contains("totals.gpu_tot_sim_cycle: "), "{out}");
    // How a run was executed is not a difference.
    let o = tessera(&["diff", a.to_str().unwrap(), a2.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(stdout(&o).contains("metrics: all"), "{}", stdout(&o));
    // A tolerance wide enough passes.
    let o = tessera(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--tolerance",
        "*=1000",
    ]);
    assert!(o.status.success(), "{}", stdout(&o));
    // Not a stats file.
    std::fs::write(d.path().join("x.json"), "{}").unwrap();
    assert_clean_failure(
        &tessera(&[
            "diff",
            a.to_str().unwrap(),
            d.path().join("x.json").to_str().unwrap(),
        ]),
        &["x.json", "not a tessera stats file"],
    );
}

/// `sweep`: the cross product in parallel, a stats file per point, the table with the
/// varied keys as columns; `collect` makes the same table; bad values fail before anything
/// runs.
#[test]
fn sweep_runs_the_cross_product_and_collect_tabulates_it() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("sweep");
    let cfg = config("titanv.yaml");
    let o = tessera_ok(&[
        "sweep",
        "--config",
        cfg.to_str().unwrap(),
        "--workload",
        "gemm",
        "-p",
        "m=32",
        "-p",
        "n=32",
        "-p",
        "k=32",
        "--vary",
        "l2.size_bytes=2359296,4718592",
        "--vary",
        "core.scheduler=lrr,gto",
        "-o",
        out.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    let table = std::fs::read_to_string(out.join("table.csv")).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    assert!(
        lines[0]
            .starts_with("file,config,input,l2.size_bytes,core.scheduler,totals.gpu_tot_sim_cycle"),
        "{table}"
    );
    assert!(lines[1].contains(",2359296,lrr,"), "{table}");
    assert!(lines[4].contains(",4718592,gto,"), "{table}");
    assert!(stdout(&o).contains("4 point(s) of 4"), "{}", stdout(&o));
    assert!(
        !out.join("logs").exists(),
        "logs of successful points are removed"
    );
    // collect over the directory gives the same rows.
    let csv = d.path().join("t.csv");
    tessera_ok(&[
        "collect",
        out.to_str().unwrap(),
        "-o",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), table);
    // collect never writes over its input
    let f = out.join("p000_l2.size_bytes=2359296_core.scheduler=lrr.json");
    assert_clean_failure(
        &tessera(&["collect", f.to_str().unwrap(), "-o", f.to_str().unwrap()]),
        &["refusing to write the output over an input"],
    );
    // A bad value is reported before anything runs, naming the point.
    let bad = d.path().join("bad");
    let o = tessera(&[
        "sweep",
        "--config",
        cfg.to_str().unwrap(),
        "--workload",
        "gemm",
        "--vary",
        "core.scheduler=lrr,fastest",
        "-o",
        bad.to_str().unwrap(),
    ]);
    assert_clean_failure(&o, &["core.scheduler=fastest"]);
    assert!(!bad.exists());
    // A sweep does not write into a directory holding other files.
    assert_clean_failure(
        &tessera(&[
            "sweep",
            "--config",
            cfg.to_str().unwrap(),
            "--workload",
            "gemm",
            "--vary",
            "core.scheduler=lrr",
            "-o",
            out.to_str().unwrap(),
        ]),
        &["not empty"],
    );
}

/// The stats file says what was simulated and how it was run.
#[test]
fn stats_carry_provenance_and_run() {
    let (text, _) = run_stats_full(
        "a100.yaml",
        &[
            "--workload",
            "vectoradd",
            "-p",
            "n=4096",
            "--set",
            "core.scheduler=gto",
            "--set",
            "partitioning.run_ahead=false",
        ],
    );
    let s = json(&text);
    let p = &s["provenance"];
    assert!(p["tool"]
        .as_str()
        .unwrap()
        .starts_with(env!("CARGO_PKG_VERSION")));
    assert_eq!(p["overrides"], serde_json::json!({"core.scheduler": "gto"}));
    assert_eq!(p["config_effective"]["core"]["scheduler"], "gto");
    assert!(p["config_effective"].get("partitioning").is_none());
    assert_eq!(p["input"]["workload"], "vectoradd");
    assert_eq!(p["input"]["params"], serde_json::json!({"n": "4096"}));
    assert!(p["input"]["generator"].as_str().unwrap().contains("n=4096"));
    assert_eq!(p["input"]["trace_crc32"].as_str().unwrap().len(), 8);
    let r = &s["run"];
    assert_eq!(r["threads"], 1);
    assert_eq!(r["partitioning"]["run_ahead"], false);
    assert_eq!(
        r["partitioning_overrides"],
        serde_json::json!({"partitioning.run_ahead": "false"})
    );
    assert!(r["wall_s"].as_f64().unwrap() >= 0.0);
    // --stats-out over the config is refused before the run.
    let cfg = config("a100.yaml");
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("a100.yaml");
    std::fs::copy(&cfg, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    assert_clean_failure(
        &tessera(&[
            "run",
            "--config",
            copy.to_str().unwrap(),
            "--workload",
            "vectoradd",
            "--stats-out",
            d.path().join("./a100.yaml").to_str().unwrap(),
        ]),
        &["refusing to write the output over an input"],
    );
    assert_eq!(std::fs::read(&copy).unwrap(), before);
}
