//! # tessera-partitions
//!
//! The models of one chiplet partition: SM cores, caches, DRAM, synchronization units,
//! local and global command processors (DESIGN.md section 5). Not built yet: the timing
//! model arrives with the chiplet-partition issue. It will read instructions in the
//! decoded form of [`tessera_traces::WarpInst`], one [`tessera_traces::ChunkDecoder`] per
//! worker.

pub mod check;
pub mod config;
pub mod gpu;
pub mod mem;
pub mod sm;
pub mod stats;

pub use tessera_interconnect::Picos;
pub use tessera_traces::{DecodedCta, WarpInst};
