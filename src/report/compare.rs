//! Several runs: metrics against the varied parameters (the `--set`/`--vary` overrides
//! that differ between the files, as `collect` makes columns of them), and for two runs a
//! side-by-side comparison (configuration differences as `diff` finds them, metrics with
//! both values and their ratio).

use anyhow::Result;
use serde_json::Value;
use std::path::PathBuf;

use super::chart::{Categorical, Grouped};
use super::{num, pct, show, Page};
use crate::{collect_cmd, stats_file};

/// A metric of a run: its name, axis description and how to get it.
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub get: fn(&Value) -> Option<f64>,
}

/// The metrics plotted against parameters and compared side by side.
pub const METRICS: [Metric; 6] = [
    Metric {
        name: "total cycles",
        unit: "core cycles",
        get: |v| num(v, "totals.gpu_tot_sim_cycle"),
    },
    Metric {
        name: "IPC",
        unit: "thread instructions per cycle",
        get: |v| num(v, "totals.ipc"),
    },
    Metric {
        name: "L2 hit rate",
        unit: "%",
        get: |v| pct(num(v, "totals.l2_hits"), num(v, "totals.l2_accesses")),
    },
    Metric {
        name: "L1D hit rate",
        unit: "%",
        get: |v| pct(num(v, "totals.l1d_hits"), num(v, "totals.l1d_accesses")),
    },
    Metric {
        name: "DRAM bytes",
        unit: "bytes",
        get: |v| num(v, "totals.dram_bytes"),
    },
    Metric {
        name: "issue stalls",
        unit: "% of issue slots not issued",
        get: |v| {
            let slots = num(v, "totals.stalls.slots");
            let issued = num(v, "totals.stalls.issued");
            pct(Some(slots? - issued?), slots)
        },
    },
];

/// The override keys whose values differ between files (a key some files lack differs),
/// in order of first appearance.
pub fn varied(overrides: &[Vec<(String, String)>]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for o in overrides {
        for (k, _) in o {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let get =
        |o: &[(String, String)], k: &str| o.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    keys.into_iter()
        .filter(|k| {
            let first = overrides.first().and_then(|o| get(o, k));
            overrides.iter().any(|o| get(o, k) != first)
        })
        .collect()
}

/// Distinct values in order of first appearance, sorted numerically when all are numbers.
fn distinct(values: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    let nums: Option<Vec<f64>> = out.iter().map(|v| v.parse::<f64>().ok()).collect();
    if let Some(n) = nums {
        let mut paired: Vec<(f64, String)> = n.into_iter().zip(out).collect();
        paired.sort_by(|a, b| a.0.total_cmp(&b.0));
        out = paired.into_iter().map(|(_, s)| s).collect();
    }
    out
}

fn stem(p: &std::path::Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Metrics against the varied parameters: the first varied key on the x axis, a series
/// per combination of the others; a table of every run.
pub fn sweep(p: &mut Page, files: &[(PathBuf, Value)]) -> Result<()> {
    let overrides: Vec<Vec<(String, String)>> = files
        .iter()
        .map(|(_, v)| collect_cmd::overrides(v))
        .collect();
    let keys = varied(&overrides);
    let get = |o: &[(String, String)], k: &str| {
        o.iter()
            .find(|(x, _)| x == k)
            .map_or_else(|| "(default)".to_string(), |(_, v)| v.clone())
    };
    p.h2(if keys.is_empty() {
        "Runs compared".to_string()
    } else {
        format!("Metrics against {}", keys.join(", "))
    }
    .as_str());
    // x: the first varied key's value, else the file; series: the other keys' values.
    let (x_desc, xs): (String, Vec<String>) = match keys.first() {
        Some(k) => (k.clone(), overrides.iter().map(|o| get(o, k)).collect()),
        None => (
            "run".to_string(),
            files.iter().map(|(f, _)| stem(f)).collect(),
        ),
    };
    let rest = keys.get(1..).unwrap_or(&[]);
    let series_of: Vec<String> = overrides
        .iter()
        .map(|o| {
            rest.iter()
                .map(|k| format!("{k}={}", get(o, k)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let cats = distinct(&xs);
    let mut names: Vec<String> = Vec::new();
    for s in &series_of {
        if !names.contains(s) {
            names.push(s.clone());
        }
    }
    if keys.is_empty() {
        p.para("No --set or --vary override differs between these runs: one point per file.");
    } else {
        p.para(&format!(
            "Varied: {}. {} run(s).",
            keys.join(", "),
            files.len()
        ));
    }
    for m in &METRICS {
        let series: Vec<(String, Vec<Option<f64>>)> = names
            .iter()
            .map(|name| {
                let values = cats
                    .iter()
                    .map(|c| {
                        files
                            .iter()
                            .zip(xs.iter().zip(&series_of))
                            .find(|(_, (x, s))| *x == c && *s == name)
                            .and_then(|((_, v), _)| (m.get)(v))
                    })
                    .collect();
                let label = if name.is_empty() {
                    m.name.to_string()
                } else {
                    name.clone()
                };
                (label, values)
            })
            .collect();
        if series.iter().all(|(_, v)| v.iter().all(Option::is_none)) {
            continue;
        }
        let title = format!("{} vs {x_desc}", m.name);
        let y = format!("{} ({})", m.name, m.unit);
        let svg = Categorical {
            title: &title,
            x_desc: &x_desc,
            y_desc: &y,
            categories: cats.clone(),
            series,
        }
        .draw()?;
        p.chart(&svg);
    }
    let mut header = vec!["file".to_string()];
    header.extend(keys.iter().cloned());
    header.extend(METRICS.iter().map(|m| format!("{} ({})", m.name, m.unit)));
    let rows: Vec<Vec<String>> = files
        .iter()
        .zip(&overrides)
        .map(|((f, v), o)| {
            let mut r = vec![stem(f)];
            r.extend(keys.iter().map(|k| get(o, k)));
            r.extend(
                METRICS
                    .iter()
                    .map(|m| (m.get)(v).map(show).unwrap_or_default()),
            );
            r
        })
        .collect();
    p.table(&header, &rows);
    Ok(())
}

/// Two runs side by side: what differs in what they simulated, the metrics with both
/// values and their ratio, and paired bars relative to the first.
pub fn pair(p: &mut Page, (pa, a): (&PathBuf, &Value), (pb, b): (&PathBuf, &Value)) -> Result<()> {
    let (na, nb) = (stem(pa), stem(pb));
    p.h2(&format!("Side by side: A = {na}, B = {nb}"));
    let config = stats_file::config_differences(a, b);
    if config.is_empty() {
        p.para("Configuration and input: the same.");
    } else {
        let rows: Vec<Vec<String>> = config
            .iter()
            .map(|d| {
                let s = |x: &Option<String>| x.clone().unwrap_or_else(|| "(none)".into());
                vec![
                    d.key.clone(),
                    s(&d.a),
                    s(&d.b),
                    if d.overridden { "yes" } else { "" }.to_string(),
                ]
            })
            .collect();
        p.table(
            &[
                "configuration".into(),
                "A".into(),
                "B".into(),
                "overridden".into(),
            ],
            &rows,
        );
    }
    if stats_file::version(a) != stats_file::version(b) {
        p.raw(
            "<p class=\"note\">The files have different stats versions: metrics may have \
             moved between them.</p>\n",
        );
    }
    // The derived metrics, then every number under `totals`.
    let mut rows: Vec<(String, Option<f64>, Option<f64>)> = METRICS
        .iter()
        .map(|m| (format!("{} ({})", m.name, m.unit), (m.get)(a), (m.get)(b)))
        .collect();
    let mut seen: Vec<String> = Vec::new();
    for (k, x) in stats_file::metrics(a)
        .into_iter()
        .chain(stats_file::metrics(b))
    {
        if k.starts_with("totals.") && x.is_number() && !seen.contains(&k) {
            rows.push((k.clone(), num(a, &k), num(b, &k)));
            seen.push(k);
        }
    }
    let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if x != 0.0 => Some(y / x),
        _ => None,
    };
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(k, x, y)| {
            vec![
                k.clone(),
                x.map(show).unwrap_or_default(),
                y.map(show).unwrap_or_default(),
                ratio(*x, *y)
                    .map(|r| format!("{r:.3}x"))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let bars: Vec<(String, f64)> = METRICS
        .iter()
        .filter_map(|m| {
            let r = ratio((m.get)(a), (m.get)(b))?;
            Some((m.name.to_string(), r * 100.0))
        })
        .collect();
    if !bars.is_empty() {
        let svg = Grouped {
            title: "B relative to A",
            x_desc: "value relative to A (A = 100%)",
            y_desc: "metric",
            categories: bars.iter().map(|(n, _)| n.clone()).collect(),
            series: vec![
                (format!("A: {na}"), vec![100.0; bars.len()]),
                (format!("B: {nb}"), bars.iter().map(|(_, r)| *r).collect()),
            ],
        }
        .draw()?;
        p.chart(&svg);
    }
    p.table(
        &["metric".into(), "A".into(), "B".into(), "B / A".into()],
        &table,
    );
    Ok(())
}
