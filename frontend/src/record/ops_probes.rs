//! Warp operations the calibration probes (`crate::workloads::probes`) need beyond
//! warp.rs: hand-unrolled copies of one source-level operation, each at its own PC, and
//! in-place updates whose destination is their own source register, as nvcc allocates
//! them in unrolled loops.
//!
//! An API call's PC is fixed by its source location, so calling e.g. `ffma_acc` from a
//! Rust `for` loop that unrolls a body records the same PC several times in a row, which
//! no compiled kernel does. The `_n` operations below take a `copy` index (the `sub`
//! index of [`Warp::emit`]): copy `k` of a call site gets its own PC, so an unrolled body
//! is laid out as consecutive distinct instructions.

use super::mem::Elem;
use super::warp::{Float, Val, Warp, WARP};
use std::panic::Location;

impl Warp {
    /// The `copy`-th of several constants materialized at one call site: `MOV`, at its own
    /// PC (and so with its own destination register) per copy.
    #[track_caller]
    pub fn konst_n<T: Elem>(&mut self, x: T, copy: u8) -> Val<T> {
        let reg = self.emit(
            Location::caller(),
            copy,
            "MOV",
            Some(T::BYTES == 8),
            &[],
            None,
            &[],
        );
        Val { v: [x; WARP], reg }
    }

    /// `x = x * a + b` in place, the `copy`-th unrolled copy of the call site:
    /// `FFMA Rx, Rx, Ra, Rb` (`DFMA` for f64). The destination is `x`'s register, so a
    /// chain of these is a chain of true dependencies through one register.
    #[track_caller]
    pub fn ffma_self_n<T: Float>(&mut self, x: &mut Val<T>, a: &Val<T>, b: &Val<T>, copy: u8) {
        let m = self.active();
        for l in 0..WARP {
            if m >> l & 1 == 1 {
                x.v[l] = x.v[l].fma(a.v[l], b.v[l]);
            }
        }
        let loc = Location::caller();
        let st = self.state();
        let pc = st.kernel.pc(loc, copy);
        st.kernel.pin_dst(pc, x.reg, T::BYTES == 8);
        self.emit(
            loc,
            copy,
            T::FMA,
            Some(T::BYTES == 8),
            &[x.reg, a.reg, b.reg],
            None,
            &[],
        );
    }

    /// One step of a pointer chase, `p = *p`, the `copy`-th unrolled copy of the call site:
    /// `LDG.E.64 Rp, [Rp]`: the load writes the register pair its address came from, so
    /// each load's address register is the previous load's destination.
    #[track_caller]
    pub fn ld_chase_n(&mut self, p: &mut Val<u64>, copy: u8) {
        let loc = Location::caller();
        let st = self.state();
        let pc = st.kernel.pc(loc, copy);
        st.kernel.pin_dst(pc, p.reg, true);
        *p = self.ld_at::<u64>(loc, copy, p);
    }

    /// Global store of `x` at `a + off` bytes, an immediate offset on the address
    /// register (`STG.E [Ra.64+off]`), the `copy`-th of several stores at one call site.
    #[track_caller]
    pub fn st_off_n<T: Elem>(&mut self, a: &Val<u64>, off: u64, x: &Val<T>, copy: u8) {
        let shifted = Val {
            v: a.v.map(|v| v.wrapping_add(off)),
            reg: a.reg,
        };
        self.st_at(Location::caller(), copy, &shifted, x)
    }
}
