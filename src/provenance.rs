//! What a stats file says about where its numbers came from, and how the run was executed.
//!
//! A stats file is the simulated results (`totals`, `kernels`, ...) plus two objects written
//! here:
//! - `provenance`: what was simulated: the tool version, the configuration file, the
//!   overrides as given and the effective configuration (all but the `partitioning`
//!   section, which says how the run is cut, not what is simulated), and the input (a trace
//!   and its content hash, or a built-in workload and its parameters);
//! - `run`: how it was executed: threads, ranks, placement, the `partitioning` section and
//!   its overrides, host, wall time, peak RSS. It comes last in the file.
//!
//! DESIGN.md's invariant is about the simulated results: the file without `run` is
//! byte-identical for any threads, ranks, placement and cut ([`without_run`]).

use anyhow::Result;
use serde_json::{Map, Value};
use std::path::Path;
use tessera_partitions::config::GpuConfig;
use tessera_partitions::stats::RunStats;
use tessera_traces::TraceFile;

/// The tool's version: the package version and `git describe` at build time.
pub const TOOL_VERSION: &str = env!("TESSERA_VERSION");

/// The config section that says how a run is cut into partitions, not what it simulates.
const PARTITIONING: &str = "partitioning";

/// Whether a `--set` key belongs to the `partitioning` section.
pub fn is_partitioning_key(key: &str) -> bool {
    key == PARTITIONING || key.starts_with("partitioning.")
}

/// What was simulated: a trace file, or a built-in workload recorded for the run.
pub enum Input<'a> {
    Trace {
        path: &'a Path,
    },
    Workload {
        name: &'a str,
        params: &'a [(String, String)],
        /// The recorder's description of the workload, with every parameter's value
        /// (defaults included).
        generator: &'a str,
    },
}

/// How a run was executed (the `run` object).
pub struct RunInfo<'a> {
    pub threads: usize,
    pub ranks: usize,
    pub placement: &'a str,
    /// `all` or `linked` under MPI, `None` otherwise.
    pub mpi_exchange: Option<&'a str>,
    pub wall_s: f64,
}

fn overrides_object<'a>(sets: impl Iterator<Item = &'a (String, String)>) -> Value {
    let mut m = Map::new();
    for (k, v) in sets {
        // A key given twice: the last value is the one applied, as in the config loader.
        m.remove(k);
        m.insert(k.clone(), Value::String(v.clone()));
    }
    Value::Object(m)
}

/// The stats file's JSON: `stats_version` and `config` (the name), then `provenance`, the
/// simulated results, and `run` last.
pub fn stats_value(
    stats: &RunStats,
    cfg: &GpuConfig,
    config_file: &Path,
    sets: &[(String, String)],
    input: &Input<'_>,
    trace: &TraceFile,
    run: &RunInfo<'_>,
) -> Result<Value> {
    let Value::Object(results) = serde_json::to_value(stats)? else {
        anyhow::bail!("internal error: the stats do not serialize to an object");
    };
    let Value::Object(mut effective) = serde_json::to_value(cfg)? else {
        anyhow::bail!("internal error: the configuration does not serialize to an object");
    };
    let partitioning = effective.remove(PARTITIONING).unwrap_or(Value::Null);

    let mut inp = Map::new();
    match input {
        Input::Trace { path } => {
            inp.insert("trace".into(), path.display().to_string().into());
        }
        Input::Workload {
            name,
            params,
            generator,
        } => {
            inp.insert("workload".into(), (*name).into());
            inp.insert("params".into(), overrides_object(params.iter()));
            inp.insert("generator".into(), (*generator).into());
        }
    }
    let crc = format!("{:08x}", trace.index_crc32());
    inp.insert("trace_crc32".into(), crc.into());

    let mut prov = Map::new();
    prov.insert("tool".into(), TOOL_VERSION.into());
    prov.insert(
        "config_file".into(),
        config_file.display().to_string().into(),
    );
    prov.insert(
        "overrides".into(),
        overrides_object(sets.iter().filter(|(k, _)| !is_partitioning_key(k))),
    );
    prov.insert("input".into(), Value::Object(inp));
    prov.insert("config_effective".into(), Value::Object(effective));

    let mut r = Map::new();
    r.insert("threads".into(), run.threads.into());
    r.insert("ranks".into(), run.ranks.into());
    r.insert("placement".into(), run.placement.into());
    if let Some(x) = run.mpi_exchange {
        r.insert("mpi_exchange".into(), x.into());
    }
    r.insert("partitions".into(), cfg.partition_count().into());
    r.insert(PARTITIONING.into(), partitioning);
    r.insert(
        "partitioning_overrides".into(),
        overrides_object(sets.iter().filter(|(k, _)| is_partitioning_key(k))),
    );
    r.insert("host".into(), host_name().into());
    r.insert("wall_s".into(), round3(run.wall_s).into());
    if let Some(mib) = peak_rss_mib() {
        r.insert("peak_rss_mib".into(), round3(mib).into());
    }

    let mut out = Map::new();
    let mut rest = results.into_iter();
    // `stats_version` and `config` first, as before; provenance right after them.
    for (k, v) in rest.by_ref() {
        let last = k == "config";
        out.insert(k, v);
        if last {
            break;
        }
    }
    out.insert("provenance".into(), Value::Object(prov));
    out.extend(rest);
    out.insert("run".into(), Value::Object(r));
    Ok(Value::Object(out))
}

/// A stats file's text without its `run` object: the simulated results, which must be
/// byte-identical for any threads, ranks, placement and cut. The text is parsed and
/// printed again exactly as tessera writes it (pretty, final newline).
pub fn without_run(text: &str) -> Result<String> {
    let mut v: Value = serde_json::from_str(text)?;
    if let Some(m) = v.as_object_mut() {
        m.remove("run");
    }
    pretty(&v)
}

/// JSON as tessera writes it: pretty-printed, with a final newline.
pub fn pretty(v: &Value) -> Result<String> {
    let mut s = serde_json::to_string_pretty(v)?;
    s.push('\n');
    Ok(s)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// This machine's name (Linux: the kernel's; elsewhere `$HOSTNAME`), or `unknown`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// `, peak RSS N MiB` for the rate lines on stderr, or nothing where it is unknown.
pub fn peak_rss_note() -> String {
    peak_rss_mib()
        .map(|mib| format!(", peak RSS {mib:.1} MiB"))
        .unwrap_or_default()
}

/// Peak resident set size of this process so far, in MiB (Linux `VmHWM`).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitioning_keys_are_told_apart() {
        assert!(is_partitioning_key("partitioning.mode"));
        assert!(is_partitioning_key("partitioning"));
        assert!(!is_partitioning_key("partitioning_x.mode"));
        assert!(!is_partitioning_key("core.scheduler"));
    }

    #[test]
    fn the_last_of_a_repeated_override_is_kept() {
        let sets = [
            ("core.scheduler".to_string(), "gto".to_string()),
            ("l2.size_bytes".to_string(), "1".to_string()),
            ("core.scheduler".to_string(), "lrr".to_string()),
        ];
        let v = overrides_object(sets.iter());
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"l2.size_bytes":"1","core.scheduler":"lrr"}"#
        );
    }

    #[test]
    fn without_run_drops_only_run() {
        let text = "{\n  \"a\": 1,\n  \"run\": {\n    \"wall_s\": 2.5\n  }\n}\n";
        assert_eq!(without_run(text).unwrap(), "{\n  \"a\": 1\n}\n");
    }
}
