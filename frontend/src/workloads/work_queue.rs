//! `work_queue`: persistent CTAs drain a global work queue (dalmia-2023, chapter 4's
//! work-queue pop; eltantawy-2018 chapter 3): every thread pops the next item with
//! `atomicAdd(&head, 1)` until the index it draws is past the last item, and processes
//! each item it pops: `out[i] = ((3 * in[i] + i) >> 1) + in[i]`, and `visits[i] += 1`
//! (a reduction, so that the host sees that every item was processed exactly once).
//!
//! The loop is a queue region (format version 4, [`crate::record::Warp::queue`]): recorded
//! once per warp, its pop repeated by the timing model on the simulated `head` word, and
//! its tail's accesses rebased by the item popped (`in`, `out` and `visits` at `base + 4 *
//! i`: stride 4). `head` is a sync word starting at 0; each thread pops exactly once
//! without getting an item, so it ends at `items + threads` whatever the scheduling.
//!
//! Per warp: `MOV` (prologue), `MOV` (0), `IMAD.WIDE.U32` (&head), `MOV` (1); the region:
//! head `ATOMG.E.ADD.STRONG.GPU` (value 0: the item popped), `ISETP.GE.U32.AND` (leave when
//! it is `items` or more); test `BRA` (operands per lane: `items`, then the template
//! item); tail `IMAD.WIDE.U32`, `LDG.E` (in), `IMAD`, `SHF.R.U32.HI`, `IADD3`,
//! `IMAD.WIDE.U32`, `STG.E` (out), `IMAD.WIDE.U32`, `RED.E.ADD.STRONG.GPU` (visits); end
//! `BRA` (the back-edge); then `EXIT`.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Atom, Exit, LaunchSpec, Recorder, SyncCmp};
use tessera_traces::{Access, ArrayAnnotation};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "work_queue",
    help: "persistent CTAs pop items with atomicAdd on a global queue head (a queue region whose tail is rebased by the item) and process each once",
    params: &[
        ParamSpec { name: "ctas", default: "8", help: "persistent CTAs" },
        ParamSpec { name: "block", default: "128", help: "threads per CTA (a multiple of 32)" },
        ParamSpec { name: "items", default: "4096", help: "items in the queue" },
        ParamSpec { name: "seed", default: "1", help: "input generator seed" },
    ],
    run,
};

/// The device's results and the reference's.
pub(crate) struct Outcome {
    pub out: Vec<u32>,
    pub want: Vec<u32>,
    pub visits: Vec<u32>,
    pub head: u32,
    pub threads: u32,
}

/// What item `i` with input `x` becomes.
fn process(x: u32, i: u32) -> u32 {
    (x.wrapping_mul(3).wrapping_add(i) >> 1).wrapping_add(x)
}

pub(crate) fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let ctas = p.u32("ctas")?;
    let block = p.u32("block")?;
    let items = p.u32("items")?;
    if block == 0 || block % 32 != 0 || block > 1024 {
        return Err(p.invalid("block must be a multiple of 32 from 32 to 1024"));
    }
    if ctas == 0 || items == 0 {
        return Err(p.invalid("ctas and items must be at least 1"));
    }
    let threads = ctas
        .checked_mul(block)
        .filter(|t| t.checked_add(items).is_some())
        .ok_or_else(|| p.invalid("ctas x block + items must fit in 32 bits"))?;
    let mut rng = SplitMix64(p.u64_any("seed")?);
    let input: Vec<u32> = (0..items).map(|_| rng.next_u64() as u32).collect();
    let x = rec.alloc::<u32>("in", u64::from(items))?;
    let out = rec.alloc::<u32>("out", u64::from(items))?;
    let visits = rec.alloc::<u32>("visits", u64::from(items))?;
    let head = rec.alloc::<u32>("head", 1)?;
    rec.upload(x, &input)?;
    rec.upload(head, &[0])?;
    rec.sync_words(head, true)?;
    // Every item visited once, whoever popped it: checked by the timing model too, at the
    // addresses its own pops give.
    rec.sync_words(visits, true)?;
    let mut spec = LaunchSpec::new("_Z10work_queuePKjPjS1_S1_j", [ctas, 1, 1], [block, 1, 1]);
    spec.resident_ctas = ctas;
    // Which CTA processes an item depends on the scheduling: no per-CTA ranges.
    spec.annotations = vec![
        ArrayAnnotation::whole("in", x.base, x.bytes(), Access::Read),
        ArrayAnnotation::whole("out", out.base, out.bytes(), Access::ReadWrite),
        ArrayAnnotation::whole("visits", visits.base, visits.bytes(), Access::ReadWrite),
        ArrayAnnotation::whole("head", head.base, 4, Access::ReadWrite),
    ];
    rec.launch(&spec, &|w| {
        let zero = w.konst(0u32);
        let ha = w.addr(&head, &zero);
        let one = w.konst(1u32);
        w.queue(
            "item popped",
            (0, 0),
            0,
            |w| {
                w.atomic(Atom::Add, &ha, &one, true);
                Exit::when_imm(0, SyncCmp::Ge, items)
            },
            |w, i| {
                let a = w.addr(&x, i);
                let v = w.ld::<u32>(&a);
                let y = w.imad_imm(&v, 3, i);
                let h = w.shr(&y, 1);
                let r = w.iadd(&h, &v);
                let o = w.addr(&out, i);
                w.st(&o, &r);
                let c = w.addr(&visits, i);
                w.atomic(Atom::Add, &c, &one, false);
            },
        );
    })?;
    let want = input
        .iter()
        .enumerate()
        .map(|(i, &v)| process(v, i as u32))
        .collect();
    Ok(Outcome {
        out: rec.download(out)?,
        want,
        visits: rec.download(visits)?,
        head: rec.download(head)?[0],
        threads,
    })
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check_eq("work_queue", "out", &o.out, &o.want)?;
    let once = vec![1u32; o.want.len()];
    check_eq("work_queue", "visits", &o.visits, &once)?;
    let head = o.want.len() as u32 + o.threads;
    check_eq("work_queue", "head", &[o.head], &[head])?;
    Ok(format!(
        "{} items processed once each by {} threads, queue head {}",
        o.want.len(),
        o.threads,
        o.head
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::params;
    use tessera_traces::{ExitTerm, RebasedAccess, RegionKind, TraceFile};

    fn record(dir: &std::path::Path, kv: &[(&str, &str)]) -> (Outcome, TraceFile) {
        let path = dir.join("q.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let p = Params::parse(&SPEC, &params(kv)).unwrap();
        let o = compute(&p, &mut rec).unwrap();
        rec.finish().unwrap();
        (o, TraceFile::open(&path).unwrap())
    }

    #[test]
    fn every_item_is_processed_once_and_the_region_is_a_rebased_queue() {
        let dir = tempfile::tempdir().unwrap();
        let (items, ctas, block) = (1000u32, 3u32, 64u32);
        let (o, t) = record(
            dir.path(),
            &[("items", "1000"), ("ctas", "3"), ("block", "64")],
        );
        assert_eq!(o.out, o.want);
        assert_eq!(o.visits, vec![1; items as usize]);
        // Each thread popped once without an item.
        assert_eq!(o.head, items + ctas * block);
        let sw = &t.index().sync_words;
        assert_eq!(
            (sw[0].name.as_str(), &sw[0].init[..], &sw[0].expect[..]),
            ("head", &[0][..], &[items + ctas * block][..])
        );
        assert_eq!(
            (sw[1].name.as_str(), sw[1].expect.len()),
            ("visits", items as usize)
        );
        assert!(sw[1].init.iter().all(|&v| v == 0) && sw[1].expect.iter().all(|&v| v == 1));
        tessera_traces::verify(&t).unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.spin_regions.len(), 1);
        let r = &k.spin_regions[0];
        assert_eq!(r.kind, RegionKind::Queue);
        assert_eq!(r.terms, [ExitTerm::own(0, SyncCmp::Ge)]);
        assert_eq!(r.label, "item popped");
        assert_eq!(r.test_operands(), 2);
        let op_at = |pc: u32| {
            let s = k.statics.iter().find(|s| s.pc == pc).unwrap();
            k.opcodes[s.opcode as usize].name.as_str()
        };
        assert_eq!(op_at(r.start_pc), "ATOMG.E.ADD.STRONG.GPU");
        // The tail's load, store and reduction, by PC, each with stride 4.
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let insts = d.warp(0);
        let at = |pc: u32| insts.iter().position(|i| i.pc == pc).unwrap();
        let (start, test, end) = (at(r.start_pc), at(r.test_pc), at(r.end_pc));
        assert_eq!((test - start, end - test), (2, 10));
        let tail_mem: Vec<RebasedAccess> = insts[test + 1..end]
            .iter()
            .filter(|i| {
                let n = op_at(i.pc);
                n.starts_with("LDG") || n.starts_with("STG") || n.starts_with("RED")
            })
            .map(|i| RebasedAccess {
                pc: i.pc,
                stride: 4,
            })
            .collect();
        assert_eq!(tail_mem.len(), 3);
        assert_eq!(r.rebased, tail_mem);
        let names: Vec<&str> = tail_mem.iter().map(|a| op_at(a.pc)).collect();
        assert_eq!(names, ["LDG.E", "STG.E", "RED.E.ADD.STRONG.GPU"]);
        // Every warp's test records per lane the constant and the template item; the
        // head, test, tail and end run on the 32 lanes.
        for cta in 0..ctas {
            let d = dec.kernel_cta(0, cta).unwrap().clone();
            for w in 0..d.warps.len() {
                let insts = d.warp(w);
                let test = insts.iter().position(|i| i.pc == r.test_pc).unwrap();
                assert_eq!(insts[test].mask, u32::MAX);
                let ops = d
                    .operands_of(d.warps[w].insts.start + test, r.test_operands() as u8)
                    .unwrap();
                assert_eq!(ops.len(), 32 * r.test_operands());
                for lane in ops.chunks(2) {
                    assert_eq!(lane[0], u64::from(items));
                    assert!(lane[1] < u64::from(items), "{lane:?}");
                }
                let ld = insts.iter().find(|i| i.pc == r.rebased[0].pc).unwrap();
                assert_eq!(ld.mask, u32::MAX);
            }
        }
    }

    /// Fewer items than threads: whole warps leave at their first pop, their recorded
    /// tails on the fallback item.
    #[test]
    fn fewer_items_than_threads() {
        let dir = tempfile::tempdir().unwrap();
        let (o, t) = record(
            dir.path(),
            &[("items", "40"), ("ctas", "2"), ("block", "64")],
        );
        assert_eq!(o.out, o.want);
        assert_eq!(o.visits, vec![1; 40]);
        assert_eq!(o.head, 40 + 128);
        tessera_traces::verify(&t).unwrap();
        assert_eq!(t.kernels()[0].spin_regions.len(), 1);
    }

    /// The queue region and the sync word survive an Accel-Sim text round trip.
    #[test]
    fn the_region_round_trips_through_accel_sim_text() {
        let dir = tempfile::tempdir().unwrap();
        let (_, t) = record(
            dir.path(),
            &[("items", "300"), ("ctas", "2"), ("block", "64")],
        );
        let ex = dir.path().join("ex");
        crate::accelsim::export_dir(&dir.path().join("q.tst"), &ex).unwrap();
        let b = dir.path().join("b.tst");
        crate::accelsim::import_dir(&ex, &b, &Default::default()).unwrap();
        let tb = TraceFile::open(&b).unwrap();
        assert_eq!(t.kernels()[0].spin_regions, tb.kernels()[0].spin_regions);
        assert_eq!(t.index().sync_words, tb.index().sync_words);
        tessera_traces::verify(&tb).unwrap();
    }

    #[test]
    fn bad_sizes_are_parameter_errors() {
        let e = crate::workloads::test_support::param_error("work_queue", &[("block", "48")]);
        assert!(e.contains("multiple of 32"), "{e}");
        let e = crate::workloads::test_support::param_error("work_queue", &[("items", "0")]);
        assert!(e.contains("at least 1"), "{e}");
    }
}
