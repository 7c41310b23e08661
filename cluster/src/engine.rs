//! The conservative window loop.

use std::time::Instant;

use tessera_interconnect::{sort_arrivals, Message, Picos};

use crate::routing::close_paths;
use crate::transport::min_time;
use crate::{
    EngineError, Outbox, PairLookahead, Partition, Routing, Sequential, Transport, WindowReport,
};

/// How far partitions may run ahead of each other (DESIGN.md section 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookahead {
    /// One global window `[T, T + L)` for every partition, `L` the least latency of any
    /// link that crosses partitions, `T` the global earliest event: messages are exchanged
    /// between all partitions at every window's end.
    Global(Picos),
    /// Per partition pair, two levels: partition `p` may simulate up to
    /// `min over q of (next_q + D(q, p))`. A worker advances the partitions it hosts in
    /// local sub-windows, delivering their messages to each other itself, up to the bound
    /// the other workers' partitions set, and exchanges with the other workers only then.
    Pairs(PairLookahead),
}

impl From<Picos> for Lookahead {
    fn from(l: Picos) -> Lookahead {
        Lookahead::Global(l)
    }
}

impl From<PairLookahead> for Lookahead {
    fn from(d: PairLookahead) -> Lookahead {
        Lookahead::Pairs(d)
    }
}

impl Lookahead {
    /// The least lookahead between any two partitions (`Picos::MAX` when no link crosses
    /// partitions).
    pub fn min(&self) -> Picos {
        match self {
            Lookahead::Global(l) => *l,
            Lookahead::Pairs(d) => d.min().unwrap_or(Picos::MAX),
        }
    }
}

/// Which windows a run uses (`tessera run --windows`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Windows {
    /// [`Lookahead::Pairs`], the default.
    #[default]
    Pairs,
    /// [`Lookahead::Global`] (what every run used before the per-pair windows; kept to
    /// compare with).
    Global,
}

impl std::str::FromStr for Windows {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pair" | "pairs" => Ok(Windows::Pairs),
            "global" => Ok(Windows::Global),
            _ => Err(format!("unknown windows '{s}': expected pair or global")),
        }
    }
}

impl Windows {
    /// The name `--windows` takes.
    pub fn name(self) -> &'static str {
        match self {
            Windows::Pairs => "pair",
            Windows::Global => "global",
        }
    }

    /// The lookahead of this kind for `routing`'s partitioning of `links`.
    pub fn lookahead(
        self,
        routing: &Routing,
        links: impl IntoIterator<Item = tessera_interconnect::Link>,
    ) -> Result<Lookahead, EngineError> {
        Ok(match self {
            Windows::Pairs => Lookahead::Pairs(routing.pair_lookahead(links)?),
            Windows::Global => Lookahead::Global(routing.lookahead(links)?.unwrap_or(Picos::MAX)),
        })
    }
}

/// Counters of the window protocol itself (not of the model), for overhead measurements.
/// With the sequential transport they cover the whole system; on a multi-worker transport
/// `windows`, `messages`, `max_window_messages`, `critical_ns` and `busy_all_ns` are
/// global (the same on every worker), the rest this worker's; a runner of several
/// workers hands back worker 0's with every worker's [`WorkerTime`] in `workers`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// Windows simulated: exchanges between workers.
    pub windows: u64,
    /// Messages that crossed partitions (routed through the engine).
    pub messages: u64,
    /// The most messages exchanged in one window.
    pub max_window_messages: u64,
    /// Idle time jumped over: the sum of the gaps between the end of a window (or time 0)
    /// and the start of the next one.
    pub skipped_ps: Picos,
    /// Simulated time covered by windows (the sum of their lengths; per-pair windows:
    /// from the global earliest event to the least bound of this worker's partitions).
    pub window_ps: Picos,
    /// This worker's local sub-windows (per-pair windows: the rounds in which its
    /// partitions ran and delivered messages to each other between two exchanges with
    /// the other workers; global windows: one per window).
    pub sub_windows: u64,
    /// Host time of the critical path: the sum over windows of the busiest worker's
    /// busy time (nanoseconds).
    pub critical_ns: u64,
    /// The sum over windows and workers of busy time (nanoseconds): with `critical_ns`,
    /// the imbalance ([`WindowStats::imbalance`]).
    pub busy_all_ns: u64,
    /// Workers (threads of all ranks) in the last window.
    pub worker_count: u64,
    /// Per worker, in worker order (ranks first, then threads), its host time.
    pub workers: Vec<WorkerTime>,
    /// Per partition of the whole system, the host time spent running it (nanoseconds;
    /// a partition's own simulation, without routing and delivery): the cost a weighted
    /// placement deals by. Summed over workers by the runners.
    pub partition_busy_ns: Vec<u64>,
    /// With [`Engine::record_window_costs`]: per window, the host time of every partition
    /// of the system in it (nanoseconds, saturated at `u32::MAX`; rows of
    /// `partition_busy_ns.len()`, a partition another worker hosts 0; the runners sum the
    /// workers' rows). A profile's input to
    /// [`crate::Placement::Weighted`] ([`crate::deal_by_windows`]).
    pub window_costs: Vec<u32>,
}

impl WindowStats {
    /// The load imbalance: the busiest worker's busy time over the mean, summed over
    /// windows (`critical_ns x workers / busy_all_ns`); 1.0 is perfect balance. `None`
    /// before any window or with no busy time measured.
    pub fn imbalance(&self) -> Option<f64> {
        (self.busy_all_ns > 0 && self.worker_count > 0)
            .then(|| self.critical_ns as f64 * self.worker_count as f64 / self.busy_all_ns as f64)
    }
}

/// The buckets of [`WorkerTime::busy_hist`]: powers of two of nanoseconds.
pub const BUSY_BUCKETS: usize = 32;

/// One worker's host time over a run: busy (running its partitions, routing and
/// delivering their messages) and waiting (in the exchange and the reduction, for the
/// other workers and the transport), and a histogram over windows of its busy time per
/// window (`busy_hist[b]`: windows with busy time in `[2^(b-1), 2^b)` ns, `b = 0` for
/// none; the last bucket takes everything above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerTime {
    pub busy_ns: u64,
    pub wait_ns: u64,
    pub busy_hist: [u64; BUSY_BUCKETS],
}

impl Default for WorkerTime {
    fn default() -> Self {
        WorkerTime {
            busy_ns: 0,
            wait_ns: 0,
            busy_hist: [0; BUSY_BUCKETS],
        }
    }
}

impl WorkerTime {
    fn window(&mut self, busy_ns: u64, wait_ns: u64) {
        self.busy_ns = self.busy_ns.saturating_add(busy_ns);
        self.wait_ns = self.wait_ns.saturating_add(wait_ns);
        let b = (u64::BITS - busy_ns.leading_zeros()) as usize;
        self.busy_hist[b.min(BUSY_BUCKETS - 1)] += 1;
    }
}

/// Nanoseconds since `t`, saturating.
fn ns_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)
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
    /// The per-pair windows' state, when the lookahead is [`Lookahead::Pairs`].
    pairs: Option<Pairs>,
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
    /// Recording each window's per-partition costs ([`Engine::record_window_costs`]).
    record: bool,
    /// The partitions' busy time at the start of the current window, when recording.
    last_busy: Vec<u64>,
}

/// The state of the per-pair windows on one worker (see [`Engine::round`]); `k` hosted
/// partitions, `W` the set of them.
#[derive(Debug)]
struct Pairs {
    /// Every partition's next event after the last exchange, `Picos::MAX` when idle.
    next_all: Vec<Picos>,
    /// Per hosted partition `i`, `(q, D(q, hosted[i]))` for every partition `q` of another
    /// worker with a path to it.
    incoming: Vec<Vec<(usize, Picos)>>,
    /// `round_trip[m * k + i]`: the shortest path from hosted `m` to hosted `i` through
    /// a partition of another worker, `min over q outside W of (D(m, q) + D(q, i))`:
    /// what `m` sends out in a round can come back to `i` no sooner.
    round_trip: Vec<Picos>,
    /// `local_d[j * k + i]`: the shortest path from hosted `j` to hosted `i` over links
    /// between hosted partitions only (the diagonal: a cycle back to `i`), the paths a
    /// round's local deliveries can take.
    local_d: Vec<Picos>,
    /// Per hosted partition: its next event, the time it has simulated to, its bound from
    /// the other workers, its bound in the current sub-window.
    local: Vec<Picos>,
    reached: Vec<Picos>,
    cap: Vec<Picos>,
    bound: Vec<Picos>,
    /// The least of `local_d` (`Picos::MAX`: no links between hosted partitions): the
    /// least progress a sub-window after the first must offer.
    min_step: Picos,
}

impl Pairs {
    fn new(d: &PairLookahead, hosted: &[usize], count: usize) -> Pairs {
        let k = hosted.len();
        let mut is_hosted = vec![false; count];
        for &h in hosted {
            is_hosted[h] = true;
        }
        let outside: Vec<usize> = (0..count).filter(|&q| !is_hosted[q]).collect();
        let incoming = hosted
            .iter()
            .map(|&p| {
                outside
                    .iter()
                    .map(|&q| (q, d.get(q, p)))
                    .filter(|&(_, dq)| dq != Picos::MAX)
                    .collect()
            })
            .collect();
        let mut round_trip = vec![Picos::MAX; k * k];
        let mut local_d = vec![Picos::MAX; k * k];
        for (j, &m) in hosted.iter().enumerate() {
            for (i, &p) in hosted.iter().enumerate() {
                round_trip[j * k + i] = outside
                    .iter()
                    .map(|&q| d.get(m, q).saturating_add(d.get(q, p)))
                    .min()
                    .unwrap_or(Picos::MAX);
                local_d[j * k + i] = d.direct(m, p);
            }
        }
        // Closed over paths through hosted partitions only.
        close_paths(&mut local_d, k);
        let min_step = local_d.iter().copied().min().unwrap_or(Picos::MAX);
        Pairs {
            next_all: vec![Picos::MAX; count],
            incoming,
            round_trip,
            min_step,
            local_d,
            local: vec![Picos::MAX; k],
            reached: vec![0; k],
            cap: vec![0; k],
            bound: vec![0; k],
        }
    }
}

/// Partition `g`'s next event (as [`next_of`]), which must not be before `reached`, the
/// time it has simulated to.
fn next_after<P: Partition>(part: &P, g: usize, reached: Picos) -> Result<Picos, EngineError> {
    let t = next_of(part)?;
    if t < reached {
        return Err(EngineError::EventInPast {
            partition: g,
            event: t,
            window_end: reached,
        });
    }
    Ok(t)
}

/// A partition's next event as the per-pair windows keep it (`Picos::MAX`: idle); an
/// event at the end of the clock itself cannot be told from idle, and is an error.
fn next_of<P: Partition>(p: &P) -> Result<Picos, EngineError> {
    match p.next_event_time() {
        Some(Picos::MAX) => Err(EngineError::TimeOverflow),
        Some(t) => Ok(t),
        None => Ok(Picos::MAX),
    }
}

impl<P: Partition> Engine<P, Sequential> {
    /// All `partitions` on one thread, in index order. `lookahead` is `L`, the minimum
    /// latency of any port between partitions ([`Routing::lookahead`] computes it from the
    /// links), or the per-pair lookahead ([`Routing::pair_lookahead`]); `routing` maps
    /// every port that receives cross-partition messages to its partition.
    pub fn sequential(
        lookahead: impl Into<Lookahead>,
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
        lookahead: impl Into<Lookahead>,
        routing: Routing,
        partitions: Vec<P>,
        transport: T,
    ) -> Result<Self, EngineError> {
        let lookahead = lookahead.into();
        if lookahead.min() == 0 {
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
        let pairs = match &lookahead {
            Lookahead::Global(_) => None,
            Lookahead::Pairs(d) => {
                if d.partition_count() != count {
                    return Err(EngineError::BadTransport {
                        detail: format!(
                            "the lookahead has {} partitions, the transport {count}",
                            d.partition_count()
                        ),
                    });
                }
                Some(Pairs::new(d, &hosted, count))
            }
        };
        Ok(Engine {
            parts: partitions,
            transport,
            routing,
            lookahead: lookahead.min(),
            pairs,
            hosted,
            outbox: Outbox::default(),
            mail: (0..count).map(|_| Vec::new()).collect(),
            now: 0,
            next: None,
            started: false,
            failed: false,
            stats: WindowStats {
                workers: vec![WorkerTime::default()],
                partition_busy_ns: vec![0; count],
                ..WindowStats::default()
            },
            record: false,
            last_busy: Vec::new(),
        })
    }

    /// Runs until every partition is idle and nothing is in flight.
    pub fn run(&mut self) -> Result<WindowStats, EngineError> {
        match self.run_until(Picos::MAX)? {
            Progress::Finished => Ok(self.stats.clone()),
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
    /// Per-pair windows cut at `target` only the partitions that nothing else bounds (a
    /// single worker's: it would otherwise run to the end in one window); their local
    /// sub-windows may then differ from an unpaused run's.
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
        if self.pairs.is_some() {
            return self.run_pairs(stop, cut);
        }
        if !self.started {
            let mut local = None;
            for p in &self.parts {
                local = min_time(local, p.next_event_time());
            }
            let report = self.reduce(WindowReport::of_worker(local, 0, 0))?;
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
        let t0 = Instant::now();
        stats.windows += 1;
        stats.sub_windows += 1;
        stats.skipped_ps += start.saturating_sub(self.now);
        stats.window_ps += end - start;

        let mut sent = 0u64;
        for (part, &g) in parts.iter_mut().zip(hosted.iter()) {
            sent += run_partition(part, g, end, outbox, routing, mail, stats)?;
        }

        let mut busy = ns_since(t0);
        let t1 = Instant::now();
        transport
            .exchange(mail)
            .map_err(|source| EngineError::Transport { source })?;
        let mut wait = ns_since(t1);
        let t2 = Instant::now();

        let mut local = None;
        for (part, &g) in parts.iter_mut().zip(hosted.iter()) {
            deliver_to(part, &mut mail[g], g, end)?;
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

        busy += ns_since(t2);
        let t3 = Instant::now();
        let report = self.reduce(WindowReport::of_worker(local, sent, busy))?;
        wait += ns_since(t3);
        self.now = end;
        self.next = report.next_event;
        self.account(&report, busy, wait);
        Ok(())
    }

    /// Records every window's host time per partition in [`WindowStats::window_costs`]
    /// from now on (a profile for a weighted placement: memory grows with the windows).
    pub fn record_window_costs(&mut self) {
        self.record = true;
        self.last_busy = self.stats.partition_busy_ns.clone();
    }

    /// Adds a window's global report and this worker's host time to the stats.
    fn account(&mut self, report: &WindowReport, busy_ns: u64, wait_ns: u64) {
        if self.record {
            let s = &mut self.stats;
            for (b, last) in s.partition_busy_ns.iter().zip(self.last_busy.iter_mut()) {
                s.window_costs
                    .push(u32::try_from(b - *last).unwrap_or(u32::MAX));
                *last = *b;
            }
        }
        let s = &mut self.stats;
        s.messages += report.messages;
        s.max_window_messages = s.max_window_messages.max(report.messages);
        s.critical_ns = s.critical_ns.saturating_add(report.max_busy_ns);
        s.busy_all_ns = s.busy_all_ns.saturating_add(report.busy_ns);
        s.worker_count = report.workers;
        if let Some(w) = s.workers.first_mut() {
            w.window(busy_ns, wait_ns);
        }
    }

    /// The per-pair windows' loop: rounds while the global earliest event is before
    /// `stop` (every partition's bound cut at `stop` when `cut`).
    fn run_pairs(&mut self, stop: Picos, cut: bool) -> Result<Progress, EngineError> {
        if !self.started {
            self.gather_next(WindowReport::default())?;
            self.started = true;
        }
        loop {
            let Some(start) = self.next else {
                return self.finish();
            };
            if start >= stop {
                self.now = self.now.max(stop);
                return Ok(Progress::Paused { next_event: start });
            }
            self.now = self.now.max(start);
            self.round(start, stop, cut)?;
        }
    }

    /// Publishes the hosted partitions' next events to every worker and learns theirs;
    /// the global earliest becomes [`Engine::next_event`].
    fn gather_next(&mut self, local: WindowReport) -> Result<WindowReport, EngineError> {
        let Some(pairs) = self.pairs.as_mut() else {
            return Ok(WindowReport::default());
        };
        for (i, (part, &g)) in self.parts.iter().zip(&self.hosted).enumerate() {
            pairs.next_all[g] = next_after(part, g, pairs.reached[i])?;
        }
        let report = self
            .transport
            .gather(&mut pairs.next_all, local)
            .map_err(|source| EngineError::Transport { source })?;
        let t = pairs.next_all.iter().copied().min().unwrap_or(Picos::MAX);
        self.next = (t != Picos::MAX).then_some(t);
        Ok(report)
    }

    /// One round of the per-pair windows, from the global earliest event `start`, all
    /// `next` as of the round's start; caps cut at `stop` when `cut`, else only where
    /// nothing else bounds them. Each hosted partition `p` gets a cap:
    /// `min over q of another worker of (next_q + D(q, p))`, and
    /// `min over hosted m of (next_m + round_trip(m, p))` (what this worker sends out
    /// in the round comes back no sooner), and `stop`. Inside the caps, sub-windows:
    /// each partition runs to `min(cap_p, min over hosted j of (now_next_j +
    /// local_d(j, p)))` (`j = p` included, a cycle back to `p`) and the messages between
    /// hosted partitions are delivered, until none can go on; then one exchange with the
    /// other workers and one gather of next events.
    ///
    /// Why it is exact: anything partition `q` of another worker does in the round
    /// happens at or after `next_q`, or is caused by a message of its own worker's
    /// (delivered in the round), which `D`'s closure covers; it reaches `p` no earlier
    /// than `D(q, p)` after it, and only at the exchange, when every hosted partition has
    /// stopped at or before its cap. What a hosted partition sends out comes back in a
    /// later round, no sooner than the round trip after the worker's earliest event.
    /// Inside the worker, messages travel on links between hosted partitions and are
    /// delivered at each sub-window's end. Progress: the partition holding the global
    /// earliest event always has a bound above it (every link's latency is positive).
    fn round(&mut self, start: Picos, stop: Picos, cut: bool) -> Result<(), EngineError> {
        let Engine {
            parts,
            transport,
            routing,
            hosted,
            outbox,
            mail,
            stats,
            pairs,
            ..
        } = self;
        let Some(pairs) = pairs.as_mut() else {
            return Ok(());
        };
        let t0 = Instant::now();
        let k = hosted.len();
        stats.windows += 1;
        for i in 0..k {
            let mut cap = if cut { stop } else { Picos::MAX };
            for &(q, d) in &pairs.incoming[i] {
                let nq = pairs.next_all[q];
                if nq != Picos::MAX {
                    cap = cap.min(nq.saturating_add(d));
                }
            }
            for (j, &m) in hosted.iter().enumerate() {
                let nm = pairs.next_all[m];
                if nm != Picos::MAX {
                    cap = cap.min(nm.saturating_add(pairs.round_trip[j * k + i]));
                }
            }
            // Uncut (a pause for progress, `run_past`), a partition that nothing else
            // bounds (one worker: all of them) still stops at the pause; the windows
            // between workers stay those of an unpaused run.
            pairs.cap[i] = if cap == Picos::MAX { stop } else { cap };
            pairs.local[i] = pairs.next_all[hosted[i]];
        }
        let least_cap = pairs.cap.iter().copied().min().unwrap_or(start);
        stats.window_ps += least_cap.saturating_sub(start);
        let mut sent = 0u64;
        let mut first = true;
        loop {
            let mut any = false;
            for i in 0..k {
                let mut b = pairs.cap[i];
                for j in 0..k {
                    let nj = pairs.local[j];
                    let d = pairs.local_d[j * k + i];
                    if nj != Picos::MAX && d != Picos::MAX {
                        b = b.min(nj.saturating_add(d));
                    }
                }
                pairs.bound[i] = b;
                // After the first sub-window, another is worth its visits only if it
                // takes some partition at least one local lookahead further (else the
                // round ends a little short of the caps, which is always exact, and
                // the next round goes on from there).
                any |= pairs.local[i] < b
                    && (first || b.saturating_sub(pairs.reached[i]) >= pairs.min_step);
            }
            if !any {
                break;
            }
            first = false;
            stats.sub_windows += 1;
            for (i, part) in parts.iter_mut().enumerate() {
                let end = pairs.bound[i];
                if pairs.local[i] >= end {
                    continue;
                }
                sent += run_partition(part, hosted[i], end, outbox, routing, mail, stats)?;
                pairs.reached[i] = end;
            }
            for (i, part) in parts.iter_mut().enumerate() {
                let g = hosted[i];
                deliver_to(part, &mut mail[g], g, pairs.reached[i])?;
                pairs.local[i] = next_after(part, g, pairs.reached[i])?;
            }
        }

        let mut busy = ns_since(t0);
        let t1 = Instant::now();
        transport
            .exchange(mail)
            .map_err(|source| EngineError::Transport { source })?;
        let mut wait = ns_since(t1);
        let t2 = Instant::now();
        for (i, part) in parts.iter_mut().enumerate() {
            let g = hosted[i];
            deliver_to(part, &mut mail[g], g, pairs.reached[i])?;
        }
        busy += ns_since(t2);
        let t3 = Instant::now();
        let report = self.gather_next(WindowReport::of_worker(None, sent, busy))?;
        wait += ns_since(t3);
        self.account(&report, busy, wait);
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

/// Runs partition `g` to `end`, counting its host time, and routes what it sent into
/// `mail` by destination partition; returns how many messages it sent.
fn run_partition<P: Partition>(
    part: &mut P,
    g: usize,
    end: Picos,
    outbox: &mut Outbox,
    routing: &Routing,
    mail: &mut [Vec<Message>],
    stats: &mut WindowStats,
) -> Result<u64, EngineError> {
    let t = Instant::now();
    part.run_until(end, outbox)
        .map_err(|source| EngineError::Model {
            partition: g,
            source,
        })?;
    stats.partition_busy_ns[g] += ns_since(t);
    let sent = outbox.len() as u64;
    for m in outbox.drain() {
        let Some(dst) = routing.partition_of(m.dst_port) else {
            return Err(EngineError::UnknownDestination {
                src_port: m.src_port,
                dst_port: m.dst_port,
            });
        };
        mail[dst].push(m);
    }
    Ok(sent)
}

/// Sorts, checks and delivers `inbox` to partition `g` (global index), which has
/// simulated to `now`, and clears it; nothing when it is empty.
fn deliver_to<P: Partition>(
    part: &mut P,
    inbox: &mut Vec<Message>,
    g: usize,
    now: Picos,
) -> Result<(), EngineError> {
    if inbox.is_empty() {
        return Ok(());
    }
    sort_arrivals(inbox);
    check_inbox(inbox, g, now)?;
    part.deliver(inbox).map_err(|source| EngineError::Model {
        partition: g,
        source,
    })?;
    inbox.clear();
    Ok(())
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
