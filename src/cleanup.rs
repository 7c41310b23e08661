//! Nothing left behind when a run is interrupted: the files a command is writing (its
//! `.partial` outputs, a recorded workload's temporary trace) are registered here, and
//! SIGINT, SIGTERM or SIGHUP removes them, says which signal ended the command, and exits
//! with status 128 + the signal's number (as a shell reports it).
//!
//! The writers remove their own partial files on errors; this covers the one case they
//! cannot, a signal ending the process.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes `path` (a file, or a directory and its contents) from the pending list when
/// dropped; the file itself is then the writer's (renamed into place, or removed).
pub struct Pending(PathBuf);

impl Drop for Pending {
    fn drop(&mut self) {
        if let Ok(mut p) = PENDING.lock() {
            if let Some(i) = p.iter().position(|x| *x == self.0) {
                p.swap_remove(i);
            }
        }
    }
}

/// Registers `path` for removal if a signal ends the process while the guard lives.
pub fn pending(path: &Path) -> Pending {
    if let Ok(mut p) = PENDING.lock() {
        p.push(path.to_path_buf());
    }
    Pending(path.to_path_buf())
}

/// Removes every registered path (best effort).
fn remove_pending() {
    // A signal may arrive while another thread holds the lock (registering a file): the
    // list is then taken as it is.
    let list = match PENDING.lock() {
        Ok(p) => p.clone(),
        Err(e) => e.into_inner().clone(),
    };
    for p in list {
        if p.is_dir() {
            let _ = std::fs::remove_dir_all(&p);
        } else {
            let _ = std::fs::remove_file(&p);
        }
    }
}

/// The conventional name of a signal.
fn signal_name(sig: i32) -> &'static str {
    match sig {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        signal_hook::consts::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Starts the thread that waits for SIGINT, SIGTERM and SIGHUP. `who` prefixes the
/// message (a rank under MPI). Without it (the handlers could not be installed) signals
/// keep their default action.
pub fn install(who: &str) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let who = who.to_string();
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                remove_pending();
                eprintln!("\ntessera: {who}ended by {}", signal_name(sig));
                std::process::exit(128 + sig);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_paths_are_removed_until_their_guard_drops() {
        let d = tempfile::tempdir().unwrap();
        let kept = d.path().join("kept.partial");
        let gone = d.path().join("gone.partial");
        let dir = d.path().join("out.partial");
        std::fs::write(&kept, "x").unwrap();
        std::fs::write(&gone, "x").unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("f"), "x").unwrap();
        {
            let _done = pending(&kept);
        }
        let _g = pending(&gone);
        let _d = pending(&dir);
        remove_pending();
        assert!(kept.exists());
        assert!(!gone.exists());
        assert!(!dir.exists());
    }
}
