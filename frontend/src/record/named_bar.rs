//! Named CTA barriers (format version 3): `BAR.SYNC id, n` and `BAR.ARV id, n`, as CUDA's
//! warp-specialized kernels use them (producers arrive at a "full" barrier that consumers
//! wait on, and the reverse for "empty").
//!
//! Barrier `id` of a CTA completes when `threads` threads have arrived (each arriving
//! warp counts 32), or, with `threads == 0`, when every unfinished warp of the CTA has.
//! A `BAR.SYNC` warp waits for completion; a `BAR.ARV` warp counts and goes on. Each call
//! site registers a `tessera_traces::NamedBarrier` entry in the kernel's metadata, so
//! that the timing model runs the same barrier; [`Warp::barrier`] stays the unlisted
//! whole-CTA barrier 0.
//!
//! Functionally, each live CTA has per-id state (threads arrived in the current phase
//! and a phase counter), made on the scheduler's thread when the CTA starts; a warp that
//! must wait blocks (records nothing more) and the scheduler resumes it when the phase
//! moves. A barrier that can never complete is the executor's deadlock error.

use super::exec::{CtaBars, CtaWait, WarpEvent, NAMED_BARRIERS};
use super::spin::{fail, SpinMode};
use super::warp::{Warp, WARP};
use std::panic::Location;
use tessera_traces::NamedBarrier;

impl Warp {
    /// `bar.sync id, threads` (`BAR.SYNC`): the warp arrives at named barrier `id` (0 to
    /// 15) and waits until `threads` threads (a multiple of 32 up to the CTA's threads;
    /// 0 for every unfinished warp of the CTA) have arrived. The warp counts 32 whatever
    /// its active lanes.
    #[track_caller]
    pub fn bar_sync(&mut self, id: u32, threads: u32) {
        self.named_bar(Location::caller(), id, threads, false);
    }

    /// `bar.arrive id, threads` (`BAR.ARV`): the warp arrives at named barrier `id`
    /// without waiting for it (see [`Warp::bar_sync`]).
    #[track_caller]
    pub fn bar_arrive(&mut self, id: u32, threads: u32) {
        self.named_bar(Location::caller(), id, threads, true);
    }

    fn named_bar(&mut self, loc: &'static Location<'static>, id: u32, threads: u32, arrive: bool) {
        let op = if arrive { "BAR.ARV" } else { "BAR.SYNC" };
        if self.spin.mode != SpinMode::Off {
            fail(format!("{op} inside a spin region"));
        }
        let cta_threads = self.threads().div_ceil(WARP as u32) * WARP as u32;
        if id as usize >= NAMED_BARRIERS
            || !threads.is_multiple_of(WARP as u32)
            || threads > cta_threads
        {
            fail(format!(
                "{op} {id}, {threads}: barrier ids are 0 to {} and thread counts a multiple of 32 up to the CTA's {cta_threads} (0 for the whole CTA)",
                NAMED_BARRIERS - 1
            ));
        }
        if self.exited == self.valid {
            return;
        }
        self.emit(loc, 0, op, None, &[], None, &[]);
        self.ensure_room();
        let inline = self.events.is_none();
        let cta = self.cta_linear;
        let st = self.state();
        let pc = st.kernel.pc(loc, 0);
        let entry = NamedBarrier {
            pc,
            id: id as u8,
            threads,
            arrive,
        };
        if let Err(m) = st.kernel.register_named(entry, inline) {
            fail(m);
        }
        let id = id as usize;
        let Some(b) = st.bars.get_mut(&cta) else {
            fail("the CTA has no barrier state".into())
        };
        b.bars[id].0 += WARP as u32;
        let phase = b.bars[id].1;
        if b.complete(id, threads) || arrive {
            return;
        }
        self.block_on_cta(cta, CtaWait::Named(id, phase, threads), |b| {
            b.bars[id].1 != phase
        });
    }

    /// Blocks the warp (it records nothing more) until `passed` holds for CTA `cta`'s
    /// barrier state: the scheduler resumes it when the state `wait` names moves (see
    /// `run_grid`).
    pub(crate) fn block_on_cta(
        &mut self,
        cta: u32,
        wait: CtaWait,
        passed: impl Fn(&CtaBars) -> bool,
    ) {
        loop {
            self.state().named_wait = Some(wait);
            self.switch(WarpEvent::named_wait);
            let Some(b) = self.state().bars.get(&cta) else {
                fail("the CTA has no barrier state".into())
            };
            if passed(b) {
                return;
            }
        }
    }
}
