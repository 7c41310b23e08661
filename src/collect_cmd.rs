//! `tessera collect`: many stats files into one CSV table, a row per run (what Accel-Sim's
//! `get_stats.py` gives its users), with the overrides as columns.

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::outputs;
use crate::stats_file::{self, glob_match, show_value};

#[derive(Args)]
pub struct CollectArgs {
    /// Stats files, or directories searched (recursively) for them.
    #[arg(required = true, value_name = "DIR|FILE")]
    inputs: Vec<PathBuf>,
    /// Write the CSV table here (default: stdout).
    #[arg(short, long, value_name = "TABLE.csv")]
    out: Option<PathBuf>,
    /// The metrics to collect, as patterns over dotted paths (`totals.*`, `kernels.*.cycles`,
    /// `chiplets.*.memory.l2_hits`; repeatable). Default: every `totals` metric.
    #[arg(long = "metric", value_name = "PATTERN")]
    metrics: Vec<String>,
}

pub fn run(a: CollectArgs) -> Result<()> {
    let files = gather(&a.inputs)?;
    let patterns = if a.metrics.is_empty() {
        vec!["totals.*".to_string()]
    } else {
        a.metrics.clone()
    };
    let table = table(&files, &patterns)?;
    match &a.out {
        Some(out) => {
            outputs::check_dir_of(out, "table")?;
            let inputs: Vec<&Path> = a
                .inputs
                .iter()
                .map(PathBuf::as_path)
                .chain(files.iter().map(|(p, _)| p.as_path()))
                .collect();
            outputs::refuse_input(out, &inputs)?;
            outputs::write_atomic(out, table.as_bytes())?;
            eprintln!(
                "{}: {} run(s) x {} column(s)",
                out.display(),
                files.len(),
                table.lines().next().map_or(0, |h| h.split(',').count())
            );
        }
        None => {
            for line in table.lines() {
                outln!("{line}");
            }
        }
    }
    Ok(())
}

/// The stats files of `inputs`: files read as given (an error names the file), directories
/// searched recursively for `*.json` in name order, JSON there that is not a stats file
/// passed over with a note. Fails when there are none.
pub fn gather(inputs: &[PathBuf]) -> Result<Vec<(PathBuf, Value)>> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found = Vec::new();
            walk(input, &mut found)?;
            found.sort();
            for f in found {
                // In a directory, JSON that is not a stats file is passed over with a note.
                match stats_file::read(&f) {
                    Ok(v) => files.push((f, v)),
                    Err(e) => eprintln!("note: skipping {e:#}"),
                }
            }
        } else {
            files.push((input.clone(), stats_file::read(input)?));
        }
    }
    if files.is_empty() {
        anyhow::bail!("no stats files found in {}", names(inputs));
    }
    Ok(files)
}

/// The `--set`/`--vary` overrides a run was made with (`provenance.overrides`), as
/// (key, value) in the order given.
pub fn overrides(v: &Value) -> Vec<(String, String)> {
    v.get("provenance")
        .and_then(|p| p.get("overrides"))
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, x)| (k.clone(), show_value(x))).collect())
        .unwrap_or_default()
}

fn names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every `*.json` file under `dir`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))?;
    for e in entries {
        let p = e
            .with_context(|| format!("{}: cannot list", dir.display()))?
            .path();
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    Ok(())
}

/// One CSV field, quoted where it must be (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// What a run simulated, in a few words: the workload with every parameter, or the trace.
pub fn input_of(v: &Value) -> String {
    let input = v.get("provenance").and_then(|p| p.get("input"));
    let get = |k: &str| input.and_then(|i| i.get(k)).map(show_value);
    get("generator")
        .or_else(|| get("workload"))
        .or_else(|| get("trace"))
        .unwrap_or_default()
}

/// The table: `file`, `config`, `input`, one column per overridden key (in order of first
/// appearance), then the metrics matching `patterns` (likewise). A cell a run lacks is
/// empty.
pub fn table(files: &[(PathBuf, Value)], patterns: &[String]) -> Result<String> {
    let mut override_cols: Vec<String> = Vec::new();
    let mut metric_cols: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for (path, v) in files {
        let overrides = overrides(v);
        for (k, _) in &overrides {
            if !override_cols.contains(k) {
                override_cols.push(k.clone());
            }
        }
        let metrics: Vec<(String, String)> = stats_file::metrics(v)
            .into_iter()
            .filter(|(k, _)| patterns.iter().any(|p| glob_match(p, k)))
            .map(|(k, x)| (k, show_value(&x)))
            .collect();
        for (k, _) in &metrics {
            if !metric_cols.contains(k) {
                metric_cols.push(k.clone());
            }
        }
        rows.push((path, v, overrides, metrics));
    }
    if metric_cols.is_empty() {
        anyhow::bail!(
            "no metric matches {} (metrics look like totals.ipc, kernels.0.cycles)",
            patterns.join(", ")
        );
    }
    let mut out = String::new();
    let header: Vec<String> = ["file", "config", "input"]
        .iter()
        .map(|s| s.to_string())
        .chain(override_cols.iter().cloned())
        .chain(metric_cols.iter().cloned())
        .collect();
    out.push_str(
        &header
            .iter()
            .map(|h| field(h))
            .collect::<Vec<_>>()
            .join(","),
    );
    out.push('\n');
    for (path, v, overrides, metrics) in rows {
        let find = |m: &[(String, String)], k: &str| {
            m.iter()
                .find(|(x, _)| x == k)
                .map(|(_, y)| y.clone())
                .unwrap_or_default()
        };
        let mut cells = vec![
            path.display().to_string(),
            v.get("config").map(show_value).unwrap_or_default(),
            input_of(v),
        ];
        cells.extend(override_cols.iter().map(|k| find(&overrides, k)));
        cells.extend(metric_cols.iter().map(|k| find(&metrics, k)));
        out.push_str(&cells.iter().map(|c| field(c)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_become_columns_and_missing_cells_are_empty() {
        let a = json!({"stats_version": 6, "config": "a100",
            "provenance": {"overrides": {"core.scheduler": "gto"}, "input": {"generator": "gemm m=64"}},
            "totals": {"cycles": 10, "ipc": 1.5}});
        let b = json!({"stats_version": 6, "config": "a100",
            "provenance": {"overrides": {"l2.size_bytes": "1,2"}, "input": {"trace": "t.tst"}},
            "totals": {"cycles": 12}});
        let t = table(
            &[(PathBuf::from("a.json"), a), (PathBuf::from("b.json"), b)],
            &["totals.*".into()],
        )
        .unwrap();
        assert_eq!(
            t,
            "file,config,input,core.scheduler,l2.size_bytes,totals.cycles,totals.ipc\n\
             a.json,a100,gemm m=64,gto,,10,1.5\n\
             b.json,a100,t.tst,,\"1,2\",12,\n"
        );
    }
}
