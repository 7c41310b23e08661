//! The recording frontend: kernels written in Rust, executed functionally on real data,
//! recorded as SASS-like warp instruction streams (DESIGN.md sections 2 and 6).
//!
//! - [`Recorder`]: the host side: `alloc`, `upload`, `launch`, `download`, `finish`; every
//!   allocation, copy and launch becomes a command of the trace.
//! - [`Warp`]: the device side: per-lane values ([`Val`]), predicates ([`Pred`]),
//!   divergent `if_`/`while_` (and `while_its`, a loop whose leaving lanes run on, as
//!   independent thread scheduling runs them), counted loops, global and shared memory,
//!   atomics with their operands, warp shuffles ([`Warp::shfl_down`],
//!   [`Warp::shfl_xor`]), fences, CTA barriers, named barriers
//!   ([`Warp::bar_sync`], [`Warp::bar_arrive`]) and mbarriers ([`Warp::mbar_init`],
//!   [`Warp::mbar_arrive`], [`Warp::mbar_wait`]: Hopper's split arrive/wait barriers,
//!   recorded for binary version 90, [`LaunchSpec::binary_version`]), exits. Each call records the
//!   instruction nvcc would emit for sm_70 and later, at a PC fixed by its source
//!   location.
//! - The executor interleaves warps deterministically (one runs at a time, FIFO), so the
//!   same inputs give the same trace byte for byte, and warps that wait on each other
//!   (barriers, flags with [`Warp::spin_yield`]) are captured without deadlock.
//! - Synchronization as values (format version 3): [`Recorder::sync_words`] declares the
//!   32-bit words whose values the timing model computes (initial values, and expected
//!   final ones when they do not depend on scheduling); [`Warp::spin`] records a spin
//!   loop once, as a region whose body the model repeats until its exit condition
//!   ([`Exit`]) holds on the simulated values; [`Warp::branch`] and [`Warp::queue`]
//!   (format version 4) record a value-dependent branch (the last CTA) and a work-queue
//!   loop (pop, process, go round) likewise, their tails recorded for every lane and
//!   rebased by the value where their addresses depend on it; [`Warp::ld_strong`] and
//!   [`Warp::st_strong`] are the strong accesses of flags (a strong store records its
//!   values). A program whose progress needs every CTA resident (a grid barrier) is
//!   recorded with `resident_ctas` as large as its grid.

mod exec;
mod mbarrier;
mod mem;
mod named_bar;
mod ops_irregular;
mod ops_linalg;
mod ops_probes;
mod ops_shfl;
mod ops_sync;
mod region;
mod spin;
mod warp;

pub use exec::{
    compress_addrs, LaunchSpec, RecordError, RecordStats, Recorder, INST_BYTES, MBARRIERS,
    NAMED_BARRIERS,
};
pub use mbarrier::{MBAR_ARRIVE_OP, MBAR_INIT_OP, MBAR_WAIT_OP};
pub use mem::{Buffer, DeviceMemory, Elem, OutOfBounds};
pub use spin::{Exit, MAX_REBASED};
pub use tessera_traces::SyncCmp;
pub use warp::{Atom, AtomicElem, Cmp, Float, Pred, SharedArr, Val, Warp, WARP};
