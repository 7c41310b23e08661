//! The progress watchdog (issue 24, DESIGN.md section 6): a run whose simulated system can
//! no longer make progress (a spin on a flag nobody sets, a lock never released, a grid
//! barrier over more CTAs than the GPU holds) ends with a report instead of running on.
//!
//! It is evaluated at fixed multiples of simulated time (`watchdog.check_cycles`), where
//! the engine pauses every partition at the same instant, from counters summed over the
//! whole system (a global reduction under MPI), so its verdict never depends on windows,
//! threads, ranks or cuts. Progress is a warp instruction taken from the trace (not a
//! spin body issued again), a lane leaving a spin region with its exit condition
//! satisfied, or a CTA dispatched or completed. With no progress for
//! `watchdog.livelock_cycles` while spin regions go round, the run stops: a **deadlock**
//! when every live warp waits at a barrier or in a spin region whose last round read the
//! same values as the one before (nothing it reads is changing), else a **livelock** (the
//! values move, as a lock word toggled by warps that never get in, but nothing gets done).

use crate::config::{section, Kind, MAX_CYCLES};
use serde::Serialize;

section! {
    /// The progress watchdog of runs with spin regions (issue 24): how often it looks and
    /// how long a system may go without progress while warps spin.
    pub struct WatchdogConfig {
        /// Core cycles between two checks (a pause of every partition at the same
        /// simulated time). Presets: the default, 10,000.
        check_cycles: u64 = Kind::U64, unit "cycles", Some("10000"), range (1, MAX_CYCLES);
        /// Core cycles without progress, while spin regions go round, after which the run
        /// ends as a deadlock or livelock (rounded up to a multiple of `check_cycles`).
        /// Presets: the default, 500,000 (a critical section longer than that, with no
        /// other warp progressing meanwhile, would be taken for a livelock).
        livelock_cycles: u64 = Kind::U64, unit "cycles", Some("500000"), range (1, MAX_CYCLES);
        /// A checking mode for tests and model development: each lane that leaves a spin
        /// region whose exit reads a compare-and-swap holds that word (a lock) from then
        /// until it writes the word again (its release); after a complete run no two
        /// holders of one word may overlap in simulated time, else the run ends with an
        /// error naming both. Keeps one record per acquisition (memory grows with them).
        check_lock_holders: bool = Kind::Bool, unit "-", Some("false");
    }
}

/// What the watchdog reads at a check, summed over the system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchdogSample {
    /// Progress events so far (see the module doc).
    pub progress: u64,
    /// Spin-region rounds so far.
    pub spin_rounds: u64,
    /// Warps not finished, and of them those waiting at a barrier or spinning on values
    /// that did not change in their last round.
    pub live_warps: u64,
    pub stuck_warps: u64,
}

impl WatchdogSample {
    /// The sample as words (for a reduction), and back.
    pub fn words(&self) -> [u64; 4] {
        [
            self.progress,
            self.spin_rounds,
            self.live_warps,
            self.stuck_warps,
        ]
    }

    pub fn from_words(w: [u64; 4]) -> WatchdogSample {
        WatchdogSample {
            progress: w[0],
            spin_rounds: w[1],
            live_warps: w[2],
            stuck_warps: w[3],
        }
    }

    pub fn add(&mut self, o: &WatchdogSample) {
        self.progress += o.progress;
        self.spin_rounds += o.spin_rounds;
        self.live_warps += o.live_warps;
        self.stuck_warps += o.stuck_warps;
    }
}

/// What the watchdog concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Deadlock,
    Livelock,
}

impl Verdict {
    /// Its name in the stats and on stderr.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Deadlock => "deadlock",
            Verdict::Livelock => "livelock",
        }
    }
}

/// The watchdog's state between checks.
#[derive(Clone, Debug)]
pub struct Watchdog {
    livelock_cycles: u64,
    last: WatchdogSample,
    /// The cycle of the check at which progress last moved, and the spin rounds then.
    since: u64,
    rounds_then: u64,
}

impl Watchdog {
    pub fn new(livelock_cycles: u64) -> Watchdog {
        Watchdog {
            livelock_cycles,
            last: WatchdogSample::default(),
            since: 0,
            rounds_then: 0,
        }
    }

    /// The check at core cycle `cycle` with the system's `sample`: a verdict when the
    /// system has made no progress for `livelock_cycles` while spin regions went round.
    pub fn check(&mut self, cycle: u64, sample: WatchdogSample) -> Option<Verdict> {
        if sample.progress != self.last.progress {
            self.since = cycle;
            self.rounds_then = sample.spin_rounds;
        }
        self.last = sample;
        let spinning = sample.spin_rounds > self.rounds_then;
        if !spinning || cycle.saturating_sub(self.since) < self.livelock_cycles {
            return None;
        }
        Some(if sample.stuck_warps >= sample.live_warps {
            Verdict::Deadlock
        } else {
            Verdict::Livelock
        })
    }

    /// The cycle from which no progress was made.
    pub fn since(&self) -> u64 {
        self.since
    }
}

/// An unfinished warp when the watchdog stopped the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct WaitingWarp {
    /// Its SM (index across the system).
    pub sm: u32,
    /// Its kernel (index in the trace).
    pub kernel: u32,
    /// Its CTA's coordinates.
    pub cta: [u32; 3],
    /// Its warp id in the CTA.
    pub warp: u32,
    /// The PC of its next instruction.
    pub pc: u32,
    /// `barrier`, `spin` (in a spin region), or `ready` (neither: waiting on memory or
    /// its turn).
    pub state: String,
    /// Present when the warp is in a spin region: where and on what it spins.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spin: Option<SpinWait>,
}

/// Where a warp spins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SpinWait {
    /// The region's first PC.
    pub region_pc: u32,
    /// What leaving the region means (the trace's label, `lock acquired`).
    pub label: String,
    /// The lanes still spinning.
    pub lane_mask: u32,
    /// The rounds the warp has gone in the region.
    pub rounds: u32,
    /// The values its last round read, by value index (the first spinning lane's).
    pub values: Vec<u64>,
}

/// Why and where the progress watchdog stopped the run (issue 24).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WatchdogReport {
    /// `deadlock` (every unfinished warp waits at a barrier or spins on values that no
    /// longer change) or `livelock` (warps spin on changing values, but nothing progresses).
    pub verdict: String,
    /// The check that stopped the run.
    pub cycle: u64,
    /// The check from which nothing progressed.
    pub no_progress_since_cycle: u64,
    /// The unfinished warps, by SM (at most 64).
    pub warps: Vec<WaitingWarp>,
    /// How many warps were unfinished.
    pub live_warps: u64,
    /// Every sync word whose value is not its initial one (at most 64).
    pub sync_words: Vec<SyncWordValue>,
}

/// A sync word in the watchdog's report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SyncWordValue {
    /// The declaration's name and the word's index in it (`locks[17]`).
    pub name: String,
    /// The word's address.
    pub addr: u64,
    /// Its value when the run stopped.
    pub value: u64,
}

/// Warps listed in a report (the rest are counted).
pub const MAX_REPORTED_WARPS: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    fn s(progress: u64, spin_rounds: u64, stuck: u64) -> WatchdogSample {
        WatchdogSample {
            progress,
            spin_rounds,
            live_warps: 4,
            stuck_warps: stuck,
        }
    }

    #[test]
    fn a_verdict_only_after_the_whole_window_without_progress_while_spinning() {
        let mut w = Watchdog::new(30);
        assert_eq!(w.check(10, s(5, 1, 4)), None);
        assert_eq!(w.check(20, s(5, 9, 4)), None);
        assert_eq!(w.check(30, s(5, 20, 4)), None);
        // 30 cycles since the progress seen at 10.
        assert_eq!(w.check(40, s(5, 30, 4)), Some(Verdict::Deadlock));
        // Progress resets it; spinning with changing values is a livelock.
        let mut w = Watchdog::new(20);
        assert_eq!(w.check(10, s(1, 0, 0)), None);
        assert_eq!(w.check(20, s(2, 5, 0)), None);
        assert_eq!(w.check(40, s(2, 9, 1)), Some(Verdict::Livelock));
        // No spinning, no verdict (a long memory wait is not a livelock).
        let mut w = Watchdog::new(10);
        assert_eq!(w.check(10, s(1, 3, 4)), None);
        assert_eq!(w.check(50, s(1, 3, 4)), None);
    }
}
