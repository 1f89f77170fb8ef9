//! What the simulated machine shows the policy: the inventory discovery would find, the
//! current values of every writable target, and the per-tick counters.

use super::machine::SimMachine;
use crate::cpuset::CpuSet;
use crate::model::inventory::{Inventory, Irq, IrqRole, NetDevice, RxQueue};
use crate::model::snapshot::{CpuTimes, QueueCounters, QueueDirection, Snapshot};
use crate::policy::{IrqAffinity, Placement, RxQueueValues};

impl SimMachine {
    /// The inventory as discovery would find it now.
    pub fn inventory(&self) -> Inventory {
        let mut devices = Vec::new();
        let mut irqs = Vec::new();
        let words = self.topology.nr_cpu_ids.div_ceil(32);
        for (index, nic) in self.nics.iter().enumerate() {
            let spec = &nic.spec;
            let home = self.home(index);
            let mut device_irqs = Vec::new();
            let rx_queues = (0..spec.queues)
                .map(|q| RxQueue {
                    index: q,
                    rps_cpus: Some(nic.rps[q as usize].clone()),
                    rps_mask_words: words,
                    rps_flow_cnt: Some(nic.flow_cnt[q as usize]),
                    irq: self.queue_irq(index, q),
                    napi_id: None,
                    napi_thread: None,
                    napi: Default::default(),
                })
                .collect();
            if nic.first_irq.is_some() {
                let queue_vectors = (0..spec.queues).map(|q| (self.queue_irq(index, q), Some(q)));
                let tx_vectors = (0..spec.queues).map(|q| (self.tx_irq(index, q), Some(q)));
                let misc = std::iter::once((self.misc_irq(index), None));
                for (irq, queue) in queue_vectors.chain(tx_vectors).chain(misc) {
                    let Some(irq) = irq else { continue };
                    let tx = self.tx_irq(index, queue.unwrap_or(0)) == Some(irq);
                    let (name, role) = match (queue, spec.separate_tx, tx) {
                        (None, true, _) => (format!("{}-config", spec.name), IrqRole::Other),
                        (None, false, _) => (spec.name.clone(), IrqRole::Other),
                        (Some(q), true, true) => (format!("{}-output.{q}", spec.name), IrqRole::Tx),
                        (Some(q), true, false) => (format!("{}-input.{q}", spec.name), IrqRole::Rx),
                        (Some(q), false, _) => (format!("{}-TxRx-{q}", spec.name), IrqRole::Rxtx),
                    };
                    device_irqs.push(irq);
                    irqs.push(Irq {
                        irq,
                        name,
                        chip: Some("PCI-MSIX".to_string()),
                        device: Some(spec.name.clone()),
                        queue,
                        role,
                        affinity: self.affinity.get(&irq).cloned(),
                        effective_affinity: self
                            .reported_effective(irq)
                            .map(|c| CpuSet::from_iter([c])),
                        affinity_hint: None,
                        node: spec.node,
                        managed: self.irq_is_managed(irq),
                        per_cpu: Vec::new(),
                        total: 0,
                    });
                }
                device_irqs.sort_unstable();
            }
            devices.push(NetDevice {
                name: spec.name.clone(),
                ifindex: Some(index as u32 + 2),
                driver: Some(spec.driver.clone()),
                kind: spec.kind,
                operstate: Some("up".to_string()),
                master: None,
                pci_function: spec.node.map(|_| format!("0000:{:02x}:00.0", index + 1)),
                physical_function: None,
                numa_node: spec.node,
                local_cpus: spec.node.map(|_| home.clone()),
                rx_queues,
                tx_queues: Vec::new(),
                irqs: device_irqs,
                threaded: None,
                threaded_mode: None,
                napi_defer_hard_irqs: None,
                gro_flush_timeout_ns: None,
                rss_table: nic.has_table().then(|| nic.table.clone()),
                udp_hashed_on_addresses: spec.udp_hashed_on_addresses.clone(),
            });
        }
        for other in &self.others {
            irqs.push(Irq {
                irq: other.irq,
                name: other.name.clone(),
                chip: Some("IO-APIC".to_string()),
                device: None,
                queue: None,
                role: IrqRole::Other,
                affinity: self.affinity.get(&other.irq).cloned(),
                effective_affinity: self
                    .reported_effective(other.irq)
                    .map(|c| CpuSet::from_iter([c])),
                affinity_hint: None,
                node: None,
                managed: other.managed,
                per_cpu: Vec::new(),
                total: 0,
            });
        }
        devices.sort_by(|a, b| a.name.cmp(&b.name));
        irqs.sort_by_key(|irq| irq.irq);
        Inventory {
            devices,
            irqs,
            rps_sock_flow_entries: Some(self.sock_flow_entries),
        }
    }

    /// The current values of every writable target.
    pub fn placement(&self) -> Placement {
        let irqs = self
            .affinity
            .iter()
            .map(|(&irq, cpus)| {
                (
                    irq,
                    IrqAffinity {
                        affinity: cpus.clone(),
                        effective: self.reported_effective(irq).map(|c| CpuSet::from_iter([c])),
                        // As the daemon measures it: only for masks that leave the kernel
                        // a choice, and only when the IRQ fired.
                        fires_on: self.fired_on(irq).filter(|_| cpus.len() > 1),
                        // The engine's own judgement (`engine::move_check`), not the
                        // machine's: the engine marks it again on what it observes.
                        work_stays_on: None,
                    },
                )
            })
            .collect();
        let rx_queues = self
            .nics
            .iter()
            .map(|nic| {
                let values = nic
                    .rps
                    .iter()
                    .zip(&nic.flow_cnt)
                    .map(|(mask, cnt)| RxQueueValues {
                        rps_cpus: Some(mask.clone()),
                        rps_flow_cnt: Some(*cnt),
                    })
                    .collect();
                (nic.spec.name.clone(), values)
            })
            .collect();
        Placement {
            irqs,
            rx_queues,
            rps_sock_flow_entries: Some(self.sock_flow_entries),
            napi_threads: Default::default(),
            rss_tables: self
                .nics
                .iter()
                .filter(|nic| nic.has_table())
                .map(|nic| (nic.spec.name.clone(), nic.table.clone()))
                .collect(),
            // The simulated machine has no XPS.
            xps: Default::default(),
        }
    }

    /// The counters as they are now (before the first tick: all zero).
    pub fn snapshot(&self) -> Snapshot {
        let online = &self.topology.online;
        let cpu_times = online
            .iter()
            .map(|cpu| {
                let t = self.counters.times[cpu as usize];
                CpuTimes {
                    cpu,
                    user: t[0] as u64,
                    system: t[1] as u64,
                    idle: t[2] as u64,
                    softirq: t[3] as u64,
                    ..CpuTimes::default()
                }
            })
            .collect();
        let softnet = online
            .iter()
            .map(|cpu| self.counters.softnet[cpu as usize])
            .collect();
        let queues = self
            .nics
            .iter()
            .filter(|nic| nic.spec.queue_counters)
            .flat_map(|nic| {
                nic.queue_packets
                    .iter()
                    .enumerate()
                    .map(|(q, &packets)| QueueCounters {
                        device: nic.spec.name.clone(),
                        direction: QueueDirection::Rx,
                        queue: q as u32,
                        packets,
                        bytes: None,
                    })
            })
            .collect();
        Snapshot {
            taken_at_ns: self.now_ns,
            cpu_times,
            softnet,
            irq_totals: self.counters.irq_totals.clone(),
            queues,
            stat_taken_at_ns: None,
            napi_threads: Vec::new(),
        }
    }
}
