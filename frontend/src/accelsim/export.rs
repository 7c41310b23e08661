//! Export of a `.tst` file back to an Accel-Sim trace directory.
//!
//! Lines are written with the tracer's own printf formats (`%04x` PC, `%08x` mask,
//! `0x%llx` bases, `0x%016lx` listed addresses, a space after every field), the kernel
//! header exactly as it was imported, and the thread-block layout of Accel-Sim's
//! post-processing tool, so a trace captured by the tracer comes back byte for byte.

use super::import::ImportError;
use super::line::{TextAddrs, TextInst};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use tessera_traces::codec::{operands_at, Addrs, ADDR_DELTA};
use tessera_traces::schema::OWN_LANE;
use tessera_traces::{
    Command, DecodedCta, KernelMeta, RegionKind, SpinRegion, SyncCmp, TraceFile, WarpInst,
};

/// What an export wrote.
#[derive(Clone, Debug, Default)]
pub struct ExportReport {
    pub files: u64,
    pub kernels: u64,
    pub warp_insts: u64,
    pub bytes: u64,
}

fn ferr(path: &Path, e: impl std::fmt::Display) -> ImportError {
    ImportError::File {
        path: path.to_path_buf(),
        msg: e.to_string(),
    }
}

/// Fills `out` (buffers reused) with the text form of a decoded instruction.
pub fn to_text_inst(meta: &KernelMeta, cta: &DecodedCta, inst: &WarpInst, out: &mut TextInst) {
    let st = &meta.statics[inst.slot as usize];
    out.line = st.line;
    out.pc = inst.pc;
    out.mask = inst.mask;
    out.dsts.clear();
    out.dsts.extend_from_slice(&st.dsts);
    out.opcode.clear();
    out.opcode.push_str(&meta.opcodes[st.opcode as usize].name);
    out.srcs.clear();
    out.srcs.extend_from_slice(&st.srcs);
    out.mem_width = st.mem_width;
    out.imm = st.imm;
    out.operands.clear();
    out.addrs = match inst.addrs {
        Addrs::None => TextAddrs::None,
        Addrs::Stride { base, stride } => TextAddrs::Stride { base, stride },
        Addrs::List { start, len } => {
            let a = &cta.addrs[start as usize..(start + len) as usize];
            if inst.addr_mode == ADDR_DELTA {
                TextAddrs::Delta {
                    base: a.first().copied().unwrap_or(0),
                    deltas: a
                        .windows(2)
                        .map(|w| w[1].wrapping_sub(w[0]) as i64)
                        .collect(),
                }
            } else {
                TextAddrs::List(a.to_vec())
            }
        }
    };
}

/// A header in the tracer's version-5 layout, for kernels that were not imported (generated
/// traces have no header text of their own).
fn synth_header(m: &KernelMeta) -> String {
    let mut h = String::new();
    let _ = writeln!(h, "-kernel name = {}", m.name);
    let _ = writeln!(h, "-kernel id = {}", m.id);
    let _ = writeln!(h, "-grid dim = ({},{},{})", m.grid[0], m.grid[1], m.grid[2]);
    let _ = writeln!(
        h,
        "-block dim = ({},{},{})",
        m.block[0], m.block[1], m.block[2]
    );
    let _ = writeln!(h, "-shmem = {}", m.shmem_bytes);
    let _ = writeln!(h, "-nregs = {}", m.nregs);
    let _ = writeln!(h, "-binary version = {}", m.binary_version);
    let _ = writeln!(h, "-cuda stream id = {}", m.stream);
    let _ = writeln!(h, "-shmem base_addr = 0x{:016x}", m.shmem_base);
    let _ = writeln!(h, "-local mem base_addr = 0x{:016x}", m.local_base);
    let _ = writeln!(h, "-nvbit version = {}", m.nvbit_version);
    // Version 5 lines carry an immediate; a kernel without immediates (synthetic traces)
    // is written as version 4, whose files may have none.
    let tracer = if m.statics.iter().all(|s| s.imm.is_some()) {
        m.tracer_version.max(5)
    } else {
        4
    };
    let _ = writeln!(h, "-accelsim tracer version = {tracer}");
    let _ = writeln!(h, "-enable lineinfo = {}", u8::from(m.lineinfo));
    // tessera extensions: keys Accel-Sim's header parser does not know and skips.
    if !m.generator.is_empty() {
        let _ = writeln!(h, "-tessera generator = {}", m.generator);
    }
    if m.records_operands {
        let _ = writeln!(h, "-tessera operands = 1");
    }
    for a in &m.annotations {
        let _ = write!(
            h,
            "-tessera annotation = {} 0x{:x} {} {}",
            a.name,
            a.base,
            a.bytes,
            a.access.name()
        );
        for r in &a.ranges {
            let _ = write!(h, " {}:{}:0x{:x}:0x{:x}", r.first_cta, r.n_ctas, r.lo, r.hi);
        }
        h.push('\n');
    }
    for r in &m.spin_regions {
        h.push_str(&region_line(r));
    }
    for b in &m.named_barriers {
        let _ = writeln!(
            h,
            "-tessera bar = 0x{:x},{},{},{}",
            b.pc,
            b.id,
            b.threads,
            if b.arrive { "arrive" } else { "sync" }
        );
    }
    for m in &m.mbarriers {
        let _ = writeln!(h, "-tessera mbar = 0x{:x},{},{}", m.pc, m.id, m.kind.name());
    }
    h.push('\n');
    h.push_str("#traces format = [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width [adrrescompress?] [mem_addresses] immediate\n\n\n\n");
    h
}

/// A region's header line: a spin loop whose terms read each lane's own value and with no
/// rebased access as format version 3 wrote it (`-tessera spin = 0xSTART 0xTEST 0xEND
/// all|any BASE MAX V:CMP[,V:CMP]... LABEL`), any other region as `-tessera region = KIND
/// 0xSTART 0xTEST 0xEND all|any BASE MAX TERMS REBASED LABEL`, where KIND is `spin`,
/// `branch` or `queue`, a term is `V:CMP` (each lane's own value) or `V:CMP:LANE` (lane
/// LANE's value), and REBASED is `-` (none) or `0xPC:STRIDE[,0xPC:STRIDE]...` (a signed
/// decimal stride).
pub(crate) fn region_line(r: &SpinRegion) -> String {
    let old_form = r.kind == RegionKind::Spin
        && r.rebased.is_empty()
        && r.terms.iter().all(|t| t.lane == OWN_LANE);
    let mut h = String::new();
    if old_form {
        h.push_str("-tessera spin = ");
    } else {
        let _ = write!(h, "-tessera region = {} ", r.kind.name());
    }
    let _ = write!(
        h,
        "0x{:x} 0x{:x} 0x{:x} {} {} {} ",
        r.start_pc,
        r.test_pc,
        r.end_pc,
        if r.all { "all" } else { "any" },
        r.backoff_base,
        r.backoff_max
    );
    for (i, t) in r.terms.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(h, "{sep}{}:{}", t.value, cmp_name(t.cmp));
        if t.lane != OWN_LANE {
            let _ = write!(h, ":{}", t.lane);
        }
    }
    if !old_form {
        if r.rebased.is_empty() {
            h.push_str(" -");
        }
        for (i, a) in r.rebased.iter().enumerate() {
            let sep = if i == 0 { ' ' } else { ',' };
            let _ = write!(h, "{sep}0x{:x}:{}", a.pc, a.stride);
        }
    }
    let _ = writeln!(h, " {}", r.label);
    h
}

/// The name of an exit term's comparison in `-tessera spin` lines.
pub(crate) fn cmp_name(c: SyncCmp) -> &'static str {
    match c {
        SyncCmp::Eq => "eq",
        SyncCmp::Ne => "ne",
        SyncCmp::Lt => "lt",
        SyncCmp::Le => "le",
        SyncCmp::Gt => "gt",
        SyncCmp::Ge => "ge",
    }
}

/// File name a kernel is exported under: its import name without `.xz`, or `kernel-N.traceg`.
fn kernel_file_name(m: &KernelMeta, k: usize) -> String {
    if m.source.is_empty() {
        format!("kernel-{}.traceg", k + 1)
    } else {
        m.source
            .strip_suffix(".xz")
            .unwrap_or(&m.source)
            .to_string()
    }
}

/// Writes `tst` as an Accel-Sim trace directory `out_dir` (which must not exist, or be
/// empty). Files are written into `<out_dir>.partial` and renamed at the end, so a failed
/// export leaves nothing under `out_dir`.
pub fn export_dir(tst: &Path, out_dir: &Path) -> Result<ExportReport, ImportError> {
    export_dir_with_progress(tst, out_dir, &mut |_, _| {})
}

/// [`export_dir`], calling `progress(ctas_done, ctas)` after each CTA written (`ctas`: all
/// the trace's, as its index counts them).
pub fn export_dir_with_progress(
    tst: &Path,
    out_dir: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ExportReport, ImportError> {
    let t = TraceFile::open(tst)?;
    if out_dir.exists() {
        let empty = std::fs::read_dir(out_dir)
            .map_err(|e| ferr(out_dir, e))?
            .next()
            .is_none();
        if !empty {
            return Err(ferr(
                out_dir,
                "already exists and is not empty; choose a new directory",
            ));
        }
    }
    let mut tmp = out_dir.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| ferr(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| ferr(&tmp, e))?;
    let res = export_into(&t, &tmp, progress);
    if let Err(e) = res {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if out_dir.exists() {
        std::fs::remove_dir(out_dir).map_err(|e| ferr(out_dir, e))?;
    }
    std::fs::rename(&tmp, out_dir).map_err(|e| ferr(out_dir, e))?;
    res
}

fn export_into(
    t: &TraceFile,
    dir: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ExportReport, ImportError> {
    let mut rep = ExportReport::default();
    let idx = t.index();
    let total: u64 = idx.kernels.iter().map(|k| k.counts.ctas).sum();
    let mut done = 0u64;
    let mut on_cta = || {
        done += 1;
        progress(done, total);
    };
    let n_dev = idx.devices.len().max(1);
    for d in 0..n_dev {
        let name = idx
            .devices
            .get(d)
            .map(|x| x.source.clone())
            .unwrap_or_else(|| "kernelslist.g".into());
        let mut list = String::new();
        // tessera extension (recorded traces): sync words with their initial and expected
        // values; Accel-Sim skips unknown lines.
        for sw in idx.sync_words.iter().filter(|sw| sw.device as usize == d) {
            let words = |v: &[u32]| {
                v.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let _ = writeln!(
                list,
                "SyncWords,0x{:016x},{},{},{}",
                sw.addr,
                words(&sw.init),
                words(&sw.expect),
                sw.name
            );
        }
        for c in &idx.commands {
            match *c {
                Command::Alloc {
                    device,
                    addr,
                    bytes,
                } if device as usize == d => {
                    // tessera extension (recorded traces); Accel-Sim skips unknown lines.
                    let _ = writeln!(list, "MemAlloc,0x{addr:016x},{bytes}");
                }
                Command::MemcpyHtoD {
                    device,
                    addr,
                    bytes,
                } if device as usize == d => {
                    let _ = writeln!(list, "MemcpyHtoD,0x{addr:016x},{bytes}");
                }
                Command::KernelLaunch { device, kernel } if device as usize == d => {
                    let k = kernel as usize;
                    let kname = kernel_file_name(&idx.kernels[k], k);
                    let _ = writeln!(list, "{kname}");
                    rep.bytes += write_kernel(t, k, &dir.join(&kname), &mut on_cta)?;
                    rep.kernels += 1;
                    rep.files += 1;
                    rep.warp_insts += idx.kernels[k].counts.warp_insts;
                }
                _ => {}
            }
        }
        let p = dir.join(&name);
        std::fs::write(&p, &list).map_err(|e| ferr(&p, e))?;
        rep.files += 1;
        rep.bytes += list.len() as u64;
    }
    Ok(rep)
}

fn write_kernel(
    t: &TraceFile,
    k: usize,
    path: &Path,
    on_cta: &mut dyn FnMut(),
) -> Result<u64, ImportError> {
    let meta = &t.kernels()[k];
    let f = std::fs::File::create(path).map_err(|e| ferr(path, e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
    let header = if meta.header_text.is_empty() {
        synth_header(meta)
    } else {
        meta.header_text.clone()
    };
    let mut s = header;
    let mut total = 0u64;
    let mut dec = t.decoder();
    let mut first = true;
    let mut text = TextInst::default();
    for chunk in t.kernel_chunks(k) {
        dec.for_each_cta(chunk, |cta| -> Result<(), ImportError> {
            if !first {
                s.push('\n');
            }
            first = false;
            let _ = write!(
                s,
                "#BEGIN_TB\n\nthread block = {},{},{}\n",
                cta.id[0], cta.id[1], cta.id[2]
            );
            if let Some(c) = cta.cluster {
                let _ = write!(
                    s,
                    "cluster id = {},{},{}\ncluster cta = {},{},{}\ncluster rank = {}\n",
                    c.id[0], c.id[1], c.id[2], c.cta[0], c.cta[1], c.cta[2], c.rank
                );
            }
            for wp in &cta.warps {
                let _ = write!(s, "\nwarp = {}\ninsts = {}\n", wp.warp_id, wp.insts.len());
                for (ii, inst) in cta.insts[wp.insts.clone()].iter().enumerate() {
                    to_text_inst(meta, cta, inst, &mut text);
                    if meta.records_operands {
                        let per_lane = operands_at(
                            meta,
                            inst.pc,
                            &meta.opcodes[meta.statics[inst.slot as usize].opcode as usize],
                        );
                        if let Some(ops) = cta.operands_of(wp.insts.start + ii, per_lane) {
                            text.operands.extend_from_slice(ops);
                        }
                    }
                    let _ = writeln!(s, "{text}");
                }
            }
            s.push_str("\n#END_TB\n");
            on_cta();
            if s.len() > 1 << 20 {
                out.write_all(s.as_bytes()).map_err(|e| ferr(path, e))?;
                total += s.len() as u64;
                s.clear();
            }
            Ok(())
        })?;
    }
    out.write_all(s.as_bytes()).map_err(|e| ferr(path, e))?;
    total += s.len() as u64;
    out.flush().map_err(|e| ferr(path, e))?;
    Ok(total)
}
