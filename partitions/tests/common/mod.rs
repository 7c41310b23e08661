//! Helpers shared by the memory-hierarchy tests (each test file compiles this module on its
//! own and uses part of it).
#![allow(dead_code)]

use tessera_partitions::config::GpuConfig;
use tessera_partitions::mem::{Access, MemRequest, Space};

/// `configs/<name>` with `--set`-style overrides, on the NoC's ports model: the harness
/// of these tests (`mem_system.rs`) delivers packets straight between SMs, channels and
/// link interfaces, with no crossbar unit between them.
pub fn preset(name: &str, sets: &[(&str, &str)]) -> GpuConfig {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(name);
    let sets: Vec<(String, String)> = std::iter::once(&("noc.model", "ports"))
        .chain(sets)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    GpuConfig::load(&path, &sets).unwrap_or_else(|e| panic!("{e}"))
}

/// A global-memory warp instruction of `width` bytes per lane over `lanes`.
pub fn request(access: Access, width: u32, lanes: &[(u32, u64)]) -> MemRequest<'_> {
    MemRequest {
        access,
        space: Space::Global,
        width_bytes: width,
        lanes,
        contiguous: None,
    }
}

/// A global load of `width` bytes per lane over `lanes`.
pub fn load(lanes: &[(u32, u64)], width: u32) -> MemRequest<'_> {
    request(Access::Load, width, lanes)
}

/// One item of a hand-made multi-device trace ([`write_trace`]).
#[derive(Clone, Debug)]
pub enum Item {
    /// `Alloc { device, addr, bytes }`.
    Alloc { device: u32, addr: u64, bytes: u64 },
    /// `MemcpyHtoD { device, addr, bytes }`.
    Memcpy { device: u32, addr: u64, bytes: u64 },
    /// A kernel of one CTA of one 32-thread warp launched on `device`: a dependent chain of
    /// single-lane 8-byte global loads from `loads` (each load's address register is the
    /// previous load's destination), then `fp32` dependent FFMAs, then EXIT.
    Kernel {
        device: u32,
        loads: Vec<u64>,
        fp32: u32,
    },
}

/// Writes `items` as a `.tst` trace at `path` (each kernel named `k<index>`).
pub fn write_trace(path: &std::path::Path, items: &[Item]) {
    use tessera_traces::{
        AddrRecord, Command, KernelMeta, OpClass, OpcodeInfo, RawInst, TraceWriter, WriterOptions,
    };
    let mut w = TraceWriter::create(path, WriterOptions::default()).unwrap();
    let devices = items
        .iter()
        .map(|i| match i {
            Item::Alloc { device, .. }
            | Item::Memcpy { device, .. }
            | Item::Kernel { device, .. } => *device,
        })
        .max()
        .unwrap_or(0);
    for d in 0..=devices {
        w.add_device(tessera_traces::DeviceInfo {
            source: format!("device{d}"),
        });
    }
    let mut kernels = 0;
    for item in items {
        match item {
            &Item::Alloc {
                device,
                addr,
                bytes,
            } => w
                .add_command(Command::Alloc {
                    device,
                    addr,
                    bytes,
                })
                .unwrap(),
            &Item::Memcpy {
                device,
                addr,
                bytes,
            } => w
                .add_command(Command::MemcpyHtoD {
                    device,
                    addr,
                    bytes,
                })
                .unwrap(),
            Item::Kernel {
                device,
                loads,
                fp32,
            } => {
                let mut meta = KernelMeta::new(&format!("k{kernels}"), [1, 1, 1], [32, 1, 1]);
                meta.device = *device;
                meta.nregs = 8;
                kernels += 1;
                let k = w.begin_kernel(meta).unwrap();
                w.add_command(Command::KernelLaunch {
                    device: *device,
                    kernel: k,
                })
                .unwrap();
                let mut ldg = OpcodeInfo::simple("LDG.E.64", OpClass::LoadGlobal);
                ldg.width_bytes = 8;
                ldg.dst_regs = 2;
                let ldg = w.add_opcode(ldg).unwrap();
                let ffma = w
                    .add_opcode(OpcodeInfo::simple("FFMA", OpClass::Fp32))
                    .unwrap();
                let exit = w
                    .add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit))
                    .unwrap();
                w.begin_cta([0, 0, 0], None).unwrap();
                w.begin_warp(0).unwrap();
                let mut pc = 0;
                for a in loads {
                    let addrs = [*a];
                    w.push(&RawInst {
                        pc,
                        mask: 1,
                        opcode: ldg,
                        dsts: &[2],
                        srcs: &[2],
                        mem_width: 8,
                        imm: None,
                        line: None,
                        addrs: AddrRecord::List {
                            mode: 0,
                            addrs: &addrs,
                        },
                    })
                    .unwrap();
                    pc += 16;
                }
                for _ in 0..*fp32 {
                    w.push(&RawInst {
                        pc,
                        mask: u32::MAX,
                        opcode: ffma,
                        dsts: &[4],
                        srcs: &[4, 5, 4],
                        mem_width: 0,
                        imm: None,
                        line: None,
                        addrs: AddrRecord::None,
                    })
                    .unwrap();
                    pc += 16;
                }
                w.push(&RawInst {
                    pc,
                    mask: u32::MAX,
                    opcode: exit,
                    dsts: &[],
                    srcs: &[],
                    mem_width: 0,
                    imm: None,
                    line: None,
                    addrs: AddrRecord::None,
                })
                .unwrap();
                w.end_warp().unwrap();
                w.end_cta().unwrap();
                w.end_kernel().unwrap();
            }
        }
    }
    w.finish().unwrap();
}

/// Runs the whole system of `cfg` on `trace` on this thread by conservative windows (the
/// engine's algorithm, without `tessera-cluster`, which depends on this crate): every
/// partition simulates `[T, T + lookahead)`, then messages between partitions are
/// delivered. Returns the stats.
pub fn run_system(
    cfg: &GpuConfig,
    trace: &tessera_traces::TraceFile,
) -> tessera_partitions::stats::RunStats {
    tessera_partitions::gpu::collect_stats(cfg, run_partitions(cfg, trace))
}

/// [`run_system`]'s run, returning the finished partitions (for `stats_part`).
pub fn run_partitions<'t>(
    cfg: &GpuConfig,
    trace: &'t tessera_traces::TraceFile,
) -> Vec<tessera_partitions::gpu::GpuPartition<'t>> {
    run_observed(cfg, trace, None)
}

/// [`run_partitions`] with `obs` attached to every unit before the run.
pub fn run_observed<'t>(
    cfg: &GpuConfig,
    trace: &'t tessera_traces::TraceFile,
    obs: Option<std::sync::Arc<dyn tessera_partitions::observe::Observer>>,
) -> Vec<tessera_partitions::gpu::GpuPartition<'t>> {
    use tessera_interconnect::{Outbox, Partition};
    use tessera_partitions::gpu::build;
    let mut sys = build(cfg, trace).unwrap_or_else(|e| panic!("{e}"));
    if let Some(o) = obs {
        sys.observe(o);
    }
    let owner: std::collections::HashMap<u32, usize> =
        sys.ports.iter().map(|&(p, i)| (p.0, i)).collect();
    let lookahead = sys
        .links
        .iter()
        .filter(|l| owner[&l.src.0] != owner[&l.dst.0])
        .map(|l| l.latency)
        .min()
        .unwrap_or(u64::MAX / 4);
    let mut parts = sys.partitions;
    let mut out = Outbox::new();
    while let Some(t) = parts.iter().filter_map(|p| p.next_event_time()).min() {
        let end = t.saturating_add(lookahead);
        let mut msgs = Vec::new();
        for p in &mut parts {
            p.run_until(end, &mut out).unwrap_or_else(|e| panic!("{e}"));
            msgs.extend(out.drain());
        }
        for m in msgs {
            assert!(m.arrive_at >= end, "a message inside the window");
            let dst = owner[&m.dst_port.0];
            parts[dst]
                .deliver(std::slice::from_ref(&m))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    for p in &parts {
        assert_eq!(p.stalled(), None, "the run went quiet with work left");
    }
    parts
}
