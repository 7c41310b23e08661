//! Property test: any kernel written with `TraceWriter` decodes back to exactly what was
//! written, over every field (PC, mask, opcode, registers, width, immediate, line number,
//! cluster info) and every address mode, with chunks small enough that CTAs spread over
//! many chunks.

use proptest::prelude::*;
use tessera_traces::codec::{ClusterInfo, ADDR_DELTA, ADDR_LIST};
use tessera_traces::*;

#[derive(Clone, Debug)]
enum Addr {
    None,
    Stride(u64, i32),
    List(u8, Vec<u64>),
}

#[derive(Clone, Debug)]
struct Inst {
    pc: u32,
    mask: u32,
    opcode: u16,
    dsts: Vec<u16>,
    srcs: Vec<u16>,
    mem_width: u32,
    imm: Option<i64>,
    line: Option<u32>,
    addr: Addr,
    /// Per-lane operands, written when the opcode is the atomic (index 3).
    operands: Vec<u64>,
}

#[derive(Clone, Debug)]
struct Cta {
    id: [u32; 3],
    cluster: Option<ClusterInfo>,
    warps: Vec<(u32, Vec<Inst>)>,
}

const OPCODES: [(&str, OpClass); 5] = [
    ("IMAD", OpClass::IntMul),
    ("LDG.E.64", OpClass::LoadGlobal),
    ("STS.128", OpClass::StoreShared),
    ("ATOMG.E.ADD.STRONG.GPU", OpClass::AtomicGlobal),
    ("EXIT", OpClass::Exit),
];

fn arb_mask() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(u32::MAX),
        Just(0u32),
        any::<u32>(),
        (0u32..32).prop_map(|b| 1 << b)
    ]
}

fn arb_inst() -> impl Strategy<Value = Inst> {
    (
        (0u32..24).prop_map(|p| p * 16),
        arb_mask(),
        0u16..OPCODES.len() as u16,
        proptest::collection::vec(0u16..=255, 0..=1),
        proptest::collection::vec(0u16..=255, 0..=4),
        proptest::option::of(any::<i64>()),
        proptest::option::of(any::<u32>()),
        (
            0u8..4,
            any::<u64>(),
            any::<i32>(),
            proptest::collection::vec(any::<u64>(), 32),
            0u8..3,
        ),
        proptest::collection::vec(any::<u64>(), 32),
    )
        .prop_map(
            |(pc, mask, opcode, dsts, srcs, imm, line, (kind, base, stride, lanes, near), ops)| {
                let n = mask.count_ones() as usize;
                // Mix addresses near each other (delta-friendly) and anywhere in 64 bits.
                let lanes: Vec<u64> = if near > 0 {
                    lanes.iter().map(|&x| base.wrapping_add(x % 4096)).collect()
                } else {
                    lanes
                };
                let addr = match kind {
                    0 => Addr::None,
                    1 => Addr::Stride(base, stride),
                    2 => Addr::List(ADDR_LIST, lanes[..n].to_vec()),
                    _ => Addr::List(ADDR_DELTA, lanes[..n.max(1)].to_vec()),
                };
                let mem_width = if matches!(addr, Addr::None) {
                    0
                } else {
                    4 << (base % 3)
                };
                let operands = if opcode == 3 {
                    ops[..n].to_vec()
                } else {
                    Vec::new()
                };
                Inst {
                    pc,
                    mask,
                    opcode,
                    dsts,
                    srcs,
                    mem_width,
                    imm,
                    line,
                    addr,
                    operands,
                }
            },
        )
}

fn arb_cta() -> impl Strategy<Value = Cta> {
    (
        [0u32..70000, 0u32..3, 0u32..3],
        proptest::option::of((any::<[u32; 3]>(), any::<[u32; 3]>(), any::<u32>())),
        proptest::collection::vec(
            (0u32..32, proptest::collection::vec(arb_inst(), 0..40)),
            0..5,
        ),
    )
        .prop_map(|(id, cl, warps)| Cta {
            id,
            cluster: cl.map(|(id, cta, rank)| ClusterInfo { id, cta, rank }),
            warps,
        })
}

fn write(path: &std::path::Path, kernels: &[Vec<Cta>], chunk: usize) -> Vec<KernelCounts> {
    let opts = WriterOptions {
        chunk_target_bytes: chunk,
        zstd_level: 1,
    };
    let mut w = TraceWriter::create(path, opts).unwrap();
    w.add_device(DeviceInfo {
        source: "kernelslist.g".into(),
    });
    w.add_command(Command::MemcpyHtoD {
        device: 0,
        addr: 0x1000,
        bytes: 4096,
    })
    .unwrap();
    let mut counts = Vec::new();
    for (ki, ctas) in kernels.iter().enumerate() {
        let mut meta = KernelMeta::new(&format!("k{ki}"), [70000, 3, 3], [1024, 1, 1]);
        // Even kernels record atomic operands (format version 2), odd ones do not.
        meta.records_operands = ki % 2 == 0;
        let k = w.begin_kernel(meta).unwrap();
        w.add_command(Command::KernelLaunch {
            device: 0,
            kernel: k,
        })
        .unwrap();
        for (name, class) in OPCODES {
            w.add_opcode(OpcodeInfo::simple(name, class)).unwrap();
        }
        for cta in ctas {
            w.begin_cta(cta.id, cta.cluster).unwrap();
            for (wid, insts) in &cta.warps {
                w.begin_warp(*wid).unwrap();
                for i in insts {
                    let addrs = match &i.addr {
                        Addr::None => AddrRecord::None,
                        Addr::Stride(base, stride) => AddrRecord::Stride {
                            base: *base,
                            stride: *stride,
                        },
                        Addr::List(mode, v) => AddrRecord::List {
                            mode: *mode,
                            addrs: v,
                        },
                    };
                    let ops: &[u64] = if ki % 2 == 0 { &i.operands } else { &[] };
                    w.push_with_operands(
                        &RawInst {
                            pc: i.pc,
                            mask: i.mask,
                            opcode: i.opcode,
                            dsts: &i.dsts,
                            srcs: &i.srcs,
                            mem_width: i.mem_width,
                            imm: i.imm,
                            line: i.line,
                            addrs,
                        },
                        ops,
                    )
                    .unwrap();
                }
                w.end_warp().unwrap();
            }
            w.end_cta().unwrap();
        }
        counts.push(w.end_kernel().unwrap());
    }
    w.finish().unwrap();
    counts
}

fn lane_addrs(i: &Inst) -> Vec<(u32, u64)> {
    let lanes: Vec<u32> = (0..32).filter(|l| i.mask >> l & 1 == 1).collect();
    match &i.addr {
        Addr::None => vec![],
        Addr::Stride(base, stride) => lanes
            .iter()
            .enumerate()
            .map(|(k, &l)| (l, base.wrapping_add((k as i64 * *stride as i64) as u64)))
            .collect(),
        Addr::List(_, v) => lanes.iter().copied().zip(v.iter().copied()).collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn encode_decode_roundtrip(
        kernels in proptest::collection::vec(proptest::collection::vec(arb_cta(), 0..6), 1..3),
        chunk in prop_oneof![Just(64usize), Just(1024), Just(256 * 1024)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.tst");
        let counts = write(&path, &kernels, chunk);
        let t = TraceFile::open(&path).unwrap();
        let rep = verify_structure(&t).unwrap();
        let total: u64 = kernels.iter().flatten().flat_map(|c| &c.warps).map(|w| w.1.len() as u64).sum();
        prop_assert_eq!(rep.warp_insts, total);
        prop_assert_eq!(t.commands().len(), 1 + kernels.len());
        let mut dec = t.decoder();
        for (k, ctas) in kernels.iter().enumerate() {
            let meta = &t.kernels()[k];
            prop_assert_eq!(&meta.counts, &counts[k]);
            prop_assert_eq!(meta.counts.ctas, ctas.len() as u64);
            let threads: u64 = ctas.iter().flat_map(|c| &c.warps).flat_map(|w| &w.1).map(|i| i.mask.count_ones() as u64).sum();
            prop_assert_eq!(meta.counts.thread_insts, threads);
            for (ci, cta) in ctas.iter().enumerate() {
                let d = dec.kernel_cta(k, ci as u32).unwrap().clone();
                // Kept encoded and streamed warp by warp, it decodes to the same.
                let st = dec.kernel_cta_stream(k, ci as u32).unwrap();
                prop_assert_eq!(&st.decode().unwrap(), &d);
                prop_assert_eq!(&CtaStream::from_decoded(&d, t.slot_table(k)).unwrap().decode().unwrap(), &d);
                prop_assert_eq!(d.id, cta.id);
                prop_assert_eq!(d.cluster, cta.cluster);
                prop_assert_eq!(d.warps.len(), cta.warps.len());
                for (wi, (wid, insts)) in cta.warps.iter().enumerate() {
                    prop_assert_eq!(d.warps[wi].warp_id, *wid);
                    let got = d.warp(wi);
                    prop_assert_eq!(got.len(), insts.len());
                    let first = d.warps[wi].insts.start;
                    for (gi, (g, i)) in got.iter().zip(insts).enumerate() {
                        let want = (k % 2 == 0 && i.opcode == 3 && i.mask != 0)
                            .then_some(&i.operands[..]);
                        prop_assert_eq!(d.operands_of(first + gi, 1), want);
                        let st = &meta.statics[g.slot as usize];
                        prop_assert_eq!(g.pc, i.pc);
                        prop_assert_eq!(st.pc, i.pc);
                        prop_assert_eq!(g.mask, i.mask);
                        prop_assert_eq!(st.opcode, i.opcode);
                        prop_assert_eq!(g.class, OPCODES[i.opcode as usize].1);
                        prop_assert_eq!(&st.dsts, &i.dsts);
                        prop_assert_eq!(&st.srcs, &i.srcs);
                        prop_assert_eq!(st.mem_width, i.mem_width);
                        prop_assert_eq!(st.imm, i.imm);
                        prop_assert_eq!(st.line, i.line);
                        prop_assert_eq!(d.lane_addrs(g).collect::<Vec<_>>(), lane_addrs(i));
                        match (&i.addr, g.addrs) {
                            (Addr::None, Addrs::None) => {}
                            (Addr::Stride(b, s), Addrs::Stride { base, stride }) => {
                                prop_assert_eq!((*b, *s), (base, stride));
                            }
                            (Addr::List(mode, v), Addrs::List { start, len }) => {
                                prop_assert_eq!(g.addr_mode, *mode);
                                prop_assert_eq!(&d.addrs[start as usize..(start + len) as usize], &v[..]);
                            }
                            (a, b) => prop_assert!(false, "address kind changed: {:?} -> {:?}", a, b),
                        }
                    }
                }
            }
        }
    }
}
