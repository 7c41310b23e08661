use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_norway::Value;

use super::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn configs_dir() -> PathBuf {
    repo().join("configs")
}

fn preset(name: &str) -> PathBuf {
    configs_dir().join(format!("{name}.yaml"))
}

fn presets() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(configs_dir())
        .expect("configs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

fn a100() -> GpuConfig {
    GpuConfig::load(preset("a100"), &[]).expect("a100.yaml loads")
}

fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A scratch directory for config files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("tessera-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, file: &str, text: &str) -> PathBuf {
        let p = self.0.join(file);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A `base:` line naming the real A100 preset.
    fn a100_base(&self) -> String {
        format!("base: {}\n", preset("a100").display())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn err_text<T: std::fmt::Debug>(r: Result<T, ConfigError>) -> String {
    r.expect_err("expected an error").to_string()
}

fn leaf_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                let k = k.as_str().expect("string keys");
                let path = if prefix.is_empty() {
                    k.to_string()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_paths(v, &path, out);
            }
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

#[test]
fn every_preset_loads_and_validates() {
    let all = presets();
    let names: Vec<String> = all
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for required in [
        "default",
        "gtx480",
        "maxwell-13sm",
        "titanv",
        "a100",
        "rtx3070",
        "a100-4chiplet",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "configs/{required}.yaml missing"
        );
    }
    for p in &all {
        let c = GpuConfig::load(p, &[]).unwrap_or_else(|e| panic!("{e}"));
        c.validate().unwrap();
        // One partition per chiplet of every GPU by default (the SM-cluster cut is a
        // run-time choice).
        assert_eq!(
            c.partition_count(),
            c.chiplets * c.system.gpus,
            "{}",
            p.display()
        );
        let stem = p.file_stem().unwrap().to_string_lossy();
        assert_eq!(c.name, stem, "name of {}", p.display());
    }
}

#[test]
fn presets_have_the_figures_of_their_sources() {
    let g = GpuConfig::load(preset("gtx480"), &[]).unwrap();
    assert_eq!((g.core.sm_count, g.core.clock_hz), (15, 700_000_000));
    let m = GpuConfig::load(preset("maxwell-13sm"), &[]).unwrap();
    assert_eq!(m.core.sm_count, 13);
    assert_eq!(m.core.schedulers_per_sm, 4);
    assert_eq!(m.core.scheduler, SchedulerPolicy::Gto);
    assert_eq!(m.core.shared_mem_per_sm_bytes, 96 * 1024);
    assert_eq!(m.l2.size_bytes, 2 * 1024 * 1024);
    assert_eq!(m.core.clock_hz, 1_050_000_000);
    assert_eq!(m.dram.clock_hz * 4, 7_010_000_000);
    // Inherited from gtx480.yaml through `base:`.
    assert_eq!(m.core.register_banks, g.core.register_banks);
    let t = GpuConfig::load(preset("titanv"), &[]).unwrap();
    assert_eq!(t.core.sm_count, 80);
    let a = a100();
    assert_eq!(a.core.sm_count, 108);
    // Vendor peak DRAM bandwidth, 1,555 GB/s (hardware-figures.md section 6).
    assert_eq!(a.dram_peak_bytes_per_s(), 1_555_200_000_000);
    let r = GpuConfig::load(preset("rtx3070"), &[]).unwrap();
    assert_eq!(r.core.sm_count, 46);
    let d = GpuConfig::load(preset("default"), &[]).unwrap();
    assert_eq!(d.name, "default");
    assert_eq!(
        GpuConfig {
            name: "a100".into(),
            ..d
        },
        a
    );
}

#[test]
fn every_value_in_a_preset_has_a_source_comment() {
    for p in presets() {
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let (body, comment) = t.split_once(" # ").unwrap_or((t, ""));
            // A line that only opens a section (`core:`) needs no source.
            if body.ends_with(':') && !body.contains(": ") {
                continue;
            }
            assert!(
                comment.trim().len() > 3,
                "{}:{}: value without a source comment: {line}",
                p.display(),
                i + 1
            );
        }
    }
}

#[test]
fn key_table_matches_the_structs() {
    let table: BTreeSet<String> = leaf_keys().into_iter().map(|(p, _)| p).collect();
    // Every field of the structs (serialized from a full config) is in the table, and
    // every table key is a field.
    let full = serde_norway::to_value(a100()).unwrap();
    let mut fields = BTreeSet::new();
    leaf_paths(&full, "", &mut fields);
    assert_eq!(fields, table);
    // Every leaf key written in a preset file is in the table.
    for p in presets() {
        let v: Value = serde_norway::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let mut keys = BTreeSet::new();
        leaf_paths(&v, "", &mut keys);
        keys.remove("base");
        let unknown: Vec<_> = keys.difference(&table).collect();
        assert!(unknown.is_empty(), "{}: {unknown:?}", p.display());
    }
    // A100 writes every key out, defaults included.
    let v: Value =
        serde_norway::from_str(&std::fs::read_to_string(preset("a100")).unwrap()).unwrap();
    let mut keys = BTreeSet::new();
    leaf_paths(&v, "", &mut keys);
    assert_eq!(keys, table);
    // Every key is documented with a unit or a dash.
    for (path, k) in leaf_keys() {
        assert!(k.doc.trim().len() > 20, "{path} is undocumented");
        assert!(!k.unit.is_empty(), "{path} has no unit");
    }
}

#[test]
fn defaults_in_the_table_deserialize() {
    for (path, k) in leaf_keys() {
        if let Some(d) = k.default {
            let c = GpuConfig::load(preset("a100"), &set(&[(path.as_str(), d)]))
                .unwrap_or_else(|e| panic!("default of {path}: {e}"));
            c.validate().unwrap();
        }
    }
}

#[test]
fn enum_names_match_serde() {
    fn check<T: Serialize + Copy>(all: &[T], names: &[&str]) {
        assert_eq!(all.len(), names.len());
        for (v, n) in all.iter().zip(names) {
            assert_eq!(
                serde_norway::to_value(v).unwrap(),
                Value::String(n.to_string())
            );
        }
    }
    check(PartitionMode::ALL, PartitionMode::NAMES);
    check(SchedulerPolicy::ALL, SchedulerPolicy::NAMES);
    check(WritePolicy::ALL, WritePolicy::NAMES);
    check(WriteAllocate::ALL, WriteAllocate::NAMES);
    check(DramScheduler::ALL, DramScheduler::NAMES);
    assert_eq!(SchedulerPolicy::TwoLevel.name(), "two_level");
}

#[test]
fn op_latency_table_is_keyed_by_opclass_names() {
    use tessera_traces::OpClass;
    let names: BTreeSet<&str> = OpLatencyTable::KEYS.iter().map(|k| k.name).collect();
    let table = a100().core.op_latency;
    for class in OpClass::ALL {
        let timed_elsewhere =
            class.is_memory() || matches!(class, OpClass::Barrier | OpClass::Fence | OpClass::Exit);
        assert_eq!(
            names.contains(class.name()),
            !timed_elsewhere,
            "class {}",
            class.name()
        );
        assert_eq!(table.get(class).is_some(), !timed_elsewhere);
    }
    assert_eq!(table.get(OpClass::Fp32).unwrap().latency_cycles, 4);
    for n in names {
        assert!(
            OpClass::ALL.iter().any(|c| c.name() == n),
            "{n} is no OpClass"
        );
    }
}

#[test]
fn docs_config_md_is_generated_from_the_code() {
    let path = repo().join("docs").join("config.md");
    let want = reference_markdown();
    if std::env::var_os("TESSERA_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/config.md differs from config::reference_markdown(); regenerate it with \
         `TESSERA_BLESS=1 cargo test -p tessera-partitions config`"
    );
    for (path, _) in leaf_keys() {
        assert!(
            want.contains(&format!("`{path}`")),
            "{path} not in the reference"
        );
    }
}

#[test]
fn period_ps_follows_design_section_3() {
    assert_eq!(GpuConfig::period_ps(1_410_000_000), 709);
    assert_eq!(GpuConfig::period_ps(1_000_000_000), 1000);
    assert_eq!(GpuConfig::period_ps(1_801_000_000), 555);
    for hz in [
        700_000_000u64,
        850_000_000,
        1_132_000_000,
        1_512_000_000,
        3_500_500_000,
    ] {
        assert_eq!(
            GpuConfig::period_ps(hz),
            tessera_interconnect::period_ps(hz)
        );
        let exact = 1e12 / hz as f64;
        assert!((GpuConfig::period_ps(hz) as f64 - exact).abs() <= 0.5);
    }
    let a = a100();
    assert_eq!(a.core_period_ps(), 709);
    assert_eq!(a.l2_period_ps(), 661);
    assert_eq!(a.dram_period_ps(), 823);
    assert_eq!(a.noc_period_ps(), 709);
}

#[test]
fn base_merges_deeply_and_overrides_apply_last() {
    let s = Scratch::new("merge");
    s.write(
        "mid.yaml",
        &format!(
            "{}name: mid\ncore:\n  sm_count: 50\nl1d:\n  mshrs: 7\n",
            s.a100_base()
        ),
    );
    let top = s.write(
        "top.yaml",
        "base: mid.yaml\nname: top\ncore:\n  sm_count: 60\n  op_latency:\n    fp32: { latency_cycles: 5, initiation_cycles: 2 }\n",
    );
    let c = GpuConfig::load(&top, &[]).unwrap();
    let a = a100();
    assert_eq!(c.name, "top");
    assert_eq!(c.core.sm_count, 60); // top over mid over a100
    assert_eq!(c.l1d.mshrs, 7); // from mid
    assert_eq!(c.core.clock_hz, a.core.clock_hz); // from a100, beside keys overridden
    assert_eq!(c.core.op_latency.fp32.latency_cycles, 5);
    assert_eq!(c.core.op_latency.fp64, a.core.op_latency.fp64);
    assert_eq!(c.l1d.size_bytes, a.l1d.size_bytes);
    // --set applies after every file, in order.
    let c = GpuConfig::load(
        &top,
        &set(&[
            ("core.sm_count", "70"),
            ("core.sm_count", "72"),
            ("l1d.mshrs", "9"),
        ]),
    )
    .unwrap();
    assert_eq!((c.core.sm_count, c.l1d.mshrs), (72, 9));
}

#[test]
fn set_reaches_nested_keys() {
    let c = GpuConfig::load(
        preset("titanv"),
        &set(&[
            ("core.op_latency.fp32.latency_cycles", "9"),
            ("core.icache.enabled", "false"),
            ("core.scheduler", "two_level"),
            ("core.clock_hz", "1.5e9"),
            ("partitioning.mode", "sm_cluster"),
            ("partitioning.sm_clusters", "4"),
            ("name", "titanv-4"),
        ]),
    )
    .unwrap();
    assert_eq!(c.core.op_latency.fp32.latency_cycles, 9);
    assert!(!c.core.icache.enabled);
    assert_eq!(c.core.scheduler, SchedulerPolicy::TwoLevel);
    assert_eq!(c.core.clock_hz, 1_500_000_000);
    assert_eq!(c.partition_count(), 4);
    assert_eq!(c.name, "titanv-4");
    assert_eq!(
        parse_set("core.sm_count=80").unwrap(),
        ("core.sm_count".to_string(), "80".to_string())
    );
    assert_eq!(
        parse_set("name=a=b").unwrap(),
        ("name".to_string(), "a=b".to_string())
    );
}

#[test]
fn set_errors_name_the_argument_and_key() {
    let load = |k: &str, v: &str| GpuConfig::load(preset("a100"), &set(&[(k, v)]));
    let e = err_text(load("core.sm_cont", "4"));
    assert!(
        e.contains("--set core.sm_cont=4: core.sm_cont: unknown key; did you mean sm_count?"),
        "{e}"
    );
    let e = err_text(load("core", "4"));
    assert!(e.contains("core: is a section, not a key"), "{e}");
    let e = err_text(load("core.sm_count.x", "4"));
    assert!(e.contains("core.sm_count: is a key, not a section"), "{e}");
    let e = err_text(load("core.sm_count", "many"));
    assert!(
        e.contains("core.sm_count: expected a whole number, found the text \"many\""),
        "{e}"
    );
    let e = err_text(load("core.sm_count", "-3"));
    assert!(e.contains("core.sm_count: must not be negative"), "{e}");
    let e = err_text(load("core.sm_count", "2.5"));
    assert!(e.contains("expected a whole number"), "{e}");
    let e = err_text(load("core.sm_count", "[1, 2]"));
    assert!(e.contains("expected a single value"), "{e}");
    let e = err_text(load("core.scheduler", "gtoo"));
    assert!(e.contains("did you mean gto?"), "{e}");
    let e = err_text(load("l1d.enabled", "yes please"));
    assert!(e.contains("l1d.enabled: expected true or false"), "{e}");
    let e = err_text(load("core.warp_size", "99999999999"));
    assert!(e.contains("too large"), "{e}");
    assert!(err_text(parse_set("core.sm_count")).contains("expected KEY=VALUE"));
    assert!(err_text(parse_set("=4")).contains("expected KEY=VALUE"));
}

#[test]
fn unknown_keys_name_the_file_and_key_path() {
    let s = Scratch::new("unknown");
    let f = s.write(
        "typo.yaml",
        &format!("{}l1d:\n  sise_bytes: 4096\n", s.a100_base()),
    );
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.contains(&format!(
            "{}: l1d.sise_bytes: unknown key; did you mean size_bytes?",
            f.display()
        )),
        "{e}"
    );
    // In a base file, the error names the base.
    let top = s.write("top.yaml", "base: typo.yaml\nname: x\n");
    let e = err_text(GpuConfig::load(&top, &[]));
    assert!(e.contains("typo.yaml: l1d.sise_bytes"), "{e}");
    // Far from every key: the valid keys are listed.
    let f = s.write("far.yaml", &format!("{}dram:\n  zzz: 1\n", s.a100_base()));
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.contains("dram.zzz: unknown key; the keys here are channels, clock_hz"),
        "{e}"
    );
    // A misplaced section and a scalar where a section belongs.
    let f = s.write("scalar.yaml", &format!("{}core: 5\n", s.a100_base()));
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(e.contains("core: expected a mapping of keys"), "{e}");
    let f = s.write("top-level.yaml", &format!("{}sm_count: 5\n", s.a100_base()));
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(e.contains("sm_count: unknown key"), "{e}");
}

#[test]
fn wrong_types_and_negative_numbers_in_files_name_the_key() {
    let s = Scratch::new("types");
    let f = s.write(
        "neg.yaml",
        &format!("{}l2:\n  size_bytes: -1\n", s.a100_base()),
    );
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.contains(&format!(
            "{}: l2.size_bytes: must not be negative",
            f.display()
        )),
        "{e}"
    );
    let f = s.write(
        "str.yaml",
        &format!("{}dram:\n  scheduler: round_robin\n", s.a100_base()),
    );
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.contains("dram.scheduler: unknown value \"round_robin\""),
        "{e}"
    );
    let f = s.write("yaml.yaml", "core: [unclosed\n");
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(e.starts_with(&format!("{}:", f.display())), "{e}");
    let e = err_text(GpuConfig::load(s.0.join("absent.yaml"), &[]));
    assert!(e.contains("absent.yaml: cannot read"), "{e}");
    let f = s.write("nobase.yaml", "base: nowhere.yaml\n");
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(e.contains("nowhere.yaml (base of"), "{e}");
}

#[test]
fn missing_required_keys_are_errors_and_defaults_fill_in() {
    let s = Scratch::new("missing");
    let f = s.write("empty.yaml", "name: x\n");
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(e.contains("core.sm_count: missing key"), "{e}");
    // Keys with defaults may be left out, sections whose keys all default too.
    let full = std::fs::read_to_string(preset("a100")).unwrap();
    let trimmed: String = full
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with("chiplets:")
                || t.starts_with("package:")
                || t.starts_with("link:")
                || t.starts_with("system:")
                || t.starts_with("gpu_link:")
                || t.starts_with("host_link:")
                || t.starts_with("llc:")
                || t.ends_with("# the default")
                || t.starts_with("partitioning:")
                || t.starts_with("mode:")
                || t.starts_with("sm_clusters:")
                || t.starts_with("run_ahead:")
                || t.starts_with("warp_size:")
                || t.starts_with("two_level_active_warps:"))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let f = s.write("defaults.yaml", &trimmed);
    let c = GpuConfig::load(&f, &[]).unwrap();
    assert_eq!(c, a100());
}

#[test]
fn impossible_values_name_the_key() {
    let bad = |k: &str, v: &str, key: &str| {
        let e = err_text(GpuConfig::load(preset("a100"), &set(&[(k, v)])));
        assert!(e.contains(&format!("{key}: ")), "--set {k}={v}: {e}");
        assert!(e.starts_with("--set "), "the origin is the --set: {e}");
        e
    };
    let e = bad("core.sm_count", "0", "core.sm_count");
    assert!(e.contains("must be at least 1"), "{e}");
    let e = bad("l1d.sector_bytes", "48", "l1d.sector_bytes");
    assert!(e.contains("must divide l1d.line_bytes (128)"), "{e}");
    bad("l2.line_bytes", "96", "l2.line_bytes");
    // 128 B lines of 2 B sectors: 64 sectors, more than a packet's mask holds.
    let e = bad("l2.sector_bytes", "2", "l2.sector_bytes");
    assert!(e.contains("64 sectors") && e.contains("at most 32"), "{e}");
    bad("l1d.size_bytes", "30000", "l1d.size_bytes");
    let e = bad("l2.assoc", "15", "l2.assoc");
    assert!(e.contains("15 ways do not divide the 4096 lines"), "{e}");
    let e = bad("l1d.assoc", "8", "l1d.assoc");
    assert!(e.contains("make 28 sets of l1d.size_bytes"), "{e}");
    bad("core.warp_size", "64", "core.warp_size");
    bad("core.max_warps_per_sm", "32", "core.max_warps_per_sm");
    let e = bad("core.schedulers_per_sm", "128", "core.schedulers_per_sm");
    assert!(e.contains("a scheduler would have no warp"), "{e}");
    bad(
        "core.op_latency.sfu.latency_cycles",
        "0",
        "core.op_latency.sfu.latency_cycles",
    );
    bad("l2.hit_latency_cycles", "0", "l2.hit_latency_cycles");
    bad("dram.latency_ps", "0", "dram.latency_ps");
    bad("dram.channels", "0", "dram.channels");
    bad("dram.channels", "3", "dram.channels");
    bad("dram.interleave_bytes", "64", "dram.interleave_bytes");
    bad("core.clock_hz", "0", "core.clock_hz");
    bad("launch.cta_dispatch_ps", "1", "launch.cta_dispatch_ps");
    bad("chiplets", "0", "chiplets");
    bad("chiplets", "65", "chiplets");
    let e = bad("package.link.latency_ps", "0", "package.link.latency_ps");
    assert!(e.contains("lookahead"), "{e}");
    bad("package.home_page_bytes", "3000", "package.home_page_bytes");
    bad("package.home_page_bytes", "64", "package.home_page_bytes");
    bad(
        "package.link.bandwidth_bytes_per_cycle",
        "0",
        "package.link.bandwidth_bytes_per_cycle",
    );
    let e = err_text(GpuConfig::load(
        preset("a100"),
        &set(&[
            ("chiplets", "4"),
            ("package.topology", "mesh2d"),
            ("package.mesh_cols", "3"),
        ]),
    ));
    assert!(
        e.contains("package.mesh_cols: 3 columns do not divide the 4 chiplets"),
        "{e}"
    );
    bad("partitioning.sm_clusters", "4", "partitioning.sm_clusters");
    bad("core.register_banks", "30", "core.register_banks");
    bad("shared_mem.banks", "24", "shared_mem.banks");
    bad("core.operand_collectors", "6", "core.operand_collectors");
    bad("name", "", "name");
    // With sm_cluster, at most one partition per SM.
    let e = err_text(GpuConfig::load(
        preset("a100"),
        &set(&[
            ("partitioning.mode", "sm_cluster"),
            ("partitioning.sm_clusters", "109"),
        ]),
    ));
    assert!(e.contains("partitioning.sm_clusters: 109 clusters"), "{e}");
    // A value from a file names the file.
    let s = Scratch::new("impossible");
    let f = s.write(
        "zero.yaml",
        &format!("{}core:\n  sm_count: 0\n", s.a100_base()),
    );
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.contains(&format!(
            "{}: core.sm_count: must be at least 1",
            f.display()
        )),
        "{e}"
    );
    // validate() on a hand-built config names the key too.
    let mut c = a100();
    c.l1d.sector_bytes = 48;
    let e = err_text(c.validate());
    assert!(e.contains("l1d.sector_bytes"), "{e}");
}

#[test]
fn include_cycles_are_detected() {
    let s = Scratch::new("cycle");
    let a = s.write("a.yaml", "base: b.yaml\n");
    s.write("b.yaml", "base: a.yaml\n");
    let e = err_text(GpuConfig::load(&a, &[]));
    assert!(e.starts_with("include cycle: "), "{e}");
    assert!(e.contains("a.yaml") && e.contains("b.yaml"), "{e}");
    let own = s.write("self.yaml", "base: self.yaml\n");
    let e = err_text(GpuConfig::load(&own, &[]));
    assert!(e.starts_with("include cycle: "), "{e}");
}

#[test]
fn a100_occupancy_matches_the_cuda_calculation() {
    let a = a100();
    // 256 threads x 32 registers: 8 warps, 1024 registers per warp; 2048 threads / 256 = 8
    // CTAs by threads, 65536 / 4 / 1024 = 16 warps per partition x 4 / 8 = 8 by registers.
    let o = a.occupancy(256, 32, 0).unwrap();
    assert_eq!(o.ctas, 8);
    assert_eq!(o.limited_by, OccupancyLimit::Threads);
    assert_eq!((o.by_threads, o.by_registers), (8, 8));
    // 128 threads x 128 registers: 4096 registers per warp, 4 warps per partition, 16 warps
    // per SM, 4 CTAs of 4 warps (threads would allow 16).
    let o = a.occupancy(128, 128, 0).unwrap();
    assert_eq!((o.ctas, o.limited_by), (4, OccupancyLimit::Registers));
    assert_eq!(o.by_threads, 16);
    // 48 KiB of shared memory + 1 KiB reserved = 50,176 B per CTA; 167,936 / 50,176 = 3.
    let o = a.occupancy(128, 32, 48 * 1024).unwrap();
    assert_eq!((o.ctas, o.limited_by), (3, OccupancyLimit::SharedMemory));
    assert_eq!(o.shared_mem_per_cta_bytes, 50_176);
    // 32-thread CTAs: the 32 CTA slots bind.
    let o = a.occupancy(32, 16, 0).unwrap();
    assert_eq!((o.ctas, o.limited_by), (32, OccupancyLimit::Ctas));
    // No shared memory: the 1 KiB reservation still counts (164 CTAs' worth).
    assert_eq!(o.by_shared_memory, 164);
    // Registers round up to 256 per warp: 33 registers = 1056 -> 1280 per warp.
    assert_eq!(a.occupancy(256, 33, 0).unwrap().registers_per_warp, 1280);
    assert_eq!(a.max_ctas_per_sm(1024, 64, 0).unwrap(), 1);
    assert_eq!(a.max_ctas_per_sm(1000, 0, 0).unwrap(), 2);
}

#[test]
fn other_presets_occupancy() {
    // GTX 480: 1536 threads, 32768 registers, 48 KB shared, 8 CTAs (cc 2.0).
    let g = GpuConfig::load(preset("gtx480"), &[]).unwrap();
    assert_eq!(g.max_ctas_per_sm(256, 20, 0).unwrap(), 6); // threads
    assert_eq!(g.max_ctas_per_sm(128, 40, 0).unwrap(), 6); // 1280 regs/warp: 12 warps per half
    assert_eq!(g.max_ctas_per_sm(64, 8, 16 * 1024).unwrap(), 3); // shared memory
                                                                 // RTX 3070 (cc 8.6): 16 CTA slots.
    let r = GpuConfig::load(preset("rtx3070"), &[]).unwrap();
    let o = r.occupancy(64, 16, 0).unwrap();
    assert_eq!((o.ctas, o.limited_by), (16, OccupancyLimit::Ctas));
}

#[test]
fn ctas_that_never_fit_are_errors() {
    let a = a100();
    let e = a.max_ctas_per_sm(2048, 32, 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a CTA of 2048 threads, 32 registers, 0 bytes of shared memory can never fit on an SM \
         of this config: more threads than core.max_threads_per_cta (1024)"
    );
    let e = a.max_ctas_per_sm(128, 300, 0).unwrap_err().to_string();
    assert!(e.contains("core.max_registers_per_thread"), "{e}");
    let e = a.max_ctas_per_sm(1024, 255, 0).unwrap_err().to_string();
    assert!(e.contains("core.max_registers_per_cta"), "{e}");
    let e = a
        .max_ctas_per_sm(128, 32, 200 * 1024)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "a CTA of 128 threads, 32 registers, 204800 bytes of shared memory can never fit"
        ),
        "{e}"
    );
    assert!(e.contains("core.max_shared_mem_per_cta_bytes"), "{e}");
    assert!(a.max_ctas_per_sm(0, 32, 0).is_err());
    // 163 KB (the opt-in maximum) fits once.
    assert_eq!(a.max_ctas_per_sm(128, 32, 163 * 1024).unwrap(), 1);
}

#[test]
fn llc_keys_are_checked_only_with_a_private_l2() {
    let load = |sets: &[(&str, &str)]| GpuConfig::load(preset("a100"), &set(sets));
    // Memory-side (the default): the llc section is unused, so not checked.
    load(&[("llc.line_bytes", "64")]).unwrap();
    // a100's 4 MiB default does not split over its 40 channels; 40 slices x 64 sets x 16
    // ways x 128 B does.
    let e = err_text(load(&[("package.l2", "private")]));
    assert!(e.contains("llc.size_bytes: "), "{e}");
    let private = ("package.l2", "private");
    let size = ("llc.size_bytes", "5242880");
    load(&[private, size]).unwrap();
    let load = |sets: &[(&str, &str)]| {
        let mut v = vec![size];
        v.extend_from_slice(sets);
        GpuConfig::load(preset("a100"), &set(&v))
    };
    let e = err_text(load(&[private, ("llc.line_bytes", "64")]));
    assert!(
        e.contains("llc.line_bytes: 64 differs from l2.line_bytes (128)"),
        "{e}"
    );
    let e = err_text(load(&[private, ("llc.assoc", "15")]));
    assert!(e.contains("llc.assoc: "), "{e}");
    let e = err_text(load(&[private, ("llc.size_bytes", "1000")]));
    assert!(e.contains("llc.size_bytes: "), "{e}");
    let e = err_text(load(&[private, ("llc.hit_latency_cycles", "0")]));
    assert!(
        e.contains("llc.hit_latency_cycles: must be at least 1"),
        "{e}"
    );
    let e = err_text(load(&[("package.l2", "shared")]));
    assert!(e.contains("package.l2"), "{e}");
}

#[test]
fn radeon7_presets_have_the_figures_of_dalmia_table_5_1() {
    let two = GpuConfig::load(preset("radeon7-2chiplet"), &[]).unwrap();
    let four = GpuConfig::load(preset("radeon7-4chiplet"), &[]).unwrap();
    for c in [&two, &four] {
        assert_eq!(c.package.l2, L2Organization::Private);
        assert_eq!(c.core.sm_count, 60);
        assert_eq!(c.core.clock_hz, 1_801_000_000);
        assert_eq!(c.l1d.size_bytes, 16 * 1024);
        assert_eq!(c.l2.size_bytes, 8 << 20);
        assert_eq!((c.l2.assoc, c.llc.assoc), (32, 16));
        // 16 MB of L3 and 16 GB of HBM (1 TB/s) over the whole package.
        assert_eq!(c.llc.size_bytes * c.chiplets as u64, 16 << 20);
        assert_eq!(
            c.dram_peak_bytes_per_s() * c.chiplets as u128,
            1_024_000_000_000
        );
        // 768 GB/s bidirectional per chiplet.
        let l = &c.package.link;
        assert_eq!(
            2 * l.bandwidth_bytes_per_cycle as u64 * l.clock_hz,
            768_000_000_000
        );
        assert_eq!(
            (c.launch.gcp_to_lcp_ps, c.launch.completion_ps),
            (2_000_000, 2_000_000)
        );
    }
    assert_eq!((two.chiplets, four.chiplets), (2, 4));
}

#[test]
fn multi_gpu_keys_are_checked_when_there_are_several_gpus() {
    let load = |sets: &[(&str, &str)]| GpuConfig::load(preset("a100"), &set(sets));
    // Ignored with one GPU, as the package keys are with one chiplet.
    load(&[("system.gpu_link.latency_ps", "0")]).unwrap();
    let two = ("system.gpus", "2");
    load(&[two]).unwrap();
    for (sets, key, needle) in [
        (
            vec![two, ("system.gpu_link.latency_ps", "0")],
            "system.gpu_link.latency_ps",
            "lookahead",
        ),
        (
            vec![two, ("system.gpu_link.bandwidth_bytes_per_cycle", "0")],
            "system.gpu_link.bandwidth_bytes_per_cycle",
            "at least 1",
        ),
        (
            vec![
                two,
                ("chiplets", "4"),
                ("system.gpu_link.bandwidth_bytes_per_cycle", "66"),
            ],
            "system.gpu_link.bandwidth_bytes_per_cycle",
            "split evenly",
        ),
        (
            vec![two, ("system.host_link.completion_ps", "0")],
            "system.host_link.completion_ps",
            "lookahead",
        ),
        (
            vec![two, ("package.l2", "private")],
            "package.l2",
            "not modelled",
        ),
        (vec![("system.gpus", "0")], "system.gpus", "at least 1"),
        (
            vec![("system.gpus", "65")],
            "system.gpus",
            "65 is out of range: the allowed range is 1 to 64 GPUs",
        ),
    ] {
        let e = err_text(load(&sets));
        assert!(
            e.contains(&format!("{key}: ")) && e.contains(needle),
            "{sets:?}: {e}"
        );
    }
    let c = load(&[two, ("chiplets", "4"), ("core.sm_count", "27")]).unwrap();
    assert_eq!(c.partition_count(), 8);
}

/// Issue 21: absurd values are rejected at load, naming the origin, the key and the
/// allowed range, instead of failing at run time ("internal error: an event at or after
/// ..."), being blamed on the trace (a million SMs) or misreported ("expected a whole
/// number" for 1e30).
#[test]
fn out_of_range_values_name_the_key_and_the_range() {
    let load = |k: &str, v: &str| GpuConfig::load(preset("a100"), &set(&[(k, v)]));
    let clocks = "1000000 to 100000000000 Hz (1 MHz to 100 GHz)";
    let clock_too_large = format!("is too large: the allowed range is {clocks}");
    for (key, value, want) in [
        (
            "launch.host_to_gcp_ps",
            "18446744073709551615",
            "18446744073709551615 is out of range: the allowed range is 1 to 1000000000000 ps \
             (at most 1 s)",
        ),
        // 2^64 reads as a float that used to round to u64::MAX.
        (
            "launch.host_to_gcp_ps",
            "18446744073709551616",
            "is too large: the allowed range is 1 to 1000000000000 ps (at most 1 s)",
        ),
        ("launch.gcp_to_lcp_ps", "1000000000001", "at most 1 s"),
        ("dram.t_refi_ps", "1000000000001", "0 to 1000000000000 ps"),
        ("core.clock_hz", "1e30", clock_too_large.as_str()),
        ("core.clock_hz", "1e12", clocks),
        ("core.clock_hz", "999999", clocks),
        ("dram.clock_hz", "1", clocks),
        ("noc.clock_hz", "1", clocks),
        ("l2.clock_hz", "1", clocks),
        ("package.link.clock_hz", "1", clocks),
        ("system.gpu_link.clock_hz", "1", clocks),
        (
            "core.sm_count",
            "1000000",
            "1000000 is out of range: the allowed range is 1 to 4096 SMs",
        ),
        (
            "l1d.hit_latency_cycles",
            "1000001",
            "1 to 1000000 core cycles",
        ),
        (
            "l2.size_bytes",
            "2147483648",
            "1 to 1073741824 bytes (at most 1 GiB)",
        ),
        (
            "core.warp_size",
            "99999999999",
            "too large: the allowed range is exactly 32",
        ),
        (
            "system.host_link.bandwidth_bytes_per_s",
            "1",
            "must be 0 (copies take no time) or at least 1000000",
        ),
    ] {
        let e = err_text(load(key, value));
        let head = format!("--set {key}={value}: {key}: ");
        assert!(e.starts_with(&head), "{key}={value}: {e}");
        assert!(e.contains(want), "{key}={value}: {e}");
    }
    // The ends of the clock range are allowed (at 1 MHz, one SM cycle is 1 us, which the
    // CTA dispatch must cover).
    for key in [
        "core",
        "noc",
        "l2",
        "dram",
        "package.link",
        "system.gpu_link",
    ] {
        for hz in ["1000000", "100000000000", "1e6", "1e11"] {
            let mut sets = vec![(format!("{key}.clock_hz"), hz.to_string())];
            if key == "core" {
                sets.push(("launch.cta_dispatch_ps".into(), "1000000".into()));
            }
            GpuConfig::load(preset("a100"), &sets)
                .unwrap_or_else(|e| panic!("{key}.clock_hz={hz}: {e}"));
        }
    }
    // A value from a file names the file.
    let s = Scratch::new("range");
    let f = s.write(
        "slow.yaml",
        &format!("{}dram:\n  clock_hz: 1\n", s.a100_base()),
    );
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.contains(&format!(
            "{}: dram.clock_hz: 1 is out of range",
            f.display()
        )) && e.contains(clocks),
        "{e}"
    );
    // So does validate() on a hand-built config.
    let mut c = a100();
    c.launch.completion_ps = u64::MAX;
    let e = err_text(c.validate());
    assert!(e.contains("config: launch.completion_ps: "), "{e}");
}

/// Every integer key has a documented range that its default and every preset respect,
/// and a value just above it is an error naming the key and the range; the clocks have
/// the clock range, latencies the time bounds.
#[test]
fn every_integer_key_has_a_range_and_it_is_checked() {
    let mut checked = 0;
    for (path, k) in leaf_keys() {
        let int = matches!(k.kind, Kind::U32 | Kind::U64);
        assert_eq!(int, k.range.is_some(), "{path}: a range for integers only");
        let Some((lo, hi)) = k.range else { continue };
        assert!(lo <= hi, "{path}");
        if let Some(d) = k.default {
            let d: u64 = d.parse().unwrap();
            assert!(
                (lo..=hi).contains(&d),
                "{path}: default {d} outside {lo}..={hi}"
            );
        }
        if path.ends_with("clock_hz") {
            assert_eq!((lo, hi), CLOCK_RANGE, "{path}");
            assert_eq!(CLOCK_RANGE, (1_000_000, 100_000_000_000));
        }
        if path.ends_with("_ps") {
            assert!(hi <= MAX_PS, "{path}");
        }
        if path.ends_with("_cycles") {
            assert!(hi <= MAX_CYCLES, "{path}");
        }
        if matches!(k.kind, Kind::U32) {
            assert!(
                hi < u32::MAX as u64,
                "{path}: the range must bound a 32-bit key"
            );
        }
        let over = (hi + 1).to_string();
        let e = err_text(GpuConfig::load(preset("a100"), &set(&[(&path, &over)])));
        let range = validate::range_text((lo, hi), k.unit);
        assert!(
            e.contains(&format!(
                "--set {path}={over}: {path}: {over} is out of range"
            )) && e.contains(&range),
            "{path}={over}: {e}"
        );
        checked += 1;
    }
    assert!(checked > 80, "{checked} integer keys");
    // The presets are well inside.
    for p in presets() {
        GpuConfig::load(&p, &[]).unwrap_or_else(|e| panic!("{e}"));
    }
    // The reference shows each range.
    let doc = reference_markdown();
    assert!(doc.contains("| `core.sm_count` | integer (32-bit) | SMs | required | 1 to 4096 SMs |"));
    assert!(doc.contains(
        "| `dram.clock_hz` | integer (64-bit) | Hz | required | 1000000 to 100000000000 Hz (1 \
         MHz to 100 GHz) |"
    ));
}

/// Issue 21: a million SMs used to pass load and fail when the GPU was built, blamed on the
/// trace; now the sizes are bounded (4096 SMs per chiplet) and so is the system's unit
/// count (what a packet can address), at load.
#[test]
fn system_sizes_are_bounded_at_load() {
    let load = |sets: &[(&str, &str)]| GpuConfig::load(preset("a100"), &set(sets));
    let c = load(&[("core.sm_count", "4096")]).unwrap();
    assert_eq!(c.core.sm_count, 4096);
    let e = err_text(load(&[("core.sm_count", "4097")]));
    assert!(e.contains("core.sm_count: 4097 is out of range"), "{e}");
    // 16 chiplets x (1 + 4096 SMs + 40 channels + 1) = 66,208 units > 65,535.
    let e = err_text(load(&[("chiplets", "16"), ("core.sm_count", "4096")]));
    assert!(
        e.starts_with("--set core.sm_count=4096: core.sm_count: 4096 SMs and 40 DRAM channels")
            && e.contains("more than the 65535 a packet can address"),
        "{e}"
    );
    // Just fits: 15 x (1 + 4096 + 40 + 1) = 62,070.
    load(&[("chiplets", "15"), ("core.sm_count", "4096")]).unwrap();
    // Over GPUs too: 64 GPUs x (1 + 1000 + 40 + 1).
    let e = err_text(load(&[("system.gpus", "64"), ("core.sm_count", "1000")]));
    assert!(e.contains("core.sm_count: 1000 SMs"), "{e}");
}

/// Issue 21: `base: /dev/zero` read until memory ran out. A config file must be a regular
/// file of at most 1 MiB; the error names the file.
#[test]
fn config_files_must_be_regular_and_at_most_1_mib() {
    let s = Scratch::new("files");
    let f = s.write("zero.yaml", "base: /dev/zero\n");
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.contains("/dev/zero (base of") && e.contains("not a regular file"),
        "{e}"
    );
    if Path::new("/dev/zero").exists() {
        let e = err_text(GpuConfig::load("/dev/zero", &[]));
        assert!(
            e.starts_with("/dev/zero: cannot read: not a regular file"),
            "{e}"
        );
    }
    let e = err_text(GpuConfig::load(&s.0, &[]));
    assert!(e.contains("cannot read: a directory"), "{e}");
    // A valid config padded with a comment past 1 MiB.
    let mut big = s.a100_base();
    big.push_str(&format!("# {}\n", "x".repeat(1 << 20)));
    let f = s.write("big.yaml", &big);
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.starts_with(&format!("{}: cannot read: larger than 1 MiB", f.display())),
        "{e}"
    );
    let f = s.write("base-big.yaml", "base: big.yaml\n");
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(
        e.contains("big.yaml (base of") && e.contains("larger than 1 MiB"),
        "{e}"
    );
    // Just under the bound loads.
    let mut ok = s.a100_base();
    ok.push_str("# ");
    let pad = (1 << 20) - ok.len() - 1;
    ok.push_str(&"x".repeat(pad));
    ok.push('\n');
    assert_eq!(ok.len(), 1 << 20);
    let f = s.write("ok.yaml", &ok);
    GpuConfig::load(&f, &[]).unwrap();
    // Not UTF-8.
    let f = s.0.join("latin1.yaml");
    std::fs::write(&f, b"name: caf\xe9\n").unwrap();
    let e = err_text(GpuConfig::load(&f, &[]));
    assert!(e.contains("cannot read: not UTF-8 text"), "{e}");
}
