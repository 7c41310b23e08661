//! [`CtaStream`] and [`WarpCursor`] against [`decode_cta`]: on random CTA records, intact or
//! damaged, read as either format version, the stream is made exactly when `decode_cta`
//! succeeds and streams the same instructions, lane addresses and operands.

use proptest::prelude::*;
use std::sync::Arc;
use tessera_traces::codec::{decode_cta, CtaEncoder, ADDR_DELTA, ADDR_LIST};
use tessera_traces::*;

#[derive(Clone, Debug)]
struct Inst {
    slot: u32,
    mask: u32,
    kind: u8,
    base: u64,
    stride: i32,
    lanes: Vec<u64>,
    ops: Vec<u64>,
}

fn arb_slots() -> impl Strategy<Value = Vec<SlotInfo>> {
    proptest::collection::vec((any::<bool>(), 0u8..3, 0u32..64), 1..12).prop_map(|v| {
        v.into_iter()
            .map(|(has_mem, operands, pc)| SlotInfo {
                pc: pc * 16,
                class: if has_mem {
                    OpClass::LoadGlobal
                } else {
                    OpClass::Fp32
                },
                has_mem,
                operands: if has_mem { operands } else { 0 },
            })
            .collect()
    })
}

fn arb_inst() -> impl Strategy<Value = Inst> {
    (
        0u32..12,
        prop_oneof![Just(u32::MAX), Just(0u32), any::<u32>()],
        0u8..3,
        prop_oneof![0u64..1 << 20, any::<u64>()],
        any::<i32>(),
        proptest::collection::vec(0u64..4096, 32),
        proptest::collection::vec(any::<u64>(), 64),
    )
        .prop_map(|(slot, mask, kind, base, stride, lanes, ops)| Inst {
            slot,
            mask,
            kind,
            base,
            stride,
            lanes,
            ops,
        })
}

/// Encodes warps of `insts` (slots taken modulo the table) as one CTA record.
fn encode(slots: &[SlotInfo], warps: &[Vec<Inst>]) -> Vec<u8> {
    let mut enc = CtaEncoder::new();
    enc.begin_cta([3, 1, 0], None);
    for (w, insts) in warps.iter().enumerate() {
        enc.begin_warp(w as u32 * 2);
        for i in insts {
            let slot = i.slot % slots.len() as u32;
            let info = slots[slot as usize];
            let n = i.mask.count_ones() as usize;
            let list: Vec<u64>;
            let addrs = if !info.has_mem {
                AddrRecord::None
            } else if i.kind == 0 {
                AddrRecord::Stride {
                    base: i.base,
                    stride: i.stride,
                }
            } else {
                let mode = if i.kind == 1 { ADDR_LIST } else { ADDR_DELTA };
                let len = if mode == ADDR_DELTA { n.max(1) } else { n };
                list = i.lanes[..len]
                    .iter()
                    .map(|&x| i.base.wrapping_add(x))
                    .collect();
                AddrRecord::List { mode, addrs: &list }
            };
            enc.push(slot, i.mask, addrs);
            if info.operands > 0 && i.mask != 0 {
                enc.push_operands(&i.ops[..n * info.operands as usize]);
            }
        }
        enc.end_warp();
    }
    enc.finish_cta().to_vec()
}

/// Streams `rec` and checks it against `decode_cta`, also with a cursor that skips
/// operands.
fn check(rec: &[u8], slots: &Arc<[SlotInfo]>, version: u32) -> Result<(), TestCaseError> {
    let mut want = DecodedCta::default();
    let decoded = decode_cta(rec, slots, version, &mut want);
    let st = CtaStream::new(rec, slots.clone(), version);
    prop_assert_eq!(
        decoded.is_ok(),
        st.is_ok(),
        "{:?} vs {:?}",
        decoded,
        st.as_ref().err()
    );
    let Ok(st) = st else { return Ok(()) };
    prop_assert_eq!(&st.decode().unwrap(), &want);
    prop_assert_eq!(st.insts(), want.insts.len() as u64);
    prop_assert_eq!(st.max_slot(), want.insts.iter().map(|i| i.slot).max());
    // The timing model's way: peek, lanes through the cursor's source, advance.
    let mut cur = WarpCursor::new(false);
    for w in 0..st.n_warps() {
        cur.start(&st, w).unwrap();
        prop_assert_eq!(st.warp_id(w), Some(want.warps[w].warp_id));
        prop_assert_eq!(st.warp_len(w), Some(want.warp(w).len() as u32));
        for g in want.warp(w) {
            let i = *cur.peek().unwrap();
            prop_assert_eq!(
                (i.pc, i.mask, i.slot, i.class),
                (g.pc, g.mask, g.slot, g.class)
            );
            let mut got = Vec::new();
            cur.lane_source()
                .for_each_lane_addr(&i, |l, a| got.push((l, a)));
            prop_assert_eq!(got, want.lane_addrs(g).collect::<Vec<_>>());
            prop_assert_eq!(cur.operands(2), None);
            cur.advance(&st).unwrap();
        }
        prop_assert!(cur.peek().is_none());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn stream_equals_decode_cta(
        slots in arb_slots(),
        warps in proptest::collection::vec(proptest::collection::vec(arb_inst(), 0..90), 0..5),
        damage in proptest::option::of((any::<prop::sample::Index>(), any::<u8>(), any::<bool>())),
    ) {
        check_damaged(&slots, &warps, damage)?;
    }

    /// Warps that run the same code (the same static and mask columns, as most of a CTA's
    /// warps do) with addresses of their own; with `plain` masks (all lanes or none, one
    /// byte each, as in most code) a cursor takes its one-byte path.
    #[test]
    fn same_code_warps_stream_as_decoded(
        slots in arb_slots(),
        mut code in proptest::collection::vec(arb_inst(), 0..70),
        plain in any::<bool>(),
        moves in proptest::collection::vec((any::<u64>(), 0u64..300), 1..5),
        damage in proptest::option::of((any::<prop::sample::Index>(), any::<u8>(), any::<bool>())),
    ) {
        if plain {
            for i in &mut code {
                i.mask = if i.mask == 0 { 0 } else { u32::MAX };
            }
        }
        let warps: Vec<Vec<Inst>> = moves
            .iter()
            .map(|&(base, step)| {
                code.iter()
                    .map(|i| {
                        let mut i = i.clone();
                        i.base ^= base;
                        for l in &mut i.lanes {
                            *l = l.wrapping_add(step);
                        }
                        i
                    })
                    .collect()
            })
            .collect();
        check_damaged(&slots, &warps, damage)?;
    }
}

/// Encodes `warps` and damages the record as `damage` says (a byte replaced, or a cut).
fn encode_damaged(
    slots: &[SlotInfo],
    warps: &[Vec<Inst>],
    damage: Option<(prop::sample::Index, u8, bool)>,
) -> Vec<u8> {
    let mut rec = encode(slots, warps);
    if let Some((at, byte, truncate)) = damage {
        if !rec.is_empty() {
            let i = at.index(rec.len());
            if truncate {
                rec.truncate(i);
            } else {
                rec[i] = byte;
            }
        }
    }
    rec
}

/// Encodes `warps`, damages the record as `damage` says and checks it in both format
/// versions.
fn check_damaged(
    slots: &[SlotInfo],
    warps: &[Vec<Inst>],
    damage: Option<(prop::sample::Index, u8, bool)>,
) -> Result<(), TestCaseError> {
    let rec = encode_damaged(slots, warps, damage);
    let slots: Arc<[SlotInfo]> = slots.to_vec().into();
    for version in [1, 2] {
        check(&rec, &slots, version)?;
    }
    Ok(())
}

/// A format-version-1 file (kept as the version-1 build wrote it) streams as it decodes.
#[test]
fn version_1_file_streams() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/v4-imm-format1.tst"
    );
    let t = TraceFile::open(std::path::Path::new(path)).unwrap();
    assert_eq!(t.version(), 1);
    let mut dec = t.decoder();
    let mut n = 0;
    for k in 0..t.kernels().len() {
        for c in 0..t.kernels()[k].counts.ctas as u32 {
            let want = dec.kernel_cta(k, c).unwrap().clone();
            let st = dec.kernel_cta_stream(k, c).unwrap();
            assert_eq!(st.decode().unwrap(), want);
            n += want.insts.len();
        }
    }
    assert!(n > 0);
}

/// One record read through a reused [`StreamScratch`] (as a decoder reads a kernel's CTAs
/// one after another) must give what a fresh one gives: the stream, or the same error.
fn check_reused(
    rec: &[u8],
    slots: &Arc<[SlotInfo]>,
    version: u32,
    scratch: &mut StreamScratch,
) -> Result<(), TestCaseError> {
    let fresh = CtaStream::new(rec, slots.clone(), version);
    let reused = CtaStream::new_in(rec, slots.clone(), version, scratch);
    match (fresh, reused) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a.decode().unwrap(), b.decode().unwrap()),
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        (a, b) => prop_assert!(false, "fresh {:?}, reused {:?}", a.err(), b.err()),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// CTAs of one kernel running the same code, their warps' bases stepping by a fixed
    /// amount (warps whose records repeat byte for byte after the first two) or not,
    /// some of them damaged, read one after another through one scratch (under two
    /// static tables, as two kernels would be), each checked against a fresh read and
    /// against `decode_cta`.
    #[test]
    fn reused_scratch_reads_as_fresh(
        slots in arb_slots(),
        other in arb_slots(),
        mut code in proptest::collection::vec(arb_inst(), 0..40),
        stride_only in any::<bool>(),
        ctas in proptest::collection::vec(
            (
                any::<u64>(),
                prop_oneof![Just(0u64), Just(128), any::<u64>()],
                1usize..6,
                proptest::option::of((any::<prop::sample::Index>(), any::<u8>(), any::<bool>())),
            ),
            1..6,
        ),
    ) {
        if stride_only {
            for i in &mut code {
                i.kind = 0;
            }
        }
        let tables: [Arc<[SlotInfo]>; 2] = [slots.into(), other.into()];
        let mut scratch = StreamScratch::default();
        for version in [2, 1] {
            for (c, &(base, step, n_warps, damage)) in ctas.iter().enumerate() {
                let warps: Vec<Vec<Inst>> = (0..n_warps as u64)
                    .map(|w| {
                        code.iter()
                            .map(|i| {
                                let mut i = i.clone();
                                i.base = i.base.wrapping_add(base).wrapping_add(w.wrapping_mul(step));
                                i
                            })
                            .collect()
                    })
                    .collect();
                let slots = &tables[usize::from(c == 3)];
                let rec = encode_damaged(slots, &warps, damage);
                check_reused(&rec, slots, version, &mut scratch)?;
                check(&rec, slots, version)?;
            }
        }
    }
}

/// A region's body served by the cursor: the instructions of the stream with their masks
/// narrowed to the filter and the rebased accesses' addresses moved by `stride * delta`
/// per lane; a region that runs once keeps one instruction, a loop the whole body (which
/// [`WarpCursor::loop_back`] serves again).
#[test]
fn a_region_body_is_served_filtered_rebased_and_kept_as_needed() {
    let slots: Arc<[SlotInfo]> = Arc::from(vec![
        SlotInfo {
            pc: 0x10,
            class: OpClass::LoadGlobal,
            has_mem: true,
            operands: 0,
        },
        SlotInfo {
            pc: 0x20,
            class: OpClass::Fp32,
            has_mem: false,
            operands: 0,
        },
    ]);
    let n = 40u64;
    let mut enc = CtaEncoder::new();
    enc.begin_cta([0, 0, 0], None);
    enc.begin_warp(0);
    for i in 0..n {
        enc.push(
            (i % 2) as u32,
            u32::MAX,
            if i % 2 == 0 {
                AddrRecord::Stride {
                    base: 0x1000 + 0x100 * i,
                    stride: 4,
                }
            } else {
                AddrRecord::None
            },
        );
    }
    enc.end_warp();
    let rec = enc.finish_cta().to_vec();
    let st = CtaStream::new(&rec, slots, FORMAT_VERSION).unwrap();
    let rebase = [RebasedAccess {
        pc: 0x10,
        stride: 8,
    }];
    let mut delta = [0i64; 32];
    for (l, d) in delta.iter_mut().enumerate() {
        *d = l as i64 - 3;
    }
    for once in [true, false] {
        let mut cur = WarpCursor::new(false);
        cur.start(&st, 0).unwrap();
        cur.loop_begin(once);
        cur.set_rebase(&rebase, &delta);
        cur.set_filter(0x0000_ff00);
        let mut kept = 0;
        for i in 0..n {
            let x = *cur.peek().unwrap();
            assert_eq!(
                (x.pc, x.mask),
                (if i % 2 == 0 { 0x10 } else { 0x20 }, 0xff00)
            );
            let mut got = Vec::new();
            cur.lane_source()
                .for_each_lane_addr(&x, |l, a| got.push((l, a)));
            if i % 2 == 0 {
                let want: Vec<(u32, u64)> = (8..16u32)
                    .map(|l| {
                        let a = 0x1000 + 0x100 * i + 4 * l as u64;
                        (l, a.wrapping_add((8 * (l as i64 - 3)) as u64))
                    })
                    .collect();
                assert_eq!(got, want, "instruction {i}");
            }
            kept = kept.max(cur.kept());
            cur.advance(&st).unwrap();
        }
        if once {
            assert_eq!(kept, 1, "a branch keeps the instruction served only");
        } else {
            assert_eq!(kept, n as usize, "a loop keeps its whole body");
            // Served again from the kept body, unfiltered and not rebased.
            cur.loop_back(u32::MAX);
            assert!(!cur.fresh());
            let x = *cur.peek().unwrap();
            let mut first = None;
            cur.lane_source().for_each_lane_addr(&x, |l, a| {
                if l == 0 {
                    first = Some(a)
                }
            });
            assert_eq!((x.mask, first), (u32::MAX, Some(0x1000)));
        }
    }
}
