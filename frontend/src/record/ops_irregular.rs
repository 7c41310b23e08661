//! Operations the irregular workloads (grid-stride loops, adjacency walks) need beyond
//! those of `warp.rs`: loop-carried integers that keep their register across iterations,
//! as nvcc allocates an induction variable, and a register copy to start one from a value
//! that stays live.

use super::warp::{Val, Warp, WARP};
use std::panic::Location;
use tessera_traces::schema::RZ;

impl Warp {
    /// `acc += k` in place (a loop's induction variable, `k` a literal or kernel
    /// parameter): `IADD3` whose destination is `acc`'s register, so the loop's condition
    /// and body read the same register every iteration.
    #[track_caller]
    pub fn iadd_imm_acc(&mut self, acc: &mut Val<u32>, k: u32) {
        let m = self.active();
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                acc.v[l] = acc.v[l].wrapping_add(k);
            }
        }
        let loc = Location::caller();
        // A value produced after the whole warp exited lives in RZ: never pin that.
        if acc.reg != RZ {
            let st = self.state();
            let pc = st.kernel.pc(loc, 0);
            st.kernel.pin_dst(pc, acc.reg, false);
        }
        let reg = self.emit(loc, 0, "IADD3", Some(false), &[acc.reg, RZ], None, &[]);
        if reg != RZ {
            acc.reg = reg;
        }
    }

    /// A copy of `a` in a fresh register (`MOV`): the start of an induction variable whose
    /// initial value stays live, `for (j = tid; ...; j += k)`.
    #[track_caller]
    pub fn mov(&mut self, a: &Val<u32>) -> Val<u32> {
        let v = self.map(a, |x| x);
        self.alu("MOV", false, &[a.reg], v)
    }
}
