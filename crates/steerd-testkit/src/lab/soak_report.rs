//! Reads a soak's console ([`super::soak`]): the daemon's figures sampled every 10 s (`D`
//! lines), the reloads sent, the restore after SIGTERM and the panics in its log, and puts
//! an early window beside the last one.
//!
//! The windows: the first minute is warm-up (allocations that happen once: the first
//! discovery, the first HTTP scrape, the first RPS tables) and is left out. The early
//! window starts after it, the late window ends at the end of the run, and each lasts
//! 5 minutes (one cycle of the five traffic kinds), or half of what is left after the
//! warm-up in a shorter run. RSS growth is the late window's median RSS against the
//! early window's, in per cent: a median, so one sample caught mid-allocation does not
//! decide it. RSS is smaps_rollup's, counted from the page tables (consoles of before
//! 2026-11-26 carry VmRSS, which 6.1 updates late: lab/guest-init.sh, `daemon_stats`).

use std::fmt::Write as _;

use super::run::RawRun;
use super::soak::{RELOAD_COMMAND, kind_at};

/// Seconds at the start left out of the comparison.
pub const WARM_UP_SECS: f64 = 60.0;

/// The longest window compared.
pub const WINDOW_SECS: f64 = 300.0;

/// One `D` line: the daemon's figures at `at` seconds after it started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DaemonSample {
    pub at: f64,
    /// Alive, with a readable status file.
    pub alive: bool,
    pub rss_kb: Option<u64>,
    pub hwm_kb: Option<u64>,
    pub threads: Option<u64>,
    pub fds: Option<u64>,
    pub tick_sum_s: Option<f64>,
    pub tick_count: Option<f64>,
    pub ticks: Option<f64>,
    pub reloads_ok: Option<u64>,
    pub reloads_error: Option<u64>,
    /// RSS's anonymous and file-backed parts (smaps_rollup's Anonymous, and Rss minus it:
    /// the guest's binaries are on its initramfs, a tmpfs; absent from older consoles):
    /// a step in the file-backed part is code or data of the binary faulted in for the first
    /// time, not memory the daemon allocated.
    pub anon_kb: Option<u64>,
    pub file_kb: Option<u64>,
}

impl DaemonSample {
    /// Parses the fields after `D `; `None` for a line too short to be one.
    pub fn parse(rest: &str, ready: f64) -> Option<DaemonSample> {
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 11 {
            return None;
        }
        let int = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        let real = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
        let rss_kb = int(2);
        Some(DaemonSample {
            at: real(0)? - ready,
            alive: f[1] == "alive" && rss_kb.is_some(),
            rss_kb,
            hwm_kb: int(3),
            threads: int(4),
            fds: int(5),
            tick_sum_s: real(6),
            tick_count: real(7),
            ticks: real(8),
            reloads_ok: int(9),
            reloads_error: int(10),
            anon_kb: int(11),
            file_kb: int(12),
        })
    }
}

/// The figures of one window.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub from: f64,
    pub to: f64,
    pub samples: usize,
    pub rss_median_kb: Option<f64>,
    pub anon_median_kb: Option<f64>,
    pub file_median_kb: Option<f64>,
    pub rss_max_kb: Option<u64>,
    /// VmHWM at the window's last sample: the peak so far.
    pub hwm_kb: Option<u64>,
    /// Open fds and threads, least and most. steerd holds more fds in quiet mode (its
    /// NAPI perf events, opened while there is no receive work) than under traffic, so the
    /// least is what it holds under traffic and the most what it holds when idle.
    pub fds_min: Option<u64>,
    pub fds_max: Option<u64>,
    pub threads_min: Option<u64>,
    pub threads_max: Option<u64>,
    /// Mean tick duration over the window (difference of the histogram's sum and count).
    pub tick_mean_ms: Option<f64>,
    pub ticks: Option<f64>,
    /// The traffic kinds of its samples, in order: windows with different kinds are not
    /// expected to tick alike.
    pub kinds: Vec<&'static str>,
}

impl Window {
    /// The window `from`..=`to` of a run whose traffic ends at `end`.
    fn of(samples: &[DaemonSample], from: f64, to: f64, end: f64) -> Window {
        let inside: Vec<&DaemonSample> = samples
            .iter()
            .filter(|s| s.alive && s.at >= from && s.at <= to)
            .collect();
        let median = |mut v: Vec<u64>| {
            v.sort_unstable();
            let n = v.len();
            (n > 0).then(|| {
                if n % 2 == 1 {
                    v[n / 2] as f64
                } else {
                    (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
                }
            })
        };
        let rss: Vec<u64> = inside.iter().filter_map(|s| s.rss_kb).collect();
        let rss_max_kb = rss.iter().max().copied();
        let rss_median_kb = median(rss);
        let anon_median_kb = median(inside.iter().filter_map(|s| s.anon_kb).collect());
        let file_median_kb = median(inside.iter().filter_map(|s| s.file_kb).collect());
        let with_ticks: Vec<(f64, f64)> = inside
            .iter()
            .filter_map(|s| Some((s.tick_sum_s?, s.tick_count?)))
            .collect();
        let (tick_mean_ms, ticks) = match (with_ticks.first(), with_ticks.last()) {
            (Some(a), Some(b)) if b.1 > a.1 => {
                (Some((b.0 - a.0) / (b.1 - a.1) * 1000.0), Some(b.1 - a.1))
            }
            _ => (None, None),
        };
        let mut kinds: Vec<&'static str> = Vec::new();
        for s in &inside {
            // The last sample comes just after the traffic's end: it belongs to the last phase.
            let kind = kind_at(s.at.min(end - 1.0));
            if kinds.last() != Some(&kind) {
                kinds.push(kind);
            }
        }
        Window {
            from,
            to,
            kinds,
            samples: inside.len(),
            rss_median_kb,
            anon_median_kb,
            file_median_kb,
            rss_max_kb,
            hwm_kb: inside.iter().rev().find_map(|s| s.hwm_kb),
            fds_min: inside.iter().filter_map(|s| s.fds).min(),
            fds_max: inside.iter().filter_map(|s| s.fds).max(),
            threads_min: inside.iter().filter_map(|s| s.threads).min(),
            threads_max: inside.iter().filter_map(|s| s.threads).max(),
            tick_mean_ms,
            ticks,
        }
    }
}

/// What a soak showed.
#[derive(Debug, Clone, Default)]
pub struct Soak {
    pub secs: f64,
    pub samples: Vec<DaemonSample>,
    pub early: Window,
    pub late: Window,
    /// Late median RSS against early median, per cent.
    pub rss_growth_pct: Option<f64>,
    /// Every change of RSS between two samples after the warm-up, as (seconds, kB
    /// before, kB after): one step that stays is a buffer sized once, a staircase a leak.
    pub rss_steps: Vec<(f64, u64, u64)>,
    /// Daemon log lines with "panicked" (the guest's count, or the host's if larger).
    pub panics: usize,
    /// The daemon answered every sample until the final SIGTERM.
    pub alive_throughout: bool,
    pub restored: bool,
    pub diffs: Vec<String>,
    pub reloads_sent: usize,
    /// The daemon's reload counters at the last sample.
    pub reloads_ok: Option<u64>,
    pub reloads_error: Option<u64>,
    pub log: Vec<String>,
}

/// The two windows of a run of `secs` seconds (see the module's comment).
pub fn windows(secs: f64) -> ((f64, f64), (f64, f64)) {
    let length = WINDOW_SECS.min((secs - WARM_UP_SECS).max(0.0) / 2.0);
    (
        (WARM_UP_SECS, WARM_UP_SECS + length),
        (secs - length, secs + PERIOD_SLACK),
    )
}

/// The final sample comes a little after the nominal end (the guest's loop finishes its
/// last period first).
const PERIOD_SLACK: f64 = 15.0;

/// Reads a soak's console; `secs` is its nominal length.
pub fn analyse(secs: f64, raw: &RawRun) -> Soak {
    // The balancer's start; a log of echoed lines may lack it, and then the first `D`
    // line (printed right after the start) stands in for it.
    let ready = raw
        .lines
        .iter()
        .find_map(|l| l.strip_prefix("LAB READY "))
        .or_else(|| raw.lines.iter().find_map(|l| l.strip_prefix("D ")))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let mut soak = Soak {
        secs,
        ..Soak::default()
    };
    let mut guest_panics = None;
    for line in &raw.lines {
        if let Some(rest) = line.strip_prefix("D ") {
            soak.samples.extend(DaemonSample::parse(rest, ready));
        } else if let Some(rest) = line.strip_prefix("LAB EVENT ") {
            let cmd = rest.split_once(' ').map_or("", |(_, c)| c);
            if cmd.starts_with(RELOAD_COMMAND) {
                soak.reloads_sent += 1;
            }
        } else if let Some(v) = line.strip_prefix("LAB RESTORED ") {
            soak.restored = v.trim() == "yes";
        } else if let Some(v) = line.strip_prefix("LAB DIFF ") {
            soak.diffs.push(v.to_string());
        } else if let Some(v) = line.strip_prefix("LAB PANICS ") {
            guest_panics = v.trim().parse::<usize>().ok();
        } else if let Some(v) = line.strip_prefix("LOG ") {
            soak.log.push(v.to_string());
        }
    }
    let host_panics = soak.log.iter().filter(|l| l.contains("panicked")).count();
    soak.panics = guest_panics.unwrap_or(0).max(host_panics);
    soak.alive_throughout = !soak.samples.is_empty() && soak.samples.iter().all(|s| s.alive);
    let (early, late) = windows(secs);
    soak.early = Window::of(&soak.samples, early.0, early.1, secs);
    soak.late = Window::of(&soak.samples, late.0, late.1, secs);
    soak.rss_growth_pct = match (soak.early.rss_median_kb, soak.late.rss_median_kb) {
        (Some(a), Some(b)) if a > 0.0 => Some((b - a) / a * 100.0),
        _ => None,
    };
    let after_warm_up: Vec<(f64, u64)> = soak
        .samples
        .iter()
        .filter(|s| s.at >= WARM_UP_SECS)
        .filter_map(|s| Some((s.at, s.rss_kb?)))
        .collect();
    soak.rss_steps = after_warm_up
        .windows(2)
        .filter(|w| w[0].1 != w[1].1)
        .map(|w| (w[1].0, w[0].1, w[1].1))
        .collect();
    if let Some(last) = soak.samples.iter().rev().find(|s| s.alive) {
        soak.reloads_ok = last.reloads_ok;
        soak.reloads_error = last.reloads_error;
    }
    soak
}

fn show<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

fn show_f(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn change(a: Option<f64>, b: Option<f64>, digits: usize) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:+.digits$}", b - a),
        _ => "-".into(),
    }
}

impl Soak {
    /// The early and late windows side by side, then the run's verdict figures.
    pub fn table(&self) -> String {
        let (e, l) = (&self.early, &self.late);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| figure | first window ({:.0}-{:.0} s) | last window ({:.0}-{:.0} s) | change |\n|---|---|---|---|",
            e.from,
            e.to,
            l.from,
            l.to.min(self.secs)
        );
        let mut row = |name: &str, a: String, b: String, c: String| {
            let _ = writeln!(out, "| {name} | {a} | {b} | {c} |");
        };
        let f = |v: Option<u64>| v.map(|x| x as f64);
        row(
            "traffic",
            e.kinds.join(", "),
            l.kinds.join(", "),
            String::new(),
        );
        row(
            "samples",
            e.samples.to_string(),
            l.samples.to_string(),
            String::new(),
        );
        for (name, of) in [
            (
                "RSS median (kB)",
                (|w| w.rss_median_kb) as fn(&Window) -> Option<f64>,
            ),
            ("anonymous median (kB)", |w| w.anon_median_kb),
            ("file-backed median (kB)", |w| w.file_median_kb),
        ] {
            row(
                name,
                show_f(of(e), 0),
                show_f(of(l), 0),
                change(of(e), of(l), 0),
            );
        }
        row(
            "RSS max (kB)",
            show(e.rss_max_kb),
            show(l.rss_max_kb),
            change(f(e.rss_max_kb), f(l.rss_max_kb), 0),
        );
        row(
            "VmHWM at window end (kB)",
            show(e.hwm_kb),
            show(l.hwm_kb),
            change(f(e.hwm_kb), f(l.hwm_kb), 0),
        );
        let range = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => "-".to_string(),
            _ => format!("{}-{}", show(a), show(b)),
        };
        row(
            "open fds (least-most)",
            range(e.fds_min, e.fds_max),
            range(l.fds_min, l.fds_max),
            change(f(e.fds_max), f(l.fds_max), 0),
        );
        row(
            "threads (least-most)",
            range(e.threads_min, e.threads_max),
            range(l.threads_min, l.threads_max),
            change(f(e.threads_max), f(l.threads_max), 0),
        );
        row(
            "mean tick time (ms)",
            show_f(e.tick_mean_ms, 3),
            show_f(l.tick_mean_ms, 3),
            change(e.tick_mean_ms, l.tick_mean_ms, 3),
        );
        row(
            "ticks in window",
            show_f(e.ticks, 0),
            show_f(l.ticks, 0),
            change(e.ticks, l.ticks, 0),
        );
        let _ = writeln!(
            out,
            "\nRSS growth (median RSS, last window against first): {} %\n\
             RSS changes after the warm-up: {}\n\
             panics in the daemon's log: {}; daemon alive at every sample: {}\n\
             reloads sent {}, counted ok {}, error {}\n\
             every value restored after SIGTERM: {}{}",
            show_f(self.rss_growth_pct, 2),
            if self.rss_steps.is_empty() {
                "none".to_string()
            } else {
                let mut steps: Vec<String> = self
                    .rss_steps
                    .iter()
                    .take(20)
                    .map(|(at, a, b)| format!("{a} -> {b} kB at {at:.0} s"))
                    .collect();
                if self.rss_steps.len() > 20 {
                    steps.push(format!("and {} more", self.rss_steps.len() - 20));
                }
                steps.join(", ")
            },
            self.panics,
            if self.alive_throughout { "yes" } else { "no" },
            self.reloads_sent,
            show(self.reloads_ok),
            show(self.reloads_error),
            if self.restored { "yes" } else { "no" },
            if self.diffs.is_empty() {
                String::new()
            } else {
                format!(" (left changed: {})", self.diffs.join("; "))
            },
        );
        out
    }

    /// Whether both windows hold the same traffic kinds (a 5-minute window in a run of 11
    /// minutes or more: every kind once), so that their most fds and threads compare.
    pub fn same_traffic(&self) -> bool {
        let set = |w: &Window| {
            let mut k = w.kinds.clone();
            k.sort_unstable();
            k.dedup();
            k
        };
        set(&self.early) == set(&self.late)
    }

    /// The targets, each a sentence and whether it holds: no panic, the daemon alive, every
    /// value restored, every reload taken, the same fds and threads in both windows (least
    /// and most when both windows hold the same traffic, else the least: quiet mode's
    /// perf events are fds only an idle window has), and RSS growth at most
    /// `max_rss_growth_pct`.
    pub fn verdicts(&self, max_rss_growth_pct: f64) -> Vec<(String, bool)> {
        let (e, l) = (&self.early, &self.late);
        let both = self.same_traffic();
        let same = |a: (Option<u64>, Option<u64>), b: (Option<u64>, Option<u64>)| {
            a.0.is_some() && a.0 == b.0 && (!both || a.1 == b.1)
        };
        let which = if both { "least-most" } else { "least" };
        vec![
            (
                format!("{} panics in the daemon's log (0)", self.panics),
                self.panics == 0,
            ),
            (
                "the daemon answered every sample".into(),
                self.alive_throughout,
            ),
            (
                format!("every value restored after SIGTERM {:?}", self.diffs),
                self.restored,
            ),
            (
                format!(
                    "{} reloads sent, {} ok, {} error",
                    self.reloads_sent,
                    show(self.reloads_ok),
                    show(self.reloads_error)
                ),
                self.reloads_sent > 0
                    && self.reloads_ok == Some(self.reloads_sent as u64)
                    && self.reloads_error == Some(0),
            ),
            (
                format!(
                    "open fds ({which}) {}-{} in the first window, {}-{} in the last",
                    show(e.fds_min),
                    show(e.fds_max),
                    show(l.fds_min),
                    show(l.fds_max)
                ),
                same((e.fds_min, e.fds_max), (l.fds_min, l.fds_max)),
            ),
            (
                format!(
                    "threads ({which}) {}-{} in the first window, {}-{} in the last",
                    show(e.threads_min),
                    show(e.threads_max),
                    show(l.threads_min),
                    show(l.threads_max)
                ),
                same(
                    (e.threads_min, e.threads_max),
                    (l.threads_min, l.threads_max),
                ),
            ),
            (
                format!(
                    "RSS growth {} % (at most {max_rss_growth_pct} %)",
                    show_f(self.rss_growth_pct, 2)
                ),
                self.rss_growth_pct.is_some_and(|g| g <= max_rss_growth_pct),
            ),
        ]
    }
}
