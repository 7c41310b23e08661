//! `tessera run`: simulate a trace (or a built-in workload, recorded first) on a GPU
//! configuration.

use crate::outputs;
use crate::provenance::{self, Input, RunInfo};
use anyhow::Result;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_partitions::check::check_trace;
use tessera_partitions::config::GpuConfig;
use tessera_partitions::stats::RunStats;
use tessera_system::{run_gpu_limited, GpuProgress};
use tessera_traces::TraceFile;

/// What a run simulates: a configuration with overrides, and a trace or a built-in
/// workload (shared by `run` and `sweep`).
#[derive(Args)]
#[command(group = clap::ArgGroup::new("input").required(true).multiple(false).args(["trace", "workload"]))]
pub struct SimInput {
    /// The GPU configuration (YAML, e.g. configs/default.yaml).
    #[arg(long)]
    pub config: PathBuf,
    /// The .tst trace to simulate.
    #[arg(long, value_name = "FILE.tst")]
    pub trace: Option<PathBuf>,
    /// A built-in workload (see `tessera trace gen --list`), recorded to a temporary .tst
    /// first.
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
    /// A workload parameter, `key=value` (repeatable; with --workload).
    #[arg(long = "param", short = 'p', value_name = "KEY=VALUE", value_parser = crate::trace_cmd::parse_kv, requires = "workload")]
    pub params: Vec<(String, String)>,
    /// Override one config key, `section.key=value` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = crate::trace_cmd::parse_kv)]
    pub set: Vec<(String, String)>,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub(crate) input: SimInput,
    /// Worker threads: the GPU's partitions are dealt to them (`--placement`) and
    /// simulated in parallel, with byte-identical results for any N. Only a GPU cut into
    /// several partitions can use more than one (`--set partitioning.mode=sm_cluster --set
    /// partitioning.sm_clusters=K`); N above the partition count is clamped to it, so with
    /// one partition more threads cannot help.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) threads: u32,
    /// How the partitions are dealt to the threads (or, under MPI, to the ranks):
    /// `contiguous` blocks (neighbours together, fewer messages between workers),
    /// `round_robin` (spreads partitions busy at the same time, such as GPUs whose kernels
    /// are launched one after another) or `weighted` (by each partition's measured cost:
    /// from a profile of the first `--profile-cycles` on one thread, the placement whose
    /// workers would have waited least for each other in the profile's windows; from
    /// `--weights`, the costliest first to the least loaded worker). Results are the same
    /// bytes either way.
    #[arg(
        long,
        value_name = "contiguous|round_robin|weighted",
        default_value = "contiguous"
    )]
    pub(crate) placement: tessera_cluster::Placement,
    /// With `--placement weighted`: the costs from this stats file of an earlier run of
    /// the same system and partitioning (its `run.engine.partition_busy_s`), instead of a
    /// profile. Required under MPI, where every rank must deal the same way.
    #[arg(long, value_name = "STATS.json")]
    pub(crate) weights: Option<PathBuf>,
    /// With `--placement weighted` and no `--weights`: the core cycles of simulated time
    /// the profile runs (on one thread, before the run) to measure each partition's cost.
    #[arg(long, value_name = "CYCLES", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) profile_cycles: u64,
    /// The engine's windows: `pair` (partition p runs up to the least of
    /// next_q + D(q, p) over the others, D the shortest path of links between them; a
    /// thread or rank advances its own partitions by themselves and meets the others only
    /// at the least D between them) or `global` (every partition runs a window of the
    /// least link latency of the whole system, then all exchange). Results are the same
    /// bytes either way; `pair` meets less often where slow links join fast groups.
    #[arg(long, value_name = "pair|global", default_value = "pair")]
    pub(crate) windows: tessera_cluster::Windows,
    /// Stop the run at this many core cycles of simulated time (`core.clock_hz`): every
    /// event before it is simulated, none after, the same for any threads, placement or
    /// partitioning. The stats are then partial (their `run_limit` says so).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_cycles: Option<u64>,
    /// Stop the run once N warp instructions have issued: at the first multiple of 1000
    /// core cycles at which at least N have, over the whole GPU (checked there so that the
    /// stop is the same for any threads, placement or partitioning; the stats then count
    /// N or a few more). The stats are partial (their `run_limit` says so).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_warp_insts: Option<u64>,
    /// Sample the counters every CYCLES core cycles of simulated time: the stats get a
    /// `timeseries` object (per-interval instructions, IPC, cache and DRAM traffic, CTAs,
    /// per chiplet, SM and link; docs/stats.md), the same bytes for any threads, ranks or
    /// partitioning. At most 1,000,000 intervals.
    #[arg(long, value_name = "CYCLES")]
    pub(crate) sample_every: Option<u64>,
    /// Simulate only these kernel launches of the trace's command list, by rank among its
    /// launches (0 for the first): `2` (one), `0..3` (0, 1 and 2), `0..=2`, `5..` (5 to the
    /// last), `..3`. The other launches are dropped; copies and allocations are kept.
    #[arg(long, value_name = "RANGE", value_parser = parse_kernel_range)]
    pub(crate) kernels: Option<KernelRange>,
    /// Write the stats JSON here (as <FILE>.partial, renamed when complete).
    #[arg(long, value_name = "FILE.json")]
    stats_out: Option<PathBuf>,
    /// Under MPI (`mpirun -np R tessera run ...`): whom each rank exchanges messages with
    /// each window: `all` (MPI_Alltoall + MPI_Alltoallv with every rank) or `linked` (point
    /// to point with the ranks its partitions have modeled links to).
    #[cfg(feature = "mpi")]
    #[arg(long, value_name = "all|linked", default_value = "all")]
    pub(crate) mpi_exchange: tessera_cluster::Exchange,
}

/// A `--kernels` range of launch ranks, as given: the end is open (`5..`) or exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelRange {
    pub start: usize,
    pub end: Option<usize>,
}

impl KernelRange {
    /// The launches of a command list of `launches` it selects, or why none can be.
    pub fn resolve(&self, launches: usize) -> Result<std::ops::Range<usize>> {
        let end = self.end.unwrap_or(launches);
        let shown = match self.end {
            Some(e) => format!("{}..{e}", self.start),
            None => format!("{}..", self.start),
        };
        if end > launches || self.start >= launches {
            anyhow::bail!(
                "--kernels {shown}: the trace launches {launches} kernel(s), ranks 0 to {}",
                launches.saturating_sub(1)
            );
        }
        Ok(self.start..end)
    }
}

/// Parses `--kernels`: `N`, `A..B` (B excluded), `A..=B`, `A..`, `..B`.
pub fn parse_kernel_range(s: &str) -> std::result::Result<KernelRange, String> {
    let num = |t: &str| -> std::result::Result<usize, String> {
        t.trim().parse::<usize>().map_err(|_| {
            format!("`{s}` is not a range of kernel launches: `{t}` is not a launch rank (give N, A..B, A..=B, A.. or ..B)")
        })
    };
    let r = if let Some((a, b)) = s.split_once("..") {
        let start = if a.trim().is_empty() { 0 } else { num(a)? };
        let end = if let Some(b) = b.strip_prefix('=') {
            Some(
                num(b)?
                    .checked_add(1)
                    .ok_or_else(|| format!("`{s}`: too large"))?,
            )
        } else if b.trim().is_empty() {
            None
        } else {
            Some(num(b)?)
        };
        KernelRange { start, end }
    } else {
        let n = num(s)?;
        KernelRange {
            start: n,
            end: Some(n + 1),
        }
    };
    if let Some(e) = r.end {
        if e <= r.start {
            return Err(format!(
                "`{s}` selects no kernel launch (the end is excluded: `{}..{}` runs launch {})",
                r.start,
                r.start + 1,
                r.start
            ));
        }
    }
    Ok(r)
}

/// A temporary file removed when dropped, or when a signal ends the run (it and the
/// recorder's `.partial` file).
struct TempTrace {
    path: PathBuf,
    _pending: [crate::cleanup::Pending; 2],
}

impl TempTrace {
    fn new(p: PathBuf) -> TempTrace {
        let guards = [
            crate::cleanup::pending(&p),
            crate::cleanup::pending(&outputs::partial(&p)),
        ];
        TempTrace {
            path: p,
            _pending: guards,
        }
    }
}

impl Drop for TempTrace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A run's inputs, loaded and checked: the configuration, the trace (and the temporary
/// file of a recorded workload, removed when this is dropped) and a label for messages.
pub(crate) struct Setup {
    pub cfg: GpuConfig,
    pub trace: TraceFile,
    pub label: String,
    /// A recorded workload's description, every parameter included.
    pub generator: Option<String>,
    /// The run's limits (`--max-cycles`, `--kernels` resolved against the trace).
    pub limits: tessera_system::RunLimits,
    _temp: Option<TempTrace>,
}

/// Loads the configuration, records the workload if one is named, opens and checks the
/// trace.
pub(crate) fn setup(a: &RunArgs, quiet: bool) -> Result<Setup> {
    let cfg = GpuConfig::load(&a.input.config, &a.input.set)?;
    if let (Some(out), false) = (&a.stats_out, quiet) {
        // Found now rather than after a long run (the writer is this process: a single
        // run, or MPI's rank 0, the one not quiet).
        outputs::check_dir_of(out, "stats")?;
        let mut inputs: Vec<&Path> = vec![&a.input.config];
        inputs.extend(a.input.trace.as_deref());
        outputs::refuse_input(out, &inputs)?;
        // Writable? Found now, not after the run: the file is created and removed.
        let part = outputs::partial(out);
        std::fs::File::create(&part)
            .and_then(|_| std::fs::remove_file(&part))
            .map_err(|e| anyhow::anyhow!("{}: cannot write the stats there: {e}", out.display()))?;
    }
    let mut temp = None;
    let mut generator = None;
    let trace_path = match (&a.input.trace, &a.input.workload) {
        (Some(t), _) => t.clone(),
        (None, Some(w)) => {
            let p = std::env::temp_dir().join(format!(
                "tessera-run-{}-{}.tst",
                std::process::id(),
                w.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
            ));
            let guard = TempTrace::new(p.clone());
            let t0 = Instant::now();
            let rep = tessera_frontend::workloads::generate(w, &a.input.params, 80, &p)?;
            if !quiet {
                eprintln!(
                    "recorded {}: {} ({} warp instructions) in {:.2} s",
                    rep.generator,
                    rep.summary,
                    rep.stats.warp_insts,
                    t0.elapsed().as_secs_f64()
                );
            }
            temp = Some(guard);
            generator = Some(rep.generator);
            p
        }
        (None, None) => anyhow::bail!("give --trace FILE.tst or --workload NAME"),
    };
    let label = match &a.input.workload {
        Some(w) if a.input.trace.is_none() => format!("workload {w}"),
        _ => trace_path.display().to_string(),
    };
    let mut trace = TraceFile::open(&trace_path)?;
    tessera_system::sample_interval(&cfg, a.sample_every, a.max_cycles)?;
    let mut limits = tessera_system::RunLimits {
        max_cycles: a.max_cycles,
        max_warp_insts: a.max_warp_insts,
        kernels: None,
        sample_every: a.sample_every,
    };
    if let Some(k) = &a.kernels {
        let keep = k
            .resolve(trace.launch_count())
            .map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        limits.kernels = Some(format!("{}..{}", keep.start, keep.end));
        trace.keep_launches(keep);
    }
    check_trace(&cfg, &trace).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
    Ok(Setup {
        cfg,
        trace,
        label,
        generator,
        limits,
        _temp: temp,
    })
}

pub fn run(a: RunArgs) -> Result<()> {
    match crate::mpi_cmd::launched_ranks() {
        Some(ranks) => crate::mpi_cmd::run(a, ranks),
        None => run_local(a),
    }
}

/// A run in this process, on `--threads` threads.
pub(crate) fn run_local(a: RunArgs) -> Result<()> {
    let s = setup(&a, false)?;
    let (cfg, trace, label) = (&s.cfg, &s.trace, &s.label);
    let t0 = Instant::now();
    let parts = cfg.partition_count() as usize;
    let threads = (a.threads as usize).min(parts.max(1));
    if threads < a.threads as usize {
        eprintln!(
            "note: --threads {} but the GPU is {parts} partition(s): running {threads} thread(s)",
            a.threads
        );
    }
    // Progress (crate::progress): the share of the trace's CTAs completed, read while the
    // engine pauses about every 10 simulated microseconds (at window ends, every worker
    // waiting: the windows are those of a run without progress).
    let mut bar = crate::progress::RunBar::new(trace, t0);
    let mut show = |p: GpuProgress| bar.report(p);
    let report: Option<&mut dyn FnMut(GpuProgress)> =
        crate::progress::enabled().then_some(&mut show);
    let costs = placement_costs(&a, &s, threads)?;
    let schedule = tessera_cluster::Schedule {
        placement: a.placement,
        windows: a.windows,
        costs: costs.totals,
        window_costs: costs.windows,
        ..Default::default()
    };
    let res = run_gpu_limited(cfg, trace, threads, schedule, report, &s.limits);
    bar.finish(res.as_ref().ok().map(|(st, _)| st.totals.ctas));
    let (stats, windows) = res.map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
    let how = How {
        threads,
        ranks: 1,
        mpi_exchange: None,
        costs_from: costs.from.as_deref(),
    };
    report_run(&a, &s, &stats, &windows, t0, &how)
}

/// What a weighted placement deals by ([`placement_costs`]).
#[derive(Default)]
pub(crate) struct PlacementCosts {
    /// Each partition's total cost.
    pub totals: Option<Vec<u64>>,
    /// A profile's cost of each partition in each of its windows.
    pub windows: Option<Vec<u32>>,
    /// Where they came from, for the stats' `run.placement_costs`.
    pub from: Option<String>,
}

/// The cost of every partition for `--placement weighted` and where it came from (none
/// for the other placements, or one worker): `--weights`' file (totals), or a profile of
/// the first `--profile-cycles` cycles on one thread with global windows (the cost of
/// every partition in every window: the placement then shortens the profile's critical
/// path, [`tessera_cluster::deal_by_windows`]).
pub(crate) fn placement_costs(a: &RunArgs, s: &Setup, workers: usize) -> Result<PlacementCosts> {
    if a.placement != tessera_cluster::Placement::Weighted {
        if let Some(w) = &a.weights {
            anyhow::bail!(
                "--weights {}: only a weighted placement reads costs (add --placement \
                 weighted)",
                w.display()
            );
        }
        return Ok(PlacementCosts::default());
    }
    let parts = s.cfg.partition_count() as usize;
    if let Some(path) = &a.weights {
        return Ok(PlacementCosts {
            totals: Some(costs_of_file(path, parts)?),
            windows: None,
            from: Some(path.display().to_string()),
        });
    }
    if workers <= 1 {
        // Nothing to deal: every partition on the one worker.
        return Ok(PlacementCosts {
            totals: Some(vec![1; parts]),
            windows: None,
            from: Some("one worker: none needed".into()),
        });
    }
    let t = Instant::now();
    let limits = tessera_system::RunLimits {
        max_cycles: Some(a.profile_cycles),
        ..Default::default()
    };
    let profile = tessera_cluster::Schedule {
        windows: tessera_cluster::Windows::Global,
        record_window_costs: true,
        ..Default::default()
    };
    let (_, w) = run_gpu_limited(&s.cfg, &s.trace, 1, profile, None, &limits)
        .map_err(|e| anyhow::anyhow!("{}: the profile for --placement weighted: {e}", s.label))?;
    // A partition that did nothing in the profile still costs something to host.
    let costs: Vec<u64> = w.partition_busy_ns.iter().map(|&n| n.max(1)).collect();
    eprintln!(
        "placement: weighted by a profile of {} cycles ({} windows) on one thread ({:.2} s): \
         partition costs {:?} ms",
        a.profile_cycles,
        w.windows,
        t.elapsed().as_secs_f64(),
        costs
            .iter()
            .map(|&n| (n as f64 / 1e6 * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    Ok(PlacementCosts {
        totals: Some(costs),
        windows: (!w.window_costs.is_empty()).then_some(w.window_costs),
        from: Some(format!("profile of {} cycles", a.profile_cycles)),
    })
}

/// The partitions' costs in a stats file (`run.engine.partition_busy_s`, nanoseconds
/// here), which must have `parts` of them.
fn costs_of_file(path: &Path, parts: usize) -> Result<Vec<u64>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--weights {}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("--weights {}: not a stats file: {e}", path.display()))?;
    let Some(list) = v
        .pointer("/run/engine/partition_busy_s")
        .and_then(|x| x.as_array())
    else {
        anyhow::bail!(
            "--weights {}: no run.engine.partition_busy_s (a stats file written by \
             `tessera run --stats-out` of this version)",
            path.display()
        );
    };
    if list.len() != parts {
        anyhow::bail!(
            "--weights {}: run.engine.partition_busy_s has {} partitions, this run has \
             {parts} (the same configuration and partitioning are needed)",
            path.display(),
            list.len()
        );
    }
    list.iter()
        .enumerate()
        .map(|(i, x)| match x.as_f64() {
            Some(s) if s.is_finite() && s >= 0.0 => Ok(((s * 1e9) as u64).max(1)),
            _ => anyhow::bail!(
                "--weights {}: run.engine.partition_busy_s[{i}] is {x}, expected seconds \
                 (a number, 0 or more)",
                path.display()
            ),
        })
        .collect()
}

/// How a run was executed, for the summary and the stats file's `run` object.
pub(crate) struct How<'a> {
    pub threads: usize,
    pub ranks: usize,
    pub mpi_exchange: Option<&'a str>,
    /// Where a weighted placement's costs came from.
    pub costs_from: Option<&'a str>,
}

/// What every finished run reports: the stats file, the summary on stdout, the rate and the
/// engine's windows on stderr.
pub(crate) fn report_run(
    a: &RunArgs,
    setup: &Setup,
    stats: &RunStats,
    windows: &tessera_cluster::WindowStats,
    t0: Instant,
    how: &How<'_>,
) -> Result<()> {
    let secs = t0.elapsed().as_secs_f64();
    let cfg = &setup.cfg;
    if let Some(out) = &a.stats_out {
        let input = match (&a.input.workload, &setup.generator) {
            (Some(name), Some(generator)) => Input::Workload {
                name,
                params: &a.input.params,
                generator,
            },
            _ => Input::Trace {
                path: setup.trace.path(),
            },
        };
        let placement = a.placement.name();
        let info = RunInfo {
            threads: how.threads,
            ranks: how.ranks,
            placement,
            windows: a.windows.name(),
            engine: windows,
            costs_from: how.costs_from,
            mpi_exchange: how.mpi_exchange,
            wall_s: secs,
        };
        let v = provenance::stats_value(
            stats,
            cfg,
            &a.input.config,
            &a.input.set,
            &input,
            &setup.trace,
            &info,
        )?;
        outputs::write_atomic(out, provenance::pretty(&v)?.as_bytes())?;
    }
    let on = if how.ranks > 1 || how.mpi_exchange.is_some() {
        format!(
            "{} mpi rank(s) x {} thread(s), {} exchange",
            how.ranks,
            how.threads,
            how.mpi_exchange.unwrap_or("all")
        )
    } else {
        format!("{} thread(s)", how.threads)
    };
    summary(cfg, stats);
    let t = &stats.totals;
    eprintln!(
        "simulated in {secs:.3} s on {on}: {:.2} M warp instructions/s, {:.2} M cycles/s{}",
        t.warp_insts as f64 / 1e6 / secs.max(1e-9),
        t.gpu_tot_sim_cycle as f64 / 1e6 / secs.max(1e-9),
        provenance::peak_rss_note()
    );
    let parts = cfg.partition_count();
    if parts > 1 {
        // The engine's side of the run: how often the partitions synchronized.
        let imbalance = match (how.threads * how.ranks > 1, windows.imbalance()) {
            (true, Some(x)) => format!(", imbalance {x:.2}"),
            _ => String::new(),
        };
        eprintln!(
            "engine: {parts} partitions, {} windows ({}), {} local sub-windows on worker 0, \
             {} messages between partitions{imbalance}",
            windows.windows,
            a.windows.name(),
            windows.sub_windows,
            windows.messages
        );
    }
    if let Some(w) = &stats.watchdog {
        report_watchdog(w);
        return Err(crate::Exit(WATCHDOG_EXIT).into());
    }
    Ok(())
}

/// The exit status of a run the progress watchdog stopped (a deadlock or livelock in the
/// simulated system; its stats file is written, with the `watchdog` object): distinct from
/// 1, an error.
pub(crate) const WATCHDOG_EXIT: u8 = 3;

/// The watchdog's verdict on stderr: kind, cycle, the waiting warps and sync words.
fn report_watchdog(w: &tessera_partitions::watchdog::WatchdogReport) {
    let kind = &w.verdict;
    eprintln!(
        "watchdog: {kind} at cycle {}: no progress since cycle {}; {} warp(s) unfinished",
        w.cycle, w.no_progress_since_cycle, w.live_warps
    );
    for x in w.warps.iter().take(16) {
        let at = match &x.spin {
            Some(s) => format!(
                ", spinning in the region at pc {:#x} ({}) for {} round(s), lanes {:#x}, last values {:?}",
                s.region_pc, s.label, s.rounds, s.lane_mask, s.values
            ),
            None => String::new(),
        };
        eprintln!(
            "  SM {} kernel {} CTA ({},{},{}) warp {}: {} at pc {:#x}{at}",
            x.sm, x.kernel, x.cta[0], x.cta[1], x.cta[2], x.warp, x.state, x.pc
        );
    }
    if w.warps.len() > 16 {
        eprintln!(
            "  ... {} more in the stats file's `watchdog.warps`",
            w.warps.len() - 16
        );
    }
    for s in &w.sync_words {
        eprintln!("  sync word {} at {:#x} = {}", s.name, s.addr, s.value);
    }
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

fn summary(cfg: &GpuConfig, s: &RunStats) {
    let t = &s.totals;
    let gpus = cfg.system.gpus;
    let multi = gpus > 1;
    let shape = if multi || cfg.chiplets > 1 {
        format!(
            "{gpus} GPU(s) x {} chiplet(s) x {} SM(s)",
            cfg.chiplets, cfg.core.sm_count
        )
    } else {
        format!("{} SM(s)", cfg.core.sm_count)
    };
    outln!(
        "{}: {} kernel(s), {} CTAs on {shape} at {} MHz",
        cfg.name,
        t.kernels,
        t.ctas,
        cfg.core.clock_hz / 1_000_000
    );
    for (i, k) in s.kernels.iter().enumerate() {
        // With several GPUs, where each kernel ran and when (kernels of different GPUs
        // overlap).
        let place = if multi {
            format!(
                " on gpu{}, {:.3} to {:.3} us",
                k.gpu,
                k.start_ps as f64 / 1e6,
                k.end_ps as f64 / 1e6
            )
        } else {
            String::new()
        };
        outln!(
            "kernel {i} {}{place}: grid {:?} block {:?}, {} CTAs ({} per SM), {} cycles, {} warp instructions, IPC {:.2}",
            k.name,
            k.grid,
            k.block,
            k.ctas,
            k.ctas_per_sm,
            k.cycles,
            k.warp_insts,
            k.thread_insts as f64 / k.cycles.max(1) as f64
        );
    }
    outln!("gpu_tot_sim_cycle = {}", t.gpu_tot_sim_cycle);
    outln!("gpu_tot_sim_insn  = {}", t.gpu_tot_sim_insn);
    outln!("warp_insts        = {}", t.warp_insts);
    outln!("ipc               = {:.4}", t.ipc);
    outln!(
        "L1D: {} accesses, {} hits ({:.1}%), {} misses; L2: {} accesses, {} hits ({:.1}%), {} misses",
        t.l1d_accesses,
        t.l1d_hits,
        pct(t.l1d_hits, t.l1d_accesses),
        t.l1d_misses,
        t.l2_accesses,
        t.l2_hits,
        pct(t.l2_hits, t.l2_accesses),
        t.l2_misses
    );
    if t.llc_accesses > 0 || t.l2_flush_invalidated_lines > 0 {
        // A private L2 (package.l2: private): its LLC and kernel-boundary flushes.
        outln!(
            "LLC: {} accesses, {} hits ({:.1}%), {} misses; L2 flushes: {} sectors written back, \
             {} lines invalidated, {} lost hits",
            t.llc_accesses,
            t.llc_hits,
            pct(t.llc_hits, t.llc_accesses),
            t.llc_misses,
            t.l2_flush_writeback_sectors,
            t.l2_flush_invalidated_lines,
            t.l2_flush_lost_hits
        );
    }
    // Say where the data came from when the host copies filled the L2 (or the LLC): few
    // or no DRAM reads are then expected, not a sign of a broken model.
    let (to_l2, to_llc) = s.chiplets.iter().fold((0, 0), |(a, b), c| {
        (
            a + c.memory.memcpy_l2_sectors,
            b + c.memory.memcpy_llc_sectors,
        )
    });
    let filled = match (to_l2, to_llc) {
        (0, 0) => String::new(),
        (n, 0) => {
            format!("; the host copies installed {n} sectors in the L2 first (memcpy.fills_l2)")
        }
        (_, n) => {
            format!("; the host copies installed {n} sectors in the LLC first (memcpy.fills_l2)")
        }
    };
    outln!(
        "DRAM: {} reads, {} writes, {} bytes{filled}",
        t.dram_reads,
        t.dram_writes,
        t.dram_bytes
    );
    // Inter-chiplet links and the GPU fabric (entries to or from its switch), each with
    // its traffic and its busiest direction.
    let fabric = |l: &&tessera_partitions::stats::LinkEntry| {
        [&l.from, &l.to]
            .iter()
            .any(|n| *n == "nvswitch" || *n == "pcie_host")
    };
    let package: Vec<_> = s.links.iter().filter(|l| !fabric(l)).collect();
    let gpu_fabric: Vec<_> = s.links.iter().filter(fabric).collect();
    for (what, links) in [("links", &package), ("GPU fabric", &gpu_fabric)] {
        if let Some(busiest) = links.iter().max_by_key(|l| (l.busy_ps, l.wire_bytes)) {
            let wire: u64 = links.iter().map(|l| l.wire_bytes).sum();
            outln!(
                "{what}: {} packets, {wire} bytes on the wire ({:.1} GB/s); busiest {} -> {}: \
                 {:.1}% busy, longest wait {} ps",
                links.iter().map(|l| l.packets).sum::<u64>(),
                wire as f64 * 1e3 / t.sim_time_ps.max(1) as f64,
                busiest.from,
                busiest.to,
                pct(busiest.busy_ps, t.sim_time_ps),
                busiest.max_queued_ps
            );
            // The "no credit" stall: packets that waited for room at the far end.
            let waits: u64 = links.iter().map(|l| l.credit_waits).sum();
            if waits > 0 {
                let most = links
                    .iter()
                    .max_by_key(|l| (l.credit_wait_ps, l.credit_waits))
                    .map_or(("", ""), |l| (l.from.as_str(), l.to.as_str()));
                outln!(
                    "{what}: no credit: {waits} packets waited for room at the far end, {} ps \
                     in all; most on {} -> {}",
                    links.iter().map(|l| l.credit_wait_ps).sum::<u64>(),
                    most.0,
                    most.1
                );
            }
        }
    }
    // The NoC crossbars (`noc.model: crossbar`): traffic, the mean wait at an input, and
    // the times a slice's request queue filled up.
    let xbars: Vec<_> = s
        .chiplets
        .iter()
        .filter_map(|c| c.crossbar.as_ref())
        .collect();
    if !xbars.is_empty() {
        let sum = |f: &dyn Fn(&tessera_partitions::stats::CrossbarEntry) -> u64| -> u64 {
            xbars.iter().map(|x| f(x)).sum()
        };
        let (rq, rp) = (sum(&|x| x.requests.packets), sum(&|x| x.replies.packets));
        let mean = |w: u64, n: u64| w as f64 / n.max(1) as f64;
        outln!(
            "NoC: {rq} requests and {rp} replies through the crossbar{}, waiting {:.1} and {:.1} NoC cycles at an input on average; slice request queues full {} times",
            if xbars.len() > 1 { "s" } else { "" },
            mean(sum(&|x| x.requests.wait_cycles), rq),
            mean(sum(&|x| x.replies.wait_cycles), rp),
            sum(&|x| x.requests.queue_full)
        );
    }
    if multi {
        let global: u64 = s.chiplets.iter().map(|c| c.memory.global_requests).sum();
        outln!(
            "peer: {} requests to other GPUs' memory ({:.1}% of {global} global requests)",
            t.peer_requests,
            pct(t.peer_requests, global)
        );
    }
    let st = &t.stalls;
    outln!(
        "issue slots: {} used ({:.1}%), stalls: unit busy {:.1}%, scoreboard {:.1}%, barrier {:.1}%, no warp {:.1}%",
        st.issued,
        pct(st.issued, st.slots),
        pct(st.unit_busy, st.slots),
        pct(st.scoreboard, st.slots),
        pct(st.barrier, st.slots),
        pct(st.no_warp, st.slots)
    );
    // The "no credit" stalls: SMs whose miss queue waited for NoC credit, and the packets;
    // slices whose replies waited for room in their reply queues, and the requests they
    // held back meanwhile.
    let sum = |f: &dyn Fn(&tessera_partitions::mem::MemStats) -> u64| -> u64 {
        s.chiplets.iter().map(|c| f(&c.memory)).sum()
    };
    let waits = sum(&|m| m.noc_credit_waits);
    let replies = sum(&|m| m.noc_reply_credit_waits);
    if st.no_credit > 0 || waits > 0 || replies > 0 {
        outln!(
            "no credit: {:.1}% of issue slots with the LD/ST unit full; {waits} request \
             packets waited for NoC credit, {} ps in all; {replies} replies waited for room \
             in their slice's reply queue, {} ps in all, {} requests held back meanwhile",
            pct(st.no_credit, st.slots),
            sum(&|m| m.noc_credit_wait_ps),
            sum(&|m| m.noc_reply_credit_wait_ps),
            sum(&|m| m.l2_held_requests)
        );
    }
}
