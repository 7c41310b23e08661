//! The mutable state of one SM's issue stage ([`Sm`]), steppable cycle by cycle inside a
//! GPU-wide event loop, and the batch driver [`run_cta_batch_with`] built on it.

use super::spec::SmSpec;
use super::stats::{BarrierEvent, IssueEvent, SmStats};
use crate::config::SchedulerPolicy;
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
}

/// Where memory-class instructions get the cycle their results are written.
pub trait MemPort {
    /// Memory instruction `inst` of `cta` issues at core cycle `cycle`; returns the cycle
    /// from which its destination registers are written (at least `cycle + 1`).
    /// `placeholder_latency` is the class's latency of [`SmSpec`] (used by the batch
    /// driver, which has no memory system).
    fn access(
        &mut self,
        cycle: u64,
        cta: &DecodedCta,
        inst: &WarpInst,
        placeholder_latency: u32,
    ) -> u64;
}

/// The placeholder memory of the batch driver: every memory instruction takes its class's
/// latency from [`SmSpec`] (not a model).
pub struct PlaceholderMem;

impl MemPort for PlaceholderMem {
    fn access(&mut self, cycle: u64, _: &DecodedCta, _: &WarpInst, latency: u32) -> u64 {
        cycle + latency as u64
    }
}

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

/// One SM running CTAs of one kernel; CTAs arrive ([`Sm::add_cta`]) and leave
/// ([`Sm::complete_ctas`]) while it runs. Time is in core cycles; [`Sm::now`] is the
/// first cycle not yet accounted.
pub struct Sm<'a> {
    spec: &'a SmSpec,
    prep: &'a KernelPrep,
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
}

impl<'a> Sm<'a> {
    /// An empty SM whose first cycle is `now`.
    pub fn new(spec: &'a SmSpec, prep: &'a KernelPrep, now: u64, record: bool) -> Self {
        let n_sched = spec.schedulers.max(1);
        Sm {
            spec,
            prep,
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
        }
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

    /// The counters so far (`cycles` is set by [`Sm::finish`]).
    pub fn stats(&self) -> &SmStats {
        &self.stats
    }

    /// Makes `cta` resident from cycle [`Sm::now`]: its warps take the lowest free warp
    /// slots (slot `i` belongs to scheduler `i % schedulers`). Returns its index.
    pub fn add_cta(&mut self, cta: DecodedCta, tag: u64) -> Result<u32, SmError> {
        let ci = self
            .ctas
            .iter()
            .position(|c| c.is_none())
            .unwrap_or(self.ctas.len());
        if let Some(i) = cta
            .insts
            .iter()
            .find(|i| i.slot as usize >= self.prep.slots.len())
        {
            return Err(SmError::BadSlot {
                cta: ci as u32,
                slot: i.slot,
                n: self.prep.slots.len(),
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
        let reg_at = self.prep.slots[inst.slot as usize]
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
        let done_at = if inst.class.is_memory() {
            let r = self.ctas[cta as usize].as_ref().expect("resident");
            mem.access(now, &r.cta, &inst, t.latency_cycles)
                .max(now + 1)
        } else {
            now + t.latency_cycles as u64
        };
        self.complete_at = self.complete_at.max(done_at);
        for &r in &self.prep.slots[inst.slot as usize].dsts {
            self.warps[w].reg_ready[r as usize] = done_at;
        }
        let rc = self.ctas[cta as usize].as_mut().expect("resident");
        rc.complete_at = rc.complete_at.max(done_at).max(now + 1);
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

    /// The first cycle at which a warp could issue, or `None` when no warp can ever issue
    /// again (all finished, or a deadlock: see [`Sm::check_deadlock`]).
    fn next_issue(&self) -> Option<u64> {
        if self.live == 0 {
            return None;
        }
        (0..self.warps.len())
            .filter(|&w| self.used[w])
            .filter_map(|w| self.earliest(w))
            .min()
    }

    /// The next cycle (at least [`Sm::now`]) at which this SM has something to do: a warp
    /// may issue or a finished CTA completes. `None` when it has nothing left.
    pub fn next_event(&self) -> Option<u64> {
        let issue = self.next_issue();
        let done = self
            .ctas
            .iter()
            .flatten()
            .filter(|c| c.alive == 0)
            .map(|c| c.complete_at)
            .min();
        match (issue, done) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|t| t.max(self.now))
    }

    /// An error when some warp is unfinished but none can ever issue again.
    pub fn check_deadlock(&self) -> Result<(), SmError> {
        if self.live > 0 && self.next_issue().is_none() {
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
    /// by cycle `t` (`complete_at <= t`), freeing their warp slots; calls
    /// `f(tag, completion cycle)` for each, in CTA-index order.
    pub fn complete_ctas(&mut self, t: u64, mut f: impl FnMut(u64, u64)) {
        for ci in 0..self.ctas.len() {
            let done = matches!(&self.ctas[ci], Some(c) if c.alive == 0 && c.complete_at <= t);
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

    /// Ends the run at cycle `end` (at least [`Sm::now`]), counting the remaining cycles
    /// as stalls; returns the counters with `cycles = end - start`.
    pub fn finish(mut self, start: u64, end: u64) -> SmStats {
        self.advance_to(end);
        self.stats.cycles = self.now - start;
        self.stats
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
    let prep = KernelPrep::new(kernel);
    let mut sm = Sm::new(spec, &prep, 0, opts.record_log);
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
