//! `tessera trace ...`: import, export, info, verify.

use crate::progress::Unit;
use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;
use tessera_frontend::accelsim::{
    export_dir_with_progress, import_dir_with_progress, ImportOptions,
};
use tessera_traces::{OpClass, TraceFile, WriterOptions};

#[derive(Subcommand)]
pub enum TraceCmd {
    /// Convert a trace in another format into a .tst file.
    Import {
        format: Format,
        /// Trace directory (for accel-sim: the folder with kernelslist.g).
        dir: PathBuf,
        /// Output .tst file (written as <FILE>.partial and renamed when complete).
        #[arg(short, long, value_name = "FILE.tst")]
        output: PathBuf,
        /// Import opcodes unknown to the architecture's table as class `other` (counted and
        /// reported) instead of failing.
        #[arg(long)]
        allow_unknown_opcodes: bool,
        #[command(flatten)]
        writer: WriterArgs,
    },
    /// Write a .tst file back in another format.
    Export {
        format: Format,
        /// The .tst file.
        file: PathBuf,
        /// Output directory (must not exist or be empty).
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
    },
    /// Per-kernel summary: grid, block, CTAs, warps, instructions, mix by class, bytes.
    Info {
        file: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Decode everything and check counts and checksums.
    Verify { file: PathBuf },
    /// Record a built-in workload (run functionally on real data) into a .tst file.
    Gen {
        /// Workload name (see --list).
        #[arg(required_unless_present = "list")]
        workload: Option<String>,
        /// A workload parameter, `key=value` (repeatable).
        #[arg(long = "param", short = 'p', value_name = "KEY=VALUE", value_parser = parse_kv)]
        params: Vec<(String, String)>,
        /// Output .tst file.
        #[arg(short, long, value_name = "FILE.tst", required_unless_present = "list")]
        output: Option<PathBuf>,
        /// Architecture to emit SASS for, as a binary version (70, 75, 80, 86, 89, 90).
        #[arg(long, default_value_t = 80)]
        arch: u32,
        /// List the workloads with their parameters and defaults.
        #[arg(long)]
        list: bool,
    },
}

pub fn parse_kv(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected key=value, found '{s}'"))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

fn gen(
    workload: Option<String>,
    params: &[(String, String)],
    output: Option<PathBuf>,
    arch: u32,
    list: bool,
) -> Result<()> {
    use tessera_frontend::workloads;
    if list {
        for w in workloads::all() {
            outln!("{:<16} {}", w.name, w.help);
            for p in w.params {
                outln!("    {:<14} default {:<10} {}", p.name, p.default, p.help);
            }
        }
        return Ok(());
    }
    let (Some(name), Some(out)) = (workload, output) else {
        anyhow::bail!("give a workload and -o FILE.tst, or --list");
    };
    let t0 = Instant::now();
    let _pending = crate::cleanup::pending(&crate::outputs::partial(&out));
    let beat = crate::progress::Progress::heartbeat("gen", format!("recording {name}"));
    let rep = workloads::generate(&name, params, arch, &out);
    beat.finish();
    let rep = rep?;
    let secs = t0.elapsed().as_secs_f64();
    outln!("{}: {}", rep.generator, rep.summary);
    outln!(
        "wrote {}: {} kernel(s), {} CTAs, {} warps, {} warp instructions, {} thread instructions",
        out.display(),
        rep.stats.kernels,
        rep.stats.ctas,
        rep.stats.warps,
        rep.stats.warp_insts,
        rep.stats.thread_insts
    );
    eprintln!(
        "recorded in {secs:.2} s: {:.2} M warp instructions/s{}",
        rep.stats.warp_insts as f64 / 1e6 / secs.max(1e-9),
        crate::provenance::peak_rss_note()
    );
    Ok(())
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// Accel-Sim / NVBit tracer text traces (kernelslist.g + kernel-N.traceg[.xz]).
    AccelSim,
}

#[derive(Args)]
pub struct WriterArgs {
    /// zstd level of the chunks (1 fastest .. 19 smallest).
    #[arg(long, default_value_t = WriterOptions::default().zstd_level, value_parser = clap::value_parser!(i32).range(1..=22))]
    zstd_level: i32,
    /// Uncompressed chunk size target, KiB (64 to 1024).
    #[arg(long, default_value_t = (WriterOptions::default().chunk_target_bytes / 1024) as u64, value_parser = clap::value_parser!(u64).range(64..=1024))]
    chunk_kib: u64,
}

pub fn run(cmd: TraceCmd) -> Result<()> {
    match cmd {
        TraceCmd::Import {
            format: Format::AccelSim,
            dir,
            output,
            allow_unknown_opcodes,
            writer,
        } => {
            let t0 = Instant::now();
            let opts = ImportOptions {
                allow_unknown_opcodes,
                writer: WriterOptions {
                    zstd_level: writer.zstd_level,
                    chunk_target_bytes: writer.chunk_kib as usize * 1024,
                },
            };
            // The total is not known before the kernels are read (their text may be
            // compressed): what is done so far, without a share.
            let mut bar = crate::progress::Progress::new("import", None, Unit::Kernels);
            let mut progress = |r: &tessera_frontend::accelsim::ImportReport| {
                bar.update(r.kernels, || {
                    let s = t0.elapsed().as_secs_f64().max(1e-9);
                    format!(
                        "{:.0} MB of text read, {} kernel(s) done, {:.1} MB/s",
                        r.text_bytes as f64 / 1e6,
                        r.kernels,
                        r.text_bytes as f64 / 1e6 / s
                    )
                });
            };
            // Never over the directory or a file the import reads there (the lists and
            // the kernel traces).
            let reads = crate::outputs::files_in(&dir, |n| {
                n.contains("kernelslist") || n.contains(".traceg") || n.ends_with(".g")
            });
            let mut inputs: Vec<&std::path::Path> = vec![&dir];
            inputs.extend(reads.iter().map(|p| p.as_path()));
            crate::outputs::refuse_input(&output, &inputs)?;
            let pending = crate::cleanup::pending(&crate::outputs::partial(&output));
            let res = import_dir_with_progress(&dir, &output, &opts, &mut progress);
            drop(pending);
            bar.finish();
            let rep = res?;
            let secs = t0.elapsed().as_secs_f64();
            let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
            outln!(
                "imported {} kernel(s), {} CTAs, {} warps, {} warp instructions, {} thread instructions",
                rep.kernels, rep.ctas, rep.warps, rep.warp_insts, rep.thread_insts
            );
            outln!(
                "wrote {} ({} bytes, {:.2}x smaller than the {} bytes of text)",
                output.display(),
                size,
                rep.text_bytes as f64 / size.max(1) as f64,
                rep.text_bytes
            );
            for (op, n) in &rep.unknown_opcodes {
                outln!("unknown opcode {op}: {n} warp instructions imported as class 'other'");
            }
            eprintln!(
                "import took {secs:.2} s: {:.1} MB/s of text, {:.2} M warp instructions/s{}",
                rep.text_bytes as f64 / 1e6 / secs,
                rep.warp_insts as f64 / 1e6 / secs,
                crate::provenance::peak_rss_note()
            );
            Ok(())
        }
        TraceCmd::Export {
            format: Format::AccelSim,
            file,
            output,
        } => {
            // Never over the trace: not as the directory, nor as a file the export
            // writes into it.
            crate::outputs::refuse_input(&output, &[&file])?;
            let writes = crate::outputs::files_in(&output, |n| {
                n == "kernelslist.g" || n.starts_with("kernel-") || n.ends_with(".traceg")
            });
            for w in &writes {
                crate::outputs::refuse_input(w, &[&file])?;
            }
            let pending = crate::cleanup::pending(&crate::outputs::partial(&output));
            let mut bar = None;
            let mut progress = |done: u64, total: u64| {
                bar.get_or_insert_with(|| {
                    crate::progress::Progress::new("export", Some(total), Unit::Ctas)
                })
                .update(done, || "writing Accel-Sim text".to_string());
            };
            let res = export_dir_with_progress(&file, &output, &mut progress);
            drop(pending);
            if let Some(b) = bar {
                b.finish();
            }
            let rep = res?;
            outln!(
                "exported {} kernel(s), {} warp instructions to {} ({} files, {} bytes)",
                rep.kernels,
                rep.warp_insts,
                output.display(),
                rep.files,
                rep.bytes
            );
            Ok(())
        }
        TraceCmd::Info { file, json } => info(&file, json),
        TraceCmd::Gen {
            workload,
            params,
            output,
            arch,
            list,
        } => gen(workload, &params, output, arch, list),
        TraceCmd::Verify { file } => {
            let t = TraceFile::open(&file)?;
            let t0 = Instant::now();
            let rep = tessera_traces::verify(&t)
                .with_context(|| format!("verification of {} failed", file.display()))?;
            let secs = t0.elapsed().as_secs_f64();
            outln!(
                "{}: OK: {} kernel(s), {} chunks, {} CTAs, {} warps, {} warp instructions, {} thread instructions; all checksums and counts match; every CTA present, every warp exits, barriers agree{}",
                file.display(),
                rep.kernels,
                rep.chunks,
                rep.ctas,
                rep.warps,
                rep.warp_insts,
                rep.thread_insts,
                if rep.checked_accesses > 0 {
                    format!(", {} lane accesses inside allocations", rep.checked_accesses)
                } else {
                    String::new()
                }
            );
            eprintln!(
                "decoded in {secs:.2} s ({:.1} M warp instructions/s){}",
                rep.warp_insts as f64 / 1e6 / secs.max(1e-9),
                crate::provenance::peak_rss_note()
            );
            Ok(())
        }
    }
}

fn info(file: &std::path::Path, as_json: bool) -> Result<()> {
    let t = TraceFile::open(file)?;
    let mut kernels = Vec::new();
    let (mut ctas, mut warps, mut wi, mut ti) = (0u64, 0u64, 0u64, 0u64);
    for k in t.kernels() {
        let c = &k.counts;
        ctas += c.ctas;
        warps += c.warps;
        wi += c.warp_insts;
        ti += c.thread_insts;
        let mut mix = serde_json::Map::new();
        for cl in OpClass::ALL {
            let n = c.class_warp_insts.get(cl as usize).copied().unwrap_or(0);
            if n > 0 {
                mix.insert(cl.name().to_string(), json!(n));
            }
        }
        kernels.push(json!({
            "name": k.name,
            "id": k.id,
            "device": k.device,
            "grid": k.grid,
            "block": k.block,
            "ctas": c.ctas,
            "warps": c.warps,
            "warp_insts": c.warp_insts,
            "thread_insts": c.thread_insts,
            "binary_version": k.binary_version,
            "tracer_version": k.tracer_version,
            "mix": mix,
            "raw_bytes": c.raw_bytes,
            "stored_bytes": c.stored_bytes,
            "chunks": k.n_chunks,
            "unknown_opcode_insts": c.unknown_opcode_insts,
            "spin_regions": k.spin_regions.iter().map(|r| json!({
                "kind": r.kind.name(),
                "start_pc": r.start_pc,
                "test_pc": r.test_pc,
                "end_pc": r.end_pc,
                "terms": r.terms.len(),
                "label": r.label,
                "rebased_accesses": r.rebased.len(),
            })).collect::<Vec<_>>(),
            "named_barriers": k.named_barriers.len(),
            "mbarrier_insts": k.mbarriers.len(),
        }));
    }
    let doc = json!({
        "file": file.display().to_string(),
        "format_version": t.version(),
        "kernels": kernels,
        "sync_words": t.index().sync_words.iter().map(|w| json!({
            "name": w.name,
            "device": w.device,
            "addr": w.addr,
            "words": w.init.len(),
            "checked": !w.expect.is_empty(),
        })).collect::<Vec<_>>(),
        "totals": {
            "kernels": t.kernels().len(),
            "ctas": ctas,
            "warps": warps,
            "warp_insts": wi,
            "thread_insts": ti,
            "file_bytes": t.file_bytes(),
            "commands": t.commands().len(),
            "devices": t.index().devices.len(),
        }
    });
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    outln!(
        "{}: .tst format {}, {} device(s), {} command(s), {} bytes",
        file.display(),
        t.version(),
        t.index().devices.len(),
        t.commands().len(),
        t.file_bytes()
    );
    for (i, k) in t.kernels().iter().enumerate() {
        let c = &k.counts;
        outln!(
            "kernel {i} (id {}) {}\n  grid ({},{},{}) block ({},{},{}) sm_{} tracer v{}\n  {} CTAs, {} warps, {} warp instructions, {} thread instructions\n  {} bytes in {} chunks ({} bytes uncompressed)",
            k.id, k.name, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
            k.binary_version, k.tracer_version, c.ctas, c.warps, c.warp_insts, c.thread_insts,
            c.stored_bytes, k.n_chunks, c.raw_bytes
        );
        let mut mix: Vec<(OpClass, u64)> = OpClass::ALL
            .iter()
            .map(|&cl| {
                (
                    cl,
                    c.class_warp_insts.get(cl as usize).copied().unwrap_or(0),
                )
            })
            .filter(|&(_, n)| n > 0)
            .collect();
        mix.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let parts: Vec<String> = mix
            .iter()
            .map(|(cl, n)| {
                format!(
                    "{} {} ({:.1}%)",
                    cl.name(),
                    n,
                    100.0 * *n as f64 / c.warp_insts.max(1) as f64
                )
            })
            .collect();
        outln!("  mix: {}", parts.join(", "));
        if c.unknown_opcode_insts > 0 {
            outln!(
                "  {} warp instructions with unknown opcodes (class other)",
                c.unknown_opcode_insts
            );
        }
        for r in &k.spin_regions {
            let rebased = if r.rebased.is_empty() {
                String::new()
            } else {
                format!(", {} access(es) rebased by its value", r.rebased.len())
            };
            outln!(
                "  {} region at pc {:#x} (test {:#x}, end {:#x}): {} exit term(s){rebased}, {}",
                r.kind.name(),
                r.start_pc,
                r.test_pc,
                r.end_pc,
                r.terms.len(),
                r.label
            );
        }
        if !k.named_barriers.is_empty() {
            outln!("  {} named barrier instruction(s)", k.named_barriers.len());
        }
        if !k.mbarriers.is_empty() {
            outln!("  {} mbarrier instruction(s)", k.mbarriers.len());
        }
    }
    for w in &t.index().sync_words {
        outln!(
            "sync words {:?} on device {} at {:#x}: {} word(s), {}",
            w.name,
            w.device,
            w.addr,
            w.init.len(),
            if w.expect.is_empty() {
                "final values not recorded"
            } else {
                "final values checked after a run"
            }
        );
    }
    outln!(
        "total: {} kernel(s), {ctas} CTAs, {warps} warps, {wi} warp instructions, {ti} thread instructions",
        t.kernels().len()
    );
    Ok(())
}
