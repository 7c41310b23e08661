//! The kernel launch path's config section and the parameters of the command processors
//! ([`super::cp`]) built from it.

use crate::config::{
    section, CoreConfig, CtaFitError, GpuConfig, GridSplit, Kind, L2Organization, MAX_PS,
};
use crate::mem::UnitIds;
use crate::Picos;

section! {
    /// The kernel launch path (DESIGN.md section 5): host -> global CP -> local CP -> SMs,
    /// and completion back. Back-to-back launches are spaced by at least `host_to_gcp_ps`
    /// (the host submits one at a time); a kernel's first CTA starts `host_to_gcp_ps +
    /// gcp_to_lcp_ps + cta_dispatch_ps` after its launch command.
    pub struct LaunchConfig {
        /// Host runtime and driver time to submit one launch to the global CP. Presets:
        /// a measured back-to-back launch period, or a measured launch latency minus the
        /// GPU-side segments below (derivation in the preset).
        host_to_gcp_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
        /// Global CP to local CP: kernel slice dispatch. Presets: the kernel-dispatch
        /// latency measured by WANG15 Table 3 (283 cycles at 706 MHz).
        gcp_to_lcp_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
        /// Local CP to an SM, per CTA dispatched, and back, per CTA completion report (the
        /// local CP sends an SM its next CTA when the report arrives); at least one SM
        /// cycle (the port contract). It crosses an SM-cluster cut (the CP is in the
        /// chiplet's first partition), so with the crossbar's legs it bounds that cut's
        /// lookahead. Presets: assumed one crossbar leg (`noc.latency_cycles / 2` NoC
        /// cycles, 10), the same on-chip distance: no study measures a per-CTA dispatch
        /// latency, and GPGPU-Sim's `-gpgpu_TB_launch_latency` is a countdown per kernel
        /// (0 in Accel-Sim's A100 config), not a transit; one SM cycle in the presets that
        /// reproduce GPGPU-Sim 3.x (`gtx480`, `maxwell-13sm`), which has no dispatch
        /// latency.
        cta_dispatch_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
        /// The local CP's receipt of the last CTA's completion report to the kernel's
        /// completion seen by the host (local CP -> global CP -> host). Presets: assumed
        /// equal to `gcp_to_lcp_ps`.
        completion_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
    }
}

/// The parameters of the command processors (host, global and local CPs): the launch path's
/// segments, the host's copies, the grid split, and what each kernel's occupancy is
/// computed from.
#[derive(Clone, Debug)]
pub struct CpParams {
    pub(crate) ids: UnitIds,
    /// The SM clock's period (a CTA dispatch lands on an SM cycle).
    pub(crate) core_ps: Picos,
    pub(crate) host_to_gcp_ps: Picos,
    pub(crate) gcp_to_lcp_ps: Picos,
    pub(crate) cta_dispatch_ps: Picos,
    pub(crate) completion_ps: Picos,
    /// A global CP's completion to the host (`system.host_link.completion_ps`; 0 with one
    /// GPU, where they are one unit).
    pub(crate) to_host_ps: Picos,
    /// `system.host_link`: the host's copies.
    pub(crate) copy_bytes_per_s: u64,
    pub(crate) copy_latency_ps: Picos,
    pub(crate) split: GridSplit,
    /// Kernel boundaries flush the private L2s (`package.l2: private`).
    pub(crate) flush_l2: bool,
    /// The SM's occupancy limits, for each kernel's resident CTAs per SM.
    pub(crate) core: CoreConfig,
}

impl CpParams {
    pub fn from_config(cfg: &GpuConfig) -> CpParams {
        let l = &cfg.launch;
        let host = &cfg.system.host_link;
        let ids = UnitIds::new(cfg);
        CpParams {
            core_ps: cfg.core_period_ps(),
            host_to_gcp_ps: l.host_to_gcp_ps,
            gcp_to_lcp_ps: l.gcp_to_lcp_ps,
            cta_dispatch_ps: l.cta_dispatch_ps,
            completion_ps: l.completion_ps,
            to_host_ps: if ids.gpus() > 1 {
                host.completion_ps
            } else {
                0
            },
            copy_bytes_per_s: host.bandwidth_bytes_per_s,
            copy_latency_ps: host.latency_ps,
            split: cfg.package.grid_split,
            flush_l2: cfg.package.l2 == L2Organization::Private,
            core: cfg.core.clone(),
            ids,
        }
    }

    /// Resident CTAs per SM of a kernel (the occupancy calculation).
    pub(crate) fn max_ctas_per_sm(
        &self,
        threads_per_cta: u32,
        regs_per_thread: u32,
        shmem_bytes: u32,
    ) -> Result<u32, CtaFitError> {
        self.core
            .occupancy(threads_per_cta, regs_per_thread, shmem_bytes)
            .map(|o| o.ctas)
    }
}
