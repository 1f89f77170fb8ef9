//! What a tick samples, in one place for the daemon and `steerd plan`: the per-tick
//! counters (`proc/stat`, `softnet_stat`) and, for devices where they tell the policy
//! something, per-queue packet counters (netdev qstats, else `ethtool -S`). `plan` once
//! sampled only the first part and could decide otherwise than the daemon it previews.
//!
//! `steerd doctor` takes its two readings through the same [`Sampling`] (without the
//! per-queue counters, [`Sampling::without_queue_counters`]) and `steerd top` reads the
//! NAPI threads by the same rule ([`counts_as_receive_work`], [`read_napi_thread`]), so
//! that every front end folds the same counters into [`crate::load::Load`] and shows the
//! same per-CPU figures.

use tracing::warn;

use crate::Root;
use crate::discover::Machine;
use crate::error::Error;
use crate::kernel::queue_counters::{DeviceId, QueueCounterSource};
use crate::kernel::sampler::TickSampler;
use crate::model::inventory::{Inventory, RxQueue};
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
    /// Whether per-queue counters are read at all (`doctor` needs only the per-CPU ones).
    queue_counters: bool,
}

impl Sampling {
    pub fn open(root: &Root) -> Result<Self, Error> {
        Ok(Sampling {
            root: root.clone(),
            ticks: TickSampler::open(root)?,
            queue_source: None,
            queue_devices: Vec::new(),
            napi_threads: Vec::new(),
            queue_counters: true,
        })
    }

    /// Reads the per-CPU counters and NAPI threads only, never per-queue counters (no
    /// netlink socket, no `ethtool -S`): what `steerd doctor` needs for its rates.
    pub fn without_queue_counters(mut self) -> Self {
        self.queue_counters = false;
        self.queue_source = None;
        self
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
            .filter(|q| counts_as_receive_work(q))
            .filter_map(|q| q.napi_thread.as_ref().map(|t| t.pid))
            .collect();
        if self.queue_devices.is_empty() || !self.root.is_host() || !self.queue_counters {
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
            if let Some(time) = read_napi_thread(&self.root, pid) {
                snapshot.napi_threads.push(time);
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

/// Whether the CPU time of the thread polling `queue` (if it is polled by one) is receive
/// work, booked as irq+softirq time on the CPU it ran on ([`crate::load::Load::update`]):
/// yes for threaded NAPI (`threaded` 1), whose thread sleeps until its interrupt wakes it,
/// so its time is the packets it polled; no for a busy-polling thread (`threaded`
/// busy-poll, 6.19), which never sleeps: its time is spinning, not receive work, and
/// counted it would make every CPU it passes look hot (near 100 % whatever the traffic).
/// The one rule for the daemon, `plan`, `top` and `doctor`.
pub fn counts_as_receive_work(queue: &RxQueue) -> bool {
    !queue.napi.busy_polls()
}

/// One NAPI thread's CPU time and the CPU it last ran on, from `proc/PID/stat`, as the
/// load model takes it; `None` when the thread is gone.
pub fn read_napi_thread(root: &Root, pid: u32) -> Option<ThreadTime> {
    crate::kernel::napi_threads::read_time(root, pid).map(|(ticks, cpu)| ThreadTime {
        pid,
        cpu,
        ticks,
    })
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
