//! The memory hierarchy of one GPU (DESIGN.md section 5, "Memory hierarchy"), as units that
//! share no state and talk only through timed packets (the port contract):
//!
//! - [`LdStUnit`] (one per SM): the LD/ST unit's coalescer, the SM's L1D with its MSHRs,
//!   the shared-memory banks, and the SM's NoC ports.
//! - [`MemChannel`] (one per DRAM channel): the memory-side L2 slices homed at the channel
//!   and the channel itself; with `package.l2: private`, some of the chiplet's private L2
//!   slices, the LLC slice homed at the channel, and the channel.
//!
//! A unit is driven by its owner (the GPU partition, or the tests' `MemSystem` harness in
//! `partitions/tests/common/mem_system.rs`) in time order: [`LdStUnit::issue`] when a warp
//! issues a memory instruction,
//! [`LdStUnit::on_reply`] and [`MemChannel::on_packet`] when a packet arrives (packets to one
//! unit in `(arrive_at, source unit, source sequence)` order). Units send packets through a
//! [`Net`]; every packet crosses the NoC, so it arrives at least `noc.latency_cycles` after
//! it is sent, and where the units are simulated (one partition or several) never changes
//! what they compute.
//!
//! # Code map
//!
//! Hardware, one unit per file:
//! - `ldst.rs`: the LD/ST unit of an SM ([`LdStUnit`]): issue, the NoC ports, replies;
//!   `l1d.rs` its L1D (lookups, MSHRs, stores, write-backs, the kernel-boundary
//!   invalidation); `shared_mem.rs` its shared-memory banks; `coalesce.rs` its coalescer
//!   and the banks' pass count.
//! - `dram_channel.rs`: the DRAM channel unit's front end ([`MemChannel`]): packets in,
//!   replies out, host-to-device copies; `dram.rs` the DRAM timing model behind it.
//! - `l2_slice.rs`: the memory-side L2 slice, and the slice hardware (with its one lookup)
//!   that the private L2 and LLC slices share; `mshrs.rs` a slice's MSHRs.
//! - `private_l2.rs`: the private L2 slice (`package.l2: private`) and its kernel-boundary
//!   flush.
//! - `llc_slice.rs`: the LLC slice (`package.l2: private`).
//! - `link.rs`: a chiplet's link interface; `cache.rs` the sectored cache the L1D and the
//!   slices are built on; `port.rs` bandwidth-limited ports.
//!
//! What the units share: `message.rs` (the requests and responses they send, with their
//! context; the `Packet` and the `Net` they go through are `crate::packet`), `request.rs`
//! (a warp's memory instruction), `address_map.rs` ([`AddressMap`]: where a line lives,
//! from `unit_ids.rs` (unit numbering), `home.rs` (the home chiplet and GPU of an address)
//! and `dram_map.rs` (the DRAM address map)), `stats.rs` (the `memory` view of the stats
//! JSON). Each unit's parameters are beside it, made by one `from_config` each:
//! [`L1dParams`], [`SharedMemParams`], [`NocParams`] (`noc.rs`), [`LdStParams`],
//! [`L2SliceParams`], [`LlcSliceParams`], [`DramParams`], [`ChannelParams`],
//! [`LinkParams`]. Each unit declares its own counters beside it too (`L1dStats` in
//! `l1d.rs`, `L2SliceStats`, `LlcSliceStats`, `DramStats` in `dram_channel.rs`, `NocStats`
//! in `noc.rs`, ...), and reports events to an observer when one is attached
//! ([`crate::observe`]). The tests drive the units
//! without SMs through `MemSystem` (`partitions/tests/common/mem_system.rs`).
//!
//! Host speed only, nothing simulated depends on them: `fastdiv.rs` (division by a
//! config constant), `popcount.rs` (sectors of a mask), `tag_hash.rs` (the caches' tag
//! hashes), `mshr_index.rs` (the L1D MSHRs by line), `prefetch.rs` (loading the state a
//! visit is about to touch into the host's caches, and the homes computed for it).
//!
//! # The model (every number comes from the config)
//!
//! Time is integer picoseconds; each `_cycles` key is converted with its own clock's period
//! (DESIGN.md section 3). Bandwidth-limited resources are `port::BwPort` calendars with
//! exact fractional carry, so no port ever moves more than its configured bytes per cycle
//! over any window. Inside a unit, each resource gives a request the earliest free slot at
//! or after the time it gets there.
//!
//! - **Coalescing** ([`coalesce`]): the active lanes' byte ranges become one request per
//!   `l1d.line_bytes` line with a mask of its `l1d.sector_bytes` sectors (sm_70+
//!   GPGPU-Sim/Accel-Sim). The L1 handles one line per core cycle (its tag/data port).
//! - **L1D** (one per SM, `Global`, `Local` and `Const` accesses): sectored, `l1d.assoc`
//!   ways, LRU, set = line index mod sets. A load's sectors that are valid and ready hit:
//!   data at `t + l1d.hit_latency_cycles`. Missing sectors of a line take one of
//!   `l1d.mshrs` MSHRs and are requested from L2; a later load of sectors already
//!   requested merges with the MSHR (counted in `l1d_pending_hits` and as misses), one of
//!   new sectors of the same line adds a request to it. When every MSHR is busy, misses
//!   wait in order (`l1d_mshr_waits`) and leave when a fill frees one. The data is usable
//!   `l1d.hit_latency_cycles` after its reply has crossed the SM's NoC ingress (the fill
//!   and return pipeline); a warp instruction's result is written when its last line is.
//!   `l1d.mshr_max_merge` and `l1d.banks` are not modelled. `Const` is treated as a
//!   global load (no constant cache model yet); `Local` always goes through L1,
//!   `Global`/`Const` only with `l1d.enabled`. Stores follow `l1d.write_policy`:
//!   `write_through` updates present sectors and sends the data to L2; `write_evict` drops
//!   present sectors and sends it on; `write_back` (and `local_write_back` for `Local`)
//!   dirties the L1 line and writes it to L2 only on eviction or when the SM starts a CTA
//!   of another kernel. A store miss follows `l1d.write_allocate`: `no_allocate` leaves L1
//!   alone; `lazy_fetch_on_read` allocates the sectors the store covers entirely;
//!   `fetch_on_write` allocates every written sector (the fetch itself is not timed). With
//!   `l2.write_acks` (the default) every write packet of a store names the instruction
//!   and the slice that performs it (the memory-side L2 slice, or with a private L2 the
//!   chiplet's own slice) acknowledges it `l2.hit_latency_cycles` after it arrives, a
//!   header-only packet back across the NoC (and the links when the home is remote); the
//!   store is done, for its warp, when its last acknowledgement is in, so a fence waits
//!   for it and its CTA does not complete before (GPGPU-Sim's `m_stores_outstanding`). A
//!   store that sends nothing (an L1 write-back hit) is done after the L1 stage; L1
//!   write-backs are not acknowledged. Without `l2.write_acks` a store is done when its
//!   last packet has left the SM, and never before `now + l1d.hit_latency_cycles`. Atomics
//!   bypass L1 (dropping the L1 copy of their sectors), hold an MSHR, and are performed at
//!   the L2 slice.
//! - **Shared memory**: `shared_mem.latency_cycles` plus one core cycle per extra pass; the
//!   passes are the largest number of distinct `bank_bytes` words any of the `banks` banks
//!   must deliver ([`coalesce::shared_passes`]; same word = broadcast). The shared-memory
//!   port moves `banks * bank_bytes` per core cycle. No L1/L2 traffic.
//! - **NoC**: every SM and every L2 slice has an egress and an ingress port of
//!   `noc.bandwidth_bytes_per_cycle` at the NoC clock; a packet arrives `noc.latency_cycles`
//!   after it starts to leave (cut-through: serialization delays the packets behind it, not
//!   itself), and the receiver's ingress port serializes arrivals in packet order (the
//!   arbiter at the receiver). Packets carry an 8-byte header (GPGPU-Sim's control size)
//!   plus the data sectors: read request 8 B, read reply 8 B + data, write 8 B + data,
//!   write acknowledgement 8 B, atomic 8 B + data each way. With `noc.model: crossbar`
//!   (the default) every such packet also crosses the chiplet's crossbar (`crossbar.rs`):
//!   `latency_cycles / 2` NoC cycles to it, arbitration per output each NoC cycle (iSLIP
//!   over virtual output queues, or FIFO inputs with head-of-line blocking), the rest from
//!   it (assumed: the crossbar sits mid-way; each leg at least 1 cycle); a packet holds
//!   its input and output for its flits, which is then the NoC's serialization (the SMs'
//!   and slices' ports above do not delay it again). Its buffers are bounded by credits:
//!   each SM's input (`noc.input_buffer_flits`,
//!   the L1 miss queue `l1d.miss_queue_packets` behind it), each slice's request queue
//!   (`l2.request_queue_packets`, credits at the crossbar's output to the slice) and each
//!   slice's reply queue, its input to the reply network (`l2.reply_queue_packets`,
//!   credits at the slice, `slice_out.rs`: a slice whose reply waits takes no request);
//!   the link interfaces' queues from the crossbar (`package.link.noc_queue_packets`,
//!   credits at the crossbar's outputs to them); the inputs of link interfaces carry
//!   answers to requests the links' credits bound, and an SM takes a reply as it arrives. With
//!   `noc.model: ports` nothing bounds the NoC's buffers: the L1 MSHRs bound the reads in
//!   flight, the write acknowledgements the stores. The package links and the GPU fabric
//!   have credits (`link.rs`, `credits.rs`); the DRAM scheduler queue holds
//!   `dram.queue_entries` reads (`dram.rs`).
//! - **L2** (memory-side, `l2.slices` slices, `l2.slices / dram.channels` per channel): the
//!   slice of an address is `channel * per_channel + (local / l2.line_bytes) %
//!   per_channel`, where `channel` and the channel-local address `local` are the DRAM map
//!   below; inside the slice, set = `(local / l2.line_bytes / per_channel) % sets`. Each
//!   slice: `l2.size_bytes / l2.slices`, `l2.assoc` ways, LRU, sectored. A hit's reply
//!   leaves `l2.hit_latency_cycles` after the request arrives; missing sectors take one of
//!   `l2.mshrs_per_slice` MSHRs (a miss finding them all busy waits until the earliest
//!   frees: the slice knows when, since its DRAM channel is part of the same unit), are read
//!   from DRAM together (one burst of the missing sectors), fill the line and leave
//!   `l2.hit_latency_cycles` after the data is there. Replies cross the slice's data port
//!   (`l2.bandwidth_bytes_per_cycle` per L2 cycle). With `l2.write_back`, stores allocate
//!   their sectors dirty without a fetch and dirty sectors go to DRAM when their line is
//!   evicted; without it stores are written through. Atomics: read like a load, then the
//!   slice's ALU (one lane operation per L2 cycle) answers `l2.atomic_latency_cycles` after
//!   it starts; the line is dirtied.
//! - **Private L2 + LLC** (`package.l2: private`, the AMD-style hierarchy of the CPCoh study,
//!   dalmia-2023 section 5.4.1 and Fig. 5.1): a channel unit holds `l2.slices /
//!   dram.channels` of its chiplet's L2 slices, the LLC slice homed at its channel and the
//!   channel. An SM sends loads and stores to the L2 slice of *its own* chiplet that caches
//!   the line (line index `i`: slice `i % l2.slices`, set `i / l2.slices`,
//!   `AddressMap::private_slot`), whatever the line's home; atomics go to the home LLC slice
//!   (through the link interface when remote) and are performed there as at a memory-side
//!   slice. At the L2 slice a load's valid sectors hit as above; its missing sectors join
//!   the line's MSHR when one is in flight (`l2_pending_hits`, asking the LLC only for
//!   sectors not yet requested), else take one of `l2.mshrs_per_slice` (a miss finding none
//!   waits in order, `l2_mshr_waits`, and starts when a fill frees one) and leave at once
//!   as an `LlcRead` to the line's home LLC slice (over the NoC, plus the links when
//!   remote). The LLC slice (`llc.size_bytes / dram.channels`, `llc.assoc` ways, LRU,
//!   sectored, write-back) answers `llc.hit_latency_cycles` after the request is in, or
//!   reads its DRAM channel on a miss as a memory-side slice does (`llc.mshrs_per_slice`);
//!   the reply crosses its data port and NoC egress. The L2 fills the line when the reply
//!   is in (a line homed on another chiplet only with `package.cache_remote_reads`; a dirty
//!   victim is written back to its home LLC) and answers each waiting SM that has all its
//!   sectors `l2.hit_latency_cycles` later. An unloaded L2 miss that hits the LLC of its
//!   own chiplet thus costs an L2 hit plus 2 NoC traversals plus `llc.hit_latency_cycles`.
//!   Stores to lines homed on the chiplet are written into L2 (write-back, allocate without
//!   fetch, with `l2.write_back`); stores to remote lines are written through to the home
//!   LLC (updating an L2 copy, never allocating one), so only local lines are ever dirty.
//!   At every kernel boundary (`gpu/global_cp.rs`, `gpu/local_cp.rs`) each L2 slice sends its dirty sectors to their
//!   home LLC through its NoC egress (`l2_flush_writeback_sectors`) and invalidates every
//!   line (`l2_flush_invalidated_lines`), keeping the tags marked: a later read miss on a
//!   sector a flush invalidated while its line still holds its way is a lost inter-kernel
//!   hit (`l2_flush_lost_hits`). L1s are handled as with a memory-side L2 (an SM's dirty L1
//!   sectors reach the L2 after the flush, when the SM starts the next kernel's CTA). Not
//!   modelled: coherence of an L2 copy with a store of another chiplet inside a kernel (the
//!   model is timing-only), write acknowledgements from the LLC, L2 copies of lines an
//!   atomic changes at the home.
//! - **Several GPUs** (`system.gpus` > 1): a page's GPU is the device of the first `Alloc`
//!   command covering it (`GpuHomes`; pages no `Alloc` covers: GPU 0), its chiplet inside
//!   that GPU `package.home`'s; channels are numbered across the system, so the home
//!   channel of a line names its GPU. An SM's request for another GPU's line (a peer
//!   access, `peer_requests`) goes through its chiplet's link interface and the GPU switch
//!   (`link.rs`) to the home L2 slice, which serves it as any request: the requesting GPU's
//!   L2 never holds it (a memory-side L2 caches only its own lines; the SM's L1D treats it
//!   as any global line).
//! - **DRAM** (`dram.rs`): `chunk = addr / dram.interleave_bytes`, `channel = chunk %
//!   channels`, `local = (chunk / channels) * interleave_bytes + addr % interleave_bytes`,
//!   then banks and rows inside the channel (see `dram.rs`).
//!
//! Unloaded, a pointer chase therefore sees exactly the composition of docs/config.md:
//! L1 hit; L1 hit + 2 x NoC + L2 hit; + `dram.latency_ps` + the row-buffer timing.
//!
//! A `MemcpyHtoD` with `memcpy.fills_l2` installs the copied sectors in the L2 slices that
//! home them, clean, and only the last `l2.size_bytes` of a larger copy (what LRU would
//! leave); with a private L2, in the LLC slices that home them (the last `llc.size_bytes`
//! per chiplet), and the private L2s start cold. L1s are not coherent across kernels: an SM invalidates its L1D when it receives
//! a CTA of a kernel other than its last one, sending dirty sectors of write-back L1s to L2.

pub mod coalesce;
pub mod message;

mod address_map;
mod cache;
pub(crate) mod credits;
pub(crate) mod crossbar;
pub(crate) mod dram;
pub(crate) mod dram_channel;
mod dram_map;
mod fastdiv;
pub(crate) mod home;
pub(crate) mod l1d;
pub(crate) mod l2_slice;
mod ldst;
pub mod ldst_sync;
pub(crate) mod link;
pub(crate) mod llc_slice;
mod mshr_index;
mod mshrs;
pub(crate) mod noc;
mod popcount;
mod port;
mod prefetch;
mod private_l2;
mod request;
pub(crate) mod shared_mem;
mod slice_out;
mod stats;
pub mod sync_memory;
mod tag_hash;
mod unit_ids;

pub use address_map::AddressMap;
pub use credits::CreditStats;
pub use crossbar::{CrossbarUnit, CrossbarUnitStats, XbarError};
pub use dram::DramParams;
pub use dram_channel::{ChannelParams, ChannelStats, DramStats, MemChannel};
pub use l1d::{L1dParams, L1dStats};
pub use l2_slice::{L2SliceParams, L2SliceStats};
pub use ldst::{Issued, LdStParams, LdStStats, LdStUnit};
pub use link::{LinkInterface, LinkParams, LinkReport, RouteError};
pub use llc_slice::{LlcSliceParams, LlcSliceStats};
pub use message::{Ctx, CtxError, Request, Response, SyncOp};
pub use noc::{NocParams, NocStats};
pub use private_l2::PrivateL2Stats;
pub use request::{Access, MemRequest, Space};
pub use shared_mem::{SharedMemParams, SharedMemStats};
pub use stats::MemStats;
pub use unit_ids::{Unit, UnitIds};

pub(crate) use dram_map::DramMap;
use mshrs::Mshrs;
use popcount::popcount;

use crate::packet::{Net, Packet, HEADER_BYTES};
