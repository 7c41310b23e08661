//! Host speed only, nothing simulated depends on it: loading into the host's caches the
//! simulated state a unit is about to touch, and remembering what was computed for it.
//!
//! The simulated state of a large GPU (tens of SMs' L1 tags, MSHRs and warps, every L2
//! slice) is far larger than a host core's caches, and many accesses to it are to state
//! last touched long ago (an LRU victim, a reply's MSHR): a partition asks for the state of
//! the packets a visit is about to take, so the misses overlap with other work. Results are
//! the same with every prefetch removed.

use std::collections::VecDeque;

use super::coalesce::LineAccess;
use super::{LdStUnit, MemChannel, Packet, Request};

/// Asks the host CPU to start loading the cache line at `p` (a no-op off x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing the program sees and cannot fault,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The homes (`AddressMap::l2_home`: channel, slice, set) [`MemChannel::prefetch`] computed
/// for the packets about to be taken, in order, so that the channel does not compute them
/// again (a home is a function of the line alone: the line is checked).
#[derive(Debug, Default)]
pub(super) struct HomeMemo {
    homes: VecDeque<(u64, (u32, usize, u64))>,
}

impl HomeMemo {
    fn push(&mut self, line: u64, home: (u32, usize, u64)) {
        self.homes.push_back((line, home));
    }

    /// The home of `line`: the one remembered for it, else `compute`'s.
    #[inline(always)]
    pub(super) fn take(
        &mut self,
        line: u64,
        compute: impl FnOnce() -> (u32, usize, u64),
    ) -> (u32, usize, u64) {
        match self.homes.pop_front() {
            Some((l, h)) if l == line => h,
            _ => {
                self.homes.clear();
                compute()
            }
        }
    }
}

impl MemChannel {
    /// Starts loading, into the host's caches, the L2 state that [`MemChannel::on_packet`]
    /// will read first for `pkt`: the set and the victim way of its line's slice, and the
    /// slice's MSHRs (called for the packets a visit is about to take, so the misses overlap;
    /// results are unchanged).
    pub fn prefetch(&mut self, pkt: &Packet) {
        if self.map.private {
            return;
        }
        if let Packet::Request(
            Request::Read { line, .. } | Request::Write { line, .. } | Request::Atomic { line, .. },
        ) = *pkt
        {
            let h = self.map.l2_home(line);
            self.homes.push(line, h);
            let (home, slice, set) = h;
            if let (true, Some(s)) = (home == self.channel, self.slices.get(slice)) {
                s.cache.prefetch(set);
                s.mshrs.prefetch();
            }
        }
    }
}

impl LdStUnit {
    /// Starts loading the L1 sets and MSHR index buckets of the lines a warp instruction is
    /// about to look up.
    #[inline(always)]
    pub(super) fn prefetch_lines(&self, lines: &[LineAccess]) {
        let geom = self.params.l1d.geom;
        for la in lines {
            self.l1d.cache.prefetch(geom.line_index(la.line_addr));
            self.l1d.by_line.prefetch(la.line_addr);
        }
    }

    /// Starts loading, into the host's caches, what [`LdStUnit::on_reply`] reads first for
    /// a reply naming MSHR `tag` for `line`: the MSHR and its index bucket (called for the
    /// replies a visit is about to take; results are unchanged).
    pub fn prefetch_reply(&self, tag: u32, line: u64) {
        if let Some(m) = self.l1d.mshrs.get(tag as usize) {
            prefetch(m);
        }
        self.l1d.by_line.prefetch(line);
    }
}
