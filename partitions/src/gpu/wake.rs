//! The wake-up queue of a partition's units: each unit is in it at most once, at its next
//! event time, and moving it earlier is a decrease-key (no stale entries to skip).

use crate::Picos;

const NONE: u32 = u32::MAX;

/// An indexed binary min-heap of units keyed by `(time, unit id)`.
#[derive(Clone, Debug, Default)]
pub(super) struct WakeQueue {
    /// Unit ids in heap order.
    heap: Vec<u32>,
    /// By unit id: its index in `heap`, or `NONE`.
    pos: Vec<u32>,
    /// By unit id: its wake-up time while queued.
    at: Vec<Picos>,
}

impl WakeQueue {
    pub(super) fn new(units: usize) -> WakeQueue {
        WakeQueue {
            heap: Vec::with_capacity(units),
            pos: vec![NONE; units],
            at: vec![0; units],
        }
    }

    #[inline]
    fn less(&self, a: u32, b: u32) -> bool {
        (self.at[a as usize], a) < (self.at[b as usize], b)
    }

    /// Queues `unit` at `at`, or moves it earlier if it is queued later.
    pub(super) fn schedule(&mut self, unit: u32, at: Picos) {
        let u = unit as usize;
        if self.pos[u] == NONE {
            self.at[u] = at;
            self.pos[u] = self.heap.len() as u32;
            self.heap.push(unit);
        } else if at < self.at[u] {
            self.at[u] = at;
        } else {
            return;
        }
        self.sift_up(self.pos[u] as usize);
    }

    /// The earliest `(time, unit)`.
    pub(super) fn peek(&self) -> Option<(Picos, u32)> {
        self.heap.first().map(|&u| (self.at[u as usize], u))
    }

    /// Removes the earliest unit.
    pub(super) fn pop(&mut self) -> Option<(Picos, u32)> {
        let top = *self.heap.first()?;
        let last = self.heap.len() - 1;
        self.heap.swap(0, last);
        self.heap.pop();
        self.pos[top as usize] = NONE;
        if !self.heap.is_empty() {
            self.pos[self.heap[0] as usize] = 0;
            self.sift_down(0);
        }
        Some((self.at[top as usize], top))
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if !self.less(self.heap[i], self.heap[p]) {
                break;
            }
            self.swap(i, p);
            i = p;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.less(self.heap[l], self.heap[m]) {
                m = l;
            }
            if r < n && self.less(self.heap[r], self.heap[m]) {
                m = r;
            }
            if m == i {
                break;
            }
            self.swap(i, m);
            i = m;
        }
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        self.pos[self.heap[i] as usize] = i as u32;
        self.pos[self.heap[j] as usize] = j as u32;
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
