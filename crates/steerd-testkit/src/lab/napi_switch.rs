//! `napi-set` (issue 31): one NAPI switched to its polling thread and back with netdev
//! netlink's `napi-set threaded` (Linux 6.17) while steerd runs, as an operator trying
//! threaded NAPI on one queue would. The switch leaves the device's
//! `sys/class/net/eth0/threaded` at 0, so only the per-NAPI watch of steerd's tick sees it
//! (`steerd_core::engine::napi_modes`); before that watch the thread stayed unpinned until
//! the periodic rediscovery, 300 s later.
//!
//! What a run shows ([`SwitchFigures`]): when each switch was made (the guest's wall clock,
//! printed by the event around `napi_set`), when steerd's log pinned the new thread after
//! the switch on and noted the thread's end after the switch off, and
//! `steerd_rediscoveries_total` by reason at the end (`threaded_switched` counts both).

use std::collections::BTreeMap;
use std::time::Duration;

use super::guest_clock::{epoch_to_day, log_time, since};
use super::report::Metrics;
use super::rss::by_label;
use super::run::RawRun;
use super::scenario::{PLACEMENT_PPS, Scenario, base, udp};

/// The scenario's name.
pub const NAME: &str = "napi-set";

/// Seconds after the balancer's start when queue 1's NAPI is switched to its thread, and
/// back.
pub const ON_AT: u32 = 10;
pub const OFF_AT: u32 = 20;

/// The switches: `napi_set` (examples/napi_set.rs, which prints `napi ID threaded MODE`)
/// between two readings of the guest's wall clock (guest-init's `wall`), on one `NAPIX`
/// line: the switch, before, after, what `napi_set` said and the device's `threaded`
/// after it (which the switch leaves as it was).
const ON: &str = "before=$(wall); out=$(/usr/sbin/napi_set eth0 1 1 2>&1); echo \"NAPIX on $before $(wall) $out; device threaded $(cat /sys/class/net/eth0/threaded)\"";
const OFF: &str = "before=$(wall); out=$(/usr/sbin/napi_set eth0 1 0 2>&1); echo \"NAPIX off $before $(wall) $out; device threaded $(cat /sys/class/net/eth0/threaded)\"";

/// steerd's `steerd_rediscoveries_total` by reason (`M` lines, as the RSS scenarios print
/// them at the end), read at [`COUNTED_AT`] s, after both switches.
const COUNT: &str = "timeout 5 wget -q -O - http://127.0.0.1:9847/metrics 2>/dev/null | grep '^steerd_rediscoveries_total' | sed 's/^/M /'";
pub const COUNTED_AT: u32 = 26;

/// The scenario: the driver's placement, 8 UDP flows at [`PLACEMENT_PPS`] (a guest with
/// room to spare: what is timed is the tick's notice, not relief), queue 1's NAPI threaded
/// from [`ON_AT`] to [`OFF_AT`].
pub fn scenario() -> Scenario {
    Scenario {
        events: vec![(ON_AT, ON), (OFF_AT, OFF), (COUNTED_AT, COUNT)],
        duration: Duration::from_secs(30),
        phases: vec![udp(1, 28, 8, PLACEMENT_PPS)],
        steady: Duration::from_secs(8),
        ..base(
            NAME,
            "the driver's placement, 8 UDP flows at 20k pkt/s; queue 1's NAPI switched to its thread with napi-set at 10 s and back at 20 s (Linux 6.17 and later), the device's threaded left at 0",
        )
    }
}

/// Whether the scenario is this one (it needs `napi_set` in the guest).
pub fn is_napi_switch(s: &Scenario) -> bool {
    s.name == NAME
}

/// One switch, as the guest printed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Switch {
    /// Seconds of the day (UTC, the guest's clock) before and after `napi_set` ran.
    pub at: Option<f64>,
    pub by: Option<f64>,
    /// The NAPI id `napi_set` switched (`None`: it failed; `said` tells why).
    pub napi_id: Option<u32>,
    pub said: String,
}

/// What one run says about the two switches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwitchFigures {
    pub on: Switch,
    pub off: Switch,
    /// Seconds from the switch on's end to steerd's first applied affinity write for the
    /// switched NAPI's thread after its start (0 when it came while `napi_set` still ran).
    pub pinned_after: Option<f64>,
    /// Seconds from the switch off's end to steerd's first note after its start that
    /// threads it had pinned ended.
    pub ended_after: Option<f64>,
    /// `steerd_rediscoveries_total` by reason, at the end.
    pub rediscoveries: BTreeMap<String, f64>,
}

impl SwitchFigures {
    /// One line for the lab's log and a test's message.
    pub fn describe(&self) -> String {
        let secs = |v: Option<f64>| v.map_or("never".to_string(), |v| format!("{v:.2} s"));
        format!(
            "napi {:?} threaded on ({}), its thread pinned by steerd {} after; off ({}), the thread's end noted {} after; rediscoveries {:?}",
            self.on.napi_id,
            self.on.said,
            secs(self.pinned_after),
            self.off.said,
            secs(self.ended_after),
            self.rediscoveries
        )
    }
}

/// A `NAPIX` line's switch (`on` or `off`).
fn switch(raw: &RawRun, which: &str) -> Switch {
    let Some(rest) = raw.lines.iter().find_map(|l| {
        l.strip_prefix("NAPIX ")?
            .strip_prefix(which)?
            .strip_prefix(' ')
    }) else {
        return Switch::default();
    };
    let mut words = rest.splitn(3, ' ');
    let mut time = || {
        words
            .next()
            .and_then(|w| w.parse::<f64>().ok())
            .map(epoch_to_day)
    };
    let (at, by) = (time(), time());
    let said = words.next().unwrap_or_default().trim().to_string();
    // "napi 8194 threaded 1"
    let napi_id = said
        .strip_prefix("napi ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|id| id.parse().ok());
    Switch {
        at,
        by,
        napi_id,
        said,
    }
}

/// Seconds from `s`'s end to the first of `lines` that `matches`, logged after its start.
fn first_after<'a>(
    s: &Switch,
    lines: impl Iterator<Item = &'a String>,
    matches: impl Fn(&str) -> bool,
) -> Option<f64> {
    let (at, by) = (s.at?, s.by?);
    lines
        .filter(|l| matches(l))
        .filter_map(|l| log_time(l))
        .find(|&t| since(t, at) >= 0.0)
        .map(|t| since(t, by).max(0.0))
}

/// The figures of a run of [`scenario`].
pub fn analyse(raw: &RawRun, m: &Metrics) -> SwitchFigures {
    let on = switch(raw, "on");
    let off = switch(raw, "off");
    // "napi/eth0-8194 (pid 301) affinity: 0-3 -> 1 (napi_thread: ...) applied"
    let thread = on.napi_id.map(|id| format!("napi/eth0-{id} (pid "));
    let pinned_after = thread.as_deref().and_then(|thread| {
        first_after(&on, m.log.iter(), |l| {
            l.contains(thread) && l.contains(" affinity: ") && l.contains(") applied")
        })
    });
    let ended_after = first_after(&off, m.log.iter(), |l| {
        l.contains("NAPI thread(s) steerd had pinned ended")
    });
    let rediscoveries = by_label(
        raw.lines.iter().filter_map(|l| l.strip_prefix("M ")),
        "steerd_rediscoveries_total",
        "reason",
    );
    SwitchFigures {
        on,
        off,
        pinned_after,
        ended_after,
        rediscoveries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::traffic::Sent;

    #[test]
    fn each_switch_is_timed_against_steerds_pin_and_note() {
        // 1795860140 is 2026-11-28T10:02:20Z.
        let log = [
            "2026-11-28T10:02:03.100000Z  INFO napi/eth0-8193 (pid 300) affinity: 0-3 -> 0 (napi_thread: x) applied",
            "2026-11-28T10:02:20.700000Z  INFO napi/eth0-8194 (pid 301) affinity: 0-3 -> 1 (napi_thread: x) applied",
            "2026-11-28T10:02:30.900000Z  INFO 1 NAPI thread(s) steerd had pinned ended (threaded NAPI switched off): nothing to restore threads=1",
        ];
        let raw = RawRun {
            lines: vec![
                "NAPIX on 1795860140.100000 1795860140.250000 napi 8194 threaded 1; device threaded 0".into(),
                "NAPIX off 1795860150.100000 1795860150.300000 napi 8194 threaded 0; device threaded 0".into(),
                "M steerd_rediscoveries_total{reason=\"threaded_switched\"} 2".into(),
                "M steerd_rediscoveries_total{reason=\"periodic\"} 0".into(),
            ],
            sent: Sent::default(),
            tap_dropped: 0,
        };
        let m = Metrics {
            log: log.map(String::from).to_vec(),
            ..Metrics::default()
        };
        let f = analyse(&raw, &m);
        assert_eq!(f.on.napi_id, Some(8194));
        let pinned = f.pinned_after.expect("pinned");
        assert!((pinned - 0.45).abs() < 1e-6, "{pinned}");
        let ended = f.ended_after.expect("ended");
        assert!((ended - 0.6).abs() < 1e-6, "{ended}");
        assert_eq!(f.rediscoveries.get("threaded_switched"), Some(&2.0));

        // A switch that failed names no NAPI, and nothing is timed against it.
        let raw = RawRun {
            lines: vec![
                "NAPIX on 1795860140.100000 1795860140.250000 napi_set eth0 1 1: netdev napi-set: Operation not supported".into(),
            ],
            ..raw
        };
        let f = analyse(&raw, &m);
        assert_eq!(f.on.napi_id, None);
        assert!(f.on.said.contains("not supported"), "{:?}", f.on);
        assert_eq!((f.pinned_after, f.ended_after), (None, None));
    }
}
