//! Quiet mode: while no receive work arrives, the daemon ticks every `quiet.interval`
//! instead of every `interval`, and the kernel wakes it at the first NAPI polls
//! ([`NapiPollWake`]).
//!
//! Why: an idle 1 s tick costs little work but a whole wake-up, and the wake-up is most of
//! steerd's idle CPU time (docs/performance.md). Sleeping longer alone would make steerd
//! slower to see new traffic; with the kernel's wake-up it sees it sooner than a 1 s tick
//! would, and the first tick after the wake-up is followed by a fast one (a quarter
//! interval) so the new traffic's real rate is measured at once.
//!
//! Used only on the running machine (`--root /`): the events count the kernel's real
//! receive work, which says nothing about the files of another root.
//!
//! steerd goes quiet after [`ENTER_AFTER_QUIET_TICKS`] ticks in a row on which the policy
//! had nothing to decide and, over those ticks together, no CPU received more than
//! `quiet.wake_after_polls` packets per `quiet.interval` (12.8 a second by default).
//!
//! The states: *awake* (ticking every `interval`); *asleep* (the events open, ticking
//! every `quiet.interval`); back to awake on a wake-up by the events, a tick that decided,
//! or a tick above that rate. A failure to open the events (no CAP_PERFMON, no tracefs) is logged once and
//! keeps steerd awake until the next configuration reload.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use tracing::{info, warn};

use crate::config::Config;
use crate::kernel::napi_wake::NapiPollWake;
use crate::model::snapshot::Snapshot;
use crate::model::topology::Topology;

/// Quiet ticks in a row before steerd goes to sleep: a lull between two bursts does not
/// open and close the events every second.
pub const ENTER_AFTER_QUIET_TICKS: u32 = 3;

/// The most quiet ticks ever needed: after each wake-up by receive work that came to
/// nothing (no decision before the machine was quiet again: a trickle, transmit
/// completions), the ticks needed double, up to this. Going quiet and waking cost a
/// `perf_event_open` per CPU, the tracepoint's switch in kernel text (a brief interrupt
/// of every CPU) and an RCU grace period; this bounds them to one round about a minute.
pub const MAX_ENTER_AFTER_QUIET_TICKS: u32 = 48;

/// Quiet mode's state.
pub struct Quiet {
    /// Why quiet mode is not used, once known: not the running machine, or the events
    /// could not be opened (cleared by a reload, which tries again).
    unavailable: Option<String>,
    /// Whether this steerd watches the running machine (`--root /`).
    host: bool,
    /// The last ticks that skipped `decide`, in a row (at most
    /// [`ENTER_AFTER_QUIET_TICKS`]): the most packets one CPU received in each, and each
    /// tick's length. Emptied by a tick that decided.
    recent: Recent,
    /// Ticks that skipped `decide`, in a row.
    streak: u32,
    /// Quiet ticks needed before the next sleep (see [`MAX_ENTER_AFTER_QUIET_TICKS`]).
    enter_after: u32,
    /// The events, while asleep.
    wake: Option<NapiPollWake>,
    /// The events of the sleep that receive work just ended, closed after the tick:
    /// closing the last one waits for an RCU grace period (35 ms measured on an idle
    /// machine), which should not delay the tick that measures the new traffic.
    retired: Option<NapiPollWake>,
    /// The next gap is a fast one: the tick after a wake-up measured the new traffic's
    /// rate over the whole sleep.
    follow_up: bool,
}

/// What changed, for the caller to register or unregister the descriptor and to export
/// the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    None,
    FellAsleep,
    WokeUp,
    /// The events could not be opened; logged once.
    Unavailable,
}

impl Quiet {
    pub fn new(host: bool) -> Quiet {
        Quiet {
            unavailable: (!host)
                .then(|| "--root is not / (quiet mode watches the running kernel)".to_string()),
            host,
            recent: Recent::default(),
            streak: 0,
            enter_after: ENTER_AFTER_QUIET_TICKS,
            wake: None,
            retired: None,
            follow_up: false,
        }
    }

    /// Whether quiet mode may be used with `config` at all.
    pub fn available(&self, config: &Config) -> bool {
        self.unavailable.is_none() && enabled(config)
    }

    /// Why quiet mode is not used with `config`, when it is not (for `steerd status`).
    pub fn unavailable_reason(&self, config: &Config) -> Option<String> {
        if let Some(why) = &self.unavailable {
            return Some(why.clone());
        }
        if !config.quiet.enabled {
            return Some("quiet.enabled is false".to_string());
        }
        (!enabled(config)).then(|| "quiet.interval is not longer than interval".to_string())
    }

    pub fn is_asleep(&self) -> bool {
        self.wake.is_some()
    }

    /// The descriptor that becomes readable on receive work, while asleep.
    pub fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        self.wake.as_ref().map(AsFd::as_fd)
    }

    /// The gap to the next tick, or `None` for the caller's usual one.
    pub fn gap(&self, config: &Config) -> Option<Duration> {
        if self.follow_up {
            return Some(
                (config.interval / 4)
                    .max(super::FAST_TICK_MIN)
                    .min(config.interval),
            );
        }
        self.is_asleep()
            .then(|| config.quiet.interval.max(config.interval))
    }

    /// The fast follow-up gap was used.
    pub fn followed_up(&mut self) {
        self.follow_up = false;
    }

    /// After each tick: `skipped` says the policy had nothing to decide. Opens the events
    /// after enough quiet ticks, on the online CPUs of `topology` that are not isolated
    /// (no needless interrupt of theirs when the events are installed); closes them on a
    /// tick that was not quiet.
    pub fn after_tick(
        &mut self,
        config: &Config,
        topology: &Topology,
        skipped: bool,
        previous: &Snapshot,
        current: &Snapshot,
    ) -> Change {
        if !skipped || !self.available(config) {
            self.recent = Recent::default();
            self.streak = 0;
            if !skipped {
                self.enter_after = ENTER_AFTER_QUIET_TICKS;
            }
            return self.wake_up();
        }
        self.streak = self.streak.saturating_add(1);
        let packets = most_packets_on_one_cpu(previous, current);
        let elapsed_ns = current.taken_at_ns.saturating_sub(previous.taken_at_ns);
        self.recent.push(packets, elapsed_ns);
        if self.is_asleep() {
            // A sleep's tick is a long window of its own.
            if !quiet_rate(config, packets, elapsed_ns) {
                self.recent = Recent::default();
                self.streak = 0;
                return self.wake_up();
            }
            return Change::None;
        }
        // Over the last few ticks together, so that one scrape's burst of packets does
        // not keep steerd awake when the rate is low.
        let (packets, elapsed_ns) = self.recent.total();
        if self.streak < self.enter_after
            || self.recent.len < ENTER_AFTER_QUIET_TICKS
            || !quiet_rate(config, packets, elapsed_ns)
        {
            return Change::None;
        }
        let set_aside = topology.set_aside();
        let watched = topology
            .online
            .iter()
            .filter(|cpu| !set_aside.contains(*cpu));
        match NapiPollWake::open(watched, config.quiet.wake_after_polls) {
            Ok(wake) => {
                if !wake.skipped().is_empty() {
                    info!(cpus = ?wake.skipped(), "quiet mode: CPUs that went offline are not watched");
                }
                self.wake = Some(wake);
                Change::FellAsleep
            }
            Err(e) => {
                warn!(error = %e, "quiet mode unavailable, ticking every {}: {e}", humantime::format_duration(config.interval));
                self.unavailable = Some(e.to_string());
                Change::Unavailable
            }
        }
    }

    /// Receive work woke the daemon: back to ticking every interval, the next tick now and
    /// the one after it soon.
    pub fn woken_by_receive_work(&mut self) -> Change {
        self.recent = Recent::default();
        self.streak = 0;
        match self.wake.take() {
            Some(wake) => {
                self.retired = Some(wake);
                self.follow_up = true;
                // Reset by the first tick that decides; doubled if none does.
                self.enter_after = (self.enter_after * 2).min(MAX_ENTER_AFTER_QUIET_TICKS);
                Change::WokeUp
            }
            None => Change::None,
        }
    }

    /// The descriptor of the events a wake-up retired, still open: to take it out of the
    /// caller's epoll set at once.
    pub fn retired_fd(&self) -> Option<BorrowedFd<'_>> {
        self.retired.as_ref().map(AsFd::as_fd)
    }

    /// Closes the retired events; call it after the tick (see `retired`).
    pub fn close_retired(&mut self) {
        self.retired = None;
    }

    /// Quiet mode cannot work (the caller could not wait on the descriptor): awake until
    /// the next reload.
    pub fn give_up(&mut self, reason: String) {
        self.unavailable = Some(reason);
        self.wake = None;
        self.follow_up = false;
    }

    /// A reload: on the running machine, tries the events again if they had failed. (A
    /// change of `quiet.enabled` or of the intervals takes effect at the next tick.)
    pub fn reloaded(&mut self) {
        if self.host {
            self.unavailable = None;
        }
        self.recent = Recent::default();
        self.streak = 0;
        self.enter_after = ENTER_AFTER_QUIET_TICKS;
    }

    fn wake_up(&mut self) -> Change {
        if self.wake.take().is_some() {
            Change::WokeUp
        } else {
            Change::None
        }
    }
}

/// Whether `packets` on one CPU in `elapsed_ns` is at most `wake_after_polls` per
/// `quiet.interval`: a rate at which a sleep would mostly run its full length instead of
/// being cut short by the events.
fn quiet_rate(config: &Config, packets: u64, elapsed_ns: u64) -> bool {
    let per_quiet_interval = config.quiet.interval.as_nanos() as f64;
    let allowed = config.quiet.wake_after_polls as f64 * elapsed_ns as f64 / per_quiet_interval;
    packets as f64 <= allowed
}

/// The last [`ENTER_AFTER_QUIET_TICKS`] ticks' packets and lengths, in a fixed array (an
/// idle tick allocates nothing).
#[derive(Debug, Default)]
struct Recent {
    ticks: [(u64, u64); ENTER_AFTER_QUIET_TICKS as usize],
    len: u32,
    next: usize,
}

impl Recent {
    fn push(&mut self, packets: u64, elapsed_ns: u64) {
        self.ticks[self.next] = (packets, elapsed_ns);
        self.next = (self.next + 1) % self.ticks.len();
        self.len = (self.len + 1).min(ENTER_AFTER_QUIET_TICKS);
    }

    /// Packets and nanoseconds summed over the ticks held. (The sum of each tick's busiest
    /// CPU: at least the busiest CPU's own sum.)
    fn total(&self) -> (u64, u64) {
        self.ticks.iter().fold((0, 0), |(p, t), &(packets, ns)| {
            (p.saturating_add(packets), t.saturating_add(ns))
        })
    }
}

fn enabled(config: &Config) -> bool {
    config.quiet.enabled && config.quiet.interval > config.interval
}

/// The most packets (softnet `processed`) any one CPU received between two samples. The
/// counter is 32 bits wide and wraps.
pub fn most_packets_on_one_cpu(previous: &Snapshot, current: &Snapshot) -> u64 {
    let mut most = 0u64;
    let mut before = previous.softnet.iter().peekable();
    for row in &current.softnet {
        while before.next_if(|old| old.cpu < row.cpu).is_some() {}
        // A CPU with no earlier row (just came online) has no delta yet.
        if let Some(old) = before.next_if(|old| old.cpu == row.cpu) {
            most = most.max(u64::from(row.processed.wrapping_sub(old.processed)));
        }
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::SoftnetRow;

    fn snapshot(rows: &[(u32, u32)]) -> Snapshot {
        snapshot_at(0, rows)
    }

    fn snapshot_at(secs: u64, rows: &[(u32, u32)]) -> Snapshot {
        Snapshot {
            taken_at_ns: secs * 1_000_000_000,
            softnet: rows
                .iter()
                .map(|&(cpu, processed)| SoftnetRow {
                    cpu,
                    processed,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_busiest_cpu_counts_including_a_wrapped_counter() {
        let before = snapshot(&[(0, 100), (1, u32::MAX - 4), (3, 7)]);
        let after = snapshot(&[(0, 110), (1, 20), (2, 5000), (3, 7)]);
        // CPU 1 wrapped: 25 packets; CPU 2 has no earlier row.
        assert_eq!(most_packets_on_one_cpu(&before, &after), 25);
    }

    fn quiet_config() -> Config {
        Config::default()
    }

    fn two_cpus() -> Topology {
        let all = crate::cpuset::CpuSet::first_n(2);
        Topology {
            nr_cpu_ids: 2,
            possible: all.clone(),
            present: all.clone(),
            online: all,
            online_from_file: true,
            isolated: Default::default(),
            nohz_full: Default::default(),
            isolated_partitions: Default::default(),
            cpus: Vec::new(),
            nodes: Vec::new(),
        }
    }

    #[test]
    fn wake_ups_that_come_to_nothing_double_the_ticks_needed_and_a_decision_resets_them() {
        // Needs real events to be asleep at all (root with perf); skips otherwise.
        let open = || NapiPollWake::open([0], 1_000_000);
        if let Err(e) = open() {
            eprintln!("skipping: no napi:napi_poll perf event here: {e}");
            return;
        }
        let mut quiet = Quiet::new(true);
        let mut needed = Vec::new();
        for _ in 0..6 {
            quiet.wake = Some(open().unwrap());
            assert_eq!(quiet.woken_by_receive_work(), Change::WokeUp);
            assert!(quiet.retired_fd().is_some());
            quiet.close_retired();
            needed.push(quiet.enter_after);
        }
        assert_eq!(needed, [6, 12, 24, 48, 48, 48]);
        let s = snapshot_at(1, &[(0, 0)]);
        quiet.after_tick(&quiet_config(), &two_cpus(), false, &s, &s);
        assert_eq!(quiet.enter_after, ENTER_AFTER_QUIET_TICKS);
    }

    #[test]
    fn another_root_never_sleeps() {
        let mut quiet = Quiet::new(false);
        let config = quiet_config();
        let s = snapshot(&[(0, 1)]);
        for _ in 0..10 {
            assert_eq!(
                quiet.after_tick(&config, &two_cpus(), true, &s, &s),
                Change::None
            );
        }
        assert!(!quiet.is_asleep());
        assert_eq!(quiet.gap(&config), None);
    }

    #[test]
    fn a_quiet_interval_not_above_the_interval_turns_it_off() {
        let mut config = quiet_config();
        config.interval = Duration::from_secs(5);
        assert!(!Quiet::new(true).available(&config));
        config.quiet.enabled = false;
        config.interval = Duration::from_secs(1);
        assert!(!Quiet::new(true).available(&config));
    }

    #[test]
    fn quiet_is_at_most_wake_after_polls_packets_per_quiet_interval() {
        // 64 per 5 s: 12.8 packets per second on the busiest CPU.
        let config = quiet_config();
        let second = 1_000_000_000;
        assert!(quiet_rate(&config, 12, second));
        assert!(!quiet_rate(&config, 13, second));
        assert!(quiet_rate(&config, 64, 5 * second));
        assert!(!quiet_rate(&config, 65, 5 * second));
    }

    #[test]
    fn a_burst_in_one_tick_counts_over_the_last_three() {
        let mut recent = Recent::default();
        for (packets, ns) in [(500, 1), (20, 1_000_000_000), (0, 1_000_000_000)] {
            recent.push(packets, ns);
        }
        assert_eq!(recent.len, 3);
        recent.push(1, 1_000_000_000);
        // The first tick left the window: 21 packets in 3 s, 7 a second, is quiet.
        let (packets, ns) = recent.total();
        assert_eq!((packets, ns), (21, 3_000_000_000));
        assert!(quiet_rate(&quiet_config(), packets, ns));
    }

    #[test]
    fn busy_or_deciding_ticks_are_not_quiet() {
        // Were either taken for quiet, the third tick would open real perf events (or,
        // without the privilege, mark quiet mode unavailable): both are checked.
        let config = quiet_config();
        let before = snapshot_at(1, &[(0, 0), (1, 0)]);
        let busy = snapshot_at(2, &[(0, 0), (1, 13)]);
        let mut quiet = Quiet::new(true);
        for _ in 0..10 {
            assert_eq!(
                quiet.after_tick(&config, &two_cpus(), true, &before, &busy),
                Change::None
            );
        }
        assert!(!quiet.is_asleep() && quiet.available(&config));
        let calm = snapshot_at(2, &[(0, 0), (1, 0)]);
        let mut quiet = Quiet::new(true);
        for _ in 0..10 {
            assert_eq!(
                quiet.after_tick(&config, &two_cpus(), false, &before, &calm),
                Change::None
            );
        }
        assert!(!quiet.is_asleep() && quiet.available(&config));
    }
}
