//! The private L2 slice (`package.l2: private`, the model is in the module documentation
//! of [`crate::mem`]): it caches any line its chiplet's SMs use, asks the line's home LLC
//! slice for misses over the NoC, and writes back and invalidates its lines at every kernel
//! boundary (the flush). A channel unit holds some of its chiplet's private L2 slices.

use std::collections::{BTreeMap, VecDeque};

use super::cache::Evicted;
use super::dram_channel::{ChannelError, From, MemChannel};
use super::port::BwPort;
use super::{popcount, Ctx, Net, Packet, Request, HEADER_BYTES};
use crate::counters::unit_counters;
use crate::observe::MemLevel;
use crate::Picos;

unit_counters! {
    /// What only a private L2 slice counts (its lookups count in [`super::L2SliceStats`]).
    pub struct PrivateL2Stats {
        /// Dirty sectors written back to their home LLC by kernel-boundary flushes.
        flush_writeback_sectors,
        /// Valid lines invalidated by kernel-boundary flushes.
        flush_invalidated_lines,
        /// Read sector misses on a line whose tag a kernel-boundary flush invalidated while
        /// the sector was valid (the line still in its way): the inter-kernel hits the
        /// flushes lost (included in the L2 misses).
        flush_lost_hits,
        /// Request packets (reads and writes) sent to the LLC slice of a line homed on
        /// another chiplet (through the link interfaces).
        llc_remote_requests,
    }
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
    /// The context of its request (its reply's, and its LLC reads').
    ctx: Ctx,
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
pub(super) struct PrivSlice {
    /// By line: its MSHR (ordered map: nothing here may depend on a hash seed).
    pending: BTreeMap<u64, Pending>,
    /// Misses waiting for an MSHR, oldest first.
    queue: VecDeque<Queued>,
    /// By way: the sectors a kernel-boundary flush invalidated while the line kept its
    /// way (a later read miss on them is a lost inter-kernel hit).
    flushed: Vec<u64>,
}

impl PrivSlice {
    /// The private-L2 state of a slice of `ways` ways.
    pub(super) fn new(ways: usize) -> PrivSlice {
        PrivSlice {
            pending: BTreeMap::new(),
            queue: VecDeque::new(),
            flushed: vec![0; ways],
        }
    }
}

impl MemChannel {
    /// The private L2 slice and set of `line` when this channel holds them (for this
    /// chiplet's SMs), else the error naming the channel that does.
    pub(super) fn private_slot_here(&self, line: u64) -> Result<(usize, u64), ChannelError> {
        let (ch, slice, set) = self.map.private_slot(self.chiplet(), line);
        if ch != self.channel {
            return Err(ChannelError::NotHome {
                channel: self.channel,
                line,
                home: ch,
            });
        }
        Ok((slice, set))
    }

    /// A read of `sectors` of `line` from SM unit `sm` at private L2 slice `slice`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn private_read(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        line: u64,
        sectors: u64,
        sm: u32,
        tag: u32,
        ctx: Ctx,
        net: &mut dyn Net,
    ) {
        let ta = self.slices[slice].noc_in.reserve(now, now, HEADER_BYTES);
        let (resp, missing, found) = self.l2_lookup(slice, set, ta, line, sectors);
        if let Some(i) = found {
            let flushed = &mut self.private[slice].flushed[i];
            let lost = missing & *flushed;
            if lost != 0 {
                self.stats.private_l2.flush_lost_hits += popcount(lost);
                *flushed &= !lost;
            }
        }
        if missing == 0 {
            self.reply(now, From::L2(slice), sm, resp, line, sectors, tag, ctx, net);
            return;
        }
        self.stats.l2.misses += popcount(missing);
        let w = Waiter {
            sm,
            tag,
            sectors,
            need: missing,
            ready: resp,
            ctx,
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
        let cap = (self.params.l2.mshrs as usize).max(1);
        let p = &mut self.private[slice];
        let ask = if let Some(e) = p.pending.get_mut(&line) {
            let in_flight = w.need & e.requested;
            self.stats.l2.pending_hits += popcount(in_flight);
            let new = w.need & !e.requested;
            e.requested |= new;
            e.waiters.push(w);
            new
        } else if p.pending.len() >= cap {
            self.stats.l2.mshr_waits += 1;
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
            let pkt = Request::LlcRead {
                line,
                sectors: ask,
                tag: slice as u32,
                unit: self.unit,
                ctx: w.ctx,
            };
            self.send_to_llc(now, slice, t, line, pkt.into(), HEADER_BYTES, net);
        }
    }

    /// The LLC's data for `sectors` of `line` arrives at private L2 slice `slice` at `now`:
    /// fills the line (unless it is remote and `package.cache_remote_reads` is off) and
    /// answers the SMs that have all their sectors. `false` when no MSHR waits for it.
    pub(super) fn private_fill(
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
        let data = popcount(sectors) * self.params.l2.geom.sector_bytes;
        let tf = self.slices[slice]
            .noc_in
            .reserve(now, now, HEADER_BYTES + data);
        let ready = tf + self.params.l2.hit_ps;
        let local = self.map.ids.chiplet_of_channel(self.map.llc_home(line).0) == self.chiplet();
        if local || self.params.l2.cache_remote_reads {
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
                self.reply(
                    now,
                    From::L2(slice),
                    w.sm,
                    w.ready,
                    line,
                    w.sectors,
                    w.tag,
                    w.ctx,
                    net,
                );
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
        let cap = (self.params.l2.mshrs as usize).max(1);
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
                    From::L2(slice),
                    w.sm,
                    w.ready.max(tf),
                    q.line,
                    w.sectors,
                    w.tag,
                    w.ctx,
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
    /// home LLC (an L2 copy of the sectors is updated, stays clean). Returns when it is
    /// performed here (when its acknowledgement can leave: the private L2 is the point a
    /// store of this chiplet is acknowledged from, as a memory-side slice is).
    pub(super) fn private_write(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        line: u64,
        sectors: u64,
        net: &mut dyn Net,
    ) -> Picos {
        let n = popcount(sectors);
        let data = n * self.params.l2.geom.sector_bytes;
        let ta = self.slices[slice]
            .noc_in
            .reserve(now, now, HEADER_BYTES + data);
        self.stats.l2.accesses += n;
        let (found, present) = self.slices[slice].probe(set, line, sectors);
        self.stats.l2.hits += popcount(present);
        self.stats.l2.misses += n - popcount(present);
        self.observed(MemLevel::L2, ta, line, sectors, popcount(present), true);
        let t = ta + self.params.l2.hit_ps;
        let local = self.map.ids.chiplet_of_channel(self.map.llc_home(line).0) == self.chiplet();
        if local && self.params.l2.write_back {
            let (i, ev) = self.private_way(slice, set, line);
            if let Some(ev) = ev {
                self.private_writeback(now, slice, t, ev, net);
            }
            self.slices[slice].cache.write(i, sectors, t);
            self.private[slice].flushed[i] &= !sectors;
        } else {
            if let Some(i) = found {
                self.slices[slice].cache.touch(set, i);
            }
            let pkt = Request::LlcWrite {
                line,
                sectors,
                ctx: self.ctx,
            };
            self.send_to_llc(now, slice, t, line, pkt.into(), HEADER_BYTES + data, net);
        }
        t
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
        self.stats.l2.writeback_sectors += popcount(ev.dirty);
        let bytes = HEADER_BYTES + popcount(ev.dirty) * self.params.l2.geom.sector_bytes;
        let pkt = Request::LlcWrite {
            line: ev.line_addr,
            sectors: ev.dirty,
            ctx: self.ctx,
        };
        self.send_to_llc(now, slice, t, ev.line_addr, pkt.into(), bytes, net)
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
        let ids = self.map.ids;
        let home = self.map.llc_home(line).0;
        let dst = if ids.chiplet_of_channel(home) == self.chiplet() {
            ids.channel(home)
        } else {
            self.stats.private_l2.llc_remote_requests += 1;
            ids.link(self.chiplet())
        };
        net.send(self.unit, dst, te, pkt);
        te
    }

    /// The kernel-boundary flush reaches this unit at `now` (`package.l2: private`; a
    /// no-op otherwise): every private L2 slice sends its dirty sectors to their home LLC
    /// (through its NoC egress, so they queue behind each other) and invalidates every
    /// line, keeping the tags marked so later misses on them count as lost inter-kernel
    /// hits. The write-backs are `ctx`'s, the kernel that ends. Returns when the last
    /// write-back's last byte has left (`now` when there is none): the unit's
    /// acknowledgement goes to its local CP then.
    pub fn flush(&mut self, now: Picos, ctx: Ctx, net: &mut dyn Net) -> Picos {
        let mut last = now;
        if !self.map.private {
            return last;
        }
        self.set_ctx(ctx);
        // With the crossbar a slice's NoC port does not delay its write-backs: they leave
        // at once and its crossbar input holds each for its flits, one after another. The
        // acknowledgement waits until they could all have left it.
        let flit = self.noc.bytes_per_cycle.max(1);
        let mut input: Vec<BwPort> = if self.map.ids.xbar {
            (0..self.slices.len())
                .map(|_| BwPort::new(flit, self.noc.clock_hz))
                .collect()
        } else {
            Vec::new()
        };
        for slice in 0..self.slices.len() {
            for i in 0..self.slices[slice].cache.ways() {
                let c = &self.slices[slice].cache;
                let valid = c.valid(i);
                if valid == 0 {
                    continue;
                }
                let (line, dirty) = (c.tag(i), c.dirty(i));
                if dirty != 0 {
                    self.stats.private_l2.flush_writeback_sectors += popcount(dirty);
                    let bytes = HEADER_BYTES + popcount(dirty) * self.params.l2.geom.sector_bytes;
                    let pkt = Request::LlcWrite {
                        line,
                        sectors: dirty,
                        ctx,
                    };
                    let start = self.send_to_llc(now, slice, now, line, pkt.into(), bytes, net);
                    if let Some(port) = input.get_mut(slice) {
                        port.reserve(now, now, bytes.div_ceil(flit) * flit);
                        last = last.max(port.free_at());
                    } else {
                        // Its last byte has left when its serialization on the NoC port
                        // ends.
                        let rate = self.noc.bytes_per_cycle as u128 * self.noc.clock_hz as u128;
                        let ser = (bytes as u128 * 1_000_000_000_000).div_ceil(rate.max(1));
                        last = last.max(start + ser as Picos);
                    }
                }
                self.slices[slice].cache.invalidate_sectors(i, valid);
                self.private[slice].flushed[i] |= valid;
                self.stats.private_l2.flush_invalidated_lines += 1;
            }
        }
        last
    }
}
