//! The shared-memory banks of an SM (part of its LD/ST unit, [`LdStUnit`]): an access's
//! bank passes (counted by `coalesce::shared_passes`) on the banks' port. The port is
//! [`LdStUnit`]'s `shared_port`.

use super::LdStUnit;
use crate::counters::unit_counters;
use crate::Picos;

unit_counters! {
    /// The shared-memory counters of one SM.
    pub struct SharedMemStats {
        /// Warp shared-memory instructions.
        accesses,
        /// Extra passes caused by bank conflicts.
        bank_conflicts,
    }
}

impl LdStUnit {
    /// A shared-memory access at `now` needing `passes` bank passes (`None`: no active
    /// lane).
    pub(super) fn shared(&mut self, now: Picos, passes: Option<u32>) -> Picos {
        let s = &*self.spec;
        self.stats.shared.accesses += 1;
        let Some(passes) = passes else {
            return now + s.shared_latency_cycles * s.core_ps;
        };
        let passes = passes as u64;
        self.stats.shared.bank_conflicts += passes - 1;
        let per_pass = s.shared_banks as u64 * s.shared_bank_bytes as u64;
        let start = self.shared_port.reserve(now, now, passes * per_pass.max(1));
        start + (s.shared_latency_cycles + passes - 1) * s.core_ps
    }
}
