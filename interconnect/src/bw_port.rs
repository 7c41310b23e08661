//! Bandwidth-limited resources as reservation calendars (DESIGN.md section 3): the one
//! implementation of exact bandwidth, used by the GPU model's units (NoC ports, L1 and L2
//! data ports, DRAM buses and banks) and by [`crate::ChipletLink`].
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
//!
//! Units are 64-bit while every time fits (with the ratio in lowest terms, the whole of any
//! run the presets give: 243 units per ps overflow only after some 21 hours), and a port
//! goes over to 128-bit units for good at the first reservation that would not fit: the
//! same intervals and starts either way, the common case at half the width.

use crate::Picos;
use core::ops::{Add, Sub};

/// Picoseconds per second: the numerator of one byte's occupancy.
const PS_PER_S: u128 = 1_000_000_000_000;

/// A time in exact units: `u64` or `u128`.
trait Unit: Copy + Ord + Add<Output = Self> + Sub<Output = Self> {}
impl Unit for u64 {}
impl Unit for u128 {}

/// A calendar of disjoint busy intervals `[start, end)` in exact units.
#[derive(Clone, Debug)]
struct Calendar<U> {
    /// The busy intervals before `last`, sorted, disjoint, adjacent ones merged, from
    /// index `head` on (the expired ones before it are dropped in batches). Not a tree:
    /// almost every reservation lands at the back and expired ones leave at the front; not
    /// a deque, whose every access pays for the wrap-around.
    busy: Vec<(U, U)>,
    head: usize,
    /// The last busy interval, kept in the port itself (`None`: no live interval at all):
    /// most reservations read and extend only it, and in the port's own cache line they
    /// do not miss on the vector's memory, which they then rarely touch.
    last: Option<(U, U)>,
}

/// Where a reservation starts.
enum Start<U> {
    /// At the time asked for (no division needed to hand it back).
    AsAsked,
    /// Later, at this many units.
    At(U),
}

impl<U: Unit> Calendar<U> {
    const fn new() -> Self {
        Calendar {
            busy: Vec::new(),
            head: 0,
            last: None,
        }
    }

    /// Drops the intervals that end at or before `floor`.
    #[inline]
    fn expire(&mut self, floor: U) {
        if self.head < self.busy.len() {
            while self.busy.get(self.head).is_some_and(|&(_, e)| e <= floor) {
                self.head += 1;
            }
            if self.head >= 4 && self.head * 2 >= self.busy.len() {
                self.drop_expired();
            }
        }
        if self.head == self.busy.len() && self.last.is_some_and(|(_, e)| e <= floor) {
            // Everything has expired (only a length is reset: no memory is touched).
            self.last = None;
            self.busy.clear();
            self.head = 0;
        }
    }

    /// Reserves `d > 0` units starting no earlier than `c`, in the earliest gap that holds
    /// them.
    #[inline]
    fn place(&mut self, c: U, d: U) -> Start<U> {
        // Fast path: at or after the last busy interval (the common, in-order case).
        match &mut self.last {
            None => {
                self.last = Some((c, c + d));
                Start::AsAsked
            }
            Some(last) if last.1 <= c => {
                if last.1 == c {
                    last.1 = c + d;
                } else {
                    let done = *last;
                    *last = (c, c + d);
                    self.busy.push(done);
                }
                Start::AsAsked
            }
            Some(last) if last.0 <= c => {
                // Inside the last interval (a queue behind it, the next most common case):
                // the earliest gap is right after it, which the general path below would
                // find and merge the same way.
                let start = last.1;
                last.1 = start + d;
                Start::At(start)
            }
            Some(_) => Start::At(self.reserve_in_gap(c, d)),
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
    /// interval; returns its start.
    #[inline(never)]
    fn reserve_in_gap(&mut self, c: U, d: U) -> U {
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
        start
    }

    /// [`Calendar::reserve_in_gap`] over `busy[head..]` alone.
    fn insert_in_gap(&mut self, c: U, d: U) -> U {
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

    /// The live intervals (tests).
    #[cfg(test)]
    fn intervals(&self) -> Vec<(U, U)> {
        let mut v = self.busy[self.head..].to_vec();
        v.extend(self.last);
        v
    }
}

/// One port: a calendar of disjoint busy intervals in exact units.
#[derive(Clone, Debug)]
pub struct BwPort {
    /// Units per picosecond: `bytes_per_cycle * clock_hz / g` (1 for a plain time calendar).
    den: u128,
    /// Units one byte occupies: `1e12 / g` (1 for a plain time calendar, whose "bytes" are
    /// ps).
    per_byte: u128,
    /// `den` and `per_byte` in 64 bits (`den64` is 0 when `den` does not fit: the port
    /// is wide from the start).
    den64: u64,
    per_byte64: u64,
    /// The calendar in 64-bit units, while `wide` is `None`.
    narrow: Calendar<u64>,
    /// The calendar in 128-bit units, once a time has not fitted in 64 bits (boxed: no
    /// preset run gets there, and the port stays small).
    wide: Option<Box<Calendar<u128>>>,
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
    pub fn new(bytes_per_cycle: u64, clock_hz: u64) -> BwPort {
        let den = (bytes_per_cycle.max(1) as u128) * (clock_hz.max(1) as u128);
        // The same ratio in lowest terms: units stay small enough for 64-bit arithmetic
        // for the whole run, not only its first few hundred microseconds (32 B at
        // 1.215 GHz: 243 units per ps instead of 3.9e10), and every quotient is the same.
        let g = gcd(den, PS_PER_S);
        BwPort::with_ratio(den / g, PS_PER_S / g)
    }

    /// A calendar of busy time: `reserve(.., ps)` occupies `ps` picoseconds.
    pub fn time() -> BwPort {
        BwPort::with_ratio(1, 1)
    }

    /// A port that never delays a transfer: for a connection whose serialization is
    /// modelled elsewhere (a NoC port in front of a crossbar, whose inputs and outputs
    /// hold a packet for its flits). Its transfers occupy no time, so it keeps no interval.
    pub fn unlimited() -> BwPort {
        BwPort::with_ratio(1, 0)
    }

    fn with_ratio(den: u128, per_byte: u128) -> BwPort {
        // `per_byte` divides 1e12 and fits; a `den` that does not makes the port wide now.
        let (den64, per_byte64) = match (u64::try_from(den), u64::try_from(per_byte)) {
            (Ok(d), Ok(p)) => (d, p),
            _ => (0, 0),
        };
        BwPort {
            den,
            per_byte,
            den64,
            per_byte64,
            narrow: Calendar::new(),
            wide: (den64 == 0).then(|| Box::new(Calendar::new())),
            #[cfg(test)]
            reserved_units: 0,
        }
    }

    /// Reserves the transfer of `bytes` starting no earlier than `t`, in the earliest gap
    /// that holds it; returns its start, rounded up to a picosecond. `floor` is a time no
    /// later reservation will precede (the current call's `now_ps`).
    ///
    /// Inlined: every packet crosses several ports, and most reservations take the fast
    /// path, which needs no saved registers and makes no change before it is sure to
    /// complete; everything else (expiry, a new interval, a gap, wide units) is
    /// [`BwPort::reserve_slow`].
    #[inline]
    pub fn reserve(&mut self, floor: Picos, t: Picos, bytes: u64) -> Picos {
        match self.reserve_fast(floor, t, bytes) {
            Some(start) => start,
            None => self.reserve_slow(floor, t, bytes),
        }
    }

    /// [`BwPort::reserve`] in 64-bit units when the transfer is empty with nothing
    /// expiring, starts the calendar afresh, or lands at or after the start of its last
    /// interval (right at its end, queued behind it, or past a gap after it without
    /// growing the vector); `None`, with the port unchanged, otherwise.
    #[inline(always)]
    fn reserve_fast(&mut self, floor: Picos, t: Picos, bytes: u64) -> Option<Picos> {
        if self.wide.is_some() {
            return None;
        }
        let den = self.den64;
        let n = &mut self.narrow;
        // Saturating: every end fits in 64 bits, so a floor past them all expires them
        // all, exactly as the true floor does.
        let floor_u = floor.saturating_mul(den);
        // Intervals are sorted and the last one ends latest: nothing expires when the
        // first live one ends after the floor.
        if n.busy.get(n.head).is_some_and(|&(_, e)| e <= floor_u) {
            return None;
        }
        let c = t.checked_mul(den)?;
        let d = bytes.checked_mul(self.per_byte64)?;
        if d == 0 {
            return n.last.is_none_or(|(_, e)| e > floor_u).then_some(t);
        }
        match &mut n.last {
            Some(last) if last.1 > floor_u => {
                let start = if last.0 <= c && c <= last.1 {
                    // At its end (start `t`, no division) or inside it (queued behind it).
                    let start = last.1;
                    last.1 = start.checked_add(d)?;
                    start
                } else if last.1 < c && n.busy.len() < n.busy.capacity() {
                    // After it, past a gap: a new last interval (no vector growth here).
                    let end = c.checked_add(d)?;
                    n.busy.push(*last);
                    *last = (c, end);
                    c
                } else {
                    return None;
                };
                #[cfg(test)]
                {
                    self.reserved_units += d as u128;
                }
                Some(if start == c { t } else { start.div_ceil(den) })
            }
            _ => {
                // No live interval (none, or the last has expired, and with it all the
                // others: the first live one has not): the calendar starts afresh.
                let end = c.checked_add(d)?;
                n.busy.clear();
                n.head = 0;
                n.last = Some((c, end));
                #[cfg(test)]
                {
                    self.reserved_units += d as u128;
                }
                Some(t)
            }
        }
    }

    /// [`BwPort::reserve`] in general.
    #[inline(never)]
    fn reserve_slow(&mut self, floor: Picos, t: Picos, bytes: u64) -> Picos {
        if self.wide.is_none() {
            let n = &mut self.narrow;
            // Saturating: as in [`BwPort::reserve_fast`].
            n.expire(floor.saturating_mul(self.den64));
            // The new interval ends at most `d` after the later of `c` and the last end
            // (the latest of all): in 64 bits when that fits.
            if let (Some(c), Some(d)) = (
                t.checked_mul(self.den64),
                bytes.checked_mul(self.per_byte64),
            ) {
                let top = n.last.map_or(c, |(_, e)| e.max(c));
                if top.checked_add(d).is_some() {
                    #[cfg(test)]
                    {
                        self.reserved_units += d as u128;
                    }
                    if d == 0 {
                        return t;
                    }
                    return match n.place(c, d) {
                        Start::AsAsked => t,
                        Start::At(u) => u.div_ceil(self.den64),
                    };
                }
            }
            self.widen();
        }
        self.reserve_wide(floor, t, bytes)
    }

    /// Moves the calendar to 128-bit units, for good.
    #[cold]
    #[inline(never)]
    fn widen(&mut self) {
        let n = core::mem::replace(&mut self.narrow, Calendar::new());
        let wide = |(s, e): (u64, u64)| (s as u128, e as u128);
        self.wide = Some(Box::new(Calendar {
            busy: n.busy[n.head..].iter().map(|&x| wide(x)).collect(),
            head: 0,
            last: n.last.map(wide),
        }));
    }

    /// [`BwPort::reserve`] in 128-bit units.
    #[inline(never)]
    fn reserve_wide(&mut self, floor: Picos, t: Picos, bytes: u64) -> Picos {
        let Some(w) = self.wide.as_deref_mut() else {
            // Not reached: the caller has just made the port wide.
            return t;
        };
        w.expire(floor as u128 * self.den);
        let d = bytes as u128 * self.per_byte;
        let c = t as u128 * self.den;
        if d == 0 {
            return t;
        }
        #[cfg(test)]
        {
            self.reserved_units += d;
        }
        match w.place(c, d) {
            Start::AsAsked => t,
            Start::At(u) => self.to_ps(u),
        }
    }

    /// When everything reserved so far has ended, rounded up to a picosecond (0 when
    /// nothing is live).
    pub fn free_at(&self) -> Picos {
        let end = match &self.wide {
            Some(w) => w.last.map_or(0, |(_, e)| e),
            None => self.narrow.last.map_or(0, |(_, e)| e as u128),
        };
        self.to_ps(end)
    }

    #[inline]
    fn to_ps(&self, units: u128) -> Picos {
        // A 64-bit division while the operands fit, instead of the 128-bit library call;
        // the same quotient.
        match (u64::try_from(units), u64::try_from(self.den)) {
            (Ok(u), Ok(d)) => u.div_ceil(d) as Picos,
            _ => units.div_ceil(self.den) as Picos,
        }
    }

    /// Busy intervals in exact units (tests).
    #[cfg(test)]
    pub(crate) fn intervals(&self) -> Vec<(u128, u128)> {
        match &self.wide {
            Some(w) => w.intervals(),
            None => self
                .narrow
                .intervals()
                .into_iter()
                .map(|(s, e)| (s as u128, e as u128))
                .collect(),
        }
    }

    /// Intervals held, live or not yet dropped (tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        match &self.wide {
            Some(w) => w.busy.len(),
            None => self.narrow.busy.len(),
        }
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
        assert!(a.held() * 10 < b.held());
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

    /// Against every interval kept in one sorted list and each request placed at the
    /// earliest start from which it overlaps none: in order, queued, into gaps, with a
    /// rising floor (from `floor0`) that expires intervals (the last one included).
    fn agree_with_a_plain_calendar(mut p: BwPort, floor0: u64) -> BwPort {
        let mut all: Vec<(u128, u128)> = Vec::new();
        let (mut x, mut floor) = (5u64, floor0);
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
        p
    }

    #[test]
    fn agrees_with_a_plain_calendar() {
        let p = agree_with_a_plain_calendar(BwPort::new(40, 1_410_000_000), 0);
        assert!(p.wide.is_none());
    }

    #[test]
    fn agrees_with_a_plain_calendar_across_the_switch_to_wide_units() {
        // About 1e12 units per ps (a prime clock): 64-bit units overflow at 1.8e7 ps, in
        // the middle of the run, with intervals live in the calendar.
        let p = BwPort::new(1, 999_999_999_989);
        assert!(p.wide.is_none() && p.den > 999_999_999_000);
        let p = agree_with_a_plain_calendar(p, 18_000_000);
        assert!(p.wide.is_some());
        // A ratio too large for 64 bits is wide from the start.
        let p = BwPort::new(1_099_511_627_791, 999_999_999_989);
        assert!(p.wide.is_some());
        let p = agree_with_a_plain_calendar(p, 0);
        assert!(p.wide.is_some());
    }
}
