//! One simulation partition of a GPU: a set of units (the command processor, SMs with their
//! LD/ST units, DRAM channels with their L2 slices) simulated together, talking to each
//! other and to units in other partitions only through packets (DESIGN.md sections 4 and
//! 5).
//!
//! Every unit processes its events in time order: at time `t`, first the packets that have
//! arrived by `t`, in `(arrive_at, source unit, source sequence)` order, then its own work
//! due at `t` (an SM's cycle, the CP's next command). Units share no state and every packet
//! takes at least the lookahead, so the order in which different units are processed never
//! matters, and a packet to a unit of the same partition (queued here) is consumed exactly
//! as one to a unit of another partition (delivered by the engine at the end of a window):
//! how the GPU is cut into partitions never changes results.
//!
//! The same argument lets an SM or a DRAM channel run ahead of the other units of its
//! partition (`partitioning.run_ahead`): every packet to an SM is a reply (at least the NoC
//! latency after its sender's time; with one chiplet and a memory-side L2, the L2 hit
//! latency plus the NoC latency) or a CTA dispatch (after a slice start, at least
//! `gcp_to_lcp_ps` away, or the answer to the SM's own completion report); every packet to a
//! channel is a request or reply over the NoC, a host copy or a kernel-boundary flush. So from
//! global time `t` such a unit runs all its events before the earliest such arrival in one
//! visit ([`GpuPartition::run_sm`], [`GpuPartition::run_channel`]), its state touched once
//! per visit instead of once per cycle: vectoradd n=200,704 on rtx3070 takes 51% fewer host
//! L1 data misses (cachegrind). Every packet is checked against how far its destination has
//! run (`Wires::ahead`), so a broken premise is an error, never a silent change of results.

use std::collections::VecDeque;
use std::sync::Arc;

use tessera_interconnect::{BoxError, Message, Outbox, Partition, PortId, Sequence};
use tessera_traces::{Addrs, ChunkDecoder, KernelMeta, OpClass, Scope, TraceFile, WarpInst};

use super::control::Control;
use super::cp::CommandProcessor;
use super::wake::WakeQueue;
use super::wiring::Wiring;
use super::{classify, cycle_at, GpuError, UnitParams};
use crate::mem::coalesce::LaneAddrs;
use crate::mem::ldst_sync::{SyncGroup, SyncValues};
use crate::mem::{
    Access, CrossbarUnit, Ctx, Issued, LdStUnit, LinkInterface, MemChannel, MemRequest, Response,
    Space, SyncOp, Unit, UnitIds,
};
use crate::observe::{Observer, Probe};
use crate::packet::{Net, Packet};
use crate::sm::{KernelPrep, LocalValues, MemIssue, MemPort, MemToken, Sm};
use crate::Picos;

/// A packet waiting at its destination, ordered by `(arrive_at, source unit, source
/// sequence)`: the last two packed in one word (`tie`), so the order is one 128-bit
/// comparison and an entry 8 bytes smaller (insertions move entries).
#[derive(Clone, Copy, Debug)]
struct Arrival {
    at: Picos,
    /// `src << SEQ_BITS | seq`.
    tie: u64,
    pkt: Packet,
}

/// Bits of a source's sequence number in [`Arrival::tie`]; unit ids take the other 16
/// (at most [`crate::packet::MAX_UNIT`], checked when a GPU is built). A unit would have to
/// send 2^48 packets to overflow it; [`Wires::send`] and `deliver` stop the run if one
/// does, rather than misorder packets.
const SEQ_BITS: u32 = 48;

/// The error of a unit whose packets outnumber what [`Arrival::tie`] can order.
fn too_many_packets(src: u32) -> BoxError {
    Box::new(GpuError::Protocol(format!(
        "unit {src} sent more than 2^{SEQ_BITS} packets: more than a run can order"
    )))
}

impl Arrival {
    #[inline]
    fn new(at: Picos, src: u32, seq: u64, pkt: Packet) -> Arrival {
        Arrival {
            at,
            tie: (src as u64) << SEQ_BITS | seq,
            pkt,
        }
    }

    #[inline]
    fn key(&self) -> u128 {
        (self.at as u128) << 64 | self.tie as u128
    }

    #[inline]
    fn src(&self) -> u32 {
        (self.tie >> SEQ_BITS) as u32
    }
}

/// The packets waiting at one unit, in arrival order: a ring kept sorted on insertion.
/// Packets mostly arrive in order (a constant NoC latency after senders processed in time
/// order), so an insertion is usually a push at the back, and a removal is always one at
/// the front; a binary heap paid a logarithmic sift of entries for both.
///
/// A ring of its own rather than a `VecDeque`: a late packet is inserted a few places from
/// the back by moving those entries one by one, where `VecDeque::insert` took a call, its
/// wrap-around cases and a `memmove` (triad n=524,288 on titanv: 235 host instructions per
/// late insertion).
#[derive(Clone, Debug, Default)]
struct Inbox {
    /// A power-of-two number of slots (none before the first packet); those outside the
    /// `len` from `head` hold stale copies.
    buf: Vec<Arrival>,
    head: usize,
    len: usize,
    /// Instead, a binary heap (the ring empty): for a NoC crossbar, to which every unit of
    /// its chiplet sends, each packet a constant latency after a sender that may have run
    /// far ahead, so most packets are late, many of them far from the back of a long
    /// inbox (a ring moved thousands of entries per such packet: vectorAdd on rtx3070,
    /// 37% of the run's host instructions). The same order: the keys are unique.
    heap: Option<std::collections::BinaryHeap<std::cmp::Reverse<Keyed>>>,
}

/// An arrival ordered by its key, for [`Inbox::heap`].
#[derive(Clone, Copy, Debug)]
struct Keyed(Arrival);

impl PartialEq for Keyed {
    fn eq(&self, o: &Keyed) -> bool {
        self.0.key() == o.0.key()
    }
}
impl Eq for Keyed {}
impl PartialOrd for Keyed {
    fn partial_cmp(&self, o: &Keyed) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Keyed {
    fn cmp(&self, o: &Keyed) -> std::cmp::Ordering {
        self.0.key().cmp(&o.0.key())
    }
}

/// A late packet moving at most this many entries moves them one by one; more, by
/// `copy_within` (a `memmove`, whose call costs as much as moving a few entries).
const INBOX_SHORT_MOVE: usize = 8;

impl Inbox {
    #[inline]
    fn mask(&self) -> usize {
        self.buf.len().wrapping_sub(1)
    }

    /// The `i`-th waiting packet (`i < len`).
    #[inline]
    fn at(&self, i: usize) -> &Arrival {
        &self.buf[(self.head + i) & self.mask()]
    }

    /// An inbox kept as a binary heap ([`Inbox::heap`]).
    fn heap() -> Inbox {
        Inbox {
            heap: Some(Default::default()),
            ..Inbox::default()
        }
    }

    #[inline]
    fn push(&mut self, a: Arrival) {
        if let Some(h) = &mut self.heap {
            h.push(std::cmp::Reverse(Keyed(a)));
            return;
        }
        if self.len == self.buf.len() {
            self.grow(a);
        }
        let k = a.key();
        let n = self.len;
        let mask = self.mask();
        if n == 0 || self.at(n - 1).key() < k {
            self.buf[(self.head + n) & mask] = a;
            self.len = n + 1;
            return;
        }
        // A late packet: by a galloping search from the back, since an inbox can hold
        // hundreds of replies already on their way (a DRAM channel sends each reply when
        // it takes the request), which a scan from the back would step over one by one,
        // while most late packets land a few places from the back (triad on titanv: 62% of
        // packets are late, two thirds of them 4 to 31 places from the back of inboxes 142
        // long on average), where the search then stays, in memory just written.
        // `at(n - hi)` is known not to come before `a` (the back), `at(n - lo)` to do.
        let mut hi = 1;
        let mut lo = 2;
        while lo <= n && self.at(n - lo).key() >= k {
            hi = lo;
            lo *= 2;
        }
        // The first place in `(n - lo, n - hi]` whose entry does not come before `a`.
        let (mut l, mut r) = ((n + 1).saturating_sub(lo), n - hi);
        while l < r {
            let m = (l + r) / 2;
            if self.at(m).key() < k {
                l = m + 1;
            } else {
                r = m;
            }
        }
        self.insert_at(l, a);
    }

    /// Inserts `a` as the `l`-th packet (`l < len < slots`), moving the packets on the
    /// shorter side: the later ones one slot back, or the earlier ones one slot forward
    /// (a late request far from the back of a channel's inbox is near its front).
    #[inline]
    fn insert_at(&mut self, l: usize, a: Arrival) {
        let (h, n, mask) = (self.head, self.len, self.mask());
        if n - l <= l {
            if n - l <= INBOX_SHORT_MOVE {
                let mut j = n;
                while j > l {
                    self.buf[(h + j) & mask] = self.buf[(h + j - 1) & mask];
                    j -= 1;
                }
            } else {
                self.move_back((h + l) & mask, n - l);
            }
            self.buf[(h + l) & mask] = a;
        } else {
            if l <= INBOX_SHORT_MOVE {
                for j in 0..l {
                    self.buf[(h + j).wrapping_sub(1) & mask] = self.buf[(h + j) & mask];
                }
            } else {
                self.move_forward(h, l);
            }
            self.head = h.wrapping_sub(1) & mask;
            self.buf[(h + l).wrapping_sub(1) & mask] = a;
        }
        self.len = n + 1;
    }

    /// Moves the `count` slots from slot `s` (cyclically) one slot back: the slot after
    /// them is free.
    fn move_back(&mut self, s: usize, count: usize) {
        let slots = self.buf.len();
        let e = s + count;
        if e < slots {
            self.buf.copy_within(s..e, s + 1);
        } else {
            // `s..slots` then `0..e - slots`: the second part first, the last slot wraps.
            self.buf.copy_within(0..e - slots, 1);
            self.buf[0] = self.buf[slots - 1];
            self.buf.copy_within(s..slots - 1, s + 1);
        }
    }

    /// Moves the `count` slots from slot `s` (cyclically) one slot forward: the slot
    /// before them is free.
    fn move_forward(&mut self, s: usize, count: usize) {
        let slots = self.buf.len();
        let e = s + count;
        if s == 0 {
            self.buf[slots - 1] = self.buf[0];
            self.buf.copy_within(1..e, 0);
        } else if e <= slots {
            self.buf.copy_within(s..e, s - 1);
        } else {
            // `s..slots` then `0..e - slots`: the first part first, slot 0 wraps.
            self.buf.copy_within(s..slots, s - 1);
            self.buf[slots - 1] = self.buf[0];
            self.buf.copy_within(1..e - slots, 0);
        }
    }

    /// Twice the slots (16 at first), the packets first; `a` fills the rest.
    #[cold]
    fn grow(&mut self, a: Arrival) {
        let slots = (self.buf.len() * 2).max(16);
        let mut buf = Vec::with_capacity(slots);
        buf.extend((0..self.len).map(|i| *self.at(i)));
        buf.resize(slots, a);
        self.buf = buf;
        self.head = 0;
    }

    #[inline]
    fn head(&self) -> Option<Picos> {
        if let Some(h) = &self.heap {
            return h.peek().map(|r| r.0 .0.at);
        }
        (self.len > 0).then(|| self.at(0).at)
    }

    /// Removes the first packet when it arrives by `t`.
    #[inline]
    fn pop_by(&mut self, t: Picos) -> Option<Arrival> {
        if let Some(h) = &mut self.heap {
            if h.peek().is_some_and(|r| r.0 .0.at <= t) {
                return h.pop().map(|r| r.0 .0);
            }
            return None;
        }
        if self.len > 0 && self.at(0).at <= t {
            let a = *self.at(0);
            self.head = (self.head + 1) & self.mask();
            self.len -= 1;
            return Some(a);
        }
        None
    }

    /// The packets arriving before `t`, in order (left in the inbox; none for a heap,
    /// whose unit does not ask).
    #[inline]
    fn before(&self, t: Picos) -> impl Iterator<Item = &Packet> {
        (0..self.len)
            .map(|i| self.at(i))
            .take_while(move |a| a.at < t)
            .map(|a| &a.pkt)
    }
}

/// The packet plumbing of one partition: inboxes of its units, the wake-up queue, the
/// per-unit sequence numbers, and the packets for other partitions.
pub(super) struct Wires {
    ids: UnitIds,
    /// The connections between units and their latencies.
    wiring: Wiring,
    /// By unit id: hosted here.
    hosted: Vec<bool>,
    /// By unit id.
    inbox: Vec<Inbox>,
    wake: WakeQueue,
    /// By unit id: its packets' sequence numbers (a unit is one sender to many peers,
    /// stamped as an `interconnect` `Port` stamps its messages).
    seq: Vec<Sequence>,
    out: Vec<Message>,
    /// The time being processed: no packet may arrive before it (the causality check the
    /// engine makes at partition boundaries, made here for packets that stay inside).
    now: Picos,
    /// The first packet that broke it: `(src, dst, arrive_at, now)`.
    early: Option<(u32, u32, Picos, Picos)>,
    /// A unit that has sent more packets than [`Arrival::tie`] can number.
    seq_overflow: Option<u32>,
    /// By unit id: the time up to which (exclusive) the unit has already processed its
    /// events, past [`Wires::now`] when an SM or channel ran ahead (see
    /// `GpuPartition::run_ahead`): a packet arriving before it would have changed what was
    /// done, and breaks the lookahead as an early one breaks causality.
    ahead: Vec<Picos>,
    /// Every `(source, destination)` a packet went between (the wiring's tests).
    #[cfg(test)]
    pub(super) pairs: std::collections::BTreeSet<(u32, u32)>,
}

impl Wires {
    /// The plumbing of the units `hosted` (by unit id) says are this partition's, at time 0.
    fn new(wiring: Wiring, hosted: Vec<bool>) -> Wires {
        let ids = *wiring.ids();
        let n = ids.count() as usize;
        Wires {
            ids,
            wiring,
            hosted,
            inbox: (0..n as u32)
                .map(|u| match ids.unit(u) {
                    Some(Unit::Xbar(_)) => Inbox::heap(),
                    _ => Inbox::default(),
                })
                .collect(),
            wake: WakeQueue::new(n),
            seq: vec![Sequence::default(); n],
            out: Vec::new(),
            now: 0,
            early: None,
            seq_overflow: None,
            ahead: vec![0; n],
            #[cfg(test)]
            pairs: Default::default(),
        }
    }

    #[inline(always)]
    fn schedule(&mut self, unit: u32, at: Picos) {
        self.wake.schedule(unit, at);
    }

    fn inbox_head(&self, unit: u32) -> Option<Picos> {
        self.inbox[unit as usize].head()
    }

    /// The next packet to `unit` arrived by `t`.
    fn pop_arrived(&mut self, unit: u32, t: Picos) -> Option<(Picos, u32, Packet)> {
        let a = self.inbox[unit as usize].pop_by(t)?;
        Some((a.at, a.src(), a.pkt))
    }
}

impl Net for Wires {
    #[inline(always)]
    fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    // As the provided method, one call with the delivery inside (it runs for every packet).
    fn send(&mut self, src: u32, dst: u32, depart: Picos, pkt: Packet) {
        let (to, latency) = self.wiring.hop(src, dst);
        self.deliver(src, to, depart + latency, pkt);
    }

    #[inline(always)]
    fn deliver(&mut self, src: u32, dst: u32, arrive_at: Picos, pkt: Packet) {
        #[cfg(test)]
        self.pairs.insert((src, dst));
        let floor = self
            .ahead
            .get(dst as usize)
            .map_or(self.now, |&a| a.max(self.now));
        if arrive_at < floor && self.early.is_none() {
            self.early = Some((src, dst, arrive_at, floor));
        }
        let seq = self.seq[src as usize].take();
        if seq >> SEQ_BITS != 0 {
            self.seq_overflow = Some(src);
        }
        if self.hosted.get(dst as usize).copied().unwrap_or(false) {
            self.inbox[dst as usize].push(Arrival::new(arrive_at, src, seq, pkt));
            self.schedule(dst, arrive_at);
        } else {
            self.out.push(Message {
                arrive_at,
                src_port: PortId(src),
                src_seq: seq,
                dst_port: PortId(dst),
                payload: pkt.to_payload(),
            });
        }
    }
}

/// An SM with its LD/ST unit.
pub(super) struct SmUnit {
    pub(super) index: u32,
    pub(super) sm: Sm,
    pub(super) ldst: LdStUnit,
    /// The kernel of its CTAs (the last one it ran).
    kernel: Option<u32>,
    /// Warp and thread instructions per kernel.
    pub(super) per_kernel: Vec<(u64, u64)>,
    /// Its counters when it started its current kernel.
    base: (u64, u64),
    /// [`Sm::next_event`] when it was last asked (valid until a packet arrives).
    next_own: Option<u64>,
    /// CTAs it has been sent.
    pub(super) ctas: u64,
    /// The slot of its chiplet's CP when this partition hosts it.
    cp: Option<usize>,
    /// When the CP's answers to its completion reports in flight can arrive (report
    /// arrival + `cta_dispatch_ps`), oldest first: it must not run ahead past them.
    answers: VecDeque<Picos>,
}

impl SmUnit {
    /// The memory instructions in `done` (`(token, time)`) had their last reply or write
    /// acknowledgement: their results are written at the SM's cycle of each (`period`, the
    /// core clock's), not before its current one.
    #[inline(always)]
    fn results_in(&mut self, done: &[(u32, Picos)], period: Picos) {
        for &(token, ps) in done {
            let c = cycle_at(ps, period).max(self.sm.now());
            self.sm.mem_reply(MemToken(token), c);
        }
    }

    /// Where its run ahead from a visit with `horizon` stops: there, or earlier at the
    /// answer to a completion report it has sent.
    fn stop(&self, horizon: Picos) -> Picos {
        self.answers.front().map_or(horizon, |&a| a.min(horizon))
    }

    /// The value of its sync request `tag` arrives at `at`: its lanes' values go to the
    /// SM, then the instruction's result if it was its last. Out of line: sync traffic only.
    #[inline(never)]
    fn sync_value(
        &mut self,
        at: Picos,
        tag: u32,
        value: u32,
        done: &mut Vec<(u32, Picos)>,
        values: &mut Vec<SyncValues>,
        period: Picos,
    ) -> Result<(), GpuError> {
        done.clear();
        values.clear();
        self.ldst
            .on_value(at, tag, value, done, values)
            .map_err(|e| GpuError::Protocol(format!("SM {}: {e}", self.index)))?;
        for v in values.iter() {
            self.sm.sync_values(MemToken(v.token), v.mask, &v.values);
        }
        self.results_in(done, period);
        Ok(())
    }

    /// The kernel of its CTAs (the last one it ran).
    pub(super) fn kernel(&self) -> Option<u32> {
        self.kernel
    }

    /// Adds the instructions retired since the kernel started to that kernel.
    fn attribute(&mut self) {
        let Some(k) = self.kernel else { return };
        let st = self.sm.stats();
        let now = (st.warp_insts, st.thread_insts);
        let k = k as usize;
        if self.per_kernel.len() <= k {
            self.per_kernel.resize(k + 1, (0, 0));
        }
        self.per_kernel[k].0 += now.0 - self.base.0;
        self.per_kernel[k].1 += now.1 - self.base.1;
        self.base = now;
    }
}

/// What a unit id is in this partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Remote,
    Cp(usize),
    Sm(usize),
    Channel(usize),
    Link(usize),
    Xbar(usize),
}

/// One partition of a GPU.
pub struct GpuPartition<'t> {
    index: usize,
    trace: &'t TraceFile,
    dec: ChunkDecoder<'t>,
    period: Picos,
    /// From an SM's completion report leaving to its CP's answer (a CTA) arriving at it:
    /// the connection's latency each way ([`Wiring`]).
    answer_ps: Picos,
    /// The least time a packet between an SM and a DRAM channel takes (the NoC latency;
    /// 0 with `partitioning.run_ahead` off): the lookahead of [`GpuPartition::run_sm`] and
    /// [`GpuPartition::run_channel`], before the CPs' floors.
    unit_lookahead: Picos,
    /// The least time from a unit's event to a reply it sends reaching an SM: with one
    /// chiplet and a memory-side L2 (no link interface, no private L2) every reply comes
    /// from an L2 slice, which answers a request taken at `t` no earlier than
    /// `t + l2.hit_latency` and sends it over the NoC (`MemChannel::on_packet`); otherwise
    /// [`GpuPartition::unit_lookahead`]. The lookahead of [`GpuPartition::run_sm`].
    sm_lookahead: Picos,
    /// The end of the window being run ([`Partition::run_until`]): no unit runs past it,
    /// since packets from other partitions may arrive from it on.
    end: Picos,
    /// By kernel: the issue stage's view of it, made when an SM here first needs it.
    preps: Vec<Option<Arc<KernelPrep>>>,
    /// By kernel: its context ([`Ctx::for_kernels`]).
    ctxs: Arc<[Ctx]>,
    wires: Wires,
    slot: Vec<Slot>,
    pub(super) cps: Vec<CommandProcessor>,
    pub(super) sms: Vec<SmUnit>,
    pub(super) channels: Vec<MemChannel>,
    pub(super) links: Vec<LinkInterface>,
    pub(super) xbars: Vec<CrossbarUnit>,
    /// By chiplet: its crossbar, when this partition hosts it (an index of `xbars`).
    xbar_of: Vec<Option<usize>>,
    /// The crossbar to a unit (`noc.model: crossbar`).
    from_xbar_ps: Picos,
    lanes: Vec<(u32, u64)>,
    done: Vec<(u32, Picos)>,
    /// The trace's sync words (issue 24), and scratch for sync groups and values.
    sync_words: Arc<[tessera_traces::SyncWords]>,
    groups: Vec<SyncGroup>,
    values: Vec<SyncValues>,
    completed: Vec<(u64, u64)>,
    now: Picos,
    /// Bytes per L2 sector (for the sampler's DRAM bytes).
    sector_bytes: u64,
    /// Its sampler (`--sample-every`), if any.
    pub(super) sampler: Option<Arc<crate::timeseries::Sampler>>,
}

/// The memory port of one SM: builds a [`MemRequest`] from a warp instruction and hands it
/// to the SM's LD/ST unit.
struct SmPort<'a> {
    ldst: &'a mut LdStUnit,
    net: &'a mut Wires,
    kernel: &'a KernelMeta,
    lanes: &'a mut Vec<(u32, u64)>,
    period: Picos,
    /// The trace's sync words (issue 24), and scratch for an instruction's groups.
    sync_words: &'a [tessera_traces::SyncWords],
    groups: &'a mut Vec<SyncGroup>,
}

impl MemPort for SmPort<'_> {
    fn access(
        &mut self,
        cycle: u64,
        addrs: tessera_traces::LaneAddrSource<'_>,
        inst: &WarpInst,
        token: MemToken,
        _placeholder_latency: u32,
    ) -> MemIssue {
        let st = &self.kernel.statics[inst.slot as usize];
        let width = self.kernel.opcodes[st.opcode as usize].width_bytes as u32;
        // The active lanes' addresses as the trace gives them (the order and count
        // `LaneAddrSource::for_each_lane_addr` would give), read in place.
        let lanes = match inst.addrs {
            // Stride mode at stride == width is one byte range (MemRequest::contiguous).
            Addrs::Stride { base, stride } if inst.mask != 0 => LaneAddrs::Stride {
                base,
                stride: stride as i64,
                n: inst.mask.count_ones(),
            },
            Addrs::List { start, len } => {
                let list = addrs
                    .0
                    .get(start as usize..start as usize + len as usize)
                    .unwrap_or(&[]);
                let n = inst.mask.count_ones() as usize;
                LaneAddrs::List(list.get(..n).unwrap_or(list))
            }
            _ => LaneAddrs::List(&[]),
        };
        // Generic addresses are resolved by the first active lane.
        let first = match lanes {
            LaneAddrs::Stride { base, .. } => base,
            LaneAddrs::List(l) => match l.first() {
                Some(&a) => a,
                // An instruction with no active lane moves no data.
                None => return MemIssue::Done(cycle + 1),
            },
        };
        let (access, space) = classify(inst.class, self.kernel, first);
        if access == Access::Atomic && space != Space::Shared {
            // Atomics count their lanes per line: the lane vector.
            let v = &mut *self.lanes;
            v.clear();
            addrs.for_each_lane_addr(inst, |l, a| v.push((l, a)));
            return self.issue_lanes(cycle, token, access, space, width);
        }
        let now = cycle * self.period;
        match self
            .ldst
            .issue_addrs(now, access, space, width, lanes, token.0, self.net)
        {
            Issued::Done(ps) => MemIssue::Done(cycle_at(ps, self.period).max(cycle + 1)),
            Issued::Pending => MemIssue::Pending,
        }
    }

    fn access_sync(
        &mut self,
        cycle: u64,
        addrs: tessera_traces::LaneAddrSource<'_>,
        inst: &WarpInst,
        operands: Option<&[u64]>,
        token: MemToken,
        local: &mut LocalValues,
    ) -> Option<Result<MemIssue, String>> {
        if self.sync_words.is_empty() || inst.mask == 0 {
            return None;
        }
        let words = self.sync_words;
        let declared = |a: u64| words.iter().any(|w| w.contains(a));
        let v = &mut *self.lanes;
        v.clear();
        addrs.for_each_lane_addr(inst, |l, a| v.push((l, a)));
        let &(_, first) = v.first()?;
        if !declared(first) {
            return None;
        }
        let st = &self.kernel.statics[inst.slot as usize];
        let info = &self.kernel.opcodes[st.opcode as usize];
        let op = sync_op(inst.class, info)?;
        let weak = op == SyncOp::Load && !matches!(info.scope, Scope::Gpu | Scope::Sys);
        let per = match op {
            SyncOp::Load => 0,
            SyncOp::Cas => 2,
            _ => 1,
        };
        let ops = operands.unwrap_or(&[]);
        if ops.len() < per * v.len() {
            return Some(Err(format!(
                "`{}` on sync word {first:#x} records {} operands for {} lanes (the trace                  was recorded without the values this access needs)",
                info.name,
                ops.len(),
                v.len()
            )));
        }
        let groups = &mut *self.groups;
        groups.clear();
        for (k, &(l, a)) in v.iter().enumerate() {
            if !declared(a) {
                return Some(Err(format!(
                    "`{}`: lane {l} accesses {a:#x}, which is no declared sync word, while                      lane {} accesses sync word {first:#x}",
                    info.name, v[0].0
                )));
            }
            let (x, y) = match per {
                0 => (0, 0),
                1 => (ops[k] as u32, 0),
                _ => (ops[2 * k] as u32, ops[2 * k + 1] as u32),
            };
            // Lanes on one word with the same operands travel together, applied there in
            // lane order; a lane with other operands starts another group.
            match groups.iter_mut().rev().find(|g| g.addr == a) {
                Some(g) if (g.a, g.b) == (x, y) => g.mask |= 1 << l,
                _ => groups.push(SyncGroup {
                    addr: a,
                    op,
                    mask: 1 << l,
                    a: x,
                    b: y,
                }),
            }
        }
        let now = cycle * self.period;
        if weak {
            // The words the L1 holds copies of answer at once.
            let ldst = &*self.ldst;
            groups.retain(|g| match ldst.l1_sync_copy(g.addr) {
                Some(v) => {
                    local.mask |= g.mask;
                    let mut m = g.mask;
                    while m != 0 {
                        let l = m.trailing_zeros() as usize;
                        m &= m - 1;
                        local.values[l] = v;
                    }
                    false
                }
                None => true,
            });
            if groups.is_empty() {
                let at = cycle_at(self.ldst.l1_hit_at(now), self.period);
                return Some(Ok(MemIssue::Done(at.max(cycle + 1))));
            }
        }
        Some(
            self.ldst
                .issue_sync(now, groups, token.0, weak, self.net)
                .map(|()| MemIssue::Pending)
                .map_err(|e| e.to_string()),
        )
    }

    #[inline(always)]
    fn accepting(&self) -> bool {
        !self.ldst.full()
    }
}

/// The sync operation of a global atomic, load or strong store (issue 24); `None` for
/// one whose value the sync memory does not model (floating point, signed min/max, 64
/// bits: timed only, as before).
fn sync_op(class: OpClass, info: &tessera_traces::OpcodeInfo) -> Option<SyncOp> {
    use tessera_traces::AtomicOp as A;
    if info.width_bytes != 4 || info.name.contains(".F") || info.name.contains(".64") {
        return None;
    }
    Some(match class {
        OpClass::LoadGlobal | OpClass::LoadGeneric => SyncOp::Load,
        OpClass::StoreGlobal | OpClass::StoreGeneric => SyncOp::Store,
        _ => match info.atomic {
            A::Add => SyncOp::Add,
            A::Exch => SyncOp::Exch,
            A::Cas => SyncOp::Cas,
            A::Min | A::Max if info.name.contains(".S32") => return None,
            A::Min => SyncOp::Min,
            A::Max => SyncOp::Max,
            A::And => SyncOp::And,
            A::Or => SyncOp::Or,
            A::Xor => SyncOp::Xor,
            A::Inc => SyncOp::Inc,
            A::Dec => SyncOp::Dec,
            A::None => return None,
        },
    })
}

impl SmPort<'_> {
    /// Issues the request of the lanes in `self.lanes`.
    fn issue_lanes(
        &mut self,
        cycle: u64,
        token: MemToken,
        access: Access,
        space: Space,
        width: u32,
    ) -> MemIssue {
        let req = MemRequest {
            access,
            space,
            width_bytes: width,
            lanes: self.lanes,
            contiguous: None,
        };
        match self
            .ldst
            .issue(cycle * self.period, &req, token.0, self.net)
        {
            Issued::Done(ps) => MemIssue::Done(cycle_at(ps, self.period).max(cycle + 1)),
            Issued::Pending => MemIssue::Pending,
        }
    }
}

impl<'t> GpuPartition<'t> {
    /// Partition `index`, hosting the units `hosted(unit id)` says are its own; `ctxs` the
    /// context of each kernel.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        index: usize,
        params: &UnitParams,
        trace: &'t TraceFile,
        all_cps: &mut [Option<CommandProcessor>],
        ctxs: &Arc<[Ctx]>,
        hosted: impl Fn(u32) -> bool,
    ) -> GpuPartition<'t> {
        let ids = params.map.ids;
        let n = ids.count() as usize;
        let sync_words: Arc<[tessera_traces::SyncWords]> =
            Arc::from(trace.index().sync_words.clone());
        let mut slot = vec![Slot::Remote; n];
        let mut sms = Vec::new();
        let mut channels = Vec::new();
        let mut links = Vec::new();
        let mut xbars = Vec::new();
        let mut cps = Vec::new();
        for u in 0..ids.count() {
            if !hosted(u) {
                continue;
            }
            slot[u as usize] = match ids.unit(u) {
                Some(Unit::Cp(k)) => match all_cps.get_mut(k as usize).and_then(Option::take) {
                    Some(cp) => {
                        cps.push(cp);
                        Slot::Cp(cps.len() - 1)
                    }
                    None => Slot::Remote,
                },
                Some(Unit::Link(k)) => {
                    links.push(LinkInterface::new(
                        params.link.clone(),
                        params.map.clone(),
                        k,
                        &params.wiring,
                    ));
                    Slot::Link(links.len() - 1)
                }
                Some(Unit::Sm(s)) => {
                    sms.push(SmUnit {
                        index: s,
                        sm: Sm::new(params.sm.clone(), 0),
                        ldst: LdStUnit::new(&params.ldst, params.map.clone(), s, &params.wiring),
                        kernel: None,
                        per_kernel: Vec::new(),
                        base: (0, 0),
                        next_own: None,
                        ctas: 0,
                        cp: None,
                        answers: VecDeque::new(),
                    });
                    Slot::Sm(sms.len() - 1)
                }
                Some(Unit::Channel(c)) => {
                    let mut ch =
                        MemChannel::new(&params.channel, params.map.clone(), c, &params.wiring);
                    if !sync_words.is_empty() {
                        ch.set_sync_words(sync_words.clone());
                    }
                    channels.push(ch);
                    Slot::Channel(channels.len() - 1)
                }
                Some(Unit::Xbar(k)) => {
                    xbars.push(CrossbarUnit::new(
                        params.map.clone(),
                        k,
                        params.ldst.noc.arbiter,
                        params.channel.l2.geom,
                        params.link.topology,
                        &params.wiring,
                    ));
                    Slot::Xbar(xbars.len() - 1)
                }
                None => Slot::Remote,
            };
        }
        for u in 0..ids.count() {
            if let Slot::Sm(i) = slot[u as usize] {
                if let Some(&Slot::Cp(k)) = slot.get(ids.cp(ids.chiplet_of(u)) as usize) {
                    sms[i].cp = Some(k);
                }
            }
        }
        let mut dec = trace.decoder();
        dec.set_release_pages(true);
        let noc_ps = params.wiring.noc_path_ps();
        let mut p = GpuPartition {
            index,
            trace,
            dec,
            period: params.cp.core_ps,
            answer_ps: {
                let (sm, cp) = (ids.sm(0), ids.cp(0));
                params.wiring.latency(sm, cp) + params.wiring.latency(cp, sm)
            },
            // Off: a horizon of `t` itself, one event per visit.
            unit_lookahead: if params.run_ahead { noc_ps } else { 0 },
            sm_lookahead: match params.run_ahead {
                false => 0,
                // Credits from the crossbar answer an SM's own requests without an L2
                // access.
                true if ids.count() == ids.per_chiplet()
                    && !params.map.private
                    && params.wiring.sm_input_flits() == 0 =>
                {
                    noc_ps + params.channel.l2.hit_ps
                }
                true => noc_ps,
            },
            end: 0,
            preps: vec![None; trace.kernels().len()],
            ctxs: ctxs.clone(),
            wires: Wires::new(
                params.wiring.clone(),
                slot.iter().map(|s| *s != Slot::Remote).collect(),
            ),
            slot,
            cps,
            sms,
            channels,
            links,
            xbar_of: {
                let mut v = vec![None; ids.chiplets as usize];
                for (i, x) in xbars.iter().enumerate() {
                    v[x.chiplet() as usize] = Some(i);
                }
                v
            },
            xbars,
            from_xbar_ps: params.wiring.from_xbar_ps(),
            lanes: Vec::with_capacity(32),
            done: Vec::new(),
            sync_words: sync_words.clone(),
            groups: Vec::new(),
            values: Vec::new(),
            completed: Vec::new(),
            now: 0,
            sector_bytes: params.channel.l2.geom.sector_bytes,
            sampler: None,
        };
        for cp in &p.cps {
            if let Some(t) = cp.next_event() {
                p.wires.schedule(ids.cp(cp.chiplet()), t);
            }
        }
        p
    }

    /// The index of this partition.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Every `(source, destination)` a packet went between so far (the wiring's tests).
    #[cfg(test)]
    pub(super) fn sent_pairs(&self) -> &std::collections::BTreeSet<(u32, u32)> {
        &self.wires.pairs
    }

    /// Runs unit `u`'s events at `t`; returns the time of its next one (at least `t`).
    #[inline(always)]
    fn process(&mut self, u: u32, t: Picos) -> Result<Option<Picos>, GpuError> {
        Ok(match self.slot[u as usize] {
            Slot::Cp(i) => self.process_cp(i, u, t)?,
            Slot::Link(i) => {
                while let Some((at, src, pkt)) = self.wires.pop_arrived(u, t) {
                    self.links[i]
                        .on_packet(at, src, pkt, &mut self.wires)
                        .map_err(|e| GpuError::Protocol(e.to_string()))?;
                }
                self.wires.inbox_head(u)
            }
            Slot::Sm(i) => self.run_sm(i, u, t)?,
            Slot::Channel(i) => self.run_channel(i, u, t)?,
            Slot::Xbar(i) => {
                while let Some((at, src, pkt)) = self.wires.pop_arrived(u, t) {
                    self.xbars[i]
                        .on_packet(at, src, pkt)
                        .map_err(|e| GpuError::Protocol(e.to_string()))?;
                }
                self.xbars[i].run(t, &mut self.wires);
                match (self.xbars[i].next_event(t), self.wires.inbox_head(u)) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            Slot::Remote => None,
        })
    }

    /// With `noc.model: crossbar`, the earliest time chiplet `chiplet`'s crossbar, if this
    /// partition hosts it, can deliver a packet it holds or has coming (anything sent at `t`
    /// or later takes the whole NoC path, which the lookaheads cover); `Picos::MAX`
    /// otherwise (a remote crossbar's packets come after the window's end).
    #[inline]
    fn xbar_floor(&self, chiplet: u32, t: Picos) -> Picos {
        let Some(&Some(x)) = self.xbar_of.get(chiplet as usize) else {
            return Picos::MAX;
        };
        let xb = &self.xbars[x];
        let next = match (xb.next_event(t), self.wires.inbox_head(xb.unit())) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        next.map_or(Picos::MAX, |n| n.saturating_add(self.from_xbar_ps))
    }

    /// Runs DRAM channel unit `i` (unit id `u`) from `t` on, ahead of the other units, as
    /// [`GpuPartition::run_sm`] runs an SM: a channel acts on arrivals and on its own replies leaving (no packet sooner), and every
    /// packet to it is a request or reply (at least the NoC latency after its sender's
    /// time), a host copy or a kernel-boundary flush (not before the CPs'
    /// [`CommandProcessor::channel_floor`]), or one from another partition (not before the
    /// window's end), so it takes the arrivals before the earliest of those in one visit.
    fn run_channel(&mut self, i: usize, u: u32, t: Picos) -> Result<Option<Picos>, GpuError> {
        let mut horizon = t.saturating_add(self.unit_lookahead).min(self.end);
        for cp in &self.cps {
            horizon = horizon.min(cp.channel_floor(t));
        }
        horizon = horizon.min(self.xbar_floor(self.wires.ids.chiplet_of(u), t));
        // The L2 state the arrivals will touch was last used long ago (host time): start
        // loading it for every arrival this visit will take (those before the horizon;
        // triad n=524,288 on titanv: 7.2 per visit, 1.25 per run-ahead step), so that the
        // later ones' loads are done by the time they are taken.
        for p in self.wires.inbox[u as usize].before(horizon.max(t + 1)) {
            self.channels[i].prefetch(p);
        }
        self.run_ahead(u, t, |p, t| p.process_channel(i, u, t), |_| horizon)
    }

    /// Takes the packets that have arrived at channel unit `i` (unit id `u`) by `t`, then
    /// runs its own events at `t` (its slices' replies leaving); returns its next event's
    /// time.
    fn process_channel(&mut self, i: usize, u: u32, t: Picos) -> Result<Option<Picos>, GpuError> {
        while let Some((at, src, pkt)) = self.wires.pop_arrived(u, t) {
            if let Packet::Control(Control::Flush { kernel }) = pkt {
                // From its local CP: the acknowledgement goes back when the last write-back
                // has left.
                let ctx = self.ctxs.get(kernel as usize).copied().ok_or_else(|| {
                    GpuError::Protocol(format!("a flush after unknown kernel {kernel}"))
                })?;
                let left = self.channels[i].flush(at, ctx, &mut self.wires);
                let cp = self.wires.ids.cp(self.wires.ids.chiplet_of(u));
                let ack = Control::FlushDone { kernel };
                self.wires.send(u, cp, left, ack.into());
                continue;
            }
            if let Packet::Control(Control::Memcpy { command }) = pkt {
                if let Some(tessera_traces::Command::MemcpyHtoD { addr, bytes, .. }) =
                    self.trace.commands().get(command as usize)
                {
                    self.channels[i].memcpy(at, *addr, *bytes);
                }
                continue;
            }
            self.channels[i]
                .on_packet(at, src, pkt, &mut self.wires)
                .map_err(|e| GpuError::Protocol(e.to_string()))?;
        }
        let ch = &mut self.channels[i];
        ch.advance(t, &mut self.wires)
            .map_err(|e| GpuError::Protocol(e.to_string()))?;
        Ok(match (ch.next_event(), self.wires.inbox_head(u)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    fn process_cp(&mut self, i: usize, u: u32, t: Picos) -> Result<Option<Picos>, GpuError> {
        let kernels = self.trace.kernels();
        let ids = self.wires.ids;
        let cp = &mut self.cps[i];
        while let Some((at, src, pkt)) = self.wires.pop_arrived(u, t) {
            let Packet::Control(c) = pkt else {
                return Err(GpuError::Protocol(format!(
                    "the command processor of chiplet {} received {pkt:?} from unit {src}",
                    cp.chiplet()
                )));
            };
            match (c, ids.unit(src)) {
                (Control::CtaDone { kernel, .. }, Some(Unit::Sm(sm))) => {
                    cp.on_cta_done(at, sm, kernel, kernels, &mut self.wires)?
                }
                (Control::Slice { .. } | Control::Flush { .. }, Some(Unit::Cp(k)))
                    if k == cp.gpu_base() =>
                {
                    cp.on_global_packet(at, c)
                }
                (Control::Launch { kernel, launch }, Some(Unit::Cp(0))) => {
                    cp.on_launch(at, kernel, launch)?
                }
                (Control::KernelDone { gpu }, Some(Unit::Cp(_))) => cp.on_kernel_done(at, gpu)?,
                (Control::FlushDone { kernel }, Some(Unit::Channel(_))) => {
                    cp.on_channel_flushed(at, kernel, kernels, &mut self.wires)?
                }
                (Control::SliceDone { .. } | Control::FlushDone { .. }, Some(Unit::Cp(_))) => {
                    cp.on_local_report(at, c, kernels, &mut self.wires)?
                }
                _ => {
                    return Err(GpuError::Protocol(format!(
                        "the command processor of chiplet {} received {pkt:?} from unit {src}",
                        cp.chiplet()
                    )))
                }
            }
        }
        cp.run_at(t, kernels, &mut self.wires)?;
        let next = match (cp.next_event(), self.wires.inbox_head(u)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(next.map(|n| n.max(t)))
    }

    /// Runs SM unit `i` (unit id `u`) from `t` on, ahead of the other units: its events at
    /// `t` and then its next ones while they come before the horizon, the earliest of
    /// `t + sm_lookahead` (a reply sent at `t` or later), its CP's
    /// [`CommandProcessor::dispatch_floor`] (a dispatch from a slice start), the answer to
    /// a completion report it sent (`SmUnit::answers`), and the window's end (a packet from
    /// another partition). Nothing the other units do at or after `t` can reach it before
    /// then, and nothing it sends reaches another unit before its own time plus a latency:
    /// the results are those of running its events one at a time in global time order
    /// (`Wires::ahead` checks the premise on every packet).
    fn run_sm(&mut self, i: usize, u: u32, t: Picos) -> Result<Option<Picos>, GpuError> {
        let mut horizon = t.saturating_add(self.sm_lookahead).min(self.end);
        horizon = horizon.min(self.xbar_floor(self.wires.ids.chiplet_of(u), t));
        let unit = &mut self.sms[i];
        if let Some(k) = unit.cp {
            horizon = horizon.min(self.cps[k].dispatch_floor(t));
        }
        // Answers due by `t` are in its inbox already (the CP ran before `t`).
        while unit.answers.front().is_some_and(|&a| a <= t) {
            unit.answers.pop_front();
        }
        // As in `run_channel`: the MSHRs the replies of this visit free were last used long
        // ago (a visit may stop before its horizon: the rest were loaded for nothing).
        for p in self.wires.inbox[u as usize].before(horizon.max(t + 1)) {
            if let Packet::Response(Response::Reply { line, tag, .. }) = *p {
                unit.ldst.prefetch_reply(tag, line);
            }
        }
        self.run_ahead(
            u,
            t,
            |p, t| p.process_sm(i, u, t, horizon),
            // A report it just sent may be answered before the horizon.
            |p| p.sms[i].stop(horizon),
        )
    }

    /// Runs unit `u`'s events from `t` on, one `visit` at a time, while the next comes before
    /// `stop` (asked after each: what the unit sends can bring it closer), then records how
    /// far the unit has run (`Wires::ahead`); returns its next event's time.
    #[inline]
    fn run_ahead(
        &mut self,
        u: u32,
        t: Picos,
        mut visit: impl FnMut(&mut Self, Picos) -> Result<Option<Picos>, GpuError>,
        stop: impl Fn(&Self) -> Picos,
    ) -> Result<Option<Picos>, GpuError> {
        let start = t;
        let mut t = t;
        loop {
            let next = visit(self, t)?;
            // A visit may run the unit's later events too (`process_sm`): it leaves
            // `wires.now` at the last.
            t = t.max(self.wires.now);
            match next {
                Some(n) if n < stop(self) => {
                    t = n;
                    self.now = n;
                    self.wires.now = n;
                }
                _ => {
                    if t > start {
                        // A packet arriving by `t` would have come too late.
                        self.wires.ahead[u as usize] = t + 1;
                    }
                    return Ok(next);
                }
            }
        }
    }

    /// Takes the packets that have arrived at SM unit `i` (unit id `u`) by `t` and runs its
    /// cycle due at `t`, then its next cycles while they come before `horizon` (its run-ahead
    /// horizon), the answer to a report and its next arrival, and complete no CTA; returns
    /// its next event's time. [`Wires::now`] is left at the last cycle run.
    fn process_sm(
        &mut self,
        i: usize,
        u: u32,
        t: Picos,
        horizon: Picos,
    ) -> Result<Option<Picos>, GpuError> {
        let period = self.period;
        let kernels = self.trace.kernels();
        let trace_path = self.trace.path();
        let GpuPartition {
            wires,
            sms,
            dec,
            preps,
            ctxs,
            lanes,
            done,
            completed,
            answer_ps,
            sync_words,
            groups,
            values,
            ..
        } = self;
        let sync_words: &[tessera_traces::SyncWords] = sync_words;
        let unit = &mut sms[i];
        let sm_index = unit.index;
        let sm_err = |k: Option<u32>, e: crate::sm::SmError| {
            let meta = k.and_then(|k| kernels.get(k as usize));
            match (e, meta) {
                // Worded as `verify` words it.
                (crate::sm::SmError::Access { cta, fault }, Some(meta)) => {
                    GpuError::Trace(tessera_traces::TraceError::Corrupt {
                        path: trace_path.to_path_buf(),
                        detail: format!(
                            "kernel {} ({}), CTA ({},{},{}): {}",
                            k.unwrap_or(0),
                            meta.name,
                            cta[0],
                            cta[1],
                            cta[2],
                            fault.describe(meta)
                        ),
                    })
                }
                (e, _) => GpuError::Sm {
                    index: k.unwrap_or(0) as usize,
                    name: meta.map_or_else(String::new, |m| m.name.clone()),
                    sm: sm_index,
                    err: e,
                },
            }
        };
        let mut got_packet = false;
        while let Some((at, _src, pkt)) = wires.pop_arrived(u, t) {
            got_packet = true;
            match pkt {
                Packet::Response(Response::Reply { sectors, tag, .. }) => {
                    done.clear();
                    unit.ldst
                        .on_reply(at, sectors, tag, wires, done)
                        .map_err(|e| GpuError::Protocol(e.to_string()))?;
                    unit.results_in(done, period);
                }
                Packet::Response(Response::WriteAck { tag, .. }) => {
                    done.clear();
                    unit.ldst
                        .on_ack(at, tag, done)
                        .map_err(|e| GpuError::Protocol(e.to_string()))?;
                    unit.results_in(done, period);
                }
                Packet::Response(Response::Value { tag, value, .. }) => {
                    unit.sync_value(at, tag, value, done, values, period)?;
                }
                Packet::Control(Control::Credit { bytes: flits, .. }) => {
                    // Credit at the crossbar: the miss queue drains, and the LD/ST unit
                    // takes memory instructions again once it has room.
                    unit.ldst.on_credit(at, flits as u64, wires);
                    if unit.sm.memory_blocked() && !unit.ldst.full() {
                        let c = cycle_at(at, period);
                        unit.sm.advance_to(c);
                        unit.sm.unblock_memory(c);
                    }
                }
                Packet::Control(Control::Dispatch { kernel, cta }) => {
                    let meta = kernels.get(kernel as usize).ok_or_else(|| {
                        GpuError::Protocol(format!("dispatch of unknown kernel {kernel}"))
                    })?;
                    unit.sm.advance_to(cycle_at(at, period));
                    if unit.kernel != Some(kernel) {
                        unit.attribute();
                        let prep = preps[kernel as usize]
                            .get_or_insert_with(|| {
                                Arc::new(KernelPrep::of_trace(meta, !sync_words.is_empty()))
                            })
                            .clone();
                        unit.sm
                            .set_kernel(prep)
                            .map_err(|e| sm_err(Some(kernel), e))?;
                        let ctx = ctxs.get(kernel as usize).copied().unwrap_or_default();
                        unit.ldst.new_kernel(at, ctx, wires);
                        unit.kernel = Some(kernel);
                    }
                    unit.ctas += 1;
                    // Kept encoded while resident (memory follows the simulated state).
                    let c = dec.kernel_cta_stream(kernel as usize, cta)?;
                    // A CTA outside its grid (an edited trace): `verify` refuses it, and so
                    // does the run.
                    let id = c.id();
                    if (0..3).any(|d| id[d] >= meta.grid[d]) {
                        return Err(GpuError::Trace(tessera_traces::TraceError::Corrupt {
                            path: trace_path.to_path_buf(),
                            detail: format!(
                                "kernel {kernel} ({}): CTA ({},{},{}) is outside the grid \
                                 ({},{},{})",
                                meta.name,
                                id[0],
                                id[1],
                                id[2],
                                meta.grid[0],
                                meta.grid[1],
                                meta.grid[2]
                            ),
                        }));
                    }
                    unit.sm
                        .add_cta(c, cta as u64)
                        .map_err(|e| sm_err(Some(kernel), e))?;
                }
                other => {
                    return Err(GpuError::Protocol(format!(
                        "SM {} received {other:?}",
                        unit.index
                    )))
                }
            }
        }
        // The SM's own next event, as computed when it was last scheduled, unless a packet
        // has changed it since.
        let due = if got_packet {
            unit.sm.next_event()
        } else {
            unit.next_own
        };
        // Unless it runs a cycle below, `due` stays its next event.
        let mut next_own = due;
        if let Some(c) = due {
            if c.saturating_mul(period) <= t {
                unit.sm.advance_to(c);
                completed.clear();
                unit.sm
                    .complete_ctas(c, |tag, at| completed.push((tag, at)));
                if let Some(kernel) = unit.kernel {
                    for &(cta, at) in completed.iter() {
                        let pkt = Control::CtaDone {
                            kernel,
                            cta: cta as u32,
                        };
                        let left = at.max(c) * period;
                        let cp = wires.ids.cp(wires.ids.chiplet_of(u));
                        wires.send(u, cp, left, pkt.into());
                        unit.answers.push_back(left + *answer_ps);
                    }
                }
                let kernel = unit.kernel.and_then(|k| kernels.get(k as usize));
                if let Some(meta) = kernel {
                    // The visits that would follow while the SM's own cycles come first,
                    // before its next arrival and where `run_sm` stops, and complete no CTA,
                    // run here: each is exactly a visit that finds no packet (advance,
                    // step), without the visit's overhead (vectoradd: 2.2 issues per step).
                    let limit = match wires.inbox_head(u) {
                        Some(a) => a.min(unit.stop(horizon)),
                        None => unit.stop(horizon),
                    };
                    let mut port = SmPort {
                        ldst: &mut unit.ldst,
                        net: wires,
                        kernel: meta,
                        lanes,
                        period,
                        sync_words,
                        groups,
                    };
                    unit.sm.step(&mut port);
                    loop {
                        next_own = unit.sm.next_event();
                        let Some(c) = next_own else { break };
                        let tc = c.saturating_mul(period);
                        if tc >= limit || unit.sm.completes_by(c) {
                            break;
                        }
                        port.net.now = tc;
                        unit.sm.advance_to(c);
                        unit.sm.step(&mut port);
                    }
                } else {
                    next_own = unit.sm.next_event();
                }
            }
        }
        if let Some(e) = unit.sm.take_fault() {
            return Err(sm_err(unit.kernel, e));
        }
        unit.next_own = next_own;
        if unit.next_own.is_none() && unit.sm.pending_replies() == 0 {
            // Nothing left to do and nothing in flight: fine when every warp has finished,
            // a deadlock (warps at a barrier that cannot complete) otherwise.
            unit.sm
                .check_deadlock()
                .map_err(|e| sm_err(unit.kernel, e))?;
        }
        let own = unit.next_own.map(|c| c.saturating_mul(period));
        let next = match (own, wires.inbox_head(u)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(next.map(|n| n.max(t)))
    }
}

impl Partition for GpuPartition<'_> {
    fn next_event_time(&self) -> Option<Picos> {
        self.wires.wake.peek().map(|(t, _)| t)
    }

    fn run_until(&mut self, end: Picos, out: &mut Outbox) -> Result<(), BoxError> {
        self.end = end;
        while let Some((t, u)) = self.wires.wake.peek() {
            if t >= end {
                break;
            }
            self.now = t;
            self.wires.now = t;
            // The unit stays queued while it runs (at `t`, the earliest time: anything
            // it sends arrives no earlier) and then moves to its next time in one step.
            let next = self.process(u, t).map_err(|e| Box::new(e) as BoxError)?;
            self.wires.wake.requeue(u, next);
            if let Some(max) = self.wires.wake.overflowed() {
                return Err(Box::new(GpuError::Protocol(format!(
                    "an event at or after {max} ps: simulated time is limited to that \
                     (check the configured latencies)"
                ))));
            }
            if let Some(src) = self.wires.seq_overflow {
                return Err(too_many_packets(src));
            }
            if let Some((src, dst, at, now)) = self.wires.early {
                return Err(Box::new(GpuError::Protocol(format!(
                    "unit {src} sent unit {dst} a packet arriving at {at} ps, before {now} ps, \
                     which that unit had already reached (a latency below the lookahead)"
                ))));
            }
        }
        if let Some(e) = self.sampler.as_ref().and_then(|s| s.overflowed()) {
            return Err(Box::new(GpuError::Unsupported(e)));
        }
        self.now = self.now.max(end);
        for m in self.wires.out.drain(..) {
            out.push(m);
        }
        Ok(())
    }

    fn deliver(&mut self, msgs: &[Message]) -> Result<(), BoxError> {
        for m in msgs {
            let dst = m.dst_port.0;
            let Ok(pkt) = Packet::from_payload(&m.payload) else {
                return Err(Box::new(GpuError::Protocol(format!(
                    "unit {dst} received a payload that is not a GPU packet: {:?}",
                    m.payload
                ))));
            };
            if !self
                .wires
                .hosted
                .get(dst as usize)
                .copied()
                .unwrap_or(false)
            {
                return Err(Box::new(GpuError::Protocol(format!(
                    "partition {} received a packet for unit {dst}, which it does not host",
                    self.index
                ))));
            }
            let reached = self.wires.ahead.get(dst as usize).copied().unwrap_or(0);
            if m.arrive_at < reached {
                return Err(Box::new(GpuError::Protocol(format!(
                    "unit {} sent unit {dst} a packet arriving at {} ps, before {reached} ps, \
                     which that unit had already reached",
                    m.src_port.0, m.arrive_at
                ))));
            }
            if m.src_seq >> SEQ_BITS != 0 {
                return Err(too_many_packets(m.src_port.0));
            }
            self.wires.inbox[dst as usize].push(Arrival::new(
                m.arrive_at,
                m.src_port.0,
                m.src_seq,
                pkt,
            ));
            self.wires.schedule(dst, m.arrive_at);
        }
        Ok(())
    }

    fn stalled(&self) -> Option<String> {
        if let Some(s) = self.cps.iter().find_map(|c| c.unfinished()) {
            return Some(s);
        }
        self.sms.iter().find_map(|u| {
            (u.sm.resident() > 0).then(|| {
                format!(
                    "SM {} still has {} resident CTA(s) that cannot finish",
                    u.index,
                    u.sm.resident()
                )
            })
        })
    }
}

impl GpuPartition<'_> {
    /// Warp instructions its SMs have retired so far, CTAs they have completed (sent and no
    /// longer resident), and `(kernels done, kernels)` when it hosts the command processor
    /// (for progress reports; not part of the stats).
    pub fn progress(&self) -> (u64, u64, Option<(usize, usize)>) {
        let warp_insts = self.sms.iter().map(|u| u.sm.stats().warp_insts).sum();
        let ctas_done = self
            .sms
            .iter()
            .map(|u| u.ctas.saturating_sub(u.sm.resident() as u64))
            .sum();
        (
            warp_insts,
            ctas_done,
            self.cps.iter().find_map(|c| c.kernels_done()),
        )
    }

    /// The watchdog's view of the units it hosts (`crate::watchdog`): its SMs' samples,
    /// with a CTA dispatched or completed counted as progress.
    pub fn watchdog_sample(&self) -> crate::watchdog::WatchdogSample {
        let mut s = crate::watchdog::WatchdogSample::default();
        for u in &self.sms {
            s.add(&u.sm.watchdog_sample());
            s.progress += u.ctas * 2 - (u.sm.resident() as u64).min(u.ctas);
        }
        s
    }

    /// Reports the events of every unit it hosts to `obs` from now on (see
    /// [`crate::observe`]).
    pub fn observe(&mut self, obs: Arc<dyn Observer>) {
        for u in &mut self.sms {
            u.sm.observe(Probe::new(u.ldst.unit(), obs.clone()));
            u.ldst.observe(obs.clone());
        }
        for c in &mut self.channels {
            c.observe(obs.clone());
        }
        for l in &mut self.links {
            l.observe(obs.clone());
        }
    }

    /// Samples its units' counters per `interval` from now on ([`crate::timeseries`]).
    pub fn sample(&mut self, interval: crate::timeseries::Interval) {
        let s = crate::timeseries::Sampler::new(interval, self.wires.ids, self.sector_bytes);
        self.observe(s.clone());
        self.sampler = Some(s);
    }

    /// Attributes every SM's last kernel's instructions (call once, after the run).
    pub(super) fn close(&mut self) {
        for u in &mut self.sms {
            u.attribute();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Request;
    use crate::packet::MAX_UNIT;

    /// The units of `default.yaml` and their plumbing, every unit hosted.
    fn default_wires() -> (UnitIds, Wires) {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/default.yaml");
        let cfg = crate::config::GpuConfig::load(p, &[]).expect("default.yaml loads");
        let ids = UnitIds::new(&cfg);
        let n = ids.count() as usize;
        (ids, Wires::new(Wiring::from_config(&cfg), vec![true; n]))
    }

    /// A source's packets are numbered in 48 bits of the inbox key: the packet that would
    /// need a 49th is flagged (the run stops with an error), the one before is not; and the
    /// packed key orders as `(arrival, source, sequence)` does.
    #[test]
    fn a_sequence_number_past_the_key_is_an_error_and_keys_order_as_tuples() {
        let (ids, mut w) = default_wires();
        let (cp, sm) = (ids.cp(0), ids.sm(0));
        let pkt = Packet::from(Control::Dispatch { kernel: 0, cta: 0 });
        w.seq[cp as usize] = Sequence::starting_at((1 << SEQ_BITS) - 1);
        w.send(cp, sm, 10, pkt);
        assert_eq!(w.seq_overflow, None);
        w.send(cp, sm, 20, pkt);
        assert_eq!(w.seq_overflow, Some(cp));
        let tuples = [
            (5u64, 3u32, 9u64),
            (5, 3, 10),
            (5, 4, 0),
            (6, 0, 0),
            (6, MAX_UNIT, (1 << SEQ_BITS) - 1),
            (7, 1, 2),
        ];
        for a in tuples {
            for b in tuples {
                let (ka, kb) = (
                    Arrival::new(a.0, a.1, a.2, pkt).key(),
                    Arrival::new(b.0, b.1, b.2, pkt).key(),
                );
                assert_eq!(ka.cmp(&kb), a.cmp(&b), "{a:?} against {b:?}");
            }
        }
        assert_eq!(Arrival::new(1, MAX_UNIT, 5, pkt).src(), MAX_UNIT);
    }

    /// A packet arriving before the time its destination has already run to (an SM that ran
    /// ahead) is flagged as an early packet, as one arriving before the current time is;
    /// one arriving at or after it is not.
    #[test]
    fn a_packet_before_its_destinations_run_ahead_is_early() {
        let (ids, mut w) = default_wires();
        w.now = 1_000;
        let (cp, sm) = (ids.cp(0), ids.sm(0));
        w.ahead[sm as usize] = 5_000;
        let pkt = Packet::from(Control::Dispatch { kernel: 0, cta: 0 });
        w.deliver(cp, sm, 5_000, pkt);
        assert_eq!(w.early, None);
        w.deliver(cp, sm, 4_999, pkt);
        assert_eq!(w.early, Some((cp, sm, 4_999, 5_000)));
        // Another unit is held to the current time only.
        let mut w2 = Wires { early: None, ..w };
        w2.deliver(sm, cp, 1_000, Control::CtaDone { kernel: 0, cta: 0 }.into());
        assert_eq!(w2.early, None);
    }

    /// The premise of `sm_lookahead` with one chiplet and a memory-side L2: a slice answers
    /// every read, atomic and acknowledged write it takes at `t` (hits, misses, merges with
    /// fills in flight, queues behind its ports) with a reply arriving no earlier than
    /// `t + l2.hit_latency + noc.latency` (with the crossbar: at the crossbar no earlier
    /// than `t + l2.hit_latency` + the latency to it).
    #[test]
    fn an_l2_reply_arrives_no_sooner_than_the_sm_lookahead() {
        for model in ["ports", "crossbar"] {
            l2_reply_no_sooner_than_the_sm_lookahead(model);
        }
    }

    /// With the crossbar a private L2 slice's NoC port does not delay its flush's
    /// write-backs, its crossbar input does (a flit per NoC cycle each): the flush is
    /// acknowledged no sooner than they could all have left that input, one after another
    /// (an analytical bound: write-backs x their flits x the NoC cycle).
    #[test]
    fn a_private_flush_waits_for_its_write_backs_to_cross_the_slice_input() {
        struct Sink(Wiring);
        impl Net for Sink {
            fn wiring(&self) -> &Wiring {
                &self.0
            }
            fn deliver(&mut self, _src: u32, _dst: u32, _at: Picos, _pkt: Packet) {}
        }
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../configs/radeon7-2chiplet.yaml");
        let set = [("noc.model".to_string(), "crossbar".to_string())];
        let cfg = crate::config::GpuConfig::load(p, &set).expect("radeon7-2chiplet.yaml loads");
        let map = Arc::new(crate::mem::AddressMap::from_config(&cfg));
        let params = crate::mem::ChannelParams::from_config(&cfg);
        let wiring = Wiring::from_config(&cfg);
        let (flit, period) = (
            cfg.noc.bandwidth_bytes_per_cycle as u64,
            cfg.noc_period_ps(),
        );
        let (line_bytes, sector_bytes) = (cfg.l2.line_bytes as u64, cfg.l2.sector_bytes as u64);
        let sectors = line_bytes / sector_bytes;
        let mut ch = MemChannel::new(&params, map.clone(), 0, &wiring);
        let sm = map.ids.sm(0);
        // Whole lines homed on chiplet 0 that it caches in channel 0's slice 0, written
        // (write-back: dirty; a line homed elsewhere is written through).
        let lines: Vec<u64> = (0u64..)
            .map(|k| k * line_bytes)
            .filter(|&l| {
                let (c, s, _) = map.private_slot(0, l);
                let home = map.ids.chiplet_of_channel(map.llc_home(l).0);
                (c, s, home) == (0, 0, 0)
            })
            .take(32)
            .collect();
        let mut net = Sink(wiring);
        for (k, &line) in lines.iter().enumerate() {
            let w = Request::Write {
                line,
                sectors: (1 << sectors) - 1,
                tag: Request::NO_ACK,
                sm,
                ctx: Ctx::default(),
            };
            ch.on_packet(1_000 * k as Picos, sm, w.into(), &mut net)
                .expect("a write for this unit");
        }
        let now = 100_000_000;
        let done = ch.flush(now, Ctx::default(), &mut net);
        assert_eq!(ch.stats().private_l2.flush_writeback_sectors, 32 * sectors);
        // Each write-back: a header and a whole line.
        let flits = (8 + line_bytes).div_ceil(flit);
        let bound = now + 32 * flits * period;
        assert!(
            done >= bound,
            "acknowledged at {done} ps, before {bound} ps"
        );
    }

    fn l2_reply_no_sooner_than_the_sm_lookahead(model: &str) {
        struct Replies(Vec<(Picos, Packet)>, Wiring);
        impl Net for Replies {
            fn wiring(&self) -> &Wiring {
                &self.1
            }
            fn deliver(&mut self, _src: u32, _dst: u32, arrive_at: Picos, pkt: Packet) {
                self.0.push((arrive_at, pkt));
            }
        }
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/rtx3070.yaml");
        // Reply queues with credit for every reply (no crossbar returns any here): each
        // reply waits in its slice until its departure, and leaves then.
        let set = [
            ("noc.model".to_string(), model.to_string()),
            ("l2.reply_queue_packets".to_string(), "1000000".to_string()),
        ];
        let cfg = crate::config::GpuConfig::load(p, &set).expect("rtx3070.yaml loads");
        let map = Arc::new(crate::mem::AddressMap::from_config(&cfg));
        let params = crate::mem::ChannelParams::from_config(&cfg);
        let wiring = Wiring::from_config(&cfg);
        let noc = match model {
            "ports" => wiring.noc_ps(),
            _ => wiring.noc_path_ps() - wiring.from_xbar_ps(),
        };
        let least = noc + params.l2.hit_ps;
        let mut ch = MemChannel::new(&params, map.clone(), 0, &wiring);
        let sm = map.ids.sm(0);
        // Lines homed at channel 0, visited repeatedly (misses, then hits and merges), some
        // requests arriving together so that they queue at the slice's ports.
        let lines: Vec<u64> = (0u64..)
            .map(|k| k * 128)
            .filter(|&l| map.l2_home(l).0 == 0)
            .take(64)
            .collect();
        let mut net = Replies(Vec::new(), wiring);
        let mut x = 7u64;
        for k in 0..2_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let now = 1_000 * (k / 4);
            let line = lines[(x >> 33) as usize % lines.len()];
            let sectors = 1 + (x >> 20) % 15;
            let ctx = Ctx::default();
            let pkt = if k % 7 == 0 {
                Request::Atomic {
                    line,
                    sectors,
                    tag: k as u32,
                    sm,
                    ctx,
                    ops: 32,
                }
            } else if k % 5 == 0 {
                // Acknowledged like a read hit (`l2.write_acks`).
                Request::Write {
                    line,
                    sectors,
                    tag: k as u32,
                    sm,
                    ctx,
                }
            } else {
                Request::Read {
                    line,
                    sectors,
                    tag: k as u32,
                    sm,
                    ctx,
                }
            };
            net.0.clear();
            ch.on_packet(now, sm, pkt.into(), &mut net)
                .expect("a request homed here");
            while let Some(t) = ch.next_event() {
                ch.advance(t, &mut net).expect("replies leave");
            }
            let replies: Vec<Picos> = net
                .0
                .iter()
                .filter(|(_, p)| {
                    matches!(
                        p,
                        Packet::Response(Response::Reply { .. } | Response::WriteAck { .. })
                    )
                })
                .map(|&(at, _)| at)
                .collect();
            assert_eq!(replies.len(), 1, "request {k} has one reply");
            assert!(
                replies[0] >= now + least,
                "request {k} taken at {now} ps answered at {} ps, before {} ps",
                replies[0],
                now + least
            );
        }
        // Misses and hits both ran.
        assert!(ch.stats().l2.hits > 0 && ch.stats().l2.misses > 0);
    }

    /// Pushes and pops interleaved, so the ring wraps and grows while packets land at
    /// every distance from the back (near: moved one by one; far: moved by `copy_within`,
    /// on the shorter side, across the wrap or not), against a sorted vector.
    #[test]
    fn inbox_ring_agrees_with_a_sorted_vector() {
        let mut inbox = Inbox::default();
        let mut want: std::collections::VecDeque<u128> = Default::default();
        let mut x = 5u64;
        let mut clock = 0u64;
        for seq in 0..40_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Pops now and then, more than pushes in some stretches: the length wanders
            // from empty to a few hundred.
            let phase = (seq / 3_000) % 3;
            if (x >> 8) % 4 < phase + 1 {
                let t = clock;
                let got = inbox.pop_by(t).map(|a| a.key());
                let front = want.front().copied().filter(|&k| (k >> 64) as u64 <= t);
                if front.is_some() {
                    want.pop_front();
                }
                assert_eq!(got, front, "pop at {t} after {seq} steps");
            }
            clock += 3;
            let late = match (x >> 16) % 8 {
                0..=3 => 0,
                4 | 5 => (x >> 24) % 40,
                6 => (x >> 24) % 600,
                _ => (x >> 24) % 3_000,
            };
            let at = clock + 3_000 - late;
            let a = Arrival::new(
                at,
                ((x >> 40) % 7) as u32,
                seq,
                Request::Write {
                    line: seq,
                    sectors: 1,
                    tag: Request::NO_ACK,
                    sm: 0,
                    ctx: Ctx::default(),
                }
                .into(),
            );
            inbox.push(a);
            let k = a.key();
            let i = want.partition_point(|&w| w < k);
            want.insert(i, k);
            assert_eq!(inbox.len, want.len());
            assert_eq!(inbox.head(), want.front().map(|&k| (k >> 64) as u64));
        }
        let mut rest = Vec::new();
        while let Some(a) = inbox.pop_by(Picos::MAX) {
            rest.push(a.key());
        }
        assert_eq!(rest, want.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn inbox_pops_in_key_order_whatever_the_push_order() {
        // Pseudo-random arrivals, mostly in order with some late ones, against a sort.
        let mut inbox = Inbox::default();
        let mut want = Vec::new();
        let mut x = 11u64;
        for seq in 0..500u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = seq * 10
                + if x.is_multiple_of(4) {
                    0
                } else {
                    (x >> 20) % 300
                };
            let src = ((x >> 40) % 5) as u32;
            let a = Arrival::new(
                at,
                src,
                seq,
                Request::Write {
                    line: seq,
                    sectors: 1,
                    tag: Request::NO_ACK,
                    sm: 0,
                    ctx: Ctx::default(),
                }
                .into(),
            );
            inbox.push(a);
            want.push(a.key());
        }
        want.sort();
        let mut got = Vec::new();
        while let Some(a) = inbox.pop_by(Picos::MAX) {
            got.push(a.key());
        }
        assert_eq!(got, want);
    }
}
