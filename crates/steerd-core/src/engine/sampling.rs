//! What a tick samples, in one place for the daemon and `steerd plan`: the per-tick
//! counters (`proc/stat`, `softnet_stat`) and, for devices where they tell the policy
//! something, per-queue packet counters (netdev qstats, else `ethtool -S`). `plan` once
//! sampled only the first part and could decide otherwise than the daemon it previews.

use tracing::warn;

use crate::Root;
use crate::discover::Machine;
use crate::error::Error;
use crate::kernel::queue_counters::{DeviceId, QueueCounterSource};
use crate::kernel::sampler::TickSampler;
use crate::model::inventory::Inventory;
use crate::model::snapshot::{Snapshot, ThreadTime};

/// How much of the per-tick counters to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Everything.
    Full,
    /// `softnet_stat` only, `proc/stat` carried over from the previous sample: an idle
    /// daemon's cheap tick (new receive work shows in `softnet_stat` at once).
    SoftnetOnly,
}

/// The samplers of one root.
#[derive(Debug)]
pub struct Sampling {
    root: Root,
    ticks: TickSampler,
    /// Per-queue counters, on the host only (a fake root has no kernel to ask).
    queue_source: Option<QueueCounterSource>,
    /// Devices whose per-queue rates tell the policy something: several rx queues served
    /// by distinct IRQs. Single-queue and IRQ-less devices (veth) cost nothing per tick.
    queue_devices: Vec<(String, u32)>,
    /// Threaded NAPI receive threads, whose CPU time is receive work.
    napi_threads: Vec<u32>,
}

impl Sampling {
    pub fn open(root: &Root) -> Result<Self, Error> {
        Ok(Sampling {
            root: root.clone(),
            ticks: TickSampler::open(root)?,
            queue_source: None,
            queue_devices: Vec::new(),
            napi_threads: Vec::new(),
        })
    }

    /// Follows a (re)discovered model: which IRQs the interrupt totals are kept for, which
    /// CPUs `softnet_stat` rows without a CPU id belong to, and which devices' queues are
    /// sampled (the counter source is opened the first time one is needed).
    pub fn follow(&mut self, machine: &Machine) {
        let inventory = &machine.inventory;
        let irq_limit = inventory.irqs.iter().map(|i| i.irq as usize + 1).max();
        self.ticks.set_irq_limit(irq_limit.unwrap_or(0));
        self.ticks
            .set_online_cpus(machine.topology.online_as_read());
        self.queue_devices = queue_devices_of(inventory);
        self.napi_threads = inventory
            .devices
            .iter()
            .flat_map(|d| &d.rx_queues)
            // A busy-polling thread's time is spinning, not receive work: counted, it
            // would make every CPU it passes look hot.
            .filter(|q| !q.napi.busy_polls())
            .filter_map(|q| q.napi_thread.as_ref().map(|t| t.pid))
            .collect();
        if self.queue_devices.is_empty() || !self.root.is_host() {
            self.queue_source = None;
            return;
        }
        if self.queue_source.is_none() {
            match QueueCounterSource::new() {
                Ok(source) => self.queue_source = Some(source),
                Err(e) => {
                    warn!(error = %e, "no per-queue counters; attributing work by IRQ rates: {e}")
                }
            }
        }
    }

    /// Samples into `snapshot`. `previous` is the sample `SoftnetOnly` carries
    /// `proc/stat` over from (without one, everything is read). A failed per-queue read is
    /// logged and leaves the queues empty; a failed per-tick read is the error.
    pub fn sample(
        &mut self,
        snapshot: &mut Snapshot,
        depth: Depth,
        previous: Option<&Snapshot>,
    ) -> Result<(), Error> {
        match (depth, previous) {
            (Depth::SoftnetOnly, Some(previous)) => {
                snapshot.carry_stat_from(previous);
                self.ticks.sample_softnet_only(snapshot)?;
            }
            _ => {
                self.ticks.sample(snapshot)?;
                self.sample_napi_threads(snapshot);
            }
        }
        self.sample_queues(snapshot);
        Ok(())
    }

    /// Whether a multi-queue device's NAPI was switched to or from threads (`threaded`)
    /// since `inventory` was read: its threads came or went, so the model is stale. One
    /// small read per such device.
    pub fn threaded_changed(&self, inventory: &Inventory) -> bool {
        self.queue_devices.iter().any(|(name, _)| {
            let now = crate::kernel::napi_threads::is_threaded(
                &self.root.path(format!("sys/class/net/{name}")),
            );
            inventory.device(name).is_some_and(|d| d.threaded != now)
        })
    }

    /// Reads `proc/interrupts` (for [`super::Sample::interrupts`]).
    pub fn interrupts(&self) -> Option<crate::kernel::procfs::interrupts::Interrupts> {
        match crate::kernel::procfs::interrupts::read(&self.root) {
            Ok(parsed) => Some(parsed),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read proc/interrupts to locate wide-mask vectors: {e}");
                None
            }
        }
    }

    /// One `proc/PID/stat` per threaded NAPI receive thread (none without threaded NAPI).
    fn sample_napi_threads(&self, snapshot: &mut Snapshot) {
        snapshot.napi_threads.clear();
        for &pid in &self.napi_threads {
            if let Some((ticks, cpu)) = crate::kernel::napi_threads::read_time(&self.root, pid) {
                snapshot.napi_threads.push(ThreadTime { pid, cpu, ticks });
            }
        }
    }

    fn sample_queues(&mut self, snapshot: &mut Snapshot) {
        let Some(source) = self.queue_source.as_mut() else {
            snapshot.queues.clear();
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
        if let Err(e) = source.sample(&ids, &mut snapshot.queues) {
            warn!(error = %e, "per-queue counters: {e}");
        }
    }
}

/// Devices whose per-queue rates tell the policy something: several rx queues served by
/// distinct IRQs. Single-queue and IRQ-less devices (veth) are left out.
fn queue_devices_of(inventory: &Inventory) -> Vec<(String, u32)> {
    inventory
        .devices
        .iter()
        .filter(|d| {
            let mut irqs: Vec<u32> = d.rx_queues.iter().filter_map(|q| q.irq).collect();
            irqs.sort_unstable();
            irqs.dedup();
            irqs.len() >= 2
        })
        .filter_map(|d| Some((d.name.clone(), d.ifindex?)))
        .collect()
}
