//! The index of an L1D's MSHRs by line (host speed: a lookup reads one half cache line,
//! not the MSHRs). It answers as a map from line to MSHR; nothing simulated depends on how.

use super::l1d::Mshr;

/// No MSHR: a free slot of an [`MshrIndex`] bucket, the end of a chain.
pub(super) const NO_MSHR: u32 = u32::MAX;

/// MSHR ids a bucket of [`MshrIndex`] holds in place; more go to its overflow chain.
const BUCKET_SLOTS: usize = 3;

/// A bucket of [`MshrIndex`]: half a host cache line. `ids[j]` ([`NO_MSHR`]: free) is the
/// MSHR of a line whose [`line_key`] is `keys[j]`; MSHRs beyond the slots are chained
/// from `more` through [`Mshr::next`].
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Bucket {
    ids: [u32; BUCKET_SLOTS],
    keys: [u32; BUCKET_SLOTS],
    more: u32,
}

impl Default for Bucket {
    fn default() -> Bucket {
        Bucket {
            ids: [NO_MSHR; BUCKET_SLOTS],
            keys: [0; BUCKET_SLOTS],
            more: NO_MSHR,
        }
    }
}

/// The 32-bit key of a line address kept in a bucket: equal keys are checked against the
/// MSHR's line (lines 4 GiB apart share a key).
#[inline(always)]
fn line_key(line: u64) -> u32 {
    line as u32
}

/// The MSHR of each line with a load in flight that fills the L1 (at most one per line):
/// hash buckets, each holding a few MSHR ids with their lines' keys in place, and chains
/// linked through [`Mshr::next`] for the rare overflow. A lookup reads one bucket, and an
/// MSHR only when a key matches: an MSHR is a cold host cache line, so chains through the
/// MSHRs alone, or a table of lines probed at random, cost a cache miss per lookup. The
/// buckets take 32 bytes per two MSHRs (8 KB per SM of 512).
#[derive(Clone, Debug)]
pub(super) struct MshrIndex {
    buckets: Vec<Bucket>,
    /// Bits of a bucket number.
    bits: u32,
}

impl MshrIndex {
    /// Buckets for `mshrs` MSHRs: about two per bucket when all are in flight.
    pub(super) fn new(mshrs: u32) -> MshrIndex {
        let n = ((mshrs as usize).div_ceil(2))
            .clamp(16, 1024)
            .next_power_of_two();
        MshrIndex {
            buckets: vec![Bucket::default(); n],
            bits: n.trailing_zeros(),
        }
    }

    #[inline]
    fn bucket(&self, line: u64) -> usize {
        // Fibonacci hashing: line addresses differ in their middle bits, which the multiply
        // spreads into the top bits.
        (line.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    #[inline]
    pub(super) fn get(&self, line: u64, mshrs: &[Mshr]) -> Option<u32> {
        let b = &self.buckets[self.bucket(line)];
        let k = line_key(line);
        for j in 0..BUCKET_SLOTS {
            if b.keys[j] == k {
                if let Some(x) = mshrs.get(b.ids[j] as usize) {
                    if x.line == line {
                        return Some(b.ids[j]);
                    }
                }
            }
        }
        let mut m = b.more;
        while let Some(x) = mshrs.get(m as usize) {
            if x.line == line {
                return Some(m);
            }
            m = x.next;
        }
        None
    }

    /// Starts loading `line`'s bucket into the host's caches.
    #[inline]
    pub(super) fn prefetch(&self, line: u64) {
        if let Some(b) = self.buckets.get(self.bucket(line)) {
            super::prefetch::prefetch(b);
        }
    }

    /// Indexes MSHR `m`, of `line` (which has none indexed).
    #[inline]
    pub(super) fn insert(&mut self, line: u64, m: u32, mshrs: &mut [Mshr]) {
        let i = self.bucket(line);
        let b = &mut self.buckets[i];
        if let Some(j) = b.ids.iter().position(|&x| x == NO_MSHR) {
            b.ids[j] = m;
            b.keys[j] = line_key(line);
            return;
        }
        mshrs[m as usize].next = b.more;
        b.more = m;
    }

    /// Unindexes MSHR `m`, of `line`, if indexed.
    #[inline]
    pub(super) fn remove(&mut self, line: u64, m: u32, mshrs: &mut [Mshr]) {
        let i = self.bucket(line);
        let b = &mut self.buckets[i];
        if let Some(j) = b.ids.iter().position(|&x| x == m) {
            b.ids[j] = NO_MSHR;
            return;
        }
        let next = mshrs[m as usize].next;
        if b.more == m {
            b.more = next;
            return;
        }
        let mut p = b.more;
        while let Some(x) = mshrs.get(p as usize) {
            if x.next == m {
                mshrs[p as usize].next = next;
                return;
            }
            p = x.next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::l1d::Mshr;
    use std::collections::HashMap;

    /// The MSHR index answers as a map from line to MSHR under random inserts and removals,
    /// with few buckets so that buckets overflow, chains are long and removals hit their
    /// middles, and with lines 4 GiB apart, whose keys are equal.
    #[test]
    fn mshr_index_is_a_map_from_line_to_mshr() {
        let mut idx = MshrIndex::new(1);
        assert_eq!(idx.buckets.len(), 16);
        let mut mshrs: Vec<Mshr> = (0..64).map(|_| Mshr::default()).collect();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut free: Vec<u32> = (0..64).rev().collect();
        let mut x = 7u64;
        let (mut overflowed, mut shared_key) = (false, false);
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let line = ((x >> 33) % 100) * 128 + (((x >> 20) % 8) << 32);
            let live = model.get(&line).copied();
            overflowed |= idx.buckets.iter().any(|b| b.more != NO_MSHR);
            let here: Vec<u64> = model
                .keys()
                .copied()
                .filter(|&l| idx.bucket(l) == idx.bucket(line) && l != line)
                .collect();
            shared_key |= live.is_some() && here.iter().any(|&l| line_key(l) == line_key(line));
            assert_eq!(idx.get(line, &mshrs), live, "line {line:#x}");
            match live {
                Some(m) if !x.is_multiple_of(3) => {
                    idx.remove(line, m, &mut mshrs);
                    model.remove(&line);
                    free.push(m);
                }
                None => {
                    if let Some(m) = free.pop() {
                        mshrs[m as usize].line = line;
                        idx.insert(line, m, &mut mshrs);
                        model.insert(line, m);
                    }
                }
                Some(_) => {}
            }
        }
        for (&line, &m) in &model {
            assert_eq!(idx.get(line, &mshrs), Some(m));
        }
        // The paths the test means to cover were taken.
        assert!(overflowed, "no bucket overflowed into a chain");
        assert!(shared_key, "no two live lines of one bucket shared a key");
        assert_eq!(std::mem::size_of::<Bucket>(), 32);
    }
}
