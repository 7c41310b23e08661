//! Issue 21 at the command line: what import and the `.tst` reader used to accept silently
//! (or report wrongly) now fails with one clear `error:` line, and `run` refuses a `.tst`
//! whose index `verify` refuses. The import cases in detail: frontend/tests/bad_import.rs;
//! the reader's: traces/tests/index_checks.rs.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

fn try_import(dir: &Path, out: &Path) -> Output {
    tessera(&[
        "trace".as_ref(),
        "import".as_ref(),
        "accel-sim".as_ref(),
        dir.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ])
}

fn try_run(tst: &Path) -> Output {
    let cfg = config("a100.yaml");
    tessera(&[
        "run".as_ref(),
        "--config".as_ref(),
        cfg.as_os_str(),
        "--trace".as_ref(),
        tst.as_os_str(),
    ])
}

/// The bundled real trace when this checkout has it, else the v4-noimm fixture.
fn real_or_fixture() -> PathBuf {
    let v = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/accelsim-vectoradd");
    if v.join("kernelslist.g").is_file() {
        v
    } else {
        data("v4-noimm")
    }
}

/// CRC-32 (IEEE), as the `.tst` footer stores it.
fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[test]
fn a_trace_cut_after_an_end_tb_does_not_import() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    copy_dir(&real_or_fixture(), &dir);
    let path = dir.join("kernel-1.traceg");
    let text = std::fs::read_to_string(&path).unwrap();
    // Cut right after the first #END_TB line, a clean line boundary.
    let end = text.find("#END_TB\n").unwrap() + "#END_TB\n".len();
    std::fs::write(&path, &text[..end]).unwrap();
    let line = text[..end].matches('\n').count();
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    assert_clean_failure(
        &o,
        &[
            &format!("kernel-1.traceg:{line}:"),
            "lists 1 thread blocks",
            "truncated",
        ],
    );
    assert_no_output(&out);
}

#[test]
fn a_header_value_that_would_wrap_does_not_import() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    copy_dir(&data("v4-noimm"), &dir);
    let path = dir.join("kernel-1.traceg");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("-shmem = 4096", "-shmem = 4294968320")).unwrap();
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    assert_clean_failure(
        &o,
        &[
            "kernel-1.traceg:5:",
            "'-shmem'",
            "4294968320",
            "out of range",
        ],
    );
    assert_no_output(&out);
}

/// The index of an imported v3 trace with one count edited (kernel and chunk disagree) and
/// its CRC recomputed: verify refuses it, and so must run, info and export.
#[test]
fn run_refuses_an_index_that_verify_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("v3.tst");
    import(&data("v3"), &tst, &[]);
    let mut b = std::fs::read(&tst).unwrap();
    let f = b.len() - 32;
    let off = u64::from_le_bytes(b[f..f + 8].try_into().unwrap()) as usize;
    // 924 thread instructions (tests/data/README.md), stored as a u64 in the chunk entry
    // and in the kernel's counts: change the first.
    let at = off
        + b[off..f]
            .windows(8)
            .position(|w| w == 924u64.to_le_bytes())
            .expect("the index holds the thread instruction count");
    b[at..at + 8].copy_from_slice(&925u64.to_le_bytes());
    let crc = crc32(&b[off..f]);
    b[f + 16..f + 20].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&tst, &b).unwrap();
    let name = tst.display().to_string();
    let o = tessera(&["trace".as_ref(), "verify".as_ref(), tst.as_os_str()]);
    assert_clean_failure(&o, &[&name, "thread instructions"]);
    let o = try_run(&tst);
    let err = stderr(&o);
    assert!(
        !o.status.success(),
        "run accepted an index that verify refuses:\n{err}"
    );
    assert!(
        err.contains(&name) && err.contains("thread instructions") && !err.contains("panicked"),
        "{err}"
    );
    let o = tessera(&["trace".as_ref(), "info".as_ref(), tst.as_os_str()]);
    assert_clean_failure(&o, &[&name, "thread instructions"]);
}

#[test]
fn appended_bytes_are_reported_as_trailing_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("v3.tst");
    import(&data("v3"), &tst, &[]);
    let mut b = std::fs::read(&tst).unwrap();
    b.extend_from_slice(&[0x55; 100]);
    std::fs::write(&tst, &b).unwrap();
    for cmd in ["info", "verify"] {
        let o = tessera(&["trace".as_ref(), cmd.as_ref(), tst.as_os_str()]);
        let e = assert_clean_failure(&o, &["100 trailing bytes after the footer"]);
        assert!(!e.contains("truncated"), "{e}");
    }
    let o = try_run(&tst);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("100 trailing bytes after the footer"),
        "{}",
        stderr(&o)
    );
}
