//! The kernel launch path's config section and the parameters of the command processors
//! ([`super::cp`]) built from it.

use crate::config::{section, Kind, MAX_PS};

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
        /// cycle (the port contract). Presets: one SM cycle (Accel-Sim's
        /// `-gpgpu_TB_launch_latency 0`, raised to the minimum).
        cta_dispatch_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
        /// The local CP's receipt of the last CTA's completion report to the kernel's
        /// completion seen by the host (local CP -> global CP -> host). Presets: assumed
        /// equal to `gcp_to_lcp_ps`.
        completion_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
    }
}

