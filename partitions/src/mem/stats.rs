//! The counters of the memory units.

use serde::Serialize;

macro_rules! mem_stats {
    ($( $(#[$doc:meta])* $field:ident ),* $(,)?) => {
        /// Integer counters of the memory hierarchy (each unit keeps its own; totals are
        /// sums in unit order). L1D and L2 counters count sectors; `l1d_hits + l1d_misses =
        /// l1d_accesses` and likewise for L2. The L1D counters count the loads and stores
        /// that use an L1D (not atomics, nor global/const accesses with `l1d.enabled:
        /// false`).
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
        pub struct MemStats {
            $( $(#[$doc])* pub $field: u64, )*
        }

        impl MemStats {
            /// Adds every counter of `o`.
            pub fn add(&mut self, o: &MemStats) {
                $( self.$field += o.$field; )*
            }
        }
    };
}

mem_stats! {
    /// Sector accesses of loads and stores that go through an L1D.
    l1d_accesses,
    l1d_hits,
    l1d_misses,
    l2_accesses,
    l2_hits,
    l2_misses,
    /// DRAM sector reads (fills of L2 misses).
    dram_reads,
    /// DRAM sector writes (L2 write-backs, or write-through stores).
    dram_writes,
    /// DRAM bytes read and written.
    dram_bytes,
    /// Warp shared-memory instructions.
    shared_accesses,
    /// Extra shared-memory passes caused by bank conflicts.
    shared_bank_conflicts,
    /// Warp global/local/const instructions (loads, stores, atomics).
    global_requests,
    /// L1D sector misses that merged with a fill already in flight (included in misses).
    l1d_pending_hits,
    /// L1D miss requests (one per line, plus one per later request of new sectors of a
    /// line already in flight) sent to L2.
    l1d_miss_requests,
    /// L1D misses that found every MSHR busy and waited.
    l1d_mshr_waits,
    /// L2 sector misses that merged with a fill already in flight (included in misses).
    l2_pending_hits,
    /// L2 miss requests that found every MSHR of their slice busy and waited.
    l2_mshr_waits,
    /// Dirty L2 sectors written back on eviction: to DRAM (memory-side L2), or to the home
    /// LLC (private L2).
    l2_writeback_sectors,
    /// Dirty L1D sectors written to L2 (write-back L1 policies).
    l1d_writeback_sectors,
    /// Warp atomic instructions performed at L2 (per line touched).
    l2_atomics,
    /// NoC bytes from SMs to L2 slices (headers included).
    noc_request_bytes,
    /// NoC bytes from L2 slices to SMs (headers included).
    noc_reply_bytes,
    dram_read_bytes,
    dram_write_bytes,
    /// L2 sectors installed by host-to-device copies.
    memcpy_l2_sectors,
    /// Request packets (reads, writes, atomics) an SM sent to a line homed on another
    /// chiplet (through the link interfaces).
    remote_requests,
    /// LLC sector accesses (`package.l2: private`; 0 with a memory-side L2): L2 misses,
    /// write-through and written-back stores, atomics. `llc_hits + llc_misses =
    /// llc_accesses`.
    llc_accesses,
    llc_hits,
    llc_misses,
    /// Dirty LLC sectors written back to DRAM.
    llc_writeback_sectors,
    /// Request packets (reads and writes) private L2 slices sent to the LLC slice of a line
    /// homed on another chiplet (through the link interfaces).
    llc_remote_requests,
    /// LLC sectors installed by host-to-device copies (`package.l2: private`).
    memcpy_llc_sectors,
    /// Dirty L2 sectors written back to their home LLC by kernel-boundary flushes.
    l2_flush_writeback_sectors,
    /// Valid L2 lines invalidated by kernel-boundary flushes.
    l2_flush_invalidated_lines,
    /// L2 read sector misses on a line whose tag a kernel-boundary flush invalidated while
    /// the sector was valid (the line still in its way): the inter-kernel hits the flushes
    /// lost (included in `l2_misses`).
    l2_flush_lost_hits,
    /// Request packets (reads, writes, atomics) an SM sent to a line homed on another GPU
    /// (`system.gpus` > 1: peer memory, through the GPU switch; not in `remote_requests`,
    /// which counts the other chiplets of the SM's own GPU).
    peer_requests,
}
