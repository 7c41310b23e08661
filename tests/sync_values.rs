//! Synchronization as values from the command line (issue 24): older traces replay as
//! recorded and say so, a malformed spin region is a clear error, and the recorded
//! synchronization workloads run with their spin counts from the simulated timing.

mod common;

use common::*;
use tessera_traces::{
    AddrRecord, Command, ExitTerm, KernelMeta, OpClass, OpcodeInfo, RawInst, SpinRegion, SyncCmp,
    TraceWriter, WriterOptions,
};

/// A recorded trace of format version 2 (written by the build before version 3: spinlock,
/// 4 CTAs of 64 threads, 2 critical sections per warp) still runs, replaying its spin
/// iterations as recorded, and the stats say so.
#[test]
fn a_format_2_trace_replays_its_synchronization_as_recorded() {
    let tst = data("spinlock-format2.tst");
    let b = std::fs::read(&tst).unwrap();
    assert_eq!(u32::from_le_bytes([b[8], b[9], b[10], b[11]]), 2);
    let v = run_json("a100-4chiplet.yaml", &["--trace", tst.to_str().unwrap()]);
    assert_eq!(v["provenance"]["input"]["sync"], "as recorded");
    assert!(v.get("sync").is_none(), "no sync object without sync words");
    assert_eq!(
        v["totals"]["warp_insts"], 520,
        "every recorded instruction, once"
    );
}

/// A spin region whose test is not a branch is refused when the trace is opened, naming the
/// kernel and the region's PCs.
#[test]
fn a_malformed_spin_region_names_the_kernel_and_region() {
    let tmp = tempfile::tempdir().unwrap();
    let tst = tmp.path().join("bad.tst");
    let mut w = TraceWriter::create(&tst, WriterOptions::default()).unwrap();
    let mut meta = KernelMeta::new("_Z4spinv", [1, 1, 1], [32, 1, 1]);
    meta.records_operands = true;
    meta.spin_regions = vec![SpinRegion {
        start_pc: 0x10,
        test_pc: 0x20,
        end_pc: 0x30,
        terms: vec![ExitTerm {
            value: 0,
            cmp: SyncCmp::Eq,
        }],
        all: true,
        backoff_base: 0,
        backoff_max: 0,
        label: "flag set".into(),
    }];
    let k = w.begin_kernel(meta).unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
    let add = w
        .add_opcode(OpcodeInfo::simple("IADD3", OpClass::Int))
        .unwrap();
    let exit = w
        .add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit))
        .unwrap();
    w.begin_cta([0, 0, 0], None).unwrap();
    w.begin_warp(0).unwrap();
    for (pc, op) in [(0x10, add), (0x20, add), (0x30, add), (0x40, exit)] {
        // The test's constants, one per term and lane.
        let consts = if pc == 0x20 {
            vec![0u64; 32]
        } else {
            Vec::new()
        };
        w.push_with_operands(
            &RawInst {
                pc,
                mask: u32::MAX,
                opcode: op,
                dsts: &[],
                srcs: &[],
                mem_width: 0,
                imm: None,
                line: None,
                addrs: AddrRecord::None,
            },
            &consts,
        )
        .unwrap();
    }
    w.end_warp().unwrap();
    w.end_cta().unwrap();
    w.end_kernel().unwrap();
    w.finish().unwrap();
    let o = tessera(&[
        "run",
        "--config",
        config("a100.yaml").to_str().unwrap(),
        "--trace",
        tst.to_str().unwrap(),
    ]);
    assert_clean_failure(
        &o,
        &[
            "kernel 0 (_Z4spinv): spin region 0 (pc 0x10, test 0x20, back-edge 0x30)",
            "its test must be a branch, not int",
        ],
    );
}
