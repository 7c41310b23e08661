//! Counting the sectors of a mask (host speed: a table for the common small masks).

/// Set bits of `m` (sectors of a mask, mostly). Masks below 16 (four sectors, a 128-byte
/// line of 32-byte sectors, as every preset has) by a table of 4-bit counts packed in one
/// word: the portable x86-64 target has no `popcnt` instruction, and `count_ones` there is
/// a dozen instructions, run several times per simulated line (`-C
/// target-feature=+popcnt` is not assumed).
#[inline(always)]
pub(crate) fn popcount(m: u64) -> u64 {
    if m < 16 {
        // Counts of 15 down to 0, a nibble each.
        (0x4332_3221_3221_2110 >> (4 * m)) & 0xF
    } else {
        m.count_ones() as u64
    }
}

#[cfg(test)]
mod tests {
    /// The table of small masks and the fallback count as `count_ones` does.
    #[test]
    fn popcount_is_count_ones() {
        for m in (0..4096u64).chain([u64::MAX, 1 << 63, 0xF0F0, 0x8000_0000_0000_000F]) {
            assert_eq!(super::popcount(m), u64::from(m.count_ones()), "mask {m:#x}");
        }
    }
}
