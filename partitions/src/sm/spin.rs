//! Spin regions (issue 24, DESIGN.md section 6): a warp repeats a spin loop's recorded
//! body as many times as the values the simulated memory returns require, instead of the
//! number of times the recorder happened to see.
//!
//! A region ([`tessera_traces::SpinRegion`]) is a head, a test, a tail and a back-edge.
//! When a warp issues the region's first instruction its lanes start spinning and the warp
//! cursor keeps the body ([`WarpCursor::loop_begin`]). The head's loads and returning
//! atomics on sync words are its values, in order; the test waits for them (as a fence
//! waits for its warp's memory results: the branch reads the loaded registers), and each
//! spinning lane whose exit condition holds on them (terms over the values and the test's
//! per-lane constants) leaves: it runs the tail (a critical section, a release) and the
//! region is over for it. At the back-edge the lanes still spinning go round again after
//! the back-off (`min(base * 2^i, max)` core cycles), running the body served again from
//! the cursor; when none is left the warp goes on after the back-edge. Under the default
//! `its` policy the lanes that left wait at the back-edge for the others (they reconverge
//! there, as the recorded reconvergence point says); a pre-Volta stack, where that would
//! deadlock a lock held by a waiting lane, is the reconvergence issue's.

use super::issue::SmError;
use super::ldst::{LocalValues, MemIssue, MemPort, MemToken, NO_VALUE};
use super::stats::{LockHold, SpinCounters};
use super::warp::WarpState;
use tessera_traces::{CtaStream, OpClass, RegionKind, SpinRegion, WarpCursor, WarpInst};

/// What an instruction is to the spin regions of its kernel (per static slot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum SpinRole {
    #[default]
    None,
    Start(u16),
    Test(u16),
    End(u16),
}

/// Value instructions a head may read (the trace's limit).
pub(super) const MAX_VALUES: usize = tessera_traces::reader::MAX_EXIT_TERMS;

/// A warp's state in the spin region it is in.
#[derive(Clone, Debug, Default)]
pub(super) struct SpinWarp {
    /// The region, while the warp is in one.
    pub(super) region: Option<u16>,
    /// The lanes still in the region, and those leaving it at the end of this iteration
    /// (known at its test).
    pub(super) spinning: u32,
    pub(super) exiting: u32,
    /// Past this iteration's test (its value instructions are the head's only).
    pub(super) in_tail: bool,
    /// Iterations done in this region.
    pub(super) iter: u32,
    /// The next value instruction's index in this iteration's head, the values read (by
    /// index, by lane), and which have arrived.
    pub(super) next_value: u8,
    pub(super) values: [[u32; 32]; MAX_VALUES],
    pub(super) got: u16,
    /// A digest of the previous iteration's values, and whether this one read the same
    /// (the watchdog's "a full round returned the same values").
    pub(super) last_digest: u64,
    pub(super) same: bool,
    /// With `watchdog.check_lock_holders`: the index of this iteration's first
    /// compare-and-swap among the head's values ([`NO_VALUE`] when none yet) and each
    /// lane's address of it, and the locks the warp's lanes hold (lane, word, since),
    /// kept across regions (a lock taken in one region may be released in another's tail).
    pub(super) cas_value: u8,
    pub(super) cas_addr: [u64; 32],
    pub(super) holds: Vec<(u8, u64, u64)>,
}

impl SpinWarp {
    /// The index of the head's next value instruction (none past [`MAX_VALUES`] or outside
    /// a head).
    pub(super) fn take_value_slot(&mut self) -> Option<u8> {
        if self.region.is_none() || self.in_tail {
            return None;
        }
        let k = self.next_value;
        if (k as usize) < MAX_VALUES {
            self.next_value += 1;
            Some(k)
        } else {
            None
        }
    }

    /// Lanes `mask` of value instruction `k` read `values`.
    pub(super) fn set_values(&mut self, k: u8, mask: u32, values: &[u32; 32]) {
        if let Some(v) = self.values.get_mut(k as usize) {
            let mut m = mask;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                v[l] = values[l];
            }
            self.got |= 1 << k;
        }
    }
}

/// The advance of warp `ws`'s cursor past `inst` (role `role`), issued at cycle `now`, in
/// or at a region, in place of the plain advance: a repeated instruction is counted, the
/// start, test and end act (the test's per-lane constants are its operands). The
/// instructions taken from the trace's stream.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(super) fn advance(
    role: SpinRole,
    regions: &[SpinRegion],
    sw: &mut SpinWarp,
    cur: &mut WarpCursor,
    cta: &CtaStream,
    ws: &mut WarpState,
    inst: &WarpInst,
    now: u64,
    st: &mut SpinCounters,
    check: bool,
) -> Result<usize, SmError> {
    if !cur.fresh() {
        st.replayed_by_class[inst.class as usize] += 1;
    }
    let warp_id = cur.warp_id();
    let fault = |what: String| SmError::Spin {
        cta: cta.id(),
        warp: warp_id,
        pc: inst.pc,
        detail: what,
    };
    let advance = |cur: &mut WarpCursor| -> Result<usize, SmError> {
        let fresh = cur.fresh();
        cur.advance(cta).map_err(|e| fault(e.0.to_string()))?;
        Ok(fresh as usize)
    };
    match role {
        // Inside a region's body, or at its start (entered before the issue, `enter`).
        SpinRole::None | SpinRole::Start(_) => advance(cur),
        SpinRole::Test(r) => {
            let Some(reg) = regions.get(r as usize).filter(|_| sw.region == Some(r)) else {
                return Err(fault(format!(
                    "the exit test of region {r} runs outside its region"
                )));
            };
            let per = reg.test_operands();
            let consts = cur.operands(per as u8).unwrap_or(&[]);
            // The lanes in the region are the test's (the head may be one leader lane's).
            sw.spinning &= inst.mask;
            let mut holds_mask = 0u32;
            let mut delta = [0i64; 32];
            let mut m = sw.spinning;
            let mut k = 0usize;
            let mut digest = 0xcbf2_9ce4_8422_2325u64;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let mut all = true;
                let mut any = false;
                for (t, term) in reg.terms.iter().enumerate() {
                    let v = term.value as usize;
                    if sw.got >> v & 1 == 0 {
                        return Err(fault(format!(
                            "region {r}: its exit reads value {v}, which the head did not \
                             read from a sync word (only strong loads and atomics on declared \
                             sync words have values)"
                        )));
                    }
                    let value = sw.values[v][term.source_lane(l)];
                    digest = (digest ^ value as u64).wrapping_mul(0x0100_0000_01b3);
                    let Some(&c) = consts.get(k * per + t) else {
                        return Err(fault(format!(
                            "region {r}: its test records no constant for lane {l}, term {t}"
                        )));
                    };
                    let holds = term.cmp.holds(value, c as u32);
                    all &= holds;
                    any |= holds;
                    if t == 0 && !reg.rebased.is_empty() {
                        let Some(&tmpl) = consts.get(k * per + reg.terms.len()) else {
                            return Err(fault(format!(
                                "region {r}: its test records no template value for lane {l}"
                            )));
                        };
                        delta[l] = i64::from(value) - i64::from(tmpl as u32);
                    }
                }
                if if reg.all { all } else { any } {
                    holds_mask |= 1 << l;
                }
                k += 1;
            }
            sw.same = sw.iter > 0 && digest == sw.last_digest;
            sw.last_digest = digest;
            sw.in_tail = true;
            if check && reg.kind == RegionKind::Spin && sw.cas_value == reg.terms[0].value {
                let mut m = holds_mask;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    sw.holds.push((l as u8, sw.cas_addr[l], now));
                }
            }
            let entered = sw.spinning;
            // Which lanes run the tail, and which leave the region at its end.
            let (tail, leaving) = match reg.kind {
                RegionKind::Spin => {
                    st.exits += holds_mask.count_ones() as u64;
                    (holds_mask, holds_mask)
                }
                RegionKind::Branch => {
                    st.branch_taken += holds_mask.count_ones() as u64;
                    st.branch_passed += (entered & !holds_mask).count_ones() as u64;
                    (holds_mask, sw.spinning)
                }
                RegionKind::Queue => {
                    let stay = entered & !holds_mask;
                    st.queue_items += stay.count_ones() as u64;
                    st.queue_exits += holds_mask.count_ones() as u64;
                    (stay, holds_mask)
                }
            };
            sw.exiting = leaving;
            let mut consumed = advance(cur)?;
            if tail != 0 {
                if !reg.rebased.is_empty() {
                    cur.set_rebase(&reg.rebased, &delta);
                }
                cur.set_filter(tail);
            } else {
                // Nobody runs the tail: it is passed over (the branch jumps to the end),
                // read straight from the stream when the region never goes round.
                if !reg.kind.loops() {
                    cur.loop_end();
                }
                while let Some(next) = cur.peek() {
                    if next.pc == reg.end_pc {
                        break;
                    }
                    let class = next.class as usize;
                    let fresh = advance(cur)?;
                    consumed += fresh;
                    if fresh == 1 {
                        st.skipped_by_class[class] += 1;
                    }
                }
                if cur.peek().is_none() {
                    return Err(fault(format!(
                        "region {r}: the warp's stream ends before the region's end"
                    )));
                }
                cur.set_filter(sw.spinning);
            }
            Ok(consumed)
        }
        SpinRole::End(r) => {
            let Some(reg) = regions.get(r as usize).filter(|_| sw.region == Some(r)) else {
                return Err(fault(format!(
                    "the back-edge of spin region {r} runs outside its region"
                )));
            };
            sw.spinning &= !sw.exiting;
            sw.exiting = 0;
            sw.in_tail = false;
            sw.iter += 1;
            match reg.kind {
                RegionKind::Spin => st.iterations += 1,
                RegionKind::Queue => st.queue_rounds += 1,
                RegionKind::Branch => sw.spinning = 0,
            }
            if sw.spinning != 0 {
                let shift = (sw.iter - 1).min(31);
                let backoff = (reg.backoff_base as u64)
                    .saturating_mul(1 << shift)
                    .min(reg.backoff_max as u64);
                ws.release_at = ws.release_at.max(now + 1 + backoff);
                sw.next_value = 0;
                sw.got = 0;
                sw.cas_value = NO_VALUE;
                cur.loop_back(sw.spinning);
                return Ok(0);
            }
            sw.region = None;
            cur.loop_end();
            advance(cur)
        }
    }
}

/// Sync instruction `inst` of warp state `sw` issues at `now` as token `token`
/// ([`MemPort::access_sync`]): `None` when it accesses no sync word (it is then a plain
/// access), else the port's answer and, for a load or returning atomic in a spin head, its
/// index among the head's values. Out of line: only sync candidates come here.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(super) fn access_sync(
    mem: &mut impl MemPort,
    sw: Option<&mut SpinWarp>,
    cur: &WarpCursor,
    inst: &WarpInst,
    operands: u8,
    now: u64,
    token: u32,
    holds: Option<[u32; 3]>,
    st: &mut SpinCounters,
) -> Option<(Result<MemIssue, String>, u8)> {
    let mut local = LocalValues::default();
    let r = mem.access_sync(
        now,
        cur.lane_source(),
        inst,
        cur.operands(operands),
        MemToken(token),
        &mut local,
    )?;
    st.l1_sync_hits += local.mask.count_ones() as u64;
    let returns = !matches!(
        inst.class,
        OpClass::StoreGlobal | OpClass::StoreGeneric | OpClass::Reduction
    );
    let Some(sw) = sw else {
        return Some((r, NO_VALUE));
    };
    let value = if returns {
        sw.take_value_slot().unwrap_or(NO_VALUE)
    } else {
        NO_VALUE
    };
    if value != NO_VALUE && local.mask != 0 {
        sw.set_values(value, local.mask, &local.values);
    }
    if let Some(cta) = holds {
        let log = &mut st.holds;
        // Two operands: a compare-and-swap.
        let cas = operands == 2;
        if cas && value != NO_VALUE && sw.cas_value == NO_VALUE {
            sw.cas_value = value;
            let addrs = &mut sw.cas_addr;
            cur.lane_source()
                .for_each_lane_addr(inst, |l, a| addrs[l as usize] = a);
        } else if !cas && !matches!(inst.class, OpClass::LoadGlobal | OpClass::LoadGeneric) {
            // A write of a held word by its holder: the release.
            let warp = cur.warp_id();
            let held = &mut sw.holds;
            cur.lane_source().for_each_lane_addr(inst, |l, a| {
                if let Some(i) = held.iter().position(|&(x, w, _)| x as u32 == l && w == a) {
                    let (_, addr, from) = held.swap_remove(i);
                    log.push(LockHold {
                        addr,
                        from,
                        to: now,
                        cta,
                        warp,
                        lane: l as u8,
                    });
                }
            });
        }
    }
    Some((r, value))
}

/// Warp `sw` issues region `r`'s first instruction: unless it is repeating the region
/// already, its lanes start spinning and the cursor keeps the body from here (`once`: a
/// branch, whose body is served once and not kept).
#[cold]
#[inline(never)]
pub(super) fn enter(sw: &mut SpinWarp, cur: &mut WarpCursor, r: u16, once: bool) {
    if sw.region == Some(r) {
        return;
    }
    let holds = std::mem::take(&mut sw.holds);
    *sw = SpinWarp {
        region: Some(r),
        // Narrowed to the lanes of its test, which are the region's.
        spinning: u32::MAX,
        cas_value: NO_VALUE,
        holds,
        ..SpinWarp::default()
    };
    cur.loop_begin(once);
}

impl super::issue::Sm {
    /// The watchdog's view of this SM (`crate::watchdog`): its progress events (warp
    /// instructions taken from the trace, lanes that left spin regions), its spin rounds,
    /// its unfinished warps and those of them that wait at a barrier or spin on values
    /// that did not change in their last round. CTAs are counted by the GPU.
    pub fn watchdog_sample(&self) -> crate::watchdog::WatchdogSample {
        let st = self.stats();
        let (mut live, mut stuck) = (0u64, 0u64);
        for (i, &used) in self.used.iter().enumerate() {
            let w = &self.warps[i];
            if !used || w.done {
                continue;
            }
            live += 1;
            let spinning = self
                .spins
                .get(i)
                .is_some_and(|s| s.region.is_some() && s.same);
            stuck += u64::from(w.at_barrier || spinning);
        }
        crate::watchdog::WatchdogSample {
            progress: st.warp_insts.wrapping_sub(st.spin.replayed()) + st.spin.progress(),
            spin_rounds: st.spin.iterations,
            live_warps: live,
            stuck_warps: stuck,
        }
    }

    /// Its unfinished warps, for the watchdog's report (`sm`: its index in the system,
    /// `kernel`: the kernel it runs).
    pub fn waiting_warps(&self, sm: u32, kernel: u32) -> Vec<crate::watchdog::WaitingWarp> {
        let mut out = Vec::new();
        for (i, &used) in self.used.iter().enumerate() {
            let w = &self.warps[i];
            if !used || w.done {
                continue;
            }
            let Some(rc) = self.ctas.get(w.cta as usize).and_then(|c| c.as_ref()) else {
                continue;
            };
            let cur = &self.cursors[i];
            let sw = self.spins.get(i).filter(|s| s.region.is_some());
            let spin = sw.and_then(|s| {
                let r = s.region?;
                let reg = self.prep.as_ref()?.regions.get(r as usize)?;
                let lane = s.spinning.trailing_zeros().min(31) as usize;
                let n = reg
                    .terms
                    .iter()
                    .map(|t| t.value as usize + 1)
                    .max()
                    .unwrap_or(0);
                Some(crate::watchdog::SpinWait {
                    region_pc: reg.start_pc,
                    label: reg.label.clone(),
                    lane_mask: s.spinning,
                    rounds: s.iter,
                    values: (0..n.min(MAX_VALUES))
                        .map(|v| s.values[v][lane] as u64)
                        .collect(),
                })
            });
            out.push(crate::watchdog::WaitingWarp {
                sm,
                kernel,
                cta: rc.cta.id(),
                warp: cur.warp_id(),
                pc: cur.peek().map_or(0, |x| x.pc),
                state: if w.at_barrier {
                    "barrier"
                } else if spin.is_some() {
                    "spin"
                } else {
                    "ready"
                }
                .into(),
                spin,
            });
        }
        out
    }
}
