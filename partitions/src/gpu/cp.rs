//! The command processor unit of a chiplet (DESIGN.md section 5, "Launch path", "Local CP",
//! "Global CP"): each holds its chiplet's local CP (`local_cp.rs`); a GPU's chiplet 0's also
//! its global CP (`global_cp.rs`), and GPU 0's chiplet 0's the host replaying the command
//! list (`host.rs`), a placement choice. This file holds what they share: the unit, its
//! construction, its next event and how far ahead of it other units may run. They talk to
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
//! The rest of this documentation is per GPU; what each CP does is in its file, how they
//! finish a kernel together here.
//!
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
use std::sync::Arc;

use crate::config::GridSplit;
use crate::mem::{Ctx, UnitIds};
use crate::packet::Net;
use crate::stats::KernelStats;
use crate::Picos;
use tessera_traces::{Command, KernelMeta};

use super::global_cp::GlobalCp;
use super::host::Host;
use super::launch::CpParams;
use super::local_cp::{LocalFlush, Slice};
use super::wiring::Wiring;
use super::GpuError;

/// A chiplet's completed slices ([`CommandProcessor::spans`]): chiplet, GPU, and per slice
/// its rank among the GPU's kernels, start, end and CTAs.
pub type SliceSpans = (u32, u32, Vec<(u32, Picos, Picos, u32)>);

/// The command processor unit of one chiplet: its local CP, on a GPU's chiplet 0 its global
/// CP, and on GPU 0's chiplet 0 the host.
pub struct CommandProcessor {
    pub(super) chiplet: u32,
    /// The GPU of `chiplet`, and its first chiplet (the global CP's).
    pub(super) gpu: u32,
    pub(super) gpu_base: u32,
    pub(super) ids: UnitIds,
    pub(super) period: Picos,
    /// The latencies of its connections ([`Wiring`]) that its floors and its own paths
    /// without packets need (the net adds them to its packets).
    pub(super) host_to_gcp_ps: Picos,
    pub(super) gcp_to_lcp_ps: Picos,
    pub(super) cta_dispatch_ps: Picos,
    pub(super) split: GridSplit,
    /// Per CTA-per-SM limit of each kernel (the occupancy calculation).
    pub(super) per_sm: Vec<u32>,
    pub(super) host: Option<Host>,
    pub(super) global: Option<GlobalCp>,
    /// Slices handed over inside this unit (chiplet 0), with their arrival.
    pub(super) pending: VecDeque<(Picos, u32)>,
    pub(super) slice: Option<Slice>,
    /// Kernel boundaries flush the private L2s (`package.l2: private`).
    pub(super) flush_l2: bool,
    /// Flush requests received (or handed over inside chiplet 0's unit), with their arrival.
    pub(super) pending_flush: VecDeque<(Picos, u32)>,
    pub(super) flushing: Option<LocalFlush>,
    /// The slices its local CP ran, in order: when each started (the slice arrived), when
    /// its last CTA report came in (`None` while running), and its CTAs.
    pub(super) spans: Vec<(Picos, Option<Picos>, u32)>,
}

impl CommandProcessor {
    /// The CP units of `cfg`, one per chiplet of the system, chiplet 0's replaying
    /// `commands`; every kernel's occupancy is checked here, so a CTA that can never fit is
    /// an error before anything runs, and so is a command for a device the system does not
    /// have (with several GPUs).
    pub fn build(
        params: &CpParams,
        wiring: &Wiring,
        commands: &[Command],
        kernels: &[KernelMeta],
        ctxs: &Arc<[Ctx]>,
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
                    host_to_gcp_ps: wiring.host_to_gcp_ps(),
                    gcp_to_lcp_ps: wiring.gcp_to_lcp_ps(),
                    cta_dispatch_ps: wiring.cta_dispatch_ps(),
                    split: l.split,
                    per_sm: per_sm.clone(),
                    host: (k == 0)
                        .then(|| Host::new(commands, gpus, l.copy_bytes_per_s, l.copy_latency_ps)),
                    global: (k == gpu_base).then(|| GlobalCp::new(ctxs.clone())),
                    pending: VecDeque::new(),
                    slice: None,
                    flush_l2: l.flush_l2,
                    pending_flush: VecDeque::new(),
                    flushing: None,
                    spans: Vec::new(),
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

    pub(super) fn unit(&self) -> u32 {
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

    /// The slices its local CP completed, in the order it ran them: `(chiplet, gpu, [(rank
    /// among its GPU's kernels, start, end, CTAs)])` (a run cut short leaves the last one
    /// out).
    pub fn spans(&self) -> SliceSpans {
        let done = self
            .spans
            .iter()
            .enumerate()
            .filter_map(|(i, &(start, end, ctas))| end.map(|e| (i as u32, start, e, ctas)))
            .collect();
        (self.chiplet, self.gpu, done)
    }

    /// The stats of this GPU's kernels with the rank of their launch in the command list
    /// (a global CP's unit; empty elsewhere).
    pub fn into_kernels(self) -> Vec<(u32, u32, KernelStats)> {
        self.global.map(|g| g.kernels).unwrap_or_default()
    }
}

/// `state` (what a message needs the CP to be in), or a protocol error saying what arrived
/// out of turn: the launch path never sends it then, so it is a model bug, not bad input.
pub(super) fn expect_state<T>(
    state: Option<T>,
    what: impl FnOnce() -> String,
) -> Result<T, GpuError> {
    state.ok_or_else(|| GpuError::Protocol(what()))
}

/// [`expect_state`] of chiplet `chiplet`'s global CP, which `what` needs.
pub(super) fn global_cp<'a>(
    global: Option<&'a mut GlobalCp>,
    chiplet: u32,
    what: std::fmt::Arguments<'_>,
) -> Result<&'a mut GlobalCp, GpuError> {
    expect_state(global, || {
        format!("chiplet {chiplet}'s CP, which has no global CP, got {what}")
    })
}
