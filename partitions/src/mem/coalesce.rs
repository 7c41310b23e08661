//! Coalescing: the active lanes' byte ranges `[addr, addr + width)` become the set of
//! sectors of the lines they touch (GPGPU-Sim/Accel-Sim's sm_70+ sectored coalescer: one
//! request per 128 B line, carrying a mask of its 32 B sectors), and the shared-memory bank
//! conflict count.

/// The sectors of one line touched by a warp instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineAccess {
    /// Address of the line's first byte.
    pub line_addr: u64,
    /// Bit `i`: sector `i` of the line is touched.
    pub sectors: u64,
    /// Bit `i`: byte `i` of the line is written by some lane (lines of at most 128 bytes;
    /// always 0 for larger lines). Used to tell full-sector writes from partial ones.
    pub bytes: u128,
}

/// The geometry of a sectored line: `line_bytes` and `sector_bytes`, powers of two (the
/// config checks it; other values are rounded up to one), at most 64 sectors per line
/// (larger counts are treated as 64 larger sectors).
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub line_bytes: u64,
    pub sector_bytes: u64,
    line_shift: u32,
    sector_shift: u32,
}

impl Geometry {
    pub fn new(line_bytes: u32, sector_bytes: u32) -> Geometry {
        let line = (line_bytes as u64).max(1).next_power_of_two();
        let mut sector = (sector_bytes as u64).clamp(1, line).next_power_of_two();
        if line / sector > 64 {
            sector = line / 64;
        }
        Geometry {
            line_bytes: line,
            sector_bytes: sector,
            line_shift: line.trailing_zeros(),
            sector_shift: sector.trailing_zeros(),
        }
    }

    /// Sectors per line.
    pub fn sectors_per_line(&self) -> u32 {
        self.line_bytes.div_ceil(self.sector_bytes).clamp(1, 64) as u32
    }

    /// The mask of all sectors of a line.
    pub fn full_mask(&self) -> u64 {
        let n = self.sectors_per_line();
        if n >= 64 {
            u64::MAX
        } else {
            (1u64 << n) - 1
        }
    }

    /// The sectors of a line that bytes `[off0, off1)` of it touch (`off0 < off1 <=
    /// line_bytes`).
    #[inline]
    pub fn range_sectors(&self, off0: u64, off1: u64) -> u64 {
        let s0 = (off0 >> self.sector_shift).min(63);
        let s1 = ((off1.max(1) - 1) >> self.sector_shift).min(63);
        (u64::MAX >> (63 - s1)) & (u64::MAX << s0)
    }

    /// The sectors fully covered by the byte mask `bytes` (lines of at most 128 bytes).
    pub fn covered_sectors(&self, bytes: u128) -> u64 {
        if self.line_bytes > 128 {
            return 0;
        }
        let per = self.sector_bytes as u32;
        let one: u128 = if per >= 128 {
            u128::MAX
        } else {
            (1u128 << per) - 1
        };
        let mut m = 0u64;
        for s in 0..self.sectors_per_line() {
            let sm = one << (s * per);
            if bytes & sm == sm {
                m |= 1 << s;
            }
        }
        m
    }
}

/// Adds the byte range `[addr, addr + len)` to `out` (lines in first-touch order).
pub fn add_range(g: &Geometry, addr: u64, len: u64, out: &mut Vec<LineAccess>) {
    let len = len.max(1);
    let end = addr.saturating_add(len); // exclusive
    let mut a = addr;
    while a < end {
        let line_addr = (a >> g.line_shift) << g.line_shift;
        let line_end = line_addr.saturating_add(g.line_bytes).min(end);
        let off0 = a - line_addr;
        let off1 = line_end - line_addr; // exclusive, <= line_bytes
        let sectors = g.range_sectors(off0, off1);
        let bytes: u128 = if g.line_bytes <= 128 {
            let n = off1 - off0;
            let ones = if n >= 128 {
                u128::MAX
            } else {
                (1u128 << n) - 1
            };
            ones << off0
        } else {
            0
        };
        match out.iter_mut().rev().find(|l| l.line_addr == line_addr) {
            Some(l) => {
                l.sectors |= sectors;
                l.bytes |= bytes;
            }
            None => out.push(LineAccess {
                line_addr,
                sectors,
                bytes,
            }),
        }
        if line_end == a {
            break; // saturated at the top of the address space
        }
        a = line_end;
    }
}

/// Coalesces the lanes of one warp instruction of `width` bytes per lane.
pub fn coalesce(g: &Geometry, lanes: &[(u32, u64)], width: u32, out: &mut Vec<LineAccess>) {
    out.clear();
    let w = width as u64;
    // The common case, consecutive active lanes reading consecutive elements, is one byte
    // range (the same lines, sectors and bytes as lane by lane, found in one pass).
    if let Some(&(l0, a0)) = lanes.first() {
        let consecutive = lanes
            .iter()
            .enumerate()
            .all(|(i, &(l, a))| l == l0 + i as u32 && a.wrapping_sub(a0) == i as u64 * w.max(1));
        if consecutive && w > 0 {
            if let Some(len) = (lanes.len() as u64).checked_mul(w) {
                if a0.checked_add(len).is_some() {
                    add_range(g, a0, len, out);
                    return;
                }
            }
        }
    }
    for &(_, addr) in lanes {
        add_range(g, addr, w, out);
    }
}

/// Shared-memory passes of one warp instruction: each lane's `width` bytes cover whole
/// `bank_bytes` words; a word lives in bank `word % banks`; lanes reading the same word are
/// served together (broadcast), distinct words of one bank serialize. The answer is the
/// largest number of distinct words any bank must deliver (at least 1).
pub fn shared_passes(lanes: &[(u32, u64)], width: u32, banks: u32, bank_bytes: u32) -> u32 {
    let banks = banks.max(1) as u64;
    let bb = (bank_bytes as u64).max(1);
    let last_byte = (width as u64).max(1) - 1;
    // Conflict-free at a glance (the common case: consecutive or broadcast words): when
    // every word touched lies in a window of at most `banks` words, no bank holds two.
    // Word numbers only grow with the address, so the window is that of the lowest and
    // highest lane address (one min/max pass, no per-lane division or saturation).
    let (mut amin, mut amax) = (u64::MAX, 0u64);
    for &(_, addr) in lanes {
        amin = amin.min(addr);
        amax = amax.max(addr);
    }
    let (lo, hi) = if bb.is_power_of_two() {
        let sh = bb.trailing_zeros();
        (amin >> sh, amax.saturating_add(last_byte) >> sh)
    } else {
        (amin / bb, amax.saturating_add(last_byte) / bb)
    };
    if lanes.is_empty() || hi - lo < banks {
        return 1;
    }
    let mut words: Vec<u64> = Vec::with_capacity(lanes.len() * 4);
    for &(_, addr) in lanes {
        let first = addr / bb;
        let last = addr.saturating_add(last_byte) / bb;
        // A lane covers at most a few words; cap defensively.
        let last = last.min(first.saturating_add(63));
        for w in first..=last {
            words.push(w);
        }
    }
    words.sort_unstable();
    words.dedup();
    let mut per_bank: Vec<u32> = vec![0; banks.min(4096) as usize];
    let n = per_bank.len() as u64;
    for w in words {
        let b = ((w % banks) % n) as usize;
        per_bank[b] += 1;
    }
    per_bank.into_iter().max().unwrap_or(0).max(1)
}
