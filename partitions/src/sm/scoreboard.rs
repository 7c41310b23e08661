//! The scoreboard: per warp slot, the cycle from which each register has no pending write
//! (the table is `Sm::reg_ready`, sized per kernel by [`super::KernelPrep`]).
//!
//! A warp is ready when its next instruction's source and destination registers
//! (`StaticInst::src_regs`, `dst_regs`; RZ never blocks) have no pending write and the
//! scheduler's unit of the instruction's class accepts it; on issue its destinations are
//! pending until `issue + latency_cycles` (a memory result: until the LD/ST port says).
//!
//! **Memory fences** (`OpClass::Fence`, `MEMBAR`): a warp's fence issues only when every
//! memory instruction it issued before has its result written (its pending replies
//! included), as GPGPU-Sim's warp waits at a `membar` for its outstanding requests;
//! waiting counts as `stall_scoreboard`. A store counts as done when its write
//! acknowledgements are in (`l2.write_acks`; without them, when its data has left the SM).

use super::decode::SlotRegs;
use super::warp::WarpState;
use tessera_traces::OpClass;

/// A register whose write is a pending memory reply: not ready at any cycle (also the
/// time of anything that waits for a reply or a barrier release).
pub(super) const NEVER: u64 = u64::MAX;

/// Whether a result of `class` is a long-latency one for `two_level` (GPGPU-Sim's
/// `longopregs`: results of global, local, constant and texture memory; shared memory's
/// are short).
pub(super) fn is_long(class: OpClass) -> bool {
    class.is_memory()
        && !matches!(
            class,
            OpClass::LoadShared | OpClass::StoreShared | OpClass::AtomicShared
        )
}

/// Sets warp `ws`'s cache of its next instruction, of class `class`, which waits on the
/// registers `wait`, from its scoreboard `board` (and `long`, whether each register's
/// pending write is long-latency: `two_level` only, empty otherwise).
#[inline(always)]
pub(super) fn refresh_warp(
    ws: &mut WarpState,
    board: &[u64],
    long: &[bool],
    slot: &SlotRegs,
    class: OpClass,
) {
    let wait = &slot.wait;
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
    // A fence's slot says so (as does a spin region's exit test).
    if slot.fence {
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
