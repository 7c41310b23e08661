//! 8-bit hashes of a cache's tags (host speed): a set's lookup compares the hash of the
//! tag it looks for with eight ways' hashes at a time and reads only the tags whose hash
//! matches, so a 56-way set costs seven word compares, not 56 tag reads. They answer as a
//! scan of the tags does; nothing simulated depends on them.

/// Ways per word of [`TagHashes`] (8 bits each).
const HASH_LANES: usize = 8;
/// Bit 0 and bit 7 of every lane.
const LANE_LOW: u64 = 0x0101_0101_0101_0101;
const LANE_HIGH: u64 = 0x8080_8080_8080_8080;

/// The 8-bit hash of a tag: the lines of one set share their low bits, so the top bits of
/// a multiplicative hash.
#[inline(always)]
fn tag_hash(tag: u64) -> u64 {
    tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56
}

/// By set, [`HASH_LANES`] ways to a word: an 8-bit hash of each way's tag. A set's tags
/// can span several host cache lines (24 ways: three), which a lookup that misses would
/// otherwise read whole; a tag index (a hash table as large as the tags, probed at random
/// and updated on every eviction) costs a cold probe per lookup.
#[derive(Clone, Debug)]
pub(crate) struct TagHashes {
    words: Vec<u64>,
    /// Words per set.
    per_set: usize,
}

impl TagHashes {
    /// Hashes for `sets` sets of `assoc` ways.
    pub(crate) fn new(sets: usize, assoc: usize) -> TagHashes {
        let per_set = assoc.div_ceil(HASH_LANES);
        TagHashes {
            words: vec![0; sets * per_set],
            per_set,
        }
    }

    /// The first of ways `0..n` of set `s` for which `is_tag` (is its tag `tag`?) holds,
    /// asked only of the ways whose hash is `tag`'s.
    #[inline(always)]
    pub(crate) fn find(
        &self,
        s: usize,
        n: usize,
        tag: u64,
        is_tag: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        // A lane equal to the tag's hash is found by the zero-lane test on `word ^ pattern`
        // (exact for the lowest such lane; a lane above one may be flagged falsely, and
        // every flagged lane is checked against the tag), so the first way holding `tag`
        // is found, as a scan of the tags finds it.
        let hw = s * self.per_set;
        let words = &self.words[hw..hw + n.div_ceil(HASH_LANES)];
        let pattern = tag_hash(tag) * LANE_LOW;
        for (g, &word) in words.iter().enumerate() {
            let x = word ^ pattern;
            let mut flagged = x.wrapping_sub(LANE_LOW) & !x & LANE_HIGH;
            while flagged != 0 {
                let j = g * HASH_LANES + flagged.trailing_zeros() as usize / 8;
                if j >= n {
                    break;
                }
                if is_tag(j) {
                    return Some(j);
                }
                flagged &= flagged - 1;
            }
        }
        None
    }

    /// Way `j` of set `s` now holds `tag`.
    #[inline(always)]
    pub(crate) fn set(&mut self, s: usize, j: usize, tag: u64) {
        let word = &mut self.words[s * self.per_set + j / HASH_LANES];
        let shift = 8 * (j % HASH_LANES);
        *word = (*word & !(0xFF << shift)) | tag_hash(tag) << shift;
    }

    /// Starts loading set `s`'s hashes into the host's caches.
    #[inline]
    pub(crate) fn prefetch(&self, s: usize) {
        if let Some(h) = self.words.get(s * self.per_set) {
            super::prefetch::prefetch(h);
        }
    }
}
