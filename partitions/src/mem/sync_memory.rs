//! The values of the sync words homed at one DRAM channel unit (issue 24, DESIGN.md
//! section 6): what its L2 slice (memory-side L2) or LLC slice (private L2s) holds for
//! them, updated in the order the unit takes the [`Request::Sync`](super::Request::Sync)
//! packets (the model's message order, so the same for any threads, ranks or cuts). Only
//! the words a trace declares ([`tessera_traces::SyncWords`]) are kept, from their
//! recorded initial values; every other atomic stays timed only.

use super::message::SyncOp;
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera_traces::SyncWords;

/// The sync words of one home, and what was done to them.
#[derive(Clone, Debug, Default)]
pub struct SyncMemory {
    declared: Arc<[SyncWords]>,
    values: BTreeMap<u64, u32>,
    pub stats: SyncStats,
}

/// What a home did to its sync words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SyncStats {
    /// Requests taken, and of them strong loads, strong stores and atomics.
    pub requests: u64,
    pub loads: u64,
    pub stores: u64,
    pub atomics: u64,
    /// Lanes of compare-and-swap requests that found their compare value (the swap took
    /// place: a lock acquired), and those that did not.
    pub cas_won: u64,
    pub cas_lost: u64,
}

impl SyncStats {
    pub fn add(&mut self, o: &SyncStats) {
        self.requests += o.requests;
        self.loads += o.loads;
        self.stores += o.stores;
        self.atomics += o.atomics;
        self.cas_won += o.cas_won;
        self.cas_lost += o.cas_lost;
    }
}

impl SyncMemory {
    /// The sync words a trace declares (their initial values; a word is kept by its home
    /// from its first access on).
    pub fn new(declared: Arc<[SyncWords]>) -> SyncMemory {
        SyncMemory {
            declared,
            ..SyncMemory::default()
        }
    }

    /// The value of `addr` now: its last written one, or its declared initial value (0 for
    /// a word no declaration names, which the SM never sends).
    pub fn value(&self, addr: u64) -> u32 {
        if let Some(&v) = self.values.get(&addr) {
            return v;
        }
        self.declared
            .iter()
            .find(|w| w.contains(addr))
            .and_then(|w| w.init.get(((addr - w.addr) / 4) as usize).copied())
            .unwrap_or(0)
    }

    /// `lanes` lanes apply `op` with operands `a`, `b` to `addr` in lane order; returns the
    /// value before the first.
    pub fn apply(&mut self, addr: u64, op: SyncOp, lanes: u8, a: u32, b: u32) -> u32 {
        let old = self.value(addr);
        let s = &mut self.stats;
        s.requests += 1;
        match op {
            SyncOp::Load => {
                s.loads += 1;
                return old;
            }
            SyncOp::Store => s.stores += 1,
            _ => s.atomics += 1,
        }
        let mut v = old;
        for _ in 0..lanes.max(1) {
            if op == SyncOp::Cas {
                if v == a {
                    s.cas_won += 1;
                } else {
                    s.cas_lost += 1;
                }
            }
            v = op.apply(v, a, b);
        }
        self.values.insert(addr, v);
        old
    }

    /// The words written so far with their values, by address.
    pub fn written(&self) -> Vec<(u64, u32)> {
        self.values.iter().map(|(&a, &x)| (a, x)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> Arc<[SyncWords]> {
        Arc::from(vec![SyncWords {
            name: "lock".into(),
            device: 0,
            addr: 0x1000,
            init: vec![0, 5],
            expect: vec![0, 5],
        }])
    }

    #[test]
    fn lanes_apply_in_order_from_the_declared_values() {
        let mut m = SyncMemory::new(words());
        assert_eq!(m.value(0x1004), 5);
        // 32 lanes add 1: the first sees the old value, the word moves by 32.
        assert_eq!(m.apply(0x1004, SyncOp::Add, 32, 1, 0), 5);
        assert_eq!(m.value(0x1004), 37);
        // Three lanes contend for a lock: one wins.
        assert_eq!(m.apply(0x1000, SyncOp::Cas, 3, 0, 1), 0);
        assert_eq!((m.stats.cas_won, m.stats.cas_lost), (1, 2));
        assert_eq!(m.apply(0x1000, SyncOp::Cas, 1, 0, 1), 1);
        assert_eq!(m.apply(0x1000, SyncOp::Exch, 1, 0, 0), 1);
        assert_eq!(m.apply(0x1000, SyncOp::Load, 1, 0, 0), 0);
        assert_eq!(m.written(), vec![(0x1000, 0), (0x1004, 37)]);
        assert_eq!(m.stats.requests, 5);
    }

    #[test]
    fn cuda_inc_and_dec_wrap_at_their_operand() {
        assert_eq!(SyncOp::Inc.apply(3, 3, 0), 0);
        assert_eq!(SyncOp::Inc.apply(2, 3, 0), 3);
        assert_eq!(SyncOp::Dec.apply(0, 3, 0), 3);
        assert_eq!(SyncOp::Dec.apply(5, 3, 0), 3);
        assert_eq!(SyncOp::Dec.apply(2, 3, 0), 1);
        assert_eq!(SyncOp::Min.apply(2, 3, 0), 2);
        assert_eq!(SyncOp::Max.apply(2, 3, 0), 3);
    }
}
