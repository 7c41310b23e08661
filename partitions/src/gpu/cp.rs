//! The command processors of a GPU (DESIGN.md section 5, "Launch path", "Local CP",
//! "Global CP"): one unit per chiplet, each with its local CP; chiplet 0's also hosts the
//! host replaying the command list and the global CP (a placement choice). They talk to
//! each other, to SMs and to DRAM channels only through packets.
//!
//! - **Host** (command list, in order): `KernelLaunch` is submitted at the host's current
//!   time and occupies the host for `launch.host_to_gcp_ps` (back-to-back launches are
//!   spaced by it). `MemcpyHtoD` is synchronous, as `cudaMemcpy` is: the host first waits
//!   until every kernel it submitted has completed, then the copy reaches every DRAM
//!   channel `launch.host_to_gcp_ps` later (no time is modelled for the copy itself).
//!   `Alloc` is ignored.
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
//! - **Completion**: the kernel is complete, for the host, when the last slice report has
//!   reached the global CP (with one chiplet: `completion_ps` after the local CP has the
//!   last CTA's report).
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

use crate::config::{GpuConfig, GridSplit};
use crate::mem::{Net, Packet, UnitIds};
use crate::stats::KernelStats;
use crate::Picos;
use tessera_traces::{Command, KernelMeta};

use super::{cycle_at, GpuError};

/// A kernel submitted by the host, not yet started.
#[derive(Clone, Copy, Debug)]
struct Queued {
    kernel: u32,
    submit_ps: Picos,
    arrive_ps: Picos,
}

/// The kernel the global CP is running.
#[derive(Clone, Copy, Debug)]
struct Running {
    kernel: u32,
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

/// The host and the global CP (chiplet 0's unit).
struct GlobalCp {
    commands: Vec<Command>,
    next_cmd: usize,
    /// When the host may issue its next command.
    host_ps: Picos,
    /// The host waits for every submitted kernel to complete (a `MemcpyHtoD`).
    host_blocked: bool,
    /// Kernels submitted and not yet complete.
    outstanding: usize,
    queue: VecDeque<Queued>,
    running: Option<Running>,
    /// When the previous kernel completed (as seen by the host).
    prev_end_ps: Picos,
    kernels: Vec<KernelStats>,
    /// Kernel launches in the command list.
    launches: usize,
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

/// The command processor unit of one chiplet: its local CP, and on chiplet 0 the host and
/// the global CP.
pub struct CommandProcessor {
    chiplet: u32,
    ids: UnitIds,
    period: Picos,
    host_to_gcp_ps: Picos,
    gcp_to_lcp_ps: Picos,
    cta_dispatch_ps: Picos,
    completion_ps: Picos,
    split: GridSplit,
    /// Per CTA-per-SM limit of each kernel (the occupancy calculation).
    per_sm: Vec<u32>,
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
    /// The CP units of `cfg`, one per chiplet, chiplet 0's replaying `commands`; every
    /// kernel's occupancy is checked here, so a CTA that can never fit is an error before
    /// anything runs.
    pub fn build(
        cfg: &GpuConfig,
        commands: &[Command],
        kernels: &[KernelMeta],
    ) -> Result<Vec<CommandProcessor>, GpuError> {
        let per_sm = kernels
            .iter()
            .enumerate()
            .map(|(k, meta)| {
                cfg.max_ctas_per_sm(meta.threads_per_cta() as u32, meta.nregs, meta.shmem_bytes)
                    .map_err(|e| GpuError::CtaNeverFits {
                        index: k,
                        name: meta.name.clone(),
                        reason: e.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let l = &cfg.launch;
        let ids = UnitIds::new(cfg);
        Ok((0..ids.chiplets)
            .map(|k| CommandProcessor {
                chiplet: k,
                ids,
                period: cfg.core_period_ps(),
                host_to_gcp_ps: l.host_to_gcp_ps,
                gcp_to_lcp_ps: l.gcp_to_lcp_ps,
                cta_dispatch_ps: l.cta_dispatch_ps,
                completion_ps: l.completion_ps,
                split: cfg.package.grid_split,
                per_sm: per_sm.clone(),
                global: (k == 0).then(|| GlobalCp {
                    commands: commands.to_vec(),
                    next_cmd: 0,
                    host_ps: 0,
                    host_blocked: false,
                    outstanding: 0,
                    queue: VecDeque::new(),
                    running: None,
                    prev_end_ps: 0,
                    kernels: Vec::new(),
                    launches: commands
                        .iter()
                        .filter(|c| matches!(c, Command::KernelLaunch { .. }))
                        .count(),
                }),
                pending: VecDeque::new(),
                slice: None,
                flush_l2: cfg.package.l2 == crate::config::L2Organization::Private,
                pending_flush: VecDeque::new(),
                flushing: None,
            })
            .collect())
    }

    /// The chiplet of this unit.
    pub fn chiplet(&self) -> u32 {
        self.chiplet
    }

    /// Whether this unit hosts the host and the global CP.
    pub fn is_global(&self) -> bool {
        self.global.is_some()
    }

    fn unit(&self) -> u32 {
        self.ids.cp(self.chiplet)
    }

    /// The next time the CP acts on its own (not counting packets it will receive).
    pub fn next_event(&self) -> Option<Picos> {
        let mut next = self.pending.front().map(|p| p.0);
        if let Some(&(t, _)) = self.pending_flush.front() {
            next = Some(next.map_or(t, |n: Picos| n.min(t)));
        }
        if let Some(g) = &self.global {
            let host = (!g.host_blocked && g.next_cmd < g.commands.len()).then_some(g.host_ps);
            let start = match (g.running, g.queue.front()) {
                (None, Some(q)) => Some(q.arrive_ps.max(g.prev_end_ps)),
                _ => None,
            };
            for t in [host, start].into_iter().flatten() {
                next = Some(next.map_or(t, |n: Picos| n.min(t)));
            }
        }
        next
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

    /// Sends `pkt` (a slice or a flush request) to every chiplet's local CP, arriving at
    /// `at`; this unit's own local CP takes it by the same path as a packet, without one.
    fn send_to_local_cps(&mut self, at: Picos, pkt: Packet, net: &mut dyn Net) {
        for c in 0..self.ids.chiplets {
            if c == self.chiplet {
                self.on_global_packet(at, pkt);
            } else {
                net.send(self.unit(), self.ids.cp(c), at, pkt);
            }
        }
    }

    /// Sends `pkt` (a slice or flush report) to the global CP, arriving at `at`; on chiplet
    /// 0 it is taken by the same path as a packet, without one.
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
            net.send(self.unit(), UnitIds::CP, at, pkt);
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
            Packet::FlushDone { kernel } => self.on_flush_done(at, kernel, kernels),
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
        let chiplets = self.ids.chiplets;
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
                g.finish_kernel(r, kernels, period);
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
    ) -> Result<(), GpuError> {
        let chiplets = self.ids.chiplets;
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
            g.finish_kernel(r, kernels, period);
        }
        Ok(())
    }

    /// Does everything due at `t` (host commands, a kernel start, a slice start).
    pub fn run_at(
        &mut self,
        t: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        if self.global.is_some() {
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

    fn run_global(
        &mut self,
        t: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let (ids, unit) = (self.ids, self.unit());
        let (host_to_gcp, gcp_to_lcp) = (self.host_to_gcp_ps, self.gcp_to_lcp_ps);
        loop {
            let Some(g) = self.global.as_mut() else {
                return Ok(());
            };
            let mut progressed = false;
            while !g.host_blocked && g.next_cmd < g.commands.len() && g.host_ps <= t {
                progressed = true;
                match g.commands[g.next_cmd] {
                    Command::MemcpyHtoD { .. } => {
                        if g.outstanding > 0 {
                            g.host_blocked = true;
                            break;
                        }
                        let arrive = g.host_ps + host_to_gcp;
                        for c in 0..ids.total_channels() {
                            let pkt = Packet::Memcpy {
                                command: g.next_cmd as u32,
                            };
                            net.send(unit, ids.channel(c), arrive, pkt);
                        }
                    }
                    Command::Alloc { .. } => {}
                    Command::KernelLaunch { kernel, .. } => {
                        if kernel as usize >= kernels.len() {
                            return Err(GpuError::Protocol(format!(
                                "command {} launches kernel {kernel}, which the trace does not have",
                                g.next_cmd
                            )));
                        }
                        g.queue.push_back(Queued {
                            kernel,
                            submit_ps: g.host_ps,
                            arrive_ps: g.host_ps + host_to_gcp,
                        });
                        g.host_ps += host_to_gcp;
                        g.outstanding += 1;
                    }
                }
                g.next_cmd += 1;
            }
            if g.running.is_none() {
                if let Some(&q) = g.queue.front() {
                    let start = q.arrive_ps.max(g.prev_end_ps);
                    if start <= t {
                        g.queue.pop_front();
                        progressed = true;
                        let k = q.kernel as usize;
                        g.running = Some(Running {
                            kernel: q.kernel,
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
        let (n, k) = (self.ids.chiplets, self.chiplet);
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
                        self.ids.sm(k * sms + s),
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
        if let Some(g) = &self.global {
            if g.next_cmd < g.commands.len() || g.running.is_some() || !g.queue.is_empty() {
                return Some(format!(
                    "the command processor is at command {} of {} with {} kernel(s) outstanding",
                    g.next_cmd,
                    g.commands.len(),
                    g.outstanding
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

    /// The end of the simulated time: the host's last action or the last kernel's
    /// completion (chiplet 0's unit; 0 elsewhere).
    pub fn end_ps(&self) -> Picos {
        self.global
            .as_ref()
            .map_or(0, |g| g.prev_end_ps.max(g.host_ps))
    }

    /// Kernel launches completed so far, and in the command list (chiplet 0's unit).
    pub fn kernels_done(&self) -> Option<(usize, usize)> {
        self.global.as_ref().map(|g| (g.kernels.len(), g.launches))
    }

    /// The kernels' stats (chiplet 0's unit; empty elsewhere).
    pub fn into_kernels(self) -> Vec<KernelStats> {
        self.global.map(|g| g.kernels).unwrap_or_default()
    }
}

impl GlobalCp {
    fn finish_kernel(&mut self, r: Running, kernels: &[KernelMeta], period: Picos) {
        let end_ps = r.last_report_ps;
        let meta = &kernels[r.kernel as usize];
        self.kernels.push(KernelStats {
            name: meta.name.clone(),
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
        });
        self.prev_end_ps = end_ps;
        self.running = None;
        self.outstanding -= 1;
        if self.host_blocked && self.outstanding == 0 {
            self.host_blocked = false;
            self.host_ps = self.host_ps.max(end_ps);
        }
    }
}
