//! Homes: which chiplet and which GPU an address belongs to (`package.home`, the GPUs'
//! allocations).

use std::sync::Arc;

use super::fastdiv::Divisor;
use crate::config::config_enum;
use crate::config::{GpuConfig, GridSplit};

config_enum! {
    /// Which chiplet is the home of an address (its DRAM, and its memory-side L2 slice).
    pub enum HomePolicy {
        /// Pages of `package.home_page_bytes` go to chiplets in turn: page `p` is homed at
        /// chiplet `p mod chiplets` (addresses inside a chiplet are compacted, page `p`
        /// being that chiplet's page `p / chiplets`).
        PageInterleave = "page_interleave",
        /// Page `p` is homed at chiplet `hash(p) mod chiplets` (XOR-fold of the page number),
        /// which spreads strided footprints that page interleaving maps to one chiplet.
        Hash = "hash",
        /// First touch, as the trace's array annotations predict it (the policy of the
        /// CPCoh study, dalmia-2023 section 5.4.3.1): kernel by kernel in command order, a
        /// page is homed at the chiplet whose CTAs' annotated footprint covers it first
        /// (the lowest such chiplet within one kernel, since its chiplets start together).
        /// Pages no annotation covers (and every page of a trace without annotations, such
        /// as an Accel-Sim import) are page-interleaved. Decided before the run from the
        /// annotations, not by the simulated order of accesses.
        FirstTouch = "first_touch",
    }
}

/// Which chiplet is the home of an address, and the address inside that chiplet's memory
/// (`package.home`, `package.home_page_bytes`).
#[derive(Clone, Debug)]
pub(crate) struct HomeMap {
    chiplets: Divisor,
    page: Divisor,
    policy: HomePolicy,
    /// First touch: disjoint, sorted page intervals `[first, end)` and their chiplet.
    touched: Arc<Vec<(u64, u64, u32)>>,
}

impl HomeMap {
    pub(crate) fn new(cfg: &GpuConfig) -> HomeMap {
        HomeMap {
            chiplets: Divisor::new(cfg.chiplets as u64),
            page: Divisor::new(cfg.package.home_page_bytes),
            policy: cfg.package.home,
            touched: Arc::new(Vec::new()),
        }
    }

    /// With `first_touch`, homes the pages the kernels of `commands` touch, from their
    /// array annotations (the policy's documentation in the config reference).
    pub(crate) fn first_touch(
        &mut self,
        cfg: &GpuConfig,
        commands: &[tessera_traces::Command],
        kernels: &[tessera_traces::KernelMeta],
    ) {
        if self.policy != HomePolicy::FirstTouch || self.chiplets.d == 1 {
            return;
        }
        let n = self.chiplets.d as u32;
        // Disjoint intervals by first page.
        let mut homes: std::collections::BTreeMap<u64, (u64, u32)> = Default::default();
        for c in commands {
            let tessera_traces::Command::KernelLaunch { kernel, .. } = *c else {
                continue;
            };
            let Some(meta) = kernels.get(kernel as usize) else {
                continue;
            };
            let total = meta.counts.ctas;
            // The local CP's share of the split (gpu/local_cp.rs): chiplet k runs CTAs [k N / n, (k+1) N / n).
            let chiplet_of = |cta: u32| match cfg.package.grid_split {
                GridSplit::Contiguous => (0..n)
                    .rev()
                    .find(|&k| k as u64 * total / n as u64 <= cta as u64)
                    .unwrap_or(0),
                GridSplit::RoundRobin => cta % n,
            };
            // This kernel's claims: (chiplet, first page, end page), lowest chiplet first.
            let mut claims = Vec::new();
            for a in &meta.annotations {
                if a.ranges.is_empty() {
                    claims.push((0, a.base, a.base.saturating_add(a.bytes)));
                }
                for r in &a.ranges {
                    claims.push((chiplet_of(r.first_cta).min(n - 1), r.lo, r.hi));
                }
            }
            claims.sort_unstable();
            for (chiplet, lo, hi) in claims {
                if hi <= lo {
                    continue;
                }
                let (first, end) = (self.page.div(lo), self.page.div(hi - 1) + 1);
                claim(&mut homes, first, end, chiplet);
            }
        }
        self.touched = Arc::new(homes.into_iter().map(|(f, (e, c))| (f, e, c)).collect());
    }

    pub(crate) fn page_bytes(&self) -> u64 {
        self.page.d
    }

    /// `(home chiplet, chiplet-local address)` of `addr`.
    #[inline(always)]
    pub(crate) fn locate(&self, addr: u64) -> (u32, u64) {
        // One chiplet, the common case, without a call (this runs for every request).
        if self.chiplets.d == 1 {
            return (0, addr);
        }
        self.locate_paged(addr)
    }

    /// [`HomeMap::locate`] with more than one chiplet.
    fn locate_paged(&self, addr: u64) -> (u32, u64) {
        let page = self.page.div(addr);
        match self.policy {
            HomePolicy::PageInterleave => (
                self.chiplets.rem(page) as u32,
                self.chiplets.div(page) * self.page.d + self.page.rem(addr),
            ),
            HomePolicy::Hash => {
                // XOR-fold: every bit of the page number moves the home.
                let h = page ^ (page >> 7) ^ (page >> 15) ^ (page >> 23) ^ (page >> 31);
                (self.chiplets.rem(h) as u32, addr)
            }
            HomePolicy::FirstTouch => {
                let t = &self.touched;
                let i = t.partition_point(|e| e.1 <= page);
                match t.get(i) {
                    Some(&(first, _, chiplet)) if first <= page => (chiplet, addr),
                    _ => (self.chiplets.rem(page) as u32, addr),
                }
            }
        }
    }
}

/// Homes the pages of `[first, end)` not homed yet at `chiplet`.
fn claim(
    homes: &mut std::collections::BTreeMap<u64, (u64, u32)>,
    first: u64,
    end: u64,
    chiplet: u32,
) {
    let mut at = first;
    // An interval starting before `first` may cover its start.
    if let Some((_, &(e, _))) = homes.range(..=first).next_back() {
        at = at.max(e);
    }
    while at < end {
        match homes.range(at..end).next().map(|(&f, &(e, _))| (f, e)) {
            Some((f, e)) => {
                if f > at {
                    homes.insert(at, (f, chiplet));
                }
                at = e;
            }
            None => {
                homes.insert(at, (end, chiplet));
                at = end;
            }
        }
    }
}

/// Which GPU is the home of each page (`system.gpus` > 1): the device of the first `Alloc`
/// command (in command order) that overlaps the page, as under CUDA's unified virtual
/// addressing a device's allocations live in its own memory and its peers reach them over
/// the GPU links. Pages no `Alloc` covers are homed on GPU 0.
#[derive(Clone, Debug, Default)]
pub(crate) struct GpuHomes {
    page: Divisor,
    /// Disjoint, sorted page intervals `[first, end)` and their GPU.
    pages: Arc<Vec<(u64, u64, u32)>>,
    /// The same as a flat table of GPUs from page `.0` on, when the allocations span at
    /// most [`FLAT_HOME_PAGES`] pages (recorded traces, whose allocations are packed): one
    /// load per lookup instead of a binary search (this runs for every request).
    flat: Option<(u64, Arc<Vec<u8>>)>,
}

/// The largest span of pages [`GpuHomes`] keeps as a flat table (16 MiB of table).
const FLAT_HOME_PAGES: u64 = 1 << 24;

impl GpuHomes {
    /// The homes of `commands`' allocations, by pages of `page_bytes`.
    pub(crate) fn new(page_bytes: u64, commands: &[tessera_traces::Command]) -> GpuHomes {
        let page = Divisor::new(page_bytes);
        let mut homes: std::collections::BTreeMap<u64, (u64, u32)> = Default::default();
        for c in commands {
            if let tessera_traces::Command::Alloc {
                device,
                addr,
                bytes,
            } = *c
            {
                if bytes > 0 {
                    let end = page.div(addr.saturating_add(bytes - 1)) + 1;
                    claim(&mut homes, page.div(addr), end, device);
                }
            }
        }
        let pages: Vec<(u64, u64, u32)> = homes.into_iter().map(|(f, (e, g))| (f, e, g)).collect();
        let flat = match (pages.first(), pages.last()) {
            (Some(&(lo, _, _)), Some(&(_, hi, _))) if hi - lo <= FLAT_HOME_PAGES => {
                // `system.gpus` is at most 64, so a GPU fits a byte.
                let mut t = vec![0u8; (hi - lo) as usize];
                for &(f, e, g) in &pages {
                    t[(f - lo) as usize..(e - lo) as usize].fill(g as u8);
                }
                Some((lo, Arc::new(t)))
            }
            _ => None,
        };
        GpuHomes {
            page,
            pages: Arc::new(pages),
            flat,
        }
    }

    /// The GPU (trace device) homing `addr`.
    #[inline(always)]
    pub(crate) fn gpu(&self, addr: u64) -> u32 {
        // One GPU, the common case, without a call (this runs for every request).
        if self.pages.is_empty() {
            return 0;
        }
        self.gpu_paged(addr)
    }

    /// [`GpuHomes::gpu`] with pages homed on several GPUs.
    fn gpu_paged(&self, addr: u64) -> u32 {
        let page = self.page.div(addr);
        if let Some((lo, t)) = &self.flat {
            return page
                .checked_sub(*lo)
                .and_then(|i| t.get(i as usize))
                .map_or(0, |&g| u32::from(g));
        }
        let t = &self.pages;
        let i = t.partition_point(|e| e.1 <= page);
        match t.get(i) {
            Some(&(first, _, g)) if first <= page => g,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{claim, GpuHomes, FLAT_HOME_PAGES};
    use std::collections::BTreeMap;
    use tessera_traces::Command;

    /// Packed allocations get a flat table, sparse ones the binary search; both give the
    /// device of the first allocation covering a page, and GPU 0 outside every one.
    #[test]
    fn gpu_of_a_page_from_the_flat_table_and_the_search_agree() {
        let page = 4096u64;
        let alloc = |device, addr, bytes| Command::Alloc {
            device,
            addr,
            bytes,
        };
        for base2 in [5 * page, (FLAT_HOME_PAGES + 10) * page] {
            let cmds = [
                alloc(2, page, 2 * page),     // pages 1, 2
                alloc(5, 2 * page, 2 * page), // page 3 only (2 is taken)
                alloc(7, base2, page + 1),    // two pages at base2
            ];
            let h = GpuHomes::new(page, &cmds);
            assert_eq!(h.flat.is_some(), base2 == 5 * page);
            let want = |addr: u64| -> u32 {
                let p = addr / page;
                if p == 1 || p == 2 {
                    2
                } else if p == 3 {
                    5
                } else if p == base2 / page || p == base2 / page + 1 {
                    7
                } else {
                    0
                }
            };
            for addr in [
                0,
                page,
                2 * page + 5,
                3 * page,
                4 * page,
                base2,
                base2 + page,
                base2 + 2 * page,
                u64::MAX,
            ] {
                assert_eq!(
                    h.gpu(addr),
                    want(addr),
                    "address {addr:#x}, second base {base2:#x}"
                );
            }
        }
    }

    #[test]
    fn first_claim_of_a_page_wins() {
        let mut h = BTreeMap::new();
        claim(&mut h, 10, 20, 1);
        claim(&mut h, 0, 30, 2); // only the gaps [0, 10) and [20, 30)
        claim(&mut h, 15, 25, 0); // nothing left
        claim(&mut h, 5, 12, 3); // nothing left
        let v: Vec<_> = h.into_iter().collect();
        assert_eq!(v, vec![(0, (10, 2)), (10, (20, 1)), (20, (30, 2))]);
    }
}
