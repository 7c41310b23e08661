//! Reading a configuration: YAML files with `base:` includes, `--set` overrides, defaults,
//! checks against the key table, then typed deserialization and validation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};

use super::{validate, ConfigError, GpuConfig, KeyInfo, Kind};

/// Where each leaf value came from, by key path: a file, a `--set` argument or `default`.
type Provenance = BTreeMap<String, String>;

/// Splits a `--set` argument `a.b.c=value` into `("a.b.c", "value")`.
pub fn parse_set(arg: &str) -> Result<(String, String), ConfigError> {
    match arg.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err(ConfigError::Override {
            arg: arg.to_string(),
            msg: "expected KEY=VALUE, e.g. core.sm_count=80".to_string(),
        }),
    }
}

pub(super) fn load(path: &Path, overrides: &[(String, String)]) -> Result<GpuConfig, ConfigError> {
    let top = path.display().to_string();
    let mut stack = Vec::new();
    let (mut tree, mut prov) = load_file(path, &top, &mut stack)?;
    for (key, value) in overrides {
        apply_set(&mut tree, key, value, &mut prov)?;
    }
    complete(&mut tree, GpuConfig::KEYS, "", &top, &mut prov)?;
    let config: GpuConfig = serde_norway::from_value(tree).map_err(|e| ConfigError::Syntax {
        path: top.clone(),
        msg: e.to_string(),
    })?;
    validate::validate(&config, &|key: &str| {
        prov.get(key).cloned().unwrap_or_else(|| top.clone())
    })?;
    Ok(config)
}

/// Reads one file and, first, its base; returns the merged tree and where each leaf came
/// from. `named` is how errors refer to the file.
fn load_file(
    path: &Path,
    named: &str,
    stack: &mut Vec<(PathBuf, String)>,
) -> Result<(Value, Provenance), ConfigError> {
    let canon = std::fs::canonicalize(path).map_err(|e| ConfigError::Io {
        path: named.to_string(),
        msg: e.to_string(),
    })?;
    if let Some(pos) = stack.iter().position(|(p, _)| *p == canon) {
        let mut chain: Vec<&str> = stack[pos..].iter().map(|(_, n)| n.as_str()).collect();
        chain.push(stack[pos].1.as_str());
        return Err(ConfigError::IncludeCycle {
            chain: chain.join(" -> "),
        });
    }
    let origin = path.display().to_string();
    let text = read_config_text(path).map_err(|msg| ConfigError::Io {
        path: named.to_string(),
        msg,
    })?;
    let value: Value = serde_norway::from_str(&text).map_err(|e| ConfigError::Syntax {
        path: origin.clone(),
        msg: e.to_string(),
    })?;
    let mut map = match value {
        Value::Null => Mapping::new(),
        Value::Mapping(m) => m,
        _ => {
            return Err(ConfigError::Syntax {
                path: origin,
                msg: "the top level must be a mapping of keys (`core:`, `l1d:`, ...)".into(),
            })
        }
    };
    let base = map.remove("base");
    let mut tree = Value::Mapping(map);
    check_section(&mut tree, GpuConfig::KEYS, "", &origin)?;
    let mut prov = Provenance::new();
    record_leaves(&tree, GpuConfig::KEYS, "", &origin, &mut prov);

    let Some(base) = base else {
        return Ok((tree, prov));
    };
    let Value::String(base) = base else {
        return Err(ConfigError::Key {
            origin,
            key: "base".into(),
            msg: "expected the name of another config file".into(),
        });
    };
    let base_path = path.parent().unwrap_or(Path::new("")).join(&base);
    let base_named = format!("{} (base of {origin})", base_path.display());
    stack.push((canon, origin));
    let (mut merged, mut merged_prov) = load_file(&base_path, &base_named, stack)?;
    stack.pop();
    merge(&mut merged, tree);
    merged_prov.extend(prov);
    Ok((merged, merged_prov))
}

/// The most bytes a config file may have: 1 MiB (the presets have a few KiB).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Reads a config file as text: a regular file (not a device, FIFO or directory, which
/// could block or never end) of at most [`MAX_FILE_BYTES`], in UTF-8.
fn read_config_text(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let regular = |m: &std::fs::Metadata| -> Result<(), String> {
        let t = m.file_type();
        if t.is_file() {
            return Ok(());
        }
        let what = if t.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, FIFO or socket)"
        };
        Err(format!("{what}: a config must be a regular YAML file"))
    };
    let too_big =
        || format!("larger than 1 MiB ({MAX_FILE_BYTES} bytes), the most a config file may have");
    // Checked before opening: opening a FIFO would block.
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    regular(&meta)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_big());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    // And again on what was opened, in case the path changed in between.
    regular(&file.metadata().map_err(|e| e.to_string())?)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text: {e}"))
}

/// Deep merge: mappings merge key by key; anything else in `over` replaces.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, over) => *slot = over,
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Checks that every key of `value` (a section) is known and every leaf has the right type;
/// integral floats (`1.41e9`) become integers.
fn check_section(
    value: &mut Value,
    keys: &'static [KeyInfo],
    prefix: &str,
    origin: &str,
) -> Result<(), ConfigError> {
    let section_name = if prefix.is_empty() {
        "the top level"
    } else {
        prefix
    };
    let Value::Mapping(map) = value else {
        return Err(ConfigError::Key {
            origin: origin.into(),
            key: section_name.into(),
            msg: format!("expected a mapping of keys, found {}", describe(value)),
        });
    };
    for (k, v) in map.iter_mut() {
        let Value::String(name) = k else {
            return Err(ConfigError::Key {
                origin: origin.into(),
                key: join(prefix, &format!("{k:?}")),
                msg: "keys must be names".into(),
            });
        };
        let path = join(prefix, name);
        let info = find_key(keys, name, &path, origin)?;
        match info.kind {
            Kind::Section(sub) => check_section(v, sub, &path, origin)?,
            _ => check_leaf(info, v, &path, origin)?,
        }
    }
    Ok(())
}

fn find_key(
    keys: &'static [KeyInfo],
    name: &str,
    path: &str,
    origin: &str,
) -> Result<&'static KeyInfo, ConfigError> {
    if let Some(info) = keys.iter().find(|k| k.name == name) {
        return Ok(info);
    }
    let msg = match suggest(name, keys) {
        Some(best) => format!("unknown key; did you mean {best}?"),
        None => format!(
            "unknown key; the keys here are {}",
            keys.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
        ),
    };
    Err(ConfigError::Key {
        origin: origin.into(),
        key: path.into(),
        msg,
    })
}

/// The closest known name, if it is close enough to be a likely typo.
fn suggest(name: &str, keys: &[KeyInfo]) -> Option<&'static str> {
    keys.iter()
        .map(|k| (strsim::levenshtein(name, k.name), k.name))
        .filter(|&(d, known)| d <= 2.max(known.len() / 3))
        .min_by_key(|&(d, _)| d)
        .map(|(_, known)| known)
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "nothing (null)".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("{n}"),
        Value::String(s) => format!("the text {s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(_) => "a tagged value".into(),
    }
}

/// The message for a number too large for `info`'s type (at most `max`).
fn too_large(info: &KeyInfo, n: &dyn std::fmt::Display, max: u64) -> String {
    match info.range {
        Some(range) => format!(
            "{n} is too large: the allowed range is {}",
            validate::range_text(range, info.unit)
        ),
        None => format!("{n} is too large (at most {max})"),
    }
}

/// Checks one leaf value against its key's kind, normalizing integral floats to integers.
/// (A key's range is checked on the merged values, by `validate`; a number too large for
/// the key's type is reported here with the range.)
fn check_leaf(info: &KeyInfo, v: &mut Value, path: &str, origin: &str) -> Result<(), ConfigError> {
    let err = |msg: String| ConfigError::Key {
        origin: origin.into(),
        key: path.into(),
        msg,
    };
    let too_large = |n: &dyn std::fmt::Display, max: u64| too_large(info, n, max);
    match info.kind {
        Kind::U32 | Kind::U64 => {
            let max = if matches!(info.kind, Kind::U32) {
                u32::MAX as u64
            } else {
                u64::MAX
            };
            let n = match &*v {
                Value::Number(n) => {
                    if let Some(u) = n.as_u64() {
                        u
                    } else if n.as_i64().is_some_and(|i| i < 0) {
                        return Err(err(format!("must not be negative, found {n}")));
                    } else {
                        match n.as_f64() {
                            Some(f) if f < 0.0 => {
                                return Err(err(format!("must not be negative, found {n}")))
                            }
                            // `max as f64` rounds u64::MAX up to 2^64, itself too large.
                            Some(f)
                                if f.is_finite() && f.fract() == 0.0 && f < max as f64 + 1.0 =>
                            {
                                f as u64
                            }
                            Some(f) if f.is_finite() && f.fract() == 0.0 => {
                                return Err(err(too_large(n, max)))
                            }
                            _ => return Err(err(format!("expected a whole number, found {n}"))),
                        }
                    }
                }
                other => {
                    return Err(err(format!(
                        "expected a whole number, found {}",
                        describe(other)
                    )))
                }
            };
            if n > max {
                return Err(err(too_large(&n, max)));
            }
            *v = Value::Number(n.into());
        }
        Kind::Bool => {
            if !matches!(v, Value::Bool(_)) {
                return Err(err(format!(
                    "expected true or false, found {}",
                    describe(v)
                )));
            }
        }
        Kind::Str => match &*v {
            Value::String(_) => {}
            Value::Number(n) => *v = Value::String(n.to_string()),
            Value::Bool(b) => *v = Value::String(b.to_string()),
            other => return Err(err(format!("expected text, found {}", describe(other)))),
        },
        Kind::Enum(names) => {
            let Value::String(s) = &*v else {
                return Err(err(format!(
                    "expected one of {}, found {}",
                    names.join(", "),
                    describe(v)
                )));
            };
            if !names.contains(&s.as_str()) {
                let hint = names
                    .iter()
                    .map(|n| (strsim::levenshtein(s, n), *n))
                    .filter(|&(d, n)| d <= 2.max(n.len() / 3))
                    .min_by_key(|&(d, _)| d)
                    .map(|(_, n)| format!("; did you mean {n}?"))
                    .unwrap_or_default();
                return Err(err(format!(
                    "unknown value {s:?}, expected one of {}{hint}",
                    names.join(", ")
                )));
            }
        }
        Kind::Section(_) => unreachable!("sections are checked by check_section"),
    }
    Ok(())
}

fn record_leaves(
    value: &Value,
    keys: &'static [KeyInfo],
    prefix: &str,
    origin: &str,
    prov: &mut Provenance,
) {
    let Value::Mapping(map) = value else { return };
    for (k, v) in map {
        let Some(name) = k.as_str() else { continue };
        let Some(info) = keys.iter().find(|i| i.name == name) else {
            continue;
        };
        let path = join(prefix, name);
        match info.kind {
            Kind::Section(sub) => record_leaves(v, sub, &path, origin, prov),
            _ => {
                prov.insert(path, origin.to_string());
            }
        }
    }
}

/// Applies one `--set key=value` to the merged tree.
fn apply_set(
    tree: &mut Value,
    key: &str,
    raw: &str,
    prov: &mut Provenance,
) -> Result<(), ConfigError> {
    let origin = format!("--set {key}={raw}");
    let parts: Vec<&str> = key.split('.').collect();
    let mut keys = GpuConfig::KEYS;
    let mut prefix = String::new();
    let mut leaf = None;
    for (i, part) in parts.iter().enumerate() {
        let path = join(&prefix, part);
        let info = find_key(keys, part, &path, &origin)?;
        let last = i + 1 == parts.len();
        match (info.kind, last) {
            (Kind::Section(sub), false) => keys = sub,
            (Kind::Section(sub), true) => {
                return Err(ConfigError::Key {
                    origin,
                    key: path,
                    msg: format!(
                        "is a section, not a key; set one of its keys: {}",
                        sub.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
                    ),
                })
            }
            (_, false) => {
                return Err(ConfigError::Key {
                    origin,
                    key: path,
                    msg: "is a key, not a section".into(),
                })
            }
            (_, true) => leaf = Some(info),
        }
        prefix = path;
    }
    let Some(info) = leaf else {
        return Err(ConfigError::Override {
            arg: format!("{key}={raw}"),
            msg: "expected a key path".into(),
        });
    };
    // An integer beyond 64 bits is not YAML to the parser; say what is wrong with it.
    let digits = raw.trim();
    if matches!(info.kind, Kind::U32 | Kind::U64)
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits.parse::<u64>().is_err()
    {
        return Err(ConfigError::Key {
            origin,
            key: key.to_string(),
            msg: too_large(info, &digits, u64::MAX),
        });
    }
    let mut value: Value = serde_norway::from_str(raw).map_err(|e| ConfigError::Override {
        arg: format!("{key}={raw}"),
        msg: format!("the value is not YAML: {e}"),
    })?;
    if matches!(value, Value::Mapping(_) | Value::Sequence(_)) {
        return Err(ConfigError::Override {
            arg: format!("{key}={raw}"),
            msg: "expected a single value".into(),
        });
    }
    check_leaf(info, &mut value, key, &origin)?;
    let mut node = tree;
    for part in &parts[..parts.len() - 1] {
        let map = match node {
            Value::Mapping(m) => m,
            other => {
                *other = Value::Mapping(Mapping::new());
                other.as_mapping_mut().expect("just made a mapping")
            }
        };
        node = map
            .entry(Value::String(part.to_string()))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
    }
    if !node.is_mapping() {
        *node = Value::Mapping(Mapping::new());
    }
    node.as_mapping_mut()
        .expect("a mapping")
        .insert(Value::String(parts[parts.len() - 1].to_string()), value);
    prov.insert(key.to_string(), origin);
    Ok(())
}

/// Fills defaults for missing keys (and missing sections), and reports missing required
/// keys, naming the top-level file.
fn complete(
    value: &mut Value,
    keys: &'static [KeyInfo],
    prefix: &str,
    top: &str,
    prov: &mut Provenance,
) -> Result<(), ConfigError> {
    let map = value
        .as_mapping_mut()
        .expect("sections were checked to be mappings");
    for info in keys {
        let path = join(prefix, info.name);
        let name = Value::String(info.name.to_string());
        match (info.kind, map.get_mut(&name)) {
            (Kind::Section(sub), Some(v)) => complete(v, sub, &path, top, prov)?,
            (Kind::Section(sub), None) => {
                let mut v = Value::Mapping(Mapping::new());
                complete(&mut v, sub, &path, top, prov)?;
                map.insert(name, v);
            }
            (_, Some(_)) => {}
            (_, None) => match info.default {
                Some(text) => {
                    let mut v: Value =
                        serde_norway::from_str(text).expect("table defaults are valid YAML");
                    check_leaf(info, &mut v, &path, "default").expect("defaults fit their kind");
                    map.insert(name, v);
                    prov.insert(path, "default".into());
                }
                None => {
                    return Err(ConfigError::Key {
                        origin: top.into(),
                        key: path,
                        msg: "missing key (it has no default); see docs/config.md".into(),
                    })
                }
            },
        }
    }
    Ok(())
}
