//! The index of `.tst` format version 3, frozen, so that version-4 readers still open
//! version-3 files (recorded traces made before value-dependent paths existed: every
//! region of theirs is a spin loop, and no tail address depends on a value). Types that did
//! not change between versions are shared with [`crate::schema`].

use crate::schema::{
    self, ArrayAnnotation, ChunkEntry, Command, DeviceInfo, KernelCounts, NamedBarrier, RegionKind,
    StaticInst, SyncCmp, SyncWords, OWN_LANE,
};
use crate::OpcodeInfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ExitTerm {
    pub value: u8,
    pub cmp: SyncCmp,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SpinRegion {
    pub start_pc: u32,
    pub test_pc: u32,
    pub end_pc: u32,
    pub terms: Vec<ExitTerm>,
    pub all: bool,
    pub backoff_base: u32,
    pub backoff_max: u32,
    pub label: String,
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
    pub annotations: Vec<ArrayAnnotation>,
    pub records_operands: bool,
    pub generator: String,
    pub spin_regions: Vec<SpinRegion>,
    pub named_barriers: Vec<NamedBarrier>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Index {
    pub devices: Vec<DeviceInfo>,
    pub commands: Vec<Command>,
    pub kernels: Vec<KernelMeta>,
    pub chunks: Vec<ChunkEntry>,
    pub sync_words: Vec<SyncWords>,
}

impl From<SpinRegion> for schema::SpinRegion {
    fn from(r: SpinRegion) -> schema::SpinRegion {
        schema::SpinRegion {
            kind: RegionKind::Spin,
            start_pc: r.start_pc,
            test_pc: r.test_pc,
            end_pc: r.end_pc,
            terms: r
                .terms
                .into_iter()
                .map(|t| schema::ExitTerm {
                    value: t.value,
                    cmp: t.cmp,
                    lane: OWN_LANE,
                })
                .collect(),
            all: r.all,
            backoff_base: r.backoff_base,
            backoff_max: r.backoff_max,
            label: r.label,
            rebased: Vec::new(),
        }
    }
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
                    spin_regions: k.spin_regions.into_iter().map(Into::into).collect(),
                    named_barriers: k.named_barriers,
                    mbarriers: Vec::new(),
                })
                .collect(),
            chunks: v.chunks,
            sync_words: v.sync_words,
        }
    }
}
