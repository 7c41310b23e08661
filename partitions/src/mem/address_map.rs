//! The address map every memory unit shares: which unit is which ([`UnitIds`]), which
//! chiplet and GPU home an address, and which channel, L2 slice, LLC slice and set a line
//! goes to (the memory-side hash of the module documentation of [`crate::mem`]). The
//! units' own parameters are beside them (`L1dParams`, `L2SliceParams`, ...).

use super::dram_map::DramMap;
use super::fastdiv::Divisor;
use super::home::{GpuHomes, HomeMap};
use super::unit_ids::UnitIds;
use crate::config::{GpuConfig, L2Organization};

/// Where lines live and how units are numbered, from the config (shared, immutable).
#[derive(Clone, Debug)]
pub struct AddressMap {
    pub(crate) ids: UnitIds,
    /// `package.l2: private`: an SM's reads and writes go to its own chiplet's L2 slice
    /// ([`AddressMap::private_slot`]), only atomics to the line's home.
    pub(crate) private: bool,
    pub(crate) slices_per_channel: Divisor,
    /// `l2.line_bytes` as a divisor.
    pub(crate) l2_line: Divisor,
    pub(crate) dram_map: DramMap,
    pub(crate) home: HomeMap,
    /// The GPU of each page (`system.gpus` > 1; empty otherwise: every page on GPU 0).
    pub(crate) gpu_homes: GpuHomes,
    /// L2 slices per chiplet (`l2.slices`), the private-mode slice interleave.
    pub(crate) l2_slices: Divisor,
    /// [`AddressMap::l2_home`]'s divisions as shifts and masks, when the interleave, the
    /// line and the slices per channel are powers of two, with the channel count's quotient
    /// and remainder from one division (`None` otherwise): it runs for every request, twice
    /// (the SM routes it, the channel checks it), and for every line a copy fills.
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

impl AddressMap {
    /// The map of `cfg` for a run of `trace`'s command list (the first-touch homes come
    /// from its kernels' annotations).
    pub fn for_trace(cfg: &GpuConfig, trace: &tessera_traces::TraceFile) -> AddressMap {
        let mut m = AddressMap::from_config(cfg);
        m.home.first_touch(cfg, trace.commands(), trace.kernels());
        if m.ids.gpus() > 1 {
            m.gpu_homes = GpuHomes::new(cfg.package.home_page_bytes, trace.commands());
        }
        m
    }

    /// [`AddressMap::from_config`] for a command list: with `system.gpus` > 1 its `Alloc`
    /// commands place pages on GPUs (`GpuHomes`); no first-touch homes (for drivers of the
    /// memory units alone, such as the tests' `MemSystem`).
    pub fn with_commands(cfg: &GpuConfig, commands: &[tessera_traces::Command]) -> AddressMap {
        let mut m = AddressMap::from_config(cfg);
        if m.ids.gpus() > 1 {
            m.gpu_homes = GpuHomes::new(cfg.package.home_page_bytes, commands);
        }
        m
    }

    /// The map of `cfg` with every page homed by `package.home` alone (no first touch, one
    /// GPU's pages).
    pub fn from_config(cfg: &GpuConfig) -> AddressMap {
        let slices_n = cfg.l2.slices.max(1) as u64;
        let channels = cfg.dram.channels.max(1) as u64;
        let slices_per_channel = Divisor::new(slices_n / channels);
        // As `Geometry::new` rounds it, so that the map and the slices agree on lines.
        let l2_line = Divisor::new((cfg.l2.line_bytes as u64).max(1).next_power_of_two());
        let dram_map = DramMap::from_config(cfg);
        AddressMap {
            ids: UnitIds::new(cfg),
            private: cfg.package.l2 == L2Organization::Private,
            l2_home_shifts: HomeShifts::new(&dram_map, &l2_line, &slices_per_channel),
            slices_per_channel,
            l2_line,
            dram_map,
            home: HomeMap::new(cfg),
            gpu_homes: GpuHomes::default(),
            l2_slices: Divisor::new(slices_n),
        }
    }

    /// The unit numbering.
    pub fn ids(&self) -> &UnitIds {
        &self.ids
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
    /// home channel (as [`AddressMap::l2_home`]; one LLC slice per channel) and its line index
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

    /// The slice of channel unit `unit` (on chiplet `chiplet`) whose NoC port a packet
    /// about `line` enters or leaves by: with a memory-side L2 the line's home slice; with
    /// a private L2 the chiplet's slice for it when that is in `unit`, else `None` (the
    /// unit's LLC slice). The crossbar's ports and the slices' reply queues both follow it.
    pub(crate) fn noc_slice(&self, chiplet: u32, unit: u32, line: u64) -> Option<usize> {
        if self.private {
            let (ch, slice, _) = self.private_slot(chiplet, line);
            (self.ids.channel(ch) == unit).then_some(slice)
        } else {
            Some(self.l2_home(line).1)
        }
    }

    /// The home of an L2 line: `(channel, slice inside the channel, set inside the slice)`,
    /// the channel numbered across the package (the home chiplet's channels, then the
    /// memory-side hash of the module documentation on the chiplet-local address).
    /// Forced inline, with [`AddressMap::locate`] under it: it runs at the SM, the channel's
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
    use super::AddressMap;

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
            let fast = AddressMap::from_config(&cfg);
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
