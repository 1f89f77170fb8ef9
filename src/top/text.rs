//! `steerd top` as plain text: the `--once` frame, and every frame when standard output
//! is not a terminal (a pipe, a file, `watch`). No colour and no cursor movement, so the
//! output reads the same in a log as on a screen.
//!
//! On a terminal `--once` fits the frame to the window ([`Limits::fit`]); elsewhere
//! every CPU and queue is printed.

use std::fmt::Write as _;

use super::frame::{CpuRow, Frame, QueueRow, VectorRow};
use super::units::{cpus, fit, percent, rate};
use crate::model::inventory::IrqRole;

/// How many rows of each section to print, and how wide a line may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub cpus: Option<usize>,
    pub queues: Option<usize>,
    pub decisions: usize,
    pub width: Option<usize>,
}

impl Limits {
    /// Everything (for pipes and files), with the last 10 decisions.
    pub const ALL: Limits = Limits {
        cpus: None,
        queues: None,
        decisions: 10,
        width: None,
    };

    /// What fits a `width` × `height` terminal: the fixed lines first, then the rows
    /// left split between CPUs (a little more than half) and queues.
    pub fn fit(frame: &Frame, width: u16, height: u16) -> Limits {
        let decisions = frame
            .daemon
            .as_ref()
            .map_or(0, |d| d.decisions.len().min(5));
        // Header (2), a blank and a title per section, a "more" line per section, the
        // decisions with their title and blank, one warning line, the shell prompt after.
        let fixed = 2 + 3 + 3 + usize::from(decisions > 0) * (2 + decisions) + 1 + 1;
        let rows = usize::from(height).saturating_sub(fixed).max(2);
        let cpu_rows = (rows * 3 / 5).max(1);
        Limits {
            cpus: Some(cpu_rows),
            queues: Some(rows.saturating_sub(cpu_rows).max(1)),
            decisions,
            width: Some(usize::from(width).max(20)),
        }
    }
}

/// The label of a vector in a CPU's list: `eth0:3` for a combined vector, `eth0:rx3` and
/// `eth0:tx3` for separate ones, `eth0` for one serving every queue, with `~` when it may
/// fire on other CPUs too.
pub fn vector_label(vector: &VectorRow) -> String {
    let mut label = vector.device.clone();
    let role = match vector.role {
        IrqRole::Rx => "rx",
        IrqRole::Tx => "tx",
        IrqRole::Rxtx | IrqRole::Other => "",
    };
    if let Some(queue) = vector.queue {
        let _ = write!(label, ":{role}{queue}");
    } else if !role.is_empty() {
        let _ = write!(label, ":{role}");
    }
    if vector.shared {
        label.push('~');
    }
    label
}

/// A CPU's vectors as `eth0:3 12.0k, eth0:7 950`.
pub fn vector_list(row: &CpuRow) -> String {
    let mut out = String::new();
    for (index, vector) in row.vectors.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{} {}", vector_label(vector), rate(vector.per_sec));
    }
    out
}

/// The one-line summary at the top of every form of the frame.
pub fn header(frame: &Frame) -> String {
    let interval = if frame.interval_secs > 0.0 {
        format!("rates over {:.2} s", frame.interval_secs)
    } else {
        "sampling...".to_string()
    };
    format!(
        "steerd top: root {}, {} CPUs online, {} NIC queues, {interval}",
        frame.root,
        frame.cpus_online,
        frame.queues.len()
    )
}

/// The CPU table's column titles and one row, shared with the live view's widths.
pub const CPU_COLUMNS: [&str; 7] = [
    "CPU",
    "IRQ+SI%",
    "BUSY%",
    "PKTS/S",
    "DROPS/S",
    "SQUEEZE/S",
    "QUEUE VECTORS FIRING HERE (INTERRUPTS/S)",
];

/// The cells of one CPU row, in [`CPU_COLUMNS`] order.
pub fn cpu_cells(row: &CpuRow) -> [String; 7] {
    [
        row.cpu.to_string(),
        percent(row.net_share),
        percent(row.busy_share),
        rate(row.processed_per_sec),
        rate(row.dropped_per_sec),
        rate(row.squeezed_per_sec),
        vector_list(row),
    ]
}

/// The queue table's column titles.
pub const QUEUE_COLUMNS: [&str; 9] = [
    "DEVICE", "QUEUE", "IRQ", "IRQ CPUS", "IRQS/S", "NAPI CPU", "RPS CPUS", "PKTS/S", "BYTES/S",
];

/// The cells of one queue row, in [`QUEUE_COLUMNS`] order.
pub fn queue_cells(row: &QueueRow) -> [String; 9] {
    [
        row.device.clone(),
        row.queue.to_string(),
        row.irq
            .map_or_else(|| "-".to_string(), |irq| irq.to_string()),
        cpus(row.irq_cpus.as_deref(), "-"),
        rate(row.irq_per_sec),
        // Where the queue's NAPI thread ran ("-": not threaded, the work is softirq
        // work on the IRQ's CPU).
        row.napi_thread_cpu
            .map_or_else(|| "-".to_string(), |cpu| cpu.to_string()),
        cpus(row.rps_cpus.as_deref(), "off"),
        // A queue the hash or the table stopped feeding says so beside its rate.
        if row.silent {
            format!("{} silent", rate(row.packets_per_sec))
        } else {
            rate(row.packets_per_sec)
        },
        rate(row.bytes_per_sec),
    ]
}

/// Lays cells out in columns as wide as their widest cell (the last column is not
/// padded); numbers right-aligned except in `left` columns.
fn table<const N: usize>(titles: [&str; N], rows: &[[String; N]], left: &[usize]) -> Vec<String> {
    let mut widths = titles.map(|t| t.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if index > 0 {
                out.push_str("  ");
            }
            if index + 1 == N {
                out.push_str(cell);
            } else if left.contains(&index) {
                let _ = write!(out, "{cell:<width$}");
            } else {
                let _ = write!(out, "{cell:>width$}");
            }
        }
        out.trim_end().to_string()
    };
    let mut lines = vec![line(&titles.map(str::to_string))];
    lines.extend(rows.iter().map(|row| line(row)));
    lines
}

/// The frame as text.
pub fn render(frame: &Frame, limits: &Limits) -> String {
    let mut lines = vec![header(frame)];
    match &frame.queue_rates_unknown {
        Some(why) => lines.push(format!("queue packets/s and bytes/s unknown: {why}")),
        None => lines.push(
            "queue packets/s and bytes/s from netdev qstats or ethtool -S; '-' where the \
             driver has no per-queue counter"
                .to_string(),
        ),
    }

    lines.push(String::new());
    let shown = limits.cpus.unwrap_or(usize::MAX).min(frame.cpus.len());
    let rows: Vec<[String; 7]> = frame.cpus[..shown].iter().map(cpu_cells).collect();
    lines.push("CPUs, busiest first".to_string());
    lines.extend(table(CPU_COLUMNS, &rows, &[6]));
    if shown < frame.cpus.len() {
        lines.push(format!(
            "... {} more CPUs not shown (less busy)",
            frame.cpus.len() - shown
        ));
    }

    lines.push(String::new());
    if frame.queues.is_empty() {
        lines.push("no NIC with queue vectors".to_string());
    } else {
        let shown = limits.queues.unwrap_or(usize::MAX).min(frame.queues.len());
        let rows: Vec<[String; 9]> = frame.queues[..shown].iter().map(queue_cells).collect();
        lines.push("NIC receive queues, busiest first".to_string());
        lines.extend(table(QUEUE_COLUMNS, &rows, &[0, 3, 6]));
        if shown < frame.queues.len() {
            lines.push(format!(
                "... {} more queues not shown (less busy)",
                frame.queues.len() - shown
            ));
        }
    }

    if let Some(daemon) = &frame.daemon {
        lines.push(String::new());
        lines.push(format!("Recent decisions of steerd at {}", daemon.address));
        let from = daemon.decisions.len().saturating_sub(limits.decisions);
        if daemon.decisions.is_empty() {
            lines.push("no decisions yet".to_string());
        }
        for decision in &daemon.decisions[from..] {
            lines.push(format!(
                "tick {}  {}  {} -> {}  [{}: {}] {}",
                decision.tick,
                decision.target,
                decision.old,
                decision.new,
                decision.reason,
                decision.detail,
                decision.outcome
            ));
        }
    }
    for warning in &frame.warnings {
        lines.push(format!("warning: {warning}"));
    }

    let mut out = String::new();
    for line in lines {
        match limits.width {
            Some(width) => out.push_str(&fit(&line, width)),
            None => out.push_str(&line),
        }
        out.push('\n');
    }
    out
}
