//! The GPU configuration: a typed [`GpuConfig`] read from YAML (DESIGN.md sections 3 and 5;
//! issue 4, item 3).
//!
//! A configuration is a tree of sections (`package`, `system`, `partitioning`, `core`, `l1d`,
//! `shared_mem`, `noc`, `l2`, `llc`, `dram`, `launch`, `memcpy`), each a serde struct declared below with every key
//! documented where it is declared: what it is, its unit (the unit is also in the key's
//! name: `_hz`, `_ps`, `_cycles`, `_bytes`, `_bytes_per_cycle`) and where the presets in
//! `configs/` take its value from. The declarations also produce the static key table
//! ([`GpuConfig::KEYS`]) from which the loader checks files and `--set` overrides (unknown
//! keys, types, defaults) and from which `docs/config.md` is generated
//! ([`reference_markdown`]), so the reference cannot drift from the code.
//!
//! Loading ([`GpuConfig::load`]): a file may name a `base:` file (relative to itself,
//! recursively, cycles detected) whose values it overrides key by key; `--set a.b.c=value`
//! overrides apply to the merged tree; missing keys take their documented default or are
//! errors; then [`GpuConfig::validate`] rejects impossible values. Every error names the
//! file (or the `--set` argument) and the key path.
//!
//! Clock domains: `core.clock_hz`, `noc.clock_hz`, `l2.clock_hz` and `dram.clock_hz`. A
//! `_cycles` key counts cycles of the clock of the section it is in (`core`, `l1d`,
//! `shared_mem` and `core.icache` count core cycles). Each period is
//! [`GpuConfig::period_ps`]`(clock_hz)` = `round(1e12 / clock_hz)` picoseconds, fixed at
//! load (DESIGN.md section 3).

use serde::{Deserialize, Serialize};

mod load;
mod occupancy;
mod reference;
mod validate;

#[cfg(test)]
mod tests;

pub use load::parse_set;
pub use occupancy::{CtaFitError, Occupancy, OccupancyLimit};
pub use reference::{leaf_keys, reference_markdown};

use crate::Picos;

/// The value kind of a configuration key, as the loader checks it and the reference shows it.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Unsigned integer that fits in 32 bits.
    U32,
    /// Unsigned integer that fits in 64 bits.
    U64,
    /// `true` or `false`.
    Bool,
    /// Text.
    Str,
    /// One of the listed names.
    Enum(&'static [&'static str]),
    /// A nested section with these keys.
    Section(&'static [KeyInfo]),
}

/// One key of a section: the row of the reference table that the struct field declares.
#[derive(Clone, Copy, Debug)]
pub struct KeyInfo {
    /// The key's name inside its section (the struct field's name).
    pub name: &'static str,
    /// What values it takes.
    pub kind: Kind,
    /// Its unit in words (the name carries it too).
    pub unit: &'static str,
    /// Its default as YAML text, or `None` when the key is required. Sections have none:
    /// a section may be left out when all its keys have defaults.
    pub default: Option<&'static str>,
    /// The field's doc comment, one line per `///` line.
    pub doc: &'static str,
    /// The allowed values of an integer key, `(least, most)` inclusive, or `None` for the
    /// other kinds. Every integer key has one (a test checks): it is what keeps absurd
    /// values (an SM count of a million, a latency of 2^64 ps, a clock of 1 Hz) from
    /// overflowing time arithmetic or running forever, and `docs/config.md` lists it. Load
    /// checks it on the merged values (the largest first, before any other check; the
    /// least last, after the checks that explain why 0 is impossible), naming the file or
    /// `--set` argument the value came from, the key and the range.
    pub range: Option<(u64, u64)>,
}

/// The allowed range of every clock (`*.clock_hz`): 1 MHz to 100 GHz. Below, a simulated
/// microsecond is a single cycle and any run takes practically forever (or queues without
/// bound while a slow unit falls behind); above, periods round to 10 ps or less.
pub const CLOCK_RANGE: (u64, u64) = (1_000_000, 100_000_000_000);

/// The largest value of a picosecond latency or interval: 1 s (10^12 ps). Sums of a few
/// such latencies and of cycle counts (at most [`MAX_CYCLES`] of a clock of at least 1 MHz)
/// stay far from the simulated time limit, so no time arithmetic can overflow.
pub const MAX_PS: u64 = 1_000_000_000_000;

/// The largest value of a `_cycles` latency: 10^6 cycles, 1 s at the slowest clock.
pub const MAX_CYCLES: u64 = 1_000_000;

/// The most SMs per chiplet.
pub const MAX_SMS: u64 = 4096;

/// Declares a config section: the serde struct (every field documented, unknown keys
/// denied) and its `KEYS` table built from the same field list and doc comments. An
/// integer key declares its allowed range: `..., range (LEAST, MOST);`.
macro_rules! section {
    (@range) => { None };
    (@range $range:expr) => { Some($range) };
    (
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty = $kind:expr, unit $unit:literal, $default:expr
                    $(, range $range:expr)?;
            )*
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                pub $field: $ty,
            )*
        }

        impl $name {
            /// The keys of this section, in declaration order (the reference table).
            pub const KEYS: &'static [KeyInfo] = &[
                $(
                    KeyInfo {
                        name: stringify!($field),
                        kind: $kind,
                        unit: $unit,
                        default: $default,
                        doc: concat!($($doc, "\n"),*),
                        range: section!(@range $($range)?),
                    },
                )*
            ];
        }
    };
}

/// Declares a config enum: snake_case names in YAML, and the list of names for the table.
macro_rules! config_enum {
    (
        $(#[doc = $edoc:literal])*
        pub enum $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $variant:ident = $text:literal,
            )*
        }
    ) => {
        $(#[doc = $edoc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(
                $(#[doc = $doc])*
                #[serde(rename = $text)]
                $variant,
            )*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
            /// The YAML name of every variant, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),*];

            /// The YAML name of this variant.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }
    };
}

config_enum! {
    /// How the simulated system is cut into partitions (DESIGN.md sections 4 and 5).
    pub enum PartitionMode {
        /// One partition per chiplet (a monolithic GPU when `chiplets: 1`).
        Chiplet = "chiplet",
        /// Each chiplet is cut into `partitioning.sm_clusters` partitions of contiguous SMs
        /// (the memory side is spread over them likewise), along ports whose latency is at
        /// least the lookahead. Results never change with the cut.
        SmCluster = "sm_cluster",
    }
}

config_enum! {
    /// Warp scheduling policy of each sub-core scheduler.
    pub enum SchedulerPolicy {
        /// Loose round robin.
        Lrr = "lrr",
        /// Greedy then oldest.
        Gto = "gto",
        /// Two-level: an active pool of `core.two_level_active_warps`, round robin inside;
        /// a warp waiting on a global/local memory result yields its slot to the oldest
        /// pending warp that is not.
        TwoLevel = "two_level",
    }
}

config_enum! {
    /// What a store does at a cache.
    pub enum WritePolicy {
        /// Stores update a hit line and always go on to the next level.
        WriteThrough = "write_through",
        /// Stores dirty the line; it is written back on eviction or flush.
        WriteBack = "write_back",
        /// Stores invalidate a hit line and go on to the next level.
        WriteEvict = "write_evict",
        /// Write-back for local memory, write-through for global (Fermi's L1).
        LocalWriteBack = "local_write_back",
    }
}

config_enum! {
    /// What a store that misses does at a cache.
    pub enum WriteAllocate {
        /// The line is not allocated.
        NoAllocate = "no_allocate",
        /// The line is fetched, then written.
        FetchOnWrite = "fetch_on_write",
        /// The written sectors are allocated without a fetch; the rest is fetched only if
        /// a later load needs it.
        LazyFetchOnRead = "lazy_fetch_on_read",
    }
}

config_enum! {
    /// Request scheduling at a DRAM channel.
    pub enum DramScheduler {
        /// First-ready first-come-first-served: row hits first, then oldest.
        FrFcfs = "fr_fcfs",
        /// Strictly in arrival order.
        Fcfs = "fcfs",
    }
}

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

config_enum! {
    /// How the global CP splits a kernel's grid across chiplets.
    pub enum GridSplit {
        /// Chiplet `k` of `n` gets CTAs `[k N / n, (k + 1) N / n)` (listing order), as in
        /// current chiplet GPUs (CPCoh's "static kernel partitioning", dalmia-2023 Table 5.1).
        Contiguous = "contiguous",
        /// Chiplet `k` gets CTAs `k, k + n, k + 2n, ...`.
        RoundRobin = "round_robin",
    }
}

config_enum! {
    /// How the chiplets of a package are wired (interconnect crate, `Topology`).
    pub enum LinkTopology {
        /// A link between every pair of chiplets.
        FullyConnected = "fully_connected",
        /// Chiplet `i` linked to `i - 1` and `i + 1` (mod chiplets); shortest way round.
        Ring = "ring",
        /// A grid `package.mesh_cols` wide; X first, then Y.
        Mesh2d = "mesh2d",
        /// Every chiplet linked to one switch (a crossbar): two link traversals between any
        /// two chiplets, the switch's port to each chiplet serializing what goes down to it.
        Switch = "switch",
    }
}

config_enum! {
    /// Which L2 organization a chiplet has (DESIGN.md section 5, "Memory hierarchy").
    pub enum L2Organization {
        /// Memory-side L2 (NVIDIA style): each slice caches only the addresses homed at its
        /// DRAM channel, so the L2s are coherent and kernel boundaries need no L2 action.
        MemorySide = "memory_side",
        /// Private L2 per chiplet plus a shared LLC sliced by home (AMD style, dalmia-2023
        /// chapter 5): a chiplet's L2 slices cache any line its SMs use; misses, remote
        /// stores and write-backs go to the home chiplet's LLC slice (`llc`), atomics are
        /// performed there; every kernel boundary writes back and invalidates every L2
        /// (CPCoh's "Baseline", dalmia-2023 section 5.2).
        Private = "private",
    }
}

section! {
    /// The chiplets of the package and how they connect (used when `chiplets` > 1;
    /// DESIGN.md section 5). Every key has a default so single-chiplet configs leave the
    /// section out.
    pub struct PackageConfig {
        /// Home of each address (its DRAM channel and memory-side L2 slice). Presets:
        /// `page_interleave`, or `first_touch` where the modelled study uses it.
        home: HomePolicy = Kind::Enum(HomePolicy::NAMES), unit "-", Some("page_interleave");
        /// Page size of the home mapping (a power of two, a multiple of both line sizes).
        /// Presets: 4 KiB, the GPU's small page.
        home_page_bytes: u64 = Kind::U64, unit "bytes", Some("4096"), range (1, 1 << 30);
        /// How the global CP splits each grid across chiplets. Presets: `contiguous`.
        grid_split: GridSplit = Kind::Enum(GridSplit::NAMES), unit "-", Some("contiguous");
        /// Wiring of the inter-chiplet links. Presets: as the modelled package.
        topology: LinkTopology = Kind::Enum(LinkTopology::NAMES), unit "-", Some("fully_connected");
        /// Columns of the grid with `topology: mesh2d` (must divide `chiplets`).
        mesh_cols: u32 = Kind::U32, unit "chiplets", Some("2"), range (1, 64);
        /// One direction of each inter-chiplet link.
        link: LinkConfig = Kind::Section(LinkConfig::KEYS), unit "-", None;
        /// L2 organization: `memory_side` (the `l2` slices cache only the lines homed at
        /// their channel) or `private` (the `l2` slices of a chiplet cache any line its SMs
        /// use, `llc` is the shared last-level cache sliced by home, and every kernel
        /// boundary writes back and invalidates each chiplet's L2). Presets: `memory_side`
        /// for NVIDIA parts, `private` for the CPCoh (dalmia-2023 Table 5.1) presets.
        l2: L2Organization = Kind::Enum(L2Organization::NAMES), unit "-", Some("memory_side");
        /// With `l2: private`: whether a read of a line homed on another chiplet allocates
        /// it in the requesting chiplet's L2 (`false`: the data is passed to the SMs and not
        /// kept). Stores to such lines are always written through to the home LLC (an L2
        /// copy is updated, never dirtied). Ignored with `memory_side`. Presets: `true`
        /// (dalmia-2023 section 5.4.1: the L2s cache remote data, hence the flushes).
        cache_remote_reads: bool = Kind::Bool, unit "-", Some("true");
    }
}

config_enum! {
    /// The GPU-to-GPU fabric of a multi-GPU system (`system.gpu_link.topology`). Both are
    /// switch-shaped: each GPU has a port to one central switch, two link traversals
    /// between any two GPUs; they differ only in what the switch is called in the stats
    /// (`nvswitch`, `pcie_host`), since the figures of the port are the config's.
    pub enum GpuLinkTopology {
        /// NVLink ports to NVSwitch chips (a DGX/HGX board).
        Nvswitch = "nvswitch",
        /// PCIe ports to the host's root complex (peer-to-peer over PCIe).
        PcieHost = "pcie_host",
    }
}

section! {
    /// The GPUs of the simulated system and how they connect to each other and to the
    /// host (DESIGN.md sections 4 and 5). Every other section describes one GPU; with
    /// `gpus` > 1 the system is `gpus` identical GPUs of `chiplets` chiplets each. Every key
    /// has a default (one GPU, copies that take no time), so single-GPU configs leave the
    /// section out.
    pub struct SystemConfig {
        /// Number of GPUs. A trace's commands and kernels run on the GPU of their `device`
        /// (device `d` on GPU `d`; a trace naming a device >= `gpus` is an error when `gpus`
        /// > 1, and runs every device on the one GPU when `gpus` is 1). Presets: 1, or the
        /// board's GPU count (`dgx-8gpu.yaml`: 8).
        gpus: u32 = Kind::U32, unit "GPUs", Some("1"), range (1, 64);
        /// The GPU-to-GPU fabric (peer memory accesses), used when `gpus` > 1.
        gpu_link: GpuLinkConfig = Kind::Section(GpuLinkConfig::KEYS), unit "-", None;
        /// The host-to-GPU path of `MemcpyHtoD` copies.
        host_link: HostLinkConfig = Kind::Section(HostLinkConfig::KEYS), unit "-", None;
    }
}

section! {
    /// One direction of a GPU's port to the GPU switch (`system.gpu_link`). Each chiplet of
    /// a GPU has its own port to the switch with `1 / chiplets` of the GPU's bandwidth (so
    /// `bandwidth_bytes_per_cycle` must be a multiple of `chiplets`); with one chiplet per
    /// GPU that is the GPU's port. A peer request leaves its chiplet's link interface on the
    /// port up to the switch (serialization of the packet plus `packet_overhead_bytes` at
    /// the port's bandwidth, then `latency_ps`), then goes down the switch's port to the
    /// home chiplet (serialization and `latency_ps` again), crosses that chiplet's NoC to
    /// its L2 slice, and the reply comes back the same way. The switch itself has no
    /// internal contention. `latency_ps` bounds the lookahead of a cut between GPUs.
    pub struct GpuLinkConfig {
        /// Wiring: `nvswitch` or `pcie_host`, both a switch (see the type). Presets: as the
        /// modelled board.
        topology: GpuLinkTopology = Kind::Enum(GpuLinkTopology::NAMES), unit "-", Some("nvswitch");
        /// Port clock. Presets: the core clock, so the bandwidth reads per core cycle.
        clock_hz: u64 = Kind::U64, unit "Hz", Some("1000000000"), range CLOCK_RANGE;
        /// Bytes per port cycle, one direction, for the whole GPU (split evenly over its
        /// chiplets' ports). Presets: the GPU's NVLink bandwidth per direction divided by
        /// the clock (arithmetic in the preset).
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per link cycle", Some("64"), range (0, 65_536);
        /// One hop, GPU to switch or switch to GPU: from the last byte leaving the sender
        /// to the packet at the receiver. At least 1 ps when `gpus` > 1 (it bounds the
        /// lookahead). Presets: cited per preset.
        latency_ps: u64 = Kind::U64, unit "ps", Some("500000"), range (0, MAX_PS);
        /// Bytes added to every packet on the port (framing, CRC). Presets: cited per
        /// preset.
        packet_overhead_bytes: u32 = Kind::U32, unit "bytes", Some("16"), range (0, 4096);
    }
}

section! {
    /// The host-to-GPU path of `MemcpyHtoD` copies (`cudaMemcpy`, synchronous). A copy to
    /// device `d` first waits for every kernel the host launched on `d` to complete, then
    /// takes `latency_ps + ceil(bytes / bandwidth_bytes_per_s)` of simulated time, during
    /// which the host waits; the copied data reaches `d`'s DRAM channels
    /// `launch.host_to_gcp_ps` after the copy ends (where `memcpy.fills_l2` installs it).
    pub struct HostLinkConfig {
        /// Copy bandwidth, one direction. 0: copies take no simulated time (and
        /// `latency_ps` is ignored), as in Accel-Sim; the default, so single-GPU presets
        /// keep their results. Otherwise at least 1 MB/s (1000000), so that no copy
        /// outlasts the simulated time. Presets: 0, or the measured pageable/pinned copy
        /// rate (`dgx-8gpu.yaml`).
        bandwidth_bytes_per_s: u64 = Kind::U64, unit "bytes/s", Some("0"), range (0, 1_000_000_000_000_000);
        /// Fixed time per copy before its bytes flow (driver, DMA setup, PCIe round trip).
        /// Used only with `bandwidth_bytes_per_s` > 0. Presets: cited per preset.
        latency_ps: u64 = Kind::U64, unit "ps", Some("0"), range (0, MAX_PS);
        /// With `system.gpus` > 1: a kernel's completion reaches the host this long after
        /// its GPU's global CP has it (an interrupt or a polled flag crossing PCIe), for every
        /// GPU alike; a `MemcpyHtoD` waiting for the device's kernels starts then. With one
        /// GPU it is not used (the host and the global CP see a completion together, as
        /// `launch.completion_ps` says). At least 1 ps when `gpus` > 1 (it bounds the
        /// lookahead). Presets: cited per preset.
        completion_ps: u64 = Kind::U64, unit "ps", Some("1000000"), range (0, MAX_PS);
    }
}

section! {
    /// The last-level cache of a chiplet with `package.l2: private` (ignored with
    /// `memory_side`): one slice per DRAM channel, caching the lines homed at that channel
    /// (L2 misses, remote and write-through stores, L2 write-backs and atomics of every
    /// chiplet come here), sectored like the L2 (`l2.sector_bytes`), LRU, write-back to its
    /// DRAM channel. Its clock, data-port bandwidth and atomic ALU are the L2's
    /// (`l2.clock_hz`, `l2.bandwidth_bytes_per_cycle`, `l2.atomic_latency_cycles`). Every key
    /// has a default, so memory-side configs leave the section out.
    pub struct LlcConfig {
        /// Capacity of a chiplet's LLC slices together; each slice has `size_bytes /
        /// dram.channels / (assoc * line_bytes)` sets, a power of two. Presets: dalmia-2023
        /// Table 5.1 "L3 Size 16 MB" over the chiplets.
        size_bytes: u64 = Kind::U64, unit "bytes", Some("4194304"), range (1, 1 << 30);
        /// Ways per set. Presets: Table 5.1 "16 way".
        assoc: u32 = Kind::U32, unit "ways", Some("16"), range (1, 4096);
        /// Line size; must equal `l2.line_bytes` (an L2 line is filled from one LLC line).
        /// Presets: Table 5.1 "64B line".
        line_bytes: u32 = Kind::U32, unit "bytes", Some("128"), range (1, 4096);
        /// Cycles from a request's arrival at the slice to its response's departure on a
        /// hit (L2 clock). Presets: Table 5.1 "L3 Latency 330 cycles" less the L2 lookup and
        /// the NoC traversals (derivation in the preset).
        hit_latency_cycles: u32 = Kind::U32, unit "L2 cycles", Some("100"), range (1, MAX_CYCLES);
        /// Miss status holding registers per LLC slice (misses to its DRAM channel in
        /// flight). Presets: assumed equal to `l2.mshrs_per_slice`.
        mshrs_per_slice: u32 = Kind::U32, unit "entries", Some("64"), range (1, 65_536);
    }
}

section! {
    /// One direction of an inter-chiplet link: the sending chiplet's link interface
    /// serializes packets (header and data sectors plus `packet_overhead_bytes`) at
    /// `bandwidth_bytes_per_cycle` of `clock_hz`, in order, and the receiving interface has
    /// a packet `latency_ps` after its last byte left (store and forward: the receiver
    /// checks a whole packet before routing it on). Packets then cross the receiving
    /// chiplet's NoC (`noc.latency_cycles`) to the L2 slice or SM. The least link latency
    /// is the lookahead of a cut between chiplets (DESIGN.md section 4).
    pub struct LinkConfig {
        /// Link clock. Presets: the core clock (the bandwidth is given per core cycle).
        clock_hz: u64 = Kind::U64, unit "Hz", Some("1000000000"), range CLOCK_RANGE;
        /// Bytes per link cycle, one direction. Presets: the package's per-chiplet link
        /// bandwidth divided by the clock (each preset shows its arithmetic).
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per link cycle", Some("64"), range (1, 65_536);
        /// From the last byte leaving the sender to the packet at the receiving interface.
        /// At least 1 ps (it bounds the lookahead). Presets: cited per preset.
        latency_ps: u64 = Kind::U64, unit "ps", Some("20000"), range (1, MAX_PS);
        /// Bytes added to every packet on the link (framing, CRC). Presets: 8, one flit
        /// header (assumed).
        packet_overhead_bytes: u32 = Kind::U32, unit "bytes", Some("8"), range (0, 4096);
    }
}

section! {
    /// A whole GPU system: what `tessera run --config` reads.
    pub struct GpuConfig {
        /// Name of the configuration, reported in stats. Presets: the preset's file name.
        name: String = Kind::Str, unit "-", None;
        /// Number of chiplets in the GPU package; 1 is a monolithic GPU. Every other section
        /// except `package` describes one chiplet (SM count, L2 size and DRAM channels are
        /// per chiplet). Presets: 1 for single-die GPUs, 2 or 4 for the chiplet presets.
        chiplets: u32 = Kind::U32, unit "chiplets", Some("1"), range (1, 64);
        /// The chiplets of the package: home mapping, grid split, links.
        package: PackageConfig = Kind::Section(PackageConfig::KEYS), unit "-", None;
        /// The GPUs of the system (`gpus`) and their links to each other and to the host.
        system: SystemConfig = Kind::Section(SystemConfig::KEYS), unit "-", None;
        /// How the GPU is cut into simulation partitions. Never changes results.
        partitioning: PartitioningConfig = Kind::Section(PartitioningConfig::KEYS), unit "-", None;
        /// The SM core: occupancy limits, schedulers, operand collection, functional units,
        /// instruction cache (one SM; every SM of a chiplet is alike).
        core: CoreConfig = Kind::Section(CoreConfig::KEYS), unit "-", None;
        /// The L1 data cache of each SM (core clock).
        l1d: L1dConfig = Kind::Section(L1dConfig::KEYS), unit "-", None;
        /// The shared memory (scratchpad) of each SM (core clock).
        shared_mem: SharedMemConfig = Kind::Section(SharedMemConfig::KEYS), unit "-", None;
        /// The on-chip network between SMs and L2 slices (its own clock).
        noc: NocConfig = Kind::Section(NocConfig::KEYS), unit "-", None;
        /// The L2 of a chiplet (its own clock): with `package.l2: memory_side`, slices each
        /// caching only addresses homed at its DRAM channel; with `private`, slices caching
        /// any line the chiplet's SMs use.
        l2: L2Config = Kind::Section(L2Config::KEYS), unit "-", None;
        /// The last-level cache sliced by home, with `package.l2: private` (L2 clock).
        llc: LlcConfig = Kind::Section(LlcConfig::KEYS), unit "-", None;
        /// DRAM channels (their own clock).
        dram: DramConfig = Kind::Section(DramConfig::KEYS), unit "-", None;
        /// The kernel launch path, one key per segment so nothing is counted twice
        /// (DESIGN.md section 5, "Launch path"). Picoseconds, independent of any clock.
        launch: LaunchConfig = Kind::Section(LaunchConfig::KEYS), unit "-", None;
        /// Host-to-device copies from the command list.
        memcpy: MemcpyConfig = Kind::Section(MemcpyConfig::KEYS), unit "-", None;
    }
}

section! {
    /// How the GPU is cut into simulation partitions (DESIGN.md sections 4 and 5).
    pub struct PartitioningConfig {
        /// `chiplet`: one partition per chiplet; `sm_cluster`: each chiplet cut into
        /// `sm_clusters` partitions of contiguous SMs. Presets: the default, `chiplet`.
        mode: PartitionMode = Kind::Enum(PartitionMode::NAMES), unit "-", Some("chiplet");
        /// Partitions per chiplet when `mode` is `sm_cluster` (at most `core.sm_count`);
        /// partition `p` of `P` hosts SMs `[p n / P, (p + 1) n / P)` and likewise a
        /// contiguous range of the DRAM channels (with their L2 slices); the command
        /// processor is in partition 0. Must stay 1 with `mode: chiplet`. Never changes
        /// results (tested on `titanv.yaml` with 1, 2, 4 and 7). Presets: 1; e.g.
        /// `--set partitioning.mode=sm_cluster --set partitioning.sm_clusters=4`.
        sm_clusters: u32 = Kind::U32, unit "partitions per chiplet", Some("1"), range (1, MAX_SMS);
        /// Lets each SM and DRAM channel run its own events ahead of the other units of
        /// its partition, up to the earliest time a packet could reach it (the NoC
        /// latency; for an SM of a one-chiplet GPU with a memory-side L2, whose replies
        /// all come from L2 slices, the L2 hit latency plus the NoC latency; a CTA
        /// dispatch, a copy or flush from a CP), in one visit: the same
        /// results (every packet is checked against it, and tests compare both settings
        /// byte for byte), far fewer host cache misses. `false` runs every event in global
        /// time order; it exists to check and measure that. Presets: the default, `true`.
        run_ahead: bool = Kind::Bool, unit "-", Some("true");
    }
}

section! {
    /// The SM core (DESIGN.md section 5, "SM core").
    pub struct CoreConfig {
        /// SMs per chiplet. Presets: the vendor or paper SM count.
        sm_count: u32 = Kind::U32, unit "SMs", None, range (1, MAX_SMS);
        /// SM clock. Presets: the clock of the simulator config or paper modelled, or the
        /// vendor boost clock.
        clock_hz: u64 = Kind::U64, unit "Hz", None, range CLOCK_RANGE;
        /// Threads per warp. The core model is NVIDIA-style with 32 lanes; any other value
        /// is rejected (a trace is checked against this core model, not a preset's brand).
        warp_size: u32 = Kind::U32, unit "threads", Some("32"), range (32, 32);
        /// Resident threads per SM (an occupancy limit). Presets: the simulator config's
        /// `-gpgpu_shader_core_pipeline` or the paper's table.
        max_threads_per_sm: u32 = Kind::U32, unit "threads", None, range (1, 65_536);
        /// Resident warp slots per SM; must equal `max_threads_per_sm / warp_size`.
        max_warps_per_sm: u32 = Kind::U32, unit "warps", None, range (1, 2048);
        /// Resident CTAs per SM (an occupancy limit). Presets: CUDA's occupancy header
        /// (`cudaOccMaxBlocksPerMultiprocessor`) for the compute capability.
        max_ctas_per_sm: u32 = Kind::U32, unit "CTAs", None, range (1, 2048);
        /// Largest CTA a launch may have. Presets: CUDA's 1024-thread block limit.
        max_threads_per_cta: u32 = Kind::U32, unit "threads", None, range (1, 65_536);
        /// 32-bit registers in an SM's register file. Presets: the simulator config's
        /// `-gpgpu_shader_registers` or the paper's table.
        registers_per_sm: u32 = Kind::U32, unit "registers", None, range (1, 1 << 24);
        /// Registers one CTA may hold (CUDA's `regsPerBlock`). Presets: the simulator
        /// config's `-gpgpu_registers_per_block`, or the whole file.
        max_registers_per_cta: u32 = Kind::U32, unit "registers", None, range (1, 1 << 24);
        /// Registers one thread may use (a trace using more can never run). Presets: CUDA's
        /// occupancy header (`cudaOccRegAllocationMaxPerThread`).
        max_registers_per_thread: u32 = Kind::U32, unit "registers", None, range (1, 65_536);
        /// Register allocation unit: a warp's registers (`regs_per_thread * 32`) are rounded
        /// up to a multiple of this. Presets: CUDA's occupancy header
        /// (`cudaOccRegAllocationGranularity`).
        register_alloc_granularity: u32 = Kind::U32, unit "registers per warp", None, range (1, 65_536);
        /// Sub-partitions with separate register files; a warp's registers come from one of
        /// them, so occupancy counts warps per partition. Presets: CUDA's occupancy header
        /// (`cudaOccSubPartitionsPerMultiprocessor`).
        register_file_partitions: u32 = Kind::U32, unit "partitions", None, range (1, 64);
        /// Shared memory per SM available to CTAs (the largest carveout). Presets: vendor
        /// figure or the simulator config's `-gpgpu_shmem_size`.
        shared_mem_per_sm_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 16 << 20);
        /// Shared memory one CTA may request (static + dynamic, before the reservation
        /// below). Presets: the simulator config's `-gpgpu_shmem_per_block` or the
        /// opt-in maximum.
        max_shared_mem_per_cta_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 16 << 20);
        /// Shared memory allocation unit: a CTA's shared memory (plus the reservation) is
        /// rounded up to a multiple of this. Presets: CUDA's occupancy header
        /// (`cudaOccSMemAllocationGranularity`).
        shared_mem_alloc_granularity_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 65_536);
        /// Shared memory the driver reserves per resident CTA (compute capability 8.x and
        /// later; `cudaOccSMemPerBlock` adds it). Presets: 1024 on Ampere, else 0.
        shared_mem_reserved_per_cta_bytes: u32 = Kind::U32, unit "bytes", Some("0"), range (0, 1 << 20);
        /// Warp schedulers (sub-cores) per SM; each owns an equal share of the warps,
        /// register banks and functional units. Presets: the simulator config's
        /// `-gpgpu_num_sched_per_core` or the paper's table.
        schedulers_per_sm: u32 = Kind::U32, unit "schedulers", None, range (1, 2048);
        /// Warp scheduling policy of every scheduler. Presets: the simulator config's
        /// `-gpgpu_scheduler` or the paper's table.
        scheduler: SchedulerPolicy = Kind::Enum(SchedulerPolicy::NAMES), unit "-", None;
        /// Size of the active pool of each scheduler under `two_level` (ignored otherwise;
        /// 0 is taken as 1). Presets: GPGPU-Sim's `two_level_active:6` example.
        two_level_active_warps: u32 = Kind::U32, unit "warps per scheduler", Some("6"), range (1, 2048);
        /// Register-file banks per SM, split evenly among the schedulers; two operands of an
        /// instruction in one bank take two cycles to read. Presets: the simulator config's
        /// `-gpgpu_num_reg_banks`.
        register_banks: u32 = Kind::U32, unit "banks", None, range (1, 4096);
        /// Operand-collector units per SM (instructions gathering operands at once), split
        /// evenly among the schedulers. Presets: the simulator config's collector units.
        operand_collectors: u32 = Kind::U32, unit "collectors", None, range (1, 4096);
        /// Model operand collection: an issued instruction holds one of its scheduler's
        /// `operand_collectors / schedulers_per_sm` collector units until its source
        /// operands are read, each of its scheduler's `register_banks / schedulers_per_sm`
        /// banks serving one read per core cycle; a conflict delays the instruction (its
        /// unit and result) by the extra cycles. `false`: every operand is read at once
        /// and collectors are unlimited. Presets: `true` (GPGPU-Sim/Accel-Sim model the
        /// operand collector).
        operand_collection: bool = Kind::Bool, unit "-", Some("true");
        /// Offset a warp's register-to-bank mapping by its warp slot (bank =
        /// `(register + warp slot) % banks per scheduler`; without it, `register % banks
        /// per scheduler`). Presets: the simulator config's `-gpgpu_reg_bank_use_warp_id`
        /// (GPGPU-Sim's default, off).
        reg_bank_use_warp_id: bool = Kind::Bool, unit "-", Some("false");
        /// Latency and initiation interval of each non-memory opcode class (the classes of
        /// `tessera_traces::OpClass`). Memory classes take their latency from the memory
        /// hierarchy; `barrier`, `fence` and `exit` from what they wait for.
        op_latency: OpLatencyTable = Kind::Section(OpLatencyTable::KEYS), unit "-", None;
        /// The instruction cache of each SM.
        icache: IcacheConfig = Kind::Section(IcacheConfig::KEYS), unit "-", None;
    }
}

section! {
    /// Timing of one opcode class on its functional unit (per sub-core).
    pub struct OpTiming {
        /// Cycles from issue until a dependent instruction may issue (the result latency).
        /// Presets: measured dependent-issue latencies where a study gives them, else the
        /// simulator config's `-trace_opcode_latency_initiation_*` first number.
        latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
        /// Cycles between two issues of this class on one sub-core's unit (1 = fully
        /// pipelined, one warp instruction per cycle). Presets: measured throughput where
        /// a study gives it, else the simulator config's second number.
        initiation_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
    }
}

section! {
    /// Per-opcode-class functional-unit timing, keyed by `tessera_traces::OpClass::name`.
    pub struct OpLatencyTable {
        /// Integer ALU: add, logic, shifts, compares, moves (IADD3, LOP3, SHF, ISETP, MOV...).
        int: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Integer multiply and multiply-add (IMAD, IMUL...).
        int_mul: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Half precision (HADD2, HFMA2...).
        fp16: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Single precision (FADD, FFMA, FMUL...).
        fp32: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Double precision (DADD, DFMA, DMUL...).
        fp64: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Special-function unit (MUFU: reciprocal, sqrt, transcendentals).
        sfu: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Tensor cores (HMMA, IMMA, DMMA...), per SASS instruction.
        tensor: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Type conversions (F2F, F2I, I2F...).
        convert: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Warp shuffles and votes (SHFL, VOTE, MATCH, REDUX).
        warp_shuffle: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Special-register reads (S2R, CS2R...).
        special_reg: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Uniform datapath (UIADD3, UMOV...).
        uniform: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Branches and reconvergence (BRA, BSSY, BSYNC, CALL, RET...).
        branch: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// No-ops and dependency waits (NOP, DEPBAR, YIELD).
        nop: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
        /// Instructions of class `other` (counted, not modelled specially).
        other: OpTiming = Kind::Section(OpTiming::KEYS), unit "-", None;
    }
}

section! {
    /// The instruction cache of each SM (misses go to L2 over the NoC).
    pub struct IcacheConfig {
        /// Model instruction fetch through the I-cache; `false` is a perfect I-cache (every
        /// fetch hits). Presets: `true` (the hardware has one).
        enabled: bool = Kind::Bool, unit "-", None;
        /// Capacity. Presets: the simulator config's `-gpgpu_cache:il1`.
        size_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 1 << 20);
        /// Ways per set. Presets: as `size_bytes`.
        assoc: u32 = Kind::U32, unit "ways", None, range (1, 4096);
        /// Line size (power of two). Presets: as `size_bytes`.
        line_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Cycles from fetch to instruction available on a hit. Presets: assumed 1 (GPGPU-Sim
        /// delivers a hit the next cycle; no study measures it).
        hit_latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
        /// Cycles from fetch to instruction available on a miss (the line comes from L2;
        /// a fixed latency, not a request to the memory system yet). Presets: the L2-hit
        /// latency a load sees minus the L1 hit, or the preset's NoC and L2 latencies.
        miss_latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
    }
}

section! {
    /// The L1 data cache of each SM. A load's end-to-end latency on an L1 hit is
    /// `hit_latency_cycles`.
    pub struct L1dConfig {
        /// Cache global loads in L1; `false` sends them all to L2 (`-gpgpu_gmem_skip_L1D`).
        enabled: bool = Kind::Bool, unit "-", Some("true");
        /// Capacity (fixed; the shared-memory carveout is `core.shared_mem_per_sm_bytes`).
        /// Presets: the simulator config's L1 or what the unified L1/shared SRAM leaves
        /// beside the full shared-memory carveout.
        size_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4 << 20);
        /// Ways per set; `size_bytes / (assoc * line_bytes)` sets, a power of two.
        /// Presets: the simulator config's `-gpgpu_cache:dl1`.
        assoc: u32 = Kind::U32, unit "ways", None, range (1, 4096);
        /// Line size (power of two). Presets: 128.
        line_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Sector size, the unit of coalescing and of fills; divides `line_bytes`.
        /// Presets: 32 for sectored caches (Volta on), 128 for Fermi's.
        sector_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Banks; accesses to one bank in one cycle serialize. Presets: the simulator
        /// config's `-gpgpu_l1_banks`.
        banks: u32 = Kind::U32, unit "banks", None, range (1, 1024);
        /// Cycles from a load's issue to its data on an L1 hit, as a pointer chase measures
        /// it. Presets: a measured pointer-chase L1 hit, else the simulator config's
        /// `-gpgpu_l1_latency`.
        hit_latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
        /// Miss status holding registers: distinct lines with misses in flight.
        /// Presets: the simulator config's MSHR entries (`A:<n>:<merge>`).
        mshrs: u32 = Kind::U32, unit "entries", None, range (1, 65_536);
        /// Requests that may merge into one MSHR entry. Presets: as `mshrs`.
        mshr_max_merge: u32 = Kind::U32, unit "requests", None, range (1, 65_536);
        /// What a store does on a hit. Presets: the simulator config's `<wr>` field.
        write_policy: WritePolicy = Kind::Enum(WritePolicy::NAMES), unit "-", None;
        /// What a store does on a miss. Presets: the simulator config's `<wr_alloc>` field.
        write_allocate: WriteAllocate = Kind::Enum(WriteAllocate::NAMES), unit "-", None;
    }
}

section! {
    /// Shared memory timing (its size is `core.shared_mem_per_sm_bytes`).
    pub struct SharedMemConfig {
        /// Banks; lanes hitting different words of one bank serialize. Presets: the
        /// simulator config's `-gpgpu_shmem_num_banks`.
        banks: u32 = Kind::U32, unit "banks", None, range (1, 1024);
        /// Width of one bank (power of two). Presets: 4, checked against measured shared
        /// memory bandwidth of about 128 B per cycle per SM.
        bank_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 1024);
        /// Cycles from a conflict-free shared load's issue to its data. Presets: a measured
        /// shared-memory latency, else the simulator config's `-gpgpu_smem_latency`.
        latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
    }
}

section! {
    /// The on-chip network between SMs and L2 slices: an egress queue per port, a latency
    /// and an arbiter at the receiver (DESIGN.md section 5).
    pub struct NocConfig {
        /// NoC clock. Presets: the simulator config's interconnect clock domain.
        clock_hz: u64 = Kind::U64, unit "Hz", None, range CLOCK_RANGE;
        /// One-way latency from an SM port to an L2-slice port or back. Presets: assumed
        /// (no study isolates it); it is part of the measured L2 hit latency, see
        /// `l2.hit_latency_cycles`.
        latency_cycles: u32 = Kind::U32, unit "NoC cycles", None, range (1, MAX_CYCLES);
        /// Bytes each port (SM or L2 slice) can send per NoC cycle, each direction.
        /// Presets: the simulator config's flit size.
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per NoC cycle", None, range (1, 65_536);
    }
}

section! {
    /// The L2 of a chiplet: memory-side or private (`package.l2`; with `private`, a slice
    /// caches any line and misses go to the `llc`). A load's end-to-end latency on an L2 hit is about
    /// `l1d.hit_latency_cycles + 2 * noc.latency_cycles + l2.hit_latency_cycles`, each in
    /// its own clock, plus queueing.
    pub struct L2Config {
        /// L2 clock. Presets: the simulator config's L2 clock domain.
        clock_hz: u64 = Kind::U64, unit "Hz", None, range CLOCK_RANGE;
        /// L2 slices per chiplet; a multiple of `dram.channels` (with a memory-side L2 each
        /// slice caches the addresses of one channel; a private L2 interleaves lines over
        /// all the chiplet's slices, `l2.slices / dram.channels` beside each channel). Presets: vendor slice count or the simulator config's
        /// memory sub-partitions.
        slices: u32 = Kind::U32, unit "slices", None, range (1, 4096);
        /// Total capacity of all slices of a chiplet. Presets: vendor L2 size or the
        /// simulator config's.
        size_bytes: u64 = Kind::U64, unit "bytes", None, range (1, 1 << 30);
        /// Ways per set of each slice; each slice has `size_bytes / slices / (assoc *
        /// line_bytes)` sets, a power of two. Presets: the simulator config's
        /// `-gpgpu_cache:dl2`.
        assoc: u32 = Kind::U32, unit "ways", None, range (1, 4096);
        /// Line size (power of two). Presets: as `assoc`.
        line_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Sector size, the unit of fills from DRAM; divides `line_bytes`.
        sector_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Cycles a slice takes from a request's arrival to the response's departure on a
        /// hit. Presets: a measured pointer-chase L2 hit minus `l1d.hit_latency_cycles` and
        /// two NoC traversals (derivation in the preset), else the simulator config's
        /// `-gpgpu_l2_rop_latency`.
        hit_latency_cycles: u32 = Kind::U32, unit "L2 cycles", None, range (1, MAX_CYCLES);
        /// Extra cycles an atomic or reduction occupies the slice's ALU beyond a hit
        /// (atomics execute at L2). Presets: the measured atomic latency minus the L2 hit
        /// latency on a TITAN V (ASIM-OUT), the only measured atomic figure.
        atomic_latency_cycles: u32 = Kind::U32, unit "L2 cycles", None, range (1, MAX_CYCLES);
        /// Miss status holding registers per slice. Presets: the simulator config's L2
        /// MSHR entries.
        mshrs_per_slice: u32 = Kind::U32, unit "entries", None, range (1, 65_536);
        /// Bytes a slice can return per L2 cycle. Presets: vendor L2 bandwidth over the
        /// slices, or one 32 B sector per cycle.
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per L2 cycle", None, range (1, 65_536);
        /// `true`: write-back, write-allocate; `false`: write-through to DRAM. Presets: the
        /// simulator config's L2 write policy.
        write_back: bool = Kind::Bool, unit "-", None;
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
        /// Requests a channel's scheduler can hold. Presets: the simulator config's
        /// `-gpgpu_frfcfs_dram_sched_queue_size`. Not modelled yet (the L2 MSHRs bound the
        /// requests in flight).
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

section! {
    /// The kernel launch path (DESIGN.md section 5): host -> global CP -> local CP -> SMs,
    /// and completion back. Back-to-back launches are spaced by at least `host_to_gcp_ps`
    /// (the host submits one at a time); a kernel's first CTA starts `host_to_gcp_ps +
    /// gcp_to_lcp_ps + cta_dispatch_ps` after its launch command.
    pub struct LaunchConfig {
        /// Host runtime and driver time to submit one launch to the global CP. Presets:
        /// a measured back-to-back launch period, or a measured launch latency minus the
        /// GPU-side segments below (derivation in the preset).
        host_to_gcp_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
        /// Global CP to local CP: kernel slice dispatch. Presets: the kernel-dispatch
        /// latency measured by WANG15 Table 3 (283 cycles at 706 MHz).
        gcp_to_lcp_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
        /// Local CP to an SM, per CTA dispatched, and back, per CTA completion report (the
        /// local CP sends an SM its next CTA when the report arrives); at least one SM
        /// cycle (the port contract). Presets: one SM cycle (Accel-Sim's
        /// `-gpgpu_TB_launch_latency 0`, raised to the minimum).
        cta_dispatch_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
        /// The local CP's receipt of the last CTA's completion report to the kernel's
        /// completion seen by the host (local CP -> global CP -> host). Presets: assumed
        /// equal to `gcp_to_lcp_ps`.
        completion_ps: u64 = Kind::U64, unit "ps", None, range (1, MAX_PS);
    }
}

section! {
    /// Host-to-device copies in the command list.
    pub struct MemcpyConfig {
        /// A copy also installs the copied lines in L2 (Accel-Sim's
        /// `-gpgpu_perf_sim_memcpy`), so the first kernel may hit; with `package.l2:
        /// private`, in the LLC slices at the lines' homes instead (the copy arrives at the
        /// home memory; the private L2s start cold). Presets: that option.
        fills_l2: bool = Kind::Bool, unit "-", None;
    }
}

/// Any error of loading or validating a configuration. Each names where the offending value
/// came from (a file, a `--set` argument, a default) and the key path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("{path}: cannot read: {msg}")]
    Io {
        /// The file, as named (and by whom, for a base).
        path: String,
        /// The operating system's reason.
        msg: String,
    },
    /// A file is not valid YAML, or its top level is not a mapping.
    #[error("{path}: {msg}")]
    Syntax {
        /// The file.
        path: String,
        /// What is wrong, with line and column where the parser gives them.
        msg: String,
    },
    /// Files include each other in a cycle.
    #[error("include cycle: {chain}")]
    IncludeCycle {
        /// The files of the cycle, `a.yaml -> b.yaml -> a.yaml`.
        chain: String,
    },
    /// A key is unknown, has a value of the wrong type, is missing, or its value is
    /// impossible.
    #[error("{origin}: {key}: {msg}")]
    Key {
        /// Where the value came from: a file, `--set k=v`, `default`, or `config`.
        origin: String,
        /// The key path, e.g. `l1d.size_bytes`.
        key: String,
        /// What is wrong.
        msg: String,
    },
    /// A `--set` argument is malformed.
    #[error("--set {arg}: {msg}")]
    Override {
        /// The argument as given.
        arg: String,
        /// What is wrong.
        msg: String,
    },
}

impl GpuConfig {
    /// Loads `path` (YAML), following `base:` includes, applies `overrides` (`(key path,
    /// value)` pairs from `--set key=value`, in order; see [`parse_set`]), fills defaults,
    /// and validates. Errors name the file or `--set` argument and the key path.
    pub fn load(
        path: impl AsRef<std::path::Path>,
        overrides: &[(String, String)],
    ) -> Result<GpuConfig, ConfigError> {
        load::load(path.as_ref(), overrides)
    }

    /// Period in picoseconds of a clock of `clock_hz`: `round(1e12 / clock_hz)`, the rule of
    /// DESIGN.md section 3 (same as [`tessera_interconnect::period_ps`]).
    pub fn period_ps(clock_hz: u64) -> Picos {
        tessera_interconnect::period_ps(clock_hz)
    }

    /// Period of the SM clock.
    pub fn core_period_ps(&self) -> Picos {
        Self::period_ps(self.core.clock_hz)
    }

    /// Period of the NoC clock.
    pub fn noc_period_ps(&self) -> Picos {
        Self::period_ps(self.noc.clock_hz)
    }

    /// Period of the L2 clock.
    pub fn l2_period_ps(&self) -> Picos {
        Self::period_ps(self.l2.clock_hz)
    }

    /// Period of the DRAM clock.
    pub fn dram_period_ps(&self) -> Picos {
        Self::period_ps(self.dram.clock_hz)
    }

    /// Simulation partitions: `chiplets` times `system.gpus`, times
    /// `partitioning.sm_clusters` when cutting by SM cluster.
    pub fn partition_count(&self) -> u32 {
        let chiplets = self.chiplets * self.system.gpus.max(1);
        match self.partitioning.mode {
            PartitionMode::Chiplet => chiplets,
            PartitionMode::SmCluster => chiplets * self.partitioning.sm_clusters,
        }
    }

    /// Peak DRAM bandwidth of one chiplet in bytes per second:
    /// `channels * bandwidth_bytes_per_cycle * clock_hz`.
    pub fn dram_peak_bytes_per_s(&self) -> u128 {
        self.dram.channels as u128
            * self.dram.bandwidth_bytes_per_cycle as u128
            * self.dram.clock_hz as u128
    }

    /// Rejects impossible values (zero sizes or counts, non-powers of two where the
    /// hardware needs them, sectors not dividing lines, zero latencies, more schedulers
    /// than warps, ...). The error names the key path; [`GpuConfig::load`] also names the
    /// file the value came from.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate::validate(self, &|_| "config".to_string())
    }

    /// Resident CTAs per SM for a kernel with `threads_per_cta` threads, `regs_per_thread`
    /// registers per thread and `shmem_bytes` of shared memory per CTA, by CUDA's occupancy
    /// calculation; an error when such a CTA can never fit on an SM of this config.
    pub fn max_ctas_per_sm(
        &self,
        threads_per_cta: u32,
        regs_per_thread: u32,
        shmem_bytes: u32,
    ) -> Result<u32, CtaFitError> {
        self.occupancy(threads_per_cta, regs_per_thread, shmem_bytes)
            .map(|o| o.ctas)
    }

    /// The full occupancy calculation behind [`GpuConfig::max_ctas_per_sm`]: each limit and
    /// which one binds.
    pub fn occupancy(
        &self,
        threads_per_cta: u32,
        regs_per_thread: u32,
        shmem_bytes: u32,
    ) -> Result<Occupancy, CtaFitError> {
        occupancy::occupancy(&self.core, threads_per_cta, regs_per_thread, shmem_bytes)
    }
}

impl OpLatencyTable {
    /// The timing of `class`, or `None` for the classes whose latency comes from elsewhere
    /// (memory classes, `barrier`, `fence`, `exit`).
    pub fn get(&self, class: tessera_traces::OpClass) -> Option<&OpTiming> {
        use tessera_traces::OpClass as C;
        Some(match class {
            C::Int => &self.int,
            C::IntMul => &self.int_mul,
            C::Fp16 => &self.fp16,
            C::Fp32 => &self.fp32,
            C::Fp64 => &self.fp64,
            C::Sfu => &self.sfu,
            C::Tensor => &self.tensor,
            C::Convert => &self.convert,
            C::WarpShuffle => &self.warp_shuffle,
            C::SpecialReg => &self.special_reg,
            C::Uniform => &self.uniform,
            C::Branch => &self.branch,
            C::Nop => &self.nop,
            C::Other => &self.other,
            _ => return None,
        })
    }
}
