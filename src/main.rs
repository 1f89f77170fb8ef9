//! The steerd command line. Only argument handling lives here; everything else is in the
//! library.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

use steerd::Root;
use steerd::cli::{Cli, Command, Format};
use steerd::config::{Config, check_config, check_config_for};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = Root::new(&cli.root);
    match run(&cli, &root) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("steerd: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli, root: &Root) -> Result<ExitCode, CommandError> {
    match &cli.command {
        Command::Inspect { format } => {
            let machine = discover(root)?;
            let counts = steerd::inspect::QueueCounts::read(root, &machine);
            let rss = steerd::inspect::RssReadings::read(root, &machine);
            let text = match format {
                Format::Text => steerd::inspect::to_text(&machine, &counts, &rss),
                Format::Json => {
                    steerd::inspect::to_json(&machine, &cli.root.to_string_lossy(), &counts, &rss)
                }
            };
            print_out(&text)
        }
        Command::Plan {
            config,
            window,
            format,
        } => {
            let config = match config {
                Some(path) => read_config(path, root)?,
                None => Config::default(),
            };
            let plan = steerd::plan_once::plan(root, &config, *window)?;
            let text = match format {
                Format::Text => format!(
                    "{plan}\nThis plan comes from one {} sample. The running daemon acts only on \
                     a condition that lasts several ticks (hysteresis.confirm_ticks).",
                    humantime::format_duration(*window)
                ),
                Format::Json => serde_json::to_string_pretty(&plan)?,
            };
            print_out(&text)
        }
        Command::CheckConfig { file } => {
            let text = steerd::config::read_config_file(file)?;
            // Check CPU lists against this machine when it can be read; else the schema only.
            let checked = match steerd::discover::discover(root) {
                Ok(machine) => check_config_for(&text, &machine.topology),
                Err(_) => check_config(&text),
            };
            match checked {
                Ok(_) => {
                    print_out(&format!("{}: ok", file.display()))?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(errors) => {
                    for error in &errors {
                        eprintln!("{}: {error}", file.display());
                    }
                    eprintln!("{}: {} error(s)", file.display(), errors.len());
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Run {
            config,
            watch_config,
            dry_run,
            interval,
            metrics_listen,
            state_file,
        } => {
            let exec_error = steerd::memory::without_thread_cache();
            init_logging();
            if let Some(error) = exec_error {
                tracing::debug!(%error, "could not run again without glibc's thread cache; running with it");
            }
            steerd::daemon::run(steerd::daemon::Options {
                root: root.clone(),
                config_path: config.clone(),
                watch_config: *watch_config,
                dry_run: *dry_run,
                interval: *interval,
                metrics_listen: *metrics_listen,
                state_file: state_file.clone(),
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor {
            metrics_listen,
            format,
        } => {
            let report = steerd::doctor::run(root, DOCTOR_WINDOW, Some(*metrics_listen)).map_err(
                |source| CommandError::Discovery {
                    root: root.path(""),
                    source,
                },
            )?;
            let text = match format {
                Format::Json => serde_json::to_string_pretty(&report)?,
                Format::Text => report.to_text(),
            };
            print_out(&text)?;
            Ok(ExitCode::from(report.exit_code()))
        }
        Command::Top {
            interval,
            once,
            format,
            metrics_listen,
        } => {
            let options = steerd::top::Options {
                interval: *interval,
                once: *once,
                format: *format,
                metrics_listen: *metrics_listen,
            };
            steerd::top::run(root, &options)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status {
            metrics_listen,
            format,
        } => {
            let report = match steerd::status::fetch_status(*metrics_listen) {
                Ok(report) => report,
                Err(message) => {
                    eprintln!("steerd: {message}");
                    return Ok(ExitCode::from(steerd::status::UNREACHABLE));
                }
            };
            let text = match format {
                Format::Json => serde_json::to_string_pretty(&report)?,
                Format::Text => report.to_text(steerd::status::RECENT_DECISIONS),
            };
            print_out(&text)?;
            Ok(ExitCode::from(report.exit_code()))
        }
    }
}

/// Why a command failed, printed as `steerd: <message>`: the library's typed errors, each
/// saying what to check.
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error("cannot read the machine under {}: {source}; is --root right?", root.display())]
    Discovery {
        root: std::path::PathBuf,
        source: steerd::Error,
    },
    #[error(transparent)]
    Kernel(#[from] steerd::Error),
    #[error(transparent)]
    ConfigFile(#[from] steerd::config::ConfigFileError),
    /// Every problem of a configuration file, one per line.
    #[error("{}", .0.join("\n"))]
    Config(Vec<String>),
    #[error(transparent)]
    Daemon(#[from] steerd::daemon::StartError),
    #[error(transparent)]
    Top(#[from] steerd::top::TopError),
    #[error("cannot encode the JSON output: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
}

/// Discovers the machine under `root`, or says which root could not be read.
fn discover(root: &Root) -> Result<steerd::discover::Machine, CommandError> {
    steerd::discover::discover(root).map_err(|source| CommandError::Discovery {
        root: root.path(""),
        source,
    })
}

/// How long `steerd doctor` watches the counters: long enough for a rate, short enough
/// to wait for.
const DOCTOR_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads and checks a config file for a one-shot command; every error is printed.
fn read_config(path: &std::path::Path, root: &Root) -> Result<Config, CommandError> {
    let text = steerd::config::read_config_file(path)?;
    let checked = match steerd::discover::discover(root) {
        Ok(machine) => check_config_for(&text, &machine.topology),
        Err(_) => check_config(&text),
    };
    checked.map_err(|errors| {
        CommandError::Config(
            errors
                .iter()
                .map(|e| format!("{}: {e}", path.display()))
                .collect(),
        )
    })
}

/// Structured events go to the journal when systemd started us with a journal stream,
/// else human-readable lines go to stderr. `RUST_LOG`-style filtering is not needed: the
/// daemon logs decisions and problems, not chatter.
fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(journald) = tracing_journald::layer()
    {
        let _ = tracing_subscriber::registry()
            .with(journald.with_syslog_identifier("steerd".to_string()))
            .try_init();
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .with_target(false)
        .fmt_fields(steerd::logfmt::MessageFirst)
        .try_init();
}

/// Prints a report. A reader that went away (`steerd inspect | head`) ends the output
/// quietly, as for any Unix filter, instead of panicking.
fn print_out(text: &str) -> Result<ExitCode, CommandError> {
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{}", text.trim_end()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(CommandError::Output(e)),
    }
}
