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

use super::napi_modes::NapiModeWatch;
use crate::Root;
use crate::discover::Machine;
use crate::error::Error;
use crate::kernel::queue_counters::{DeviceId, QueueCounterSource};
use crate::kernel::sampler::TickSampler;
use crate::model::inventory::{Inventory, RxQueue};
use crate::model::snapshot::{Snapshot, ThreadTime};

/// A change on a device found by [`Sampling::device_changed`], with the device's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceChange {
    /// `sys/class/net/NAME` is gone (or the kernel is unregistering the device): a NIC
    /// removed, noticed before the rtnetlink event that says so was read.
    Vanished(String),
    /// Its `threaded` was switched on or off, or one of its NAPIs' (`napi-set`): its NAPI
    /// threads came or went.
    ThreadedSwitched(String),
}

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
    /// Each NAPI's threaded mode, for switches made with `napi-set` (6.17+).
    napi_modes: NapiModeWatch,
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
            napi_modes: NapiModeWatch::default(),
        })
    }

    /// Reads the per-CPU counters and NAPI threads only, never per-queue counters (no
    /// netlink socket, no `ethtool -S`): for tests of the per-CPU pipeline alone on the
    /// host's root.
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
        self.napi_modes.follow(inventory, self.root.is_host());
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

    /// What changed on a multi-queue device since `inventory` was read that makes the model
    /// stale before any write finds it out: the device vanished, or its NAPI was switched
    /// to or from threads (`threaded`: its threads came or went), the whole device's or,
    /// on 6.17+, a single NAPI's (`napi-set`, which leaves `threaded` as it was: one
    /// `napi-get` dump, [`NapiModeWatch`]). The first device found changed, or `None`. One
    /// small read and one `stat` per such device.
    ///
    /// A vanished device is told apart because its `threaded` reads as absent, which
    /// against an inventory that read it (0 or 1) looked like a switch: a NIC removed in a
    /// 6.19 guest, noticed by the tick before the rtnetlink event was read, was logged and
    /// counted as `threaded_switched`. The directory is looked at after `threaded` is read,
    /// so a device removed between the two is still a vanished one; a `threaded` that
    /// answers EINVAL or ENODEV is a device the kernel is unregistering (net-sysfs serves
    /// only a live device: `kernel::sysfs::net::is_unregistering`), vanished as well.
    pub fn device_changed(&mut self, inventory: &Inventory) -> Option<DeviceChange> {
        let changed = self.queue_devices.iter().find_map(|(name, _)| {
            let dir = self.root.path(format!("sys/class/net/{name}"));
            let read = crate::kernel::napi_threads::read_is_threaded(&dir);
            let unregistering = read
                .as_ref()
                .is_err_and(crate::kernel::sysfs::net::is_unregistering);
            if unregistering || !dir.exists() {
                return Some(DeviceChange::Vanished(name.clone()));
            }
            // Any other failed read is taken as no file, as discovery takes it.
            let now = read.ok().flatten();
            inventory
                .device(name)
                .is_some_and(|d| d.threaded != now)
                .then(|| DeviceChange::ThreadedSwitched(name.clone()))
        });
        changed.or_else(|| {
            self.napi_modes
                .switched()
                .map(DeviceChange::ThreadedSwitched)
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

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;
    use crate::discover::discover;
    use crate::fakeroot::{FakeMachine, FakeNic, FakeTree};

    /// Two 4-queue NICs (both sampled per queue), eth1 with threaded NAPI off, followed by
    /// a `Sampling` of the discovered machine.
    fn two_nics(dir: &Path) -> (FakeTree, Machine, Sampling) {
        let mut machine = FakeMachine::with_eth0(4, "ixgbe", 4);
        machine.nics.push(FakeNic {
            name: "eth1".into(),
            driver: "ixgbe".into(),
            node: None,
            queues: 4,
        });
        let tree = machine.write(dir).unwrap();
        fs::write(dir.join("sys/class/net/eth1/threaded"), "0\n").unwrap();
        let root = Root::new(dir);
        let machine = discover(&root).unwrap();
        let mut sampling = Sampling::open(&root).unwrap();
        sampling.follow(&machine);
        assert_eq!(sampling.device_changed(&machine.inventory), None);
        (tree, machine, sampling)
    }

    #[test]
    fn a_switched_threaded_file_is_a_threaded_switch() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, machine, mut sampling) = two_nics(dir.path());
        tree.make_threaded(1, 900).unwrap();
        assert_eq!(
            sampling.device_changed(&machine.inventory),
            Some(DeviceChange::ThreadedSwitched("eth1".into()))
        );
    }

    /// The QEMU igb removal: the device's `threaded` (read as 0 at discovery) is gone with
    /// its directory. That is a vanished device, not a switch.
    #[test]
    fn a_removed_device_directory_is_a_vanished_device() {
        let dir = tempfile::tempdir().unwrap();
        let (_tree, machine, mut sampling) = two_nics(dir.path());
        let link = dir.path().join("sys/class/net/eth1");
        let device_dir = fs::canonicalize(&link).unwrap();
        fs::remove_file(&link).unwrap();
        fs::remove_dir_all(device_dir).unwrap();
        assert_eq!(
            sampling.device_changed(&machine.inventory),
            Some(DeviceChange::Vanished("eth1".into()))
        );
    }

    /// A device the kernel is unregistering keeps its directory, but `threaded` answers
    /// EINVAL: vanished too. `/proc/self/clear_refs` answers a read with EINVAL (as root;
    /// others may not open it).
    #[test]
    fn a_threaded_file_answering_einval_is_a_vanishing_device() {
        let Some(einval) = crate::fakeroot::einval_file() else {
            eprintln!(
                "skipped: reading /proc/self/clear_refs does not give EINVAL here (not root)"
            );
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let (_tree, machine, mut sampling) = two_nics(dir.path());
        let threaded = dir.path().join("sys/class/net/eth1/threaded");
        fs::remove_file(&threaded).unwrap();
        std::os::unix::fs::symlink(einval, &threaded).unwrap();
        assert_eq!(
            sampling.device_changed(&machine.inventory),
            Some(DeviceChange::Vanished("eth1".into()))
        );
    }
}
