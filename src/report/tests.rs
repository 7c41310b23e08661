//! Unit tests of the report: synthetic stats files, the sections they give, and that
//! missing keys leave sections out rather than fail.

use super::*;
use serde_json::json;

fn svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(s) = rest.find("<svg") {
        let Some(e) = rest[s..].find("</svg>") else {
            break;
        };
        out.push(&rest[s..s + e + 6]);
        rest = &rest[s + e + 6..];
    }
    out
}

/// A 2-chiplet run with a `timeseries` object as the time-series branch writes it.
fn with_timeseries() -> Value {
    json!({
        "stats_version": 6, "config": "two-chiplets",
        "provenance": {"overrides": {}, "input": {"workload": "gemm"}},
        "totals": {"gpu_tot_sim_cycle": 3000, "sim_time_ps": 3000000, "ipc": 100.0,
            "warp_insts": 900, "l1d_accesses": 10, "l1d_hits": 5, "l2_accesses": 5,
            "l2_hits": 3, "l2_misses": 2, "dram_bytes": 256,
            "stalls": {"slots": 100, "issued": 30, "scoreboard": 50, "no_warp": 20},
            "host_memory": {"dram_bytes": 64}},
        "kernels": [{"name": "k", "gpu": 0, "start_ps": 0, "end_ps": 3000000}],
        "chiplets": [
            {"id": 0, "gpu": 0, "stalls": {"slots": 50, "issued": 20, "scoreboard": 30},
             "memory": {"l2_hits": 2, "l2_misses": 1, "dram_read_bytes": 128, "dram_write_bytes": 0}},
            {"id": 1, "gpu": 0, "stalls": {"slots": 50, "issued": 10, "no_warp": 40},
             "memory": {"l2_hits": 1, "l2_misses": 1, "dram_read_bytes": 64, "dram_write_bytes": 64}}],
        "links": [
            {"from": "chiplet0", "to": "chiplet1", "packets": 4, "bytes": 400, "wire_bytes": 432, "busy_ps": 1000},
            {"from": "chiplet1", "to": "chiplet0", "packets": 4, "bytes": 400, "wire_bytes": 432, "busy_ps": 2000}],
        "timeseries": {
            "interval_cycles": 1000, "interval_ps": 1000000, "end_ps": [1000000, 2000000, 3000000],
            "chiplets": [
                {"id": 0, "gpu": 0, "warp_insts": [1, 2, 3], "ipc": [1.0, 2.5, 0.5],
                 "active_warps": [4, 8, 2], "l1d_hit_rate": [null, 0.5, 1.0],
                 "l2_hit_rate": [0.1, null, 0.3], "dram_bytes": [0, 128, 0],
                 "dram_gbps": [0.0, 0.128, 0.0], "ctas_launched": [1, 0, 0],
                 "ctas_retired": [0, 0, 1], "sms": [{"warp_insts": [1, 2, 3], "ipc": [1, 2, 0]}]},
                {"id": 1, "gpu": 0, "ipc": [0.2, 1.5, 3.0], "dram_bytes": [64, 64, 0]}],
            "links": [
                {"from": "chiplet0", "to": "chiplet1", "bytes": [100, 200, 100],
                 "busy_ps": [250, 500, 250], "utilization": [0.25, 0.5, 0.25]},
                {"from": "chiplet1", "to": "chiplet0", "busy_ps": [100, 900, 1000]}]}
    })
}

#[test]
fn time_series_give_per_chiplet_ipc_and_link_utilization_plots() {
    let r = render(&[(PathBuf::from("ts.json"), with_timeseries())], None).unwrap();
    let charts = svgs(&r.html);
    assert_eq!(charts.len(), r.charts);
    let find = |title: &str| {
        charts
            .iter()
            .find(|s| s.contains(title))
            .unwrap_or_else(|| panic!("no chart {title:?} in {}", r.html))
    };
    let ipc = find("IPC per chiplet over time");
    for t in [
        "chiplet 0",
        "chiplet 1",
        "time (us, end of interval)",
        "IPC (thread",
    ] {
        assert!(ipc.contains(t), "{t:?} missing from the IPC plot");
    }
    let links = find("Link utilization over time");
    for t in [
        "chiplet0 → chiplet1",
        "chiplet1 → chiplet0",
        "utilization (% of interval busy)",
    ] {
        assert!(links.contains(t), "{t:?} missing from the link plot");
    }
    // The second chiplet has no dram_gbps: computed from its bytes.
    let dram = find("DRAM bandwidth per chiplet over time");
    assert!(dram.contains("chiplet 1"));
    find("L2 hit rate per chiplet over time");
    for t in [
        "Kernels over time",
        "Stall breakdown",
        "Where requests were served",
        "Bytes per link",
    ] {
        find(t);
    }
    assert!(r.html.contains("Sampled every 1000 core cycles"));
    assert!(!r.html.contains("http://") || !r.html.contains("src=\"http"));
}

#[test]
fn files_without_optional_keys_still_give_a_page() {
    let bare = json!({"stats_version": 6});
    let r = render(&[(PathBuf::from("bare.json"), bare.clone())], Some("t")).unwrap();
    assert!(r.html.contains("No kernels with start and end times"));
    assert!(r.html.contains("No stall counters"));
    assert!(!r.html.contains("Over time"));
    // Odd shapes: a timeseries that is not an object, series of the wrong type.
    let odd = json!({"stats_version": 6, "kernels": [{"name": 3, "start_ps": "x"}],
        "chiplets": "no", "links": [{}], "totals": {"stalls": {"slots": 0, "issued": "?"}},
        "timeseries": {"chiplets": [{"ipc": "x"}, {"ipc": [null, "a", 1]}], "links": [{"busy_ps": [1]}]}});
    let r = render(
        &[
            (PathBuf::from("odd.json"), odd),
            (PathBuf::from("b.json"), bare),
        ],
        None,
    )
    .unwrap();
    assert!(r.html.contains("IPC per chiplet over time"));
    assert_eq!(svgs(&r.html).len(), r.charts);
}

fn point(l2: u64, sched: &str, cycles: u64) -> Value {
    json!({"stats_version": 6, "config": "a100",
        "provenance": {"overrides": {"l2.size_bytes": l2, "core.scheduler": sched, "core.sm_count": 4}},
        "totals": {"gpu_tot_sim_cycle": cycles, "ipc": 1000.0 / cycles as f64,
            "l2_hits": 1, "l2_accesses": 2, "dram_bytes": 10}})
}

#[test]
fn several_runs_are_plotted_against_their_varied_parameters() {
    let files: Vec<(PathBuf, Value)> = vec![
        (PathBuf::from("p0.json"), point(4194304, "lrr", 100)),
        (PathBuf::from("p1.json"), point(4194304, "gto", 90)),
        (PathBuf::from("p2.json"), point(1048576, "lrr", 120)),
        (PathBuf::from("p3.json"), point(1048576, "gto", 110)),
    ];
    let o: Vec<_> = files
        .iter()
        .map(|(_, v)| crate::collect_cmd::overrides(v))
        .collect();
    // core.sm_count is the same everywhere: not varied.
    assert_eq!(compare::varied(&o), ["l2.size_bytes", "core.scheduler"]);
    let r = render(&files, None).unwrap();
    let charts = svgs(&r.html);
    let cycles = charts
        .iter()
        .find(|s| s.contains("total cycles vs l2.size_bytes"))
        .expect("the cycles plot");
    for t in [
        "core.scheduler=lrr",
        "core.scheduler=gto",
        "1048576",
        "4194304",
    ] {
        assert!(cycles.contains(t), "{t:?} missing");
    }
    // Numeric values in numeric order.
    assert!(cycles.find("1048576") < cycles.find("4194304"));
    assert!(r.html.contains("<details>"));
    assert!(!r.html.contains("Side by side"));
}

#[test]
fn two_runs_are_compared_side_by_side() {
    let files = vec![
        (PathBuf::from("a.json"), point(1048576, "lrr", 100)),
        (PathBuf::from("b.json"), point(1048576, "gto", 150)),
    ];
    let r = render(&files, None).unwrap();
    assert!(r.html.contains("Side by side: A = a, B = b"));
    assert!(r.html.contains("1.500x"), "the ratio of the cycles");
    assert!(svgs(&r.html).iter().any(|s| s.contains("B relative to A")));
    assert!(r
        .html
        .contains("<td>--set core.scheduler</td><td>lrr</td><td>gto</td>"));
}

#[test]
fn text_is_escaped() {
    assert_eq!(
        esc("<a href=\"x\">&'"),
        "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
    );
    let v = json!({"stats_version": 6, "config": "<script>"});
    let r = render(&[(PathBuf::from("x.json"), v)], None).unwrap();
    assert!(!r.html.contains("<script>"));
}

#[test]
fn overlapping_launches_take_extra_rows_and_gpus_sort_by_number() {
    let k = |gpu: u64, s: u64, e: u64| json!({"name": "k", "gpu": gpu, "start_ps": s, "end_ps": e});
    let v = json!({"stats_version": 6, "kernels": [
        k(0, 0, 10), k(0, 5, 20), k(0, 12, 30), k(10, 0, 5), k(9, 0, 5)]});
    let r = render(&[(PathBuf::from("k.json"), v)], None).unwrap();
    let tl = svgs(&r.html)
        .into_iter()
        .find(|s| s.contains("Kernels over time"))
        .unwrap();
    // k(0, 12, 30) reuses the first row (its launch ended at 10): two rows for GPU 0.
    assert!(tl.contains("GPU 0 #2") && !tl.contains("GPU 0 #3"));
    assert!(tl.contains("GPU 9") && tl.contains("GPU 10"));
    assert!(natural_sorted(&["GPU 10", "GPU 9", "GPU 0"]) == ["GPU 0", "GPU 9", "GPU 10"]);
}

fn natural_sorted(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort_by_key(|s| run::natural_key(s));
    v
}

mod any_shape {
    use super::*;
    use proptest::prelude::*;

    /// JSON of any shape, with the keys the report reads among its object keys.
    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "[a-z0-9 _]{0,6}".prop_map(Value::from),
        ];
        let key = prop_oneof![
            Just("start_ps"),
            Just("end_ps"),
            Just("gpu"),
            Just("name"),
            Just("stream"),
            Just("id"),
            Just("ipc"),
            Just("from"),
            Just("to"),
            Just("bytes"),
            Just("wire_bytes"),
            Just("busy_ps"),
            Just("utilization"),
            Just("dram_gbps"),
            Just("dram_bytes"),
            Just("l2_hit_rate"),
            Just("interval_ps"),
            Just("interval_cycles"),
            Just("stalls"),
            Just("slots"),
            Just("issued"),
            Just("memory"),
            Just("host_memory"),
            Just("l2_hits"),
            Just("l2_accesses"),
            Just("llc_accesses"),
            Just("chiplets"),
            Just("links"),
            Just("overrides"),
        ]
        .prop_map(str::to_string);
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn arb_stats() -> impl Strategy<Value = Value> {
        (
            arb_json(),
            arb_json(),
            arb_json(),
            arb_json(),
            arb_json(),
            arb_json(),
        )
            .prop_map(|(k, c, l, t, ts, prov)| {
                json!({"stats_version": 6, "kernels": k, "chiplets": c, "links": l,
                    "totals": t, "timeseries": ts, "provenance": prov})
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        /// Whatever the values under the keys it reads, a report is a page (no panic),
        /// one file or several.
        #[test]
        fn any_values_give_a_page(a in arb_stats(), b in arb_stats()) {
            let one = render(&[(PathBuf::from("a.json"), a.clone())], None).unwrap();
            prop_assert_eq!(svgs(&one.html).len(), one.charts);
            let two = render(&[(PathBuf::from("a.json"), a), (PathBuf::from("b.json"), b)], None)
                .unwrap();
            prop_assert_eq!(svgs(&two.html).len(), two.charts);
        }
    }
}
