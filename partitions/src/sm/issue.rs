//! The mutable state of one SM's issue stage and the cycle loop that drives it.

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

/// Registers a scoreboard tracks per warp (R0..R254; R255 is RZ).
const REGS: usize = 256;

/// Per static instruction: the registers its issue waits on (sources and destinations,
/// RZ excluded, deduplicated) and the registers it writes.
struct SlotRegs {
    wait: Vec<u16>,
    dsts: Vec<u16>,
}

/// One warp's state (plain data).
struct WarpState {
    cta: u32,
    sched: u32,
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
}

/// One sub-core scheduler's state.
struct SchedState {
    /// Its warp slots, oldest first.
    warps: Vec<u32>,
    /// Position in `warps` of the last warp it issued.
    last: Option<usize>,
    /// Cycle from which each class's unit accepts a new instruction.
    unit_free: [u64; OpClass::COUNT],
}

/// One CTA's barrier state.
struct CtaState {
    alive: u32,
    arrived: Vec<(u32, u64)>,
    seq: u32,
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

struct Sm<'a> {
    spec: &'a SmSpec,
    ctas: &'a [DecodedCta],
    slots: Vec<SlotRegs>,
    warps: Vec<WarpState>,
    scheds: Vec<SchedState>,
    cta_state: Vec<CtaState>,
    live: u32,
    complete_at: u64,
    record: bool,
    stats: SmStats,
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

/// [`run_cta_batch`] with options.
pub fn run_cta_batch_with(
    spec: &SmSpec,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
    opts: &SmOptions,
) -> Result<SmStats, SmError> {
    let mut sm = Sm::new(spec, kernel, ctas, opts.record_log)?;
    sm.run(opts.tick_every_cycle)?;
    Ok(sm.stats)
}

impl<'a> Sm<'a> {
    fn new(
        spec: &'a SmSpec,
        kernel: &KernelMeta,
        ctas: &'a [DecodedCta],
        record: bool,
    ) -> Result<Self, SmError> {
        let n_warps: u64 = ctas.iter().map(|c| c.warps.len() as u64).sum();
        if n_warps > spec.warp_slots as u64 {
            return Err(SmError::TooManyWarps {
                warps: n_warps,
                slots: spec.warp_slots,
            });
        }
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
            .collect::<Vec<_>>();
        let n_sched = spec.schedulers.max(1);
        let mut scheds: Vec<SchedState> = (0..n_sched)
            .map(|_| SchedState {
                warps: Vec::new(),
                last: None,
                unit_free: [0; OpClass::COUNT],
            })
            .collect();
        let mut warps = Vec::with_capacity(n_warps as usize);
        let mut cta_state = Vec::with_capacity(ctas.len());
        for (ci, cta) in ctas.iter().enumerate() {
            if let Some(i) = cta.insts.iter().find(|i| i.slot as usize >= slots.len()) {
                return Err(SmError::BadSlot {
                    cta: ci as u32,
                    slot: i.slot,
                    n: slots.len(),
                });
            }
            let mut alive = 0;
            for w in &cta.warps {
                let slot = warps.len() as u32;
                let sched = slot % n_sched;
                scheds[sched as usize].warps.push(slot);
                let done = w.insts.is_empty();
                if !done {
                    alive += 1;
                }
                warps.push(WarpState {
                    cta: ci as u32,
                    sched,
                    start: w.insts.start,
                    end: w.insts.end,
                    next: w.insts.start,
                    done,
                    at_barrier: false,
                    release_at: 0,
                    reg_ready: vec![0; REGS],
                });
            }
            cta_state.push(CtaState {
                alive,
                arrived: Vec::new(),
                seq: 0,
            });
        }
        let live = cta_state.iter().map(|c| c.alive).sum();
        Ok(Sm {
            spec,
            ctas,
            slots,
            warps,
            scheds,
            cta_state,
            live,
            complete_at: 0,
            record,
            stats: SmStats {
                schedulers: n_sched,
                ..SmStats::default()
            },
        })
    }

    #[inline]
    fn inst(&self, w: usize) -> &'a WarpInst {
        let ws = &self.warps[w];
        &self.ctas[ws.cta as usize].insts[ws.next]
    }

    /// The latest of the cycles at which warp `w`'s registers are free and at which its
    /// unit is free (ignoring barriers).
    #[inline]
    fn reg_and_unit(&self, w: usize) -> (u64, u64) {
        let ws = &self.warps[w];
        let inst = self.inst(w);
        let regs = self.slots[inst.slot as usize]
            .wait
            .iter()
            .map(|&r| ws.reg_ready[r as usize])
            .max()
            .unwrap_or(0);
        let unit = self.scheds[ws.sched as usize].unit_free[inst.class as usize];
        (regs, unit)
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
        for &w in &self.scheds[s].warps {
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
            for &w in &self.scheds[s].warps {
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
            self.earliest(sch.warps[pos] as usize)
                .is_some_and(|t| t <= now)
        };
        match self.spec.policy {
            SchedulerPolicy::Lrr => {
                let start = sch.last.map_or(0, |p| p + 1);
                (0..n).map(|k| (start + k) % n).find(|&p| ready(p))
            }
            // TODO: two_level (an active pool of `two_level_active_warps`, round robin
            // inside) is scheduled as GTO for now.
            SchedulerPolicy::Gto | SchedulerPolicy::TwoLevel => {
                if let Some(p) = sch.last {
                    if ready(p) {
                        return Some(p);
                    }
                }
                // Oldest first: warps are listed in slot order, all assigned at cycle 0.
                (0..n).find(|&p| ready(p))
            }
        }
    }

    fn issue(&mut self, s: usize, pos: usize, now: u64) {
        let w = self.scheds[s].warps[pos] as usize;
        self.scheds[s].last = Some(pos);
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
        let done_at = now + t.latency_cycles as u64;
        self.complete_at = self.complete_at.max(done_at);
        for &r in &self.slots[inst.slot as usize].dsts {
            self.warps[w].reg_ready[r as usize] = done_at;
        }
        let ws = &mut self.warps[w];
        ws.next += 1;
        if ws.next == ws.end {
            ws.done = true;
            self.live -= 1;
            self.cta_state[cta as usize].alive -= 1;
            self.try_release(cta, now);
        } else if inst.class == OpClass::Barrier {
            ws.at_barrier = true;
            self.cta_state[cta as usize].arrived.push((w as u32, now));
            self.try_release(cta, now);
        }
    }

    /// Releases CTA `cta`'s barrier when every unfinished warp has arrived: they all may
    /// issue again from the next cycle.
    fn try_release(&mut self, cta: u32, now: u64) {
        let cs = &mut self.cta_state[cta as usize];
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

    fn deadlock(&self, now: u64) -> SmError {
        let waiting: Vec<String> = self
            .warps
            .iter()
            .enumerate()
            .filter(|(_, w)| !w.done)
            .map(|(i, w)| {
                format!(
                    "warp {i} (CTA {}) at instruction {}",
                    w.cta,
                    w.next - w.start
                )
            })
            .collect();
        SmError::Deadlock {
            cycle: now,
            detail: format!("waiting at barriers: {}", waiting.join(", ")),
        }
    }

    fn run(&mut self, tick: bool) -> Result<(), SmError> {
        let n_sched = self.scheds.len();
        let mut now = 0u64;
        while self.live > 0 {
            let next = (0..self.warps.len()).filter_map(|w| self.earliest(w)).min();
            let Some(next) = next else {
                return Err(self.deadlock(now));
            };
            if !tick && next > now {
                for s in 0..n_sched {
                    self.count_stalls(s, now, next);
                }
                now = next;
            }
            for s in 0..n_sched {
                match self.pick(s, now) {
                    Some(pos) => self.issue(s, pos, now),
                    None => self.count_stalls(s, now, now + 1),
                }
            }
            now += 1;
        }
        let end = now.max(self.complete_at);
        for s in 0..n_sched {
            self.count_stalls(s, now, end);
        }
        self.stats.cycles = end;
        Ok(())
    }
}
