//! Time series (`tessera run --sample-every CYCLES`): per-interval counters keyed by
//! hardware (chiplet, SM, link direction), never by partition.
//!
//! A [`Sampler`] is an [`Observer`] attached to one partition: every event its units
//! report carries its simulated time, and the sampler adds it to the interval that time
//! falls in (`time / interval_ps`). The interval of an event is a property of the event, not
//! of when the host saw it, so units that run ahead of the others (an SM simulating several
//! cycles per visit), windows, threads, ranks and cuts change nothing: the same events land
//! in the same intervals. No communication is needed while sampling; at the end each
//! partition's series join its stats part ([`SeriesPart`], sent to rank 0 under MPI) and
//! the merge sums them per chiplet in unit-id order (integers; ratios computed once).
//!
//! The events' sums equal the units' counters ([`crate::observe`]), so each series sums to
//! the run's total. An event after the run's end (a write-back a unit takes after the last
//! kernel completed) counts in the last interval.
//!
//! Memory: per interval, 8 words per SM, 3 per DRAM channel unit and 2 per link direction,
//! held for the intervals the run reaches; at most [`MAX_SAMPLES`] intervals: an event past
//! them stops the run with an error at the end of its window.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::mem::{Unit, UnitIds};
use crate::observe::{CtaEvent, IssueEvent, LinkPacket, MemAccess, MemLevel, Observer};
use crate::stats::LinkEntry;
use crate::Picos;

/// The most intervals a run may sample.
pub const MAX_SAMPLES: u64 = 1_000_000;

/// SM row: warp instructions, thread instructions, CTAs arrived, CTAs completed, L1D
/// accesses, L1D hits, and the resident-warp integral's two parts (see [`Sampler::cta`]).
const SM_WIDTH: usize = 8;
const SM_WARP_PARTIAL: usize = 6;
const SM_WARP_STEP: usize = 7;
/// Channel row: L2 accesses, L2 hits, DRAM bytes.
const CHANNEL_WIDTH: usize = 3;
/// Per link direction: bytes, busy picoseconds.
const LINK_FIELDS: usize = 2;

/// The sampling interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    /// Core cycles per interval.
    pub cycles: u64,
    /// Core period in picoseconds.
    pub period_ps: Picos,
}

impl Interval {
    /// `cycles` core cycles of `period_ps`, or why that cannot be sampled.
    pub fn new(cycles: u64, period_ps: Picos) -> Result<Interval, String> {
        if cycles == 0 {
            return Err("--sample-every 0: the interval must be at least one cycle".into());
        }
        if cycles.checked_mul(period_ps).is_none() {
            return Err(format!(
                "--sample-every {cycles}: beyond the simulated time a run can reach"
            ));
        }
        Ok(Interval { cycles, period_ps })
    }

    pub fn ps(&self) -> Picos {
        self.cycles * self.period_ps
    }

    /// Intervals of a run ending at `end_ps` (at least one; the last may be shorter).
    pub fn count(&self, end_ps: Picos) -> u64 {
        end_ps.div_ceil(self.ps()).max(1)
    }

    /// The error of a run whose `samples` intervals exceed [`MAX_SAMPLES`], if it does.
    pub fn check_count(&self, samples: u64) -> Result<(), String> {
        if samples > MAX_SAMPLES {
            return Err(format!(
                "--sample-every {}: the run makes {samples} intervals, more than {MAX_SAMPLES}; \
                 give a larger interval",
                self.cycles
            ));
        }
        Ok(())
    }
}

/// One unit's rows: `width` counters per interval, intervals from 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitSeries {
    width: usize,
    data: Vec<u64>,
}

impl UnitSeries {
    fn new(width: usize) -> UnitSeries {
        UnitSeries {
            width,
            data: Vec::new(),
        }
    }

    /// Interval `k`'s row (`k < MAX_SAMPLES`), grown to it.
    #[inline]
    fn row(&mut self, k: u64) -> &mut [u64] {
        let k = k as usize;
        let end = (k + 1) * self.width;
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        &mut self.data[k * self.width..end]
    }

    fn intervals(&self) -> usize {
        self.data.len().checked_div(self.width).unwrap_or(0)
    }

    fn get(&self, k: usize, field: usize) -> u64 {
        self.data.get(k * self.width + field).copied().unwrap_or(0)
    }
}

/// What one partition sampled, by unit id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesPart {
    pub interval: Option<Interval>,
    pub units: Vec<(u32, UnitSeries)>,
}

impl SeriesPart {
    pub fn extend(&mut self, o: SeriesPart) {
        self.interval = self.interval.or(o.interval);
        self.units.extend(o.units);
    }
}

/// The observer sampling one partition's units (module documentation). A partition runs
/// on one thread at a time, so its lock is never contended.
pub struct Sampler {
    interval: Interval,
    interval_ps: Picos,
    ids: UnitIds,
    /// Bytes per L2 sector (a DRAM access counts sectors).
    sector_bytes: u64,
    units: Mutex<Vec<Option<UnitSeries>>>,
    /// An event fell past [`MAX_SAMPLES`] intervals: the run stops with an error (checked
    /// once per window), before the series grow further.
    overflow: AtomicBool,
}

impl Sampler {
    pub fn new(interval: Interval, ids: UnitIds, sector_bytes: u64) -> Arc<Sampler> {
        Arc::new(Sampler {
            interval,
            interval_ps: interval.ps(),
            ids,
            sector_bytes,
            units: Mutex::new(vec![None; ids.count() as usize]),
            overflow: AtomicBool::new(false),
        })
    }

    /// The error of a run that went past [`MAX_SAMPLES`] intervals, if it did.
    pub fn overflowed(&self) -> Option<String> {
        self.overflow.load(Ordering::Relaxed).then(|| {
            format!(
                "--sample-every {}: the run makes more than {MAX_SAMPLES} intervals; give a \
                 larger interval",
                self.interval.cycles
            )
        })
    }

    /// Interval `k` when it can be kept; otherwise notes the overflow.
    #[inline]
    fn keep(&self, k: u64) -> Option<u64> {
        if k < MAX_SAMPLES {
            Some(k)
        } else {
            self.overflow.store(true, Ordering::Relaxed);
            None
        }
    }

    /// Calls `f` with unit `unit`'s series (made on its first event).
    #[inline]
    fn with(&self, unit: u32, f: impl FnOnce(&mut UnitSeries)) {
        let Ok(mut units) = self.units.lock() else {
            return;
        };
        let Some(slot) = units.get_mut(unit as usize) else {
            return;
        };
        let ids = self.ids;
        let s = slot.get_or_insert_with(|| {
            UnitSeries::new(match ids.unit(unit) {
                Some(Unit::Sm(_)) => SM_WIDTH,
                Some(Unit::Channel(_)) => CHANNEL_WIDTH,
                // Up to a link per other chiplet of the GPU, the switch's port, and the
                // GPU fabric's two ports.
                Some(Unit::Link(_)) => LINK_FIELDS * (ids.gpu_chiplets as usize + 2),
                _ => 1,
            })
        });
        f(s);
    }

    /// What it sampled, leaving it empty.
    pub fn take(&self) -> SeriesPart {
        let units = match self.units.lock() {
            Ok(mut u) => std::mem::take(&mut *u),
            Err(_) => Vec::new(),
        };
        SeriesPart {
            interval: Some(self.interval),
            units: units
                .into_iter()
                .enumerate()
                .filter_map(|(u, s)| Some((u as u32, s?)))
                .collect(),
        }
    }
}

impl Observer for Sampler {
    fn issue(&self, unit: u32, e: &IssueEvent) {
        let Some(k) = self.keep(e.cycle / self.interval.cycles) else {
            return;
        };
        self.with(unit, |s| {
            let r = s.row(k);
            r[0] += 1;
            r[1] += e.lanes as u64;
        });
    }

    /// Arrivals and completions, and the resident warps' integral over each interval:
    /// `w` warps arriving at cycle `c` of interval `k` add `w * (end of k - c)` to `k`'s
    /// partial sum and `w` to its step (the level from the next interval on); a completion
    /// subtracts the same (wrapping arithmetic: the totals are non-negative). The merge
    /// adds the levels, so the order in which events are seen does not matter.
    fn cta(&self, unit: u32, e: &CtaEvent) {
        let l = self.interval.cycles;
        let Some(k) = self.keep(e.cycle / l) else {
            return;
        };
        let w = e.warps as u64;
        let part = w.wrapping_mul((k + 1) * l - e.cycle);
        self.with(unit, |s| {
            let r = s.row(k);
            if e.done {
                r[3] += 1;
                r[SM_WARP_PARTIAL] = r[SM_WARP_PARTIAL].wrapping_sub(part);
                r[SM_WARP_STEP] = r[SM_WARP_STEP].wrapping_sub(w);
            } else {
                r[2] += 1;
                r[SM_WARP_PARTIAL] = r[SM_WARP_PARTIAL].wrapping_add(part);
                r[SM_WARP_STEP] = r[SM_WARP_STEP].wrapping_add(w);
            }
        });
    }

    fn mem_access(&self, unit: u32, e: &MemAccess) {
        let Some(k) = self.keep(e.at / self.interval_ps) else {
            return;
        };
        let (a, b, hits) = match e.level {
            MemLevel::L1d => (4, 5, e.hits as u64),
            MemLevel::L2 => (0, 1, e.hits as u64),
            MemLevel::Dram => {
                let bytes = e.sectors as u64 * self.sector_bytes;
                self.with(unit, |s| s.row(k)[2] += bytes);
                return;
            }
            MemLevel::Llc => return,
        };
        self.with(unit, |s| {
            let r = s.row(k);
            r[a] += e.sectors as u64;
            r[b] += hits;
        });
    }

    /// Bytes in the interval the packet was offered in; busy time in the intervals its
    /// transmission spans.
    fn link_packet(&self, unit: u32, e: &LinkPacket) {
        let i = self.interval_ps;
        let f = e.link as usize * LINK_FIELDS;
        let Some(sent) = self.keep(e.sent_at / i) else {
            return;
        };
        let last = e.tx_end.saturating_sub(1) / i;
        if e.tx_end > e.tx_start && self.keep(last).is_none() {
            return;
        }
        self.with(unit, |s| {
            if f + 1 >= s.width {
                return;
            }
            s.row(sent)[f] += e.bytes;
            let mut t = e.tx_start;
            while t < e.tx_end {
                let k = t / i;
                let until = ((k + 1).saturating_mul(i)).min(e.tx_end);
                s.row(k)[f + 1] += until - t;
                t = until;
            }
        });
    }
}

/// The run's counters per interval (`tessera run --sample-every CYCLES`; absent without
/// it). Each event a unit counts lands in the interval of its own simulated time (an
/// instruction's issue cycle, an access's arrival at the cache, a packet's offer to the
/// link), so the series are the same for any threads, ranks and partitioning, and each
/// counter's series sums to the counter. A run may make at most 1,000,000 intervals; the
/// simulator holds about 8 words per SM, 3 per DRAM channel and 2 per link direction per
/// interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeSeries {
    /// The interval in core cycles (`--sample-every`).
    pub interval_cycles: u64,
    /// The interval in picoseconds (`interval_cycles` core periods).
    pub interval_ps: u64,
    /// The end of each interval, in picoseconds: `(k + 1) * interval_ps` except the last,
    /// which is the run's end (`totals.sim_time_ps`) and may be shorter. Every series below
    /// has one value per entry. An interval holds the events at times `[end of the one
    /// before, its end)`; events after the run's end count in the last.
    pub end_ps: Vec<u64>,
    /// One entry per chiplet, in the order of the top-level `chiplets`.
    pub chiplets: Vec<ChipletSeries>,
    /// One entry per top-level `links` entry, in the same order.
    pub links: Vec<LinkSeries>,
}

/// One chiplet's series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChipletSeries {
    /// Chiplet index across the system (as `chiplets[].id`).
    pub id: u32,
    /// The GPU it belongs to.
    pub gpu: u32,
    /// Warp instructions its SMs issued in the interval (by issue cycle; sums to the
    /// chiplet's `warp_insts`).
    pub warp_insts: Vec<u64>,
    /// Thread instructions (active lanes) issued in the interval per core cycle of the
    /// interval (as `totals.ipc`).
    pub ipc: Vec<f64>,
    /// Mean over the interval of the warps resident on its SMs (warp slots held by resident
    /// CTAs, from a CTA's arrival to its completion), summed over its SMs.
    pub active_warps: Vec<f64>,
    /// L1D sector accesses at its SMs in the interval (sums to `memory.l1d_accesses`).
    pub l1d_accesses: Vec<u64>,
    /// L1D sector hits in the interval (sums to `memory.l1d_hits`).
    pub l1d_hits: Vec<u64>,
    /// `l1d_hits / l1d_accesses`; null when there was no access.
    pub l1d_hit_rate: Vec<Option<f64>>,
    /// Sector accesses at its L2 slices in the interval, by arrival at the slice (sums to
    /// `memory.l2_accesses`).
    pub l2_accesses: Vec<u64>,
    /// L2 sector hits in the interval (sums to `memory.l2_hits`).
    pub l2_hits: Vec<u64>,
    /// `l2_hits / l2_accesses`; null when there was no access.
    pub l2_hit_rate: Vec<Option<f64>>,
    /// Bytes its DRAM channels read and wrote in the interval, by the access's start (sums
    /// to `memory.dram_bytes`).
    pub dram_bytes: Vec<u64>,
    /// `dram_bytes` per second of the interval, in GB/s (10^9 bytes).
    pub dram_gbps: Vec<f64>,
    /// CTAs that arrived on its SMs in the interval (dispatched by its local CP; sums to
    /// the chiplet's `ctas`).
    pub ctas_launched: Vec<u64>,
    /// CTAs that completed on its SMs in the interval (results all written; sums to the
    /// chiplet's `ctas` when the run completes).
    pub ctas_retired: Vec<u64>,
    /// One entry per SM of the chiplet, in SM order.
    pub sms: Vec<SmSeries>,
}

/// One SM's series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SmSeries {
    /// Warp instructions it issued in the interval.
    pub warp_insts: Vec<u64>,
    /// Its thread instructions per core cycle of the interval.
    pub ipc: Vec<f64>,
}

/// One link direction's series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkSeries {
    /// Sending end, as the `links` entry names it.
    pub from: String,
    /// Receiving end.
    pub to: String,
    /// Packet bytes (header and data) offered in the interval (sums to the entry's
    /// `bytes`).
    pub bytes: Vec<u64>,
    /// Picoseconds of the interval the sender was transmitting (each packet's transmission
    /// rounded to whole picoseconds, so the sum can differ from the entry's `busy_ps` by
    /// less than a picosecond per packet).
    pub busy_ps: Vec<u64>,
    /// `busy_ps` over the interval's length (at most 1, but for the last interval, which
    /// also holds any transmission after the run's end).
    pub utilization: Vec<f64>,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Builds the `timeseries` object from the merged parts of a run ending at `end_ps`;
/// `links` are the run's link entries by link-interface unit, in unit order (what the
/// top-level `links` concatenates).
pub(crate) fn assemble(
    ids: &UnitIds,
    mut part: SeriesPart,
    end_ps: Picos,
    links: &[(u32, Vec<LinkEntry>)],
) -> Option<TimeSeries> {
    let interval = part.interval?;
    let ip = interval.ps();
    let l = interval.cycles;
    let n = interval.count(end_ps).min(MAX_SAMPLES) as usize;
    let end_cycle = end_ps.div_ceil(interval.period_ps);
    let ends: Vec<u64> = (0..n as u64).map(|k| ((k + 1) * ip).min(end_ps)).collect();
    // Lengths in picoseconds and core cycles (the last to the run's end).
    let len_ps: Vec<u64> = (0..n)
        .map(|k| ends[k].saturating_sub(k as u64 * ip))
        .collect();
    let len_cycles: Vec<u64> = (0..n as u64)
        .map(|k| ((k + 1) * l).min(end_cycle).saturating_sub(k * l))
        .collect();
    part.units.sort_by_key(|&(u, _)| u);
    // A unit's value of `field` in each of the `n` intervals, those past the last folded
    // into it.
    let fold = |s: &UnitSeries, field: usize| -> Vec<u64> {
        let mut v: Vec<u64> = (0..n).map(|k| s.get(k, field)).collect();
        for k in n..s.intervals() {
            v[n - 1] = v[n - 1].wrapping_add(s.get(k, field));
        }
        v
    };
    let add = |acc: &mut Vec<u64>, v: &[u64]| {
        for (a, b) in acc.iter_mut().zip(v) {
            *a = a.wrapping_add(*b);
        }
    };
    let zeros = || vec![0u64; n];
    struct Sums {
        f: Vec<Vec<u64>>,
        sms: Vec<SmSeries>,
    }
    let mut chiplets: Vec<Sums> = (0..ids.chiplets)
        .map(|_| Sums {
            f: (0..SM_WIDTH + CHANNEL_WIDTH).map(|_| zeros()).collect(),
            sms: Vec::new(),
        })
        .collect();
    let ipc = |insts: &[u64]| -> Vec<f64> {
        insts
            .iter()
            .zip(&len_cycles)
            .map(|(&i, &c)| ratio(i, c))
            .collect()
    };
    let mut series = part.units.iter().peekable();
    let mut link_series = Vec::new();
    for u in 0..ids.count() {
        let mine = match series.peek() {
            Some((v, _)) if *v == u => series.next().map(|(_, s)| s),
            _ => None,
        };
        let Some(c) = chiplets.get_mut(ids.chiplet_of(u) as usize) else {
            continue;
        };
        match ids.unit(u) {
            Some(Unit::Sm(_)) => {
                let empty = UnitSeries::new(SM_WIDTH);
                let s = mine.unwrap_or(&empty);
                let mut f: Vec<Vec<u64>> = (0..SM_WIDTH).map(|j| fold(s, j)).collect();
                // Warps resident after the end: their step past the run adds nothing.
                let late_step =
                    (n..s.intervals()).fold(0u64, |a, k| a.wrapping_add(s.get(k, SM_WARP_STEP)));
                let late_part =
                    (n..s.intervals()).fold(0u64, |a, k| a.wrapping_add(s.get(k, SM_WARP_PARTIAL)));
                let over = (n as u64 * l).saturating_sub(end_cycle);
                f[SM_WARP_PARTIAL][n - 1] = f[SM_WARP_PARTIAL][n - 1]
                    .wrapping_sub(late_part)
                    .wrapping_add(late_step.wrapping_mul(over));
                for (acc, v) in c.f.iter_mut().zip(&f) {
                    add(acc, v);
                }
                c.sms.push(SmSeries {
                    ipc: ipc(&f[1]),
                    warp_insts: f[0].clone(),
                });
            }
            Some(Unit::Channel(_)) => {
                if let Some(s) = mine {
                    for j in 0..CHANNEL_WIDTH {
                        add(&mut c.f[SM_WIDTH + j], &fold(s, j));
                    }
                }
            }
            Some(Unit::Link(_)) => {
                let entries = links
                    .iter()
                    .find(|(v, _)| *v == u)
                    .map_or(&[][..], |(_, e)| &e[..]);
                for (d, e) in entries.iter().enumerate() {
                    let (bytes, busy) = match mine {
                        Some(s) if (d + 1) * LINK_FIELDS <= s.width => {
                            (fold(s, d * LINK_FIELDS), fold(s, d * LINK_FIELDS + 1))
                        }
                        _ => (zeros(), zeros()),
                    };
                    link_series.push(LinkSeries {
                        from: e.from.clone(),
                        to: e.to.clone(),
                        utilization: busy
                            .iter()
                            .zip(&len_ps)
                            .map(|(&b, &p)| ratio(b, p))
                            .collect(),
                        bytes,
                        busy_ps: busy,
                    });
                }
            }
            _ => {}
        }
    }
    let chiplets = chiplets
        .into_iter()
        .enumerate()
        .map(|(k, c)| {
            let f = &c.f;
            // The resident-warp integral: the level carried in plus this interval's
            // partial sum; the last interval ends at the run's end, not its full length.
            let mut level = 0u64;
            let active: Vec<f64> = (0..n)
                .map(|j| {
                    let full = (j as u64 + 1) * l;
                    let cut = full.saturating_sub(end_cycle.max(j as u64 * l));
                    let integral = level
                        .wrapping_mul(len_cycles[j])
                        .wrapping_add(f[SM_WARP_PARTIAL][j])
                        .wrapping_sub(f[SM_WARP_STEP][j].wrapping_mul(cut));
                    level = level.wrapping_add(f[SM_WARP_STEP][j]);
                    ratio(integral, len_cycles[j])
                })
                .collect();
            let rate = |h: &[u64], a: &[u64]| -> Vec<Option<f64>> {
                h.iter()
                    .zip(a)
                    .map(|(&h, &a)| (a > 0).then(|| h as f64 / a as f64))
                    .collect()
            };
            let dram = &f[SM_WIDTH + 2];
            ChipletSeries {
                id: k as u32,
                gpu: ids.gpu_of_chiplet(k as u32),
                warp_insts: f[0].clone(),
                ipc: ipc(&f[1]),
                active_warps: active,
                l1d_accesses: f[4].clone(),
                l1d_hits: f[5].clone(),
                l1d_hit_rate: rate(&f[5], &f[4]),
                l2_accesses: f[SM_WIDTH].clone(),
                l2_hits: f[SM_WIDTH + 1].clone(),
                l2_hit_rate: rate(&f[SM_WIDTH + 1], &f[SM_WIDTH]),
                dram_bytes: dram.clone(),
                // Bytes per picosecond times 1000 is GB/s.
                dram_gbps: dram
                    .iter()
                    .zip(&len_ps)
                    .map(|(&b, &p)| ratio(b, p) * 1000.0)
                    .collect(),
                ctas_launched: f[2].clone(),
                ctas_retired: f[3].clone(),
                sms: c.sms,
            }
        })
        .collect();
    Some(TimeSeries {
        interval_cycles: l,
        interval_ps: ip,
        end_ps: ends,
        chiplets,
        links: link_series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids_of(config: &str) -> UnitIds {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../configs")
            .join(config);
        let cfg = crate::config::GpuConfig::load(p, &[]).expect("the config loads");
        UnitIds::new(&cfg)
    }

    fn ids() -> UnitIds {
        ids_of("default.yaml")
    }

    /// The resident-warp means equal a cycle-by-cycle count, whatever the order in which
    /// the sampler sees the events, with a last interval cut short.
    #[test]
    fn active_warps_are_the_mean_resident_warps_in_any_event_order() {
        let ids = ids();
        let sm = ids.sm(0);
        let every = 100;
        let interval = Interval::new(every, 1_000).unwrap();
        // (arrival, completion, warps)
        let ctas = [
            (0, 50, 4),
            (30, 260, 8),
            (99, 100, 2),
            (150, 420, 6),
            (300, 301, 1),
        ];
        let end_cycle = 437;
        let mut events = Vec::new();
        for (i, &(a, d, w)) in ctas.iter().enumerate() {
            for (cycle, done) in [(a, false), (d, true)] {
                events.push(CtaEvent {
                    cycle,
                    cta: i as u32,
                    tag: i as u64,
                    done,
                    warps: w,
                });
            }
        }
        let mut want = [0u64; 5];
        for c in 0..end_cycle {
            let resident: u64 = ctas
                .iter()
                .filter(|&&(a, d, _)| a <= c && c < d)
                .map(|&(_, _, w)| w as u64)
                .sum();
            want[(c / every) as usize] += resident;
        }
        let lens = [100.0, 100.0, 100.0, 100.0, 37.0];
        let want: Vec<f64> = want.iter().zip(lens).map(|(&w, l)| w as f64 / l).collect();
        for order in 0..3 {
            let s = Sampler::new(interval, ids, 32);
            let mut evs = events.clone();
            match order {
                0 => {}
                1 => evs.reverse(),
                _ => evs.sort_by_key(|e| (e.warps, e.done)),
            }
            for e in &evs {
                s.cta(sm, e);
            }
            let ts = assemble(&ids, s.take(), end_cycle * 1_000, &[]).unwrap();
            let c = &ts.chiplets[0];
            assert_eq!(c.active_warps, want, "order {order}");
            assert_eq!(c.ctas_launched, vec![3, 1, 0, 1, 0]);
            assert_eq!(c.ctas_retired, vec![1, 1, 1, 1, 1]);
            assert_eq!(ts.end_ps, vec![100_000, 200_000, 300_000, 400_000, 437_000]);
        }
    }

    /// A transmission spanning intervals is split at their boundaries; its bytes count
    /// when the packet was offered; an event past the run's end counts in the last
    /// interval.
    #[test]
    fn link_busy_time_is_split_at_interval_boundaries() {
        let ids = ids_of("a100-4chiplet.yaml");
        let interval = Interval::new(10, 100).unwrap();
        let s = Sampler::new(interval, ids, 32);
        let unit = ids.link(0);
        let pkt = |sent_at, tx_start, tx_end, bytes| LinkPacket {
            sent_at,
            arrive_at: tx_end + 50,
            bytes,
            next_unit: unit,
            link: 1,
            tx_start,
            tx_end,
        };
        s.link_packet(unit, &pkt(900, 950, 2_300, 64));
        s.link_packet(unit, &pkt(2_100, 2_300, 2_400, 16));
        s.link_packet(unit, &pkt(9_000, 9_000, 9_100, 8));
        let entry = |from: &str| LinkEntry {
            from: from.into(),
            to: "x".into(),
            packets: 0,
            bytes: 0,
            wire_bytes: 0,
            busy_ps: 0,
            queued_ps: 0,
            max_queued_ps: 0,
            buffer_bytes: 0,
            credit_waits: 0,
            credit_wait_ps: 0,
            max_credit_wait_ps: 0,
            peak_buffer_bytes: 0,
        };
        let links = vec![(unit, vec![entry("a"), entry("b")])];
        let ts = assemble(&ids, s.take(), 2_500, &links).unwrap();
        assert_eq!(ts.end_ps, vec![1_000, 2_000, 2_500]);
        assert_eq!(ts.links[0].bytes, vec![0, 0, 0]);
        let b = &ts.links[1];
        assert_eq!(b.from, "b");
        assert_eq!(b.bytes, vec![64, 0, 24]);
        assert_eq!(b.busy_ps, vec![50, 1_000, 500]);
        assert_eq!(b.utilization, vec![0.05, 1.0, 1.0]);
    }

    #[test]
    fn an_interval_of_zero_cycles_or_too_many_intervals_is_refused() {
        assert!(Interval::new(0, 1_000)
            .unwrap_err()
            .contains("--sample-every 0"));
        assert!(Interval::new(u64::MAX, 1_000).is_err());
        let i = Interval::new(10, 1_000).unwrap();
        assert_eq!(i.count(0), 1);
        assert_eq!(i.count(10_000), 1);
        assert_eq!(i.count(10_001), 2);
        assert!(i.check_count(MAX_SAMPLES).is_ok());
        let e = i.check_count(MAX_SAMPLES + 1).unwrap_err();
        assert!(
            e.contains("--sample-every 10") && e.contains("1000000"),
            "{e}"
        );
        // An event past the last interval that can be kept stops the run, keeping nothing.
        let ids = ids();
        let s = Sampler::new(i, ids, 32);
        let issue = |cycle| IssueEvent {
            cycle,
            warp: 0,
            cta: 0,
            inst: 0,
            class: tessera_traces::OpClass::Exit,
            lanes: 32,
        };
        s.issue(ids.sm(0), &issue(10 * MAX_SAMPLES - 1));
        assert_eq!(s.overflowed(), None);
        s.issue(ids.sm(0), &issue(10 * MAX_SAMPLES));
        let e = s.overflowed().unwrap();
        assert!(
            e.contains("--sample-every 10") && e.contains("1000000"),
            "{e}"
        );
    }
}
