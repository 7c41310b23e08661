//! Running a whole modeled system: the partitions a model builder made, the partition
//! hosting each port, and the modeled links (for the lookahead), on a transport.

use std::thread;

use tessera_interconnect::{Link, Partition, Picos, PortId};

use crate::threads::{AbortHandle, Aborted, Placement, ThreadTransport, WorkerMap};
use crate::Transport;
use crate::{Engine, EngineError, Routing, WindowStats};

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
    let lookahead = routing.lookahead(links)?.unwrap_or(Picos::MAX);
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
    placement: Placement,
) -> Result<(Vec<P>, WindowStats), EngineError> {
    let routing = Routing::new(partitions.len(), ports)?;
    let lookahead = routing.lookahead(links)?.unwrap_or(Picos::MAX);
    let map = WorkerMap::place(partitions.len(), threads, placement)?;
    run_threads_with(lookahead, routing, partitions, &map)
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
    lookahead: Picos,
    routing: Routing,
    partitions: Vec<P>,
    map: &WorkerMap,
) -> Result<(Vec<P>, WindowStats), EngineError> {
    if map.workers() == 1 {
        if partitions.len() != map.partition_count() {
            return Err(EngineError::PartitionCountMismatch {
                given: partitions.len(),
                hosted: map.partition_count(),
            });
        }
        let mut engine = Engine::sequential(lookahead, routing, partitions)?;
        let stats = engine.run()?;
        return Ok((engine.into_partitions(), stats));
    }
    let per_worker = map.split(partitions)?;
    let transports = ThreadTransport::for_workers(map);
    let Some(abort) = transports.first().map(ThreadTransport::abort_handle) else {
        return Err(EngineError::NoPartitions);
    };
    let mut engines = Vec::with_capacity(map.workers());
    for (parts, transport) in per_worker.into_iter().zip(transports) {
        engines.push(Engine::new(lookahead, routing.clone(), parts, transport)?);
    }
    let mut engines = engines.into_iter();
    let Some(first) = engines.next() else {
        return Err(EngineError::NoPartitions);
    };
    let results = run_workers(first, engines.collect(), &abort);
    gather(map, results)
}

/// What one worker's engine hands back.
type Done<P> = Result<(Vec<P>, WindowStats), EngineError>;

/// Runs `first` on the calling thread and each of `others` on a worker thread of its own
/// (named `tessera-worker-<i>`, a main thread's stack), and returns their results, the
/// calling thread's first. A worker thread that cannot start aborts the others through
/// `abort` (they would wait for it forever) and is reported as a transport error; a
/// worker's panic is resumed here once all have stopped.
fn run_workers<P, T0, T1>(
    first: Engine<P, T0>,
    others: Vec<Engine<P, T1>>,
    abort: &AbortHandle,
) -> Vec<Done<P>>
where
    P: Partition + Send,
    T0: Transport,
    T1: Transport + Send,
{
    fn work<P: Partition, T: Transport>(mut e: Engine<P, T>) -> Done<P> {
        let stats = e.run()?;
        Ok((e.into_partitions(), stats))
    }
    let (results, panics) = thread::scope(|s| {
        let mut handles = Vec::with_capacity(others.len());
        let mut spawn_error = None;
        for (i, e) in others.into_iter().enumerate() {
            let spawned = thread::Builder::new()
                .name(format!("tessera-worker-{}", i + 1))
                .stack_size(WORKER_STACK)
                .spawn_scoped(s, move || work(e));
            match spawned {
                Ok(h) => handles.push(h),
                Err(err) => {
                    abort.abort();
                    spawn_error = Some(err);
                    break;
                }
            }
        }
        let mut results: Vec<Done<P>> = Vec::with_capacity(handles.len() + 1);
        let mut panics = Vec::new();
        if let Some(err) = spawn_error {
            drop(first);
            results.push(Err(EngineError::Transport {
                source: format!("cannot start a worker thread: {err}").into(),
            }));
        } else {
            results.push(work(first));
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
fn gather<P>(
    map: &WorkerMap,
    results: Vec<Result<(Vec<P>, WindowStats), EngineError>>,
) -> Result<(Vec<P>, WindowStats), EngineError> {
    let mut parts = Vec::with_capacity(results.len());
    let mut stats = None;
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok((p, s)) => {
                // Every worker counts the same windows and the global messages.
                stats.get_or_insert(s);
                parts.push(p);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        let stats = stats.unwrap_or_default();
        return Ok((map.join(parts)?, stats));
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

/// The GPU of `cfg` running `trace`: built by `tessera-partitions`, run here, stats
/// collected by `tessera-partitions`. A model error comes back as the model's own error.
pub fn run_gpu(
    cfg: &tessera_partitions::config::GpuConfig,
    trace: &tessera_traces::TraceFile,
) -> Result<(tessera_partitions::stats::RunStats, WindowStats), tessera_partitions::gpu::GpuError> {
    run_gpu_threads(cfg, trace, 1)
}

/// [`run_gpu`] on `threads` worker threads ([`run_threads`]: contiguous blocks of the
/// `cfg.partition_count()` partitions; more threads than partitions are clamped, so a GPU
/// of one partition runs on one thread). The stats are the same bytes for any `threads`.
pub fn run_gpu_threads(
    cfg: &tessera_partitions::config::GpuConfig,
    trace: &tessera_traces::TraceFile,
    threads: usize,
) -> Result<(tessera_partitions::stats::RunStats, WindowStats), tessera_partitions::gpu::GpuError> {
    run_gpu_progress(cfg, trace, threads, None)
}

/// Where a GPU run is, for a progress display: simulated time, warp instructions retired,
/// kernels done of all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuProgress {
    pub sim_ps: Picos,
    pub warp_insts: u64,
    pub kernels_done: usize,
    pub kernels: usize,
}

/// Simulated time between two progress reports.
const PROGRESS_STEP_PS: Picos = 10_000_000;

/// [`run_gpu_threads`], calling `on_progress` every 10 simulated microseconds when given
/// and the run is on one thread (the engine pauses at those times, which never changes
/// results; on several threads no report is made).
pub fn run_gpu_progress(
    cfg: &tessera_partitions::config::GpuConfig,
    trace: &tessera_traces::TraceFile,
    threads: usize,
    on_progress: Option<&mut dyn FnMut(GpuProgress)>,
) -> Result<(tessera_partitions::stats::RunStats, WindowStats), tessera_partitions::gpu::GpuError> {
    run_gpu_placed(cfg, trace, threads, Placement::Contiguous, on_progress)
}

/// [`run_gpu_progress`] with the partitions dealt to the threads as `placement` says
/// (the stats are the same bytes for any placement).
pub fn run_gpu_placed(
    cfg: &tessera_partitions::config::GpuConfig,
    trace: &tessera_traces::TraceFile,
    threads: usize,
    placement: Placement,
    on_progress: Option<&mut dyn FnMut(GpuProgress)>,
) -> Result<(tessera_partitions::stats::RunStats, WindowStats), tessera_partitions::gpu::GpuError> {
    use tessera_partitions::gpu::{build, collect_stats};
    let sys = build(cfg, trace)?;
    let run = match on_progress {
        Some(report) if threads <= 1 => run_reporting(sys.partitions, sys.ports, sys.links, report),
        _ => run_threads_placed(sys.partitions, sys.ports, sys.links, threads, placement),
    };
    let (parts, w) = run.map_err(gpu_error)?;
    Ok((collect_stats(cfg, parts), w))
}

/// An engine error as the GPU model's: a model error is the model's own
/// ([`tessera_partitions::gpu::GpuError`]), anything else the engine's, as text.
fn gpu_error(e: EngineError) -> tessera_partitions::gpu::GpuError {
    use tessera_partitions::gpu::GpuError;
    match e {
        EngineError::Model { source, .. } => match source.downcast::<GpuError>() {
            Ok(g) => *g,
            Err(other) => GpuError::Engine(other.to_string()),
        },
        e => GpuError::Engine(e.to_string()),
    }
}

/// The sequential run of a GPU, paused every [`PROGRESS_STEP_PS`] to report progress.
fn run_reporting<'t>(
    partitions: Vec<tessera_partitions::gpu::GpuPartition<'t>>,
    ports: Vec<(PortId, usize)>,
    links: Vec<Link>,
    report: &mut dyn FnMut(GpuProgress),
) -> Result<(Vec<tessera_partitions::gpu::GpuPartition<'t>>, WindowStats), EngineError> {
    let routing = Routing::new(partitions.len(), ports)?;
    let lookahead = routing.lookahead(links)?.unwrap_or(Picos::MAX);
    let mut engine = Engine::sequential(lookahead, routing, partitions)?;
    let mut stop = PROGRESS_STEP_PS;
    loop {
        match engine.run_until(stop)? {
            crate::Progress::Finished => break,
            crate::Progress::Paused { next_event } => {
                let mut p = GpuProgress {
                    sim_ps: stop,
                    warp_insts: 0,
                    kernels_done: 0,
                    kernels: 0,
                };
                for part in engine.partitions() {
                    let (w, k) = part.progress();
                    p.warp_insts += w;
                    if let Some((d, n)) = k {
                        (p.kernels_done, p.kernels) = (d, n);
                    }
                }
                report(p);
                // Skip idle stretches: the next stop follows the next event.
                stop = next_event.max(stop).saturating_add(PROGRESS_STEP_PS);
            }
        }
    }
    let stats = *engine.stats();
    Ok((engine.into_partitions(), stats))
}

/// What [`run_gpu_mpi`] returns on each rank: the stats on rank 0, nothing elsewhere.
#[cfg(feature = "mpi")]
pub type MpiRun = Option<(tessera_partitions::stats::RunStats, WindowStats)>;

/// The GPU of `cfg` running `trace` on the ranks of `world` ([`crate::MpiTransport`]): the
/// partitions are dealt to ranks as `placement` says ([`crate::rank_owners`]; more ranks
/// than partitions is an error), each rank builds and simulates only its own, and at the
/// end every rank summarizes its partitions ([`tessera_partitions::gpu::stats_part`], after
/// agreeing on the run's end) and rank 0 gathers and merges the parts: the same bytes as
/// [`run_gpu`]. Every rank must call this with the same configuration and trace.
///
/// `threads` above 1 deals each rank's partitions to that many worker threads
/// ([`crate::mpi::RankThreads`]; the calling thread, which must be the one that initialized
/// MPI, is the rank's worker 0 and the only one calling MPI): ranks × threads, with the
/// same bytes again.
///
/// An error comes back on the rank that met it only: the others are still waiting in a
/// collective, so the caller must report it and end the job ([`crate::mpi::abort_job`]).
#[cfg(feature = "mpi")]
pub fn run_gpu_mpi(
    cfg: &tessera_partitions::config::GpuConfig,
    trace: &tessera_traces::TraceFile,
    world: &mpi::topology::SimpleCommunicator,
    exchange: crate::mpi::Exchange,
    placement: Placement,
    threads: usize,
) -> Result<MpiRun, tessera_partitions::gpu::GpuError> {
    use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
    use mpi::topology::Communicator;
    use tessera_partitions::gpu::{build_hosted, merge_stats, run_end_ps, stats_part, GpuError};

    let parts = cfg.partition_count() as usize;
    let rank = world.rank() as usize;
    let owners =
        crate::mpi::rank_owners(parts, world.size() as usize, placement).map_err(gpu_error)?;
    let hosted: Vec<usize> = (0..parts).filter(|&p| owners[p] == rank).collect();
    let sys = build_hosted(cfg, trace, &hosted)?;
    let routing = Routing::new(parts, sys.ports).map_err(gpu_error)?;
    let lookahead = routing
        .lookahead(sys.links.iter().cloned())
        .map_err(gpu_error)?
        .unwrap_or(Picos::MAX);
    let transport =
        crate::mpi::MpiTransport::new(world.duplicate(), owners, exchange, &routing, &sys.links)
            .map_err(gpu_error)?;
    let (partitions, windows) = if threads <= 1 || hosted.len() <= 1 {
        let mut engine =
            Engine::new(lookahead, routing, sys.partitions, transport).map_err(gpu_error)?;
        let windows = engine.run().map_err(gpu_error)?;
        (engine.into_partitions(), windows)
    } else {
        run_rank_threads(
            lookahead,
            routing,
            sys.partitions,
            parts,
            &hosted,
            threads,
            transport,
        )
        .map_err(gpu_error)?
    };
    let local_end = run_end_ps(&partitions);
    let mut end = 0u64;
    world.all_reduce_into(&local_end, &mut end, SystemOperation::max());
    let part = stats_part(cfg, partitions, end);
    let bytes = serde_json::to_vec(&part)
        .map_err(|e| GpuError::Engine(format!("cannot encode the stats of rank {rank}: {e}")))?;
    let root = world.process_at_rank(0);
    let len = bytes.len() as i32;
    if rank != 0 {
        root.gather_into(&len);
        root.gather_varcount_into(&bytes[..]);
        return Ok(None);
    }
    let ranks = world.size() as usize;
    let mut lens = vec![0i32; ranks];
    root.gather_into_root(&len, &mut lens[..]);
    let mut displs = Vec::with_capacity(ranks);
    let mut total = 0i32;
    for &l in &lens {
        displs.push(total);
        total += l;
    }
    let mut all = vec![0u8; total as usize];
    {
        let mut buf = mpi::datatype::PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
        root.gather_varcount_into_root(&bytes[..], &mut buf);
    }
    let mut parts_in = Vec::with_capacity(ranks);
    for (r, (&d, &l)) in displs.iter().zip(&lens).enumerate() {
        let chunk = &all[d as usize..(d + l) as usize];
        let p = serde_json::from_slice(chunk)
            .map_err(|e| GpuError::Engine(format!("the stats of rank {r} do not decode: {e}")))?;
        parts_in.push(p);
    }
    Ok(Some((merge_stats(cfg, parts_in), windows)))
}

/// One rank's partitions (`hosted`, ascending, and `partitions` in that order) of a system
/// of `total` partitions on `threads` worker threads in contiguous blocks, `rank` being the
/// rank's MPI transport, used by the calling thread only. The partitions come back in no
/// particular order (the stats sort units themselves); on failure, the error
/// [`first_error`] picks, as on threads alone.
#[cfg(feature = "mpi")]
fn run_rank_threads<P: Partition + Send>(
    lookahead: Picos,
    routing: Routing,
    partitions: Vec<P>,
    total: usize,
    hosted: &[usize],
    threads: usize,
    rank: crate::mpi::MpiTransport,
) -> Result<(Vec<P>, WindowStats), EngineError> {
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
        lookahead,
        routing.clone(),
        p0,
        RankThreads::new(t0, rank, own(0)),
    )?;
    let mut others = Vec::with_capacity(t - 1);
    for (w, (tt, pp)) in transports.zip(parts).enumerate() {
        let transport = RankThreads::new(tt, NotLeader, own(w + 1));
        others.push(Engine::new(lookahead, routing.clone(), pp, transport)?);
    }
    let results = run_workers(leader, others, &abort);
    let mut all = Vec::new();
    let mut stats = None;
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok((p, w)) => {
                stats.get_or_insert(w);
                all.extend(p);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok((all, stats.unwrap_or_default()))
    } else {
        Err(first_error(errors))
    }
}
