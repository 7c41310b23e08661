//! `bfs`: frontier-based breadth-first search on a random directed graph in CSR form,
//! one kernel launch per level.
//!
//! The graph: node `v` has `1 + below(2 degree - 1)` out-edges (mean `degree`): the ring
//! edge `v -> (v + 1) % nodes`, so every node is reachable and there are several levels,
//! then uniform random targets (duplicates and self-loops allowed). All from `seed`.
//!
//! Level `L`'s kernel runs one thread per frontier node `v` (the `count` nodes the
//! previous level appended): it walks `col[row[v] .. row[v+1]]` in a per-lane loop (lanes
//! leave as their adjacency lists end), and for each neighbour `u` claims it with
//! `atomicMin(&level[u], L + 1)` (`ATOMG.E.MIN.STRONG.GPU`, returning the old level): the
//! lane that sees the old value above `L + 1` (unvisited, `u32::MAX`) is the only one that
//! claims `u`, and appends it to the next frontier at the slot
//! `atomicAdd(&count_next, 1)` (`ATOMG.E.ADD.STRONG.GPU`) returns. The host zeroes the
//! counter before each launch (recorded as a copy), reads it back after, and stops when it
//! is 0. Frontier order depends on the interleaving of the atomics; the levels do not.
//!
//! No `MEMBAR.SC.GPU` is needed: within a launch the only communication between threads is
//! through the two atomics themselves (each a single device-scope read-modify-write), and
//! the next frontier and its size are read only by the host and the next launch, which the
//! kernel boundary orders.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Atom, Buffer, Cmp, LaunchSpec, Recorder, Val};
use std::cell::Cell;
use std::collections::VecDeque;
use tessera_traces::{Access, ArrayAnnotation, CtaRange};

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "bfs",
    help: "frontier BFS on a random CSR graph, one launch per level (atomic claims and appends)",
    params: &[
        ParamSpec {
            name: "nodes",
            default: "4096",
            help: "graph nodes",
        },
        ParamSpec {
            name: "degree",
            default: "8",
            help: "average out-degree (1 to 2*degree-1 edges per node, one of them v -> v+1)",
        },
        ParamSpec {
            name: "source",
            default: "0",
            help: "BFS source node",
        },
        ParamSpec {
            name: "block",
            default: "256",
            help: "threads per CTA",
        },
        ParamSpec {
            name: "seed",
            default: "1",
            help: "graph generator seed",
        },
    ],
    run,
};

/// Unvisited.
const INF: u32 = u32::MAX;

/// A CSR graph: `v`'s neighbours are `col[row[v] .. row[v+1]]`.
struct Graph {
    row: Vec<u32>,
    col: Vec<u32>,
}

impl Graph {
    fn generate(nodes: u32, degree: u32, seed: u64) -> Graph {
        let mut rng = SplitMix64(seed);
        let mut row = Vec::with_capacity(nodes as usize + 1);
        let mut col = Vec::new();
        row.push(0);
        for v in 0..nodes {
            let d = 1 + rng.below(2 * degree as u64 - 1);
            col.push((v + 1) % nodes);
            for _ in 1..d {
                col.push(rng.below(nodes as u64) as u32);
            }
            row.push(col.len() as u32);
        }
        Graph { row, col }
    }

    fn adj(&self, v: u32) -> &[u32] {
        &self.col[self.row[v as usize] as usize..self.row[v as usize + 1] as usize]
    }

    /// Plain BFS levels (`INF` when unreachable).
    fn levels(&self, source: u32) -> Vec<u32> {
        let mut lv = vec![INF; self.row.len() - 1];
        lv[source as usize] = 0;
        let mut q = VecDeque::from([source]);
        while let Some(v) = q.pop_front() {
            for &u in self.adj(v) {
                if lv[u as usize] == INF {
                    lv[u as usize] = lv[v as usize] + 1;
                    q.push_back(u);
                }
            }
        }
        lv
    }
}

/// Validated parameters.
#[derive(Clone, Copy, Debug)]
struct Setup {
    nodes: u32,
    degree: u32,
    source: u32,
    block: u32,
    seed: u64,
}

fn setup(p: &Params) -> Result<Setup, GenError> {
    let nodes = p.u32("nodes")?;
    let degree = p.u32("degree")?;
    let block = p.u32("block")?;
    let source = p.u64_any("source")?;
    let seed = p.u64_any("seed")?;
    if source >= nodes as u64 {
        return Err(p.invalid(&format!(
            "source {source} is not a node (nodes are 0 to {})",
            nodes - 1
        )));
    }
    if block > 1024 {
        return Err(p.invalid("block must be at most 1024 threads"));
    }
    // Up to 2 degree - 1 edges per node: the edge count must fit a 32-bit index.
    if nodes as u64 * (2 * degree as u64 - 1) > i32::MAX as u64 {
        return Err(p.invalid(&format!(
            "{nodes} nodes with up to {} edges each may exceed 2^31-1 edges (32-bit indices)",
            2 * degree as u64 - 1
        )));
    }
    Ok(Setup {
        nodes,
        degree,
        source: source as u32,
        block,
        seed,
    })
}

/// The same address register with a constant byte offset folded into the load
/// (`LDG.E R, [R2.64+0x4]`).
fn offset(a: &Val<u64>, bytes: i64) -> Val<u64> {
    Val {
        v: a.v.map(|x| x.wrapping_add_signed(bytes)),
        reg: a.reg,
    }
}

/// The device arrays.
#[derive(Clone, Copy)]
struct Arrays {
    row: Buffer<u32>,
    col: Buffer<u32>,
    levels: Buffer<u32>,
    counter: Buffer<u32>,
}

/// Records level `level`'s launch over the `count` nodes of `fin`, appending to `fout`.
fn expand(
    rec: &mut Recorder,
    s: &Setup,
    d: Arrays,
    fin: Buffer<u32>,
    fout: Buffer<u32>,
    count: u32,
    level: u32,
) -> Result<(), GenError> {
    let block = s.block;
    let ctas = count.div_ceil(block);
    let mut spec = LaunchSpec::new(
        "_Z9bfs_levelPKjS0_PjS0_S1_S1_jj",
        [ctas, 1, 1],
        [block, 1, 1],
    );
    spec.blocking = false;
    // Each CTA reads a contiguous block of the frontier; everything else is reached
    // through node ids, anywhere in its array.
    let fin_ranges = (0..ctas)
        .map(|c| CtaRange {
            first_cta: c,
            n_ctas: 1,
            lo: fin.addr(c as u64 * block as u64),
            hi: fin.addr((c as u64 * block as u64 + block as u64).min(count as u64)),
        })
        .collect();
    spec.annotations = vec![
        ArrayAnnotation::whole("row", d.row.base, d.row.bytes(), Access::Read),
        ArrayAnnotation::whole("col", d.col.base, d.col.bytes(), Access::Read),
        ArrayAnnotation::whole("level", d.levels.base, d.levels.bytes(), Access::ReadWrite),
        ArrayAnnotation {
            name: "frontier_in".into(),
            base: fin.base,
            bytes: fin.bytes(),
            access: Access::Read,
            ranges: fin_ranges,
        },
        ArrayAnnotation::whole("frontier_out", fout.base, fout.bytes(), Access::ReadWrite),
        ArrayAnnotation::whole(
            "counter",
            d.counter.base,
            d.counter.bytes(),
            Access::ReadWrite,
        ),
    ];
    let (row, col, levels, counter) = (d.row, d.col, d.levels, d.counter);
    rec.launch(&spec, &|w| {
        let t = w.global_id_x();
        let past = w.icmp_imm(Cmp::Ge, &t, count);
        w.exit_if(past);
        let v = w.load(&fin, &t);
        let ra = w.addr(&row, &v);
        let start = w.ld::<u32>(&ra);
        let end = w.ld::<u32>(&offset(&ra, 4));
        let next = w.konst(level + 1);
        let one = w.konst(1u32);
        // The counter's address, a kernel parameter.
        let ctr = w.konst(counter.base);
        let ec = Cell::new(start);
        w.while_(
            |w| w.icmp(Cmp::Lt, &ec.get(), &end),
            |w| {
                let mut e = ec.get();
                let u = w.load(&col, &e);
                let la = w.addr(&levels, &u);
                let old = w.atomic(Atom::Min, &la, &next, true);
                let fresh = w.icmp_imm(Cmp::Gt, &old, level + 1);
                w.if_(fresh, |w| {
                    let slot = w.atomic(Atom::Add, &ctr, &one, true);
                    w.store(&fout, &slot, &u);
                });
                w.iadd_imm_acc(&mut e, 1);
                ec.set(e);
            },
        );
    })?;
    Ok(())
}

/// The recorded levels, the reference, and the number of launches.
struct Outcome {
    got: Vec<u32>,
    want: Vec<u32>,
    launches: u32,
}

fn compute(p: &Params, rec: &mut Recorder) -> Result<Outcome, GenError> {
    let s = setup(p)?;
    let g = Graph::generate(s.nodes, s.degree, s.seed);
    let n = s.nodes as u64;
    let d = Arrays {
        row: rec.alloc::<u32>("row", n + 1)?,
        col: rec.alloc::<u32>("col", g.col.len() as u64)?,
        levels: rec.alloc::<u32>("level", n)?,
        counter: rec.alloc::<u32>("counter", 1)?,
    };
    let fa = rec.alloc::<u32>("frontier_a", n)?;
    let fb = rec.alloc::<u32>("frontier_b", n)?;
    rec.upload(d.row, &g.row)?;
    rec.upload(d.col, &g.col)?;
    let mut lv = vec![INF; s.nodes as usize];
    lv[s.source as usize] = 0;
    rec.upload(d.levels, &lv)?;
    let mut f0 = vec![0u32; s.nodes as usize];
    f0[0] = s.source;
    rec.upload(fa, &f0)?;
    let (mut fin, mut fout) = (fa, fb);
    let (mut count, mut level) = (1u32, 0u32);
    while count > 0 {
        // cudaMemset(counter, 0)
        rec.upload(d.counter, &[0])?;
        expand(rec, &s, d, fin, fout, count, level)?;
        count = rec.download(d.counter)?[0];
        std::mem::swap(&mut fin, &mut fout);
        level += 1;
    }
    Ok(Outcome {
        got: rec.download(d.levels)?,
        want: g.levels(s.source),
        launches: level,
    })
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let o = compute(p, rec)?;
    check_eq("bfs", "level", &o.got, &o.want)?;
    let reached = o.got.iter().filter(|&&l| l != INF).count();
    Ok(format!(
        "levels of {reached} reachable nodes verified ({} launches, deepest level {})",
        o.launches,
        o.launches - 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::generate;
    use tessera_traces::{OpClass, TraceFile};

    use crate::workloads::test_support::{param_error, params};

    const SMALL: &[(&str, &str)] = &[
        ("nodes", "1000"),
        ("degree", "3"),
        ("source", "17"),
        ("block", "64"),
        ("seed", "9"),
    ];

    #[test]
    fn levels_equal_a_plain_bfs() {
        let dir = tempfile::tempdir().unwrap();
        for kv in [
            SMALL,
            &[][..],
            &[("nodes", "1"), ("degree", "1")],
            &[
                ("nodes", "50"),
                ("degree", "1"),
                ("source", "49"),
                ("block", "33"),
            ],
        ] {
            let p = Params::parse(&SPEC, &params(kv)).unwrap();
            let mut rec = Recorder::create(&dir.path().join("b.tst"), 80, "test").unwrap();
            let o = compute(&p, &mut rec).unwrap();
            assert_eq!(o.got, o.want, "{kv:?}");
            let deepest = *o.want.iter().max().unwrap();
            assert_eq!(o.launches, deepest + 1, "{kv:?}");
        }
        // The ring alone (degree 1) is a chain of 50 levels from node 49.
        let p = Params::parse(
            &SPEC,
            &params(&[("nodes", "50"), ("degree", "1"), ("source", "49")]),
        )
        .unwrap();
        let mut rec = Recorder::create(&dir.path().join("b.tst"), 80, "test").unwrap();
        assert_eq!(compute(&p, &mut rec).unwrap().launches, 50);
    }

    /// By hand: every reachable node (all of them: the ring) enters exactly one frontier,
    /// at its level L, and its thread in launch L issues one claiming atomicMin lane per
    /// out-edge; so launch L's ATOMG.MIN lanes = sum of out-degrees of the nodes at level
    /// L, and over all launches = the number of edges. Each node but the source is
    /// claimed exactly once, by the launch of the level before its own: launch L's
    /// ATOMG.ADD lanes (on the counter) and STG lanes = the number of nodes at level L+1,
    /// nodes - 1 in all. Launches = deepest level + 1 (the last finds nothing new), and
    /// every atomicMin operand of launch L is L + 1.
    #[test]
    fn atomics_follow_the_hand_formula() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.tst");
        generate("bfs", &params(SMALL), 80, &path).unwrap();
        let g = Graph::generate(1000, 3, 9);
        let want = g.levels(17);
        let deepest = *want.iter().max().unwrap();
        assert!((4..INF).contains(&deepest), "deepest level {deepest}");
        let t = TraceFile::open(&path).unwrap();
        tessera_traces::verify(&t).unwrap();
        assert_eq!(t.kernels().len() as u32, deepest + 1);
        let mut dec = t.decoder();
        let (mut all_min, mut all_add) = (0u64, 0u64);
        for (ki, k) in t.kernels().iter().enumerate() {
            let lvl = ki as u32;
            let counter = k
                .annotations
                .iter()
                .find(|a| a.name == "counter")
                .unwrap()
                .base;
            let degree_sum: u64 = (0..1000u32)
                .filter(|&v| want[v as usize] == lvl)
                .map(|v| g.adj(v).len() as u64)
                .sum();
            let next_level = want.iter().filter(|&&l| l == lvl + 1).count() as u64;
            let (mut min_lanes, mut add_lanes, mut st_lanes) = (0u64, 0u64, 0u64);
            for cta in 0..k.counts.ctas as u32 {
                let d = dec.kernel_cta(ki, cta).unwrap();
                for (x, i) in d.insts.iter().enumerate() {
                    let lanes = i.mask.count_ones() as u64;
                    match i.class {
                        OpClass::AtomicGlobal => {
                            let addrs: Vec<u64> = d.lane_addrs(i).map(|(_, a)| a).collect();
                            let ops = d.operands_of(x, 1).unwrap();
                            if addrs.iter().all(|&a| a == counter) {
                                add_lanes += lanes;
                                assert!(ops.iter().all(|&o| o == 1));
                            } else {
                                min_lanes += lanes;
                                assert!(ops.iter().all(|&o| o == lvl as u64 + 1));
                            }
                        }
                        OpClass::StoreGlobal => st_lanes += lanes,
                        _ => {}
                    }
                }
            }
            assert_eq!(min_lanes, degree_sum, "launch {ki}");
            assert_eq!(
                (add_lanes, st_lanes),
                (next_level, next_level),
                "launch {ki}"
            );
            all_min += min_lanes;
            all_add += add_lanes;
        }
        assert_eq!(all_min, g.col.len() as u64);
        assert_eq!(all_add, 999);
    }

    /// The frontier order comes from the atomics' interleaving, which the capture fixes:
    /// two recordings are byte-identical.
    #[test]
    fn recording_is_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.tst"), dir.path().join("b.tst"));
        generate("bfs", &params(SMALL), 80, &a).unwrap();
        generate("bfs", &params(SMALL), 80, &b).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let err = |kv: &[(&str, &str)]| param_error("bfs", kv);
        for kv in [
            &[("bogus", "1")][..],
            &[("nodes", "0")],
            &[("degree", "0")],
            &[("block", "0")],
            &[("block", "2000")],
            &[("source", "4096")],
            &[("source", "-1")],
            &[("degree", "1000000000")],
        ] {
            let m = err(kv);
            assert!(
                m.contains("valid parameters: nodes (default 4096), degree (default 8)"),
                "{kv:?}: {m}"
            );
        }
        assert!(err(&[("source", "4096")]).contains("not a node"));
    }
}
