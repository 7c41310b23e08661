//! Decode rate of a `.tst` file on one core, into the form the timing model reads:
//! every chunk decompressed, every CTA decoded, every active lane's address visited.
//!
//! `cargo run --release -p tessera-traces --example decode_rate -- FILE.tst [--no-lanes]`

use std::time::Instant;
use tessera_traces::{DecodedCta, TraceError, TraceFile};

fn main() -> Result<(), TraceError> {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: decode_rate FILE.tst [--no-lanes]");
        std::process::exit(2);
    };
    let lanes = !args.iter().any(|a| a == "--no-lanes");
    let t = TraceFile::open(std::path::Path::new(path))?;
    let mut best = f64::MAX;
    let (mut n, mut sum) = (0u64, 0u64);
    for _ in 0..3 {
        let t0 = Instant::now();
        n = 0;
        let mut dec = t.decoder();
        dec.set_release_pages(false);
        for k in 0..t.kernels().len() {
            for chunk in t.kernel_chunks(k) {
                dec.for_each_cta(chunk, |cta: &DecodedCta| -> Result<(), TraceError> {
                    n += cta.insts.len() as u64;
                    if lanes {
                        for inst in &cta.insts {
                            cta.for_each_lane_addr(inst, |l, a| {
                                sum = sum.wrapping_add(a ^ l as u64)
                            });
                        }
                    }
                    Ok(())
                })?;
            }
        }
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!(
        "{n} warp instructions, best of 3: {:.3} s, {:.1} M warp instructions/s{} (checksum {sum:x})",
        best,
        n as f64 / best / 1e6,
        if lanes { " with lane addresses" } else { "" }
    );
    Ok(())
}
