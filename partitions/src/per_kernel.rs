//! Memory counters per kernel, attributed by the context of the work a unit does (the
//! [`Ctx`] every memory request and response carries).
//!
//! A unit keeps its totals as always; when the context of its work changes, what its
//! counters grew by since the last change goes to the context it leaves ([`PerKernel`]).
//! Everything a unit counts thus goes to exactly one kernel or to the host, and the
//! per-kernel counters add up to the totals by construction, at the cost of one comparison
//! per request. Work a unit does on its own between requests (a DRAM write drain, a
//! refresh) counts for the context of the last request it took; a write-back for the
//! context the request message says (`mem/message.rs`); host-to-device copies and the
//! command processors' control messages for the host.

use crate::counters::unit_counters;
use crate::mem::Ctx;

unit_counters! {
    /// The memory traffic of one kernel (in `kernels[i].memory`) or of the host (its
    /// copies and the control messages, in `totals.host_memory`); the same meaning as the
    /// totals of the same names, which they add up to: L1D, L2 and LLC sector accesses,
    /// hits and misses, DRAM sector reads and writes and bytes, NoC bytes, and packets and
    /// bytes sent on inter-chiplet links and GPU-fabric ports (the sum of `links`).
    pub struct KernelMemStats {
        /// `l1d_accesses` of this context (see the chiplets' `memory.l1d_accesses`).
        l1d_accesses,
        /// `l1d_hits` of this context (see the chiplets' `memory.l1d_hits`).
        l1d_hits,
        /// `l1d_misses` of this context (see the chiplets' `memory.l1d_misses`).
        l1d_misses,
        /// `l2_accesses` of this context (see the chiplets' `memory.l2_accesses`).
        l2_accesses,
        /// `l2_hits` of this context (see the chiplets' `memory.l2_hits`).
        l2_hits,
        /// `l2_misses` of this context (see the chiplets' `memory.l2_misses`).
        l2_misses,
        /// `llc_accesses` of this context (see the chiplets' `memory.llc_accesses`).
        llc_accesses,
        /// `llc_hits` of this context (see the chiplets' `memory.llc_hits`).
        llc_hits,
        /// `llc_misses` of this context (see the chiplets' `memory.llc_misses`).
        llc_misses,
        /// `dram_reads` of this context (see the chiplets' `memory.dram_reads`).
        dram_reads,
        /// `dram_writes` of this context (see the chiplets' `memory.dram_writes`).
        dram_writes,
        /// `dram_bytes` of this context (see the chiplets' `memory.dram_bytes`).
        dram_bytes,
        /// `noc_request_bytes` of this context (see the chiplets' `memory.noc_request_bytes`).
        noc_request_bytes,
        /// `noc_reply_bytes` of this context (see the chiplets' `memory.noc_reply_bytes`).
        noc_reply_bytes,
        /// Packets sent for this context on inter-chiplet links and GPU-fabric ports (its
        /// part of the sum of `links[].packets`).
        link_packets,
        /// Packet bytes sent for this context on inter-chiplet links and GPU-fabric ports
        /// (its part of the sum of `links[].bytes`).
        link_bytes,
    }
}

/// What one unit counted, per kernel (listing index) and for the host.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelTally {
    pub kernels: Vec<KernelMemStats>,
    pub host: KernelMemStats,
}

impl KernelTally {
    /// Adds `o`'s counters, kernel by kernel.
    pub fn add(&mut self, o: &KernelTally) {
        if self.kernels.len() < o.kernels.len() {
            self.kernels
                .resize(o.kernels.len(), KernelMemStats::default());
        }
        for (a, b) in self.kernels.iter_mut().zip(&o.kernels) {
            a.add(b);
        }
        self.host.add(&o.host);
    }

    /// The counters of `ctx`'s kernel, or the host's.
    pub fn of(&mut self, ctx: Option<Ctx>) -> &mut KernelMemStats {
        match ctx.and_then(Ctx::kernel) {
            Some(k) => {
                let k = k as usize;
                if self.kernels.len() <= k {
                    self.kernels.resize(k + 1, KernelMemStats::default());
                }
                &mut self.kernels[k]
            }
            None => &mut self.host,
        }
    }
}

/// A unit's counters split by context as its work changes context.
#[derive(Clone, Debug, Default)]
pub struct PerKernel {
    /// The kernel of the current work (`None`: the host, or nothing yet).
    cur: Option<u32>,
    /// The unit's counters when the current context began.
    base: KernelMemStats,
    tally: KernelTally,
}

impl PerKernel {
    /// Whether work of `ctx` is not the current context's (then [`PerKernel::enter`]).
    #[inline(always)]
    pub fn leaves(&self, ctx: Ctx) -> bool {
        ctx.kernel() != self.cur
    }

    /// Work of `ctx` begins; `now` is the unit's counters so far.
    pub fn enter(&mut self, ctx: Ctx, now: KernelMemStats) {
        self.settle(now);
        self.cur = ctx.kernel();
    }

    /// Gives what the counters grew by since the current context began to that context.
    fn settle(&mut self, now: KernelMemStats) {
        let d = now.since(&self.base);
        self.tally.of(self.cur.map(ctx_of_kernel)).add(&d);
        self.base = now;
    }

    /// The split at the end of the run; `now` is the unit's final counters.
    pub fn finish(mut self, now: KernelMemStats) -> KernelTally {
        self.settle(now);
        self.tally
    }

    /// The split so far, `now` being the unit's counters: what [`PerKernel::finish`]
    /// would give, the unit going on (what every unit's `per_kernel()` returns).
    pub fn tally(&self, now: KernelMemStats) -> KernelTally {
        self.clone().finish(now)
    }
}

/// A context naming kernel `k` (only its kernel field matters here).
fn ctx_of_kernel(k: u32) -> Ctx {
    Ctx::new(0, 0, k).unwrap_or(Ctx::HOST)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(k: u32) -> Ctx {
        Ctx::new(0, 0, k).unwrap()
    }

    #[test]
    fn growth_goes_to_the_context_it_happened_in() {
        let mut p = PerKernel::default();
        // Before any request: the host's.
        let mut now = KernelMemStats {
            l2_accesses: 3,
            ..KernelMemStats::default()
        };
        assert!(p.leaves(c(0)));
        p.enter(c(0), now);
        now.l2_accesses = 10;
        assert!(!p.leaves(c(0)));
        p.enter(Ctx::HOST, now);
        now.l2_accesses = 12;
        p.enter(c(2), now);
        now.l2_accesses = 20;
        let t = p.finish(now);
        assert_eq!(t.host.l2_accesses, 3 + 2);
        let per: Vec<u64> = t.kernels.iter().map(|k| k.l2_accesses).collect();
        assert_eq!(per, vec![7, 0, 8]);
        let sum: u64 = per.iter().sum::<u64>() + t.host.l2_accesses;
        assert_eq!(sum, 20);
    }
}
