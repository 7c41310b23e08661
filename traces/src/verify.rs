//! Full-file verification: decode every chunk, check checksums and recount everything the
//! index claims, then check the semantic rules every well-formed trace obeys:
//!
//! - every CTA of the grid is present, once;
//! - every warp ends with all its threads exited (the union of its `EXIT` masks covers the
//!   lanes that hold threads);
//! - all warps of a CTA execute the same sequence of barriers (by PC);
//! - when the trace records allocations (recorded traces), every global access lies inside
//!   an allocation made before the launch, and every shared access inside the CTA's
//!   shared memory.

use crate::bounds::{allocations, AccessBounds, AccessFault, Outside};
use crate::codec::DecodedCta;
use crate::error::{Result, TraceError};
use crate::opcode::OpClass;
use crate::reader::TraceFile;
use crate::schema::KernelMeta;

/// What [`verify`] counted by decoding (equal to the index's counts when it returns Ok).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub kernels: u64,
    pub chunks: u64,
    pub ctas: u64,
    pub warps: u64,
    pub warp_insts: u64,
    pub thread_insts: u64,
    /// Lane accesses checked against allocations (0 when the trace records none).
    pub checked_accesses: u64,
}

struct Semantics<'a> {
    t: &'a TraceFile,
    k: usize,
    meta: &'a KernelMeta,
    seen: Vec<u64>,
    /// `None` when the trace records no allocations before the launch.
    bounds: Option<AccessBounds>,
    checked: u64,
}

impl Semantics<'_> {
    fn err(&self, cta: &DecodedCta, what: String) -> TraceError {
        TraceError::Corrupt {
            path: self.t.path().to_path_buf(),
            detail: format!(
                "kernel {} ({}), CTA ({},{},{}): {what}",
                self.k, self.meta.name, cta.id[0], cta.id[1], cta.id[2]
            ),
        }
    }

    fn check_cta(&mut self, cta: &DecodedCta) -> Result<()> {
        let g = self.meta.grid;
        if cta.id[0] >= g[0] || cta.id[1] >= g[1] || cta.id[2] >= g[2] {
            return Err(self.err(
                cta,
                format!("outside the grid ({},{},{})", g[0], g[1], g[2]),
            ));
        }
        let lin =
            (cta.id[2] as u64 * g[1] as u64 + cta.id[1] as u64) * g[0] as u64 + cta.id[0] as u64;
        let (word, bit) = ((lin / 64) as usize, lin % 64);
        if let Some(w) = self.seen.get_mut(word) {
            if *w >> bit & 1 == 1 {
                return Err(self.err(cta, "appears twice".into()));
            }
            *w |= 1 << bit;
        }
        let threads = self.meta.threads_per_cta();
        // Barrier PC sequences per warp: a warp may exit early (its sequence stops), but
        // no warp may skip, add or reorder a barrier: every sequence is a prefix of the
        // longest one (exited warps count as arrived on sm_70 and later). Only the
        // whole-CTA barrier: named barriers (format version 3) are met by some warps of
        // the CTA (producers arrive where consumers wait).
        let mut longest: Vec<u32> = Vec::new();
        let mut longest_warp = 0u32;
        let mut seqs: Vec<(u32, Vec<u32>)> = Vec::with_capacity(cta.warps.len());
        for (wpos, w) in cta.warps.iter().enumerate() {
            let insts = &cta.insts[w.insts.clone()];
            let first = w.warp_id as u64 * 32;
            let lanes = threads.saturating_sub(first).min(32);
            let valid = if lanes >= 32 {
                u32::MAX
            } else {
                (1u32 << lanes) - 1
            };
            let exited = insts
                .iter()
                .filter(|i| i.class == OpClass::Exit)
                .fold(0u32, |m, i| m | i.mask);
            if exited & valid != valid {
                return Err(self.err(
                    cta,
                    format!(
                        "warp {} ends with lanes {:08x} not exited (its EXITs cover {exited:08x} of {valid:08x})",
                        w.warp_id,
                        valid & !exited
                    ),
                ));
            }
            let bars: Vec<u32> = insts
                .iter()
                .filter(|i| {
                    i.class == OpClass::Barrier
                        && !self.meta.named_barriers.iter().any(|b| b.pc == i.pc)
                })
                .map(|i| i.pc)
                .collect();
            if bars.len() > longest.len() {
                longest = bars.clone();
                longest_warp = w.warp_id;
            }
            seqs.push((w.warp_id, bars));
            let _ = wpos;
            let Some(bounds) = &self.bounds else {
                continue;
            };
            for i in insts {
                if !i.class.is_memory() || i.mask == 0 {
                    continue;
                }
                let rule = bounds.rule(i.slot);
                for (lane, addr) in cta.lane_addrs(i) {
                    let outside = rule.filter(|&(s, w)| !bounds.allows(s, w, addr));
                    if let Some((_, width)) = outside {
                        let fault = AccessFault {
                            warp_id: w.warp_id,
                            pc: i.pc,
                            slot: i.slot,
                            lane: Outside { lane, addr, width },
                        };
                        return Err(self.err(cta, fault.describe(self.meta)));
                    }
                    self.checked += 1;
                }
            }
        }
        for (wid, seq) in &seqs {
            if !longest.starts_with(seq) {
                return Err(self.err(
                    cta,
                    format!(
                        "warp {wid} reaches barriers at PCs {seq:x?}, warp {longest_warp} at {longest:x?}: the warps of a CTA must reach the same barriers (a warp may only stop early by exiting)"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn finish(&self) -> Result<()> {
        let want = self.meta.grid_ctas();
        if self.meta.counts.ctas != want {
            return Err(TraceError::Corrupt {
                path: self.t.path().to_path_buf(),
                detail: format!(
                    "kernel {} ({}): {} CTAs of a grid of {want}: every CTA must be present",
                    self.k, self.meta.name, self.meta.counts.ctas
                ),
            });
        }
        Ok(())
    }
}

/// Decodes every chunk of `t`, checking CRCs, record structure, and that per-chunk and
/// per-kernel counts (CTAs, warps, warp and thread instructions, class mix) match the
/// index.
pub fn verify(t: &TraceFile) -> Result<VerifyReport> {
    verify_with(t, true)
}

/// [`verify`] without the semantic rules: structure, checksums and counts only (for
/// synthetic streams that are not programs).
pub fn verify_structure(t: &TraceFile) -> Result<VerifyReport> {
    verify_with(t, false)
}

fn verify_with(t: &TraceFile, semantic: bool) -> Result<VerifyReport> {
    let mut rep = VerifyReport::default();
    let mut dec = t.decoder();
    let (all_allocs, allocs_before) = allocations(t);
    for (k, meta) in t.kernels().iter().enumerate() {
        rep.kernels += 1;
        let mut sem = Semantics {
            t,
            k,
            meta,
            seen: vec![0u64; meta.grid_ctas().div_ceil(64).min(1 << 26) as usize],
            bounds: AccessBounds::new(meta, all_allocs[..allocs_before[k]].to_vec()),
            checked: 0,
        };
        let mut ctas = 0u64;
        let mut warps = 0u64;
        let mut warp_insts = 0u64;
        let mut thread_insts = 0u64;
        let mut classes = vec![0u64; OpClass::COUNT];
        for chunk in t.kernel_chunks(k) {
            rep.chunks += 1;
            let (mut cw, mut ct) = (0u64, 0u64);
            dec.for_each_cta(chunk, |cta| -> Result<()> {
                if semantic {
                    sem.check_cta(cta)?;
                }
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
            return Err(class_mismatch(t, k, meta, &classes));
        }
        if semantic {
            sem.finish()?;
        }
        rep.checked_accesses += sem.checked;
        rep.ctas += ctas;
        rep.warps += warps;
        rep.warp_insts += warp_insts;
        rep.thread_insts += thread_insts;
    }
    Ok(rep)
}

/// The error for a class mix that differs from the decoded one: names the first class
/// whose count differs, with both numbers.
fn class_mismatch(t: &TraceFile, k: usize, meta: &KernelMeta, decoded: &[u64]) -> TraceError {
    let stored = &meta.counts.class_warp_insts;
    let what = match (0..decoded.len().max(stored.len())).find(|&i| decoded.get(i) != stored.get(i))
    {
        Some(i) if i < decoded.len() && i < stored.len() => {
            let name = OpClass::ALL.get(i).map_or("?", |c| c.name());
            format!(
                "{name} instructions decode to {}, index says {}",
                decoded[i], stored[i]
            )
        }
        _ => format!(
            "the class mix has {} entries in the index, expected {}",
            stored.len(),
            decoded.len()
        ),
    };
    TraceError::Corrupt {
        path: t.path().to_path_buf(),
        detail: format!("kernel {k} ({}): {what}", meta.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::AddrRecord;
    use crate::schema::Command;
    use crate::{OpcodeInfo, RawInst, TraceWriter, WriterOptions};

    /// Kinds of instruction in the little programs below.
    #[derive(Clone, Copy)]
    enum I {
        Alu,
        Bar(u32),
        Exit(u32),
        Ld(u64),
    }

    /// Writes one kernel of `grid` CTAs of 64 threads (2 warps); `warp(cta, w)` gives each
    /// warp's program. One 256-byte allocation at 0x1000 precedes the launch.
    fn write(
        grid: u32,
        listed: &[u32],
        warp: impl Fn(u32, u32) -> Vec<I>,
    ) -> (tempfile::TempDir, TraceFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tst");
        let mut w = TraceWriter::create(&path, WriterOptions::default()).unwrap();
        w.add_command(Command::Alloc {
            device: 0,
            addr: 0x1000,
            bytes: 256,
        })
        .unwrap();
        let k = w
            .begin_kernel(KernelMeta::new("k", [grid, 1, 1], [64, 1, 1]))
            .unwrap();
        w.add_command(Command::KernelLaunch {
            device: 0,
            kernel: k,
        })
        .unwrap();
        let alu = w
            .add_opcode(OpcodeInfo::simple("IADD3", OpClass::Int))
            .unwrap();
        let bar = w
            .add_opcode(OpcodeInfo::simple("BAR.SYNC", OpClass::Barrier))
            .unwrap();
        let exit = w
            .add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit))
            .unwrap();
        let ld = w
            .add_opcode(OpcodeInfo::simple("LDG.E", OpClass::LoadGlobal))
            .unwrap();
        for &c in listed {
            w.begin_cta([c, 0, 0], None).unwrap();
            for wi in 0..2 {
                w.begin_warp(wi).unwrap();
                for (n, i) in warp(c, wi).into_iter().enumerate() {
                    let pc = n as u32 * 16;
                    let (opcode, mask, mem_width, addrs, pc) = match i {
                        I::Alu => (alu, !0, 0, AddrRecord::None, pc),
                        I::Bar(at) => (bar, !0, 0, AddrRecord::None, at),
                        I::Exit(m) => (exit, m, 0, AddrRecord::None, pc),
                        I::Ld(a) => (ld, 1, 4, AddrRecord::Stride { base: a, stride: 0 }, pc),
                    };
                    w.push(&RawInst {
                        pc,
                        mask,
                        opcode,
                        dsts: &[],
                        srcs: &[],
                        mem_width,
                        imm: None,
                        line: None,
                        addrs,
                    })
                    .unwrap();
                }
                w.end_warp().unwrap();
            }
            w.end_cta().unwrap();
        }
        w.end_kernel().unwrap();
        w.finish().unwrap();
        let t = TraceFile::open(&path).unwrap();
        (dir, t)
    }

    fn msg(t: &TraceFile) -> String {
        verify(t).unwrap_err().to_string()
    }

    #[test]
    fn a_well_formed_program_passes() {
        let (_d, t) = write(2, &[0, 1], |_, _| {
            vec![I::Alu, I::Bar(0x40), I::Ld(0x10fc), I::Exit(!0)]
        });
        let r = verify(&t).unwrap();
        assert_eq!(r.checked_accesses, 4, "one lane per load, 2 warps x 2 CTAs");
    }

    #[test]
    fn a_missing_or_repeated_cta_fails() {
        let (_d, t) = write(3, &[0, 2], |_, _| vec![I::Exit(!0)]);
        assert!(msg(&t).contains("2 CTAs of a grid of 3"), "{}", msg(&t));
        let (_d, t) = write(2, &[1, 1], |_, _| vec![I::Exit(!0)]);
        assert!(msg(&t).contains("appears twice"), "{}", msg(&t));
    }

    #[test]
    fn lanes_that_never_exit_fail() {
        let (_d, t) = write(1, &[0], |_, w| {
            vec![I::Exit(if w == 1 { 0xffff } else { !0 })]
        });
        let m = msg(&t);
        assert!(m.contains("warp 1") && m.contains("not exited"), "{m}");
    }

    #[test]
    fn divergent_barriers_fail_but_early_exit_is_allowed() {
        // Warp 1 exits before the barrier: fine (exited warps count as arrived).
        let (_d, t) = write(1, &[0], |_, w| {
            if w == 1 {
                vec![I::Exit(!0)]
            } else {
                vec![I::Bar(0x40), I::Exit(!0)]
            }
        });
        verify(&t).unwrap();
        // Warp 1 passes a different barrier: an error.
        let (_d, t) = write(1, &[0], |_, w| {
            vec![I::Bar(if w == 1 { 0x80 } else { 0x40 }), I::Exit(!0)]
        });
        assert!(msg(&t).contains("same barriers"), "{}", msg(&t));
    }

    #[test]
    fn accesses_outside_allocations_fail() {
        let (_d, t) = write(1, &[0], |_, _| vec![I::Ld(0x10fe), I::Exit(!0)]);
        let m = msg(&t);
        assert!(
            m.contains("outside every allocation") && m.contains("0x10fe"),
            "{m}"
        );
        assert!(verify_structure(&t).is_ok());
    }
}
