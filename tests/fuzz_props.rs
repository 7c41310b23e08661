//! Issue 21, "Keep it fixed: fuzzing in the repository", on stable: the cargo-fuzz targets'
//! harnesses (fuzz/src/harness.rs, included here) driven by proptest with a bounded number
//! of cases, each under a time bound (a case past it is a hang: the input is printed and the
//! process aborts). Plus the exhaustive checks a fuzzer would only sample: every single-byte
//! change inside a chunk of a valid `.tst` is refused (or changes nothing it decodes to),
//! every change inside the index without a fixed checksum is refused at open; and the
//! inputs the fuzzers found (tests/data/fuzz/<target>/), replayed.
//!
//! The harnesses' invariants are listed in fuzz/src/harness.rs. Long runs: scripts/fuzz.sh.

#[path = "../fuzz/src/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{Env, RunOutcome};
use proptest::prelude::*;
use std::path::Path;
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;
use tessera_traces::TraceFile;

/// Per case: far above what any case takes (milliseconds), far below a hang.
const CASE_LIMIT: Duration = Duration::from_secs(20);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One environment per test (each has its own scratch directory: tests run in parallel).
fn new_env() -> Arc<Env> {
    Arc::new(Env::new(repo()))
}

/// Runs `f(env, data)` on a thread of its own; a panic is re-raised here (proptest sees it
/// and shrinks), a case past [`CASE_LIMIT`] prints its input and aborts the process.
fn bounded<R: Send + 'static>(
    what: &'static str,
    env: &Arc<Env>,
    data: Vec<u8>,
    f: fn(&Env, &[u8]) -> R,
) -> R {
    let (tx, rx) = mpsc::channel();
    let env2 = env.clone();
    let input = data.clone();
    let h = std::thread::spawn(move || {
        let r = f(&env2, &input);
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(CASE_LIMIT) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            eprintln!(
                "{what}: a case runs past {CASE_LIMIT:?} (a hang); its input, hex: {}",
                data.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
            std::process::abort();
        }
    }
}

/// `cases` cases (times `TESSERA_FUZZ_SCALE`, default 1), from a fixed seed so that CI
/// sees the same cases every time (`TESSERA_FUZZ_SEED=<u64>` for others, `random` for a
/// new one each run: the long runs are cargo-fuzz's, scripts/fuzz.sh).
fn cfg(cases: u32) -> ProptestConfig {
    let scale = std::env::var("TESSERA_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1);
    let rng_seed = match std::env::var("TESSERA_FUZZ_SEED").as_deref() {
        Ok("random") => proptest::test_runner::RngSeed::Random,
        Ok(s) => proptest::test_runner::RngSeed::Fixed(s.parse().unwrap_or(21)),
        Err(_) => proptest::test_runner::RngSeed::Fixed(21),
    };
    ProptestConfig {
        cases: cases.saturating_mul(scale),
        rng_seed,
        // Shrinking a failure in a harness that runs a simulation can take long; the
        // failing input is what matters (it becomes a file under tests/data/fuzz).
        max_shrink_iters: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The Accel-Sim fixtures as the `accelsim` harness reads them: the list, NUL, kernel 1.
fn accelsim_seeds() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        ["v3", "v4-imm", "v4-noimm", "lineinfo", "unknown-opcode"]
            .iter()
            .map(|d| {
                let dir = repo().join("tests/data").join(d);
                let mut b = std::fs::read(dir.join("kernelslist.g")).expect("fixture list");
                b.push(0);
                b.extend(std::fs::read(dir.join("kernel-1.traceg")).expect("fixture kernel"));
                b
            })
            .collect()
    })
}

/// A seed with byte-level and line-level edits: `(position, op, byte)` triples.
fn edit(seed: &[u8], edits: &[(u16, u8, u8)]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for &(at, op, x) in edits {
        if b.is_empty() {
            b.push(x);
            continue;
        }
        let i = at as usize % b.len();
        match op % 6 {
            0 => b[i] ^= x,
            1 => b[i] = x,
            2 => b.insert(i, x),
            3 => {
                b.remove(i);
            }
            4 => {
                // Duplicate the line holding byte i.
                let s = b[..i]
                    .iter()
                    .rposition(|&c| c == b'\n')
                    .map_or(0, |p| p + 1);
                let e = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| i + p + 1);
                let line = b[s..e].to_vec();
                b.splice(e..e, line);
            }
            _ => {
                // Replace the token at byte i with a boundary number.
                const NUMS: [&[u8]; 8] = [
                    b"0",
                    b"-1",
                    b"4294967295",
                    b"4294967296",
                    b"18446744073709551615",
                    b"0xffffffffffffffff",
                    b"99999999999999999999999",
                    b"ffffffff",
                ];
                let s = b[..i]
                    .iter()
                    .rposition(|c| c.is_ascii_whitespace())
                    .map_or(0, |p| p + 1);
                let e = b[i..]
                    .iter()
                    .position(|c| c.is_ascii_whitespace())
                    .map_or(b.len(), |p| i + p);
                b.splice(s..e, NUMS[x as usize % NUMS.len()].iter().copied());
            }
        }
    }
    b
}

/// A YAML config made of known keys (nested as the loader wants) with boundary values.
fn config_text(picks: &[(u16, u8)], with_junk: Option<String>) -> Vec<u8> {
    static KEYS: OnceLock<Vec<String>> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        tessera_partitions::config::leaf_keys()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    });
    const VALUES: [&str; 16] = [
        "0",
        "1",
        "-1",
        "2",
        "3",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "1e308",
        ".nan",
        "0.5",
        "true",
        "\"x\"",
        "[]",
        "{}",
        "~",
    ];
    let mut s = String::new();
    for &(k, v) in picks {
        let key = &keys[k as usize % keys.len()];
        // One flow mapping a line: `a: {b: {c: v}}` (later lines merge or conflict).
        let parts: Vec<&str> = key.split('.').collect();
        let mut line = String::new();
        for (i, p) in parts.iter().enumerate() {
            line.push_str(p);
            line.push_str(": ");
            if i + 1 < parts.len() {
                line.push('{');
            }
        }
        line.push_str(VALUES[v as usize % VALUES.len()]);
        line.push_str(&"}".repeat(parts.len() - 1));
        s.push_str(&line);
        s.push('\n');
    }
    if let Some(j) = with_junk {
        s.push_str(&j);
    }
    s.into_bytes()
}

proptest! {
    #![proptest_config(cfg(256))]

    /// (a) Arbitrary bytes as a `.tst` file (with and without a fixed index checksum).
    #[test]
    fn tst_arbitrary_bytes(flags in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..256)) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        let mut d = vec![flags];
        d.extend(body);
        bounded("tst", env, d, harness::tst);
    }
}

proptest! {
    #![proptest_config(cfg(256))]

    /// (a) The seed trace with bytes changed anywhere, its index checksum fixed or not.
    #[test]
    fn tst_mutated_seed(fix in any::<bool>(), edits in proptest::collection::vec((any::<u16>(), 1u8..=255), 1..8)) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        let mut d = vec![u8::from(fix)];
        let mut b = env.seed_tst.clone();
        for (at, x) in edits {
            let i = at as usize % b.len();
            b[i] ^= x;
        }
        d.extend(b);
        bounded("tst", env, d, harness::tst);
    }
}

proptest! {
    #![proptest_config(cfg(512))]

    /// (a) The seed trace's CTA records with bytes changed, inserted or removed: decoded
    /// whole and as the run's stream, the two agree.
    #[test]
    fn tst_cta_records(which in any::<usize>(), edits in proptest::collection::vec((any::<u16>(), 0u8..4, any::<u8>()), 1..6)) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        static RECS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        let recs = RECS.get_or_init(|| harness::seed_records(env));
        let mut d = vec![2u8];
        d.extend(edit(&recs[which % recs.len()], &edits));
        bounded("tst", env, d, harness::tst);
    }
}

proptest! {
    #![proptest_config(cfg(192))]

    /// (b) The Accel-Sim fixtures, edited byte by byte and line by line, imported.
    #[test]
    fn accelsim_edited_fixtures(seed in 0usize..5, edits in proptest::collection::vec((any::<u16>(), any::<u8>(), any::<u8>()), 1..6)) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        let d = edit(&accelsim_seeds()[seed], &edits);
        bounded("accelsim", env, d, harness::accelsim);
    }

    /// (b) Arbitrary bytes as the kernel file (and list).
    #[test]
    fn accelsim_arbitrary_bytes(d in proptest::collection::vec(any::<u8>(), 0..512)) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        bounded("accelsim", env, d, harness::accelsim);
    }
}

proptest! {
    #![proptest_config(cfg(192))]

    /// (c) Known keys with boundary values, with or without trailing junk, and `--set`s.
    #[test]
    fn config_known_keys(
        picks in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..8),
        junk in proptest::option::of("[ -~\n]{0,40}"),
        sets in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..3),
    ) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        let mut d = config_text(&picks, junk);
        if !sets.is_empty() {
            d.push(0xff);
            // `--set key.path=value` lines.
            for (k, v) in sets {
                let t = String::from_utf8(config_text(&[(k, v)], None)).unwrap_or_default();
                // Rebuild `a.b.c=v` from `a: {b: {c: v}}`.
                let mut parts: Vec<&str> = t.trim_end().trim_end_matches('}').split(": ").collect();
                let value = parts.pop().unwrap_or("");
                let key = parts.iter().map(|p| p.trim_start_matches('{')).collect::<Vec<_>>().join(".");
                d.extend(format!("{key}={value}\n").into_bytes());
            }
        }
        bounded("config", env, d, harness::config);
    }

    /// (c) Arbitrary text as a config.
    #[test]
    fn config_arbitrary_text(s in "[ -~\n\t]{0,200}") {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        bounded("config", env, s.into_bytes(), harness::config);
    }
}

proptest! {
    #![proptest_config(cfg(96))]

    /// (d) Raw byte flips of the tiny trace (anywhere, or inside its chunks), run.
    #[test]
    fn run_byte_flips(in_chunks in any::<bool>(), edits in proptest::collection::vec((any::<u16>(), 1u8..=255), 1..4)) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        let mut d = vec![u8::from(in_chunks)];
        for (at, x) in edits {
            d.extend(at.to_le_bytes());
            d.push(x);
        }
        bounded("run", env, d, harness::run);
    }

    /// (d) Index edits with the index checksum fixed, run.
    #[test]
    fn run_index_edits(edits in proptest::collection::vec((any::<u16>(), 1u8..=255), 1..4)) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        let mut d = vec![2u8];
        for (at, x) in edits {
            d.extend(at.to_le_bytes());
            d.push(x);
        }
        bounded("run", env, d, harness::run);
    }

    /// (d) Edited instruction streams and kernel shapes, written back by the writer, run.
    #[test]
    fn run_stream_edits(edits in proptest::collection::vec(any::<[u8; 4]>(), 1..5)) {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        let env = ENV.get_or_init(new_env);
        let mut d = vec![3u8];
        for e in edits {
            d.extend(e);
        }
        bounded("run", env, d, harness::run);
    }
}

/// Every single-byte change inside a chunk frame of the tiny trace (two different flips a
/// byte) is refused by open, decoding or `verify_structure`, unless the chunk still
/// decodes to exactly the seed's CTAs.
#[test]
fn every_chunk_byte_flip_is_refused() {
    let env = new_env();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("flip.tst");
    let seed_ctas = {
        std::fs::write(&p, &env.seed_tst).unwrap();
        harness::decode_all(&TraceFile::open(&p).unwrap()).unwrap()
    };
    let mut refused = 0;
    for &(s, e) in env.seed_chunk_spans() {
        for at in s..e {
            for x in [0x01u8, 0x80] {
                let mut b = env.seed_tst.clone();
                b[at] ^= x;
                std::fs::write(&p, &b).unwrap();
                let Ok(t) = TraceFile::open(&p) else {
                    refused += 1;
                    continue;
                };
                match harness::decode_all(&t) {
                    Err(_) => {
                        assert!(tessera_traces::verify_structure(&t).is_err());
                        refused += 1;
                    }
                    Ok(ctas) if ctas != seed_ctas => {
                        assert!(
                            tessera_traces::verify_structure(&t).is_err(),
                            "byte {at} ^ {x:#04x}: the chunk decodes to other CTAs and nothing refuses it"
                        );
                        refused += 1;
                    }
                    Ok(_) => {}
                }
            }
        }
    }
    assert!(refused > 0);
}

/// Every single-byte change inside the index (checksum not fixed) is refused at open.
#[test]
fn every_index_byte_flip_is_refused_at_open() {
    let env = new_env();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("flip.tst");
    let b = &env.seed_tst;
    let f = b.len() - 32;
    let off = u64::from_le_bytes(b[f..f + 8].try_into().unwrap()) as usize;
    for at in off..b.len() {
        for x in [0x01u8, 0x80] {
            let mut c = b.clone();
            c[at] ^= x;
            std::fs::write(&p, &c).unwrap();
            assert!(
                TraceFile::open(&p).is_err(),
                "byte {at} (index/footer) ^ {x:#04x} opens"
            );
        }
    }
}

/// The harnesses accept their own seeds (the fixtures are valid, the seed trace runs).
#[test]
fn seeds_pass() {
    let env = new_env();
    let mut d = vec![0u8];
    d.extend(&env.seed_tst);
    assert_eq!(harness::tst(&env, &d), harness::TstOutcome::Verified);
    for r in harness::seed_records(&env) {
        assert!(harness::record(&env, &r), "a seed CTA record is refused");
    }
    for s in accelsim_seeds() {
        assert_ne!(harness::accelsim(&env, s), harness::ImportOutcome::Refused);
    }
    let a100 = std::fs::read(repo().join("configs/a100.yaml")).unwrap();
    assert_eq!(harness::config(&env, &a100), 2);
    assert_eq!(
        harness::config(&env, b""),
        1,
        "an empty file alone is not a config"
    );
    // Stream edits (mode 3) that change nothing (op 12 is no edit): the seed, run.
    assert_eq!(harness::run(&env, &[3, 12, 0, 0, 0]), RunOutcome::Ran);
}

/// `tessera run` on the trace of tests/data/fuzz/run-semantic/access-outside-allocations (a
/// recorded vectorAdd whose first allocation was edited to start past the kernel's loads)
/// refuses it as `verify` does, naming the kernel, CTA, warp, instruction and address.
#[test]
fn run_refuses_an_access_outside_every_allocation() {
    let env = new_env();
    let data =
        std::fs::read(repo().join("tests/data/fuzz/run-semantic/access-outside-allocations"))
            .unwrap();
    let (&mode, edits) = data.split_first().unwrap();
    let bad = harness::flipped_seed(&env, mode % 4, edits).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tst = dir.path().join("bad.tst");
    std::fs::write(&tst, bad).unwrap();
    let verified = tessera_traces::verify(&TraceFile::open(&tst).unwrap())
        .unwrap_err()
        .to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("run")
        .arg("--config")
        .arg(repo().join("configs/gtx480.yaml"))
        .arg("--trace")
        .arg(&tst)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the run succeeded: {err}");
    // The same words as `verify`'s (which names the CTA verify met first, so only the
    // fault is compared).
    let fault = "LDG.E at pc 0x70 accesses 4 bytes at 0x7f0000000000, outside every allocation";
    assert!(verified.contains(fault), "verify says: {verified}");
    assert!(err.contains(fault), "the run says: {err}");
    assert!(err.contains("kernel 0 (") && err.contains("warp "), "{err}");
}

/// The inputs the fuzzers found (tests/data/fuzz/<target>/<file>; README.md there says
/// what each one broke), replayed; every one that still fails is listed.
#[test]
fn fuzz_regressions() {
    let env = new_env();
    let root = repo().join("tests/data/fuzz");
    let Ok(targets) = std::fs::read_dir(&root) else {
        return;
    };
    let strict = Arc::new(Env::new(repo()).strict_semantic());
    let mut dirs: Vec<_> = targets
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let (mut n, mut failed) = (0, Vec::new());
    for t in dirs {
        let target = t.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<_> = std::fs::read_dir(&t)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
            .collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let env = env.clone();
            let strict = strict.clone();
            let t = target.clone();
            let r = std::panic::catch_unwind(move || match t.as_str() {
                "tst" => drop(bounded("tst", &env, data, harness::tst)),
                "accelsim" => drop(bounded("accelsim", &env, data, harness::accelsim)),
                "config" => drop(bounded("config", &env, data, harness::config)),
                "run" => drop(bounded("run", &env, data, harness::run)),
                // Inputs of the `run` target that `verify` refuses for a semantic rule
                // only: the run must refuse them too.
                "run-semantic" => drop(bounded("run", &strict, data, harness::run)),
                // Semantic refusals of `verify` the run does not share yet (listed in
                // tests/data/fuzz/README.md): replayed without panic or hang, not refused.
                "known-gaps" => drop(bounded("run", &env, data, harness::run)),
                other => panic!("no fuzz target {other}"),
            });
            if let Err(p) = r {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(format!(
                    "{}: {msg}",
                    f.strip_prefix(repo()).unwrap().display()
                ));
            }
            n += 1;
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {n} fuzz inputs fail:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// What the `run` harness sees over a fixed sample of edits of each kind: printed (run
/// with `--nocapture`), so that a report can say which refusals of `verify` the run does
/// not share. Asserts only what the harness asserts.
#[test]
fn run_outcome_census() {
    let env = new_env();
    let mut tally: std::collections::BTreeMap<String, u32> = Default::default();
    let mut semantic: std::collections::BTreeMap<String, u32> = Default::default();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for case in 0..240u32 {
        let mode = (case % 4) as u8;
        let mut d = vec![mode];
        let n = 1 + next() % 3;
        for _ in 0..n {
            let r = next().to_le_bytes();
            if mode == 3 {
                d.extend(&r[..4]);
            } else {
                d.extend([r[0], r[1], r[2] | 1]);
            }
        }
        let out = bounded("run", &env, d.clone(), harness::run);
        let kind = match &out {
            RunOutcome::SemanticOnly(m) | RunOutcome::KnownGap(m) => {
                // The message without its path, numbers and names.
                let m = m.split(": ").skip(2).collect::<Vec<_>>().join(": ");
                let m: String = m
                    .chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c })
                    .collect();
                let e = semantic.entry(m.clone()).or_default();
                *e += 1;
                if let (1, Some(dir)) = (*e, std::env::var_os("TESSERA_FUZZ_CENSUS_OUT")) {
                    let name: String = m
                        .chars()
                        .filter(|c| c.is_ascii_alphanumeric() || *c == ' ')
                        .take(60)
                        .collect();
                    let _ = std::fs::write(Path::new(&dir).join(name.replace(' ', "-")), &d);
                }
                format!("{out:?}").split('(').next().unwrap().to_string()
            }
            RunOutcome::RunRefused(_) => "RunRefused".to_string(),
            other => format!("{other:?}"),
        };
        *tally.entry(format!("mode {mode}: {kind}")).or_default() += 1;
    }
    for (k, n) in &tally {
        eprintln!("{n:5}  {k}");
    }
    for (k, n) in &semantic {
        eprintln!("{n:5}  run succeeds, verify refuses: {k}");
    }
}

/// How many configs of known keys with boundary values load (alone, over a100.yaml): the
/// share that reaches validation's end and the run, printed (`--nocapture`).
#[test]
fn config_census() {
    let env = new_env();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut loads = [0u32; 3];
    for _ in 0..200 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let picks: Vec<(u16, u8)> = (0..1 + x % 3)
            .map(|i| ((x >> (16 * i)) as u16, (x >> (8 * i + 3)) as u8 % 6))
            .collect();
        let d = config_text(&picks, None);
        loads[bounded("config", &env, d, harness::config)] += 1;
    }
    eprintln!("configs of 1-3 known keys: {loads:?} loaded 0 / 1 / 2 times");
}
