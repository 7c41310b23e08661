//! Floating-point operations with a kernel-parameter operand, for linear-algebra and
//! streaming workloads (`b[i] = scalar * c[i]`, `a[i] = b[i] + scalar * c[i]`).
//!
//! nvcc reads a scalar kernel parameter straight from the constant bank as an operand
//! (`DMUL R4, R2, c[0x0][0x180]`, `DFMA R6, R2, c[0x0][0x180], R4`): no `MOV` puts it in a
//! register first, and the tracer, which records register operands only, sees one source
//! register fewer than for the all-register form.

use super::warp::{Float, Val, Warp};

impl Warp {
    /// `a * k` with `k` a kernel parameter: `FMUL` / `DMUL` with a constant-bank operand.
    #[track_caller]
    pub fn fmul_param<T: Float>(&mut self, a: &Val<T>, k: T) -> Val<T> {
        let v = self.map(a, |x| x.mul(k));
        self.alu(T::MUL, T::BYTES == 8, &[a.reg], v)
    }

    /// `a * k + c`, fused, with `k` a kernel parameter: `FFMA` / `DFMA` with a
    /// constant-bank multiplier.
    #[track_caller]
    pub fn ffma_param<T: Float>(&mut self, a: &Val<T>, k: T, c: &Val<T>) -> Val<T> {
        let v = self.zip(a, c, |x, y| x.fma(k, y));
        self.alu(T::FMA, T::BYTES == 8, &[a.reg, c.reg], v)
    }
}

#[cfg(test)]
mod tests {
    use crate::record::{LaunchSpec, Recorder};
    use tessera_traces::{OpClass, TraceFile};

    /// Both ops compute on the active lanes only and record one FP64 instruction each.
    #[test]
    fn param_ops_compute_and_record() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("p.tst");
        let mut r = Recorder::create(&path, 80, "test").unwrap();
        let out = r.alloc::<f64>("out", 64).unwrap();
        let mut spec = LaunchSpec::new("k", [1, 1, 1], [64, 1, 1]);
        spec.blocking = false;
        r.launch(&spec, &|w| {
            let t = w.tid(0);
            let x = w.u2f::<f64>(&t);
            let y = w.fmul_param(&x, 0.5);
            let z = w.ffma_param(&y, 4.0, &x);
            w.store(&out, &t, &z);
        })
        .unwrap();
        let got = r.download(out).unwrap();
        let want: Vec<f64> = (0..64).map(|i| 3.0 * i as f64).collect();
        assert_eq!(got, want);
        r.finish().unwrap();
        let t = TraceFile::open(&path).unwrap();
        // Per warp: DMUL, DFMA.
        assert_eq!(
            t.kernels()[0].counts.class_warp_insts[OpClass::Fp64 as usize],
            4
        );
    }
}
