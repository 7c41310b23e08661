//! The on-chip network between the SMs and the L2 slices of a chiplet: its config section
//! and the parameters of the NoC ports every SM and slice has (the ports themselves are
//! [`super::port::BwPort`] calendars; the model is in the module documentation of
//! [`crate::mem`]).

use crate::config::{
    config_enum, section, Check, ConfigError, GpuConfig, Kind, CLOCK_RANGE, MAX_CYCLES,
};
use crate::counters::unit_counters;
use crate::Picos;

config_enum! {
    /// How the NoC of a chiplet is modelled.
    pub enum NocModel {
        /// A bandwidth calendar per port (an egress port at each SM and slice, the
        /// latency, an ingress port at the receiver that serializes arrivals in order).
        Ports = "ports",
        /// An input-queued crossbar per chiplet and class (requests, and replies with
        /// acknowledgements) between the SMs, slices and link interface, which arbitrates
        /// each output every NoC cycle among the inputs with a packet for it
        /// (`mem/crossbar.rs`, `arbiter`); a packet of `f` flits holds its input (the
        /// sender's serialization) and its output (the receiver's) `f` cycles, so the
        /// units' ports add no serialization of their own. A packet takes half of
        /// `latency_cycles` to the crossbar (at least 1 cycle) and the rest from it (at
        /// least 1; `noc.latency_cycles`).
        Crossbar = "crossbar",
    }
}

config_enum! {
    /// How the crossbar (`noc.model: crossbar`) arbitrates.
    pub enum NocArbiter {
        /// A FIFO per input; each output grants round robin among the inputs whose head is
        /// for it (head-of-line blocking: 58.6% of peak under saturated uniform traffic).
        Fifo = "fifo",
        /// A queue per input and output (virtual output queues), one iteration of iSLIP
        /// (McKeown 1999): close to 100% under saturated uniform traffic. Accel-Sim's
        /// local crossbar arbitrates with iSLIP (`-icnt_arbiter_algo 1`).
        Islip = "islip",
    }
}

section! {
    /// The on-chip network between SMs and L2 slices: an egress queue per port, a latency
    /// and an arbiter at the receiver (DESIGN.md section 5).
    pub struct NocConfig {
        /// `ports` or `crossbar` (see the type). Presets: `crossbar` (the default, as the
        /// simulator configs' local crossbar; `ports` is the earlier, faster model without
        /// contention between ports, kept for comparison).
        model: NocModel = Kind::Enum(NocModel::NAMES), unit "-", Some("crossbar");
        /// With `model: crossbar`: `fifo` or `islip` (see the type). Presets: `islip`, as
        /// the simulator config's `-icnt_arbiter_algo 1`.
        arbiter: NocArbiter = Kind::Enum(NocArbiter::NAMES), unit "-", Some("islip");
        /// NoC clock. Presets: the simulator config's interconnect clock domain.
        clock_hz: u64 = Kind::U64, unit "Hz", None, range CLOCK_RANGE;
        /// One-way latency from an SM port to an L2-slice port or back. Presets: assumed
        /// (no study isolates it); it is part of the measured L2 hit latency, see
        /// `l2.hit_latency_cycles`. With `model: crossbar` it is split into two legs:
        /// `latency_cycles / 2` (rounded down, at least 1) from the sender to the crossbar
        /// and the rest (at least 1) from the crossbar to the receiver. Assumed: the
        /// crossbar sits mid-way between the SMs and the L2 slices (no source splits the
        /// path; GPGPU-Sim's local crossbar has no latency of its own); the total, which
        /// the measured L2 hit pins, is `latency_cycles` whatever the split (2 cycles when
        /// it is 1).
        latency_cycles: u32 = Kind::U32, unit "NoC cycles", None, range (1, MAX_CYCLES);
        /// Bytes each port (SM or L2 slice) can send per NoC cycle, each direction.
        /// Presets: the simulator config's flit size.
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per NoC cycle", None, range (1, 65_536);
        /// With `model: crossbar`, the FIFO of each SM's input to the request crossbar, in
        /// flits (`bandwidth_bytes_per_cycle` bytes): the SM's LD/ST unit holds as many
        /// credits, spends a packet's flits when it sends it, and without them the packet
        /// waits in the L1 miss queue (`l1d.miss_queue_packets`); the crossbar returns them
        /// when it grants the packet, a timed message back to the SM. With several
        /// chiplets each of the link interface's inputs (per port and network) holds as
        /// many, and a packet that arrived over a link waits in the link's receive buffer
        /// until its input has room. 0: unbounded, no credits. (The slices' inputs:
        /// `l2.reply_queue_packets`.) Else at least
        /// the flits of the largest packet (an 8 B header and an L2 line). Presets: the
        /// simulator config's `-icnt_in_buffer_limit` (512 in every Accel-Sim config).
        input_buffer_flits: u32 = Kind::U32, unit "flits", Some("512"), range (0, 1_000_000);
    }
}

impl NocConfig {
    /// Rejects impossible values of this section alone (module `config::validate` checks
    /// the rest).
    pub(crate) fn check(&self, v: &Check) -> Result<(), ConfigError> {
        let n = self;
        v.clock("noc.clock_hz", n.clock_hz)?;
        v.nonzero("noc.latency_cycles", n.latency_cycles as u64)?;
        v.nonzero(
            "noc.bandwidth_bytes_per_cycle",
            n.bandwidth_bytes_per_cycle as u64,
        )?;
        Ok(())
    }
}

/// The parameters of a NoC port (`noc`): every SM and every L2 or LLC slice has one each
/// way.
#[derive(Clone, Copy, Debug)]
pub struct NocParams {
    /// `noc.clock_hz`.
    pub clock_hz: u64,
    /// `noc.bandwidth_bytes_per_cycle`.
    pub bytes_per_cycle: u64,
    /// The one-way latency, `noc.latency_cycles` NoC cycles: the latency of the NoC's
    /// connections, which the net adds to a packet's departure (declared in
    /// `gpu/wiring.rs`, the one reader; the ports themselves model serialization only).
    pub latency_ps: Picos,
    /// `noc.model`.
    pub model: NocModel,
    /// One NoC cycle.
    pub period_ps: Picos,
    /// `noc.input_buffer_flits` when the crossbar has credits (`model: crossbar`), else 0.
    pub input_buffer_flits: u64,
    /// `noc.arbiter`.
    pub arbiter: NocArbiter,
}

impl NocParams {
    pub fn from_config(cfg: &GpuConfig) -> NocParams {
        NocParams {
            clock_hz: cfg.noc.clock_hz,
            bytes_per_cycle: cfg.noc.bandwidth_bytes_per_cycle as u64,
            latency_ps: cfg.noc.latency_cycles as Picos * cfg.noc_period_ps(),
            model: cfg.noc.model,
            period_ps: cfg.noc_period_ps(),
            input_buffer_flits: match cfg.noc.model {
                NocModel::Crossbar => cfg.noc.input_buffer_flits as u64,
                NocModel::Ports => 0,
            },
            arbiter: cfg.noc.arbiter,
        }
    }

    /// With the crossbar: the latency to it and from it, the one-way latency split evenly
    /// in whole NoC cycles (`noc.latency_cycles`: `latency_cycles / 2` to it, the rest
    /// from it, each at least 1 cycle). Assumed: the crossbar sits mid-way between the SMs
    /// and the L2 slices; the total, which the measured L2 hit latency pins, is unchanged.
    /// Each leg is then as long as the other (within a cycle), so the legs that an
    /// SM-cluster cut crosses bound its lookahead at half the NoC latency, not one cycle
    /// (the CTA dispatch crosses it too: `launch.cta_dispatch_ps`, as long in the presets
    /// of current GPUs).
    pub fn crossbar_ps(&self) -> (Picos, Picos) {
        let cycles = self.latency_ps / self.period_ps;
        let to = (cycles / 2).max(1);
        let from = cycles.saturating_sub(to).max(1);
        (to * self.period_ps, from * self.period_ps)
    }
}

unit_counters! {
    /// NoC bytes (headers included) a unit sent: an SM's LD/ST unit sends requests to L2
    /// slices, a channel replies to SMs.
    pub struct NocStats {
        request_bytes,
        reply_bytes,
    }
}
