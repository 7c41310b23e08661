//! `tessera report`: the HTML page of real runs, its SVGs rendered by a real renderer
//! (resvg), the page opened in headless Chromium (its screenshot must not be blank), a
//! sweep's metrics against its parameters, and bad input refused with the file named.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every `<svg>...</svg>` of the page.
fn svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(s) = rest.find("<svg") {
        let Some(e) = rest[s..].find("</svg>") else {
            break;
        };
        out.push(&rest[s..s + e + 6]);
        rest = &rest[s + e + 6..];
    }
    out
}

/// The system fonts, loaded once (usvg needs them to draw text; the label checks read the
/// SVG text, so no fonts is no failure).
fn fonts() -> std::sync::Arc<resvg::usvg::fontdb::Database> {
    static DB: std::sync::OnceLock<std::sync::Arc<resvg::usvg::fontdb::Database>> =
        std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let mut db = resvg::usvg::fontdb::Database::new();
        db.load_system_fonts();
        std::sync::Arc::new(db)
    })
    .clone()
}

/// Renders `svg` with resvg and returns the number of pixels that are not the white
/// background.
fn rendered_ink(svg: &str) -> usize {
    let opt = resvg::usvg::Options {
        fontdb: fonts(),
        ..Default::default()
    };
    let tree = resvg::usvg::Tree::from_str(svg, &opt).expect("usvg parses the chart");
    let size = tree.size().to_int_size();
    assert!(size.width() > 100 && size.height() > 100, "{size:?}");
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .pixels()
        .iter()
        .filter(|p| p.alpha() > 0 && !(p.red() > 245 && p.green() > 245 && p.blue() > 245))
        .count()
}

/// Checks every chart of `html` renders to something (a chart draws axes and bars or
/// lines: many pixels) and returns the charts.
fn check_rendered(html: &str) -> Vec<&str> {
    let charts = svgs(html);
    assert!(!charts.is_empty(), "no SVG in the report");
    for svg in &charts {
        let ink = rendered_ink(svg);
        assert!(
            ink > 2000,
            "a chart renders nearly blank ({ink} pixels): {}",
            &svg[..svg.len().min(300)]
        );
    }
    charts
}

/// The chart whose SVG holds `title`.
fn chart<'a>(charts: &[&'a str], title: &str) -> &'a str {
    charts
        .iter()
        .find(|s| s.contains(title))
        .copied()
        .unwrap_or_else(|| panic!("no chart {title:?}"))
}

/// A page must be self-contained: nothing it would fetch.
fn check_self_contained(html: &str) {
    for bad in [
        "<script",
        "<link",
        "src=\"http",
        "href=\"http",
        "url(",
        "@import",
    ] {
        assert!(!html.contains(bad), "the report holds {bad:?}");
    }
}

fn report(inputs: &[&Path], out: &Path) -> String {
    let mut args: Vec<&std::ffi::OsStr> = vec!["report".as_ref()];
    args.extend(inputs.iter().map(|p| p.as_os_str()));
    args.extend(["-o".as_ref(), out.as_os_str()]);
    tessera_ok(&args);
    let html = std::fs::read_to_string(out).unwrap();
    check_self_contained(&html);
    html
}

fn run_4chiplet(dir: &Path, extra: &[&str]) -> PathBuf {
    let stats = dir.join("g4.json");
    let mut args = vec![
        "run",
        "--config",
        "configs/a100-4chiplet.yaml",
        "--workload",
        "gemm",
        "-p",
        "m=64",
        "-p",
        "n=64",
        "-p",
        "k=64",
        "--stats-out",
        stats.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = Command::new(bin())
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stats
}

/// The page of one 4-chiplet run: every section, each chart rendered by resvg with its
/// axis labels.
#[test]
fn a_run_report_renders_every_chart() {
    let d = tempfile::tempdir().unwrap();
    let stats = run_4chiplet(d.path(), &["--threads", "2"]);
    let html = report(&[&stats], &d.path().join("r.html"));
    let charts = check_rendered(&html);
    let timeline = chart(&charts, "Kernels over time");
    assert!(timeline.contains("time (us)") && timeline.contains("GPU 0"));
    assert!(timeline.contains("sgemm"), "the kernel named in the legend");
    // A row per chiplet's slice of the kernel (`kernels[].chiplets`).
    for c in 0..4 {
        let row = format!("GPU 0 stream 0 chiplet {c}");
        assert!(timeline.contains(&row), "{row:?} missing from the timeline");
    }
    let stalls = chart(&charts, "Stall breakdown");
    for t in [
        "share of issue slots (%)",
        "chiplet 3",
        "scoreboard",
        "no_warp",
    ] {
        assert!(stalls.contains(t), "{t:?} missing from the stall chart");
    }
    let mem = chart(&charts, "Where requests were served");
    for t in ["requests (sectors)", "L2 hits", "host copies"] {
        assert!(mem.contains(t), "{t:?} missing from the memory chart");
    }
    let links = chart(&charts, "Link utilization (busy time over the run)");
    assert!(links.contains("chiplet0 → switch") && links.contains("utilization (%"));
    chart(&charts, "Bytes per link");
    assert!(html.contains("<th>L2 hit rate</th>"));
    // No time series in a run without --sample-every.
    assert!(!html.contains("Over time"));
    // The engine's side: each worker's busy and waiting time (2 threads), a row of
    // windows by busy time.
    let engine = chart(&charts, "Host time per worker");
    for t in [
        "worker 0",
        "worker 1",
        "busy",
        "waiting for the others",
        "seconds",
    ] {
        assert!(engine.contains(t), "{t:?} missing from the engine chart");
    }
    assert!(html.contains("Engine: workers and windows"));
    assert!(html.contains("<th>busy time in a window</th>"));
}

/// The page opened in headless Chromium: the screenshot (under target/) is not blank.
#[test]
fn the_report_opens_in_chromium() {
    let Some(chromium) = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        if std::env::var_os("CI").is_some() {
            panic!("chromium is missing (scripts/install-chromium.sh installs it)");
        }
        eprintln!(
            "SKIPPED the_report_opens_in_chromium: no chromium (bash scripts/install-chromium.sh)"
        );
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let stats = run_4chiplet(d.path(), &[]);
    let page = d.path().join("report.html");
    report(&[&stats], &page);
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join("run-report.png");
    let _ = std::fs::remove_file(&png);
    let profile = tempfile::tempdir().unwrap();
    let log_path = profile.path().join("chromium.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,2000")
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    // A headless browser that hangs must not hang the suite.
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            panic!(
                "chromium took over 120 s: {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        png.is_file(),
        "chromium wrote no screenshot ({status}): {}",
        std::fs::read_to_string(&log_path).unwrap_or_default()
    );
    let pix = resvg::tiny_skia::Pixmap::load_png(&png).expect("a PNG");
    assert_eq!((pix.width(), pix.height()), (1200, 2000));
    let mut colors = std::collections::HashSet::new();
    let mut ink = 0;
    for p in pix.pixels() {
        colors.insert((p.red(), p.green(), p.blue()));
        if p.red() < 200 || p.green() < 200 || p.blue() < 200 {
            ink += 1;
        }
    }
    assert!(
        colors.len() > 50 && ink > 20_000,
        "the screenshot {} looks blank: {} colors, {ink} dark pixels",
        png.display(),
        colors.len()
    );
    eprintln!("screenshot: {}", png.display());
}

/// A sweep of l2.size_bytes x core.scheduler on gemm: the report plots the metrics
/// against the first parameter, a line per value of the second.
#[test]
fn a_sweep_report_plots_metrics_against_the_parameters() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("sweep");
    let o = Command::new(bin())
        .args([
            "sweep",
            "--config",
            "configs/maxwell-13sm.yaml",
            "--workload",
            "gemm",
            "-p",
            "m=32",
            "-p",
            "n=32",
            "-p",
            "k=32",
            "--vary",
            "l2.size_bytes=1048576,4194304",
            "--vary",
            "core.scheduler=lrr,gto",
            "--jobs",
            "2",
            "-o",
        ])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4);
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let html = report(&inputs, &d.path().join("sweep.html"));
    let charts = check_rendered(&html);
    let cycles = chart(&charts, "total cycles vs l2.size_bytes");
    for t in [
        "l2.size_bytes",
        "core.scheduler=lrr",
        "core.scheduler=gto",
        "1048576",
        "4194304",
        "total cycles (core cycles)",
    ] {
        assert!(cycles.contains(t), "{t:?} missing from the sweep plot");
    }
    chart(&charts, "IPC vs l2.size_bytes");
    assert!(html.contains("<th>core.scheduler</th>"), "the table");
    // The directory itself works too (its table.csv is passed over).
    let again = report(&[&out], &d.path().join("dir.html"));
    assert_eq!(svgs(&again).len(), charts.len());
    // Two of them side by side.
    let pair = report(&inputs[..2], &d.path().join("pair.html"));
    assert!(pair.contains("Side by side"));
    chart(&check_rendered(&pair), "B relative to A");
}

/// Missing files, files that are not JSON or not stats files, an output over an input:
/// errors naming the file, no panic, nothing written.
#[test]
fn bad_input_is_an_error_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r.html");
    let missing = d.path().join("missing.json");
    let not_json = d.path().join("not.json");
    std::fs::write(&not_json, "this is not json").unwrap();
    let not_stats = d.path().join("other.json");
    std::fs::write(&not_stats, "{\"a\": 1}").unwrap();
    for (input, says) in [
        (&missing, "cannot read"),
        (&not_json, "not JSON"),
        (&not_stats, "not a tessera stats file"),
    ] {
        let o = tessera(&[
            "report".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.contains(&input.display().to_string()) && err.contains(says),
            "{err}"
        );
        assert!(!out.exists());
    }
    let stats = d.path().join("s.json");
    std::fs::write(&stats, "{\"stats_version\": 6}").unwrap();
    let o = tessera(&[
        "report".as_ref(),
        stats.as_os_str(),
        "-o".as_ref(),
        stats.as_os_str(),
    ]);
    assert!(stderr(&o).contains("refusing to write the output over an input"));
    assert_eq!(
        std::fs::read_to_string(&stats).unwrap(),
        "{\"stats_version\": 6}"
    );
    let o = tessera(&[
        "report".as_ref(),
        stats.as_os_str(),
        "-o".as_ref(),
        d.path().join("no/such/dir/r.html").as_os_str(),
    ]);
    assert!(stderr(&o).contains("is not a directory"), "{}", stderr(&o));
    // An empty directory has no stats files.
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = tessera(&[
        "report".as_ref(),
        empty.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(
        stderr(&o).contains("no stats files found"),
        "{}",
        stderr(&o)
    );
}

/// The time series of a real sampled 4-chiplet run (tests/data/report, written by the
/// time-series branch): per-chiplet IPC and link utilization over time.
#[test]
fn a_recorded_time_series_plots_ipc_and_link_utilization_over_time() {
    let d = tempfile::tempdir().unwrap();
    let html = report(
        &[&data("report/timeseries-4chiplet.json")],
        &d.path().join("ts.html"),
    );
    let charts = check_rendered(&html);
    check_time_series(&charts);
}

fn check_time_series(charts: &[&str]) {
    let ipc = chart(charts, "IPC per chiplet over time");
    for c in 0..4 {
        assert!(ipc.contains(&format!("chiplet {c}")), "chiplet {c} missing");
    }
    assert!(ipc.contains("time (us, end of interval)"));
    let links = chart(charts, "Link utilization over time");
    assert!(links.contains("chiplet0 → switch") && links.contains("switch → chiplet3"));
    assert!(links.contains("utilization (% of interval busy)"));
}

/// A 4-chiplet run sampled over time: per-chiplet IPC and link utilization plots.
#[test]
fn a_sampled_4chiplet_run_plots_ipc_and_link_utilization_over_time() {
    let d = tempfile::tempdir().unwrap();
    let stats = run_4chiplet(d.path(), &["--sample-every", "500"]);
    let html = report(&[&stats], &d.path().join("ts.html"));
    let charts = check_rendered(&html);
    check_time_series(&charts);
}
