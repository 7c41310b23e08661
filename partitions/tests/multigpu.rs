//! Multi-GPU systems (`configs/dgx-8gpu.yaml`: 8 A100s on NVSwitch, fed over PCIe): a peer
//! load costs exactly the GPU-link traversals the config describes, a host-to-device copy
//! delays the next kernel on its device by exactly its host-link time, and kernels of
//! different GPUs overlap while kernels of one GPU run in order. Traces are written by hand
//! (`common::write_trace`) and run on all partitions by `common::run_system`; expectations
//! are computed from the config's numbers by the composition documented in `mem/link.rs`
//! and `gpu/host.rs`, independently of the model's code.

mod common;
#[path = "common/mem_system.rs"]
mod mem_system;
use mem_system::MemSystem;

use common::{load, preset, run_partitions, run_system, write_trace, Item};
use tessera_partitions::config::GpuConfig;
use tessera_partitions::stats::RunStats;
use tessera_partitions::Picos;
use tessera_traces::TraceFile;

fn dgx(sets: &[(&str, &str)]) -> GpuConfig {
    preset("dgx-8gpu.yaml", sets)
}

/// Device `d`'s buffer: 1 GiB apart, page aligned.
fn base(d: u32) -> u64 {
    0x1_0000_0000 + d as u64 * 0x4000_0000
}

fn run(cfg: &GpuConfig, items: &[Item]) -> RunStats {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.tst");
    write_trace(&path, items);
    let trace = TraceFile::open(&path).unwrap();
    run_system(cfg, &trace)
}

/// Picoseconds a packet of `bytes` (plus the per-packet overhead) occupies a GPU port.
fn gpu_serialization_ps(cfg: &GpuConfig, bytes: u64) -> Picos {
    let l = &cfg.system.gpu_link;
    let wire = (bytes + l.packet_overhead_bytes as u64) as u128;
    let per_port = (l.bandwidth_bytes_per_cycle / cfg.chiplets) as u128;
    (wire * 1_000_000_000_000).div_ceil(per_port * l.clock_hz as u128) as Picos
}

/// Time of a host-to-device copy of `bytes`: latency plus bytes at the bandwidth.
fn copy_ps(cfg: &GpuConfig, bytes: u64) -> Picos {
    let h = &cfg.system.host_link;
    h.latency_ps
        + (bytes as u128 * 1_000_000_000_000).div_ceil(h.bandwidth_bytes_per_s as u128) as Picos
}

/// A dependent chain of single-lane 8-byte loads from SM 0 (GPU 0) over `addrs`, twice (the
/// second pass measured: L2 hits at the lines' homes, the footprint far beyond the L1D);
/// the average latency. The memory units alone (`MemSystem`), as `chiplets.rs` measures.
fn chase_ps(cfg: &GpuConfig, commands: &[tessera_traces::Command], addrs: &[u64]) -> Picos {
    let mut m = MemSystem::with_commands(cfg, commands);
    let mut t = 0;
    let pass = |m: &mut MemSystem, t: &mut Picos| {
        let t0 = *t;
        for &a in addrs {
            let lanes = [(0u32, a)];
            *t = m.access(*t, 0, &load(&lanes, 8));
        }
        *t - t0
    };
    pass(&mut m, &mut t);
    let measured = pass(&mut m, &mut t);
    assert_eq!(measured % addrs.len() as u64, 0, "every load alike");
    measured / addrs.len() as u64
}

/// Peer minus local L2-hit latency from SM 0 of GPU 0, to the picosecond: two more NoC
/// traversals (SM to the link interface, the home's interface to the L2 slice, each way
/// one) and, each way, two GPU-link hops (up to NVSwitch, down to GPU 1), each its latency
/// plus the packet's serialization on the port (a request: 8 B header; a one-sector reply:
/// 8 B header + 32 B; each plus `packet_overhead_bytes`).
///
/// Also with 4 chiplets per GPU (`a100-4chiplet.yaml`, 2 GPUs, each chiplet's port a
/// quarter of the GPU's bandwidth): the local lines are those of the chiplet of SM 0, and a
/// peer line on any chiplet of GPU 1 costs the same (the switch reaches every chiplet's
/// port directly).
#[test]
fn peer_pointer_chase_costs_exactly_the_gpu_link_traversals() {
    let chiplets4 = preset(
        "a100-4chiplet.yaml",
        &[
            ("system.gpus", "2"),
            ("system.gpu_link.latency_ps", "300000"),
        ],
    );
    for cfg in [dgx(&[]), chiplets4] {
        let lines = 8192u64;
        let bytes = lines * 128 * cfg.chiplets as u64;
        let commands: Vec<_> = (0..2)
            .map(|d| tessera_traces::Command::Alloc {
                device: d,
                addr: base(d),
                bytes,
            })
            .collect();
        // The k-th line of the pages homed at chiplet 0 of its GPU (page interleave).
        let page = cfg.package.home_page_bytes;
        let n = cfg.chiplets as u64;
        let line = |d: u32, k: u64| base(d) + (k * 128 / page) * n * page + (k * 128) % page;
        let local: Vec<u64> = (0..lines).map(|k| line(0, k)).collect();
        // Peer lines on every chiplet of GPU 1 in turn.
        let peer: Vec<u64> = (0..lines).map(|k| line(1, k) + (k % n) * page).collect();
        let (l, r) = (
            chase_ps(&cfg, &commands, &local),
            chase_ps(&cfg, &commands, &peer),
        );
        let noc = cfg.noc.latency_cycles as u64 * cfg.noc_period_ps();
        let lat = cfg.system.gpu_link.latency_ps;
        let request = gpu_serialization_ps(&cfg, 8);
        let reply = gpu_serialization_ps(&cfg, 8 + cfg.l2.sector_bytes as u64);
        assert_eq!(
            r - l,
            2 * noc + 2 * (2 * lat + request + reply),
            "{}: peer {r} ps, local {l} ps",
            cfg.name
        );
    }
}

/// The same chase as a kernel of the whole system (64 lines copied in first, so every load
/// misses L1 and hits the home L2): the peer kernel takes the per-load difference above
/// longer, within a core cycle per load (the SM sees each reply at its next cycle), every
/// peer load is counted, served by GPU 1's L2 (not cached at GPU 0's), and crosses the four
/// ports on its way.
#[test]
fn peer_loads_in_a_kernel_cross_the_switch_and_are_counted() {
    let cfg = dgx(&[]);
    let n = 64u64;
    let bytes = n * 128;
    let lines = |d: u32| (0..n).map(|k| base(d) + k * 128).collect::<Vec<_>>();
    let items = |d: u32| {
        let mut v: Vec<Item> = (0..2)
            .map(|g| Item::Alloc {
                device: g,
                addr: base(g),
                bytes,
            })
            .collect();
        for g in 0..2 {
            v.push(Item::Memcpy {
                device: g,
                addr: base(g),
                bytes,
            });
        }
        v.push(Item::Kernel {
            device: 0,
            loads: lines(d),
            fp32: 0,
        });
        v
    };
    let (local, peer) = (run(&cfg, &items(0)), run(&cfg, &items(1)));
    let time = |s: &RunStats| s.kernels[0].end_ps - s.kernels[0].start_ps;
    assert_eq!(local.kernels[0].start_ps, peer.kernels[0].start_ps);
    let noc = cfg.noc.latency_cycles as u64 * cfg.noc_period_ps();
    let lat = cfg.system.gpu_link.latency_ps;
    let request = gpu_serialization_ps(&cfg, 8);
    let reply = gpu_serialization_ps(&cfg, 8 + cfg.l2.sector_bytes as u64);
    let per_load = 2 * noc + 2 * (2 * lat + request + reply);
    let extra = time(&peer) - time(&local);
    let period = cfg.core_period_ps();
    assert!(
        extra.abs_diff(n * per_load) < n * period,
        "peer {} ps, local {} ps: {extra} ps more, expected {} ps within {} ps",
        time(&peer),
        time(&local),
        n * per_load,
        n * period
    );
    for s in [&local, &peer] {
        assert_eq!(s.totals.l2_accesses, n, "one sector per load");
        assert_eq!(s.totals.l2_hits, n);
    }
    assert_eq!(local.totals.peer_requests, 0);
    assert_eq!(peer.totals.peer_requests, n);
    assert_eq!(peer.chiplets[0].memory.peer_requests, n);
    assert_eq!((peer.chiplets[0].gpu, peer.chiplets[1].gpu), (0, 1));
    assert_eq!(peer.chiplets[1].memory.l2_hits, n);
    assert_eq!(peer.chiplets[0].memory.l2_accesses, 0);
    let packets = |from: &str, to: &str| {
        peer.links
            .iter()
            .find(|l| l.from == from && l.to == to)
            .map(|l| l.packets)
    };
    for (from, to) in [
        ("gpu0", "nvswitch"),
        ("nvswitch", "gpu1"),
        ("gpu1", "nvswitch"),
        ("nvswitch", "gpu0"),
    ] {
        assert_eq!(packets(from, to), Some(n), "{from} -> {to}");
    }
    assert_eq!(packets("gpu2", "nvswitch"), Some(0));
}

/// A copy of `B` bytes to device 1 delays the next kernel on device 1 by exactly
/// `host_link.latency_ps + B / bandwidth`; a copy waits for its device's earlier kernels
/// (seen by the host `completion_ps` after they end) but not for another device's.
#[test]
fn memcpy_takes_host_link_time_and_waits_for_its_device_only() {
    let cfg = dgx(&[]);
    let b = 1u64 << 20;
    let alloc = |d: u32| Item::Alloc {
        device: d,
        addr: base(d),
        bytes: b,
    };
    let copy = |d: u32| Item::Memcpy {
        device: d,
        addr: base(d),
        bytes: b,
    };
    let kernel = |d: u32| Item::Kernel {
        device: d,
        loads: vec![],
        fp32: 200,
    };
    let without = run(&cfg, &[alloc(1), kernel(1)]);
    let with = run(&cfg, &[alloc(1), copy(1), kernel(1)]);
    let c = copy_ps(&cfg, b);
    assert!(c > 40_000_000, "1 MiB over PCIe: about 42 us, found {c} ps");
    // Submitted exactly that much later; it ends that much later too, within the core
    // cycle its CTA's start is aligned to.
    assert_eq!(with.kernels[0].start_ps - without.kernels[0].start_ps, c);
    let period = cfg.core_period_ps();
    let later = with.kernels[0].end_ps - without.kernels[0].end_ps;
    assert!(later.abs_diff(c) < period, "{later} ps later, copy {c} ps");
    assert_eq!(with.kernels[0].gpu, 1);

    // Behind a kernel of its own device: the host sees it end, then copies.
    let s = run(&cfg, &[alloc(1), kernel(1), copy(1), kernel(1)]);
    let done = s.kernels[0].end_ps + cfg.system.host_link.completion_ps;
    assert_eq!(s.kernels[1].start_ps, done + c);
    // Behind another device's kernel: no wait.
    let s = run(&cfg, &[alloc(2), kernel(1), copy(2), kernel(2)]);
    let h = cfg.launch.host_to_gcp_ps;
    assert_eq!(s.kernels[1].start_ps, s.kernels[0].start_ps + h + c);
    assert!(s.kernels[1].start_ps < s.kernels[0].end_ps + c);
}

/// Two compute-only kernels (one warp, a chain of dependent FFMAs) launched back to back:
/// on two devices the second starts (is submitted, and runs) before the first ends and both
/// take the same time; on one device the second runs only after the first, ending its
/// GPU-side duration after it (both within the core cycle the SM aligns a CTA's start to).
#[test]
fn kernels_of_two_devices_overlap_and_of_one_device_do_not() {
    let cfg = dgx(&[]);
    let kernel = |d: u32| Item::Kernel {
        device: d,
        loads: vec![],
        fp32: 2000,
    };
    let two = run(&cfg, &[kernel(0), kernel(1)]);
    let one = run(&cfg, &[kernel(0), kernel(0)]);
    let h = cfg.launch.host_to_gcp_ps;
    let (a, b) = (&two.kernels[0], &two.kernels[1]);
    assert_eq!((a.gpu, b.gpu), (0, 1));
    assert_eq!(b.start_ps, a.start_ps + h, "launches spaced by the host");
    assert!(
        b.start_ps < a.end_ps,
        "the second starts before the first ends"
    );
    let period = cfg.core_period_ps();
    let (ta, tb) = (a.end_ps - a.start_ps, b.end_ps - b.start_ps);
    assert!(
        ta.abs_diff(tb) < period,
        "alike on any GPU: {ta} ps, {tb} ps"
    );
    // The time from the kernel's arrival at its global CP to its completion.
    let gpu_side = a.end_ps - a.start_ps - h;
    assert!(gpu_side > 2 * h, "the kernel outlasts the launch spacing");
    let (a1, b1) = (&one.kernels[0], &one.kernels[1]);
    assert_eq!((a1.gpu, b1.gpu), (0, 0));
    assert_eq!(a1.end_ps, a.end_ps);
    let after = b1.end_ps - a1.end_ps;
    assert!(
        after.abs_diff(gpu_side) < period,
        "the second starts when the first ends: it ends {after} ps after it, not {gpu_side}"
    );
    assert!(two.totals.sim_time_ps < one.totals.sim_time_ps);
    assert_eq!(two.totals.gpus, 8);
}

/// A trace naming a device the system does not have is an error naming the key.
#[test]
fn a_device_beyond_the_gpus_is_an_error() {
    let cfg = dgx(&[("system.gpus", "2")]);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.tst");
    write_trace(
        &path,
        &[Item::Kernel {
            device: 3,
            loads: vec![],
            fp32: 1,
        }],
    );
    let trace = TraceFile::open(&path).unwrap();
    let e = tessera_partitions::gpu::build(&cfg, &trace)
        .err()
        .expect("an error")
        .to_string();
    assert!(
        e.contains("device 3") && e.contains("system.gpus = 2"),
        "{e}"
    );
}

/// The stats of a multi-GPU run made as MPI ranks make them (a part per partition, merged
/// in any order) are the one-process stats: kernels of several GPUs come back in trace
/// order, each GPU's chiplets and fabric ports in chiplet order.
#[test]
fn stats_parts_of_each_gpu_merge_to_the_whole_run() {
    use tessera_partitions::gpu::{collect_stats, merge_stats, run_end_ps, stats_part};
    let cfg = dgx(&[("system.gpus", "4")]);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.tst");
    let bytes = 64 * 128;
    let mut items: Vec<Item> = (0..4)
        .map(|d| Item::Alloc {
            device: d,
            addr: base(d),
            bytes,
        })
        .collect();
    for d in [2u32, 0, 3, 1] {
        items.push(Item::Kernel {
            device: d,
            loads: (0..16).map(|k| base((d + 1) % 4) + k * 128).collect(),
            fp32: 10 * (d + 1),
        });
    }
    write_trace(&path, &items);
    let trace = TraceFile::open(&path).unwrap();
    let whole = collect_stats(&cfg, run_partitions(&cfg, &trace));
    assert_eq!(
        whole.kernels.iter().map(|k| k.gpu).collect::<Vec<_>>(),
        [2, 0, 3, 1],
        "trace order"
    );
    let parts = run_partitions(&cfg, &trace);
    let end = run_end_ps(&parts);
    let mut split: Vec<_> = parts
        .into_iter()
        .map(|p| stats_part(&cfg, vec![p], end))
        .collect();
    split.reverse();
    assert_eq!(merge_stats(&cfg, split), whole);
}

/// Every SM of GPU 0 streams full-line loads of lines homed on GPU 1 (L2 hits there after a
/// host copy): the replies all cross NVSwitch's port down to GPU 0, the narrowest resource
/// (300 GB/s against GPU 1's L2). The port moves exactly its wire bytes, never faster than
/// its bandwidth over the run, and the stream keeps it mostly busy.
#[test]
fn gpu_port_bandwidth_is_never_exceeded_under_streaming() {
    let cfg = dgx(&[("system.gpus", "2")]);
    let lines = 4 * 1024 * 1024 / 128u64;
    let commands = [tessera_traces::Command::Alloc {
        device: 1,
        addr: base(1),
        bytes: lines * 128,
    }];
    let mut m = MemSystem::with_commands(&cfg, &commands);
    m.memcpy_to_device(base(1), lines * 128);
    let sms = cfg.core.sm_count as u64;
    let core = cfg.core_period_ps();
    let mut lanes = [(0u32, 0u64); 32];
    for i in 0..lines {
        let a = base(1) + i * 128;
        for (l, lane) in lanes.iter_mut().enumerate() {
            *lane = (l as u32, a + 4 * l as u64);
        }
        m.issue((i / sms) * core, (i % sms) as u32, &load(&lanes, 4));
    }
    let end = m.run().iter().map(|&(_, t)| t).max().unwrap_or(0);
    let reports = m.link_reports();
    let down = reports
        .iter()
        .find(|r| r.gpu_link && r.from.is_none() && r.to == Some(0))
        .expect("the switch's port down to GPU 0");
    assert_eq!(down.names, ("nvswitch".to_string(), "gpu0".to_string()));
    let overhead = cfg.system.gpu_link.packet_overhead_bytes as u64;
    assert_eq!(down.stats.packets, lines);
    assert_eq!(down.stats.wire_bytes, lines * (8 + 128 + overhead));
    let l = &cfg.system.gpu_link;
    let bw = l.bandwidth_bytes_per_cycle as f64 * l.clock_hz as f64;
    let busy = down.stats.wire_bytes as f64 * 1e12 / bw;
    assert_eq!(down.busy_ps, busy.ceil() as u64);
    let achieved = down.stats.wire_bytes as f64 * 1e12 / end as f64;
    assert!(
        achieved <= bw,
        "the port moved more than its bandwidth allows"
    );
    assert!(
        achieved >= 0.8 * bw,
        "{:.1}% of the port",
        100.0 * achieved / bw
    );
    assert_eq!(m.stats().peer_requests, lines);
    assert_eq!(m.stats().l2_hits, lines * 4, "every sector a hit at GPU 1");
}

/// `topology: pcie_host` is the same switch-shaped fabric under the root complex's name;
/// every chiplet of every GPU has its port up and the switch's port down, in chiplet order.
#[test]
fn gpu_fabric_ports_are_named_by_topology() {
    let cfg = preset(
        "a100-4chiplet.yaml",
        &[
            ("system.gpus", "2"),
            ("system.gpu_link.topology", "pcie_host"),
        ],
    );
    let m = MemSystem::new(&cfg);
    let names: Vec<(String, String)> = m
        .link_reports()
        .into_iter()
        .filter(|r| r.gpu_link)
        .map(|r| r.names)
        .collect();
    let mut want = Vec::new();
    for k in 0..8 {
        let port = format!("gpu{}.chiplet{k}", k / 4);
        want.push((port.clone(), "pcie_host".to_string()));
        want.push(("pcie_host".to_string(), port));
    }
    assert_eq!(names, want);
    // Package links keep their chiplet names, each GPU's switch named by its GPU.
    assert!(m
        .link_reports()
        .iter()
        .any(|r| r.names == ("gpu1.switch".to_string(), "chiplet5".to_string())));
}
