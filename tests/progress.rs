//! Progress on stderr: a bar through a pseudo-terminal, lines in a redirected log every
//! `--progress-every` seconds, none with `--quiet`, and the same stats either way.

mod common;
use common::*;

/// A run of a few hundred CTAs on one SM: over 10 simulated microseconds (the engine
/// pauses to report there) in a fraction of a second.
fn titanv_args(extra: &[&str]) -> Vec<String> {
    run_args("titanv.yaml", &vectoradd("n=65536", extra))
}

/// vectoradd of `n` elements with one SM per chiplet, plus `extra`.
fn vectoradd<'a>(n: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "--workload",
        "vectoradd",
        "-p",
        n,
        "--set",
        "core.sm_count=1",
    ];
    a.extend(extra);
    a
}

/// A GPU of 4 chiplet partitions on 2 threads: 1024 CTAs over 10 simulated
/// microseconds, paused at window ends to be read.
fn chiplets_args(extra: &[&str]) -> Vec<String> {
    let mut e = vec!["--threads", "2"];
    e.extend(extra);
    run_args("a100-4chiplet.yaml", &vectoradd("n=262144", &e))
}

fn progress_lines(e: &str, what: &str) -> Vec<String> {
    e.lines()
        .filter(|l| l.starts_with(&format!("{what}: ")))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_redirected_log_gets_progress_lines() {
    let o = tessera_ok(&titanv_args(&["--progress-every", "0.001"]));
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
fn a_redirected_log_of_several_partitions_gets_the_share_of_ctas() {
    let o = tessera_ok(&chiplets_args(&["--progress-every", "0.000001"]));
    let e = stderr(&o);
    let lines = progress_lines(&e, "run");
    for l in &lines {
        assert!(l.contains("% (") && l.contains(" of 1024 CTAs)"), "{l}");
    }
    // A report made while the run was paused, not only the closing one.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("us simulated") && !l.contains("100.0%")),
        "{e}"
    );
    // Paused at window ends: the windows (exchanges between the workers) and the
    // messages are those of a run without progress (the imbalance is host timing; the
    // local sub-windows may be cut at a pause).
    let engine = |e: &str| -> String {
        let l = e
            .lines()
            .find(|l| l.starts_with("engine: "))
            .unwrap_or_default();
        l.split(", ")
            .filter(|f| f.contains(" windows (") || f.contains(" messages "))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let quiet = stderr(&tessera_ok(&chiplets_args(&["--quiet"])));
    assert!(engine(&e).contains(" windows"), "{e}");
    assert_eq!(engine(&e), engine(&quiet));
}

#[test]
fn the_environment_sets_the_interval_and_a_bad_one_is_an_error() {
    let o = std::process::Command::new(bin())
        .args(titanv_args(&[]))
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
        .args(titanv_args(&[]))
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
    let quiet = vectoradd("n=65536", &["--quiet", "--progress-every", "0.001"]);
    let (a, o) = run_with_stats("titanv.yaml", &quiet);
    let e = stderr(&o);
    assert!(progress_lines(&e, "run").is_empty(), "{e}");
    assert!(stdout(&o).contains("kernel(s)"), "{}", stdout(&o));
    let shown = vectoradd("n=65536", &["--progress-every", "0.001"]);
    let (b, o) = run_with_stats("titanv.yaml", &shown);
    assert!(!progress_lines(&stderr(&o), "run").is_empty());
    assert_eq!(simulated(&a), simulated(&b));
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
        // Large enough that the recording outlasts a few 1 ms ticks on a fast machine (at
        // 16,384 elements it sometimes finished before the first).
        "n=1048576",
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
    // A small trace to export (64 CTAs).
    let tst = dir.path().join("small.tst");
    tessera_ok(&[
        "trace",
        "gen",
        "vectoradd",
        "-p",
        "n=16384",
        "-o",
        &tst.display().to_string(),
        "--quiet",
    ]);
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

/// The output of `tessera args` on a pseudo-terminal (util-linux's `script`), or `None`
/// when there is no `script`.
fn on_a_terminal(args: &[String]) -> Option<String> {
    let have_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have_script {
        eprintln!("skipped: no `script` (util-linux) to give the run a terminal");
        return None;
    }
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut cmd = quote(bin());
    for a in args {
        cmd.push(' ');
        cmd.push_str(&quote(a));
    }
    let o = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env("COLUMNS", "160")
        .output()
        .expect("cannot run script");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{text}");
    Some(text)
}

/// Several partitions on threads: the bar shows the share of CTAs and an ETA too.
#[test]
fn a_terminal_gets_a_bar_for_several_partitions() {
    let Some(text) = on_a_terminal(&chiplets_args(&[])) else {
        return;
    };
    assert!(text.contains("/1024 CTAs"), "{text}");
    assert!(text.contains("100%") && text.contains("ETA"), "{text}");
    assert!(!text.contains("run: "), "{text}");
}

/// On a terminal (util-linux's `script` gives the run one), a bar: the share of CTAs.
#[test]
fn a_terminal_gets_a_bar() {
    let Some(text) = on_a_terminal(&titanv_args(&[])) else {
        return;
    };
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
