//! The engine's own cost per window: the toy ring of the engine tests (tests/common), whose
//! nodes do almost nothing, so the time is the window protocol (run every partition, route,
//! sort, deliver, reduce; on threads also the exchange and the two barriers). Throughput
//! is in windows.
//!
//! - `ring16_p4_l1000_t{1,2,4}`: 16 nodes in 4 partitions, lookahead 1 ns, 64 tokens of
//!   200 hops, on 1 (sequential), 2 and 4 threads;
//! - `ring16_p16_l1000_t{1,2,4}`: the same, one partition per node (most messages cross).
//!
//! Run with `cargo bench -p tessera-cluster --bench engine_window`. The nodes do nearly no
//! work, so threads cannot win here: the numbers are the window overhead a model's work
//! per window must outweigh.

#[path = "../tests/common/mod.rs"]
mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tessera_cluster::WorkerMap;

fn engine_window(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_window");
    for parts in [4u32, 16] {
        let mut sys = common::ring(16, 1000, 64, 200);
        sys.log = false;
        let groups: Vec<Vec<u32>> = (0..parts)
            .map(|p| (0..16).filter(|n| n % parts == p).collect())
            .collect();
        let windows = sys
            .run(&groups, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .stats
            .windows;
        g.throughput(Throughput::Elements(windows));
        for threads in [1usize, 2, 4] {
            let map =
                WorkerMap::contiguous(parts as usize, threads).unwrap_or_else(|e| panic!("{e}"));
            g.bench_function(format!("ring16_p{parts}_l1000_t{threads}"), |b| {
                b.iter(|| {
                    sys.run_threads(&groups, None, Some(&map))
                        .unwrap_or_else(|e| panic!("{e}"))
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, engine_window);
criterion_main!(benches);
