//! `tessera sweep`: the cross product of config values, run in parallel, a stats file per
//! point and the collected table.

use anyhow::{Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tessera_partitions::config::GpuConfig;

use crate::jobs::{self, Job};
use crate::outputs;

#[derive(Args)]
pub struct SweepArgs {
    /// The configuration every point starts from (its --set overrides shared by every
    /// point), and the trace or workload.
    #[command(flatten)]
    input: crate::run_cmd::SimInput,
    /// A config key and its values, `section.key=v1,v2,...` (repeatable: the points are
    /// the cross product, the first --vary outermost).
    #[arg(long = "vary", required = true, value_name = "KEY=V1,V2,...", value_parser = parse_vary)]
    vary: Vec<(String, Vec<String>)>,
    /// The output directory (created; must be new or empty): a stats file per point,
    /// `table.csv`, and the logs of failed points.
    #[arg(short, long, value_name = "DIR")]
    out: PathBuf,
    /// Points run at once (default: the cores available).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Worker threads of each point's run.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Time limit of each point, in seconds.
    #[arg(long, value_name = "S", default_value_t = 3600)]
    timeout: u64,
}

fn parse_vary(arg: &str) -> Result<(String, Vec<String>), String> {
    let (k, vs) = arg
        .split_once('=')
        .ok_or_else(|| "expected KEY=V1,V2,..., e.g. l2.size_bytes=2097152,4194304".to_string())?;
    let k = k.trim();
    if k.is_empty() {
        return Err("the key is empty".into());
    }
    let values: Vec<String> = vs.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        return Err(format!("{k}: an empty value in {vs:?}"));
    }
    Ok((k.to_string(), values))
}

/// The points: each a list of (key, value), the first key outermost.
fn cross(vary: &[(String, Vec<String>)]) -> Vec<Vec<(String, String)>> {
    let mut points = vec![Vec::new()];
    for (k, values) in vary {
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((k.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    points
}

/// A point's file name: its number and values, in characters safe in any file system.
fn point_name(i: usize, point: &[(String, String)]) -> String {
    let mut s = format!("p{i:03}");
    for (k, v) in point {
        s.push('_');
        s.push_str(k);
        s.push('=');
        s.push_str(v);
    }
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._=-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

pub fn run(a: SweepArgs) -> Result<()> {
    for (i, (k, _)) in a.vary.iter().enumerate() {
        if a.vary[..i].iter().any(|(x, _)| x == k) {
            anyhow::bail!("--vary {k} is given twice: give every value in one --vary");
        }
        if a.input.set.iter().any(|(x, _)| x == k) {
            anyhow::bail!("{k} is both --set and --vary: give it in one place");
        }
    }
    let points = cross(&a.vary);
    // Every point's configuration is loaded here first: a bad key or value is reported
    // before anything runs.
    for p in &points {
        let mut set = a.input.set.clone();
        set.extend(p.iter().cloned());
        GpuConfig::load(&a.input.config, &set).with_context(|| {
            let desc: Vec<String> = p.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("sweep point {}", desc.join(" "))
        })?;
    }
    if let Some(t) = &a.input.trace {
        if !t.is_file() {
            anyhow::bail!("{}: no such trace file", t.display());
        }
    }
    prepare_out_dir(&a.out)?;
    let logs = a.out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("{}: cannot create", logs.display()))?;

    let names: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, p)| point_name(i, p))
        .collect();
    let jobs_list: Vec<Job> = points
        .iter()
        .zip(&names)
        .map(|(p, name)| {
            let mut args: Vec<OsString> = vec![
                "run".into(),
                "--config".into(),
                a.input.config.clone().into(),
            ];
            match (&a.input.trace, &a.input.workload) {
                (Some(t), _) => {
                    args.push("--trace".into());
                    args.push(t.clone().into());
                }
                (None, Some(w)) => {
                    args.push("--workload".into());
                    args.push(w.into());
                    for (k, v) in &a.input.params {
                        args.push("--param".into());
                        args.push(format!("{k}={v}").into());
                    }
                }
                (None, None) => {}
            }
            for (k, v) in a.input.set.iter().chain(p.iter()) {
                args.push("--set".into());
                args.push(format!("{k}={v}").into());
            }
            args.push("--threads".into());
            args.push(a.threads.to_string().into());
            args.push("--stats-out".into());
            args.push(a.out.join(format!("{name}.json")).into());
            Job {
                args,
                mpi_ranks: None,
                log: logs.join(format!("{name}.log")),
                timeout: Duration::from_secs(a.timeout),
            }
        })
        .collect();
    let total = jobs_list.len();
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let results = jobs::run_all(
        &jobs_list,
        a.jobs.unwrap_or_else(jobs::default_jobs),
        &|i, r| {
            let n = finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            eprintln!(
                "[{n}/{total}] {}: {} in {:.1} s",
                names[i],
                if r.ok { "done" } else { "FAILED" },
                r.secs
            );
        },
    );
    let mut files = Vec::new();
    let mut failed = Vec::new();
    for ((r, name), job) in results.iter().zip(&names).zip(&jobs_list) {
        if r.ok {
            let _ = std::fs::remove_file(&job.log);
            let path = a.out.join(format!("{name}.json"));
            files.push((path.clone(), crate::stats_file::read(&path)?));
        } else {
            failed.push(format!("{name}: {}", r.failure));
        }
    }
    let _ = std::fs::remove_dir(&logs); // only when empty: the logs of failed points stay
    if !files.is_empty() {
        let table = crate::collect_cmd::table(&files, &["totals.*".to_string()])?;
        let path = a.out.join("table.csv");
        outputs::write_atomic(&path, table.as_bytes())?;
        outln!(
            "{}: {} point(s) of {total}, stats in {}",
            path.display(),
            files.len(),
            a.out.display()
        );
        for (p, v) in &files {
            let t = v.get("totals");
            let get = |k: &str| t.and_then(|t| t.get(k));
            outln!(
                "  {}: {} cycles, IPC {:.2}",
                p.file_stem()
                    .map(|s| s.to_string_lossy())
                    .unwrap_or_default(),
                get("gpu_tot_sim_cycle")
                    .map(crate::stats_file::show_value)
                    .unwrap_or_default(),
                get("ipc")
                    .and_then(serde_json::Value::as_f64)
                    .unwrap_or(0.0)
            );
        }
    }
    if !failed.is_empty() {
        for f in &failed {
            eprintln!("failed: {f}");
        }
        anyhow::bail!(
            "{} of {total} sweep point(s) failed (their logs are in {})",
            failed.len(),
            logs.display()
        );
    }
    Ok(())
}

/// Creates `dir`, or accepts it empty: a sweep never mixes its files with another's.
fn prepare_out_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))?;
        if entries.next().is_some() {
            anyhow::bail!(
                "{}: not empty: a sweep writes into a new or empty directory",
                dir.display()
            );
        }
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cross_product_has_the_first_key_outermost() {
        let v = vec![
            ("a".to_string(), vec!["1".to_string(), "2".to_string()]),
            ("b".to_string(), vec!["x".into(), "y".into(), "z".into()]),
        ];
        let p = cross(&v);
        assert_eq!(p.len(), 6);
        assert_eq!(p[0], [("a".into(), "1".into()), ("b".into(), "x".into())]);
        assert_eq!(p[3], [("a".into(), "2".into()), ("b".into(), "x".into())]);
        assert_eq!(point_name(3, &p[3]), "p003_a=2_b=x");
        assert_eq!(
            point_name(0, &[("k".into(), "a/b c".into())]),
            "p000_k=a-b-c"
        );
    }

    #[test]
    fn vary_arguments_are_checked() {
        assert!(parse_vary("l2.size_bytes=1,2").is_ok());
        assert!(parse_vary("l2.size_bytes").is_err());
        assert!(parse_vary("l2.size_bytes=1,,2").is_err());
        assert!(parse_vary("=1").is_err());
    }
}
