//! CTA residency and CTA barriers.
//!
//! A CTA's warps take the lowest free warp slots when it arrives ([`Sm::add_cta`]); it
//! completes ([`Sm::complete_ctas`]) when every warp has finished and every result is
//! written, freeing its slots. `BAR.SYNC` (class `barrier`): the warp waits until every
//! unfinished warp of its CTA has arrived; all leave together the next cycle. `EXIT`
//! retires lanes; a warp whose stream ends is done.

use super::icache::fetch;
use super::issue::{Sm, SmError};
use super::scheduler::Entry;
use super::scoreboard::NEVER;
use super::warp::WarpState;
use crate::observe::{BarrierEvent, CtaEvent};
use tessera_traces::{CtaStream, NamedBarrier, OpClass, WarpCursor};

/// One resident CTA.
pub(super) struct Resident {
    /// Kept encoded: its warps are decoded as they run (`Sm::cursors`).
    pub(super) cta: CtaStream,
    /// The caller's name for it (listing index for the GPU, batch index for a test driver).
    pub(super) tag: u64,
    /// Its warp slots.
    pub(super) slots: Vec<u32>,
    /// Unfinished warps.
    pub(super) alive: u32,
    pub(super) arrived: Vec<(u32, u64)>,
    pub(super) seq: u32,
    /// Last cycle at which one of its issued instructions' results is written.
    pub(super) complete_at: u64,
    /// Memory results not yet replied ([`Sm::mem_reply`]): it cannot complete before.
    pub(super) pending: u32,
    /// Its named barriers (1 to 15; issue 24), made when a warp first meets one.
    pub(super) named: Vec<NamedBar>,
    /// Its mbarrier objects (issue 24), made when a warp first meets one.
    pub(super) mbars: Vec<super::mbarrier::MBarrier>,
}

/// The state of one named barrier of a CTA: the threads counted so far (each arriving warp
/// counts 32) and the warps waiting (`BAR.SYNC`).
#[derive(Clone, Debug, Default)]
pub(super) struct NamedBar {
    threads: u32,
    warps: u32,
    /// Its thread count as its instructions give it (0: the CTA's unfinished warps).
    need: u32,
    waiting: Vec<(u32, u64)>,
}

impl Resident {
    /// Every warp finished and every reply received (it completes at `complete_at`).
    pub(super) fn finished(&self) -> bool {
        self.alive == 0 && self.pending == 0
    }
}

impl Sm {
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
        let special = prep.special;
        let n_warps = cta.n_warps();
        if n_warps as u64 > self.free_warp_slots() as u64 {
            return Err(SmError::TooManyWarps {
                warps: n_warps as u64 + self.n_used as u64,
                slots: self.params.warp_slots,
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
                self.spins.push(Default::default());
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
            if let Some(sw) = self.spins.get_mut(search) {
                *sw = Default::default();
            }
            let cur = &mut self.cursors[search];
            cur.set_with_operands(special);
            // The stream was checked whole when made: starting cannot fail on it.
            cur.start(&cta, w).map_err(|e| match cur.fault() {
                Some(&fault) => SmError::Access {
                    cta: cta.id(),
                    fault,
                },
                None => SmError::Trace {
                    cta: ci as u32,
                    detail: e.0,
                },
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
                fetch(ic, code_base, &mut self.stats.icache, ws, pc, self.now);
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
            named: Vec::new(),
            mbars: Vec::new(),
            seq: 0,
            complete_at: self.now,
            pending: 0,
        };
        if r.finished() {
            self.n_finished += 1;
            self.finished_at = self.finished_at.min(r.complete_at);
        }
        self.n_resident += 1;
        let held = r.slots.len() as u32;
        if ci == self.ctas.len() {
            self.ctas.push(Some(r));
        } else {
            self.ctas[ci] = Some(r);
        }
        if let Some(p) = &self.probe {
            let e = CtaEvent {
                cycle: self.now,
                cta: ci as u32,
                tag,
                done: false,
                warps: held,
            };
            p.obs.cta(p.unit, &e);
        }
        Ok(ci as u32)
    }

    /// Warp `w` of CTA `cta` arrives at named barrier `b` at `now` (`BAR.SYNC id, n`: it
    /// waits; `BAR.ARV id, n`: it goes on); the barrier completes when `n` threads have
    /// arrived (each warp counts 32), or every unfinished warp with `n` 0.
    pub(super) fn arrive_named(&mut self, cta: usize, w: usize, b: NamedBarrier, now: u64) {
        let Some(cs) = self.ctas[cta].as_mut() else {
            return;
        };
        let id = b.id as usize;
        if cs.named.len() <= id {
            cs.named.resize(id + 1, NamedBar::default());
        }
        let nb = &mut cs.named[id];
        nb.threads += 32;
        nb.warps += 1;
        nb.need = b.threads;
        if !b.arrive {
            self.warps[w].at_barrier = true;
            nb.waiting.push((w as u32, now));
        }
        self.try_release_named(cta, id, b.threads, now);
    }

    /// Completes CTA `cta`'s named barrier `id` (of `threads` threads, 0: the CTA's
    /// unfinished warps) when enough have arrived: its waiting warps issue again from the
    /// next cycle.
    fn try_release_named(&mut self, cta: usize, id: usize, threads: u32, now: u64) {
        let Some(cs) = self.ctas[cta].as_mut() else {
            return;
        };
        let Some(nb) = cs.named.get_mut(id) else {
            return;
        };
        let done = if threads == 0 {
            nb.warps > 0 && nb.warps >= cs.alive
        } else {
            nb.threads >= threads
        };
        if !done {
            return;
        }
        let waiting = std::mem::take(&mut nb.waiting);
        *nb = NamedBar::default();
        for &(w, _) in &waiting {
            let ws = &mut self.warps[w as usize];
            ws.at_barrier = false;
            ws.release_at = now + 1;
            self.touch(w as usize);
        }
        self.stats.barriers += 1;
    }

    /// Releases CTA `cta`'s barrier when every unfinished warp has arrived: they all may
    /// issue again from the next cycle (and a named barrier of the whole CTA, when a warp
    /// that finished was the last it waited for).
    pub(super) fn try_release(&mut self, cta: usize, now: u64) {
        let named = self.ctas[cta].as_ref().map_or(0, |cs| cs.named.len());
        for id in 0..named {
            let whole = self.ctas[cta]
                .as_ref()
                .and_then(|cs| cs.named.get(id))
                .is_some_and(|nb| nb.need == 0 && !nb.waiting.is_empty());
            if whole {
                self.try_release_named(cta, id, 0, now);
            }
        }
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
        if let Some(p) = &self.probe {
            let e = BarrierEvent {
                cta: cta as u32,
                seq,
                arrivals,
                release_cycle: now + 1,
            };
            p.obs.barrier(p.unit, &e);
        }
    }

    pub(super) fn deadlock(&self) -> SmError {
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
            if let Some(p) = &self.probe {
                let e = CtaEvent {
                    cycle: r.complete_at,
                    cta: ci as u32,
                    tag: r.tag,
                    done: true,
                    warps: r.slots.len() as u32,
                };
                p.obs.cta(p.unit, &e);
            }
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
}
