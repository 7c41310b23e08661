//! One GPU (`chiplets: 1`, DESIGN.md section 5), or a system of `system.gpus` GPUs of
//! `chiplets` chiplets each, as units that talk only through packets, simulated as one or
//! several partitions on the engine of `tessera-cluster`.
//!
//! With several GPUs every per-chiplet block of units is repeated per GPU (chiplet `gpu *
//! chiplets + c`, [`crate::mem::UnitIds`]), one partition per chiplet by default; each GPU
//! has its own global CP, and the GPU-fabric ports (`system.gpu_link`) and the host's
//! launch and completion messages join the links below (so the least GPU-link latency
//! bounds the lookahead).
//!
//! Units ([`crate::mem::UnitIds`]): the [`cp::CommandProcessor`] (host, global and local
//! CP; see its module for the launch path), one SM per `core.sm_count` (the issue stage of
//! [`crate::sm`] with its [`crate::mem::LdStUnit`]), one [`crate::mem::MemChannel`] per DRAM
//! channel (with its L2 slices). Their connections are declared once, with their latencies,
//! in [`wiring`]: units send with their departure (after any serialization of their own),
//! the net adds the connection's latency, and the links of the lookahead
//! ([`GpuSystem::links`]) are generated from the same declarations.
//!
//! Partitioning (`partitioning.mode`): `chiplet` keeps the whole GPU in one partition;
//! `sm_cluster` cuts it into `partitioning.sm_clusters` partitions, partition `p` hosting
//! the SMs `[p n / P, (p + 1) n / P)` and likewise a contiguous range of the DRAM channels;
//! the CP, the crossbar and the link interface are in the chiplet's first. The lookahead
//! is the least latency of the links the cut crosses: the crossbar's two legs
//! (`noc.latency_cycles / 2` NoC cycles and the rest, `NocParams::crossbar_ps`) and the
//! CTA dispatch (`cta_dispatch_ps`), which is one crossbar leg in the presets of current
//! GPUs (10 NoC cycles: half the NoC latency bounds the window) and one core cycle in
//! `gtx480` and `maxwell-13sm` (GPGPU-Sim 3.x, whose cuts keep one-cycle windows); every
//! partitioning gives byte-identical stats (tested).
//!
//! Parameters: [`build`] makes each kind of unit's parameters once from the config
//! (`UnitParams`, each by its `from_config`); the units are built from them.
//!
//! Time: picoseconds between units, core cycles inside an SM (cycle `c` is the instant
//! `c * core_period_ps`; a time in picoseconds becomes the first cycle at or after it).
//! CTAs are decoded lazily by each partition's [`tessera_traces::ChunkDecoder`] when they
//! arrive at an SM, so memory follows the resident CTAs, not the trace.

pub mod control;
mod cp;
mod global_cp;
mod host;
pub(crate) mod launch;
mod local_cp;
mod partition;
mod wake;
pub mod wiring;

use std::sync::Arc;

use crate::config::GpuConfig;
use crate::mem::{
    Access, AddressMap, ChannelParams, Ctx, LdStParams, LinkParams, MemStats, Space, Unit, UnitIds,
};
use crate::observe::Observer;
use crate::per_kernel::KernelTally;
use crate::sm::{SmError, SmParams, SmStats};
use crate::stats::{
    ChipletStats, ClassCounts, LinkEntry, RunStats, StallStats, StatsPart, StatsRegistry, Totals,
    UnitStats, STATS_VERSION,
};
use tessera_interconnect::Picos;
use tessera_interconnect::{Link, PortId};
use tessera_traces::{KernelMeta, MemSpace, OpClass, TraceFile};

pub use cp::{CommandProcessor, SliceSpans};
pub use launch::CpParams;
pub use partition::GpuPartition;
pub use wiring::{Port, Wiring};

/// The parameters of every unit of a GPU, each made from the config by its own
/// constructor (`L1dParams::from_config`, ...) once per build, and shared by the units of
/// every partition.
pub(crate) struct UnitParams {
    pub(crate) map: Arc<AddressMap>,
    pub(crate) sm: Arc<SmParams>,
    pub(crate) ldst: LdStParams,
    pub(crate) channel: ChannelParams,
    pub(crate) link: Arc<LinkParams>,
    pub(crate) cp: CpParams,
    /// The connections between units and their latencies.
    pub(crate) wiring: Wiring,
    /// `partitioning.run_ahead`.
    pub(crate) run_ahead: bool,
}

impl UnitParams {
    fn for_trace(cfg: &GpuConfig, trace: &TraceFile) -> UnitParams {
        let map = Arc::new(AddressMap::for_trace(cfg, trace));
        let ldst = LdStParams::from_config(cfg);
        let link = Arc::new(LinkParams::from_config(cfg));
        let cp = CpParams::from_config(cfg);
        let wiring = Wiring::new(
            map.ids,
            map.private,
            &ldst.noc,
            &cp,
            &link,
            (cfg.l2.request_queue_packets, cfg.l2.reply_queue_packets),
        );
        UnitParams {
            map,
            sm: Arc::new(SmParams::from_config(cfg)),
            ldst,
            channel: ChannelParams::from_config(cfg),
            link,
            cp,
            wiring,
            run_ahead: cfg.partitioning.run_ahead,
        }
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// A kernel's CTA can never be resident on an SM of the config.
    #[error("kernel {index} ({name}): its CTA can never fit on an SM: {reason}")]
    CtaNeverFits {
        index: usize,
        name: String,
        reason: String,
    },
    /// The trace could not be read.
    #[error("{0}")]
    Trace(#[from] tessera_traces::TraceError),
    /// An SM refused a CTA or deadlocked.
    #[error("kernel {index} ({name}), SM {sm}: {err}")]
    Sm {
        index: usize,
        name: String,
        sm: u32,
        err: SmError,
    },
    /// A configuration this GPU model cannot run yet.
    #[error("{0}")]
    Unsupported(String),
    /// Units disagreed about a packet (a model bug, reported rather than ignored).
    #[error("internal error: {0}")]
    Protocol(String),
    /// The engine stopped the run (its message).
    #[error("{0}")]
    Engine(String),
    /// A complete run left sync words with other values than the recorder's run (issue
    /// 24): the model's values are wrong, or the program's result depends on scheduling.
    #[error("{0}")]
    SyncCheck(String),
}

/// First cycle at or after `ps`.
pub(crate) fn cycle_at(ps: Picos, period: Picos) -> u64 {
    ps.div_ceil(period)
}

fn space_of(s: MemSpace) -> Space {
    match s {
        MemSpace::Global => Space::Global,
        MemSpace::Shared => Space::Shared,
        MemSpace::Local => Space::Local,
    }
}

/// What a memory-class instruction does and where, from its class (generic addresses by
/// the first active lane's window).
pub(crate) fn classify(class: OpClass, kernel: &KernelMeta, first_addr: u64) -> (Access, Space) {
    let generic = || space_of(kernel.generic_space(first_addr));
    match class {
        OpClass::LoadGlobal | OpClass::Texture | OpClass::AsyncCopy => {
            (Access::Load, Space::Global)
        }
        OpClass::StoreGlobal => (Access::Store, Space::Global),
        OpClass::LoadShared => (Access::Load, Space::Shared),
        OpClass::StoreShared => (Access::Store, Space::Shared),
        OpClass::LoadLocal => (Access::Load, Space::Local),
        OpClass::StoreLocal => (Access::Store, Space::Local),
        OpClass::LoadGeneric => (Access::Load, generic()),
        OpClass::StoreGeneric => (Access::Store, generic()),
        OpClass::LoadConst => (Access::Load, Space::Const),
        OpClass::AtomicShared => (Access::Atomic, Space::Shared),
        OpClass::AtomicGeneric => (Access::Atomic, generic()),
        // AtomicGlobal, Reduction (and nothing else reaches here).
        _ => (Access::Atomic, Space::Global),
    }
}

/// The partition hosting each unit when each chiplet is cut into `per` partitions (module
/// documentation): chiplet `k`'s partitions are `[k per, (k + 1) per)`.
fn partition_of_unit(ids: &UnitIds, per: u32, unit: u32) -> usize {
    let p = per.max(1) as u64;
    let base = |k: u32| k as u64 * p;
    (match ids.unit(unit) {
        Some(Unit::Sm(s)) => base(s / ids.sms) + (s % ids.sms) as u64 * p / ids.sms as u64,
        Some(Unit::Channel(c)) => {
            base(c / ids.channels) + (c % ids.channels) as u64 * p / ids.channels as u64
        }
        Some(Unit::Cp(k)) | Some(Unit::Link(k)) | Some(Unit::Xbar(k)) => base(k),
        None => 0,
    }) as usize
}

/// A GPU ready to run: its partitions, the partition hosting each unit's port, and the
/// links between units (for the lookahead). The engine of `tessera-cluster` runs the
/// partitions; [`collect_stats`] turns them back into stats.
pub struct GpuSystem<'t> {
    pub partitions: Vec<GpuPartition<'t>>,
    pub ports: Vec<(PortId, usize)>,
    pub links: Vec<Link>,
}

impl GpuSystem<'_> {
    /// Attaches `obs` to every unit of every partition ([`GpuPartition::observe`]).
    pub fn observe(&mut self, obs: Arc<dyn Observer>) {
        for p in &mut self.partitions {
            p.observe(obs.clone());
        }
    }

    /// Samples every partition's units at `interval` ([`crate::timeseries`]): the stats
    /// then carry a `timeseries` object.
    pub fn sample(&mut self, interval: crate::timeseries::Interval) {
        for p in &mut self.partitions {
            p.sample(interval);
        }
    }
}

/// Builds the GPU of `cfg` running the command list of `trace`, cut into
/// `cfg.partition_count()` partitions (module documentation). Errors: configurations not
/// simulated yet, a kernel whose CTA can never fit on an SM.
pub fn build<'t>(cfg: &GpuConfig, trace: &'t TraceFile) -> Result<GpuSystem<'t>, GpuError> {
    let all: Vec<usize> = (0..cfg.partition_count() as usize).collect();
    build_hosted(cfg, trace, &all)
}

/// [`build`], making only the partitions `hosted` (global indices, ascending; what one MPI
/// rank simulates): `partitions` holds those, in that order, while `ports` and `links`
/// still describe the whole system. An index out of range is an error.
pub fn build_hosted<'t>(
    cfg: &GpuConfig,
    trace: &'t TraceFile,
    hosted: &[usize],
) -> Result<GpuSystem<'t>, GpuError> {
    let ids = UnitIds::new(cfg);
    let parts = cfg.partition_count();
    let per = parts / ids.chiplets;
    if per == 0 || per > ids.sms || per * ids.chiplets != parts {
        return Err(GpuError::Unsupported(format!(
            "{parts} partitions for {} chiplets of {} SMs: partitioning.sm_clusters must be \
             between 1 and core.sm_count",
            ids.chiplets, ids.sms
        )));
    }
    if ids.count() > crate::packet::MAX_UNIT {
        return Err(GpuError::Unsupported(format!(
            "{} units (chiplets x (SMs + channels + 2)): at most {} can be addressed",
            ids.count(),
            crate::packet::MAX_UNIT
        )));
    }
    let params = UnitParams::for_trace(cfg, trace);
    let sectors = params.ldst.l2_geom.sectors_per_line();
    if sectors > crate::packet::MAX_SECTORS {
        return Err(GpuError::Unsupported(format!(
            "{sectors} sectors per L2 line (l2.line_bytes / l2.sector_bytes): a packet's \
             sector mask holds at most {}",
            crate::packet::MAX_SECTORS
        )));
    }
    let ctxs: Arc<[Ctx]> = Ctx::for_kernels(trace.kernels())
        .map_err(|e| GpuError::Unsupported(e.to_string()))?
        .into();
    let mut cps: Vec<Option<CommandProcessor>> = CommandProcessor::build(
        &params.cp,
        &params.wiring,
        trace.commands(),
        trace.kernels(),
        &ctxs,
    )?
    .into_iter()
    .map(Some)
    .collect();
    if let Some(&p) = hosted.iter().find(|&&p| p >= parts as usize) {
        return Err(GpuError::Unsupported(format!(
            "partition {p} of a system of {parts} partitions"
        )));
    }
    let partitions = hosted
        .iter()
        .map(|&p| {
            GpuPartition::new(p, &params, trace, &mut cps, &ctxs, |u| {
                partition_of_unit(&ids, per, u) == p
            })
        })
        .collect();
    Ok(GpuSystem {
        partitions,
        ports: (0..ids.count())
            .map(|u| (PortId(u), partition_of_unit(&ids, per, u)))
            .collect(),
        links: params.wiring.links(),
    })
}

/// Counters of one chiplet's units, summed in unit order.
#[derive(Default)]
struct ChipletSums {
    core: SmStats,
    ctas: u64,
    stalls: StallStats,
    memory: MemStats,
    crossbar: Option<crate::stats::CrossbarEntry>,
}

/// The stats of a finished run (the partitions back from the engine), summed over units
/// in unit order: [`merge_stats`] of the one [`stats_part`] of every partition.
pub fn collect_stats(cfg: &GpuConfig, partitions: Vec<GpuPartition<'_>>) -> RunStats {
    let end_ps = run_end_ps(&partitions);
    merge_stats(cfg, vec![stats_part(cfg, partitions, end_ps)])
}

/// The stats of a run stopped at simulated time `end_ps` before it finished (a run
/// limit): every counter as it stood at `end_ps`, the run's end being `end_ps` itself.
pub fn collect_stats_at(
    cfg: &GpuConfig,
    partitions: Vec<GpuPartition<'_>>,
    end_ps: Picos,
) -> RunStats {
    merge_stats(cfg, vec![stats_part(cfg, partitions, end_ps)])
}

/// When the run ended as far as these partitions know: the host's last action and the
/// last kernel completion of each GPU whose global CP is among them, else 0. The run's end
/// is the maximum over all partitions (the reduction an MPI run makes before
/// [`stats_part`], since every SM's idle tail is counted up to it).
pub fn run_end_ps(partitions: &[GpuPartition<'_>]) -> Picos {
    partitions
        .iter()
        .flat_map(|p| p.cps.iter())
        .map(|cp| cp.end_ps())
        .max()
        .unwrap_or(0)
}

/// The counters of some of the partitions of a finished run whose end is `end_ps` (the
/// maximum [`run_end_ps`] over all partitions): what one worker or MPI rank contributes.
/// Parts of disjoint sets of partitions covering the whole system merge
/// ([`merge_stats`]) into the same stats, byte for byte, whatever the split.
pub fn stats_part(cfg: &GpuConfig, partitions: Vec<GpuPartition<'_>>, end_ps: Picos) -> StatsPart {
    let end_cycle = cycle_at(end_ps, cfg.core_period_ps());
    let mut kernels = Vec::new();
    let mut spans = Vec::new();
    let mut units = StatsRegistry::default();
    let mut series: Option<crate::timeseries::SeriesPart> = None;
    for mut p in partitions {
        p.close();
        if let Some(s) = p.sampler.take() {
            series.get_or_insert_with(Default::default).extend(s.take());
        }
        for cp in p.cps {
            spans.push(cp.spans());
            kernels.extend(cp.into_kernels());
        }
        for u in p.sms {
            // Every SM's idle tail counts up to the run's end.
            let end = end_cycle.max(u.sm.now());
            let waiting = u.sm.waiting_warps(u.index, u.kernel().unwrap_or(0));
            let core = Box::new(u.sm.finish(0, end));
            let stats = UnitStats::Sm {
                waiting,
                core,
                mem: u.ldst.stats(),
                ctas: u.ctas,
                per_kernel: u.per_kernel,
                mem_per_kernel: u.ldst.per_kernel(),
            };
            units.register(u.ldst.unit(), stats);
        }
        for c in p.channels {
            let sm = c.sync_memory();
            let sync = (sm.stats.requests > 0).then(|| Box::new((sm.stats, sm.written())));
            units.register(
                c.unit(),
                UnitStats::Channel(c.stats(), c.per_kernel(), sync),
            );
        }
        for l in p.links {
            let entries = l
                .reports()
                .into_iter()
                .map(|r| LinkEntry {
                    from: r.names.0,
                    to: r.names.1,
                    packets: r.stats.packets,
                    bytes: r.stats.bytes,
                    wire_bytes: r.stats.wire_bytes,
                    busy_ps: r.busy_ps,
                    queued_ps: r.stats.queued_ps,
                    max_queued_ps: r.stats.max_queued_ps,
                    buffer_bytes: r.buffer_bytes,
                    credit_waits: r.credits.credit_waits,
                    credit_wait_ps: r.credits.credit_wait_ps,
                    max_credit_wait_ps: r.credits.max_credit_wait_ps,
                    peak_buffer_bytes: r.credits.peak_buffer_bytes,
                })
                .collect();
            units.register(l.unit(), UnitStats::Link(entries, l.per_kernel().clone()));
        }
        for x in p.xbars {
            let net = |n: &tessera_interconnect::CrossbarStats| crate::stats::CrossbarNet {
                packets: n.packets,
                flits: n.flits,
                wait_cycles: n.wait_cycles,
                max_input_packets: n.max_occupancy as u64,
                queue_full: n.output_full,
            };
            let st = x.stats();
            let entry = crate::stats::CrossbarEntry {
                requests: net(&st.requests),
                replies: net(&st.replies),
            };
            units.register(x.unit(), UnitStats::Crossbar(entry));
        }
    }
    StatsPart {
        end_ps,
        kernels,
        units,
        series,
        spans,
    }
}

/// The stats of a whole run from the [`stats_part`]s of disjoint sets of partitions that
/// together cover the system (one part: a run on one process; one per rank: MPI). The
/// parts' registries are merged in unit-id order: counters are integers summed per chiplet
/// and per kernel, links concatenated in unit (chiplet) order, so any split gives the same
/// bytes.
pub fn merge_stats(cfg: &GpuConfig, parts: Vec<StatsPart>) -> RunStats {
    let ids = UnitIds::new(cfg);
    let end_ps = parts.iter().map(|p| p.end_ps).max().unwrap_or(0);
    let end_cycle = cycle_at(end_ps, cfg.core_period_ps());
    let mut kernels = Vec::new();
    let mut spans = Vec::new();
    let mut units = StatsRegistry::default();
    let mut series: Option<crate::timeseries::SeriesPart> = None;
    for p in parts {
        kernels.extend(p.kernels);
        spans.extend(p.spans);
        units.extend(p.units);
        if let Some(s) = p.series {
            series.get_or_insert_with(Default::default).extend(s);
        }
    }
    // The link entries by unit, for the time series' links.
    let mut link_units = Vec::new();
    let mut kernel_insts: Vec<(u64, u64)> = Vec::new();
    let mut sums: Vec<ChipletSums> = (0..ids.chiplets).map(|_| ChipletSums::default()).collect();
    let mut links = Vec::new();
    let mut tally = KernelTally::default();
    let mut sync: Option<crate::stats::SyncSummary> = None;
    let mut waiting = Vec::new();
    for (unit, stats) in units.into_sorted() {
        let Some(c) = sums.get_mut(ids.chiplet_of(unit) as usize) else {
            continue;
        };
        match stats {
            UnitStats::Sm {
                mut core,
                mem,
                ctas,
                per_kernel,
                mem_per_kernel,
                waiting: w,
            } => {
                waiting.extend(w);
                tally.add(&mem_per_kernel);
                if kernel_insts.len() < per_kernel.len() {
                    kernel_insts.resize(per_kernel.len(), (0, 0));
                }
                for (sum, (w, th)) in kernel_insts.iter_mut().zip(per_kernel) {
                    sum.0 += w;
                    sum.1 += th;
                }
                c.ctas += ctas;
                if core.spin.any() {
                    let s = sync.get_or_insert_with(Default::default);
                    s.holds.append(&mut core.spin.holds);
                    s.spin_iterations += core.spin.iterations;
                    s.spin_exits += core.spin.exits;
                    s.branch_taken += core.spin.branch_taken;
                    s.branch_passed += core.spin.branch_passed;
                    s.queue_items += core.spin.queue_items;
                    s.queue_exits += core.spin.queue_exits;
                    s.queue_rounds += core.spin.queue_rounds;
                    s.l1_sync_hits += core.spin.l1_sync_hits;
                    s.replayed_warp_insts += core.spin.replayed();
                    for (a, b) in s
                        .replayed_by_class
                        .iter_mut()
                        .zip(&core.spin.replayed_by_class)
                    {
                        *a += b;
                    }
                    for (a, b) in s
                        .skipped_by_class
                        .iter_mut()
                        .zip(&core.spin.skipped_by_class)
                    {
                        *a += b;
                    }
                }
                c.stalls.add(&core);
                c.core.add(&core);
                c.memory.add_ldst(&mem);
            }
            UnitStats::Channel(ch, per, home) => {
                c.memory.add_channel(&ch);
                tally.add(&per);
                if let Some(h) = home {
                    let s = sync.get_or_insert_with(Default::default);
                    let (st, written) = *h;
                    s.requests += st.requests;
                    s.loads += st.loads;
                    s.stores += st.stores;
                    s.atomics += st.atomics;
                    s.cas_won += st.cas_won;
                    s.cas_lost += st.cas_lost;
                    s.values.extend(written);
                }
            }
            UnitStats::Link(entries, per) => {
                if series.is_some() {
                    link_units.push((unit, entries.clone()));
                }
                links.extend(entries);
                tally.add(&per);
            }
            UnitStats::Crossbar(x) => c.crossbar = Some(x),
        }
    }
    // Trace order (the GPUs' global CPs each hold their own kernels).
    // The per-kernel counters are indexed by the trace's kernel index, the list by launch
    // (the same unless `--kernels` dropped launches or a cut left some incomplete).
    kernels.sort_by_key(|(launch, _, _)| *launch);
    // Each chiplet's slices, by the rank of their kernel among its GPU's (a GPU runs its
    // kernels one after another, in launch order).
    spans.sort_by_key(|s| s.0);
    let mut of_gpu: Vec<Vec<usize>> = vec![Vec::new(); ids.gpus() as usize];
    for (i, (_, _, k)) in kernels.iter().enumerate() {
        if let Some(v) = of_gpu.get_mut(k.gpu as usize) {
            v.push(i);
        }
    }
    for (chiplet, gpu, done) in spans {
        for (rank, start, end, ctas) in done {
            let Some(&i) = of_gpu.get(gpu as usize).and_then(|v| v.get(rank as usize)) else {
                continue;
            };
            if ctas > 0 {
                kernels[i].2.chiplets.push(crate::stats::KernelSlice {
                    chiplet,
                    start_ps: start,
                    end_ps: end,
                    ctas: ctas as u64,
                });
            }
        }
    }
    let kernels: Vec<crate::stats::KernelStats> = kernels
        .into_iter()
        .map(|(_, index, mut k)| {
            let i = index as usize;
            if let Some((w, th)) = kernel_insts.get(i) {
                k.warp_insts += w;
                k.thread_insts += th;
            }
            if let Some(m) = tally.kernels.get(i) {
                k.memory.add(m);
            }
            k
        })
        .collect();
    let chiplets: Vec<ChipletStats> = sums
        .into_iter()
        .enumerate()
        .map(|(k, c)| ChipletStats {
            id: k as u32,
            gpu: ids.gpu_of_chiplet(k as u32),
            sms: cfg.core.sm_count,
            warp_insts: c.core.warp_insts,
            thread_insts: c.core.thread_insts,
            ctas: c.ctas,
            barriers: c.core.barriers,
            exited_lanes: c.core.exited_lanes,
            icache_accesses: c.core.icache.accesses,
            icache_misses: c.core.icache.misses,
            operand_reads: c.core.operands.reads,
            bank_conflicts: c.core.operands.bank_conflicts,
            bank_conflict_cycles: c.core.operands.bank_conflict_cycles,
            class_warp_insts: ClassCounts(c.core.class_warp_insts),
            stalls: c.stalls,
            memory: c.memory,
            crossbar: c.crossbar,
        })
        .collect();
    let ctas: u64 = kernels.iter().map(|k| k.ctas).sum();
    let mut memory = MemStats::default();
    let mut stalls = StallStats::default();
    let (mut warp_insts, mut thread_insts) = (0, 0);
    for c in &chiplets {
        memory.add(&c.memory);
        stalls.add_all(&c.stalls);
        warp_insts += c.warp_insts;
        thread_insts += c.thread_insts;
    }
    let ipc = if end_cycle == 0 {
        0.0
    } else {
        thread_insts as f64 / end_cycle as f64
    };
    let m = &memory;
    RunStats {
        stats_version: STATS_VERSION,
        config: cfg.name.clone(),
        run_limit: None,
        totals: Totals {
            gpu_tot_sim_cycle: end_cycle,
            gpu_tot_sim_insn: thread_insts,
            warp_insts,
            ipc,
            sim_time_ps: end_ps,
            kernels: kernels.len() as u64,
            ctas,
            gpus: ids.gpus() as u64,
            peer_requests: m.peer_requests,
            l1d_accesses: m.l1d_accesses,
            l1d_hits: m.l1d_hits,
            l1d_misses: m.l1d_misses,
            l2_accesses: m.l2_accesses,
            l2_hits: m.l2_hits,
            l2_misses: m.l2_misses,
            dram_reads: m.dram_reads,
            dram_writes: m.dram_writes,
            dram_bytes: m.dram_bytes,
            llc_accesses: m.llc_accesses,
            llc_hits: m.llc_hits,
            llc_misses: m.llc_misses,
            l2_flush_writeback_sectors: m.l2_flush_writeback_sectors,
            l2_flush_invalidated_lines: m.l2_flush_invalidated_lines,
            l2_flush_lost_hits: m.l2_flush_lost_hits,
            stalls,
            host_memory: tally.host,
        },
        kernels,
        chiplets,
        links,
        timeseries: series.and_then(|s| crate::timeseries::assemble(&ids, s, end_ps, &link_units)),
        sync: sync.map(|mut s| {
            s.values.sort_unstable();
            s
        }),
        watchdog: None,
        waiting,
    }
}
