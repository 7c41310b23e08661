//! DRAM channels: banks with one open row each, a data bus per channel.
//!
//! Address map (documented in mod.rs): `chunk = addr / interleave_bytes`,
//! `channel = chunk % channels`, and the channel-local address
//! `local = (chunk / channels) * interleave_bytes + addr % interleave_bytes`; then
//! `bank = (local / row_bytes) % banks`, `row = local / row_bytes / banks`.
//!
//! An access to a bank whose open row is another pays `t_rp + t_rcd`, one to a bank with no
//! open row `t_rcd`, a row hit nothing; the bank is busy (a time calendar) while it
//! precharges and activates. The data then crosses the channel's bus (a [`BwPort`] at
//! `bandwidth_bytes_per_cycle` per DRAM cycle, exact fractional carry), and a read's data is
//! at the L2 slice `latency_ps` after its burst starts. Requests are served in call order at
//! each resource (earliest gap first); FR-FCFS reordering and the finite scheduler queue
//! (`dram.queue_entries`) are not modelled: the L2 MSHRs bound the requests in flight.

use super::port::BwPort;
use crate::config::GpuConfig;
use crate::Picos;

#[derive(Clone, Debug)]
struct Bank {
    open_row: Option<u64>,
    busy: BwPort,
}

#[derive(Clone, Debug)]
struct Channel {
    banks: Vec<Bank>,
    bus: BwPort,
}

#[derive(Clone, Debug)]
pub(crate) struct Dram {
    channels: Vec<Channel>,
    interleave: u64,
    row_bytes: u64,
    t_rcd_ps: Picos,
    t_rp_ps: Picos,
    latency_ps: Picos,
}

/// Where an address lives in DRAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DramAddr {
    pub channel: u32,
    /// Address inside the channel.
    pub local: u64,
}

impl Dram {
    pub(crate) fn new(cfg: &GpuConfig) -> Dram {
        let d = &cfg.dram;
        let period = cfg.dram_period_ps();
        let channels = (0..d.channels.max(1))
            .map(|_| Channel {
                banks: (0..d.banks.max(1))
                    .map(|_| Bank {
                        open_row: None,
                        busy: BwPort::time(),
                    })
                    .collect(),
                bus: BwPort::new(d.bandwidth_bytes_per_cycle as u64, d.clock_hz),
            })
            .collect();
        Dram {
            channels,
            interleave: (d.interleave_bytes as u64).max(1),
            row_bytes: (d.row_bytes as u64).max(1),
            t_rcd_ps: d.t_rcd_cycles as Picos * period,
            t_rp_ps: d.t_rp_cycles as Picos * period,
            latency_ps: d.latency_ps,
        }
    }

    pub(crate) fn map(&self, addr: u64) -> DramAddr {
        let n = self.channels.len() as u64;
        let chunk = addr / self.interleave;
        DramAddr {
            channel: (chunk % n) as u32,
            local: (chunk / n) * self.interleave + addr % self.interleave,
        }
    }

    /// Moves `bytes` of the row holding `a` (a read or a write), asked at `t`; returns when
    /// a read's data is at the L2 slice (a write's is then in the DRAM).
    pub(crate) fn access(&mut self, floor: Picos, t: Picos, a: DramAddr, bytes: u64) -> Picos {
        let row_bytes = self.row_bytes;
        let (t_rcd, t_rp, lat) = (self.t_rcd_ps, self.t_rp_ps, self.latency_ps);
        let nch = self.channels.len();
        let ch = &mut self.channels[(a.channel as usize) % nch];
        let nb = ch.banks.len() as u64;
        let row_index = a.local / row_bytes;
        let bank = &mut ch.banks[(row_index % nb) as usize];
        let row = row_index / nb;
        let cost = match bank.open_row {
            Some(r) if r == row => 0,
            Some(_) => t_rp + t_rcd,
            None => t_rcd,
        };
        bank.open_row = Some(row);
        let ready = if cost > 0 {
            bank.busy.reserve(floor, t, cost) + cost
        } else {
            t
        };
        ch.bus.reserve(floor, ready, bytes) + lat
    }
}
