//! The LD/ST unit's sync requests (issue 24): a strong load, strong store or atomic on
//! declared sync words goes to the word's home as one [`Request::Sync`] per word and
//! operand group (lanes of one instruction on one word with the same operands, applied
//! there in lane order), bypassing L1 as atomics do; the [`Response::Value`] that comes
//! back gives every lane of the group its value, which the SM reads for its spin regions.
//! A weak load of a sync word is a load at the home too, but its value becomes the L1's
//! copy of the word, which answers the SM's later weak loads of it (stale once the word
//! changes at its home) until the kernel ends or the SM writes the line: L1s are not
//! coherent, which is why a spin on a weak load can wait forever.

use super::ldst::{InstWait, LdStUnit};
use super::message::{Request, SyncOp};
use crate::packet::{Net, HEADER_BYTES, SYNC_TAG_BITS, SYNC_WORD_BITS};
use crate::Picos;

/// Sync requests one LD/ST unit may have in flight (the tag's bits on the wire).
pub const MAX_SYNC_IN_FLIGHT: usize = 1 << SYNC_TAG_BITS;

/// Lanes of one instruction that apply one operation with the same operands to one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncGroup {
    pub addr: u64,
    pub op: SyncOp,
    /// The lanes, and how many.
    pub mask: u32,
    pub a: u32,
    pub b: u32,
}

/// A sync request in flight.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SyncWait {
    token: u32,
    mask: u32,
    op: u8,
    a: u32,
    b: u32,
    live: bool,
    /// A weak load's: its value becomes the L1's copy of word `addr`.
    fill: bool,
    addr: u64,
}

/// The values a sync request's group of lanes got: lane `l` of `mask` got `values[l]`.
#[derive(Clone, Copy, Debug)]
pub struct SyncValues {
    pub token: u32,
    pub mask: u32,
    pub values: [u32; 32],
}

/// Why a sync access cannot be sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    #[error("sync word {addr:#x} lies above the {} bits of a sync request's address", SYNC_WORD_BITS + 2)]
    Address { addr: u64 },
    #[error("a sync value names request {tag}, which is not in flight")]
    Unknown { tag: u32 },
}

impl LdStUnit {
    /// Whether its sync requests in flight leave no room for another instruction's.
    #[inline(always)]
    pub(super) fn sync_full(&self) -> bool {
        self.sync.full
    }

    /// Whether it can take a sync instruction of up to 32 groups now.
    pub fn sync_room(&self) -> bool {
        !self.sync.full
    }

    /// The L1's copy of sync word `addr`, when it holds one (a weak load read it since the
    /// kernel started and this SM wrote nothing to its line since).
    pub fn l1_sync_copy(&self, addr: u64) -> Option<u32> {
        if !self.params.l1d.enabled {
            return None;
        }
        self.sync.copies.get(&addr).copied()
    }

    /// When the L1 answers a weak load: `now` plus its hit latency.
    pub fn l1_hit_at(&self, now: Picos) -> Picos {
        now + self.params.l1d.hit_ps
    }

    /// Drops the L1's copies of sync words: every one (a new kernel: L1s are not coherent
    /// across kernels), or those of `line`.
    pub(super) fn drop_sync_copies(&mut self, line: Option<u64>) {
        match line {
            None => self.sync.copies.clear(),
            Some(line) => {
                let end = line + self.params.l1d.geom.line_bytes;
                let gone: Vec<u64> = self.sync.copies.range(line..end).map(|(&a, _)| a).collect();
                for a in gone {
                    self.sync.copies.remove(&a);
                }
            }
        }
    }

    /// Sends the sync requests of instruction `token` issued at `now`, one per group;
    /// the instruction completes when every value has come back ([`LdStUnit::on_value`]).
    /// `weak`: a weak load, whose values become the L1's copies of the words (with the L1
    /// enabled), read by later weak loads until the kernel ends or this SM writes the line.
    pub fn issue_sync(
        &mut self,
        now: Picos,
        groups: &[SyncGroup],
        token: u32,
        weak: bool,
        net: &mut dyn Net,
    ) -> Result<(), SyncError> {
        if let Some(g) = groups.iter().find(|g| g.addr >> (SYNC_WORD_BITS + 2) != 0) {
            return Err(SyncError::Address { addr: g.addr });
        }
        self.stats.global_requests += 1;
        let sb = self.params.l2_geom.sector_bytes;
        let line_bytes = self.params.l1d.geom.line_bytes;
        for g in groups {
            let t = self.l1d.port.reserve(now, now, line_bytes);
            let line = g.addr & !(line_bytes - 1);
            if !weak {
                // The L1 copy of the word's line is dropped, as for atomics.
                let geom = self.params.l1d.geom;
                let set = geom.line_index(line);
                if let Some(i) = self.l1d.cache.find(set, line) {
                    self.l1d.cache.invalidate_sectors(i, u64::MAX);
                }
                if !self.sync.copies.is_empty() {
                    self.drop_sync_copies(Some(line));
                }
            }
            let tag = match self.sync.free.pop() {
                Some(t) => t,
                None => {
                    self.sync.waits.push(SyncWait::default());
                    self.sync.waits.len() as u32 - 1
                }
            };
            self.sync.waits[tag as usize] = SyncWait {
                token,
                mask: g.mask,
                op: g.op as u8,
                a: g.a,
                b: g.b,
                live: true,
                fill: weak && self.params.l1d.enabled,
                addr: g.addr,
            };
            self.sync.live += 1;
            self.sync.full = self.sync.live + 32 > MAX_SYNC_IN_FLIGHT;
            let req = Request::Sync {
                addr: g.addr,
                tag,
                sm: self.unit,
                ctx: self.ctx,
                op: g.op,
                lanes: g.mask.count_ones().clamp(1, 32) as u8,
                a: g.a,
                b: g.b,
            };
            let bytes = HEADER_BYTES + if g.op.writes() { sb } else { 0 };
            let dst = self.route_home(g.addr);
            self.inject(now, t, bytes, dst, req.into(), net);
        }
        let ready = now + self.params.l1d.hit_ps;
        self.set_wait(
            token,
            InstWait {
                outstanding: groups.len() as u32,
                ready,
            },
        );
        Ok(())
    }

    /// The value of sync request `tag` arrives at `now`: its lanes' values go to `out`,
    /// and the instruction to `done` when it was its last.
    pub fn on_value(
        &mut self,
        now: Picos,
        tag: u32,
        value: u32,
        done: &mut Vec<(u32, Picos)>,
        out: &mut Vec<SyncValues>,
    ) -> Result<(), SyncError> {
        let Some(w) = self.sync.waits.get_mut(tag as usize).filter(|w| w.live) else {
            return Err(SyncError::Unknown { tag });
        };
        w.live = false;
        let w = *w;
        self.sync.live -= 1;
        self.sync.full = self.sync.live + 32 > MAX_SYNC_IN_FLIGHT;
        self.sync.free.push(tag);
        let op = SyncOp::from_code(w.op).unwrap_or(SyncOp::Load);
        if w.fill {
            self.sync.copies.insert(w.addr, value);
        }
        let mut values = [0u32; 32];
        let mut v = value;
        let mut m = w.mask;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            values[l] = if op == SyncOp::Store { w.a } else { v };
            v = op.apply(v, w.a, w.b);
        }
        out.push(SyncValues {
            token: w.token,
            mask: w.mask,
            values,
        });
        let bytes = HEADER_BYTES + self.params.l2_geom.sector_bytes;
        let ti = self.noc_in.reserve(now, now, bytes);
        let ready = ti + self.params.l1d.hit_ps;
        self.wake(w.token, ready, done);
        Ok(())
    }
}

/// The LD/ST unit's table of sync requests in flight.
#[derive(Clone, Debug, Default)]
pub(super) struct SyncTable {
    waits: Vec<SyncWait>,
    free: Vec<u32>,
    live: usize,
    /// Fewer than a warp's worth of tags left: the LD/ST unit takes no instruction.
    full: bool,
    /// The L1's copies of sync words (by address), as weak loads got them: bounded by the
    /// declared sync words.
    copies: std::collections::BTreeMap<u64, u32>,
}
