//! Discovery: the machine model (topology + inventory) from one root.
//!
//! Runs at start, on link events, on CPU hot-plug and every few minutes; never per tick.
//! Steps:
//!
//! 1. topology from `sys/devices/system/{cpu,node}`, and the CPUs of isolated cgroup
//!    partitions ([`cgroup_isolation`]; a failed read is a warning);
//! 2. network devices from `sys/class/net`, and on the host the link kinds from rtnetlink
//!    (a failed dump is a warning, not an error);
//! 3. every numbered IRQ of `proc/interrupts`, with its `proc/irq/<N>/` settings;
//! 4. attribution of IRQs to devices and queues: FIRST the PCI function's `msi_irqs/`
//!    (hardware truth: which device an IRQ belongs to), THEN the drivers' naming patterns
//!    ([`crate::kernel::irq_names`]) for the queue and role — and for IRQs no `msi_irqs/`
//!    claims, the names alone;
//! 5. the netdev netlink family's `queue-get` → `napi-get` → `irq`, where the kernel and
//!    driver report it: see [`attribute_by_netdev_netlink`], the place where it plugs in;
//! 6. `proc/sys/net/core/rps_sock_flow_entries`.
//!
//! Steps 3 and 4, the IRQs and their attribution by `msi_irqs/` and names with the
//! refinements per device, are in `irqs`; step 5 and the NAPI threads of threaded
//! devices in `napi`. This module runs the steps in order and reads the rest.

mod irqs;
mod napi;

pub use irqs::{Vector, set_vector};
pub use napi::attribute_by_netdev_netlink;

use std::collections::HashMap;

use crate::error::Error;
use crate::kernel::cgroup_isolation;
use crate::kernel::linkinfo;
use crate::kernel::procfs::interrupts;
use crate::kernel::sysfs::net::SysNetDevice;
use crate::kernel::sysfs::{cpu, net};
use crate::model::inventory::{DeviceKind, Inventory, IrqRole};
use crate::model::topology::Topology;
use crate::root::Root;
use irqs::{also_served_by, attribute, read_irqs, serve_all_queues};
use napi::attach_napi_threads;

/// Everything discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub topology: Topology,
    pub inventory: Inventory,
    /// Non-fatal problems (a failed netlink dump, ...), for the log and `inspect`.
    pub warnings: Vec<String>,
}

/// Discovers the machine under `root`.
pub fn discover(root: &Root) -> Result<Machine, Error> {
    let mut topology = cpu::read_topology(root)?;
    let mut warnings = Vec::new();
    match cgroup_isolation::read_isolated_partitions(root) {
        Ok(cpus) => topology.isolated_partitions = cpus,
        Err(e) => warnings.push(format!("isolated cgroup partitions not read: {e}")),
    }

    let mut devices = net::read_devices(root)?;
    if !root.path("sys/class/net").is_dir() {
        warnings.push(format!(
            "{} does not exist: no network devices",
            root.path("sys/class/net").display()
        ));
    }
    if root.is_host() {
        refine_kinds_by_rtnetlink(&mut devices, &mut warnings);
    }

    let parsed = interrupts::read(root)?;
    let mut irqs = read_irqs(root, &parsed, topology.nr_cpu_ids, &mut warnings);
    let attributions = attribute(&devices, &parsed);

    let mut inventory = Inventory {
        devices: Vec::with_capacity(devices.len()),
        irqs: Vec::new(),
        rps_sock_flow_entries: read_rps_sock_flow_entries(root)?,
    };
    inventory.devices = devices.into_iter().map(|d| d.device).collect();
    irqs.sort_by_key(|irq| irq.irq);
    inventory.irqs = irqs;
    let mut serving_all = Vec::new();
    let mut previous = None;
    for (irq, vector) in attributions {
        if previous == Some(irq) {
            // Another NIC on the same shared (INTx) line: it is served by it too.
            also_served_by(&mut inventory, irq, &vector);
        } else {
            set_vector(&mut inventory, irq, &vector);
        }
        previous = Some(irq);
        if vector.role == IrqRole::Rxtx && vector.rx_queue.is_none() && vector.tx_queue.is_none() {
            serving_all.push((vector.device, irq));
        }
    }
    serve_all_queues(&mut inventory, &serving_all);

    attribute_by_netdev_netlink(root, &mut inventory, &mut warnings);
    attach_napi_threads(root, &mut inventory, &mut warnings);
    read_rss_tables(root, &mut inventory, &mut warnings);

    for device in &mut inventory.devices {
        device.irqs.sort_unstable();
        device.irqs.dedup();
    }
    Ok(Machine {
        topology,
        inventory,
        warnings,
    })
}

/// Reads the RSS indirection table of every device with several receive queues, for the
/// table lever (`policy::rss`). A device without one (veth, virtio-net without RSS) is
/// simply left without; any other failure is a warning, and the device is left without
/// too, so the lever never acts on a table it could not read.
fn read_rss_tables(root: &Root, inventory: &mut Inventory, warnings: &mut Vec<String>) {
    for device in &mut inventory.devices {
        if device.rx_queues.len() < 2 || device.kind == DeviceKind::Loopback {
            continue;
        }
        match crate::kernel::rss::knob::read(root, &device.name) {
            Ok(reading) => {
                device.rss_table = Some(reading.indirection);
                if root.is_host() {
                    device.udp_hashed_on_addresses = udp_hashed_on_addresses(&device.name);
                }
            }
            Err(error) if error.is_not_settable() => {}
            Err(error) => warnings.push(format!("RSS table not read: {error}")),
        }
    }
}

/// The UDP families a NIC hashes on addresses only (`ETHTOOL_GRXFH`); none when it cannot
/// be read (the hash fields are advice, never a reason to fail discovery).
fn udp_hashed_on_addresses(device: &str) -> Vec<String> {
    use crate::kernel::ethtool::{Ethtool, UDP_V4_FLOW, UDP_V6_FLOW};
    let Ok(ethtool) = Ethtool::new() else {
        return Vec::new();
    };
    [("udp4", UDP_V4_FLOW), ("udp6", UDP_V6_FLOW)]
        .into_iter()
        .filter(|(_, flow)| {
            ethtool
                .rx_flow_hash(device, *flow)
                .is_ok_and(|hash| hash.has_addresses() && !hash.has_ports())
        })
        .map(|(family, _)| family.to_string())
        .collect()
}

/// Refines `OtherVirtual` devices with rtnetlink's link kind (veth, bond, vlan, bridge),
/// matched by ifindex and name. A failed dump becomes a warning.
fn refine_kinds_by_rtnetlink(devices: &mut [SysNetDevice], warnings: &mut Vec<String>) {
    if !devices
        .iter()
        .any(|d| d.device.kind == DeviceKind::OtherVirtual)
    {
        return;
    }
    let links = match linkinfo::dump_links() {
        Ok(links) => links,
        Err(err) => {
            warnings.push(format!(
                "link kinds from rtnetlink unavailable ({err}); veth devices show as other_virtual"
            ));
            return;
        }
    };
    let by_index: HashMap<u32, &linkinfo::Link> =
        links.iter().map(|link| (link.ifindex, link)).collect();
    for device in devices.iter_mut() {
        let Some(link) = device.device.ifindex.and_then(|i| by_index.get(&i)) else {
            continue;
        };
        // sysfs may show another network namespace than our socket: names must agree.
        if link
            .name
            .as_deref()
            .is_some_and(|n| n != device.device.name)
        {
            continue;
        }
        device.device.kind = linkinfo::refine_kind(device.device.kind, link.kind.as_deref());
    }
}

fn read_rps_sock_flow_entries(root: &Root) -> Result<Option<u32>, Error> {
    const FILE: &str = "proc/sys/net/core/rps_sock_flow_entries";
    match root.read_optional(FILE)? {
        None => Ok(None),
        Some(text) => text.trim().parse().map(Some).map_err(|_| {
            Error::parse(
                root.path(FILE),
                1,
                format!("not a number: {:?}", text.trim()),
            )
        }),
    }
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::inventory::{Irq, NetDevice, RxQueue};

    fn inventory() -> Inventory {
        let device = |name: &str| NetDevice {
            rx_queues: vec![RxQueue::bare(0), RxQueue::bare(1)],
            ..NetDevice::bare(name, DeviceKind::Physical)
        };
        let irq = Irq {
            per_cpu: vec![0; 2],
            ..Irq::bare(40, "eth0-TxRx-0")
        };
        Inventory {
            devices: vec![device("eth0"), device("eth1")],
            irqs: vec![irq],
            rps_sock_flow_entries: None,
        }
    }

    #[test]
    fn a_later_attribution_replaces_an_earlier_one() {
        let mut inv = inventory();
        let rx = |device, queue| Vector {
            device,
            role: IrqRole::Rx,
            rx_queue: Some(queue),
            tx_queue: None,
        };
        set_vector(&mut inv, 40, &rx(0, 0));
        assert_eq!(inv.devices[0].rx_queues[0].irq, Some(40));
        assert_eq!(inv.devices[0].irqs, vec![40]);
        set_vector(&mut inv, 40, &rx(1, 1));
        assert_eq!(inv.devices[0].rx_queues[0].irq, None);
        assert!(inv.devices[0].irqs.is_empty());
        assert_eq!(inv.devices[1].rx_queues[1].irq, Some(40));
        let irq = &inv.irqs[0];
        assert_eq!(
            (irq.device.as_deref(), irq.queue, irq.role),
            (Some("eth1"), Some(1), IrqRole::Rx)
        );
        // Unknown IRQs and devices are ignored.
        set_vector(&mut inv, 99, &rx(0, 0));
        set_vector(&mut inv, 40, &rx(7, 0));
        assert_eq!(inv.irqs[0].device.as_deref(), Some("eth1"));
    }

    #[test]
    fn a_root_without_network_devices_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("sys/devices/system/cpu")).unwrap();
        std::fs::write(d.join("sys/devices/system/cpu/possible"), "0-1\n").unwrap();
        std::fs::create_dir_all(d.join("proc")).unwrap();
        std::fs::write(
            d.join("proc/interrupts"),
            "CPU0 CPU1\n 1: 0 0 IO-APIC 1-edge i8042\n",
        )
        .unwrap();
        let machine = discover(&Root::new(d)).unwrap();
        assert!(machine.inventory.devices.is_empty());
        assert_eq!(machine.inventory.irqs.len(), 1);
        assert_eq!(machine.warnings.len(), 1, "{:?}", machine.warnings);
        std::fs::remove_file(d.join("proc/interrupts")).unwrap();
        let err = discover(&Root::new(d)).unwrap_err().to_string();
        assert!(err.contains("proc/interrupts"), "{err}");
    }
}

#[cfg(test)]
mod netlink_join_tests {
    use super::napi::netlink_vectors;
    use super::*;
    use crate::fakeroot::{FakeMachine, FakeNic};
    use crate::kernel::netlink::QueueIrq;
    use crate::model::snapshot::QueueDirection;

    #[test]
    fn the_kernels_answer_overrides_the_naming_convention() {
        let dir = tempfile::tempdir().unwrap();
        let mut machine = FakeMachine::new(4);
        machine.nics.push(FakeNic {
            name: "eth0".into(),
            driver: "ixgbe".into(),
            node: None,
            queues: 2,
        });
        let tree = machine.write(dir.path()).unwrap();
        let mut found = discover(&Root::new(dir.path())).unwrap();
        let (q0, q1) = (tree.queue_irqs[0][0], tree.queue_irqs[0][1]);
        // Say the kernel reports the vectors the other way round, split into rx and tx.
        let answers = [
            (QueueDirection::Rx, 0, q1),
            (QueueDirection::Tx, 0, q1),
            (QueueDirection::Rx, 1, q0),
            (QueueDirection::Tx, 9, 12345), // an IRQ that does not exist: ignored
        ]
        .map(|(direction, queue, irq)| QueueIrq {
            ifindex: 2,
            direction,
            queue,
            napi_id: Some(1),
            irq: Some(irq),
            napi: None,
        });
        for (irq, vector) in netlink_vectors(&found.inventory, &answers) {
            set_vector(&mut found.inventory, irq, &vector);
        }
        let eth0 = found.inventory.device("eth0").unwrap();
        assert_eq!(eth0.rx_queues[0].irq, Some(q1));
        assert_eq!(eth0.rx_queues[1].irq, Some(q0));
        let moved = found.inventory.irq(q1).unwrap();
        assert_eq!((moved.role, moved.queue), (IrqRole::Rxtx, Some(0)));
        assert_eq!(found.inventory.irq(q0).unwrap().role, IrqRole::Rx);
    }
}

#[cfg(test)]
mod napi_thread_tests {
    use super::napi::apply_napi_settings;
    use super::*;
    use crate::fakeroot::FakeMachine;

    fn four_queues() -> FakeMachine {
        FakeMachine::with_eth0(4, "virtio_net", 4)
    }

    #[test]
    fn napi_settings_come_from_the_devices_sysfs_files_off_the_host() {
        use crate::model::inventory::{NapiSettings, ThreadedMode};
        let dir = tempfile::tempdir().unwrap();
        let tree = four_queues().write(dir.path()).unwrap();
        let root = Root::new(dir.path());
        let fresh = discover(&root).unwrap();
        let device = fresh.inventory.device("eth0").unwrap();
        assert_eq!(device.threaded_mode, Some(ThreadedMode::Disabled));
        assert_eq!(
            device.rx_queues[0].napi,
            NapiSettings {
                defer_hard_irqs: Some(0),
                gro_flush_timeout_ns: Some(0),
                irq_suspend_timeout_ns: None,
                threaded: Some(ThreadedMode::Disabled),
                threaded_per_napi: false,
                per_napi: false,
            },
            "no netlink on a fake root: irq-suspend-timeout is not known, not 0"
        );
        tree.set_napi_deferral(0, 2, 200_000).unwrap();
        tree.make_busy_poll(0, 900).unwrap();
        let machine = discover(&root).unwrap();
        let device = machine.inventory.device("eth0").unwrap();
        assert_eq!(device.threaded, Some(true), "busy-poll threads are threads");
        assert_eq!(device.threaded_mode, Some(ThreadedMode::BusyPoll));
        assert_eq!(
            (device.napi_defer_hard_irqs, device.gro_flush_timeout_ns),
            (Some(2), Some(200_000))
        );
        for queue in &device.rx_queues {
            assert_eq!(queue.napi.defer_hard_irqs, Some(2));
            assert_eq!(queue.napi.gro_flush_timeout_ns, Some(200_000));
            assert_eq!(queue.napi.threaded, Some(ThreadedMode::BusyPoll));
            assert!(queue.napi_thread.is_some());
        }
    }

    #[test]
    fn per_napi_settings_from_netlink_win_over_the_devices() {
        use crate::model::inventory::{NapiSettings, ThreadedMode};
        let mut settings = NapiSettings {
            defer_hard_irqs: Some(0),
            gro_flush_timeout_ns: Some(0),
            irq_suspend_timeout_ns: None,
            threaded: Some(ThreadedMode::Enabled),
            threaded_per_napi: false,
            per_napi: false,
        };
        // 6.13..6.16: the deferral per NAPI, `threaded` still only per device.
        let napi = crate::kernel::netlink::Napi {
            id: 8193,
            ifindex: 2,
            defer_hard_irqs: Some(4),
            gro_flush_timeout: Some(0),
            irq_suspend_timeout: Some(0),
            ..Default::default()
        };
        apply_napi_settings(&mut settings, &napi);
        assert_eq!(settings.defer_hard_irqs, Some(4));
        assert_eq!(
            settings.irq_suspend_timeout_ns,
            Some(0),
            "on this kernel: 0"
        );
        assert_eq!(settings.threaded, Some(ThreadedMode::Enabled));
        assert!(
            !settings.threaded_per_napi,
            "the device's mode, not the NAPI's"
        );
        assert!(settings.per_napi);
        // 6.19: busy-poll for this NAPI alone.
        let napi = crate::kernel::netlink::Napi {
            threaded: Some(2),
            ..napi
        };
        apply_napi_settings(&mut settings, &napi);
        assert_eq!(settings.threaded, Some(ThreadedMode::BusyPoll));
        assert!(settings.threaded_per_napi);
    }

    #[test]
    fn a_threaded_devices_receive_threads_are_found_in_queue_order() {
        let dir = tempfile::tempdir().unwrap();
        let tree = four_queues().write(dir.path()).unwrap();
        let root = Root::new(dir.path());
        let unthreaded = discover(&root).unwrap();
        let device = unthreaded.inventory.device("eth0").unwrap();
        assert!(device.rx_queues.iter().all(|q| q.napi_thread.is_none()));
        let pids = tree.make_threaded(0, 900).unwrap();
        let machine = discover(&root).unwrap();
        let device = machine.inventory.device("eth0").unwrap();
        assert_eq!(device.threaded, Some(true));
        let found: Vec<(u32, String)> = device
            .rx_queues
            .iter()
            .map(|q| {
                let t = q.napi_thread.as_ref().expect("a thread per receive queue");
                (t.pid, t.name.clone())
            })
            .collect();
        let expected: Vec<(u32, String)> = pids
            .iter()
            .zip(8193..)
            .map(|(&pid, id)| (pid, format!("napi/eth0-{id}")))
            .collect();
        assert_eq!(found, expected, "the transmit-only napi/eth0-0 is left out");
    }

    #[test]
    fn a_single_napi_set_threaded_over_netlink_gets_its_thread() {
        use crate::model::inventory::ThreadedMode;
        let dir = tempfile::tempdir().unwrap();
        let tree = four_queues().write(dir.path()).unwrap();
        let root = Root::new(dir.path());
        // The threads of `make_threaded`, but the device's `threaded` back at 0: as after
        // `napi-set {"id": 8194, "threaded": "busy-poll"}` on 6.19, with netlink's answers
        // (NAPI ids, per-NAPI `threaded`) put in by hand, a fake root having no netlink.
        let pids = tree.make_threaded(0, 900).unwrap();
        std::fs::write(dir.path().join("sys/class/net/eth0/threaded"), "0\n").unwrap();
        let mut machine = discover(&root).unwrap();
        let device = &mut machine.inventory.devices[0];
        assert!(device.rx_queues.iter().all(|q| q.napi_thread.is_none()));
        for queue in &mut device.rx_queues {
            queue.napi_id = Some(8193 + queue.index);
        }
        device.rx_queues[1].napi.threaded = Some(ThreadedMode::BusyPoll);
        let mut warnings = Vec::new();
        attach_napi_threads(&root, &mut machine.inventory, &mut warnings);
        assert!(warnings.is_empty(), "{warnings:?}");
        let threads: Vec<Option<u32>> = machine.inventory.devices[0]
            .rx_queues
            .iter()
            .map(|q| q.napi_thread.as_ref().map(|t| t.pid))
            .collect();
        // Every NAPI of the fake device has a thread; each goes to its own queue by id.
        assert_eq!(
            threads,
            pids.iter().map(|&p| Some(p)).collect::<Vec<_>>(),
            "matched by NAPI id"
        );
    }

    #[test]
    fn a_thread_count_that_does_not_match_the_queues_is_a_warning_not_a_guess() {
        let dir = tempfile::tempdir().unwrap();
        let tree = four_queues().write(dir.path()).unwrap();
        let pids = tree.make_threaded(0, 900).unwrap();
        std::fs::remove_dir_all(dir.path().join(format!("proc/{}", pids[3]))).unwrap();
        let machine = discover(&Root::new(dir.path())).unwrap();
        let device = machine.inventory.device("eth0").unwrap();
        assert!(device.rx_queues.iter().all(|q| q.napi_thread.is_none()));
        assert!(
            machine
                .warnings
                .iter()
                .any(|w| w.contains("3 NAPI threads for 4")),
            "{:?}",
            machine.warnings
        );
    }
}
