//! The current values of everything steerd can write: IRQ affinities, RPS masks, flow
//! table sizes.
//!
//! The inventory says what exists and is refreshed at discovery; the placement says where
//! things are now and changes every time anyone writes. The daemon keeps it current (its
//! own writes, re-reads); the simulator derives it from its model. The policy reads it to
//! know the old value of every action and to notice values someone else changed.

use std::collections::HashMap;

use serde::Serialize;

use super::plan::Action;
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};
use crate::model::inventory::Inventory;

/// Where an IRQ may fire and where it does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IrqAffinity {
    /// `smp_affinity_list`.
    pub affinity: CpuSet,
    /// `effective_affinity_list`, when the kernel has it. Can be stale: on some kernels
    /// (6.1 x86 MSI) it keeps naming the CPU of an older mask until the vector next
    /// fires, which for an idle vector may be never. The policy trusts it only as a last
    /// resort (see `fires_on`).
    pub effective: Option<CpuSet>,
    /// The CPU this IRQ's interrupts arrived on most since the caller last looked (per-CPU
    /// `proc/interrupts` deltas), when known. The daemon measures it only for movable queue
    /// vectors whose mask spans several CPUs: with a single-CPU mask the mask says it all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fires_on: Option<u32>,
    /// The CPU its queue's work stays on after a move that has not taken effect: no
    /// interrupt since the write while the queue kept receiving, so its NAPI keeps polling
    /// where it ran (`engine::move_check`). Set and cleared by the engine only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_stays_on: Option<u32>,
}

impl IrqAffinity {
    /// Where the IRQ's work is, as best known: where it stays after a move that has not
    /// taken effect (`work_stays_on`); else its mask when that is a single online
    /// CPU (never a stale effective affinity, see `effective`); otherwise the CPU they
    /// were seen arriving on, then the effective affinity (within the mask, or anywhere
    /// online when no CPU of the mask is: the kernel broke the affinity), then the mask's
    /// first online CPU. Allocates nothing: it runs for every IRQ on every decision.
    pub fn cpu(&self, online: &CpuSet) -> Option<u32> {
        if let Some(cpu) = self.work_stays_on.filter(|&c| online.contains(c)) {
            return Some(cpu);
        }
        let in_mask = |c: u32| online.contains(c) && self.affinity.contains(c);
        if self.affinity.len() == 1
            && let Some(cpu) = self.affinity.first().filter(|&c| in_mask(c))
        {
            return Some(cpu);
        }
        let mask_online = self.affinity.iter().any(|c| online.contains(c));
        self.fires_on
            .filter(|&c| online.contains(c))
            .or_else(|| {
                self.effective
                    .as_ref()
                    .and_then(CpuSet::first)
                    .filter(|&c| in_mask(c) || (!mask_online && online.contains(c)))
            })
            .or_else(|| self.affinity.iter().find(|&c| online.contains(c)))
    }
}

/// One rx queue's steering values; `None` where the file does not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RxQueueValues {
    pub rps_cpus: Option<CpuSet>,
    pub rps_flow_cnt: Option<u32>,
}

/// The current values of all writable targets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// By IRQ number; IRQs without a readable affinity are absent.
    pub irqs: HashMap<u32, IrqAffinity>,
    /// By device name, indexed by rx queue number.
    pub rx_queues: HashMap<String, Vec<RxQueueValues>>,
    /// `rps_sock_flow_entries`; `None` where the file does not exist.
    pub rps_sock_flow_entries: Option<u32>,
    /// Threaded NAPI polling threads by pid: their name and where they may run.
    pub napi_threads: HashMap<u32, NapiThreadValues>,
    /// RSS indirection tables (default context) by device, where read.
    pub rss_tables: HashMap<String, Vec<u32>>,
    /// XPS masks by device, indexed by tx queue number; `None` where the file does not
    /// exist or cannot be read (a single-queue device).
    pub xps: HashMap<String, Vec<Option<CpuSet>>>,
}

/// A NAPI thread's current affinity, with the name that identifies it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NapiThreadValues {
    pub name: String,
    pub affinity: CpuSet,
}

impl Placement {
    /// The values as found at discovery.
    pub fn from_inventory(inventory: &Inventory) -> Self {
        let irqs = inventory
            .irqs
            .iter()
            .filter_map(|irq| {
                let affinity = irq.affinity.clone()?;
                Some((
                    irq.irq,
                    IrqAffinity {
                        affinity,
                        effective: irq.effective_affinity.clone(),
                        fires_on: None,
                        work_stays_on: None,
                    },
                ))
            })
            .collect();
        let rx_queues = inventory
            .devices
            .iter()
            .map(|device| {
                let queues = by_queue_index(
                    &device.rx_queues,
                    |q| q.index,
                    |q| RxQueueValues {
                        rps_cpus: q.rps_cpus.clone(),
                        rps_flow_cnt: q.rps_flow_cnt,
                    },
                );
                (device.name.clone(), queues)
            })
            .collect();
        let napi_threads = inventory
            .devices
            .iter()
            .flat_map(|device| &device.rx_queues)
            .filter_map(|q| q.napi_thread.as_ref())
            .map(|t| {
                (
                    t.pid,
                    NapiThreadValues {
                        name: t.name.clone(),
                        affinity: t.affinity.clone(),
                    },
                )
            })
            .collect();
        let rss_tables = inventory
            .devices
            .iter()
            .filter_map(|d| Some((d.name.clone(), d.rss_table.clone()?)))
            .collect();
        let xps = inventory
            .devices
            .iter()
            .map(|device| {
                let masks = by_queue_index(&device.tx_queues, |q| q.index, |q| q.xps_cpus.clone());
                (device.name.clone(), masks)
            })
            .collect();
        Placement {
            irqs,
            rx_queues,
            rps_sock_flow_entries: inventory.rps_sock_flow_entries,
            napi_threads,
            rss_tables,
            xps,
        }
    }

    /// A transmit queue's XPS mask, where it has one.
    pub fn xps_cpus(&self, device: &str, queue: u32) -> Option<&CpuSet> {
        self.xps.get(device)?.get(queue as usize)?.as_ref()
    }

    /// The rx queue values of a device queue.
    pub fn rx_queue(&self, device: &str, queue: u32) -> Option<&RxQueueValues> {
        self.rx_queues.get(device)?.get(queue as usize)
    }

    /// The current value of a target, if it exists.
    pub fn value(&self, target: &Knob) -> Option<KnobValue> {
        match target {
            Knob::IrqAffinity { irq } => self
                .irqs
                .get(irq)
                .map(|a| KnobValue::Cpus(a.affinity.clone())),
            Knob::RpsCpus { device, queue } => self
                .rx_queue(device, *queue)
                .and_then(|q| q.rps_cpus.clone())
                .map(KnobValue::Cpus),
            Knob::RpsFlowCnt { device, queue } => self
                .rx_queue(device, *queue)
                .and_then(|q| q.rps_flow_cnt)
                .map(KnobValue::Count),
            Knob::RpsSockFlowEntries => self.rps_sock_flow_entries.map(KnobValue::Count),
            Knob::NapiThread { pid, name } => self
                .napi_threads
                .get(pid)
                .filter(|t| t.name == *name)
                .map(|t| KnobValue::Cpus(t.affinity.clone())),
            Knob::RssIndirection { device } => {
                self.rss_tables.get(device).map(|t| KnobValue::Table {
                    indirection: t.clone(),
                })
            }
            Knob::XpsCpus { device, queue } => {
                self.xps_cpus(device, *queue).cloned().map(KnobValue::Cpus)
            }
        }
    }

    /// Whether a target currently holds `value` (`None` if the target does not exist),
    /// without copying anything.
    pub fn holds(&self, target: &Knob, value: &KnobValue) -> Option<bool> {
        Some(match (target, value) {
            (Knob::IrqAffinity { irq }, KnobValue::Cpus(cpus)) => {
                self.irqs.get(irq)?.affinity == *cpus
            }
            (Knob::RpsCpus { device, queue }, KnobValue::Cpus(cpus)) => {
                self.rx_queue(device, *queue)?.rps_cpus.as_ref()? == cpus
            }
            (Knob::RpsFlowCnt { device, queue }, KnobValue::Count(n)) => {
                self.rx_queue(device, *queue)?.rps_flow_cnt? == *n
            }
            (Knob::RpsSockFlowEntries, KnobValue::Count(n)) => self.rps_sock_flow_entries? == *n,
            (Knob::NapiThread { pid, name }, KnobValue::Cpus(cpus)) => {
                let thread = self.napi_threads.get(pid).filter(|t| t.name == *name)?;
                thread.affinity == *cpus
            }
            (Knob::XpsCpus { device, queue }, KnobValue::Cpus(cpus)) => {
                self.xps_cpus(device, *queue)? == cpus
            }
            (Knob::RssIndirection { device }, KnobValue::Table { indirection }) => {
                self.rss_tables.get(device)? == indirection
            }
            _ => false,
        })
    }

    /// Records a value as written. An IRQ's effective affinity becomes its new mask when
    /// that is a single CPU (the only CPU the kernel can deliver to), and unknown
    /// otherwise: which CPU of a wide mask the kernel picks shows only in where the
    /// interrupts arrive, measured afresh (`fires_on` starts over too).
    pub fn set(&mut self, target: &Knob, value: &KnobValue) {
        match (target, value) {
            (Knob::IrqAffinity { irq }, KnobValue::Cpus(cpus)) => {
                let effective = (cpus.len() == 1).then(|| cpus.clone());
                self.irqs.insert(
                    *irq,
                    IrqAffinity {
                        affinity: cpus.clone(),
                        effective,
                        fires_on: None,
                        work_stays_on: None,
                    },
                );
            }
            (Knob::RpsCpus { device, queue }, KnobValue::Cpus(cpus)) => {
                self.queue_mut(device, *queue).rps_cpus = Some(cpus.clone());
            }
            (Knob::RpsFlowCnt { device, queue }, KnobValue::Count(n)) => {
                self.queue_mut(device, *queue).rps_flow_cnt = Some(*n);
            }
            (Knob::RpsSockFlowEntries, KnobValue::Count(n)) => {
                self.rps_sock_flow_entries = Some(*n);
            }
            (Knob::NapiThread { pid, name }, KnobValue::Cpus(cpus)) => {
                self.napi_threads.insert(
                    *pid,
                    NapiThreadValues {
                        name: name.clone(),
                        affinity: cpus.clone(),
                    },
                );
            }
            (Knob::RssIndirection { device }, KnobValue::Table { indirection }) => {
                self.rss_tables.insert(device.clone(), indirection.clone());
            }
            (Knob::XpsCpus { device, queue }, KnobValue::Cpus(cpus)) => {
                let masks = self.xps.entry(device.clone()).or_default();
                if masks.len() <= *queue as usize {
                    masks.resize(*queue as usize + 1, None);
                }
                masks[*queue as usize] = Some(cpus.clone());
            }
            _ => {}
        }
    }

    /// Records an action as applied.
    pub fn apply(&mut self, action: &Action) {
        self.set(&action.target, &action.new);
    }

    fn queue_mut(&mut self, device: &str, queue: u32) -> &mut RxQueueValues {
        let queues = self.rx_queues.entry(device.to_string()).or_default();
        if queues.len() <= queue as usize {
            queues.resize(queue as usize + 1, RxQueueValues::default());
        }
        &mut queues[queue as usize]
    }
}

/// One value per queue number, `V::default()` for a number no queue has: the placement's
/// per-queue tables are indexed by queue number (receive and transmit alike).
fn by_queue_index<Q, V: Clone + Default>(
    queues: &[Q],
    index: impl Fn(&Q) -> u32,
    value: impl Fn(&Q) -> V,
) -> Vec<V> {
    let len = queues
        .iter()
        .map(|q| index(q) as usize + 1)
        .max()
        .unwrap_or(0);
    let mut values = vec![V::default(); len];
    for q in queues {
        values[index(q) as usize] = value(q);
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::discover;
    use crate::fakeroot::FakeMachine;
    use crate::root::Root;

    #[test]
    fn a_threaded_devices_receive_threads_are_placed() {
        let dir = tempfile::tempdir().unwrap();
        let tree = FakeMachine::with_eth0(4, "virtio_net", 4)
            .write(dir.path())
            .unwrap();
        tree.make_threaded(0, 900).unwrap();
        let machine = discover(&Root::new(dir.path())).unwrap();
        let placement = Placement::from_inventory(&machine.inventory);
        assert_eq!(placement.napi_threads.len(), 4);
    }
}
