//! What `steerd status` shows: the daemon's live state, kept by the tick loop, and the
//! report built from it on request (served as JSON at `/status`, rendered as text by the
//! `status` command).
//!
//! Why a module of its own: an operator must tell a healthy idle daemon from a stuck or
//! crippled one, which the decision log alone cannot (an idle daemon decides nothing). The
//! tick loop updates [`LiveStatus`] on every tick, so that update must cost no heap
//! allocation on an idle tick: the last verdict is a small `Copy` value, and its sentence
//! (the one `steerd plan` prints) is rendered only when someone asks.
//!
//! The JSON schema is documented in `docs/status-json.md`.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::decisions::Decision;
use crate::policy::hysteresis::kilo;

/// The version of the `/status` JSON; raised on an incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// How long after a write error the daemon still counts as degraded.
pub const WRITE_ERROR_DEGRADES_FOR_S: f64 = 600.0;

/// Why the tick loop counts as unhealthy: what `/healthz` answers with its 503 and, once
/// the loop has ticked, one of the report's problems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LoopStall {
    /// The daemon serves before its first tick; it has not finished one yet (not a problem
    /// of the report: it has no tick to be late with).
    #[error("no tick yet")]
    NoTickYet,
    /// The last tick ended longer ago than a healthy gap between ticks: the loop is stuck
    /// in a tick (a kernel file or request that does not answer).
    #[error(
        "tick loop stalled: last tick {age_ms} ms ago (limit {limit_ms} ms); the daemon's \
         log (journalctl -u steerd) shows the last thing it did, and systemctl restart \
         steerd starts it again"
    )]
    Stalled { age_ms: u64, limit_ms: u64 },
}

/// The last tick's verdict, cheap to store.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Verdict {
    /// No tick finished yet.
    #[default]
    NoTickYet,
    /// The first sample was taken; rates need a second one.
    Baseline,
    /// Reading the per-tick files failed; the tick was skipped.
    SamplingFailed,
    /// Every CPU was calm and nothing needed deciding (the policy was not run): the same
    /// situation `plan` describes as "no CPU is hot".
    Calm(Calm),
    /// The policy ran and proposed nothing; its reason is in [`LiveStatus::reason`].
    NothingToDo,
    /// The policy proposed this many changes (see the decisions).
    Acted { actions: u32 },
}

/// The numbers of a calm tick's sentence.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Calm {
    pub high_watermark: f64,
    pub imbalance: f64,
    pub busy_pps: f64,
    /// The busiest CPU: number, irq+softirq share, packets/s processed.
    pub busiest: Option<(u32, f64, f64)>,
}

/// Why steerd writes nothing, when it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoWrites {
    /// `--dry-run`: asked for.
    DryRun,
    /// It should steer but cannot (not root, writes not allowed): degraded.
    ObserveOnly(String),
}

/// The daemon's state for `status`, updated by the tick loop.
#[derive(Debug, Clone, Default)]
pub struct LiveStatus {
    pub version: &'static str,
    pub started_unix: f64,
    pub ticks: u64,
    pub last_tick_unix: f64,
    /// The configured tick interval, seconds.
    pub interval_s: f64,
    /// `quiet.interval`, seconds.
    pub quiet_interval_s: f64,
    pub no_writes: Option<NoWrites>,
    /// Since when steerd sleeps in quiet mode (`None`: awake).
    pub quiet_since_unix: Option<f64>,
    /// Why quiet mode is not used, when it is not (configured off, unavailable).
    pub quiet_unavailable: Option<String>,
    pub verdict: Verdict,
    /// The tick the verdict is from.
    pub verdict_tick: u64,
    /// The policy's reason when it ran and proposed nothing (the sentence `plan` prints).
    pub reason: Option<String>,
    /// Writes that failed (transient, not permitted, unexpected), since start.
    pub write_errors: u64,
    /// Values the kernel refused for good (managed IRQs, values it does not take, no free
    /// interrupt vector), since start.
    pub refusals: u64,
    pub last_write_error: Option<String>,
    pub last_write_error_unix: f64,
}

/// Whether the daemon needs attention; also `status`'s exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Exit 0.
    Healthy,
    /// Exit 1: recent write errors, observe-only where it should steer, a stalled loop.
    Degraded,
}

/// The report `/status` serves (schema: docs/status-json.md).
///
/// `D` is the decision log: the records a client reads back, or, in the daemon, a borrow of
/// the log itself, serialized in place (`http::Shared::status_json`) instead of cloned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport<D = Vec<Decision>> {
    pub schema_version: u32,
    pub version: String,
    pub health: Health,
    /// Why degraded, one sentence each (empty when healthy).
    pub problems: Vec<String>,
    pub started_unix: f64,
    pub uptime_s: f64,
    pub ticks: u64,
    pub interval_s: f64,
    /// Seconds since the last tick ended (`null` before the first).
    pub last_tick_age_s: Option<f64>,
    /// `awake` or `quiet`.
    pub mode: String,
    /// Why that mode, in words.
    pub mode_reason: String,
    pub quiet_since_unix: Option<f64>,
    /// `steering`, `dry_run` or `observe_only`.
    pub writes: String,
    /// Why steerd does not write, when it does not.
    pub writes_reason: Option<String>,
    pub last_tick: LastTick,
    pub write_errors: u64,
    pub refusals: u64,
    pub last_write_error: Option<String>,
    /// The decision log, oldest first (the same records as `/decisions`).
    pub decisions: D,
}

/// The last tick's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastTick {
    pub tick: u64,
    /// `no_tick_yet`, `baseline`, `sampling_failed`, `calm`, `nothing_to_do`, `acted`.
    pub verdict: String,
    /// The verdict in words.
    pub reason: String,
}

impl Verdict {
    fn name(&self) -> &'static str {
        match self {
            Verdict::NoTickYet => "no_tick_yet",
            Verdict::Baseline => "baseline",
            Verdict::SamplingFailed => "sampling_failed",
            Verdict::Calm(_) => "calm",
            Verdict::NothingToDo => "nothing_to_do",
            Verdict::Acted { .. } => "acted",
        }
    }
}

/// The sentence `plan` prints when no CPU is hot (shared with the policy, so that both
/// say the same).
pub fn no_cpu_is_hot(
    high_watermark: f64,
    imbalance: f64,
    busy_pps: f64,
    busiest: Option<(u32, f64, f64)>,
) -> String {
    let busiest = match busiest {
        Some((cpu, share, pps)) => format!(
            "; busiest CPU {cpu}: irq+softirq share {share:.2}, {} pkt/s processed",
            kilo(pps)
        ),
        None => String::new(),
    };
    format!(
        "no CPU is hot (high watermark {high_watermark:.2}, imbalance {imbalance:.1}x above {} \
         pkt/s, no drops) and every queue vector is placed by the rules{busiest}",
        kilo(busy_pps)
    )
}

impl LiveStatus {
    /// Records a finished tick (the daemon calls this on every tick: no allocation).
    pub fn record_tick(
        &mut self,
        tick: u64,
        now_unix: f64,
        interval_s: f64,
        quiet_interval_s: f64,
    ) {
        self.ticks = tick;
        self.last_tick_unix = now_unix;
        self.interval_s = interval_s;
        self.quiet_interval_s = quiet_interval_s;
    }

    /// Records a tick's verdict; `reason` is the policy's sentence when it ran. No
    /// allocation: the previous sentence is dropped, the new one was made by the policy.
    pub fn record_verdict(&mut self, verdict: Verdict, tick: u64, reason: Option<String>) {
        self.verdict = verdict;
        self.verdict_tick = tick;
        self.reason = reason;
    }

    /// The report at wall-clock time `now_unix`, with the loop's health (`Err`: why it is
    /// stalled) and the decision log.
    pub fn report(
        &self,
        now_unix: f64,
        loop_health: Result<(), LoopStall>,
        decisions: Vec<Decision>,
    ) -> StatusReport {
        self.report_with(now_unix, loop_health, decisions)
    }

    /// [`LiveStatus::report`] with any form of the decision log: the daemon passes a
    /// borrow of the log, serialized in place.
    pub fn report_with<D>(
        &self,
        now_unix: f64,
        loop_health: Result<(), LoopStall>,
        decisions: D,
    ) -> StatusReport<D> {
        let mut problems = Vec::new();
        if let Err(stalled) = loop_health
            && self.ticks > 0
        {
            problems.push(stalled.to_string());
        }
        if let Some(NoWrites::ObserveOnly(why)) = &self.no_writes {
            problems.push(format!(
                "observe-only: {why}; steerd decides but changes nothing on this machine"
            ));
        }
        if self.write_errors > 0
            && now_unix - self.last_write_error_unix < WRITE_ERROR_DEGRADES_FOR_S
            && let Some(error) = &self.last_write_error
        {
            problems.push(format!(
                "a write failed {} ago: {error}",
                ago(now_unix - self.last_write_error_unix)
            ));
        }
        if self.verdict == Verdict::SamplingFailed {
            problems.push("the last tick could not read the per-tick files (see the log)".into());
        }
        let (mode, mode_reason) = match self.quiet_since_unix {
            Some(since) => (
                "quiet",
                format!(
                    "little receive work (under quiet.wake_after_polls per quiet.interval): \
                     ticking every {}, woken by the kernel when it rises (asleep for {})",
                    secs(self.quiet_interval_s),
                    ago(now_unix - since)
                ),
            ),
            None => (
                "awake",
                match &self.quiet_unavailable {
                    Some(why) => format!(
                        "ticking every {}; quiet mode unavailable: {why}",
                        secs(self.interval_s)
                    ),
                    None => format!(
                        "ticking every {}; goes quiet after a few ticks without receive work",
                        secs(self.interval_s)
                    ),
                },
            ),
        };
        let (writes, writes_reason) = match &self.no_writes {
            None => ("steering", None),
            Some(NoWrites::DryRun) => ("dry_run", Some("--dry-run".to_string())),
            Some(NoWrites::ObserveOnly(why)) => ("observe_only", Some(why.clone())),
        };
        StatusReport {
            schema_version: SCHEMA_VERSION,
            version: self.version.to_string(),
            health: if problems.is_empty() {
                Health::Healthy
            } else {
                Health::Degraded
            },
            problems,
            started_unix: self.started_unix,
            uptime_s: (now_unix - self.started_unix).max(0.0),
            ticks: self.ticks,
            interval_s: self.interval_s,
            last_tick_age_s: (self.ticks > 0).then(|| (now_unix - self.last_tick_unix).max(0.0)),
            mode: mode.to_string(),
            mode_reason,
            quiet_since_unix: self.quiet_since_unix,
            writes: writes.to_string(),
            writes_reason,
            last_tick: LastTick {
                tick: self.verdict_tick,
                verdict: self.verdict.name().to_string(),
                reason: self.verdict_text(),
            },
            write_errors: self.write_errors,
            refusals: self.refusals,
            last_write_error: self.last_write_error.clone(),
            decisions,
        }
    }

    fn verdict_text(&self) -> String {
        match &self.verdict {
            Verdict::NoTickYet => "no tick yet".to_string(),
            Verdict::Baseline => "first sample taken; rates need a second one".to_string(),
            Verdict::SamplingFailed => {
                "sampling failed; the tick was skipped (see the log)".to_string()
            }
            Verdict::Calm(calm) => format!(
                "nothing to do: {}",
                no_cpu_is_hot(
                    calm.high_watermark,
                    calm.imbalance,
                    calm.busy_pps,
                    calm.busiest
                )
            ),
            Verdict::NothingToDo => format!(
                "nothing to do: {}",
                self.reason.as_deref().unwrap_or("no rule fired")
            ),
            Verdict::Acted { actions } => {
                format!("{actions} change(s) decided; see the decisions below")
            }
        }
    }
}

impl StatusReport {
    /// The exit code of `steerd status`: 0 healthy, 1 degraded.
    pub fn exit_code(&self) -> u8 {
        match self.health {
            Health::Healthy => 0,
            Health::Degraded => 1,
        }
    }

    /// The report for people; `recent` decisions at most, newest last.
    pub fn to_text(&self, recent: usize) -> String {
        let mut out = String::new();
        let health = match self.health {
            Health::Healthy => "healthy",
            Health::Degraded => "DEGRADED",
        };
        let _ = writeln!(out, "steerd {}: {health}", self.version);
        for problem in &self.problems {
            let _ = writeln!(out, "  problem: {problem}");
        }
        let _ = writeln!(
            out,
            "uptime:     {} (started {})",
            ago(self.uptime_s),
            humantime::format_rfc3339_seconds(unix_to_system_time(self.started_unix))
        );
        let last = match self.last_tick_age_s {
            Some(age) => format!("last {} ago", ago(age)),
            None => "none yet".to_string(),
        };
        let _ = writeln!(out, "ticks:      {} ({last})", self.ticks);
        let _ = writeln!(out, "mode:       {}: {}", self.mode, self.mode_reason);
        let writes = match (&self.writes_reason, self.writes.as_str()) {
            (Some(why), "dry_run") => {
                format!("dry run ({why}): decides and reports, writes nothing")
            }
            (Some(why), _) => format!("observe-only ({why}): decides and reports, writes nothing"),
            (None, _) => "steering: applies what it decides".to_string(),
        };
        let _ = writeln!(out, "writes:     {writes}");
        let _ = writeln!(
            out,
            "last tick:  {}",
            if self.last_tick.tick > 0 {
                format!("#{}: {}", self.last_tick.tick, self.last_tick.reason)
            } else {
                self.last_tick.reason.clone()
            }
        );
        let _ = write!(
            out,
            "errors:     {} write error(s), {} refusal(s) by the kernel",
            self.write_errors, self.refusals
        );
        match &self.last_write_error {
            Some(last) => {
                let _ = writeln!(out, "; last: {last}");
            }
            None => out.push('\n'),
        }
        let shown = self.decisions.len().min(recent);
        if shown == 0 {
            out.push_str("decisions:  none yet\n");
        } else {
            let _ = writeln!(
                out,
                "decisions:  {} in the log, the last {shown} (newest last):",
                self.decisions.len()
            );
            out.push_str(&crate::decisions::to_text(
                &self.decisions[self.decisions.len() - shown..],
            ));
        }
        out
    }
}

fn unix_to_system_time(unix: f64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(unix.max(0.0))
}

/// `3h 2m 1s`, rounded to whole seconds (under a second: `0.4s`).
fn ago(seconds: f64) -> String {
    let seconds = seconds.max(0.0);
    if seconds < 1.0 {
        return format!("{seconds:.1}s");
    }
    humantime::format_duration(std::time::Duration::from_secs(seconds as u64)).to_string()
}

fn secs(seconds: f64) -> String {
    humantime::format_duration(std::time::Duration::from_secs_f64(seconds.max(0.0))).to_string()
}

/// For tests here and in `doctor`: a calm daemon, a minute old, at its 60th tick of 1 s,
/// seen at unix time 1060.
#[cfg(any(test, feature = "test-support"))]
impl LiveStatus {
    pub fn example() -> LiveStatus {
        LiveStatus {
            version: "0.1.0",
            started_unix: 1000.0,
            ticks: 60,
            last_tick_unix: 1059.5,
            interval_s: 1.0,
            quiet_interval_s: 10.0,
            verdict: Verdict::Calm(Calm {
                high_watermark: 0.6,
                imbalance: 2.0,
                busy_pps: 10_000.0,
                busiest: Some((1, 0.01, 12.0)),
            }),
            verdict_tick: 60,
            ..LiveStatus::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> LiveStatus {
        LiveStatus::example()
    }

    #[test]
    fn an_idle_daemon_is_healthy_and_says_why_it_does_nothing() {
        let report = live().report(1060.0, Ok(()), Vec::new());
        assert_eq!(report.health, Health::Healthy);
        assert_eq!(report.exit_code(), 0);
        let text = report.to_text(10);
        assert!(text.contains("uptime:     1m"), "{text}");
        assert!(text.contains("ticks:      60"), "{text}");
        assert!(text.contains("mode:       awake"), "{text}");
        assert!(
            text.contains("#60: nothing to do: no CPU is hot (high watermark 0.60"),
            "{text}"
        );
        assert!(text.contains("decisions:  none yet"), "{text}");
    }

    #[test]
    fn observe_only_as_non_root_and_recent_write_errors_degrade() {
        let mut live = live();
        live.no_writes = Some(NoWrites::ObserveOnly("not running as root".into()));
        let report = live.report(1060.0, Ok(()), Vec::new());
        assert_eq!(report.exit_code(), 1);
        assert!(report.problems[0].contains("not running as root"));

        let mut live = self::tests::live();
        live.no_writes = Some(NoWrites::DryRun);
        assert_eq!(live.report(1060.0, Ok(()), Vec::new()).exit_code(), 0);
        live.write_errors = 1;
        live.last_write_error = Some("EBUSY".into());
        live.last_write_error_unix = 1050.0;
        assert_eq!(live.report(1060.0, Ok(()), Vec::new()).exit_code(), 1);
        let later = 1050.0 + WRITE_ERROR_DEGRADES_FOR_S + 1.0;
        assert_eq!(live.report(later, Ok(()), Vec::new()).exit_code(), 0);
    }

    #[test]
    fn a_stalled_loop_degrades_and_says_what_to_do_but_no_first_tick_does_not() {
        let stalled = LoopStall::Stalled {
            age_ms: 9000,
            limit_ms: 3000,
        };
        let report = live().report(1060.0, Err(stalled), Vec::new());
        assert_eq!(report.exit_code(), 1);
        assert_eq!(
            report.problems,
            [
                "tick loop stalled: last tick 9000 ms ago (limit 3000 ms); the daemon's log \
                 (journalctl -u steerd) shows the last thing it did, and systemctl restart \
                 steerd starts it again"
            ]
        );
        let starting = LiveStatus::default();
        let report = starting.report(1060.0, Err(LoopStall::NoTickYet), Vec::new());
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }

    #[test]
    fn quiet_says_since_when_and_the_json_round_trips() {
        let mut live = live();
        live.quiet_since_unix = Some(1000.0);
        let report = live.report(1130.0, Ok(()), Vec::new());
        assert_eq!(report.mode, "quiet");
        assert!(
            report.mode_reason.contains("asleep for 2m 10s"),
            "{}",
            report.mode_reason
        );
        let json = serde_json::to_string(&report).unwrap();
        let back: StatusReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, report);
    }
}
