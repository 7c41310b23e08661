//! The simulated system on the parallel engine: a GPU system of `tessera-partitions`
//! (built from a configuration and a trace) run on a transport of `tessera-cluster`
//! (sequential, threads, MPI ranks), its stats collected. `tessera-cluster` knows
//! partitions, transports and windows only; what a partition simulates is decided here
//! and in `tessera-partitions`.
//!
//! [`run_gpu`] and [`run_gpu_threads`] run a GPU to completion and collect its stats (the
//! same bytes on any thread count or placement, [`run_gpu_placed`]); [`run_gpu_progress`]
//! reports progress while it runs; [`run_gpu_limited`] stops at a simulated time
//! ([`RunLimits`]: `--max-cycles`, `--max-warp-insts`, with partial stats that say so); `run_gpu_mpi` (feature `mpi`) runs one rank's share of
//! it and gathers the stats parts ([`tessera_partitions::gpu::stats_part`]) to rank 0,
//! which merges them into the bytes a sequential run writes.

use tessera_cluster::{
    run_threads_stepped, run_threads_until, EngineError, Pauses, Picos, Placement, Schedule,
    WindowStats,
};
#[cfg(feature = "mpi")]
use tessera_cluster::{Engine, Routing};
use tessera_partitions::config::GpuConfig;
use tessera_partitions::gpu::{build, collect_stats, collect_stats_at, GpuError, GpuPartition};
use tessera_partitions::stats::{RunLimit, RunStats};
use tessera_partitions::timeseries::Interval;
use tessera_partitions::watchdog::{
    SyncWordValue, Verdict, Watchdog, WatchdogReport, WatchdogSample, MAX_REPORTED_WARPS,
};
use tessera_traces::TraceFile;

/// The GPU of `cfg` running `trace`: built by `tessera-partitions`, run here, stats
/// collected by `tessera-partitions`. A model error comes back as the model's own error.
pub fn run_gpu(cfg: &GpuConfig, trace: &TraceFile) -> Result<(RunStats, WindowStats), GpuError> {
    run_gpu_threads(cfg, trace, 1)
}

/// [`run_gpu`] on `threads` worker threads ([`run_threads`]: contiguous blocks of the
/// `cfg.partition_count()` partitions; more threads than partitions are clamped, so a GPU
/// of one partition runs on one thread). The stats are the same bytes for any `threads`.
pub fn run_gpu_threads(
    cfg: &GpuConfig,
    trace: &TraceFile,
    threads: usize,
) -> Result<(RunStats, WindowStats), GpuError> {
    run_gpu_progress(cfg, trace, threads, None)
}

/// Where a GPU run is, for a progress display: simulated time, warp instructions retired,
/// CTAs completed (of the trace's CTAs, which its index counts: the share of the run done
/// even when the instructions to come are not known in advance), kernels done of all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuProgress {
    pub sim_ps: Picos,
    pub warp_insts: u64,
    pub ctas_done: u64,
    pub kernels_done: usize,
    pub kernels: usize,
}

/// Simulated time between two progress reports.
const PROGRESS_STEP_PS: Picos = 10_000_000;

/// [`run_gpu_threads`], calling `on_progress` about every 10 simulated microseconds when
/// given (the engine pauses at the first window end past each, every worker waiting,
/// which never changes results).
pub fn run_gpu_progress(
    cfg: &GpuConfig,
    trace: &TraceFile,
    threads: usize,
    on_progress: Option<&mut dyn FnMut(GpuProgress)>,
) -> Result<(RunStats, WindowStats), GpuError> {
    run_gpu_placed(cfg, trace, threads, Placement::Contiguous, on_progress)
}

/// [`run_gpu_progress`] with the partitions dealt to the threads as `schedule` says
/// (a [`Placement`], or with it the windows: the stats are the same bytes for any).
pub fn run_gpu_placed(
    cfg: &GpuConfig,
    trace: &TraceFile,
    threads: usize,
    schedule: impl Into<Schedule>,
    on_progress: Option<&mut dyn FnMut(GpuProgress)>,
) -> Result<(RunStats, WindowStats), GpuError> {
    run_gpu_limited(
        cfg,
        trace,
        threads,
        schedule,
        on_progress,
        &RunLimits::default(),
    )
}

/// Limits on a run (`tessera run --max-cycles`, `--kernels`). The kernel selection is
/// applied to the trace before the run ([`TraceFile::keep_launches`]); here it is only
/// recorded in the stats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// Stop at this many core cycles of simulated time (`core.clock_hz`): every event
    /// before `max_cycles x core period` is simulated, none at or after, on every
    /// partition, so the cut is the same for any threads, placement and partitioning.
    pub max_cycles: Option<u64>,
    /// Stop at the first multiple of [`WARP_INSTS_STEP`] core cycles at which at least
    /// this many warp instructions have issued, over the whole system: a time that does
    /// not depend on threads, placement or partitioning (a count reached inside a window
    /// would).
    pub max_warp_insts: Option<u64>,
    /// The launch range simulated, as given (`2..5`), for the stats.
    pub kernels: Option<String>,
    /// `--sample-every`: sample the counters every this many core cycles (the stats'
    /// `timeseries`). Not a limit: it leaves `run_limit` alone.
    pub sample_every: Option<u64>,
}

/// The core cycles between the checks of `max_warp_insts`.
pub const WARP_INSTS_STEP: u64 = 1000;

impl RunLimits {
    /// No limit at all: the stats then carry no `run_limit` object.
    pub fn is_none(&self) -> bool {
        self.max_cycles.is_none() && self.max_warp_insts.is_none() && self.kernels.is_none()
    }
}

/// The sampling interval of `--sample-every cycles` (none without it), refused when it is
/// 0 or when a run cut at `max_cycles` would make more than
/// [`tessera_partitions::timeseries::MAX_SAMPLES`] intervals.
pub fn sample_interval(
    cfg: &GpuConfig,
    sample_every: Option<u64>,
    max_cycles: Option<u64>,
) -> Result<Option<Interval>, GpuError> {
    let Some(cycles) = sample_every else {
        return Ok(None);
    };
    let i = Interval::new(cycles, cfg.core_period_ps()).map_err(GpuError::Unsupported)?;
    if let Some(m) = max_cycles {
        i.check_count(m.div_ceil(cycles))
            .map_err(GpuError::Unsupported)?;
    }
    Ok(Some(i))
}

/// The error of a sampled run that made more intervals than can be kept.
fn check_samples(stats: &RunStats, interval: Option<Interval>) -> Result<(), GpuError> {
    match interval {
        Some(i) => i
            .check_count(i.count(stats.totals.sim_time_ps))
            .map_err(GpuError::Unsupported),
        None => Ok(()),
    }
}

/// [`run_gpu_placed`] under `limits`: a run cut by `max_cycles` (or `max_warp_insts`)
/// before it finished collects its counters as they stood at the cut (`gpu_tot_sim_cycle`
/// is the cut's cycle,
/// `kernels` lists the launches completed by then) and its stats' `run_limit` says it is
/// partial; one that finished first is the unlimited run's, plus that object. Without
/// limits, exactly [`run_gpu_placed`].
pub fn run_gpu_limited(
    cfg: &GpuConfig,
    trace: &TraceFile,
    threads: usize,
    schedule: impl Into<Schedule>,
    on_progress: Option<&mut dyn FnMut(GpuProgress)>,
    limits: &RunLimits,
) -> Result<(RunStats, WindowStats), GpuError> {
    let schedule = with_groups(cfg, schedule.into(), threads);
    let stop = stop_time(cfg, limits)?;
    if limits.max_warp_insts == Some(0) {
        return Err(GpuError::Unsupported(
            "--max-warp-insts 0: the limit must be at least one instruction".into(),
        ));
    }
    let interval = sample_interval(cfg, limits.sample_every, limits.max_cycles)?;
    let mut sys = build(cfg, trace)?;
    if let Some(i) = interval {
        sys.sample(i);
    }
    let watch = Watch::of(cfg, trace);
    let mut verdict: Option<Stopped> = None;
    let run = if limits.max_warp_insts.is_some() || on_progress.is_some() || watch.is_some() {
        // Paused (every worker waiting) to read the counters: at exact multiples of
        // WARP_INSTS_STEP for the limit and of `watchdog.check_cycles` for the watchdog,
        // at window ends for progress alone.
        let period = cfg.core_period_ps();
        let pauses = match exact_step(limits, &watch, period) {
            Some(step) => (step, Pauses::Exact),
            None => (PROGRESS_STEP_PS, Pauses::WindowEnds),
        };
        let mut report = on_progress;
        let mut dog = watch.clone();
        let mut on_pause = |parts: &[&GpuPartition<'_>], at: Picos| {
            let p = progress_of(parts, at);
            if let Some(r) = report.as_mut() {
                r(p);
            }
            if let Some(d) = dog.as_mut() {
                if let Some(v) = d.check(at / period, watchdog_sample(parts)) {
                    verdict = Some(v);
                    return false;
                }
            }
            !matches!(limits.max_warp_insts, Some(n) if p.warp_insts >= n)
        };
        run_threads_stepped(
            sys.partitions,
            sys.ports,
            sys.links,
            threads,
            schedule,
            pauses,
            stop,
            &mut on_pause,
        )
    } else {
        run_threads_until(
            sys.partitions,
            sys.ports,
            sys.links,
            threads,
            schedule,
            stop,
        )
        .map(|(p, w, finished)| (p, w, (!finished).then_some(stop)))
    };
    let (parts, w, cut) = run.map_err(gpu_error)?;
    let finished = cut.is_none();
    let mut stats = match cut {
        None => {
            let stats = collect_stats(cfg, parts);
            check_retired(trace, &stats)?;
            stats
        }
        Some(at) => collect_stats_at(cfg, parts, at),
    };
    check_samples(&stats, interval)?;
    mark_limits(&mut stats, trace, limits, finished);
    finish_sync(trace, &mut stats, finished, cfg.watchdog.check_lock_holders)?;
    if let Some(v) = verdict {
        stats.watchdog = Some(watchdog_report(trace, &stats, v));
    }
    Ok((stats, w))
}

/// The watchdog of a run (`crate::watchdog` of tessera-partitions): on for a trace with
/// spin regions, whose warps may never finish; a trace without has finite streams only.
#[derive(Clone, Debug)]
struct Watch {
    check_cycles: u64,
    dog: Watchdog,
}

/// Why the watchdog stopped a run: its verdict, the check's cycle, the cycle from which
/// nothing progressed, and the unfinished warps then.
#[derive(Clone, Copy, Debug)]
struct Stopped {
    verdict: Verdict,
    cycle: u64,
    since: u64,
    live_warps: u64,
}

impl Watch {
    fn of(cfg: &GpuConfig, trace: &TraceFile) -> Option<Watch> {
        if !trace.kernels().iter().any(|k| !k.spin_regions.is_empty()) {
            return None;
        }
        let w = &cfg.watchdog;
        let check_cycles = w.check_cycles.max(1);
        Some(Watch {
            check_cycles,
            dog: Watchdog::new(w.livelock_cycles),
        })
    }

    /// The check at core cycle `cycle` (a pause: only multiples of `check_cycles` count).
    fn check(&mut self, cycle: u64, sample: WatchdogSample) -> Option<Stopped> {
        if !cycle.is_multiple_of(self.check_cycles) {
            return None;
        }
        let verdict = self.dog.check(cycle, sample)?;
        Some(Stopped {
            verdict,
            cycle,
            since: self.dog.since(),
            live_warps: sample.live_warps,
        })
    }
}

/// The step of the exact pauses a run needs (windows cut there, so that a decision made
/// at a pause is the same for any threads, ranks and cuts): multiples of
/// [`WARP_INSTS_STEP`] core cycles for `max_warp_insts`, of `watchdog.check_cycles` for the
/// watchdog, both when both; `None` when neither (progress alone pauses at window ends).
fn exact_step(limits: &RunLimits, watch: &Option<Watch>, period: Picos) -> Option<Picos> {
    let cycles = match (limits.max_warp_insts, watch) {
        (Some(_), Some(w)) => gcd(WARP_INSTS_STEP, w.check_cycles),
        (Some(_), None) => WARP_INSTS_STEP,
        (None, Some(w)) => w.check_cycles,
        (None, None) => return None,
    };
    Some(cycles.saturating_mul(period))
}

/// The watchdog's view of `parts` (summed).
fn watchdog_sample(parts: &[&GpuPartition<'_>]) -> WatchdogSample {
    let mut sample = WatchdogSample::default();
    for part in parts {
        sample.add(&part.watchdog_sample());
    }
    sample
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}

/// The stats' `watchdog` object of a run it stopped: the verdict, the unfinished warps
/// (the first [`MAX_REPORTED_WARPS`], by SM) and the sync words that are not at their
/// initial values.
fn watchdog_report(trace: &TraceFile, stats: &RunStats, s: Stopped) -> WatchdogReport {
    let declared = &trace.index().sync_words;
    let mut sync_words = Vec::new();
    if let Some(sync) = &stats.sync {
        for &(addr, value) in &sync.values {
            let Some(w) = declared.iter().find(|w| w.contains(addr)) else {
                continue;
            };
            let i = ((addr - w.addr) / 4) as usize;
            if w.init.get(i) != Some(&value) && sync_words.len() < MAX_REPORTED_WARPS {
                sync_words.push(SyncWordValue {
                    name: format!("{}[{i}]", w.name),
                    addr,
                    value: value as u64,
                });
            }
        }
    }
    WatchdogReport {
        verdict: s.verdict.name().into(),
        cycle: s.cycle,
        no_progress_since_cycle: s.since,
        warps: stats
            .waiting
            .iter()
            .take(MAX_REPORTED_WARPS)
            .cloned()
            .collect(),
        live_warps: s.live_warps,
        sync_words,
    }
}

/// `schedule` with its partitions grouped (unless groups are given) for `workers`
/// workers: by GPU when there are at least as many GPUs as workers, else by chiplet when
/// a chiplet is cut into several partitions and there are as many chiplets; the coarsest
/// grouping that can still occupy every worker keeps the most tightly coupled partitions
/// (whose links are the fastest) on one worker. A GPU's, and a chiplet's, partitions are
/// numbered together.
pub fn with_groups(cfg: &GpuConfig, mut schedule: Schedule, workers: usize) -> Schedule {
    if schedule.groups.is_some() {
        return schedule;
    }
    let n = cfg.partition_count() as usize;
    let gpus = (cfg.system.gpus as usize).max(1);
    let chiplets = gpus * (cfg.chiplets as usize).max(1);
    let size = if gpus >= workers {
        n / gpus
    } else if chiplets >= workers && n > chiplets {
        n / chiplets
    } else {
        0
    };
    if size > 1 {
        schedule.groups = Some((0..n).map(|p| p / size).collect());
    }
    schedule
}

/// The simulated time `limits.max_cycles` stops at (`Picos::MAX`: none).
fn stop_time(cfg: &GpuConfig, limits: &RunLimits) -> Result<Picos, GpuError> {
    match limits.max_cycles {
        None => Ok(Picos::MAX),
        Some(0) => Err(GpuError::Unsupported(
            "--max-cycles 0: the limit must be at least one cycle".into(),
        )),
        Some(n) => n.checked_mul(cfg.core_period_ps()).ok_or_else(|| {
            GpuError::Unsupported(format!(
                "--max-cycles {n}: beyond the simulated time a run can reach"
            ))
        }),
    }
}

/// Records `limits` in the stats' `run_limit` (nothing without limits): `finished` says
/// whether the run completed or was cut.
pub fn mark_limits(stats: &mut RunStats, trace: &TraceFile, limits: &RunLimits, finished: bool) {
    if limits.is_none() {
        return;
    }
    stats.run_limit = Some(RunLimit {
        partial: !finished,
        max_cycles: limits.max_cycles,
        max_warp_insts: limits.max_warp_insts,
        kernels: limits.kernels.clone(),
        kernel_launches: trace.launch_count() as u64,
        kernels_completed: stats.kernels.len() as u64,
    });
}

/// The run retired, class by class, the instructions the trace's index counts. They differ
/// when a kernel's opcode table was edited (a class flipped, the class mix left alone):
/// `open` cannot see that without decoding every chunk, and the run would time the
/// instructions as another class. An error rather than results of another program.
fn check_retired(trace: &TraceFile, stats: &RunStats) -> Result<(), GpuError> {
    use tessera_traces::OpClass;
    // Every kernel of the trace, each once; with `--kernels`, the kernels the selected
    // launches run. (Without a selection, a kernel that no command launches, a damaged
    // command list, leaves its instructions unretired and is refused here.)
    let launched: Vec<&tessera_traces::KernelMeta> = if trace.launches_dropped() {
        trace
            .commands()
            .iter()
            .filter_map(|c| match c {
                tessera_traces::Command::KernelLaunch { kernel, .. } => {
                    trace.kernels().get(*kernel as usize)
                }
                _ => None,
            })
            .collect()
    } else {
        let mut run = vec![false; trace.kernels().len()];
        for c in trace.commands() {
            if let tessera_traces::Command::KernelLaunch { kernel, .. } = c {
                if let Some(r) = run.get_mut(*kernel as usize) {
                    *r = true;
                }
            }
        }
        if let Some(k) = run.iter().position(|&r| !r) {
            return Err(GpuError::Trace(tessera_traces::TraceError::Corrupt {
                path: trace.path().to_path_buf(),
                detail: format!(
                    "kernel {k} ({}) is in the trace but no command launches it",
                    trace.kernels()[k].name
                ),
            }));
        }
        trace.kernels().iter().collect()
    };
    let mut want = [0u64; OpClass::COUNT];
    for k in &launched {
        for (w, n) in want.iter_mut().zip(&k.counts.class_warp_insts) {
            *w += n;
        }
    }
    let mut got = [0u64; OpClass::COUNT];
    for c in &stats.chiplets {
        for (g, n) in got.iter_mut().zip(c.class_warp_insts.0.iter()) {
            *g += n;
        }
    }
    // Spin regions issue their bodies again and pass over tails nobody ran: the trace's
    // own instructions are the rest.
    if let Some(s) = &stats.sync {
        for (g, (r, k)) in got
            .iter_mut()
            .zip(s.replayed_by_class.iter().zip(&s.skipped_by_class))
        {
            *g = *g - (*r).min(*g) + k;
        }
    }
    // Every thread of every CTA exits once: a warp whose EXITs leave lanes running (an
    // edited mask) would otherwise end as if they had.
    let threads: u64 = launched
        .iter()
        .map(|k| k.counts.ctas.saturating_mul(k.threads_per_cta()))
        .sum();
    let exited: u64 = stats.chiplets.iter().map(|c| c.exited_lanes).sum();
    if exited != threads {
        return Err(GpuError::Trace(tessera_traces::TraceError::Corrupt {
            path: trace.path().to_path_buf(),
            detail: format!(
                "the kernels' CTAs hold {threads} threads, their EXITs ended {exited}: a \
                 warp's EXIT masks leave lanes running or exit one twice (`tessera trace \
                 verify` names the warp)"
            ),
        }));
    }
    match (0..OpClass::COUNT).find(|&c| want[c] != got[c]) {
        None => Ok(()),
        Some(c) => Err(GpuError::Trace(tessera_traces::TraceError::Corrupt {
            path: trace.path().to_path_buf(),
            detail: format!(
                "the index counts {} `{}` instructions, the run retired {}: a kernel's opcode \
                 table and its class mix disagree (`tessera trace verify` names the kernel)",
                want[c],
                OpClass::ALL[c].name(),
                got[c]
            ),
        })),
    }
}

/// The stats' `sync` object from the trace's sync words and what the homes left in them
/// (none for a trace without sync words or spin regions); a finished run whose values
/// differ from the recorder's is an error naming the words.
pub fn finish_sync(
    trace: &TraceFile,
    stats: &mut RunStats,
    finished: bool,
    check_holders: bool,
) -> Result<(), GpuError> {
    let declared = &trace.index().sync_words;
    let regions = trace.kernels().iter().any(|k| !k.spin_regions.is_empty());
    if declared.is_empty() && !regions {
        stats.sync = None;
        return Ok(());
    }
    let s = stats.sync.get_or_insert_with(Default::default);
    let mut errors = Vec::new();
    s.words.clear();
    for w in declared {
        let (mut changed, mut sum, mut bad) = (0u64, 0u64, Vec::new());
        for (i, &init) in w.init.iter().enumerate() {
            let addr = w.addr + 4 * i as u64;
            let v = match s.values.binary_search_by_key(&addr, |&(a, _)| a) {
                Ok(k) => s.values[k].1,
                Err(_) => init,
            };
            changed += u64::from(v != init);
            sum = sum.wrapping_add(v as u64);
            if let Some(&e) = w.expect.get(i) {
                if e != v {
                    bad.push((i, v, e));
                }
            }
        }
        let check = if !finished {
            "partial"
        } else if w.expect.is_empty() {
            "unchecked"
        } else if bad.is_empty() {
            "ok"
        } else {
            "mismatch"
        };
        if finished && !bad.is_empty() {
            let (i, v, e) = bad[0];
            errors.push(format!(
                "sync words {:?} at {:#x}: word {i} is {v} at the end of the run, the recorder's \
                 run left {e} ({} of {} words differ)",
                w.name,
                w.addr,
                bad.len(),
                w.init.len()
            ));
        }
        s.words.push(tessera_partitions::stats::SyncWordsEnd {
            name: w.name.clone(),
            addr: w.addr,
            words: w.init.len() as u64,
            changed,
            sum,
            check: check.into(),
        });
    }
    let holds = std::mem::take(&mut s.holds);
    if check_holders {
        s.lock_holds = Some(holds.len() as u64);
        if let Some(e) = overlapping_holders(holds) {
            return Err(GpuError::SyncCheck(format!(
                "{}: {e}",
                trace.path().display()
            )));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(GpuError::SyncCheck(format!(
            "{}: the simulated sync values differ from the recorded program's: {}",
            trace.path().display(),
            errors.join("; ")
        )))
    }
}

/// The first two holds of one lock word that overlap in simulated time
/// (`watchdog.check_lock_holders`), as an error: a lane took the word while another still
/// held it.
fn overlapping_holders(mut holds: Vec<tessera_partitions::sm::LockHold>) -> Option<String> {
    holds.sort_unstable();
    // The hold of each word that ends last so far.
    let mut last: Option<tessera_partitions::sm::LockHold> = None;
    for h in holds {
        match last {
            Some(p) if p.addr == h.addr && h.from < p.to => {
                let who = |x: &tessera_partitions::sm::LockHold| {
                    format!(
                        "CTA ({},{},{}) warp {} lane {}",
                        x.cta[0], x.cta[1], x.cta[2], x.warp, x.lane
                    )
                };
                return Some(format!(
                    "lock word {:#x}: {} held it from cycle {} to {}, and {} took it at cycle {}: \
                     two holders overlap",
                    h.addr,
                    who(&p),
                    p.from,
                    p.to,
                    who(&h),
                    h.from
                ));
            }
            Some(p) if p.addr == h.addr && p.to >= h.to => {}
            _ => last = Some(h),
        }
    }
    None
}

/// An engine error as the GPU model's: a model error is the model's own
/// ([`GpuError`]), anything else the engine's, as text.
fn gpu_error(e: EngineError) -> GpuError {
    match e {
        EngineError::Model { source, .. } => match source.downcast::<GpuError>() {
            Ok(g) => *g,
            Err(other) => GpuError::Engine(other.to_string()),
        },
        e => GpuError::Engine(e.to_string()),
    }
}

/// The progress of the whole system, read from every partition while the engine pauses
/// at `at`.
fn progress_of(parts: &[&GpuPartition<'_>], at: Picos) -> GpuProgress {
    let mut p = GpuProgress {
        sim_ps: at,
        warp_insts: 0,
        ctas_done: 0,
        kernels_done: 0,
        kernels: 0,
    };
    for part in parts {
        let (w, c, k) = part.progress();
        p.warp_insts += w;
        p.ctas_done += c;
        if let Some((d, n)) = k {
            (p.kernels_done, p.kernels) = (d, n);
        }
    }
    p
}

/// Every rank's workers' host times, in rank order, on rank 0 (`MPI_Gatherv`); the
/// others get their own back.
#[cfg(feature = "mpi")]
fn gather_worker_times(
    world: &mpi::topology::SimpleCommunicator,
    mine: &[tessera_cluster::WorkerTime],
) -> Vec<tessera_cluster::WorkerTime> {
    use tessera_cluster::{WorkerTime, BUSY_BUCKETS};
    const WORDS: usize = 2 + BUSY_BUCKETS;
    let mut flat = Vec::with_capacity(mine.len() * WORDS);
    for w in mine {
        flat.push(w.busy_ns);
        flat.push(w.wait_ns);
        flat.extend_from_slice(&w.busy_hist);
    }
    let Some((all, _)) = gather_to_root(world, &flat) else {
        return mine.to_vec();
    };
    all.chunks_exact(WORDS)
        .map(|c| {
            let mut w = WorkerTime {
                busy_ns: c[0],
                wait_ns: c[1],
                ..WorkerTime::default()
            };
            w.busy_hist.copy_from_slice(&c[2..]);
            w
        })
        .collect()
}

/// Every rank's `mine` concatenated in rank order on rank 0 (`MPI_Gather` of the lengths,
/// `MPI_Gatherv` of the data), with each rank's length; `None` on the other ranks.
#[cfg(feature = "mpi")]
fn gather_to_root<T>(
    world: &mpi::topology::SimpleCommunicator,
    mine: &[T],
) -> Option<(Vec<T>, Vec<usize>)>
where
    T: mpi::datatype::Equivalence + Default + Clone,
{
    use mpi::collective::Root;
    use mpi::topology::Communicator;
    let root = world.process_at_rank(0);
    let len = mine.len() as i32;
    if world.rank() != 0 {
        root.gather_into(&len);
        root.gather_varcount_into(mine);
        return None;
    }
    let mut lens = vec![0i32; world.size() as usize];
    root.gather_into_root(&len, &mut lens[..]);
    let mut displs = Vec::with_capacity(lens.len());
    let mut total = 0i32;
    for &l in &lens {
        displs.push(total);
        total += l;
    }
    let mut all = vec![T::default(); total.max(0) as usize];
    {
        let mut buf = mpi::datatype::PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
        root.gather_varcount_into_root(mine, &mut buf);
    }
    Some((all, lens.iter().map(|&l| l.max(0) as usize).collect()))
}

/// What [`run_gpu_mpi`] returns on each rank: the stats on rank 0, nothing elsewhere.
#[cfg(feature = "mpi")]
pub type MpiRun = Option<(RunStats, WindowStats)>;

/// The GPU of `cfg` running `trace` on the ranks of `world` ([`tessera_cluster::MpiTransport`]): the
/// partitions are dealt to ranks as `placement` says ([`tessera_cluster::rank_owners`]; more ranks
/// than partitions is an error), each rank builds and simulates only its own, and at the
/// end every rank summarizes its partitions ([`tessera_partitions::gpu::stats_part`], after
/// agreeing on the run's end) and rank 0 gathers and merges the parts: the same bytes as
/// [`run_gpu`]. Every rank must call this with the same configuration and trace.
///
/// `threads` above 1 deals each rank's partitions to that many worker threads
/// ([`tessera_cluster::mpi::RankThreads`]; the calling thread, which must be the one that initialized
/// MPI, is the rank's worker 0 and the only one calling MPI): ranks × threads, with the
/// same bytes again.
///
/// `limits` as [`run_gpu_limited`]: every rank's engine runs to the `max_cycles` stop
/// (windows cut there, so the state is the same for any ranks), and the parts are then
/// counted at the cut. With one thread per rank the engines pause about every 10
/// simulated microseconds at a window end (every multiple of [`WARP_INSTS_STEP`] cycles,
/// cut there, under `max_warp_insts`) and the ranks sum their counters (`MPI_Allreduce`)
/// for `on_progress` (rank 0's) and the limit; with several, `max_warp_insts` is refused.
///
/// An error comes back on the rank that met it only: the others are still waiting in a
/// collective, so the caller must report it and end the job ([`tessera_cluster::mpi::abort_job`]).
#[cfg(feature = "mpi")]
pub fn run_gpu_mpi(
    cfg: &GpuConfig,
    trace: &TraceFile,
    world: &mpi::topology::SimpleCommunicator,
    (exchange, schedule, threads): (tessera_cluster::mpi::Exchange, Schedule, usize),
    limits: &RunLimits,
    mut on_progress: Option<&mut dyn FnMut(GpuProgress)>,
) -> Result<MpiRun, GpuError> {
    use mpi::collective::{CommunicatorCollectives, SystemOperation};
    use mpi::topology::Communicator;
    use tessera_partitions::gpu::{build_hosted, merge_stats, run_end_ps, stats_part};

    if let (Some(n), true) = (limits.max_warp_insts, threads > 1) {
        return Err(GpuError::Unsupported(format!(
            "--max-warp-insts {n}: not supported under MPI with --threads above 1 (the \
             ranks' worker threads cannot pause together); run one thread per rank"
        )));
    }
    let stop = stop_time(cfg, limits)?;
    let parts = cfg.partition_count() as usize;
    let rank = world.rank() as usize;
    let schedule = with_groups(cfg, schedule, world.size() as usize);
    let owners = tessera_cluster::mpi::rank_owners_with(
        parts,
        world.size() as usize,
        schedule.placement,
        schedule.hints(),
    )
    .map_err(gpu_error)?;
    let hosted: Vec<usize> = (0..parts).filter(|&p| owners[p] == rank).collect();
    let interval = sample_interval(cfg, limits.sample_every, limits.max_cycles)?;
    let mut sys = build_hosted(cfg, trace, &hosted)?;
    if let Some(i) = interval {
        sys.sample(i);
    }
    let routing = Routing::new(parts, sys.ports).map_err(gpu_error)?;
    let lookahead = schedule
        .windows
        .lookahead(&routing, sys.links.iter().cloned())
        .map_err(gpu_error)?;
    let transport = tessera_cluster::mpi::MpiTransport::new(
        world.duplicate(),
        owners,
        exchange,
        &routing,
        &sys.links,
    )
    .map_err(gpu_error)?;
    // Every rank takes the same branch (they all pause together, or none does).
    let watch = Watch::of(cfg, trace);
    if watch.is_some() && threads > 1 {
        return Err(GpuError::Unsupported(
            "the trace has spin regions, whose progress watchdog pauses every rank at the \
             same simulated times: run one thread per rank under MPI"
                .into(),
        ));
    }
    let mut verdict: Option<Stopped> = None;
    let (partitions, windows, cut) = if threads <= 1 {
        let least = lookahead.min();
        let mut engine =
            Engine::new(lookahead, routing, sys.partitions, transport).map_err(gpu_error)?;
        let period = cfg.core_period_ps();
        let pauses = match exact_step(limits, &watch, period) {
            Some(step) => (step, true),
            None => (PROGRESS_STEP_PS, least > PROGRESS_STEP_PS),
        };
        let mut dog = watch.clone();
        let mut on_pause = |engine: &Engine<GpuPartition<'_>, _>, at: Picos| -> bool {
            let parts: Vec<&GpuPartition<'_>> = engine.partitions().iter().collect();
            let p = progress_of(&parts, at);
            let w = watchdog_sample(&parts).words();
            let mine = [
                p.warp_insts,
                p.ctas_done,
                p.kernels_done as u64,
                p.kernels as u64,
                w[0],
                w[1],
                w[2],
                w[3],
            ];
            // The host's rank alone counts kernels: the sums are the whole GPU's.
            let mut all = [0u64; 8];
            world.all_reduce_into(&mine[..], &mut all[..], SystemOperation::sum());
            let p = GpuProgress {
                sim_ps: at,
                warp_insts: all[0],
                ctas_done: all[1],
                kernels_done: all[2] as usize,
                kernels: all[3] as usize,
            };
            if let Some(r) = on_progress.as_mut() {
                r(p);
            }
            if let Some(d) = dog.as_mut() {
                let sample = WatchdogSample::from_words([all[4], all[5], all[6], all[7]]);
                if let Some(v) = d.check(at / period, sample) {
                    verdict = Some(v);
                    return false;
                }
            }
            !matches!(limits.max_warp_insts, Some(n) if p.warp_insts >= n)
        };
        let cut = tessera_cluster::run_engine_stepped(&mut engine, pauses, stop, &mut on_pause)
            .map_err(gpu_error)?;
        let windows = engine.stats().clone();
        (engine.into_partitions(), windows, cut)
    } else if hosted.len() <= 1 {
        let mut engine =
            Engine::new(lookahead, routing, sys.partitions, transport).map_err(gpu_error)?;
        let finished = engine.run_to(stop).map_err(gpu_error)?;
        let windows = engine.stats().clone();
        (
            engine.into_partitions(),
            windows,
            (!finished).then_some(stop),
        )
    } else {
        tessera_cluster::run_rank_threads(
            lookahead,
            routing,
            sys.partitions,
            parts,
            &hosted,
            threads,
            transport,
            stop,
        )
        .map(|(p, w, finished)| (p, w, (!finished).then_some(stop)))
        .map_err(gpu_error)?
    };
    let finished = cut.is_none();
    // Every rank's engine agrees on `finished` (the reduced next event), so all or none
    // make this collective.
    let end = if finished {
        let local_end = run_end_ps(&partitions);
        let mut end = 0u64;
        world.all_reduce_into(&local_end, &mut end, SystemOperation::max());
        end
    } else {
        cut.unwrap_or(stop)
    };
    let mut windows = windows;
    windows.workers = gather_worker_times(world, &windows.workers);
    let mine = std::mem::take(&mut windows.partition_busy_ns);
    windows.partition_busy_ns = vec![0; mine.len()];
    world.all_reduce_into(
        &mine[..],
        &mut windows.partition_busy_ns[..],
        SystemOperation::sum(),
    );
    let part = stats_part(cfg, partitions, end);
    let bytes = serde_json::to_vec(&part)
        .map_err(|e| GpuError::Engine(format!("cannot encode the stats of rank {rank}: {e}")))?;
    let Some((all, lens)) = gather_to_root(world, &bytes) else {
        return Ok(None);
    };
    let mut parts_in = Vec::with_capacity(lens.len());
    let mut at = 0usize;
    for (r, &l) in lens.iter().enumerate() {
        let chunk = &all[at..at + l];
        at += l;
        let p = serde_json::from_slice(chunk)
            .map_err(|e| GpuError::Engine(format!("the stats of rank {r} do not decode: {e}")))?;
        parts_in.push(p);
    }
    let mut stats = merge_stats(cfg, parts_in);
    if finished {
        check_retired(trace, &stats)?;
    }
    check_samples(&stats, interval)?;
    mark_limits(&mut stats, trace, limits, finished);
    finish_sync(trace, &mut stats, finished, cfg.watchdog.check_lock_holders)?;
    if let Some(v) = verdict {
        stats.watchdog = Some(watchdog_report(trace, &stats, v));
    }
    Ok(Some((stats, windows)))
}

#[cfg(test)]
mod holder_tests {
    use super::overlapping_holders;
    use tessera_partitions::sm::LockHold;

    fn hold(addr: u64, from: u64, to: u64, warp: u32) -> LockHold {
        LockHold {
            addr,
            from,
            to,
            cta: [0, 0, 0],
            warp,
            lane: 0,
        }
    }

    /// Holds one after the other, or of different words, pass; a hold that starts before
    /// the previous holder's release is reported with both holders, also when a short hold
    /// lies inside a long one.
    #[test]
    fn overlapping_holds_are_found() {
        assert_eq!(overlapping_holders(vec![]), None);
        let fine = vec![hold(8, 10, 20, 0), hold(8, 20, 30, 1), hold(12, 15, 25, 2)];
        assert_eq!(overlapping_holders(fine), None);
        let e = overlapping_holders(vec![hold(8, 20, 30, 1), hold(8, 10, 25, 0)]).unwrap();
        assert!(
            e.contains("lock word 0x8") && e.contains("warp 0") && e.contains("warp 1"),
            "{e}"
        );
        assert!(e.contains("took it at cycle 20"), "{e}");
        let inside = vec![hold(8, 10, 100, 0), hold(8, 20, 30, 1), hold(8, 40, 50, 2)];
        assert!(overlapping_holders(inside).is_some());
    }
}
