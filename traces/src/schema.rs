//! The index of a `.tst` file: everything but the instruction streams.
//!
//! Stored with rkyv at the end of the file and validated (bytecheck) on open. It holds the
//! command list, per-kernel metadata (header fields, opcode table, static instruction table,
//! counts) and the chunk table that maps CTAs to compressed chunks. Its size grows with the
//! number of kernels, static instructions and chunks, never with the number of
//! instructions, so a reader's memory tracks the simulated state, not the trace.

use crate::opcode::{MemSpace, OpClass, OpcodeInfo};

/// One host-side command, in stream order (DESIGN.md section 2).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum Command {
    /// Host-to-device copy of `bytes` bytes to device address `addr`.
    MemcpyHtoD { device: u32, addr: u64, bytes: u64 },
    /// Launch of `kernels[kernel]` on `device`.
    KernelLaunch { device: u32, kernel: u32 },
    /// Device allocation of `bytes` bytes at `addr` (format version 2; recorded traces).
    /// `trace verify` checks that memory accesses fall inside allocations when a trace
    /// has any.
    Alloc { device: u32, addr: u64, bytes: u64 },
}

/// How a kernel uses an array (for kernel-boundary coherence, DESIGN.md section 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
#[repr(u8)]
pub enum Access {
    Read = 0,
    ReadWrite = 1,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read_write",
        }
    }
}

/// The part of an array that a run of consecutive CTAs (listing order) touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CtaRange {
    pub first_cta: u32,
    pub n_ctas: u32,
    /// Byte range `[lo, hi)` those CTAs access.
    pub lo: u64,
    pub hi: u64,
}

/// A per-kernel array annotation (format version 2): what a command processor needs to
/// decide kernel-boundary coherence actions (the CPCoh study,
/// dalmia-2023-synchronization-communication-overheads.txt, section on CPCoh).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ArrayAnnotation {
    pub name: String,
    pub base: u64,
    pub bytes: u64,
    pub access: Access,
    /// Footprints of CTA runs, in CTA order, so that the range a chiplet touches can be
    /// computed for any contiguous split of the grid ([`ArrayAnnotation::footprint`]).
    /// Empty when every CTA may touch the whole array.
    pub ranges: Vec<CtaRange>,
}

impl ArrayAnnotation {
    /// An annotation that every CTA may touch whole (no per-CTA ranges).
    pub fn whole(name: &str, base: u64, bytes: u64, access: Access) -> ArrayAnnotation {
        ArrayAnnotation {
            name: name.into(),
            base,
            bytes,
            access,
            ranges: Vec::new(),
        }
    }

    /// Byte range `[lo, hi)` touched by CTAs `ctas` (listing order): the hull of the
    /// ranges that overlap them, or the whole array when the annotation has no ranges.
    pub fn footprint(&self, ctas: std::ops::Range<u32>) -> Option<(u64, u64)> {
        if self.ranges.is_empty() {
            return (!ctas.is_empty()).then_some((self.base, self.base + self.bytes));
        }
        let mut hull: Option<(u64, u64)> = None;
        for r in &self.ranges {
            let end = r.first_cta.saturating_add(r.n_ctas);
            if r.first_cta < ctas.end && ctas.start < end {
                hull = Some(match hull {
                    None => (r.lo, r.hi),
                    Some((lo, hi)) => (lo.min(r.lo), hi.max(r.hi)),
                });
            }
        }
        hull
    }
}

/// How an exit term compares a value the spin body read with its constant (unsigned 32-bit
/// comparisons: sync words are 32-bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
#[repr(u8)]
pub enum SyncCmp {
    Eq = 0,
    Ne = 1,
    Lt = 2,
    Le = 3,
    Gt = 4,
    Ge = 5,
}

impl SyncCmp {
    /// `value <cmp> constant`.
    #[inline]
    pub fn holds(self, value: u32, constant: u32) -> bool {
        match self {
            SyncCmp::Eq => value == constant,
            SyncCmp::Ne => value != constant,
            SyncCmp::Lt => value < constant,
            SyncCmp::Le => value <= constant,
            SyncCmp::Gt => value > constant,
            SyncCmp::Ge => value >= constant,
        }
    }

    /// Its C operator, for reports.
    pub fn symbol(self) -> &'static str {
        match self {
            SyncCmp::Eq => "==",
            SyncCmp::Ne => "!=",
            SyncCmp::Lt => "<",
            SyncCmp::Le => "<=",
            SyncCmp::Gt => ">",
            SyncCmp::Ge => ">=",
        }
    }
}

/// [`ExitTerm::lane`] of a term that reads each lane's own value.
pub const OWN_LANE: u8 = 32;

/// One term of a region's exit condition: the value read by the head's `value`-th value
/// instruction (a load or an atomic that returns, in head order), compared with a per-lane
/// constant (the region's test instruction records one per term per lane in the operand
/// column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ExitTerm {
    pub value: u8,
    pub cmp: SyncCmp,
    /// Whose value each lane compares (format version 4): its own ([`OWN_LANE`]), or lane
    /// `lane`'s, as after a warp shuffle that broadcasts one lane's result (a leader lane
    /// pops for its warp).
    pub lane: u8,
}

impl ExitTerm {
    /// A term on each lane's own value.
    pub fn own(value: u8, cmp: SyncCmp) -> ExitTerm {
        ExitTerm {
            value,
            cmp,
            lane: OWN_LANE,
        }
    }

    /// The lane whose value lane `l` compares.
    #[inline]
    pub fn source_lane(&self, l: usize) -> usize {
        if self.lane < OWN_LANE {
            self.lane as usize
        } else {
            l
        }
    }
}

/// What a region does with the lanes whose exit condition holds, and with the others
/// (format version 4; every region of a version-3 file is a [`RegionKind::Spin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
#[repr(u8)]
pub enum RegionKind {
    /// A spin loop: lanes whose condition holds run the tail and leave; the others go
    /// round again after the back-off.
    Spin = 0,
    /// A value-dependent branch, run once: lanes whose condition holds run the tail (the
    /// lock was won, this CTA arrived last); the others pass it over. Both join at the
    /// region's end (its reconvergence point).
    Branch = 1,
    /// A work-queue loop: lanes whose condition holds leave at once (the queue is empty);
    /// the others run the tail (the item popped) and go round again.
    Queue = 2,
}

impl RegionKind {
    pub fn name(self) -> &'static str {
        match self {
            RegionKind::Spin => "spin",
            RegionKind::Branch => "branch",
            RegionKind::Queue => "queue",
        }
    }

    /// Whether its end is a back-edge (the lanes still in go round).
    pub fn loops(self) -> bool {
        !matches!(self, RegionKind::Branch)
    }
}

/// A tail instruction whose addresses depend on a value (format version 4): each lane
/// accesses its recorded address plus `stride * (v - t)`, where `v` is the value of the
/// region's first exit term this iteration (as that term reads it: the lane's own or the
/// broadcast lane's) and `t` the value the recorded tail was recorded with, which the test
/// instruction records per lane after the terms' constants (`base + stride * value`: a
/// queue slot, the item a pop returned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RebasedAccess {
    pub pc: u32,
    pub stride: i64,
}

/// A region whose path depends on sync values (format version 3, DESIGN.md section 6): a
/// body recorded once and run by the timing model on the values the simulated memory
/// returns. The body is the instructions from `start_pc` (its head) to `test_pc` (the exit
/// test, a branch whose operands are the terms' constants), then the tail to `end_pc`
/// (the back-edge branch, or a branch region's reconvergence point). For a spin loop
/// ([`RegionKind::Spin`]), each iteration the spinning lanes run the head; the lanes whose
/// condition holds run the tail (what a lane does once it won, such as a critical section
/// and its release: eltantawy-2018, Fig 1.2) and leave; the others wait
/// `min(backoff_base * 2^i, backoff_max)` core cycles (0: none) and go round again.
/// [`RegionKind`] says what a branch and a work queue do instead.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct SpinRegion {
    /// Format version 4 (version 3: always `Spin`).
    pub kind: RegionKind,
    pub start_pc: u32,
    pub test_pc: u32,
    pub end_pc: u32,
    pub terms: Vec<ExitTerm>,
    /// Exit when every term holds (true) or when any does (false).
    pub all: bool,
    pub backoff_base: u32,
    pub backoff_max: u32,
    /// What leaving the region means, for the watchdog's report (`lock acquired`); for a
    /// branch, what taking its tail means (`last CTA`).
    pub label: String,
    /// Its tail instructions whose addresses depend on the first term's value (format
    /// version 4), by PC.
    pub rebased: Vec<RebasedAccess>,
}

impl SpinRegion {
    /// Operands its test records per active lane: one constant per term, then, for a
    /// branch or a work queue (or a spin loop with rebased accesses), the value of the
    /// first term that the recorded tail was recorded with (its template value).
    pub fn test_operands(&self) -> usize {
        self.terms.len() + usize::from(self.has_template())
    }

    /// Whether its test records each lane's template value ([`SpinRegion::test_operands`]).
    pub fn has_template(&self) -> bool {
        self.kind != RegionKind::Spin || !self.rebased.is_empty()
    }
}

/// Consecutive 32-bit sync words of a device (format version 3): their values before the
/// program ran and, when the program's result does not depend on scheduling, after it
/// (what the recorder's run left: the host reference the timing model's values are
/// checked against at the end of a complete run).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct SyncWords {
    pub name: String,
    pub device: u32,
    pub addr: u64,
    pub init: Vec<u32>,
    /// Empty: not checked.
    pub expect: Vec<u32>,
}

impl SyncWords {
    /// Whether `addr` is one of its words.
    #[inline]
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.addr && addr - self.addr < 4 * self.init.len() as u64
    }
}

/// A device (an Accel-Sim CUDA context) the commands refer to.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DeviceInfo {
    /// Name of the command list it came from (`kernelslist.g`, `kernelslist_ctx_0x....g`).
    pub source: String,
}

/// One static instruction of a kernel: the fields that are the same every time a PC
/// executes. A PC whose instances differ in any of these fields gets one entry per variant
/// (the per-instance override of DESIGN.md section 7); instances refer to entries by index.
#[derive(Clone, Debug, PartialEq, Eq, Hash, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct StaticInst {
    /// Program counter (byte offset in the kernel's code, as traced).
    pub pc: u32,
    /// Index into [`KernelMeta::opcodes`].
    pub opcode: u16,
    /// Destination registers as traced (`R255` is RZ; predicate and uniform registers are
    /// not recorded by the tracer).
    pub dsts: Vec<u16>,
    /// Source registers as traced.
    pub srcs: Vec<u16>,
    /// The trace's `mem_width` field; 0 for non-memory instructions, which carry no
    /// addresses.
    pub mem_width: u32,
    /// The immediate field, when the line has one (tracer version 5 and late version 4).
    pub imm: Option<i64>,
    /// Source line number, when the kernel was traced with `-enable lineinfo = 1`.
    pub line: Option<u32>,
}

/// Per-kernel counts, computed by the writer while it encodes.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct KernelCounts {
    pub ctas: u64,
    pub warps: u64,
    /// Warp instructions: every traced line, mask-0 ones included.
    pub warp_insts: u64,
    /// Thread instructions: sum over warp instructions of the popcount of the mask.
    pub thread_insts: u64,
    /// Warp instructions per [`OpClass`], indexed by discriminant.
    pub class_warp_insts: Vec<u64>,
    /// Uncompressed bytes of this kernel's chunks.
    pub raw_bytes: u64,
    /// Compressed bytes of this kernel's chunks.
    pub stored_bytes: u64,
    /// Instructions whose opcode was unknown (imported with `--allow-unknown-opcodes`).
    pub unknown_opcode_insts: u64,
}

/// Everything known about one kernel launch except its instruction streams.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct KernelMeta {
    pub name: String,
    /// `-kernel id` from the trace header (may be non-contiguous).
    pub id: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Dynamic + static shared memory per CTA, bytes.
    pub shmem_bytes: u32,
    /// Registers per thread.
    pub nregs: u32,
    /// Compute capability as an integer (80 = sm_80).
    pub binary_version: u32,
    pub stream: u64,
    pub shmem_base: u64,
    pub local_base: u64,
    pub nvbit_version: String,
    pub tracer_version: u32,
    pub lineinfo: bool,
    /// Device (context) the kernel runs on; index into [`Index::devices`].
    pub device: u32,
    /// The header lines exactly as traced (everything before the first `#BEGIN_TB`), so
    /// that export reproduces them.
    pub header_text: String,
    /// File name the kernel was imported from (`kernel-1.traceg`).
    pub source: String,
    pub opcodes: Vec<OpcodeInfo>,
    pub statics: Vec<StaticInst>,
    pub counts: KernelCounts,
    /// First entry of this kernel in [`Index::chunks`]; chunks of a kernel are contiguous.
    pub first_chunk: u32,
    pub n_chunks: u32,
    /// Arrays the kernel reads or writes (format version 2; recorded traces).
    pub annotations: Vec<ArrayAnnotation>,
    /// True when atomics and reductions of this kernel carry their per-lane operands
    /// (format version 2; recorded traces). Accel-Sim imports have no values.
    pub records_operands: bool,
    /// What produced the kernel: `accel-sim import`, or a workload and its parameters.
    pub generator: String,
    /// Its spin loops (format version 3; recorded traces): the timing model repeats each
    /// one's body as many times as the simulated sync values require.
    pub spin_regions: Vec<SpinRegion>,
    /// Its named barriers (format version 3): the `BAR` instructions that wait on, or
    /// arrive at, a barrier other than the whole CTA's.
    pub named_barriers: Vec<NamedBarrier>,
    /// Its mbarrier instructions (format version 4).
    pub mbarriers: Vec<MBarrierOp>,
}

/// A named CTA barrier instruction (`BAR.SYNC id, n` or `BAR.ARV id, n`; format version
/// 3): at `pc`, barrier `id` (0 to 15) completes when `threads` threads (a multiple of 32:
/// each arriving warp counts 32) have arrived, or every unfinished warp of the CTA when
/// `threads` is 0; `arrive` (`BAR.ARV`) counts the warp without making it wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct NamedBarrier {
    pub pc: u32,
    pub id: u8,
    pub threads: u32,
    pub arrive: bool,
}

/// What an mbarrier instruction does (format version 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
#[repr(u8)]
pub enum MBarrierKind {
    /// `mbarrier.init`: the arrivals each phase expects (its operand).
    Init = 0,
    /// `mbarrier.arrive`: each active lane arrives with its operand's count (1 for a plain
    /// arrive).
    Arrive = 1,
    /// `mbarrier.try_wait` in its loop: the warp waits until the phase its operand names
    /// (0 the first) has completed.
    Wait = 2,
}

impl MBarrierKind {
    pub fn name(self) -> &'static str {
        match self {
            MBarrierKind::Init => "init",
            MBarrierKind::Arrive => "arrive",
            MBarrierKind::Wait => "wait",
        }
    }
}

/// An mbarrier instruction (format version 4): CUDA's split arrive/wait barrier object in
/// a CTA's shared memory (`cuda::barrier`, PTX `mbarrier`), as producer/consumer pipelines
/// use it: a warp arrives and goes on, and waits later for a phase to complete. A phase
/// completes when the arrivals its init expects have arrived; the next phase then starts
/// with the same count. Barrier `id` (0 to 31) names the object within its CTA. Each
/// instance records one operand per active lane (the first active lane's is used by
/// `Init` and `Wait`): the count, the lane's arrivals, or the phase waited for (the
/// program's own count of phases, which a `try_wait.parity` loop tracks by its parity).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct MBarrierOp {
    pub pc: u32,
    pub id: u8,
    pub kind: MBarrierKind,
}

/// Size of the shared-memory window of the generic address space, above the header's
/// `shmem base_addr`. Accel-Sim classifies a generic address as shared when it lies in
/// `[shmem base_addr, local mem base_addr)`, which is empty when the local base lies below
/// the shared base, as in captured sm_80 traces (the bundled vectorAdd trace has the
/// local window at 0x7fb137000000 and the shared one 32 MiB above it). tessera uses a
/// window of fixed size above each base instead; 16 MiB covers the largest shared memory
/// of any GPU (228 KiB per SM on H100) and keeps the two windows apart when their bases
/// are 32 MiB apart.
pub const SHARED_WINDOW_BYTES: u64 = 16 << 20;
/// Size of the local-memory window above `local mem base_addr` (see
/// [`SHARED_WINDOW_BYTES`]).
pub const LOCAL_WINDOW_BYTES: u64 = 16 << 20;

/// Register number the tracer uses for RZ, the zero register: never a dependency.
pub const RZ: u16 = 255;

impl StaticInst {
    /// Source registers a scoreboard waits on: the traced sources without RZ. Predicate
    /// and uniform registers are not recorded by the tracer, so they never appear.
    pub fn src_regs(&self) -> impl Iterator<Item = u16> + '_ {
        self.srcs.iter().copied().filter(|&r| r != RZ)
    }

    /// Registers written: each traced destination widened to the pair or quad its opcode's
    /// modifiers imply (`LDG.E.64 R4` writes R4 and R5; `.128` writes four), without RZ.
    pub fn dst_regs<'a>(&'a self, op: &'a OpcodeInfo) -> impl Iterator<Item = u16> + 'a {
        let span = op.dst_regs.max(1) as u16;
        self.dsts
            .iter()
            .filter(|&&r| r != RZ)
            .flat_map(move |&r| (r..r.saturating_add(span)).filter(|&x| x < RZ))
    }
}

impl KernelMeta {
    /// Threads per CTA.
    pub fn threads_per_cta(&self) -> u64 {
        // Saturating: three u32 dimensions can overflow u64 (an edited or fuzzed index);
        // the checks that compare it with the counts then refuse the kernel.
        self.block
            .iter()
            .fold(1u64, |n, &d| n.saturating_mul(u64::from(d)))
    }

    /// Warps per CTA (32 lanes).
    pub fn warps_per_cta(&self) -> u64 {
        self.threads_per_cta().div_ceil(32)
    }

    /// Number of CTAs in the grid.
    pub fn grid_ctas(&self) -> u64 {
        // Saturating, as `threads_per_cta`.
        self.grid
            .iter()
            .fold(1u64, |n, &d| n.saturating_mul(u64::from(d)))
    }

    /// Class of static instruction `s`.
    pub fn class_of(&self, s: u32) -> OpClass {
        self.opcodes[self.statics[s as usize].opcode as usize].class
    }

    /// The space a generic address (of `LD`, `ST`, `ATOM`) falls in, by the header's
    /// shared and local windows; a base of 0 (not traced) opens no window.
    pub fn generic_space(&self, addr: u64) -> MemSpace {
        let within = |base: u64, size: u64| base != 0 && addr >= base && addr - base < size;
        if within(self.shmem_base, SHARED_WINDOW_BYTES) {
            MemSpace::Shared
        } else if within(self.local_base, LOCAL_WINDOW_BYTES) {
            MemSpace::Local
        } else {
            MemSpace::Global
        }
    }
}

/// One compressed chunk: a run of consecutive CTAs (in listing order) of one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ChunkEntry {
    pub kernel: u32,
    /// Index (in listing order) of the chunk's first CTA within its kernel.
    pub first_cta: u32,
    pub n_ctas: u32,
    /// Byte offset of the zstd frame in the file.
    pub offset: u64,
    /// Length of the zstd frame.
    pub stored_len: u32,
    /// Length after decompression.
    pub raw_len: u32,
    /// CRC-32 of the decompressed bytes.
    pub crc32: u32,
    pub warp_insts: u64,
    pub thread_insts: u64,
}

/// The whole index.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct Index {
    pub devices: Vec<DeviceInfo>,
    pub commands: Vec<Command>,
    pub kernels: Vec<KernelMeta>,
    pub chunks: Vec<ChunkEntry>,
    /// The sync words of the program (format version 3; recorded traces): the words whose
    /// values the timing model computes, with their initial and expected final values.
    pub sync_words: Vec<SyncWords>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcode::OpClass;

    #[test]
    fn grid_and_block_products_saturate() {
        let k = KernelMeta::new("k", [u32::MAX, u32::MAX, u32::MAX], [u32::MAX, 2, 2]);
        assert_eq!(k.grid_ctas(), u64::MAX);
        assert_eq!(k.threads_per_cta(), 4 * u64::from(u32::MAX));
        let k = KernelMeta::new("k", [u32::MAX, u32::MAX, 2], [1, 1, 1]);
        assert_eq!(k.grid_ctas(), u64::MAX);
    }

    #[test]
    fn generic_addresses_fall_in_the_header_windows() {
        // Bases of the bundled sm_80 vectorAdd trace: local below shared.
        let mut k = KernelMeta::new("k", [1, 1, 1], [32, 1, 1]);
        k.shmem_base = 0x7fb1_3900_0000;
        k.local_base = 0x7fb1_3700_0000;
        assert_eq!(k.generic_space(0x7fb1_3900_0000), MemSpace::Shared);
        assert_eq!(
            k.generic_space(0x7fb1_3900_0000 + 48 * 1024),
            MemSpace::Shared
        );
        assert_eq!(k.generic_space(0x7fb1_3700_0010), MemSpace::Local);
        assert_eq!(k.generic_space(0x7fb1_3700_0000 - 4), MemSpace::Global);
        assert_eq!(k.generic_space(0x7fb0_fc40_0000), MemSpace::Global);
        k.shmem_base = 0;
        k.local_base = 0;
        assert_eq!(k.generic_space(0x10), MemSpace::Global);
    }

    /// The footprint of a contiguous split of the grid is the hull of the ranges of its
    /// CTAs: what a chiplet's command processor needs for a split it chooses later.
    #[test]
    fn annotation_footprint_of_a_cta_split() {
        let ranges = (0..8u32)
            .map(|c| CtaRange {
                first_cta: c,
                n_ctas: 1,
                lo: 0x1000 + 256 * c as u64,
                hi: 0x1000 + 256 * (c as u64 + 1),
            })
            .collect();
        let a = ArrayAnnotation {
            name: "a".into(),
            base: 0x1000,
            bytes: 2048,
            access: Access::Read,
            ranges,
        };
        // Two chiplets, four CTAs each.
        assert_eq!(a.footprint(0..4), Some((0x1000, 0x1400)));
        assert_eq!(a.footprint(4..8), Some((0x1400, 0x1800)));
        assert_eq!(a.footprint(8..9), None);
        let whole = ArrayAnnotation {
            ranges: Vec::new(),
            ..a
        };
        assert_eq!(whole.footprint(3..5), Some((0x1000, 0x1800)));
        assert_eq!(whole.footprint(3..3), None);
    }

    #[test]
    fn rz_is_never_a_dependency_and_widths_widen_destinations() {
        let st = StaticInst {
            pc: 0,
            opcode: 0,
            dsts: vec![4],
            srcs: vec![RZ, 6, RZ],
            mem_width: 8,
            imm: None,
            line: None,
        };
        assert_eq!(st.src_regs().collect::<Vec<_>>(), vec![6]);
        let mut op = OpcodeInfo::simple("LDG.E.64", OpClass::LoadGlobal);
        op.dst_regs = 2;
        assert_eq!(st.dst_regs(&op).collect::<Vec<_>>(), vec![4, 5]);
        op.dst_regs = 4;
        assert_eq!(st.dst_regs(&op).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        let rz_dst = StaticInst {
            dsts: vec![RZ],
            ..st
        };
        assert_eq!(rz_dst.dst_regs(&op).count(), 0);
    }
}
