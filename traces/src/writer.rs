//! Streaming `.tst` writer: memory independent of the trace's length.
//!
//! The writer holds one CTA record and one chunk (at most about `chunk_target_bytes` plus
//! one CTA) at a time, plus the index, whose size depends on kernels, static
//! instructions and chunks only. It writes to `<path>.partial` and renames to `<path>` in
//! [`TraceWriter::finish`]; dropped unfinished (an error anywhere in an import), it removes
//! the partial file, so a requested output name never holds a half-written trace.

use crate::codec::{join_chunk, operands_at, AddrRecord, ClusterInfo, CtaEncoder};
use crate::error::{io_err, Result, TraceError};
use crate::format::*;
use crate::opcode::{OpClass, OpcodeInfo};
use crate::schema::*;
use rustc_hash::FxHashMap as HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

/// Tuning of the writer.
#[derive(Clone, Copy, Debug)]
pub struct WriterOptions {
    /// A chunk is closed after the CTA that brings it to at least this many uncompressed
    /// bytes (DESIGN.md: 64 KiB to 1 MiB).
    pub chunk_target_bytes: usize,
    /// zstd compression level.
    pub zstd_level: i32,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            chunk_target_bytes: 256 * 1024,
            zstd_level: 9,
        }
    }
}

/// One traced instruction as the writer takes it.
#[derive(Clone, Copy, Debug)]
pub struct RawInst<'a> {
    pub pc: u32,
    pub mask: u32,
    /// Index returned by [`TraceWriter::add_opcode`] for the current kernel.
    pub opcode: u16,
    pub dsts: &'a [u16],
    pub srcs: &'a [u16],
    pub mem_width: u32,
    pub imm: Option<i64>,
    pub line: Option<u32>,
    pub addrs: AddrRecord<'a>,
}

struct KernelBuild {
    meta: KernelMeta,
    /// Static instruction variants by PC.
    by_pc: HashMap<u32, Vec<u32>>,
    slot_insts: Vec<u64>,
    cta_index: u32,
}

/// Streaming writer of one `.tst` file.
pub struct TraceWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    pos: u64,
    opts: WriterOptions,
    index: Index,
    kernel: Option<KernelBuild>,
    enc: CtaEncoder,
    in_warp: bool,
    cta_open: bool,
    cta_warp_insts: u64,
    cta_thread_insts: u64,
    // The open chunk.
    records: Vec<u8>,
    lens: Vec<u32>,
    chunk_first_cta: u32,
    chunk_warp_insts: u64,
    chunk_thread_insts: u64,
    raw: Vec<u8>,
    compressor: zstd::bulk::Compressor<'static>,
}

impl TraceWriter {
    /// Starts writing `path` (through `<path>.partial`).
    pub fn create(path: &Path, opts: WriterOptions) -> Result<Self> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(io_err(&tmp))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut header = Vec::with_capacity(HEADER_LEN);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        out.write_all(&header).map_err(io_err(&tmp))?;
        let compressor = zstd::bulk::Compressor::new(opts.zstd_level).map_err(io_err(&tmp))?;
        Ok(TraceWriter {
            path: path.to_path_buf(),
            tmp,
            out: Some(out),
            pos: HEADER_LEN as u64,
            opts,
            index: Index {
                devices: Vec::new(),
                commands: Vec::new(),
                kernels: Vec::new(),
                chunks: Vec::new(),
                sync_words: Vec::new(),
            },
            kernel: None,
            enc: CtaEncoder::new(),
            in_warp: false,
            cta_open: false,
            cta_warp_insts: 0,
            cta_thread_insts: 0,
            records: Vec::new(),
            lens: Vec::new(),
            chunk_first_cta: 0,
            chunk_warp_insts: 0,
            chunk_thread_insts: 0,
            raw: Vec::new(),
            compressor,
        })
    }

    fn misuse(&self, detail: &str) -> TraceError {
        TraceError::Write {
            path: self.path.clone(),
            detail: detail.to_string(),
        }
    }

    /// Declares a device (command list); returns its index.
    pub fn add_device(&mut self, info: DeviceInfo) -> u32 {
        self.index.devices.push(info);
        (self.index.devices.len() - 1) as u32
    }

    /// Appends a command. A `KernelLaunch` must name a kernel already begun.
    pub fn add_command(&mut self, cmd: Command) -> Result<()> {
        if let Command::KernelLaunch { kernel, .. } = cmd {
            let known = self.index.kernels.len() as u32 + u32::from(self.kernel.is_some());
            if kernel >= known {
                return Err(self.misuse("kernel launch names a kernel not yet written"));
            }
        }
        self.index.commands.push(cmd);
        Ok(())
    }

    /// Starts a kernel; `meta`'s opcodes, statics, counts and chunk range are filled by
    /// the writer. Returns the kernel's index.
    pub fn begin_kernel(&mut self, mut meta: KernelMeta) -> Result<u32> {
        if self.kernel.is_some() {
            return Err(self.misuse("begin_kernel while another kernel is open"));
        }
        meta.opcodes.clear();
        meta.statics.clear();
        meta.counts = KernelCounts {
            class_warp_insts: vec![0; OpClass::COUNT],
            ..KernelCounts::default()
        };
        meta.first_chunk = self.index.chunks.len() as u32;
        meta.n_chunks = 0;
        self.kernel = Some(KernelBuild {
            meta,
            by_pc: HashMap::default(),
            slot_insts: Vec::new(),
            cta_index: 0,
        });
        self.chunk_first_cta = 0;
        Ok(self.index.kernels.len() as u32)
    }

    /// Adds an opcode to the current kernel's table; returns its index.
    pub fn add_opcode(&mut self, info: OpcodeInfo) -> Result<u16> {
        let too_many = self.misuse("more than 65535 distinct opcodes in one kernel");
        let k = self.kernel.as_mut().ok_or_else(|| TraceError::Write {
            path: PathBuf::new(),
            detail: "add_opcode outside a kernel".into(),
        })?;
        let id = u16::try_from(k.meta.opcodes.len()).map_err(|_| too_many)?;
        k.meta.opcodes.push(info);
        Ok(id)
    }

    pub fn begin_cta(&mut self, id: [u32; 3], cluster: Option<ClusterInfo>) -> Result<()> {
        if self.kernel.is_none() || self.cta_open {
            return Err(self.misuse("begin_cta outside a kernel or inside another CTA"));
        }
        self.enc.begin_cta(id, cluster);
        self.cta_open = true;
        self.cta_warp_insts = 0;
        self.cta_thread_insts = 0;
        Ok(())
    }

    pub fn begin_warp(&mut self, warp_id: u32) -> Result<()> {
        if !self.cta_open || self.in_warp {
            return Err(self.misuse("begin_warp outside a CTA or inside another warp"));
        }
        self.enc.begin_warp(warp_id);
        self.in_warp = true;
        Ok(())
    }

    /// Appends one instruction to the current warp.
    #[inline]
    pub fn push(&mut self, inst: &RawInst<'_>) -> Result<()> {
        self.push_with_operands(inst, &[])
    }

    /// Appends one instruction with the per-lane operands of an atomic or reduction
    /// (kernels begun with `records_operands`): one value per active lane, two for
    /// compare-and-swap (compare, new), in lane order.
    #[inline]
    pub fn push_with_operands(&mut self, inst: &RawInst<'_>, operands: &[u64]) -> Result<()> {
        if (inst.mem_width == 0) != matches!(inst.addrs, AddrRecord::None) {
            return Err(self.misuse("addresses given exactly when mem_width is non-zero"));
        }
        let Some(k) = self.kernel.as_mut() else {
            return Err(self.misuse("instruction outside a kernel"));
        };
        if !self.in_warp {
            return Err(self.misuse("instruction outside a warp"));
        }
        if inst.opcode as usize >= k.meta.opcodes.len() {
            return Err(self.misuse("instruction names an opcode not added"));
        }
        let per_lane = if k.meta.records_operands {
            operands_at(&k.meta, inst.pc, &k.meta.opcodes[inst.opcode as usize]) as usize
        } else {
            0
        };
        if operands.len() != per_lane * inst.mask.count_ones() as usize {
            return Err(self.misuse(&format!(
                "{} operands given for an instruction that records {per_lane} per active lane",
                operands.len()
            )));
        }
        let Some(k) = self.kernel.as_mut() else {
            return Err(self.misuse("instruction outside a kernel"));
        };
        let slot = intern(k, inst);
        k.slot_insts[slot as usize] += 1;
        self.cta_warp_insts += 1;
        self.cta_thread_insts += inst.mask.count_ones() as u64;
        self.enc.push(slot, inst.mask, inst.addrs);
        self.enc.push_operands(operands);
        Ok(())
    }

    pub fn end_warp(&mut self) -> Result<()> {
        if !self.in_warp {
            return Err(self.misuse("end_warp outside a warp"));
        }
        self.enc.end_warp();
        self.in_warp = false;
        if let Some(k) = self.kernel.as_mut() {
            k.meta.counts.warps += 1;
        }
        Ok(())
    }

    pub fn end_cta(&mut self) -> Result<()> {
        if !self.cta_open || self.in_warp {
            return Err(self.misuse("end_cta outside a CTA or inside a warp"));
        }
        self.cta_open = false;
        let rec = self.enc.finish_cta();
        self.records.extend_from_slice(rec);
        self.lens.push(rec.len() as u32);
        self.chunk_warp_insts += self.cta_warp_insts;
        self.chunk_thread_insts += self.cta_thread_insts;
        if let Some(k) = self.kernel.as_mut() {
            k.cta_index += 1;
            k.meta.counts.ctas += 1;
            k.meta.counts.warp_insts += self.cta_warp_insts;
            k.meta.counts.thread_insts += self.cta_thread_insts;
        }
        if self.records.len() >= self.opts.chunk_target_bytes {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.lens.is_empty() {
            return Ok(());
        }
        let Some(k) = self.kernel.as_mut() else {
            return Err(self.misuse("chunk outside a kernel"));
        };
        join_chunk(&self.records, &self.lens, &mut self.raw);
        let frame = self
            .compressor
            .compress(&self.raw)
            .map_err(io_err(&self.tmp))?;
        let raw_len = u32::try_from(self.raw.len()).map_err(|_| TraceError::Write {
            path: self.path.clone(),
            detail: "a single CTA record exceeds 4 GiB".into(),
        })?;
        let entry = ChunkEntry {
            kernel: self.index.kernels.len() as u32,
            first_cta: self.chunk_first_cta,
            n_ctas: self.lens.len() as u32,
            offset: self.pos,
            stored_len: frame.len() as u32,
            raw_len,
            crc32: crc32fast::hash(&self.raw),
            warp_insts: self.chunk_warp_insts,
            thread_insts: self.chunk_thread_insts,
        };
        k.meta.counts.raw_bytes += raw_len as u64;
        k.meta.counts.stored_bytes += frame.len() as u64;
        k.meta.n_chunks += 1;
        self.chunk_first_cta = k.cta_index;
        let out = self.out.as_mut().ok_or_else(|| TraceError::Write {
            path: PathBuf::new(),
            detail: "writer already finished".into(),
        })?;
        out.write_all(&frame).map_err(io_err(&self.tmp))?;
        self.pos += frame.len() as u64;
        self.index.chunks.push(entry);
        self.records.clear();
        self.lens.clear();
        self.chunk_warp_insts = 0;
        self.chunk_thread_insts = 0;
        Ok(())
    }

    /// Closes the current kernel. Returns its counts.
    pub fn end_kernel(&mut self) -> Result<KernelCounts> {
        if self.cta_open {
            return Err(self.misuse("end_kernel inside a CTA"));
        }
        self.flush_chunk()?;
        let Some(mut k) = self.kernel.take() else {
            return Err(self.misuse("end_kernel without a kernel"));
        };
        for (s, &n) in k.slot_insts.iter().enumerate() {
            let st = &k.meta.statics[s];
            let info = &k.meta.opcodes[st.opcode as usize];
            k.meta.counts.class_warp_insts[info.class as usize] += n;
            if info.unknown {
                k.meta.counts.unknown_opcode_insts += n;
            }
        }
        let counts = k.meta.counts.clone();
        self.index.kernels.push(k.meta);
        Ok(counts)
    }

    /// Writes the index and footer, and renames the file into place.
    pub fn finish(mut self) -> Result<Index> {
        if self.kernel.is_some() {
            return Err(self.misuse("finish with a kernel still open"));
        }
        let index_bytes =
            rkyv::to_bytes::<rkyv::rancor::Error>(&self.index).map_err(|e| TraceError::Write {
                path: self.path.clone(),
                detail: format!("cannot serialize index: {e}"),
            })?;
        let mut out = self.out.take().ok_or_else(|| TraceError::Write {
            path: PathBuf::new(),
            detail: "writer already finished".into(),
        })?;
        let pad = (INDEX_ALIGN - (self.pos as usize % INDEX_ALIGN)) % INDEX_ALIGN;
        out.write_all(&[0u8; INDEX_ALIGN][..pad])
            .map_err(io_err(&self.tmp))?;
        let index_off = self.pos + pad as u64;
        out.write_all(&index_bytes).map_err(io_err(&self.tmp))?;
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        footer.extend_from_slice(&index_off.to_le_bytes());
        footer.extend_from_slice(&(index_bytes.len() as u64).to_le_bytes());
        footer.extend_from_slice(&crc32fast::hash(&index_bytes).to_le_bytes());
        footer.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        footer.extend_from_slice(FOOTER_MAGIC);
        out.write_all(&footer).map_err(io_err(&self.tmp))?;
        let file = out
            .into_inner()
            .map_err(|e| io_err(&self.tmp)(e.into_error()))?;
        debug_assert_eq!(
            file_len(&file),
            Some(index_off + index_bytes.len() as u64 + FOOTER_LEN as u64)
        );
        file.sync_all().map_err(io_err(&self.tmp))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path).map_err(io_err(&self.path))?;
        Ok(std::mem::replace(
            &mut self.index,
            Index {
                devices: Vec::new(),
                commands: Vec::new(),
                kernels: Vec::new(),
                chunks: Vec::new(),
                sync_words: Vec::new(),
            },
        ))
    }

    /// Declares sync words (format version 3): their values are computed by the timing
    /// model, starting from `init`, and checked against `expect` at the end of a run.
    pub fn add_sync_words(&mut self, words: SyncWords) {
        self.index.sync_words.push(words);
    }

    /// The sync words declared so far, for values known only at the end (the expected
    /// final values).
    pub fn sync_words_mut(&mut self) -> &mut Vec<SyncWords> {
        &mut self.index.sync_words
    }

    /// The metadata of the kernel being written, for fields known only at its end
    /// (a recorder's register count). Opcodes, statics, counts and the chunk range belong
    /// to the writer and are overwritten.
    pub fn kernel_meta_mut(&mut self) -> Option<&mut KernelMeta> {
        self.kernel.as_mut().map(|k| &mut k.meta)
    }

    /// The index as written so far (for reports while importing).
    pub fn index(&self) -> &Index {
        &self.index
    }
}

fn file_len(f: &File) -> Option<u64> {
    let mut f = f;
    f.stream_position().ok()
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if self.out.is_some() {
            // Unfinished: never leave a partial file behind.
            self.out = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Register lists are a few entries long: compare inline instead of calling `memcmp`
/// (11% of import time when it did).
#[inline]
fn same_regs(a: &[u16], b: &[u16]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Finds or creates the static instruction of `inst` in kernel `k`.
#[inline]
fn intern(k: &mut KernelBuild, inst: &RawInst<'_>) -> u32 {
    let statics = &mut k.meta.statics;
    let variants = k.by_pc.entry(inst.pc).or_default();
    for &s in variants.iter() {
        let st = &statics[s as usize];
        if st.opcode == inst.opcode
            && st.mem_width == inst.mem_width
            && st.imm == inst.imm
            && st.line == inst.line
            && same_regs(&st.dsts, inst.dsts)
            && same_regs(&st.srcs, inst.srcs)
        {
            return s;
        }
    }
    let s = statics.len() as u32;
    statics.push(StaticInst {
        pc: inst.pc,
        opcode: inst.opcode,
        dsts: inst.dsts.to_vec(),
        srcs: inst.srcs.to_vec(),
        mem_width: inst.mem_width,
        imm: inst.imm,
        line: inst.line,
    });
    variants.push(s);
    k.slot_insts.push(0);
    s
}
