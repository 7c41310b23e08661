//! `peer_stream`: a multi-GPU stream add with peer reads. `gpus` devices; device `g` owns
//! `a_g`, `b_g` and `c_g` (`n` floats each) and runs `c_g[i] = a_g[i] + b_{(g+1)%G}[i]`,
//! one thread per element: half of every kernel's loads read the next GPU's memory (over
//! NVLink or PCIe on a real node; CUDA's unified virtual addressing makes that an
//! ordinary load of a peer address). With `gpus=1` the kernel reads its own `b`.
//!
//! Commands, in order: for each device `g`, `Alloc` a_g, b_g, c_g and `MemcpyHtoD` a_g,
//! b_g (all on device `g`); then one `KernelLaunch` per device, in device order (kernel
//! `k` runs on device `k`). Per warp the kernel records what vectoradd records (14
//! instructions for a warp with a lane in range, 6 past the end), with the second load
//! from the peer array.

use super::{block_ranges, check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Buffer, Cmp, LaunchSpec, Recorder};
use tessera_traces::{Access, ArrayAnnotation};

/// Most devices: a large multi-node NVLink domain, and it keeps generation bounded.
pub const MAX_GPUS: u32 = 64;
/// Largest `n`: 1 GiB per array, and every index fits in 32 bits.
const MAX_N: u32 = 1 << 28;

/// The kernel's name: the one kernel every device launches.
pub const KERNEL: &str = "_Z14peerStreamAddPKfS0_Pfi";

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "peer_stream",
    help:
        "multi-GPU c_g[i] = a_g[i] + b_(g+1)[i]: each GPU reads half its inputs from the next GPU",
    params: &[
        ParamSpec {
            name: "gpus",
            default: "8",
            help: "devices (1 to 64)",
        },
        ParamSpec {
            name: "n",
            default: "131072",
            help: "elements per array (per GPU)",
        },
        ParamSpec {
            name: "block",
            default: "256",
            help: "threads per CTA",
        },
        ParamSpec {
            name: "seed",
            default: "1",
            help: "input generator seed",
        },
    ],
    run,
};

/// One device's arrays and their host copies.
struct Arrays {
    a: Buffer<f32>,
    b: Buffer<f32>,
    c: Buffer<f32>,
    a_h: Vec<f32>,
    b_h: Vec<f32>,
}

fn annotation(
    name: String,
    buf: &Buffer<f32>,
    access: Access,
    block: u32,
    ctas: u32,
) -> ArrayAnnotation {
    ArrayAnnotation {
        name,
        base: buf.base,
        bytes: buf.bytes(),
        access,
        ranges: block_ranges(buf, block, ctas),
    }
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let gpus = p.u32("gpus")?;
    let n = p.u32("n")?;
    let block = p.u32("block")?;
    let mut rng = SplitMix64(p.u64_any("seed")?);
    if gpus > MAX_GPUS {
        return Err(p.invalid(&format!("gpus={gpus}: at most {MAX_GPUS}")));
    }
    if n > MAX_N {
        return Err(p.invalid(&format!("n={n} is more than {MAX_N} elements")));
    }
    if block > 1024 {
        return Err(p.invalid(&format!("block={block}: at most 1024 threads per CTA")));
    }
    // Device 0 exists from the start; the others are added before any command.
    for _ in 1..gpus {
        rec.add_device();
    }
    let mut arrays = Vec::with_capacity(gpus as usize);
    for g in 0..gpus {
        rec.set_device(g)?;
        let a_h: Vec<f32> = (0..n).map(|_| rng.unit_f32()).collect();
        let b_h: Vec<f32> = (0..n).map(|_| rng.unit_f32()).collect();
        let a = rec.alloc::<f32>(&format!("a{g}"), n as u64)?;
        let b = rec.alloc::<f32>(&format!("b{g}"), n as u64)?;
        let c = rec.alloc::<f32>(&format!("c{g}"), n as u64)?;
        rec.upload(a, &a_h)?;
        rec.upload(b, &b_h)?;
        arrays.push(Arrays { a, b, c, a_h, b_h });
    }
    let ctas = n.div_ceil(block);
    for g in 0..gpus {
        rec.set_device(g)?;
        let peer = (g + 1) % gpus;
        let (own, next) = (&arrays[g as usize], &arrays[peer as usize]);
        let (a, b, c) = (own.a, next.b, own.c);
        let mut spec = LaunchSpec::new(KERNEL, [ctas, 1, 1], [block, 1, 1]);
        spec.blocking = false;
        spec.annotations = vec![
            annotation(format!("a{g}"), &a, Access::Read, block, ctas),
            annotation(format!("b{peer}"), &b, Access::Read, block, ctas),
            annotation(format!("c{g}"), &c, Access::ReadWrite, block, ctas),
        ];
        rec.launch(&spec, &|w| {
            let i = w.global_id_x();
            let out = w.icmp_imm(Cmp::Ge, &i, n);
            w.exit_if(out);
            let x = w.load(&a, &i);
            let y = w.load(&b, &i);
            let s = w.fadd(&x, &y);
            w.store(&c, &i, &s);
        })?;
    }
    for g in 0..gpus as usize {
        let got = rec.download(arrays[g].c)?;
        let next = &arrays[(g + 1) % gpus as usize];
        let want: Vec<f32> = arrays[g]
            .a_h
            .iter()
            .zip(&next.b_h)
            .map(|(x, y)| x + y)
            .collect();
        check_eq("peer_stream", &format!("c{g}"), &got, &want)?;
    }
    Ok(format!(
        "c_g = a_g + b_(g+1) verified on {gpus} GPUs x {n} elements"
    ))
}

#[cfg(test)]
mod tests {
    use super::KERNEL;
    use crate::workloads::generate;
    use crate::workloads::test_support::{param_error, params};
    use tessera_traces::{verify, Command, OpClass, TraceFile};

    fn record(gpus: u32, n: u32, block: u32) -> (tempfile::TempDir, TraceFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peer.tst");
        let (g, n, b) = (gpus.to_string(), n.to_string(), block.to_string());
        generate(
            "peer_stream",
            &params(&[("gpus", &g), ("n", &n), ("block", &b)]),
            80,
            &path,
        )
        .unwrap();
        let t = TraceFile::open(&path).unwrap();
        (dir, t)
    }

    /// The allocations `(device, base, end)` in command order.
    fn allocations(t: &TraceFile) -> Vec<(u32, u64, u64)> {
        t.commands()
            .iter()
            .filter_map(|c| match *c {
                Command::Alloc {
                    device,
                    addr,
                    bytes,
                } => Some((device, addr, addr + bytes)),
                _ => None,
            })
            .collect()
    }

    /// Lane accesses of kernel `k` of class `class`, split into (own device, peer device)
    /// by the allocation each address falls in; an address outside every allocation fails.
    fn own_and_peer(t: &TraceFile, k: usize, class: OpClass) -> (u64, u64) {
        let allocs = allocations(t);
        let dev = t.kernels()[k].device;
        let (mut own, mut peer) = (0u64, 0u64);
        let mut dec = t.decoder();
        for cta in 0..t.kernels()[k].counts.ctas as u32 {
            let d = dec.kernel_cta(k, cta).unwrap();
            for inst in &d.insts {
                if inst.class != class {
                    continue;
                }
                d.for_each_lane_addr(inst, |_, a| {
                    let Some(&(owner, _, _)) =
                        allocs.iter().find(|&&(_, lo, hi)| a >= lo && a + 4 <= hi)
                    else {
                        panic!("kernel {k}: address {a:#x} outside every allocation");
                    };
                    if owner == dev {
                        own += 1;
                    } else {
                        peer += 1;
                    }
                });
            }
        }
        (own, peer)
    }

    #[test]
    fn three_gpus_read_their_neighbours_b() {
        let (gpus, n, block) = (3u32, 1000u32, 128u32);
        let (_dir, t) = record(gpus, n, block);
        let sources: Vec<&str> = t
            .index()
            .devices
            .iter()
            .map(|d| d.source.as_str())
            .collect();
        assert_eq!(
            sources,
            [
                "kernelslist.g",
                "kernelslist_ctx_0001.g",
                "kernelslist_ctx_0002.g"
            ]
        );
        // Per device: three allocs, two uploads (a, b); then one launch per device.
        let mut want = Vec::new();
        let allocs = allocations(&t);
        for g in 0..gpus {
            let a = |i: usize| allocs[(3 * g) as usize + i];
            for i in 0..3 {
                want.push(Command::Alloc {
                    device: g,
                    addr: a(i).1,
                    bytes: n as u64 * 4,
                });
            }
            for i in 0..2 {
                want.push(Command::MemcpyHtoD {
                    device: g,
                    addr: a(i).1,
                    bytes: n as u64 * 4,
                });
            }
        }
        for g in 0..gpus {
            want.push(Command::KernelLaunch {
                device: g,
                kernel: g,
            });
        }
        assert_eq!(t.commands(), &want[..]);
        assert_eq!(t.kernels().len(), gpus as usize);
        for (k, m) in t.kernels().iter().enumerate() {
            assert_eq!(m.device, k as u32);
            assert_eq!(m.name, KERNEL);
            // a_k, b_(k+1), c_k, annotated at their allocations.
            let names: Vec<&str> = m.annotations.iter().map(|a| a.name.as_str()).collect();
            let next = (k + 1) % gpus as usize;
            assert_eq!(
                names,
                [format!("a{k}"), format!("b{next}"), format!("c{k}")]
            );
            assert_eq!(m.annotations[1].base, allocs[3 * next + 1].1);
            // Each thread loads a_k[i] (own) and b_(k+1)[i] (peer), stores c_k[i] (own).
            assert_eq!(
                own_and_peer(&t, k, OpClass::LoadGlobal),
                (n as u64, n as u64)
            );
            assert_eq!(own_and_peer(&t, k, OpClass::StoreGlobal), (n as u64, 0));
        }
        let rep = verify(&t).unwrap();
        assert_eq!(rep.kernels, gpus as u64);
        assert_eq!(rep.checked_accesses, 3 * n as u64 * gpus as u64);
    }

    #[test]
    fn one_gpu_has_no_peer_accesses() {
        let (_dir, t) = record(1, 300, 64);
        assert_eq!(t.index().devices.len(), 1);
        assert_eq!(t.kernels().len(), 1);
        assert_eq!(own_and_peer(&t, 0, OpClass::LoadGlobal), (600, 0));
        verify(&t).unwrap();
    }

    #[test]
    fn bad_parameters_are_refused() {
        for (k, v, what) in [
            ("gpus", "0", "at least 1"),
            ("gpus", "65", "at most 64"),
            ("block", "2048", "at most 1024"),
            ("n", "x", "whole number"),
        ] {
            let m = param_error("peer_stream", &[(k, v)]);
            assert!(m.contains(what), "{k}={v}: {m}");
        }
    }
}
