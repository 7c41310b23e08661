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
