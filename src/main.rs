//! `tessera`: the command-line tool. Parses arguments and calls the crates; no models here.

/// `println!` for results on stdout that ends the process quietly when stdout is closed
/// (`tessera trace info big.tst | head`), instead of panicking as `println!` does.
macro_rules! outln {
    ($($t:tt)*) => { $crate::write_stdout(format_args!($($t)*)) };
}

mod cleanup;
mod collect_cmd;
mod config_cmd;
mod corpus_cmd;
mod diff_cmd;
mod jobs;
mod mpi_cmd;
mod outputs;
mod progress;
mod provenance;
mod report;
mod run_cmd;
mod stats_file;
mod sweep_cmd;
mod trace_cmd;

/// Writes one line to stdout; a closed pipe ends the process (exit 0, like `head` wants),
/// any other write error ends it with a message.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|_| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

use clap::{Parser, Subcommand};

/// Ends the process with this status and no `error:` line: the command has already said
/// why (`diff` finding differences, a corpus check with failures).
#[derive(Debug)]
pub struct Exit(pub u8);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for Exit {}
use std::process::ExitCode;

/// tessera: a parallel, trace-driven simulator of multi-chiplet and multi-GPU systems.
#[derive(Parser)]
#[command(name = "tessera", version = provenance::TOOL_VERSION, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    #[command(flatten)]
    progress: progress::ProgressArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Import, export, inspect and verify traces.
    #[command(subcommand)]
    Trace(trace_cmd::TraceCmd),
    /// Inspect GPU configurations (YAML presets in configs/).
    #[command(subcommand)]
    Config(config_cmd::ConfigCmd),
    /// Simulate a trace (or a built-in workload) on a GPU configuration.
    Run(run_cmd::RunArgs),
    /// Compare two stats files: configuration and input differences first, then every
    /// metric that differs; exit status 1 when a metric differs beyond its tolerance.
    Diff(diff_cmd::DiffArgs),
    /// Collect metrics from many stats files into one CSV table, a row per run, the
    /// overrides as columns.
    Collect(collect_cmd::CollectArgs),
    /// Run the cross product of config values (`--vary key=v1,v2,...`) in parallel: a
    /// stats file per point and the collected table.
    Sweep(sweep_cmd::SweepArgs),
    /// One self-contained HTML page of plots from stats files: kernel timeline, stalls,
    /// memory, links and time series of each run; metrics against the varied parameters
    /// of several (a sweep's output); two side by side.
    Report(report::ReportArgs),
    /// Regression corpus: run a manifest's cases and compare them with their goldens.
    #[command(subcommand)]
    Corpus(corpus_cmd::CorpusCmd),
}

/// mimalloc rather than the system allocator: the timing model allocates per CTA and per
/// kernel (warp cursors, decode buffers, inbox growth), and mimalloc's placement keeps its
/// state closer together: vectoradd and gemm run 1.12 to 1.15x faster (alternating runs,
/// docs/development-log.md), for about 13 to 20 MiB more peak RSS.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its place in the `mi_option_e` enum of mimalloc.h
/// (v3, the version libmimalloc-sys 0.1.49 builds), which the bindings do not name. A test
/// checks that the option there has the purge delay's default.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's default purge delay, in milliseconds (its `options.c`).
#[cfg(test)]
const MI_PURGE_DELAY_DEFAULT_MS: std::os::raw::c_long = 1000;

/// Keeps the memory mimalloc frees for reuse instead of handing it back to the kernel. The
/// timing model frees and allocates as CTAs come and go; with purging on, each purged
/// stretch is faulted in and zeroed again on reuse (a whole 2 MiB huge page where mimalloc
/// asked for them): 8 to 14% of stream triad's time in the kernel's `clear_page_erms` on
/// this project's VMs, under 1% without purging. Peak RSS is unchanged (the memory is
/// reused, not grown); it is simply not returned before exit.
fn keep_freed_memory() {
    // SAFETY: sets one of mimalloc's options (a plain integer it reads when it would purge);
    // the option exists in the linked mimalloc (see the test `purge_delay_is_option_15`).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    let who = match mpi_cmd::launched_rank() {
        Some(r) => format!("rank {r}: "),
        None => String::new(),
    };
    cleanup::install(&who);
    // Under MPI, rank 0 alone shows progress.
    let other_rank = matches!(mpi_cmd::launched_rank(), Some(r) if r != 0);
    if let Err(e) = progress::init(&cli.progress, other_rank) {
        eprintln!("error: {e:#}");
        return ExitCode::FAILURE;
    }
    let res = match cli.cmd {
        Cmd::Trace(t) => trace_cmd::run(t),
        Cmd::Config(c) => config_cmd::run(c),
        Cmd::Run(r) => run_cmd::run(r),
        Cmd::Diff(d) => diff_cmd::run(d),
        Cmd::Collect(c) => collect_cmd::run(c),
        Cmd::Sweep(s) => sweep_cmd::run(s),
        Cmd::Report(r) => report::run(r),
        Cmd::Corpus(c) => corpus_cmd::run(c),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<Exit>().is_some() => {
            ExitCode::from(e.downcast_ref::<Exit>().map_or(1, |x| x.0))
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod allocator_tests {
    use super::*;

    /// The option numbered [`MI_OPTION_PURGE_DELAY`] is the purge delay: it has that
    /// option's default (no other option defaults to 1000 at that place), and it takes
    /// the value `keep_freed_memory` sets.
    #[test]
    fn purge_delay_is_option_15() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return; // the environment overrides the default this test reads
        }
        // SAFETY: reads and sets a mimalloc option (plain integers).
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(default, MI_PURGE_DELAY_DEFAULT_MS);
        keep_freed_memory();
        // SAFETY: as above.
        let now = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(now, -1);
    }
}
