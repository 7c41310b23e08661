//! The on-chip network between the SMs and the L2 slices of a chiplet: its config section
//! and the parameters of the NoC ports every SM and slice has (the ports themselves are
//! [`super::port::BwPort`] calendars; the model is in the module documentation of
//! [`crate::mem`]).

use crate::config::{section, Kind, CLOCK_RANGE, MAX_CYCLES};

section! {
    /// The on-chip network between SMs and L2 slices: an egress queue per port, a latency
    /// and an arbiter at the receiver (DESIGN.md section 5).
    pub struct NocConfig {
        /// NoC clock. Presets: the simulator config's interconnect clock domain.
        clock_hz: u64 = Kind::U64, unit "Hz", None, range CLOCK_RANGE;
        /// One-way latency from an SM port to an L2-slice port or back. Presets: assumed
        /// (no study isolates it); it is part of the measured L2 hit latency, see
        /// `l2.hit_latency_cycles`.
        latency_cycles: u32 = Kind::U32, unit "NoC cycles", None, range (1, MAX_CYCLES);
        /// Bytes each port (SM or L2 slice) can send per NoC cycle, each direction.
        /// Presets: the simulator config's flit size.
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per NoC cycle", None, range (1, 65_536);
    }
}

