//! The host (on GPU 0's chiplet 0 CP unit, [`super::cp`]): it replays the trace's command
//! list.
//!
//! **Host** (command list, in order): `KernelLaunch` is submitted at the host's current
//! time and occupies the host for `launch.host_to_gcp_ps` (back-to-back launches are
//! spaced by it). `MemcpyHtoD` is synchronous, as `cudaMemcpy` is: the host first waits
//! until every kernel it submitted to the copy's GPU has completed, then the copy takes
//! `system.host_link.latency_ps + ceil(bytes / bandwidth_bytes_per_s)` (nothing with a
//! bandwidth of 0, the default: as Accel-Sim, no time for the copy itself), the host
//! waiting, and reaches the GPU's DRAM channels `launch.host_to_gcp_ps` after it ends.
//! `Alloc` is ignored here (it places pages on GPUs, `mem::GpuHomes`).

use std::collections::VecDeque;

use crate::gpu::control::Control;
use crate::gpu::Port;
use crate::packet::Net;
use crate::Picos;
use tessera_traces::{Command, KernelMeta};

use super::cp::CommandProcessor;
use super::global_cp::Queued;
use super::GpuError;

/// The host replaying the command list (GPU 0's chiplet 0 unit).
pub(super) struct Host {
    pub(super) commands: Vec<Command>,
    pub(super) next_cmd: usize,
    /// When the host may issue its next command.
    pub(super) host_ps: Picos,
    /// The host waits for every kernel it submitted to this GPU (a `MemcpyHtoD`).
    pub(super) blocked_on: Option<u32>,
    /// By GPU: kernels submitted whose completion the host has not seen yet.
    pub(super) outstanding: Vec<usize>,
    /// GPU 0's completions on their way to the host (several GPUs), when it sees them.
    pub(super) seen: VecDeque<Picos>,
    /// Kernel launches in the command list, those submitted, and those seen complete.
    pub(super) launches: usize,
    pub(super) launched: u32,
    pub(super) completed: usize,
    /// `system.host_link`: copy bandwidth (0: copies take no time) and latency.
    pub(super) copy_bytes_per_s: u64,
    pub(super) copy_latency_ps: Picos,
}

impl Host {
    /// The host of a system of `gpus` GPUs replaying `commands`, copying over `link`.
    pub(super) fn new(
        commands: &[Command],
        gpus: u32,
        copy_bytes_per_s: u64,
        copy_latency_ps: Picos,
    ) -> Host {
        Host {
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
            copy_bytes_per_s,
            copy_latency_ps,
        }
    }

    /// Simulated time of a copy of `bytes` over the host link.
    pub(super) fn copy_ps(&self, bytes: u64) -> Picos {
        if self.copy_bytes_per_s == 0 {
            return 0;
        }
        let flow = (bytes as u128 * 1_000_000_000_000).div_ceil(self.copy_bytes_per_s as u128);
        self.copy_latency_ps + flow as Picos
    }

    /// The host sees a kernel of GPU `gpu` complete at `at`.
    pub(super) fn kernel_done(&mut self, at: Picos, gpu: u32) {
        let g = gpu as usize;
        self.outstanding[g] = self.outstanding[g].saturating_sub(1);
        self.completed += 1;
        if self.blocked_on == Some(gpu) && self.outstanding[g] == 0 {
            self.blocked_on = None;
            self.host_ps = self.host_ps.max(at);
        }
    }
}

impl CommandProcessor {
    /// The host's commands due by `t`; whether it did any.
    pub(super) fn run_host(
        &mut self,
        t: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<bool, GpuError> {
        let (ids, unit) = (self.ids, self.unit());
        let host_to_gcp = net.wiring().host_to_gcp_ps();
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
                    let per_gpu = ids.channels * ids.gpu_chiplets;
                    for c in g * per_gpu..(g + 1) * per_gpu {
                        let pkt = Control::Memcpy {
                            command: h.next_cmd as u32,
                        };
                        net.send_on(Port::HostCopy, unit, ids.channel(c), end, pkt.into());
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
                            h.host_ps,
                            Control::Launch { kernel, launch }.into(),
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

    /// The host sees a kernel of GPU `gpu` complete at `at` (a [`Control::KernelDone`]).
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
}
