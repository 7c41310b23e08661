//! The immutable parameters of the memory units, from the config.

use super::coalesce::Geometry;
use super::dram_map::DramMap;
use super::fastdiv::Divisor;
use super::home::{GpuHomes, HomeMap};
use super::unit_ids::UnitIds;
use crate::config::{GpuConfig, WriteAllocate, WritePolicy};
use crate::Picos;

/// The immutable parameters of the memory units, from the config (shared by every unit).
#[derive(Clone, Debug)]
pub struct MemSpec {
    pub(crate) ids: UnitIds,
    pub(crate) l1_geom: Geometry,
    pub(crate) l2_geom: Geometry,
    pub(crate) l1_sets: u64,
    pub(crate) l1_assoc: u32,
    pub(crate) l1_mshrs: u32,
    pub(crate) l1_enabled: bool,
    pub(crate) l1_write_policy: WritePolicy,
    pub(crate) l1_write_allocate: WriteAllocate,
    pub(crate) l2_sets: u64,
    pub(crate) l2_assoc: u32,
    pub(crate) l2_mshrs: u32,
    pub(crate) l2_write_back: bool,
    pub(crate) fills_l2: bool,
    pub(crate) l2_size_bytes: u64,
    pub(crate) core_clock_hz: u64,
    pub(crate) noc_clock_hz: u64,
    pub(crate) l2_clock_hz: u64,
    pub(crate) noc_bytes_per_cycle: u64,
    pub(crate) l2_bytes_per_cycle: u64,
    pub(crate) core_ps: Picos,
    pub(crate) l1_hit_ps: Picos,
    pub(crate) shared_latency_cycles: u64,
    pub(crate) shared_banks: u32,
    pub(crate) shared_bank_bytes: u32,
    pub(crate) noc_latency_ps: Picos,
    pub(crate) l2_hit_ps: Picos,
    pub(crate) l2_atomic_ps: Picos,
    pub(crate) slices_per_channel: Divisor,
    /// `l2.line_bytes` as a divisor.
    pub(crate) l2_line: Divisor,
    pub(crate) dram_map: DramMap,
    pub(crate) home: HomeMap,
    /// The GPU of each page (`system.gpus` > 1; empty otherwise: every page on GPU 0).
    pub(crate) gpu_homes: GpuHomes,
    /// `package.l2: private`.
    pub(crate) private: bool,
    pub(crate) cache_remote_reads: bool,
    /// L2 slices per chiplet (`l2.slices`), the private-mode slice interleave.
    pub(crate) l2_slices: Divisor,
    pub(crate) llc_sets: u64,
    pub(crate) llc_assoc: u32,
    pub(crate) llc_mshrs: u32,
    pub(crate) llc_hit_ps: Picos,
    pub(crate) llc_size_bytes: u64,
    /// [`MemSpec::l2_home`]'s divisions as shifts and masks, when the interleave, the line
    /// and the slices per channel are powers of two, with the channel count's quotient and
    /// remainder from one division (`None` otherwise): it runs for every request, twice (the
    /// SM routes it, the channel checks it), and for every line a copy fills.
    l2_home_shifts: Option<HomeShifts>,
}

/// The DRAM map, `l2.line_bytes` and slices per channel as shifts and masks, and the
/// channel count (a power of two or not: Titan V has 24 channels).
#[derive(Clone, Copy, Debug)]
struct HomeShifts {
    interleave: u32,
    interleave_mask: u64,
    channels: Divisor,
    line: u32,
    slices: u32,
    slices_mask: u64,
}

impl HomeShifts {
    fn new(map: &DramMap, line: &Divisor, slices: &Divisor) -> Option<HomeShifts> {
        Some(HomeShifts {
            interleave: map.interleave.shift?,
            interleave_mask: map.interleave.d - 1,
            channels: map.channels,
            line: line.shift?,
            slices: slices.shift?,
            slices_mask: slices.d - 1,
        })
    }
}

impl MemSpec {
    /// The spec of `cfg` for a run of `trace`'s command list (the first-touch homes come
    /// from its kernels' annotations).
    pub fn for_trace(cfg: &GpuConfig, trace: &tessera_traces::TraceFile) -> MemSpec {
        let mut s = MemSpec::new(cfg);
        s.home.first_touch(cfg, trace.commands(), trace.kernels());
        if s.ids.gpus() > 1 {
            s.gpu_homes = GpuHomes::new(cfg.package.home_page_bytes, trace.commands());
        }
        s
    }

    /// [`MemSpec::new`] for a command list: with `system.gpus` > 1 its `Alloc` commands
    /// place pages on GPUs (`GpuHomes`); no first-touch homes (for drivers of the memory
    /// units alone, such as the tests' `MemSystem`).
    pub fn with_commands(cfg: &GpuConfig, commands: &[tessera_traces::Command]) -> MemSpec {
        let mut s = MemSpec::new(cfg);
        if s.ids.gpus() > 1 {
            s.gpu_homes = GpuHomes::new(cfg.package.home_page_bytes, commands);
        }
        s
    }

    pub fn new(cfg: &GpuConfig) -> MemSpec {
        let l1_geom = Geometry::new(cfg.l1d.line_bytes, cfg.l1d.sector_bytes);
        let l2_geom = Geometry::new(cfg.l2.line_bytes, cfg.l2.sector_bytes);
        let core_ps = cfg.core_period_ps();
        let l1_sets =
            cfg.l1d.size_bytes as u64 / ((cfg.l1d.assoc as u64).max(1) * l1_geom.line_bytes).max(1);
        let slices_n = cfg.l2.slices.max(1) as u64;
        let channels = cfg.dram.channels.max(1) as u64;
        let l2_sets = cfg.l2.size_bytes
            / slices_n
            / ((cfg.l2.assoc as u64).max(1) * l2_geom.line_bytes).max(1);
        let slices_per_channel = Divisor::new(slices_n / channels);
        let l2_line = Divisor::new(l2_geom.line_bytes);
        let dram_map = DramMap::new(cfg);
        MemSpec {
            ids: UnitIds::new(cfg),
            l1_geom,
            l2_geom,
            l1_sets,
            l1_assoc: cfg.l1d.assoc,
            l1_mshrs: cfg.l1d.mshrs.max(1),
            l1_enabled: cfg.l1d.enabled,
            l1_write_policy: cfg.l1d.write_policy,
            l1_write_allocate: cfg.l1d.write_allocate,
            l2_sets,
            l2_assoc: cfg.l2.assoc,
            l2_mshrs: cfg.l2.mshrs_per_slice,
            l2_write_back: cfg.l2.write_back,
            fills_l2: cfg.memcpy.fills_l2,
            l2_size_bytes: cfg.l2.size_bytes,
            core_clock_hz: cfg.core.clock_hz,
            noc_clock_hz: cfg.noc.clock_hz,
            l2_clock_hz: cfg.l2.clock_hz,
            noc_bytes_per_cycle: cfg.noc.bandwidth_bytes_per_cycle as u64,
            l2_bytes_per_cycle: cfg.l2.bandwidth_bytes_per_cycle as u64,
            core_ps,
            l1_hit_ps: cfg.l1d.hit_latency_cycles as Picos * core_ps,
            shared_latency_cycles: cfg.shared_mem.latency_cycles as u64,
            shared_banks: cfg.shared_mem.banks,
            shared_bank_bytes: cfg.shared_mem.bank_bytes,
            noc_latency_ps: cfg.noc.latency_cycles as Picos * cfg.noc_period_ps(),
            l2_hit_ps: cfg.l2.hit_latency_cycles as Picos * cfg.l2_period_ps(),
            l2_atomic_ps: cfg.l2.atomic_latency_cycles as Picos * cfg.l2_period_ps(),
            l2_home_shifts: HomeShifts::new(&dram_map, &l2_line, &slices_per_channel),
            slices_per_channel,
            l2_line,
            dram_map,
            home: HomeMap::new(cfg),
            gpu_homes: GpuHomes::default(),
            private: cfg.package.l2 == crate::config::L2Organization::Private,
            cache_remote_reads: cfg.package.cache_remote_reads,
            l2_slices: Divisor::new(slices_n),
            llc_sets: cfg.llc.size_bytes
                / channels
                / ((cfg.llc.assoc as u64).max(1) * l2_geom.line_bytes).max(1),
            llc_assoc: cfg.llc.assoc,
            llc_mshrs: cfg.llc.mshrs_per_slice,
            llc_hit_ps: cfg.llc.hit_latency_cycles as Picos * cfg.l2_period_ps(),
            llc_size_bytes: cfg.llc.size_bytes,
        }
    }

    /// With a private L2: the L2 slice of chiplet `chiplet` that caches `line_addr`:
    /// `(channel, slice inside the channel, set inside the slice)`, the channel numbered
    /// across the package. Lines interleave over the chiplet's `l2.slices` slices by line
    /// index (slice `i % slices`, set `i / slices`), whatever their home.
    #[inline]
    pub(crate) fn private_slot(&self, chiplet: u32, line_addr: u64) -> (u32, usize, u64) {
        let i = self.l2_line.div(line_addr);
        let s = self.l2_slices.rem(i);
        let spc = &self.slices_per_channel;
        (
            chiplet * self.ids.channels + spc.div(s) as u32,
            spc.rem(s) as usize,
            self.l2_slices.div(i),
        )
    }

    /// With a private L2: the LLC slice homing `line_addr`, `(channel, set)`: the line's
    /// home channel (as [`MemSpec::l2_home`]; one LLC slice per channel) and its line index
    /// inside that channel as the set.
    #[inline]
    pub(crate) fn llc_home(&self, line_addr: u64) -> (u32, u64) {
        let (chiplet, addr) = self.locate(line_addr);
        let (channel, local) = self.dram_map.map(addr);
        (
            chiplet * self.ids.channels + channel,
            self.l2_line.div(local),
        )
    }

    /// The one-way NoC latency: the least time between sending and receiving a packet
    /// between an SM and a channel (the lookahead of a cut between them).
    pub fn noc_latency_ps(&self) -> Picos {
        self.noc_latency_ps
    }

    /// The home of an L2 line: `(channel, slice inside the channel, set inside the slice)`,
    /// the channel numbered across the package (the home chiplet's channels, then the
    /// memory-side hash of the module documentation on the chiplet-local address).
    /// Forced inline, with [`MemSpec::locate`] under it: it runs at the SM, the channel's
    /// prefetch and each copied line, and the call cost more than its one-chiplet shifts.
    #[inline(always)]
    pub(crate) fn l2_home(&self, line_addr: u64) -> (u32, usize, u64) {
        let (chiplet, addr) = self.locate(line_addr);
        if let Some(p) = &self.l2_home_shifts {
            // The same map: `(chunk / channels) * interleave` has no bits below the
            // interleave's, so `+ addr % interleave` is an or.
            let (q, channel) = p.channels.div_rem(addr >> p.interleave);
            let local = (q << p.interleave) | (addr & p.interleave_mask);
            let line_in_channel = local >> p.line;
            return (
                chiplet * self.ids.channels + channel as u32,
                (line_in_channel & p.slices_mask) as usize,
                line_in_channel >> p.slices,
            );
        }
        let (channel, local) = self.dram_map.map(addr);
        let line_in_channel = self.l2_line.div(local);
        let spc = &self.slices_per_channel;
        (
            chiplet * self.ids.channels + channel,
            spc.rem(line_in_channel) as usize,
            spc.div(line_in_channel),
        )
    }

    /// The address of `addr` inside its home chiplet's memory (what that chiplet's DRAM
    /// map sees).
    #[inline]
    pub(crate) fn chiplet_local(&self, addr: u64) -> u64 {
        self.home.locate(addr).1
    }

    /// `(home chiplet, chiplet-local address)` of `addr`, the chiplet numbered across the
    /// system: the page's GPU ([`GpuHomes`]), then the chiplet inside it by
    /// `package.home`.
    #[inline(always)]
    pub(crate) fn locate(&self, addr: u64) -> (u32, u64) {
        let (c, local) = self.home.locate(addr);
        (self.gpu_homes.gpu(addr) * self.ids.gpu_chiplets + c, local)
    }
}

#[cfg(test)]
mod tests {
    use super::MemSpec;

    /// The shift-and-mask home (power-of-two interleave, line and slices per channel; any
    /// channel count) is the divisions' home, for every channel and slice count and
    /// interleave tried.
    #[test]
    fn l2_home_by_shifts_matches_the_divisions() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/rtx3070.yaml");
        let base = crate::config::GpuConfig::load(p, &[]).expect("rtx3070.yaml loads");
        for (channels, slices, interleave) in [
            (16, 32, 256),
            (8, 8, 512),
            (32, 128, 128),
            (4, 16, 4096),
            // Channel counts that are not powers of two (Titan V: 24; A100: 40).
            (24, 48, 256),
            (40, 80, 256),
            (12, 48, 1024),
            (5, 5, 128),
        ] {
            let mut cfg = base.clone();
            cfg.dram.channels = channels;
            cfg.l2.slices = slices;
            cfg.dram.interleave_bytes = interleave;
            let fast = MemSpec::new(&cfg);
            assert!(
                fast.l2_home_shifts.is_some(),
                "{channels} {slices} {interleave}"
            );
            let mut slow = fast.clone();
            slow.l2_home_shifts = None;
            let mut x = 5u64;
            for _ in 0..20_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let line = (x >> (x % 40)) & !127;
                assert_eq!(fast.l2_home(line), slow.l2_home(line), "{line:#x}");
            }
            let top = !127u64;
            assert_eq!(fast.l2_home(top), slow.l2_home(top));
        }
    }
}
