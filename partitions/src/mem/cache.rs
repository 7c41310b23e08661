//! A sectored, set-associative cache with true LRU (used for the L1Ds and the L2 slices).
//! LRU order is a doubly linked list per set and ways fill in index order, so finding a
//! victim costs the same for 4 ways or 56 (Accel-Sim's A100 and RTX 3070 L1s). A lookup
//! reads only the tags whose 8-bit hash matches ([`super::tag_hash`]).
//!
//! Each line holds a tag (its full line address), a valid and a dirty mask of sectors, and
//! per sector the time its data is (or will be) there: a sector allocated for a miss is valid
//! at once with the fill's time, so a later access to it merges with the fill in flight (an
//! MSHR merge) instead of sending a second request.

use super::tag_hash::TagHashes;
use crate::Picos;

const INVALID: u64 = u64::MAX;

/// The `ready` time of a sector whose fill is in flight and whose arrival is not known yet.
pub(crate) const PENDING: Picos = Picos::MAX;

/// A line evicted with dirty sectors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Evicted {
    pub line_addr: u64,
    pub dirty: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct SectorCache {
    sets: u64,
    /// `sets - 1` when `sets` is a power of two (a mask instead of a division).
    set_mask: Option<u64>,
    assoc: usize,
    spl: usize,
    /// By way: the line it holds (searched a set at a time, so kept apart).
    tags: Vec<u64>,
    /// By set: the hashes of its ways' tags, read before any tag.
    hashes: TagHashes,
    /// By way: everything else an access touches, together (one cache line, not five).
    meta: Vec<WayMeta>,
    ready: Vec<Picos>,
    /// By set: most and least recently used way (`NIL` when the set is empty).
    mru: Vec<u32>,
    lru: Vec<u32>,
    /// By set: ways in use; they are the first ways of the set (only `invalidate_all`
    /// frees ways, and it frees all).
    filled: Vec<u32>,
}

const NIL: u32 = u32::MAX;

/// A way's sector masks and its place in its set's LRU list.
#[derive(Clone, Copy, Debug)]
struct WayMeta {
    valid: u64,
    dirty: u64,
    /// The next more recently and the next less recently used way of its set.
    newer: u32,
    older: u32,
}

const EMPTY: WayMeta = WayMeta {
    valid: 0,
    dirty: 0,
    newer: NIL,
    older: NIL,
};

impl SectorCache {
    /// `sets` sets of `assoc` ways, `spl` sectors per line.
    pub(crate) fn new(sets: u64, assoc: u32, spl: u32) -> SectorCache {
        let sets = sets.max(1);
        let assoc = (assoc as usize).max(1);
        let spl = (spl as usize).clamp(1, 64);
        let n = sets as usize * assoc;
        SectorCache {
            sets,
            set_mask: sets.is_power_of_two().then_some(sets - 1),
            assoc,
            spl,
            tags: vec![INVALID; n],
            hashes: TagHashes::new(sets as usize, assoc),
            meta: vec![EMPTY; n],
            ready: vec![0; n * spl],
            mru: vec![NIL; sets as usize],
            lru: vec![NIL; sets as usize],
            filled: vec![0; sets as usize],
        }
    }

    /// Sectors `0..spl` as a mask (per-sector state exists only for those).
    #[inline]
    fn spl_mask(&self) -> u64 {
        if self.spl >= 64 {
            u64::MAX
        } else {
            (1 << self.spl) - 1
        }
    }

    /// `set % sets`.
    #[inline]
    fn set_of(&self, set: u64) -> usize {
        match self.set_mask {
            Some(m) => (set & m) as usize,
            None => (set % self.sets) as usize,
        }
    }

    /// The way holding `tag` in set `set % sets`. Forced inline, as is `allocate`: it runs
    /// a few times per simulated line, and the call costs more than its common case.
    #[inline(always)]
    pub(crate) fn find(&self, set: u64, tag: u64) -> Option<usize> {
        let s = self.set_of(set);
        let base = s * self.assoc;
        if tag == INVALID {
            // Empty ways hold `INVALID` too: every way, by their tags.
            let ways = &self.tags[base..base + self.assoc];
            return ways.iter().position(|&t| t == tag).map(|j| base + j);
        }
        // Only the ways in use can hold a line.
        let n = self.filled[s] as usize;
        self.hashes
            .find(s, n, tag, |j| self.tags[base + j] == tag)
            .map(|j| base + j)
    }

    /// Starts loading, into the host's caches, what an access of `tag` in set `set % sets`
    /// reads first: the set's tag hashes and its least recently used way, which a miss
    /// evicts (results are unchanged).
    #[inline]
    pub(crate) fn prefetch(&self, set: u64) {
        let s = self.set_of(set);
        self.hashes.prefetch(s);
        if let Some(&v) = self.lru.get(s) {
            let v = v as usize;
            if let (Some(m), Some(t)) = (self.meta.get(v), self.tags.get(v)) {
                super::prefetch::prefetch(m);
                super::prefetch::prefetch(t);
            }
            if let Some(r) = self.ready.get(v * self.spl) {
                super::prefetch::prefetch(r);
            }
        }
    }

    /// Marks way `i` of set `set % sets` (where [`SectorCache::find`] found it) most
    /// recently used. The caller names the set: `i / assoc` would be a division on every
    /// hit.
    pub(crate) fn touch(&mut self, set: u64, i: usize) {
        let s = self.set_of(set);
        debug_assert_eq!(s, i / self.assoc, "way {i} is not in set {set}");
        if self.mru[s] == i as u32 {
            return;
        }
        self.unlink(s, i);
        self.push_mru(s, i);
    }

    /// Always inlined (as is [`SectorCache::push_mru`]): a few loads and stores, on every
    /// touch and eviction, cheaper than the call.
    #[inline(always)]
    fn unlink(&mut self, set: usize, i: usize) {
        let (n, o) = (self.meta[i].newer, self.meta[i].older);
        match n {
            NIL => self.mru[set] = o,
            n => self.meta[n as usize].older = o,
        }
        match o {
            NIL => self.lru[set] = n,
            o => self.meta[o as usize].newer = n,
        }
    }

    #[inline(always)]
    fn push_mru(&mut self, set: usize, i: usize) {
        let head = self.mru[set];
        self.meta[i].newer = NIL;
        self.meta[i].older = head;
        match head {
            NIL => self.lru[set] = i as u32,
            h => self.meta[h as usize].newer = i as u32,
        }
        self.mru[set] = i as u32;
    }

    /// Allocates `tag` in set `set % sets` (an invalid way, else the least recently used),
    /// most recently used, with no valid sector. Returns the way and the victim if it had
    /// dirty sectors.
    #[inline(always)]
    pub(crate) fn allocate(&mut self, set: u64, tag: u64) -> (usize, Option<Evicted>) {
        let s = self.set_of(set);
        let filled = self.filled[s] as usize;
        // The first invalid way if there is one, else the least recently used.
        let victim = if filled < self.assoc {
            self.filled[s] += 1;
            s * self.assoc + filled
        } else {
            let v = self.lru[s] as usize;
            self.unlink(s, v);
            v
        };
        self.push_mru(s, victim);
        // The victim's tag and state, each looked up once (one bounds check each).
        let old = std::mem::replace(&mut self.tags[victim], tag);
        let m = &mut self.meta[victim];
        let dirty = m.dirty & m.valid;
        m.valid = 0;
        m.dirty = 0;
        let ev = (old != INVALID && dirty != 0).then_some(Evicted {
            line_addr: old,
            dirty,
        });
        let j = victim - s * self.assoc;
        self.hashes.set(s, j, tag);
        (victim, ev)
    }

    /// Finds or allocates `tag`.
    #[inline(always)]
    pub(crate) fn find_or_allocate(&mut self, set: u64, tag: u64) -> (usize, Option<Evicted>) {
        let way = self.find(set, tag);
        self.touch_or_allocate(set, tag, way)
    }

    /// [`Self::find_or_allocate`] when `way = find(set, tag)` is known already.
    #[inline]
    pub(crate) fn touch_or_allocate(
        &mut self,
        set: u64,
        tag: u64,
        way: Option<usize>,
    ) -> (usize, Option<Evicted>) {
        match way {
            Some(i) => {
                self.touch(set, i);
                (i, None)
            }
            None => self.allocate(set, tag),
        }
    }

    /// The line address way `i` holds (`u64::MAX` when invalid).
    pub(crate) fn tag(&self, i: usize) -> u64 {
        self.tags[i]
    }

    pub(crate) fn valid(&self, i: usize) -> u64 {
        self.meta[i].valid
    }

    /// The dirty valid sectors of way `i`, and the number of ways (`sets * assoc`): a
    /// kernel-boundary flush walks every way (a private L2's write-back).
    pub(crate) fn dirty(&self, i: usize) -> u64 {
        self.meta[i].dirty & self.meta[i].valid
    }

    pub(crate) fn ways(&self) -> usize {
        self.tags.len()
    }

    pub(crate) fn ready(&self, i: usize, s: u32) -> Picos {
        self.ready[i * self.spl + (s as usize).min(self.spl - 1)]
    }

    /// Makes the sectors of `mask` valid with data at `ready`.
    pub(crate) fn fill(&mut self, i: usize, mask: u64, ready: Picos) {
        // Only the set sectors (a few of up to 64).
        let mut m = mask & self.spl_mask();
        let r = &mut self.ready[i * self.spl..(i + 1) * self.spl];
        while m != 0 {
            if let Some(x) = r.get_mut(m.trailing_zeros() as usize) {
                *x = ready;
            }
            m &= m - 1;
        }
        self.meta[i].valid |= mask;
    }

    /// The valid sectors of way `i` whose data is not there yet (`ready` is
    /// [`PENDING`]: a fill in flight whose time is not known).
    pub(crate) fn pending_mask(&self, i: usize) -> u64 {
        let r = &self.ready[i * self.spl..(i + 1) * self.spl];
        let mut v = self.meta[i].valid & self.spl_mask();
        let mut m = 0;
        while v != 0 {
            let s = v.trailing_zeros();
            if r.get(s as usize) == Some(&PENDING) {
                m |= 1 << s;
            }
            v &= v - 1;
        }
        m
    }

    /// Writes the sectors of `mask` at `t`: those not valid become valid with data at `t`
    /// (those valid keep their time), and all become dirty.
    #[inline(always)]
    pub(crate) fn write(&mut self, i: usize, mask: u64, t: Picos) {
        let new = mask & !self.valid(i);
        self.fill(i, new, t);
        self.mark_dirty(i, mask);
    }

    pub(crate) fn mark_dirty(&mut self, i: usize, mask: u64) {
        self.meta[i].dirty |= mask & self.meta[i].valid;
    }

    /// Drops the sectors of `mask` (their dirty bits too).
    pub(crate) fn invalidate_sectors(&mut self, i: usize, mask: u64) {
        self.meta[i].valid &= !mask;
        self.meta[i].dirty &= !mask;
    }

    /// Invalidates every line; returns those with dirty sectors.
    pub(crate) fn invalidate_all(&mut self) -> Vec<Evicted> {
        let mut out = Vec::new();
        for i in 0..self.tags.len() {
            if self.tags[i] != INVALID && self.meta[i].dirty & self.meta[i].valid != 0 {
                out.push(Evicted {
                    line_addr: self.tags[i],
                    dirty: self.meta[i].dirty & self.meta[i].valid,
                });
            }
            self.tags[i] = INVALID;
            self.meta[i].valid = 0;
            self.meta[i].dirty = 0;
            self.meta[i].newer = NIL;
            self.meta[i].older = NIL;
        }
        self.mru.fill(NIL);
        self.lru.fill(NIL);
        self.filled.fill(0);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The way a plain scan of the set's tags finds first: the ways in use, or every way
    /// for the empty-way tag.
    fn scan(c: &SectorCache, set: u64, tag: u64) -> Option<usize> {
        let s = c.set_of(set);
        let base = s * c.assoc;
        let n = if tag == INVALID {
            c.assoc
        } else {
            c.filled[s] as usize
        };
        c.tags[base..base + n]
            .iter()
            .position(|&t| t == tag)
            .map(|j| base + j)
    }

    /// The hashed lookup answers every lookup exactly as the scan of the tags does, through
    /// allocations, evictions, invalidations of sectors and of everything, with lines that
    /// collide in sets and in their 8-bit hashes (three times as many lines as ways), set
    /// widths that are and are not multiples of the eight ways of a hash word, and a tag
    /// allocated twice in one set (the scan finds the first).
    #[test]
    fn hashed_lookup_agrees_with_the_scan() {
        for (sets, assoc) in [
            (4u64, 56u32),
            (1, 32),
            (8, 40),
            (3, 33),
            (2, 24),
            (5, 7),
            (1, 1),
        ] {
            let mut c = SectorCache::new(sets, assoc, 4);
            let mut x = 11u64;
            for step in 0..40_000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let line = ((x >> 33) % (sets * assoc as u64 * 3)) * 128;
                let set = line / 128;
                match (x >> 20) % 16 {
                    0..=10 => {
                        let want = scan(&c, set, line);
                        assert_eq!(c.find(set, line), want, "step {step}");
                        let (i, _) = c.find_or_allocate(set, line);
                        if let Some(w) = want {
                            assert_eq!(i, w);
                        }
                        assert_eq!(c.tag(i), line);
                        c.fill(i, (x >> 40) & 0xf, step);
                    }
                    11..=13 => assert_eq!(c.find(set, line), scan(&c, set, line)),
                    14 => {
                        if let Some(i) = c.find(set, line) {
                            c.invalidate_sectors(i, 0b11);
                        }
                        // A lookup in the wrong set, and of the empty-way tag.
                        assert_eq!(c.find(set + 1, line), scan(&c, set + 1, line));
                        assert_eq!(c.find(set, INVALID), scan(&c, set, INVALID));
                    }
                    _ => {
                        if step % 7 == 0 {
                            c.invalidate_all();
                            assert_eq!(c.find(set, line), None);
                        }
                    }
                }
            }
            for line in 0..sets * assoc as u64 * 3 {
                assert_eq!(c.find(line, line * 128), scan(&c, line, line * 128));
            }
            // The same tag allocated twice in a set: both lookups find the lower way.
            let (i, _) = c.allocate(0, 1 << 40);
            let (j, _) = c.allocate(0, 1 << 40);
            assert_eq!(c.find(0, 1 << 40), scan(&c, 0, 1 << 40));
            assert_eq!(c.find(0, 1 << 40), Some(i.min(j)));
        }
    }

    /// `fill` and `pending_mask` touch only the sectors of their mask.
    #[test]
    fn fill_and_pending_by_sector() {
        let mut c = SectorCache::new(2, 2, 4);
        let (i, _) = c.allocate(0, 0);
        c.fill(i, 0b0101, PENDING);
        c.fill(i, 0b0010, 7);
        assert_eq!(c.pending_mask(i), 0b0101);
        assert_eq!(c.ready(i, 1), 7);
        c.fill(i, 0b0100, 9);
        assert_eq!(c.pending_mask(i), 0b0001);
        assert_eq!(c.ready(i, 2), 9);
        assert_eq!(c.valid(i), 0b0111);
    }
}
