//! The SM core's instruction-issue model (DESIGN.md section 5, "SM core"; issue 4): the
//! first piece of the timing model, without a memory hierarchy yet.
//!
//! As everywhere in the models, a unit's immutable spec ([`SmSpec`], read once from
//! [`crate::config::GpuConfig`]) is kept apart from its mutable state (plain data inside
//! [`Sm`]).
//!
//! What is modelled, one SM running the warps of the resident CTAs of one kernel:
//! - warp slot `i` (CTAs' warps numbered consecutively in the order given) belongs to
//!   sub-core scheduler `i % schedulers` (the GPGPU-Sim / Accel-Sim convention);
//! - each scheduler issues at most one warp instruction per core cycle, from a ready warp
//!   chosen by the policy: `lrr` round robin starting after the last issued warp; `gto`
//!   the last issued warp while it is ready, else the oldest ready one; `two_level` is
//!   scheduled as `gto` for now (TODO);
//! - a warp is ready when its next instruction's source and destination registers
//!   (`StaticInst::src_regs`, `dst_regs`; RZ never blocks) have no pending write and the
//!   scheduler's unit of the instruction's class accepts it (one unit per class per
//!   scheduler, a new instruction `initiation_cycles` after the previous one); on issue
//!   its destinations are pending until `issue + latency_cycles`;
//! - memory classes go to a [`MemPort`], which either knows when the destinations are
//!   written ([`MemIssue::Done`]) or answers later ([`MemIssue::Pending`], then
//!   [`Sm::mem_reply`] with the instruction's [`MemToken`]; meanwhile its destinations are
//!   not ready at any cycle and its CTA cannot complete). Inside the GPU
//!   ([`crate::gpu`]) it is the memory system; the batch driver [`run_cta_batch`] uses
//!   [`PlaceholderMem`] ([`SmSpec::mem_placeholder_latency_cycles`], not a model);
//! - `BAR.SYNC` (class `barrier`): the warp waits until every unfinished warp of its CTA
//!   has arrived; all leave together the next cycle. `EXIT` retires lanes; a warp whose
//!   stream ends is done.
//!
//! [`Sm`] is steppable and persists across kernels ([`Sm::set_kernel`] when empty,
//! [`Sm::take_stats`] per kernel): CTAs arrive ([`Sm::add_cta`]) and complete
//! ([`Sm::complete_ctas`], when every warp has finished and every result is written) while
//! it runs; the GPU loop asks [`Sm::next_event`], accounts the skipped cycles
//! ([`Sm::advance_to`]) and runs one cycle ([`Sm::step`]). Warps of a scheduler are kept in dispatch (age) order; `lrr`
//! rotates in that order, `gto` takes the oldest.
//!
//! Cycles in which no warp can issue are skipped (the loop jumps to the first cycle at
//! which one can), with results identical to stepping every cycle
//! ([`SmOptions::tick_every_cycle`]), stall counters included.
//!
//! Not yet modelled (issue 4): instruction fetch and the I-cache, operand collection and
//! register-bank conflicts, the LD/ST unit, shared memory, L1D and everything beyond,
//! fences.

mod issue;
mod spec;
mod stats;

pub use issue::{
    run_cta_batch, run_cta_batch_with, KernelPrep, MemIssue, MemPort, MemToken, PlaceholderMem, Sm,
    SmError, SmOptions,
};
pub use spec::{SmSpec, UnitTiming};
pub use stats::{BarrierEvent, IssueEvent, SmStats};
