//! Operand collection (`core.operand_collection`): an issued instruction holds one of its
//! scheduler's collector units until its distinct source registers are read; each of the
//! scheduler's register banks (bank = register, plus the warp slot with
//! `core.reg_bank_use_warp_id`, modulo the banks per scheduler) serves one read per cycle,
//! reads requested from the cycle after issue in register order. Extra cycles of the last
//! read delay the instruction's result (the class latency is the conflict-free one); a
//! scheduler with no free collector cannot issue (counted as `stall_unit_busy`).
//!
//! The banks and collectors are per scheduler: their state is `SchedState::banks`,
//! `colls` and `coll_at`.

use super::scheduler::SchedState;
use super::scoreboard::NEVER;
use crate::counters::unit_counters;

unit_counters! {
    /// Register-bank reads of an SM's operand collectors (0 without
    /// `core.operand_collection`).
    pub struct OperandCollectorStats {
        /// Distinct source registers of the issued instructions.
        reads,
        /// Reads that found their bank busy (read by an earlier read of the same
        /// instruction or of an earlier one) and waited at least a cycle.
        bank_conflicts,
        /// Cycles by which bank conflicts delayed instructions (per instruction, its last
        /// operand read's delay), summed.
        bank_conflict_cycles,
    }
}

impl SchedState {
    /// Reads the source operands `srcs` (in register order) of an instruction issued at
    /// `c`, whose banks are shifted by `shift` (the warp slot with
    /// `core.reg_bank_use_warp_id`), and takes a collector unit until they are read;
    /// returns the delay bank conflicts add to its result (0 without operand
    /// collection).
    ///
    /// The reads are requested from `c + 1` in register order; each takes the first cycle
    /// from then at which its bank is free and holds the bank that cycle (one read per
    /// bank per cycle, across instructions). Without conflicts every read is at `c + 1`
    /// (already part of the class latency, which is measured conflict-free); the delay is
    /// how much later the last read is. The collector is held until the cycle after the
    /// last read (dispatch). Writeback port conflicts are not modelled.
    #[inline(always)]
    pub(super) fn collect(
        &mut self,
        srcs: &[u16],
        shift: usize,
        c: u64,
        stats: &mut OperandCollectorStats,
    ) -> u64 {
        let n = self.banks.len();
        // No banks: operand collection is not modelled.
        let srcs = if n > 0 { srcs } else { &[] };
        let first = c + 1;
        let mut last = first;
        let mask = n.wrapping_sub(1);
        let pow2 = n.is_power_of_two();
        let mut conflicts = 0;
        for &r in srcs {
            let b = if pow2 {
                (r as usize + shift) & mask
            } else {
                (r as usize + shift) % n
            };
            let t = self.banks[b].max(first);
            self.banks[b] = t + 1;
            last = last.max(t);
            conflicts += u64::from(t > first);
        }
        stats.reads += srcs.len() as u64;
        stats.bank_conflicts += conflicts;
        let x = last - first;
        stats.bank_conflict_cycles += x;
        if !self.colls.is_empty() {
            // The first of the free collectors (the gate guarantees one at `c`).
            let colls = &mut self.colls[..];
            let mut i = 0;
            while i < colls.len() && colls[i] > c {
                i += 1;
            }
            if i == colls.len() {
                i = 0;
            }
            colls[i] = last + 1;
            // Two per scheduler (most presets) without the loop's set-up.
            self.coll_at = match *colls {
                [a, b] => a.min(b),
                _ => colls.iter().fold(NEVER, |m, &f| m.min(f)),
            };
        }
        x
    }
}
