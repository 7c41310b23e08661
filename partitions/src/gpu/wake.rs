//! The wake-up queue of a partition's units: each unit is in it at most once, at its next
//! event time, and moving it is an update in place (no stale entries to skip).

use crate::Picos;

/// The key of an empty leaf: after every real `(time, unit)`.
const ABSENT: (Picos, u32) = (Picos::MAX, u32::MAX);

/// A tournament tree over the units: leaf `u` holds unit `u`'s `(time, unit id)` key
/// ([`ABSENT`] when not queued) and each inner node the least key below it, so the root is
/// the next unit to run. Moving a unit (either way) rewrites the nodes above its leaf,
/// stopping where a node keeps its value: no element moves and no position index, unlike
/// an indexed heap, whose sift of a unit that moves far later took ~200 instructions.
#[derive(Clone, Debug, Default)]
pub(super) struct WakeQueue {
    /// Node `i`'s children are `2i` and `2i + 1`; leaves from `leaves` on; node 0 unused.
    tree: Vec<(Picos, u32)>,
    leaves: usize,
}

impl WakeQueue {
    pub(super) fn new(units: usize) -> WakeQueue {
        let leaves = units.max(1).next_power_of_two();
        WakeQueue {
            tree: vec![ABSENT; 2 * leaves],
            leaves,
        }
    }

    /// Queues `unit` at `at`, or moves it earlier if it is queued later.
    #[inline]
    pub(super) fn schedule(&mut self, unit: u32, at: Picos) {
        let i = self.leaves + unit as usize;
        if (at, unit) < self.tree[i] {
            self.set(i, (at, unit));
        }
    }

    /// Moves `unit` to `at` (later or earlier), or out of the queue (`None`). Used for the
    /// unit just run, which stays queued while it runs.
    #[inline]
    pub(super) fn requeue(&mut self, unit: u32, at: Option<Picos>) {
        let i = self.leaves + unit as usize;
        let k = at.map_or(ABSENT, |at| (at, unit));
        if self.tree[i] != k {
            self.set(i, k);
        }
    }

    /// Sets leaf `i` to `k` and the nodes above it.
    #[inline]
    fn set(&mut self, mut i: usize, k: (Picos, u32)) {
        self.tree[i] = k;
        while i > 1 {
            let sib = self.tree[i ^ 1];
            let m = if sib < self.tree[i] {
                sib
            } else {
                self.tree[i]
            };
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
        (k.1 != ABSENT.1).then_some(k)
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
