//! `tessera config ...`: inspect configurations before the timing model reads them.

use anyhow::Result;
use clap::Subcommand;
use std::path::PathBuf;
use tessera_partitions::config::{reference_markdown, GpuConfig};
use tessera_traces::TraceFile;

#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Load a config (following `base:` includes, applying --set), validate it, and print
    /// the effective values as YAML.
    Show {
        /// The YAML file (e.g. configs/a100.yaml).
        config: PathBuf,
        /// Override one key, `section.key=value` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = crate::trace_cmd::parse_kv)]
        set: Vec<(String, String)>,
    },
    /// Print the reference of every config key (the text of docs/config.md).
    Reference,
    /// Resident CTAs per SM of every kernel of a trace on a config, and the limit that
    /// binds; a kernel whose CTA can never fit is an error.
    Occupancy {
        config: PathBuf,
        /// The .tst file.
        #[arg(long)]
        trace: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = crate::trace_cmd::parse_kv)]
        set: Vec<(String, String)>,
    },
}

pub fn run(cmd: ConfigCmd) -> Result<()> {
    match cmd {
        ConfigCmd::Show { config, set } => {
            let c = GpuConfig::load(&config, &set)?;
            outln!("{}", serde_norway::to_string(&c)?.trim_end());
            eprintln!(
                "{}: {} SM(s) at {} MHz, {} L2 bytes, DRAM peak {:.1} GB/s, {} partition(s)",
                config.display(),
                c.core.sm_count,
                c.core.clock_hz / 1_000_000,
                c.l2.size_bytes,
                c.dram_peak_bytes_per_s() as f64 / 1e9,
                c.partition_count()
            );
            Ok(())
        }
        ConfigCmd::Reference => {
            outln!("{}", reference_markdown().trim_end());
            Ok(())
        }
        ConfigCmd::Occupancy { config, trace, set } => {
            let c = GpuConfig::load(&config, &set)?;
            let t = TraceFile::open(&trace)?;
            for (i, k) in t.kernels().iter().enumerate() {
                let threads = k.threads_per_cta() as u32;
                let o = c.occupancy(threads, k.nregs, k.shmem_bytes).map_err(|e| {
                    anyhow::anyhow!("{}: kernel {i} ({}): {e}", trace.display(), k.name)
                })?;
                outln!(
                    "kernel {i} {}: {threads} threads x {} registers, {} B shared: {} CTAs per SM (limited by {:?}; threads {}, CTA slots {}, registers {}, shared memory {})",
                    k.name,
                    k.nregs,
                    k.shmem_bytes,
                    o.ctas,
                    o.limited_by,
                    o.by_threads,
                    o.by_ctas,
                    fmt_limit(o.by_registers),
                    fmt_limit(o.by_shared_memory)
                );
            }
            Ok(())
        }
    }
}

fn fmt_limit(n: u32) -> String {
    if n == u32::MAX {
        "unlimited".into()
    } else {
        n.to_string()
    }
}
