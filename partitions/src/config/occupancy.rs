//! CUDA's occupancy calculation (`cudaOccMaxActiveBlocksPerMultiprocessor` in the CUDA
//! toolkit's `cuda_occupancy.h`), over the occupancy keys of [`CoreConfig`]: resident CTAs
//! per SM are the least of the limits by warp slots, CTA slots, registers (allocated per
//! warp, rounded up to `register_alloc_granularity`, counted per register-file partition)
//! and shared memory (plus the per-CTA reservation, rounded up to
//! `shared_mem_alloc_granularity_bytes`).

use crate::sm::params::CoreConfig;

/// Which resource bounds the resident CTAs per SM. On a tie the first in this order is
/// reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OccupancyLimit {
    /// Warp slots (`core.max_warps_per_sm`, i.e. threads).
    Threads,
    /// CTA slots (`core.max_ctas_per_sm`).
    Ctas,
    /// The register file.
    Registers,
    /// Shared memory.
    SharedMemory,
}

/// The result of the occupancy calculation for one kind of CTA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// Resident CTAs per SM: the least of the four limits below (at least 1).
    pub ctas: u32,
    /// The binding limit.
    pub limited_by: OccupancyLimit,
    /// CTAs allowed by warp slots.
    pub by_threads: u32,
    /// CTAs allowed by CTA slots.
    pub by_ctas: u32,
    /// CTAs allowed by registers (`u32::MAX` for a kernel using none).
    pub by_registers: u32,
    /// CTAs allowed by shared memory (`u32::MAX` when a CTA allocates none).
    pub by_shared_memory: u32,
    /// Warps of one CTA.
    pub warps_per_cta: u32,
    /// Registers allocated to one warp.
    pub registers_per_warp: u32,
    /// Shared memory allocated to one CTA, reservation and rounding included.
    pub shared_mem_per_cta_bytes: u32,
}

/// A CTA that can never be resident on an SM of the config.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "a CTA of {threads_per_cta} threads, {regs_per_thread} registers, {shmem_bytes} bytes of \
     shared memory can never fit on an SM of this config: {reason}"
)]
pub struct CtaFitError {
    /// Threads per CTA asked for.
    pub threads_per_cta: u32,
    /// Registers per thread asked for.
    pub regs_per_thread: u32,
    /// Shared memory per CTA asked for.
    pub shmem_bytes: u32,
    /// Which limit it breaks.
    pub reason: String,
}

fn round_up(x: u64, unit: u64) -> u64 {
    x.div_ceil(unit) * unit
}

pub(super) fn occupancy(
    core: &CoreConfig,
    threads_per_cta: u32,
    regs_per_thread: u32,
    shmem_bytes: u32,
) -> Result<Occupancy, CtaFitError> {
    let never = |reason: String| CtaFitError {
        threads_per_cta,
        regs_per_thread,
        shmem_bytes,
        reason,
    };
    if threads_per_cta == 0 {
        return Err(never("a CTA has at least one thread".into()));
    }
    if threads_per_cta > core.max_threads_per_cta {
        return Err(never(format!(
            "more threads than core.max_threads_per_cta ({})",
            core.max_threads_per_cta
        )));
    }
    if regs_per_thread > core.max_registers_per_thread {
        return Err(never(format!(
            "more registers per thread than core.max_registers_per_thread ({})",
            core.max_registers_per_thread
        )));
    }
    let warp = core.warp_size.max(1) as u64;
    let warps_per_cta = (threads_per_cta as u64).div_ceil(warp);

    // Warp slots and CTA slots.
    let by_threads = core.max_warps_per_sm as u64 / warps_per_cta;
    let by_ctas = core.max_ctas_per_sm as u64;

    // Registers: allocated per warp, from one of the register-file partitions.
    let regs_per_warp = round_up(
        regs_per_thread as u64 * warp,
        core.register_alloc_granularity.max(1) as u64,
    );
    let by_registers = if regs_per_warp == 0 {
        u32::MAX as u64
    } else {
        let partitions = core.register_file_partitions.max(1) as u64;
        let allocated = regs_per_warp * warps_per_cta;
        // The hardware's per-CTA check assumes the warps spread over all partitions.
        let assumed = regs_per_warp * round_up(warps_per_cta, partitions);
        let limit = core.max_registers_per_cta as u64;
        if allocated > limit || assumed > limit {
            return Err(never(format!(
                "{} registers per CTA ({} per warp) exceed core.max_registers_per_cta ({limit})",
                allocated.max(assumed),
                regs_per_warp
            )));
        }
        let warps_per_partition = core.registers_per_sm as u64 / partitions / regs_per_warp;
        warps_per_partition * partitions / warps_per_cta
    };

    // Shared memory: request plus reservation, rounded up to the allocation unit.
    let reserved = core.shared_mem_reserved_per_cta_bytes as u64;
    let smem_per_cta = round_up(
        shmem_bytes as u64 + reserved,
        core.shared_mem_alloc_granularity_bytes.max(1) as u64,
    );
    if smem_per_cta > core.max_shared_mem_per_cta_bytes as u64 + reserved {
        return Err(never(format!(
            "{smem_per_cta} bytes of shared memory per CTA (with the {reserved} B reservation \
             and rounding) exceed core.max_shared_mem_per_cta_bytes ({}) plus the reservation",
            core.max_shared_mem_per_cta_bytes
        )));
    }
    let by_shared_memory = (core.shared_mem_per_sm_bytes as u64)
        .checked_div(smem_per_cta)
        .unwrap_or(u32::MAX as u64);

    let limits = [
        (OccupancyLimit::Threads, by_threads),
        (OccupancyLimit::Ctas, by_ctas),
        (OccupancyLimit::Registers, by_registers),
        (OccupancyLimit::SharedMemory, by_shared_memory),
    ];
    let (limited_by, ctas) = limits
        .iter()
        .copied()
        .min_by_key(|&(_, n)| n)
        .expect("four limits");
    if ctas == 0 {
        let reason = match limited_by {
            OccupancyLimit::Threads => format!(
                "{warps_per_cta} warps exceed core.max_warps_per_sm ({})",
                core.max_warps_per_sm
            ),
            OccupancyLimit::Ctas => "core.max_ctas_per_sm is 0".into(),
            OccupancyLimit::Registers => format!(
                "{warps_per_cta} warps of {regs_per_warp} registers do not fit in \
                 core.registers_per_sm ({}) split into {} partitions",
                core.registers_per_sm, core.register_file_partitions
            ),
            OccupancyLimit::SharedMemory => format!(
                "{smem_per_cta} bytes of shared memory exceed core.shared_mem_per_sm_bytes ({})",
                core.shared_mem_per_sm_bytes
            ),
        };
        return Err(never(reason));
    }
    let clamp = |n: u64| n.min(u32::MAX as u64) as u32;
    Ok(Occupancy {
        ctas: clamp(ctas),
        limited_by,
        by_threads: clamp(by_threads),
        by_ctas: clamp(by_ctas),
        by_registers: clamp(by_registers),
        by_shared_memory: clamp(by_shared_memory),
        warps_per_cta: clamp(warps_per_cta),
        registers_per_warp: clamp(regs_per_warp),
        shared_mem_per_cta_bytes: clamp(smem_per_cta),
    })
}
