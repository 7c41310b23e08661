//! The index of `.tst` format version 1, frozen, so that version-2 readers still open
//! version-1 files (imports made before recorded traces existed). Types that did not
//! change between versions are shared with [`crate::schema`]; the enums they contain
//! ([`crate::OpClass`], [`crate::Scope`], [`crate::AtomicOp`]) only ever gain variants at
//! the end, which keeps their archived form readable.

use crate::schema::{self, ChunkEntry, DeviceInfo, KernelCounts, StaticInst};
use crate::OpcodeInfo;

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum Command {
    MemcpyHtoD { device: u32, addr: u64, bytes: u64 },
    KernelLaunch { device: u32, kernel: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct KernelMeta {
    pub name: String,
    pub id: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shmem_bytes: u32,
    pub nregs: u32,
    pub binary_version: u32,
    pub stream: u64,
    pub shmem_base: u64,
    pub local_base: u64,
    pub nvbit_version: String,
    pub tracer_version: u32,
    pub lineinfo: bool,
    pub device: u32,
    pub header_text: String,
    pub source: String,
    pub opcodes: Vec<OpcodeInfo>,
    pub statics: Vec<StaticInst>,
    pub counts: KernelCounts,
    pub first_chunk: u32,
    pub n_chunks: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Index {
    pub devices: Vec<DeviceInfo>,
    pub commands: Vec<Command>,
    pub kernels: Vec<KernelMeta>,
    pub chunks: Vec<ChunkEntry>,
}

impl From<Index> for schema::Index {
    fn from(v: Index) -> schema::Index {
        schema::Index {
            devices: v.devices,
            commands: v
                .commands
                .into_iter()
                .map(|c| match c {
                    Command::MemcpyHtoD {
                        device,
                        addr,
                        bytes,
                    } => schema::Command::MemcpyHtoD {
                        device,
                        addr,
                        bytes,
                    },
                    Command::KernelLaunch { device, kernel } => {
                        schema::Command::KernelLaunch { device, kernel }
                    }
                })
                .collect(),
            kernels: v
                .kernels
                .into_iter()
                .map(|k| schema::KernelMeta {
                    name: k.name,
                    id: k.id,
                    grid: k.grid,
                    block: k.block,
                    shmem_bytes: k.shmem_bytes,
                    nregs: k.nregs,
                    binary_version: k.binary_version,
                    stream: k.stream,
                    shmem_base: k.shmem_base,
                    local_base: k.local_base,
                    nvbit_version: k.nvbit_version,
                    tracer_version: k.tracer_version,
                    lineinfo: k.lineinfo,
                    device: k.device,
                    header_text: k.header_text,
                    source: k.source,
                    opcodes: k.opcodes,
                    statics: k.statics,
                    counts: k.counts,
                    first_chunk: k.first_chunk,
                    n_chunks: k.n_chunks,
                    annotations: Vec::new(),
                    records_operands: false,
                    generator: String::new(),
                    spin_regions: Vec::new(),
                    named_barriers: Vec::new(),
                    mbarriers: Vec::new(),
                })
                .collect(),
            chunks: v.chunks,
            sync_words: Vec::new(),
        }
    }
}
