//! docs/stats.md against what the simulator writes: real runs (a built-in workload on one
//! chiplet, a trace on four chiplets, so that `links` has entries) write stats files, and
//! every key path of their JSON (arrays collapsed to `[]`) must be documented in the page,
//! and every documented path must occur in one of them (but for the keys the page says
//! appear only in other runs). The page itself is compared with the generated text by
//! `provenance::tests::stats_doc_md_is_generated_from_the_code`.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// The documented paths of the page, and those whose unit is `map` (free-form children).
fn documented() -> (BTreeSet<String>, BTreeSet<String>) {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/stats.md"))
        .unwrap();
    let (mut paths, mut maps) = (BTreeSet::new(), BTreeSet::new());
    let mut parents: Vec<String> = Vec::new();
    for line in page.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            parents = if h == "Top level" {
                vec![String::new()]
            } else {
                h.split(", ")
                    .map(|p| p.trim_matches('`').to_string())
                    .collect()
            };
            continue;
        }
        let Some(row) = line.strip_prefix("| `") else {
            continue;
        };
        let (key, rest) = row.split_once("` | ").unwrap();
        let unit = rest.split(" | ").next().unwrap();
        for p in &parents {
            let path = if p.is_empty() {
                key.to_string()
            } else {
                format!("{p}.{key}")
            };
            if unit == "map" {
                maps.insert(path.clone());
            }
            paths.insert(path);
        }
    }
    (paths, maps)
}

/// Every key path of `v` under `prefix`: objects' keys joined by `.`, an array's objects
/// as `[]`; an array of scalars is a leaf.
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
            for x in a {
                key_paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_key_the_simulator_writes_is_in_docs_stats_md_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "vectoradd", &["n=4096"]);
    let t = tst.to_str().unwrap();
    let mut runs = vec![
        run_stats_full(
            "default.yaml",
            &["--workload", "vectoradd", "--param", "n=4096"],
        )
        .0,
        run_stats_full(
            "a100-4chiplet.yaml",
            // Sampled: `timeseries`, with link series.
            // With the NoC crossbar: `chiplets[].crossbar`.
            &[
                "--trace",
                t,
                "--set",
                "core.sm_count=4",
                "--set",
                "noc.model=crossbar",
                "--sample-every",
                "500",
                // A weighted placement: `run.placement_costs`.
                "--threads",
                "2",
                "--placement",
                "weighted",
            ],
        )
        .0,
        // A limited run writes `run_limit`.
        run_stats_full(
            "default.yaml",
            &["--trace", t, "--max-cycles", "2000", "--kernels", "0"],
        )
        .0,
        run_stats_full("default.yaml", &["--trace", t, "--max-warp-insts", "100"]).0,
        // Sync values (a trace with spin regions): `sync`, with the lock-holder check's
        // `sync.lock_holds`.
        run_stats_full(
            "default.yaml",
            &[
                "--workload",
                "spinlock",
                "--param",
                "ctas=4",
                "--set",
                "watchdog.check_lock_holders=true",
            ],
        )
        .0,
    ];
    // A grid barrier over more CTAs than the GPU holds: the watchdog stops it (exit status
    // 3, the stats file written with `watchdog`).
    let over = gen(tmp.path(), "atomic_barrier", &["ctas=8", "episodes=1"]);
    let out = tmp.path().join("watchdog.json");
    let mut a = run_args(
        "default.yaml",
        &[
            "--trace",
            over.to_str().unwrap(),
            "--set",
            "core.sm_count=1",
            "--set",
            "core.max_ctas_per_sm=2",
            "--set",
            "watchdog.livelock_cycles=20000",
        ],
    );
    a.push("--stats-out".into());
    a.push(out.display().to_string());
    assert_eq!(tessera(&a).status.code(), Some(3));
    runs.push(std::fs::read_to_string(&out).unwrap());
    let (documented, maps) = documented();
    let mut written = BTreeSet::new();
    for text in &runs {
        key_paths(&json(text), "", &mut written);
    }
    // Children of free-form maps are neither listed nor checked.
    let under_map = |p: &str| maps.iter().any(|m| p.starts_with(&format!("{m}.")));
    let undocumented: Vec<&String> = written
        .iter()
        .filter(|p| !documented.contains(*p) && !under_map(p))
        .collect();
    assert!(
        undocumented.is_empty(),
        "keys written but not in docs/stats.md (give the field a doc comment and \
         regenerate with `TESSERA_BLESS=1 cargo test -p tessera stats_doc`): {undocumented:?}"
    );
    // Keys that only other runs write: MPI's exchange, and the opcode classes a vector
    // add does not use (a class appears only where its count is not zero).
    let elsewhere =
        |p: &str| p == "run.mpi_exchange" || p.starts_with("chiplets[].class_warp_insts.");
    let missing: Vec<&String> = documented
        .iter()
        .filter(|p| !written.contains(*p) && !elsewhere(p))
        .collect();
    assert!(
        missing.is_empty(),
        "keys in docs/stats.md that no run wrote: {missing:?}"
    );
    // Opcode classes: the run wrote some, each documented (checked above).
    assert!(written.contains("chiplets[].class_warp_insts.load_global"));
}
