//! A test driver for the SM core alone (`tessera_partitions::sm`): runs a batch of CTAs,
//! all resident at once, on one SM to completion with a placeholder memory. Shared by the
//! SM tests and the `sm_cycle` bench (each includes this file with `#[path]`).

use std::ops::Deref;
use std::sync::{Arc, Mutex};
use tessera_partitions::observe::{Observer, Probe};
use tessera_partitions::sm::{
    BarrierEvent, IssueEvent, KernelPrep, MemIssue, MemPort, MemToken, Sm, SmError, SmParams,
    SmStats,
};
use tessera_traces::{CtaStream, DecodedCta, KernelMeta, LaneAddrSource, SlotInfo, WarpInst};

/// How [`run_cta_batch_with`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmOptions {
    /// Step one cycle at a time even when no warp can issue (the reference the idle-skipping
    /// default must equal; slower, for tests).
    pub tick_every_cycle: bool,
    /// Fill [`BatchStats::barrier_log`] and [`BatchStats::issue_log`].
    pub record_log: bool,
}

/// What a batch run counted, and the issues and barriers an observer logged (empty unless
/// recorded). Reads as its [`SmStats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    pub stats: SmStats,
    pub issue_log: Vec<IssueEvent>,
    pub barrier_log: Vec<BarrierEvent>,
}

impl Deref for BatchStats {
    type Target = SmStats;
    fn deref(&self) -> &SmStats {
        &self.stats
    }
}

/// An observer logging an SM's issues and barriers in order.
#[derive(Default)]
pub struct Recorder {
    issues: Mutex<Vec<IssueEvent>>,
    barriers: Mutex<Vec<BarrierEvent>>,
}

impl Observer for Recorder {
    fn issue(&self, _: u32, e: &IssueEvent) {
        self.issues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(*e);
    }
    fn barrier(&self, _: u32, e: &BarrierEvent) {
        self.barriers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(e.clone());
    }
}

impl Recorder {
    /// Attaches a new recorder to `sm`.
    pub fn attach(sm: &mut Sm) -> Arc<Recorder> {
        let r = Arc::new(Recorder::default());
        sm.observe(Probe::new(0, r.clone()));
        r
    }

    /// `stats` with the events logged so far.
    pub fn with(&self, stats: SmStats) -> BatchStats {
        BatchStats {
            stats,
            issue_log: take(&self.issues),
            barrier_log: take(&self.barriers),
        }
    }
}

/// The placeholder memory of the batch driver (no memory system): every memory instruction takes its class's
/// latency from [`SmParams`] (not a model).
pub struct PlaceholderMem;

impl MemPort for PlaceholderMem {
    fn access(
        &mut self,
        cycle: u64,
        _: LaneAddrSource<'_>,
        _: &WarpInst,
        _: MemToken,
        latency: u32,
    ) -> MemIssue {
        MemIssue::Done(cycle + latency as u64)
    }
}

/// Empties a log.
fn take<T>(v: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *v.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Runs `ctas` (CTAs of `kernel`, all resident at once) on one SM to completion and
/// returns its counters; idle cycles are skipped.
pub fn run_cta_batch(
    spec: &SmParams,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
) -> Result<BatchStats, SmError> {
    run_cta_batch_with(spec, kernel, ctas, &SmOptions::default())
}

/// [`run_cta_batch`] with options. Memory instructions take the placeholder latency of
/// [`SmParams::mem_placeholder_latency_cycles`].
pub fn run_cta_batch_with(
    spec: &SmParams,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
    opts: &SmOptions,
) -> Result<BatchStats, SmError> {
    let n_warps: u64 = ctas.iter().map(|c| c.warps.len() as u64).sum();
    let table: Arc<[SlotInfo]> = SlotInfo::table(kernel).into();
    if n_warps > spec.warp_slots as u64 {
        return Err(SmError::TooManyWarps {
            warps: n_warps,
            slots: spec.warp_slots,
        });
    }
    let mut sm = Sm::new(Arc::new(spec.clone()), 0);
    let rec = opts.record_log.then(|| Recorder::attach(&mut sm));
    sm.set_kernel(Arc::new(KernelPrep::new(kernel)))?;
    for (i, c) in ctas.iter().enumerate() {
        let stream = CtaStream::from_decoded(c, table.clone()).map_err(|e| SmError::Trace {
            cta: i as u32,
            detail: e.0,
        })?;
        sm.add_cta(stream, i as u64)?;
    }
    let mut mem = PlaceholderMem;
    while sm.live_warps() > 0 {
        let Some(next) = sm.next_issue() else {
            // The placeholder answers at once, so no reply is pending: a deadlock.
            return Err(sm.check_deadlock().expect_err("no warp can issue"));
        };
        if !opts.tick_every_cycle {
            sm.advance_to(next);
        }
        sm.step(&mut mem);
    }
    let end = sm.now().max(sm.results_done_at());
    let stats = sm.finish(0, end);
    Ok(match rec {
        Some(r) => r.with(stats),
        None => BatchStats {
            stats,
            ..BatchStats::default()
        },
    })
}
