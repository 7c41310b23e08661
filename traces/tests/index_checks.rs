//! A `.tst` whose index was edited (and its CRC recomputed) must not open: `run` refuses
//! what `verify` refuses about the index. Also: messages that say what is wrong (rkyv's
//! reason, the real class counts, trailing bytes rather than truncation).

use tessera_traces::format::{FOOTER_LEN, FOOTER_MAGIC, INDEX_ALIGN};
use tessera_traces::*;

/// A small well-formed trace: one kernel of 2 CTAs x 1 warp (IADD3, FFMA, EXIT).
fn write_good(path: &std::path::Path) {
    let mut w = TraceWriter::create(path, WriterOptions::default()).unwrap();
    let k = w
        .begin_kernel(KernelMeta::new("k", [2, 1, 1], [32, 1, 1]))
        .unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let ops = [
        w.add_opcode(OpcodeInfo::simple("IADD3", OpClass::Int))
            .unwrap(),
        w.add_opcode(OpcodeInfo::simple("FFMA", OpClass::Fp32))
            .unwrap(),
        w.add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit))
            .unwrap(),
    ];
    for c in 0..2 {
        w.begin_cta([c, 0, 0], None).unwrap();
        w.begin_warp(0).unwrap();
        for (n, &op) in ops.iter().enumerate() {
            w.push(&RawInst {
                pc: n as u32 * 16,
                mask: !0,
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

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Rewrites the index of `path` with `edit` applied, with a correct CRC and footer (what a
/// crafted or buggy file looks like: only a full decode can tell).
fn edit_index(path: &std::path::Path, edit: impl FnOnce(&mut Index)) {
    let b = std::fs::read(path).unwrap();
    let f = b.len() - FOOTER_LEN;
    let off = le_u64(&b, f) as usize;
    let mut aligned = rkyv::util::AlignedVec::<16>::new();
    aligned.extend_from_slice(&b[off..f]);
    let mut index = rkyv::from_bytes::<Index, rkyv::rancor::BoxedError>(&aligned).unwrap();
    edit(&mut index);
    let bytes = rkyv::to_bytes::<rkyv::rancor::BoxedError>(&index).unwrap();
    let mut out = b[..off].to_vec();
    assert_eq!(out.len() % INDEX_ALIGN, 0);
    out.extend_from_slice(&bytes);
    out.extend_from_slice(&(off as u64).to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
    out.extend_from_slice(&b[f + 20..f + 24]);
    out.extend_from_slice(FOOTER_MAGIC);
    std::fs::write(path, out).unwrap();
}

fn edited(edit: impl FnOnce(&mut Index)) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.tst");
    write_good(&path);
    edit_index(&path, edit);
    (dir, path)
}

fn open_err(path: &std::path::Path) -> String {
    match TraceFile::open(path) {
        Ok(t) => panic!(
            "an edited index opened; verify says: {:?}",
            verify(&t).err().map(|e| e.to_string())
        ),
        Err(e) => e.to_string(),
    }
}

/// Found by the `run` fuzz target (tests/data/fuzz/run/oom-chunk-length-*): a chunk whose
/// decompressed length the index overstates (3 GiB) made the decoder reserve that much
/// before decompressing; it is refused from the frame's own header first.
#[test]
fn an_overstated_chunk_length_is_refused_before_allocating() {
    let (_d, path) = edited(|i| i.chunks[0].raw_len = 3 << 30);
    let t = TraceFile::open(&path).unwrap();
    let m = verify(&t).unwrap_err().to_string();
    assert!(
        m.contains("chunk 0") && m.contains("the index says 3221225472 bytes decompressed"),
        "{m}"
    );
}

#[test]
fn an_unedited_index_round_trips_and_verifies() {
    let (_d, path) = edited(|_| {});
    verify(&TraceFile::open(&path).unwrap()).unwrap();
}

#[test]
fn edited_kernel_counts_do_not_open() {
    let (_d, path) = edited(|i| i.kernels[0].counts.warp_insts += 1);
    let m = open_err(&path);
    assert!(m.contains("kernel 0") && m.contains("warp"), "{m}");
    let (_d, path) = edited(|i| i.kernels[0].counts.thread_insts -= 5);
    let m = open_err(&path);
    assert!(m.contains("thread instructions"), "{m}");
}

#[test]
fn edited_chunk_counts_do_not_open() {
    let (_d, path) = edited(|i| {
        i.chunks[0].thread_insts += 1000;
        i.kernels[0].counts.thread_insts += 1000;
    });
    let m = open_err(&path);
    assert!(m.contains("chunk 0") && m.contains("at most 32"), "{m}");
    let (_d, path) = edited(|i| i.chunks[0].warp_insts += 1);
    let m = open_err(&path);
    assert!(m.contains("its chunks hold"), "{m}");
}

#[test]
fn an_edited_class_mix_does_not_open() {
    let (_d, path) = edited(|i| i.kernels[0].counts.class_warp_insts[OpClass::Fp32 as usize] += 1);
    let m = open_err(&path);
    assert!(m.contains("class mix sums to 7"), "{m}");
    let (_d, path) = edited(|i| {
        i.kernels[0].counts.class_warp_insts.pop();
    });
    let m = open_err(&path);
    assert!(m.contains("class mix has"), "{m}");
}

#[test]
fn a_grid_smaller_than_the_ctas_does_not_open() {
    let (_d, path) = edited(|i| i.kernels[0].grid = [1, 1, 1]);
    let m = open_err(&path);
    assert!(m.contains("more than its grid"), "{m}");
}

/// A mix that sums right but puts an instruction in the wrong class opens (only decoding
/// tells); verify then names the class and both real numbers.
#[test]
fn verify_names_the_class_and_real_counts() {
    let (_d, path) = edited(|i| {
        let c = &mut i.kernels[0].counts.class_warp_insts;
        c[OpClass::Fp32 as usize] -= 1;
        c[OpClass::Int as usize] += 1;
    });
    let t = TraceFile::open(&path).unwrap();
    let m = verify(&t).unwrap_err().to_string();
    let int = OpClass::Int.name();
    assert!(
        m.contains(&format!("{int} instructions decode to 2, index says 3")),
        "{m}"
    );
}

/// rkyv's reason reaches the message (not "failed without error information").
#[test]
fn an_invalid_index_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.tst");
    write_good(&path);
    let mut b = std::fs::read(&path).unwrap();
    let f = b.len() - FOOTER_LEN;
    let off = le_u64(&b, f) as usize;
    // Garbage in the index's last bytes (the root's relative pointers), CRC recomputed.
    for x in &mut b[f - 16..f] {
        *x = 0xa5;
    }
    let crc = crc32fast::hash(&b[off..f]);
    b[f + 16..f + 20].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    let m = open_err(&path);
    eprintln!("{m}");
    assert!(m.contains("index fails validation"), "{m}");
    assert!(
        !m.contains("without error information") && !m.contains("enable debug assertions"),
        "{m}"
    );
}

/// Bytes appended after a complete file are not "truncated".
#[test]
fn appended_garbage_is_trailing_bytes_not_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.tst");
    write_good(&path);
    let mut b = std::fs::read(&path).unwrap();
    let len = b.len();
    b.extend_from_slice(b"some garbage appended\n");
    std::fs::write(&path, &b).unwrap();
    let m = open_err(&path);
    assert!(
        m.contains("22 trailing bytes after the footer") && m.contains(&len.to_string()),
        "{m}"
    );
    assert!(!m.contains("truncated") && !m.contains("cut short"), "{m}");
    // A real cut is still a truncation.
    std::fs::write(&path, &b[..len - 5]).unwrap();
    let m = open_err(&path);
    assert!(m.contains("truncated"), "{m}");
}
