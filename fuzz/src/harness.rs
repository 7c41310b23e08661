//! The fuzz harnesses of issue 21, shared by the cargo-fuzz targets (`fuzz/fuzz_targets`,
//! nightly features, libFuzzer) and the stable property tests (`tests/fuzz_props.rs`, which
//! includes this file with `#[path]`). Each harness takes arbitrary bytes and panics on a
//! broken invariant, so that both drivers report it the same way:
//!
//! - [`tst`]: the bytes (after one flag byte) as a `.tst` file: open, decode every chunk
//!   (whole CTAs and the run's incremental stream path), `verify`. No panic; whatever
//!   decoding refuses `verify` refuses; what `verify` accepts decodes both ways alike. Or
//!   (flag bit 1) as one CTA record ([`record`]): decoded whole and as a stream, the two
//!   agree on accepting it and on every instruction.
//! - [`accelsim`]: the bytes as an Accel-Sim directory (`kernelslist.g`, a NUL, then
//!   `kernel-1.traceg`), imported; every line also through `parse_inst_line`. No panic; an
//!   import that succeeds gives a file that opens, passes `verify_structure`, exports and
//!   imports again to the same counts.
//! - [`config`]: the bytes as a YAML config (and, after a 0xFF byte, `--set` lines), loaded
//!   alone and over `base: <repo>/configs/a100.yaml`. No panic; a loaded config validates
//!   and runs the seed trace (or refuses it) without a panic.
//! - [`run`]: the bytes as edits of a small valid trace (vectorAdd, 64 elements): raw byte
//!   flips, index edits with the index checksum fixed, or edits of the decoded instruction
//!   streams written back with the writer; then open, `verify`, and the run `tessera run`
//!   does (`check_trace`, `run_gpu_placed`). No panic; a flipped byte that changes a chunk's
//!   contents is refused; whatever `verify_structure` refuses, the run refuses.
//!   What `verify` refuses only for its semantic rules (threads not exited, barriers, CTAs
//!   outside the grid or twice, accesses outside every allocation) while the run succeeds
//!   is counted ([`RunOutcome::SemanticOnly`]) and is an error only with
//!   `TESSERA_FUZZ_STRICT_SEMANTIC=1` ([`Env::strict_semantic`]).
//!
//! Hangs are the drivers' business: libFuzzer's `-timeout`, and a time bound per case in
//! tests/fuzz_props.rs.

use std::path::{Path, PathBuf};
use tessera_cluster::Placement;
use tessera_partitions::check::check_trace;
use tessera_partitions::config::{parse_set, GpuConfig};
use tessera_system::run_gpu_placed;
use tessera_traces::codec::{decode_cta, list_len};
use tessera_traces::{
    verify, verify_structure, AddrRecord, Addrs, ClusterInfo, CtaStream, DecodedCta, RawInst,
    TraceFile, TraceWriter, WarpCursor, WriterOptions,
};

/// Whether a finding already reported is to be passed over: `TESSERA_FUZZ_KNOWN` holds
/// `|`-separated substrings of the messages (or the names below) of findings already saved
/// under tests/data/fuzz, so that a long run looks for new ones. Never set in the tests.
/// Names: `open-short` (files under 8 bytes, `TraceFile::open` panics on some).
pub fn known(what: &str) -> bool {
    static KNOWN: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    KNOWN
        .get_or_init(|| {
            std::env::var("TESSERA_FUZZ_KNOWN")
                .unwrap_or_default()
                .split('|')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .iter()
        .any(|k| what.contains(k.as_str()))
}

/// Panics with `msg` unless it is [`known`].
fn finding(msg: String) {
    if !known(&msg) {
        panic!("{msg}");
    }
}

/// What the harnesses share: a scratch directory, the repository's configs, the seed trace.
pub struct Env {
    dir: tempfile::TempDir,
    repo: PathBuf,
    /// The small valid trace the `run` harness edits (vectorAdd, n=64, sm_80).
    pub seed_tst: Vec<u8>,
    seed_ctas: Vec<DecodedCta>,
    seed_spans: Vec<(usize, usize)>,
    /// The seed trace, open (what [`config`] runs on a config that loads).
    seed_file: TraceFile,
    cfg: GpuConfig,
    /// [`run`]: a run that succeeds where `verify` refuses for a semantic rule is an error.
    strict_semantic: bool,
}

/// CRC-32 (IEEE), as the `.tst` footer and index store it.
pub fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// The footer of a `.tst` image: `(index offset, index length)` when it looks like one.
fn footer(b: &[u8]) -> Option<(usize, usize)> {
    if b.len() < 16 + 32 || &b[b.len() - 8..] != b"TSTINDEX" {
        return None;
    }
    let f = b.len() - 32;
    let off = u64::from_le_bytes(b[f..f + 8].try_into().ok()?);
    let len = u64::from_le_bytes(b[f + 8..f + 16].try_into().ok()?);
    let end = off.checked_add(len)?;
    (off >= 16 && end == f as u64).then_some((off as usize, len as usize))
}

/// Rewrites the footer's index checksum to match the index bytes (no-op if no footer).
pub fn fix_index_crc(b: &mut [u8]) {
    if let Some((off, len)) = footer(b) {
        let crc = crc32(&b[off..off + len]);
        let f = b.len() - 32;
        b[f + 16..f + 20].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Every CTA of every chunk, decoded whole.
pub fn decode_all(t: &TraceFile) -> tessera_traces::Result<Vec<DecodedCta>> {
    let mut out = Vec::new();
    let mut dec = t.decoder();
    for chunk in 0..t.index().chunks.len() {
        dec.for_each_cta(chunk, |c| -> tessera_traces::Result<()> {
            out.push(c.clone());
            Ok(())
        })?;
    }
    Ok(out)
}

/// Every CTA of every kernel through the run's path (a `CtaStream` walked warp by warp by
/// a `WarpCursor`): the warp instructions seen, or the first error.
fn stream_all(t: &TraceFile) -> Result<u64, String> {
    let mut dec = t.decoder();
    let mut n = 0u64;
    for (k, m) in t.kernels().iter().enumerate() {
        // The index's own count (open checked it against the chunks); bounded for speed.
        let ctas = m.counts.ctas.min(1 << 16) as u32;
        for cta in 0..ctas {
            let s = dec.kernel_cta_stream(k, cta).map_err(|e| e.to_string())?;
            let mut cur = WarpCursor::new(m.records_operands);
            for w in 0..s.n_warps() {
                cur.start(&s, w).map_err(|e| e.0.to_string())?;
                let mut left = s.insts() + 1;
                while cur.peek().is_some() {
                    n += 1;
                    left = left
                        .checked_sub(1)
                        .expect("a warp cursor yields more instructions than its CTA holds");
                    cur.advance(&s).map_err(|e| e.0.to_string())?;
                }
            }
        }
    }
    Ok(n)
}

impl Env {
    /// `repo`: the repository root (for `configs/`).
    pub fn new(repo: &Path) -> Env {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let seed = dir.path().join("seed.tst");
        let params = [("n".to_string(), "64".to_string())];
        tessera_frontend::workloads::generate("vectoradd", &params, 80, &seed)
            .expect("vectoradd records");
        let seed_tst = std::fs::read(&seed).expect("seed trace");
        let t = TraceFile::open(&seed).expect("seed opens");
        verify(&t).expect("seed verifies");
        let seed_ctas = decode_all(&t).expect("seed decodes");
        let seed_spans = t
            .index()
            .chunks
            .iter()
            .map(|c| (c.offset as usize, c.offset as usize + c.stored_len as usize))
            .collect();
        let cfg = GpuConfig::load(repo.join("configs/gtx480.yaml"), &[]).expect("gtx480 loads");
        Env {
            dir,
            repo: repo.to_path_buf(),
            seed_tst,
            seed_ctas,
            seed_spans,
            seed_file: t,
            cfg,
            strict_semantic: std::env::var_os("TESSERA_FUZZ_STRICT_SEMANTIC")
                .is_some_and(|v| v == "1"),
        }
    }

    /// This environment with [`run`] strict about `verify`'s semantic rules too.
    pub fn strict_semantic(mut self) -> Env {
        self.strict_semantic = true;
        self
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Byte offsets of the seed's chunk frames, `[start, end)`.
    pub fn seed_chunk_spans(&self) -> &[(usize, usize)] {
        &self.seed_spans
    }
}

// ---------------------------------------------------------------------------------------
// (a) the .tst reader

/// What [`tst`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TstOutcome {
    OpenRefused,
    VerifyRefused,
    Verified,
}

/// `data[0]` bit 0: fix the index checksum of the rest before opening it (to get past the
/// checksum into the index's validation). The rest: the file. With bit 1 instead, the rest
/// is one CTA record of the seed trace's kernel ([`record`]).
pub fn tst(env: &Env, data: &[u8]) -> TstOutcome {
    let Some((&flags, body)) = data.split_first() else {
        return TstOutcome::OpenRefused;
    };
    if flags & 2 != 0 {
        return if record(env, body) {
            TstOutcome::Verified
        } else {
            TstOutcome::VerifyRefused
        };
    }
    if body.len() < 8 && known("open-short") {
        return TstOutcome::OpenRefused;
    }
    let mut b = body.to_vec();
    if flags & 1 != 0 {
        fix_index_crc(&mut b);
    }
    let p = env.path("tst.tst");
    std::fs::write(&p, &b).expect("write");
    tst_file(&p)
}

/// [`tst`] on a file.
pub fn tst_file(p: &Path) -> TstOutcome {
    let Ok(t) = TraceFile::open(p) else {
        return TstOutcome::OpenRefused;
    };
    let _ = (t.version(), t.file_bytes(), t.commands().len());
    for k in 0..t.kernels().len() {
        let _ = (t.slot_infos(k).len(), t.kernel_chunks(k));
    }
    let whole = decode_all(&t);
    let streamed = stream_all(&t);
    let vs = verify_structure(&t);
    let v = verify(&t);
    if let Err(e) = &whole {
        if vs.is_ok() || v.is_ok() {
            finding(format!(
                "verify accepts a trace whose chunks do not decode: {e}"
            ));
        }
    }
    if v.is_ok() {
        if vs.is_err() {
            finding("verify accepts what verify_structure refuses".into());
        }
        let insts: u64 = whole.iter().flatten().map(|c| c.insts.len() as u64).sum();
        match streamed {
            Err(e) => finding(format!(
                "verify accepts a trace the run's stream path refuses: {e}"
            )),
            Ok(n) => {
                if whole.is_ok()
                    && t.kernels().iter().all(|m| m.counts.ctas <= 1 << 16)
                    && n != insts
                {
                    finding(format!(
                        "the stream path and whole-CTA decoding disagree: {n} and {insts} warp instructions"
                    ));
                }
            }
        }
        TstOutcome::Verified
    } else {
        TstOutcome::VerifyRefused
    }
}

/// `rec` as one CTA record of the seed trace's kernel, decoded whole (`decode_cta`, what
/// `verify` and export read) and as a run reads it (`CtaStream`, walked by a `WarpCursor`):
/// both refuse it or both accept it and yield the same warps, instructions and lane
/// addresses. Returns whether it was accepted.
pub fn record(env: &Env, rec: &[u8]) -> bool {
    let t = &env.seed_file;
    let slots = t.slot_table(0);
    let version = t.version();
    let mut d = DecodedCta::default();
    let whole = decode_cta(rec, &slots, version, &mut d);
    let stream = CtaStream::new(rec, slots, version);
    let s = match (whole, stream) {
        (Err(_), Err(_)) => return false,
        (Ok(()), Err(e)) => {
            finding(format!(
                "decode_cta accepts a CTA record that CtaStream refuses ({})",
                e.0
            ));
            return false;
        }
        (Err(e), Ok(_)) => {
            finding(format!(
                "CtaStream accepts a CTA record that decode_cta refuses ({})",
                e.0
            ));
            return false;
        }
        (Ok(()), Ok(s)) => s,
    };
    if s.id() != d.id || s.n_warps() != d.warps.len() || s.insts() != d.insts.len() as u64 {
        finding(format!(
            "CtaStream and decode_cta disagree on a CTA: id {:?} / {:?}, {} / {} warps, {} / {} instructions",
            s.id(),
            d.id,
            s.n_warps(),
            d.warps.len(),
            s.insts(),
            d.insts.len()
        ));
        return true;
    }
    let mut cur = WarpCursor::new(false);
    for (w, dw) in d.warps.iter().enumerate() {
        if s.warp_id(w) != Some(dw.warp_id) {
            finding(format!(
                "warp {w}: CtaStream and decode_cta disagree on its id"
            ));
        }
        if let Err(e) = cur.start(&s, w) {
            finding(format!(
                "a checked CTA stream fails to start warp {w}: {}",
                e.0
            ));
            return true;
        }
        for (i, want) in d.insts[dw.insts.clone()].iter().enumerate() {
            let Some(got) = cur.peek().copied() else {
                finding(format!(
                    "warp {w}: the cursor ends after {i} instructions, decode_cta has {}",
                    dw.insts.len()
                ));
                return true;
            };
            let same = got.pc == want.pc
                && got.mask == want.mask
                && got.slot == want.slot
                && got.class == want.class;
            let (mut a, mut b) = (Vec::new(), Vec::new());
            cur.lane_source()
                .for_each_lane_addr(&got, |l, x| a.push((l, x)));
            d.for_each_lane_addr(want, |l, x| b.push((l, x)));
            if !same || a != b {
                finding(format!(
                    "warp {w} instruction {i}: the cursor gives {got:?} {a:x?}, decode_cta {want:?} {b:x?}"
                ));
                return true;
            }
            if let Err(e) = cur.advance(&s) {
                finding(format!(
                    "warp {w} instruction {i}: a checked CTA stream fails to advance: {}",
                    e.0
                ));
                return true;
            }
        }
        if cur.peek().is_some() {
            finding(format!(
                "warp {w}: the cursor yields more than decode_cta's {} instructions",
                dw.insts.len()
            ));
        }
    }
    true
}

/// The seed trace's CTAs as records (the inputs [`record`] starts from).
pub fn seed_records(env: &Env) -> Vec<Vec<u8>> {
    let mut enc = tessera_traces::codec::CtaEncoder::new();
    env.seed_ctas
        .iter()
        .map(|c| {
            enc.begin_cta(c.id, c.cluster);
            for w in &c.warps {
                enc.begin_warp(w.warp_id);
                for i in &c.insts[w.insts.clone()] {
                    let addrs = match i.addrs {
                        Addrs::None => AddrRecord::None,
                        Addrs::Stride { base, stride } => AddrRecord::Stride { base, stride },
                        Addrs::List { start, len } => AddrRecord::List {
                            mode: i.addr_mode,
                            addrs: &c.addrs[start as usize..(start + len) as usize],
                        },
                    };
                    enc.push(i.slot, i.mask, addrs);
                }
                enc.end_warp();
            }
            enc.finish_cta().to_vec()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// (b) the Accel-Sim importer

/// What [`accelsim`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportOutcome {
    Refused,
    Imported,
    /// Imported, but `verify` refuses it for a semantic rule (`verify_structure` passes).
    ImportedVerifyRefuses,
}

/// `kernelslist.g`, a NUL byte, `kernel-1.traceg` (without a NUL: a one-kernel list naming
/// it, and all of `data` as the kernel's file).
pub fn accelsim(env: &Env, data: &[u8]) -> ImportOutcome {
    let (list, kernel): (&[u8], &[u8]) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (b"kernel-1.traceg\n", data),
    };
    for line in kernel.split(|&b| b == b'\n') {
        let _ = tessera_frontend::accelsim::parse_inst_line(line, false);
        let _ = tessera_frontend::accelsim::parse_inst_line(line, true);
    }
    let dir = env.path("accelsim");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("kernelslist.g"), list).expect("write");
    std::fs::write(dir.join("kernel-1.traceg"), kernel).expect("write");
    accelsim_dir(env, &dir)
}

/// [`accelsim`] on a directory.
pub fn accelsim_dir(env: &Env, dir: &Path) -> ImportOutcome {
    use tessera_frontend::accelsim::{export_dir, import_dir, ImportOptions};
    let out = env.path("imported.tst");
    let _ = std::fs::remove_file(&out);
    let opts = ImportOptions {
        allow_unknown_opcodes: true,
        writer: WriterOptions::default(),
    };
    let Ok(rep) = import_dir(dir, &out, &opts) else {
        assert!(!out.exists(), "a failed import left its output behind");
        return ImportOutcome::Refused;
    };
    let t = match TraceFile::open(&out) {
        Ok(t) => t,
        Err(e) => {
            finding(format!("an imported trace does not open: {e}"));
            return ImportOutcome::Imported;
        }
    };
    let vs = match verify_structure(&t) {
        Ok(vs) => vs,
        Err(e) => {
            finding(format!("an imported trace fails verify_structure: {e}"));
            return ImportOutcome::Imported;
        }
    };
    if vs.ctas != rep.ctas {
        finding(format!(
            "import reports {} CTAs, verify counts {}",
            rep.ctas, vs.ctas
        ));
    }
    let semantic_ok = verify(&t).is_ok();
    drop(t);
    // Export, and import the export again: the same counts.
    let back = env.path("exported");
    let _ = std::fs::remove_dir_all(&back);
    if let Err(e) = export_dir(&out, &back) {
        finding(format!("an imported trace does not export: {e}"));
        return ImportOutcome::Imported;
    }
    let out2 = env.path("reimported.tst");
    let _ = std::fs::remove_file(&out2);
    if let Err(e) = import_dir(&back, &out2, &opts) {
        finding(format!("an exported trace does not import again: {e}"));
        return ImportOutcome::Imported;
    }
    let t2 = TraceFile::open(&out2).expect("re-imported trace opens");
    match verify_structure(&t2) {
        Ok(vs2) if vs2 == vs => {}
        other => finding(format!(
            "export then import changes the counts: {vs:?}, then {other:?}"
        )),
    }
    if semantic_ok {
        ImportOutcome::Imported
    } else {
        ImportOutcome::ImportedVerifyRefuses
    }
}

// ---------------------------------------------------------------------------------------
// (c) the config loader

/// YAML text, then optionally a 0xFF byte and `--set` arguments (`key=value`, one a line).
/// Loaded alone, then with a `base:` line naming configs/a100.yaml first. Returns how many
/// of the two loads succeeded.
pub fn config(env: &Env, data: &[u8]) -> usize {
    let (yaml, sets) = match data.iter().position(|&b| b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let sets: Vec<(String, String)> = String::from_utf8_lossy(sets)
        .lines()
        .filter_map(|l| parse_set(l).ok())
        .collect();
    let p = env.path("c.yaml");
    std::fs::write(&p, yaml).expect("write");
    let mut ok = usize::from(config_file(env, &p, &sets));
    let base = env.repo.join("configs/a100.yaml");
    let mut with_base = format!("base: {}\n", base.display()).into_bytes();
    with_base.extend_from_slice(yaml);
    let p = env.path("b.yaml");
    std::fs::write(&p, &with_base).expect("write");
    ok += usize::from(config_file(env, &p, &sets));
    ok
}

/// Loads one config; a loaded one must validate, answer its derived questions and run
/// the seed trace (or refuse it) without a panic.
pub fn config_file(env: &Env, p: &Path, sets: &[(String, String)]) -> bool {
    match GpuConfig::load(p, sets) {
        Ok(cfg) => {
            if let Err(e) = cfg.validate() {
                finding(format!("a loaded config fails validate: {e}"));
            }
            let _ = (
                cfg.partition_count(),
                cfg.core_period_ps(),
                cfg.noc_period_ps(),
                cfg.l2_period_ps(),
                cfg.dram_period_ps(),
                cfg.dram_peak_bytes_per_s(),
            );
            if check_trace(&cfg, &env.seed_file).is_ok() {
                let _ = run_gpu_placed(&cfg, &env.seed_file, 1, Placement::Contiguous, None);
            }
            true
        }
        Err(e) => {
            let _ = e.to_string();
            false
        }
    }
}

// ---------------------------------------------------------------------------------------
// (d) a whole run on a tiny trace

/// What [`run`] saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// The edits left nothing to test (no edit applied, or the writer refused them).
    Skipped,
    OpenRefused,
    /// Refused by `verify`, and by the run too.
    BothRefused,
    /// `verify` accepts, the run refuses (a config limit, an opcode the model lacks).
    RunRefused(String),
    /// `verify` accepts, the run finishes.
    Ran,
    /// `verify` refuses for a semantic rule only; the run finishes anyway.
    SemanticOnly(String),
    /// `verify_structure` refuses, the run finishes: a finding, passed over only when
    /// [`known`].
    KnownGap(String),
}

/// `data[0] % 4` picks the kind of edit: 0, raw byte flips of the file (`(offset u16,
/// xor u8)` triples); 1, the same within the chunk frames; 2, flips within the index with
/// its checksum fixed; 3, edits of the decoded streams and kernel shapes, written back with
/// the writer (see [`rewrite`]).
pub fn run(env: &Env, data: &[u8]) -> RunOutcome {
    let Some((&mode, edits)) = data.split_first() else {
        return RunOutcome::Skipped;
    };
    let p = env.path("run.tst");
    let mode = mode % 4;
    match mode {
        0..=2 => {
            let Some(b) = flipped_seed(env, mode, edits) else {
                return RunOutcome::Skipped;
            };
            let changed_chunks = env
                .seed_chunk_spans()
                .iter()
                .any(|&(s, e)| b[s..e] != env.seed_tst[s..e]);
            std::fs::write(&p, &b).expect("write");
            let out = run_file(env, &p);
            if mode < 2 && changed_chunks && out != RunOutcome::OpenRefused {
                // A changed chunk frame must be caught (length, zstd or CRC-32) unless it
                // still decompresses to the very same CTAs.
                let t = TraceFile::open(&p).expect("opened above");
                if let Ok(ctas) = decode_all(&t) {
                    if ctas != env.seed_ctas && verify_structure(&t).is_ok() {
                        finding(
                            "a flipped byte inside a chunk changes its contents and nothing refuses it"
                                .into(),
                        );
                    }
                }
            }
            out
        }
        _ => {
            if !rewrite(env, edits, &p) {
                return RunOutcome::Skipped;
            }
            run_file(env, &p)
        }
    }
}

/// The seed with the bytes of `edits` flipped, as the `run` target's modes 0 to 2 make its
/// trace: anywhere (0), inside the chunks (1), inside the index with its checksum fixed
/// (2). `None` when no byte changes or for another mode.
pub fn flipped_seed(env: &Env, mode: u8, edits: &[u8]) -> Option<Vec<u8>> {
    let mut b = env.seed_tst.clone();
    let (lo, hi) = match mode {
        2 => {
            let (off, len) = footer(&b).expect("seed footer");
            (off, off + len)
        }
        1 => {
            let spans = env.seed_chunk_spans();
            (spans[0].0, spans[spans.len() - 1].1)
        }
        0 => (0, b.len()),
        _ => return None,
    };
    let mut any = false;
    for e in edits.chunks_exact(3) {
        let at = lo + u16::from_le_bytes([e[0], e[1]]) as usize % (hi - lo);
        b[at] ^= e[2];
        any |= e[2] != 0;
    }
    if !any {
        return None;
    }
    if mode == 2 {
        fix_index_crc(&mut b);
    }
    Some(b)
}

/// Opens `p`, verifies it and runs it as `tessera run` does; checks that the run refuses
/// what `verify_structure` refuses.
pub fn run_file(env: &Env, p: &Path) -> RunOutcome {
    let Ok(t) = TraceFile::open(p) else {
        return RunOutcome::OpenRefused;
    };
    let vs = verify_structure(&t);
    let v = verify(&t);
    let r = check_trace(&env.cfg, &t)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            run_gpu_placed(&env.cfg, &t, 1, Placement::Contiguous, None)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    match (vs, v, r) {
        (Err(e), _, Ok(())) => {
            finding(format!(
                "the run succeeds on a trace verify_structure refuses: {e}"
            ));
            RunOutcome::KnownGap(e.to_string())
        }
        (Ok(_), Err(e), Ok(())) => {
            if env.strict_semantic {
                panic!("the run succeeds on a trace verify refuses: {e}");
            }
            RunOutcome::SemanticOnly(e.to_string())
        }
        (_, Err(_), Err(_)) => RunOutcome::BothRefused,
        (_, Ok(_), Err(e)) => RunOutcome::RunRefused(e),
        (_, Ok(_), Ok(())) => RunOutcome::Ran,
    }
}

/// One decoded instruction, owned.
#[derive(Clone)]
struct Inst {
    pc: u32,
    mask: u32,
    slot: u32,
    stride: Option<(u64, i32)>,
    mode: u8,
    addrs: Vec<u64>,
    has_addrs: bool,
}

struct Cta {
    id: [u32; 3],
    cluster: Option<ClusterInfo>,
    warps: Vec<(u32, Vec<Inst>)>,
}

/// Writes the seed trace to `out` with its instruction streams (and kernel shapes) edited
/// as `edits` says, 4 bytes an edit: `[op, a, b, c]`. Returns false when nothing was
/// written (no edit, or the writer refused, which is no finding: its input is the API).
fn rewrite(env: &Env, edits: &[u8], out: &Path) -> bool {
    if edits.len() < 4 {
        return false;
    }
    let src = env.path("rewrite-src.tst");
    std::fs::write(&src, &env.seed_tst).expect("write");
    let t = TraceFile::open(&src).expect("seed opens");
    let idx = t.index().clone();
    let mut kernels: Vec<Vec<Cta>> = Vec::new();
    let mut dec = t.decoder();
    for (k, m) in idx.kernels.iter().enumerate() {
        let mut ctas = Vec::new();
        for cta in 0..m.counts.ctas as u32 {
            let c = dec.kernel_cta(k, cta).expect("seed decodes");
            let warps = c
                .warps
                .iter()
                .map(|w| {
                    let insts = c.insts[w.insts.clone()]
                        .iter()
                        .map(|i| {
                            let (stride, addrs, has) = match i.addrs {
                                Addrs::None => (None, Vec::new(), false),
                                Addrs::Stride { base, stride } => {
                                    (Some((base, stride)), Vec::new(), true)
                                }
                                Addrs::List { start, len } => (
                                    None,
                                    c.addrs[start as usize..(start + len) as usize].to_vec(),
                                    true,
                                ),
                            };
                            Inst {
                                pc: i.pc,
                                mask: i.mask,
                                slot: i.slot,
                                stride,
                                mode: i.addr_mode,
                                addrs,
                                has_addrs: has,
                            }
                        })
                        .collect();
                    (w.warp_id, insts)
                })
                .collect();
            ctas.push(Cta {
                id: c.id,
                cluster: c.cluster,
                warps,
            });
        }
        kernels.push(ctas);
    }
    drop(dec);
    drop(t);
    let mut metas = idx.kernels.clone();
    for e in edits.chunks_exact(4) {
        let (op, a, b, c) = (e[0], e[1] as usize, e[2], e[3]);
        let k = a % kernels.len();
        let ctas = &mut kernels[k];
        let nc = ctas.len();
        if nc == 0 {
            continue;
        }
        let cta = &mut ctas[(b as usize) % nc];
        let nw = cta.warps.len();
        let w = (c as usize) % nw.max(1);
        match op % 12 {
            0 if nw > 0 => {
                // Flip mask bits of one instruction; keep the address list consistent
                // unless bit 7 of `op` says not to.
                let ws = &mut cta.warps[w].1;
                if !ws.is_empty() {
                    let n = ws.len();
                    let i = &mut ws[(a ^ c as usize) % n];
                    i.mask ^= 1u32.rotate_left(b as u32);
                    if op & 0x80 == 0 && i.has_addrs && i.stride.is_none() {
                        let want = list_len(i.mode, i.mask) as usize;
                        let last = i.addrs.last().copied().unwrap_or(0x1000);
                        i.addrs.resize(want, last);
                    }
                }
            }
            1 if nw > 0 => {
                let ws = &mut cta.warps[w].1;
                if !ws.is_empty() {
                    let n = ws.len();
                    ws.remove((a ^ b as usize) % n);
                }
            }
            2 if nw > 0 => {
                let ws = &mut cta.warps[w].1;
                if !ws.is_empty() {
                    let n = ws.len();
                    let i = ws[(a ^ b as usize) % n].clone();
                    ws.insert(c as usize % (n + 1), i);
                }
            }
            3 if nw > 0 => {
                // Move an address.
                let ws = &mut cta.warps[w].1;
                if let Some(i) = ws.iter_mut().filter(|i| i.has_addrs).nth(a % 4) {
                    let d = (b as i8 as i64) << (c % 48);
                    if let Some((base, _)) = &mut i.stride {
                        *base = base.wrapping_add(d as u64);
                    } else {
                        let n = i.addrs.len().max(1);
                        if let Some(x) = i.addrs.get_mut(c as usize % n) {
                            *x = x.wrapping_add(d as u64);
                        }
                    }
                }
            }
            4 if nw > 0 => cta.warps[w].0 ^= 1 << (b % 32),
            5 if nw > 0 => {
                cta.warps.remove(w);
            }
            6 if nw > 0 => {
                let x = cta.warps[w].clone();
                cta.warps.push(x);
            }
            7 => cta.id[a % 3] ^= 1 << (b % 32),
            8 => {
                ctas.remove(b as usize % nc);
            }
            9 => {
                let m = &mut metas[k];
                m.grid[a % 3] ^= 1 << (b % 32);
            }
            10 => {
                let m = &mut metas[k];
                m.block[a % 3] ^= 1 << (b % 32);
            }
            11 => {
                let m = &mut metas[k];
                match a % 3 {
                    0 => m.shmem_bytes ^= 1 << (b % 32),
                    1 => m.nregs ^= 1 << (b % 32),
                    _ => {
                        let n = m.statics.len().max(1);
                        if m.statics.len() > 1 {
                            m.statics.swap(a % n, b as usize % n);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    write_trace(&idx, &metas, &kernels, out).is_ok()
}

fn write_trace(
    idx: &tessera_traces::Index,
    metas: &[tessera_traces::KernelMeta],
    kernels: &[Vec<Cta>],
    out: &Path,
) -> tessera_traces::Result<()> {
    let _ = std::fs::remove_file(out);
    let mut w = TraceWriter::create(out, WriterOptions::default())?;
    for d in &idx.devices {
        w.add_device(d.clone());
    }
    let mut next_kernel = 0usize;
    let mut ops = Vec::new();
    for cmd in &idx.commands {
        if let tessera_traces::Command::KernelLaunch { kernel, .. } = *cmd {
            while next_kernel <= kernel as usize && next_kernel < metas.len() {
                let m = &metas[next_kernel];
                w.begin_kernel(m.clone())?;
                for o in &m.opcodes {
                    w.add_opcode(o.clone())?;
                }
                for cta in &kernels[next_kernel] {
                    w.begin_cta(cta.id, cta.cluster)?;
                    for (wid, insts) in &cta.warps {
                        w.begin_warp(*wid)?;
                        for i in insts {
                            let Some(st) = m.statics.get(i.slot as usize) else {
                                continue;
                            };
                            let addrs = match (i.has_addrs, i.stride) {
                                (false, _) => AddrRecord::None,
                                (true, Some((base, stride))) => AddrRecord::Stride { base, stride },
                                (true, None) => AddrRecord::List {
                                    mode: i.mode,
                                    addrs: &i.addrs,
                                },
                            };
                            let raw = RawInst {
                                pc: i.pc,
                                mask: i.mask,
                                opcode: st.opcode,
                                dsts: &st.dsts,
                                srcs: &st.srcs,
                                mem_width: if i.has_addrs { st.mem_width.max(1) } else { 0 },
                                imm: st.imm,
                                line: st.line,
                                addrs,
                            };
                            let per_lane = if m.records_operands {
                                tessera_traces::codec::operands_per_lane(
                                    &m.opcodes[st.opcode as usize],
                                ) as usize
                            } else {
                                0
                            };
                            ops.clear();
                            ops.resize(per_lane * i.mask.count_ones() as usize, 0);
                            w.push_with_operands(&raw, &ops)?;
                        }
                        w.end_warp()?;
                    }
                    w.end_cta()?;
                }
                w.end_kernel()?;
                next_kernel += 1;
            }
        }
        w.add_command(cmd.clone())?;
    }
    w.finish()?;
    Ok(())
}
