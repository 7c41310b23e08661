//! `tessera diff a.json b.json`: what differs between two runs, configuration first.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use crate::stats_file::{self, Tolerances};

#[derive(Args)]
pub struct DiffArgs {
    /// The reference stats file.
    a: PathBuf,
    /// The stats file compared with it.
    b: PathBuf,
    /// A relative tolerance for the metrics matching a pattern, in percent
    /// (`totals.ipc=0.5`, `kernels.*.cycles=2`; `*` matches anything; repeatable, the last
    /// match wins). Metrics without one must be equal.
    #[arg(long = "tolerance", value_name = "METRIC=PCT", value_parser = Tolerances::parse_arg)]
    tolerance: Vec<(String, f64)>,
    /// Show at most this many metric differences (0: all).
    #[arg(long, default_value_t = 40)]
    max_rows: usize,
}

/// Exit status 1 (no `error:` line) when the stats differ beyond tolerance.
pub fn run(a: DiffArgs) -> Result<()> {
    let va = stats_file::read(&a.a)?;
    let vb = stats_file::read(&a.b)?;
    let (na, nb) = (stats_file::version(&va), stats_file::version(&vb));
    if na != nb {
        anyhow::bail!(
            "{} is stats_version {}, {} is {}: metrics moved between versions, so they cannot \
             be compared key by key (run both with one tessera)",
            a.a.display(),
            na.unwrap_or(0),
            a.b.display(),
            nb.unwrap_or(0)
        );
    }
    let config = stats_file::config_differences(&va, &vb);
    if config.is_empty() {
        outln!("configuration and input: the same");
    } else {
        outln!("configuration and input: {} difference(s)", config.len());
        for d in &config {
            outln!("  {}", d.describe());
        }
    }
    let tol = Tolerances(a.tolerance.clone());
    let deltas = stats_file::compare(&va, &vb, &tol);
    let total = stats_file::metrics(&va).len();
    let beyond = deltas.iter().filter(|d| d.beyond).count();
    if deltas.is_empty() {
        outln!("metrics: all {total} the same");
    } else {
        outln!(
            "metrics: {} of {total} differ, {beyond} beyond tolerance",
            deltas.len()
        );
        // Those beyond tolerance first, then those within, each in file order.
        let mut shown: Vec<_> = deltas.iter().filter(|d| d.beyond).collect();
        shown.extend(deltas.iter().filter(|d| !d.beyond));
        let limit = if a.max_rows == 0 {
            usize::MAX
        } else {
            a.max_rows
        };
        for d in shown.iter().take(limit) {
            outln!(
                "  {}{}",
                d.describe(),
                if d.beyond { "" } else { " (within tolerance)" }
            );
        }
        if shown.len() > limit {
            outln!(
                "  ... and {} more (--max-rows 0 shows all)",
                shown.len() - limit
            );
        }
    }
    if beyond > 0 {
        return Err(crate::Exit(1).into());
    }
    Ok(())
}
