//! `noc.model: crossbar` (issue 22 item 2): an input-queued crossbar per chiplet and class
//! between the SMs, the L2 slices and the link interface. Its arbitration is checked
//! against Karol et al.'s saturation figures in `interconnect/src/crossbar.rs`; here, end to
//! end: the same bytes on any threads, cuts and run-ahead; every NoC packet crosses it once;
//! an unloaded load pays at most one NoC cycle of alignment per crossing over the port
//! model, and a saturated one pays head-of-line blocking.

mod common;

use common::*;
use serde_json::Value;

const XBAR: [&str; 2] = ["--set", "noc.model=crossbar"];

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// The stats of `run` with 2 threads, with a 3-cluster cut on 2 threads and without
/// run-ahead are `seq`, the bytes of one thread (`what` names the case in a failure).
fn same_on_threads_cuts_and_run_ahead(seq: &str, run: impl Fn(&[&str]) -> String, what: &str) {
    for extra in [
        &["--threads", "2"][..],
        &[
            "--set",
            "partitioning.mode=sm_cluster",
            "--set",
            "partitioning.sm_clusters=3",
            "--threads",
            "2",
        ][..],
        &["--set", "partitioning.run_ahead=false"][..],
    ] {
        assert!(
            run(extra) == seq,
            "{what} {extra:?} differs from --threads 1"
        );
    }
}
#[test]
fn threads_cuts_and_run_ahead_never_change_the_crossbar() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let t = tst.to_str().unwrap();
    // A monolithic GPU, 4 chiplets with a memory-side L2 (requests cross the links), 4
    // chiplets with private L2s and LLCs (slice-to-LLC traffic crosses the crossbar too).
    for (cfg, arbiter) in [
        ("titanv.yaml", "noc.arbiter=fifo"),
        ("titanv.yaml", "noc.arbiter=islip"),
        ("a100-4chiplet.yaml", "noc.arbiter=islip"),
        ("radeon7-4chiplet.yaml", "noc.arbiter=islip"),
    ] {
        let run = |extra: &[&str]| {
            run_stats(
                cfg,
                &[&["--trace", t][..], &XBAR, &["--set", arbiter], extra].concat(),
            )
            .0
        };
        let seq = run(&["--threads", "1"]);
        let s = json(&seq);
        for c in s["chiplets"].as_array().unwrap() {
            let x = &c["crossbar"];
            assert!(u(&x["requests"], "packets") > 0, "{cfg}: {c}");
            assert!(u(&x["replies"], "packets") > 0, "{cfg}: {c}");
        }
        same_on_threads_cuts_and_run_ahead(&seq, run, cfg);
    }
}

#[test]
fn every_request_and_its_answer_cross_the_crossbar_once() {
    // STREAM copy on one chiplet, write-through L1, write acknowledgements on: each read or
    // write request has exactly one reply or acknowledgement, and each packet is at least
    // one flit (40 B on titanv.yaml) and at most ceil((8 + 128) / 40) = 4.
    let s = run_json(
        "titanv.yaml",
        &[
            &[
                "--workload",
                "stream",
                "-p",
                "n=65536",
                "-p",
                "kernels=copy",
            ][..],
            &XBAR,
        ]
        .concat(),
    );
    let x = &s["chiplets"][0]["crossbar"];
    let (req, rep) = (&x["requests"], &x["replies"]);
    assert_eq!(u(req, "packets"), u(rep, "packets"));
    for n in [req, rep] {
        assert!(u(n, "flits") >= u(n, "packets") && u(n, "flits") <= 4 * u(n, "packets"));
    }
    // The ports model has no crossbar entry.
    let p = run_json(
        "titanv.yaml",
        &[
            "--workload",
            "stream",
            "-p",
            "n=65536",
            "-p",
            "kernels=copy",
            "--set",
            "noc.model=ports",
        ],
    );
    assert!(p["chiplets"][0].get("crossbar").is_none());
}

#[test]
fn one_load_pays_at_most_alignment_and_a_saturated_stream_pays_blocking() {
    // A pointer chase through L2 (1 MiB chain, every load dependent on the last): each load
    // crosses the crossbar twice, `latency_cycles / 2` NoC cycles to it and the rest from
    // it (the port model's `latency_cycles` in all) plus up to one cycle waiting for the
    // crossbar's next cycle each time: at most 2 NoC cycles (here core cycles: titanv's NoC runs at
    // the core clock) more per load.
    let chase = |extra: &[&str]| {
        run_json(
            "titanv.yaml",
            &[
                &[
                    "--workload",
                    "pointer_chase",
                    "-p",
                    "footprint=1048576",
                    "-p",
                    "loads=1024",
                ][..],
                extra,
            ]
            .concat(),
        )
    };
    let cycles = |s: &Value| u(&s["totals"], "gpu_tot_sim_cycle");
    let (p, x) = (chase(&[]), chase(&XBAR));
    let extra = cycles(&x) as i64 - cycles(&p) as i64;
    // 1,024 measured loads plus the warm-up pass over the chain (8,192 slots).
    let loads = 1024 + 8192;
    assert!(
        (0..=2 * loads).contains(&extra),
        "the crossbar added {extra} cycles to {loads} dependent loads"
    );
    // vectorAdd replicated 8 times on rtx3070.yaml, L2-resident: requests from 46 SMs
    // contend for 32 slices and replies for the SMs. With FIFO inputs a packet behind a
    // blocked head waits: the kernel takes at least 10% longer than with the port model
    // (measured: 20%); with virtual output queues and iSLIP (the default arbiter) it does
    // not, and the kernel is faster than with FIFO inputs (measured: 5% over ports).
    // Accel-Sim took about 1.6 times as long as tessera's port model on this trace (issue
    // 22): its crossbar alone does not explain that.
    let va = |extra: &[&str]| {
        run_json(
            "rtx3070.yaml",
            &[&["--workload", "vectoradd", "-p", "n=401408"][..], extra].concat(),
        )
    };
    let span = |s: &Value| {
        let k = &s["kernels"][0];
        u(k, "end_ps") - u(k, "start_ps")
    };
    let fifo = [&XBAR[..], &["--set", "noc.arbiter=fifo"]].concat();
    let (p, x, islip) = (va(&[]), va(&fifo), va(&XBAR));
    assert!(
        span(&x) as f64 > 1.1 * span(&p) as f64,
        "FIFO crossbar {} ps, ports {} ps",
        span(&x),
        span(&p)
    );
    assert!(span(&islip) < span(&x), "iSLIP {} ps", span(&islip));
    let waits = u(&x["chiplets"][0]["crossbar"]["replies"], "wait_cycles");
    assert!(waits > 0);
}

#[test]
fn credits_bound_each_input_and_stall_the_issue_when_the_miss_queue_fills() {
    // Each SM's request input holds 8 flits (two write packets of 4 flits, or eight
    // reads), and its miss queue 4 packets: on titanv.yaml only SMs send requests, so no
    // request input ever held more than 8 packets; packets waited for credit, and the SMs
    // stopped issuing memory instructions while their miss queues were full, every
    // scheduler-cycle still counted once. Threads, cuts and run-ahead change nothing.
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let t = tst.to_str().unwrap();
    let set = [
        "--set",
        "noc.input_buffer_flits=8",
        "--set",
        "l1d.miss_queue_packets=4",
    ];
    let run = |extra: &[&str]| {
        run_stats(
            "titanv.yaml",
            &[&["--trace", t][..], &XBAR, &set, extra].concat(),
        )
        .0
    };
    let seq = run(&["--threads", "1"]);
    let s = json(&seq);
    let c = &s["chiplets"][0];
    assert!(
        u(&c["crossbar"]["requests"], "max_input_packets") <= 8,
        "{c}"
    );
    assert!(u(&c["memory"], "noc_credit_waits") > 0);
    assert!(u(&c["memory"], "noc_credit_wait_ps") > 0);
    let st = &s["totals"]["stalls"];
    assert!(u(st, "no_credit") > 0, "{st}");
    let parts = stall_slots(st);
    assert_eq!(parts, u(st, "slots"));
    // The default input (512 flits) never runs out on this stream: no stall, no wait.
    let free = run_json("titanv.yaml", &[&["--trace", t][..], &XBAR].concat());
    assert_eq!(u(&free["totals"]["stalls"], "no_credit"), 0);
    same_on_threads_cuts_and_run_ahead(&seq, run, "titanv.yaml");
}

#[test]
fn credits_that_could_never_send_a_packet_are_refused() {
    // titanv.yaml: 40-byte flits, 128-byte lines: the largest request, a write of a whole
    // line, is 4 flits.
    let o = tessera(&run_args(
        "titanv.yaml",
        &[
            &["--workload", "vectoradd"][..],
            &XBAR,
            &["--set", "noc.input_buffer_flits=3"],
        ]
        .concat(),
    ));
    assert_clean_failure(
        &o,
        &["noc.input_buffer_flits", "4 flits", "largest request"],
    );
    let o = tessera(&run_args(
        "titanv.yaml",
        &[
            &["--workload", "vectoradd"][..],
            &XBAR,
            &["--set", "l2.write_acks=false"],
        ]
        .concat(),
    ));
    assert_clean_failure(&o, &["noc.input_buffer_flits", "l2.write_acks"]);
}

/// With `key` = 1, a slice queue behind one credit per packet of `network` ("requests"
/// or "replies") paces the slices by the credit round trip: on titanv.yaml with a NoC of
/// 40 cycles at 1 GHz, at most one packet per slice every 40 ns, so the run lasts at least
/// packets / 48 slices x 40 ns (an analytical bound), which unbounded queues (`key` = 0)
/// beat, so it is the credits that hold the packets back. Then `check(unbounded, one)`;
/// the same bytes on threads, cuts and run-ahead, also with queues of two where the queues
/// are an LLC slice's too (a private L2) or meet the link interface (4 chiplets), whose
/// stats `multi(cfg, stats)` checks.
fn one_credit_paces_the_slices(
    key: &str,
    network: &str,
    check: impl Fn(&Value, &Value),
    multi: impl Fn(&str, &Value),
) {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let t = tst.to_str().unwrap();
    let noc = [
        "--set",
        "noc.clock_hz=1000000000",
        "--set",
        "noc.latency_cycles=40",
    ];
    let run = |q: &str, extra: &[&str]| {
        let queue = format!("{key}={q}");
        run_stats(
            "titanv.yaml",
            &[&["--trace", t][..], &XBAR, &noc, &["--set", &queue], extra].concat(),
        )
        .0
    };
    let bound =
        |s: &Value| u(&s["chiplets"][0]["crossbar"][network], "packets") as f64 * 40_000.0 / 48.0;
    let span = |s: &Value| u(&s["totals"], "sim_time_ps") as f64;
    let free = json(&run("0", &[]));
    let one = run("1", &["--threads", "1"]);
    let s = json(&one);
    assert!(span(&free) < bound(&free), "unbounded: {} ps", span(&free));
    assert!(span(&s) >= bound(&s), "{} ps < {} ps", span(&s), bound(&s));
    check(&free, &s);
    same_on_threads_cuts_and_run_ahead(&one, |e| run("1", e), "titanv.yaml");
    let two = format!("{key}=2");
    for cfg in ["a100-4chiplet.yaml", "radeon7-4chiplet.yaml"] {
        let run = |extra: &[&str]| {
            run_stats(
                cfg,
                &[&["--trace", t][..], &XBAR, &["--set", &two], extra].concat(),
            )
            .0
        };
        let seq = run(&["--threads", "1"]);
        multi(cfg, &json(&seq));
        same_on_threads_cuts_and_run_ahead(&seq, run, cfg);
    }
}

/// The sum over chiplets of `f` of each chiplet's stats.
fn over_chiplets(s: &Value, f: impl Fn(&Value) -> u64) -> u64 {
    s["chiplets"].as_array().unwrap().iter().map(f).sum()
}

#[test]
fn a_slice_request_queue_of_one_request_paces_its_slice_by_the_credit_round_trip() {
    // The crossbar grants a slice one request, then waits for the slice to take it (no
    // sooner than its arrival, the crossbar's leg out, the rest of `noc.latency_cycles`
    // after the grant) and for the credit to come back (the leg in, `latency_cycles / 2`).
    one_credit_paces_the_slices(
        "l2.request_queue_packets",
        "requests",
        |free, s| {
            assert!(u(&s["chiplets"][0]["crossbar"]["requests"], "queue_full") > 0);
            assert_eq!(
                u(&free["chiplets"][0]["crossbar"]["requests"], "queue_full"),
                0
            );
        },
        |cfg, s| {
            let full = over_chiplets(s, |c| u(&c["crossbar"]["requests"], "queue_full"));
            assert!(full > 0, "{cfg}: no request queue filled");
        },
    );
}

#[test]
fn a_slice_reply_queue_of_one_packet_paces_its_replies_and_holds_its_requests_back() {
    // A slice sends a reply into its crossbar input only with its one credit, which comes
    // back when the crossbar grants the packet (no sooner than its arrival,
    // `noc.latency_cycles / 2` cycles after it left) plus the leg out (the rest). While a
    // reply waits its slice takes no request, so the request queues fill too, and no slice's input
    // ever holds more than its one packet.
    one_credit_paces_the_slices(
        "l2.reply_queue_packets",
        "replies",
        |free, s| {
            let (m, x) = (&s["chiplets"][0]["memory"], &s["chiplets"][0]["crossbar"]);
            assert_eq!(u(&x["replies"], "max_input_packets"), 1, "{x}");
            assert!(u(m, "noc_reply_credit_waits") > 0 && u(m, "noc_reply_credit_wait_ps") > 0);
            assert!(u(m, "l2_held_requests") > 0, "{m}");
            assert!(u(&x["requests"], "queue_full") > 0, "{x}");
            let (fm, fx) = (
                &free["chiplets"][0]["memory"],
                &free["chiplets"][0]["crossbar"],
            );
            assert!(u(&fx["replies"], "max_input_packets") > 1, "{fx}");
            assert_eq!(
                u(fm, "noc_reply_credit_waits") + u(fm, "l2_held_requests"),
                0
            );
        },
        // (`max_input_packets` counts the link interface's inputs too, which hold more.)
        |cfg, s| {
            let waits = over_chiplets(s, |c| u(&c["memory"], "noc_reply_credit_waits"));
            assert!(waits > 0, "{cfg}: no reply waited");
        },
    );
}

#[test]
fn the_summary_says_what_the_crossbar_did() {
    // The summary's NoC line counts the packets the stats count; the ports model has none.
    let args = ["--workload", "vectoradd", "-p", "n=20000"];
    let (stats, out) = run_stats_full("titanv.yaml", &args);
    let s = json(&stats);
    let x = &s["chiplets"][0]["crossbar"];
    let want = format!(
        "NoC: {} requests and {} replies through the crossbar",
        u(&x["requests"], "packets"),
        u(&x["replies"], "packets")
    );
    assert!(out.contains(&want), "{want:?} not in:\n{out}");
    let (_, ports) = run_stats_full(
        "titanv.yaml",
        &[&args[..], &["--set", "noc.model=ports"]].concat(),
    );
    assert!(!ports.contains("NoC:"), "{ports}");
    // With reply queues of one packet, the "no credit" line counts the replies that waited
    // and the requests held back, as the stats do.
    let (stats, out) = run_stats_full(
        "titanv.yaml",
        &[&args[..], &["--set", "l2.reply_queue_packets=1"]].concat(),
    );
    let m = &json(&stats)["chiplets"][0]["memory"];
    let want = format!(
        "{} replies waited for room in their slice's reply queue, {} ps in all, {} requests \
         held back meanwhile",
        u(m, "noc_reply_credit_waits"),
        u(m, "noc_reply_credit_wait_ps"),
        u(m, "l2_held_requests")
    );
    assert!(u(m, "noc_reply_credit_waits") > 0);
    assert!(out.contains(&want), "{want:?} not in:\n{out}");
}

#[test]
fn a_link_interface_queue_of_one_packet_per_port_backs_up_into_the_crossbar() {
    // `package.link.noc_queue_packets=1` on 4 chiplets with links narrowed to 64 B per
    // cycle, so that the remote traffic waits at the link interfaces: each of an
    // interface's crossbar ports then holds one packet per network, its output's credit
    // spent until the packet's last byte has left on its link, so the reply network's
    // outputs (only the interfaces' have credits there) run out; unbounded, they never do.
    // The run completes, and threads, cuts and run-ahead change nothing.
    let args = |q: &str| {
        vec![
            "--workload".to_string(),
            "stream".to_string(),
            "-p".to_string(),
            "n=65536".to_string(),
            "--set".to_string(),
            "package.link.bandwidth_bytes_per_cycle=64".to_string(),
            "--set".to_string(),
            format!("package.link.noc_queue_packets={q}"),
        ]
    };
    let run = |q: &str, extra: &[&str]| {
        let a = args(q);
        let a: Vec<&str> = a
            .iter()
            .map(|s| s.as_str())
            .chain(extra.iter().copied())
            .collect();
        run_stats("a100-4chiplet.yaml", &a).0
    };
    let full = |s: &Value| over_chiplets(s, |c| u(&c["crossbar"]["replies"], "queue_full"));
    let one = run("1", &["--threads", "1"]);
    let s = json(&one);
    assert!(full(&s) > 0, "no link interface queue filled");
    let free = json(&run("0", &[]));
    assert_eq!(full(&free), 0);
    assert!(u(&s["totals"], "sim_time_ps") >= u(&free["totals"], "sim_time_ps"));
    same_on_threads_cuts_and_run_ahead(&one, |e| run("1", e), "a100-4chiplet.yaml");
}

#[test]
fn every_crossbar_input_stays_within_its_credits_on_four_chiplets() {
    // Inputs of 8 flits (`noc.input_buffer_flits`: the SMs' and, per port and network, the
    // link interfaces') and slice reply queues of 8 packets, on 4 chiplets with links
    // narrowed to 64 B per cycle so that remote traffic backs up: no input of either
    // network ever holds more than 8 packets (each is at least a flit), where without
    // credits the link interfaces' inputs hold more; the run completes, and threads, cuts
    // and run-ahead change nothing.
    let base = [
        "--workload",
        "stream",
        "-p",
        "n=65536",
        "--set",
        "package.link.bandwidth_bytes_per_cycle=64",
        "--set",
        "l2.reply_queue_packets=8",
    ];
    let run = |flits: &str, extra: &[&str]| {
        let set = format!("noc.input_buffer_flits={flits}");
        let mut a: Vec<&str> = base.to_vec();
        a.extend(["--set", &set]);
        a.extend(extra);
        run_stats("a100-4chiplet.yaml", &a).0
    };
    let most = |s: &Value| -> u64 {
        s["chiplets"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| {
                ["requests", "replies"].map(|n| u(&c["crossbar"][n], "max_input_packets"))
            })
            .max()
            .unwrap()
    };
    let seq = run("8", &["--threads", "1"]);
    assert!(most(&json(&seq)) <= 8, "{}", most(&json(&seq)));
    let free = json(&run("0", &[]));
    assert!(
        most(&free) > 8,
        "unbounded inputs never held more than 8 packets"
    );
    same_on_threads_cuts_and_run_ahead(&seq, |e| run("8", e), "a100-4chiplet.yaml");
}
