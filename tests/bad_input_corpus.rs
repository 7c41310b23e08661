//! The bad-input corpus (issue 21): tests/data/bad-input/, one folder per damaged input with
//! the command to run on it and the text its error must contain (`case`; the folder's
//! generate.py says how each was made). Every case runs in a copy of its folder and must
//! fail cleanly: a non-zero exit, no panic, one `error:` line with every expected text, its
//! inputs unchanged, and nothing new left behind (no output, no `.partial`).

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Case {
    name: String,
    args: Vec<String>,
    expect: Vec<String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> Vec<Case> {
    let root = data("bad-input");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&root).unwrap() {
        let e = e.unwrap();
        if !e.file_type().unwrap().is_dir() || e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(e.path().join("case"))
            .unwrap_or_else(|err| panic!("{name}/case: {err}"));
        let (mut args, mut expect) = (None, Vec::new());
        for line in text.lines() {
            if let Some(a) = line.strip_prefix("args: ") {
                let r = repo().display().to_string();
                args = Some(
                    a.split_whitespace()
                        .map(|w| w.replace("{repo}", &r))
                        .collect(),
                );
            } else if let Some(x) = line.strip_prefix("expect: ") {
                expect.push(x.to_string());
            } else {
                assert!(
                    line.starts_with('#') || line.trim().is_empty(),
                    "{name}/case: unknown line {line:?}"
                );
            }
        }
        let args = args.unwrap_or_else(|| panic!("{name}/case: no args: line"));
        assert!(!expect.is_empty(), "{name}/case: no expect: line");
        out.push(Case { name, args, expect });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every file under `dir`, relative, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else if e.path().extension().is_some_and(|x| x == "yaml") {
            // A config may name a repository file as its base.
            let text = std::fs::read_to_string(e.path()).unwrap();
            let r = repo().display().to_string();
            std::fs::write(&dst, text.replace("{repo}", &r)).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

#[test]
fn every_bad_input_fails_with_its_message() {
    let cases = cases();
    assert!(cases.len() >= 25, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(&c.name);
        copy_tree(&data("bad-input").join(&c.name), &dir);
        let before = snapshot(&dir);
        let o = Command::new(bin())
            .args(&c.args)
            .current_dir(&dir)
            .output()
            .unwrap();
        let err = stderr(&o);
        let mut why = Vec::new();
        if o.status.success() {
            why.push("exited 0".to_string());
        } else if o.status.code() != Some(1) {
            why.push(format!("exit status {} (expected 1)", o.status));
        }
        if err.contains("panicked") {
            why.push("panicked".into());
        }
        if !err.starts_with("error: ") || err.trim_end().lines().count() != 1 {
            why.push("stderr is not one `error:` line".into());
        }
        for x in &c.expect {
            if !err.contains(x.as_str()) {
                why.push(format!("no {x:?} in the message"));
            }
        }
        let after = snapshot(&dir);
        if after != before {
            let changed: Vec<_> = after
                .keys()
                .chain(before.keys())
                .filter(|k| after.get(*k) != before.get(*k))
                .map(|k| k.display().to_string())
                .collect();
            why.push(format!("files changed or left behind: {changed:?}"));
        }
        if !why.is_empty() {
            failures.push(format!("{}: {}\n  stderr: {err}", c.name, why.join("; ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
