//! Warp shuffles: a lane reads another lane's register (`__shfl_down_sync`,
//! `__shfl_xor_sync` over the full warp), the steps of a warp reduction.

use super::warp::{Val, Warp, WARP};

impl Warp {
    /// `__shfl_down_sync(~0, a, delta)`: lane `l` gets lane `l + delta`'s value;
    /// `SHFL.DOWN`. A lane whose source is past lane 31 or not active keeps its own.
    #[track_caller]
    pub fn shfl_down(&mut self, a: &Val<u32>, delta: u32) -> Val<u32> {
        let v = self.shuffled(a, |l| l.checked_add(delta as usize));
        self.alu("SHFL.DOWN", false, &[a.reg], v)
    }

    /// `__shfl_xor_sync(~0, a, mask)`: lane `l` gets lane `l ^ mask`'s value (a
    /// butterfly step; after the steps 16, 8, 4, 2, 1 every lane holds the reduction);
    /// `SHFL.BFLY`. A lane whose source is past lane 31 or not active keeps its own.
    #[track_caller]
    pub fn shfl_xor(&mut self, a: &Val<u32>, mask: u32) -> Val<u32> {
        let v = self.shuffled(a, |l| Some(l ^ mask as usize));
        self.alu("SHFL.BFLY", false, &[a.reg], v)
    }

    /// Each active lane's value from lane `src(l)` where that lane is active, else its own.
    fn shuffled(&self, a: &Val<u32>, src: impl Fn(usize) -> Option<usize>) -> [u32; WARP] {
        let m = self.active();
        let mut out = [0u32; WARP];
        for (l, o) in out.iter_mut().enumerate() {
            if m >> l & 1 == 1 {
                *o = match src(l) {
                    Some(s) if s < WARP && m >> s & 1 == 1 => a.v[s],
                    _ => a.v[l],
                };
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::record::{LaunchSpec, Recorder};
    use tessera_traces::{OpClass, TraceFile};

    /// A warp sums its lane indices with `SHFL.DOWN` (lane 0 holds 496) and with
    /// `SHFL.BFLY` (every lane does); each step is one warp-shuffle instruction.
    #[test]
    fn shuffles_reduce_a_warp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let out = rec.alloc::<u32>("out", 64).unwrap();
        let spec = LaunchSpec::new("shfl_test", [1, 1, 1], [32, 1, 1]);
        rec.launch(&spec, &|w| {
            let lane = w.lane_id();
            let mut down = w.mov(&lane);
            let mut bfly = w.mov(&lane);
            for k in [16, 8, 4, 2, 1] {
                let d = w.shfl_down(&down, k);
                w.iadd_acc(&mut down, &d);
                let b = w.shfl_xor(&bfly, k);
                w.iadd_acc(&mut bfly, &b);
            }
            w.store(&out, &lane, &down);
            let hi = w.iadd_imm(&lane, 32);
            w.store(&out, &hi, &bfly);
        })
        .unwrap();
        let got = rec.download(out).unwrap();
        rec.finish().unwrap();
        // SHFL.DOWN: a lane whose source is past lane 31 adds its own value.
        let mut down: Vec<u32> = (0..32).collect();
        for k in [16, 8, 4, 2, 1] {
            let prev = down.clone();
            for (i, x) in down.iter_mut().enumerate() {
                *x += prev.get(i + k).copied().unwrap_or(prev[i]);
            }
        }
        assert_eq!(got[0], 496);
        assert_eq!(&got[..32], &down[..]);
        assert_eq!(&got[32..], &[496u32; 32][..]);
        let t = TraceFile::open(&path).unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.counts.class_warp_insts[OpClass::WarpShuffle as usize], 10);
        let names: Vec<&str> = k.opcodes.iter().map(|o| o.name.as_str()).collect();
        assert!(
            names.contains(&"SHFL.DOWN") && names.contains(&"SHFL.BFLY"),
            "{names:?}"
        );
        tessera_traces::verify(&t).unwrap();
    }
}
