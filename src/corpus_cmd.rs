//! `tessera corpus check MANIFEST.yaml`: the regression corpus. A manifest lists cases (a
//! trace or a workload, a config, overrides, how to run it, tolerances); each case runs as
//! a worker process and is compared with its golden stats file, or, for a case that says
//! `same_as: X`, with case X byte for byte (the determinism matrix). The manifest format
//! is documented in docs/corpus.md.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::Value;
use serde_norway::Mapping;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::jobs::{self, Job};
use crate::outputs;
use crate::provenance;
use crate::stats_file::{self, Tolerances};

#[derive(Subcommand)]
pub enum CorpusCmd {
    /// Run every case of a manifest and compare it with its golden stats file (or with the
    /// case it must be identical to); prints a table, exits 1 on any failure or missing
    /// golden.
    Check(CheckArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    /// The manifest (YAML; see docs/corpus.md).
    manifest: PathBuf,
    /// Where the goldens are, one `<case>.json` each (default: `golden/` beside the
    /// manifest).
    #[arg(long, value_name = "DIR")]
    golden: Option<PathBuf>,
    /// Record the goldens of new and failing cases from this run (each replaced whole, in
    /// one step).
    #[arg(long)]
    update: bool,
    /// Cases run at once (default: the cores available).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Also write the results as JUnit XML (for CI).
    #[arg(long, value_name = "FILE.xml")]
    junit: Option<PathBuf>,
    /// Keep every case's stats file in this directory (default: a temporary directory,
    /// removed at the end).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run only these cases (repeatable), and the cases they must be identical to.
    #[arg(long = "case", value_name = "NAME")]
    only: Vec<String>,
}

pub fn run(cmd: CorpusCmd) -> Result<()> {
    match cmd {
        CorpusCmd::Check(a) => check(a),
    }
}

// ---------------------------------------------------------------------------------------
// The manifest

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    /// Relative tolerances in percent by metric pattern, for every case.
    #[serde(default)]
    tolerance: Mapping,
    /// Time limit of each case in seconds (default 600).
    timeout_s: Option<u64>,
    cases: Vec<serde_norway::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    name: String,
    same_as: Option<String>,
    trace: Option<String>,
    workload: Option<String>,
    #[serde(default)]
    params: Mapping,
    config: Option<String>,
    #[serde(default)]
    set: Mapping,
    threads: Option<u32>,
    ranks: Option<u32>,
    placement: Option<String>,
    windows: Option<String>,
    #[serde(default)]
    tolerance: Mapping,
    #[serde(default)]
    skip_if_missing: bool,
    timeout_s: Option<u64>,
    /// Free text: why the case exists.
    #[allow(dead_code)]
    note: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
enum CaseInput {
    /// A `.tst` file, or an Accel-Sim trace directory (imported first).
    Trace(PathBuf),
    Workload {
        name: String,
        params: Vec<(String, String)>,
    },
}

#[derive(Clone, Debug)]
struct Case {
    name: String,
    input: CaseInput,
    config: PathBuf,
    set: Vec<(String, String)>,
    threads: u32,
    ranks: u32,
    placement: String,
    windows: String,
    tolerance: Tolerances,
    /// The case whose simulated results this one must reproduce byte for byte.
    same_as: Option<usize>,
    skip_if_missing: bool,
    timeout: Duration,
}

/// A case's `windows` (`pair` when absent), checked.
fn case_windows(c: &CaseFile) -> Result<String, String> {
    let w = c.windows.clone().unwrap_or_else(|| "pair".into());
    w.parse::<tessera_cluster::Windows>()
        .map(|w| w.name().to_string())
        .map_err(|e| format!("windows: {e}"))
}

fn scalar(v: &serde_norway::Value) -> Option<String> {
    match v {
        serde_norway::Value::String(s) => Some(s.clone()),
        serde_norway::Value::Number(n) => Some(n.to_string()),
        serde_norway::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn pairs(m: &Mapping, what: &str) -> Result<Vec<(String, String)>> {
    m.iter()
        .map(|(k, v)| {
            let k = scalar(k).ok_or_else(|| anyhow::anyhow!("{what}: a key is not a name"))?;
            let v = scalar(v).ok_or_else(|| {
                anyhow::anyhow!("{what}.{k}: expected a single value (a string, number or boolean)")
            })?;
            Ok((k, v))
        })
        .collect()
}

fn tolerances(m: &Mapping, what: &str) -> Result<Vec<(String, f64)>> {
    pairs(m, what)?
        .into_iter()
        .map(|(k, v)| {
            let pct: f64 = v
                .parse()
                .ok()
                .filter(|p: &f64| p.is_finite() && *p >= 0.0)
                .ok_or_else(|| {
                    anyhow::anyhow!("{what}.{k}: expected a percentage of 0 or more, got {v:?}")
                })?;
            Ok((k, pct))
        })
        .collect()
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        && !n.starts_with('.')
}

/// Reads and checks a manifest. Errors name the manifest and the case.
fn load_manifest(path: &Path) -> Result<Vec<Case>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the manifest", path.display()))?;
    let m: ManifestFile =
        serde_norway::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new(""));
    let at = |p: &str| -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() || base.as_os_str().is_empty() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };
    let global_tol = tolerances(&m.tolerance, "tolerance")
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let default_timeout = m.timeout_s.unwrap_or(600);
    let mut files = Vec::new();
    for (i, raw) in m.cases.iter().enumerate() {
        let label = raw
            .get("name")
            .and_then(scalar)
            .map(|n| format!("case '{n}'"))
            .unwrap_or_else(|| format!("case {}", i + 1));
        let c: CaseFile = serde_norway::from_value(raw.clone())
            .map_err(|e| anyhow::anyhow!("{}: {label}: {e}", path.display()))?;
        files.push(c);
    }
    let err = |name: &str, msg: String| anyhow::anyhow!("{}: case '{name}': {msg}", path.display());
    let mut cases: Vec<Case> = Vec::new();
    // Cases that name no reference first, so a `same_as` may name a case below it.
    for c in &files {
        if !valid_name(&c.name) {
            return Err(err(
                &c.name,
                "a case name is letters, digits, '.', '_' and '-' (it names the golden file)"
                    .into(),
            ));
        }
        if files.iter().filter(|d| d.name == c.name).count() > 1 {
            return Err(err(&c.name, "two cases have this name".into()));
        }
        let placement = c.placement.clone().unwrap_or_else(|| "contiguous".into());
        if !["contiguous", "round_robin", "weighted"].contains(&placement.as_str()) {
            return Err(err(
                &c.name,
                format!(
                    "placement: expected contiguous, round_robin or weighted, got {placement:?}"
                ),
            ));
        }
        let windows = case_windows(c).map_err(|e| err(&c.name, e))?;
        let threads = c.threads.unwrap_or(1);
        let ranks = c.ranks.unwrap_or(1);
        if threads == 0 || ranks == 0 {
            return Err(err(&c.name, "threads and ranks are 1 or more".into()));
        }
        let set = pairs(&c.set, "set").map_err(|e| err(&c.name, e.to_string()))?;
        let mut tol = global_tol.clone();
        tol.extend(tolerances(&c.tolerance, "tolerance").map_err(|e| err(&c.name, e.to_string()))?);
        let timeout = Duration::from_secs(c.timeout_s.unwrap_or(default_timeout));
        if c.same_as.is_some() {
            if c.trace.is_some()
                || c.workload.is_some()
                || c.config.is_some()
                || !c.params.is_empty()
            {
                return Err(err(
                    &c.name,
                    "a `same_as` case takes its trace or workload and config from the case it \
                     names; give only how it runs (threads, ranks, placement, partitioning.* \
                     in `set`)"
                        .into(),
                ));
            }
            if let Some((k, _)) = set
                .iter()
                .find(|(k, _)| !provenance::is_partitioning_key(k))
            {
                return Err(err(
                    &c.name,
                    format!(
                        "set.{k}: a `same_as` case must simulate the same system, so it may only \
                         set partitioning.* keys"
                    ),
                ));
            }
            if !c.tolerance.is_empty() {
                return Err(err(
                    &c.name,
                    "a `same_as` case is compared byte for byte: it takes no tolerance".into(),
                ));
            }
            continue;
        }
        let input = match (&c.trace, &c.workload) {
            (Some(t), None) => CaseInput::Trace(at(t)),
            (None, Some(w)) => CaseInput::Workload {
                name: w.clone(),
                params: pairs(&c.params, "params").map_err(|e| err(&c.name, e.to_string()))?,
            },
            _ => {
                return Err(err(
                    &c.name,
                    "give exactly one of `trace` and `workload` (or `same_as`)".into(),
                ))
            }
        };
        if matches!(input, CaseInput::Trace(_)) && !c.params.is_empty() {
            return Err(err(&c.name, "`params` go with a `workload`".into()));
        }
        let Some(config) = &c.config else {
            return Err(err(&c.name, "no `config`".into()));
        };
        cases.push(Case {
            name: c.name.clone(),
            input,
            config: at(config),
            set,
            threads,
            ranks,
            placement,
            windows,
            tolerance: Tolerances(tol),
            same_as: None,
            skip_if_missing: c.skip_if_missing,
            timeout,
        });
    }
    for c in &files {
        if c.placement.as_deref() == Some("weighted") && c.ranks.unwrap_or(1) > 1 {
            return Err(err(
                &c.name,
                "placement: weighted under several ranks needs a stats file of costs \
                 (`--weights`), which a case cannot give: use threads"
                    .into(),
            ));
        }
        let Some(reference) = &c.same_as else {
            continue;
        };
        let Some(r) = cases.iter().position(|x| &x.name == reference) else {
            let why = if files.iter().any(|f| &f.name == reference) {
                "is itself a `same_as` case: name the case it reproduces"
            } else {
                "is not a case of this manifest"
            };
            return Err(err(&c.name, format!("same_as: '{reference}' {why}")));
        };
        let base = cases[r].clone();
        let mut set = base.set.clone();
        set.extend(pairs(&c.set, "set").map_err(|e| err(&c.name, e.to_string()))?);
        cases.push(Case {
            name: c.name.clone(),
            set,
            threads: c.threads.unwrap_or(1),
            ranks: c.ranks.unwrap_or(1),
            placement: c.placement.clone().unwrap_or_else(|| "contiguous".into()),
            windows: case_windows(c).map_err(|e| err(&c.name, e))?,
            tolerance: Tolerances::default(),
            same_as: Some(r),
            timeout: Duration::from_secs(c.timeout_s.unwrap_or(default_timeout)),
            ..base
        });
    }
    // Back to the manifest's order, references re-pointed.
    let order: Vec<usize> = files
        .iter()
        .map(|f| cases.iter().position(|c| c.name == f.name).unwrap_or(0))
        .collect();
    let mut out: Vec<Case> = order.iter().map(|&i| cases[i].clone()).collect();
    for c in &mut out {
        if let Some(r) = c.same_as {
            c.same_as = order.iter().position(|&i| i == r);
        }
    }
    if out.is_empty() {
        anyhow::bail!("{}: no cases", path.display());
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Running the cases

/// What running a case gave.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
enum Outcome {
    /// The stats file's text, and the seconds the run took.
    Ran(String, f64),
    Failed(String),
    Skipped(String),
    /// Not this process's to run (another rank's, or not selected).
    NotHere,
}

/// A directory removed when dropped (unless kept).
struct WorkDir {
    path: PathBuf,
    keep: bool,
    _pending: Option<crate::cleanup::Pending>,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn work_dir(out: Option<&Path>, rank: usize) -> Result<WorkDir> {
    if let Some(o) = out {
        let p = o.to_path_buf();
        std::fs::create_dir_all(&p).with_context(|| format!("{}: cannot create", p.display()))?;
        return Ok(WorkDir {
            path: p,
            keep: true,
            _pending: None,
        });
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let p = std::env::temp_dir().join(format!(
        "tessera-corpus-{}-{rank}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&p).with_context(|| format!("{}: cannot create", p.display()))?;
    Ok(WorkDir {
        _pending: Some(crate::cleanup::pending(&p)),
        path: p,
        keep: false,
    })
}

/// Why this process cannot run a case of `ranks` ranks, if it cannot.
fn cannot_launch_ranks(ranks: u32, under_mpi: bool) -> Option<String> {
    if ranks <= 1 {
        return None;
    }
    if under_mpi {
        return Some(format!(
            "needs {ranks} MPI ranks: run the corpus outside MPI to launch those"
        ));
    }
    if !cfg!(feature = "mpi") {
        return Some(format!(
            "needs {ranks} MPI ranks: this tessera was built without the mpi feature"
        ));
    }
    if !jobs::have_mpirun() {
        return Some(format!("needs {ranks} MPI ranks: no mpirun on the PATH"));
    }
    None
}

/// Runs the cases `mine` (indices) in this process and returns every case's outcome
/// (`NotHere` for the others).
fn run_cases(
    cases: &[Case],
    mine: &[usize],
    parallel: usize,
    work: &Path,
    under_mpi: bool,
    rank_label: &str,
) -> Vec<Outcome> {
    let mut outcomes = vec![Outcome::NotHere; cases.len()];
    // Inputs: a missing trace skips or fails its cases; an Accel-Sim directory is
    // imported once for all the cases that use it.
    let mut imports: Vec<PathBuf> = Vec::new();
    let mut runnable = Vec::new();
    for &i in mine {
        let c = &cases[i];
        if let Some(why) = cannot_launch_ranks(c.ranks, under_mpi) {
            outcomes[i] = Outcome::Skipped(why);
            continue;
        }
        if let CaseInput::Trace(t) = &c.input {
            if !t.exists() {
                let why = format!("trace {}: not found", t.display());
                outcomes[i] = if c.skip_if_missing {
                    Outcome::Skipped(why)
                } else {
                    Outcome::Failed(why)
                };
                continue;
            }
            if t.is_dir() && !imports.contains(t) {
                imports.push(t.clone());
            }
        }
        runnable.push(i);
    }
    let import_path = |k: usize| work.join(format!("import-{k}.tst"));
    let import_jobs: Vec<Job> = imports
        .iter()
        .enumerate()
        .map(|(k, dir)| Job {
            args: vec![
                "trace".into(),
                "import".into(),
                "accel-sim".into(),
                dir.clone().into(),
                "-o".into(),
                import_path(k).into(),
            ],
            mpi_ranks: None,
            log: work.join(format!("import-{k}.log")),
            timeout: Duration::from_secs(600),
        })
        .collect();
    let imported = jobs::run_all(&import_jobs, parallel, &|_, _| {});
    let mut jobs_list = Vec::new();
    let mut job_case = Vec::new();
    for &i in &runnable {
        let c = &cases[i];
        let mut args: Vec<OsString> =
            vec!["run".into(), "--config".into(), c.config.clone().into()];
        match &c.input {
            CaseInput::Trace(t) if t.is_dir() => {
                let k = imports.iter().position(|d| d == t).unwrap_or(0);
                if !imported[k].ok {
                    outcomes[i] = Outcome::Failed(format!(
                        "importing {}: {}",
                        t.display(),
                        imported[k].failure
                    ));
                    continue;
                }
                args.push("--trace".into());
                args.push(import_path(k).into());
            }
            CaseInput::Trace(t) => {
                args.push("--trace".into());
                args.push(t.clone().into());
            }
            CaseInput::Workload { name, params } => {
                args.push("--workload".into());
                args.push(name.into());
                for (k, v) in params {
                    args.push("--param".into());
                    args.push(format!("{k}={v}").into());
                }
            }
        }
        for (k, v) in &c.set {
            args.push("--set".into());
            args.push(format!("{k}={v}").into());
        }
        args.extend(
            [
                "--threads".to_string(),
                c.threads.to_string(),
                "--placement".into(),
                c.placement.clone(),
                "--windows".into(),
                c.windows.clone(),
                "--stats-out".into(),
            ]
            .map(OsString::from),
        );
        args.push(work.join(format!("{}.json", c.name)).into());
        jobs_list.push(Job {
            args,
            mpi_ranks: (c.ranks > 1).then_some(c.ranks as usize),
            log: work.join(format!("{}.log", c.name)),
            timeout: c.timeout,
        });
        job_case.push(i);
    }
    let total = jobs_list.len();
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let results = jobs::run_all(&jobs_list, parallel, &|j, r| {
        let n = finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        eprintln!(
            "{rank_label}[{n}/{total}] {}: {} in {:.1} s",
            cases[job_case[j]].name,
            if r.ok { "ran" } else { "FAILED to run" },
            r.secs
        );
    });
    for (r, &i) in results.iter().zip(&job_case) {
        outcomes[i] = if r.ok {
            let p = work.join(format!("{}.json", cases[i].name));
            match std::fs::read_to_string(&p) {
                Ok(text) => Outcome::Ran(text, r.secs),
                Err(e) => Outcome::Failed(format!("{}: {e}", p.display())),
            }
        } else {
            Outcome::Failed(r.failure.clone())
        };
    }
    outcomes
}

// ---------------------------------------------------------------------------------------
// Judging the outcomes

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Pass,
    Fail,
    New,
    Updated,
    Skipped,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::New => "NEW",
            Status::Updated => "updated",
            Status::Skipped => "skipped",
        }
    }
}

struct Verdict {
    status: Status,
    /// One line for the table.
    summary: String,
    /// Every difference, for the details below the table.
    details: Vec<String>,
    secs: f64,
}

/// What a comparison must ignore: how the run was executed, the tool version, and the
/// paths of the files (a trace imported to a temporary file is compared by its checksum).
fn comparable(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("run");
        if let Some(p) = m.get_mut("provenance").and_then(Value::as_object_mut) {
            p.remove("tool");
            p.remove("config_file");
            if let Some(i) = p.get_mut("input").and_then(Value::as_object_mut) {
                i.remove("trace");
            }
        }
    }
    v
}

fn ignored_config_key(k: &str) -> bool {
    k == "config file" || k == "input.trace"
}

/// The differences of `now` from `reference` as lines, and whether any is beyond the
/// tolerances.
fn differences(reference: &Value, now: &Value, tol: &Tolerances) -> (Vec<String>, bool) {
    let mut lines = Vec::new();
    let config: Vec<_> = stats_file::config_differences(reference, now)
        .into_iter()
        .filter(|d| !ignored_config_key(&d.key))
        .collect();
    for d in &config {
        lines.push(format!("config {}", d.describe()));
    }
    let deltas = stats_file::compare(reference, now, tol);
    let mut beyond = !config.is_empty();
    for d in deltas.iter().filter(|d| d.beyond) {
        lines.push(d.describe());
        beyond = true;
    }
    for d in deltas.iter().filter(|d| !d.beyond) {
        lines.push(format!("{} (within tolerance)", d.describe()));
    }
    (lines, beyond)
}

fn first_and_count(lines: &[String]) -> String {
    match lines.len() {
        0 => String::new(),
        1 => lines[0].clone(),
        n => format!("{} (and {} more)", lines[0], n - 1),
    }
}

fn judge(
    cases: &[Case],
    outcomes: &[Outcome],
    golden_dir: &Path,
    update: bool,
    write: bool,
) -> Vec<Option<Verdict>> {
    let parsed: Vec<Option<Result<Value, String>>> = outcomes
        .iter()
        .map(|o| match o {
            Outcome::Ran(text, _) => {
                Some(stats_file::parse(text).map_err(|e| format!("its stats: {e:#}")))
            }
            _ => None,
        })
        .collect();
    let verdict = |status, summary: String, details: Vec<String>, secs| {
        Some(Verdict {
            status,
            summary,
            details,
            secs,
        })
    };
    cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let secs = match &outcomes[i] {
                Outcome::Ran(_, s) => *s,
                _ => 0.0,
            };
            let now = match (&outcomes[i], &parsed[i]) {
                (Outcome::NotHere, _) => return None,
                (Outcome::Skipped(why), _) => {
                    return verdict(Status::Skipped, why.clone(), vec![], 0.0)
                }
                (Outcome::Failed(why), _) => {
                    return verdict(Status::Fail, format!("did not run: {why}"), vec![], 0.0)
                }
                (_, Some(Err(e))) => return verdict(Status::Fail, e.clone(), vec![], secs),
                (_, Some(Ok(v))) => v,
                (Outcome::Ran(..), None) => return None,
            };
            if let Some(r) = c.same_as {
                let rname = &cases[r].name;
                return match (&outcomes[r], &parsed[r]) {
                    (Outcome::Skipped(_), _) | (Outcome::NotHere, _) => verdict(
                        Status::Skipped,
                        format!("its reference case {rname} did not run here"),
                        vec![],
                        secs,
                    ),
                    (_, Some(Ok(reference))) => {
                        if comparable(reference) == comparable(now) {
                            verdict(Status::Pass, format!("identical to {rname}"), vec![], secs)
                        } else {
                            let (lines, _) = differences(reference, now, &Tolerances::default());
                            let lines = if lines.is_empty() {
                                vec!["the files differ outside the metrics and configuration"
                                    .to_string()]
                            } else {
                                lines
                            };
                            verdict(
                                Status::Fail,
                                format!("differs from {rname}: {}", first_and_count(&lines)),
                                lines,
                                secs,
                            )
                        }
                    }
                    _ => verdict(
                        Status::Fail,
                        format!("its reference case {rname} failed"),
                        vec![],
                        secs,
                    ),
                };
            }
            let golden = golden_dir.join(format!("{}.json", c.name));
            let record = |status: Status, summary: String, details: Vec<String>| {
                if write {
                    let text = match &outcomes[i] {
                        Outcome::Ran(t, _) => provenance::without_run(t),
                        _ => Err(anyhow::anyhow!("no stats")),
                    };
                    if let Err(e) = text.and_then(|t| outputs::write_atomic(&golden, t.as_bytes()))
                    {
                        return verdict(
                            Status::Fail,
                            format!("cannot record the golden: {e:#}"),
                            details,
                            secs,
                        );
                    }
                }
                verdict(status, summary, details, secs)
            };
            let text = match std::fs::read_to_string(&golden) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return if update {
                        record(Status::New, "golden recorded".into(), vec![])
                    } else {
                        verdict(
                            Status::New,
                            format!("no golden {}: record it with --update", golden.display()),
                            vec![],
                            secs,
                        )
                    };
                }
                Err(e) => {
                    return verdict(
                        Status::Fail,
                        format!("{}: cannot read the golden: {e}", golden.display()),
                        vec![],
                        secs,
                    )
                }
            };
            let gold = stats_file::parse(&text).and_then(|g| {
                stats_file::check_current(&g, &format!("golden {}", golden.display())).map(|_| g)
            });
            let gold = match gold {
                Ok(g) => g,
                Err(e) if update => {
                    return record(
                        Status::Updated,
                        format!("golden re-recorded ({e:#})"),
                        vec![],
                    )
                }
                Err(e) => {
                    return verdict(
                        Status::Fail,
                        format!("{e:#}; record it again with --update"),
                        vec![],
                        secs,
                    )
                }
            };
            let (lines, beyond) = differences(&gold, now, &c.tolerance);
            if !beyond {
                let summary = if lines.is_empty() {
                    String::new()
                } else {
                    format!("{} metric(s) within tolerance", lines.len())
                };
                return verdict(Status::Pass, summary, lines, secs);
            }
            if update {
                return record(
                    Status::Updated,
                    format!("golden re-recorded: {}", first_and_count(&lines)),
                    lines,
                );
            }
            verdict(Status::Fail, first_and_count(&lines), lines, secs)
        })
        .collect()
}

fn xml_escape(s: &str) -> String {
    s.chars()
        .filter(|&c| c == '\t' || c == '\n' || c >= ' ')
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&apos;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn junit(manifest: &Path, cases: &[Case], verdicts: &[Option<Verdict>], secs: f64) -> String {
    let all: Vec<(&Case, &Verdict)> = cases
        .iter()
        .zip(verdicts)
        .filter_map(|(c, v)| Some((c, v.as_ref()?)))
        .collect();
    let failures = all
        .iter()
        .filter(|(_, v)| matches!(v.status, Status::Fail | Status::New))
        .count();
    let skipped = all
        .iter()
        .filter(|(_, v)| v.status == Status::Skipped)
        .count();
    let suite = xml_escape(&manifest.display().to_string());
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites>\n  <testsuite name=\"tessera corpus {suite}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{secs:.3}\">\n",
        all.len()
    ));
    for (c, v) in all {
        x.push_str(&format!(
            "    <testcase classname=\"corpus\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&c.name),
            v.secs
        ));
        match v.status {
            Status::Pass | Status::Updated => x.push_str("/>\n"),
            Status::Skipped => x.push_str(&format!(
                ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                xml_escape(&v.summary)
            )),
            Status::Fail | Status::New => x.push_str(&format!(
                ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                xml_escape(&v.summary),
                xml_escape(&v.details.join("\n"))
            )),
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// Prints the report; returns whether the check passed.
fn report(manifest: &Path, cases: &[Case], verdicts: &[Option<Verdict>], golden_dir: &Path) {
    let width = cases.iter().map(|c| c.name.len()).max().unwrap_or(4).max(4);
    outln!("corpus {}", manifest.display());
    let mut counts = [0usize; 5];
    for (c, v) in cases.iter().zip(verdicts) {
        let Some(v) = v else { continue };
        counts[v.status as usize] += 1;
        outln!("  {:<8} {:<width$} {}", v.status.word(), c.name, v.summary);
    }
    let failing: Vec<_> = cases
        .iter()
        .zip(verdicts)
        .filter_map(|(c, v)| Some((c, v.as_ref()?)))
        .filter(|(_, v)| matches!(v.status, Status::Fail | Status::Updated) && v.details.len() > 1)
        .collect();
    for (c, v) in failing {
        outln!("{} ({}):", c.name, v.status.word());
        for l in v.details.iter().take(30) {
            outln!("    {l}");
        }
        if v.details.len() > 30 {
            outln!("    ... and {} more", v.details.len() - 30);
        }
    }
    let [pass, fail, new, updated, skipped] = counts;
    outln!(
        "{} case(s): {pass} pass, {fail} fail, {new} new, {updated} updated, {skipped} skipped",
        pass + fail + new + updated + skipped
    );
    // Goldens no case uses: worth knowing when a case is renamed.
    if let Ok(entries) = std::fs::read_dir(golden_dir) {
        let mut stale: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                let stem = n.strip_suffix(".json")?.to_string();
                (!cases.iter().any(|c| c.name == stem)).then_some(n)
            })
            .collect();
        stale.sort();
        if !stale.is_empty() {
            eprintln!(
                "note: goldens in {} that no case uses: {}",
                golden_dir.display(),
                stale.join(", ")
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The command

fn check(a: CheckArgs) -> Result<()> {
    let t0 = Instant::now();
    let cases = load_manifest(&a.manifest)?;
    for n in &a.only {
        if !cases.iter().any(|c| &c.name == n) {
            anyhow::bail!("{}: no case named '{n}'", a.manifest.display());
        }
    }
    let golden_dir = a
        .golden
        .clone()
        .unwrap_or_else(|| a.manifest.parent().unwrap_or(Path::new("")).join("golden"));
    if a.update {
        std::fs::create_dir_all(&golden_dir)
            .with_context(|| format!("{}: cannot create", golden_dir.display()))?;
    }
    if let Some(j) = &a.junit {
        outputs::check_dir_of(j, "JUnit report")?;
        outputs::refuse_input(j, &[&a.manifest])?;
    }
    // The selected cases, and those they are compared with.
    let selected: Vec<usize> = (0..cases.len())
        .filter(|&i| {
            a.only.is_empty()
                || a.only.contains(&cases[i].name)
                || cases
                    .iter()
                    .any(|c| a.only.contains(&c.name) && c.same_as == Some(i))
        })
        .collect();
    let parallel = a.jobs.unwrap_or_else(jobs::default_jobs).max(1);
    let (outcomes, rank) = match crate::mpi_cmd::launched_ranks() {
        Some(ranks) if ranks > 1 => run_under_mpi(&a, &cases, &selected, parallel, ranks)?,
        _ => {
            let work = work_dir(a.out.as_deref(), 0)?;
            (
                run_cases(&cases, &selected, parallel, &work.path, false, ""),
                0,
            )
        }
    };
    let verdicts = judge(&cases, &outcomes, &golden_dir, a.update, rank == 0);
    // With --update, a new case's golden has just been recorded: not a failure.
    let passed = verdicts
        .iter()
        .flatten()
        .all(|v| v.status != Status::Fail && (v.status != Status::New || a.update));
    if rank == 0 {
        report(&a.manifest, &cases, &verdicts, &golden_dir);
        if let Some(j) = &a.junit {
            let xml = junit(&a.manifest, &cases, &verdicts, t0.elapsed().as_secs_f64());
            outputs::write_atomic(j, xml.as_bytes())?;
        }
        eprintln!("corpus checked in {:.1} s", t0.elapsed().as_secs_f64());
    }
    if !passed {
        return Err(crate::Exit(1).into());
    }
    Ok(())
}

/// Under `mpirun -np R`: the single-process cases are dealt to the ranks in turn, each
/// rank runs its share as worker processes, and every rank learns every outcome (rank 0
/// reports). Returns the outcomes and this rank.
#[cfg(feature = "mpi")]
fn run_under_mpi(
    a: &CheckArgs,
    cases: &[Case],
    selected: &[usize],
    parallel: usize,
    _ranks: usize,
) -> Result<(Vec<Outcome>, usize)> {
    use mpi::collective::CommunicatorCollectives;
    use mpi::datatype::PartitionMut;
    use mpi::topology::Communicator;

    let Some(universe) = mpi::initialize() else {
        anyhow::bail!("MPI was already initialized");
    };
    let world = universe.world();
    let (rank, ranks) = (world.rank() as usize, world.size() as usize);
    // Cases of several ranks are skipped (each rank is one process already); the others
    // are dealt round robin in manifest order.
    let single: Vec<usize> = selected
        .iter()
        .copied()
        .filter(|&i| cases[i].ranks <= 1)
        .collect();
    let mut mine: Vec<usize> = single
        .iter()
        .enumerate()
        .filter(|(k, _)| k % ranks == rank)
        .map(|(_, &i)| i)
        .collect();
    if rank == 0 {
        mine.extend(selected.iter().copied().filter(|&i| cases[i].ranks > 1));
        mine.sort_unstable();
    }
    let out = a.out.as_ref().map(|o| o.join(format!("rank{rank}")));
    let work = work_dir(out.as_deref(), rank)?;
    let label = format!("rank {rank}: ");
    let local = run_cases(cases, &mine, parallel, &work.path, true, &label);
    let bytes = serde_json::to_vec(&local)?;
    let count = i32::try_from(bytes.len()).context("the corpus results are too large")?;
    let mut counts = vec![0i32; ranks];
    world.all_gather_into(&count, &mut counts[..]);
    let mut displs = Vec::with_capacity(ranks);
    let mut total = 0i32;
    for &c in &counts {
        displs.push(total);
        total += c;
    }
    let mut all = vec![0u8; total as usize];
    {
        let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        world.all_gather_varcount_into(&bytes[..], &mut part);
    }
    let mut merged = vec![Outcome::NotHere; cases.len()];
    for r in 0..ranks {
        let at = displs[r] as usize;
        let part: Vec<Outcome> = serde_json::from_slice(&all[at..at + counts[r] as usize])
            .context("a rank's corpus results do not parse")?;
        for (i, o) in part.into_iter().enumerate() {
            if !matches!(o, Outcome::NotHere) {
                merged[i] = o;
            }
        }
    }
    Ok((merged, rank))
}

#[cfg(not(feature = "mpi"))]
fn run_under_mpi(
    _a: &CheckArgs,
    _cases: &[Case],
    _selected: &[usize],
    _parallel: usize,
    ranks: usize,
) -> Result<(Vec<Outcome>, usize)> {
    anyhow::bail!(
        "started by an MPI launcher with {ranks} ranks, but this tessera was built without \
         MPI: build it with `cargo build --release --features mpi`, or run the corpus \
         outside mpirun"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> Result<Vec<Case>> {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.yaml");
        std::fs::write(&p, text).unwrap();
        load_manifest(&p)
    }

    #[test]
    fn a_same_as_case_inherits_what_it_simulates() {
        let cases = manifest(
            "cases:\n\
             - name: t2\n  same_as: base\n  threads: 2\n  set: {partitioning.mode: sm_cluster}\n\
             - name: base\n  workload: gemm\n  params: {m: 64}\n  config: c.yaml\n  set: {core.scheduler: gto}\n",
        )
        .unwrap();
        assert_eq!(cases[0].name, "t2");
        assert_eq!(cases[0].same_as, Some(1));
        assert_eq!(cases[0].threads, 2);
        assert_eq!(cases[0].input, cases[1].input);
        assert_eq!(
            cases[0].set,
            [
                ("core.scheduler".to_string(), "gto".to_string()),
                ("partitioning.mode".to_string(), "sm_cluster".to_string())
            ]
        );
    }

    #[test]
    fn manifest_errors_name_the_case() {
        let e = manifest("cases:\n- name: a\n  workload: gemm\n  config: c.yaml\n  thread: 2\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("case 'a'") && e.contains("thread"), "{e}");
        let e = manifest("cases:\n- name: a\n  same_as: b\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("case 'a'") && e.contains("'b' is not a case"),
            "{e}"
        );
        let e = manifest(
            "cases:\n- name: b\n  workload: gemm\n  config: c.yaml\n- name: a\n  same_as: b\n  set: {core.sm_count: 4}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("case 'a'") && e.contains("partitioning"), "{e}");
        let e = manifest("cases:\n- name: a\n  config: c.yaml\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exactly one of"), "{e}");
        let e = manifest("cases:\n- name: a/b\n  workload: x\n  config: c.yaml\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("case 'a/b'"), "{e}");
        let e = manifest("cases: []\nextra: 1\n").unwrap_err().to_string();
        assert!(e.contains("extra"), "{e}");
    }

    #[test]
    fn junit_escapes_and_counts() {
        let cases = manifest("cases:\n- name: a\n  workload: gemm\n  config: c.yaml\n").unwrap();
        let v = vec![Some(Verdict {
            status: Status::Fail,
            summary: "x <y> & \"z\"".into(),
            details: vec!["d".into()],
            secs: 1.0,
        })];
        let x = junit(Path::new("m.yaml"), &cases, &v, 2.0);
        assert!(x.contains("failures=\"1\""), "{x}");
        assert!(x.contains("x &lt;y&gt; &amp; &quot;z&quot;"), "{x}");
    }
}
