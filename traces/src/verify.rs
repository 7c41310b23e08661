//! Full-file verification: decode every chunk, check checksums and recount everything the
//! index claims.

use crate::error::{Result, TraceError};
use crate::opcode::OpClass;
use crate::reader::TraceFile;

/// What [`verify`] counted by decoding (equal to the index's counts when it returns Ok).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub kernels: u64,
    pub chunks: u64,
    pub ctas: u64,
    pub warps: u64,
    pub warp_insts: u64,
    pub thread_insts: u64,
}

/// Decodes every chunk of `t`, checking CRCs, record structure, and that per-chunk and
/// per-kernel counts (CTAs, warps, warp and thread instructions, class mix) match the
/// index.
pub fn verify(t: &TraceFile) -> Result<VerifyReport> {
    let mut rep = VerifyReport::default();
    let mut dec = t.decoder();
    for (k, meta) in t.kernels().iter().enumerate() {
        rep.kernels += 1;
        let mut ctas = 0u64;
        let mut warps = 0u64;
        let mut warp_insts = 0u64;
        let mut thread_insts = 0u64;
        let mut classes = vec![0u64; OpClass::COUNT];
        for chunk in t.kernel_chunks(k) {
            rep.chunks += 1;
            let (mut cw, mut ct) = (0u64, 0u64);
            dec.for_each_cta(chunk, |cta| -> Result<()> {
                ctas += 1;
                warps += cta.warps.len() as u64;
                for i in &cta.insts {
                    cw += 1;
                    ct += i.mask.count_ones() as u64;
                    classes[i.class as usize] += 1;
                }
                Ok(())
            })?;
            let e = &t.index().chunks[chunk];
            if e.warp_insts != cw || e.thread_insts != ct {
                return Err(t.chunk_error(
                    chunk,
                    &format!(
                        "decodes to {cw} warp / {ct} thread instructions, index says {} / {}",
                        e.warp_insts, e.thread_insts
                    ),
                ));
            }
            warp_insts += cw;
            thread_insts += ct;
        }
        let c = &meta.counts;
        let mismatch = |what: &str, got: u64, want: u64| TraceError::Corrupt {
            path: t.path().to_path_buf(),
            detail: format!(
                "kernel {k} ({}): {what} decode to {got}, index says {want}",
                meta.name
            ),
        };
        for (what, got, want) in [
            ("CTAs", ctas, c.ctas),
            ("warps", warps, c.warps),
            ("warp instructions", warp_insts, c.warp_insts),
            ("thread instructions", thread_insts, c.thread_insts),
        ] {
            if got != want {
                return Err(mismatch(what, got, want));
            }
        }
        if classes != c.class_warp_insts {
            return Err(mismatch("instruction classes", 0, 0));
        }
        rep.ctas += ctas;
        rep.warps += warps;
        rep.warp_insts += warp_insts;
        rep.thread_insts += thread_insts;
    }
    Ok(rep)
}
