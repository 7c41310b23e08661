//! The reply queues of a channel unit's slices (`noc.model: crossbar` with
//! `l2.reply_queue_packets` > 0; issue 22 item 3): between each L2 slice (and with a
//! private L2 the LLC slice) and its input to the chiplet's reply crossbar, GPGPU-Sim's
//! L2-to-interconnect queue (`-gpgpu_dram_partition_queues`, fourth field).
//!
//! A slice knows when a reply's data will be ready as soon as it takes the request (its
//! lookup, its DRAM access), so it computes the packet then and keeps it here until that
//! time. Then the packet enters the reply queue, a place the slice holds a credit for
//! ([`Credits`], one virtual channel per slice, one credit per packet); the crossbar
//! returns the credit, a timed message, when it grants the packet. A packet without credit
//! waits here (counted as a credit wait), and while one waits the slice takes no further
//! request: requests for it are held, in order, in its request queue, which fills and
//! stops the crossbar's output to it (`l2.request_queue_packets`), and so back to the SMs.
//! Credit spent only from a packet's departure, not from when it was computed: a miss's
//! reply does not hold a place in the queue while DRAM serves it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::credits::{CreditStats, Credits};
use super::Packet;
use crate::counters::unit_counters;
use crate::Picos;

unit_counters! {
    /// What the slices' reply queues did to a channel unit.
    pub struct ReplyQueueStats {
        /// Replies and acknowledgements that found their slice's reply queue full and
        /// waited in the slice.
        credit_waits,
        /// Picoseconds they waited, summed.
        credit_wait_ps,
        /// Requests a slice held back (left in its request queue) because a packet of
        /// its was waiting for room in its reply queue.
        held_requests,
        /// The most packets one slice's reply queue held (never more than
        /// `l2.reply_queue_packets`).
        peak_packets,
    }
}

/// A packet computed ahead: it leaves at `at` (ties in the order computed).
#[derive(Clone, Copy, Debug)]
struct Ahead {
    at: Picos,
    seq: u64,
    queue: u32,
    dst: u32,
    pkt: Packet,
}

impl PartialEq for Ahead {
    fn eq(&self, o: &Ahead) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Ahead {}
impl PartialOrd for Ahead {
    fn partial_cmp(&self, o: &Ahead) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ahead {
    fn cmp(&self, o: &Ahead) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// The reply queues of one channel unit's slices, numbered as its L2 slices and then its
/// LLC slice.
pub(super) struct SliceOutputs {
    ahead: BinaryHeap<Reverse<Ahead>>,
    seq: u64,
    credits: Credits<(u32, Packet)>,
    /// By slice: the requests held back, with when they arrived and from which unit.
    held: Vec<VecDeque<(Picos, u32, Packet)>>,
    /// Requests held now, over every slice, and ever.
    held_any: usize,
    held_requests: u64,
}

impl SliceOutputs {
    /// The reply queues of `queues` slices, `depth` packets each.
    pub(super) fn new(queues: usize, depth: u32) -> SliceOutputs {
        SliceOutputs {
            ahead: BinaryHeap::new(),
            seq: 0,
            credits: Credits::new(depth as u64),
            held: (0..queues).map(|_| VecDeque::new()).collect(),
            held_any: 0,
            held_requests: 0,
        }
    }

    /// Slice `queue`'s packet `pkt` for unit `dst` (the crossbar takes it there) leaves at
    /// `at`, or later without credit.
    pub(super) fn push(&mut self, at: Picos, queue: u32, dst: u32, pkt: Packet) {
        let seq = self.seq;
        self.seq += 1;
        self.ahead.push(Reverse(Ahead {
            at,
            seq,
            queue,
            dst,
            pkt,
        }));
    }

    /// When the next packet computed ahead is due.
    pub(super) fn next(&self) -> Option<Picos> {
        self.ahead.peek().map(|a| a.0.at)
    }

    /// Moves the packets due by `t` into their reply queues: to `go` those with credit (spent),
    /// the others wait for it.
    pub(super) fn depart(&mut self, t: Picos, go: &mut Vec<(u32, Packet)>) {
        while let Some(a) = self.ahead.peek().map(|a| a.0).filter(|a| a.at <= t) {
            self.ahead.pop();
            if let Some(p) = self.credits.offer(a.at, a.queue, 1, (a.dst, a.pkt)) {
                go.push(p);
            }
        }
    }

    /// `n` credits of slice `queue` come back at `t`: to `go` its waiting packets that may
    /// leave now.
    pub(super) fn credit(&mut self, t: Picos, queue: u32, n: u32, go: &mut Vec<(u32, Packet)>) {
        self.credits.credit(t, queue, n as u64, go);
    }

    /// Whether slice `queue` has a packet waiting for credit, or requests held already:
    /// then a request for it is held too.
    pub(super) fn holds(&self, queue: u32) -> bool {
        self.credits.waiting_on(queue) > 0
            || self.held.get(queue as usize).is_some_and(|h| !h.is_empty())
    }

    /// Whether any slice has a packet waiting for credit or requests held.
    pub(super) fn holding(&self) -> bool {
        self.credits.waiting() > 0 || self.held_any > 0
    }

    /// Holds request `pkt` from unit `src`, arrived at `at`, for slice `queue`.
    pub(super) fn hold(&mut self, queue: u32, at: Picos, src: u32, pkt: Packet) {
        if let Some(h) = self.held.get_mut(queue as usize) {
            h.push_back((at, src, pkt));
            self.held_requests += 1;
            self.held_any += 1;
        }
    }

    /// A request held for a slice that has no packet waiting for credit (the first such
    /// slice's oldest), with the slice and the unit it came from.
    pub(super) fn release(&mut self) -> Option<(u32, u32, Packet)> {
        if self.held_any == 0 {
            return None;
        }
        for (q, h) in self.held.iter_mut().enumerate() {
            if !h.is_empty() && self.credits.waiting_on(q as u32) == 0 {
                self.held_any -= 1;
                return h.pop_front().map(|(_, src, pkt)| (q as u32, src, pkt));
            }
        }
        None
    }

    pub(super) fn stats(&self) -> ReplyQueueStats {
        let c: &CreditStats = self.credits.stats();
        ReplyQueueStats {
            credit_waits: c.credit_waits,
            credit_wait_ps: c.credit_wait_ps,
            held_requests: self.held_requests,
            peak_packets: c.peak_buffer_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{Ctx, Response};

    fn ack(tag: u32) -> Packet {
        Response::WriteAck {
            line: 0,
            tag,
            sm: 1,
            ctx: Ctx::default(),
        }
        .into()
    }

    fn tags(go: &[(u32, Packet)]) -> Vec<u32> {
        go.iter()
            .map(|(_, p)| match p {
                Packet::Response(Response::WriteAck { tag, .. }) => *tag,
                _ => u32::MAX,
            })
            .collect()
    }

    /// Packets leave at their time in time order, spend a credit each, and the rest of
    /// their slice's wait for credits (other slices pass them); while one waits, its
    /// slice holds requests, and releases them once its queue drains.
    #[test]
    fn packets_leave_at_their_time_with_credit_and_hold_requests_meanwhile() {
        let mut o = SliceOutputs::new(2, 2);
        o.push(30, 0, 1, ack(3));
        o.push(10, 0, 1, ack(1));
        o.push(20, 0, 1, ack(2));
        o.push(20, 1, 1, ack(9));
        assert_eq!(o.next(), Some(10));
        let mut go = Vec::new();
        o.depart(15, &mut go);
        assert_eq!(tags(&go), [1]);
        go.clear();
        o.depart(30, &mut go);
        // Slice 0 had 2 credits: packets 1 and 2; packet 3 waits. Slice 1 passes.
        assert_eq!(tags(&go), [2, 9]);
        assert!(o.holds(0) && !o.holds(1) && o.holding());
        o.hold(0, 31, 7, ack(100));
        assert!(o.release().is_none(), "slice 0 still waits for credit");
        go.clear();
        o.credit(40, 0, 1, &mut go);
        assert_eq!(tags(&go), [3]);
        assert!(matches!(o.release(), Some((0, 7, _))));
        assert!(!o.holds(0) && !o.holding());
        let s = o.stats();
        assert_eq!((s.credit_waits, s.credit_wait_ps), (1, 40 - 30));
        assert_eq!((s.held_requests, s.peak_packets), (1, 2));
    }
}
