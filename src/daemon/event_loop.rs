//! The event loop: one wait on every wake-up source (see [`super::wakeups`]), then a tick
//! when its deadline has come. It decides *when* things happen (a signal, a link or queue
//! event, a followed file, a cgroup partition change, receive work in quiet mode, the next
//! tick's deadline), never *what* a tick does: that is [`super::tick`].

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use tracing::{debug, error, info, warn};

use super::rediscovery::Rediscovery;
use super::{Daemon, FAST_TICK_MIN, quiet, wakeups};
use crate::kernel::link_events::LinkEvents;
use crate::kernel::queue_events::QueueEvents;

/// Whether a drained event socket (link or queue events) heard a change: a count above 0,
/// or a failed drain, since rediscovering is the safe answer to not knowing; no socket
/// (`None`) hears nothing.
fn changed(drained: Option<std::io::Result<usize>>) -> bool {
    matches!(drained, Some(Ok(1..) | Err(_)))
}

impl Daemon {
    pub(super) fn run(&mut self, signals: &mut wakeups::Signals) -> Result<(), super::StartError> {
        let mut waiter = wakeups::Waiter::new(
            signals,
            self.link_events.as_ref().map(AsFd::as_fd),
            self.queue_events.as_ref().map(AsFd::as_fd),
            self.ethtool_events.as_ref().map(AsFd::as_fd),
        )
        .map_err(super::StartError::Wakeups)?;
        // The first tick at once: it takes the baseline sample the next one measures from.
        let mut last_tick = Instant::now();
        self.tick_once();
        let mut next_tick = Instant::now() + self.next_tick_in();
        'ticking: loop {
            if let Err(e) = waiter.follow(self.files.as_ref().map(AsFd::as_fd)) {
                warn!(error = %e, "cannot follow the watched files; reload with SIGHUP: {e}");
                self.files = None;
            }
            if let Err(e) = waiter.follow_partitions(self.partition_watch_fd()) {
                // Not expected (epoll_ctl on a new descriptor): each tick still reads them.
                self.stop_watching_partitions(e);
            }
            if let Err(e) = waiter.watch_receive(self.quiet.wake_fd()) {
                // Not expected (epoll_ctl on a new descriptor): stay awake until a reload.
                warn!(error = %e, "cannot wait for receive work; quiet mode off until a reload: {e}");
                self.quiet.give_up(format!("epoll_ctl: {e}"));
                self.export_quiet_state();
                next_tick = next_tick.min(Instant::now() + self.engine.config().interval);
            }
            let mut timeout = next_tick.saturating_duration_since(Instant::now());
            if let Some(ping) = self.until_watchdog_ping() {
                timeout = timeout.min(ping);
            }
            let ready = match waiter.wait(timeout) {
                Ok(ready) => ready,
                Err(e) => {
                    // Not expected (epoll_wait fails only on bad arguments); wait a
                    // tick rather than spin.
                    error!(error = %e, "epoll_wait failed: {e}");
                    std::thread::sleep(timeout);
                    wakeups::Ready::default()
                }
            };
            // Something for the next tick to act on: while asleep in quiet mode, that tick
            // comes now, not at the end of the sleep.
            let mut act_now = false;
            if ready.signal {
                for request in signals.pending() {
                    match request {
                        wakeups::Request::Reload => {
                            self.reload("SIGHUP");
                            act_now = true;
                        }
                        wakeups::Request::Stop(signal) => {
                            info!(signal, "stopping");
                            break 'ticking;
                        }
                    }
                }
            }
            if ready.link && changed(self.link_events.as_mut().map(LinkEvents::drain)) {
                self.rediscover(Rediscovery::LinkEvent);
                act_now = true;
            }
            // Most uevents are not about network queues: those cost one `recv` each.
            if ready.queues && changed(self.queue_events.as_mut().map(QueueEvents::drain)) {
                self.rediscover(Rediscovery::QueueEvent);
                act_now = true;
            }
            if ready.ethtool {
                let heard = self
                    .ethtool_events
                    .as_mut()
                    .map_or(Default::default(), |events| {
                        events
                            .drain()
                            .unwrap_or(crate::kernel::ethtool_events::Heard {
                                channels: 1,
                                rss: 1,
                                channels_anywhere: true,
                                ..Default::default()
                            })
                    });
                self.channels_set.hear(&heard);
                if heard.any() {
                    let why = match (heard.channels > 0, heard.rss > 0) {
                        (true, true) => Rediscovery::EthtoolChannelsAndRss,
                        (true, false) => Rediscovery::EthtoolChannels,
                        _ => Rediscovery::EthtoolRss,
                    };
                    self.rediscover(why);
                    act_now = true;
                }
            }
            if ready.files && self.files.as_mut().is_some_and(|files| files.drain()) {
                self.files_changed = true;
                act_now = true;
            }
            if ready.partitions && self.partitions_may_have_changed() {
                // A fact to act on within a moment, whatever the interval or quiet mode:
                // the tick reads the partitions and decides.
                next_tick = next_tick.min(Instant::now().max(last_tick + FAST_TICK_MIN));
            }
            if ready.receive && self.quiet.woken_by_receive_work() == quiet::Change::WokeUp {
                // Out of the epoll set at once: until it is closed after the tick, more
                // receive work would end every wait at once.
                if let Some(fd) = self.quiet.retired_fd() {
                    waiter.unwatch_receive(fd);
                }
                self.shared.metrics.quiet_receive_wakeups.inc();
                self.export_quiet_state();
                debug!("receive work ended quiet mode");
                // Tick now: its sample is the baseline the fast follow-up measures from.
                next_tick = next_tick.min(Instant::now().max(last_tick + FAST_TICK_MIN));
            }
            if act_now && self.quiet.is_asleep() {
                next_tick = next_tick.min(Instant::now().max(last_tick + FAST_TICK_MIN));
            }
            let now = Instant::now();
            if now >= next_tick {
                last_tick = now;
                self.tick_once();
                // After the tick: closing them waits for an RCU grace period.
                self.quiet.close_retired();
                // The next deadline keeps the tick's phase; a tick that overran its slot
                // starts the next one a full gap later rather than a burst of catch-ups.
                let gap = self.next_tick_in();
                self.quiet.followed_up();
                next_tick += gap;
                let now = Instant::now();
                if next_tick <= now {
                    next_tick = now + gap;
                }
            }
            self.ping_watchdog();
        }
        self.shutdown();
        Ok(())
    }

    /// The gap to the next tick: the configured interval, or a quarter of it (at least
    /// [`FAST_TICK_MIN`]) while a hot signal awaits confirmation, so that the K
    /// confirming samples come within about a second instead of K intervals, and after
    /// the baseline sample at start, so that the first decision (stacked or misplaced
    /// vectors, unpinned NAPI threads: facts that need no rates) comes a quarter interval
    /// after the start rather than a whole one. Load rates from that first short window
    /// only start the smoothed load; acting on heat still takes `confirm_ticks` samples.
    /// Also fast in an RPS trial's first decisions, so that a trial that harms is undone
    /// within about half a second (`PolicyState::rps_trial_early`).
    pub(super) fn next_tick_in(&self) -> Duration {
        let config = self.engine.config();
        if let Some(gap) = self.quiet.gap(config) {
            return gap;
        }
        let interval = config.interval;
        // `self.tick <= 1`: only right after the start, not while sampling keeps failing
        // (the engine then stays at its baseline, and would tick 4 times a second).
        if (self.engine.baseline_only() && self.tick <= 1)
            || self
                .engine
                .policy()
                .confirming(config.hysteresis.confirm_ticks)
            || self.engine.policy().rps_trial_early()
        {
            (interval / 4).max(FAST_TICK_MIN).min(interval)
        } else {
            interval
        }
    }
}
