//! `nw`: Needleman-Wunsch global alignment of two random DNA sequences as a wavefront of
//! tiles (Rodinia's `nw`, with the wavefront's dependencies expressed by completion flags
//! instead of one kernel launch per anti-diagonal: the pattern of
//! eltantawy-2018-inter-thread-synchronization-simt.txt section 6.4 and
//! dalmia-2023-synchronization-communication-overheads.txt chapter 4). The score matrix
//! has `N + 1` rows and columns (`N = tiles x tile`): `M[0][j] = -j * penalty`,
//! `M[i][0] = -i * penalty`, and `M[i][j] = max(M[i-1][j-1] + s(a[i-1], b[j-1]),
//! M[i-1][j] - penalty, M[i][j-1] - penalty)` with `s` = +5 for a match and -4 for a
//! mismatch. The interior is `tiles x tiles` tiles of `tile x tile` elements.
//!
//! One CTA per tile, in row-major order (CTA `c` is tile `(c / tiles, c % tiles)`): its
//! thread 0 spins until the north and west neighbours' completion flags are set (a spin
//! region: head two `LDG.E.STRONG.GPU`, one per flag, then `ISETP.GE` x2; exit when both
//! are at least 1; empty tail), then `__syncthreads()`. The flags are a `(tiles + 1)^2`
//! array whose first row and column (the matrix's borders) start at 1, so every tile
//! runs the same code; they are checked sync words (all 1 at the end). The CTA loads its
//! north boundary row (`tile + 1` elements, the corner included) and west column into
//! shared memory with the column's characters of `b`, each of its first `tile` threads
//! its row's character of `a`, and computes the tile anti-diagonal by anti-diagonal
//! (thread `t` owns the tile's row `t`; `2 x tile - 1` diagonals, a `__syncthreads()`
//! after each), writes the tile back row by row (lane = column), `__threadfence()`,
//! `__syncthreads()`, and thread 0 sets the tile's flag with `st.strong`. Scores are
//! held biased by 2^30 so that unsigned `IMNMX` orders them.
//!
//! The recorder runs every CTA at once (`resident_ctas` = grid). On a GPU that holds
//! fewer, the kernel still completes as long as CTAs are dispatched in order: a tile's
//! neighbours are earlier CTAs, already resident or done when it is dispatched, so a
//! spinning CTA never keeps one it waits for from being dispatched. The host reference
//! computes the whole matrix and compares it with the device's.
//!
//! Per warp: `MOV` (prologue), `S2R` x2, the tile's coordinates and corner, the flags'
//! addresses; for thread 0 the region; `BAR.SYNC`; the boundary loads (`LDG.E`, `STS`);
//! per diagonal `IADD3`, `ISETP` and, on the lanes on it, `LEA`, `LDS` x4 (diagonal, up,
//! left, the column's character), `ISETP`, `SEL`, `IADD3`, `IMNMX`, `IADD3`, `IMNMX`,
//! `STS`, then `BAR.SYNC`; per row of the write-back `LDS`, `STG.E`; `MEMBAR.SC.GPU`,
//! `BAR.SYNC`; for thread 0 `STG.E.STRONG.GPU`; `EXIT`.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Cmp, Exit, LaunchSpec, Recorder, SharedArr, SyncCmp, Val, WARP};
use tessera_traces::schema::RZ;
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "nw",
    help: "Needleman-Wunsch wavefront of tiles, one CTA per tile spinning on its north and west neighbours' completion flags",
    params: &[
        ParamSpec { name: "tiles", default: "8", help: "tiles per side of the score matrix (at most 32; tiles^2 CTAs, all resident in the recorder)" },
        ParamSpec { name: "tile", default: "16", help: "elements per tile side (at most 64, less than block)" },
        ParamSpec { name: "block", default: "64", help: "threads per CTA (a multiple of 32, more than tile)" },
        ParamSpec { name: "penalty", default: "4", help: "gap penalty (at most 1000)" },
        ParamSpec { name: "seed", default: "1", help: "sequence generator seed" },
        ParamSpec { name: "backoff", default: "0", help: "spin back-off base in core cycles, doubling up to 32x (0: none)" },
    ],
    run,
};

/// Similarity of two equal and two different characters.
const MATCH: i64 = 5;
const MISMATCH: i64 = -4;
/// Scores are held as `score + BIAS`, non-negative, so unsigned max orders them.
const BIAS: i64 = 1 << 30;

/// The device's matrix and flags, and the reference's matrix.
pub(crate) struct Outcome {
    pub scores: Vec<i64>,
    pub want: Vec<i64>,
    pub flags: Vec<u32>,
}

/// The score matrix of `a` against `b`, `(a.len() + 1) x (b.len() + 1)`, row-major.
pub(crate) fn reference(a: &[u32], b: &[u32], penalty: i64) -> Vec<i64> {
    let w = b.len() + 1;
    let mut m = vec![0i64; (a.len() + 1) * w];
    for (j, x) in m.iter_mut().take(w).enumerate() {
        *x = -(j as i64) * penalty;
    }
    for i in 1..=a.len() {
        m[i * w] = -(i as i64) * penalty;
        for j in 1..w {
            let s = if a[i - 1] == b[j - 1] {
                MATCH
            } else {
                MISMATCH
            };
            m[i * w + j] = (m[(i - 1) * w + j - 1] + s)
                .max(m[(i - 1) * w + j] - penalty)
                .max(m[i * w + j - 1] - penalty);
        }
    }
    m
}

pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let tiles = p.u32("tiles")?;
    let tt = p.u32("tile")?;
    let block = p.u32("block")?;
    let penalty = p.u64_any("penalty")?;
    let base = u32::try_from(p.u64_any("backoff")?)
        .map_err(|_| p.invalid("backoff must fit in 32 bits"))?;
    let backoff = (base, base.saturating_mul(32));
    if block % 32 != 0 || block > 1024 {
        return Err(p.invalid("block must be a multiple of 32 from 32 to 1024"));
    }
    if tiles > 32 {
        return Err(p.invalid("tiles must be at most 32"));
    }
    if tt > 64 || tt >= block {
        return Err(p.invalid("tile must be at most 64 and less than block"));
    }
    if penalty > 1000 {
        return Err(p.invalid("penalty must be at most 1000"));
    }
    let penalty = penalty as u32;
    let n = tiles * tt;
    let width = n + 1;
    let mut rng = SplitMix64(p.u64_any("seed")?);
    let seq_a: Vec<u32> = (0..n).map(|_| rng.below(4) as u32).collect();
    let seq_b: Vec<u32> = (0..n).map(|_| rng.below(4) as u32).collect();
    // The matrix with its borders; the interior is the kernel's.
    let cells = u64::from(width) * u64::from(width);
    let mut init = vec![0u32; cells as usize];
    for k in 0..width as usize {
        let edge = (BIAS - k as i64 * i64::from(penalty)) as u32;
        init[k] = edge;
        init[k * width as usize] = edge;
    }
    let fw = tiles + 1;
    let mut flags_init = vec![0u32; (fw * fw) as usize];
    for k in 0..fw as usize {
        flags_init[k] = 1;
        flags_init[k * fw as usize] = 1;
    }
    let a_buf = rec.alloc::<u32>("seq_a", u64::from(n))?;
    let b_buf = rec.alloc::<u32>("seq_b", u64::from(n))?;
    let score = rec.alloc::<u32>("score", cells)?;
    let flags = rec.alloc::<u32>("flags", u64::from(fw * fw))?;
    rec.upload(a_buf, &seq_a)?;
    rec.upload(b_buf, &seq_b)?;
    rec.upload(score, &init)?;
    rec.upload(flags, &flags_init)?;
    rec.sync_words(flags, true)?;
    let temp = SharedArr::<u32>::new(0, (tt + 1) * (tt + 1));
    let sb = SharedArr::<u32>::new(temp.end(), tt);
    let ctas = tiles * tiles;
    let mut spec = LaunchSpec::new("_Z11nw_wavefrontPKjS0_PjS1_jj", [ctas, 1, 1], [block, 1, 1]);
    spec.shmem_bytes = sb.end();
    // A tile waits for earlier ones only; the recorder runs them all at once anyway.
    spec.resident_ctas = ctas;
    let whole = ArrayAnnotation::whole;
    spec.annotations = vec![
        whole("seq_a", a_buf.base, a_buf.bytes(), Access::Read),
        whole("seq_b", b_buf.base, b_buf.bytes(), Access::Read),
        whole("score", score.base, score.bytes(), Access::ReadWrite),
        whole("flags", flags.base, flags.bytes(), Access::ReadWrite),
    ];
    rec.launch(&spec, &|w| {
        let t = w.tid(0);
        let c = w.ctaid(0);
        let ti = w.div_imm(&c, tiles);
        let tj = w.rem_imm(&c, tiles);
        let leader = w.icmp_imm(Cmp::Eq, &t, 0);
        let in_tile = w.icmp_imm(Cmp::Lt, &t, tt);
        // The tile's corner (north-west boundary element) and first column.
        let row0 = w.imul_imm(&ti, tt * width);
        let col0 = w.imul_imm(&tj, tt);
        let corner = w.iadd(&row0, &col0);
        // Flags: the tile's own at (ti + 1, tj + 1) of the (tiles + 1)^2 array.
        let f = w.iadd(&c, &ti);
        let own = w.iadd_imm(&f, tiles + 2);
        let fa = w.addr(&flags, &own);
        w.if_(leader, |w| {
            let north = w.iadd_imm(&own, fw.wrapping_neg());
            let west = w.iadd_imm(&own, u32::MAX);
            let na = w.addr(&flags, &north);
            let wa = w.addr(&flags, &west);
            w.spin(
                "neighbour tiles done",
                backoff,
                |w| {
                    w.ld_strong(&na);
                    w.ld_strong(&wa);
                    Exit::when_imm(0, SyncCmp::Ge, 1).and_imm(1, SyncCmp::Ge, 1)
                },
                |_| {},
            );
        });
        w.barrier();
        // The north boundary row, corner included: temp[0][k] = M[corner + k].
        let on_row = w.icmp_imm(Cmp::Le, &t, tt);
        w.if_(on_row, |w| {
            let g = w.iadd(&corner, &t);
            let v = w.load(&score, &g);
            let s = w.shared_addr(&temp, &t);
            w.sts(&s, &v);
        });
        // The west boundary column, the column characters and the row's character.
        let mut ra = Val {
            v: [0u32; WARP],
            reg: RZ,
        };
        w.if_(in_tile, |w| {
            let t1 = w.iadd_imm(&t, 1);
            let g = w.imad_imm(&t1, width, &corner);
            let v = w.load(&score, &g);
            let si = w.imul_imm(&t1, tt + 1);
            let s = w.shared_addr(&temp, &si);
            w.sts(&s, &v);
            let jb = w.iadd(&col0, &t);
            let b = w.load(&b_buf, &jb);
            let s = w.shared_addr(&sb, &t);
            w.sts(&s, &b);
            let ia = w.imad_imm(&ti, tt, &t);
            ra = w.load(&a_buf, &ia);
        });
        w.barrier();
        // The anti-diagonals: thread t computes row t + 1, column d - t + 1 of the tile
        // (1-based, row and column 0 the boundaries) when 0 <= d - t < tile.
        let kmatch = w.konst(MATCH as u32);
        let kmis = w.konst(MISMATCH as u32);
        let far = w.konst(1u32 << 16);
        let zero = w.konst(0u32);
        let te = w.sel(in_tile, &t, &far);
        let neg = w.isub(&zero, &te);
        let tr = w.imul_imm(&t, tt);
        w.for_range(2 * tt - 1, |w, d| {
            let dt = w.iadd_imm(&neg, d);
            let on = w.icmp_imm(Cmp::Lt, &dt, tt);
            w.if_(on, |w| {
                // temp[t][d - t], the diagonal neighbour, at t * tile + d.
                let i = w.iadd_imm(&tr, d);
                let a_d = w.shared_addr(&temp, &i);
                let diag = w.lds::<u32>(&a_d);
                let a_u = w.iadd_imm(&a_d, 4);
                let up = w.lds::<u32>(&a_u);
                let a_l = w.iadd_imm(&a_d, 4 * (tt + 1));
                let left = w.lds::<u32>(&a_l);
                let a_b = w.shared_addr(&sb, &dt);
                let cb = w.lds::<u32>(&a_b);
                let eq = w.icmp(Cmp::Eq, &ra, &cb);
                let s = w.sel(eq, &kmatch, &kmis);
                let v1 = w.iadd(&diag, &s);
                let m = w.imax(&up, &left);
                let v2 = w.iadd_imm(&m, penalty.wrapping_neg());
                let v = w.imax(&v1, &v2);
                let a_c = w.iadd_imm(&a_d, 4 * (tt + 2));
                w.sts(&a_c, &v);
            });
            w.barrier();
        });
        // The write-back, row by row, lane = column.
        w.if_(in_tile, |w| {
            let t1 = w.iadd_imm(&t, 1);
            let g0 = w.iadd(&corner, &t1);
            let s0 = w.shared_addr(&temp, &t1);
            w.for_range(tt, |w, r| {
                let s = w.iadd_imm(&s0, 4 * (r + 1) * (tt + 1));
                let v = w.lds::<u32>(&s);
                let g = w.iadd_imm(&g0, (r + 1) * width);
                w.store(&score, &g, &v);
            });
        });
        w.fence_gpu();
        w.barrier();
        w.if_(leader, |w| {
            let one = w.konst(1u32);
            w.st_strong(&fa, &one);
        });
    })?;
    let scores = rec
        .download(score)?
        .into_iter()
        .map(|v| i64::from(v) - BIAS)
        .collect();
    Ok(Outcome {
        scores,
        want: reference(&seq_a, &seq_b, i64::from(penalty)),
        flags: rec.download(flags)?,
    })
}

/// The host reference: the device's matrix is the reference's, every flag is set.
pub(crate) fn check(o: &Outcome) -> Result<(), GenError> {
    check_eq("nw", "flags", &o.flags, &vec![1; o.flags.len()])?;
    check_eq("nw", "score matrix", &o.scores, &o.want)
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check(&o)?;
    let n = p.u32("tiles")? * p.u32("tile")?;
    Ok(format!(
        "{n} x {n} alignment in {} tiles, score {} (the host reference's matrix), every tile's flag set",
        p.u32("tiles")?.pow(2),
        o.scores.last().copied().unwrap_or(0)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::{param_error, params};
    use tessera_traces::TraceFile;

    #[test]
    fn the_reference_aligns_by_hand() {
        // "GA" against "GC" (codes A 0, C 1, G 2, T 3), penalty 2, by hand.
        let m = reference(&[2, 0], &[2, 1], 2);
        // Row 1: G vs G = max(0 + 5, -2 - 2, -2 - 2) = 5; G vs C = max(-2 - 4, -4 - 2, 5 - 2) = 3.
        // Row 2: A vs G = max(-2 - 4, 5 - 2, -4 - 2) = 3; A vs C = max(5 - 4, 3 - 2, 3 - 2) = 1.
        assert_eq!(m, [0, -2, -4, -2, 5, 3, -4, 3, 1]);
    }

    #[test]
    fn the_wavefront_matches_the_reference_and_sets_every_flag() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nw.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let args = params(&[("tiles", "5"), ("tile", "8"), ("block", "32")]);
        let p = Params::parse(&SPEC, &args).unwrap();
        let o = compute(&p, &mut rec).unwrap();
        assert_eq!(rec.stats.warp_thread_allocs, 0);
        rec.finish().unwrap();
        check(&o).unwrap();
        assert_eq!(o.scores.len(), 41 * 41);
        let t = TraceFile::open(&path).unwrap();
        tessera_traces::verify(&t).unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.counts.ctas, 25);
        assert_eq!(k.spin_regions.len(), 1);
        let r = &k.spin_regions[0];
        assert_eq!(r.terms.len(), 2);
        assert!(r.all);
        assert!(r.terms.iter().all(|x| x.cmp == SyncCmp::Ge));
        assert_eq!((r.terms[0].value, r.terms[1].value), (0, 1));
        // The flags: borders set before, every one set after.
        let sw = &t.index().sync_words;
        assert_eq!(sw.len(), 1);
        assert_eq!(sw[0].init.iter().filter(|&&f| f == 1).count(), 11);
        assert_eq!(sw[0].expect, vec![1; 36]);
        // Each CTA's leader tests for 1 on both flags, and sets its own with one strong
        // store.
        let mut dec = t.decoder();
        for c in [0u32, 13, 24] {
            let d = dec.kernel_cta(0, c).unwrap().clone();
            let first = d.warps[0].insts.start;
            let test = d.warp(0).iter().position(|i| i.pc == r.test_pc).unwrap();
            assert_eq!(d.warp(0)[test].mask, 1);
            assert_eq!(d.operands_of(first + test, 2).unwrap(), [1, 1]);
            let strong = d
                .warp(0)
                .iter()
                .filter(|i| {
                    k.opcodes[k.statics[i.slot as usize].opcode as usize].name == "STG.E.STRONG.GPU"
                })
                .count();
            assert_eq!(strong, 1);
        }
    }

    /// Tiles wider than a warp: two warps compute each diagonal.
    #[test]
    fn tiles_wider_than_a_warp_match_the_reference() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.tst");
        let args = params(&[
            ("tiles", "3"),
            ("tile", "40"),
            ("block", "64"),
            ("seed", "7"),
        ]);
        let r = crate::workloads::generate("nw", &args, 80, &path).unwrap();
        assert_eq!(r.stats.warp_thread_allocs, 0);
        assert!(r.summary.contains("120 x 120"), "{}", r.summary);
    }

    #[test]
    fn parameters_are_checked() {
        let m = param_error("nw", &[("tile", "64"), ("block", "64")]);
        assert!(m.contains("less than block"), "{m}");
        let m = param_error("nw", &[("tiles", "33")]);
        assert!(m.contains("at most 32"), "{m}");
        let m = param_error("nw", &[("penalty", "1001")]);
        assert!(m.contains("penalty"), "{m}");
    }
}
