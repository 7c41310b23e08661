//! End-to-end tests of `tessera trace import/info/verify/export` on small hand-written
//! Accel-Sim traces under `tests/data/` (written in the NVBit tracer's exact printf
//! formats, so an export must reproduce them byte for byte).
//!
//! Hand-derived counts (thread instructions = sum of the popcounts of the mask fields; see
//! also tests/data/README.md):
//!
//! | fixture  | kernels | CTAs | warps | warp insts | thread insts |
//! |----------|---------|------|-------|------------|--------------|
//! | v3       | 1       | 2    | 4     | 36         | 924          |
//! | v4-imm   | 1       | 2    | 4     | 27         | 712          |
//! | v4-noimm | 1       | 3    | 3     | 18         | 497          |
//! | lineinfo | 1       | 1    | 2     | 14         | 400          |
//! | multi    | 3       | 4    | 4     | 17         | 482          |
//! | unknown-opcode | 1 | 1    | 1     | 5          | 144          |
//!
//! v3 (sm_70, tracer 3, no immediates), per warp (lines / popcount sum):
//!   CTA 0,0,0 warp 0: 11 / 216 = 5*32 + 24 (EXIT ffff0f0f) + 8 + 8 (LDG, mode 0, 8
//!     addresses) + 0 (FFMA mask 0) + 8 (STG) + 8 (EXIT);
//!   warp 1: 10 / 288 = 5*32 + 0 (EXIT mask 0) + 4*32;
//!   CTA 1,0,0 warp 0: 9 / 228 = 5*32 + 0 + 32 (BAR) + 4 (LDG 0000000f) + 32;
//!   warp 1: 6 / 192.
//! v4-imm (sm_75, tracer 4, immediate on every line), CTA 1,0,0 listed first:
//!   CTA 1,0,0 warp 0: 9 / 243 = 6*32 + 3 (LDG.E.64 0000000b, deltas -128 64) + 24 + 24;
//!   warp 1: 6 / 162 = 5*32 + 2 (LDG.E.64 80000001, delta -1024);
//!   CTA 0,0,0 warp 0: 8 / 195 = 6*32 + 3 (00000007) + 0 (IADD3 mask 0);
//!   warp 1: 4 / 112 = 3*32 + 16 (ATOMG 0000ffff, mode 0, 16 addresses).
//! v4-noimm (sm_86, tracer 4, no immediates): 8 / 240, 7 / 193, 3 / 64.
//! lineinfo (sm_80, tracer 5, `-enable lineinfo = 1`): 7 / 224, 7 / 176.
//! multi: kernel-1 (device 0) 4 / 128; kernel-4 (device 0, stored .xz at test time) two
//!   CTAs, 4 / 128 and 4 / 98; kernel-7 (device 1, kernelslist_ctx_0x5555.g, sm_90) 5 / 128.
//! unknown-opcode: 5 / 144, of which FROBNICATE x2 and FROBNICATE.X x1.

mod common;

use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

struct Kernel {
    name: &'static str,
    id: u64,
    device: u64,
    grid: [u32; 3],
    block: [u32; 3],
    ctas: u64,
    warps: u64,
    warp_insts: u64,
    thread_insts: u64,
    binary_version: u64,
    tracer_version: u64,
    mix: Value,
}

struct Expected {
    kernels: Vec<Kernel>,
    commands: u64,
    devices: u64,
}

fn check_info(v: &Value, exp: &Expected) {
    let ks = v["kernels"].as_array().unwrap();
    assert_eq!(ks.len(), exp.kernels.len(), "kernel count\n{v:#}");
    let mut tot = HandCount::default();
    for (k, e) in ks.iter().zip(&exp.kernels) {
        assert_eq!(k["name"], e.name);
        assert_eq!(k["id"], e.id, "{}", e.name);
        assert_eq!(k["device"], e.device, "{}", e.name);
        assert_eq!(k["grid"], json!(e.grid), "{}", e.name);
        assert_eq!(k["block"], json!(e.block), "{}", e.name);
        assert_eq!(k["ctas"], e.ctas, "{}", e.name);
        assert_eq!(k["warps"], e.warps, "{}", e.name);
        assert_eq!(k["warp_insts"], e.warp_insts, "{}", e.name);
        assert_eq!(k["thread_insts"], e.thread_insts, "{}", e.name);
        assert_eq!(k["binary_version"], e.binary_version, "{}", e.name);
        assert_eq!(k["tracer_version"], e.tracer_version, "{}", e.name);
        assert_eq!(k["mix"], e.mix, "class mix of {}", e.name);
        tot.add(&HandCount {
            ctas: e.ctas,
            warps: e.warps,
            warp_insts: e.warp_insts,
            thread_insts: e.thread_insts,
        });
    }
    let t = &v["totals"];
    assert_eq!(t["kernels"], exp.kernels.len());
    assert_eq!(t["ctas"], tot.ctas);
    assert_eq!(t["warps"], tot.warps);
    assert_eq!(t["warp_insts"], tot.warp_insts);
    assert_eq!(t["thread_insts"], tot.thread_insts);
    assert_eq!(t["commands"], exp.commands);
    assert_eq!(t["devices"], exp.devices);
}

/// Hand count of every kernel file of a fixture, straight from the text.
fn hand_count_files(dir: &Path, files: &[&str]) -> HandCount {
    let mut c = HandCount::default();
    for f in files {
        c.add(&hand_count(&std::fs::read_to_string(dir.join(f)).unwrap()));
    }
    c
}

/// Import `input`, check `info --json` against `exp`, verify, export, and compare every
/// exported file with `originals` (exported name, original path); then re-import the
/// export and compare `info --json` with the first import's.
fn round_trip(input: &Path, exp: &Expected, originals: &[(&str, PathBuf)], tmp: &Path) -> Value {
    let tst = tmp.join("trace.tst");
    import(input, &tst, &[]);
    assert_no_output(&partial(&tst));
    let info = info_json(&tst);
    check_info(&info, exp);

    let v = verify(&tst);
    let tot = &info["totals"];
    for n in [
        format!("{} CTAs", tot["ctas"]),
        format!("{} warps", tot["warps"]),
        format!("{} warp instructions", tot["warp_insts"]),
        format!("{} thread instructions", tot["thread_insts"]),
    ] {
        assert!(v.contains(&n), "verify does not report {n:?}:\n{v}");
    }

    let out = tmp.join("exported");
    export(&tst, &out);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want: Vec<String> = originals.iter().map(|(n, _)| n.to_string()).collect();
    want.sort();
    assert_eq!(names, want, "files of the export");
    for (name, orig) in originals {
        let original = std::fs::read_to_string(orig).unwrap();
        let exported = std::fs::read_to_string(out.join(name)).unwrap();
        assert_same_text(name, &original, &exported);
    }

    let tst2 = tmp.join("again.tst");
    import(&out, &tst2, &[]);
    let info2 = info_json(&tst2);
    assert_eq!(
        without_file_fields(info2),
        without_file_fields(info.clone()),
        "re-import of the export differs"
    );
    info
}

/// Fixture `name` as it is on disk: its own files are its originals.
fn plain_round_trip(name: &str, exp: &Expected) -> Value {
    let dir = data(name);
    let tmp = tempfile::tempdir().unwrap();
    let originals: Vec<(&str, PathBuf)> = ["kernelslist.g", "kernel-1.traceg"]
        .into_iter()
        .map(|f| (f, dir.join(f)))
        .collect();
    let hand = hand_count_files(&dir, &["kernel-1.traceg"]);
    let k = &exp.kernels[0];
    assert_eq!(
        (hand.ctas, hand.warps, hand.warp_insts, hand.thread_insts),
        (k.ctas, k.warps, k.warp_insts, k.thread_insts),
        "{name}: the hand count of the text disagrees with the documented counts"
    );
    round_trip(&dir, exp, &originals, tmp.path())
}

#[test]
fn v3_volta_no_immediates() {
    plain_round_trip(
        "v3",
        &Expected {
            kernels: vec![Kernel {
                name: "_Z7stencilPKfPfi",
                id: 1,
                device: 0,
                grid: [2, 1, 1],
                block: [64, 1, 1],
                ctas: 2,
                warps: 4,
                warp_insts: 36,
                thread_insts: 924,
                binary_version: 70,
                tracer_version: 3,
                mix: json!({"int": 10, "int_mul": 4, "fp32": 1, "special_reg": 8,
                    "load_global": 3, "store_global": 2, "barrier": 1, "exit": 7}),
            }],
            commands: 3,
            devices: 1,
        },
    );
}

#[test]
fn v4_turing_with_immediates() {
    plain_round_trip(
        "v4-imm",
        &Expected {
            kernels: vec![Kernel {
                name: "_Z6gatherPKdPdPii",
                id: 1,
                device: 0,
                grid: [2, 1, 1],
                block: [32, 2, 1],
                ctas: 2,
                warps: 4,
                warp_insts: 27,
                thread_insts: 712,
                binary_version: 75,
                tracer_version: 4,
                mix: json!({"int": 2, "int_mul": 7, "special_reg": 4, "uniform": 3,
                    "load_global": 5, "store_global": 1, "atomic_global": 1, "exit": 4}),
            }],
            commands: 2,
            devices: 1,
        },
    );
}

#[test]
fn v4_without_immediates() {
    plain_round_trip(
        "v4-noimm",
        &Expected {
            kernels: vec![Kernel {
                name: "_Z9transposePfS_",
                id: 1,
                device: 0,
                grid: [3, 1, 1],
                block: [32, 1, 1],
                ctas: 3,
                warps: 3,
                warp_insts: 18,
                thread_insts: 497,
                binary_version: 86,
                tracer_version: 4,
                mix: json!({"int": 5, "warp_shuffle": 1, "special_reg": 3,
                    "load_shared": 2, "store_shared": 2, "barrier": 2, "exit": 3}),
            }],
            commands: 1,
            devices: 1,
        },
    );
}

#[test]
fn v5_with_lineinfo() {
    plain_round_trip(
        "lineinfo",
        &Expected {
            kernels: vec![Kernel {
                name: "_Z5scalePfi",
                id: 1,
                device: 0,
                grid: [1, 1, 1],
                block: [64, 1, 1],
                ctas: 1,
                warps: 2,
                warp_insts: 14,
                thread_insts: 400,
                binary_version: 80,
                tracer_version: 5,
                mix: json!({"int": 2, "int_mul": 2, "fp32": 2, "special_reg": 2,
                    "load_global": 2, "store_global": 2, "exit": 2}),
            }],
            commands: 2,
            devices: 1,
        },
    );
}

#[test]
fn multiple_kernels_contexts_and_xz() {
    let fixture = data("multi");
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    copy_dir(&fixture, &input);
    // kernelslist.g names kernel-4.traceg.xz: compress the plain fixture now.
    xz_in_place(&input.join("kernel-4.traceg"));
    assert!(!input.join("kernel-4.traceg").exists());

    let hand = hand_count_files(
        &fixture,
        &["kernel-1.traceg", "kernel-4.traceg", "kernel-7.traceg"],
    );
    assert_eq!(
        hand,
        HandCount {
            ctas: 4,
            warps: 4,
            warp_insts: 17,
            thread_insts: 482
        }
    );

    let k = |name, id, device, ctas, wi, ti, bv, mix| Kernel {
        name,
        id,
        device,
        grid: [ctas as u32, 1, 1],
        block: [32, 1, 1],
        ctas,
        warps: ctas,
        warp_insts: wi,
        thread_insts: ti,
        binary_version: bv,
        tracer_version: 5,
        mix,
    };
    let exp = Expected {
        kernels: vec![
            k(
                "_Z4initPi",
                1,
                0,
                1,
                4,
                128,
                80,
                json!({"int": 1, "special_reg": 1, "fence": 1, "exit": 1}),
            ),
            k(
                "_Z5countPi",
                4,
                0,
                2,
                8,
                226,
                80,
                json!({"int": 2, "special_reg": 2, "reduction": 2, "exit": 2}),
            ),
            k(
                "_Z4peerPi",
                7,
                1,
                1,
                5,
                128,
                90,
                json!({"int": 1, "special_reg": 1, "branch": 1, "exit": 2}),
            ),
        ],
        // device 0: 3 MemcpyHtoD + 2 launches; device 1: 1 MemcpyHtoD + 1 launch.
        commands: 7,
        devices: 2,
    };

    // The export writes kernel-4 uncompressed, so its kernelslist.g names kernel-4.traceg.
    let list = std::fs::read_to_string(fixture.join("kernelslist.g")).unwrap();
    let exported_list = tmp.path().join("kernelslist-exported.g");
    std::fs::write(
        &exported_list,
        list.replace("kernel-4.traceg.xz", "kernel-4.traceg"),
    )
    .unwrap();
    let originals = vec![
        ("kernelslist.g", exported_list),
        (
            "kernelslist_ctx_0x5555.g",
            fixture.join("kernelslist_ctx_0x5555.g"),
        ),
        ("kernel-1.traceg", fixture.join("kernel-1.traceg")),
        ("kernel-4.traceg", fixture.join("kernel-4.traceg")),
        ("kernel-7.traceg", fixture.join("kernel-7.traceg")),
    ];
    round_trip(&input, &exp, &originals, tmp.path());
}

#[test]
fn unknown_opcode_fails_the_import_naming_opcode_file_and_line() {
    let dir = data("unknown-opcode");
    let text = std::fs::read_to_string(dir.join("kernel-1.traceg")).unwrap();
    let line = text.lines().position(|l| l.contains("FROBNICATE")).unwrap() + 1;
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("u.tst");
    let o = tessera(&[
        "trace".as_ref(),
        "import".as_ref(),
        "accel-sim".as_ref(),
        dir.as_os_str(),
        "-o".as_ref(),
        tst.as_os_str(),
    ]);
    assert_clean_failure(
        &o,
        &[
            "FROBNICATE",
            &format!("kernel-1.traceg:{line}:"),
            "--allow-unknown-opcodes",
        ],
    );
    assert_no_output(&tst);
}

#[test]
fn unknown_opcode_imports_with_allow_unknown_opcodes() {
    let dir = data("unknown-opcode");
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("u.tst");
    let o = import(&dir, &tst, &["--allow-unknown-opcodes"]);
    let out = stdout(&o);
    assert!(
        out.contains("unknown opcode FROBNICATE: 2 "),
        "import does not report FROBNICATE x2:\n{out}"
    );
    assert!(
        out.contains("unknown opcode FROBNICATE.X: 1 "),
        "import does not report FROBNICATE.X x1:\n{out}"
    );
    let v = info_json(&tst);
    let k = &v["kernels"][0];
    assert_eq!(k["warp_insts"], 5);
    assert_eq!(k["thread_insts"], 144);
    assert_eq!(k["unknown_opcode_insts"], 3);
    assert_eq!(k["mix"], json!({"int": 1, "exit": 1, "other": 3}));
    verify(&tst);
    // The unknown mnemonics survive an export.
    let out_dir = tmp.path().join("exported");
    export(&tst, &out_dir);
    for f in ["kernelslist.g", "kernel-1.traceg"] {
        assert_same_text(
            f,
            &std::fs::read_to_string(dir.join(f)).unwrap(),
            &std::fs::read_to_string(out_dir.join(f)).unwrap(),
        );
    }
}

#[test]

fn crlf_line_endings_import_like_lf() {
    let dir = data("v4-imm");
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    copy_dir(&dir, &input);
    for f in ["kernelslist.g", "kernel-1.traceg"] {
        let t = std::fs::read_to_string(input.join(f)).unwrap();
        std::fs::write(input.join(f), t.replace('\n', "\r\n")).unwrap();
    }
    let lf = tmp.path().join("lf.tst");
    let crlf = tmp.path().join("crlf.tst");
    import(&dir, &lf, &[]);
    import(&input, &crlf, &[]);
    let (a, b) = (info_json(&lf), info_json(&crlf));
    assert_eq!(b["kernels"][0]["name"], "_Z6gatherPKdPdPii");
    for key in [
        "grid",
        "block",
        "ctas",
        "warps",
        "warp_insts",
        "thread_insts",
        "mix",
    ] {
        assert_eq!(a["kernels"][0][key], b["kernels"][0][key], "{key}");
    }
}
