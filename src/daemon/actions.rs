//! What became of each action of a tick, told outside: the journal line, the decision
//! log, `steerd_actions_total`, and for a failed write its error metric, the live status
//! and the one log line its reaction calls for (the engine decided the reaction: give up,
//! back off, stop writing, rediscover). Also the periodic read-back of what steerd wrote,
//! the one place that notices someone else's change between rediscoveries.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tracing::{error, info, warn};

use super::Daemon;
use super::rediscovery::Rediscovery;
use super::report::unix_now;
use crate::apply::{FailureKind, WriteFailure};
use crate::decisions::Decision;
use crate::engine::{Outcome, Reaction};
use crate::knob::Knob;
use crate::policy::Action;
use crate::status_report::NoWrites;

impl Daemon {
    pub(super) fn report_action(&mut self, action: &Action, outcome: &Outcome) {
        if !outcome.was_attempted() {
            return;
        }
        if let Outcome::Failed { failure, reaction } = outcome {
            self.on_failure(failure, *reaction);
        }
        let knob = &action.target;
        let reason = action.reason.kind.as_str();
        if outcome.counts_as_action() {
            self.shared.metrics.count_action(knob.kind(), reason);
        }
        info!(
            target_knob = %knob,
            serves = action.serves.as_deref().unwrap_or(""),
            old = %action.old,
            new = %action.new,
            reason,
            detail = %action.reason.text,
            expected = %action.expected,
            outcome = %outcome,
            // The message says it all on its own: `journalctl -u steerd` shows only it.
            "{knob}: {} -> {} ({reason}: {}) {outcome}",
            action.old,
            action.new,
            action.reason.text
        );
        let unix_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let decision = Decision {
            unix_time,
            tick: self.tick,
            target: knob.to_string(),
            action: knob.kind().to_string(),
            old: action.old.to_string(),
            new: action.new.to_string(),
            reason: reason.to_string(),
            detail: action.reason.text.clone(),
            outcome: outcome.to_string(),
        };
        if let Ok(mut log) = self.shared.decisions.lock() {
            log.push(decision);
        }
    }

    fn on_failure(&mut self, failure: &WriteFailure, reaction: Reaction) {
        if reaction == Reaction::TheirsNow {
            // Not an error: someone else set the value since steerd wrote it.
            return;
        }
        self.shared
            .metrics
            .count_write_error(failure.kind.label(), &failure.errno_name());
        if failure.kind != FailureKind::Vanished {
            // The kernel said no to the value (not a fault of the machine).
            let refused = matches!(
                failure.kind,
                FailureKind::Managed
                    | FailureKind::Bug
                    | FailureKind::NotTaken
                    | FailureKind::NoVectorSpace
            );
            let (message, now_unix) = (failure.to_string(), unix_now());
            self.with_status(|status| {
                if refused {
                    status.refusals += 1;
                } else {
                    status.write_errors += 1;
                    status.last_write_error = Some(message);
                    status.last_write_error_unix = now_unix;
                }
            });
        }
        match (failure.kind, reaction) {
            (FailureKind::Managed, _) => {
                if let Knob::IrqAffinity { irq } = failure.knob {
                    if self.reported_managed.insert(irq) {
                        warn!(irq, error = %failure, "IRQ is managed by the kernel; never moving it again: {failure}");
                    }
                    self.shared
                        .metrics
                        .unmanageable_irqs
                        .set(self.reported_managed.len() as i64);
                }
            }
            (FailureKind::NotTaken, Reaction::Retry) => {
                warn!(error = %failure, "the kernel did not take this affinity (a move in flight?); retrying later with backoff: {failure}");
            }
            (FailureKind::NoVectorSpace, _) => {
                warn!(error = %failure, "the target CPU has no free interrupt vector; not proposing this move again: {failure}");
            }
            (_, Reaction::GivenUp) => {
                error!(error = %failure, "the kernel does not take this value; not proposing it again: {failure}");
            }
            (_, Reaction::StopWriting) => {
                warn!(error = %failure, "not allowed to write, so observe-only from now on (fix the permission, then restart steerd): {failure}");
                self.shared.metrics.observe_only.set(1);
                let why = format!("not allowed to write: {}", failure.message);
                self.with_status(|status| status.no_writes = Some(NoWrites::ObserveOnly(why)));
            }
            (_, Reaction::Retry) => {
                warn!(error = %failure, "write failed; retrying later with backoff: {failure}")
            }
            (_, Reaction::Rediscover) => {
                info!(error = %failure, "the value vanished under the write (a device or IRQ going away); rediscovering: {failure}")
            }
            (_, Reaction::TheirsNow) => {}
        }
    }

    /// Reads back every value steerd wrote; if one is not what steerd wrote, someone else
    /// changed it (or the device was re-created): rediscover, so the policy sees it. A
    /// value the model already holds is a change seen before (respected, and kept in the
    /// state file for the restore rule): without this, one external change made every
    /// read-back (every `RECHECK_EVERY`) a rediscovery for as long as it stood (the lab's `rss-ntf`,
    /// 2026-11-28).
    /// A value that cannot be read because its file is gone (a queue or IRQ removed,
    /// a device unplugged) is a vanished target (`target_vanished`), as a write would find it.
    pub(super) fn recheck_written(&mut self) {
        self.last_recheck = Instant::now();
        let placement = self.engine.placement();
        let mut found = None;
        for (knob, _) in self.actuator.changed() {
            let now = match self.actuator.read(knob) {
                Ok((_, value)) => Some(value),
                Err(failure) if failure.kind == FailureKind::Vanished => {
                    found = Some(Rediscovery::TargetVanished);
                    break;
                }
                Err(_) => None,
            };
            if now.as_ref() != self.actuator.last_written(knob)
                && now
                    .as_ref()
                    .is_none_or(|now| placement.holds(knob, now) != Some(true))
            {
                found = Some(Rediscovery::ReadBackFoundChanged);
                break;
            }
        }
        if let Some(reason) = found {
            self.rediscover(reason);
        }
    }
}
