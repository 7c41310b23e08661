//! End-to-end tests of `tessera trace` on damaged input: each must fail with a non-zero
//! exit status and one `error:` line on stderr that names the file (and the line, or the
//! chunk), never panic, and leave nothing under the requested output name (nor
//! `<name>.partial`). Bad inputs are made at test time from the good fixtures in
//! tests/data/.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A copy of fixture `name` in a fresh temp dir: (tempdir, copy).
fn fixture_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    copy_dir(&data(name), &dir);
    (tmp, dir)
}

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

fn try_cmd(cmd: &str, tst: &Path) -> Output {
    tessera(&["trace".as_ref(), cmd.as_ref(), tst.as_os_str()])
}

fn try_export(tst: &Path, out: &Path) -> Output {
    tessera(&[
        "trace".as_ref(),
        "export".as_ref(),
        "accel-sim".as_ref(),
        tst.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ])
}

/// Edits the first line of `kernel-1.traceg` in `dir` that starts with `prefix`, with
/// `edit`; returns that line's 1-based number.
fn edit_kernel_line(dir: &Path, prefix: &str, edit: impl FnOnce(&str) -> String) -> usize {
    let path = dir.join("kernel-1.traceg");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let i = lines
        .iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?}"));
    let new = edit(&lines[i]);
    assert_ne!(new, lines[i], "the edit changed nothing");
    lines[i] = new;
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    i + 1
}

/// Imports the good v3 fixture: (tempdir, .tst).
fn good_tst() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("good.tst");
    import(&data("v3"), &tst, &[]);
    (tmp, tst)
}

#[test]
fn missing_kernel_file() {
    let (tmp, dir) = fixture_copy("v3");
    let list = dir.join("kernelslist.g");
    let text = std::fs::read_to_string(&list).unwrap();
    let line = text.lines().count() + 1;
    std::fs::write(&list, format!("{text}kernel-2.traceg\n")).unwrap();
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    assert_clean_failure(
        &o,
        &[
            &format!("kernelslist.g:{line}:"),
            "kernel-2.traceg",
            "missing",
        ],
    );
    assert_no_output(&out);
}

#[test]
fn truncated_traceg() {
    let (tmp, dir) = fixture_copy("v3");
    let path = dir.join("kernel-1.traceg");
    let text = std::fs::read_to_string(&path).unwrap();
    // Cut after the 8th of the 11 instruction lines of warp 0 of the first CTA (at a line
    // boundary, so the last line read is itself complete).
    let at = text.find("0070 0000f0f0 1 R4 LDG.E.SYS").unwrap();
    let end = at + text[at..].find('\n').unwrap() + 1;
    std::fs::write(&path, &text[..end]).unwrap();
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    assert_clean_failure(&o, &["kernel-1.traceg", "truncated"]);
    assert_no_output(&out);
}

#[test]
fn traceg_cut_mid_line() {
    let (tmp, dir) = fixture_copy("v3");
    let path = dir.join("kernel-1.traceg");
    let text = std::fs::read_to_string(&path).unwrap();
    // Cut inside the address list of the mode-0 load: the last line has no newline and
    // too few addresses, which the message must blame on truncation.
    let at = text.find("0070 0000f0f0 1 R4 LDG.E.SYS").unwrap();
    let cut = at + text[at..].find(" 0x").unwrap() + 8;
    std::fs::write(&path, &text[..cut]).unwrap();
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    assert_clean_failure(&o, &["kernel-1.traceg:", "truncated"]);
    assert_no_output(&out);
}

#[test]
fn wrong_source_count() {
    let (tmp, dir) = fixture_copy("v3");
    // `2 R0 R255` -> `2 R0`: two sources announced, one register follows.
    let line = edit_kernel_line(&dir, "0040 ffffffff 0 ISETP.GE.AND", |l| {
        l.replace(" 2 R0 R255 ", " 2 R0 ")
    });
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    assert_clean_failure(
        &o,
        &[
            &format!("kernel-1.traceg:{line}:"),
            "source register 2 of 2",
        ],
    );
    assert_no_output(&out);
}

#[test]
fn bad_hex_mask() {
    let (tmp, dir) = fixture_copy("v3");
    let line = edit_kernel_line(&dir, "0010 ffffffff", |l| {
        l.replacen("ffffffff", "ffffgfff", 1)
    });
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    assert_clean_failure(
        &o,
        &[
            &format!("kernel-1.traceg:{line}:"),
            "ffffgfff",
            "hexadecimal",
        ],
    );
    assert_no_output(&out);
}

#[test]
fn insts_count_does_not_match_the_listing() {
    // Fewer declared than listed: caught at the first extra line.
    let (tmp, dir) = fixture_copy("v3");
    let decl = edit_kernel_line(&dir, "insts = 11", |_| "insts = 10".into());
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    let extra = decl + 11;
    assert_clean_failure(&o, &[&format!("kernel-1.traceg:{extra}:"), "insts = 10"]);
    assert_no_output(&out);

    // More declared than listed: caught where the warp's listing ends.
    let (tmp, dir) = fixture_copy("v3");
    edit_kernel_line(&dir, "insts = 11", |_| "insts = 12".into());
    let out = tmp.path().join("out.tst");
    let o = try_import(&dir, &out);
    assert_clean_failure(
        &o,
        &["kernel-1.traceg:", "insts = 12", "11 instruction lines"],
    );
    assert_no_output(&out);
}

#[test]
fn truncated_tst() {
    let (_tmp, tst) = good_tst();
    let len = std::fs::metadata(&tst).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&tst).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let name = tst.display().to_string();
    for cmd in ["info", "verify"] {
        let o = try_cmd(cmd, &tst);
        assert_clean_failure(&o, &[&name, "truncated"]);
    }
}

#[test]
fn flipped_byte_in_a_chunk() {
    let (tmp, tst) = good_tst();
    let mut bytes = std::fs::read(&tst).unwrap();
    // The first chunk starts right after the 16-byte header.
    bytes[16 + 10] ^= 0xff;
    std::fs::write(&tst, &bytes).unwrap();
    let name = tst.display().to_string();

    let o = try_cmd("verify", &tst);
    assert_clean_failure(&o, &[&name, "chunk"]);

    let out = tmp.path().join("exported");
    let o = try_export(&tst, &out);
    assert_clean_failure(&o, &[&name, "chunk"]);
    assert_no_output(&out);
}

#[test]
fn wrong_magic() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("text.tst");
    std::fs::copy(data("v3").join("kernel-1.traceg"), &tst).unwrap();
    let name = tst.display().to_string();
    for cmd in ["info", "verify"] {
        let o = try_cmd(cmd, &tst);
        assert_clean_failure(&o, &[&name, "not a tessera trace"]);
    }
    let out = tmp.path().join("exported");
    let o = try_export(&tst, &out);
    assert_clean_failure(&o, &[&name, "not a tessera trace"]);
    assert_no_output(&out);
}

#[test]
fn newer_format_version() {
    let (tmp, tst) = good_tst();
    let mut bytes = std::fs::read(&tst).unwrap();
    bytes[8..12].copy_from_slice(&(tessera_newest_version() + 1).to_le_bytes());
    std::fs::write(&tst, &bytes).unwrap();
    let name = tst.display().to_string();
    for cmd in ["info", "verify"] {
        let o = try_cmd(cmd, &tst);
        assert_clean_failure(
            &o,
            &[
                &name,
                &format!("version {}", tessera_newest_version() + 1),
                "reads versions 1..=",
                "newer",
            ],
        );
    }
    let out = tmp.path().join("exported");
    let o = try_export(&tst, &out);
    assert_clean_failure(
        &o,
        &[
            &name,
            &format!("version {}", tessera_newest_version() + 1),
            "reads versions 1..=",
            "newer",
        ],
    );
    assert_no_output(&out);
}

#[test]

fn closed_stdout_is_not_a_panic() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    // Enough kernels that `info --json` prints far more than a pipe holds (64 KiB), so the
    // binary is still writing when the reader goes away.
    let (tmp, dir) = fixture_copy("lineinfo");
    std::fs::write(dir.join("kernelslist.g"), "kernel-1.traceg\n".repeat(400)).unwrap();
    let tst = tmp.path().join("many.tst");
    import(&dir, &tst, &[]);
    let mut child = Command::new(bin())
        .args([
            "trace".as_ref(),
            "info".as_ref(),
            tst.as_os_str(),
            "--json".as_ref(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    // The read end is closed here (dropped with the ChildStdout).
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(
        !err.contains("panicked"),
        "closing stdout made tessera panic:\n{err}"
    );
}

/// The newest `.tst` format version this build writes: bytes 8..12 of any file it writes.
fn tessera_newest_version() -> u32 {
    let (tmp, dir) = fixture_copy("v3");
    let tst = tmp.path().join("probe.tst");
    import(&dir, &tst, &[]);
    let b = std::fs::read(&tst).unwrap();
    u32::from_le_bytes([b[8], b[9], b[10], b[11]])
}

/// A file written by format version 1 (before recorded traces) still opens, decodes and
/// exports: `tests/data/v4-imm-format1.tst` was imported from `tests/data/v4-imm` by the
/// version-1 build and is kept as it was written.
#[test]
fn format_version_1_files_still_read() {
    let tst = data("v4-imm-format1.tst");
    let b = std::fs::read(&tst).unwrap();
    assert_eq!(u32::from_le_bytes([b[8], b[9], b[10], b[11]]), 1);
    let o = try_cmd("verify", &tst);
    assert!(o.status.success(), "{}", stderr(&o));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("exported");
    let o = try_export(&tst, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let orig = std::fs::read_to_string(data("v4-imm").join("kernel-1.traceg")).unwrap();
    let back = std::fs::read_to_string(out.join("kernel-1.traceg")).unwrap();
    assert_eq!(
        orig, back,
        "version-1 file does not export to its source text"
    );
}

/// Impossible DRAM refresh and write-drain settings are config errors naming the key and
/// why, from `run` as from `config show`: a refresh as long as its interval would leave the
/// channel nothing, and a write drain of 0 requests would never send a write.
#[test]
fn impossible_dram_refresh_and_drain_name_the_key() {
    let a100 = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/a100.yaml");
    let a100 = a100.to_str().unwrap();
    for (set, want) in [
        (
            "dram.t_rfc_ps=3900000",
            "dram.t_rfc_ps: 3900000 ps is not below dram.t_refi_ps (3900000 ps)",
        ),
        (
            "dram.write_drain_requests=0",
            "dram.write_drain_requests: must be at least 1",
        ),
    ] {
        for args in [
            vec!["config", "show", a100, "--set", set],
            vec![
                "run",
                "--config",
                a100,
                "--set",
                set,
                "--workload",
                "vectoradd",
            ],
        ] {
            let o = tessera(&args);
            assert!(!o.status.success(), "{args:?} accepted");
            let e = stderr(&o);
            assert!(
                e.starts_with("error:") && e.contains(want) && !e.contains("panicked"),
                "{args:?}: {e}"
            );
        }
    }
    // t_refi_ps = 0 turns refresh off whatever t_rfc_ps says.
    tessera_ok(&["config", "show", a100, "--set", "dram.t_refi_ps=0"]);
}
