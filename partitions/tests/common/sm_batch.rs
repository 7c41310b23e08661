//! A test driver for the SM core alone (`tessera_partitions::sm`): runs a batch of CTAs,
//! all resident at once, on one SM to completion with a placeholder memory. Shared by the
//! SM tests and the `sm_cycle` bench (each includes this file with `#[path]`).

use std::sync::Arc;
use tessera_partitions::sm::{
    KernelPrep, MemIssue, MemPort, MemToken, Sm, SmError, SmSpec, SmStats,
};
use tessera_traces::{CtaStream, DecodedCta, KernelMeta, LaneAddrSource, SlotInfo, WarpInst};

/// How [`run_cta_batch_with`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmOptions {
    /// Step one cycle at a time even when no warp can issue (the reference the idle-skipping
    /// default must equal; slower, for tests).
    pub tick_every_cycle: bool,
    /// Fill [`SmStats::barrier_log`] and [`SmStats::issue_log`].
    pub record_log: bool,
}

/// The placeholder memory of the batch driver (no memory system): every memory instruction takes its class's
/// latency from [`SmSpec`] (not a model).
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

/// Runs `ctas` (CTAs of `kernel`, all resident at once) on one SM to completion and
/// returns its counters; idle cycles are skipped.
pub fn run_cta_batch(
    spec: &SmSpec,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
) -> Result<SmStats, SmError> {
    run_cta_batch_with(spec, kernel, ctas, &SmOptions::default())
}

/// [`run_cta_batch`] with options. Memory instructions take the placeholder latency of
/// [`SmSpec::mem_placeholder_latency_cycles`].
pub fn run_cta_batch_with(
    spec: &SmSpec,
    kernel: &KernelMeta,
    ctas: &[DecodedCta],
    opts: &SmOptions,
) -> Result<SmStats, SmError> {
    let n_warps: u64 = ctas.iter().map(|c| c.warps.len() as u64).sum();
    let table: Arc<[SlotInfo]> = SlotInfo::table(kernel).into();
    if n_warps > spec.warp_slots as u64 {
        return Err(SmError::TooManyWarps {
            warps: n_warps,
            slots: spec.warp_slots,
        });
    }
    let mut sm = Sm::new(Arc::new(spec.clone()), 0, opts.record_log);
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
    Ok(sm.finish(0, end))
}
