//! The wake-up queue of a partition's units: each unit is in it at most once, at its next
//! event time, and moving it earlier is a decrease-key (no stale entries to skip).

use crate::Picos;

const NONE: u32 = u32::MAX;

/// An indexed binary min-heap of units keyed by `(time, unit id)`, the keys stored in the
/// heap itself (comparisons touch one array).
#[derive(Clone, Debug, Default)]
pub(super) struct WakeQueue {
    /// `(time, unit id)` in heap order.
    heap: Vec<(Picos, u32)>,
    /// By unit id: its index in `heap`, or `NONE`.
    pos: Vec<u32>,
}

impl WakeQueue {
    pub(super) fn new(units: usize) -> WakeQueue {
        WakeQueue {
            heap: Vec::with_capacity(units),
            pos: vec![NONE; units],
        }
    }

    /// Queues `unit` at `at`, or moves it earlier if it is queued later.
    #[inline]
    pub(super) fn schedule(&mut self, unit: u32, at: Picos) {
        let u = unit as usize;
        let i = match self.pos[u] {
            NONE => {
                self.heap.push((at, unit));
                self.heap.len() - 1
            }
            p if at < self.heap[p as usize].0 => {
                self.heap[p as usize].0 = at;
                p as usize
            }
            _ => return,
        };
        self.sift_up(i);
    }

    /// Moves queued `unit` to `at` (later or earlier), or out of the queue (`None`); an
    /// unqueued one is queued at `at`. Used for the unit just run, which stays queued while
    /// it runs: one sift instead of a pop and a push.
    #[inline]
    pub(super) fn requeue(&mut self, unit: u32, at: Option<Picos>) {
        let u = unit as usize;
        let p = self.pos[u];
        if p == NONE {
            if let Some(at) = at {
                self.schedule(unit, at);
            }
            return;
        }
        let i = p as usize;
        match at {
            Some(at) => {
                let old = self.heap[i].0;
                self.heap[i].0 = at;
                if at < old {
                    self.sift_up(i);
                } else {
                    self.sift_down(i);
                }
            }
            None => {
                self.pos[u] = NONE;
                let Some(last) = self.heap.pop() else {
                    return;
                };
                if i < self.heap.len() {
                    self.heap[i] = last;
                    self.sift_down(i);
                    let j = self.pos[last.1 as usize] as usize;
                    self.sift_up(j);
                }
            }
        }
    }

    /// The earliest `(time, unit)`.
    #[inline]
    pub(super) fn peek(&self) -> Option<(Picos, u32)> {
        self.heap.first().copied()
    }

    /// Removes the earliest unit (the partition uses [`WakeQueue::requeue`] instead).
    #[cfg(test)]
    pub(super) fn pop(&mut self) -> Option<(Picos, u32)> {
        let top = *self.heap.first()?;
        let last = self.heap.pop()?;
        self.pos[top.1 as usize] = NONE;
        if !self.heap.is_empty() {
            self.heap[0] = last;
            self.sift_down(0);
        }
        Some(top)
    }

    fn sift_up(&mut self, mut i: usize) {
        let x = self.heap[i];
        while i > 0 {
            let p = (i - 1) / 2;
            if x >= self.heap[p] {
                break;
            }
            self.heap[i] = self.heap[p];
            self.pos[self.heap[i].1 as usize] = i as u32;
            i = p;
        }
        self.heap[i] = x;
        self.pos[x.1 as usize] = i as u32;
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        let x = self.heap[i];
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.heap[r] < self.heap[l] {
                r
            } else {
                l
            };
            if self.heap[c] >= x {
                break;
            }
            self.heap[i] = self.heap[c];
            self.pos[self.heap[i].1 as usize] = i as u32;
            i = c;
        }
        self.heap[i] = x;
        self.pos[x.1 as usize] = i as u32;
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
