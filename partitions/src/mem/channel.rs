//! One DRAM channel with the memory-side L2 slices homed at it (the model is in the module
//! documentation of [`crate::mem`]). The slices and their channel are one unit because the
//! slices' misses and write-backs reach the channel without crossing the NoC.

use std::sync::Arc;

use super::cache::{Evicted, SectorCache};
use super::coalesce::add_range;
use super::dram::{Dram, DramOp};
use super::port::BwPort;
use super::{popcount, MemSpec, MemStats, Mshrs, Net, Packet, HEADER_BYTES};
use crate::config::GpuConfig;
use crate::Picos;

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

/// A packet a channel cannot take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    #[error("channel {channel}: line {line:#x} is homed at channel {home}")]
    NotHome { channel: u32, line: u64, home: u32 },
    #[error("channel {channel}: unexpected packet {pkt:?}")]
    Unexpected { channel: u32, pkt: Packet },
}

/// DRAM channel `channel` (numbered across the package) and its L2 slices.
pub struct MemChannel {
    spec: Arc<MemSpec>,
    channel: u32,
    unit: u32,
    slices: Vec<Slice>,
    dram: Dram,
    stats: MemStats,
}

impl MemChannel {
    pub fn new(cfg: &GpuConfig, spec: Arc<MemSpec>, channel: u32) -> MemChannel {
        let noc = || BwPort::new(spec.noc_bytes_per_cycle, spec.noc_clock_hz);
        let slices = (0..spec.slices_per_channel.d)
            .map(|_| Slice {
                cache: SectorCache::new(
                    spec.l2_sets,
                    spec.l2_assoc,
                    spec.l2_geom.sectors_per_line(),
                ),
                mshrs: Mshrs::new(spec.l2_mshrs),
                data_port: BwPort::new(spec.l2_bytes_per_cycle, spec.l2_clock_hz),
                alu: BwPort::new(1, spec.l2_clock_hz),
                noc_in: noc(),
                noc_out: noc(),
            })
            .collect();
        MemChannel {
            unit: spec.ids.channel(channel),
            channel,
            slices,
            dram: Dram::channel(cfg, channel % spec.ids.channels),
            stats: MemStats::default(),
            spec,
        }
    }

    /// Its package-wide channel index.
    pub fn index(&self) -> u32 {
        self.channel
    }

    pub fn stats(&self) -> &MemStats {
        &self.stats
    }

    /// A packet arrives at `now` (from an SM, or from this chiplet's link interface).
    pub fn on_packet(
        &mut self,
        now: Picos,
        pkt: Packet,
        net: &mut dyn Net,
    ) -> Result<(), ChannelError> {
        let (line, sectors) = match pkt {
            Packet::Read { line, sectors, .. }
            | Packet::Write { line, sectors }
            | Packet::Atomic { line, sectors, .. } => (line, sectors),
            _ => {
                return Err(ChannelError::Unexpected {
                    channel: self.channel,
                    pkt,
                })
            }
        };
        let (home, slice, set) = self.spec.l2_home(line);
        if home != self.channel {
            return Err(ChannelError::NotHome {
                channel: self.channel,
                line,
                home,
            });
        }
        let data = popcount(sectors) * self.spec.l2_geom.sector_bytes;
        match pkt {
            Packet::Read { tag, sm, .. } => {
                let ta = self.slices[slice].noc_in.reserve(now, now, HEADER_BYTES);
                let ready = self.l2_read(now, slice, set, ta, line, sectors);
                self.reply(now, slice, sm, ready, line, sectors, tag, net);
            }
            Packet::Atomic { tag, ops, sm, .. } => {
                let ta = self.slices[slice]
                    .noc_in
                    .reserve(now, now, HEADER_BYTES + data);
                let ready = self.l2_read(now, slice, set, ta, line, sectors);
                self.stats.l2_atomics += 1;
                let start = self.slices[slice]
                    .alu
                    .reserve(now, ready, (ops as u64).max(1));
                self.l2_store_effect(now, slice, set, start, line, sectors);
                let at = start + self.spec.l2_atomic_ps;
                self.reply(now, slice, sm, at, line, sectors, tag, net);
            }
            _ => {
                let ta = self.slices[slice]
                    .noc_in
                    .reserve(now, now, HEADER_BYTES + data);
                self.l2_write(now, slice, set, ta, line, sectors);
            }
        }
        Ok(())
    }

    /// Sends the reply to SM unit `sm` of a request whose data can leave the slice at
    /// `ready` (through this chiplet's link interface when the SM is on another chiplet).
    #[allow(clippy::too_many_arguments)]
    fn reply(
        &mut self,
        now: Picos,
        slice: usize,
        sm: u32,
        ready: Picos,
        line: u64,
        sectors: u64,
        tag: u32,
        net: &mut dyn Net,
    ) {
        let data = popcount(sectors) * self.spec.l2_geom.sector_bytes;
        let s = &mut self.slices[slice];
        let td = s.data_port.reserve(now, ready, data);
        let te = s.noc_out.reserve(now, td, data + HEADER_BYTES);
        self.stats.noc_reply_bytes += data + HEADER_BYTES;
        let pkt = Packet::Reply {
            line,
            sectors,
            tag,
            sm,
        };
        let ids = &self.spec.ids;
        let chiplet = self.channel / ids.channels;
        let dst = if ids.chiplet_of(sm) == chiplet {
            sm
        } else {
            ids.link(chiplet)
        };
        net.send(self.unit, dst, te + self.spec.noc_latency_ps, pkt);
    }

    /// A read of `sectors` of an L2 line arriving at `ta`; returns when the reply can leave.
    fn l2_read(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        ta: Picos,
        line_addr: u64,
        sectors: u64,
    ) -> Picos {
        self.stats.l2_accesses += popcount(sectors);
        let l2_hit_ps = self.spec.l2_hit_ps;
        let hit_at = ta + l2_hit_ps;
        let mut resp = hit_at;
        let mut missing = sectors;
        let c = &mut self.slices[slice].cache;
        if let Some(i) = c.find(set, line_addr) {
            c.touch(i);
            let present = sectors & c.valid(i);
            missing &= !present;
            let mut m = present;
            while m != 0 {
                let r = c.ready(i, m.trailing_zeros());
                m &= m - 1;
                if r > hit_at {
                    self.stats.l2_misses += 1;
                    self.stats.l2_pending_hits += 1;
                    resp = resp.max(r);
                } else {
                    self.stats.l2_hits += 1;
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
                self.l2_writeback(now, tm, ev);
            }
            let bytes = popcount(missing) * self.spec.l2_geom.sector_bytes;
            let a = self.dram.map(self.spec.chiplet_local(line_addr));
            let td = self.dram.access(now, tm, a, bytes, DramOp::Read);
            self.stats.dram_reads += popcount(missing);
            self.stats.dram_read_bytes += bytes;
            self.stats.dram_bytes += bytes;
            self.slices[slice].cache.fill(i, missing, td + l2_hit_ps);
            self.slices[slice].mshrs.release(td);
            resp = resp.max(td + l2_hit_ps);
        }
        resp
    }

    /// What a write of `sectors` does to the slice's contents at `t` (allocate dirty, or
    /// write through to DRAM).
    fn l2_store_effect(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        t: Picos,
        line_addr: u64,
        sectors: u64,
    ) {
        if self.spec.l2_write_back {
            let (i, ev) = self.slices[slice].cache.find_or_allocate(set, line_addr);
            if let Some(ev) = ev {
                self.l2_writeback(now, t, ev);
            }
            let c = &mut self.slices[slice].cache;
            let new = sectors & !c.valid(i);
            c.fill(i, new, t);
            c.mark_dirty(i, sectors);
        } else {
            let bytes = popcount(sectors) * self.spec.l2_geom.sector_bytes;
            let a = self.dram.map(self.spec.chiplet_local(line_addr));
            self.dram.access(now, t, a, bytes, DramOp::Write);
            self.stats.dram_writes += popcount(sectors);
            self.stats.dram_write_bytes += bytes;
            self.stats.dram_bytes += bytes;
        }
    }

    /// A store of `sectors` of an L2 line arriving at `ta`.
    fn l2_write(
        &mut self,
        now: Picos,
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
        let t = ta + self.spec.l2_hit_ps;
        self.l2_store_effect(now, slice, set, t, line_addr, sectors);
    }

    fn l2_writeback(&mut self, now: Picos, t: Picos, ev: Evicted) {
        let bytes = popcount(ev.dirty) * self.spec.l2_geom.sector_bytes;
        let a = self.dram.map(self.spec.chiplet_local(ev.line_addr));
        self.dram.access(now, t, a, bytes, DramOp::Write);
        self.stats.l2_writeback_sectors += popcount(ev.dirty);
        self.stats.dram_writes += popcount(ev.dirty);
        self.stats.dram_write_bytes += bytes;
        self.stats.dram_bytes += bytes;
    }

    /// A host-to-device copy of `[addr, addr + bytes)` reached the GPU at `now`: with
    /// `memcpy.fills_l2`, the copied lines homed here are left in L2 (only the last
    /// `l2.size_bytes` of the copy, what LRU would leave), clean.
    pub fn memcpy(&mut self, now: Picos, addr: u64, bytes: u64) {
        if !self.spec.fills_l2 || bytes == 0 {
            return;
        }
        let end = addr.saturating_add(bytes);
        // Every chiplet's L2 together (each memory-side L2 holds only its chiplet's lines).
        let l2_bytes = self.spec.l2_size_bytes * self.spec.ids.chiplets as u64;
        let start = if bytes > l2_bytes {
            (end - l2_bytes).max(addr)
        } else {
            addr
        };
        let lb = self.spec.l2_geom.line_bytes;
        let map = self.spec.dram_map;
        let (n, il) = (map.channels.d, map.interleave.d);
        if self.spec.ids.chiplets > 1 {
            // Visit only the pages homed on this channel's chiplet.
            let chiplet = self.channel / self.spec.ids.channels;
            let page = self.spec.home.page_bytes();
            let mut p = start - start % page;
            while p < end {
                if self.spec.home.locate(p).0 == chiplet {
                    let hi = p.saturating_add(page).min(end);
                    self.memcpy_lines(now, p.max(start), hi);
                }
                match p.checked_add(page) {
                    Some(q) => p = q,
                    None => break,
                }
            }
        } else if lb <= il && il.is_multiple_of(lb) {
            // Whole interleave chunks live in one channel: visit only this channel's.
            let first = start / il;
            let c = self.channel as u64;
            let mut chunk = first + (c + n - first % n) % n;
            while let Some(lo) = chunk.checked_mul(il).filter(|&a| a < end) {
                let hi = lo.saturating_add(il).min(end);
                self.memcpy_lines(now, lo.max(start), hi);
                match chunk.checked_add(n) {
                    Some(k) => chunk = k,
                    None => break,
                }
            }
        } else {
            self.memcpy_lines(now, start, end);
        }
    }

    /// Installs the lines of `[start, end)` homed at this channel (clean, data there at
    /// `now`).
    fn memcpy_lines(&mut self, now: Picos, start: u64, end: u64) {
        let geom = self.spec.l2_geom;
        let lb = geom.line_bytes;
        let mut line = start - start % lb;
        let mut one = Vec::with_capacity(1);
        while line < end {
            let (home, slice, set) = self.spec.l2_home(line);
            if home == self.channel {
                one.clear();
                let lo = line.max(start);
                let hi = line.saturating_add(lb).min(end);
                add_range(&geom, lo, hi - lo, &mut one);
                if let Some(g) = one.first() {
                    let (i, ev) = self.slices[slice].cache.find_or_allocate(set, line);
                    if let Some(ev) = ev {
                        self.l2_writeback(now, now, ev);
                    }
                    let c = &mut self.slices[slice].cache;
                    c.invalidate_sectors(i, g.sectors);
                    c.fill(i, g.sectors, now);
                    self.stats.memcpy_l2_sectors += popcount(g.sectors);
                }
            }
            match line.checked_add(lb) {
                Some(n) => line = n,
                None => break,
            }
        }
    }
}
