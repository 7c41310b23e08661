//! Counters of one SM (integers only, DESIGN.md section 3): its issue stage's, with those
//! of its schedulers, operand collectors and I-cache declared beside them; and the stall
//! accounting of the cycles in which a scheduler does not issue.

pub use super::icache::IcacheStats;
use super::issue::Sm;
pub use super::operand_collector::OperandCollectorStats;
pub use super::scheduler::SchedulerStats;
use serde::{Deserialize, Serialize};
use tessera_traces::OpClass;

/// What one SM counted between two [`Sm::take_stats`].
///
/// Every scheduler-cycle of the run is counted exactly once, in `sched.issue_slots_used` or
/// in one of the five stall counters of [`SchedulerStats`], so `issue_slots_used` plus
/// the five (`stall_scoreboard`, `stall_unit_busy`, `stall_barrier`, `stall_no_warp`,
/// `stall_no_credit`) is `cycles * schedulers` (checked by the tests). The reason of a
/// cycle in which a scheduler did not issue is the first that applies, in this order:
/// 1. `stall_unit_busy`: some warp of the scheduler had its registers ready but the
///    functional unit of its next instruction's class was inside its initiation interval,
///    or every operand collector of the scheduler was busy; counted as `stall_no_credit`
///    instead while the LD/ST unit takes no memory instruction (its miss queue full of
///    packets waiting for NoC credit, [`Sm::block_memory`]);
/// 2. `stall_scoreboard`: otherwise, some warp's next instruction read or wrote a register
///    with a pending write, or was not fetched yet (I-cache);
/// 3. `stall_barrier`: otherwise, some warp was waiting at a CTA barrier (or in the one
///    cycle between the barrier's release and the warps' next issue);
/// 4. `stall_no_warp`: the scheduler had no unfinished warp (none assigned, or all done
///    and the SM still draining other schedulers' warps or in-flight results).
///
/// Under `two_level`, a pending-pool warp that is not blocked (it waits only for a slot of
/// the full active pool) counts for none of these.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    #[serde(with = "class_array")]
    pub class_warp_insts: [u64; OpClass::COUNT],
    /// CTA barriers completed (one per barrier instance of a CTA, not per warp).
    pub barriers: u64,
    /// Lanes retired by `EXIT` instructions.
    pub exited_lanes: u64,
    /// The warp schedulers' issue slots and stalls.
    pub sched: SchedulerStats,
    /// The operand collectors' register-bank reads.
    pub operands: OperandCollectorStats,
    /// Instruction fetches.
    pub icache: IcacheStats,
    /// Its warps' spin regions (issue 24).
    #[serde(default)]
    pub spin: SpinCounters,
}

/// What an SM's warps did in spin regions (`sm/spin.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpinCounters {
    /// Iterations of spin regions (one per warp per round).
    pub iterations: u64,
    /// Lanes that left a spin region with their exit condition satisfied.
    pub exits: u64,
    /// Lanes that took a branch region's tail (the lock won, the last CTA).
    #[serde(default)]
    pub branch_taken: u64,
    /// Lanes that passed a branch region's tail over.
    #[serde(default)]
    pub branch_passed: u64,
    /// Lanes that ran a work-queue region's tail (items popped).
    #[serde(default)]
    pub queue_items: u64,
    /// Lanes that left a work-queue region (the queue was empty).
    #[serde(default)]
    pub queue_exits: u64,
    /// Work-queue rounds (one per warp per round).
    #[serde(default)]
    pub queue_rounds: u64,
    /// Lanes whose weak load of a sync word the SM's L1 answered from its copy (the value
    /// when the L1 got the word: stale if the word changed at its home since).
    #[serde(default)]
    pub l1_sync_hits: u64,
    /// Warp instructions issued again from a kept body (beyond the trace's), and the
    /// trace's instructions passed over without issue (a tail nobody ran), per class:
    /// the trace's own count is `class_warp_insts - replayed + skipped`.
    #[serde(with = "class_array")]
    pub replayed_by_class: [u64; OpClass::COUNT],
    #[serde(with = "class_array")]
    pub skipped_by_class: [u64; OpClass::COUNT],
    /// With `watchdog.check_lock_holders`: the locks held and released, for the end-of-run
    /// overlap check (which takes them out of the stats).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<LockHold>,
}

/// A lane's hold of a lock word: from the cycle its spin region's exit saw its
/// compare-and-swap win to the cycle it wrote the word again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LockHold {
    pub addr: u64,
    pub from: u64,
    pub to: u64,
    pub cta: [u32; 3],
    pub warp: u32,
    pub lane: u8,
}

impl SpinCounters {
    pub fn add(&mut self, o: &SpinCounters) {
        self.iterations += o.iterations;
        self.exits += o.exits;
        self.branch_taken += o.branch_taken;
        self.branch_passed += o.branch_passed;
        self.queue_items += o.queue_items;
        self.queue_exits += o.queue_exits;
        self.queue_rounds += o.queue_rounds;
        self.l1_sync_hits += o.l1_sync_hits;
        self.holds.extend_from_slice(&o.holds);
        for (a, b) in self.replayed_by_class.iter_mut().zip(&o.replayed_by_class) {
            *a += b;
        }
        for (a, b) in self.skipped_by_class.iter_mut().zip(&o.skipped_by_class) {
            *a += b;
        }
    }

    /// The watchdog's progress events among them: lanes that left a spin or queue region,
    /// took or passed a branch region's tail, or popped an item.
    pub fn progress(&self) -> u64 {
        self.exits + self.branch_taken + self.branch_passed + self.queue_items + self.queue_exits
    }

    /// Whether any region ran.
    pub fn any(&self) -> bool {
        self.iterations + self.queue_rounds + self.branch_taken + self.branch_passed > 0
            || self.replayed() > 0
    }

    /// Warp instructions issued beyond the trace's.
    pub fn replayed(&self) -> u64 {
        self.replayed_by_class.iter().sum()
    }
}

impl SmStats {
    /// Sum of the four stall counters.
    pub fn stalls(&self) -> u64 {
        self.sched.stalls()
    }

    /// Issued warp instructions of `class`.
    pub fn class(&self, class: OpClass) -> u64 {
        self.class_warp_insts[class as usize]
    }

    /// Adds the counters of another SM (or another stretch of this one); `schedulers`
    /// stays.
    pub fn add(&mut self, o: &SmStats) {
        self.cycles += o.cycles;
        self.warp_insts += o.warp_insts;
        self.thread_insts += o.thread_insts;
        for (a, b) in self.class_warp_insts.iter_mut().zip(o.class_warp_insts) {
            *a += b;
        }
        self.barriers += o.barriers;
        self.exited_lanes += o.exited_lanes;
        self.sched.add(&o.sched);
        self.operands.add(&o.operands);
        self.icache.add(&o.icache);
        self.spin.add(&o.spin);
    }
}

/// The per-class counts as a sequence (serde has no arrays this long), checked for length
/// when read back.
mod class_array {
    use serde::{Deserialize, Deserializer, Serializer};
    use tessera_traces::OpClass;

    pub fn serialize<S: Serializer>(a: &[u64; OpClass::COUNT], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(a.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; OpClass::COUNT], D::Error> {
        let v = Vec::<u64>::deserialize(d)?;
        let n = v.len();
        v.try_into().map_err(|_| {
            serde::de::Error::custom(format!("{n} class counts, expected {}", OpClass::COUNT))
        })
    }
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
        let st = &mut self.stats.sched;
        if sc.unfinished == 0 {
            st.stall_no_warp += b - a;
            return;
        }
        let u = sc.min_e2.clamp(a, b);
        let sb = sc.min_e1.clamp(a, b).min(u);
        if self.mem_blocked {
            st.stall_no_credit += b - u;
        } else {
            st.stall_unit_busy += b - u;
        }
        st.stall_scoreboard += u - sb;
        st.stall_barrier += sb - a;
    }

    /// [`Sm::count_stalls`] for the one cycle `now` (the same classification, as
    /// branches rather than clamps).
    #[inline]
    pub(super) fn count_stall(&mut self, s: usize, now: u64) {
        let sc = &self.scheds[s];
        let st = &mut self.stats.sched;
        if sc.unfinished == 0 {
            st.stall_no_warp += 1;
        } else if sc.min_e2 <= now {
            if self.mem_blocked {
                st.stall_no_credit += 1;
            } else {
                st.stall_unit_busy += 1;
            }
        } else if sc.min_e1 <= now {
            st.stall_scoreboard += 1;
        } else {
            st.stall_barrier += 1;
        }
    }
}
