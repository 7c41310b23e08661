//! The wake-up queue of a partition's units: each unit is in it at most once, at its next
//! event time, and moving it is an update in place (no stale entries to skip).

use crate::Picos;

/// The key of an empty leaf: after every real key.
const ABSENT: u64 = u64::MAX;

/// A tournament tree over the units: leaf `u` holds unit `u`'s key, `time << bits | u`
/// (time, then unit id, in one integer: one comparison per level; [`ABSENT`] when not
/// queued), and each inner node the least key below it, so the root is the next unit to
/// run. Moving a unit (either way) rewrites the nodes above its leaf, stopping where a node
/// keeps its value: no element moves and no position index, unlike an indexed heap, whose
/// sift of a unit that moves far later took ~200 instructions.
///
/// Times must fit in `64 - bits` bits (2^53 ps, two and a half simulated hours, with a
/// thousand units); a later one is clamped and flagged ([`WakeQueue::overflowed`]), and
/// the partition stops with an error rather than run events out of order.
#[derive(Clone, Debug, Default)]
pub(super) struct WakeQueue {
    /// Node `i`'s children are `2i` and `2i + 1`; leaves from `leaves` on; node 0 unused.
    tree: Vec<u64>,
    leaves: usize,
    /// Bits of the unit id in a key (unit ids are below `2^bits - 1`, so no key is
    /// [`ABSENT`]).
    bits: u32,
    /// The latest time a key can hold.
    max_time: Picos,
    overflow: bool,
}

impl WakeQueue {
    pub(super) fn new(units: usize) -> WakeQueue {
        let leaves = units.max(1).next_power_of_two();
        let bits = (units as u64 + 1)
            .next_power_of_two()
            .trailing_zeros()
            .max(1);
        WakeQueue {
            tree: vec![ABSENT; 2 * leaves],
            leaves,
            bits,
            max_time: (u64::MAX >> bits) - 1,
            overflow: false,
        }
    }

    #[inline]
    fn key(&mut self, unit: u32, at: Picos) -> u64 {
        if at > self.max_time {
            self.overflow = true;
        }
        at.min(self.max_time) << self.bits | unit as u64
    }

    /// Whether a unit was queued at a time beyond what a key holds (the order of events
    /// is then no longer exact).
    pub(super) fn overflowed(&self) -> Option<Picos> {
        self.overflow.then_some(self.max_time)
    }

    /// Queues `unit` at `at`, or moves it earlier if it is queued later.
    #[inline]
    pub(super) fn schedule(&mut self, unit: u32, at: Picos) {
        let i = self.leaves + unit as usize;
        let k = self.key(unit, at);
        if k < self.tree[i] {
            self.set(i, k);
        }
    }

    /// Moves `unit` to `at` (later or earlier), or out of the queue (`None`). Used for the
    /// unit just run, which stays queued while it runs.
    #[inline]
    pub(super) fn requeue(&mut self, unit: u32, at: Option<Picos>) {
        let i = self.leaves + unit as usize;
        let k = match at {
            Some(at) => self.key(unit, at),
            None => ABSENT,
        };
        if self.tree[i] != k {
            self.set(i, k);
        }
    }

    /// Sets leaf `i` to `k` and the nodes above it.
    #[inline]
    fn set(&mut self, mut i: usize, k: u64) {
        self.tree[i] = k;
        while i > 1 {
            let m = self.tree[i].min(self.tree[i ^ 1]);
            i >>= 1;
            if self.tree[i] == m {
                break;
            }
            self.tree[i] = m;
        }
    }

    /// The earliest `(time, unit)`.
    #[inline]
    pub(super) fn peek(&self) -> Option<(Picos, u32)> {
        let k = self.tree[1];
        (k != ABSENT).then(|| (k >> self.bits, (k & ((1 << self.bits) - 1)) as u32))
    }

    /// Removes the earliest unit (the partition uses [`WakeQueue::requeue`] instead).
    #[cfg(test)]
    pub(super) fn pop(&mut self) -> Option<(Picos, u32)> {
        let top = self.peek()?;
        self.requeue(top.1, None);
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_unit_order_with_decrease_key() {
        let mut q = WakeQueue::new(8);
        for (u, t) in [(3, 50), (1, 20), (5, 20), (2, 90), (7, 10)] {
            q.schedule(u, t);
        }
        q.schedule(2, 5); // earlier: moves
        q.schedule(1, 70); // later: ignored
        let mut out = Vec::new();
        while let Some(x) = q.pop() {
            out.push(x);
        }
        assert_eq!(out, [(5, 2), (10, 7), (20, 1), (20, 5), (50, 3)]);
        // `requeue` moves a unit either way or drops it, wherever it is in the heap.
        let mut q = WakeQueue::new(8);
        for (u, t) in [(3, 50), (1, 20), (5, 30), (2, 90), (7, 10), (4, 60)] {
            q.schedule(u, t);
        }
        q.requeue(7, Some(70)); // the head, later
        q.requeue(2, Some(15)); // a leaf, earlier
        q.requeue(5, None); // dropped
        q.requeue(6, Some(40)); // not queued: queued
        q.requeue(0, None); // not queued: nothing
        let mut out = Vec::new();
        while let Some(x) = q.pop() {
            out.push(x);
        }
        assert_eq!(out, [(15, 2), (20, 1), (40, 6), (50, 3), (60, 4), (70, 7)]);
        assert!(q.overflowed().is_none());
        // Unit ids fill their bits exactly (7 units: 3 bits); the latest time that fits
        // still orders by unit; one past it is flagged.
        let mut q7 = WakeQueue::new(7);
        let max = q7.overflowed().map_or((u64::MAX >> 3) - 1, |t| t);
        q7.schedule(6, max);
        q7.schedule(5, max);
        assert_eq!(q7.pop(), Some((max, 5)));
        assert_eq!(q7.pop(), Some((max, 6)));
        assert!(q7.overflowed().is_none());
        q7.schedule(0, max + 1);
        assert_eq!(q7.overflowed(), Some(max));
        assert!(q.peek().is_none());
        // A pseudo-random stream against a sorted reference.
        let mut q = WakeQueue::new(64);
        let mut want = vec![None; 64];
        let mut x = 7u64;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 33) as u32 % 64;
            let t = (x >> 13) % 1000;
            q.schedule(u, t);
            let w: &mut Option<u64> = &mut want[u as usize];
            *w = Some(w.map_or(t, |v| v.min(t)));
            if x.is_multiple_of(3) {
                let best = want
                    .iter()
                    .enumerate()
                    .filter_map(|(u, t)| t.map(|t| (t, u as u32)))
                    .min();
                assert_eq!(q.pop(), best);
                if let Some((_, u)) = best {
                    want[u as usize] = None;
                }
            }
        }
    }
}
