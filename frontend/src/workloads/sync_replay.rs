//! A reference interpreter of format version 3's synchronization semantics, for tests: it
//! replays a recorded trace with every CTA of a kernel resident and its warps taking one
//! instruction each in turn (another interleaving than the recorder's), keeps the value of
//! every sync word, applies atomics and strong stores on them in that order, and repeats
//! each spin region's body as its values require: the head under the lanes still
//! spinning, the exit test on its value instructions' results and the test's constants,
//! the tail under the lanes that leave, until none spins. At the end every checked sync
//! word must hold its expected value. This is what the timing model does with the trace,
//! without the timing: a recording the interpreter cannot finish, or finishes with other
//! values, would mislead the model.

use std::collections::HashMap;
use tessera_traces::codec::operands_at;
use tessera_traces::{AtomicOp, KernelMeta, OpClass, SpinRegion, TraceFile};

/// One instruction of a warp, with what the interpreter needs.
struct Inst {
    pc: u32,
    mask: u32,
    class: OpClass,
    name: String,
    atomic: AtomicOp,
    /// Address per lane.
    addrs: [u64; 32],
    /// Operands of the recorded mask's lanes, `per` each, in lane order.
    ops: Vec<u64>,
    per: usize,
}

impl Inst {
    /// Lane `l`'s operands.
    fn ops_of(&self, l: usize) -> &[u64] {
        let k = (self.mask & ((1u32 << l) - 1)).count_ones() as usize;
        self.ops
            .get(k * self.per..(k + 1) * self.per)
            .unwrap_or(&[])
    }
}

/// Where a warp is in a region instance.
struct InRegion {
    region: usize,
    head: usize,
    test: usize,
    end: usize,
    spinning: u32,
    exiting: u32,
    in_tail: bool,
    values: Vec<[u32; 32]>,
}

struct WarpRun {
    cta: usize,
    insts: Vec<Inst>,
    pos: usize,
    at_barrier: bool,
    region: Option<InRegion>,
}

/// What a replay saw.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// Region iterations over all warps (heads run).
    pub iterations: u64,
    /// Warp instructions executed.
    pub insts: u64,
}

fn lanes(mask: u32) -> impl Iterator<Item = usize> {
    (0..32).filter(move |l| mask >> l & 1 == 1)
}

fn apply(op: AtomicOp, cur: u32, o: &[u64]) -> Result<u32, String> {
    let x = o.first().copied().unwrap_or(0) as u32;
    Ok(match op {
        AtomicOp::Add => cur.wrapping_add(x),
        AtomicOp::Min => cur.min(x),
        AtomicOp::Max => cur.max(x),
        AtomicOp::And => cur & x,
        AtomicOp::Or => cur | x,
        AtomicOp::Xor => cur ^ x,
        AtomicOp::Exch => x,
        AtomicOp::Inc => {
            if cur >= x {
                0
            } else {
                cur + 1
            }
        }
        AtomicOp::Dec => {
            if cur == 0 || cur > x {
                x
            } else {
                cur - 1
            }
        }
        AtomicOp::Cas => {
            if cur == x {
                o.get(1).copied().unwrap_or(0) as u32
            } else {
                cur
            }
        }
        AtomicOp::None => return Err("an atomic without an operation".into()),
    })
}

fn load_warps(t: &TraceFile, k: usize, meta: &KernelMeta) -> Result<Vec<WarpRun>, String> {
    let mut dec = t.decoder();
    let mut warps = Vec::new();
    for c in 0..meta.counts.ctas as u32 {
        let d = dec.kernel_cta(k, c).map_err(|e| e.to_string())?.clone();
        for (wi, w) in d.warps.iter().enumerate() {
            let mut insts = Vec::new();
            for (j, i) in d.warp(wi).iter().enumerate() {
                let st = &meta.statics[i.slot as usize];
                let op = &meta.opcodes[st.opcode as usize];
                let mut addrs = [0u64; 32];
                for (l, a) in d.lane_addrs(i) {
                    addrs[l as usize] = a;
                }
                let per = operands_at(meta, i.pc, op) as usize;
                let ops = d
                    .operands_of(w.insts.start + j, per as u8)
                    .unwrap_or(&[])
                    .to_vec();
                insts.push(Inst {
                    pc: i.pc,
                    mask: i.mask,
                    class: op.class,
                    name: op.name.clone(),
                    atomic: op.atomic,
                    addrs,
                    ops,
                    per,
                });
            }
            warps.push(WarpRun {
                cta: c as usize,
                insts,
                pos: 0,
                at_barrier: false,
                region: None,
            });
        }
    }
    Ok(warps)
}

/// Runs instruction `i` under `mask` on the sync memory; returns the per-lane values a
/// value instruction produced (loads and returning atomics), if it touched sync words.
fn exec(i: &Inst, mask: u32, mem: &mut HashMap<u64, u32>) -> Result<Option<[u32; 32]>, String> {
    let mut out = [0u32; 32];
    let sync = lanes(mask).any(|l| mem.contains_key(&i.addrs[l]));
    if !sync {
        return Ok(None);
    }
    for l in lanes(mask) {
        let a = i.addrs[l];
        let Some(cur) = mem.get(&a).copied() else {
            return Err(format!(
                "{} at {:#x}: a warp instruction mixing sync words and data",
                i.name, i.pc
            ));
        };
        out[l] = cur;
        match i.class {
            OpClass::AtomicGlobal | OpClass::Reduction => {
                let v = apply(i.atomic, cur, i.ops_of(l))?;
                mem.insert(a, v);
            }
            OpClass::StoreGlobal => {
                if !i.name.contains(".STRONG") {
                    return Err(format!(
                        "{} at {:#x}: a plain store to a sync word",
                        i.name, i.pc
                    ));
                }
                mem.insert(a, i.ops_of(l).first().copied().unwrap_or(0) as u32);
            }
            OpClass::LoadGlobal => {}
            c => return Err(format!("{} ({c:?}) at {:#x} on a sync word", i.name, i.pc)),
        }
    }
    Ok(Some(out))
}

fn is_value(i: &Inst) -> bool {
    i.name.starts_with("LDG") || i.name.starts_with("ATOMG")
}

/// Runs one instruction of warp `w` (a `BAR.SYNC` leaves it waiting).
fn step(
    w: &mut WarpRun,
    regions: &[SpinRegion],
    mem: &mut HashMap<u64, u32>,
    rep: &mut Replay,
) -> Result<(), String> {
    rep.insts += 1;
    if let Some(r) = w.region.as_mut() {
        let reg = &regions[r.region];
        let i = &w.insts[w.pos];
        if !r.in_tail {
            let vals = exec(i, i.mask & r.spinning, mem)?;
            if is_value(i) {
                r.values.push(vals.ok_or_else(|| {
                    format!(
                        "{} at {:#x}: a head's value instruction on plain data",
                        i.name, i.pc
                    )
                })?);
            }
            w.pos += 1;
            if w.pos == r.test {
                // The test: constants per active lane of the test, terms in order.
                let t = &w.insts[r.test];
                let mut exiting = 0u32;
                for l in lanes(r.spinning) {
                    let consts = t.ops_of(l);
                    let mut holds = reg.terms.iter().enumerate().map(|(ti, term)| {
                        let c = consts.get(ti).copied().unwrap_or(0) as u32;
                        term.cmp.holds(r.values[term.value as usize][l], c)
                    });
                    let yes = if reg.all {
                        holds.all(|h| h)
                    } else {
                        holds.any(|h| h)
                    };
                    if yes {
                        exiting |= 1 << l;
                    }
                }
                r.exiting = exiting;
                r.in_tail = true;
                w.pos = if exiting == 0 { r.end } else { r.test + 1 };
            }
            return Ok(());
        }
        if w.pos == r.end {
            r.spinning &= !r.exiting;
            if r.spinning == 0 {
                w.region = None;
                w.pos += 1;
            } else {
                rep.iterations += 1;
                r.in_tail = false;
                r.values.clear();
                w.pos = r.head;
            }
            return Ok(());
        }
        exec(i, i.mask & r.exiting, mem)?;
        w.pos += 1;
        return Ok(());
    }
    let i = &w.insts[w.pos];
    if let Some(ri) = regions.iter().position(|r| r.start_pc == i.pc) {
        let reg = &regions[ri];
        let test = (w.pos..w.insts.len()).find(|&j| w.insts[j].pc == reg.test_pc);
        let test = test.ok_or("a region without its test")?;
        let end = (test..w.insts.len()).find(|&j| w.insts[j].pc == reg.end_pc);
        let end = end.ok_or("a region without its back-edge")?;
        rep.iterations += 1;
        w.region = Some(InRegion {
            region: ri,
            head: w.pos,
            test,
            end,
            spinning: i.mask,
            exiting: 0,
            in_tail: false,
            values: Vec::new(),
        });
        rep.insts -= 1;
        return step(w, regions, mem, rep);
    }
    if i.class == OpClass::Barrier && i.name.starts_with("BAR.SYNC") {
        w.at_barrier = true;
    }
    exec(i, i.mask, mem)?;
    w.pos += 1;
    Ok(())
}

/// Replays `t` (see the module docs); an error when a run cannot finish or ends with
/// sync words other than expected.
pub(crate) fn replay(t: &TraceFile) -> Result<Replay, String> {
    let idx = t.index();
    let mut mem: HashMap<u64, u32> = HashMap::new();
    for sw in &idx.sync_words {
        for (j, &v) in sw.init.iter().enumerate() {
            mem.insert(sw.addr + 4 * j as u64, v);
        }
    }
    let mut rep = Replay::default();
    for (k, meta) in idx.kernels.iter().enumerate() {
        let mut warps = load_warps(t, k, meta)?;
        let ctas = meta.counts.ctas as usize;
        let mut rounds = 0u64;
        loop {
            let mut live = false;
            for w in warps.iter_mut() {
                if w.pos >= w.insts.len() || w.at_barrier {
                    continue;
                }
                live = true;
                step(w, &meta.spin_regions, &mut mem, &mut rep)?;
            }
            // Barriers: a CTA whose live warps all wait goes on.
            for c in 0..ctas {
                let mut waiting = warps.iter().filter(|w| w.cta == c && w.pos < w.insts.len());
                if waiting.clone().next().is_some() && waiting.all(|w| w.at_barrier) {
                    for w in warps.iter_mut().filter(|w| w.cta == c) {
                        w.at_barrier = false;
                    }
                    live = true;
                }
            }
            if !live {
                break;
            }
            rounds += 1;
            if rounds > 2_000_000 {
                return Err(format!("kernel {k} does not finish"));
            }
        }
    }
    for sw in &idx.sync_words {
        if sw.expect.is_empty() {
            continue;
        }
        let got: Vec<u32> = (0..sw.init.len())
            .map(|j| mem[&(sw.addr + 4 * j as u64)])
            .collect();
        if got != sw.expect {
            return Err(format!(
                "sync words {}: {:?}, expected {:?}",
                sw.name, got, sw.expect
            ));
        }
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{generate, test_support::params};

    /// Every workload with sync words replays to its expected values under the
    /// interpreter's interleaving, its spin regions iterating as its values require.
    #[test]
    fn sync_workloads_replay_to_their_expected_values() {
        let dir = tempfile::tempdir().unwrap();
        for (name, kv) in [
            (
                "spinlock",
                vec![("ctas", "6"), ("block", "64"), ("iters", "3")],
            ),
            (
                "ht",
                vec![("buckets", "128"), ("insertions", "1000"), ("block", "64")],
            ),
            (
                "atm",
                vec![("accounts", "24"), ("transfers", "500"), ("block", "64")],
            ),
            ("atomic_barrier", vec![("ctas", "20"), ("episodes", "3")]),
            (
                "flag_barrier",
                vec![("ctas", "70"), ("block", "32"), ("episodes", "3")],
            ),
            ("nw", vec![("tiles", "5"), ("tile", "8"), ("block", "32")]),
            (
                "simt_lock",
                vec![("ctas", "2"), ("block", "64"), ("release_inside", "1")],
            ),
        ] {
            let path = dir.path().join(format!("{name}.tst"));
            generate(name, &params(&kv), 80, &path).unwrap();
            let t = TraceFile::open(&path).unwrap();
            let regions: u64 = t
                .kernels()
                .iter()
                .map(|k| k.spin_regions.len() as u64)
                .sum();
            assert!(regions > 0, "{name}");
            let r = replay(&t).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(r.iterations > 0, "{name}: {r:?}");
        }
    }

    /// `simt_lock` with the release after the loop (ElTantawy Fig 1.1) has no spin region:
    /// its rounds replay as recorded, the lock's CASes and exchanges performed on its
    /// value in another interleaving than the recorder's, and it still ends free (every
    /// warp's last operation on it is a release).
    #[test]
    fn simt_lock_without_a_region_replays_as_recorded_to_a_free_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("simt_lock.tst");
        let kv = [("ctas", "2"), ("block", "64"), ("iters", "2")];
        generate("simt_lock", &params(&kv), 80, &path).unwrap();
        let t = TraceFile::open(&path).unwrap();
        assert!(t.kernels().iter().all(|k| k.spin_regions.is_empty()));
        let r = replay(&t).unwrap();
        assert_eq!(r.iterations, 0);
    }
}
