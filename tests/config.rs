//! `tessera config`: presets load, bad keys and impossible values are errors naming the
//! key, and the occupancy of recorded kernels follows CUDA's calculation.

mod common;

use common::*;
use std::path::Path;

fn preset(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("configs")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn every_preset_loads_and_shows() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let o = tessera_ok(&["config", "show", p.to_str().unwrap()]);
            assert!(stdout(&o).contains("sm_count"), "{}", p.display());
            n += 1;
        }
    }
    assert!(n >= 6, "expected the six presets, found {n}");
}

#[test]
fn bad_keys_and_values_name_the_key() {
    let a100 = preset("a100.yaml");
    for (set, want) in [
        (
            "l1d.sise_bytes=3",
            "l1d.sise_bytes: unknown key; did you mean size_bytes?",
        ),
        ("core.sm_count=0", "core.sm_count"),
        ("l1d.sector_bytes=48", "l1d.sector_bytes"),
        ("core.clock_hz=-5", "core.clock_hz"),
    ] {
        let o = tessera(&["config", "show", &a100, "--set", set]);
        assert!(!o.status.success(), "{set} accepted");
        let e = stderr(&o);
        assert!(
            e.starts_with("error:") && e.contains(want) && !e.contains("panicked"),
            "{set}: {e}"
        );
    }
}

/// The occupancy probe's three kernels on A100 are limited by registers (128 x 128 regs:
/// 65,536 / (128 * 128) = 4 CTAs), shared memory (48 KiB + 1 KiB reserved of 164 KiB:
/// 3 CTAs) and threads (1024-thread CTAs of 2,048 threads per SM: 2 CTAs), the figures
/// the probe documents; on a GTX 480 (63 registers per thread at most) the first kernel
/// can never fit, which is an error naming the kernel.
#[test]
fn occupancy_of_recorded_kernels() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("occ.tst");
    tessera_ok(&["trace", "gen", "occupancy", "-o", t.to_str().unwrap()]);
    let o = tessera_ok(&[
        "config",
        "occupancy",
        &preset("a100.yaml"),
        "--trace",
        t.to_str().unwrap(),
    ]);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].contains("4 CTAs per SM (limited by Registers"),
        "{out}"
    );
    assert!(
        lines[1].contains("3 CTAs per SM (limited by SharedMemory"),
        "{out}"
    );
    assert!(
        lines[2].contains("2 CTAs per SM (limited by Threads"),
        "{out}"
    );
    let o = tessera(&[
        "config",
        "occupancy",
        &preset("gtx480.yaml"),
        "--trace",
        t.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("occ_regs") && e.contains("can never fit"), "{e}");
}

/// Issue 21: absurd values fail when the config loads, before any workload is recorded,
/// naming the `--set` argument, the key and the allowed range. They used to fail at run
/// time as an "internal error" (a launch latency of 2^64 - 1 ps), be blamed on the trace
/// (a million SMs), be misreported as "expected a whole number" (a clock of 1e30 Hz), run
/// practically forever (a DRAM clock of 1 Hz) or queue 3.5 GB and abort (a NoC clock of
/// 1 Hz).
#[test]
fn out_of_range_values_fail_at_load_naming_the_key_and_range() {
    let cfg = preset("default.yaml");
    let clocks = "the allowed range is 1000000 to 100000000000 Hz (1 MHz to 100 GHz)";
    for (set, want) in [
        (
            "launch.host_to_gcp_ps=18446744073709551615",
            "launch.host_to_gcp_ps: 18446744073709551615 is out of range: the allowed range is \
             1 to 1000000000000 ps (at most 1 s)",
        ),
        (
            "core.clock_hz=1e30",
            "core.clock_hz: 1e30 is too large: the allowed range is 1000000 to 100000000000 Hz",
        ),
        (
            "core.sm_count=1000000",
            "core.sm_count: 1000000 is out of range: the allowed range is 1 to 4096 SMs",
        ),
        ("dram.clock_hz=1", "dram.clock_hz: 1 is out of range"),
        ("noc.clock_hz=1", "noc.clock_hz: 1 is out of range"),
        ("l2.clock_hz=1", "l2.clock_hz: 1 is out of range"),
        (
            "core.clock_hz=100000000001",
            "core.clock_hz: 100000000001 is out",
        ),
    ] {
        let o = tessera(&["config", "show", &cfg, "--set", set]);
        assert_clean_failure(&o, &[&format!("--set {set}: "), want]);
        let started = std::time::Instant::now();
        let o = tessera(&[
            "run",
            "--config",
            &cfg,
            "--workload",
            "vectoradd",
            "--set",
            set,
        ]);
        let e = assert_clean_failure(&o, &[&format!("--set {set}: "), want]);
        assert!(
            !e.contains("internal error") && !stdout(&o).contains("recorded"),
            "{set}: {e}"
        );
        assert!(started.elapsed().as_secs() < 60, "{set}: took too long");
        if set.contains("clock_hz") {
            assert!(e.contains(clocks), "{set}: {e}");
        }
    }
}

/// The slowest clocks allowed (1 MHz) still simulate a small workload at once, its data
/// coming from DRAM (the 1 Hz clocks ran practically forever or queued gigabytes).
#[test]
fn the_slowest_allowed_clocks_simulate_promptly() {
    let cfg = preset("default.yaml");
    for set in [
        "dram.clock_hz=1000000",
        "noc.clock_hz=1000000",
        "l2.clock_hz=1e6",
    ] {
        let started = std::time::Instant::now();
        let o = tessera_ok(&[
            "run",
            "--config",
            &cfg,
            "--workload",
            "vectoradd",
            "--set",
            "memcpy.fills_l2=false",
            "--set",
            set,
        ]);
        assert!(stdout(&o).contains("DRAM: "), "{set}: {}", stdout(&o));
        assert!(started.elapsed().as_secs() < 60, "{set}: took too long");
    }
}

/// Issue 21: `base: /dev/zero` read until memory ran out. A config file must be a regular
/// file of at most 1 MiB, and the error names the file.
#[test]
fn config_files_must_be_regular_files_of_at_most_1_mib() {
    let d = tempfile::tempdir().unwrap();
    let zero = d.path().join("zero.yaml");
    std::fs::write(&zero, "base: /dev/zero\n").unwrap();
    let o = tessera(&["config", "show", zero.to_str().unwrap()]);
    assert_clean_failure(&o, &["/dev/zero (base of", "not a regular file"]);
    let o = tessera(&["run", "--config", "/dev/zero", "--workload", "vectoradd"]);
    assert_clean_failure(&o, &["/dev/zero: cannot read: not a regular file"]);
    let big = d.path().join("big.yaml");
    let text = format!("base: {}\n# {}\n", preset("a100.yaml"), "x".repeat(1 << 20));
    std::fs::write(&big, text).unwrap();
    let o = tessera(&["config", "show", big.to_str().unwrap()]);
    assert_clean_failure(&o, &[big.to_str().unwrap(), "larger than 1 MiB"]);
}
