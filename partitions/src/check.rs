//! Whether the core model can run a trace (DESIGN.md section 5, "Opcode classes"): a trace
//! is checked against the core model, an NVIDIA-style SM with 32-lane warps running SASS,
//! not against the brand of the preset. [`check_trace`] reads only the index (kernel
//! metadata, opcode tables, counts), so it costs nothing next to the run, and is called by
//! `tessera run` before the simulation starts.
//!
//! What is rejected, each error naming the kernel (index and name), what it found and what
//! the core model expects:
//! - **Opcodes the core model has no unit for.** An opcode imported with
//!   `--allow-unknown-opcodes` (its base mnemonic is not in the SASS table of the kernel's
//!   binary version; [`tessera_traces::OpcodeInfo::unknown`]) is stored as class `other`
//!   only so that the file can be inspected and exported: nothing says which unit executes
//!   it, how long it takes, whether it touches memory or synchronizes, so timing it as
//!   `core.op_latency.other` would invent its behaviour. Every unknown opcode of the first
//!   offending kernel is listed. (Known mnemonics of class `other`, such as `PMTRIG`, are
//!   run: the tables put them there and the config times them with `core.op_latency.other`.)
//!   Likewise an opcode whose class has neither a `core.op_latency` entry nor a model of
//!   its own (memory classes, `barrier`, `fence`, `exit`); every class has one today, so
//!   this guards the tables and the config against drifting apart.
//! - **Warps narrower than the core model's.** A kernel whose CTAs hold more warps than
//!   `ceil(threads per CTA / core.warp_size)` was traced with narrower warps than the
//!   core's 32 lanes, and its warps would not map onto the SM's. (Wider warps cannot be
//!   represented: a `.tst` lane mask has 32 bits, and `core.warp_size` must be 32.)
//!
//! Limits of the config that a kernel exceeds (threads, registers or shared memory per CTA)
//! are the occupancy calculation's errors at launch ([`crate::gpu::GpuError`]), not these.

use crate::config::GpuConfig;
use tessera_traces::{KernelMeta, OpClass, TraceFile};

/// Why the core model cannot run a trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// Opcodes that were not in the architecture's SASS table at import.
    #[error(
        "kernel {index} ({kernel}): {} not in the sm_{binary_version} SASS table ({insts} \
         instruction(s); imported with --allow-unknown-opcodes as class `other`): the core \
         model (an NVIDIA-style SM, 32 lanes) has no unit for {}; expected only SASS \
         mnemonics of the opcode tables",
        list(opcodes),
        if opcodes.len() == 1 { "it" } else { "them" }
    )]
    UnknownOpcodes {
        /// Position of the kernel in the trace.
        index: usize,
        /// Its name.
        kernel: String,
        /// The kernel's `-binary version`.
        binary_version: u32,
        /// Each unknown opcode as traced, with the first PC using it (`FOO.X at PC 0x0010`).
        opcodes: Vec<String>,
        /// Instructions of the kernel with an unknown opcode.
        insts: u64,
    },
    /// An opcode whose class no unit of the core model executes.
    #[error(
        "kernel {index} ({kernel}): opcode {opcode} is of class `{class}`, which no unit of \
         the core model executes; expected a class timed by core.op_latency, a memory class, \
         barrier, fence or exit"
    )]
    NoUnit {
        /// Position of the kernel in the trace.
        index: usize,
        /// Its name.
        kernel: String,
        /// The opcode as traced.
        opcode: String,
        /// Its class name.
        class: &'static str,
    },
    /// Fewer (or more) CTAs in the trace than the kernel's grid has.
    #[error(
        "kernel {index} ({kernel}): {ctas} CTA(s) in the trace for a grid of {grid}: every CTA \
         of the grid must be present once (`tessera trace verify` names the missing ones)"
    )]
    Grid {
        index: usize,
        kernel: String,
        ctas: u64,
        grid: u64,
    },
    /// The index counts fewer warps than the CTAs' threads make.
    #[error(
        "kernel {index} ({kernel}): the index counts {warps} warps, but {ctas} CTAs of \
         {threads} threads make {listed} warps of 32 lanes: a damaged index (`tessera trace \
         verify` decodes every warp)"
    )]
    MissingWarps {
        index: usize,
        kernel: String,
        warps: u64,
        ctas: u64,
        threads: u64,
        listed: u64,
    },
    /// More warps per CTA than the core model's warps give.
    #[error(
        "kernel {index} ({kernel}): {warps} warps in {ctas} CTA(s) of {threads} threads, more \
         than the {expected} that the core model's {lanes}-lane warps give \
         (ceil({threads} / {lanes}) per CTA): the trace's warps are narrower than the core's"
    )]
    NarrowWarps {
        /// Position of the kernel in the trace.
        index: usize,
        /// Its name.
        kernel: String,
        /// Warps the trace holds.
        warps: u64,
        /// CTAs the trace holds.
        ctas: u64,
        /// Threads per CTA (the block's size).
        threads: u64,
        /// Lanes of a warp of the core model (`core.warp_size`).
        lanes: u32,
        /// Most warps the CTAs can have.
        expected: u64,
    },
}

/// `A`, `A and B`, `A, B and C` (opcodes with "is"/"are").
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [a] => format!("opcode {a} is"),
        [init @ .., last] => format!("opcodes {} and {last} are", init.join(", ")),
    }
}

/// Whether the core model has a unit for `class` (see the module documentation).
fn has_unit(cfg: &GpuConfig, class: OpClass) -> bool {
    cfg.core.op_latency.get(class).is_some()
        || class.is_memory()
        || matches!(class, OpClass::Barrier | OpClass::Fence | OpClass::Exit)
}

fn check_kernel(cfg: &GpuConfig, index: usize, k: &KernelMeta) -> Result<(), CheckError> {
    let unknown: Vec<String> = k
        .opcodes
        .iter()
        .enumerate()
        .filter(|(_, o)| o.unknown)
        .map(
            |(i, o)| match k.statics.iter().find(|s| s.opcode as usize == i) {
                Some(s) => format!("{} at PC {:#06x}", o.name, s.pc),
                None => o.name.clone(),
            },
        )
        .collect();
    if !unknown.is_empty() {
        return Err(CheckError::UnknownOpcodes {
            index,
            kernel: k.name.clone(),
            binary_version: k.binary_version,
            opcodes: unknown,
            insts: k.counts.unknown_opcode_insts,
        });
    }
    if let Some(o) = k.opcodes.iter().find(|o| !has_unit(cfg, o.class)) {
        return Err(CheckError::NoUnit {
            index,
            kernel: k.name.clone(),
            opcode: o.name.clone(),
            class: o.class.name(),
        });
    }
    if k.counts.ctas != k.grid_ctas() {
        return Err(CheckError::Grid {
            index,
            kernel: k.name.clone(),
            ctas: k.counts.ctas,
            grid: k.grid_ctas(),
        });
    }
    let lanes = cfg.core.warp_size.max(1);
    let threads = k.threads_per_cta();
    let expected = k.counts.ctas.saturating_mul(threads.div_ceil(lanes as u64));
    if k.counts.warps > expected {
        return Err(CheckError::NarrowWarps {
            index,
            kernel: k.name.clone(),
            warps: k.counts.warps,
            ctas: k.counts.ctas,
            threads,
            lanes,
            expected,
        });
    }
    // Every CTA lists all its (32-lane) warps (import and the recorder both insist): an
    // index that counts fewer was damaged, as `verify` would say after decoding it all.
    let listed = k.counts.ctas.saturating_mul(k.warps_per_cta());
    if k.counts.warps < listed {
        return Err(CheckError::MissingWarps {
            index,
            kernel: k.name.clone(),
            warps: k.counts.warps,
            ctas: k.counts.ctas,
            threads,
            listed,
        });
    }
    Ok(())
}

/// Checks every kernel of `trace` against the core model of `cfg`; the first kernel that it
/// cannot run is the error.
pub fn check_trace(cfg: &GpuConfig, trace: &TraceFile) -> Result<(), CheckError> {
    trace
        .kernels()
        .iter()
        .enumerate()
        .try_for_each(|(i, k)| check_kernel(cfg, i, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_traces::OpcodeInfo;

    fn a100() -> GpuConfig {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/a100.yaml");
        GpuConfig::load(p, &[]).expect("a100.yaml loads")
    }

    fn kernel(opcodes: Vec<OpcodeInfo>) -> KernelMeta {
        let mut k = KernelMeta::new("_Z1kv", [2, 1, 1], [48, 1, 1]);
        k.binary_version = 80;
        k.opcodes = opcodes;
        k.counts.ctas = 2;
        k.counts.warps = 4;
        k
    }

    /// Every class the opcode tables can give has a unit on every preset.
    #[test]
    fn every_class_has_a_unit() {
        let cfg = a100();
        for c in OpClass::ALL {
            assert!(has_unit(&cfg, c), "{}", c.name());
        }
    }

    #[test]
    fn unknown_opcodes_are_listed_with_their_first_pc() {
        let cfg = a100();
        let mut frob = OpcodeInfo::simple("FROB", OpClass::Other);
        frob.unknown = true;
        let mut frob_x = OpcodeInfo::simple("FROB.X", OpClass::Other);
        frob_x.unknown = true;
        let mut k = kernel(vec![OpcodeInfo::simple("MOV", OpClass::Int), frob, frob_x]);
        k.counts.unknown_opcode_insts = 3;
        let e = check_kernel(&cfg, 2, &k).unwrap_err().to_string();
        assert_eq!(
            e,
            "kernel 2 (_Z1kv): opcodes FROB and FROB.X are not in the sm_80 SASS table (3 \
             instruction(s); imported with --allow-unknown-opcodes as class `other`): the \
             core model (an NVIDIA-style SM, 32 lanes) has no unit for them; expected only \
             SASS mnemonics of the opcode tables"
        );
        // A known mnemonic of class `other` runs (timed by core.op_latency.other).
        let k = kernel(vec![OpcodeInfo::simple("PMTRIG", OpClass::Other)]);
        assert_eq!(check_kernel(&cfg, 0, &k), Ok(()));
    }

    /// 48-thread CTAs make 2 warps of 32 lanes each: 4 warps in 2 CTAs run, 6 do not.
    #[test]
    fn more_warps_than_32_lane_warps_give_is_rejected() {
        let cfg = a100();
        let mut k = kernel(vec![OpcodeInfo::simple("EXIT", OpClass::Exit)]);
        assert_eq!(check_kernel(&cfg, 0, &k), Ok(()));
        k.counts.warps = 6;
        let e = check_kernel(&cfg, 0, &k).unwrap_err();
        assert_eq!(
            e,
            CheckError::NarrowWarps {
                index: 0,
                kernel: "_Z1kv".into(),
                warps: 6,
                ctas: 2,
                threads: 48,
                lanes: 32,
                expected: 4
            }
        );
        assert!(e.to_string().contains("ceil(48 / 32) per CTA"), "{e}");
    }
}
