//! Built-in workloads and calibration probes, recorded with [`crate::record`].
//!
//! Each workload computes its real result on the functional executor and checks it
//! against a plain Rust reference before the trace is finished, so a generated trace's
//! control flow and addresses are those of a correct run. Sizes are parameters with small
//! defaults (`tessera trace gen --list`).

use crate::record::{RecordError, RecordStats, Recorder};
use std::collections::BTreeMap;
use std::path::Path;

mod atm;
mod barriers;
mod bfs;
mod gemm;
mod halo;
mod histogram;
mod ht;
mod nw;
mod peer_stream;
mod probes;
mod reduce;
mod simt_lock;
mod spinlock;
mod stencil2d;
mod stream;
#[cfg(test)]
mod sync_replay;
mod vectoradd;
mod warp_specialized;
mod work_queue;

/// One parameter of a workload.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

/// A built-in workload.
#[derive(Debug)]
pub struct WorkloadSpec {
    pub name: &'static str,
    pub help: &'static str,
    pub params: &'static [ParamSpec],
    /// Records the workload; returns a one-line summary of the checked result.
    pub run: fn(&Params, &mut Recorder) -> Result<String, GenError>,
}

/// Every workload, in `--list` order.
pub fn all() -> Vec<&'static WorkloadSpec> {
    vec![
        &vectoradd::SPEC,
        &stream::SPEC,
        &gemm::SPEC,
        &stencil2d::SPEC,
        &histogram::SPEC,
        &bfs::SPEC,
        &reduce::SPEC,
        &spinlock::SPEC,
        &ht::SPEC,
        &atm::SPEC,
        &barriers::FLAG_BARRIER,
        &barriers::ATOMIC_BARRIER,
        &barriers::SENSE_BARRIER,
        &nw::SPEC,
        &simt_lock::SPEC,
        &warp_specialized::SPEC,
        &work_queue::SPEC,
        &peer_stream::SPEC,
        &halo::SPEC,
        &probes::POINTER_CHASE,
        &probes::FMA_CHAIN,
        &probes::FMA_STREAMS,
        &probes::OCCUPANCY,
        &probes::BARRIER,
        &probes::LAUNCH_GAP,
        &probes::L2_STREAM,
    ]
}

/// Looks a workload up by name.
pub fn find(name: &str) -> Option<&'static WorkloadSpec> {
    all().into_iter().find(|w| w.name == name)
}

/// A generation failure.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("{0}")]
    Params(String),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("{workload}: functional result differs from the reference: {detail}")]
    Mismatch {
        workload: &'static str,
        detail: String,
    },
}

/// Validated parameter values of one workload (defaults filled in).
#[derive(Clone, Debug)]
pub struct Params {
    workload: &'static WorkloadSpec,
    values: BTreeMap<&'static str, String>,
}

impl Params {
    /// Parses `key=value` pairs against `w`'s parameters; unknown names are an error that
    /// lists the valid ones.
    pub fn parse(w: &'static WorkloadSpec, given: &[(String, String)]) -> Result<Params, GenError> {
        let mut values: BTreeMap<&'static str, String> = w
            .params
            .iter()
            .map(|p| (p.name, p.default.to_string()))
            .collect();
        for (k, v) in given {
            let Some(p) = w.params.iter().find(|p| p.name == k) else {
                return Err(GenError::Params(format!(
                    "workload {} has no parameter '{k}'; valid parameters: {}",
                    w.name,
                    describe_params(w)
                )));
            };
            values.insert(p.name, v.clone());
        }
        Ok(Params {
            workload: w,
            values,
        })
    }

    fn bad(&self, name: &str, msg: &str) -> GenError {
        GenError::Params(format!(
            "workload {}: parameter {name}={}: {msg}; valid parameters: {}",
            self.workload.name,
            self.values.get(name).map_or("", |s| s.as_str()),
            describe_params(self.workload)
        ))
    }

    /// A positive integer parameter.
    pub fn u32(&self, name: &str) -> Result<u32, GenError> {
        let v = self
            .values
            .get(name)
            .ok_or_else(|| self.bad(name, "not a parameter of this workload"))?;
        let n: u32 = v
            .trim()
            .parse()
            .map_err(|_| self.bad(name, "expected a whole number"))?;
        if n == 0 {
            return Err(self.bad(name, "must be at least 1"));
        }
        Ok(n)
    }

    /// A non-negative integer parameter (seeds, offsets).
    pub fn u64_any(&self, name: &str) -> Result<u64, GenError> {
        let v = self
            .values
            .get(name)
            .ok_or_else(|| self.bad(name, "not a parameter of this workload"))?;
        v.trim()
            .parse()
            .map_err(|_| self.bad(name, "expected a whole number"))
    }

    /// A free-form text parameter (lists, names).
    pub fn str(&self, name: &str) -> Result<&str, GenError> {
        self.values
            .get(name)
            .map(|v| v.trim())
            .ok_or_else(|| self.bad(name, "not a parameter of this workload"))
    }

    /// A parameter that must be one of `choices`.
    pub fn choice(&self, name: &str, choices: &[&'static str]) -> Result<&'static str, GenError> {
        let v = self
            .values
            .get(name)
            .ok_or_else(|| self.bad(name, "not a parameter of this workload"))?;
        choices
            .iter()
            .find(|c| **c == v.trim())
            .copied()
            .ok_or_else(|| self.bad(name, &format!("expected one of {}", choices.join(", "))))
    }

    /// An error about a combination of parameters (a gemm that does not tile).
    pub fn invalid(&self, msg: &str) -> GenError {
        GenError::Params(format!(
            "workload {}: {msg}; valid parameters: {}",
            self.workload.name,
            describe_params(self.workload)
        ))
    }

    /// `name k=v k=v` with every value, stored in the trace as the generator (a
    /// parameter of [`LATE_PARAMS`] at its default left out).
    pub fn describe(&self) -> String {
        let mut s = self.workload.name.to_string();
        for (k, v) in &self.values {
            let late = LATE_PARAMS.contains(&(self.workload.name, k));
            if late
                && self
                    .workload
                    .params
                    .iter()
                    .any(|p| p.name == *k && p.default == v)
            {
                continue;
            }
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }
}

/// Parameters added to a workload after traces of it were published (corpus goldens
/// keep their generator text and checksum): left out of the generator text at their
/// default, so that the default recording stays byte for byte what it was.
pub const LATE_PARAMS: &[(&str, &str)] = &[
    ("warp_specialized", "sync"),
    ("flag_barrier", "weak"),
    ("atomic_barrier", "weak"),
    ("sense_barrier", "weak"),
];

/// `name (default d), ...` for messages.
pub fn describe_params(w: &WorkloadSpec) -> String {
    if w.params.is_empty() {
        return "(none)".into();
    }
    w.params
        .iter()
        .map(|p| format!("{} (default {})", p.name, p.default))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `generate` did.
#[derive(Clone, Debug)]
pub struct GenReport {
    pub generator: String,
    pub summary: String,
    pub stats: RecordStats,
}

/// Records workload `name` with `params` for binary version `arch` into `out`.
pub fn generate(
    name: &str,
    params: &[(String, String)],
    arch: u32,
    out: &Path,
) -> Result<GenReport, GenError> {
    let w = find(name).ok_or_else(|| {
        GenError::Params(format!(
            "unknown workload '{name}'; built-in workloads: {}",
            all().iter().map(|w| w.name).collect::<Vec<_>>().join(", ")
        ))
    })?;
    let p = Params::parse(w, params)?;
    let generator = p.describe();
    let mut rec = Recorder::create(out, arch, &generator)?;
    let summary = (w.run)(&p, &mut rec)?;
    let stats = rec.stats.clone();
    rec.finish()?;
    Ok(GenReport {
        generator,
        summary,
        stats,
    })
}

/// Fails with a mismatch when `got` differs from `want` (first differing index shown).
pub fn check_eq<T: PartialEq + std::fmt::Debug>(
    workload: &'static str,
    what: &str,
    got: &[T],
    want: &[T],
) -> Result<(), GenError> {
    check_eq_from(workload, what, 0, got, want)
}

/// [`check_eq`] of a piece of an array that starts at element `first` (the index shown
/// is the array's).
pub fn check_eq_from<T: PartialEq + std::fmt::Debug>(
    workload: &'static str,
    what: &str,
    first: u64,
    got: &[T],
    want: &[T],
) -> Result<(), GenError> {
    if got.len() != want.len() {
        return Err(GenError::Mismatch {
            workload,
            detail: format!("{what}: {} elements, expected {}", got.len(), want.len()),
        });
    }
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        return Err(GenError::Mismatch {
            workload,
            detail: format!(
                "{what}[{}] = {:?}, expected {:?}",
                first + i as u64,
                got[i],
                want[i]
            ),
        });
    }
    Ok(())
}

/// Per-CTA footprints of an array that CTA `i` reads or writes as elements
/// `[i * per_cta, (i + 1) * per_cta)` (clipped to the array): the ranges of its
/// [`tessera_traces::ArrayAnnotation`].
pub fn block_ranges<T: crate::record::Elem>(
    buf: &crate::record::Buffer<T>,
    per_cta: u32,
    ctas: u32,
) -> Vec<tessera_traces::CtaRange> {
    let bytes = T::BYTES as u64;
    (0..ctas)
        .map(|c| {
            let lo = (c as u64 * per_cta as u64).min(buf.len);
            let hi = (lo + per_cta as u64).min(buf.len);
            tessera_traces::CtaRange {
                first_cta: c,
                n_ctas: 1,
                lo: buf.base + lo * bytes,
                hi: buf.base + hi * bytes,
            }
        })
        .collect()
}

/// A small deterministic generator (SplitMix64) for workload inputs: the same seed gives
/// the same inputs on every machine.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `[0, 1)`, with 24 bits (exact in f32).
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Helpers shared by the workloads' tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{generate, GenError};

    /// `key=value` pairs as [`generate`] takes them.
    pub fn params(kv: &[(&str, &str)]) -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The message of the parameter error `generate(workload, kv)` must fail with; also
    /// checks that nothing was left under the requested output name.
    pub fn param_error(workload: &str, kv: &[(&str, &str)]) -> String {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("x.tst");
        let m = match generate(workload, &params(kv), 80, &path) {
            Err(GenError::Params(m)) => m,
            other => panic!("{workload} {kv:?}: expected a parameter error, got {other:?}"),
        };
        assert!(!path.exists(), "{workload} {kv:?} left its output");
        m
    }
}
