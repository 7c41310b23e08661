//! The stats reference (`docs/stats.md`), generated from the declarations of the stats
//! views: each key's meaning is the doc comment at its field (in `stats.rs`,
//! `mem/stats.rs`, `per_kernel.rs`), read from the source compiled into this crate, so the
//! page cannot drift from the code. The binary adds the keys it writes itself
//! (`provenance` and `run`) as [`DocKey`] tables beside the code that writes them.

use tessera_traces::OpClass;

/// The sources that declare the stats views, as compiled.
const SOURCES: &[(&str, &str)] = &[
    ("stats.rs", include_str!("stats.rs")),
    ("mem/stats.rs", include_str!("mem/stats.rs")),
    ("per_kernel.rs", include_str!("per_kernel.rs")),
    ("timeseries.rs", include_str!("timeseries.rs")),
    ("watchdog.rs", include_str!("watchdog.rs")),
];

/// A key written outside the stats views (by the binary): its full dotted path (`[]` for
/// an array's elements), its unit and its meaning. A unit of `map` says that the key's
/// children are free-form (named by the user or the configuration) and listed nowhere.
#[derive(Clone, Copy, Debug)]
pub struct DocKey {
    pub path: &'static str,
    pub unit: &'static str,
    pub doc: &'static str,
}

/// One field of a stats struct as declared.
#[derive(Clone, Debug)]
struct Field {
    /// The JSON key (the field name, or its serde rename).
    key: String,
    /// The Rust type as written (`u64` for counters declared by macro).
    ty: String,
    doc: String,
}

/// A struct of the stats views: its doc comment and fields, in declaration order.
struct Decl {
    doc: String,
    fields: Vec<Field>,
}

/// Parses `pub struct <name> {` in the sources: the `///` lines above it, and each field
/// (`pub key: Type,` or, inside a counters macro, `key,`) with the `///` lines above it.
/// Panics where a field has no doc comment or carries a serde attribute the generator
/// does not understand, so that a new key cannot go undocumented.
fn decl(name: &str) -> Decl {
    let marker = format!("pub struct {name} {{");
    let (file, src) = SOURCES
        .iter()
        .find(|(_, s)| s.lines().any(|l| l.trim() == marker))
        .unwrap_or_else(|| panic!("stats_doc: `{marker}` in none of the stats sources"));
    let lines: Vec<&str> = src.lines().collect();
    let at = lines.iter().position(|l| l.trim() == marker).unwrap();

    let mut doc_lines = Vec::new();
    for l in lines[..at].iter().rev() {
        let t = l.trim();
        if let Some(d) = t.strip_prefix("///") {
            doc_lines.push(d.strip_prefix(' ').unwrap_or(d));
        } else if !t.starts_with("#[") {
            break;
        }
    }
    doc_lines.reverse();

    let mut fields = Vec::new();
    let mut doc = Vec::new();
    let mut rename = None;
    let mut skip = false;
    for l in &lines[at + 1..] {
        let t = l.trim();
        if t == "}" {
            break;
        }
        if let Some(d) = t.strip_prefix("///") {
            doc.push(d.strip_prefix(' ').unwrap_or(d));
            continue;
        }
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        if let Some(attr) = t.strip_prefix("#[") {
            if attr == "serde(skip_serializing_if = \"Option::is_none\")]" {
                // An optional key: its doc comment says when it is there.
                continue;
            }
            if attr == "serde(skip)]" {
                // Not written: not a key.
                skip = true;
                continue;
            }
            if attr.starts_with("serde") {
                let r = attr
                    .strip_prefix("serde(rename = \"")
                    .and_then(|r| r.strip_suffix("\")]"))
                    .unwrap_or_else(|| {
                        panic!("stats_doc: {file}: `{t}` in {name} is not understood")
                    });
                rename = Some(r.to_string());
            }
            continue;
        }
        if skip {
            skip = false;
            doc.clear();
            continue;
        }
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let t = t.strip_suffix(',').unwrap_or(t);
        let (field, ty) = match t.split_once(':') {
            Some((f, ty)) => (f.trim(), ty.trim()),
            None => (t, "u64"),
        };
        assert!(
            !field.is_empty() && field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "stats_doc: {file}: cannot read the field line `{l}` of {name}"
        );
        assert!(
            !doc.is_empty(),
            "stats_doc: {file}: {name}.{field} has no doc comment (say what the value is \
             and its unit)"
        );
        fields.push(Field {
            key: rename.take().unwrap_or_else(|| field.to_string()),
            ty: ty.to_string(),
            doc: paragraph(&doc.join("\n")),
        });
        doc.clear();
    }
    Decl {
        doc: paragraph(&doc_lines.join("\n")),
        fields,
    }
}

/// One paragraph from a doc comment's lines, rustdoc links shown as code.
fn paragraph(doc: &str) -> String {
    doc.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace("[`", "`")
        .replace("`]", "`")
        .replace("`crate::", "`")
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// What a field's type is in the JSON: a nested struct of the stats views (by name, and
/// whether it is an array of them), a map of opcode classes, or a scalar.
enum Shape {
    Object(String, bool),
    Classes,
    Scalar,
}

fn shape(ty: &str) -> Shape {
    // An optional key has the shape of what it holds.
    let ty = ty
        .strip_prefix("Option<")
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(ty);
    let (inner, array) = match ty.strip_prefix("Vec<").and_then(|t| t.strip_suffix('>')) {
        Some(t) => (t, true),
        None => (ty, false),
    };
    match inner {
        "u32" | "u64" | "f64" | "bool" | "String" | "[u32; 3]" if !array => Shape::Scalar,
        // A series: one value per interval (`timeseries`), a null where it has none.
        "u64" | "f64" | "Option<f64>" if array => Shape::Scalar,
        "ClassCounts" if !array => Shape::Classes,
        _ if inner.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && inner.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            Shape::Object(inner.to_string(), array)
        }
        _ => panic!("stats_doc: the type `{ty}` of a stats field is not known"),
    }
}

/// The unit of a key, from its type, its struct and its name's suffix (the naming
/// convention of the counters).
fn unit(strukt: &str, f: &Field) -> String {
    // A series is an array of the unit of its values, one per interval.
    match f.ty.strip_prefix("Vec<").and_then(|t| t.strip_suffix('>')) {
        Some(inner) if matches!(shape(&f.ty), Shape::Scalar) => {
            let each = Field {
                ty: inner.to_string(),
                ..f.clone()
            };
            format!("array of {}", unit(strukt, &each))
        }
        _ => scalar_unit(strukt, f).to_string(),
    }
}

fn scalar_unit(strukt: &str, f: &Field) -> &'static str {
    match shape(&f.ty) {
        Shape::Object(_, true) => return "array",
        Shape::Object(_, false) | Shape::Classes => return "object",
        Shape::Scalar => {}
    }
    let k = f.key.as_str();
    let ty = f.ty.as_str();
    let ty = ty
        .strip_prefix("Option<")
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(ty);
    match ty {
        "bool" => return "true or false",
        "String" => return "text",
        "[u32; 3]" => return "[x, y, z]",
        "f64" if k == "ipc" => return "thread instructions per core cycle",
        "f64" if k == "active_warps" => return "warps",
        "f64" if k.ends_with("_gbps") => return "GB/s",
        "f64" => return "ratio",
        _ => {}
    }
    let cache = ["l1d_", "l2_", "llc_"].iter().any(|p| k.starts_with(p))
        && ["_accesses", "_hits", "_misses"]
            .iter()
            .any(|s| k.ends_with(s));
    if strukt == "StallStats" {
        "scheduler-cycles"
    } else if k == "addr" || k.ends_with("pc") {
        "address"
    } else if k.ends_with("mask") {
        "bit mask"
    } else if matches!(k, "value" | "values" | "sum") {
        "value"
    } else if matches!(k, "sm" | "kernel" | "warp") {
        "index"
    } else if k == "stats_version" {
        "version"
    } else if k == "id" || k == "gpu" {
        "index"
    } else if k.ends_with("_ps") {
        "ps"
    } else if k.contains("bytes") {
        "bytes"
    } else if k.contains("cycle") {
        "core cycles"
    } else if k.ends_with("_sectors") || cache || k == "dram_reads" || k == "dram_writes" {
        "sectors"
    } else if k.ends_with("_lines") {
        "lines"
    } else if k.ends_with("_insts") || k.ends_with("_insn") || k == "shared_accesses" {
        "instructions"
    } else if k.ends_with("_requests") || k.ends_with("packets") {
        "packets"
    } else {
        "count"
    }
}

/// One table of the page: the paths where the object appears, its doc, its rows.
struct Table {
    paths: Vec<String>,
    doc: String,
    rows: Vec<(String, String, String)>,
}

const INTRO: &str = "\
# Stats reference

<!-- Generated by tessera_partitions::stats_doc::stats_markdown() from the declarations of
the stats (partitions/src/stats.rs, mem/stats.rs, per_kernel.rs) and of the keys the binary
writes (src/provenance.rs). Do not edit: regenerate with
TESSERA_BLESS=1 cargo test -p tessera stats_doc
(a test fails whenever this file differs from the code, and another runs simulations and
checks that every key they write is listed here and every key listed here is written). -->

`tessera run --stats-out FILE.json` writes a **stats file**: one JSON object with the
simulated results of the run, what was simulated (`provenance`) and how the run was
executed (`run`). `tessera diff`, `collect`, `sweep` and `corpus check` read it, naming a
value by its dotted path (`totals.l2_hits`, `chiplets.0.memory.dram_reads`).

- **Version.** `stats_version` is raised whenever a key moves or changes meaning; tools
  that compare files check it first.
- **Fixed key order.** Keys are written in the order of the tables below (the order of the
  declarations in the code), arrays in a fixed order (kernels in command-list order,
  chiplets in chiplet order, links grouped by chiplet), so that two runs' files can be
  compared as text. Everything but `run` is byte-identical for any number of threads,
  ranks, placement and partitioning of the same simulation.
- **Integers, summed in unit order.** Every counter is an integer that a hardware unit
  counted; the merge sums them over units in unit-id order. The only non-integer
  simulated values (`totals.ipc`) are computed once at the end from the integers.
- **Sums that hold.** For L1D, L2 and LLC, `_hits + _misses = _accesses` (in `memory`, in
  each kernel's and the host's `memory`, and in `totals`). `totals.l1d_accesses` and the
  other memory totals are the sums of the chiplets' `memory` counters of the same name.
  Each kernel's `memory` plus `totals.host_memory` adds up to those totals, and their
  `link_packets` and `link_bytes` to the sums of `links[].packets` and `links[].bytes`.
  In each `stalls`, `slots = issued + unit_busy + scoreboard + barrier + no_warp`.
  `totals.warp_insts` is the sum of the kernels' and of the chiplets' `warp_insts`.
- **Units.** Times are integer picoseconds (`_ps`) or core cycles (`_cycle`, `cycles`);
  cache and DRAM counters count sectors (of each cache's configured sector size) unless
  named `_lines` or `_bytes`;
  `scheduler-cycles` are core cycles times warp schedulers.
- **Time series.** `timeseries` is written only by `tessera run --sample-every CYCLES`:
  the run cut into intervals of that many core cycles, each series an array with one value
  per interval (`timeseries.end_ps`); a counter's series sums to the counter of the same
  name (a chiplet's `warp_insts`, `memory.l2_accesses`, a link's `bytes`, ...).

In the tables, `[]` stands for every element of an array (`kernels[].memory` is the
`memory` of each kernel). A key whose unit is `map` holds free-form keys (configuration
keys, workload parameters) that are not listed.
";

/// The stats reference in Markdown. `provenance` holds the keys of the `provenance`
/// object (itself first), written after `config`; `run` those of `run` (itself first),
/// written last. `docs/stats.md` is this text with the binary's tables (a test keeps it
/// so).
pub fn stats_markdown(provenance: &[DocKey], run: &[DocKey]) -> String {
    let mut tables: Vec<(String, Table)> = Vec::new();
    walk("RunStats", "", &mut tables);

    // The binary's keys: the objects themselves in the top table, the rest by parent.
    let mut extra: Vec<Table> = Vec::new();
    for (keys, after) in [(provenance, Some("config")), (run, None)] {
        let Some((top, rest)) = keys.split_first() else {
            continue;
        };
        let row = (
            top.path.to_string(),
            top.unit.to_string(),
            top.doc.to_string(),
        );
        let rows = &mut tables[0].1.rows;
        match after.and_then(|a| rows.iter().position(|r| r.0 == a)) {
            Some(i) => rows.insert(i + 1, row),
            None => rows.push(row),
        }
        for k in rest {
            let (parent, key) = k.path.rsplit_once('.').expect("a nested key");
            let row = (key.to_string(), k.unit.to_string(), k.doc.to_string());
            match extra.iter_mut().find(|t| t.paths[0] == parent) {
                Some(t) => t.rows.push(row),
                None => extra.push(Table {
                    paths: vec![parent.to_string()],
                    doc: String::new(),
                    rows: vec![row],
                }),
            }
        }
    }
    let split = extra
        .iter()
        .position(|t| t.paths[0] == "run" || t.paths[0].starts_with("run."))
        .unwrap_or(extra.len());
    let (prov, runs) = extra.split_at(split);

    let mut out = String::from(INTRO);
    let mut iter = tables.iter().map(|(_, t)| t);
    let top = iter.next().expect("the top table");
    render(&mut out, "Top level", top);
    for t in prov {
        render(&mut out, &heading(t), t);
    }
    for t in iter {
        render(&mut out, &heading(t), t);
    }
    for t in runs {
        render(&mut out, &heading(t), t);
    }
    out
}

fn heading(t: &Table) -> String {
    t.paths
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn render(out: &mut String, title: &str, t: &Table) {
    out.push_str(&format!("\n## {title}\n\n"));
    if !t.doc.is_empty() {
        out.push_str(&t.doc);
        out.push_str("\n\n");
    }
    out.push_str("| key | unit | meaning |\n|---|---|---|\n");
    for (k, u, d) in &t.rows {
        out.push_str(&format!("| `{k}` | {} | {} |\n", cell(u), cell(d)));
    }
}

/// Adds the table of struct `name` at `path` (or the path to its existing table), then
/// those of the structs it holds, depth first.
fn walk(name: &str, path: &str, tables: &mut Vec<(String, Table)>) {
    if let Some((_, t)) = tables.iter_mut().find(|(n, _)| n == name) {
        t.paths.push(path.to_string());
        return;
    }
    let d = decl(name);
    let rows = d
        .fields
        .iter()
        .map(|f| (f.key.clone(), unit(name, f), f.doc.clone()))
        .collect();
    tables.push((
        name.to_string(),
        Table {
            paths: vec![path.to_string()],
            doc: d.doc,
            rows,
        },
    ));
    for f in &d.fields {
        let p = if path.is_empty() {
            f.key.clone()
        } else {
            format!("{path}.{}", f.key)
        };
        match shape(&f.ty) {
            Shape::Object(sub, array) => {
                let p = if array { format!("{p}[]") } else { p };
                walk(&sub, &p, tables);
            }
            Shape::Classes => {
                let rows = OpClass::ALL
                    .iter()
                    .map(|c| {
                        (
                            c.name().to_string(),
                            "instructions".to_string(),
                            format!("Warp instructions of class `{}`.", c.name()),
                        )
                    })
                    .collect();
                tables.push((
                    format!("{p} (classes)"),
                    Table {
                        paths: vec![p],
                        doc: "The opcode classes of the trace format, in class order; a \
                              class appears only where its count is not zero."
                            .into(),
                        rows,
                    },
                ));
            }
            Shape::Scalar => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stats_field_is_documented() {
        // Panics on a field without a doc comment.
        let md = stats_markdown(&[], &[]);
        for key in [
            "totals",
            "l1d_hits",
            "slots",
            "link_bytes",
            "max_queued_ps",
            "int",
        ] {
            assert!(
                md.contains(&format!("| `{key}` |")),
                "{key} not in the page"
            );
        }
        for path in [
            "totals.stalls",
            "chiplets[].stalls",
            "totals.host_memory",
            "kernels[].memory",
            "chiplets[].memory",
            "chiplets[].class_warp_insts",
            "links[]",
        ] {
            assert!(md.contains(&format!("`{path}`")), "{path} has no table");
        }
    }
}
