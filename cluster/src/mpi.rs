//! The MPI transport (cargo feature `mpi`, rsmpi): one process per rank, each hosting a
//! fixed set of partitions and running its own [`crate::Engine`] over them, in lock-step
//! windows with the other ranks (DESIGN.md section 4).
//!
//! Per window:
//!
//! - [`Transport::exchange`]: the messages to partitions of other ranks are encoded
//!   ([`Message::encode`], a fixed little-endian layout: 25 bytes of envelope plus the
//!   payload, 49 bytes for a model's `Words3` packet) into one buffer per destination rank,
//!   grouped by destination partition (`u32` partition, `u32` count, the messages). Then
//!   either ([`Exchange`]) an `MPI_Alltoall` of the byte counts and an `MPI_Alltoallv` of
//!   the bytes, or, with [`Exchange::Linked`], nonblocking point-to-point sends and
//!   receives of the counts and then the bytes with only the ranks this rank has modeled
//!   links to (a rank's message to an unlinked rank is an error: the links say it cannot
//!   happen). Received groups are decoded into the hosted partitions' mail; the engine
//!   sorts them into the fixed order, so results never depend on which rank sent what.
//! - [`Transport::reduce`] (global windows): one `MPI_Allgather` of every rank's report
//!   (next event, messages, busy time, the most busy time, workers), combined in rank
//!   order ([`WindowReport::combine`]: min, sums and max of integers), so every rank starts
//!   the same next window. One collective instead of several reductions, without
//!   user-defined MPI operations.
//! - [`Transport::gather`] (per-pair windows): one `MPI_Allreduce` (minimum) over every
//!   partition's next event and every rank's report, each entry written by its owner and
//!   `u64::MAX` elsewhere: `partitions + 4 x ranks` words. The windows themselves need no
//!   more: each rank computes its partitions' bounds from the others' next events, and
//!   exchanges messages only with the ranks its partitions have links to under
//!   [`Exchange::Linked`].
//!
//! Buffers are kept from window to window. Errors: [`Transport::abort`] records that this
//! rank failed; the caller prints the error once and ends the job with `MPI_Abort`
//! ([`abort_job`]), which stops every rank, including those waiting in a collective.

use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::datatype::{Partition as MpiPartition, PartitionMut};
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Count;
use tessera_interconnect::{Link, Message, Picos};

use crate::transport::{Transport, WindowReport};
use crate::{BoxError, EngineError, Routing};

/// Which ranks a rank exchanges with each window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Exchange {
    /// Every rank with every rank (`MPI_Alltoall` + `MPI_Alltoallv`): two collectives,
    /// whatever the topology.
    #[default]
    All,
    /// Only the ranks hosting a partition that one of this rank's partitions has a modeled
    /// link to or from (point-to-point): the cost follows the system's degree, not the rank
    /// count.
    Linked,
}

impl std::str::FromStr for Exchange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(Exchange::All),
            "linked" => Ok(Exchange::Linked),
            _ => Err(format!("unknown exchange '{s}': expected all or linked")),
        }
    }
}

/// The MPI transport of one rank. See the module documentation.
pub struct MpiTransport {
    world: SimpleCommunicator,
    rank: usize,
    ranks: usize,
    /// `owner[p]`: the rank hosting partition `p`.
    owner: Vec<usize>,
    hosted: Vec<usize>,
    exchange: Exchange,
    /// Ranks exchanged with under [`Exchange::Linked`], ascending, without this rank.
    peers: Vec<usize>,
    /// Per destination rank, the encoded messages of this window.
    out: Vec<Vec<u8>>,
    send: Vec<u8>,
    recv: Vec<u8>,
    send_counts: Vec<Count>,
    recv_counts: Vec<Count>,
    send_displs: Vec<Count>,
    recv_displs: Vec<Count>,
    reports: Vec<u64>,
    /// The buffers of [`Transport::gather`]: n partitions + ranks words each.
    gather_send: Vec<u64>,
    gather_recv: Vec<u64>,
}

/// The rank of each partition: contiguous blocks, as even as possible (rank `r` hosts
/// `r * n / R .. (r + 1) * n / R`), or round robin, per `placement`. More ranks than
/// partitions is an error: a rank with nothing to simulate would only slow every window
/// down.
pub fn rank_owners(
    partitions: usize,
    ranks: usize,
    placement: crate::Placement,
) -> Result<Vec<usize>, EngineError> {
    rank_owners_with(partitions, ranks, placement, Default::default())
}

/// [`rank_owners`] with the placement's hints (costs, groups: [`crate::Placement::owners`]).
pub fn rank_owners_with(
    partitions: usize,
    ranks: usize,
    placement: crate::Placement,
    hints: crate::PlacementHints<'_>,
) -> Result<Vec<usize>, EngineError> {
    if partitions == 0 {
        return Err(EngineError::NoPartitions);
    }
    if ranks == 0 || ranks > partitions {
        return Err(EngineError::BadTransport {
            detail: format!(
                "{ranks} MPI ranks for a system of {partitions} partition(s): run at most \
                 {partitions} ranks (mpirun -np {partitions}), or cut the system into more \
                 partitions (partitioning.mode: sm_cluster, partitioning.sm_clusters)"
            ),
        });
    }
    placement
        .owners(partitions, ranks, hints)
        .map_err(|detail| EngineError::BadTransport { detail })
}

impl MpiTransport {
    /// The transport of this rank of `world` for partitions owned per `owner` (every rank
    /// must pass the same table; see [`rank_owners`]). `links` and `routing` give the
    /// peers of [`Exchange::Linked`].
    pub fn new(
        world: SimpleCommunicator,
        owner: Vec<usize>,
        exchange: Exchange,
        routing: &Routing,
        links: &[Link],
    ) -> Result<MpiTransport, EngineError> {
        let rank = world.rank() as usize;
        let ranks = world.size() as usize;
        if owner.iter().any(|&r| r >= ranks) || !(0..ranks).all(|r| owner.contains(&r)) {
            return Err(EngineError::BadTransport {
                detail: format!("partition owners {owner:?} do not fit {ranks} ranks"),
            });
        }
        let hosted: Vec<usize> = (0..owner.len()).filter(|&p| owner[p] == rank).collect();
        let mut linked = vec![false; ranks];
        for l in links {
            let (Some(a), Some(b)) = (routing.partition_of(l.src), routing.partition_of(l.dst))
            else {
                return Err(EngineError::UnroutedPort { port: l.src });
            };
            let (ra, rb) = (owner[a], owner[b]);
            if ra == rank && rb != rank {
                linked[rb] = true;
            }
            if rb == rank && ra != rank {
                linked[ra] = true;
            }
        }
        let peers = (0..ranks).filter(|&r| linked[r]).collect();
        Ok(MpiTransport {
            world,
            rank,
            ranks,
            owner,
            hosted,
            exchange,
            peers,
            out: vec![Vec::new(); ranks],
            // Never empty allocations: two empty vectors share one dangling pointer, and
            // MPI_Alltoallv refuses a send buffer equal to the receive buffer.
            send: Vec::with_capacity(4096),
            recv: Vec::with_capacity(4096),
            send_counts: vec![0; ranks],
            recv_counts: vec![0; ranks],
            send_displs: vec![0; ranks],
            recv_displs: vec![0; ranks],
            reports: vec![0; (1 + REPORT_WORDS) * ranks],
            gather_send: Vec::new(),
            gather_recv: Vec::new(),
        })
    }

    /// This rank's number.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The ranks this rank exchanges with under [`Exchange::Linked`].
    pub fn peers(&self) -> &[usize] {
        &self.peers
    }

    /// Encodes the outgoing mail into `out[rank]`, grouped by destination partition.
    fn encode(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        for (p, msgs) in mail.iter_mut().enumerate() {
            let r = self.owner[p];
            if r == self.rank || msgs.is_empty() {
                continue;
            }
            if self.exchange == Exchange::Linked && self.peers.binary_search(&r).is_err() {
                return Err(format!(
                    "a message to partition {p} on rank {r}, which no modeled link joins to \
                     rank {} (use the all-to-all exchange)",
                    self.rank
                )
                .into());
            }
            let buf = &mut self.out[r];
            buf.extend_from_slice(&(p as u32).to_le_bytes());
            buf.extend_from_slice(&(msgs.len() as u32).to_le_bytes());
            for m in msgs.drain(..) {
                m.encode(buf)?;
            }
        }
        Ok(())
    }

    /// Decodes one rank's groups of messages into the hosted partitions' mail.
    fn decode(
        &self,
        from: usize,
        mut bytes: &[u8],
        mail: &mut [Vec<Message>],
    ) -> Result<(), BoxError> {
        let bad = |what: &str| -> BoxError {
            format!(
                "rank {}: corrupt exchange from rank {from}: {what}",
                self.rank
            )
            .into()
        };
        while !bytes.is_empty() {
            let (Some(p), Some(n)) = (read_u32(bytes, 0), read_u32(bytes, 4)) else {
                return Err(bad("truncated group header"));
            };
            let p = p as usize;
            if self.owner.get(p) != Some(&self.rank) {
                return Err(bad(&format!("partition {p} is not hosted here")));
            }
            bytes = &bytes[8..];
            for _ in 0..n {
                let (m, used) = Message::decode(bytes)?;
                mail[p].push(m);
                bytes = &bytes[used..];
            }
        }
        Ok(())
    }

    fn exchange_all(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        self.send.clear();
        for r in 0..self.ranks {
            self.send_displs[r] = count(self.send.len())?;
            self.send_counts[r] = count(self.out[r].len())?;
            self.send.extend_from_slice(&self.out[r]);
            self.out[r].clear();
        }
        self.world
            .all_to_all_into(&self.send_counts[..], &mut self.recv_counts[..]);
        let mut total = 0usize;
        for r in 0..self.ranks {
            self.recv_displs[r] = count(total)?;
            total += usize::try_from(self.recv_counts[r]).map_err(|_| "negative count")?;
        }
        self.recv.clear();
        self.recv.resize(total, 0);
        {
            let sendbuf =
                MpiPartition::new(&self.send[..], &self.send_counts[..], &self.send_displs[..]);
            let mut recvbuf = PartitionMut::new(
                &mut self.recv[..],
                &self.recv_counts[..],
                &self.recv_displs[..],
            );
            self.world.all_to_all_varcount_into(&sendbuf, &mut recvbuf);
        }
        let recv = std::mem::take(&mut self.recv);
        let result = (0..self.ranks).try_for_each(|r| {
            let at = self.recv_displs[r] as usize;
            let len = self.recv_counts[r] as usize;
            self.decode(r, &recv[at..at + len], mail)
        });
        self.recv = recv;
        result
    }

    fn exchange_linked(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        let peers = std::mem::take(&mut self.peers);
        let n = peers.len();
        // Round 1: byte counts, to and from every peer (possibly 0).
        let sizes: Vec<u64> = peers.iter().map(|&r| self.out[r].len() as u64).collect();
        let mut incoming = vec![0u64; n];
        let world = &self.world;
        mpi::request::scope(|scope| {
            let mut sends = Vec::with_capacity(n);
            let mut recvs = Vec::with_capacity(n);
            for (i, slot) in incoming.iter_mut().enumerate() {
                recvs.push(
                    world
                        .process_at_rank(peers[i] as i32)
                        .immediate_receive_into(scope, slot),
                );
            }
            for (i, size) in sizes.iter().enumerate() {
                sends.push(
                    world
                        .process_at_rank(peers[i] as i32)
                        .immediate_send(scope, size),
                );
            }
            for r in recvs {
                r.wait();
            }
            for s in sends {
                s.wait();
            }
        });
        // Round 2: the bytes, where there are any.
        let total: u64 = incoming.iter().sum();
        self.recv.clear();
        self.recv.resize(total as usize, 0);
        {
            let out = &self.out;
            let mut rest: &mut [u8] = &mut self.recv[..];
            mpi::request::scope(|scope| {
                let mut sends = Vec::with_capacity(n);
                let mut recvs = Vec::with_capacity(n);
                for (i, &len) in incoming.iter().enumerate() {
                    if len == 0 {
                        continue;
                    }
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(len as usize);
                    rest = tail;
                    recvs.push(
                        world
                            .process_at_rank(peers[i] as i32)
                            .immediate_receive_into(scope, head),
                    );
                }
                for &r in &peers {
                    if !out[r].is_empty() {
                        sends.push(
                            world
                                .process_at_rank(r as i32)
                                .immediate_send(scope, &out[r][..]),
                        );
                    }
                }
                for r in recvs {
                    r.wait();
                }
                for s in sends {
                    s.wait();
                }
            });
        }
        for &r in &peers {
            self.out[r].clear();
        }
        let recv = std::mem::take(&mut self.recv);
        let mut at = 0usize;
        let mut result = Ok(());
        for (i, &len) in incoming.iter().enumerate() {
            let len = len as usize;
            if let Err(e) = self.decode(peers[i], &recv[at..at + len], mail) {
                result = Err(e);
                break;
            }
            at += len;
        }
        self.recv = recv;
        self.peers = peers;
        result
    }
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn count(n: usize) -> Result<Count, BoxError> {
    Count::try_from(n).map_err(|_| {
        format!("{n} bytes in one window to one rank: more than MPI's count limit").into()
    })
}

const NONE: u64 = u64::MAX;

/// The words of a [`WindowReport`] on the wire, next event aside: messages, busy time,
/// the most busy time, workers.
const REPORT_WORDS: usize = 4;

impl Transport for MpiTransport {
    fn partition_count(&self) -> usize {
        self.owner.len()
    }

    fn hosted(&self) -> &[usize] {
        &self.hosted
    }

    fn exchange(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        self.encode(mail)?;
        match self.exchange {
            Exchange::All => self.exchange_all(mail),
            Exchange::Linked => self.exchange_linked(mail),
        }
    }

    fn reduce(&mut self, local: WindowReport) -> Result<WindowReport, BoxError> {
        let mine = [
            local.next_event.unwrap_or(NONE),
            local.messages,
            local.busy_ns,
            local.max_busy_ns,
            local.workers,
        ];
        self.world.all_gather_into(&mine[..], &mut self.reports[..]);
        let mut out = WindowReport::default();
        for r in self.reports.chunks_exact(1 + REPORT_WORDS) {
            let next: Option<Picos> = (r[0] != NONE).then_some(r[0]);
            out = out.combine(WindowReport {
                next_event: next,
                messages: r[1],
                busy_ns: r[2],
                max_busy_ns: r[3],
                workers: r[4],
            });
        }
        Ok(out)
    }

    fn gather(
        &mut self,
        next: &mut [Picos],
        local: WindowReport,
    ) -> Result<WindowReport, BoxError> {
        let n = self.owner.len();
        if next.len() != n {
            return Err(format!("{} next events for {n} partitions", next.len()).into());
        }
        // One `MPI_Allreduce` (minimum) over every partition's next event and every rank's
        // report, each entry written by its owner only (the others give the identity,
        // u64::MAX): n + 4 x ranks words.
        let words = n + REPORT_WORDS * self.ranks;
        self.gather_send.clear();
        self.gather_send.resize(words, NONE);
        for &p in &self.hosted {
            self.gather_send[p] = next[p];
        }
        let at = n + REPORT_WORDS * self.rank;
        self.gather_send[at..at + REPORT_WORDS].copy_from_slice(&[
            local.messages,
            local.busy_ns,
            local.max_busy_ns,
            local.workers,
        ]);
        self.gather_recv.clear();
        self.gather_recv.resize(words, NONE);
        self.world.all_reduce_into(
            &self.gather_send[..],
            &mut self.gather_recv[..],
            SystemOperation::min(),
        );
        next.copy_from_slice(&self.gather_recv[..n]);
        Ok(self.gather_recv[n..].chunks_exact(REPORT_WORDS).fold(
            WindowReport::default(),
            |acc, r| {
                acc.combine(WindowReport {
                    next_event: None,
                    messages: r[0],
                    busy_ns: r[1],
                    max_busy_ns: r[2],
                    workers: r[3],
                })
            },
        ))
    }

    fn abort(&mut self) {
        // Nothing here: the caller prints the error and calls `abort_job`, and aborting
        // here would end the process before the message is printed.
    }
}

/// Ends the whole MPI job after an error on this rank (`MPI_Abort`): every other rank is
/// stopped by the MPI runtime, including ranks waiting in a collective. Never returns.
pub fn abort_job(world: &SimpleCommunicator, code: i32) -> ! {
    world.abort(code)
}

/// Ranks × threads: the transport of one worker thread of a rank whose partitions are
/// dealt to several threads. `L` is the rank's own transport on the rank's worker 0 (the
/// thread that initialized MPI, the only one that calls it) and [`NotLeader`] on the others.
///
/// The threads' [`crate::ThreadTransport`] treats every partition of another rank as hosted by
/// worker 0. Per window:
///
/// - exchange: a thread exchange (mail for other ranks gathers at worker 0, mail between
///   this rank's threads is delivered); worker 0's MPI exchange (out to the other ranks;
///   in, for every partition of this rank); a second thread exchange (worker 0 hands each
///   thread what arrived for it);
/// - reduce: a thread reduction (the rank's report), worker 0's MPI reduction, and a second
///   thread reduction in which worker 0 contributes the global result and the others the
///   identity, so every thread of every rank starts the same next window.
///
/// One failing thread poisons the threads' barrier (the others stop at their next
/// collective); worker 0 then returns the error and the caller aborts the MPI job.
pub struct RankThreads<L> {
    threads: crate::ThreadTransport,
    rank: L,
    hosted: Vec<usize>,
}

/// The rank-level transport of a worker thread other than the rank's worker 0: it takes no
/// part in MPI (a no-op exchange, the identity report).
pub struct NotLeader;

impl<L: RankLevel> RankThreads<L> {
    /// Worker `threads.worker()` of a rank: `hosted` are its own partitions (ascending).
    pub fn new(threads: crate::ThreadTransport, rank: L, hosted: Vec<usize>) -> Self {
        RankThreads {
            threads,
            rank,
            hosted,
        }
    }
}

/// How the rank's level of [`RankThreads`] exchanges and reduces.
pub trait RankLevel {
    fn exchange(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError>;
    fn reduce(&mut self, rank: WindowReport) -> Result<WindowReport, BoxError>;
    fn gather(&mut self, next: &mut [Picos], local: WindowReport)
        -> Result<WindowReport, BoxError>;
    fn abort(&mut self);
}

impl RankLevel for MpiTransport {
    fn exchange(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        Transport::exchange(self, mail)
    }
    fn reduce(&mut self, rank: WindowReport) -> Result<WindowReport, BoxError> {
        Transport::reduce(self, rank)
    }
    fn gather(
        &mut self,
        next: &mut [Picos],
        local: WindowReport,
    ) -> Result<WindowReport, BoxError> {
        Transport::gather(self, next, local)
    }
    fn abort(&mut self) {
        Transport::abort(self)
    }
}

impl RankLevel for NotLeader {
    fn exchange(&mut self, _mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        Ok(())
    }
    fn reduce(&mut self, _rank: WindowReport) -> Result<WindowReport, BoxError> {
        Ok(WindowReport::default())
    }
    fn gather(
        &mut self,
        _next: &mut [Picos],
        _local: WindowReport,
    ) -> Result<WindowReport, BoxError> {
        Ok(WindowReport::default())
    }
    fn abort(&mut self) {}
}

impl<L: RankLevel> Transport for RankThreads<L> {
    fn partition_count(&self) -> usize {
        self.threads.partition_count()
    }

    fn hosted(&self) -> &[usize] {
        &self.hosted
    }

    fn exchange(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        self.threads.exchange(mail)?;
        self.rank.exchange(mail)?;
        self.threads.exchange(mail)
    }

    fn reduce(&mut self, local: WindowReport) -> Result<WindowReport, BoxError> {
        let rank = self.threads.reduce(local)?;
        let global = self.rank.reduce(rank)?;
        self.threads.reduce(global)
    }

    /// As `reduce`: the rank's threads gather (worker 0 then holds the rank's entries and
    /// count), worker 0 gathers over the ranks, and a second thread gather hands every
    /// thread the other ranks' entries (worker 0's, as the thread map says) and the global
    /// count (worker 0 gives it, the others 0).
    fn gather(
        &mut self,
        next: &mut [Picos],
        local: WindowReport,
    ) -> Result<WindowReport, BoxError> {
        let rank = self.threads.gather(next, local)?;
        let global = self.rank.gather(next, rank)?;
        self.threads.gather(next, global)
    }

    fn abort(&mut self) {
        self.threads.abort();
        self.rank.abort();
    }
}
