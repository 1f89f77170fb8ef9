//! One tick: sample, update the load, decide (or skip when nothing could change), apply
//! the plan, report. Kept apart from the loop that schedules it ([`super::event_loop`]) so
//! that what a tick does reads top to bottom in one place.

use std::time::{Duration, Instant};

use tracing::{debug, error, info, warn};

use super::discovery::online_cpus_changed;
use super::report::unix_now;
use super::{Daemon, RECHECK_EVERY, REDISCOVER_EVERY, STAT_EVERY_IDLE_TICKS, quiet};
use crate::kernel::queue_counters::DeviceId;
use crate::model::inventory::IrqRole;
use crate::policy::{self, DecideInput};
use crate::status_report::{Calm, Verdict};

impl Daemon {
    pub(super) fn tick_once(&mut self) {
        let started = Instant::now();
        self.tick += 1;
        if self.files_changed {
            self.files_changed = false;
            self.look_at_followed_files();
        }
        if self.last_discovery.elapsed() >= REDISCOVER_EVERY {
            self.rediscover("periodic");
        } else if self.last_recheck.elapsed() >= RECHECK_EVERY {
            self.recheck_written();
        }
        std::mem::swap(&mut self.previous, &mut self.current);
        let sampled = if self.idle_ticks > 0
            && !self.idle_ticks.is_multiple_of(STAT_EVERY_IDLE_TICKS)
            && !self.quiet.is_asleep()
        {
            self.current.carry_stat_from(&self.previous);
            self.sampler.sample_softnet_only(&mut self.current)
        } else {
            self.sampler.sample(&mut self.current)
        };
        if let Err(e) = sampled {
            error!(error = %e, "sampling failed; skipping this tick: {e}");
            std::mem::swap(&mut self.previous, &mut self.current);
            self.set_verdict(Verdict::SamplingFailed, None);
            return;
        }
        if self.have_previous && online_cpus_changed(&self.previous, &self.current) {
            self.rediscover("CPU hot-plug");
        }
        self.sample_queues();
        if self.have_previous {
            self.load
                .update(&self.previous, &self.current, self.config.load.smoothing);
            let input = DecideInput {
                topology: &self.machine.topology,
                inventory: &self.machine.inventory,
                load: &self.load,
                config: &self.config,
                placement: &self.placement,
                now_ns: self.current.taken_at_ns,
            };
            if policy::can_skip(&input, &self.policy, !self.decide_needed) {
                policy::skip_tick(&mut self.policy);
                self.set_verdict(Verdict::Calm(self.calm()), None);
                self.idle_ticks += 1;
                self.skipped_this_tick = true;
                self.shared.metrics.ticks_skipped.inc();
                self.export_load();
                self.finish_tick(started);
                return;
            }
            self.decide_needed = false;
            self.idle_ticks = 0;
            self.locate_wide_vectors();
            let input = DecideInput {
                topology: &self.machine.topology,
                inventory: &self.machine.inventory,
                load: &self.load,
                config: &self.config,
                placement: &self.placement,
                now_ns: self.current.taken_at_ns,
            };
            let mut plan = policy::decide(&input, &mut self.policy);
            if plan.actions.is_empty() {
                self.set_verdict(Verdict::NothingToDo, plan.idle_reason.take());
            } else {
                let actions = u32::try_from(plan.actions.len()).unwrap_or(u32::MAX);
                self.set_verdict(Verdict::Acted { actions }, None);
            }
            // A plan repeats every standing note (a managed IRQ, a value someone else
            // set) on every tick, flagged `new` only the first time: log and count
            // that one, or a 1 s tick logs the same line 86400 times a day.
            for note in plan.notes.iter().filter(|note| note.new) {
                info!(note = %note.text, kind = note.kind.as_str(), "policy note ({}): {}", note.kind.as_str(), note.text);
                if note.kind == policy::NoteKind::ExternalChange {
                    self.shared.metrics.external_changes.inc();
                }
            }
            self.plan_stale = false;
            for action in plan.actions {
                // A write found its target gone and the machine was rediscovered: the
                // rest of the plan was made for the old model (a vanished device's
                // other targets would each fail and rediscover again). The next tick
                // decides afresh.
                if self.plan_stale {
                    break;
                }
                self.apply(action);
            }
            self.export_load();
        } else {
            self.set_verdict(Verdict::Baseline, None);
        }
        self.finish_tick(started);
    }

    /// The numbers of a calm tick's sentence: the thresholds and the busiest CPU (as
    /// `plan` reports it), without allocating.
    fn calm(&self) -> Calm {
        let busiest = self.load.busiest_cpu();
        let w = &self.config.watermarks;
        Calm {
            high_watermark: w.high,
            imbalance: w.imbalance,
            busy_pps: w.busy_pps,
            busiest,
        }
    }

    fn finish_tick(&mut self, started: Instant) {
        let skipped = std::mem::take(&mut self.skipped_this_tick);
        if self.have_previous {
            let change = self.quiet.after_tick(
                &self.config,
                &self.machine.topology,
                skipped,
                &self.previous,
                &self.current,
            );
            if change != quiet::Change::None {
                self.export_quiet_state();
                debug!(?change, "quiet mode");
            }
        }
        self.have_previous = true;
        let (tick, interval_s, quiet_interval_s) = (
            self.tick,
            self.config.interval.as_secs_f64(),
            self.config.quiet.interval.as_secs_f64(),
        );
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
            .beat(self.next_tick_in().max(self.config.interval) * 3 + Duration::from_secs(2));
        self.ping_watchdog();
    }

    /// Where the interrupts of movable queue vectors with a wide mask (one that lets the
    /// kernel pick the CPU) arrived since the last look: the CPU with the largest rise of
    /// its `proc/interrupts` column, recorded as `fires_on` in the placement.
    ///
    /// Their `effective_affinity` cannot be trusted (on 6.1 x86 it keeps an older CPU
    /// until the vector fires), and their mask does not say. Reading `proc/interrupts` is
    /// costly on big machines, so it is read only on ticks that decide and only while such
    /// vectors exist: the policy pins every queue vector it may move to a single CPU
    /// (`unpinned`), so in steady state there are none and this costs nothing.
    fn locate_wide_vectors(&mut self) {
        let config = &self.config;
        let wide = |irq: &&crate::model::inventory::Irq| {
            matches!(irq.role, IrqRole::Rx | IrqRole::Rxtx)
                && irq.queue.is_some()
                && !irq.managed
                && config.irq.enabled
                && irq
                    .device
                    .as_deref()
                    .is_some_and(|d| config.manages_irqs_of(d))
                && self
                    .placement
                    .irqs
                    .get(&irq.irq)
                    .is_some_and(|a| a.affinity.len() > 1)
        };
        if !self.machine.inventory.irqs.iter().any(|irq| wide(&irq)) {
            return;
        }
        let wanted: Vec<u32> = self
            .machine
            .inventory
            .irqs
            .iter()
            .filter(wide)
            .map(|irq| irq.irq)
            .collect();
        let parsed = match crate::kernel::procfs::interrupts::read(&self.options.root) {
            Ok(parsed) => parsed,
            Err(e) => {
                debug!(error = %e, "cannot read proc/interrupts to locate wide-mask vectors: {e}");
                return;
            }
        };
        for irq in wanted {
            let Some(line) = parsed.line(irq) else {
                continue;
            };
            let Ok(index) = self
                .machine
                .inventory
                .irqs
                .binary_search_by_key(&irq, |i| i.irq)
            else {
                continue;
            };
            let entry = &mut self.machine.inventory.irqs[index];
            let busiest = fires_on(&entry.per_cpu, &line.per_cpu);
            entry.per_cpu.clone_from(&line.per_cpu);
            if let Some(values) = self.placement.irqs.get_mut(&irq) {
                values.fires_on = busiest;
            }
        }
    }

    /// Per-queue counters of the devices where they matter (see `queue_devices`).
    fn sample_queues(&mut self) {
        let Some(source) = self.queue_source.as_mut() else {
            self.current.queues.clear();
            return;
        };
        let ids: Vec<DeviceId<'_>> = self
            .queue_devices
            .iter()
            .map(|(name, ifindex)| DeviceId {
                name,
                ifindex: *ifindex,
            })
            .collect();
        if let Err(e) = source.sample(&ids, &mut self.current.queues) {
            warn!(error = %e, "per-queue counters: {e}");
        }
    }
}

/// The CPU whose count rose most between two `proc/interrupts` rows (indexed by CPU id),
/// if any rose.
fn fires_on(before: &[u64], now: &[u64]) -> Option<u32> {
    now.iter()
        .enumerate()
        .map(|(cpu, &count)| {
            let was = before.get(cpu).copied().unwrap_or(0);
            (cpu as u32, count.saturating_sub(was))
        })
        .filter(|&(_, rise)| rise > 0)
        .max_by_key(|&(cpu, rise)| (rise, std::cmp::Reverse(cpu)))
        .map(|(cpu, _)| cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_vector_fires_where_its_count_rose_most() {
        // CPU 2 took the interrupts since the last look; CPU 0's old count is history.
        assert_eq!(fires_on(&[900, 0, 5, 0], &[900, 1, 80, 0]), Some(2));
        // Nothing rose: not known (the policy falls back to effective_affinity).
        assert_eq!(fires_on(&[7, 3], &[7, 3]), None);
        // A CPU that came online has no earlier column.
        assert_eq!(fires_on(&[4], &[4, 0, 12]), Some(2));
    }
}
