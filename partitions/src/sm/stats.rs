//! Counters of one SM's issue model (integers only, DESIGN.md section 3) and the stall
//! accounting of the cycles in which a scheduler does not issue.

use super::issue::Sm;
use tessera_traces::OpClass;

/// What one SM counted between two [`Sm::take_stats`].
///
/// Every scheduler-cycle of the run is counted exactly once, in `issue_slots_used` or in one
/// of the four stall counters, so
/// `issue_slots_used + stall_scoreboard + stall_unit_busy + stall_barrier + stall_no_warp
/// == cycles * schedulers` (checked by the tests). The reason of a cycle in which a
/// scheduler did not issue is the first that applies, in this order:
/// 1. `stall_unit_busy`: some warp of the scheduler had its registers ready but the
///    functional unit of its next instruction's class was inside its initiation interval,
///    or every operand collector of the scheduler was busy;
/// 2. `stall_scoreboard`: otherwise, some warp's next instruction read or wrote a register
///    with a pending write, or was not fetched yet (I-cache);
/// 3. `stall_barrier`: otherwise, some warp was waiting at a CTA barrier (or in the one
///    cycle between the barrier's release and the warps' next issue);
/// 4. `stall_no_warp`: the scheduler had no unfinished warp (none assigned, or all done
///    and the SM still draining other schedulers' warps or in-flight results).
///
/// Under `two_level`, a pending-pool warp that is not blocked (it waits only for a slot of
/// the full active pool) counts for none of these.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SmStats {
    /// Core cycles from the first issue slot (cycle 0) until every warp has finished and
    /// every issued instruction's result is written (the last `issue + latency`).
    pub cycles: u64,
    /// Schedulers of the SM (the issue slots per cycle).
    pub schedulers: u32,
    /// Warp instructions issued (each traced warp instruction exactly once).
    pub warp_insts: u64,
    /// Thread instructions: the sum of the active-lane counts of the issued instructions.
    pub thread_insts: u64,
    /// Warp instructions issued per [`OpClass`] (indexed by discriminant).
    pub class_warp_insts: [u64; OpClass::COUNT],
    /// Scheduler-cycles with an issue (equals `warp_insts`).
    pub issue_slots_used: u64,
    /// See the type's documentation.
    pub stall_unit_busy: u64,
    /// See the type's documentation.
    pub stall_scoreboard: u64,
    /// See the type's documentation.
    pub stall_barrier: u64,
    /// See the type's documentation.
    pub stall_no_warp: u64,
    /// CTA barriers completed (one per barrier instance of a CTA, not per warp).
    pub barriers: u64,
    /// Lanes retired by `EXIT` instructions.
    pub exited_lanes: u64,
    /// Operand reads from the register banks (distinct source registers of the issued
    /// instructions; 0 without `core.operand_collection`).
    pub operand_reads: u64,
    /// Operand reads that found their bank busy (read by an earlier read of the same
    /// instruction or of an earlier one) and waited at least a cycle.
    pub bank_conflicts: u64,
    /// Cycles by which bank conflicts delayed instructions (per instruction, its last
    /// operand read's delay), summed.
    pub bank_conflict_cycles: u64,
    /// Instruction fetches through the I-cache (one per warp instruction; 0 when
    /// `core.icache.enabled` is false), and those that missed (lines filled).
    pub icache_accesses: u64,
    pub icache_misses: u64,
    /// Per-barrier log, filled only when the SM records ([`Sm::new`]'s `record`).
    pub barrier_log: Vec<BarrierEvent>,
    /// Per-issue log, filled only when the SM records ([`Sm::new`]'s `record`).
    pub issue_log: Vec<IssueEvent>,
}

impl SmStats {
    /// Sum of the four stall counters.
    pub fn stalls(&self) -> u64 {
        self.stall_unit_busy + self.stall_scoreboard + self.stall_barrier + self.stall_no_warp
    }

    /// Issued warp instructions of `class`.
    pub fn class(&self, class: OpClass) -> u64 {
        self.class_warp_insts[class as usize]
    }
}

/// One completed CTA barrier (test hook / debugging).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BarrierEvent {
    /// Index of the CTA in the batch.
    pub cta: u32,
    /// Which barrier of this CTA (0, 1, ...).
    pub seq: u32,
    /// `(warp slot, cycle its BAR issued)` for every warp that arrived, in arrival order.
    pub arrivals: Vec<(u32, u64)>,
    /// The cycle from which every arrived warp may issue again (last arrival + 1).
    pub release_cycle: u64,
}

/// One issued warp instruction (test hook / debugging).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IssueEvent {
    /// Issue cycle.
    pub cycle: u64,
    /// Warp slot (CTAs' warps numbered consecutively in batch order).
    pub warp: u32,
    /// Index of the CTA in the batch.
    pub cta: u32,
    /// Index of the instruction in its warp's stream.
    pub inst: u32,
    /// Its class.
    pub class: OpClass,
}

impl Sm {
    /// Counts the stall reason of scheduler `s` for every cycle of `[a, b)`, during which
    /// no warp of it can issue and nothing changes.
    ///
    /// Why the cached minima suffice: an unfinished warp that cannot issue at `c` is, in
    /// order, at a barrier (`c < e1`, or waiting at one: `e1 = NEVER`), on the scoreboard
    /// (`e1 <= c < e2`), or held by its unit (`e2 <= c`, which in a stall interval means
    /// `c < unit free`). Its reason only moves up the precedence unit > scoreboard >
    /// barrier as `c` grows, so the scheduler's reason is `unit` from `min e2` on,
    /// `scoreboard` from `min e1` on, `barrier` before, and `no_warp` without an
    /// unfinished warp: exactly the per-warp classification, in O(1).
    pub(super) fn count_stalls(&mut self, s: usize, a: u64, b: u64) {
        if a >= b {
            return;
        }
        let sc = &self.scheds[s];
        let st = &mut self.stats;
        if sc.unfinished == 0 {
            st.stall_no_warp += b - a;
            return;
        }
        let u = sc.min_e2.clamp(a, b);
        let sb = sc.min_e1.clamp(a, b).min(u);
        st.stall_unit_busy += b - u;
        st.stall_scoreboard += u - sb;
        st.stall_barrier += sb - a;
    }

    /// [`Sm::count_stalls`] for the one cycle `now` (the same classification, as
    /// branches rather than clamps).
    #[inline]
    pub(super) fn count_stall(&mut self, s: usize, now: u64) {
        let sc = &self.scheds[s];
        let st = &mut self.stats;
        if sc.unfinished == 0 {
            st.stall_no_warp += 1;
        } else if sc.min_e2 <= now {
            st.stall_unit_busy += 1;
        } else if sc.min_e1 <= now {
            st.stall_scoreboard += 1;
        } else {
            st.stall_barrier += 1;
        }
    }
}
