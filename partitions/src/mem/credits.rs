//! Credit-based flow control for one direction of a link (DESIGN.md section 5; issue 22
//! item 3): the sender's view of its receiver's input buffers, one per virtual channel.
//!
//! The receiver has a buffer of `buffer` bytes per virtual channel; the sender holds that
//! many bytes of credit per channel, spends a packet's wire bytes when it hands the packet
//! to the link, and gets them back when a credit message from the receiver arrives (the
//! receiver sends one when the packet leaves its buffer). A packet without enough credit
//! waits, with the packets of its channel behind it, in this sender's queue for its
//! channel; packets of other channels pass it (each channel has its own credits, so no
//! class or distance blocks another). Credits come back only as timed messages, so a cut
//! between the two ends stays free.
//!
//! The queue itself (`Waiting`) is the sender's; what a waiting packet needs to be sent later
//! is the caller's type `P`.

use std::collections::VecDeque;

use crate::counters::unit_counters;
use crate::Picos;

unit_counters! {
    /// What credits did to one direction of a link.
    pub struct CreditStats {
        /// Packets that found too little credit for their virtual channel (or packets of
        /// it already waiting) and waited in the sender.
        credit_waits,
        /// Picoseconds those packets waited, summed.
        credit_wait_ps,
        /// The longest such wait.
        max_credit_wait_ps,
        /// The most bytes of any one virtual channel's receive buffer in use at once (sent
        /// and not yet credited back): never more than the buffer.
        peak_buffer_bytes,
    }
}

/// A packet waiting for credit: when it started to wait, its wire bytes, and what the
/// caller needs to send it.
#[derive(Debug)]
struct Waiting<P> {
    since: Picos,
    bytes: u64,
    pkt: P,
}

/// One virtual channel: its credit and its queue.
#[derive(Debug)]
struct Vc<P> {
    credit: u64,
    queue: VecDeque<Waiting<P>>,
}

/// The sender's credits for the receive buffers of one link direction, one buffer of
/// `buffer` bytes per virtual channel (channels numbered from 0, made as first used).
#[derive(Debug)]
pub(crate) struct Credits<P> {
    buffer: u64,
    vcs: Vec<Vc<P>>,
    stats: CreditStats,
}

impl<P> Credits<P> {
    /// Credits for buffers of `buffer` bytes per virtual channel.
    pub(crate) fn new(buffer: u64) -> Credits<P> {
        Credits {
            buffer,
            vcs: Vec::new(),
            stats: CreditStats::default(),
        }
    }

    pub(crate) fn stats(&self) -> &CreditStats {
        &self.stats
    }

    fn vc(&mut self, vc: u32) -> &mut Vc<P> {
        let i = vc as usize;
        if i >= self.vcs.len() {
            let buffer = self.buffer;
            self.vcs.resize_with(i + 1, || Vc {
                credit: buffer,
                queue: VecDeque::new(),
            });
        }
        &mut self.vcs[i]
    }

    /// Spends `bytes` of channel `vc`'s credit, recording the buffer's occupancy.
    fn spend(&mut self, vc: u32, bytes: u64) {
        let buffer = self.buffer;
        let v = self.vc(vc);
        v.credit -= bytes;
        let used = buffer - v.credit;
        let s = &mut self.stats;
        s.peak_buffer_bytes = s.peak_buffer_bytes.max(used);
    }

    /// A packet of `bytes` wire bytes on channel `vc` at `now`: `Some(pkt)` when it may go
    /// now (its credit spent), `None` when it waits (behind the channel's waiting packets,
    /// or for credit) until [`Credits::credit`] lets it go.
    pub(crate) fn offer(&mut self, now: Picos, vc: u32, bytes: u64, pkt: P) -> Option<P> {
        let v = self.vc(vc);
        if v.queue.is_empty() && v.credit >= bytes {
            self.spend(vc, bytes);
            return Some(pkt);
        }
        v.queue.push_back(Waiting {
            since: now,
            bytes,
            pkt,
        });
        self.stats.credit_waits += 1;
        None
    }

    /// `bytes` of credit for channel `vc` come back at `now`; pushes to `go`, in order, the
    /// waiting packets of the channel that may go now (their credit spent).
    pub(crate) fn credit(&mut self, now: Picos, vc: u32, bytes: u64, go: &mut Vec<P>) {
        let buffer = self.buffer;
        self.vc(vc);
        let Credits { vcs, stats, .. } = self;
        let v = &mut vcs[vc as usize];
        v.credit = (v.credit + bytes).min(buffer);
        while v.queue.front().is_some_and(|w| w.bytes <= v.credit) {
            let Some(w) = v.queue.pop_front() else {
                break;
            };
            v.credit -= w.bytes;
            let used = buffer - v.credit;
            let waited = now.saturating_sub(w.since);
            let s = &mut *stats;
            s.peak_buffer_bytes = s.peak_buffer_bytes.max(used);
            s.credit_wait_ps += waited;
            s.max_credit_wait_ps = s.max_credit_wait_ps.max(waited);
            go.push(w.pkt);
        }
    }

    /// Packets waiting for credit on channel `vc`.
    pub(crate) fn waiting_on(&self, vc: u32) -> usize {
        self.vcs.get(vc as usize).map_or(0, |v| v.queue.len())
    }

    /// Packets waiting for credit, over every channel.
    pub(crate) fn waiting(&self) -> usize {
        self.vcs.iter().map(|v| v.queue.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_wait_in_order_for_their_own_channel_only() {
        let mut c = Credits::new(100);
        assert_eq!(c.offer(0, 0, 60, 'a'), Some('a'));
        // 40 left on channel 0: 'b' waits, and 'c' behind it though it would fit.
        assert_eq!(c.offer(1, 0, 50, 'b'), None);
        assert_eq!(c.offer(2, 0, 10, 'c'), None);
        // Channel 1 has its own buffer.
        assert_eq!(c.offer(3, 1, 100, 'd'), Some('d'));
        assert_eq!(c.waiting(), 2);
        let mut go = Vec::new();
        c.credit(10, 0, 20, &mut go);
        // 60 of credit: 'b' (50) goes, 'c' (10) too.
        assert_eq!(go, vec!['b', 'c']);
        let s = *c.stats();
        assert_eq!(s.credit_waits, 2);
        assert_eq!(s.credit_wait_ps, 9 + 8);
        assert_eq!(s.max_credit_wait_ps, 9);
        assert_eq!(s.peak_buffer_bytes, 100);
        assert_eq!(c.waiting(), 0);
    }

    #[test]
    fn occupancy_never_exceeds_the_buffer() {
        let mut c = Credits::new(64);
        let mut inflight: VecDeque<u64> = VecDeque::new();
        let mut go = Vec::new();
        let mut x = 7u64;
        for t in 0..10_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let bytes = 8 + (x >> 40) % 57;
            if let Some(b) = c.offer(t, 0, bytes, bytes) {
                inflight.push_back(b);
            }
            if x >> 62 == 0 {
                if let Some(b) = inflight.pop_front() {
                    go.clear();
                    c.credit(t, 0, b, &mut go);
                    inflight.extend(go.iter().copied());
                }
            }
            assert!(inflight.iter().sum::<u64>() <= 64);
        }
        assert!(c.stats().peak_buffer_bytes <= 64);
        assert!(c.stats().credit_waits > 0);
    }
}
