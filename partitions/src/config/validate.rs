//! Impossible values: each error names the key path and where the value came from.

use serde_norway::Value;

use super::{ConfigError, GpuConfig, KeyInfo, Kind, L2Organization, PartitionMode, CLOCK_RANGE};
use crate::mem::link::LinkTopology;
use crate::packet::largest_packet_bytes;

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

/// Where values came from, for the errors; the checks of one section alone are methods
/// of the section, beside its unit (`L1dConfig::check`, ...).
pub(crate) struct Check<'a> {
    origin: &'a dyn Fn(&str) -> String,
}

impl Check<'_> {
    pub(crate) fn err(&self, key: &str, msg: impl Into<String>) -> ConfigError {
        ConfigError::Key {
            origin: (self.origin)(key),
            key: key.to_string(),
            msg: msg.into(),
        }
    }

    pub(crate) fn ensure(
        &self,
        ok: bool,
        key: &str,
        msg: impl FnOnce() -> String,
    ) -> Result<(), ConfigError> {
        if ok {
            Ok(())
        } else {
            Err(self.err(key, msg()))
        }
    }

    pub(crate) fn nonzero(&self, key: &str, v: u64) -> Result<(), ConfigError> {
        self.ensure(v > 0, key, || "must be at least 1, found 0".into())
    }

    pub(crate) fn pow2(&self, key: &str, v: u64) -> Result<(), ConfigError> {
        self.nonzero(key, v)?;
        self.ensure(v.is_power_of_two(), key, || {
            format!("must be a power of two, found {v}")
        })
    }

    pub(crate) fn clock(&self, key: &str, hz: u64) -> Result<(), ConfigError> {
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
    pub(crate) fn cache(
        &self,
        section: &str,
        size: u64,
        assoc: u32,
        line: u32,
    ) -> Result<(), ConfigError> {
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

    pub(crate) fn sector(&self, section: &str, sector: u32, line: u32) -> Result<(), ConfigError> {
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
    let tree = serde_norway::to_value(c).map_err(|e| v.err("config", e.to_string()))?;
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
    // A crossbar input smaller than the largest packet could never take it.
    if c.noc.model == crate::mem::noc::NocModel::Crossbar && c.noc.input_buffer_flits > 0 {
        let flit = c.noc.bandwidth_bytes_per_cycle.max(1) as u64;
        let need = largest_packet_bytes(c.l2.line_bytes as u64).div_ceil(flit);
        v.ensure(
            c.noc.input_buffer_flits as u64 >= need,
            "noc.input_buffer_flits",
            || {
                format!(
                    "{} flits cannot hold the largest request ({need} flits of {flit} bytes: \
                     an 8-byte header and an l2.line_bytes line of {}), which could then \
                     never be sent; use at least {need}, or 0 for no credits",
                    c.noc.input_buffer_flits, c.l2.line_bytes
                )
            },
        )?;
        v.ensure(c.l2.write_acks, "noc.input_buffer_flits", || {
            "credits at the crossbar need l2.write_acks: true (a store waiting for credit \
             learns that it is done only from its acknowledgement); set \
             noc.input_buffer_flits: 0 or turn the acknowledgements on"
                .into()
        })?;
    }
    // A buffer smaller than the largest packet could never take it: the sender would wait
    // for credit forever.
    let largest = |overhead: u32| largest_packet_bytes(c.l2.line_bytes as u64) + overhead as u64;
    let fits = |key: &str, buffer: u64, overhead: u32| {
        v.ensure(buffer == 0 || buffer >= largest(overhead), key, || {
            format!(
                "{buffer} bytes cannot hold the largest packet on the link ({} bytes: an \
                 8-byte header, an l2.line_bytes line of {} and {overhead} bytes of \
                 overhead), which could then never be sent; use at least that, or 0 for \
                 bandwidth x round trip",
                largest(overhead),
                c.l2.line_bytes
            )
        })
    };
    if c.chiplets > 1 {
        fits(
            "package.link.buffer_bytes",
            pk.link.buffer_bytes,
            pk.link.packet_overhead_bytes,
        )?;
    }
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
        fits(
            "system.gpu_link.buffer_bytes",
            gl.buffer_bytes,
            gl.packet_overhead_bytes,
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
    k.check(v)?;

    c.l1d.check(v)?;
    c.shared_mem.check(v)?;
    c.noc.check(v)?;
    let l2 = &c.l2;
    l2.check(v)?;
    let d = &c.dram;
    d.check(v, l2)?;

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
