//! The guest's wall clock beside its uptime: the lab's samples are timed by uptime, the
//! daemon's log by the wall clock (UTC, to the microsecond). guest-init prints both at the
//! balancer's start (`LAB WALL uptime uptime epoch`) from its `wall` function (busybox's `date`
//! has no `%N`; its `adjtimex` prints the clock's `tv_sec` and `tv_usec`), and scenario
//! events can call `wall` too. This module reads them back, so a log line's time can be
//! set against a sample's or an event's.

/// Seconds of the day in a `HH:MM:SS.fraction` text.
pub fn seconds_of_day(text: &str) -> Option<f64> {
    let mut parts = text.trim().splitn(3, ':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// Seconds since the epoch as seconds of the day (UTC).
pub fn epoch_to_day(epoch: f64) -> f64 {
    epoch.rem_euclid(86_400.0)
}

/// Seconds from `then` to `now`, both seconds of the day, across midnight (a run is
/// minutes long, so a difference of more than half a day is the day's wrap).
pub fn since(now: f64, then: f64) -> f64 {
    let d = now - then;
    if d < -43_200.0 {
        d + 86_400.0
    } else if d > 43_200.0 {
        d - 86_400.0
    } else {
        d
    }
}

/// A daemon log line's time (`2026-11-28T10:02:10.944083Z  INFO ...`), seconds of the day.
pub fn log_time(line: &str) -> Option<f64> {
    let stamp = line.split_whitespace().next()?;
    seconds_of_day(stamp.split_once('T')?.1.trim_end_matches('Z'))
}

/// The `LAB WALL` pair: the guest's uptime and its wall clock (seconds of the day) at the
/// same moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WallAt {
    pub up: f64,
    pub day: f64,
}

impl WallAt {
    /// From the text after `LAB WALL `: "UPTIME_BEFORE UPTIME_AFTER EPOCH", the uptime read
    /// on both sides of the wall clock (its reading forks busybox and awk, which takes
    /// 0.1 s or more under TCG: the middle is taken).
    pub fn parse(text: &str) -> Option<WallAt> {
        let words: Vec<f64> = text
            .split_whitespace()
            .map(|w| w.parse().ok())
            .collect::<Option<_>>()?;
        let [before, after, epoch] = words[..] else {
            return None;
        };
        Some(WallAt {
            up: (before + after) / 2.0,
            day: epoch_to_day(epoch),
        })
    }

    /// The guest uptime at which a daemon log line was written.
    pub fn uptime_of(&self, line: &str) -> Option<f64> {
        Some(self.up + since(log_time(line)?, self.day))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_is_placed_on_the_guests_uptime_across_midnight() {
        // 1795860140 is 2026-11-28T10:02:20Z.
        let at = WallAt::parse("16.2 16.3 1795860140.500000").expect("a pair");
        let up = at
            .uptime_of("2026-11-28T10:02:21.750000Z  INFO irq 27 affinity: 0 -> 2 applied")
            .expect("a time");
        assert!((up - 17.5).abs() < 1e-6, "{up}");
        assert_eq!(since(0.5, 86_399.5), 1.0);
        assert_eq!(since(86_399.5, 0.5), -1.0);
        assert_eq!(log_time("no time here"), None);
    }
}
