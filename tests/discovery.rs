//! Discovery on real captures, generated trees and the real machine.
//!
//! * whole trees: prometheus/procfs `fixtures.ttar`, node_exporter `sys.ttar` + `proc/`;
//! * every `interrupts*` capture under `tests/fixtures` parses, with counts per case;
//! * netutils server captures: a fake root built from the capture's `interrupts` and
//!   `ethtool -i` outputs (device, driver, bus-info), then IRQ → device/queue/role asserted;
//! * the real machine (`/`), skipped with a reason when it is not the expected VM;
//! * the 1152-CPU generated tree (`steerd::fakeroot`).

mod common;
mod netns;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Instant;

use steerd::Root;
use steerd::discover::{Machine, discover};
use steerd::kernel::procfs::interrupts;
use steerd::kernel::sysfs::net;
use steerd::model::inventory::{DeviceKind, Inventory, IrqRole};

use common::suite::{TestResult, not_here};
use common::{fixture, ttar};

// ---------------------------------------------------------------------------------------
// Helpers

fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn link(root: &Path, target: &str, relative: &str) {
    let path = root.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(target, path).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Per device: sorted rx, tx and combined queue numbers of its vectors, the number of its
/// queue-less combined vectors, and the number of its other vectors.
#[derive(Debug, Default, PartialEq, Eq)]
struct Vectors {
    rx: Vec<u32>,
    tx: Vec<u32>,
    rxtx: Vec<u32>,
    all_queues: usize,
    other: usize,
}

fn vectors(inventory: &Inventory) -> BTreeMap<String, Vectors> {
    let mut map: BTreeMap<String, Vectors> = BTreeMap::new();
    for irq in &inventory.irqs {
        let Some(device) = &irq.device else {
            assert_eq!(
                irq.role,
                IrqRole::Other,
                "IRQ {} has a role but no device",
                irq.irq
            );
            assert_eq!(irq.queue, None);
            continue;
        };
        let entry = map.entry(device.clone()).or_default();
        match (irq.role, irq.queue) {
            (IrqRole::Rx, Some(q)) => entry.rx.push(q),
            (IrqRole::Tx, Some(q)) => entry.tx.push(q),
            (IrqRole::Rxtx, Some(q)) => entry.rxtx.push(q),
            (IrqRole::Rxtx, None) => entry.all_queues += 1,
            (IrqRole::Other, None) => entry.other += 1,
            (role, queue) => panic!("IRQ {}: role {role:?} with queue {queue:?}", irq.irq),
        }
        let listed = inventory.device(device).unwrap();
        assert!(
            listed.irqs.contains(&irq.irq),
            "{device} does not list IRQ {}",
            irq.irq
        );
    }
    for v in map.values_mut() {
        v.rx.sort_unstable();
        v.tx.sort_unstable();
        v.rxtx.sort_unstable();
    }
    map
}

fn v(
    rx: std::ops::Range<u32>,
    tx: std::ops::Range<u32>,
    rxtx: std::ops::Range<u32>,
    other: usize,
) -> Vectors {
    Vectors {
        rx: rx.collect(),
        tx: tx.collect(),
        rxtx: rxtx.collect(),
        all_queues: 0,
        other,
    }
}

fn single(all_queues: usize, other: usize) -> Vectors {
    Vectors {
        all_queues,
        other,
        ..Vectors::default()
    }
}

fn irq_named<'a>(machine: &'a Machine, name: &str) -> &'a steerd::model::inventory::Irq {
    machine
        .inventory
        .irqs
        .iter()
        .find(|irq| irq.name == name)
        .unwrap_or_else(|| panic!("no IRQ named {name}"))
}

/// A device for a fake root: name, driver (as `ethtool -i` says) and PCI function.
#[derive(Debug, Clone)]
struct FakeDev {
    name: String,
    driver: String,
    bdf: Option<String>,
    /// The virtio device under the PCI function, for virtio_net.
    virtio: Option<String>,
}

impl FakeDev {
    fn new(name: &str, driver: &str, bdf: Option<&str>) -> Self {
        FakeDev {
            name: name.into(),
            driver: driver.into(),
            bdf: bdf.map(str::to_string),
            virtio: None,
        }
    }
}

/// The devices of a netutils server capture, from its `ethtool/i/<dev>` files.
fn ethtool_devices(case: &Path) -> Vec<FakeDev> {
    let mut devices = Vec::new();
    for entry in fs::read_dir(case.join("ethtool/i")).unwrap() {
        let entry = entry.unwrap();
        let text = fs::read_to_string(entry.path()).unwrap();
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let bus = field("bus-info:");
        let bdf = net::is_pci_bdf(&bus).then_some(bus);
        devices.push(FakeDev {
            name: entry.file_name().to_str().unwrap().to_string(),
            driver: field("driver:"),
            bdf,
            virtio: None,
        });
    }
    devices
}

/// A fake root: `proc/interrupts` from a capture, CPUs from its header, and
/// `sys/class/net/<dev>` laid out like the kernel's (PCI function, driver link, `device`
/// link; bridges with `bridge/`, VLANs with `DEVTYPE=vlan`).
fn fake_root(interrupts_file: &Path, devices: &[FakeDev]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = fs::read_to_string(interrupts_file).unwrap();
    write(d, "proc/interrupts", &text);
    let parsed = interrupts::parse(&text, interrupts_file).unwrap();
    let highest = parsed.cpus.last().unwrap();
    write(
        d,
        "sys/devices/system/cpu/possible",
        &format!("0-{highest}\n"),
    );
    let online: Vec<String> = parsed.cpus.iter().map(u32::to_string).collect();
    write(
        d,
        "sys/devices/system/cpu/online",
        &format!("{}\n", online.join(",")),
    );
    for (index, dev) in devices.iter().enumerate() {
        let ifindex = index + 2;
        let net_dir = match (&dev.bdf, &dev.virtio) {
            (Some(bdf), virtio) => {
                let pci = format!("sys/devices/pci0000:00/{bdf}");
                write(d, &format!("{pci}/numa_node"), "-1\n");
                let driver_dir = format!("sys/bus/pci/drivers/{}", dev.driver);
                fs::create_dir_all(d.join(&driver_dir)).unwrap();
                let (hw, up) = match virtio {
                    Some(virtio) => (format!("{pci}/{virtio}"), "../../../../.."),
                    None => (pci.clone(), "../../../.."),
                };
                fs::create_dir_all(d.join(&hw)).unwrap();
                link(d, &format!("{up}/{driver_dir}"), &format!("{hw}/driver"));
                let net_dir = format!("{hw}/net/{}", dev.name);
                let hw_name = Path::new(&hw)
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                link(
                    d,
                    &format!("../../../{hw_name}"),
                    &format!("{net_dir}/device"),
                );
                net_dir
            }
            (None, _) => format!("sys/devices/virtual/net/{}", dev.name),
        };
        write(d, &format!("{net_dir}/ifindex"), &format!("{ifindex}\n"));
        write(d, &format!("{net_dir}/operstate"), "up\n");
        let devtype = if dev.driver.contains("VLAN") {
            "DEVTYPE=vlan\n"
        } else {
            ""
        };
        write(
            d,
            &format!("{net_dir}/uevent"),
            &format!("{devtype}INTERFACE={}\n", dev.name),
        );
        if dev.driver == "bridge" {
            fs::create_dir_all(d.join(format!("{net_dir}/bridge"))).unwrap();
        }
        link(
            d,
            &format!("../../{}", net_dir.trim_start_matches("sys/")),
            &format!("sys/class/net/{}", dev.name),
        );
    }
    dir
}

fn discover_capture(interrupts_file: &Path, devices: &[FakeDev]) -> Machine {
    let dir = fake_root(interrupts_file, devices);
    discover(&Root::new(dir.path())).unwrap()
}

// ---------------------------------------------------------------------------------------
// Whole trees

fn procfs_fixture_tree() {
    let dir = tempfile::tempdir().unwrap();
    ttar::extract(&fixture("procfs/fixtures.ttar"), dir.path()).unwrap();
    let root = Root::new(dir.path().join("fixtures"));
    let machine = discover(&root).unwrap();

    // Topology: no `possible`/`online` files; cpu0..cpu2 directories, `offline` = 2,
    // node1/node2 directories without cpulist (so the one-node default).
    let t = &machine.topology;
    assert_eq!(t.possible.to_list(), "0-2");
    assert_eq!(t.online.to_list(), "0-1");
    assert_eq!(t.isolated.to_list(), "1-7,9");
    assert_eq!(t.nr_cpu_ids, 3);
    assert_eq!(t.nodes.len(), 1);
    let cpu1 = t.cpu(1).unwrap();
    assert_eq!(
        (cpu1.core, cpu1.package, cpu1.node),
        (Some(1), Some(0), Some(0))
    );
    assert_eq!(cpu1.siblings.to_list(), "1,5");
    assert!(cpu1.isolated);
    assert!(!t.cpu(2).unwrap().online);

    // eth0: an e1000e-like PCI function with numa_node -1 and local_cpus ff.
    assert_eq!(machine.inventory.devices.len(), 1);
    let eth0 = machine.inventory.device("eth0").unwrap();
    assert_eq!(eth0.ifindex, Some(2));
    assert_eq!(eth0.operstate.as_deref(), Some("up"));
    assert_eq!(eth0.kind, DeviceKind::Physical);
    assert_eq!(eth0.pci_function.as_deref(), Some("0000:00:1f.6"));
    assert_eq!(eth0.numa_node, None);
    assert_eq!(eth0.local_cpus.as_ref().unwrap().to_list(), "0-7");
    assert!(eth0.rx_queues.is_empty() && eth0.tx_queues.is_empty());

    // Every numbered IRQ; virtio0-* is no known netdev's (eth0 is not virtio here).
    assert_eq!(machine.inventory.irqs.len(), 28);
    let input = irq_named(&machine, "virtio0-input.0");
    assert_eq!(
        (input.irq, input.device.as_deref(), input.role),
        (36, None, IrqRole::Other)
    );
    assert_eq!(input.per_cpu, vec![0, 335, 37, 0]);
    assert_eq!(input.chip.as_deref(), Some("PCI-MSI 16385-edge"));
    assert!(eth0.irqs.is_empty());
    assert!(machine.warnings.is_empty(), "{:?}", machine.warnings);
}

fn node_exporter_fixture_tree() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ttar::extract(&fixture("node_exporter/sys.ttar"), d).unwrap();
    copy_dir(&fixture("node_exporter/proc"), &d.join("proc"));
    // The archive holds the igb NIC's device directory but not its `sys/class/net` link
    // (node_exporter reads it by path); add the link the kernel would have.
    let ens = "devices/pci0000:40/0000:40:01.3/0000:45:00.0/net/ens10f0";
    link(d, &format!("../../{ens}"), "sys/class/net/ens10f0");
    let root = Root::new(d);
    let machine = discover(&root).unwrap();

    let t = &machine.topology;
    assert_eq!(t.possible.to_list(), "0-3");
    assert_eq!(t.online.to_list(), "0-3");
    assert_eq!(t.isolated.to_list(), "1,3-5,9");
    let nodes: Vec<(u32, String)> = t.nodes.iter().map(|n| (n.id, n.cpus.to_list())).collect();
    assert_eq!(
        nodes,
        vec![(0, "0-1".into()), (1, "2-3".into()), (2, "".into())]
    );
    let cpu2 = t.cpu(2).unwrap();
    assert_eq!(
        (cpu2.package, cpu2.node, cpu2.core),
        (Some(1), Some(1), None)
    );

    let names: Vec<&str> = machine
        .inventory
        .devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["bond0", "dmz", "ens10f0", "eth0", "int"]);
    for bond in ["bond0", "dmz", "int"] {
        assert_eq!(
            machine.inventory.device(bond).unwrap().kind,
            DeviceKind::Bond
        );
    }
    // eth0's directory has no `device` link in the archive: a software device to us.
    assert_eq!(
        machine.inventory.device("eth0").unwrap().kind,
        DeviceKind::OtherVirtual
    );

    // The igb I350 on the 256-possible-CPU host.
    let ens = machine.inventory.device("ens10f0").unwrap();
    assert_eq!(ens.driver.as_deref(), Some("igb"));
    assert_eq!(ens.kind, DeviceKind::Physical);
    assert_eq!(ens.ifindex, Some(2));
    assert_eq!(ens.master.as_deref(), Some("vmbr0"));
    assert_eq!(ens.pci_function.as_deref(), Some("0000:45:00.0"));
    assert_eq!(ens.numa_node, Some(0));
    assert_eq!(ens.local_cpus.as_ref().unwrap().to_list(), "0-63,128-191");
    assert_eq!(ens.rx_queues.len(), 8);
    assert_eq!(ens.tx_queues.len(), 8);
    for (index, rx) in ens.rx_queues.iter().enumerate() {
        assert_eq!(rx.index, index as u32);
        assert!(rx.rps_cpus.as_ref().unwrap().is_empty());
        assert_eq!(rx.rps_mask_words, 8, "256 bits as 8 words");
        assert_eq!(rx.rps_flow_cnt, Some(0));
        assert_eq!(rx.irq, None, "IRQs 147-155 are not in this proc/interrupts");
    }
    let sys = net::read_device(&root, "ens10f0").unwrap().unwrap();
    assert_eq!(sys.msi_irqs, (147..=155).collect::<Vec<u32>>());

    // proc/interrupts here is an old 4-CPU desktop's: no NIC vectors.
    assert_eq!(machine.inventory.irqs.len(), 15);
    assert!(
        machine
            .inventory
            .irqs
            .iter()
            .all(|irq| irq.device.is_none())
    );
    assert_eq!(machine.inventory.irqs[0].per_cpu.len(), 4);
}

// ---------------------------------------------------------------------------------------
// Every interrupts capture

fn every_interrupts_capture_parses() {
    // (file, header CPUs, numbered rows, named rows), counted independently with awk.
    let cases: &[(&str, usize, usize, usize)] = &[
        (
            "netutils/interrupts.multinic_multiqueue_4cpu/interrupts1",
            4,
            24,
            14,
        ),
        (
            "netutils/interrupts.multinic_multiqueue_4cpu/interrupts2",
            4,
            24,
            14,
        ),
        (
            "netutils/interrupts.multinic_multiqueue_4cpu/interrupts3",
            4,
            24,
            14,
        ),
        (
            "netutils/interrupts.multinic_multiqueue_4cpu/interrupts4",
            4,
            24,
            14,
        ),
        (
            "netutils/interrupts.multinic_multiqueue_4cpu/interrupts5",
            4,
            24,
            14,
        ),
        (
            "netutils/interrupts.multinic_multiqueue_4cpu/interrupts_short",
            4,
            12,
            3,
        ),
        (
            "netutils/interrupts.singlequeue_8cpu/interrupts1",
            8,
            20,
            14,
        ),
        (
            "netutils/interrupts.singlequeue_8cpu/interrupts2",
            8,
            20,
            14,
        ),
        (
            "netutils/interrupts.singlequeue_8cpu/interrupts3",
            8,
            20,
            14,
        ),
        (
            "netutils/interrupts.singlequeue_8cpu/interrupts4",
            8,
            20,
            14,
        ),
        (
            "netutils/interrupts.singlequeue_8cpu/interrupts5",
            8,
            20,
            14,
        ),
        (
            "netutils/interrupts.singlequeue_8cpu/interrupts_short",
            8,
            6,
            4,
        ),
        ("netutils/rss-ladder.2xI350.i5-6400/interrupts", 4, 32, 14),
        ("netutils/rss-ladder.igb.E5606/interrupts", 4, 64, 14),
        ("netutils/rss-ladder.ixgbe.E5645/interrupts", 12, 41, 14),
        ("netutils/rss-ladder.mlx5.Q6700/interrupts", 4, 27, 14),
        (
            "netutils/server-info.1xE3-1271.I217_and_X710.L2_mixed.masterconf/interrupts",
            4,
            27,
            14,
        ),
        (
            "netutils/server-info.1xE31240.2x82576.L2.manual/interrupts",
            8,
            42,
            14,
        ),
        (
            "netutils/server-info.1xE5200.82571EB_and_AR8121.L2.manual/interrupts",
            2,
            15,
            14,
        ),
        (
            "netutils/server-info.1xi3.I211_I219V.L2_manual/interrupts",
            4,
            21,
            14,
        ),
        (
            "netutils/server-info.1xi3.single_i350.l2_mixed.manual/interrupts",
            4,
            25,
            14,
        ),
        (
            "netutils/server-info.1xi7-4770K.1x82541PI.L2.manual/interrupts",
            8,
            17,
            14,
        ),
        (
            "netutils/server-info.2xE5-2640.i350_and_82599ES.l2_mixed.masterconf/interrupts",
            32,
            166,
            14,
        ),
        (
            "netutils/server-info.2xE5530.82576_and_82574L.l2_mixed.manual/interrupts",
            16,
            33,
            14,
        ),
        (
            "netutils/server-info.2xL5520.1x82576.L2_mixed.manual/interrupts",
            16,
            33,
            14,
        ),
        (
            "netutils/server-info.2xX5650.BCM5709_and_MT27520.L2.manual/interrupts",
            12,
            51,
            14,
        ),
        (
            "netutils/server-info.kvm.l3.masterconf/interrupts",
            2,
            11,
            14,
        ),
        ("netutils/server-info.vscale-vm/interrupts", 1, 15, 18),
        ("netutils/strange-cpu/interrupts", 8, 18, 2),
        ("node_exporter/proc/interrupts", 4, 15, 15),
        ("node_exporter/proc/interrupts_aarch64", 8, 51, 8),
        ("procfs/proc/interrupts", 4, 28, 19),
        ("insights-core/INT_MULTI", 8, 19, 18),
        ("insights-core/INT_SINGLE", 1, 6, 3),
    ];
    // The list covers every capture there is.
    let mut on_disk = Vec::new();
    find_interrupts(&fixture(""), &mut on_disk);
    let listed: Vec<PathBuf> = cases.iter().map(|c| fixture(c.0)).collect();
    for path in &on_disk {
        assert!(
            listed.contains(path),
            "capture not covered: {}",
            path.display()
        );
    }
    for &(file, cpus, numbered, named) in cases {
        let path = fixture(file);
        let text = fs::read_to_string(&path).unwrap();
        let parsed = interrupts::parse(&text, &path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (parsed.cpus.len(), parsed.lines.len(), parsed.named.len()),
            (cpus, numbered, named),
            "{file}"
        );
        for line in &parsed.lines {
            assert_eq!(
                line.total,
                line.per_cpu.iter().sum::<u64>(),
                "{file} IRQ {}",
                line.irq
            );
        }
    }

    // Spot checks.
    let read = |file: &str| {
        let path = fixture(file);
        interrupts::parse(&fs::read_to_string(&path).unwrap(), &path).unwrap()
    };
    let arm = read("node_exporter/proc/interrupts_aarch64");
    let q0 = arm.line(58).unwrap();
    assert_eq!(q0.name, "eth0-Tx-Rx-0");
    assert_eq!(q0.chip.as_deref(), Some("ITS-MSI 81921 Edge"));
    assert_eq!(q0.per_cpu[2], 1195697946);
    assert_eq!(
        arm.line(10).unwrap().chip.as_deref(),
        Some("GICv3 27 Level")
    );
    assert_eq!(arm.named("Err").unwrap().total, 0);
    assert_eq!(arm.named("IPI1").unwrap().per_cpu[0], 357815098);
    let multi = read("insights-core/INT_MULTI");
    assert_eq!(multi.line(16).unwrap().name, "ehci_hcd:usb1, mmc0");
    assert_eq!(multi.line(30).unwrap().name, "", "an IRQ without action");
    assert!(multi.named("ERR").unwrap().per_cpu.is_empty());
    let xen = read("insights-core/INT_SINGLE");
    assert_eq!(
        xen.named("HYP").unwrap().description,
        "Hypervisor callback interrupts"
    );
    let old = read("netutils/rss-ladder.2xI350.i5-6400/interrupts");
    assert!(
        old.lines
            .iter()
            .any(|l| l.name.is_empty() && l.chip.as_deref() == Some("IO-APIC-edge"))
    );
    let big =
        read("netutils/server-info.2xE5-2640.i350_and_82599ES.l2_mixed.masterconf/interrupts");
    assert_eq!(big.line(98).unwrap().per_cpu[0], 3045990229);
    assert_eq!(big.cpus, (0..32).collect::<Vec<u32>>());
}

fn find_interrupts(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            // The extracted `sys/` trees hold no interrupts files; skip them for speed.
            if entry.file_name() != "sys" {
                find_interrupts(&path, out);
            }
        } else if entry
            .file_name()
            .to_str()
            .unwrap()
            .starts_with("interrupts")
        {
            out.push(path);
        }
    }
}

// ---------------------------------------------------------------------------------------
// netutils servers: IRQ → device, queue, role

const NETUTILS: &str = "netutils";

fn netutils_case(case: &str) -> Machine {
    let dir = fixture(&format!("{NETUTILS}/{case}"));
    discover_capture(&dir.join("interrupts"), &ethtool_devices(&dir))
}

fn two_node_ixgbe_igb_server_has_144_queue_vectors() {
    let machine = netutils_case("server-info.2xE5-2640.i350_and_82599ES.l2_mixed.masterconf");
    let got = vectors(&machine.inventory);
    let mut expected = BTreeMap::new();
    for (dev, queues) in [
        ("eth0", 8),
        ("eth1", 8),
        ("eth2", 32),
        ("eth3", 32),
        ("eth4", 32),
        ("eth5", 32),
    ] {
        expected.insert(dev.to_string(), v(0..0, 0..0, 0..queues, 1));
    }
    assert_eq!(got, expected);
    let queue_vectors = machine
        .inventory
        .irqs
        .iter()
        .filter(|irq| irq.role == IrqRole::Rxtx && irq.queue.is_some())
        .count();
    assert_eq!(queue_vectors, 144);
    let irq98 = machine.inventory.irq(98).unwrap();
    assert_eq!(
        (irq98.device.as_deref(), irq98.queue, irq98.role),
        (Some("eth0"), Some(6), IrqRole::Rxtx)
    );
    assert_eq!(irq98.total, 3045990229);
    let eth2 = machine.inventory.device("eth2").unwrap();
    assert_eq!(eth2.driver.as_deref(), Some("ixgbe"));
    assert_eq!(eth2.pci_function.as_deref(), Some("0000:81:00.0"));
    assert_eq!(eth2.irqs.len(), 33);
    // VLANs and bridges are what they are and have no vectors.
    assert_eq!(
        machine.inventory.device("eth2.31").unwrap().kind,
        DeviceKind::Vlan
    );
    assert_eq!(
        machine.inventory.device("br0").unwrap().kind,
        DeviceKind::Bridge
    );
    assert_eq!(irq_named(&machine, "ahci").device, None);
}

fn i40e_igb_e1000e_server() {
    let machine = netutils_case("server-info.1xE3-1271.I217_and_X710.L2_mixed.masterconf");
    let got = vectors(&machine.inventory);
    let expected = BTreeMap::from([
        // i40e-eth0-TxRx-0..3, i40e-<bdf>:misc and :fdir-TxRx-0
        ("eth0".to_string(), v(0..0, 0..0, 0..4, 2)),
        // eth1 (0000:01:00.1) has only misc and fdir vectors: its interface is down
        ("eth1".to_string(), v(0..0, 0..0, 0..0, 2)),
        // e1000e with one MSI vector named like the device: it serves every queue
        ("eth2".to_string(), single(1, 0)),
        ("eth3".to_string(), v(0..0, 0..0, 0..4, 1)),
    ]);
    assert_eq!(got, expected);
    assert_eq!(
        irq_named(&machine, "i40e-0000:01:00.1:fdir-TxRx-0")
            .device
            .as_deref(),
        Some("eth1")
    );
}

fn mlx4_and_bnx2_server() {
    let machine = netutils_case("server-info.2xX5650.BCM5709_and_MT27520.L2.manual");
    let got = vectors(&machine.inventory);
    let expected = BTreeMap::from([
        ("eth0".to_string(), v(0..0, 0..0, 0..8, 0)),
        ("eth1".to_string(), v(0..0, 0..0, 0..8, 0)),
        // eth2-0..7 are mlx4_en's ring vectors; mlx4-comp-0..2 and mlx4-async stay the
        // device's other vectors
        ("eth2".to_string(), v(0..0, 0..0, 0..8, 4)),
    ]);
    assert_eq!(got, expected);
    let comp = irq_named(&machine, "mlx4-comp-1@pci:0000:07:00.0");
    assert_eq!(
        (comp.device.as_deref(), comp.role, comp.queue),
        (Some("eth2"), IrqRole::Other, None)
    );
    let eth2_3 = irq_named(&machine, "eth2-3");
    assert_eq!((eth2_3.queue, eth2_3.role), (Some(3), IrqRole::Rxtx));
}

fn mlx5_two_ports() {
    // rss-ladder has no ethtool outputs; its params name the PCI function 0000:01:00.0.
    // The netdev names are ours.
    let dir = fixture("netutils/rss-ladder.mlx5.Q6700");
    let machine = discover_capture(
        &dir.join("interrupts"),
        &[
            FakeDev::new("enp1s0f0", "mlx5_core", Some("0000:01:00.0")),
            FakeDev::new("enp1s0f1", "mlx5_core", Some("0000:01:00.1")),
        ],
    );
    let got = vectors(&machine.inventory);
    let expected = BTreeMap::from([
        ("enp1s0f0".to_string(), v(0..0, 0..0, 0..4, 3)),
        ("enp1s0f1".to_string(), v(0..0, 0..0, 0..4, 3)),
    ]);
    assert_eq!(got, expected);
    let comp = irq_named(&machine, "mlx5_comp2@pci:0000:01:00.1");
    assert_eq!(
        (comp.irq, comp.device.as_deref(), comp.queue),
        (39, Some("enp1s0f1"), Some(2))
    );
    assert_eq!(
        irq_named(&machine, "eth0").device,
        None,
        "eth0 is no known device here"
    );
}

fn ena_on_arm64() {
    let machine = discover_capture(
        &fixture("node_exporter/proc/interrupts_aarch64"),
        &[FakeDev::new("eth0", "ena", Some("0000:00:05.0"))],
    );
    let got = vectors(&machine.inventory);
    assert_eq!(
        got,
        BTreeMap::from([("eth0".to_string(), v(0..0, 0..0, 0..8, 1))])
    );
    assert_eq!(
        irq_named(&machine, "ena-mgmnt@pci:0000:00:05.0")
            .device
            .as_deref(),
        Some("eth0")
    );
    assert_eq!(irq_named(&machine, "nvme0q1").device, None);
    let eth0 = machine.inventory.device("eth0").unwrap();
    assert_eq!(eth0.irqs, (57..=65).collect::<Vec<u32>>());
    assert_eq!(machine.topology.nr_cpu_ids, 8);
}

fn split_rx_tx_vectors_igb() {
    let dir = fixture("netutils/rss-ladder.igb.E5606");
    let devices: Vec<FakeDev> = ["eth0", "eth1", "eth3", "eth4", "eth5"]
        .iter()
        .map(|n| FakeDev::new(n, "igb", None))
        .collect();
    let machine = discover_capture(&dir.join("interrupts"), &devices);
    let got = vectors(&machine.inventory);
    for dev in ["eth0", "eth1", "eth3", "eth4", "eth5"] {
        assert_eq!(got[dev], v(0..4, 0..4, 0..0, 1), "{dev}");
    }
    assert_eq!(got.len(), 5);
}

fn small_servers() {
    // (case, devices with no ethtool dir, expected per device)
    let igb_e1000e = netutils_case("server-info.1xE31240.2x82576.L2.manual");
    let got = vectors(&igb_e1000e.inventory);
    assert_eq!(got.values().map(|v| v.rxtx.len()).sum::<usize>(), 16);
    assert_eq!(
        got.values().map(|v| v.rx.len() + v.tx.len()).sum::<usize>(),
        4
    );

    let kvm = netutils_case("server-info.kvm.l3.masterconf");
    let got = vectors(&kvm.inventory);
    // e1000 eth0 and eth1 share one INTx line with USB (`uhci_hcd:usb1, eth0, eth1`):
    // the IRQ is eth0's, listed on both; virtio0-* is a virtio disk, no NIC's.
    assert_eq!(got, BTreeMap::from([("eth0".to_string(), single(1, 0))]));
    assert_eq!(kvm.inventory.device("eth1").unwrap().irqs, vec![11]);
    assert_eq!(kvm.inventory.device("eth0").unwrap().irqs, vec![11]);
    assert_eq!(irq_named(&kvm, "virtio0-virtqueues").device, None);

    let dir = fixture("netutils/server-info.vscale-vm");
    let mut devices = ethtool_devices(&dir);
    devices[0].virtio = Some("virtio0".into()); // the names say virtio0 is the NIC
    let vm = discover_capture(&dir.join("interrupts"), &devices);
    let got = vectors(&vm.inventory);
    assert_eq!(
        got,
        BTreeMap::from([("eth0".to_string(), v(0..1, 0..1, 0..0, 1))])
    );
    assert_eq!(
        vm.inventory.device("eth0").unwrap().kind,
        DeviceKind::Virtio
    );
    assert_eq!(irq_named(&vm, "virtio1-req.0").device, None);

    let single_queue = discover_capture(
        &fixture("netutils/interrupts.singlequeue_8cpu/interrupts1"),
        &[
            FakeDev::new("eth0", "e1000e", None),
            FakeDev::new("eth1", "e1000e", None),
        ],
    );
    let got = vectors(&single_queue.inventory);
    assert_eq!(got["eth0"], single(1, 0));
    assert_eq!(got["eth1"], single(1, 0));

    let multi = discover_capture(
        &fixture("netutils/interrupts.multinic_multiqueue_4cpu/interrupts1"),
        &[
            FakeDev::new("eth4", "igb", None),
            FakeDev::new("eth40", "igb", None),
        ],
    );
    let got = vectors(&multi.inventory);
    assert_eq!(got["eth4"].rxtx, vec![0, 1, 2, 3]);
    assert!(!got.contains_key("eth40"));

    let strange = discover_capture(
        &fixture("netutils/strange-cpu/interrupts"),
        &[
            FakeDev::new("eth0", "ixgbe", None),
            FakeDev::new("eth1", "ixgbe", None),
        ],
    );
    let got = vectors(&strange.inventory);
    assert_eq!(got["eth0"], v(0..0, 0..0, 0..8, 0));
    assert_eq!(got["eth1"], v(0..0, 0..0, 0..8, 0));
}

fn qlcnic_tg3_gve_mana_synthetic() {
    // No capture of these drivers is in tests/fixtures (netutils' INDEX.md lists a
    // qlcnic/tg3 server, 2xE5-2687W, whose files were not copied), so the lines below
    // follow the drivers' request_irq names.
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("           CPU0       CPU1\n");
    let mut add = |irq: u32, name: &str| {
        text.push_str(&format!(
            "{irq:>4}: {:>10} {:>10}  IR-PCI-MSI-edge      {name}\n",
            irq, 0
        ));
    };
    for (irq, name) in [
        (40, "eth0-rx-0"),
        (41, "eth0-rx-1"),
        (42, "eth0-rx-2"),
        (43, "eth0-tx-0-rx-3"),
    ] {
        add(irq, name);
    }
    for (irq, name) in [
        (50, "eth4-tx-0"),
        (51, "eth4-rx-1"),
        (52, "eth4-rx-2"),
        (53, "eth4-rx-3"),
        (54, "eth4-rx-4"),
    ] {
        add(irq, name);
    }
    for block in 0..8 {
        add(60 + block, &format!("gve-ntfy-blk{block}@pci:0000:00:04.0"));
    }
    add(68, "gve-mgmnt@pci:0000:00:04.0");
    add(70, "mana_hwc@pci:7870:00:00.0");
    add(71, "mana_q0@pci:7870:00:00.0");
    add(72, "mana_q1@pci:7870:00:00.0");
    let file = dir.path().join("interrupts");
    fs::write(&file, &text).unwrap();
    let root = fake_root(
        &file,
        &[
            FakeDev::new("eth0", "qlcnic", Some("0000:04:00.0")),
            FakeDev::new("eth4", "tg3", Some("0000:02:00.0")),
            FakeDev::new("ens4", "gve", Some("0000:00:04.0")),
            FakeDev::new("eth1", "mana", Some("7870:00:00.0")),
        ],
    );
    for q in 0..4 {
        for dev in ["eth0", "eth4", "ens4"] {
            fs::create_dir_all(
                root.path()
                    .join(format!("sys/class/net/{dev}/queues/rx-{q}")),
            )
            .unwrap();
            fs::create_dir_all(
                root.path()
                    .join(format!("sys/class/net/{dev}/queues/tx-{q}")),
            )
            .unwrap();
        }
    }
    let machine = discover(&Root::new(root.path())).unwrap();
    let got = vectors(&machine.inventory);
    let expected = BTreeMap::from([
        // qlcnic: rx-0..2 plus one vector for tx ring 0 and rx ring 3
        ("eth0".to_string(), v(0..3, 0..0, 3..4, 0)),
        // tg3 with RSS: tx-0 on NAPI 0, rx ring i on NAPI i + 1
        ("eth4".to_string(), v(0..4, 0..1, 0..0, 0)),
        // gve: blocks 0-3 serve TX 0-3, blocks 4-7 RX 0-3
        ("ens4".to_string(), v(0..4, 0..4, 0..0, 1)),
        ("eth1".to_string(), v(0..0, 0..0, 0..2, 1)),
    ]);
    assert_eq!(got, expected);
    let queue_irq = |dev: &str, rx: bool, q: usize| {
        let d = machine.inventory.device(dev).unwrap();
        if rx {
            d.rx_queues[q].irq
        } else {
            d.tx_queues[q].irq
        }
    };
    assert_eq!(queue_irq("eth0", true, 3), Some(43));
    assert_eq!(queue_irq("eth0", false, 0), Some(43));
    assert_eq!(queue_irq("eth4", true, 0), Some(51));
    assert_eq!(queue_irq("eth4", false, 0), Some(50));
    assert_eq!(queue_irq("ens4", false, 3), Some(63));
    assert_eq!(queue_irq("ens4", true, 0), Some(64));
}

fn msi_irqs_decide_ownership_before_names() {
    // Two functions: eth1's msi_irqs hold a vector named like eth0's; the hardware wins.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "proc/interrupts",
        "CPU0 CPU1\n 30: 1 2 PCI-MSI-edge eth0-TxRx-0\n 31: 3 4 PCI-MSI-edge eth1-TxRx-0\n \
         32: 0 0 PCI-MSI-edge weird-name\n 33: 0 0 PCI-MSI-edge eth0-TxRx-1\n",
    );
    write(d, "sys/devices/system/cpu/possible", "0-1\n");
    let root_dir = fake_root(
        &d.join("proc/interrupts"),
        &[
            FakeDev::new("eth0", "ixgbe", Some("0000:01:00.0")),
            FakeDev::new("eth1", "ixgbe", Some("0000:01:00.1")),
        ],
    );
    let r = root_dir.path();
    for irq in [30, 31] {
        write(
            r,
            &format!("sys/devices/pci0000:00/0000:01:00.0/msi_irqs/{irq}"),
            "msix\n",
        );
    }
    write(
        r,
        "sys/devices/pci0000:00/0000:01:00.1/msi_irqs/32",
        "msix\n",
    );
    write(
        r,
        "sys/devices/pci0000:00/0000:01:00.1/msi_irqs/33",
        "msix\n",
    );
    for irq in 30..34 {
        write(r, &format!("proc/irq/{irq}/smp_affinity_list"), "0-1\n");
    }
    let machine = discover(&Root::new(r)).unwrap();
    let owner = |irq: u32| {
        let i = machine.inventory.irq(irq).unwrap();
        (i.device.clone(), i.role, i.queue)
    };
    assert_eq!(owner(30), (Some("eth0".into()), IrqRole::Rxtx, Some(0)));
    // Named eth1's but in eth0's msi_irqs: eth0's, and the name says nothing more.
    assert_eq!(owner(31), (Some("eth0".into()), IrqRole::Other, None));
    assert_eq!(owner(32), (Some("eth1".into()), IrqRole::Other, None));
    assert_eq!(owner(33), (Some("eth1".into()), IrqRole::Other, None));
    assert_eq!(
        machine
            .inventory
            .irq(30)
            .unwrap()
            .affinity
            .as_ref()
            .unwrap()
            .to_list(),
        "0-1"
    );
}

// ---------------------------------------------------------------------------------------
// The real machine

fn real_machine() -> TestResult {
    let root = Root::new("/");
    if !root.path("sys/class/net/eth0/device").exists() {
        return not_here("/sys/class/net/eth0/device is absent (not the project's VM)");
    }
    let started = Instant::now();
    let machine = discover(&root).unwrap();
    println!("discovered / in {:?}", started.elapsed());
    let eth0 = machine.inventory.device("eth0").unwrap();
    if eth0.driver.as_deref() != Some("virtio_net") {
        return not_here(format!(
            "eth0 is not virtio_net here ({:?}; not the project's VM)",
            eth0.driver
        ));
    }
    assert_eq!(eth0.kind, DeviceKind::Virtio);
    let sys = net::read_device(&root, "eth0").unwrap().unwrap();
    let virtio = sys
        .virtio_device
        .clone()
        .expect("eth0's device link is a virtio device");
    assert!(!sys.msi_irqs.is_empty(), "the PCI parent lists msi_irqs");
    assert_eq!(
        eth0.irqs, sys.msi_irqs,
        "every vector of the PCI function is eth0's"
    );

    // Queue vectors found through the PCI parent's msi_irqs, named after its virtio device.
    let input0 = irq_named(&machine, &format!("{virtio}-input.0"));
    assert!(sys.msi_irqs.contains(&input0.irq));
    assert_eq!(
        (input0.device.as_deref(), input0.role, input0.queue),
        (Some("eth0"), IrqRole::Rx, Some(0))
    );
    assert_eq!(eth0.rx_queues[0].irq, Some(input0.irq));
    let output0 = irq_named(&machine, &format!("{virtio}-output.0"));
    assert_eq!(
        (output0.device.as_deref(), output0.role, output0.queue),
        (Some("eth0"), IrqRole::Tx, Some(0))
    );
    assert_eq!(eth0.tx_queues[0].irq, Some(output0.irq));
    // Single TX queue: xps_cpus reads ENOENT, so not applicable.
    if eth0.tx_queues.len() == 1 {
        assert_eq!(eth0.tx_queues[0].xps_cpus, None);
    }
    let config = irq_named(&machine, &format!("{virtio}-config"));
    assert_eq!(
        (config.device.as_deref(), config.role),
        (Some("eth0"), IrqRole::Other)
    );

    // vsock's virtioN-rx/-tx/-event vectors are not eth0's.
    let vsock: Vec<_> = machine
        .inventory
        .irqs
        .iter()
        .filter(|irq| {
            irq.name.ends_with("-rx") || irq.name.ends_with("-tx") || irq.name.ends_with("-event")
        })
        .filter(|irq| irq.name.starts_with("virtio"))
        .collect();
    assert!(!vsock.is_empty(), "expected vsock vectors on this VM");
    for irq in vsock {
        assert_eq!(irq.device, None, "{} must not be attributed", irq.name);
        assert!(!eth0.irqs.contains(&irq.irq));
    }

    // The virtio-blk request vector is managed (smp_affinity is 0444 on ≥6.12).
    let blk = machine
        .inventory
        .irqs
        .iter()
        .find(|irq| irq.name.starts_with("virtio") && irq.name.ends_with("-req.0"))
        .expect("a virtio-blk request vector");
    assert!(blk.managed, "{} should be managed", blk.name);
    assert!(!input0.managed);
    assert!(input0.affinity.is_some() && input0.effective_affinity.is_some());

    // The rest of the machine.
    assert!(!machine.topology.online.is_empty());
    assert_eq!(
        machine.inventory.device("lo").unwrap().kind,
        DeviceKind::Loopback
    );
    assert_eq!(
        machine.inventory.irqs.len(),
        interrupts::read(&root).unwrap().lines.len()
    );
    assert!(machine.inventory.rps_sock_flow_entries.is_some());
    println!("warnings: {:?}", machine.warnings);
    Ok(())
}

fn veth_in_a_namespace_real_kernel() -> TestResult {
    netns::require()?;
    let pair = netns::VethPair::create(4);
    let receiver_if = pair.receiver_if.clone();
    // In the receiver's namespace, with a private mount namespace whose own sysfs shows
    // that network namespace's devices: read them, then refine their kinds by rtnetlink.
    let seen = pair
        .receiver
        .spawn(None, move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).expect("unshare mounts");
            let dir = tempfile::tempdir().unwrap();
            let sys = dir.path().join("sys");
            fs::create_dir(&sys).unwrap();
            let sys_c = std::ffi::CString::new(sys.to_str().unwrap()).unwrap();
            let (root_c, sysfs_c) = (c"/", c"sysfs");
            // Private first, so nothing mounted here propagates to the host's namespace.
            // SAFETY: plain mount(2)/umount2(2) calls with NUL-terminated strings.
            let rc = unsafe {
                nix::libc::mount(
                    std::ptr::null(),
                    root_c.as_ptr(),
                    std::ptr::null(),
                    nix::libc::MS_REC | nix::libc::MS_PRIVATE,
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, 0, "make / private: {}", std::io::Error::last_os_error());
            let rc = unsafe {
                nix::libc::mount(
                    sysfs_c.as_ptr(),
                    sys_c.as_ptr(),
                    sysfs_c.as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, 0, "mount sysfs: {}", std::io::Error::last_os_error());
            let devices = net::read_devices(&Root::new(dir.path()));
            let links = steerd::kernel::linkinfo::dump_links();
            let rc = unsafe { nix::libc::umount2(sys_c.as_ptr(), nix::libc::MNT_DETACH) };
            assert_eq!(rc, 0, "unmount sysfs: {}", std::io::Error::last_os_error());
            (devices.unwrap(), links.unwrap())
        })
        .join()
        .unwrap();
    let (devices, links) = seen;
    let names: Vec<&str> = devices.iter().map(|d| d.device.name.as_str()).collect();
    assert_eq!(names, ["lo", receiver_if.as_str()]);
    let veth = &devices[1].device;
    assert_eq!(
        veth.kind,
        DeviceKind::OtherVirtual,
        "sysfs alone cannot tell a veth"
    );
    assert_eq!(veth.rx_queues.len(), 4);
    assert_eq!(veth.tx_queues.len(), 4);
    assert!(
        veth.rx_queues
            .iter()
            .all(|q| q.rps_cpus.as_ref().is_some_and(|s| s.is_empty()))
    );
    assert_eq!(devices[0].device.kind, DeviceKind::Loopback);
    let link = links
        .iter()
        .find(|l| l.ifindex == veth.ifindex.unwrap())
        .unwrap();
    assert_eq!(link.name.as_deref(), Some(receiver_if.as_str()));
    assert_eq!(link.kind.as_deref(), Some("veth"));
    assert_eq!(
        steerd::kernel::linkinfo::refine_kind(veth.kind, link.kind.as_deref()),
        DeviceKind::Veth
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The generated 1152-CPU machine

fn generated_1152_cpu_tree() {
    use steerd::fakeroot::FakeMachine;
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let tree = FakeMachine::large().write(dir.path()).unwrap();
    println!("wrote the 1152-CPU tree in {:?}", started.elapsed());
    let started = Instant::now();
    let machine = discover(&Root::new(dir.path())).unwrap();
    println!("discovered it in {:?}", started.elapsed());

    // proc/interrupts is the big file here (1080 rows × 1152 columns).
    let path = dir.path().join("proc/interrupts");
    let text = fs::read_to_string(&path).unwrap();
    let started = Instant::now();
    let parsed = interrupts::parse(&text, &path).unwrap();
    let elapsed = started.elapsed();
    println!(
        "parsed {:.1} MB of proc/interrupts in {elapsed:?}: {:.0} MB/s",
        text.len() as f64 / 1e6,
        text.len() as f64 / 1e6 / elapsed.as_secs_f64()
    );
    assert_eq!(parsed.cpus.len(), 1152);

    let t = &machine.topology;
    assert_eq!(t.nr_cpu_ids, 1152);
    assert_eq!(t.online.len(), 1152);
    assert_eq!(t.nodes.len(), 8);
    assert!(t.nodes.iter().all(|n| n.cpus.len() == 144));
    let cpu600 = t.cpu(600).unwrap();
    assert_eq!(cpu600.core, Some(24));
    assert_eq!(cpu600.siblings.to_list(), "24,600");
    assert_eq!(cpu600.node, Some(tree.machine.node_of(600)));
    assert!(cpu600.llc.is_some());

    let inv = &machine.inventory;
    assert_eq!(inv.irqs.len(), tree.all_irqs().len());
    assert!(inv.irqs.len() > 1000);
    assert_eq!(inv.rps_sock_flow_entries, Some(0));
    for (index, nic) in tree.machine.nics.iter().enumerate() {
        let dev = inv.device(&nic.name).unwrap();
        assert_eq!(dev.kind, DeviceKind::Physical);
        assert_eq!(dev.driver.as_deref(), Some(nic.driver.as_str()));
        assert_eq!(dev.numa_node, nic.node);
        assert_eq!(
            dev.local_cpus.as_ref().unwrap(),
            &tree.machine.node_cpus(nic.node.unwrap())
        );
        assert_eq!(dev.rx_queues.len(), 94);
        assert_eq!(dev.tx_queues.len(), 94);
        for q in 0..94usize {
            let irq = tree.queue_irqs[index][q];
            assert_eq!(dev.rx_queues[q].irq, Some(irq));
            assert_eq!(dev.tx_queues[q].irq, Some(irq));
            assert_eq!(dev.rx_queues[q].rps_mask_words, 36);
            let entry = inv.irq(irq).unwrap();
            assert_eq!(
                (entry.device.as_deref(), entry.queue, entry.role),
                (Some(nic.name.as_str()), Some(q as u32), IrqRole::Rxtx)
            );
        }
        let misc = inv.irq(tree.misc_irqs[index]).unwrap();
        assert_eq!(
            (misc.device.as_deref(), misc.role),
            (Some(nic.name.as_str()), IrqRole::Other)
        );
        assert_eq!(dev.irqs.len(), 95);
    }
    for &irq in &tree.other_irqs {
        assert_eq!(inv.irq(irq).unwrap().device, None);
    }
    assert!(inv.irq(tree.other_irqs[0]).unwrap().managed);
    assert!(!inv.irq(tree.other_irqs[1]).unwrap().managed);
    assert_eq!(inv.irqs[0].per_cpu.len(), 1152);
}

/// A directory where an IRQ's `smp_affinity_list` should be (a broken or odd tree) costs
/// that IRQ only: discovery goes on, warns, and marks it as never to be written.
fn an_unreadable_irq_is_left_alone_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let mut machine = steerd::fakeroot::FakeMachine::new(4);
    machine.nics.push(steerd::fakeroot::FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: None,
        queues: 4,
    });
    let tree = machine.write(dir.path()).unwrap();
    let broken = tree.queue_irqs[0][1];
    let path = dir
        .path()
        .join(format!("proc/irq/{broken}/smp_affinity_list"));
    fs::remove_file(&path).unwrap();
    fs::create_dir(&path).unwrap();
    let found = discover(&Root::new(dir.path())).expect("discovery goes on");
    let warning = found
        .warnings
        .iter()
        .find(|w| w.starts_with(&format!("irq {broken}:")))
        .unwrap_or_else(|| panic!("no warning for irq {broken}: {:?}", found.warnings));
    assert!(warning.contains("smp_affinity_list"), "{warning}");
    let irq = found
        .inventory
        .irqs
        .iter()
        .find(|i| i.irq == broken)
        .unwrap();
    assert!(irq.managed, "never written");
    let others = found
        .inventory
        .irqs
        .iter()
        .filter(|i| tree.queue_irqs[0].contains(&i.irq) && i.irq != broken);
    assert_eq!(others.filter(|i| !i.managed).count(), 3);
}

suite_main!(
    procfs_fixture_tree,
    node_exporter_fixture_tree,
    every_interrupts_capture_parses,
    two_node_ixgbe_igb_server_has_144_queue_vectors,
    i40e_igb_e1000e_server,
    mlx4_and_bnx2_server,
    mlx5_two_ports,
    ena_on_arm64,
    split_rx_tx_vectors_igb,
    small_servers,
    qlcnic_tg3_gve_mana_synthetic,
    msi_irqs_decide_ownership_before_names,
    real_machine,
    veth_in_a_namespace_real_kernel,
    generated_1152_cpu_tree,
    an_unreadable_irq_is_left_alone_not_fatal,
);
