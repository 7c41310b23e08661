//! The columnar encoding of CTAs inside a chunk (DESIGN.md section 7).
//!
//! A decompressed chunk is
//! `varint n_ctas, n_ctas × varint cta_len, CTA records`, so any CTA can be decoded on its
//! own once its chunk is decompressed. A CTA record is its id, optional cluster info and
//! its warps; a warp is three columns, each a run of LEB128 varints:
//!
//! - **static column**: per instruction, `zigzag(slot - (prev_slot + 1))`, where `slot`
//!   indexes the kernel's static instruction table (PC, opcode, registers, width,
//!   immediate, line). Straight-line code encodes as a run of zero bytes.
//! - **mask column**: per instruction, [`mask_code`] of the mask after the previous one
//!   (starting from all-ones): 0 same, 1 all lanes, 2 none, else `3 + (mask XOR prev)`
//!   (version 1: `mask XOR prev`).
//! - **address column**: per memory instruction, the address mode byte, then
//!   the base coded against the previous base of the same static instruction in this CTA
//!   (version 2: `zigzag((base - prev) - (prev - prev_prev))`, the change of the step, the
//!   absolute base at first use; version 1: `zigzag(base - prev)`), then for mode 1
//!   `zigzag(stride)`, for modes 0 and 2 one
//!   `zigzag(delta)` per further address. Loop iterations and neighbouring warps therefore
//!   encode as small repeating deltas that zstd then removes.
//!
//! Address modes are those of the Accel-Sim tracer: 0 lists one address per active lane,
//! 1 is base + stride over the active lanes, 2 is base + signed deltas from the previous
//! active lane. The mode is kept so that export reproduces the original line.

use crate::columns::{
    decode_addrs, one_byte_entries, read_operands, slot_check, MaskWalk, SlotWalk, WarpColumns,
};
use crate::opcode::OpClass;
use std::ops::Range;

/// Accel-Sim address mode 0: one address per active lane.
pub const ADDR_LIST: u8 = 0;
/// Accel-Sim address mode 1: base and stride over the active lanes.
pub const ADDR_STRIDE: u8 = 1;
/// Accel-Sim address mode 2: base and signed deltas between consecutive active lanes.
pub const ADDR_DELTA: u8 = 2;

/// Error found while decoding the bytes of a chunk (after its checksum passed, this means
/// a writer bug or a file crafted to pass the checksum).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub &'static str);

type CResult<T> = Result<T, CodecError>;

#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// [`unzigzag`] of a one-byte varint, by the byte (entries past 127 unused): a delta in one
/// load, where most list-mode address deltas and static-column entries are one byte.
pub(crate) static UNZIGZAG_BYTE: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 128 {
        t[i] = unzigzag(i as u64) as u64;
        i += 1;
    }
    t
};

/// The high bit of each byte of a word: a word of one-byte varints has none set.
pub(crate) const HIGH: u64 = 0x8080_8080_8080_8080;

/// A read cursor over a byte slice.
#[derive(Clone, Copy)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline(always)]
    pub fn varint(&mut self) -> CResult<u64> {
        // Fast paths: one byte (most slot and mask entries) and two bytes (most address
        // deltas), without a call.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
            if let Some(&b1) = self.buf.get(self.pos + 1) {
                if b1 < 0x80 {
                    self.pos += 2;
                    return Ok((b & 0x7f) as u64 | (b1 as u64) << 7);
                }
                if let Some(&b2) = self.buf.get(self.pos + 2) {
                    if b2 < 0x80 {
                        self.pos += 3;
                        return Ok((b & 0x7f) as u64
                            | ((b1 & 0x7f) as u64) << 7
                            | (b2 as u64) << 14);
                    }
                }
            }
        }
        self.varint_slow()
    }

    #[cold]
    #[inline(never)]
    fn varint_slow(&mut self) -> CResult<u64> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or(CodecError("varint runs past the end of its column"))?;
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(CodecError("varint overflows 64 bits"));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(CodecError("varint longer than 10 bytes"));
            }
        }
    }

    /// Skips `n` varints, with the checks (and errors) of as many [`Cursor::varint`]s:
    /// for values only checked, not used (a CTA's first pass), thirty-two or eight bytes
    /// at a time.
    #[inline]
    pub fn skip_varints(&mut self, mut n: u64) -> CResult<()> {
        const ONES: u64 = 0x0101_0101_0101_0101;
        while n > 0 {
            if let Some(w) = self.words::<32>() {
                let mut high = [0; 4];
                for (h, c) in high.iter_mut().zip(w.chunks_exact(8)) {
                    *h = c.first_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c)) & HIGH;
                }
                // One-byte varints first: all those to skip (a list of small deltas).
                let lead = high
                    .iter()
                    .position(|&h| h != 0)
                    .map_or(32, |i| 8 * i + high[i].trailing_zeros() as usize / 8);
                if lead as u64 >= n {
                    self.pos += n as usize;
                    return Ok(());
                }
                // Thirty-two bytes from a varint boundary to the end of a varint (the last
                // byte ends one), holding at most eight continuation bytes, so no varint
                // of ten bytes or more (none that can overflow): all are valid, and only
                // counted (a list of one-byte deltas and a longer one or two).
                let t: u64 = high.iter().map(|&h| (h ^ HIGH) >> 7).sum();
                // Byte sums of at most 32: no carry between bytes.
                let ends = t.wrapping_mul(ONES) >> 56;
                if w[31] < 0x80 && ends >= 24 && ends <= n {
                    self.pos += 32;
                    n -= ends;
                    continue;
                }
            }
            let word = self
                .buf
                .get(self.pos..)
                .and_then(|r| r.first_chunk::<8>())
                .map(|w| u64::from_le_bytes(*w));
            if n >= 8 && word.is_some_and(|w| w & HIGH == 0) {
                // Eight one-byte varints (most list addresses): no counting.
                self.pos += 8;
                n -= 8;
                continue;
            }
            // Each byte below 0x80 ends a varint; those ending in this word began in it
            // (the word starts at a varint boundary), so are at most 8 bytes: no overflow.
            let ends = word.map_or(0, |w| !w & HIGH);
            if ends == 0 {
                // A varint of 8 bytes or more, or the column's last bytes: exact checks.
                self.varint()?;
                n -= 1;
                continue;
            }
            // Byte i of `upto`: the varints ending in bytes 0..=i (a multiply, not a
            // popcount, which baseline x86-64 lacks).
            let upto = (ends >> 7).wrapping_mul(ONES);
            let k = upto >> 56;
            if k >= n {
                // The first byte whose count reaches n (no byte carries: counts <= 8).
                let reached = upto.wrapping_add((0x80 - n).wrapping_mul(ONES)) & HIGH;
                self.pos += (reached.trailing_zeros() / 8 + 1) as usize;
                return Ok(());
            }
            self.pos += ((63 - ends.leading_zeros()) / 8 + 1) as usize;
            n -= k;
        }
        Ok(())
    }

    /// The next `N` bytes, if there are as many (not consumed).
    #[inline(always)]
    pub(crate) fn words<const N: usize>(&self) -> Option<&'a [u8; N]> {
        self.buf.get(self.pos..)?.first_chunk::<N>()
    }

    /// The longest run of one-byte varints among the next `n` (consumed).
    #[inline]
    pub fn one_byte_varints(&mut self, n: u32) -> &'a [u8] {
        let r = self.buf.get(self.pos..).unwrap_or(&[]);
        let r = &r[..r.len().min(n as usize)];
        let run = &r[..r.iter().position(|&b| b >= 0x80).unwrap_or(r.len())];
        self.pos += run.len();
        run
    }

    #[inline]
    pub fn u32(&mut self) -> CResult<u32> {
        u32::try_from(self.varint()?).map_err(|_| CodecError("value does not fit 32 bits"))
    }

    #[inline]
    pub fn byte(&mut self) -> CResult<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or(CodecError("byte past the end of its column"))?;
        self.pos += 1;
        Ok(b)
    }

    /// All its bytes, read or not.
    #[inline]
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// The unread bytes, not consuming them.
    #[inline(always)]
    pub(crate) fn unread(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Consumes `k` bytes (at most those unread: see [`Cursor::unread`]).
    #[inline(always)]
    pub(crate) fn consume(&mut self, k: usize) {
        self.pos += k;
    }

    /// Bytes not yet read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The unread bytes, consuming them.
    #[inline]
    pub fn rest(&mut self) -> &'a [u8] {
        let r = self.buf.get(self.pos..).unwrap_or(&[]);
        self.pos = self.buf.len();
        r
    }

    /// Splits off the next `len` bytes as their own cursor.
    pub fn take(&mut self, len: usize) -> CResult<Cursor<'a>> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or(CodecError("column length runs past the end of the CTA"))?;
        let c = Cursor::new(&self.buf[self.pos..end]);
        self.pos = end;
        Ok(c)
    }
}

/// Cluster coordinates of a CTA (Hopper thread-block clusters; newer tracers only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClusterInfo {
    pub id: [u32; 3],
    pub cta: [u32; 3],
    pub rank: u32,
}

/// Addresses of one memory instruction as the encoder takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrRecord<'a> {
    /// Not a memory instruction (`mem_width` 0).
    None,
    /// Mode 1: the k-th active lane accesses `base + k * stride`.
    Stride { base: u64, stride: i32 },
    /// Mode 0 or 2 ([`ADDR_LIST`], [`ADDR_DELTA`]): the addresses of the active lanes in
    /// lane order. Mode 2 with an empty mask still carries its base: one address.
    List { mode: u8, addrs: &'a [u64] },
}

/// The decoded addresses of a warp instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addrs {
    None,
    /// The k-th active lane accesses `base + k * stride`.
    Stride {
        base: u64,
        stride: i32,
    },
    /// `DecodedCta::addrs[start..start + len]` are the active lanes' addresses in lane order.
    List {
        start: u32,
        len: u32,
    },
}

/// One warp instruction as the timing model reads it. Registers, opcode and width are in
/// the kernel's static table at `slot` ([`crate::KernelMeta::statics`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpInst {
    pub pc: u32,
    pub mask: u32,
    pub slot: u32,
    pub class: OpClass,
    /// The trace's address mode (0, 1, 2); meaningless when `addrs` is `None`.
    pub addr_mode: u8,
    pub addrs: Addrs,
}

/// One warp of a decoded CTA: its id and its instructions in `DecodedCta::insts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedWarp {
    pub warp_id: u32,
    pub insts: Range<usize>,
}

/// A decoded CTA; buffers are reused across calls to [`decode_cta`].
#[derive(Clone, Debug, Default)]
pub struct DecodedCta {
    pub id: [u32; 3],
    pub cluster: Option<ClusterInfo>,
    pub warps: Vec<DecodedWarp>,
    pub insts: Vec<WarpInst>,
    pub addrs: Vec<u64>,
    /// Per-lane operands of atomics (format version 2), see [`DecodedCta::operands_of`].
    pub operands: Vec<u64>,
    /// `(instruction index, start in operands)` for each instruction with operands.
    pub operand_index: Vec<(u32, u32)>,
    /// Decoder scratch: base-address state per static instruction.
    last_base: Vec<BaseState>,
}

impl PartialEq for DecodedCta {
    fn eq(&self, o: &Self) -> bool {
        self.id == o.id
            && self.cluster == o.cluster
            && self.warps == o.warps
            && self.insts == o.insts
            && self.addrs == o.addrs
            && self.operands == o.operands
            && self.operand_index == o.operand_index
    }
}

impl Eq for DecodedCta {}

impl DecodedCta {
    /// The per-lane operands of instruction `i` (index into `insts`): for each active lane
    /// in lane order, one value (two for compare-and-swap: compare, then new value).
    /// `None` when the instruction carries none (not an atomic, a kernel without recorded
    /// operands, or no active lane).
    pub fn operands_of(&self, i: usize, per_lane: u8) -> Option<&[u64]> {
        let k = self
            .operand_index
            .binary_search_by_key(&(i as u32), |&(x, _)| x)
            .ok()?;
        let start = self.operand_index[k].1 as usize;
        let n = self.insts[i].mask.count_ones() as usize * per_lane as usize;
        self.operands.get(start..start + n)
    }

    /// The instructions of warp `w` (position in listing order, not warp id).
    pub fn warp(&self, w: usize) -> &[WarpInst] {
        &self.insts[self.warps[w].insts.clone()]
    }

    /// Calls `f(lane, address)` for every active lane of a memory instruction, in lane
    /// order: the fast form of [`DecodedCta::lane_addrs`] (the address kind is matched
    /// once per instruction, not per lane).
    #[inline]
    pub fn for_each_lane_addr(&self, inst: &WarpInst, f: impl FnMut(u32, u64)) {
        self.lane_source().for_each_lane_addr(inst, f)
    }

    /// Where its instructions' list-mode addresses are.
    #[inline]
    pub fn lane_source(&self) -> LaneAddrSource<'_> {
        LaneAddrSource(&self.addrs)
    }

    /// Per active lane `(lane, address)` of a memory instruction, in lane order.
    #[inline]
    pub fn lane_addrs<'s>(&'s self, inst: &WarpInst) -> LaneAddrs<'s> {
        let list: &'s [u64] = match inst.addrs {
            Addrs::List { start, len } => &self.addrs[start as usize..(start + len) as usize],
            _ => &[],
        };
        LaneAddrs {
            mask: if matches!(inst.addrs, Addrs::None) {
                0
            } else {
                inst.mask
            },
            k: 0,
            addrs: inst.addrs,
            list,
        }
    }
}

/// The list-mode addresses that the [`Addrs::List`] of some instructions index (those of
/// a [`DecodedCta`], or of a [`crate::stream::WarpCursor`]'s buffer): with the instruction,
/// all that is needed to enumerate its lane addresses.
#[derive(Clone, Copy, Debug)]
pub struct LaneAddrSource<'a>(pub &'a [u64]);

impl LaneAddrSource<'_> {
    /// Calls `f(lane, address)` for every active lane of memory instruction `inst`, in
    /// lane order (the address kind is matched once per instruction, not per lane).
    #[inline]
    pub fn for_each_lane_addr(&self, inst: &WarpInst, mut f: impl FnMut(u32, u64)) {
        let mut m = inst.mask;
        match inst.addrs {
            Addrs::None => {}
            Addrs::Stride { base, stride } => {
                let step = stride as i64 as u64;
                let mut a = base;
                while m != 0 {
                    f(m.trailing_zeros(), a);
                    m &= m - 1;
                    a = a.wrapping_add(step);
                }
            }
            Addrs::List { start, len } => {
                let list = self
                    .0
                    .get(start as usize..(start + len) as usize)
                    .unwrap_or(&[]);
                for &a in list {
                    if m == 0 {
                        break;
                    }
                    f(m.trailing_zeros(), a);
                    m &= m - 1;
                }
            }
        }
    }
}

/// Iterator of [`DecodedCta::lane_addrs`].
pub struct LaneAddrs<'a> {
    mask: u32,
    k: usize,
    addrs: Addrs,
    list: &'a [u64],
}

impl Iterator for LaneAddrs<'_> {
    type Item = (u32, u64);
    #[inline]
    fn next(&mut self) -> Option<(u32, u64)> {
        if self.mask == 0 {
            return None;
        }
        let lane = self.mask.trailing_zeros();
        self.mask &= self.mask - 1;
        let k = self.k;
        self.k += 1;
        let addr = match self.addrs {
            Addrs::Stride { base, stride } => base.wrapping_add((k as i64 * stride as i64) as u64),
            Addrs::List { .. } => *self.list.get(k)?,
            Addrs::None => return None,
        };
        Some((lane, addr))
    }
}

/// Per static instruction, the previous base address in the CTA and the delta that led to
/// it: version 2 codes a base as the change of that delta ("delta of delta"), so a loop or
/// a run of warps stepping by a fixed amount codes as zeros.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BaseState {
    base: u64,
    delta: u64,
    seen: bool,
}

impl BaseState {
    /// The code of `base` (and the new state).
    #[inline]
    fn encode(&mut self, base: u64) -> u64 {
        let d = base.wrapping_sub(self.base);
        let code = if self.seen {
            d.wrapping_sub(self.delta)
        } else {
            base
        };
        *self = BaseState {
            base,
            delta: if self.seen { d } else { 0 },
            seen: true,
        };
        zigzag(code as i64)
    }

    /// The (version 2) code that [`BaseState::decode`] from this state turns into `base`.
    #[inline]
    pub(crate) fn code_of(&self, base: u64) -> u64 {
        let mut s = *self;
        s.encode(base)
    }

    /// Whether a base was decoded (or encoded) into it.
    #[inline]
    pub(crate) fn seen(&self) -> bool {
        self.seen
    }

    /// The state that `m` version-2 codes lead to from this one, when the same codes led
    /// from `from` to `to` (all three seen): each code adds itself to the delta and the
    /// delta to the base, so the deltas keep their difference and the bases' difference
    /// grows by it at each code.
    #[inline]
    pub(crate) fn follow(&self, from: &BaseState, to: &BaseState, m: u32) -> BaseState {
        let dd = self.delta.wrapping_sub(from.delta);
        BaseState {
            base: to
                .base
                .wrapping_add(self.base.wrapping_sub(from.base))
                .wrapping_add((m as u64).wrapping_mul(dd)),
            delta: to.delta.wrapping_add(dd),
            seen: true,
        }
    }

    /// The base coded by `v`: version 2 (`dod`) delta of delta, version 1 delta.
    #[inline]
    pub(crate) fn decode(&mut self, v: u64, dod: bool) -> u64 {
        let code = unzigzag(v) as u64;
        let d = if dod && self.seen {
            self.delta.wrapping_add(code)
        } else {
            code
        };
        let base = if dod && !self.seen {
            code
        } else {
            self.base.wrapping_add(d)
        };
        *self = BaseState {
            base,
            delta: if self.seen { d } else { 0 },
            seen: true,
        };
        base
    }
}

/// What the decoder needs to know of each static instruction.
#[derive(Clone, Copy, Debug)]
pub struct SlotInfo {
    pub pc: u32,
    pub class: OpClass,
    pub has_mem: bool,
    /// Operands recorded per active lane (0 unless the kernel records operands and this
    /// is an atomic or reduction: 1, or 2 for compare-and-swap).
    pub operands: u8,
}

impl SlotInfo {
    /// Instruction `slot` (this static instruction) as the static column gives it, before
    /// the mask and address columns fill in the rest.
    #[inline]
    pub(crate) fn inst(&self, slot: u32) -> WarpInst {
        WarpInst {
            pc: self.pc,
            mask: 0,
            slot,
            class: self.class,
            addr_mode: 0,
            addrs: Addrs::None,
        }
    }

    /// The decoder's view of every static instruction of `k`, in slot order.
    pub fn table(k: &crate::KernelMeta) -> Vec<SlotInfo> {
        k.statics
            .iter()
            .map(|s| {
                // An index naming a missing opcode is rejected when the index is opened.
                let info = k.opcodes.get(s.opcode as usize);
                SlotInfo {
                    pc: s.pc,
                    class: info.map_or(OpClass::Other, |o| o.class),
                    has_mem: s.mem_width > 0,
                    operands: match info {
                        Some(o) if k.records_operands => operands_at(k, s.pc, o),
                        _ => 0,
                    },
                }
            })
            .collect()
    }
}

/// Operands per active lane an atomic or reduction records: 2 for compare-and-swap
/// (compare value, new value), 1 for the others, 0 for non-atomics.
pub fn operands_per_lane(op: &crate::OpcodeInfo) -> u8 {
    match op.class {
        OpClass::AtomicGlobal
        | OpClass::AtomicShared
        | OpClass::AtomicGeneric
        | OpClass::Reduction => {
            if op.atomic == crate::AtomicOp::Cas {
                2
            } else {
                1
            }
        }
        _ => 0,
    }
}

/// Whether `op` is a strong global store (`STG.E.STRONG.GPU`): in a kernel that records
/// operands it carries the value each active lane stores (format version 3), so that the
/// timing model can update a sync word it writes.
pub fn is_strong_store(op: &crate::OpcodeInfo) -> bool {
    op.class == OpClass::StoreGlobal && op.name.split('.').any(|m| m == "STRONG")
}

/// Operands per active lane an instruction at `pc` of kernel `k` records: an atomic's
/// ([`operands_per_lane`]), a strong store's stored value ([`is_strong_store`]), or for the
/// exit test of one of the kernel's regions one constant per exit term (format version 3)
/// and, for a branch or work queue, the template value ([`crate::SpinRegion::test_operands`],
/// format version 4), or an mbarrier instruction's count or phase ([`crate::MBarrierOp`],
/// format version 4). Callers ask only for kernels that record operands.
pub fn operands_at(k: &crate::KernelMeta, pc: u32, op: &crate::OpcodeInfo) -> u8 {
    let n = operands_per_lane(op);
    if n > 0 {
        return n;
    }
    if is_strong_store(op) {
        return 1;
    }
    if k.mbarriers.iter().any(|m| m.pc == pc) {
        return 1;
    }
    if k.spin_regions.is_empty() {
        return 0;
    }
    k.spin_regions
        .iter()
        .find(|r| r.test_pc == pc)
        .map_or(0, |r| r.test_operands().min(u8::MAX as usize) as u8)
}

/// Version-2 code of `mask` after `prev`: 0 same, 1 all lanes, 2 no lane (a predicated-off
/// instruction and back cost one byte each), else `3 + (mask ^ prev)`. Version 1 coded
/// `mask ^ prev` alone.
#[inline]
pub fn mask_code(prev: u32, mask: u32) -> u64 {
    if mask == prev {
        0
    } else if mask == u32::MAX {
        1
    } else if mask == 0 {
        2
    } else {
        3 + (mask ^ prev) as u64
    }
}

/// Inverse of [`mask_code`] (`v2`), or of version 1's plain XOR.
#[inline]
pub(crate) fn apply_mask_code(prev: u32, v: u64, v2: bool) -> CResult<u32> {
    let x = |d: u64| {
        u32::try_from(d)
            .map(|d| prev ^ d)
            .map_err(|_| CodecError("mask wider than 32 bits"))
    };
    if !v2 {
        return x(v);
    }
    match v {
        0 => Ok(prev),
        1 => Ok(u32::MAX),
        2 => Ok(0),
        _ => x(v - 3),
    }
}

/// [`apply_mask_code`] of a one-byte code (which always fits).
#[inline(always)]
pub(crate) fn apply_mask_byte(prev: u32, b: u8, v2: bool) -> u32 {
    match b {
        _ if !v2 => prev ^ b as u32,
        0 => prev,
        1 => u32::MAX,
        2 => 0,
        _ => prev ^ (b as u32 - 3),
    }
}

/// `mask.count_ones()` out of line: inline, the compiler folds [`list_len`]'s full-mask
/// case into the population count it is there to avoid.
#[inline(never)]
fn lanes(mask: u32) -> u32 {
    mask.count_ones()
}

/// Number of addresses a mode-0/2 record carries for `mask`.
#[inline]
pub fn list_len(mode: u8, mask: u32) -> u32 {
    // All lanes (the common case) without a population count, which baseline x86-64 does
    // in a dozen instructions.
    let n = if mask == u32::MAX { 32 } else { lanes(mask) };
    if mode == ADDR_DELTA {
        n.max(1)
    } else {
        n
    }
}

/// Encoder of one CTA record. Reused across CTAs; see the module docs for the layout.
#[derive(Default)]
pub struct CtaEncoder {
    out: Vec<u8>,
    warps: Vec<u8>,
    n_warps: u32,
    slot_col: Vec<u8>,
    mask_col: Vec<u8>,
    addr_col: Vec<u8>,
    operand_col: Vec<u8>,
    warp_id: u32,
    n_insts: u64,
    prev_slot: i64,
    prev_mask: u32,
    last_base: Vec<BaseState>,
    touched: Vec<u32>,
}

impl CtaEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a CTA record.
    pub fn begin_cta(&mut self, id: [u32; 3], cluster: Option<ClusterInfo>) {
        for &s in &self.touched {
            self.last_base[s as usize] = BaseState::default();
        }
        self.touched.clear();
        self.warps.clear();
        self.n_warps = 0;
        self.out.clear();
        for v in id {
            put_varint(&mut self.out, v as u64);
        }
        match cluster {
            None => self.out.push(0),
            Some(c) => {
                self.out.push(1);
                for v in c.id.iter().chain(c.cta.iter()).chain([c.rank].iter()) {
                    put_varint(&mut self.out, *v as u64);
                }
            }
        }
    }

    pub fn begin_warp(&mut self, warp_id: u32) {
        self.warp_id = warp_id;
        self.n_insts = 0;
        self.prev_slot = -1;
        self.prev_mask = u32::MAX;
        self.slot_col.clear();
        self.mask_col.clear();
        self.addr_col.clear();
        self.operand_col.clear();
    }

    /// Appends the per-lane operands of the instruction just pushed (format version 2).
    pub fn push_operands(&mut self, operands: &[u64]) {
        for &v in operands {
            put_varint(&mut self.operand_col, zigzag(v as i64));
        }
    }

    /// Appends one instruction of the current warp. `addrs` must be `None` exactly when the
    /// static instruction has `mem_width == 0`.
    #[inline]
    pub fn push(&mut self, slot: u32, mask: u32, addrs: AddrRecord<'_>) {
        self.n_insts += 1;
        put_varint(
            &mut self.slot_col,
            zigzag(slot as i64 - (self.prev_slot + 1)),
        );
        self.prev_slot = slot as i64;
        put_varint(&mut self.mask_col, mask_code(self.prev_mask, mask));
        self.prev_mask = mask;
        let (mode, base) = match addrs {
            AddrRecord::None => return,
            AddrRecord::Stride { base, .. } => (ADDR_STRIDE, base),
            AddrRecord::List { mode, addrs } => match addrs.first() {
                Some(&b) => (mode, b),
                None => {
                    self.addr_col.push(mode);
                    return;
                }
            },
        };
        let s = slot as usize;
        if s >= self.last_base.len() {
            self.last_base.resize(s + 1, BaseState::default());
        }
        if !self.last_base[s].seen {
            self.touched.push(slot);
        }
        let code = self.last_base[s].encode(base);
        self.addr_col.push(mode);
        put_varint(&mut self.addr_col, code);
        match addrs {
            AddrRecord::Stride { stride, .. } => {
                put_varint(&mut self.addr_col, zigzag(stride as i64));
            }
            AddrRecord::List { addrs, .. } => {
                for w in addrs.windows(2) {
                    put_varint(&mut self.addr_col, zigzag(w[1].wrapping_sub(w[0]) as i64));
                }
            }
            AddrRecord::None => {}
        }
    }

    /// Closes the current warp, appending its columns to the CTA record.
    pub fn end_warp(&mut self) {
        self.n_warps += 1;
        let w = &mut self.warps;
        put_varint(w, self.warp_id as u64);
        put_varint(w, self.n_insts);
        put_varint(w, self.slot_col.len() as u64);
        put_varint(w, self.mask_col.len() as u64);
        put_varint(w, self.addr_col.len() as u64);
        put_varint(w, self.operand_col.len() as u64);
        w.extend_from_slice(&self.slot_col);
        w.extend_from_slice(&self.mask_col);
        w.extend_from_slice(&self.addr_col);
        w.extend_from_slice(&self.operand_col);
    }

    /// Closes the CTA and returns its record (valid until the next `begin_cta`).
    pub fn finish_cta(&mut self) -> &[u8] {
        put_varint(&mut self.out, self.n_warps as u64);
        self.out.extend_from_slice(&self.warps);
        &self.out
    }
}

/// Splits a decompressed chunk into its CTA records.
pub fn split_chunk(raw: &[u8]) -> CResult<Vec<&[u8]>> {
    let mut c = Cursor::new(raw);
    let n = c.varint()? as usize;
    if n > raw.len() {
        return Err(CodecError("CTA count larger than the chunk"));
    }
    let mut lens = Vec::with_capacity(n);
    for _ in 0..n {
        lens.push(c.varint()? as usize);
    }
    let mut out = Vec::with_capacity(n);
    for len in lens {
        let sub = c.take(len)?;
        out.push(sub.buf);
    }
    if !c.is_empty() {
        return Err(CodecError("bytes left after the last CTA of the chunk"));
    }
    Ok(out)
}

/// Assembles a decompressed chunk from CTA records.
pub fn join_chunk(records: &[u8], lens: &[u32], out: &mut Vec<u8>) {
    out.clear();
    put_varint(out, lens.len() as u64);
    for &l in lens {
        put_varint(out, l as u64);
    }
    out.extend_from_slice(records);
}

/// Reads a CTA record's header: the CTA id and, when present, its cluster.
pub(crate) fn read_cta_header(c: &mut Cursor<'_>) -> CResult<([u32; 3], Option<ClusterInfo>)> {
    let id = [c.u32()?, c.u32()?, c.u32()?];
    let cluster = match c.byte()? {
        0 => None,
        1 => Some(ClusterInfo {
            id: [c.u32()?, c.u32()?, c.u32()?],
            cta: [c.u32()?, c.u32()?, c.u32()?],
            rank: c.u32()?,
        }),
        _ => return Err(CodecError("bad CTA flags byte")),
    };
    Ok((id, cluster))
}

/// Decodes one CTA record of a file of format `version` into `out` (its buffers are
/// reused).
pub fn decode_cta(
    rec: &[u8],
    slots: &[SlotInfo],
    version: u32,
    out: &mut DecodedCta,
) -> CResult<()> {
    out.warps.clear();
    out.insts.clear();
    out.addrs.clear();
    out.operands.clear();
    out.operand_index.clear();
    let mut c = Cursor::new(rec);
    (out.id, out.cluster) = read_cta_header(&mut c)?;
    let n_warps = c.varint()?;
    let mut last_base = std::mem::take(&mut out.last_base);
    last_base.clear();
    last_base.resize(slots.len(), BaseState::default());
    let res = decode_warps(&mut c, n_warps, slots, version, &mut last_base, out);
    out.last_base = last_base;
    res?;
    if !c.is_empty() {
        return Err(CodecError("bytes left after the CTA's last warp"));
    }
    Ok(())
}

#[inline]
fn decode_warps(
    c: &mut Cursor<'_>,
    n_warps: u64,
    slots: &[SlotInfo],
    version: u32,
    last_base: &mut [BaseState],
    out: &mut DecodedCta,
) -> CResult<()> {
    let v2 = version >= 2;
    for _ in 0..n_warps {
        let warp_id = c.u32()?;
        let mut cols = WarpColumns::read(c, v2)?;
        let n = cols.n;
        let start = out.insts.len();
        // Column by column: each loop keeps few values live, which is what makes decoding
        // fast (one pass over all columns at once spills registers on x86-64).
        out.insts.reserve(n);
        let mut walk = SlotWalk::START;
        if let Some(bytes) = one_byte_entries(&cols.slots, n) {
            cols.slots.consume(n);
            let mut bad = false;
            out.insts.extend(
                walk.bytes(bytes, slots, &mut bad)
                    .map(|(slot, info)| info.inst(slot)),
            );
            slot_check(bad)?;
        } else {
            for _ in 0..n {
                let (slot, info) = walk.next(&mut cols.slots, slots)?;
                out.insts.push(info.inst(slot));
            }
        }
        let mut masks = MaskWalk::new(u32::MAX, v2);
        if let Some(bytes) = one_byte_entries(&cols.masks, n) {
            cols.masks.consume(n);
            for (inst, &b) in out.insts[start..].iter_mut().zip(bytes) {
                inst.mask = masks.byte(b);
            }
        } else {
            for inst in &mut out.insts[start..] {
                inst.mask = masks.next(&mut cols.masks)?;
            }
        }
        if !cols.addrs.is_empty() {
            for inst in &mut out.insts[start..] {
                // In range: checked by the first loop.
                if slots[inst.slot as usize].has_mem {
                    (inst.addr_mode, inst.addrs) = decode_addrs(
                        &mut cols.addrs,
                        &mut last_base[inst.slot as usize],
                        inst.mask,
                        v2,
                        &mut out.addrs,
                    )?;
                }
            }
        } else if out.insts[start..]
            .iter()
            .any(|i| slots[i.slot as usize].has_mem)
        {
            return Err(CodecError("memory instruction without its addresses"));
        }
        if !cols.operands.is_empty() {
            read_operands(
                &mut cols.operands,
                &out.insts[start..],
                slots,
                start as u32,
                0,
                &mut out.operands,
                &mut out.operand_index,
            )?;
        }
        cols.finish()?;
        out.warps.push(DecodedWarp {
            warp_id,
            insts: start..out.insts.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::{decode_addrs, AddrBuf};

    #[test]
    fn varint_roundtrip_edges() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(Cursor::new(&b).varint().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -4096] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    /// `skip_varints(n)` agrees with `n` calls of `varint` (position, and error or not)
    /// on every buffer, malformed ones included; so do the one-byte runs.
    #[test]
    fn skipping_agrees_with_reading() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 80) as usize;
            // Mostly short varints, some long runs of continuation bytes and 10-byte ones;
            // continuation bytes common or rare.
            let high = [0x00, 0x80, 0xff, 0x40][(x >> 8) as usize % 4] as u8;
            let every = if (x >> 16).is_multiple_of(2) { 3 } else { 13 };
            let mut y = x;
            let buf: Vec<u8> = (0..len)
                .map(|i| {
                    y = y.rotate_left(7) ^ (i as u64);
                    let b = (y as u8) & 0x7f;
                    if (y >> 20).is_multiple_of(every) {
                        b | high & 0x80
                    } else {
                        b | if round.is_multiple_of(5) { 0x80 } else { 0 }
                    }
                })
                .collect();
            for n in (0..12u64).chain([20, 24, 27, 29, 31, 32, 33, 40, 56, 70]) {
                let mut a = Cursor::new(&buf);
                let ra: CResult<()> = (0..n).try_for_each(|_| a.varint().map(|_| ()));
                let mut b = Cursor::new(&buf);
                let rb = b.skip_varints(n);
                assert_eq!(ra.is_ok(), rb.is_ok(), "{buf:x?} n={n}");
                if ra.is_ok() {
                    assert_eq!(a.pos(), b.pos(), "{buf:x?} n={n}");
                }
                let mut c = Cursor::new(&buf);
                let run = c.one_byte_varints(n as u32);
                assert!(run.len() <= n as usize && run.iter().all(|&b| b < 0x80));
                assert_eq!(c.pos(), run.len());
                assert!(run.len() == n as usize || buf.get(run.len()).is_none_or(|&b| b >= 0x80));
            }
        }
        // A ten-byte varint among one-byte ones in a 32-byte window, at the limit and
        // past it, and an eleven-byte one.
        for long in [&[0xffu8; 9][..], &[0x80; 10][..]] {
            for last in [1u8, 2] {
                let mut b = long.to_vec();
                b.push(last);
                b.resize(40, 3);
                for n in [23, 24, 30] {
                    let mut a = Cursor::new(&b);
                    let ra: CResult<()> = (0..n).try_for_each(|_| a.varint().map(|_| ()));
                    let mut c = Cursor::new(&b);
                    let rc = c.skip_varints(n);
                    assert_eq!(ra.is_ok(), rc.is_ok(), "{b:x?} n={n}");
                    assert!(ra.is_err() || a.pos() == c.pos());
                }
            }
        }
        // Ten-byte varints (the longest), exactly at the limit and past it.
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX);
        put_varint(&mut b, 5);
        assert!(Cursor::new(&b).skip_varints(2).is_ok());
        b[9] = 2;
        assert!(Cursor::new(&b).skip_varints(2).is_err());
    }

    /// List addresses decode as their deltas say, into a vector or in place, whatever the
    /// mix of one-byte and longer deltas and whatever follows them; a column cut inside a
    /// list is an error, not a panic.
    #[test]
    fn address_lists_decode_in_place() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = AddrBuf::default();
        for _ in 0..5000 {
            let n = 1 + next() % 32;
            let mask = (u64::MAX >> (64 - n)) as u32;
            let mut want = vec![next() >> (next() % 64)];
            for _ in 1..n {
                let d = (match next() % 8 {
                    0 => next(),
                    1 => next() % 2000,
                    _ => next() % 128,
                } as i64)
                    .wrapping_sub(64);
                want.push(want[want.len() - 1].wrapping_add(d as u64));
            }
            let mut col = vec![ADDR_LIST];
            put_varint(&mut col, zigzag(want[0] as i64));
            for w in want.windows(2) {
                put_varint(&mut col, zigzag(w[1].wrapping_sub(w[0]) as i64));
            }
            let list_end = col.len();
            for _ in 0..next() % 12 {
                col.push(next() as u8);
            }
            let mut v = vec![7u64];
            let mut c = Cursor::new(&col);
            let r = decode_addrs(&mut c, &mut BaseState::default(), mask, true, &mut v);
            assert_eq!(
                r,
                Ok((
                    ADDR_LIST,
                    Addrs::List {
                        start: 1,
                        len: n as u32
                    }
                ))
            );
            assert_eq!((&v[1..], c.pos()), (&want[..], list_end));
            // In place, after a longer list left the buffer longer.
            buf.set(&[1, 2, 3]);
            let mut c = Cursor::new(&col);
            let r = decode_addrs(&mut c, &mut BaseState::default(), mask, true, &mut buf);
            assert_eq!(
                r,
                Ok((
                    ADDR_LIST,
                    Addrs::List {
                        start: 3,
                        len: n as u32
                    }
                ))
            );
            assert_eq!((&buf.as_slice()[3..], c.pos()), (&want[..], list_end));
            let cut = (next() % list_end as u64) as usize;
            let mut c = Cursor::new(&col[..cut]);
            buf.clear();
            assert!(decode_addrs(&mut c, &mut BaseState::default(), mask, true, &mut buf).is_err());
        }
    }

    /// A strong store carries one operand per active lane (the stored value) in a kernel
    /// that records operands, and a plain store none; the writer demands them and the
    /// reader gives them back.
    #[test]
    fn strong_stores_carry_their_values() {
        use crate::{
            DeviceInfo, KernelMeta, OpcodeInfo, RawInst, TraceFile, TraceWriter, WriterOptions,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tst");
        let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
        w.add_device(DeviceInfo {
            source: "kernelslist.g".into(),
        });
        let mut meta = KernelMeta::new("k", [1, 1, 1], [32, 1, 1]);
        meta.records_operands = true;
        w.begin_kernel(meta).unwrap();
        let strong = OpcodeInfo::simple("STG.E.STRONG.GPU", OpClass::StoreGlobal);
        let plain = OpcodeInfo::simple("STG.E", OpClass::StoreGlobal);
        assert!(is_strong_store(&strong) && !is_strong_store(&plain));
        w.add_opcode(strong).unwrap();
        w.add_opcode(plain).unwrap();
        w.begin_cta([0, 0, 0], None).unwrap();
        w.begin_warp(0).unwrap();
        let addrs = [0x1000u64, 0x1010];
        let inst = |pc, opcode| RawInst {
            pc,
            mask: 0b101,
            opcode,
            dsts: &[],
            srcs: &[],
            mem_width: 4,
            imm: None,
            line: None,
            addrs: AddrRecord::List {
                mode: ADDR_DELTA,
                addrs: &addrs,
            },
        };
        // Without its values the strong store is refused; the plain one takes none.
        assert!(w.push(&inst(0, 0)).is_err());
        assert!(w.push_with_operands(&inst(16, 1), &[5, 6]).is_err());
        w.push_with_operands(&inst(0, 0), &[7, 9]).unwrap();
        w.push(&inst(16, 1)).unwrap();
        w.end_warp().unwrap();
        w.end_cta().unwrap();
        w.end_kernel().unwrap();
        w.finish().unwrap();
        let t = TraceFile::open(&path).unwrap();
        let k = &t.kernels()[0];
        let ops: Vec<u8> = SlotInfo::table(k).iter().map(|s| s.operands).collect();
        assert_eq!(ops, [1, 0]);
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap();
        assert_eq!(d.operands_of(0, 1), Some(&[7u64, 9][..]));
        assert_eq!(d.operands_of(1, 0), None);
    }

    #[test]
    fn truncated_varint_is_an_error() {
        assert!(Cursor::new(&[0x80, 0x80]).varint().is_err());
        assert!(Cursor::new(&[0xff; 11]).varint().is_err());
    }

    #[test]
    fn for_each_lane_addr_agrees_with_lane_addrs() {
        let cta = DecodedCta {
            addrs: vec![7, 9, 11],
            ..DecodedCta::default()
        };
        for inst in [
            WarpInst {
                pc: 0,
                mask: 0b1011_0000,
                slot: 0,
                class: OpClass::LoadGlobal,
                addr_mode: ADDR_STRIDE,
                addrs: Addrs::Stride {
                    base: 100,
                    stride: -4,
                },
            },
            WarpInst {
                pc: 0,
                mask: 0b1_0011,
                slot: 0,
                class: OpClass::LoadGlobal,
                addr_mode: ADDR_LIST,
                addrs: Addrs::List { start: 0, len: 3 },
            },
        ] {
            let mut v = Vec::new();
            cta.for_each_lane_addr(&inst, |l, a| v.push((l, a)));
            assert_eq!(v, cta.lane_addrs(&inst).collect::<Vec<_>>());
        }
    }

    #[test]
    fn stride_lanes_follow_active_lanes() {
        let cta = DecodedCta::default();
        let inst = WarpInst {
            pc: 0,
            mask: 0b1011_0000,
            slot: 0,
            class: OpClass::LoadGlobal,
            addr_mode: ADDR_STRIDE,
            addrs: Addrs::Stride {
                base: 100,
                stride: -4,
            },
        };
        let v: Vec<_> = cta.lane_addrs(&inst).collect();
        assert_eq!(v, vec![(4, 100), (5, 96), (7, 92)]);
    }
}
