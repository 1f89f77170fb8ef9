//! `rss-ntf` (issue 31): another tool's `ethtool -X` under steerd, which must be heard at
//! once on kernels that announce RSS changes (`ETHTOOL_MSG_RSS_NTF`, 6.17 and later) and
//! treated as someone else's change. It is `rss-skew` (steerd's RSS lever evens a skewed
//! table within seconds) with one more event: at [`OTHER_TOOL_AT`] s the guest runs
//! [`OTHER_TOOL`], which puts the table back to two queues, as an operator or a tuning
//! script would.
//!
//! What a run shows ([`NotifyFigures`]): when the other tool wrote (the guest's wall clock,
//! printed by the event), when steerd's log first noted the table as changed by someone
//! else, steerd's table writes after that, and `steerd_rediscoveries_total` by reason: its
//! `ethtool_rss` series just before the write (scraped by the event) and before SIGTERM.
//! The difference is the rediscoveries an RSS notification brought from the write on. It
//! counts notifications only while no other rediscovery drains them first (a rediscovery
//! for another reason reads the ethtool socket without counting), so a run's other
//! reasons are printed beside it.

use std::collections::BTreeMap;
use std::time::Duration;

use super::guest_clock::{epoch_to_day, log_time, since};
use super::report::{Metrics, is_table_write};
use super::rss::by_label;
use super::run::RawRun;
use super::scenario::Scenario;

/// The scenario's name.
pub const NAME: &str = "rss-ntf";

/// Seconds after the balancer's start when the other tool writes the table: well after
/// `rss-skew`'s lever has evened it (within 10 s).
pub const OTHER_TOOL_AT: u32 = 22;

/// The other tool: first steerd's count of RSS notifications heard so far (the `RSSN`
/// line), then a table that sends every flow to queues 0 and 1, written between two
/// readings of the guest's wall clock to the microsecond (the `RSSX` line: before, after;
/// seconds since the epoch, from guest-init's `wall`: `lab::guest_clock`).
pub const OTHER_TOOL: &str = "timeout 5 wget -q -O - http://127.0.0.1:9847/metrics | grep '^steerd_rediscoveries_total{reason=\"ethtool_rss\"}' | sed 's/^/RSSN /'; \
     before=$(wall); ethtool -X eth0 weight 1 1 0 0; echo \"RSSX $before $(wall)\"";

/// The scenario: `rss-skew`'s traffic and configuration for `length`, plus the other tool.
pub fn scenario(length: Duration) -> Scenario {
    let mut s = super::rss::skew(length.max(Duration::from_secs(40)));
    s.name = NAME;
    s.what = "rss-skew, and at 22 s another tool's ethtool -X puts the table back on queues 0-1 (heard through RSS_NTF on 6.17 and later)";
    s.events.push((OTHER_TOOL_AT, OTHER_TOOL));
    s
}

/// What one run says about the notification.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NotifyFigures {
    /// When the other tool started writing, seconds of the day (UTC, the guest's clock).
    pub written_at: Option<f64>,
    /// When it was done (the table written by then), the same way.
    pub written_by: Option<f64>,
    /// Seconds from the other tool's end to steerd's first log line after its start noting
    /// the table as someone else's (0 when the note came while the tool was still
    /// reading the clock).
    pub noted_after: Option<f64>,
    /// steerd's table writes logged after the other tool's write.
    pub steerd_writes_after: usize,
    /// steerd's table writes logged over the whole run.
    pub steerd_writes: usize,
    /// `steerd_rediscoveries_total` by reason, at the end.
    pub rediscoveries: BTreeMap<String, f64>,
    /// Its `ethtool_rss` series just before the other tool wrote.
    pub rss_heard_before: Option<f64>,
}

impl NotifyFigures {
    /// RSS notifications heard from the other tool's write to the end (steerd wrote no
    /// table after it): 1 when the kernel announced it, 0 when it did not.
    pub fn heard_others(&self) -> Option<f64> {
        Some(self.rediscoveries.get("ethtool_rss")? - self.rss_heard_before?)
    }

    /// One line for the lab's log and a test's message.
    pub fn describe(&self) -> String {
        format!(
            "other tool wrote between {:?} and {:?} s of the day, noted by steerd {} s after it was done; steerd's table writes {} ({} after); \
             rediscoveries {:?}; RSS notifications heard from the other tool's write on {:?}",
            self.written_at,
            self.written_by,
            self.noted_after
                .map_or("never".to_string(), |v| format!("{v:.2}")),
            self.steerd_writes,
            self.steerd_writes_after,
            self.rediscoveries,
            self.heard_others()
        )
    }
}

/// Whether an `ethtool -x` table line ("entries... key KEY") sends to queues 0 and 1 only,
/// as the other tool's table does.
pub fn only_queues_0_and_1(table: &str) -> bool {
    let entries: Vec<&str> = table
        .split(" key")
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    !entries.is_empty() && entries.iter().all(|e| *e == "0" || *e == "1")
}

/// The figures of a run of [`scenario`].
pub fn analyse(raw: &RawRun, m: &Metrics) -> NotifyFigures {
    // RSSX BEFORE AFTER, seconds since the epoch; steerd logs UTC times of day.
    let wall: Vec<f64> = raw
        .lines
        .iter()
        .find_map(|l| l.strip_prefix("RSSX "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|v| v.parse::<f64>().ok())
                .map(epoch_to_day)
                .collect()
        })
        .unwrap_or_default();
    let mut f = NotifyFigures {
        written_at: wall.first().copied(),
        written_by: wall.get(1).copied(),
        ..NotifyFigures::default()
    };
    let after = |line: &str| match (f.written_at, log_time(line)) {
        (Some(at), Some(t)) => since(t, at) >= 0.0,
        _ => false,
    };
    f.steerd_writes = m.log.iter().filter(|l| is_table_write(l)).count();
    f.steerd_writes_after = m
        .log
        .iter()
        .filter(|l| is_table_write(l) && after(l))
        .count();
    f.noted_after = m
        .log
        .iter()
        .filter(|l| l.contains("external_change") && l.contains("rss indirection"))
        .filter_map(|l| {
            let (t, at, by) = (log_time(l)?, f.written_at?, f.written_by?);
            (since(t, at) >= 0.0).then(|| since(t, by).max(0.0))
        })
        .next();
    let reasons = |tag: &str| {
        by_label(
            raw.lines.iter().filter_map(|l| l.strip_prefix(tag)),
            "steerd_rediscoveries_total",
            "reason",
        )
    };
    f.rss_heard_before = reasons("RSSN ").get("ethtool_rss").copied();
    f.rediscoveries = reasons("M ");
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::traffic::Sent;

    #[test]
    fn the_other_tools_write_is_timed_against_steerds_note_and_counted_beyond_its_own_writes() {
        let log = [
            "2026-11-28T10:02:03.100000Z  INFO eth0 rss indirection: 0 1 -> 0 1 2 3 (rss_step: ...) applied serves=\"\"",
            "2026-11-28T10:02:20.400000Z  INFO policy note (external_change): eth0 rss indirection: steerd wrote 0 1 2 3, now 0 1: changed by someone else; left alone (on_external_change: respect)",
        ];
        let raw = RawRun {
            lines: vec![
                "RSSN steerd_rediscoveries_total{reason=\"ethtool_rss\"} 1".into(),
                "RSSX 1795860140.100000 1795860140.250000".into(),
                "M steerd_rediscoveries_total{reason=\"ethtool_rss\"} 2".into(),
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
        // 1795860140 is 2026-11-28T10:02:20Z.
        let by = f.written_by.expect("written");
        assert!(
            (by - (10.0 * 3600.0 + 2.0 * 60.0 + 20.25)).abs() < 1e-6,
            "{by}"
        );
        let noted = f.noted_after.expect("noted");
        assert!((noted - 0.15).abs() < 1e-6, "{noted}");
        assert_eq!((f.steerd_writes, f.steerd_writes_after), (1, 0));
        assert_eq!(f.heard_others(), Some(1.0));
        assert!(only_queues_0_and_1("0 1 0 1 key 6d:5a"));
        // A note that came while the tool was still reading the clock.
        let raw = RawRun {
            lines: vec!["RSSX 1795860140.100000 1795860140.450000".into()],
            ..raw
        };
        assert_eq!(analyse(&raw, &m).noted_after, Some(0.0));
        assert!(!only_queues_0_and_1("0 1 2 3 key 6d:5a"));
    }
}
