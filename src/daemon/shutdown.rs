//! Staying alive and stopping cleanly: systemd's watchdog, pinged only from the tick loop
//! (a stuck loop gets steerd restarted), and the shutdown after SIGTERM/SIGINT, which
//! restores every value steerd changed (unless `restore_on_exit: false`) and stops the
//! HTTP thread.

use std::time::{Duration, Instant};

use tracing::{error, info};

use super::Daemon;

impl Daemon {
    /// Pings systemd's watchdog at half its timeout. Called from the loop, after whatever
    /// woke it: a loop stuck in a tick stops the pings and systemd restarts steerd.
    pub(super) fn ping_watchdog(&mut self) {
        if let Some(timeout) = self.watchdog
            && self.last_watchdog.elapsed() >= timeout / 2
        {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
            self.last_watchdog = Instant::now();
        }
    }

    /// How long the loop may sleep before the next watchdog ping is due (with a tick
    /// interval longer than half the watchdog timeout, the loop wakes just to ping).
    pub(super) fn until_watchdog_ping(&self) -> Option<Duration> {
        let timeout = self.watchdog?;
        Some((timeout / 2).saturating_sub(self.last_watchdog.elapsed()))
    }

    pub(super) fn shutdown(&mut self) {
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::Status("restoring"),
        ]);
        if self.engine.config().restore_on_exit {
            let (restored, failures) = self.actuator.restore_all(false);
            info!(
                restored = restored.len(),
                failed = failures.len(),
                "restored original values"
            );
            for failure in failures {
                error!(error = %failure, "could not restore: {failure}");
            }
        } else {
            self.actuator.forget_all();
            info!("leaving the tuning in place (restore_on_exit: false)");
        }
        if let Some(server) = self.server.take() {
            server.stop(Duration::from_secs(2));
        }
        info!(
            ticks = self.tick,
            uptime_s = self.started.elapsed().as_secs(),
            "steerd stopped"
        );
    }
}
