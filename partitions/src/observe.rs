//! Observers: hooks that see a unit's events as they happen (the probe points of gem5, the
//! hooks of Akita), for tracing and time series, without a counter in the model for them.
//!
//! An [`Observer`] is attached to a partition ([`crate::gpu::GpuPartition::observe`]) or
//! to a whole system before it runs ([`crate::gpu::GpuSystem::observe`]); each unit then
//! holds a [`Probe`] naming its unit id. A unit without one pays one predictable branch per
//! event site. Observers see events, they do not change results: the counters and the
//! stats JSON are the same with or without them.
//!
//! Events arrive per unit in that unit's simulated order; units of different partitions
//! may call the same observer concurrently (threads), so an observer that needs a global
//! order sorts by time and unit id itself.

use crate::Picos;
use std::fmt;
use std::sync::Arc;
use tessera_traces::OpClass;

/// What an observer is told. Every method has an empty default: implement those of the
/// events wanted. `unit` is the sending unit's id (`mem::UnitIds` numbering).
pub trait Observer: Send + Sync {
    /// An SM issued a warp instruction.
    fn issue(&self, _unit: u32, _e: &IssueEvent) {}
    /// A CTA barrier of an SM released its warps.
    fn barrier(&self, _unit: u32, _e: &BarrierEvent) {}
    /// A CTA became resident on an SM, or completed.
    fn cta(&self, _unit: u32, _e: &CtaEvent) {}
    /// A cache or DRAM access (L1D at an SM's LD/ST unit; L2, LLC and DRAM at a channel).
    fn mem_access(&self, _unit: u32, _e: &MemAccess) {}
    /// A packet left a link interface on one of its links or switch ports.
    fn link_packet(&self, _unit: u32, _e: &LinkPacket) {}
}

/// A unit's handle on its observer: the unit id to report and the observer.
#[derive(Clone)]
pub struct Probe {
    pub unit: u32,
    pub obs: Arc<dyn Observer>,
}

impl Probe {
    pub fn new(unit: u32, obs: Arc<dyn Observer>) -> Probe {
        Probe { unit, obs }
    }
}

impl fmt::Debug for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Probe(unit {})", self.unit)
    }
}

/// One issued warp instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IssueEvent {
    /// Issue cycle (core clock).
    pub cycle: u64,
    /// Warp slot (CTAs' warps numbered consecutively in arrival order).
    pub warp: u32,
    /// Index of the CTA on the SM.
    pub cta: u32,
    /// Index of the instruction in its warp's stream.
    pub inst: u32,
    /// Its class.
    pub class: OpClass,
    /// Its active lanes (what it adds to the thread instructions).
    pub lanes: u32,
}

/// One completed CTA barrier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BarrierEvent {
    /// Index of the CTA on the SM.
    pub cta: u32,
    /// Which barrier of this CTA (0, 1, ...).
    pub seq: u32,
    /// `(warp slot, cycle its BAR issued)` for every warp that arrived, in arrival order.
    pub arrivals: Vec<(u32, u64)>,
    /// The cycle from which every arrived warp may issue again (last arrival + 1).
    pub release_cycle: u64,
}

/// A CTA's arrival on an SM or its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtaEvent {
    /// The core cycle: of its arrival, or of its completion (results all written).
    pub cycle: u64,
    /// Index of the CTA on the SM (reused after it completes).
    pub cta: u32,
    /// The tag it was added with (in the GPU: its kernel-wide CTA number).
    pub tag: u64,
    /// Arrived (`false`) or completed (`true`).
    pub done: bool,
    /// Warp slots it holds while resident.
    pub warps: u32,
}

/// Where a [`MemAccess`] happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemLevel {
    L1d,
    L2,
    Llc,
    Dram,
}

/// Sectors of one line accessed at one level. The sums over events equal the level's
/// counters: `sectors` its accesses (DRAM: reads or writes), `hits` its hits, `sectors -
/// hits` its misses (DRAM: `hits` is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemAccess {
    /// When the access reached the level (picoseconds).
    pub at: Picos,
    pub level: MemLevel,
    /// The line address.
    pub line: u64,
    pub sectors: u32,
    pub hits: u32,
    /// A store, write-back or DRAM write (`false`: a load, atomic or DRAM read).
    pub write: bool,
}

/// A packet sent on one link or switch port of a link interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkPacket {
    /// When it was handed to the link, and when its last byte is in at the far end.
    pub sent_at: Picos,
    pub arrive_at: Picos,
    /// Bytes of the packet (header and data).
    pub bytes: u64,
    /// The unit it goes to next (a link interface, or itself through a switch port).
    pub next_unit: u32,
    /// The link direction it went on: its index in the interface's
    /// `LinkInterface::reports` order (the order of the stats' `links`).
    pub link: u32,
    /// When the sender was transmitting it, `[tx_start, tx_end)` (rounded up to a
    /// picosecond; one link's transmissions never overlap).
    pub tx_start: Picos,
    pub tx_end: Picos,
}
