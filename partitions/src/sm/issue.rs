//! The SM as the GPU's event loop sees it ([`Sm`]) and its issue stage: in each core
//! cycle every sub-core scheduler issues at most one warp instruction, checked against the
//! scoreboard, through an operand collector to its class's functional unit or, for memory
//! classes, to the LD/ST port.
//!
//! [`Sm`] is steppable and persists across kernels ([`Sm::set_kernel`] when empty,
//! [`Sm::take_stats`] per kernel): CTAs arrive ([`Sm::add_cta`]) and complete
//! ([`Sm::complete_ctas`]) while it runs; the GPU loop asks [`Sm::next_event`], accounts
//! the skipped cycles ([`Sm::advance_to`]) and runs one cycle ([`Sm::step`]). Cycles in
//! which no warp can issue are skipped (the loop jumps to the first cycle at which one
//! can), with results identical to stepping every cycle, stall counters included.

use super::cta::Resident;
use super::decode::KernelPrep;
use super::icache::{fetch, Icache};
use super::ldst::{InFlight, MemIssue, MemPort, MemToken, NO_VALUE};
use super::params::SmParams;
use super::scheduler::{Entry, SchedState};
use super::scoreboard::{is_long, refresh_warp, NEVER};
use super::spin::{self, SpinRole, SpinWarp};
use super::stats::SmStats;
use super::warp::WarpState;
use crate::config::SchedulerPolicy;
use crate::observe::{IssueEvent, Probe};
use std::sync::Arc;
use tessera_traces::{MBarrierKind, OpClass, WarpCursor};

/// Why the SM refused a call or cannot go on.
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
    /// A CTA's stream does not encode (its instructions disagree with the kernel's static
    /// table).
    #[error("CTA {cta}: {detail}")]
    Trace { cta: u32, detail: &'static str },
    /// A spin region the warp cannot run as the trace gives it (issue 24).
    #[error("CTA ({},{},{}) warp {warp}, pc {pc:#x}: {detail}", cta[0], cta[1], cta[2])]
    Spin {
        cta: [u32; 3],
        warp: u32,
        pc: u32,
        detail: String,
    },
    /// A warp accesses outside every allocation (or outside shared memory), as `verify`
    /// refuses.
    #[error("CTA ({},{},{}): {fault}", cta[0], cta[1], cta[2])]
    Access {
        cta: [u32; 3],
        fault: tessera_traces::AccessFault,
    },
}

/// One SM running CTAs of one kernel at a time ([`Sm::set_kernel`]; it persists across
/// kernels); CTAs arrive ([`Sm::add_cta`]) and leave ([`Sm::complete_ctas`]) while it
/// runs. Time is in core cycles; [`Sm::now`] is the first cycle not yet accounted.
///
/// Every per-event question is answered from per-scheduler caches (see `SchedState`)
/// in time proportional to the schedulers, not the warps: the next issue cycle, the stall
/// reason of an idle interval, the CTAs ready to complete.
pub struct Sm {
    pub(super) params: Arc<SmParams>,
    pub(super) prep: Option<Arc<KernelPrep>>,
    pub(super) warps: Vec<WarpState>,
    /// Per warp slot, the decoder of its warp's instructions (a few at a time).
    pub(super) cursors: Vec<WarpCursor>,
    pub(super) used: Vec<bool>,
    /// Warp slots in use.
    pub(super) n_used: u32,
    /// Scoreboards: for warp slot `w`, `reg_ready[w * stride + r]` is the cycle from which
    /// register `r` has no pending write ([`NEVER`] while it awaits a memory reply).
    pub(super) reg_ready: Vec<u64>,
    /// Per register as `reg_ready`: whether its last write is long-latency ([`is_long`]);
    /// `two_level` only (empty otherwise).
    pub(super) reg_long: Vec<bool>,
    /// The policy is `two_level` (only it reads [`WarpState::long_at`]).
    pub(super) two_level: bool,
    pub(super) stride: usize,
    pub(super) scheds: Vec<SchedState>,
    pub(super) ctas: Vec<Option<Resident>>,
    /// Resident CTAs, and those of them that are [`Resident::finished`].
    pub(super) n_resident: usize,
    pub(super) n_finished: usize,
    /// The earliest `complete_at` of the finished CTAs ([`NEVER`] when none; fixed once a
    /// CTA is finished).
    pub(super) finished_at: u64,
    pub(super) next_age: u64,
    pub(super) live: u32,
    pub(super) now: u64,
    pub(super) complete_at: u64,
    /// Its observer, if any.
    pub(super) probe: Option<Probe>,
    pub(super) stats: SmStats,
    /// In-flight memory instructions, indexed by [`MemToken`]; `free` lists the reusable
    /// entries (last freed first, so token numbering is deterministic).
    pub(super) inflight: Vec<InFlight>,
    pub(super) free: Vec<u32>,
    /// Entries of `inflight` that are live.
    pub(super) pending: u32,
    pub(super) icache: Option<Icache>,
    /// A warp's access outside its kernel's allocations, met while decoding it: the run
    /// stops with it ([`Sm::take_fault`]).
    pub(super) fault: Option<SmError>,
    /// The LD/ST unit takes no memory instruction ([`Sm::block_memory`]).
    pub(super) mem_blocked: bool,
    /// Per warp slot, its state in the spin region it is in (`sm/spin.rs`).
    pub(super) spins: Vec<SpinWarp>,
}

/// Warp slots whose per-slot tables [`Sm::new`] reserves up front (more are grown on use).
const MAX_RESERVED_SLOTS: usize = 128;

impl Sm {
    /// An empty SM whose first cycle is `now`, with no kernel yet ([`Sm::set_kernel`]).
    pub fn new(params: Arc<SmParams>, now: u64) -> Self {
        let n_sched = params.schedulers.max(1);
        let cap = match params.policy {
            SchedulerPolicy::TwoLevel => params.two_level_active_warps.max(1) as usize,
            SchedulerPolicy::Lrr | SchedulerPolicy::Gto => 0,
        };
        let (banks, colls) = (
            params.reg_banks_per_sched as usize,
            params.collectors_per_sched as usize,
        );
        let icache = params.icache.map(Icache::new);
        // The per-slot tables take their full size once, not by doubling as the first
        // CTAs arrive (a warp cursor moved by each growth is a few hundred bytes); capped
        // so that an absurd slot count in a config does not reserve more than warps use.
        let slots = (params.warp_slots as usize).min(MAX_RESERVED_SLOTS);
        let per_sched = slots.div_ceil(n_sched as usize);
        Sm {
            params,
            prep: None,
            warps: Vec::with_capacity(slots),
            cursors: Vec::with_capacity(slots),
            used: Vec::with_capacity(slots),
            n_used: 0,
            reg_ready: Vec::new(),
            reg_long: Vec::new(),
            two_level: cap > 0,
            stride: 1,
            scheds: (0..n_sched)
                .map(|_| {
                    let mut sc = SchedState::new(cap, banks, colls);
                    sc.entries.reserve(per_sched);
                    sc
                })
                .collect(),
            ctas: Vec::new(),
            n_resident: 0,
            n_finished: 0,
            finished_at: NEVER,
            next_age: 0,
            live: 0,
            now,
            complete_at: now,
            probe: None,
            stats: SmStats {
                schedulers: n_sched,
                ..SmStats::default()
            },
            inflight: Vec::new(),
            free: Vec::new(),
            pending: 0,
            icache,
            fault: None,
            mem_blocked: false,
            spins: Vec::new(),
        }
    }

    /// Runs the CTAs of the kernel `prep` from now on. Refused while a CTA is resident.
    pub fn set_kernel(&mut self, prep: Arc<KernelPrep>) -> Result<(), SmError> {
        if self.n_resident > 0 {
            return Err(SmError::Busy {
                resident: self.n_resident,
            });
        }
        // No warp is resident: the scoreboards take the new kernel's size.
        self.stride = prep.regs;
        // Room for every warp slot's scoreboard now, not grown CTA by CTA.
        let slots = (self.params.warp_slots as usize)
            .min(MAX_RESERVED_SLOTS)
            .max(self.used.len());
        self.reg_ready.clear();
        self.reg_ready.reserve(slots * self.stride);
        self.reg_ready.resize(self.used.len() * self.stride, 0);
        self.reg_long.clear();
        if self.two_level {
            self.reg_long.reserve(slots * self.stride);
            self.reg_long.resize(self.used.len() * self.stride, false);
        }
        self.prep = Some(prep);
        Ok(())
    }

    /// Moves an SM with no resident CTA to cycle `t` without accounting the cycles in
    /// between (the gap between two kernels, which belongs to neither's counters).
    /// Refused while a CTA is resident; a `t` in the past is ignored.
    pub fn skip_to(&mut self, t: u64) -> Result<(), SmError> {
        if self.n_resident > 0 {
            return Err(SmError::Busy {
                resident: self.n_resident,
            });
        }
        self.now = self.now.max(t);
        self.complete_at = self.complete_at.max(self.now);
        Ok(())
    }

    /// Folds warp `w`'s times, which only got earlier, into its scheduler's caches.
    #[inline(always)]
    pub(super) fn touch(&mut self, w: usize) {
        let ws = &self.warps[w];
        let sc = &mut self.scheds[ws.sched as usize];
        sc.lower(ws);
        if sc.cap > 0 {
            sc.rescan();
        }
    }

    /// The first cycle not yet accounted.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Resident CTAs.
    pub fn resident(&self) -> usize {
        self.n_resident
    }

    /// Warps of the resident CTAs that have not finished.
    pub fn live_warps(&self) -> u32 {
        self.live
    }

    /// The last cycle at which a result of an issued instruction is written, as known so
    /// far (a pending memory reply may move it later).
    pub fn results_done_at(&self) -> u64 {
        self.complete_at
    }

    /// Free warp slots.
    pub fn free_warp_slots(&self) -> u32 {
        self.params.warp_slots.saturating_sub(self.n_used)
    }

    /// The counters since the last [`Sm::take_stats`] (`cycles` is set by it).
    pub fn stats(&self) -> &SmStats {
        &self.stats
    }

    /// Reports its issues, barriers and CTAs to `probe` from now on.
    pub fn observe(&mut self, probe: Probe) {
        self.probe = Some(probe);
    }

    /// Refreshes warp `w`'s cache of its next instruction.
    #[inline(always)]
    pub(super) fn refresh(&mut self, w: usize) {
        if self.warps[w].done {
            return;
        }
        let (Some(inst), Some(prep)) = (self.cursors[w].peek(), self.prep.as_deref()) else {
            return;
        };
        let base = w * self.stride;
        let long = if self.two_level {
            &self.reg_long[base..base + self.stride]
        } else {
            &[]
        };
        refresh_warp(
            &mut self.warps[w],
            &self.reg_ready[base..base + self.stride],
            long,
            &prep.slots[inst.slot as usize],
            inst.class,
        );
    }

    /// Issues the instruction of the warp at position `pos` of scheduler `s` at `now`.
    ///
    /// The common case (no warp finishes, no barrier) runs on borrows of the fields it
    /// touches, each table indexed once: the borrows show the compiler that the writes
    /// to the scoreboard and the stats cannot move the tables, so nothing is reloaded.
    /// Forced inline into the step loops: it runs once per warp instruction.
    #[inline(always)]
    pub(super) fn issue(&mut self, s: usize, pos: usize, now: u64, mem: &mut impl MemPort) {
        let Sm {
            params,
            prep,
            warps,
            cursors,
            reg_ready,
            reg_long,
            two_level,
            stride,
            scheds,
            ctas,
            live,
            complete_at,
            probe,
            stats,
            inflight,
            free,
            pending,
            icache,
            n_finished,
            finished_at,
            fault,
            spins,
            ..
        } = self;
        // Without a kernel no warp is resident: nothing can issue.
        let Some(prep) = prep.as_deref() else {
            return;
        };
        let (two_level, stride) = (*two_level, *stride);
        let sc = &mut scheds[s];
        let Entry { age, slot, .. } = sc.entries[pos];
        let w = slot as usize;
        sc.last = Some(age);
        sc.last_at = Some(pos as u32);
        sc.rr_start = pos as u32 + 1;
        let cur = &mut cursors[w];
        let Some(&(mut inst)) = cur.peek() else {
            return;
        };
        let ws = &mut warps[w];
        let t = params.timing_of(inst.class);
        // Most instructions run on a full warp: skip the (software) population count.
        let lanes = if inst.mask == u32::MAX {
            32
        } else {
            inst.mask.count_ones() as u64
        };
        let st = &mut *stats;
        st.warp_insts += 1;
        st.sched.issue_slots_used += 1;
        st.thread_insts += lanes;
        st.class_warp_insts[inst.class as usize] += 1;
        if inst.class == OpClass::Exit {
            st.exited_lanes += lanes;
        }
        let cta = ws.cta as usize;
        if let Some(p) = probe {
            let e = IssueEvent {
                cycle: now,
                warp: w as u32,
                cta: cta as u32,
                inst: ws.next as u32,
                class: inst.class,
                lanes: lanes as u32,
            };
            p.obs.issue(p.unit, &e);
        }
        let regs = &prep.slots[inst.slot as usize];
        if let SpinRole::Start(r) = regs.spin {
            if let Some(sw) = spins.get_mut(w) {
                let once = prep
                    .regions
                    .get(r as usize)
                    .is_some_and(|g| !g.kind.loops());
                spin::enter(sw, cur, r, once);
                // Served from the kept body from here: its addresses are the body's.
                if let Some(&i) = cur.peek() {
                    inst = i;
                }
            }
        }
        // Operand reads before dispatch: bank conflicts delay the result. The unit's
        // interval still counts from issue: collectors dispatch in any order (GPGPU-Sim),
        // so a later instruction whose operands are ready can take the unit meanwhile.
        let shift = if params.reg_bank_use_warp_id { w } else { 0 };
        let x = sc.collect(&regs.srcs, shift, now, &mut st.operands);
        sc.unit_free[inst.class as usize] = now + t.initiation_cycles as u64;
        let Some(rc) = ctas[cta].as_mut() else {
            return;
        };
        let mut is_pending = false;
        let done_at = if inst.class.is_memory() {
            // The last freed entry, taken off the free list only if the result is pending
            // (an answer known now leaves the list as it was).
            let (token, listed) = match free.last() {
                Some(&t) => (t, true),
                None => {
                    inflight.push(InFlight {
                        warp: 0,
                        slot: 0,
                        delay: 0,
                        live: false,
                        value: NO_VALUE,
                    });
                    (inflight.len() as u32 - 1, false)
                }
            };
            let addrs = cur.lane_source();
            let mut value = NO_VALUE;
            let issued = if regs.sync {
                let sw = spins.get_mut(w);
                let holds = params.check_lock_holders.then(|| rc.cta.id());
                match spin::access_sync(
                    mem,
                    sw,
                    cur,
                    &inst,
                    regs.operands,
                    now,
                    token,
                    holds,
                    &mut st.spin,
                ) {
                    Some((r, v)) => {
                        value = v;
                        r.unwrap_or_else(|detail| {
                            if fault.is_none() {
                                *fault = Some(SmError::Spin {
                                    cta: rc.cta.id(),
                                    warp: cur.warp_id(),
                                    pc: inst.pc,
                                    detail,
                                });
                            }
                            MemIssue::Done(now + 1)
                        })
                    }
                    None => mem.access(now, addrs, &inst, MemToken(token), t.latency_cycles),
                }
            } else {
                mem.access(now, addrs, &inst, MemToken(token), t.latency_cycles)
            };
            let done_at = match issued {
                MemIssue::Done(at) => {
                    if !listed {
                        free.push(token);
                    }
                    // The memory system sees accesses in issue order (the GPU advances
                    // SMs in global time), so the operand delay comes after it.
                    at.max(now + 1) + x
                }
                MemIssue::Pending => {
                    if listed {
                        free.pop();
                    }
                    inflight[token as usize] = InFlight {
                        warp: w as u32,
                        slot: inst.slot,
                        delay: x,
                        live: true,
                        value,
                    };
                    *pending += 1;
                    is_pending = true;
                    NEVER
                }
            };
            if is_pending {
                ws.mem_pending += 1;
            } else {
                ws.mem_done_at = ws.mem_done_at.max(done_at);
            }
            done_at
        } else {
            now + x + t.latency_cycles as u64
        };
        if is_pending {
            rc.pending += 1;
            rc.complete_at = rc.complete_at.max(now + 1);
        } else {
            *complete_at = (*complete_at).max(done_at);
            rc.complete_at = rc.complete_at.max(done_at).max(now + 1);
        }
        let base = w * stride;
        let board = &mut reg_ready[base..base + stride];
        if two_level {
            let long = is_long(inst.class);
            let long_board = &mut reg_long[base..base + stride];
            for &r in regs.dsts.iter() {
                board[r as usize] = done_at;
                long_board[r as usize] = long;
            }
        } else {
            for &r in regs.dsts.iter() {
                board[r as usize] = done_at;
            }
        }
        // An mbarrier operation's count or phase (its first active lane's; an arrival
        // sums its lanes'), read before the cursor moves past it.
        let mbar_arg = match regs.mbar {
            Some(m) => {
                let ops = cur.operands(regs.operands).unwrap_or(&[]);
                Some(match m.kind {
                    MBarrierKind::Arrive => {
                        ops.iter().fold(0u32, |a, &x| a.saturating_add(x as u32))
                    }
                    _ => ops.first().map_or(0, |&x| x as u32),
                })
            }
            None => None,
        };
        let moved = if regs.spin == SpinRole::None && !cur.looping() {
            ws.next += 1;
            cur.advance(&rc.cta)
        } else {
            // In a spin region, or at one's start, test or back-edge.
            match spin::advance(
                regs.spin,
                &prep.regions,
                &mut spins[w],
                cur,
                &rc.cta,
                ws,
                &inst,
                now,
                &mut st.spin,
                params.check_lock_holders,
            ) {
                Ok(consumed) => {
                    ws.next += consumed;
                    Ok(())
                }
                Err(e) => {
                    if fault.is_none() {
                        *fault = Some(e);
                    }
                    ws.end = ws.next;
                    Ok(())
                }
            }
        };
        if let Err(e) = moved {
            // A stream is checked whole when made, but its accesses as its warps are
            // decoded: the warp ends before the access, and the run stops with it.
            ws.end = ws.next;
            if fault.is_none() {
                *fault = Some(match cur.fault() {
                    Some(&f) => SmError::Access {
                        cta: rc.cta.id(),
                        fault: f,
                    },
                    None => SmError::Trace {
                        cta: cta as u32,
                        detail: e.0,
                    },
                });
            }
        }
        let next = if ws.next < ws.end { cur.peek() } else { None };
        if let (Some(next), Some(ic)) = (next, icache.as_mut()) {
            fetch(ic, prep.code_base, &mut st.icache, ws, next.pc, now);
        }
        if ws.next == ws.end {
            if let Some(r) = spins.get(w).and_then(|sw| sw.region) {
                // Its stream ended inside a spin region: the trace's region is not one.
                if fault.is_none() {
                    *fault = Some(SmError::Spin {
                        cta: rc.cta.id(),
                        warp: cur.warp_id(),
                        pc: inst.pc,
                        detail: format!(
                            "the warp's stream ends inside spin region {r} (entered and never \
                             left through its back-edge)"
                        ),
                    });
                }
            }
            ws.done = true;
            *live -= 1;
            sc.unfinished -= 1;
            rc.alive -= 1;
            if rc.finished() {
                *n_finished += 1;
                *finished_at = (*finished_at).min(rc.complete_at);
            }
        } else if inst.class == OpClass::Barrier && regs.bar.is_none() {
            ws.at_barrier = true;
            rc.arrived.push((w as u32, now));
        } else if let Some(b) = regs.bar {
            // A named barrier (issue 24): counted, and waited for unless arrive-only.
            self.arrive_named(cta, w, b, now);
        } else if let (Some(m), Some(arg)) = (regs.mbar, mbar_arg) {
            self.mbarrier(cta, w, m, inst.pc, arg, now);
        } else {
            // The common case: nothing else moves; the warp's cache of its next
            // instruction is refreshed here, where its parts are at hand.
            if let Some(next) = next {
                let long_board = if two_level {
                    &reg_long[base..base + stride]
                } else {
                    &[]
                };
                refresh_warp(
                    ws,
                    &reg_ready[base..base + stride],
                    long_board,
                    &prep.slots[next.slot as usize],
                    next.class,
                );
            }
            sc.settle_issue(ws, now);
            return;
        }
        // A warp finished or reached a barrier: the barrier may release (which moves other
        // warps' times), then as above.
        self.try_release(cta, now);
        self.refresh(w);
        let ws = &self.warps[w];
        self.scheds[s].settle_issue(ws, now);
    }

    /// The first cycle at which a warp could issue, or `None` when no warp can issue
    /// before something arrives (all finished, all waiting for memory replies) or ever
    /// again (a deadlock: see [`Sm::check_deadlock`]).
    pub fn next_issue(&self) -> Option<u64> {
        let t = self
            .scheds
            .iter()
            .map(|s| s.next_issue)
            .min()
            .unwrap_or(NEVER);
        (t != NEVER).then_some(t)
    }

    /// The next cycle (at least [`Sm::now`]) at which this SM has something to do: a warp
    /// may issue or a finished CTA completes. `None` when it has nothing to do until a
    /// [`Sm::mem_reply`] (ask again after one) or nothing left at all. Warps blocked only
    /// on pending memory replies give no time.
    pub fn next_event(&self) -> Option<u64> {
        let issue = self.next_issue();
        let done = (self.n_finished > 0).then_some(self.finished_at);
        match (issue, done) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|t| t.max(self.now))
    }

    /// Whether [`Sm::complete_ctas`] at cycle `t` would complete a CTA.
    #[inline]
    pub fn completes_by(&self, t: u64) -> bool {
        self.n_finished > 0 && self.finished_at <= t
    }

    /// The error that stopped a warp while it ran (an access outside its kernel's
    /// allocations), once.
    pub fn take_fault(&mut self) -> Option<SmError> {
        self.fault.take()
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
    #[inline(never)]
    pub fn step(&mut self, mem: &mut impl MemPort) {
        let now = self.now;
        for s in 0..self.scheds.len() {
            let sc = &self.scheds[s];
            if sc.cap > 0 {
                self.step_two_level(s, now, mem);
                continue;
            }
            // An issue elsewhere this cycle cannot make one of this scheduler's warps ready
            // now (a barrier releases for the next cycle), so its cache decides.
            if sc.issue_at.max(sc.coll_at) <= now {
                if let Some(pos) = self.pick(s, now) {
                    self.issue(s, pos, now, mem);
                    if !self.mem_blocked && !mem.accepting() {
                        self.block_memory();
                    }
                    continue;
                }
            }
            self.count_stall(s, now);
        }
        self.now += 1;
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
