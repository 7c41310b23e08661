//! Whole runs of the timing model, one core, sequential engine: the rate a user sees, in
//! simulated warp instructions per second (criterion's element throughput) and simulated
//! core cycles per second (printed once per bench).
//!
//! - `vectoradd_rtx3070`: `vectoradd` with n = 200,704 (1/8 of the 1,605,632
//!   benchmark, to keep criterion's repetitions short) on `configs/rtx3070.yaml`;
//! - `gemm_titanv`: `gemm` m = n = k = 128 on `configs/titanv.yaml`;
//! - `triad_titanv`: `stream` triad kernel only, n = 1,048,576 doubles, on
//!   `configs/titanv.yaml`;
//! - `gemm_titanv_4_partitions`: the gemm run cut into 4 SM-cluster partitions (same
//!   results, the cost of one-cycle windows on one thread).
//! - `{gemm,triad}_a100_4chiplet_t{1,2}`: gemm m = n = k = 128 and the triad above on
//!   `configs/a100-4chiplet.yaml` (one partition per chiplet, lookahead = the link
//!   latency), on the sequential transport and on 2 threads (same results): the speedup
//!   of threads on this machine.
//!
//! Run with `cargo bench -p tessera-cluster --bench whole_run`. The same numbers for the
//! issue's full sizes come from `tessera run` (its stderr line), see docs/benchmarks.md.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tessera_partitions::config::GpuConfig;
use tessera_system::run_gpu_threads;
use tessera_traces::TraceFile;

fn config(name: &str, set: &[(&str, &str)]) -> GpuConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(name);
    let set: Vec<(String, String)> = set
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    GpuConfig::load(&path, &set).unwrap_or_else(|e| panic!("{e}"))
}

fn record(dir: &Path, workload: &str, params: &[(&str, &str)]) -> PathBuf {
    let out = dir.join(format!("{workload}.tst"));
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tessera_frontend::workloads::generate(workload, &params, 80, &out)
        .unwrap_or_else(|e| panic!("{e}"));
    out
}

fn bench_run(c: &mut Criterion, name: &str, cfg: &GpuConfig, tst: &Path) {
    bench_threads(c, name, cfg, tst, 1)
}

fn bench_threads(c: &mut Criterion, name: &str, cfg: &GpuConfig, tst: &Path, threads: usize) {
    let trace = TraceFile::open(tst).unwrap_or_else(|e| panic!("{e}"));
    let t0 = Instant::now();
    let (stats, _) = run_gpu_threads(cfg, &trace, threads).unwrap_or_else(|e| panic!("{e}"));
    let secs = t0.elapsed().as_secs_f64();
    let t = &stats.totals;
    eprintln!(
        "{name}: {} warp instructions, {} cycles; first run {:.2} M warp insts/s, {:.3} M cycles/s",
        t.warp_insts,
        t.gpu_tot_sim_cycle,
        t.warp_insts as f64 / secs / 1e6,
        t.gpu_tot_sim_cycle as f64 / secs / 1e6
    );
    let mut g = c.benchmark_group("whole_run");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(t.warp_insts));
    g.bench_function(name, |b| {
        b.iter(|| run_gpu_threads(cfg, &trace, threads).unwrap_or_else(|e| panic!("{e}")))
    });
    g.finish();
}

fn whole_run(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let va = record(dir.path(), "vectoradd", &[("n", "200704")]);
    bench_run(c, "vectoradd_rtx3070", &config("rtx3070.yaml", &[]), &va);
    let gemm = record(
        dir.path(),
        "gemm",
        &[("m", "128"), ("n", "128"), ("k", "128")],
    );
    let titanv = config("titanv.yaml", &[]);
    bench_run(c, "gemm_titanv", &titanv, &gemm);
    let triad = record(
        dir.path(),
        "stream",
        &[("n", "1048576"), ("kernels", "triad")],
    );
    bench_run(c, "triad_titanv", &titanv, &triad);
    let cut = config(
        "titanv.yaml",
        &[
            ("partitioning.mode", "sm_cluster"),
            ("partitioning.sm_clusters", "4"),
        ],
    );
    bench_run(c, "gemm_titanv_4_partitions", &cut, &gemm);
    let chiplets = config("a100-4chiplet.yaml", &[]);
    for threads in [1, 2] {
        bench_threads(
            c,
            &format!("gemm_a100_4chiplet_t{threads}"),
            &chiplets,
            &gemm,
            threads,
        );
        bench_threads(
            c,
            &format!("triad_a100_4chiplet_t{threads}"),
            &chiplets,
            &triad,
            threads,
        );
    }
}

criterion_group!(benches, whole_run);
criterion_main!(benches);
