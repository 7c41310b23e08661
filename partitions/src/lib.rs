//! # tessera-partitions
//!
//! The models (DESIGN.md section 5): the GPU configuration ([`config`]), the SM issue stage
//! ([`sm`]), the memory hierarchy as port-connected units ([`mem`]: an LD/ST unit with its
//! L1D per SM, L2 slices with their DRAM channel per channel), and the GPU assembled from
//! them with its command processor and cut into partitions ([`gpu`]), which the engine of
//! `tessera-cluster` runs. Instructions are read in the decoded form of
//! [`tessera_traces::WarpInst`], one [`tessera_traces::ChunkDecoder`] per partition.
//! Synchronization units (DESIGN.md section 6) are not built yet.

pub mod check;
pub mod config;
pub mod gpu;
pub mod mem;
pub mod sm;
pub mod stats;

pub use tessera_interconnect::Picos;
pub use tessera_traces::{DecodedCta, WarpInst};
