//! The thread transport: any thread count and any dealing of partitions to workers gives
//! the sequential run's results (event logs, outcomes and window counters), at the
//! smallest legal lookahead and at larger ones; a failing partition on any worker ends the
//! run with its error on every thread count (no hang); construction errors come back
//! before any thread starts.

mod common;

use common::{ring, Host, Outcome};
use tessera_cluster::{
    run_sequential_paused_until, run_threads, run_threads_stepped, run_threads_with,
    run_threads_with_until, BoxError, EngineError, Message, Outbox, Partition, Pauses, Picos,
    Placement, PortId, Routing, WorkerMap,
};

const L: Picos = 4000;

fn assert_same(a: &Outcome, b: &Outcome, what: &str) {
    assert_eq!(a.events, b.events, "{what}: event counts differ");
    assert_eq!(a.last_event, b.last_event, "{what}: final times differ");
    assert_eq!(a.digest, b.digest, "{what}: digests differ");
    assert_eq!(a.ties, b.ties, "{what}: ties differ");
    assert!(a.log == b.log, "{what}: event logs differ");
}

fn groups(parts: &[&[u32]]) -> Vec<Vec<u32>> {
    parts.iter().map(|g| g.to_vec()).collect()
}

/// Every way to deal the partitions to workers the tests try: contiguous and
/// round-robin for 1 to 4 threads (and one worker per partition), plus a lopsided one.
fn maps(parts: usize) -> Vec<WorkerMap> {
    let mut v = Vec::new();
    for t in [1, 2, 3, 4, parts] {
        v.push(WorkerMap::contiguous(parts, t).unwrap());
        v.push(WorkerMap::round_robin(parts, t).unwrap());
    }
    if parts >= 3 {
        // Worker 1 hosts one partition in the middle, worker 0 the rest.
        let owners = (0..parts).map(|p| usize::from(p == parts / 2)).collect();
        v.push(WorkerMap::from_owners(owners).unwrap());
    }
    v
}

#[test]
fn ring_is_the_same_on_every_thread_count_and_grouping() {
    let sys = ring(8, L, 12, 150);
    let base = sys
        .run(&groups(&[&[0, 1, 2, 3, 4, 5, 6, 7]]), Some(L))
        .unwrap();
    assert!(base.events > 3000 && base.ties > 0);
    let groupings = [
        groups(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]),
        groups(&[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]),
        groups(&[&[0], &[1], &[2], &[3], &[4], &[5], &[6], &[7]]),
        groups(&[&[5, 0], &[3, 1, 2], &[7, 4, 6]]),
    ];
    for g in &groupings {
        // The largest legal lookahead, L (every cut link's latency is at least L, some
        // exactly L: messages land on the window boundary), and windows of 1 ps.
        for l in [L, 1] {
            let seq = sys.run(g, Some(l)).unwrap();
            assert_same(&base, &seq, &format!("sequential {g:?} L={l}"));
            if l == L {
                assert!(seq.boundary_hits > 0, "{g:?}: no message at exactly T + L");
            }
            for map in maps(g.len()) {
                let what = format!("{g:?} L={l} on {} workers {map:?}", map.workers());
                let o = sys.run_threads(g, Some(l), Some(&map)).unwrap();
                assert_same(&seq, &o, &what);
                // Window counters too: windows, global messages, skipped time.
                assert_eq!(
                    common::counters(&seq.stats),
                    common::counters(&o.stats),
                    "{what}"
                );
                assert_eq!(seq.boundary_hits, o.boundary_hits, "{what}");
            }
        }
    }
}

#[test]
fn lookahead_computed_from_the_links_and_larger_windows() {
    // Latencies L + 1000 * k: the computed lookahead is L; a larger system lookahead is
    // not legal, so larger windows come from slower links instead.
    for lat in [L, 3 * L, 10 * L] {
        let sys = ring(8, lat, 16, 80);
        let g = groups(&[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]);
        let seq = sys.run(&g, None).unwrap();
        for t in [2, 3, 4] {
            let o = sys
                .run_threads(&g, None, Some(&WorkerMap::contiguous(4, t).unwrap()))
                .unwrap();
            assert_same(&seq, &o, &format!("latency {lat}, {t} threads"));
            assert_eq!(common::counters(&seq.stats), common::counters(&o.stats));
        }
    }
}

#[test]
fn run_threads_clamps_and_refuses_zero_threads() {
    let sys = ring(8, L, 12, 60);
    let g = groups(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
    let ports = || {
        let r = sys.assignment(&g);
        let mut v = Vec::new();
        for (u, n) in sys.nodes.iter().enumerate() {
            v.push((common::in_port(u as u32), r[u]));
            for k in 0..n.links.len() {
                v.push((common::out_port(u as u32, k), r[u]));
            }
        }
        v
    };
    let seq = sys.run(&g, None).unwrap();
    for t in [1, 2, 16] {
        let (hosts, stats) = run_threads(sys.hosts(&g), ports(), sys.links(), t).unwrap();
        let o = common::outcome_of(hosts, stats, 0);
        assert_same(&seq, &o, &format!("{t} threads"));
        // The per-pair windows depend on which worker hosts what; the messages between
        // partitions do not.
        assert_eq!(seq.stats.messages, o.stats.messages);
    }
    let e = run_threads(sys.hosts(&g), ports(), sys.links(), 0)
        .err()
        .unwrap();
    assert!(matches!(e, EngineError::BadTransport { .. }), "{e:?}");
}

/// A run stopped at a time that is no window boundary (a run limit): every grouping, thread
/// count and pausing reaches the same state, every event before the stop and none after;
/// the stop past the end runs to completion.
#[test]
fn a_stop_time_gives_the_same_state_on_every_grouping_and_thread_count() {
    let sys = ring(8, L, 12, 150);
    let whole = groups(&[&[0, 1, 2, 3, 4, 5, 6, 7]]);
    let full = sys.run(&whole, Some(L)).unwrap();
    let stop = full.last_event / 2 + 1234;
    let mut engine = sys.engine(&whole, Some(L)).unwrap();
    assert!(!engine.run_to(stop).unwrap());
    let base = common::outcome(engine);
    assert!(base.events > 100 && base.events < full.events);
    assert!(base.last_event < stop);
    let groupings = [
        groups(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]),
        groups(&[&[0], &[1], &[2], &[3], &[4], &[5], &[6], &[7]]),
        groups(&[&[5, 0], &[3, 1, 2], &[7, 4, 6]]),
    ];
    for g in &groupings {
        for t in 1..=g.len().min(4) {
            let map = WorkerMap::round_robin(g.len(), t).unwrap();
            let routing = sys.routing(g).unwrap();
            let (hosts, stats, finished) =
                run_threads_with_until(L, routing, sys.hosts(g), &map, stop).unwrap();
            assert!(!finished);
            let o = common::outcome_of(hosts, stats, 0);
            assert_same(&base, &o, &format!("{} partitions on {t} threads", g.len()));
        }
        // Paused for a progress display on the way (every 777 ps), then stopped.
        let ports = {
            let r = sys.assignment(g);
            let mut v = Vec::new();
            for (u, n) in sys.nodes.iter().enumerate() {
                v.push((common::in_port(u as u32), r[u]));
                for k in 0..n.links.len() {
                    v.push((common::out_port(u as u32, k), r[u]));
                }
            }
            v
        };
        let mut pauses = 0;
        let (hosts, stats, finished) = run_sequential_paused_until(
            sys.hosts(g),
            ports.clone(),
            sys.links(),
            777,
            &mut |_, at| {
                assert!(at < stop);
                pauses += 1;
            },
            stop,
        )
        .unwrap();
        assert!(!finished && pauses > 0);
        assert_same(&base, &common::outcome_of(hosts, stats, 0), "paused");
        // Paused on threads, at exact steps and at window ends: the same state at `stop`.
        for t in 1..=g.len().min(3) {
            for how in [Pauses::Exact, Pauses::WindowEnds] {
                let mut pauses = 0;
                let (hosts, stats, cut) = run_threads_stepped(
                    sys.hosts(g),
                    ports.clone(),
                    sys.links(),
                    t,
                    Placement::RoundRobin,
                    (777, how),
                    stop,
                    &mut |parts, at| {
                        assert_eq!(parts.len(), g.len());
                        assert!(at < stop);
                        if how == Pauses::Exact {
                            assert_eq!(at % 777, 0);
                        }
                        pauses += 1;
                        true
                    },
                )
                .unwrap();
                assert_eq!(cut, Some(stop));
                assert!(pauses > 0);
                let o = common::outcome_of(hosts, stats, 0);
                assert_same(&base, &o, &format!("stepped {how:?} on {t} threads"));
            }
        }
    }
    // A stop past the last event: the whole run.
    let routing = sys.routing(&groupings[0]).unwrap();
    let map = WorkerMap::contiguous(2, 2).unwrap();
    let (hosts, stats, finished) = run_threads_with_until(
        L,
        routing,
        sys.hosts(&groupings[0]),
        &map,
        full.last_event + 1,
    )
    .unwrap();
    assert!(finished);
    assert_same(
        &full,
        &common::outcome_of(hosts, stats, 0),
        "stop past the end",
    );
}

#[test]
fn zero_lookahead_is_an_error_on_threads() {
    let sys = ring(4, L, 4, 10);
    let g = groups(&[&[0, 1], &[2, 3]]);
    for t in [1, 2] {
        let map = WorkerMap::contiguous(2, t).unwrap();
        let e = sys.run_threads(&g, Some(0), Some(&map)).unwrap_err();
        assert!(matches!(e, EngineError::ZeroLookahead), "{e:?}");
    }
}

/// The ring's host, made to fail at a given time, or to panic.
struct Faulty {
    host: Host,
    fail_at: Option<Picos>,
    panic: bool,
}

#[derive(Debug)]
struct Broke(Picos);
impl std::fmt::Display for Broke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the model broke at {} ps", self.0)
    }
}
impl std::error::Error for Broke {}

impl Partition for Faulty {
    fn next_event_time(&self) -> Option<Picos> {
        self.host.next_event_time()
    }
    fn run_until(&mut self, end: Picos, out: &mut Outbox) -> Result<(), BoxError> {
        if let Some(t) = self.fail_at {
            if t < end {
                if self.panic {
                    panic!("model panic at {t} ps");
                }
                return Err(Box::new(Broke(t)));
            }
        }
        self.host.run_until(end, out)
    }
    fn deliver(&mut self, msgs: &[Message]) -> Result<(), BoxError> {
        self.host.deliver(msgs)
    }
}

fn faulty(
    sys: &common::System,
    g: &[Vec<u32>],
    fail: &[(usize, Picos)],
    panic: bool,
) -> Vec<Faulty> {
    sys.hosts(g)
        .into_iter()
        .enumerate()
        .map(|(p, host)| Faulty {
            host,
            fail_at: fail.iter().find(|f| f.0 == p).map(|f| f.1),
            panic,
        })
        .collect()
}

#[test]
fn a_failing_partition_ends_the_run_with_its_error_on_every_thread_count() {
    let sys = ring(8, L, 12, 150);
    let g = groups(&[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]);
    // One failure; two in one window (the lowest partition is reported, as sequentially);
    // two in different windows (the first window's).
    for fail in [
        vec![(2, 50_000)],
        vec![(3, 50_000), (1, 50_500)],
        vec![(0, 90_000), (3, 50_000)],
    ] {
        let routing = sys.routing(&g).unwrap();
        let seq = run_threads_with(
            L,
            routing.clone(),
            faulty(&sys, &g, &fail, false),
            &WorkerMap::contiguous(4, 1).unwrap(),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(seq.contains("the model broke"), "{seq}");
        for map in maps(4) {
            let e = run_threads_with(L, routing.clone(), faulty(&sys, &g, &fail, false), &map)
                .err()
                .unwrap();
            assert!(matches!(e, EngineError::Model { .. }), "{e:?}");
            assert_eq!(e.to_string(), seq, "{fail:?} on {map:?}");
        }
    }
}

#[test]
fn a_panicking_worker_stops_the_others() {
    let sys = ring(8, L, 12, 150);
    let g = groups(&[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]);
    let routing = sys.routing(&g).unwrap();
    for map in [
        WorkerMap::contiguous(4, 2).unwrap(),
        WorkerMap::contiguous(4, 4).unwrap(),
    ] {
        for p in [0, 3] {
            let parts = faulty(&sys, &g, &[(p, 50_000)], true);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_threads_with(L, routing.clone(), parts, &map)
            }));
            assert!(r.is_err(), "partition {p}: the panic was not resumed");
        }
    }
}

/// Idle partitions, some reporting unfinished work: the stall lists every stalled
/// partition, by index, whichever worker hosts it.
struct Idle(Option<&'static str>);

impl Partition for Idle {
    fn next_event_time(&self) -> Option<Picos> {
        None
    }
    fn run_until(&mut self, _: Picos, _: &mut Outbox) -> Result<(), BoxError> {
        Ok(())
    }
    fn deliver(&mut self, _: &[Message]) -> Result<(), BoxError> {
        Ok(())
    }
    fn stalled(&self) -> Option<String> {
        self.0.map(str::to_string)
    }
}

#[test]
fn stalls_are_merged_over_workers() {
    let routing = Routing::new(4, (0..4).map(|p| (PortId(p as u32), p))).unwrap();
    let parts = || vec![Idle(None), Idle(Some("a")), Idle(None), Idle(Some("b"))];
    let seq = run_threads_with(
        10,
        routing.clone(),
        parts(),
        &WorkerMap::contiguous(4, 1).unwrap(),
    )
    .err()
    .unwrap()
    .to_string();
    assert_eq!(
        seq,
        "the simulation stalled: nothing is scheduled, but partition 1: a; partition 3: b"
    );
    for map in maps(4) {
        let e = run_threads_with(10, routing.clone(), parts(), &map)
            .err()
            .unwrap();
        assert_eq!(e.to_string(), seq, "{map:?}");
    }
}

#[test]
fn more_workers_than_cores_progress() {
    // 8 workers, one partition each, on a machine of fewer cores: the barrier's sleepers
    // keep it going.
    let sys = ring(8, L, 12, 150);
    let g: Vec<Vec<u32>> = (0..8).map(|n| vec![n]).collect();
    let seq = sys.run(&g, Some(L)).unwrap();
    let o = sys.run_threads(&g, Some(L), None).unwrap();
    assert_same(&seq, &o, "8 workers");
    assert_eq!(common::counters(&seq.stats), common::counters(&o.stats));
}
