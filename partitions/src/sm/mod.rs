//! The SM core's instruction-issue model (DESIGN.md section 5, "SM core"): one SM's
//! schedulers, scoreboard, units, I-cache fetch, operand collection and barriers. Its
//! memory instructions go through a [`MemPort`] (in the GPU, the SM's LD/ST unit in
//! [`crate::mem`]).
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
//!   the last issued warp while it is ready, else the oldest ready one; `two_level` as
//!   below;
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
//! `two_level` (GPGPU-Sim's `two_level_active` with loose round robin inside, the pool
//! refilled with the oldest warp that can use it): each scheduler has an *active pool* of
//! at most `N = max(1, core.two_level_active_warps)` warps, an ordered list, and a
//! *pending pool*, a FIFO; warps of a new CTA join the back of the pending pool in
//! dispatch order. A warp is *blocked* at cycle `c` when it has finished, waits at a CTA
//! barrier (or `c` is before its release cycle), or its next instruction reads or writes
//! a register whose pending write is *long-latency* and not yet written at `c` (the
//! result of a memory instruction other than shared memory's: GPGPU-Sim's `longopregs`;
//! a result awaiting [`Sm::mem_reply`] counts as not written). At the start of every
//! cycle `c`, each scheduler
//! 1. *demotes*: every active warp blocked at `c`, in active order, leaves the active pool;
//!    unfinished ones go to the back of the pending pool;
//! 2. *promotes*: while the active pool has fewer than `N` warps, the first warp of the
//!    pending pool (FIFO order) that is not blocked at `c` moves to the back of the
//!    active pool (a blocked one keeps its place);
//! 3. *issues* the first ready warp of the active pool, in its order, and rotates the
//!    pool so that the warps after it come first and it comes last.
//!
//! Only active warps may issue. In a cycle without an issue the stall reason (below,
//! [`SmStats`]) is taken over every warp except pending warps that are not blocked (they
//! wait only for a slot of the full active pool, whose warps give the reason).
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
//! Operand collection (`core.operand_collection`): an issued instruction holds one of its
//! scheduler's collector units until its distinct source registers are read; each of the
//! scheduler's register banks (bank = register, plus the warp slot with
//! `core.reg_bank_use_warp_id`, modulo the banks per scheduler) serves one read per cycle,
//! reads requested from the cycle after issue in register order. Extra cycles of the last
//! read delay the instruction's result (the class latency is the conflict-free one); a
//! scheduler with no free collector cannot issue (counted as `stall_unit_busy`). Details
//! and what is left out: `Sm::collect` in `issue.rs`.
//!
//! Instruction fetch (`core.icache`, switchable): a warp's next instruction is fetched
//! when it issues the previous one (its first when its CTA arrives), through an
//! LRU set-associative I-cache of the SM addressed by a per-kernel code base (from the
//! kernel's name, so relaunches share lines) plus the PC; it is available after
//! `hit_latency_cycles`, or `miss_latency_cycles` when its line is not there (the line is
//! filled then; a fetch of a line still being filled waits for it and counts as a hit).
//! Waiting for an instruction counts as `stall_scoreboard`. Disabled: fetch is free.
//!
//! **Memory fences** (`OpClass::Fence`, `MEMBAR`): a warp's fence issues only when every
//! memory instruction it issued before has its result written (its pending replies
//! included), as GPGPU-Sim's warp waits at a `membar` for its outstanding requests;
//! waiting counts as `stall_scoreboard`. Stores count as done when their data has left
//! the SM (no write acknowledgements are modelled).
//!
//! Not yet modelled: I-cache misses as requests to the memory system, fetch bandwidth and
//! instruction buffers, register writeback port conflicts. The LD/ST unit, shared memory,
//! L1D and everything beyond are the memory system behind [`MemPort`] (`crate::mem`).

mod icache;
mod issue;
mod spec;
mod stats;

pub use issue::{
    run_cta_batch, run_cta_batch_with, KernelPrep, MemIssue, MemPort, MemToken, PlaceholderMem, Sm,
    SmError, SmOptions,
};
pub use spec::{IcacheSpec, SmSpec, UnitTiming};
pub use stats::{BarrierEvent, IssueEvent, SmStats};
