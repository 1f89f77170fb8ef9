//! Carrying out the policy's actions: each goes through the actuator (or is only recorded
//! in observe-only mode), is logged and counted, and its outcome flows back into the model
//! and the policy. A failed write gets the reaction its kind calls for (give up, retry
//! with backoff, turn observe-only, rediscover). Also the periodic read-back of what
//! steerd wrote, the one place that notices someone else's change between rediscoveries.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tracing::{error, info, warn};

use super::report::unix_now;
use super::{Daemon, NOT_TAKEN_RETRIES};
use crate::apply::{FailureKind, WriteFailure};
use crate::decisions::Decision;
use crate::knob::{Knob, KnobValue};
use crate::policy::Action;
use crate::status_report::NoWrites;

impl Daemon {
    pub(super) fn apply(&mut self, action: Action) {
        self.decide_needed = true;
        let knob = &action.target;
        let mask_words = self.mask_words(knob);
        let now_ns = self.current.taken_at_ns;
        let outcome = if self.observe_only.is_some() {
            "dry_run".to_string()
        } else if !self.actuator.may_try(knob, now_ns) {
            return;
        } else {
            match self.actuator.write(knob, &action.new, mask_words, now_ns) {
                Ok(written) => {
                    if let Knob::IrqAffinity { irq } = knob {
                        self.irq_not_taken.remove(irq);
                    }
                    self.policy.record_applied(&action, now_ns);
                    self.record_written(knob, &written.after);
                    "applied".to_string()
                }
                Err(failure) => {
                    self.on_failure(&action, &failure);
                    format!("failed: {}", failure.message)
                }
            }
        };
        let metrics = &self.shared.metrics;
        let reason = action.reason.kind.as_str();
        if outcome == "applied" || outcome == "dry_run" {
            metrics.count_action(knob.kind(), reason);
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
            outcome,
        };
        if let Ok(mut log) = self.shared.decisions.lock() {
            log.push(decision);
        }
    }

    fn on_failure(&mut self, action: &Action, failure: &WriteFailure) {
        if failure.kind == FailureKind::ChangedByOthers {
            // Not an error: someone else set the value since steerd wrote it, and the
            // model has not seen it yet. Show the policy what is there; it notes the
            // change and follows on_external_change from the next tick.
            if let Ok((_, now)) = self.actuator.read(&failure.knob) {
                self.record_written(&action.target, &now);
            }
            return;
        }
        self.shared
            .metrics
            .count_write_error(failure.kind.label(), &failure.errno_name());
        let refused = matches!(
            failure.kind,
            FailureKind::Managed
                | FailureKind::Bug
                | FailureKind::NotTaken
                | FailureKind::NoVectorSpace
        );
        if failure.kind != FailureKind::Vanished {
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
        match failure.kind {
            FailureKind::Managed => {
                if let Knob::IrqAffinity { irq } = failure.knob {
                    if self.reported_managed.insert(irq) {
                        warn!(irq, error = %failure, "IRQ is managed by the kernel; never moving it again: {failure}");
                    }
                    self.shared
                        .metrics
                        .unmanageable_irqs
                        .set(self.reported_managed.len() as i64);
                }
                self.policy
                    .record_failed(action.target.clone(), failure.message.clone());
            }
            FailureKind::NotTaken
                if let Knob::IrqAffinity { irq } = failure.knob
                    && self.irq_not_taken.get(&irq).copied().unwrap_or(0) < NOT_TAKEN_RETRIES =>
            {
                *self.irq_not_taken.entry(irq).or_default() += 1;
                warn!(error = %failure, "the kernel did not take this affinity (a move in flight?); retrying later with backoff: {failure}");
            }
            FailureKind::Bug | FailureKind::NotTaken => {
                error!(error = %failure, "the kernel does not take this value; not proposing it again: {failure}");
                self.policy
                    .record_failed(action.target.clone(), failure.message.clone());
            }
            FailureKind::NotAllowed => {
                warn!(error = %failure, "not allowed to write, so observe-only from now on (fix the permission, then restart steerd): {failure}");
                self.observe_only = Some(failure.message.clone());
                self.shared.metrics.observe_only.set(1);
                let why = format!("not allowed to write: {}", failure.message);
                self.with_status(|status| status.no_writes = Some(NoWrites::ObserveOnly(why)));
            }
            FailureKind::Vanished => {
                self.rediscover("a target vanished");
                self.plan_stale = true;
            }
            FailureKind::NoVectorSpace => {
                warn!(error = %failure, "the target CPU has no free interrupt vector; not proposing this move again: {failure}");
                self.policy
                    .record_failed(action.target.clone(), failure.message.clone());
            }
            FailureKind::Transient | FailureKind::Other => {
                warn!(error = %failure, "write failed; retrying later with backoff: {failure}")
            }
            FailureKind::ChangedByOthers => {}
        }
    }

    /// Keeps the in-memory model in step with a value read back (after a successful
    /// write, or found changed by someone else), so the next decision starts from what
    /// is really there.
    fn record_written(&mut self, knob: &Knob, value: &KnobValue) {
        self.placement.set(knob, value);
        let inventory = &mut self.machine.inventory;
        match (knob, value) {
            (Knob::IrqAffinity { irq }, KnobValue::Cpus(cpus)) => {
                if let Ok(index) = inventory.irqs.binary_search_by_key(irq, |i| i.irq) {
                    let entry = &mut inventory.irqs[index];
                    entry.affinity = Some(cpus.clone());
                    // The kernel delivers it to the new mask from the next interrupt on;
                    // until rediscovery reads effective_affinity again, a single-CPU mask
                    // is where it fires, and for a wide mask nobody knows yet (the
                    // policy's placement does the same). Without this,
                    // steerd_irq_effective_cpu kept the old CPU for up to
                    // REDISCOVER_EVERY after every move.
                    entry.effective_affinity = (cpus.len() == 1).then(|| cpus.clone());
                }
            }
            (Knob::RpsCpus { device, queue }, KnobValue::Cpus(cpus)) => {
                if let Some(q) = rx_queue_mut(inventory, device, *queue) {
                    q.rps_cpus = Some(cpus.clone());
                }
            }
            (Knob::RpsFlowCnt { device, queue }, KnobValue::Count(n)) => {
                if let Some(q) = rx_queue_mut(inventory, device, *queue) {
                    q.rps_flow_cnt = Some(*n);
                }
            }
            (Knob::RpsSockFlowEntries, KnobValue::Count(n)) => {
                inventory.rps_sock_flow_entries = Some(*n);
            }
            _ => {}
        }
        self.export_placement();
    }

    fn mask_words(&self, knob: &Knob) -> u32 {
        mask_words_in(
            &self.machine.inventory,
            knob,
            self.machine.topology.nr_cpu_ids,
        )
    }

    /// Reads back every value steerd wrote; if one is not what steerd wrote, someone else
    /// changed it (or the device was re-created): rediscover, so the policy sees it.
    pub(super) fn recheck_written(&mut self) {
        self.last_recheck = Instant::now();
        let changed = self.actuator.changed().any(|(knob, _)| {
            let now = self.actuator.read(knob).ok().map(|(_, value)| value);
            now.as_ref() != self.actuator.last_written(knob)
        });
        if changed {
            self.rediscover("a value steerd wrote changed");
        }
    }
}

fn rx_queue_mut<'a>(
    inventory: &'a mut crate::model::inventory::Inventory,
    device: &str,
    queue: u32,
) -> Option<&'a mut crate::model::inventory::RxQueue> {
    inventory
        .devices
        .iter_mut()
        .find(|d| d.name == device)?
        .rx_queues
        .iter_mut()
        .find(|q| q.index == queue)
}

/// The width (32-bit words) a knob's mask is printed in: the width the kernel printed an
/// `rps_cpus` in when read, else the one `nr_cpu_ids` gives.
pub(super) fn mask_words_in(
    inventory: &crate::model::inventory::Inventory,
    knob: &Knob,
    nr_cpu_ids: u32,
) -> u32 {
    let default = nr_cpu_ids.div_ceil(32).max(1);
    match knob {
        Knob::RpsCpus { device, queue } => inventory
            .device(device)
            .and_then(|d| d.rx_queues.iter().find(|q| q.index == *queue))
            .map(|q| q.rps_mask_words)
            .filter(|&w| w > 0)
            .unwrap_or(default),
        _ => default,
    }
}
