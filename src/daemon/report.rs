//! What the tick loop shows outside: the live status `steerd status` reads, and the
//! placement, load and quiet-mode metrics. Only writes to `Shared`, which the HTTP thread
//! reads; nothing here decides or touches the kernel.

use std::time::{SystemTime, UNIX_EPOCH};

use super::Daemon;
use crate::metrics::{IrqLabels, QueueLabels};
use crate::model::inventory::IrqRole;
use crate::status_report::{NoWrites, Verdict};

impl Daemon {
    /// The live state `steerd status` reads, at start.
    pub(super) fn start_status(&self) {
        let no_writes = match self.engine.writing_stopped() {
            Some(_) if self.options.dry_run => Some(NoWrites::DryRun),
            Some(why) => Some(NoWrites::ObserveOnly(why.to_string())),
            None => None,
        };
        let started_unix = unix_now();
        self.with_status(|status| {
            status.version = env!("CARGO_PKG_VERSION");
            status.started_unix = started_unix;
            status.no_writes = no_writes;
        });
    }

    /// Runs `update` on the live status (a lock, no allocation).
    pub(super) fn with_status(&self, update: impl FnOnce(&mut crate::status_report::LiveStatus)) {
        match self.shared.status.lock() {
            Ok(mut status) => update(&mut status),
            Err(poisoned) => update(&mut poisoned.into_inner()),
        }
    }

    /// Records this tick's verdict; `reason` is the policy's sentence when it ran.
    pub(super) fn set_verdict(&self, verdict: Verdict, reason: Option<String>) {
        let tick = self.tick;
        self.with_status(|status| status.record_verdict(verdict, tick, reason));
    }

    pub(super) fn export_placement(&self) {
        let metrics = &self.shared.metrics;
        metrics.irq_effective_cpu.clear();
        for irq in &self.engine.machine().inventory.irqs {
            let Some(device) = &irq.device else { continue };
            let cpu = irq
                .effective_affinity
                .as_ref()
                .and_then(|s| s.first())
                .or_else(|| irq.affinity.as_ref().and_then(|s| s.first()));
            if let Some(cpu) = cpu {
                let role = match irq.role {
                    IrqRole::Rx => "rx",
                    IrqRole::Tx => "tx",
                    IrqRole::Rxtx => "rxtx",
                    IrqRole::Other => "other",
                };
                metrics
                    .irq_effective_cpu
                    .get_or_create(&IrqLabels {
                        irq: irq.irq,
                        device: device.clone(),
                        queue: irq.queue.map_or(String::new(), |q| q.to_string()),
                        role: role.to_string(),
                    })
                    .set(i64::from(cpu));
            }
        }
        metrics.rx_queue_rps_cpus.clear();
        for device in &self.engine.machine().inventory.devices {
            for queue in &device.rx_queues {
                if let Some(cpus) = &queue.rps_cpus {
                    metrics
                        .rx_queue_rps_cpus
                        .get_or_create(&QueueLabels {
                            device: device.name.clone(),
                            queue: queue.index,
                        })
                        .set(cpus.len() as i64);
                }
            }
        }
        metrics.rss_table_entries.clear();
        metrics.udp_hash_addresses_only.clear();
        for device in &self.engine.machine().inventory.devices {
            for family in &device.udp_hashed_on_addresses {
                metrics
                    .udp_hash_addresses_only
                    .get_or_create(&crate::metrics::UdpHashLabels {
                        device: device.name.clone(),
                        family: family.clone(),
                    })
                    .set(1);
            }
            let Some(table) = &device.rss_table else {
                continue;
            };
            for queue in &device.rx_queues {
                let entries = table.iter().filter(|&&q| q == queue.index).count();
                metrics
                    .rss_table_entries
                    .get_or_create(&QueueLabels {
                        device: device.name.clone(),
                        queue: queue.index,
                    })
                    .set(entries as i64);
            }
        }
    }

    /// Brings `steerd_rss_steps_total` up to the lever's tallies.
    pub(super) fn export_rss_steps(&self) {
        let metrics = &self.shared.metrics;
        for (device, counts) in self.engine.policy().rss_counts() {
            for (verdict, count) in crate::metrics::RSS_STEP_VERDICTS.iter().zip([
                counts.taken,
                counts.kept,
                counts.reverted,
            ]) {
                let counter = metrics
                    .rss_steps
                    .get_or_create(&crate::metrics::RssStepLabels {
                        device: device.to_string(),
                        verdict: (*verdict).to_string(),
                    });
                let now = counter.get();
                if count > now {
                    counter.inc_by(count - now);
                }
            }
        }
    }

    pub(super) fn export_load(&self) {
        for gauges in &self.cpu_gauges {
            let Some(load) = self.engine.load().cpu(gauges.cpu) else {
                continue;
            };
            gauges.processed.set(load.processed_pps);
            gauges.dropped.set(load.dropped_per_sec);
            gauges.squeezed.set(load.squeezed_per_sec);
            gauges.softirq_share.set(load.net_share);
        }
    }

    /// Publishes whether quiet mode is on and available (metrics, and since when in the
    /// live status).
    pub(super) fn export_quiet_state(&self) {
        let metrics = &self.shared.metrics;
        let asleep = self.quiet.is_asleep();
        metrics.quiet_mode.set(i64::from(asleep));
        metrics
            .quiet_mode_available
            .set(i64::from(self.quiet.available(self.engine.config())));
        // Called when the state changes, not on every tick.
        let unavailable = self.quiet.unavailable_reason(self.engine.config());
        let now_unix = unix_now();
        self.with_status(|status| {
            status.quiet_since_unix = match (asleep, status.quiet_since_unix) {
                (true, Some(since)) => Some(since),
                (true, None) => Some(now_unix),
                (false, _) => None,
            };
            status.quiet_unavailable = unavailable;
        });
    }
}

/// Wall-clock seconds since the Unix epoch (0 if the clock is before it).
pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
