//! Spin regions (format version 3, DESIGN.md section 6): a spin loop recorded once, as a
//! loop template the timing model repeats as many times as its simulated sync values
//! require, and sync words, the 32-bit words whose values the model computes.
//!
//! [`Warp::spin`] runs the loop functionally on real values, switching to the other warps
//! after every iteration in which a lane is still waiting, and records one instance of
//! the region (see `tessera_traces::SpinRegion`):
//!
//! - the head of the first iteration, under the lanes spinning at entry (its
//!   value instructions, the `LDG`s and `ATOMG`s, must read sync words), then one
//!   `ISETP` per exit term (part of the head);
//! - the exit test `BRA` at the call's PC, under the lanes spinning at entry, whose
//!   operands are the exit terms' constants (per active lane in lane order, the terms in
//!   order);
//! - the tail once, merged over the iterations: each lane that left ran it once, and its
//!   instructions carry the union of those lanes with each lane's addresses and operands
//!   from the iteration in which it ran them;
//! - the back-edge `BRA`, under the lanes spinning at entry.
//!
//! Later iterations of the head are executed but not recorded; they must run the same
//! instructions at the same addresses with the same operands, under the recorded masks
//! narrowed to the lanes still spinning, and the exit constants must not change: the
//! model's loop template is fixed. Anything else fails the recording with a message that
//! names the kernel, CTA and warp. Spin regions do not nest.
//!
//! No allocation happens here on a warp thread (see `exec::run_grid`): the state lives
//! inline in the [`Warp`], the region's entry in the kernel's tables is a fixed-size
//! [`SpinSite`] converted to the trace's `SpinRegion` by the writer's thread, and the
//! buffers grow through `Warp::ensure_room`.

use super::exec::compress_addrs;
use super::warp::{RecInst, Val, Warp, WARP};
use std::panic::Location;
use tessera_traces::codec::AddrRecord;
use tessera_traces::reader::MAX_EXIT_TERMS;
use tessera_traces::schema::{OWN_LANE, RZ};
use tessera_traces::{ExitTerm, RebasedAccess, RegionKind, SpinRegion, SyncCmp};

/// Where a warp is in a spin region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum SpinMode {
    /// Not in a region: instructions are recorded.
    #[default]
    Off,
    /// The head of the first iteration: recorded, values captured.
    Head,
    /// The head of a later iteration: checked against the recorded one, values captured.
    HeadCheck,
    /// The tail, the first time a lane runs it: recorded.
    Tail,
    /// The tail again: merged into the recorded one.
    TailMerge,
    /// A branch or queue tail's unrecorded dry pass on each lane's template value plus
    /// one: compared with the recorded pass to find the rebased accesses.
    Probe,
    /// A branch or queue tail run for real: checked against the recorded one.
    TailCheck,
}

/// A warp's spin-region state, held inline in the [`Warp`] (no allocation).
#[derive(Clone, Copy)]
pub(crate) struct SpinCtx {
    pub(crate) mode: SpinMode,
    /// Index in the record of the head's first instruction and the head's length.
    pub(crate) head: (u32, u32),
    /// Likewise for the tail, once recorded.
    pub(crate) tail: (u32, u32),
    /// Check and merge modes: the next recorded instruction to compare with.
    pub(crate) pos: u32,
    /// The lanes running the head this iteration (a checked tail: the lanes running it).
    pub(crate) spinning: u32,
    /// Value instructions met in this iteration's head, and the first
    /// [`MAX_EXIT_TERMS`] values (per lane), destination registers and the lanes that
    /// read them (a leader lane's value: fewer than the region's).
    pub(crate) n_values: usize,
    pub(crate) values: [[u32; WARP]; MAX_EXIT_TERMS],
    pub(crate) value_regs: [u16; MAX_EXIT_TERMS],
    pub(crate) value_masks: [u32; MAX_EXIT_TERMS],
    /// The values of the value instruction about to be emitted.
    stash: [u32; WARP],
    stashed: bool,
    /// A branch or queue region: each lane's template value (what its recorded tail was
    /// recorded with) and the values of the tail being checked.
    pub(crate) template: [u32; WARP],
    pub(crate) current: [u32; WARP],
    /// The tail's rebased accesses found so far: `(pc, stride)`.
    pub(crate) rebased: [(u32, i64); MAX_REBASED],
    pub(crate) n_rebased: usize,
    /// In a dry pass of a tail (memory is left as it is; see `ExecState::dry`).
    pub(crate) dry: bool,
}

/// Most rebased accesses a branch or queue tail may have.
pub const MAX_REBASED: usize = 8;

impl Default for SpinCtx {
    fn default() -> Self {
        SpinCtx {
            mode: SpinMode::Off,
            head: (0, 0),
            tail: (0, 0),
            pos: 0,
            spinning: 0,
            n_values: 0,
            values: [[0; WARP]; MAX_EXIT_TERMS],
            value_regs: [RZ; MAX_EXIT_TERMS],
            value_masks: [0; MAX_EXIT_TERMS],
            stash: [0; WARP],
            stashed: false,
            template: [0; WARP],
            current: [0; WARP],
            rebased: [(0, 0); MAX_REBASED],
            n_rebased: 0,
            dry: false,
        }
    }
}

impl SpinCtx {
    /// Whether the warp is running a head (its value instructions are captured).
    #[inline]
    pub(crate) fn in_head(&self) -> bool {
        matches!(self.mode, SpinMode::Head | SpinMode::HeadCheck)
    }

    /// Keeps the per-lane values of the instruction about to be emitted (its low 32 bits).
    #[inline]
    pub(crate) fn stash(&mut self, v: impl Fn(usize) -> u64) {
        for (l, x) in self.stash.iter_mut().enumerate() {
            *x = v(l) as u32;
        }
        self.stashed = true;
    }
}

/// Whether `opcode` is a value instruction of a spin head: a global load or an atomic
/// that returns its old value (`RED` does not).
#[inline]
pub(crate) fn is_value_inst(opcode: &str) -> bool {
    opcode.starts_with("LDG") || opcode.starts_with("ATOMG")
}

/// One term of an [`Exit`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Term {
    pub(crate) value: usize,
    pub(crate) cmp: SyncCmp,
    pub(crate) consts: [u32; WARP],
    reg: u16,
    /// Whose value each lane compares: its own ([`OWN_LANE`]) or lane `lane`'s.
    pub(crate) lane: u8,
}

impl Term {
    /// The lane whose value lane `l` compares.
    #[inline]
    pub(crate) fn source(&self, l: usize) -> usize {
        if self.lane < OWN_LANE {
            self.lane as usize
        } else {
            l
        }
    }
}

/// The exit condition a spin head returns: terms `value[t.value] <cmp> constant`, each
/// lane's constants its own, combined with AND ([`Exit::and`]) or OR ([`Exit::or`]).
/// `value` indexes the head's value instructions in order (its `LDG`s and `ATOMG`s: the
/// first is 0). Fixed size: built on warp threads without allocating.
#[derive(Clone, Copy, Debug)]
pub struct Exit {
    terms: [Term; MAX_EXIT_TERMS],
    n: usize,
    all: bool,
    /// Both `and` and `or` used, or too many terms: refused when the head returns.
    bad: Option<&'static str>,
}

impl Exit {
    fn one(value: usize, cmp: SyncCmp, consts: [u32; WARP], reg: u16) -> Exit {
        let t = Term {
            value,
            cmp,
            consts,
            reg,
            lane: OWN_LANE,
        };
        Exit {
            terms: [t; MAX_EXIT_TERMS],
            n: 1,
            all: true,
            bad: None,
        }
    }

    /// Exit when `value[value] <cmp> k` (per-lane constants `k`).
    pub fn when(value: usize, cmp: SyncCmp, k: &Val<u32>) -> Exit {
        Exit::one(value, cmp, k.v, k.reg)
    }

    /// Exit when `value[value] <cmp> k` (one constant for every lane, an immediate).
    pub fn when_imm(value: usize, cmp: SyncCmp, k: u32) -> Exit {
        Exit::one(value, cmp, [k; WARP], RZ)
    }

    /// Exit when lane `lane`'s `value[value] <cmp> k`, for every lane (a leader lane's
    /// result broadcast to its warp by a shuffle; `tessera_traces::ExitTerm::lane`). The
    /// lane must run the head; a region's tail then gets its value on every lane.
    pub fn when_lane(value: usize, lane: u32, cmp: SyncCmp, k: u32) -> Exit {
        let mut e = Exit::one(value, cmp, [k; WARP], RZ);
        if lane >= WARP as u32 {
            e.bad = Some("an exit term reads the value of a lane 0 to 31");
        }
        e.terms[0].lane = lane.min(OWN_LANE as u32) as u8;
        e
    }

    fn push(
        mut self,
        all: bool,
        value: usize,
        cmp: SyncCmp,
        consts: [u32; WARP],
        reg: u16,
    ) -> Exit {
        if self.n > 1 && self.all != all {
            self.bad = Some("an exit condition combines its terms with AND or with OR, not both");
        }
        if self.n >= MAX_EXIT_TERMS {
            self.bad = Some("an exit condition has at most 8 terms");
            return self;
        }
        self.terms[self.n] = Term {
            value,
            cmp,
            consts,
            reg,
            lane: OWN_LANE,
        };
        self.n += 1;
        self.all = all;
        self
    }

    /// ... and `value[value] <cmp> k`.
    pub fn and(self, value: usize, cmp: SyncCmp, k: &Val<u32>) -> Exit {
        self.push(true, value, cmp, k.v, k.reg)
    }

    /// ... and `value[value] <cmp> k` with an immediate.
    pub fn and_imm(self, value: usize, cmp: SyncCmp, k: u32) -> Exit {
        self.push(true, value, cmp, [k; WARP], RZ)
    }

    /// ... or `value[value] <cmp> k`.
    pub fn or(self, value: usize, cmp: SyncCmp, k: &Val<u32>) -> Exit {
        self.push(false, value, cmp, k.v, k.reg)
    }

    /// ... or `value[value] <cmp> k` with an immediate.
    pub fn or_imm(self, value: usize, cmp: SyncCmp, k: u32) -> Exit {
        self.push(false, value, cmp, [k; WARP], RZ)
    }

    pub(crate) fn terms(&self) -> &[Term] {
        &self.terms[..self.n]
    }
}

/// A spin region of a kernel as the recorder keeps it (fixed size, so that a warp thread
/// registers it without allocating); the writer's thread turns it into the trace's
/// `SpinRegion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SpinSite {
    pub kind: RegionKind,
    pub start_pc: u32,
    pub test_pc: u32,
    pub end_pc: u32,
    pub terms: [(usize, SyncCmp, u8); MAX_EXIT_TERMS],
    pub n_terms: usize,
    pub all: bool,
    pub backoff: (u32, u32),
    pub label: &'static str,
    pub rebased: [(u32, i64); MAX_REBASED],
    pub n_rebased: usize,
}

impl SpinSite {
    pub(crate) fn region(&self) -> SpinRegion {
        SpinRegion {
            kind: self.kind,
            start_pc: self.start_pc,
            test_pc: self.test_pc,
            end_pc: self.end_pc,
            terms: self.terms[..self.n_terms]
                .iter()
                .map(|&(value, cmp, lane)| ExitTerm {
                    value: value as u8,
                    cmp,
                    lane,
                })
                .collect(),
            all: self.all,
            backoff_base: self.backoff.0,
            backoff_max: self.backoff.1,
            label: self.label.to_string(),
            rebased: self.rebased[..self.n_rebased]
                .iter()
                .map(|&(pc, stride)| RebasedAccess { pc, stride })
                .collect(),
        }
    }
}

/// Ends the warp with a recording error (reported with its kernel, CTA and warp).
pub(crate) fn fail(msg: String) -> ! {
    std::panic::resume_unwind(Box::new(msg))
}

/// A region's back-off `(base, max)`: the maximum may not be below the base.
pub(crate) fn check_backoff(backoff: (u32, u32)) {
    if backoff.1 < backoff.0 {
        fail(format!(
            "spin back-off maximum {} below its base {}",
            backoff.1, backoff.0
        ));
    }
}

/// The `k`-th active lane's address of a recorded instruction.
pub(crate) fn recorded_addr(w: &Warp, i: &RecInst, k: usize) -> Option<u64> {
    let a = w.rec.addrs.get(i.addrs)?;
    if i.strided {
        let (base, stride) = (*a.first()?, *a.get(1)? as i64);
        Some(base.wrapping_add(stride.wrapping_mul(k as i64) as u64))
    } else {
        a.get(k).copied()
    }
}

/// How a lane of a repeated instruction differs from the recorded one
/// ([`Warp::lane_mismatch`]).
pub(crate) enum Mismatch {
    Addr { now: u64, then: u64 },
    Operands,
}

/// Lanes of `mask` below lane `l`.
#[inline]
pub(crate) fn rank(mask: u32, l: usize) -> usize {
    (mask & ((1u32 << l) - 1)).count_ones() as usize
}

impl Warp {
    /// A spin loop with per-lane exit, recorded as a spin region: `head` runs on the
    /// lanes still spinning and returns the exit condition over its value instructions
    /// (its `LDG`s and value-returning `ATOMG`s, on sync words, in order); the lanes
    /// whose condition holds run `tail` (narrowed to them) and leave; while a lane
    /// remains, the warp lets the others run and goes round again. `label` says what
    /// leaving means (`lock acquired`), for the watchdog's report; `backoff` is
    /// `(base, max)` core cycles the timing model waits between iterations
    /// (`min(base * 2^i, max)`; `(0, 0)` none). No `NANOSLEEP` is recorded: the back-off
    /// is the region's. See the module docs for what is recorded and checked.
    #[track_caller]
    pub fn spin(
        &mut self,
        label: &'static str,
        backoff: (u32, u32),
        mut head: impl FnMut(&mut Warp) -> Exit,
        mut tail: impl FnMut(&mut Warp),
    ) {
        let loc = Location::caller();
        if self.spin.mode != SpinMode::Off {
            fail("spin regions do not nest (a spin inside another's head or tail)".into());
        }
        check_backoff(backoff);
        let saved = self.mask;
        let entry = self.active();
        if entry == 0 || self.exited == self.valid {
            return;
        }
        let mut spinning = entry;
        let mut first: Option<Exit> = None;
        let mut tail_recorded = false;
        loop {
            let (exit, exiting) = self.region_head(loc, spinning, first.as_ref(), &mut head);
            if first.is_none() {
                self.register_spin(loc, RegionKind::Spin, &exit, backoff, label);
                // The exit test, once, under the lanes spinning at entry.
                self.emit_test(loc, entry, &exit, false);
                first = Some(exit);
            }
            // The tail, on the lanes that leave.
            if exiting != 0 {
                self.mask = exiting;
                self.spin.pos = 0;
                if tail_recorded {
                    self.spin.mode = SpinMode::TailMerge;
                } else {
                    self.spin.mode = SpinMode::Tail;
                    self.spin.tail = (0, 0);
                }
                tail(self);
                if tail_recorded && self.spin.pos != self.spin.tail.1 {
                    fail(format!(
                        "a spin region's tail ran {} instructions, the first time {}: the tail must run the same instructions every time",
                        self.spin.pos, self.spin.tail.1
                    ));
                }
                tail_recorded = true;
                self.spin.mode = SpinMode::Off;
            }
            spinning &= !exiting & !self.exited;
            if spinning == 0 {
                break;
            }
            self.mask = spinning;
            self.spin_yield();
        }
        // The back-edge, once, under the lanes spinning at entry.
        self.spin.mode = SpinMode::Off;
        self.mask = entry;
        self.emit(loc, 1, "BRA", None, &[], None, &[]);
        self.mask = saved;
    }

    /// One iteration's head of a region on the lanes `spinning`: runs `head` (recorded
    /// the first time, `first` is `None`; checked against the first iteration's after),
    /// then one `ISETP` per exit term; returns the exit condition and the lanes of
    /// `spinning` for which it holds.
    pub(crate) fn region_head(
        &mut self,
        loc: &'static Location<'static>,
        spinning: u32,
        first: Option<&Exit>,
        head: &mut dyn FnMut(&mut Warp) -> Exit,
    ) -> (Exit, u32) {
        // The head.
        self.mask = spinning;
        let check = first.is_some();
        self.spin.mode = if check {
            SpinMode::HeadCheck
        } else {
            SpinMode::Head
        };
        self.spin.spinning = spinning;
        self.spin.n_values = 0;
        self.spin.stashed = false;
        self.spin.pos = 0;
        if !check {
            self.spin.head = (0, 0);
        }
        let exit = head(self);
        if let Some(m) = exit.bad {
            fail(m.into());
        }
        if exit.n == 0 {
            fail("a spin region's exit condition needs a term".into());
        }
        for t in exit.terms() {
            if t.value >= self.spin.n_values.min(MAX_EXIT_TERMS) {
                fail(format!(
                    "an exit term reads value {} of a spin head with {} value instruction(s) (the first {MAX_EXIT_TERMS} can be read)",
                    t.value, self.spin.n_values
                ));
            }
            let read = self.spin.value_masks[t.value];
            if t.lane < OWN_LANE && read >> t.lane & 1 == 0 {
                fail(format!(
                    "an exit term reads lane {}'s value {}, but that lane does not read it in the region's head (lanes {read:#x})",
                    t.lane, t.value
                ));
            }
            if t.lane >= OWN_LANE && read != spinning {
                fail(format!(
                    "an exit term reads each lane's own value {}, read on lanes {read:#x} in the head, not on every lane in the region ({spinning:#x}): a value read by fewer lanes (a leader's) is compared with Exit::when_lane",
                    t.value
                ));
            }
        }
        // One ISETP per term, part of the head.
        self.mask = spinning;
        for (k, t) in exit.terms().iter().enumerate() {
            let src = self.spin.value_regs[t.value];
            let op = match t.cmp {
                SyncCmp::Eq => "ISETP.EQ.U32.AND",
                SyncCmp::Ne => "ISETP.NE.U32.AND",
                SyncCmp::Lt => "ISETP.LT.U32.AND",
                SyncCmp::Le => "ISETP.LE.U32.AND",
                SyncCmp::Gt => "ISETP.GT.U32.AND",
                SyncCmp::Ge => "ISETP.GE.U32.AND",
            };
            self.emit(loc, 2 + k as u8, op, None, &[src, t.reg], None, &[]);
        }
        match first {
            None => {
                if self.spin.head.1 == 0 {
                    fail("a spin region's head must record at least one instruction".into());
                }
            }
            Some(f) => {
                if self.spin.pos != self.spin.head.1 {
                    fail(format!(
                        "iteration of a spin head ran {} instructions, the first ran {}: a spin head must run the same instructions every iteration",
                        self.spin.pos, self.spin.head.1
                    ));
                }
                let same_terms = f.n == exit.n
                    && f.all == exit.all
                    && f.terms()
                        .iter()
                        .zip(exit.terms())
                        .all(|(a, b)| a.value == b.value && a.cmp == b.cmp && a.lane == b.lane);
                if !same_terms {
                    fail("a spin region's exit terms changed between iterations".into());
                }
                for (a, b) in f.terms().iter().zip(exit.terms()) {
                    let mut m = spinning;
                    while m != 0 {
                        let l = m.trailing_zeros() as usize;
                        m &= m - 1;
                        if a.consts[l] != b.consts[l] {
                            fail(format!(
                                "lane {l}'s exit constant changed from {} to {} between iterations of a spin region (the test records the first iteration's)",
                                a.consts[l], b.consts[l]
                            ));
                        }
                    }
                }
            }
        }
        self.spin.mode = SpinMode::Off;
        // Which lanes leave, on the values the head read.
        let mut exiting = 0u32;
        let mut m = spinning;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            let mut holds = exit.terms().iter().map(|t| {
                t.cmp
                    .holds(self.spin.values[t.value][t.source(l)], t.consts[l])
            });
            let yes = if exit.all {
                holds.all(|h| h)
            } else {
                holds.any(|h| h)
            };
            if yes {
                exiting |= 1 << l;
            }
        }
        (exit, exiting)
    }

    /// The exit test `BRA`, under `entry`: per active lane in lane order the terms'
    /// constants, then (`template`) the lane's template value.
    pub(crate) fn emit_test(
        &mut self,
        loc: &'static Location<'static>,
        entry: u32,
        exit: &Exit,
        template: bool,
    ) {
        let mut ops = [0u64; WARP * (MAX_EXIT_TERMS + 1)];
        let mut k = 0;
        let mut m = entry;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            for t in exit.terms() {
                ops[k] = u64::from(t.consts[l]);
                k += 1;
            }
            if template {
                ops[k] = u64::from(self.spin.template[l]);
                k += 1;
            }
        }
        self.mask = entry;
        self.emit(loc, 0, "BRA", None, &[], None, &ops[..k]);
    }

    /// Registers this call site's region in the kernel's tables (once per call site; the
    /// same site must give the same region every time).
    pub(crate) fn register_spin(
        &mut self,
        loc: &'static Location<'static>,
        kind: RegionKind,
        exit: &Exit,
        backoff: (u32, u32),
        label: &'static str,
    ) {
        self.ensure_room();
        let head_first = self.spin.head.0;
        let start_pc = match self.rec.insts.get((head_first, head_first + 1)) {
            Some([i]) => i.pc,
            _ => fail("a spin head's first instruction is not in the record".into()),
        };
        let inline = self.events.is_none();
        let (rebased, n_rebased) = if kind == RegionKind::Spin {
            ([(0, 0); MAX_REBASED], 0)
        } else {
            (self.spin.rebased, self.spin.n_rebased)
        };
        let st = self.state();
        let test_pc = st.kernel.pc(loc, 0);
        let end_pc = st.kernel.pc(loc, 1);
        let mut terms = [(0usize, SyncCmp::Eq, OWN_LANE); MAX_EXIT_TERMS];
        for (d, t) in terms.iter_mut().zip(exit.terms()) {
            *d = (t.value, t.cmp, t.lane);
        }
        let site = SpinSite {
            kind,
            start_pc,
            test_pc,
            end_pc,
            terms,
            n_terms: exit.n,
            all: exit.all,
            backoff,
            label,
            rebased,
            n_rebased,
        };
        if let Err(m) = st.kernel.register_spin(site, inline) {
            fail(m);
        }
    }

    /// Called by [`Warp::emit`] in a spin region for an instruction recorded at index
    /// `idx` of the record (head or tail of the first time).
    pub(crate) fn spin_recorded(&mut self, idx: u32, mask: u32, opcode: &str, reg: u16) {
        let part = match self.spin.mode {
            SpinMode::Head => &mut self.spin.head,
            SpinMode::Tail => &mut self.spin.tail,
            _ => return,
        };
        if part.1 == 0 {
            part.0 = idx;
        } else if part.0 + part.1 != idx {
            // Instructions are pushed one at a time into chunks they fill: indices are
            // consecutive.
            fail("a spin region's instructions are not consecutive in the record".into());
        }
        part.1 += 1;
        if self.spin.mode == SpinMode::Head && is_value_inst(opcode) {
            // A value read by fewer lanes than the region's (a leader's) is checked by the
            // terms that read it (`region_head`).
            self.capture_value(opcode, reg, mask);
        }
    }

    fn capture_value(&mut self, opcode: &str, reg: u16, mask: u32) {
        if !self.spin.stashed {
            fail(format!(
                "{opcode} in a spin head: the recorder has no value for it"
            ));
        }
        self.spin.stashed = false;
        let n = self.spin.n_values;
        if n < MAX_EXIT_TERMS {
            self.spin.values[n] = self.spin.stash;
            self.spin.value_regs[n] = reg;
            self.spin.value_masks[n] = mask;
        }
        self.spin.n_values += 1;
    }

    /// The next recorded instruction of the head or tail being checked or merged.
    fn spin_next(&mut self, part: (u32, u32), what: &str, pc: u32) -> (u32, RecInst) {
        let pos = self.spin.pos;
        if pos >= part.1 {
            fail(format!(
                "a spin region's {what} ran more instructions (pc {pc:#x}) than the first time ({}): it must run the same instructions every time",
                part.1
            ));
        }
        let idx = part.0 + pos;
        let Some(&[i]) = self.rec.insts.get((idx, idx + 1)) else {
            fail(format!("a spin region's recorded {what} is incomplete"));
        };
        if i.pc != pc {
            fail(format!(
                "a spin region's {what} ran pc {pc:#x} where the first time it ran {:#x}: it must run the same instructions every time",
                i.pc
            ));
        }
        self.spin.pos += 1;
        (idx, i)
    }

    /// The first lane of `mask` whose address (in `addrs`, lane order) or operands (`per`
    /// of them per lane, as recorded) differ from recorded instruction `i`'s, each lane's
    /// recorded address moved by `shift(lane)` bytes.
    pub(crate) fn lane_mismatch(
        &self,
        i: &RecInst,
        mask: u32,
        addrs: &[u64],
        operands: &[u64],
        shift: impl Fn(usize) -> u64,
    ) -> Option<(usize, Mismatch)> {
        let rec_ops = self.rec.operands.get(i.operands).unwrap_or(&[]);
        let n_rec = i.mask.count_ones() as usize;
        let per = rec_ops.len().checked_div(n_rec).unwrap_or(0);
        let mut m = mask;
        let mut j = 0;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            let k = rank(i.mask, l);
            if i.mem_width > 0 {
                let now = addrs.get(j).copied();
                let then = recorded_addr(self, i, k).map(|a| a.wrapping_add(shift(l)));
                if now != then {
                    let (now, then) = (now.unwrap_or(0), then.unwrap_or(0));
                    return Some((l, Mismatch::Addr { now, then }));
                }
            }
            if per > 0
                && operands.get(j * per..(j + 1) * per) != rec_ops.get(k * per..(k + 1) * per)
            {
                return Some((l, Mismatch::Operands));
            }
            j += 1;
        }
        None
    }

    /// A later iteration's head instruction: the same as the recorded one (PC, opcode,
    /// mask narrowed to the spinning lanes, addresses and operands per lane).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spin_check(
        &mut self,
        pc: u32,
        opcode: u16,
        name: &str,
        mask: u32,
        addrs: &[u64],
        operands: &[u64],
        reg: u16,
    ) {
        let (_, i) = self.spin_next(self.spin.head, "head", pc);
        if i.opcode != opcode {
            fail(format!(
                "a spin head ran {name} at pc {pc:#x} where the first iteration ran another opcode"
            ));
        }
        let want = i.mask & self.spin.spinning;
        if mask != want {
            fail(format!(
                "{name} at pc {pc:#x} of a spin head ran on lanes {mask:#x} where the recorded head's mask narrowed to the spinning lanes is {want:#x}"
            ));
        }
        match self.lane_mismatch(&i, mask, addrs, operands, |_| 0) {
            Some((l, Mismatch::Addr { now, then })) => fail(format!(
                "{name} at pc {pc:#x} of a spin head: lane {l} accessed {now:#x}, the first iteration {then:#x}; the timing model's loop template has fixed addresses"
            )),
            Some((l, Mismatch::Operands)) => fail(format!(
                "{name} at pc {pc:#x} of a spin head: lane {l}'s operands changed between iterations; the timing model replays the first's"
            )),
            None => {}
        }
        if is_value_inst(name) {
            self.capture_value(name, reg, mask);
        }
    }

    /// A tail instruction run again (by lanes that left in a later iteration): merged
    /// into the recorded one (its mask the union, each lane's addresses and operands from
    /// the iteration in which it ran).
    pub(crate) fn spin_merge(
        &mut self,
        pc: u32,
        opcode: u16,
        name: &str,
        mask: u32,
        addrs: &[u64],
        operands: &[u64],
    ) {
        let (idx, i) = self.spin_next(self.spin.tail, "tail", pc);
        if i.opcode != opcode {
            fail(format!(
                "a spin tail ran {name} at pc {pc:#x} where it first ran another opcode"
            ));
        }
        if i.mask & mask != 0 {
            fail(format!(
                "{name} at pc {pc:#x} of a spin tail: lanes {:#x} ran it twice",
                i.mask & mask
            ));
        }
        let merged = i.mask | mask;
        let rec_ops = self.rec.operands.get(i.operands).unwrap_or(&[]);
        let (n_old, n_new) = (i.mask.count_ones() as usize, mask.count_ones() as usize);
        let per = match (
            rec_ops.len().checked_div(n_old),
            operands.len().checked_div(n_new),
        ) {
            (Some(p), _) if p > 0 => p,
            (_, Some(p)) => p,
            (Some(p), None) => p,
            (None, None) => 0,
        };
        if per > 2 || rec_ops.len() != per * n_old || operands.len() != per * n_new {
            fail(format!(
                "{name} at pc {pc:#x} of a spin tail: operands per lane differ between iterations"
            ));
        }
        let mut lane_addr = [0u64; WARP];
        let mut lane_ops = [0u64; 2 * WARP];
        let (mut jo, mut jn) = (0usize, 0usize);
        for l in 0..WARP {
            if i.mask >> l & 1 == 1 {
                if i.mem_width > 0 {
                    lane_addr[l] = recorded_addr(self, &i, jo).unwrap_or(0);
                }
                lane_ops[l * per..(l + 1) * per]
                    .copy_from_slice(&rec_ops[jo * per..(jo + 1) * per]);
                jo += 1;
            } else if mask >> l & 1 == 1 {
                if i.mem_width > 0 {
                    lane_addr[l] = addrs.get(jn).copied().unwrap_or(0);
                }
                lane_ops[l * per..(l + 1) * per]
                    .copy_from_slice(&operands[jn * per..(jn + 1) * per]);
                jn += 1;
            }
        }
        let mut list = [0u64; WARP];
        let mut ops = [0u64; 2 * WARP];
        let (mut n, mut no) = (0usize, 0usize);
        for l in 0..WARP {
            if merged >> l & 1 == 1 {
                list[n] = lane_addr[l];
                n += 1;
                ops[no..no + per].copy_from_slice(&lane_ops[l * per..(l + 1) * per]);
                no += per;
            }
        }
        let mut new = i;
        new.mask = merged;
        if i.mem_width > 0 {
            match compress_addrs(merged, &list[..n]) {
                AddrRecord::Stride { base, stride } => {
                    new.strided = true;
                    new.addrs = self.rec.addrs.push_slice(&[base, stride as i64 as u64]);
                }
                _ => {
                    new.strided = false;
                    new.addrs = self.rec.addrs.push_slice(&list[..n]);
                }
            }
        }
        new.operands = self.rec.operands.push_slice(&ops[..no]);
        match self.rec.insts.get_mut((idx, idx + 1)) {
            Some([slot]) => *slot = new,
            _ => fail("a spin region's recorded tail is incomplete".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::record::{Atom, Buffer, Exit, LaunchSpec, RecordError, Recorder, SyncCmp, Warp};
    use tessera_traces::TraceFile;

    /// A test kernel: the warp, 32 sync words `ctr` and 32 data words `out`.
    type Kernel = dyn Fn(&mut Warp, Buffer<u32>, Buffer<u32>) + Sync;

    /// Records one warp of 32 lanes running `kernel` with `ctr` (32 sync words, 0) and
    /// `out` (32 data words); returns the recorder's error or the trace.
    fn record(dir: &std::path::Path, kernel: &Kernel) -> Result<TraceFile, RecordError> {
        let path = dir.join("t.tst");
        let mut rec = Recorder::create(&path, 80, "test")?;
        let ctr = rec.alloc::<u32>("ctr", 32)?;
        let out = rec.alloc::<u32>("out", 32)?;
        rec.sync_words(ctr, true)?;
        let spec = LaunchSpec::new("spin_test", [1, 1, 1], [32, 1, 1]);
        rec.launch(&spec, &|w| kernel(w, ctr, out))?;
        rec.finish()?;
        Ok(TraceFile::open(&path)?)
    }

    /// Lane `l` leaves in iteration `l / 8 + 1`; the tail recorded once has every lane,
    /// each with its own address and operand, and the head, test and back-edge the
    /// lanes spinning at entry.
    #[test]
    fn merged_tail_has_the_union_mask_and_per_lane_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let t = record(dir.path(), &|w, ctr, out| {
            let lane = w.lane_id();
            let a = w.addr(&ctr, &lane);
            let one = w.konst(1u32);
            let goal = w.shr(&lane, 3);
            let o = w.addr(&out, &lane);
            let mine = w.iadd_imm(&lane, 100);
            w.spin(
                "counted",
                (10, 80),
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    Exit::when(0, SyncCmp::Ge, &goal)
                },
                |w| {
                    w.st(&o, &lane);
                    w.atomic(Atom::Add, &o, &mine, false);
                },
            );
        })
        .unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.spin_regions.len(), 1);
        let r = &k.spin_regions[0];
        assert_eq!(
            (r.backoff_base, r.backoff_max, r.label.as_str()),
            (10, 80, "counted")
        );
        // Every lane added once per iteration it spun: lane l l/8 + 1 times.
        let sw = &t.index().sync_words[0];
        let want: Vec<u32> = (0..32).map(|l| l / 8 + 1).collect();
        assert_eq!(sw.expect, want);
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let insts = d.warp(0);
        let at = |pc: u32| insts.iter().position(|i| i.pc == pc).unwrap();
        let (start, test, end) = (at(r.start_pc), at(r.test_pc), at(r.end_pc));
        // Head: the ATOMG and one ISETP; then the test, two tail instructions, the back-edge.
        assert_eq!((test - start, end - test), (2, 3));
        for i in [start, start + 1, test, end] {
            assert_eq!(insts[i].mask, u32::MAX);
        }
        // The test's operands: each lane's goal.
        let goals: Vec<u64> = (0..32).map(|l| l / 8).collect();
        assert_eq!(
            d.operands_of(d.warps[0].insts.start + test, 1),
            Some(&goals[..])
        );
        let st = &insts[test + 1];
        assert_eq!(st.mask, u32::MAX);
        let addrs: Vec<(u32, u64)> = d.lane_addrs(st).collect();
        let want: Vec<(u32, u64)> = (0..32)
            .map(|l| (l, 0x7f00_0000_0200 + 4 * l as u64))
            .collect();
        assert_eq!(addrs, want);
        let red = test + 2;
        assert_eq!(insts[red].mask, u32::MAX);
        let ops: Vec<u64> = (100..132).collect();
        assert_eq!(
            d.operands_of(d.warps[0].insts.start + red, 1),
            Some(&ops[..])
        );
        tessera_traces::verify(&t).unwrap();
    }

    /// An inline launch (no blocking) records regions that let every lane through at
    /// once, as many as it has call sites (here unrolled copies of one).
    #[test]
    fn inline_launches_record_regions_that_never_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let ctr = rec.alloc::<u32>("ctr", 1).unwrap();
        rec.sync_words(ctr, true).unwrap();
        let mut spec = LaunchSpec::new("inline", [2, 1, 1], [64, 1, 1]);
        spec.blocking = false;
        rec.launch(&spec, &|w| {
            let zero = w.konst(0u32);
            let a = w.addr(&ctr, &zero);
            for j in 0..6u8 {
                w.unrolled(j, |w| {
                    w.spin(
                        "free",
                        (0, 0),
                        |w| {
                            w.ld_strong(&a);
                            Exit::when_imm(0, SyncCmp::Eq, 0)
                        },
                        |_| {},
                    )
                });
            }
        })
        .unwrap();
        rec.finish().unwrap();
        let t = TraceFile::open(&path).unwrap();
        assert_eq!(t.kernels()[0].spin_regions.len(), 6);
    }

    fn err(kernel: &Kernel) -> String {
        let dir = tempfile::tempdir().unwrap();
        match record(dir.path(), kernel) {
            Err(e @ RecordError::Kernel { .. }) => e.to_string(),
            Err(e) => panic!("not a kernel error: {e}"),
            Ok(_) => panic!("recorded"),
        }
    }

    #[test]
    fn a_head_reading_plain_data_is_an_error() {
        let m = err(&|w, _ctr, out| {
            let lane = w.lane_id();
            let o = w.addr(&out, &lane);
            w.spin(
                "x",
                (0, 0),
                |w| {
                    w.ld::<u32>(&o);
                    Exit::when_imm(0, SyncCmp::Eq, 0)
                },
                |_| {},
            );
        });
        assert!(
            m.contains("spin_test")
                && m.contains("not a declared sync word")
                && m.contains("(out)"),
            "{m}"
        );
    }

    #[test]
    fn a_plain_store_to_a_sync_word_is_an_error() {
        let m = err(&|w, ctr, _out| {
            let lane = w.lane_id();
            w.store(&ctr, &lane, &lane);
        });
        assert!(m.contains("plain store") && m.contains("st_strong"), "{m}");
    }

    #[test]
    fn a_head_whose_addresses_move_is_an_error() {
        let m = err(&|w, ctr, _out| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let a = w.addr(&ctr, &zero);
            let mut i = 0u32;
            w.spin(
                "x",
                (0, 0),
                |w| {
                    // Each iteration polls the next word.
                    let k = w.konst(i);
                    i += 1;
                    let b = w.addr(&ctr, &k);
                    w.atomic(Atom::Add, &a, &one, true);
                    w.ld_strong(&b);
                    Exit::when_imm(0, SyncCmp::Ge, 3)
                },
                |_| {},
            );
        });
        assert!(m.contains("fixed addresses"), "{m}");
    }

    #[test]
    fn exit_terms_need_their_values() {
        let m = err(&|w, ctr, _out| {
            let zero = w.konst(0u32);
            let a = w.addr(&ctr, &zero);
            w.spin(
                "x",
                (0, 0),
                |w| {
                    w.ld_strong(&a);
                    Exit::when_imm(0, SyncCmp::Eq, 0).and_imm(1, SyncCmp::Eq, 0)
                },
                |_| {},
            );
        });
        assert!(m.contains("reads value 1"), "{m}");
        let m = err(&|w, ctr, _out| {
            let zero = w.konst(0u32);
            let a = w.addr(&ctr, &zero);
            w.spin(
                "x",
                (0, 0),
                |w| {
                    w.ld_strong(&a);
                    Exit::when_imm(0, SyncCmp::Eq, 0)
                        .and_imm(0, SyncCmp::Eq, 0)
                        .or_imm(0, SyncCmp::Eq, 1)
                },
                |_| {},
            );
        });
        assert!(m.contains("not both"), "{m}");
    }

    #[test]
    fn changing_exit_constants_are_an_error() {
        let m = err(&|w, ctr, _out| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let a = w.addr(&ctr, &zero);
            let mut i = 3u32;
            w.spin(
                "x",
                (0, 0),
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    i += 1;
                    Exit::when_imm(0, SyncCmp::Ge, i)
                },
                |_| {},
            );
        });
        assert!(m.contains("exit constant changed"), "{m}");
    }
}
