//! The stats an MPI job's rank 0 writes are merged from one part per rank
//! (`tessera_partitions::gpu::stats_part`, sent as JSON): whatever the split of the
//! partitions into parts, the merge must give the bytes of the one-process run. Checked
//! here without MPI, on the partitions of a threaded run split as ranks would hold them.

use std::path::Path;
use tessera_cluster::run_threads;
use tessera_partitions::config::GpuConfig;
use tessera_partitions::gpu::{build, collect_stats, merge_stats, run_end_ps, stats_part};
use tessera_partitions::stats::StatsPart;
use tessera_traces::TraceFile;

#[test]
fn any_split_into_parts_merges_to_the_same_stats() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tst = dir.path().join("s.tst");
    let params = vec![("n".to_string(), "65536".to_string())];
    tessera_frontend::workloads::generate("stream", &params, 80, &tst)
        .unwrap_or_else(|e| panic!("{e}"));
    // 4 chiplets cut in 2 by SM cluster: 8 partitions, each chiplet's SMs and channels in
    // two parts, so a chiplet's counters are summed across parts.
    let cfg = GpuConfig::load(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/a100-4chiplet.yaml"),
        &[
            ("partitioning.mode".into(), "sm_cluster".into()),
            ("partitioning.sm_clusters".into(), "2".into()),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let trace = TraceFile::open(&tst).unwrap_or_else(|e| panic!("{e}"));
    let run = || {
        let sys = build(&cfg, &trace).unwrap_or_else(|e| panic!("{e}"));
        run_threads(sys.partitions, sys.ports, sys.links, 1)
            .unwrap_or_else(|e| panic!("{e}"))
            .0
    };
    let whole =
        serde_json::to_string_pretty(&collect_stats(&cfg, run())).unwrap_or_else(|e| panic!("{e}"));
    assert!(whole.contains("\"remote_requests\""));
    // Rank-like splits: contiguous blocks of 8 partitions over 2, 3 and 5 ranks, and one
    // that interleaves.
    let splits: [&[usize]; 4] = [
        &[0, 0, 0, 0, 1, 1, 1, 1],
        &[0, 0, 0, 1, 1, 1, 2, 2],
        &[0, 0, 1, 1, 2, 2, 3, 4],
        &[1, 0, 1, 0, 1, 0, 1, 0],
    ];
    for owner in splits {
        let ranks = owner.iter().max().map_or(0, |m| m + 1);
        let mut held: Vec<Vec<_>> = (0..ranks).map(|_| Vec::new()).collect();
        for (p, part) in run().into_iter().enumerate() {
            held[owner[p]].push(part);
        }
        let end = held.iter().map(|h| run_end_ps(h)).max().unwrap_or(0);
        // Through JSON, as rank 0 receives them.
        let parts: Vec<StatsPart> = held
            .into_iter()
            .map(|h| {
                let text =
                    serde_json::to_vec(&stats_part(&cfg, h, end)).unwrap_or_else(|e| panic!("{e}"));
                serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        let merged = serde_json::to_string_pretty(&merge_stats(&cfg, parts))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(merged == whole, "split {owner:?} merges to other stats");
    }
}
