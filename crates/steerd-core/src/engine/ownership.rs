//! Values steerd takes over instead of respecting: those a driver reset when it made its
//! device anew (a channel-count change, a device that came back), and a NAPI thread the
//! kernel moved as cgroup partitions changed. Neither is someone else's choice, so the
//! policy forgets who set them (no frozen target, no dwell time) and places them again.
//!
//! Which values those are is decided here, on the engine's own record (the policy's
//! memory and the current values) and what the writer would restore; the daemon only
//! hands the answer to the actuator's restore record (`Actuator::remember_original`,
//! `Actuator::take_over_reset`). It used to be worked out by hand in `daemon::discovery`
//! and `daemon::isolation`, each reaching into the policy's memory.

use super::{Engine, mask_words_in};
use crate::knob::{Knob, KnobValue};
use crate::model::inventory::Inventory;
use crate::policy::Placement;

/// A value of a device made anew that the engine took over: the policy no longer knows
/// who set it; the writer's restore record is to account for it as steerd's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenOver {
    pub knob: Knob,
    /// A value steerd had neither written nor respected that changed with the reset: what
    /// it held before, with the width its mask was printed in, to keep as the original if
    /// the restore record has none (the machine as steerd found it, not the driver's
    /// interim default).
    pub original: Option<(KnobValue, u32)>,
}

impl Engine {
    /// A device's queue set changed (or its channels were set again, or it came back):
    /// its driver re-did its defaults, rewriting the affinity of its vectors (virtio_net:
    /// wide masks, then queue N on CPU N) and adding queues with RPS off. That is not
    /// someone else's choice to respect but a device made anew. Call after
    /// [`Engine::replace_machine`], with the inventory from `before` it.
    ///
    /// Forgets the device's RPS trial, and returns every target of the device (in the old
    /// model or the new) that no longer holds what steerd wrote or respected (the policy's
    /// memory, or `last_written`, the writer's record of what it would restore), or that
    /// steerd never had but that changed with the reset; the policy forgets who set each
    /// of them. The caller takes them over in its restore record.
    pub fn take_over_renewed_device(
        &mut self,
        before: &Inventory,
        device: &str,
        last_written: &dyn Fn(&Knob) -> Option<KnobValue>,
    ) -> Vec<TakenOver> {
        self.policy.forget_rps_trial(device);
        let mut targets = device_targets(before, device);
        targets.extend(device_targets(&self.machine.inventory, device));
        targets.sort();
        targets.dedup();
        let previous = Placement::from_inventory(before);
        let mut taken = Vec::new();
        for knob in targets {
            let known = [
                self.policy.written(&knob).cloned(),
                self.policy.respected(&knob).cloned(),
                last_written(&knob),
            ];
            let now = self.placement.value(&knob);
            let was = previous.value(&knob);
            let ours_replaced = known
                .iter()
                .flatten()
                .any(|value| self.placement.holds(&knob, value) != Some(true));
            let never_ours =
                known.iter().all(Option::is_none) && now.is_some() && was.is_some() && was != now;
            if !(ours_replaced || never_ours) {
                continue;
            }
            let original = match was {
                Some(was) if never_ours => {
                    let words = mask_words_in(before, &knob, self.machine.topology.nr_cpu_ids);
                    Some((was, words))
                }
                _ => None,
            };
            self.policy.forget_owner(&knob);
            taken.push(TakenOver { knob, original });
        }
        taken
    }

    /// A value the kernel rewrote that steerd takes over rather than respects (a NAPI
    /// thread's affinity as cgroup partitions changed): the policy forgets who set it, and
    /// the next decision starts from `now` and places it again.
    pub fn take_over(&mut self, knob: &Knob, now: &KnobValue) {
        self.policy.forget_owner(knob);
        self.observe_value(knob, now);
    }
}

/// Every target of `device` in `inventory` a driver's reset may rewrite: its vectors'
/// affinities, its RSS table (a channel change may re-spread a table nobody configured),
/// its transmit queues' XPS masks and its receive queues' RPS masks and flow tables.
fn device_targets(inventory: &Inventory, device: &str) -> Vec<Knob> {
    let mut targets: Vec<Knob> = inventory
        .irqs
        .iter()
        .filter(|i| i.device.as_deref() == Some(device))
        .map(|irq| Knob::IrqAffinity { irq: irq.irq })
        .collect();
    let Some(dev) = inventory.device(device) else {
        return targets;
    };
    if dev.rss_table.is_some() {
        targets.push(Knob::RssIndirection {
            device: device.to_string(),
        });
    }
    for queue in &dev.tx_queues {
        targets.push(Knob::XpsCpus {
            device: device.to_string(),
            queue: queue.index,
        });
    }
    for queue in &dev.rx_queues {
        targets.push(Knob::RpsCpus {
            device: device.to_string(),
            queue: queue.index,
        });
        targets.push(Knob::RpsFlowCnt {
            device: device.to_string(),
            queue: queue.index,
        });
    }
    targets
}
