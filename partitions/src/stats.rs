//! The stats of a simulation run (DESIGN.md sections 3 and 8): simulated quantities only,
//! integer counters summed in unit order, ratios computed once at the end, serialized in
//! the fixed key order of the struct declarations below (`stats_version`, `config`,
//! `totals`, `kernels`, `chiplets`, `links`).
//!
//! Each unit type declares its own counters beside it (`sm::SmStats` with the scheduler,
//! operand-collector and I-cache counters, `mem::LdStStats` with the L1D and shared-memory
//! counters, `mem::ChannelStats` with the L2, LLC and DRAM counters, the link interface's
//! `LinkEntry`s). At the end of a run every unit registers them by unit id in a
//! [`StatsRegistry`]; [`crate::gpu::merge_stats`] merges the registries of all partitions
//! in unit-id order and assembles the JSON views (`ChipletStats`, `MemStats`) from them, so
//! the result depends on neither the partitioning nor the threads or ranks.

use crate::mem::{ChannelStats, LdStStats, MemStats};
use crate::per_kernel::{KernelMemStats, KernelTally};
use crate::sm::SmStats;
use crate::timeseries::TimeSeries;
use crate::watchdog::{WaitingWarp, WatchdogReport};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use tessera_traces::OpClass;

/// Version of the stats JSON layout; raised when a key changes meaning or moves (2: stalls
/// over the whole run, per-chiplet I-cache and operand-collector counters; 3: one entry per
/// chiplet, `links`, `memory.remote_requests`; 4: the LLC and kernel-boundary flush
/// counters of a private L2, in `totals` and `memory`; 5: multi-GPU systems: `gpu` of each
/// kernel and chiplet, `totals.gpus`, `totals.peer_requests`, `memory.peer_requests`, GPU
/// fabric entries in `links`; 6: `provenance` after `config` and `run` last, written by the
/// binary: what was simulated, and how the run was executed).
pub const STATS_VERSION: u32 = 6;

/// Everything a run reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunStats {
    /// Version of this layout ([`STATS_VERSION`]); raised when a key moves or changes
    /// meaning.
    pub stats_version: u32,
    /// The configuration's `name`.
    pub config: String,
    /// Present only when the run was limited (`tessera run --max-cycles`,
    /// `--max-warp-insts`, `--kernels`):
    /// what was asked and whether the run is partial. Absent from an unlimited run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_limit: Option<RunLimit>,
    /// Whole-system totals.
    pub totals: Totals,
    /// One entry per kernel launch, in command-list order.
    pub kernels: Vec<KernelStats>,
    /// One entry per chiplet of the system, in chiplet order (GPU 0's chiplets, then GPU
    /// 1's, ...).
    pub chiplets: Vec<ChipletStats>,
    /// One entry per direction of each inter-chiplet link and GPU-fabric port (empty with
    /// one chiplet and one GPU), grouped by chiplet: the chiplet's package links by
    /// destination, the package switch's port down to it, then (several GPUs) its port up
    /// to the GPU switch and the GPU switch's port down to it.
    pub links: Vec<LinkEntry>,
    /// Present only with `tessera run --sample-every CYCLES`: the run's counters per
    /// interval of that many core cycles, by chiplet, SM and link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeseries: Option<TimeSeries>,
    /// Present only for a trace with sync words or spin regions (format version 3): what
    /// the spin regions and the sync memory did (issue 24).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncSummary>,
    /// Present only when the progress watchdog stopped the run (issue 24): a deadlock or
    /// livelock, where, and the unfinished warps and sync words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<WatchdogReport>,
    /// The unfinished warps at the end, by SM (read by the watchdog's report).
    #[serde(skip)]
    pub waiting: Vec<WaitingWarp>,
}

/// The stats' `sync` object: spin regions and the sync words' values (issue 24).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SyncSummary {
    /// Spin-region iterations (per warp per round).
    pub spin_iterations: u64,
    /// Lanes that left a spin region with their exit condition satisfied.
    pub spin_exits: u64,
    /// Lanes that took a branch region's tail (a value-dependent path: the lock won, the
    /// last CTA to arrive).
    pub branch_taken: u64,
    /// Lanes that passed a branch region's tail over.
    pub branch_passed: u64,
    /// Lanes that ran a work-queue region's tail (items popped).
    pub queue_items: u64,
    /// Lanes that left a work-queue region (the queue was empty).
    pub queue_exits: u64,
    /// Work-queue rounds (per warp per round).
    pub queue_rounds: u64,
    /// Lanes whose weak load of a sync word an SM's L1 answered from its copy (the value
    /// when that L1 got the word: stale if the word changed at its home since).
    pub l1_sync_hits: u64,
    /// Warp instructions issued again from a spin region's body (beyond the trace's).
    pub replayed_warp_insts: u64,
    /// Requests on sync words taken at their homes (one per word and operand group of an
    /// instruction).
    pub requests: u64,
    /// Of them, strong loads.
    pub loads: u64,
    /// Of them, strong stores.
    pub stores: u64,
    /// Of them, atomics.
    pub atomics: u64,
    /// Compare-and-swap lanes that found their compare value (the swap took place: a lock
    /// acquired).
    pub cas_won: u64,
    /// Compare-and-swap lanes that did not (a failed attempt).
    pub cas_lost: u64,
    /// The declared sync words at the end of the run, by declaration.
    pub words: Vec<SyncWordsEnd>,
    /// With `watchdog.check_lock_holders`: the lock holds checked for overlap (none
    /// overlapped, or the run ended with an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_holds: Option<u64>,
    /// The holds themselves, gathered from the SMs for the check.
    #[serde(skip)]
    pub holds: Vec<crate::sm::LockHold>,
    /// Per class, the replayed instructions (`class_warp_insts` less these, plus
    /// `skipped_by_class`, is the trace's count).
    #[serde(skip)]
    pub replayed_by_class: [u64; OpClass::COUNT],
    /// Per class, the trace's instructions passed over without issue.
    #[serde(skip)]
    pub skipped_by_class: [u64; OpClass::COUNT],
    /// Every written sync word's value at the end, by address (read by the check).
    #[serde(skip)]
    pub values: Vec<(u64, u32)>,
}

/// One declaration of sync words at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SyncWordsEnd {
    /// Its name (the recorder's buffer name).
    pub name: String,
    /// Its first word's address.
    pub addr: u64,
    /// Its 32-bit words.
    pub words: u64,
    /// Words whose value at the end differs from their initial one.
    pub changed: u64,
    /// The sum of the words' values at the end (wrapping at 64 bits).
    pub sum: u64,
    /// Whether the recorder's values at the end were checked ("ok"), differ ("mismatch":
    /// the run stops with an error) or were not recorded ("unchecked"); a run that did not
    /// finish is not checked ("partial").
    pub check: String,
}

/// The limits a run was given and what they cut (the stats' `run_limit` object).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RunLimit {
    /// `true` when the run was cut before every kernel launch it simulates completed
    /// (by `max_cycles` or `max_warp_insts`): its totals count what happened before the cut, `kernels` holds
    /// the launches that completed by then only.
    pub partial: bool,
    /// `--max-cycles`: the run stops at this many core cycles of simulated time (every
    /// event before it simulated, none at or after it); `gpu_tot_sim_cycle` is then this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cycles: Option<u64>,
    /// `--max-warp-insts`: the run stops at the first multiple of 1000 core cycles at
    /// which at least this many warp instructions have issued (whole system), so
    /// `totals.warp_insts` is at least this when `partial`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_warp_insts: Option<u64>,
    /// `--kernels`: the launches of the command list simulated, as a range of launch
    /// ranks (`2..5`; the others dropped, copies kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernels: Option<String>,
    /// Kernel launches in the (selected) command list.
    pub kernel_launches: u64,
    /// Of those, launches that completed.
    pub kernels_completed: u64,
}

/// One direction of an inter-chiplet link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkEntry {
    /// Sending end, as a name: `chiplet0`, or `switch` (one GPU); with several
    /// GPUs a GPU's package switch is `gpu1.switch`, and the GPU fabric's ports run between
    /// `gpu1` (`gpu1.chiplet2` with several chiplets per GPU) and `nvswitch` or `pcie_host`.
    pub from: String,
    /// Receiving end, named as `from`.
    pub to: String,
    /// Packets sent in this direction.
    pub packets: u64,
    /// Packet bytes sent (header and data).
    pub bytes: u64,
    /// Bytes on the wire: `bytes` plus the per-packet overhead of the link.
    pub wire_bytes: u64,
    /// Picoseconds the sender was transmitting (`busy_ps / sim_time_ps` is its utilization).
    pub busy_ps: u64,
    /// Sum over packets of the time each waited behind earlier packets.
    pub queued_ps: u64,
    /// Longest time one packet waited behind earlier packets.
    pub max_queued_ps: u64,
    /// The receiving end's buffer per virtual channel, in bytes (`package.link.buffer_bytes`
    /// or `system.gpu_link.buffer_bytes`, resolved); 0 for a switch's port down to a
    /// chiplet, which has no credits.
    pub buffer_bytes: u64,
    /// Packets that waited in the sender for credit (a stall cause: "no credit").
    pub credit_waits: u64,
    /// Picoseconds those packets waited for credit, summed.
    pub credit_wait_ps: u64,
    /// The longest wait of one packet for credit.
    pub max_credit_wait_ps: u64,
    /// The most bytes of one virtual channel's receive buffer in use at once (at most
    /// `buffer_bytes`).
    pub peak_buffer_bytes: u64,
}

/// Whole-GPU totals (familiar Accel-Sim names where there is one).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Totals {
    /// Simulated time from the first command to the host seeing the last kernel complete,
    /// in core cycles (rounded up).
    pub gpu_tot_sim_cycle: u64,
    /// Thread instructions retired (sum of the active-lane counts).
    pub gpu_tot_sim_insn: u64,
    /// Warp instructions retired (each traced one exactly once).
    pub warp_insts: u64,
    /// `gpu_tot_sim_insn / gpu_tot_sim_cycle`, computed once at the end.
    pub ipc: f64,
    /// Simulated time in picoseconds.
    pub sim_time_ps: u64,
    /// Kernel launches completed (the length of `kernels`).
    pub kernels: u64,
    /// CTAs completed, over every kernel.
    pub ctas: u64,
    /// GPUs in the system (`system.gpus`).
    pub gpus: u64,
    /// Requests of SMs to lines homed on another GPU (peer memory; the sum of the
    /// chiplets' `memory.peer_requests`).
    pub peer_requests: u64,
    /// Sum of the chiplets' `memory.l1d_accesses`.
    pub l1d_accesses: u64,
    /// Sum of the chiplets' `memory.l1d_hits`.
    pub l1d_hits: u64,
    /// Sum of the chiplets' `memory.l1d_misses`.
    pub l1d_misses: u64,
    /// Sum of the chiplets' `memory.l2_accesses`.
    pub l2_accesses: u64,
    /// Sum of the chiplets' `memory.l2_hits`.
    pub l2_hits: u64,
    /// Sum of the chiplets' `memory.l2_misses`.
    pub l2_misses: u64,
    /// Sum of the chiplets' `memory.dram_reads`.
    pub dram_reads: u64,
    /// Sum of the chiplets' `memory.dram_writes`.
    pub dram_writes: u64,
    /// Sum of the chiplets' `memory.dram_bytes`.
    pub dram_bytes: u64,
    /// Sum of the chiplets' `memory.llc_accesses` (`package.l2: private`; 0 with a
    /// memory-side L2).
    pub llc_accesses: u64,
    /// Sum of the chiplets' `memory.llc_hits`.
    pub llc_hits: u64,
    /// Sum of the chiplets' `memory.llc_misses`.
    pub llc_misses: u64,
    /// Dirty sectors the private L2s' kernel-boundary flushes wrote back to their home LLC
    /// (the sum of the chiplets' `memory.l2_flush_writeback_sectors`).
    pub l2_flush_writeback_sectors: u64,
    /// Valid lines the private L2s' kernel-boundary flushes invalidated (the sum of the
    /// chiplets' `memory.l2_flush_invalidated_lines`).
    pub l2_flush_invalidated_lines: u64,
    /// Later read sector misses on lines the flushes invalidated: the inter-kernel L2 hits
    /// lost (the sum of the chiplets' `memory.l2_flush_lost_hits`).
    pub l2_flush_lost_hits: u64,
    /// Scheduler-cycle breakdown, summed over every SM over the whole run.
    pub stalls: StallStats,
    /// The memory traffic no kernel made: the host's copies (evictions, DRAM writes) and
    /// control messages. With each kernel's `memory` it adds up to the totals above (and,
    /// for `link_packets` and `link_bytes`, to the sums over `links`).
    pub host_memory: KernelMemStats,
}

/// Every scheduler-cycle of every SM from time 0 to the end of the run
/// (`gpu_tot_sim_cycle`), counted once: `slots == issued + unit_busy + scoreboard + barrier
/// + no_warp`; a cycle without an issue counts for the first reason that applies, in that
/// order; cycles with no resident warp (launch gaps, an SM without CTAs) count as `no_warp`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallStats {
    /// Scheduler-cycles: core cycles times warp schedulers, over the SMs counted.
    pub slots: u64,
    /// Scheduler-cycles with an issue (equals the warp instructions issued).
    pub issued: u64,
    /// Scheduler-cycles without an issue in which some warp had its registers ready but the
    /// functional unit of its next instruction was inside its initiation interval, or every
    /// operand collector of the scheduler was busy.
    pub unit_busy: u64,
    /// Otherwise, scheduler-cycles in which some warp's next instruction read or wrote a
    /// register with a pending write, or was not fetched yet (I-cache).
    pub scoreboard: u64,
    /// Otherwise, scheduler-cycles in which some warp waited at a CTA barrier.
    pub barrier: u64,
    /// Otherwise, scheduler-cycles in which the scheduler had no unfinished warp.
    pub no_warp: u64,
    /// Scheduler-cycles that would count as `unit_busy` while the SM's LD/ST unit took no
    /// memory instruction, its L1 miss queue full of packets waiting for credit at the NoC
    /// crossbar (`noc.model: crossbar`): the "no credit" stall.
    pub no_credit: u64,
}

impl StallStats {
    /// Adds one SM's counters.
    pub fn add(&mut self, s: &SmStats) {
        self.slots += s.cycles * s.schedulers as u64;
        self.issued += s.sched.issue_slots_used;
        self.unit_busy += s.sched.stall_unit_busy;
        self.scoreboard += s.sched.stall_scoreboard;
        self.barrier += s.sched.stall_barrier;
        self.no_warp += s.sched.stall_no_warp;
        self.no_credit += s.sched.stall_no_credit;
    }

    /// Adds another breakdown.
    pub fn add_all(&mut self, o: &StallStats) {
        self.slots += o.slots;
        self.issued += o.issued;
        self.unit_busy += o.unit_busy;
        self.scoreboard += o.scoreboard;
        self.barrier += o.barrier;
        self.no_warp += o.no_warp;
        self.no_credit += o.no_credit;
    }
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelStats {
    /// The kernel's name as the trace gives it.
    pub name: String,
    /// The GPU it ran on (the trace's device with `system.gpus` > 1; 0 with one GPU).
    pub gpu: u32,
    /// Grid dimensions in CTAs (x, y, z).
    pub grid: [u32; 3],
    /// CTA dimensions in threads (x, y, z).
    pub block: [u32; 3],
    /// CTAs of the grid (`grid` x * y * z), all completed.
    pub ctas: u64,
    /// Resident CTAs per SM by the occupancy calculation.
    pub ctas_per_sm: u32,
    /// When the host submitted the launch.
    pub start_ps: u64,
    /// When it completed: its GPU's global CP's receipt of the last slice report (the local
    /// CP's receipt of the last CTA's completion report + `launch.completion_ps`); with one
    /// GPU the host sees it then, with several `system.host_link.completion_ps` later.
    pub end_ps: u64,
    /// `end_ps - start_ps` in core cycles, rounded up.
    pub cycles: u64,
    /// Warp instructions the kernel retired.
    pub warp_insts: u64,
    /// Thread instructions the kernel retired (sum of the active-lane counts).
    pub thread_insts: u64,
    /// The memory traffic its requests made, attributed by the context the requests carry
    /// (`per_kernel.rs`): L1D, L2, LLC, DRAM, NoC and links.
    pub memory: KernelMemStats,
    /// Its stream: the rank of its trace stream among the trace's streams in order of first
    /// use (the stream of the context its memory traffic carries).
    pub stream: u32,
    /// Each chiplet's share of it (chiplets given no CTA left out), in chiplet order.
    pub chiplets: Vec<KernelSlice>,
}

/// One chiplet's slice of a kernel, as its local CP ran it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSlice {
    /// Chiplet index across the system (as `chiplets[].id`).
    pub chiplet: u32,
    /// When the slice reached the chiplet's local CP, which then dispatched its first CTAs.
    pub start_ps: u64,
    /// When the local CP received the completion report of the slice's last CTA.
    pub end_ps: u64,
    /// CTAs of the slice.
    pub ctas: u64,
}

/// One chiplet: its SMs' counters and its memory system's (its SMs' L1D counters and its
/// channels' L2 and DRAM counters).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChipletStats {
    /// Chiplet index across the system (`gpu * chiplets + chiplet in the GPU`).
    pub id: u32,
    /// The GPU it belongs to.
    pub gpu: u32,
    /// SMs of the chiplet (`core.sm_count`).
    pub sms: u32,
    /// Warp instructions its SMs retired.
    pub warp_insts: u64,
    /// Thread instructions its SMs retired (sum of the active-lane counts).
    pub thread_insts: u64,
    /// CTAs its SMs ran.
    pub ctas: u64,
    /// CTA barriers completed on its SMs (one per barrier instance of a CTA, not per warp).
    pub barriers: u64,
    /// Lanes retired by `EXIT` instructions on its SMs.
    pub exited_lanes: u64,
    /// Instruction fetches that looked up the I-cache.
    pub icache_accesses: u64,
    /// Instruction fetches that missed the I-cache.
    pub icache_misses: u64,
    /// Source-register reads by the operand collectors.
    pub operand_reads: u64,
    /// Source-register reads that found their register bank busy.
    pub bank_conflicts: u64,
    /// Core cycles the bank conflicts added.
    pub bank_conflict_cycles: u64,
    /// Warp instructions per opcode class: one key per class with a non-zero count, in
    /// class order.
    pub class_warp_insts: ClassCounts,
    /// Scheduler-cycle breakdown of its SMs over the whole run.
    pub stalls: StallStats,
    /// Counters of its memory system: its SMs' L1D, shared memory and NoC ports, its
    /// channels' L2 (or private L2 and LLC) slices and DRAM.
    pub memory: MemStats,
    /// Its NoC crossbar (`noc.model: crossbar` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crossbar: Option<CrossbarEntry>,
}

/// A chiplet's NoC crossbar: its request network and its reply network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossbarEntry {
    /// The request network: reads, writes, atomics, and LLC reads and writes.
    pub requests: CrossbarNet,
    /// The reply network: replies, write acknowledgements and LLC replies.
    pub replies: CrossbarNet,
}

/// One network of a crossbar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossbarNet {
    /// Packets granted.
    pub packets: u64,
    /// Their flits (`noc.bandwidth_bytes_per_cycle` bytes each).
    pub flits: u64,
    /// NoC cycles the packets waited at their inputs before their grant, summed.
    pub wait_cycles: u64,
    /// The most packets one input FIFO held.
    pub max_input_packets: u64,
    /// Times an output spent its last credit for the buffer behind it (a slice's request
    /// queue filled up, `l2.request_queue_packets`, or a link interface's queue,
    /// `package.link.noc_queue_packets`), after which it granted nothing until the unit
    /// returned one.
    pub queue_full: u64,
}

/// What some of the partitions of a finished run contribute to its stats
/// ([`crate::gpu::stats_part`]); parts covering the whole system merge into [`RunStats`]
/// ([`crate::gpu::merge_stats`]). Plain integers and strings (no ratio is computed before
/// the merge), serializable so that MPI ranks can send theirs to rank 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatsPart {
    /// The run's end (the maximum over every partition, known before the parts are made).
    pub end_ps: u64,
    /// The kernels as the global CPs this part hosts saw them, each with the rank of its
    /// launch in the command list (the merge orders them by it) and its index among the
    /// trace's kernels (what the per-kernel counters are indexed by).
    pub kernels: Vec<(u32, u32, KernelStats)>,
    /// The counters of this part's units.
    pub units: StatsRegistry,
    /// What its units sampled (`--sample-every`), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<crate::timeseries::SeriesPart>,
    /// The slices the local CPs this part hosts ran ([`crate::gpu::SliceSpans`]).
    #[serde(default)]
    pub spans: Vec<crate::gpu::SliceSpans>,
}

/// The counters one unit registers at the end of a run.
///
/// Counters kept per kernel are a vector indexed by the kernel's launch rank beside the
/// unit's totals (as `Sm::per_kernel`); the merge sums them per kernel in unit order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum UnitStats {
    /// An SM: its core's counters (`cycles` up to the run's end), its LD/ST unit's, the
    /// CTAs it was sent, and its warp and thread instructions per kernel.
    Sm {
        core: Box<SmStats>,
        mem: LdStStats,
        ctas: u64,
        per_kernel: Vec<(u64, u64)>,
        mem_per_kernel: KernelTally,
        /// Its unfinished warps when the run stopped (for the watchdog's report).
        waiting: Vec<crate::watchdog::WaitingWarp>,
    },
    /// A channel unit: its L2 slices, LLC slice and DRAM channel, and the same per kernel;
    /// with sync words, what its sync memory did and the words written there (issue 24).
    Channel(ChannelStats, KernelTally, Option<Box<SyncHome>>),
    /// A link interface: one entry per link direction it sends on, in its report order,
    /// and what it sent per kernel.
    Link(Vec<LinkEntry>, KernelTally),
    /// A chiplet's NoC crossbar.
    Crossbar(CrossbarEntry),
}

/// What a channel unit's sync memory did, and the words written there with their values
/// at the end, by address (issue 24).
pub type SyncHome = (crate::mem::sync_memory::SyncStats, Vec<(u64, u32)>);

/// The counters of a set of units by unit id (`mem::UnitIds` numbering).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsRegistry {
    units: Vec<(u32, UnitStats)>,
}

impl StatsRegistry {
    /// Registers the counters of unit `unit`.
    pub fn register(&mut self, unit: u32, stats: UnitStats) {
        self.units.push((unit, stats));
    }

    /// Takes in the units of another registry (of other partitions).
    pub fn extend(&mut self, o: StatsRegistry) {
        self.units.extend(o.units);
    }

    /// Every unit's counters in unit-id order (the one order of every merge).
    pub fn into_sorted(mut self) -> Vec<(u32, UnitStats)> {
        self.units.sort_by_key(|&(u, _)| u);
        self.units
    }
}

/// Counts per [`OpClass`], serialized as `{name: count}` for the non-zero classes in
/// discriminant order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassCounts(pub [u64; OpClass::COUNT]);

impl Default for ClassCounts {
    fn default() -> Self {
        ClassCounts([0; OpClass::COUNT])
    }
}

impl<'de> Deserialize<'de> for ClassCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
        let mut out = ClassCounts::default();
        for (name, v) in m {
            let Some(c) = OpClass::ALL.iter().find(|c| c.name() == name) else {
                return Err(serde::de::Error::custom(format!(
                    "unknown opcode class {name}"
                )));
            };
            out.0[*c as usize] = v;
        }
        Ok(out)
    }
}

impl Serialize for ClassCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.0.iter().filter(|&&c| c > 0).count();
        let mut m = s.serialize_map(Some(n))?;
        for c in OpClass::ALL {
            let v = self.0[c as usize];
            if v > 0 {
                m.serialize_entry(c.name(), &v)?;
            }
        }
        m.end()
    }
}
