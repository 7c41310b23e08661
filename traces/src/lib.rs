//! # tessera-traces: the native `.tst` trace format
//!
//! One `.tst` file holds a whole traced program: the host command list (memcpys and
//! kernel launches per device), per-kernel metadata, and every warp's instruction stream,
//! in zstd-compressed chunks of consecutive CTAs (DESIGN.md section 7).
//!
//! - [`format`]: the byte layout (header, chunks, index, footer) and the format version.
//! - [`schema`]: the rkyv index: commands, [`KernelMeta`], static instruction tables,
//!   chunk table.
//! - [`codec`]: the columnar CTA encoding inside a chunk, and the decoded form the timing
//!   model reads ([`WarpInst`], [`DecodedCta`]).
//! - [`writer`]: the streaming [`TraceWriter`] (memory independent of trace length).
//! - [`stream`]: CTAs kept encoded, each warp decoded incrementally ([`CtaStream`],
//!   [`WarpCursor`]): what the timing model holds for resident CTAs.
//! - [`reader`]: the mmap [`TraceFile`] and per-worker [`ChunkDecoder`].
//! - [`opcode`]: opcode classes and per-opcode facts.
//!
//! Round trip in brief:
//! ```
//! use tessera_traces::*;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("t.tst");
//! let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
//! let k = w.begin_kernel(KernelMeta::new("k", [1, 1, 1], [32, 1, 1])).unwrap();
//! w.add_command(Command::KernelLaunch { device: 0, kernel: k }).unwrap();
//! let op = w.add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit)).unwrap();
//! w.begin_cta([0, 0, 0], None).unwrap();
//! w.begin_warp(0).unwrap();
//! w.push(&RawInst { pc: 0, mask: !0, opcode: op, dsts: &[], srcs: &[], mem_width: 0,
//!                   imm: None, line: None, addrs: AddrRecord::None }).unwrap();
//! w.end_warp().unwrap();
//! w.end_cta().unwrap();
//! w.end_kernel().unwrap();
//! w.finish().unwrap();
//! let t = TraceFile::open(&path).unwrap();
//! assert_eq!(t.kernels()[0].counts.thread_insts, 32);
//! let mut d = t.decoder();
//! assert_eq!(d.kernel_cta(0, 0).unwrap().insts[0].class, OpClass::Exit);
//! ```

pub mod bounds;
pub mod codec;
mod columns;
pub mod error;
pub mod format;
pub mod opcode;
pub mod reader;
pub mod schema;
pub mod schema_v1;
pub mod schema_v2;
pub mod schema_v3;
pub mod stream;
pub mod verify;
pub mod writer;

pub use bounds::{AccessBounds, AccessFault};
pub use codec::{
    AddrRecord, Addrs, ClusterInfo, DecodedCta, DecodedWarp, LaneAddrSource, SlotInfo, WarpInst,
};
pub use error::{Result, TraceError};
pub use format::FORMAT_VERSION;
pub use opcode::{AtomicOp, MemSpace, OpClass, OpcodeInfo, Scope};
pub use reader::{ChunkDecoder, TraceFile};
pub use schema::{
    Access, ArrayAnnotation, ChunkEntry, Command, CtaRange, DeviceInfo, ExitTerm, Index,
    KernelCounts, KernelMeta, MBarrierKind, MBarrierOp, NamedBarrier, RebasedAccess, RegionKind,
    SpinRegion, StaticInst, SyncCmp, SyncWords, OWN_LANE,
};
pub use stream::{CtaStream, StreamScratch, WarpCursor};
pub use verify::{verify, verify_structure, VerifyReport};
pub use writer::{RawInst, TraceWriter, WriterOptions};

impl KernelMeta {
    /// A kernel with the given name and shape and every other field at its default,
    /// for writers that are not importing a traced header.
    pub fn new(name: &str, grid: [u32; 3], block: [u32; 3]) -> KernelMeta {
        KernelMeta {
            name: name.to_string(),
            id: 1,
            grid,
            block,
            shmem_bytes: 0,
            nregs: 0,
            binary_version: 80,
            stream: 0,
            shmem_base: 0,
            local_base: 0,
            nvbit_version: String::new(),
            tracer_version: 0,
            lineinfo: false,
            device: 0,
            header_text: String::new(),
            source: String::new(),
            opcodes: Vec::new(),
            statics: Vec::new(),
            counts: KernelCounts::default(),
            first_chunk: 0,
            n_chunks: 0,
            annotations: Vec::new(),
            records_operands: false,
            generator: String::new(),
            spin_regions: Vec::new(),
            named_barriers: Vec::new(),
            mbarriers: Vec::new(),
        }
    }
}

impl OpcodeInfo {
    /// An opcode with no width, scope or atomic modifiers.
    pub fn simple(name: &str, class: OpClass) -> OpcodeInfo {
        OpcodeInfo {
            name: name.to_string(),
            class,
            width_bytes: 4,
            dst_regs: 1,
            scope: Scope::None,
            atomic: AtomicOp::None,
            unknown: false,
        }
    }
}
