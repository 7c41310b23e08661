//! The per-pair windows (DESIGN.md section 4, two levels): partition `p` runs up to
//! `min over q of (next_q + D(q, p))`, a worker advances its own partitions in local
//! sub-windows and exchanges with the other workers only at their bound. Results are the
//! global windows' for every grouping, worker map and pause; a system of two tightly
//! coupled groups joined by slow links exchanges only at the slow links' latency; a
//! switch whose two hops beat a direct link bounds the partitions by the switch's path.

mod common;

use common::{ring, token, NodeSpec, Outcome, System};
use tessera_cluster::{
    run_threads_with, run_threads_with_until, Engine, Lookahead, Picos, Progress, WorkerMap,
};

fn groups(parts: &[&[u32]]) -> Vec<Vec<u32>> {
    parts.iter().map(|g| g.to_vec()).collect()
}

fn singles(n: u32) -> Vec<Vec<u32>> {
    (0..n).map(|u| vec![u]).collect()
}

fn assert_same(a: &Outcome, b: &Outcome, what: &str) {
    assert_eq!(a.events, b.events, "{what}: event counts differ");
    assert_eq!(a.last_event, b.last_event, "{what}: final times differ");
    assert_eq!(a.digest, b.digest, "{what}: digests differ");
    assert_eq!(a.ties, b.ties, "{what}: ties differ");
    assert!(a.log == b.log, "{what}: event logs differ");
}

fn pairs(sys: &System, g: &[Vec<u32>]) -> Lookahead {
    let routing = sys.routing(g).unwrap();
    Lookahead::Pairs(routing.pair_lookahead(sys.links()).unwrap())
}

/// `sys` grouped as `g` on the workers of `map` with the per-pair windows.
fn run_pairs(sys: &System, g: &[Vec<u32>], map: &WorkerMap) -> Outcome {
    let (hosts, stats) =
        run_threads_with(pairs(sys, g), sys.routing(g).unwrap(), sys.hosts(g), map).unwrap();
    common::outcome_of(hosts, stats, 0)
}

/// Every dealing of `parts` partitions the tests try.
fn maps(parts: usize) -> Vec<WorkerMap> {
    let mut v = Vec::new();
    for t in [1, 2, 3, parts] {
        v.push(WorkerMap::contiguous(parts, t).unwrap());
        v.push(WorkerMap::round_robin(parts, t).unwrap());
    }
    v
}

/// Two GPUs of four chiplets: 100 ps links inside a GPU, 20,000 ps between GPUs (node u
/// of one GPU to node u of the other).
fn two_gpus() -> System {
    fn delay(node: u32, token: u64, acc: u64) -> Picos {
        40 * ((token + acc + u64::from(node)) % 4)
    }
    fn route(_: u32, token: u64, acc: u64, links: usize) -> usize {
        ((acc >> 9) ^ (token >> 32)) as usize % links
    }
    let nodes = (0..8u32)
        .map(|u| {
            let gpu = u / 4;
            let mut links: Vec<(u32, Picos)> = (0..4)
                .map(|v| gpu * 4 + v)
                .filter(|&v| v != u)
                .map(|v| (v, 100))
                .collect();
            links.push(((u + 4) % 8, 20_000));
            NodeSpec {
                links,
                inject: vec![(u64::from(u) * 30, token(u, 600)), (0, token(u + 8, 500))],
            }
        })
        .collect();
    System {
        nodes,
        delay,
        route,
        log: true,
    }
}

#[test]
fn two_gpus_exchange_between_workers_only_at_the_gpu_link_latency() {
    let sys = two_gpus();
    let g = singles(8);
    let base = sys
        .run(&groups(&[&[0, 1, 2, 3, 4, 5, 6, 7]]), None)
        .unwrap();
    assert!(base.events > 5000, "{}", base.events);
    let global = sys.run(&g, None).unwrap();
    assert_same(&base, &global, "global windows, 8 partitions");
    // A GPU per worker: the workers meet at most once per GPU-link latency of progress.
    let by_gpu = WorkerMap::from_owners((0..8).map(|p| p / 4).collect()).unwrap();
    let o = run_pairs(&sys, &g, &by_gpu);
    assert_same(&base, &o, "per-pair windows, a GPU per worker");
    assert_eq!(o.stats.messages, global.stats.messages);
    let span = base.last_event;
    assert!(
        o.stats.windows <= span / 20_000 + 2,
        "{} exchanges over {span} ps",
        o.stats.windows
    );
    assert!(
        o.stats.windows * 20 < global.stats.windows,
        "pairs {} vs global {}",
        o.stats.windows,
        global.stats.windows
    );
    // Inside a worker the chiplets still meet at their own 100 ps links: many local
    // sub-windows per exchange.
    assert!(
        o.stats.sub_windows > 10 * o.stats.windows,
        "{:?} over {span} ps, global {:?}",
        o.stats,
        global.stats
    );
    // Any other dealing (GPUs split over workers) gives the same results.
    for map in maps(8) {
        let o = run_pairs(&sys, &g, &map);
        assert_same(&base, &o, &format!("per-pair windows on {map:?}"));
        assert_eq!(o.stats.messages, global.stats.messages, "{map:?}");
    }
}

/// A switch (node 0) joined to nodes 1..=4 by 50 ps links both ways, and slow direct
/// links 1 -> 2 -> 3 -> 4 -> 1 of 5,000 ps: two hops through the switch (100 ps) are the
/// shortest path between any two leaves. Routing sends most tokens through the switch.
fn switch() -> System {
    fn delay(node: u32, token: u64, acc: u64) -> Picos {
        30 * ((token + acc + u64::from(node)) % 3)
    }
    fn route(_: u32, token: u64, acc: u64, links: usize) -> usize {
        // Leaves have [switch, next leaf]: the switch three times in four.
        let r = ((acc >> 5) ^ (token >> 32)) as usize;
        if links == 2 {
            usize::from(r.is_multiple_of(4))
        } else {
            r % links
        }
    }
    let mut nodes = vec![NodeSpec {
        links: (1..=4).map(|v| (v, 50)).collect(),
        inject: vec![(0, token(0, 300))],
    }];
    for u in 1..=4u32 {
        nodes.push(NodeSpec {
            links: vec![(0, 50), (u % 4 + 1, 5000)],
            inject: vec![(u64::from(u) * 10, token(u, 400))],
        });
    }
    System {
        nodes,
        delay,
        route,
        log: true,
    }
}

#[test]
fn a_switch_whose_two_hops_beat_the_direct_links_bounds_the_leaves() {
    let sys = switch();
    let g = singles(5);
    let routing = sys.routing(&g).unwrap();
    let d = routing.pair_lookahead(sys.links()).unwrap();
    assert_eq!(
        d.get(1, 2),
        100,
        "through the switch, not the 5,000 ps link"
    );
    let base = sys.run(&groups(&[&[0, 1, 2, 3, 4]]), None).unwrap();
    assert!(base.events > 1500, "{}", base.events);
    // The leaves on one worker and the switch on another: a leaf's message to the next
    // leaf can go through the switch's worker and back within one of their rounds,
    // which only the path's D(1, 2) = 100 ps (not the direct link's 5,000) bounds.
    let maps = [
        WorkerMap::from_owners(vec![1, 0, 0, 0, 0]).unwrap(),
        WorkerMap::from_owners(vec![0, 1, 0, 1, 0]).unwrap(),
        WorkerMap::from_owners(vec![2, 0, 1, 0, 1]).unwrap(),
        WorkerMap::contiguous(5, 1).unwrap(),
        WorkerMap::contiguous(5, 5).unwrap(),
    ];
    for map in &maps {
        let o = run_pairs(&sys, &g, map);
        assert_same(&base, &o, &format!("per-pair windows on {map:?}"));
    }
}

#[test]
fn per_pair_windows_give_the_global_results_on_every_grouping_and_pause() {
    let sys = ring(8, 4000, 12, 150);
    let base = sys
        .run(&groups(&[&[0, 1, 2, 3, 4, 5, 6, 7]]), None)
        .unwrap();
    let groupings = [
        groups(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]),
        groups(&[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]),
        singles(8),
        groups(&[&[5, 0], &[3, 1, 2], &[7, 4, 6]]),
    ];
    for g in &groupings {
        for map in maps(g.len()) {
            let o = run_pairs(&sys, g, &map);
            assert_same(&base, &o, &format!("{g:?} on {map:?}"));
        }
        // Paused at stops that are no boundary of anything, on one worker.
        let mut engine =
            Engine::sequential(pairs(&sys, g), sys.routing(g).unwrap(), sys.hosts(g)).unwrap();
        let mut stop = 0;
        let mut pauses = 0;
        loop {
            stop += 3333;
            match engine.run_until(stop).unwrap() {
                Progress::Finished => break,
                Progress::Paused { next_event } => {
                    assert!(next_event >= stop);
                    assert!(engine.now() <= stop);
                    pauses += 1;
                }
            }
        }
        assert!(pauses > 10);
        assert_same(&base, &common::outcome(engine), &format!("{g:?} paused"));
        // Paused uncut (for progress) on one worker: nothing bounds its partitions but the
        // pause, which must still stop them, and the results stay the same.
        let mut engine =
            Engine::sequential(pairs(&sys, g), sys.routing(g).unwrap(), sys.hosts(g)).unwrap();
        let (mut target, mut pauses) = (0, 0);
        loop {
            target += 50_000;
            match engine.run_past(target).unwrap() {
                Progress::Finished => break,
                Progress::Paused { next_event } => {
                    assert!(next_event >= target);
                    pauses += 1;
                }
            }
        }
        assert!(pauses > 10, "{pauses} pauses");
        assert_same(&base, &common::outcome(engine), &format!("{g:?} run_past"));
        // Stopped at a time on several workers: the state there is the global windows'.
        let stop = base.last_event / 3 + 17;
        let map = WorkerMap::round_robin(g.len(), 3).unwrap();
        let (hosts, _, finished) = run_threads_with_until(
            pairs(&sys, g),
            sys.routing(g).unwrap(),
            sys.hosts(g),
            &map,
            stop,
        )
        .unwrap();
        assert!(!finished);
        let mut seq = sys.engine(g, None).unwrap();
        assert!(!seq.run_to(stop).unwrap());
        assert_same(
            &common::outcome(seq),
            &common::outcome_of(hosts, Default::default(), 0),
            &format!("{g:?} stopped at {stop}"),
        );
    }
}
