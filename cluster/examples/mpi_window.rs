//! The cost of one window on the MPI transport: the toy ring of the engine tests and of
//! `benches/engine_window.rs` (nodes that do almost nothing, lookahead 1 ns, 64 tokens of
//! 200 hops; 16 nodes, or one per partition when there are more), the nodes dealt
//! round-robin to the partitions, the partitions to the ranks in contiguous blocks. The
//! time per window is the window protocol: run, route, encode, exchange, decode, sort,
//! deliver, reduce (global windows) or gather (`pair`: per-pair windows). Compare it with
//! `engine_window` on threads.
//!
//! ```text
//! cargo build --release --features mpi --example mpi_window -p tessera-cluster
//! mpirun -np 2 target/release/examples/mpi_window [all|linked] [partitions] [global|pair]
//! ```

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use mpi::topology::Communicator;
use tessera_cluster::{
    rank_owners, Engine, Exchange, Lookahead, MpiTransport, Picos, Placement, Windows,
};

fn main() {
    let Some(universe) = mpi::initialize() else {
        eprintln!("MPI was already initialized");
        std::process::exit(1);
    };
    let world = universe.world();
    let args: Vec<String> = std::env::args().collect();
    let exchange: Exchange = args
        .get(1)
        .map_or(Ok(Exchange::All), |s| s.parse())
        .unwrap_or_else(|e| panic!("{e}"));
    let parts: u32 = args.get(2).map_or(16, |s| s.parse().unwrap_or(16));
    let windows: Windows = args
        .get(3)
        .map_or(Ok(Windows::Global), |s| s.parse())
        .unwrap_or_else(|e| panic!("{e}"));
    let nodes = parts.max(16);
    let mut sys = common::ring(nodes, 1000, 64, 200);
    sys.log = false;
    let groups: Vec<Vec<u32>> = (0..parts)
        .map(|p| (0..nodes).filter(|n| n % parts == p).collect())
        .collect();
    let expected = sys.run(&groups, None).unwrap_or_else(|e| panic!("{e}"));
    let owners = rank_owners(groups.len(), world.size() as usize, Placement::Contiguous)
        .unwrap_or_else(|e| panic!("{e}"));
    let rank = world.rank() as usize;
    let mut times = Vec::new();
    let mut n_windows = 0;
    for _ in 0..7 {
        let routing = sys.routing(&groups).unwrap_or_else(|e| panic!("{e}"));
        let l: Lookahead = match windows {
            Windows::Global => routing
                .lookahead(sys.links())
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or(Picos::MAX)
                .into(),
            Windows::Pairs => routing
                .pair_lookahead(sys.links())
                .unwrap_or_else(|e| panic!("{e}"))
                .into(),
        };
        let hosts: Vec<_> = sys
            .hosts(&groups)
            .into_iter()
            .enumerate()
            .filter(|(p, _)| owners[*p] == rank)
            .map(|(_, h)| h)
            .collect();
        let t = MpiTransport::new(
            world.duplicate(),
            owners.clone(),
            exchange,
            &routing,
            &sys.links(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut engine = Engine::new(l, routing, hosts, t).unwrap_or_else(|e| panic!("{e}"));
        let t0 = Instant::now();
        let stats = engine.run().unwrap_or_else(|e| panic!("{e}"));
        times.push(t0.elapsed().as_secs_f64());
        n_windows = stats.windows;
        if windows == Windows::Global {
            assert_eq!(
                stats.windows, expected.stats.windows,
                "windows differ from sequential"
            );
        }
        assert_eq!(
            stats.messages, expected.stats.messages,
            "messages differ from sequential"
        );
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    if rank == 0 {
        println!(
            "{} ranks, {parts} partitions, {exchange:?} exchange, {windows:?} windows: \
             {n_windows} windows, {} messages; median {:.3} ms per run, {:.2} us per window",
            world.size(),
            expected.stats.messages,
            median * 1e3,
            median * 1e6 / n_windows as f64
        );
    }
}
