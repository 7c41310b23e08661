//! One GPU as one partition (`chiplets: 1`, DESIGN.md section 5), run sequentially: the
//! host replays the trace's command list in stream order, the launch path (one config key
//! per segment) brings each kernel to the local CP, which dispatches CTAs in listing order
//! to SMs as slots free up; all SMs advance in global time order so that memory accesses
//! reach [`MemSystem::access`] in nondecreasing time.
//!
//! Time: picoseconds for the launch path and the memory system, core cycles inside the SMs
//! (cycle `c` is the instant `c * core_period_ps`; a time in picoseconds becomes the first
//! cycle at or after it).
//!
//! - **Host** (command list, in order): `MemcpyHtoD` goes to
//!   [`MemSystem::memcpy_to_device`] (no time is modelled for the copy itself); `Alloc` is
//!   ignored; `KernelLaunch` is submitted at the host's current time and occupies the host
//!   for `launch.host_to_gcp_ps` (back-to-back launches are spaced by it).
//! - **Global CP**: receives a launch `host_to_gcp_ps` after its submission; kernels run
//!   one after another (stream order): a kernel starts at the later of its arrival and the
//!   previous kernel's completion; [`MemSystem::kernel_boundary`] between kernels.
//! - **Local CP**: receives the kernel `gcp_to_lcp_ps` later; first fills every SM
//!   round-robin (CTA 0 to SM 0, CTA 1 to SM 1, ..., then a second round) up to
//!   [`GpuConfig::max_ctas_per_sm`], then sends the next CTA (listing order) to an SM
//!   when one of its CTAs completes. A CTA reaches its SM `cta_dispatch_ps` after it is
//!   sent.
//! - **Completion**: the kernel completes, as seen by the host, `completion_ps` after its
//!   last CTA completes (a CTA completes when its warps have finished and their results
//!   are written).
//!
//! The event loop: a priority queue of `(next event cycle, SM id)` (ties by SM id). An
//! SM's event is the earliest cycle at which a warp may issue, a finished CTA completes,
//! or a dispatched CTA arrives; at it, the SM accounts the skipped cycles as stalls, takes
//! arrivals, completes CTAs, and runs one cycle. CTAs are decoded lazily by one
//! [`ChunkDecoder`] when dispatched, so memory follows the resident CTAs, not the trace.

use crate::config::GpuConfig;
use crate::mem::{Access, MemRequest, MemSystem, Space};
use crate::sm::{KernelPrep, MemIssue, MemPort, MemToken, Sm, SmError, SmSpec, SmStats};
use crate::stats::{
    ChipletStats, ClassCounts, KernelStats, RunStats, StallStats, Totals, STATS_VERSION,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use tessera_interconnect::Picos;
use tessera_traces::{
    ChunkDecoder, Command, DecodedCta, KernelMeta, MemSpace, OpClass, TraceFile, WarpInst,
};

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
    /// A configuration the single-partition GPU cannot run yet.
    #[error("{0}")]
    Unsupported(String),
}

/// First cycle at or after `ps`.
fn cycle_at(ps: Picos, period: Picos) -> u64 {
    ps.div_ceil(period)
}

/// The memory port of one SM: builds a [`MemRequest`] from a warp instruction.
struct Port<'m> {
    mem: &'m mut MemSystem,
    sm: u32,
    period: Picos,
    kernel: &'m KernelMeta,
    lanes: &'m mut Vec<(u32, u64)>,
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
fn classify(class: OpClass, kernel: &KernelMeta, first_addr: u64) -> (Access, Space) {
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

impl MemPort for Port<'_> {
    fn access(
        &mut self,
        cycle: u64,
        cta: &DecodedCta,
        inst: &WarpInst,
        _: MemToken,
        _: u32,
    ) -> MemIssue {
        let lanes = &mut *self.lanes;
        lanes.clear();
        cta.for_each_lane_addr(inst, |l, a| lanes.push((l, a)));
        // An instruction with no active lane (mask 0) moves no data.
        let Some(&(_, first)) = lanes.first() else {
            return MemIssue::Done(cycle + 1);
        };
        let (access, space) = classify(inst.class, self.kernel, first);
        let st = &self.kernel.statics[inst.slot as usize];
        let width = self.kernel.opcodes[st.opcode as usize].width_bytes as u32;
        let done = self.mem.access(
            cycle * self.period,
            &MemRequest {
                sm: self.sm,
                access,
                space,
                width_bytes: width,
                lanes,
            },
        );
        MemIssue::Done(cycle_at(done, self.period).max(cycle + 1))
    }
}

/// Runs every command of `trace` on the GPU of `cfg` and returns the stats.
pub fn run_trace(cfg: &GpuConfig, trace: &TraceFile) -> Result<RunStats, GpuError> {
    if cfg.chiplets != 1 {
        return Err(GpuError::Unsupported(format!(
            "chiplets: {} is not simulated yet (one partition, chiplets: 1)",
            cfg.chiplets
        )));
    }
    let mut g = Gpu::new(cfg, trace);
    for cmd in trace.commands() {
        match *cmd {
            Command::MemcpyHtoD { addr, bytes, .. } => g.mem.memcpy_to_device(addr, bytes),
            Command::Alloc { .. } => {}
            Command::KernelLaunch { kernel, .. } => g.launch(kernel as usize)?,
        }
    }
    Ok(g.finish())
}

struct Gpu<'t> {
    cfg: &'t GpuConfig,
    trace: &'t TraceFile,
    dec: ChunkDecoder<'t>,
    spec: Arc<SmSpec>,
    mem: MemSystem,
    period: Picos,
    /// When the host may submit its next command.
    host_ps: Picos,
    /// When the previous kernel completed (as seen by the host).
    prev_end_ps: Picos,
    kernels: Vec<KernelStats>,
    sm_totals: SmStats,
    stalls: StallStats,
    ctas: u64,
    lanes: Vec<(u32, u64)>,
}

impl<'t> Gpu<'t> {
    fn new(cfg: &'t GpuConfig, trace: &'t TraceFile) -> Self {
        let mut dec = trace.decoder();
        dec.set_release_pages(true);
        Gpu {
            cfg,
            trace,
            dec,
            spec: Arc::new(SmSpec::from_config(cfg)),
            mem: MemSystem::new(cfg),
            period: cfg.core_period_ps(),
            host_ps: 0,
            prev_end_ps: 0,
            kernels: Vec::new(),
            sm_totals: SmStats::default(),
            stalls: StallStats::default(),
            ctas: 0,
            lanes: Vec::with_capacity(32),
        }
    }

    fn launch(&mut self, k: usize) -> Result<(), GpuError> {
        let meta = &self.trace.kernels()[k];
        let sm_err = |sm: u32, err: SmError| GpuError::Sm {
            index: k,
            name: meta.name.clone(),
            sm,
            err,
        };
        let per_sm = self
            .cfg
            .max_ctas_per_sm(meta.threads_per_cta() as u32, meta.nregs, meta.shmem_bytes)
            .map_err(|e| GpuError::CtaNeverFits {
                index: k,
                name: meta.name.clone(),
                reason: e.to_string(),
            })?;
        if !self.kernels.is_empty() {
            self.mem.kernel_boundary();
        }
        let l = &self.cfg.launch;
        let period = self.period;
        let submit_ps = self.host_ps;
        self.host_ps = submit_ps + l.host_to_gcp_ps;
        let gcp_ps = self.host_ps.max(self.prev_end_ps);
        let lcp_ps = gcp_ps + l.gcp_to_lcp_ps;
        let start_cycle = cycle_at(lcp_ps, period);
        let total = meta.counts.ctas as u32;
        let n_sm = self.cfg.core.sm_count;

        let prep = Arc::new(KernelPrep::new(meta));
        let mut sms: Vec<Sm> = Vec::with_capacity(n_sm as usize);
        for s in 0..n_sm {
            let mut sm = Sm::new(self.spec.clone(), start_cycle, false);
            sm.set_kernel(prep.clone()).map_err(|e| sm_err(s, e))?;
            sms.push(sm);
        }
        // Per SM: CTAs sent, not yet arrived: (arrival cycle, CTA).
        let mut arrivals: Vec<VecDeque<(u64, DecodedCta, u32)>> =
            (0..n_sm).map(|_| VecDeque::new()).collect();
        let mut scheduled: Vec<Option<u64>> = vec![None; n_sm as usize];
        let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
        let mut next_cta = 0u32;
        let dispatch_ps = l.cta_dispatch_ps;

        let send = |dec: &mut ChunkDecoder<'t>,
                    arrivals: &mut Vec<VecDeque<(u64, DecodedCta, u32)>>,
                    sm: u32,
                    cta: u32,
                    at_ps: Picos|
         -> Result<u64, GpuError> {
            let c = dec.kernel_cta(k, cta)?.clone();
            let arrive = cycle_at(at_ps + dispatch_ps, period);
            arrivals[sm as usize].push_back((arrive, c, cta));
            Ok(arrive)
        };
        let wake = |heap: &mut BinaryHeap<Reverse<(u64, u32)>>,
                    scheduled: &mut Vec<Option<u64>>,
                    sm: u32,
                    at: u64| {
            let s = &mut scheduled[sm as usize];
            if s.is_none_or(|t| at < t) {
                *s = Some(at);
                heap.push(Reverse((at, sm)));
            }
        };

        for _round in 0..per_sm {
            for sm in 0..n_sm {
                if next_cta < total {
                    let a = send(&mut self.dec, &mut arrivals, sm, next_cta, lcp_ps)?;
                    wake(&mut heap, &mut scheduled, sm, a);
                    next_cta += 1;
                }
            }
        }

        let mut done_ctas = 0u32;
        let mut last_done = start_cycle;
        let mut completed: Vec<u64> = Vec::new();
        while let Some(Reverse((c, s))) = heap.pop() {
            if scheduled[s as usize] != Some(c) {
                continue;
            }
            scheduled[s as usize] = None;
            let sm = &mut sms[s as usize];
            sm.advance_to(c);
            while arrivals[s as usize].front().is_some_and(|a| a.0 <= c) {
                let (_, cta, id) = arrivals[s as usize].pop_front().expect("front");
                sm.add_cta(cta, id as u64).map_err(|e| sm_err(s, e))?;
            }
            completed.clear();
            sm.complete_ctas(c, |_, at| completed.push(at));
            for &at in &completed {
                done_ctas += 1;
                last_done = last_done.max(at);
                if next_cta < total {
                    send(&mut self.dec, &mut arrivals, s, next_cta, at * period)?;
                    next_cta += 1;
                }
            }
            let mut port = Port {
                mem: &mut self.mem,
                sm: s,
                period,
                kernel: meta,
                lanes: &mut self.lanes,
            };
            sm.step(&mut port);
            sm.check_deadlock().map_err(|e| sm_err(s, e))?;
            let next = match (sm.next_event(), arrivals[s as usize].front()) {
                (Some(a), Some(b)) => Some(a.min(b.0)),
                (a, b) => a.or(b.map(|x| x.0)),
            };
            if let Some(t) = next {
                wake(&mut heap, &mut scheduled, s, t.max(sm.now()));
            }
        }
        debug_assert_eq!(done_ctas, total, "every CTA completed");
        let end_cycle = sms.iter().map(|s| s.now()).max().unwrap_or(start_cycle);
        let end_cycle = end_cycle.max(last_done);
        let (mut warp_insts, mut thread_insts) = (0, 0);
        for sm in sms {
            let st = sm.finish(start_cycle, end_cycle);
            warp_insts += st.warp_insts;
            thread_insts += st.thread_insts;
            self.stalls.add(&st);
            let t = &mut self.sm_totals;
            t.warp_insts += st.warp_insts;
            t.thread_insts += st.thread_insts;
            t.barriers += st.barriers;
            t.exited_lanes += st.exited_lanes;
            for (a, b) in t
                .class_warp_insts
                .iter_mut()
                .zip(st.class_warp_insts.iter())
            {
                *a += b;
            }
        }
        let end_ps = if total == 0 {
            lcp_ps
        } else {
            last_done * period
        } + l.completion_ps;
        self.prev_end_ps = end_ps;
        self.ctas += total as u64;
        self.kernels.push(KernelStats {
            name: meta.name.clone(),
            grid: meta.grid,
            block: meta.block,
            ctas: total as u64,
            ctas_per_sm: per_sm,
            start_ps: submit_ps,
            end_ps,
            cycles: cycle_at(end_ps - submit_ps, period),
            warp_insts,
            thread_insts,
        });
        Ok(())
    }

    fn finish(self) -> RunStats {
        let sim_ps = self.prev_end_ps.max(self.host_ps);
        let cycles = cycle_at(sim_ps, self.period);
        let m = self.mem.stats().clone();
        let t = &self.sm_totals;
        let ipc = if cycles == 0 {
            0.0
        } else {
            t.thread_insts as f64 / cycles as f64
        };
        RunStats {
            stats_version: STATS_VERSION,
            config: self.cfg.name.clone(),
            totals: Totals {
                gpu_tot_sim_cycle: cycles,
                gpu_tot_sim_insn: t.thread_insts,
                warp_insts: t.warp_insts,
                ipc,
                sim_time_ps: sim_ps,
                kernels: self.kernels.len() as u64,
                ctas: self.ctas,
                l1d_accesses: m.l1d_accesses,
                l1d_hits: m.l1d_hits,
                l1d_misses: m.l1d_misses,
                l2_accesses: m.l2_accesses,
                l2_hits: m.l2_hits,
                l2_misses: m.l2_misses,
                dram_reads: m.dram_reads,
                dram_writes: m.dram_writes,
                dram_bytes: m.dram_bytes,
                stalls: self.stalls.clone(),
            },
            kernels: self.kernels,
            chiplets: vec![ChipletStats {
                id: 0,
                sms: self.cfg.core.sm_count,
                warp_insts: t.warp_insts,
                thread_insts: t.thread_insts,
                ctas: self.ctas,
                barriers: t.barriers,
                exited_lanes: t.exited_lanes,
                class_warp_insts: ClassCounts(t.class_warp_insts),
                stalls: self.stalls,
                memory: m,
            }],
        }
    }
}
