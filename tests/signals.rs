//! Interrupted commands leave nothing behind (issue 21): SIGTERM or SIGINT while `trace
//! gen` writes its `.partial` file, or while `run --workload` records its temporary trace,
//! removes those files, says which signal ended the run, and exits with 128 + the signal.
#![cfg(unix)]

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Waits until some file in `dir` has a name containing `part` (at most 20 s).
fn wait_for(dir: &Path, part: &str) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        let found = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().contains(part));
        if found {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no file like {part} appeared in {}", dir.display());
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} failed");
}

fn files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn trace_gen_interrupted_leaves_no_partial_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("g.tst");
    let child = Command::new(bin())
        .args([
            "trace", "gen", "gemm", "-p", "m=512", "-p", "n=512", "-p", "k=256", "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(d.path(), ".partial");
    signal(&child, "-TERM");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 15), "{}", stderr(&o));
    assert!(stderr(&o).contains("ended by SIGTERM"), "{}", stderr(&o));
    assert_eq!(files(d.path()), Vec::<String>::new());
}

#[test]
fn run_workload_interrupted_removes_its_temporary_trace() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config("titanv.yaml");
    let child = Command::new(bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .args([
            "--workload",
            "gemm",
            "-p",
            "m=512",
            "-p",
            "n=512",
            "-p",
            "k=256",
        ])
        .env("TMPDIR", d.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(d.path(), "tessera-run-");
    signal(&child, "-INT");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 2), "{}", stderr(&o));
    assert!(stderr(&o).contains("ended by SIGINT"), "{}", stderr(&o));
    assert_eq!(files(d.path()), Vec::<String>::new());
}
