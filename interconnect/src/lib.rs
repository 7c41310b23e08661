//! # tessera-interconnect
//!
//! Messages that cross partitions, inter-chiplet link models and the intra-chiplet NoC
//! (DESIGN.md sections 3 and 4). Not built yet: the multi-chiplet issue brings the link
//! models; this crate exists so the workspace has the layout of DESIGN.md section 1.

/// Global simulated time: an integer count of picoseconds (DESIGN.md section 3).
pub type Picos = u64;

/// Period in picoseconds of a clock of `hz` hertz, `round(1e12 / hz)`.
pub fn period_ps(hz: u64) -> Picos {
    (1_000_000_000_000u64 + hz / 2) / hz.max(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn period_rounds_to_nearest_picosecond() {
        assert_eq!(super::period_ps(1_000_000_000), 1000);
        // 1801 MHz (the CPCoh study's GPU clock): 555.247 ps -> 555.
        assert_eq!(super::period_ps(1_801_000_000), 555);
        assert_eq!(super::period_ps(1_410_000_000), 709);
    }
}
