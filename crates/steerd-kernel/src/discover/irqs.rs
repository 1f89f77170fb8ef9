//! Steps 3 and 4 of discovery: every numbered IRQ of `proc/interrupts` with its
//! `proc/irq/<N>/` settings, and which device, queue and role each serves: FIRST the PCI
//! function's `msi_irqs/` (hardware truth: which device an IRQ belongs to), THEN the
//! drivers' naming patterns ([`crate::kernel::irq_names`]) for the queue and role, and
//! for IRQs no `msi_irqs/` claims, the names alone. [`set_vector`] records an
//! attribution, and is how a later, better source (netdev netlink, `super::napi`)
//! overrides one.
//!
//! A module of its own because it is the part of discovery that needs nothing but procfs
//! and sysfs (no netlink, no threads) and has rules of its own, the refinements after
//! naming, per device: gve notification blocks are split into TX (first
//! half) and RX (second half) queues; a function-named completion vector (`mlx4-comp-N`)
//! is demoted to "other" when the device has interface-named queue vectors of its own (the
//! netdev then does not use them); a queue-less combined vector (`virtioN-virtqueues`, or
//! the only vector of a device, named just like it, e.g. a single-MSI `eth0`)
//! serves every queue of its device.

use std::collections::HashMap;

use crate::kernel::irq_names::{self, Classification, DeviceNames, KnownDevice, NameKind};
use crate::kernel::procfs::interrupts::Interrupts;
use crate::kernel::sysfs::irq;
use crate::kernel::sysfs::net::SysNetDevice;
use crate::model::inventory::{Inventory, Irq, IrqRole};
use crate::root::Root;

/// What one IRQ serves: a device (index into `Inventory.devices`), a role, and the receive
/// and transmit queues (both `None` for a combined vector serving every queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vector {
    pub device: usize,
    pub role: IrqRole,
    pub rx_queue: Option<u32>,
    pub tx_queue: Option<u32>,
}

/// Records that `irq` serves `vector`: sets the IRQ's device, queue and role, lists the
/// IRQ on the device, and sets the served queues' `irq`. An earlier attribution of the
/// same IRQ (its device's list and queues) is undone first, so a later, better source can
/// override a naming convention. Unknown IRQ numbers or device indices are ignored.
pub fn set_vector(inventory: &mut Inventory, irq: u32, vector: &Vector) {
    let Some(name) = inventory.devices.get(vector.device).map(|d| d.name.clone()) else {
        return;
    };
    let Ok(position) = inventory.irqs.binary_search_by_key(&irq, |i| i.irq) else {
        return;
    };
    let entry = &mut inventory.irqs[position];
    let previous = entry.device.replace(name);
    entry.role = vector.role;
    entry.queue = vector.rx_queue.or(vector.tx_queue);
    if let Some(previous) = previous
        && let Some(device) = inventory.devices.iter_mut().find(|d| d.name == previous)
    {
        device.irqs.retain(|&i| i != irq);
        for queue in device.rx_queues.iter_mut().filter(|q| q.irq == Some(irq)) {
            queue.irq = None;
        }
        for queue in device.tx_queues.iter_mut().filter(|q| q.irq == Some(irq)) {
            queue.irq = None;
        }
    }
    also_served_by(inventory, irq, vector);
}

/// Lists `irq` on the vector's device and sets the served queues' `irq`, leaving the IRQ's
/// own device/queue/role alone: for the second NIC on a shared line.
pub(super) fn also_served_by(inventory: &mut Inventory, irq: u32, vector: &Vector) {
    let Some(device) = inventory.devices.get_mut(vector.device) else {
        return;
    };
    if !device.irqs.contains(&irq) {
        device.irqs.push(irq);
    }
    if let Some(index) = vector.rx_queue
        && let Some(queue) = device.rx_queues.iter_mut().find(|q| q.index == index)
    {
        queue.irq = Some(irq);
    }
    if let Some(index) = vector.tx_queue
        && let Some(queue) = device.tx_queues.iter_mut().find(|q| q.index == index)
    {
        queue.irq = Some(irq);
    }
}

/// Joins `proc/interrupts` rows with their `proc/irq/<N>/` settings.
///
/// An IRQ whose settings cannot be read or make no sense (a malformed file, a directory
/// where a file should be) is kept, as managed (steerd never writes it), with a warning:
/// one odd IRQ must not stop steerd from steering all the others.
pub(super) fn read_irqs(
    root: &Root,
    parsed: &Interrupts,
    nr_cpu_ids: u32,
    warnings: &mut Vec<String>,
) -> Vec<Irq> {
    let mut irqs = Vec::with_capacity(parsed.lines.len());
    for line in &parsed.lines {
        let settings = match irq::read_irq(root, line.irq) {
            Ok(settings) => settings.unwrap_or_default(),
            Err(e) => {
                warnings.push(format!("irq {}: {e}; left alone", line.irq));
                irq::IrqSettings {
                    managed: true,
                    ..Default::default()
                }
            }
        };
        let mut per_cpu = line.per_cpu.clone();
        if per_cpu.len() < nr_cpu_ids as usize {
            per_cpu.resize(nr_cpu_ids as usize, 0);
        }
        irqs.push(Irq {
            irq: line.irq,
            name: line.name.clone(),
            chip: line.chip.clone(),
            device: None,
            queue: None,
            role: IrqRole::Other,
            affinity: settings.affinity,
            effective_affinity: settings.effective_affinity,
            affinity_hint: settings.affinity_hint,
            node: settings.node,
            managed: settings.managed,
            per_cpu,
            total: line.total,
        });
    }
    irqs
}

/// Attributes IRQs to devices: `msi_irqs/` first, names second. Returns (IRQ, vector)
/// for every attributed IRQ, ascending by IRQ; a shared line naming several NICs appears
/// once per NIC, the first being the IRQ's device.
pub(super) fn attribute(devices: &[SysNetDevice], parsed: &Interrupts) -> Vec<(u32, Vector)> {
    let known: Vec<KnownDevice> = devices
        .iter()
        .map(|d| KnownDevice {
            name: &d.device.name,
            driver: d.device.driver.as_deref(),
            pci_function: d.device.pci_function.as_deref(),
            virtio_device: d.virtio_device.as_deref(),
        })
        .collect();
    let names = DeviceNames::new(&known);
    let mut owners: HashMap<u32, Vec<usize>> = HashMap::new();
    for (index, device) in devices.iter().enumerate() {
        for &irq in &device.msi_irqs {
            owners.entry(irq).or_default().push(index);
        }
    }

    let mut found: Vec<(u32, Classification)> = Vec::new();
    for line in &parsed.lines {
        let owners = owners.get(&line.irq).map(Vec::as_slice).unwrap_or_default();
        let before = found.len();
        for classification in line.actions().filter_map(|action| names.classify(action)) {
            let owned = owners.is_empty() || owners.contains(&classification.device);
            let seen = found[before..]
                .iter()
                .any(|(_, c)| c.device == classification.device);
            if owned && !seen {
                found.push((line.irq, classification));
            }
            // With owners known, one device is the answer; a shared INTx line (no
            // msi_irqs) may serve several NICs.
            if !owners.is_empty() && found.len() > before {
                break;
            }
        }
        if found.len() == before
            && let Some(&device) = owners.first()
        {
            // The hardware says whose it is; the name says nothing more.
            found.push((
                line.irq,
                Classification {
                    device,
                    role: IrqRole::Other,
                    rx_queue: None,
                    tx_queue: None,
                    kind: NameKind::Function,
                },
            ));
        }
    }
    refine_per_device(&mut found, devices.len());
    found
        .into_iter()
        .map(|(irq, c)| {
            (
                irq,
                Vector {
                    device: c.device,
                    role: c.role,
                    rx_queue: c.rx_queue,
                    tx_queue: c.tx_queue,
                },
            )
        })
        .collect()
}

/// The per-device refinements described in the module documentation.
fn refine_per_device(found: &mut [(u32, Classification)], device_count: usize) {
    let mut blocks = vec![0u32; device_count];
    let mut has_interface_queues = vec![false; device_count];
    let mut vectors = vec![0u32; device_count];
    let mut queue_vectors = vec![0u32; device_count];
    for (_, c) in found.iter() {
        let Some(slot) = blocks.get_mut(c.device) else {
            continue;
        };
        if c.kind == NameKind::NotifyBlock {
            *slot += 1;
        }
        if c.kind == NameKind::Interface && c.queue().is_some() {
            has_interface_queues[c.device] = true;
        }
        vectors[c.device] += 1;
        if c.role != IrqRole::Other {
            queue_vectors[c.device] += 1;
        }
    }
    for (_, c) in found.iter_mut() {
        let device = c.device;
        if device >= device_count {
            continue;
        }
        if c.kind == NameKind::NotifyBlock
            && let Some(block) = c.rx_queue
        {
            let (role, queue) = irq_names::split_notify_blocks(block, blocks[device]);
            c.role = role;
            (c.rx_queue, c.tx_queue) = match role {
                IrqRole::Tx => (None, Some(queue)),
                _ => (Some(queue), None),
            };
        } else if c.kind == NameKind::Function
            && c.role != IrqRole::Other
            && has_interface_queues[device]
        {
            *c = Classification {
                role: IrqRole::Other,
                rx_queue: None,
                tx_queue: None,
                ..*c
            };
        } else if c.kind == NameKind::Interface
            && c.role == IrqRole::Other
            && vectors[device] == 1
            && queue_vectors[device] == 0
        {
            // A device's only vector, named just like the device (a single-MSI or INTx
            // NIC): it serves every queue.
            c.role = IrqRole::Rxtx;
        }
    }
}

/// A queue-less combined vector serves every queue of its device that has no vector of
/// its own.
pub(super) fn serve_all_queues(inventory: &mut Inventory, shared: &[(usize, u32)]) {
    for &(device, irq) in shared {
        let Some(device) = inventory.devices.get_mut(device) else {
            continue;
        };
        for queue in device.rx_queues.iter_mut().filter(|q| q.irq.is_none()) {
            queue.irq = Some(irq);
        }
        for queue in device.tx_queues.iter_mut().filter(|q| q.irq.is_none()) {
            queue.irq = Some(irq);
        }
    }
}
