//! The DRAM channel unit (one per DRAM channel, the model is in the module documentation
//! of [`crate::mem`]): its front end takes the packets for the unit and routes them to the
//! L2 slices homed at the channel ([`super::l2_slice`]), or with `package.l2: private` to
//! the private L2 slices it holds ([`super::private_l2`]) and the LLC slice homed at the
//! channel ([`super::llc_slice`]); the slices' misses and write-backs reach the channel's
//! DRAM ([`super::dram`]) without crossing the NoC. A host-to-device copy arrives here too.
//!
//! With a private L2, an L2 slice reaches an LLC slice, even its own unit's, only by
//! packets over the NoC (and the links).

use std::sync::Arc;

use super::address_map::AddressMap;
use super::dram::DramParams;
use super::dram::{Dram, DramOp};
use super::l2_slice::L2SliceParams;
use super::l2_slice::Slice;
use super::llc_slice::LlcSliceParams;
use super::message::SyncOp;
use super::prefetch::HomeMemo;
use super::private_l2::PrivSlice;
use super::slice_out::{ReplyQueueStats, SliceOutputs};
use super::{
    popcount, Ctx, L2SliceStats, LlcSliceStats, Net, NocStats, Packet, PrivateL2Stats, Request,
    Response, HEADER_BYTES,
};
use crate::config::{section, GpuConfig, Kind};
use crate::counters::unit_counters;
use crate::observe::{MemAccess, MemLevel, Observer, Probe};
use crate::per_kernel::{KernelMemStats, KernelTally, PerKernel};
use crate::Picos;

section! {
    /// Host-to-device copies in the command list.
    pub struct MemcpyConfig {
        /// A copy also installs the copied lines in L2 (Accel-Sim's
        /// `-gpgpu_perf_sim_memcpy`), so the first kernel may hit; with `package.l2:
        /// private`, in the LLC slices at the lines' homes instead (the copy arrives at the
        /// home memory; the private L2s start cold). Presets: that option.
        fills_l2: bool = Kind::Bool, unit "-", None;
    }
}

/// The parameters of a DRAM channel unit: its DRAM, its L2 slices (and LLC slice with a
/// private L2) and whether a copy fills the slices (their NoC ports and request queues are
/// the wiring's, `gpu/wiring.rs`).
#[derive(Clone, Debug)]
pub struct ChannelParams {
    pub(crate) l2: L2SliceParams,
    pub(crate) llc: LlcSliceParams,
    pub(crate) dram: DramParams,
    /// `memcpy.fills_l2`.
    pub(crate) fills_l2: bool,
}

impl ChannelParams {
    pub fn from_config(cfg: &GpuConfig) -> ChannelParams {
        ChannelParams {
            l2: L2SliceParams::from_config(cfg),
            llc: LlcSliceParams::from_config(cfg),
            dram: DramParams::from_config(cfg),
            fills_l2: cfg.memcpy.fills_l2,
        }
    }
}

/// Which ports of the unit a packet leaves by.
#[derive(Clone, Copy, Debug)]
pub(super) enum From {
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

unit_counters! {
    /// The counters of one DRAM channel, in sectors unless named otherwise.
    pub struct DramStats {
        /// Sector reads (fills of L2 or LLC misses).
        reads,
        /// Sector writes (write-backs, or write-through stores).
        writes,
        /// Bytes read and written.
        bytes,
        read_bytes,
        write_bytes,
    }
}

/// The counters of one channel unit: its L2 slices (and with a private L2 their flushes),
/// its LLC slice, its DRAM channel, its NoC replies and its slices' reply queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChannelStats {
    pub l2: L2SliceStats,
    pub private_l2: PrivateL2Stats,
    pub llc: LlcSliceStats,
    pub dram: DramStats,
    pub noc: NocStats,
    pub reply_queue: ReplyQueueStats,
}

impl ChannelStats {
    /// Adds every counter of `o`.
    pub fn add(&mut self, o: &ChannelStats) {
        self.l2.add(&o.l2);
        self.private_l2.add(&o.private_l2);
        self.llc.add(&o.llc);
        self.dram.add(&o.dram);
        self.noc.add(&o.noc);
        self.reply_queue.add(&o.reply_queue);
    }
}

/// DRAM channel `channel` (numbered across the package) and the slices it holds.
pub struct MemChannel {
    /// Its own copy: read on every packet, beside the state it updates.
    pub(super) params: ChannelParams,
    pub(super) map: Arc<AddressMap>,
    pub(super) channel: u32,
    pub(super) unit: u32,
    pub(super) slices: Vec<Slice>,
    pub(super) dram: Dram,
    pub(super) stats: ChannelStats,
    /// Its observer, if any.
    pub(super) probe: Option<Probe>,
    /// With a private L2: the LLC slice homed at this channel, and by L2 slice its MSHRs.
    pub(super) llc: Option<Slice>,
    pub(super) private: Vec<PrivSlice>,
    /// Host speed only: the homes [`MemChannel::prefetch`] computed (`prefetch.rs`).
    pub(super) homes: HomeMemo,
    /// The context the work in progress is done for, which the traffic it starts on its own
    /// (write-backs of the lines it evicts) is attributed to: the packet being taken's, the
    /// flushed kernel's, or the host's during a copy (see [`super::message`]).
    pub(super) ctx: Ctx,
    /// Its counters split by the kernel of its work.
    pub(super) per_kernel: PerKernel,
    /// When the request being taken left its slice's request queue (its lookup began, or
    /// a miss got its MSHR): the credit for its place goes back to the crossbar then.
    pub(super) taken: Picos,
    /// The requests its slices' request queues hold, the crossbar holding the credits (0:
    /// unbounded, no credits).
    request_queue: u32,
    /// The NoC's bandwidth (a flush's write-backs leave at it).
    pub(super) noc: crate::gpu::wiring::Bandwidth,
    /// With the crossbar and `l2.reply_queue_packets` > 0: its slices' reply queues, and
    /// the packets they let go at a visit.
    out: Option<SliceOutputs>,
    go: Vec<(u32, Packet)>,
    /// The values of the sync words homed here (issue 24).
    pub(super) sync: super::sync_memory::SyncMemory,
}

impl MemChannel {
    /// Channel `channel` (numbered across the package); its slices' NoC ports and request
    /// queues as `wiring` declares them.
    pub fn new(
        params: &ChannelParams,
        map: Arc<AddressMap>,
        channel: u32,
        wiring: &crate::gpu::Wiring,
    ) -> MemChannel {
        let l2 = &params.l2;
        // Its slices' reply queues: the L2 slices', then the LLC slice's.
        let queues = map.slices_per_channel.d as usize + usize::from(map.private);
        let slices = (0..map.slices_per_channel.d)
            .map(|_| Slice::new(l2, wiring, l2.sets, l2.assoc, l2.mshrs))
            .collect::<Vec<Slice>>();
        let (llc, private) = if map.private {
            let c = &params.llc;
            let llc = Slice::new(l2, wiring, c.sets, c.assoc, c.mshrs);
            let private = slices
                .iter()
                .map(|s| PrivSlice::new(s.cache.ways()))
                .collect();
            (Some(llc), private)
        } else {
            (None, Vec::new())
        };
        MemChannel {
            unit: map.ids.channel(channel),
            channel,
            slices,
            dram: Dram::channel(&params.dram, channel % map.ids.channels),
            stats: ChannelStats::default(),
            probe: None,
            llc,
            private,
            params: params.clone(),
            map,
            homes: HomeMemo::default(),
            ctx: Ctx::default(),
            per_kernel: PerKernel::default(),
            taken: 0,
            request_queue: wiring.slice_queue_packets(),
            noc: wiring.noc_bandwidth(),
            out: (wiring.slice_reply_packets() > 0)
                .then(|| SliceOutputs::new(queues, wiring.slice_reply_packets())),
            go: Vec::new(),
            sync: Default::default(),
        }
    }

    /// Gives it the sync words the trace declares (their initial values).
    pub fn set_sync_words(&mut self, words: std::sync::Arc<[tessera_traces::SyncWords]>) {
        self.sync = super::sync_memory::SyncMemory::new(words);
    }

    /// The sync words written here, and what was done to them.
    pub fn sync_memory(&self) -> &super::sync_memory::SyncMemory {
        &self.sync
    }

    /// Its chiplet.
    pub(super) fn chiplet(&self) -> u32 {
        self.map.ids.chiplet_of_channel(self.channel)
    }

    /// Its package-wide channel index.
    pub fn index(&self) -> u32 {
        self.channel
    }

    /// Its counters, its slices' reply queues' included.
    pub fn stats(&self) -> ChannelStats {
        let mut s = self.stats;
        if let Some(o) = &self.out {
            s.reply_queue = o.stats();
        }
        s
    }

    /// When it next has something of its own to do: a packet computed ahead is due to
    /// leave its slice.
    pub fn next_event(&self) -> Option<Picos> {
        self.out.as_ref().and_then(|o| o.next())
    }

    /// Work of `ctx` begins: what the counters grew by since the last change of context
    /// goes to that context.
    #[inline(always)]
    pub(super) fn set_ctx(&mut self, ctx: Ctx) {
        self.ctx = ctx;
        if self.per_kernel.leaves(ctx) {
            let now = self.kernel_view();
            self.per_kernel.enter(ctx, now);
        }
    }

    /// Its memory counters in the per-kernel form.
    fn kernel_view(&self) -> KernelMemStats {
        let s = &self.stats;
        KernelMemStats {
            l2_accesses: s.l2.accesses,
            l2_hits: s.l2.hits,
            l2_misses: s.l2.misses,
            llc_accesses: s.llc.accesses,
            llc_hits: s.llc.hits,
            llc_misses: s.llc.misses,
            dram_reads: s.dram.reads,
            dram_writes: s.dram.writes,
            dram_bytes: s.dram.bytes,
            noc_request_bytes: s.noc.request_bytes,
            noc_reply_bytes: s.noc.reply_bytes,
            ..KernelMemStats::default()
        }
    }

    /// Its counters per kernel at the end of the run.
    pub fn per_kernel(&self) -> KernelTally {
        self.per_kernel.tally(self.kernel_view())
    }

    /// Its unit id.
    pub fn unit(&self) -> u32 {
        self.unit
    }

    /// Reports its L2, LLC and DRAM accesses to `obs` from now on.
    pub fn observe(&mut self, obs: Arc<dyn Observer>) {
        self.probe = Some(Probe::new(self.unit, obs));
    }

    /// Tells the observer, if any, of an access at `level`.
    #[inline(always)]
    pub(super) fn observed(
        &self,
        level: MemLevel,
        at: Picos,
        line: u64,
        sectors: u64,
        hits: u64,
        write: bool,
    ) {
        if let Some(p) = &self.probe {
            let e = MemAccess {
                at,
                level,
                line,
                sectors: popcount(sectors) as u32,
                hits: hits as u32,
                write,
            };
            p.obs.mem_access(p.unit, &e);
        }
    }

    /// The context of what it is doing (the last packet taken, flush or copy).
    pub fn ctx(&self) -> Ctx {
        self.ctx
    }

    /// A packet arrives at `now` from unit `src` (an SM, this chiplet's link interface, or
    /// with `noc.model: crossbar` the crossbar; the module documentation of `slice_out.rs`
    /// for the reply queues). A request from the crossbar held a place
    /// in its slice's request queue (`l2.request_queue_packets`): when the slice has taken
    /// it, the credit goes back. With reply queues (`l2.reply_queue_packets`), a request
    /// for a slice whose reply waits for credit is held until it can go, and a credit from
    /// the crossbar lets a slice's waiting replies go.
    pub fn on_packet(
        &mut self,
        now: Picos,
        src: u32,
        pkt: Packet,
        net: &mut dyn Net,
    ) -> Result<(), ChannelError> {
        if self.out.is_some() {
            let xbar = self.map.ids.xbar(self.chiplet());
            match pkt {
                Packet::Control(crate::gpu::control::Control::Credit { link, vc, bytes })
                    if src == xbar =>
                {
                    let queue = self.reply_queue(link, vc);
                    self.let_go(now, net, |o, go| o.credit(now, queue, bytes, go));
                    return self.release(now, net);
                }
                Packet::Request(r) => {
                    self.depart(now, net);
                    // (Which slice it is for only matters while some slice holds.)
                    if self.out.as_ref().is_some_and(|o| o.holding()) {
                        let (q, slice) = self.request_queue_of(&r);
                        let queue = self.reply_queue(q, slice);
                        if let Some(o) = self.out.as_mut().filter(|o| o.holds(queue)) {
                            o.hold(queue, now, src, pkt);
                            return Ok(());
                        }
                    }
                }
                _ => {}
            }
        }
        self.take_queued(now, src, pkt, net)
    }

    /// Its events at `t` after the arrivals: the packets due leave their slices, and the
    /// requests held for slices whose reply queues have room are taken.
    pub fn advance(&mut self, t: Picos, net: &mut dyn Net) -> Result<(), ChannelError> {
        if self.out.is_none() {
            return Ok(());
        }
        self.depart(t, net);
        self.release(t, net)
    }

    /// Takes at `t` the requests held for slices that can reply again.
    fn release(&mut self, t: Picos, net: &mut dyn Net) -> Result<(), ChannelError> {
        while let Some((_, src, pkt)) = self.out.as_mut().and_then(|o| o.release()) {
            self.take_queued(t, src, pkt, net)?;
            self.depart(t, net);
        }
        Ok(())
    }

    /// The packets due by `t` leave their slices, those with credit now.
    fn depart(&mut self, t: Picos, net: &mut dyn Net) {
        self.let_go(t, net, |o, go| o.depart(t, go));
    }

    /// Sends at `t` the packets `f` lets go from the slices' reply queues.
    fn let_go(
        &mut self,
        t: Picos,
        net: &mut dyn Net,
        f: impl FnOnce(&mut SliceOutputs, &mut Vec<(u32, Packet)>),
    ) {
        let mut go = std::mem::take(&mut self.go);
        if let Some(o) = &mut self.out {
            f(o, &mut go);
        }
        for (dst, pkt) in go.drain(..) {
            net.send(self.unit, dst, t, pkt);
        }
        self.go = go;
    }

    /// The reply queue of the slice a credit or request queue names: `(0, slice)` an L2
    /// slice's, `(1, _)` the LLC slice's, numbered after the L2 slices.
    fn reply_queue(&self, link: u32, slice: u32) -> u32 {
        if link == 0 {
            slice
        } else {
            self.slices.len() as u32
        }
    }

    /// Sends `pkt` from slice `from` to unit `dst` at `te`: on the NoC then, or with reply
    /// queues through the reply queue of the slice whose crossbar port it takes
    /// ([`AddressMap::noc_slice`]: `from` itself with a memory-side L2; with a private L2 an
    /// LLC slice's reply for a line the unit's L2 slice caches takes that slice's port).
    #[inline(always)]
    fn emit(&mut self, from: From, dst: u32, te: Picos, pkt: Packet, net: &mut dyn Net) {
        if self.out.is_none() {
            net.send(self.unit, dst, te, pkt);
            return;
        }
        let llc = self.slices.len() as u32;
        let queue = match (from, pkt) {
            (From::L2(i), _) if !self.map.private => i as u32,
            (
                _,
                Packet::Response(
                    r @ (Response::Reply { .. }
                    | Response::WriteAck { .. }
                    | Response::Value { .. }),
                ),
            ) => self
                .map
                .noc_slice(self.chiplet(), self.unit, r.line())
                .map_or(llc, |s| s as u32),
            _ => llc,
        };
        if let Some(o) = &mut self.out {
            o.push(te, queue, dst, pkt);
        }
    }

    /// Takes request or reply `pkt` (see [`MemChannel::on_packet`]).
    fn take_queued(
        &mut self,
        now: Picos,
        src: u32,
        pkt: Packet,
        net: &mut dyn Net,
    ) -> Result<(), ChannelError> {
        let queued = match pkt {
            Packet::Request(r) if self.request_queue > 0 => {
                let xbar = self.map.ids.xbar(self.chiplet());
                (src == xbar).then(|| (xbar, self.request_queue_of(&r)))
            }
            _ => None,
        };
        self.taken = now;
        self.take(now, pkt, net)?;
        if let Some((xbar, (queue, slice))) = queued {
            let c = crate::gpu::control::Control::Credit {
                link: queue,
                vc: slice,
                bytes: 1,
            };
            net.send(self.unit, xbar, self.taken.max(now), c.into());
        }
        Ok(())
    }

    /// Which request queue `r` waited in: `(0, slice)` an L2 slice's, `(1, 0)` the LLC
    /// slice's (as the crossbar chose its output, `mem/crossbar.rs`).
    fn request_queue_of(&self, r: &Request) -> (u32, u32) {
        let line = r.line();
        if self.map.private {
            match r {
                Request::Read { .. } | Request::Write { .. } => {
                    let (_, slice, _) = self.map.private_slot(self.chiplet(), line);
                    (0, slice as u32)
                }
                _ => (1, 0),
            }
        } else {
            (0, self.map.l2_home(line).1 as u32)
        }
    }

    /// Takes a packet that arrived at `now`.
    fn take(&mut self, now: Picos, pkt: Packet, net: &mut dyn Net) -> Result<(), ChannelError> {
        if self.map.private {
            return self.on_packet_private(now, pkt, net);
        }
        let req = match pkt {
            Packet::Request(
                r @ (Request::Read { .. }
                | Request::Write { .. }
                | Request::Atomic { .. }
                | Request::Sync { .. }),
            ) => r,
            _ => {
                return Err(ChannelError::Unexpected {
                    channel: self.channel,
                    pkt,
                })
            }
        };
        let (line, sectors) = (req.line(), req.sectors());
        self.set_ctx(req.ctx());
        let map = &self.map;
        let (home, slice, set) = self.homes.take(line, || map.l2_home(line));
        if home != self.channel {
            return Err(ChannelError::NotHome {
                channel: self.channel,
                line,
                home,
            });
        }
        let data = popcount(sectors) * self.params.l2.geom.sector_bytes;
        match req {
            Request::Read { tag, sm, ctx, .. } => {
                let ta = self.slices[slice].noc_in.reserve(now, now, HEADER_BYTES);
                self.taken = ta;
                let ready = self.l2_read(now, slice, set, ta, line, sectors);
                self.reply(
                    now,
                    From::L2(slice),
                    sm,
                    ready,
                    line,
                    sectors,
                    tag,
                    ctx,
                    net,
                );
            }
            Request::Atomic {
                tag, ops, sm, ctx, ..
            } => {
                let at = self.l2_atomic(now, slice, set, line, sectors, ops, data);
                self.reply(now, From::L2(slice), sm, at, line, sectors, tag, ctx, net);
            }
            Request::Sync { .. } => self.l2_sync(now, slice, set, req, net),
            _ => {
                let ta = self.slices[slice]
                    .noc_in
                    .reserve(now, now, HEADER_BYTES + data);
                self.taken = ta;
                let done = self.l2_write(now, slice, set, ta, line, sectors);
                if let Request::Write { tag, sm, ctx, .. } = req {
                    if tag != Request::NO_ACK {
                        self.ack(now, From::L2(slice), sm, done, line, tag, ctx, net);
                    }
                }
            }
        }
        Ok(())
    }

    /// Sync request `req` taken at `now` by L2 slice `slice` (set `set`): timed as the
    /// access it is (a read, a write, an atomic on the word's sector); its value is the
    /// home's, in the order the home takes them. Out of line: sync traffic only.
    #[inline(never)]
    fn l2_sync(&mut self, now: Picos, slice: usize, set: u64, req: Request, net: &mut dyn Net) {
        let Request::Sync {
            addr,
            tag,
            sm,
            ctx,
            op,
            lanes,
            a,
            b,
        } = req
        else {
            return;
        };
        let (line, sector) = self.word_sector(addr);
        let sb = self.params.l2.geom.sector_bytes;
        let at = match op {
            SyncOp::Load => {
                let ta = self.slices[slice].noc_in.reserve(now, now, HEADER_BYTES);
                self.taken = ta;
                self.l2_read(now, slice, set, ta, line, sector)
            }
            SyncOp::Store => {
                let ta = self.slices[slice]
                    .noc_in
                    .reserve(now, now, HEADER_BYTES + sb);
                self.taken = ta;
                self.l2_write(now, slice, set, ta, line, sector)
            }
            _ => self.l2_atomic(now, slice, set, line, sector, lanes, sb),
        };
        let value = self.sync.apply(addr, op, lanes, a, b);
        self.value_reply(now, From::L2(slice), sm, at, addr, value, tag, ctx, net);
    }

    /// The L2 line of sync word `addr` and the sector mask of the word in it.
    fn word_sector(&self, addr: u64) -> (u64, u64) {
        let geom = &self.params.l2.geom;
        let line = addr & !(geom.line_bytes - 1);
        (
            line,
            1u64 << ((addr & (geom.line_bytes - 1)) / geom.sector_bytes),
        )
    }

    /// The L2 slice's part of an atomic of `ops` lanes on `sectors` of `line` (`bytes` on
    /// the NoC) taken at `now`: when its result leaves.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn l2_atomic(
        &mut self,
        now: Picos,
        slice: usize,
        set: u64,
        line: u64,
        sectors: u64,
        ops: u8,
        bytes: u64,
    ) -> Picos {
        let ta = self.slices[slice]
            .noc_in
            .reserve(now, now, HEADER_BYTES + bytes);
        self.taken = ta;
        let ready = self.l2_read(now, slice, set, ta, line, sectors);
        self.stats.l2.atomics += 1;
        let start = self.slices[slice]
            .alu
            .reserve(now, ready, (ops as u64).max(1));
        let found = self.slices[slice].cache.find(set, line);
        self.l2_store_effect(now, slice, set, start, line, sectors, found);
        start + self.params.l2.atomic_ps
    }

    /// Sends SM unit `sm` the value of sync word `addr` for its request `tag`, from slice
    /// `from` at `ready` (as [`MemChannel::reply`], with a sector of data).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn value_reply(
        &mut self,
        now: Picos,
        from: From,
        sm: u32,
        ready: Picos,
        addr: u64,
        value: u32,
        tag: u32,
        ctx: Ctx,
        net: &mut dyn Net,
    ) {
        let data = self.params.l2.geom.sector_bytes;
        self.stats.noc.reply_bytes += data + HEADER_BYTES;
        let pkt = Response::Value {
            addr,
            value,
            tag,
            sm,
            ctx,
        };
        self.send_data(now, from, ready, data, sm, pkt.into(), net);
    }

    /// A packet arrives at `now` with `package.l2: private`.
    fn on_packet_private(
        &mut self,
        now: Picos,
        pkt: Packet,
        net: &mut dyn Net,
    ) -> Result<(), ChannelError> {
        if let Some(ctx) = pkt.ctx() {
            self.set_ctx(ctx);
        }
        match pkt {
            Packet::Request(Request::Read {
                line,
                sectors,
                tag,
                sm,
                ctx,
            }) => {
                let (slice, set) = self.private_slot_here(line)?;
                self.private_read(now, slice, set, line, sectors, sm, tag, ctx, net);
            }
            Packet::Request(Request::Write {
                line,
                sectors,
                tag,
                sm,
                ctx,
            }) => {
                let (slice, set) = self.private_slot_here(line)?;
                let done = self.private_write(now, slice, set, line, sectors, net);
                if tag != Request::NO_ACK {
                    self.ack(now, From::L2(slice), sm, done, line, tag, ctx, net);
                }
            }
            Packet::Request(Request::Atomic {
                line,
                sectors,
                tag,
                sm,
                ctx,
                ops,
            }) => {
                // Performed at the home LLC slice, bypassing the private L2s.
                let set = self.llc_set_here(line)?;
                let at = self.llc_atomic(now, set, line, sectors, ops);
                self.reply(now, From::Llc, sm, at, line, sectors, tag, ctx, net);
            }
            Packet::Request(Request::Sync {
                addr,
                tag,
                sm,
                ctx,
                op,
                lanes,
                a,
                b,
            }) => {
                // Strong accesses and atomics on sync words bypass the private L2s: timed
                // as an atomic at the home LLC slice.
                let (line, sector) = self.word_sector(addr);
                let set = self.llc_set_here(line)?;
                let at = self.llc_atomic(now, set, line, sector, lanes);
                let value = self.sync.apply(addr, op, lanes, a, b);
                self.value_reply(now, From::Llc, sm, at, addr, value, tag, ctx, net);
            }
            Packet::Request(Request::LlcRead {
                line,
                sectors,
                tag,
                unit,
                ctx,
            }) => {
                let set = self.llc_set_here(line)?;
                self.llc_read_request(now, set, line, sectors, tag, unit, ctx, net);
            }
            Packet::Request(Request::LlcWrite { line, sectors, .. }) => {
                let set = self.llc_set_here(line)?;
                self.llc_write(now, set, line, sectors);
            }
            Packet::Response(Response::LlcReply {
                line,
                sectors,
                tag,
                unit,
                ..
            }) if unit == self.unit && (tag as usize) < self.slices.len() => {
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

    /// Sends the reply to SM unit `sm` of a request of `ctx` whose data can leave slice
    /// `from` at `ready` (through this chiplet's link interface when the SM is on another
    /// chiplet).
    /// Forced inline, as are `send_data` and `dram_access`: once per request, and left to
    /// itself LLVM keeps the calls.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn reply(
        &mut self,
        now: Picos,
        from: From,
        sm: u32,
        ready: Picos,
        line: u64,
        sectors: u64,
        tag: u32,
        ctx: Ctx,
        net: &mut dyn Net,
    ) {
        let data = popcount(sectors) * self.params.l2.geom.sector_bytes;
        self.stats.noc.reply_bytes += data + HEADER_BYTES;
        let pkt = Response::Reply {
            line,
            sectors,
            tag,
            sm,
            ctx,
        };
        self.send_data(now, from, ready, data, sm, pkt.into(), net);
    }

    /// Acknowledges to SM unit `sm` the write naming `tag` that slice `from` performed at
    /// `done`: a header-only packet out of the slice's NoC egress (`l2.write_acks`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ack(
        &mut self,
        now: Picos,
        from: From,
        sm: u32,
        done: Picos,
        line: u64,
        tag: u32,
        ctx: Ctx,
        net: &mut dyn Net,
    ) {
        self.stats.noc.reply_bytes += HEADER_BYTES;
        let Some(s) = self.slice_mut(from) else {
            return;
        };
        let te = s.noc_out.reserve(now, done, HEADER_BYTES);
        let pkt = Response::WriteAck { line, tag, sm, ctx };
        let dst = self.toward(sm);
        self.emit(from, dst, te, pkt.into(), net);
    }

    /// Where a packet for unit `dst` leaves this channel to: `dst` itself on this chiplet,
    /// else this chiplet's link interface.
    #[inline(always)]
    fn toward(&self, dst: u32) -> u32 {
        let ids = &self.map.ids;
        ids.toward(ids.chiplet_of_channel(self.channel), dst)
    }

    /// The slice `from` names (`None` for the LLC slice without a private L2).
    #[inline(always)]
    pub(super) fn slice_mut(&mut self, from: From) -> Option<&mut Slice> {
        match from {
            From::L2(i) => Some(&mut self.slices[i]),
            From::Llc => self.llc.as_mut(),
        }
    }

    /// Sends `pkt`, carrying `data` bytes that are ready at `ready`, through the data port
    /// and NoC egress of `from` to unit `dst` (through this chiplet's link interface when
    /// `dst` is on another chiplet).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn send_data(
        &mut self,
        now: Picos,
        from: From,
        ready: Picos,
        data: u64,
        dst: u32,
        pkt: Packet,
        net: &mut dyn Net,
    ) {
        let Some(s) = self.slice_mut(from) else {
            return;
        };
        let td = s.data_port.reserve(now, ready, data);
        let te = s.noc_out.reserve(now, td, data + HEADER_BYTES);
        let dst = self.toward(dst);
        self.emit(from, dst, te, pkt, net);
    }

    /// Reads or writes `sectors` of `line` in this channel's DRAM from `t` (counted);
    /// returns when the access is done.
    #[inline(always)]
    pub(super) fn dram_access(
        &mut self,
        now: Picos,
        t: Picos,
        line: u64,
        sectors: u64,
        op: DramOp,
    ) -> Picos {
        let bytes = popcount(sectors) * self.params.l2.geom.sector_bytes;
        let a = self.dram.map(self.map.chiplet_local(line));
        let done = self.dram.access(now, t, a, bytes, op);
        match op {
            DramOp::Read => {
                self.stats.dram.reads += popcount(sectors);
                self.stats.dram.read_bytes += bytes;
            }
            DramOp::Write => {
                self.stats.dram.writes += popcount(sectors);
                self.stats.dram.write_bytes += bytes;
            }
        }
        self.stats.dram.bytes += bytes;
        self.observed(MemLevel::Dram, t, line, sectors, 0, op == DramOp::Write);
        done
    }

    /// A host-to-device copy of `[addr, addr + bytes)` reached the GPU at `now`: with
    /// `memcpy.fills_l2`, the copied lines homed here are left in L2 (only the last
    /// `l2.size_bytes` of the copy, what LRU would leave), clean. With a private L2 they are
    /// left in the LLC instead (the last `llc.size_bytes` per chiplet): the copy arrives
    /// from the host at the lines' homes, so the private L2s start every run cold.
    pub fn memcpy(&mut self, now: Picos, addr: u64, bytes: u64) {
        if !self.params.fills_l2 || bytes == 0 {
            return;
        }
        self.set_ctx(Ctx::HOST);
        let end = addr.saturating_add(bytes);
        // Every chiplet's L2 together (each memory-side L2 holds only its chiplet's lines),
        // or every chiplet's LLC.
        let per_chiplet = if self.map.private {
            self.params.llc.size_bytes
        } else {
            self.params.l2.size_bytes
        };
        let l2_bytes = per_chiplet * self.map.ids.gpu_chiplets as u64;
        let start = if bytes > l2_bytes {
            (end - l2_bytes).max(addr)
        } else {
            addr
        };
        let lb = self.params.l2.geom.line_bytes;
        let map = self.map.dram_map;
        let (n, il) = (map.channels.d, map.interleave.d);
        if self.map.ids.chiplets > 1 {
            // Visit only the pages homed on this channel's chiplet.
            let chiplet = self.chiplet();
            let page = self.map.home.page_bytes();
            let mut p = start - start % page;
            while p < end {
                if self.map.locate(p).0 == chiplet {
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
        let geom = self.params.l2.geom;
        let lb = geom.line_bytes;
        let mut line = start - start % lb;
        while line < end {
            if self.map.private {
                let (home, set) = self.map.llc_home(line);
                if home == self.channel {
                    self.memcpy_llc_line(now, line, set, start, end);
                }
                match line.checked_add(lb) {
                    Some(n) => line = n,
                    None => break,
                }
                continue;
            }
            let (home, slice, set) = self.map.l2_home(line);
            let lo = line.max(start);
            let hi = line.saturating_add(lb).min(end);
            // (`hi == lo` only for a copy saturated at the top of the address space, which
            // `add_range` found empty.)
            if home == self.channel && hi > lo {
                // The part of the copy in this line (what `add_range` would give, without
                // a vector per chunk: this runs for every copied line).
                let sectors = geom.range_sectors(lo - line, hi - line);
                self.slice_install(now, From::L2(slice), set, line, sectors);
                self.stats.l2.memcpy_sectors += popcount(sectors);
            }
            match line.checked_add(lb) {
                Some(n) => line = n,
                None => break,
            }
        }
    }
}
