//! The memory counters as the stats JSON shows them (`memory` of each chiplet): a view
//! assembled from the counters the memory units own ([`LdStStats`], [`ChannelStats`]),
//! whose key names and order are the stats layout.

use super::{ChannelStats, LdStStats};
use serde::Serialize;

macro_rules! mem_stats {
    ($(#[$m:meta])* pub struct $name:ident { $( $(#[$doc:meta])* $field:ident ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
        pub struct $name {
            $( $(#[$doc])* pub $field: u64, )*
        }

        impl $name {
            /// Adds every counter of `o`.
            pub fn add(&mut self, o: &$name) {
                $( self.$field += o.$field; )*
            }
        }
    };
}

mem_stats! {
    /// Integer counters of the memory hierarchy, summed over units in unit order. L1D, L2
    /// and LLC counters count sectors; `l1d_hits + l1d_misses = l1d_accesses` and likewise
    /// for L2 and LLC. The L1D counters count the loads and stores that use an L1D (not
    /// atomics, nor global/const accesses with `l1d.enabled: false`).
    pub struct MemStats {
        /// Sector accesses of loads and stores that go through an L1D.
        l1d_accesses,
        /// L1D sector accesses that hit.
        l1d_hits,
        /// L1D sector accesses that missed (pending hits included).
        l1d_misses,
        /// L2 sector accesses (of the memory-side or private L2 slices).
        l2_accesses,
        /// L2 sector accesses that hit.
        l2_hits,
        /// L2 sector accesses that missed (pending hits included).
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
        /// Request packets that waited in an SM's L1 miss queue for credit at its NoC
        /// crossbar input (`noc.model: crossbar`): the "no credit" stall of the SMs' NoC
        /// ports.
        noc_credit_waits,
        /// Picoseconds those packets waited, summed.
        noc_credit_wait_ps,
        /// Replies and write acknowledgements that found their slice's reply queue (its
        /// crossbar input, `l2.reply_queue_packets`) full and waited in the slice: the "no
        /// credit" stall of the slices.
        noc_reply_credit_waits,
        /// Picoseconds those packets waited, summed.
        noc_reply_credit_wait_ps,
        /// Requests a slice held back in its request queue while a reply of its waited
        /// for room in its reply queue (how the reply side pushes back on the requests).
        l2_held_requests,
        /// DRAM bytes read.
        dram_read_bytes,
        /// DRAM bytes written.
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
        /// LLC sector accesses that hit.
        llc_hits,
        /// LLC sector accesses that missed.
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
}

impl MemStats {
    /// Adds the counters of an SM's LD/ST unit.
    pub fn add_ldst(&mut self, s: &LdStStats) {
        let (l1, sh) = (&s.l1d, &s.shared);
        self.l1d_accesses += l1.accesses;
        self.l1d_hits += l1.hits;
        self.l1d_misses += l1.misses;
        self.l1d_pending_hits += l1.pending_hits;
        self.l1d_miss_requests += l1.miss_requests;
        self.l1d_mshr_waits += l1.mshr_waits;
        self.l1d_writeback_sectors += l1.writeback_sectors;
        self.shared_accesses += sh.accesses;
        self.shared_bank_conflicts += sh.bank_conflicts;
        self.global_requests += s.global_requests;
        self.remote_requests += s.remote_requests;
        self.peer_requests += s.peer_requests;
        self.noc_request_bytes += s.noc.request_bytes;
        self.noc_reply_bytes += s.noc.reply_bytes;
        self.noc_credit_waits += s.credit_waits;
        self.noc_credit_wait_ps += s.credit_wait_ps;
    }

    /// Adds the counters of a channel unit (L2 slices, LLC slice, DRAM).
    pub fn add_channel(&mut self, s: &ChannelStats) {
        let (l2, p, llc, d) = (&s.l2, &s.private_l2, &s.llc, &s.dram);
        self.l2_accesses += l2.accesses;
        self.l2_hits += l2.hits;
        self.l2_misses += l2.misses;
        self.l2_pending_hits += l2.pending_hits;
        self.l2_mshr_waits += l2.mshr_waits;
        self.l2_writeback_sectors += l2.writeback_sectors;
        // Atomics are performed at the line's home: a memory-side L2 slice, or the LLC.
        self.l2_atomics += l2.atomics + llc.atomics;
        self.memcpy_l2_sectors += l2.memcpy_sectors;
        self.l2_flush_writeback_sectors += p.flush_writeback_sectors;
        self.l2_flush_invalidated_lines += p.flush_invalidated_lines;
        self.l2_flush_lost_hits += p.flush_lost_hits;
        self.llc_remote_requests += p.llc_remote_requests;
        self.llc_accesses += llc.accesses;
        self.llc_hits += llc.hits;
        self.llc_misses += llc.misses;
        self.llc_writeback_sectors += llc.writeback_sectors;
        self.memcpy_llc_sectors += llc.memcpy_sectors;
        self.dram_reads += d.reads;
        self.dram_writes += d.writes;
        self.dram_bytes += d.bytes;
        self.dram_read_bytes += d.read_bytes;
        self.dram_write_bytes += d.write_bytes;
        self.noc_request_bytes += s.noc.request_bytes;
        self.noc_reply_bytes += s.noc.reply_bytes;
        self.noc_reply_credit_waits += s.reply_queue.credit_waits;
        self.noc_reply_credit_wait_ps += s.reply_queue.credit_wait_ps;
        self.l2_held_requests += s.reply_queue.held_requests;
    }
}
