//! No command writes its output over one of its inputs (issue 21): the same file reached
//! by another name (`..`, a link) included. Each case failed before the check: the
//! import replaced `kernelslist.g` with the `.tst` and exited 0.

mod common;

use common::*;

#[test]
fn import_refuses_to_write_over_its_inputs() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t");
    copy_dir(&data("v4-imm"), &dir);
    let list = std::fs::read(dir.join("kernelslist.g")).unwrap();
    let kernel = std::fs::read(dir.join("kernel-1.traceg")).unwrap();
    for out in [
        dir.join("kernelslist.g"),
        dir.join("../t/kernel-1.traceg"),
        dir.clone(),
    ] {
        let o = tessera(&[
            "trace",
            "import",
            "accel-sim",
            dir.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_clean_failure(&o, &["refusing to write the output over an input"]);
    }
    #[cfg(unix)]
    {
        let link = d.path().join("link.g");
        std::os::unix::fs::symlink(dir.join("kernelslist.g"), &link).unwrap();
        let o = tessera(&[
            "trace",
            "import",
            "accel-sim",
            dir.to_str().unwrap(),
            "-o",
            link.to_str().unwrap(),
        ]);
        assert_clean_failure(&o, &["refusing to write the output over an input"]);
    }
    assert_eq!(std::fs::read(dir.join("kernelslist.g")).unwrap(), list);
    assert_eq!(std::fs::read(dir.join("kernel-1.traceg")).unwrap(), kernel);
    // A new file in the directory is fine.
    import(&dir, &dir.join("new.tst"), &[]);
}

#[test]
fn export_and_run_refuse_to_write_over_the_trace() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    // The trace lies where the export would write its first kernel.
    let tst = dir.join("kernel-1.traceg");
    import(&data("v4-imm"), &tst, &[]);
    let before = std::fs::read(&tst).unwrap();
    let o = tessera(&[
        "trace",
        "export",
        "accel-sim",
        tst.to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_clean_failure(&o, &["refusing to write the output over an input"]);
    let o = tessera(&[
        "trace",
        "export",
        "accel-sim",
        tst.to_str().unwrap(),
        "-o",
        tst.to_str().unwrap(),
    ]);
    assert_clean_failure(&o, &["refusing to write the output over an input"]);
    let cfg = config("a100.yaml");
    let o = tessera(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--trace",
        tst.to_str().unwrap(),
        "--stats-out",
        dir.join("../out/kernel-1.traceg").to_str().unwrap(),
    ]);
    assert_clean_failure(&o, &["refusing to write the output over an input"]);
    assert_eq!(std::fs::read(&tst).unwrap(), before);
}

/// `--stats-out` where no file can be created fails before the simulation, naming it.
#[test]
fn an_unwritable_stats_out_fails_before_the_run() {
    let cfg = config("a100.yaml");
    let o = tessera(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--workload",
        "vectoradd",
        "--stats-out",
        "/proc/tessera-stats.json",
    ]);
    let err = assert_clean_failure(&o, &["/proc/tessera-stats.json", "cannot write the stats"]);
    assert!(
        !stdout(&o).contains("gpu_tot_sim_cycle"),
        "it ran first: {err}"
    );
}
