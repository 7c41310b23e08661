//! The L1 data cache of an SM (part of its LD/ST unit, [`LdStUnit`]): its miss status
//! holding registers, a load's lookup and its misses (merged into the MSHR of a line in
//! flight, a new MSHR, or queued until one frees), the allocation of pending lines, a
//! store under each write policy, write-backs of evicted dirty sectors, and the
//! invalidation at a kernel boundary. The L1D's state (the sectored cache, its tag port,
//! the MSHRs and their index) is held in [`LdStUnit`]'s fields; the NoC requests it sends
//! go through the LD/ST unit's ports (`ldst.rs`).

use super::cache::{Evicted, PENDING};
use super::coalesce::LineAccess;
use super::ldst::InstWait;
use super::{popcount, Ctx, LdStUnit, Net, Space};
use crate::config::{WriteAllocate, WritePolicy};
use crate::Picos;

/// What a miss asks of L2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Read,
    /// An atomic with this many lane operations.
    Atomic(u32),
}

/// One L1 miss status holding register: a line's request to L2 and who waits for it.
/// One host cache line each (a miss and its reply find it cold; the tokens of later
/// waiters, rare, are kept apart in `LdStUnit::more_waiters`).
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
pub(super) struct Mshr {
    pub(super) line: u64,
    pub(super) sectors: u64,
    /// When its data is usable (the latest reply so far).
    pub(super) ready: Picos,
    /// Replies still to come.
    pub(super) replies: u32,
    /// Token of the first warp instruction waiting for it (there always is one).
    pub(super) waiter: u32,
    /// The L1 way its line was allocated in ([`NO_WAY`]: none; checked against the tag
    /// before use: the line may have been evicted since).
    pub(super) l1_way: u32,
    /// The next MSHR of its bucket's overflow chain in
    /// [`MshrIndex`](super::mshr_index::MshrIndex) (`NO_MSHR` at the end).
    pub(super) next: u32,
    /// Whether its data fills the L1 (a load through L1).
    pub(super) fill_l1: bool,
    /// Whether later waiters are listed in `LdStUnit::more_waiters`.
    pub(super) more: bool,
}

/// [`Mshr::l1_way`] of an MSHR without an L1 way.
pub(super) const NO_WAY: u32 = u32::MAX;

/// A miss waiting for an MSHR.
#[derive(Clone, Copy, Debug)]
pub(super) struct Miss {
    pub(super) line: u64,
    pub(super) sectors: u64,
    pub(super) token: u32,
    pub(super) op: Op,
    pub(super) fill_l1: bool,
    /// The context of the access.
    pub(super) ctx: Ctx,
}

impl LdStUnit {
    /// The SM starts a CTA of another kernel, whose context is `ctx`, at `now`: L1s are
    /// not coherent across kernels, so the L1D is invalidated and its dirty sectors are
    /// written to L2 (for the kernel that ends here).
    pub fn new_kernel(&mut self, now: Picos, ctx: Ctx, net: &mut dyn Net) {
        let ended = self.ctx;
        for ev in self.l1.invalidate_all() {
            self.l1_writeback(now, now, ev, ended, net);
        }
        self.ctx = ctx;
    }

    /// A load of one line (through L1 when `use_l1`). Forced inline, with the miss path
    /// under it (`start_miss_at`, `l1_mark_pending`, `send_requests`) and `store_line`:
    /// left to itself LLVM keeps these calls, each passing six or seven arguments for a
    /// few dozen instructions of work per line.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn load_line(
        &mut self,
        now: Picos,
        t: Picos,
        la: &LineAccess,
        use_l1: bool,
        token: u32,
        w: &mut InstWait,
        net: &mut dyn Net,
    ) {
        if !use_l1 {
            w.outstanding += 1;
            let miss = Miss {
                line: la.line_addr,
                sectors: la.sectors,
                token,
                op: Op::Read,
                fill_l1: false,
                ctx: self.ctx,
            };
            self.start_miss(now, t, miss, net);
            return;
        }
        self.stats.l1d_accesses += popcount(la.sectors);
        let set = self.spec.l1_geom.line_index(la.line_addr);
        let hit_at = t + self.spec.l1_hit_ps;
        w.ready = w.ready.max(hit_at);
        let mut missing = la.sectors;
        let mut refetch = 0;
        let way = self.l1.find(set, la.line_addr);
        if let Some(i) = way {
            self.l1.touch(set, i);
            let present = la.sectors & self.l1.valid(i);
            missing &= !present;
            let pending = present & self.l1.pending_mask(i);
            let n_pending = popcount(pending);
            self.stats.l1d_misses += n_pending;
            self.stats.l1d_pending_hits += n_pending;
            let mut m = present & !pending;
            while m != 0 {
                let r = self.l1.ready(i, m.trailing_zeros());
                m &= m - 1;
                if r <= hit_at {
                    self.stats.l1d_hits += 1;
                } else {
                    // A fill whose arrival is known but later: wait for it.
                    self.stats.l1d_misses += 1;
                    self.stats.l1d_pending_hits += 1;
                    w.ready = w.ready.max(r);
                }
            }
            if pending != 0 {
                match self.by_line.get(la.line_addr, &self.mshrs) {
                    Some(m) => {
                        self.add_waiter(m, token);
                        w.outstanding += 1;
                    }
                    // Pending without an MSHR cannot happen; fetch again rather than wait
                    // forever.
                    None => refetch = pending,
                }
            }
        }
        self.stats.l1d_misses += popcount(missing);
        if missing | refetch != 0 {
            w.outstanding += 1;
            let miss = Miss {
                line: la.line_addr,
                sectors: missing | refetch,
                token,
                op: Op::Read,
                fill_l1: true,
                ctx: self.ctx,
            };
            self.start_miss_at(now, t, miss, Some(way), net);
        }
    }

    /// Instruction `token` waits for MSHR `m` too.
    pub(super) fn add_waiter(&mut self, m: u32, token: u32) {
        let x = &mut self.mshrs[m as usize];
        if !x.more {
            x.more = true;
            self.more_waiters[m as usize].clear();
        }
        self.more_waiters[m as usize].push(token);
    }

    /// Asks L2 for `miss` at `t`: merged into the MSHR of its line when a load of that
    /// line is in flight, else in a new MSHR, else queued until one frees.
    pub(super) fn start_miss(&mut self, now: Picos, t: Picos, miss: Miss, net: &mut dyn Net) {
        self.start_miss_at(now, t, miss, None, net);
    }

    /// [`Self::start_miss`] with, when known, the L1 way of the miss's line
    /// (`Some(None)`: known absent), saving a search of the set.
    #[inline(always)]
    pub(super) fn start_miss_at(
        &mut self,
        now: Picos,
        t: Picos,
        miss: Miss,
        way: Option<Option<usize>>,
        net: &mut dyn Net,
    ) {
        let merge = miss.op == Op::Read && miss.fill_l1;
        if merge {
            if let Some(m) = self.by_line.get(miss.line, &self.mshrs) {
                self.add_waiter(m, miss.token);
                let x = &mut self.mshrs[m as usize];
                let new = miss.sectors & !x.sectors;
                x.sectors |= new;
                let w = self.l1_mark_pending(now, t, &miss, way, net);
                self.mshrs[m as usize].l1_way = w as u32;
                if new != 0 {
                    self.stats.l1d_miss_requests += 1;
                    let k = self.send_requests(now, t, miss.line, new, Op::Read, m, miss.ctx, net);
                    self.mshrs[m as usize].replies += k;
                }
                return;
            }
        }
        if self.busy_mshrs >= self.spec.l1_mshrs {
            self.stats.l1d_mshr_waits += 1;
            self.waiting.push_back(miss);
            return;
        }
        let m = match self.free_mshrs.pop() {
            Some(m) => m,
            None => {
                self.mshrs.push(Mshr::default());
                self.more_waiters.push(Vec::new());
                (self.mshrs.len() - 1) as u32
            }
        };
        self.busy_mshrs += 1;
        {
            let x = &mut self.mshrs[m as usize];
            x.line = miss.line;
            x.sectors = miss.sectors;
            x.fill_l1 = merge;
            x.ready = 0;
            x.l1_way = NO_WAY;
            x.waiter = miss.token;
            x.more = false;
        }
        if merge {
            self.by_line.insert(miss.line, m, &mut self.mshrs);
            let w = self.l1_mark_pending(now, t, &miss, way, net);
            self.mshrs[m as usize].l1_way = w as u32;
        }
        self.stats.l1d_miss_requests += 1;
        let k = self.send_requests(now, t, miss.line, miss.sectors, miss.op, m, miss.ctx, net);
        self.mshrs[m as usize].replies = k;
    }

    /// Allocates the sectors of `miss`'s line as pending (their fill is in flight); returns
    /// its way. A dirty victim's write-back is the miss's context's.
    #[inline(always)]
    pub(super) fn l1_mark_pending(
        &mut self,
        now: Picos,
        t: Picos,
        miss: &Miss,
        way: Option<Option<usize>>,
        net: &mut dyn Net,
    ) -> usize {
        let (line, sectors) = (miss.line, miss.sectors);
        let set = self.spec.l1_geom.line_index(line);
        let (i, ev) = match way {
            Some(Some(i)) => {
                self.l1.touch(set, i);
                (i, None)
            }
            Some(None) => self.l1.allocate(set, line),
            None => self.l1.find_or_allocate(set, line),
        };
        if let Some(ev) = ev {
            self.l1_writeback(now, t, ev, miss.ctx, net);
        }
        let p = sectors & !(self.l1.valid(i) & !self.l1.pending_mask(i));
        self.l1.fill(i, p, PENDING);
        i
    }

    /// Writes the dirty sectors of `ev` to L2 from `t`, for `ctx`.
    pub(super) fn l1_writeback(
        &mut self,
        now: Picos,
        t: Picos,
        ev: Evicted,
        ctx: Ctx,
        net: &mut dyn Net,
    ) {
        self.stats.l1d_writeback_sectors += popcount(ev.dirty);
        self.send_write(now, t, ev.line_addr, ev.dirty, ctx, net);
    }

    #[inline(always)]
    pub(super) fn store_line(
        &mut self,
        now: Picos,
        t: Picos,
        la: &LineAccess,
        use_l1: bool,
        space: Space,
        net: &mut dyn Net,
    ) -> Picos {
        let hit_at = t + self.spec.l1_hit_ps;
        if !use_l1 {
            return self
                .send_write(now, t, la.line_addr, la.sectors, self.ctx, net)
                .max(hit_at);
        }
        let n = popcount(la.sectors);
        self.stats.l1d_accesses += n;
        let set = self.spec.l1_geom.line_index(la.line_addr);
        // Nothing below changes the L1 before the way found here is used.
        let way = self.l1.find(set, la.line_addr);
        let present = match way {
            Some(i) => self.l1.valid(i) & la.sectors,
            None => 0,
        };
        self.stats.l1d_hits += popcount(present);
        self.stats.l1d_misses += n - popcount(present);
        let write_back = match self.spec.l1_write_policy {
            WritePolicy::WriteBack => true,
            WritePolicy::LocalWriteBack => space == Space::Local,
            WritePolicy::WriteThrough | WritePolicy::WriteEvict => false,
        };
        if write_back {
            let (i, ev) = self.l1.touch_or_allocate(set, la.line_addr, way);
            if let Some(ev) = ev {
                self.l1_writeback(now, t, ev, self.ctx, net);
            }
            // The store's bytes are in L1 from `hit_at` on (a fill in flight of the same
            // sectors brings older data: the store's win).
            let new = la.sectors & !(self.l1.valid(i) & !self.l1.pending_mask(i));
            self.l1.fill(i, new, hit_at);
            self.l1.mark_dirty(i, la.sectors);
            return hit_at;
        }
        let missing = la.sectors & !present;
        if self.spec.l1_write_policy == WritePolicy::WriteEvict {
            if let Some(i) = way {
                self.l1.invalidate_sectors(i, la.sectors);
            }
        } else if missing != 0 {
            let alloc = match self.spec.l1_write_allocate {
                WriteAllocate::NoAllocate => 0,
                WriteAllocate::FetchOnWrite => missing,
                WriteAllocate::LazyFetchOnRead => {
                    missing & self.spec.l1_geom.covered_sectors(la.bytes)
                }
            };
            if alloc != 0 {
                let (i, ev) = self.l1.touch_or_allocate(set, la.line_addr, way);
                if let Some(ev) = ev {
                    self.l1_writeback(now, t, ev, self.ctx, net);
                }
                self.l1.fill(i, alloc, hit_at);
            }
        } else if let Some(i) = way {
            self.l1.touch(set, i);
        }
        self.send_write(now, t, la.line_addr, la.sectors, self.ctx, net)
            .max(hit_at)
    }
}
