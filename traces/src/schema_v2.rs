//! The index of `.tst` format version 2, frozen, so that version-3 readers still open
//! version-2 files (recorded traces made before synchronization values existed). Types
//! that did not change between versions are shared with [`crate::schema`].

use crate::schema::{
    self, ArrayAnnotation, ChunkEntry, Command, DeviceInfo, KernelCounts, StaticInst,
};
use crate::OpcodeInfo;

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
    pub annotations: Vec<ArrayAnnotation>,
    pub records_operands: bool,
    pub generator: String,
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
            commands: v.commands,
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
                    annotations: k.annotations,
                    records_operands: k.records_operands,
                    generator: k.generator,
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
