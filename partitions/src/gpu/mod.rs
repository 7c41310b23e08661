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
//! channel (with its L2 slices). Their links and latencies: CP <-> SM `launch.cta_dispatch_ps`
//! (a CTA's dispatch, its completion report), SM <-> channel the NoC (`noc.latency_cycles`
//! plus serialization), host -> channel `launch.host_to_gcp_ps` (a copy's arrival).
//!
//! Partitioning (`partitioning.mode`): `chiplet` keeps the whole GPU in one partition;
//! `sm_cluster` cuts it into `partitioning.sm_clusters` partitions, partition `p` hosting
//! the SMs `[p n / P, (p + 1) n / P)` and likewise a contiguous range of the DRAM channels;
//! the CP is in partition 0. The lookahead is the least latency of the links the cut
//! crosses (usually `cta_dispatch_ps`, one core cycle in the presets); every partitioning
//! gives byte-identical stats (tested).
//!
//! Time: picoseconds between units, core cycles inside an SM (cycle `c` is the instant
//! `c * core_period_ps`; a time in picoseconds becomes the first cycle at or after it).
//! CTAs are decoded lazily by each partition's [`tessera_traces::ChunkDecoder`] when they
//! arrive at an SM, so memory follows the resident CTAs, not the trace.

pub mod control;
mod cp;
mod global_cp;
mod host;
mod local_cp;
mod partition;
mod wake;

use std::sync::Arc;

use crate::config::GpuConfig;
use crate::mem::{Access, Ctx, MemSpec, MemStats, Space, Unit, UnitIds};
use crate::sm::{SmError, SmSpec, SmStats};
use crate::stats::{
    ChipletStats, ClassCounts, LinkEntry, RunStats, StallStats, StatsPart, Totals, STATS_VERSION,
};
use tessera_interconnect::Picos;
use tessera_interconnect::{Link, PortId};
use tessera_traces::{KernelMeta, MemSpace, OpClass, TraceFile};

pub use cp::CommandProcessor;
pub use partition::GpuPartition;

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
        Some(Unit::Cp(k)) | Some(Unit::Link(k)) => base(k),
        None => 0,
    }) as usize
}

/// The links between units with their least latencies, for the lookahead.
fn links(cfg: &GpuConfig, ids: &UnitIds, noc_ps: Picos) -> Vec<Link> {
    let l = &cfg.launch;
    let mut v = Vec::new();
    let link = |src: u32, dst: u32, latency: Picos| Link {
        src: PortId(src),
        dst: PortId(dst),
        latency,
    };
    for k in 0..ids.chiplets {
        let cp = ids.cp(k);
        let sms = k * ids.sms..(k + 1) * ids.sms;
        let channels = k * ids.channels..(k + 1) * ids.channels;
        for s in sms {
            v.push(link(cp, ids.sm(s), l.cta_dispatch_ps));
            v.push(link(ids.sm(s), cp, l.cta_dispatch_ps));
            for c in channels.clone() {
                v.push(link(ids.sm(s), ids.channel(c), noc_ps));
                v.push(link(ids.channel(c), ids.sm(s), noc_ps));
            }
            if ids.chiplets > 1 {
                v.push(link(ids.sm(s), ids.link(k), noc_ps));
                v.push(link(ids.link(k), ids.sm(s), noc_ps));
            }
        }
        if cfg.package.l2 == crate::config::L2Organization::Private {
            // Kernel-boundary flushes (local CP <-> its channels) and private L2 slices to
            // the chiplet's LLC slices.
            for c in channels.clone() {
                v.push(link(cp, ids.channel(c), l.cta_dispatch_ps));
                v.push(link(ids.channel(c), cp, l.cta_dispatch_ps));
                for d in channels.clone().filter(|&d| d != c) {
                    v.push(link(ids.channel(c), ids.channel(d), noc_ps));
                }
            }
        }
        if ids.chiplets > 1 {
            for c in channels {
                v.push(link(ids.channel(c), ids.link(k), noc_ps));
                v.push(link(ids.link(k), ids.channel(c), noc_ps));
            }
            let gcp = ids.cp(ids.gpu_first_chiplet(ids.gpu_of_chiplet(k)));
            if cp != gcp {
                v.push(link(gcp, cp, l.gcp_to_lcp_ps));
                v.push(link(cp, gcp, l.completion_ps));
            }
        }
    }
    for c in 0..ids.total_channels() {
        v.push(link(UnitIds::CP, ids.channel(c), l.host_to_gcp_ps));
    }
    let n = ids.gpu_chiplets;
    if n > 1 {
        let latency = cfg.package.link.latency_ps;
        let topo = crate::mem::topology(cfg);
        for g in 0..ids.gpus() {
            let base = ids.gpu_first_chiplet(g);
            for (from, to) in topo.links(n) {
                match (from, to) {
                    (Some(a), Some(b)) => {
                        v.push(link(ids.link(base + a), ids.link(base + b), latency))
                    }
                    // Up to the switch: the packet goes on to every other chiplet's interface.
                    (Some(a), None) => {
                        for b in (0..n).filter(|&b| b != a) {
                            v.push(link(ids.link(base + a), ids.link(base + b), latency));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if ids.gpus() > 1 {
        // The host's launches to each other GPU's global CP and their completions back.
        for g in 1..ids.gpus() {
            let gcp = ids.cp(ids.gpu_first_chiplet(g));
            v.push(link(UnitIds::CP, gcp, l.host_to_gcp_ps));
            v.push(link(gcp, UnitIds::CP, cfg.system.host_link.completion_ps));
        }
        // The GPU fabric: every chiplet's port up to the switch, which forwards to the
        // chiplets of every other GPU.
        let latency = cfg.system.gpu_link.latency_ps;
        for a in 0..ids.chiplets {
            for b in (0..ids.chiplets).filter(|&b| ids.gpu_of_chiplet(b) != ids.gpu_of_chiplet(a)) {
                v.push(link(ids.link(a), ids.link(b), latency));
            }
        }
    }
    v
}

/// A GPU ready to run: its partitions, the partition hosting each unit's port, and the
/// links between units (for the lookahead). The engine of `tessera-cluster` runs the
/// partitions; [`collect_stats`] turns them back into stats.
pub struct GpuSystem<'t> {
    pub partitions: Vec<GpuPartition<'t>>,
    pub ports: Vec<(PortId, usize)>,
    pub links: Vec<Link>,
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
    let mem_spec = Arc::new(MemSpec::for_trace(cfg, trace));
    let sectors = mem_spec.l2_geom.sectors_per_line();
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
    let sm_spec = Arc::new(SmSpec::from_config(cfg));
    let mut cps: Vec<Option<CommandProcessor>> =
        CommandProcessor::build(cfg, trace.commands(), trace.kernels())?
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
            GpuPartition::new(p, cfg, trace, &mem_spec, &sm_spec, &mut cps, &ctxs, |u| {
                partition_of_unit(&ids, per, u) == p
            })
        })
        .collect();
    Ok(GpuSystem {
        partitions,
        ports: (0..ids.count())
            .map(|u| (PortId(u), partition_of_unit(&ids, per, u)))
            .collect(),
        links: links(cfg, &ids, mem_spec.noc_latency_ps()),
    })
}

/// Counters of one chiplet's SMs, summed in SM order.
#[derive(Default)]
struct SmSums {
    t: SmStats,
    ctas: u64,
    stalls: StallStats,
    memory: MemStats,
}

/// The stats of a finished run (the partitions back from the engine), summed over units
/// in unit order: [`merge_stats`] of the one [`stats_part`] of every partition.
pub fn collect_stats(cfg: &GpuConfig, partitions: Vec<GpuPartition<'_>>) -> RunStats {
    let end_ps = run_end_ps(&partitions);
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
    let mut partitions = partitions;
    for p in &mut partitions {
        p.close();
    }
    let ids = UnitIds::new(cfg);
    let period = cfg.core_period_ps();
    let mut kernels = Vec::new();
    let mut sms = Vec::new();
    let mut channels = Vec::new();
    let mut link_units = Vec::new();
    for p in partitions {
        for cp in p.cps {
            kernels.extend(cp.into_kernels());
        }
        sms.extend(p.sms);
        channels.extend(p.channels);
        link_units.extend(p.links);
    }
    sms.sort_by_key(|u| u.index);
    channels.sort_by_key(|c| c.index());
    link_units.sort_by_key(|l| l.chiplet());
    let end_cycle = cycle_at(end_ps, period);
    let mut kernel_insts: Vec<(u64, u64)> = Vec::new();
    let mut per_chiplet: Vec<SmSums> = (0..ids.chiplets).map(|_| SmSums::default()).collect();
    for u in sms {
        if kernel_insts.len() < u.per_kernel.len() {
            kernel_insts.resize(u.per_kernel.len(), (0, 0));
        }
        for (k, &(w, th)) in u.per_kernel.iter().enumerate() {
            kernel_insts[k].0 += w;
            kernel_insts[k].1 += th;
        }
        let c = &mut per_chiplet[(u.index / ids.sms) as usize];
        c.ctas += u.ctas;
        c.memory.add(u.ldst.stats());
        let end = end_cycle.max(u.sm.now());
        let st = u.sm.finish(0, end);
        c.stalls.add(&st);
        let t = &mut c.t;
        t.warp_insts += st.warp_insts;
        t.thread_insts += st.thread_insts;
        t.barriers += st.barriers;
        t.exited_lanes += st.exited_lanes;
        t.icache_accesses += st.icache_accesses;
        t.icache_misses += st.icache_misses;
        t.operand_reads += st.operand_reads;
        t.bank_conflicts += st.bank_conflicts;
        t.bank_conflict_cycles += st.bank_conflict_cycles;
        for (a, b) in t
            .class_warp_insts
            .iter_mut()
            .zip(st.class_warp_insts.iter())
        {
            *a += b;
        }
    }
    for c in &channels {
        per_chiplet[ids.chiplet_of_channel(c.index()) as usize]
            .memory
            .add(c.stats());
    }
    let chiplets = per_chiplet
        .into_iter()
        .enumerate()
        .map(|(k, c)| ChipletStats {
            id: k as u32,
            gpu: ids.gpu_of_chiplet(k as u32),
            sms: cfg.core.sm_count,
            warp_insts: c.t.warp_insts,
            thread_insts: c.t.thread_insts,
            ctas: c.ctas,
            barriers: c.t.barriers,
            exited_lanes: c.t.exited_lanes,
            icache_accesses: c.t.icache_accesses,
            icache_misses: c.t.icache_misses,
            operand_reads: c.t.operand_reads,
            bank_conflicts: c.t.bank_conflicts,
            bank_conflict_cycles: c.t.bank_conflict_cycles,
            class_warp_insts: ClassCounts(c.t.class_warp_insts),
            stalls: c.stalls,
            memory: c.memory,
        })
        .collect();
    let links = link_units
        .iter()
        .map(|l| {
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
                })
                .collect();
            (l.chiplet(), entries)
        })
        .collect();
    StatsPart {
        end_ps,
        kernels,
        kernel_insts,
        chiplets,
        links,
    }
}

/// The stats of a whole run from the [`stats_part`]s of disjoint sets of partitions that
/// together cover the system (one part: a run on one process; one per rank: MPI). Counters
/// are integers summed per chiplet and per kernel, links concatenated in chiplet order, so
/// any split gives the same bytes.
pub fn merge_stats(cfg: &GpuConfig, parts: Vec<StatsPart>) -> RunStats {
    let ids = UnitIds::new(cfg);
    let end_ps = parts.iter().map(|p| p.end_ps).max().unwrap_or(0);
    let end_cycle = cycle_at(end_ps, cfg.core_period_ps());
    let mut kernels = Vec::new();
    let mut kernel_insts: Vec<(u64, u64)> = Vec::new();
    let mut chiplets: Vec<Option<ChipletStats>> = (0..ids.chiplets).map(|_| None).collect();
    let mut links = Vec::new();
    for p in parts {
        kernels.extend(p.kernels);
        if kernel_insts.len() < p.kernel_insts.len() {
            kernel_insts.resize(p.kernel_insts.len(), (0, 0));
        }
        for (sum, (w, th)) in kernel_insts.iter_mut().zip(p.kernel_insts) {
            sum.0 += w;
            sum.1 += th;
        }
        for (sum, c) in chiplets.iter_mut().zip(p.chiplets) {
            match sum {
                Some(s) => s.add(&c),
                None => *sum = Some(c),
            }
        }
        links.extend(p.links);
    }
    // Trace order (the GPUs' global CPs each hold their own kernels).
    kernels.sort_by_key(|(launch, _)| *launch);
    let mut kernels: Vec<crate::stats::KernelStats> = kernels.into_iter().map(|(_, k)| k).collect();
    for (k, (w, th)) in kernels.iter_mut().zip(kernel_insts) {
        k.warp_insts += w;
        k.thread_insts += th;
    }
    // Stable: entries of one link unit keep their order.
    links.sort_by_key(|(chiplet, _)| *chiplet);
    let links = links.into_iter().flat_map(|(_, e)| e).collect();
    let chiplets: Vec<ChipletStats> = chiplets.into_iter().flatten().collect();
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
        },
        kernels,
        chiplets,
        links,
    }
}
