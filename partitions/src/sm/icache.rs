//! Instruction fetch through the SM's I-cache (`core.icache`, switchable): a warp's next
//! instruction is fetched when it issues the previous one (its first when its CTA
//! arrives), through an LRU set-associative I-cache addressed by a per-kernel code base
//! (from the kernel's name, so relaunches share lines) plus the PC; it is available after
//! `hit_latency_cycles`, or `miss_latency_cycles` when its line is not there (the line is
//! filled then; a fetch of a line still being filled waits for it and counts as a hit).
//! Waiting for an instruction counts as `stall_scoreboard`. Disabled: fetch is free.

use super::params::IcacheParams;
use super::warp::WarpState;
use crate::config::{section, Kind, MAX_CYCLES};
use crate::counters::unit_counters;

section! {
    /// The instruction cache of each SM (misses go to L2 over the NoC).
    pub struct IcacheConfig {
        /// Model instruction fetch through the I-cache; `false` is a perfect I-cache (every
        /// fetch hits). Presets: `true` (the hardware has one).
        enabled: bool = Kind::Bool, unit "-", None;
        /// Capacity. Presets: the simulator config's `-gpgpu_cache:il1`.
        size_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 1 << 20);
        /// Ways per set. Presets: as `size_bytes`.
        assoc: u32 = Kind::U32, unit "ways", None, range (1, 4096);
        /// Line size (power of two). Presets: as `size_bytes`.
        line_bytes: u32 = Kind::U32, unit "bytes", None, range (1, 4096);
        /// Cycles from fetch to instruction available on a hit. Presets: assumed 1 (GPGPU-Sim
        /// delivers a hit the next cycle; no study measures it).
        hit_latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
        /// Cycles from fetch to instruction available on a miss (the line comes from L2;
        /// a fixed latency, not a request to the memory system yet). Presets: the L2-hit
        /// latency a load sees minus the L1 hit, or the preset's NoC and L2 latencies.
        miss_latency_cycles: u32 = Kind::U32, unit "core cycles", None, range (1, MAX_CYCLES);
    }
}

unit_counters! {
    /// Instruction fetches through the I-cache (one per warp instruction; 0 when
    /// `core.icache.enabled` is false), and those that missed (lines filled).
    pub struct IcacheStats {
        accesses,
        misses,
    }
}

/// One line: its line address plus one (0 = invalid), when it was last used (a counter
/// of accesses, so LRU order is exact and deterministic) and when its fill completes.
#[derive(Clone, Copy, Default)]
struct Line {
    tag: u64,
    used: u64,
    ready_at: u64,
}

/// Mutable state of an SM's I-cache.
pub(super) struct Icache {
    params: IcacheParams,
    /// `log2(line_bytes)` when a power of two (always, in the presets): every fetch maps
    /// its address to a line, and a shift is a cycle where a division is tens.
    line_shift: Option<u32>,
    lines: Vec<Line>,
    clock: u64,
}

impl Icache {
    pub fn new(params: IcacheParams) -> Self {
        Icache {
            params,
            line_shift: params
                .line_bytes
                .is_power_of_two()
                .then(|| params.line_bytes.trailing_zeros()),
            lines: vec![Line::default(); params.sets as usize * params.assoc as usize],
            clock: 0,
        }
    }

    /// Fetches the instruction at byte address `addr` at cycle `c`; returns the cycle it
    /// is available and whether it hit. A miss evicts the least recently used way of the
    /// set (an invalid one first) and fills it after the miss latency.
    ///
    /// `hint` is the caller's guess of the index of the line (any value will do; a warp
    /// keeps the one of its previous fetch, usually the same line): when the line is
    /// there it skips the search of the set, and it is set to the line's index.
    #[inline(always)]
    pub fn fetch(&mut self, addr: u64, c: u64, hint: &mut u32) -> (u64, bool) {
        let s = &self.params;
        let line = match self.line_shift {
            Some(k) => addr >> k,
            None => addr / s.line_bytes.max(1) as u64,
        };
        let tag = line + 1;
        self.clock += 1;
        // A line address is in at most one way (of its own set): a match is that line.
        if let Some(l) = self.lines.get_mut(*hint as usize).filter(|l| l.tag == tag) {
            l.used = self.clock;
            return (l.ready_at.max(c + s.hit_latency_cycles as u64), true);
        }
        let set = (line % s.sets as u64) as usize;
        let first = set * s.assoc as usize;
        let ways = &mut self.lines[first..first + s.assoc as usize];
        if let Some(i) = ways.iter().position(|l| l.tag == tag) {
            *hint = (first + i) as u32;
            let l = &mut ways[i];
            l.used = self.clock;
            return (l.ready_at.max(c + s.hit_latency_cycles as u64), true);
        }
        // Invalid lines have `used == 0`, so the minimum takes them first.
        let mut victim = 0;
        for (i, l) in ways.iter().enumerate() {
            if l.used < ways[victim].used {
                victim = i;
            }
        }
        let ready_at = c + s.miss_latency_cycles as u64;
        *hint = (first + victim) as u32;
        ways[victim] = Line {
            tag,
            used: self.clock,
            ready_at,
        };
        (ready_at, false)
    }
}

/// Fetches warp `ws`'s next instruction, at `pc` of the kernel whose code is at
/// `code_base`, at cycle `c` through the I-cache; a free function so that it borrows only
/// what it touches.
#[inline(always)]
pub(super) fn fetch(
    ic: &mut Icache,
    code_base: u64,
    stats: &mut IcacheStats,
    ws: &mut WarpState,
    pc: u32,
    c: u64,
) {
    let (at, hit) = ic.fetch(code_base | pc as u64, c, &mut ws.line_hint);
    ws.fetch_at = at;
    stats.accesses += 1;
    stats.misses += u64::from(!hit);
}
