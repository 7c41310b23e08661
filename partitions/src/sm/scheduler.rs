//! The sub-core warp schedulers ([`SchedState`]) and their policies (`core.scheduler`).
//!
//! Warp slot `i` (CTAs' warps numbered consecutively in the order given) belongs to
//! sub-core scheduler `i % schedulers` (the GPGPU-Sim / Accel-Sim convention). Each
//! scheduler issues at most one warp instruction per core cycle, from a ready warp chosen
//! by the policy (warps of a scheduler are kept in dispatch, that is age, order): `lrr`
//! round robin starting after the last issued warp; `gto` the last issued warp while it
//! is ready, else the oldest ready one; `two_level` as below. A scheduler has one
//! functional unit per class, which accepts a new instruction `initiation_cycles` after
//! the previous one (`SchedState::unit_free`).
//!
//! `two_level` (GPGPU-Sim's `two_level_active` with loose round robin inside, the pool
//! refilled with the oldest warp that can use it): each scheduler has an *active pool* of
//! at most `N = max(1, core.two_level_active_warps)` warps, an ordered list, and a
//! *pending pool*, a FIFO; warps of a new CTA join the back of the pending pool in
//! dispatch order. A warp is *blocked* at cycle `c` when it has finished, waits at a CTA
//! barrier (or `c` is before its release cycle), or its next instruction reads or writes
//! a register whose pending write is *long-latency* and not yet written at `c` (the
//! result of a memory instruction other than shared memory's: GPGPU-Sim's `longopregs`;
//! a result awaiting [`Sm::mem_reply`] counts as not written). At the start of every
//! cycle `c`, each scheduler
//! 1. *demotes*: every active warp blocked at `c`, in active order, leaves the active pool;
//!    unfinished ones go to the back of the pending pool;
//! 2. *promotes*: while the active pool has fewer than `N` warps, the first warp of the
//!    pending pool (FIFO order) that is not blocked at `c` moves to the back of the
//!    active pool (a blocked one keeps its place);
//! 3. *issues* the first ready warp of the active pool, in its order, and rotates the
//!    pool so that the warps after it come first and it comes last.
//!
//! Only active warps may issue. In a cycle without an issue the stall reason
//! ([`super::SmStats`]) is taken over every warp except pending warps that are not
//! blocked (they wait only for a slot of the full active pool, whose warps give the
//! reason).

use super::issue::Sm;
use super::ldst::MemPort;
use super::scoreboard::NEVER;
use super::warp::WarpState;
use crate::config::config_enum;
use crate::counters::unit_counters;
use tessera_traces::OpClass;

config_enum! {
    /// Warp scheduling policy of each sub-core scheduler.
    pub enum SchedulerPolicy {
        /// Loose round robin.
        Lrr = "lrr",
        /// Greedy then oldest.
        Gto = "gto",
        /// Two-level: an active pool of `core.two_level_active_warps`, round robin inside;
        /// a warp waiting on a global/local memory result yields its slot to the oldest
        /// pending warp that is not.
        TwoLevel = "two_level",
    }
}

unit_counters! {
    /// The issue slots of an SM's warp schedulers, each scheduler-cycle counted once (see
    /// [`super::SmStats`] for the stall reasons and their precedence).
    pub struct SchedulerStats {
        /// Scheduler-cycles with an issue (equals the warp instructions issued).
        issue_slots_used,
        stall_unit_busy,
        stall_scoreboard,
        stall_barrier,
        stall_no_warp,
        /// Counted before `stall_unit_busy`: cycles that would count there while the SM's
        /// LD/ST unit takes no memory instruction, its L1 miss queue full of packets
        /// waiting for credit at the NoC crossbar (`noc.model: crossbar`).
        stall_no_credit,
    }
}

impl SchedulerStats {
    /// Sum of the five stall counters.
    pub fn stalls(&self) -> u64 {
        self.stall_unit_busy
            + self.stall_scoreboard
            + self.stall_barrier
            + self.stall_no_warp
            + self.stall_no_credit
    }
}

/// A scheduler's copy of what its policy and stall accounting read of one warp, kept in
/// a dense array in age order so that its scans touch nothing else.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    /// Dispatch order on this SM (oldest first, for GTO and the LRR rotation).
    pub(super) age: u64,
    /// [`WarpState::e1`] and [`WarpState::e2`].
    pub(super) e1: u64,
    pub(super) e2: u64,
    /// [`WarpState::unblock`].
    pub(super) unblock: u64,
    /// Warp slot.
    pub(super) slot: u32,
    /// Class of its next instruction (meaningful while `e2 != NEVER`).
    pub(super) class: OpClass,
    /// In the active pool (`two_level`; always true otherwise).
    pub(super) active: bool,
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
pub(super) struct SchedState {
    /// Its resident warps, oldest first.
    pub(super) entries: Vec<Entry>,
    /// Age of the last warp it issued, its position in `entries` (`None` once it has
    /// left), and where `lrr`'s round robin starts: one past it (the number of entries
    /// no younger than it, 0 before any issue). Set on issue; a completion, which moves
    /// the entries, recomputes the positions from the age.
    pub(super) last: Option<u64>,
    pub(super) last_at: Option<u32>,
    pub(super) rr_start: u32,
    /// Cycle from which each class's unit accepts a new instruction.
    pub(super) unit_free: [u64; OpClass::COUNT],
    /// Unfinished warps.
    pub(super) unfinished: u32,
    /// Earliest cycle one of its (active) warps may issue ([`NEVER`]: none without a
    /// reply or a barrier release).
    pub(super) issue_at: u64,
    /// The earlier of `issue_at` and, under `two_level`, the first cycle at which the
    /// pool update would change the pools: when the scheduler must be stepped.
    pub(super) next_issue: u64,
    /// Minimum of [`WarpState::e1`] over its warps, and of [`WarpState::e2`] over its
    /// (active) warps.
    pub(super) min_e1: u64,
    pub(super) min_e2: u64,
    /// Positions in `entries` of warps attaining `min_e1`, `min_e2` and `issue_at`
    /// (meaningless while the minimum is [`NEVER`]): while such a warp is not the one that
    /// issued, an issue that only made times later leaves the minimum where it was, so
    /// it needs no rescan.
    pub(super) arg_e1: u32,
    pub(super) arg_e2: u32,
    pub(super) arg_issue: u32,
    /// Bit `i` set when `entries[i].e2 != NEVER` (the first 64 entries; with more, the
    /// scans below read every entry): only those warps can give `min_e2` or `issue_at`.
    pub(super) live: u64,
    /// `two_level` only (the rule is in the module documentation): the active pool's
    /// capacity (0 for the other policies), its warp slots in priority order, the
    /// pending pool's in FIFO order, and the last cycle whose pool update ran.
    pub(super) cap: usize,
    pub(super) active: Vec<u32>,
    pub(super) waiting: Vec<u32>,
    pub(super) pool_at: u64,
    /// `two_level`: when the next pool update would change the pools ([`NEVER`]: none).
    pub(super) due: u64,
    /// Operand collection (empty when not modelled): the first cycle each of its
    /// register banks can serve a read, and each of its collector units is free; the
    /// earliest of the latter (0 with unlimited collectors).
    pub(super) banks: Vec<u64>,
    pub(super) colls: Vec<u64>,
    pub(super) coll_at: u64,
}

impl SchedState {
    pub(super) fn new(cap: usize, banks: usize, colls: usize) -> Self {
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
    pub(super) fn settle(&mut self) {
        self.next_issue = self.issue_at.max(self.coll_at).min(self.due);
    }

    /// The first cycle warp `e` of this scheduler may issue ([`NEVER`]: not without a
    /// barrier release or a reply, or finished).
    #[inline]
    pub(super) fn earliest(&self, e: &Entry) -> u64 {
        // `NEVER` is the largest time: it stays `NEVER`.
        e.e2.max(self.unit_free[e.class as usize])
    }

    /// Copies warp `ws`'s times into its entry and folds them into the caches (exact
    /// when they only got earlier, except that under `two_level` an earlier time can
    /// also cancel a pending demotion: there a [`SchedState::rescan`] must follow, as
    /// after any change that can make a time later).
    #[inline(always)]
    pub(super) fn lower(&mut self, ws: &WarpState) {
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
    pub(super) fn rescan(&mut self) {
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
    pub(super) fn settle_issue(&mut self, ws: &WarpState, now: u64) {
        if self.cap == 0 {
            self.after_issue(ws, now);
        } else {
            self.lower(ws);
        }
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

impl Sm {
    /// The position in scheduler `s`'s list of the warp it issues at `now`, per policy.
    #[inline(always)]
    pub(super) fn pick(&self, s: usize, now: u64) -> Option<usize> {
        let sch = &self.scheds[s];
        let ents = &sch.entries;
        let ready = |e: &Entry| sch.earliest(e) <= now;
        match self.params.policy {
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

    /// The `two_level` pool update of scheduler `s` at cycle `c` (steps 1 and 2 of the
    /// rule in the module documentation): demote the active warps blocked at `c`, then
    /// fill free slots from the pending pool.
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

    /// [`Sm::step`] for scheduler `s` under `two_level`: the pool update, then as the
    /// other policies, and the active pool rotated after an issue.
    pub(super) fn step_two_level(&mut self, s: usize, now: u64, mem: &mut impl MemPort) {
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
        if !self.mem_blocked && !mem.accepting() {
            self.block_memory();
        }
        let sc = &mut self.scheds[s];
        if let Some(i) = sc.active.iter().position(|&w| w == slot) {
            // Round robin from the last issued: it goes to the back.
            sc.active.rotate_left(i + 1);
        }
        sc.rescan();
    }

    /// Test hook: checks that every scheduler's cached times equal what a rescan of its
    /// warps gives (clamped to now where `SchedState` says). The caches are maintained
    /// incrementally; a stale one would still give identical results with and without
    /// idle skipping, so that test cannot catch it. Returns what differs.
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
}
