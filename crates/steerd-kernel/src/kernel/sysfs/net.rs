//! Network devices from `sys/class/net`: identity, kind, the hardware behind them, and their
//! rx/tx queues with the current RPS, RFS and XPS settings.
//!
//! The hardware is found by resolving the `device` link and walking up the resolved path to
//! the nearest PCI function (`dddd:bb:dd.f`): for most NICs that is the link target itself,
//! for virtio_net the link points at `virtioN` whose parent is the PCI function. That
//! function's `numa_node`, `local_cpulist` and `msi_irqs/` describe the device; its MSI IRQs
//! are what discovery attributes first.
//!
//! Discovery has to stay fast at 1000 devices × 4 queues (500 veth pairs), so each device
//! costs a handful of small reads and no parsing beyond what the model needs.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::cpuset::CpuSet;
use crate::error::Error;
use crate::limits::MAX_QUEUES;
use crate::model::inventory::{DeviceKind, NapiSettings, NetDevice, RxQueue, TxQueue};
use crate::root::{Root, is_absent, optional_dir_entries};

const CLASS_NET: &str = "sys/class/net";

/// A device as sysfs describes it, with what discovery needs beyond the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysNetDevice {
    pub device: NetDevice,
    /// The IRQs listed in the PCI function's `msi_irqs/`, ascending (empty without one).
    /// Several netdevs on one PCI function (a dual-port mlx4) share the list.
    pub msi_irqs: Vec<u32>,
    /// For a virtio device, the name its vectors carry (`virtio2` for
    /// `virtio2-input.0`): the basename of the resolved `device` link.
    pub virtio_device: Option<String>,
}

/// Reads every device under `sys/class/net`, sorted by name. A missing `sys/class/net`
/// is no devices; a device that vanishes while being read is skipped.
pub fn read_devices(root: &Root) -> Result<Vec<SysNetDevice>, Error> {
    let dir = root.path(CLASS_NET);
    let mut names = Vec::new();
    for entry in optional_dir_entries(&dir)? {
        let entry = entry?;
        let file_type = entry
            .file_type()
            .map_err(|err| Error::io(entry.path(), err))?;
        // `bonding_masters` (and any other plain file) is not a device.
        if !(file_type.is_dir() || file_type.is_symlink()) {
            continue;
        }
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    names.sort_unstable();
    let mut devices = Vec::with_capacity(names.len());
    for name in names {
        if let Some(device) = read_device(root, &name)? {
            devices.push(device);
        }
    }
    Ok(devices)
}

/// Reads one device; `Ok(None)` when `sys/class/net/<name>` does not exist (any more).
pub fn read_device(root: &Root, name: &str) -> Result<Option<SysNetDevice>, Error> {
    let dir = root.path(format!("{CLASS_NET}/{name}"));
    if !dir.exists() {
        return Ok(None);
    }
    match read_device_dir(&dir, name) {
        Ok(device) => Ok(Some(device)),
        // Unregistered between the listing and the reads: not an error. While the kernel
        // unregisters a device its directory is still there, but its attributes answer
        // EINVAL (net-sysfs serves only a device that is still alive) or ENODEV (its
        // queues' xps_cpus); both seen in the lab when a NIC's PCI function is removed
        // under traffic.
        Err(_) if !dir.exists() => Ok(None),
        Err(err) if is_unregistering(&err) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Whether a failed read of a net device's attribute says the kernel is unregistering the
/// device: its directory is still there, but its attributes answer EINVAL (net-sysfs serves
/// only a device that is still alive) or ENODEV (its queues' `xps_cpus`).
pub fn is_unregistering(err: &Error) -> bool {
    matches!(err.errno(), Some(nix::libc::EINVAL | nix::libc::ENODEV))
}

fn read_device_dir(dir: &Path, name: &str) -> Result<SysNetDevice, Error> {
    let ifindex = read_optional(&dir.join("ifindex"))?
        .map(|text| parse_number::<u32>(&dir.join("ifindex"), &text))
        .transpose()?;
    let operstate = read_optional(&dir.join("operstate"))?.map(|text| text.trim().to_string());
    let master = link_basename(&dir.join("master"))?;

    let device_link = dir.join("device");
    let hardware = match fs::read_link(&device_link) {
        Ok(_) => Some(resolve(&device_link)?),
        Err(err) if is_absent(&err) || err.kind() == io::ErrorKind::InvalidInput => None,
        Err(err) => return Err(Error::io(device_link, err)),
    };
    let driver = match hardware {
        Some(_) => link_basename(&dir.join("device/driver"))?,
        None => None,
    };

    let kind = if name == "lo" {
        DeviceKind::Loopback
    } else if dir.join("bonding").is_dir() {
        DeviceKind::Bond
    } else if dir.join("bridge").is_dir() {
        DeviceKind::Bridge
    } else if devtype(dir)?.as_deref() == Some("vlan") {
        DeviceKind::Vlan
    } else if hardware.is_some() {
        if driver.as_deref() == Some("virtio_net") {
            DeviceKind::Virtio
        } else {
            DeviceKind::Physical
        }
    } else {
        DeviceKind::OtherVirtual
    };

    let mut virtio_device = None;
    let mut pci = None;
    if let Some(Some(resolved)) = &hardware {
        virtio_device = resolved
            .file_name()
            .and_then(|base| base.to_str())
            .filter(|base| is_virtio_device(base))
            .map(str::to_string);
        pci = pci_function_dir(resolved);
    }
    let (pci_function, numa_node, local_cpus, msi_irqs) = match &pci {
        Some((bdf, pci_dir)) => (
            Some(bdf.clone()),
            read_numa_node(pci_dir)?,
            read_local_cpus(pci_dir)?,
            read_msi_irqs(pci_dir)?,
        ),
        None => (None, None, None, Vec::new()),
    };
    // A VF's function has a `physfn` link to its PF's; a dangling one says nothing.
    let physical_function = match &pci {
        Some((_, pci_dir)) => resolve(&pci_dir.join("physfn"))?
            .and_then(|pf| pci_function_dir(&pf))
            .map(|(bdf, _)| bdf),
        None => None,
    };

    let (mut rx_queues, tx_queues) = read_queues(&dir.join("queues"))?;
    let threaded_mode = crate::kernel::napi_threads::threaded_mode(dir);
    let defer_path = dir.join("napi_defer_hard_irqs");
    let napi_defer_hard_irqs = read_optional(&defer_path)?
        .map(|text| parse_number::<u32>(&defer_path, &text))
        .transpose()?;
    let flush_path = dir.join("gro_flush_timeout");
    let gro_flush_timeout_ns = read_optional(&flush_path)?
        .map(|text| parse_number::<u64>(&flush_path, &text))
        .transpose()?;
    // Until netdev netlink says otherwise (per NAPI, 6.13+), every NAPI of the device has
    // the device's values.
    for queue in &mut rx_queues {
        queue.napi = NapiSettings {
            defer_hard_irqs: napi_defer_hard_irqs,
            gro_flush_timeout_ns,
            irq_suspend_timeout_ns: None,
            threaded: threaded_mode,
            threaded_per_napi: false,
            per_napi: false,
        };
    }
    Ok(SysNetDevice {
        device: NetDevice {
            name: name.to_string(),
            ifindex,
            driver,
            kind,
            operstate,
            master,
            pci_function,
            physical_function,
            numa_node,
            local_cpus,
            rx_queues,
            tx_queues,
            irqs: Vec::new(),
            threaded: crate::kernel::napi_threads::is_threaded(dir),
            threaded_mode,
            napi_defer_hard_irqs,
            gro_flush_timeout_ns,
            rss_table: None,
            udp_hashed_on_addresses: Vec::new(),
        },
        msi_irqs,
        virtio_device,
    })
}

/// Whether a path component names a PCI function: `dddd:bb:dd.f` in hex (the domain may
/// have more than 4 digits, as behind Intel VMD).
pub fn is_pci_bdf(text: &str) -> bool {
    let mut parts = text.split(':');
    let (Some(domain), Some(bus), Some(slot_function), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some((slot, function)) = slot_function.split_once('.') else {
        return false;
    };
    let hex = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    hex(domain, 4, 8) && hex(bus, 2, 2) && hex(slot, 2, 2) && hex(function, 1, 1)
}

/// `virtio` followed by digits.
fn is_virtio_device(name: &str) -> bool {
    name.strip_prefix("virtio")
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// The nearest PCI function at or above `resolved`: its BDF and directory.
pub fn pci_function_dir(resolved: &Path) -> Option<(String, PathBuf)> {
    let components: Vec<Component> = resolved.components().collect();
    for end in (0..components.len()).rev() {
        if let Component::Normal(part) = components[end]
            && let Some(text) = part.to_str()
            && is_pci_bdf(text)
        {
            let dir: PathBuf = components[..=end].iter().collect();
            return Some((text.to_string(), dir));
        }
    }
    None
}

/// Resolves a link to its canonical target; a dangling link is `None`.
fn resolve(link: &Path) -> Result<Option<PathBuf>, Error> {
    match fs::canonicalize(link) {
        Ok(path) => Ok(Some(path)),
        Err(err) if is_absent(&err) => Ok(None),
        Err(err) => Err(Error::io(link, err)),
    }
}

/// The basename of a symlink's target (`../../bus/pci/drivers/igb` → `igb`); `None` when
/// there is no such link.
fn link_basename(link: &Path) -> Result<Option<String>, Error> {
    match fs::read_link(link) {
        Ok(target) => Ok(target
            .file_name()
            .and_then(|name| name.to_str())
            .map(str::to_string)),
        Err(err) if is_absent(&err) || err.kind() == io::ErrorKind::InvalidInput => Ok(None),
        Err(err) => Err(Error::io(link, err)),
    }
}

/// `DEVTYPE=` from the device's `uevent`.
fn devtype(dir: &Path) -> Result<Option<String>, Error> {
    Ok(read_optional(&dir.join("uevent"))?.and_then(|text| {
        text.lines()
            .find_map(|line| line.strip_prefix("DEVTYPE="))
            .map(|value| value.trim().to_string())
    }))
}

fn read_numa_node(pci_dir: &Path) -> Result<Option<u32>, Error> {
    let path = pci_dir.join("numa_node");
    match read_optional(&path)? {
        None => Ok(None),
        Some(text) => Ok(u32::try_from(parse_number::<i64>(&path, &text)?).ok()),
    }
}

fn read_local_cpus(pci_dir: &Path) -> Result<Option<CpuSet>, Error> {
    let list = pci_dir.join("local_cpulist");
    if let Some(text) = read_optional(&list)? {
        return CpuSet::parse_list(&text)
            .map(Some)
            .map_err(|err| Error::parse(list, 1, err.to_string()));
    }
    let mask = pci_dir.join("local_cpus");
    match read_optional(&mask)? {
        None => Ok(None),
        Some(text) => CpuSet::parse_mask(&text)
            .map(Some)
            .map_err(|err| Error::parse(mask, 1, err.to_string())),
    }
}

fn read_msi_irqs(pci_dir: &Path) -> Result<Vec<u32>, Error> {
    let dir = pci_dir.join("msi_irqs");
    let mut irqs = Vec::new();
    for entry in optional_dir_entries(&dir)? {
        let entry = entry?;
        if let Some(irq) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        {
            irqs.push(irq);
        }
    }
    irqs.sort_unstable();
    Ok(irqs)
}

/// `queues/rx-N` and `queues/tx-N`, each sorted numerically.
fn read_queues(dir: &Path) -> Result<(Vec<RxQueue>, Vec<TxQueue>), Error> {
    let mut rx_indices = Vec::new();
    let mut tx_indices = Vec::new();
    for entry in optional_dir_entries(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let (indices, number) = if let Some(number) = name.strip_prefix("rx-") {
            (&mut rx_indices, number)
        } else if let Some(number) = name.strip_prefix("tx-") {
            (&mut tx_indices, number)
        } else {
            continue;
        };
        let Ok(index) = number.parse::<u32>() else {
            continue;
        };
        // Queue numbers index per-queue tables (load, placement): one beyond any kernel's
        // must not size them.
        if index >= MAX_QUEUES {
            return Err(Error::parse(
                dir.join(name),
                0,
                format!("queue number {index} is not below {MAX_QUEUES}, the kernel's limit"),
            ));
        }
        indices.push(index);
    }
    rx_indices.sort_unstable();
    tx_indices.sort_unstable();

    let mut rx_queues = Vec::with_capacity(rx_indices.len());
    for index in rx_indices {
        let queue = dir.join(format!("rx-{index}"));
        let rps_path = queue.join("rps_cpus");
        let (rps_cpus, rps_mask_words) = match read_optional(&rps_path)? {
            None => (None, 0),
            Some(text) => {
                let set = CpuSet::parse_mask(&text)
                    .map_err(|err| Error::parse(&rps_path, 1, err.to_string()))?;
                let words = text.trim().split(',').count() as u32;
                (Some(set), words)
            }
        };
        let flow_path = queue.join("rps_flow_cnt");
        let rps_flow_cnt = read_optional(&flow_path)?
            .map(|text| parse_number::<u32>(&flow_path, &text))
            .transpose()?;
        rx_queues.push(RxQueue {
            index,
            rps_cpus,
            rps_mask_words,
            rps_flow_cnt,
            irq: None,
            napi_id: None,
            napi_thread: None,
            napi: NapiSettings::default(),
        });
    }

    let mut tx_queues = Vec::with_capacity(tx_indices.len());
    for index in tx_indices {
        let xps_path = dir.join(format!("tx-{index}/xps_cpus"));
        // A single-TX-queue device lists xps_cpus but reading it fails with ENOENT.
        let xps_cpus = match read_optional(&xps_path)? {
            None => None,
            Some(text) => Some(
                CpuSet::parse_mask(&text)
                    .map_err(|err| Error::parse(&xps_path, 1, err.to_string()))?,
            ),
        };
        tx_queues.push(TxQueue {
            index,
            xps_cpus,
            irq: None,
        });
    }
    Ok((rx_queues, tx_queues))
}

/// A file's text, `None` when it does not exist; at most
/// [`crate::limits::MAX_FILE_BYTES`] are read.
fn read_optional(path: &Path) -> Result<Option<String>, Error> {
    crate::limits::read_optional_bounded(path, crate::limits::MAX_FILE_BYTES)
}

fn parse_number<T: std::str::FromStr>(path: &Path, text: &str) -> Result<T, Error> {
    text.trim()
        .parse()
        .map_err(|_| Error::parse(path, 1, format!("not a number: {:?}", text.trim())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A device the kernel is unregistering still has its directory, but its attributes
    /// answer EINVAL: it is skipped like a vanished one, not an error that fails the whole
    /// discovery. `/proc/self/clear_refs` answers a read with EINVAL (as root; others may
    /// not open it).
    #[test]
    fn a_device_whose_attributes_answer_einval_is_being_unregistered_and_skipped() {
        let Some(einval) = crate::fakeroot::einval_file() else {
            eprintln!(
                "skipped: reading /proc/self/clear_refs does not give EINVAL here (not root)"
            );
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        for (name, ifindex) in [("eth0", Some("2\n")), ("eth1", None)] {
            let dev = dir.path().join(CLASS_NET).join(name);
            fs::create_dir_all(&dev).unwrap();
            match ifindex {
                Some(text) => fs::write(dev.join("ifindex"), text).unwrap(),
                None => symlink(einval, dev.join("ifindex")).unwrap(),
            }
        }
        let devices = read_devices(&Root::new(dir.path())).unwrap();
        let names: Vec<&str> = devices.iter().map(|d| d.device.name.as_str()).collect();
        assert_eq!(names, ["eth0"]);
    }

    #[test]
    fn recognises_pci_functions() {
        for good in [
            "0000:00:03.0",
            "0000:45:00.1",
            "10000:e1:00.7",
            "abcd:ef:1f.6",
        ] {
            assert!(is_pci_bdf(good), "{good}");
        }
        for bad in [
            "0000:00:02.1:pcie010",
            "pci0000:00",
            "virtio2",
            "0000:00:03",
            "0000:0:03.0",
            "0000:00:03.10",
            "",
        ] {
            assert!(!is_pci_bdf(bad), "{bad}");
        }
        let (bdf, dir) =
            pci_function_dir(Path::new("/sys/devices/pci0000:00/0000:00:03.0/virtio2")).unwrap();
        assert_eq!(bdf, "0000:00:03.0");
        assert_eq!(dir, Path::new("/sys/devices/pci0000:00/0000:00:03.0"));
        assert_eq!(
            pci_function_dir(Path::new("/sys/devices/virtual/net/lo")),
            None
        );
    }

    use super::super::write_test_file as write;

    fn link(dir: &Path, target: &str, relative: &str) {
        let path = dir.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, path).unwrap();
    }

    #[test]
    fn a_virtio_nic_and_a_vlan_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let pci = "sys/devices/pci0000:00/0000:00:03.0";
        write(d, &format!("{pci}/numa_node"), "-1\n");
        write(d, &format!("{pci}/local_cpulist"), "0-1\n");
        for irq in [37, 38, 39] {
            write(d, &format!("{pci}/msi_irqs/{irq}"), "msix\n");
        }
        fs::create_dir_all(d.join("sys/bus/virtio/drivers/virtio_net")).unwrap();
        link(
            d,
            "../../../../bus/virtio/drivers/virtio_net",
            &format!("{pci}/virtio2/driver"),
        );
        let net = format!("{pci}/virtio2/net/eth0");
        write(d, &format!("{net}/ifindex"), "4\n");
        write(d, &format!("{net}/operstate"), "up\n");
        link(d, "../../../virtio2", &format!("{net}/device"));
        write(d, &format!("{net}/queues/rx-0/rps_cpus"), "3\n");
        write(d, &format!("{net}/queues/rx-0/rps_flow_cnt"), "0\n");
        fs::create_dir_all(d.join(format!("{net}/queues/tx-0"))).unwrap();
        for index in [10, 2, 9] {
            write(d, &format!("{net}/queues/rx-{index}/rps_cpus"), "0\n");
        }
        link(
            d,
            &format!("../../{}", net.trim_start_matches("sys/")),
            "sys/class/net/eth0",
        );
        let vlan = "sys/devices/virtual/net/eth0.7";
        write(
            d,
            &format!("{vlan}/uevent"),
            "DEVTYPE=vlan\nINTERFACE=eth0.7\n",
        );
        link(
            d,
            "../../devices/virtual/net/eth0.7",
            "sys/class/net/eth0.7",
        );
        write(d, "sys/class/net/bonding_masters", "\n");

        let devices = read_devices(&Root::new(d)).unwrap();
        assert_eq!(devices.len(), 2);
        let eth0 = &devices[0];
        assert_eq!(eth0.device.name, "eth0");
        assert_eq!(eth0.device.kind, DeviceKind::Virtio);
        assert_eq!(eth0.device.driver.as_deref(), Some("virtio_net"));
        assert_eq!(eth0.device.pci_function.as_deref(), Some("0000:00:03.0"));
        assert_eq!(eth0.device.numa_node, None);
        assert_eq!(eth0.device.local_cpus.as_ref().unwrap().to_list(), "0-1");
        assert_eq!(eth0.msi_irqs, vec![37, 38, 39]);
        assert_eq!(eth0.virtio_device.as_deref(), Some("virtio2"));
        let indices: Vec<u32> = eth0.device.rx_queues.iter().map(|q| q.index).collect();
        assert_eq!(indices, vec![0, 2, 9, 10]);
        assert_eq!(
            eth0.device.rx_queues[0]
                .rps_cpus
                .as_ref()
                .unwrap()
                .to_list(),
            "0-1"
        );
        assert_eq!(eth0.device.rx_queues[0].rps_mask_words, 1);
        assert_eq!(eth0.device.tx_queues[0].xps_cpus, None);
        let vlan = &devices[1];
        assert_eq!(vlan.device.kind, DeviceKind::Vlan);
        assert_eq!(vlan.device.pci_function, None);
        assert!(vlan.msi_irqs.is_empty());
    }

    #[test]
    fn a_virtual_function_names_its_physical_function() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let port = "sys/devices/pci0000:00/0000:00:02.0";
        fs::create_dir_all(d.join("sys/bus/pci/drivers/igb")).unwrap();
        fs::create_dir_all(d.join("sys/bus/pci/drivers/igbvf")).unwrap();
        for (name, function, driver, irqs) in [
            ("pf0", "0000:01:00.0", "igb", [25, 26, 27]),
            ("eth0", "0000:01:10.0", "igbvf", [28, 29, 30]),
        ] {
            let pci = format!("{port}/{function}");
            write(d, &format!("{pci}/numa_node"), "-1\n");
            for irq in irqs {
                write(d, &format!("{pci}/msi_irqs/{irq}"), "msix\n");
            }
            link(
                d,
                &format!("../../../../bus/pci/drivers/{driver}"),
                &format!("{pci}/driver"),
            );
            let net = format!("{pci}/net/{name}");
            write(d, &format!("{net}/ifindex"), "3\n");
            write(d, &format!("{net}/queues/rx-0/rps_cpus"), "0\n");
            link(d, &format!("../../../{function}"), &format!("{net}/device"));
            link(
                d,
                &format!("../../{}", net.trim_start_matches("sys/")),
                &format!("sys/class/net/{name}"),
            );
        }
        link(d, "../0000:01:00.0", &format!("{port}/0000:01:10.0/physfn"));
        // A dangling `physfn` (a stale link, its target gone) says nothing.
        link(d, "../0000:02:00.0", &format!("{port}/0000:01:00.0/physfn"));
        write(d, "sys/class/net/bonding_masters", "\n");

        let devices = read_devices(&Root::new(d)).unwrap();
        let by_name = |n: &str| devices.iter().find(|x| x.device.name == n).unwrap();
        let vf = by_name("eth0");
        assert_eq!(vf.device.driver.as_deref(), Some("igbvf"));
        assert_eq!(vf.device.pci_function.as_deref(), Some("0000:01:10.0"));
        assert_eq!(vf.device.physical_function.as_deref(), Some("0000:01:00.0"));
        assert_eq!(vf.msi_irqs, vec![28, 29, 30]);
        assert_eq!(by_name("pf0").device.physical_function, None);
    }

    #[test]
    fn local_cpus_fall_back_to_the_mask() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            d,
            "local_cpus",
            "00000000,00000000,ffffffff,ffffffff,00000000,00000000,ffffffff,ffffffff\n",
        );
        assert_eq!(
            read_local_cpus(d).unwrap().unwrap().to_list(),
            "0-63,128-191"
        );
        write(d, "local_cpulist", "0-7\n");
        assert_eq!(read_local_cpus(d).unwrap().unwrap().to_list(), "0-7");
        write(d, "numa_node", "-1\n");
        assert_eq!(read_numa_node(d).unwrap(), None);
        write(d, "numa_node", "3\n");
        assert_eq!(read_numa_node(d).unwrap(), Some(3));
        assert_eq!(read_local_cpus(&d.join("nothing")).unwrap(), None);
    }

    #[test]
    fn thousand_devices_with_four_queues_each() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for n in 0..1000 {
            let net = format!("sys/devices/virtual/net/veth{n}");
            write(d, &format!("{net}/ifindex"), &format!("{}\n", n + 2));
            write(d, &format!("{net}/operstate"), "up\n");
            write(d, &format!("{net}/uevent"), &format!("INTERFACE=veth{n}\n"));
            for q in 0..4 {
                write(d, &format!("{net}/queues/rx-{q}/rps_cpus"), "0\n");
                write(d, &format!("{net}/queues/rx-{q}/rps_flow_cnt"), "0\n");
                write(d, &format!("{net}/queues/tx-{q}/xps_cpus"), "0\n");
            }
            link(
                d,
                &format!("../../devices/virtual/net/veth{n}"),
                &format!("sys/class/net/veth{n}"),
            );
        }
        let started = std::time::Instant::now();
        let devices = read_devices(&Root::new(d)).unwrap();
        let elapsed = started.elapsed();
        println!("read 1000 devices × 4 rx + 4 tx queues in {elapsed:?}");
        assert_eq!(devices.len(), 1000);
        assert!(devices.iter().all(|dev| dev.device.rx_queues.len() == 4
            && dev.device.tx_queues.len() == 4
            && dev.device.kind == DeviceKind::OtherVirtual));
    }

    #[test]
    fn malformed_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "sys/class/net/x0/ifindex", "seven\n");
        let err = read_devices(&Root::new(d)).unwrap_err().to_string();
        assert!(err.contains("x0/ifindex:1"), "{err}");
        fs::write(d.join("sys/class/net/x0/ifindex"), "7\n").unwrap();
        write(d, "sys/class/net/x0/queues/rx-0/rps_cpus", "zz\n");
        let err = read_devices(&Root::new(d)).unwrap_err().to_string();
        assert!(err.contains("rx-0/rps_cpus:1"), "{err}");
    }
}
