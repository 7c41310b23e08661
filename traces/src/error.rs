//! Errors of the trace format. Every message names the file and what is wrong with it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{}: not a tessera trace (.tst): the file does not start with the magic bytes {:?}", path.display(), String::from_utf8_lossy(crate::format::MAGIC))]
    NotATrace { path: PathBuf },
    #[error("{}: .tst format version {found}; this build of tessera reads versions {}..={supported}{}", path.display(), crate::format::MIN_READ_VERSION, if *found > *supported { " (the file is newer: upgrade tessera)" } else { " (the file is older: re-import it)" })]
    Version {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{}: truncated .tst file: {detail}", path.display())]
    Truncated { path: PathBuf, detail: String },
    #[error("{}: corrupt .tst file: {detail}", path.display())]
    Corrupt { path: PathBuf, detail: String },
    #[error("{}: cannot write trace: {detail}", path.display())]
    Write { path: PathBuf, detail: String },
}

pub type Result<T, E = TraceError> = std::result::Result<T, E>;

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> TraceError + '_ {
    move |err| TraceError::Io {
        path: path.to_path_buf(),
        err,
    }
}
