//! The command processors of one GPU as one unit: the host replaying the command list, the
//! global CP keeping kernels in stream order, and the local CP dispatching CTAs to SMs
//! (DESIGN.md section 5, "Launch path", "Local CP", "Global CP"). It talks to SMs and DRAM
//! channels only through packets.
//!
//! - **Host** (command list, in order): `KernelLaunch` is submitted at the host's current
//!   time and occupies the host for `launch.host_to_gcp_ps` (back-to-back launches are
//!   spaced by it). `MemcpyHtoD` is synchronous, as `cudaMemcpy` is: the host first waits
//!   until every kernel it submitted has completed, then the copy reaches the DRAM channels
//!   `launch.host_to_gcp_ps` later (no time is modelled for the copy itself). `Alloc` is
//!   ignored.
//! - **Global CP**: a kernel arrives `host_to_gcp_ps` after its submission and starts at the
//!   later of its arrival and the previous kernel's completion (one stream, in order).
//! - **Local CP**: receives the kernel `gcp_to_lcp_ps` after it starts; first fills every
//!   SM round-robin (CTA 0 to SM 0, CTA 1 to SM 1, ..., then a second round) up to the
//!   occupancy limit, then sends the next CTA (listing order) to an SM when that SM reports
//!   a CTA complete. Dispatches and completion reports each take `cta_dispatch_ps`.
//! - **Completion**: the host sees the kernel complete `completion_ps` after the local CP
//!   has the last CTA's completion report.

use std::collections::VecDeque;

use crate::config::GpuConfig;
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

/// The kernel the local CP is dispatching.
#[derive(Clone, Copy, Debug)]
struct Running {
    kernel: u32,
    submit_ps: Picos,
    total: u32,
    next_cta: u32,
    done: u32,
    per_sm: u32,
}

/// The host, global CP and local CP of one GPU.
pub struct CommandProcessor {
    ids: UnitIds,
    period: Picos,
    host_to_gcp_ps: Picos,
    gcp_to_lcp_ps: Picos,
    cta_dispatch_ps: Picos,
    completion_ps: Picos,
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
    /// Per CTA-per-SM limit of each kernel (the occupancy calculation).
    per_sm: Vec<u32>,
    kernels: Vec<KernelStats>,
    /// Kernel launches in the command list.
    launches: usize,
}

impl CommandProcessor {
    /// The CP of `cfg` replaying `commands`; every kernel's occupancy is checked here, so a
    /// CTA that can never fit is an error before anything runs.
    pub fn new(
        cfg: &GpuConfig,
        commands: &[Command],
        kernels: &[KernelMeta],
    ) -> Result<CommandProcessor, GpuError> {
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
        Ok(CommandProcessor {
            ids: UnitIds::new(cfg),
            period: cfg.core_period_ps(),
            host_to_gcp_ps: l.host_to_gcp_ps,
            gcp_to_lcp_ps: l.gcp_to_lcp_ps,
            cta_dispatch_ps: l.cta_dispatch_ps,
            completion_ps: l.completion_ps,
            commands: commands.to_vec(),
            next_cmd: 0,
            host_ps: 0,
            host_blocked: false,
            outstanding: 0,
            queue: VecDeque::new(),
            running: None,
            prev_end_ps: 0,
            per_sm,
            kernels: Vec::new(),
            launches: commands
                .iter()
                .filter(|c| matches!(c, Command::KernelLaunch { .. }))
                .count(),
        })
    }

    /// The next time the CP acts on its own (not counting packets it will receive).
    pub fn next_event(&self) -> Option<Picos> {
        let host =
            (!self.host_blocked && self.next_cmd < self.commands.len()).then_some(self.host_ps);
        let start = match (self.running, self.queue.front()) {
            (None, Some(q)) => Some(q.arrive_ps.max(self.prev_end_ps) + self.gcp_to_lcp_ps),
            _ => None,
        };
        match (host, start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
        let Some(r) = self.running.as_mut().filter(|r| r.kernel == kernel) else {
            return Err(GpuError::Protocol(format!(
                "SM {sm} reported a CTA of kernel {kernel}, which is not running"
            )));
        };
        r.done += 1;
        if r.next_cta < r.total {
            let pkt = Packet::Dispatch {
                kernel,
                cta: r.next_cta,
            };
            r.next_cta += 1;
            net.send(UnitIds::CP, self.ids.sm(sm), at + self.cta_dispatch_ps, pkt);
        }
        if r.done == r.total {
            let r = *r;
            self.finish_kernel(r, at, kernels);
        }
        Ok(())
    }

    fn finish_kernel(&mut self, r: Running, last_report_ps: Picos, kernels: &[KernelMeta]) {
        let end_ps = last_report_ps + self.completion_ps;
        let meta = &kernels[r.kernel as usize];
        self.kernels.push(KernelStats {
            name: meta.name.clone(),
            grid: meta.grid,
            block: meta.block,
            ctas: r.total as u64,
            ctas_per_sm: r.per_sm,
            start_ps: r.submit_ps,
            end_ps,
            cycles: cycle_at(end_ps - r.submit_ps, self.period),
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

    /// Does everything due at `t` (host commands, a kernel start).
    pub fn run_at(
        &mut self,
        t: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        loop {
            let mut progressed = false;
            while !self.host_blocked && self.next_cmd < self.commands.len() && self.host_ps <= t {
                progressed = true;
                match self.commands[self.next_cmd] {
                    Command::MemcpyHtoD { .. } => {
                        if self.outstanding > 0 {
                            self.host_blocked = true;
                            break;
                        }
                        let arrive = self.host_ps + self.host_to_gcp_ps;
                        for c in 0..self.ids.channels {
                            let pkt = Packet::Memcpy {
                                command: self.next_cmd as u32,
                            };
                            net.send(UnitIds::CP, self.ids.channel(c), arrive, pkt);
                        }
                    }
                    Command::Alloc { .. } => {}
                    Command::KernelLaunch { kernel, .. } => {
                        if kernel as usize >= kernels.len() {
                            return Err(GpuError::Protocol(format!(
                                "command {} launches kernel {kernel}, which the trace does not have",
                                self.next_cmd
                            )));
                        }
                        self.queue.push_back(Queued {
                            kernel,
                            submit_ps: self.host_ps,
                            arrive_ps: self.host_ps + self.host_to_gcp_ps,
                        });
                        self.host_ps += self.host_to_gcp_ps;
                        self.outstanding += 1;
                    }
                }
                self.next_cmd += 1;
            }
            if self.running.is_none() {
                if let Some(&q) = self.queue.front() {
                    let lcp = q.arrive_ps.max(self.prev_end_ps) + self.gcp_to_lcp_ps;
                    if lcp <= t {
                        self.queue.pop_front();
                        progressed = true;
                        self.start_kernel(q, lcp, kernels, net);
                    }
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    /// The local CP receives kernel `q` at `lcp` and fills the SMs.
    fn start_kernel(&mut self, q: Queued, lcp: Picos, kernels: &[KernelMeta], net: &mut dyn Net) {
        let meta = &kernels[q.kernel as usize];
        let per_sm = self.per_sm[q.kernel as usize];
        let total = meta.counts.ctas as u32;
        let mut r = Running {
            kernel: q.kernel,
            submit_ps: q.submit_ps,
            total,
            next_cta: 0,
            done: 0,
            per_sm,
        };
        if total == 0 {
            self.finish_kernel(r, lcp, kernels);
            return;
        }
        for _round in 0..per_sm {
            for sm in 0..self.ids.sms {
                if r.next_cta < total {
                    let pkt = Packet::Dispatch {
                        kernel: q.kernel,
                        cta: r.next_cta,
                    };
                    net.send(
                        UnitIds::CP,
                        self.ids.sm(sm),
                        lcp + self.cta_dispatch_ps,
                        pkt,
                    );
                    r.next_cta += 1;
                }
            }
        }
        self.running = Some(r);
    }

    /// Unfinished work, for a run that went quiet: `None` when every command is done.
    pub fn unfinished(&self) -> Option<String> {
        if self.next_cmd < self.commands.len() || self.running.is_some() || !self.queue.is_empty() {
            Some(format!(
                "the command processor is at command {} of {} with {} kernel(s) outstanding",
                self.next_cmd,
                self.commands.len(),
                self.outstanding
            ))
        } else {
            None
        }
    }

    /// The end of the simulated time: the host's last action or the last kernel's
    /// completion.
    pub fn end_ps(&self) -> Picos {
        self.prev_end_ps.max(self.host_ps)
    }

    /// Kernel launches completed so far, and in the command list.
    pub fn kernels_done(&self) -> (usize, usize) {
        (self.kernels.len(), self.launches)
    }

    pub fn into_kernels(self) -> Vec<KernelStats> {
        self.kernels
    }
}
