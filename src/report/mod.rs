//! `tessera report STATS.json... -o report.html`: one self-contained HTML page (inline
//! CSS and SVG, nothing fetched) with plots of one or more stats files: each run's kernel
//! timeline, stall breakdown, memory hierarchy, links and time series; for several runs
//! the metrics against the varied parameters, and for two a side-by-side comparison.

mod chart;
mod compare;
mod run;

use anyhow::Result;
use clap::Args;
use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::{collect_cmd, outputs, stats_file};

#[derive(Args)]
pub struct ReportArgs {
    /// Stats files, or directories searched (recursively) for them (a sweep's output).
    #[arg(required = true, value_name = "STATS.json|DIR")]
    inputs: Vec<PathBuf>,
    /// The HTML page to write.
    #[arg(short, long, value_name = "REPORT.html")]
    out: PathBuf,
    /// The page's title (default: "tessera report" and the configuration's name).
    #[arg(long)]
    title: Option<String>,
}

pub fn run(a: ReportArgs) -> Result<()> {
    outputs::check_dir_of(&a.out, "report")?;
    let files = collect_cmd::gather(&a.inputs)?;
    let inputs: Vec<&Path> = a
        .inputs
        .iter()
        .map(PathBuf::as_path)
        .chain(files.iter().map(|(p, _)| p.as_path()))
        .collect();
    outputs::refuse_input(&a.out, &inputs)?;
    let page = render(&files, a.title.as_deref())?;
    outputs::write_atomic(&a.out, page.html.as_bytes())?;
    eprintln!(
        "{}: report of {} run(s), {} chart(s)",
        a.out.display(),
        files.len(),
        page.charts
    );
    Ok(())
}

/// A finished page.
pub struct Rendered {
    pub html: String,
    /// The number of charts (SVGs) in it.
    pub charts: usize,
}

/// The report of `files` (each with the path it was read from).
pub fn render(files: &[(PathBuf, Value)], title: Option<&str>) -> Result<Rendered> {
    let title = match title {
        Some(t) => t.to_string(),
        None => {
            let mut configs: Vec<String> = Vec::new();
            for (_, v) in files {
                let c = v
                    .get("config")
                    .map(stats_file::show_value)
                    .unwrap_or_default();
                if !c.is_empty() && !configs.contains(&c) {
                    configs.push(c);
                }
            }
            if configs.is_empty() {
                "tessera report".to_string()
            } else {
                format!("tessera report: {}", configs.join(", "))
            }
        }
    };
    let mut p = Page::default();
    p.raw(&format!("<h1>{}</h1>\n", esc(&title)));
    let names: Vec<String> = files.iter().map(|(f, _)| f.display().to_string()).collect();
    p.para(&format!(
        "{} stats file(s): {}. Written by tessera {}.",
        files.len(),
        names.join(", "),
        crate::provenance::TOOL_VERSION
    ));
    if files.len() >= 2 {
        compare::sweep(&mut p, files)?;
    }
    if let [(pa, a), (pb, b)] = files {
        compare::pair(&mut p, (pa, a), (pb, b))?;
    }
    if let [(path, v)] = files {
        run::sections(&mut p, path, v)?;
    } else {
        p.h2("Each run");
        for (path, v) in files {
            p.raw(&format!(
                "<details><summary>{}</summary>\n",
                esc(&path.display().to_string())
            ));
            run::sections(&mut p, path, v)?;
            p.raw("</details>\n");
        }
    }
    Ok(Rendered {
        html: p.finish(&title),
        charts: p.charts,
    })
}

/// The page being written: HTML body text and the count of charts.
#[derive(Default)]
pub struct Page {
    body: String,
    charts: usize,
}

impl Page {
    pub fn raw(&mut self, s: &str) {
        self.body.push_str(s);
    }
    pub fn h2(&mut self, s: &str) {
        self.raw(&format!("<h2>{}</h2>\n", esc(s)));
    }
    pub fn h3(&mut self, s: &str) {
        self.raw(&format!("<h3>{}</h3>\n", esc(s)));
    }
    pub fn para(&mut self, s: &str) {
        self.raw(&format!("<p>{}</p>\n", esc(s)));
    }
    /// An SVG chart.
    pub fn chart(&mut self, svg: &str) {
        self.charts += 1;
        self.raw("<figure>");
        self.raw(svg);
        self.raw("</figure>\n");
    }
    /// A table: a header row and rows of cells (numbers right-aligned).
    pub fn table(&mut self, header: &[String], rows: &[Vec<String>]) {
        let mut s = String::from("<table><thead><tr>");
        for h in header {
            s.push_str(&format!("<th>{}</th>", esc(h)));
        }
        s.push_str("</tr></thead><tbody>\n");
        for r in rows {
            s.push_str("<tr>");
            for c in r {
                let num = c.parse::<f64>().is_ok() || c.ends_with('%') || c.ends_with('x');
                s.push_str(&format!(
                    "<td{}>{}</td>",
                    if num { " class=\"n\"" } else { "" },
                    esc(c)
                ));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</tbody></table>\n");
        self.raw(&s);
    }
    fn finish(&self, title: &str) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
            esc(title),
            self.body
        )
    }
}

/// The page's style: system fonts only, nothing loaded.
const STYLE: &str = "body{font-family:sans-serif;margin:1.5em auto;max-width:1000px;color:#222;\
background:#fff}\nh1{font-size:1.6em}h2{border-bottom:1px solid #ccc;margin-top:1.6em}\n\
figure{margin:0.8em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\n\
table{border-collapse:collapse;margin:0.6em 0;font-size:0.9em}\n\
th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}td.n{text-align:right}\n\
th{background:#f2f2f2}details{margin:0.5em 0;padding:0.3em 0.6em;border:1px solid #ddd}\n\
summary{cursor:pointer;font-weight:bold}p.note{color:#666}\n";

/// `s` with HTML's special characters escaped.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The number at a dotted path.
pub fn num(v: &Value, path: &str) -> Option<f64> {
    stats_file::lookup(v, path)?.as_f64()
}

/// A number as a table shows it: integers whole, others with 4 significant digits.
pub fn show(x: f64) -> String {
    if !x.is_finite() {
        return String::new();
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else if x.abs() >= 1000.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.4}")
    }
}

/// `part / whole` in percent, when `whole` is positive.
pub fn pct(part: Option<f64>, whole: Option<f64>) -> Option<f64> {
    match (part, whole) {
        (Some(p), Some(w)) if w > 0.0 => Some(100.0 * p / w),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
