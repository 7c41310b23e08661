//! Inter-chiplet links and chiplet topologies (DESIGN.md section 5; the multi-chiplet issue).
//!
//! A [`ChipletLink`] is one direction of a point-to-point link: a sender egress that
//! serializes packets at the link's bandwidth (exact, a [`BwPort`]: fractional picoseconds
//! carry from packet to packet and no window ever carries more than the bandwidth), a per-packet
//! overhead (header/framing bytes), FIFO queueing behind earlier packets, and a fixed
//! latency from the start of a packet's transmission to its arrival (cut-through). Every
//! packet therefore arrives at least `latency_ps` after it is offered, so the latency is a
//! true lower bound for the conservative lookahead (DESIGN.md section 4).
//!
//! A [`Topology`] says how chiplets are wired (fully connected, ring, 2D mesh, or through a
//! switch) and which link a packet takes next toward its destination (deterministic
//! minimal routing), so the least latency between two chiplets is the hop count times the
//! link latency.

use crate::{BwPort, Picos};

/// Picoseconds per second.
const PS_PER_S: u128 = 1_000_000_000_000;

/// What one direction of an inter-chiplet link is (from the configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkSpec {
    /// Bytes per cycle of `clock_hz` the sender can put on the link.
    pub bandwidth_bytes_per_cycle: u64,
    /// The link's clock.
    pub clock_hz: u64,
    /// From the start of a packet's transmission to its arrival at the receiver.
    pub latency_ps: Picos,
    /// Bytes added to every packet (header, CRC, framing).
    pub packet_overhead_bytes: u64,
}

/// Counters of one link direction (integers; ratios are computed by whoever prints them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub packets: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// Bytes on the wire (payload plus overhead).
    pub wire_bytes: u64,
    /// Sum over packets of the time they waited behind earlier ones, in ps.
    pub queued_ps: u64,
    /// The longest such wait, in ps.
    pub max_queued_ps: u64,
}

/// One direction of a link: its spec and its sender's state.
#[derive(Clone, Debug)]
pub struct ChipletLink {
    spec: LinkSpec,
    /// Bytes per second (`bytes_per_cycle * clock_hz`), for the busy time in the stats.
    rate: u128,
    /// The sender's serialization; offers come in nondecreasing time, so it queues them
    /// in order (FIFO).
    port: BwPort,
    /// The latest offer's time (offers must not go back in time; checked in debug builds).
    last_now: Picos,
    stats: LinkStats,
}

impl ChipletLink {
    pub fn new(spec: LinkSpec) -> ChipletLink {
        ChipletLink {
            rate: spec.bandwidth_bytes_per_cycle.max(1) as u128 * spec.clock_hz.max(1) as u128,
            port: BwPort::new(spec.bandwidth_bytes_per_cycle, spec.clock_hz),
            spec,
            last_now: 0,
            stats: LinkStats::default(),
        }
    }

    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Offers a packet of `bytes` payload at `now` (calls in nondecreasing `now`): it
    /// starts when the sender is free and arrives `latency_ps` after it starts. Returns
    /// the arrival time.
    pub fn send(&mut self, now: Picos, bytes: u64) -> Picos {
        let start = self.start(now, bytes);
        let wire = bytes + self.spec.packet_overhead_bytes;
        let waited = start - now;
        let s = &mut self.stats;
        s.packets += 1;
        s.bytes += bytes;
        s.wire_bytes += wire;
        s.queued_ps += waited;
        s.max_queued_ps = s.max_queued_ps.max(waited);
        start + self.spec.latency_ps
    }

    /// Like [`ChipletLink::send`], but returns when the packet's last byte arrives: the end
    /// of its transmission (rounded up to a ps) plus `latency_ps` (store and forward, for a
    /// receiver that checks whole packets). Still at least `latency_ps` after `now`.
    pub fn send_whole(&mut self, now: Picos, bytes: u64) -> Picos {
        self.send_whole_span(now, bytes).0
    }

    /// Serializes a packet of `bytes` payload offered at `now`; returns its start, rounded
    /// up to a picosecond (never earlier than the exact start).
    fn start(&mut self, now: Picos, bytes: u64) -> Picos {
        debug_assert!(
            now >= self.last_now,
            "offers back in time: {now} after {}",
            self.last_now
        );
        // Offers in nondecreasing time leave no gap after `now` for this one to fill
        // (a gap opens only before an offer that finds the link idle), so the port's
        // earliest gap is the back of its queue: FIFO.
        self.last_now = now;
        self.port
            .reserve(now, now, bytes + self.spec.packet_overhead_bytes)
    }

    /// [`ChipletLink::send_whole`], also returning when the sender was transmitting the
    /// packet, `[start, end)` rounded up to a picosecond (for observers).
    pub fn send_whole_span(&mut self, now: Picos, bytes: u64) -> (Picos, Picos, Picos) {
        let start = self.send(now, bytes) - self.spec.latency_ps;
        let end = self.free_at().max(start);
        (end + self.spec.latency_ps, start, end)
    }

    /// Picoseconds the sender has spent transmitting (wire bytes at the link's bandwidth,
    /// rounded up).
    pub fn busy_ps(&self) -> Picos {
        (self.stats.wire_bytes as u128 * PS_PER_S).div_ceil(self.rate) as Picos
    }

    /// When the sender has finished everything offered so far (rounded up to a ps).
    pub fn free_at(&self) -> Picos {
        self.port.free_at()
    }

    /// The fraction of `[0, until_ps)` the sender was transmitting (`until_ps` at least
    /// [`ChipletLink::free_at`]).
    pub fn utilization(&self, until_ps: Picos) -> f64 {
        if until_ps == 0 {
            return 0.0;
        }
        let busy_ps = self.stats.wire_bytes as f64 * 1e12 / self.rate as f64;
        busy_ps / until_ps as f64
    }
}

/// How the chiplets of a package are wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// A link between every pair.
    FullyConnected,
    /// Chiplet `i` linked to `i - 1` and `i + 1` (mod n), both directions.
    Ring,
    /// A `cols`-wide grid, chiplet `i` at `(i % cols, i / cols)`, linked to its four
    /// neighbours; routed X first, then Y.
    Mesh2D { cols: u32 },
    /// Every chiplet linked to one switch; two hops between any two chiplets.
    Switch,
}

/// A link of a topology: from `src` to `dst`; `None` is the switch.
pub type Hop = (Option<u32>, Option<u32>);

impl Topology {
    /// The next hop of a packet at `at` (a chiplet, or `None` for the switch) going to
    /// chiplet `dst` of `n`; `None` when it is there. Minimal and deterministic (a ring
    /// breaks ties toward increasing indices).
    pub fn next_hop(&self, n: u32, at: Option<u32>, dst: u32) -> Option<Hop> {
        let Some(a) = at else {
            // At the switch: down to the destination.
            return Some((None, Some(dst)));
        };
        if a == dst {
            return None;
        }
        let next = match *self {
            Topology::FullyConnected => Some(dst),
            Topology::Ring => {
                let fwd = (dst + n - a) % n;
                Some(if fwd <= n - fwd {
                    (a + 1) % n
                } else {
                    (a + n - 1) % n
                })
            }
            Topology::Mesh2D { cols } => {
                let c = cols.max(1);
                let (ax, ay, dx, dy) = (a % c, a / c, dst % c, dst / c);
                Some(if ax != dx {
                    if dx > ax {
                        a + 1
                    } else {
                        a - 1
                    }
                } else if dy > ay {
                    a + c
                } else {
                    a - c
                })
            }
            Topology::Switch => None,
        };
        Some((Some(a), next))
    }

    /// Hops from chiplet `src` to chiplet `dst` of `n`.
    pub fn hops(&self, n: u32, src: u32, dst: u32) -> u32 {
        let mut at = Some(src);
        let mut k = 0;
        while let Some((_, next)) = self.next_hop(n, at, dst) {
            at = next;
            k += 1;
            if k > 2 * n + 2 {
                break; // unreachable with a valid topology: a guard, not a route
            }
        }
        k
    }

    /// Every link (both directions) of the topology over `n` chiplets.
    pub fn links(&self, n: u32) -> Vec<Hop> {
        let mut v = Vec::new();
        for a in 0..n {
            match *self {
                Topology::FullyConnected => {
                    v.extend((0..n).filter(|&b| b != a).map(|b| (Some(a), Some(b))))
                }
                Topology::Ring if n > 1 => {
                    v.push((Some(a), Some((a + 1) % n)));
                    if n > 2 {
                        v.push((Some(a), Some((a + n - 1) % n)));
                    }
                }
                Topology::Ring => {}
                Topology::Mesh2D { cols } => {
                    let c = cols.max(1);
                    let (x, y) = (a % c, a / c);
                    if x > 0 {
                        v.push((Some(a), Some(a - 1)));
                    }
                    if x + 1 < c && a + 1 < n {
                        v.push((Some(a), Some(a + 1)));
                    }
                    if y > 0 {
                        v.push((Some(a), Some(a - c)));
                    }
                    if a + c < n {
                        v.push((Some(a), Some(a + c)));
                    }
                }
                Topology::Switch => {
                    v.push((Some(a), None));
                    v.push((None, Some(a)));
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_and_forward_adds_the_packet_s_own_serialization() {
        let mut l = ChipletLink::new(spec());
        // 64 + 16 B at 64 B x 1.801 GHz: ceil(80e12 / 115.264e9) = 695 ps, then the latency.
        assert_eq!(l.send_whole(1_000, 64), 1_000 + 695 + 20_000);
        // Queued behind it: starts at the exact end of the first (fractions carried).
        let second = l.send_whole(1_000, 64);
        let exact = (2 * 80 * PS_PER_S).div_ceil(64 * 1_801_000_000) as u64;
        assert_eq!(second, 1_000 + exact + 20_000);
        assert_eq!(l.busy_ps(), exact);
    }

    /// The span an observer is given: the same arrival as `send_whole`, transmissions
    /// back to back (the second starts where the first ended) and never overlapping.
    #[test]
    fn a_packet_s_transmission_span_matches_its_arrival() {
        let mut l = ChipletLink::new(spec());
        let mut w = ChipletLink::new(spec());
        let (at, start, end) = l.send_whole_span(1_000, 64);
        assert_eq!(at, w.send_whole(1_000, 64));
        assert_eq!((start, end), (1_000, 1_695));
        assert_eq!(at, end + 20_000);
        let (at2, start2, end2) = l.send_whole_span(1_200, 64);
        assert_eq!(at2, w.send_whole(1_200, 64));
        assert_eq!(start2, end, "queued behind the first");
        assert_eq!(end2, 1_000 + l.busy_ps());
        // An idle link starts at once.
        let (_, start3, _) = l.send_whole_span(50_000, 64);
        assert_eq!(start3, 50_000);
    }

    fn spec() -> LinkSpec {
        // 64 B per cycle at 1.801 GHz: 115.264 GB/s, a packet of 64 + 16 B every 694.06 ps.
        LinkSpec {
            bandwidth_bytes_per_cycle: 64,
            clock_hz: 1_801_000_000,
            latency_ps: 20_000,
            packet_overhead_bytes: 16,
        }
    }

    #[test]
    fn serialization_is_exact_and_latency_a_lower_bound() {
        let mut l = ChipletLink::new(spec());
        let n = 1_000_000u64;
        let mut last = 0;
        for _ in 0..n {
            let a = l.send(0, 64);
            assert!(a >= 20_000, "arrival before the latency");
            assert!(a >= last, "FIFO");
            last = a;
        }
        // The last packet starts after n - 1 packets of 80 B: exactly
        // ceil((n - 1) * 80 * 1e12 / (64 * 1.801e9)) ps, fractions carried, not rounded
        // per packet.
        let exact = ((n - 1) as u128 * 80 * PS_PER_S).div_ceil(64 * 1_801_000_000) as u64;
        assert_eq!(last, exact + 20_000);
        let s = l.stats();
        assert_eq!((s.packets, s.bytes, s.wire_bytes), (n, 64 * n, 80 * n));
        assert_eq!(s.max_queued_ps, exact);
    }

    #[test]
    fn bandwidth_is_never_exceeded_in_any_window() {
        let mut l = ChipletLink::new(spec());
        let mut starts = Vec::new();
        let mut x = 9u64;
        let mut now = 0;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            now += (x >> 40) % 2_000;
            let bytes = 8 + (x >> 20) % 256;
            let a = l.send(now, bytes);
            starts.push((a - 20_000, bytes + 16));
        }
        // Bytes started in any window [s_i, s_j] fit the bandwidth over that window plus
        // one packet (the one starting at its end).
        let per_ps = 64.0 * 1.801e9 / 1e12;
        for w in [1usize, 10, 100, 1000] {
            for i in 0..starts.len() - w {
                let span = (starts[i + w].0 - starts[i].0) as f64;
                let bytes: u64 = starts[i..i + w].iter().map(|s| s.1).sum();
                assert!(bytes as f64 <= span * per_ps + 1.0, "window {w} at {i}");
            }
        }
        let u = l.utilization(l.free_at());
        assert!(u <= 1.0 && u > 0.5, "{u}");
    }

    #[test]
    fn an_idle_link_sends_at_once_and_a_busy_one_queues() {
        let mut l = ChipletLink::new(spec());
        assert_eq!(l.send(1_000, 64), 21_000);
        // 80 B take 694.06 ps: a packet offered 100 ps later waits 594.06 -> 595 ps.
        assert_eq!(l.send(1_100, 64), 1_695 + 20_000);
        assert_eq!(l.stats().queued_ps, 595);
        // Much later: no wait.
        assert_eq!(l.send(1_000_000, 0), 1_020_000);
    }

    #[test]
    fn topologies_route_minimally() {
        let n = 8;
        for a in 0..n {
            for b in 0..n {
                let d = if a == b { 0 } else { 1 };
                assert_eq!(Topology::FullyConnected.hops(n, a, b), d);
                let ring = ((b + n - a) % n).min((a + n - b) % n);
                assert_eq!(Topology::Ring.hops(n, a, b), ring);
                let (ax, ay, bx, by) = (a % 4, a / 4, b % 4, b / 4);
                let manhattan = ax.abs_diff(bx) + ay.abs_diff(by);
                assert_eq!(Topology::Mesh2D { cols: 4 }.hops(n, a, b), manhattan);
                assert_eq!(Topology::Switch.hops(n, a, b), 2 * d);
            }
        }
        // Every hop a route takes is a link of the topology.
        for t in [
            Topology::FullyConnected,
            Topology::Ring,
            Topology::Mesh2D { cols: 4 },
            Topology::Switch,
        ] {
            let links = t.links(n);
            for a in 0..n {
                for b in 0..n {
                    let mut at = Some(a);
                    while let Some(hop) = t.next_hop(n, at, b) {
                        assert!(links.contains(&hop), "{t:?}: {hop:?} not a link");
                        at = hop.1;
                    }
                }
            }
        }
        assert_eq!(Topology::FullyConnected.links(4).len(), 12);
        assert_eq!(Topology::Ring.links(4).len(), 8);
        assert_eq!(Topology::Mesh2D { cols: 2 }.links(4).len(), 8);
        assert_eq!(Topology::Switch.links(4).len(), 8);
    }
}
