//! mbarrier objects (issue 24): CUDA's split arrive/wait barriers in a CTA's shared memory
//! (`cuda::barrier`, PTX `mbarrier`; [`tessera_traces::MBarrierOp`]). A phase completes
//! when the arrivals its init expects have arrived, and the next phase starts with the
//! same count; a warp that arrives goes on, and a warp that waits for a phase is held (as
//! at a barrier) until that phase has completed. Producer/consumer pipelines use two per
//! stage, "full" and "empty", so that a warp never waits for more than its partner.

use super::issue::{Sm, SmError};
use tessera_traces::{MBarrierKind, MBarrierOp};

/// One mbarrier object of a resident CTA.
#[derive(Clone, Debug, Default)]
pub(super) struct MBarrier {
    /// Arrivals each phase expects (0 before its init).
    expected: u32,
    /// Arrivals still missing in the current phase.
    pending: u32,
    /// Phases completed.
    completed: u32,
    /// Warps waiting, with the phase each waits to complete.
    waiting: Vec<(u32, u32)>,
}

impl Sm {
    /// Warp `w` of CTA `cta` runs mbarrier instruction `op` at `pc` with operand `arg`
    /// (the count, the warp's arrivals summed over its active lanes, or the phase waited
    /// for) at cycle `now`.
    pub(super) fn mbarrier(
        &mut self,
        cta: usize,
        w: usize,
        op: MBarrierOp,
        pc: u32,
        arg: u32,
        now: u64,
    ) {
        let Some(cs) = self.ctas[cta].as_mut() else {
            return;
        };
        let id = op.id as usize;
        if cs.mbars.len() <= id {
            cs.mbars.resize(id + 1, MBarrier::default());
        }
        let mb = &mut cs.mbars[id];
        let fault = match op.kind {
            MBarrierKind::Init if arg == 0 => {
                Some(format!("mbarrier {id} initialized with count 0"))
            }
            MBarrierKind::Init => {
                (mb.expected, mb.pending, mb.completed) = (arg, arg, 0);
                None
            }
            MBarrierKind::Arrive if mb.expected == 0 => {
                Some(format!("mbarrier {id} arrived at before its init"))
            }
            MBarrierKind::Arrive => {
                mb.pending = mb.pending.saturating_sub(arg);
                if mb.pending == 0 {
                    mb.completed += 1;
                    mb.pending = mb.expected;
                    let done = mb.completed;
                    let mut released = Vec::new();
                    mb.waiting.retain(|&(x, phase)| {
                        let go = phase < done;
                        if go {
                            released.push(x);
                        }
                        !go
                    });
                    self.stats.barriers += 1;
                    for x in released {
                        let ws = &mut self.warps[x as usize];
                        ws.at_barrier = false;
                        ws.release_at = now + 1;
                        self.touch(x as usize);
                    }
                }
                None
            }
            MBarrierKind::Wait => {
                if mb.completed <= arg {
                    mb.waiting.push((w as u32, arg));
                    self.warps[w].at_barrier = true;
                }
                None
            }
        };
        if let Some(detail) = fault {
            if self.fault.is_none() {
                let cta_id = self.ctas[cta].as_ref().map_or([0; 3], |c| c.cta.id());
                self.fault = Some(SmError::Spin {
                    cta: cta_id,
                    warp: self.cursors[w].warp_id(),
                    pc,
                    detail,
                });
            }
        }
    }
}
