//! `steerd top`: where receive work runs now, live, without the daemon.
//!
//! Why: packet processing is charged to whatever was running, so `top` shows a process
//! busy while the CPU's time went to softirqs, and nothing shows which NIC queue's vector
//! fires where or which queues RPS spreads. This view reads the daemon's own samplers
//! ([`sample`]) and shows, per CPU, the irq+softirq share, softnet work, drops and
//! squeezes and the queue vectors firing there; per receive queue, its packets and bytes,
//! its vector's CPUs and its RPS mask; and, when a daemon answers, its last decisions.
//!
//! The parts: [`sample`] (I/O, one frame's readings), [`settings`] (the affinities and
//! RPS masks re-read between discoveries), [`frame`] (the pure data of one frame, also
//! the JSON of docs/top-json.md), [`text`] (`--once` and non-terminal output) and [`tui`]
//! (the live screen).

pub mod frame;
pub mod sample;
pub mod settings;
pub mod text;
pub mod tui;
pub mod units;

use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::Format;
use crate::root::Root;

pub use frame::{DaemonView, Frame};
pub use sample::TopSampler;

/// What the command line asked for.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Time between frames; `--once` and JSON sample over one interval.
    pub interval: Duration,
    /// One text frame and exit.
    pub once: bool,
    pub format: Format,
    /// Where a running daemon may answer with its decisions.
    pub metrics_listen: SocketAddr,
}

/// Why `steerd top` stopped, printed as `steerd: <message>`: each names the file or the
/// terminal that failed and, where there is something to do, says what.
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    /// Discovery (devices, queues, IRQs) failed, at the start or when run again.
    #[error("cannot read the machine under {}: {source}; is --root right?", root.display())]
    Machine { root: PathBuf, source: crate::Error },
    /// The per-tick counters (`proc/stat`, `proc/net/softnet_stat`) cannot be opened.
    #[error(
        "cannot read the counters under {}: {source}; is --root right?",
        root.display()
    )]
    OpenCounters { root: PathBuf, source: crate::Error },
    /// The per-tick counters opened at the start can no longer be read (the root went
    /// away).
    #[error("cannot sample the counters: {0}")]
    Counters(#[source] crate::Error),
    /// The live view cannot take the terminal (raw mode, the alternate screen).
    #[error(
        "cannot set up the terminal: {0}; without the live view, `steerd top --once` prints \
         one frame and `steerd top | cat` a frame every interval"
    )]
    TerminalSetup(#[source] io::Error),
    #[error("cannot draw on the terminal: {0}")]
    Draw(#[source] io::Error),
    #[error("cannot read the terminal: {0}")]
    ReadTerminal(#[source] io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
}

/// Runs `steerd top`.
pub fn run(root: &Root, options: &Options) -> Result<(), TopError> {
    let mut sampler = TopSampler::open(root)?;
    let stdout = io::stdout();
    if options.format == Format::Json {
        let frame = one_frame(&mut sampler, options)?;
        let json = serde_json::to_string_pretty(&frame)?;
        return print(&format!("{json}\n")).map(drop);
    }
    if options.once {
        let frame = one_frame(&mut sampler, options)?;
        let limits = match (stdout.is_terminal(), terminal_size()) {
            (true, Some((width, height))) => text::Limits::fit(&frame, width, height),
            _ => text::Limits::ALL,
        };
        return print(&text::render(&frame, &limits)).map(drop);
    }
    if stdout.is_terminal() {
        return tui::run(
            &mut sampler,
            options.interval,
            options.metrics_listen,
            tui::color_wanted(),
        );
    }
    // Not a terminal: a text frame every interval, as `top -b` does, until the reader
    // goes away; a blank line between frames.
    let mut separator = "";
    loop {
        let frame = one_frame(&mut sampler, options)?;
        let rendered = text::render(&frame, &text::Limits::ALL);
        if !print(&format!("{separator}{rendered}"))? {
            return Ok(());
        }
        separator = "\n";
    }
}

/// Waits one interval, samples, and builds the frame with the daemon's decisions.
fn one_frame(sampler: &mut TopSampler, options: &Options) -> Result<Frame, TopError> {
    std::thread::sleep(options.interval);
    sampler.sample()?;
    Ok(sampler.frame(daemon_view(options.metrics_listen)))
}

/// The running daemon's recent decisions, or `None` when nothing answers at `addr`.
pub fn daemon_view(addr: SocketAddr) -> Option<DaemonView> {
    let decisions = crate::status::fetch_decisions(addr).ok()?;
    let from = decisions.len().saturating_sub(frame::RECENT_DECISIONS);
    Some(DaemonView {
        address: addr.to_string(),
        decisions: decisions[from..].to_vec(),
    })
}

/// The terminal's size, if standard output is one.
fn terminal_size() -> Option<(u16, u16)> {
    ratatui::crossterm::terminal::size().ok()
}

/// Prints `text` as it is; `Ok(false)` when the reader went away (`| head`), which ends
/// the output quietly as for any Unix filter.
fn print(text: &str) -> Result<bool, TopError> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(TopError::Output(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_root_and_say_what_to_do() {
        let missing = std::io::Error::from(io::ErrorKind::NotFound);
        let machine = TopError::Machine {
            root: PathBuf::from("/srv/tree"),
            source: crate::Error::io("/srv/tree/sys/devices/system/cpu/online", missing),
        };
        assert_eq!(
            machine.to_string(),
            "cannot read the machine under /srv/tree: \
             /srv/tree/sys/devices/system/cpu/online: entity not found; is --root right?"
        );
        assert!(std::error::Error::source(&machine).is_some());
        let terminal = TopError::TerminalSetup(io::Error::from(io::ErrorKind::NotFound));
        assert!(
            terminal
                .to_string()
                .starts_with("cannot set up the terminal: entity not found; "),
            "{terminal}"
        );
        assert!(
            terminal.to_string().contains("steerd top --once"),
            "{terminal}"
        );
    }
}
