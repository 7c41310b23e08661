//! The LLC slice (`package.l2: private`, the model is in the module documentation of
//! [`crate::mem`]): one per DRAM channel, in the channel's unit, caching the lines homed at
//! the channel; it serves the private L2 slices' reads and writes and performs atomics. Its
//! hardware and lookup are an L2 slice's ([`super::l2_slice::Slice`]).

use super::cache::Evicted;
use super::coalesce::add_range;
use super::dram::DramOp;
use super::dram_channel::{ChannelError, From, MemChannel};
use super::{popcount, Ctx, Net, Response, HEADER_BYTES};
use crate::config::{section, GpuConfig, Kind, MAX_CYCLES};
use crate::counters::unit_counters;
use crate::observe::MemLevel;
use crate::Picos;

section! {
    /// The last-level cache of a chiplet with `package.l2: private` (ignored with
    /// `memory_side`): one slice per DRAM channel, caching the lines homed at that channel
    /// (L2 misses, remote and write-through stores, L2 write-backs and atomics of every
    /// chiplet come here), sectored like the L2 (`l2.sector_bytes`), LRU, write-back to its
    /// DRAM channel. Its clock, data-port bandwidth and atomic ALU are the L2's
    /// (`l2.clock_hz`, `l2.bandwidth_bytes_per_cycle`, `l2.atomic_latency_cycles`). Every key
    /// has a default, so memory-side configs leave the section out.
    pub struct LlcConfig {
        /// Capacity of a chiplet's LLC slices together; each slice has `size_bytes /
        /// dram.channels / (assoc * line_bytes)` sets, a power of two. Presets: dalmia-2023
        /// Table 5.1 "L3 Size 16 MB" over the chiplets.
        size_bytes: u64 = Kind::U64, unit "bytes", Some("4194304"), range (1, 1 << 30);
        /// Ways per set. Presets: Table 5.1 "16 way".
        assoc: u32 = Kind::U32, unit "ways", Some("16"), range (1, 4096);
        /// Line size; must equal `l2.line_bytes` (an L2 line is filled from one LLC line).
        /// Presets: Table 5.1 "64B line".
        line_bytes: u32 = Kind::U32, unit "bytes", Some("128"), range (1, 4096);
        /// Cycles from a request's arrival at the slice to its response's departure on a
        /// hit (L2 clock). Presets: Table 5.1 "L3 Latency 330 cycles" less the L2 lookup and
        /// the NoC traversals (derivation in the preset).
        hit_latency_cycles: u32 = Kind::U32, unit "L2 cycles", Some("100"), range (1, MAX_CYCLES);
        /// Miss status holding registers per LLC slice (misses to its DRAM channel in
        /// flight). Presets: assumed equal to `l2.mshrs_per_slice`.
        mshrs_per_slice: u32 = Kind::U32, unit "entries", Some("64"), range (1, 65_536);
    }
}

/// The parameters of an LLC slice (`llc`), converted (its clock, ports, ALU and line are
/// the L2's, [`super::l2_slice::L2SliceParams`]).
#[derive(Clone, Copy, Debug)]
pub struct LlcSliceParams {
    /// `llc.hit_latency_cycles` in picoseconds (L2 clock).
    pub(crate) hit_ps: Picos,
    /// Sets of one slice: `size_bytes / dram.channels / (assoc * line_bytes)`.
    pub(crate) sets: u64,
    pub(crate) assoc: u32,
    pub(crate) mshrs: u32,
    /// Of a chiplet's slices together.
    pub(crate) size_bytes: u64,
}

impl LlcSliceParams {
    pub fn from_config(cfg: &GpuConfig) -> LlcSliceParams {
        let l = &cfg.llc;
        // The slices' lines are the L2's (validation makes `llc.line_bytes` equal).
        let line = (cfg.l2.line_bytes as u64).max(1).next_power_of_two();
        LlcSliceParams {
            hit_ps: l.hit_latency_cycles as Picos * cfg.l2_period_ps(),
            sets: l.size_bytes
                / cfg.dram.channels.max(1) as u64
                / ((l.assoc as u64).max(1) * line).max(1),
            assoc: l.assoc,
            mshrs: l.mshrs_per_slice,
            size_bytes: l.size_bytes,
        }
    }
}

unit_counters! {
    /// The counters of one LLC slice (`package.l2: private`), in sectors unless named
    /// otherwise: private L2 misses, write-through and written-back stores, atomics;
    /// `hits + misses = accesses`.
    pub struct LlcSliceStats {
        accesses,
        hits,
        misses,
        /// Dirty sectors written back to DRAM.
        writeback_sectors,
        /// Sectors installed by host-to-device copies.
        memcpy_sectors,
        /// Warp atomic instructions performed here (per line touched).
        atomics,
    }
}

impl MemChannel {
    /// The LLC set of `line` when this channel is its home, else the error naming the home.
    pub(super) fn llc_set_here(&self, line: u64) -> Result<u64, ChannelError> {
        let (home, set) = self.map.llc_home(line);
        if home != self.channel {
            return Err(ChannelError::NotHome {
                channel: self.channel,
                line,
                home,
            });
        }
        Ok(set)
    }

    /// An atomic of `ops` lane operations on `sectors` of `line` from SM unit `sm`,
    /// performed at this LLC slice as at a memory-side L2 slice.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn llc_atomic(
        &mut self,
        now: Picos,
        set: u64,
        line: u64,
        sectors: u64,
        ops: u8,
    ) -> Picos {
        let data = popcount(sectors) * self.params.l2.geom.sector_bytes;
        let ta = self.llc_port_in(now, HEADER_BYTES + data);
        let ready = self.llc_read(now, set, ta, line, sectors);
        self.stats.llc.atomics += 1;
        let start = match self.llc.as_mut() {
            Some(l) => l.alu.reserve(now, ready, (ops as u64).max(1)),
            None => ready,
        };
        self.llc_store_effect(now, set, start, line, sectors);
        start + self.params.l2.atomic_ps
    }

    /// A private L2 slice's read of `sectors` of `line` for `ctx` (the reply goes to slice
    /// `tag` of unit `unit`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn llc_read_request(
        &mut self,
        now: Picos,
        set: u64,
        line: u64,
        sectors: u64,
        tag: u32,
        unit: u32,
        ctx: Ctx,
        net: &mut dyn Net,
    ) {
        let ta = self.llc_port_in(now, HEADER_BYTES);
        let ready = self.llc_read(now, set, ta, line, sectors);
        let data = popcount(sectors) * self.params.l2.geom.sector_bytes;
        let pkt = Response::LlcReply {
            line,
            sectors,
            tag,
            unit,
            ctx,
        };
        self.send_data(now, From::Llc, ready, data, unit, pkt.into(), net);
    }

    /// A private L2 slice's write of `sectors` of `line` (a write-through store or a
    /// write-back).
    pub(super) fn llc_write(&mut self, now: Picos, set: u64, line: u64, sectors: u64) {
        let data = popcount(sectors) * self.params.l2.geom.sector_bytes;
        let ta = self.llc_port_in(now, HEADER_BYTES + data);
        self.stats.llc.accesses += popcount(sectors);
        let present = self
            .llc
            .as_ref()
            .map_or(0, |l| l.probe(set, line, sectors).1);
        self.stats.llc.hits += popcount(present);
        self.stats.llc.misses += popcount(sectors & !present);
        self.observed(MemLevel::Llc, ta, line, sectors, popcount(present), true);
        let t = ta + self.params.llc.hit_ps;
        self.llc_store_effect(now, set, t, line, sectors);
    }

    /// When a request of `bytes` arriving at `now` is in at the LLC slice.
    fn llc_port_in(&mut self, now: Picos, bytes: u64) -> Picos {
        match self.llc.as_mut() {
            Some(l) => l.noc_in.reserve(now, now, bytes),
            None => now,
        }
    }

    /// A read of `sectors` of `line` at the LLC slice arriving at `ta` (as `l2_read` at a
    /// memory-side slice); returns when the data can leave.
    fn llc_read(&mut self, now: Picos, set: u64, ta: Picos, line: u64, sectors: u64) -> Picos {
        self.stats.llc.accesses += popcount(sectors);
        let hit_ps = self.params.llc.hit_ps;
        let hit_at = ta + hit_ps;
        let Some(l) = self.llc.as_mut() else {
            return hit_at;
        };
        let lk = l.lookup(set, hit_at, line, sectors);
        self.observed(MemLevel::Llc, ta, line, sectors, lk.hits, false);
        self.stats.llc.hits += lk.hits;
        self.stats.llc.misses += lk.pending;
        let (mut resp, missing) = (lk.ready, lk.missing);
        if missing != 0 {
            self.stats.llc.misses += popcount(missing);
            let (filled, _) =
                self.slice_miss(now, From::Llc, set, ta, line, missing, lk.found, hit_ps);
            resp = resp.max(filled);
        }
        resp
    }

    /// A write of `sectors` of `line` into the LLC slice at `t` (allocated dirty, no fetch).
    fn llc_store_effect(&mut self, now: Picos, set: u64, t: Picos, line: u64, sectors: u64) {
        let Some(l) = self.llc.as_mut() else { return };
        let (i, ev) = l.cache.find_or_allocate(set, line);
        l.cache.write(i, sectors, t);
        if let Some(ev) = ev {
            self.llc_writeback(now, t, ev);
        }
    }

    pub(super) fn llc_writeback(&mut self, now: Picos, t: Picos, ev: Evicted) {
        self.stats.llc.writeback_sectors += popcount(ev.dirty);
        self.dram_access(now, t, ev.line_addr, ev.dirty, DramOp::Write);
    }

    /// Installs the part of `[start, end)` in LLC line `line` (homed here) clean, data there
    /// at `now` (a host-to-device copy with a private L2).
    pub(super) fn memcpy_llc_line(
        &mut self,
        now: Picos,
        line: u64,
        set: u64,
        start: u64,
        end: u64,
    ) {
        let geom = self.params.l2.geom;
        let mut one = Vec::with_capacity(1);
        let lo = line.max(start);
        let hi = line.saturating_add(geom.line_bytes).min(end);
        add_range(&geom, lo, hi - lo, &mut one);
        let Some(g) = one.first() else { return };
        if self.llc.is_none() {
            return;
        }
        self.slice_install(now, From::Llc, set, line, g.sectors);
        self.stats.llc.memcpy_sectors += popcount(g.sectors);
    }
}
