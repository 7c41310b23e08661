//! Progress of the long commands (`run`, `trace gen`, `trace import`, `trace export`) on
//! stderr: a bar (`indicatif`) on a terminal; off a terminal (a batch log), a plain line
//! every `--progress-every` seconds (default 10; `TESSERA_PROGRESS_EVERY` in the
//! environment); nothing with `--quiet`. Errors and the summary are not progress: they
//! appear either way. Progress only reads counters: it never changes what is simulated.

use clap::Args;
use indicatif::{HumanDuration, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable read when `--progress-every` is not given.
pub const EVERY_VAR: &str = "TESSERA_PROGRESS_EVERY";

/// The interval of progress lines off a terminal when neither the option nor the variable
/// says.
const DEFAULT_EVERY_S: f64 = 10.0;

/// The options every command takes (global: before or after the subcommand).
#[derive(Args, Clone, Debug, Default)]
pub struct ProgressArgs {
    /// Print no progress (no bar, no progress lines); errors and the summary still appear.
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    /// Off a terminal (stderr redirected to a file or a pipe), print a progress line to
    /// stderr every SECONDS (default 10, or the environment variable
    /// TESSERA_PROGRESS_EVERY); 0 prints none. On a terminal a bar is drawn instead.
    #[arg(long, value_name = "SECONDS", global = true, value_parser = parse_seconds)]
    pub progress_every: Option<f64>,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "expected a number of seconds (0 or more), found '{s}'"
        )),
    }
}

/// How progress is shown in this process.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Show {
    Off,
    Bar,
    Lines(Duration),
}

static SHOW: OnceLock<Show> = OnceLock::new();

/// Decides, once, how this process shows progress: from the options, the environment and
/// whether stderr is a terminal; never on `other_rank` (an MPI rank other than 0). A bad
/// `TESSERA_PROGRESS_EVERY` is an error.
pub fn init(a: &ProgressArgs, other_rank: bool) -> anyhow::Result<()> {
    let env = std::env::var(EVERY_VAR).ok();
    let show = decide(
        a,
        other_rank,
        std::io::stderr().is_terminal(),
        env.as_deref(),
    )?;
    let _ = SHOW.set(show);
    Ok(())
}

/// [`init`]'s decision, given whether stderr is a terminal and the variable's value.
fn decide(
    a: &ProgressArgs,
    other_rank: bool,
    tty: bool,
    env: Option<&str>,
) -> anyhow::Result<Show> {
    let every = match (a.progress_every, env) {
        (Some(v), _) => v,
        (None, Some(v)) if !v.trim().is_empty() => {
            parse_seconds(v).map_err(|e| anyhow::anyhow!("{EVERY_VAR}: {e}"))?
        }
        _ => DEFAULT_EVERY_S,
    };
    Ok(if a.quiet || other_rank {
        Show::Off
    } else if tty {
        Show::Bar
    } else if every > 0.0 {
        Show::Lines(Duration::try_from_secs_f64(every).unwrap_or(Duration::MAX))
    } else {
        Show::Off
    })
}

/// Whether progress is shown at all (a run that is not shown need not pause).
pub fn enabled() -> bool {
    !matches!(show(), Show::Off)
}

fn show() -> Show {
    *SHOW.get().unwrap_or(&Show::Off)
}

/// What is counted: the bar's and the lines' wording.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    Ctas,
    Kernels,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Ctas => "CTAs",
            Unit::Kernels => "kernels",
        }
    }
}

enum Kind {
    Off,
    Bar(ProgressBar),
    Lines { every: Duration, last: Instant },
}

/// The progress of a run: the share of the trace's CTAs completed, with the simulated
/// time, kernels done and the rate, from the reports of `tessera_system`'s paused engine.
pub struct RunBar {
    bar: Progress,
    t0: Instant,
}

impl RunBar {
    /// For a run of `trace` that started at `t0`.
    pub fn new(trace: &tessera_traces::TraceFile, t0: Instant) -> RunBar {
        let ctas: u64 = trace.kernels().iter().map(|k| k.counts.ctas).sum();
        RunBar {
            bar: Progress::new("run", Some(ctas), Unit::Ctas),
            t0,
        }
    }

    /// One report of the paused engine.
    pub fn report(&mut self, p: tessera_system::GpuProgress) {
        let t0 = self.t0;
        self.bar.update(p.ctas_done, || {
            let secs = t0.elapsed().as_secs_f64().max(1e-9);
            format!(
                "{:.1} us simulated, kernel {} of {} done, {:.2} M warp instructions/s",
                p.sim_ps as f64 / 1e6,
                p.kernels_done,
                p.kernels,
                p.warp_insts as f64 / 1e6 / secs
            )
        });
    }

    /// The end: `ctas` completed when the run succeeded.
    pub fn finish(mut self, ctas: Option<u64>) {
        if let Some(c) = ctas {
            self.bar.update(c, || "done".to_string());
        }
        self.bar.finish();
    }
}

/// One command's progress: `update` as often as convenient (the bar redraws a few times a
/// second, lines come every interval), `finish` at the end.
pub struct Progress {
    what: &'static str,
    unit: Unit,
    total: Option<u64>,
    t0: Instant,
    kind: Kind,
    /// The heartbeat thread of a progress of unknown share (see [`Progress::heartbeat`]).
    ticker: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Progress {
    /// A progress of `done` out of `total` (`None`: not known, a spinner and the detail
    /// only), labeled `what` ("run", "import").
    pub fn new(what: &'static str, total: Option<u64>, unit: Unit) -> Progress {
        let kind = match show() {
            Show::Off => Kind::Off,
            Show::Lines(every) => Kind::Lines {
                every,
                last: Instant::now(),
            },
            Show::Bar => Kind::Bar(bar(what, total, unit)),
        };
        Progress {
            what,
            unit,
            total,
            t0: Instant::now(),
            kind,
            ticker: None,
        }
    }

    /// A progress nothing is counted for: no updates will come (a run whose engine cannot
    /// pause to be read, a workload being recorded), so the time elapsed is shown on its own
    /// (a spinner on a terminal, a line every interval off one) until `finish`.
    pub fn heartbeat(what: &'static str, detail: String) -> Progress {
        let mut p = Progress::new(what, None, Unit::Ctas);
        match &p.kind {
            Kind::Off => {}
            Kind::Bar(b) => {
                b.set_message(detail);
                b.enable_steady_tick(Duration::from_millis(200));
            }
            Kind::Lines { every, .. } => {
                let (tx, rx) = mpsc::channel::<()>();
                let (every, t0) = (*every, p.t0);
                let handle = std::thread::spawn(move || {
                    // Ends when the sender is dropped (or sends).
                    while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                        line(&format!(
                            "{what}: {detail}, {} elapsed",
                            HumanDuration(t0.elapsed())
                        ));
                    }
                });
                p.ticker = Some((tx, handle));
            }
        }
        p
    }

    /// `done` of the total so far; `detail` (called only when shown) says the rest.
    pub fn update(&mut self, done: u64, detail: impl FnOnce() -> String) {
        match &mut self.kind {
            Kind::Off => {}
            Kind::Bar(b) => {
                b.set_position(done);
                if b.is_hidden() {
                    return;
                }
                b.set_message(detail());
            }
            Kind::Lines { every, last } => {
                if last.elapsed() < *every {
                    return;
                }
                *last = Instant::now();
                let elapsed = self.t0.elapsed();
                let share = match self.total {
                    Some(t) => {
                        let eta = if done > 0 && done <= t {
                            let left = elapsed.as_secs_f64() * (t - done) as f64 / done as f64;
                            let left = Duration::try_from_secs_f64(left).unwrap_or(Duration::MAX);
                            format!(", ETA {}", HumanDuration(left))
                        } else {
                            String::new()
                        };
                        format!(
                            "{:.1}% ({done} of {t} {}), {}, {} elapsed{eta}",
                            100.0 * done as f64 / t.max(1) as f64,
                            self.unit.name(),
                            detail(),
                            secs(elapsed)
                        )
                    }
                    None => format!("{}, {} elapsed", detail(), secs(elapsed)),
                };
                line(&format!("{}: {share}", self.what));
            }
        }
    }

    /// The end: a bar stays drawn at its last state (complete when the command was), a
    /// spinner is cleared, the heartbeat stops.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some((tx, handle)) = self.ticker.take() {
            let _ = tx.send(());
            let _ = handle.join();
        }
        if let Kind::Bar(b) = &self.kind {
            if self.total.is_none() {
                // A spinner says nothing once done.
                b.finish_and_clear();
            } else if !b.is_finished() {
                // The bar stays, its line ended: the summary follows on lines of its own.
                b.abandon();
                if !b.is_hidden() {
                    eprintln!();
                }
            }
        }
        self.kind = Kind::Off;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A time in a progress line: `12.3 s`, or `1:02:03` from a minute on.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        let t = d.as_secs();
        format!("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
    }
}

fn bar(what: &'static str, total: Option<u64>, unit: Unit) -> ProgressBar {
    let target = ProgressDrawTarget::stderr_with_hz(4);
    match total {
        Some(t) => {
            let b = ProgressBar::with_draw_target(Some(t), target);
            let template = format!(
                "{what} {{bar:24}} {{percent:>3}}% {{pos}}/{{len}} {} [{{elapsed}}, ETA {{eta}}] {{wide_msg}}",
                unit.name()
            );
            if let Ok(s) = ProgressStyle::with_template(&template) {
                b.set_style(s.progress_chars("=> "));
            }
            b
        }
        None => {
            let b = ProgressBar::with_draw_target(None, target);
            let template = format!("{what} {{spinner}} [{{elapsed}}] {{wide_msg}}");
            if let Ok(s) = ProgressStyle::with_template(&template) {
                b.set_style(s);
            }
            b
        }
    }
}

/// Writes `text` and a newline to stderr in one write: `eprintln!` writes its pieces one
/// by one, which a launcher tagging each write of a rank (Open MPI's `--tag-output`) splits.
fn line(text: &str) {
    use std::io::Write;
    let mut l = String::with_capacity(text.len() + 1);
    l.push_str(text);
    l.push('\n');
    let _ = std::io::stderr().write_all(l.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse() {
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        assert_eq!(parse_seconds(" 10 "), Ok(10.0));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("inf").is_err());
        assert!(parse_seconds("NaN").is_err());
        assert!(parse_seconds("ten").is_err());
    }

    #[test]
    fn terminal_lines_quiet_and_ranks() {
        let a = |quiet, every| ProgressArgs {
            quiet,
            progress_every: every,
        };
        let d = |a: &ProgressArgs, rank, tty, env| decide(a, rank, tty, env).ok();
        assert_eq!(d(&a(false, None), false, true, None), Some(Show::Bar));
        let ten = Some(Show::Lines(Duration::from_secs(10)));
        assert_eq!(d(&a(false, None), false, false, None), ten);
        let half = Some(Show::Lines(Duration::from_millis(500)));
        assert_eq!(d(&a(false, None), false, false, Some("0.5")), half);
        // The option wins over the variable; 0 turns lines off.
        assert_eq!(d(&a(false, Some(0.5)), false, false, Some("3")), half);
        assert_eq!(d(&a(false, Some(0.0)), false, false, None), Some(Show::Off));
        // --quiet, and every MPI rank but 0, show nothing, terminal or not.
        assert_eq!(d(&a(true, None), false, true, None), Some(Show::Off));
        assert_eq!(d(&a(false, None), true, true, None), Some(Show::Off));
        assert_eq!(d(&a(false, None), true, false, None), Some(Show::Off));
        assert!(decide(&a(false, None), false, false, Some("x")).is_err());
        // A huge interval is no panic.
        assert_eq!(
            d(&a(false, Some(1e300)), false, false, None),
            Some(Show::Lines(Duration::MAX))
        );
    }

    #[test]
    fn times_read_as_seconds_then_clock_time() {
        assert_eq!(secs(Duration::from_millis(12_345)), "12.3 s");
        assert_eq!(secs(Duration::from_secs(3723)), "1:02:03");
    }
}
