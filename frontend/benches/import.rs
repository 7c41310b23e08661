//! Accel-Sim text import throughput.
//!
//! - `parse_inst_line/*`: `accelsim::parse_inst_line` on one representative line of each
//!   kind (no memory, mode 1 base+stride, mode 0 list of 32 addresses, mode 2 deltas), in
//!   bytes of text per second;
//! - `import_dir/accelsim-vectoradd`: a whole `import_dir` of the bundled real trace
//!   (`../shared/traces/accelsim-vectoradd`), skipped when that folder is absent.
//!
//! Run with `cargo bench -p tessera-frontend --bench import`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::path::PathBuf;
use std::time::Duration;
use tessera_frontend::accelsim::{import_dir, parse_inst_line, ImportOptions};

fn vectoradd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/accelsim-vectoradd")
}

/// One line of each kind, as the tracer writes them (a space after every field).
fn lines() -> Vec<(&'static str, String)> {
    let base = 0x7fb0_fc43_0e00u64;
    let mut list = String::from("00a0 ffffffff 1 R4 LDG.E 1 R4 4 0 ");
    for lane in 0..32u64 {
        // A permutation within the 128-byte line.
        list.push_str(&format!("0x{:016x} ", base + ((lane ^ 5) * 4)));
    }
    list.push_str("0 ");
    let mut delta = format!("00b0 ffffffff 1 R3 LDG.E 1 R2 4 2 0x{base:x} ");
    for lane in 1..32i64 {
        let d = if lane % 4 == 0 { -60 } else { 20 };
        delta.push_str(&format!("{d} "));
    }
    delta.push_str("0 ");
    vec![
        (
            "no_memory",
            "0060 ffffffff 1 R7 HFMA2.MMA 2 R255 R255 0 0 ".to_string(),
        ),
        (
            "stride",
            "00a0 ffffffff 1 R4 LDG.E 1 R4 4 1 0x7fb0fc430e00 4 0 ".to_string(),
        ),
        ("list_mode0", list),
        ("delta_mode2", delta),
    ]
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse_inst_line");
    for (name, line) in lines() {
        // Check the line before timing it.
        parse_inst_line(line.as_bytes(), false).unwrap();
        g.throughput(Throughput::Bytes(line.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| black_box(parse_inst_line(black_box(line.as_bytes()), false).unwrap()))
        });
    }
    g.finish();

    let dir = vectoradd_dir();
    if !dir.join("kernelslist.g").is_file() {
        eprintln!("skipped: ../shared/traces not present");
        return;
    }
    let text_bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".traceg"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("vectoradd.tst");
    let mut g = c.benchmark_group("import_dir");
    g.throughput(Throughput::Bytes(text_bytes));
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("accelsim-vectoradd", |b| {
        b.iter(|| black_box(import_dir(&dir, &out, &ImportOptions::default()).unwrap()))
    });
    g.finish();
}

criterion_group!(import, benches);
criterion_main!(import);
