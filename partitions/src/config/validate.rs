//! Impossible values: each error names the key path and where the value came from.

use serde_yaml::Value;

use super::{
    ConfigError, GpuConfig, KeyInfo, Kind, L2Organization, LinkTopology, PartitionMode,
    SchedulerPolicy, CLOCK_RANGE,
};

/// Which end of the key table's ranges [`Check::ranges`] checks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// Values above the most allowed: checked before anything else, so that no other
    /// check (nor the simulation) computes with absurd values.
    Most,
    /// Values below the least allowed: checked after the other checks, whose messages say
    /// why 0 is impossible.
    Least,
}

/// `x` in `unit` in a readable form, where there is one: `100 GHz`, `1 s`, `16 MiB`.
fn human(x: u64, unit: &str) -> Option<String> {
    const E9: u64 = 1_000_000_000;
    const E6: u64 = 1_000_000;
    const PS_PER_S: u64 = super::MAX_PS;
    let scaled = |units: &[(u64, &str)]| {
        units
            .iter()
            .find(|&&(scale, _)| x >= scale && x.is_multiple_of(scale))
            .map(|&(scale, name)| format!("{} {name}", x / scale))
    };
    match unit {
        "Hz" => scaled(&[(E9, "GHz"), (E6, "MHz")]),
        "ps" => scaled(&[(PS_PER_S, "s")]),
        "bytes" => scaled(&[(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]),
        _ => None,
    }
}

/// The allowed range `(lo, hi)` of a key in `unit`, in words: `1000000 to 100000000000 Hz
/// (1 MHz to 100 GHz)`, `1 to 4096 SMs`, `exactly 32 threads`.
pub(super) fn range_text((lo, hi): (u64, u64), unit: &str) -> String {
    let u = if unit == "-" {
        String::new()
    } else {
        format!(" {unit}")
    };
    if lo == hi {
        return format!("exactly {hi}{u}");
    }
    let base = format!("{lo} to {hi}{u}");
    match (human(lo, unit), human(hi, unit)) {
        (Some(a), Some(b)) => format!("{base} ({a} to {b})"),
        (None, Some(b)) => format!("{base} (at most {b})"),
        _ => base,
    }
}

/// The message for `v` outside `range`.
pub(super) fn out_of_range(v: impl std::fmt::Display, range: (u64, u64), unit: &str) -> String {
    format!(
        "{v} is out of range: the allowed range is {}",
        range_text(range, unit)
    )
}

struct Check<'a> {
    origin: &'a dyn Fn(&str) -> String,
}

impl Check<'_> {
    fn err(&self, key: &str, msg: impl Into<String>) -> ConfigError {
        ConfigError::Key {
            origin: (self.origin)(key),
            key: key.to_string(),
            msg: msg.into(),
        }
    }

    fn ensure(&self, ok: bool, key: &str, msg: impl FnOnce() -> String) -> Result<(), ConfigError> {
        if ok {
            Ok(())
        } else {
            Err(self.err(key, msg()))
        }
    }

    fn nonzero(&self, key: &str, v: u64) -> Result<(), ConfigError> {
        self.ensure(v > 0, key, || "must be at least 1, found 0".into())
    }

    fn pow2(&self, key: &str, v: u64) -> Result<(), ConfigError> {
        self.nonzero(key, v)?;
        self.ensure(v.is_power_of_two(), key, || {
            format!("must be a power of two, found {v}")
        })
    }

    fn clock(&self, key: &str, hz: u64) -> Result<(), ConfigError> {
        self.ensure((CLOCK_RANGE.0..=CLOCK_RANGE.1).contains(&hz), key, || {
            out_of_range(hz, CLOCK_RANGE, "Hz")
        })
    }

    /// Checks one end of the range of every integer key of `value` (the section of
    /// `keys` at `prefix`), in declaration order.
    fn ranges(
        &self,
        value: &Value,
        keys: &'static [KeyInfo],
        prefix: &str,
        end: End,
    ) -> Result<(), ConfigError> {
        for k in keys {
            let path = if prefix.is_empty() {
                k.name.to_string()
            } else {
                format!("{prefix}.{}", k.name)
            };
            let Some(v) = value.get(k.name) else { continue };
            match (k.kind, k.range, v.as_u64()) {
                (Kind::Section(sub), _, _) => self.ranges(v, sub, &path, end)?,
                (_, Some((lo, hi)), Some(n)) => {
                    let bad = match end {
                        End::Most => n > hi,
                        End::Least => n < lo,
                    };
                    self.ensure(!bad, &path, || out_of_range(n, (lo, hi), k.unit))?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A cache of `size` bytes in `sets` sets of `assoc` lines of `line` bytes, `sets` a
    /// power of two.
    fn cache(&self, section: &str, size: u64, assoc: u32, line: u32) -> Result<(), ConfigError> {
        let size_key = format!("{section}.size_bytes");
        let assoc_key = format!("{section}.assoc");
        let line_key = format!("{section}.line_bytes");
        self.nonzero(&size_key, size)?;
        self.nonzero(&assoc_key, assoc as u64)?;
        self.pow2(&line_key, line as u64)?;
        let line = line as u64;
        self.ensure(size.is_multiple_of(line), &size_key, || {
            format!("{size} bytes is not a whole number of {line} B lines ({line_key})")
        })?;
        let lines = size / line;
        self.ensure(lines.is_multiple_of(assoc as u64), &assoc_key, || {
            format!("{assoc} ways do not divide the {lines} lines of {size_key} ({size} B)")
        })?;
        let sets = lines / assoc as u64;
        self.ensure(sets.is_power_of_two(), &assoc_key, || {
            format!(
                "{assoc} ways of {line} B lines make {sets} sets of {size_key} ({size} B); the \
                 set count must be a power of two (change assoc or size_bytes)"
            )
        })
    }

    fn sector(&self, section: &str, sector: u32, line: u32) -> Result<(), ConfigError> {
        let key = format!("{section}.sector_bytes");
        self.nonzero(&key, sector as u64)?;
        self.ensure(line.is_multiple_of(sector), &key, || {
            format!("{sector} must divide {section}.line_bytes ({line})")
        })?;
        self.pow2(&key, sector as u64)
    }
}

pub(super) fn validate(c: &GpuConfig, origin: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
    let v = Check { origin };
    // The key table's ranges, on the values as the table names them.
    let tree = serde_yaml::to_value(c).map_err(|e| v.err("config", e.to_string()))?;
    v.ranges(&tree, GpuConfig::KEYS, "", End::Most)?;
    checks(c, &v)?;
    v.ranges(&tree, GpuConfig::KEYS, "", End::Least)
}

/// Every check but the key table's ranges.
fn checks(c: &GpuConfig, v: &Check) -> Result<(), ConfigError> {
    v.ensure(!c.name.trim().is_empty(), "name", || {
        "must not be empty".into()
    })?;
    v.nonzero("chiplets", c.chiplets as u64)?;
    let pk = &c.package;
    v.pow2("package.home_page_bytes", pk.home_page_bytes)?;
    for (key, line) in [
        ("l1d.line_bytes", c.l1d.line_bytes),
        ("l2.line_bytes", c.l2.line_bytes),
    ] {
        v.ensure(
            pk.home_page_bytes >= line as u64,
            "package.home_page_bytes",
            || {
                format!(
                    "{} bytes is smaller than {key} ({line}): a line must have one home",
                    pk.home_page_bytes
                )
            },
        )?;
    }
    v.clock("package.link.clock_hz", pk.link.clock_hz)?;
    v.nonzero(
        "package.link.bandwidth_bytes_per_cycle",
        pk.link.bandwidth_bytes_per_cycle as u64,
    )?;
    v.ensure(pk.link.latency_ps > 0, "package.link.latency_ps", || {
        "must be at least 1 ps: the link latency bounds the lookahead of a cut between \
         chiplets, and a zero lookahead cannot make progress"
            .into()
    })?;
    if pk.topology == LinkTopology::Mesh2d {
        v.nonzero("package.mesh_cols", pk.mesh_cols as u64)?;
        v.ensure(
            c.chiplets.is_multiple_of(pk.mesh_cols),
            "package.mesh_cols",
            || {
                format!(
                    "{} columns do not divide the {} chiplets into a full grid",
                    pk.mesh_cols, c.chiplets
                )
            },
        )?;
    }

    // The system of GPUs.
    let sys = &c.system;
    v.nonzero("system.gpus", sys.gpus as u64)?;
    if sys.gpus > 1 {
        let gl = &sys.gpu_link;
        v.clock("system.gpu_link.clock_hz", gl.clock_hz)?;
        v.nonzero(
            "system.gpu_link.bandwidth_bytes_per_cycle",
            gl.bandwidth_bytes_per_cycle as u64,
        )?;
        v.ensure(
            gl.bandwidth_bytes_per_cycle
                .is_multiple_of(c.chiplets.max(1)),
            "system.gpu_link.bandwidth_bytes_per_cycle",
            || {
                format!(
                    "{} bytes per cycle cannot be split evenly over the {} chiplets' ports to \
                     the switch",
                    gl.bandwidth_bytes_per_cycle, c.chiplets
                )
            },
        )?;
        v.ensure(gl.latency_ps > 0, "system.gpu_link.latency_ps", || {
            "must be at least 1 ps when system.gpus > 1: the GPU link latency bounds the \
             lookahead of a cut between GPUs, and a zero lookahead cannot make progress"
                .into()
        })?;
        v.ensure(
            sys.host_link.completion_ps > 0,
            "system.host_link.completion_ps",
            || {
                "must be at least 1 ps when system.gpus > 1: a kernel completion crosses from \
                 a GPU's partition to the host's, and bounds the lookahead"
                    .into()
            },
        )?;
        v.ensure(
            c.package.l2 == L2Organization::MemorySide,
            "package.l2",
            || {
                "private L2s are not modelled with system.gpus > 1 (peer lines would need a \
                 caching rule); use memory_side"
                    .into()
            },
        )?;
    }

    // Partitioning.
    let p = &c.partitioning;
    v.nonzero("partitioning.sm_clusters", p.sm_clusters as u64)?;
    match p.mode {
        PartitionMode::Chiplet => {
            v.ensure(p.sm_clusters == 1, "partitioning.sm_clusters", || {
                format!(
                    "is {} but partitioning.mode is chiplet; set partitioning.mode=sm_cluster to \
                 cut each chiplet",
                    p.sm_clusters
                )
            })?
        }
        PartitionMode::SmCluster => v.ensure(
            p.sm_clusters <= c.core.sm_count,
            "partitioning.sm_clusters",
            || {
                format!(
                    "{} clusters is more than core.sm_count ({})",
                    p.sm_clusters, c.core.sm_count
                )
            },
        )?,
    }

    // Core.
    let k = &c.core;
    v.nonzero("core.sm_count", k.sm_count as u64)?;
    v.clock("core.clock_hz", k.clock_hz)?;
    v.ensure(k.warp_size == 32, "core.warp_size", || {
        format!(
            "must be 32 (the core model has 32 lanes), found {}",
            k.warp_size
        )
    })?;
    v.nonzero("core.max_threads_per_sm", k.max_threads_per_sm as u64)?;
    v.nonzero("core.max_warps_per_sm", k.max_warps_per_sm as u64)?;
    v.ensure(
        k.max_warps_per_sm as u64 * k.warp_size as u64 == k.max_threads_per_sm as u64,
        "core.max_warps_per_sm",
        || {
            format!(
                "{} warps x {} threads differs from core.max_threads_per_sm ({})",
                k.max_warps_per_sm, k.warp_size, k.max_threads_per_sm
            )
        },
    )?;
    v.nonzero("core.max_ctas_per_sm", k.max_ctas_per_sm as u64)?;
    v.nonzero("core.max_threads_per_cta", k.max_threads_per_cta as u64)?;
    v.ensure(
        k.max_threads_per_cta <= k.max_threads_per_sm,
        "core.max_threads_per_cta",
        || {
            format!(
                "{} is more than core.max_threads_per_sm ({})",
                k.max_threads_per_cta, k.max_threads_per_sm
            )
        },
    )?;
    v.nonzero("core.registers_per_sm", k.registers_per_sm as u64)?;
    v.nonzero("core.max_registers_per_cta", k.max_registers_per_cta as u64)?;
    v.ensure(
        k.max_registers_per_cta <= k.registers_per_sm,
        "core.max_registers_per_cta",
        || {
            format!(
                "{} is more than core.registers_per_sm ({})",
                k.max_registers_per_cta, k.registers_per_sm
            )
        },
    )?;
    v.nonzero(
        "core.max_registers_per_thread",
        k.max_registers_per_thread as u64,
    )?;
    v.pow2(
        "core.register_alloc_granularity",
        k.register_alloc_granularity as u64,
    )?;
    v.nonzero(
        "core.register_file_partitions",
        k.register_file_partitions as u64,
    )?;
    v.ensure(
        k.registers_per_sm
            .is_multiple_of(k.register_file_partitions),
        "core.register_file_partitions",
        || {
            format!(
                "{} does not divide core.registers_per_sm ({})",
                k.register_file_partitions, k.registers_per_sm
            )
        },
    )?;
    v.nonzero(
        "core.shared_mem_per_sm_bytes",
        k.shared_mem_per_sm_bytes as u64,
    )?;
    v.nonzero(
        "core.max_shared_mem_per_cta_bytes",
        k.max_shared_mem_per_cta_bytes as u64,
    )?;
    v.pow2(
        "core.shared_mem_alloc_granularity_bytes",
        k.shared_mem_alloc_granularity_bytes as u64,
    )?;
    v.ensure(
        k.max_shared_mem_per_cta_bytes as u64 + k.shared_mem_reserved_per_cta_bytes as u64
            <= k.shared_mem_per_sm_bytes as u64,
        "core.max_shared_mem_per_cta_bytes",
        || {
            format!(
                "{} plus core.shared_mem_reserved_per_cta_bytes ({}) is more than \
                 core.shared_mem_per_sm_bytes ({})",
                k.max_shared_mem_per_cta_bytes,
                k.shared_mem_reserved_per_cta_bytes,
                k.shared_mem_per_sm_bytes
            )
        },
    )?;
    v.nonzero("core.schedulers_per_sm", k.schedulers_per_sm as u64)?;
    v.ensure(
        k.schedulers_per_sm <= k.max_warps_per_sm,
        "core.schedulers_per_sm",
        || {
            format!(
                "{} schedulers for {} warp slots (core.max_warps_per_sm): a scheduler would \
                 have no warp",
                k.schedulers_per_sm, k.max_warps_per_sm
            )
        },
    )?;
    v.nonzero(
        "core.two_level_active_warps",
        k.two_level_active_warps as u64,
    )?;
    if k.scheduler == SchedulerPolicy::TwoLevel {
        let per_scheduler = k.max_warps_per_sm / k.schedulers_per_sm;
        v.ensure(
            k.two_level_active_warps <= per_scheduler,
            "core.two_level_active_warps",
            || {
                format!(
                    "{} is more than the {per_scheduler} warps each scheduler holds",
                    k.two_level_active_warps
                )
            },
        )?;
    }
    v.nonzero("core.register_banks", k.register_banks as u64)?;
    v.ensure(
        k.register_banks.is_multiple_of(k.schedulers_per_sm),
        "core.register_banks",
        || {
            format!(
                "{} banks do not split evenly among {} schedulers (core.schedulers_per_sm)",
                k.register_banks, k.schedulers_per_sm
            )
        },
    )?;
    v.nonzero("core.operand_collectors", k.operand_collectors as u64)?;
    v.ensure(
        k.operand_collectors.is_multiple_of(k.schedulers_per_sm),
        "core.operand_collectors",
        || {
            format!(
                "{} collectors do not split evenly among {} schedulers (core.schedulers_per_sm)",
                k.operand_collectors, k.schedulers_per_sm
            )
        },
    )?;
    let ops = &k.op_latency;
    for (class, t) in [
        ("int", &ops.int),
        ("int_mul", &ops.int_mul),
        ("fp16", &ops.fp16),
        ("fp32", &ops.fp32),
        ("fp64", &ops.fp64),
        ("sfu", &ops.sfu),
        ("tensor", &ops.tensor),
        ("convert", &ops.convert),
        ("warp_shuffle", &ops.warp_shuffle),
        ("special_reg", &ops.special_reg),
        ("uniform", &ops.uniform),
        ("branch", &ops.branch),
        ("nop", &ops.nop),
        ("other", &ops.other),
    ] {
        v.nonzero(
            &format!("core.op_latency.{class}.latency_cycles"),
            t.latency_cycles as u64,
        )?;
        v.nonzero(
            &format!("core.op_latency.{class}.initiation_cycles"),
            t.initiation_cycles as u64,
        )?;
    }
    let ic = &k.icache;
    if ic.enabled {
        v.cache("core.icache", ic.size_bytes as u64, ic.assoc, ic.line_bytes)?;
        v.nonzero(
            "core.icache.hit_latency_cycles",
            ic.hit_latency_cycles as u64,
        )?;
        v.nonzero(
            "core.icache.miss_latency_cycles",
            ic.miss_latency_cycles as u64,
        )?;
    }

    // L1D.
    let l1 = &c.l1d;
    v.cache("l1d", l1.size_bytes as u64, l1.assoc, l1.line_bytes)?;
    v.sector("l1d", l1.sector_bytes, l1.line_bytes)?;
    v.nonzero("l1d.banks", l1.banks as u64)?;
    v.nonzero("l1d.hit_latency_cycles", l1.hit_latency_cycles as u64)?;
    v.nonzero("l1d.mshrs", l1.mshrs as u64)?;
    v.nonzero("l1d.mshr_max_merge", l1.mshr_max_merge as u64)?;

    // Shared memory.
    let sm = &c.shared_mem;
    v.pow2("shared_mem.banks", sm.banks as u64)?;
    v.pow2("shared_mem.bank_bytes", sm.bank_bytes as u64)?;
    v.nonzero("shared_mem.latency_cycles", sm.latency_cycles as u64)?;

    // NoC.
    let n = &c.noc;
    v.clock("noc.clock_hz", n.clock_hz)?;
    v.nonzero("noc.latency_cycles", n.latency_cycles as u64)?;
    v.nonzero(
        "noc.bandwidth_bytes_per_cycle",
        n.bandwidth_bytes_per_cycle as u64,
    )?;

    // L2.
    let l2 = &c.l2;
    v.clock("l2.clock_hz", l2.clock_hz)?;
    v.nonzero("l2.slices", l2.slices as u64)?;
    v.nonzero("l2.size_bytes", l2.size_bytes)?;
    v.ensure(
        l2.size_bytes.is_multiple_of(l2.slices as u64),
        "l2.size_bytes",
        || {
            format!(
                "{} bytes do not split evenly among {} slices (l2.slices)",
                l2.size_bytes, l2.slices
            )
        },
    )?;
    v.cache(
        "l2",
        l2.size_bytes / l2.slices as u64,
        l2.assoc,
        l2.line_bytes,
    )
    .map_err(|e| match e {
        ConfigError::Key { origin, key, msg } if key == "l2.size_bytes" => ConfigError::Key {
            origin,
            key,
            msg: format!("per slice ({} slices): {msg}", l2.slices),
        },
        e => e,
    })?;
    v.sector("l2", l2.sector_bytes, l2.line_bytes)?;
    v.nonzero("l2.hit_latency_cycles", l2.hit_latency_cycles as u64)?;
    v.nonzero("l2.atomic_latency_cycles", l2.atomic_latency_cycles as u64)?;
    v.nonzero("l2.mshrs_per_slice", l2.mshrs_per_slice as u64)?;
    v.nonzero(
        "l2.bandwidth_bytes_per_cycle",
        l2.bandwidth_bytes_per_cycle as u64,
    )?;

    // DRAM.
    let d = &c.dram;
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

    // The LLC, used only with a private L2.
    if c.package.l2 == L2Organization::Private {
        let llc = &c.llc;
        v.nonzero("llc.size_bytes", llc.size_bytes)?;
        v.ensure(llc.line_bytes == l2.line_bytes, "llc.line_bytes", || {
            format!(
                "{} differs from l2.line_bytes ({}): an L2 line is filled from one LLC line",
                llc.line_bytes, l2.line_bytes
            )
        })?;
        // The largest valid size at most the one given (at least one set per slice), for
        // the error messages: the default suits few channel counts.
        let suggest = || {
            let set = d.channels as u64 * llc.assoc.max(1) as u64 * llc.line_bytes.max(1) as u64;
            let mut s = set;
            while s.saturating_mul(2) <= llc.size_bytes {
                s *= 2;
            }
            s
        };
        v.ensure(
            llc.size_bytes.is_multiple_of(d.channels as u64),
            "llc.size_bytes",
            || {
                format!(
                    "{} bytes do not split evenly among the {} slices (one per channel, \
                     dram.channels); e.g. {} would",
                    llc.size_bytes,
                    d.channels,
                    suggest()
                )
            },
        )?;
        v.cache(
            "llc",
            llc.size_bytes / d.channels as u64,
            llc.assoc,
            llc.line_bytes,
        )
        .map_err(|e| match e {
            ConfigError::Key { origin, key, msg } if key == "llc.size_bytes" => ConfigError::Key {
                origin,
                key,
                msg: format!(
                    "per slice ({} slices, one per channel): {msg}; e.g. llc.size_bytes: {} \
                     would do",
                    d.channels,
                    suggest()
                ),
            },
            e => e,
        })?;
        v.nonzero("llc.hit_latency_cycles", llc.hit_latency_cycles as u64)?;
        v.nonzero("llc.mshrs_per_slice", llc.mshrs_per_slice as u64)?;
    }

    // Launch path.
    let l = &c.launch;
    v.nonzero("launch.host_to_gcp_ps", l.host_to_gcp_ps)?;
    v.nonzero("launch.gcp_to_lcp_ps", l.gcp_to_lcp_ps)?;
    v.nonzero("launch.completion_ps", l.completion_ps)?;
    // Every SM, DRAM channel, command processor and link interface of the system is a unit
    // that packets address with 16 bits.
    let system_chiplets = c.chiplets as u64 * sys.gpus as u64;
    let units = system_chiplets
        * (1 + k.sm_count as u64 + d.channels as u64 + u64::from(system_chiplets > 1));
    let max_units = crate::packet::MAX_UNIT as u64;
    v.ensure(units <= max_units, "core.sm_count", || {
        format!(
            "{} SMs and {} DRAM channels (dram.channels) on each of {system_chiplets} chiplets \
             (chiplets x system.gpus) make {units} units with the command processors and \
             links, more than the {max_units} a packet can address",
            k.sm_count, d.channels
        )
    })?;
    let hl = sys.host_link.bandwidth_bytes_per_s;
    v.ensure(
        hl == 0 || hl >= 1_000_000,
        "system.host_link.bandwidth_bytes_per_s",
        || {
            format!(
                "{hl} bytes/s: must be 0 (copies take no time) or at least 1000000 (1 MB/s), \
                 or a copy would outlast any simulation"
            )
        },
    )?;
    let sm_cycle = GpuConfig::period_ps(k.clock_hz);
    v.ensure(
        l.cta_dispatch_ps >= sm_cycle,
        "launch.cta_dispatch_ps",
        || {
            format!(
                "{} ps is less than one SM cycle ({sm_cycle} ps at core.clock_hz); every port \
                 latency is at least one receiver cycle",
                l.cta_dispatch_ps
            )
        },
    )?;
    Ok(())
}
