//! The one reader of a warp's columns (layout: [`crate::codec`]), which every decoder
//! walks: [`crate::codec::decode_cta`] (a whole CTA), the check pass of
//! [`crate::stream::CtaStream::new`] (which keeps each warp's first instructions) and
//! [`crate::stream::WarpCursor`] (a warp a few instructions at a time). Each decoder keeps
//! its own loops (they decode different amounts into different buffers), but reads the
//! warp's header, steps each column and checks its entries only here, so all of them
//! accept and refuse the same records.
//!
//! Hot: the entry steps are forced inline, and the one-byte forms let a caller decode a
//! run of entries in one `extend` (one capacity check, no varint continuation).

use crate::codec::{
    apply_mask_byte, apply_mask_code, list_len, unzigzag, Addrs, BaseState, CodecError, Cursor,
    SlotInfo, WarpInst, ADDR_DELTA, ADDR_LIST, ADDR_STRIDE, HIGH, UNZIGZAG_BYTE,
};
use crate::opcode::OpClass;

type CResult<T> = Result<T, CodecError>;

/// The header and the four columns of one warp in a CTA record.
pub(crate) struct WarpColumns<'a> {
    /// Its instruction count: at most the static column's length (each entry takes a byte
    /// at least), so bounded by the record.
    pub(crate) n: usize,
    pub(crate) slots: Cursor<'a>,
    pub(crate) masks: Cursor<'a>,
    pub(crate) addrs: Cursor<'a>,
    pub(crate) operands: Cursor<'a>,
    /// Offsets (in what `c` of [`WarpColumns::read`] reads) where the static, mask,
    /// address and operand columns start, and where the warp ends.
    pub(crate) at: [usize; 5],
}

impl<'a> WarpColumns<'a> {
    /// Reads a warp's header after its id, and splits off its columns. Format version 1
    /// (`v2` false) has no operand column.
    #[inline(always)]
    pub(crate) fn read(c: &mut Cursor<'a>, v2: bool) -> CResult<WarpColumns<'a>> {
        let n = c.varint()?;
        let slot_len = c.varint()? as usize;
        let mask_len = c.varint()? as usize;
        let addr_len = c.varint()? as usize;
        let operand_len = if v2 { c.varint()? as usize } else { 0 };
        let s0 = c.pos();
        let slots = c.take(slot_len)?;
        let m0 = c.pos();
        let masks = c.take(mask_len)?;
        let a0 = c.pos();
        let addrs = c.take(addr_len)?;
        let o0 = c.pos();
        let operands = c.take(operand_len)?;
        if n > slot_len as u64 {
            return Err(CodecError(
                "instruction count larger than the static column",
            ));
        }
        Ok(WarpColumns {
            n: n as usize,
            slots,
            masks,
            addrs,
            operands,
            at: [s0, m0, a0, o0, c.pos()],
        })
    }

    /// Checks that every column was read to its end (after the warp's last instruction).
    #[inline]
    pub(crate) fn finish(&self) -> CResult<()> {
        if !self.slots.is_empty()
            || !self.masks.is_empty()
            || !self.addrs.is_empty()
            || !self.operands.is_empty()
        {
            return Err(CodecError(
                "column has bytes left after the warp's last instruction",
            ));
        }
        Ok(())
    }
}

/// The next `n` entries of a static or mask column when each is one byte (not consumed):
/// straight-line code and short jumps; masks that stay, fill, empty or flip low lanes.
#[inline(always)]
pub(crate) fn one_byte_entries<'a>(col: &Cursor<'a>, n: usize) -> Option<&'a [u8]> {
    col.unread()
        .get(..n)
        .filter(|b| b.iter().fold(0, |a, &x| a | x) < 0x80)
}

/// The static instruction of an out-of-range index in a loop that flags it rather than
/// returning (see [`SlotWalk::bytes`]).
pub(crate) const NO_SLOT: SlotInfo = SlotInfo {
    pc: 0,
    class: OpClass::Other,
    has_mem: false,
    operands: 0,
};

const SLOT_RANGE: CodecError = CodecError("static instruction index out of range");

/// The static column's walk: an entry is `zigzag(slot - (prev + 1))`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotWalk {
    /// The previous entry's slot (-1 before a warp's first).
    pub(crate) prev: i64,
}

impl SlotWalk {
    /// Before a warp's first instruction.
    pub(crate) const START: SlotWalk = SlotWalk { prev: -1 };

    /// The next entry's slot and static instruction.
    #[inline(always)]
    pub(crate) fn next<'s>(
        &mut self,
        sc: &mut Cursor<'_>,
        slots: &'s [SlotInfo],
    ) -> CResult<(u32, &'s SlotInfo)> {
        self.prev = self
            .prev
            .wrapping_add(1)
            .wrapping_add(unzigzag(sc.varint()?));
        // A negative slot wraps to a huge index: `get` rejects both.
        let info = slots.get(self.prev as usize).ok_or(SLOT_RANGE)?;
        Ok((self.prev as u32, info))
    }

    /// The slots and static instructions of one-byte entries `bytes` (see
    /// [`one_byte_entries`]), branch-light: an index out of range sets `bad` and yields
    /// [`NO_SLOT`], for one check after the loop (see [`slot_check`]).
    #[inline(always)]
    pub(crate) fn bytes<'s>(
        &'s mut self,
        bytes: &'s [u8],
        slots: &'s [SlotInfo],
        bad: &'s mut bool,
    ) -> impl Iterator<Item = (u32, &'s SlotInfo)> + 's {
        bytes.iter().map(move |&b| {
            self.prev = self.prev.wrapping_add(1 + UNZIGZAG_BYTE[b as usize] as i64);
            let info = slots.get(self.prev as usize);
            *bad |= info.is_none();
            (self.prev as u32, info.unwrap_or(&NO_SLOT))
        })
    }
}

/// The error of a [`SlotWalk::bytes`] loop that set `bad`.
#[inline(always)]
pub(crate) fn slot_check(bad: bool) -> CResult<()> {
    if bad {
        Err(SLOT_RANGE)
    } else {
        Ok(())
    }
}

/// The mask column's walk (from all lanes at a warp's start): see
/// [`crate::codec::mask_code`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct MaskWalk {
    pub(crate) mask: u32,
    v2: bool,
}

impl MaskWalk {
    /// From `mask` (all lanes at a warp's start), for a file of format 2 or later (`v2`)
    /// or of format 1.
    #[inline(always)]
    pub(crate) fn new(mask: u32, v2: bool) -> MaskWalk {
        MaskWalk { mask, v2 }
    }

    /// The next entry's mask.
    #[inline(always)]
    pub(crate) fn next(&mut self, mc: &mut Cursor<'_>) -> CResult<u32> {
        self.mask = apply_mask_code(self.mask, mc.varint()?, self.v2)?;
        Ok(self.mask)
    }

    /// The mask of a one-byte entry (see [`one_byte_entries`]).
    #[inline(always)]
    pub(crate) fn byte(&mut self, b: u8) -> u32 {
        self.mask = apply_mask_byte(self.mask, b, self.v2);
        self.mask
    }
}

/// The operand column's entries of `insts` (their slots in range of `slots`): for each
/// with operands and an active lane, `(first + its position, where its operands start in
/// ops, less ops_base)` into `index` and its operands into `ops`.
#[inline]
pub(crate) fn read_operands(
    oc: &mut Cursor<'_>,
    insts: &[WarpInst],
    slots: &[SlotInfo],
    first: u32,
    ops_base: usize,
    ops: &mut Vec<u64>,
    index: &mut Vec<(u32, u32)>,
) -> CResult<()> {
    for (i, inst) in insts.iter().enumerate() {
        let per_lane = slots.get(inst.slot as usize).map_or(0, |s| s.operands) as u32;
        if per_lane == 0 || inst.mask == 0 {
            continue;
        }
        index.push((first + i as u32, (ops.len() - ops_base) as u32));
        for _ in 0..per_lane * inst.mask.count_ones() {
            ops.push(unzigzag(oc.varint()?) as u64);
        }
    }
    Ok(())
}

/// Slots past a list's end that [`decode_addrs`] may write (and leave as garbage): a step
/// decodes sixteen one-byte deltas whether or not all sixteen are one byte, and keeps
/// those that are.
const PAD: usize = 16;

/// Where [`decode_addrs`] writes a list's addresses.
pub(crate) trait AddrSink {
    /// Room for `n` more addresses and [`PAD`] slots after them: their start index and
    /// the slots.
    fn grow(&mut self, n: usize) -> (u32, &mut [u64]);
    /// Ends the list that [`AddrSink::grow`] made room for (`n` addresses).
    fn commit(&mut self, start: u32, n: usize);
}

impl AddrSink for Vec<u64> {
    #[inline]
    fn grow(&mut self, n: usize) -> (u32, &mut [u64]) {
        let s = self.len();
        self.resize(s + n + PAD, 0);
        (s as u32, &mut self[s..])
    }

    #[inline]
    fn commit(&mut self, start: u32, n: usize) {
        self.truncate(start as usize + n);
    }
}

/// Addresses decoded in place: `v[..len]` are the addresses; `v` keeps its length from one
/// use to the next (a cursor's buffer), so that a list neither fills nor checks capacity
/// per address.
#[derive(Clone, Debug, Default)]
pub(crate) struct AddrBuf {
    v: Vec<u64>,
    len: usize,
}

impl AddrBuf {
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u64] {
        self.v.get(..self.len).unwrap_or(&[])
    }

    /// Replaces the addresses with `a`.
    pub(crate) fn set(&mut self, a: &[u64]) {
        self.len = 0;
        if a.is_empty() {
            // No room made: a cursor without list addresses allocates none.
            return;
        }
        let (s, out) = self.grow(a.len());
        out[..a.len()].copy_from_slice(a);
        self.commit(s, a.len());
    }

    /// The addresses alone, as a vector.
    pub(crate) fn into_vec(mut self) -> Vec<u64> {
        self.v.truncate(self.len);
        self.v
    }

    #[cold]
    #[inline(never)]
    fn grow_slow(&mut self, e: usize) {
        self.v.resize(e.max(2 * self.v.len()), 0);
    }
}

impl AddrSink for AddrBuf {
    #[inline]
    fn grow(&mut self, n: usize) -> (u32, &mut [u64]) {
        let s = self.len;
        let e = s + n + PAD;
        if self.v.len() < e {
            self.grow_slow(e);
        }
        (s as u32, &mut self.v[s..e])
    }

    #[inline]
    fn commit(&mut self, start: u32, n: usize) {
        self.len = start as usize + n;
    }
}

/// Decodes the addresses of one memory instruction whose static instruction's base state
/// is `state`, appending list-mode addresses to `addrs`.
#[inline(always)]
pub(crate) fn decode_addrs(
    ac: &mut Cursor<'_>,
    state: &mut BaseState,
    mask: u32,
    dod: bool,
    addrs: &mut impl AddrSink,
) -> CResult<(u8, Addrs)> {
    let mode = ac.byte()?;
    match mode {
        ADDR_STRIDE => {
            let base = state.decode(ac.varint()?, dod);
            let stride = i32::try_from(unzigzag(ac.varint()?))
                .map_err(|_| CodecError("stride does not fit 32 bits"))?;
            Ok((mode, Addrs::Stride { base, stride }))
        }
        ADDR_LIST | ADDR_DELTA => {
            let len = list_len(mode, mask);
            let n = len as usize;
            // Written in place, not pushed: no capacity check per address.
            let (start, out) = addrs.grow(n);
            if n > 0 {
                decode_list(ac, state, dod, &mut out[..n + PAD])?;
            }
            addrs.commit(start, n);
            Ok((mode, Addrs::List { start, len }))
        }
        _ => Err(CodecError("unknown address mode")),
    }
}

/// Addresses after `a` by the deltas of bytes `w` into `o`, whether one-byte varints or
/// not; the first `min(ones, take)` are kept (`a` moves to the last of them), their count
/// returned.
#[inline(always)]
fn one_byte_deltas<const N: usize>(
    w: &[u8; N],
    o: &mut [u64; N],
    a: &mut u64,
    ones: usize,
    take: usize,
) -> usize {
    let mut b = *a;
    for (o, &x) in o.iter_mut().zip(w) {
        b = b.wrapping_add(UNZIGZAG_BYTE[x as usize]);
        *o = b;
    }
    let k = ones.min(take);
    if let Some(&last) = o.get(k.wrapping_sub(1)) {
        *a = last;
    }
    k
}

/// The base and deltas of a list of `out.len() - PAD` (at least one) addresses, into `out`.
#[inline(always)]
fn decode_list(
    ac: &mut Cursor<'_>,
    state: &mut BaseState,
    dod: bool,
    out: &mut [u64],
) -> CResult<()> {
    let n = out.len() - PAD;
    let mut a = state.decode(ac.varint()?, dod);
    out[0] = a;
    let mut i = 1;
    while i < n {
        // Lanes a few words apart (shared-memory tiles) take one byte per delta: sixteen
        // bytes at a time (eight near the column's end), each a table load and an add,
        // the addresses up to the first longer delta kept (those after it are
        // overwritten), then that one on its own.
        let take = (n - i).min(16);
        let k = if let (Some(w), Some(o)) = (ac.words::<16>(), out[i..].first_chunk_mut::<16>()) {
            let high = u128::from_le_bytes(*w) & ((HIGH as u128) << 64 | HIGH as u128);
            one_byte_deltas(w, o, &mut a, high.trailing_zeros() as usize / 8, take)
        } else if let (Some(w), Some(o)) = (ac.words::<8>(), out[i..].first_chunk_mut::<8>()) {
            let high = u64::from_le_bytes(*w) & HIGH;
            one_byte_deltas(w, o, &mut a, high.trailing_zeros() as usize / 8, take)
        } else {
            0
        };
        ac.consume(k);
        i += k;
        if k < take {
            a = a.wrapping_add(unzigzag(ac.varint()?) as u64);
            out[i] = a;
            i += 1;
        }
    }
    Ok(())
}

/// [`decode_addrs`] for a record only checked and stepped over: the same checks and base
/// state, but a list's addresses after its base are skipped, not decoded. Whether a base
/// was decoded (not for a list without lanes).
#[inline(always)]
pub(crate) fn skip_addrs(
    ac: &mut Cursor<'_>,
    state: &mut BaseState,
    mask: u32,
    dod: bool,
) -> CResult<bool> {
    let mode = ac.byte()?;
    match mode {
        ADDR_STRIDE => {
            state.decode(ac.varint()?, dod);
            i32::try_from(unzigzag(ac.varint()?))
                .map_err(|_| CodecError("stride does not fit 32 bits"))?;
            Ok(true)
        }
        ADDR_LIST | ADDR_DELTA => {
            let len = list_len(mode, mask);
            if len > 0 {
                state.decode(ac.varint()?, dod);
                ac.skip_varints(len as u64 - 1)?;
            }
            Ok(len > 0)
        }
        _ => Err(CodecError("unknown address mode")),
    }
}
