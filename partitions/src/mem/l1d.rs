//! The L1 data cache of an SM (part of its LD/ST unit, [`LdStUnit`]): its miss status
//! holding registers, a load's lookup and its misses (merged into the MSHR of a line in
//! flight, a new MSHR, or queued until one frees), the allocation of pending lines, a
//! store under each write policy, write-backs of evicted dirty sectors, and the
//! invalidation at a kernel boundary. The L1D's state (the sectored cache, its tag port,
//! the MSHRs and their index) is its own struct, [`L1d`], held by the LD/ST unit; the NoC
//! requests it sends go through the LD/ST unit's ports (`ldst.rs`).

use std::collections::VecDeque;

use super::cache::{Evicted, SectorCache, PENDING};
use super::coalesce::Geometry;
use super::coalesce::LineAccess;
use super::ldst::InstWait;
use super::mshr_index::MshrIndex;
use super::port::BwPort;
use super::{popcount, Ctx, LdStUnit, Net, Request, Space};
use crate::config::{config_enum, section, Check, ConfigError, GpuConfig, Kind, MAX_CYCLES};
use crate::counters::unit_counters;
use crate::observe::{MemAccess, MemLevel};
use crate::Picos;

config_enum! {
    /// What a store does at a cache.
    pub enum WritePolicy {
        /// Stores update a hit line and always go on to the next level.
        WriteThrough = "write_through",
        /// Stores dirty the line; it is written back on eviction or flush.
        WriteBack = "write_back",
        /// Stores invalidate a hit line and go on to the next level.
        WriteEvict = "write_evict",
        /// Write-back for local memory, write-through for global (Fermi's L1).
        LocalWriteBack = "local_write_back",
    }
}

config_enum! {
    /// What a store that misses does at a cache.
    pub enum WriteAllocate {
        /// The line is not allocated.
        NoAllocate = "no_allocate",
        /// The line is fetched, then written.
        FetchOnWrite = "fetch_on_write",
        /// The written sectors are allocated without a fetch; the rest is fetched only if
        /// a later load needs it.
        LazyFetchOnRead = "lazy_fetch_on_read",
    }
}

section! {
    /// The L1 data cache of each SM. A load's end-to-end latency on an L1 hit is
    /// `hit_latency_cycles`.
    pub struct L1dConfig {
        /// Cache global loads in L1; `false` sends them all to L2 (`-gpgpu_gmem_skip_L1D`).
        enabled: bool = Kind::Bool, unit "-", Some("true");
        /// Capacity (fixed; the shared-memory carveout is `core.shared_mem_per_sm_bytes`).
        /// Presets: the simulator config's L1 or what the unified L1/shared SRAM leaves
        /// beside the full shared-memory carveout.
        size_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4 << 20);
        /// Ways per set; `size_bytes / (assoc * line_bytes)` sets, a power of two.
        /// Presets: the simulator config's `-gpgpu_cache:dl1`.
        assoc: u32 = Kind::U32, unit "ways", None, range (1, 4096);
        /// Line size (power of two). Presets: 128.
        line_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Sector size, the unit of coalescing and of fills; divides `line_bytes`.
        /// Presets: 32 for sectored caches (Volta on), 128 for Fermi's.
        sector_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Banks; accesses to one bank in one cycle serialize. Presets: the simulator
        /// config's `-gpgpu_l1_banks`.
        banks: u32 = Kind::U32, unit "banks", None, range (1, 1024);
        /// Cycles from a load's issue to its data on an L1 hit, as a pointer chase measures
        /// it. Presets: a measured pointer-chase L1 hit, else the simulator config's
        /// `-gpgpu_l1_latency`.
        hit_latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
        /// Miss status holding registers: distinct lines with misses in flight.
        /// Presets: the simulator config's MSHR entries (`A:<n>:<merge>`).
        mshrs: u32 = Kind::U32, unit "entries", None, range (1, 65_536);
        /// Requests that may merge into one MSHR entry. Presets: as `mshrs`.
        mshr_max_merge: u32 = Kind::U32, unit "requests", None, range (1, 65_536);
        /// The miss queue: request packets (reads, writes, atomics, write-backs) waiting to
        /// enter the NoC. With `noc.model: crossbar` and `noc.input_buffer_flits` above 0,
        /// a packet waits here for credit at its crossbar input, and while the queue holds
        /// this many the SM issues no memory instruction (the stall `stall_no_credit`).
        /// Presets: the simulator config's `<mq>` field (`A:<n>:<merge>,<mq>:...`); 16
        /// when absent.
        miss_queue_packets: u32 = Kind::U32, unit "packets", Some("16"), range (1, 1_000_000);
        /// What a store does on a hit. Presets: the simulator config's `<wr>` field.
        write_policy: WritePolicy = Kind::Enum(WritePolicy::NAMES), unit "-", None;
        /// What a store does on a miss. Presets: the simulator config's `<wr_alloc>` field.
        write_allocate: WriteAllocate = Kind::Enum(WriteAllocate::NAMES), unit "-", None;
    }
}

impl L1dConfig {
    /// Rejects impossible values of this section alone (module `config::validate` checks
    /// the rest).
    pub(crate) fn check(&self, v: &Check) -> Result<(), ConfigError> {
        let l1 = self;
        v.cache("l1d", l1.size_bytes as u64, l1.assoc, l1.line_bytes)?;
        v.sector("l1d", l1.sector_bytes, l1.line_bytes)?;
        v.nonzero("l1d.banks", l1.banks as u64)?;
        v.nonzero("l1d.hit_latency_cycles", l1.hit_latency_cycles as u64)?;
        v.nonzero("l1d.mshrs", l1.mshrs as u64)?;
        v.nonzero("l1d.mshr_max_merge", l1.mshr_max_merge as u64)?;
        Ok(())
    }
}

/// The parameters of an SM's L1D (`l1d`), converted: sets, picoseconds.
#[derive(Clone, Copy, Debug)]
pub struct L1dParams {
    pub(crate) geom: Geometry,
    /// `l1d.hit_latency_cycles` in picoseconds.
    pub(crate) hit_ps: Picos,
    /// `size_bytes / (assoc * line_bytes)`.
    pub(crate) sets: u64,
    pub(crate) assoc: u32,
    pub(crate) mshrs: u32,
    /// `l1d.miss_queue_packets`.
    pub(crate) miss_queue: usize,
    pub(crate) enabled: bool,
    pub(crate) write_policy: WritePolicy,
    pub(crate) write_allocate: WriteAllocate,
    /// The core clock: the tag/data stage takes one line per cycle.
    pub(crate) clock_hz: u64,
}

impl L1dParams {
    pub fn from_config(cfg: &GpuConfig) -> L1dParams {
        let l = &cfg.l1d;
        let geom = Geometry::new(l.line_bytes, l.sector_bytes);
        L1dParams {
            hit_ps: l.hit_latency_cycles as Picos * cfg.core_period_ps(),
            sets: l.size_bytes as u64 / ((l.assoc as u64).max(1) * geom.line_bytes).max(1),
            geom,
            assoc: l.assoc,
            mshrs: l.mshrs.max(1),
            miss_queue: l.miss_queue_packets.max(1) as usize,
            enabled: l.enabled,
            write_policy: l.write_policy,
            write_allocate: l.write_allocate,
            clock_hz: cfg.core.clock_hz,
        }
    }
}

unit_counters! {
    /// The L1D counters of one SM, in sectors unless named otherwise: `hits + misses =
    /// accesses`, counting the loads and stores that use the L1D (not atomics, nor
    /// global/const accesses with `l1d.enabled: false`).
    pub struct L1dStats {
        /// Sector accesses of loads and stores that go through the L1D.
        accesses,
        hits,
        misses,
        /// Sector misses that merged with a fill already in flight (included in misses).
        pending_hits,
        /// Miss requests (one per line, plus one per later request of new sectors of a
        /// line already in flight) sent to L2.
        miss_requests,
        /// Misses that found every MSHR busy and waited.
        mshr_waits,
        /// Dirty sectors written to L2 (write-back policies).
        writeback_sectors,
    }
}

/// The L1D of one SM: its sectored cache, its tag/data stage, its MSHRs and the misses
/// waiting for one. Its behaviour is the `impl LdStUnit` below: a lookup also takes the
/// LD/ST unit's NoC ports and counters.
pub(super) struct L1d {
    pub(super) cache: SectorCache,
    /// The tag/data stage: one line per core cycle.
    pub(super) port: BwPort,
    pub(super) mshrs: Vec<Mshr>,
    /// By MSHR: the tokens of the warp instructions that wait for it after the first, one
    /// entry per wait (valid while its [`Mshr::more`] is set).
    pub(super) more_waiters: Vec<Vec<u32>>,
    pub(super) free_mshrs: Vec<u32>,
    pub(super) busy_mshrs: u32,
    /// The MSHR of each line with a load in flight that fills the L1.
    pub(super) by_line: MshrIndex,
    pub(super) waiting: VecDeque<Miss>,
}

impl L1d {
    pub(super) fn new(p: &L1dParams) -> L1d {
        L1d {
            cache: SectorCache::new(p.sets, p.assoc, p.geom.sectors_per_line()),
            port: BwPort::new(p.geom.line_bytes, p.clock_hz),
            mshrs: Vec::new(),
            more_waiters: Vec::new(),
            free_mshrs: Vec::new(),
            busy_mshrs: 0,
            by_line: MshrIndex::new(p.mshrs),
            waiting: VecDeque::new(),
        }
    }
}

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
    /// Tells the observer, if any, of an L1D access at `at`.
    #[inline(always)]
    fn observed(&self, at: Picos, line: u64, sectors: u64, hits: u64, write: bool) {
        if let Some(p) = &self.probe {
            let e = MemAccess {
                at,
                level: MemLevel::L1d,
                line,
                sectors: popcount(sectors) as u32,
                hits: hits as u32,
                write,
            };
            p.obs.mem_access(p.unit, &e);
        }
    }

    /// The SM starts a CTA of another kernel, whose context is `ctx`, at `now`: L1s are
    /// not coherent across kernels, so the L1D is invalidated and its dirty sectors are
    /// written to L2 (for the kernel that ends here).
    pub fn new_kernel(&mut self, now: Picos, ctx: Ctx, net: &mut dyn Net) {
        let ended = self.ctx;
        self.drop_sync_copies(None);
        for ev in self.l1d.cache.invalidate_all() {
            self.l1_writeback(now, now, ev, ended, net);
        }
        self.ctx = ctx;
        if self.per_kernel.leaves(ctx) {
            let now = self.kernel_view();
            self.per_kernel.enter(ctx, now);
        }
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
        self.stats.l1d.accesses += popcount(la.sectors);
        let hits_before = self.stats.l1d.hits;
        let set = self.params.l1d.geom.line_index(la.line_addr);
        let hit_at = t + self.params.l1d.hit_ps;
        w.ready = w.ready.max(hit_at);
        let mut missing = la.sectors;
        let mut refetch = 0;
        let way = self.l1d.cache.find(set, la.line_addr);
        if let Some(i) = way {
            self.l1d.cache.touch(set, i);
            let present = la.sectors & self.l1d.cache.valid(i);
            missing &= !present;
            let pending = present & self.l1d.cache.pending_mask(i);
            let n_pending = popcount(pending);
            self.stats.l1d.misses += n_pending;
            self.stats.l1d.pending_hits += n_pending;
            let mut m = present & !pending;
            while m != 0 {
                let r = self.l1d.cache.ready(i, m.trailing_zeros());
                m &= m - 1;
                if r <= hit_at {
                    self.stats.l1d.hits += 1;
                } else {
                    // A fill whose arrival is known but later: wait for it.
                    self.stats.l1d.misses += 1;
                    self.stats.l1d.pending_hits += 1;
                    w.ready = w.ready.max(r);
                }
            }
            if pending != 0 {
                match self.l1d.by_line.get(la.line_addr, &self.l1d.mshrs) {
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
        self.stats.l1d.misses += popcount(missing);
        let hits = self.stats.l1d.hits - hits_before;
        self.observed(t, la.line_addr, la.sectors, hits, false);
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
        let x = &mut self.l1d.mshrs[m as usize];
        if !x.more {
            x.more = true;
            self.l1d.more_waiters[m as usize].clear();
        }
        self.l1d.more_waiters[m as usize].push(token);
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
            if let Some(m) = self.l1d.by_line.get(miss.line, &self.l1d.mshrs) {
                self.add_waiter(m, miss.token);
                let x = &mut self.l1d.mshrs[m as usize];
                let new = miss.sectors & !x.sectors;
                x.sectors |= new;
                let w = self.l1_mark_pending(now, t, &miss, way, net);
                self.l1d.mshrs[m as usize].l1_way = w as u32;
                if new != 0 {
                    self.stats.l1d.miss_requests += 1;
                    let k = self.send_requests(now, t, miss.line, new, Op::Read, m, miss.ctx, net);
                    self.l1d.mshrs[m as usize].replies += k;
                }
                return;
            }
        }
        if self.l1d.busy_mshrs >= self.params.l1d.mshrs {
            self.stats.l1d.mshr_waits += 1;
            self.l1d.waiting.push_back(miss);
            return;
        }
        let m = match self.l1d.free_mshrs.pop() {
            Some(m) => m,
            None => {
                self.l1d.mshrs.push(Mshr::default());
                self.l1d.more_waiters.push(Vec::new());
                (self.l1d.mshrs.len() - 1) as u32
            }
        };
        self.l1d.busy_mshrs += 1;
        {
            let x = &mut self.l1d.mshrs[m as usize];
            x.line = miss.line;
            x.sectors = miss.sectors;
            x.fill_l1 = merge;
            x.ready = 0;
            x.l1_way = NO_WAY;
            x.waiter = miss.token;
            x.more = false;
        }
        if merge {
            self.l1d.by_line.insert(miss.line, m, &mut self.l1d.mshrs);
            let w = self.l1_mark_pending(now, t, &miss, way, net);
            self.l1d.mshrs[m as usize].l1_way = w as u32;
        }
        self.stats.l1d.miss_requests += 1;
        let k = self.send_requests(now, t, miss.line, miss.sectors, miss.op, m, miss.ctx, net);
        self.l1d.mshrs[m as usize].replies = k;
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
        let set = self.params.l1d.geom.line_index(line);
        let (i, ev) = match way {
            Some(Some(i)) => {
                self.l1d.cache.touch(set, i);
                (i, None)
            }
            Some(None) => self.l1d.cache.allocate(set, line),
            None => self.l1d.cache.find_or_allocate(set, line),
        };
        if let Some(ev) = ev {
            self.l1_writeback(now, t, ev, miss.ctx, net);
        }
        let p = sectors & !(self.l1d.cache.valid(i) & !self.l1d.cache.pending_mask(i));
        self.l1d.cache.fill(i, p, PENDING);
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
        self.stats.l1d.writeback_sectors += popcount(ev.dirty);
        self.send_write(now, t, ev.line_addr, ev.dirty, ctx, Request::NO_ACK, net);
    }

    /// Stores `la` from `t`; returns when the store is done for its warp (its data in L1
    /// or out of the SM) and how many write packets name `ack` (each acknowledged, unless
    /// `ack` is [`Request::NO_ACK`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn store_line(
        &mut self,
        now: Picos,
        t: Picos,
        la: &LineAccess,
        use_l1: bool,
        space: Space,
        ack: u32,
        net: &mut dyn Net,
    ) -> (Picos, u32) {
        let hit_at = t + self.params.l1d.hit_ps;
        let acked =
            |(dep, n): (Picos, u32)| (dep.max(hit_at), if ack == Request::NO_ACK { 0 } else { n });
        if !use_l1 {
            return acked(self.send_write(now, t, la.line_addr, la.sectors, self.ctx, ack, net));
        }
        let n = popcount(la.sectors);
        self.stats.l1d.accesses += n;
        let set = self.params.l1d.geom.line_index(la.line_addr);
        // Nothing below changes the L1 before the way found here is used.
        let way = self.l1d.cache.find(set, la.line_addr);
        let present = match way {
            Some(i) => self.l1d.cache.valid(i) & la.sectors,
            None => 0,
        };
        self.stats.l1d.hits += popcount(present);
        self.stats.l1d.misses += n - popcount(present);
        self.observed(t, la.line_addr, la.sectors, popcount(present), true);
        let write_back = match self.params.l1d.write_policy {
            WritePolicy::WriteBack => true,
            WritePolicy::LocalWriteBack => space == Space::Local,
            WritePolicy::WriteThrough | WritePolicy::WriteEvict => false,
        };
        if write_back {
            let (i, ev) = self.l1d.cache.touch_or_allocate(set, la.line_addr, way);
            if let Some(ev) = ev {
                self.l1_writeback(now, t, ev, self.ctx, net);
            }
            // The store's bytes are in L1 from `hit_at` on (a fill in flight of the same
            // sectors brings older data: the store's win).
            let new = la.sectors & !(self.l1d.cache.valid(i) & !self.l1d.cache.pending_mask(i));
            self.l1d.cache.fill(i, new, hit_at);
            self.l1d.cache.mark_dirty(i, la.sectors);
            return (hit_at, 0);
        }
        let missing = la.sectors & !present;
        if self.params.l1d.write_policy == WritePolicy::WriteEvict {
            if let Some(i) = way {
                self.l1d.cache.invalidate_sectors(i, la.sectors);
            }
        } else if missing != 0 {
            let alloc = match self.params.l1d.write_allocate {
                WriteAllocate::NoAllocate => 0,
                WriteAllocate::FetchOnWrite => missing,
                WriteAllocate::LazyFetchOnRead => {
                    missing & self.params.l1d.geom.covered_sectors(la.bytes)
                }
            };
            if alloc != 0 {
                let (i, ev) = self.l1d.cache.touch_or_allocate(set, la.line_addr, way);
                if let Some(ev) = ev {
                    self.l1_writeback(now, t, ev, self.ctx, net);
                }
                self.l1d.cache.fill(i, alloc, hit_at);
            }
        } else if let Some(i) = way {
            self.l1d.cache.touch(set, i);
        }
        acked(self.send_write(now, t, la.line_addr, la.sectors, self.ctx, ack, net))
    }
}
