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

    /// The index of the line holding `addr` (`addr / line_bytes`, by a shift: this runs
    /// several times per access).
    #[inline]
    pub fn line_index(&self, addr: u64) -> u64 {
        addr >> self.line_shift
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

/// The active lanes' addresses of one warp instruction, in lane order, in the trace's
/// compressed forms: read where they lie instead of copied into a per-lane vector first.
#[derive(Clone, Copy, Debug)]
pub enum LaneAddrs<'a> {
    /// The k-th of `n` active lanes at `base + k * stride` (wrapping).
    Stride { base: u64, stride: i64, n: u32 },
    /// One address per active lane.
    List(&'a [u64]),
}

/// The addresses of [`LaneAddrs::Stride`].
#[derive(Clone, Debug)]
struct StrideIter {
    a: u64,
    step: u64,
    left: u32,
}

impl Iterator for StrideIter {
    type Item = u64;
    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let a = self.a;
        self.a = a.wrapping_add(self.step);
        Some(a)
    }
}

impl LaneAddrs<'_> {
    /// Number of active lanes.
    #[inline]
    pub fn len(&self) -> usize {
        match *self {
            LaneAddrs::Stride { n, .. } => n as usize,
            LaneAddrs::List(l) => l.len(),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The lowest and highest address (`None` without lanes).
    #[inline]
    fn min_max(&self) -> Option<(u64, u64)> {
        match *self {
            LaneAddrs::Stride { base, stride, n } => {
                if n == 0 {
                    return None;
                }
                // Without wrap-around the ends are the first and the last lane's address.
                let last = base as i128 + (n as i128 - 1) * stride as i128;
                match u64::try_from(last) {
                    Ok(last) => Some((base.min(last), base.max(last))),
                    Err(_) => min_max(self.stride_iter()),
                }
            }
            LaneAddrs::List(l) => min_max(l.iter().copied()),
        }
    }

    #[inline]
    fn stride_iter(&self) -> StrideIter {
        match *self {
            LaneAddrs::Stride { base, stride, n } => StrideIter {
                a: base,
                step: stride as u64,
                left: n,
            },
            LaneAddrs::List(_) => StrideIter {
                a: 0,
                step: 0,
                left: 0,
            },
        }
    }
}

#[inline]
fn min_max(addrs: impl Iterator<Item = u64>) -> Option<(u64, u64)> {
    let mut any = false;
    let (mut amin, mut amax) = (u64::MAX, 0u64);
    for a in addrs {
        any = true;
        amin = amin.min(a);
        amax = amax.max(a);
    }
    any.then_some((amin, amax))
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

/// [`coalesce`] of lanes given by their addresses alone. Lane numbers never change the
/// result: lanes at consecutive elements, numbered consecutively or not, touch the same
/// lines, sectors and bytes (in the same order) as their union range.
///
/// Inlined for its most common case, the trace's contiguous form (stride mode at stride ==
/// width), taken as given (as `MemRequest::contiguous`): one range of `n * width` bytes,
/// none for width 0.
#[inline]
pub fn coalesce_addrs(g: &Geometry, lanes: LaneAddrs<'_>, width: u32, out: &mut Vec<LineAccess>) {
    out.clear();
    let w = width as u64;
    match lanes {
        LaneAddrs::Stride { base, stride, n } if stride == w as i64 => {
            if w > 0 && n > 0 {
                add_range(g, base, n as u64 * w, out);
            }
        }
        _ => coalesce_other(g, lanes, w, out),
    }
}

/// [`coalesce_addrs`] but for the contiguous form.
fn coalesce_other(g: &Geometry, lanes: LaneAddrs<'_>, w: u64, out: &mut Vec<LineAccess>) {
    match lanes {
        LaneAddrs::Stride { base, stride, n } => {
            if n == 0 {
                return;
            }
            if stride == 0 {
                // Every lane on the same bytes: lane by lane merges into the first.
                add_range(g, base, w, out);
                return;
            }
            for a in lanes.stride_iter() {
                add_range(g, a, w, out);
            }
        }
        LaneAddrs::List(l) => {
            // Runs of lanes on adjacent elements (or on the previous lane's element) are one
            // range each: lane by lane would merge into the same lines, sectors and bytes,
            // first touched in the same order, and a repeated range changes nothing.
            let step = w.max(1);
            let Some((&a0, rest)) = l.split_first() else {
                return;
            };
            let (mut start, mut prev) = (a0, a0);
            for &a in rest {
                if a == prev {
                    continue;
                }
                if prev.checked_add(step) != Some(a) {
                    add_range(g, start, (prev - start).saturating_add(step), out);
                    start = a;
                }
                prev = a;
            }
            add_range(g, start, (prev - start).saturating_add(step), out);
        }
    }
}

/// Shared-memory passes of one warp instruction: each lane's `width` bytes cover whole
/// `bank_bytes` words; a word lives in bank `word % banks`; lanes reading the same word are
/// served together (broadcast), distinct words of one bank serialize. The answer is the
/// largest number of distinct words any bank must deliver (at least 1).
pub fn shared_passes(lanes: &[(u32, u64)], width: u32, banks: u32, bank_bytes: u32) -> u32 {
    let addrs = lanes.iter().map(|&(_, a)| a);
    passes_of(min_max(addrs.clone()), addrs, width, banks, bank_bytes)
}

/// [`shared_passes`] of lanes given by their addresses alone (stride mode: the window from
/// the two end lanes, no pass over the lanes).
pub fn shared_passes_addrs(lanes: LaneAddrs<'_>, width: u32, banks: u32, bank_bytes: u32) -> u32 {
    match lanes {
        LaneAddrs::Stride { .. } => passes_of(
            lanes.min_max(),
            lanes.stride_iter(),
            width,
            banks,
            bank_bytes,
        ),
        LaneAddrs::List(l) => {
            // The AND of the addresses is at most the lowest, their OR at least the highest:
            // a window of both that fits settles the common case with a pass that
            // vectorizes (no compare per lane). Else the exact window, then the count.
            let (and, or) = l.iter().fold((u64::MAX, 0u64), |(x, y), &a| (x & a, y | a));
            if !l.is_empty() && one_window(and, or, width, banks, bank_bytes) {
                return 1;
            }
            passes_of(
                min_max(l.iter().copied()),
                l.iter().copied(),
                width,
                banks,
                bank_bytes,
            )
        }
    }
}

/// Whether every word of lanes whose addresses lie in `[amin, amax]` falls in a window of
/// at most `banks` words (then no bank holds two: one pass). Word numbers only grow with
/// the address, so the window is that of the lowest address and the highest's last byte.
#[inline]
fn one_window(amin: u64, amax: u64, width: u32, banks: u32, bank_bytes: u32) -> bool {
    let banks = banks.max(1) as u64;
    let bb = (bank_bytes as u64).max(1);
    let last_byte = (width as u64).max(1) - 1;
    let (lo, hi) = if bb.is_power_of_two() {
        let sh = bb.trailing_zeros();
        (amin >> sh, amax.saturating_add(last_byte) >> sh)
    } else {
        (amin / bb, amax.saturating_add(last_byte) / bb)
    };
    hi - lo < banks
}

/// [`shared_passes`] of `addrs`, whose lowest and highest are `window` (`None`: no lane).
#[inline]
fn passes_of(
    window: Option<(u64, u64)>,
    addrs: impl Iterator<Item = u64>,
    width: u32,
    banks: u32,
    bank_bytes: u32,
) -> u32 {
    // Conflict-free at a glance (the common case: consecutive or broadcast words).
    let Some((amin, amax)) = window else {
        return 1;
    };
    if one_window(amin, amax, width, banks, bank_bytes) {
        return 1;
    }
    let banks = banks.max(1) as u64;
    let bb = (bank_bytes as u64).max(1);
    let last_byte = (width as u64).max(1) - 1;
    conflict_passes(addrs, last_byte, banks, bb)
}

/// The passes of lanes whose words do not all fit in one window of `banks` words.
#[inline(never)]
fn conflict_passes(addrs: impl Iterator<Item = u64>, last_byte: u64, banks: u64, bb: u64) -> u32 {
    let mut words: Vec<u64> = Vec::with_capacity(128);
    for addr in addrs {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (no seed-dependent library).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 11
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// `(lane, address)` pairs of `addrs` on the set bits of `mask` (lanes in order).
    fn pairs(mask: u32, addrs: &[u64]) -> Vec<(u32, u64)> {
        let mut m = mask;
        let mut v = Vec::new();
        for &a in addrs {
            if m == 0 {
                break;
            }
            v.push((m.trailing_zeros(), a));
            m &= m - 1;
        }
        v
    }

    /// A mask with `n` set bits, consecutive from lane 0 or spread at random.
    fn mask_of(r: &mut Rng, n: usize) -> u32 {
        if n == 0 {
            return 0;
        }
        if r.below(2) == 0 {
            return (u64::MAX >> (64 - n)) as u32;
        }
        let mut lanes: Vec<u32> = (0..32).collect();
        for i in (1..32).rev() {
            lanes.swap(i, r.below(i as u64 + 1) as usize);
        }
        lanes[..n].iter().fold(0, |m, &l| m | 1 << l)
    }

    /// Lane addresses in the patterns warps use (runs of elements, broadcasts, rows of a
    /// tile, scattered), near zero or near the top of the address space.
    fn list(r: &mut Rng, n: usize, width: u64) -> Vec<u64> {
        let base = match r.below(4) {
            0 => u64::MAX - r.below(600),
            1 => r.below(1 << 20),
            _ => r.below(4096) * 4,
        };
        let mut v = Vec::with_capacity(n);
        let mut a = base;
        for _ in 0..n {
            v.push(a);
            a = match r.below(8) {
                0 => a,
                1 => a.wrapping_add(64),
                2 => a.wrapping_sub(60),
                3 => r.below(1 << 12),
                _ => a.wrapping_add(width.max(1)),
            };
        }
        v
    }

    const GEOMETRIES: [(u32, u32); 4] = [(128, 32), (64, 32), (32, 32), (256, 64)];
    const WIDTHS: [u32; 8] = [0, 1, 2, 4, 8, 12, 16, 32];

    /// List mode: runs of adjacent and repeated lanes coalesce exactly as lane by lane.
    #[test]
    fn coalesce_list_agrees_with_lanes() {
        let mut r = Rng(3);
        let (mut want, mut got) = (Vec::new(), Vec::new());
        for _ in 0..20_000 {
            let (lb, sb) = GEOMETRIES[r.below(4) as usize];
            let g = Geometry::new(lb, sb);
            let width = WIDTHS[r.below(8) as usize];
            let n = r.below(33) as usize;
            let addrs = list(&mut r, n, width as u64);
            let mask = mask_of(&mut r, n);
            coalesce(&g, &pairs(mask, &addrs), width, &mut want);
            coalesce_addrs(&g, LaneAddrs::List(&addrs), width, &mut got);
            assert_eq!(got, want, "{addrs:x?} width {width} mask {mask:x}");
        }
    }

    /// Stride mode: lane by lane, except stride == width, the trace's contiguous form:
    /// one range of `n * width` bytes (no lane for width 0), which is lane by lane too
    /// whenever the range does not pass the top of the address space.
    #[test]
    fn coalesce_stride_agrees_with_lanes() {
        let mut r = Rng(5);
        let (mut want, mut got) = (Vec::new(), Vec::new());
        for _ in 0..20_000 {
            let (lb, sb) = GEOMETRIES[r.below(4) as usize];
            let g = Geometry::new(lb, sb);
            let width = WIDTHS[r.below(8) as usize];
            let n = r.below(33) as u32;
            let stride = match r.below(4) {
                0 => width as i64,
                1 => 0,
                2 => -(width as i64),
                _ => r.below(300) as i64 - 150,
            };
            let base = match r.below(3) {
                0 => u64::MAX - r.below(2000),
                _ => r.below(1 << 20),
            };
            let lanes = LaneAddrs::Stride { base, stride, n };
            let addrs: Vec<u64> = lanes.stride_iter().collect();
            let mask = mask_of(&mut r, n as usize);
            coalesce_addrs(&g, lanes, width, &mut got);
            if stride == width as i64 {
                want.clear();
                if width > 0 && n > 0 {
                    add_range(&g, base, n as u64 * width as u64, &mut want);
                }
                assert_eq!(got, want);
                let fits = base.checked_add(n as u64 * width as u64).is_some();
                if !(width > 0 && fits) {
                    continue;
                }
            }
            coalesce(&g, &pairs(mask, &addrs), width, &mut want);
            assert_eq!(got, want, "{lanes:?} width {width}");
        }
    }

    /// Bank passes from the compressed forms equal those from the lane vector, with and
    /// without conflicts, for power-of-two and other bank widths and counts.
    #[test]
    fn shared_passes_agree_with_lanes() {
        let mut r = Rng(7);
        for i in 0..40_000 {
            let banks = [32u32, 16, 1, 5, 5000][r.below(5) as usize];
            let bank_bytes = [4u32, 8, 3, 1][r.below(4) as usize];
            let width = WIDTHS[r.below(8) as usize];
            let n = r.below(33) as usize;
            let mask = mask_of(&mut r, n);
            // Stride mode on even rounds, list mode on odd ones.
            let stride = (i % 2 == 0).then(|| {
                let stride = match r.below(4) {
                    0 => width as i64,
                    1 => 0,
                    2 => -(r.below(64) as i64),
                    _ => r.below(4) as i64 * 128,
                };
                let base = match r.below(4) {
                    0 => u64::MAX - r.below(200),
                    _ => r.below(4096) * 4,
                };
                LaneAddrs::Stride {
                    base,
                    stride,
                    n: n as u32,
                }
            });
            let addrs = match stride {
                Some(l) => l.stride_iter().collect(),
                None => list(&mut r, n, width as u64),
            };
            let want = shared_passes(&pairs(mask, &addrs), width, banks, bank_bytes);
            // The definition, with no window shortcut (which agrees with it up to 4096
            // banks; more share counters in the count).
            if banks <= 4096 {
                let last_byte = (width as u64).max(1) - 1;
                let bb = (bank_bytes as u64).max(1);
                let naive = conflict_passes(addrs.iter().copied(), last_byte, banks as u64, bb);
                assert_eq!(
                    want, naive,
                    "{addrs:x?} width {width} banks {banks}x{bank_bytes}"
                );
            }
            let got = stride.unwrap_or(LaneAddrs::List(&addrs));
            assert_eq!(
                shared_passes_addrs(got, width, banks, bank_bytes),
                want,
                "{addrs:x?} width {width} banks {banks}x{bank_bytes}"
            );
        }
    }
}
