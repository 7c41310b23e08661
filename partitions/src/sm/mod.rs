//! The SM core (DESIGN.md section 5, "SM core"): one SM running the warps of the resident
//! CTAs of one kernel at a time. Its memory instructions leave through [`MemPort`] (in the
//! GPU, the SM's LD/ST unit in [`crate::mem`]).
//!
//! As everywhere in the models, a unit's immutable parameters ([`SmParams`], made once from
//! [`crate::config::GpuConfig`] by [`SmParams::from_config`]) are kept apart from its mutable
//! state (plain data inside [`Sm`]).
//!
//! One hardware unit per file:
//! - `issue`: [`Sm`], the SM as the GPU's event loop drives it, and its issue stage;
//! - `scheduler`: the sub-core warp schedulers and their policies (`lrr`, `gto`,
//!   `two_level`), with their functional units' issue intervals;
//! - `warp`: one warp's state;
//! - `scoreboard`: pending register writes, and memory fences;
//! - `operand_collector`: collector units and register-bank conflicts;
//! - `icache`: instruction fetch through the I-cache;
//! - `cta`: CTA residency (warp slots, arrival, completion) and CTA barriers;
//! - `ldst`: the port to the LD/ST unit ([`MemPort`]) and the in-flight memory table;
//! - `decode`: what the SM needs of a kernel's static instructions ([`KernelPrep`]);
//! - `params`: the parameters ([`SmParams`]) and the `core` config section; `stats`: the SM's
//!   counters ([`SmStats`], with the [`SchedulerStats`], [`OperandCollectorStats`] and
//!   [`IcacheStats`] declared in their units' files) and the stall accounting. Events go to
//!   an observer when one is attached ([`Sm::observe`], [`crate::observe`]).
//!
//! Not yet modelled: I-cache misses as requests to the memory system, fetch bandwidth and
//! instruction buffers, register writeback port conflicts.

mod cta;
mod decode;
pub(crate) mod icache;
mod issue;
mod ldst;
mod mbarrier;
mod operand_collector;
pub(crate) mod params;
pub(crate) mod scheduler;
mod scoreboard;
mod spin;
mod stats;
mod warp;

pub use crate::observe::{BarrierEvent, IssueEvent};
pub use decode::KernelPrep;
pub use issue::{Sm, SmError};
pub use ldst::{LocalValues, MemIssue, MemPort, MemToken};
pub use params::{IcacheParams, SmParams, UnitTiming};
pub use stats::{
    IcacheStats, LockHold, OperandCollectorStats, SchedulerStats, SmStats, SpinCounters,
};
