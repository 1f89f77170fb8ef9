//! Step 5 of discovery, what the kernel itself says about queues and their NAPI
//! instances over netdev netlink (`queue-get` → `napi-get` → `irq`, the per-NAPI
//! settings), and the polling threads of threaded devices (`napi/DEV-ID`), matched to
//! their queues by NAPI id or, before 6.8, by order.
//!
//! A module of its own because these are the parts of discovery that go past sysfs and
//! procfs: netlink on the host only, and the threads from `proc`; both run after the
//! naming attribution of `super::irqs` and refine it, and a failure in either is a
//! warning, never an error.

use super::{Vector, set_vector};
use crate::model::inventory::{Inventory, IrqRole, RxQueue};
use crate::root::Root;

/// **Plug-in point** for the netdev generic-netlink attribution (`queue-get` gives each
/// queue's NAPI id, `napi-get` that NAPI's `irq`), written elsewhere
/// (`crate::kernel::netlink`). It runs after the `msi_irqs/` + name attribution and may
/// override it: the kernel's own answer beats a naming convention. Use [`set_vector`] to
/// record an answer so the IRQ, the queue and the device stay consistent. Only meaningful
/// when `root.is_host()`; failures belong in `warnings`, never in an error.
pub fn attribute_by_netdev_netlink(
    root: &Root,
    inventory: &mut Inventory,
    warnings: &mut Vec<String>,
) {
    if !root.is_host() {
        return;
    }
    let mut client = match crate::kernel::netlink::NetdevClient::connect() {
        Ok(Some(client)) => client,
        Ok(None) => return, // kernel without the netdev family (< 6.8)
        Err(e) => {
            warnings.push(format!("netdev netlink unavailable: {e}"));
            return;
        }
    };
    let ops = client.family().ops;
    if !(ops.queue_get && ops.napi_get) {
        return;
    }
    let queue_irqs = match client.queue_irqs(None) {
        Ok(queue_irqs) => queue_irqs,
        Err(e) => {
            warnings.push(format!("netdev queue-get/napi-get: {e}"));
            return;
        }
    };
    for (irq, vector) in netlink_vectors(inventory, &queue_irqs) {
        set_vector(inventory, irq, &vector);
    }
    for answer in &queue_irqs {
        if answer.direction != crate::model::snapshot::QueueDirection::Rx {
            continue;
        }
        let queue = inventory
            .devices
            .iter_mut()
            .filter(|d| d.ifindex == Some(answer.ifindex))
            .flat_map(|d| d.rx_queues.iter_mut())
            .find(|q| q.index == answer.queue);
        if let Some(queue) = queue {
            queue.napi_id = answer.napi_id;
            if let Some(napi) = &answer.napi {
                apply_napi_settings(&mut queue.napi, napi);
            }
        }
    }
}

/// Takes the per-NAPI settings `napi-get` carried (6.13+; `threaded` 6.17+) over the
/// device-wide values from sysfs. An attribute the kernel left out keeps the sysfs value,
/// or stays `None` ("not on this kernel") where sysfs has none (`irq-suspend-timeout`).
pub(super) fn apply_napi_settings(
    settings: &mut crate::model::inventory::NapiSettings,
    napi: &crate::kernel::netlink::Napi,
) {
    if napi.defer_hard_irqs.is_some() || napi.gro_flush_timeout.is_some() {
        settings.per_napi = true;
    }
    settings.defer_hard_irqs = napi.defer_hard_irqs.or(settings.defer_hard_irqs);
    settings.gro_flush_timeout_ns = napi.gro_flush_timeout.or(settings.gro_flush_timeout_ns);
    settings.irq_suspend_timeout_ns = napi.irq_suspend_timeout;
    if let Some(mode) = napi.threaded_mode() {
        settings.threaded = Some(mode);
        settings.threaded_per_napi = true;
    }
}

/// The polling thread of each receive queue of a threaded device (`threaded` = 1), from
/// the `napi/DEV-ID` threads (`kernel::napi_threads`). A thread is matched to its queue by
/// the NAPI id netdev netlink gave the queue; where the kernel does not say (before 6.8),
/// by order: the receive NAPIs' ids are handed out in queue order as the driver registers
/// them (virtio_net on 6.1 and 6.12: rx-0..3 polled by ids 8193..8196), so with as many
/// threads as queues the n-th lowest id polls rx-n. Transmit-only NAPIs (id 0) are left
/// out. Problems are warnings: the device is then steered by its IRQs only.
pub(super) fn attach_napi_threads(
    root: &Root,
    inventory: &mut Inventory,
    warnings: &mut Vec<String>,
) {
    let threaded: Vec<String> = inventory
        .devices
        .iter()
        .filter(|d| has_napi_threads(d))
        .map(|d| d.name.clone())
        .collect();
    if threaded.is_empty() {
        return;
    }
    let names: Vec<&str> = threaded.iter().map(String::as_str).collect();
    let threads = match crate::kernel::napi_threads::scan(root, &names) {
        Ok(threads) => threads,
        Err(e) => {
            warnings.push(format!("cannot list NAPI threads: {e}"));
            return;
        }
    };
    for device in inventory.devices.iter_mut().filter(|d| has_napi_threads(d)) {
        let mut rx_threads: Vec<_> = threads
            .iter()
            .filter(|t| t.napi_id != 0)
            .filter(|t| {
                crate::kernel::napi_threads::napi_id_of(&t.name, &device.name) == Some(t.napi_id)
            })
            .collect();
        rx_threads.sort_by_key(|t| t.napi_id);
        let by_id = device.rx_queues.iter().all(|q| q.napi_id.is_some());
        let by_order = rx_threads.len() == device.rx_queues.len();
        if !by_id && !by_order {
            warnings.push(format!(
                "{}: {} NAPI threads for {} receive queues and no NAPI ids from the kernel: \
                 cannot tell which queue each polls, so they are not pinned",
                device.name,
                rx_threads.len(),
                device.rx_queues.len()
            ));
            continue;
        }
        let mut queues: Vec<&mut RxQueue> = device.rx_queues.iter_mut().collect();
        queues.sort_by_key(|q| q.index);
        for (n, queue) in queues.into_iter().enumerate() {
            let thread = if by_id {
                rx_threads.iter().find(|t| Some(t.napi_id) == queue.napi_id)
            } else {
                rx_threads.get(n)
            };
            queue.napi_thread = thread.map(|t| (*t).clone());
        }
    }
}

/// Whether some NAPI of `device` polls in a thread: the whole device (`threaded` 1 or 2),
/// or single NAPIs set threaded over netdev netlink (`napi-set`, 6.17+), which leave the
/// device's `threaded` at 0.
fn has_napi_threads(device: &crate::model::inventory::NetDevice) -> bool {
    use crate::model::inventory::ThreadedMode;
    device.threaded == Some(true)
        || device.rx_queues.iter().any(|q| {
            matches!(
                q.napi.threaded,
                Some(ThreadedMode::Enabled | ThreadedMode::BusyPoll)
            )
        })
}

/// Joins the kernel's queue → IRQ answers into one [`Vector`] per IRQ: an IRQ whose NAPI
/// polls both rx-n and tx-n is a combined vector.
pub(super) fn netlink_vectors(
    inventory: &Inventory,
    queue_irqs: &[crate::kernel::netlink::QueueIrq],
) -> Vec<(u32, Vector)> {
    use crate::model::snapshot::QueueDirection;
    let mut vectors: Vec<(u32, Vector)> = Vec::new();
    for answer in queue_irqs {
        let Some(irq) = answer.irq else { continue };
        if inventory.irq(irq).is_none() {
            continue;
        }
        let Some(device) = inventory
            .devices
            .iter()
            .position(|d| d.ifindex == Some(answer.ifindex))
        else {
            continue;
        };
        let index = match vectors.iter().position(|(i, _)| *i == irq) {
            Some(index) => index,
            None => {
                vectors.push((
                    irq,
                    Vector {
                        device,
                        role: IrqRole::Other,
                        rx_queue: None,
                        tx_queue: None,
                    },
                ));
                vectors.len() - 1
            }
        };
        let vector = &mut vectors[index].1;
        match answer.direction {
            QueueDirection::Rx => vector.rx_queue = Some(answer.queue),
            QueueDirection::Tx => vector.tx_queue = Some(answer.queue),
        }
        vector.role = match (vector.rx_queue, vector.tx_queue) {
            (Some(_), Some(_)) => IrqRole::Rxtx,
            (Some(_), None) => IrqRole::Rx,
            (None, Some(_)) => IrqRole::Tx,
            (None, None) => IrqRole::Other,
        };
    }
    vectors
}
