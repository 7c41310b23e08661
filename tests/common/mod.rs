//! Helpers shared by the end-to-end tests of the `tessera` binary.
//!
//! Each integration test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `tessera` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tessera")
}

/// `tests/data/<name>`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Runs `tessera` with `args` and returns its output, whatever the exit status.
pub fn tessera<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("cannot run the tessera binary")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `tessera` and panics with its stdout and stderr unless it succeeds.
pub fn tessera_ok<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let o = tessera(args);
    assert!(
        o.status.success(),
        "tessera {:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
        o.status,
        stdout(&o),
        stderr(&o)
    );
    o
}

/// `tessera trace import accel-sim <dir> -o <out>` (plus `extra`), which must succeed.
pub fn import(dir: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "trace".as_ref(),
        "import".as_ref(),
        "accel-sim".as_ref(),
        dir.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    args.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
    tessera_ok(&args)
}

/// `tessera trace export accel-sim <tst> -o <dir>`, which must succeed.
pub fn export(tst: &Path, dir: &Path) -> Output {
    tessera_ok(&[
        "trace".as_ref(),
        "export".as_ref(),
        "accel-sim".as_ref(),
        tst.as_os_str(),
        "-o".as_ref(),
        dir.as_os_str(),
    ])
}

/// `tessera trace info --json <tst>`, parsed.
pub fn info_json(tst: &Path) -> serde_json::Value {
    let o = tessera_ok(&[
        "trace".as_ref(),
        "info".as_ref(),
        tst.as_os_str(),
        "--json".as_ref(),
    ]);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "info --json printed something that is not JSON ({e}):\n{}",
            stdout(&o)
        )
    })
}

/// `tessera trace verify <tst>`, which must succeed; returns its stdout.
pub fn verify(tst: &Path) -> String {
    stdout(&tessera_ok(&[
        "trace".as_ref(),
        "verify".as_ref(),
        tst.as_os_str(),
    ]))
}

/// Copies the files of directory `from` (not recursive) into `to`, creating it.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Replaces `path` by `path.xz`, compressed with the xz2 crate.
pub fn xz_in_place(path: &Path) -> PathBuf {
    use std::io::Write;
    let text = std::fs::read(path).unwrap();
    let mut xz_name = path.as_os_str().to_owned();
    xz_name.push(".xz");
    let xz_path = PathBuf::from(xz_name);
    let f = std::fs::File::create(&xz_path).unwrap();
    let mut enc = xz2::write::XzEncoder::new(f, 6);
    enc.write_all(&text).unwrap();
    enc.finish().unwrap();
    std::fs::remove_file(path).unwrap();
    xz_path
}

/// Counts of a `.traceg` text, taken by reading the text directly (independently of the
/// importer): CTAs are `#BEGIN_TB` lines, warps `warp = N` lines, and each warp's
/// instruction lines are the `insts = K` lines that follow its `insts = K` line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandCount {
    pub ctas: u64,
    pub warps: u64,
    pub warp_insts: u64,
    pub thread_insts: u64,
}

impl HandCount {
    pub fn add(&mut self, o: &HandCount) {
        self.ctas += o.ctas;
        self.warps += o.warps;
        self.warp_insts += o.warp_insts;
        self.thread_insts += o.thread_insts;
    }
}

pub fn hand_count(text: &str) -> HandCount {
    let mut c = HandCount::default();
    let lineinfo = text.lines().any(|l| l.trim_end() == "-enable lineinfo = 1");
    let mask_field = if lineinfo { 2 } else { 1 };
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        let l = l.trim();
        if l == "#BEGIN_TB" {
            c.ctas += 1;
        } else if l.starts_with("warp =") {
            c.warps += 1;
        } else if let Some(k) = l.strip_prefix("insts =") {
            let k: u64 = k.trim().parse().unwrap();
            for _ in 0..k {
                let inst = lines.next().expect("file ends inside a warp");
                let mask = inst.split_whitespace().nth(mask_field).unwrap();
                c.warp_insts += 1;
                c.thread_insts += u64::from(u32::from_str_radix(mask, 16).unwrap().count_ones());
            }
        }
    }
    c
}

/// Compares two trace texts line by line, field by field (whitespace-separated tokens),
/// and panics naming the first differing line; then compares them byte for byte.
pub fn assert_same_text(what: &str, original: &str, exported: &str) {
    let a: Vec<&str> = original.lines().collect();
    let b: Vec<&str> = exported.lines().collect();
    for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
        let tx: Vec<&str> = x.split_whitespace().collect();
        let ty: Vec<&str> = y.split_whitespace().collect();
        assert_eq!(
            tx,
            ty,
            "{what}: line {} differs\n original: {x:?}\n exported: {y:?}",
            i + 1
        );
    }
    assert_eq!(
        a.len(),
        b.len(),
        "{what}: the original has {} lines, the export {}",
        a.len(),
        b.len()
    );
    if original != exported {
        let at = original
            .bytes()
            .zip(exported.bytes())
            .position(|(x, y)| x != y)
            .unwrap_or(original.len().min(exported.len()));
        panic!("{what}: same fields, but the bytes differ first at byte offset {at}");
    }
}

/// Asserts a failed run: non-zero exit, stderr one `error:` line containing every string
/// of `needles`, and no panic.
pub fn assert_clean_failure(o: &Output, needles: &[&str]) -> String {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "expected a failure, got success\nstdout:\n{}\nstderr:\n{err}",
        stdout(o)
    );
    assert!(!err.contains("panicked"), "the binary panicked:\n{err}");
    assert!(
        err.starts_with("error: "),
        "stderr does not start with 'error: ':\n{err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "stderr is not one message:\n{err}"
    );
    for n in needles {
        assert!(err.contains(n), "stderr does not mention {n:?}:\n{err}");
    }
    err
}

/// `path` + `.partial`.
pub fn partial(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

/// Asserts that neither `path` nor `path.partial` exists.
pub fn assert_no_output(path: &Path) {
    assert!(!path.exists(), "{} was left behind", path.display());
    let p = partial(path);
    assert!(!p.exists(), "{} was left behind", p.display());
}

/// `info --json` without the fields that name or size the file itself.
pub fn without_file_fields(mut v: serde_json::Value) -> serde_json::Value {
    v.as_object_mut().unwrap().remove("file");
    v
}

/// Records built-in `workload` with `params` (`key=value`) into `dir` with `tessera trace
/// gen`; returns the .tst path.
pub fn gen(dir: &Path, workload: &str, params: &[&str]) -> PathBuf {
    let tst = dir.join(format!("{workload}.tst"));
    let mut a: Vec<&std::ffi::OsStr> = vec!["trace".as_ref(), "gen".as_ref(), workload.as_ref()];
    for p in params {
        a.push("-p".as_ref());
        a.push(p.as_ref());
    }
    a.push("-o".as_ref());
    a.push(tst.as_os_str());
    tessera_ok(&a);
    tst
}

/// `configs/<name>` of the repository.
pub fn config(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("configs")
        .join(name)
}

/// A stats file's text without its `run` object (how the run was executed: threads,
/// ranks, wall time, ...): the simulated results, byte-identical for any threads, ranks,
/// placement and cut (DESIGN.md's invariant). Printed as tessera prints stats.
pub fn simulated(text: &str) -> String {
    let mut v = json(text);
    let run = v.as_object_mut().unwrap().remove("run");
    assert!(run.is_some(), "the stats have no `run` object:\n{text}");
    let mut s = serde_json::to_string_pretty(&v).unwrap();
    s.push('\n');
    s
}

/// `tessera run --config configs/<cfg> <args...> --stats-out <tmp>` (expected to succeed,
/// leaving no `.partial` file); returns (stats text without `run`, stdout).
pub fn run_stats(cfg: &str, args: &[&str]) -> (String, String) {
    let (text, out) = run_stats_full(cfg, args);
    (simulated(&text), out)
}

/// As [`run_stats`], the whole stats file (`run` included).
pub fn run_stats_full(cfg: &str, args: &[&str]) -> (String, String) {
    let (text, o) = run_with_stats(cfg, args);
    (text, stdout(&o))
}

/// As [`run_stats_full`], with the whole output of the process (its stderr: progress).
pub fn run_with_stats(cfg: &str, args: &[&str]) -> (String, Output) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("stats.json");
    let mut a = run_args(cfg, args);
    a.push("--stats-out".into());
    a.push(out.display().to_string());
    let o = tessera_ok(&a);
    assert!(!partial(&out).exists(), "the .partial file was left behind");
    (std::fs::read_to_string(&out).unwrap(), o)
}

/// [`run_stats`] parsed: the stats without `run`, as JSON.
pub fn run_json(cfg: &str, args: &[&str]) -> serde_json::Value {
    json(&run_stats(cfg, args).0)
}

/// The arguments of `tessera run --config configs/<cfg> <args...>`.
pub fn run_args(cfg: &str, args: &[&str]) -> Vec<String> {
    let mut a = vec![
        "run".to_string(),
        "--config".to_string(),
        config(cfg).display().to_string(),
    ];
    a.extend(args.iter().map(|s| s.to_string()));
    a
}

/// Parses stats (or any JSON) text.
pub fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}):\n{s}"))
}

/// Writes a multi-device trace at `path` by hand (the traces crate's writer): device `g` of
/// `gpus` allocates `a_g`, `b_g`, `c_g` (`n` f32 each, 1 MiB apart), copies `a_g` and `b_g`
/// in, and launches a kernel on `g` computing `c_g[i] = a_g[i] + b_{(g+1) % gpus}[i]` (its
/// `b` loads are peer accesses), 32-thread CTAs of one warp, `n` a multiple of 32.
pub fn write_peer_trace(path: &Path, gpus: u32, n: u64) {
    use tessera_traces::{
        AddrRecord, Command, DeviceInfo, KernelMeta, OpClass, OpcodeInfo, RawInst, TraceWriter,
        WriterOptions,
    };
    let array = |g: u32, k: u64| 0x7f00_0000_0000 + (g as u64 * 3 + k) * (1 << 20);
    let bytes = n * 4;
    let mut w = TraceWriter::create(path, WriterOptions::default()).unwrap();
    for g in 0..gpus {
        w.add_device(DeviceInfo {
            source: format!("device{g}"),
        });
    }
    for g in 0..gpus {
        for k in 0..3 {
            let addr = array(g, k);
            w.add_command(Command::Alloc {
                device: g,
                addr,
                bytes,
            })
            .unwrap();
        }
    }
    for g in 0..gpus {
        for k in 0..2 {
            let addr = array(g, k);
            w.add_command(Command::MemcpyHtoD {
                device: g,
                addr,
                bytes,
            })
            .unwrap();
        }
    }
    let inst =
        |pc: u32, opcode: u16, dsts: &'static [u16], srcs: &'static [u16], addr: Option<u64>| {
            RawInst {
                pc,
                mask: u32::MAX,
                opcode,
                dsts,
                srcs,
                mem_width: if addr.is_some() { 4 } else { 0 },
                imm: None,
                line: None,
                addrs: match addr {
                    Some(base) => AddrRecord::Stride { base, stride: 4 },
                    None => AddrRecord::None,
                },
            }
        };
    for g in 0..gpus {
        let ctas = (n / 32) as u32;
        let mut meta = KernelMeta::new("_Z10peer_addPKfS0_Pf", [ctas, 1, 1], [32, 1, 1]);
        meta.device = g;
        meta.nregs = 16;
        let k = w.begin_kernel(meta).unwrap();
        w.add_command(Command::KernelLaunch {
            device: g,
            kernel: k,
        })
        .unwrap();
        let ldg = w
            .add_opcode(OpcodeInfo::simple("LDG.E", OpClass::LoadGlobal))
            .unwrap();
        let fadd = w
            .add_opcode(OpcodeInfo::simple("FADD", OpClass::Fp32))
            .unwrap();
        let stg = w
            .add_opcode(OpcodeInfo::simple("STG.E", OpClass::StoreGlobal))
            .unwrap();
        let exit = w
            .add_opcode(OpcodeInfo::simple("EXIT", OpClass::Exit))
            .unwrap();
        let peer = (g + 1) % gpus;
        for cta in 0..ctas {
            let off = cta as u64 * 128;
            w.begin_cta([cta, 0, 0], None).unwrap();
            w.begin_warp(0).unwrap();
            w.push(&inst(0, ldg, &[2], &[], Some(array(g, 0) + off)))
                .unwrap();
            w.push(&inst(16, ldg, &[3], &[], Some(array(peer, 1) + off)))
                .unwrap();
            w.push(&inst(32, fadd, &[4], &[2, 3], None)).unwrap();
            w.push(&inst(48, stg, &[], &[4], Some(array(g, 2) + off)))
                .unwrap();
            w.push(&inst(64, exit, &[], &[], None)).unwrap();
            w.end_warp().unwrap();
            w.end_cta().unwrap();
        }
        w.end_kernel().unwrap();
    }
    w.finish().unwrap();
}

/// The issue slots of a stats file's `stalls` object accounted to each cause (issued or a
/// stall): every scheduler-cycle once, so they sum to its `slots`.
pub fn stall_slots(stalls: &serde_json::Value) -> u64 {
    [
        "issued",
        "unit_busy",
        "scoreboard",
        "barrier",
        "no_warp",
        "no_credit",
    ]
    .iter()
    .map(|k| {
        stalls[k]
            .as_u64()
            .unwrap_or_else(|| panic!("no stalls.{k} in {stalls}"))
    })
    .sum()
}
