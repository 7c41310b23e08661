//! The MPI transport's wire form: encoding a window's messages into a rank's send buffer
//! (`Message::encode`, a fixed little-endian layout, 49 bytes for a model packet) and
//! decoding them on the receiving rank, per message. A plain copy of the same bytes is the
//! floor. Run with `cargo bench -p tessera-cluster --bench wire`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tessera_cluster::{Message, Payload, PortId};

fn window(n: u64) -> Vec<Message> {
    (0..n)
        .map(|i| Message {
            arrive_at: 1_000_000 + i * 37,
            src_port: PortId((i % 300) as u32),
            src_seq: i,
            dst_port: PortId(((i * 7) % 300) as u32),
            payload: Payload::Words3([i, i ^ 0xdead_beef, i << 20]),
        })
        .collect()
}

fn wire(c: &mut Criterion) {
    let mut g = c.benchmark_group("wire");
    let n = 1024u64;
    let msgs = window(n);
    let mut buf = Vec::with_capacity(64 * n as usize);
    for m in &msgs {
        m.encode(&mut buf).unwrap_or_else(|e| panic!("{e}"));
    }
    let bytes = buf.clone();
    g.throughput(Throughput::Elements(n));
    g.bench_function("encode_words3_1024", |b| {
        b.iter(|| {
            buf.clear();
            for m in &msgs {
                m.encode(&mut buf).unwrap_or_else(|e| panic!("{e}"));
            }
            black_box(buf.len())
        })
    });
    let mut out: Vec<Message> = Vec::with_capacity(n as usize);
    g.bench_function("decode_words3_1024", |b| {
        b.iter(|| {
            out.clear();
            let mut at = 0;
            while at < bytes.len() {
                let (m, used) = Message::decode(&bytes[at..]).unwrap_or_else(|e| panic!("{e}"));
                out.push(m);
                at += used;
            }
            black_box(out.len())
        })
    });
    let mut copy = vec![0u8; bytes.len()];
    g.bench_function("memcpy_same_bytes", |b| {
        b.iter(|| {
            copy.copy_from_slice(black_box(&bytes));
            black_box(copy[0])
        })
    });
    g.finish();
}

criterion_group!(benches, wire);
criterion_main!(benches);
