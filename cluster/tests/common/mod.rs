//! A toy modeled system for the engine tests: nodes that process tokens and forward them
//! over ports, hosted in any grouping of nodes into partitions.
//!
//! Each node has one input port (id = node id) and numbered output links (port id
//! `OUT_BASE + node * 64 + k`), each a [`Port`] with a fixed latency. A node processes one
//! token at a time (a FIFO of waiting tokens), for a delay given by a function of the node,
//! the token and the node's accumulator; when done it folds the token into the accumulator
//! (order-sensitive) and, while the token has hops left, forwards it on the link the route
//! function picks from the accumulator. Any difference in the order a node sees its
//! arrivals therefore changes its accumulator, its later delays and its routing: the logs
//! diverge quickly if the engine ever depends on the partitioning.
//!
//! A host (one partition) keeps its nodes' events in one priority queue ordered like the
//! engine's inboxes: `(time, class, src_port, src_seq)` with arrivals (class 0) before a
//! node's own work at the same instant (class 1: processing done, class 2: injection).
//! Messages between nodes of one host never leave it; messages to other hosts go through
//! the engine. Results are keyed by node, never by partition.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;

use tessera_cluster::{
    run_threads_with, BoxError, Engine, EngineError, Link, Message, Outbox, Partition, Payload,
    Picos, Port, PortId, Routing, WindowStats, WorkerMap,
};

pub const OUT_BASE: u32 = 1000;

pub fn in_port(node: u32) -> PortId {
    PortId(node)
}

pub fn out_port(node: u32, k: usize) -> PortId {
    PortId(OUT_BASE + node * 64 + k as u32)
}

/// A token: an id and the hops it has left.
pub fn token(id: u32, hops: u32) -> u64 {
    (u64::from(id) << 32) | u64::from(hops)
}

fn token_id(t: u64) -> u64 {
    t >> 32
}

fn token_hops(t: u64) -> u32 {
    t as u32
}

pub type DelayFn = fn(node: u32, token: u64, acc: u64) -> Picos;
pub type RouteFn = fn(node: u32, token: u64, acc: u64, links: usize) -> usize;

#[derive(Clone)]
pub struct NodeSpec {
    /// `(destination node, latency)` per output link.
    pub links: Vec<(u32, Picos)>,
    /// `(time, token)` injected at this node.
    pub inject: Vec<(Picos, u64)>,
}

#[derive(Clone)]
pub struct System {
    pub nodes: Vec<NodeSpec>,
    pub delay: DelayFn,
    pub route: RouteFn,
    /// Keep a full byte log per node (off for the allocation test: only digests).
    pub log: bool,
}

/// What a run produced, keyed by node.
#[derive(Debug)]
pub struct Outcome {
    /// Every node's event log, concatenated in node order.
    pub log: Vec<u8>,
    /// FNV digest of every node's events, in node order.
    pub digest: u64,
    /// Time of the last event of any node.
    pub last_event: Picos,
    /// Events handled, all nodes.
    pub events: u64,
    /// Arrivals at a node at the same instant as its previous arrival but from another
    /// port (the src_port tie-break decided their order).
    pub ties: u64,
    /// Cross-partition messages that arrived exactly at the end of the window that sent
    /// them (the minimum-latency case).
    pub boundary_hits: u64,
    pub stats: WindowStats,
    /// The engine's time at the end (the end of the last window).
    pub end: Picos,
}

impl System {
    pub fn links(&self) -> Vec<Link> {
        let mut v = Vec::new();
        for (u, n) in self.nodes.iter().enumerate() {
            for (k, &(dst, latency)) in n.links.iter().enumerate() {
                v.push(Link {
                    src: out_port(u as u32, k),
                    dst: in_port(dst),
                    latency,
                });
            }
        }
        v
    }

    /// Partition index of each node, from groups of node ids.
    pub fn assignment(&self, groups: &[Vec<u32>]) -> Vec<usize> {
        let mut part = vec![usize::MAX; self.nodes.len()];
        for (p, g) in groups.iter().enumerate() {
            for &n in g {
                assert_eq!(part[n as usize], usize::MAX, "node {n} in two groups");
                part[n as usize] = p;
            }
        }
        assert!(part.iter().all(|&p| p != usize::MAX), "a node in no group");
        part
    }

    pub fn routing(&self, groups: &[Vec<u32>]) -> Result<Routing, EngineError> {
        let part = self.assignment(groups);
        let mut entries = Vec::new();
        for (u, n) in self.nodes.iter().enumerate() {
            entries.push((in_port(u as u32), part[u]));
            for k in 0..n.links.len() {
                entries.push((out_port(u as u32, k), part[u]));
            }
        }
        Routing::new(groups.len(), entries)
    }

    pub fn hosts(&self, groups: &[Vec<u32>]) -> Vec<Host> {
        let n = self.nodes.len();
        // Every token is queued, in processing or in flight: sizing the queues for all of
        // them keeps the model itself from allocating once running.
        let tokens: usize = self.nodes.iter().map(|s| s.inject.len()).sum();
        groups
            .iter()
            .map(|g| {
                let mut local = vec![None; n];
                let mut nodes = Vec::new();
                let mut heap = BinaryHeap::with_capacity(2 * tokens);
                for (i, &id) in g.iter().enumerate() {
                    local[id as usize] = Some(i);
                    let spec = &self.nodes[id as usize];
                    let ports = spec
                        .links
                        .iter()
                        .enumerate()
                        .map(|(k, &(dst, lat))| {
                            (Port::new(out_port(id, k), in_port(dst), lat).unwrap(), lat)
                        })
                        .collect();
                    for (j, &(t, tok)) in spec.inject.iter().enumerate() {
                        heap.push(Reverse(Ev {
                            time: t,
                            class: INJECT,
                            a: u64::from(id),
                            b: j as u64,
                            node: i,
                            token: tok,
                        }));
                    }
                    nodes.push(Node {
                        id,
                        ports,
                        queue: VecDeque::with_capacity(tokens),
                        current: None,
                        acc: 0,
                        log: Vec::new(),
                        digest: FNV_OFFSET,
                        last_event: 0,
                        events: 0,
                        last_arrival: None,
                        ties: 0,
                    });
                }
                Host {
                    nodes,
                    local,
                    heap,
                    now: 0,
                    delay: self.delay,
                    route: self.route,
                    log: self.log,
                    boundary_hits: 0,
                }
            })
            .collect()
    }

    /// Runs the system grouped as `groups` on the sequential engine. `lookahead`: `None`
    /// computes it from the links (`Picos::MAX` when nothing crosses).
    pub fn run(
        &self,
        groups: &[Vec<u32>],
        lookahead: Option<Picos>,
    ) -> Result<Outcome, EngineError> {
        let mut engine = self.engine(groups, lookahead)?;
        engine.run()?;
        Ok(outcome(engine))
    }

    /// Runs the system grouped as `groups` on the thread transport, the partitions dealt
    /// to workers by `map` (`None`: one worker per partition, contiguous).
    pub fn run_threads(
        &self,
        groups: &[Vec<u32>],
        lookahead: Option<Picos>,
        map: Option<&WorkerMap>,
    ) -> Result<Outcome, EngineError> {
        let routing = self.routing(groups)?;
        let l = match lookahead {
            Some(l) => l,
            None => routing.lookahead(self.links())?.unwrap_or(Picos::MAX),
        };
        let own;
        let map = match map {
            Some(m) => m,
            None => {
                own = WorkerMap::contiguous(groups.len(), groups.len())?;
                &own
            }
        };
        let (hosts, stats) = run_threads_with(l, routing, self.hosts(groups), map)?;
        // The engine's final time is not handed back; the sequential runs' is the end of
        // the last window, which tests compare through the window counters instead.
        Ok(outcome_of(hosts, stats, 0))
    }

    pub fn engine(
        &self,
        groups: &[Vec<u32>],
        lookahead: Option<Picos>,
    ) -> Result<Engine<Host>, EngineError> {
        let routing = self.routing(groups)?;
        let l = match lookahead {
            Some(l) => l,
            None => routing.lookahead(self.links())?.unwrap_or(Picos::MAX),
        };
        Engine::sequential(l, routing, self.hosts(groups))
    }
}

/// Collects the results of a finished (or paused) engine, in node order.
pub fn outcome(engine: Engine<Host>) -> Outcome {
    let stats = engine.stats().clone();
    let end = engine.now();
    outcome_of(engine.into_partitions(), stats, end)
}

/// Collects the results of hosts handed back by any transport, in node order.
pub fn outcome_of(hosts: Vec<Host>, stats: WindowStats, end: Picos) -> Outcome {
    let boundary_hits = hosts.iter().map(|h| h.boundary_hits).sum();
    let mut nodes: Vec<Node> = hosts.into_iter().flat_map(|h| h.nodes).collect();
    nodes.sort_by_key(|n| n.id);
    let mut log = Vec::new();
    let mut digest = FNV_OFFSET;
    for n in &nodes {
        log.extend_from_slice(&n.log);
        fnv(&mut digest, &n.digest.to_le_bytes());
        fnv(&mut digest, &n.acc.to_le_bytes());
    }
    Outcome {
        log,
        digest,
        last_event: nodes.iter().map(|n| n.last_event).max().unwrap_or(0),
        events: nodes.iter().map(|n| n.events).sum(),
        ties: nodes.iter().map(|n| n.ties).sum(),
        boundary_hits,
        stats,
        end,
    }
}

const ARRIVAL: u8 = 0;
const DONE: u8 = 1;
const INJECT: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Ev {
    time: Picos,
    class: u8,
    /// Arrival: src_port; others: node id.
    a: u64,
    /// Arrival: src_seq; injection: its index; done: 0.
    b: u64,
    /// Local index of the node.
    node: usize,
    token: u64,
}

pub struct Node {
    id: u32,
    ports: Vec<(Port, Picos)>,
    queue: VecDeque<u64>,
    current: Option<u64>,
    acc: u64,
    log: Vec<u8>,
    digest: u64,
    last_event: Picos,
    events: u64,
    last_arrival: Option<(Picos, u64)>,
    ties: u64,
}

pub struct Host {
    nodes: Vec<Node>,
    /// Node id -> local index.
    local: Vec<Option<usize>>,
    heap: BinaryHeap<Reverse<Ev>>,
    now: Picos,
    delay: DelayFn,
    route: RouteFn,
    log: bool,
    pub boundary_hits: u64,
}

#[derive(Debug)]
struct HostError(String);

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostError {}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

impl Host {
    fn record(&mut self, node: usize, ev: &Ev) {
        let log = self.log;
        let n = &mut self.nodes[node];
        let mut rec = [0u8; 33];
        rec[0..8].copy_from_slice(&ev.time.to_le_bytes());
        rec[8] = ev.class;
        rec[9..17].copy_from_slice(&ev.a.to_le_bytes());
        rec[17..25].copy_from_slice(&ev.token.to_le_bytes());
        rec[25..33].copy_from_slice(&n.acc.to_le_bytes());
        fnv(&mut n.digest, &rec);
        if log {
            n.log.extend_from_slice(&rec);
        }
        n.last_event = ev.time;
        n.events += 1;
    }

    fn start_next(&mut self, node: usize, now: Picos) {
        let n = &mut self.nodes[node];
        if n.current.is_some() {
            return;
        }
        if let Some(tok) = n.queue.pop_front() {
            n.current = Some(tok);
            let d = (self.delay)(n.id, tok, n.acc);
            self.heap.push(Reverse(Ev {
                time: now + d,
                class: DONE,
                a: u64::from(n.id),
                b: 0,
                node,
                token: tok,
            }));
        }
    }

    fn handle(&mut self, ev: Ev, end: Picos, out: &mut Outbox) -> Result<(), BoxError> {
        let node = ev.node;
        self.record(node, &ev);
        match ev.class {
            ARRIVAL | INJECT => {
                let n = &mut self.nodes[node];
                if ev.class == ARRIVAL {
                    if let Some((t, p)) = n.last_arrival {
                        if t == ev.time && p != ev.a {
                            n.ties += 1;
                        }
                    }
                    n.last_arrival = Some((ev.time, ev.a));
                }
                n.queue.push_back(ev.token);
                self.start_next(node, ev.time);
            }
            _ => {
                let n = &mut self.nodes[node];
                n.current = None;
                n.acc = n
                    .acc
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(token_id(ev.token) * 31 + u64::from(token_hops(ev.token)))
                    .rotate_left(17);
                let hops = token_hops(ev.token);
                if hops > 0 {
                    let k = (self.route)(n.id, ev.token, n.acc, n.ports.len()) % n.ports.len();
                    let (port, lat) = &mut n.ports[k];
                    let next = (ev.token & !0xffff_ffff) | u64::from(hops - 1);
                    let msg = port.send(ev.time, ev.time + *lat, Payload::Word(next))?;
                    let dst = msg.dst_port.0 as usize;
                    match self.local.get(dst).copied().flatten() {
                        Some(local) => self.heap.push(Reverse(Ev {
                            time: msg.arrive_at,
                            class: ARRIVAL,
                            a: u64::from(msg.src_port.0),
                            b: msg.src_seq,
                            node: local,
                            token: next,
                        })),
                        None => {
                            if msg.arrive_at == end {
                                self.boundary_hits += 1;
                            }
                            out.push(msg);
                        }
                    }
                }
                self.start_next(node, ev.time);
            }
        }
        Ok(())
    }
}

impl Partition for Host {
    fn next_event_time(&self) -> Option<Picos> {
        self.heap.peek().map(|Reverse(e)| e.time)
    }

    fn run_until(&mut self, end: Picos, out: &mut Outbox) -> Result<(), BoxError> {
        while let Some(&Reverse(ev)) = self.heap.peek() {
            if ev.time >= end {
                break;
            }
            if ev.time < self.now {
                return Err(Box::new(HostError(format!(
                    "event at {} ps before the host's time {} ps",
                    ev.time, self.now
                ))));
            }
            self.heap.pop();
            self.now = ev.time;
            self.handle(ev, end, out)?;
        }
        self.now = self.now.max(end);
        Ok(())
    }

    fn deliver(&mut self, msgs: &[Message]) -> Result<(), BoxError> {
        for m in msgs {
            // The model's own receiver-side check (DESIGN.md: no arrival in the past).
            if m.arrive_at < self.now {
                return Err(Box::new(HostError(format!(
                    "message from port {} arrives at {} ps, before the host's time {} ps",
                    m.src_port, m.arrive_at, self.now
                ))));
            }
            let dst = m.dst_port.0 as usize;
            let Some(local) = self.local.get(dst).copied().flatten() else {
                return Err(Box::new(HostError(format!(
                    "message for port {} which this host does not have",
                    m.dst_port
                ))));
            };
            let Payload::Word(tok) = m.payload else {
                return Err(Box::new(HostError("unexpected payload".into())));
            };
            self.heap.push(Reverse(Ev {
                time: m.arrive_at,
                class: ARRIVAL,
                a: u64::from(m.src_port.0),
                b: m.src_seq,
                node: local,
                token: tok,
            }));
        }
        Ok(())
    }
}

/// The ring of the engine tests: `n` nodes, link 0 to the next node, link 1 three nodes
/// on; latencies `l + q * (something)` with some exactly `l`, `q` = 1000 ps; delays
/// multiples of `q` (so with `l` a multiple of `q`, arrivals from different ports often
/// coincide); `tokens` tokens of `hops` hops each.
pub fn ring(n: u32, l: Picos, tokens: u32, hops: u32) -> System {
    let q: Picos = 1000;
    let nodes = (0..n)
        .map(|u| NodeSpec {
            links: vec![
                ((u + 1) % n, l + q * Picos::from(u % 3)),
                ((u + 3) % n, l + q * Picos::from(u % 2)),
            ],
            inject: (0..tokens)
                .filter(|t| t % n == u)
                .map(|t| (q * Picos::from(t % 3), token(t, hops)))
                .collect(),
        })
        .collect();
    fn delay(node: u32, token: u64, acc: u64) -> Picos {
        1000 * ((token_id(token) * 7 + u64::from(node) * 3 + acc) % 5)
    }
    fn route(_node: u32, token: u64, acc: u64, links: usize) -> usize {
        ((acc >> 7) ^ token_id(token)) as usize % links
    }
    System {
        nodes,
        delay,
        route,
        log: true,
    }
}

/// The window protocol's counters (what any transport agrees on), without the host times.
pub fn counters(s: &WindowStats) -> (u64, u64, u64, Picos, Picos) {
    (
        s.windows,
        s.messages,
        s.max_window_messages,
        s.skipped_ps,
        s.window_ps,
    )
}
