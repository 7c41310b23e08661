//! The collective operations of a window, behind one trait.

use tessera_interconnect::{Message, Picos};

use crate::BoxError;

/// What one worker contributes to, and gets back from, the per-window reduction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowReport {
    /// Earliest pending event of the worker's partitions after delivery (`None`: all idle).
    /// Reduced by minimum, `None` counting as infinity.
    pub next_event: Option<Picos>,
    /// Cross-partition messages the worker's partitions sent in the window. Reduced by sum.
    pub messages: u64,
    /// Host nanoseconds the worker spent simulating in the window. Reduced by sum.
    pub busy_ns: u64,
    /// The most any one worker spent. Reduced by maximum.
    pub max_busy_ns: u64,
    /// Workers reporting. Reduced by sum.
    pub workers: u64,
}

impl WindowReport {
    /// A worker's own report: its next event, messages and busy time.
    pub fn of_worker(next_event: Option<Picos>, messages: u64, busy_ns: u64) -> WindowReport {
        WindowReport {
            next_event,
            messages,
            busy_ns,
            max_busy_ns: busy_ns,
            workers: 1,
        }
    }

    /// The reduction of two reports: minimum next event, summed messages, busy time and
    /// workers, the maximum busy time. Associative and commutative over integers, so any
    /// reduction tree gives the same result.
    pub fn combine(self, other: WindowReport) -> WindowReport {
        WindowReport {
            next_event: min_time(self.next_event, other.next_event),
            messages: self.messages.saturating_add(other.messages),
            busy_ns: self.busy_ns.saturating_add(other.busy_ns),
            max_busy_ns: self.max_busy_ns.max(other.max_busy_ns),
            workers: self.workers.saturating_add(other.workers),
        }
    }
}

/// Minimum of two optional times, `None` meaning "never".
#[inline]
pub(crate) fn min_time(a: Option<Picos>, b: Option<Picos>) -> Option<Picos> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// How the partitions of one system, spread over workers (threads, MPI ranks, or one
/// thread for all), exchange messages and agree on the next window.
///
/// The window loop itself ([`crate::Engine`]) is the same for every transport: each worker
/// runs one `Engine` over the partitions it hosts and calls these collectives once per
/// window, in the same order on every worker. Partitions are numbered globally
/// `0..partition_count()`; the routing table uses those numbers.
///
/// Per window, each worker: runs its partitions over `[T, end)`, routing what they send
/// into `mail[destination partition]`; calls [`exchange`](Transport::exchange); sorts and
/// delivers `mail[p]` for each hosted `p`; calls [`reduce`](Transport::reduce) with its
/// partitions' earliest next event, and starts the next window at the result (or stops, when
/// it is `None`). The sequential transport does nothing in either call; the thread transport
/// ([`crate::ThreadTransport`]) moves messages through per-(worker, partition) slots behind
/// a barrier; an MPI transport encodes
/// ([`Message::encode`]) and exchanges with the ranks it has links to, then reduces.
pub trait Transport {
    /// Number of partitions in the whole system, on all workers.
    fn partition_count(&self) -> usize;

    /// The global indices of the partitions this worker hosts, strictly ascending. The
    /// engine's partitions are these, in this order.
    fn hosted(&self) -> &[usize];

    /// Moves this window's messages to the workers that host their destinations.
    ///
    /// `mail` has one buffer per partition of the whole system. On entry the buffer of a
    /// partition this worker does not host holds messages to send; on return it must be
    /// empty (keeping its capacity is the point: no allocation per window). On return the
    /// buffer of each hosted partition holds every message sent to it in this window by any
    /// worker, in any order (the engine sorts).
    fn exchange(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError>;

    /// The global reduction ([`WindowReport::combine`]) of every worker's `local` report.
    fn reduce(&mut self, local: WindowReport) -> Result<WindowReport, BoxError>;

    /// The collective of the per-pair windows ([`crate::Lookahead::Pairs`]): every worker
    /// learns every partition's next event. `next` has an entry per partition of the
    /// whole system, [`Picos::MAX`] for an idle one; on entry the entries of the
    /// partitions this worker hosts are its own (the others are ignored), on return every
    /// entry holds the value its host gave. `local` is this worker's report (its
    /// `next_event` is not read); the combination of every worker's is returned, its
    /// `next_event` not set.
    fn gather(&mut self, next: &mut [Picos], local: WindowReport)
        -> Result<WindowReport, BoxError>;

    /// Called once when this worker fails (a model error, a broken contract), before the
    /// engine returns the error: the transport must make every other worker fail too rather
    /// than wait forever in a collective (a poisoned barrier; `MPI_Abort` with the message).
    fn abort(&mut self);
}

/// The sequential transport: one thread hosts every partition and runs them in index order.
/// Exchanging is a no-op (every destination is local) and the reduction is the identity.
#[derive(Clone, Debug)]
pub struct Sequential {
    hosted: Vec<usize>,
}

impl Sequential {
    /// A sequential transport for a system of `partitions` partitions.
    pub fn new(partitions: usize) -> Sequential {
        Sequential {
            hosted: (0..partitions).collect(),
        }
    }
}

impl Transport for Sequential {
    fn partition_count(&self) -> usize {
        self.hosted.len()
    }

    fn hosted(&self) -> &[usize] {
        &self.hosted
    }

    fn exchange(&mut self, _mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        Ok(())
    }

    fn reduce(&mut self, local: WindowReport) -> Result<WindowReport, BoxError> {
        Ok(local)
    }

    fn gather(
        &mut self,
        _next: &mut [Picos],
        local: WindowReport,
    ) -> Result<WindowReport, BoxError> {
        Ok(local)
    }

    fn abort(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_combine_by_min_and_sum() {
        let a = WindowReport::of_worker(Some(7), 2, 10);
        let b = WindowReport::of_worker(None, 5, 30);
        let c = WindowReport::of_worker(Some(3), 0, 20);
        assert_eq!(
            a.combine(b).combine(c),
            WindowReport {
                next_event: Some(3),
                messages: 7,
                busy_ns: 60,
                max_busy_ns: 30,
                workers: 3,
            }
        );
        assert_eq!(b.combine(b).next_event, None);
        assert_eq!(a.combine(b), b.combine(a));
    }
}
