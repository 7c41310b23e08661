//! The per-warp recording API: kernels are Rust code over per-lane values.
//!
//! Every method executes its operation functionally on the active lanes and records the
//! SASS instruction a compiler would emit for it (sm_70+ mnemonics: `IMAD`, `IADD3`,
//! `FFMA`, `IMAD.WIDE`, `LDG.E`, `STS`, `ATOMG.E.ADD.STRONG.GPU`, `BAR.SYNC`, `EXIT`...).
//! The PC of an instruction is fixed by the source location of the call (`#[track_caller]`)
//! so a loop body executes the same PCs every iteration, and its destination register is
//! fixed the first time the PC executes, so the static fields of a PC never vary.

use super::exec::{ExecState, Mailbox, Resume, WarpEvent};
use super::mem::{Buffer, Elem};
use super::spin::{SpinCtx, SpinMode};
use std::panic::Location;
use std::sync::Arc;
use tessera_traces::codec::AddrRecord;
use tessera_traces::schema::RZ;

/// Lanes per warp.
pub const WARP: usize = 32;

/// Most instructions one warp may record: a warp's stream is held in memory until its
/// CTA completes (about 50 bytes an instruction), so a runaway loop is an error instead
/// of exhausting memory.
pub const MAX_WARP_INSTS: usize = 1 << 22;

/// A per-lane value living in a register (a pair for 64-bit types).
#[derive(Clone, Copy, Debug)]
pub struct Val<T> {
    pub v: [T; WARP],
    pub reg: u16,
}

impl<T: Copy> Val<T> {
    /// Lane `l`'s value.
    pub fn lane(&self, l: usize) -> T {
        self.v[l]
    }
}

/// A per-lane predicate (predicate registers are not recorded by the tracer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pred(pub u32);

impl Pred {
    pub fn lane(&self, l: usize) -> bool {
        self.0 >> l & 1 == 1
    }
}

/// A typed array in a CTA's shared memory, at a byte offset.
#[derive(Clone, Copy, Debug)]
pub struct SharedArr<T> {
    pub offset: u32,
    pub len: u32,
    _t: std::marker::PhantomData<T>,
}

impl<T: Elem> SharedArr<T> {
    pub fn new(offset: u32, len: u32) -> Self {
        SharedArr {
            offset,
            len,
            _t: std::marker::PhantomData,
        }
    }

    /// First byte after the array.
    pub fn end(&self) -> u32 {
        self.offset + self.len * T::BYTES
    }
}

/// Comparison of `setp`-style instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Cmp {
    fn eval<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
        }
    }
}

/// Operation of an atomic or reduction. On `u32`: all (`Sub` is recorded as `ADD` of the
/// negated operand; `Inc` and `Dec` are CUDA's `atomicInc`/`atomicDec`, wrapping at the
/// operand); on floats: `Add`, `Sub`, `Exch` (and `Min`/`Max`, recorded as exchange).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atom {
    Add,
    Sub,
    Min,
    Max,
    Exch,
    And,
    Or,
    Xor,
    Inc,
    Dec,
}

/// One recorded warp instruction (addresses and operands live in the warp's chunked
/// buffers).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecInst {
    pub pc: u32,
    pub mask: u32,
    pub opcode: u16,
    pub dsts: [u16; 2],
    pub n_dsts: u8,
    pub srcs: [u16; 4],
    pub n_srcs: u8,
    pub mem_width: u32,
    /// The addresses, compressed as the tracer does ([`super::exec::compress_addrs`])
    /// when recorded: `true` when the range holds a base and a stride (mode 1), `false`
    /// when it holds one address per active lane (mode 2). A coalesced access keeps 16
    /// bytes instead of 256 until its CTA is written.
    pub strided: bool,
    /// Range in `WarpRecord::addrs`.
    pub addrs: (u32, u32),
    /// Range in `WarpRecord::operands`.
    pub operands: (u32, u32),
}

/// A growable array kept in chunks of `N` entries. Growing never copies, every chunk is
/// one allocation of one size (so chunks freed by one warp are reused whole by the next),
/// a warp holds at most one partly filled chunk of each array, and the scheduler can add
/// chunks on its own thread for a warp thread ([`WarpRecord::grow`]). The entries of one
/// [`Chunks::push_slice`] are contiguous, in one chunk, and are found again by a global
/// index (`chunk * N + offset`).
pub(crate) struct Chunks<T, const N: usize> {
    chunks: Vec<Vec<T>>,
    /// The chunk being filled; those after it are empty.
    cur: usize,
    len: usize,
}

impl<T, const N: usize> Default for Chunks<T, N> {
    fn default() -> Self {
        Chunks {
            chunks: Vec::new(),
            cur: 0,
            len: 0,
        }
    }
}

impl<T: Copy, const N: usize> Chunks<T, N> {
    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether `n` (at most `N`) more entries fit, contiguously, without allocating.
    pub(crate) fn has_room(&self, n: usize) -> bool {
        match self.chunks.get(self.cur) {
            Some(c) if N.saturating_sub(c.len()) >= n => true,
            _ => self.cur + 1 < self.chunks.len(),
        }
    }

    /// Allocates a chunk unless `n` more entries fit already.
    pub(crate) fn reserve(&mut self, n: usize) {
        if !self.has_room(n) {
            self.add_chunk();
        }
    }

    fn add_chunk(&mut self) {
        if self.chunks.len() == self.chunks.capacity() {
            self.chunks.reserve(self.chunks.len().max(4));
        }
        self.chunks.push(Vec::with_capacity(N));
    }

    /// Appends `v` (at most `N` entries) contiguously; returns the global index range it
    /// occupies.
    pub(crate) fn push_slice(&mut self, v: &[T]) -> (u32, u32) {
        debug_assert!(v.len() <= N);
        if v.is_empty() {
            return (0, 0);
        }
        loop {
            if let Some(c) = self.chunks.get_mut(self.cur) {
                if N.saturating_sub(c.len()) >= v.len() {
                    let start = self.cur * N + c.len();
                    c.extend_from_slice(v);
                    self.len += v.len();
                    return (start as u32, (start + v.len()) as u32);
                }
                if self.cur + 1 < self.chunks.len() {
                    self.cur += 1;
                    continue;
                }
            }
            // The chunks after `cur` are empty, and there are none: add one (at `cur`
            // when there is no chunk at all, else right after it).
            self.add_chunk();
        }
    }

    /// The entries of a range [`Chunks::push_slice`] returned; `None` for any other.
    pub(crate) fn get(&self, (start, end): (u32, u32)) -> Option<&[T]> {
        if start == end {
            return Some(&[]);
        }
        let (c, off) = (start as usize / N, start as usize % N);
        let n = end.checked_sub(start)? as usize;
        self.chunks.get(c)?.get(off..off + n)
    }

    /// The entries of a range [`Chunks::push_slice`] returned, to change them.
    pub(crate) fn get_mut(&mut self, (start, end): (u32, u32)) -> Option<&mut [T]> {
        if start == end {
            return Some(&mut []);
        }
        let (c, off) = (start as usize / N, start as usize % N);
        let n = end.checked_sub(start)? as usize;
        self.chunks.get_mut(c)?.get_mut(off..off + n)
    }

    /// Every entry, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    /// Empties the array, keeping its chunks.
    pub(crate) fn clear(&mut self) {
        for c in &mut self.chunks {
            c.clear();
        }
        self.cur = 0;
        self.len = 0;
    }
}

/// Everything a warp recorded.
#[derive(Default)]
pub(crate) struct WarpRecord {
    pub insts: Chunks<RecInst, 512>,
    pub addrs: Chunks<u64, 1024>,
    pub operands: Chunks<u64, 256>,
}

/// Free entries a warp thread's record keeps before recording an instruction: one
/// instruction adds one entry, up to an address per lane and two operands per lane.
const ADDR_HEADROOM: usize = WARP;
const OPERAND_HEADROOM: usize = 2 * WARP;

impl WarpRecord {
    /// A record with a chunk of each array, allocated by the caller's thread.
    pub(crate) fn preallocated() -> Self {
        let mut r = WarpRecord::default();
        r.grow();
        r
    }

    /// Whether recording one more instruction could allocate.
    pub(crate) fn needs_room(&self) -> bool {
        !self.insts.has_room(1)
            || !self.addrs.has_room(ADDR_HEADROOM)
            || !self.operands.has_room(OPERAND_HEADROOM)
    }

    /// Adds a chunk to the arrays that [`WarpRecord::needs_room`] finds short.
    pub(crate) fn grow(&mut self) {
        self.insts.reserve(1);
        self.addrs.reserve(ADDR_HEADROOM);
        self.operands.reserve(OPERAND_HEADROOM);
    }

    /// Empties the record, keeping its chunks for the next warp.
    pub(crate) fn clear(&mut self) {
        self.insts.clear();
        self.addrs.clear();
        self.operands.clear();
    }

    /// Bytes of the recorded contents.
    pub(crate) fn bytes(&self) -> u64 {
        (self.insts.len() * std::mem::size_of::<RecInst>()
            + (self.addrs.len() + self.operands.len()) * 8) as u64
    }
}

/// A warp being recorded: the handle kernel code receives.
pub struct Warp {
    pub(crate) st: Option<Box<ExecState>>,
    /// Baton channels; `None` when the kernel runs inline (launched with
    /// `blocking: false`), where blocking is an error.
    pub(crate) resume: Option<Arc<Mailbox<Resume>>>,
    pub(crate) events: Option<Arc<Mailbox<WarpEvent>>>,
    pub(crate) slot: usize,
    /// CTA coordinates.
    pub cta: [u32; 3],
    /// Warp index within the CTA.
    pub warp: u32,
    pub block: [u32; 3],
    pub grid: [u32; 3],
    pub(crate) cta_linear: u32,
    /// Lanes that hold threads (a partial last warp has fewer).
    pub(crate) valid: u32,
    pub(crate) mask: u32,
    pub(crate) exited: u32,
    pub(crate) rec: WarpRecord,
    /// Where the warp is in a spin region ([`Warp::spin`]).
    pub(crate) spin: SpinCtx,
    /// The unrolled copy the warp is in ([`Warp::unrolled`]).
    pub(crate) unroll: u8,
}

/// Unwinds a warp thread when the recording was aborted (not a bug: no message).
pub(crate) struct Aborted;

/// Unwinds an inline warp that tried to block.
pub(crate) struct InlineBlocked;

impl Warp {
    pub(crate) fn state(&mut self) -> &mut ExecState {
        match self.st.as_mut() {
            Some(s) => s,
            // The state is only absent while the warp is blocked in `switch`, which never
            // returns without it.
            None => std::panic::resume_unwind(Box::new(Aborted)),
        }
    }

    /// Lanes currently executing.
    pub fn active(&self) -> u32 {
        self.mask & !self.exited
    }

    /// True when `l` is active.
    pub fn is_active(&self, l: usize) -> bool {
        self.active() >> l & 1 == 1
    }

    /// Lanes of this warp that hold threads (fewer than 32 in a partial last warp).
    pub fn valid_lanes(&self) -> u32 {
        self.valid
    }

    /// Threads per CTA.
    pub fn threads(&self) -> u32 {
        self.block[0] * self.block[1] * self.block[2]
    }

    /// On a warp thread, has the scheduler grow this warp's record or the kernel's tables
    /// when recording one more instruction could allocate: memory a warp thread
    /// allocated would stay with that thread's allocator heap (see `run_grid`). Inline
    /// warps run on the scheduler's thread and grow their buffers as they go.
    pub(crate) fn ensure_room(&mut self) {
        if self.events.is_none() {
            return;
        }
        let needed = match self.st.as_deref() {
            Some(st) => st.needs_room(&self.rec),
            None => false,
        };
        if needed {
            let rec = std::mem::take(&mut self.rec);
            self.state().room = rec;
            self.switch_to(WarpEvent::room);
            self.rec = std::mem::take(&mut self.state().room);
        }
    }

    /// Hands the baton back to the scheduler and waits for it (the other warps run).
    pub(crate) fn switch(&mut self, ev: fn(Box<ExecState>, usize) -> WarpEvent) {
        if self.spin.dry {
            super::spin::fail(
                "a branch or queue tail may not block (a barrier or a yield): its dry passes run it for every lane at once".into(),
            );
        }
        self.switch_to(ev);
    }

    /// Hands the baton to the scheduler and waits for it; a warp in a dry pass only
    /// asks for room this way (the baton comes straight back).
    fn switch_to(&mut self, ev: fn(Box<ExecState>, usize) -> WarpEvent) {
        let (Some(events), Some(resume)) = (&self.events, &self.resume) else {
            std::panic::resume_unwind(Box::new(InlineBlocked))
        };
        let Some(mut st) = self.st.take() else {
            std::panic::resume_unwind(Box::new(Aborted))
        };
        st.dry = false;
        if events.send(ev(st, self.slot)).is_err() {
            std::panic::resume_unwind(Box::new(Aborted));
        }
        match resume.recv() {
            Some(Resume::Go(mut st)) => {
                st.kernel.copy = self.unroll;
                st.dry = self.spin.dry;
                self.st = Some(st);
            }
            // Closed (the recording is over or failed); `Start` goes to idle threads only.
            Some(Resume::Start(..)) | None => std::panic::resume_unwind(Box::new(Aborted)),
        }
    }

    // ---- recording core ----

    /// Records one instruction at the caller's PC (`sub` tells apart several instructions
    /// one API call emits). `dst_pair`: the destination is a 64-bit register pair.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn emit(
        &mut self,
        loc: &'static Location<'static>,
        sub: u8,
        opcode: &'static str,
        dst: Option<bool>,
        srcs: &[u16],
        mem: Option<(u32, &[u64])>,
        operands: &[u64],
    ) -> u16 {
        if self.exited == self.valid {
            // Every thread of the warp has exited: the warp fetches nothing more.
            return RZ;
        }
        if self.rec.insts.len() >= MAX_WARP_INSTS {
            // Unwinds with the message (no panic hook runs); the executor reports it as
            // the kernel's error, naming the CTA and warp.
            std::panic::resume_unwind(Box::new(format!(
                "the warp recorded more than {MAX_WARP_INSTS} instructions (a loop that does not end?)"
            )));
        }
        self.ensure_room();
        let mask = self.active();
        let in_head = self.spin.in_head();
        let st = self.state();
        let pc = st.kernel.pc(loc, sub);
        let name = opcode;
        let opcode = st.kernel.opcode(opcode);
        let reg = match dst {
            Some(pair) => st.kernel.dst_reg(pc, pair),
            None => RZ,
        };
        if let Some((w, a)) = mem {
            if w > 0 && (in_head || !st.sync.is_empty()) {
                check_sync_access(st, name, pc, w, a, in_head);
            }
        }
        match self.spin.mode {
            SpinMode::HeadCheck => {
                let a = mem.map_or(&[][..], |m| m.1);
                self.spin_check(pc, opcode, name, mask, a, operands, reg);
                return reg;
            }
            SpinMode::TailMerge => {
                let a = mem.map_or(&[][..], |m| m.1);
                self.spin_merge(pc, opcode, name, mask, a, operands);
                return reg;
            }
            SpinMode::Probe => {
                let a = mem.map_or(&[][..], |m| m.1);
                self.tail_probe(pc, opcode, name, mask, a);
                return reg;
            }
            SpinMode::TailCheck => {
                let a = mem.map_or(&[][..], |m| m.1);
                self.tail_check(pc, opcode, name, mask, a, operands);
                return reg;
            }
            _ => {}
        }
        let rec = &mut self.rec;
        let mut strided = false;
        let (mem_width, addrs) = match mem {
            // Compressed now, as the writer will store them, so that a warp holds 16
            // bytes per coalesced access rather than 8 per lane.
            Some((w, a)) if w > 0 => match super::exec::compress_addrs(mask, a) {
                AddrRecord::Stride { base, stride } => {
                    strided = true;
                    (w, rec.addrs.push_slice(&[base, stride as i64 as u64]))
                }
                _ => (w, rec.addrs.push_slice(a)),
            },
            _ => (0, (0, 0)),
        };
        let operands = rec.operands.push_slice(operands);
        let mut s = [RZ; 4];
        let n_srcs = srcs.len().min(4);
        s[..n_srcs].copy_from_slice(&srcs[..n_srcs]);
        let (idx, _) = rec.insts.push_slice(&[RecInst {
            pc,
            mask,
            opcode,
            dsts: [reg, RZ],
            n_dsts: u8::from(dst.is_some()),
            srcs: s,
            n_srcs: n_srcs as u8,
            mem_width,
            strided,
            addrs,
            operands,
        }]);
        if self.spin.mode != SpinMode::Off {
            self.spin_recorded(idx, mask, name, reg);
        }
        reg
    }

    /// Records a register-to-register instruction at the caller's PC with destination
    /// values `v` (computed on the active lanes); `pair`: a 64-bit destination.
    #[track_caller]
    pub(crate) fn alu<T>(
        &mut self,
        op: &'static str,
        pair: bool,
        srcs: &[u16],
        v: [T; WARP],
    ) -> Val<T> {
        let reg = self.emit(Location::caller(), 0, op, Some(pair), srcs, None, &[]);
        Val { v, reg }
    }

    pub(crate) fn map<T: Copy + Default, U: Copy + Default>(
        &self,
        a: &Val<T>,
        f: impl Fn(T) -> U,
    ) -> [U; WARP] {
        let mut out = [U::default(); WARP];
        let m = self.active();
        for (l, o) in out.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *o = f(a.v[l]);
            }
        }
        out
    }

    pub(crate) fn zip<A: Copy, B: Copy, U: Copy + Default>(
        &self,
        a: &Val<A>,
        b: &Val<B>,
        f: impl Fn(A, B) -> U,
    ) -> [U; WARP] {
        let mut out = [U::default(); WARP];
        let m = self.active();
        for (l, o) in out.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *o = f(a.v[l], b.v[l]);
            }
        }
        out
    }

    // ---- ids and constants ----

    /// `threadIdx` component `d` (0 = x): `S2R`.
    #[track_caller]
    pub fn tid(&mut self, d: usize) -> Val<u32> {
        self.tid_at(Location::caller(), 0, d)
    }

    /// `blockIdx` component `d`: `S2R`.
    #[track_caller]
    pub fn ctaid(&mut self, d: usize) -> Val<u32> {
        let loc = Location::caller();
        let reg = self.emit(loc, 0, "S2R", Some(false), &[], None, &[]);
        Val {
            v: [self.cta[d.min(2)]; WARP],
            reg,
        }
    }

    /// Lane index within the warp: `S2R SR_LANEID`.
    #[track_caller]
    pub fn lane_id(&mut self) -> Val<u32> {
        let loc = Location::caller();
        let reg = self.emit(loc, 0, "S2R", Some(false), &[], None, &[]);
        let mut v = [0u32; WARP];
        for (l, x) in v.iter_mut().enumerate() {
            *x = l as u32;
        }
        Val { v, reg }
    }

    /// `blockIdx.x * blockDim.x + threadIdx.x`: `S2R`, `S2R`, `IMAD` (as nvcc emits it).
    #[track_caller]
    pub fn global_id_x(&mut self) -> Val<u32> {
        let loc = Location::caller();
        let t = self.tid_at(loc, 0, 0);
        let c = self.emit(loc, 1, "S2R", Some(false), &[], None, &[]);
        let bx = self.block[0];
        let cx = self.cta[0];
        let v = self.map(&t, |t| cx.wrapping_mul(bx).wrapping_add(t));
        let reg = self.emit(loc, 2, "IMAD", Some(false), &[c, t.reg], None, &[]);
        Val { v, reg }
    }

    fn tid_at(&mut self, loc: &'static Location<'static>, sub: u8, d: usize) -> Val<u32> {
        let (bx, by) = (self.block[0], self.block[1]);
        let base = self.warp * WARP as u32;
        let mut v = [0u32; WARP];
        for (l, x) in v.iter_mut().enumerate() {
            let t = base + l as u32;
            *x = match d {
                0 => t % bx,
                1 => t / bx % by,
                _ => t / (bx * by),
            };
        }
        let reg = self.emit(loc, sub, "S2R", Some(false), &[], None, &[]);
        Val { v, reg }
    }

    /// A constant in a register: `MOV` (for 64-bit values `IMAD.MOV.U32` on the pair is
    /// not modeled; they come from `MOV` as well).
    #[track_caller]
    pub fn konst<T: Elem>(&mut self, x: T) -> Val<T> {
        let loc = Location::caller();
        let reg = self.emit(loc, 0, "MOV", Some(T::BYTES == 8), &[], None, &[]);
        Val { v: [x; WARP], reg }
    }

    // ---- integer ----

    /// `a + b`: `IADD3`.
    #[track_caller]
    pub fn iadd(&mut self, a: &Val<u32>, b: &Val<u32>) -> Val<u32> {
        let v = self.zip(a, b, u32::wrapping_add);
        self.alu("IADD3", false, &[a.reg, b.reg, RZ], v)
    }

    /// `acc = acc + a` in place (the accumulator keeps its register): `IADD3`.
    #[track_caller]
    pub fn iadd_acc(&mut self, acc: &mut Val<u32>, a: &Val<u32>) {
        let m = self.active();
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                acc.v[l] = acc.v[l].wrapping_add(a.v[l]);
            }
        }
        let loc = Location::caller();
        let st = self.state();
        let pc = st.kernel.pc(loc, 0);
        st.kernel.pin_dst(pc, acc.reg, false);
        self.emit(
            loc,
            0,
            "IADD3",
            Some(false),
            &[acc.reg, a.reg, RZ],
            None,
            &[],
        );
    }

    /// `a + k`: `IADD3` with an immediate.
    #[track_caller]
    pub fn iadd_imm(&mut self, a: &Val<u32>, k: u32) -> Val<u32> {
        let v = self.map(a, |x| x.wrapping_add(k));
        self.alu("IADD3", false, &[a.reg, RZ], v)
    }

    /// `a - b`: `IADD3` with a negated operand.
    #[track_caller]
    pub fn isub(&mut self, a: &Val<u32>, b: &Val<u32>) -> Val<u32> {
        let v = self.zip(a, b, u32::wrapping_sub);
        self.alu("IADD3", false, &[a.reg, b.reg, RZ], v)
    }

    /// `a * b + c`: `IMAD`.
    #[track_caller]
    pub fn imad(&mut self, a: &Val<u32>, b: &Val<u32>, c: &Val<u32>) -> Val<u32> {
        let m = self.active();
        let mut v = [0u32; WARP];
        for (l, x) in v.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *x = a.v[l].wrapping_mul(b.v[l]).wrapping_add(c.v[l]);
            }
        }
        self.alu("IMAD", false, &[a.reg, b.reg, c.reg], v)
    }

    /// `a * k + c` with a constant `k` (kernel parameter or literal): `IMAD`.
    #[track_caller]
    pub fn imad_imm(&mut self, a: &Val<u32>, k: u32, c: &Val<u32>) -> Val<u32> {
        let v = self.zip(a, c, |x, y| x.wrapping_mul(k).wrapping_add(y));
        self.alu("IMAD", false, &[a.reg, c.reg], v)
    }

    /// `a * k` with a constant: `IMAD` with RZ addend (what nvcc emits for a multiply by a
    /// parameter).
    #[track_caller]
    pub fn imul_imm(&mut self, a: &Val<u32>, k: u32) -> Val<u32> {
        let v = self.map(a, |x| x.wrapping_mul(k));
        self.alu("IMAD", false, &[a.reg, RZ], v)
    }

    /// `a << k`: `SHF.L.U32`.
    #[track_caller]
    pub fn shl(&mut self, a: &Val<u32>, k: u32) -> Val<u32> {
        let v = self.map(a, |x| x.wrapping_shl(k));
        self.alu("SHF.L.U32", false, &[a.reg, RZ], v)
    }

    /// `a >> k` (logical): `SHF.R.U32.HI`.
    #[track_caller]
    pub fn shr(&mut self, a: &Val<u32>, k: u32) -> Val<u32> {
        let v = self.map(a, |x| x.wrapping_shr(k));
        self.alu("SHF.R.U32.HI", false, &[RZ, a.reg], v)
    }

    /// `a & k`: `LOP3.LUT`.
    #[track_caller]
    pub fn and_imm(&mut self, a: &Val<u32>, k: u32) -> Val<u32> {
        let v = self.map(a, |x| x & k);
        self.alu("LOP3.LUT", false, &[a.reg, RZ], v)
    }

    /// `a % k` for a power-of-two or general constant: `LOP3.LUT` or `IMAD.HI`+`IMAD`
    /// (recorded as one `IMAD.HI.U32` and one `IADD3`, the magic-number sequence nvcc
    /// uses for a constant divisor).
    #[track_caller]
    pub fn rem_imm(&mut self, a: &Val<u32>, k: u32) -> Val<u32> {
        let loc = Location::caller();
        let k = k.max(1);
        let v = self.map(a, |x| x % k);
        if k.is_power_of_two() {
            let reg = self.emit(loc, 0, "LOP3.LUT", Some(false), &[a.reg, RZ], None, &[]);
            return Val { v, reg };
        }
        let q = self.emit(loc, 0, "IMAD.HI.U32", Some(false), &[a.reg, RZ], None, &[]);
        let reg = self.emit(loc, 1, "IMAD", Some(false), &[q, a.reg], None, &[]);
        Val { v, reg }
    }

    /// `a / k` for a constant: `SHF.R.U32.HI` for powers of two, else `IMAD.HI.U32`.
    #[track_caller]
    pub fn div_imm(&mut self, a: &Val<u32>, k: u32) -> Val<u32> {
        let loc = Location::caller();
        let k = k.max(1);
        let v = self.map(a, |x| x / k);
        let op = if k.is_power_of_two() {
            "SHF.R.U32.HI"
        } else {
            "IMAD.HI.U32"
        };
        let reg = self.emit(loc, 0, op, Some(false), &[a.reg, RZ], None, &[]);
        Val { v, reg }
    }

    /// `min(a, b)` / `max(a, b)`: `IMNMX`.
    #[track_caller]
    pub fn imin(&mut self, a: &Val<u32>, b: &Val<u32>) -> Val<u32> {
        let v = self.zip(a, b, u32::min);
        self.alu("IMNMX.U32", false, &[a.reg, b.reg], v)
    }

    /// `max(a, b)`: `IMNMX` (with the `!PT` selector, the same mnemonic).
    #[track_caller]
    pub fn imax(&mut self, a: &Val<u32>, b: &Val<u32>) -> Val<u32> {
        let v = self.zip(a, b, u32::max);
        self.alu("IMNMX.U32", false, &[a.reg, b.reg], v)
    }

    /// The `copy`-th copy of a body the compiler unrolled: every instruction `f` records
    /// gets a PC (and destination register) of its own per copy, where a Rust loop over
    /// `f` would record the same PCs again. Copy 0 is the body's own PCs.
    pub fn unrolled<R>(&mut self, copy: u8, f: impl FnOnce(&mut Warp) -> R) -> R {
        let saved = self.unroll;
        self.unroll = copy;
        self.state().kernel.copy = copy;
        let r = f(self);
        self.unroll = saved;
        self.state().kernel.copy = saved;
        r
    }

    /// Integer comparison with a per-lane value: `ISETP.<cmp>.U32.AND`.
    #[track_caller]
    pub fn icmp(&mut self, c: Cmp, a: &Val<u32>, b: &Val<u32>) -> Pred {
        let p = self.pred_of(|l| c.eval(a.v[l], b.v[l]));
        let op = isetp(c);
        self.emit(Location::caller(), 0, op, None, &[a.reg, b.reg], None, &[]);
        p
    }

    /// Integer comparison with a constant: `ISETP.<cmp>.U32.AND`.
    #[track_caller]
    pub fn icmp_imm(&mut self, c: Cmp, a: &Val<u32>, k: u32) -> Pred {
        let p = self.pred_of(|l| c.eval(a.v[l], k));
        let op = isetp(c);
        self.emit(Location::caller(), 0, op, None, &[a.reg], None, &[]);
        p
    }

    /// Float comparison: `FSETP.<cmp>.AND`.
    #[track_caller]
    pub fn fcmp(&mut self, c: Cmp, a: &Val<f32>, b: &Val<f32>) -> Pred {
        let p = self.pred_of(|l| c.eval(a.v[l], b.v[l]));
        let op = match c {
            Cmp::Lt => "FSETP.LT.AND",
            Cmp::Le => "FSETP.LE.AND",
            Cmp::Gt => "FSETP.GT.AND",
            Cmp::Ge => "FSETP.GE.AND",
            Cmp::Eq => "FSETP.EQ.AND",
            Cmp::Ne => "FSETP.NEU.AND",
        };
        self.emit(Location::caller(), 0, op, None, &[a.reg, b.reg], None, &[]);
        p
    }

    pub(crate) fn pred_of(&self, f: impl Fn(usize) -> bool) -> Pred {
        let m = self.active();
        let mut p = 0u32;
        for l in 0..WARP {
            if m >> l & 1 == 1 && f(l) {
                p |= 1 << l;
            }
        }
        Pred(p)
    }

    /// `p ? a : b` per lane: `SEL`.
    #[track_caller]
    pub fn sel<T: Elem>(&mut self, p: Pred, a: &Val<T>, b: &Val<T>) -> Val<T> {
        let m = self.active();
        let mut v = [T::default(); WARP];
        for (l, x) in v.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *x = if p.lane(l) { a.v[l] } else { b.v[l] };
            }
        }
        self.alu("SEL", T::BYTES == 8, &[a.reg, b.reg], v)
    }

    // ---- floating point ----

    /// `a + b`: `FADD` (`DADD` for f64).
    #[track_caller]
    pub fn fadd<T: Float>(&mut self, a: &Val<T>, b: &Val<T>) -> Val<T> {
        let v = self.zip(a, b, |x, y| x.add(y));
        self.alu(T::ADD, T::BYTES == 8, &[a.reg, b.reg], v)
    }

    /// `a * b`: `FMUL` / `DMUL`.
    #[track_caller]
    pub fn fmul<T: Float>(&mut self, a: &Val<T>, b: &Val<T>) -> Val<T> {
        let v = self.zip(a, b, |x, y| x.mul(y));
        self.alu(T::MUL, T::BYTES == 8, &[a.reg, b.reg], v)
    }

    /// `a * b + c`, fused: `FFMA` / `DFMA`.
    #[track_caller]
    pub fn ffma<T: Float>(&mut self, a: &Val<T>, b: &Val<T>, c: &Val<T>) -> Val<T> {
        let m = self.active();
        let mut v = [T::default(); WARP];
        for (l, x) in v.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *x = a.v[l].fma(b.v[l], c.v[l]);
            }
        }
        self.alu(T::FMA, T::BYTES == 8, &[a.reg, b.reg, c.reg], v)
    }

    /// `acc = a * b + acc` in place (the accumulator keeps its register, as in an unrolled
    /// dot product): `FFMA` / `DFMA`.
    #[track_caller]
    pub fn ffma_acc<T: Float>(&mut self, acc: &mut Val<T>, a: &Val<T>, b: &Val<T>) {
        let m = self.active();
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                acc.v[l] = a.v[l].fma(b.v[l], acc.v[l]);
            }
        }
        let loc = Location::caller();
        let st = self.state();
        let pc = st.kernel.pc(loc, 0);
        st.kernel.pin_dst(pc, acc.reg, T::BYTES == 8);
        self.emit(
            loc,
            0,
            T::FMA,
            Some(T::BYTES == 8),
            &[a.reg, b.reg, acc.reg],
            None,
            &[],
        );
    }

    /// `acc = acc + a` in place: `FADD` / `DADD`.
    #[track_caller]
    pub fn fadd_acc<T: Float>(&mut self, acc: &mut Val<T>, a: &Val<T>) {
        let m = self.active();
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                acc.v[l] = acc.v[l].add(a.v[l]);
            }
        }
        let loc = Location::caller();
        let st = self.state();
        let pc = st.kernel.pc(loc, 0);
        st.kernel.pin_dst(pc, acc.reg, T::BYTES == 8);
        self.emit(
            loc,
            0,
            T::ADD,
            Some(T::BYTES == 8),
            &[acc.reg, a.reg],
            None,
            &[],
        );
    }

    /// Integer to float: `I2F.U32` (`I2F.F64.U32`).
    #[track_caller]
    pub fn u2f<T: Float>(&mut self, a: &Val<u32>) -> Val<T> {
        let v = self.map(a, T::from_u32);
        self.alu(T::I2F, T::BYTES == 8, &[a.reg], v)
    }

    // ---- memory ----

    /// `&buf[idx]`: `IMAD.WIDE` (64-bit address in a register pair).
    #[track_caller]
    pub fn addr<T: Elem>(&mut self, buf: &Buffer<T>, idx: &Val<u32>) -> Val<u64> {
        self.addr_at(Location::caller(), 0, buf, idx)
    }

    pub(crate) fn lane_addrs(&self, a: &Val<u64>) -> ([u64; WARP], usize) {
        let m = self.active();
        let mut out = [0u64; WARP];
        let mut n = 0;
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                out[n] = a.v[l];
                n += 1;
            }
        }
        (out, n)
    }

    /// Global load: `LDG.E` (`LDG.E.64`).
    #[track_caller]
    pub fn ld<T: Elem>(&mut self, a: &Val<u64>) -> Val<T> {
        self.ld_at(Location::caller(), 0, a)
    }

    /// `buf[idx]`: `IMAD.WIDE` then `LDG.E`.
    #[track_caller]
    pub fn load<T: Elem>(&mut self, buf: &Buffer<T>, idx: &Val<u32>) -> Val<T> {
        let loc = Location::caller();
        let a = self.addr_at(loc, 0, buf, idx);
        self.ld_at(loc, 1, &a)
    }

    /// `buf[idx] = x`: `IMAD.WIDE` then `STG.E`.
    #[track_caller]
    pub fn store<T: Elem>(&mut self, buf: &Buffer<T>, idx: &Val<u32>, x: &Val<T>) {
        let loc = Location::caller();
        let a = self.addr_at(loc, 0, buf, idx);
        self.st_at(loc, 1, &a, x)
    }

    pub(crate) fn addr_at<T: Elem>(
        &mut self,
        loc: &'static Location<'static>,
        sub: u8,
        buf: &Buffer<T>,
        idx: &Val<u32>,
    ) -> Val<u64> {
        let b = buf.base;
        let v = self.map(idx, |i| b.wrapping_add(i as u64 * T::BYTES as u64));
        let reg = self.emit(loc, sub, "IMAD.WIDE.U32", Some(true), &[idx.reg], None, &[]);
        Val { v, reg }
    }

    pub(crate) fn ld_at<T: Elem>(
        &mut self,
        loc: &'static Location<'static>,
        sub: u8,
        a: &Val<u64>,
    ) -> Val<T> {
        let (addrs, n) = self.lane_addrs(a);
        let m = self.active();
        let mut v = [T::default(); WARP];
        let st = self.state();
        for (l, x) in v.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *x = T::from_bits(st.read_global(a.v[l], T::BYTES));
            }
        }
        let op = st.kernel.sass.ldg(T::BYTES);
        if self.spin.in_head() {
            self.spin.stash(|l| v[l].to_bits());
        }
        let reg = self.emit(
            loc,
            sub,
            op,
            Some(T::BYTES == 8),
            &[a.reg],
            Some((T::BYTES, &addrs[..n])),
            &[],
        );
        Val { v, reg }
    }

    pub(crate) fn st_at<T: Elem>(
        &mut self,
        loc: &'static Location<'static>,
        sub: u8,
        a: &Val<u64>,
        x: &Val<T>,
    ) {
        let (addrs, n) = self.lane_addrs(a);
        let m = self.active();
        let st = self.state();
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                st.write_global(a.v[l], T::BYTES, x.v[l].to_bits());
            }
        }
        let op = st.kernel.sass.stg(T::BYTES);
        self.emit(
            loc,
            sub,
            op,
            None,
            &[a.reg, x.reg],
            Some((T::BYTES, &addrs[..n])),
            &[],
        );
    }

    /// Global store: `STG.E` (`STG.E.64`).
    #[track_caller]
    pub fn st<T: Elem>(&mut self, a: &Val<u64>, x: &Val<T>) {
        self.st_at(Location::caller(), 0, a, x)
    }

    /// A strong (`volatile`, `ld.relaxed.gpu`) 32-bit global load: `LDG.E.STRONG.GPU`. It
    /// bypasses L1, so it sees other SMs' writes: the load a spin loop polls a flag or
    /// counter with.
    #[track_caller]
    pub fn ld_strong(&mut self, a: &Val<u64>) -> Val<u32> {
        let (addrs, n) = self.lane_addrs(a);
        let m = self.active();
        let mut v = [0u32; WARP];
        let st = self.state();
        for (l, x) in v.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *x = st.read_global(a.v[l], 4) as u32;
            }
        }
        if self.spin.in_head() {
            self.spin.stash(|l| u64::from(v[l]));
        }
        let reg = self.emit(
            Location::caller(),
            0,
            "LDG.E.STRONG.GPU",
            Some(false),
            &[a.reg],
            Some((4, &addrs[..n])),
            &[],
        );
        Val { v, reg }
    }

    /// A strong 32-bit global store (`st.relaxed.gpu`): `STG.E.STRONG.GPU`, recording the
    /// value each active lane stores (format version 3), so that the timing model can
    /// update a sync word it writes; the store a flag is raised with.
    #[track_caller]
    pub fn st_strong(&mut self, a: &Val<u64>, x: &Val<u32>) {
        let (addrs, n) = self.lane_addrs(a);
        let m = self.active();
        let mut operands = [0u64; WARP];
        let mut k = 0;
        let st = self.state();
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                st.write_global(a.v[l], 4, u64::from(x.v[l]));
                operands[k] = u64::from(x.v[l]);
                k += 1;
            }
        }
        self.emit(
            Location::caller(),
            0,
            "STG.E.STRONG.GPU",
            None,
            &[a.reg, x.reg],
            Some((4, &addrs[..n])),
            &operands[..k],
        );
    }

    /// Byte offset of `arr[idx]` in shared memory: `LEA`.
    #[track_caller]
    pub fn shared_addr<T: Elem>(&mut self, arr: &SharedArr<T>, idx: &Val<u32>) -> Val<u32> {
        let o = arr.offset;
        let v = self.map(idx, |i| o.wrapping_add(i.wrapping_mul(T::BYTES)));
        self.alu("LEA", false, &[idx.reg], v)
    }

    pub(crate) fn shared_lanes(&self, a: &Val<u32>) -> ([u64; WARP], usize) {
        let m = self.active();
        let mut out = [0u64; WARP];
        let mut n = 0;
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                out[n] = a.v[l] as u64;
                n += 1;
            }
        }
        (out, n)
    }

    /// Shared load at byte offsets `a`: `LDS` (`LDS.64`). Recorded addresses are offsets
    /// into the CTA's shared memory.
    #[track_caller]
    pub fn lds<T: Elem>(&mut self, a: &Val<u32>) -> Val<T> {
        let (addrs, n) = self.shared_lanes(a);
        let m = self.active();
        let cta = self.cta_linear;
        let mut v = [T::default(); WARP];
        let st = self.state();
        for (l, x) in v.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *x = T::from_bits(st.read_shared(cta, a.v[l], T::BYTES));
            }
        }
        let op = if T::BYTES == 8 { "LDS.64" } else { "LDS" };
        let reg = self.emit(
            Location::caller(),
            0,
            op,
            Some(T::BYTES == 8),
            &[a.reg],
            Some((T::BYTES, &addrs[..n])),
            &[],
        );
        Val { v, reg }
    }

    /// Shared store: `STS` (`STS.64`).
    #[track_caller]
    pub fn sts<T: Elem>(&mut self, a: &Val<u32>, x: &Val<T>) {
        let (addrs, n) = self.shared_lanes(a);
        let m = self.active();
        let cta = self.cta_linear;
        let st = self.state();
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                st.write_shared(cta, a.v[l], T::BYTES, x.v[l].to_bits());
            }
        }
        let op = if T::BYTES == 8 { "STS.64" } else { "STS" };
        self.emit(
            Location::caller(),
            0,
            op,
            None,
            &[a.reg, x.reg],
            Some((T::BYTES, &addrs[..n])),
            &[],
        );
    }

    /// Device-scope atomic on global memory, lanes applied in lane order. With `ret` it is
    /// `ATOMG.E.<op>.STRONG.GPU` and returns the old values; without, `RED.E.<op>.STRONG.GPU`
    /// (the result is unused). The per-lane operands are recorded (format version 2).
    #[track_caller]
    pub fn atomic<T: Elem + AtomicElem>(
        &mut self,
        op: Atom,
        a: &Val<u64>,
        x: &Val<T>,
        ret: bool,
    ) -> Val<T> {
        let (addrs, n) = self.lane_addrs(a);
        let m = self.active();
        let mut old = [T::default(); WARP];
        let mut operands = [0u64; WARP];
        let mut k = 0;
        let Some(name) = T::atom_name(op, ret) else {
            super::spin::fail(format!(
                "atomic {op:?} on {}-byte values is not an operation the recorder emits",
                T::BYTES
            ));
        };
        let st = self.state();
        for (l, o) in old.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                let cur = T::from_bits(st.read_global(a.v[l], T::BYTES));
                *o = cur;
                st.write_global(a.v[l], T::BYTES, T::apply(op, cur, x.v[l]).to_bits());
                // `Sub` is recorded as the addition of the negated operand.
                operands[k] = T::operand(op, x.v[l]).to_bits();
                k += 1;
            }
        }
        if self.spin.in_head() {
            self.spin.stash(|l| old[l].to_bits());
        }
        let dst = ret.then_some(T::BYTES == 8);
        let reg = self.emit(
            Location::caller(),
            0,
            name,
            dst,
            &[a.reg, x.reg],
            Some((T::BYTES, &addrs[..n])),
            &operands[..k],
        );
        Val { v: old, reg }
    }

    /// Device-scope compare-and-swap on a 32-bit global word (`atomicCAS`), lanes applied
    /// in lane order: where the word equals `cmp` it becomes `new`; every lane gets the old
    /// value (`ATOMG.E.CAS.STRONG.GPU`). Each active lane records its two operands, the
    /// compare value and the new one (format version 2's operand column).
    #[track_caller]
    pub fn atomic_cas(&mut self, a: &Val<u64>, cmp: &Val<u32>, new: &Val<u32>) -> Val<u32> {
        let (addrs, n) = self.lane_addrs(a);
        let m = self.active();
        let mut old = [0u32; WARP];
        let mut operands = [0u64; 2 * WARP];
        let mut k = 0;
        let st = self.state();
        for (l, o) in old.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                let cur = st.read_global(a.v[l], 4) as u32;
                *o = cur;
                if cur == cmp.v[l] {
                    st.write_global(a.v[l], 4, u64::from(new.v[l]));
                }
                operands[k] = u64::from(cmp.v[l]);
                operands[k + 1] = u64::from(new.v[l]);
                k += 2;
            }
        }
        if self.spin.in_head() {
            self.spin.stash(|l| u64::from(old[l]));
        }
        let reg = self.emit(
            Location::caller(),
            0,
            "ATOMG.E.CAS.STRONG.GPU",
            Some(false),
            &[a.reg, cmp.reg, new.reg],
            Some((4, &addrs[..n])),
            &operands[..k],
        );
        Val { v: old, reg }
    }

    /// Shared-memory atomic add (`ATOMS.ADD`), returning old values.
    #[track_caller]
    pub fn atomic_shared_add(&mut self, a: &Val<u32>, x: &Val<u32>) -> Val<u32> {
        let (addrs, n) = self.shared_lanes(a);
        let m = self.active();
        let cta = self.cta_linear;
        let mut old = [0u32; WARP];
        let mut operands = [0u64; WARP];
        let mut k = 0;
        let st = self.state();
        for (l, o) in old.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                let cur = st.read_shared(cta, a.v[l], 4) as u32;
                *o = cur;
                st.write_shared(cta, a.v[l], 4, cur.wrapping_add(x.v[l]) as u64);
                operands[k] = x.v[l] as u64;
                k += 1;
            }
        }
        let reg = self.emit(
            Location::caller(),
            0,
            "ATOMS.ADD",
            Some(false),
            &[a.reg, x.reg],
            Some((4, &addrs[..n])),
            &operands[..k],
        );
        Val { v: old, reg }
    }

    /// Memory fence at device scope: `MEMBAR.SC.GPU`.
    #[track_caller]
    pub fn fence_gpu(&mut self) {
        self.emit(Location::caller(), 0, "MEMBAR.SC.GPU", None, &[], None, &[]);
    }

    /// Memory fence at CTA scope: `MEMBAR.SC.CTA`.
    #[track_caller]
    pub fn fence_cta(&mut self) {
        self.emit(Location::caller(), 0, "MEMBAR.SC.CTA", None, &[], None, &[]);
    }

    // ---- control flow ----

    /// `__syncthreads()`: `BAR.SYNC`. The warp waits until every warp of its CTA that has
    /// not exited arrives.
    #[track_caller]
    pub fn barrier(&mut self) {
        self.emit(Location::caller(), 0, "BAR.SYNC", None, &[], None, &[]);
        self.switch(WarpEvent::barrier);
    }

    /// Lets the other warps run (a spin loop's back-edge): a kernel whose warps wait on
    /// other CTAs calls this in its waiting loop, so the capture interleaves them
    /// deterministically instead of deadlocking.
    pub fn spin_yield(&mut self) {
        self.switch(WarpEvent::yielded);
    }

    /// `__nanosleep(ns)` in a spin loop's back-off: `NANOSLEEP` (the timing model treats
    /// it as a no-op today), and the warp yields to the others, as
    /// [`Warp::spin_yield`] does.
    #[track_caller]
    pub fn nanosleep(&mut self) {
        self.emit(Location::caller(), 0, "NANOSLEEP", None, &[], None, &[]);
        self.spin_yield();
    }

    /// `if (p) { body }`: `BSSY`, `@!P BRA` (recorded with the lanes that branch around the
    /// body), the body under the narrowed mask, `BSYNC` at reconvergence.
    #[track_caller]
    pub fn if_(&mut self, p: Pred, body: impl FnOnce(&mut Self)) {
        let loc = Location::caller();
        let saved = self.mask;
        self.emit(loc, 0, "BSSY", None, &[], None, &[]);
        let taken = self.active() & !p.0;
        let m = self.mask;
        self.mask = taken;
        self.emit(loc, 1, "BRA", None, &[], None, &[]);
        self.mask = m & p.0;
        if self.active() != 0 {
            body(self);
        }
        self.mask = saved;
        self.emit(loc, 2, "BSYNC", None, &[], None, &[]);
    }

    /// A counted loop with a uniform trip count: per iteration the body, then `IADD3`
    /// (counter), `ISETP.NE.AND` and the back-edge `BRA`.
    #[track_caller]
    pub fn for_range(&mut self, n: u32, mut body: impl FnMut(&mut Self, u32)) {
        let loc = Location::caller();
        for i in 0..n {
            body(self, i);
            // The counter lives in the increment's own register: `IADD3 Rc, Rc, 1`,
            // `ISETP.NE Rc, n`, `BRA`.
            let st = self.state();
            let pc = st.kernel.pc(loc, 0);
            let ctr = st.kernel.dst_reg(pc, false);
            self.emit(loc, 0, "IADD3", Some(false), &[ctr, RZ], None, &[]);
            self.emit(loc, 1, "ISETP.NE.U32.AND", None, &[ctr], None, &[]);
            self.emit(loc, 2, "BRA", None, &[], None, &[]);
        }
    }

    /// `while (cond) { body }` with per-lane exit: lanes leave as `cond` turns false; the
    /// loop ends when no lane remains. Records `BSSY`, then per iteration the condition's
    /// instructions, the exit `BRA` and the body, then `BSYNC`.
    #[track_caller]
    pub fn while_(&mut self, cond: impl FnMut(&mut Self) -> Pred, body: impl FnMut(&mut Self)) {
        // The leaving lanes run nothing: `while_its` with an empty `after`.
        self.while_its(cond, body, |_| {});
    }

    /// `if (p) return;`: `@P EXIT` recorded with the exiting lanes (mask 0 when none
    /// exits, as the tracer records a predicated-off `EXIT`).
    #[track_caller]
    pub fn exit_if(&mut self, p: Pred) {
        let m = self.mask;
        let leaving = self.active() & p.0;
        self.mask = leaving;
        self.emit(Location::caller(), 0, "EXIT", None, &[], None, &[]);
        self.exited |= leaving;
        self.mask = m;
    }

    /// `return;` for all active lanes: `EXIT`.
    #[track_caller]
    pub fn exit(&mut self) {
        let leaving = self.active();
        self.emit(Location::caller(), 0, "EXIT", None, &[], None, &[]);
        self.exited |= leaving;
    }

    /// The prologue nvcc puts first in every kernel (`MOV R1, c[0x0][0x28]`: the stack
    /// pointer), recorded by the executor before the body runs.
    #[track_caller]
    pub(crate) fn prologue(&mut self) {
        let loc = Location::caller();
        let st = self.state();
        let pc = st.kernel.pc(loc, 0);
        st.kernel.pin_dst(pc, 1, false);
        self.emit(loc, 0, "MOV", Some(false), &[], None, &[]);
    }

    /// Closes the warp: lanes still running exit (`EXIT`).
    #[track_caller]
    pub(crate) fn epilogue(&mut self) {
        if self.active() != 0 {
            self.exit();
        }
    }
}

/// Checks an access to memory against the declared sync words: a spin head's value
/// instructions read only sync words (32-bit); a plain store never writes one (the timing
/// model would not know the value: `st_strong` records it); an atomic on one is a 32-bit
/// integer operation. A violation ends the recording with a message.
fn check_sync_access(
    st: &ExecState,
    name: &str,
    pc: u32,
    width: u32,
    addrs: &[u64],
    in_head: bool,
) {
    let what = |a: u64| {
        format!(
            "{a:#x} ({})",
            st.mem.name_of(a).unwrap_or("outside every allocation")
        )
    };
    if in_head && super::spin::is_value_inst(name) {
        if let Some(&a) = addrs.iter().find(|&&a| !st.is_sync(a)) {
            super::spin::fail(format!(
                "{name} at pc {pc:#x} in a spin head reads {}, which is not a declared sync word: a spin head's loads and atomics must access sync words (Recorder::sync_words)",
                what(a)
            ));
        }
        if width != 4 {
            super::spin::fail(format!(
                "{name} at pc {pc:#x} in a spin head reads {width} bytes: sync words are 32-bit"
            ));
        }
        return;
    }
    let Some(&a) = addrs.iter().find(|&&a| st.is_sync(a)) else {
        return;
    };
    if name.starts_with("STG") && !name.contains(".STRONG") {
        super::spin::fail(format!(
            "{name} at pc {pc:#x} writes the sync word {} with a plain store; write sync words with st_strong (STG.E.STRONG.GPU records the value)",
            what(a)
        ));
    }
    let atomic = name.starts_with("ATOMG") || name.starts_with("RED");
    if atomic && (width != 4 || name.contains(".F32") || name.contains(".F64")) {
        super::spin::fail(format!(
            "{name} at pc {pc:#x} on the sync word {}: atomics on sync words are 32-bit integer operations",
            what(a)
        ));
    }
}

fn isetp(c: Cmp) -> &'static str {
    match c {
        Cmp::Lt => "ISETP.LT.U32.AND",
        Cmp::Le => "ISETP.LE.U32.AND",
        Cmp::Gt => "ISETP.GT.U32.AND",
        Cmp::Ge => "ISETP.GE.U32.AND",
        Cmp::Eq => "ISETP.EQ.U32.AND",
        Cmp::Ne => "ISETP.NE.U32.AND",
    }
}

/// Floating-point element types and their SASS mnemonics.
pub trait Float: Elem + PartialOrd {
    const ADD: &'static str;
    const MUL: &'static str;
    const FMA: &'static str;
    const I2F: &'static str;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn fma(self, b: Self, c: Self) -> Self;
    fn from_u32(x: u32) -> Self;
}

impl Float for f32 {
    const ADD: &'static str = "FADD";
    const MUL: &'static str = "FMUL";
    const FMA: &'static str = "FFMA";
    const I2F: &'static str = "I2F.U32";
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
    fn fma(self, b: Self, c: Self) -> Self {
        self.mul_add(b, c)
    }
    fn from_u32(x: u32) -> Self {
        x as f32
    }
}

impl Float for f64 {
    const ADD: &'static str = "DADD";
    const MUL: &'static str = "DMUL";
    const FMA: &'static str = "DFMA";
    const I2F: &'static str = "I2F.F64.U32";
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
    fn fma(self, b: Self, c: Self) -> Self {
        self.mul_add(b, c)
    }
    fn from_u32(x: u32) -> Self {
        x as f64
    }
}

/// Types with global atomics.
pub trait AtomicElem: Elem {
    fn apply(op: Atom, cur: Self, x: Self) -> Self;
    /// The mnemonic (`ret`: the old value is used), `None` for an operation the type
    /// lacks.
    fn atom_name(op: Atom, ret: bool) -> Option<&'static str>;
    /// The operand recorded for `x` (the negation for `Sub`, recorded as `ADD`).
    fn operand(op: Atom, x: Self) -> Self;
}

impl AtomicElem for u32 {
    fn apply(op: Atom, cur: u32, x: u32) -> u32 {
        match op {
            Atom::Add => cur.wrapping_add(x),
            Atom::Sub => cur.wrapping_sub(x),
            Atom::Min => cur.min(x),
            Atom::Max => cur.max(x),
            Atom::Exch => x,
            Atom::And => cur & x,
            Atom::Or => cur | x,
            Atom::Xor => cur ^ x,
            Atom::Inc => {
                if cur >= x {
                    0
                } else {
                    cur + 1
                }
            }
            Atom::Dec => {
                if cur == 0 || cur > x {
                    x
                } else {
                    cur - 1
                }
            }
        }
    }
    fn atom_name(op: Atom, ret: bool) -> Option<&'static str> {
        Some(match (op, ret) {
            (Atom::Add | Atom::Sub, true) => "ATOMG.E.ADD.STRONG.GPU",
            (Atom::Add | Atom::Sub, false) => "RED.E.ADD.STRONG.GPU",
            (Atom::Min, true) => "ATOMG.E.MIN.STRONG.GPU",
            (Atom::Min, false) => "RED.E.MIN.STRONG.GPU",
            (Atom::Max, true) => "ATOMG.E.MAX.STRONG.GPU",
            (Atom::Max, false) => "RED.E.MAX.STRONG.GPU",
            (Atom::Exch, _) => "ATOMG.E.EXCH.STRONG.GPU",
            (Atom::And, true) => "ATOMG.E.AND.STRONG.GPU",
            (Atom::And, false) => "RED.E.AND.STRONG.GPU",
            (Atom::Or, true) => "ATOMG.E.OR.STRONG.GPU",
            (Atom::Or, false) => "RED.E.OR.STRONG.GPU",
            (Atom::Xor, true) => "ATOMG.E.XOR.STRONG.GPU",
            (Atom::Xor, false) => "RED.E.XOR.STRONG.GPU",
            (Atom::Inc, true) => "ATOMG.E.INC.STRONG.GPU",
            (Atom::Inc, false) => "RED.E.INC.STRONG.GPU",
            (Atom::Dec, true) => "ATOMG.E.DEC.STRONG.GPU",
            (Atom::Dec, false) => "RED.E.DEC.STRONG.GPU",
        })
    }
    fn operand(op: Atom, x: u32) -> u32 {
        match op {
            Atom::Sub => x.wrapping_neg(),
            _ => x,
        }
    }
}

impl AtomicElem for f32 {
    fn apply(op: Atom, cur: f32, x: f32) -> f32 {
        match op {
            Atom::Add => cur + x,
            Atom::Sub => cur - x,
            Atom::Min => cur.min(x),
            Atom::Max => cur.max(x),
            _ => x,
        }
    }
    fn atom_name(op: Atom, ret: bool) -> Option<&'static str> {
        match (op, ret) {
            (Atom::Add | Atom::Sub, true) => Some("ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU"),
            (Atom::Add | Atom::Sub, false) => Some("RED.E.ADD.F32.FTZ.RN.STRONG.GPU"),
            (Atom::Min | Atom::Max | Atom::Exch, _) => Some("ATOMG.E.EXCH.STRONG.GPU"),
            _ => None,
        }
    }
    fn operand(op: Atom, x: f32) -> f32 {
        match op {
            Atom::Sub => -x,
            _ => x,
        }
    }
}

impl AtomicElem for f64 {
    fn apply(op: Atom, cur: f64, x: f64) -> f64 {
        match op {
            Atom::Add => cur + x,
            Atom::Sub => cur - x,
            Atom::Min => cur.min(x),
            Atom::Max => cur.max(x),
            _ => x,
        }
    }
    fn atom_name(op: Atom, ret: bool) -> Option<&'static str> {
        match (op, ret) {
            (Atom::Add | Atom::Sub, true) => Some("ATOMG.E.ADD.F64.RN.STRONG.GPU"),
            (Atom::Add | Atom::Sub, false) => Some("RED.E.ADD.F64.RN.STRONG.GPU"),
            (Atom::Min | Atom::Max | Atom::Exch, _) => Some("ATOMG.E.EXCH.64.STRONG.GPU"),
            _ => None,
        }
    }
    fn operand(op: Atom, x: f64) -> f64 {
        match op {
            Atom::Sub => -x,
            _ => x,
        }
    }
}
