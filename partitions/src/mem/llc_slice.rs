//! The LLC slice (`package.l2: private`, the model is in the module documentation of
//! [`crate::mem`]): one per DRAM channel, in the channel's unit, caching the lines homed at
//! the channel; it serves the private L2 slices' reads and writes and performs atomics. Its
//! hardware and lookup are an L2 slice's ([`super::l2_slice::Slice`]).

use super::cache::Evicted;
use super::coalesce::add_range;
use super::dram::DramOp;
use super::dram_channel::{ChannelError, From, MemChannel};
use super::{popcount, Ctx, Net, Response, HEADER_BYTES};
use crate::Picos;

impl MemChannel {
    /// The LLC set of `line` when this channel is its home, else the error naming the home.
    pub(super) fn llc_set_here(&self, line: u64) -> Result<u64, ChannelError> {
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
        sm: u32,
        tag: u32,
        ctx: Ctx,
        net: &mut dyn Net,
    ) {
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
        self.reply(now, From::Llc, sm, at, line, sectors, tag, ctx, net);
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
        let data = popcount(sectors) * self.spec.l2_geom.sector_bytes;
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
        let data = popcount(sectors) * self.spec.l2_geom.sector_bytes;
        let ta = self.llc_port_in(now, HEADER_BYTES + data);
        self.stats.llc_accesses += popcount(sectors);
        let present = self
            .llc
            .as_ref()
            .map_or(0, |l| l.probe(set, line, sectors).1);
        self.stats.llc_hits += popcount(present);
        self.stats.llc_misses += popcount(sectors & !present);
        let t = ta + self.spec.llc_hit_ps;
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
        self.stats.llc_accesses += popcount(sectors);
        let hit_ps = self.spec.llc_hit_ps;
        let hit_at = ta + hit_ps;
        let Some(l) = self.llc.as_mut() else {
            return hit_at;
        };
        let lk = l.lookup(set, hit_at, line, sectors);
        self.stats.llc_hits += lk.hits;
        self.stats.llc_misses += lk.pending;
        let (mut resp, missing) = (lk.ready, lk.missing);
        if missing != 0 {
            self.stats.llc_misses += popcount(missing);
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
        self.stats.llc_writeback_sectors += popcount(ev.dirty);
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
        let geom = self.spec.l2_geom;
        let mut one = Vec::with_capacity(1);
        let lo = line.max(start);
        let hi = line.saturating_add(geom.line_bytes).min(end);
        add_range(&geom, lo, hi - lo, &mut one);
        let Some(g) = one.first() else { return };
        if self.llc.is_none() {
            return;
        }
        self.slice_install(now, From::Llc, set, line, g.sectors);
        self.stats.memcpy_llc_sectors += popcount(g.sectors);
    }
}
