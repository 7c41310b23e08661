//! The engine's errors.

use std::fmt;

use tessera_interconnect::{Picos, PortId};

use crate::BoxError;

/// Everything that can go wrong building or running an [`crate::Engine`]. Every variant
/// names what broke (a port, a link, a partition) so a misconfigured system or a model bug
/// is found from the message alone.
#[derive(Debug)]
pub enum EngineError {
    /// The lookahead `L` is zero: no partition could ever run ahead of another.
    ZeroLookahead,
    /// A system of zero partitions.
    NoPartitions,
    /// The partitions handed to the engine do not match what the transport hosts.
    PartitionCountMismatch {
        /// Partitions given.
        given: usize,
        /// Partitions the transport says this worker hosts.
        hosted: usize,
    },
    /// The routing table and the transport disagree on the number of partitions, or the
    /// transport's hosted list is not strictly ascending within range.
    BadTransport {
        /// What is wrong.
        detail: String,
    },
    /// A routing entry names a partition that does not exist.
    PartitionOutOfRange {
        /// The port.
        port: PortId,
        /// The partition it was mapped to.
        partition: usize,
        /// Number of partitions.
        partitions: usize,
    },
    /// A port appears twice in the routing table.
    DuplicatePort {
        /// The port.
        port: PortId,
    },
    /// A link end is not in the routing table.
    UnroutedPort {
        /// The port.
        port: PortId,
    },
    /// A link between two partitions has zero latency.
    ZeroLatencyLink {
        /// Its sending port.
        src: PortId,
        /// Its receiving port.
        dst: PortId,
    },
    /// A message was sent to a port the routing table does not know.
    UnknownDestination {
        /// The sending port.
        src_port: PortId,
        /// The unknown destination.
        dst_port: PortId,
    },
    /// A message would arrive earlier than its receiver's current time: its sender broke
    /// the lookahead contract (a cross-partition port faster than `L`).
    Causality {
        /// The sending port.
        src_port: PortId,
        /// Its sequence number.
        src_seq: u64,
        /// The receiving port.
        dst_port: PortId,
        /// The receiving partition.
        partition: usize,
        /// When the message arrives.
        arrive_at: Picos,
        /// The receiver's current time (the end of the window it just simulated).
        receiver_time: Picos,
    },
    /// Two messages to one partition carry the same `(arrive_at, src_port, src_seq)`: two
    /// senders claim one port id, or a port reused a sequence number. The fixed order would
    /// not be strict, so the result could depend on the partitioning.
    DuplicateMessage {
        /// The port.
        src_port: PortId,
        /// The repeated sequence number.
        src_seq: u64,
    },
    /// After simulating a window, a partition still reports an event before the window's
    /// end: it did not simulate all of `[now, end)`.
    EventInPast {
        /// The partition.
        partition: usize,
        /// The event time it reports.
        event: Picos,
        /// The end of the window.
        window_end: Picos,
    },
    /// An event at the last picosecond of the clock (`u64::MAX`) can never be simulated.
    TimeOverflow,
    /// The system went quiescent with unfinished work.
    Stalled {
        /// `(partition, what it is waiting for)`, by partition index.
        reports: Vec<(usize, String)>,
    },
    /// A partition's model failed.
    Model {
        /// The partition.
        partition: usize,
        /// The model's error.
        source: BoxError,
    },
    /// The transport failed (or another worker did).
    Transport {
        /// The transport's error.
        source: BoxError,
    },
    /// The engine already failed; its state is unspecified.
    Failed,
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use EngineError::*;
        match self {
            ZeroLookahead => write!(
                f,
                "the lookahead (minimum cross-partition latency) is zero: partitions cannot \
                 run in parallel across a link with no latency; give every link between \
                 partitions a latency of at least 1 ps, or partition the system elsewhere"
            ),
            NoPartitions => write!(f, "the system has no partitions"),
            PartitionCountMismatch { given, hosted } => write!(
                f,
                "{given} partitions given, but the transport hosts {hosted} on this worker"
            ),
            BadTransport { detail } => write!(f, "transport misconfigured: {detail}"),
            PartitionOutOfRange {
                port,
                partition,
                partitions,
            } => write!(
                f,
                "routing table maps port {port} to partition {partition}, but there are \
                 only {partitions} partitions"
            ),
            DuplicatePort { port } => write!(f, "port {port} appears twice in the routing table"),
            UnroutedPort { port } => write!(f, "port {port} is not in the routing table"),
            ZeroLatencyLink { src, dst } => write!(
                f,
                "the link from port {src} to port {dst} crosses partitions with zero latency, \
                 so the lookahead would be zero; give it a latency or keep both ends in one \
                 partition"
            ),
            UnknownDestination { src_port, dst_port } => write!(
                f,
                "port {src_port} sent a message to port {dst_port}, which no partition hosts"
            ),
            Causality {
                src_port,
                src_seq,
                dst_port,
                partition,
                arrive_at,
                receiver_time,
            } => write!(
                f,
                "lookahead violated by port {src_port}: its message {src_seq} to port \
                 {dst_port} (partition {partition}) arrives at {arrive_at} ps, before the \
                 receiver's current time {receiver_time} ps; a port between partitions is \
                 faster than the lookahead"
            ),
            DuplicateMessage { src_port, src_seq } => write!(
                f,
                "two messages from port {src_port} carry sequence number {src_seq}: port ids \
                 must be unique and sequence numbers never reused"
            ),
            EventInPast {
                partition,
                event,
                window_end,
            } => write!(
                f,
                "partition {partition} still has an event at {event} ps after simulating up \
                 to {window_end} ps"
            ),
            TimeOverflow => write!(
                f,
                "an event is scheduled at the last picosecond of the clock ({} ps)",
                Picos::MAX
            ),
            Stalled { reports } => {
                write!(f, "the simulation stalled: nothing is scheduled, but")?;
                for (i, (p, what)) in reports.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ";" };
                    write!(f, "{sep} partition {p}: {what}")?;
                }
                Ok(())
            }
            Model { partition, source } => write!(f, "partition {partition}: {source}"),
            Transport { source } => write!(f, "transport: {source}"),
            Failed => write!(f, "the engine already failed; start a new one"),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Model { source, .. } | EngineError::Transport { source } => {
                Some(source.as_ref())
            }
            _ => None,
        }
    }
}
