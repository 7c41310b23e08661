//! Writing results safely: never over one of the command's inputs, never a partial file
//! left where a complete one is expected.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The same file, by device and inode where both exist (catches hard and symbolic links
/// and `..`), else by canonical path.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Fails when `out` is one of `inputs` (the same file or directory, however named): no
/// command writes its output over what it reads.
pub fn refuse_input(out: &Path, inputs: &[&Path]) -> Result<()> {
    for i in inputs {
        if same_file(out, i) {
            anyhow::bail!(
                "{}: refusing to write the output over an input ({})",
                out.display(),
                i.display()
            );
        }
    }
    Ok(())
}

/// The files of directory `dir` whose names `reads` accepts (what a command reads there).
pub fn files_in(dir: &Path, reads: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_str().is_some_and(&reads))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// `path` + `.partial`.
pub fn partial(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

/// Fails unless `path`'s directory exists: found before a long run rather than after.
pub fn check_dir_of(path: &Path, what: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "{}: cannot write the {what} there: {} is not a directory",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Writes `bytes` to `path` whole or not at all: into `path.partial`, then renamed over
/// `path` (an existing `path` is replaced in one step, never half-written).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let part = partial(path);
    let _pending = crate::cleanup::pending(&part);
    if let Err(e) = std::fs::write(&part, bytes) {
        let _ = std::fs::remove_file(&part);
        return Err(e).with_context(|| format!("{}: cannot write", part.display()));
    }
    std::fs::rename(&part, path).with_context(|| {
        let _ = std::fs::remove_file(&part);
        format!("{}: cannot rename", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_reached_another_way_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.json");
        std::fs::write(&input, "{}").unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let dotdot = sub.join("../in.json");
        assert!(refuse_input(&dotdot, &[&input]).is_err());
        #[cfg(unix)]
        {
            let link = d.path().join("link.json");
            std::os::unix::fs::symlink(&input, &link).unwrap();
            assert!(refuse_input(&link, &[&input]).is_err());
            let hard = d.path().join("hard.json");
            std::fs::hard_link(&input, &hard).unwrap();
            assert!(refuse_input(&hard, &[&input]).is_err());
        }
        assert!(refuse_input(&d.path().join("new.json"), &[&input]).is_ok());
        // An input directory.
        assert!(refuse_input(&sub.join(".."), &[d.path()]).is_err());
        let found = files_in(d.path(), |n| n.ends_with(".json"));
        assert!(found.iter().any(|p| p.ends_with("in.json")), "{found:?}");
    }

    #[test]
    fn atomic_writes_leave_no_partial_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.csv");
        write_atomic(&p, b"a\n").unwrap();
        write_atomic(&p, b"b\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"b\n");
        assert!(!partial(&p).exists());
        let bad = d.path().join("missing/x.csv");
        assert!(write_atomic(&bad, b"a").is_err());
        assert!(!partial(&bad).exists());
    }
}
