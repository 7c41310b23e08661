//! The memory-side L2 slice (the model is in the module documentation of [`crate::mem`]),
//! and the slice hardware it shares with the LLC slice ([`super::llc_slice`]): tags,
//! MSHRs, data port, atomic ALU and NoC ports, and one lookup.

use super::cache::{Evicted, SectorCache};
use super::coalesce::Geometry;
use super::dram::DramOp;
use super::dram_channel::{From, MemChannel};
use super::port::BwPort;
use super::{popcount, Mshrs};
use crate::config::{section, Check, ConfigError, GpuConfig, Kind, CLOCK_RANGE, MAX_CYCLES};
use crate::counters::unit_counters;
use crate::observe::MemLevel;
use crate::packet::MAX_SECTORS;
use crate::Picos;

section! {
    /// The L2 of a chiplet: memory-side or private (`package.l2`; with `private`, a slice
    /// caches any line and misses go to the `llc`). A load's end-to-end latency on an L2 hit is about
    /// `l1d.hit_latency_cycles + 2 * noc.latency_cycles + l2.hit_latency_cycles`, each in
    /// its own clock, plus queueing.
    pub struct L2Config {
        /// L2 clock. Presets: the simulator config's L2 clock domain.
        clock_hz: u64 = Kind::U64, unit "Hz", None, range CLOCK_RANGE;
        /// L2 slices per chiplet; a multiple of `dram.channels` (with a memory-side L2 each
        /// slice caches the addresses of one channel; a private L2 interleaves lines over
        /// all the chiplet's slices, `l2.slices / dram.channels` beside each channel). Presets: vendor slice count or the simulator config's
        /// memory sub-partitions.
        slices: u32 = Kind::U32, unit "slices", None, range (1, 4096);
        /// Total capacity of all slices of a chiplet. Presets: vendor L2 size or the
        /// simulator config's.
        size_bytes: u64 = Kind::U64, unit "bytes", None, range (1, 1 << 30);
        /// Ways per set of each slice; each slice has `size_bytes / slices / (assoc *
        /// line_bytes)` sets, a power of two. Presets: the simulator config's
        /// `-gpgpu_cache:dl2`.
        assoc: u32 = Kind::U32, unit "ways", None, range (1, 4096);
        /// Line size (power of two). Presets: as `assoc`.
        line_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Sector size, the unit of fills from DRAM; divides `line_bytes`.
        sector_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Cycles a slice takes from a request's arrival to the response's departure on a
        /// hit. Presets: a measured pointer-chase L2 hit minus `l1d.hit_latency_cycles` and
        /// two NoC traversals (derivation in the preset), else the simulator config's
        /// `-gpgpu_l2_rop_latency`.
        hit_latency_cycles: u32 = Kind::U32, unit "L2 cycles", None, range (1, MAX_CYCLES);
        /// Extra cycles an atomic or reduction occupies the slice's ALU beyond a hit
        /// (atomics execute at L2). Presets: the measured atomic latency minus the L2 hit
        /// latency on a TITAN V (ASIM-OUT), the only measured atomic figure.
        atomic_latency_cycles: u32 = Kind::U32, unit "L2 cycles", None, range (1, MAX_CYCLES);
        /// Miss status holding registers per slice. Presets: the simulator config's L2
        /// MSHR entries.
        mshrs_per_slice: u32 = Kind::U32, unit "entries", None, range (1, 65_536);
        /// With `noc.model: crossbar`, the request queue in front of each slice (and with
        /// a private L2 of each LLC slice), in requests: the crossbar's output to the slice
        /// holds as many credits, spends one per request it grants and grants the slice
        /// nothing without one; the slice returns it, a timed message, when it takes the
        /// request (its lookup starts; a miss that finds every MSHR busy stays queued until
        /// it gets one). 0: unbounded. Presets: the simulator config's
        /// `-gpgpu_dram_partition_queues` (its first field, interconnect to L2: 64 in
        /// every Accel-Sim config).
        request_queue_packets: u32 = Kind::U32, unit "requests", Some("64"), range (0, 1_000_000);
        /// With `noc.model: crossbar`, the queue between each slice (and with a private L2
        /// each LLC slice) and its input to the reply crossbar, in packets (replies and
        /// write acknowledgements): the slice holds as many credits, spends one when a
        /// packet leaves it, and the crossbar returns it, a timed message, when it grants
        /// the packet. A packet ready without one waits in the slice, and while one waits
        /// the slice takes no further request (its request queue fills, and then the
        /// crossbar's output to it). 0: unbounded. Presets: the simulator config's
        /// `-gpgpu_dram_partition_queues` (its fourth field, L2 to interconnect: 64 in
        /// every Accel-Sim config).
        reply_queue_packets: u32 = Kind::U32, unit "packets", Some("64"), range (0, 1_000_000);
        /// Bytes a slice can return per L2 cycle. Presets: vendor L2 bandwidth over the
        /// slices, or one 32 B sector per cycle.
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per L2 cycle", None, range (1, 65_536);
        /// `true`: write-back, write-allocate; `false`: write-through to DRAM. Presets: the
        /// simulator config's L2 write policy.
        write_back: bool = Kind::Bool, unit "-", None;
        /// `true`: the slice that performs a store acknowledges it to the SM, and the
        /// store's warp counts it outstanding until then: a fence waits for it and its
        /// CTA does not complete before (GPGPU-Sim's write acknowledgements:
        /// `m_stores_outstanding`, which `membar` and warp completion wait for). `false`:
        /// a store is done when its data has left the SM, and no acknowledgement crosses
        /// the NoC.
        write_acks: bool = Kind::Bool, unit "-", Some("true");
    }
}

impl L2Config {
    /// Rejects impossible values of this section alone (module `config::validate` checks
    /// the rest).
    pub(crate) fn check(&self, v: &Check) -> Result<(), ConfigError> {
        let l2 = self;
        v.clock("l2.clock_hz", l2.clock_hz)?;
        v.nonzero("l2.slices", l2.slices as u64)?;
        v.nonzero("l2.size_bytes", l2.size_bytes)?;
        v.ensure(
            l2.size_bytes.is_multiple_of(l2.slices as u64),
            "l2.size_bytes",
            || {
                format!(
                    "{} bytes do not split evenly among {} slices (l2.slices)",
                    l2.size_bytes, l2.slices
                )
            },
        )?;
        v.cache(
            "l2",
            l2.size_bytes / l2.slices as u64,
            l2.assoc,
            l2.line_bytes,
        )
        .map_err(|e| match e {
            ConfigError::Key { origin, key, msg } if key == "l2.size_bytes" => ConfigError::Key {
                origin,
                key,
                msg: format!("per slice ({} slices): {msg}", l2.slices),
            },
            e => e,
        })?;
        v.sector("l2", l2.sector_bytes, l2.line_bytes)?;
        let sectors = l2.line_bytes / l2.sector_bytes.max(1);
        v.ensure(sectors <= MAX_SECTORS, "l2.sector_bytes", || {
            format!(
                "{} B sectors make {sectors} sectors of a {} B line; a memory packet's sector \
                 mask holds at most {MAX_SECTORS} (raise sector_bytes or lower line_bytes)",
                l2.sector_bytes, l2.line_bytes
            )
        })?;
        v.nonzero("l2.hit_latency_cycles", l2.hit_latency_cycles as u64)?;
        v.nonzero("l2.atomic_latency_cycles", l2.atomic_latency_cycles as u64)?;
        v.nonzero("l2.mshrs_per_slice", l2.mshrs_per_slice as u64)?;
        v.nonzero(
            "l2.bandwidth_bytes_per_cycle",
            l2.bandwidth_bytes_per_cycle as u64,
        )?;
        Ok(())
    }
}

/// The parameters of an L2 slice (`l2`), converted; an LLC slice shares its clock, data
/// port, atomic ALU and line geometry.
#[derive(Clone, Copy, Debug)]
pub struct L2SliceParams {
    pub(crate) geom: Geometry,
    /// `l2.hit_latency_cycles` and `l2.atomic_latency_cycles` in picoseconds.
    pub(crate) hit_ps: Picos,
    pub(crate) atomic_ps: Picos,
    pub(crate) write_back: bool,
    pub(crate) mshrs: u32,
    /// Sets of one slice: `size_bytes / slices / (assoc * line_bytes)`.
    pub(crate) sets: u64,
    pub(crate) assoc: u32,
    /// Of a chiplet's slices together (what a copy can leave in them).
    pub(crate) size_bytes: u64,
    pub(crate) clock_hz: u64,
    pub(crate) bytes_per_cycle: u64,
    /// `package.cache_remote_reads` (a private L2 only).
    pub(crate) cache_remote_reads: bool,
}

impl L2SliceParams {
    pub fn from_config(cfg: &GpuConfig) -> L2SliceParams {
        let l = &cfg.l2;
        let geom = Geometry::new(l.line_bytes, l.sector_bytes);
        let l2_ps = cfg.l2_period_ps();
        L2SliceParams {
            hit_ps: l.hit_latency_cycles as Picos * l2_ps,
            atomic_ps: l.atomic_latency_cycles as Picos * l2_ps,
            write_back: l.write_back,
            mshrs: l.mshrs_per_slice,
            sets: l.size_bytes
                / l.slices.max(1) as u64
                / ((l.assoc as u64).max(1) * geom.line_bytes).max(1),
            geom,
            assoc: l.assoc,
            size_bytes: l.size_bytes,
            clock_hz: l.clock_hz,
            bytes_per_cycle: l.bandwidth_bytes_per_cycle as u64,
            cache_remote_reads: cfg.package.cache_remote_reads,
        }
    }
}

unit_counters! {
    /// The L2 counters of one channel's slices (memory-side or private), in sectors unless
    /// named otherwise: `hits + misses = accesses`.
    pub struct L2SliceStats {
        accesses,
        hits,
        misses,
        /// Sector misses that merged with a fill already in flight (included in misses).
        pending_hits,
        /// Miss requests that found every MSHR of their slice busy and waited.
        mshr_waits,
        /// Dirty sectors written back on eviction: to DRAM (memory-side L2), or to the
        /// home LLC (private L2).
        writeback_sectors,
        /// Warp atomic instructions performed at a memory-side slice (per line touched).
        atomics,
        /// Sectors installed by host-to-device copies.
        memcpy_sectors,
    }
}

/// One cache slice: a memory-side or private L2 slice, or an LLC slice.
#[derive(Clone, Debug)]
pub(super) struct Slice {
    pub(super) cache: SectorCache,
    pub(super) mshrs: Mshrs,
    pub(super) data_port: BwPort,
    pub(super) alu: BwPort,
    pub(super) noc_in: BwPort,
    pub(super) noc_out: BwPort,
}

/// What a slice's lookup of some sectors of a line found.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lookup {
    /// When the present sectors can leave (the hit time, later for sectors still being
    /// filled).
    pub(super) ready: Picos,
    /// The sectors not present.
    pub(super) missing: u64,
    /// The line's way when it is present.
    pub(super) found: Option<usize>,
    /// Present sectors there by the hit time.
    pub(super) hits: u64,
    /// Present sectors still being filled (pending hits).
    pub(super) pending: u64,
}

impl Slice {
    /// A slice of `sets` sets of `assoc` ways with `mshrs` MSHRs, with the L2's clock, data
    /// port and ALU.
    /// A slice of `l2`'s geometry with `sets`, `assoc` and `mshrs`, its NoC ports as
    /// `wiring` declares them.
    pub(super) fn new(
        l2: &L2SliceParams,
        wiring: &crate::gpu::Wiring,
        sets: u64,
        assoc: u32,
        mshrs: u32,
    ) -> Slice {
        Slice {
            cache: SectorCache::new(sets, assoc, l2.geom.sectors_per_line()),
            mshrs: Mshrs::new(mshrs),
            data_port: BwPort::new(l2.bytes_per_cycle, l2.clock_hz),
            alu: BwPort::new(1, l2.clock_hz),
            noc_in: wiring.noc_port(),
            noc_out: wiring.noc_port(),
        }
    }

    /// Looks up `sectors` of line `line` in set `set` for a read whose hits can leave at
    /// `hit_at` (the line, when present, becomes the most recently used).
    #[inline(always)]
    pub(super) fn lookup(&mut self, set: u64, hit_at: Picos, line: u64, sectors: u64) -> Lookup {
        let mut l = Lookup {
            ready: hit_at,
            missing: sectors,
            found: None,
            hits: 0,
            pending: 0,
        };
        let c = &mut self.cache;
        l.found = c.find(set, line);
        if let Some(i) = l.found {
            c.touch(set, i);
            let present = sectors & c.valid(i);
            l.missing &= !present;
            let mut m = present;
            while m != 0 {
                let r = c.ready(i, m.trailing_zeros());
                m &= m - 1;
                if r > hit_at {
                    l.pending += 1;
                    l.ready = l.ready.max(r);
                } else {
                    l.hits += 1;
                }
            }
        }
        l
    }

    /// For a write of `sectors` of line `line` in set `set`: the line's way when present,
    /// and which of the sectors are present.
    #[inline(always)]
    pub(super) fn probe(&self, set: u64, line: u64, sectors: u64) -> (Option<usize>, u64) {
        let found = self.cache.find(set, line);
        let present = found.map_or(0, |i| self.cache.valid(i) & sectors);
        (found, present)
    }
}

impl MemChannel {
    /// Looks up `sectors` of an L2 line arriving at `ta` and counts the accesses: returns
    /// when the present sectors can leave (`ta + l2.hit_latency`, later for sectors still
    /// being filled, which count as pending hits), the missing sectors, and the way when the
    /// line is present.
    #[inline(always)]
    pub(super) fn l2_lookup(
        &mut self,
        slice: usize,
        set: u64,
        ta: Picos,
        line_addr: u64,
        sectors: u64,
    ) -> (Picos, u64, Option<usize>) {
        self.stats.l2.accesses += popcount(sectors);
        let l = self.slices[slice].lookup(set, ta + self.params.l2.hit_ps, line_addr, sectors);
        self.stats.l2.hits += l.hits;
        self.observed(MemLevel::L2, ta, line_addr, sectors, l.hits, false);
        self.stats.l2.misses += l.pending;
        self.stats.l2.pending_hits += l.pending;
        (l.ready, l.missing, l.found)
    }

    /// A read of `sectors` of an L2 line arriving at `ta`; returns when the reply can leave.
    /// Forced inline into `on_packet`, as are `l2_lookup`, `l2_store_effect` and
    /// `send_data` (see `LdStUnit::load_line`).
    #[inline(always)]
    pub(super) fn l2_read(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        ta: Picos,
        line_addr: u64,
        sectors: u64,
    ) -> Picos {
        let l2_hit_ps = self.params.l2.hit_ps;
        let (mut resp, missing, found) = self.l2_lookup(slice, set, ta, line_addr, sectors);
        if missing != 0 {
            self.stats.l2.misses += popcount(missing);
            let from = From::L2(slice);
            let (filled, waited) =
                self.slice_miss(now, from, set, ta, line_addr, missing, found, l2_hit_ps);
            if waited {
                self.stats.l2.mshr_waits += 1;
            }
            resp = resp.max(filled);
        }
        resp
    }

    /// Reads the `missing` sectors of `line` from DRAM into slice `from` (a read miss asked
    /// at `ta`; `found`: the line's way, from the lookup, when present): an MSHR, a way (a
    /// dirty victim is written back), the DRAM burst, the fill. Returns when the sectors can
    /// leave (`hit_ps` after they are there) and whether the miss waited for an MSHR.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn slice_miss(
        &mut self,
        now: Picos,
        from: From,
        set: u64,
        ta: Picos,
        line: u64,
        missing: u64,
        found: Option<usize>,
        hit_ps: Picos,
    ) -> (Picos, bool) {
        let Some(s) = self.slice_mut(from) else {
            return (ta, false);
        };
        let (tm, waited) = s.mshrs.acquire(ta);
        // No tag has changed since the lookup: its way is what a search would find.
        let (i, ev) = s.cache.touch_or_allocate(set, line, found);
        // A miss without an MSHR stays in the request queue until it gets one.
        self.taken = self.taken.max(tm);
        if let Some(ev) = ev {
            self.slice_writeback(now, from, tm, ev);
        }
        let td = self.dram_access(now, tm, line, missing, DramOp::Read);
        if let Some(s) = self.slice_mut(from) {
            s.cache.fill(i, missing, td + hit_ps);
            s.mshrs.release(td);
        }
        (td + hit_ps, waited)
    }

    /// What a write of `sectors` does to the slice's contents at `t` (allocate dirty, or
    /// write through to DRAM); `found` is what `find(set, line_addr)` gives now.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn l2_store_effect(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        t: Picos,
        line_addr: u64,
        sectors: u64,
        found: Option<usize>,
    ) {
        if self.params.l2.write_back {
            let (i, ev) = self.slices[slice]
                .cache
                .touch_or_allocate(set, line_addr, found);
            if let Some(ev) = ev {
                self.l2_writeback(now, t, ev);
            }
            self.slices[slice].cache.write(i, sectors, t);
        } else {
            self.dram_access(now, t, line_addr, sectors, DramOp::Write);
        }
    }

    /// A store of `sectors` of an L2 line arriving at `ta`; returns when it is performed
    /// (`l2.hit_latency_cycles` later: when its acknowledgement can leave).
    pub(super) fn l2_write(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        ta: Picos,
        line_addr: u64,
        sectors: u64,
    ) -> Picos {
        let n = popcount(sectors);
        self.stats.l2.accesses += n;
        let (found, present) = self.slices[slice].probe(set, line_addr, sectors);
        self.stats.l2.hits += popcount(present);
        self.stats.l2.misses += n - popcount(present);
        self.observed(
            MemLevel::L2,
            ta,
            line_addr,
            sectors,
            popcount(present),
            true,
        );
        let t = ta + self.params.l2.hit_ps;
        self.l2_store_effect(now, slice, set, t, line_addr, sectors, found);
        t
    }

    fn l2_writeback(&mut self, now: Picos, t: Picos, ev: Evicted) {
        self.stats.l2.writeback_sectors += popcount(ev.dirty);
        self.dram_access(now, t, ev.line_addr, ev.dirty, DramOp::Write);
    }

    /// Installs `sectors` of `line` in slice `from` clean, data there at `now` (a
    /// host-to-device copy).
    #[inline(always)]
    pub(super) fn slice_install(
        &mut self,
        now: Picos,
        from: From,
        set: u64,
        line: u64,
        sectors: u64,
    ) {
        let Some(s) = self.slice_mut(from) else {
            return;
        };
        let (i, ev) = s.cache.find_or_allocate(set, line);
        s.cache.invalidate_sectors(i, sectors);
        s.cache.fill(i, sectors, now);
        if let Some(ev) = ev {
            self.slice_writeback(now, from, now, ev);
        }
    }

    /// Writes the dirty sectors of `ev`, evicted from slice `from`, to DRAM from `t`.
    #[inline(always)]
    fn slice_writeback(&mut self, now: Picos, from: From, t: Picos, ev: Evicted) {
        match from {
            From::L2(_) => self.l2_writeback(now, t, ev),
            From::Llc => self.llc_writeback(now, t, ev),
        }
    }
}
