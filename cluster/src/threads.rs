//! The thread transport: `N` worker threads in one process, each owning a fixed set of
//! partitions and running its own [`crate::Engine`] over them, in lock-step windows.
//!
//! Per window there are two collectives, each one pass through a shared [`WindowBarrier`]:
//!
//! - [`Transport::exchange`]: each worker appends `mail[p]` for every partition `p` it does
//!   not host to the slot `(its worker, p)`, waits at the barrier, then appends every
//!   other worker's slot for each partition it hosts to its own `mail`. Every buffer is
//!   drained, never dropped, so none allocates once it has seen its largest window. The slots are double-buffered by the parity of the exchange,
//!   so a fast worker writing the next exchange never meets a slot its receiver has not
//!   drained yet (the receiver drained it before arriving at the barrier in between).
//! - [`Transport::reduce`]: each worker writes its [`WindowReport`] to its slot (double
//!   buffered the same way), waits at the barrier, and combines all slots in worker order.
//!
//! Slots are `Mutex`es although the barrier already orders every access: an uncontended
//! lock is one atomic operation, and it keeps this module free of `unsafe`.
//!
//! The barrier spins a bounded number of times on an atomic generation counter, then
//! sleeps on a condition variable; the last worker to arrive bumps the generation and
//! wakes sleepers only if there are any. So with as many workers as free cores a window
//! costs a few atomic operations and no syscall, and with more workers than cores they
//! still progress (the spinners give up and sleep). [`Transport::abort`] poisons the
//! barrier: every worker waiting or arriving later fails with [`Aborted`], so one failing
//! worker never leaves the others hanging. A worker that panics aborts too (on drop).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use tessera_interconnect::{Message, Picos};

use crate::transport::{Transport, WindowReport};
use crate::{BoxError, EngineError};

/// How partitions are dealt to workers (threads or MPI ranks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// Contiguous blocks, as even as possible (neighbouring partitions together: fewer
    /// messages cross workers).
    #[default]
    Contiguous,
    /// Partition `p` on worker `p mod W` (spreads partitions that are busy at the same
    /// time, such as GPUs whose kernels start one after another, over the workers).
    RoundRobin,
    /// By cost ([`deal_weighted`]): the costliest partitions first, each to the worker
    /// with the least cost so far, so that the workers' loads are as even as the costs
    /// allow. Needs a cost per partition (measured: a profile or an earlier run).
    Weighted,
}

impl std::str::FromStr for Placement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "contiguous" => Ok(Placement::Contiguous),
            "round_robin" => Ok(Placement::RoundRobin),
            "weighted" => Ok(Placement::Weighted),
            _ => Err(format!(
                "unknown placement '{s}': expected contiguous, round_robin or weighted"
            )),
        }
    }
}

impl Placement {
    /// The name `--placement` takes.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Contiguous => "contiguous",
            Placement::RoundRobin => "round_robin",
            Placement::Weighted => "weighted",
        }
    }

    /// The worker of partition `p` of `n` among `w` workers (`0 < w <= n`); a weighted
    /// placement without its costs is dealt as contiguous blocks here (see
    /// [`Placement::owners`]).
    pub fn owner(self, p: usize, n: usize, w: usize) -> usize {
        match self {
            Placement::Contiguous | Placement::Weighted => p * w / n,
            Placement::RoundRobin => p % w,
        }
    }

    /// The worker of every partition of `n` among `w` workers (`0 < w <= n`). A
    /// [`Placement::Weighted`] needs `hints.costs` (one per partition; without them, or
    /// with a wrong count, an error). With `hints.groups` of at least `w` groups,
    /// round-robin and weighted placements deal whole groups (a GPU's chiplets stay on
    /// one worker: their links are the fastest); contiguous blocks keep groups together
    /// by themselves when the workers divide them.
    pub fn owners(
        self,
        n: usize,
        w: usize,
        hints: PlacementHints<'_>,
    ) -> Result<Vec<usize>, String> {
        let costs = match (self, hints.costs) {
            (Placement::Weighted, Some(c)) if c.len() == n => Some(c),
            (Placement::Weighted, Some(c)) => {
                return Err(format!(
                    "weighted placement: {} costs for {n} partitions",
                    c.len()
                ))
            }
            (Placement::Weighted, None) => {
                return Err("weighted placement needs a cost per partition".into())
            }
            _ => None,
        };
        if let (Placement::Weighted, Some(rows)) = (self, hints.window_costs) {
            if !rows.is_empty() && rows.len() % n == 0 {
                return Ok(deal_by_windows(rows, n, w, hints.groups));
            }
        }
        let groups = hints
            .groups
            .filter(|g| g.len() == n)
            .map(|g| (g, g.iter().copied().max().map_or(0, |m| m + 1)))
            .filter(|&(_, count)| count >= w && self != Placement::Contiguous);
        if let Some((group, count)) = groups {
            let of_group = match costs {
                Some(c) => {
                    let mut gc = vec![0u64; count];
                    for (p, &g) in group.iter().enumerate() {
                        gc[g] = gc[g].saturating_add(c[p]);
                    }
                    deal_weighted(&gc, w)
                }
                None => (0..count).map(|g| g % w).collect(),
            };
            return Ok(group.iter().map(|&g| of_group[g]).collect());
        }
        Ok(match costs {
            Some(c) => deal_weighted(c, w),
            None => (0..n).map(|p| self.owner(p, n, w)).collect(),
        })
    }
}

/// What a placement may know of the partitions besides their number
/// ([`Placement::owners`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct PlacementHints<'a> {
    /// A measured cost per partition, for [`Placement::Weighted`].
    pub costs: Option<&'a [u64]>,
    /// A group per partition, numbered from 0 (a GPU's partitions: tightly coupled).
    pub groups: Option<&'a [usize]>,
    /// A profile's cost of every partition in every window (rows of one per partition),
    /// for [`Placement::Weighted`], which then minimizes the profile's critical path
    /// ([`deal_by_windows`]) rather than evening the totals.
    pub window_costs: Option<&'a [u32]>,
}

/// The host time of the critical path of a placement over a profile: the sum over windows
/// of the busiest worker's cost (`rows`: one cost per partition per window; `owner`: the
/// worker of each partition).
pub fn critical_path(rows: &[u32], owner: &[usize], w: usize) -> u64 {
    let n = owner.len();
    let mut load = vec![0u64; w];
    let mut total = 0u64;
    for row in rows.chunks_exact(n.max(1)) {
        load.iter_mut().for_each(|l| *l = 0);
        for (p, &c) in row.iter().enumerate() {
            load[owner[p]] += u64::from(c);
        }
        total += load.iter().copied().max().unwrap_or(0);
    }
    total
}

/// A placement of `n` partitions on `w` workers for windows that run in lock step: the one
/// of least [`critical_path`] over a profile's per-window costs (`rows`), found from the
/// contiguous, round-robin and longest-first placements (by group when `groups` has at
/// least `w` of them: a GPU's partitions move together) by moving one partition or group
/// at a time to another worker while that shortens the critical path. Evening the totals
/// is not enough: a worker whose partitions are busy in the windows where the others are
/// idle waits as long as an overloaded one. Deterministic for given costs.
pub fn deal_by_windows(rows: &[u32], n: usize, w: usize, groups: Option<&[usize]>) -> Vec<usize> {
    let w = w.clamp(1, n.max(1));
    // Units that move together: groups when there are enough of them, else partitions.
    let unit: Vec<usize> = match groups {
        Some(g) if g.len() == n && g.iter().copied().max().map_or(0, |m| m + 1) >= w => g.to_vec(),
        _ => (0..n).collect(),
    };
    let units = unit.iter().copied().max().map_or(0, |m| m + 1);
    // Per-window costs of each unit.
    let windows = rows.len() / n.max(1);
    let mut urows = vec![0u32; windows * units];
    for (r, row) in rows.chunks_exact(n.max(1)).enumerate() {
        for (p, &c) in row.iter().enumerate() {
            let e = &mut urows[r * units + unit[p]];
            *e = e.saturating_add(c);
        }
    }
    let totals: Vec<u64> = (0..units)
        .map(|u| {
            urows
                .iter()
                .skip(u)
                .step_by(units)
                .map(|&c| u64::from(c))
                .sum()
        })
        .collect();
    let candidates = [
        (0..units).map(|u| u * w / units).collect::<Vec<_>>(),
        (0..units).map(|u| u % w).collect(),
        deal_weighted(&totals, w),
    ];
    let mut best = candidates[0].clone();
    let mut best_cost = critical_path(&urows, &best, w);
    for c in &candidates[1..] {
        let cost = critical_path(&urows, c, w);
        if cost < best_cost {
            (best, best_cost) = (c.clone(), cost);
        }
    }
    // Local search: the first move that helps, until none does (bounded passes).
    for _ in 0..4 * units {
        let mut improved = false;
        for u in 0..units {
            let from = best[u];
            if best.iter().filter(|&&o| o == from).count() == 1 {
                continue; // every worker keeps a unit
            }
            for to in (0..w).filter(|&t| t != from) {
                best[u] = to;
                let cost = critical_path(&urows, &best, w);
                if cost < best_cost {
                    best_cost = cost;
                    improved = true;
                    break;
                }
                best[u] = from;
            }
        }
        if !improved {
            break;
        }
    }
    renumbered(unit.iter().map(|&u| best[u]).collect(), w)
}

/// `owner` with the workers renumbered in order of their lowest partition: worker 0 hosts
/// partition 0, the next new worker met is 1, and so on.
fn renumbered(owner: Vec<usize>, w: usize) -> Vec<usize> {
    let mut renum = vec![usize::MAX; w];
    let mut next = 0;
    for &o in &owner {
        if renum[o] == usize::MAX {
            renum[o] = next;
            next += 1;
        }
    }
    owner.iter().map(|&o| renum[o]).collect()
}

/// Longest processing time first: the partitions by cost, highest first (ties by index),
/// each to the worker with the least cost so far (ties: fewer partitions, then the lower
/// number); the workers are then numbered by their lowest partition. Every worker gets a
/// partition when `w <= costs.len()`. Deterministic: the same costs give the same map.
pub fn deal_weighted(costs: &[u64], w: usize) -> Vec<usize> {
    let n = costs.len();
    let w = w.clamp(1, n.max(1));
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&p| (std::cmp::Reverse(costs[p]), p));
    let mut load = vec![(0u64, 0usize); w];
    let mut owner = vec![0usize; n];
    for p in order {
        let best = (0..w).min_by_key(|&k| (load[k], k)).unwrap_or(0);
        owner[p] = best;
        load[best].0 = load[best].0.saturating_add(costs[p]);
        load[best].1 += 1;
    }
    renumbered(owner, w)
}

/// Which worker thread hosts each partition. Every worker hosts at least one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerMap {
    /// `owner[p]`: the worker hosting partition `p`.
    owner: Vec<usize>,
    /// `hosted[w]`: the partitions of worker `w`, ascending.
    hosted: Vec<Vec<usize>>,
}

impl WorkerMap {
    /// Contiguous blocks of partitions, as even as possible, in order: worker `w` hosts
    /// partitions `w * n / t .. (w + 1) * n / t`. `threads` above the partition count is
    /// clamped to it (a worker with no partition would only add barrier traffic); zero
    /// partitions or zero threads is an error.
    pub fn contiguous(partitions: usize, threads: usize) -> Result<WorkerMap, EngineError> {
        let t = Self::clamp(partitions, threads)?;
        WorkerMap::from_owners((0..partitions).map(|p| p * t / partitions).collect())
    }

    /// [`WorkerMap::contiguous`] or [`WorkerMap::round_robin`], as `placement` says (a
    /// weighted placement needs [`WorkerMap::place_with`]).
    pub fn place(
        partitions: usize,
        threads: usize,
        placement: Placement,
    ) -> Result<WorkerMap, EngineError> {
        WorkerMap::place_with(partitions, threads, placement, PlacementHints::default())
    }

    /// As `placement` says, with its hints ([`Placement::owners`]).
    pub fn place_with(
        partitions: usize,
        threads: usize,
        placement: Placement,
        hints: PlacementHints<'_>,
    ) -> Result<WorkerMap, EngineError> {
        let t = Self::clamp(partitions, threads)?;
        let owners = placement
            .owners(partitions, t, hints)
            .map_err(|detail| EngineError::BadTransport { detail })?;
        WorkerMap::from_owners(owners)
    }

    /// Round-robin: worker `w` hosts partitions `w, w + t, w + 2t, ...`. `threads` is
    /// clamped as in [`WorkerMap::contiguous`].
    pub fn round_robin(partitions: usize, threads: usize) -> Result<WorkerMap, EngineError> {
        let t = Self::clamp(partitions, threads)?;
        WorkerMap::from_owners((0..partitions).map(|p| p % t).collect())
    }

    fn clamp(partitions: usize, threads: usize) -> Result<usize, EngineError> {
        if partitions == 0 {
            return Err(EngineError::NoPartitions);
        }
        if threads == 0 {
            return Err(EngineError::BadTransport {
                detail: "zero worker threads".into(),
            });
        }
        Ok(threads.min(partitions))
    }

    /// Any assignment: `owner[p]` is the worker of partition `p`. The workers are
    /// `0..=max(owner)` and each must host at least one partition.
    pub fn from_owners(owner: Vec<usize>) -> Result<WorkerMap, EngineError> {
        let Some(&max) = owner.iter().max() else {
            return Err(EngineError::NoPartitions);
        };
        let mut hosted = vec![Vec::new(); max + 1];
        for (p, &w) in owner.iter().enumerate() {
            hosted[w].push(p);
        }
        if let Some(w) = hosted.iter().position(Vec::is_empty) {
            return Err(EngineError::BadTransport {
                detail: format!("worker {w} hosts no partition (owners {owner:?})"),
            });
        }
        Ok(WorkerMap { owner, hosted })
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> usize {
        self.owner.len()
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.hosted.len()
    }

    /// The worker hosting partition `p`.
    pub fn owner(&self, p: usize) -> Option<usize> {
        self.owner.get(p).copied()
    }

    /// The partitions of worker `w`, ascending.
    pub fn hosted(&self, w: usize) -> &[usize] {
        self.hosted.get(w).map_or(&[], Vec::as_slice)
    }

    /// Deals `partitions` (in global index order) out to the workers: element `w` is
    /// worker `w`'s partitions in [`WorkerMap::hosted`] order.
    pub fn split<P>(&self, partitions: Vec<P>) -> Result<Vec<Vec<P>>, EngineError> {
        if partitions.len() != self.owner.len() {
            return Err(EngineError::PartitionCountMismatch {
                given: partitions.len(),
                hosted: self.owner.len(),
            });
        }
        let mut out: Vec<Vec<P>> = self
            .hosted
            .iter()
            .map(|h| Vec::with_capacity(h.len()))
            .collect();
        // `hosted` lists are ascending, so pushing in index order keeps their order.
        for (p, part) in partitions.into_iter().enumerate() {
            out[self.owner[p]].push(part);
        }
        Ok(out)
    }

    /// The inverse of [`WorkerMap::split`]: the partitions back in global index order.
    pub fn join<P>(&self, per_worker: Vec<Vec<P>>) -> Result<Vec<P>, EngineError> {
        let mut iters: Vec<_> = per_worker.into_iter().map(Vec::into_iter).collect();
        if iters.len() != self.workers() {
            return Err(EngineError::BadTransport {
                detail: format!(
                    "{} workers handed back, {} expected",
                    iters.len(),
                    self.workers()
                ),
            });
        }
        let mut out = Vec::with_capacity(self.owner.len());
        for (p, &w) in self.owner.iter().enumerate() {
            let Some(part) = iters[w].next() else {
                return Err(EngineError::BadTransport {
                    detail: format!("worker {w} handed back no partition {p}"),
                });
            };
            out.push(part);
        }
        Ok(out)
    }
}

/// The error every worker but the failing one gets from a collective after
/// [`Transport::abort`] (or a worker's panic): the run is over, see the failing worker's
/// own error for why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted;

impl fmt::Display for Aborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("another worker failed; this one stopped")
    }
}

impl std::error::Error for Aborted {}

/// Spins before yielding. Each iteration is one or two atomic loads and a pause
/// instruction (tens of ns), so workers a few microseconds apart meet without a syscall.
const SPIN: u32 = 1 << 7;

/// Then yields the core this many times (a syscall each, but no sleep: a worker waiting
/// for one that shares its core lets it run), then sleeps.
const YIELDS: u32 = 64;

/// The window barrier: spin on a generation counter, then sleep; poisonable.
#[derive(Debug)]
struct WindowBarrier {
    workers: usize,
    arrived: AtomicUsize,
    generation: AtomicU64,
    aborted: AtomicBool,
    /// Workers asleep (or about to sleep) on `wake`; the releaser notifies only when some.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

impl WindowBarrier {
    fn new(workers: usize) -> Self {
        WindowBarrier {
            workers,
            arrived: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            aborted: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    fn guard(&self) -> MutexGuard<'_, ()> {
        // The mutex guards no data, so a poisoned one is as good as any.
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns when every worker has arrived, or `Aborted` once the barrier is poisoned.
    fn wait(&self) -> Result<(), Aborted> {
        // Read before arriving: the generation cannot move until this worker has arrived.
        let gen = self.generation.load(Ordering::SeqCst);
        if self.aborted.load(Ordering::SeqCst) {
            return Err(Aborted);
        }
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.workers {
            // Last to arrive. Nobody arrives at the next barrier before seeing the new
            // generation, so resetting the count first is safe.
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.store(gen.wrapping_add(1), Ordering::SeqCst);
            // SeqCst on both sides: either a sleeper sees the new generation before
            // sleeping, or this load sees the sleeper (and the lock makes the notify reach
            // it after it waits).
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                let _g = self.guard();
                self.wake.notify_all();
            }
            return Ok(());
        }
        for _ in 0..SPIN {
            if let Some(r) = self.passed(gen) {
                return r;
            }
            std::hint::spin_loop();
        }
        for _ in 0..YIELDS {
            std::thread::yield_now();
            if let Some(r) = self.passed(gen) {
                return r;
            }
        }
        let mut g = self.guard();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            if let Some(r) = self.passed(gen) {
                break r;
            }
            g = self.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Whether the barrier of generation `gen` is over: `Ok` once it completed, `Aborted`
    /// if it never will. The abort flag is read first: a worker may abort right after
    /// passing this barrier (its run ended in an error), and since it saw the new
    /// generation before aborting, so does the load after seeing its flag; only an abort by
    /// a worker that never arrived leaves the generation unchanged.
    fn passed(&self, gen: u64) -> Option<Result<(), Aborted>> {
        let aborted = self.aborted.load(Ordering::SeqCst);
        if self.generation.load(Ordering::SeqCst) != gen {
            Some(Ok(()))
        } else if aborted {
            Some(Err(Aborted))
        } else {
            None
        }
    }

    fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        let _g = self.guard();
        self.wake.notify_all();
    }
}

/// Keeps each worker's slot on its own cache lines, so writers do not slow each other.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker that panicked while holding a slot poisons the barrier too, so the data
    // is never used after that; recovering the guard avoids a second panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The least capacity of a buffer the exchange grows (a few KiB).
const MIN_MAIL: usize = 64;

/// `dst.append(src)`, growing `dst` to a power of two, at least [`MIN_MAIL`]. An exact-fit
/// reserve would leave no slack, so every slightly larger window would reallocate; and the
/// traffic of one worker-to-partition path, a fraction of a partition's, reaches its
/// largest window late, so small buffers would keep growing long into a run.
fn append(dst: &mut Vec<Message>, src: &mut Vec<Message>) {
    let need = dst.len() + src.len();
    if need > dst.capacity() {
        dst.reserve(need.next_power_of_two().max(MIN_MAIL) - dst.len());
    }
    dst.append(src);
}

/// One worker's contribution to a gather: every partition's next event (its own
/// partitions' entries are read) and its message count.
type NextSlot = (Vec<Picos>, WindowReport);

/// What the workers of one system share.
#[derive(Debug)]
struct Shared {
    map: WorkerMap,
    barrier: WindowBarrier,
    /// `mail[parity][src_worker * partitions + dst_partition]`.
    mail: [Vec<Padded<Mutex<Vec<Message>>>>; 2],
    /// `reports[parity][worker]`.
    reports: [Vec<Padded<Mutex<WindowReport>>>; 2],
    /// `nexts[parity][worker]`: a worker's next-event vector and message count
    /// ([`Transport::gather`]).
    nexts: [Vec<Padded<Mutex<NextSlot>>>; 2],
}

/// One worker's end of the thread transport; make them all with
/// [`ThreadTransport::for_workers`] and run one [`crate::Engine`] per worker, each on its
/// own thread, with the partitions [`WorkerMap::split`] gives that worker.
#[derive(Debug)]
pub struct ThreadTransport {
    shared: Arc<Shared>,
    worker: usize,
    exchanges: usize,
    reduces: usize,
    gathers: usize,
}

impl ThreadTransport {
    /// One transport per worker of `map`, in worker order.
    pub fn for_workers(map: &WorkerMap) -> Vec<ThreadTransport> {
        let slots = map.workers() * map.partition_count();
        let mail = || (0..slots).map(|_| Padded::default()).collect::<Vec<_>>();
        let reports = || {
            (0..map.workers())
                .map(|_| Padded::default())
                .collect::<Vec<_>>()
        };
        let nexts = || {
            (0..map.workers())
                .map(|_| {
                    Padded(Mutex::new((
                        vec![Picos::MAX; map.partition_count()],
                        WindowReport::default(),
                    )))
                })
                .collect::<Vec<_>>()
        };
        let shared = Arc::new(Shared {
            map: map.clone(),
            barrier: WindowBarrier::new(map.workers()),
            mail: [mail(), mail()],
            reports: [reports(), reports()],
            nexts: [nexts(), nexts()],
        });
        (0..map.workers())
            .map(|worker| ThreadTransport {
                shared: Arc::clone(&shared),
                worker,
                exchanges: 0,
                reduces: 0,
                gathers: 0,
            })
            .collect()
    }

    /// This worker's number.
    pub fn worker(&self) -> usize {
        self.worker
    }

    fn wait(&self) -> Result<(), BoxError> {
        self.shared
            .barrier
            .wait()
            .map_err(|a| Box::new(a) as BoxError)
    }

    /// A handle that poisons this system's barrier, for a runner that must stop workers it
    /// already started (a later worker's thread could not be created).
    pub(crate) fn abort_handle(&self) -> AbortHandle {
        AbortHandle(Arc::clone(&self.shared))
    }
}

/// Aborts every worker of one system ([`ThreadTransport::abort_handle`]).
pub(crate) struct AbortHandle(Arc<Shared>);

impl AbortHandle {
    pub(crate) fn abort(&self) {
        self.0.barrier.abort();
    }
}

impl Transport for ThreadTransport {
    fn partition_count(&self) -> usize {
        self.shared.map.partition_count()
    }

    fn hosted(&self) -> &[usize] {
        self.shared.map.hosted(self.worker)
    }

    fn exchange(&mut self, mail: &mut [Vec<Message>]) -> Result<(), BoxError> {
        let sh = &*self.shared;
        let n = sh.map.partition_count();
        if mail.len() != n {
            return Err(format!("{} mail buffers for {n} partitions", mail.len()).into());
        }
        let slots = &sh.mail[self.exchanges & 1];
        self.exchanges = self.exchanges.wrapping_add(1);
        let base = self.worker * n;
        for (p, buf) in mail.iter_mut().enumerate() {
            if sh.map.owner[p] == self.worker {
                continue;
            }
            if buf.capacity() < MIN_MAIL {
                // The engine fills this buffer one push at a time; it carries only this
                // worker's share of p's traffic, whose largest window comes late, so give
                // it room once rather than let it grow deep into the run.
                buf.reserve(MIN_MAIL);
            }
            if buf.is_empty() {
                continue;
            }
            // A copy rather than a swap of buffers: each buffer then keeps the capacity
            // its own path needs and stops growing as soon as that path's largest window
            // has been seen (swapped buffers would rotate and each grow on its own).
            append(&mut lock(&slots[base + p].0), buf);
        }
        self.wait()?;
        for &h in sh.map.hosted(self.worker) {
            for src in 0..sh.map.workers() {
                if src == self.worker {
                    continue;
                }
                let mut slot = lock(&slots[src * n + h].0);
                if !slot.is_empty() {
                    append(&mut mail[h], &mut slot);
                }
            }
        }
        Ok(())
    }

    fn reduce(&mut self, local: WindowReport) -> Result<WindowReport, BoxError> {
        let sh = &*self.shared;
        let slots = &sh.reports[self.reduces & 1];
        self.reduces = self.reduces.wrapping_add(1);
        *lock(&slots[self.worker].0) = local;
        self.wait()?;
        Ok(slots
            .iter()
            .fold(WindowReport::default(), |acc, s| acc.combine(*lock(&s.0))))
    }

    fn gather(
        &mut self,
        next: &mut [Picos],
        local: WindowReport,
    ) -> Result<WindowReport, BoxError> {
        let sh = &*self.shared;
        let n = sh.map.partition_count();
        if next.len() != n {
            return Err(format!("{} next events for {n} partitions", next.len()).into());
        }
        let slots = &sh.nexts[self.gathers & 1];
        self.gathers = self.gathers.wrapping_add(1);
        {
            let mut mine = lock(&slots[self.worker].0);
            mine.0.copy_from_slice(next);
            mine.1 = local;
        }
        self.wait()?;
        let mut total = WindowReport::default();
        for (w, slot) in slots.iter().enumerate() {
            let theirs = lock(&slot.0);
            for &q in sh.map.hosted(w) {
                next[q] = theirs.0[q];
            }
            total = total.combine(theirs.1);
        }
        Ok(total)
    }

    fn abort(&mut self) {
        self.shared.barrier.abort();
    }
}

impl Drop for ThreadTransport {
    fn drop(&mut self) {
        // A worker unwinding from a panic never reaches the next barrier: poison it so the
        // other workers fail instead of waiting forever.
        if std::thread::panicking() {
            self.shared.barrier.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_deal_partitions_and_clamp_threads() {
        let c = WorkerMap::contiguous(7, 3).unwrap();
        assert_eq!(c.hosted(0), &[0, 1, 2]);
        assert_eq!(c.hosted(1), &[3, 4]);
        assert_eq!(c.hosted(2), &[5, 6]);
        let r = WorkerMap::round_robin(7, 3).unwrap();
        assert_eq!(r.hosted(0), &[0, 3, 6]);
        assert_eq!(r.hosted(2), &[2, 5]);
        assert_eq!(WorkerMap::contiguous(2, 8).unwrap().workers(), 2);
        assert!(WorkerMap::contiguous(2, 0).is_err());
        assert!(WorkerMap::contiguous(0, 2).is_err());
        assert!(WorkerMap::from_owners(vec![0, 2]).is_err());
        let parts: Vec<u32> = (0..7).collect();
        let split = r.split(parts.clone()).unwrap();
        assert_eq!(split[1], vec![1, 4]);
        assert_eq!(r.join(split).unwrap(), parts);
        assert!(r.split(vec![1, 2]).is_err());
    }

    #[test]
    fn weighted_placement_evens_the_loads() {
        // One hot partition (85% of the work, as histogram's chiplet 0) and seven cool
        // ones on 2 workers: the hot one alone on one worker.
        let costs = [85, 2, 2, 2, 2, 2, 2, 3];
        let owners = deal_weighted(&costs, 2);
        assert_eq!(owners, vec![0, 1, 1, 1, 1, 1, 1, 1]);
        // Even costs on 4 workers: 2 partitions each, every worker used.
        let owners = deal_weighted(&[5; 8], 4);
        for w in 0..4 {
            assert_eq!(owners.iter().filter(|&&o| o == w).count(), 2);
        }
        // Zero costs still give every worker a partition.
        let owners = deal_weighted(&[0; 5], 5);
        let mut sorted = owners.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
        // The loads: 10 7 6 5 4 3 on 2 workers -> {10, 5, 3} and {7, 6, 4}: 18 and 17.
        let costs = [10, 7, 6, 5, 4, 3];
        let owners = deal_weighted(&costs, 2);
        let load0: u64 = (0..6).filter(|&p| owners[p] == 0).map(|p| costs[p]).sum();
        assert_eq!(load0, 18);
        assert_eq!(owners[0], 0, "worker 0 hosts partition 0");
        let none = PlacementHints::default();
        assert!(Placement::Weighted.owners(6, 2, none).is_err());
        let two = PlacementHints {
            costs: Some(&[1, 2]),
            ..PlacementHints::default()
        };
        assert!(Placement::Weighted.owners(6, 2, two).is_err());
        assert!(WorkerMap::place(6, 2, Placement::Weighted).is_err());
        let hints = PlacementHints {
            costs: Some(&costs),
            ..PlacementHints::default()
        };
        assert_eq!(
            WorkerMap::place_with(6, 2, Placement::Weighted, hints)
                .unwrap()
                .hosted(0),
            &[0, 3, 5]
        );
    }

    #[test]
    fn a_profile_of_windows_picks_the_shorter_critical_path() {
        // Partition 0 is hot in even windows, partitions 1 and 2 in odd ones, 3 always
        // light: the totals (0: 100, 1 and 2: 50, 3: 10) would put 0 alone (longest first:
        // {0}, {1, 2, 3}), but 1 and 2 are busy together, so {0, 1} and {2, 3} halve the
        // odd windows' wait. Rows: 10 windows of 4 partitions.
        let mut rows = Vec::new();
        for win in 0..10 {
            if win % 2 == 0 {
                rows.extend_from_slice(&[20, 0, 0, 1]);
            } else {
                rows.extend_from_slice(&[0, 10, 10, 1]);
            }
        }
        let lpt = deal_weighted(&[100, 50, 50, 10], 2);
        let best = deal_by_windows(&rows, 4, 2, None);
        assert!(critical_path(&rows, &best, 2) < critical_path(&rows, &lpt, 2));
        assert_eq!(critical_path(&rows, &best, 2), 5 * 20 + 5 * 11);
        assert_ne!(best[1], best[2], "the partitions busy together are split");
        let hints = PlacementHints {
            window_costs: Some(&rows),
            costs: Some(&[100, 50, 50, 10]),
            ..PlacementHints::default()
        };
        assert_eq!(Placement::Weighted.owners(4, 2, hints).unwrap(), best);
    }

    #[test]
    fn groups_stay_on_one_worker() {
        // Four GPUs of two chiplets on 2 workers: round robin deals GPUs 0, 2 and 1, 3.
        let groups = [0, 0, 1, 1, 2, 2, 3, 3];
        let hints = PlacementHints {
            groups: Some(&groups),
            ..PlacementHints::default()
        };
        let rr = Placement::RoundRobin.owners(8, 2, hints).unwrap();
        assert_eq!(rr, vec![0, 0, 1, 1, 0, 0, 1, 1]);
        // Weighted by GPU: GPU 0 is hot, alone on worker 0.
        let costs = [50, 50, 10, 10, 10, 10, 10, 10];
        let hints = PlacementHints {
            costs: Some(&costs),
            groups: Some(&groups),
            ..PlacementHints::default()
        };
        let w = Placement::Weighted.owners(8, 2, hints).unwrap();
        assert_eq!(w, vec![0, 0, 1, 1, 1, 1, 1, 1]);
        // More workers than groups: partitions are dealt one by one.
        let hints = PlacementHints {
            groups: Some(&[0, 0, 0, 0]),
            ..PlacementHints::default()
        };
        assert_eq!(
            Placement::RoundRobin.owners(4, 2, hints).unwrap(),
            vec![0, 1, 0, 1]
        );
        // Contiguous blocks ignore the groups.
        let hints = PlacementHints {
            groups: Some(&groups),
            ..PlacementHints::default()
        };
        assert_eq!(
            Placement::Contiguous.owners(8, 3, hints).unwrap(),
            (0..8).map(|p| p * 3 / 8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_barrier_keeps_more_workers_than_cores_in_step_and_aborts() {
        let workers = 8;
        let b = WindowBarrier::new(workers);
        let counter = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    for round in 0..200u64 {
                        // Every worker sees every increment of the previous round.
                        assert!(counter.load(Ordering::SeqCst) >= round * workers as u64);
                        counter.fetch_add(1, Ordering::SeqCst);
                        b.wait().unwrap();
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::SeqCst), 200 * workers as u64);
        std::thread::scope(|s| {
            for _ in 0..workers - 1 {
                s.spawn(|| assert_eq!(b.wait(), Err(Aborted)));
            }
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                b.abort();
            });
        });
        assert_eq!(b.wait(), Err(Aborted));
    }
}
