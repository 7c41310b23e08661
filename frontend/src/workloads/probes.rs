//! Calibration probes: tiny kernels that each isolate one latency or limit of the timing
//! model, so that a simulated run can be compared with the measured figures in
//! `shared/reference/hardware-figures.md` (pointer-chase latencies per level, FFMA
//! dependent latency and issue rate, occupancy limits, `__syncthreads()` cost, launch
//! gaps).
//!
//! | probe           | what it isolates |
//! |-----------------|------------------|
//! | `pointer_chase` | load-to-use latency of one level of the memory hierarchy (by footprint) |
//! | `fma_chain`     | dependent FFMA latency |
//! | `fma_streams`   | independent FFMA issue rate |
//! | `occupancy`     | resident-CTA limits: registers, shared memory, threads |
//! | `barrier`       | `BAR.SYNC` cost |
//! | `launch_gap`    | back-to-back launches of an empty kernel |
//! | `l2_stream`     | L2 read bandwidth: repeated passes over an L2-resident buffer |
//!
//! Each probe checks its functional result against a Rust reference before the trace is
//! finished. Unrolled bodies use the `_n` operations of `record/ops_probes.rs`, so every
//! unrolled copy has its own PC.

use super::{check_eq, GenError, ParamSpec, Params, SplitMix64, WorkloadSpec};
use crate::record::{Buffer, Cmp, LaunchSpec, Recorder, SharedArr, Val, Warp};

/// Most warp instructions one CTA of a probe may record: the recorder keeps a CTA's
/// instructions in memory until the CTA ends (about 50 bytes each), so 2^24 is under
/// 1 GiB, and about 10 s of recording.
const MAX_CTA_INSTS: u64 = 1 << 24;
/// Largest `pointer_chase` footprint: 1 GiB.
const MAX_FOOTPRINT: u32 = 1 << 30;
/// Most FFMAs per thread of `fma_chain` / `fma_streams`.
const MAX_FMA_ITERS: u32 = 1 << 24;
/// Unrolled copies per call site are told apart by an 8-bit sub-index.
const MAX_COPIES: u32 = 256;

fn params_u64(p: &Params, name: &str, max: u64) -> Result<u64, GenError> {
    let v = p.u64_any(name)?;
    if v > max {
        return Err(p.invalid(&format!("{name}={v} exceeds the maximum {max}")));
    }
    Ok(v)
}

/// Fails when one CTA would record more than [`MAX_CTA_INSTS`] warp instructions.
fn check_cta_insts(p: &Params, n: u64) -> Result<(), GenError> {
    if n > MAX_CTA_INSTS {
        return Err(p.invalid(&format!(
            "these parameters record {n} warp instructions in one CTA; at most {MAX_CTA_INSTS} (the recorder holds a CTA in memory)"
        )));
    }
    Ok(())
}

fn at_most(p: &Params, name: &str, max: u32) -> Result<u32, GenError> {
    let v = p.u32(name)?;
    if v > max {
        return Err(p.invalid(&format!("{name}={v} exceeds the maximum {max}")));
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// pointer_chase

pub static POINTER_CHASE: WorkloadSpec = WorkloadSpec {
    name: "pointer_chase",
    help: "one thread follows a chain of dependent 64-bit loads p = *p (load latency per memory level)",
    params: &[
        ParamSpec {
            name: "footprint",
            default: "16384",
            help: "bytes the chain spans; on an A100-like GPU 16384 (16 KiB) stays in L1, 1048576 (1 MiB) in L2, 67108864 (64 MiB) reaches DRAM",
        },
        ParamSpec {
            name: "stride",
            default: "128",
            help: "bytes between consecutive chain slots, a multiple of 8 dividing footprint (128 = one cache line)",
        },
        ParamSpec {
            name: "loads",
            default: "1024",
            help: "measured dependent loads, after the warm-up",
        },
        ParamSpec {
            name: "unroll",
            default: "8",
            help: "loads per iteration of the measured loop (divides loads, at most 256)",
        },
        ParamSpec {
            name: "warmup",
            default: "1",
            help: "passes over the whole chain recorded before the measured loads, in the same kernel at their own PCs (0 = cold caches)",
        },
    ],
    run: run_pointer_chase,
};

/// A validated `pointer_chase` configuration.
#[derive(Clone, Copy, Debug)]
struct ChaseCfg {
    footprint: u32,
    stride: u32,
    loads: u32,
    unroll: u32,
    warmup: u32,
}

impl ChaseCfg {
    fn parse(p: &Params) -> Result<Self, GenError> {
        let footprint = at_most(p, "footprint", MAX_FOOTPRINT)?;
        let stride = p.u32("stride")?;
        let loads = p.u32("loads")?;
        let unroll = at_most(p, "unroll", MAX_COPIES)?;
        let warmup = params_u64(p, "warmup", 64)? as u32;
        if stride % 8 != 0 {
            return Err(p.invalid(&format!(
                "stride={stride} must be a multiple of 8 (the chain holds 8-byte pointers)"
            )));
        }
        if footprint % stride != 0 {
            return Err(p.invalid(&format!(
                "footprint={footprint} must be a multiple of stride={stride}"
            )));
        }
        if loads % unroll != 0 {
            return Err(p.invalid(&format!("unroll={unroll} must divide loads={loads}")));
        }
        let cfg = ChaseCfg {
            footprint,
            stride,
            loads,
            unroll,
            warmup,
        };
        check_cta_insts(p, cfg.warp_insts())?;
        Ok(cfg)
    }

    /// Slots of the chain.
    fn slots(&self) -> u64 {
        (self.footprint / self.stride) as u64
    }

    fn warm_loads(&self) -> u64 {
        self.warmup as u64 * self.slots()
    }

    fn total_loads(&self) -> u64 {
        self.warm_loads() + self.loads as u64
    }

    /// Warp instructions recorded (see [`record_pointer_chase`]).
    fn warp_insts(&self) -> u64 {
        let (l, u) = (self.loads as u64, self.unroll as u64);
        8 + 4 * self.warm_loads() + l + 3 * l / u
    }
}

/// What a chase recorded: the chain's base, the pointer the kernel stored and the
/// reference walk's.
#[derive(Clone, Copy, Debug)]
struct ChaseOut {
    base: u64,
    got: u64,
    want: u64,
}

/// Records the chase. The chain visits the `footprint / stride` slots in stride order:
/// slot `k` (at byte `k * stride`) holds the address of slot `k + 1`, the last one that of
/// slot 0. Lanes 1..31 exit first; lane 0 loads `warmup` whole passes (one `LDG.E.64`
/// per loop iteration) and then `loads` more (`unroll` per iteration), each on the address
/// the previous one returned, and stores the final pointer.
///
/// Per warp, as recorded: `MOV` (prologue), `S2R`, `ISETP.NE`, `@P0 EXIT` (lanes 1..31),
/// `IMAD.WIDE.U32` (&chain[0]), warm-up `warmup * slots` x (`LDG.E.64`, `IADD3`, `ISETP`,
/// `BRA`), measured `loads / unroll` x (`unroll` x `LDG.E.64`, `IADD3`, `ISETP`, `BRA`),
/// `IMAD.WIDE.U32`, `STG.E.64`, `EXIT`: 8 + 4 * warm + loads + 3 * loads / unroll.
fn record_pointer_chase(cfg: &ChaseCfg, rec: &mut Recorder) -> Result<ChaseOut, GenError> {
    let n = cfg.slots();
    let stride = cfg.stride as u64;
    let words = cfg.footprint as u64 / 8;
    let chain = rec.alloc::<u64>("chain", words)?;
    let out = rec.alloc::<u64>("out", 1)?;
    let base = chain.base;
    let mut host = vec![0u64; words as usize];
    for k in 0..n {
        host[(k * stride / 8) as usize] = base + (k + 1) % n * stride;
    }
    rec.upload(chain, &host)?;
    let mut spec = LaunchSpec::new("_Z13pointer_chasePKmPmii", [1, 1, 1], [32, 1, 1]);
    spec.blocking = false;
    let warm = u32::try_from(cfg.warm_loads()).unwrap_or(u32::MAX);
    let (iters, unroll) = (cfg.loads / cfg.unroll, cfg.unroll);
    rec.launch(&spec, &|w| {
        let t = w.tid(0);
        let others = w.icmp_imm(Cmp::Ne, &t, 0);
        w.exit_if(others);
        let mut p = w.addr(&chain, &t);
        w.for_range(warm, |w, _| w.ld_chase_n(&mut p, 0));
        w.for_range(iters, |w, _| {
            for u in 0..unroll {
                w.ld_chase_n(&mut p, u as u8);
            }
        });
        let o = w.addr(&out, &t);
        w.st(&o, &p);
    })?;
    let got = rec.download(out)?[0];
    let mut want = base;
    for _ in 0..cfg.total_loads() {
        want = host[((want - base) / 8) as usize];
    }
    Ok(ChaseOut { base, got, want })
}

fn run_pointer_chase(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let cfg = ChaseCfg::parse(p)?;
    let r = record_pointer_chase(&cfg, rec)?;
    check_eq("pointer_chase", "final pointer", &[r.got], &[r.want])?;
    Ok(format!(
        "final pointer = chain slot {} after {} warm-up + {} measured dependent loads over {} slots of {} bytes",
        (r.got - r.base) / cfg.stride as u64,
        cfg.warm_loads(),
        cfg.loads,
        cfg.slots(),
        cfg.stride
    ))
}

// ---------------------------------------------------------------------------------------
// fma_chain and fma_streams

/// Multiplier of the FFMA probes: 1 - 2^-10, so `x = x * A + b` converges instead of
/// overflowing.
const FMA_A: f32 = 1.0 - 1.0 / 1024.0;
/// Addend of `fma_chain`.
const FMA_B: f32 = 0.5;
/// `fma_streams`' per-thread addend is `thread index * FMA_SCALE`.
const FMA_SCALE: f32 = 1.0 / 1024.0;

pub static FMA_CHAIN: WorkloadSpec = WorkloadSpec {
    name: "fma_chain",
    help: "each thread runs x = fma(x, a, b) iters times, every FFMA depending on the last (dependent FFMA latency)",
    params: &[
        ParamSpec {
            name: "iters",
            default: "1024",
            help: "dependent FFMAs per thread",
        },
        ParamSpec {
            name: "unroll",
            default: "8",
            help: "FFMAs per loop iteration (divides iters, at most 256)",
        },
        ParamSpec {
            name: "warps",
            default: "1",
            help: "warps of the single CTA (at most 32)",
        },
    ],
    run: run_fma_chain,
};

pub static FMA_STREAMS: WorkloadSpec = WorkloadSpec {
    name: "fma_streams",
    help: "each thread updates `streams` independent accumulators x_i = fma(x_i, a, b) iters times (FFMA issue rate)",
    params: &[
        ParamSpec {
            name: "streams",
            default: "8",
            help: "independent accumulators per thread (at most 64)",
        },
        ParamSpec {
            name: "iters",
            default: "1024",
            help: "FFMAs per accumulator",
        },
        ParamSpec {
            name: "unroll",
            default: "4",
            help: "iterations per loop iteration (divides iters; unroll x streams at most 256)",
        },
        ParamSpec {
            name: "warps",
            default: "1",
            help: "warps of the single CTA (at most 32)",
        },
    ],
    run: run_fma_streams,
};

#[derive(Clone, Copy, Debug)]
struct FmaCfg {
    streams: u32,
    iters: u32,
    unroll: u32,
    warps: u32,
}

impl FmaCfg {
    fn parse(p: &Params, streams: bool) -> Result<Self, GenError> {
        let streams = if streams {
            at_most(p, "streams", 64)?
        } else {
            1
        };
        let iters = at_most(p, "iters", MAX_FMA_ITERS)?;
        let unroll = at_most(p, "unroll", MAX_COPIES)?;
        let warps = at_most(p, "warps", 32)?;
        if iters % unroll != 0 {
            return Err(p.invalid(&format!("unroll={unroll} must divide iters={iters}")));
        }
        if unroll * streams > MAX_COPIES {
            return Err(p.invalid(&format!(
                "unroll x streams = {} FFMAs per loop iteration; at most {MAX_COPIES}",
                unroll * streams
            )));
        }
        let cfg = FmaCfg {
            streams,
            iters,
            unroll,
            warps,
        };
        check_cta_insts(
            p,
            cfg.warps as u64 * cfg.warp_insts_streams().max(cfg.warp_insts_chain()),
        )?;
        Ok(cfg)
    }

    /// Warp instructions per warp of `fma_chain` (see [`record_fma_chain`]).
    fn warp_insts_chain(&self) -> u64 {
        let (i, u) = (self.iters as u64, self.unroll as u64);
        8 + i + 3 * i / u
    }

    /// Warp instructions per warp of `fma_streams` (see [`record_fma_streams`]).
    fn warp_insts_streams(&self) -> u64 {
        let (s, i, u) = (self.streams as u64, self.iters as u64, self.unroll as u64);
        8 + 2 * s + i * s + 3 * i / u
    }

    fn threads(&self) -> u32 {
        self.warps * 32
    }
}

/// The chain: per thread `t`, `x = t as f32`, then `iters` times `x = fma(x, A, B)`.
///
/// Per warp, as recorded: `MOV` (prologue), `S2R` (t), `I2F.U32` (x), `MOV` (a), `MOV`
/// (b), `iters / unroll` x (`unroll` x `FFMA Rx, Rx, Ra, Rb`, `IADD3`, `ISETP`, `BRA`),
/// `IMAD.WIDE.U32`, `STG.E`, `EXIT`: 8 + iters + 3 * iters / unroll warp instructions.
fn record_fma_chain(cfg: &FmaCfg, rec: &mut Recorder) -> Result<(Vec<f32>, Vec<f32>), GenError> {
    let threads = cfg.threads();
    let out = rec.alloc::<f32>("x", threads as u64)?;
    let mut spec = LaunchSpec::new("_Z9fma_chainPfi", [1, 1, 1], [threads, 1, 1]);
    spec.blocking = false;
    let (iters, unroll) = (cfg.iters / cfg.unroll, cfg.unroll);
    rec.launch(&spec, &|w| {
        let t = w.tid(0);
        let mut x = w.u2f::<f32>(&t);
        let a = w.konst(FMA_A);
        let b = w.konst(FMA_B);
        w.for_range(iters, |w, _| {
            for u in 0..unroll {
                w.ffma_self_n(&mut x, &a, &b, u as u8);
            }
        });
        w.store(&out, &t, &x);
    })?;
    let got = rec.download(out)?;
    let want = (0..threads)
        .map(|t| {
            let mut x = t as f32;
            for _ in 0..cfg.iters {
                x = x.mul_add(FMA_A, FMA_B);
            }
            x
        })
        .collect();
    Ok((got, want))
}

fn run_fma_chain(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let cfg = FmaCfg::parse(p, false)?;
    let (got, want) = record_fma_chain(&cfg, rec)?;
    check_eq("fma_chain", "x", &got, &want)?;
    Ok(format!(
        "{} dependent FFMAs per thread verified bit-exactly for {} threads",
        cfg.iters,
        cfg.threads()
    ))
}

/// The streams: per thread `t`, `b = t * FMA_SCALE`, `x_i = 1 + i`, then `iters` times
/// for each `i`: `x_i = fma(x_i, A, b)`; `x_i` is stored at `out[i * threads + t]`.
///
/// Per warp, as recorded: `MOV` (prologue), `S2R` (t), `I2F.U32`, `MOV` (scale), `FMUL`
/// (b), `MOV` (a), `streams` x `MOV` (x_i), `iters / unroll` x (`unroll * streams` x
/// `FFMA`, `IADD3`, `ISETP`, `BRA`), `IMAD.WIDE.U32`, `streams` x `STG.E`, `EXIT`:
/// 8 + 2 * streams + iters * streams + 3 * iters / unroll warp instructions. Each
/// accumulator keeps its own register (its `MOV`'s), so the streams share no register.
fn record_fma_streams(cfg: &FmaCfg, rec: &mut Recorder) -> Result<(Vec<f32>, Vec<f32>), GenError> {
    let threads = cfg.threads();
    let streams = cfg.streams;
    let out = rec.alloc::<f32>("x", (streams * threads) as u64)?;
    let mut spec = LaunchSpec::new("_Z11fma_streamsPfi", [1, 1, 1], [threads, 1, 1]);
    spec.blocking = false;
    // The recorder wraps register numbers within 32 unless told more: keep the streams in
    // distinct registers (about 10 registers besides them).
    if streams + 16 > 32 {
        spec.regs_per_thread = Some(streams + 16);
    }
    let (iters, unroll) = (cfg.iters / cfg.unroll, cfg.unroll);
    rec.launch(&spec, &|w| {
        let t = w.tid(0);
        let tf = w.u2f::<f32>(&t);
        let scale = w.konst(FMA_SCALE);
        let b = w.fmul(&tf, &scale);
        let a = w.konst(FMA_A);
        let mut xs: Vec<Val<f32>> = (0..streams)
            .map(|i| w.konst_n(1.0 + i as f32, i as u8))
            .collect();
        w.for_range(iters, |w, _| {
            for u in 0..unroll {
                for (i, x) in xs.iter_mut().enumerate() {
                    w.ffma_self_n(x, &a, &b, (u * streams + i as u32) as u8);
                }
            }
        });
        let o = w.addr(&out, &t);
        for (i, x) in xs.iter().enumerate() {
            w.st_off_n(&o, i as u64 * threads as u64 * 4, x, i as u8);
        }
    })?;
    let got = rec.download(out)?;
    let mut want = vec![0f32; (streams * threads) as usize];
    for t in 0..threads {
        let b = t as f32 * FMA_SCALE;
        for i in 0..streams {
            let mut x = 1.0 + i as f32;
            for _ in 0..cfg.iters {
                x = x.mul_add(FMA_A, b);
            }
            want[(i * threads + t) as usize] = x;
        }
    }
    Ok((got, want))
}

fn run_fma_streams(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let cfg = FmaCfg::parse(p, true)?;
    let (got, want) = record_fma_streams(&cfg, rec)?;
    check_eq("fma_streams", "x", &got, &want)?;
    Ok(format!(
        "{} streams x {} FFMAs per thread verified bit-exactly for {} threads",
        cfg.streams,
        cfg.iters,
        cfg.threads()
    ))
}

// ---------------------------------------------------------------------------------------
// occupancy

/// SM limits assumed for an A100-like GPU (compute capability 8.0). The reference file
/// (`shared/reference/hardware-figures.md`, section 6) gives the A100's shared memory, up
/// to 164 KB per SM, and a 256 KB register file (64K 32-bit registers) for H100, which
/// the A100 shares; 2048 threads, 32 CTAs and 64K registers per SM are NVIDIA's
/// compute-capability 8.0 limits (CUDA programming guide, not in the reference file).
pub const SM_REGS: u32 = 64 * 1024;
pub const SM_SHMEM_BYTES: u32 = 164 * 1024;
pub const SM_THREADS: u32 = 2048;
pub const SM_CTAS: u32 = 32;
/// Registers are allocated per warp in units of 256.
const REG_ALLOC_UNIT: u32 = 256;
/// Shared memory the driver reserves per CTA on sm_80 (1 KiB); none of the kernels below
/// changes its resident count whether it is counted or not.
const SHMEM_RESERVED_PER_CTA: u32 = 1024;

/// CTAs of `threads` threads with `regs` registers per thread and `shmem` bytes of shared
/// memory that fit on one SM under the limits above, and the resource that binds.
pub fn resident_ctas(threads: u32, regs: u32, shmem: u32) -> (u32, &'static str) {
    let warps = threads.div_ceil(32);
    let regs_per_warp = (regs * 32).div_ceil(REG_ALLOC_UNIT) * REG_ALLOC_UNIT;
    let by_regs = SM_REGS / (regs_per_warp * warps).max(1);
    let by_shmem = if shmem == 0 {
        u32::MAX
    } else {
        SM_SHMEM_BYTES / (shmem + SHMEM_RESERVED_PER_CTA)
    };
    let by_threads = SM_THREADS / (warps * 32);
    let mut best = (SM_CTAS, "CTA slots");
    for (n, what) in [
        (by_regs, "registers"),
        (by_shmem, "shared memory"),
        (by_threads, "threads"),
    ] {
        if n < best.0 {
            best = (n, what);
        }
    }
    best
}

/// One kernel of the occupancy probe.
#[derive(Clone, Copy, Debug)]
pub struct OccKernel {
    pub name: &'static str,
    pub threads: u32,
    /// Declared registers per thread (`KernelMeta::nregs`).
    pub regs: u32,
    pub shmem: u32,
    /// Resident CTAs per SM the limits imply, and the binding limit.
    pub resident: u32,
    pub limit: &'static str,
}

/// The three kernels, each bound by a different resource:
/// - `occ_regs`: 128 threads x 128 registers = 16384 registers per CTA, so
///   65536 / 16384 = 4 CTAs per SM (threads would allow 16, CTA slots 32).
/// - `occ_shmem`: 128 threads, 32 registers, 48 KiB shared memory: 164 KiB / 48 KiB
///   = 3 CTAs per SM (3 x 49 KiB with the driver's 1 KiB also fits; registers and threads
///   would allow 16).
/// - `occ_threads`: 1024 threads, 16 registers: 2048 / 1024 = 2 CTAs per SM (registers
///   would allow 65536 / 16384 = 4).
pub const OCC_KERNELS: [OccKernel; 3] = [
    OccKernel {
        name: "occ_regs",
        threads: 128,
        regs: 128,
        shmem: 0,
        resident: 4,
        limit: "registers",
    },
    OccKernel {
        name: "occ_shmem",
        threads: 128,
        regs: 32,
        shmem: 48 * 1024,
        resident: 3,
        limit: "shared memory",
    },
    OccKernel {
        name: "occ_threads",
        threads: 1024,
        regs: 16,
        shmem: 0,
        resident: 2,
        limit: "threads",
    },
];

/// Scale of the occupancy kernels' copy `y = x * OCC_SCALE`.
const OCC_SCALE: f32 = 2.5;

pub static OCCUPANCY: WorkloadSpec = WorkloadSpec {
    name: "occupancy",
    help: "three scaled-copy kernels back to back, limited on an A100-like SM (64K registers, 164 KiB shared memory, 2048 threads, 32 CTAs) by registers (4 CTAs/SM), shared memory (3) and threads (2)",
    params: &[
        ParamSpec {
            name: "waves",
            default: "2",
            help: "full waves per kernel: each launches waves x sms x (its resident CTAs per SM) CTAs",
        },
        ParamSpec {
            name: "sms",
            default: "108",
            help: "SMs of the GPU the waves are counted for (108 = A100)",
        },
    ],
    run: run_occupancy,
};

/// Per kernel: CTAs launched, output, reference.
type OccOut = Vec<(u32, Vec<f32>, Vec<f32>)>;

/// Records the three kernels. Each thread `i` of kernel `k` computes
/// `y_k[i] = x_k[i] * OCC_SCALE`; `occ_shmem` passes the value through its shared memory
/// (`STS`, `LDS` of its own slot: no barrier needed).
fn record_occupancy(waves: u32, sms: u32, rec: &mut Recorder) -> Result<OccOut, GenError> {
    let mut rng = SplitMix64(0x0cc0);
    let mut res = Vec::new();
    for k in &OCC_KERNELS {
        let ctas = waves * sms * resident_ctas(k.threads, k.regs, k.shmem).0;
        let n = ctas as u64 * k.threads as u64;
        let x_h: Vec<f32> = (0..n).map(|_| rng.unit_f32()).collect();
        let x = rec.alloc::<f32>(&format!("{}_x", k.name), n)?;
        let y = rec.alloc::<f32>(&format!("{}_y", k.name), n)?;
        rec.upload(x, &x_h)?;
        let mut spec = LaunchSpec::new(k.name, [ctas, 1, 1], [k.threads, 1, 1]);
        spec.blocking = false;
        spec.regs_per_thread = Some(k.regs);
        spec.shmem_bytes = k.shmem;
        let stage = (k.shmem > 0).then(|| SharedArr::<f32>::new(0, k.threads));
        rec.launch(&spec, &|w| scaled_copy(w, &x, &y, stage))?;
        let got = rec.download(y)?;
        let want = x_h.iter().map(|v| v * OCC_SCALE).collect();
        res.push((ctas, got, want));
    }
    Ok(res)
}

fn scaled_copy(w: &mut Warp, x: &Buffer<f32>, y: &Buffer<f32>, stage: Option<SharedArr<f32>>) {
    let i = w.global_id_x();
    let mut v = w.load(x, &i);
    if let Some(sh) = stage {
        let t = w.tid(0);
        let a = w.shared_addr(&sh, &t);
        w.sts(&a, &v);
        v = w.lds::<f32>(&a);
    }
    let s = w.konst(OCC_SCALE);
    let r = w.fmul(&v, &s);
    w.store(y, &i, &r);
}

fn run_occupancy(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let waves = at_most(p, "waves", 64)?;
    let sms = at_most(p, "sms", 1024)?;
    let res = record_occupancy(waves, sms, rec)?;
    let mut parts = Vec::new();
    for (k, (ctas, got, want)) in OCC_KERNELS.iter().zip(&res) {
        check_eq("occupancy", k.name, got, want)?;
        parts.push(format!(
            "{} {} CTAs ({} per SM, {}-limited)",
            k.name, ctas, k.resident, k.limit
        ));
    }
    Ok(format!("y = {OCC_SCALE} x verified: {}", parts.join(", ")))
}

// ---------------------------------------------------------------------------------------
// barrier

pub static BARRIER: WorkloadSpec = WorkloadSpec {
    name: "barrier",
    help: "CTAs doing iters rounds of: v[t] = 2 v[t] + v[t+1] in shared memory, __syncthreads() (BAR.SYNC cost)",
    params: &[
        ParamSpec {
            name: "threads",
            default: "256",
            help: "threads per CTA (at most 1024)",
        },
        ParamSpec {
            name: "iters",
            default: "64",
            help: "rounds, each ending in a barrier",
        },
        ParamSpec {
            name: "ctas",
            default: "1",
            help: "CTAs",
        },
    ],
    run: run_barrier,
};

#[derive(Clone, Copy, Debug)]
struct BarrierCfg {
    threads: u32,
    iters: u32,
    ctas: u32,
}

impl BarrierCfg {
    /// Warp instructions per warp: `MOV` (prologue), `S2R` (t), `S2R` (c), `IMAD` (g),
    /// `IADD3` (t + 1), the modulo (`LOP3.LUT` for a power-of-two `threads`, else
    /// `IMAD.HI.U32` + `IMAD`), `LEA`, `STS`, `BAR.SYNC`, then per round `LEA`, `LEA`,
    /// `LDS`, `LDS`, `IMAD`, `LEA`, `STS`, `BAR.SYNC`, `IADD3`, `ISETP`, `BRA`, then
    /// `LEA`, `LDS`, `IMAD.WIDE.U32`, `STG.E`, `EXIT`:
    /// 13 + (1 or 2) + 11 * iters.
    fn warp_insts(&self) -> u64 {
        let modulo = if self.threads.is_power_of_two() { 1 } else { 2 };
        13 + modulo + 11 * self.iters as u64
    }
}

/// Each thread `t` of CTA `c` starts with `v[t] = c * threads + t` in shared buffer 0 and
/// a barrier; round `r` reads `v[t]` and its neighbour `v[(t + 1) % threads]` from buffer
/// `r % 2`, writes `2 * v[t] + v[t + 1]` (wrapping; `IMAD`: with a plain sum the values
/// would be multiples of 2^r and vanish mod 2^32 after 32 rounds) to buffer
/// `(r + 1) % 2`, then waits at a barrier (double buffering: one barrier per round is
/// enough). The final value goes to
/// `out[c * threads + t]`. Every warp records `iters + 1` `BAR.SYNC`.
fn record_barrier(cfg: &BarrierCfg, rec: &mut Recorder) -> Result<(Vec<u32>, Vec<u32>), GenError> {
    let (threads, iters, ctas) = (cfg.threads, cfg.iters, cfg.ctas);
    let n = ctas as u64 * threads as u64;
    let out = rec.alloc::<u32>("out", n)?;
    let mut spec = LaunchSpec::new("_Z7barrierPji", [ctas, 1, 1], [threads, 1, 1]);
    spec.shmem_bytes = 2 * threads * 4;
    let bufs = [
        SharedArr::<u32>::new(0, threads),
        SharedArr::<u32>::new(threads * 4, threads),
    ];
    rec.launch(&spec, &|w| {
        let t = w.tid(0);
        let c = w.ctaid(0);
        let g = w.imad_imm(&c, threads, &t);
        let nb = w.iadd_imm(&t, 1);
        let nb = w.rem_imm(&nb, threads);
        let a0 = w.shared_addr(&bufs[0], &t);
        w.sts(&a0, &g);
        w.barrier();
        w.for_range(iters, |w, r| {
            let (cur, next) = (&bufs[(r % 2) as usize], &bufs[((r + 1) % 2) as usize]);
            let mine = w.shared_addr(cur, &t);
            let theirs = w.shared_addr(cur, &nb);
            let x = w.lds::<u32>(&mine);
            let y = w.lds::<u32>(&theirs);
            let s = w.imad_imm(&x, 2, &y);
            let dst = w.shared_addr(next, &t);
            w.sts(&dst, &s);
            w.barrier();
        });
        let fin = w.shared_addr(&bufs[(iters % 2) as usize], &t);
        let v = w.lds::<u32>(&fin);
        w.store(&out, &g, &v);
    })?;
    let got = rec.download(out)?;
    let mut want = Vec::with_capacity(n as usize);
    for c in 0..ctas {
        let mut v: Vec<u32> = (0..threads).map(|t| c * threads + t).collect();
        for _ in 0..iters {
            v = (0..threads as usize)
                .map(|t| {
                    v[t].wrapping_mul(2)
                        .wrapping_add(v[(t + 1) % threads as usize])
                })
                .collect();
        }
        want.extend(v);
    }
    Ok((got, want))
}

fn run_barrier(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let cfg = BarrierCfg {
        threads: at_most(p, "threads", 1024)?,
        iters: at_most(p, "iters", 1 << 20)?,
        ctas: at_most(p, "ctas", 1 << 16)?,
    };
    check_cta_insts(p, cfg.threads.div_ceil(32) as u64 * cfg.warp_insts())?;
    let (got, want) = record_barrier(&cfg, rec)?;
    check_eq("barrier", "out", &got, &want)?;
    Ok(format!(
        "{} rounds of neighbour sums verified for {} CTAs of {} threads ({} BAR.SYNC per warp)",
        cfg.iters,
        cfg.ctas,
        cfg.threads,
        cfg.iters + 1
    ))
}

// ---------------------------------------------------------------------------------------
// launch_gap

pub static LAUNCH_GAP: WorkloadSpec = WorkloadSpec {
    name: "launch_gap",
    help: "back-to-back launches of an empty kernel, 1 CTA of 32 threads (launch overhead)",
    params: &[ParamSpec {
        name: "kernels",
        default: "16",
        help: "launches (at most 100000)",
    }],
    run: run_launch_gap,
};

/// Launches the empty kernel `kernels` times; each records the prologue `MOV` and `EXIT`:
/// 1 CTA, 1 warp, 2 warp instructions, 64 thread instructions. The check compares every
/// launch's counts with those.
fn run_launch_gap(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let kernels = at_most(p, "kernels", 100_000)?;
    let mut spec = LaunchSpec::new("_Z5emptyv", [1, 1, 1], [32, 1, 1]);
    spec.blocking = false;
    for k in 0..kernels {
        let c = rec.launch(&spec, &|_w: &mut Warp| {})?;
        let got = [c.ctas, c.warps, c.warp_insts, c.thread_insts];
        check_eq(
            "launch_gap",
            &format!("launch {k} [ctas, warps, warp insts, thread insts]"),
            &got,
            &[1, 1, 2, 64],
        )?;
    }
    Ok(format!(
        "{kernels} empty kernels of 1 CTA x 32 threads, 2 warp instructions each"
    ))
}

// ---------------------------------------------------------------------------------------
// l2_stream

pub static L2_STREAM: WorkloadSpec = WorkloadSpec {
    name: "l2_stream",
    help: "ctas x block threads read an f64 buffer `passes` times, 4 independent loads per loop iteration (L2 bandwidth when the buffer fits in L2)",
    params: &[
        ParamSpec {
            name: "bytes",
            default: "262144",
            help: "buffer size, a multiple of 32 x ctas x block bytes (at most 1 GiB)",
        },
        ParamSpec {
            name: "passes",
            default: "2",
            help: "reads of the whole buffer (at most 64)",
        },
        ParamSpec {
            name: "ctas",
            default: "8",
            help: "CTAs (at most 65536)",
        },
        ParamSpec {
            name: "block",
            default: "256",
            help: "threads per CTA, a multiple of 32 (at most 1024)",
        },
    ],
    run: run_l2_stream,
};

#[derive(Clone, Copy, Debug)]
struct L2StreamCfg {
    bytes: u64,
    passes: u32,
    ctas: u32,
    block: u32,
}

impl L2StreamCfg {
    fn parse(p: &Params) -> Result<Self, GenError> {
        let cfg = L2StreamCfg {
            bytes: params_u64(p, "bytes", MAX_FOOTPRINT as u64)?,
            passes: at_most(p, "passes", 64)?,
            ctas: at_most(p, "ctas", 1 << 16)?,
            block: at_most(p, "block", 1024)?,
        };
        if cfg.block == 0 || !cfg.block.is_multiple_of(32) || cfg.ctas == 0 {
            return Err(p.invalid(&format!(
                "ctas={} block={}: at least one CTA of a multiple of 32 threads",
                cfg.ctas, cfg.block
            )));
        }
        let row = 32 * cfg.threads() as u64;
        if cfg.bytes == 0 || !cfg.bytes.is_multiple_of(row) {
            return Err(p.invalid(&format!(
                "bytes={} must be a positive multiple of 32 x ctas x block = {row}",
                cfg.bytes
            )));
        }
        check_cta_insts(p, (cfg.block / 32) as u64 * cfg.warp_insts())?;
        Ok(cfg)
    }

    fn threads(&self) -> u32 {
        self.ctas * self.block
    }

    /// Loop iterations per pass: each thread loads 4 elements per iteration.
    fn iters(&self) -> u32 {
        (self.bytes / 32 / self.threads() as u64) as u32
    }

    /// Warp instructions per warp (see [`record_l2_stream`]).
    fn warp_insts(&self) -> u64 {
        let (p, i) = (self.passes as u64, self.iters() as u64);
        let rem = if self.threads().is_power_of_two() {
            1
        } else {
            2
        };
        // Prologue MOV, global id (S2R, S2R, IMAD), 4 MOVs; per pass IADD3, the remainder
        // (LOP3, or IMAD.HI and IMAD), per iteration 3 IADD3, 4 x (IMAD.WIDE, LDG), 4 DADD,
        // IADD3, loop IADD3/ISETP/BRA, pass loop IADD3/ISETP/BRA; 3 DADD, IMAD.WIDE, STG,
        // EXIT.
        8 + p * (1 + rem + i * 19 + 3) + 6
    }
}

/// Records the stream. Thread `g` of `T = ctas x block` keeps 4 accumulators; in pass
/// `p` it starts at `base = (g + p x block) mod T`, so that every pass reads the buffer
/// with each CTA on the slice its neighbour read in the pass before (no SM finds its own
/// lines in its L1 again), and loop iteration `j` loads `buf[base + (4j + k) T]` for
/// `k = 0..4` (4 independent `LDG.E.64`, then their `DADD`s): a warp reads 256
/// consecutive bytes per load. It stores `(a0 + a1) + (a2 + a3)` to `out[g]`.
fn record_l2_stream(
    cfg: &L2StreamCfg,
    rec: &mut Recorder,
) -> Result<(Vec<f64>, Vec<f64>), GenError> {
    let t = cfg.threads();
    let n = cfg.bytes / 8;
    let iters = cfg.iters();
    let buf = rec.alloc::<f64>("buf", n)?;
    let out = rec.alloc::<f64>("out", t as u64)?;
    let host: Vec<f64> = (0..n).map(|i| (i % 1024) as f64).collect();
    rec.upload(buf, &host)?;
    let mut spec = LaunchSpec::new("_Z9l2_streamPKdPdii", [cfg.ctas, 1, 1], [cfg.block, 1, 1]);
    spec.blocking = false;
    let (passes, block) = (cfg.passes, cfg.block);
    rec.launch(&spec, &|w| {
        let g = w.global_id_x();
        let mut a0 = w.konst_n(0.0f64, 0);
        let mut a1 = w.konst_n(0.0f64, 1);
        let mut a2 = w.konst_n(0.0f64, 2);
        let mut a3 = w.konst_n(0.0f64, 3);
        w.for_range(passes, |w, p| {
            let shifted = w.iadd_imm(&g, p * block);
            let mut idx = w.rem_imm(&shifted, t);
            w.for_range(iters, |w, _| {
                let i1 = w.iadd_imm(&idx, t);
                let i2 = w.iadd_imm(&idx, 2 * t);
                let i3 = w.iadd_imm(&idx, 3 * t);
                let x0 = w.load(&buf, &idx);
                let x1 = w.load(&buf, &i1);
                let x2 = w.load(&buf, &i2);
                let x3 = w.load(&buf, &i3);
                w.fadd_acc(&mut a0, &x0);
                w.fadd_acc(&mut a1, &x1);
                w.fadd_acc(&mut a2, &x2);
                w.fadd_acc(&mut a3, &x3);
                w.iadd_imm_acc(&mut idx, 4 * t);
            });
        });
        let s01 = w.fadd(&a0, &a1);
        let s23 = w.fadd(&a2, &a3);
        let s = w.fadd(&s01, &s23);
        w.store(&out, &g, &s);
    })?;
    let got = rec.download(out)?;
    let want = (0..t as u64)
        .map(|g| {
            let mut a = [0f64; 4];
            for p in 0..passes as u64 {
                let base = (g + p * block as u64) % t as u64;
                for j in 0..iters as u64 {
                    for (k, acc) in a.iter_mut().enumerate() {
                        *acc += host[(base + (4 * j + k as u64) * t as u64) as usize];
                    }
                }
            }
            (a[0] + a[1]) + (a[2] + a[3])
        })
        .collect();
    Ok((got, want))
}

fn run_l2_stream(p: &Params, rec: &mut Recorder) -> Result<String, GenError> {
    let cfg = L2StreamCfg::parse(p)?;
    let (got, want) = record_l2_stream(&cfg, rec)?;
    check_eq("l2_stream", "out", &got, &want)?;
    Ok(format!(
        "{} passes over {} bytes by {} CTAs of {} threads verified",
        cfg.passes, cfg.bytes, cfg.ctas, cfg.block
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{find, generate};
    use tessera_traces::{verify, Command, OpClass, TraceFile};

    use crate::workloads::test_support::params;

    fn parse(name: &str, kv: &[(&str, &str)]) -> Params {
        Params::parse(find(name).unwrap(), &params(kv)).unwrap()
    }

    /// Records with `f` into a fresh file, finishes it, verifies and opens it.
    fn record<R>(f: impl FnOnce(&mut Recorder) -> R) -> (tempfile::TempDir, TraceFile, R) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let r = f(&mut rec);
        rec.finish().unwrap();
        let t = TraceFile::open(&path).unwrap();
        verify(&t).unwrap();
        (dir, t, r)
    }

    fn opcode_name(t: &TraceFile, k: usize, slot: u32) -> &str {
        let m = &t.kernels()[k];
        &m.opcodes[m.statics[slot as usize].opcode as usize].name
    }

    /// Every probe generates with its defaults through the registry (functional check
    /// included) and its file verifies.
    #[test]
    fn every_probe_generates_with_defaults() {
        for name in [
            "pointer_chase",
            "fma_chain",
            "fma_streams",
            "occupancy",
            "barrier",
            "launch_gap",
            "l2_stream",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("d.tst");
            let rep = generate(name, &[], 80, &path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(rep.generator.starts_with(name));
            verify(&TraceFile::open(&path).unwrap()).unwrap();
        }
    }

    /// The chase's recorded loads are exactly the chain: load `i` (warm-up included) reads
    /// slot `i % slots`, from lane 0 alone, and each `LDG.E.64` writes the register its
    /// address came from; the final pointer matches the reference walk and the formula.
    #[test]
    fn pointer_chase_loads_walk_the_chain() {
        for (footprint, stride, loads, unroll, warmup) in [
            ("4096", "128", "64", "8", "1"),
            ("240", "24", "16", "4", "0"),
            ("1024", "8", "40", "5", "2"),
        ] {
            let p = parse(
                "pointer_chase",
                &[
                    ("footprint", footprint),
                    ("stride", stride),
                    ("loads", loads),
                    ("unroll", unroll),
                    ("warmup", warmup),
                ],
            );
            let cfg = ChaseCfg::parse(&p).unwrap();
            let (_d, t, out) = record(|r| record_pointer_chase(&cfg, r).unwrap());
            let (n, s) = (cfg.slots(), cfg.stride as u64);
            let total = cfg.total_loads();
            assert_eq!(out.got, out.want);
            assert_eq!(out.got, out.base + total % n * s);
            let k = &t.kernels()[0];
            let warm = cfg.warm_loads();
            let (l, u) = (cfg.loads as u64, cfg.unroll as u64);
            assert_eq!(k.counts.warp_insts, 8 + 4 * warm + l + 3 * l / u);
            assert_eq!(cfg.warp_insts(), k.counts.warp_insts);
            assert_eq!(
                k.counts.class_warp_insts[OpClass::LoadGlobal as usize],
                total
            );
            let mut dec = t.decoder();
            let d = dec.kernel_cta(0, 0).unwrap().clone();
            let mut addrs = Vec::new();
            for inst in d.warp(0) {
                if inst.class != OpClass::LoadGlobal {
                    continue;
                }
                assert_eq!(opcode_name(&t, 0, inst.slot), "LDG.E.64");
                assert_eq!(inst.mask, 1, "only lane 0 chases");
                let st = &k.statics[inst.slot as usize];
                assert_eq!(st.dsts, st.srcs, "LDG.E.64 Rp, [Rp]");
                let lanes: Vec<(u32, u64)> = d.lane_addrs(inst).collect();
                assert_eq!(lanes.len(), 1);
                addrs.push(lanes[0].1);
            }
            let want: Vec<u64> = (0..total).map(|i| out.base + i % n * s).collect();
            assert_eq!(addrs, want);
        }
    }

    /// Warp instructions per warp: 8 + iters + 3 * iters / unroll (see
    /// `record_fma_chain`), iters of them FFMA, all writing the register they read first.
    #[test]
    fn fma_chain_is_bit_exact_and_counts_match() {
        for (iters, unroll, warps) in [(1024u32, 8u32, 1u32), (96, 3, 3), (5, 5, 1)] {
            let cfg = FmaCfg {
                streams: 1,
                iters,
                unroll,
                warps,
            };
            let (_d, t, (got, want)) = record(|r| record_fma_chain(&cfg, r).unwrap());
            assert_eq!(got, want);
            // An independent reference: thread t's x after iters steps.
            let mut x = 7.0f32;
            for _ in 0..iters {
                x = x.mul_add(FMA_A, FMA_B);
            }
            assert_eq!(got[7].to_bits(), x.to_bits());
            let k = &t.kernels()[0];
            let (i, u, w) = (iters as u64, unroll as u64, warps as u64);
            assert_eq!(k.counts.warps, w);
            assert_eq!(k.counts.warp_insts, w * (8 + i + 3 * i / u));
            assert_eq!(k.counts.warp_insts, w * cfg.warp_insts_chain());
            assert_eq!(k.counts.class_warp_insts[OpClass::Fp32 as usize], w * i);
            let ffma: Vec<_> = k
                .statics
                .iter()
                .filter(|s| k.opcodes[s.opcode as usize].name == "FFMA")
                .collect();
            assert_eq!(ffma.len() as u64, u, "one PC per unrolled copy");
            for s in &ffma {
                assert_eq!(s.dsts[0], s.srcs[0], "x = fma(x, a, b) in place");
                assert_eq!(s.dsts[0], ffma[0].dsts[0]);
            }
        }
    }

    /// Warp instructions per warp: 8 + 2 * streams + iters * streams + 3 * iters / unroll
    /// (see `record_fma_streams`); the streams' FFMAs write `streams` distinct registers.
    #[test]
    fn fma_streams_is_bit_exact_and_counts_match() {
        for (streams, iters, unroll, warps) in
            [(8u32, 1024u32, 4u32, 1u32), (3, 12, 2, 2), (40, 8, 4, 1)]
        {
            let cfg = FmaCfg {
                streams,
                iters,
                unroll,
                warps,
            };
            let (_d, t, (got, want)) = record(|r| record_fma_streams(&cfg, r).unwrap());
            assert_eq!(got, want);
            let k = &t.kernels()[0];
            let (s, i, u, w) = (streams as u64, iters as u64, unroll as u64, warps as u64);
            assert_eq!(k.counts.warp_insts, w * (8 + 2 * s + i * s + 3 * i / u));
            assert_eq!(k.counts.warp_insts, w * cfg.warp_insts_streams());
            // FFMAs plus the FMUL of b.
            assert_eq!(
                k.counts.class_warp_insts[OpClass::Fp32 as usize],
                w * (i * s + 1)
            );
            let mut regs: Vec<u16> = k
                .statics
                .iter()
                .filter(|st| k.opcodes[st.opcode as usize].name == "FFMA")
                .map(|st| {
                    assert_eq!(st.dsts[0], st.srcs[0]);
                    st.dsts[0]
                })
                .collect();
            assert_eq!(regs.len() as u64, u * s, "one PC per unrolled copy");
            regs.sort_unstable();
            regs.dedup();
            assert_eq!(regs.len() as u64, s, "one register per stream");
        }
    }

    /// The resident-CTA counts the assumed A100 limits give: 4 (registers), 3 (shared
    /// memory), 2 (threads); the trace declares each kernel's registers and shared memory,
    /// launches waves x sms x resident CTAs, and the copies are right.
    #[test]
    fn occupancy_kernels_declare_their_limits() {
        assert_eq!(resident_ctas(128, 128, 0), (4, "registers"));
        assert_eq!(resident_ctas(128, 32, 48 * 1024), (3, "shared memory"));
        assert_eq!(resident_ctas(1024, 16, 0), (2, "threads"));
        assert_eq!(resident_ctas(32, 8, 0), (32, "CTA slots"));
        for k in &OCC_KERNELS {
            assert_eq!(
                resident_ctas(k.threads, k.regs, k.shmem),
                (k.resident, k.limit)
            );
        }
        let (waves, sms) = (2, 5);
        let (_d, t, res) = record(|r| record_occupancy(waves, sms, r).unwrap());
        assert_eq!(t.kernels().len(), 3);
        for ((k, m), (ctas, got, want)) in OCC_KERNELS.iter().zip(t.kernels()).zip(&res) {
            assert_eq!(got, want, "{}", k.name);
            assert_eq!(m.name, k.name);
            assert_eq!(m.nregs, k.regs, "{}", k.name);
            assert_eq!(m.shmem_bytes, k.shmem, "{}", k.name);
            assert_eq!(m.block, [k.threads, 1, 1]);
            assert_eq!(*ctas, waves * sms * k.resident);
            assert_eq!(m.grid, [*ctas, 1, 1]);
            assert_eq!(m.counts.ctas, *ctas as u64);
        }
        assert_eq!(
            t.kernels()[1].counts.class_warp_insts[OpClass::LoadShared as usize],
            t.kernels()[1].counts.warps
        );
    }

    /// Every warp records iters + 1 BAR.SYNC (the initial one and one per round), and the
    /// neighbour sums are right, including partial warps and several CTAs.
    #[test]
    fn barrier_counts_and_result() {
        for (threads, iters, ctas) in [(256u32, 64u32, 1u32), (100, 7, 3), (1024, 2, 1)] {
            let cfg = BarrierCfg {
                threads,
                iters,
                ctas,
            };
            let (_d, t, (got, want)) = record(|r| record_barrier(&cfg, r).unwrap());
            assert_eq!(got, want);
            // Independent check in closed form: away from the wrap (t + iters < threads)
            // v_r[t] = sum_j C(r, j) 2^(r-j) (g + j) = 3^r g + r 3^(r-1), g = c n + t.
            let p3 = |e: u32| (0..e).fold(1u32, |a, _| a.wrapping_mul(3));
            for c in 0..ctas {
                for tt in (0..threads).filter(|tt| tt + iters < threads) {
                    let g = c * threads + tt;
                    let v = p3(iters)
                        .wrapping_mul(g)
                        .wrapping_add(iters.wrapping_mul(p3(iters - 1)));
                    assert_eq!(got[g as usize], v, "CTA {c} thread {tt}");
                }
            }
            let k = &t.kernels()[0];
            let warps_per_cta = threads.div_ceil(32);
            let mut dec = t.decoder();
            for c in 0..ctas {
                let d = dec.kernel_cta(0, c).unwrap().clone();
                assert_eq!(d.warps.len() as u32, warps_per_cta);
                for w in 0..d.warps.len() {
                    let bars = d
                        .warp(w)
                        .iter()
                        .filter(|i| opcode_name(&t, 0, i.slot) == "BAR.SYNC")
                        .count();
                    assert_eq!(bars as u32, iters + 1, "CTA {c} warp {w}");
                }
            }
            assert_eq!(
                k.counts.class_warp_insts[OpClass::Barrier as usize],
                (ctas * warps_per_cta * (iters + 1)) as u64
            );
            // By hand (see `BarrierCfg::warp_insts`): 14 or 15 + 11 per round.
            let modulo = if threads.is_power_of_two() { 1 } else { 2 };
            assert_eq!(cfg.warp_insts(), 13 + modulo + 11 * iters as u64);
            assert_eq!(
                k.counts.warp_insts,
                (ctas * warps_per_cta) as u64 * cfg.warp_insts()
            );
        }
    }

    /// `kernels` KernelLaunch commands; each kernel 1 CTA, 1 warp, 2 warp instructions
    /// (MOV prologue and EXIT), 64 thread instructions.
    #[test]
    fn launch_gap_counts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.tst");
        generate("launch_gap", &params(&[("kernels", "5")]), 80, &path).unwrap();
        let t = TraceFile::open(&path).unwrap();
        verify(&t).unwrap();
        let launches = t
            .commands()
            .iter()
            .filter(|c| matches!(c, Command::KernelLaunch { .. }))
            .count();
        assert_eq!(launches, 5);
        assert_eq!(t.kernels().len(), 5);
        for k in t.kernels() {
            assert_eq!(k.counts.ctas, 1);
            assert_eq!(k.counts.warps, 1);
            assert_eq!(k.counts.warp_insts, 2);
            assert_eq!(k.counts.thread_insts, 64);
            let ops: Vec<&str> = k
                .statics
                .iter()
                .map(|s| k.opcodes[s.opcode as usize].name.as_str())
                .collect();
            assert_eq!(ops, ["MOV", "EXIT"]);
        }
    }

    /// The L2 stream's instruction counts match its formula (remainder by a power of two
    /// or not), every pass loads the whole buffer once, and the sums match the reference
    /// (checked by the generator).
    #[test]
    fn l2_stream_counts() {
        for ctas in [2u64, 3] {
            let (c, bytes) = (ctas.to_string(), (32 * 64 * 3 * ctas).to_string());
            let kv = [
                ("ctas", c.as_str()),
                ("block", "64"),
                ("bytes", bytes.as_str()),
                ("passes", "2"),
            ];
            let cfg = L2StreamCfg::parse(&parse("l2_stream", &kv)).unwrap();
            assert_eq!(cfg.iters(), 3);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("l.tst");
            generate("l2_stream", &params(&kv), 80, &path).unwrap();
            let t = TraceFile::open(&path).unwrap();
            verify(&t).unwrap();
            let k = &t.kernels()[0];
            assert_eq!(k.counts.ctas, ctas);
            assert_eq!(
                k.counts.warp_insts,
                2 * ctas * cfg.warp_insts(),
                "ctas={ctas}"
            );
        }
        assert!(L2StreamCfg::parse(&parse("l2_stream", &[("bytes", "1000")])).is_err());
    }

    /// Unknown names, zeros and bad combinations are parameter errors that list the valid
    /// parameters.
    #[test]
    fn bad_parameters_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.tst");
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: &[Case] = &[
            ("pointer_chase", &[("bogus", "1")], "no parameter 'bogus'"),
            ("pointer_chase", &[("loads", "0")], "must be at least 1"),
            ("pointer_chase", &[("stride", "12")], "multiple of 8"),
            (
                "pointer_chase",
                &[("footprint", "1000")],
                "multiple of stride",
            ),
            ("pointer_chase", &[("loads", "100")], "must divide loads"),
            ("pointer_chase", &[("warmup", "x")], "whole number"),
            (
                "pointer_chase",
                &[("footprint", "1073741824"), ("stride", "8")],
                "warp instructions in one CTA",
            ),
            (
                "fma_streams",
                &[
                    ("streams", "64"),
                    ("iters", "16777216"),
                    ("unroll", "4"),
                    ("warps", "32"),
                ],
                "warp instructions in one CTA",
            ),
            ("fma_chain", &[("iters", "0")], "must be at least 1"),
            ("fma_chain", &[("iters", "100")], "must divide iters"),
            ("fma_chain", &[("warps", "33")], "maximum 32"),
            ("fma_streams", &[("streams", "0")], "must be at least 1"),
            (
                "fma_streams",
                &[("streams", "64"), ("unroll", "8")],
                "at most 256",
            ),
            ("occupancy", &[("ctas", "216")], "no parameter 'ctas'"),
            ("occupancy", &[("waves", "0")], "must be at least 1"),
            ("barrier", &[("threads", "2048")], "maximum 1024"),
            ("barrier", &[("iters", "0")], "must be at least 1"),
            ("launch_gap", &[("kernels", "0")], "must be at least 1"),
            ("launch_gap", &[("threads", "32")], "no parameter 'threads'"),
        ];
        for (name, kv, what) in cases {
            let e = generate(name, &params(kv), 80, &path).unwrap_err();
            let GenError::Params(msg) = &e else {
                panic!("{name} {kv:?}: {e}")
            };
            assert!(msg.contains(what), "{name} {kv:?}: {msg}");
            assert!(msg.contains("valid parameters"), "{msg}");
            for p in find(name).unwrap().params {
                assert!(msg.contains(p.name), "{msg} lacks {}", p.name);
            }
            assert!(!path.exists(), "a failed generation leaves no file");
        }
    }
}
