//! The SM's port to its LD/ST unit ([`MemPort`]): where memory-class instructions go.
//!
//! The port either knows when an instruction's destination registers are written
//! ([`MemIssue::Done`]) or answers later ([`MemIssue::Pending`], then [`Sm::mem_reply`]
//! with the instruction's [`MemToken`]; meanwhile its destinations are not ready at any
//! cycle and its CTA cannot complete). Inside the GPU ([`crate::gpu`]) it is the memory
//! system: the LD/ST unit, shared memory, L1D and everything beyond are in [`crate::mem`].

use super::issue::Sm;

/// Values of sync words a memory port answers at once ([`MemPort::access_sync`]): lane `l`
/// of `mask` got `values[l]`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalValues {
    pub mask: u32,
    pub values: [u32; 32],
}
use super::scoreboard::NEVER;
use tessera_traces::{LaneAddrSource, OpClass, WarpInst};

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
    /// [`super::SmParams`] (for a test driver without a memory system; the GPU ignores it).
    fn access(
        &mut self,
        cycle: u64,
        addrs: LaneAddrSource<'_>,
        inst: &WarpInst,
        token: MemToken,
        placeholder_latency: u32,
    ) -> MemIssue;

    /// A global atomic, or a load or strong store (issue 24) with its per-lane `operands`
    /// (an atomic's, in lane order; a store's value): when its lanes access declared sync
    /// words it is performed at their home with its values, which come back through
    /// [`Sm::sync_values`] before its [`Sm::mem_reply`]; `None` when it accesses none
    /// (the SM then calls [`MemPort::access`]), an error when it cannot be sent. The lanes
    /// of a weak load that the SM's L1 answers from its copy of their words get their
    /// values in `local` at once.
    fn access_sync(
        &mut self,
        _cycle: u64,
        _addrs: LaneAddrSource<'_>,
        _inst: &WarpInst,
        _operands: Option<&[u64]>,
        _token: MemToken,
        _local: &mut LocalValues,
    ) -> Option<Result<MemIssue, String>> {
        None
    }

    /// Whether it takes memory instructions now; after an [`MemPort::access`] that makes it
    /// refuse, the SM issues none until [`Sm::unblock_memory`].
    fn accepting(&self) -> bool {
        true
    }
}

/// One entry of the table of in-flight memory instructions (index = [`MemToken`]).
#[derive(Clone, Copy)]
pub(super) struct InFlight {
    pub(super) warp: u32,
    /// Static slot of the instruction (its destination registers).
    pub(super) slot: u32,
    /// Operand-collection delay of the instruction, added to the reply's cycle.
    pub(super) delay: u64,
    pub(super) live: bool,
    /// Its index among the values of its warp's spin-region head ([`NO_VALUE`]: none).
    pub(super) value: u8,
}

/// [`InFlight::value`] of an instruction that is no spin head's value.
pub(super) const NO_VALUE: u8 = u8::MAX;

impl Sm {
    /// The LD/ST unit takes no memory instruction from now on: every scheduler's memory
    /// classes wait, until [`Sm::unblock_memory`].
    pub(super) fn block_memory(&mut self) {
        self.mem_blocked = true;
        for sc in &mut self.scheds {
            for c in OpClass::ALL.iter().filter(|c| c.is_memory()) {
                sc.unit_free[*c as usize] = NEVER;
            }
            sc.rescan();
        }
    }

    /// The LD/ST unit takes memory instructions again from `cycle` on (at least
    /// [`Sm::now`]; the caller advances the SM there first).
    pub fn unblock_memory(&mut self, cycle: u64) {
        if !self.mem_blocked {
            return;
        }
        self.mem_blocked = false;
        let cycle = cycle.max(self.now);
        for sc in &mut self.scheds {
            for c in OpClass::ALL.iter().filter(|c| c.is_memory()) {
                sc.unit_free[*c as usize] = cycle;
            }
            sc.rescan();
        }
    }

    /// Whether the LD/ST unit takes no memory instruction now.
    pub fn memory_blocked(&self) -> bool {
        self.mem_blocked
    }

    /// The values sync instruction `token` read for lanes `mask` (`values[lane]`), before
    /// its [`Sm::mem_reply`]: a spin head's values are kept for its exit test.
    pub fn sync_values(&mut self, token: MemToken, mask: u32, values: &[u32; 32]) {
        let Some(f) = self.inflight.get(token.0 as usize).filter(|f| f.live) else {
            return;
        };
        if f.value == NO_VALUE {
            return;
        }
        if let Some(sw) = self.spins.get_mut(f.warp as usize) {
            sw.set_values(f.value, mask, values);
        }
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
}
