//! End-to-end tests of `tessera trace` on the real Accel-Sim trace in
//! `../shared/traces/accelsim-vectoradd` (vectorAdd, 50,000 floats, captured on sm_80 with
//! Accel-Sim tracer version 5). The folder is not part of the repository: where it is
//! absent every test prints `skipped: ../shared/traces not present` and passes.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// The bundled trace directory, or None (after printing the skip note) if it is absent.
fn bundled() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/accelsim-vectoradd");
    if dir.join("kernelslist.g").is_file() && dir.join("kernel-1.traceg").is_file() {
        Some(dir)
    } else {
        println!("skipped: ../shared/traces not present");
        None
    }
}

/// Imports the bundled trace into a fresh temp dir; returns (tempdir, trace dir, .tst).
fn imported() -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    let dir = bundled()?;
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("vectoradd.tst");
    import(&dir, &tst, &[]);
    Some((tmp, dir, tst))
}

// The figures documented in ../shared/traces/README.md for this trace.
const CTAS: u64 = 196;
const WARPS: u64 = 1_568;
const WARP_INSTS: u64 = 26_601;
const THREAD_INSTS: u64 = 801_056;

#[test]
fn info_counts_match_the_readme_and_a_hand_count() {
    let Some((_tmp, dir, tst)) = imported() else {
        return;
    };
    // Independent count straight from the text: instruction lines per warp and the
    // popcount of each line's mask field.
    let text = std::fs::read_to_string(dir.join("kernel-1.traceg")).unwrap();
    let hand = hand_count(&text);
    assert_eq!(
        hand,
        HandCount {
            ctas: CTAS,
            warps: WARPS,
            warp_insts: WARP_INSTS,
            thread_insts: THREAD_INSTS
        },
        "the hand count of the text disagrees with the README figures"
    );

    let v = info_json(&tst);
    let kernels = v["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 1);
    let k = &kernels[0];
    assert_eq!(k["name"], "_Z9vectorAddPKfS0_Pfi");
    assert_eq!(k["grid"], serde_json::json!([196, 1, 1]));
    assert_eq!(k["block"], serde_json::json!([256, 1, 1]));
    assert_eq!(k["ctas"], hand.ctas);
    assert_eq!(k["warps"], hand.warps);
    assert_eq!(k["warp_insts"], hand.warp_insts);
    assert_eq!(k["thread_insts"], hand.thread_insts);
    assert_eq!(k["binary_version"], 80);
    assert_eq!(k["tracer_version"], 5);
    let mix_total: u64 = k["mix"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(mix_total, WARP_INSTS, "the class mix does not add up");

    let t = &v["totals"];
    assert_eq!(t["kernels"], 1);
    assert_eq!(t["ctas"], CTAS);
    assert_eq!(t["warps"], WARPS);
    assert_eq!(t["warp_insts"], WARP_INSTS);
    assert_eq!(t["thread_insts"], THREAD_INSTS);
    assert_eq!(
        t["file_bytes"],
        std::fs::metadata(&tst).unwrap().len(),
        "totals.file_bytes is not the size of the file"
    );
    // Two MemcpyHtoD and one launch.
    assert_eq!(t["commands"], 3);
}

#[test]
fn export_reproduces_the_trace_byte_for_byte() {
    let Some((tmp, dir, tst)) = imported() else {
        return;
    };
    let out = tmp.path().join("exported");
    export(&tst, &out);
    for name in ["kernelslist.g", "kernel-1.traceg"] {
        let original = std::fs::read_to_string(dir.join(name)).unwrap();
        let exported = std::fs::read_to_string(out.join(name))
            .unwrap_or_else(|e| panic!("export wrote no {name}: {e}"));
        assert_same_text(name, &original, &exported);
    }
    let mut names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["kernel-1.traceg", "kernelslist.g"]);
}

#[test]
fn verify_succeeds_and_reports_the_counts() {
    let Some((_tmp, _dir, tst)) = imported() else {
        return;
    };
    let out = verify(&tst);
    assert!(out.contains("OK"), "{out}");
    for n in [
        "1 kernel(s)",
        "196 CTAs",
        "1568 warps",
        "26601 warp instructions",
        "801056 thread instructions",
    ] {
        assert!(out.contains(n), "verify output does not say {n:?}:\n{out}");
    }
}

#[test]
fn small_chunks_still_round_trip() {
    let Some(dir) = bundled() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("small-chunks.tst");
    // 64 KiB chunks: the ~95 KiB of encoded CTAs span at least two chunks.
    import(&dir, &tst, &["--chunk-kib", "64", "--zstd-level", "1"]);
    let v = info_json(&tst);
    assert!(
        v["kernels"][0]["chunks"].as_u64().unwrap() >= 2,
        "expected several chunks:\n{v:#}"
    );
    assert_eq!(v["totals"]["warp_insts"], WARP_INSTS);
    assert_eq!(v["totals"]["thread_insts"], THREAD_INSTS);
    let out = verify(&tst);
    assert!(out.contains("26601 warp instructions"), "{out}");
    let exported = tmp.path().join("exported");
    export(&tst, &exported);
    assert_same_text(
        "kernel-1.traceg",
        &std::fs::read_to_string(dir.join("kernel-1.traceg")).unwrap(),
        &std::fs::read_to_string(exported.join("kernel-1.traceg")).unwrap(),
    );
}

/// The lines of warp `warp` of thread block `tb` ("x,y,z") in a `.traceg` text.
fn warp_lines<'a>(text: &'a str, tb: &str, warp: u32) -> Vec<&'a str> {
    let mut lines = text.lines();
    lines
        .by_ref()
        .find(|l| l.trim() == format!("thread block = {tb}"))
        .expect("no such thread block");
    lines
        .by_ref()
        .find(|l| l.trim() == format!("warp = {warp}"))
        .expect("no such warp");
    let n: usize = lines
        .next()
        .and_then(|l| l.trim().strip_prefix("insts ="))
        .expect("no insts line")
        .trim()
        .parse()
        .unwrap();
    lines.take(n).collect()
}

#[test]
fn a_warp_stream_ends_where_its_listing_ends_not_at_its_first_exit() {
    let Some((tmp, dir, tst)) = imported() else {
        return;
    };
    let original = std::fs::read_to_string(dir.join("kernel-1.traceg")).unwrap();
    let orig = warp_lines(&original, "0,0,0", 0);
    // The premise: 17 lines, a mask-0 EXIT at PC 0x50 (the 6th line), 11 more after it.
    assert_eq!(orig.len(), 17);
    assert_eq!(orig[5].trim_end(), "0050 00000000 0 EXIT 0 0 0");
    assert_eq!(orig[6..].len(), 11);

    let out = tmp.path().join("exported");
    export(&tst, &out);
    let exported = std::fs::read_to_string(out.join("kernel-1.traceg")).unwrap();
    let exp = warp_lines(&exported, "0,0,0", 0);
    assert_eq!(
        exp, orig,
        "warp 0 of CTA 0,0,0 did not survive the round trip"
    );
}
