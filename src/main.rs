//! `tessera`: the command-line tool. Parses arguments and calls the crates; no models here.

mod trace_cmd;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Trace(t) => trace_cmd::run(t),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
