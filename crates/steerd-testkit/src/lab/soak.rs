//! The soak (issue 16): steerd alone for a long time under traffic that changes every
//! minute and a configuration reload every 5 minutes, so that a slow leak (memory, fds,
//! threads) or a tick that grows slower shows as a difference between the first and the
//! last minutes, and a lost original shows in the restore after the final SIGTERM.
//!
//! `examples/lab.rs soak --minutes N` runs it for an hour by default (`scripts/soak.sh`);
//! `tests/lab.rs` runs a 5-minute form. [`super::soak_report`] reads its console.

use std::time::Duration;

use super::scenario::{Scenario, UDP_PPS, base, udp};
use super::traffic::Phase;

/// How long each traffic phase lasts; every phase kind recurs every `KINDS.len()` phases.
pub const PHASE_SECS: u64 = 60;

/// Seconds between two configuration reloads.
pub const RELOAD_EVERY_SECS: u32 = 300;

/// The first reload comes half a period in, so even the 5-minute form reloads once, and
/// each reload lands mid-phase rather than on a traffic change.
pub const FIRST_RELOAD_SECS: u32 = 150;

/// Seconds between two samples: 360 an hour, each with the daemon's figures.
pub const PERIOD_SECS: f64 = 10.0;

/// The traffic kinds, in the order they cycle. Five kinds of a minute each: every 5-minute
/// window holds each kind once, so the hour's first and last windows carry the same work.
pub const KINDS: [&str; 5] = ["spread", "skew", "elephant", "idle", "tcp"];

/// The configuration the daemon starts on and the one the odd reloads install: both valid,
/// different in `hysteresis`, so each reload really changes the running policy.
const CONFIG_A: &str = "{hysteresis: {confirm_ticks: 3}}";
const CONFIG_B: &str = "{hysteresis: {confirm_ticks: 5, irq_dwell: 20s}}";

/// The guest command of a reload (`reload_with` in lab/guest-init.sh); the report counts
/// the events that start with it.
pub const RELOAD_COMMAND: &str = "reload_with";

/// The reloads in turn: to B, back to A.
const RELOADS: [&str; 2] = ["reload_with b", "reload_with a"];

/// Traffic of phase kind `kind` from `start` for a phase's length, `None` when idle. A
/// phase ends a second before the next starts, so the next one's UDP source ports are free.
fn phase(kind: &str, start: u64) -> Option<Phase> {
    let length = PHASE_SECS - 1;
    match kind {
        "spread" => Some(udp(start, length, 8, UDP_PPS)),
        "skew" => Some(udp(start, length, 2, UDP_PPS)),
        "elephant" => Some(udp(start, length, 1, UDP_PPS)),
        "tcp" => Some(Phase {
            tcp_ports: vec![5001, 5002, 5003, 5004],
            ..udp(start, length, 0, 0)
        }),
        _ => None,
    }
}

/// The kind of traffic at `secs` after the balancer started.
pub fn kind_at(secs: f64) -> &'static str {
    let i = (secs.max(0.0) as u64 / PHASE_SECS) as usize % KINDS.len();
    KINDS[i]
}

/// The soak scenario of `minutes` minutes (at least 2): steerd on a configuration file,
/// every input vector starting on CPU0 (so there are originals to restore at the end).
pub fn scenario(minutes: u32) -> Scenario {
    let minutes = minutes.max(2);
    let secs = u64::from(minutes) * 60;
    let phases = (0..secs / PHASE_SECS)
        .filter_map(|i| phase(KINDS[i as usize % KINDS.len()], i * PHASE_SECS))
        .collect();
    let events = (0..)
        .map(|k| FIRST_RELOAD_SECS + k * RELOAD_EVERY_SECS)
        .take_while(|&at| u64::from(at) + 5 < secs)
        .enumerate()
        .map(|(k, at)| (at, RELOADS[k % 2]))
        .collect();
    Scenario {
        setup: format!(
            "mkdir -p /etc/steerd; echo '{CONFIG_A}' > /etc/steerd/a.yaml; \
             echo '{CONFIG_B}' > /etc/steerd/b.yaml; \
             cp /etc/steerd/a.yaml /etc/steerd/steerd.yaml; pin_inputs 0"
        ),
        events,
        duration: Duration::from_secs(secs),
        phases,
        steady: Duration::from_secs(60),
        period: PERIOD_SECS,
        steerd_args: "--config /etc/steerd/steerd.yaml".into(),
        daemon_stats: true,
        ..base(
            "soak",
            "steerd alone; spread, skew, elephant, idle, TCP a minute each; a reload every 5 minutes",
        )
    }
}
