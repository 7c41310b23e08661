//! Whole-file benchmark of the Accel-Sim → `.tst` path on large traces.
//!
//! From the bundled real trace `../shared/traces/accelsim-vectoradd` it generates, in a
//! temporary directory, large Accel-Sim text traces by replicating the kernel's CTAs:
//! replica `r` of CTA `x` becomes CTA `x + r * grid_x` (the header's grid dim is widened)
//! and every address of replica `r` is moved down by `r` times the original's footprint
//! rounded up to 1 MiB (down, so that no address enters the shared/local windows that the
//! header places above the data), which keeps the stride structure. Variants:
//!
//! - `stride`: the lines as traced (address mode 1, base + stride), at two sizes
//!   (5 M and 50 M warp instructions by default) to show that import's peak RSS does not
//!   grow with the trace;
//! - `mode0`: every address-mode-1 line rewritten as address mode 0, one `0x%016lx` per
//!   active lane (what the tracer writes with TOOL_COMPRESS=0); a quarter of the
//!   instructions of the large `stride` trace, since its text is ~4x bigger per instruction.
//!
//! For each trace, and for the bundled one itself, it measures with the release `tessera`
//! binary `tessera trace import accel-sim` (time, MB/s of text, peak RSS as printed) and
//! `tessera trace verify` (decode rate, peak RSS), the size of the `.tst` file against
//! `xz -1 -T1` of the text (bytes counted from xz's stdout), and the decode rate on one
//! core into the timing model's form: `TraceFile::open`, one `ChunkDecoder`, every CTA of
//! every chunk, every active lane's address summed (best of 3).
//!
//! Run: `cargo bench -p tessera-frontend --bench wholefile`. It first runs
//! `cargo build --release -p tessera` in the workspace (set `TESSERA_BIN` to use another
//! binary). `TESSERA_BENCH_SCALE` (default 1.0) scales every size (0.1 for a quick run).
//! Needs `xz` on the PATH and about 2.1 GB free in the temp directory at the default
//! scale (one trace exists at a time); everything generated is removed as it goes. Run
//! without `--bench` (`cargo test --benches`), it does nothing.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use tessera_traces::{DecodedCta, TraceError, TraceFile};

/// Warp instructions of the large stride-coded trace at scale 1.
const LARGE_WARP_INSTS: f64 = 50e6;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("wholefile: only runs under `cargo bench` (skipped)");
        return;
    }
    // A name filter given to `cargo bench -- FILTER` that does not match: skip.
    if let Some(f) = args.iter().find(|a| !a.starts_with('-')) {
        if !"wholefile".contains(f.as_str()) {
            return;
        }
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = manifest.join("../../shared/traces/accelsim-vectoradd");
    if !src.join("kernelslist.g").is_file() {
        println!("skipped: ../shared/traces not present");
        return;
    }
    let scale: f64 = std::env::var("TESSERA_BENCH_SCALE")
        .ok()
        .map(|s| s.parse().expect("TESSERA_BENCH_SCALE must be a number"))
        .unwrap_or(1.0);
    let bin = tessera_bin(&manifest);
    let tmp = tempfile::Builder::new()
        .prefix("tessera-wholefile-")
        .tempdir()
        .expect("cannot create a temporary directory");
    eprintln!("wholefile: tessera = {}", bin.display());
    eprintln!("wholefile: temporary files in {}", tmp.path().display());

    let tpl = Template::load(&src);
    eprintln!(
        "wholefile: template: {} CTAs, {} warp insts, {} text bytes per replica, replica offset {:#x}",
        tpl.ctas.len(),
        tpl.warp_insts,
        tpl.text_bytes(false),
        tpl.offset
    );
    let replicas = |insts: f64| ((insts / tpl.warp_insts as f64).ceil() as u64).max(1);
    let large = replicas(LARGE_WARP_INSTS * scale);
    let cases = [
        ("bundled", None, false),
        (
            "stride (small)",
            Some(replicas(LARGE_WARP_INSTS * scale / 10.0)),
            false,
        ),
        ("stride (large)", Some(large), false),
        ("mode0", Some(large.div_ceil(4)), true),
    ];
    let mut rows = Vec::new();
    for (name, reps, mode0) in cases {
        let dir = tmp.path().join(name.replace([' ', '(', ')'], ""));
        let trace_dir = match reps {
            None => src.clone(),
            Some(r) => {
                std::fs::create_dir_all(&dir).unwrap();
                let t0 = Instant::now();
                let bytes = tpl.write_dir(&dir, r, mode0);
                eprintln!(
                    "wholefile: {name}: generated {} replicas, {:.1} MB of text in {:.1} s",
                    r,
                    bytes as f64 / 1e6,
                    t0.elapsed().as_secs_f64()
                );
                dir.clone()
            }
        };
        let row = measure(name, &bin, &trace_dir, &tmp.path().join("out.tst"));
        if let Some(r) = reps {
            assert_eq!(
                row.warp_insts,
                r * tpl.warp_insts,
                "{name}: warp instructions"
            );
        }
        eprintln!("wholefile: {row:?}");
        rows.push(row);
        if reps.is_some() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        let _ = std::fs::remove_file(tmp.path().join("out.tst"));
    }
    print_table(&rows);
}

/// The release binary: `TESSERA_BIN`, or built now with cargo.
fn tessera_bin(manifest: &Path) -> PathBuf {
    if let Some(b) = std::env::var_os("TESSERA_BIN") {
        return PathBuf::from(b);
    }
    let root = manifest.join("..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let st = Command::new(cargo)
        .args(["build", "--release", "-p", "tessera"])
        .current_dir(&root)
        .status()
        .expect("cannot run cargo");
    assert!(st.success(), "cargo build --release -p tessera failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("release").join("tessera");
    assert!(bin.is_file(), "{} not found", bin.display());
    bin
}

/// One piece of a CTA's text.
#[derive(Clone, Copy)]
enum Piece {
    /// `pool[start..end]` verbatim.
    Lit(u32, u32),
    /// An address, `0x` and at least `width` hex digits, rebased per replica.
    Addr(u64, u8),
    /// The `thread block = x,y,z` line with x moved per replica.
    CtaId([u32; 3]),
}

#[derive(Default)]
struct Pieces {
    pool: Vec<u8>,
    pieces: Vec<Piece>,
}

impl Pieces {
    fn lit(&mut self, b: &[u8]) {
        let start = self.pool.len() as u32;
        self.pool.extend_from_slice(b);
        let end = self.pool.len() as u32;
        match self.pieces.last_mut() {
            Some(Piece::Lit(_, e)) if *e == start => *e = end,
            _ => self.pieces.push(Piece::Lit(start, end)),
        }
    }
}

/// The bundled trace, cut into pieces: one list per CTA for each variant.
struct Template {
    kernelslist: String,
    kernel_file: String,
    /// Header text before and after the grid dim's x.
    header: (String, String),
    grid: [u32; 3],
    ctas: Vec<(Pieces, Pieces)>,
    warp_insts: u64,
    offset: u64,
}

impl Template {
    fn load(src: &Path) -> Template {
        let kernelslist = std::fs::read_to_string(src.join("kernelslist.g")).unwrap();
        let kernel_file = kernelslist
            .lines()
            .find(|l| l.trim().starts_with("kernel"))
            .expect("no kernel in kernelslist.g")
            .trim()
            .to_string();
        assert_eq!(
            kernelslist
                .lines()
                .filter(|l| l.trim().starts_with("kernel"))
                .count(),
            1,
            "the template must have one kernel"
        );
        let text = std::fs::read_to_string(src.join(&kernel_file)).unwrap();
        let (head, body) = text.split_at(text.find("#BEGIN_TB").expect("no #BEGIN_TB"));
        let g = head.find("-grid dim = (").expect("no grid dim") + "-grid dim = (".len();
        let g_end = g + head[g..].find(')').unwrap();
        let dims: Vec<u32> = head[g..g_end]
            .split(',')
            .map(|d| d.trim().parse().unwrap())
            .collect();
        let grid = [dims[0], dims[1], dims[2]];
        let comma = g + head[g..].find(',').unwrap();
        let header = (head[..g].to_string(), head[comma..].to_string());
        let lineinfo = head.contains("-enable lineinfo = 1");

        let mut ctas = Vec::new();
        let mut warp_insts = 0u64;
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        let mut cur: Option<(Pieces, Pieces)> = None;
        for line in body.split_inclusive('\n') {
            let t = line.trim();
            let (a, b) = cur.get_or_insert_with(Default::default);
            if let Some(id) = t.strip_prefix("thread block =") {
                let v: Vec<u32> = id.split(',').map(|d| d.trim().parse().unwrap()).collect();
                a.pieces.push(Piece::CtaId([v[0], v[1], v[2]]));
                b.pieces.push(Piece::CtaId([v[0], v[1], v[2]]));
            } else if t.starts_with(|c: char| c.is_ascii_hexdigit()) && !t.starts_with("cluster") {
                warp_insts += 1;
                inst_line(t, lineinfo, a, b, &mut lo, &mut hi);
            } else {
                a.lit(line.as_bytes());
                b.lit(line.as_bytes());
            }
            if t == "#END_TB" {
                ctas.push(cur.take().unwrap());
            }
        }
        if let Some((a, b)) = cur.take() {
            // Trailing blank lines after the last #END_TB.
            let (la, lb) = ctas.last_mut().unwrap();
            for (from, to) in [(a, la), (b, lb)] {
                for p in from.pieces {
                    if let Piece::Lit(s, e) = p {
                        to.lit(&from.pool[s as usize..e as usize]);
                    }
                }
            }
        }
        // Replica 0 of the traced variant must be the original text.
        let mut again = Vec::new();
        for (a, _) in &ctas {
            emit(a, 0, 0, &mut again);
        }
        assert!(
            again == body.as_bytes(),
            "the template does not reproduce the original text"
        );
        let footprint = hi.saturating_sub(lo) + 1;
        let offset = footprint.div_ceil(1 << 20) << 20;
        Template {
            kernelslist,
            kernel_file,
            header,
            grid,
            ctas,
            warp_insts,
            offset,
        }
    }

    /// Bytes of one replica's text (the header not included).
    fn text_bytes(&self, mode0: bool) -> u64 {
        let mut out = Vec::new();
        for c in &self.ctas {
            emit(if mode0 { &c.1 } else { &c.0 }, 0, 0, &mut out);
        }
        out.len() as u64
    }

    /// Writes `replicas` replicas as an Accel-Sim directory; returns the text bytes.
    fn write_dir(&self, dir: &Path, replicas: u64, mode0: bool) -> u64 {
        std::fs::write(dir.join("kernelslist.g"), &self.kernelslist).unwrap();
        let path = dir.join(&self.kernel_file);
        let mut f = File::create(&path).unwrap();
        let mut buf = Vec::with_capacity(8 << 20);
        let gx = self.grid[0] as u64 * replicas;
        let gx = u32::try_from(gx).expect("grid too large");
        buf.extend_from_slice(format!("{}{gx}{}", self.header.0, self.header.1).as_bytes());
        let mut total = 0u64;
        for r in 0..replicas {
            let shift = r * self.offset;
            let dx = (r * self.grid[0] as u64) as u32;
            for c in &self.ctas {
                emit(if mode0 { &c.1 } else { &c.0 }, shift, dx, &mut buf);
                if buf.len() >= 4 << 20 {
                    f.write_all(&buf).unwrap();
                    total += buf.len() as u64;
                    buf.clear();
                }
            }
        }
        f.write_all(&buf).unwrap();
        total += buf.len() as u64;
        total
    }
}

/// Cuts an instruction line into pieces for both variants (`a` as traced, `b` with mode 1
/// rewritten as mode 0), and widens `[lo, hi]` to its addresses.
fn inst_line(t: &str, lineinfo: bool, a: &mut Pieces, b: &mut Pieces, lo: &mut u64, hi: &mut u64) {
    let tok: Vec<&str> = t.split_ascii_whitespace().collect();
    let mut i = usize::from(lineinfo) + 1; // mask
    let mask = u32::from_str_radix(tok[i], 16).unwrap();
    let ndst: usize = tok[i + 1].parse().unwrap();
    i += 2 + ndst; // opcode
    let nsrc: usize = tok[i + 1].parse().unwrap();
    i += 2 + nsrc; // mem width
    let width: u64 = tok[i].parse().unwrap();
    let lit = |p: &mut Pieces, toks: &[&str]| {
        for t in toks {
            p.lit(t.as_bytes());
            p.lit(b" ");
        }
    };
    let addr = |p: &mut Pieces, tok: &str| {
        let h = tok.strip_prefix("0x").unwrap();
        p.pieces.push(Piece::Addr(
            u64::from_str_radix(h, 16).unwrap(),
            h.len() as u8,
        ));
        p.lit(b" ");
    };
    if width == 0 {
        for p in [a, b] {
            lit(p, &tok);
            p.lit(b"\n");
        }
        return;
    }
    let mode: u32 = tok[i + 1].parse().unwrap();
    let active = mask.count_ones() as usize;
    let mut see = |x: u64| {
        *lo = (*lo).min(x);
        *hi = (*hi).max(x + width - 1);
    };
    match mode {
        1 => {
            let base = u64::from_str_radix(tok[i + 2].strip_prefix("0x").unwrap(), 16).unwrap();
            let stride: i64 = tok[i + 3].parse().unwrap();
            let lane = |k: usize| base.wrapping_add((k as i64 * stride) as u64);
            for k in 0..active {
                see(lane(k));
            }
            lit(a, &tok[..i + 2]);
            addr(a, tok[i + 2]);
            lit(a, &tok[i + 3..]);
            a.lit(b"\n");
            lit(b, &tok[..i + 1]);
            b.lit(b"0 ");
            for k in 0..active {
                b.pieces.push(Piece::Addr(lane(k), 16));
                b.lit(b" ");
            }
            lit(b, &tok[i + 4..]);
            b.lit(b"\n");
        }
        0 => {
            for p in [a, b] {
                lit(p, &tok[..i + 2]);
                for t in &tok[i + 2..i + 2 + active] {
                    addr(p, t);
                }
                lit(p, &tok[i + 2 + active..]);
                p.lit(b"\n");
            }
            for t in &tok[i + 2..i + 2 + active] {
                see(u64::from_str_radix(t.strip_prefix("0x").unwrap(), 16).unwrap());
            }
        }
        2 => {
            let base = u64::from_str_radix(tok[i + 2].strip_prefix("0x").unwrap(), 16).unwrap();
            see(base);
            for p in [a, b] {
                lit(p, &tok[..i + 2]);
                addr(p, tok[i + 2]);
                lit(p, &tok[i + 3..]);
                p.lit(b"\n");
            }
        }
        m => panic!("address mode {m} in the template"),
    }
}

/// Appends one CTA's text, addresses moved down by `shift` and x ids moved up by `dx`.
fn emit(p: &Pieces, shift: u64, dx: u32, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for piece in &p.pieces {
        match *piece {
            Piece::Lit(s, e) => out.extend_from_slice(&p.pool[s as usize..e as usize]),
            Piece::Addr(v, width) => {
                let v = v.checked_sub(shift).expect("rebased address below 0");
                let digits = ((64 - v.leading_zeros()).div_ceil(4) as usize).max(1);
                let n = digits.max(width as usize);
                let mut b = [b'0'; 18];
                b[1] = b'x';
                for k in 0..n {
                    b[2 + n - 1 - k] = HEX[((v >> (4 * k)) & 0xf) as usize];
                }
                out.extend_from_slice(&b[..2 + n]);
            }
            Piece::CtaId([x, y, z]) => {
                out.extend_from_slice(format!("thread block = {},{y},{z}\n", x + dx).as_bytes())
            }
        }
    }
}

#[derive(Debug, Default)]
struct Row {
    name: String,
    warp_insts: u64,
    text_bytes: u64,
    tst_bytes: u64,
    xz_bytes: u64,
    import_s: f64,
    import_mb_s: f64,
    import_rss_mib: f64,
    verify_minst_s: f64,
    verify_rss_mib: f64,
    decode_minst_s: f64,
}

/// `number` right after `key` in `text` (e.g. "peak RSS 12.3 MiB").
fn after(text: &str, key: &str) -> f64 {
    text.find(key)
        .and_then(|i| {
            text[i + key.len()..]
                .split_whitespace()
                .next()
                .and_then(|n| n.trim_start_matches('(').parse().ok())
        })
        .unwrap_or(f64::NAN)
}

/// Number just before `key` in `text` (e.g. "12.3 MB/s").
fn before(text: &str, key: &str) -> f64 {
    text.find(key)
        .and_then(|i| {
            text[..i]
                .split_whitespace()
                .last()
                .and_then(|n| n.trim_start_matches('(').parse().ok())
        })
        .unwrap_or(f64::NAN)
}

fn run(bin: &Path, args: &[&std::ffi::OsStr]) -> (String, f64) {
    let t0 = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("cannot run tessera");
    let secs = t0.elapsed().as_secs_f64();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "tessera {args:?} failed:\n{text}");
    (text, secs)
}

fn measure(name: &str, bin: &Path, dir: &Path, tst: &Path) -> Row {
    let mut row = Row {
        name: name.to_string(),
        ..Row::default()
    };
    let (imp, secs) = run(
        bin,
        &[
            "trace".as_ref(),
            "import".as_ref(),
            "accel-sim".as_ref(),
            dir.as_os_str(),
            "-o".as_ref(),
            tst.as_os_str(),
        ],
    );
    row.import_s = secs;
    row.import_mb_s = before(&imp, "MB/s of text");
    row.import_rss_mib = after(&imp, "peak RSS");
    row.tst_bytes = std::fs::metadata(tst).unwrap().len();
    let (ver, _) = run(bin, &["trace".as_ref(), "verify".as_ref(), tst.as_os_str()]);
    row.verify_minst_s = before(&ver, "M warp instructions/s");
    row.verify_rss_mib = after(&ver, "peak RSS");
    // Text size and xz -1 of it, counted from xz's stdout.
    let t_xz = Instant::now();
    let mut text_bytes = 0u64;
    let mut xz_bytes = 0u64;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if !p.to_string_lossy().ends_with(".traceg") {
            continue;
        }
        text_bytes += std::fs::metadata(&p).unwrap().len();
        let mut child = Command::new("xz")
            .args(["-1", "-T1", "-c"])
            .arg(&p)
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot run xz");
        xz_bytes += std::io::copy(child.stdout.as_mut().unwrap(), &mut std::io::sink()).unwrap();
        assert!(child.wait().unwrap().success(), "xz failed");
    }
    row.text_bytes = text_bytes;
    row.xz_bytes = xz_bytes;
    eprintln!(
        "wholefile: {name}: import {:.1} s, xz -1 -T1 {:.1} s",
        row.import_s,
        t_xz.elapsed().as_secs_f64()
    );
    // In-process decode, best of 3.
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t0 = Instant::now();
        let (n, sum) = decode_all(tst);
        best = best.min(t0.elapsed().as_secs_f64());
        row.warp_insts = n;
        std::hint::black_box(sum);
    }
    row.decode_minst_s = row.warp_insts as f64 / best / 1e6;
    row
}

/// Decodes every CTA of every chunk with one decoder, summing the lanes' addresses.
/// Returns (warp instructions, sum).
fn decode_all(path: &Path) -> (u64, u64) {
    let t = TraceFile::open(path).unwrap();
    let mut dec = t.decoder();
    let (mut n, mut sum) = (0u64, 0u64);
    for k in 0..t.kernels().len() {
        for chunk in t.kernel_chunks(k) {
            dec.for_each_cta(chunk, |cta: &DecodedCta| -> Result<(), TraceError> {
                n += cta.insts.len() as u64;
                for inst in &cta.insts {
                    cta.for_each_lane_addr(inst, |lane, a| {
                        sum = sum.wrapping_add(a ^ lane as u64);
                    });
                }
                Ok(())
            })
            .unwrap();
        }
    }
    (n, sum)
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| trace | warp insts | text MB | .tst KB | xz -1 KB | .tst / xz | import s | import MB/s | import peak RSS MiB | verify M inst/s | verify peak RSS MiB | decode+lanes 1 core M inst/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            r.name,
            r.warp_insts,
            r.text_bytes as f64 / 1e6,
            r.tst_bytes as f64 / 1e3,
            r.xz_bytes as f64 / 1e3,
            r.tst_bytes as f64 / r.xz_bytes.max(1) as f64,
            r.import_s,
            r.import_mb_s,
            r.import_rss_mib,
            r.verify_minst_s,
            r.verify_rss_mib,
            r.decode_minst_s
        );
    }
}
