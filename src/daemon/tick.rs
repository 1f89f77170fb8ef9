//! One tick of the daemon: look at followed files and timers, sample, hand the sample to
//! the engine with the actuator as its writer, report what the engine did. Kept apart
//! from the loop that schedules it ([`super::event_loop`]) so that what a tick does reads
//! top to bottom in one place; what a tick decides and writes is the engine's
//! ([`crate::engine`]), shared with `steerd plan` and the simulator.

use std::time::{Duration, Instant};

use tracing::{debug, error, info, warn};

use super::discovery::online_cpus_changed;
use super::lasting_failure::Occurrence;
use super::rediscovery::Rediscovery;
use super::report::unix_now;
use super::{
    Daemon, RECHECK_EVERY, REDISCOVER_EVERY, RETURN_FREE_PAGES_EVERY, STAT_EVERY_IDLE_TICKS, quiet,
};
use crate::engine::sampling::{Depth, DeviceChange};
use crate::engine::{MoveEffect, MoveVerdict, Sample, TickKind, TickReport};
use crate::kernel::procfs::softnet;
use crate::metrics::ResultLabels;
use crate::policy;
use crate::status_report::{Calm, Verdict};

impl Daemon {
    pub(super) fn tick_once(&mut self) {
        let started = Instant::now();
        self.tick += 1;
        if self.files_changed {
            self.files_changed = false;
            self.look_at_followed_files();
        }
        // The device check runs once a tick: before the read-back when one is due, else
        // after the sample.
        let mut devices_checked = false;
        if self.last_discovery.elapsed() >= REDISCOVER_EVERY {
            self.rediscover(Rediscovery::Periodic);
        } else if self.last_recheck.elapsed() >= RECHECK_EVERY {
            devices_checked = true;
            // A vanished multi-queue device is the device check's finding
            // (`device_vanished`), not a value the read-back could not read.
            if !self.rediscover_if_device_changed() {
                self.recheck_written();
            }
        }
        // Every RETURN_FREE_PAGES_EVERY a tick ends by handing glibc's free pages back:
        // crate::memory::return_free_pages says why.
        let return_free_pages = self.last_free_pages.elapsed() >= RETURN_FREE_PAGES_EVERY;
        self.follow_isolated_partitions();
        self.follow_busy_poll_threads();
        let depth = if self.idle_ticks > 0
            && !self.idle_ticks.is_multiple_of(STAT_EVERY_IDLE_TICKS)
            && !self.quiet.is_asleep()
        {
            Depth::SoftnetOnly
        } else {
            Depth::Full
        };
        let rediscovered = match self.sample_through_hot_plug(depth) {
            Ok(rediscovered) => {
                if let Some(times) = self.sampling_failure.ended() {
                    info!(
                        skipped = times,
                        "sampling works again after {times} skipped tick(s)"
                    );
                }
                rediscovered
            }
            Err(e) => {
                let message = e.to_string();
                match self.sampling_failure.happened(&message) {
                    Occurrence::New => {
                        error!(error = %e, "sampling failed; skipping this tick (and, while it lasts, every tick, counted in steerd_sampling_failures_total): {e}");
                    }
                    Occurrence::Repeated => debug!(error = %e, "sampling failed again: {e}"),
                }
                self.shared.metrics.sampling_failures.inc();
                self.set_verdict(Verdict::SamplingFailed, None);
                return;
            }
        };
        if !rediscovered && !devices_checked {
            self.rediscover_if_device_changed();
        }
        let sampling = &self.sampling;
        // The actuator only writes and reads back; whether to write at all (--dry-run,
        // not root, a write not allowed) is the engine's (`Engine::writing_stopped`).
        let report = self.engine.tick(
            Sample {
                snapshot: &mut self.next_sample,
                interrupts: &mut || sampling.interrupts(),
            },
            &mut self.actuator,
        );
        self.report_tick(report);
        self.finish_tick(started);
        if return_free_pages {
            self.last_free_pages = Instant::now();
            crate::memory::return_free_pages();
        }
    }

    /// Rediscovers when a multi-queue device vanished or switched threaded NAPI since the
    /// model was read (`Sampling::device_changed`: one small read and one `stat` per such
    /// device, and on 6.17+ one `napi-get` dump for the NAPIs' own modes); returns whether
    /// it did.
    fn rediscover_if_device_changed(&mut self) -> bool {
        let Some(change) = self
            .sampling
            .device_changed(&self.engine.machine().inventory)
        else {
            return false;
        };
        // Debug only: the rediscovery's own line ("machine changed", why) tells it, and a
        // rediscovery that keeps failing would repeat this every tick.
        let reason = match &change {
            DeviceChange::Vanished(device) => {
                debug!(
                    device,
                    "{device} vanished (gone from sys/class/net, or being unregistered); rediscovering"
                );
                Rediscovery::DeviceVanished
            }
            DeviceChange::ThreadedSwitched(device) => {
                debug!(device, "threaded NAPI of {device} switched; rediscovering");
                Rediscovery::ThreadedSwitched
            }
        };
        self.rediscover(reason);
        true
    }

    /// Samples into `next_sample`; on CPU hot-plug, rediscovers and samples again. Returns
    /// whether it rediscovered.
    ///
    /// Why again: on kernels before 5.10 `softnet_stat` rows carry no CPU id and are
    /// mapped to the online CPUs of the last discovery, so a sample read against the old
    /// list is wrong (a CPU went offline: the rows after it land on their neighbours) or
    /// fails (a CPU came online: more rows than the list). The second read costs one
    /// `pread` per hot-plug.
    fn sample_through_hot_plug(&mut self, depth: Depth) -> Result<bool, crate::Error> {
        let sampled = self
            .sampling
            .sample(&mut self.next_sample, depth, self.engine.last_sample());
        let hot_plug = match &sampled {
            Err(e) => softnet::outgrew_online(e),
            Ok(()) => self
                .engine
                .last_sample()
                .is_some_and(|last| online_cpus_changed(last, &self.next_sample)),
        };
        if !hot_plug {
            return sampled.map(|()| false);
        }
        self.rediscover(Rediscovery::CpuHotplug);
        self.sampling
            .sample(&mut self.next_sample, depth, self.engine.last_sample())?;
        Ok(true)
    }

    /// Logs, counts and shows what the engine did this tick.
    fn report_tick(&mut self, mut report: TickReport) {
        for verdict in &report.moves {
            self.report_move(verdict);
        }
        match report.kind {
            TickKind::Baseline => self.set_verdict(Verdict::Baseline, None),
            TickKind::Skipped => {
                self.set_verdict(Verdict::Calm(self.calm()), None);
                self.idle_ticks += 1;
                self.skipped_this_tick = true;
                self.shared.metrics.ticks_skipped.inc();
                self.export_load();
            }
            TickKind::Decided => {
                self.idle_ticks = 0;
                if report.plan.actions.is_empty() {
                    self.set_verdict(Verdict::NothingToDo, report.plan.idle_reason.take());
                } else {
                    let actions = u32::try_from(report.plan.actions.len()).unwrap_or(u32::MAX);
                    self.set_verdict(Verdict::Acted { actions }, None);
                }
                // A plan repeats every standing note (a managed IRQ, a value someone else
                // set) on every tick, flagged `new` only the first time: log and count
                // that one, or a 1 s tick logs the same line 86400 times a day.
                for note in report.plan.notes.iter().filter(|note| note.new) {
                    info!(note = %note.text, kind = note.kind.as_str(), "policy note ({}): {}", note.kind.as_str(), note.text);
                    if note.kind == policy::NoteKind::ExternalChange {
                        self.shared.metrics.external_changes.inc();
                    }
                }
                for (action, outcome) in report.actions() {
                    self.report_action(action, outcome);
                }
                // A write that found someone else's value is read again at once, as the
                // periodic read-back does: a channel change the daemon has not heard yet
                // (a queue uevent in flight, or none under a fake root) resets the
                // driver's vectors, and the rediscovery takes that reset over as the
                // driver's (`after_queue_change`) before the policy's next tick would
                // note it as someone else's change (`daemon_fakeroot`'s
                // `places_again_after_a_channel_count_change`: a hot-CPU move of a vector
                // the second `ethtool -L` had just reset, 2026-11-28).
                if report.rediscover {
                    self.rediscover(Rediscovery::TargetVanished);
                } else if report.found_changed() {
                    self.rediscover(Rediscovery::WriteFoundChanged);
                } else if !report.outcomes.is_empty() {
                    self.export_placement();
                }
                self.export_rss_steps();
                self.export_load();
            }
        }
    }

    /// Logs and counts what the check of a queue vector's move found (`move_check`): a
    /// warning when it did not take effect, else an info line.
    fn report_move(&self, verdict: &MoveVerdict) {
        let result = verdict.effect.label();
        self.shared
            .metrics
            .irq_move_checks
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
        let irq = verdict.irq;
        if let MoveEffect::NoEffect { .. } = verdict.effect {
            warn!(irq, result, "{verdict}");
        } else {
            info!(irq, result, "{verdict}");
        }
    }

    /// The numbers of a calm tick's sentence: the thresholds and the busiest CPU (as
    /// `plan` reports it), without allocating.
    fn calm(&self) -> Calm {
        let busiest = self.engine.load().busiest_cpu();
        let w = &self.engine.config().watermarks;
        Calm {
            high_watermark: w.high,
            imbalance: w.imbalance,
            busy_pps: w.busy_pps,
            busiest,
        }
    }

    fn finish_tick(&mut self, started: Instant) {
        let skipped = std::mem::take(&mut self.skipped_this_tick);
        if let Some((previous, current)) = self.engine.last_two_samples() {
            let change = self.quiet.after_tick(
                self.engine.config(),
                &self.engine.machine().topology,
                skipped,
                previous,
                current,
            );
            if change != quiet::Change::None {
                self.export_quiet_state();
                debug!(?change, "quiet mode");
            }
        }
        let config = self.engine.config();
        let (tick, interval_s, quiet_interval_s) = (
            self.tick,
            config.interval.as_secs_f64(),
            config.quiet.interval.as_secs_f64(),
        );
        let interval = config.interval;
        let now_unix = unix_now();
        self.with_status(|status| status.record_tick(tick, now_unix, interval_s, quiet_interval_s));
        let metrics = &self.shared.metrics;
        metrics.ticks.inc();
        metrics
            .tick_duration
            .observe(started.elapsed().as_secs_f64());
        // Healthy while the next tick comes within three gaps (a tick may take a
        // rediscovery longer than usual).
        self.shared
            .health
            .beat(self.next_tick_in().max(interval) * 3 + Duration::from_secs(2));
        self.ping_watchdog();
    }
}
