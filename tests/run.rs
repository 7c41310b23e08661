//! End-to-end tests of `tessera run`: every traced warp instruction retires exactly once
//! (bundled Accel-Sim trace and generated workloads), repeated runs give byte-identical
//! stats, stats keys come in the fixed order, and bad input is a clear error.

mod common;

use common::*;
use std::path::Path;

/// `tessera run --config <cfg> --trace <tst> <extra...> [--stats-out <out>]`, for the
/// runs expected to fail.
fn run_trace(cfg: &str, tst: &Path, extra: &[&str], out: Option<&Path>) -> std::process::Output {
    let cfg = config(cfg);
    let mut a: Vec<&std::ffi::OsStr> = vec![
        "run".as_ref(),
        "--config".as_ref(),
        cfg.as_os_str(),
        "--trace".as_ref(),
        tst.as_os_str(),
    ];
    a.extend(extra.iter().map(std::ffi::OsStr::new));
    if let Some(out) = out {
        a.push("--stats-out".as_ref());
        a.push(out.as_os_str());
    }
    tessera(&a)
}

/// The stats' instruction counts equal the trace's (`trace info --json` totals), per run and
/// per kernel. With synchronization as values (a `sync` object: `reduce`'s last-CTA
/// branch) the dynamic counts differ from the trace's by the regions' repeats and the
/// tails passed over; the run itself checks those against the trace (it fails otherwise),
/// so here only the CTAs and the stall accounting are compared.
fn check_retired(stats: &serde_json::Value, tst: &Path) {
    let info = info_json(tst);
    let t = &stats["totals"];
    let values = stats.get("sync").is_some();
    if !values {
        assert_eq!(t["warp_insts"], info["totals"]["warp_insts"], "{stats:#}");
        assert_eq!(t["gpu_tot_sim_insn"], info["totals"]["thread_insts"]);
    }
    assert_eq!(t["ctas"], info["totals"]["ctas"]);
    let ks = stats["kernels"].as_array().unwrap();
    let ik = info["kernels"].as_array().unwrap();
    assert_eq!(ks.len(), ik.len());
    for (k, i) in ks.iter().zip(ik) {
        if !values {
            assert_eq!(k["warp_insts"], i["warp_insts"]);
            assert_eq!(k["thread_insts"], i["thread_insts"]);
        }
        assert_eq!(k["name"], i["name"]);
    }
    let s = &t["stalls"];
    let sum = stall_slots(s);
    assert_eq!(
        sum,
        s["slots"].as_u64().unwrap(),
        "every scheduler-cycle once"
    );
    assert_eq!(s["issued"], t["warp_insts"]);
    assert!(t["gpu_tot_sim_cycle"].as_u64().unwrap() > 0);
}

#[test]
fn bundled_accelsim_trace_retires_every_instruction() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/accelsim-vectoradd");
    if !dir.join("kernelslist.g").is_file() {
        println!("skipped: ../shared/traces not present");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("vectoradd.tst");
    import(&dir, &tst, &[]);
    for cfg in ["a100.yaml", "rtx3070.yaml"] {
        let (text, out) = run_stats(cfg, &["--trace", tst.to_str().unwrap()]);
        let s = json(&text);
        assert_eq!(s["totals"]["warp_insts"], 26_601, "{cfg}");
        assert_eq!(s["totals"]["gpu_tot_sim_insn"], 801_056, "{cfg}");
        check_retired(&s, &tst);
        assert!(out.contains("gpu_tot_sim_cycle"), "{out}");
    }
}

#[test]
fn generated_workloads_retire_every_instruction() {
    let tmp = tempfile::tempdir().unwrap();
    for (w, params) in [
        ("vectoradd", &["n=20000"][..]),
        ("gemm", &["m=64", "n=64", "k=64"][..]),
        ("histogram", &["n=16384", "ctas=8"][..]),
        ("histogram", &["n=16384", "ctas=8", "shared=1"][..]),
    ] {
        let tst = gen(tmp.path(), w, params);
        let (text, _) = run_stats("default.yaml", &["--trace", tst.to_str().unwrap()]);
        check_retired(&json(&text), &tst);
        // --workload records the same file, so it gives the same stats.
        let mut a = vec!["--workload", w];
        for p in params {
            a.push("--param");
            a.push(p);
        }
        let (text2, _) = run_stats("default.yaml", &a);
        let (s1, s2) = (json(&text), json(&text2));
        for k in ["totals", "kernels", "chiplets", "links"] {
            assert_eq!(s1[k], s2[k], "{w}: --workload and --trace differ in {k}");
        }
        // The same content: the recorded trace's checksum is the generated file's.
        let crc = |s: &serde_json::Value| s["provenance"]["input"]["trace_crc32"].clone();
        assert_eq!(crc(&s1), crc(&s2), "{w}");
        assert_eq!(s2["provenance"]["input"]["workload"], *w);
    }
}

/// DESIGN.md section 5, the port contract: where the GPU is cut into partitions never
/// changes results. titanv.yaml (80 SMs, 24 DRAM channels) as one partition and cut by SM
/// cluster into 2, 4 and 7 partitions (7 splits SMs and channels unevenly) on the
/// sequential engine: byte-identical stats on workloads that use every unit (L1 hits and
/// misses, L2, DRAM, shared memory, barriers, atomics, several kernels).
#[test]
fn partitioning_never_changes_results() {
    let tmp = tempfile::tempdir().unwrap();
    for (w, params) in [
        ("gemm", &["m=128", "n=128", "k=64"][..]),
        ("stream", &["n=65536"][..]),
        ("histogram", &["n=65536", "ctas=40"][..]),
        ("stencil2d", &["nx=128", "ny=128", "iters=3"][..]),
        ("reduce", &["n=65536"][..]),
    ] {
        let tst = gen(tmp.path(), w, params);
        let t = tst.to_str().unwrap();
        let (one, _) = run_stats("titanv.yaml", &["--trace", t]);
        check_retired(&json(&one), &tst);
        for parts in ["2", "4", "7"] {
            let clusters = format!("partitioning.sm_clusters={parts}");
            let (cut, _) = run_stats(
                "titanv.yaml",
                &[
                    "--trace",
                    t,
                    "--set",
                    "partitioning.mode=sm_cluster",
                    "--set",
                    &clusters,
                ],
            );
            assert!(one == cut, "{w}: 1 partition and {parts} differ");
        }
    }
}

/// DESIGN.md section 3: the thread count never changes results. gemm on titanv.yaml cut
/// into 4 SM-cluster partitions on 1, 2 and 4 threads (and 8, clamped to 4) gives the
/// bytes of the 1-partition run.
#[test]
fn threads_never_change_results() {
    let gemm = [
        "--workload",
        "gemm",
        "-p",
        "m=128",
        "-p",
        "n=128",
        "-p",
        "k=64",
    ];
    let (one, _) = run_stats("titanv.yaml", &gemm);
    for threads in ["1", "2", "4", "8"] {
        let mut a = gemm.to_vec();
        a.extend([
            "--set",
            "partitioning.mode=sm_cluster",
            "--set",
            "partitioning.sm_clusters=4",
            "--threads",
            threads,
        ]);
        let (cut, _) = run_stats("titanv.yaml", &a);
        assert!(
            one == cut,
            "4 partitions on {threads} thread(s) differ from 1 partition"
        );
    }
    // One partition: more threads are clamped to one, same bytes.
    let mut a = gemm.to_vec();
    a.extend(["--threads", "2"]);
    assert!(run_stats("titanv.yaml", &a).0 == one);
}

#[test]
fn zero_threads_is_a_usage_error() {
    let o = tessera(&[
        "run",
        "--config",
        config("titanv.yaml").to_str().unwrap(),
        "--workload",
        "gemm",
        "--threads",
        "0",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--threads"), "{}", stderr(&o));
}

#[test]
fn the_summary_says_when_host_copies_filled_the_l2() {
    let cfg = config("default.yaml");
    let o = tessera_ok(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--workload",
        "vectoradd",
    ]);
    let out = stdout(&o);
    let dram = out.lines().find(|l| l.starts_with("DRAM:")).unwrap_or("");
    assert!(
        dram.starts_with("DRAM: 0 reads")
            && dram.contains("the host copies installed 12500 sectors in the L2 first"),
        "{out}"
    );
    // Without the fill the loads go to DRAM, and the note is gone.
    let o = tessera_ok(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--workload",
        "vectoradd",
        "--set",
        "memcpy.fills_l2=false",
    ]);
    let out = stdout(&o);
    let dram = out.lines().find(|l| l.starts_with("DRAM:")).unwrap_or("");
    assert!(
        !dram.starts_with("DRAM: 0 reads") && !dram.contains("host copies"),
        "{out}"
    );
}

#[test]
fn a_run_without_an_input_names_both_inputs() {
    let cfg = config("titanv.yaml");
    let o = tessera(&["run", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("--trace") && e.contains("--workload"), "{e}");
    let o = tessera(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--trace",
        "t.tst",
        "--workload",
        "gemm",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

#[test]
fn repeated_runs_are_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "gemm", &["m=64", "n=64", "k=64"]);
    let t = tst.to_str().unwrap();
    let (a, _) = run_stats("titanv.yaml", &["--trace", t]);
    let (b, _) = run_stats("titanv.yaml", &["--trace", t]);
    assert_eq!(a, b);
}

#[test]
fn stats_keys_come_in_the_fixed_order() {
    let (text, _) = run_stats_full(
        "default.yaml",
        &["--workload", "vectoradd", "--param", "n=4096"],
    );
    let s = json(&text);
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(&s),
        [
            "stats_version",
            "config",
            "provenance",
            "totals",
            "kernels",
            "chiplets",
            "links",
            "run"
        ]
    );
    let t = keys(&s["totals"]);
    assert_eq!(
        &t[..4],
        ["gpu_tot_sim_cycle", "gpu_tot_sim_insn", "warp_insts", "ipc"]
    );
    let want = [
        "l1d_accesses",
        "l1d_hits",
        "l1d_misses",
        "l2_accesses",
        "l2_hits",
        "l2_misses",
        "dram_reads",
        "dram_writes",
        "dram_bytes",
        "stalls",
        "host_memory",
    ];
    let pos: Vec<usize> = want
        .iter()
        .map(|k| {
            t.iter()
                .position(|x| x == k)
                .unwrap_or_else(|| panic!("no {k}"))
        })
        .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    assert_eq!(
        keys(&s["kernels"][0]),
        [
            "name",
            "gpu",
            "grid",
            "block",
            "ctas",
            "ctas_per_sm",
            "start_ps",
            "end_ps",
            "cycles",
            "warp_insts",
            "thread_insts",
            "memory",
            "stream",
            "chiplets"
        ]
    );
    assert_eq!(s["chiplets"].as_array().unwrap().len(), 1);
    assert!(
        s["links"].as_array().unwrap().is_empty(),
        "one chiplet has no links"
    );
}

#[test]
fn unknown_set_key_is_an_error_naming_it() {
    let cfg = config("default.yaml");
    let o = tessera(&[
        "run".as_ref(),
        "--config".as_ref(),
        cfg.as_os_str(),
        "--workload".as_ref(),
        "vectoradd".as_ref(),
        "--set".as_ref(),
        "l1d.sise_bytes=4".as_ref(),
    ]);
    assert_clean_failure(&o, &["l1d.sise_bytes"]);
}

#[test]
fn a_cta_that_can_never_fit_is_an_error_naming_the_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = gen(tmp.path(), "vectoradd", &["block=512", "n=4096"]);
    let out = tmp.path().join("s.json");
    let o = run_trace(
        "default.yaml",
        &tst,
        &["--set", "core.max_threads_per_cta=256"],
        Some(&out),
    );
    assert_clean_failure(&o, &["kernel 0", "vectorAdd", "never fit", "512 threads"]);
    assert_no_output(&out);
}

/// A trace with opcodes the core model has no unit for is a clear error before anything is
/// simulated: tests/data/unknown-opcode (FROBNICATE twice at PCs 0x10 and 0x30,
/// FROBNICATE.X once at 0x20, in an sm_80 kernel `_Z4frobPi`), imported with
/// `--allow-unknown-opcodes`, then run. Without the flag the import itself fails.
#[test]
fn unknown_opcodes_are_an_error_naming_the_kernel_and_opcodes() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("frob.tst");
    import(&data("unknown-opcode"), &tst, &["--allow-unknown-opcodes"]);
    let out = tmp.path().join("s.json");
    let o = run_trace("a100.yaml", &tst, &[], Some(&out));
    let e = assert_clean_failure(
        &o,
        &[
            "kernel 0 (_Z4frobPi)",
            "opcodes FROBNICATE at PC 0x0010 and FROBNICATE.X at PC 0x0020 are not in the \
             sm_80 SASS table (3 instruction(s)",
            "no unit for them",
        ],
    );
    assert!(
        e.contains(&tst.display().to_string()),
        "names the trace: {e}"
    );
    assert_no_output(&out);
    assert!(stdout(&o).is_empty(), "nothing simulated: {}", stdout(&o));
}

/// A kernel whose CTAs hold more warps than 32-lane warps give (here 2 warps in a CTA of 32
/// threads, written directly with the trace writer: the Accel-Sim importer refuses such a
/// warp id) is a clear error naming the kernel and the expected count.
#[test]
fn warps_narrower_than_the_cores_are_an_error() {
    use tessera_traces::{
        AddrRecord, Command, KernelMeta, OpClass, OpcodeInfo, RawInst, TraceWriter, WriterOptions,
    };
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("narrow.tst");
    let mut w = TraceWriter::create(&tst, WriterOptions::default()).unwrap();
    let k = w
        .begin_kernel(KernelMeta::new("_Z6narrowv", [1, 1, 1], [32, 1, 1]))
        .unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let exit = w
        .add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit))
        .unwrap();
    w.begin_cta([0, 0, 0], None).unwrap();
    for warp in 0..2 {
        w.begin_warp(warp).unwrap();
        w.push(&RawInst {
            pc: 0,
            mask: 0xffff,
            opcode: exit,
            dsts: &[],
            srcs: &[],
            mem_width: 0,
            imm: None,
            line: None,
            addrs: AddrRecord::None,
        })
        .unwrap();
        w.end_warp().unwrap();
    }
    w.end_cta().unwrap();
    w.end_kernel().unwrap();
    w.finish().unwrap();
    let o = run_trace("a100.yaml", &tst, &[], None);
    assert_clean_failure(
        &o,
        &[
            "kernel 0 (_Z6narrowv)",
            "2 warps in 1 CTA(s) of 32 threads, more than the 1 that the core model's \
             32-lane warps give",
        ],
    );
}

/// A tessera built without MPI, started by `mpirun -np 2` or `srun -n 4`: every rank would
/// run the whole system and write the same stats file, so each refuses with one clear
/// message instead.
#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_refuses_to_run_as_several_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("stats.json");
    let o = std::process::Command::new(bin())
        .args(["run", "--config"])
        .arg(config("default.yaml"))
        .args(["--workload", "vectoradd", "--stats-out"])
        .arg(&out)
        .env("OMPI_COMM_WORLD_RANK", "1")
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .output()
        .unwrap();
    assert_clean_failure(&o, &["2 ranks", "built without MPI", "--features mpi"]);
    assert_no_output(&out);
    // The same from `srun -n 4` (a Slurm job step of 4 tasks)...
    let o = std::process::Command::new(bin())
        .args(["run", "--config"])
        .arg(config("default.yaml"))
        .args(["--workload", "vectoradd", "--stats-out"])
        .arg(&out)
        .env("SLURM_PROCID", "0")
        .env("SLURM_STEP_NUM_TASKS", "4")
        .output()
        .unwrap();
    assert_clean_failure(&o, &["4 ranks", "built without MPI"]);
    assert_no_output(&out);
    // ...but a batch script's own process, in an allocation of 16 tasks, is a plain run.
    let o = std::process::Command::new(bin())
        .args(["run", "--config"])
        .arg(config("default.yaml"))
        .args(["--workload", "vectoradd", "-p", "n=4096", "--stats-out"])
        .arg(&out)
        .env("SLURM_PROCID", "0")
        .env("SLURM_NTASKS", "16")
        .env_remove("SLURM_STEP_NUM_TASKS")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.exists());
}

/// `--stats-out` into a directory that does not exist fails before simulating anything,
/// naming the path.
#[test]
fn stats_out_in_a_missing_directory_fails_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("no-such-dir").join("stats.json");
    let o = tessera(&[
        "run".as_ref(),
        "--config".as_ref(),
        config("default.yaml").as_os_str(),
        "--workload".as_ref(),
        "vectoradd".as_ref(),
        "--stats-out".as_ref(),
        out.as_os_str(),
    ]);
    assert_clean_failure(&o, &["no-such-dir", "not a directory"]);
    assert!(
        !stdout(&o).contains("gpu_tot_sim_cycle"),
        "it simulated first"
    );
    assert_no_output(&out);
}

/// SMs and channels running ahead of the other units of their partition (`partitioning.run_ahead`,
/// on by default; `gpu/partition.rs`) gives the bytes of running every event in global time
/// order: a monolithic GPU, 4 chiplets with a memory-side L2, 4 chiplets with private L2s
/// flushed at kernel boundaries, a GPU cut into 4 partitions, and 8 GPUs with host copies
/// to each; with several kernels, barriers, atomics, and CTAs completing and being
/// re-dispatched on every SM.
#[test]
fn run_ahead_never_changes_results() {
    let tmp = tempfile::tempdir().unwrap();
    let stencil = gen(tmp.path(), "stencil2d", &["nx=128", "ny=128", "iters=3"]);
    let histogram = gen(tmp.path(), "histogram", &["n=65536", "ctas=40"]);
    let vectoradd = gen(tmp.path(), "vectoradd", &["n=200704"]);
    let gemm = gen(tmp.path(), "gemm", &["m=128", "n=128", "k=64"]);
    let peer = tmp.path().join("peer.tst");
    write_peer_trace(&peer, 8, 4096);
    let cut = [
        "--set",
        "partitioning.mode=sm_cluster",
        "--set",
        "partitioning.sm_clusters=4",
    ];
    for (cfg, tst, extra) in [
        ("rtx3070.yaml", &vectoradd, &[][..]),
        ("titanv.yaml", &gemm, &[][..]),
        ("titanv.yaml", &gemm, &cut[..]),
        ("a100.yaml", &histogram, &[][..]),
        ("a100-4chiplet.yaml", &stencil, &[][..]),
        ("radeon7-4chiplet.yaml", &stencil, &[][..]),
        ("dgx-8gpu.yaml", &peer, &[][..]),
    ] {
        let mut a = vec!["--trace", tst.to_str().unwrap()];
        a.extend(extra);
        let (ahead, _) = run_stats(cfg, &a);
        a.extend(["--set", "partitioning.run_ahead=false"]);
        let (in_order, _) = run_stats(cfg, &a);
        assert!(
            ahead == in_order,
            "{cfg} {}: running ahead changed the stats",
            tst.display()
        );
    }
}
