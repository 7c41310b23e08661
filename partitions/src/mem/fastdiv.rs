//! Division by a divisor fixed by the config, fast (host speed: shifts, masks or a
//! reciprocal instead of a `div` instruction).

/// A divisor fixed by the config: shifts and masks when it is a power of two (line sizes,
/// interleaves, usually slices per channel), a division otherwise. Address mapping runs on
/// every memory request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor {
    pub(crate) d: u64,
    /// `log2(d)` when `d` is a power of two.
    pub(crate) shift: Option<u32>,
    /// Otherwise a multiply-and-shift by a precomputed reciprocal: a 64-bit `div` is tens
    /// of cycles, and A100-sized presets have non-power-of-two channel counts.
    reduced: strength_reduce::StrengthReducedU64,
}

impl Default for Divisor {
    /// Division by 1.
    fn default() -> Self {
        Divisor::new(1)
    }
}

impl Divisor {
    pub(crate) fn new(d: u64) -> Divisor {
        let d = d.max(1);
        Divisor {
            d,
            shift: d.is_power_of_two().then(|| d.trailing_zeros()),
            reduced: strength_reduce::StrengthReducedU64::new(d),
        }
    }

    #[inline]
    pub(crate) fn div(&self, x: u64) -> u64 {
        match self.shift {
            Some(s) => x >> s,
            None => x / self.reduced,
        }
    }

    /// `(x / d, x % d)`, the remainder from the quotient (one reciprocal multiply, not
    /// two).
    #[inline]
    pub(crate) fn div_rem(&self, x: u64) -> (u64, u64) {
        match self.shift {
            Some(s) => (x >> s, x & (self.d - 1)),
            None => {
                let q = x / self.reduced;
                (q, x - q * self.d)
            }
        }
    }

    #[inline]
    pub(crate) fn rem(&self, x: u64) -> u64 {
        match self.shift {
            Some(_) => x & (self.d - 1),
            None => x % self.reduced,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Divisor;

    /// Shifts, masks and the reciprocal give exactly `/` and `%`, including at the top of
    /// the range.
    #[test]
    fn divisor_matches_division() {
        for d in [
            1u64,
            2,
            3,
            5,
            6,
            7,
            10,
            12,
            24,
            40,
            80,
            96,
            1 << 12,
            4095,
            u64::MAX,
        ] {
            let v = Divisor::new(d);
            for x in [
                0u64,
                1,
                d - 1,
                d,
                d.wrapping_add(1),
                12345,
                1 << 40,
                (1 << 40) + 7,
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(v.div(x), x / d, "{x} / {d}");
                assert_eq!(v.rem(x), x % d, "{x} % {d}");
                assert_eq!(v.div_rem(x), (x / d, x % d), "{x} div_rem {d}");
            }
        }
    }
}
