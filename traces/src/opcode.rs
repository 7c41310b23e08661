//! Opcode classes and the per-opcode facts the timing model needs.
//!
//! A trace stores each distinct opcode string of a kernel once (its full SASS mnemonic with
//! modifiers, e.g. `LDG.E.64.SYS`) together with what the frontend's architecture tables
//! decided about it: its [`OpClass`], access width, scope and atomic operation. The timing
//! model reads only these facts, never the mnemonic, so a trace is checked against the
//! core model (NVIDIA-style SM, 32 lanes), not against the brand of a preset
//! (DESIGN.md section 5, "Opcode classes").

use serde::Serialize;

/// What kind of hardware executes an instruction. Keep the discriminants stable: they are
/// stored in `.tst` files (format version 1).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum OpClass {
    /// Integer ALU: add, logic, shifts, compares, select, moves.
    Int = 0,
    /// Integer multiply / multiply-add (IMAD, IMUL, IDP, ...).
    IntMul,
    /// Half-precision floating point (HADD2, HFMA2, ...).
    Fp16,
    /// Single-precision floating point (FADD, FFMA, FMUL, ...).
    Fp32,
    /// Double-precision floating point (DADD, DFMA, DMUL, ...).
    Fp64,
    /// Special-function unit: transcendentals, reciprocal (MUFU), and conversions where
    /// the architecture runs them there.
    Sfu,
    /// Tensor / matrix units (HMMA, IMMA, DMMA, HGMMA, ...).
    Tensor,
    /// Type conversion (F2F, F2I, I2F, ...).
    Convert,
    /// Warp-level data movement and votes (SHFL, VOTE, MATCH, REDUX).
    WarpShuffle,
    /// Special registers and clocks (S2R, CS2R, S2UR, ...).
    SpecialReg,
    /// Uniform-datapath instructions (UIADD3, UMOV, ULDC, ...).
    Uniform,
    /// Global-memory load (LDG, and LD with a global address).
    LoadGlobal,
    /// Global-memory store (STG).
    StoreGlobal,
    /// Shared-memory load (LDS, LDSM).
    LoadShared,
    /// Shared-memory store (STS).
    StoreShared,
    /// Local-memory load (LDL).
    LoadLocal,
    /// Local-memory store (STL).
    StoreLocal,
    /// Generic-address load (LD): the space is found from the address and the kernel's
    /// shared/local windows ([`crate::KernelMeta::generic_space`]).
    LoadGeneric,
    /// Generic-address store (ST).
    StoreGeneric,
    /// Constant-cache load (LDC, ULDC is `Uniform`).
    LoadConst,
    /// Texture / surface access (TEX, TLD, SULD, SUST, ...).
    Texture,
    /// Asynchronous global-to-shared copy (LDGSTS) and bulk/TMA copies.
    AsyncCopy,
    /// Global atomic with return (ATOMG, ATOM with a global address).
    AtomicGlobal,
    /// Shared-memory atomic (ATOMS).
    AtomicShared,
    /// Generic-address atomic (ATOM).
    AtomicGeneric,
    /// Reduction without return (RED).
    Reduction,
    /// Branches, calls, returns, reconvergence (BRA, BRX, CALL, RET, BSSY, BSYNC, WARPSYNC).
    Branch,
    /// CTA or named barriers (BAR, BARRIER).
    Barrier,
    /// Memory fences (MEMBAR, FENCE, ERRBAR, CCTL).
    Fence,
    /// Thread exit (EXIT).
    Exit,
    /// Scoreboard/dependency waits, no-ops, yields (NOP, DEPBAR, YIELD, ...).
    Nop,
    /// Counted but not modeled specially (PMTRIG, debug, unknown when allowed).
    Other,
}

impl OpClass {
    /// Every class, in discriminant order.
    pub const ALL: [OpClass; 32] = [
        OpClass::Int,
        OpClass::IntMul,
        OpClass::Fp16,
        OpClass::Fp32,
        OpClass::Fp64,
        OpClass::Sfu,
        OpClass::Tensor,
        OpClass::Convert,
        OpClass::WarpShuffle,
        OpClass::SpecialReg,
        OpClass::Uniform,
        OpClass::LoadGlobal,
        OpClass::StoreGlobal,
        OpClass::LoadShared,
        OpClass::StoreShared,
        OpClass::LoadLocal,
        OpClass::StoreLocal,
        OpClass::LoadGeneric,
        OpClass::StoreGeneric,
        OpClass::LoadConst,
        OpClass::Texture,
        OpClass::AsyncCopy,
        OpClass::AtomicGlobal,
        OpClass::AtomicShared,
        OpClass::AtomicGeneric,
        OpClass::Reduction,
        OpClass::Branch,
        OpClass::Barrier,
        OpClass::Fence,
        OpClass::Exit,
        OpClass::Nop,
        OpClass::Other,
    ];

    /// Number of classes.
    pub const COUNT: usize = Self::ALL.len();

    /// Stable snake_case name, used in `trace info` and stats JSON.
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Int => "int",
            OpClass::IntMul => "int_mul",
            OpClass::Fp16 => "fp16",
            OpClass::Fp32 => "fp32",
            OpClass::Fp64 => "fp64",
            OpClass::Sfu => "sfu",
            OpClass::Tensor => "tensor",
            OpClass::Convert => "convert",
            OpClass::WarpShuffle => "warp_shuffle",
            OpClass::SpecialReg => "special_reg",
            OpClass::Uniform => "uniform",
            OpClass::LoadGlobal => "load_global",
            OpClass::StoreGlobal => "store_global",
            OpClass::LoadShared => "load_shared",
            OpClass::StoreShared => "store_shared",
            OpClass::LoadLocal => "load_local",
            OpClass::StoreLocal => "store_local",
            OpClass::LoadGeneric => "load_generic",
            OpClass::StoreGeneric => "store_generic",
            OpClass::LoadConst => "load_const",
            OpClass::Texture => "texture",
            OpClass::AsyncCopy => "async_copy",
            OpClass::AtomicGlobal => "atomic_global",
            OpClass::AtomicShared => "atomic_shared",
            OpClass::AtomicGeneric => "atomic_generic",
            OpClass::Reduction => "reduction",
            OpClass::Branch => "branch",
            OpClass::Barrier => "barrier",
            OpClass::Fence => "fence",
            OpClass::Exit => "exit",
            OpClass::Nop => "nop",
            OpClass::Other => "other",
        }
    }

    /// The class stored under discriminant `v`, if any.
    pub fn from_u8(v: u8) -> Option<OpClass> {
        Self::ALL.get(v as usize).copied()
    }

    /// True for classes that carry per-lane memory addresses in a trace.
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            OpClass::LoadGlobal
                | OpClass::StoreGlobal
                | OpClass::LoadShared
                | OpClass::StoreShared
                | OpClass::LoadLocal
                | OpClass::StoreLocal
                | OpClass::LoadGeneric
                | OpClass::StoreGeneric
                | OpClass::LoadConst
                | OpClass::Texture
                | OpClass::AsyncCopy
                | OpClass::AtomicGlobal
                | OpClass::AtomicShared
                | OpClass::AtomicGeneric
                | OpClass::Reduction
        )
    }
}

/// Memory scope of an atomic, fence or strong access, from modifiers such as `.CTA`,
/// `.GPU`/`.GL`, `.SYS`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum Scope {
    /// No scope modifier.
    #[default]
    None = 0,
    /// Thread block (`.CTA`).
    Cta,
    /// Whole device (`.GPU`, `.GL`).
    Gpu,
    /// Whole system (`.SYS`).
    Sys,
}

/// Operation of an atomic or reduction, from its modifiers.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum AtomicOp {
    /// Not an atomic, or an operation the tables do not name.
    #[default]
    None = 0,
    Add,
    Min,
    Max,
    Inc,
    Dec,
    And,
    Or,
    Xor,
    Exch,
    Cas,
}

/// Where a memory access goes, after generic addresses are resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MemSpace {
    Global,
    Shared,
    Local,
}

/// Everything a trace records about one distinct opcode string of a kernel.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, Serialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct OpcodeInfo {
    /// Full mnemonic as traced, modifiers included (`LDG.E.128.CONSTANT.SYS`).
    pub name: String,
    /// Class decided by the frontend's architecture table for the base mnemonic.
    pub class: OpClass,
    /// Access width in bytes from the modifiers (`.64` = 8, `.128` = 16, `.U8` = 1);
    /// 4 when no width modifier is present (the Accel-Sim convention).
    pub width_bytes: u8,
    /// Registers covered by the destination operand: 1, 2 (`.64`, `.WIDE`) or 4 (`.128`).
    pub dst_regs: u8,
    /// Scope from the modifiers.
    pub scope: Scope,
    /// Atomic operation from the modifiers.
    pub atomic: AtomicOp,
    /// True when the base mnemonic was not in the architecture's table and the import ran
    /// with `--allow-unknown-opcodes` (the class is then [`OpClass::Other`]).
    pub unknown: bool,
}
