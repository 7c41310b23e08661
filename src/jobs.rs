//! Running many `tessera` commands as worker processes, a few at a time (`--jobs`): what
//! `sweep` and `corpus check` share. Each job is this same binary with its own arguments
//! (or `mpirun -np R` of it), its output kept in a log file; a job past its time limit is
//! killed and reported.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One command to run.
pub struct Job {
    /// The arguments after `tessera`.
    pub args: Vec<OsString>,
    /// Run under `mpirun -np R` (the binary must be built with the `mpi` feature).
    pub mpi_ranks: Option<usize>,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
    pub timeout: Duration,
}

/// How a job ended.
#[derive(Clone, Debug)]
pub struct JobResult {
    pub ok: bool,
    /// Why it failed: the exit status or the time limit, and the end of its log.
    pub failure: String,
    pub secs: f64,
}

/// Environment variables an MPI launcher or Slurm sets in each process it starts. A worker
/// process started by a rank (`corpus check` under `mpirun`) must not see them, or it
/// would take itself for a rank.
fn is_launcher_var(k: &str) -> bool {
    const PREFIXES: [&str; 5] = ["OMPI_COMM_WORLD", "PMIX_", "PMI_", "HYDRA_", "I_MPI_"];
    const NAMES: [&str; 5] = [
        "MPI_LOCALRANKID",
        "MPI_LOCALNRANKS",
        "SLURM_STEP_NUM_TASKS",
        "OMPI_UNIVERSE_SIZE",
        "OMPI_FILE_LOCATION",
    ];
    PREFIXES.iter().any(|p| k.starts_with(p)) || NAMES.contains(&k)
}

/// Whether this process runs as root (Open MPI's `mpirun` then needs to be told it may).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Whether `mpirun` is on the PATH.
pub fn have_mpirun() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("mpirun").is_file()))
}

/// The last `lines` lines of a log file.
pub fn log_tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

fn run_one(exe: &std::path::Path, job: &Job) -> JobResult {
    let r = run_one_inner(exe, job);
    if job.mpi_ranks.is_some() {
        let _ = std::fs::remove_dir_all(job.log.with_extension("ompi"));
    }
    r
}

fn run_one_inner(exe: &std::path::Path, job: &Job) -> JobResult {
    let t0 = Instant::now();
    let fail = |why: String| JobResult {
        ok: false,
        failure: why,
        secs: t0.elapsed().as_secs_f64(),
    };
    let log = match std::fs::File::create(&job.log) {
        Ok(f) => f,
        Err(e) => return fail(format!("{}: cannot create: {e}", job.log.display())),
    };
    let err_log = match log.try_clone() {
        Ok(f) => f,
        Err(e) => return fail(format!("{}: {e}", job.log.display())),
    };
    // Each mpirun gets a session directory of its own: Open MPI's default one is shared,
    // and two jobs starting at once can race to create it ("mkdir ... File exists").
    let session = job.log.with_extension("ompi");
    let mut cmd = match job.mpi_ranks {
        Some(r) => {
            let _ = std::fs::create_dir_all(&session);
            let mut c = Command::new("mpirun");
            c.env("OMPI_MCA_orte_tmpdir_base", &session);
            c.args(["-np", &r.to_string(), "--oversubscribe"]).arg(exe);
            if running_as_root() {
                for k in ["OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] {
                    if std::env::var_os(k).is_none() {
                        c.env(k, "1");
                    }
                }
            }
            c
        }
        None => Command::new(exe),
    };
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(is_launcher_var) {
            cmd.env_remove(&k);
        }
    }
    cmd.args(&job.args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let what = if job.mpi_ranks.is_some() {
                "mpirun".to_string()
            } else {
                exe.display().to_string()
            };
            return fail(format!("cannot start {what}: {e}"));
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if status.success() {
                    return JobResult {
                        ok: true,
                        failure: String::new(),
                        secs: t0.elapsed().as_secs_f64(),
                    };
                }
                return fail(format!("{status}: {}", log_tail(&job.log, 3)));
            }
            Ok(None) => {}
            Err(e) => return fail(format!("cannot wait for the worker: {e}")),
        }
        if t0.elapsed() > job.timeout {
            let _ = child.kill();
            let _ = child.wait();
            return fail(format!(
                "killed after the time limit of {} s: {}",
                job.timeout.as_secs(),
                log_tail(&job.log, 2)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `jobs`, at most `parallel` at a time, calling `done(i, result)` as each ends (in
/// the order they end); returns the results in job order.
pub fn run_all(
    jobs: &[Job],
    parallel: usize,
    done: &(dyn Fn(usize, &JobResult) + Sync),
) -> Vec<JobResult> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tessera"));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<JobResult>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|s| {
        for _ in 0..parallel.clamp(1, jobs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = run_one(&exe, job);
                done(i, &r);
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            r.unwrap_or(JobResult {
                ok: false,
                failure: "the worker thread ended early".into(),
                secs: 0.0,
            })
        })
        .collect()
}

/// The default `--jobs`: the cores this process may use.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_variables_are_recognized() {
        assert!(is_launcher_var("OMPI_COMM_WORLD_RANK"));
        assert!(is_launcher_var("PMIX_RANK"));
        assert!(is_launcher_var("PMI_SIZE"));
        assert!(is_launcher_var("SLURM_STEP_NUM_TASKS"));
        assert!(!is_launcher_var("OMPI_ALLOW_RUN_AS_ROOT"));
        assert!(!is_launcher_var("PATH"));
    }
}
