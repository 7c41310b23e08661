//! The memory hierarchy of one GPU (DESIGN.md section 5, "Memory hierarchy"), as units that
//! share no state and talk only through timed packets (the port contract):
//!
//! - [`LdStUnit`] (one per SM): the LD/ST unit's coalescer, the SM's L1D with its MSHRs,
//!   the shared-memory banks, and the SM's NoC ports.
//! - [`MemChannel`] (one per DRAM channel): the memory-side L2 slices homed at the channel
//!   and the channel itself; with `package.l2: private`, some of the chiplet's private L2
//!   slices, the LLC slice homed at the channel, and the channel.
//!
//! A unit is driven by its owner (the GPU partition, or the [`MemSystem`] test harness) in
//! time order: [`LdStUnit::issue`] when a warp issues a memory instruction,
//! [`LdStUnit::on_reply`] and [`MemChannel::on_packet`] when a packet arrives (packets to one
//! unit in `(arrive_at, source unit, source sequence)` order). Units send packets through a
//! [`Net`]; every packet crosses the NoC, so it arrives at least `noc.latency_cycles` after
//! it is sent, and where the units are simulated (one partition or several) never changes
//! what they compute.
//!
//! # The model (every number comes from the config)
//!
//! Time is integer picoseconds; each `_cycles` key is converted with its own clock's period
//! (DESIGN.md section 3). Bandwidth-limited resources are `port::BwPort` calendars with
//! exact fractional carry, so no port ever moves more than its configured bytes per cycle
//! over any window. Inside a unit, each resource gives a request the earliest free slot at
//! or after the time it gets there.
//!
//! - **Coalescing** ([`coalesce`]): the active lanes' byte ranges become one request per
//!   `l1d.line_bytes` line with a mask of its `l1d.sector_bytes` sectors (sm_70+
//!   GPGPU-Sim/Accel-Sim). The L1 handles one line per core cycle (its tag/data port).
//! - **L1D** (one per SM, `Global`, `Local` and `Const` accesses): sectored, `l1d.assoc`
//!   ways, LRU, set = line index mod sets. A load's sectors that are valid and ready hit:
//!   data at `t + l1d.hit_latency_cycles`. Missing sectors of a line take one of
//!   `l1d.mshrs` MSHRs and are requested from L2; a later load of sectors already
//!   requested merges with the MSHR (counted in `l1d_pending_hits` and as misses), one of
//!   new sectors of the same line adds a request to it. When every MSHR is busy, misses
//!   wait in order (`l1d_mshr_waits`) and leave when a fill frees one. The data is usable
//!   `l1d.hit_latency_cycles` after its reply has crossed the SM's NoC ingress (the fill
//!   and return pipeline); a warp instruction's result is written when its last line is.
//!   `l1d.mshr_max_merge` and `l1d.banks` are not modelled. `Const` is treated as a
//!   global load (no constant cache model yet); `Local` always goes through L1,
//!   `Global`/`Const` only with `l1d.enabled`. Stores follow `l1d.write_policy`:
//!   `write_through` updates present sectors and sends the data to L2; `write_evict` drops
//!   present sectors and sends it on; `write_back` (and `local_write_back` for `Local`)
//!   dirties the L1 line and writes it to L2 only on eviction or when the SM starts a CTA
//!   of another kernel. A store miss follows `l1d.write_allocate`: `no_allocate` leaves L1
//!   alone; `lazy_fetch_on_read` allocates the sectors the store covers entirely;
//!   `fetch_on_write` allocates every written sector (the fetch itself is not timed). A
//!   store is done, for the warp, when its last packet has left the SM, and never before
//!   `now + l1d.hit_latency_cycles`; L2 write acknowledgements are not modelled. Atomics
//!   bypass L1 (dropping the L1 copy of their sectors), hold an MSHR, and are performed at
//!   the L2 slice.
//! - **Shared memory**: `shared_mem.latency_cycles` plus one core cycle per extra pass; the
//!   passes are the largest number of distinct `bank_bytes` words any of the `banks` banks
//!   must deliver ([`coalesce::shared_passes`]; same word = broadcast). The shared-memory
//!   port moves `banks * bank_bytes` per core cycle. No L1/L2 traffic.
//! - **NoC**: every SM and every L2 slice has an egress and an ingress port of
//!   `noc.bandwidth_bytes_per_cycle` at the NoC clock; a packet arrives `noc.latency_cycles`
//!   after it starts to leave (cut-through: serialization delays the packets behind it, not
//!   itself), and the receiver's ingress port serializes arrivals in packet order (the
//!   arbiter at the receiver). Packets carry an 8-byte header (GPGPU-Sim's control size)
//!   plus the data sectors: read request 8 B, read reply 8 B + data, write 8 B + data,
//!   atomic 8 B + data each way. Buffers are unbounded: the MSHRs bound what is in flight,
//!   so no credits are modelled on the NoC.
//! - **L2** (memory-side, `l2.slices` slices, `l2.slices / dram.channels` per channel): the
//!   slice of an address is `channel * per_channel + (local / l2.line_bytes) %
//!   per_channel`, where `channel` and the channel-local address `local` are the DRAM map
//!   below; inside the slice, set = `(local / l2.line_bytes / per_channel) % sets`. Each
//!   slice: `l2.size_bytes / l2.slices`, `l2.assoc` ways, LRU, sectored. A hit's reply
//!   leaves `l2.hit_latency_cycles` after the request arrives; missing sectors take one of
//!   `l2.mshrs_per_slice` MSHRs (a miss finding them all busy waits until the earliest
//!   frees: the slice knows when, since its DRAM channel is part of the same unit), are read
//!   from DRAM together (one burst of the missing sectors), fill the line and leave
//!   `l2.hit_latency_cycles` after the data is there. Replies cross the slice's data port
//!   (`l2.bandwidth_bytes_per_cycle` per L2 cycle). With `l2.write_back`, stores allocate
//!   their sectors dirty without a fetch and dirty sectors go to DRAM when their line is
//!   evicted; without it stores are written through. Atomics: read like a load, then the
//!   slice's ALU (one lane operation per L2 cycle) answers `l2.atomic_latency_cycles` after
//!   it starts; the line is dirtied.
//! - **Private L2 + LLC** (`package.l2: private`, the AMD-style hierarchy of the CPCoh study,
//!   dalmia-2023 section 5.4.1 and Fig. 5.1): a channel unit holds `l2.slices /
//!   dram.channels` of its chiplet's L2 slices, the LLC slice homed at its channel and the
//!   channel. An SM sends loads and stores to the L2 slice of *its own* chiplet that caches
//!   the line (line index `i`: slice `i % l2.slices`, set `i / l2.slices`,
//!   `MemSpec::private_slot`), whatever the line's home; atomics go to the home LLC slice
//!   (through the link interface when remote) and are performed there as at a memory-side
//!   slice. At the L2 slice a load's valid sectors hit as above; its missing sectors join
//!   the line's MSHR when one is in flight (`l2_pending_hits`, asking the LLC only for
//!   sectors not yet requested), else take one of `l2.mshrs_per_slice` (a miss finding none
//!   waits in order, `l2_mshr_waits`, and starts when a fill frees one) and leave at once
//!   as an `LlcRead` to the line's home LLC slice (over the NoC, plus the links when
//!   remote). The LLC slice (`llc.size_bytes / dram.channels`, `llc.assoc` ways, LRU,
//!   sectored, write-back) answers `llc.hit_latency_cycles` after the request is in, or
//!   reads its DRAM channel on a miss as a memory-side slice does (`llc.mshrs_per_slice`);
//!   the reply crosses its data port and NoC egress. The L2 fills the line when the reply
//!   is in (a line homed on another chiplet only with `package.cache_remote_reads`; a dirty
//!   victim is written back to its home LLC) and answers each waiting SM that has all its
//!   sectors `l2.hit_latency_cycles` later. An unloaded L2 miss that hits the LLC of its
//!   own chiplet thus costs an L2 hit plus 2 NoC traversals plus `llc.hit_latency_cycles`.
//!   Stores to lines homed on the chiplet are written into L2 (write-back, allocate without
//!   fetch, with `l2.write_back`); stores to remote lines are written through to the home
//!   LLC (updating an L2 copy, never allocating one), so only local lines are ever dirty.
//!   At every kernel boundary (`gpu/cp.rs`) each L2 slice sends its dirty sectors to their
//!   home LLC through its NoC egress (`l2_flush_writeback_sectors`) and invalidates every
//!   line (`l2_flush_invalidated_lines`), keeping the tags marked: a later read miss on a
//!   sector a flush invalidated while its line still holds its way is a lost inter-kernel
//!   hit (`l2_flush_lost_hits`). L1s are handled as with a memory-side L2 (an SM's dirty L1
//!   sectors reach the L2 after the flush, when the SM starts the next kernel's CTA). Not
//!   modelled: coherence of an L2 copy with a store of another chiplet inside a kernel (the
//!   model is timing-only), write acknowledgements from the LLC, L2 copies of lines an
//!   atomic changes at the home.
//! - **Several GPUs** (`system.gpus` > 1): a page's GPU is the device of the first `Alloc`
//!   command covering it (`GpuHomes`; pages no `Alloc` covers: GPU 0), its chiplet inside
//!   that GPU `package.home`'s; channels are numbered across the system, so the home
//!   channel of a line names its GPU. An SM's request for another GPU's line (a peer
//!   access, `peer_requests`) goes through its chiplet's link interface and the GPU switch
//!   (`link.rs`) to the home L2 slice, which serves it as any request: the requesting GPU's
//!   L2 never holds it (a memory-side L2 caches only its own lines; the SM's L1D treats it
//!   as any global line).
//! - **DRAM** (`dram.rs`): `chunk = addr / dram.interleave_bytes`, `channel = chunk %
//!   channels`, `local = (chunk / channels) * interleave_bytes + addr % interleave_bytes`,
//!   then banks and rows inside the channel (see `dram.rs`).
//!
//! Unloaded, a pointer chase therefore sees exactly the composition of docs/config.md:
//! L1 hit; L1 hit + 2 x NoC + L2 hit; + `dram.latency_ps` + the row-buffer timing.
//!
//! A `MemcpyHtoD` with `memcpy.fills_l2` installs the copied sectors in the L2 slices that
//! home them, clean, and only the last `l2.size_bytes` of a larger copy (what LRU would
//! leave); with a private L2, in the LLC slices that home them (the last `llc.size_bytes`
//! per chiplet), and the private L2s start cold. L1s are not coherent across kernels: an SM invalidates its L1D when it receives
//! a CTA of a kernel other than its last one, sending dirty sectors of write-back L1s to L2.

use std::collections::VecDeque;

use std::sync::Arc;

use crate::config::{GpuConfig, GridSplit, HomePolicy, WriteAllocate, WritePolicy};
use serde::Serialize;
use tessera_interconnect::Picos;

pub mod coalesce;

mod cache;
mod channel;
mod dram;
mod harness;
mod ldst;
mod link;
mod packet;
mod port;

pub use channel::MemChannel;
pub use harness::MemSystem;
pub use ldst::{Issued, LdStUnit};
pub use link::{link_spec, topology, LinkInterface, LinkReport, RouteError};
pub use packet::{Packet, PacketError, MAX_UNIT};

use coalesce::Geometry;

/// Bytes of a packet header on the NoC (GPGPU-Sim's 8-byte control size).
const HEADER_BYTES: u64 = 8;

/// What a memory instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Load,
    Store,
    /// Atomics and reductions: performed at the L2 slice of the address.
    Atomic,
}

/// Which memory a memory instruction addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Local,
    Shared,
    Const,
}

/// One warp memory instruction.
#[derive(Clone, Copy, Debug)]
pub struct MemRequest<'a> {
    pub access: Access,
    pub space: Space,
    /// Bytes per lane.
    pub width_bytes: u32,
    /// `(lane, address)` of each active lane, in lane order (may be left empty when
    /// `contiguous` is given for a global, local or constant load or store).
    pub lanes: &'a [(u32, u64)],
    /// `(address, bytes)` when the active lanes' bytes are known to form this one range
    /// (the k-th active lane at `address + k * width_bytes`, the trace's stride mode):
    /// coalesced as one range, without looking at `lanes`.
    pub contiguous: Option<(u64, u64)>,
}

macro_rules! mem_stats {
    ($( $(#[$doc:meta])* $field:ident ),* $(,)?) => {
        /// Integer counters of the memory hierarchy (each unit keeps its own; totals are
        /// sums in unit order). L1D and L2 counters count sectors; `l1d_hits + l1d_misses =
        /// l1d_accesses` and likewise for L2. The L1D counters count the loads and stores
        /// that use an L1D (not atomics, nor global/const accesses with `l1d.enabled:
        /// false`).
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
        pub struct MemStats {
            $( $(#[$doc])* pub $field: u64, )*
        }

        impl MemStats {
            /// Adds every counter of `o`.
            pub fn add(&mut self, o: &MemStats) {
                $( self.$field += o.$field; )*
            }
        }
    };
}

mem_stats! {
    /// Sector accesses of loads and stores that go through an L1D.
    l1d_accesses,
    l1d_hits,
    l1d_misses,
    l2_accesses,
    l2_hits,
    l2_misses,
    /// DRAM sector reads (fills of L2 misses).
    dram_reads,
    /// DRAM sector writes (L2 write-backs, or write-through stores).
    dram_writes,
    /// DRAM bytes read and written.
    dram_bytes,
    /// Warp shared-memory instructions.
    shared_accesses,
    /// Extra shared-memory passes caused by bank conflicts.
    shared_bank_conflicts,
    /// Warp global/local/const instructions (loads, stores, atomics).
    global_requests,
    /// L1D sector misses that merged with a fill already in flight (included in misses).
    l1d_pending_hits,
    /// L1D miss requests (one per line, plus one per later request of new sectors of a
    /// line already in flight) sent to L2.
    l1d_miss_requests,
    /// L1D misses that found every MSHR busy and waited.
    l1d_mshr_waits,
    /// L2 sector misses that merged with a fill already in flight (included in misses).
    l2_pending_hits,
    /// L2 miss requests that found every MSHR of their slice busy and waited.
    l2_mshr_waits,
    /// Dirty L2 sectors written back on eviction: to DRAM (memory-side L2), or to the home
    /// LLC (private L2).
    l2_writeback_sectors,
    /// Dirty L1D sectors written to L2 (write-back L1 policies).
    l1d_writeback_sectors,
    /// Warp atomic instructions performed at L2 (per line touched).
    l2_atomics,
    /// NoC bytes from SMs to L2 slices (headers included).
    noc_request_bytes,
    /// NoC bytes from L2 slices to SMs (headers included).
    noc_reply_bytes,
    dram_read_bytes,
    dram_write_bytes,
    /// L2 sectors installed by host-to-device copies.
    memcpy_l2_sectors,
    /// Request packets (reads, writes, atomics) an SM sent to a line homed on another
    /// chiplet (through the link interfaces).
    remote_requests,
    /// LLC sector accesses (`package.l2: private`; 0 with a memory-side L2): L2 misses,
    /// write-through and written-back stores, atomics. `llc_hits + llc_misses =
    /// llc_accesses`.
    llc_accesses,
    llc_hits,
    llc_misses,
    /// Dirty LLC sectors written back to DRAM.
    llc_writeback_sectors,
    /// Request packets (reads and writes) private L2 slices sent to the LLC slice of a line
    /// homed on another chiplet (through the link interfaces).
    llc_remote_requests,
    /// LLC sectors installed by host-to-device copies (`package.l2: private`).
    memcpy_llc_sectors,
    /// Dirty L2 sectors written back to their home LLC by kernel-boundary flushes.
    l2_flush_writeback_sectors,
    /// Valid L2 lines invalidated by kernel-boundary flushes.
    l2_flush_invalidated_lines,
    /// L2 read sector misses on a line whose tag a kernel-boundary flush invalidated while
    /// the sector was valid (the line still in its way): the inter-kernel hits the flushes
    /// lost (included in `l2_misses`).
    l2_flush_lost_hits,
    /// Request packets (reads, writes, atomics) an SM sent to a line homed on another GPU
    /// (`system.gpus` > 1: peer memory, through the GPU switch; not in `remote_requests`,
    /// which counts the other chiplets of the SM's own GPU).
    peer_requests,
}

/// Set bits of `m` (sectors of a mask, mostly). Masks below 16 (four sectors, a 128-byte
/// line of 32-byte sectors, as every preset has) by a table of 4-bit counts packed in one
/// word: the portable x86-64 target has no `popcnt` instruction, and `count_ones` there is
/// a dozen instructions, run several times per simulated line (triad n=524,288 on
/// titanv: 2.7% of all host instructions; `-C target-feature=+popcnt` is not assumed).
#[inline(always)]
fn popcount(m: u64) -> u64 {
    if m < 16 {
        // Counts of 15 down to 0, a nibble each.
        (0x4332_3221_3221_2110 >> (4 * m)) & 0xF
    } else {
        m.count_ones() as u64
    }
}

/// The ids of the units of the system, which are also their port ids (stable: they name
/// the unit in the modeled system, never the partition that hosts it). The chiplets are
/// numbered across the system: chiplet `k` is chiplet `k % gpu_chiplets` of GPU `k /
/// gpu_chiplets` (with one GPU, the package's chiplets). Chiplet `k` owns a block of
/// [`UnitIds::per_chiplet`] ids starting at `k * per_chiplet`: its command processor first,
/// then its SMs, then its DRAM channels (each with its L2 slices), then, when the system
/// has several chiplets, its link interface. With one chiplet: the CP is 0, SM `s` is `1 +
/// s`, channel `c` is `1 + sm_count + c`. SMs and channels are numbered across the system:
/// SM `s` is on chiplet `s / sms`, channel `c` on chiplet `c / channels`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitIds {
    /// SMs per chiplet.
    pub sms: u32,
    /// DRAM channels per chiplet.
    pub channels: u32,
    /// Chiplets in the system (`chiplets * system.gpus`).
    pub chiplets: u32,
    /// Chiplets per GPU (`chiplets`).
    pub gpu_chiplets: u32,
}

/// What a unit id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// The command processor of a chiplet (chiplet 0's of each GPU also hosts that GPU's
    /// global CP, and chiplet 0's of GPU 0 the host).
    Cp(u32),
    /// An SM (system-wide index).
    Sm(u32),
    /// A DRAM channel with its L2 slices (system-wide index).
    Channel(u32),
    /// The link interface of a chiplet.
    Link(u32),
}

impl UnitIds {
    pub fn new(cfg: &GpuConfig) -> UnitIds {
        let gpu_chiplets = cfg.chiplets.max(1);
        UnitIds {
            sms: cfg.core.sm_count.max(1),
            channels: cfg.dram.channels.max(1),
            chiplets: gpu_chiplets * cfg.system.gpus.max(1),
            gpu_chiplets,
        }
    }
    /// The command processor of chiplet 0 (host, GPU 0's global CP, chiplet 0's local CP).
    pub const CP: u32 = 0;
    /// Ids per chiplet.
    pub fn per_chiplet(&self) -> u32 {
        1 + self.sms + self.channels + u32::from(self.chiplets > 1)
    }
    /// The command processor of chiplet `k`.
    pub fn cp(&self, k: u32) -> u32 {
        k * self.per_chiplet()
    }
    /// SM `s` (system-wide).
    #[inline]
    pub fn sm(&self, s: u32) -> u32 {
        // One chiplet (the common case, and these run for every packet): no divisions.
        if self.chiplets == 1 {
            return 1 + s;
        }
        (s / self.sms) * self.per_chiplet() + 1 + s % self.sms
    }
    /// Channel `c` (system-wide).
    #[inline]
    pub fn channel(&self, c: u32) -> u32 {
        if self.chiplets == 1 {
            return 1 + self.sms + c;
        }
        (c / self.channels) * self.per_chiplet() + 1 + self.sms + c % self.channels
    }
    /// The chiplet (system-wide) of channel `c` (system-wide).
    #[inline]
    pub fn chiplet_of_channel(&self, c: u32) -> u32 {
        if self.chiplets == 1 {
            return 0;
        }
        c / self.channels
    }
    /// The link interface of chiplet `k` (only with several chiplets in the system).
    pub fn link(&self, k: u32) -> u32 {
        k * self.per_chiplet() + 1 + self.sms + self.channels
    }
    /// SMs in the system.
    pub fn total_sms(&self) -> u32 {
        self.sms * self.chiplets
    }
    /// DRAM channels in the system.
    pub fn total_channels(&self) -> u32 {
        self.channels * self.chiplets
    }
    /// Number of units.
    pub fn count(&self) -> u32 {
        self.chiplets * self.per_chiplet()
    }
    /// GPUs in the system.
    pub fn gpus(&self) -> u32 {
        self.chiplets / self.gpu_chiplets
    }
    /// The GPU of chiplet `k` (system-wide index).
    pub fn gpu_of_chiplet(&self, k: u32) -> u32 {
        k / self.gpu_chiplets
    }
    /// The first chiplet (system-wide) of GPU `g`: the one whose CP unit hosts the GPU's
    /// global CP.
    pub fn gpu_first_chiplet(&self, g: u32) -> u32 {
        g * self.gpu_chiplets
    }
    /// What unit `id` is (`None` when out of range).
    pub fn unit(&self, id: u32) -> Option<Unit> {
        if id >= self.count() {
            return None;
        }
        let per = self.per_chiplet();
        let (k, r) = (id / per, id % per);
        Some(if r == 0 {
            Unit::Cp(k)
        } else if r <= self.sms {
            Unit::Sm(k * self.sms + r - 1)
        } else if r <= self.sms + self.channels {
            Unit::Channel(k * self.channels + r - 1 - self.sms)
        } else {
            Unit::Link(k)
        })
    }
    /// The chiplet of unit `id`.
    #[inline]
    pub fn chiplet_of(&self, id: u32) -> u32 {
        if self.chiplets == 1 {
            return 0;
        }
        id / self.per_chiplet()
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
            // The global CP's split (gpu/cp.rs): chiplet k runs CTAs [k N / n, (k+1) N / n).
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
    /// load per lookup instead of a binary search, which took 9% of a dgx-8gpu run.
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

/// Where units send packets. The owner stamps the per-source sequence number and delivers
/// each packet to its destination unit at `arrive_at`, in `(arrive_at, src, seq)` order.
pub trait Net {
    /// Sends `pkt` from unit `src` to unit `dst`, arriving at `arrive_at` (at least the
    /// NoC latency after the sender's current time).
    fn send(&mut self, src: u32, dst: u32, arrive_at: Picos, pkt: Packet);
}

/// The DRAM address map (module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DramMap {
    channels: Divisor,
    interleave: Divisor,
}

impl DramMap {
    pub(crate) fn new(cfg: &GpuConfig) -> DramMap {
        DramMap {
            channels: Divisor::new(cfg.dram.channels as u64),
            interleave: Divisor::new(cfg.dram.interleave_bytes as u64),
        }
    }

    /// `(channel, channel-local address)` of `addr`.
    #[inline(always)]
    pub(crate) fn map(&self, addr: u64) -> (u32, u64) {
        let chunk = self.interleave.div(addr);
        (
            self.channels.rem(chunk) as u32,
            self.channels.div(chunk) * self.interleave.d + self.interleave.rem(addr),
        )
    }
}

/// A divisor fixed by the config: shifts and masks when it is a power of two (line sizes,
/// interleaves, usually slices per channel), a division otherwise. Address mapping runs on
/// every memory request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor {
    pub(crate) d: u64,
    /// `log2(d)` when `d` is a power of two.
    shift: Option<u32>,
    /// Otherwise a multiply-and-shift by a precomputed reciprocal: a 64-bit `div` is tens
    /// of cycles, and A100-sized presets have non-power-of-two channel counts (the
    /// division was half of `MemSpec::l2_home`'s time on dgx-8gpu, `perf annotate`).
    reduced: strength_reduce::StrengthReducedU64,
}

impl Default for Divisor {
    /// Division by 1.
    fn default() -> Self {
        Divisor::new(1)
    }
}

impl Divisor {
    pub(crate) fn new(d: u64) -> Divisor {
        let d = d.max(1);
        Divisor {
            d,
            shift: d.is_power_of_two().then(|| d.trailing_zeros()),
            reduced: strength_reduce::StrengthReducedU64::new(d),
        }
    }

    #[inline]
    pub(crate) fn div(&self, x: u64) -> u64 {
        match self.shift {
            Some(s) => x >> s,
            None => x / self.reduced,
        }
    }

    /// `(x / d, x % d)`, the remainder from the quotient (one reciprocal multiply, not
    /// two).
    #[inline]
    pub(crate) fn div_rem(&self, x: u64) -> (u64, u64) {
        match self.shift {
            Some(s) => (x >> s, x & (self.d - 1)),
            None => {
                let q = x / self.reduced;
                (q, x - q * self.d)
            }
        }
    }

    #[inline]
    pub(crate) fn rem(&self, x: u64) -> u64 {
        match self.shift {
            Some(_) => x & (self.d - 1),
            None => x % self.reduced,
        }
    }
}

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
mod popcount_tests {
    /// The table of small masks and the fallback count as `count_ones` does.
    #[test]
    fn popcount_is_count_ones() {
        for m in (0..4096u64).chain([u64::MAX, 1 << 63, 0xF0F0, 0x8000_0000_0000_000F]) {
            assert_eq!(super::popcount(m), u64::from(m.count_ones()), "mask {m:#x}");
        }
    }
}

#[cfg(test)]
mod mshr_tests {
    use super::Mshrs;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// The sorted releases answer as a min-heap of release times (the model they
    /// replaced): releases out of order, waits when all MSHRs are busy, and expiries.
    #[test]
    fn sorted_releases_act_as_a_min_heap() {
        let mut m = Mshrs::new(6);
        let mut heap: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
        let (mut x, mut t, mut out_of_order, mut waits) = (11u64, 0u64, 0, 0);
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            t += (x >> 60) % 3;
            let got = m.acquire(t);
            // The heap model, as `Mshrs` was written before.
            while heap.peek().is_some_and(|&Reverse(r)| r <= t) {
                heap.pop();
            }
            let want = match heap.len() >= 6 {
                true => heap.pop().map_or((t, false), |Reverse(r)| (r.max(t), true)),
                false => (t, false),
            };
            assert_eq!(got, want);
            waits += usize::from(got.1);
            let at = got.0 + 5 + (x >> 40) % 40;
            out_of_order += usize::from(m.busy_until.back().is_some_and(|&b| b > at));
            m.release(at);
            heap.push(Reverse(at));
        }
        assert!(
            out_of_order > 1000 && waits > 1000,
            "{out_of_order} {waits}"
        );
    }
}

#[cfg(test)]
mod divisor_tests {
    use super::{Divisor, MemSpec};

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

    /// Unit ids round-trip through `UnitIds::unit` and name the right chiplet, with the
    /// one-chiplet shortcuts (no divisions) and without them (4 chiplets, 2 GPUs).
    #[test]
    fn unit_ids_round_trip_with_one_chiplet_or_several() {
        use super::{Unit, UnitIds};
        for (chiplets, gpus) in [(1, 1), (4, 1), (2, 2)] {
            let ids = UnitIds {
                sms: 7,
                channels: 3,
                chiplets: chiplets * gpus,
                gpu_chiplets: chiplets,
            };
            for s in 0..ids.total_sms() {
                assert_eq!(ids.unit(ids.sm(s)), Some(Unit::Sm(s)));
                assert_eq!(ids.chiplet_of(ids.sm(s)), s / ids.sms);
            }
            for c in 0..ids.total_channels() {
                assert_eq!(ids.unit(ids.channel(c)), Some(Unit::Channel(c)));
                assert_eq!(ids.chiplet_of(ids.channel(c)), c / ids.channels);
                assert_eq!(ids.chiplet_of_channel(c), c / ids.channels);
            }
        }
    }

    /// Shifts, masks and the reciprocal give exactly `/` and `%`, including at the top of
    /// the range.
    #[test]
    fn divisor_matches_division() {
        for d in [
            1u64,
            2,
            3,
            5,
            6,
            7,
            10,
            12,
            24,
            40,
            80,
            96,
            1 << 12,
            4095,
            u64::MAX,
        ] {
            let v = Divisor::new(d);
            for x in [
                0u64,
                1,
                d - 1,
                d,
                d.wrapping_add(1),
                12345,
                1 << 40,
                (1 << 40) + 7,
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(v.div(x), x / d, "{x} / {d}");
                assert_eq!(v.rem(x), x % d, "{x} % {d}");
                assert_eq!(v.div_rem(x), (x / d, x % d), "{x} div_rem {d}");
            }
        }
    }
}

#[cfg(test)]
mod home_tests {
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

/// Outstanding misses of one L2 slice: the times their MSHRs free (known, since the
/// slice's DRAM channel is in the same unit).
#[derive(Clone, Debug)]
struct Mshrs {
    cap: usize,
    /// The release times, sorted (a multiset: [`Mshrs::acquire`] takes the earliest).
    /// Sorted rather than a binary heap: releases come nearly in time order, so most
    /// insertions are at the back and every removal is at the front, without the heap's
    /// sift-down and its unpredictable branches on every pop.
    busy_until: VecDeque<Picos>,
}

impl Mshrs {
    fn new(cap: u32) -> Mshrs {
        Mshrs {
            cap: (cap as usize).max(1),
            busy_until: VecDeque::new(),
        }
    }

    /// Starts loading the earliest release into the host's caches.
    fn prefetch(&self) {
        if let Some(r) = self.busy_until.front() {
            crate::prefetch(r);
        }
    }

    /// When a miss asked at `t` gets an MSHR (and whether it waited). Forced inline: once
    /// per L2 miss, from one place.
    #[inline(always)]
    fn acquire(&mut self, t: Picos) -> (Picos, bool) {
        while self.busy_until.front().is_some_and(|&r| r <= t) {
            self.busy_until.pop_front();
        }
        if self.busy_until.len() >= self.cap {
            if let Some(r) = self.busy_until.pop_front() {
                return (r.max(t), true);
            }
        }
        (t, false)
    }

    fn release(&mut self, at: Picos) {
        if self.busy_until.back().is_none_or(|&b| b <= at) {
            self.busy_until.push_back(at);
        } else {
            let i = self.busy_until.partition_point(|&r| r <= at);
            self.busy_until.insert(i, at);
        }
    }
}
