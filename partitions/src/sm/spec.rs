//! The immutable spec of one SM core's issue stage, built once from the configuration.

use crate::config::{GpuConfig, OpTiming, SchedulerPolicy};
use tessera_traces::OpClass;

/// Timing of one opcode class on its functional unit (one unit per class per scheduler).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitTiming {
    /// Cycles from issue until a dependent instruction may issue.
    pub latency_cycles: u32,
    /// Cycles from one issue of this class on a scheduler's unit to the next (>= 1).
    pub initiation_cycles: u32,
}

impl From<&OpTiming> for UnitTiming {
    fn from(t: &OpTiming) -> Self {
        UnitTiming {
            latency_cycles: t.latency_cycles,
            initiation_cycles: t.initiation_cycles.max(1),
        }
    }
}

/// The instruction cache of one SM (`core.icache`, when enabled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IcacheSpec {
    /// Sets (`size_bytes / (assoc * line_bytes)`, a power of two after validation).
    pub sets: u32,
    pub assoc: u32,
    pub line_bytes: u32,
    /// Cycles from fetch to instruction available, on a hit and on a miss.
    pub hit_latency_cycles: u32,
    pub miss_latency_cycles: u32,
}

/// What the issue model of one SM needs to know, read from `core.*` (DESIGN.md section 5,
/// "SM core"). Plain data; never changes during a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmSpec {
    /// Sub-core warp schedulers (`core.schedulers_per_sm`); warp slot `i` belongs to
    /// scheduler `i % schedulers`.
    pub schedulers: u32,
    /// Warp scheduling policy (`core.scheduler`).
    pub policy: SchedulerPolicy,
    /// Active pool size under `two_level` (`core.two_level_active_warps`, at least 1;
    /// the rule is in the module documentation of `sm/scheduler.rs`).
    pub two_level_active_warps: u32,
    /// Resident warp slots (`core.max_warps_per_sm`): a batch with more warps is refused.
    pub warp_slots: u32,
    /// Latency and initiation interval per [`OpClass`] (indexed by discriminant).
    /// Non-memory classes come from `core.op_latency`; memory classes get
    /// [`SmSpec::mem_placeholder_latency_cycles`] with an initiation interval of 1;
    /// `barrier`, `fence` and `exit` take 1 and 1 (their waiting is modelled separately:
    /// barriers by the CTA barrier, fences by waiting for the warp's memory results).
    pub timing: [UnitTiming; OpClass::COUNT],
    /// **Placeholder, not a model**: the fixed latency every memory-class instruction gets
    /// until the memory hierarchy (LD/ST unit, L1D, NoC, L2, DRAM) exists. `from_config`
    /// sets it to `l1d.hit_latency_cycles` so that loads are not free; no result that
    /// depends on memory timing should be read from this model yet.
    pub mem_placeholder_latency_cycles: u32,
    /// Register banks per scheduler (`core.register_banks / core.schedulers_per_sm`), each
    /// serving one operand read per cycle; 0: operand collection not modelled
    /// (`core.operand_collection: false`).
    pub reg_banks_per_sched: u32,
    /// Bank of register `r` of warp slot `w`: `(r + w) % reg_banks_per_sched` when set
    /// (`core.reg_bank_use_warp_id`), else `r % reg_banks_per_sched`.
    pub reg_bank_use_warp_id: bool,
    /// Operand-collector units per scheduler (`core.operand_collectors /
    /// core.schedulers_per_sm`); 0: unlimited.
    pub collectors_per_sched: u32,
    /// Instruction fetch through the I-cache; `None`: a perfect one, fetch costs nothing
    /// (`core.icache.enabled: false`).
    pub icache: Option<IcacheSpec>,
}

impl SmSpec {
    /// The spec of every SM of `cfg` (all SMs of a chiplet are alike).
    pub fn from_config(cfg: &GpuConfig) -> SmSpec {
        let c = &cfg.core;
        let t = &c.op_latency;
        let mem = cfg.l1d.hit_latency_cycles;
        let one = UnitTiming {
            latency_cycles: 1,
            initiation_cycles: 1,
        };
        let mut timing = [one; OpClass::COUNT];
        for class in OpClass::ALL {
            timing[class as usize] = match class {
                OpClass::Int => UnitTiming::from(&t.int),
                OpClass::IntMul => UnitTiming::from(&t.int_mul),
                OpClass::Fp16 => UnitTiming::from(&t.fp16),
                OpClass::Fp32 => UnitTiming::from(&t.fp32),
                OpClass::Fp64 => UnitTiming::from(&t.fp64),
                OpClass::Sfu => UnitTiming::from(&t.sfu),
                OpClass::Tensor => UnitTiming::from(&t.tensor),
                OpClass::Convert => UnitTiming::from(&t.convert),
                OpClass::WarpShuffle => UnitTiming::from(&t.warp_shuffle),
                OpClass::SpecialReg => UnitTiming::from(&t.special_reg),
                OpClass::Uniform => UnitTiming::from(&t.uniform),
                OpClass::Branch => UnitTiming::from(&t.branch),
                OpClass::Nop => UnitTiming::from(&t.nop),
                OpClass::Other => UnitTiming::from(&t.other),
                OpClass::Barrier | OpClass::Fence | OpClass::Exit => one,
                m => {
                    debug_assert!(m.is_memory());
                    UnitTiming {
                        latency_cycles: mem,
                        initiation_cycles: 1,
                    }
                }
            };
        }
        let n_sched = c.schedulers_per_sm.max(1);
        let per_sched = |n: u32| {
            if c.operand_collection {
                (n / n_sched).max(1)
            } else {
                0
            }
        };
        let ic = &c.icache;
        let icache = ic.enabled.then(|| {
            let line = ic.line_bytes.max(1);
            let assoc = ic.assoc.max(1);
            IcacheSpec {
                sets: (ic.size_bytes / (assoc * line)).max(1),
                assoc,
                line_bytes: line,
                hit_latency_cycles: ic.hit_latency_cycles,
                miss_latency_cycles: ic.miss_latency_cycles,
            }
        });
        SmSpec {
            icache,
            reg_banks_per_sched: per_sched(c.register_banks),
            reg_bank_use_warp_id: c.reg_bank_use_warp_id,
            collectors_per_sched: per_sched(c.operand_collectors),
            schedulers: n_sched,
            policy: c.scheduler,
            two_level_active_warps: c.two_level_active_warps,
            warp_slots: c.max_warps_per_sm,
            timing,
            mem_placeholder_latency_cycles: mem,
        }
    }

    /// Timing of `class`.
    #[inline]
    pub fn timing_of(&self, class: OpClass) -> UnitTiming {
        self.timing[class as usize]
    }
}
