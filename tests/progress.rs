//! Progress on stderr: a bar through a pseudo-terminal, lines in a redirected log every
//! `--progress-every` seconds, none with `--quiet`, and the same stats either way.

mod common;
use common::*;

/// A run of a few hundred CTAs on one SM: over 10 simulated microseconds (the engine
/// pauses to report there) in a fraction of a second.
fn run_args(extra: &[&str]) -> Vec<String> {
    let cfg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/titanv.yaml");
    let mut a: Vec<String> = [
        "run",
        "--config",
        &cfg.display().to_string(),
        "--workload",
        "vectoradd",
        "-p",
        "n=65536",
        "--set",
        "core.sm_count=1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn progress_lines(e: &str, what: &str) -> Vec<String> {
    e.lines()
        .filter(|l| l.starts_with(&format!("{what}: ")))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_redirected_log_gets_progress_lines() {
    let o = tessera_ok(&run_args(&["--progress-every", "0.001"]));
    let e = stderr(&o);
    let lines = progress_lines(&e, "run");
    assert!(!lines.is_empty(), "{e}");
    for l in &lines {
        assert!(l.contains("% (") && l.contains(" of 256 CTAs)"), "{l}");
    }
    assert!(lines.iter().any(|l| l.contains("us simulated")), "{e}");
    assert!(stdout(&o).contains("kernel(s)"), "{}", stdout(&o));
}

#[test]
fn the_environment_sets_the_interval_and_a_bad_one_is_an_error() {
    let o = std::process::Command::new(bin())
        .args(run_args(&[]))
        .env("TESSERA_PROGRESS_EVERY", "0.001")
        .output()
        .expect("cannot run tessera");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !progress_lines(&stderr(&o), "run").is_empty(),
        "{}",
        stderr(&o)
    );
    let o = std::process::Command::new(bin())
        .args(run_args(&[]))
        .env("TESSERA_PROGRESS_EVERY", "soon")
        .output()
        .expect("cannot run tessera");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("TESSERA_PROGRESS_EVERY"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn quiet_prints_no_progress_and_progress_never_changes_the_stats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let sa = a.display().to_string();
    let sb = b.display().to_string();
    let o = tessera_ok(&run_args(&[
        "--quiet",
        "--progress-every",
        "0.001",
        "--stats-out",
        &sa,
    ]));
    let e = stderr(&o);
    assert!(progress_lines(&e, "run").is_empty(), "{e}");
    assert!(stdout(&o).contains("kernel(s)"), "{}", stdout(&o));
    tessera_ok(&run_args(&[
        "--progress-every",
        "0.001",
        "--stats-out",
        &sb,
    ]));
    let load = |p: &std::path::Path| -> serde_json::Value {
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(p).expect("stats")).expect("json");
        // The provenance says when and how fast; the rest is what was simulated.
        if let Some(m) = v.as_object_mut() {
            m.remove("provenance");
            m.remove("run");
        }
        v
    };
    assert_eq!(load(&a), load(&b));
}

#[test]
fn trace_gen_and_export_report_progress_off_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tst = dir.path().join("v.tst");
    let o = tessera_ok(&[
        "trace",
        "gen",
        "vectoradd",
        "-p",
        "n=16384",
        "-o",
        &tst.display().to_string(),
        "--progress-every",
        "0.001",
    ]);
    assert!(
        !progress_lines(&stderr(&o), "gen").is_empty(),
        "{}",
        stderr(&o)
    );
    let out = dir.path().join("ex");
    let o = tessera_ok(&[
        "trace",
        "export",
        "accel-sim",
        &tst.display().to_string(),
        "-o",
        &out.display().to_string(),
        "--progress-every",
        "0",
    ]);
    assert!(progress_lines(&stderr(&o), "export").is_empty());
    let out2 = dir.path().join("ex2");
    let o = tessera_ok(&[
        "trace",
        "export",
        "accel-sim",
        &tst.display().to_string(),
        "-o",
        &out2.display().to_string(),
        "--progress-every",
        "0.000001",
    ]);
    let lines = progress_lines(&stderr(&o), "export");
    assert!(
        lines.iter().any(|l| l.contains(" of 64 CTAs)")),
        "{}",
        stderr(&o)
    );
}

/// On a terminal (util-linux's `script` gives the run one), a bar: the share of CTAs.
#[test]
fn a_terminal_gets_a_bar() {
    let have_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have_script {
        eprintln!("skipped: no `script` (util-linux) to give the run a terminal");
        return;
    }
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut cmd = quote(bin());
    for a in run_args(&[]) {
        cmd.push(' ');
        cmd.push_str(&quote(&a));
    }
    let o = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env("COLUMNS", "160")
        .output()
        .expect("cannot run script");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{text}");
    assert!(text.contains("/256 CTAs"), "{text}");
    assert!(text.contains("100%") && text.contains("ETA"), "{text}");
    // The bar's line is ended: the summary starts a line of its own.
    assert!(
        text.lines().any(|l| l.starts_with("titanv: 1 kernel(s)")),
        "{text}"
    );
    // No plain progress lines on a terminal.
    assert!(!text.contains("run: "), "{text}");
}
