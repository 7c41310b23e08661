//! Control flow of synchronization code under independent thread scheduling (Volta and
//! later) that [`Warp::while_`] cannot record: a loop whose lanes, once they leave it, go
//! on to the code after it while the warp's other lanes still loop (a lock acquired by
//! one lane of a warp and released by that lane while the others spin on it,
//! eltantawy-2018-inter-thread-synchronization-simt.txt Fig 1.1).

use super::warp::Warp;
use std::panic::Location;

impl Warp {
    /// `while (cond) { body } after` as an ITS GPU runs it: in each iteration the lanes
    /// whose condition turned false leave and run `after` (the code after the loop up to
    /// the point where the warp reconverges) at once, under their own mask, before the
    /// lanes that stay run `body` and go round again. [`Warp::while_`] keeps the leaving
    /// lanes waiting until the loop ends, the SIMT stack's order, which never finishes
    /// when they hold what the others wait for. Records `BSSY`, then per iteration the
    /// condition's instructions, the exit `BRA` (under the lanes that leave), `after`
    /// under those lanes and `body` under the others; then `BSYNC` under the entry mask.
    /// `after` runs once per lane; its instructions keep their own PCs (those of its
    /// source), so the stream is the two paths of the loop interleaved, iteration by
    /// iteration.
    #[track_caller]
    pub fn while_its(
        &mut self,
        mut cond: impl FnMut(&mut Self) -> super::Pred,
        mut body: impl FnMut(&mut Self),
        mut after: impl FnMut(&mut Self),
    ) {
        let loc = Location::caller();
        let saved = self.mask;
        self.emit(loc, 0, "BSSY", None, &[], None, &[]);
        loop {
            let p = cond(self);
            let m = self.mask;
            let leaving = self.active() & !p.0;
            self.mask = leaving;
            self.emit(loc, 1, "BRA", None, &[], None, &[]);
            if self.active() != 0 {
                after(self);
            }
            self.mask = m & p.0;
            if self.active() == 0 {
                break;
            }
            body(self);
        }
        self.mask = saved;
        self.emit(loc, 2, "BSYNC", None, &[], None, &[]);
    }
}
