//! The window protocol on the sequential transport: partitioning, window boundaries and
//! pauses never change results; skip-ahead; the minimum-latency case; every broken
//! contract is an error naming what broke.

mod common;

use std::collections::VecDeque;

use common::{in_port, out_port, ring, token, NodeSpec, Outcome, System};
use tessera_cluster::{
    BoxError, Engine, EngineError, Link, Message, Outbox, Partition, Payload, Picos, Port, PortId,
    Progress, Routing, Sequential,
};

const L: Picos = 4000;

fn groups(parts: &[&[u32]]) -> Vec<Vec<u32>> {
    parts.iter().map(|g| g.to_vec()).collect()
}

fn assert_same(a: &Outcome, b: &Outcome, what: &str) {
    assert_eq!(a.events, b.events, "{what}: event counts differ");
    assert_eq!(a.last_event, b.last_event, "{what}: final times differ");
    assert_eq!(a.digest, b.digest, "{what}: digests differ");
    assert!(a.log == b.log, "{what}: event logs differ");
}

fn ping_pong(latency: Picos, hops: u32) -> System {
    fn delay(_: u32, _: u64, _: u64) -> Picos {
        0
    }
    fn route(_: u32, _: u64, _: u64, _: usize) -> usize {
        0
    }
    System {
        nodes: vec![
            NodeSpec {
                links: vec![(1, latency)],
                inject: vec![(0, token(0, hops))],
            },
            NodeSpec {
                links: vec![(0, latency)],
                inject: vec![],
            },
        ],
        delay,
        route,
        log: true,
    }
}

#[test]
fn ping_pong_at_the_minimum_latency_is_the_same_on_one_and_two_partitions() {
    let hops = 1000;
    let sys = ping_pong(L, hops);
    let one = sys.run(&groups(&[&[0, 1]]), Some(L)).unwrap();
    let two = sys.run(&groups(&[&[0], &[1]]), None).unwrap();
    assert_same(&one, &two, "ping-pong 1 vs 2 partitions");
    // Zero processing delay: hop h arrives at exactly h * L.
    assert_eq!(two.last_event, Picos::from(hops) * L);
    // The window [T, T + L) starts at each arrival, and the reply, sent at T, arrives at
    // exactly T + L: every message lands on the window boundary, and is legal.
    assert_eq!(two.boundary_hits, u64::from(hops));
    assert_eq!(two.stats.messages, u64::from(hops));
    assert_eq!(one.stats.messages, 0);
    // The injection window plus one window per hop, on both; no idle time to skip.
    assert_eq!(two.stats.windows, u64::from(hops) + 1);
    assert_eq!(one.stats.windows, two.stats.windows);
    assert_eq!(two.stats.skipped_ps, 0);
    assert_eq!(two.stats.max_window_messages, 1);
}

#[test]
fn ring_is_the_same_for_every_grouping() {
    let sys = ring(8, L, 12, 150);
    let groupings: Vec<Vec<Vec<u32>>> = vec![
        groups(&[&[0, 1, 2, 3, 4, 5, 6, 7]]),
        groups(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]),
        groups(&[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]),
        groups(&[&[0], &[1], &[2], &[3], &[4], &[5], &[6], &[7]]),
        groups(&[&[0, 2, 4, 6], &[1, 3, 5, 7]]),
        groups(&[&[5, 0], &[3, 1, 2], &[7, 4, 6]]),
    ];
    let base = sys.run(&groupings[0], Some(L)).unwrap();
    assert!(base.events > 3000, "{}", base.events);
    // Arrivals from different ports at the same instant happen: the src_port tie-break
    // is exercised.
    assert!(base.ties > 0);
    assert_eq!(base.stats.messages, 0);
    for g in &groupings[1..] {
        let routing = sys.routing(g).unwrap();
        assert_eq!(routing.lookahead(sys.links()).unwrap(), Some(L), "{g:?}");
        let o = sys.run(g, Some(L)).unwrap();
        assert_same(&base, &o, &format!("{} partitions {g:?}", g.len()));
        // The global minimum next event is a minimum over nodes, so the windows are the
        // same too; only the traffic through the engine depends on the grouping.
        assert_eq!(o.stats.windows, base.stats.windows, "{g:?}");
        assert!(o.stats.messages > 0, "{g:?}");
        assert!(o.boundary_hits > 0, "{g:?}: no message at exactly T + L");
    }
}

#[test]
fn ring_is_the_same_for_any_legal_lookahead() {
    let sys = ring(8, L, 12, 150);
    let g = groups(&[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]);
    let base = sys.run(&g, Some(L)).unwrap();
    for l in [1, 999, 1000, 2500, L - 1] {
        let o = sys.run(&g, Some(l)).unwrap();
        assert_same(&base, &o, &format!("lookahead {l}"));
        assert!(o.stats.windows >= base.stats.windows);
    }
}

#[test]
fn pausing_never_changes_results() {
    let sys = ring(8, L, 12, 150);
    let g = groups(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
    let base = sys.run(&g, Some(L)).unwrap();
    let mut engine = sys.engine(&g, Some(L)).unwrap();
    let mut stop = 0;
    let mut pauses = 0;
    loop {
        // A stop that is not a multiple of anything in the model: windows get cut.
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
    let o = common::outcome(engine);
    assert_same(&base, &o, "paused every 3333 ps");
    assert!(o.stats.windows > base.stats.windows);
}

#[test]
fn skip_ahead_jumps_over_a_long_idle_time() {
    const SLEEP: Picos = 1_000_000_000_000; // one simulated second
    fn delay(node: u32, _: u64, acc: u64) -> Picos {
        // Node 0 sleeps for a second on its first token, then works at 1 ns a token.
        if node == 0 && acc == 0 {
            SLEEP
        } else {
            1000
        }
    }
    fn route(_: u32, _: u64, _: u64, _: usize) -> usize {
        0
    }
    let sys = System {
        nodes: vec![
            NodeSpec {
                links: vec![(1, L)],
                inject: vec![(0, token(0, 6))],
            },
            NodeSpec {
                links: vec![(0, L)],
                inject: vec![(SLEEP / 2, token(1, 3))],
            },
        ],
        delay,
        route,
        log: true,
    };
    let one = sys.run(&groups(&[&[0, 1]]), Some(L)).unwrap();
    let two = sys.run(&groups(&[&[0], &[1]]), None).unwrap();
    assert_same(&one, &two, "sleeping node, 1 vs 2 partitions");
    assert!(two.last_event > SLEEP);
    // A handful of windows, not a second's worth of 4 ns windows.
    assert!(two.stats.windows < 30, "{:?}", two.stats);
    assert!(two.stats.skipped_ps > SLEEP - 100 * L, "{:?}", two.stats);
    // Windows and skipped gaps tile [0, end of the last window).
    assert_eq!(two.stats.skipped_ps + two.stats.window_ps, two.end);

    // Paused in the middle of the idle time: the engine reports the next event, then
    // goes on to the same result.
    let mut engine = sys.engine(&groups(&[&[0], &[1]]), None).unwrap();
    assert_eq!(
        engine.run_until(SLEEP / 4).unwrap(),
        Progress::Paused {
            next_event: SLEEP / 2
        }
    );
    assert_eq!(
        engine.run_until(SLEEP * 3 / 4).unwrap(),
        Progress::Paused { next_event: SLEEP }
    );
    assert_eq!(engine.run_until(Picos::MAX).unwrap(), Progress::Finished);
    assert_same(&two, &common::outcome(engine), "paused in the idle time");
}

/// Two clusters of two nodes, 100 ps inside a cluster and 5000 ps between them.
fn clusters() -> System {
    fn delay(_: u32, token: u64, acc: u64) -> Picos {
        50 * ((token + acc) % 3)
    }
    fn route(_: u32, token: u64, acc: u64, links: usize) -> usize {
        ((acc >> 11) + (token >> 32)) as usize % links
    }
    let partner = [1, 0, 3, 2];
    let across = [2, 3, 0, 1];
    System {
        nodes: (0..4u32)
            .map(|u| NodeSpec {
                links: vec![(partner[u as usize], 100), (across[u as usize], 5000)],
                inject: vec![(u64::from(u) * 50, token(u, 400)), (0, token(u + 4, 300))],
            })
            .collect(),
        delay,
        route,
        log: true,
    }
}

#[test]
fn lookahead_follows_the_partitioning() {
    let sys = clusters();
    let cases: [(Vec<Vec<u32>>, Option<Picos>); 4] = [
        (groups(&[&[0, 1, 2, 3]]), None),
        (groups(&[&[0, 1], &[2, 3]]), Some(5000)),
        (groups(&[&[0, 2], &[1, 3]]), Some(100)),
        (groups(&[&[0], &[1], &[2], &[3]]), Some(100)),
    ];
    let mut base: Option<Outcome> = None;
    for (g, want) in &cases {
        let l = sys.routing(g).unwrap().lookahead(sys.links()).unwrap();
        assert_eq!(l, *want, "{g:?}");
        let o = sys.run(g, None).unwrap();
        if l.is_none() {
            // One partition, L = Picos::MAX: the whole run is one window.
            assert_eq!(o.stats.windows, 1);
        }
        match &base {
            None => base = Some(o),
            Some(b) => assert_same(b, &o, &format!("{g:?}")),
        }
    }
}

#[test]
fn zero_lookahead_is_an_error() {
    let sys = ring(4, L, 4, 10);
    let g = groups(&[&[0, 1], &[2, 3]]);
    let e = Engine::sequential(0, sys.routing(&g).unwrap(), sys.hosts(&g))
        .err()
        .unwrap();
    assert!(matches!(e, EngineError::ZeroLookahead));
    assert!(e.to_string().contains("lookahead"), "{e}");

    // Computed from the links: a zero-latency link between partitions is named.
    let routing = sys.routing(&g).unwrap();
    let mut links = sys.links();
    // Node 1's link 0 goes to node 2, in the other partition.
    links.push(Link {
        src: out_port(1, 0),
        dst: in_port(2),
        latency: 0,
    });
    let e = routing.lookahead(links.clone()).unwrap_err();
    assert!(matches!(e, EngineError::ZeroLatencyLink { .. }), "{e:?}");
    let s = e.to_string();
    assert!(s.contains("port 1064") && s.contains("port 2"), "{s}");
    // The same link inside one partition does not count.
    let g1 = groups(&[&[0, 1, 2, 3]]);
    let r1 = sys.routing(&g1).unwrap();
    assert_eq!(r1.lookahead(links).unwrap(), None);
}

#[test]
fn a_port_faster_than_the_lookahead_is_a_causality_error_naming_it() {
    // The ring's fastest links take L; claim a lookahead of L + 1000 for a split that
    // cuts them.
    let sys = ring(8, L, 12, 150);
    let g = groups(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
    let mut engine = sys.engine(&g, Some(L + 1000)).unwrap();
    let e = engine.run().unwrap_err();
    let EngineError::Causality {
        src_port,
        dst_port,
        arrive_at,
        receiver_time,
        ..
    } = e
    else {
        panic!("expected a causality error, got {e:?}");
    };
    assert!(arrive_at < receiver_time);
    assert!(src_port.0 >= common::OUT_BASE, "{src_port}");
    let link = sys.links().into_iter().find(|l| l.src == src_port).unwrap();
    assert_eq!(link.dst, dst_port);
    assert!(link.latency < L + 1000);
    let s = e.to_string();
    assert!(
        s.contains(&format!("lookahead violated by port {src_port}")),
        "{s}"
    );
    // The engine is failed from now on.
    assert!(matches!(engine.run().unwrap_err(), EngineError::Failed));
}

/// A partition that follows a script: at each listed time it emits its message (if any);
/// it records what it receives.
#[derive(Default)]
struct Scripted {
    script: VecDeque<(Picos, Option<Message>)>,
    /// The port it sends through with `Outbox::send` (checked), if any.
    port: Option<(Port, Picos)>,
    received: Vec<Message>,
    /// Never simulate its events (a model bug).
    stuck: bool,
    stall: Option<String>,
    fail_at: Option<Picos>,
}

#[derive(Debug)]
struct ScriptError(&'static str);
impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
impl std::error::Error for ScriptError {}

impl Partition for Scripted {
    fn next_event_time(&self) -> Option<Picos> {
        self.script.front().map(|e| e.0)
    }
    fn run_until(&mut self, end: Picos, out: &mut Outbox) -> Result<(), BoxError> {
        if self.stuck {
            return Ok(());
        }
        while let Some(&(t, _)) = self.script.front() {
            if t >= end {
                break;
            }
            if self.fail_at == Some(t) {
                return Err(Box::new(ScriptError("the model broke")));
            }
            let Some((_, msg)) = self.script.pop_front() else {
                break;
            };
            if let Some(m) = msg {
                out.push(m);
            }
            if let Some((port, delta)) = &mut self.port {
                out.send(port, t, t + *delta, Payload::Signal)?;
            }
        }
        Ok(())
    }
    fn deliver(&mut self, msgs: &[Message]) -> Result<(), BoxError> {
        self.received.extend_from_slice(msgs);
        Ok(())
    }
    fn stalled(&self) -> Option<String> {
        self.stall.clone()
    }
}

fn msg(arrive_at: Picos, src: u32, seq: u64, dst: u32) -> Message {
    Message {
        arrive_at,
        src_port: PortId(src),
        src_seq: seq,
        dst_port: PortId(dst),
        payload: Payload::Word(u64::from(src) << 8 | seq),
    }
}

/// Partition p hosts port p.
fn routing(n: usize) -> Routing {
    Routing::new(n, (0..n).map(|p| (PortId(p as u32), p))).unwrap()
}

#[test]
fn inboxes_arrive_in_the_fixed_order_at_exactly_the_window_end() {
    // Partitions 0 and 1 send to 2 during the window [100, 1100); the messages arrive
    // at 1100 (= T + L) and later, in an order given by port and sequence, never by sender.
    let p0 = Scripted {
        script: VecDeque::from([
            (100, Some(msg(1100, 7, 0, 2))),
            (100, Some(msg(1100, 7, 1, 2))),
            (600, Some(msg(1600, 7, 2, 2))),
        ]),
        ..Default::default()
    };
    let p1 = Scripted {
        script: VecDeque::from([
            (100, Some(msg(1600, 3, 0, 2))),
            (500, Some(msg(1100, 9, 0, 2))),
            (500, Some(msg(1100, 3, 1, 2))),
        ]),
        ..Default::default()
    };
    let mut engine =
        Engine::sequential(1000, routing(3), vec![p0, p1, Scripted::default()]).unwrap();
    let stats = engine.run().unwrap();
    let got: Vec<(Picos, u32, u64)> = engine.partitions()[2]
        .received
        .iter()
        .map(|m| (m.arrive_at, m.src_port.0, m.src_seq))
        .collect();
    assert_eq!(
        got,
        vec![
            (1100, 3, 1),
            (1100, 7, 0),
            (1100, 7, 1),
            (1100, 9, 0),
            (1600, 3, 0),
            (1600, 7, 2)
        ]
    );
    assert_eq!(stats.windows, 1);
    assert_eq!(stats.messages, 6);
    assert_eq!(stats.skipped_ps, 100);
}

#[test]
fn a_send_breaking_the_port_contract_is_an_error_naming_the_port() {
    let p = Scripted {
        script: VecDeque::from([(0, None), (5000, None)]),
        port: Some((Port::new(PortId(77), PortId(1), 1000).unwrap(), 10)),
        ..Default::default()
    };
    let mut engine = Engine::sequential(1000, routing(2), vec![p, Scripted::default()]).unwrap();
    let e = engine.run().unwrap_err();
    assert!(
        matches!(e, EngineError::Model { partition: 0, .. }),
        "{e:?}"
    );
    let s = e.to_string();
    assert!(
        s.contains("partition 0") && s.contains("port 77") && s.contains("lookahead"),
        "{s}"
    );
}

#[test]
fn unknown_destinations_and_duplicate_keys_are_errors() {
    let p = Scripted {
        script: VecDeque::from([(0, Some(msg(5000, 4, 0, 999)))]),
        ..Default::default()
    };
    let e = Engine::sequential(1000, routing(2), vec![p, Scripted::default()])
        .unwrap()
        .run()
        .unwrap_err();
    assert!(matches!(e, EngineError::UnknownDestination { .. }), "{e:?}");
    assert!(e.to_string().contains("port 999"), "{e}");

    // Two partitions claiming port 4.
    let a = Scripted {
        script: VecDeque::from([(0, Some(msg(5000, 4, 0, 2)))]),
        ..Default::default()
    };
    let b = Scripted {
        script: VecDeque::from([(0, Some(msg(5000, 4, 0, 2)))]),
        ..Default::default()
    };
    let e = Engine::sequential(1000, routing(3), vec![a, b, Scripted::default()])
        .unwrap()
        .run()
        .unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::DuplicateMessage {
                src_port: PortId(4),
                src_seq: 0
            }
        ),
        "{e:?}"
    );
}

#[test]
fn a_partition_that_does_not_reach_the_window_end_is_an_error() {
    let p = Scripted {
        script: VecDeque::from([(300, None)]),
        stuck: true,
        ..Default::default()
    };
    let e = Engine::sequential(1000, routing(1), vec![p])
        .unwrap()
        .run()
        .unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::EventInPast {
                partition: 0,
                event: 300,
                window_end: 1300
            }
        ),
        "{e:?}"
    );
}

#[test]
fn quiescence_with_unfinished_work_is_a_stall() {
    let p = Scripted {
        script: VecDeque::from([(10, None)]),
        ..Default::default()
    };
    let q = Scripted {
        stall: Some("warp 3 waits on barrier 1".into()),
        ..Default::default()
    };
    let e = Engine::sequential(1000, routing(2), vec![p, q])
        .unwrap()
        .run()
        .unwrap_err();
    assert!(matches!(e, EngineError::Stalled { .. }), "{e:?}");
    let s = e.to_string();
    assert!(s.contains("partition 1: warp 3 waits on barrier 1"), "{s}");
}

#[test]
fn model_errors_name_the_partition_and_fail_the_engine() {
    let p = Scripted {
        script: VecDeque::from([(10, None), (2000, None)]),
        fail_at: Some(2000),
        ..Default::default()
    };
    let mut engine = Engine::sequential(1000, routing(2), vec![Scripted::default(), p]).unwrap();
    let e = engine.run().unwrap_err();
    assert_eq!(e.to_string(), "partition 1: the model broke");
    assert!(std::error::Error::source(&e).is_some());
    assert!(matches!(engine.run_until(5), Err(EngineError::Failed)));
}

#[test]
fn an_event_at_the_end_of_the_clock_is_an_error() {
    let p = Scripted {
        script: VecDeque::from([(Picos::MAX - 5, None), (Picos::MAX, None)]),
        ..Default::default()
    };
    let mut engine = Engine::sequential(1000, routing(1), vec![p]).unwrap();
    assert!(matches!(engine.run(), Err(EngineError::TimeOverflow)));
}

#[test]
fn construction_checks_the_partition_counts() {
    let e = Engine::sequential(1000, routing(3), vec![Scripted::default()])
        .err()
        .unwrap();
    assert!(matches!(e, EngineError::BadTransport { .. }), "{e:?}");
    let e = Engine::new(
        1000,
        routing(2),
        vec![Scripted::default()],
        Sequential::new(2),
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            EngineError::PartitionCountMismatch {
                given: 1,
                hosted: 2
            }
        ),
        "{e:?}"
    );
    // Boxed partitions of different types in one engine.
    let parts: Vec<Box<dyn Partition>> = vec![
        Box::new(Scripted::default()),
        Box::new(ring(1, L, 1, 0).hosts(&groups(&[&[0]])).remove(0)),
    ];
    let r = Routing::new(2, [(PortId(0), 1)]).unwrap();
    let mut engine = Engine::sequential(L, r, parts).unwrap();
    assert_eq!(engine.run().unwrap().windows, 1);
}
