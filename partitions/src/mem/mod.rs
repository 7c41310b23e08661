//! The memory hierarchy of one GPU (DESIGN.md section 5, "Memory hierarchy"): LD/ST
//! coalescing into 32-byte sectors of 128-byte lines, per-SM L1D, the NoC, memory-side L2
//! slices and DRAM channels.
//!
//! API contract (the GPU loop relies on it): [`MemSystem::access`] is called in
//! nondecreasing `now_ps` order (ties in a fixed order chosen by the caller) and returns
//! when the instruction's result is available; resources are modeled as queues whose
//! state advances only through these calls, so the same call sequence always gives the
//! same times. (A call with an earlier `now_ps` than a previous one is treated as issued at
//! that previous time.)
//!
//! # The model (a first version; every number comes from the config)
//!
//! Time is integer picoseconds; each `_cycles` key is converted with its own clock's period
//! (DESIGN.md section 3). Bandwidth-limited resources are [`port::BwPort`] calendars with
//! exact fractional carry, so no port ever moves more than its configured bytes per cycle
//! over any window. A request is modelled completely when it is called (an analytic,
//! "reserve the resources in call order" model): each resource gives it the earliest free
//! slot at or after the time it gets there.
//!
//! - **Coalescing** ([`coalesce`]): the active lanes' byte ranges become one request per
//!   `l1d.line_bytes` line with a mask of its `l1d.sector_bytes` sectors (sm_70+
//!   GPGPU-Sim/Accel-Sim). The L1 handles one line per core cycle (its tag/data port).
//! - **L1D** (one per SM, `Global`, `Local` and `Const` accesses): sectored, `l1d.assoc`
//!   ways, LRU, set = line index mod sets. A load's sectors that are valid and ready hit:
//!   data at `t + l1d.hit_latency_cycles`. Sectors with a fill in flight merge with it (an
//!   MSHR merge, counted in `l1d_pending_hits` and as misses). Missing sectors of a line are
//!   one miss request: it takes one of `l1d.mshrs` MSHRs (a request finding them all busy
//!   waits until the earliest frees) and its data is back at the SM after the L2 round trip,
//!   plus the L1 hit latency (the fill and return pipeline). `l1d.mshr_max_merge` and
//!   `l1d.banks` are not modelled. `Const` is treated as a global load (no constant cache
//!   model yet); `Local` always goes through L1, `Global`/`Const` only with `l1d.enabled`.
//!   Stores follow `l1d.write_policy`: `write_through` updates present sectors and sends the
//!   data to L2; `write_evict` drops present sectors and sends it on; `write_back` (and
//!   `local_write_back` for `Local`) dirties the L1 line and writes it to L2 only on eviction
//!   or at a kernel boundary. A store miss follows `l1d.write_allocate`: `no_allocate` leaves
//!   L1 alone; `lazy_fetch_on_read` allocates the sectors the store covers entirely (a
//!   partly written sector is fetched by a later load); `fetch_on_write` allocates every
//!   written sector (the fetch itself is not timed). A store is done, for the warp, when its
//!   last packet has left the SM, and never before `now + l1d.hit_latency_cycles`; L2 write
//!   acknowledgements are not modelled. Atomics bypass L1 (dropping the L1 copy of their
//!   sectors) and are performed at the L2 slice.
//! - **Shared memory**: `shared_mem.latency_cycles` plus one core cycle per extra pass; the
//!   passes are the largest number of distinct `bank_bytes` words any of the `banks` banks
//!   must deliver ([`coalesce::shared_passes`]; same word = broadcast). The shared-memory port
//!   moves `banks * bank_bytes` per core cycle. No L1/L2 traffic.
//! - **NoC**: every SM and every L2 slice has an egress and an ingress port of
//!   `noc.bandwidth_bytes_per_cycle` at the NoC clock; a packet arrives
//!   `noc.latency_cycles` after it starts to leave (cut-through: serialization delays the
//!   packets behind it, not itself). Packets carry an 8-byte header (GPGPU-Sim's control
//!   size) plus the data sectors: read request 8 B, read reply 8 B + data, write 8 B + data.
//! - **L2** (memory-side, `l2.slices` slices, `l2.slices / dram.channels` per channel): the
//!   slice of an address is `channel * per_channel + (local / l2.line_bytes) %
//!   per_channel`, where `channel` and the channel-local address `local` are the DRAM map
//!   below; inside the slice, set = `(local / l2.line_bytes / per_channel) % sets`. Each
//!   slice: `l2.size_bytes / l2.slices`, `l2.assoc` ways, LRU, sectored. A hit's reply
//!   leaves `l2.hit_latency_cycles` after the request arrives; missing sectors take one of
//!   `l2.mshrs_per_slice` MSHRs, are read from DRAM together (one burst of the missing
//!   sectors), fill the line and leave `l2.hit_latency_cycles` after the data is there.
//!   Replies cross the slice's data port (`l2.bandwidth_bytes_per_cycle` per L2 cycle).
//!   With `l2.write_back`, stores allocate their sectors dirty without a fetch and dirty
//!   sectors go to DRAM when their line is evicted; without it stores are written through.
//!   Atomics: read like a load, then the slice's ALU (one lane operation per L2 cycle)
//!   answers `l2.atomic_latency_cycles` after it starts; the line is dirtied.
//! - **DRAM** ([`dram`]): `chunk = addr / dram.interleave_bytes`, `channel = chunk %
//!   channels`, `local = (chunk / channels) * interleave_bytes + addr % interleave_bytes`,
//!   `bank = (local / row_bytes) % banks`, `row = local / row_bytes / banks`; open-row
//!   banks paying `t_rp + t_rcd` on a row conflict (`t_rcd` on a closed bank), a channel bus
//!   of `bandwidth_bytes_per_cycle` per DRAM cycle, `latency_ps` from burst start to data at
//!   the slice.
//!
//! Unloaded, a pointer chase therefore sees exactly the composition of docs/config.md:
//! L1 hit; L1 hit + 2 x NoC + L2 hit; + `dram.latency_ps` + the row-buffer timing.
//!
//! `memcpy_to_device` with `memcpy.fills_l2` installs the copied sectors in L2, clean, and
//! only the last `l2.size_bytes` of a larger copy (what LRU would leave). `kernel_boundary`
//! invalidates every L1D (NVIDIA L1s are not coherent across kernels), writing dirty
//! sectors of write-back L1s into L2 (untimed).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::config::{GpuConfig, WriteAllocate, WritePolicy};
use serde::Serialize;
use tessera_interconnect::Picos;

pub mod coalesce;

mod cache;
mod dram;
mod port;

use cache::{Evicted, SectorCache};
use coalesce::{add_range, Geometry, LineAccess};
use dram::{Dram, DramOp};
use port::BwPort;

/// Bytes of a packet header on the NoC (GPGPU-Sim's 8-byte control size).
const HEADER_BYTES: u64 = 8;

/// What a memory instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Load,
    Store,
    /// Atomics and reductions: performed at the L2 slice of the address.
    Atomic,
}

/// Which memory a memory instruction addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Local,
    Shared,
    Const,
}

/// One warp memory instruction.
#[derive(Clone, Copy, Debug)]
pub struct MemRequest<'a> {
    /// The issuing SM.
    pub sm: u32,
    pub access: Access,
    pub space: Space,
    /// Bytes per lane.
    pub width_bytes: u32,
    /// `(lane, address)` of each active lane, in lane order.
    pub lanes: &'a [(u32, u64)],
}

/// Integer counters of the memory hierarchy (summed over units; ratios are computed by
/// whoever prints them). L1D and L2 counters count sectors; `l1d_hits + l1d_misses =
/// l1d_accesses` and likewise for L2. The L1D counters count the loads and stores that use
/// an L1D (not atomics, nor global/const accesses with `l1d.enabled: false`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemStats {
    /// Sector accesses of loads and stores that go through an L1D.
    pub l1d_accesses: u64,
    pub l1d_hits: u64,
    pub l1d_misses: u64,
    pub l2_accesses: u64,
    pub l2_hits: u64,
    pub l2_misses: u64,
    /// DRAM sector reads (fills of L2 misses).
    pub dram_reads: u64,
    /// DRAM sector writes (L2 write-backs, or write-through stores).
    pub dram_writes: u64,
    /// DRAM bytes read and written.
    pub dram_bytes: u64,
    /// Warp shared-memory instructions.
    pub shared_accesses: u64,
    /// Extra shared-memory passes caused by bank conflicts.
    pub shared_bank_conflicts: u64,
    /// Warp global/local/const instructions (loads, stores, atomics).
    pub global_requests: u64,
    /// L1D sector misses that merged with a fill already in flight (included in misses).
    pub l1d_pending_hits: u64,
    /// L1D miss requests (one per line) sent to L2.
    pub l1d_miss_requests: u64,
    /// L1D miss requests that found every MSHR busy and waited.
    pub l1d_mshr_waits: u64,
    /// L2 sector misses that merged with a fill already in flight (included in misses).
    pub l2_pending_hits: u64,
    /// L2 miss requests that found every MSHR of their slice busy and waited.
    pub l2_mshr_waits: u64,
    /// Dirty L2 sectors written back to DRAM.
    pub l2_writeback_sectors: u64,
    /// Dirty L1D sectors written to L2 (write-back L1 policies).
    pub l1d_writeback_sectors: u64,
    /// Warp atomic instructions performed at L2 (per line touched).
    pub l2_atomics: u64,
    /// NoC bytes from SMs to L2 slices (headers included).
    pub noc_request_bytes: u64,
    /// NoC bytes from L2 slices to SMs (headers included).
    pub noc_reply_bytes: u64,
    pub dram_read_bytes: u64,
    pub dram_write_bytes: u64,
    /// L2 sectors installed by host-to-device copies.
    pub memcpy_l2_sectors: u64,
}

/// Outstanding misses of one cache: the times their MSHRs free.
#[derive(Clone, Debug)]
struct Mshrs {
    cap: usize,
    busy_until: BinaryHeap<Reverse<Picos>>,
}

impl Mshrs {
    fn new(cap: u32) -> Mshrs {
        Mshrs {
            cap: (cap as usize).max(1),
            busy_until: BinaryHeap::new(),
        }
    }

    /// When a miss asked at `t` gets an MSHR (and whether it waited).
    fn acquire(&mut self, t: Picos) -> (Picos, bool) {
        while let Some(&Reverse(r)) = self.busy_until.peek() {
            if r <= t {
                self.busy_until.pop();
            } else {
                break;
            }
        }
        if self.busy_until.len() >= self.cap {
            if let Some(Reverse(r)) = self.busy_until.pop() {
                return (r.max(t), true);
            }
        }
        (t, false)
    }

    fn release(&mut self, at: Picos) {
        self.busy_until.push(Reverse(at));
    }
}

/// The memory side of one SM.
#[derive(Clone, Debug)]
struct SmMem {
    l1: SectorCache,
    mshrs: Mshrs,
    /// The L1 tag/data stage: one line per core cycle.
    l1_port: BwPort,
    /// The shared-memory banks: `banks * bank_bytes` per core cycle.
    shared_port: BwPort,
    noc_out: BwPort,
    noc_in: BwPort,
}

/// One memory-side L2 slice.
#[derive(Clone, Debug)]
struct Slice {
    cache: SectorCache,
    mshrs: Mshrs,
    data_port: BwPort,
    alu: BwPort,
    noc_in: BwPort,
    noc_out: BwPort,
}

/// What a request does at the L2 slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum L2Op {
    Read,
    /// An atomic with this many lane operations.
    Atomic(u64),
}

/// The memory hierarchy of one GPU.
pub struct MemSystem {
    l1_geom: Geometry,
    l2_geom: Geometry,
    l1_enabled: bool,
    l1_write_policy: WritePolicy,
    l1_write_allocate: WriteAllocate,
    l2_write_back: bool,
    fills_l2: bool,
    l2_size_bytes: u64,
    core_ps: Picos,
    l1_hit_ps: Picos,
    shared_latency_cycles: u64,
    shared_banks: u32,
    shared_bank_bytes: u32,
    noc_latency_ps: Picos,
    l2_hit_ps: Picos,
    l2_atomic_ps: Picos,
    slices_per_channel: u64,
    sms: Vec<SmMem>,
    slices: Vec<Slice>,
    dram: Dram,
    /// The latest `now_ps` seen: no reservation starts before it.
    floor: Picos,
    lines: Vec<LineAccess>,
    groups: Vec<LineAccess>,
    stats: MemStats,
}

fn popcount(m: u64) -> u64 {
    m.count_ones() as u64
}

impl MemSystem {
    pub fn new(cfg: &GpuConfig) -> MemSystem {
        let l1_geom = Geometry::new(cfg.l1d.line_bytes, cfg.l1d.sector_bytes);
        let l2_geom = Geometry::new(cfg.l2.line_bytes, cfg.l2.sector_bytes);
        let core_ps = cfg.core_period_ps();
        let l1_sets =
            cfg.l1d.size_bytes as u64 / ((cfg.l1d.assoc as u64).max(1) * l1_geom.line_bytes).max(1);
        let slices_n = cfg.l2.slices.max(1) as u64;
        let channels = cfg.dram.channels.max(1) as u64;
        let l2_sets = cfg.l2.size_bytes
            / slices_n
            / ((cfg.l2.assoc as u64).max(1) * l2_geom.line_bytes).max(1);
        let sms = (0..cfg.core.sm_count.max(1))
            .map(|_| SmMem {
                l1: SectorCache::new(l1_sets, cfg.l1d.assoc, l1_geom.sectors_per_line()),
                mshrs: Mshrs::new(cfg.l1d.mshrs),
                l1_port: BwPort::new(l1_geom.line_bytes, cfg.core.clock_hz),
                shared_port: BwPort::new(
                    cfg.shared_mem.banks as u64 * cfg.shared_mem.bank_bytes as u64,
                    cfg.core.clock_hz,
                ),
                noc_out: BwPort::new(cfg.noc.bandwidth_bytes_per_cycle as u64, cfg.noc.clock_hz),
                noc_in: BwPort::new(cfg.noc.bandwidth_bytes_per_cycle as u64, cfg.noc.clock_hz),
            })
            .collect();
        let slices = (0..slices_n)
            .map(|_| Slice {
                cache: SectorCache::new(l2_sets, cfg.l2.assoc, l2_geom.sectors_per_line()),
                mshrs: Mshrs::new(cfg.l2.mshrs_per_slice),
                data_port: BwPort::new(cfg.l2.bandwidth_bytes_per_cycle as u64, cfg.l2.clock_hz),
                alu: BwPort::new(1, cfg.l2.clock_hz),
                noc_in: BwPort::new(cfg.noc.bandwidth_bytes_per_cycle as u64, cfg.noc.clock_hz),
                noc_out: BwPort::new(cfg.noc.bandwidth_bytes_per_cycle as u64, cfg.noc.clock_hz),
            })
            .collect();
        MemSystem {
            l1_geom,
            l2_geom,
            l1_enabled: cfg.l1d.enabled,
            l1_write_policy: cfg.l1d.write_policy,
            l1_write_allocate: cfg.l1d.write_allocate,
            l2_write_back: cfg.l2.write_back,
            fills_l2: cfg.memcpy.fills_l2,
            l2_size_bytes: cfg.l2.size_bytes,
            core_ps,
            l1_hit_ps: cfg.l1d.hit_latency_cycles as Picos * core_ps,
            shared_latency_cycles: cfg.shared_mem.latency_cycles as u64,
            shared_banks: cfg.shared_mem.banks,
            shared_bank_bytes: cfg.shared_mem.bank_bytes,
            noc_latency_ps: cfg.noc.latency_cycles as Picos * cfg.noc_period_ps(),
            l2_hit_ps: cfg.l2.hit_latency_cycles as Picos * cfg.l2_period_ps(),
            l2_atomic_ps: cfg.l2.atomic_latency_cycles as Picos * cfg.l2_period_ps(),
            slices_per_channel: (slices_n / channels).max(1),
            sms,
            slices,
            dram: Dram::new(cfg),
            floor: 0,
            lines: Vec::with_capacity(64),
            groups: Vec::with_capacity(8),
            stats: MemStats::default(),
        }
    }

    /// Performs `req` issued at `now_ps`; returns when its result is available (loads,
    /// atomics) or its data accepted (stores).
    pub fn access(&mut self, now_ps: Picos, req: &MemRequest<'_>) -> Picos {
        let now = now_ps.max(self.floor);
        self.floor = now;
        let sm = (req.sm as usize) % self.sms.len();
        if req.space == Space::Shared {
            return self.shared(now, sm, req);
        }
        self.stats.global_requests += 1;
        if req.lanes.is_empty() {
            return now + self.l1_hit_ps;
        }
        let mut lines = std::mem::take(&mut self.lines);
        coalesce::coalesce(&self.l1_geom, req.lanes, req.width_bytes, &mut lines);
        let use_l1 = req.space == Space::Local || self.l1_enabled;
        let mut done = now + self.l1_hit_ps;
        for la in &lines {
            let t = self.sms[sm]
                .l1_port
                .reserve(now, now, self.l1_geom.line_bytes);
            let d = match req.access {
                Access::Load => self.load_line(now, sm, t, la, use_l1),
                Access::Store => self.store_line(now, sm, t, la, use_l1, req.space),
                Access::Atomic => {
                    let ops = req
                        .lanes
                        .iter()
                        .filter(|&&(_, a)| {
                            a / self.l1_geom.line_bytes == la.line_addr / self.l1_geom.line_bytes
                        })
                        .count() as u64;
                    self.atomic_line(now, sm, t, la, ops)
                }
            };
            done = done.max(d);
        }
        self.lines = lines;
        done
    }

    fn shared(&mut self, now: Picos, sm: usize, req: &MemRequest<'_>) -> Picos {
        self.stats.shared_accesses += 1;
        if req.lanes.is_empty() {
            return now + self.shared_latency_cycles * self.core_ps;
        }
        let passes = coalesce::shared_passes(
            req.lanes,
            req.width_bytes,
            self.shared_banks,
            self.shared_bank_bytes,
        ) as u64;
        self.stats.shared_bank_conflicts += passes - 1;
        let per_pass = self.shared_banks as u64 * self.shared_bank_bytes as u64;
        let start = self.sms[sm]
            .shared_port
            .reserve(now, now, passes * per_pass.max(1));
        start + (self.shared_latency_cycles + passes - 1) * self.core_ps
    }

    fn l1_set(&self, line_addr: u64) -> u64 {
        line_addr / self.l1_geom.line_bytes
    }

    fn load_line(
        &mut self,
        floor: Picos,
        sm: usize,
        t: Picos,
        la: &LineAccess,
        use_l1: bool,
    ) -> Picos {
        let n = popcount(la.sectors);
        if !use_l1 {
            return self.fetch(floor, sm, t, la.line_addr, la.sectors, L2Op::Read);
        }
        self.stats.l1d_accesses += n;
        let set = self.l1_set(la.line_addr);
        let hit_at = t + self.l1_hit_ps;
        let mut done = t;
        let mut missing = la.sectors;
        let l1 = &mut self.sms[sm].l1;
        if let Some(i) = l1.find(set, la.line_addr) {
            l1.touch(i);
            let present = la.sectors & l1.valid(i);
            missing &= !present;
            for s in 0..64 {
                if present & (1 << s) != 0 {
                    let r = l1.ready(i, s);
                    if r <= hit_at {
                        self.stats.l1d_hits += 1;
                        done = done.max(hit_at);
                    } else {
                        self.stats.l1d_misses += 1;
                        self.stats.l1d_pending_hits += 1;
                        done = done.max(r);
                    }
                }
            }
        }
        if missing != 0 {
            self.stats.l1d_misses += popcount(missing);
            let back = self.fetch(floor, sm, t, la.line_addr, missing, L2Op::Read);
            let (i, ev) = self.sms[sm].l1.find_or_allocate(set, la.line_addr);
            if let Some(ev) = ev {
                self.l1_writeback(floor, sm, t, ev);
            }
            self.sms[sm].l1.fill(i, missing, back);
            done = done.max(back);
        }
        done
    }

    /// Sends a miss (or an atomic) for `sectors` of L1 line `line_addr` to L2 at `t`, holding
    /// an L1 MSHR; returns when the data is available to the warp.
    fn fetch(
        &mut self,
        floor: Picos,
        sm: usize,
        t: Picos,
        line_addr: u64,
        sectors: u64,
        op: L2Op,
    ) -> Picos {
        self.stats.l1d_miss_requests += 1;
        let (t0, waited) = self.sms[sm].mshrs.acquire(t);
        if waited {
            self.stats.l1d_mshr_waits += 1;
        }
        let mut groups = std::mem::take(&mut self.groups);
        self.l2_groups(line_addr, sectors, &mut groups);
        let mut back = t0;
        for g in &groups {
            let data = popcount(g.sectors) * self.l2_geom.sector_bytes;
            let req_bytes = match op {
                L2Op::Read => HEADER_BYTES,
                L2Op::Atomic(_) => HEADER_BYTES + data,
            };
            let (slice, set) = self.l2_home(g.line_addr);
            let dep = self.sms[sm].noc_out.reserve(floor, t0, req_bytes);
            self.stats.noc_request_bytes += req_bytes;
            let ta = self.slices[slice]
                .noc_in
                .reserve(floor, dep + self.noc_latency_ps, req_bytes);
            let ready = self.l2_read(floor, slice, set, ta, g.line_addr, g.sectors);
            let ready = match op {
                L2Op::Read => ready,
                L2Op::Atomic(ops) => {
                    self.stats.l2_atomics += 1;
                    let start = self.slices[slice].alu.reserve(floor, ready, ops.max(1));
                    self.l2_store_effect(floor, slice, set, start, g.line_addr, g.sectors);
                    start + self.l2_atomic_ps
                }
            };
            let s = &mut self.slices[slice];
            let td = s.data_port.reserve(floor, ready, data);
            let te = s.noc_out.reserve(floor, td, data + HEADER_BYTES);
            self.stats.noc_reply_bytes += data + HEADER_BYTES;
            let ti =
                self.sms[sm]
                    .noc_in
                    .reserve(floor, te + self.noc_latency_ps, data + HEADER_BYTES);
            back = back.max(ti);
        }
        self.groups = groups;
        let done = back + self.l1_hit_ps;
        self.sms[sm].mshrs.release(done);
        done
    }

    /// The L2 lines and sectors holding `sectors` of L1 line `line_addr`.
    fn l2_groups(&self, line_addr: u64, sectors: u64, out: &mut Vec<LineAccess>) {
        out.clear();
        let sb = self.l1_geom.sector_bytes;
        for s in 0..64u64 {
            if sectors & (1 << s) != 0 {
                add_range(&self.l2_geom, line_addr + s * sb, sb, out);
            }
        }
    }

    /// The slice of an L2 line and the set inside it (the memory-side hash in the module
    /// documentation).
    fn l2_home(&self, line_addr: u64) -> (usize, u64) {
        let a = self.dram.map(line_addr);
        let line_in_channel = a.local / self.l2_geom.line_bytes;
        let spc = self.slices_per_channel;
        let slice = (a.channel as u64 * spc + line_in_channel % spc) as usize % self.slices.len();
        (slice, line_in_channel / spc)
    }

    /// A read of `sectors` of an L2 line arriving at `ta`; returns when the reply can leave.
    fn l2_read(
        &mut self,
        floor: Picos,
        slice: usize,
        set: u64,
        ta: Picos,
        line_addr: u64,
        sectors: u64,
    ) -> Picos {
        self.stats.l2_accesses += popcount(sectors);
        let hit_at = ta + self.l2_hit_ps;
        let mut resp = hit_at;
        let mut missing = sectors;
        let c = &mut self.slices[slice].cache;
        if let Some(i) = c.find(set, line_addr) {
            c.touch(i);
            let present = sectors & c.valid(i);
            missing &= !present;
            for s in 0..64 {
                if present & (1 << s) != 0 {
                    let r = c.ready(i, s);
                    if r > hit_at {
                        self.stats.l2_misses += 1;
                        self.stats.l2_pending_hits += 1;
                        resp = resp.max(r);
                    } else {
                        self.stats.l2_hits += 1;
                    }
                }
            }
        }
        if missing != 0 {
            self.stats.l2_misses += popcount(missing);
            let (tm, waited) = self.slices[slice].mshrs.acquire(ta);
            if waited {
                self.stats.l2_mshr_waits += 1;
            }
            let (i, ev) = self.slices[slice].cache.find_or_allocate(set, line_addr);
            if let Some(ev) = ev {
                self.l2_writeback(floor, tm, ev);
            }
            let bytes = popcount(missing) * self.l2_geom.sector_bytes;
            let a = self.dram.map(line_addr);
            let td = self.dram.access(floor, tm, a, bytes, DramOp::Read);
            self.stats.dram_reads += popcount(missing);
            self.stats.dram_read_bytes += bytes;
            self.stats.dram_bytes += bytes;
            self.slices[slice]
                .cache
                .fill(i, missing, td + self.l2_hit_ps);
            self.slices[slice].mshrs.release(td);
            resp = resp.max(td + self.l2_hit_ps);
        }
        resp
    }

    /// What a write of `sectors` does to the slice's contents at `t` (allocate dirty, or
    /// write through to DRAM).
    fn l2_store_effect(
        &mut self,
        floor: Picos,
        slice: usize,
        set: u64,
        t: Picos,
        line_addr: u64,
        sectors: u64,
    ) {
        if self.l2_write_back {
            let (i, ev) = self.slices[slice].cache.find_or_allocate(set, line_addr);
            if let Some(ev) = ev {
                self.l2_writeback(floor, t, ev);
            }
            let c = &mut self.slices[slice].cache;
            let new = sectors & !c.valid(i);
            c.fill(i, new, t);
            c.mark_dirty(i, sectors);
        } else {
            let bytes = popcount(sectors) * self.l2_geom.sector_bytes;
            let a = self.dram.map(line_addr);
            self.dram.access(floor, t, a, bytes, DramOp::Write);
            self.stats.dram_writes += popcount(sectors);
            self.stats.dram_write_bytes += bytes;
            self.stats.dram_bytes += bytes;
        }
    }

    /// A store of `sectors` of an L2 line arriving at `ta`.
    fn l2_write(
        &mut self,
        floor: Picos,
        slice: usize,
        set: u64,
        ta: Picos,
        line_addr: u64,
        sectors: u64,
    ) {
        let n = popcount(sectors);
        self.stats.l2_accesses += n;
        let present = match self.slices[slice].cache.find(set, line_addr) {
            Some(i) => self.slices[slice].cache.valid(i) & sectors,
            None => 0,
        };
        self.stats.l2_hits += popcount(present);
        self.stats.l2_misses += n - popcount(present);
        self.l2_store_effect(floor, slice, set, ta + self.l2_hit_ps, line_addr, sectors);
    }

    fn l2_writeback(&mut self, floor: Picos, t: Picos, ev: Evicted) {
        let bytes = popcount(ev.dirty) * self.l2_geom.sector_bytes;
        let a = self.dram.map(ev.line_addr);
        self.dram.access(floor, t, a, bytes, DramOp::Write);
        self.stats.l2_writeback_sectors += popcount(ev.dirty);
        self.stats.dram_writes += popcount(ev.dirty);
        self.stats.dram_write_bytes += bytes;
        self.stats.dram_bytes += bytes;
    }

    /// Sends `sectors` of L1 line `line_addr` as a write to L2, leaving SM `sm` at `t`;
    /// returns when the last packet has left the SM.
    fn send_write(
        &mut self,
        floor: Picos,
        sm: usize,
        t: Picos,
        line_addr: u64,
        sectors: u64,
    ) -> Picos {
        let mut groups = std::mem::take(&mut self.groups);
        self.l2_groups(line_addr, sectors, &mut groups);
        let mut left = t;
        for g in &groups {
            let bytes = HEADER_BYTES + popcount(g.sectors) * self.l2_geom.sector_bytes;
            let (slice, set) = self.l2_home(g.line_addr);
            let dep = self.sms[sm].noc_out.reserve(floor, t, bytes);
            self.stats.noc_request_bytes += bytes;
            let ta = self.slices[slice]
                .noc_in
                .reserve(floor, dep + self.noc_latency_ps, bytes);
            self.l2_write(floor, slice, set, ta, g.line_addr, g.sectors);
            left = left.max(dep);
        }
        self.groups = groups;
        left
    }

    fn l1_writeback(&mut self, floor: Picos, sm: usize, t: Picos, ev: Evicted) {
        self.stats.l1d_writeback_sectors += popcount(ev.dirty);
        self.send_write(floor, sm, t, ev.line_addr, ev.dirty);
    }

    fn store_line(
        &mut self,
        floor: Picos,
        sm: usize,
        t: Picos,
        la: &LineAccess,
        use_l1: bool,
        space: Space,
    ) -> Picos {
        let hit_at = t + self.l1_hit_ps;
        if !use_l1 {
            return self
                .send_write(floor, sm, t, la.line_addr, la.sectors)
                .max(hit_at);
        }
        let n = popcount(la.sectors);
        self.stats.l1d_accesses += n;
        let set = self.l1_set(la.line_addr);
        let present = match self.sms[sm].l1.find(set, la.line_addr) {
            Some(i) => self.sms[sm].l1.valid(i) & la.sectors,
            None => 0,
        };
        self.stats.l1d_hits += popcount(present);
        self.stats.l1d_misses += n - popcount(present);
        let write_back = match self.l1_write_policy {
            WritePolicy::WriteBack => true,
            WritePolicy::LocalWriteBack => space == Space::Local,
            WritePolicy::WriteThrough | WritePolicy::WriteEvict => false,
        };
        if write_back {
            let (i, ev) = self.sms[sm].l1.find_or_allocate(set, la.line_addr);
            if let Some(ev) = ev {
                self.l1_writeback(floor, sm, t, ev);
            }
            let l1 = &mut self.sms[sm].l1;
            let new = la.sectors & !l1.valid(i);
            l1.fill(i, new, hit_at);
            l1.mark_dirty(i, la.sectors);
            return hit_at;
        }
        let missing = la.sectors & !present;
        if self.l1_write_policy == WritePolicy::WriteEvict {
            if let Some(i) = self.sms[sm].l1.find(set, la.line_addr) {
                self.sms[sm].l1.invalidate_sectors(i, la.sectors);
            }
        } else if missing != 0 {
            let alloc = match self.l1_write_allocate {
                WriteAllocate::NoAllocate => 0,
                WriteAllocate::FetchOnWrite => missing,
                WriteAllocate::LazyFetchOnRead => missing & self.l1_geom.covered_sectors(la.bytes),
            };
            if alloc != 0 {
                let (i, ev) = self.sms[sm].l1.find_or_allocate(set, la.line_addr);
                if let Some(ev) = ev {
                    self.l1_writeback(floor, sm, t, ev);
                }
                self.sms[sm].l1.fill(i, alloc, hit_at);
            }
        } else if let Some(i) = self.sms[sm].l1.find(set, la.line_addr) {
            self.sms[sm].l1.touch(i);
        }
        self.send_write(floor, sm, t, la.line_addr, la.sectors)
            .max(hit_at)
    }

    fn atomic_line(
        &mut self,
        floor: Picos,
        sm: usize,
        t: Picos,
        la: &LineAccess,
        ops: u64,
    ) -> Picos {
        let set = self.l1_set(la.line_addr);
        if let Some(i) = self.sms[sm].l1.find(set, la.line_addr) {
            self.sms[sm].l1.invalidate_sectors(i, la.sectors);
        }
        self.fetch(floor, sm, t, la.line_addr, la.sectors, L2Op::Atomic(ops))
    }

    /// A host-to-device copy (the trace's `MemcpyHtoD`): with `memcpy.fills_l2`, the copied
    /// lines are left in L2.
    pub fn memcpy_to_device(&mut self, addr: u64, bytes: u64) {
        if !self.fills_l2 || bytes == 0 {
            return;
        }
        let end = addr.saturating_add(bytes);
        let start = if bytes > self.l2_size_bytes {
            (end - self.l2_size_bytes).max(addr)
        } else {
            addr
        };
        let lb = self.l2_geom.line_bytes;
        let mut line = start - start % lb;
        let floor = self.floor;
        let mut one = Vec::with_capacity(1);
        while line < end {
            one.clear();
            let lo = line.max(start);
            let hi = line.saturating_add(lb).min(end);
            add_range(&self.l2_geom, lo, hi - lo, &mut one);
            if let Some(g) = one.first() {
                let (slice, set) = self.l2_home(line);
                let (i, ev) = self.slices[slice].cache.find_or_allocate(set, line);
                if let Some(ev) = ev {
                    self.l2_writeback(floor, floor, ev);
                }
                let c = &mut self.slices[slice].cache;
                c.invalidate_sectors(i, g.sectors);
                c.fill(i, g.sectors, 0);
                self.stats.memcpy_l2_sectors += popcount(g.sectors);
            }
            match line.checked_add(lb) {
                Some(n) => line = n,
                None => break,
            }
        }
    }

    /// Kernel boundary: L1s are not coherent and are invalidated before the next kernel.
    /// Dirty sectors of write-back L1s are written into L2 (untimed).
    pub fn kernel_boundary(&mut self) {
        let floor = self.floor;
        for sm in 0..self.sms.len() {
            let dirty = self.sms[sm].l1.invalidate_all();
            for ev in dirty {
                self.stats.l1d_writeback_sectors += popcount(ev.dirty);
                let mut groups = std::mem::take(&mut self.groups);
                self.l2_groups(ev.line_addr, ev.dirty, &mut groups);
                for g in &groups {
                    let (slice, set) = self.l2_home(g.line_addr);
                    self.l2_write(floor, slice, set, floor, g.line_addr, g.sectors);
                }
                self.groups = groups;
            }
        }
    }

    pub fn stats(&self) -> &MemStats {
        &self.stats
    }
}
