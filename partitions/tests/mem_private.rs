//! The private-L2 hierarchy (`package.l2: private`, DESIGN.md section 5 "Memory hierarchy")
//! on `configs/radeon7-4chiplet.yaml` (the CPCoh baseline of dalmia-2023 Table 5.1): load
//! latencies against the composition of the config (L2 hit, L2 miss to the local and to a
//! remote LLC slice), what the L2s cache, merging and MSHR limits, atomics at the home, the
//! kernel-boundary write-back and invalidation with its lost-hit counter, and a memory-side
//! L2 with the same sequence counting none of it.

mod common;
#[path = "common/mem_system.rs"]
mod mem_system;
use mem_system::MemSystem;

use common::{preset, request};
use tessera_partitions::config::GpuConfig;
use tessera_partitions::mem::{Access, MemStats};
use tessera_partitions::Picos;

fn cfg(sets: &[(&str, &str)]) -> GpuConfig {
    // Exact compositions: no refresh.
    preset(
        "radeon7-4chiplet.yaml",
        &[sets, &[("dram.t_refi_ps", "0")]].concat(),
    )
}

/// One lane loading the word at `addr` from SM `sm` at `t`; returns its latency.
fn load(m: &mut MemSystem, t: Picos, sm: u32, addr: u64) -> Picos {
    m.access(t, sm, &request(Access::Load, 4, &[(0, addr)])) - t
}

/// A full 64 B line stored from SM `sm` at `t` (16 lanes of 4 B).
fn store_line(m: &mut MemSystem, t: Picos, sm: u32, line: u64) {
    let lanes: Vec<(u32, u64)> = (0..16u32).map(|l| (l, line + 4 * l as u64)).collect();
    m.access(t, sm, &request(Access::Store, 4, &lanes));
}

/// L1 hit + 2 NoC traversals + L2 hit: a load's latency on an L2 hit (docs/config.md).
fn l2_hit_ps(c: &GpuConfig) -> Picos {
    c.l1d.hit_latency_cycles as u64 * c.core_period_ps()
        + 2 * c.noc.latency_cycles as u64 * c.noc_period_ps()
        + c.l2.hit_latency_cycles as u64 * c.l2_period_ps()
}

/// What an LLC hit in the L2's own chiplet adds to an L2 hit: the request and reply cross
/// the NoC, and the LLC slice's hit latency.
fn llc_local_ps(c: &GpuConfig) -> Picos {
    2 * c.noc.latency_cycles as u64 * c.noc_period_ps()
        + c.llc.hit_latency_cycles as u64 * c.l2_period_ps()
}

// Home chiplets: 4 KiB pages interleave over the 4 chiplets, so page 0 is homed at chiplet 0
// (SMs 0-59) and page 1 at chiplet 1.
const LOCAL: u64 = 0;
const REMOTE: u64 = 4096;

#[test]
fn loads_compose_l2_hit_local_llc_and_remote_llc() {
    let c = cfg(&[]);
    let mut m = MemSystem::new(&c);
    // memcpy.fills_l2 with a private L2 fills the LLC at the home; the L2s start cold.
    m.memcpy_to_device(0, 64 * 1024);
    assert_eq!(m.stats().memcpy_llc_sectors, 1024);
    assert_eq!(m.stats().memcpy_l2_sectors, 0);
    // L2 miss, LLC hit on this chiplet.
    let t = load(&mut m, 0, 0, LOCAL);
    assert_eq!(t, l2_hit_ps(&c) + llc_local_ps(&c));
    // Another SM of the chiplet: its L1 misses, the L2 now hits.
    let t2 = load(&mut m, 10 * t, 1, LOCAL);
    assert_eq!(t2, l2_hit_ps(&c));
    // A remote line: through the switch (two link traversals) each way.
    let link = c.package.link.latency_ps;
    let r = load(&mut m, 20 * t, 0, REMOTE);
    assert!(
        r > l2_hit_ps(&c) + llc_local_ps(&c) + 4 * link,
        "{r} ps: no link latency in a remote LLC access"
    );
    // package.cache_remote_reads: the remote line is now in chiplet 0's L2.
    assert_eq!(load(&mut m, 40 * r, 2, REMOTE), l2_hit_ps(&c));
    let s = m.stats();
    assert_eq!((s.l2_hits, s.l2_misses), (2, 2));
    assert_eq!((s.llc_accesses, s.llc_hits, s.llc_misses), (2, 2, 0));
    assert_eq!(s.llc_remote_requests, 1);
    assert_eq!(s.dram_reads, 0);
}

#[test]
fn remote_reads_bypass_the_l2_without_cache_remote_reads() {
    let c = cfg(&[("package.cache_remote_reads", "false")]);
    let mut m = MemSystem::new(&c);
    m.memcpy_to_device(0, 64 * 1024);
    let r1 = load(&mut m, 0, 0, REMOTE);
    let r2 = load(&mut m, 10 * r1, 1, REMOTE);
    assert_eq!(r1, r2, "both go to the remote LLC");
    // Local lines are still cached.
    let a = load(&mut m, 20 * r1, 0, LOCAL);
    assert_eq!(load(&mut m, 20 * r1 + 10 * a, 1, LOCAL), l2_hit_ps(&c));
    assert_eq!(m.stats().llc_accesses, 3);
}

#[test]
fn misses_merge_and_wait_for_mshrs() {
    // Two SMs miss on one line at once: one LLC read (an L2 pending hit).
    let c = cfg(&[]);
    let mut m = MemSystem::new(&c);
    m.issue(0, 0, &request(Access::Load, 4, &[(0, LOCAL)]));
    m.issue(0, 1, &request(Access::Load, 4, &[(0, LOCAL)]));
    assert_eq!(m.run().len(), 2);
    let s = m.stats();
    assert_eq!((s.l2_misses, s.l2_pending_hits, s.llc_accesses), (2, 1, 1));
    // One MSHR per slice: a second line of the same slice (16 slices of 64 B lines) waits
    // for the first's fill.
    let c = cfg(&[("l2.mshrs_per_slice", "1")]);
    let mut m = MemSystem::new(&c);
    m.memcpy_to_device(0, 4096);
    m.issue(0, 0, &request(Access::Load, 4, &[(0, LOCAL)]));
    m.issue(0, 1, &request(Access::Load, 4, &[(0, LOCAL + 16 * 64)]));
    let done = m.run();
    assert_eq!(done.len(), 2);
    let s = m.stats();
    assert_eq!((s.l2_mshr_waits, s.llc_accesses), (1, 2));
    let one = l2_hit_ps(&c) + llc_local_ps(&c);
    assert_eq!(done.iter().map(|d| d.1).min(), Some(one));
    assert!(done.iter().map(|d| d.1).max().unwrap_or(0) > one);
}

#[test]
fn atomics_are_performed_at_the_home_llc() {
    let c = cfg(&[]);
    let mut m = MemSystem::new(&c);
    let lanes: Vec<(u32, u64)> = (0..4u32).map(|l| (l, REMOTE + 4 * l as u64)).collect();
    m.access(0, 0, &request(Access::Atomic, 4, &lanes));
    let s = m.stats();
    assert_eq!((s.l2_atomics, s.l2_accesses, s.llc_accesses), (1, 0, 1));
    assert_eq!(s.remote_requests, 1, "the SM sends it to the home chiplet");
}

/// Stores a local and a remote line, crosses a kernel boundary, reloads both from another SM
/// of the same chiplet; returns the counters and the two reload latencies.
fn boundary_run(c: &GpuConfig) -> (MemStats, Picos, Picos) {
    let mut m = MemSystem::new(c);
    m.memcpy_to_device(0, 64 * 1024);
    store_line(&mut m, 0, 0, LOCAL);
    store_line(&mut m, 0, 0, REMOTE + 64);
    // Read the remote line's neighbour so that chiplet 0's L2 holds a clean remote line.
    load(&mut m, 0, 0, REMOTE);
    m.run();
    m.kernel_boundary();
    m.run();
    let t0 = 1_000_000_000;
    let a = load(&mut m, t0, 1, LOCAL);
    let b = load(&mut m, 2 * t0, 1, REMOTE);
    (m.stats(), a, b)
}

#[test]
fn kernel_boundaries_write_back_and_invalidate_the_l2() {
    let c = cfg(&[]);
    let (s, a, _) = boundary_run(&c);
    // The local store was written back into L2 (dirty), the remote one written through.
    assert_eq!(s.l2_flush_writeback_sectors, 1);
    // Invalidated: the dirty local line and the clean remote line.
    assert_eq!(s.l2_flush_invalidated_lines, 2);
    // Both reloads miss in L2 on lines the flush invalidated: lost inter-kernel hits.
    assert_eq!(s.l2_flush_lost_hits, 2);
    // The written-back line is in the LLC (a hit there), not DRAM.
    assert_eq!(a, l2_hit_ps(&c) + llc_local_ps(&c));
    assert_eq!(s.dram_reads, 0);
    assert_eq!(s.llc_misses, 0);
}

#[test]
fn a_memory_side_l2_has_no_flush_and_no_llc() {
    let c = cfg(&[("package.l2", "memory_side")]);
    let (s, a, _) = boundary_run(&c);
    assert_eq!(
        (
            s.l2_flush_writeback_sectors,
            s.l2_flush_invalidated_lines,
            s.l2_flush_lost_hits
        ),
        (0, 0, 0)
    );
    assert_eq!((s.llc_accesses, s.memcpy_llc_sectors), (0, 0));
    // The local line still hits in its memory-side L2 slice after the boundary.
    assert_eq!(a, l2_hit_ps(&c));
}
