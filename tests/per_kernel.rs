//! Per-kernel memory counters (issue 20 item 4): every kernel's `memory` in the stats, with
//! the host's share (`totals.host_memory`), adds up to the totals: the chiplets' memory
//! counters and the sums over `links`. Checked on every kind of system: one GPU, chiplets
//! with a memory-side L2, private L2s with an LLC and kernel-boundary flushes, several GPUs.

mod common;

use common::*;
use serde_json::Value;

fn run_stats(cfg: &str, workload: &str, params: &[&str]) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("s.json");
    let mut args = vec![
        "run".to_string(),
        "--config".into(),
        config(cfg).display().to_string(),
        "--workload".into(),
        workload.into(),
        "--stats-out".into(),
        out.display().to_string(),
    ];
    for p in params {
        args.push("-p".into());
        args.push(p.to_string());
    }
    tessera_ok(&args);
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

/// The total of counter `f` the per-kernel counters must add up to.
fn total(s: &Value, f: &str) -> u64 {
    let sum = |list: &str, key: &str| -> u64 {
        s[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[key].as_u64().unwrap())
            .sum()
    };
    match f {
        "link_packets" => sum("links", "packets"),
        "link_bytes" => sum("links", "bytes"),
        _ => s["chiplets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["memory"][f].as_u64().unwrap())
            .sum(),
    }
}

fn check(cfg: &str, workload: &str, params: &[&str]) -> Value {
    let s = run_stats(cfg, workload, params);
    let host = s["totals"]["host_memory"].as_object().unwrap().clone();
    assert_eq!(host.len(), 16, "{host:?}");
    let kernels = s["kernels"].as_array().unwrap();
    for (f, h) in &host {
        let per: u64 = kernels
            .iter()
            .map(|k| k["memory"][f].as_u64().unwrap())
            .sum();
        assert_eq!(
            per + h.as_u64().unwrap(),
            total(&s, f),
            "{cfg} {workload}: {f}: the kernels' {per} and the host's {h} do not add up"
        );
    }
    // Totals that also exist at the top keep agreeing with the chiplets.
    for f in ["l1d_accesses", "l2_accesses", "dram_reads", "llc_accesses"] {
        assert_eq!(s["totals"][f].as_u64().unwrap(), total(&s, f), "{f}");
    }
    s
}

#[test]
fn per_kernel_memory_adds_up_on_one_gpu() {
    let s = check("titanv.yaml", "stream", &["n=16384"]);
    // Five kernels, each reading its arrays: each has L1D accesses of its own.
    let k = s["kernels"].as_array().unwrap();
    assert_eq!(k.len(), 5);
    assert!(k
        .iter()
        .all(|k| k["memory"]["l1d_accesses"].as_u64().unwrap() > 0));
    // copy reads one array and writes one, add reads two and writes one: add has 3/2 of
    // copy's sector accesses (n doubles, 32-byte sectors).
    let acc = |i: usize| k[i]["memory"]["l1d_accesses"].as_u64().unwrap();
    assert_eq!(acc(0), 2 * 16384 * 8 / 32);
    assert_eq!(acc(2), 3 * 16384 * 8 / 32);
}

#[test]
fn per_kernel_memory_adds_up_on_chiplets_and_private_l2s() {
    let s = check("a100-4chiplet.yaml", "gemm", &["m=64", "n=64", "k=64"]);
    assert!(s["kernels"][0]["memory"]["link_packets"].as_u64().unwrap() > 0);
    let s = check(
        "radeon7-4chiplet.yaml",
        "stencil2d",
        &["nx=64", "ny=64", "iters=3"],
    );
    let k = s["kernels"].as_array().unwrap();
    assert_eq!(k.len(), 3);
    assert!(k
        .iter()
        .all(|k| k["memory"]["llc_accesses"].as_u64().unwrap() > 0));
}

#[test]
fn per_kernel_memory_adds_up_on_several_gpus() {
    let s = check("dgx-8gpu.yaml", "peer_stream", &[]);
    let k = s["kernels"].as_array().unwrap();
    assert!(k
        .iter()
        .all(|k| k["memory"]["link_packets"].as_u64().unwrap() > 0));
}
