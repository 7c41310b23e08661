//! The sections of one run: summary, kernel timeline, stalls, memory hierarchy, DRAM
//! traffic, links, (when the file has them) time series, and the engine's side of the
//! run (each worker's busy and waiting time, the load imbalance). Every key may be missing: a
//! section without its data says so or is left out.

use anyhow::Result;
use serde_json::Value;
use std::path::Path;

use super::chart::{Gantt, Lines, Series, Stacked};
use super::{num, pct, show, Page};
use crate::stats_file::show_value;

/// Every section of the run `v` read from `path`.
pub fn sections(p: &mut Page, path: &Path, v: &Value) -> Result<()> {
    summary(p, path, v);
    timeline(p, v)?;
    stalls(p, v)?;
    memory(p, v)?;
    dram(p, v)?;
    links(p, v)?;
    timeseries(p, v)?;
    engine(p, v)?;
    Ok(())
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `chiplet 3`, and its GPU when that is not GPU 0 (`chiplet 5 (GPU 1)`).
fn chiplet_name(c: &Value, i: usize) -> String {
    let id = c.get("id").and_then(Value::as_u64).unwrap_or(i as u64);
    match num(c, "gpu").filter(|g| *g > 0.0) {
        Some(g) => format!("chiplet {id} (GPU {})", show(g)),
        None => format!("chiplet {id}"),
    }
}

fn summary(p: &mut Page, path: &Path, v: &Value) {
    p.h2(&format!("Run: {}", path.display()));
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |k: &str, x: String| {
        if !x.is_empty() {
            rows.push(vec![k.to_string(), x]);
        }
    };
    row(
        "config",
        v.get("config").map(show_value).unwrap_or_default(),
    );
    row("input", crate::collect_cmd::input_of(v));
    for (k, x) in crate::collect_cmd::overrides(v) {
        row(&format!("--set {k}"), x);
    }
    for (k, label) in [
        ("totals.gpu_tot_sim_cycle", "cycles"),
        ("totals.sim_time_ps", "simulated time (ps)"),
        ("totals.warp_insts", "warp instructions"),
        ("totals.ipc", "IPC (thread instructions per cycle)"),
        ("totals.kernels", "kernels"),
        ("totals.ctas", "CTAs"),
    ] {
        row(label, num(v, k).map(show).unwrap_or_default());
    }
    row("chiplets", {
        let n = arr(v, "chiplets").len();
        if n > 0 {
            n.to_string()
        } else {
            String::new()
        }
    });
    if let Some(l) = v.get("run_limit") {
        row("run limit", l.to_string());
    }
    p.table(&["".into(), "value".into()], &rows);
}

/// Kernels over time, a row per GPU and stream (launch to completion) and, for a kernel
/// run on several chiplets, a row per chiplet (its slice, from its arrival at the local CP
/// to the last CTA's report); launches that overlap on one GPU (queued behind each other)
/// take extra rows.
fn timeline(p: &mut Page, v: &Value) -> Result<()> {
    p.h3("Kernel timeline");
    // (lane, start us, end us, name)
    let mut ks: Vec<(String, f64, f64, String)> = Vec::new();
    for k in arr(v, "kernels") {
        let (Some(s), Some(e)) = (num(k, "start_ps"), num(k, "end_ps")) else {
            continue;
        };
        let mut lane = format!("GPU {}", num(k, "gpu").map(show).unwrap_or("0".into()));
        if let Some(x) = k.get("stream") {
            lane.push_str(&format!(" stream {}", show_value(x)));
        }
        let name = k.get("name").map(show_value).unwrap_or_else(|| "?".into());
        // Each chiplet's slice on a row of its own, when the kernel ran on several.
        let slices = arr(k, "chiplets");
        if slices.len() > 1 {
            for c in slices {
                if let (Some(id), Some(cs), Some(ce)) =
                    (c.get("chiplet"), num(c, "start_ps"), num(c, "end_ps"))
                {
                    let l = format!("{lane} chiplet {}", show_value(id));
                    ks.push((l, cs / 1e6, ce / 1e6, name.clone()));
                }
            }
        }
        ks.push((lane, s / 1e6, e / 1e6, name));
    }
    if ks.is_empty() {
        p.para("No kernels with start and end times.");
        return Ok(());
    }
    let mut bases: Vec<String> = Vec::new();
    for k in &ks {
        if !bases.contains(&k.0) {
            bases.push(k.0.clone());
        }
    }
    bases.sort_by_key(|l| natural_key(l));
    let mut groups: Vec<String> = Vec::new();
    let mut lanes: Vec<String> = Vec::new();
    let mut bars = Vec::new();
    for base in &bases {
        let mut mine: Vec<&(String, f64, f64, String)> =
            ks.iter().filter(|k| &k.0 == base).collect();
        mine.sort_by(|a, b| a.1.total_cmp(&b.1));
        // Greedy rows: the first whose last launch has ended.
        let mut row_end: Vec<f64> = Vec::new();
        let first = lanes.len();
        for k in mine {
            let r = match row_end.iter().position(|&e| e <= k.1) {
                Some(r) => r,
                None => {
                    row_end.push(f64::NEG_INFINITY);
                    lanes.push(if row_end.len() == 1 {
                        base.clone()
                    } else {
                        format!("{base} #{}", row_end.len())
                    });
                    row_end.len() - 1
                }
            };
            row_end[r] = k.2;
            let gi = groups.iter().position(|g| *g == k.3).unwrap_or_else(|| {
                groups.push(k.3.clone());
                groups.len() - 1
            });
            bars.push((first + r, k.1, k.2, gi));
        }
    }
    let svg = Gantt {
        title: "Kernels over time",
        x_desc: "time (us)",
        y_desc: "GPU",
        lanes,
        bars,
        groups,
    }
    .draw()?;
    p.chart(&svg);
    p.raw(
        "<p class=\"note\">A bar runs from the launch's submission by the host (<code>start_ps</code>) \
         to its completion (<code>end_ps</code>); a chiplet's row shows its slice, from its \
         arrival at the chiplet's local CP to the report of its last CTA; launches queued \
         behind others on one GPU overlap them and take extra rows (#2, #3, ...).</p>\n",
    );
    Ok(())
}

/// `GPU 10` after `GPU 9`: digit runs compared as numbers.
pub(super) fn natural_key(s: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                out.push((
                    std::mem::take(&mut text),
                    digits.parse().unwrap_or(u64::MAX),
                ));
                digits.clear();
            }
            text.push(c);
        }
    }
    out.push((text, digits.parse().unwrap_or(0)));
    out
}

/// Scheduler issue slots: issued or why not, for the whole system and each chiplet.
fn stalls(p: &mut Page, v: &Value) -> Result<()> {
    p.h3("Where the issue slots went");
    let mut cats: Vec<(String, &Value)> = Vec::new();
    if let Some(s) = v.get("totals").and_then(|t| t.get("stalls")) {
        cats.push(("all chiplets".into(), s));
    }
    for (i, c) in arr(v, "chiplets").iter().enumerate() {
        if let Some(s) = c.get("stalls") {
            cats.push((chiplet_name(c, i), s));
        }
    }
    let mut kinds: Vec<String> = Vec::new();
    for (_, s) in &cats {
        for (k, x) in s.as_object().into_iter().flatten() {
            if k != "slots" && x.is_number() && !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
    }
    if cats.is_empty() || kinds.is_empty() {
        p.para("No stall counters in this file.");
        return Ok(());
    }
    let share = |s: &Value, k: &str| -> f64 {
        let part = num(s, k);
        match num(s, "slots") {
            Some(w) if w > 0.0 => pct(part, Some(w)).unwrap_or(0.0),
            _ => part.unwrap_or(0.0),
        }
    };
    let series = kinds
        .iter()
        .map(|k| (k.clone(), cats.iter().map(|(_, s)| share(s, k)).collect()))
        .collect();
    let svg = Stacked {
        title: "Stall breakdown (share of scheduler issue slots)",
        x_desc: "share of issue slots (%)",
        y_desc: "chiplet",
        categories: cats.iter().map(|(n, _)| n.clone()).collect(),
        series,
    }
    .draw()?;
    p.chart(&svg);
    let mut header = vec!["".to_string(), "slots".to_string()];
    header.extend(kinds.iter().cloned());
    let rows: Vec<Vec<String>> = cats
        .iter()
        .map(|(n, s)| {
            let mut r = vec![n.clone(), num(s, "slots").map(show).unwrap_or_default()];
            r.extend(
                kinds
                    .iter()
                    .map(|k| num(s, k).map(show).unwrap_or_default()),
            );
            r
        })
        .collect();
    p.table(&header, &rows);
    Ok(())
}

/// Where requests were served (sectors): L1D hits, L2 hits, LLC hits, the last level's
/// misses (to DRAM, or a peer GPU) for the whole system, each chiplet and the host's copies.
fn memory(p: &mut Page, v: &Value) -> Result<()> {
    p.h3("Memory hierarchy");
    let mut cats: Vec<(String, &Value)> = Vec::new();
    if let Some(t) = v.get("totals") {
        cats.push(("all chiplets".into(), t));
    }
    for (i, c) in arr(v, "chiplets").iter().enumerate() {
        if let Some(m) = c.get("memory") {
            cats.push((chiplet_name(c, i), m));
        }
    }
    if let Some(h) = v.get("totals").and_then(|t| t.get("host_memory")) {
        cats.push(("host copies".into(), h));
    }
    let served = |m: &Value| -> [f64; 4] {
        let g = |k: &str| num(m, k).unwrap_or(0.0);
        let dram = if g("llc_accesses") > 0.0 {
            g("llc_misses")
        } else {
            g("l2_misses")
        };
        [g("l1d_hits"), g("l2_hits"), g("llc_hits"), dram]
    };
    if cats.is_empty()
        || cats
            .iter()
            .all(|(_, m)| served(m).iter().all(|x| *x == 0.0))
    {
        p.para("No memory counters in this file.");
        return Ok(());
    }
    let names = ["L1D hits", "L2 hits", "LLC hits", "last-level misses"];
    let series = names
        .iter()
        .enumerate()
        .map(|(j, n)| {
            (
                n.to_string(),
                cats.iter().map(|(_, m)| served(m)[j]).collect(),
            )
        })
        .collect();
    let svg = Stacked {
        title: "Where requests were served",
        x_desc: "requests (sectors)",
        y_desc: "chiplet",
        categories: cats.iter().map(|(n, _)| n.clone()).collect(),
        series,
    }
    .draw()?;
    p.chart(&svg);
    let rate = |m: &Value, l: &str| {
        pct(
            num(m, &format!("{l}_hits")),
            num(m, &format!("{l}_accesses")),
        )
        .map(|x| format!("{x:.1}%"))
        .unwrap_or_default()
    };
    let header: Vec<String> = [
        "",
        "L1D accesses",
        "L1D hit rate",
        "L2 accesses",
        "L2 hit rate",
        "LLC accesses",
        "LLC hit rate",
        "DRAM bytes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = cats
        .iter()
        .map(|(n, m)| {
            let g = |k: &str| num(m, k).map(show).unwrap_or_default();
            let dram = num(m, "dram_bytes")
                .or_else(|| Some(num(m, "dram_read_bytes")? + num(m, "dram_write_bytes")?));
            vec![
                n.clone(),
                g("l1d_accesses"),
                rate(m, "l1d"),
                g("l2_accesses"),
                rate(m, "l2"),
                g("llc_accesses"),
                rate(m, "llc"),
                dram.map(show).unwrap_or_default(),
            ]
        })
        .collect();
    p.table(&header, &rows);
    Ok(())
}

/// DRAM traffic per chiplet (reads, writes) and the host's copies.
fn dram(p: &mut Page, v: &Value) -> Result<()> {
    p.h3("DRAM traffic");
    let mib = |x: Option<f64>| x.unwrap_or(0.0) / (1024.0 * 1024.0);
    let mut cats = Vec::new();
    let (mut reads, mut writes, mut host) = (Vec::new(), Vec::new(), Vec::new());
    for (i, c) in arr(v, "chiplets").iter().enumerate() {
        let Some(m) = c.get("memory") else { continue };
        cats.push(chiplet_name(c, i));
        match (num(m, "dram_read_bytes"), num(m, "dram_write_bytes")) {
            (None, None) => {
                reads.push(mib(num(m, "dram_bytes")));
                writes.push(0.0);
            }
            (r, w) => {
                reads.push(mib(r));
                writes.push(mib(w));
            }
        }
        host.push(0.0);
    }
    if let Some(h) = num(v, "totals.host_memory.dram_bytes") {
        cats.push("of which host copies".into());
        reads.push(0.0);
        writes.push(0.0);
        host.push(mib(Some(h)));
    }
    let total: f64 = reads.iter().chain(&writes).chain(&host).sum();
    if cats.is_empty() {
        p.para("No DRAM counters in this file.");
        return Ok(());
    }
    if total == 0.0 {
        p.para("No DRAM traffic in this run.");
        return Ok(());
    }
    let svg = Stacked {
        title: "DRAM traffic per chiplet",
        x_desc: "DRAM traffic (MiB)",
        y_desc: "chiplet",
        categories: cats,
        series: vec![
            ("reads".into(), reads),
            ("writes".into(), writes),
            ("host copies (all chiplets)".into(), host),
        ],
    }
    .draw()?;
    p.chart(&svg);
    Ok(())
}

fn link_name(l: &Value) -> String {
    let f = l.get("from").map(show_value).unwrap_or_else(|| "?".into());
    let t = l.get("to").map(show_value).unwrap_or_else(|| "?".into());
    format!("{f} → {t}")
}

/// Bytes and utilization of each link direction.
fn links(p: &mut Page, v: &Value) -> Result<()> {
    p.h3("Links");
    let links = arr(v, "links");
    if links.is_empty() {
        p.para("No links (one chiplet and one GPU).");
        return Ok(());
    }
    let cats: Vec<String> = links.iter().map(link_name).collect();
    let kib = |x: Option<f64>| x.unwrap_or(0.0) / 1024.0;
    let payload: Vec<f64> = links.iter().map(|l| kib(num(l, "bytes"))).collect();
    let overhead: Vec<f64> = links
        .iter()
        .map(|l| match (num(l, "wire_bytes"), num(l, "bytes")) {
            (Some(w), Some(b)) => kib(Some((w - b).max(0.0))),
            _ => 0.0,
        })
        .collect();
    let svg = Stacked {
        title: "Bytes per link",
        x_desc: "bytes on the wire (KiB)",
        y_desc: "link",
        categories: cats.clone(),
        series: vec![
            ("payload".into(), payload),
            ("packet overhead".into(), overhead),
        ],
    }
    .draw()?;
    p.chart(&svg);
    let time = num(v, "totals.sim_time_ps");
    let util: Vec<Option<f64>> = links.iter().map(|l| pct(num(l, "busy_ps"), time)).collect();
    if util.iter().any(Option::is_some) {
        let svg = Stacked {
            title: "Link utilization (busy time over the run)",
            x_desc: "utilization (% of simulated time busy)",
            y_desc: "link",
            categories: cats.clone(),
            series: vec![(
                "busy".into(),
                util.iter().map(|u| u.unwrap_or(0.0)).collect(),
            )],
        }
        .draw()?;
        p.chart(&svg);
    }
    let header: Vec<String> = [
        "link",
        "packets",
        "bytes",
        "wire bytes",
        "busy (ps)",
        "utilization",
        "queued (ps)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = links
        .iter()
        .zip(&cats)
        .zip(&util)
        .map(|((l, n), u)| {
            let g = |k: &str| num(l, k).map(show).unwrap_or_default();
            vec![
                n.clone(),
                g("packets"),
                g("bytes"),
                g("wire_bytes"),
                g("busy_ps"),
                u.map(|u| format!("{u:.2}%")).unwrap_or_default(),
                g("queued_ps"),
            ]
        })
        .collect();
    p.table(&header, &rows);
    Ok(())
}

/// The values of `key` in `o` as optional numbers (`null` or not a number: `None`).
fn series(o: &Value, key: &str) -> Option<Vec<Option<f64>>> {
    Some(o.get(key)?.as_array()?.iter().map(Value::as_f64).collect())
}

/// Time series (`timeseries`): IPC per chiplet, link utilization per link, DRAM bandwidth
/// per chiplet, L2 hit rate per chiplet, over time. Left out when the file has none.
fn timeseries(p: &mut Page, v: &Value) -> Result<()> {
    let Some(ts) = v.get("timeseries").filter(|t| t.is_object()) else {
        return Ok(());
    };
    p.h3("Over time");
    let interval_ps = num(ts, "interval_ps");
    let end_ps = series(ts, "end_ps");
    // The x of interval i: its end in microseconds, else its number.
    let (x_desc, xs): (&str, Box<dyn Fn(usize) -> f64>) = match (end_ps, interval_ps) {
        (Some(e), ip) => (
            "time (us, end of interval)",
            Box::new(move |i| match e.get(i).copied().flatten() {
                Some(x) => x / 1e6,
                None => ip.map_or(i as f64 + 1.0, |ip| (i as f64 + 1.0) * ip / 1e6),
            }),
        ),
        (None, Some(ip)) => (
            "time (us, end of interval)",
            Box::new(move |i| (i as f64 + 1.0) * ip / 1e6),
        ),
        (None, None) => ("interval", Box::new(|i| i as f64 + 1.0)),
    };
    if let Some(c) = num(ts, "interval_cycles") {
        p.para(&format!("Sampled every {} core cycles.", show(c)));
    }
    let points = |vals: Vec<Option<f64>>, scale: f64| -> Vec<(f64, Option<f64>)> {
        vals.into_iter()
            .enumerate()
            .map(|(i, y)| (xs(i), y.map(|y| y * scale)))
            .collect()
    };
    let chiplets = arr(ts, "chiplets");
    let cname = chiplet_name;
    let mut drawn = 0;
    let ipc: Vec<Series> = chiplets
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((cname(c, i), points(series(c, "ipc")?, 1.0))))
        .collect();
    if !ipc.is_empty() {
        let svg = Lines {
            title: "IPC per chiplet over time",
            x_desc,
            y_desc: "IPC (thread instructions per cycle)",
            series: ipc,
        }
        .draw()?;
        p.chart(&svg);
        drawn += 1;
    }
    let links: Vec<Series> = arr(ts, "links")
        .iter()
        .filter_map(|l| {
            let u = series(l, "utilization").or_else(|| {
                let ip = interval_ps.filter(|x| *x > 0.0)?;
                Some(
                    series(l, "busy_ps")?
                        .into_iter()
                        .map(|b| b.map(|b| b / ip))
                        .collect(),
                )
            })?;
            Some((link_name(l), points(u, 100.0)))
        })
        .collect();
    if !links.is_empty() {
        let svg = Lines {
            title: "Link utilization over time",
            x_desc,
            y_desc: "utilization (% of interval busy)",
            series: links,
        }
        .draw()?;
        p.chart(&svg);
        drawn += 1;
    }
    let dram: Vec<Series> = chiplets
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let gbps = series(c, "dram_gbps").or_else(|| {
                let ip = interval_ps.filter(|x| *x > 0.0)?;
                // bytes per ps = 1000 GB/s
                Some(
                    series(c, "dram_bytes")?
                        .into_iter()
                        .map(|b| b.map(|b| b / ip * 1000.0))
                        .collect(),
                )
            })?;
            Some((cname(c, i), points(gbps, 1.0)))
        })
        .collect();
    let any_dram = dram
        .iter()
        .any(|(_, s)| s.iter().any(|(_, y)| y.is_some_and(|y| y != 0.0)));
    if !dram.is_empty() && !any_dram {
        p.para("No DRAM traffic in any interval.");
    } else if !dram.is_empty() {
        let svg = Lines {
            title: "DRAM bandwidth per chiplet over time",
            x_desc,
            y_desc: "DRAM bandwidth (GB/s)",
            series: dram,
        }
        .draw()?;
        p.chart(&svg);
        drawn += 1;
    }
    let l2: Vec<Series> = chiplets
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((cname(c, i), points(series(c, "l2_hit_rate")?, 100.0))))
        .collect();
    if l2.iter().any(|(_, s)| s.iter().any(|(_, y)| y.is_some())) {
        let svg = Lines {
            title: "L2 hit rate per chiplet over time",
            x_desc,
            y_desc: "L2 hit rate (%)",
            series: l2,
        }
        .draw()?;
        p.chart(&svg);
        drawn += 1;
    }
    if drawn == 0 {
        p.para("The time series hold none of the series plotted here.");
    }
    Ok(())
}

/// The engine's side of the run (`run.engine`): each worker's busy and waiting host time,
/// how its busy time per window was spread, and the windows, messages and imbalance. Left
/// out for a file without it (older stats).
fn engine(p: &mut Page, v: &Value) -> Result<()> {
    let Some(e) = v.get("run").and_then(|r| r.get("engine")) else {
        return Ok(());
    };
    let workers = arr(e, "workers");
    p.h3("Engine: workers and windows");
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (k, label) in [
        ("windows", "windows (exchanges between workers)"),
        ("sub_windows", "local sub-windows of worker 0"),
        ("messages", "messages between partitions"),
        (
            "imbalance",
            "imbalance (busiest worker over the mean, per window)",
        ),
        ("critical_s", "critical path (s)"),
    ] {
        if let Some(x) = num(e, k) {
            rows.push(vec![label.to_string(), show(x)]);
        }
    }
    if let Some(w) = v.get("run").and_then(|r| r.get("windows")) {
        rows.push(vec!["windows kind".into(), show_value(w)]);
    }
    p.table(&["".into(), "value".into()], &rows);
    if workers.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = (0..workers.len()).map(|i| format!("worker {i}")).collect();
    let part = |k: &str| -> Vec<f64> { workers.iter().map(|w| num(w, k).unwrap_or(0.0)).collect() };
    let svg = Stacked {
        title: "Host time per worker",
        x_desc: "seconds",
        y_desc: "worker",
        categories: names.clone(),
        series: vec![
            ("busy".into(), part("busy_s")),
            ("waiting for the others".into(), part("wait_s")),
        ],
    }
    .draw()?;
    p.chart(&svg);
    // Busy time per window: the buckets any worker used, powers of two of nanoseconds.
    let hists: Vec<&[Value]> = workers.iter().map(|w| arr(w, "busy_hist")).collect();
    let used: Vec<usize> = (0..hists.iter().map(|h| h.len()).max().unwrap_or(0))
        .filter(|&b| {
            hists
                .iter()
                .any(|h| h.get(b).and_then(Value::as_u64).unwrap_or(0) > 0)
        })
        .collect();
    if used.is_empty() {
        return Ok(());
    }
    let bucket = |b: usize| -> String {
        let ns = |e: usize| -> String {
            let x = 1u64 << e;
            match x {
                _ if x >= 1_000_000 => format!("{} ms", x / 1_000_000),
                _ if x >= 1_000 => format!("{} us", x / 1_000),
                _ => format!("{x} ns"),
            }
        };
        match b {
            0 => "none".into(),
            1 => "< 1 ns".into(),
            _ => format!("{} to {}", ns(b - 1), ns(b)),
        }
    };
    let mut header = vec!["busy time in a window".to_string()];
    header.extend(names);
    let rows: Vec<Vec<String>> = used
        .iter()
        .map(|&b| {
            let mut r = vec![bucket(b)];
            r.extend(
                hists
                    .iter()
                    .map(|h| h.get(b).and_then(Value::as_u64).unwrap_or(0).to_string()),
            );
            r
        })
        .collect();
    p.para("Windows by each worker's busy time in them (a spread to the right of the others' is a worker the others wait for):");
    p.table(&header, &rows);
    Ok(())
}
