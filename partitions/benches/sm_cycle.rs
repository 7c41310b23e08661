//! Speed of the SM issue stage alone (`sm::Sm`, no memory system): warp instructions per
//! second on recorded workloads, `configs/a100.yaml` timings, the placeholder memory
//! latency.
//!
//! - `sm_cycle/fma_streams`: 16 warps of 8 independent FFMA streams (issue-bound: an issue
//!   almost every cycle on every scheduler);
//! - `sm_cycle/vectoradd_stream`: 512 CTAs of vectoradd streamed through one SM that keeps
//!   8 of them resident, a CTA dispatched as one completes (memory-bound: most warps wait
//!   on loads, events are sparse), the way the GPU loop drives an SM.
//!
//! Whole-run effect of the per-scheduler caches (milestone "speed of the issue stage"):
//! `tessera run --config configs/rtx3070.yaml --trace vadd.tst` (vectoradd,
//! n = 1605632) executed 4.96 G instructions before and 2.82 G after (callgrind, 1.76x);
//! the SM's scans (`next_issue`, `count_stalls`, `pick`) went from about 40% of the run
//! to under 10%, the rest being the memory system.
//!
//! Run with `cargo bench -p tessera-partitions --bench sm_cycle`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::sync::Arc;
use std::time::Duration;
use tessera_partitions::config::GpuConfig;
use tessera_partitions::sm::{KernelPrep, Sm, SmParams};
use tessera_traces::{CtaStream, DecodedCta, KernelMeta, SlotInfo, TraceFile};

#[path = "../tests/common/sm_batch.rs"]
mod sm_batch;
use sm_batch::{run_cta_batch, PlaceholderMem};

const A100: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/a100.yaml");

fn spec() -> SmParams {
    SmParams::from_config(&GpuConfig::load(A100, &[]).expect("a100.yaml loads"))
}

/// Records `workload` and decodes every CTA of its first kernel.
fn probe(workload: &str, params: &[(&str, &str)]) -> (KernelMeta, Vec<DecodedCta>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("p.tst");
    let p: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tessera_frontend::workloads::generate(workload, &p, 80, &path).expect("workload records");
    let t = TraceFile::open(&path).expect("trace opens");
    let k = t.kernels()[0].clone();
    let mut dec = t.decoder();
    let ctas = (0..k.counts.ctas as u32)
        .map(|c| dec.kernel_cta(0, c).expect("CTA decodes").clone())
        .collect();
    (k, ctas)
}

/// Streams `ctas` through one SM with `resident` CTAs at a time; returns warp insts.
fn stream(spec: &Arc<SmParams>, k: &KernelMeta, ctas: &[CtaStream], resident: usize) -> u64 {
    let mut sm = Sm::new(spec.clone(), 0);
    sm.set_kernel(Arc::new(KernelPrep::new(k)))
        .expect("empty SM");
    let mut next = 0;
    while next < ctas.len().min(resident) {
        sm.add_cta(ctas[next].clone(), next as u64).expect("fits");
        next += 1;
    }
    let mut mem = PlaceholderMem;
    let mut freed = 0;
    while let Some(t) = sm.next_event() {
        sm.advance_to(t);
        sm.complete_ctas(t, |_, _| freed += 1);
        while freed > 0 && next < ctas.len() {
            sm.add_cta(ctas[next].clone(), next as u64).expect("fits");
            next += 1;
            freed -= 1;
        }
        sm.step(&mut mem);
    }
    let end = sm.now();
    sm.take_stats(0, end).warp_insts
}

fn bench(c: &mut Criterion) {
    let spec = spec();
    let mut g = c.benchmark_group("sm_cycle");
    g.measurement_time(Duration::from_secs(5));

    let (k, ctas) = probe(
        "fma_streams",
        &[("warps", "16"), ("streams", "8"), ("iters", "256")],
    );
    g.throughput(Throughput::Elements(k.counts.warp_insts));
    g.bench_function("fma_streams", |b| {
        b.iter(|| black_box(run_cta_batch(&spec, &k, &ctas).expect("runs").warp_insts))
    });

    let (k, ctas) = probe("vectoradd", &[("n", "131072")]);
    // Kept encoded, as the GPU dispatches them (each dispatch copies one).
    let table: Arc<[SlotInfo]> = SlotInfo::table(&k).into();
    let ctas: Vec<CtaStream> = ctas
        .iter()
        .map(|c| CtaStream::from_decoded(c, table.clone()).expect("CTA encodes"))
        .collect();
    let spec = Arc::new(spec);
    g.throughput(Throughput::Elements(k.counts.warp_insts));
    g.bench_function("vectoradd_stream", |b| {
        b.iter(|| black_box(stream(&spec, &k, &ctas, 8)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
