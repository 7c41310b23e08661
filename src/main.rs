//! `tessera`: the command-line tool. Parses arguments and calls the crates; no models here.

/// `println!` for results on stdout that ends the process quietly when stdout is closed
/// (`tessera trace info big.tst | head`), instead of panicking as `println!` does.
macro_rules! outln {
    ($($t:tt)*) => { $crate::write_stdout(format_args!($($t)*)) };
}

mod config_cmd;
mod mpi_cmd;
mod run_cmd;
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
use std::process::ExitCode;

/// tessera: a parallel, trace-driven simulator of multi-chiplet and multi-GPU systems.
#[derive(Parser)]
#[command(name = "tessera", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
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
}

/// mimalloc rather than the system allocator: the timing model allocates per CTA and per
/// kernel (warp cursors, decode buffers, inbox growth), and mimalloc's placement keeps its
/// state closer together: vectoradd and gemm run 1.12 to 1.15x faster (alternating runs,
/// docs/benchmarks.md), for about 13 to 20 MiB more peak RSS.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Trace(t) => trace_cmd::run(t),
        Cmd::Config(c) => config_cmd::run(c),
        Cmd::Run(r) => run_cmd::run(r),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
