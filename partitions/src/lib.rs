//! # tessera-partitions
//!
//! The models (DESIGN.md section 5): the GPU configuration ([`config`]), the SM issue stage
//! ([`sm`]), the memory hierarchy as port-connected units ([`mem`]: an LD/ST unit with its
//! L1D per SM, L2 slices with their DRAM channel per channel, a link interface per chiplet),
//! and the GPU assembled from them with its command processors and cut into partitions
//! ([`gpu`]), which the engine of `tessera-cluster` runs. A system may hold several GPUs
//! (`system.gpus`), each of `chiplets` chiplets: every per-chiplet block of units is
//! repeated per GPU, each GPU has its own global CP and stream, a page lives on the GPU whose
//! `Alloc` covers it, and a load of another GPU's memory crosses the GPU fabric
//! (`system.gpu_link`, a switch) to the home GPU's L2; the host replays the command list
//! with CUDA semantics (asynchronous launches, synchronous copies over `system.host_link`). Instructions are read in the decoded form of
//! [`tessera_traces::WarpInst`], one [`tessera_traces::ChunkDecoder`] per partition.
//! Each unit owns its counters, merged by unit id into the run's [`stats`]; [`observe`]
//! lets a caller watch the units' events as they happen. Synchronization units (DESIGN.md
//! section 6) are not built yet.

pub mod check;
pub mod config;
mod counters;
pub mod gpu;
pub mod mem;
pub mod observe;
pub mod packet;
pub mod per_kernel;
pub mod sm;
pub mod stats;
pub mod stats_doc;
pub mod timeseries;
pub mod watchdog;

pub use tessera_interconnect::Picos;
pub use tessera_traces::{DecodedCta, WarpInst};
