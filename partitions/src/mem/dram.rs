//! DRAM channels: banks with one open row each, a data bus per channel, refresh, and posted
//! writes drained in batches with bus turnarounds.
//!
//! Address map (documented in mod.rs): `chunk = addr / interleave_bytes`,
//! `channel = chunk % channels`, and the channel-local address
//! `local = (chunk / channels) * interleave_bytes + addr % interleave_bytes`; then
//! `bank = (local / row_bytes) % banks`, `row = local / row_bytes / banks`.
//!
//! - **Reads**: an access to a bank whose open row is another pays `t_rp + t_rcd`, one to a
//!   bank with no open row `t_rcd`, a row hit nothing; the bank is busy (a time calendar)
//!   while it precharges and activates. The data then crosses the channel's bus (a
//!   [`BwPort`] at `bandwidth_bytes_per_cycle` per DRAM cycle, exact fractional carry), and
//!   the read's data is at the L2 slice `latency_ps` after its burst starts.
//! - **Writes** are posted: the channel queues them and they are done for the caller when
//!   queued. When `write_drain_requests` are queued, they cross the bus as one contiguous
//!   block: `read_to_write_cycles` of turnaround, their data, then `write_to_read_cycles`
//!   of turnaround back to reads, all as bus time, so a drain costs the channel
//!   `read_to_write_cycles + write_to_read_cycles` idle cycles however many writes it
//!   carries. The drained writes leave their rows open in their banks (their own activates
//!   overlap the drain and are not timed). Writes still queued when the run ends take no
//!   bus time (at most `write_drain_requests - 1` per channel).
//! - **Refresh**: channel `c`'s `k`-th all-bank refresh is due at `k * t_refi_ps + c *
//!   t_refi_ps / channels`; it takes the bus for `t_rfc_ps` (as bytes of bus time, rounded
//!   to the nearest byte) in the first gap at or after that time, so a busy channel
//!   postpones it but never skips it, and it closes every row of the channel (an access in
//!   a later refresh interval than its bank's last one finds the bank closed). Refreshes
//!   are placed lazily: before a burst is reserved, every refresh due before the latest
//!   time that burst could start (the end of what the bus has booked) is placed first.
//!
//! Everything that takes the bus is a reservation on the channel's [`BwPort`], whose
//! intervals never overlap, so no window ever moves more than the peak
//! `bandwidth_bytes_per_cycle * clock_hz` per channel: the losses above only take from it.
//! A saturated channel delivers `(1 - t_rfc / t_refi) * D / (D + turnarounds)` of its peak
//! (D: data cycles between two drains), the figure the unit test below checks.
//!
//! - **The scheduler queue** holds `queue_entries` reads of a channel from their arrival
//!   until their burst starts; a read that finds it full waits outside (in its slice's
//!   MSHR) until the earliest queued one starts (GPGPU-Sim's `-gpgpu_frfcfs_dram_sched_queue_size`).
//!
//! Requests are served in call order at each resource (earliest gap first); FR-FCFS
//! reordering is not modelled. Bank groups (tCCD_L) are not modelled: a 32 B burst
//! takes one channel cycle, and HBM2's tCCD_L (2 cycles in DRAMsim3's HBM2 tables) only
//! binds consecutive bursts to one bank group, which the interleave spreads.

use super::l2_slice::L2Config;
use super::mshrs::Mshrs;
use super::port::BwPort;
use super::DramMap;
use crate::config::{
    config_enum, section, Check, ConfigError, GpuConfig, Kind, CLOCK_RANGE, MAX_CYCLES, MAX_PS,
};
use crate::Picos;

config_enum! {
    /// Request scheduling at a DRAM channel.
    pub enum DramScheduler {
        /// First-ready first-come-first-served: row hits first, then oldest.
        FrFcfs = "fr_fcfs",
        /// Strictly in arrival order.
        Fcfs = "fcfs",
    }
}

section! {
    /// DRAM channels of a chiplet. Peak bandwidth is `channels * bandwidth_bytes_per_cycle *
    /// clock_hz`. A load's end-to-end latency on an L2 miss is about the L2 hit latency plus
    /// `latency_ps` plus the bank timing its row-buffer state needs.
    pub struct DramConfig {
        /// Independent channels, each with its own queue, banks and bus; addresses
        /// interleave across them every `interleave_bytes`. Presets: the simulator config's
        /// `-gpgpu_n_mem` or the bus width over the channel width.
        channels: u32 = Kind::U32, unit "channels", None, range (1, 1024);
        /// DRAM command clock; `bandwidth_bytes_per_cycle`, `t_rcd_cycles` and `t_rp_cycles`
        /// count its cycles. Presets: vendor memory clock or the simulator config's DRAM
        /// clock domain.
        clock_hz: u64 = Kind::U64, unit "Hz", None, range CLOCK_RANGE;
        /// Data bytes one channel moves per DRAM clock cycle (bus width times transfers per
        /// clock). Presets: derived so that the peak equals the vendor bandwidth.
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per DRAM cycle", None, range (1, 65_536);
        /// Fixed latency of an access on top of its bank timing: controller, PHY, column
        /// access and data return, on a row hit. Presets: measured DRAM latency minus the
        /// measured L2 hit latency minus `t_rp + t_rcd` (derivation in the preset), else the
        /// simulator config's `-dram_latency` converted from core cycles.
        latency_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
        /// Banks per channel (power of two). Presets: the simulator config's `nbk`.
        banks: u32 = Kind::U32, unit "banks", None, range (1, 1024);
        /// Bytes of one open row of a bank (power of two). Presets: assumed (the memory
        /// type's page size; no source in the references).
        row_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 1 << 20);
        /// Activate-to-read delay, paid when the row is not open. Presets: the simulator
        /// config's `RCD` timing or the paper's tRCD.
        t_rcd_cycles: u32 = Kind::U32, unit "DRAM cycles", None, range (1, MAX_CYCLES);
        /// Precharge delay, paid when another row is open. Presets: `RP` or tRP.
        t_rp_cycles: u32 = Kind::U32, unit "DRAM cycles", None, range (1, MAX_CYCLES);
        /// Request scheduling. Presets: FR-FCFS (`-gpgpu_dram_scheduler 1`). Not modelled
        /// yet: every channel serves requests in arrival order at each bank and at the bus
        /// (earliest gap first), whatever this says; kept so presets state the hardware.
        scheduler: DramScheduler = Kind::Enum(DramScheduler::NAMES), unit "-", None;
        /// Reads a channel's scheduler can hold, from their arrival until their burst
        /// starts; a read that finds it full waits in its slice's MSHR until the earliest
        /// queued read starts. Presets: the simulator config's
        /// `-gpgpu_frfcfs_dram_sched_queue_size`.
        queue_entries: u32 = Kind::U32, unit "requests", None, range (1, 65_536);
        /// Address interleave granularity across channels (power of two, a multiple of
        /// `l2.line_bytes`). Presets: the simulator config's address map (`dramid@8` = 256).
        interleave_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 1 << 30);
        /// Average interval between two all-bank refreshes (REF) of a channel, JEDEC tREFI;
        /// 0 models no refresh (`t_rfc_ps` is then ignored). Channel `c`'s refreshes fall due at `k * t_refi_ps + c *
        /// t_refi_ps / channels` (staggered). Presets: the memory type's tREFI (3.9 us for
        /// HBM2 and GDDR5) from the JEDEC-based DRAM simulators' tables.
        t_refi_ps: u64 = Kind::U64, unit "ps", Some("0"), range (0, MAX_PS);
        /// Time a refresh makes the whole channel unavailable, JEDEC tRFC (all-bank); must be
        /// below `t_refi_ps`. A due refresh takes the channel's bus for
        /// this long in the first gap at or after its due time (a busy channel postpones it,
        /// never skips it), so a saturated channel loses `t_rfc_ps / t_refi_ps` of its peak;
        /// the rows it closes are reopened by the next access. Per-bank refresh, which a
        /// controller may use to hide part of this, is not modelled. Presets: the tRFC of
        /// the channel's density (e.g. HBM2 8 Gb: 350 ns) from the same tables.
        t_rfc_ps: u64 = Kind::U64, unit "ps", Some("0"), range (0, MAX_PS);
        /// Idle cycles of a channel's data bus when it turns from writes to reads: the last
        /// write's data to the first read's data, i.e. JEDEC tWTR plus the read latency CL.
        /// Presets: `CL + CDLR` of the simulator config's timing (GPGPU-Sim's tWTR is `WL +
        /// BL/ratio + CDLR` between the commands; read data follows its command by CL, write
        /// data by WL).
        write_to_read_cycles: u32 = Kind::U32, unit "DRAM cycles", Some("0"), range (0, MAX_CYCLES);
        /// Idle cycles of a channel's data bus when it turns from reads to writes (the last
        /// read's data to the first write's data). Presets: 2, the bus turnaround of
        /// GPGPU-Sim's tRTW (`CL + BL/ratio + 2 - WL` between the commands).
        read_to_write_cycles: u32 = Kind::U32, unit "DRAM cycles", Some("0"), range (0, MAX_CYCLES);
        /// Writes are posted: a channel queues them (a write is done, for the L2, when it
        /// is queued) and sends them to the DRAM in one burst of this many requests when
        /// that many are queued (a drain from the high to the low watermark of a write
        /// queue), paying `read_to_write_cycles` before and `write_to_read_cycles` after;
        /// 1 sends each write alone. Writes still queued when a run ends take no bus time.
        /// Presets: high minus low watermark of the simulator config's
        /// `-dram_write_queue_size`, where it enables one.
        write_drain_requests: u32 = Kind::U32, unit "requests", Some("1"), range (1, 65_536);
    }
}

impl DramConfig {
    /// Rejects impossible values of this section, with the L2 whose slices and lines the
    /// channels serve (module `config::validate` checks the rest).
    pub(crate) fn check(&self, v: &Check, l2: &L2Config) -> Result<(), ConfigError> {
        let d = self;
        v.nonzero("dram.channels", d.channels as u64)?;
        v.ensure(
            l2.slices.is_multiple_of(d.channels),
            "dram.channels",
            || {
                format!(
                    "{} channels do not split the {} L2 slices (l2.slices) evenly: each slice caches \
                 one channel's addresses",
                    d.channels, l2.slices
                )
            },
        )?;
        v.clock("dram.clock_hz", d.clock_hz)?;
        v.nonzero(
            "dram.bandwidth_bytes_per_cycle",
            d.bandwidth_bytes_per_cycle as u64,
        )?;
        v.nonzero("dram.latency_ps", d.latency_ps)?;
        v.pow2("dram.banks", d.banks as u64)?;
        v.pow2("dram.row_bytes", d.row_bytes as u64)?;
        v.nonzero("dram.t_rcd_cycles", d.t_rcd_cycles as u64)?;
        v.nonzero("dram.t_rp_cycles", d.t_rp_cycles as u64)?;
        v.nonzero("dram.queue_entries", d.queue_entries as u64)?;
        v.pow2("dram.interleave_bytes", d.interleave_bytes as u64)?;
        v.ensure(
            d.t_refi_ps == 0 || d.t_rfc_ps < d.t_refi_ps,
            "dram.t_rfc_ps",
            || {
                format!(
                    "{} ps is not below dram.t_refi_ps ({} ps): the channel would only refresh",
                    d.t_rfc_ps, d.t_refi_ps
                )
            },
        )?;
        v.nonzero("dram.write_drain_requests", d.write_drain_requests as u64)?;
        v.ensure(
            d.interleave_bytes.is_multiple_of(l2.line_bytes),
            "dram.interleave_bytes",
            || {
                format!(
                    "{} is not a multiple of l2.line_bytes ({}): a line would span channels",
                    d.interleave_bytes, l2.line_bytes
                )
            },
        )?;
        Ok(())
    }
}

/// The parameters of the DRAM of a channel (`dram`), converted to picoseconds and bytes.
#[derive(Clone, Debug)]
pub struct DramParams {
    /// `dram.channels` (refreshes are staggered over them).
    pub(crate) channels: u32,
    pub(crate) map: DramMap,
    pub(crate) banks: u32,
    pub(crate) row_bytes: u64,
    pub(crate) clock_hz: u64,
    /// `dram.bandwidth_bytes_per_cycle`.
    pub(crate) bytes_per_cycle: u64,
    pub(crate) t_rcd_ps: Picos,
    pub(crate) t_rp_ps: Picos,
    pub(crate) latency_ps: Picos,
    pub(crate) t_refi_ps: Picos,
    pub(crate) t_rfc_ps: Picos,
    pub(crate) read_to_write_cycles: u64,
    pub(crate) write_to_read_cycles: u64,
    pub(crate) write_drain_requests: usize,
    pub(crate) queue_entries: u32,
}

impl DramParams {
    pub fn from_config(cfg: &GpuConfig) -> DramParams {
        let d = &cfg.dram;
        let period = cfg.dram_period_ps();
        DramParams {
            channels: d.channels.max(1),
            map: DramMap::from_config(cfg),
            banks: d.banks.max(1),
            row_bytes: (d.row_bytes as u64).max(1),
            clock_hz: d.clock_hz,
            bytes_per_cycle: d.bandwidth_bytes_per_cycle.max(1) as u64,
            t_rcd_ps: d.t_rcd_cycles as Picos * period,
            t_rp_ps: d.t_rp_cycles as Picos * period,
            latency_ps: d.latency_ps,
            t_refi_ps: d.t_refi_ps,
            t_rfc_ps: d.t_rfc_ps,
            read_to_write_cycles: d.read_to_write_cycles as u64,
            write_to_read_cycles: d.write_to_read_cycles as u64,
            write_drain_requests: d.write_drain_requests.max(1) as usize,
            queue_entries: d.queue_entries.max(1),
        }
    }
}

/// Picoseconds per second.
const PS_PER_S: u128 = 1_000_000_000_000;

/// Whether an access reads or writes DRAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DramOp {
    Read,
    Write,
}

#[derive(Clone, Debug)]
struct Bank {
    open_row: Option<u64>,
    /// Refresh interval of the access that opened `open_row` (a refresh closes it).
    opened_in: u64,
    busy: BwPort,
}

/// A write waiting in a channel's queue.
#[derive(Clone, Copy, Debug)]
struct QueuedWrite {
    bank: usize,
    row: u64,
    bytes: u64,
}

#[derive(Clone, Debug)]
struct Channel {
    banks: Vec<Bank>,
    bus: BwPort,
    /// Latest end (ps, rounded up) of anything reserved on the bus.
    booked_until: Picos,
    /// Index of the next refresh not yet placed on the bus.
    next_refresh: u64,
    /// Due time of refresh 0 (the channel's stagger).
    refresh_offset: Picos,
    writes: Vec<QueuedWrite>,
    /// The scheduler queue: the burst starts of the reads in it.
    queue: Mshrs,
}

/// Counters of what the channels did (tests and diagnostics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DramCounters {
    /// Data bytes that crossed a bus (reads, and writes once drained).
    pub data_bytes: u64,
    /// Refreshes placed on a bus.
    pub refreshes: u64,
    /// Write drains (each with two turnarounds).
    pub drains: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct Dram {
    channels: Vec<Channel>,
    /// Address to channel: the map the L2 homes lines by (one definition for both).
    map: DramMap,
    row_bytes: u64,
    t_rcd_ps: Picos,
    t_rp_ps: Picos,
    latency_ps: Picos,
    /// Bus bytes per second of one channel (`bandwidth_bytes_per_cycle * clock_hz`).
    bus_bytes_per_s: u128,
    t_refi_ps: Picos,
    /// A refresh as bytes of bus time, and those bytes' time (`bus_ps(refresh_bytes)`, once).
    refresh_bytes: u64,
    refresh_ps: Picos,
    /// Read-to-write and write-to-read turnarounds as bytes of bus time.
    rtw_bytes: u64,
    wtr_bytes: u64,
    drain_requests: usize,
    counters: DramCounters,
}

/// Where an address lives in DRAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DramAddr {
    pub channel: u32,
    /// Address inside the channel.
    pub local: u64,
}

impl Dram {
    /// Every channel (the unit tests drive the DRAM alone).
    #[cfg(test)]
    pub(crate) fn new(p: &DramParams) -> Dram {
        Dram::with_channels(p, 0..p.channels)
    }

    /// Channel `c` alone (what a channel unit owns): accesses to any address go to it, with
    /// its own refresh phase.
    pub(crate) fn channel(p: &DramParams, c: u32) -> Dram {
        Dram::with_channels(p, c..c + 1)
    }

    fn with_channels(p: &DramParams, which: std::ops::Range<u32>) -> Dram {
        let nch = p.channels as u64;
        let bpc = p.bytes_per_cycle;
        let bus_bytes_per_s = bpc as u128 * p.clock_hz.max(1) as u128;
        let refresh_on = p.t_refi_ps > 0;
        let channels = which
            .map(|c| c as u64)
            .map(|c| Channel {
                banks: (0..p.banks)
                    .map(|_| Bank {
                        open_row: None,
                        opened_in: 0,
                        busy: BwPort::time(),
                    })
                    .collect(),
                bus: BwPort::new(bpc, p.clock_hz),
                booked_until: 0,
                next_refresh: 0,
                refresh_offset: if refresh_on { p.t_refi_ps * c / nch } else { 0 },
                writes: Vec::new(),
                queue: Mshrs::new(p.queue_entries),
            })
            .collect();
        let refresh_bytes = if refresh_on {
            ((p.t_rfc_ps as u128 * bus_bytes_per_s + PS_PER_S / 2) / PS_PER_S) as u64
        } else {
            0
        };
        let mut dram = Dram {
            channels,
            map: p.map,
            row_bytes: p.row_bytes,
            t_rcd_ps: p.t_rcd_ps,
            t_rp_ps: p.t_rp_ps,
            latency_ps: p.latency_ps,
            bus_bytes_per_s,
            t_refi_ps: p.t_refi_ps,
            refresh_bytes,
            refresh_ps: 0,
            rtw_bytes: p.read_to_write_cycles * bpc,
            wtr_bytes: p.write_to_read_cycles * bpc,
            drain_requests: p.write_drain_requests,
            counters: DramCounters::default(),
        };
        dram.refresh_ps = dram.bus_ps(refresh_bytes);
        dram
    }

    #[inline(always)]
    pub(crate) fn map(&self, addr: u64) -> DramAddr {
        let (channel, local) = self.map.map(addr);
        DramAddr { channel, local }
    }

    /// What the channels have done so far.
    #[cfg(test)]
    pub(crate) fn counters(&self) -> DramCounters {
        self.counters
    }

    /// Picoseconds (rounded up) that `bytes` occupy one channel's bus.
    fn bus_ps(&self, bytes: u64) -> Picos {
        // In 64 bits when the product fits (any burst: up to 18 MB), instead of the 128-bit
        // library division; the same quotient.
        match (
            bytes.checked_mul(PS_PER_S as u64),
            u64::try_from(self.bus_bytes_per_s),
        ) {
            (Some(n), Ok(d)) => n.div_ceil(d),
            _ => (bytes as u128 * PS_PER_S).div_ceil(self.bus_bytes_per_s) as Picos,
        }
    }

    /// The refresh interval `t` falls in on channel `ch` (0 before its first refresh, and
    /// always 0 without refresh).
    fn refresh_interval(&self, ch: usize, t: Picos) -> u64 {
        if self.t_refi_ps == 0 {
            return 0;
        }
        let off = self.channels[ch].refresh_offset;
        if t < off {
            0
        } else {
            (t - off) / self.t_refi_ps + 1
        }
    }

    /// Reserves `bytes` of bus time on channel `ch` no earlier than `t`, after placing every
    /// refresh due before it could start; returns its start.
    #[inline(always)]
    fn reserve_bus(&mut self, ch: usize, floor: Picos, t: Picos, bytes: u64) -> Picos {
        let dur = self.bus_ps(bytes);
        if self.t_refi_ps > 0 {
            let refresh_dur = self.refresh_ps;
            // The burst starts at the latest at the end of everything booked (or at `t`).
            // Fixed before placing refreshes, so that the loop ends whatever their length (a
            // refresh pushed past it is placed by the next reservation).
            let latest = self.channels[ch].booked_until.max(t);
            loop {
                let c = &self.channels[ch];
                let due = c.refresh_offset + c.next_refresh * self.t_refi_ps;
                if due > latest {
                    break;
                }
                // A refresh wholly before `floor` happened while nothing could be waiting.
                if due + refresh_dur > floor {
                    let rb = self.refresh_bytes;
                    let c = &mut self.channels[ch];
                    let s = c.bus.reserve(floor, due, rb);
                    c.booked_until = c.booked_until.max(s + refresh_dur);
                    self.counters.refreshes += 1;
                } else {
                    let skip = (floor - due - refresh_dur) / self.t_refi_ps;
                    self.channels[ch].next_refresh += skip;
                }
                self.channels[ch].next_refresh += 1;
            }
        }
        let c = &mut self.channels[ch];
        let s = c.bus.reserve(floor, t, bytes);
        c.booked_until = c.booked_until.max(s + dur);
        s
    }

    /// Moves `bytes` of the row holding `a`, asked at `t` (`floor`: no later call asks
    /// earlier). A read returns when its data is at the L2 slice; a write is posted and
    /// returns `t` (see the module documentation for when it takes the bus).
    #[inline(always)]
    pub(crate) fn access(
        &mut self,
        floor: Picos,
        t: Picos,
        a: DramAddr,
        bytes: u64,
        op: DramOp,
    ) -> Picos {
        let ch = (a.channel as usize) % self.channels.len();
        let row_index = a.local / self.row_bytes;
        let nb = self.channels[ch].banks.len() as u64;
        let bank = (row_index % nb) as usize;
        let row = row_index / nb;
        match op {
            DramOp::Read => {
                // A full scheduler queue: in when the earliest queued read starts.
                let (t, _) = self.channels[ch].queue.acquire(t);
                let epoch = self.refresh_interval(ch, t);
                let (t_rcd, t_rp) = (self.t_rcd_ps, self.t_rp_ps);
                let b = &mut self.channels[ch].banks[bank];
                let open = b.open_row.filter(|_| b.opened_in == epoch);
                let cost = match open {
                    Some(r) if r == row => 0,
                    Some(_) => t_rp + t_rcd,
                    None => t_rcd,
                };
                b.open_row = Some(row);
                b.opened_in = epoch;
                let ready = if cost > 0 {
                    b.busy.reserve(floor, t, cost) + cost
                } else {
                    t
                };
                self.counters.data_bytes += bytes;
                let s = self.reserve_bus(ch, floor, ready, bytes);
                self.channels[ch].queue.release(s);
                s + self.latency_ps
            }
            DramOp::Write => {
                self.channels[ch]
                    .writes
                    .push(QueuedWrite { bank, row, bytes });
                if self.channels[ch].writes.len() >= self.drain_requests {
                    self.drain(ch, floor, t);
                }
                t
            }
        }
    }

    /// Sends channel `ch`'s queued writes, asked at `t`, as one block of bus time.
    fn drain(&mut self, ch: usize, floor: Picos, t: Picos) {
        let writes = std::mem::take(&mut self.channels[ch].writes);
        let data: u64 = writes.iter().map(|w| w.bytes).sum();
        let block = self.rtw_bytes + data + self.wtr_bytes;
        let s = self.reserve_bus(ch, floor, t, block);
        let epoch = self.refresh_interval(ch, s);
        for w in &writes {
            let b = &mut self.channels[ch].banks[w.bank];
            b.open_row = Some(w.row);
            b.opened_in = epoch;
        }
        self.counters.data_bytes += data;
        self.counters.drains += 1;
        let mut writes = writes;
        writes.clear();
        self.channels[ch].writes = writes; // keeps the allocation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a100() -> GpuConfig {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/a100.yaml");
        GpuConfig::load(p, &[]).expect("a100.yaml loads")
    }

    /// Streams a triad's DRAM traffic through `cfg`'s channels: per 128 B line, a read of
    /// `b`, a read of `c` and a (write-back) write of `a`, the three arrays 64 MiB apart, at
    /// 256 B interleave, offered at `offer` times the peak so that every channel is
    /// saturated. Returns (delivered bytes / (busy span x peak), the counters).
    fn triad_efficiency(cfg: &GpuConfig, lines: u64, offer: f64) -> (f64, DramCounters) {
        let mut d = Dram::new(&DramParams::from_config(cfg));
        let peak = cfg.dram_peak_bytes_per_s() as f64;
        let line = 128u64;
        let (b, c, a) = (0u64, 64 << 20, 128 << 20);
        // One request every `gap` ps offers `offer` x peak.
        let gap = line as f64 * 1e12 / (peak * offer);
        let mut last = 0;
        for i in 0..lines {
            let off = i * line;
            for (k, (base, op)) in [(b, DramOp::Read), (c, DramOp::Read), (a, DramOp::Write)]
                .into_iter()
                .enumerate()
            {
                let t = ((3 * i + k as u64) as f64 * gap) as Picos;
                let r = d.access(t, t, d.map(base + off), line, op);
                if op == DramOp::Read {
                    last = last.max(r - d.latency_ps);
                }
            }
        }
        let end = d
            .channels
            .iter()
            .map(|c| c.booked_until)
            .max()
            .unwrap_or(0)
            .max(last);
        let n = d.counters();
        (n.data_bytes as f64 / (end as f64 * peak / 1e12), n)
    }

    /// The DRAM alone, on a100.yaml, delivers a saturating triad stream (2 reads : 1 write,
    /// 128 B lines, 256 B interleave) at the efficiency its timing implies, and never more
    /// than the peak:
    /// - refresh: 1 - t_rfc / t_refi = 1 - 350 ns / 3.9 us = 0.91026;
    /// - turnarounds: a drain carries 76 writes of 4 bus cycles (128 B at 32 B per cycle)
    ///   and between drains the bus carries 152 reads of 4 cycles: 912 data cycles per
    ///   912 + read_to_write 2 + write_to_read 27 = 941, i.e. 0.96918;
    /// - together 0.8822, against the 0.884 of the measured A100 triad (GB
    ///   gpu-stream/a100_40.txt, 1,375 of 1,555 GB/s; hardware-figures.md section 2a) that
    ///   tests/calibration.rs checks through the whole memory pipeline.
    #[test]
    fn saturated_triad_stream_delivers_the_refresh_and_turnaround_efficiency() {
        let cfg = a100();
        assert_eq!(cfg.dram.t_rfc_ps, 350_000);
        assert_eq!(cfg.dram.t_refi_ps, 3_900_000);
        assert_eq!(cfg.dram.write_drain_requests, 76);
        assert_eq!(
            (cfg.dram.read_to_write_cycles, cfg.dram.write_to_read_cycles),
            (2, 27)
        );
        let want = (1.0 - 350.0 / 3900.0) * 912.0 / 941.0;
        // 400,000 lines: 153.6 MB, about 110 us at 88% of 1,555 GB/s (28 refreshes per
        // channel), offered at 1.5x the peak.
        let (eff, n) = triad_efficiency(&cfg, 400_000, 1.5);
        assert!(
            (eff - want).abs() < 0.005,
            "efficiency {eff:.4}, want {want:.4} ({n:?})"
        );
        assert!(eff <= 1.0);
        // Every channel refreshed once per 3.9 us of its busy span, and drained once per 76
        // writes (40 channels, 10,000 writes each: 131 drains, 44 writes left queued).
        assert_eq!(n.drains, 40 * (10_000 / 76));
        assert!(n.refreshes >= 40 * 27, "{n:?}");

        // Without refresh and turnarounds the same stream fills the bus to within 0.5%.
        let mut ideal = cfg.clone();
        ideal.dram.t_refi_ps = 0;
        ideal.dram.t_rfc_ps = 0;
        ideal.dram.read_to_write_cycles = 0;
        ideal.dram.write_to_read_cycles = 0;
        let (eff0, n0) = triad_efficiency(&ideal, 400_000, 1.5);
        assert!(eff0 > 0.995 && eff0 <= 1.0, "{eff0} ({n0:?})");
        assert_eq!(n0.refreshes, 0);
    }

    /// A refresh (nearly) as long as its interval leaves the channel almost nothing, and
    /// the model still ends: each reservation places only the refreshes due before what
    /// the bus had booked when it was asked.
    #[test]
    fn refresh_nearly_as_long_as_its_interval_still_ends() {
        let mut cfg = a100();
        cfg.dram.t_refi_ps = 1_000_000;
        cfg.dram.t_rfc_ps = 999_999;
        let (eff, n) = triad_efficiency(&cfg, 2_000, 1.5);
        assert!(eff > 0.0 && eff < 0.01, "{eff} ({n:?})");
    }

    /// Refresh: an access that finds its channel refreshing waits for the end of tRFC;
    /// one in the next refresh interval finds its bank's row closed (pays t_rcd).
    #[test]
    fn refresh_blocks_the_bus_and_closes_rows() {
        let mut cfg = a100();
        cfg.dram.channels = 1;
        let mut d = Dram::new(&DramParams::from_config(&cfg));
        let per = cfg.dram_period_ps();
        let lat = cfg.dram.latency_ps;
        let t_rcd = cfg.dram.t_rcd_cycles as Picos * per;
        // Channel 0's first refresh is due at 0: [0, 350 ns) is taken.
        let a = d.map(0);
        let r = d.access(0, 0, a, 32, DramOp::Read);
        // Activate (t_rcd) overlaps the refresh; the burst waits for its end.
        assert_eq!(r - lat, 350_000);
        // A row hit in the same interval pays nothing more.
        let r2 = d.access(400_000, 400_000, a, 32, DramOp::Read);
        assert_eq!(r2 - lat, 400_000);
        // After the refresh due at 3.9 us the row is closed: t_rcd again, and the burst
        // also waits out that refresh (3.9 us + 350 ns).
        let r3 = d.access(3_950_000, 3_950_000, a, 32, DramOp::Read);
        assert_eq!(r3 - lat, 3_900_000 + 350_000);
        let r4 = d.access(5_000_000, 5_000_000, a, 32, DramOp::Read);
        assert_eq!(r4 - lat, 5_000_000);
        // The refresh due at 7.8 us ended (8.15 us) before this access: no wait, but the
        // row is closed.
        let r5 = d.access(9_000_000, 9_000_000, a, 32, DramOp::Read);
        assert_eq!(r5 - lat, 9_000_000 + t_rcd);
        assert_eq!(d.counters().refreshes, 2);
    }

    /// The scheduler queue: with room for one read, a second read to another (closed)
    /// bank enters only when the first's burst starts, so its activate no longer overlaps
    /// the first's; with room for two it does.
    #[test]
    fn a_full_scheduler_queue_holds_a_read_back() {
        let mut cfg = a100();
        cfg.dram.channels = 1;
        cfg.dram.t_refi_ps = 0;
        cfg.dram.t_rfc_ps = 0;
        let per = cfg.dram_period_ps();
        let lat = cfg.dram.latency_ps;
        let t_rcd = cfg.dram.t_rcd_cycles as Picos * per;
        let row = cfg.dram.row_bytes as u64;
        let second = |entries: u32| {
            let mut c = cfg.clone();
            c.dram.queue_entries = entries;
            let mut d = Dram::new(&DramParams::from_config(&c));
            let (a, b) = (d.map(0), d.map(row));
            assert_eq!(a.channel, b.channel);
            let first = d.access(0, 0, a, 32, DramOp::Read) - lat;
            assert_eq!(first, t_rcd);
            d.access(0, 0, b, 32, DramOp::Read) - lat
        };
        // Two: both activates at 0, the second burst right after the first's 32 B.
        let burst = second(2) - t_rcd;
        assert!(burst > 0 && burst < t_rcd, "{burst} ps");
        // One: the second read enters at the first's burst start, then activates.
        assert_eq!(second(1), 2 * t_rcd);
    }

    /// Posted writes take no bus time until a drain; the drain is one block of turnaround
    /// + data + turnaround that a read then waits behind.
    #[test]
    fn writes_drain_in_one_block_with_both_turnarounds() {
        let mut cfg = a100();
        cfg.dram.channels = 1;
        cfg.dram.t_refi_ps = 0;
        cfg.dram.t_rfc_ps = 0;
        cfg.dram.write_drain_requests = 4;
        let mut d = Dram::new(&DramParams::from_config(&cfg));
        let per_byte_ps = 1e12 / (32.0 * 1.215e9);
        let t0 = 1_000_000;
        for i in 0..3u64 {
            assert_eq!(d.access(t0, t0, d.map(i * 128), 128, DramOp::Write), t0);
        }
        assert_eq!(d.counters().drains, 0);
        // Nothing on the bus yet: a read at t0 (row 0 of bank 0 closed: t_rcd) goes at once.
        let t_rcd = 22 * cfg.dram_period_ps();
        let r = d.access(t0, t0, d.map(1 << 20), 32, DramOp::Read);
        assert_eq!(r - cfg.dram.latency_ps, t0 + t_rcd);
        // The fourth write drains: 2 + 4 x 4 + 27 = 45 cycles of bus from t0 + t_rcd + 1
        // cycle (after the read's burst).
        d.access(t0, t0, d.map(3 * 128), 128, DramOp::Write);
        assert_eq!(d.counters().drains, 1);
        // A read to another bank (closed: t_rcd) waits behind the drain.
        let r = d.access(t0, t0, d.map((1 << 20) + 1024), 32, DramOp::Read);
        let start = (r - cfg.dram.latency_ps) as f64;
        let want = t0 as f64 + t_rcd as f64 + (32.0 + 45.0 * 32.0) * per_byte_ps;
        assert!((start - want).abs() < 2.0, "{start} vs {want}");
    }
}
