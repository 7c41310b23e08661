//! CTAs kept in their encoded form, each warp decoded incrementally: what a timing model
//! holds for its resident CTAs, so that memory follows the simulated state (the encoded
//! records are 15-20x smaller than [`DecodedCta`]s) and not the trace.
//!
//! A [`CtaStream`] is a copy of one CTA record (see [`crate::codec`]) with, per warp, the
//! offsets of its columns and the base-address states its address column starts from:
//! bases are coded against the previous base of the same static instruction *in the CTA*,
//! across warps in encoding order, so warp `w` cannot be decoded before the states warps
//! `0..w` leave are known. [`CtaStream::new`] finds them in one pass over the record, which
//! also checks every column as [`crate::codec::decode_cta`] does, so a corrupt record is
//! an error when the CTA is made, never while it runs. A [`WarpCursor`] then decodes one
//! warp a few instructions at a time into its own small buffer.

use crate::bounds::{AccessBounds, AccessFault, Outside};
use crate::codec::{
    read_cta_header, AddrRecord, Addrs, BaseState, ClusterInfo, CodecError, CtaEncoder, Cursor,
    DecodedCta, LaneAddrSource, SlotInfo, WarpInst,
};
use crate::columns::{
    decode_addrs, one_byte_entries, read_operands, skip_addrs, slot_check, AddrBuf, MaskWalk,
    SlotWalk, WarpColumns,
};
use crate::schema::RebasedAccess;
use std::sync::Arc;

type CResult<T> = Result<T, CodecError>;

/// Instructions a [`WarpCursor`] decodes at a time: enough to amortize a refill, few
/// enough that a warp's buffer stays small (at most 32 x 32 list-mode addresses).
const BUF_INSTS: u32 = 32;

/// Where one warp's decoding resumes after its first [`BUF_INSTS`] instructions, which
/// [`CtaStream::new`] decodes anyway while checking the record and keeps (its head), so
/// that starting a warp costs a copy, not a second decode.
#[derive(Clone, Debug)]
struct WarpHead {
    warp_id: u32,
    insts: u32,
    /// Record offsets of the first entry after the head of its static, mask, address and
    /// operand columns, each followed by the column's end.
    cols: [usize; 8],
    /// The static slot and mask of its last head instruction.
    prev_slot: i64,
    mask: u32,
    /// Its entries of [`CtaStream::bases`].
    bases: (usize, usize),
    /// Its head: ranges of [`CtaStream::head`] and the other head vectors.
    head: (usize, usize),
    head_addrs: (usize, usize),
    head_ops: (usize, usize),
    head_op_index: (usize, usize),
    /// Its entry of [`CtaStream::tmpls`] ([`NO_TEMPLATE`]: none).
    tmpl: u32,
    /// Bit `i`: its head instruction `i` has memory (for [`WarpCursor::start`]'s check).
    mem_head: u32,
}

/// [`WarpHead::tmpl`] of a warp without a [`Template`].
const NO_TEMPLATE: u32 = u32::MAX;

/// The static and mask columns after the head of a warp, decoded: kept for code that
/// several warps run (those of [`StaticMemo`]), so that their cursors copy instructions
/// rather than decode them again, and shared by the streams of those warps.
#[derive(Debug)]
struct Template {
    /// The instructions after the head, with their masks (no addresses).
    insts: Box<[WarpInst]>,
    /// Per [`BUF_INSTS`] of them, in order: bit `i` set when instruction `i` has memory.
    mem: Box<[u32]>,
    /// Per instruction, for those with memory, the index of its base state among the
    /// warp's ([`CtaStream::bases`], in the order of the memo's `mem_first`).
    base_at: Box<[u32]>,
}

impl Template {
    /// The template of a warp whose instructions after the head are `tail` (their slots
    /// in range of `slots`) and whose static instructions with memory there are, in order
    /// of first instance, `mem_first`. Made once per kernel or so: out of line.
    #[cold]
    #[inline(never)]
    fn new(tail: &[(u32, u32)], mem_first: &[u32], slots: &[SlotInfo]) -> Template {
        let insts: Box<[WarpInst]> = tail
            .iter()
            .map(|&(s, m)| {
                let mut inst = slots[s as usize].inst(s);
                inst.mask = m;
                inst
            })
            .collect();
        let mem = insts
            .chunks(BUF_INSTS as usize)
            .map(|c| {
                c.iter().enumerate().fold(0u32, |m, (i, inst)| {
                    m | (slots[inst.slot as usize].has_mem as u32) << i
                })
            })
            .collect();
        let mut at_slot = vec![u32::MAX; slots.len()];
        for (j, &s) in mem_first.iter().enumerate() {
            at_slot[s as usize] = j as u32;
        }
        let base_at = tail.iter().map(|&(s, _)| at_slot[s as usize]).collect();
        Template {
            insts,
            mem,
            base_at,
        }
    }
}

/// Warps longer than this (after their heads) get no [`Template`]: it costs 32 bytes an
/// instruction, shared, but held while any of their CTAs is.
const MAX_TEMPLATE: usize = 1 << 16;

/// Scratch of [`CtaStream::new_in`], reused across CTAs of any kernel.
#[derive(Default)]
pub struct StreamScratch {
    /// Per static slot, its base state as the pass goes (reset after each CTA).
    table: Vec<BaseState>,
    /// Per static slot, the `stamp` of the last warp that listed it in `mem_first`.
    seen: Vec<u64>,
    stamp: u64,
    /// The slots whose `table` entry the current CTA set.
    touched: Vec<u32>,
    /// The current warp's instructions after its head: static slot and mask.
    tail: Vec<(u32, u32)>,
    /// Those of them with memory.
    mem_tail: Vec<(u32, u32)>,
    /// The distinct static slots of `mem_tail`, in order of first instance.
    mem_first: Vec<u32>,
    /// Per memory instruction of the current warp's head (and so of its [`Twin`]): its
    /// index in the head, base code and stride.
    twin_codes: Vec<(u32, u64, i32)>,
    /// Per static slot, the bases its instances after the current warp's head decoded
    /// (reset after each CTA).
    counts: Vec<u32>,
    /// Per entry of `mem_first`, for the last warp taken whole (see `pass`): its slot,
    /// the bases its instances after the head decoded, and its base states before and
    /// after them.
    follow: Vec<(u32, u32, BaseState, BaseState)>,
    memo: StaticMemo,
}

/// The last warp whose static and mask columns [`CtaStream::new_in`] decoded and which
/// passed every check, what a warp with the same columns takes from it: kept across the
/// CTAs of a kernel (whose warps mostly run the same code), so that only the first warp
/// of the kernel decodes them. `tail`, `mem_tail` and `mem_first` of the scratch are its.
#[derive(Default)]
struct StaticMemo {
    /// The static table and format it was decoded under (`None`: no such warp).
    slots: Option<Arc<[SlotInfo]>>,
    v2: bool,
    n: usize,
    slot_col: Vec<u8>,
    mask_col: Vec<u8>,
    /// Its head (the addresses of its memory instructions are replaced).
    head: Vec<WarpInst>,
    /// Its columns' positions after the head, and the slot and mask there.
    resume_slot: (usize, i64),
    resume_mask: (usize, u32),
    top: usize,
    /// Bit `i`: its head instruction `i` has memory.
    mem_head: u32,
    /// Its [`Template`], made when a second warp has its columns.
    tmpl: Option<Arc<Template>>,
}

/// The last warp [`CtaStream::new_in`] took whole, when the next warp may be its twin:
/// format 2 or later, no instructions past its head, no operands, every address in stride
/// mode. A warp whose bytes after its id are the same (warps of a CTA stepping through
/// memory by a fixed amount code as zeros) passes the same checks and decodes to the same
/// instructions but for its bases, which its address codes (kept in
/// [`StreamScratch::twin_codes`]) give from the base states it starts from.
struct Twin<'r> {
    /// From after its id to its end: its header and columns.
    body: &'r [u8],
    n: u32,
    /// [`WarpHead::cols`] less the record offset of `body`.
    cols: [usize; 8],
    prev_slot: i64,
    mask: u32,
    /// Its range of the CTA's head, and its highest slot (`None` without instructions).
    head: (usize, usize),
    top: Option<u32>,
    mem_head: u32,
}

/// One CTA record kept encoded (see the module documentation).
#[derive(Clone, Debug)]
pub struct CtaStream {
    rec: Box<[u8]>,
    slots: Arc<[SlotInfo]>,
    /// Format version 2 or later: mask codes, delta-of-delta bases, operand column.
    v2: bool,
    id: [u32; 3],
    cluster: Option<ClusterInfo>,
    warps: Vec<WarpHead>,
    /// Per warp (a range of [`WarpHead::bases`]), for each static instruction with memory
    /// it runs after its head, the base state before its first instance there.
    bases: Box<[(u32, BaseState)]>,
    /// The warps' heads: instructions (their [`Addrs::List`] relative to the warp's
    /// part of `head_addrs`), operands and operand index (relative likewise).
    head: Vec<WarpInst>,
    head_addrs: Vec<u64>,
    head_ops: Vec<u64>,
    head_op_index: Vec<(u32, u32)>,
    /// The [`Template`]s of its warps that have one.
    tmpls: Vec<Arc<Template>>,
    insts: u64,
    max_slot: Option<u32>,
    /// Where its accesses may go, checked as its warps are decoded (`None`: unchecked).
    bounds: Option<Arc<AccessBounds>>,
}

impl CtaStream {
    /// Copies and checks CTA record `rec` of a file of format `version`, whose kernel's
    /// static instructions are `slots`.
    pub fn new(rec: &[u8], slots: Arc<[SlotInfo]>, version: u32) -> CResult<CtaStream> {
        CtaStream::new_in(rec, slots, version, &mut StreamScratch::default())
    }

    /// [`CtaStream::new`] with reused scratch.
    pub fn new_in(
        rec: &[u8],
        slots: Arc<[SlotInfo]>,
        version: u32,
        scratch: &mut StreamScratch,
    ) -> CResult<CtaStream> {
        if scratch.table.len() < slots.len() {
            scratch.table.resize(slots.len(), BaseState::default());
            scratch.seen.resize(slots.len(), 0);
            scratch.counts.resize(slots.len(), 0);
        }
        let mut bases = Vec::new();
        let r = Self::pass(rec, slots, version, scratch, &mut bases);
        for &s in &scratch.touched {
            scratch.table[s as usize] = BaseState::default();
            // Counted only for slots with a base (so touched), left set by an error.
            scratch.counts[s as usize] = 0;
        }
        scratch.touched.clear();
        let mut st = r?;
        st.bases = bases.into();
        Ok(st)
    }

    /// The pass of [`CtaStream::new_in`] (which resets the scratch whatever it returns).
    fn pass(
        rec: &[u8],
        slots: Arc<[SlotInfo]>,
        version: u32,
        scratch: &mut StreamScratch,
        bases: &mut Vec<(u32, BaseState)>,
    ) -> CResult<CtaStream> {
        let v2 = version >= 2;
        let mut c = Cursor::new(rec);
        let (id, cluster) = read_cta_header(&mut c)?;
        let n_warps = c.varint()?;
        // Every warp takes at least five bytes: this bounds the allocation below.
        if n_warps > rec.len() as u64 {
            return Err(CodecError("warp count larger than the CTA record"));
        }
        let mut warps = Vec::with_capacity(n_warps as usize);
        // A CTA has at most 32 warps; a corrupt count must not reserve more.
        let mut head: Vec<WarpInst> =
            Vec::with_capacity(n_warps.min(32) as usize * BUF_INSTS as usize);
        let mut head_addrs = AddrBuf::default();
        let mut head_ops = Vec::new();
        let mut head_op_index = Vec::new();
        let mut total = 0u64;
        let mut max_slot: Option<u32> = None;
        let table = &mut scratch.table[..];
        let seen = &mut scratch.seen[..];
        let counts = &mut scratch.counts[..];
        let touched = &mut scratch.touched;
        // The bytes after its id of the last warp taken whole (format 2 or later), when
        // its `follow` entries hold for a warp with the same bytes: each of their base
        // states was seen before the warp's instances after its head.
        let mut followed: Option<&[u8]> = None;
        let mut twin: Option<Twin<'_>> = None;
        let mut tmpls: Vec<Arc<Template>> = Vec::new();
        for _ in 0..n_warps {
            scratch.stamp += 1;
            let stamp = scratch.stamp;
            let warp_id = c.u32()?;
            let at = c.pos();
            if let Some(t) = twin
                .as_ref()
                .filter(|t| rec.get(at..at + t.body.len()) == Some(t.body))
            {
                // Its twin's checks hold for the same bytes: only the bases differ.
                c.take(t.body.len())?;
                let h0 = head.len();
                head.extend_from_within(t.head.0..t.head.1);
                for &(i, code, stride) in &scratch.twin_codes {
                    // Below the head's length; its slot checked with the twin.
                    let inst = &mut head[h0 + i as usize];
                    let state = &mut table[inst.slot as usize];
                    if !state.seen() {
                        touched.push(inst.slot);
                    }
                    let base = state.decode(code, true);
                    inst.addrs = Addrs::Stride { base, stride };
                }
                max_slot = max_slot.max(t.top);
                total += t.n as u64;
                let (hb, ha, ho, hi) = (
                    bases.len(),
                    head_addrs.len(),
                    head_ops.len(),
                    head_op_index.len(),
                );
                warps.push(WarpHead {
                    warp_id,
                    insts: t.n,
                    cols: t.cols.map(|x| x + at),
                    prev_slot: t.prev_slot,
                    mask: t.mask,
                    bases: (hb, hb),
                    head: (h0, head.len()),
                    head_addrs: (ha, ha),
                    head_ops: (ho, ho),
                    head_op_index: (hi, hi),
                    tmpl: NO_TEMPLATE,
                    mem_head: t.mem_head,
                });
                continue;
            }
            let mut cols = WarpColumns::read(&mut c, v2)?;
            let [s0, m0, a0, o0, end] = cols.at;
            let has_ops = !cols.operands.is_empty();
            let n = cols.n;
            let k = n.min(BUF_INSTS as usize);
            let (h0, ha0, ho0, hi0, b0) = (
                head.len(),
                head_addrs.len(),
                head_ops.len(),
                head_op_index.len(),
                bases.len(),
            );
            // Column by column, as `decode_cta` (the same checks, so the same records
            // fail): the head decoded into `head`, the rest only checked, its static
            // slots and masks kept in `tail` (the memory instructions in `mem_tail`) for
            // the address and operand columns.
            let tail = &mut scratch.tail;
            let mem_tail = &mut scratch.mem_tail;
            let mem_first = &mut scratch.mem_first;
            // The warps of a kernel mostly run the same code: static and mask columns
            // equal to those of the memo's warp (which passed every check) decode the
            // same, so its head and tail are taken as they are.
            let memo = &mut scratch.memo;
            let same = memo.n == n
                && memo.v2 == v2
                && memo.slots.as_ref().is_some_and(|m| Arc::ptr_eq(m, &slots))
                && memo.slot_col == cols.slots.bytes()
                && memo.mask_col == cols.masks.bytes();
            let (resume_slot, resume_mask, top, mem_head);
            let mut tmpl = NO_TEMPLATE;
            if same {
                if memo.tmpl.is_none() && n > k && n - k <= MAX_TEMPLATE {
                    memo.tmpl = Some(Arc::new(Template::new(tail, mem_first, &slots)));
                }
                if let Some(t) = &memo.tmpl {
                    if !tmpls.last().is_some_and(|l| Arc::ptr_eq(l, t)) {
                        tmpls.push(t.clone());
                    }
                    tmpl = tmpls.len() as u32 - 1;
                }
                head.extend_from_slice(&memo.head);
                (resume_slot, resume_mask, top, mem_head) =
                    (memo.resume_slot, memo.resume_mask, memo.top, memo.mem_head);
                // Consumed, as decoding them would.
                cols.slots.rest();
                cols.masks.rest();
            } else {
                // Valid again only once this warp has passed every check.
                memo.slots = None;
                memo.tmpl = None;
                tail.clear();
                let mut walk = SlotWalk::START;
                // The warp's highest slot (meaningful when it has instructions).
                let mut hi = 0;
                // Bit `i`: head instruction `i` has memory.
                let mut mem = 0u32;
                for i in 0..k {
                    let (s, info) = walk.next(&mut cols.slots, &slots)?;
                    head.push(info.inst(s));
                    mem |= (info.has_mem as u32) << i;
                    hi = hi.max(s);
                }
                mem_head = mem;
                resume_slot = (cols.slots.pos(), walk.prev);
                let tail_n = n - k;
                let mut bad = false;
                if let Some(bytes) = one_byte_entries(&cols.slots, tail_n) {
                    cols.slots.consume(tail_n);
                    tail.extend(walk.bytes(bytes, &slots, &mut bad).map(|(s, _)| {
                        hi = hi.max(s);
                        (s, 0)
                    }));
                } else {
                    tail.reserve(tail_n);
                    for _ in 0..tail_n {
                        let (s, _) = walk.next(&mut cols.slots, &slots)?;
                        hi = hi.max(s);
                        tail.push((s, 0));
                    }
                }
                slot_check(bad)?;
                top = hi as usize;
                let mut masks = MaskWalk::new(u32::MAX, v2);
                for inst in &mut head[h0..] {
                    inst.mask = masks.next(&mut cols.masks)?;
                }
                resume_mask = (cols.masks.pos(), masks.mask);
                if let Some(bytes) = one_byte_entries(&cols.masks, tail_n) {
                    cols.masks.consume(tail_n);
                    for ((_, m), &b) in tail.iter_mut().zip(bytes) {
                        *m = masks.byte(b);
                    }
                } else {
                    for (_, m) in tail.iter_mut() {
                        *m = masks.next(&mut cols.masks)?;
                    }
                }
                mem_tail.clear();
                // In range: checked above.
                mem_tail.extend(tail.iter().filter(|&&(s, _)| slots[s as usize].has_mem));
                mem_first.clear();
                for &(s, _) in mem_tail.iter() {
                    if seen[s as usize] != stamp {
                        seen[s as usize] = stamp;
                        mem_first.push(s);
                    }
                }
                // Used only once the warp has passed every check.
                memo.v2 = v2;
                memo.n = n;
                memo.slot_col.clear();
                memo.slot_col.extend_from_slice(cols.slots.bytes());
                memo.mask_col.clear();
                memo.mask_col.extend_from_slice(cols.masks.bytes());
                memo.head.clear();
                memo.head.extend_from_slice(&head[h0..]);
                (memo.resume_slot, memo.resume_mask, memo.top, memo.mem_head) =
                    (resume_slot, resume_mask, top, mem_head);
            }
            // Below `n_slots`: checked.
            if n > 0 {
                max_slot = max_slot.max(Some(top as u32));
            }
            let mut mem = mem_head;
            let codes = &mut scratch.twin_codes;
            codes.clear();
            let mut all_stride = true;
            while mem != 0 {
                let i = mem.trailing_zeros() as usize;
                mem &= mem - 1;
                // Below `k`, the head's length; its slot in range (checked when decoded).
                let inst = &mut head[h0 + i];
                let s = inst.slot as usize;
                if cols.addrs.is_empty() {
                    return Err(CodecError("memory instruction without its addresses"));
                }
                let before = table[s];
                if !before.seen() {
                    touched.push(s as u32);
                }
                (inst.addr_mode, inst.addrs) = decode_addrs(
                    &mut cols.addrs,
                    &mut table[s],
                    inst.mask,
                    v2,
                    &mut head_addrs,
                )?;
                match inst.addrs {
                    // Relative to the warp's head, as a cursor's buffer holds it.
                    Addrs::List { ref mut start, .. } => {
                        *start -= ha0 as u32;
                        all_stride = false;
                    }
                    Addrs::Stride { base, stride } => {
                        codes.push((i as u32, before.code_of(base), stride))
                    }
                    Addrs::None => {}
                }
            }
            let resume_addr = cols.addrs.pos();
            // The state before a static instruction's first instance after the head is
            // its state now: only its own instances change it, and the head's are done.
            for &s in mem_first.iter() {
                let state = table[s as usize];
                if !state.seen() {
                    touched.push(s);
                }
                bases.push((s, state));
            }
            let body = &rec[at..end];
            let follow = &mut scratch.follow;
            // The same bytes as the last warp taken whole: the same checks pass, and its
            // instances after the head move each base state as they moved that warp's.
            // (Warps without instances after their heads have little to skip.)
            let follows = n > k
                && followed == Some(body)
                && follow.len() == mem_first.len()
                && follow.iter().zip(&bases[b0..]).all(|(f, b)| f.0 == b.0);
            if follows {
                for (f, &(s, now)) in follow.iter_mut().zip(&bases[b0..]) {
                    let after = now.follow(&f.2, &f.3, f.1);
                    // In range: a slot of the warp's.
                    table[s as usize] = after;
                    (f.2, f.3) = (now, after);
                }
                cols.addrs.rest();
            } else {
                for &(s, m) in mem_tail.iter() {
                    if cols.addrs.is_empty() {
                        return Err(CodecError("memory instruction without its addresses"));
                    }
                    // Past the head only the base state is needed (and the checks).
                    let decoded = skip_addrs(&mut cols.addrs, &mut table[s as usize], m, v2)?;
                    counts[s as usize] += decoded as u32;
                }
            }
            let mut resume_op = cols.operands.pos();
            if has_ops {
                read_operands(
                    &mut cols.operands,
                    &head[h0..],
                    &slots,
                    0,
                    ho0,
                    &mut head_ops,
                    &mut head_op_index,
                )?;
                resume_op = cols.operands.pos();
                if follows {
                    // Checked with the warp it follows.
                    cols.operands.rest();
                } else {
                    // The rest only checked: one skip over all their operands.
                    let rest: u64 = tail
                        .iter()
                        .map(|&(s, m)| slots[s as usize].operands as u64 * m.count_ones() as u64)
                        .sum();
                    cols.operands.skip_varints(rest)?;
                }
            }
            cols.finish()?;
            if !same {
                scratch.memo.slots = Some(slots.clone());
            }
            if n > k && !follows {
                follow.clear();
                let mut all_seen = true;
                for &(s, before) in &bases[b0..] {
                    // In range: a slot of the warp's.
                    let m = std::mem::take(&mut counts[s as usize]);
                    all_seen &= before.seen();
                    follow.push((s, m, before, table[s as usize]));
                }
                followed = (v2 && all_seen).then_some(body);
            }
            let (sp, ps) = resume_slot;
            let (mp, m) = resume_mask;
            let (ap, op) = (resume_addr, resume_op);
            total += n as u64;
            let cols = [s0 + sp, m0, m0 + mp, a0, a0 + ap, o0, o0 + op, end];
            warps.push(WarpHead {
                warp_id,
                // At most the static column's length, itself within the record.
                insts: n as u32,
                cols,
                prev_slot: ps,
                mask: m,
                bases: (b0, bases.len()),
                head: (h0, head.len()),
                head_addrs: (ha0, head_addrs.len()),
                head_ops: (ho0, head_ops.len()),
                head_op_index: (hi0, head_op_index.len()),
                tmpl,
                mem_head,
            });
            twin = (v2 && n == k && !has_ops && all_stride).then(|| Twin {
                body: &rec[at..end],
                n: n as u32,
                cols: cols.map(|x| x - at),
                prev_slot: ps,
                mask: m,
                head: (h0, head.len()),
                top: (n > 0).then_some(top as u32),
                mem_head,
            });
        }
        if !c.is_empty() {
            return Err(CodecError("bytes left after the CTA's last warp"));
        }
        Ok(CtaStream {
            rec: rec.into(),
            slots,
            v2,
            id,
            cluster,
            warps,
            bases: Box::new([]),
            head,
            head_addrs: head_addrs.into_vec(),
            head_ops,
            head_op_index,
            tmpls,
            insts: total,
            max_slot,
            bounds: None,
        })
    }

    /// A decoded CTA encoded again (at the current format version), for drivers and tests
    /// that build or keep [`DecodedCta`]s. Its instructions must agree with `slots`, as a
    /// decoded CTA's do: addresses exactly for the static instructions with memory.
    pub fn from_decoded(cta: &DecodedCta, slots: Arc<[SlotInfo]>) -> CResult<CtaStream> {
        let mut enc = CtaEncoder::new();
        enc.begin_cta(cta.id, cta.cluster);
        for dw in &cta.warps {
            enc.begin_warp(dw.warp_id);
            let insts = cta
                .insts
                .get(dw.insts.clone())
                .ok_or(CodecError("warp's instructions outside the CTA"))?;
            for (k, inst) in insts.iter().enumerate() {
                let info = slots
                    .get(inst.slot as usize)
                    .ok_or(CodecError("static instruction index out of range"))?;
                let addrs = match inst.addrs {
                    Addrs::None if info.has_mem => {
                        return Err(CodecError("memory instruction without its addresses"))
                    }
                    Addrs::None => AddrRecord::None,
                    Addrs::Stride { base, stride } => AddrRecord::Stride { base, stride },
                    Addrs::List { start, len } => AddrRecord::List {
                        mode: inst.addr_mode,
                        addrs: cta
                            .addrs
                            .get(start as usize..(start + len) as usize)
                            .ok_or(CodecError("address list outside the CTA"))?,
                    },
                };
                enc.push(inst.slot, inst.mask, addrs);
                if let Some(ops) = cta.operands_of(dw.insts.start + k, info.operands) {
                    enc.push_operands(ops);
                }
            }
            enc.end_warp();
        }
        CtaStream::new(enc.finish_cta(), slots, crate::FORMAT_VERSION)
    }

    pub fn id(&self) -> [u32; 3] {
        self.id
    }

    /// Makes its cursors refuse an access that breaks `bounds` (the kernel's: see
    /// [`AccessBounds`]) as they decode it: [`WarpCursor::start`] and
    /// [`WarpCursor::advance`] then fail and [`WarpCursor::fault`] says where.
    pub fn set_bounds(&mut self, bounds: Option<Arc<AccessBounds>>) {
        self.bounds = bounds;
    }

    pub fn cluster(&self) -> Option<ClusterInfo> {
        self.cluster
    }

    /// Its warps (positions in listing order are `0..n_warps()`).
    pub fn n_warps(&self) -> usize {
        self.warps.len()
    }

    /// The id of warp `w` (position in listing order).
    pub fn warp_id(&self, w: usize) -> Option<u32> {
        self.warps.get(w).map(|h| h.warp_id)
    }

    /// The instruction count of warp `w`.
    pub fn warp_len(&self, w: usize) -> Option<u32> {
        self.warps.get(w).map(|h| h.insts)
    }

    /// Warp instructions of the whole CTA.
    pub fn insts(&self) -> u64 {
        self.insts
    }

    /// The highest static slot an instruction names (`None` without instructions).
    pub fn max_slot(&self) -> Option<u32> {
        self.max_slot
    }

    /// The static instructions its slots index.
    pub fn slots(&self) -> &Arc<[SlotInfo]> {
        &self.slots
    }

    /// Frees the warps' heads once every warp has been started (a later
    /// [`WarpCursor::start`] is an error): a resident CTA then holds its record and small
    /// per-warp tables only.
    pub fn release_heads(&mut self) {
        self.head = Vec::new();
        self.head_addrs = Vec::new();
        self.head_ops = Vec::new();
        self.head_op_index = Vec::new();
    }

    /// Bytes it holds (the record, its per-warp tables and heads), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.rec.len()
            + self.warps.capacity() * std::mem::size_of::<WarpHead>()
            + std::mem::size_of_val(&*self.bases)
            + self.head.capacity() * std::mem::size_of::<WarpInst>()
            + (self.head_addrs.capacity() + self.head_ops.capacity()) * 8
            + self.head_op_index.capacity() * 8
            + self.tmpls.capacity() * std::mem::size_of::<Arc<Template>>()
    }

    /// Decodes the whole CTA (as [`crate::codec::decode_cta`] of its record would).
    pub fn decode(&self) -> CResult<DecodedCta> {
        let mut out = DecodedCta::default();
        out.id = self.id;
        out.cluster = self.cluster;
        let mut cur = WarpCursor::new(true);
        for (w, h) in self.warps.iter().enumerate() {
            let start = out.insts.len();
            cur.start(self, w)?;
            while let Some(inst) = cur.peek() {
                let mut inst = *inst;
                if let Addrs::List { start, len } = inst.addrs {
                    let list = cur
                        .addrs
                        .as_slice()
                        .get(start as usize..(start + len) as usize)
                        .unwrap_or(&[]);
                    inst.addrs = Addrs::List {
                        start: out.addrs.len() as u32,
                        len,
                    };
                    out.addrs.extend_from_slice(list);
                }
                let per_lane = self.slots.get(inst.slot as usize).map_or(0, |s| s.operands);
                if let Some(ops) = cur.operands(per_lane) {
                    out.operand_index
                        .push((out.insts.len() as u32, out.operands.len() as u32));
                    out.operands.extend_from_slice(ops);
                }
                out.insts.push(inst);
                cur.advance(self)?;
            }
            out.warps.push(crate::DecodedWarp {
                warp_id: h.warp_id,
                insts: start..out.insts.len(),
            });
        }
        Ok(out)
    }
}

/// Decodes one warp of a [`CtaStream`] incrementally: the instruction at the cursor
/// ([`WarpCursor::peek`]) and the few after it are decoded in a buffer that is refilled
/// when consumed. Reusable across warps and CTAs (its buffers are kept).
#[derive(Clone, Debug, Default)]
pub struct WarpCursor {
    /// Positions in the record of the next undecoded entry of each column, and their ends.
    slot_pos: usize,
    slot_end: usize,
    mask_pos: usize,
    mask_end: usize,
    addr_pos: usize,
    addr_end: usize,
    op_pos: usize,
    op_end: usize,
    /// Instructions not yet decoded.
    left: u32,
    prev_slot: i64,
    mask: u32,
    /// Base states of the static instructions with memory the warp runs.
    bases: Vec<BaseEntry>,
    /// The entry of `bases` found last (none at first): the next lookup tries the entry
    /// found after it last time.
    last: usize,
    /// The buffer: decoded instructions, the list-mode addresses their [`Addrs::List`]
    /// index, per-lane operands and `(index in insts, start in operands)`.
    insts: Vec<WarpInst>,
    addrs: AddrBuf,
    operands: Vec<u64>,
    operand_index: Vec<(u32, u32)>,
    /// Index in `insts` of the instruction at the cursor.
    pos: usize,
    with_operands: bool,
    /// The warp's entry of [`CtaStream::tmpls`] ([`NO_TEMPLATE`]: none), and the index in
    /// it of the next instruction to decode.
    tmpl: u32,
    tmpl_pos: usize,
    /// The warp's id, for [`WarpCursor::fault`].
    warp_id: u32,
    /// Per static slot modulo [`HINTS`], the allocation that held its last checked
    /// access (see [`AccessBounds::check`]): an instruction mostly accesses one array.
    hints: [usize; HINTS],
    fault: Option<AccessFault>,
    /// A region body's buffers, kept for the next region.
    spare: Option<Box<LoopBody>>,
    /// The body of the spin region the warp is in (see [`WarpCursor::loop_begin`]).
    lp: Option<Box<LoopBody>>,
    /// `lp` serves a kept body again (its `replay`), read on every issue.
    replaying: bool,
}

/// The body of a spin region while a warp runs it: its instructions as the trace records
/// them (kept as the first pass meets them), each one's addresses and operands by lane,
/// and the instruction served now, its mask narrowed to the lanes that run it.
#[derive(Clone, Debug, Default)]
struct LoopBody {
    insts: Vec<WarpInst>,
    /// Per instruction: start of its 32 addresses in `lane_addrs` (`u32::MAX`: none), start
    /// of its operands in `lane_ops` and how many per lane.
    at: Vec<(u32, u32, u8)>,
    lane_addrs: Vec<u64>,
    lane_ops: Vec<u64>,
    /// Index in `insts` of the instruction served.
    j: usize,
    /// False in the first pass (the body grows as the stream is read), true from the first
    /// [`WarpCursor::loop_back`] (the body alone is served).
    replay: bool,
    /// A region that runs once ([`WarpCursor::loop_begin`]): only the instruction served is
    /// kept, so that a long tail costs no memory.
    once: bool,
    /// The lanes that run the instructions served.
    filter: u32,
    cur: Option<WarpInst>,
    addrs: Vec<u64>,
    ops: Vec<u64>,
    /// The stream's buffers while the cursor's own hold the instruction served (so that
    /// reading the cursor costs nothing more outside spin regions).
    saved: StreamBuf,
    /// The accesses whose addresses move with a value (by PC and stride), and each lane's
    /// value less the recorded one (see [`WarpCursor::set_rebase`]).
    rebase: Vec<RebasedAccess>,
    delta: [i64; 32],
}

/// A cursor's buffer of decoded instructions, set aside while a body is served.
#[derive(Clone, Debug, Default)]
struct StreamBuf {
    insts: Vec<WarpInst>,
    addrs: AddrBuf,
    operands: Vec<u64>,
    operand_index: Vec<(u32, u32)>,
    pos: usize,
}

impl LoopBody {
    /// Keeps `inst` (the stream's, with its list addresses in `list` and its operands).
    fn keep(&mut self, inst: &WarpInst, list: &[u64], ops: Option<&[u64]>) {
        let a = if matches!(inst.addrs, Addrs::None) {
            u32::MAX
        } else {
            let at = self.lane_addrs.len();
            self.lane_addrs.resize(at + 32, 0);
            let lanes = &mut self.lane_addrs[at..];
            LaneAddrSource(list).for_each_lane_addr(inst, |l, x| lanes[l as usize] = x);
            at as u32
        };
        let (o, per) = match ops {
            Some(v) if inst.mask != 0 && !v.is_empty() => {
                let per = v.len() / inst.mask.count_ones() as usize;
                let at = self.lane_ops.len();
                self.lane_ops.resize(at + 32 * per, 0);
                let mut m = inst.mask;
                for chunk in v.chunks(per.max(1)) {
                    let l = m.trailing_zeros() as usize;
                    m &= m.wrapping_sub(1);
                    self.lane_ops[at + l * per..at + (l + 1) * per].copy_from_slice(chunk);
                }
                (at as u32, per as u8)
            }
            _ => (0, 0),
        };
        self.insts.push(*inst);
        self.at.push((a, o, per));
    }

    /// Makes `cur` instruction `j` under `filter`: its mask narrowed, its active lanes'
    /// addresses listed in lane order, and their operands.
    fn serve(&mut self) {
        let Some(&inst) = self.insts.get(self.j) else {
            return;
        };
        let (a, o, per) = self.at[self.j];
        let mask = inst.mask & self.filter;
        let mut cur = inst;
        cur.mask = mask;
        self.addrs.clear();
        self.ops.clear();
        let stride = match self.rebase.iter().find(|r| r.pc == inst.pc) {
            Some(r) if a != u32::MAX => r.stride,
            _ => 0,
        };
        let mut m = mask;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            if a != u32::MAX {
                let x = self.lane_addrs[a as usize + l];
                self.addrs
                    .push(x.wrapping_add(stride.wrapping_mul(self.delta[l]) as u64));
            }
            let per = per as usize;
            if per > 0 {
                let s = o as usize + l * per;
                self.ops.extend_from_slice(&self.lane_ops[s..s + per]);
            }
        }
        if a != u32::MAX {
            cur.addrs = Addrs::List {
                start: 0,
                len: self.addrs.len() as u32,
            };
        }
        self.cur = Some(cur);
    }
}

/// Entries of [`WarpCursor::hints`].
const HINTS: usize = 8;

/// The error of a cursor whose warp accesses outside its kernel's bounds.
const OUTSIDE: CodecError = CodecError("an access outside every allocation");

impl WarpCursor {
    /// An idle cursor; `with_operands` decodes atomic operands too (the timing model does
    /// not need them).
    pub fn new(with_operands: bool) -> WarpCursor {
        WarpCursor {
            with_operands,
            // Its largest fill at once: no growth (and its copies) on the first starts.
            insts: Vec::with_capacity(BUF_INSTS as usize),
            tmpl: NO_TEMPLATE,
            ..WarpCursor::default()
        }
    }

    /// Moves to the first instruction of warp `w` (position in listing order) of `cta`.
    pub fn start(&mut self, cta: &CtaStream, w: usize) -> CResult<()> {
        let h = cta
            .warps
            .get(w)
            .ok_or(CodecError("warp index past the CTA's warps"))?;
        let [sp, se, mp, me, ap, ae, op, oe] = h.cols;
        (self.slot_pos, self.slot_end) = (sp, se);
        (self.mask_pos, self.mask_end) = (mp, me);
        (self.addr_pos, self.addr_end) = (ap, ae);
        (self.op_pos, self.op_end) = (op, oe);
        let gone = CodecError("CTA stream's warp heads released");
        let range = |r: (usize, usize)| r.0..r.1;
        self.insts.clear();
        self.insts
            .extend_from_slice(cta.head.get(range(h.head)).ok_or(gone.clone())?);
        self.left = h.insts - self.insts.len() as u32;
        self.pos = 0;
        self.prev_slot = h.prev_slot;
        self.mask = h.mask;
        self.addrs.set(
            cta.head_addrs
                .get(range(h.head_addrs))
                .ok_or(gone.clone())?,
        );
        self.operands.clear();
        self.operand_index.clear();
        if self.with_operands {
            self.operands
                .extend_from_slice(cta.head_ops.get(range(h.head_ops)).ok_or(gone.clone())?);
            self.operand_index
                .extend_from_slice(cta.head_op_index.get(range(h.head_op_index)).ok_or(gone)?);
        }
        self.bases.clear();
        // Each entry first predicted to be followed by the next: listed in order of first
        // visit, as a loop visits them.
        self.bases.extend(
            cta.bases
                .get(range(h.bases))
                .ok_or(CodecError("warp's base states outside the CTA's"))?
                .iter()
                .zip(1..)
                .map(|(&(slot, state), next)| BaseEntry { slot, next, state }),
        );
        self.last = usize::MAX;
        self.tmpl = h.tmpl;
        self.tmpl_pos = 0;
        self.warp_id = h.warp_id;
        self.fault = None;
        self.replaying = false;
        if let Some(mut l) = self.lp.take() {
            l.insts.clear();
            self.spare = Some(l);
        }
        if let Some(b) = cta.bounds.as_deref() {
            self.check_bounds(b, h.mem_head)?;
        }
        if self.insts.is_empty() && self.left > 0 {
            return self.fill(cta);
        }
        Ok(())
    }

    /// Where its warp accessed outside its kernel's bounds, when [`WarpCursor::start`] or
    /// [`WarpCursor::advance`] failed for that reason.
    pub fn fault(&self) -> Option<&AccessFault> {
        self.fault.as_ref()
    }

    /// Checks the buffered instructions whose bit is set in `mem` against the kernel's
    /// bounds. Out of line: once per buffer, and kept out of the decoding loops.
    #[inline(never)]
    fn check_bounds(&mut self, b: &AccessBounds, mut mem: u32) -> CResult<()> {
        let list = self.addrs.as_slice();
        while mem != 0 {
            let i = mem.trailing_zeros() as usize;
            mem &= mem - 1;
            let Some(inst) = self.insts.get(i) else {
                break;
            };
            let hint = &mut self.hints[inst.slot as usize % HINTS];
            if let Some(lane) = b.check(inst, list, hint) {
                let inst = *inst;
                return Err(self.outside(&inst, lane));
            }
        }
        Ok(())
    }

    /// Records an access of `inst` outside the bounds; its error.
    #[cold]
    #[inline(never)]
    fn outside(&mut self, inst: &WarpInst, lane: Outside) -> CodecError {
        self.fault = Some(AccessFault {
            warp_id: self.warp_id,
            pc: inst.pc,
            slot: inst.slot,
            lane,
        });
        OUTSIDE
    }

    /// The instruction at the cursor (`None` at the end of the warp). Its
    /// [`Addrs::List`] indexes [`WarpCursor::lane_source`].
    #[inline]
    pub fn peek(&self) -> Option<&WarpInst> {
        self.insts.get(self.pos)
    }

    /// The list-mode addresses of the buffered instructions (valid until the next
    /// [`WarpCursor::advance`]).
    #[inline]
    pub fn lane_source(&self) -> LaneAddrSource<'_> {
        LaneAddrSource(self.addrs.as_slice())
    }

    /// Swaps the stream's buffers and the served instruction's (see [`LoopBody::saved`]).
    fn swap_buffers(&mut self, l: &mut LoopBody) {
        let b = &mut l.saved;
        std::mem::swap(&mut self.insts, &mut b.insts);
        std::mem::swap(&mut self.addrs, &mut b.addrs);
        std::mem::swap(&mut self.operands, &mut b.operands);
        std::mem::swap(&mut self.operand_index, &mut b.operand_index);
        std::mem::swap(&mut self.pos, &mut b.pos);
    }

    /// Puts the instruction `l` serves (none past the body's end) in the cursor's buffers.
    fn put_served(&mut self, l: &LoopBody) {
        self.insts.clear();
        self.pos = 0;
        if let Some(c) = l.cur.filter(|_| l.j < l.insts.len()) {
            self.insts.push(c);
        }
        self.addrs.set(&l.addrs);
        self.operands.clear();
        self.operand_index.clear();
        if !l.ops.is_empty() {
            self.operands.extend_from_slice(&l.ops);
            self.operand_index.push((0, 0));
        }
    }

    /// The id of the warp it was started on.
    pub fn warp_id(&self) -> u32 {
        self.warp_id
    }

    /// Sets whether operands are decoded (from the next [`WarpCursor::start`]).
    pub fn set_with_operands(&mut self, on: bool) {
        self.with_operands = on;
    }

    /// Starts a spin region at the instruction at the cursor (its first): from here the
    /// instructions are kept as they are read, so that [`WarpCursor::loop_back`] can serve
    /// them again; every lane runs them until [`WarpCursor::set_filter`].
    ///
    /// `once`: the region never goes round (a branch): nothing is kept beyond the
    /// instruction served, and [`WarpCursor::loop_back`] must not be called.
    pub fn loop_begin(&mut self, once: bool) {
        let mut lp = self.lp.take().or(self.spare.take()).unwrap_or_default();
        lp.insts.clear();
        lp.at.clear();
        lp.lane_addrs.clear();
        lp.lane_ops.clear();
        lp.rebase.clear();
        (lp.j, lp.replay, lp.filter, lp.once) = (0, false, u32::MAX, once);
        self.replaying = false;
        if let Some(&inst) = self.insts.get(self.pos) {
            let ops = self.stream_operands();
            lp.keep(&inst, self.addrs.as_slice(), ops);
        }
        lp.serve();
        self.swap_buffers(&mut lp);
        self.put_served(&lp);
        self.lp = Some(lp);
    }

    /// Whether the instruction at the cursor comes from the stream (outside a spin region,
    /// or in its first pass), rather than from a kept body being repeated.
    #[inline]
    pub fn fresh(&self) -> bool {
        !self.replaying
    }

    /// Instructions kept for the region the warp is in (0 outside one): what its body
    /// costs in memory.
    pub fn kept(&self) -> usize {
        self.lp.as_ref().map_or(0, |l| l.insts.len())
    }

    /// Whether the warp is in a spin region.
    #[inline]
    pub fn looping(&self) -> bool {
        self.lp.is_some()
    }

    /// Narrows the lanes that run the region's instructions from the one at the cursor on
    /// to `filter` (a lane that is not in an instruction's recorded mask never runs it).
    pub fn set_filter(&mut self, filter: u32) {
        if let Some(mut l) = self.lp.take() {
            l.filter = filter;
            l.serve();
            self.put_served(&l);
            self.lp = Some(l);
        }
    }

    /// Moves the addresses of the region's instructions at `rebase`'s PCs, from the next
    /// one served on ([`WarpCursor::set_filter`] serves the one at the cursor again), by
    /// `stride * delta[lane]` (a value-dependent address, [`RebasedAccess`]: `delta` is
    /// each lane's value less the one the trace was recorded with), until the region goes
    /// round or ends.
    pub fn set_rebase(&mut self, rebase: &[RebasedAccess], delta: &[i64; 32]) {
        if let Some(l) = self.lp.as_mut() {
            l.rebase.clear();
            l.rebase.extend_from_slice(rebase);
            l.delta = *delta;
        }
    }

    /// Goes back to the first instruction of the region (the cursor is at its last, the
    /// back-edge, which stays unread in the stream), run by the lanes of `filter`.
    pub fn loop_back(&mut self, filter: u32) {
        if let Some(mut l) = self.lp.take() {
            l.rebase.clear();
            (l.j, l.replay, l.filter) = (0, true, filter);
            l.serve();
            self.put_served(&l);
            self.lp = Some(l);
            self.replaying = true;
        }
    }

    /// Leaves the region at its back-edge: the cursor is at the back-edge in the stream
    /// again, and [`WarpCursor::advance`] moves past it.
    pub fn loop_end(&mut self) {
        self.replaying = false;
        if let Some(mut l) = self.lp.take() {
            self.swap_buffers(&mut l);
            l.insts.clear();
            // Kept for the next region of the warp (its buffers).
            self.spare = Some(l);
        }
    }

    /// The operands of the instruction at the cursor (the whole record, lane order), when
    /// decoded.
    fn stream_operands(&self) -> Option<&[u64]> {
        let k = self
            .operand_index
            .binary_search_by_key(&(self.pos as u32), |&(x, _)| x)
            .ok()?;
        let start = self.operand_index[k].1 as usize;
        let end = self
            .operand_index
            .get(k + 1)
            .map_or(self.operands.len(), |&(_, s)| s as usize);
        self.operands.get(start..end)
    }

    /// The per-lane operands of the instruction at the cursor, `per_lane` per active lane
    /// (see [`DecodedCta::operands_of`]); `None` without (or when made without
    /// `with_operands`).
    pub fn operands(&self, per_lane: u8) -> Option<&[u64]> {
        let n = self.insts.get(self.pos)?.mask.count_ones() as usize * per_lane as usize;
        self.stream_operands()?.get(..n)
    }

    /// Moves to the next instruction of the warp, decoding more of `cta` (the stream it
    /// was started on) when the buffer is used up. An error only on a stream that is not
    /// the one started on (every column was checked by [`CtaStream::new`]).
    #[inline]
    pub fn advance(&mut self, cta: &CtaStream) -> CResult<()> {
        if self.lp.is_some() {
            return self.advance_in_loop(cta);
        }
        if self.pos < self.insts.len() {
            self.pos += 1;
        }
        if self.pos == self.insts.len() && self.left > 0 {
            self.fill(cta)?;
        }
        Ok(())
    }

    /// [`WarpCursor::advance`] in a spin region: the next kept instruction, or in the
    /// first pass the stream's next, kept.
    #[inline(never)]
    fn advance_in_loop(&mut self, cta: &CtaStream) -> CResult<()> {
        let Some(mut l) = self.lp.take() else {
            return Ok(());
        };
        if l.replay {
            l.j += 1;
            l.serve();
            self.put_served(&l);
            self.lp = Some(l);
            return Ok(());
        }
        self.swap_buffers(&mut l);
        if self.pos < self.insts.len() {
            self.pos += 1;
        }
        let filled = if self.pos == self.insts.len() && self.left > 0 {
            self.fill(cta)
        } else {
            Ok(())
        };
        if l.once {
            // Served once: the body holds the instruction served alone.
            l.insts.clear();
            l.at.clear();
            l.lane_addrs.clear();
            l.lane_ops.clear();
        } else {
            l.j += 1;
        }
        if let Some(&inst) = self.insts.get(self.pos) {
            let ops = self.stream_operands();
            l.keep(&inst, self.addrs.as_slice(), ops);
        }
        l.serve();
        self.swap_buffers(&mut l);
        self.put_served(&l);
        self.lp = Some(l);
        filled
    }

    /// The static and mask columns of the next `n` instructions, into `insts`, whatever
    /// their entries' lengths (bit `i` of `mem` set when instruction `i` has memory).
    fn fill_static(
        &mut self,
        cta: &CtaStream,
        insts: &mut Vec<WarpInst>,
        n: u32,
        mem: &mut u32,
    ) -> CResult<()> {
        let col = |a: usize, b: usize| {
            cta.rec
                .get(a..b)
                .map(Cursor::new)
                .ok_or(CodecError("column outside the CTA record"))
        };
        let mut sc = col(self.slot_pos, self.slot_end)?;
        let mut walk = SlotWalk {
            prev: self.prev_slot,
        };
        for i in 0..n {
            let (slot, info) = walk.next(&mut sc, &cta.slots)?;
            *mem |= (info.has_mem as u32) << i;
            insts.push(info.inst(slot));
        }
        self.prev_slot = walk.prev;
        self.slot_pos += sc.pos();
        let mut mc = col(self.mask_pos, self.mask_end)?;
        let mut masks = MaskWalk::new(self.mask, cta.v2);
        for inst in insts.iter_mut() {
            inst.mask = masks.next(&mut mc)?;
        }
        self.mask = masks.mask;
        self.mask_pos += mc.pos();
        Ok(())
    }

    /// Replaces the buffer with the next instructions of the warp; column by column, as
    /// [`crate::codec::decode_cta`], for speed.
    #[inline(never)]
    fn fill<'c>(&mut self, cta: &'c CtaStream) -> CResult<()> {
        self.insts.clear();
        self.addrs.clear();
        self.operands.clear();
        self.operand_index.clear();
        self.pos = 0;
        let n = self.left.min(BUF_INSTS);
        if n == 0 {
            return Ok(());
        }
        self.left -= n;
        let slots = &*cta.slots;
        let col = |a: usize, b: usize| {
            cta.rec
                .get(a..b)
                .map(Cursor::new)
                .ok_or(CodecError("column outside the CTA record"))
        };
        let (sc, mc) = (
            col(self.slot_pos, self.slot_end)?,
            col(self.mask_pos, self.mask_end)?,
        );
        // Worked on out of `self`, so that its length stays in a register.
        let mut insts = std::mem::take(&mut self.insts);
        // Bit `i`: instruction `i` has memory.
        let mut mem = 0u32;
        let mut walk = SlotWalk {
            prev: self.prev_slot,
        };
        let mut masks = MaskWalk::new(self.mask, cta.v2);
        // With a template, where each instruction's base state is.
        let mut base_at: Option<&'c [u32]> = None;
        if let Some(t) = cta.tmpls.get(self.tmpl as usize) {
            // Decoded already: copied (the column positions are then no longer used).
            let p = self.tmpl_pos;
            let r = p..p + n as usize;
            let (Some(src), Some(&m), Some(at)) = (
                t.insts.get(r.clone()),
                t.mem.get(p / BUF_INSTS as usize),
                t.base_at.get(r),
            ) else {
                self.insts = insts;
                return Err(CodecError("warp's template shorter than the warp"));
            };
            insts.extend_from_slice(src);
            mem = m;
            base_at = Some(at);
            self.tmpl_pos = p + n as usize;
        } else if let (Some(sb), Some(mb)) = (
            one_byte_entries(&sc, n as usize),
            one_byte_entries(&mc, n as usize),
        ) {
            // Both columns' entries one byte: no varint steps, the instructions in one
            // pass.
            let mut bad = false;
            insts.extend(walk.bytes(sb, slots, &mut bad).zip(mb).enumerate().map(
                |(i, ((slot, info), &b))| {
                    mem |= (info.has_mem as u32) << i;
                    let mut inst = info.inst(slot);
                    inst.mask = masks.byte(b);
                    inst
                },
            ));
            if let Err(e) = slot_check(bad) {
                self.insts = insts;
                return Err(e);
            }
            self.slot_pos += n as usize;
            self.mask_pos += n as usize;
            self.prev_slot = walk.prev;
            self.mask = masks.mask;
        } else {
            let r = self.fill_static(cta, &mut insts, n, &mut mem);
            if let Err(e) = r {
                self.insts = insts;
                return Err(e);
            }
        }
        self.insts = insts;
        let mut ac = col(self.addr_pos, self.addr_end)?;
        let with_mem = mem;
        while mem != 0 {
            let i = mem.trailing_zeros() as usize;
            mem &= mem - 1;
            // Below `n`, the buffer's length.
            let inst = &mut self.insts[i];
            let state = match base_at {
                Some(at) => at
                    .get(i)
                    .and_then(|&j| self.bases.get_mut(j as usize))
                    .map(|e| &mut e.state)
                    .ok_or(CodecError("template's base state outside the warp's"))?,
                None => find_base(&mut self.bases, &mut self.last, inst.slot)?,
            };
            (inst.addr_mode, inst.addrs) =
                decode_addrs(&mut ac, state, inst.mask, cta.v2, &mut self.addrs)?;
        }
        if let Some(b) = cta.bounds.as_deref() {
            self.check_bounds(b, with_mem)?;
        }
        self.addr_pos += ac.pos();
        if self.with_operands && self.op_pos < self.op_end {
            let mut oc = col(self.op_pos, self.op_end)?;
            read_operands(
                &mut oc,
                &self.insts,
                slots,
                0,
                0,
                &mut self.operands,
                &mut self.operand_index,
            )?;
            self.op_pos += oc.pos();
        }
        Ok(())
    }
}

/// A static instruction's base state in a [`WarpCursor`], with the entry looked up after
/// it last time: nested loops and code around a loop visit a warp's memory instructions
/// in a few repeating orders, which that follows.
#[derive(Clone, Copy, Debug)]
struct BaseEntry {
    slot: u32,
    next: u32,
    state: BaseState,
}

/// The base state of static instruction `slot` among a warp's (`last`: see
/// [`WarpCursor::last`]).
#[inline]
fn find_base<'b>(
    bases: &'b mut [BaseEntry],
    last: &mut usize,
    slot: u32,
) -> CResult<&'b mut BaseState> {
    let guess = bases.get(*last).map_or(0, |e| e.next as usize);
    let i = match bases.get(guess) {
        Some(e) if e.slot == slot => guess,
        _ => {
            let i = bases.iter().position(|e| e.slot == slot).ok_or(CodecError(
                "memory instruction the CTA's first pass did not see",
            ))?;
            if let Some(e) = bases.get_mut(*last) {
                e.next = i as u32;
            }
            i
        }
    };
    *last = i;
    // Found above.
    Ok(&mut bases[i].state)
}
