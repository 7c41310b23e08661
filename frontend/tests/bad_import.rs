//! Accel-Sim import must reject broken traces that it used to accept silently (issue 21),
//! with a message that names the file, the line and what was expected, and must leave no
//! output behind. Each bad input is made at test time from a good fixture under
//! tests/data/ (or the bundled vectorAdd trace under ../shared/traces), which itself must
//! still import.

use std::path::{Path, PathBuf};
use tessera_frontend::accelsim::{import_dir, ImportOptions};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The bundled real trace, when this checkout has it.
fn vectoradd() -> Option<PathBuf> {
    let p = repo().join("../shared/traces/accelsim-vectoradd");
    p.join("kernelslist.g").is_file().then_some(p)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A copy of `src` in a fresh temp dir: (tempdir, copy).
fn copy_of(src: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    copy_dir(src, &dir);
    (tmp, dir)
}

fn fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    copy_of(&repo().join("tests/data").join(name))
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

/// Replaces the first occurrence of `from` in `dir/file` by `to`; returns the 1-based
/// line number where it was.
fn replace(dir: &Path, file: &str, from: &str, to: &str) -> usize {
    let text = read(dir, file);
    let at = text
        .find(from)
        .unwrap_or_else(|| panic!("{file} has no {from:?}"));
    std::fs::write(
        dir.join(file),
        format!("{}{to}{}", &text[..at], &text[at + from.len()..]),
    )
    .unwrap();
    text[..at].matches('\n').count() + 1
}

/// Imports `dir`, which must fail; checks that the message names `file` (and `line` when
/// given) and contains every needle, and that nothing is left under the output name.
fn fails(dir: &Path, file: &str, line: Option<usize>, needles: &[&str]) -> String {
    let out = dir.parent().unwrap().join("out.tst");
    let res = import_dir(dir, &out, &ImportOptions::default());
    let msg = match res {
        Ok(r) => panic!(
            "import accepted a broken trace: {} CTAs, {} warps, {} warp instructions",
            r.ctas, r.warps, r.warp_insts
        ),
        Err(e) => e.to_string(),
    };
    let place = match line {
        Some(l) => format!("{file}:{l}:"),
        None => format!("{file}:"),
    };
    assert!(msg.contains(&place), "message does not name {place}: {msg}");
    for n in needles {
        assert!(msg.contains(n), "message does not say {n:?}: {msg}");
    }
    assert!(!out.exists(), "{} left behind", out.display());
    let mut partial = out.clone().into_os_string();
    partial.push(".partial");
    assert!(!Path::new(&partial).exists(), "partial output left behind");
    msg
}

fn imports(dir: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    import_dir(dir, &tmp.path().join("ok.tst"), &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{} no longer imports: {e}", dir.display()));
}

#[test]
fn every_good_fixture_still_imports() {
    for name in ["v3", "v4-imm", "v4-noimm", "lineinfo", "unknown-opcode"] {
        let dir = repo().join("tests/data").join(name);
        if name == "unknown-opcode" {
            let tmp = tempfile::tempdir().unwrap();
            let opts = ImportOptions {
                allow_unknown_opcodes: true,
                ..ImportOptions::default()
            };
            import_dir(&dir, &tmp.path().join("ok.tst"), &opts).unwrap();
        } else {
            imports(&dir);
        }
    }
    if let Some(v) = vectoradd() {
        imports(&v);
    }
}

/// The line number of the `n`-th (1-based) line equal to `line` in `text`.
fn nth_line(text: &str, line: &str, n: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_end() == line)
        .nth(n - 1)
        .map(|(i, _)| i + 1)
        .unwrap_or_else(|| panic!("fewer than {n} lines {line:?}"))
}

/// Keeps the first `lines` lines of `dir/file`.
fn cut_after(dir: &Path, file: &str, lines: usize) {
    let text = read(dir, file);
    let kept: Vec<&str> = text.lines().take(lines).collect();
    std::fs::write(dir.join(file), kept.join("\n") + "\n").unwrap();
}

#[test]
fn a_file_cut_right_after_an_end_tb_is_truncated() {
    let (_t, dir) = fixture("v4-noimm");
    let at = nth_line(&read(&dir, "kernel-1.traceg"), "#END_TB", 1);
    cut_after(&dir, "kernel-1.traceg", at);
    fails(
        &dir,
        "kernel-1.traceg",
        Some(at),
        &["lists 1 thread blocks", "grid (3,1,1) has 3", "truncated"],
    );
    // The case: 86 of the real vectorAdd's 196 CTAs.
    if let Some(v) = vectoradd() {
        let (_t, dir) = copy_of(&v);
        let at = nth_line(&read(&dir, "kernel-1.traceg"), "#END_TB", 86);
        cut_after(&dir, "kernel-1.traceg", at);
        fails(
            &dir,
            "kernel-1.traceg",
            Some(at),
            &["lists 86 thread blocks", "grid (196,1,1) has 196"],
        );
    }
}

#[test]
fn a_mode_1_line_without_its_stride_is_not_read_as_a_stride() {
    // Tracer 4 with immediates (shown by the first line): base then only the immediate.
    let (_t, dir) = fixture("v4-imm");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "16 1 0x7f2000010000 16 0 ",
        "16 1 0x7f2000010000 0 ",
    );
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["stride or the immediate is missing", "as line"],
    );
    // Tracer 5: every line has an immediate.
    let (_t, dir) = fixture("lineinfo");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "1 0x7f4000000000 4 0 ",
        "1 0x7f4000000000 0 ",
    );
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &[
            "stride or the immediate is missing",
            "tracer version 5 writes an immediate on every line",
        ],
    );
    // Tracer 4 and nothing before it shows whether lines carry an immediate: ambiguous.
    let (_t, dir) = fixture("v4-noimm");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "0000 ffffffff 1 R1 MOV 0 0 ",
        "0000 ffffffff 1 R1 LDS.128 1 R2 16 1 0x7f3000000000 16 ",
    );
    fails(&dir, "kernel-1.traceg", Some(l), &["ambiguous"]);
}

#[test]
fn a_version_5_line_without_its_immediate_fails() {
    let (_t, dir) = fixture("lineinfo");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "17 0010 ffffffff 1 R0 S2R 0 0 0 ",
        "17 0010 ffffffff 1 R0 S2R 0 0 ",
    );
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["immediate", "tracer version 5"],
    );
    // And a tracer-4 file whose lines have none may not grow one.
    let (_t, dir) = fixture("v4-noimm");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "0010 ffffffff 1 R0 S2R 0 0 ",
        "0010 ffffffff 1 R0 S2R 0 0 5 ",
    );
    fails(&dir, "kernel-1.traceg", Some(l), &["carry no immediate"]);
}

#[test]
fn duplicated_or_deleted_warp_blocks_fail() {
    // Warp 1 renamed warp 0: the block lists warp 0 twice.
    let (_t, dir) = fixture("v4-imm");
    let l = replace(&dir, "kernel-1.traceg", "warp = 1\n", "warp = 0\n");
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["warp 0 is listed twice in thread block 1,0,0"],
    );
    // Warp 1's block deleted: the block has 64 threads, 2 warps.
    let (_t, dir) = fixture("v4-imm");
    let text = read(&dir, "kernel-1.traceg");
    let from = text.find("warp = 1\n").unwrap();
    let to = from + text[from..].find("#END_TB").unwrap();
    std::fs::write(
        dir.join("kernel-1.traceg"),
        format!("{}{}", &text[..from], &text[to..]),
    )
    .unwrap();
    let l = text[..from].matches('\n').count() + 1;
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["lists 1 of its 2 warps", "missing warp(s) 1"],
    );
    // The #END_TB / #BEGIN_TB between two blocks deleted: the blocks would merge.
    let (_t, dir) = fixture("v4-imm");
    let text = read(&dir, "kernel-1.traceg");
    let end = text.find("#END_TB").unwrap();
    let begin = end + text[end..].find("#BEGIN_TB\n").unwrap() + "#BEGIN_TB\n".len();
    let merged = format!("{}{}", &text[..end], &text[begin..]);
    let l = merged[..end].matches('\n').count()
        + merged[end..]
            .find("thread block =")
            .map(|i| merged[end..end + i].matches('\n').count())
            .unwrap()
        + 1;
    std::fs::write(dir.join("kernel-1.traceg"), merged).unwrap();
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["second 'thread block = x,y,z' line"],
    );
}

#[test]
fn header_values_that_would_wrap_name_the_key() {
    for (from, to, needles) in [
        (
            "-shmem = 4096",
            "-shmem = 4294968320",
            &["'-shmem'", "4294968320", "out of range"][..],
        ),
        (
            "-shmem = 4096",
            "-shmem = 99999999999",
            &["'-shmem'", "99999999999", "out of range"][..],
        ),
        (
            "-shmem = 4096",
            "-shmem = 99999999999999999999999",
            &["'-shmem'", "out of range"][..],
        ),
        (
            "-block dim = (32,1,1)",
            "-block dim = (16777217,256,1)",
            &["'-block dim'", "16777217", "out of range"][..],
        ),
        (
            "-block dim = (32,1,1)",
            "-block dim = (64,64,1)",
            &["'-block dim'", "4096", "at most 1024"][..],
        ),
        (
            "-grid dim = (3,1,1)",
            "-grid dim = (3,0,1)",
            &["'-grid dim'", "out of range"][..],
        ),
        (
            "-nregs = 24",
            "-nregs = 4294967298",
            &["'-nregs'", "out of range"][..],
        ),
        (
            "-kernel id = 1",
            "-kernel id = 4294967297",
            &["'-kernel id'", "out of range"][..],
        ),
    ] {
        let (_t, dir) = fixture("v4-noimm");
        let l = replace(&dir, "kernel-1.traceg", from, to);
        fails(&dir, "kernel-1.traceg", Some(l), needles);
    }
}

#[test]
fn a_memcpy_past_the_end_of_the_address_space_fails() {
    let (_t, dir) = fixture("v4-imm");
    let l = replace(
        &dir,
        "kernelslist.g",
        "MemcpyHtoD,0x00007f2000000000,131072",
        "MemcpyHtoD,0xffffffffffffffff,200000",
    );
    fails(
        &dir,
        "kernelslist.g",
        Some(l),
        &["MemcpyHtoD", "0xffffffffffffffff", "64-bit address space"],
    );
}

#[test]
fn a_non_memory_opcode_with_addresses_fails() {
    let (_t, dir) = fixture("lineinfo");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "FMUL 2 R4 R4 0 0 ",
        "FADD 2 R4 R4 4 1 0x7f4000000000 4 0 ",
    );
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["FADD is not a memory instruction", "found width 4"],
    );
}

#[test]
fn a_store_without_width_or_addresses_fails() {
    let (_t, dir) = fixture("lineinfo");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "STG.E 2 R2 R5 4 1 0x7f4000100000 4 0 ",
        "STG.E 2 R2 R5 0 0 ",
    );
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["STG.E is a memory instruction", "found width 0"],
    );
}

#[test]
fn a_grid_larger_than_the_listed_ctas_fails() {
    let (_t, dir) = fixture("v4-noimm");
    replace(
        &dir,
        "kernel-1.traceg",
        "-grid dim = (3,1,1)",
        "-grid dim = (1000000,1,1)",
    );
    fails(
        &dir,
        "kernel-1.traceg",
        None,
        &["lists 3 thread blocks", "grid (1000000,1,1) has 1000000"],
    );
}

#[test]
fn ctas_listed_twice_fail() {
    let (_t, dir) = fixture("v4-noimm");
    let text = read(&dir, "kernel-1.traceg");
    let same = text
        .replace("thread block = 1,0,0", "thread block = 0,0,0")
        .replace("thread block = 2,0,0", "thread block = 0,0,0");
    std::fs::write(dir.join("kernel-1.traceg"), same).unwrap();
    let l = nth_line(&read(&dir, "kernel-1.traceg"), "thread block = 0,0,0", 2);
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["thread block 0,0,0 is listed twice"],
    );
}

#[test]
fn an_exit_mask_that_leaves_lanes_running_fails() {
    let (_t, dir) = fixture("v4-noimm");
    replace(
        &dir,
        "kernel-1.traceg",
        "0070 ffffffff 0 EXIT 0 0 ",
        "0070 0000ffff 0 EXIT 0 0 ",
    );
    let text = read(&dir, "kernel-1.traceg");
    let l = nth_line(&text, "#END_TB", 1);
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["warp 0 of thread block 0,0,0", "ffff0000 still running"],
    );
}

#[test]
fn addresses_past_the_end_of_the_address_space_fail() {
    // Mode 2: a negative delta below address 0.
    let (_t, dir) = fixture("v4-imm");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "2 0x7f2000000100 -128 64 0 ",
        "2 0x10 -128 64 0 ",
    );
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["address delta 1 of 2 (-128)", "64-bit address space"],
    );
    // Mode 1: the last lane past 2^64.
    let (_t, dir) = fixture("v4-imm");
    let l = replace(
        &dir,
        "kernel-1.traceg",
        "16 1 0x7f2000010000 16 0 ",
        "16 1 0xfffffffffffffff0 16 0 ",
    );
    fails(
        &dir,
        "kernel-1.traceg",
        Some(l),
        &["stride 16", "64-bit address space"],
    );
}
