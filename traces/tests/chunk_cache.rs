//! The decoder keeps recently used chunks decompressed: CTAs requested back and forth
//! between a kernel's chunks (grid order against a trace's listing order) decompress and
//! checksum each chunk once while at most `CACHED_CHUNKS` (4) are in use, and the CTAs
//! read are the same whatever the order.

use tessera_traces::*;

/// A kernel of `ctas` CTAs, one warp of a few instructions each, in chunks of one to two
/// CTAs (a tiny chunk target).
fn write(path: &std::path::Path, ctas: u32) {
    let opts = WriterOptions {
        chunk_target_bytes: 1,
        zstd_level: 1,
    };
    let mut w = TraceWriter::create(path, opts).unwrap();
    let meta = KernelMeta::new("k", [ctas, 1, 1], [32, 1, 1]);
    let k = w.begin_kernel(meta).unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let fadd = w
        .add_opcode(OpcodeInfo::simple("FADD", OpClass::Fp32))
        .unwrap();
    let exit = w
        .add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit))
        .unwrap();
    for c in 0..ctas {
        w.begin_cta([c, 0, 0], None).unwrap();
        w.begin_warp(0).unwrap();
        for (i, op) in [fadd, fadd, exit].into_iter().enumerate() {
            w.push(&RawInst {
                pc: i as u32 * 16,
                // A mask per CTA, so each CTA reads back as itself.
                mask: if op == exit { u32::MAX } else { c | 1 },
                opcode: op,
                dsts: &[],
                srcs: &[],
                mem_width: 0,
                imm: None,
                line: None,
                addrs: AddrRecord::None,
            })
            .unwrap();
        }
        w.end_warp().unwrap();
        w.end_cta().unwrap();
    }
    w.end_kernel().unwrap();
    w.finish().unwrap();
}

#[test]
fn alternating_between_chunks_decompresses_each_once() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.tst");
    write(&p, 8);
    let t = TraceFile::open(&p).unwrap();
    let chunks = t.kernel_chunks(0);
    assert!(chunks.len() >= 4, "{} chunks", chunks.len());
    // Back and forth between the first and last chunks' CTAs.
    let first = 0u32;
    let last = 7u32;
    let mut dec = t.decoder();
    let mut masks = Vec::new();
    for _ in 0..10 {
        for c in [first, last] {
            let cta = dec.kernel_cta(0, c).unwrap();
            masks.push(cta.warp(0)[0].mask);
        }
    }
    assert_eq!(dec.decompressions(), 2);
    assert!(masks.chunks(2).all(|m| m == [1, 7]), "{masks:?}");
    // Every chunk in turn, twice: with more chunks than the cache holds, each pass
    // decompresses again, and reads the same CTAs.
    let mut dec = t.decoder();
    let all: Vec<u32> = (0..8).chain(0..8).collect();
    let read: Vec<u32> = all
        .iter()
        .map(|&c| dec.kernel_cta(0, c).unwrap().warp(0)[0].mask)
        .collect();
    let want: Vec<u32> = all.iter().map(|&c| c | 1).collect();
    assert_eq!(read, want);
    assert_eq!(dec.decompressions(), 2 * chunks.len() as u64);
}
