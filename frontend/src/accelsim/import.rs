//! Streaming import of an Accel-Sim trace directory into one `.tst` file.

use super::line::{parse_inst_line_into, ImmField, TextAddrs, TextInst};
use crate::opcodes::{decode_opcode, unknown_opcode, ArchFamily};
use rustc_hash::FxHashMap as HashMap;
use rustc_hash::FxHashSet as HashSet;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use tessera_traces::codec::{ClusterInfo, ADDR_DELTA, ADDR_LIST};
use tessera_traces::schema::OWN_LANE;
use tessera_traces::{
    Access, AddrRecord, ArrayAnnotation, Command, CtaRange, DeviceInfo, ExitTerm, KernelMeta,
    MBarrierKind, MBarrierOp, NamedBarrier, OpClass, RawInst, RebasedAccess, RegionKind,
    SpinRegion, SyncCmp, SyncWords, TraceError, TraceWriter, WriterOptions,
};

/// Options of [`import_dir`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ImportOptions {
    /// Import opcodes missing from the architecture's table as class `other` (counted in
    /// the report) instead of failing.
    pub allow_unknown_opcodes: bool,
    pub writer: WriterOptions,
}

/// What an import read and wrote.
#[derive(Clone, Debug, Default)]
pub struct ImportReport {
    pub devices: u64,
    pub kernels: u64,
    pub ctas: u64,
    pub warps: u64,
    pub warp_insts: u64,
    pub thread_insts: u64,
    /// Bytes of trace text read (after `.xz` decompression).
    pub text_bytes: u64,
    /// Warp instructions per unknown opcode (only with `allow_unknown_opcodes`).
    pub unknown_opcodes: BTreeMap<String, u64>,
}

/// An import failure: names the file, and the line where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}:{line}: {msg}", path.display())]
    Line {
        path: PathBuf,
        line: u64,
        msg: String,
    },
    #[error("{}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    #[error(transparent)]
    Trace(#[from] TraceError),
}

fn file_err(path: &Path, msg: impl Into<String>) -> ImportError {
    ImportError::File {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

/// The command lists of a trace directory: `kernelslist.g` first (device 0), then the
/// per-context lists of newer tracers (`kernelslist_ctx_0x....g`) by name.
pub fn command_lists(dir: &Path) -> Result<Vec<PathBuf>, ImportError> {
    if !dir.is_dir() {
        return Err(file_err(
            dir,
            "not a directory (expected an Accel-Sim trace directory with kernelslist.g)",
        ));
    }
    let main = dir.join("kernelslist.g");
    if !main.is_file() {
        return Err(file_err(dir, "no kernelslist.g here: not an Accel-Sim trace directory (run Accel-Sim's post-traces-processing first if it holds only kernelslist and .trace files)"));
    }
    let mut others = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| file_err(dir, e.to_string()))?;
    for e in rd {
        let e = e.map_err(|e| file_err(dir, e.to_string()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name != "kernelslist.g" && name.starts_with("kernelslist") && name.ends_with(".g") {
            others.push(e.path());
        }
    }
    others.sort();
    let mut v = vec![main];
    v.extend(others);
    Ok(v)
}

/// Imports the Accel-Sim trace directory `dir` into the `.tst` file `out`. On any error
/// nothing is left under `out`.
pub fn import_dir(
    dir: &Path,
    out: &Path,
    opts: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    import_dir_with_progress(dir, out, opts, &mut |_| {})
}

/// [`import_dir`], calling `progress` with the running totals about every 64 Ki lines
/// (the counts of the kernel being imported are added when it ends; `text_bytes` is live).
pub fn import_dir_with_progress(
    dir: &Path,
    out: &Path,
    opts: &ImportOptions,
    progress: &mut dyn FnMut(&ImportReport),
) -> Result<ImportReport, ImportError> {
    let lists = command_lists(dir)?;
    let mut w = TraceWriter::create(out, opts.writer)?;
    let mut rep = ImportReport::default();
    for list in &lists {
        let name = list
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let device = w.add_device(DeviceInfo { source: name });
        rep.devices += 1;
        let text = std::fs::read_to_string(list).map_err(|e| file_err(list, e.to_string()))?;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i as u64 + 1;
            let l = raw.trim();
            let lerr = |msg: String| ImportError::Line {
                path: list.clone(),
                line: line_no,
                msg,
            };
            if l.is_empty() {
                continue;
            }
            if let Some(rest) = l.strip_prefix("SyncWords,") {
                // tessera extension (recorded traces): sync words and their values.
                let sw = parse_sync_words(rest, device).ok_or_else(|| {
                    lerr(format!(
                        "expected SyncWords,<hex address>,<initial values>,<expected values>,<name>, found '{l}'"
                    ))
                })?;
                w.add_sync_words(sw);
            } else if let Some(rest) = l.strip_prefix("MemAlloc,") {
                // tessera extension (recorded traces): an allocation; Accel-Sim ignores it.
                let (addr, bytes) = parse_memcpy(rest).ok_or_else(|| {
                    lerr(format!(
                        "expected MemAlloc,<hex address>,<bytes>, found '{l}'"
                    ))
                })?;
                check_range("MemAlloc", addr, bytes).map_err(lerr)?;
                w.add_command(Command::Alloc {
                    device,
                    addr,
                    bytes,
                })?;
            } else if let Some(rest) = l.strip_prefix("MemcpyHtoD,") {
                let (addr, bytes) = parse_memcpy(rest).ok_or_else(|| {
                    lerr(format!(
                        "expected MemcpyHtoD,<hex address>,<bytes>, found '{l}'"
                    ))
                })?;
                check_range("MemcpyHtoD", addr, bytes).map_err(lerr)?;
                w.add_command(Command::MemcpyHtoD {
                    device,
                    addr,
                    bytes,
                })?;
            } else if l.starts_with("kernel") {
                let path = dir.join(l);
                if !path.is_file() {
                    return Err(lerr(format!(
                        "kernel trace file {} is missing",
                        path.display()
                    )));
                }
                let k = import_kernel(&path, l, device, &mut w, opts, &mut rep, progress)?;
                w.add_command(Command::KernelLaunch { device, kernel: k })?;
            } else {
                return Err(lerr(format!(
                    "unknown command '{l}' (expected MemcpyHtoD,..., MemAlloc,..., SyncWords,... or a kernel-N.traceg file name)"
                )));
            }
        }
    }
    w.finish()?;
    Ok(rep)
}

/// A `MemcpyHtoD`/`MemAlloc` range must lie inside the 64-bit address space.
fn check_range(what: &str, addr: u64, bytes: u64) -> Result<(), String> {
    match addr.checked_add(bytes) {
        Some(_) => Ok(()),
        None => Err(format!(
            "{what} of {bytes} bytes at {addr:#x} runs past the end of the 64-bit address space (expected address + bytes at most 0xffffffffffffffff)"
        )),
    }
}

fn parse_memcpy(rest: &str) -> Option<(u64, u64)> {
    let (a, b) = rest.split_once(',')?;
    let a = a.trim();
    let a = a.strip_prefix("0x").or_else(|| a.strip_prefix("0X"))?;
    Some((u64::from_str_radix(a, 16).ok()?, b.trim().parse().ok()?))
}

/// Reader of a kernel file, plain or `.xz`.
fn open_kernel(path: &Path) -> Result<Box<dyn BufRead>, ImportError> {
    let f = File::open(path).map_err(|e| file_err(path, e.to_string()))?;
    let is_xz = path.extension().is_some_and(|e| e == "xz");
    Ok(if is_xz {
        let dec = xz2::read::XzDecoder::new_multi_decoder(BufReader::with_capacity(1 << 16, f));
        Box::new(BufReader::with_capacity(1 << 20, dec))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, f))
    })
}

#[derive(Default)]
struct Header {
    name: Option<String>,
    id: u32,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    shmem: u32,
    nregs: u32,
    binary_version: Option<u32>,
    stream: u64,
    shmem_base: u64,
    local_base: u64,
    nvbit_version: String,
    tracer_version: Option<u32>,
    lineinfo: bool,
    // tessera extensions, written by `trace export` for recorded traces; Accel-Sim's
    // parser ignores header keys it does not know.
    generator: String,
    operands: bool,
    annotations: Vec<ArrayAnnotation>,
    spins: Vec<SpinRegion>,
    bars: Vec<NamedBarrier>,
    mbars: Vec<MBarrierOp>,
}

/// Parses `0xPC,ID,init|arrive|wait` (an mbarrier instruction, format version 4).
fn parse_mbar(v: &str) -> Option<MBarrierOp> {
    let mut f = v.trim().split(',').map(str::trim);
    let pc = u32::try_from(hex_u64(f.next()?)?).ok()?;
    let id = f.next()?.parse().ok()?;
    let kind = match f.next()? {
        "init" => MBarrierKind::Init,
        "arrive" => MBarrierKind::Arrive,
        "wait" => MBarrierKind::Wait,
        _ => return None,
    };
    if f.next().is_some() {
        return None;
    }
    Some(MBarrierOp { pc, id, kind })
}

/// Parses `0xPC,ID,THREADS,sync|arrive` (a named barrier, format version 3).
fn parse_bar(v: &str) -> Option<NamedBarrier> {
    let mut f = v.trim().split(',').map(str::trim);
    let pc = u32::try_from(hex_u64(f.next()?)?).ok()?;
    let id = f.next()?.parse().ok()?;
    let threads = f.next()?.parse().ok()?;
    let arrive = match f.next()? {
        "arrive" => true,
        "sync" => false,
        _ => return None,
    };
    if f.next().is_some() {
        return None;
    }
    Some(NamedBarrier {
        pc,
        id,
        threads,
        arrive,
    })
}

/// Parses `0xSTART 0xTEST 0xEND all|any BASE MAX V:CMP[,V:CMP]... LABEL` (a spin region,
/// format version 3's line, still written for a spin loop that format can hold).
fn parse_spin(v: &str) -> Option<SpinRegion> {
    parse_region_fields(RegionKind::Spin, v, false)
}

/// Parses `KIND 0xSTART 0xTEST 0xEND all|any BASE MAX V:CMP[:LANE][,...] REBASED LABEL`
/// (any region, format version 4; REBASED is `-` or `0xPC:STRIDE[,0xPC:STRIDE]...`).
fn parse_region(v: &str) -> Option<SpinRegion> {
    let (kind, rest) = v.trim().split_once(' ')?;
    let kind = match kind {
        "spin" => RegionKind::Spin,
        "branch" => RegionKind::Branch,
        "queue" => RegionKind::Queue,
        _ => return None,
    };
    parse_region_fields(kind, rest, true)
}

fn parse_region_fields(kind: RegionKind, v: &str, v4: bool) -> Option<SpinRegion> {
    let mut f = v.trim().splitn(if v4 { 9 } else { 8 }, ' ');
    let start_pc = u32::try_from(hex_u64(f.next()?)?).ok()?;
    let test_pc = u32::try_from(hex_u64(f.next()?)?).ok()?;
    let end_pc = u32::try_from(hex_u64(f.next()?)?).ok()?;
    let all = match f.next()? {
        "all" => true,
        "any" => false,
        _ => return None,
    };
    let backoff_base = f.next()?.parse().ok()?;
    let backoff_max = f.next()?.parse().ok()?;
    let mut terms = Vec::new();
    for t in f.next()?.split(',') {
        let mut p = t.split(':');
        let value = p.next()?.parse().ok()?;
        let cmp = match p.next()? {
            "eq" => SyncCmp::Eq,
            "ne" => SyncCmp::Ne,
            "lt" => SyncCmp::Lt,
            "le" => SyncCmp::Le,
            "gt" => SyncCmp::Gt,
            "ge" => SyncCmp::Ge,
            _ => return None,
        };
        let mut term = ExitTerm::own(value, cmp);
        if let Some(lane) = p.next() {
            if !v4 {
                return None;
            }
            term.lane = lane.parse().ok().filter(|&l| l < OWN_LANE)?;
        }
        if p.next().is_some() {
            return None;
        }
        terms.push(term);
    }
    let mut rebased = Vec::new();
    if v4 {
        let r = f.next()?;
        if r != "-" {
            for a in r.split(',') {
                let (pc, stride) = a.split_once(':')?;
                rebased.push(RebasedAccess {
                    pc: u32::try_from(hex_u64(pc)?).ok()?,
                    stride: stride.parse().ok()?,
                });
            }
        }
    }
    Some(SpinRegion {
        kind,
        start_pc,
        test_pc,
        end_pc,
        terms,
        all,
        backoff_base,
        backoff_max,
        label: f.next().unwrap_or("").to_string(),
        rebased,
    })
}

/// Parses `0xADDR,INIT...,EXPECT...,NAME` (sync words: decimal values separated by
/// spaces; no expected values when not checked).
fn parse_sync_words(v: &str, device: u32) -> Option<SyncWords> {
    let mut f = v.splitn(4, ',');
    let addr = hex_u64(f.next()?)?;
    let words =
        |s: &str| -> Option<Vec<u32>> { s.split_whitespace().map(|x| x.parse().ok()).collect() };
    let init = words(f.next()?)?;
    let expect = words(f.next()?)?;
    Some(SyncWords {
        name: f.next()?.to_string(),
        device,
        addr,
        init,
        expect,
    })
}

/// Parses `NAME 0xBASE BYTES read|read_write [FIRST:N:0xLO:0xHI]...`.
fn parse_annotation(v: &str) -> Option<ArrayAnnotation> {
    let mut f = v.split_whitespace();
    let name = f.next()?.to_string();
    let base = hex_u64(f.next()?)?;
    let bytes = f.next()?.parse().ok()?;
    let access = match f.next()? {
        "read" => Access::Read,
        "read_write" => Access::ReadWrite,
        _ => return None,
    };
    let mut ranges = Vec::new();
    for r in f {
        let mut p = r.split(':');
        let first_cta = p.next()?.parse().ok()?;
        let n_ctas = p.next()?.parse().ok()?;
        let lo = hex_u64(p.next()?)?;
        let hi = hex_u64(p.next()?)?;
        if p.next().is_some() {
            return None;
        }
        ranges.push(CtaRange {
            first_cta,
            n_ctas,
            lo,
            hi,
        });
    }
    Some(ArrayAnnotation {
        name,
        base,
        bytes,
        access,
        ranges,
    })
}

fn dim3(v: &str) -> Option<[u32; 3]> {
    let v = v.trim().strip_prefix('(')?.strip_suffix(')')?;
    let mut it = v.split(',').map(|x| x.trim().parse::<u32>());
    let d = [it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?];
    it.next().is_none().then_some(d)
}

/// Parses a header `(x,y,z)` whose dimensions must lie in `1..=max[d]` and, when `product`
/// is given, whose product must not exceed it: the CUDA limits, so that nothing wraps.
fn dim3_in(key: &str, v: &str, max: [u64; 3], product: Option<u64>) -> Result<[u32; 3], String> {
    let shown = v.trim();
    let bad = || format!("header '-{key}': expected (x,y,z), found '{shown}'");
    let inner = shown
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(bad)?;
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return Err(bad());
    }
    let mut d = [0u32; 3];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let axis = ["x", "y", "z"][i];
        let n = p
            .parse::<u64>()
            .ok()
            .filter(|&n| n >= 1 && n <= max[i])
            .ok_or_else(|| {
                format!(
                    "header '-{key}': {axis} = {p} is out of range (expected 1 to {})",
                    max[i]
                )
            })?;
        d[i] = n as u32;
    }
    if let Some(limit) = product {
        let total: u64 = d.iter().map(|&x| x as u64).product();
        if total > limit {
            return Err(format!(
                "header '-{key}': {}x{}x{} = {total} is out of range (expected at most {limit} in all)",
                d[0], d[1], d[2]
            ));
        }
    }
    Ok(d)
}

/// CUDA's limits on a grid: x below 2^31, y and z below 2^16.
const GRID_MAX: [u64; 3] = [(1 << 31) - 1, 65535, 65535];
/// CUDA's limits on a block: 1024 in x and y, 64 in z, 1024 threads in all.
const BLOCK_MAX: [u64; 3] = [1024, 1024, 64];
const BLOCK_THREADS_MAX: u64 = 1024;

fn hex_u64(v: &str) -> Option<u64> {
    let v = v.trim();
    let v = v
        .strip_prefix("0x")
        .or_else(|| v.strip_prefix("0X"))
        .unwrap_or(v);
    u64::from_str_radix(v, 16).ok()
}

impl Header {
    /// Parses one `-key = value` line; unknown keys are kept in the header text only.
    fn parse(&mut self, line: &str) -> Result<(), String> {
        let Some((key, value)) = line[1..].split_once('=') else {
            return Ok(());
        };
        let key = key.trim();
        let v = value.strip_prefix(' ').unwrap_or(value);
        let bad = |what: &str| format!("header '-{key}': expected {what}, found '{}'", v.trim());
        // Parsed wide and checked, never truncated: `-shmem = 4294968320` is an error, not
        // 1,024 bytes.
        let num = |what: &str| {
            let t = v.trim();
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(what));
            }
            t.parse::<u64>().map_err(|_| {
                format!(
                    "header '-{key}': {t} is out of range (expected {what} of at most {})",
                    u64::MAX
                )
            })
        };
        let num32 = |what: &str| {
            let n = num(what)?;
            u32::try_from(n).map_err(|_| {
                format!(
                    "header '-{key}': {n} is out of range (expected {what} of at most {})",
                    u32::MAX
                )
            })
        };
        let flag = |what: &str| match num(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad(what)),
        };
        match key {
            "kernel name" => self.name = Some(v.to_string()),
            "kernel id" => self.id = num32("a number")?,
            "grid dim" => self.grid = Some(dim3_in(key, v, GRID_MAX, None)?),
            "block dim" => self.block = Some(dim3_in(key, v, BLOCK_MAX, Some(BLOCK_THREADS_MAX))?),
            "shmem" => self.shmem = num32("a byte count")?,
            "nregs" => self.nregs = num32("a register count")?,
            "binary version" => self.binary_version = Some(num32("a number like 80")?),
            "cuda stream id" => self.stream = num("a number")?,
            "shmem base_addr" => {
                self.shmem_base = hex_u64(v).ok_or_else(|| bad("a hex address"))?
            }
            "local mem base_addr" => {
                self.local_base = hex_u64(v).ok_or_else(|| bad("a hex address"))?
            }
            "nvbit version" => self.nvbit_version = v.trim().to_string(),
            "accelsim tracer version" => self.tracer_version = Some(num32("a number")?),
            "enable lineinfo" => self.lineinfo = flag("0 or 1")?,
            "tessera generator" => self.generator = v.trim().to_string(),
            "tessera operands" => self.operands = flag("0 or 1")?,
            "tessera spin" => self.spins.push(parse_spin(v).ok_or_else(|| {
                bad("0xSTART 0xTEST 0xEND all|any BASE MAX V:CMP[,V:CMP]... LABEL")
            })?),
            "tessera region" => self.spins.push(parse_region(v).ok_or_else(|| {
                bad("spin|branch|queue 0xSTART 0xTEST 0xEND all|any BASE MAX V:CMP[:LANE][,...] -|0xPC:STRIDE[,...] LABEL")
            })?),
            "tessera bar" => self
                .bars
                .push(parse_bar(v).ok_or_else(|| bad("0xPC,ID,THREADS,sync|arrive"))?),
            "tessera mbar" => self
                .mbars
                .push(parse_mbar(v).ok_or_else(|| bad("0xPC,ID,init|arrive|wait"))?),
            "tessera annotation" => {
                self.annotations.push(parse_annotation(v).ok_or_else(|| {
                    bad("NAME 0xBASE BYTES read|read_write [FIRST:N:0xLO:0xHI]...")
                })?)
            }
            _ => {}
        }
        Ok(())
    }
}

/// Oldest and newest tracer versions this importer reads.
pub const TRACER_VERSIONS: std::ops::RangeInclusive<u32> = 3..=5;

struct WarpState {
    id: u32,
    declared: Option<u64>,
    seen: u64,
    /// Lanes of the warp that hold threads.
    lanes: u32,
    /// Union of the masks of its `EXIT`s.
    exited: u32,
}

/// Opcode classes that never carry addresses in a trace.
fn never_memory(c: OpClass) -> bool {
    matches!(
        c,
        OpClass::Int
            | OpClass::IntMul
            | OpClass::Fp16
            | OpClass::Fp32
            | OpClass::Fp64
            | OpClass::Sfu
            | OpClass::Tensor
            | OpClass::Convert
            | OpClass::WarpShuffle
            | OpClass::SpecialReg
            | OpClass::Uniform
            | OpClass::Branch
            | OpClass::Barrier
            | OpClass::Exit
            | OpClass::Nop
    )
}

/// Opcode classes whose lines always carry a memory width and addresses (constant,
/// texture and asynchronous-copy instructions may not, depending on the tracer).
fn always_memory(c: OpClass) -> bool {
    matches!(
        c,
        OpClass::LoadGlobal
            | OpClass::StoreGlobal
            | OpClass::LoadShared
            | OpClass::StoreShared
            | OpClass::LoadLocal
            | OpClass::StoreLocal
            | OpClass::LoadGeneric
            | OpClass::StoreGeneric
            | OpClass::AtomicGlobal
            | OpClass::AtomicShared
            | OpClass::AtomicGeneric
            | OpClass::Reduction
    )
}

fn import_kernel(
    path: &Path,
    source: &str,
    device: u32,
    w: &mut TraceWriter,
    opts: &ImportOptions,
    rep: &mut ImportReport,
    progress: &mut dyn FnMut(&ImportReport),
) -> Result<u32, ImportError> {
    let mut rd = open_kernel(path)?;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut line_no: u64 = 0;
    let mut header_text = String::new();
    let mut hdr = Header::default();
    let lerr = |line: u64, msg: String| ImportError::Line {
        path: path.to_path_buf(),
        line,
        msg,
    };
    let mut unterminated = false;
    let read_line = |rd: &mut Box<dyn BufRead>,
                     buf: &mut Vec<u8>,
                     text_bytes: &mut u64,
                     unterminated: &mut bool|
     -> Result<bool, ImportError> {
        buf.clear();
        let n = rd
            .read_until(b'\n', buf)
            .map_err(|e| file_err(path, format!("read error: {e}")))?;
        *text_bytes += n as u64;
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if n > 0 {
            // The last line of the file has no newline: remember it so that a parse
            // error there reads as what it most likely is, a cut-off file.
            *unterminated = true;
        }
        Ok(n > 0)
    };
    // Header: everything before the first #BEGIN_TB.
    let mut first_tb = false;
    while read_line(&mut rd, &mut buf, &mut rep.text_bytes, &mut unterminated)? {
        line_no += 1;
        let l = std::str::from_utf8(&buf).map_err(|_| {
            lerr(
                line_no,
                "header line is not UTF-8 text (is this a .traceg file?)".into(),
            )
        })?;
        if l.trim_end() == "#BEGIN_TB" {
            first_tb = true;
            break;
        }
        if l.starts_with('-') {
            hdr.parse(l.trim_end()).map_err(|m| lerr(line_no, m))?;
        } else if !l.trim().is_empty() && !l.starts_with('#') {
            return Err(lerr(
                line_no,
                format!("unexpected line before the first #BEGIN_TB: '{l}'"),
            ));
        }
        header_text.push_str(l);
        header_text.push('\n');
    }
    let missing = |what: &str| file_err(path, format!("header has no '-{what}' line"));
    let grid = hdr.grid.ok_or_else(|| missing("grid dim"))?;
    let block = hdr.block.ok_or_else(|| missing("block dim"))?;
    let bv = hdr
        .binary_version
        .ok_or_else(|| missing("binary version"))?;
    let tv = hdr
        .tracer_version
        .ok_or_else(|| missing("accelsim tracer version"))?;
    if !TRACER_VERSIONS.contains(&tv) {
        return Err(file_err(
            path,
            format!(
                "accelsim tracer version {tv} is not supported (this importer reads versions {} to {})",
                TRACER_VERSIONS.start(),
                TRACER_VERSIONS.end()
            ),
        ));
    }
    let family = ArchFamily::from_binary_version(bv).ok_or_else(|| {
        file_err(
            path,
            format!("binary version {bv} is not a known architecture (35/37, 50-53, 60-62, 70/72, 75, 80/86/87, 89, 90)"),
        )
    })?;
    let threads = block.iter().map(|&d| d as u64).product::<u64>();
    let max_warps = threads.div_ceil(32);
    let mut meta = KernelMeta::new(hdr.name.as_deref().unwrap_or(""), grid, block);
    meta.id = hdr.id;
    meta.shmem_bytes = hdr.shmem;
    meta.nregs = hdr.nregs;
    meta.binary_version = bv;
    meta.stream = hdr.stream;
    meta.shmem_base = hdr.shmem_base;
    meta.local_base = hdr.local_base;
    meta.nvbit_version = hdr.nvbit_version;
    meta.tracer_version = tv;
    meta.lineinfo = hdr.lineinfo;
    meta.device = device;
    meta.header_text = header_text;
    meta.records_operands = hdr.operands;
    meta.annotations = std::mem::take(&mut hdr.annotations);
    meta.spin_regions = std::mem::take(&mut hdr.spins);
    meta.named_barriers = std::mem::take(&mut hdr.bars);
    meta.mbarriers = std::mem::take(&mut hdr.mbars);
    meta.generator = if hdr.generator.is_empty() {
        "accel-sim import".into()
    } else {
        std::mem::take(&mut hdr.generator)
    };
    meta.source = source.to_string();
    let lineinfo = hdr.lineinfo;
    let has_operands = hdr.operands;
    let grid_ctas: u64 = grid.iter().map(|&d| d as u64).product();
    // Whether lines end with an immediate: by the tracer version (5 always, 3 never), or
    // for version 4 by the first line whose field count shows it (`imm_line`).
    let mut imm_field = match tv {
        _ if has_operands => ImmField::Present,
        3 => ImmField::Absent,
        4 => ImmField::Undecided,
        _ => ImmField::Present,
    };
    let mut imm_line = 0u64;
    let kernel = w.begin_kernel(meta)?;

    let mut opcodes: HashMap<String, u16> = HashMap::default();
    let mut unknown: Vec<bool> = Vec::new();
    let mut classes: Vec<OpClass> = Vec::new();
    // Thread blocks listed so far (linear ids), and the warps listed in the current one.
    let mut cta_seen: HashSet<u64> = HashSet::default();
    let mut warps_seen: u64 = 0;
    let all_warps: u64 = if max_warps >= 64 {
        u64::MAX
    } else {
        (1u64 << max_warps) - 1
    };
    let mut inst = TextInst::default();
    let mut addr_buf: Vec<u64> = Vec::with_capacity(32);
    let mut in_tb = first_tb;
    let mut tb_line = line_no;
    let mut cta_id: Option<[u32; 3]> = None;
    let mut cluster: Option<ClusterInfo> = None;
    let mut cta_begun = false;
    let mut warp: Option<WarpState> = None;
    let mut ctas = 0u64;

    let close_warp = |w: &mut TraceWriter,
                      warp: &mut Option<WarpState>,
                      line: u64,
                      cta: [u32; 3]|
     -> Result<(), ImportError> {
        if let Some(ws) = warp.take() {
            let declared = ws.declared.unwrap_or(0);
            if ws.seen != declared {
                return Err(lerr(
                    line,
                    format!(
                        "warp {} of thread block {},{},{} declares insts = {declared} but lists {} instruction lines",
                        ws.id, cta[0], cta[1], cta[2], ws.seen
                    ),
                ));
            }
            if ws.exited & ws.lanes != ws.lanes {
                return Err(lerr(
                    line,
                    format!(
                        "warp {} of thread block {},{},{} ends with lanes {:08x} still running: expected its EXIT masks to cover its threads' lanes {:08x} (they cover {:08x})",
                        ws.id,
                        cta[0],
                        cta[1],
                        cta[2],
                        ws.lanes & !ws.exited,
                        ws.lanes,
                        ws.exited
                    ),
                ));
            }
            w.end_warp()?;
        }
        Ok(())
    };

    while read_line(&mut rd, &mut buf, &mut rep.text_bytes, &mut unterminated)? {
        line_no += 1;
        if line_no.is_multiple_of(1 << 16) {
            progress(rep);
        }
        let l: &[u8] = &buf;
        let first = l.iter().position(|b| !b.is_ascii_whitespace());
        let Some(first) = first else { continue };
        let c = l[first];
        // Instruction lines are the hot path: they start with a hex digit.
        if c.is_ascii_hexdigit() && !l.starts_with(b"cluster") {
            let Some(ws) = warp.as_mut() else {
                return Err(lerr(
                    line_no,
                    "instruction line outside a warp (no 'warp = N' before it)".into(),
                ));
            };
            let Some(declared) = ws.declared else {
                return Err(lerr(
                    line_no,
                    "instruction line before the warp's 'insts = N' line".into(),
                ));
            };
            if ws.seen >= declared {
                return Err(lerr(
                    line_no,
                    format!(
                        "warp {} declares insts = {declared} but lists more instruction lines",
                        ws.id
                    ),
                ));
            }
            ws.seen += 1;
            parse_inst_line_into(l, lineinfo, has_operands, imm_field, &mut inst).map_err(|e| {
                if unterminated {
                    lerr(
                        line_no,
                        format!(
                            "file ends in the middle of this line (truncated trace?): {}",
                            e.0
                        ),
                    )
                } else if e.0.contains("immediate") {
                    let why = match imm_field {
                        ImmField::Present if tv >= 5 || has_operands => format!(
                            "tracer version {tv} writes an immediate on every line"
                        ),
                        ImmField::Present => format!(
                            "the lines of this tracer-{tv} file carry an immediate, as line {imm_line} shows"
                        ),
                        ImmField::Absent if tv <= 3 => format!(
                            "tracer version {tv} writes no immediate"
                        ),
                        ImmField::Absent => format!(
                            "the lines of this tracer-{tv} file carry no immediate, as line {imm_line} shows"
                        ),
                        _ => "the first line of the file that shows it decides for the whole file".into(),
                    };
                    lerr(line_no, format!("{} ({why})", e.0))
                } else {
                    lerr(line_no, e.0)
                }
            })?;
            if imm_field == ImmField::Undecided {
                imm_field = if inst.imm.is_some() {
                    ImmField::Present
                } else {
                    ImmField::Absent
                };
                imm_line = line_no;
            }
            let opcode = match opcodes.get(inst.opcode.as_str()) {
                Some(&o) => o,
                None => {
                    let info = match decode_opcode(family, &inst.opcode) {
                        Some(i) => i,
                        None if opts.allow_unknown_opcodes => unknown_opcode(&inst.opcode),
                        None => {
                            return Err(lerr(
                                line_no,
                                format!(
                                    "unknown opcode '{}' for {} (binary version {bv}); rerun with --allow-unknown-opcodes to import it as class 'other'",
                                    inst.opcode,
                                    family.name()
                                ),
                            ))
                        }
                    };
                    unknown.push(info.unknown);
                    classes.push(info.class);
                    let o = w.add_opcode(info)?;
                    opcodes.insert(inst.opcode.clone(), o);
                    o
                }
            };
            if unknown[opcode as usize] {
                *rep.unknown_opcodes.entry(inst.opcode.clone()).or_insert(0) += 1;
            } else {
                let class = classes[opcode as usize];
                if inst.mem_width != 0 && never_memory(class) {
                    return Err(lerr(
                        line_no,
                        format!(
                            "{} is not a memory instruction (class {}): expected memory width 0 and no addresses, found width {}",
                            inst.opcode,
                            class.name(),
                            inst.mem_width
                        ),
                    ));
                }
                if inst.mem_width == 0 && always_memory(class) {
                    return Err(lerr(
                        line_no,
                        format!(
                            "{} is a memory instruction (class {}): expected a memory width and addresses, found width 0",
                            inst.opcode,
                            class.name()
                        ),
                    ));
                }
                if class == OpClass::Exit {
                    ws.exited |= inst.mask;
                }
            }
            let addrs = match &inst.addrs {
                TextAddrs::None => AddrRecord::None,
                TextAddrs::Stride { base, stride } => {
                    // Lane i of the active lanes accesses base + i * stride.
                    let last = *base as i128
                        + *stride as i128 * (inst.mask.count_ones().max(1) as i128 - 1);
                    if !(0..=u64::MAX as i128).contains(&last) {
                        return Err(lerr(
                            line_no,
                            format!(
                                "base {base:#x} and stride {stride} take the last active lane's address past the 64-bit address space"
                            ),
                        ));
                    }
                    AddrRecord::Stride {
                        base: *base,
                        stride: *stride,
                    }
                }
                TextAddrs::List(v) => AddrRecord::List {
                    mode: ADDR_LIST,
                    addrs: v,
                },
                TextAddrs::Delta { base, deltas } => {
                    addr_buf.clear();
                    let mut a = *base;
                    addr_buf.push(a);
                    for (i, d) in deltas.iter().enumerate() {
                        a = a.checked_add_signed(*d).ok_or_else(|| {
                            lerr(
                                line_no,
                                format!(
                                    "address delta {} of {} ({d}) takes the address past the 64-bit address space (from {a:#x})",
                                    i + 1,
                                    deltas.len()
                                ),
                            )
                        })?;
                        addr_buf.push(a);
                    }
                    AddrRecord::List {
                        mode: ADDR_DELTA,
                        addrs: &addr_buf,
                    }
                }
            };
            w.push_with_operands(
                &RawInst {
                    pc: inst.pc,
                    mask: inst.mask,
                    opcode,
                    dsts: &inst.dsts,
                    srcs: &inst.srcs,
                    mem_width: inst.mem_width,
                    imm: inst.imm,
                    line: inst.line,
                    addrs,
                },
                &inst.operands,
            )
            .map_err(|e| lerr(line_no, format!("{e}")))?;
            continue;
        }
        let s = std::str::from_utf8(l)
            .map_err(|_| lerr(line_no, "line is not text".into()))?
            .trim();
        if s == "#BEGIN_TB" {
            if in_tb {
                return Err(lerr(line_no, format!("#BEGIN_TB before the thread block begun at line {tb_line} ended (missing #END_TB)")));
            }
            in_tb = true;
            tb_line = line_no;
            cta_id = None;
            cluster = None;
            cta_begun = false;
            warps_seen = 0;
            continue;
        }
        if !in_tb {
            return Err(lerr(
                line_no,
                format!("'{s}' outside a thread block (#BEGIN_TB ... #END_TB)"),
            ));
        }
        let id_or = |cta_id: Option<[u32; 3]>| {
            cta_id.ok_or_else(|| {
                lerr(
                    line_no,
                    "thread block has no 'thread block = x,y,z' line".into(),
                )
            })
        };
        if s == "#END_TB" {
            let id = id_or(cta_id)?;
            close_warp(w, &mut warp, line_no, id)?;
            if warps_seen != all_warps {
                let missing: Vec<String> = (0..max_warps.min(64))
                    .filter(|&i| warps_seen >> i & 1 == 0)
                    .map(|i| i.to_string())
                    .collect();
                return Err(lerr(
                    line_no,
                    format!(
                        "thread block {},{},{} lists {} of its {max_warps} warps (a block of {threads} threads): expected every warp once, missing warp(s) {}",
                        id[0],
                        id[1],
                        id[2],
                        warps_seen.count_ones(),
                        missing.join(", ")
                    ),
                ));
            }
            if !cta_begun {
                w.begin_cta(id, cluster)?;
            }
            w.end_cta()?;
            ctas += 1;
            in_tb = false;
        } else if let Some(v) = s.strip_prefix("thread block =") {
            if cta_id.is_some() {
                return Err(lerr(
                    line_no,
                    format!("second 'thread block = x,y,z' line in the thread block begun at line {tb_line}: expected one per #BEGIN_TB ... #END_TB (a missing #END_TB merges two blocks)"),
                ));
            }
            let id = dim3(&format!("({})", v.trim())).ok_or_else(|| {
                lerr(
                    line_no,
                    format!("expected 'thread block = x,y,z', found '{s}'"),
                )
            })?;
            for (d, (&i, &g)) in id.iter().zip(grid.iter()).enumerate() {
                if i >= g {
                    return Err(lerr(
                        line_no,
                        format!(
                            "thread block {},{},{} lies outside the grid {},{},{} (dimension {d})",
                            id[0], id[1], id[2], grid[0], grid[1], grid[2]
                        ),
                    ));
                }
            }
            let lin =
                (id[2] as u64 * grid[1] as u64 + id[1] as u64) * grid[0] as u64 + id[0] as u64;
            if !cta_seen.insert(lin) {
                return Err(lerr(
                    line_no,
                    format!(
                        "thread block {},{},{} is listed twice: expected each block of the grid once",
                        id[0], id[1], id[2]
                    ),
                ));
            }
            cta_id = Some(id);
        } else if let Some(v) = s.strip_prefix("cluster id =") {
            let c = cluster.get_or_insert_with(ClusterInfo::default);
            c.id = dim3(&format!("({})", v.trim()))
                .ok_or_else(|| lerr(line_no, format!("bad cluster id '{s}'")))?;
        } else if let Some(v) = s.strip_prefix("cluster cta =") {
            let c = cluster.get_or_insert_with(ClusterInfo::default);
            c.cta = dim3(&format!("({})", v.trim()))
                .ok_or_else(|| lerr(line_no, format!("bad cluster cta '{s}'")))?;
        } else if let Some(v) = s.strip_prefix("cluster rank =") {
            let c = cluster.get_or_insert_with(ClusterInfo::default);
            c.rank = v
                .trim()
                .parse()
                .map_err(|_| lerr(line_no, format!("bad cluster rank '{s}'")))?;
        } else if let Some(v) = s.strip_prefix("warp =") {
            let id = id_or(cta_id)?;
            close_warp(w, &mut warp, line_no, id)?;
            let wid: u32 = v
                .trim()
                .parse()
                .map_err(|_| lerr(line_no, format!("expected 'warp = N', found '{s}'")))?;
            if wid as u64 >= max_warps {
                return Err(lerr(line_no, format!("warp {wid} does not exist in a block of {threads} threads ({max_warps} warps)")));
            }
            if warps_seen >> wid & 1 == 1 {
                return Err(lerr(
                    line_no,
                    format!(
                        "warp {wid} is listed twice in thread block {},{},{}: expected each warp once",
                        id[0], id[1], id[2]
                    ),
                ));
            }
            warps_seen |= 1 << wid;
            let lanes = threads.saturating_sub(wid as u64 * 32).min(32);
            let lanes = if lanes >= 32 {
                u32::MAX
            } else {
                (1u32 << lanes) - 1
            };
            if !cta_begun {
                w.begin_cta(id, cluster)?;
                cta_begun = true;
            }
            w.begin_warp(wid)?;
            warp = Some(WarpState {
                id: wid,
                declared: None,
                seen: 0,
                lanes,
                exited: 0,
            });
        } else if let Some(v) = s.strip_prefix("insts =") {
            let ws = warp
                .as_mut()
                .ok_or_else(|| lerr(line_no, "'insts = N' outside a warp".into()))?;
            if ws.declared.is_some() {
                return Err(lerr(line_no, "second 'insts = N' line for one warp".into()));
            }
            ws.declared = Some(
                v.trim()
                    .parse()
                    .map_err(|_| lerr(line_no, format!("expected 'insts = N', found '{s}'")))?,
            );
        } else {
            return Err(lerr(
                line_no,
                format!("unexpected line '{s}' inside a thread block"),
            ));
        }
    }
    if in_tb {
        let detail = match &warp {
            Some(ws) => format!(
                " (warp {} has {} of {} instructions)",
                ws.id,
                ws.seen,
                ws.declared.map_or("?".to_string(), |d| d.to_string())
            ),
            None => String::new(),
        };
        return Err(file_err(
            path,
            format!("file ends inside the thread block begun at line {tb_line}{detail}: the trace is truncated"),
        ));
    }
    if ctas != grid_ctas {
        return Err(lerr(
            line_no,
            format!(
                "the file lists {ctas} thread blocks, the grid ({},{},{}) has {grid_ctas}: expected every block of the grid (a file cut after an #END_TB is truncated)",
                grid[0], grid[1], grid[2]
            ),
        ));
    }
    let counts = w.end_kernel()?;
    debug_assert_eq!(counts.ctas, ctas);
    rep.kernels += 1;
    rep.ctas += counts.ctas;
    rep.warps += counts.warps;
    rep.warp_insts += counts.warp_insts;
    rep.thread_insts += counts.thread_insts;
    Ok(kernel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accelsim::export::region_line;

    /// The region's header line parsed back, through the header's `-KEY = VALUE` split.
    fn reparse(r: &SpinRegion) -> Option<SpinRegion> {
        let line = region_line(r);
        let (key, v) = line.trim_end().strip_prefix('-')?.split_once('=')?;
        match key.trim() {
            "tessera spin" => parse_spin(v),
            "tessera region" => parse_region(v),
            _ => None,
        }
    }

    fn region(kind: RegionKind) -> SpinRegion {
        SpinRegion {
            kind,
            start_pc: 0x40,
            test_pc: 0x90,
            end_pc: 0x100,
            terms: vec![ExitTerm::own(0, SyncCmp::Ge), ExitTerm::own(1, SyncCmp::Eq)],
            all: false,
            backoff_base: 0,
            backoff_max: 0,
            label: "item popped".into(),
            rebased: Vec::new(),
        }
    }

    #[test]
    fn region_header_lines_round_trip() {
        // A spin loop format 3 can hold keeps its format-3 line.
        let mut spin = region(RegionKind::Spin);
        spin.backoff_base = 20;
        spin.backoff_max = 640;
        assert!(region_line(&spin)
            .starts_with("-tessera spin = 0x40 0x90 0x100 any 20 640 0:ge,1:eq item popped"));
        assert_eq!(reparse(&spin), Some(spin.clone()));
        let mut q = region(RegionKind::Queue);
        q.rebased = vec![
            RebasedAccess {
                pc: 0xb0,
                stride: 4,
            },
            RebasedAccess {
                pc: 0xd0,
                stride: -8,
            },
        ];
        assert_eq!(
            region_line(&q),
            "-tessera region = queue 0x40 0x90 0x100 any 0 0 0:ge,1:eq 0xb0:4,0xd0:-8 item popped\n"
        );
        assert_eq!(reparse(&q), Some(q.clone()));
        let mut b = region(RegionKind::Branch);
        b.terms[1].lane = 0;
        b.label = String::new();
        assert_eq!(
            region_line(&b),
            "-tessera region = branch 0x40 0x90 0x100 any 0 0 0:ge,1:eq:0 - \n"
        );
        assert_eq!(reparse(&b), Some(b.clone()));
        // A spin loop with a rebased access or a broadcast term needs the new line.
        let mut s2 = region(RegionKind::Spin);
        s2.rebased = vec![RebasedAccess {
            pc: 0xb0,
            stride: 4,
        }];
        assert!(region_line(&s2).starts_with("-tessera region = spin "));
        assert_eq!(reparse(&s2), Some(s2.clone()));
    }

    #[test]
    fn format3_spin_lines_still_import_as_spin_regions() {
        let r = parse_spin(" 0x10 0x30 0x50 all 10 80 0:eq lock acquired").unwrap();
        assert_eq!(r.kind, RegionKind::Spin);
        assert_eq!(r.terms, vec![ExitTerm::own(0, SyncCmp::Eq)]);
        assert_eq!((r.label.as_str(), r.rebased.len()), ("lock acquired", 0));
        // A broadcast lane is format 4's only.
        assert_eq!(parse_spin("0x10 0x30 0x50 all 10 80 0:eq:3 x"), None);
        for bad in [
            "loop 0x10 0x30 0x50 all 0 0 0:eq - x",
            "queue 0x10 0x30 0x50 all 0 0 0:eq",
            "queue 0x10 0x30 0x50 all 0 0 0:eq:32 - x",
            "queue 0x10 0x30 0x50 all 0 0 0:eq 0xb0 x",
            "queue 0x10 0x30 0x50 all 0 0 0:eq 0xb0:x x",
        ] {
            assert_eq!(parse_region(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn mbarrier_header_lines_parse() {
        assert_eq!(
            parse_mbar(" 0x1a0,3,arrive"),
            Some(MBarrierOp {
                pc: 0x1a0,
                id: 3,
                kind: MBarrierKind::Arrive
            })
        );
        assert_eq!(
            parse_mbar("0x20,31,init").map(|m| (m.id, m.kind)),
            Some((31, MBarrierKind::Init))
        );
        assert_eq!(
            parse_mbar("0x30, 0, wait").map(|m| (m.pc, m.kind)),
            Some((0x30, MBarrierKind::Wait))
        );
        for bad in [
            "",
            "0x20,1",
            "0x20,1,sync",
            "0x20,x,init",
            "0x20,1,init,1",
            "0x20,300,wait",
        ] {
            assert_eq!(parse_mbar(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn named_barrier_header_lines_parse() {
        assert_eq!(
            parse_bar(" 0x1a0,1,128,arrive"),
            Some(NamedBarrier {
                pc: 0x1a0,
                id: 1,
                threads: 128,
                arrive: true
            })
        );
        assert_eq!(
            parse_bar("0x20,15,0,sync").map(|b| (b.id, b.threads, b.arrive)),
            Some((15, 0, false))
        );
        for bad in [
            "",
            "0x20,1,64",
            "0x20,1,64,wait",
            "0x20,x,64,sync",
            "0x20,1,64,sync,1",
            "0x20,300,64,sync",
        ] {
            assert_eq!(parse_bar(bad), None, "{bad:?}");
        }
    }
}
