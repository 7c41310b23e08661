//! The conservative window loop.

use tessera_interconnect::{sort_arrivals, Message, Picos};

use crate::transport::min_time;
use crate::{EngineError, Outbox, Partition, Routing, Sequential, Transport, WindowReport};

/// Counters of the window protocol itself (not of the model), for overhead measurements.
/// With the sequential transport they cover the whole system; on a multi-worker transport
/// `messages` is global (reduced) and the rest are the same on every worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// Windows simulated.
    pub windows: u64,
    /// Messages that crossed partitions (routed through the engine).
    pub messages: u64,
    /// The most messages exchanged in one window.
    pub max_window_messages: u64,
    /// Idle time jumped over: the sum of the gaps between the end of a window (or time 0)
    /// and the start of the next one.
    pub skipped_ps: Picos,
    /// Simulated time covered by windows (the sum of their lengths).
    pub window_ps: Picos,
}

/// How a call to [`Engine::run_until`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Every partition is idle and nothing is in flight: the simulation is over.
    Finished,
    /// The next window would start at `next_event`, which is at or after the stop time.
    Paused {
        /// The global earliest pending event.
        next_event: Picos,
    },
}

/// The conservative window engine of DESIGN.md section 4, for the partitions one worker
/// hosts. See the crate docs for the protocol.
pub struct Engine<P, T = Sequential> {
    parts: Vec<P>,
    transport: T,
    routing: Routing,
    lookahead: Picos,
    /// Global index of each hosted partition.
    hosted: Vec<usize>,
    outbox: Outbox,
    /// One buffer per partition of the whole system (see [`Transport::exchange`]).
    mail: Vec<Vec<Message>>,
    /// The time every hosted partition has reached: the end of the last window.
    now: Picos,
    /// Global earliest pending event, once started.
    next: Option<Picos>,
    started: bool,
    failed: bool,
    stats: WindowStats,
}

impl<P: Partition> Engine<P, Sequential> {
    /// All `partitions` on one thread, in index order. `lookahead` is `L`, the minimum
    /// latency of any port between partitions ([`Routing::lookahead`] computes it from the
    /// links); `routing` maps every port that receives cross-partition messages to its
    /// partition.
    pub fn sequential(
        lookahead: Picos,
        routing: Routing,
        partitions: Vec<P>,
    ) -> Result<Self, EngineError> {
        let transport = Sequential::new(partitions.len());
        Engine::new(lookahead, routing, partitions, transport)
    }
}

impl<P: Partition, T: Transport> Engine<P, T> {
    /// An engine over `partitions`, the ones `transport` says this worker hosts (in the
    /// order of [`Transport::hosted`]). A zero `lookahead` is an error.
    pub fn new(
        lookahead: Picos,
        routing: Routing,
        partitions: Vec<P>,
        transport: T,
    ) -> Result<Self, EngineError> {
        if lookahead == 0 {
            return Err(EngineError::ZeroLookahead);
        }
        let count = transport.partition_count();
        if count == 0 {
            return Err(EngineError::NoPartitions);
        }
        if routing.partition_count() != count {
            return Err(EngineError::BadTransport {
                detail: format!(
                    "the routing table has {} partitions, the transport {count}",
                    routing.partition_count()
                ),
            });
        }
        let hosted = transport.hosted().to_vec();
        if hosted.windows(2).any(|w| w[0] >= w[1]) || hosted.iter().any(|&h| h >= count) {
            return Err(EngineError::BadTransport {
                detail: format!(
                    "hosted partitions {hosted:?} are not strictly ascending below {count}"
                ),
            });
        }
        if partitions.len() != hosted.len() {
            return Err(EngineError::PartitionCountMismatch {
                given: partitions.len(),
                hosted: hosted.len(),
            });
        }
        Ok(Engine {
            parts: partitions,
            transport,
            routing,
            lookahead,
            hosted,
            outbox: Outbox::default(),
            mail: (0..count).map(|_| Vec::new()).collect(),
            now: 0,
            next: None,
            started: false,
            failed: false,
            stats: WindowStats::default(),
        })
    }

    /// Runs until every partition is idle and nothing is in flight.
    pub fn run(&mut self) -> Result<WindowStats, EngineError> {
        match self.run_until(Picos::MAX)? {
            Progress::Finished => Ok(self.stats),
            Progress::Paused { .. } => {
                // Only an event at Picos::MAX itself can be left.
                self.failed = true;
                self.transport.abort();
                Err(EngineError::TimeOverflow)
            }
        }
    }

    /// Runs to completion (`stop` = `Picos::MAX`, as [`Engine::run`]) or until every
    /// event before `stop` has been simulated (the last window cut at `stop`): `true`
    /// when the simulation finished, `false` when events at or after `stop` remain. The
    /// state reached at `stop` is the same for any windows, transport or partitioning
    /// (every partition has simulated exactly `[0, stop)`).
    pub fn run_to(&mut self, stop: Picos) -> Result<bool, EngineError> {
        if stop == Picos::MAX {
            self.run()?;
            return Ok(true);
        }
        Ok(matches!(self.run_until(stop)?, Progress::Finished))
    }

    /// Runs windows while the next one starts before `stop`; a window that would cross
    /// `stop` is cut there (a shorter window is always exact). Call again to go on: the
    /// results never depend on where a run was paused.
    pub fn run_until(&mut self, stop: Picos) -> Result<Progress, EngineError> {
        self.run_guarded(stop, true)
    }

    /// [`Engine::run_until`] without cutting a window at `target`: runs whole windows
    /// while the next one starts before `target`, so pausing here leaves the windows (and
    /// their count) as an unpaused run has them; [`Engine::now`] is then the time reached.
    pub fn run_past(&mut self, target: Picos) -> Result<Progress, EngineError> {
        self.run_guarded(target, false)
    }

    fn run_guarded(&mut self, stop: Picos, cut: bool) -> Result<Progress, EngineError> {
        if self.failed {
            return Err(EngineError::Failed);
        }
        match self.run_inner(stop, cut) {
            Ok(p) => Ok(p),
            Err(e) => {
                self.failed = true;
                self.transport.abort();
                Err(e)
            }
        }
    }

    fn run_inner(&mut self, stop: Picos, cut: bool) -> Result<Progress, EngineError> {
        if !self.started {
            let mut local = None;
            for p in &self.parts {
                local = min_time(local, p.next_event_time());
            }
            let report = self.reduce(WindowReport {
                next_event: local,
                messages: 0,
            })?;
            self.next = report.next_event;
            self.started = true;
        }
        loop {
            let Some(start) = self.next else {
                return self.finish();
            };
            if start >= stop {
                return Ok(Progress::Paused { next_event: start });
            }
            // start < stop <= Picos::MAX, so end > start: every window makes progress.
            let end = start.saturating_add(self.lookahead);
            let end = if cut { end.min(stop) } else { end };
            self.window(start, end)?;
        }
    }

    fn reduce(&mut self, local: WindowReport) -> Result<WindowReport, EngineError> {
        self.transport
            .reduce(local)
            .map_err(|source| EngineError::Transport { source })
    }

    fn finish(&mut self) -> Result<Progress, EngineError> {
        let reports: Vec<(usize, String)> = self
            .parts
            .iter()
            .zip(&self.hosted)
            .filter_map(|(p, &g)| p.stalled().map(|s| (g, s)))
            .collect();
        if reports.is_empty() {
            Ok(Progress::Finished)
        } else {
            Err(EngineError::Stalled { reports })
        }
    }

    /// One window `[start, end)`: run, route, exchange, sort, check, deliver, reduce.
    fn window(&mut self, start: Picos, end: Picos) -> Result<(), EngineError> {
        let Engine {
            parts,
            transport,
            routing,
            hosted,
            outbox,
            mail,
            stats,
            ..
        } = self;
        stats.windows += 1;
        stats.skipped_ps += start.saturating_sub(self.now);
        stats.window_ps += end - start;

        let mut sent = 0u64;
        for (part, &g) in parts.iter_mut().zip(hosted.iter()) {
            part.run_until(end, outbox)
                .map_err(|source| EngineError::Model {
                    partition: g,
                    source,
                })?;
            sent += outbox.len() as u64;
            for m in outbox.drain() {
                let Some(dst) = routing.partition_of(m.dst_port) else {
                    return Err(EngineError::UnknownDestination {
                        src_port: m.src_port,
                        dst_port: m.dst_port,
                    });
                };
                mail[dst].push(m);
            }
        }

        transport
            .exchange(mail)
            .map_err(|source| EngineError::Transport { source })?;

        let mut local = None;
        for (part, &g) in parts.iter_mut().zip(hosted.iter()) {
            let inbox = &mut mail[g];
            if !inbox.is_empty() {
                sort_arrivals(inbox);
                check_inbox(inbox, g, end)?;
                part.deliver(inbox).map_err(|source| EngineError::Model {
                    partition: g,
                    source,
                })?;
                inbox.clear();
            }
            let next = part.next_event_time();
            if let Some(t) = next {
                if t < end {
                    return Err(EngineError::EventInPast {
                        partition: g,
                        event: t,
                        window_end: end,
                    });
                }
            }
            local = min_time(local, next);
        }

        let report = self.reduce(WindowReport {
            next_event: local,
            messages: sent,
        })?;
        self.now = end;
        self.next = report.next_event;
        self.stats.messages += report.messages;
        self.stats.max_window_messages = self.stats.max_window_messages.max(report.messages);
        Ok(())
    }

    /// The time every hosted partition has reached (the end of the last window).
    pub fn now(&self) -> Picos {
        self.now
    }

    /// The start of the next window (the global earliest pending event), once the engine
    /// has started; `None` before the first run or when finished.
    pub fn next_event(&self) -> Option<Picos> {
        self.next
    }

    /// The lookahead `L`.
    pub fn lookahead(&self) -> Picos {
        self.lookahead
    }

    /// The window counters so far.
    pub fn stats(&self) -> &WindowStats {
        &self.stats
    }

    /// The routing table.
    pub fn routing(&self) -> &Routing {
        &self.routing
    }

    /// The hosted partitions, in the order of [`Transport::hosted`].
    pub fn partitions(&self) -> &[P] {
        &self.parts
    }

    /// The hosted partitions, mutably (between runs).
    pub fn partitions_mut(&mut self) -> &mut [P] {
        &mut self.parts
    }

    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// Gives the partitions back (to read their stats).
    pub fn into_partitions(self) -> Vec<P> {
        self.parts
    }
}

/// The receiver-side checks, on an inbox already sorted: the earliest arrival is not before
/// the receiver's current time (`now`, the end of the window it just simulated), and no
/// `(arrive_at, src_port, src_seq)` key repeats (the order is strict). Both are O(1) or O(n) over data just sorted, so they are always on.
fn check_inbox(inbox: &[Message], partition: usize, now: Picos) -> Result<(), EngineError> {
    if let Some(m) = inbox.first() {
        if m.arrive_at < now {
            return Err(EngineError::Causality {
                src_port: m.src_port,
                src_seq: m.src_seq,
                dst_port: m.dst_port,
                partition,
                arrive_at: m.arrive_at,
                receiver_time: now,
            });
        }
    }
    for w in inbox.windows(2) {
        if w[0].key() == w[1].key() {
            return Err(EngineError::DuplicateMessage {
                src_port: w[0].src_port,
                src_seq: w[0].src_seq,
            });
        }
    }
    Ok(())
}
