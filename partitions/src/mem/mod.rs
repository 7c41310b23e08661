//! The memory hierarchy of one GPU (DESIGN.md section 5, "Memory hierarchy"): LD/ST
//! coalescing into 32-byte sectors of 128-byte lines, per-SM L1D, the NoC, memory-side L2
//! slices and DRAM channels.
//!
//! API contract (the GPU loop relies on it): [`MemSystem::access`] is called in
//! nondecreasing `now_ps` order (ties in a fixed order chosen by the caller) and returns
//! when the instruction's result is available; resources are modeled as queues whose
//! state advances only through these calls, so the same call sequence always gives the
//! same times.
//!
//! FIRST VERSION (being replaced): every access takes the L1 hit latency. Not a model.

use crate::config::GpuConfig;
use serde::Serialize;
use tessera_interconnect::Picos;

/// What a memory instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Load,
    Store,
    /// Atomics and reductions: performed at the L2 slice of the address.
    Atomic,
}

/// Which memory a memory instruction addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Local,
    Shared,
    Const,
}

/// One warp memory instruction.
#[derive(Clone, Copy, Debug)]
pub struct MemRequest<'a> {
    /// The issuing SM.
    pub sm: u32,
    pub access: Access,
    pub space: Space,
    /// Bytes per lane.
    pub width_bytes: u32,
    /// `(lane, address)` of each active lane, in lane order.
    pub lanes: &'a [(u32, u64)],
}

/// Integer counters of the memory hierarchy (summed over units; ratios are computed by
/// whoever prints them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemStats {
    pub l1d_accesses: u64,
    pub l1d_hits: u64,
    pub l1d_misses: u64,
    pub l2_accesses: u64,
    pub l2_hits: u64,
    pub l2_misses: u64,
    pub dram_reads: u64,
    pub dram_writes: u64,
    pub dram_bytes: u64,
    pub shared_accesses: u64,
    pub shared_bank_conflicts: u64,
}

/// The memory hierarchy of one GPU.
pub struct MemSystem {
    l1_hit_ps: Picos,
    stats: MemStats,
}

impl MemSystem {
    pub fn new(cfg: &GpuConfig) -> MemSystem {
        MemSystem {
            l1_hit_ps: cfg.l1d.hit_latency_cycles as Picos * cfg.core_period_ps(),
            stats: MemStats::default(),
        }
    }

    /// Performs `req` issued at `now_ps`; returns when its result is available (loads,
    /// atomics) or its data accepted (stores).
    pub fn access(&mut self, now_ps: Picos, req: &MemRequest<'_>) -> Picos {
        if req.space == Space::Shared {
            self.stats.shared_accesses += 1;
        } else {
            self.stats.l1d_accesses += 1;
        }
        now_ps + self.l1_hit_ps
    }

    /// A host-to-device copy (the trace's `MemcpyHtoD`): with `memcpy.fills_l2`, the copied
    /// lines are left in L2.
    pub fn memcpy_to_device(&mut self, _addr: u64, _bytes: u64) {}

    /// Kernel boundary: L1s are not coherent and are invalidated before the next kernel.
    pub fn kernel_boundary(&mut self) {}

    pub fn stats(&self) -> &MemStats {
        &self.stats
    }
}
