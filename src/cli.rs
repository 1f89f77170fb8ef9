//! The command-line definition, in the library so the man page and shell completions can
//! be generated from the same source as the parser.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// steerd steers NIC receive work: IRQ affinity and RPS/RFS masks, continuously, with
/// hysteresis, and says why.
#[derive(Debug, Parser)]
#[command(name = "steerd", version, about, long_about = None)]
pub struct Cli {
    /// Directory under which `proc/` and `sys/` are found (and written), laid out as the
    /// kernel lays them out.
    #[arg(long, global = true, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the machine model: CPUs, NUMA nodes, network devices, queues and their IRQs,
    /// and each NIC's RSS indirection table (read on the running machine only).
    Inspect {
        /// Output format: tables for people, or JSON for programs (docs/inspect-json.md).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Sample the machine over a window, decide once, and print the plan with its reasons.
    /// Writes nothing.
    Plan {
        /// Configuration file (default: the built-in configuration).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// How long to sample before deciding.
        #[arg(long, value_name = "DUR", default_value = "2s", value_parser = parse_duration)]
        window: Duration,
        /// Output format: the plan with reasons for people, or JSON for programs
        /// (docs/plan-json.md).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Check a configuration file: exit 0 when valid, else print every error with its key
    /// path and line and exit 1.
    CheckConfig {
        /// The file to check.
        file: PathBuf,
    },
    /// Run the daemon: sample every tick, decide, apply, report.
    Run {
        /// Configuration file (default: the built-in configuration). Re-read on SIGHUP.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Also re-read the configuration file whenever it changes (an edit, a rename over
        /// it, a Kubernetes ConfigMap update), as if SIGHUP had been sent.
        #[arg(long, requires = "config")]
        watch_config: bool,
        /// Decide and report everything, write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Tick interval; overrides the configuration's `interval`.
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        interval: Option<Duration>,
        /// Address for the HTTP endpoint: /metrics, /status, /decisions, /healthz.
        #[arg(long, value_name = "ADDR", default_value = crate::metrics::DEFAULT_LISTEN)]
        metrics_listen: SocketAddr,
        /// State file remembering original values (default: run/steerd/state.json under
        /// the root). Locked (FILE.lock beside it) while the daemon runs: a second daemon
        /// with the same state file refuses to start.
        #[arg(long, value_name = "FILE")]
        state_file: Option<PathBuf>,
    },
    /// Check the machine's receive steering (and a running daemon's health, when one
    /// answers) and print each finding: its severity, the evidence measured, why it
    /// matters and the command that fixes it. Samples counters for about a second. Exits 0
    /// with nothing worse than a note, 1 with warnings, 2 with errors.
    Doctor {
        /// Address of a running daemon's HTTP endpoint, asked for its /status (nothing
        /// answering there is a note, not an error).
        #[arg(long, value_name = "ADDR", default_value = crate::metrics::DEFAULT_LISTEN)]
        metrics_listen: SocketAddr,
        /// Output format: findings for people, or JSON for programs (docs/doctor-json.md).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Show live where receive work runs: per CPU the irq+softirq share of its time,
    /// softnet packets processed, drops and squeezes per second and the NIC queue vectors
    /// firing there; per receive queue its packets and bytes per second, its vector's CPUs
    /// and its RPS mask; and a running daemon's recent decisions. Needs no daemon. Quits on
    /// q; plain text when standard output is not a terminal.
    Top {
        /// Time between frames; `--once` and `--format json` sample over one interval.
        #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_duration)]
        interval: Duration,
        /// Print one frame as text and exit.
        #[arg(long)]
        once: bool,
        /// Output format: the live view (or text) for people, or one sample as JSON for
        /// programs (docs/top-json.md).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Address of a running daemon's HTTP endpoint, asked for its recent decisions
        /// (nothing answering there: no decisions shown).
        #[arg(long, value_name = "ADDR", default_value = crate::metrics::DEFAULT_LISTEN)]
        metrics_listen: SocketAddr,
    },
    /// Print a running daemon's state: uptime, ticks, mode and why, the last tick's verdict,
    /// write errors and refusals, then its recent decisions. Exits 0 when healthy, 1 when
    /// degraded, 2 when the daemon cannot be reached.
    Status {
        /// Address of the daemon's HTTP endpoint.
        #[arg(long, value_name = "ADDR", default_value = crate::metrics::DEFAULT_LISTEN)]
        metrics_listen: SocketAddr,
        /// Output format: a report for people, or JSON for programs (docs/status-json.md).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// Why a command-line duration was refused (clap prints it after the option's name).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration humantime reads.
    #[error("{text:?}: {reason} (a duration is a number and a unit: 500ms, 2s, 1m)")]
    NotADuration {
        text: String,
        reason: humantime::DurationError,
    },
    /// Zero: an interval or a window of no time.
    #[error("{text:?}: must be longer than zero (500ms, 2s, 1m)")]
    Zero { text: String },
}

/// Parses durations such as `1s`, `500ms`, `2m`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let duration =
        humantime::parse_duration(text).map_err(|reason| DurationError::NotADuration {
            text: text.to_string(),
            reason,
        })?;
    if duration.is_zero() {
        return Err(DurationError::Zero {
            text: text.to_string(),
        });
    }
    Ok(duration)
}

/// How to print a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// For programs; each command's schema is in its own docs page.
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_refusals_say_what_is_expected() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(
            parse_duration("0s").unwrap_err().to_string(),
            "\"0s\": must be longer than zero (500ms, 2s, 1m)"
        );
        let error = parse_duration("2 parsecs").unwrap_err();
        assert!(
            matches!(&error, DurationError::NotADuration { text, .. } if text == "2 parsecs"),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .ends_with("(a duration is a number and a unit: 500ms, 2s, 1m)"),
            "{error}"
        );
    }
}
