//! Encode and decode throughput of the `.tst` format on synthetic traces.
//!
//! Two traces of 2,000 CTAs × 8 warps × 100 instructions (1.6 M warp instructions, 25%
//! memory instructions) differ only in how addresses are stored:
//! - `stride`: every memory instruction is address mode 1 (base + stride), bases advancing
//!   by 128 bytes per warp and by a grid stride per loop iteration;
//! - `list`: every memory instruction is address mode 0 (32 per-lane addresses), with a
//!   permutation within the 128-byte line, and one gather per loop iteration.
//!
//! Benches (throughput in warp instructions):
//! - `decode/*`: what the timing model does: `TraceFile::open`, one `ChunkDecoder`, every
//!   CTA of every chunk with `for_each_cta`, every active lane's address summed;
//! - `decompress_only/*`: zstd decompression of every chunk (no CTA decoding);
//! - `decode_cta_only/*`: `codec::decode_cta` on already decompressed chunks (varint
//!   decoding without zstd), with the same address walk;
//! - `decode_cta_no_lanes/*`: the same without walking the lanes' addresses;
//! - `encode/*`: `TraceWriter` from instructions to a finished file.
//!
//! Run with `cargo bench -p tessera-traces --bench decode`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::path::Path;
use std::time::Duration;
use tessera_traces::codec::{decode_cta, split_chunk, DecodedCta};
use tessera_traces::{
    AddrRecord, Command, KernelMeta, OpClass, OpcodeInfo, RawInst, TraceFile, TraceWriter,
    WriterOptions,
};

const CTAS: u32 = 2_000;
const WARPS: u32 = 8;
const ITERS: u32 = 6;
/// Prologue, 6 loop iterations of 16 instructions (4 with memory), epilogue.
const INSTS_PER_WARP: u64 = 3 + ITERS as u64 * 16 + 1;
const WARP_INSTS: u64 = CTAS as u64 * WARPS as u64 * INSTS_PER_WARP;

const A: u64 = 0x7f00_0000_0000;
const B: u64 = 0x7f10_0000_0000;
const C: u64 = 0x7f20_0000_0000;
const SMEM: u64 = 0x7fb1_3900_0000;
/// Bytes a full pass of the grid covers (128 per warp).
const GRID_STRIDE: u64 = CTAS as u64 * WARPS as u64 * 128;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Stride,
    List,
}

/// (name, class, memory width) of the opcodes, by index.
const OPS: &[(&str, OpClass, u32)] = &[
    ("S2R", OpClass::SpecialReg, 0),        // 0
    ("IMAD", OpClass::IntMul, 0),           // 1
    ("ISETP.GE.AND", OpClass::Int, 0),      // 2
    ("LDG.E", OpClass::LoadGlobal, 4),      // 3
    ("IMAD.WIDE", OpClass::IntMul, 0),      // 4
    ("FFMA", OpClass::Fp32, 0),             // 5
    ("FMUL", OpClass::Fp32, 0),             // 6
    ("LDS", OpClass::LoadShared, 4),        // 7
    ("FADD", OpClass::Fp32, 0),             // 8
    ("IADD3", OpClass::Int, 0),             // 9
    ("STG.E", OpClass::StoreGlobal, 4),     // 10
    ("BRA", OpClass::Branch, 0),            // 11
    ("EXIT", OpClass::Exit, 0),             // 12
    ("MOV", OpClass::Int, 0),               // 13
    ("BAR.SYNC", OpClass::Barrier, 0),      // 14
    ("SHFL.BFLY", OpClass::WarpShuffle, 0), // 15
];

/// One static instruction of the synthetic kernel: opcode index and, for memory
/// instructions, which array it reads.
struct Stat {
    op: usize,
    dsts: &'static [u16],
    srcs: &'static [u16],
    mem: Option<(u64, bool)>, // (array base, gather)
}

fn program() -> (Vec<Stat>, Vec<Stat>, Vec<Stat>) {
    let s = |op, dsts, srcs| Stat {
        op,
        dsts,
        srcs,
        mem: None,
    };
    let m = |op, dsts, srcs, base, gather| Stat {
        op,
        dsts,
        srcs,
        mem: Some((base, gather)),
    };
    let prologue = vec![s(0, &[0], &[]), s(0, &[1], &[]), s(1, &[2], &[0, 1])];
    let body = vec![
        s(4, &[4], &[2, 3]),
        m(3, &[6], &[4], A, false),
        s(4, &[8], &[2, 3]),
        m(3, &[10], &[8], B, true),
        s(5, &[12], &[6, 10, 12]),
        s(6, &[13], &[12, 12]),
        m(7, &[14], &[2], SMEM, false),
        s(8, &[12], &[13, 14]),
        s(15, &[15], &[12]),
        s(5, &[12], &[15, 12, 12]),
        s(4, &[16], &[2, 3]),
        m(10, &[], &[16, 12], C, false),
        s(9, &[2], &[2, 3]),
        s(2, &[], &[2]),
        s(13, &[3], &[3]),
        s(11, &[], &[]),
    ];
    let epilogue = vec![s(12, &[], &[])];
    (prologue, body, epilogue)
}

/// A cheap deterministic hash for irregular addresses.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

/// Writes the synthetic trace; returns its warp instruction count.
fn write_trace(path: &Path, mode: Mode) -> u64 {
    let mut w = TraceWriter::create(path, WriterOptions::default()).unwrap();
    let mut meta = KernelMeta::new("synthetic", [CTAS, 1, 1], [WARPS * 32, 1, 1]);
    meta.shmem_base = SMEM;
    meta.local_base = SMEM + (1 << 24);
    let k = w.begin_kernel(meta).unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let ops: Vec<u16> = OPS
        .iter()
        .map(|&(name, class, width)| {
            let mut info = OpcodeInfo::simple(name, class);
            info.width_bytes = width.max(4) as u8;
            w.add_opcode(info).unwrap()
        })
        .collect();
    let (prologue, body, epilogue) = program();
    let mut addrs = [0u64; 32];
    let mut n = 0u64;
    for cta in 0..CTAS {
        w.begin_cta([cta, 0, 0], None).unwrap();
        for warp in 0..WARPS {
            w.begin_warp(warp).unwrap();
            let gw = (cta * WARPS + warp) as u64;
            let mut pc = 0u32;
            let mut emit = |w: &mut TraceWriter, st: &Stat, pc: u32, iter: u32| {
                // The last warp of the last CTA is partly inactive.
                let mask = if cta == CTAS - 1 && warp == WARPS - 1 {
                    0x0000_ffff
                } else {
                    u32::MAX
                };
                let (width, rec) = match st.mem {
                    None => (0, AddrRecord::None),
                    Some((base, gather)) => {
                        let line = if base == SMEM {
                            base + warp as u64 * 128
                        } else {
                            base + gw * 128 + iter as u64 * GRID_STRIDE
                        };
                        let rec = match mode {
                            Mode::Stride => AddrRecord::Stride {
                                base: line,
                                stride: 4,
                            },
                            Mode::List => {
                                let active = mask.count_ones() as usize;
                                for (l, a) in addrs[..active].iter_mut().enumerate() {
                                    let l = l as u64;
                                    *a = if gather {
                                        // Random 4-byte words within 1 MiB of the array.
                                        base + (mix(gw * 1_000 + iter as u64 * 32 + l) & 0xf_fffc)
                                    } else {
                                        // A rotation and swap within the 128-byte line.
                                        line + (((l ^ 1) + iter as u64) % 32) * 4
                                    };
                                }
                                AddrRecord::List {
                                    mode: 0,
                                    addrs: &addrs[..active],
                                }
                            }
                        };
                        (4, rec)
                    }
                };
                w.push(&RawInst {
                    pc,
                    mask,
                    opcode: ops[st.op],
                    dsts: st.dsts,
                    srcs: st.srcs,
                    mem_width: width,
                    imm: Some(0),
                    line: None,
                    addrs: rec,
                })
                .unwrap();
            };
            for st in &prologue {
                emit(&mut w, st, pc, 0);
                pc += 16;
                n += 1;
            }
            let loop_pc = pc;
            for iter in 0..ITERS {
                pc = loop_pc;
                for st in &body {
                    emit(&mut w, st, pc, iter);
                    pc += 16;
                    n += 1;
                }
            }
            for st in &epilogue {
                emit(&mut w, st, pc, 0);
                pc += 16;
                n += 1;
            }
            w.end_warp().unwrap();
        }
        w.end_cta().unwrap();
    }
    w.end_kernel().unwrap();
    w.finish().unwrap();
    assert_eq!(n, WARP_INSTS);
    n
}

/// Sums every active lane's address of every memory instruction of a CTA.
#[inline]
fn touch(cta: &DecodedCta) -> u64 {
    let mut sum = 0u64;
    for inst in &cta.insts {
        cta.for_each_lane_addr(inst, |lane, addr| {
            sum = sum.wrapping_add(addr ^ lane as u64);
        });
    }
    sum
}

/// Decodes the whole file the way the timing model reads it.
fn decode_all(path: &Path) -> u64 {
    let t = TraceFile::open(path).unwrap();
    let mut dec = t.decoder();
    let mut sum = 0u64;
    for k in 0..t.kernels().len() {
        for chunk in t.kernel_chunks(k) {
            dec.for_each_cta(chunk, |cta| -> Result<(), tessera_traces::TraceError> {
                sum = sum.wrapping_add(touch(cta));
                Ok(())
            })
            .unwrap();
        }
    }
    sum
}

/// Every chunk of the file, decompressed, with its kernel.
fn raw_chunks(path: &Path) -> Vec<(usize, Vec<u8>)> {
    let t = TraceFile::open(path).unwrap();
    let bytes = std::fs::read(path).unwrap();
    t.index()
        .chunks
        .iter()
        .map(|c| {
            let frame = &bytes[c.offset as usize..(c.offset + c.stored_len as u64) as usize];
            let raw = zstd::bulk::decompress(frame, c.raw_len as usize).unwrap();
            (c.kernel as usize, raw)
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let variants = [("stride", Mode::Stride), ("list", Mode::List)];
    let mut files = Vec::new();
    for (name, mode) in variants {
        let path = dir.path().join(format!("{name}.tst"));
        write_trace(&path, mode);
        let t = TraceFile::open(&path).unwrap();
        let k = &t.kernels()[0];
        eprintln!(
            "{name}: {} warp insts, {} chunks, {} bytes raw, {} bytes stored ({:.2} B/warp inst)",
            k.counts.warp_insts,
            k.n_chunks,
            k.counts.raw_bytes,
            t.file_bytes(),
            t.file_bytes() as f64 / k.counts.warp_insts as f64
        );
        files.push((name, mode, path));
    }

    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(WARP_INSTS));
    for (name, _, path) in &files {
        g.bench_function(*name, |b| b.iter(|| black_box(decode_all(path))));
    }
    g.finish();

    let mut g = c.benchmark_group("decompress_only");
    g.throughput(Throughput::Elements(WARP_INSTS));
    for (name, _, path) in &files {
        let t = TraceFile::open(path).unwrap();
        let bytes = std::fs::read(path).unwrap();
        let mut raw = Vec::new();
        let mut dctx = zstd::bulk::Decompressor::new().unwrap();
        g.bench_function(*name, |b| {
            b.iter(|| {
                let mut n = 0usize;
                for ch in &t.index().chunks {
                    let frame =
                        &bytes[ch.offset as usize..(ch.offset + ch.stored_len as u64) as usize];
                    raw.clear();
                    raw.reserve(ch.raw_len as usize);
                    n += dctx.decompress_to_buffer(frame, &mut raw).unwrap();
                }
                black_box(n)
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("decode_cta_only");
    g.throughput(Throughput::Elements(WARP_INSTS));
    for (name, _, path) in &files {
        let t = TraceFile::open(path).unwrap();
        let chunks = raw_chunks(path);
        let mut cta = DecodedCta::default();
        g.bench_function(*name, |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for (k, raw) in &chunks {
                    let slots = t.slot_infos(*k);
                    let version = t.version();
                    for rec in split_chunk(raw).unwrap() {
                        decode_cta(rec, slots, version, &mut cta).unwrap();
                        sum = sum.wrapping_add(touch(&cta));
                    }
                }
                black_box(sum)
            })
        });
    }
    g.finish();

    // The same without the lane walk: the varint decoding alone.
    let mut g = c.benchmark_group("decode_cta_no_lanes");
    g.throughput(Throughput::Elements(WARP_INSTS));
    for (name, _, path) in &files {
        let t = TraceFile::open(path).unwrap();
        let chunks = raw_chunks(path);
        let mut cta = DecodedCta::default();
        g.bench_function(*name, |b| {
            b.iter(|| {
                let mut n = 0usize;
                for (k, raw) in &chunks {
                    let slots = t.slot_infos(*k);
                    let version = t.version();
                    for rec in split_chunk(raw).unwrap() {
                        decode_cta(rec, slots, version, &mut cta).unwrap();
                        n += cta.insts.len() + cta.addrs.len();
                    }
                }
                black_box(n)
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(WARP_INSTS));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(15));
    for (name, mode, _) in &files {
        let path = dir.path().join(format!("encode-{name}.tst"));
        g.bench_function(*name, |b| b.iter(|| black_box(write_trace(&path, *mode))));
    }
    g.finish();
}

criterion_group!(decode, benches);
criterion_main!(decode);
