//! Progress reports pause the engine every 10 simulated microseconds: the stats must be
//! exactly those of an uninterrupted run, and the reports must move forward.

use std::path::Path;
use tessera_partitions::config::GpuConfig;
use tessera_system::{run_gpu, run_gpu_progress, GpuProgress};
use tessera_traces::TraceFile;

#[test]
fn progress_reports_never_change_results() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tst = dir.path().join("s.tst");
    let params = vec![("n".to_string(), "262144".to_string())];
    tessera_frontend::workloads::generate("stream", &params, 80, &tst)
        .unwrap_or_else(|e| panic!("{e}"));
    let cfg = GpuConfig::load(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/titanv.yaml"),
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let trace = TraceFile::open(&tst).unwrap_or_else(|e| panic!("{e}"));
    let (plain, _) = run_gpu(&cfg, &trace).unwrap_or_else(|e| panic!("{e}"));
    let mut seen: Vec<GpuProgress> = Vec::new();
    let mut report = |p: GpuProgress| seen.push(p);
    let (reported, _) =
        run_gpu_progress(&cfg, &trace, 1, Some(&mut report)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plain, reported);
    // Five kernels over more than 10 us: several reports, moving forward, never past the end.
    assert!(seen.len() >= 2, "{seen:?}");
    for w in seen.windows(2) {
        assert!(w[1].sim_ps > w[0].sim_ps);
        assert!(w[1].warp_insts >= w[0].warp_insts);
        assert!(w[1].kernels_done >= w[0].kernels_done);
        assert!(w[1].ctas_done >= w[0].ctas_done);
    }
    let last = seen[seen.len() - 1];
    assert_eq!(last.kernels, 5);
    assert!(last.warp_insts <= plain.totals.warp_insts);
    assert!(last.sim_ps <= plain.totals.sim_time_ps);
    // CTAs complete as the run goes: some by the last report, never more than the trace's.
    assert!(
        last.ctas_done > 0 && last.ctas_done <= plain.totals.ctas,
        "{last:?}"
    );
}
