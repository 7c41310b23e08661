//! The LD/ST unit of one SM: a warp's memory instruction in (coalesced into lines by
//! `coalesce.rs`), to the L1D (`l1d.rs`: lookups, MSHRs, stores, write-backs) or the
//! shared-memory banks (`shared_mem.rs`); the L2 requests and writes out through the SM's
//! NoC ports, the replies in and the instructions they complete (the model is in the
//! module documentation of [`crate::mem`]).

use std::sync::Arc;

use super::address_map::AddressMap;
use super::coalesce::Geometry;
use super::coalesce::{self, add_range, LaneAddrs, LineAccess};
use super::credits::Credits;
use super::l1d::L1dParams;
use super::l1d::{L1d, Miss, Op, NO_WAY};
use super::noc::NocParams;
use super::port::BwPort;
use super::shared_mem::SharedMemParams;
use super::{
    popcount, Access, Ctx, L1dStats, MemRequest, Net, NocStats, Packet, Request, SharedMemStats,
    Space, HEADER_BYTES,
};
use crate::config::GpuConfig;
use crate::observe::{Observer, Probe};
use crate::per_kernel::{KernelMemStats, KernelTally, PerKernel};
use crate::Picos;

/// What [`LdStUnit::issue`] gives the warp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issued {
    /// The result is written (a load's data is there, a store's data has left) at this time.
    Done(Picos),
    /// The result comes with replies from L2: [`LdStUnit::on_reply`] reports it.
    Pending,
}

/// A warp instruction with replies outstanding.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct InstWait {
    pub(super) outstanding: u32,
    pub(super) ready: Picos,
}

/// The parameters of an SM's LD/ST unit: its L1D, shared-memory banks and NoC ports, and
/// the L2's line geometry its requests use.
#[derive(Clone, Debug)]
pub struct LdStParams {
    pub(crate) l1d: L1dParams,
    pub(crate) shared: SharedMemParams,
    pub(crate) noc: NocParams,
    pub(crate) l2_geom: Geometry,
    /// `l2.write_acks`: a store waits for its writes' acknowledgements.
    pub(crate) write_acks: bool,
}

impl LdStParams {
    pub fn from_config(cfg: &GpuConfig) -> LdStParams {
        LdStParams {
            l1d: L1dParams::from_config(cfg),
            shared: SharedMemParams::from_config(cfg),
            noc: NocParams::from_config(cfg),
            l2_geom: Geometry::new(cfg.l2.line_bytes, cfg.l2.sector_bytes),
            write_acks: cfg.l2.write_acks,
        }
    }
}

/// The counters of one SM's LD/ST unit, L1D and shared memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LdStStats {
    pub l1d: L1dStats,
    pub shared: SharedMemStats,
    pub noc: NocStats,
    /// Warp global/local/const instructions (loads, stores, atomics).
    pub global_requests: u64,
    /// Request packets (reads, writes, atomics) sent to a line homed on another chiplet of
    /// this GPU (through the link interfaces).
    pub remote_requests: u64,
    /// Request packets (reads, writes, atomics) sent to a line homed on another GPU
    /// (peer memory, through the GPU switch).
    pub peer_requests: u64,
    /// Request packets that waited in the miss queue for credit at the crossbar input
    /// (`noc.model: crossbar`), and the picoseconds they waited, summed.
    pub credit_waits: u64,
    pub credit_wait_ps: u64,
}

impl LdStStats {
    /// Adds every counter of `o`.
    pub fn add(&mut self, o: &LdStStats) {
        self.l1d.add(&o.l1d);
        self.shared.add(&o.shared);
        self.noc.add(&o.noc);
        self.global_requests += o.global_requests;
        self.remote_requests += o.remote_requests;
        self.peer_requests += o.peer_requests;
        self.credit_waits += o.credit_waits;
        self.credit_wait_ps += o.credit_wait_ps;
    }
}

/// A request packet waiting in the miss queue for credit at the crossbar.
#[derive(Clone, Copy, Debug)]
pub(super) struct Parked {
    /// When it was ready to leave.
    ready: Picos,
    bytes: u64,
    dst: u32,
    pkt: Packet,
}

/// The LD/ST unit, L1D and shared memory of one SM.
pub struct LdStUnit {
    /// Its own copy: read on every access, beside the state it updates.
    pub(super) params: LdStParams,
    pub(super) map: Arc<AddressMap>,
    /// Its unit id.
    pub(super) unit: u32,
    /// Its L1D: cache, tag/data stage, MSHRs.
    pub(super) l1d: L1d,
    /// The shared-memory banks: `banks * bank_bytes` per core cycle.
    pub(super) shared_port: BwPort,
    pub(super) noc_out: BwPort,
    pub(super) noc_in: BwPort,
    /// By token: the instructions with replies outstanding.
    pub(super) insts: Vec<InstWait>,
    pub(super) lines: Vec<LineAccess>,
    pub(super) groups: Vec<LineAccess>,
    /// L1 and L2 lines and sectors alike (every preset): an L1 line goes to L2 as is.
    pub(super) same_lines: bool,
    pub(super) stats: LdStStats,
    /// Its observer, if any.
    pub(super) probe: Option<Probe>,
    /// The chiplet of this SM.
    pub(super) chiplet: u32,
    /// The context of the kernel its warps run ([`LdStUnit::new_kernel`]): its requests
    /// and writes carry it.
    pub(super) ctx: Ctx,
    /// Its counters split by the kernel of its work.
    pub(super) per_kernel: PerKernel,
    /// Flits of credit at its crossbar input (`noc.input_buffer_flits`; `None`: no
    /// credits), with the miss queue of packets waiting for it (one channel), and the
    /// packets a credit lets go (scratch).
    pub(super) credits: Option<Credits<Parked>>,
    /// The NoC's flit, the unit of those credits.
    flit_bytes: u64,
    pub(super) go: Vec<Parked>,
    /// Its sync requests in flight (`ldst_sync.rs`).
    pub(super) sync: super::ldst_sync::SyncTable,
}

/// A reply naming no MSHR in flight (a corrupt packet).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("SM unit {unit}: a reply or write acknowledgement names tag {tag} (an MSHR or a store), which has nothing in flight")]
pub struct BadReply {
    pub unit: u32,
    pub tag: u32,
}

impl LdStUnit {
    /// The unit of SM `sm`.
    /// The unit of SM `sm`; its NoC ports and the credits of its crossbar input as
    /// `wiring` declares them.
    pub fn new(
        params: &LdStParams,
        map: Arc<AddressMap>,
        sm: u32,
        wiring: &crate::gpu::Wiring,
    ) -> LdStUnit {
        let (l1, sh) = (&params.l1d, &params.shared);
        let input_flits = wiring.sm_input_flits();
        LdStUnit {
            unit: map.ids.sm(sm),
            l1d: L1d::new(l1),
            shared_port: BwPort::new(sh.banks as u64 * sh.bank_bytes as u64, sh.clock_hz),
            noc_out: wiring.noc_port(),
            noc_in: wiring.noc_port(),
            insts: Vec::new(),
            lines: Vec::with_capacity(32),
            groups: Vec::with_capacity(8),
            same_lines: l1.geom.line_bytes == params.l2_geom.line_bytes
                && l1.geom.sector_bytes == params.l2_geom.sector_bytes,
            stats: LdStStats::default(),
            probe: None,
            chiplet: sm / map.ids.sms,
            ctx: Ctx::default(),
            per_kernel: PerKernel::default(),
            credits: (input_flits > 0).then(|| Credits::new(input_flits)),
            flit_bytes: wiring.noc_bandwidth().bytes_per_cycle.max(1),
            go: Vec::new(),
            sync: Default::default(),
            params: params.clone(),
            map,
        }
    }

    /// Where a read or write of L2 line `line_addr` goes: with a private L2, the channel
    /// unit of this chiplet whose slice caches the line; else as [`LdStUnit::route_home`].
    #[inline(always)]
    fn route(&mut self, line_addr: u64) -> u32 {
        if self.map.private {
            let (ch, _, _) = self.map.private_slot(self.chiplet, line_addr);
            return self.map.ids.channel(ch);
        }
        self.route_home(line_addr)
    }

    /// Where a request for L2 line `line_addr` goes when it must reach the line's home (a
    /// memory-side L2 slice, or with a private L2 the LLC slice, where atomics are
    /// performed): its home channel's unit, or this chiplet's link interface when the line
    /// is homed on another chiplet (of this GPU, or of another GPU: a peer access, whose
    /// reply is not cached in this GPU's L2, since a memory-side L2 caches only its own
    /// lines; the SM's L1D treats it as any global line).
    #[inline(always)]
    pub(super) fn route_home(&mut self, line_addr: u64) -> u32 {
        let (ch, _, _) = self.map.l2_home(line_addr);
        let ids = &self.map.ids;
        let home = ids.chiplet_of_channel(ch);
        if home == self.chiplet {
            ids.channel(ch)
        } else {
            if ids.gpu_of_chiplet(home) == ids.gpu_of_chiplet(self.chiplet) {
                self.stats.remote_requests += 1;
            } else {
                self.stats.peer_requests += 1;
            }
            ids.link(self.chiplet)
        }
    }

    /// Its counters, the miss queue's waits for credit (kept by its [`Credits`]) included.
    pub fn stats(&self) -> LdStStats {
        let mut s = self.stats;
        if let Some(c) = &self.credits {
            s.credit_waits = c.stats().credit_waits;
            s.credit_wait_ps = c.stats().credit_wait_ps;
        }
        s
    }

    /// Its memory counters in the per-kernel form.
    pub(super) fn kernel_view(&self) -> KernelMemStats {
        let s = &self.stats;
        KernelMemStats {
            l1d_accesses: s.l1d.accesses,
            l1d_hits: s.l1d.hits,
            l1d_misses: s.l1d.misses,
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

    /// Reports its L1D accesses to `obs` from now on.
    pub fn observe(&mut self, obs: Arc<dyn Observer>) {
        self.probe = Some(Probe::new(self.unit, obs));
    }

    /// MSHRs in use and misses waiting for one (nothing in flight when both are 0).
    pub fn in_flight(&self) -> (u32, usize) {
        (self.l1d.busy_mshrs, self.l1d.waiting.len())
    }

    /// The warp instruction `req` (its results named `token`, unique among the SM's
    /// instructions in flight) issues at `now`.
    pub fn issue(
        &mut self,
        now: Picos,
        req: &MemRequest<'_>,
        token: u32,
        net: &mut dyn Net,
    ) -> Issued {
        if req.space == Space::Shared {
            let passes = (!req.lanes.is_empty()).then(|| {
                let s = &self.params.shared;
                coalesce::shared_passes(req.lanes, req.width_bytes, s.banks, s.bank_bytes)
            });
            return Issued::Done(self.shared(now, passes));
        }
        self.stats.global_requests += 1;
        let hit_ps = self.params.l1d.hit_ps;
        let mut lines = std::mem::take(&mut self.lines);
        match req.contiguous {
            Some((addr, len)) if req.access != Access::Atomic && len > 0 => {
                lines.clear();
                add_range(&self.params.l1d.geom, addr, len, &mut lines);
            }
            _ => {
                if req.lanes.is_empty() {
                    self.lines = lines;
                    return Issued::Done(now + hit_ps);
                }
                coalesce::coalesce(
                    &self.params.l1d.geom,
                    req.lanes,
                    req.width_bytes,
                    &mut lines,
                );
            }
        }
        self.issue_lines(now, req.access, req.space, lines, req.lanes, token, net)
    }

    /// [`Self::issue`] of a load or store whose active lanes' addresses are given in the
    /// trace's compressed form (no `(lane, address)` vector; atomics, which count their
    /// lanes per line, go through [`Self::issue`]).
    #[allow(clippy::too_many_arguments)]
    pub fn issue_addrs(
        &mut self,
        now: Picos,
        access: Access,
        space: Space,
        width: u32,
        lanes: LaneAddrs<'_>,
        token: u32,
        net: &mut dyn Net,
    ) -> Issued {
        if space == Space::Shared {
            let passes = (!lanes.is_empty()).then(|| {
                let s = &self.params.shared;
                coalesce::shared_passes_addrs(lanes, width, s.banks, s.bank_bytes)
            });
            return Issued::Done(self.shared(now, passes));
        }
        debug_assert!(access != Access::Atomic);
        self.stats.global_requests += 1;
        if lanes.is_empty() {
            return Issued::Done(now + self.params.l1d.hit_ps);
        }
        let mut lines = std::mem::take(&mut self.lines);
        coalesce::coalesce_addrs(&self.params.l1d.geom, lanes, width, &mut lines);
        self.issue_lines(now, access, space, lines, &[], token, net)
    }

    /// Issues the coalesced `lines` (taken from `self.lines`, given back); `lanes` are
    /// read only by atomics. Inlined: a call passing all this costs more than its body on
    /// a one-line access.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn issue_lines(
        &mut self,
        now: Picos,
        access: Access,
        space: Space,
        lines: Vec<LineAccess>,
        lanes: &[(u32, u64)],
        token: u32,
        net: &mut dyn Net,
    ) -> Issued {
        let hit_ps = self.params.l1d.hit_ps;
        let use_l1 = space == Space::Local || self.params.l1d.enabled;
        let mut w = InstWait {
            outstanding: 0,
            ready: now + hit_ps,
        };
        let geom = self.params.l1d.geom;
        if use_l1 {
            self.prefetch_lines(&lines);
        }
        for la in &lines {
            let t = self.l1d.port.reserve(now, now, geom.line_bytes);
            match access {
                Access::Load => self.load_line(now, t, la, use_l1, token, &mut w, net),
                Access::Store => {
                    let ack = if self.params.write_acks {
                        token
                    } else {
                        Request::NO_ACK
                    };
                    let (d, acks) = self.store_line(now, t, la, use_l1, space, ack, net);
                    w.ready = w.ready.max(d);
                    w.outstanding += acks;
                }
                Access::Atomic => {
                    let set = geom.line_index(la.line_addr);
                    let ops = lanes
                        .iter()
                        .filter(|&&(_, a)| geom.line_index(a) == set)
                        .count() as u32;
                    // Atomics bypass L1: its copy of their sectors is dropped.
                    if let Some(i) = self.l1d.cache.find(set, la.line_addr) {
                        self.l1d.cache.invalidate_sectors(i, la.sectors);
                    }
                    w.outstanding += 1;
                    let miss = Miss {
                        line: la.line_addr,
                        sectors: la.sectors,
                        token,
                        op: Op::Atomic(ops),
                        fill_l1: false,
                        ctx: self.ctx,
                    };
                    self.start_miss(now, t, miss, net);
                }
            }
        }
        self.lines = lines;
        if w.outstanding == 0 {
            return Issued::Done(w.ready);
        }
        self.set_wait(token, w);
        Issued::Pending
    }

    /// A reply arrives at `now`. Instructions whose last reply this was are pushed to
    /// `done` as `(token, time their result is written)`. Forced inline (into the SM's
    /// visit, its one caller), as are the SM's `mem_reply` and `touch`: once per reply.
    #[inline(always)]
    pub fn on_reply(
        &mut self,
        now: Picos,
        sectors: u64,
        tag: u32,
        net: &mut dyn Net,
        done: &mut Vec<(u32, Picos)>,
    ) -> Result<(), BadReply> {
        let bad = BadReply {
            unit: self.unit,
            tag,
        };
        let m = tag as usize;
        if self.l1d.mshrs.get(m).is_none_or(|x| x.replies == 0) {
            return Err(bad);
        }
        let bytes = HEADER_BYTES + popcount(sectors) * self.params.l2_geom.sector_bytes;
        let ti = self.noc_in.reserve(now, now, bytes);
        let hit_ps = self.params.l1d.hit_ps;
        let x = &mut self.l1d.mshrs[m];
        x.ready = x.ready.max(ti + hit_ps);
        x.replies -= 1;
        if x.replies > 0 {
            return Ok(());
        }
        let ready = x.ready;
        let line = x.line;
        if x.fill_l1 {
            self.l1d.by_line.remove(line, tag, &mut self.l1d.mshrs);
            let set = self.params.l1d.geom.line_index(line);
            let hint = self.l1d.mshrs[m].l1_way;
            let way = if hint != NO_WAY && self.l1d.cache.tag(hint as usize) == line {
                Some(hint as usize)
            } else {
                self.l1d.cache.find(set, line)
            };
            if let Some(i) = way {
                let p = self.l1d.cache.pending_mask(i) & self.l1d.mshrs[m].sectors;
                self.l1d.cache.fill(i, p, ready);
            }
        }
        let first = self.l1d.mshrs[m].waiter;
        self.wake(first, ready, done);
        if self.l1d.mshrs[m].more {
            self.l1d.mshrs[m].more = false;
            let mut more = std::mem::take(&mut self.l1d.more_waiters[m]);
            for &token in &more {
                self.wake(token, ready, done);
            }
            more.clear();
            self.l1d.more_waiters[m] = more;
        }
        self.l1d.free_mshrs.push(tag);
        self.l1d.busy_mshrs -= 1;
        // Misses waiting for an MSHR leave when the fill frees one.
        while self.l1d.busy_mshrs < self.params.l1d.mshrs {
            let Some(miss) = self.l1d.waiting.pop_front() else {
                break;
            };
            self.start_miss(now, ti, miss, net);
        }
        Ok(())
    }

    /// The acknowledgement of a write of store instruction `tag` arrives at `now`; pushes
    /// the instruction to `done` when it was its last (`l2.write_acks`).
    #[inline(always)]
    pub fn on_ack(
        &mut self,
        now: Picos,
        tag: u32,
        done: &mut Vec<(u32, Picos)>,
    ) -> Result<(), BadReply> {
        if self
            .insts
            .get(tag as usize)
            .is_none_or(|w| w.outstanding == 0)
        {
            return Err(BadReply {
                unit: self.unit,
                tag,
            });
        }
        let ti = self.noc_in.reserve(now, now, HEADER_BYTES);
        self.wake(tag, ti, done);
        Ok(())
    }

    /// Instruction `token` waits as `w` says (its replies outstanding) from now on.
    pub(super) fn set_wait(&mut self, token: u32, w: InstWait) {
        let k = token as usize;
        if self.insts.len() <= k {
            self.insts.resize(k + 1, InstWait::default());
        }
        self.insts[k] = w;
    }

    /// Instruction `token` has one more reply's data at `ready`.
    #[inline]
    pub(super) fn wake(&mut self, token: u32, ready: Picos, done: &mut Vec<(u32, Picos)>) {
        if let Some(w) = self.insts.get_mut(token as usize) {
            w.ready = w.ready.max(ready);
            w.outstanding = w.outstanding.saturating_sub(1);
            if w.outstanding == 0 {
                done.push((token, w.ready));
            }
        }
    }

    /// Sends the L2 requests for `sectors` of L1 line `line` at `t`; returns how many.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn send_requests(
        &mut self,
        now: Picos,
        t: Picos,
        line: u64,
        sectors: u64,
        op: Op,
        tag: u32,
        ctx: Ctx,
        net: &mut dyn Net,
    ) -> u32 {
        if self.same_lines {
            // The L1 line is the L2 line: one request, no group list.
            self.send_request(now, t, line, sectors, op, tag, ctx, net);
            return 1;
        }
        let mut groups = std::mem::take(&mut self.groups);
        self.l2_groups(line, sectors, &mut groups);
        for g in &groups {
            self.send_request(now, t, g.line_addr, g.sectors, op, tag, ctx, net);
        }
        let n = groups.len() as u32;
        self.groups = groups;
        n
    }

    /// Sends the L2 request for `sectors` of L2 line `line` at `t`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn send_request(
        &mut self,
        now: Picos,
        t: Picos,
        line: u64,
        sectors: u64,
        op: Op,
        tag: u32,
        ctx: Ctx,
        net: &mut dyn Net,
    ) {
        let sb = self.params.l2_geom.sector_bytes;
        let (bytes, req) = match op {
            Op::Read => (
                HEADER_BYTES,
                Request::Read {
                    line,
                    sectors,
                    tag,
                    sm: self.unit,
                    ctx,
                },
            ),
            Op::Atomic(ops) => (
                HEADER_BYTES + popcount(sectors) * sb,
                Request::Atomic {
                    line,
                    sectors,
                    tag,
                    sm: self.unit,
                    ctx,
                    // At most a warp's lanes.
                    ops: u8::try_from(ops).unwrap_or(u8::MAX),
                },
            ),
        };
        let dst = match op {
            Op::Read => self.route(line),
            Op::Atomic(_) => self.route_home(line),
        };
        self.inject(now, t, bytes, dst, req.into(), net);
    }

    /// Sends request packet `pkt` of `bytes` to unit `dst`, ready at `t`, through the SM's
    /// NoC egress; returns when it leaves (or `t` when it waits for credit, the
    /// departure then being learnt from its answer).
    #[inline(always)]
    pub(super) fn inject(
        &mut self,
        now: Picos,
        t: Picos,
        bytes: u64,
        dst: u32,
        pkt: Packet,
        net: &mut dyn Net,
    ) -> Picos {
        self.stats.noc.request_bytes += bytes;
        if let Some(c) = &mut self.credits {
            let flits = bytes.div_ceil(self.flit_bytes);
            // A wait for credit counts from when the packet is ready to leave.
            let p = Parked {
                ready: t,
                bytes,
                dst,
                pkt,
            };
            if c.offer(t, 0, flits, p).is_none() {
                return t;
            }
        }
        let dep = self.noc_out.reserve(now, t, bytes);
        net.send(self.unit, dst, dep, pkt);
        dep
    }

    /// Whether its miss queue is full (the SM may issue no memory instruction).
    #[inline]
    pub fn full(&self) -> bool {
        self.credits
            .as_ref()
            .is_some_and(|c| c.waiting() >= self.params.l1d.miss_queue)
            || self.sync_full()
    }

    /// `flits` of credit come back from the crossbar at `now`: the packets waiting for it
    /// leave, in order.
    pub fn on_credit(&mut self, now: Picos, flits: u64, net: &mut dyn Net) {
        let Some(c) = &mut self.credits else {
            return;
        };
        let mut go = std::mem::take(&mut self.go);
        c.credit(now, 0, flits, &mut go);
        for p in go.drain(..) {
            let dep = self.noc_out.reserve(now, p.ready.max(now), p.bytes);
            net.send(self.unit, p.dst, dep, p.pkt);
        }
        self.go = go;
    }

    /// The L2 lines and sectors holding `sectors` of L1 line `line_addr`.
    fn l2_groups(&self, line_addr: u64, sectors: u64, out: &mut Vec<LineAccess>) {
        out.clear();
        if self.same_lines {
            out.push(LineAccess {
                line_addr,
                sectors,
                bytes: 0,
            });
            return;
        }
        let sb = self.params.l1d.geom.sector_bytes;
        for s in 0..64u64 {
            if sectors & (1 << s) != 0 {
                add_range(&self.params.l2_geom, line_addr + s * sb, sb, out);
            }
        }
    }

    /// Sends `sectors` of L1 line `line_addr` as writes to L2 from `t` for `ctx`, each
    /// acknowledged naming `ack` unless it is [`Request::NO_ACK`]; returns when the last
    /// packet has left the SM and how many packets were sent.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn send_write(
        &mut self,
        now: Picos,
        t: Picos,
        line_addr: u64,
        sectors: u64,
        ctx: Ctx,
        ack: u32,
        net: &mut dyn Net,
    ) -> (Picos, u32) {
        if self.same_lines {
            let dep = self.send_one_write(now, t, line_addr, sectors, ctx, ack, net);
            return (dep.max(t), 1);
        }
        let mut groups = std::mem::take(&mut self.groups);
        self.l2_groups(line_addr, sectors, &mut groups);
        let mut left = t;
        for g in &groups {
            let dep = self.send_one_write(now, t, g.line_addr, g.sectors, ctx, ack, net);
            left = left.max(dep);
        }
        let n = groups.len() as u32;
        self.groups = groups;
        (left, n)
    }

    /// Sends the write of `sectors` of L2 line `line` from `t`; returns when it leaves.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn send_one_write(
        &mut self,
        now: Picos,
        t: Picos,
        line: u64,
        sectors: u64,
        ctx: Ctx,
        ack: u32,
        net: &mut dyn Net,
    ) -> Picos {
        let bytes = HEADER_BYTES + popcount(sectors) * self.params.l2_geom.sector_bytes;
        let dst = self.route(line);
        let pkt = Request::Write {
            line,
            sectors,
            tag: ack,
            sm: self.unit,
            ctx,
        };
        self.inject(now, t, bytes, dst, pkt.into(), net)
    }
}
