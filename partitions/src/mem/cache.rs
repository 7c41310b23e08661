//! A sectored, set-associative cache with true LRU (used for the L1Ds and the L2 slices).
//! LRU order is a doubly linked list per set and ways fill in index order, so finding a
//! victim costs the same for 4 ways or 56 (Accel-Sim's A100 and RTX 3070 L1s).
//!
//! Each line holds a tag (its full line address), a valid and a dirty mask of sectors, and
//! per sector the time its data is (or will be) there: a sector allocated for a miss is valid
//! at once with the fill's time, so a later access to it merges with the fill in flight (an
//! MSHR merge) instead of sending a second request.

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
            meta: vec![EMPTY; n],
            ready: vec![0; n * spl],
            mru: vec![NIL; sets as usize],
            lru: vec![NIL; sets as usize],
            filled: vec![0; sets as usize],
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

    /// The way holding `tag` in set `set % sets`.
    pub(crate) fn find(&self, set: u64, tag: u64) -> Option<usize> {
        let s = self.set_of(set);
        let base = s * self.assoc;
        // Only the ways in use can hold a line (the others are `INVALID`, which only a
        // search for `INVALID` itself, never a line address in practice, must still see).
        let n = if tag == INVALID {
            self.assoc
        } else {
            self.filled[s] as usize
        };
        let ways = &self.tags[base..base + n];
        // A branch-free pass first (it vectorizes; a miss, the common case when streaming,
        // costs no more), then the position of a hit. L1s of 56 and 64 ways are searched on
        // every access.
        if !ways.iter().fold(false, |a, &t| a | (t == tag)) {
            return None;
        }
        ways.iter().position(|&t| t == tag).map(|k| base + k)
    }

    /// Marks way `i` most recently used.
    pub(crate) fn touch(&mut self, i: usize) {
        let set = i / self.assoc;
        if self.mru[set] == i as u32 {
            return;
        }
        self.unlink(set, i);
        self.push_mru(set, i);
    }

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
        let ev = if self.tags[victim] != INVALID
            && self.meta[victim].dirty & self.meta[victim].valid != 0
        {
            Some(Evicted {
                line_addr: self.tags[victim],
                dirty: self.meta[victim].dirty & self.meta[victim].valid,
            })
        } else {
            None
        };
        self.tags[victim] = tag;
        self.meta[victim].valid = 0;
        self.meta[victim].dirty = 0;
        (victim, ev)
    }

    /// Finds or allocates `tag`.
    pub(crate) fn find_or_allocate(&mut self, set: u64, tag: u64) -> (usize, Option<Evicted>) {
        match self.find(set, tag) {
            Some(i) => {
                self.touch(i);
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
        for s in 0..self.spl {
            if mask & (1 << s) != 0 {
                self.ready[i * self.spl + s] = ready;
            }
        }
        self.meta[i].valid |= mask;
    }

    /// The valid sectors of way `i` whose data is not there yet (`ready` is
    /// [`PENDING`]: a fill in flight whose time is not known).
    pub(crate) fn pending_mask(&self, i: usize) -> u64 {
        let mut m = 0;
        for s in 0..self.spl {
            if self.meta[i].valid & (1 << s) != 0 && self.ready[i * self.spl + s] == PENDING {
                m |= 1 << s;
            }
        }
        m
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
