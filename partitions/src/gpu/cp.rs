//! The command processors of a GPU (DESIGN.md section 5, "Launch path", "Local CP",
//! "Global CP"): one unit per chiplet, each with its local CP; chiplet 0's also hosts the
//! host replaying the command list and the global CP (a placement choice). They talk to
//! each other, to SMs and to DRAM channels only through packets.
//!
//! With `system.gpus` > 1 each GPU has its own global CP (on its chiplet 0's unit) with
//! its own in-order stream, and the host (on GPU 0's chiplet 0 unit) replays the command
//! list in order with CUDA semantics: a `KernelLaunch` goes to the global CP of the GPU of
//! its `device` (a packet arriving `launch.host_to_gcp_ps` later; for GPU 0 inside the
//! unit, as with one GPU) and the host moves on, so kernels of different GPUs overlap; a
//! `MemcpyHtoD` to device `d` waits for the host to have seen every kernel it launched on
//! `d` complete, then takes `system.host_link` time (below), the host waiting. A global CP
//! reports each kernel's completion to the host, which sees it
//! `system.host_link.completion_ps` later (GPU 0's too, so every GPU is treated alike).
//! The rest of this documentation is per GPU.
//!
//! - **Host** (command list, in order): `KernelLaunch` is submitted at the host's current
//!   time and occupies the host for `launch.host_to_gcp_ps` (back-to-back launches are
//!   spaced by it). `MemcpyHtoD` is synchronous, as `cudaMemcpy` is: the host first waits
//!   until every kernel it submitted to the copy's GPU has completed, then the copy takes
//!   `system.host_link.latency_ps + ceil(bytes / bandwidth_bytes_per_s)` (nothing with a
//!   bandwidth of 0, the default: as Accel-Sim, no time for the copy itself), the host
//!   waiting, and reaches the GPU's DRAM channels `launch.host_to_gcp_ps` after it ends.
//!   `Alloc` is ignored here (it places pages on GPUs, `mem::GpuHomes`).
//! - **Global CP**: a kernel arrives `host_to_gcp_ps` after its submission and starts at the
//!   later of its arrival and the previous kernel's completion (one stream, in order). It
//!   splits the grid across chiplets (`package.grid_split`: contiguous ranges or round
//!   robin) and sends each local CP its slice, which arrives `gcp_to_lcp_ps` later (a packet
//!   to another chiplet's CP; the same delay inside chiplet 0's unit).
//! - **Local CP**: when its slice arrives, first fills every SM of its chiplet round-robin
//!   (its first CTA to its first SM, ...) up to the occupancy limit, then sends the slice's
//!   next CTA (listing order) to an SM when that SM reports a CTA complete. Dispatches and
//!   completion reports each take `cta_dispatch_ps`. When its slice's last CTA report is
//!   in, it reports the slice done; the report reaches the global CP `completion_ps` later.
//! - **Completion**: the kernel is complete when the last slice report has reached the
//!   global CP (with one chiplet: `completion_ps` after the local CP has the last CTA's
//!   report); with one GPU the host sees it then, with several
//!   `system.host_link.completion_ps` later. A kernel's `end_ps` in the stats is the
//!   former, the run's end the latest of the kernels' ends and the host's last action.
//! - **Kernel-boundary flush** (`package.l2: private` only: CPCoh's "Baseline",
//!   dalmia-2023 section 5.2, a release and acquire at every kernel boundary): when the last
//!   slice report is in, the global CP sends every local CP a flush request (arriving
//!   `gcp_to_lcp_ps` later); each local CP tells each of its DRAM channel units
//!   (`cta_dispatch_ps`), which writes its private L2 slices' dirty sectors back to their
//!   home LLC and invalidates every line, and acknowledges (`cta_dispatch_ps`) when its last
//!   write-back has left; when all its channels have, the local CP acknowledges
//!   to the global CP (`completion_ps`). The kernel completes, and the next may start, when
//!   the last acknowledgement is in. With a memory-side L2 there is no flush.

use std::collections::VecDeque;

use crate::config::GridSplit;
use crate::mem::{Net, Packet, UnitIds};
use crate::stats::KernelStats;
use crate::Picos;
use tessera_traces::{Command, KernelMeta};

use super::launch::CpParams;
use super::{cycle_at, GpuError};

/// A kernel submitted by the host, not yet started.
#[derive(Clone, Copy, Debug)]
struct Queued {
    kernel: u32,
    /// Its launch's rank among the command list's launches.
    launch: u32,
    submit_ps: Picos,
    arrive_ps: Picos,
}

/// The kernel the global CP is running.
#[derive(Clone, Copy, Debug)]
struct Running {
    kernel: u32,
    launch: u32,
    submit_ps: Picos,
    total: u32,
    per_sm: u32,
    /// Slice reports received, and when the latest arrived (then, while the L2s are being
    /// flushed, the latest flush acknowledgement).
    reported: u32,
    last_report_ps: Picos,
    /// Flush acknowledgements received (`package.l2: private`).
    flushed: u32,
}

/// A local CP's flush in progress: acknowledgements from its channels so far, and when the
/// latest arrived.
#[derive(Clone, Copy, Debug)]
struct LocalFlush {
    kernel: u32,
    acks: u32,
    last_ps: Picos,
}

/// The host replaying the command list (GPU 0's chiplet 0 unit).
struct Host {
    commands: Vec<Command>,
    next_cmd: usize,
    /// When the host may issue its next command.
    host_ps: Picos,
    /// The host waits for every kernel it submitted to this GPU (a `MemcpyHtoD`).
    blocked_on: Option<u32>,
    /// By GPU: kernels submitted whose completion the host has not seen yet.
    outstanding: Vec<usize>,
    /// GPU 0's completions on their way to the host (several GPUs), when it sees them.
    seen: VecDeque<Picos>,
    /// Kernel launches in the command list, those submitted, and those seen complete.
    launches: usize,
    launched: u32,
    completed: usize,
    /// `system.host_link`: copy bandwidth (0: copies take no time) and latency.
    copy_bytes_per_s: u64,
    copy_latency_ps: Picos,
}

/// A GPU's global CP (its chiplet 0's unit).
struct GlobalCp {
    queue: VecDeque<Queued>,
    running: Option<Running>,
    /// When the previous kernel completed.
    prev_end_ps: Picos,
    /// The kernels' stats by launch rank.
    kernels: Vec<(u32, KernelStats)>,
}

/// The local CP's share of a kernel: CTAs `first + i * stride` for `i < count`.
#[derive(Clone, Copy, Debug)]
struct Slice {
    kernel: u32,
    first: u32,
    stride: u32,
    count: u32,
    next: u32,
    done: u32,
}

/// The command processor unit of one chiplet: its local CP, on a GPU's chiplet 0 its global
/// CP, and on GPU 0's chiplet 0 the host.
pub struct CommandProcessor {
    chiplet: u32,
    /// The GPU of `chiplet`, and its first chiplet (the global CP's).
    gpu: u32,
    gpu_base: u32,
    ids: UnitIds,
    period: Picos,
    host_to_gcp_ps: Picos,
    gcp_to_lcp_ps: Picos,
    cta_dispatch_ps: Picos,
    completion_ps: Picos,
    /// A global CP's completion to the host (`system.host_link.completion_ps`; 0 with one
    /// GPU, where they are one unit).
    to_host_ps: Picos,
    split: GridSplit,
    /// Per CTA-per-SM limit of each kernel (the occupancy calculation).
    per_sm: Vec<u32>,
    host: Option<Host>,
    global: Option<GlobalCp>,
    /// Slices handed over inside this unit (chiplet 0), with their arrival.
    pending: VecDeque<(Picos, u32)>,
    slice: Option<Slice>,
    /// Kernel boundaries flush the private L2s (`package.l2: private`).
    flush_l2: bool,
    /// Flush requests received (or handed over inside chiplet 0's unit), with their arrival.
    pending_flush: VecDeque<(Picos, u32)>,
    flushing: Option<LocalFlush>,
}

impl CommandProcessor {
    /// The CP units of `cfg`, one per chiplet of the system, chiplet 0's replaying
    /// `commands`; every kernel's occupancy is checked here, so a CTA that can never fit is
    /// an error before anything runs, and so is a command for a device the system does not
    /// have (with several GPUs).
    pub fn build(
        params: &CpParams,
        commands: &[Command],
        kernels: &[KernelMeta],
    ) -> Result<Vec<CommandProcessor>, GpuError> {
        let per_sm = kernels
            .iter()
            .enumerate()
            .map(|(k, meta)| {
                params
                    .max_ctas_per_sm(meta.threads_per_cta() as u32, meta.nregs, meta.shmem_bytes)
                    .map_err(|e| GpuError::CtaNeverFits {
                        index: k,
                        name: meta.name.clone(),
                        reason: e.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let l = params;
        let ids = params.ids;
        let gpus = ids.gpus();
        if gpus > 1 {
            for (i, c) in commands.iter().enumerate() {
                let (Command::Alloc { device, .. }
                | Command::MemcpyHtoD { device, .. }
                | Command::KernelLaunch { device, .. }) = *c;
                if device >= gpus {
                    return Err(GpuError::Unsupported(format!(
                        "command {i} ({c:?}) is for device {device}, but the config has \
                         system.gpus = {gpus}"
                    )));
                }
            }
        }
        Ok((0..ids.chiplets)
            .map(|k| {
                let gpu = ids.gpu_of_chiplet(k);
                let gpu_base = ids.gpu_first_chiplet(gpu);
                CommandProcessor {
                    chiplet: k,
                    gpu,
                    gpu_base,
                    ids,
                    period: l.core_ps,
                    host_to_gcp_ps: l.host_to_gcp_ps,
                    gcp_to_lcp_ps: l.gcp_to_lcp_ps,
                    cta_dispatch_ps: l.cta_dispatch_ps,
                    completion_ps: l.completion_ps,
                    to_host_ps: l.to_host_ps,
                    split: l.split,
                    per_sm: per_sm.clone(),
                    host: (k == 0).then(|| Host {
                        commands: commands.to_vec(),
                        next_cmd: 0,
                        host_ps: 0,
                        blocked_on: None,
                        outstanding: vec![0; gpus as usize],
                        seen: VecDeque::new(),
                        launches: commands
                            .iter()
                            .filter(|c| matches!(c, Command::KernelLaunch { .. }))
                            .count(),
                        launched: 0,
                        completed: 0,
                        copy_bytes_per_s: l.copy_bytes_per_s,
                        copy_latency_ps: l.copy_latency_ps,
                    }),
                    global: (k == gpu_base).then(|| GlobalCp {
                        queue: VecDeque::new(),
                        running: None,
                        prev_end_ps: 0,
                        kernels: Vec::new(),
                    }),
                    pending: VecDeque::new(),
                    slice: None,
                    flush_l2: l.flush_l2,
                    pending_flush: VecDeque::new(),
                    flushing: None,
                }
            })
            .collect())
    }

    /// The chiplet of this unit.
    pub fn chiplet(&self) -> u32 {
        self.chiplet
    }

    /// Whether this unit hosts a GPU's global CP.
    pub fn is_global(&self) -> bool {
        self.global.is_some()
    }

    /// Whether this unit hosts the host (GPU 0's chiplet 0).
    pub fn is_host(&self) -> bool {
        self.host.is_some()
    }

    /// The first chiplet of this unit's GPU, whose unit hosts its global CP.
    pub fn gpu_base(&self) -> u32 {
        self.gpu_base
    }

    fn unit(&self) -> u32 {
        self.ids.cp(self.chiplet)
    }

    /// The next time the CP acts on its own (not counting packets it will receive).
    pub fn next_event(&self) -> Option<Picos> {
        let mut next = self.pending.front().map(|p| p.0);
        let mut add = |t: Picos| next = Some(next.map_or(t, |n: Picos| n.min(t)));
        if let Some(&(t, _)) = self.pending_flush.front() {
            add(t);
        }
        if let Some(h) = &self.host {
            if h.blocked_on.is_none() && h.next_cmd < h.commands.len() {
                add(h.host_ps);
            }
            if let Some(&t) = h.seen.front() {
                add(t);
            }
        }
        if let Some(g) = &self.global {
            if let (None, Some(q)) = (g.running, g.queue.front()) {
                add(q.arrive_ps.max(g.prev_end_ps));
            }
        }
        next
    }

    /// The earliest arrival of a CTA dispatch this CP can still send to one of its SMs,
    /// other than the answer to that SM's own completion report (which arrives
    /// `cta_dispatch_ps` after the report; the SM accounts for those), when no unit runs
    /// before `now`: a slice starts only at a `pending` entry's time, and a new entry (a
    /// kernel started by the global CP, or a slice packet from another chiplet's CP) is at
    /// least `gcp_to_lcp_ps` after the time of whatever started it, which is at least
    /// `now`. What lets an SM run ahead of the CP (see `GpuPartition::run_sm`).
    pub fn dispatch_floor(&self, now: Picos) -> Picos {
        let start = now.saturating_add(self.gcp_to_lcp_ps);
        let start = self.pending.front().map_or(start, |&(at, _)| at.min(start));
        start.saturating_add(self.cta_dispatch_ps)
    }

    /// The earliest arrival of a packet this CP unit can still send to a DRAM channel
    /// unit, when no unit runs before `now`: a host copy (`Memcpy`) leaves the host no
    /// earlier than its clock, which only moves forward, and arrives `host_to_gcp_ps`
    /// later; a kernel-boundary flush (private L2s only) starts at a `pending_flush`
    /// entry's time, or at least `gcp_to_lcp_ps` after whatever starts it, and reaches the
    /// channels `cta_dispatch_ps` after it starts. What lets a channel run ahead of the CP
    /// (see `GpuPartition::run_channel`).
    pub fn channel_floor(&self, now: Picos) -> Picos {
        let mut floor = Picos::MAX;
        if let Some(h) = &self.host {
            if h.next_cmd < h.commands.len() {
                floor = h.host_ps.saturating_add(self.host_to_gcp_ps);
            }
        }
        if self.flush_l2 {
            let start = now.saturating_add(self.gcp_to_lcp_ps);
            let start = self
                .pending_flush
                .front()
                .map_or(start, |&(at, _)| at.min(start));
            floor = floor.min(start.saturating_add(self.cta_dispatch_ps));
        }
        floor
    }

    /// SM `sm` reports CTA completion at `at`.
    pub fn on_cta_done(
        &mut self,
        at: Picos,
        sm: u32,
        kernel: u32,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let unit = self.unit();
        let Some(r) = self.slice.as_mut().filter(|r| r.kernel == kernel) else {
            return Err(GpuError::Protocol(format!(
                "SM {sm} reported a CTA of kernel {kernel}, which chiplet {}'s local CP is not \
                 running",
                self.chiplet
            )));
        };
        r.done += 1;
        if r.next < r.count {
            let pkt = Packet::Dispatch {
                kernel,
                cta: r.first + r.next * r.stride,
            };
            r.next += 1;
            net.send(unit, self.ids.sm(sm), at + self.cta_dispatch_ps, pkt);
        }
        if r.done == r.count {
            self.slice = None;
            self.slice_done(kernel, at, kernels, net)?;
        }
        Ok(())
    }

    /// This chiplet's slice of `kernel` completed at `at` (the last CTA report): the report
    /// reaches the global CP `completion_ps` later.
    fn slice_done(
        &mut self,
        kernel: u32,
        at: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let arrive = at + self.completion_ps;
        self.send_to_global_cp(arrive, Packet::SliceDone { kernel }, kernels, net)
    }

    /// Sends `pkt` (a slice or a flush request) to every local CP of this GPU, arriving at
    /// `at`; this unit's own local CP takes it by the same path as a packet, without one.
    fn send_to_local_cps(&mut self, at: Picos, pkt: Packet, net: &mut dyn Net) {
        for c in self.gpu_base..self.gpu_base + self.ids.gpu_chiplets {
            if c == self.chiplet {
                self.on_global_packet(at, pkt);
            } else {
                net.send(self.unit(), self.ids.cp(c), at, pkt);
            }
        }
    }

    /// Sends `pkt` (a slice or flush report) to this GPU's global CP, arriving at `at`; on
    /// the GPU's chiplet 0 it is taken by the same path as a packet, without one.
    fn send_to_global_cp(
        &mut self,
        at: Picos,
        pkt: Packet,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        if self.global.is_some() {
            self.on_local_report(at, pkt, kernels, net)
        } else {
            net.send(self.unit(), self.ids.cp(self.gpu_base), at, pkt);
            Ok(())
        }
    }

    /// The local CP receives a packet of the global CP at `at`: its slice of a kernel to
    /// run, or the flush to do after one (other packets are not the global CP's).
    pub fn on_global_packet(&mut self, at: Picos, pkt: Packet) {
        match pkt {
            Packet::Slice { kernel } => self.pending.push_back((at, kernel)),
            Packet::Flush { kernel } => self.pending_flush.push_back((at, kernel)),
            _ => {}
        }
    }

    /// The global CP receives a local CP's report at `at`: a slice done, or a flush done.
    pub fn on_local_report(
        &mut self,
        at: Picos,
        pkt: Packet,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        match pkt {
            Packet::SliceDone { kernel } => self.on_slice_done(at, kernel, kernels, net),
            Packet::FlushDone { kernel } => self.on_flush_done(at, kernel, kernels, net),
            other => Err(GpuError::Protocol(format!(
                "the global CP received {other:?} as a local CP's report"
            ))),
        }
    }

    /// The global CP has a slice report of `kernel` at `at`.
    fn on_slice_done(
        &mut self,
        at: Picos,
        kernel: u32,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let chiplets = self.ids.gpu_chiplets;
        let period = self.period;
        let (flush_l2, gcp_to_lcp) = (self.flush_l2, self.gcp_to_lcp_ps);
        let Some(g) = self.global.as_mut() else {
            return Err(GpuError::Protocol(format!(
                "chiplet {}'s CP, which has no global CP, got a slice report",
                self.chiplet
            )));
        };
        let Some(r) = g.running.as_mut().filter(|r| r.kernel == kernel) else {
            return Err(GpuError::Protocol(format!(
                "a slice report of kernel {kernel}, which is not running"
            )));
        };
        r.reported += 1;
        r.last_report_ps = r.last_report_ps.max(at);
        if r.reported == chiplets {
            if !flush_l2 {
                let r = *r;
                let end = g.finish_kernel(r, kernels, period, self.gpu);
                self.report_to_host(end, net);
                return Ok(());
            }
            // Every chiplet's L2 is written back and invalidated before the kernel counts
            // as complete.
            let lcp = r.last_report_ps + gcp_to_lcp;
            self.send_to_local_cps(lcp, Packet::Flush { kernel }, net);
        }
        Ok(())
    }

    /// The local CP starts the flush after `kernel` at `at`: each of its channels is told.
    fn start_flush(&mut self, at: Picos, kernel: u32, net: &mut dyn Net) -> Result<(), GpuError> {
        if self.flushing.is_some() {
            return Err(GpuError::Protocol(format!(
                "chiplet {} got a flush request after kernel {kernel} while flushing",
                self.chiplet
            )));
        }
        let channels = self.ids.channels;
        for c in 0..channels {
            let ch = self.ids.channel(self.chiplet * channels + c);
            net.send(
                self.unit(),
                ch,
                at + self.cta_dispatch_ps,
                Packet::Flush { kernel },
            );
        }
        self.flushing = Some(LocalFlush {
            kernel,
            acks: 0,
            last_ps: at,
        });
        Ok(())
    }

    /// A channel of this chiplet acknowledges the flush after `kernel` at `at`; the last one
    /// makes the local CP acknowledge to the global CP (`completion_ps` later).
    pub fn on_channel_flushed(
        &mut self,
        at: Picos,
        kernel: u32,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let channels = self.ids.channels;
        let Some(f) = self.flushing.as_mut().filter(|f| f.kernel == kernel) else {
            return Err(GpuError::Protocol(format!(
                "chiplet {}'s local CP got a flush acknowledgement of kernel {kernel}, which it \
                 is not flushing",
                self.chiplet
            )));
        };
        f.acks += 1;
        f.last_ps = f.last_ps.max(at);
        if f.acks < channels {
            return Ok(());
        }
        let arrive = f.last_ps + self.completion_ps;
        self.flushing = None;
        self.send_to_global_cp(arrive, Packet::FlushDone { kernel }, kernels, net)
    }

    /// The global CP has a chiplet's flush acknowledgement of `kernel` at `at`; the last one
    /// completes the kernel.
    fn on_flush_done(
        &mut self,
        at: Picos,
        kernel: u32,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let chiplets = self.ids.gpu_chiplets;
        let period = self.period;
        let Some(g) = self.global.as_mut() else {
            return Err(GpuError::Protocol(format!(
                "chiplet {}'s CP, which has no global CP, got a flush acknowledgement",
                self.chiplet
            )));
        };
        let Some(r) = g
            .running
            .as_mut()
            .filter(|r| r.kernel == kernel && r.reported == chiplets)
        else {
            return Err(GpuError::Protocol(format!(
                "a flush acknowledgement of kernel {kernel}, which is not being flushed"
            )));
        };
        r.flushed += 1;
        r.last_report_ps = r.last_report_ps.max(at);
        if r.flushed == chiplets {
            let r = *r;
            let end = g.finish_kernel(r, kernels, period, self.gpu);
            self.report_to_host(end, net);
        }
        Ok(())
    }

    /// A kernel of this GPU completed at `end` (its global CP has the last report): the host
    /// sees it `to_host_ps` later (at once with one GPU, as before multi-GPU systems).
    fn report_to_host(&mut self, end: Picos, net: &mut dyn Net) {
        let at = end + self.to_host_ps;
        match self.host.as_mut() {
            Some(h) if self.to_host_ps == 0 => h.kernel_done(at, self.gpu),
            Some(h) => h.seen.push_back(at),
            None => net.send(
                self.unit(),
                UnitIds::CP,
                at,
                Packet::KernelDone { gpu: self.gpu },
            ),
        }
    }

    /// The host sees a kernel of GPU `gpu` complete at `at` (a [`Packet::KernelDone`]).
    pub fn on_kernel_done(&mut self, at: Picos, gpu: u32) -> Result<(), GpuError> {
        match self.host.as_mut() {
            Some(h) if (gpu as usize) < h.outstanding.len() && h.outstanding[gpu as usize] > 0 => {
                h.kernel_done(at, gpu);
                Ok(())
            }
            _ => Err(GpuError::Protocol(format!(
                "chiplet {}'s CP got a kernel completion of GPU {gpu} it did not expect",
                self.chiplet
            ))),
        }
    }

    /// This GPU's global CP receives a launch from the host at `at` (a [`Packet::Launch`]).
    pub fn on_launch(&mut self, at: Picos, kernel: u32, launch: u32) -> Result<(), GpuError> {
        let h = self.host_to_gcp_ps;
        let Some(g) = self.global.as_mut() else {
            return Err(GpuError::Protocol(format!(
                "chiplet {}'s CP, which has no global CP, got a launch of kernel {kernel}",
                self.chiplet
            )));
        };
        g.queue.push_back(Queued {
            kernel,
            launch,
            submit_ps: at.saturating_sub(h),
            arrive_ps: at,
        });
        Ok(())
    }

    /// Does everything due at `t` (host commands, a kernel start, a slice start).
    pub fn run_at(
        &mut self,
        t: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        if let Some(h) = self.host.as_mut() {
            while h.seen.front().is_some_and(|&s| s <= t) {
                if let Some(s) = h.seen.pop_front() {
                    h.kernel_done(s, 0);
                }
            }
        }
        if self.host.is_some() || self.global.is_some() {
            self.run_global(t, kernels, net)?;
        }
        while let Some(&(at, kernel)) = self.pending.front() {
            if at > t {
                break;
            }
            self.pending.pop_front();
            self.start_slice(at, kernel, kernels, net)?;
        }
        while let Some(&(at, kernel)) = self.pending_flush.front() {
            if at > t {
                break;
            }
            self.pending_flush.pop_front();
            self.start_flush(at, kernel, net)?;
        }
        Ok(())
    }

    /// The host's commands due by `t`; whether it did any.
    fn run_host(
        &mut self,
        t: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<bool, GpuError> {
        let (ids, unit) = (self.ids, self.unit());
        let host_to_gcp = self.host_to_gcp_ps;
        let gpus = ids.gpus();
        let Some(h) = self.host.as_mut() else {
            return Ok(false);
        };
        let mut progressed = false;
        while h.blocked_on.is_none() && h.next_cmd < h.commands.len() && h.host_ps <= t {
            progressed = true;
            // A device the system does not have (only with one GPU: checked at build
            // otherwise) runs on GPU 0.
            let gpu_of = |d: u32| if gpus > 1 { d } else { 0 };
            match h.commands[h.next_cmd] {
                Command::MemcpyHtoD { device, bytes, .. } => {
                    let g = gpu_of(device);
                    if h.outstanding[g as usize] > 0 {
                        h.blocked_on = Some(g);
                        break;
                    }
                    let end = h.host_ps + h.copy_ps(bytes);
                    let arrive = end + host_to_gcp;
                    let per_gpu = ids.channels * ids.gpu_chiplets;
                    for c in g * per_gpu..(g + 1) * per_gpu {
                        let pkt = Packet::Memcpy {
                            command: h.next_cmd as u32,
                        };
                        net.send(unit, ids.channel(c), arrive, pkt);
                    }
                    h.host_ps = end;
                }
                Command::Alloc { .. } => {}
                Command::KernelLaunch { device, kernel } => {
                    if kernel as usize >= kernels.len() {
                        return Err(GpuError::Protocol(format!(
                            "command {} launches kernel {kernel}, which the trace does not have",
                            h.next_cmd
                        )));
                    }
                    let g = gpu_of(device);
                    let launch = h.launched;
                    h.launched += 1;
                    let arrive_ps = h.host_ps + host_to_gcp;
                    match self.global.as_mut() {
                        // GPU 0's global CP is in this unit.
                        Some(gcp) if g == 0 => gcp.queue.push_back(Queued {
                            kernel,
                            launch,
                            submit_ps: h.host_ps,
                            arrive_ps,
                        }),
                        _ => net.send(
                            unit,
                            ids.cp(ids.gpu_first_chiplet(g)),
                            arrive_ps,
                            Packet::Launch { kernel, launch },
                        ),
                    }
                    h.host_ps += host_to_gcp;
                    h.outstanding[g as usize] += 1;
                }
            }
            h.next_cmd += 1;
        }
        Ok(progressed)
    }

    fn run_global(
        &mut self,
        t: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let gcp_to_lcp = self.gcp_to_lcp_ps;
        loop {
            let mut progressed = self.run_host(t, kernels, net)?;
            let Some(g) = self.global.as_mut() else {
                return Ok(());
            };
            if g.running.is_none() {
                if let Some(&q) = g.queue.front() {
                    let start = q.arrive_ps.max(g.prev_end_ps);
                    if start <= t {
                        g.queue.pop_front();
                        progressed = true;
                        let k = q.kernel as usize;
                        g.running = Some(Running {
                            kernel: q.kernel,
                            launch: q.launch,
                            submit_ps: q.submit_ps,
                            total: kernels[k].counts.ctas as u32,
                            per_sm: self.per_sm[k],
                            reported: 0,
                            last_report_ps: 0,
                            flushed: 0,
                        });
                        // Every local CP gets its slice (empty ones too: they report at once).
                        let pkt = Packet::Slice { kernel: q.kernel };
                        self.send_to_local_cps(start + gcp_to_lcp, pkt, net);
                    }
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    /// The local CP starts its slice of `kernel` at `at` and fills its SMs.
    fn start_slice(
        &mut self,
        at: Picos,
        kernel: u32,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let meta = kernels.get(kernel as usize).ok_or_else(|| {
            GpuError::Protocol(format!(
                "a slice of kernel {kernel}, which the trace does not have"
            ))
        })?;
        if self.slice.is_some() {
            return Err(GpuError::Protocol(format!(
                "chiplet {} got a slice of kernel {kernel} while running another",
                self.chiplet
            )));
        }
        let total = meta.counts.ctas as u32;
        let (n, k) = (self.ids.gpu_chiplets, self.chiplet - self.gpu_base);
        let (first, stride, count) = match self.split {
            GridSplit::Contiguous => {
                let lo = (k as u64 * total as u64 / n as u64) as u32;
                let hi = ((k as u64 + 1) * total as u64 / n as u64) as u32;
                (lo, 1, hi - lo)
            }
            GridSplit::RoundRobin => (k, n, total.saturating_sub(k).div_ceil(n)),
        };
        let mut r = Slice {
            kernel,
            first,
            stride,
            count,
            next: 0,
            done: 0,
        };
        if count == 0 {
            return self.slice_done(kernel, at, kernels, net);
        }
        let per_sm = self.per_sm[kernel as usize];
        let sms = self.ids.sms;
        for _round in 0..per_sm {
            for s in 0..sms {
                if r.next < r.count {
                    let pkt = Packet::Dispatch {
                        kernel,
                        cta: r.first + r.next * r.stride,
                    };
                    net.send(
                        self.unit(),
                        self.ids.sm(self.chiplet * sms + s),
                        at + self.cta_dispatch_ps,
                        pkt,
                    );
                    r.next += 1;
                }
            }
        }
        self.slice = Some(r);
        Ok(())
    }

    /// Unfinished work, for a run that went quiet: `None` when every command is done.
    pub fn unfinished(&self) -> Option<String> {
        if let Some(h) = &self.host {
            let outstanding: usize = h.outstanding.iter().sum();
            if h.next_cmd < h.commands.len() || outstanding > 0 {
                return Some(format!(
                    "the host is at command {} of {} with {outstanding} kernel(s) outstanding",
                    h.next_cmd,
                    h.commands.len(),
                ));
            }
        }
        if let Some(g) = &self.global {
            if g.running.is_some() || !g.queue.is_empty() {
                return Some(format!(
                    "GPU {}'s global CP has {} kernel(s) queued or running",
                    self.gpu,
                    g.queue.len() + usize::from(g.running.is_some())
                ));
            }
        }
        if let Some(r) = &self.slice {
            return Some(format!(
                "chiplet {}'s local CP has {} CTA(s) of kernel {} outstanding",
                self.chiplet,
                r.count - r.done,
                r.kernel
            ));
        }
        None
    }

    /// The end of the simulated time as this unit knows it: the host's last action, or its
    /// GPU's last kernel completion (0 for other units).
    pub fn end_ps(&self) -> Picos {
        let host = self.host.as_ref().map_or(0, |h| h.host_ps);
        let gpu = self.global.as_ref().map_or(0, |g| g.prev_end_ps);
        host.max(gpu)
    }

    /// Kernel launches the host has seen complete so far, and in the command list (the
    /// host's unit).
    pub fn kernels_done(&self) -> Option<(usize, usize)> {
        self.host.as_ref().map(|h| (h.completed, h.launches))
    }

    /// The stats of this GPU's kernels with the rank of their launch in the command list
    /// (a global CP's unit; empty elsewhere).
    pub fn into_kernels(self) -> Vec<(u32, KernelStats)> {
        self.global.map(|g| g.kernels).unwrap_or_default()
    }
}

impl Host {
    /// Simulated time of a copy of `bytes` over the host link.
    fn copy_ps(&self, bytes: u64) -> Picos {
        if self.copy_bytes_per_s == 0 {
            return 0;
        }
        let flow = (bytes as u128 * 1_000_000_000_000).div_ceil(self.copy_bytes_per_s as u128);
        self.copy_latency_ps + flow as Picos
    }

    /// The host sees a kernel of GPU `gpu` complete at `at`.
    fn kernel_done(&mut self, at: Picos, gpu: u32) {
        let g = gpu as usize;
        self.outstanding[g] = self.outstanding[g].saturating_sub(1);
        self.completed += 1;
        if self.blocked_on == Some(gpu) && self.outstanding[g] == 0 {
            self.blocked_on = None;
            self.host_ps = self.host_ps.max(at);
        }
    }
}

impl GlobalCp {
    /// Records the completed kernel `r` of GPU `gpu`; returns its end.
    fn finish_kernel(
        &mut self,
        r: Running,
        kernels: &[KernelMeta],
        period: Picos,
        gpu: u32,
    ) -> Picos {
        let end_ps = r.last_report_ps;
        let meta = &kernels[r.kernel as usize];
        self.kernels.push((
            r.launch,
            KernelStats {
                name: meta.name.clone(),
                gpu,
                grid: meta.grid,
                block: meta.block,
                ctas: r.total as u64,
                ctas_per_sm: r.per_sm,
                start_ps: r.submit_ps,
                end_ps,
                cycles: cycle_at(end_ps - r.submit_ps, period),
                // Filled in from the SMs' counters at the end of the run.
                warp_insts: 0,
                thread_insts: 0,
            },
        ));
        self.prev_end_ps = end_ps;
        self.running = None;
        end_ps
    }
}
