//! The mutable state of one SM's issue stage ([`Sm`]), steppable cycle by cycle inside a
//! GPU-wide event loop, and the batch driver [`run_cta_batch_with`] built on it.

use super::spec::SmSpec;
use super::stats::{BarrierEvent, IssueEvent, SmStats};
use crate::config::SchedulerPolicy;
use std::sync::Arc;
use tessera_traces::{DecodedCta, KernelMeta, OpClass, WarpInst};

/// How [`run_cta_batch_with`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmOptions {
    /// Step one cycle at a time even when no warp can issue (the reference the idle-skipping
    /// default must equal; slower, for tests).
    pub tick_every_cycle: bool,
    /// Fill [`SmStats::barrier_log`] and [`SmStats::issue_log`].
    pub record_log: bool,
}

/// Why a batch could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SmError {
    /// More warps than the SM has warp slots.
    #[error("the CTAs given have {warps} warps but the SM has {slots} warp slots")]
    TooManyWarps { warps: u64, slots: u32 },
    /// An instruction names a static slot the kernel does not have.
    #[error(
        "CTA {cta}: instruction slot {slot} is not in the kernel's static table ({n} entries)"
    )]
    BadSlot { cta: u32, slot: u32, n: usize },
    /// No warp can ever issue again but some have not finished (every live warp waits at a
    /// barrier that cannot complete).
    #[error("deadlock at cycle {cycle}: {detail}")]
    Deadlock { cycle: u64, detail: String },
    /// [`Sm::set_kernel`] or [`Sm::skip_to`] while CTAs are resident.
    #[error("the SM still has {resident} resident CTA(s)")]
    Busy { resident: usize },
    /// [`Sm::add_cta`] before any [`Sm::set_kernel`].
    #[error("no kernel set on the SM")]
    NoKernel,
}

/// What a [`MemPort`] says about a memory instruction it accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemIssue {
    /// Its destination registers are written from this cycle on (at least `cycle + 1`;
    /// an earlier one is taken as `cycle + 1`).
    Done(u64),
    /// The result comes later, through [`Sm::mem_reply`] with the instruction's token.
    Pending,
}

/// The SM's name for one in-flight memory instruction: an index into its table of
/// instructions waiting for a [`Sm::mem_reply`], reused after the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemToken(pub u32);

/// Where memory-class instructions go.
pub trait MemPort {
    /// Memory instruction `inst` of `cta` issues at core cycle `cycle`: either the cycle
    /// from which its destination registers are written is known now
    /// ([`MemIssue::Done`]), or it comes later through [`Sm::mem_reply`]`(token, ..)`
    /// ([`MemIssue::Pending`]). `placeholder_latency` is the class's latency of
    /// [`SmSpec`] (used by the batch driver, which has no memory system).
    fn access(
        &mut self,
        cycle: u64,
        cta: &DecodedCta,
        inst: &WarpInst,
        token: MemToken,
        placeholder_latency: u32,
    ) -> MemIssue;
}

/// The placeholder memory of the batch driver: every memory instruction takes its class's
/// latency from [`SmSpec`] (not a model).
pub struct PlaceholderMem;

impl MemPort for PlaceholderMem {
    fn access(
        &mut self,
        cycle: u64,
        _: &DecodedCta,
        _: &WarpInst,
        _: MemToken,
        latency: u32,
    ) -> MemIssue {
        MemIssue::Done(cycle + latency as u64)
    }
}

/// A register whose write is a pending memory reply: not ready at any cycle.
const NEVER: u64 = u64::MAX;

/// Registers a scoreboard tracks per warp (R0..R254; R255 is RZ).
const REGS: usize = 256;

/// Per static instruction: the registers its issue waits on (sources and destinations,
/// RZ excluded, deduplicated) and the registers it writes.
struct SlotRegs {
    wait: Vec<u16>,
    dsts: Vec<u16>,
}

/// What the issue stage needs of one kernel, prepared once per kernel and shared by its
/// SMs.
pub struct KernelPrep {
    slots: Vec<SlotRegs>,
}

impl KernelPrep {
    pub fn new(kernel: &KernelMeta) -> KernelPrep {
        let slots = kernel
            .statics
            .iter()
            .map(|st| {
                let op = &kernel.opcodes[st.opcode as usize];
                let dsts: Vec<u16> = st.dst_regs(op).collect();
                let mut wait: Vec<u16> = st.src_regs().chain(dsts.iter().copied()).collect();
                wait.sort_unstable();
                wait.dedup();
                SlotRegs { wait, dsts }
            })
            .collect();
        KernelPrep { slots }
    }
}

/// One warp's state (plain data).
#[derive(Default)]
struct WarpState {
    /// Index of its CTA in `Sm::ctas`.
    cta: u32,
    sched: u32,
    /// Dispatch order on this SM (oldest first, for GTO and the LRR rotation).
    age: u64,
    /// Index of its first instruction in `DecodedCta::insts` and one past its last.
    start: usize,
    end: usize,
    /// Index of its next instruction.
    next: usize,
    done: bool,
    at_barrier: bool,
    /// First cycle it may issue after a barrier release.
    release_at: u64,
    /// Cycle from which each register has no pending write.
    reg_ready: Vec<u64>,
    /// Cache of the next instruction: the latest `reg_ready` of the registers it waits
    /// on, and its class (valid while not done; refreshed whenever `next` moves, the only
    /// time either can change, since only the warp's own issues write its registers).
    reg_at: u64,
    class: Option<OpClass>,
}

/// One sub-core scheduler's state.
struct SchedState {
    /// `(age, warp slot)` of its resident warps, oldest first.
    warps: Vec<(u64, u32)>,
    /// Age of the last warp it issued.
    last: Option<u64>,
    /// Cycle from which each class's unit accepts a new instruction.
    unit_free: [u64; OpClass::COUNT],
}

/// One resident CTA.
struct Resident {
    cta: DecodedCta,
    /// The caller's name for it (listing index for the GPU, batch index for the batch).
    tag: u64,
    /// Its warp slots.
    slots: Vec<u32>,
    /// Unfinished warps.
    alive: u32,
    arrived: Vec<(u32, u64)>,
    seq: u32,
    /// Last cycle at which one of its issued instructions' results is written.
    complete_at: u64,
    /// Memory results not yet replied ([`Sm::mem_reply`]): it cannot complete before.
    pending: u32,
}

/// One entry of the table of in-flight memory instructions (index = [`MemToken`]).
#[derive(Clone, Copy)]
struct InFlight {
    warp: u32,
    /// Static slot of the instruction (its destination registers).
    slot: u32,
    live: bool,
}

/// Why one warp cannot issue at a given cycle.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Done,
    Barrier,
    Scoreboard,
    Unit,
    Ready,
}

/// One SM running CTAs of one kernel at a time ([`Sm::set_kernel`]; it persists across
/// kernels); CTAs arrive ([`Sm::add_cta`]) and leave ([`Sm::complete_ctas`]) while it
/// runs. Time is in core cycles; [`Sm::now`] is the first cycle not yet accounted.
pub struct Sm {
    spec: Arc<SmSpec>,
    prep: Option<Arc<KernelPrep>>,
    warps: Vec<WarpState>,
    used: Vec<bool>,
    scheds: Vec<SchedState>,
    ctas: Vec<Option<Resident>>,
    next_age: u64,
    live: u32,
    now: u64,
    complete_at: u64,
    record: bool,
    stats: SmStats,
    /// In-flight memory instructions, indexed by [`MemToken`]; `free` lists the reusable
    /// entries (last freed first, so token numbering is deterministic).
    inflight: Vec<InFlight>,
    free: Vec<u32>,
    /// Entries of `inflight` that are live.
    pending: u32,
}

impl Sm {
    /// An empty SM whose first cycle is `now`, with no kernel yet ([`Sm::set_kernel`]).
    /// `record` fills the logs of [`SmStats`].
    pub fn new(spec: Arc<SmSpec>, now: u64, record: bool) -> Self {
        let n_sched = spec.schedulers.max(1);
        Sm {
            spec,
            prep: None,
            warps: Vec::new(),
            used: Vec::new(),
            scheds: (0..n_sched)
                .map(|_| SchedState {
                    warps: Vec::new(),
                    last: None,
                    unit_free: [0; OpClass::COUNT],
                })
                .collect(),
            ctas: Vec::new(),
            next_age: 0,
            live: 0,
            now,
            complete_at: now,
            record,
            stats: SmStats {
                schedulers: n_sched,
                ..SmStats::default()
            },
            inflight: Vec::new(),
            free: Vec::new(),
            pending: 0,
        }
    }

    /// Runs the CTAs of the kernel `prep` from now on. Refused while a CTA is resident.
    pub fn set_kernel(&mut self, prep: Arc<KernelPrep>) -> Result<(), SmError> {
        match self.resident() {
            0 => {
                self.prep = Some(prep);
                Ok(())
            }
            resident => Err(SmError::Busy { resident }),
        }
    }

    /// Moves an SM with no resident CTA to cycle `t` without accounting the cycles in
    /// between (the gap between two kernels, which belongs to neither's counters).
    /// Refused while a CTA is resident; a `t` in the past is ignored.
    pub fn skip_to(&mut self, t: u64) -> Result<(), SmError> {
        match self.resident() {
            0 => {
                self.now = self.now.max(t);
                self.complete_at = self.complete_at.max(self.now);
                Ok(())
            }
            resident => Err(SmError::Busy { resident }),
        }
    }

    /// Memory instructions issued with [`MemIssue::Pending`] and not yet replied.
    pub fn pending_replies(&self) -> u32 {
        self.pending
    }

    /// The result of the in-flight memory instruction `token` is written at `cycle` (the
    /// caller guarantees `cycle >= now()`; an earlier one is taken as `now()`): its
    /// destination registers become ready then, and its CTA may complete from then on
    /// once nothing else is pending. An unknown or already replied token is a caller bug
    /// (ignored; a debug build asserts).
    pub fn mem_reply(&mut self, token: MemToken, cycle: u64) {
        let Some(f) = self.inflight.get_mut(token.0 as usize).filter(|f| f.live) else {
            debug_assert!(false, "mem_reply with an unknown token {token:?}");
            return;
        };
        debug_assert!(cycle >= self.now, "mem_reply in the past");
        let cycle = cycle.max(self.now);
        f.live = false;
        let (w, slot) = (f.warp as usize, f.slot as usize);
        self.free.push(token.0);
        self.pending -= 1;
        let Some(prep) = self.prep.as_ref() else {
            return;
        };
        for &r in &prep.slots[slot].dsts {
            self.warps[w].reg_ready[r as usize] = cycle;
        }
        self.complete_at = self.complete_at.max(cycle);
        if let Some(rc) = self.ctas[self.warps[w].cta as usize].as_mut() {
            rc.pending -= 1;
            rc.complete_at = rc.complete_at.max(cycle);
        }
        self.refresh(w);
    }

    /// The first cycle not yet accounted.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Resident CTAs.
    pub fn resident(&self) -> usize {
        self.ctas.iter().filter(|c| c.is_some()).count()
    }

    /// Free warp slots.
    pub fn free_warp_slots(&self) -> u32 {
        self.spec.warp_slots - self.used.iter().filter(|&&u| u).count() as u32
    }

    /// The counters since the last [`Sm::take_stats`] (`cycles` is set by it).
    pub fn stats(&self) -> &SmStats {
        &self.stats
    }

    /// Makes `cta` resident from cycle [`Sm::now`]: its warps take the lowest free warp
    /// slots (slot `i` belongs to scheduler `i % schedulers`). Returns its index.
    pub fn add_cta(&mut self, cta: DecodedCta, tag: u64) -> Result<u32, SmError> {
        let prep = self.prep.as_ref().ok_or(SmError::NoKernel)?;
        let ci = self
            .ctas
            .iter()
            .position(|c| c.is_none())
            .unwrap_or(self.ctas.len());
        if let Some(i) = cta
            .insts
            .iter()
            .find(|i| i.slot as usize >= prep.slots.len())
        {
            return Err(SmError::BadSlot {
                cta: ci as u32,
                slot: i.slot,
                n: prep.slots.len(),
            });
        }
        if cta.warps.len() as u64 > self.free_warp_slots() as u64 {
            return Err(SmError::TooManyWarps {
                warps: (cta.warps.len() as u32 + self.spec.warp_slots - self.free_warp_slots())
                    as u64,
                slots: self.spec.warp_slots,
            });
        }
        let n_sched = self.scheds.len() as u32;
        let mut slots = Vec::with_capacity(cta.warps.len());
        let mut alive = 0;
        let mut search = 0usize;
        for w in &cta.warps {
            while search < self.used.len() && self.used[search] {
                search += 1;
            }
            if search == self.used.len() {
                self.used.push(false);
                self.warps.push(WarpState::default());
            }
            let slot = search as u32;
            self.used[search] = true;
            let sched = slot % n_sched;
            let age = self.next_age;
            self.next_age += 1;
            self.scheds[sched as usize].warps.push((age, slot));
            let done = w.insts.is_empty();
            if !done {
                alive += 1;
            }
            let ws = &mut self.warps[search];
            ws.cta = ci as u32;
            ws.sched = sched;
            ws.age = age;
            ws.start = w.insts.start;
            ws.end = w.insts.end;
            ws.next = w.insts.start;
            ws.done = done;
            ws.at_barrier = false;
            ws.release_at = 0;
            ws.reg_ready.clear();
            ws.reg_ready.resize(REGS, 0);
            ws.reg_at = 0;
            ws.class = (!done).then(|| cta.insts[w.insts.start].class);
            slots.push(slot);
        }
        self.live += alive;
        let r = Resident {
            cta,
            tag,
            slots,
            alive,
            arrived: Vec::new(),
            seq: 0,
            complete_at: self.now,
            pending: 0,
        };
        if ci == self.ctas.len() {
            self.ctas.push(Some(r));
        } else {
            self.ctas[ci] = Some(r);
        }
        Ok(ci as u32)
    }

    #[inline]
    fn inst(&self, w: usize) -> &WarpInst {
        let ws = &self.warps[w];
        &self.ctas[ws.cta as usize]
            .as_ref()
            .expect("resident")
            .cta
            .insts[ws.next]
    }

    /// The latest of the cycles at which warp `w`'s registers are free and at which its
    /// unit is free (ignoring barriers).
    #[inline]
    fn reg_and_unit(&self, w: usize) -> (u64, u64) {
        let ws = &self.warps[w];
        let class = ws.class.expect("an unfinished warp");
        (
            ws.reg_at,
            self.scheds[ws.sched as usize].unit_free[class as usize],
        )
    }

    /// Refreshes warp `w`'s cache of its next instruction.
    fn refresh(&mut self, w: usize) {
        let ws = &self.warps[w];
        if ws.done {
            self.warps[w].class = None;
            return;
        }
        let inst = *self.inst(w);
        let Some(prep) = self.prep.as_ref() else {
            return;
        };
        let reg_at = prep.slots[inst.slot as usize]
            .wait
            .iter()
            .map(|&r| ws.reg_ready[r as usize])
            .max()
            .unwrap_or(0);
        let ws = &mut self.warps[w];
        ws.reg_at = reg_at;
        ws.class = Some(inst.class);
    }

    /// The first cycle at which warp `w` could issue if nothing else happens; `None` when
    /// it is finished or waits at an incomplete barrier.
    fn earliest(&self, w: usize) -> Option<u64> {
        let ws = &self.warps[w];
        if ws.done || ws.at_barrier {
            return None;
        }
        let (r, u) = self.reg_and_unit(w);
        Some(ws.release_at.max(r).max(u))
    }

    fn block_at(&self, w: usize, c: u64) -> Block {
        let ws = &self.warps[w];
        if ws.done {
            return Block::Done;
        }
        if ws.at_barrier || c < ws.release_at {
            return Block::Barrier;
        }
        let (r, u) = self.reg_and_unit(w);
        if c < r {
            Block::Scoreboard
        } else if c < u {
            Block::Unit
        } else {
            Block::Ready
        }
    }

    /// Counts the stall reason of scheduler `s` for every cycle of `[a, b)`, during which
    /// it issues nothing and no state changes.
    fn count_stalls(&mut self, s: usize, a: u64, b: u64) {
        if a >= b {
            return;
        }
        // The reasons change only at the cycles where a warp's register, unit or barrier
        // release time falls: split [a, b) there and classify each segment at its start.
        let mut points = vec![a, b];
        for &(_, w) in &self.scheds[s].warps {
            let w = w as usize;
            if self.warps[w].done || self.warps[w].at_barrier {
                continue;
            }
            let (r, u) = self.reg_and_unit(w);
            for p in [self.warps[w].release_at, r, u] {
                if p > a && p < b {
                    points.push(p);
                }
            }
        }
        points.sort_unstable();
        points.dedup();
        for seg in points.windows(2) {
            let (c, len) = (seg[0], seg[1] - seg[0]);
            let (mut unit, mut sb, mut bar) = (false, false, false);
            for &(_, w) in &self.scheds[s].warps {
                match self.block_at(w as usize, c) {
                    Block::Unit => unit = true,
                    Block::Scoreboard => sb = true,
                    Block::Barrier => bar = true,
                    Block::Done => {}
                    Block::Ready => unreachable!("a ready warp in a stall interval"),
                }
            }
            let st = &mut self.stats;
            if unit {
                st.stall_unit_busy += len;
            } else if sb {
                st.stall_scoreboard += len;
            } else if bar {
                st.stall_barrier += len;
            } else {
                st.stall_no_warp += len;
            }
        }
    }

    /// The position in scheduler `s`'s list of the warp it issues at `now`, per policy.
    fn pick(&self, s: usize, now: u64) -> Option<usize> {
        let sch = &self.scheds[s];
        let n = sch.warps.len();
        let ready = |pos: usize| {
            self.earliest(sch.warps[pos].1 as usize)
                .is_some_and(|t| t <= now)
        };
        match self.spec.policy {
            SchedulerPolicy::Lrr => {
                // Round robin in age order, starting after the last issued warp (finished
                // warps, never ready, may have left the list: the order is unchanged).
                let start = sch
                    .last
                    .map_or(0, |age| sch.warps.partition_point(|&(a, _)| a <= age));
                (0..n).map(|k| (start + k) % n).find(|&p| ready(p))
            }
            // TODO: two_level (an active pool of `two_level_active_warps`, round robin
            // inside) is scheduled as GTO for now.
            SchedulerPolicy::Gto | SchedulerPolicy::TwoLevel => {
                if let Some(age) = sch.last {
                    if let Ok(p) = sch.warps.binary_search_by_key(&age, |&(a, _)| a) {
                        if ready(p) {
                            return Some(p);
                        }
                    }
                }
                (0..n).find(|&p| ready(p))
            }
        }
    }

    fn issue(&mut self, s: usize, pos: usize, now: u64, mem: &mut impl MemPort) {
        let (age, w) = self.scheds[s].warps[pos];
        let w = w as usize;
        self.scheds[s].last = Some(age);
        let inst = *self.inst(w);
        let t = self.spec.timing_of(inst.class);
        let st = &mut self.stats;
        st.warp_insts += 1;
        st.issue_slots_used += 1;
        st.thread_insts += inst.mask.count_ones() as u64;
        st.class_warp_insts[inst.class as usize] += 1;
        if inst.class == OpClass::Exit {
            st.exited_lanes += inst.mask.count_ones() as u64;
        }
        let cta = self.warps[w].cta;
        if self.record {
            st.issue_log.push(IssueEvent {
                cycle: now,
                warp: w as u32,
                cta,
                inst: (self.warps[w].next - self.warps[w].start) as u32,
                class: inst.class,
            });
        }
        self.scheds[s].unit_free[inst.class as usize] = now + t.initiation_cycles as u64;
        let mut pending = false;
        let done_at = if inst.class.is_memory() {
            let token = match self.free.pop() {
                Some(t) => t,
                None => {
                    self.inflight.push(InFlight {
                        warp: 0,
                        slot: 0,
                        live: false,
                    });
                    self.inflight.len() as u32 - 1
                }
            };
            let r = self.ctas[cta as usize].as_ref().expect("resident");
            match mem.access(now, &r.cta, &inst, MemToken(token), t.latency_cycles) {
                MemIssue::Done(at) => {
                    self.free.push(token);
                    at.max(now + 1)
                }
                MemIssue::Pending => {
                    self.inflight[token as usize] = InFlight {
                        warp: w as u32,
                        slot: inst.slot,
                        live: true,
                    };
                    self.pending += 1;
                    pending = true;
                    NEVER
                }
            }
        } else {
            now + t.latency_cycles as u64
        };
        if !pending {
            self.complete_at = self.complete_at.max(done_at);
        }
        if let Some(prep) = self.prep.as_ref() {
            for &r in &prep.slots[inst.slot as usize].dsts {
                self.warps[w].reg_ready[r as usize] = done_at;
            }
        }
        let rc = self.ctas[cta as usize].as_mut().expect("resident");
        if pending {
            rc.pending += 1;
            rc.complete_at = rc.complete_at.max(now + 1);
        } else {
            rc.complete_at = rc.complete_at.max(done_at).max(now + 1);
        }
        let ws = &mut self.warps[w];
        ws.next += 1;
        if ws.next == ws.end {
            ws.done = true;
            self.live -= 1;
            rc.alive -= 1;
            self.try_release(cta, now);
        } else if inst.class == OpClass::Barrier {
            ws.at_barrier = true;
            rc.arrived.push((w as u32, now));
            self.try_release(cta, now);
        }
        self.refresh(w);
    }

    /// Releases CTA `cta`'s barrier when every unfinished warp has arrived: they all may
    /// issue again from the next cycle.
    fn try_release(&mut self, cta: u32, now: u64) {
        let cs = self.ctas[cta as usize].as_mut().expect("resident");
        if cs.arrived.is_empty() || cs.arrived.len() as u32 != cs.alive {
            return;
        }
        let arrivals = std::mem::take(&mut cs.arrived);
        let seq = cs.seq;
        cs.seq += 1;
        for &(w, _) in &arrivals {
            let ws = &mut self.warps[w as usize];
            ws.at_barrier = false;
            ws.release_at = now + 1;
        }
        self.stats.barriers += 1;
        if self.record {
            self.stats.barrier_log.push(BarrierEvent {
                cta,
                seq,
                arrivals,
                release_cycle: now + 1,
            });
        }
    }

    fn deadlock(&self) -> SmError {
        let waiting: Vec<String> = self
            .used
            .iter()
            .enumerate()
            .filter(|&(i, &u)| u && !self.warps[i].done)
            .map(|(i, _)| {
                let w = &self.warps[i];
                format!(
                    "warp {i} (CTA {}) at instruction {}",
                    w.cta,
                    w.next - w.start
                )
            })
            .collect();
        SmError::Deadlock {
            cycle: self.now,
            detail: format!("waiting at barriers: {}", waiting.join(", ")),
        }
    }

    /// The first cycle at which a warp could issue, or `None` when no warp can issue
    /// before something arrives (all finished, all waiting for memory replies) or ever
    /// again (a deadlock: see [`Sm::check_deadlock`]).
    fn next_issue(&self) -> Option<u64> {
        if self.live == 0 {
            return None;
        }
        (0..self.warps.len())
            .filter(|&w| self.used[w])
            .filter_map(|w| self.earliest(w))
            .filter(|&t| t != NEVER)
            .min()
    }

    /// The next cycle (at least [`Sm::now`]) at which this SM has something to do: a warp
    /// may issue or a finished CTA completes. `None` when it has nothing to do until a
    /// [`Sm::mem_reply`] (ask again after one) or nothing left at all. Warps blocked only
    /// on pending memory replies give no time.
    pub fn next_event(&self) -> Option<u64> {
        let issue = self.next_issue();
        let done = self
            .ctas
            .iter()
            .flatten()
            .filter(|c| c.alive == 0 && c.pending == 0)
            .map(|c| c.complete_at)
            .min();
        match (issue, done) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|t| t.max(self.now))
    }

    /// An error when some warp is unfinished but none can ever issue again (never while a
    /// memory reply is pending: it may unblock them).
    pub fn check_deadlock(&self) -> Result<(), SmError> {
        if self.live > 0 && self.pending == 0 && self.next_issue().is_none() {
            return Err(self.deadlock());
        }
        Ok(())
    }

    /// Counts the cycles `[now, t)`, in which nothing may issue (the caller guarantees it:
    /// `t <= next_event()`), as stalls, and moves to `t`.
    pub fn advance_to(&mut self, t: u64) {
        if t > self.now {
            for s in 0..self.scheds.len() {
                self.count_stalls(s, self.now, t);
            }
            self.now = t;
        }
    }

    /// Runs cycle [`Sm::now`]: each scheduler issues at most one instruction (memory
    /// instructions go to `mem`) or counts a stall; then moves to the next cycle.
    pub fn step(&mut self, mem: &mut impl MemPort) {
        let now = self.now;
        for s in 0..self.scheds.len() {
            match self.pick(s, now) {
                Some(pos) => self.issue(s, pos, now, mem),
                None => self.count_stalls(s, now, now + 1),
            }
        }
        self.now += 1;
    }

    /// Removes the CTAs whose warps have all finished and whose results are all written
    /// by cycle `t` (`complete_at <= t`, no memory reply pending), freeing their warp
    /// slots; calls `f(tag, completion cycle)` for each, in CTA-index order.
    pub fn complete_ctas(&mut self, t: u64, mut f: impl FnMut(u64, u64)) {
        for ci in 0..self.ctas.len() {
            let done = matches!(&self.ctas[ci],
                Some(c) if c.alive == 0 && c.pending == 0 && c.complete_at <= t);
            if !done {
                continue;
            }
            let r = self.ctas[ci].take().expect("resident");
            for &slot in &r.slots {
                self.used[slot as usize] = false;
                let s = self.warps[slot as usize].sched as usize;
                self.scheds[s].warps.retain(|&(_, w)| w != slot);
            }
            f(r.tag, r.complete_at);
        }
    }

    /// Counts the cycles up to `end` as stalls (as [`Sm::advance_to`]) and returns the
    /// counters since the previous take (or since [`Sm::new`]) with
    /// `cycles = end - start`, resetting them. The SM goes on from `end`.
    pub fn take_stats(&mut self, start: u64, end: u64) -> SmStats {
        self.advance_to(end);
        let fresh = SmStats {
            schedulers: self.stats.schedulers,
            ..SmStats::default()
        };
        let mut s = std::mem::replace(&mut self.stats, fresh);
        s.cycles = self.now.saturating_sub(start);
        s
    }

    /// [`Sm::take_stats`] for the last time.
    pub fn finish(mut self, start: u64, end: u64) -> SmStats {
        self.take_stats(start, end)
    }
}

/// Runs `ctas` (CTAs of `kernel`, all resident at once) on one SM to completion and
/// returns its counters; idle cycles are skipped.
pub fn run_cta_batch(
    spec: &SmSpec,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
) -> Result<SmStats, SmError> {
    run_cta_batch_with(spec, kernel, ctas, &SmOptions::default())
}

/// [`run_cta_batch`] with options. Memory instructions take the placeholder latency of
/// [`SmSpec::mem_placeholder_latency_cycles`].
pub fn run_cta_batch_with(
    spec: &SmSpec,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
    opts: &SmOptions,
) -> Result<SmStats, SmError> {
    let n_warps: u64 = ctas.iter().map(|c| c.warps.len() as u64).sum();
    if n_warps > spec.warp_slots as u64 {
        return Err(SmError::TooManyWarps {
            warps: n_warps,
            slots: spec.warp_slots,
        });
    }
    let mut sm = Sm::new(Arc::new(spec.clone()), 0, opts.record_log);
    sm.set_kernel(Arc::new(KernelPrep::new(kernel)))?;
    for (i, c) in ctas.iter().enumerate() {
        sm.add_cta(c.clone(), i as u64)?;
    }
    let mut mem = PlaceholderMem;
    while sm.live > 0 {
        let Some(next) = sm.next_issue() else {
            return Err(sm.deadlock());
        };
        if !opts.tick_every_cycle {
            sm.advance_to(next);
        }
        sm.step(&mut mem);
    }
    let end = sm.now.max(sm.complete_at);
    Ok(sm.finish(0, end))
}
