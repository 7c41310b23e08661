//! # tessera-cluster
//!
//! The parallel engine of DESIGN.md section 4: conservative windows over the modeled
//! links, behind a transport trait. This crate knows nothing of SMs or caches: it moves
//! timestamped [`Message`]s between objects that implement [`Partition`]: the window
//! protocol, the [`Sequential`] transport (one thread runs every partition in index order),
//! the [`ThreadTransport`] (worker threads, each owning a fixed set of partitions, in
//! lock-step windows) and, with the cargo feature `mpi`, the MPI transport (`MpiTransport`:
//! one process per rank; `RankThreads`: ranks × threads), all behind the same [`Transport`]
//! trait and the same [`Engine`] loop.
//!
//! ## Vocabulary
//!
//! - *Partition*: a set of modeled units simulated together (a chiplet by default; a group
//!   of SM clusters when a big die is split). Units talk only through ports; a port that
//!   joins two partitions has a latency of at least the *lookahead* `L`.
//! - *Lookahead* `L`: the minimum latency of any port that crosses partitions, given at
//!   construction ([`Routing::lookahead`] computes it from the links and the partitioning).
//!   Zero is an error ([`EngineError::ZeroLookahead`], [`EngineError::ZeroLatencyLink`]).
//! - *Window*: with global windows ([`Lookahead::Global`]), the interval `[T, T + L)` that
//!   every partition simulates before messages are exchanged, where `T` is the global
//!   minimum next-event time. With per-pair windows ([`Lookahead::Pairs`], the default of
//!   the runners), one exchange between workers; see below.
//! - *Lookahead per pair* `D(q, p)`: the shortest path from partition `q` to `p` over the
//!   links that cross partitions ([`Routing::pair_lookahead`], [`PairLookahead`]); `D(p, p)`
//!   is the shortest cycle back to `p`.
//! - *Fixed order*: receivers consume arrivals by `(arrive_at, src_port, src_seq)`
//!   ([`tessera_interconnect::OrderKey`]); `src_port` is a stable id in the modeled system,
//!   never a partition number, so the order, and every result, is the same for any
//!   partitioning and any transport.
//!
//! ## The window loop ([`Engine`])
//!
//! ```text
//! T = min-reduce(next_event_time of every partition)       skip-ahead over idle time
//! while T exists:
//!     end = T + L (cut at the caller's stop time, if any)
//!     for each hosted partition, in index order:
//!         run_until(end, outbox)                            simulate [now, end)
//!         route each outgoing message: dst_port -> partition (routing table) -> mail[p]
//!     transport.exchange(mail)                              messages to their workers
//!     for each hosted partition:
//!         sort mail[p] by (arrive_at, src_port, src_seq); check; deliver; clear
//!         check next_event_time >= end
//!     T = transport.reduce(min next_event_time, sum of messages)
//! finished: every partition idle and nothing in flight (stalled() asked of each)
//! ```
//!
//! Why it is exact: a message emitted at `t >= T` on a port of latency `>= L` arrives at
//! `>= T + L = end`, so no partition ever receives a message from its own past, and each
//! receiver sees its arrivals in the fixed order whatever partition or worker they came
//! from. Window boundaries therefore never change results either (a window cut short by
//! [`Engine::run_until`] is still exact), and the only partition-dependent numbers are the
//! engine's own [`WindowStats`] (messages exchanged). Messages are delivered at the end of
//! the window that sent them, so "nothing in flight" holds between windows and termination
//! is simply "the reduced next event is `None`".
//!
//! ## Per-pair windows, two levels ([`Lookahead::Pairs`], DESIGN.md section 4)
//!
//! A worker (thread or rank) hosting the partitions `W`, with every partition's next
//! event `next_q` as of the last exchange ([`Transport::gather`]):
//!
//! ```text
//! round:
//!     cap_p = min( min over q not in W of (next_q + D(q, p)),          the other workers
//!                  min over m in W of (next_m + round_trip(m, p)),      what W sends out
//!                  stop )                                               comes back later
//!     sub-windows, while some hosted p has next_p < bound_p:
//!         bound_p = min(cap_p, min over j in W of (next_j + local_d(j, p)))
//!         run each such p to bound_p; deliver the messages between hosted partitions
//!     exchange with the other workers; gather every partition's next event
//! ```
//!
//! `round_trip(m, p)` is the shortest path from `m` to `p` through a partition of another
//! worker; `local_d` the shortest path over links between hosted partitions only (its
//! diagonal a cycle). Why it is exact: what partition `q` of another worker does in the
//! round happens at or after `next_q` (or is caused by its own worker's deliveries, which
//! `D`'s closure covers) and reaches `p` at least `D(q, p)` later, delivered at the
//! exchange, when every hosted partition has stopped at or before its cap; messages inside
//! the worker are delivered at each sub-window's end, before anything at or after their
//! arrival runs. The partition holding the global earliest event always has a bound above
//! it, so every round makes progress. A system of multi-chiplet GPUs with a GPU per worker
//! exchanges at the GPU links' latency while each worker's chiplets meet at the chiplet
//! links'. One worker has no exchange at all: its partitions run in sub-windows to the end.
//! The global windows are the special case `D(q, p) = L` with every partition on its own
//! sub-window; [`Windows`] picks either (`tessera run --windows`).
//!
//! ## Checks (always on: O(1) per partition and per message per window)
//!
//! - The lookahead contract at the sender: [`tessera_interconnect::Port`] refuses a send
//!   arriving before `now + min_latency`, naming the port ([`Outbox::send`]).
//! - At the receiver: no message arrives earlier than its receiver's current time (the
//!   end of the window just simulated): [`EngineError::Causality`], naming the sending port.
//!   Exercised in the tests at the smallest legal latency (arrivals exactly at `T + L`).
//! - No two messages to a partition share a key ([`EngineError::DuplicateMessage`]).
//! - After a window, no partition reports an event before its end
//!   ([`EngineError::EventInPast`]): `run_until` simulated all of `[now, end)`. With
//!   per-pair windows each partition is checked against the time it has reached.
//! - Messages to unknown ports, inconsistent routing tables and transports: errors.
//!
//! Every error aborts the run through [`Transport::abort`] (so other workers and ranks stop
//! instead of hanging) and leaves the engine failed ([`EngineError::Failed`] afterwards).
//!
//! ## Buffers
//!
//! The outbox, the per-partition mail buffers and the inboxes are reused from window to
//! window (drained and cleared, never dropped), and sorting is in place, so a window
//! allocates nothing once the buffers have grown to the largest window's traffic (tested
//! with a counting allocator). Payloads are plain data
//! ([`tessera_interconnect::Payload`]); only the `Bytes` variant allocates, at the sender.
//!
//! ## Transports
//!
//! A [`Transport`] hosts a subset of the partitions (numbered globally) on one worker and
//! provides the collectives of a window, [`Transport::exchange`] and
//! [`Transport::reduce`] (global windows) or [`Transport::gather`] (per-pair windows); each
//! worker runs its own [`Engine`] over its partitions. Every worker measures its host time
//! (busy running its partitions, waiting in the collectives; [`WorkerTime`]) and the
//! reductions carry it, so every worker knows the window's busiest: the load imbalance
//! ([`WindowStats::imbalance`]) is measured at any scale.
//! [`Sequential`] hosts all of them and does nothing in either. Statistics kept by the
//! models are keyed by modeled unit and read back with [`Engine::into_partitions`].
//!
//! [`ThreadTransport`] runs one engine per worker thread; a [`WorkerMap`] says which worker
//! owns each partition (contiguous blocks by default, round-robin, weighted by measured
//! cost ([`deal_weighted`]: longest first to the least loaded worker), or any assignment;
//! [`PlacementHints`] keep a GPU's partitions on one worker).
//! Per window each worker runs its partitions, `exchange` appends its outgoing mail to
//! per-(worker, partition) slots, a barrier, each worker collects its partitions' mail,
//! then `reduce` writes each worker's report, a barrier, each combines all reports: every
//! worker starts the same next window. The barrier spins a bounded number of times on an
//! atomic generation counter, then sleeps on a condition variable (so more workers than
//! cores still progress); on the fast path it neither allocates nor makes a syscall, and
//! buffers are kept from window to window (tested with a counting allocator per worker).
//! One worker's failure poisons the barrier, so the others return at their next
//! collective instead of hanging; a panic does the same.
//!
//! With the feature `mpi`, `MpiTransport` (module `mpi`) is one rank of an MPI job: ranks
//! host contiguous blocks of partitions (`rank_owners`; more ranks than partitions is an
//! error), and per window encode their outgoing messages ([`Message::encode`]), exchange
//! them all-to-all (`MPI_Alltoall` of byte counts, `MPI_Alltoallv` of bytes) or only with
//! the ranks they have modeled links to (point to point, `Exchange::Linked`), and combine
//! every rank's report with one `MPI_Allgather` (global windows) or one `MPI_Allreduce` of
//! every partition's next event and every rank's counts (per-pair windows). `RankThreads` runs a rank's partitions on
//! several threads: the thread that initialized MPI is the only one calling it, between
//! two thread-level exchanges and reductions. An error on one rank ends the job through
//! `mpi::abort_job` (`MPI_Abort`), since the others wait in a collective.
//! `examples/mpi_window.rs` measures the cost of one window.
//!
//! ## Running a system
//!
//! [`run_sequential`] and [`run_threads`] take the partitions, the port-to-partition table
//! and the links, compute the lookahead, run to completion and hand the partitions back in
//! global index order with the [`WindowStats`] (the same on any thread count).
//! [`run_threads`] deals partitions to threads in contiguous blocks, clamps a thread count
//! above the partition count, and runs one thread as [`Sequential`]; [`run_threads_with`]
//! takes the lookahead, routing table and [`WorkerMap`] explicitly. When partitions fail,
//! the error returned is the lowest-numbered failing partition's, as a sequential run
//! would report it. [`run_sequential_paused`] pauses every given stretch of simulated
//! time (a progress display), and `run_rank_threads` runs one MPI rank's partitions on
//! several threads. [`run_threads_until`] and [`run_sequential_paused_until`] stop at a
//! simulated time instead of running to completion ([`Engine::run_to`]: every event before
//! it simulated on every partition, none at or after, whatever the windows), a run limit. This crate knows nothing of what a partition simulates: the GPU
//! runners are in `tessera-system`.

mod engine;
mod error;
#[cfg(feature = "mpi")]
pub mod mpi;
mod routing;
mod system;
mod threads;
mod transport;

pub use engine::{Engine, Lookahead, Progress, WindowStats, Windows, WorkerTime, BUSY_BUCKETS};
pub use error::EngineError;
#[cfg(feature = "mpi")]
pub use mpi::{
    rank_owners, rank_owners_with, Exchange, MpiTransport, NotLeader, RankLevel, RankThreads,
};
pub use routing::{PairLookahead, Routing};
#[cfg(feature = "mpi")]
pub use system::run_rank_threads;
pub use system::{
    run_engine_stepped, run_sequential, run_sequential_paused, run_sequential_paused_until,
    run_threads, run_threads_placed, run_threads_stepped, run_threads_until, run_threads_with,
    run_threads_with_until, Pauses, Schedule, Stepped, UntilDone,
};
pub use threads::{deal_weighted, Aborted, Placement, PlacementHints, ThreadTransport, WorkerMap};
pub use transport::{Sequential, Transport, WindowReport};

pub use tessera_interconnect::{
    BoxError, Link, Message, Outbox, Partition, Payload, Picos, Port, PortId, SendError,
};
