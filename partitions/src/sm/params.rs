//! The `core` config section (with its opcode timing table) and the immutable parameters
//! of one SM core's issue stage made from it ([`SmParams`]).

use super::icache::IcacheConfig;
use super::scheduler::SchedulerPolicy;
use crate::config::GpuConfig;
use crate::config::{section, Check, ConfigError, Kind, CLOCK_RANGE, MAX_CYCLES, MAX_SMS};
use tessera_traces::OpClass;

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

impl CoreConfig {
    /// Rejects impossible values of this section alone (module `config::validate` checks
    /// the rest).
    pub(crate) fn check(&self, v: &Check) -> Result<(), ConfigError> {
        let k = self;
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
        Ok(())
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
pub struct IcacheParams {
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
pub struct SmParams {
    /// Record lock holds for the end-of-run overlap check
    /// (`watchdog.check_lock_holders`).
    pub check_lock_holders: bool,
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
    /// [`SmParams::mem_placeholder_latency_cycles`] with an initiation interval of 1;
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
    pub icache: Option<IcacheParams>,
}

impl SmParams {
    /// The parameters of every SM of `cfg` (all SMs of a chiplet are alike).
    pub fn from_config(cfg: &GpuConfig) -> SmParams {
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
            IcacheParams {
                sets: (ic.size_bytes / (assoc * line)).max(1),
                assoc,
                line_bytes: line,
                hit_latency_cycles: ic.hit_latency_cycles,
                miss_latency_cycles: ic.miss_latency_cycles,
            }
        });
        SmParams {
            check_lock_holders: cfg.watchdog.check_lock_holders,
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
