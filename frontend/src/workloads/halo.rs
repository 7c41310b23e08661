//! `halo`: a multi-GPU 2-D five-point stencil with halo rows read from the neighbour GPUs.
//! The global grid is `gpus * rows` rows of `cols` floats on a torus; device `g` owns
//! rows `[g * rows, (g + 1) * rows)` as `in_g` and `out_g` and computes
//! `out[y][x] = (((c + left) + right) + up) + down) * 0.2`, one thread per element. Its
//! top row's `up` is the last row of `in_(g-1)` and its bottom row's `down` the first row
//! of `in_(g+1)` (periodic across GPUs): peer loads through unified virtual addressing,
//! `2 * cols` lanes per kernel when `gpus >= 2`. Left and right wrap within the row.
//!
//! Commands, in order: for each device `g`, `Alloc` in_g, out_g and `MemcpyHtoD` in_g;
//! then one `KernelLaunch` per device, in device order (kernel `k` runs on device `k`).
//! The up and down addresses are chosen per lane with `SEL` between the own and the peer
//! address, so each warp records one load per neighbour, no divergence.

use super::{block_ranges, check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Buffer, Cmp, LaunchSpec, Recorder};
use tessera_traces::{Access, ArrayAnnotation, CtaRange};

/// Most devices (as `peer_stream`).
pub const MAX_GPUS: u32 = 64;
/// Largest slab: 1 GiB per array, every index within 32 bits.
const MAX_ELEMS: u64 = 1 << 28;
/// The stencil weight.
const W: f32 = 0.2;

/// The kernel's name: the one kernel every device launches.
pub const KERNEL: &str = "_Z10haloStep2DPKfS0_S0_Pfjj";

pub static SPEC: WorkloadSpec = WorkloadSpec {
    name: "halo",
    help: "multi-GPU 2-D five-point stencil on a torus split by rows; edge rows read halo rows from the neighbour GPUs",
    params: &[
        ParamSpec {
            name: "gpus",
            default: "8",
            help: "devices (1 to 64)",
        },
        ParamSpec {
            name: "rows",
            default: "64",
            help: "rows per GPU",
        },
        ParamSpec {
            name: "cols",
            default: "1024",
            help: "floats per row",
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

/// Per CTA of `ctas` (of `block` threads over `len` elements), the part of array `buf`
/// it reads when element `e` of the slab reads `buf[map(e)]`, for the elements of the
/// CTA in `[lo, hi)` (the halo row); CTAs with none are left out.
fn halo_ranges(
    buf: &Buffer<f32>,
    block: u32,
    ctas: u32,
    (lo, hi): (u64, u64),
    shift: u64,
) -> Vec<CtaRange> {
    (0..ctas)
        .filter_map(|c| {
            let a = (c as u64 * block as u64).max(lo);
            let b = ((c as u64 + 1) * block as u64).min(hi);
            (a < b).then(|| CtaRange {
                first_cta: c,
                n_ctas: 1,
                lo: buf.addr(a + shift - lo),
                hi: buf.addr(b + shift - lo),
            })
        })
        .collect()
}

fn run(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let gpus = p.u32("gpus")?;
    let rows = p.u32("rows")?;
    let cols = p.u32("cols")?;
    let block = p.u32("block")?;
    let mut rng = SplitMix64(p.u64_any("seed")?);
    if gpus > MAX_GPUS {
        return Err(p.invalid(&format!("gpus={gpus}: at most {MAX_GPUS}")));
    }
    let elems = rows as u64 * cols as u64;
    if elems > MAX_ELEMS {
        return Err(p.invalid(&format!(
            "rows * cols = {elems} is more than {MAX_ELEMS} elements per GPU"
        )));
    }
    if block > 1024 {
        return Err(p.invalid(&format!("block={block}: at most 1024 threads per CTA")));
    }
    let n = elems as u32;
    for _ in 1..gpus {
        rec.add_device();
    }
    let mut ins = Vec::with_capacity(gpus as usize);
    let mut outs = Vec::with_capacity(gpus as usize);
    let mut hosts = Vec::with_capacity(gpus as usize);
    for g in 0..gpus {
        rec.set_device(g)?;
        let h: Vec<f32> = (0..n).map(|_| rng.unit_f32()).collect();
        let i = rec.alloc::<f32>(&format!("in{g}"), elems)?;
        let o = rec.alloc::<f32>(&format!("out{g}"), elems)?;
        rec.upload(i, &h)?;
        ins.push(i);
        outs.push(o);
        hosts.push(h);
    }
    let ctas = n.div_ceil(block);
    let last_row = (rows - 1) * cols;
    for g in 0..gpus {
        rec.set_device(g)?;
        let prev_g = (g + gpus - 1) % gpus;
        let next_g = (g + 1) % gpus;
        let (own, prev, next, out) = (
            ins[g as usize],
            ins[prev_g as usize],
            ins[next_g as usize],
            outs[g as usize],
        );
        let mut spec = LaunchSpec::new(KERNEL, [ctas, 1, 1], [block, 1, 1]);
        spec.blocking = false;
        spec.annotations = annotations(g, prev_g, next_g, &ins, out, rows, cols, block, ctas);
        rec.launch(&spec, &|w| {
            let i = w.global_id_x();
            let past = w.icmp_imm(Cmp::Ge, &i, n);
            w.exit_if(past);
            let x = w.rem_imm(&i, cols);
            let y = w.div_imm(&i, cols);
            let row0 = w.isub(&i, &x);
            let c = w.load(&own, &i);
            let xl = w.iadd_imm(&x, cols - 1);
            let xl = w.rem_imm(&xl, cols);
            let il = w.iadd(&row0, &xl);
            let l = w.load(&own, &il);
            let xr = w.iadd_imm(&x, 1);
            let xr = w.rem_imm(&xr, cols);
            let ir = w.iadd(&row0, &xr);
            let r = w.load(&own, &ir);
            // Up: the row above here, or the last row of the previous GPU on row 0.
            let top = w.icmp_imm(Cmp::Eq, &y, 0);
            let iu = w.iadd_imm(&i, cols.wrapping_neg());
            let au_own = w.addr(&own, &iu);
            let iu_peer = w.iadd_imm(&x, last_row);
            let au_peer = w.addr(&prev, &iu_peer);
            let au = w.sel(top, &au_peer, &au_own);
            let u = w.ld::<f32>(&au);
            // Down: the row below here, or the first row of the next GPU on the last row.
            let bottom = w.icmp_imm(Cmp::Eq, &y, rows - 1);
            let id = w.iadd_imm(&i, cols);
            let ad_own = w.addr(&own, &id);
            let ad_peer = w.addr(&next, &x);
            let ad = w.sel(bottom, &ad_peer, &ad_own);
            let d = w.ld::<f32>(&ad);
            let s = w.fadd(&c, &l);
            let s = w.fadd(&s, &r);
            let s = w.fadd(&s, &u);
            let s = w.fadd(&s, &d);
            let k = w.konst(W);
            let s = w.fmul(&s, &k);
            w.store(&out, &i, &s);
        })?;
    }
    for (g, &o) in outs.iter().enumerate() {
        let got = rec.download(o)?;
        let want = reference(&hosts, g, rows as usize, cols as usize);
        check_eq("halo", &format!("out{g}"), &got, &want)?;
    }
    Ok(format!(
        "five-point step verified on {gpus} GPUs x {rows} rows x {cols} columns"
    ))
}

/// The kernel's annotations: its own input (the CTA's elements and one row either side;
/// the whole array with one GPU, whose halo wraps to its own far end), the halo rows of
/// the neighbours, and its output.
#[allow(clippy::too_many_arguments)]
fn annotations(
    g: u32,
    prev_g: u32,
    next_g: u32,
    ins: &[Buffer<f32>],
    out: Buffer<f32>,
    rows: u32,
    cols: u32,
    block: u32,
    ctas: u32,
) -> Vec<ArrayAnnotation> {
    let own = ins[g as usize];
    let ann = |name: String, buf: &Buffer<f32>, access, ranges| ArrayAnnotation {
        name,
        base: buf.base,
        bytes: buf.bytes(),
        access,
        ranges,
    };
    let n = own.len;
    let (cols64, last) = (cols as u64, (rows as u64 - 1) * cols as u64);
    let own_ranges = if prev_g == g {
        Vec::new()
    } else {
        (0..ctas)
            .map(|c| {
                let lo = (c as u64 * block as u64).min(n);
                let hi = ((c as u64 + 1) * block as u64).min(n);
                CtaRange {
                    first_cta: c,
                    n_ctas: 1,
                    lo: own.addr(lo.saturating_sub(cols64)),
                    hi: own.addr((hi + cols64).min(n)),
                }
            })
            .collect()
    };
    let mut v = vec![ann(format!("in{g}"), &own, Access::Read, own_ranges)];
    if prev_g != g {
        // Row 0's threads read the previous GPU's last row; the last row's threads the
        // next GPU's first row (the same GPU when there are two: one annotation).
        let top = |buf: &Buffer<f32>| halo_ranges(buf, block, ctas, (0, cols64), last);
        let bottom = |buf: &Buffer<f32>| halo_ranges(buf, block, ctas, (last, n), 0);
        let prev = ins[prev_g as usize];
        let next = ins[next_g as usize];
        if prev_g == next_g {
            let mut r = top(&prev);
            r.extend(bottom(&prev));
            // CTA order (with one row per GPU a CTA reads both halo rows).
            r.sort_by_key(|x| x.first_cta);
            v.push(ann(format!("in{prev_g}"), &prev, Access::Read, r));
        } else {
            v.push(ann(format!("in{prev_g}"), &prev, Access::Read, top(&prev)));
            v.push(ann(
                format!("in{next_g}"),
                &next,
                Access::Read,
                bottom(&next),
            ));
        }
    }
    v.push(ann(
        format!("out{g}"),
        &out,
        Access::ReadWrite,
        block_ranges(&out, block, ctas),
    ));
    v
}

/// GPU `g`'s output computed on the host, in the kernel's order of operations.
fn reference(ins: &[Vec<f32>], g: usize, rows: usize, cols: usize) -> Vec<f32> {
    let gpus = ins.len();
    let (own, prev, next) = (&ins[g], &ins[(g + gpus - 1) % gpus], &ins[(g + 1) % gpus]);
    let mut out = vec![0f32; rows * cols];
    for y in 0..rows {
        for x in 0..cols {
            let c = own[y * cols + x];
            let l = own[y * cols + (x + cols - 1) % cols];
            let r = own[y * cols + (x + 1) % cols];
            let u = if y == 0 {
                prev[(rows - 1) * cols + x]
            } else {
                own[(y - 1) * cols + x]
            };
            let d = if y == rows - 1 {
                next[x]
            } else {
                own[(y + 1) * cols + x]
            };
            out[y * cols + x] = ((((c + l) + r) + u) + d) * W;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::workloads::generate;
    use crate::workloads::test_support::{param_error, params};
    use tessera_traces::{verify, Command, OpClass, TraceFile};

    /// Lane loads of kernel `k` that fall in another device's allocation (an address
    /// outside every allocation fails).
    fn peer_loads(t: &TraceFile, k: usize) -> u64 {
        let allocs: Vec<(u32, u64, u64)> = t
            .commands()
            .iter()
            .filter_map(|c| match *c {
                Command::Alloc {
                    device,
                    addr,
                    bytes,
                } => Some((device, addr, addr + bytes)),
                _ => None,
            })
            .collect();
        let dev = t.kernels()[k].device;
        let mut peer = 0;
        let mut dec = t.decoder();
        for cta in 0..t.kernels()[k].counts.ctas as u32 {
            let d = dec.kernel_cta(k, cta).unwrap();
            for inst in d.insts.iter().filter(|i| i.class == OpClass::LoadGlobal) {
                d.for_each_lane_addr(inst, |_, a| {
                    let Some(&(owner, _, _)) =
                        allocs.iter().find(|&&(_, lo, hi)| a >= lo && a + 4 <= hi)
                    else {
                        panic!("kernel {k}: address {a:#x} outside every allocation");
                    };
                    peer += u64::from(owner != dev);
                });
            }
        }
        peer
    }

    fn record(gpus: u32, rows: u32, cols: u32, block: u32) -> (tempfile::TempDir, TraceFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("halo.tst");
        let v = [gpus, rows, cols, block].map(|x| x.to_string());
        let kv = [
            ("gpus", v[0].as_str()),
            ("rows", v[1].as_str()),
            ("cols", v[2].as_str()),
            ("block", v[3].as_str()),
        ];
        generate("halo", &params(&kv), 80, &path).unwrap();
        let t = TraceFile::open(&path).unwrap();
        (dir, t)
    }

    #[test]
    fn edge_rows_read_the_neighbours_halo() {
        let (gpus, rows, cols) = (3u32, 4u32, 96u32);
        let (_dir, t) = record(gpus, rows, cols, 128);
        assert_eq!(t.index().devices.len(), 3);
        let devs: Vec<(u8, u32)> = t
            .commands()
            .iter()
            .map(|c| match *c {
                Command::Alloc { device, .. } => (0, device),
                Command::MemcpyHtoD { device, .. } => (1, device),
                Command::KernelLaunch { device, kernel } => {
                    assert_eq!(device, kernel);
                    (2, device)
                }
            })
            .collect();
        let mut want = Vec::new();
        for g in 0..gpus {
            want.extend([(0, g), (0, g), (1, g)]);
        }
        want.extend((0..gpus).map(|g| (2, g)));
        assert_eq!(devs, want);
        for k in 0..gpus as usize {
            assert_eq!(t.kernels()[k].device, k as u32);
            // One halo row from above, one from below.
            assert_eq!(peer_loads(&t, k), 2 * cols as u64);
        }
        let rep = verify(&t).unwrap();
        // Five loads and one store per element.
        assert_eq!(rep.checked_accesses, 6 * (rows * cols * gpus) as u64);
    }

    #[test]
    fn one_row_two_gpus_and_one_gpu() {
        // Two GPUs of one row: every load of up and down is a peer load.
        let (_dir, t) = record(2, 1, 40, 32);
        for k in 0..2 {
            assert_eq!(peer_loads(&t, k), 80);
            assert_eq!(t.kernels()[k].annotations.len(), 3);
        }
        verify(&t).unwrap();
        let (_dir, t) = record(1, 5, 7, 32);
        assert_eq!(peer_loads(&t, 0), 0);
        verify(&t).unwrap();
    }

    #[test]
    fn bad_parameters_are_refused() {
        for (k, v, what) in [
            ("gpus", "65", "at most 64"),
            ("rows", "0", "at least 1"),
            ("cols", "100000000", "elements per GPU"),
        ] {
            let m = param_error("halo", &[(k, v)]);
            assert!(m.contains(what), "{k}={v}: {m}");
        }
    }
}
