//! Bandwidth-limited resources as reservation calendars (DESIGN.md section 3).
//!
//! A [`BwPort`] moves `bytes_per_cycle` bytes per cycle of a clock of `clock_hz`. Time inside
//! the port is kept exactly, in units of `g / (bytes_per_cycle * clock_hz)` picoseconds, so a
//! transfer of `n` bytes occupies exactly `n * 1e12 / g` units (`g` the greatest common
//! divisor of `1e12` and `bytes_per_cycle * clock_hz`): fractional picoseconds carry over
//! from transfer to transfer and rounding never inflates or deflates the bandwidth, however
//! long the run. Only the start handed back to the caller is rounded (up) to a picosecond.
//!
//! The port is a calendar of busy intervals, not a single busy-until time: requests are
//! modelled in call order, but a request's time at a port may be earlier than that of a
//! request modelled before it (a DRAM fill returning late, an MSHR wait), and it then uses
//! the earliest gap that fits instead of queueing behind a reservation in the future.
//! Intervals never overlap, so the bytes moved in any window never exceed the bandwidth.
//! Intervals that end before the caller's `floor` (the current call's `now_ps`; no later
//! reservation can start before it) are dropped.

use crate::Picos;

/// Picoseconds per second: the numerator of one byte's occupancy.
const PS_PER_S: u128 = 1_000_000_000_000;

/// One port: a calendar of disjoint busy intervals `[start, end)` in exact units.
#[derive(Clone, Debug)]
pub(crate) struct BwPort {
    /// Units per picosecond: `bytes_per_cycle * clock_hz / g` (1 for a plain time calendar).
    den: u128,
    /// Units one byte occupies: `1e12 / g` (1 for a plain time calendar, whose "bytes" are
    /// ps).
    per_byte: u128,
    /// The busy intervals before `last`, sorted, disjoint, adjacent ones merged, from
    /// index `head` on (the expired ones before it are dropped in batches). Not a tree:
    /// almost every reservation lands at the back and expired ones leave at the front; not
    /// a deque, whose every access pays for the wrap-around.
    busy: Vec<(u128, u128)>,
    head: usize,
    /// The last busy interval, kept in the port itself (`None`: no live interval at all):
    /// most reservations read and extend only it, and in the port's own cache line they
    /// do not miss on the vector's memory, which they then rarely touch.
    last: Option<(u128, u128)>,
    /// Total units reserved (for checks).
    #[cfg(test)]
    reserved_units: u128,
}

/// Greatest common divisor (Euclid).
fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

impl BwPort {
    /// A port moving `bytes_per_cycle` bytes per cycle of `clock_hz`.
    pub(crate) fn new(bytes_per_cycle: u64, clock_hz: u64) -> BwPort {
        let den = (bytes_per_cycle.max(1) as u128) * (clock_hz.max(1) as u128);
        // The same ratio in lowest terms: units stay small enough for 64-bit arithmetic
        // for the whole run, not only its first few hundred microseconds (32 B at
        // 1.215 GHz: 243 units per ps instead of 3.9e10), and every quotient is the same.
        let g = gcd(den, PS_PER_S);
        BwPort {
            den: den / g,
            per_byte: PS_PER_S / g,
            busy: Vec::new(),
            head: 0,
            last: None,
            #[cfg(test)]
            reserved_units: 0,
        }
    }

    /// A calendar of busy time: `reserve(.., ps)` occupies `ps` picoseconds.
    pub(crate) fn time() -> BwPort {
        BwPort {
            den: 1,
            per_byte: 1,
            busy: Vec::new(),
            head: 0,
            last: None,
            #[cfg(test)]
            reserved_units: 0,
        }
    }

    /// Reserves the transfer of `bytes` starting no earlier than `t`, in the earliest gap
    /// that holds it; returns its start, rounded up to a picosecond. `floor` is a time no
    /// later reservation will precede (the current call's `now_ps`).
    ///
    /// Inlined: every packet crosses several ports, and almost every reservation takes one
    /// of the fast paths (the gap search is [`BwPort::reserve_in_gap`]).
    #[inline]
    pub(crate) fn reserve(&mut self, floor: Picos, t: Picos, bytes: u64) -> Picos {
        let floor_u = floor as u128 * self.den;
        if self.head < self.busy.len() {
            while self.busy.get(self.head).is_some_and(|&(_, e)| e <= floor_u) {
                self.head += 1;
            }
            if self.head >= 4 && self.head * 2 >= self.busy.len() {
                self.drop_expired();
            }
        }
        if self.head == self.busy.len() && self.last.is_some_and(|(_, e)| e <= floor_u) {
            // Everything has expired (only a length is reset: no memory is touched).
            self.last = None;
            self.busy.clear();
            self.head = 0;
        }
        let d = bytes as u128 * self.per_byte;
        let c = t as u128 * self.den;
        if d == 0 {
            return t;
        }
        #[cfg(test)]
        {
            self.reserved_units += d;
        }
        // Fast path: at or after the last busy interval (the common, in-order case).
        match &mut self.last {
            None => {
                self.last = Some((c, c + d));
                t
            }
            Some(last) if last.1 <= c => {
                if last.1 == c {
                    last.1 = c + d;
                } else {
                    let done = *last;
                    *last = (c, c + d);
                    self.busy.push(done);
                }
                // `c` is `t` exactly: no division.
                t
            }
            Some(last) if last.0 <= c => {
                // Inside the last interval (a queue behind it, the next most common case):
                // the earliest gap is right after it, which the general path below would
                // find and merge the same way.
                let start = last.1;
                last.1 = start + d;
                self.to_ps(start)
            }
            Some(_) => self.reserve_in_gap(c, d),
        }
    }

    /// At most as many live intervals move as dead ones leave: amortized O(1), and a port
    /// holds few more intervals than are live (memory per port stays small).
    #[inline(never)]
    fn drop_expired(&mut self) {
        self.busy.drain(..self.head);
        self.head = 0;
    }

    /// The earliest gap at or after `c` that holds `d` units, before the last busy
    /// interval; returns its start in picoseconds.
    #[inline(never)]
    fn reserve_in_gap(&mut self, c: u128, d: u128) -> Picos {
        // The search runs over every live interval: the last one joins the vector for it,
        // and whatever ends up last (it may have merged with the new one) leaves again.
        if let Some(last) = self.last.take() {
            self.busy.push(last);
        }
        let start = self.insert_in_gap(c, d);
        // A merge removes an interval only between two live ones, so at least one live
        // interval (the new last) remains at or after `head`.
        self.last = self.busy.pop();
        debug_assert!(self.head <= self.busy.len());
        self.to_ps(start)
    }

    /// [`BwPort::reserve_in_gap`] over `busy[head..]` alone; returns the start in units.
    fn insert_in_gap(&mut self, c: u128, d: u128) -> u128 {
        let head = self.head;
        // Start after the interval that contains `c`, if any, then walk the gaps.
        let busy = &mut self.busy[head..];
        let mut i = busy.partition_point(|&(s, _)| s <= c);
        let mut start = c;
        if i > 0 && busy[i - 1].1 > start {
            start = busy[i - 1].1;
        }
        while i < busy.len() && busy[i].0 - start < d {
            start = busy[i].1;
            i += 1;
        }
        // Insert `[start, start + d)` before interval `i`, merging with its neighbours.
        let end = start + d;
        let joins_prev = i > 0 && busy[i - 1].1 == start;
        let joins_next = i < busy.len() && busy[i].0 == end;
        match (joins_prev, joins_next) {
            (true, true) => {
                busy[i - 1].1 = busy[i].1;
                self.busy.remove(head + i);
            }
            (true, false) => busy[i - 1].1 = end,
            (false, true) => busy[i].0 = start,
            (false, false) => self.busy.insert(head + i, (start, end)),
        }
        start
    }

    #[inline]
    fn to_ps(&self, units: u128) -> Picos {
        // A 64-bit division while the times fit (with the ratio in lowest terms, the whole
        // of any run the presets give), instead of the 128-bit library call; the same
        // quotient.
        match (u64::try_from(units), u64::try_from(self.den)) {
            (Ok(u), Ok(d)) => u.div_ceil(d) as Picos,
            _ => units.div_ceil(self.den) as Picos,
        }
    }

    /// Busy intervals in exact units (tests).
    #[cfg(test)]
    pub(crate) fn intervals(&self) -> Vec<(u128, u128)> {
        let mut v = self.busy[self.head..].to_vec();
        v.extend(self.last);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bandwidth_over_a_long_run() {
        // 32 B per cycle at 1.215 GHz: a 32 B burst is 823.045... ps; 1e6 bursts back to
        // back must take 823,045,268 ps (ceil of the exact 823045267.49), not 823e6.
        let mut p = BwPort::new(32, 1_215_000_000);
        let mut last = 0;
        for _ in 0..1_000_000u64 {
            last = p.reserve(0, 0, 32);
        }
        let end_units = p.intervals().last().map(|x| x.1).unwrap_or(0);
        assert_eq!(end_units, 1_000_000u128 * 32 * p.per_byte);
        assert_eq!((p.den, p.per_byte), (243, 6_250));
        assert_eq!(end_units.div_ceil(p.den), 823_045_268);
        assert!(last < 823_045_268);
    }

    #[test]
    fn dropping_expired_intervals_changes_nothing() {
        // A rising floor (requests at or after it) against a port that keeps everything:
        // the same starts, through many batch drops of the front. About half busy (a
        // 32 B burst is 823 ps), so that both gaps and queues occur.
        let (mut a, mut b) = (
            BwPort::new(32, 1_215_000_000),
            BwPort::new(32, 1_215_000_000),
        );
        let mut x = 3u64;
        let mut floor = 0;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            floor += (x >> 60) * 1_000;
            let t = floor + (x >> 30) % 20_000;
            let bytes = 32 << ((x >> 20) % 3);
            assert_eq!(a.reserve(floor, t, bytes), b.reserve(0, t, bytes));
        }
        assert!(a.busy.len() * 10 < b.busy.len());
        // Both hold the same live intervals.
        let live = |p: &BwPort| {
            p.intervals()
                .into_iter()
                .filter(|&(_, e)| e > floor as u128 * p.den)
                .collect::<Vec<_>>()
        };
        assert_eq!(live(&a), live(&b));
    }

    #[test]
    fn gaps_are_filled_and_intervals_never_overlap() {
        let mut p = BwPort::new(40, 1_410_000_000);
        let a = p.reserve(0, 10_000, 128);
        assert_eq!(a, 10_000);
        // An earlier request uses the gap before it.
        let b = p.reserve(0, 0, 128);
        assert_eq!(b, 0);
        // One that does not fit in the remaining gap goes after.
        let mut x = 1u64;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let t = (x >> 40) % 100_000;
            let bytes = 8 + (x >> 20) % 200;
            let s = p.reserve(0, t, bytes);
            assert!(s >= t);
        }
        let iv = p.intervals();
        let mut total = 0;
        for w in iv.windows(2) {
            assert!(w[0].1 < w[1].0, "intervals overlap or touch unmerged");
        }
        for (s, e) in &iv {
            total += e - s;
        }
        assert_eq!(total, p.reserved_units);
    }

    #[test]
    fn agrees_with_a_plain_calendar() {
        // Against every interval kept in one sorted list and each request placed at the
        // earliest start from which it overlaps none: in order, queued, into gaps, with a
        // rising floor that expires intervals (the last one included).
        let mut p = BwPort::new(40, 1_410_000_000);
        let mut all: Vec<(u128, u128)> = Vec::new();
        let (mut x, mut floor) = (5u64, 0u64);
        for n in 0..30_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if n % 7 == 0 {
                floor += (x >> 59) * 700;
            }
            let t = floor + (x >> 30) % if n % 3 == 0 { 40_000 } else { 3_000 };
            let bytes = 8 + (x >> 20) % 300;
            let (c, d) = (t as u128 * p.den, bytes as u128 * p.per_byte);
            let mut start = c;
            for &(s, e) in &all {
                if e <= start {
                    continue;
                }
                if s >= start + d {
                    break;
                }
                start = e;
            }
            let at = all.partition_point(|&(s, _)| s < start);
            all.insert(at, (start, start + d));
            let want = start.div_ceil(p.den) as Picos;
            assert_eq!(p.reserve(floor, t, bytes), want, "request {n}");
        }
    }
}
