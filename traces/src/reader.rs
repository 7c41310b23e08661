//! Memory-mapped `.tst` reader: lazy per chunk, `Send + Sync`, shared by all workers.
//!
//! [`TraceFile::open`] maps the file, checks magic, version, footer and the index checksum,
//! validates the rkyv index and checks every chunk entry against the file, and the index
//! against itself (chunk order, per-kernel counts against the sums of their chunks, the
//! class mix against the counts, CTAs against the grid): whatever `verify` would refuse
//! about the index without decoding a chunk, at a cost linear in the index's size. Chunks are
//! decompressed only when asked for, by a [`ChunkDecoder`] (one per worker; it owns its
//! buffers), which verifies each chunk's CRC-32 and then tells the kernel that the
//! chunk's pages of the mapping may be dropped, so reading a 50 GB trace from start to
//! end keeps only what the workers are decoding resident.

use crate::bounds::AccessBounds;
use crate::codec::{decode_cta, split_chunk, DecodedCta, SlotInfo};
use crate::error::{io_err, Result, TraceError};
use crate::format::*;
use crate::schema::*;
use crate::stream::{CtaStream, StreamScratch};
use memmap2::Mmap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open `.tst` file.
pub struct TraceFile {
    path: PathBuf,
    map: Mmap,
    index: Index,
    /// Per kernel, shared with the [`CtaStream`]s made from it.
    slots: Vec<Arc<[SlotInfo]>>,
    /// Per kernel, where its accesses may go (given to its [`CtaStream`]s).
    bounds: Vec<Option<Arc<AccessBounds>>>,
    version: u32,
    /// The footer's CRC-32 of the index (checked on open).
    index_crc: u32,
    /// Whether [`TraceFile::keep_launches`] dropped launches from the command list.
    launches_dropped: bool,
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl TraceFile {
    /// Opens and validates a trace.
    pub fn open(path: &Path) -> Result<TraceFile> {
        let file = File::open(path).map_err(io_err(path))?;
        // SAFETY: the mapping is read-only; tessera never writes a file it has open, and a
        // file changed underneath by another process is caught by the chunk checksums.
        let map = unsafe { Mmap::map(&file) }.map_err(io_err(path))?;
        let truncated = |detail: String| TraceError::Truncated {
            path: path.to_path_buf(),
            detail,
        };
        let corrupt = |detail: String| TraceError::Corrupt {
            path: path.to_path_buf(),
            detail,
        };
        if map.len() < MAGIC.len() && MAGIC.starts_with(&map[..]) {
            return Err(truncated(format!(
                "{} bytes, shorter than the header",
                map.len()
            )));
        }
        if map.len() < MAGIC.len() || &map[..MAGIC.len()] != MAGIC {
            return Err(TraceError::NotATrace {
                path: path.to_path_buf(),
            });
        }
        if map.len() < HEADER_LEN {
            return Err(truncated(format!(
                "{} bytes, shorter than the header",
                map.len()
            )));
        }
        let version = le_u32(&map, 8);
        if !(MIN_READ_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(TraceError::Version {
                path: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if map.len() < HEADER_LEN + FOOTER_LEN || &map[map.len() - 8..] != FOOTER_MAGIC {
            if let Some(end) = footer_before_end(&map, version) {
                return Err(corrupt(format!(
                    "{} trailing bytes after the footer (the trace ends at byte {end} of {}): something was appended to the file",
                    map.len() - end,
                    map.len()
                )));
            }
            return Err(truncated(format!(
                "{} bytes and no index footer at the end (the file was cut short or its writer did not finish)",
                map.len()
            )));
        }
        let f = map.len() - FOOTER_LEN;
        let index_off = le_u64(&map, f);
        let index_len = le_u64(&map, f + 8);
        let index_crc = le_u32(&map, f + 16);
        let footer_version = le_u32(&map, f + 20);
        if footer_version != version {
            return Err(corrupt(format!(
                "footer says format version {footer_version}, header says {version}"
            )));
        }
        let index_end = index_off.checked_add(index_len);
        if index_off < HEADER_LEN as u64 || index_end != Some(f as u64) {
            return Err(corrupt(format!(
                "index at {index_off}+{index_len} does not end at the footer ({f})"
            )));
        }
        let ib = &map[index_off as usize..f];
        if crc32fast::hash(ib) != index_crc {
            return Err(corrupt("index checksum mismatch".into()));
        }
        let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(ib.len());
        aligned.extend_from_slice(ib);
        let index: Index = if version == 1 {
            // BoxedError, not rancor::Error: the latter drops rkyv's reason in release builds.
            rkyv::from_bytes::<crate::schema_v1::Index, rkyv::rancor::BoxedError>(&aligned)
                .map(Index::from)
        } else if version == 2 {
            rkyv::from_bytes::<crate::schema_v2::Index, rkyv::rancor::BoxedError>(&aligned)
                .map(Index::from)
        } else if version == 3 {
            rkyv::from_bytes::<crate::schema_v3::Index, rkyv::rancor::BoxedError>(&aligned)
                .map(Index::from)
        } else {
            rkyv::from_bytes::<Index, rkyv::rancor::BoxedError>(&aligned)
        }
        .map_err(|e| corrupt(format!("index fails validation: {e}")))?;
        check_index(&index, index_off).map_err(corrupt)?;
        let slots = index
            .kernels
            .iter()
            .map(|k| Arc::from(SlotInfo::table(k)))
            .collect();
        let mut t = TraceFile {
            path: path.to_path_buf(),
            map,
            index,
            slots,
            bounds: Vec::new(),
            version,
            index_crc,
            launches_dropped: false,
        };
        t.bounds = AccessBounds::of_trace(&t);
        Ok(t)
    }

    /// The footer's CRC-32 of the index, which holds the command list, the kernels and
    /// every chunk's CRC-32: any change to the trace's content changes it.
    pub fn index_crc32(&self) -> u32 {
        self.index_crc
    }

    /// Format version of the file (this build reads 1 and 2).
    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn kernels(&self) -> &[KernelMeta] {
        &self.index.kernels
    }

    pub fn commands(&self) -> &[Command] {
        &self.index.commands
    }

    /// Kernel launches in the command list.
    pub fn launch_count(&self) -> usize {
        self.index
            .commands
            .iter()
            .filter(|c| matches!(c, Command::KernelLaunch { .. }))
            .count()
    }

    /// Drops from the command list the kernel launches whose rank among the launches
    /// (0 for the first) is outside `keep`; copies and allocations stay. What a run of
    /// only some kernels simulates (`tessera run --kernels`). The file is untouched.
    pub fn keep_launches(&mut self, keep: std::ops::Range<usize>) {
        self.launches_dropped = true;
        let mut rank = 0;
        self.index.commands.retain(|c| match c {
            Command::KernelLaunch { .. } => {
                let kept = keep.contains(&rank);
                rank += 1;
                kept
            }
            _ => true,
        });
    }

    /// Whether [`TraceFile::keep_launches`] was applied: the command list in memory is a
    /// selection of the file's.
    pub fn launches_dropped(&self) -> bool {
        self.launches_dropped
    }

    /// Size of the file in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.map.len() as u64
    }

    /// The decoder's view of kernel `k`'s static instructions.
    pub fn slot_infos(&self, k: usize) -> &[SlotInfo] {
        &self.slots[k]
    }

    /// [`TraceFile::slot_infos`], shared.
    pub fn slot_table(&self, k: usize) -> Arc<[SlotInfo]> {
        self.slots[k].clone()
    }

    /// Chunk indices of kernel `k`.
    pub fn kernel_chunks(&self, k: usize) -> std::ops::Range<usize> {
        let m = &self.index.kernels[k];
        m.first_chunk as usize..(m.first_chunk + m.n_chunks) as usize
    }

    /// The chunk holding CTA `cta` (listing order) of kernel `k`, if any.
    pub fn chunk_of_cta(&self, k: usize, cta: u32) -> Option<usize> {
        let r = self.kernel_chunks(k);
        let chunks = &self.index.chunks[r.clone()];
        let i = chunks.partition_point(|c| c.first_cta + c.n_chunks_ctas() <= cta);
        (i < chunks.len() && chunks[i].first_cta <= cta).then_some(r.start + i)
    }

    pub(crate) fn chunk_error(&self, chunk: usize, what: &str) -> TraceError {
        let c = &self.index.chunks[chunk];
        TraceError::Corrupt {
            path: self.path.clone(),
            detail: format!(
                "chunk {chunk} (kernel {}, CTAs {}..{}, bytes {}..{}): {what}",
                c.kernel,
                c.first_cta,
                c.first_cta + c.n_ctas,
                c.offset,
                c.offset + c.stored_len as u64
            ),
        }
    }

    /// A new decoder for this file (one per worker thread).
    pub fn decoder(&self) -> ChunkDecoder<'_> {
        ChunkDecoder {
            zstd: None,
            file: self,
            raw: Vec::new(),
            loaded: None,
            ctas: Vec::new(),
            cta: DecodedCta::default(),
            stream: StreamScratch::default(),
            release_pages: true,
            recent: Vec::new(),
            decompressions: 0,
        }
    }
}

impl ChunkEntry {
    fn n_chunks_ctas(&self) -> u32 {
        self.n_ctas
    }
}

/// How far back from the end [`footer_before_end`] looks for a footer (an error path only,
/// but a cut 50 GB file should not be read whole to say so).
const TRAILING_SCAN_BYTES: usize = 64 << 20;

/// When a complete footer (magic, version, index ending where the footer starts) ends
/// before the end of `map`, within its last [`TRAILING_SCAN_BYTES`], the offset where it
/// ends: the file has bytes appended after a complete trace, rather than being cut short.
fn footer_before_end(map: &[u8], version: u32) -> Option<usize> {
    let min_end = (HEADER_LEN + FOOTER_LEN).max(map.len().saturating_sub(TRAILING_SCAN_BYTES));
    let mut search = map.len();
    // The magic of a footer ending at `min_end` or later starts at `lo` or later.
    let lo = min_end - FOOTER_MAGIC.len();
    while search >= min_end {
        let at = lo
            + map[lo..search]
                .windows(FOOTER_MAGIC.len())
                .rposition(|w| w == FOOTER_MAGIC)?;
        let end = at + FOOTER_MAGIC.len();
        if end < map.len() {
            let f = end - FOOTER_LEN;
            let index_off = le_u64(map, f);
            let index_len = le_u64(map, f + 8);
            let footer_version = le_u32(map, f + 20);
            if footer_version == version
                && index_off >= HEADER_LEN as u64
                && index_off.checked_add(index_len) == Some(f as u64)
            {
                return Some(end);
            }
        }
        search = at + FOOTER_MAGIC.len() - 1;
    }
    None
}

/// Checks of the index against itself that need no chunk decoded (cheap enough for every
/// open): what `verify` would find wrong with the index when the chunks are right.
fn check_index(index: &Index, data_end: u64) -> std::result::Result<(), String> {
    let n_dev = index.devices.len() as u32;
    for (i, c) in index.commands.iter().enumerate() {
        let ok = match *c {
            Command::MemcpyHtoD { device, .. } | Command::Alloc { device, .. } => {
                device < n_dev.max(1)
            }
            Command::KernelLaunch { device, kernel } => {
                device < n_dev.max(1) && (kernel as usize) < index.kernels.len()
            }
        };
        if !ok {
            return Err(format!("command {i} names a missing kernel or device"));
        }
    }
    for (ki, k) in index.kernels.iter().enumerate() {
        let end = k.first_chunk as u64 + k.n_chunks as u64;
        if end > index.chunks.len() as u64 {
            return Err(format!("kernel {ki} names chunks past the chunk table"));
        }
        for s in &k.statics {
            if s.opcode as usize >= k.opcodes.len() {
                return Err(format!(
                    "kernel {ki}: static instruction names a missing opcode"
                ));
            }
        }
        let mut next_cta = 0u32;
        for ci in k.first_chunk..k.first_chunk + k.n_chunks {
            let c = &index.chunks[ci as usize];
            if c.kernel as usize != ki || c.first_cta != next_cta {
                return Err(format!("chunk {ci} is out of order in kernel {ki}"));
            }
            next_cta = c.first_cta.saturating_add(c.n_ctas);
        }
        if next_cta as u64 != k.counts.ctas {
            return Err(format!(
                "kernel {ki}: chunks hold {next_cta} CTAs, counts say {}",
                k.counts.ctas
            ));
        }
        check_kernel_counts(index, ki, k)?;
        check_spin_regions(ki, k)?;
        check_named_barriers(ki, k)?;
        check_mbarriers(ki, k)?;
    }
    check_sync_words(index)?;
    for (ci, c) in index.chunks.iter().enumerate() {
        let end = c.offset.checked_add(c.stored_len as u64);
        if c.offset < HEADER_LEN as u64 || end.is_none_or(|e| e > data_end) {
            return Err(format!("chunk {ci} lies outside the data region"));
        }
    }
    Ok(())
}

/// Most exit terms a spin region may have, and most value instructions its head may read.
pub const MAX_EXIT_TERMS: usize = 8;

/// The spin regions of kernel `ki` (format version 3): each names three distinct PCs of the
/// kernel's static instructions, its test and back-edge are branches, its terms read one
/// of the head's first [`MAX_EXIT_TERMS`] values, and no PC belongs to two regions.
fn check_spin_regions(ki: usize, k: &KernelMeta) -> std::result::Result<(), String> {
    let name = &k.name;
    let class_at = |pc: u32| {
        k.statics
            .iter()
            .find(|s| s.pc == pc)
            .and_then(|s| k.opcodes.get(s.opcode as usize))
            .map(|o| o.class)
    };
    let mut pcs: Vec<u32> = Vec::new();
    for (ri, r) in k.spin_regions.iter().enumerate() {
        let at = format!(
            "kernel {ki} ({name}): {} region {ri} (pc {:#x}, test {:#x}, end {:#x})",
            r.kind.name(),
            r.start_pc,
            r.test_pc,
            r.end_pc
        );
        if r.start_pc == r.test_pc || r.test_pc == r.end_pc || r.start_pc == r.end_pc {
            return Err(format!(
                "{at}: its start, test and end must be three instructions"
            ));
        }
        for (what, pc) in [
            ("start", r.start_pc),
            ("test", r.test_pc),
            ("end", r.end_pc),
        ] {
            match class_at(pc) {
                None => {
                    return Err(format!(
                        "{at}: its {what} pc is no instruction of the kernel"
                    ))
                }
                Some(c) if what != "start" && c != crate::OpClass::Branch => {
                    return Err(format!(
                        "{at}: its {what} must be a branch, not {}",
                        c.name()
                    ))
                }
                _ => {}
            }
            if pcs.contains(&pc) {
                return Err(format!("{at}: pc {pc:#x} belongs to another region too"));
            }
            pcs.push(pc);
        }
        if r.terms.is_empty() || r.terms.len() > MAX_EXIT_TERMS {
            return Err(format!(
                "{at}: {} exit terms (1 to {MAX_EXIT_TERMS})",
                r.terms.len()
            ));
        }
        if let Some(t) = r.terms.iter().find(|t| t.value as usize >= MAX_EXIT_TERMS) {
            return Err(format!(
                "{at}: an exit term reads value {} (the head's first {MAX_EXIT_TERMS} only)",
                t.value
            ));
        }
        if r.backoff_max < r.backoff_base {
            return Err(format!(
                "{at}: back-off maximum {} below its base {}",
                r.backoff_max, r.backoff_base
            ));
        }
        if let Some(t) = r.terms.iter().find(|t| t.lane > crate::schema::OWN_LANE) {
            return Err(format!(
                "{at}: an exit term reads lane {}'s value (lanes 0 to 31, or 32: each lane its own)",
                t.lane
            ));
        }
        if !r.kind.loops() && r.backoff_base != 0 {
            return Err(format!(
                "{at}: a {} region runs once and has no back-off ({} cycles given)",
                r.kind.name(),
                r.backoff_base
            ));
        }
        for (i, a) in r.rebased.iter().enumerate() {
            let mem = k
                .statics
                .iter()
                .find(|s| s.pc == a.pc)
                .map(|s| s.mem_width > 0);
            if mem != Some(true) {
                return Err(format!(
                    "{at}: its rebased access at pc {:#x} is no memory instruction of the kernel",
                    a.pc
                ));
            }
            if a.stride == 0 || r.rebased[..i].iter().any(|o| o.pc == a.pc) {
                return Err(format!(
                    "{at}: its rebased access at pc {:#x} has stride 0 or a second entry",
                    a.pc
                ));
            }
        }
    }
    Ok(())
}

/// The mbarrier instructions of kernel `ki`: each at an instruction of the kernel that is
/// neither a barrier, a branch nor part of a region, an id below 32, one entry per PC, in a kernel
/// that records operands (their counts and phases).
fn check_mbarriers(ki: usize, k: &KernelMeta) -> std::result::Result<(), String> {
    let name = &k.name;
    for (i, m) in k.mbarriers.iter().enumerate() {
        let at = format!(
            "kernel {ki} ({name}): mbarrier {} instruction {i} (pc {:#x})",
            m.kind.name(),
            m.pc
        );
        if !k.records_operands {
            return Err(format!(
                "{at}: the kernel records no operands, where its count or phase would be"
            ));
        }
        let class = k
            .statics
            .iter()
            .find(|s| s.pc == m.pc)
            .and_then(|s| k.opcodes.get(s.opcode as usize))
            .map(|o| o.class);
        match class {
            None => return Err(format!("{at}: no instruction of the kernel is at its pc")),
            Some(c) if c == crate::OpClass::Barrier || c == crate::OpClass::Branch => {
                return Err(format!(
                    "{at}: a {} instruction, which cannot be an mbarrier operation",
                    c.name()
                ))
            }
            _ => {}
        }
        if m.id >= 32 {
            return Err(format!("{at}: mbarrier {} (ids 0 to 31)", m.id));
        }
        let in_region = k
            .spin_regions
            .iter()
            .any(|r| [r.start_pc, r.test_pc, r.end_pc].contains(&m.pc));
        if in_region || k.mbarriers[..i].iter().any(|o| o.pc == m.pc) {
            return Err(format!(
                "{at}: its pc has another mbarrier entry or is a region's"
            ));
        }
    }
    Ok(())
}

/// The named barriers of kernel `ki`: each at a barrier instruction of the kernel, an id
/// below 16, a thread count that is a multiple of 32 up to 1,024, one entry per PC.
fn check_named_barriers(ki: usize, k: &KernelMeta) -> std::result::Result<(), String> {
    let name = &k.name;
    for (i, b) in k.named_barriers.iter().enumerate() {
        let at = format!("kernel {ki} ({name}): named barrier {i} (pc {:#x})", b.pc);
        let class = k
            .statics
            .iter()
            .find(|s| s.pc == b.pc)
            .and_then(|s| k.opcodes.get(s.opcode as usize))
            .map(|o| o.class);
        match class {
            None => return Err(format!("{at}: no instruction of the kernel is at its pc")),
            Some(c) if c != crate::OpClass::Barrier => {
                return Err(format!("{at}: a {} instruction, not a barrier", c.name()))
            }
            _ => {}
        }
        if b.id >= 16 || b.threads % 32 != 0 || b.threads > 1024 {
            return Err(format!(
                "{at}: barrier {} of {} threads (ids 0 to 15; threads a multiple of 32 up to 1024, 0 for the whole CTA)",
                b.id, b.threads
            ));
        }
        if k.named_barriers[..i].iter().any(|o| o.pc == b.pc) {
            return Err(format!("{at}: its pc has another entry"));
        }
    }
    Ok(())
}

/// The sync words: on a listed device, not overlapping, their expected values as many as
/// their initial ones (or none).
fn check_sync_words(index: &Index) -> std::result::Result<(), String> {
    let n_dev = index.devices.len().max(1) as u32;
    let mut spans: Vec<(u32, u64, u64, &str)> = Vec::new();
    for w in &index.sync_words {
        let bytes = 4 * w.init.len() as u64;
        if w.device >= n_dev || w.init.is_empty() || w.addr % 4 != 0 {
            return Err(format!(
                "sync words {:?} at {:#x}: need a listed device, at least one word and a 4-byte-aligned address",
                w.name, w.addr
            ));
        }
        if !w.expect.is_empty() && w.expect.len() != w.init.len() {
            return Err(format!(
                "sync words {:?}: {} expected values for {} words",
                w.name,
                w.expect.len(),
                w.init.len()
            ));
        }
        let end = w
            .addr
            .checked_add(bytes)
            .ok_or(format!("sync words {:?} wrap around", w.name))?;
        if let Some(o) = spans
            .iter()
            .find(|o| o.0 == w.device && o.1 < end && w.addr < o.2)
        {
            return Err(format!("sync words {:?} overlap {:?}", w.name, o.3));
        }
        spans.push((w.device, w.addr, end, &w.name));
    }
    Ok(())
}

/// The counts of kernel `ki` against its chunks, its class mix and its grid.
fn check_kernel_counts(
    index: &Index,
    ki: usize,
    k: &KernelMeta,
) -> std::result::Result<(), String> {
    let c = &k.counts;
    let name = &k.name;
    let grid = k.grid_ctas();
    if c.ctas > grid {
        return Err(format!(
            "kernel {ki} ({name}): {} CTAs, more than its grid ({},{},{}) holds ({grid})",
            c.ctas, k.grid[0], k.grid[1], k.grid[2]
        ));
    }
    let (mut warp_insts, mut thread_insts) = (0u64, 0u64);
    let first = k.first_chunk as usize;
    for (i, e) in index.chunks[first..first + k.n_chunks as usize]
        .iter()
        .enumerate()
    {
        if e.thread_insts > e.warp_insts.saturating_mul(32) {
            return Err(format!(
                "chunk {}: {} thread instructions in {} warp instructions (at most 32 each)",
                first + i,
                e.thread_insts,
                e.warp_insts
            ));
        }
        warp_insts = warp_insts.saturating_add(e.warp_insts);
        thread_insts = thread_insts.saturating_add(e.thread_insts);
    }
    if warp_insts != c.warp_insts || thread_insts != c.thread_insts {
        return Err(format!(
            "kernel {ki} ({name}): its chunks hold {warp_insts} warp / {thread_insts} thread instructions, its counts say {} / {}",
            c.warp_insts, c.thread_insts
        ));
    }
    if c.class_warp_insts.len() != crate::opcode::OpClass::COUNT {
        return Err(format!(
            "kernel {ki} ({name}): the class mix has {} entries, expected {}",
            c.class_warp_insts.len(),
            crate::opcode::OpClass::COUNT
        ));
    }
    let classes = c
        .class_warp_insts
        .iter()
        .fold(0u64, |a, &n| a.saturating_add(n));
    if classes != c.warp_insts {
        return Err(format!(
            "kernel {ki} ({name}): the class mix sums to {classes} warp instructions, the counts say {}",
            c.warp_insts
        ));
    }
    if c.unknown_opcode_insts > c.warp_insts {
        return Err(format!(
            "kernel {ki} ({name}): {} instructions of unknown opcodes, more than its {} warp instructions",
            c.unknown_opcode_insts, c.warp_insts
        ));
    }
    if c.warp_insts > 0 && c.warps == 0 {
        return Err(format!(
            "kernel {ki} ({name}): {} warp instructions but no warps",
            c.warp_insts
        ));
    }
    Ok(())
}

/// Chunks a [`ChunkDecoder`] keeps decompressed: the loaded one and the ones used just
/// before it. CTAs are dispatched in grid order, which a trace may list in another order
/// (the tracer's capture order): dispatch then moves back and forth between a kernel's
/// chunks, and keeping one chunk decompressed it and checksummed each again and again
/// (632 times for the 16 chunks of vectorAdd x 8 in 64 KiB chunks on a100.yaml, a fifth
/// of the run). Memory: at most this many chunks of at most the writer's chunk size.
const CACHED_CHUNKS: usize = 4;

/// A decompressed chunk: its raw bytes and each CTA record's place in them.
#[derive(Default)]
struct Decompressed {
    chunk: Option<usize>,
    raw: Vec<u8>,
    ctas: Vec<(usize, usize)>,
}

/// Decompresses and decodes chunks of one [`TraceFile`]; owns reusable buffers, and keeps
/// the [`CACHED_CHUNKS`] most recently used chunks decompressed.
pub struct ChunkDecoder<'f> {
    file: &'f TraceFile,
    /// The loaded chunk (`loaded`), its bytes and CTA records.
    raw: Vec<u8>,
    loaded: Option<usize>,
    ctas: Vec<(usize, usize)>,
    /// Chunks loaded before it, least recently used first.
    recent: Vec<Decompressed>,
    cta: DecodedCta,
    stream: StreamScratch,
    release_pages: bool,
    /// Created on first use, then reused for every chunk.
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    decompressions: u64,
}

impl<'f> ChunkDecoder<'f> {
    /// Whether to advise the kernel to drop a chunk's mapped pages once decompressed
    /// (default true). Turn off when the same chunks are read again and again.
    pub fn set_release_pages(&mut self, on: bool) {
        self.release_pages = on;
    }

    /// Decompresses chunk `chunk` (checking its length and CRC) unless already loaded;
    /// returns its CTA count.
    pub fn load(&mut self, chunk: usize) -> Result<usize> {
        if self.loaded == Some(chunk) {
            return Ok(self.ctas.len());
        }
        // Used recently: swapped back in, no decompression.
        if let Some(i) = self.recent.iter().position(|d| d.chunk == Some(chunk)) {
            let mut d = self.recent.remove(i);
            self.swap_loaded(&mut d);
            if d.chunk.is_some() {
                self.recent.push(d);
            }
            return Ok(self.ctas.len());
        }
        // The loaded chunk joins the recent ones; the least recently used one's buffers
        // (when all places are taken) receive the new chunk.
        let mut spare = if self.recent.len() + 1 >= CACHED_CHUNKS {
            self.recent.remove(0)
        } else {
            Decompressed::default()
        };
        spare.chunk = None;
        self.swap_loaded(&mut spare);
        if spare.chunk.is_some() {
            self.recent.push(spare);
        }
        self.decompressions += 1;
        let f = self.file;
        let c = *f
            .index
            .chunks
            .get(chunk)
            .ok_or_else(|| TraceError::Corrupt {
                path: f.path.clone(),
                detail: format!("no chunk {chunk}"),
            })?;
        let start = c.offset as usize;
        let end = start + c.stored_len as usize;
        let frame = &f.map[start..end];
        // Decompressed into the vector's spare capacity (zstd sets its length): no zeroing
        // pass over a buffer about to be overwritten.
        // The index's length is checked against the frame's own header before anything is
        // allocated for it: a damaged index must not make the reader ask for gigabytes.
        match zstd::zstd_safe::get_frame_content_size(frame) {
            Ok(Some(n)) if n == c.raw_len as u64 => {}
            Ok(Some(n)) => {
                return Err(f.chunk_error(
                    chunk,
                    &format!(
                        "the index says {} bytes decompressed, its zstd frame {n}",
                        c.raw_len
                    ),
                ))
            }
            // The writer always records the size; a frame without one is not the writer's.
            Ok(None) | Err(_) => {
                return Err(f.chunk_error(chunk, "not a zstd frame with its content size"))
            }
        }
        self.raw.clear();
        self.raw.reserve(c.raw_len as usize);
        let zstd = match &mut self.zstd {
            Some(z) => z,
            None => self
                .zstd
                .insert(zstd::bulk::Decompressor::new().map_err(|e| {
                    f.chunk_error(chunk, &format!("cannot create a zstd context: {e}"))
                })?),
        };
        let n = zstd
            .decompress_to_buffer(frame, &mut self.raw)
            .map_err(|e| f.chunk_error(chunk, &format!("cannot decompress: {e}")))?;
        if n != c.raw_len as usize {
            return Err(f.chunk_error(chunk, "decompressed length differs from the index"));
        }
        if crc32fast::hash(&self.raw) != c.crc32 {
            return Err(f.chunk_error(chunk, "checksum mismatch"));
        }
        if self.release_pages {
            release(&f.map, start, end);
        }
        let base = self.raw.as_ptr() as usize;
        let recs = split_chunk(&self.raw).map_err(|e| f.chunk_error(chunk, e.0))?;
        if recs.len() != c.n_ctas as usize {
            return Err(f.chunk_error(chunk, "CTA count differs from the index"));
        }
        self.ctas.clear();
        self.ctas
            .extend(recs.iter().map(|r| (r.as_ptr() as usize - base, r.len())));
        self.loaded = Some(chunk);
        Ok(self.ctas.len())
    }

    /// Makes `d` the loaded chunk and the loaded chunk `d`.
    fn swap_loaded(&mut self, d: &mut Decompressed) {
        std::mem::swap(&mut self.raw, &mut d.raw);
        std::mem::swap(&mut self.ctas, &mut d.ctas);
        std::mem::swap(&mut self.loaded, &mut d.chunk);
    }

    /// How many chunks this decoder has decompressed (each checksummed once).
    pub fn decompressions(&self) -> u64 {
        self.decompressions
    }

    /// Decodes CTA `i` (position within the loaded chunk).
    pub fn cta(&mut self, i: usize) -> Result<&DecodedCta> {
        let chunk = self.loaded.ok_or_else(|| TraceError::Corrupt {
            path: self.file.path.clone(),
            detail: "no chunk loaded".into(),
        })?;
        let (off, len) = self.ctas[i];
        let k = self.file.index.chunks[chunk].kernel as usize;
        decode_cta(
            &self.raw[off..off + len],
            &self.file.slots[k],
            self.file.version,
            &mut self.cta,
        )
        .map_err(|e| self.file.chunk_error(chunk, &format!("CTA {i}: {}", e.0)))?;
        Ok(&self.cta)
    }

    /// Decodes CTA `cta` (listing order) of kernel `k`, loading its chunk if needed.
    pub fn kernel_cta(&mut self, k: usize, cta: u32) -> Result<&DecodedCta> {
        let (_, i) = self.locate(k, cta)?;
        self.cta(i)
    }

    /// Loads the chunk holding CTA `cta` (listing order) of kernel `k`; returns the chunk
    /// and the CTA's index in it.
    fn locate(&mut self, k: usize, cta: u32) -> Result<(usize, usize)> {
        let chunk = self
            .file
            .chunk_of_cta(k, cta)
            .ok_or_else(|| TraceError::Corrupt {
                path: self.file.path.clone(),
                detail: format!("kernel {k} has no CTA {cta}"),
            })?;
        self.load(chunk)?;
        Ok((
            chunk,
            (cta - self.file.index.chunks[chunk].first_cta) as usize,
        ))
    }

    /// CTA `cta` (listing order) of kernel `k` kept encoded, its warps to be decoded
    /// incrementally ([`CtaStream`]); the whole record is checked now, so a corrupt one is
    /// an error here, as with [`ChunkDecoder::kernel_cta`].
    pub fn kernel_cta_stream(&mut self, k: usize, cta: u32) -> Result<CtaStream> {
        let (chunk, i) = self.locate(k, cta)?;
        let (off, len) = self.ctas[i];
        let mut st = CtaStream::new_in(
            &self.raw[off..off + len],
            self.file.slots[k].clone(),
            self.file.version,
            &mut self.stream,
        )
        .map_err(|e| self.file.chunk_error(chunk, &format!("CTA {i}: {}", e.0)))?;
        st.set_bounds(self.file.bounds.get(k).cloned().flatten());
        Ok(st)
    }

    /// Calls `f` on every CTA of chunk `chunk`, in order.
    pub fn for_each_cta<E: From<TraceError>>(
        &mut self,
        chunk: usize,
        mut f: impl FnMut(&DecodedCta) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let n = self.load(chunk)?;
        for i in 0..n {
            let cta = self.cta(i)?;
            f(cta)?;
        }
        Ok(())
    }
}

#[cfg(unix)]
fn release(map: &Mmap, start: usize, end: usize) {
    // From the page holding the chunk's first byte up to (not including) the page holding
    // its last: chunks are often much smaller than a page, and a sequential reader has
    // consumed the previous chunk sharing the first page. A page released too early is
    // only read again from the file.
    const PAGE: usize = 4096;
    let s = start / PAGE * PAGE;
    let e = end / PAGE * PAGE;
    if e > s {
        // SAFETY: the mapping is a read-only, file-backed, private mapping: dropping its
        // pages only means they are read again from the file if touched.
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, s, e - s) };
    }
}

#[cfg(not(unix))]
fn release(_map: &Mmap, _start: usize, _end: usize) {}

#[cfg(test)]
mod tests {
    /// Workers on several threads share one open trace.
    #[test]
    fn trace_file_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<super::TraceFile>();
    }
}
