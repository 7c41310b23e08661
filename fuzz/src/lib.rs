//! The fuzz harnesses (see `harness.rs`), the environment the targets share and their seed
//! inputs.

pub mod harness;

use std::path::Path;
use std::sync::OnceLock;

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// One [`harness::Env`] per fuzzing process.
pub fn env() -> &'static harness::Env {
    static ENV: OnceLock<harness::Env> = OnceLock::new();
    ENV.get_or_init(|| harness::Env::new(repo()))
}

/// Valid inputs of `target` to start from: the seed trace, the Accel-Sim fixtures of
/// tests/data, the config presets.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let env = env();
    let with = |first: u8, body: &[u8]| {
        let mut v = vec![first];
        v.extend_from_slice(body);
        v
    };
    match target {
        "tst" => {
            let mut v = vec![with(0, &env.seed_tst), with(1, &env.seed_tst)];
            if let Ok(b) = std::fs::read(repo().join("tests/data/v4-imm-format1.tst")) {
                v.push(with(0, &b));
            }
            v.extend(harness::seed_records(env).iter().map(|r| with(2, r)));
            v
        }
        "accelsim" => ["v3", "v4-imm", "v4-noimm", "lineinfo", "unknown-opcode"]
            .iter()
            .filter_map(|d| {
                let dir = repo().join("tests/data").join(d);
                let mut b = std::fs::read(dir.join("kernelslist.g")).ok()?;
                b.push(0);
                b.extend(std::fs::read(dir.join("kernel-1.traceg")).ok()?);
                Some(b)
            })
            .collect(),
        "config" => {
            let mut v: Vec<Vec<u8>> = std::fs::read_dir(repo().join("configs"))
                .into_iter()
                .flatten()
                .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
                .collect();
            v.push(b"core: {sm_count: 2}\n\xffl2.size_bytes=1048576\n".to_vec());
            v
        }
        "run" => vec![
            vec![3, 12, 0, 0, 0],
            vec![3, 1, 0, 0, 0],
            vec![0, 0x10, 0, 1],
            vec![1, 0x10, 0, 1],
            vec![2, 0x10, 0, 1],
        ],
        _ => Vec::new(),
    }
}

/// With `TESSERA_FUZZ_SEEDS=<dir>` in the environment, writes [`seeds`] of `target` there
/// (the targets call this once, before fuzzing: scripts/fuzz.sh points it at the corpus).
pub fn write_seeds(target: &str) {
    let Some(dir) = std::env::var_os("TESSERA_FUZZ_SEEDS") else {
        return;
    };
    let dir = Path::new(&dir);
    let _ = std::fs::create_dir_all(dir);
    for (i, s) in seeds(target).iter().enumerate() {
        let _ = std::fs::write(dir.join(format!("seed-{i}")), s);
    }
}
