//! Running a whole modeled system: the partitions a model builder made, the partition
//! hosting each port, and the modeled links (for the lookahead), on a transport.

use std::thread;

use tessera_interconnect::{Link, Partition, Picos, PortId};

use crate::threads::{AbortHandle, Aborted, Placement, ThreadTransport, WorkerMap};
use crate::Transport;
use crate::{Engine, EngineError, Lookahead, Routing, WindowStats, Windows};

/// How a run is spread over workers: which worker hosts each partition (with a cost per
/// partition for [`Placement::Weighted`]), and which windows they run
/// ([`Windows::Pairs`] by default). None of it changes results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    pub placement: Placement,
    pub windows: Windows,
    /// A cost per partition, for [`Placement::Weighted`].
    pub costs: Option<Vec<u64>>,
    /// A group per partition (its GPU): see [`crate::PlacementHints::groups`].
    pub groups: Option<Vec<usize>>,
    /// Per-window costs of a profile (rows of one cost per partition), for
    /// [`Placement::Weighted`]: see [`crate::PlacementHints::window_costs`].
    pub window_costs: Option<Vec<u32>>,
    /// Record every window's per-partition cost (a profile for a weighted placement;
    /// [`WindowStats::window_costs`]).
    pub record_window_costs: bool,
}

impl From<Placement> for Schedule {
    fn from(placement: Placement) -> Schedule {
        Schedule {
            placement,
            windows: Windows::default(),
            costs: None,
            groups: None,
            window_costs: None,
            record_window_costs: false,
        }
    }
}

impl Schedule {
    /// The workers of `partitions` partitions on `threads` threads.
    pub fn map(&self, partitions: usize, threads: usize) -> Result<WorkerMap, EngineError> {
        WorkerMap::place_with(partitions, threads, self.placement, self.hints())
    }

    /// The placement's hints.
    pub fn hints(&self) -> crate::PlacementHints<'_> {
        crate::PlacementHints {
            costs: self.costs.as_deref(),
            groups: self.groups.as_deref(),
            window_costs: self.window_costs.as_deref(),
        }
    }
}

/// Stack of each worker thread: the size of a main thread's, since the sequential run the
/// workers stand in for runs on one.
const WORKER_STACK: usize = 8 << 20;

/// Runs `partitions` to completion on the sequential transport and hands them back (for
/// their stats) with the engine's window counters. `ports` says which partition hosts each
/// port; the lookahead is the least latency of the `links` the partitioning cuts (the
/// whole run is one window when none is cut).
pub fn run_sequential<P: Partition>(
    partitions: Vec<P>,
    ports: impl IntoIterator<Item = (PortId, usize)>,
    links: impl IntoIterator<Item = Link>,
) -> Result<(Vec<P>, WindowStats), EngineError> {
    let routing = Routing::new(partitions.len(), ports)?;
    let lookahead = Windows::default().lookahead(&routing, links)?;
    let mut engine = Engine::sequential(lookahead, routing, partitions)?;
    let stats = engine.run()?;
    Ok((engine.into_partitions(), stats))
}

/// [`run_sequential`] on `threads` worker threads ([`crate::ThreadTransport`]): the
/// partitions are dealt out in contiguous blocks ([`WorkerMap::contiguous`]), and handed
/// back in global index order with the window counters, which are the same as the
/// sequential run's (and so are the partitions' own results: any thread count gives the
/// same bytes). `threads` above the partition count is clamped to it; `threads == 1` is
/// the sequential transport; zero is an error.
pub fn run_threads<P: Partition + Send>(
    partitions: Vec<P>,
    ports: impl IntoIterator<Item = (PortId, usize)>,
    links: impl IntoIterator<Item = Link>,
    threads: usize,
) -> Result<(Vec<P>, WindowStats), EngineError> {
    run_threads_placed(partitions, ports, links, threads, Placement::Contiguous)
}

/// [`run_threads`] with the partitions dealt to the threads as `placement` says
/// ([`WorkerMap::place`]); the results are the same for any placement.
pub fn run_threads_placed<P: Partition + Send>(
    partitions: Vec<P>,
    ports: impl IntoIterator<Item = (PortId, usize)>,
    links: impl IntoIterator<Item = Link>,
    threads: usize,
    schedule: impl Into<Schedule>,
) -> Result<(Vec<P>, WindowStats), EngineError> {
    let schedule = schedule.into();
    let routing = Routing::new(partitions.len(), ports)?;
    let lookahead = schedule.windows.lookahead(&routing, links)?;
    let map = schedule.map(partitions.len(), threads)?;
    run_threads_with(lookahead, routing, partitions, &map)
}

/// What [`run_threads_until`] hands back: the partitions in global index order, the
/// window counters, and whether the simulation finished (`false`: cut at the stop time).
pub type UntilDone<P> = (Vec<P>, WindowStats, bool);

/// [`run_threads_placed`] stopped at simulated time `stop` (every event before it
/// simulated, none at or after it, on every partition: [`Engine::run_to`]); `Picos::MAX`
/// runs to completion. The partitions' state at `stop` is the same for any thread count
/// and placement.
pub fn run_threads_until<P: Partition + Send>(
    partitions: Vec<P>,
    ports: impl IntoIterator<Item = (PortId, usize)>,
    links: impl IntoIterator<Item = Link>,
    threads: usize,
    schedule: impl Into<Schedule>,
    stop: Picos,
) -> Result<UntilDone<P>, EngineError> {
    let schedule = schedule.into();
    let routing = Routing::new(partitions.len(), ports)?;
    let lookahead = schedule.windows.lookahead(&routing, links)?;
    let map = schedule.map(partitions.len(), threads)?;
    let record = schedule.record_window_costs;
    run_map_until(lookahead, routing, partitions, &map, stop, record)
}

/// How [`run_threads_stepped`] pauses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pauses {
    /// At multiples of the step, windows cut there ([`Engine::run_until`]): the state at a
    /// pause is the same for any threads, placement and partitioning, so a decision made
    /// there (a run limit) is too.
    Exact,
    /// At the end of the first window reaching each step ([`Engine::run_past`]): the
    /// windows stay those of an unpaused run (for a progress display). A lookahead longer
    /// than the step (one partition: no windows at all) is cut as in `Exact`.
    WindowEnds,
}

/// What [`run_threads_stepped`] hands back: the partitions in global index order, the
/// window counters, and `None` when the simulation finished, else the time it stopped at.
pub type Stepped<P> = (Vec<P>, WindowStats, Option<Picos>);

/// [`run_threads_until`] paused every `step` of simulated time (idle stretches skipped:
/// the next pause is the first multiple of `step` after the next event) to call
/// `on_pause` with every partition (in no particular order) and the time reached, while
/// every worker waits; it returns whether to go on. Stopping there (or at `stop`) leaves
/// the partitions as they stood. Pausing never changes results.
#[allow(clippy::too_many_arguments)]
pub fn run_threads_stepped<P: Partition + Send>(
    partitions: Vec<P>,
    ports: impl IntoIterator<Item = (PortId, usize)>,
    links: impl IntoIterator<Item = Link>,
    threads: usize,
    schedule: impl Into<Schedule>,
    (step, pauses): (Picos, Pauses),
    stop: Picos,
    on_pause: &mut dyn FnMut(&[&P], Picos) -> bool,
) -> Result<Stepped<P>, EngineError> {
    let schedule = schedule.into();
    let routing = Routing::new(partitions.len(), ports)?;
    let lookahead = schedule.windows.lookahead(&routing, links)?;
    let map = schedule.map(partitions.len(), threads)?;
    let step = step.max(1);
    let cut = pauses == Pauses::Exact || lookahead.min() > step;
    if map.workers() == 1 {
        if partitions.len() != map.partition_count() {
            return Err(EngineError::PartitionCountMismatch {
                given: partitions.len(),
                hosted: map.partition_count(),
            });
        }
        let mut engines = [Engine::sequential(lookahead, routing, partitions)?];
        let at = step_loop(
            &mut engines,
            |e, t, x| step_all(e, None, t, x),
            (step, cut),
            stop,
            &mut |e, at| on_pause(&all_parts(e), at),
        )?;
        let [engine] = engines;
        let stats = engine.stats().clone();
        return Ok((engine.into_partitions(), stats, at));
    }
    let per_worker = map.split(partitions)?;
    let transports = ThreadTransport::for_workers(&map);
    let Some(abort) = transports.first().map(ThreadTransport::abort_handle) else {
        return Err(EngineError::NoPartitions);
    };
    let mut engines = worker_engines(&lookahead, &routing, per_worker, transports)?;
    let at = step_loop(
        &mut engines,
        |e, t, x| step_all(e, Some(&abort), t, x),
        (step, cut),
        stop,
        &mut |e, at| on_pause(&all_parts(e), at),
    )?;
    let stats = merged(engines.iter().map(|e| e.stats().clone()));
    let parts = engines.into_iter().map(Engine::into_partitions).collect();
    Ok((map.join(parts)?, stats, at))
}

/// One engine per worker: its partitions and its transport.
fn worker_engines<P: Partition>(
    lookahead: &Lookahead,
    routing: &Routing,
    per_worker: Vec<Vec<P>>,
    transports: Vec<ThreadTransport>,
) -> Result<Vec<Engine<P, ThreadTransport>>, EngineError> {
    per_worker
        .into_iter()
        .zip(transports)
        .map(|(parts, transport)| Engine::new(lookahead.clone(), routing.clone(), parts, transport))
        .collect()
}

/// Worker 0's window counters with every worker's host time, in worker order.
fn merged(per_worker: impl IntoIterator<Item = WindowStats>) -> WindowStats {
    let mut all = per_worker.into_iter();
    let mut first = all.next().unwrap_or_default();
    for s in all {
        first.workers.extend(s.workers);
        for (a, b) in first.partition_busy_ns.iter_mut().zip(s.partition_busy_ns) {
            *a += b;
        }
        // Every worker records a row per window (the same windows), zeros where it
        // hosts no partition.
        for (a, b) in first.window_costs.iter_mut().zip(s.window_costs) {
            *a = a.saturating_add(b);
        }
    }
    first
}

/// Every partition of `engines`, in no particular order.
fn all_parts<P: Partition, T: Transport>(engines: &[Engine<P, T>]) -> Vec<&P> {
    engines.iter().flat_map(|e| e.partitions()).collect()
}

/// [`run_threads_stepped`] of one engine (an MPI rank's: `on_pause` may make collectives,
/// every rank pausing at the same times), cut at each step when `cut`.
pub fn run_engine_stepped<P: Partition, T: Transport>(
    engine: &mut Engine<P, T>,
    (step, cut): (Picos, bool),
    stop: Picos,
    on_pause: &mut dyn FnMut(&Engine<P, T>, Picos) -> bool,
) -> Result<Option<Picos>, EngineError> {
    step_loop(
        std::slice::from_mut(engine),
        |e, t, exact| match e.first_mut() {
            Some(e) if exact => e.run_until(t),
            Some(e) => e.run_past(t),
            None => Err(EngineError::NoPartitions),
        },
        (step.max(1), cut),
        stop,
        &mut |e, at| match e.first() {
            Some(e) => on_pause(e, at),
            None => true,
        },
    )
}

/// What [`step_loop`] calls at each pause with every engine, whether to go on.
type OnPauseAll<'a, P, T> = &'a mut dyn FnMut(&[Engine<P, T>], Picos) -> bool;

/// The pauses of [`run_threads_stepped`], `advance` running the engines to a time (cut
/// there when asked): `Some(time)` when it stopped before finishing.
fn step_loop<P: Partition, T: Transport>(
    engines: &mut [Engine<P, T>],
    mut advance: impl FnMut(&mut [Engine<P, T>], Picos, bool) -> Result<crate::Progress, EngineError>,
    (step, cut): (Picos, bool),
    stop: Picos,
    on_pause: OnPauseAll<'_, P, T>,
) -> Result<Option<Picos>, EngineError> {
    let mut target = step.min(stop);
    loop {
        // The last stretch is always cut: nothing at or after `stop` is simulated.
        let exact = cut || target >= stop;
        match advance(engines, target, exact)? {
            crate::Progress::Finished => return Ok(None),
            crate::Progress::Paused { next_event } => {
                if target >= stop {
                    if stop == Picos::MAX {
                        return Err(EngineError::TimeOverflow);
                    }
                    return Ok(Some(stop));
                }
                // Uncut, the windows may have gone past `target` (or stopped short of it
                // with nothing pending before it): either way the state is that time's.
                let at = match engines.first() {
                    Some(e) if !exact => e.now().max(target),
                    _ => target,
                };
                if !on_pause(engines, at) {
                    return Ok(Some(at));
                }
                target = (next_event / step)
                    .saturating_add(1)
                    .saturating_mul(step)
                    .min(stop);
            }
        }
    }
}

/// Runs every engine to `target` (cut there when `exact`), the first on the calling
/// thread and the others on threads of their own, as [`run_workers`] does; they all agree
/// on how it ended.
fn step_all<P: Partition + Send, T: Transport + Send>(
    engines: &mut [Engine<P, T>],
    abort: Option<&AbortHandle>,
    target: Picos,
    exact: bool,
) -> Result<crate::Progress, EngineError> {
    /// The engines outlive a panicking worker here (they are borrowed), so their
    /// transport's own poisoning on drop does not happen: this stops the others instead.
    struct AbortOnPanic<'a>(Option<&'a AbortHandle>);
    impl Drop for AbortOnPanic<'_> {
        fn drop(&mut self) {
            if let (true, Some(a)) = (thread::panicking(), self.0) {
                a.abort();
            }
        }
    }
    fn go<P: Partition, T: Transport>(
        e: &mut Engine<P, T>,
        (target, exact): (Picos, bool),
        abort: Option<&AbortHandle>,
    ) -> Result<crate::Progress, EngineError> {
        let _guard = AbortOnPanic(abort);
        if exact {
            e.run_until(target)
        } else {
            e.run_past(target)
        }
    }
    let Some((first, others)) = engines.split_first_mut() else {
        return Err(EngineError::NoPartitions);
    };
    if others.is_empty() {
        return go(first, (target, exact), abort);
    }
    let results = on_workers(
        || go(first, (target, exact), abort),
        others.iter_mut(),
        |e| go(e, (target, exact), abort),
        || {
            if let Some(a) = abort {
                a.abort();
            }
        },
    );
    let mut progress = None;
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(p) => {
                progress.get_or_insert(p);
            }
            Err(e) => errors.push(e),
        }
    }
    match progress {
        Some(p) if errors.is_empty() => Ok(p),
        _ => Err(first_error(errors)),
    }
}

/// Runs `partitions` (in global index order) to completion on the workers of `map`, with
/// the lookahead and routing given; the calling thread is worker 0. One worker is the
/// sequential transport. Construction errors (a zero lookahead, counts that disagree)
/// come back before any thread starts.
///
/// When a partition fails, every worker stops at its next collective and the error
/// returned is the one of the lowest-numbered failing partition (what the sequential run
/// reports, since it runs partitions in index order and stops at the first error);
/// stalls are merged over all workers, by partition. A worker that panics makes the others
/// stop, and the panic is resumed here once all have.
pub fn run_threads_with<P: Partition + Send>(
    lookahead: impl Into<Lookahead>,
    routing: Routing,
    partitions: Vec<P>,
    map: &WorkerMap,
) -> Result<(Vec<P>, WindowStats), EngineError> {
    let (parts, stats, _) =
        run_threads_with_until(lookahead, routing, partitions, map, Picos::MAX)?;
    Ok((parts, stats))
}

/// [`run_threads_with`] stopped at `stop` ([`run_threads_until`]).
pub fn run_threads_with_until<P: Partition + Send>(
    lookahead: impl Into<Lookahead>,
    routing: Routing,
    partitions: Vec<P>,
    map: &WorkerMap,
    stop: Picos,
) -> Result<UntilDone<P>, EngineError> {
    run_map_until(lookahead.into(), routing, partitions, map, stop, false)
}

/// [`run_threads_with_until`], every engine recording its windows' costs when `record`
/// ([`Engine::record_window_costs`]; the runner sums the workers' rows).
fn run_map_until<P: Partition + Send>(
    lookahead: Lookahead,
    routing: Routing,
    partitions: Vec<P>,
    map: &WorkerMap,
    stop: Picos,
    record: bool,
) -> Result<UntilDone<P>, EngineError> {
    if map.workers() == 1 {
        if partitions.len() != map.partition_count() {
            return Err(EngineError::PartitionCountMismatch {
                given: partitions.len(),
                hosted: map.partition_count(),
            });
        }
        let mut engine = Engine::sequential(lookahead, routing, partitions)?;
        if record {
            engine.record_window_costs();
        }
        let finished = engine.run_to(stop)?;
        let stats = engine.stats().clone();
        return Ok((engine.into_partitions(), stats, finished));
    }
    let per_worker = map.split(partitions)?;
    let transports = ThreadTransport::for_workers(map);
    let Some(abort) = transports.first().map(ThreadTransport::abort_handle) else {
        return Err(EngineError::NoPartitions);
    };
    let mut engines = worker_engines(&lookahead, &routing, per_worker, transports)?;
    if record {
        engines.iter_mut().for_each(Engine::record_window_costs);
    }
    let mut engines = engines.into_iter();
    let Some(first) = engines.next() else {
        return Err(EngineError::NoPartitions);
    };
    let results = run_workers(first, engines.collect(), &abort, stop);
    gather(map, results)
}

/// What one worker's engine hands back: its partitions, the window counters, whether the
/// simulation finished.
type Done<P> = Result<UntilDone<P>, EngineError>;

/// Runs `first` on the calling thread and each of `others` on a worker thread of its own
/// (named `tessera-worker-<i>`, a main thread's stack), and returns their results, the
/// calling thread's first. A worker thread that cannot start aborts the others through
/// `abort` (they would wait for it forever) and is reported as a transport error; a
/// worker's panic is resumed here once all have stopped.
fn run_workers<P, T0, T1>(
    first: Engine<P, T0>,
    others: Vec<Engine<P, T1>>,
    abort: &AbortHandle,
    stop: Picos,
) -> Vec<Done<P>>
where
    P: Partition + Send,
    T0: Transport,
    T1: Transport + Send,
{
    fn work<P: Partition, T: Transport>(mut e: Engine<P, T>, stop: Picos) -> Done<P> {
        let finished = e.run_to(stop)?;
        let stats = e.stats().clone();
        Ok((e.into_partitions(), stats, finished))
    }
    on_workers(
        move || work(first, stop),
        others,
        |e| work(e, stop),
        || abort.abort(),
    )
}

/// Runs `first` on the calling thread and `work` on each of `others` on a worker thread
/// of its own (named `tessera-worker-<i>`, a main thread's stack); returns their results,
/// the calling thread's first. A worker thread that cannot start calls `abort` (the
/// others would wait for it forever) and is reported as a transport error in `first`'s
/// place; a worker's panic is resumed here once all have stopped.
fn on_workers<T: Send, R: Send>(
    first: impl FnOnce() -> Result<R, EngineError>,
    others: impl IntoIterator<Item = T>,
    work: impl Fn(T) -> Result<R, EngineError> + Sync,
    abort: impl Fn(),
) -> Vec<Result<R, EngineError>> {
    let (results, panics) = thread::scope(|s| {
        let work = &work;
        let mut handles = Vec::new();
        let mut spawn_error = None;
        for (i, e) in others.into_iter().enumerate() {
            let spawned = thread::Builder::new()
                .name(format!("tessera-worker-{}", i + 1))
                .stack_size(WORKER_STACK)
                .spawn_scoped(s, move || work(e));
            match spawned {
                Ok(h) => handles.push(h),
                Err(err) => {
                    abort();
                    spawn_error = Some(err);
                    break;
                }
            }
        }
        let mut results = Vec::with_capacity(handles.len() + 1);
        let mut panics = Vec::new();
        match spawn_error {
            Some(err) => {
                // Its engine goes before the others are joined (as their transports'
                // peers do when a worker fails).
                drop(first);
                results.push(Err(EngineError::Transport {
                    source: format!("cannot start a worker thread: {err}").into(),
                }));
            }
            None => results.push(first()),
        }
        for h in handles {
            match h.join() {
                Ok(r) => results.push(r),
                Err(p) => panics.push(p),
            }
        }
        (results, panics)
    });
    if let Some(p) = panics.into_iter().next() {
        std::panic::resume_unwind(p);
    }
    results
}

/// The partitions back in index order, or the error a sequential run would report.
fn gather<P>(map: &WorkerMap, results: Vec<Done<P>>) -> Result<UntilDone<P>, EngineError> {
    let mut parts = Vec::with_capacity(results.len());
    let mut stats = Vec::with_capacity(results.len());
    let mut finished = false;
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok((p, s, f)) => {
                // Every worker counts the same windows and the global messages, and
                // agrees on the end (the reduced next event).
                finished = f;
                stats.push(s);
                parts.push(p);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        return Ok((map.join(parts)?, merged(stats), finished));
    }
    Err(first_error(errors))
}

/// Of the errors of several workers, the one a sequential run would report: the
/// lowest-ranked ([`rank`]) that is not an abort caused by another worker's failure;
/// stalls merged over all workers, by partition.
fn first_error(errors: Vec<EngineError>) -> EngineError {
    let is_abort =
        |e: &EngineError| matches!(e, EngineError::Transport { source } if source.is::<Aborted>());
    let mut stalls: Vec<(usize, String)> = Vec::new();
    let mut best: Option<EngineError> = None;
    for e in errors {
        if is_abort(&e) {
            best.get_or_insert(e);
            continue;
        }
        if let EngineError::Stalled { reports } = e {
            stalls.extend(reports);
            continue;
        }
        let better = match &best {
            None => true,
            Some(b) if is_abort(b) => true,
            Some(b) => rank(&e) < rank(b),
        };
        if better {
            best = Some(e);
        }
    }
    match best {
        Some(e) if !is_abort(&e) => e,
        _ if !stalls.is_empty() => {
            stalls.sort_by_key(|&(p, _)| p);
            EngineError::Stalled { reports: stalls }
        }
        Some(e) => e,
        None => EngineError::Failed,
    }
}

/// Errors of lower rank are the ones a sequential run meets first: by the partition they
/// name; errors naming none (a broken transport, a duplicate key) last.
fn rank(e: &EngineError) -> usize {
    match e {
        EngineError::Model { partition, .. }
        | EngineError::Causality { partition, .. }
        | EngineError::EventInPast { partition, .. } => *partition,
        _ => usize::MAX,
    }
}

/// [`run_sequential`], paused every `step` picoseconds of simulated time (skipping idle
/// stretches: the next pause follows the next event) to call `on_pause` with the
/// partitions and the time reached. Pausing never changes results.
pub fn run_sequential_paused<P: Partition>(
    partitions: Vec<P>,
    ports: impl IntoIterator<Item = (PortId, usize)>,
    links: impl IntoIterator<Item = Link>,
    step: Picos,
    on_pause: &mut dyn FnMut(&[P], Picos),
) -> Result<(Vec<P>, WindowStats), EngineError> {
    let (parts, stats, _) =
        run_sequential_paused_until(partitions, ports, links, step, on_pause, Picos::MAX)?;
    Ok((parts, stats))
}

/// [`run_sequential_paused`] stopped at simulated time `end` ([`Engine::run_to`];
/// `Picos::MAX` runs to completion): also says whether the simulation finished.
pub fn run_sequential_paused_until<P: Partition>(
    partitions: Vec<P>,
    ports: impl IntoIterator<Item = (PortId, usize)>,
    links: impl IntoIterator<Item = Link>,
    step: Picos,
    on_pause: &mut dyn FnMut(&[P], Picos),
    end: Picos,
) -> Result<UntilDone<P>, EngineError> {
    let routing = Routing::new(partitions.len(), ports)?;
    let lookahead = Windows::default().lookahead(&routing, links)?;
    let mut engine = Engine::sequential(lookahead, routing, partitions)?;
    let mut stop = step.min(end);
    let finished = loop {
        match engine.run_until(stop)? {
            crate::Progress::Finished => break true,
            crate::Progress::Paused { next_event } => {
                if stop >= end {
                    if end == Picos::MAX {
                        return Err(EngineError::TimeOverflow);
                    }
                    break false;
                }
                on_pause(engine.partitions(), stop);
                stop = next_event.max(stop).saturating_add(step).min(end);
            }
        }
    };
    let stats = engine.stats().clone();
    Ok((engine.into_partitions(), stats, finished))
}

/// One rank's partitions (`hosted`, ascending, and `partitions` in that order) of a system
/// of `total` partitions on `threads` worker threads in contiguous blocks, `rank` being the
/// rank's MPI transport, used by the calling thread only. The partitions come back in no
/// particular order (the stats sort units themselves), stopped at `stop` as
/// [`run_threads_until`]; on failure, the error [`first_error`] picks, as on threads alone.
#[cfg(feature = "mpi")]
#[allow(clippy::too_many_arguments)]
pub fn run_rank_threads<P: Partition + Send>(
    lookahead: Lookahead,
    routing: Routing,
    partitions: Vec<P>,
    total: usize,
    hosted: &[usize],
    threads: usize,
    rank: crate::mpi::MpiTransport,
    stop: Picos,
) -> Result<UntilDone<P>, EngineError> {
    use crate::mpi::{NotLeader, RankThreads};
    let t = threads.min(hosted.len());
    // Every partition of another rank belongs to worker 0, which talks to the other ranks.
    let mut owner = vec![0; total];
    for (i, &p) in hosted.iter().enumerate() {
        owner[p] = i * t / hosted.len();
    }
    let map = WorkerMap::from_owners(owner)?;
    let mut per_thread: Vec<Vec<P>> = (0..t).map(|_| Vec::new()).collect();
    for (part, &p) in partitions.into_iter().zip(hosted) {
        per_thread[map.owner(p).unwrap_or(0)].push(part);
    }
    let own = |w: usize| -> Vec<usize> {
        hosted
            .iter()
            .copied()
            .filter(|&p| map.owner(p) == Some(w))
            .collect()
    };
    let mut transports = ThreadTransport::for_workers(&map).into_iter();
    let mut parts = per_thread.into_iter();
    let (Some(t0), Some(p0)) = (transports.next(), parts.next()) else {
        return Err(EngineError::NoPartitions);
    };
    let abort = t0.abort_handle();
    let leader = Engine::new(
        lookahead.clone(),
        routing.clone(),
        p0,
        RankThreads::new(t0, rank, own(0)),
    )?;
    let mut others = Vec::with_capacity(t - 1);
    for (w, (tt, pp)) in transports.zip(parts).enumerate() {
        let transport = RankThreads::new(tt, NotLeader, own(w + 1));
        others.push(Engine::new(
            lookahead.clone(),
            routing.clone(),
            pp,
            transport,
        )?);
    }
    let results = run_workers(leader, others, &abort, stop);
    let mut all = Vec::new();
    let mut stats = Vec::new();
    let mut finished = false;
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok((p, w, f)) => {
                finished = f;
                stats.push(w);
                all.extend(p);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok((all, merged(stats), finished))
    } else {
        Err(first_error(errors))
    }
}
