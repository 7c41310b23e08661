//! The shared-memory banks of an SM (part of its LD/ST unit, [`LdStUnit`]): an access's
//! bank passes (counted by `coalesce::shared_passes`) on the banks' port. The port is
//! [`LdStUnit`]'s `shared_port`.

use super::LdStUnit;
use crate::config::{section, Check, ConfigError, GpuConfig, Kind, MAX_CYCLES};
use crate::counters::unit_counters;
use crate::Picos;

section! {
    /// Shared memory timing (its size is `core.shared_mem_per_sm_bytes`).
    pub struct SharedMemConfig {
        /// Banks; lanes hitting different words of one bank serialize. Presets: the
        /// simulator config's `-gpgpu_shmem_num_banks`.
        banks: u32 = Kind::U32, unit "banks", None, range (1, 1024);
        /// Width of one bank (power of two). Presets: 4, checked against measured shared
        /// memory bandwidth of about 128 B per cycle per SM.
        bank_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 1024);
        /// Cycles from a conflict-free shared load's issue to its data. Presets: a measured
        /// shared-memory latency, else the simulator config's `-gpgpu_smem_latency`.
        latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
    }
}

impl SharedMemConfig {
    /// Rejects impossible values of this section alone (module `config::validate` checks
    /// the rest).
    pub(crate) fn check(&self, v: &Check) -> Result<(), ConfigError> {
        let sm = self;
        v.pow2("shared_mem.banks", sm.banks as u64)?;
        v.pow2("shared_mem.bank_bytes", sm.bank_bytes as u64)?;
        v.nonzero("shared_mem.latency_cycles", sm.latency_cycles as u64)?;
        Ok(())
    }
}

/// The parameters of an SM's shared-memory banks (`shared_mem`), converted.
#[derive(Clone, Copy, Debug)]
pub struct SharedMemParams {
    pub(crate) banks: u32,
    pub(crate) bank_bytes: u32,
    pub(crate) latency_cycles: u64,
    /// The core clock (the banks serve `banks * bank_bytes` per cycle) and its period.
    pub(crate) clock_hz: u64,
    pub(crate) core_ps: Picos,
}

impl SharedMemParams {
    pub fn from_config(cfg: &GpuConfig) -> SharedMemParams {
        let s = &cfg.shared_mem;
        SharedMemParams {
            banks: s.banks,
            bank_bytes: s.bank_bytes,
            latency_cycles: s.latency_cycles as u64,
            clock_hz: cfg.core.clock_hz,
            core_ps: cfg.core_period_ps(),
        }
    }
}

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
        let s = &self.params.shared;
        self.stats.shared.accesses += 1;
        let Some(passes) = passes else {
            return now + s.latency_cycles * s.core_ps;
        };
        let passes = passes as u64;
        self.stats.shared.bank_conflicts += passes - 1;
        let per_pass = s.banks as u64 * s.bank_bytes as u64;
        let start = self.shared_port.reserve(now, now, passes * per_pass.max(1));
        start + (s.latency_cycles + passes - 1) * s.core_ps
    }
}
