//! One DRAM channel with the memory-side L2 slices homed at it (the model is in the module
//! documentation of [`crate::mem`]). The slices and their channel are one unit because the
//! slices' misses and write-backs reach the channel without crossing the NoC.
//!
//! With `package.l2: private` the unit holds instead some of its chiplet's private L2
//! slices (caching any line, [`MemSpec::private_slot`]), the LLC slice homed at the channel
//! ([`MemSpec::llc_home`]) and the channel; an L2 slice reaches an LLC slice, even its own
//! unit's, only by packets over the NoC (and the links).

use std::collections::{BTreeMap, VecDeque};
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

/// An SM request waiting at a private L2 slice for sectors in flight from the LLC.
#[derive(Clone, Copy, Debug)]
struct Waiter {
    sm: u32,
    tag: u32,
    /// The sectors it asked for (its reply carries them all).
    sectors: u64,
    /// The sectors still to come.
    need: u64,
    /// When the sectors it has so far are usable.
    ready: Picos,
}

/// A line with LLC reads in flight: one MSHR of a private L2 slice.
#[derive(Clone, Debug)]
struct Pending {
    set: u64,
    /// Sectors requested and not yet back.
    requested: u64,
    waiters: Vec<Waiter>,
}

/// A miss waiting for an MSHR of a private L2 slice.
#[derive(Clone, Copy, Debug)]
struct Queued {
    line: u64,
    set: u64,
    waiter: Waiter,
}

/// The private-L2 state of one slice (`package.l2: private`).
#[derive(Clone, Debug)]
struct PrivSlice {
    /// By line: its MSHR (ordered map: nothing here may depend on a hash seed).
    pending: BTreeMap<u64, Pending>,
    /// Misses waiting for an MSHR, oldest first.
    queue: VecDeque<Queued>,
    /// By way: the sectors a kernel-boundary flush invalidated while the line kept its
    /// way (a later read miss on them is a lost inter-kernel hit).
    flushed: Vec<u64>,
}

/// Which ports of the unit a packet leaves by.
#[derive(Clone, Copy, Debug)]
enum From {
    L2(usize),
    Llc,
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
    /// With a private L2: the LLC slice homed at this channel, and by L2 slice its MSHRs.
    llc: Option<Slice>,
    private: Vec<PrivSlice>,
    /// Host-side memo, not simulated state: the homes [`MemChannel::prefetch`] computed for
    /// the packets about to be taken, in order, so that [`MemChannel::on_packet`] does not
    /// compute them again (a home is a function of the line alone: the line is checked).
    homes: VecDeque<(u64, (u32, usize, u64))>,
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
            .collect::<Vec<Slice>>();
        let (llc, private) = if spec.private {
            let llc = Slice {
                cache: SectorCache::new(
                    spec.llc_sets,
                    spec.llc_assoc,
                    spec.l2_geom.sectors_per_line(),
                ),
                mshrs: Mshrs::new(spec.llc_mshrs),
                data_port: BwPort::new(spec.l2_bytes_per_cycle, spec.l2_clock_hz),
                alu: BwPort::new(1, spec.l2_clock_hz),
                noc_in: noc(),
                noc_out: noc(),
            };
            let private = slices
                .iter()
                .map(|s| PrivSlice {
                    pending: BTreeMap::new(),
                    queue: VecDeque::new(),
                    flushed: vec![0; s.cache.ways()],
                })
                .collect();
            (Some(llc), private)
        } else {
            (None, Vec::new())
        };
        MemChannel {
            unit: spec.ids.channel(channel),
            channel,
            slices,
            dram: Dram::channel(cfg, channel % spec.ids.channels),
            stats: MemStats::default(),
            llc,
            private,
            spec,
            homes: VecDeque::new(),
        }
    }

    /// Its chiplet.
    fn chiplet(&self) -> u32 {
        self.spec.ids.chiplet_of_channel(self.channel)
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
        if self.spec.private {
            return self.on_packet_private(now, pkt, net);
        }
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
        let (home, slice, set) = match self.homes.pop_front() {
            Some((l, h)) if l == line => h,
            _ => {
                self.homes.clear();
                self.spec.l2_home(line)
            }
        };
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
                let found = self.slices[slice].cache.find(set, line);
                self.l2_store_effect(now, slice, set, start, line, sectors, found);
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

    /// Starts loading, into the host's caches, the L2 state that [`MemChannel::on_packet`]
    /// will read first for `pkt`: the set and the victim way of its line's slice, and the
    /// slice's MSHRs (called for the packets a visit is about to take, so the misses overlap;
    /// results are unchanged).
    pub fn prefetch(&mut self, pkt: &Packet) {
        if self.spec.private {
            return;
        }
        if let Packet::Read { line, .. }
        | Packet::Write { line, .. }
        | Packet::Atomic { line, .. } = *pkt
        {
            let h = self.spec.l2_home(line);
            self.homes.push_back((line, h));
            let (home, slice, set) = h;
            if let (true, Some(s)) = (home == self.channel, self.slices.get(slice)) {
                s.cache.prefetch(set);
                s.mshrs.prefetch();
            }
        }
    }

    /// Sends the reply to SM unit `sm` of a request whose data can leave the slice at
    /// `ready` (through this chiplet's link interface when the SM is on another chiplet).
    /// Forced inline, as is `dram_access`: once per request, and their calls were not
    /// inlined (triad n=524,288: with the ones below, 1.5% fewer host instructions).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
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
        self.stats.noc_reply_bytes += data + HEADER_BYTES;
        let pkt = Packet::Reply {
            line,
            sectors,
            tag,
            sm,
        };
        self.send_data(now, From::L2(slice), ready, data, sm, pkt, net);
    }

    /// Sends `pkt`, carrying `data` bytes that are ready at `ready`, through the data port
    /// and NoC egress of `from` to unit `dst` (through this chiplet's link interface when
    /// `dst` is on another chiplet).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn send_data(
        &mut self,
        now: Picos,
        from: From,
        ready: Picos,
        data: u64,
        dst: u32,
        pkt: Packet,
        net: &mut dyn Net,
    ) {
        let s = match from {
            From::L2(i) => &mut self.slices[i],
            From::Llc => match self.llc.as_mut() {
                Some(l) => l,
                None => return,
            },
        };
        let td = s.data_port.reserve(now, ready, data);
        let te = s.noc_out.reserve(now, td, data + HEADER_BYTES);
        let ids = &self.spec.ids;
        let chiplet = ids.chiplet_of_channel(self.channel);
        let dst = if ids.chiplet_of(dst) == chiplet {
            dst
        } else {
            ids.link(chiplet)
        };
        net.send(self.unit, dst, te + self.spec.noc_latency_ps, pkt);
    }

    /// Looks up `sectors` of an L2 line arriving at `ta` and counts the accesses: returns
    /// when the present sectors can leave (`ta + l2.hit_latency`, later for sectors still
    /// being filled, which count as pending hits), the missing sectors, and the way when the
    /// line is present.
    #[inline(always)]
    fn l2_lookup(
        &mut self,
        slice: usize,
        set: u64,
        ta: Picos,
        line_addr: u64,
        sectors: u64,
    ) -> (Picos, u64, Option<usize>) {
        self.stats.l2_accesses += popcount(sectors);
        let hit_at = ta + self.spec.l2_hit_ps;
        let mut resp = hit_at;
        let mut missing = sectors;
        let c = &mut self.slices[slice].cache;
        let found = c.find(set, line_addr);
        if let Some(i) = found {
            c.touch(set, i);
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
        (resp, missing, found)
    }

    /// A read of `sectors` of an L2 line arriving at `ta`; returns when the reply can leave.
    /// Forced inline into `on_packet`, as are `l2_lookup`, `l2_store_effect` and
    /// `send_data` (see `LdStUnit::load_line`).
    #[inline(always)]
    fn l2_read(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        ta: Picos,
        line_addr: u64,
        sectors: u64,
    ) -> Picos {
        let l2_hit_ps = self.spec.l2_hit_ps;
        let (mut resp, missing, found) = self.l2_lookup(slice, set, ta, line_addr, sectors);
        if missing != 0 {
            self.stats.l2_misses += popcount(missing);
            let (tm, waited) = self.slices[slice].mshrs.acquire(ta);
            if waited {
                self.stats.l2_mshr_waits += 1;
            }
            // No tag has changed since the lookup: its way is what a search would find.
            let (i, ev) = self.slices[slice]
                .cache
                .touch_or_allocate(set, line_addr, found);
            if let Some(ev) = ev {
                self.l2_writeback(now, tm, ev);
            }
            let td = self.dram_access(now, tm, line_addr, missing, DramOp::Read);
            self.slices[slice].cache.fill(i, missing, td + l2_hit_ps);
            self.slices[slice].mshrs.release(td);
            resp = resp.max(td + l2_hit_ps);
        }
        resp
    }

    /// What a write of `sectors` does to the slice's contents at `t` (allocate dirty, or
    /// write through to DRAM); `found` is what `find(set, line_addr)` gives now.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn l2_store_effect(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        t: Picos,
        line_addr: u64,
        sectors: u64,
        found: Option<usize>,
    ) {
        if self.spec.l2_write_back {
            let (i, ev) = self.slices[slice]
                .cache
                .touch_or_allocate(set, line_addr, found);
            if let Some(ev) = ev {
                self.l2_writeback(now, t, ev);
            }
            let c = &mut self.slices[slice].cache;
            let new = sectors & !c.valid(i);
            c.fill(i, new, t);
            c.mark_dirty(i, sectors);
        } else {
            self.dram_access(now, t, line_addr, sectors, DramOp::Write);
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
        let found = self.slices[slice].cache.find(set, line_addr);
        let present = match found {
            Some(i) => self.slices[slice].cache.valid(i) & sectors,
            None => 0,
        };
        self.stats.l2_hits += popcount(present);
        self.stats.l2_misses += n - popcount(present);
        let t = ta + self.spec.l2_hit_ps;
        self.l2_store_effect(now, slice, set, t, line_addr, sectors, found);
    }

    fn l2_writeback(&mut self, now: Picos, t: Picos, ev: Evicted) {
        self.stats.l2_writeback_sectors += popcount(ev.dirty);
        self.dram_access(now, t, ev.line_addr, ev.dirty, DramOp::Write);
    }

    /// Reads or writes `sectors` of `line` in this channel's DRAM from `t` (counted);
    /// returns when the access is done.
    #[inline(always)]
    fn dram_access(&mut self, now: Picos, t: Picos, line: u64, sectors: u64, op: DramOp) -> Picos {
        let bytes = popcount(sectors) * self.spec.l2_geom.sector_bytes;
        let a = self.dram.map(self.spec.chiplet_local(line));
        let done = self.dram.access(now, t, a, bytes, op);
        match op {
            DramOp::Read => {
                self.stats.dram_reads += popcount(sectors);
                self.stats.dram_read_bytes += bytes;
            }
            DramOp::Write => {
                self.stats.dram_writes += popcount(sectors);
                self.stats.dram_write_bytes += bytes;
            }
        }
        self.stats.dram_bytes += bytes;
        done
    }

    /// A host-to-device copy of `[addr, addr + bytes)` reached the GPU at `now`: with
    /// `memcpy.fills_l2`, the copied lines homed here are left in L2 (only the last
    /// `l2.size_bytes` of the copy, what LRU would leave), clean. With a private L2 they are
    /// left in the LLC instead (the last `llc.size_bytes` per chiplet): the copy arrives
    /// from the host at the lines' homes, so the private L2s start every run cold.
    pub fn memcpy(&mut self, now: Picos, addr: u64, bytes: u64) {
        if !self.spec.fills_l2 || bytes == 0 {
            return;
        }
        let end = addr.saturating_add(bytes);
        // Every chiplet's L2 together (each memory-side L2 holds only its chiplet's lines),
        // or every chiplet's LLC.
        let per_chiplet = if self.spec.private {
            self.spec.llc_size_bytes
        } else {
            self.spec.l2_size_bytes
        };
        let l2_bytes = per_chiplet * self.spec.ids.gpu_chiplets as u64;
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
            let chiplet = self.chiplet();
            let page = self.spec.home.page_bytes();
            let mut p = start - start % page;
            while p < end {
                if self.spec.locate(p).0 == chiplet {
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
        while line < end {
            if self.spec.private {
                let (home, set) = self.spec.llc_home(line);
                if home == self.channel {
                    self.memcpy_llc_line(now, line, set, start, end);
                }
                match line.checked_add(lb) {
                    Some(n) => line = n,
                    None => break,
                }
                continue;
            }
            let (home, slice, set) = self.spec.l2_home(line);
            let lo = line.max(start);
            let hi = line.saturating_add(lb).min(end);
            // (`hi == lo` only for a copy saturated at the top of the address space, which
            // `add_range` found empty.)
            if home == self.channel && hi > lo {
                // The part of the copy in this line (what `add_range` would give, without
                // a vector per chunk: this runs for every copied line).
                let sectors = geom.range_sectors(lo - line, hi - line);
                let (i, ev) = self.slices[slice].cache.find_or_allocate(set, line);
                if let Some(ev) = ev {
                    self.l2_writeback(now, now, ev);
                }
                let c = &mut self.slices[slice].cache;
                c.invalidate_sectors(i, sectors);
                c.fill(i, sectors, now);
                self.stats.memcpy_l2_sectors += popcount(sectors);
            }
            match line.checked_add(lb) {
                Some(n) => line = n,
                None => break,
            }
        }
    }
}

/// `package.l2: private`: the private L2 slices, the LLC slice and the kernel-boundary
/// flush (the model is in the module documentation of [`crate::mem`]).
impl MemChannel {
    /// The private L2 slice and set of `line` when this channel holds them (for this
    /// chiplet's SMs), else the error naming the channel that does.
    fn private_slot_here(&self, line: u64) -> Result<(usize, u64), ChannelError> {
        let (ch, slice, set) = self.spec.private_slot(self.chiplet(), line);
        if ch != self.channel {
            return Err(ChannelError::NotHome {
                channel: self.channel,
                line,
                home: ch,
            });
        }
        Ok((slice, set))
    }

    /// The LLC set of `line` when this channel is its home, else the error naming the home.
    fn llc_set_here(&self, line: u64) -> Result<u64, ChannelError> {
        let (home, set) = self.spec.llc_home(line);
        if home != self.channel {
            return Err(ChannelError::NotHome {
                channel: self.channel,
                line,
                home,
            });
        }
        Ok(set)
    }

    fn on_packet_private(
        &mut self,
        now: Picos,
        pkt: Packet,
        net: &mut dyn Net,
    ) -> Result<(), ChannelError> {
        match pkt {
            Packet::Read {
                line,
                sectors,
                tag,
                sm,
            } => {
                let (slice, set) = self.private_slot_here(line)?;
                self.private_read(now, slice, set, line, sectors, sm, tag, net);
            }
            Packet::Write { line, sectors } => {
                let (slice, set) = self.private_slot_here(line)?;
                self.private_write(now, slice, set, line, sectors, net);
            }
            Packet::Atomic {
                line,
                sectors,
                tag,
                ops,
                sm,
            } => {
                // Performed at the home LLC slice, bypassing the private L2s.
                let set = self.llc_set_here(line)?;
                let data = popcount(sectors) * self.spec.l2_geom.sector_bytes;
                let ta = self.llc_port_in(now, HEADER_BYTES + data);
                let ready = self.llc_read(now, set, ta, line, sectors);
                self.stats.l2_atomics += 1;
                let start = match self.llc.as_mut() {
                    Some(l) => l.alu.reserve(now, ready, (ops as u64).max(1)),
                    None => ready,
                };
                self.llc_store_effect(now, set, start, line, sectors);
                let at = start + self.spec.l2_atomic_ps;
                self.stats.noc_reply_bytes += data + HEADER_BYTES;
                let pkt = Packet::Reply {
                    line,
                    sectors,
                    tag,
                    sm,
                };
                self.send_data(now, From::Llc, at, data, sm, pkt, net);
            }
            Packet::LlcRead {
                line,
                sectors,
                tag,
                unit,
            } => {
                let set = self.llc_set_here(line)?;
                let ta = self.llc_port_in(now, HEADER_BYTES);
                let ready = self.llc_read(now, set, ta, line, sectors);
                let data = popcount(sectors) * self.spec.l2_geom.sector_bytes;
                let pkt = Packet::LlcReply {
                    line,
                    sectors,
                    tag,
                    unit,
                };
                self.send_data(now, From::Llc, ready, data, unit, pkt, net);
            }
            Packet::LlcWrite { line, sectors } => {
                let set = self.llc_set_here(line)?;
                let data = popcount(sectors) * self.spec.l2_geom.sector_bytes;
                let ta = self.llc_port_in(now, HEADER_BYTES + data);
                self.stats.llc_accesses += popcount(sectors);
                let present = self.llc.as_ref().map_or(0, |l| {
                    l.cache
                        .find(set, line)
                        .map_or(0, |i| l.cache.valid(i) & sectors)
                });
                self.stats.llc_hits += popcount(present);
                self.stats.llc_misses += popcount(sectors & !present);
                let t = ta + self.spec.llc_hit_ps;
                self.llc_store_effect(now, set, t, line, sectors);
            }
            Packet::LlcReply {
                line,
                sectors,
                tag,
                unit,
            } if unit == self.unit && (tag as usize) < self.slices.len() => {
                if !self.private_fill(now, tag as usize, line, sectors, net) {
                    return Err(ChannelError::Unexpected {
                        channel: self.channel,
                        pkt,
                    });
                }
            }
            _ => {
                return Err(ChannelError::Unexpected {
                    channel: self.channel,
                    pkt,
                })
            }
        }
        Ok(())
    }

    /// A read of `sectors` of `line` from SM unit `sm` at private L2 slice `slice`.
    #[allow(clippy::too_many_arguments)]
    fn private_read(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        line: u64,
        sectors: u64,
        sm: u32,
        tag: u32,
        net: &mut dyn Net,
    ) {
        let ta = self.slices[slice].noc_in.reserve(now, now, HEADER_BYTES);
        let (resp, missing, found) = self.l2_lookup(slice, set, ta, line, sectors);
        if let Some(i) = found {
            let flushed = &mut self.private[slice].flushed[i];
            let lost = missing & *flushed;
            if lost != 0 {
                self.stats.l2_flush_lost_hits += popcount(lost);
                *flushed &= !lost;
            }
        }
        if missing == 0 {
            self.reply(now, slice, sm, resp, line, sectors, tag, net);
            return;
        }
        self.stats.l2_misses += popcount(missing);
        let w = Waiter {
            sm,
            tag,
            sectors,
            need: missing,
            ready: resp,
        };
        self.private_miss(now, slice, set, line, w, ta, net);
    }

    /// Waiter `w` misses at `t`: it joins the line's MSHR (asking the LLC for sectors not
    /// yet requested), takes a free one, or waits for one.
    #[allow(clippy::too_many_arguments)]
    fn private_miss(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        line: u64,
        w: Waiter,
        t: Picos,
        net: &mut dyn Net,
    ) {
        let cap = (self.spec.l2_mshrs as usize).max(1);
        let p = &mut self.private[slice];
        let ask = if let Some(e) = p.pending.get_mut(&line) {
            let in_flight = w.need & e.requested;
            self.stats.l2_pending_hits += popcount(in_flight);
            let new = w.need & !e.requested;
            e.requested |= new;
            e.waiters.push(w);
            new
        } else if p.pending.len() >= cap {
            self.stats.l2_mshr_waits += 1;
            p.queue.push_back(Queued {
                line,
                set,
                waiter: w,
            });
            0
        } else {
            p.pending.insert(
                line,
                Pending {
                    set,
                    requested: w.need,
                    waiters: vec![w],
                },
            );
            w.need
        };
        if ask != 0 {
            let pkt = Packet::LlcRead {
                line,
                sectors: ask,
                tag: slice as u32,
                unit: self.unit,
            };
            self.send_to_llc(now, slice, t, line, pkt, HEADER_BYTES, net);
        }
    }

    /// The LLC's data for `sectors` of `line` arrives at private L2 slice `slice` at `now`:
    /// fills the line (unless it is remote and `package.cache_remote_reads` is off) and
    /// answers the SMs that have all their sectors. `false` when no MSHR waits for it.
    fn private_fill(
        &mut self,
        now: Picos,
        slice: usize,
        line: u64,
        sectors: u64,
        net: &mut dyn Net,
    ) -> bool {
        let Some(mut e) = self.private[slice].pending.remove(&line) else {
            return false;
        };
        let data = popcount(sectors) * self.spec.l2_geom.sector_bytes;
        let tf = self.slices[slice]
            .noc_in
            .reserve(now, now, HEADER_BYTES + data);
        let ready = tf + self.spec.l2_hit_ps;
        let local = self.spec.ids.chiplet_of_channel(self.spec.llc_home(line).0) == self.chiplet();
        if local || self.spec.cache_remote_reads {
            let (i, ev) = self.private_way(slice, e.set, line);
            if let Some(ev) = ev {
                self.private_writeback(now, slice, tf, ev, net);
            }
            let c = &mut self.slices[slice].cache;
            // Sectors a store has written meanwhile are newer than the fill.
            let new = sectors & !c.valid(i);
            c.fill(i, new, ready);
        }
        e.requested &= !sectors;
        let mut keep = Vec::new();
        for mut w in e.waiters.drain(..) {
            w.need &= !sectors;
            w.ready = w.ready.max(ready);
            if w.need == 0 {
                self.reply(now, slice, w.sm, w.ready, line, w.sectors, w.tag, net);
            } else {
                keep.push(w);
            }
        }
        if e.requested != 0 || !keep.is_empty() {
            e.waiters = keep;
            self.private[slice].pending.insert(line, e);
            return true;
        }
        // An MSHR is free: the oldest waiting misses take it (or merge).
        let cap = (self.spec.l2_mshrs as usize).max(1);
        while self.private[slice].pending.len() < cap {
            let Some(q) = self.private[slice].queue.pop_front() else {
                break;
            };
            let mut w = q.waiter;
            // Sectors filled while it waited are there now.
            let c = &self.slices[slice].cache;
            if let Some(i) = c.find(q.set, q.line) {
                let mut have = w.need & c.valid(i);
                w.need &= !have;
                while have != 0 {
                    w.ready = w.ready.max(c.ready(i, have.trailing_zeros()));
                    have &= have - 1;
                }
            }
            if w.need == 0 {
                self.reply(
                    now,
                    slice,
                    w.sm,
                    w.ready.max(tf),
                    q.line,
                    w.sectors,
                    w.tag,
                    net,
                );
            } else {
                self.private_miss(now, slice, q.set, q.line, w, tf, net);
            }
        }
        true
    }

    /// The way of `line` in private L2 slice `slice` (allocated, with the dirty victim to
    /// write back, when absent); a new line forgets the flush mark of the way's old one.
    fn private_way(&mut self, slice: usize, set: u64, line: u64) -> (usize, Option<Evicted>) {
        let c = &mut self.slices[slice].cache;
        match c.find(set, line) {
            Some(i) => {
                c.touch(set, i);
                (i, None)
            }
            None => {
                let (i, ev) = c.allocate(set, line);
                self.private[slice].flushed[i] = 0;
                (i, ev)
            }
        }
    }

    /// A store of `sectors` of `line` at private L2 slice `slice`: lines homed on this
    /// chiplet are written back (with `l2.write_back`), others written through to their
    /// home LLC (an L2 copy of the sectors is updated, stays clean).
    fn private_write(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        line: u64,
        sectors: u64,
        net: &mut dyn Net,
    ) {
        let n = popcount(sectors);
        let data = n * self.spec.l2_geom.sector_bytes;
        let ta = self.slices[slice]
            .noc_in
            .reserve(now, now, HEADER_BYTES + data);
        self.stats.l2_accesses += n;
        let found = self.slices[slice].cache.find(set, line);
        let present = found.map_or(0, |i| self.slices[slice].cache.valid(i) & sectors);
        self.stats.l2_hits += popcount(present);
        self.stats.l2_misses += n - popcount(present);
        let t = ta + self.spec.l2_hit_ps;
        let local = self.spec.ids.chiplet_of_channel(self.spec.llc_home(line).0) == self.chiplet();
        if local && self.spec.l2_write_back {
            let (i, ev) = self.private_way(slice, set, line);
            if let Some(ev) = ev {
                self.private_writeback(now, slice, t, ev, net);
            }
            let c = &mut self.slices[slice].cache;
            let new = sectors & !c.valid(i);
            c.fill(i, new, t);
            c.mark_dirty(i, sectors);
            self.private[slice].flushed[i] &= !sectors;
        } else {
            if let Some(i) = found {
                self.slices[slice].cache.touch(set, i);
            }
            let pkt = Packet::LlcWrite { line, sectors };
            self.send_to_llc(now, slice, t, line, pkt, HEADER_BYTES + data, net);
        }
    }

    /// Writes the dirty sectors of `ev` back to their home LLC from private L2 slice
    /// `slice` at `t`; returns when the packet starts to leave.
    fn private_writeback(
        &mut self,
        now: Picos,
        slice: usize,
        t: Picos,
        ev: Evicted,
        net: &mut dyn Net,
    ) -> Picos {
        self.stats.l2_writeback_sectors += popcount(ev.dirty);
        let bytes = HEADER_BYTES + popcount(ev.dirty) * self.spec.l2_geom.sector_bytes;
        let pkt = Packet::LlcWrite {
            line: ev.line_addr,
            sectors: ev.dirty,
        };
        self.send_to_llc(now, slice, t, ev.line_addr, pkt, bytes, net)
    }

    /// Sends `pkt` (`bytes` on the wire) about `line` from private L2 slice `slice` at `t`
    /// to the line's home LLC slice (through the link interface when remote); returns when
    /// it starts to leave.
    #[allow(clippy::too_many_arguments)]
    fn send_to_llc(
        &mut self,
        now: Picos,
        slice: usize,
        t: Picos,
        line: u64,
        pkt: Packet,
        bytes: u64,
        net: &mut dyn Net,
    ) -> Picos {
        let te = self.slices[slice].noc_out.reserve(now, t, bytes);
        let ids = self.spec.ids;
        let home = self.spec.llc_home(line).0;
        let dst = if ids.chiplet_of_channel(home) == self.chiplet() {
            ids.channel(home)
        } else {
            self.stats.llc_remote_requests += 1;
            ids.link(self.chiplet())
        };
        net.send(self.unit, dst, te + self.spec.noc_latency_ps, pkt);
        te
    }

    /// The kernel-boundary flush reaches this unit at `now` (`package.l2: private`; a
    /// no-op otherwise): every private L2 slice sends its dirty sectors to their home LLC
    /// (through its NoC egress, so they queue behind each other) and invalidates every
    /// line, keeping the tags marked so later misses on them count as lost inter-kernel
    /// hits. Returns when the last write-back's last byte has left (`now` when there is
    /// none): the unit's acknowledgement goes to its local CP then.
    pub fn flush(&mut self, now: Picos, net: &mut dyn Net) -> Picos {
        let mut last = now;
        if !self.spec.private {
            return last;
        }
        for slice in 0..self.slices.len() {
            for i in 0..self.slices[slice].cache.ways() {
                let c = &self.slices[slice].cache;
                let valid = c.valid(i);
                if valid == 0 {
                    continue;
                }
                let (line, dirty) = (c.tag(i), c.dirty(i));
                if dirty != 0 {
                    self.stats.l2_flush_writeback_sectors += popcount(dirty);
                    let bytes = HEADER_BYTES + popcount(dirty) * self.spec.l2_geom.sector_bytes;
                    let pkt = Packet::LlcWrite {
                        line,
                        sectors: dirty,
                    };
                    let start = self.send_to_llc(now, slice, now, line, pkt, bytes, net);
                    // Its last byte has left when its serialization on the NoC port ends.
                    let rate =
                        self.spec.noc_bytes_per_cycle as u128 * self.spec.noc_clock_hz as u128;
                    let ser = (bytes as u128 * 1_000_000_000_000).div_ceil(rate.max(1));
                    last = last.max(start + ser as Picos);
                }
                self.slices[slice].cache.invalidate_sectors(i, valid);
                self.private[slice].flushed[i] |= valid;
                self.stats.l2_flush_invalidated_lines += 1;
            }
        }
        last
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
        self.stats.llc_accesses += popcount(sectors);
        let hit_ps = self.spec.llc_hit_ps;
        let hit_at = ta + hit_ps;
        let mut resp = hit_at;
        let mut missing = sectors;
        let Some(l) = self.llc.as_mut() else {
            return resp;
        };
        let c = &mut l.cache;
        if let Some(i) = c.find(set, line) {
            c.touch(set, i);
            let present = sectors & c.valid(i);
            missing &= !present;
            let mut m = present;
            while m != 0 {
                let r = c.ready(i, m.trailing_zeros());
                m &= m - 1;
                if r > hit_at {
                    resp = resp.max(r);
                    self.stats.llc_misses += 1;
                } else {
                    self.stats.llc_hits += 1;
                }
            }
        }
        if missing != 0 {
            self.stats.llc_misses += popcount(missing);
            let (tm, _) = l.mshrs.acquire(ta);
            let (i, ev) = l.cache.find_or_allocate(set, line);
            if let Some(ev) = ev {
                self.llc_writeback(now, tm, ev);
            }
            let td = self.dram_access(now, tm, line, missing, DramOp::Read);
            if let Some(l) = self.llc.as_mut() {
                l.cache.fill(i, missing, td + hit_ps);
                l.mshrs.release(td);
            }
            resp = resp.max(td + hit_ps);
        }
        resp
    }

    /// A write of `sectors` of `line` into the LLC slice at `t` (allocated dirty, no fetch).
    fn llc_store_effect(&mut self, now: Picos, set: u64, t: Picos, line: u64, sectors: u64) {
        let Some(l) = self.llc.as_mut() else { return };
        let (i, ev) = l.cache.find_or_allocate(set, line);
        let new = sectors & !l.cache.valid(i);
        l.cache.fill(i, new, t);
        l.cache.mark_dirty(i, sectors);
        if let Some(ev) = ev {
            self.llc_writeback(now, t, ev);
        }
    }

    fn llc_writeback(&mut self, now: Picos, t: Picos, ev: Evicted) {
        self.stats.llc_writeback_sectors += popcount(ev.dirty);
        self.dram_access(now, t, ev.line_addr, ev.dirty, DramOp::Write);
    }

    /// Installs the part of `[start, end)` in LLC line `line` (homed here) clean, data there
    /// at `now` (a host-to-device copy with a private L2).
    fn memcpy_llc_line(&mut self, now: Picos, line: u64, set: u64, start: u64, end: u64) {
        let geom = self.spec.l2_geom;
        let mut one = Vec::with_capacity(1);
        let lo = line.max(start);
        let hi = line.saturating_add(geom.line_bytes).min(end);
        add_range(&geom, lo, hi - lo, &mut one);
        let Some(g) = one.first() else { return };
        let Some(l) = self.llc.as_mut() else { return };
        let (i, ev) = l.cache.find_or_allocate(set, line);
        l.cache.invalidate_sectors(i, g.sectors);
        l.cache.fill(i, g.sectors, now);
        self.stats.memcpy_llc_sectors += popcount(g.sectors);
        if let Some(ev) = ev {
            self.llc_writeback(now, now, ev);
        }
    }
}
