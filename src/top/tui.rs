//! The live view of `steerd top`: a full-screen terminal UI (ratatui over crossterm) that
//! redraws every interval and at once when the window is resized, and quits on `q`, `Esc`
//! or Ctrl-C.
//!
//! Why crossterm: it drives any terminal through escape sequences on the tty, so the view
//! works over SSH and in tmux as on a console. The terminal is put back (raw mode off,
//! main screen back, cursor shown) on every way out: a normal quit, an error (the guard's
//! `Drop`), a panic (ratatui's panic hook restores before the message prints), SIGTERM
//! and SIGHUP (caught and turned into a quit).
//!
//! Colour only marks hot CPUs and drops; it is left out when `NO_COLOR` is set or `TERM`
//! is `dumb`. (When standard output is not a terminal this view is not used at all: see
//! [`super::text`].)

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::Frame as Screen;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};

use super::TopError;
use super::frame::{CpuRow, Frame, QueueRow};
use super::sample::TopSampler;
use super::text::{CPU_COLUMNS, QUEUE_COLUMNS, cpu_cells, header, queue_cells};

/// Set by SIGTERM or SIGHUP: leave the loop and restore the terminal.
static STOP: AtomicBool = AtomicBool::new(false);

/// The longest the loop waits for a key before looking at [`STOP`] again.
const KEY_WAIT: Duration = Duration::from_millis(200);

/// Whether to use colour: not when `NO_COLOR` is set (to anything but the empty string,
/// <https://no-color.org>) or the terminal is `dumb`.
pub fn color_wanted() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    !(no_color || dumb)
}

/// Puts the terminal back when dropped, whatever way the view ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

extern "C" fn request_stop(_: nix::libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGTERM and SIGHUP (the SSH session or the terminal went away) end the view like `q`.
fn catch_stop_signals() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(request_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        let _ = unsafe { sigaction(signal, &action) };
    }
}

/// What the terminal has for the view after a wait.
enum TerminalInput {
    Nothing,
    Ready,
    /// Hung up or closed: nobody can see the view or quit it any more.
    Gone,
}

/// Waits up to `wait` for input on the terminal (standard input), without reading it.
fn terminal_input(wait: Duration) -> TerminalInput {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, timeout) {
        Ok(0) => TerminalInput::Nothing,
        Ok(_) => {
            let events = fds[0].revents().unwrap_or(PollFlags::empty());
            if events.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) {
                TerminalInput::Gone
            } else {
                TerminalInput::Ready
            }
        }
        // A signal (SIGWINCH, or SIGTERM/SIGHUP, which set STOP): look again.
        Err(nix::errno::Errno::EINTR) => TerminalInput::Ready,
        Err(_) => TerminalInput::Gone,
    }
}

/// Whether a key ends the view.
fn quits(key: &KeyEvent) -> bool {
    key.kind == KeyEventKind::Press
        && match key.code {
            KeyCode::Char('q' | 'Q') | KeyCode::Esc => true,
            KeyCode::Char('c') => key.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        }
}

/// Runs the live view until a quit key, a stop signal or an error.
pub fn run(
    sampler: &mut TopSampler,
    interval: Duration,
    daemon: SocketAddr,
    color: bool,
) -> Result<(), TopError> {
    let mut terminal = ratatui::try_init().map_err(TopError::TerminalSetup)?;
    let _restore = Restore;
    catch_stop_signals();

    // The first screen comes at once, with the model and no rates yet.
    let mut frame = sampler.frame(None);
    let mut next = Instant::now() + interval;
    loop {
        terminal
            .draw(|screen| draw(screen, &frame, color))
            .map_err(TopError::Draw)?;
        loop {
            if STOP.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            let wait = (next - now).min(KEY_WAIT);
            // Wait on the terminal ourselves first: when it goes away (the tmux pane or
            // SSH session closed) its reads return end-of-file forever, and crossterm's
            // own poll would spin on them (seen: 38 % of a CPU each, for hours).
            match terminal_input(wait) {
                TerminalInput::Gone => return Ok(()),
                TerminalInput::Nothing => continue,
                TerminalInput::Ready => {}
            }
            if !event::poll(Duration::ZERO).map_err(TopError::ReadTerminal)? {
                continue;
            }
            match event::read().map_err(TopError::ReadTerminal)? {
                Event::Key(key) if quits(&key) => return Ok(()),
                Event::Resize(..) => {
                    terminal
                        .draw(|screen| draw(screen, &frame, color))
                        .map_err(TopError::Draw)?;
                }
                _ => {}
            }
        }
        sampler.sample()?;
        frame = sampler.frame(super::daemon_view(daemon));
        let now = Instant::now();
        next += interval;
        if next <= now {
            // A slow sample: the next one a full interval later, never a burst.
            next = now + interval;
        }
    }
}

/// Styles, or none without colour.
struct Palette {
    color: bool,
}

impl Palette {
    fn title(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }

    fn fg(&self, color: Color) -> Style {
        if self.color {
            Style::default().fg(color)
        } else {
            Style::default()
        }
    }

    /// A CPU's share cell: yellow from half its time in irq+softirq, red from 80 %.
    fn share(&self, share: Option<f64>) -> Style {
        match share {
            Some(s) if s >= 0.8 => self.fg(Color::Red),
            Some(s) if s >= 0.5 => self.fg(Color::Yellow),
            _ => Style::default(),
        }
    }

    /// A distress cell (drops, squeezes): red when not zero.
    fn distress(&self, rate: Option<f64>) -> Style {
        match rate {
            Some(r) if r > 0.0 => self.fg(Color::Red),
            _ => Style::default(),
        }
    }
}

/// Lays one frame out on the screen: the header, the CPUs, the queues, the decisions.
pub fn draw(screen: &mut Screen<'_>, frame: &Frame, color: bool) {
    let palette = Palette { color };
    let area = screen.area();
    let decisions = frame
        .daemon
        .as_ref()
        .map_or(0, |d| (d.decisions.len().clamp(1, 8) + 2) as u16);
    let warnings = u16::from(!frame.warnings.is_empty());
    let [top, body, bottom, warning] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Fill(1),
        Constraint::Length(decisions),
        Constraint::Length(warnings),
    ])
    .areas(area);
    // The queues get what they need up to two fifths of the body; the CPUs the rest.
    let queue_height = (frame.queues.len() as u16 + 3).min((body.height * 2 / 5).max(4));
    let [cpus, queues] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(queue_height)]).areas(body);

    let note = match &frame.queue_rates_unknown {
        Some(why) => format!("queue pkts/s and bytes/s unknown: {why}"),
        None => "queue pkts/s and bytes/s: netdev qstats or ethtool -S".to_string(),
    };
    screen.render_widget(
        Paragraph::new(vec![
            Line::styled(format!("{}   q quits", header(frame)), palette.title()),
            Line::raw(note),
        ]),
        top,
    );
    draw_cpus(screen, cpus, frame, &palette);
    draw_queues(screen, queues, frame, &palette);
    if let Some(daemon) = &frame.daemon {
        let shown = usize::from(bottom.height.saturating_sub(2));
        let from = daemon.decisions.len().saturating_sub(shown);
        let mut lines: Vec<Line> = daemon.decisions[from..]
            .iter()
            .map(|d| {
                Line::raw(format!(
                    "tick {}  {}  {} -> {}  [{}: {}] {}",
                    d.tick, d.target, d.old, d.new, d.reason, d.detail, d.outcome
                ))
            })
            .collect();
        if lines.is_empty() {
            lines.push(Line::raw("no decisions yet"));
        }
        screen.render_widget(
            Paragraph::new(lines).block(
                Block::bordered()
                    .title(format!(
                        " Recent decisions of steerd at {} ",
                        daemon.address
                    ))
                    .title_style(palette.title()),
            ),
            bottom,
        );
    }
    if let Some(first) = frame.warnings.first() {
        screen.render_widget(
            Paragraph::new(Line::styled(
                format!("warning: {first}"),
                palette.fg(Color::Yellow),
            )),
            warning,
        );
    }
}

/// How many table rows fit in `area`: its height less the borders and the column titles.
fn rows_that_fit(area: Rect) -> usize {
    usize::from(area.height.saturating_sub(3))
}

/// A title saying how much of a list is shown.
fn shown_title(what: &str, shown: usize, total: usize) -> String {
    if shown < total {
        format!(
            " {what}, busiest first: {shown} of {total}, {} hidden ",
            total - shown
        )
    } else {
        format!(" {what}, busiest first: all {total} ")
    }
}

fn right(text: String) -> Cell<'static> {
    Cell::from(Line::from(text).alignment(Alignment::Right))
}

fn draw_cpus(screen: &mut Screen<'_>, area: Rect, frame: &Frame, palette: &Palette) {
    let shown = rows_that_fit(area).min(frame.cpus.len());
    let rows = frame.cpus[..shown].iter().map(|row: &CpuRow| {
        let [cpu, share, busy, pkts, drops, squeezes, vectors] = cpu_cells(row);
        Row::new([
            right(cpu),
            right(share).style(palette.share(row.net_share)),
            right(busy),
            right(pkts),
            right(drops).style(palette.distress(row.dropped_per_sec)),
            right(squeezes).style(palette.distress(row.squeezed_per_sec)),
            Cell::from(vectors),
        ])
    });
    let widths = [
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Fill(1),
    ];
    let left: Vec<usize> = CPU_COLUMNS
        .iter()
        .enumerate()
        .filter(|(_, t)| t.starts_with("QUEUE"))
        .map(|(index, _)| index)
        .collect();
    let title = shown_title("CPUs", shown, frame.cpus.len());
    render_table(
        screen,
        area,
        palette,
        rows,
        widths,
        (&CPU_COLUMNS, &left),
        title,
    );
}

/// The width of a cpulist cell (`-` when unknown, `off` when empty).
fn cpulist_width(list: &Option<String>) -> usize {
    list.as_deref().map_or(1, |l| l.len().max(3))
}

fn draw_queues(screen: &mut Screen<'_>, area: Rect, frame: &Frame, palette: &Palette) {
    let shown = rows_that_fit(area).min(frame.queues.len());
    let rows = frame.queues[..shown].iter().map(|row| {
        let [
            device,
            queue,
            irq,
            irq_cpus,
            irqs,
            napi_cpu,
            rps,
            pkts,
            bytes,
        ] = queue_cells(row);
        Row::new([
            Cell::from(device),
            right(queue),
            right(irq),
            Cell::from(irq_cpus),
            right(irqs),
            right(napi_cpu),
            Cell::from(rps),
            right(pkts),
            right(bytes),
        ])
    });
    // Columns as wide as their widest shown cell (cpulists may be long: at most 24).
    let widest = |cell: fn(&QueueRow) -> usize, least: usize, most: usize| {
        let widest = frame.queues[..shown].iter().map(cell).max().unwrap_or(0);
        widest.clamp(least, most) as u16
    };
    let widths = [
        Constraint::Length(widest(|q| q.device.chars().count(), 6, 16)),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(widest(|q| cpulist_width(&q.irq_cpus), 8, 24)),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(widest(|q| cpulist_width(&q.rps_cpus), 8, 24)),
        Constraint::Length(7),
        Constraint::Length(8),
    ];
    let title = shown_title("NIC receive queues", shown, frame.queues.len());
    render_table(
        screen,
        area,
        palette,
        rows,
        widths,
        (&QUEUE_COLUMNS, &[0, 3, 6]),
        title,
    );
}

/// A bordered table with a header row: the columns numbered in `left` are left-aligned
/// (names, lists), the others right-aligned (numbers).
fn render_table<'a>(
    screen: &mut Screen<'_>,
    area: Rect,
    palette: &Palette,
    rows: impl IntoIterator<Item = Row<'a>>,
    widths: impl IntoIterator<Item = Constraint>,
    (columns, left): (&[&'static str], &[usize]),
    title: String,
) {
    let titles = Row::new(columns.iter().enumerate().map(|(index, t)| {
        if left.contains(&index) {
            Cell::from(*t)
        } else {
            right(t.to_string())
        }
    }))
    .style(palette.title());
    screen.render_widget(
        Table::new(rows, widths)
            .header(titles)
            .block(Block::bordered().title(title).title_style(palette.title())),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use crate::top::frame::VectorRow;

    fn frame(cpus: u32) -> Frame {
        Frame {
            schema_version: 1,
            root: "/fake".into(),
            interval_secs: 1.0,
            cpus_online: cpus as usize,
            cpus: (0..cpus)
                .map(|cpu| CpuRow {
                    cpu,
                    net_share: Some(0.9 - f64::from(cpu) / 100.0),
                    busy_share: Some(0.95),
                    processed_per_sec: Some(1e5),
                    dropped_per_sec: Some(0.0),
                    squeezed_per_sec: Some(2.0),
                    vectors: vec![VectorRow {
                        irq: 40 + cpu,
                        device: "eth0".into(),
                        queue: Some(cpu),
                        role: crate::model::inventory::IrqRole::Rxtx,
                        per_sec: Some(1000.0),
                        shared: false,
                    }],
                })
                .collect(),
            queues: vec![QueueRow {
                device: "eth0".into(),
                queue: 0,
                irq: Some(40),
                irq_cpus: Some("0".into()),
                irq_per_sec: Some(1000.0),
                napi_thread_pid: None,
                napi_thread_cpu: None,
                rps_cpus: Some(String::new()),
                packets_per_sec: None,
                bytes_per_sec: None,
                silent: false,
            }],
            queue_rates_unknown: Some("a fake root".into()),
            daemon: None,
            warnings: Vec::new(),
        }
    }

    fn screen_text(frame: &Frame, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|s| draw(s, frame, false)).unwrap();
        let buffer = terminal.backend().buffer();
        let mut text = String::new();
        for y in 0..height {
            for x in 0..width {
                text.push_str(buffer[(x, y)].symbol());
            }
            text.push('\n');
        }
        text
    }

    #[test]
    fn a_small_screen_shows_the_busiest_cpus_and_says_how_many_are_hidden() {
        let frame = frame(50);
        let text = screen_text(&frame, 100, 20);
        assert!(text.contains("q quits"), "{text}");
        assert!(text.contains("hidden"), "{text}");
        assert!(text.contains("eth0:0 1.00k"), "{text}");
        let big = screen_text(&frame, 120, 80);
        assert!(big.contains("all 50"), "{big}");
    }

    #[test]
    fn quit_keys() {
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        assert!(quits(&key(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(quits(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!quits(&key(KeyCode::Char('c'), KeyModifiers::NONE)));
    }
}
