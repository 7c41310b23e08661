//! # tessera-cluster
//!
//! The parallel engine: conservative windows over the modeled links, thread and MPI
//! transports, statistics reduction (DESIGN.md section 4). Not built yet: the
//! sequential transport arrives with the chiplet-partition issue, threads and MPI after it.

pub use tessera_partitions::Picos;
