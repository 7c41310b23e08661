//! A GPU's global CP (on its chiplet 0's CP unit, [`super::cp`]): it runs the host's
//! kernels in order, hands each local CP its slice and collects their reports.
//!
//! **Global CP**: a kernel arrives `host_to_gcp_ps` after its submission and starts at the
//! later of its arrival and the previous kernel's completion (one stream, in order). It
//! splits the grid across chiplets (`package.grid_split`: contiguous ranges or round
//! robin) and sends each local CP its slice, which arrives `gcp_to_lcp_ps` later (a packet
//! to another chiplet's CP; the same delay inside chiplet 0's unit).

use std::collections::VecDeque;

use crate::gpu::control::Control;
use crate::mem::UnitIds;
use crate::packet::Net;
use crate::stats::KernelStats;
use crate::Picos;
use tessera_traces::KernelMeta;

use super::cp::{expect_state, global_cp, CommandProcessor};
use super::{cycle_at, GpuError};

/// A kernel submitted by the host, not yet started.
#[derive(Clone, Copy, Debug)]
pub(super) struct Queued {
    pub(super) kernel: u32,
    /// Its launch's rank among the command list's launches.
    pub(super) launch: u32,
    pub(super) submit_ps: Picos,
    pub(super) arrive_ps: Picos,
}

/// The kernel the global CP is running.
#[derive(Clone, Copy, Debug)]
pub(super) struct Running {
    pub(super) kernel: u32,
    pub(super) launch: u32,
    pub(super) submit_ps: Picos,
    pub(super) total: u32,
    pub(super) per_sm: u32,
    /// Slice reports received, and when the latest arrived (then, while the L2s are being
    /// flushed, the latest flush acknowledgement).
    pub(super) reported: u32,
    pub(super) last_report_ps: Picos,
    /// Flush acknowledgements received (`package.l2: private`).
    pub(super) flushed: u32,
}

/// A GPU's global CP (its chiplet 0's unit).
pub(super) struct GlobalCp {
    pub(super) queue: VecDeque<Queued>,
    pub(super) running: Option<Running>,
    /// When the previous kernel completed.
    pub(super) prev_end_ps: Picos,
    /// The kernels' stats by launch rank.
    pub(super) kernels: Vec<(u32, u32, KernelStats)>,
    /// Each kernel's context (by kernel index), whose stream its stats name.
    pub(super) ctxs: std::sync::Arc<[crate::mem::Ctx]>,
}

impl GlobalCp {
    /// A global CP with no kernel yet.
    pub(super) fn new(ctxs: std::sync::Arc<[crate::mem::Ctx]>) -> GlobalCp {
        GlobalCp {
            queue: VecDeque::new(),
            running: None,
            prev_end_ps: 0,
            kernels: Vec::new(),
            ctxs,
        }
    }

    /// Records the completed kernel `r` of GPU `gpu`; returns its end.
    pub(super) fn finish_kernel(
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
            r.kernel,
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
                memory: Default::default(),
                stream: self.ctxs.get(r.kernel as usize).map_or(0, |c| c.stream()),
                // Filled in from the local CPs' slices when the stats are merged.
                chiplets: Vec::new(),
            },
        ));
        self.prev_end_ps = end_ps;
        self.running = None;
        end_ps
    }
}

impl CommandProcessor {
    /// This GPU's global CP receives a launch from the host at `at` (a [`Control::Launch`]).
    pub fn on_launch(&mut self, at: Picos, kernel: u32, launch: u32) -> Result<(), GpuError> {
        let h = self.host_to_gcp_ps;
        let g = global_cp(
            self.global.as_mut(),
            self.chiplet,
            format_args!("a launch of kernel {kernel}"),
        )?;
        g.queue.push_back(Queued {
            kernel,
            launch,
            submit_ps: at.saturating_sub(h),
            arrive_ps: at,
        });
        Ok(())
    }

    pub(super) fn run_global(
        &mut self,
        t: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
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
                        let pkt = Control::Slice { kernel: q.kernel };
                        self.send_to_local_cps(start, pkt, net);
                    }
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    /// Sends `pkt` (a slice or a flush request) to every local CP of this GPU, leaving at
    /// `at`; this unit's own local CP takes it by the same path as a packet, without one,
    /// after the same latency (`launch.gcp_to_lcp_ps`, [`crate::gpu::Wiring::gcp_to_lcp_ps`]).
    pub(super) fn send_to_local_cps(&mut self, at: Picos, pkt: Control, net: &mut dyn Net) {
        for c in self.gpu_base..self.gpu_base + self.ids.gpu_chiplets {
            if c == self.chiplet {
                let arrive = at + net.wiring().gcp_to_lcp_ps();
                self.on_global_packet(arrive, pkt);
            } else {
                net.send(self.unit(), self.ids.cp(c), at, pkt.into());
            }
        }
    }

    /// The global CP receives a local CP's report at `at`: a slice done, or a flush done.
    pub fn on_local_report(
        &mut self,
        at: Picos,
        pkt: Control,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        match pkt {
            Control::SliceDone { kernel } => self.on_slice_done(at, kernel, kernels, net),
            Control::FlushDone { kernel } => self.on_flush_done(at, kernel, kernels, net),
            other => Err(GpuError::Protocol(format!(
                "the global CP received {other:?} as a local CP's report"
            ))),
        }
    }

    /// The global CP has a slice report of `kernel` at `at`.
    pub(super) fn on_slice_done(
        &mut self,
        at: Picos,
        kernel: u32,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let chiplets = self.ids.gpu_chiplets;
        let period = self.period;
        let flush_l2 = self.flush_l2;
        let g = global_cp(
            self.global.as_mut(),
            self.chiplet,
            format_args!("a slice report"),
        )?;
        let r = expect_state(g.running.as_mut().filter(|r| r.kernel == kernel), || {
            format!("a slice report of kernel {kernel}, which is not running")
        })?;
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
            let left = r.last_report_ps;
            self.send_to_local_cps(left, Control::Flush { kernel }, net);
        }
        Ok(())
    }

    /// The global CP has a chiplet's flush acknowledgement of `kernel` at `at`; the last one
    /// completes the kernel.
    pub(super) fn on_flush_done(
        &mut self,
        at: Picos,
        kernel: u32,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let chiplets = self.ids.gpu_chiplets;
        let period = self.period;
        let g = global_cp(
            self.global.as_mut(),
            self.chiplet,
            format_args!("a flush acknowledgement"),
        )?;
        let flushing = g
            .running
            .as_mut()
            .filter(|r| r.kernel == kernel && r.reported == chiplets);
        let r = expect_state(flushing, || {
            format!("a flush acknowledgement of kernel {kernel}, which is not being flushed")
        })?;
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
    pub(super) fn report_to_host(&mut self, end: Picos, net: &mut dyn Net) {
        let to_host = net.wiring().to_host_ps();
        let at = end + to_host;
        match self.host.as_mut() {
            Some(h) if to_host == 0 => h.kernel_done(at, self.gpu),
            Some(h) => h.seen.push_back(at),
            None => net.send(
                self.unit(),
                UnitIds::CP,
                end,
                Control::KernelDone { gpu: self.gpu }.into(),
            ),
        }
    }
}
