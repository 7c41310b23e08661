//! One instruction line of a `.traceg` file.
//!
//! `[line_num] PC mask dest_num [R..] opcode src_num [R..] mem_width [mode addresses] [imm]`
//! (the tracer's `#traces format` line). Numbers follow the tracer's printf formats: PC and
//! mask in hex without `0x`, addresses in hex with `0x`, counts, widths, strides, deltas
//! and immediates in decimal.

use std::fmt;

/// Addresses of a memory instruction, as written on the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TextAddrs {
    None,
    /// Mode 0: one address per active lane.
    List(Vec<u64>),
    /// Mode 1: base and stride.
    Stride {
        base: u64,
        stride: i32,
    },
    /// Mode 2: base and one delta per further active lane.
    Delta {
        base: u64,
        deltas: Vec<i64>,
    },
}

/// A parsed instruction line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextInst {
    pub line: Option<u32>,
    pub pc: u32,
    pub mask: u32,
    pub dsts: Vec<u16>,
    pub opcode: String,
    pub srcs: Vec<u16>,
    pub mem_width: u32,
    pub addrs: TextAddrs,
    pub imm: Option<i64>,
    /// Per-lane operands of an atomic (tessera extension, in files whose header says
    /// `-tessera operands = 1`): decimal values after the immediate, which Accel-Sim's
    /// parser ignores.
    pub operands: Vec<u64>,
}

/// Writes the line as the NVBit tracer prints it (`%04x` PC, `%08x` mask, `0x%llx` bases,
/// `0x%016lx` listed addresses, every field followed by a space), without the newline.
impl fmt::Display for TextInst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = self.line {
            write!(f, "{l} ")?;
        }
        write!(f, "{:04x} {:08x} {} ", self.pc, self.mask, self.dsts.len())?;
        for r in &self.dsts {
            write!(f, "R{r} ")?;
        }
        write!(f, "{} {} ", self.opcode, self.srcs.len())?;
        for r in &self.srcs {
            write!(f, "R{r} ")?;
        }
        write!(f, "{} ", self.mem_width)?;
        match &self.addrs {
            TextAddrs::None => {}
            TextAddrs::List(v) => {
                f.write_str("0 ")?;
                for a in v {
                    write!(f, "0x{a:016x} ")?;
                }
            }
            TextAddrs::Stride { base, stride } => write!(f, "1 0x{base:x} {stride} ")?,
            TextAddrs::Delta { base, deltas } => {
                write!(f, "2 0x{base:x} ")?;
                for d in deltas {
                    write!(f, "{d} ")?;
                }
            }
        }
        if let Some(imm) = self.imm {
            write!(f, "{imm} ")?;
        }
        for v in &self.operands {
            write!(f, "{v} ")?;
        }
        Ok(())
    }
}

/// Why a line did not parse (the caller adds file and line number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError(pub String);

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whitespace-separated fields of a line.
#[derive(Clone, Copy)]
struct Toks<'a> {
    line: &'a [u8],
    pos: usize,
}

#[inline]
fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

impl<'a> Toks<'a> {
    fn new(line: &'a [u8]) -> Self {
        Toks { line, pos: 0 }
    }

    #[inline]
    fn next_field(&mut self) -> Option<&'a [u8]> {
        let l = self.line;
        let mut i = self.pos;
        while i < l.len() && is_space(l[i]) {
            i += 1;
        }
        if i == l.len() {
            self.pos = i;
            return None;
        }
        let start = i;
        while i < l.len() && !is_space(l[i]) {
            i += 1;
        }
        self.pos = i;
        Some(&l[start..i])
    }

    #[inline]
    fn next(&mut self, what: &str) -> Result<&'a [u8], LineError> {
        self.next_field()
            .ok_or_else(|| LineError(format!("line ends before its {what}")))
    }
}

fn show(t: &[u8]) -> String {
    String::from_utf8_lossy(t).into_owned()
}

#[inline]
fn hex(t: &[u8], what: &str, max_bits: u32) -> Result<u64, LineError> {
    let digits = t
        .strip_prefix(b"0x")
        .or_else(|| t.strip_prefix(b"0X"))
        .unwrap_or(t);
    let bad = || {
        LineError(format!(
            "expected {what} in hexadecimal, found '{}'",
            show(t)
        ))
    };
    if digits.is_empty() || digits.len() > 16 {
        return Err(bad());
    }
    let mut v: u64 = 0;
    for &b in digits {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return Err(bad()),
        };
        v = (v << 4) | d as u64;
    }
    if max_bits < 64 && v >> max_bits != 0 {
        return Err(LineError(format!(
            "{what} '{}' does not fit {max_bits} bits",
            show(t)
        )));
    }
    Ok(v)
}

#[inline]
fn dec_u64(t: &[u8], what: &str) -> Result<u64, LineError> {
    let bad = || {
        LineError(format!(
            "expected {what} as a decimal number, found '{}'",
            show(t)
        ))
    };
    if t.is_empty() || t.len() > 20 {
        return Err(bad());
    }
    let mut v: u64 = 0;
    for &b in t {
        if !b.is_ascii_digit() {
            return Err(bad());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((b - b'0') as u64))
            .ok_or_else(bad)?;
    }
    Ok(v)
}

#[inline]
fn dec_u32(t: &[u8], what: &str) -> Result<u32, LineError> {
    u32::try_from(dec_u64(t, what)?)
        .map_err(|_| LineError(format!("{what} '{}' is too large", show(t))))
}

#[inline]
fn dec_i64(t: &[u8], what: &str) -> Result<i64, LineError> {
    match t.strip_prefix(b"-") {
        Some(rest) => {
            let v = dec_u64(rest, what)?;
            if v > i64::MAX as u64 + 1 {
                return Err(LineError(format!("{what} '{}' is out of range", show(t))));
            }
            Ok((v as i64).wrapping_neg())
        }
        None => i64::try_from(dec_u64(t, what)?)
            .map_err(|_| LineError(format!("{what} '{}' is out of range", show(t)))),
    }
}

/// Parses field `i` (0-based) of `n` registers on one `side`; messages built only on error.
#[inline]
fn reg_field(t: &mut Toks<'_>, side: &str, i: u32, n: u32) -> Result<u16, LineError> {
    let tok = t.next_field().ok_or_else(|| {
        LineError(format!(
            "line ends before its {side} register {} of {n}",
            i + 1
        ))
    })?;
    tok.strip_prefix(b"R")
        .and_then(|d| dec_u64(d, "").ok())
        .filter(|&r| r <= 255)
        .map(|r| r as u16)
        .ok_or_else(|| {
            LineError(format!(
                "expected {side} register {} of {n} as a register R0..R255, found '{}'",
                i + 1,
                show(tok)
            ))
        })
}

/// Parses the `i`-th (0-based) of `n` address fields with `parse`; messages built only on
/// error.
#[inline]
fn indexed<T>(
    t: &mut Toks<'_>,
    what: &str,
    i: u32,
    n: u32,
    parse: impl Fn(&[u8], &str) -> Result<T, LineError>,
) -> Result<T, LineError> {
    let tok = t
        .next_field()
        .ok_or_else(|| LineError(format!("line ends before its {what} {} of {n}", i + 1)))?;
    parse(tok, "").map_err(|_| LineError(format!("bad {what} {} of {n}: '{}'", i + 1, show(tok))))
}

/// Most registers an instruction line may list on either side. The tracer records at
/// most 1 destination and 4 sources (MAX_DST/MAX_SRC); hand-written traces get some room.
pub const MAX_REGS: u32 = 8;

impl Default for TextInst {
    fn default() -> Self {
        TextInst {
            line: None,
            pc: 0,
            mask: 0,
            dsts: Vec::new(),
            opcode: String::new(),
            srcs: Vec::new(),
            mem_width: 0,
            addrs: TextAddrs::None,
            imm: None,
            operands: Vec::new(),
        }
    }
}

/// Whether the lines of a file end with the immediate field, as far as the importer knows.
///
/// Tracer version 5 writes an immediate on every line and version 3 on none; version 4
/// files come both ways, all lines alike, so the first line whose field count decides it
/// decides for the file. The count decides every line but one of address mode 1 with a
/// single field after its base address: that field is the stride of a line without an
/// immediate, or the immediate of a line whose stride is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImmField {
    /// Every line has an immediate.
    Present,
    /// No line has one.
    Absent,
    /// Not known yet: decided by the field count; an ambiguous mode-1 line is an error.
    Undecided,
    /// Decided by the field count line by line; an ambiguous mode-1 line is read as a
    /// stride without an immediate ([`parse_inst_line`]).
    FieldCount,
}

/// Parses one instruction line. `lineinfo` is the header's `-enable lineinfo`. The
/// immediate is present or not by the line's field count ([`ImmField::FieldCount`]).
pub fn parse_inst_line(line: &[u8], lineinfo: bool) -> Result<TextInst, LineError> {
    let mut out = TextInst::default();
    parse_inst_line_into(line, lineinfo, false, ImmField::FieldCount, &mut out)?;
    Ok(out)
}

/// [`parse_inst_line`] into a reused value (no allocation once its buffers have grown),
/// with the file's knowledge of the immediate field (`imm`). With `operands` (the header's
/// `-tessera operands = 1`), fields after the immediate are an atomic's per-lane operands
/// instead of an error.
pub fn parse_inst_line_into(
    line: &[u8],
    lineinfo: bool,
    operands: bool,
    imm: ImmField,
    out: &mut TextInst,
) -> Result<(), LineError> {
    let mut t = Toks::new(line);
    let line_no = if lineinfo {
        Some(dec_u32(t.next("line number")?, "a line number")?)
    } else {
        None
    };
    let pc = hex(t.next("PC")?, "a PC", 32)? as u32;
    let mask = hex(t.next("active mask")?, "an active mask", 32)? as u32;
    let n_dst = dec_u32(t.next("destination count")?, "a destination count")?;
    if n_dst > MAX_REGS {
        return Err(LineError(format!(
            "destination count {n_dst} is more than {MAX_REGS}"
        )));
    }
    let dsts = &mut out.dsts;
    dsts.clear();
    for i in 0..n_dst {
        dsts.push(reg_field(&mut t, "destination", i, n_dst)?);
    }
    let op = t.next("opcode")?;
    if !op[0].is_ascii_alphabetic() {
        return Err(LineError(format!(
            "expected an opcode, found '{}' (is the destination count right?)",
            show(op)
        )));
    }
    out.opcode.clear();
    out.opcode.push_str(
        std::str::from_utf8(op)
            .map_err(|_| LineError(format!("opcode '{}' is not ASCII", show(op))))?,
    );
    let n_src = dec_u32(t.next("source count")?, "a source count")?;
    if n_src > MAX_REGS {
        return Err(LineError(format!(
            "source count {n_src} is more than {MAX_REGS}"
        )));
    }
    let srcs = &mut out.srcs;
    srcs.clear();
    for i in 0..n_src {
        srcs.push(reg_field(&mut t, "source", i, n_src)?);
    }
    let mem_width = dec_u32(t.next("memory width")?, "a memory width")?;
    let old = std::mem::replace(&mut out.addrs, TextAddrs::None);
    let addrs = if mem_width == 0 {
        TextAddrs::None
    } else {
        let mode = dec_u32(t.next("address mode")?, "an address mode")?;
        let active = mask.count_ones();
        match mode {
            0 => {
                let mut v = match old {
                    TextAddrs::List(mut v) => {
                        v.clear();
                        v
                    }
                    _ => Vec::with_capacity(32),
                };
                for i in 0..active {
                    v.push(indexed(
                        &mut t,
                        "hexadecimal address (one per active lane)",
                        i,
                        active,
                        |f, w| hex(f, w, 64),
                    )?);
                }
                TextAddrs::List(v)
            }
            1 => {
                let base = hex(t.next("base address")?, "a base address", 64)?;
                if !operands {
                    // One field left: the stride of a line without an immediate, or the
                    // immediate of a line without its stride.
                    let mut r = t;
                    let n = (0..3).take_while(|_| r.next_field().is_some()).count();
                    if n == 1 {
                        match imm {
                            ImmField::Present => {
                                return Err(LineError(
                                    "address mode 1 expects a base address, a stride and then the immediate, found one field after the base address: the stride or the immediate is missing".into(),
                                ))
                            }
                            ImmField::Undecided => {
                                return Err(LineError(
                                    "ambiguous address-mode-1 line: the one field after the base address is either the stride (the line has no immediate) or the immediate (the stride is missing), and no earlier line of this file shows whether its lines carry an immediate".into(),
                                ))
                            }
                            ImmField::Absent | ImmField::FieldCount => {}
                        }
                    }
                }
                let s = dec_i64(t.next("stride")?, "a stride")?;
                let stride = i32::try_from(s)
                    .map_err(|_| LineError(format!("stride {s} does not fit 32 bits")))?;
                TextAddrs::Stride { base, stride }
            }
            2 => {
                let base = hex(t.next("base address")?, "a base address", 64)?;
                let n = active.saturating_sub(1);
                let mut deltas = match old {
                    TextAddrs::Delta { mut deltas, .. } => {
                        deltas.clear();
                        deltas
                    }
                    _ => Vec::with_capacity(32),
                };
                for i in 0..n {
                    deltas.push(indexed(&mut t, "address delta", i, n, dec_i64)?);
                }
                TextAddrs::Delta { base, deltas }
            }
            m => {
                return Err(LineError(format!(
                    "unknown address mode {m} (expected 0 list, 1 base+stride, 2 base+deltas)"
                )))
            }
        }
    };
    let imm = match (t.next_field(), imm) {
        (None, ImmField::Present) => {
            return Err(LineError(
                "line ends before its immediate (expected an immediate as the last field)".into(),
            ))
        }
        (None, _) => None,
        (Some(tok), ImmField::Absent) => {
            return Err(LineError(format!(
                "unexpected field '{}' after the memory fields: the lines of this file carry no immediate (wrong register or address count?)",
                show(tok)
            )))
        }
        (Some(tok), _) => Some(dec_i64(tok, "an immediate")?),
    };
    out.operands.clear();
    let mut extra = 0;
    while let Some(tok) = t.next_field() {
        if operands {
            out.operands.push(dec_u64(tok, "an atomic operand")?);
        } else {
            extra += 1;
        }
    }
    if extra > 0 {
        return Err(LineError(format!(
            "{extra} unexpected field(s) after the immediate: wrong register count or address count?"
        )));
    }
    out.line = line_no;
    out.pc = pc;
    out.mask = mask;
    out.mem_width = mem_width;
    out.addrs = addrs;
    out.imm = imm;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_inst() -> impl Strategy<Value = TextInst> {
        (
            (any::<bool>(), any::<u32>(), any::<u16>(), any::<u32>()),
            (
                proptest::collection::vec(0u16..=255, 0..=2),
                proptest::sample::select(vec![
                    "LDG.E",
                    "STG.E.64",
                    "IMAD.WIDE",
                    "EXIT",
                    "ATOMG.E.ADD.STRONG.GPU",
                ]),
                proptest::collection::vec(0u16..=255, 0..=4),
            ),
            (
                0u8..4,
                any::<u64>(),
                any::<i32>(),
                proptest::collection::vec(any::<i64>(), 32),
            ),
            proptest::option::of(any::<i64>()),
        )
            .prop_map(
                |(
                    (has_line, line, pc, mask),
                    (dsts, op, srcs),
                    (mode, base, stride, lanes),
                    imm,
                )| {
                    let n = mask.count_ones() as usize;
                    let (mem_width, addrs) = match mode {
                        0 => (0, TextAddrs::None),
                        1 => (
                            4,
                            TextAddrs::List(lanes.iter().take(n).map(|&x| x as u64).collect()),
                        ),
                        2 => (8, TextAddrs::Stride { base, stride }),
                        _ => (
                            16,
                            TextAddrs::Delta {
                                base,
                                deltas: lanes[..n.saturating_sub(1)].to_vec(),
                            },
                        ),
                    };
                    TextInst {
                        line: has_line.then_some(line),
                        pc: pc as u32,
                        mask,
                        dsts,
                        opcode: op.to_string(),
                        srcs,
                        mem_width,
                        addrs,
                        imm,
                        operands: Vec::new(),
                    }
                },
            )
    }

    proptest! {
        /// Printing a line the tracer's way and parsing it gives back every field, for every
        /// address mode, partial and empty masks, negative deltas and strides.
        #[test]
        fn print_parse_roundtrip(inst in arb_inst()) {
            let text = inst.to_string();
            let back = parse_inst_line(text.as_bytes(), inst.line.is_some()).unwrap();
            prop_assert_eq!(back, inst);
        }
    }

    #[test]
    fn parses_tracer_v5_lines() {
        let i = parse_inst_line(
            b"00a0 ffffffff 1 R4 LDG.E 1 R4 4 1 0x7fb0fc430e00 4 0 ",
            false,
        )
        .unwrap();
        assert_eq!(i.pc, 0xa0);
        assert_eq!(i.dsts, vec![4]);
        assert_eq!(i.srcs, vec![4]);
        assert_eq!(
            i.addrs,
            TextAddrs::Stride {
                base: 0x7fb0fc430e00,
                stride: 4
            }
        );
        assert_eq!(i.imm, Some(0));
        let i = parse_inst_line(b"0060 ffffffff 1 R7 HFMA2.MMA 2 R255 R255 0 0 ", false).unwrap();
        assert_eq!(i.srcs, vec![255, 255]);
        assert_eq!(i.addrs, TextAddrs::None);
    }

    #[test]
    fn immediate_is_decided_by_field_count() {
        let v3 = parse_inst_line(b"0000 ffffffff 1 R1 IMAD.MOV.U32 2 R255 R255 0 ", false).unwrap();
        assert_eq!(v3.imm, None);
        let v4 =
            parse_inst_line(b"0000 ffffffff 1 R1 IMAD.MOV.U32 2 R255 R255 0 -12", false).unwrap();
        assert_eq!(v4.imm, Some(-12));
    }

    #[test]
    fn base_delta_has_one_delta_per_further_active_lane() {
        let i = parse_inst_line(b"0010 00000007 0 STG.E 1 R2 4 2 0x100 -4 8 ", false).unwrap();
        assert_eq!(
            i.addrs,
            TextAddrs::Delta {
                base: 0x100,
                deltas: vec![-4, 8]
            }
        );
        assert_eq!(i.imm, None);
    }

    fn parse_with(line: &str, imm: ImmField) -> Result<TextInst, LineError> {
        let mut out = TextInst::default();
        parse_inst_line_into(line.as_bytes(), false, false, imm, &mut out).map(|_| out)
    }

    /// Mode 1 with one field after the base: a stride when the file's lines carry no
    /// immediate, an error when they do (stride or immediate missing) or when nothing has
    /// shown it yet (ambiguous), never an immediate silently taken as the stride.
    #[test]
    fn mode_1_with_one_field_after_the_base_is_decided_by_the_file() {
        let l = "0050 ffffffff 1 R8 LDG.E.128 1 R2 16 1 0x7f2000010000 16 ";
        let i = parse_with(l, ImmField::Absent).unwrap();
        assert_eq!(
            i.addrs,
            TextAddrs::Stride {
                base: 0x7f20_0001_0000,
                stride: 16
            }
        );
        assert_eq!(i.imm, None);
        let e = parse_with(l, ImmField::Present).unwrap_err();
        assert!(e.0.contains("stride or the immediate is missing"), "{e}");
        let e = parse_with(l, ImmField::Undecided).unwrap_err();
        assert!(e.0.contains("ambiguous"), "{e}");
        let two = "0050 ffffffff 1 R8 LDG.E.128 1 R2 16 1 0x7f2000010000 16 0 ";
        for imm in [ImmField::Present, ImmField::Undecided] {
            let i = parse_with(two, imm).unwrap();
            assert_eq!(i.imm, Some(0));
        }
        assert!(parse_with(two, ImmField::Absent).is_err());
    }

    #[test]
    fn a_missing_or_extra_immediate_is_an_error_once_the_file_decided() {
        let no_imm = "0000 ffffffff 1 R1 IMAD.MOV.U32 2 R255 R255 0 ";
        let e = parse_with(no_imm, ImmField::Present).unwrap_err();
        assert!(e.0.contains("immediate"), "{e}");
        assert_eq!(parse_with(no_imm, ImmField::Undecided).unwrap().imm, None);
        let imm = "0000 ffffffff 1 R1 IMAD.MOV.U32 2 R255 R255 0 7 ";
        let e = parse_with(imm, ImmField::Absent).unwrap_err();
        assert!(e.0.contains("no immediate"), "{e}");
        assert_eq!(parse_with(imm, ImmField::Undecided).unwrap().imm, Some(7));
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse_inst_line(b"0010 ffffffff 1 R4 LDG.E 2 R4 4 1 0x10 4 0", false).unwrap_err();
        assert!(e.0.contains("source register 2 of 2"), "{e}");
        let e = parse_inst_line(b"0010 fffgffff 0 EXIT 0 0", false).unwrap_err();
        assert!(e.0.contains("hexadecimal"), "{e}");
        let e = parse_inst_line(b"0010 ffffffff 0 EXIT 0 0 0 7", false).unwrap_err();
        assert!(e.0.contains("unexpected"), "{e}");
    }
}
