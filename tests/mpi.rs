//! End-to-end tests of the MPI transport (`--features mpi`; `scripts/test.sh` installs
//! Open MPI and runs them): `mpirun -np R tessera run ...` gives the stats of `--threads 1`
//! byte for byte for any rank count, even ones that do not divide the partitions, with
//! either exchange; and a rank that fails, while loading or in the middle of the run, ends
//! the whole job with its message instead of hanging it.
#![cfg(feature = "mpi")]

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output};

/// `mpirun -np <np> <program> <args...>`, oversubscribed (CI has 2 cores), as root where
/// CI runs, bounded by a timeout so that a hung job fails the test instead of CI.
fn mpirun<S: AsRef<std::ffi::OsStr>>(np: usize, program: &str, args: &[S]) -> Output {
    mpirun_env(np, program, args, &[])
}

/// [`mpirun`] with extra environment variables for every rank.
fn mpirun_env<S: AsRef<std::ffi::OsStr>>(
    np: usize,
    program: &str,
    args: &[S],
    env: &[(&str, &Path)],
) -> Output {
    // A session directory of its own: tests run in parallel, and two mpiruns starting at
    // once can race to create Open MPI's shared one ("mkdir ... File exists").
    let session = tempfile::tempdir().unwrap();
    let mut c = Command::new("timeout");
    c.args(["300", "mpirun", "--oversubscribe", "--bind-to", "none"])
        .args(["-np", &np.to_string(), program])
        .args(args)
        .env("OMPI_MCA_orte_tmpdir_base", session.path())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // Ranks waiting in a collective give their core up (more ranks than cores).
        .env("OMPI_MCA_mpi_yield_when_idle", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("mpirun runs (Open MPI installed?)");
    assert_ne!(o.status.code(), Some(124), "mpirun -np {np} hung");
    o
}

/// The arguments of `tessera run --config configs/<cfg> --trace <tst> --stats-out <out>
/// <extra...>` ([`run_args`] with the trace and the stats file).
fn run_to(cfg: &str, tst: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let (tst, out) = (tst.display().to_string(), out.display().to_string());
    let mut a = vec!["--trace", &tst, "--stats-out", &out];
    a.extend_from_slice(extra);
    run_args(cfg, &a)
}

/// The stats text of `mpirun -np <np> tessera run --config configs/<cfg> --trace <tst>
/// <extra...>`, which must succeed.
fn mpi_stats(np: usize, cfg: &str, tst: &Path, extra: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("stats.json");
    let o = mpirun(np, bin(), &run_to(cfg, tst, &out, extra));
    assert!(
        o.status.success(),
        "mpirun -np {np} failed:\n{}",
        stderr(&o)
    );
    // Only rank 0 prints the summary.
    assert_eq!(
        stdout(&o).matches("gpu_tot_sim_cycle").count(),
        1,
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains(&format!("{np} mpi rank(s)")));
    assert!(!partial(&out).exists());
    let text = std::fs::read_to_string(&out).unwrap();
    let run = &json(&text)["run"];
    assert_eq!(run["ranks"].as_u64(), Some(np as u64), "{run}");
    simulated(&text)
}

/// Three workloads on chiplet GPUs cut into 8 partitions (each chiplet in 2 by SM
/// cluster): stream on the memory-side-L2 a100-4chiplet (most requests remote), gemm on
/// it, and stencil2d over several kernels on radeon7-4chiplet (private L2s flushed at
/// kernel boundaries through the CPs). 1, 2, 3 and 5 ranks (3 and 5 host uneven blocks)
/// with the all-to-all exchange, 3 with the linked one, and 2 ranks of 2 threads each give
/// the bytes of `--threads 1`.
#[test]
fn ranks_never_change_results() {
    let tmp = tempfile::tempdir().unwrap();
    let split = [
        "--set",
        "partitioning.mode=sm_cluster",
        "--set",
        "partitioning.sm_clusters=2",
    ];
    for (cfg, w, params) in [
        ("a100-4chiplet.yaml", "stream", &["n=65536"][..]),
        (
            "a100-4chiplet.yaml",
            "gemm",
            &["m=128", "n=128", "k=64"][..],
        ),
        (
            "radeon7-4chiplet.yaml",
            "stencil2d",
            &["nx=128", "ny=128", "iters=3"][..],
        ),
    ] {
        let tst = gen(tmp.path(), w, params);
        let t = tst.to_str().unwrap();
        let seq = run_stats(
            cfg,
            &[&["--trace", t, "--threads", "1"][..], &split].concat(),
        )
        .0;
        let s = json(&seq);
        assert!(s["totals"]["warp_insts"].as_u64().unwrap() > 0);
        for np in [1, 2, 3, 5] {
            let got = mpi_stats(np, cfg, &tst, &split);
            assert!(
                got == seq,
                "{w} on {cfg}: -np {np} differs from --threads 1"
            );
        }
        let got = mpi_stats(
            3,
            cfg,
            &tst,
            &[&split[..], &["--mpi-exchange", "linked"]].concat(),
        );
        assert!(got == seq, "{w} on {cfg}: the linked exchange differs");
    }
}

/// Credits on the package links cross ranks as timed messages: a ring of 4 chiplets with
/// buffers of one packet (every buffer fills, packets cross up to two links) on 2 and 3
/// ranks, and with the linked exchange, gives the bytes of `--threads 1`.
#[test]
fn ranks_never_change_results_with_link_credits() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let t = tst.to_str().unwrap();
    let set = [
        "--set",
        "package.topology=ring",
        "--set",
        "package.link.buffer_bytes=144",
    ];
    let seq = run_stats(
        "a100-4chiplet.yaml",
        &[&["--trace", t, "--threads", "1"][..], &set].concat(),
    )
    .0;
    let waits: u64 = json(&seq)["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["credit_waits"].as_u64().unwrap())
        .sum();
    assert!(waits > 0, "no packet waited for credit");
    for np in [2, 3] {
        let got = mpi_stats(np, "a100-4chiplet.yaml", &tst, &set);
        assert!(got == seq, "-np {np} differs from --threads 1");
    }
    let linked = [&set[..], &["--mpi-exchange", "linked"]].concat();
    assert!(mpi_stats(3, "a100-4chiplet.yaml", &tst, &linked) == seq);
}

/// The NoC crossbar (`noc.model: crossbar`) with each chiplet cut in 2 by SM cluster: SMs
/// and slices of the second half reach their chiplet's crossbar across ranks. 2 and 3 ranks
/// give the bytes of `--threads 1`.
#[test]
fn ranks_never_change_results_with_the_crossbar() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let t = tst.to_str().unwrap();
    // Request and reply queues of two entries, so that the slices' credits bind both
    // ways.
    let set = [
        "--set",
        "noc.model=crossbar",
        "--set",
        "l2.request_queue_packets=2",
        "--set",
        "l2.reply_queue_packets=2",
        "--set",
        "partitioning.mode=sm_cluster",
        "--set",
        "partitioning.sm_clusters=2",
    ];
    let seq = run_stats(
        "a100-4chiplet.yaml",
        &[&["--trace", t, "--threads", "1"][..], &set].concat(),
    )
    .0;
    let s = json(&seq);
    assert!(s["chiplets"][0]["crossbar"].is_object());
    assert!(s["chiplets"][0]["crossbar"]["requests"]["queue_full"].as_u64() > Some(0));
    assert!(s["chiplets"][0]["memory"]["noc_reply_credit_waits"].as_u64() > Some(0));
    for np in [2, 3] {
        let got = mpi_stats(np, "a100-4chiplet.yaml", &tst, &set);
        assert!(got == seq, "-np {np} differs from --threads 1");
    }
}

/// `--max-cycles` under MPI: every rank's engine stops at the same simulated time, so
/// the partial stats of 2 ranks (of 1 and of 2 threads each) are the bytes of
/// `--threads 1`; so are those of `--max-warp-insts` (one thread per rank; refused with a
/// reason otherwise).
#[test]
fn run_limits_under_ranks_give_the_bytes_of_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let t = tst.to_str().unwrap();
    let cut = ["--max-cycles", "3000"];
    let seq = run_stats(
        "a100-4chiplet.yaml",
        &[&["--trace", t, "--threads", "1"][..], &cut].concat(),
    )
    .0;
    let s = json(&seq);
    assert_eq!(s["run_limit"]["partial"], true, "{}", s["run_limit"]);
    assert_eq!(s["totals"]["gpu_tot_sim_cycle"], 3000);
    let got = mpi_stats(2, "a100-4chiplet.yaml", &tst, &cut);
    assert!(got == seq, "--max-cycles: -np 2 differs from --threads 1");
    let got = mpi_stats(
        2,
        "a100-4chiplet.yaml",
        &tst,
        &[&cut[..], &["--threads", "2"]].concat(),
    );
    assert!(got == seq, "--max-cycles: -np 2 x 2 threads differs");
    // A limit past the end: the whole run, marked not partial.
    let whole = ["--max-cycles", "100000000"];
    let seq = run_stats(
        "a100-4chiplet.yaml",
        &[&["--trace", t][..], &whole].concat(),
    )
    .0;
    assert!(mpi_stats(2, "a100-4chiplet.yaml", &tst, &whole) == seq);
    // `--max-warp-insts`: the ranks sum their counts at the same steps.
    let limit = ["--max-warp-insts", "20000"];
    let seq = run_stats(
        "a100-4chiplet.yaml",
        &[&["--trace", t, "--threads", "2"][..], &limit].concat(),
    )
    .0;
    assert_eq!(json(&seq)["run_limit"]["partial"], true);
    assert!(mpi_stats(2, "a100-4chiplet.yaml", &tst, &limit) == seq);
    // Not with threads in the ranks, which cannot pause together: said before the run.
    let cfg = config("a100-4chiplet.yaml");
    let o = mpirun(
        2,
        bin(),
        &[
            "run".as_ref(),
            "--config".as_ref(),
            cfg.as_os_str(),
            "--trace".as_ref(),
            tst.as_os_str(),
            "--max-warp-insts".as_ref(),
            "1000".as_ref(),
            "--threads".as_ref(),
            "2".as_ref(),
        ] as &[&std::ffi::OsStr],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--max-warp-insts 1000: not supported under MPI with --threads"),
        "{}",
        stderr(&o)
    );
}

/// `--sample-every` under MPI: each rank samples its own partitions and rank 0 merges the
/// series with the other stats, so 2 and 3 ranks (2 x 2 threads too) write the bytes of
/// `--threads 1`, `timeseries` included.
#[test]
fn ranks_never_change_the_time_series() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let t = tst.to_str().unwrap();
    let extra = [
        "--set",
        "partitioning.mode=sm_cluster",
        "--set",
        "partitioning.sm_clusters=2",
        "--sample-every",
        "700",
    ];
    let seq = run_stats(
        "a100-4chiplet.yaml",
        &[&["--trace", t, "--threads", "1"][..], &extra].concat(),
    )
    .0;
    let s = json(&seq);
    assert!(s["timeseries"]["end_ps"].as_array().unwrap().len() > 2);
    assert!(!s["timeseries"]["links"].as_array().unwrap().is_empty());
    for np in [2, 3] {
        let got = mpi_stats(np, "a100-4chiplet.yaml", &tst, &extra);
        assert!(
            got == seq,
            "--sample-every: -np {np} differs from --threads 1"
        );
    }
    let got = mpi_stats(
        2,
        "a100-4chiplet.yaml",
        &tst,
        &[&extra[..], &["--threads", "2"]].concat(),
    );
    assert!(got == seq, "--sample-every: 2 ranks x 2 threads differ");
}

/// A multi-GPU system with peer traffic: 8 A100s behind an NVSwitch (dgx-8gpu.yaml, one
/// partition per GPU), each GPU reading half its inputs from the next GPU's memory. 1, 2,
/// 3 and 5 ranks (the switch links every GPU to every other, so the linked exchange talks
/// to every rank too), 2 ranks x 2 threads and 3 ranks dealt round robin give the bytes of
/// `--threads 1`.
#[test]
fn ranks_never_change_results_on_8_gpus_with_peer_traffic() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "peer_stream", &["gpus=8", "n=16384"]);
    let t = tst.to_str().unwrap();
    let seq = run_stats("dgx-8gpu.yaml", &["--trace", t, "--threads", "1"]).0;
    let s = json(&seq);
    // Half of each kernel's loads, a third of its requests, go to the next GPU.
    let global: u64 = s["chiplets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["memory"]["global_requests"].as_u64().unwrap())
        .sum();
    assert_eq!(s["totals"]["peer_requests"].as_u64().unwrap() * 3, global);
    for np in [1, 2, 3, 5] {
        let got = mpi_stats(np, "dgx-8gpu.yaml", &tst, &[]);
        assert!(got == seq, "peer_stream on dgx-8gpu: -np {np} differs");
    }
    let got = mpi_stats(3, "dgx-8gpu.yaml", &tst, &["--mpi-exchange", "linked"]);
    assert!(
        got == seq,
        "peer_stream on dgx-8gpu: the linked exchange differs"
    );
    let got = mpi_stats(2, "dgx-8gpu.yaml", &tst, &["--threads", "2"]);
    assert!(
        got == seq,
        "peer_stream on dgx-8gpu: 2 ranks x 2 threads differ"
    );
    let got = mpi_stats(3, "dgx-8gpu.yaml", &tst, &["--placement", "round_robin"]);
    assert!(
        got == seq,
        "peer_stream on dgx-8gpu: round-robin ranks differ"
    );
}

/// Eight GPUs of four chiplets (32 partitions): the per-pair windows (the default) and
/// the global ones, ranks x threads, the linked exchange and a weighted placement from
/// an earlier run's stats give the bytes of one thread; the per-pair windows exchange
/// between ranks less often; a weighted placement without a stats file is refused.
#[test]
fn per_pair_windows_and_weighted_ranks_never_change_results() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "peer_stream", &["gpus=8", "n=4096"]);
    let t = tst.to_str().unwrap();
    let prev = tmp.path().join("prev.json");
    let p = prev.to_str().unwrap();
    tessera_ok(&run_args(
        "dgx-8gpu-4chiplet.yaml",
        &["--trace", t, "--threads", "2", "--stats-out", p],
    ));
    let seq = simulated(&std::fs::read_to_string(&prev).unwrap());
    let cases: [&[&str]; 5] = [
        &["--windows", "global"],
        &["--mpi-exchange", "linked"],
        &["--threads", "2"],
        &["--placement", "weighted", "--weights", p],
        &["--placement", "round_robin", "--windows", "global"],
    ];
    for extra in cases {
        let got = mpi_stats(4, "dgx-8gpu-4chiplet.yaml", &tst, extra);
        assert!(got == seq, "8 x 4-chiplet GPUs on 4 ranks {extra:?} differ");
    }
    let windows = |extra: &[&str]| -> u64 {
        let out = tmp.path().join("w.json");
        let o = mpirun(
            2,
            bin(),
            &run_to("dgx-8gpu-4chiplet.yaml", &tst, &out, extra),
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let v = json(&std::fs::read_to_string(&out).unwrap());
        assert_eq!(v["run"]["engine"]["workers"].as_array().unwrap().len(), 2);
        v["run"]["engine"]["windows"].as_u64().unwrap()
    };
    let (pair, global) = (windows(&[]), windows(&["--windows", "global"]));
    assert!(
        pair * 3 < global,
        "per-pair {pair} vs global {global} exchanges"
    );
    let o = mpirun(
        2,
        bin(),
        &run_args(
            "dgx-8gpu-4chiplet.yaml",
            &["--trace", t, "--placement", "weighted"],
        ),
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("needs --weights"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Synchronization as values (issue 24) on ranks: `ht` and `atm` (locks homed across the
/// chiplets, spinning across the links) give the bytes of one thread at 2 and 3 ranks,
/// and of an SM-cluster cut; a grid barrier over more CTAs than the GPU holds gets the
/// watchdog's same verdict at the same cycle, with the same report, at 2 ranks (exit
/// status 3); several threads per rank are refused for a trace with spin regions.
#[test]
fn sync_values_and_the_watchdog_never_change_with_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    for (w, params) in [
        ("ht", &["buckets=128", "insertions=1024"][..]),
        ("atm", &["accounts=128", "transfers=512"][..]),
    ] {
        let dir = tmp.path().join(w);
        std::fs::create_dir_all(&dir).unwrap();
        let tst = gen(&dir, w, params);
        let t = tst.to_str().unwrap();
        let seq = run_stats("a100-4chiplet.yaml", &["--trace", t]).0;
        assert!(json(&seq)["sync"]["spin_iterations"].as_u64().unwrap() > 0);
        for np in [2, 3] {
            let got = mpi_stats(np, "a100-4chiplet.yaml", &tst, &[]);
            assert!(got == seq, "{w}: -np {np} differs from one thread");
        }
        let cut = [
            "--set",
            "partitioning.mode=sm_cluster",
            "--set",
            "partitioning.sm_clusters=2",
        ];
        let got = mpi_stats(3, "a100-4chiplet.yaml", &tst, &cut);
        assert!(got == seq, "{w}: -np 3 on a cut differs from one thread");
    }
    let dir = tmp.path().join("barrier");
    std::fs::create_dir_all(&dir).unwrap();
    let tst = gen(&dir, "atomic_barrier", &["ctas=16", "episodes=2"]);
    let small = [
        "--set",
        "core.sm_count=1",
        "--set",
        "core.max_ctas_per_sm=2",
        "--set",
        "watchdog.check_cycles=1000",
        "--set",
        "watchdog.livelock_cycles=20000",
    ];
    let stopped = |np: usize| -> String {
        let out = dir.join(format!("w{np}.json"));
        let args = run_to("a100-4chiplet.yaml", &tst, &out, &small);
        let o = if np == 1 {
            tessera(&args)
        } else {
            mpirun(np, bin(), &args)
        };
        assert_ne!(
            o.status.code(),
            Some(0),
            "-np {np}: the run was not stopped"
        );
        assert!(stderr(&o).contains("watchdog: deadlock"), "{}", stderr(&o));
        simulated(&std::fs::read_to_string(&out).unwrap())
    };
    let one = stopped(1);
    assert_eq!(json(&one)["watchdog"]["verdict"], "deadlock");
    assert!(
        stopped(2) == one,
        "the watchdog's report differs at 2 ranks"
    );
    let o = mpirun(
        2,
        bin(),
        &run_args(
            "a100-4chiplet.yaml",
            &["--trace", tst.to_str().unwrap(), "--threads", "2"],
        ),
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("one thread per rank"), "{}", stderr(&o));
}

/// More ranks than partitions: one clear error naming both counts, no stats file, no
/// temporary trace left by any rank.
#[test]
fn more_ranks_than_partitions_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=4096"]);
    let out = tmp.path().join("stats.json");
    let cfg = config("a100-4chiplet.yaml");
    let o = mpirun(
        5,
        bin(),
        &[
            "run".as_ref(),
            "--config".as_ref(),
            cfg.as_os_str(),
            "--trace".as_ref(),
            tst.as_os_str(),
            "--stats-out".as_ref(),
            out.as_os_str(),
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("5 MPI ranks for a system of 4 partition(s)"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.matches("error: ").count(), 1, "not one message:\n{err}");
    assert_no_output(&out);
    // The same with a built-in workload, recorded by every rank to a temporary trace:
    // the ranks leave none behind.
    let tmpdir = tmp.path().join("tmp");
    std::fs::create_dir(&tmpdir).unwrap();
    let cfg = config("a100-4chiplet.yaml");
    let args = [
        "run".as_ref(),
        "--config".as_ref(),
        cfg.as_os_str(),
        "--workload".as_ref(),
        "stream".as_ref(),
        "-p".as_ref(),
        "n=4096".as_ref(),
    ];
    let o = mpirun_env(5, bin(), &args, &[("TMPDIR", &tmpdir)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("5 MPI ranks"), "{}", stderr(&o));
    let left: Vec<_> = std::fs::read_dir(&tmpdir).unwrap().collect();
    assert!(left.is_empty(), "temporary traces left behind: {left:?}");
}

/// A wrapper script that runs `tessera run` with `$BAD` as the trace on rank 1 and `$GOOD`
/// on the others (what a rank with a broken copy of the trace, or a missing one, sees).
fn rank1_script(dir: &Path, cfg: &Path, out: &Path) -> String {
    let script = dir.join("rank1.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then t=\"$BAD\"; else t=\"$GOOD\"; fi\n\
             exec '{}' run --config '{}' --trace \"$t\" --stats-out '{}'\n",
            bin(),
            cfg.display(),
            out.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.to_str().unwrap().to_string()
}

/// Rank 1 cannot read its trace (a missing file): the job fails at once with rank 1's
/// message, printed once; the other ranks, which loaded theirs, do not hang.
#[test]
fn a_rank_that_cannot_load_ends_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let good = gen(tmp.path(), "stream", &["n=65536"]);
    let bad = tmp.path().join("missing.tst");
    let out = tmp.path().join("stats.json");
    let script = rank1_script(tmp.path(), &config("a100-4chiplet.yaml"), &out);
    let no_args: [&str; 0] = [];
    let o = mpirun_env(3, &script, &no_args, &[("GOOD", &good), ("BAD", &bad)]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.matches("error: ").count(), 1, "{err}");
    assert!(err.contains("error: rank 1 of 3"), "{err}");
    assert!(err.contains("missing.tst"), "{err}");
    assert_no_output(&out);
}

/// Rank 1's copy of the trace has corrupt instruction chunks (the index is intact, so it
/// loads): it fails in the middle of the simulation, while the other ranks wait for it in
/// a window's exchange; `MPI_Abort` ends them all with rank 1's message.
#[test]
fn a_rank_that_fails_mid_run_aborts_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let good = gen(tmp.path(), "stream", &["n=65536"]);
    let mut bytes = std::fs::read(&good).unwrap();
    // The footer's first field is the index offset: the chunks lie before it. Corrupt
    // the second half of them (the CTAs of the later chiplets, hosted by rank 1 of 2).
    let n = bytes.len();
    let index_at = u64::from_le_bytes(bytes[n - 32..n - 24].try_into().unwrap()) as usize;
    for f in [55, 60, 70, 80, 90] {
        bytes[16 + (index_at - 16) * f / 100] ^= 0xff;
    }
    let bad = tmp.path().join("bad.tst");
    std::fs::write(&bad, &bytes).unwrap();
    let out = tmp.path().join("stats.json");
    let script = rank1_script(tmp.path(), &config("a100-4chiplet.yaml"), &out);
    let no_args: [&str; 0] = [];
    let o = mpirun_env(2, &script, &no_args, &[("GOOD", &good), ("BAD", &bad)]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("error: rank 1 of 2"), "{err}");
    assert!(err.contains("chunk"), "{err}");
    // (mpirun adds its own MPI_ABORT banner, most of the time: not ours to test.)
    assert_no_output(&out);
}

/// `corpus check` outside MPI launches a case of several ranks under `mpirun`; under
/// `mpirun -np 2` the single-process cases are dealt to the ranks, rank 0 reports the same
/// rows for them, and the multi-rank case is skipped with the reason.
#[test]
fn corpus_under_mpirun_gives_the_same_report() {
    let d = tempfile::tempdir().unwrap();
    let cfgs = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let m = d.path().join("manifest.yaml");
    std::fs::write(
        &m,
        format!(
            "cases:
  - name: va
    workload: vectoradd
    params: {{n: 4096}}
    config: {c}/default.yaml
  - name: stencil
    workload: stencil2d
    params: {{nx: 64, ny: 64, iters: 2}}
    config: {c}/radeon7-4chiplet.yaml
  - name: stencil-t2
    same_as: stencil
    threads: 2
  - name: stencil-r2
    same_as: stencil
    ranks: 2
",
            c = cfgs.display()
        ),
    )
    .unwrap();
    let check = |extra: &[&str]| {
        let mut a = vec!["corpus", "check", m.to_str().unwrap()];
        a.extend_from_slice(extra);
        let mut c = Command::new(bin());
        c.args(&a)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        c.output().unwrap()
    };
    let o = check(&["--update"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let plain = check(&[]);
    let plain_out = stdout(&plain);
    assert!(plain.status.success(), "{plain_out}{}", stderr(&plain));
    assert!(
        plain_out
            .lines()
            .any(|l| l.contains("stencil-r2") && l.contains("identical to stencil")),
        "{plain_out}"
    );
    let o = mpirun(2, bin(), &["corpus", "check", m.to_str().unwrap()]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let rows = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("  ") && !l.contains("stencil-r2"))
            .map(String::from)
            .collect()
    };
    assert_eq!(rows(&out), rows(&plain_out));
    assert_eq!(rows(&out).len(), 3, "{out}");
    let r2 = out.lines().find(|l| l.contains("stencil-r2")).unwrap();
    assert!(
        r2.contains("skipped") && r2.contains("run the corpus outside MPI"),
        "{r2}"
    );
}

/// Ranks given different configurations (MPMD: `mpirun -np 1 A : -np 1 B`) are refused
/// at start, naming what differs, instead of merging into one stats file.
#[test]
fn ranks_given_different_inputs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "gemm", &["m=32", "n=32", "k=32"]);
    let cfg = config("a100-4chiplet.yaml");
    let out = tmp.path().join("s.json");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["-np", "1", bin(), "run", "--config"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.push(cfg.to_str().unwrap().into());
        a.extend(["--trace".into(), tst.to_str().unwrap().into()]);
        a.extend(["--stats-out".into(), out.to_str().unwrap().into()]);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let session = tempfile::tempdir().unwrap();
    let mut c = Command::new("timeout");
    c.args(["120", "mpirun", "--oversubscribe", "--bind-to", "none"])
        .args(args(&[]))
        .arg(":")
        .args(args(&["--set", "core.scheduler=gto"]))
        .env("OMPI_MCA_orte_tmpdir_base", session.path())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let o = c.output().unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("rank 1 of 2 was given another configuration than rank 0"),
        "{}",
        stderr(&o)
    );
    assert_no_output(&out);
}

/// A rank that panics ends the whole job through MPI_Abort, with its message, instead of
/// leaving the others waiting.
#[test]
fn a_panicking_rank_aborts_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "gemm", &["m=32", "n=32", "k=32"]);
    let cfg = config("a100-4chiplet.yaml");
    let o = mpirun_env(
        2,
        bin(),
        &[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--trace",
            tst.to_str().unwrap(),
        ],
        &[("TESSERA_TEST_PANIC_RANK", Path::new("1"))],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("injected by TESSERA_TEST_PANIC_RANK"), "{err}");
    assert!(
        err.contains("rank 1 of 2 panicked: ending the job"),
        "{err}"
    );
}

/// Progress under MPI comes from rank 0 alone (Open MPI's tagged output names the rank of
/// each line), every `TESSERA_PROGRESS_EVERY` seconds off a terminal.
#[test]
fn rank_0_alone_reports_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "stream", &["n=65536"]);
    let cfg = config("a100-4chiplet.yaml");
    let o = mpirun_env(
        2,
        bin(),
        &[
            "run".as_ref(),
            "--config".as_ref(),
            cfg.as_os_str(),
            "--trace".as_ref(),
            tst.as_os_str(),
        ],
        &[
            ("TESSERA_PROGRESS_EVERY", Path::new("0.001")),
            ("OMPI_MCA_orte_tag_output", Path::new("1")),
        ],
    );
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    let lines: Vec<&str> = e.lines().filter(|l| l.contains("run: ")).collect();
    assert!(!lines.is_empty(), "{e}");
    // The ranks pause and sum their counters: the share of CTAs, mid-run too.
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" of 1088 CTAs)") && l.contains("us simulated")),
        "{e}"
    );
    for l in lines {
        assert!(
            l.contains(",0]<stderr>"),
            "a progress line not from rank 0: {l}\n{e}"
        );
    }
}
