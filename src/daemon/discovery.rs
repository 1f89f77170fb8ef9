//! Keeping the model in step with the machine: rediscovery (on a link or queue event, CPU
//! hot-plug, a changed value, the slow timer) and what follows every discovery (the
//! placement rebuilt, per-queue counters chosen, metrics republished), including the one
//! case that needs more than a fresh model: a device whose queue set changed, whose
//! driver's reset is taken over rather than respected.

use std::time::Instant;

use tracing::{debug, info, warn};

use super::lasting_failure::Occurrence;

use super::Daemon;
use super::rediscovery::Rediscovery;
use crate::discover::discover;
use crate::engine::TakenOver;
use crate::metrics::ReasonLabels;
use crate::model::snapshot::Snapshot;

impl Daemon {
    pub(super) fn rediscover(&mut self, reason: Rediscovery) {
        let why = reason.text();
        self.shared
            .metrics
            .rediscoveries
            .get_or_create(&ReasonLabels {
                reason: reason.label().to_string(),
            })
            .inc();
        if let Some(events) = self.link_events.as_mut() {
            let _ = events.drain();
        }
        if let Some(events) = self.queue_events.as_mut() {
            let _ = events.drain();
        }
        if let Some(events) = self.ethtool_events.as_mut()
            && let Ok(heard) = events.drain()
        {
            self.channels_set.hear(&heard);
        }
        let channels_set = std::mem::take(&mut self.channels_set);
        self.forget_cgroup_mount();
        match discover(&self.options.root) {
            Ok(machine) => {
                if let Some(times) = self.rediscovery_failure.ended() {
                    info!(
                        why,
                        failed = times,
                        "rediscovery works again after {times} failure(s)"
                    );
                }
                let old = self.engine.machine();
                let renewed = devices_made_anew(&old.inventory, &machine.inventory, &channels_set);
                let changed = machine.inventory.devices.len() != old.inventory.devices.len()
                    || machine.topology.online != old.topology.online;
                if changed {
                    info!(
                        why,
                        devices = machine.inventory.devices.len(),
                        cpus = machine.topology.online.len(),
                        "machine changed"
                    );
                }
                let before = self.engine.replace_machine(machine);
                self.keep_known_partitions();
                let ended = self.actuator.forget_ended_threads();
                if !ended.is_empty() {
                    info!(
                        threads = ended.len(),
                        "{} NAPI thread(s) steerd had pinned ended (threaded NAPI switched off): nothing to restore",
                        ended.len()
                    );
                }
                self.after_discovery();
                for (device, renewal) in renewed {
                    self.after_queue_change(&before.inventory, &device, renewal);
                }
            }
            Err(e) => match self.rediscovery_failure.happened(&e.to_string()) {
                Occurrence::New => {
                    warn!(why, error = %e, "rediscovery failed; keeping the previous model: {e}");
                }
                Occurrence::Repeated => {
                    debug!(why, error = %e, "rediscovery failed again: {e}");
                }
            },
        }
        self.last_discovery = Instant::now();
    }

    /// A device's queue set changed (a channel-count change), its channels were set again,
    /// or it came (back): its driver's reset is taken over rather than respected. Which
    /// values that takes is the engine's to say
    /// ([`crate::engine::Engine::take_over_renewed_device`], which also makes the policy
    /// forget who set them: no frozen IRQ, no dwell time); the actuator accounts for each
    /// as steerd's in its restore record, keeping the original from before steerd's first
    /// write (or else, for a value steerd never had, from before the reset), which is what
    /// the restore on exit writes back. The next tick places them again and re-applies
    /// steerd's RPS masks.
    ///
    /// A device that came (back) is made anew the same way: removed and found again (a PCI
    /// function removed and rescanned, a driver reloaded), its vectors may get the same IRQ
    /// numbers with the driver's placement, which is not someone else's change either. A
    /// device steerd never wrote to has nothing to take over, and nothing is logged for it.
    fn after_queue_change(
        &mut self,
        before: &crate::model::inventory::Inventory,
        device: &str,
        renewal: Renewal,
    ) {
        let actuator = &self.actuator;
        let taken = self
            .engine
            .take_over_renewed_device(before, device, &|knob| actuator.last_written(knob).cloned());
        for TakenOver { knob, original } in &taken {
            if let Some((was, words)) = original {
                self.actuator.remember_original(knob, was, *words);
            }
            self.actuator.take_over_reset(knob);
        }
        let reset = taken.len();
        let (rx, tx) = self
            .engine
            .machine()
            .inventory
            .device(device)
            .map_or((0, 0), |d| (d.rx_queues.len(), d.tx_queues.len()));
        let what = match renewal {
            Renewal::QueueSetChanged => {
                format!("queue set changed (now {rx} rx, {tx} tx); its driver reset {reset} values")
            }
            Renewal::ChannelsSet if reset > 0 => format!(
                "channels set again ({rx} rx, {tx} tx, as before); its driver reset {reset} values"
            ),
            Renewal::Appeared if reset > 0 => format!(
                "appeared again ({rx} rx, {tx} tx); its driver set {reset} values steerd had written"
            ),
            Renewal::ChannelsSet | Renewal::Appeared => return,
        };
        info!(
            device,
            rx_queues = rx,
            tx_queues = tx,
            reset,
            "{device}: {what}: placing its queues again"
        );
    }

    /// What follows every discovery: the samplers follow the new model, managed IRQs are
    /// reported once, and the placement and per-CPU metrics are republished. (The engine
    /// rebuilt its current values from the model when it was handed over.)
    pub(super) fn after_discovery(&mut self) {
        let machine = self.engine.machine();
        self.sampling.follow(machine);
        // An IRQ that is gone is no longer one steerd cannot move: its number may come
        // back on another vector (the engine forgot its give-up too).
        let irqs = &machine.inventory.irqs;
        self.reported_managed
            .retain(|n| irqs.binary_search_by_key(n, |i| i.irq).is_ok());
        for irq in machine
            .inventory
            .irqs
            .iter()
            .filter(|i| i.managed && i.device.is_some())
        {
            if self.reported_managed.insert(irq.irq) {
                info!(irq = irq.irq, name = %irq.name, "IRQ {} ({}) is managed by the kernel; steerd leaves it alone", irq.irq, irq.name);
            }
        }
        self.shared
            .metrics
            .unmanageable_irqs
            .set(self.reported_managed.len() as i64);
        self.cpu_gauges = self
            .shared
            .metrics
            .cpu_load_gauges(machine.topology.online.iter());
        self.export_placement();
    }
}

/// Why a device's driver values are taken over rather than respected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renewal {
    /// Same device (name and ifindex), another rx or tx queue set: a channel-count change.
    QueueSetChanged,
    /// Same device and queue set, but an ethtool notification said its channels were set
    /// (`ethtool -L` to the count it had): drivers may reset their vectors' affinities.
    ChannelsSet,
    /// Not in the previous model, or under another ifindex: the device came (back).
    Appeared,
}

/// The devices ethtool notifications said had their channels set, since the last
/// discovery.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ChannelsSet {
    ifindexes: Vec<u32>,
    anywhere: bool,
}

impl ChannelsSet {
    pub(super) fn hear(&mut self, heard: &crate::kernel::ethtool_events::Heard) {
        for &ifindex in &heard.channel_devices {
            if !self.ifindexes.contains(&ifindex) {
                self.ifindexes.push(ifindex);
            }
        }
        self.anywhere |= heard.channels_anywhere
            || self.ifindexes.len() > crate::kernel::ethtool_events::MAX_NAMED_DEVICES;
    }

    fn includes(&self, ifindex: Option<u32>) -> bool {
        self.anywhere || ifindex.is_some_and(|i| self.ifindexes.contains(&i))
    }
}

/// The devices made anew between two discoveries: those whose queue set changed, those
/// whose channels were set again (`channels_set`), and those that came (back). A device
/// that went is not listed: nothing is left to place.
fn devices_made_anew(
    before: &crate::model::inventory::Inventory,
    after: &crate::model::inventory::Inventory,
    channels_set: &ChannelsSet,
) -> Vec<(String, Renewal)> {
    after
        .devices
        .iter()
        .filter_map(|now| {
            let same_queues = |was: &crate::model::inventory::NetDevice| {
                let rx = |d: &crate::model::inventory::NetDevice| {
                    d.rx_queues.iter().map(|q| q.index).collect::<Vec<_>>()
                };
                let tx = |d: &crate::model::inventory::NetDevice| {
                    d.tx_queues.iter().map(|q| q.index).collect::<Vec<_>>()
                };
                rx(was) == rx(now) && tx(was) == tx(now)
            };
            let renewal = match before.device(&now.name) {
                Some(was)
                    if was.ifindex == now.ifindex
                        && same_queues(was)
                        && channels_set.includes(now.ifindex) =>
                {
                    Renewal::ChannelsSet
                }
                Some(was) if was.ifindex == now.ifindex && same_queues(was) => return None,
                Some(was) if was.ifindex == now.ifindex => Renewal::QueueSetChanged,
                _ => Renewal::Appeared,
            };
            Some((now.name.clone(), renewal))
        })
        .collect()
}

/// Whether the set of online CPUs changed between two samples. `softnet_stat` has one row
/// per online CPU, so the rows the tick already read tell hot-plug without reading
/// `sys/devices/system/cpu/online` as well.
pub(super) fn online_cpus_changed(previous: &Snapshot, current: &Snapshot) -> bool {
    previous.softnet.len() != current.softnet.len()
        || previous
            .softnet
            .iter()
            .zip(&current.softnet)
            .any(|(a, b)| a.cpu != b.cpu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ethtool_events::Heard;
    use crate::model::inventory::Inventory;

    fn inventory(rx: u32) -> Inventory {
        let mut machine = crate::fakeroot::FakeMachine::new(2);
        machine.nics.push(crate::fakeroot::FakeNic {
            name: "eth0".into(),
            driver: "virtio_net".into(),
            node: None,
            queues: rx,
        });
        let dir = tempfile::tempdir().unwrap();
        machine.write(dir.path()).unwrap();
        let mut inventory = discover(&crate::root::Root::new(dir.path()))
            .unwrap()
            .inventory;
        inventory.devices[0].ifindex = Some(2);
        inventory
    }

    #[test]
    fn a_channel_set_to_the_same_count_is_a_renewal_only_when_heard() {
        let (before, same, more) = (inventory(4), inventory(4), inventory(2));
        let none = ChannelsSet::default();
        assert!(devices_made_anew(&before, &same, &none).is_empty());
        assert_eq!(
            devices_made_anew(&before, &more, &none),
            [("eth0".to_string(), Renewal::QueueSetChanged)]
        );
        let mut heard = ChannelsSet::default();
        heard.hear(&Heard {
            channels: 1,
            channel_devices: vec![2],
            ..Default::default()
        });
        assert_eq!(
            devices_made_anew(&before, &same, &heard),
            [("eth0".to_string(), Renewal::ChannelsSet)]
        );
        let mut other = ChannelsSet::default();
        other.hear(&Heard {
            channels: 1,
            channel_devices: vec![9],
            ..Default::default()
        });
        assert!(devices_made_anew(&before, &same, &other).is_empty());
        let mut anywhere = ChannelsSet::default();
        anywhere.hear(&Heard {
            channels: 1,
            channels_anywhere: true,
            ..Default::default()
        });
        // Every device then (its other devices have nothing steerd wrote to take over).
        assert!(
            devices_made_anew(&before, &same, &anywhere)
                .contains(&("eth0".to_string(), Renewal::ChannelsSet))
        );
    }
}
