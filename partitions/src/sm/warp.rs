//! One warp's state ([`WarpState`]): where it is in its instruction stream, whether it
//! waits at a barrier, and the cached times its scheduler reads.

use super::scoreboard::NEVER;
use tessera_traces::OpClass;

/// One warp's state (plain data; its scoreboard lives in `Sm::reg_ready`).
#[derive(Clone)]
pub(super) struct WarpState {
    /// Index of its CTA in `Sm::ctas`.
    pub(super) cta: u32,
    pub(super) sched: u32,
    /// Its index in its scheduler's `entries`.
    pub(super) pos: u32,
    /// Its instruction count, and the index of its next instruction (the one at its
    /// cursor, `Sm::cursors`).
    pub(super) end: usize,
    pub(super) next: usize,
    pub(super) done: bool,
    pub(super) at_barrier: bool,
    /// First cycle it may issue after a barrier release.
    pub(super) release_at: u64,
    /// Cache of the next instruction: the latest `reg_ready` of the registers it waits
    /// on ([`NEVER`] while one waits for a memory reply), and its class (valid while not
    /// done; refreshed whenever `next` moves or a reply arrives, the only times either
    /// can change, since only the warp's own issues write its registers).
    pub(super) reg_at: u64,
    pub(super) class: OpClass,
    /// Like `reg_at`, over the registers whose pending write is long-latency
    /// ([`super::scoreboard::is_long`]) only: the cycle until which `two_level` counts
    /// the warp as waiting on memory (0 under the other policies, which do not read it).
    pub(super) long_at: u64,
    /// Cycle from which its next instruction is fetched (0 without the I-cache).
    pub(super) fetch_at: u64,
    /// Index in the I-cache of the line of its last fetch (a hint: see `Icache::fetch`).
    pub(super) line_hint: u32,
    /// Its memory instructions whose result is still to come (a reply), and the latest
    /// cycle at which one of its memory instructions' results is written: a memory fence
    /// (`OpClass::Fence`, `MEMBAR`) waits for both (GPGPU-Sim: a warp at a `membar` waits
    /// until its outstanding memory requests are done).
    pub(super) mem_pending: u32,
    pub(super) mem_done_at: u64,
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
    pub(super) fn e1(&self) -> u64 {
        if self.done || self.at_barrier {
            NEVER
        } else {
            self.release_at
        }
    }

    /// The cycle from which only its unit can hold it (barrier released, registers
    /// written); `NEVER` as [`WarpState::e1`] or while a register awaits a reply.
    #[inline]
    pub(super) fn e2(&self) -> u64 {
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
    pub(super) fn unblock(&self) -> u64 {
        if self.done || self.at_barrier {
            NEVER
        } else {
            self.release_at.max(self.long_at)
        }
    }
}
