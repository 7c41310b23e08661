//! `warp_specialized`: producer/consumer warp specialization within a CTA with named
//! barriers, CUDA's idiom for it (`bar.arrive` / `bar.sync` with an id and a thread
//! count). The CTA's first `producers` warps load a tile of the input from global memory
//! into a shared buffer and arrive at the "full" barrier 1 (`BAR.ARV 1, block`); the
//! other warps, the consumers, wait on it (`BAR.SYNC 1, block`), read the tile, scale it
//! (`x * 3 + round`) into the output and arrive at the "empty" barrier 2 (`BAR.ARV 2,
//! block`), on which the producers wait (`BAR.SYNC 2, block`) before they overwrite the
//! buffer with the next round's tile. Each barrier completes when all `block` threads
//! have arrived: the arriving side's warps and the waiting side's.
//!
//! Per warp: `S2R` (t), `S2R` (ctaid), `IMAD` (the CTA's base), two `ISETP`s (producer,
//! consumer); then, in the producers' `BSSY`/`BRA`/`BSYNC` region, per round: per
//! element of the tile the thread moves `IADD3`s, `IMAD.WIDE`, `LDG.E`, `LEA`, `STS`,
//! then `BAR.ARV 1` and `BAR.SYNC 2` and the loop's `IADD3`, `ISETP`, `BRA`; and in the
//! consumers' region, per round `BAR.SYNC 1`, per element `LEA`, `LDS`, `IMAD`,
//! `IADD3`, `IMAD.WIDE`, `STG.E`, then `BAR.ARV 2` and the loop's instructions; `EXIT`.
//! The kernel's metadata lists the four barrier instructions as named barriers.
//!
//! With `sync=mbarrier` the tiles are handed over through two mbarrier objects per CTA
//! instead (Hopper's split arrive/wait barriers, `cuda::barrier`; the kernel is recorded
//! for binary version 90, whose SASS has them, whatever the recording's arch): "full"
//! (mbarrier 0, expecting the producer threads' arrivals) and "empty" (mbarrier 1,
//! expecting the consumer threads'). Thread 0 initializes both (`SYNCS.EXCH.64`, in a
//! `BSSY`/`BRA`/`BSYNC` region after the two `ISETP`s and an `ISETP` for t == 0), then
//! the CTA barrier (`BAR.SYNC`). Per round `r` the producers wait for phase `r - 1` of
//! "empty" (`SYNCS.PHASECHK.TRANS64.TRYWAIT`, from the second round on: the consumers
//! have read the previous tile), load and store the tile as above and arrive at "full"
//! (`SYNCS.ARRIVE.TRANS64.A1T0`); the consumers wait for phase `r` of "full", move the
//! tile as above and arrive at "empty". The kernel's metadata lists the six mbarrier
//! instructions (two inits, two arrives, two waits) and no named barrier.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Cmp, LaunchSpec, Recorder, SharedArr};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "warp_specialized",
    help: "producer/consumer warps of a CTA handing tiles through shared memory with named barriers (BAR.ARV / BAR.SYNC id, n) or mbarriers (sm_90 SYNCS)",
    params: &[
        ParamSpec { name: "producers", default: "2", help: "producer warps per CTA (the rest consume)" },
        ParamSpec { name: "block", default: "128", help: "threads per CTA (a multiple of 32)" },
        ParamSpec { name: "ctas", default: "8", help: "CTAs" },
        ParamSpec { name: "rounds", default: "4", help: "tiles each CTA moves" },
        ParamSpec { name: "tile", default: "128", help: "elements per tile (a multiple of the producer and consumer threads)" },
        ParamSpec { name: "seed", default: "1", help: "input generator seed" },
        ParamSpec { name: "sync", default: "named", help: "hand-over: named (BAR.ARV / BAR.SYNC) or mbarrier (full and empty mbarriers; the kernel is recorded as sm_90)" },
    ],
    run,
};

/// The "full" barrier (producers arrive, consumers wait) and the "empty" one.
pub(crate) const FULL: u32 = 1;
pub(crate) const EMPTY: u32 = 2;
/// With `sync=mbarrier`: the "full" mbarrier (producers arrive, consumers wait) and the
/// "empty" one.
pub(crate) const MBAR_FULL: u32 = 0;
pub(crate) const MBAR_EMPTY: u32 = 1;

/// The device's output and the reference's.
pub(crate) struct Outcome {
    pub got: Vec<u32>,
    pub want: Vec<u32>,
}

/// The host reference: element `e` of round `r`'s tile becomes `x * 3 + r`.
pub(crate) fn reference(input: &[u32], rounds: u32, tile: u32) -> Vec<u32> {
    input
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let r = (i as u64 / tile as u64 % rounds as u64) as u32;
            x.wrapping_mul(3).wrapping_add(r)
        })
        .collect()
}

pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let producers = p.u32("producers")?;
    let block = p.u32("block")?;
    let ctas = p.u32("ctas")?;
    let rounds = p.u32("rounds")?;
    let tile = p.u32("tile")?;
    let mbar = p.choice("sync", &["named", "mbarrier"])? == "mbarrier";
    if !block.is_multiple_of(32) || block > 1024 {
        return Err(p.invalid("block must be a multiple of 32 up to 1024"));
    }
    if producers >= block / 32 {
        return Err(p.invalid("producers must leave at least one consumer warp"));
    }
    let pt = producers * 32;
    let ct = block - pt;
    if !tile.is_multiple_of(pt) || !tile.is_multiple_of(ct) {
        return Err(p.invalid(
            "tile must be a multiple of the producer threads and of the consumer threads",
        ));
    }
    let total = ctas as u64 * rounds as u64 * tile as u64;
    if total > 1 << 28 {
        return Err(p.invalid("ctas * rounds * tile must be at most 2^28 elements"));
    }
    if tile as u64 * 4 > 227 * 1024 {
        return Err(p.invalid("the tile must fit in shared memory"));
    }
    let mut rng = SplitMix64(p.u64_any("seed")?);
    let input: Vec<u32> = (0..total).map(|_| rng.next_u64() as u32).collect();
    let x = rec.alloc::<u32>("in", total)?;
    let y = rec.alloc::<u32>("out", total)?;
    rec.upload(x, &input)?;
    let mut spec = LaunchSpec::new("_Z16warp_specializedPKjPjjj", [ctas, 1, 1], [block, 1, 1]);
    spec.shmem_bytes = tile * 4;
    let sh = SharedArr::<u32>::new(0, tile);
    if mbar {
        // SYNCS exists in sm_90's SASS only.
        spec.binary_version = Some(90);
    }
    rec.launch(&spec, &|w| {
        let t = w.tid(0);
        let c = w.ctaid(0);
        let zero = w.konst(0u32);
        let cta_base = w.imad_imm(&c, rounds * tile, &zero);
        let is_producer = w.icmp_imm(Cmp::Lt, &t, pt);
        let is_consumer = w.icmp_imm(Cmp::Ge, &t, pt);
        if mbar {
            let first = w.icmp_imm(Cmp::Eq, &t, 0);
            w.if_(first, |w| {
                w.mbar_init(MBAR_FULL, pt);
                w.mbar_init(MBAR_EMPTY, ct);
            });
            w.barrier();
        }
        w.if_(is_producer, |w| {
            w.for_range(rounds, |w, r| {
                if mbar && r > 0 {
                    // The consumers have read the previous round's tile.
                    w.mbar_wait(MBAR_EMPTY, r - 1);
                }
                let base = w.iadd_imm(&cta_base, r * tile);
                for k in 0..tile / pt {
                    let e = w.iadd_imm(&t, k * pt);
                    let g = w.iadd(&base, &e);
                    let v = w.load(&x, &g);
                    let a = w.shared_addr(&sh, &e);
                    w.sts(&a, &v);
                }
                if mbar {
                    w.mbar_arrive(MBAR_FULL);
                } else {
                    w.bar_arrive(FULL, block);
                    w.bar_sync(EMPTY, block);
                }
            });
        });
        w.if_(is_consumer, |w| {
            let u = w.iadd_imm(&t, pt.wrapping_neg());
            w.for_range(rounds, |w, r| {
                if mbar {
                    w.mbar_wait(MBAR_FULL, r);
                } else {
                    w.bar_sync(FULL, block);
                }
                let base = w.iadd_imm(&cta_base, r * tile);
                let round = w.konst(r);
                for k in 0..tile / ct {
                    let e = w.iadd_imm(&u, k * ct);
                    let a = w.shared_addr(&sh, &e);
                    let v = w.lds::<u32>(&a);
                    let s = w.imad_imm(&v, 3, &round);
                    let g = w.iadd(&base, &e);
                    w.store(&y, &g, &s);
                }
                if mbar {
                    w.mbar_arrive(MBAR_EMPTY);
                } else {
                    w.bar_arrive(EMPTY, block);
                }
            });
        });
    })?;
    Ok(Outcome {
        got: rec.download(y)?,
        want: reference(&input, rounds, tile),
    })
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check_eq("warp_specialized", "out", &o.got, &o.want)?;
    Ok(format!(
        "{} elements moved through {} verified",
        o.got.len(),
        if p.str("sync")? == "mbarrier" {
            "mbarriers"
        } else {
            "named barriers"
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordError;
    use crate::workloads::test_support::{param_error, params};
    use tessera_traces::{MBarrierKind, NamedBarrier, OpClass, TraceFile};

    #[test]
    fn reference_scales_each_round() {
        let input = [1u32, 2, 3, 4, 5, 6, 7, 8];
        // Two CTAs of two rounds of two elements.
        assert_eq!(reference(&input, 2, 2), vec![3, 6, 10, 13, 15, 18, 22, 25]);
        assert_eq!(reference(&[u32::MAX], 1, 1), vec![u32::MAX.wrapping_mul(3)]);
    }

    fn record(kv: &[(&str, &str)]) -> (tempfile::TempDir, Outcome) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let p = Params::parse(&SPEC, &params(kv)).unwrap();
        let o = compute(&p, &mut rec).unwrap();
        // Barrier state is made on the scheduler's thread: warp threads allocate nothing.
        assert_eq!(rec.stats.warp_thread_allocs, 0);
        rec.finish().unwrap();
        (dir, o)
    }

    #[test]
    fn outputs_match_and_the_named_barriers_are_listed() {
        let (dir, o) = record(&[]);
        assert_eq!(o.got, o.want);
        assert_eq!(o.got.len(), 8 * 4 * 128);
        let t = TraceFile::open(&dir.path().join("w.tst")).unwrap();
        let k = &t.kernels()[0];
        let mut bars: Vec<(u8, u32, bool)> = k
            .named_barriers
            .iter()
            .map(|b: &NamedBarrier| (b.id, b.threads, b.arrive))
            .collect();
        bars.sort_unstable();
        assert_eq!(
            bars,
            vec![
                (1, 128, false),
                (1, 128, true),
                (2, 128, false),
                (2, 128, true)
            ]
        );
        // Each entry sits at a barrier instruction: BAR.ARV for arrivals, BAR.SYNC else.
        for b in &k.named_barriers {
            let s = k.statics.iter().find(|s| s.pc == b.pc).unwrap();
            let op = &k.opcodes[s.opcode as usize];
            assert_eq!(op.class, OpClass::Barrier);
            assert_eq!(op.name, if b.arrive { "BAR.ARV" } else { "BAR.SYNC" });
        }
        // Producers and consumers meet different barriers: the semantic check holds
        // the whole-CTA barrier only.
        tessera_traces::verify(&t).unwrap();
        // Every warp meets two barrier instructions per round.
        let warps = 8 * 4u64;
        assert_eq!(
            k.counts.class_warp_insts[OpClass::Barrier as usize],
            warps * 4 * 2
        );
    }

    /// `sync=mbarrier`: the same output through full and empty mbarriers, recorded as
    /// sm_90 (whatever the recording's arch), six mbarrier entries and no named barrier.
    #[test]
    fn mbarrier_hand_over_matches_and_is_listed() {
        let (dir, o) = record(&[("sync", "mbarrier")]);
        assert_eq!(o.got, o.want);
        let t = TraceFile::open(&dir.path().join("w.tst")).unwrap();
        tessera_traces::verify(&t).unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.binary_version, 90);
        assert!(k.named_barriers.is_empty());
        let mut mb: Vec<(u8, &str)> = k.mbarriers.iter().map(|m| (m.id, m.kind.name())).collect();
        mb.sort_unstable();
        assert_eq!(
            mb,
            vec![
                (0, "arrive"),
                (0, "init"),
                (0, "wait"),
                (1, "arrive"),
                (1, "init"),
                (1, "wait")
            ]
        );
        for m in &k.mbarriers {
            let s = k.statics.iter().find(|s| s.pc == m.pc).unwrap();
            let op = &k.opcodes[s.opcode as usize];
            assert_eq!(op.class, OpClass::Other);
            assert!(op.name.starts_with("SYNCS."), "{}", op.name);
        }
        // Thread 0 initializes "full" with the producer threads and "empty" with the
        // consumer threads; consumers wait for phases 0 to 3 of "full", producers for 0
        // to 2 of "empty".
        let pc_of = |id: u8, kind: MBarrierKind| {
            k.mbarriers
                .iter()
                .find(|m| m.id == id && m.kind == kind)
                .unwrap()
                .pc
        };
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 2).unwrap().clone();
        let firsts = |w: usize, pc: u32| -> Vec<u64> {
            let first = d.warps[w].insts.start;
            d.warp(w)
                .iter()
                .enumerate()
                .filter(|(_, i)| i.pc == pc)
                .map(|(j, _)| d.operands_of(first + j, 1).unwrap()[0])
                .collect()
        };
        assert_eq!(firsts(0, pc_of(0, MBarrierKind::Init)), [64]);
        assert_eq!(firsts(0, pc_of(1, MBarrierKind::Init)), [64]);
        assert_eq!(firsts(1, pc_of(1, MBarrierKind::Wait)), [0, 1, 2]);
        assert_eq!(firsts(1, pc_of(0, MBarrierKind::Arrive)), [1; 4]);
        assert_eq!(firsts(3, pc_of(0, MBarrierKind::Wait)), [0, 1, 2, 3]);
        assert_eq!(firsts(3, pc_of(1, MBarrierKind::Arrive)), [1; 4]);
        // Other shapes: one producer warp of seven.
        let (_d, o) = record(&[
            ("sync", "mbarrier"),
            ("producers", "1"),
            ("block", "256"),
            ("ctas", "3"),
            ("rounds", "5"),
            ("tile", "224"),
        ]);
        assert_eq!(o.got, o.want);
    }

    /// A kernel's metadata with the header text cleared and the opcode table sorted by
    /// name (the recorder's order is its warps' interleaving), and its decoded CTAs.
    fn content(t: &TraceFile) -> Vec<(String, Vec<tessera_traces::DecodedCta>)> {
        let mut dec = t.decoder();
        let mut out = Vec::new();
        for (k, m) in t.kernels().iter().enumerate() {
            let mut meta = tessera_traces::KernelMeta {
                header_text: String::new(),
                ..m.clone()
            };
            let mut order: Vec<usize> = (0..meta.opcodes.len()).collect();
            order.sort_by(|&a, &b| meta.opcodes[a].name.cmp(&meta.opcodes[b].name));
            let mut new_of = vec![0u16; order.len()];
            for (i, &o) in order.iter().enumerate() {
                new_of[o] = i as u16;
            }
            meta.opcodes = order.iter().map(|&o| meta.opcodes[o].clone()).collect();
            for st in &mut meta.statics {
                st.opcode = new_of[st.opcode as usize];
            }
            let ctas = (0..m.counts.ctas as u32)
                .map(|c| dec.kernel_cta(k, c).unwrap().clone())
                .collect();
            out.push((format!("{meta:?}"), ctas));
        }
        out
    }

    /// `-tessera mbar` header lines carry the mbarrier entries through Accel-Sim text:
    /// the imported trace has the same metadata, CTAs and operands, and exports to the
    /// same text.
    #[test]
    fn mbarriers_round_trip_through_accel_sim_text() {
        let (dir, _o) = record(&[("sync", "mbarrier"), ("ctas", "2")]);
        let a = dir.path().join("w.tst");
        let ex1 = dir.path().join("ex1");
        let ex2 = dir.path().join("ex2");
        let b = dir.path().join("b.tst");
        crate::accelsim::export_dir(&a, &ex1).unwrap();
        let header = std::fs::read_to_string(ex1.join("kernel-1.traceg")).unwrap();
        assert_eq!(header.matches("-tessera mbar = 0x").count(), 6, "{header}");
        assert!(header.contains("-binary version = 90"));
        crate::accelsim::import_dir(&ex1, &b, &Default::default()).unwrap();
        crate::accelsim::export_dir(&b, &ex2).unwrap();
        for f in std::fs::read_dir(&ex1).unwrap() {
            let f = f.unwrap().file_name();
            assert_eq!(
                std::fs::read(ex1.join(&f)).unwrap(),
                std::fs::read(ex2.join(&f)).unwrap(),
                "{f:?} differs after a round trip"
            );
        }
        let (ta, tb) = (TraceFile::open(&a).unwrap(), TraceFile::open(&b).unwrap());
        tessera_traces::verify(&tb).unwrap();
        assert_eq!(ta.kernels()[0].mbarriers, tb.kernels()[0].mbarriers);
        assert_eq!(ta.kernels()[0].mbarriers.len(), 6);
        let (ca, cb) = (content(&ta), content(&tb));
        assert_eq!(ca.len(), cb.len());
        for ((ma, xa), (mb, xb)) in ca.iter().zip(&cb) {
            assert_eq!(ma, mb, "kernel metadata differs");
            assert!(xa == xb, "decoded CTAs differ");
        }
    }

    /// The default's generator text is the one recorded before `sync` existed.
    #[test]
    fn the_default_generator_text_is_unchanged() {
        let p = Params::parse(&SPEC, &[]).unwrap();
        assert_eq!(
            p.describe(),
            "warp_specialized block=128 ctas=8 producers=2 rounds=4 seed=1 tile=128"
        );
        let p = Params::parse(&SPEC, &params(&[("sync", "mbarrier")])).unwrap();
        assert!(p.describe().ends_with(" sync=mbarrier tile=128"));
    }

    #[test]
    fn other_shapes_match() {
        let (_d, o) = record(&[
            ("producers", "1"),
            ("block", "256"),
            ("ctas", "3"),
            ("rounds", "5"),
            ("tile", "224"),
        ]);
        assert_eq!(o.got, o.want);
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(param_error("warp_specialized", &[("producers", "4")]).contains("consumer"));
        assert!(param_error("warp_specialized", &[("tile", "100")]).contains("multiple"));
        assert!(param_error("warp_specialized", &[("sync", "bar")]).contains("named, mbarrier"));
    }

    /// A barrier id of 16 or a thread count that is no multiple of 32 fails the
    /// recording, naming the kernel, CTA and warp.
    #[test]
    fn misuse_is_a_recording_error() {
        for (id, threads, want) in [
            (16, 64, "BAR.SYNC 16, 64"),
            (1, 48, "BAR.SYNC 1, 48"),
            (1, 96, "up to the CTA's 64"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut rec = Recorder::create(&dir.path().join("x.tst"), 80, "test").unwrap();
            let spec = LaunchSpec::new("bad", [2, 1, 1], [64, 1, 1]);
            let e = rec
                .launch(&spec, &|w| {
                    w.bar_sync(id, threads);
                })
                .unwrap_err();
            match &e {
                RecordError::Kernel {
                    kernel,
                    cta,
                    warp,
                    msg,
                } => {
                    assert_eq!((kernel.as_str(), *cta, *warp), ("bad", [0, 0, 0], 0));
                    assert!(msg.contains(want), "{msg}");
                }
                other => panic!("{other:?}"),
            }
            assert!(
                e.to_string().contains("kernel bad: CTA (0,0,0) warp 0"),
                "{e}"
            );
        }
    }

    /// `BAR.ARV` does not wait and `BAR.SYNC` does: a waiting warp sees the value an
    /// arriving warp stored before it arrived, whatever order they run in.
    #[test]
    fn sync_waits_for_arrivals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let out = rec.alloc::<u32>("out", 4).unwrap();
        let mut spec = LaunchSpec::new("order", [1, 1, 1], [128, 1, 1]);
        spec.shmem_bytes = 4;
        let sh = SharedArr::<u32>::new(0, 1);
        rec.launch(&spec, &|w| {
            let zero = w.konst(0u32);
            let a = w.shared_addr(&sh, &zero);
            if w.warp == 3 {
                let v = w.konst(7u32);
                w.sts(&a, &v);
                w.bar_arrive(5, 128);
            } else {
                w.bar_sync(5, 128);
            }
            let v = w.lds::<u32>(&a);
            let i = w.konst(w.warp);
            w.store(&out, &i, &v);
        })
        .unwrap();
        assert_eq!(rec.download(out).unwrap(), vec![7; 4]);
        rec.finish().unwrap();
        assert!(TraceFile::open(&path).is_ok());
    }

    /// With a thread count of 0 the barrier waits for every unfinished warp: a warp
    /// that exited does not hold the others.
    #[test]
    fn whole_cta_named_barrier_skips_exited_warps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let spec = LaunchSpec::new("all", [2, 1, 1], [128, 1, 1]);
        rec.launch(&spec, &|w| {
            if w.warp == 1 {
                w.exit();
                return;
            }
            w.bar_sync(3, 0);
            w.bar_sync(3, 0);
        })
        .unwrap();
        rec.finish().unwrap();
        let t = TraceFile::open(&path).unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.named_barriers.len(), 2);
        assert!(k
            .named_barriers
            .iter()
            .all(|b| (b.id, b.threads, b.arrive) == (3, 0, false)));
    }

    /// A call site must name the same barrier every time it runs.
    #[test]
    fn a_call_site_naming_two_barriers_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::create(&dir.path().join("x.tst"), 80, "test").unwrap();
        let spec = LaunchSpec::new("two", [1, 1, 1], [64, 1, 1]);
        let e = rec
            .launch(&spec, &|w| {
                let id = 1 + w.warp;
                w.bar_arrive(id, 64);
            })
            .unwrap_err();
        assert!(e.to_string().contains("changed between runs"), "{e}");
    }

    /// A named barrier whose count is never reached is the executor's deadlock error,
    /// however long the kernel (waiting warps do not spin).
    #[test]
    fn an_unreachable_count_is_a_deadlock() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::create(&dir.path().join("x.tst"), 80, "test").unwrap();
        let spec = LaunchSpec::new("short", [1, 1, 1], [128, 1, 1]);
        let e = rec
            .launch(&spec, &|w| {
                if w.warp != 3 {
                    w.bar_sync(1, 128);
                }
            })
            .unwrap_err();
        assert!(e.to_string().contains("deadlock"), "{e}");
        // More waits in one warp than a spin loop may yield (`MAX_SPIN_YIELDS`) are fine.
        let mut rec = Recorder::create(&dir.path().join("y.tst"), 80, "test").unwrap();
        let spec = LaunchSpec::new("long", [1, 1, 1], [64, 1, 1]);
        rec.launch(&spec, &|w| {
            for _ in 0..101_000 {
                // Ping-pong: each warp waits for the other's arrival in turn.
                if w.warp == 0 {
                    w.bar_sync(4, 64);
                    w.bar_arrive(5, 64);
                } else {
                    w.bar_arrive(4, 64);
                    w.bar_sync(5, 64);
                }
            }
        })
        .unwrap();
        assert_eq!(rec.stats.warp_thread_allocs, 0);
        rec.finish().unwrap();
    }
}
