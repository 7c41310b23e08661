//! The SASS base-mnemonic tables, one row per mnemonic with the families that have it.
//!
//! The per-family tables of [`super`] are built from [`ENTRIES`]: a mnemonic belongs to a
//! family's table when that family's bit is set in the row's mask. Rows are grouped the way
//! NVIDIA's "CUDA Binary Utilities" instruction-set reference groups them (floating point,
//! integer, conversion, movement, predicate, load/store, uniform datapath, TMA, texture,
//! surface, control, miscellaneous), with the families taken from that reference's per-family
//! lists (Kepler; Maxwell and Pascal; Volta; Turing; Ampere and Ada; Hopper). A few rows that
//! the reference omits but real traces contain (legacy SIMD video ops, `TEXDEPBAR`,
//! `GETLMEMBASE`-style misc ops) follow the opcode maps of Accel-Sim's trace-driven front end.
//!
//! The class of a mnemonic is the same in every family that has it.

use tessera_traces::OpClass;
use tessera_traces::OpClass::*;

/// One bit per [`super::ArchFamily`], in family order.
pub(crate) const KEPLER: u8 = 1 << 0;
pub(crate) const MAXWELL: u8 = 1 << 1;
pub(crate) const PASCAL: u8 = 1 << 2;
pub(crate) const VOLTA: u8 = 1 << 3;
pub(crate) const TURING: u8 = 1 << 4;
pub(crate) const AMPERE: u8 = 1 << 5;
pub(crate) const ADA: u8 = 1 << 6;
pub(crate) const HOPPER: u8 = 1 << 7;

/// Every family.
const ALL: u8 = 0xff;
/// Kepler, Maxwell, Pascal: the pre-Volta (SSY/PBK reconvergence, no uniform datapath) ISAs.
const PRE_VOLTA: u8 = KEPLER | MAXWELL | PASCAL;
/// Maxwell and Pascal share one instruction-set list.
const MAXWELL_PASCAL: u8 = MAXWELL | PASCAL;
const MAXWELL_PLUS: u8 = !KEPLER;
const VOLTA_PLUS: u8 = VOLTA | TURING | AMPERE | ADA | HOPPER;
const TURING_PLUS: u8 = TURING | AMPERE | ADA | HOPPER;
/// Ampere and Ada share one instruction-set list; Hopper is a superset.
const AMPERE_PLUS: u8 = AMPERE | ADA | HOPPER;

/// One table row: base mnemonic, class, families that have it.
pub(crate) struct Entry {
    pub name: &'static str,
    pub class: OpClass,
    pub families: u8,
}

const fn e(name: &'static str, class: OpClass, families: u8) -> Entry {
    Entry {
        name,
        class,
        families,
    }
}

/// All rows. A mnemonic may appear in more than one row only with disjoint family masks
/// (checked by a unit test).
pub(crate) static ENTRIES: &[Entry] = &[
    // ---- FP32 ----
    e("FADD", Fp32, ALL),
    e("FADD32I", Fp32, ALL),
    e("FFMA", Fp32, ALL),
    e("FFMA32I", Fp32, ALL),
    e("FMUL", Fp32, ALL),
    e("FMUL32I", Fp32, ALL),
    e("FMNMX", Fp32, ALL),
    e("FSET", Fp32, ALL),
    e("FSETP", Fp32, ALL),
    e("FCHK", Fp32, ALL),
    e("FCMP", Fp32, PRE_VOLTA),
    e("FSWZ", Fp32, KEPLER),
    e("FSWZADD", Fp32, MAXWELL_PLUS),
    e("FSEL", Fp32, VOLTA_PLUS),
    // ---- special function unit ----
    e("MUFU", Sfu, ALL),
    e("RRO", Sfu, PRE_VOLTA),
    // ---- FP64 ----
    e("DADD", Fp64, ALL),
    e("DFMA", Fp64, ALL),
    e("DMUL", Fp64, ALL),
    e("DSETP", Fp64, ALL),
    e("DMNMX", Fp64, PRE_VOLTA),
    e("DSET", Fp64, PRE_VOLTA),
    // ---- FP16 (sm_53 and later; the Maxwell/Pascal list carries them) ----
    e("HADD2", Fp16, MAXWELL_PLUS),
    e("HFMA2", Fp16, MAXWELL_PLUS),
    e("HMUL2", Fp16, MAXWELL_PLUS),
    e("HSET2", Fp16, MAXWELL_PLUS),
    e("HSETP2", Fp16, MAXWELL_PLUS),
    e("HADD2_32I", Fp16, VOLTA_PLUS),
    e("HFMA2_32I", Fp16, VOLTA_PLUS),
    e("HMUL2_32I", Fp16, VOLTA_PLUS),
    e("HMNMX2", Fp16, AMPERE_PLUS),
    e("VHMNMX", Fp16, HOPPER),
    // ---- tensor cores ----
    e("HMMA", Tensor, VOLTA_PLUS),
    e("IMMA", Tensor, TURING_PLUS),
    e("BMMA", Tensor, TURING_PLUS),
    e("DMMA", Tensor, AMPERE_PLUS),
    e("HGMMA", Tensor, HOPPER),
    e("IGMMA", Tensor, HOPPER),
    e("QGMMA", Tensor, HOPPER),
    e("BGMMA", Tensor, HOPPER),
    // ---- integer ----
    e("IADD", Int, ALL),
    e("IADD32I", Int, ALL),
    e("IADD3", Int, MAXWELL_PLUS),
    e("ISUB", Int, KEPLER),
    e("ISCADD", Int, ALL),
    e("ISCADD32I", Int, ALL),
    e("ISAD", Int, KEPLER),
    e("IMNMX", Int, ALL),
    e("ISETP", Int, ALL),
    e("ISET", Int, PRE_VOLTA),
    e("ICMP", Int, PRE_VOLTA),
    e("LOP", Int, ALL),
    e("LOP32I", Int, ALL),
    e("LOP3", Int, MAXWELL_PLUS),
    e("SHL", Int, ALL),
    e("SHR", Int, ALL),
    e("SHF", Int, ALL),
    e("FLO", Int, ALL),
    e("POPC", Int, ALL),
    e("BFE", Int, PRE_VOLTA),
    e("BFI", Int, PRE_VOLTA),
    e("LEA", Int, MAXWELL_PLUS),
    e("BMSK", Int, VOLTA_PLUS),
    e("BREV", Int, VOLTA_PLUS),
    e("IABS", Int, VOLTA_PLUS),
    e("SGXT", Int, VOLTA_PLUS),
    e("VABSDIFF", Int, ALL),
    e("VABSDIFF4", Int, ALL),
    e("VADD", Int, PRE_VOLTA),
    e("VMNMX", Int, PRE_VOLTA),
    e("VSET", Int, PRE_VOLTA),
    e("VSETP", Int, MAXWELL_PASCAL),
    e("VSHL", Int, PRE_VOLTA),
    e("VSHR", Int, PRE_VOLTA),
    e("VIADD", Int, HOPPER),
    e("VIADDMNMX", Int, HOPPER),
    e("VIMNMX", Int, HOPPER),
    e("VIMNMX3", Int, HOPPER),
    // Kepler surface address arithmetic (SULDGA/SUSTGA take the computed address).
    e("SUCLAMP", Int, KEPLER),
    e("SUBFM", Int, KEPLER),
    e("SUEAU", Int, KEPLER),
    // Query space of a generic address (a predicate result; no memory access).
    e("QSPC", Int, VOLTA_PLUS),
    // ---- integer multiply ----
    e("IMAD", IntMul, ALL),
    e("IMUL", IntMul, ALL),
    e("IMUL32I", IntMul, ALL),
    e("IMADSP", IntMul, PRE_VOLTA),
    e("VMAD", IntMul, PRE_VOLTA),
    e("XMAD", IntMul, MAXWELL_PASCAL),
    e("IDP", IntMul, PASCAL | VOLTA_PLUS),
    e("IDP4A", IntMul, PASCAL | VOLTA_PLUS),
    // ---- conversion ----
    e("F2F", Convert, ALL),
    e("F2I", Convert, ALL),
    e("I2F", Convert, ALL),
    e("I2I", Convert, ALL),
    e("I2IP", Convert, VOLTA_PLUS),
    e("FRND", Convert, VOLTA_PLUS),
    e("F2FP", Convert, AMPERE_PLUS),
    e("I2FP", Convert, AMPERE_PLUS),
    e("F2IP", Convert, AMPERE_PLUS),
    // ---- movement ----
    e("MOV", Int, ALL),
    e("MOV32I", Int, ALL),
    e("SEL", Int, ALL),
    e("PRMT", Int, ALL),
    // ---- warp-level data movement and votes ----
    e("SHFL", WarpShuffle, ALL),
    e("VOTE", WarpShuffle, ALL),
    e("MATCH", WarpShuffle, VOLTA_PLUS),
    e("MOVM", WarpShuffle, TURING_PLUS),
    e("VOTEU", WarpShuffle, TURING_PLUS),
    e("REDUX", WarpShuffle, AMPERE_PLUS),
    e("ELECT", WarpShuffle, HOPPER),
    // ---- predicate / condition code ----
    e("P2R", Int, ALL),
    e("R2P", Int, ALL),
    e("PSETP", Int, ALL),
    e("CSET", Int, PRE_VOLTA),
    e("CSETP", Int, PRE_VOLTA),
    e("PSET", Int, PRE_VOLTA),
    e("PLOP3", Int, VOLTA_PLUS),
    // ---- load / store ----
    e("LD", LoadGeneric, ALL),
    e("ST", StoreGeneric, ALL),
    e("LDG", LoadGlobal, ALL),
    e("STG", StoreGlobal, MAXWELL_PLUS),
    e("LDGMC", LoadGlobal, HOPPER),
    e("LDL", LoadLocal, ALL),
    e("STL", StoreLocal, ALL),
    e("LDS", LoadShared, ALL),
    e("STS", StoreShared, ALL),
    e("LDSLK", LoadShared, KEPLER),
    e("STSCUL", StoreShared, KEPLER),
    e("LDSM", LoadShared, TURING_PLUS),
    e("STSM", StoreShared, HOPPER),
    e("STAS", StoreShared, HOPPER),
    e("LDC", LoadConst, ALL),
    e("LDGSTS", AsyncCopy, AMPERE_PLUS),
    e("LDGDEPBAR", Nop, AMPERE_PLUS),
    // ---- atomics and reductions ----
    e("ATOM", AtomicGeneric, ALL),
    e("ATOMS", AtomicShared, MAXWELL_PLUS),
    e("ATOMG", AtomicGlobal, VOLTA_PLUS),
    e("RED", Reduction, ALL),
    e("REDG", Reduction, HOPPER),
    e("REDAS", Reduction, HOPPER),
    // ---- fences and cache control ----
    e("MEMBAR", Fence, ALL),
    e("CCTL", Fence, ALL),
    e("CCTLL", Fence, ALL),
    e("CCTLT", Fence, MAXWELL_PLUS),
    e("ERRBAR", Fence, VOLTA_PLUS),
    e("FENCE", Fence, HOPPER),
    e("CGAERRBAR", Fence, HOPPER),
    // ---- async-transaction barriers (mbarrier objects in shared memory) ----
    e("ARRIVES", Other, AMPERE_PLUS),
    e("SYNCS", Other, HOPPER),
    // ---- uniform datapath ----
    e("R2UR", Uniform, TURING_PLUS),
    e("S2UR", SpecialReg, TURING_PLUS),
    e("UBMSK", Uniform, TURING_PLUS),
    e("UBREV", Uniform, TURING_PLUS),
    e("UCLEA", Uniform, TURING_PLUS),
    e("UFLO", Uniform, TURING_PLUS),
    e("UIADD3", Uniform, TURING_PLUS),
    e("UIMAD", Uniform, TURING_PLUS),
    e("UISETP", Uniform, TURING_PLUS),
    e("ULDC", Uniform, TURING_PLUS),
    e("ULEA", Uniform, TURING_PLUS),
    e("ULOP", Uniform, TURING_PLUS),
    e("ULOP3", Uniform, TURING_PLUS),
    e("ULOP32I", Uniform, TURING_PLUS),
    e("UMOV", Uniform, TURING_PLUS),
    e("UP2UR", Uniform, TURING_PLUS),
    e("UPLOP3", Uniform, TURING_PLUS),
    e("UPOPC", Uniform, TURING_PLUS),
    e("UPRMT", Uniform, TURING_PLUS),
    e("UPSETP", Uniform, TURING_PLUS),
    e("UR2UP", Uniform, TURING_PLUS),
    e("USEL", Uniform, TURING_PLUS),
    e("USGXT", Uniform, TURING_PLUS),
    e("USHF", Uniform, TURING_PLUS),
    e("USHL", Uniform, TURING_PLUS),
    e("USHR", Uniform, TURING_PLUS),
    e("UF2FP", Uniform, AMPERE_PLUS),
    e("ULEPC", Uniform, HOPPER),
    e("USETMAXREG", Uniform, HOPPER),
    e("UCGABAR_ARV", Barrier, HOPPER),
    e("UCGABAR_WAIT", Barrier, HOPPER),
    // ---- tensor memory access (TMA) and bulk copies ----
    e("UBLKCP", AsyncCopy, HOPPER),
    e("UBLKPF", AsyncCopy, HOPPER),
    e("UBLKRED", AsyncCopy, HOPPER),
    e("UTMALDG", AsyncCopy, HOPPER),
    e("UTMAPF", AsyncCopy, HOPPER),
    e("UTMAREDG", AsyncCopy, HOPPER),
    e("UTMASTG", AsyncCopy, HOPPER),
    e("UTMACCTL", Fence, HOPPER),
    e("UTMACMDFLUSH", Nop, HOPPER),
    // ---- texture ----
    e("TEX", Texture, ALL),
    e("TLD", Texture, ALL),
    e("TLD4", Texture, ALL),
    e("TXQ", Texture, ALL),
    e("TMML", Texture, MAXWELL_PLUS),
    e("TXD", Texture, MAXWELL_PLUS),
    e("TEXS", Texture, MAXWELL_PASCAL),
    e("TLDS", Texture, MAXWELL_PASCAL),
    e("TLD4S", Texture, MAXWELL_PASCAL),
    // ---- surface ----
    e("SULDGA", Texture, KEPLER),
    e("SUSTGA", Texture, KEPLER),
    e("SULD", Texture, MAXWELL_PLUS),
    e("SUST", Texture, MAXWELL_PLUS),
    e("SUATOM", Texture, MAXWELL_PLUS),
    e("SURED", Texture, MAXWELL_PLUS),
    e("SUQUERY", Texture, VOLTA_PLUS),
    // ---- control ----
    e("BRA", Branch, ALL),
    e("BRX", Branch, ALL),
    e("JMP", Branch, ALL),
    e("JMX", Branch, ALL),
    e("RET", Branch, ALL),
    e("BPT", Branch, ALL),
    e("CAL", Branch, PRE_VOLTA),
    e("JCAL", Branch, PRE_VOLTA),
    e("PRET", Branch, PRE_VOLTA),
    e("SSY", Branch, PRE_VOLTA),
    e("PBK", Branch, PRE_VOLTA),
    e("BRK", Branch, PRE_VOLTA),
    e("PCNT", Branch, PRE_VOLTA),
    e("CONT", Branch, PRE_VOLTA),
    e("SYNC", Branch, MAXWELL_PASCAL),
    e("PEXIT", Branch, MAXWELL_PASCAL),
    e("CALL", Branch, VOLTA_PLUS),
    e("BMOV", Branch, VOLTA_PLUS),
    e("BREAK", Branch, VOLTA_PLUS),
    e("BSSY", Branch, VOLTA_PLUS),
    e("BSYNC", Branch, VOLTA_PLUS),
    e("KILL", Branch, VOLTA_PLUS),
    e("RPCMOV", Branch, VOLTA_PLUS),
    e("RTT", Branch, VOLTA_PLUS),
    e("WARPSYNC", Branch, VOLTA_PLUS),
    e("BRXU", Branch, TURING_PLUS),
    e("JMXU", Branch, TURING_PLUS),
    e("ENDCOLLECTIVE", Branch, HOPPER),
    e("EXIT", Exit, ALL),
    // ---- waits, hints, no-ops ----
    e("NOP", Nop, ALL),
    e("TEXDEPBAR", Nop, KEPLER),
    e("DEPBAR", Nop, MAXWELL_PLUS),
    e("YIELD", Nop, VOLTA_PLUS),
    e("NANOSLEEP", Nop, VOLTA_PLUS),
    e("ACQBULK", Nop, HOPPER),
    e("PREEXIT", Nop, HOPPER),
    e("WARPGROUP", Nop, HOPPER),
    e("WARPGROUPSET", Nop, HOPPER),
    // ---- barriers ----
    e("BAR", Barrier, ALL),
    // ---- special registers and per-thread state ----
    e("S2R", SpecialReg, ALL),
    e("B2R", SpecialReg, ALL),
    e("CS2R", SpecialReg, MAXWELL_PLUS),
    e("R2B", SpecialReg, MAXWELL_PLUS),
    e("GETLMEMBASE", SpecialReg, MAXWELL_PLUS),
    e("SETLMEMBASE", SpecialReg, MAXWELL_PLUS),
    e("LEPC", SpecialReg, MAXWELL_PLUS),
    e("SETCTAID", SpecialReg, MAXWELL_PLUS),
    // ---- miscellaneous, not modeled specially ----
    e("PMTRIG", Other, VOLTA_PLUS),
    e("CSMTEST", Other, VOLTA_PLUS),
    e("VOTE_VTG", Other, VOLTA_PLUS),
];
