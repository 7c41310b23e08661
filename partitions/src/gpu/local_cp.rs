//! A chiplet's local CP (in its CP unit, [`super::cp`]): it dispatches its slice of a
//! kernel's CTAs to its SMs and runs its part of the kernel-boundary flush.
//!
//! **Local CP**: when its slice arrives, first fills every SM of its chiplet round-robin
//! (its first CTA to its first SM, ...) up to the occupancy limit, then sends the slice's
//! next CTA (listing order) to an SM when that SM reports a CTA complete. Dispatches and
//! completion reports each take `cta_dispatch_ps`. When its slice's last CTA report is
//! in, it reports the slice done; the report reaches the global CP `completion_ps` later.
//! It sends with the departure time; the latencies are the connections' (`gpu/wiring.rs`),
//! added by the net (or, to the global CP of its own unit, by [`super::wiring::Wiring`]'s
//! same value on the path without a packet).

use crate::config::GridSplit;
use crate::gpu::control::Control;
use crate::packet::Net;
use crate::Picos;
use tessera_traces::KernelMeta;

use super::cp::{expect_state, CommandProcessor};
use super::GpuError;

/// A local CP's flush in progress: acknowledgements from its channels so far, and when the
/// latest arrived.
#[derive(Clone, Copy, Debug)]
pub(super) struct LocalFlush {
    pub(super) kernel: u32,
    pub(super) acks: u32,
    pub(super) last_ps: Picos,
}

/// The local CP's share of a kernel: CTAs `first + i * stride` for `i < count`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slice {
    pub(super) kernel: u32,
    pub(super) first: u32,
    pub(super) stride: u32,
    pub(super) count: u32,
    pub(super) next: u32,
    pub(super) done: u32,
}

impl CommandProcessor {
    /// The local CP receives a packet of the global CP at `at`: its slice of a kernel to
    /// run, or the flush to do after one (other packets are not the global CP's).
    pub fn on_global_packet(&mut self, at: Picos, pkt: Control) {
        match pkt {
            Control::Slice { kernel } => self.pending.push_back((at, kernel)),
            Control::Flush { kernel } => self.pending_flush.push_back((at, kernel)),
            _ => {}
        }
    }

    /// The local CP starts its slice of `kernel` at `at` and fills its SMs.
    pub(super) fn start_slice(
        &mut self,
        at: Picos,
        kernel: u32,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        let meta = expect_state(kernels.get(kernel as usize), || {
            format!("a slice of kernel {kernel}, which the trace does not have")
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
        self.spans.push((at, None, count));
        if count == 0 {
            return self.slice_done(kernel, at, kernels, net);
        }
        let per_sm = self.per_sm[kernel as usize];
        let sms = self.ids.sms;
        for _round in 0..per_sm {
            for s in 0..sms {
                if r.next < r.count {
                    let pkt = Control::Dispatch {
                        kernel,
                        cta: r.first + r.next * r.stride,
                    };
                    net.send(
                        self.unit(),
                        self.ids.sm(self.chiplet * sms + s),
                        at,
                        pkt.into(),
                    );
                    r.next += 1;
                }
            }
        }
        self.slice = Some(r);
        Ok(())
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
        let chiplet = self.chiplet;
        let r = expect_state(self.slice.as_mut().filter(|r| r.kernel == kernel), || {
            format!(
                "SM {sm} reported a CTA of kernel {kernel}, which chiplet {chiplet}'s local CP \
                 is not running"
            )
        })?;
        r.done += 1;
        if r.next < r.count {
            let pkt = Control::Dispatch {
                kernel,
                cta: r.first + r.next * r.stride,
            };
            r.next += 1;
            net.send(unit, self.ids.sm(sm), at, pkt.into());
        }
        if r.done == r.count {
            self.slice = None;
            self.slice_done(kernel, at, kernels, net)?;
        }
        Ok(())
    }

    /// This chiplet's slice of `kernel` completed at `at` (the last CTA report): the report
    /// reaches the global CP `completion_ps` later.
    pub(super) fn slice_done(
        &mut self,
        kernel: u32,
        at: Picos,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        if let Some(last) = self.spans.last_mut() {
            last.1 = Some(at);
        }
        self.send_to_global_cp(at, Control::SliceDone { kernel }, kernels, net)
    }

    /// Sends `pkt` (a slice or flush report) to this GPU's global CP, leaving at `at`; on
    /// the GPU's chiplet 0 it is taken by the same path as a packet, without one, after the
    /// same latency (`launch.completion_ps`, [`crate::gpu::Wiring::completion_ps`]).
    pub(super) fn send_to_global_cp(
        &mut self,
        at: Picos,
        pkt: Control,
        kernels: &[KernelMeta],
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        if self.global.is_some() {
            let arrive = at + net.wiring().completion_ps();
            self.on_local_report(arrive, pkt, kernels, net)
        } else {
            net.send(self.unit(), self.ids.cp(self.gpu_base), at, pkt.into());
            Ok(())
        }
    }

    /// The local CP starts the flush after `kernel` at `at`: each of its channels is told.
    pub(super) fn start_flush(
        &mut self,
        at: Picos,
        kernel: u32,
        net: &mut dyn Net,
    ) -> Result<(), GpuError> {
        if self.flushing.is_some() {
            return Err(GpuError::Protocol(format!(
                "chiplet {} got a flush request after kernel {kernel} while flushing",
                self.chiplet
            )));
        }
        let channels = self.ids.channels;
        for c in 0..channels {
            let ch = self.ids.channel(self.chiplet * channels + c);
            net.send(self.unit(), ch, at, Control::Flush { kernel }.into());
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
        let chiplet = self.chiplet;
        let f = expect_state(
            self.flushing.as_mut().filter(|f| f.kernel == kernel),
            || {
                format!(
                    "chiplet {chiplet}'s local CP got a flush acknowledgement of kernel {kernel}, \
                 which it is not flushing"
                )
            },
        )?;
        f.acks += 1;
        f.last_ps = f.last_ps.max(at);
        if f.acks < channels {
            return Ok(());
        }
        let left = f.last_ps;
        self.flushing = None;
        self.send_to_global_cp(left, Control::FlushDone { kernel }, kernels, net)
    }
}
