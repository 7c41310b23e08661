//! The GPU configuration: a typed [`GpuConfig`] read from YAML (DESIGN.md sections 3 and 5;
//! issue 4, item 3).
//!
//! A configuration is a tree of sections (`package`, `system`, `partitioning`, `core`, `l1d`,
//! `shared_mem`, `noc`, `l2`, `llc`, `dram`, `launch`, `memcpy`), each a serde struct
//! declared with `section!` beside the unit it configures (`l1d` in `mem/l1d.rs`, `core` in
//! `sm/params.rs`, ...; the tree itself, `package`, `system` and `partitioning` here) and
//! re-exported here, with every key documented where it is declared: what it is, its unit
//! (the unit is also in the key's name: `_hz`, `_ps`, `_cycles`, `_bytes`,
//! `_bytes_per_cycle`) and where the presets in `configs/` take its value from. The
//! declarations also produce the static key table ([`GpuConfig::KEYS`]) from which the
//! loader checks files and `--set` overrides (unknown keys, types, defaults) and from which
//! `docs/config.md` is generated ([`reference_markdown`]), so the reference cannot drift
//! from the code.
//!
//! Loading ([`GpuConfig::load`]): a file may name a `base:` file (relative to itself,
//! recursively, cycles detected) whose values it overrides key by key; `--set a.b.c=value`
//! overrides apply to the merged tree; missing keys take their documented default or are
//! errors; then [`GpuConfig::validate`] rejects impossible values (each section's own
//! checks are its `check` method, beside it; `config/validate.rs` runs them in order with
//! the checks across sections). Every error names the file (or the `--set` argument) and
//! the key path.
//!
//! No unit reads a `GpuConfig`: each is built from its own parameters (`L1dParams`, ...),
//! which one `from_config` makes from the config.
//!
//! Clock domains: `core.clock_hz`, `noc.clock_hz`, `l2.clock_hz` and `dram.clock_hz`. A
//! `_cycles` key counts cycles of the clock of the section it is in (`core`, `l1d`,
//! `shared_mem` and `core.icache` count core cycles). Each period is
//! [`GpuConfig::period_ps`]`(clock_hz)` = `round(1e12 / clock_hz)` picoseconds, fixed at
//! load (DESIGN.md section 3).

mod load;
mod occupancy;
mod reference;
mod validate;

#[cfg(test)]
mod tests;

pub use load::parse_set;
pub use occupancy::{CtaFitError, Occupancy, OccupancyLimit};
pub use reference::{leaf_keys, reference_markdown};
pub(crate) use validate::Check;

// The sections declared beside the units they configure.
pub use crate::gpu::launch::LaunchConfig;
pub use crate::mem::dram::{DramConfig, DramScheduler};
pub use crate::mem::dram_channel::MemcpyConfig;
pub use crate::mem::home::HomePolicy;
pub use crate::mem::l1d::{L1dConfig, WriteAllocate, WritePolicy};
pub use crate::mem::l2_slice::L2Config;
pub use crate::mem::link::{LinkConfig, LinkTopology};
pub use crate::mem::llc_slice::LlcConfig;
pub use crate::mem::noc::NocConfig;
pub use crate::mem::shared_mem::SharedMemConfig;
pub use crate::sm::icache::IcacheConfig;
pub use crate::sm::params::{CoreConfig, OpLatencyTable, OpTiming};
pub use crate::sm::scheduler::SchedulerPolicy;
pub use crate::watchdog::WatchdogConfig;

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
        #[derive(Clone, Debug, PartialEq, Eq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                pub $field: $ty,
            )*
        }

        impl $name {
            /// The keys of this section, in declaration order (the reference table).
            pub const KEYS: &'static [$crate::config::KeyInfo] = &[
                $(
                    $crate::config::KeyInfo {
                        name: stringify!($field),
                        kind: $kind,
                        unit: $unit,
                        default: $default,
                        doc: concat!($($doc, "\n"),*),
                        range: $crate::config::section!(@range $($range)?),
                    },
                )*
            ];
        }
    };
}
pub(crate) use section;

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
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
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
pub(crate) use config_enum;

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
        /// The input buffer at the switch for a chiplet's port up to it, bytes per virtual
        /// channel, with credits as `package.link.buffer_bytes` (the ports down from the
        /// switch deliver into the chiplet, which forwards everything at once: they have
        /// none). 0: bandwidth x round trip, as there. Presets: 0 (not in the references).
        buffer_bytes: u64 = Kind::U64, unit "bytes", Some("0"), range (0, 1_099_511_627_776);
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
        /// The progress watchdog of runs with spin regions (issue 24).
        watchdog: WatchdogConfig = Kind::Section(WatchdogConfig::KEYS), unit "-", None;
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
        self.core
            .occupancy(threads_per_cta, regs_per_thread, shmem_bytes)
    }
}

impl CoreConfig {
    /// [`GpuConfig::occupancy`] of an SM of this core.
    pub fn occupancy(
        &self,
        threads_per_cta: u32,
        regs_per_thread: u32,
        shmem_bytes: u32,
    ) -> Result<Occupancy, CtaFitError> {
        occupancy::occupancy(self, threads_per_cta, regs_per_thread, shmem_bytes)
    }
}
