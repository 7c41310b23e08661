//! SASS opcode tables: base mnemonic to [`OpClass`] per architecture family, and the
//! modifier parsing that fills the rest of an [`OpcodeInfo`].
//!
//! A traced mnemonic such as `LDG.E.128.CONSTANT.SYS` is a base mnemonic (`LDG`, the part
//! before the first `.`) and modifiers (`E`, `128`, `CONSTANT`, `SYS`). The base picks the
//! class from the family's table ([`table::ENTRIES`]); the modifiers give the access width,
//! the destination register count, the memory scope and the atomic operation.
//!
//! Sources: the per-family instruction lists of NVIDIA's "CUDA Binary Utilities"
//! instruction-set reference (Kepler; Maxwell and Pascal; Volta; Turing; Ampere and Ada;
//! Hopper), cross-checked against the opcode maps of Accel-Sim's trace-driven front end
//! (`gpu-simulator/ISA_Def/*_opcode.h`), which also shows which unit each opcode runs on.
//!
//! Modifier rules (all families):
//! - **width_bytes**: the first modifier that names a width wins: all digits (`.8`, `.16`,
//!   `.32`, `.64`, `.128`, `.256`: bits / 8), `U`/`S` + digits (`.U8`, `.S16`, `.U64`),
//!   or a float type (`.F16` = 2, `.BF16` = 2, `.F32` = 4, `.F64` = 8, packed `.F16x2` /
//!   `.BF16x2` = 4) so that float atomics (`ATOMG.E.ADD.F64.RN`) get their operand size.
//!   Other digit strings (MMA shapes such as `.16816`) are not widths. Default 4, the
//!   Accel-Sim convention. `LDSM`/`STSM` are 16: each lane addresses one 16-byte matrix row.
//! - **dst_regs**: for loads, stores and atomics the access width in registers (width / 4,
//!   at least 1: `.128` = 4, `.64` or `.F64` = 2, `.U8` = 1); for other ops 4 for `.128`,
//!   8 for `.256`, 2 for `.64` or `.WIDE`; 2 for FP64 arithmetic
//!   (`DADD`, `DFMA`, `DMUL`, `DMNMX`; not the predicate/boolean-writing `DSETP`/`DSET`); 2
//!   for conversions with a 64-bit result (`F2F.F64.*`, `I2F.F64*`, `F2I.S64`/`.U64`); 2
//!   for `CS2R` without `.32` (it writes a 64-bit clock/zero pair); for `LDSM`/`STSM` the
//!   matrix count (`.M88.4` = 4); for MMA ops the accumulator fragment size from the shape
//!   and accumulator type (`HMMA.16816.F32` = 4, `HMMA.16816.F16` = 2, `DMMA.884` = 4,
//!   `HGMMA.64x128x16.F32` = 64, per thread of a 128-thread warpgroup); otherwise 1. For
//!   stores this is the data operand's register count.
//! - **scope**: `.CTA` = Cta, `.GPU`/`.GL` = Gpu, `.SYS` = Sys; Hopper's `.CLUSTER` maps to
//!   Gpu (the narrowest listed scope that contains a cluster); otherwise None.
//! - **atomic**: only for the atomic and reduction classes (and for unknown mnemonics):
//!   `.ADD`, `.MIN`, `.MAX`, `.INC`, `.DEC`, `.AND`, `.OR`, `.XOR`, `.EXCH`, `.CAS` (and
//!   `.CAST`, the `ATOMS.CAST.SPIN` form); the first one present wins.
//!
//! Class choices where the reference is ambiguous: `FRND` is Convert (NVIDIA lists it
//! under conversions); `MOVM` and `ELECT` are WarpShuffle (cross-lane); `S2UR` is
//! SpecialReg and `VOTEU` WarpShuffle although uniform-datapath; `UCGABAR_*` (cluster
//! barrier) is Barrier; `SYNCS`/`ARRIVES` (mbarrier operations) are Other, no class fits;
//! `QSPC` is Int; surface ops are Texture; `UTMACCTL` is Fence, `UTMACMDFLUSH` and
//! `LDGDEPBAR` are Nop; `NANOSLEEP`, `ACQBULK`, `PREEXIT`, `WARPGROUP` are Nop.

mod table;

use std::collections::HashMap;
use std::sync::OnceLock;

use tessera_traces::{AtomicOp, OpClass, OpcodeInfo, Scope};

/// A GPU architecture family: the unit of the opcode tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArchFamily {
    Kepler,
    Maxwell,
    Pascal,
    Volta,
    Turing,
    Ampere,
    Ada,
    Hopper,
}

impl ArchFamily {
    /// Every family, oldest first.
    pub const ALL: [ArchFamily; 8] = [
        ArchFamily::Kepler,
        ArchFamily::Maxwell,
        ArchFamily::Pascal,
        ArchFamily::Volta,
        ArchFamily::Turing,
        ArchFamily::Ampere,
        ArchFamily::Ada,
        ArchFamily::Hopper,
    ];

    /// From the trace header's `-binary version = N` (35/37 Kepler, 50/52/53 Maxwell,
    /// 60/61/62 Pascal, 70/72 Volta, 75 Turing, 80/86/87 Ampere, 89 Ada, 90 Hopper).
    /// None for anything else.
    pub fn from_binary_version(v: u32) -> Option<ArchFamily> {
        match v {
            35 | 37 => Some(ArchFamily::Kepler),
            50 | 52 | 53 => Some(ArchFamily::Maxwell),
            60..=62 => Some(ArchFamily::Pascal),
            70 | 72 => Some(ArchFamily::Volta),
            75 => Some(ArchFamily::Turing),
            80 | 86 | 87 => Some(ArchFamily::Ampere),
            89 => Some(ArchFamily::Ada),
            90 => Some(ArchFamily::Hopper),
            _ => None,
        }
    }

    /// Lowercase family name (`"ampere"`).
    pub fn name(self) -> &'static str {
        match self {
            ArchFamily::Kepler => "kepler",
            ArchFamily::Maxwell => "maxwell",
            ArchFamily::Pascal => "pascal",
            ArchFamily::Volta => "volta",
            ArchFamily::Turing => "turing",
            ArchFamily::Ampere => "ampere",
            ArchFamily::Ada => "ada",
            ArchFamily::Hopper => "hopper",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn bit(self) -> u8 {
        1 << self.index()
    }
}

/// Per-family tables, built once from [`table::ENTRIES`].
fn tables() -> &'static [HashMap<&'static str, OpClass>; 8] {
    static TABLES: OnceLock<[HashMap<&'static str, OpClass>; 8]> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut maps: [HashMap<&'static str, OpClass>; 8] = Default::default();
        for fam in ArchFamily::ALL {
            let map = &mut maps[fam.index()];
            for entry in table::ENTRIES {
                if entry.families & fam.bit() != 0 {
                    map.insert(entry.name, entry.class);
                }
            }
        }
        maps
    })
}

/// The class of base mnemonic `base` in `family`'s table, if it is there.
pub fn base_class(family: ArchFamily, base: &str) -> Option<OpClass> {
    tables()[family.index()].get(base).copied()
}

/// Every base mnemonic of `family`'s table with its class, sorted by mnemonic.
pub fn known_mnemonics(family: ArchFamily) -> Vec<(&'static str, OpClass)> {
    let mut v: Vec<_> = tables()[family.index()]
        .iter()
        .map(|(name, class)| (*name, *class))
        .collect();
    v.sort_unstable_by_key(|(name, _)| *name);
    v
}

/// Full decode of a traced mnemonic such as `LDG.E.128.CONSTANT.SYS` or
/// `ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU`. Returns None if the base mnemonic is not in
/// `family`'s table.
pub fn decode_opcode(family: ArchFamily, mnemonic: &str) -> Option<OpcodeInfo> {
    let (base, mods) = split(mnemonic);
    let class = base_class(family, base)?;
    Some(build(mnemonic, base, &mods, class, false))
}

/// The OpcodeInfo for a mnemonic whose base is unknown: class [`OpClass::Other`],
/// `unknown = true`, modifiers still parsed (width, dst_regs, scope, atomic).
pub fn unknown_opcode(mnemonic: &str) -> OpcodeInfo {
    let (base, mods) = split(mnemonic);
    build(mnemonic, base, &mods, OpClass::Other, true)
}

/// Base mnemonic and modifiers. Surrounding whitespace is ignored; empty modifiers (from
/// `..` or a trailing `.`) are dropped.
fn split(mnemonic: &str) -> (&str, Vec<&str>) {
    let mut parts = mnemonic.trim().split('.');
    let base = parts.next().unwrap_or("");
    (base, parts.filter(|m| !m.is_empty()).collect())
}

fn build(name: &str, base: &str, mods: &[&str], class: OpClass, unknown: bool) -> OpcodeInfo {
    let is_matrix_row = matches!(base, "LDSM" | "STSM");
    let width_bytes = if is_matrix_row { 16 } else { width_bytes(mods) };
    let atomic = if unknown
        || matches!(
            class,
            OpClass::AtomicGlobal
                | OpClass::AtomicShared
                | OpClass::AtomicGeneric
                | OpClass::Reduction
        ) {
        atomic_op(mods)
    } else {
        AtomicOp::None
    };
    OpcodeInfo {
        name: name.to_string(),
        class,
        width_bytes,
        dst_regs: dst_regs(base, mods, class, width_bytes),
        scope: scope(mods),
        atomic,
        unknown,
    }
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Bits named by an all-digit width modifier; MMA shapes and counts are not widths.
fn width_bits(m: &str) -> Option<u32> {
    if !all_digits(m) {
        return None;
    }
    match m.parse::<u32>().ok()? {
        b @ (8 | 16 | 32 | 64 | 128 | 256) => Some(b),
        _ => None,
    }
}

/// Bytes named by one modifier, if it is a width modifier.
fn modifier_width(m: &str) -> Option<u8> {
    if let Some(bits) = width_bits(m) {
        return Some((bits / 8) as u8);
    }
    if let Some(rest) = m.strip_prefix('U').or_else(|| m.strip_prefix('S')) {
        if all_digits(rest) {
            return match rest.parse::<u32>().ok()? {
                b @ (8 | 16 | 32 | 64 | 128) => Some((b / 8) as u8),
                _ => None,
            };
        }
    }
    match m {
        "F16" | "BF16" => Some(2),
        "F32" | "TF32" | "F16x2" | "F16X2" | "BF16x2" | "BF16X2" => Some(4),
        "F64" => Some(8),
        _ => None,
    }
}

fn width_bytes(mods: &[&str]) -> u8 {
    mods.iter().find_map(|m| modifier_width(m)).unwrap_or(4)
}

fn dst_regs(base: &str, mods: &[&str], class: OpClass, width_bytes: u8) -> u8 {
    // Shared-memory matrix loads/stores: the trailing count is the number of 8x8 matrices,
    // one register each.
    if matches!(base, "LDSM" | "STSM") {
        return mods
            .iter()
            .rev()
            .find_map(|m| m.parse::<u8>().ok().filter(|n| matches!(n, 1 | 2 | 4)))
            .unwrap_or(1);
    }
    // Loads, stores, atomics: the data operand covers the access width (`.64`, `.128`,
    // `.F64` of a float atomic), at least one register (`.U8`).
    if class.is_memory() && class != OpClass::Texture {
        return (width_bytes / 4).max(1);
    }
    if class == OpClass::Tensor {
        if let Some(n) = mma_dst_regs(base, mods) {
            return n;
        }
    }
    for m in mods {
        match width_bits(m) {
            Some(256) => return 8,
            Some(128) => return 4,
            Some(64) => return 2,
            _ => {}
        }
        if *m == "WIDE" {
            return 2;
        }
    }
    match class {
        OpClass::Fp64 if !matches!(base, "DSETP" | "DSET") => 2,
        OpClass::Convert if convert_writes_64(base, mods) => 2,
        OpClass::SpecialReg if base == "CS2R" && !mods.contains(&"32") => 2,
        _ => 1,
    }
}

/// Whether a conversion's result is 64 bits wide. SASS writes the destination type first
/// (`F2F.F64.F32`); `F2I` always produces an integer and `I2F` a float, so there the one
/// type of the right kind decides.
fn convert_writes_64(base: &str, mods: &[&str]) -> bool {
    match base {
        "F2F" => {
            mods.iter()
                .find(|m| matches!(**m, "F16" | "BF16" | "TF32" | "F32" | "F64"))
                == Some(&"F64")
        }
        "I2F" => mods.contains(&"F64"),
        "F2I" => mods.iter().any(|m| *m == "S64" || *m == "U64"),
        _ => false,
    }
}

/// Accumulator registers per thread of an MMA, from its shape and accumulator type:
/// M*N elements spread over the 32 lanes of a warp (or the 128 threads of a warpgroup for
/// the `*GMMA` forms), times the accumulator width in 32-bit registers.
fn mma_dst_regs(base: &str, mods: &[&str]) -> Option<u8> {
    let (m, n, threads) = if base.ends_with("GMMA") {
        // Hopper warpgroup MMA: `HGMMA.64x128x16.F32`.
        let shape = mods.iter().find(|s| s.contains('x'))?;
        let mut dims = shape.split('x').map(|d| d.parse::<u32>().ok());
        (dims.next()??, dims.next()??, 128)
    } else {
        // Warp MMA: `HMMA.16816` = m16 n8 k16, `HMMA.884`, `IMMA.8816`, `BMMA.88128`.
        let shape = mods.iter().find(|s| all_digits(s))?;
        let rest = shape
            .strip_prefix("16")
            .map(|r| (16, r))
            .or_else(|| shape.strip_prefix('8').map(|r| (8, r)));
        let (m, rest) = rest?;
        let k = rest.strip_prefix('8')?;
        if !all_digits(k) {
            return None;
        }
        (m, 8, 32)
    };
    let acc_bits: u32 = match base {
        "HMMA" | "HGMMA" | "QGMMA" => match mods.iter().find(|s| matches!(**s, "F16" | "F32")) {
            Some(&"F16") => 16,
            _ => 32,
        },
        "DMMA" => 64,
        _ => 32, // integer and bit MMAs accumulate in S32
    };
    let regs = (m.saturating_mul(n) / threads).saturating_mul(acc_bits) / 32;
    Some(regs.clamp(1, u8::MAX as u32) as u8)
}

fn scope(mods: &[&str]) -> Scope {
    mods.iter()
        .rev()
        .find_map(|m| match *m {
            "CTA" => Some(Scope::Cta),
            "GPU" | "GL" | "CLUSTER" => Some(Scope::Gpu),
            "SYS" => Some(Scope::Sys),
            _ => None,
        })
        .unwrap_or(Scope::None)
}

fn atomic_op(mods: &[&str]) -> AtomicOp {
    mods.iter()
        .find_map(|m| match *m {
            "ADD" => Some(AtomicOp::Add),
            "MIN" => Some(AtomicOp::Min),
            "MAX" => Some(AtomicOp::Max),
            "INC" => Some(AtomicOp::Inc),
            "DEC" => Some(AtomicOp::Dec),
            "AND" => Some(AtomicOp::And),
            "OR" => Some(AtomicOp::Or),
            "XOR" => Some(AtomicOp::Xor),
            "EXCH" => Some(AtomicOp::Exch),
            "CAS" | "CAST" => Some(AtomicOp::Cas),
            _ => None,
        })
        .unwrap_or(AtomicOp::None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn d(f: ArchFamily, m: &str) -> OpcodeInfo {
        decode_opcode(f, m).unwrap_or_else(|| panic!("{m} should decode on {f:?}"))
    }

    #[test]
    fn family_from_binary_version() {
        use ArchFamily::*;
        let cases = [
            (35, Kepler),
            (37, Kepler),
            (50, Maxwell),
            (52, Maxwell),
            (53, Maxwell),
            (60, Pascal),
            (61, Pascal),
            (62, Pascal),
            (70, Volta),
            (72, Volta),
            (75, Turing),
            (80, Ampere),
            (86, Ampere),
            (87, Ampere),
            (89, Ada),
            (90, Hopper),
        ];
        for (v, f) in cases {
            assert_eq!(ArchFamily::from_binary_version(v), Some(f), "version {v}");
        }
        for v in [0, 20, 21, 30, 34, 51, 74, 88, 91, 100, 120] {
            assert_eq!(ArchFamily::from_binary_version(v), None, "version {v}");
        }
    }

    #[test]
    fn names_are_lowercase_and_distinct() {
        let names: HashSet<_> = ArchFamily::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names.len(), 8);
        for f in ArchFamily::ALL {
            assert_eq!(f.name(), f.name().to_lowercase());
            assert!(format!("{f:?}").to_lowercase().starts_with(f.name()));
        }
    }

    #[test]
    fn table_rows_do_not_overlap() {
        let mut seen: HashMap<&str, (u8, OpClass)> = HashMap::new();
        for e in table::ENTRIES {
            assert!(e.families != 0, "{} belongs to no family", e.name);
            assert!(!e.name.contains('.'), "{} is not a base mnemonic", e.name);
            if let Some((mask, class)) = seen.get_mut(e.name) {
                assert_eq!(
                    *mask & e.families,
                    0,
                    "{} listed twice for a family",
                    e.name
                );
                assert_eq!(*class, e.class, "{} changes class across families", e.name);
                *mask |= e.families;
            } else {
                seen.insert(e.name, (e.families, e.class));
            }
        }
    }

    #[test]
    fn bundled_ampere_trace_opcodes() {
        use OpClass::*;
        let cases = [
            ("MOV", Int),
            ("S2R", SpecialReg),
            ("IMAD", IntMul),
            ("ISETP.GE.AND", Int),
            ("EXIT", Exit),
            ("HFMA2.MMA", Fp16),
            ("ULDC.64", Uniform),
            ("IMAD.WIDE", IntMul),
            ("LDG.E", LoadGlobal),
            ("FADD", Fp32),
            ("STG.E", StoreGlobal),
        ];
        for (m, class) in cases {
            let info = d(ArchFamily::Ampere, m);
            assert_eq!(info.class, class, "{m}");
            assert_eq!(info.name, m);
            assert!(!info.unknown);
        }
        let ldg = d(ArchFamily::Ampere, "LDG.E");
        assert_eq!(
            (ldg.width_bytes, ldg.dst_regs, ldg.scope),
            (4, 1, Scope::None)
        );
        assert_eq!(ldg.atomic, AtomicOp::None);
        let uldc = d(ArchFamily::Ampere, "ULDC.64");
        assert_eq!((uldc.width_bytes, uldc.dst_regs), (8, 2));
        assert_eq!(d(ArchFamily::Ampere, "IMAD.MOV.U32").class, IntMul);
    }

    #[test]
    fn widths_and_register_counts() {
        let a = ArchFamily::Ampere;
        let wd = |m: &str| {
            let i = d(a, m);
            (i.width_bytes, i.dst_regs)
        };
        assert_eq!(wd("LDG.E.128"), (16, 4));
        assert_eq!(wd("LDG.E.128.CONSTANT.SYS"), (16, 4));
        assert_eq!(wd("LDG.E.64"), (8, 2));
        assert_eq!(wd("LDG.E.U8"), (1, 1));
        assert_eq!(wd("LDG.E.S16"), (2, 1));
        assert_eq!(wd("LDG.E.U16.CONSTANT"), (2, 1));
        assert_eq!(wd("LDS.U.128"), (16, 4));
        assert_eq!(wd("STS.64"), (8, 2));
        assert_eq!(wd("STG.E.8"), (1, 1));
        assert_eq!(wd("IMAD.WIDE"), (4, 2));
        assert_eq!(wd("IMAD.WIDE.U32"), (4, 2));
        assert_eq!(wd("IMAD.HI.U32"), (4, 1));
        assert_eq!(wd("LDGSTS.E.BYPASS.LTC128B.128"), (16, 4));
        assert_eq!(wd("ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU"), (4, 1));
        assert_eq!(wd("ATOMG.E.ADD.F64.RN.STRONG.GPU"), (8, 2));
        assert_eq!(wd("ATOMS.CAS.64"), (8, 2));
        assert_eq!(wd("LDC.U8"), (1, 1));
        assert_eq!(wd("ATOMG.E.EXCH.64.STRONG.GPU"), (8, 2));
        assert_eq!(wd("RED.E.ADD.F16x2.RN.STRONG.GPU"), (4, 1));
        assert_eq!(wd("LDSM.16.M88.4"), (16, 4));
        assert_eq!(wd("LDSM.16.MT88.2"), (16, 2));
        assert_eq!(wd("DFMA"), (4, 2));
        assert_eq!(wd("DADD"), (4, 2));
        assert_eq!(wd("DMUL"), (4, 2));
        assert_eq!(wd("DSETP.GEU.AND"), (4, 1));
        assert_eq!(wd("F2F.F64.F32"), (8, 2));
        assert_eq!(wd("F2F.F32.F64"), (4, 1));
        assert_eq!(wd("F2F.FTZ.F64.F32"), (8, 2));
        assert_eq!(wd("I2F.F64.S64"), (8, 2));
        assert_eq!(wd("F2I.FTZ.U32.TRUNC.NTZ"), (4, 1));
        assert_eq!(wd("F2I.S64.TRUNC"), (8, 2));
        assert_eq!(wd("CS2R"), (4, 2));
        assert_eq!(wd("CS2R.32"), (4, 1));
        assert_eq!(wd("HMMA.16816.F32"), (4, 4));
        assert_eq!(wd("HMMA.16816.F32.BF16"), (4, 4));
        assert_eq!(wd("HMMA.16816.F16"), (2, 2));
        assert_eq!(wd("HMMA.1688.F32.TF32"), (4, 4));
        assert_eq!(wd("IMMA.16832.S8.S8.SAT").1, 4);
        assert_eq!(wd("IMMA.8816.S8.S8").1, 2);
        assert_eq!(wd("DMMA.884").1, 4);
        assert_eq!(wd("BMMA.88128.AND.POPC").1, 2);
        assert_eq!(wd("SHFL.BFLY.PT"), (4, 1));
        assert_eq!(wd("MUFU.RCP64H"), (4, 1));
        let h = d(ArchFamily::Hopper, "HGMMA.64x128x16.F32.BF16");
        assert_eq!(h.dst_regs, 64);
        let h = d(ArchFamily::Hopper, "HGMMA.64x256x16.F16");
        assert_eq!(h.dst_regs, 64);
        let v = d(ArchFamily::Volta, "HMMA.884.F32.F32.STEP2");
        assert_eq!(v.dst_regs, 2);
        let k = d(ArchFamily::Kepler, "LD.E.64");
        assert_eq!(
            (k.class, k.width_bytes, k.dst_regs),
            (OpClass::LoadGeneric, 8, 2)
        );
    }

    #[test]
    fn scopes_and_atomics() {
        let a = ArchFamily::Ampere;
        let i = d(a, "ATOMG.E.ADD.STRONG.GPU");
        assert_eq!(
            (i.class, i.atomic, i.scope),
            (OpClass::AtomicGlobal, AtomicOp::Add, Scope::Gpu)
        );
        let i = d(a, "RED.E.ADD.F32.FTZ.RN.STRONG.GPU");
        assert_eq!(
            (i.class, i.atomic, i.scope),
            (OpClass::Reduction, AtomicOp::Add, Scope::Gpu)
        );
        let i = d(a, "MEMBAR.SC.CTA");
        assert_eq!(
            (i.class, i.scope, i.atomic),
            (OpClass::Fence, Scope::Cta, AtomicOp::None)
        );
        assert_eq!(d(a, "MEMBAR.SC.GPU").scope, Scope::Gpu);
        assert_eq!(d(a, "MEMBAR.ALL.SYS").scope, Scope::Sys);
        assert_eq!(d(ArchFamily::Kepler, "MEMBAR.GL").scope, Scope::Gpu);
        assert_eq!(d(a, "LDG.E.STRONG.SYS").scope, Scope::Sys);
        assert_eq!(
            d(ArchFamily::Hopper, "FENCE.VIEW.ASYNC.S").scope,
            Scope::None
        );
        let i = d(a, "ATOMS.CAS");
        assert_eq!((i.class, i.atomic), (OpClass::AtomicShared, AtomicOp::Cas));
        assert_eq!(d(a, "ATOMG.E.CAS.STRONG.GPU").atomic, AtomicOp::Cas);
        assert_eq!(
            d(ArchFamily::Maxwell, "ATOMS.CAST.SPIN").atomic,
            AtomicOp::Cas
        );
        assert_eq!(d(a, "ATOM.E.EXCH.STRONG.GPU").atomic, AtomicOp::Exch);
        assert_eq!(d(a, "ATOM.E.EXCH.STRONG.GPU").class, OpClass::AtomicGeneric);
        assert_eq!(d(a, "ATOMS.POPC.INC.32").atomic, AtomicOp::Inc);
        for (op, want) in [
            ("MIN", AtomicOp::Min),
            ("MAX", AtomicOp::Max),
            ("DEC", AtomicOp::Dec),
            ("AND", AtomicOp::And),
            ("OR", AtomicOp::Or),
            ("XOR", AtomicOp::Xor),
        ] {
            assert_eq!(d(a, &format!("ATOMG.E.{op}.S32.STRONG.GPU")).atomic, want);
        }
        // Not an atomic class: logic ops keep AtomicOp::None.
        assert_eq!(d(a, "PLOP3.LUT").atomic, AtomicOp::None);
        assert_eq!(d(a, "ISETP.GE.AND").atomic, AtomicOp::None);
        assert_eq!(d(a, "REDUX.AND").atomic, AtomicOp::None);
        assert_eq!(
            d(ArchFamily::Hopper, "REDG.E.ADD.F32.FTZ.RN.STRONG.GPU").class,
            OpClass::Reduction
        );
    }

    #[test]
    fn family_gating() {
        use ArchFamily::*;
        for f in [Kepler, Maxwell, Pascal] {
            assert!(
                decode_opcode(f, "HMMA.884.F32.F32").is_none(),
                "HMMA on {f:?}"
            );
            assert!(decode_opcode(f, "UIADD3").is_none(), "UIADD3 on {f:?}");
            assert!(decode_opcode(f, "BSSY").is_none(), "BSSY on {f:?}");
        }
        for f in [Volta, Turing, Ampere, Ada, Hopper] {
            assert_eq!(d(f, "HMMA.16816.F32").class, OpClass::Tensor, "{f:?}");
            assert!(decode_opcode(f, "SSY").is_none(), "SSY on {f:?}");
        }
        for f in [Kepler, Maxwell, Pascal, Volta, Turing] {
            assert!(
                decode_opcode(f, "LDGSTS.E.128").is_none(),
                "LDGSTS on {f:?}"
            );
            assert!(decode_opcode(f, "DMMA.884").is_none(), "DMMA on {f:?}");
        }
        for f in [Ampere, Ada, Hopper] {
            assert_eq!(d(f, "LDGSTS.E.BYPASS.128").class, OpClass::AsyncCopy);
            assert_eq!(d(f, "DMMA.884").class, OpClass::Tensor);
        }
        for f in [Kepler, Maxwell, Pascal, Volta] {
            assert!(
                decode_opcode(f, "IMMA.8816.S8.S8").is_none(),
                "IMMA on {f:?}"
            );
            assert!(decode_opcode(f, "ULDC.64").is_none(), "ULDC on {f:?}");
            assert!(decode_opcode(f, "LDSM.16.M88.4").is_none(), "LDSM on {f:?}");
        }
        assert_eq!(d(Turing, "IMMA.8816.S8.S8").class, OpClass::Tensor);
        assert_eq!(d(Turing, "ULDC").class, OpClass::Uniform);
        for f in [Kepler, Maxwell, Pascal, Volta, Turing, Ampere, Ada] {
            for m in [
                "HGMMA.64x128x16.F32",
                "UTMALDG.2D",
                "UBLKCP.S.G",
                "SYNCS.EXCH.64",
            ] {
                assert!(decode_opcode(f, m).is_none(), "{m} on {f:?}");
            }
        }
        assert_eq!(d(Hopper, "UTMALDG.2D").class, OpClass::AsyncCopy);
        assert_eq!(d(Hopper, "UBLKCP.S.G").class, OpClass::AsyncCopy);
        assert_eq!(d(Hopper, "UTMASTG.2D").class, OpClass::AsyncCopy);
        assert_eq!(d(Hopper, "HGMMA.64x128x16.F32").class, OpClass::Tensor);
        assert_eq!(d(Kepler, "SSY").class, OpClass::Branch);
        assert_eq!(d(Pascal, "XMAD.MRG").class, OpClass::IntMul);
        assert!(decode_opcode(Volta, "XMAD").is_none());
        assert!(decode_opcode(Kepler, "ATOMS.ADD").is_none());
        assert!(decode_opcode(Kepler, "STG.E").is_none());
        assert_eq!(d(Kepler, "ST.E").class, OpClass::StoreGeneric);
    }

    #[test]
    fn ada_matches_ampere() {
        assert_eq!(
            known_mnemonics(ArchFamily::Ada),
            known_mnemonics(ArchFamily::Ampere)
        );
        let amp: HashSet<_> = known_mnemonics(ArchFamily::Ampere).into_iter().collect();
        let hop: HashSet<_> = known_mnemonics(ArchFamily::Hopper).into_iter().collect();
        assert!(amp.is_subset(&hop));
    }

    #[test]
    fn class_guidance() {
        use OpClass::*;
        let a = ArchFamily::Ampere;
        let cases = [
            ("LDS", LoadShared),
            ("STS", StoreShared),
            ("LDL", LoadLocal),
            ("STL", StoreLocal),
            ("LD.E", LoadGeneric),
            ("ST.E", StoreGeneric),
            ("LDC.64", LoadConst),
            ("TEX.SCR.LL", Texture),
            ("TLD.SCR.LZ", Texture),
            ("SULD.D.BA.2D", Texture),
            ("SUST.D.BA.2D", Texture),
            ("BRA.DIV", Branch),
            ("BSSY", Branch),
            ("BSYNC", Branch),
            ("WARPSYNC.ALL", Branch),
            ("CALL.REL.NOINC", Branch),
            ("RET.REL.NODEC", Branch),
            ("BAR.SYNC.DEFER_BLOCKING", Barrier),
            ("BAR.SYNC", Barrier),
            ("BAR.ARV", Barrier),
            ("ERRBAR", Fence),
            ("CCTL.IVALL", Fence),
            ("NOP", Nop),
            ("DEPBAR.LE", Nop),
            ("YIELD", Nop),
            ("CS2R.32", SpecialReg),
            ("S2UR", SpecialReg),
            ("GETLMEMBASE", SpecialReg),
            ("IMUL.WIDE", IntMul),
            ("IDP.4A.S8.S8", IntMul),
            ("HADD2.F32", Fp16),
            ("HSETP2.GT.AND", Fp16),
            ("HMNMX2", Fp16),
            ("FFMA.FTZ", Fp32),
            ("FSETP.GEU.AND", Fp32),
            ("FCHK", Fp32),
            ("FSWZADD", Fp32),
            ("DSETP.GT.AND", Fp64),
            ("MUFU.RCP", Sfu),
            ("F2F.F16.F32", Convert),
            ("F2FP.BF16.F32.PACK_AB", Convert),
            ("I2F.U32.RP", Convert),
            ("FRND.F64.TRUNC", Convert),
            ("SHFL.IDX", WarpShuffle),
            ("VOTE.ANY", WarpShuffle),
            ("VOTEU.ANY", WarpShuffle),
            ("MATCH.ANY", WarpShuffle),
            ("REDUX.SUM.S32", WarpShuffle),
            ("UIADD3", Uniform),
            ("UMOV", Uniform),
            ("ULOP3.LUT", Uniform),
            ("USHF.L.U32", Uniform),
            ("UISETP.NE.AND", Uniform),
            ("R2UR", Uniform),
            ("IADD3.X", Int),
            ("LOP3.LUT", Int),
            ("SHF.R.U32.HI", Int),
            ("SEL", Int),
            ("PRMT", Int),
            ("LEA.HI.X.SX32", Int),
            ("POPC", Int),
            ("FLO.U32", Int),
            ("BREV", Int),
            ("P2R", Int),
            ("R2P", Int),
            ("PLOP3.LUT", Int),
            ("IMNMX", Int),
        ];
        for (m, class) in cases {
            assert_eq!(d(a, m).class, class, "{m}");
        }
        let k = ArchFamily::Kepler;
        for (m, class) in [
            ("PBK", Branch),
            ("BRK", Branch),
            ("PCNT", Branch),
            ("CONT", Branch),
            ("CSET", Int),
            ("RRO.SINCOS", Sfu),
            ("DMNMX", Fp64),
            ("DSET.GT.AND", Fp64),
            ("IMADSP", IntMul),
        ] {
            assert_eq!(d(k, m).class, class, "{m}");
        }
        assert_eq!(d(k, "DMNMX").dst_regs, 2);
        assert_eq!(d(k, "DSET.GT.AND").dst_regs, 1);
    }

    #[test]
    fn unknown_mnemonics() {
        for f in ArchFamily::ALL {
            assert!(decode_opcode(f, "FOOBAR.X").is_none());
            assert!(decode_opcode(f, "").is_none());
        }
        let u = unknown_opcode("FOOBAR.X");
        assert_eq!(u.name, "FOOBAR.X");
        assert_eq!(u.class, OpClass::Other);
        assert!(u.unknown);
        assert_eq!(
            (u.width_bytes, u.dst_regs, u.scope, u.atomic),
            (4, 1, Scope::None, AtomicOp::None)
        );
        let u = unknown_opcode("FOOATOM.E.ADD.64.STRONG.SYS");
        assert_eq!((u.width_bytes, u.dst_regs), (8, 2));
        assert_eq!((u.scope, u.atomic), (Scope::Sys, AtomicOp::Add));
        assert_eq!(unknown_opcode("FOO.128.CTA").dst_regs, 4);
        assert_eq!(unknown_opcode("FOO.128.CTA").scope, Scope::Cta);
        assert_eq!(unknown_opcode("FOO.U8").width_bytes, 1);
    }

    #[test]
    fn counts_per_family_are_plausible() {
        for f in ArchFamily::ALL {
            let n = known_mnemonics(f).len();
            assert!((100..=300).contains(&n), "{f:?} has {n} mnemonics");
        }
    }
}
