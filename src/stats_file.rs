//! Reading stats files back: their metrics as flat dotted paths, tolerances, and the
//! differences between two files (what `diff`, `collect` and `corpus check` share).

use anyhow::{Context, Result};
use serde_json::Value;
use std::path::Path;
use tessera_partitions::stats::STATS_VERSION;

/// Top-level keys that describe a run rather than hold its simulated results, and the
/// time series (`--sample-every`): a breakdown over time of the counters that are metrics
/// already, thousands of values that would swamp a diff or a table (read it from the JSON).
const NOT_METRICS: [&str; 5] = ["stats_version", "config", "provenance", "run", "timeseries"];

/// Parses a stats file: a JSON object with a `stats_version`. Errors name the file.
pub fn read(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    parse(&text).with_context(|| path.display().to_string())
}

/// As [`read`], from text.
pub fn parse(text: &str) -> Result<Value> {
    let v: Value = serde_json::from_str(text).context("not JSON")?;
    if version(&v).is_none() {
        anyhow::bail!("not a tessera stats file (no `stats_version`)");
    }
    Ok(v)
}

/// The file's `stats_version`.
pub fn version(v: &Value) -> Option<u64> {
    v.get("stats_version")?.as_u64()
}

/// Fails unless `v` was written in this tessera's stats layout (older layouts name and
/// place metrics differently, so comparing them would report moved keys as changes).
pub fn check_current(v: &Value, what: &str) -> Result<()> {
    match version(v) {
        Some(n) if n == u64::from(STATS_VERSION) => Ok(()),
        Some(n) => anyhow::bail!(
            "{what} is stats_version {n}, this tessera writes {STATS_VERSION}: compare files of \
             one version (record it again with this tessera)"
        ),
        None => anyhow::bail!("{what} has no stats_version"),
    }
}

/// Every leaf of `v` under `prefix`, as (dotted path, value): object keys and array
/// indices joined by `.` (`kernels.0.cycles`, `chiplets.1.memory.l2_hits`).
pub fn flatten(v: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                flatten(x, &join(k), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(x, &join(&i.to_string()), out);
            }
        }
        leaf => out.push((prefix.to_string(), leaf.clone())),
    }
}

/// The value at a dotted path (`totals.ipc`, `chiplets.1.memory.l2_hits`), array elements
/// by index.
pub fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |x, k| match x {
        Value::Object(m) => m.get(k),
        Value::Array(a) => a.get(k.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The simulated results of a stats file as flat (metric, value) pairs, in file order.
pub fn metrics(v: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    if let Some(m) = v.as_object() {
        for (k, x) in m {
            if !NOT_METRICS.contains(&k.as_str()) {
                flatten(x, k, &mut out);
            }
        }
    }
    out
}

/// `*` matches any run of characters (dots included): `kernels.*.cycles`, `totals.*`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            pi += 1;
            mark = ti;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Relative tolerances by metric pattern, in percent; the last matching pattern wins; a
/// metric no pattern matches must be equal.
#[derive(Clone, Debug, Default)]
pub struct Tolerances(pub Vec<(String, f64)>);

impl Tolerances {
    /// The tolerance of `metric` in percent; 0 (exact) when no pattern matches.
    pub fn of(&self, metric: &str) -> f64 {
        self.0
            .iter()
            .rev()
            .find(|(p, _)| glob_match(p, metric))
            .map_or(0.0, |(_, t)| *t)
    }

    /// Parses `metric=pct` (`totals.ipc=0.5`, `kernels.*.cycles=2`).
    pub fn parse_arg(arg: &str) -> Result<(String, f64)> {
        let (m, p) = arg
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--tolerance {arg}: expected METRIC=PERCENT"))?;
        let pct: f64 = p.trim().trim_end_matches('%').parse().map_err(|_| {
            anyhow::anyhow!("--tolerance {arg}: {p:?} is not a percentage (e.g. 0.5)")
        })?;
        if !(pct.is_finite() && pct >= 0.0) {
            anyhow::bail!("--tolerance {arg}: the percentage must be 0 or more");
        }
        Ok((m.trim().to_string(), pct))
    }
}

/// One metric that differs between two files.
#[derive(Clone, Debug)]
pub struct Delta {
    pub metric: String,
    /// `None` where the metric is missing from that side.
    pub a: Option<Value>,
    pub b: Option<Value>,
    /// The tolerance applied, in percent (0: exact).
    pub tolerance: f64,
    /// Beyond the tolerance (missing on one side, not a number, or too far apart).
    pub beyond: bool,
}

impl Delta {
    /// `b - a` and its size relative to `a` in percent, for numbers on both sides.
    pub fn change(&self) -> Option<(String, Option<f64>)> {
        let (a, b) = (self.a.as_ref()?, self.b.as_ref()?);
        let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) else {
            return None;
        };
        let abs = match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
            (Some(i), Some(j), _, _) => format!("{:+}", i128::from(j) - i128::from(i)),
            (_, _, Some(i), Some(j)) => format!("{:+}", i128::from(j) - i128::from(i)),
            _ => format!("{:+.6}", y - x),
        };
        let rel = (x != 0.0).then(|| 100.0 * (y - x) / x.abs());
        Some((abs, rel))
    }

    /// One line: `metric: a -> b (+delta, +pct%)`.
    pub fn describe(&self) -> String {
        let show = |v: &Option<Value>| v.as_ref().map_or("(missing)".to_string(), show_value);
        let change = match self.change() {
            Some((abs, Some(rel))) => format!(" ({abs}, {rel:+.3}%)"),
            Some((abs, None)) => format!(" ({abs})"),
            None => String::new(),
        };
        let tol = if self.tolerance > 0.0 {
            format!(", tolerance {}%", self.tolerance)
        } else {
            String::new()
        };
        format!(
            "{}: {} -> {}{change}{tol}",
            self.metric,
            show(&self.a),
            show(&self.b)
        )
    }
}

/// A value as one would write it in a table (strings without quotes).
pub fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn within(a: &Value, b: &Value, pct: f64) -> bool {
    if a == b {
        return true;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if pct > 0.0 => (y - x).abs() <= pct / 100.0 * x.abs(),
        _ => false,
    }
}

/// Every metric whose values differ between `a` (the reference) and `b`, in `a`'s order
/// then `b`'s extra metrics.
pub fn compare(a: &Value, b: &Value, tol: &Tolerances) -> Vec<Delta> {
    let ma = metrics(a);
    let mb = metrics(b);
    let index_b: std::collections::HashMap<&str, &Value> =
        mb.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let index_a: std::collections::HashSet<&str> = ma.iter().map(|(k, _)| k.as_str()).collect();
    let mut out = Vec::new();
    for (k, va) in &ma {
        let vb = index_b.get(k.as_str()).copied();
        if vb == Some(va) {
            continue;
        }
        let t = tol.of(k);
        out.push(Delta {
            metric: k.clone(),
            a: Some(va.clone()),
            b: vb.cloned(),
            tolerance: t,
            beyond: vb.is_none_or(|vb| !within(va, vb, t)),
        });
    }
    for (k, vb) in &mb {
        if !index_a.contains(k.as_str()) {
            out.push(Delta {
                metric: k.clone(),
                a: None,
                b: Some(vb.clone()),
                tolerance: tol.of(k),
                beyond: true,
            });
        }
    }
    out
}

/// One difference in what two runs simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigDiff {
    /// A config key (`core.scheduler`), or `input.<field>`, or `config file`.
    pub key: String,
    pub a: Option<String>,
    pub b: Option<String>,
    /// Set with `--set` in either run.
    pub overridden: bool,
}

impl ConfigDiff {
    pub fn describe(&self) -> String {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        format!(
            "{}: {} -> {}{}",
            self.key,
            show(&self.a),
            show(&self.b),
            if self.overridden { " (overridden)" } else { "" }
        )
    }
}

fn flat_strings(v: Option<&Value>) -> Vec<(String, String)> {
    let mut f = Vec::new();
    if let Some(v) = v {
        flatten(v, "", &mut f);
    }
    f.into_iter().map(|(k, v)| (k, show_value(&v))).collect()
}

fn diff_maps(a: &[(String, String)], b: &[(String, String)], prefix: &str) -> Vec<ConfigDiff> {
    let mut keys: Vec<&str> = a.iter().map(|(k, _)| k.as_str()).collect();
    for (k, _) in b {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    let get =
        |m: &[(String, String)], k: &str| m.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    keys.into_iter()
        .filter_map(|k| {
            let (x, y) = (get(a, k), get(b, k));
            (x != y).then(|| ConfigDiff {
                key: format!("{prefix}{k}"),
                a: x,
                b: y,
                overridden: false,
            })
        })
        .collect()
}

/// What differs in what `a` and `b` simulated: effective configuration keys (the keys
/// overridden in either run first, in the order given), then the input, then the config
/// file's name. Files without provenance compare as having none.
pub fn config_differences(a: &Value, b: &Value) -> Vec<ConfigDiff> {
    let prov = |v: &Value, k: &str| v.get("provenance").and_then(|p| p.get(k)).cloned();
    let overrides = |v: &Value| flat_overrides(prov(v, "overrides").as_ref());
    let (oa, ob) = (overrides(a), overrides(b));
    let mut eff = diff_maps(
        &flat_strings(prov(a, "config_effective").as_ref()),
        &flat_strings(prov(b, "config_effective").as_ref()),
        "",
    );
    let mut order: Vec<String> = Vec::new();
    for (k, _) in oa.iter().chain(ob.iter()) {
        if !order.contains(k) {
            order.push(k.clone());
        }
    }
    for d in &mut eff {
        d.overridden = order.contains(&d.key);
    }
    // Overridden keys first, in the order they were given; then the rest in file order.
    eff.sort_by_key(|d| order.iter().position(|k| *k == d.key).unwrap_or(usize::MAX));
    // An override that changes nothing in the effective config (the same value as the
    // file's) still differs as an override.
    let mut out = Vec::new();
    for k in &order {
        if !eff.iter().any(|d| &d.key == k) {
            let get =
                |m: &[(String, String)]| m.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
            let (x, y) = (get(&oa), get(&ob));
            if x != y {
                out.push(ConfigDiff {
                    key: format!("--set {k}"),
                    a: x,
                    b: y,
                    overridden: true,
                });
            }
        }
    }
    let mut all = eff;
    all.extend(out);
    let input = |v: &Value| flat_strings(prov(v, "input").as_ref());
    all.extend(diff_maps(&input(a), &input(b), "input."));
    let file = |v: &Value| {
        prov(v, "config_file")
            .map(|x| vec![(String::new(), show_value(&x))])
            .unwrap_or_default()
    };
    all.extend(
        diff_maps(&file(a), &file(b), "config file")
            .into_iter()
            .map(|mut d| {
                d.key = "config file".into();
                d
            }),
    );
    all
}

fn flat_overrides(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, x)| (k.clone(), show_value(x))).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lookup_follows_dotted_paths() {
        let v = json!({"totals": {"ipc": 1.5}, "chiplets": [{"id": 0}, {"id": 1}]});
        assert_eq!(lookup(&v, "totals.ipc"), Some(&json!(1.5)));
        assert_eq!(lookup(&v, "chiplets.1.id"), Some(&json!(1)));
        assert_eq!(lookup(&v, "chiplets.2.id"), None);
        assert_eq!(lookup(&v, "chiplets.x"), None);
        assert_eq!(lookup(&v, "totals.ipc.more"), None);
    }

    #[test]
    fn globs_match_dotted_paths() {
        assert!(glob_match("totals.ipc", "totals.ipc"));
        assert!(!glob_match("totals.ipc", "totals.ipc2"));
        assert!(glob_match("kernels.*.cycles", "kernels.12.cycles"));
        assert!(glob_match("*", "anything.at.all"));
        assert!(glob_match("totals.*", "totals.stalls.issued"));
        assert!(!glob_match("kernels.*.cycles", "kernels.1.warp_insts"));
        assert!(glob_match("*cycle*", "totals.gpu_tot_sim_cycle"));
    }

    #[test]
    fn tolerances_are_relative_and_the_last_pattern_wins() {
        let t = Tolerances(vec![("totals.*".into(), 1.0), ("totals.ipc".into(), 5.0)]);
        assert_eq!(t.of("totals.ipc"), 5.0);
        assert_eq!(t.of("totals.cycles"), 1.0);
        assert_eq!(t.of("kernels.0.cycles"), 0.0);
        let a = json!({"stats_version": 6, "totals": {"ipc": 1.0, "cycles": 1000, "x": 5}});
        let b = json!({"stats_version": 6, "totals": {"ipc": 1.04, "cycles": 1011, "x": 5}});
        let d = compare(&a, &b, &t);
        assert_eq!(d.len(), 2);
        assert!(!d[0].beyond, "{d:?}"); // ipc +4% within 5%
        assert!(d[1].beyond, "{d:?}"); // cycles +1.1% beyond 1%
        assert_eq!(
            d[1].describe(),
            "totals.cycles: 1000 -> 1011 (+11, +1.100%), tolerance 1%"
        );
        assert!(Tolerances::parse_arg("totals.ipc=x").is_err());
        assert!(Tolerances::parse_arg("totals.ipc").is_err());
        assert_eq!(
            Tolerances::parse_arg("totals.ipc=0.5%").unwrap(),
            ("totals.ipc".to_string(), 0.5)
        );
    }

    #[test]
    fn missing_metrics_are_differences() {
        let a = json!({"stats_version": 6, "kernels": [{"cycles": 1}]});
        let b = json!({"stats_version": 6, "kernels": [{"cycles": 1}, {"cycles": 2}]});
        let d = compare(&a, &b, &Tolerances::default());
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].metric, "kernels.1.cycles");
        assert!(d[0].beyond && d[0].a.is_none());
        // provenance and run are not metrics
        let c = json!({"stats_version": 6, "kernels": [{"cycles": 1}], "run": {"wall_s": 3}});
        assert!(compare(&a, &c, &Tolerances::default()).is_empty());
        // nor is the time series
        let t = json!({"stats_version": 6, "kernels": [{"cycles": 1}],
            "timeseries": {"end_ps": [1, 2]}});
        assert!(compare(&a, &t, &Tolerances::default()).is_empty());
    }

    #[test]
    fn overridden_keys_come_first() {
        let a = json!({"stats_version": 6, "provenance": {
            "overrides": {},
            "config_effective": {"name": "x", "core": {"sm_count": 4, "scheduler": "lrr"}},
            "input": {"workload": "gemm"}}});
        let b = json!({"stats_version": 6, "provenance": {
            "overrides": {"core.scheduler": "gto"},
            "config_effective": {"name": "y", "core": {"sm_count": 4, "scheduler": "gto"}},
            "input": {"workload": "gemm"}}});
        let d = config_differences(&a, &b);
        assert_eq!(d[0].key, "core.scheduler");
        assert!(d[0].overridden);
        assert_eq!(d[1].key, "name");
        assert_eq!(d.len(), 2);
    }
}
