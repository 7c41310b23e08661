//! # tessera-interconnect
//!
//! Messages that cross partitions, inter-chiplet link models and the intra-chiplet NoC
//! (DESIGN.md sections 3 and 4). What exists now is the envelope every transport moves:
//!
//! - [`Picos`]: global time, an integer count of picoseconds; [`period_ps`] for clock domains.
//! - [`Message`]: `(arrive_at, src_port, src_seq, dst_port, payload)`. [`PortId`] is a
//!   stable id of a port in the modeled system, never a partition or rank number.
//! - [`OrderKey`] / [`Message::key`] / [`sort_arrivals`]: the total order
//!   `(arrive_at, src_port, src_seq)` in which every receiver consumes arrivals, inside a
//!   partition or across partitions alike. Keys are unique (a port never reuses a sequence
//!   number), so the order is strict and independent of where messages came from.
//! - [`Payload`]: a small closed enum (plain data, no heap for the fixed-size variants);
//!   the models add their own variants as they arrive. [`Message::encode`] /
//!   [`Message::decode`] give the wire form the MPI transport will use.
//! - [`Port`]: the sending end of a port; stamps `src_seq` and enforces the lookahead
//!   contract `arrive_at >= now + min_latency`, with a [`SendError`] naming the port when a
//!   sender breaks it.
//!
//! - [`Partition`], [`Outbox`], [`Link`]: what a set of modeled units simulated together
//!   implements and declares so that the engine of `tessera-cluster` can drive it (here,
//!   below both the models and the engine, so that neither depends on the other's
//!   internals).
//!
//! - [`BwPort`]: a bandwidth-limited resource as a calendar of busy intervals in exact
//!   units (fractional picoseconds carry; no window moves more than the bandwidth): the one
//!   implementation of exact bandwidth, for the GPU model's ports, caches, DRAM and links.
//! - [`ChipletLink`], [`LinkSpec`], [`Topology`]: one direction of an inter-chiplet link
//!   (sender egress serializing on a [`BwPort`], per-packet overhead, FIFO queueing, fixed
//!   latency that bounds the lookahead, traffic and queueing counters) and the wiring of
//!   chiplets (fully connected, ring, 2D mesh, switch) with minimal deterministic routing;
//!   the GPU model's link interfaces send on them.
//! - [`Crossbar`] and [`IslipCrossbar`]: input-queued crossbars, FIFO inputs (checked
//!   against Karol et al.'s saturation throughput) or virtual output queues with iSLIP
//!   (against McKeown's), with credits per input and per output and arbitration that
//!   depends only on the ports and the cycle: the networks of the GPU model's NoC
//!   crossbar unit.

mod bw_port;
mod chiplet_link;
mod crossbar;
mod islip;
mod message;
mod partition;
mod port;

pub use bw_port::BwPort;
pub use chiplet_link::{ChipletLink, Hop, LinkSpec, LinkStats, Topology};
pub use crossbar::{Crossbar, CrossbarSpec, CrossbarStats, NoCredit};
pub use islip::IslipCrossbar;
pub use message::{sort_arrivals, Message, OrderKey, Payload, PortId, WireError};
pub use partition::{BoxError, Link, Outbox, Partition};
pub use port::{Port, PortError, SendError, Sequence};

/// Global simulated time: an integer count of picoseconds (DESIGN.md section 3).
pub type Picos = u64;

/// Period in picoseconds of a clock of `hz` hertz, `round(1e12 / hz)`.
pub fn period_ps(hz: u64) -> Picos {
    (1_000_000_000_000u64 + hz / 2) / hz.max(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn period_rounds_to_nearest_picosecond() {
        assert_eq!(super::period_ps(1_000_000_000), 1000);
        // 1801 MHz (the CPCoh study's GPU clock): 555.247 ps -> 555.
        assert_eq!(super::period_ps(1_801_000_000), 555);
        assert_eq!(super::period_ps(1_410_000_000), 709);
    }
}
