//! The mutable state of one SM's issue stage ([`Sm`]), steppable cycle by cycle inside a
//! GPU-wide event loop, and the batch driver [`run_cta_batch_with`] built on it.

use super::icache::Icache;
use super::spec::SmSpec;
use super::stats::{BarrierEvent, IssueEvent, SmStats};
use crate::config::SchedulerPolicy;
use std::sync::Arc;
use tessera_traces::{
    CtaStream, DecodedCta, KernelMeta, LaneAddrSource, OpClass, SlotInfo, WarpCursor, WarpInst,
};

/// How [`run_cta_batch_with`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmOptions {
    /// Step one cycle at a time even when no warp can issue (the reference the idle-skipping
    /// default must equal; slower, for tests).
    pub tick_every_cycle: bool,
    /// Fill [`SmStats::barrier_log`] and [`SmStats::issue_log`].
    pub record_log: bool,
}

/// Why a batch could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SmError {
    /// More warps than the SM has warp slots.
    #[error("the CTAs given have {warps} warps but the SM has {slots} warp slots")]
    TooManyWarps { warps: u64, slots: u32 },
    /// An instruction names a static slot the kernel does not have.
    #[error(
        "CTA {cta}: instruction slot {slot} is not in the kernel's static table ({n} entries)"
    )]
    BadSlot { cta: u32, slot: u32, n: usize },
    /// No warp can ever issue again but some have not finished (every live warp waits at a
    /// barrier that cannot complete).
    #[error("deadlock at cycle {cycle}: {detail}")]
    Deadlock { cycle: u64, detail: String },
    /// [`Sm::set_kernel`] or [`Sm::skip_to`] while CTAs are resident.
    #[error("the SM still has {resident} resident CTA(s)")]
    Busy { resident: usize },
    /// [`Sm::add_cta`] before any [`Sm::set_kernel`].
    #[error("no kernel set on the SM")]
    NoKernel,
    /// A CTA given to the batch driver does not encode (its instructions disagree with the
    /// kernel's static table).
    #[error("CTA {cta}: {detail}")]
    Trace { cta: u32, detail: &'static str },
}

/// What a [`MemPort`] says about a memory instruction it accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemIssue {
    /// Its destination registers are written from this cycle on (at least `cycle + 1`;
    /// an earlier one is taken as `cycle + 1`).
    Done(u64),
    /// The result comes later, through [`Sm::mem_reply`] with the instruction's token.
    Pending,
}

/// The SM's name for one in-flight memory instruction: an index into its table of
/// instructions waiting for a [`Sm::mem_reply`], reused after the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemToken(pub u32);

/// Where memory-class instructions go.
pub trait MemPort {
    /// Memory instruction `inst` issues at core cycle `cycle` (`addrs` holds the lane
    /// addresses its [`tessera_traces::Addrs::List`] indexes): either the cycle
    /// from which its destination registers are written is known now
    /// ([`MemIssue::Done`]), or it comes later through [`Sm::mem_reply`]`(token, ..)`
    /// ([`MemIssue::Pending`]). `placeholder_latency` is the class's latency of
    /// [`SmSpec`] (used by the batch driver, which has no memory system).
    fn access(
        &mut self,
        cycle: u64,
        addrs: LaneAddrSource<'_>,
        inst: &WarpInst,
        token: MemToken,
        placeholder_latency: u32,
    ) -> MemIssue;
}

/// The placeholder memory of the batch driver: every memory instruction takes its class's
/// latency from [`SmSpec`] (not a model).
pub struct PlaceholderMem;

impl MemPort for PlaceholderMem {
    fn access(
        &mut self,
        cycle: u64,
        _: LaneAddrSource<'_>,
        _: &WarpInst,
        _: MemToken,
        latency: u32,
    ) -> MemIssue {
        MemIssue::Done(cycle + latency as u64)
    }
}

/// A register whose write is a pending memory reply: not ready at any cycle.
const NEVER: u64 = u64::MAX;

/// Whether a result of `class` is a long-latency one for `two_level` (GPGPU-Sim's
/// `longopregs`: results of global, local, constant and texture memory; shared memory's
/// are short).
fn is_long(class: OpClass) -> bool {
    class.is_memory()
        && !matches!(
            class,
            OpClass::LoadShared | OpClass::StoreShared | OpClass::AtomicShared
        )
}

/// Per static instruction: the registers its issue waits on (sources and destinations,
/// RZ excluded, deduplicated), the registers it reads (RZ excluded, deduplicated, in
/// register order: the order of its operand reads) and the registers it writes.
struct SlotRegs {
    wait: Box<[u16]>,
    srcs: Box<[u16]>,
    dsts: Box<[u16]>,
}

/// What the issue stage needs of one kernel, prepared once per kernel and shared by its
/// SMs.
pub struct KernelPrep {
    slots: Vec<SlotRegs>,
    /// One past the highest register any instruction names: the scoreboard's size per
    /// warp (so a warp's reset and its cache footprint follow the kernel, not R0..R255).
    regs: usize,
    /// Address of the kernel's code for the I-cache: a hash of its name in the high
    /// half (PCs are offsets in the kernel's code), so that every launch of one kernel
    /// shares lines and different kernels do not.
    code_base: u64,
}

impl KernelPrep {
    pub fn new(kernel: &KernelMeta) -> KernelPrep {
        let slots: Vec<SlotRegs> = kernel
            .statics
            .iter()
            .map(|st| {
                let op = &kernel.opcodes[st.opcode as usize];
                let dsts: Vec<u16> = st.dst_regs(op).collect();
                let mut wait: Vec<u16> = st.src_regs().chain(dsts.iter().copied()).collect();
                wait.sort_unstable();
                wait.dedup();
                let mut srcs: Vec<u16> = st.src_regs().collect();
                srcs.sort_unstable();
                srcs.dedup();
                SlotRegs {
                    wait: wait.into(),
                    srcs: srcs.into(),
                    dsts: dsts.into(),
                }
            })
            .collect();
        let regs = slots
            .iter()
            .flat_map(|s| s.wait.iter())
            .map(|&r| r as usize + 1)
            .max()
            .unwrap_or(0)
            .max(1);
        // FNV-1a: stable across runs and platforms, unlike the std hasher.
        let hash = kernel.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        });
        KernelPrep {
            slots,
            regs,
            code_base: (hash & 0xffff_ffff) << 32,
        }
    }
}

/// One warp's state (plain data; its scoreboard lives in `Sm::reg_ready`).
#[derive(Clone)]
struct WarpState {
    /// Index of its CTA in `Sm::ctas`.
    cta: u32,
    sched: u32,
    /// Its index in its scheduler's `entries`.
    pos: u32,
    /// Its instruction count, and the index of its next instruction (the one at its
    /// cursor, `Sm::cursors`).
    end: usize,
    next: usize,
    done: bool,
    at_barrier: bool,
    /// First cycle it may issue after a barrier release.
    release_at: u64,
    /// Cache of the next instruction: the latest `reg_ready` of the registers it waits
    /// on ([`NEVER`] while one waits for a memory reply), and its class (valid while not
    /// done; refreshed whenever `next` moves or a reply arrives, the only times either
    /// can change, since only the warp's own issues write its registers).
    reg_at: u64,
    class: OpClass,
    /// Like `reg_at`, over the registers whose pending write is long-latency
    /// ([`is_long`]) only: the cycle until which `two_level` counts the warp as waiting
    /// on memory (0 under the other policies, which do not read it).
    long_at: u64,
    /// Cycle from which its next instruction is fetched (0 without the I-cache).
    fetch_at: u64,
    /// Index in the I-cache of the line of its last fetch (a hint: see `Icache::fetch`).
    line_hint: u32,
    /// Its memory instructions whose result is still to come (a reply), and the latest
    /// cycle at which one of its memory instructions' results is written: a memory fence
    /// (`OpClass::Fence`, `MEMBAR`) waits for both (GPGPU-Sim: a warp at a `membar` waits
    /// until its outstanding memory requests are done).
    mem_pending: u32,
    mem_done_at: u64,
}

impl Default for WarpState {
    fn default() -> Self {
        WarpState {
            cta: 0,
            sched: 0,
            pos: 0,
            end: 0,
            next: 0,
            done: true,
            at_barrier: false,
            release_at: 0,
            reg_at: 0,
            class: OpClass::Nop,
            long_at: 0,
            fetch_at: 0,
            line_hint: 0,
            mem_pending: 0,
            mem_done_at: 0,
        }
    }
}

impl WarpState {
    /// The cycle it leaves the barrier phase of a stall (`NEVER` when finished or at an
    /// incomplete barrier).
    #[inline]
    fn e1(&self) -> u64 {
        if self.done || self.at_barrier {
            NEVER
        } else {
            self.release_at
        }
    }

    /// The cycle from which only its unit can hold it (barrier released, registers
    /// written); `NEVER` as [`WarpState::e1`] or while a register awaits a reply.
    #[inline]
    fn e2(&self) -> u64 {
        if self.done || self.at_barrier {
            NEVER
        } else {
            self.release_at.max(self.reg_at).max(self.fetch_at)
        }
    }

    /// The first cycle from which `two_level` may hold it in the active pool: not
    /// finished, not at a barrier, not waiting on a long-latency result (`NEVER` when
    /// that takes a barrier release or a reply).
    #[inline]
    fn unblock(&self) -> u64 {
        if self.done || self.at_barrier {
            NEVER
        } else {
            self.release_at.max(self.long_at)
        }
    }
}

/// A scheduler's copy of what its policy and stall accounting read of one warp, kept in
/// a dense array in age order so that its scans touch nothing else.
#[derive(Clone, Copy)]
struct Entry {
    /// Dispatch order on this SM (oldest first, for GTO and the LRR rotation).
    age: u64,
    /// [`WarpState::e1`] and [`WarpState::e2`].
    e1: u64,
    e2: u64,
    /// [`WarpState::unblock`].
    unblock: u64,
    /// Warp slot.
    slot: u32,
    /// Class of its next instruction (meaningful while `e2 != NEVER`).
    class: OpClass,
    /// In the active pool (`two_level`; always true otherwise).
    active: bool,
}

/// One sub-core scheduler's state, with caches of its warps' times that are exact at
/// every public call: a change that can only make a warp's times earlier (a barrier
/// release, a memory reply, a new warp) lowers them; one that can make them later (an
/// issue, which also moves a unit's free time) rescans the scheduler's warps.
///
/// "Exact" for `min_e2` and `issue_at` means exact once clamped to the SM's current
/// cycle (`Sm::now`), which is how every reader uses them (stall intervals start at it,
/// the next event is at least it, a warp may issue at it): after an issue, a time of
/// the issuing warp by the next cycle may stand for the minimum without a rescan, so
/// either may be later than the true minimum, but then both are at most the current
/// cycle. Each is still attained by the warp its `arg_` names.
struct SchedState {
    /// Its resident warps, oldest first.
    entries: Vec<Entry>,
    /// Age of the last warp it issued, its position in `entries` (`None` once it has
    /// left), and where `lrr`'s round robin starts: one past it (the number of entries
    /// no younger than it, 0 before any issue). Set on issue; a completion, which moves
    /// the entries, recomputes the positions from the age.
    last: Option<u64>,
    last_at: Option<u32>,
    rr_start: u32,
    /// Cycle from which each class's unit accepts a new instruction.
    unit_free: [u64; OpClass::COUNT],
    /// Unfinished warps.
    unfinished: u32,
    /// Earliest cycle one of its (active) warps may issue ([`NEVER`]: none without a
    /// reply or a barrier release).
    issue_at: u64,
    /// The earlier of `issue_at` and, under `two_level`, the first cycle at which the
    /// pool update would change the pools: when the scheduler must be stepped.
    next_issue: u64,
    /// Minimum of [`WarpState::e1`] over its warps, and of [`WarpState::e2`] over its
    /// (active) warps.
    min_e1: u64,
    min_e2: u64,
    /// Positions in `entries` of warps attaining `min_e1`, `min_e2` and `issue_at`
    /// (meaningless while the minimum is [`NEVER`]): while such a warp is not the one that
    /// issued, an issue that only made times later leaves the minimum where it was, so
    /// it needs no rescan.
    arg_e1: u32,
    arg_e2: u32,
    arg_issue: u32,
    /// Bit `i` set when `entries[i].e2 != NEVER` (the first 64 entries; with more, the
    /// scans below read every entry): only those warps can give `min_e2` or `issue_at`.
    live: u64,
    /// `two_level` only (the rule is in the module documentation of `sm`): the active
    /// pool's capacity (0 for the other
    /// policies), its warp slots in priority order, the pending pool's in FIFO order,
    /// and the last cycle whose pool update ran.
    cap: usize,
    active: Vec<u32>,
    waiting: Vec<u32>,
    pool_at: u64,
    /// `two_level`: when the next pool update would change the pools ([`NEVER`]: none).
    due: u64,
    /// Operand collection (empty when not modelled): the first cycle each of its
    /// register banks can serve a read, and each of its collector units is free; the
    /// earliest of the latter (0 with unlimited collectors).
    banks: Vec<u64>,
    colls: Vec<u64>,
    coll_at: u64,
}

impl SchedState {
    fn new(cap: usize, banks: usize, colls: usize) -> Self {
        SchedState {
            entries: Vec::new(),
            last: None,
            last_at: None,
            rr_start: 0,
            unit_free: [0; OpClass::COUNT],
            unfinished: 0,
            issue_at: NEVER,
            next_issue: NEVER,
            min_e1: NEVER,
            min_e2: NEVER,
            arg_e1: 0,
            arg_e2: 0,
            arg_issue: 0,
            live: 0,
            cap,
            active: Vec::new(),
            waiting: Vec::new(),
            pool_at: 0,
            due: NEVER,
            banks: vec![0; banks],
            colls: vec![0; colls],
            coll_at: 0,
        }
    }

    /// `next_issue` from its parts: an issue needs a warp and a free collector.
    #[inline]
    fn settle(&mut self) {
        self.next_issue = self.issue_at.max(self.coll_at).min(self.due);
    }

    /// The first cycle warp `e` of this scheduler may issue ([`NEVER`]: not without a
    /// barrier release or a reply, or finished).
    #[inline]
    fn earliest(&self, e: &Entry) -> u64 {
        // `NEVER` is the largest time: it stays `NEVER`.
        e.e2.max(self.unit_free[e.class as usize])
    }

    /// Copies warp `ws`'s times into its entry and folds them into the caches (exact
    /// when they only got earlier, except that under `two_level` an earlier time can
    /// also cancel a pending demotion: there a [`SchedState::rescan`] must follow, as
    /// after any change that can make a time later).
    #[inline(always)]
    fn lower(&mut self, ws: &WarpState) {
        let e = Entry {
            e1: ws.e1(),
            e2: ws.e2(),
            unblock: ws.unblock(),
            class: ws.class,
            ..self.entries[ws.pos as usize]
        };
        let pos = ws.pos;
        self.entries[pos as usize] = e;
        self.set_live(pos, e.e2);
        if e.e1 < self.min_e1 {
            self.min_e1 = e.e1;
            self.arg_e1 = pos;
        }
        if e.active {
            if e.e2 < self.min_e2 {
                self.min_e2 = e.e2;
                self.arg_e2 = pos;
            }
            let at = self.earliest(&e);
            if at < self.issue_at {
                self.issue_at = at;
                self.arg_issue = pos;
            }
        } else if self.active.len() < self.cap {
            // A pending warp fills a free slot from the cycle it unblocks.
            self.due = self.due.min(e.unblock);
        }
        self.settle();
    }

    /// Recomputes the caches from the entries.
    fn rescan(&mut self) {
        let (mut e1, mut e2, mut next, mut promote) = (NEVER, NEVER, NEVER, NEVER);
        let (mut a1, mut a2, mut an) = (0, 0, 0);
        let mut due = NEVER;
        let mut live = 0u64;
        if self.cap == 0 {
            // Every warp is active.
            for (i, e) in self.entries.iter().enumerate() {
                let i = i as u32;
                if e.e1 < e1 {
                    (e1, a1) = (e.e1, i);
                }
                if e.e2 < e2 {
                    (e2, a2) = (e.e2, i);
                }
                let at = self.earliest(e);
                if at < next {
                    (next, an) = (at, i);
                }
                if i < 64 && e.e2 != NEVER {
                    live |= 1 << i;
                }
            }
        } else {
            // Under two_level, an active warp blocked at the cycle after the last update is
            // demoted then (it can only have become blocked by issuing in that update's
            // cycle).
            let check = self.pool_at + 1;
            for (i, e) in self.entries.iter().enumerate() {
                let i = i as u32;
                if e.e1 < e1 {
                    (e1, a1) = (e.e1, i);
                }
                if i < 64 && e.e2 != NEVER {
                    live |= 1 << i;
                }
                if e.active {
                    if e.e2 < e2 {
                        (e2, a2) = (e.e2, i);
                    }
                    let at = self.earliest(e);
                    if at < next {
                        (next, an) = (at, i);
                    }
                    if e.unblock > check {
                        due = check;
                    }
                } else {
                    promote = promote.min(e.unblock);
                }
            }
            if self.active.len() < self.cap {
                due = due.min(promote);
            }
        }
        self.min_e1 = e1;
        self.min_e2 = e2;
        self.issue_at = next;
        (self.arg_e1, self.arg_e2, self.arg_issue) = (a1, a2, an);
        self.live = live;
        self.due = due;
        self.settle();
    }

    /// Records whether the entry at `pos` has `e2 != NEVER` in `live`.
    #[inline]
    fn set_live(&mut self, pos: u32, e2: u64) {
        if pos < 64 {
            let bit = 1u64 << pos;
            if e2 == NEVER {
                self.live &= !bit;
            } else {
                self.live |= bit;
            }
        }
    }

    /// Recomputes `min_e1` (every warp active: not `two_level`).
    #[inline(never)]
    fn rescan_e1(&mut self) {
        let (mut e1, mut a1) = (NEVER, 0);
        for (i, e) in self.entries.iter().enumerate() {
            if e.e1 < e1 {
                (e1, a1) = (e.e1, i as u32);
            }
        }
        (self.min_e1, self.arg_e1) = (e1, a1);
    }

    /// Recomputes `min_e2` and `issue_at` (every warp active: not `two_level`) from the
    /// warps in `live`. Out of line: [`SchedState::after_issue`], which calls it about
    /// every other issue, stays small enough to inline.
    #[inline(never)]
    fn rescan_e2(&mut self) {
        let (mut e2, mut next, mut a2, mut an) = (NEVER, NEVER, 0, 0);
        if self.entries.len() > 64 {
            for (i, e) in self.entries.iter().enumerate() {
                if e.e2 < e2 {
                    (e2, a2) = (e.e2, i as u32);
                }
                let at = self.earliest(e);
                if at < next {
                    (next, an) = (at, i as u32);
                }
            }
        } else {
            let mut m = self.live;
            while m != 0 {
                let i = m.trailing_zeros();
                m &= m - 1;
                let e = &self.entries[i as usize];
                if e.e2 < e2 {
                    (e2, a2) = (e.e2, i);
                }
                let at = self.earliest(e);
                if at < next {
                    (next, an) = (at, i);
                }
            }
        }
        (self.min_e2, self.arg_e2) = (e2, a2);
        (self.issue_at, self.arg_issue) = (next, an);
    }

    /// After warp `ws` (at position `p`) issued, which can make its own times later or
    /// earlier and the times of the warps whose next instruction has its unit's class
    /// later: copies its times into its entry and updates the caches, without a rescan
    /// while the warps attaining the minima are untouched. Not for `two_level` (its pool
    /// update rescans).
    #[inline(always)]
    fn after_issue(&mut self, ws: &WarpState, now: u64) {
        debug_assert_eq!(self.cap, 0);
        let p = ws.pos;
        let e = Entry {
            e1: ws.e1(),
            e2: ws.e2(),
            unblock: ws.unblock(),
            class: ws.class,
            ..self.entries[p as usize]
        };
        self.entries[p as usize] = e;
        self.set_live(p, e.e2);
        // `min_e1`: only this warp's time moved (later: it finished or waits at a barrier,
        // rare).
        if e.e1 <= self.min_e1 {
            (self.min_e1, self.arg_e1) = (e.e1, p);
        } else if self.arg_e1 == p {
            self.rescan_e1();
        }
        // `min_e2` as `min_e1`; `issue_at`: also the warps of the issued class may have got
        // later (its unit's free time moved), so the minimum stands while its warp still
        // attains it.
        // Where a minimum's warp no longer attains it, a time of this warp by the next
        // cycle still does without a rescan: at most that cycle, where readers clamp
        // (see `SchedState`).
        let bound = now + 1;
        let mut exact = true;
        if e.e2 <= self.min_e2 || (self.arg_e2 == p && e.e2 <= bound) {
            (self.min_e2, self.arg_e2) = (e.e2, p);
        } else if self.arg_e2 == p {
            exact = false;
        }
        let at = self.earliest(&e);
        if at <= self.issue_at {
            (self.issue_at, self.arg_issue) = (at, p);
        } else if self.arg_issue == p
            || self.earliest(&self.entries[self.arg_issue as usize]) != self.issue_at
        {
            if at <= bound {
                (self.issue_at, self.arg_issue) = (at, p);
            } else {
                exact = false;
            }
        }
        if !exact {
            self.rescan_e2();
        }
        self.settle();
    }

    /// After warp `ws` issued: [`SchedState::after_issue`], or under `two_level` a copy
    /// of its times (they may have got later: the caller rescans).
    #[inline(always)]
    fn settle_issue(&mut self, ws: &WarpState, now: u64) {
        if self.cap == 0 {
            self.after_issue(ws, now);
        } else {
            self.lower(ws);
        }
    }

    /// Reads the source operands `srcs` (in register order) of an instruction issued at
    /// `c`, whose banks are shifted by `shift` (the warp slot with
    /// `core.reg_bank_use_warp_id`), and takes a collector unit until they are read;
    /// returns the delay bank conflicts add to its result (0 without operand
    /// collection).
    ///
    /// The reads are requested from `c + 1` in register order; each takes the first cycle
    /// from then at which its bank is free and holds the bank that cycle (one read per
    /// bank per cycle, across instructions). Without conflicts every read is at `c + 1`
    /// (already part of the class latency, which is measured conflict-free); the delay is
    /// how much later the last read is. The collector is held until the cycle after the
    /// last read (dispatch). Writeback port conflicts are not modelled.
    #[inline(always)]
    fn collect(&mut self, srcs: &[u16], shift: usize, c: u64, stats: &mut SmStats) -> u64 {
        let n = self.banks.len();
        // No banks: operand collection is not modelled.
        let srcs = if n > 0 { srcs } else { &[] };
        let first = c + 1;
        let mut last = first;
        let mask = n.wrapping_sub(1);
        let pow2 = n.is_power_of_two();
        let mut conflicts = 0;
        for &r in srcs {
            let b = if pow2 {
                (r as usize + shift) & mask
            } else {
                (r as usize + shift) % n
            };
            let t = self.banks[b].max(first);
            self.banks[b] = t + 1;
            last = last.max(t);
            conflicts += u64::from(t > first);
        }
        stats.operand_reads += srcs.len() as u64;
        stats.bank_conflicts += conflicts;
        let x = last - first;
        stats.bank_conflict_cycles += x;
        if !self.colls.is_empty() {
            // The first of the free collectors (the gate guarantees one at `c`).
            let colls = &mut self.colls[..];
            let mut i = 0;
            while i < colls.len() && colls[i] > c {
                i += 1;
            }
            if i == colls.len() {
                i = 0;
            }
            colls[i] = last + 1;
            // Two per scheduler (most presets) without the loop's set-up.
            self.coll_at = match *colls {
                [a, b] => a.min(b),
                _ => colls.iter().fold(NEVER, |m, &f| m.min(f)),
            };
        }
        x
    }
}

/// One resident CTA.
struct Resident {
    /// Kept encoded: its warps are decoded as they run (`Sm::cursors`).
    cta: CtaStream,
    /// The caller's name for it (listing index for the GPU, batch index for the batch).
    tag: u64,
    /// Its warp slots.
    slots: Vec<u32>,
    /// Unfinished warps.
    alive: u32,
    arrived: Vec<(u32, u64)>,
    seq: u32,
    /// Last cycle at which one of its issued instructions' results is written.
    complete_at: u64,
    /// Memory results not yet replied ([`Sm::mem_reply`]): it cannot complete before.
    pending: u32,
}

impl Resident {
    /// Every warp finished and every reply received (it completes at `complete_at`).
    fn finished(&self) -> bool {
        self.alive == 0 && self.pending == 0
    }
}

/// One entry of the table of in-flight memory instructions (index = [`MemToken`]).
#[derive(Clone, Copy)]
struct InFlight {
    warp: u32,
    /// Static slot of the instruction (its destination registers).
    slot: u32,
    /// Operand-collection delay of the instruction, added to the reply's cycle.
    delay: u64,
    live: bool,
}

/// One SM running CTAs of one kernel at a time ([`Sm::set_kernel`]; it persists across
/// kernels); CTAs arrive ([`Sm::add_cta`]) and leave ([`Sm::complete_ctas`]) while it
/// runs. Time is in core cycles; [`Sm::now`] is the first cycle not yet accounted.
///
/// Every per-event question is answered from per-scheduler caches (see `SchedState`)
/// in time proportional to the schedulers, not the warps: the next issue cycle, the stall
/// reason of an idle interval, the CTAs ready to complete.
pub struct Sm {
    spec: Arc<SmSpec>,
    prep: Option<Arc<KernelPrep>>,
    warps: Vec<WarpState>,
    /// Per warp slot, the decoder of its warp's instructions (a few at a time).
    cursors: Vec<WarpCursor>,
    used: Vec<bool>,
    /// Warp slots in use.
    n_used: u32,
    /// Scoreboards: for warp slot `w`, `reg_ready[w * stride + r]` is the cycle from which
    /// register `r` has no pending write ([`NEVER`] while it awaits a memory reply).
    reg_ready: Vec<u64>,
    /// Per register as `reg_ready`: whether its last write is long-latency ([`is_long`]);
    /// `two_level` only (empty otherwise).
    reg_long: Vec<bool>,
    /// The policy is `two_level` (only it reads [`WarpState::long_at`]).
    two_level: bool,
    stride: usize,
    scheds: Vec<SchedState>,
    ctas: Vec<Option<Resident>>,
    /// Resident CTAs, and those of them that are [`Resident::finished`].
    n_resident: usize,
    n_finished: usize,
    /// The earliest `complete_at` of the finished CTAs ([`NEVER`] when none; fixed once a
    /// CTA is finished).
    finished_at: u64,
    next_age: u64,
    live: u32,
    now: u64,
    complete_at: u64,
    record: bool,
    stats: SmStats,
    /// In-flight memory instructions, indexed by [`MemToken`]; `free` lists the reusable
    /// entries (last freed first, so token numbering is deterministic).
    inflight: Vec<InFlight>,
    free: Vec<u32>,
    /// Entries of `inflight` that are live.
    pending: u32,
    icache: Option<Icache>,
}

/// Warp slots whose per-slot tables [`Sm::new`] reserves up front (more are grown on use).
const MAX_RESERVED_SLOTS: usize = 128;

impl Sm {
    /// An empty SM whose first cycle is `now`, with no kernel yet ([`Sm::set_kernel`]).
    /// `record` fills the logs of [`SmStats`].
    pub fn new(spec: Arc<SmSpec>, now: u64, record: bool) -> Self {
        let n_sched = spec.schedulers.max(1);
        let cap = match spec.policy {
            SchedulerPolicy::TwoLevel => spec.two_level_active_warps.max(1) as usize,
            SchedulerPolicy::Lrr | SchedulerPolicy::Gto => 0,
        };
        let (banks, colls) = (
            spec.reg_banks_per_sched as usize,
            spec.collectors_per_sched as usize,
        );
        let icache = spec.icache.map(Icache::new);
        // The per-slot tables take their full size once, not by doubling as the first
        // CTAs arrive (a warp cursor moved by each growth is a few hundred bytes); capped
        // so that an absurd slot count in a config does not reserve more than warps use.
        let slots = (spec.warp_slots as usize).min(MAX_RESERVED_SLOTS);
        let per_sched = slots.div_ceil(n_sched as usize);
        Sm {
            spec,
            prep: None,
            warps: Vec::with_capacity(slots),
            cursors: Vec::with_capacity(slots),
            used: Vec::with_capacity(slots),
            n_used: 0,
            reg_ready: Vec::new(),
            reg_long: Vec::new(),
            two_level: cap > 0,
            stride: 1,
            scheds: (0..n_sched)
                .map(|_| {
                    let mut sc = SchedState::new(cap, banks, colls);
                    sc.entries.reserve(per_sched);
                    sc
                })
                .collect(),
            ctas: Vec::new(),
            n_resident: 0,
            n_finished: 0,
            finished_at: NEVER,
            next_age: 0,
            live: 0,
            now,
            complete_at: now,
            record,
            stats: SmStats {
                schedulers: n_sched,
                ..SmStats::default()
            },
            inflight: Vec::new(),
            free: Vec::new(),
            pending: 0,
            icache,
        }
    }

    /// Runs the CTAs of the kernel `prep` from now on. Refused while a CTA is resident.
    pub fn set_kernel(&mut self, prep: Arc<KernelPrep>) -> Result<(), SmError> {
        if self.n_resident > 0 {
            return Err(SmError::Busy {
                resident: self.n_resident,
            });
        }
        // No warp is resident: the scoreboards take the new kernel's size.
        self.stride = prep.regs;
        // Room for every warp slot's scoreboard now, not grown CTA by CTA.
        let slots = (self.spec.warp_slots as usize)
            .min(MAX_RESERVED_SLOTS)
            .max(self.used.len());
        self.reg_ready.clear();
        self.reg_ready.reserve(slots * self.stride);
        self.reg_ready.resize(self.used.len() * self.stride, 0);
        self.reg_long.clear();
        if self.two_level {
            self.reg_long.reserve(slots * self.stride);
            self.reg_long.resize(self.used.len() * self.stride, false);
        }
        self.prep = Some(prep);
        Ok(())
    }

    /// Moves an SM with no resident CTA to cycle `t` without accounting the cycles in
    /// between (the gap between two kernels, which belongs to neither's counters).
    /// Refused while a CTA is resident; a `t` in the past is ignored.
    pub fn skip_to(&mut self, t: u64) -> Result<(), SmError> {
        if self.n_resident > 0 {
            return Err(SmError::Busy {
                resident: self.n_resident,
            });
        }
        self.now = self.now.max(t);
        self.complete_at = self.complete_at.max(self.now);
        Ok(())
    }

    /// Test hook: checks that every scheduler's cached times equal what a rescan of its
    /// warps gives (clamped to now where `SchedState` says) (the caches are maintained incrementally; a stale one would still
    /// give identical results with and without idle skipping, so that test cannot
    /// catch it). Returns what differs.
    #[doc(hidden)]
    pub fn check_caches(&self) -> Result<(), String> {
        for (s, sc) in self.scheds.iter().enumerate() {
            for e in &sc.entries {
                let ws = &self.warps[e.slot as usize];
                let want = (ws.e1(), ws.e2(), ws.unblock());
                if (e.e1, e.e2, e.unblock) != want || (e.e2 != NEVER && e.class != ws.class) {
                    return Err(format!("scheduler {s}: stale entry of warp {}", e.slot));
                }
            }
            let mut fresh = SchedState {
                entries: sc.entries.clone(),
                active: sc.active.clone(),
                waiting: Vec::new(),
                banks: Vec::new(),
                colls: Vec::new(),
                ..SchedState::new(sc.cap, 0, 0)
            };
            fresh.unit_free = sc.unit_free;
            fresh.pool_at = sc.pool_at;
            fresh.coll_at = sc.coll_at;
            fresh.rescan();
            // `min_e2`, `issue_at` and so `next_issue` are exact once clamped to now (see
            // `SchedState`), and never earlier than the true minimum.
            let n = self.now;
            let clamped = |c: &SchedState| {
                (
                    c.min_e1,
                    c.min_e2.max(n),
                    c.issue_at.max(n),
                    c.due,
                    c.next_issue.max(n),
                )
            };
            let got = clamped(sc);
            let want = clamped(&fresh);
            if sc.min_e2 < fresh.min_e2 || sc.issue_at < fresh.issue_at {
                return Err(format!(
                    "scheduler {s} at cycle {}: cached minimum below the rescan's",
                    self.now
                ));
            }
            if got != want {
                return Err(format!(
                    "scheduler {s} at cycle {}: cached (e1, e2, issue, due, next) {got:?}, \
                     rescan {want:?}",
                    self.now
                ));
            }
            if sc.live != fresh.live {
                return Err(format!(
                    "scheduler {s} at cycle {}: live warps {:#x}, rescan {:#x}",
                    self.now, sc.live, fresh.live
                ));
            }
            let attains = |arg: u32, min: u64, f: &dyn Fn(&Entry) -> u64| {
                min == NEVER || sc.entries.get(arg as usize).map(f) == Some(min)
            };
            if !attains(sc.arg_e1, sc.min_e1, &|e| e.e1)
                || !attains(sc.arg_e2, sc.min_e2, &|e| e.e2)
                || !attains(sc.arg_issue, sc.issue_at, &|e| sc.earliest(e))
            {
                return Err(format!(
                    "scheduler {s} at cycle {}: a cached minimum's warp does not attain it",
                    self.now
                ));
            }
        }
        Ok(())
    }

    /// Memory instructions issued with [`MemIssue::Pending`] and not yet replied.
    pub fn pending_replies(&self) -> u32 {
        self.pending
    }

    /// The result of the in-flight memory instruction `token` is written at `cycle` (the
    /// caller guarantees `cycle >= now()`; an earlier one is taken as `now()`): its
    /// destination registers become ready then, and its CTA may complete from then on
    /// once nothing else is pending. An unknown or already replied token is a caller bug
    /// (ignored; a debug build asserts).
    #[inline(always)]
    pub fn mem_reply(&mut self, token: MemToken, cycle: u64) {
        let Some(f) = self.inflight.get_mut(token.0 as usize).filter(|f| f.live) else {
            debug_assert!(false, "mem_reply with an unknown token {token:?}");
            return;
        };
        debug_assert!(cycle >= self.now, "mem_reply in the past");
        let cycle = cycle.max(self.now) + f.delay;
        f.live = false;
        let (w, slot) = (f.warp as usize, f.slot as usize);
        self.free.push(token.0);
        self.pending -= 1;
        let Some(prep) = self.prep.as_ref() else {
            return;
        };
        let base = w * self.stride;
        for &r in prep.slots[slot].dsts.iter() {
            self.reg_ready[base + r as usize] = cycle;
        }
        let ws = &mut self.warps[w];
        ws.mem_pending -= 1;
        ws.mem_done_at = ws.mem_done_at.max(cycle);
        self.complete_at = self.complete_at.max(cycle);
        if let Some(rc) = self.ctas[self.warps[w].cta as usize].as_mut() {
            rc.pending -= 1;
            rc.complete_at = rc.complete_at.max(cycle);
            if rc.finished() {
                self.n_finished += 1;
                self.finished_at = self.finished_at.min(rc.complete_at);
            }
        }
        // Its registers only got earlier.
        self.refresh(w);
        self.touch(w);
    }

    /// Folds warp `w`'s times, which only got earlier, into its scheduler's caches.
    #[inline(always)]
    fn touch(&mut self, w: usize) {
        let ws = &self.warps[w];
        let sc = &mut self.scheds[ws.sched as usize];
        sc.lower(ws);
        if sc.cap > 0 {
            sc.rescan();
        }
    }

    /// The first cycle not yet accounted.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Resident CTAs.
    pub fn resident(&self) -> usize {
        self.n_resident
    }

    /// Free warp slots.
    pub fn free_warp_slots(&self) -> u32 {
        self.spec.warp_slots.saturating_sub(self.n_used)
    }

    /// The counters since the last [`Sm::take_stats`] (`cycles` is set by it).
    pub fn stats(&self) -> &SmStats {
        &self.stats
    }

    /// Makes `cta` resident from cycle [`Sm::now`]: its warps take the lowest free warp
    /// slots (slot `i` belongs to scheduler `i % schedulers`). Returns its index.
    pub fn add_cta(&mut self, mut cta: CtaStream, tag: u64) -> Result<u32, SmError> {
        let prep = self.prep.as_ref().ok_or(SmError::NoKernel)?;
        let ci = self
            .ctas
            .iter()
            .position(|c| c.is_none())
            .unwrap_or(self.ctas.len());
        if let Some(slot) = cta.max_slot().filter(|&s| s as usize >= prep.slots.len()) {
            return Err(SmError::BadSlot {
                cta: ci as u32,
                slot,
                n: prep.slots.len(),
            });
        }
        let code_base = prep.code_base;
        let n_warps = cta.n_warps();
        if n_warps as u64 > self.free_warp_slots() as u64 {
            return Err(SmError::TooManyWarps {
                warps: n_warps as u64 + self.n_used as u64,
                slots: self.spec.warp_slots,
            });
        }
        let n_sched = self.scheds.len() as u32;
        let mut slots = Vec::with_capacity(n_warps);
        let mut alive = 0;
        let mut search = 0usize;
        for w in 0..n_warps {
            while search < self.used.len() && self.used[search] {
                search += 1;
            }
            if search == self.used.len() {
                self.used.push(false);
                self.warps.push(WarpState::default());
                self.cursors.push(WarpCursor::new(false));
                self.reg_ready.resize(self.used.len() * self.stride, 0);
                if self.two_level {
                    self.reg_long.resize(self.used.len() * self.stride, false);
                }
            }
            let slot = search as u32;
            self.used[search] = true;
            self.n_used += 1;
            let sched = slot % n_sched;
            let age = self.next_age;
            self.next_age += 1;
            let cur = &mut self.cursors[search];
            // The stream was checked whole when made: starting cannot fail on it.
            cur.start(&cta, w).map_err(|e| SmError::Trace {
                cta: ci as u32,
                detail: e.0,
            })?;
            let first = cur.peek().map(|i| (i.pc, i.class));
            let done = first.is_none();
            if !done {
                alive += 1;
            }
            let sc = &mut self.scheds[sched as usize];
            let ws = WarpState {
                cta: ci as u32,
                sched,
                pos: sc.entries.len() as u32,
                end: cta.warp_len(w).unwrap_or(0) as usize,
                next: 0,
                done,
                at_barrier: false,
                release_at: 0,
                reg_at: 0,
                long_at: 0,
                fetch_at: 0,
                line_hint: 0,
                mem_pending: 0,
                mem_done_at: 0,
                class: first.map_or(OpClass::Nop, |(_, class)| class),
            };
            // Earlier writes to these registers were all before now (their CTA completed).
            let base = search * self.stride;
            self.reg_ready[base..base + self.stride].fill(0);
            if self.two_level {
                self.reg_long[base..base + self.stride].fill(false);
            }
            sc.entries.push(Entry {
                age,
                e1: NEVER,
                e2: NEVER,
                unblock: NEVER,
                slot,
                class: ws.class,
                // Under two_level a warp starts in the pending pool.
                active: sc.cap == 0,
            });
            if sc.cap > 0 && !done {
                sc.waiting.push(slot);
            }
            sc.unfinished += u32::from(!done);
            self.warps[search] = ws;
            let ws = &mut self.warps[search];
            if let (Some((pc, _)), Some(ic)) = (first, self.icache.as_mut()) {
                // Its first instruction is fetched on arrival.
                fetch(ic, code_base, &mut self.stats, ws, pc, self.now);
            }
            self.scheds[sched as usize].lower(ws);
            slots.push(slot);
        }
        self.live += alive;
        // Every warp started: only the record and small tables stay resident.
        cta.release_heads();
        let r = Resident {
            cta,
            tag,
            slots,
            alive,
            arrived: Vec::new(),
            seq: 0,
            complete_at: self.now,
            pending: 0,
        };
        if r.finished() {
            self.n_finished += 1;
            self.finished_at = self.finished_at.min(r.complete_at);
        }
        self.n_resident += 1;
        if ci == self.ctas.len() {
            self.ctas.push(Some(r));
        } else {
            self.ctas[ci] = Some(r);
        }
        Ok(ci as u32)
    }

    /// Refreshes warp `w`'s cache of its next instruction.
    #[inline(always)]
    fn refresh(&mut self, w: usize) {
        if self.warps[w].done {
            return;
        }
        let (Some(inst), Some(prep)) = (self.cursors[w].peek(), self.prep.as_deref()) else {
            return;
        };
        let base = w * self.stride;
        let long = if self.two_level {
            &self.reg_long[base..base + self.stride]
        } else {
            &[]
        };
        refresh_warp(
            &mut self.warps[w],
            &self.reg_ready[base..base + self.stride],
            long,
            &prep.slots[inst.slot as usize].wait,
            inst.class,
        );
    }

    /// Counts the stall reason of scheduler `s` for every cycle of `[a, b)`, during which
    /// no warp of it can issue and nothing changes.
    ///
    /// Why the cached minima suffice: an unfinished warp that cannot issue at `c` is, in
    /// order, at a barrier (`c < e1`, or waiting at one: `e1 = NEVER`), on the scoreboard
    /// (`e1 <= c < e2`), or held by its unit (`e2 <= c`, which in a stall interval means
    /// `c < unit free`). Its reason only moves up the precedence unit > scoreboard >
    /// barrier as `c` grows, so the scheduler's reason is `unit` from `min e2` on,
    /// `scoreboard` from `min e1` on, `barrier` before, and `no_warp` without an
    /// unfinished warp: exactly the per-warp classification, in O(1).
    fn count_stalls(&mut self, s: usize, a: u64, b: u64) {
        if a >= b {
            return;
        }
        let sc = &self.scheds[s];
        let st = &mut self.stats;
        if sc.unfinished == 0 {
            st.stall_no_warp += b - a;
            return;
        }
        let u = sc.min_e2.clamp(a, b);
        let sb = sc.min_e1.clamp(a, b).min(u);
        st.stall_unit_busy += b - u;
        st.stall_scoreboard += u - sb;
        st.stall_barrier += sb - a;
    }

    /// [`Sm::count_stalls`] for the one cycle `now` (the same classification, as
    /// branches rather than clamps).
    #[inline]
    fn count_stall(&mut self, s: usize, now: u64) {
        let sc = &self.scheds[s];
        let st = &mut self.stats;
        if sc.unfinished == 0 {
            st.stall_no_warp += 1;
        } else if sc.min_e2 <= now {
            st.stall_unit_busy += 1;
        } else if sc.min_e1 <= now {
            st.stall_scoreboard += 1;
        } else {
            st.stall_barrier += 1;
        }
    }

    /// The position in scheduler `s`'s list of the warp it issues at `now`, per policy.
    #[inline(always)]
    fn pick(&self, s: usize, now: u64) -> Option<usize> {
        let sch = &self.scheds[s];
        let ents = &sch.entries;
        let ready = |e: &Entry| sch.earliest(e) <= now;
        match self.spec.policy {
            SchedulerPolicy::Lrr => {
                // Round robin in age order, starting after the last issued warp (finished
                // warps, never ready, may have left the list: the order is unchanged).
                let start = sch.rr_start as usize;
                if ents.len() <= 64 {
                    // Only warps in `live` can be ready: those from `start` on, then the
                    // others, each in position order.
                    let high = if start < 64 { !0u64 << start } else { 0 };
                    return first_ready(sch, sch.live & high, now)
                        .or_else(|| first_ready(sch, sch.live & !high, now));
                }
                ents[start..]
                    .iter()
                    .position(ready)
                    .map(|p| start + p)
                    .or_else(|| ents[..start].iter().position(ready))
            }
            // The first ready warp of the active pool, in its rotated order.
            SchedulerPolicy::TwoLevel => sch
                .active
                .iter()
                .map(|&w| self.warps[w as usize].pos as usize)
                .find(|&p| ready(&ents[p])),
            SchedulerPolicy::Gto => {
                if let Some(p) = sch.last_at {
                    if ents.get(p as usize).is_some_and(ready) {
                        return Some(p as usize);
                    }
                }
                if ents.len() <= 64 {
                    return first_ready(sch, sch.live, now);
                }
                ents.iter().position(ready)
            }
        }
    }

    /// Issues the instruction of the warp at position `pos` of scheduler `s` at `now`.
    ///
    /// The common case (no warp finishes, no barrier) runs on borrows of the fields it
    /// touches, each table indexed once: the borrows show the compiler that the writes
    /// to the scoreboard and the stats cannot move the tables, so nothing is reloaded.
    /// Forced inline into the step loops: once per warp instruction (gemm m=n=k=128 on
    /// titanv: 3.4% fewer host instructions).
    #[inline(always)]
    fn issue(&mut self, s: usize, pos: usize, now: u64, mem: &mut impl MemPort) {
        let Sm {
            spec,
            prep,
            warps,
            cursors,
            reg_ready,
            reg_long,
            two_level,
            stride,
            scheds,
            ctas,
            live,
            complete_at,
            record,
            stats,
            inflight,
            free,
            pending,
            icache,
            n_finished,
            finished_at,
            ..
        } = self;
        // Without a kernel no warp is resident: nothing can issue.
        let Some(prep) = prep.as_deref() else {
            return;
        };
        let (two_level, stride) = (*two_level, *stride);
        let sc = &mut scheds[s];
        let Entry { age, slot, .. } = sc.entries[pos];
        let w = slot as usize;
        sc.last = Some(age);
        sc.last_at = Some(pos as u32);
        sc.rr_start = pos as u32 + 1;
        let cur = &mut cursors[w];
        let Some(&inst) = cur.peek() else {
            return;
        };
        let ws = &mut warps[w];
        let t = spec.timing_of(inst.class);
        // Most instructions run on a full warp: skip the (software) population count.
        let lanes = if inst.mask == u32::MAX {
            32
        } else {
            inst.mask.count_ones() as u64
        };
        let st = &mut *stats;
        st.warp_insts += 1;
        st.issue_slots_used += 1;
        st.thread_insts += lanes;
        st.class_warp_insts[inst.class as usize] += 1;
        if inst.class == OpClass::Exit {
            st.exited_lanes += lanes;
        }
        let cta = ws.cta as usize;
        if *record {
            st.issue_log.push(IssueEvent {
                cycle: now,
                warp: w as u32,
                cta: cta as u32,
                inst: ws.next as u32,
                class: inst.class,
            });
        }
        let regs = &prep.slots[inst.slot as usize];
        // Operand reads before dispatch: bank conflicts delay the result. The unit's
        // interval still counts from issue: collectors dispatch in any order (GPGPU-Sim),
        // so a later instruction whose operands are ready can take the unit meanwhile.
        let shift = if spec.reg_bank_use_warp_id { w } else { 0 };
        let x = sc.collect(&regs.srcs, shift, now, st);
        sc.unit_free[inst.class as usize] = now + t.initiation_cycles as u64;
        let Some(rc) = ctas[cta].as_mut() else {
            return;
        };
        let mut is_pending = false;
        let done_at = if inst.class.is_memory() {
            // The last freed entry, taken off the free list only if the result is pending
            // (an answer known now leaves the list as it was).
            let (token, listed) = match free.last() {
                Some(&t) => (t, true),
                None => {
                    inflight.push(InFlight {
                        warp: 0,
                        slot: 0,
                        delay: 0,
                        live: false,
                    });
                    (inflight.len() as u32 - 1, false)
                }
            };
            let addrs = cur.lane_source();
            let done_at = match mem.access(now, addrs, &inst, MemToken(token), t.latency_cycles) {
                MemIssue::Done(at) => {
                    if !listed {
                        free.push(token);
                    }
                    // The memory system sees accesses in issue order (the GPU advances
                    // SMs in global time), so the operand delay comes after it.
                    at.max(now + 1) + x
                }
                MemIssue::Pending => {
                    if listed {
                        free.pop();
                    }
                    inflight[token as usize] = InFlight {
                        warp: w as u32,
                        slot: inst.slot,
                        delay: x,
                        live: true,
                    };
                    *pending += 1;
                    is_pending = true;
                    NEVER
                }
            };
            if is_pending {
                ws.mem_pending += 1;
            } else {
                ws.mem_done_at = ws.mem_done_at.max(done_at);
            }
            done_at
        } else {
            now + x + t.latency_cycles as u64
        };
        if is_pending {
            rc.pending += 1;
            rc.complete_at = rc.complete_at.max(now + 1);
        } else {
            *complete_at = (*complete_at).max(done_at);
            rc.complete_at = rc.complete_at.max(done_at).max(now + 1);
        }
        let base = w * stride;
        let board = &mut reg_ready[base..base + stride];
        if two_level {
            let long = is_long(inst.class);
            let long_board = &mut reg_long[base..base + stride];
            for &r in regs.dsts.iter() {
                board[r as usize] = done_at;
                long_board[r as usize] = long;
            }
        } else {
            for &r in regs.dsts.iter() {
                board[r as usize] = done_at;
            }
        }
        ws.next += 1;
        if cur.advance(&rc.cta).is_err() {
            // Not on a stream checked when made (every one is): end the warp rather than
            // run what cannot be decoded.
            debug_assert!(false, "warp {w}: its checked stream fails to decode");
            ws.end = ws.next;
        }
        let next = if ws.next < ws.end { cur.peek() } else { None };
        if let (Some(next), Some(ic)) = (next, icache.as_mut()) {
            fetch(ic, prep.code_base, st, ws, next.pc, now);
        }
        if ws.next == ws.end {
            ws.done = true;
            *live -= 1;
            sc.unfinished -= 1;
            rc.alive -= 1;
            if rc.finished() {
                *n_finished += 1;
                *finished_at = (*finished_at).min(rc.complete_at);
            }
        } else if inst.class == OpClass::Barrier {
            ws.at_barrier = true;
            rc.arrived.push((w as u32, now));
        } else {
            // The common case: nothing else moves; the warp's cache of its next
            // instruction is refreshed here, where its parts are at hand.
            if let Some(next) = next {
                let long_board = if two_level {
                    &reg_long[base..base + stride]
                } else {
                    &[]
                };
                refresh_warp(
                    ws,
                    &reg_ready[base..base + stride],
                    long_board,
                    &prep.slots[next.slot as usize].wait,
                    next.class,
                );
            }
            sc.settle_issue(ws, now);
            return;
        }
        // A warp finished or reached a barrier: the barrier may release (which moves other
        // warps' times), then as above.
        self.try_release(cta, now);
        self.refresh(w);
        let ws = &self.warps[w];
        self.scheds[s].settle_issue(ws, now);
    }

    /// Releases CTA `cta`'s barrier when every unfinished warp has arrived: they all may
    /// issue again from the next cycle.
    fn try_release(&mut self, cta: usize, now: u64) {
        let Some(cs) = self.ctas[cta].as_mut() else {
            return;
        };
        if cs.arrived.is_empty() || cs.arrived.len() as u32 != cs.alive {
            return;
        }
        let arrivals = std::mem::take(&mut cs.arrived);
        let seq = cs.seq;
        cs.seq += 1;
        for &(w, _) in &arrivals {
            let ws = &mut self.warps[w as usize];
            ws.at_barrier = false;
            ws.release_at = now + 1;
            // From waiting to `now + 1`: earlier (the issuing scheduler is rescanned
            // anyway).
            self.touch(w as usize);
        }
        self.stats.barriers += 1;
        if self.record {
            self.stats.barrier_log.push(BarrierEvent {
                cta: cta as u32,
                seq,
                arrivals,
                release_cycle: now + 1,
            });
        }
    }

    fn deadlock(&self) -> SmError {
        let waiting: Vec<String> = self
            .used
            .iter()
            .enumerate()
            .filter(|&(i, &u)| u && !self.warps[i].done)
            .map(|(i, _)| {
                let w = &self.warps[i];
                format!("warp {i} (CTA {}) at instruction {}", w.cta, w.next)
            })
            .collect();
        SmError::Deadlock {
            cycle: self.now,
            detail: format!("waiting at barriers: {}", waiting.join(", ")),
        }
    }

    /// The first cycle at which a warp could issue, or `None` when no warp can issue
    /// before something arrives (all finished, all waiting for memory replies) or ever
    /// again (a deadlock: see [`Sm::check_deadlock`]).
    fn next_issue(&self) -> Option<u64> {
        let t = self
            .scheds
            .iter()
            .map(|s| s.next_issue)
            .min()
            .unwrap_or(NEVER);
        (t != NEVER).then_some(t)
    }

    /// The next cycle (at least [`Sm::now`]) at which this SM has something to do: a warp
    /// may issue or a finished CTA completes. `None` when it has nothing to do until a
    /// [`Sm::mem_reply`] (ask again after one) or nothing left at all. Warps blocked only
    /// on pending memory replies give no time.
    pub fn next_event(&self) -> Option<u64> {
        let issue = self.next_issue();
        let done = (self.n_finished > 0).then_some(self.finished_at);
        match (issue, done) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|t| t.max(self.now))
    }

    /// Whether [`Sm::complete_ctas`] at cycle `t` would complete a CTA.
    #[inline]
    pub fn completes_by(&self, t: u64) -> bool {
        self.n_finished > 0 && self.finished_at <= t
    }

    /// An error when some warp is unfinished but none can ever issue again (never while a
    /// memory reply is pending: it may unblock them).
    pub fn check_deadlock(&self) -> Result<(), SmError> {
        if self.live > 0 && self.pending == 0 && self.next_issue().is_none() {
            return Err(self.deadlock());
        }
        Ok(())
    }

    /// Counts the cycles `[now, t)`, in which nothing may issue (the caller guarantees it:
    /// `t <= next_event()`), as stalls, and moves to `t`.
    pub fn advance_to(&mut self, t: u64) {
        if t > self.now {
            for s in 0..self.scheds.len() {
                self.count_stalls(s, self.now, t);
            }
            self.now = t;
        }
    }

    /// The `two_level` pool update of scheduler `s` at cycle `c` (steps 1 and 2 of the
    /// rule in the module documentation of `sm`): demote
    /// the active warps blocked at `c`, then fill free slots from the pending pool.
    fn update_pools(&mut self, s: usize, c: u64) {
        let sc = &mut self.scheds[s];
        let warps = &self.warps;
        let (entries, waiting) = (&mut sc.entries, &mut sc.waiting);
        sc.active.retain(|&w| {
            let ws = &warps[w as usize];
            let e = &mut entries[ws.pos as usize];
            if e.unblock <= c {
                return true;
            }
            e.active = false;
            if !ws.done {
                waiting.push(w);
            }
            false
        });
        while sc.active.len() < sc.cap {
            let Some(i) = sc
                .waiting
                .iter()
                .position(|&w| sc.entries[warps[w as usize].pos as usize].unblock <= c)
            else {
                break;
            };
            let w = sc.waiting.remove(i);
            sc.entries[warps[w as usize].pos as usize].active = true;
            sc.active.push(w);
        }
        sc.pool_at = c;
        sc.rescan();
    }

    /// Runs cycle [`Sm::now`]: each scheduler issues at most one instruction (memory
    /// instructions go to `mem`) or counts a stall; then moves to the next cycle.
    #[inline(never)]
    pub fn step(&mut self, mem: &mut impl MemPort) {
        let now = self.now;
        for s in 0..self.scheds.len() {
            let sc = &self.scheds[s];
            if sc.cap > 0 {
                self.step_two_level(s, now, mem);
                continue;
            }
            // An issue elsewhere this cycle cannot make one of this scheduler's warps ready
            // now (a barrier releases for the next cycle), so its cache decides.
            if sc.issue_at.max(sc.coll_at) <= now {
                if let Some(pos) = self.pick(s, now) {
                    self.issue(s, pos, now, mem);
                    continue;
                }
            }
            self.count_stall(s, now);
        }
        self.now += 1;
    }

    /// [`Sm::step`] for scheduler `s` under `two_level`: the pool update, then as the
    /// other policies, and the active pool rotated after an issue.
    fn step_two_level(&mut self, s: usize, now: u64, mem: &mut impl MemPort) {
        if self.scheds[s].next_issue <= now {
            self.update_pools(s, now);
        }
        let sc = &self.scheds[s];
        let picked = if sc.issue_at.max(sc.coll_at) <= now {
            self.pick(s, now)
        } else {
            None
        };
        let Some(pos) = picked else {
            self.count_stall(s, now);
            return;
        };
        let slot = self.scheds[s].entries[pos].slot;
        self.issue(s, pos, now, mem);
        let sc = &mut self.scheds[s];
        if let Some(i) = sc.active.iter().position(|&w| w == slot) {
            // Round robin from the last issued: it goes to the back.
            sc.active.rotate_left(i + 1);
        }
        sc.rescan();
    }

    /// Removes the CTAs whose warps have all finished and whose results are all written
    /// by cycle `t` (`complete_at <= t`, no memory reply pending), freeing their warp
    /// slots; calls `f(tag, completion cycle)` for each, in CTA-index order.
    pub fn complete_ctas(&mut self, t: u64, mut f: impl FnMut(u64, u64)) {
        if !self.completes_by(t) {
            return;
        }
        let mut freed = false;
        let mut left = NEVER;
        for ci in 0..self.ctas.len() {
            let Some(c) = &self.ctas[ci] else {
                continue;
            };
            if !c.finished() {
                continue;
            }
            if c.complete_at > t {
                left = left.min(c.complete_at);
                continue;
            }
            let Some(r) = self.ctas[ci].take() else {
                continue;
            };
            self.n_resident -= 1;
            self.n_finished -= 1;
            for &slot in &r.slots {
                self.used[slot as usize] = false;
                self.n_used -= 1;
            }
            freed = true;
            f(r.tag, r.complete_at);
        }
        self.finished_at = left;
        if !freed {
            return;
        }
        // The freed warps leave their schedulers' lists (entries of warps in use stay, in
        // order). They were done: the minima stand, but the positions of the warps
        // attaining them moved.
        let used = &self.used;
        for sc in &mut self.scheds {
            let n = sc.entries.len();
            sc.entries.retain(|e| used[e.slot as usize]);
            if sc.entries.len() == n {
                continue;
            }
            for (i, e) in sc.entries.iter().enumerate() {
                self.warps[e.slot as usize].pos = i as u32;
            }
            if let Some(age) = sc.last {
                sc.rr_start = sc.entries.partition_point(|e| e.age <= age) as u32;
                sc.last_at = sc
                    .entries
                    .binary_search_by_key(&age, |e| e.age)
                    .ok()
                    .map(|p| p as u32);
            }
            if sc.cap > 0 {
                // A finished warp not yet dropped by a pool update frees its slot.
                sc.active.retain(|&w| used[w as usize]);
                sc.waiting.retain(|&w| used[w as usize]);
            }
            sc.rescan();
        }
    }

    /// Counts the cycles up to `end` as stalls (as [`Sm::advance_to`]) and returns the
    /// counters since the previous take (or since [`Sm::new`]) with
    /// `cycles = end - start`, resetting them. The SM goes on from `end`.
    pub fn take_stats(&mut self, start: u64, end: u64) -> SmStats {
        self.advance_to(end);
        let fresh = SmStats {
            schedulers: self.stats.schedulers,
            ..SmStats::default()
        };
        let mut s = std::mem::replace(&mut self.stats, fresh);
        s.cycles = self.now.saturating_sub(start);
        s
    }

    /// [`Sm::take_stats`] for the last time.
    pub fn finish(mut self, start: u64, end: u64) -> SmStats {
        self.take_stats(start, end)
    }
}

/// The first position in `mask` (a subset of the scheduler's `live` warps) whose warp may
/// issue at `now`.
#[inline]
fn first_ready(sch: &SchedState, mut mask: u64, now: u64) -> Option<usize> {
    while mask != 0 {
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        if sch.earliest(&sch.entries[i]) <= now {
            return Some(i);
        }
    }
    None
}

/// Fetches warp `ws`'s next instruction, at `pc` of the kernel whose code is at
/// `code_base`, at cycle `c` through the I-cache; a free function so that it borrows only
/// what it touches.
#[inline(always)]
fn fetch(
    ic: &mut Icache,
    code_base: u64,
    stats: &mut SmStats,
    ws: &mut WarpState,
    pc: u32,
    c: u64,
) {
    let (at, hit) = ic.fetch(code_base | pc as u64, c, &mut ws.line_hint);
    ws.fetch_at = at;
    stats.icache_accesses += 1;
    stats.icache_misses += u64::from(!hit);
}

/// Sets warp `ws`'s cache of its next instruction, of class `class`, which waits on the
/// registers `wait`, from its scoreboard `board` (and `long`, whether each register's
/// pending write is long-latency: `two_level` only, empty otherwise).
#[inline(always)]
fn refresh_warp(ws: &mut WarpState, board: &[u64], long: &[bool], wait: &[u16], class: OpClass) {
    let (mut reg_at, mut long_at) = (0, 0);
    if long.is_empty() {
        for &r in wait {
            reg_at = reg_at.max(board[r as usize]);
        }
    } else {
        for &r in wait {
            let t = board[r as usize];
            reg_at = reg_at.max(t);
            if long[r as usize] {
                long_at = long_at.max(t);
            }
        }
    }
    if class == OpClass::Fence {
        // A fence waits for every memory result of its warp.
        if ws.mem_pending > 0 {
            reg_at = NEVER;
            if !long.is_empty() {
                long_at = NEVER;
            }
        } else {
            reg_at = reg_at.max(ws.mem_done_at);
        }
    }
    ws.reg_at = reg_at;
    ws.long_at = long_at;
    ws.class = class;
}

/// Runs `ctas` (CTAs of `kernel`, all resident at once) on one SM to completion and
/// returns its counters; idle cycles are skipped.
pub fn run_cta_batch(
    spec: &SmSpec,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
) -> Result<SmStats, SmError> {
    run_cta_batch_with(spec, kernel, ctas, &SmOptions::default())
}

/// [`run_cta_batch`] with options. Memory instructions take the placeholder latency of
/// [`SmSpec::mem_placeholder_latency_cycles`].
pub fn run_cta_batch_with(
    spec: &SmSpec,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
    opts: &SmOptions,
) -> Result<SmStats, SmError> {
    let n_warps: u64 = ctas.iter().map(|c| c.warps.len() as u64).sum();
    let table: Arc<[SlotInfo]> = SlotInfo::table(kernel).into();
    if n_warps > spec.warp_slots as u64 {
        return Err(SmError::TooManyWarps {
            warps: n_warps,
            slots: spec.warp_slots,
        });
    }
    let mut sm = Sm::new(Arc::new(spec.clone()), 0, opts.record_log);
    sm.set_kernel(Arc::new(KernelPrep::new(kernel)))?;
    for (i, c) in ctas.iter().enumerate() {
        let stream = CtaStream::from_decoded(c, table.clone()).map_err(|e| SmError::Trace {
            cta: i as u32,
            detail: e.0,
        })?;
        sm.add_cta(stream, i as u64)?;
    }
    let mut mem = PlaceholderMem;
    while sm.live > 0 {
        let Some(next) = sm.next_issue() else {
            return Err(sm.deadlock());
        };
        if !opts.tick_every_cycle {
            sm.advance_to(next);
        }
        sm.step(&mut mem);
    }
    let end = sm.now.max(sm.complete_at);
    Ok(sm.finish(0, end))
}
