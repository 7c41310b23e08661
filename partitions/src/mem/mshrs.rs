//! The MSHRs of an L2 or LLC slice.

use std::collections::VecDeque;

use crate::Picos;

/// Outstanding misses of one L2 slice: the times their MSHRs free (known, since the
/// slice's DRAM channel is in the same unit).
#[derive(Clone, Debug)]
pub(crate) struct Mshrs {
    cap: usize,
    /// The release times, sorted (a multiset: [`Mshrs::acquire`] takes the earliest).
    /// Sorted rather than a binary heap: releases come nearly in time order, so most
    /// insertions are at the back and every removal is at the front, without the heap's
    /// sift-down and its unpredictable branches on every pop.
    busy_until: VecDeque<Picos>,
}

impl Mshrs {
    pub(crate) fn new(cap: u32) -> Mshrs {
        Mshrs {
            cap: (cap as usize).max(1),
            busy_until: VecDeque::new(),
        }
    }

    /// Starts loading the earliest release into the host's caches.
    pub(crate) fn prefetch(&self) {
        if let Some(r) = self.busy_until.front() {
            super::prefetch::prefetch(r);
        }
    }

    /// When a miss asked at `t` gets an MSHR (and whether it waited). Forced inline: once
    /// per L2 miss, from one place.
    #[inline(always)]
    pub(crate) fn acquire(&mut self, t: Picos) -> (Picos, bool) {
        while self.busy_until.front().is_some_and(|&r| r <= t) {
            self.busy_until.pop_front();
        }
        if self.busy_until.len() >= self.cap {
            if let Some(r) = self.busy_until.pop_front() {
                return (r.max(t), true);
            }
        }
        (t, false)
    }

    pub(crate) fn release(&mut self, at: Picos) {
        if self.busy_until.back().is_none_or(|&b| b <= at) {
            self.busy_until.push_back(at);
        } else {
            let i = self.busy_until.partition_point(|&r| r <= at);
            self.busy_until.insert(i, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Mshrs;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// The sorted releases answer as a min-heap of release times (the model they
    /// replaced): releases out of order, waits when all MSHRs are busy, and expiries.
    #[test]
    fn sorted_releases_act_as_a_min_heap() {
        let mut m = Mshrs::new(6);
        let mut heap: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
        let (mut x, mut t, mut out_of_order, mut waits) = (11u64, 0u64, 0, 0);
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            t += (x >> 60) % 3;
            let got = m.acquire(t);
            // The heap model, as `Mshrs` was written before.
            while heap.peek().is_some_and(|&Reverse(r)| r <= t) {
                heap.pop();
            }
            let want = match heap.len() >= 6 {
                true => heap.pop().map_or((t, false), |Reverse(r)| (r.max(t), true)),
                false => (t, false),
            };
            assert_eq!(got, want);
            waits += usize::from(got.1);
            let at = got.0 + 5 + (x >> 40) % 40;
            out_of_order += usize::from(m.busy_until.back().is_some_and(|&b| b > at));
            m.release(at);
            heap.push(Reverse(at));
        }
        assert!(
            out_of_order > 1000 && waits > 1000,
            "{out_of_order} {waits}"
        );
    }
}
