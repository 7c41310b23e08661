//! Write acknowledgements (`l2.write_acks`, issue 22 item 4): a store is done for its warp
//! when the L2 slice that performed it has acknowledged it, so a fence and its CTA's
//! completion wait for the acknowledgement, as GPGPU-Sim's `m_stores_outstanding` makes a
//! warp at a `membar` or at its exit wait. The expectations are computed from the
//! configuration's latencies (the path an acknowledgement takes), not from a run.

mod common;

use common::*;

/// Core cycles of the kernels of a run.
fn kernel_cycles(stats: &str) -> Vec<i64> {
    json(stats)["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["cycles"].as_i64().unwrap())
        .collect()
}

/// On a100.yaml, in core cycles: what an acknowledged store adds to a warp whose last
/// instruction it is: the acknowledgement leaves the slice `l2.hit_latency_cycles` after
/// the write arrives and crosses the NoC back, while the store alone was done after the L1
/// stage: 2 NoC latencies + the L2 hit latency - the L1 hit latency.
fn ack_round_trip_cycles() -> f64 {
    let (core, noc, l2) = (1.41e9, 1.41e9, 1.512e9); // a100.yaml core, noc, l2 clock_hz
    let (noc_lat, l2_hit, l1_hit) = (20.0, 147.0, 36.0); // its latency_cycles keys
    (2.0 * noc_lat / noc + l2_hit / l2) * core - l1_hit
}

#[test]
fn a_kernel_ending_in_stores_waits_one_l2_round_trip_for_their_acks() {
    let p = [
        "--workload",
        "stencil2d",
        "-p",
        "nx=128",
        "-p",
        "ny=128",
        "-p",
        "iters=2",
        // Credits at the crossbar need the acknowledgements: both runs go without them.
        "--set",
        "noc.input_buffer_flits=0",
    ];
    let (on, _) = run_stats("a100.yaml", &p);
    let mut off_args = p.to_vec();
    off_args.extend(["--set", "l2.write_acks=false"]);
    let (off, _) = run_stats("a100.yaml", &off_args);
    let rt = ack_round_trip_cycles();
    for (k, (a, b)) in kernel_cycles(&on)
        .iter()
        .zip(kernel_cycles(&off))
        .enumerate()
    {
        // Every thread of a Jacobi step ends with its store: the last CTA retires one
        // acknowledgement later; its warps' acknowledgements queue behind each other at
        // the slices' NoC egress and the SM's ingress (a few cycles), and cycles round.
        let d = (a - b) as f64;
        assert!(
            d >= rt - 2.0 && d <= rt + 8.0,
            "kernel {k}: {a} cycles with acknowledgements, {b} without: {d} more, expected \
             about {rt:.1} (2 NoC latencies + L2 hit - L1 hit)"
        );
    }
    // The acknowledgements cross the NoC: 8 header bytes per write packet.
    let (j_on, j_off) = (json(&on), json(&off));
    let replies = |j: &serde_json::Value| {
        j["chiplets"][0]["memory"]["noc_reply_bytes"]
            .as_u64()
            .unwrap()
    };
    let writes = j_on["chiplets"][0]["memory"]["global_requests"]
        .as_u64()
        .unwrap();
    assert!(replies(&j_on) > replies(&j_off));
    assert!(replies(&j_on) - replies(&j_off) <= 8 * 4 * writes);
}

/// Writes a one-warp kernel running `body` (Accel-Sim trace lines after the PC) as an
/// Accel-Sim trace directory, imports it; returns the .tst path.
fn hand_trace(dir: &std::path::Path, name: &str, body: &[&str]) -> std::path::PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let mut k = String::from(
        "-kernel name = _Z4acksv\n-kernel id = 1\n-grid dim = (1,1,1)\n-block dim = (32,1,1)\n\
         -shmem = 0\n-nregs = 8\n-binary version = 80\n-cuda stream id = 0\n\
         -shmem base_addr = 0x0000000000000000\n-local mem base_addr = 0x0000000000000000\n\
         -nvbit version = 1.5.5\n-accelsim tracer version = 5\n-enable lineinfo = 0\n\n\
         #traces format = [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] \
         mem_width [adrrescompress?] [mem_addresses] immediate\n\n#BEGIN_TB\n\n\
         thread block = 0,0,0\n\nwarp = 0\n",
    );
    k.push_str(&format!("insts = {}\n", body.len()));
    for (i, line) in body.iter().enumerate() {
        k.push_str(&format!("{:04x} ffffffff {line}\n", i * 16));
    }
    k.push_str("\n#END_TB\n\n");
    std::fs::write(d.join("kernel-1.traceg"), k).unwrap();
    std::fs::write(
        d.join("kernelslist.g"),
        "MemAlloc,0x00007f2000000000,65536\nkernel-1.traceg\n",
    )
    .unwrap();
    let tst = dir.join(format!("{name}.tst"));
    import(&d, &tst, &[]);
    tst
}

/// Kernel cycles of `tst` on a100.yaml with acknowledgements minus without.
fn ack_cost(tst: &std::path::Path) -> f64 {
    let t = tst.to_str().unwrap();
    // Credits at the crossbar need the acknowledgements: both runs go without them.
    let no_credits = ["--set", "noc.input_buffer_flits=0"];
    let on = run_stats("a100.yaml", &[&["--trace", t][..], &no_credits].concat()).0;
    let off = run_stats(
        "a100.yaml",
        &[
            &["--trace", t][..],
            &no_credits,
            &["--set", "l2.write_acks=false"],
        ]
        .concat(),
    )
    .0;
    (kernel_cycles(&on)[0] - kernel_cycles(&off)[0]) as f64
}

#[test]
fn a_fence_waits_for_store_acknowledgements() {
    // Two stores to different lines, with and without a `MEMBAR.SC.GPU` between them. With
    // acknowledgements the fence holds the second store until the first's acknowledgement
    // is back, and the warp's exit waits for the second's: two round trips more than
    // without. Without the fence both are in flight together: one.
    let tmp = tempfile::tempdir().unwrap();
    let st = |addr: &str| format!("0 STG.E 2 R2 R4 4 1 {addr} 4 0");
    let (a, b) = (st("0x7f2000000000"), st("0x7f2000001000"));
    let fenced = hand_trace(
        tmp.path(),
        "fenced",
        &[&a, "0 MEMBAR.SC.GPU 0 0 0", &b, "0 EXIT 0 0 0"],
    );
    let plain = hand_trace(
        tmp.path(),
        "plain",
        &[&a, "0 NOP 0 0 0", &b, "0 EXIT 0 0 0"],
    );
    let rt = ack_round_trip_cycles();
    // The crossbar steps at NoC cycles (the core clock on a100.yaml): a packet waits at
    // most one for the next at each of a round trip's two crossings; and cycles round.
    let align = 2.0;
    let (f, p) = (ack_cost(&fenced), ack_cost(&plain));
    assert!(
        p >= rt - 1.0 && p <= rt + align + 1.0,
        "without a fence: {p} cycles more, expected {rt:.1}"
    );
    assert!(
        f >= 2.0 * rt - 1.0 && f <= 2.0 * (rt + align) + 1.0,
        "with a fence: {f} cycles more, expected {:.1} (two acknowledgement round trips)",
        2.0 * rt
    );
}

#[test]
fn acknowledged_runs_are_the_same_on_any_threads_and_cut() {
    // Acknowledgements cross chiplets (a store to a remote home is acknowledged from there):
    // the same results on 1 and 2 threads and cut by SM cluster.
    let p = [
        "--workload",
        "stencil2d",
        "-p",
        "nx=64",
        "-p",
        "ny=64",
        "-p",
        "iters=2",
    ];
    for cfg in ["a100-4chiplet.yaml", "radeon7-4chiplet.yaml"] {
        let (one, _) = run_stats(cfg, &p);
        let mut two = p.to_vec();
        two.extend(["--threads", "2"]);
        assert_eq!(one, run_stats(cfg, &two).0, "{cfg}: 1 vs 2 threads");
        let mut cut = two.clone();
        cut.extend([
            "--set",
            "partitioning.mode=sm_cluster",
            "--set",
            "partitioning.sm_clusters=2",
        ]);
        assert_eq!(one, run_stats(cfg, &cut).0, "{cfg}: cut in 8 partitions");
    }
}
