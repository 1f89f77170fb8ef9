//! Which NIC, queue and role an IRQ serves, from its action name in `proc/interrupts`.
//!
//! A pure classifier: given an action name and the network devices known (their names, PCI
//! functions and virtio device names), it returns the device, the queue number(s) and the
//! role. Discovery uses it after the PCI function's `msi_irqs/` has said which device an
//! IRQ belongs to (names then decide queue and role), and alone for IRQs no `msi_irqs/`
//! claims. The patterns are the drivers' `request_irq` names (docs/kernel.md, "Queue
//! vector names"):
//!
//! | driver | queue vectors | other vectors |
//! |---|---|---|
//! | igb, ixgbe, igc, bnxt, e1000e, hns3 | `<if>-TxRx-<n>`, `<if>-rx-<n>`, `<if>-tx-<n>` | `<if>` |
//! | i40e, ice, iavf | `i40e-<if>-TxRx-<n>` | `i40e-<bdf>:misc`, `…:fdir-TxRx-<n>`, `iavf-<bdf>:mbx` |
//! | ENA | `<if>-Tx-Rx-<n>` | `ena-mgmnt@pci:<bdf>` |
//! | mlx5 | `mlx5_comp<n>@pci:<bdf>` | `mlx5_async<n>@…`, `mlx5_pages_eq@…`, `mlx5_cmd_eq@…` |
//! | mlx4 | `mlx4-comp-<n>@pci:<bdf>`, `<if>-<n>` | `mlx4-async@pci:<bdf>` |
//! | virtio_net | `virtio<N>-input.<q>`, `virtio<N>-output.<q>` | `-config`; `-virtqueues` is one vector for all queues |
//! | bnx2x | `<if>-fp-<n>` | |
//! | tg3 | `<if>-tx-<n>`, `<if>-rx-<n>`, `<if>-txrx-<n>` (NAPI context n, ring n − 1) | |
//! | qlcnic | `<if>-rx-<n>`, `<if>-tx-<n>-rx-<m>` | |
//! | mana | `mana_q<n>@pci:<bdf>` | `mana_hwc@pci:<bdf>` |
//! | gve | `gve-ntfy-blk<n>@pci:<bdf>` (first half TX, second half RX) | `gve-mgmnt@pci:<bdf>` |
//! | be2net, mlx4_en, sfc, bnx2 | `<if>-q<n>`, `<if>-<n>` | |
//! | vmxnet3, nfp | `<if>-rxtx-<n>` | `<if>-event-<n>` |
//!
//! An interface prefix must be a whole device name followed by a whole known suffix, so
//! `eth10-TxRx-1` is never `eth1`'s, and the longest device name that fits wins. Vectors
//! named after a virtio device belong to the netdev whose `device` link is that virtio
//! device only: the vsock device's `virtio3-rx` on a VM is no NIC's.

use std::collections::HashMap;

use crate::model::inventory::IrqRole;

/// A network device as the classifier needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownDevice<'a> {
    pub name: &'a str,
    /// The bound driver (`tg3` numbers its vectors by NAPI context, not by queue).
    pub driver: Option<&'a str>,
    /// PCI function (`0000:01:00.0`), for `…@pci:<bdf>` and `i40e-<bdf>:misc` names.
    pub pci_function: Option<&'a str>,
    /// For virtio_net, the virtio device (`virtio2`) its vectors are named after.
    pub virtio_device: Option<&'a str>,
}

/// How a name tied the IRQ to its device; decides precedence when a device has both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameKind {
    /// Named after the interface (`eth0-TxRx-3`, `i40e-eth0-TxRx-3`).
    Interface,
    /// Named after the PCI function (`mlx5_comp3@pci:…`). On mlx4 these completion vectors
    /// go unused by the netdev when it has `<if>-<n>` vectors of its own.
    Function,
    /// Named after the virtio device (`virtio2-input.0`).
    Virtio,
    /// A gve notification block: `gve-ntfy-blk<n>`; which queue it serves depends on the
    /// device's block count (see [`split_notify_blocks`]).
    NotifyBlock,
}

/// What an action name says about its IRQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification {
    /// Index of the device in the slice given to [`DeviceNames::new`].
    pub device: usize,
    pub role: IrqRole,
    /// The receive queue served (for `Rx` and `Rxtx` vectors).
    pub rx_queue: Option<u32>,
    /// The transmit queue served (for `Tx` and `Rxtx` vectors).
    pub tx_queue: Option<u32>,
    pub kind: NameKind,
}

impl Classification {
    /// The queue number to show for the IRQ: the receive queue, else the transmit queue.
    pub fn queue(&self) -> Option<u32> {
        self.rx_queue.or(self.tx_queue)
    }

    fn new(device: usize, role: IrqRole, queue: Option<u32>, kind: NameKind) -> Self {
        let (rx_queue, tx_queue) = match role {
            IrqRole::Rx => (queue, None),
            IrqRole::Tx => (None, queue),
            IrqRole::Rxtx => (queue, queue),
            IrqRole::Other => (None, None),
        };
        Classification {
            device,
            role,
            rx_queue,
            tx_queue,
            kind,
        }
    }
}

/// Lookup tables over the known devices, built once per discovery.
#[derive(Debug)]
pub struct DeviceNames<'a> {
    devices: &'a [KnownDevice<'a>],
    by_name: HashMap<&'a str, usize>,
    by_function: HashMap<&'a str, usize>,
    by_virtio: HashMap<&'a str, usize>,
    /// The longest device name: a dash further right cannot end one, so the search for
    /// `<if>-<suffix>` skips it (without this, a long name with many dashes took
    /// quadratic time, each dash hashing everything before it).
    longest_name: usize,
}

impl<'a> DeviceNames<'a> {
    /// Indexes `devices`. When several share a PCI function (dual-port mlx4), names that
    /// only carry the function go to the first of them in slice order.
    pub fn new(devices: &'a [KnownDevice<'a>]) -> Self {
        let mut names = DeviceNames {
            devices,
            by_name: HashMap::with_capacity(devices.len()),
            by_function: HashMap::new(),
            by_virtio: HashMap::new(),
            longest_name: devices.iter().map(|d| d.name.len()).max().unwrap_or(0),
        };
        for (index, device) in devices.iter().enumerate() {
            names.by_name.entry(device.name).or_insert(index);
            if let Some(bdf) = device.pci_function {
                names.by_function.entry(bdf).or_insert(index);
            }
            if let Some(virtio) = device.virtio_device {
                names.by_virtio.entry(virtio).or_insert(index);
            }
        }
        names
    }

    /// The devices, as given.
    pub fn devices(&self) -> &'a [KnownDevice<'a>] {
        self.devices
    }

    /// Classifies one action name (one member of a shared line). `None`: not a known
    /// network device's vector.
    pub fn classify(&self, action: &str) -> Option<Classification> {
        let action = action.trim();
        if action.is_empty() {
            return None;
        }
        if let Some((prefix, bdf)) = action.split_once("@pci:") {
            return self.classify_function_name(prefix, bdf);
        }
        if let Some(found) = self.classify_interface_name(action) {
            return Some(found);
        }
        if let Some(found) = self.classify_virtio_name(action) {
            return Some(found);
        }
        // i40e-, ice-, iavf-, idpf-: a driver prefix before the interface or PCI function.
        for driver in ["i40e-", "ice-", "iavf-", "idpf-"] {
            if let Some(rest) = action.strip_prefix(driver) {
                if let Some((bdf, _what)) = split_function_prefix(rest) {
                    let device = *self.by_function.get(bdf)?;
                    return Some(Classification::new(
                        device,
                        IrqRole::Other,
                        None,
                        NameKind::Function,
                    ));
                }
                return self.classify_interface_name(rest);
            }
        }
        None
    }

    /// `<prefix>@pci:<bdf>` names: mlx5, mlx4, mana, gve, ENA, and any other driver that
    /// names vectors after the function (then an other-vector of the device).
    fn classify_function_name(&self, prefix: &str, bdf: &str) -> Option<Classification> {
        let device = *self.by_function.get(bdf.trim())?;
        let queue_vector = |queue: Option<u32>| match queue {
            Some(n) => Classification::new(device, IrqRole::Rxtx, Some(n), NameKind::Function),
            None => Classification::new(device, IrqRole::Other, None, NameKind::Function),
        };
        if let Some(rest) = prefix.strip_prefix("mlx5_") {
            return Some(queue_vector(rest.strip_prefix("comp").and_then(number)));
        }
        if let Some(rest) = prefix.strip_prefix("mlx4-") {
            let queue = rest
                .strip_prefix("comp-")
                .and_then(number)
                .or_else(|| number(rest));
            return Some(queue_vector(queue));
        }
        if let Some(rest) = prefix.strip_prefix("mana_") {
            return Some(queue_vector(rest.strip_prefix('q').and_then(number)));
        }
        if let Some(block) = prefix.strip_prefix("gve-ntfy-blk").and_then(number) {
            return Some(Classification {
                device,
                role: IrqRole::Rxtx,
                rx_queue: Some(block),
                tx_queue: Some(block),
                kind: NameKind::NotifyBlock,
            });
        }
        Some(queue_vector(None))
    }

    /// `<if>`, `<if>-TxRx-<n>`, `<if>-rx-<n>`, ...: the longest device name followed by a
    /// whole known suffix.
    fn classify_interface_name(&self, action: &str) -> Option<Classification> {
        if let Some(&device) = self.by_name.get(action) {
            return Some(Classification::new(
                device,
                IrqRole::Other,
                None,
                NameKind::Interface,
            ));
        }
        // Rightmost dash first: the longest candidate interface name wins.
        for (dash, _) in action.rmatch_indices('-') {
            if dash > self.longest_name {
                continue;
            }
            let (candidate, suffix) = (&action[..dash], &action[dash + 1..]);
            let Some(&device) = self.by_name.get(candidate) else {
                continue;
            };
            if let Some((role, mut rx_queue, mut tx_queue)) = interface_suffix(suffix) {
                if self.devices.get(device).and_then(|d| d.driver) == Some("tg3") {
                    // tg3 labels vectors by NAPI context; with RSS, context 0 serves no
                    // RX ring and ring i is context i + 1 (`tg3_mem_rx_acquire`); with
                    // TSS the same for TX, else TX ring 0 is context 0.
                    rx_queue = rx_queue.map(|n| n.saturating_sub(1));
                    tx_queue = tx_queue.map(|n| n.saturating_sub(1));
                }
                return Some(Classification {
                    device,
                    role,
                    rx_queue,
                    tx_queue,
                    kind: NameKind::Interface,
                });
            }
        }
        None
    }

    /// `virtio<N>-input.<q>`, `-output.<q>`, `-config`, `-virtqueues`, for the netdev whose
    /// `device` link is `virtio<N>`.
    fn classify_virtio_name(&self, action: &str) -> Option<Classification> {
        let (virtio, what) = action.split_once('-')?;
        let device = *self.by_virtio.get(virtio)?;
        let (role, queue) = if let Some(q) = what.strip_prefix("input.").and_then(number) {
            (IrqRole::Rx, Some(q))
        } else if let Some(q) = what.strip_prefix("output.").and_then(number) {
            (IrqRole::Tx, Some(q))
        } else if what == "virtqueues" {
            // One vector for every queue (no per-queue MSI-X).
            (IrqRole::Rxtx, None)
        } else {
            (IrqRole::Other, None)
        };
        Some(Classification::new(device, role, queue, NameKind::Virtio))
    }
}

/// Splits `0000:01:00.0:misc` into the PCI function and what follows it.
fn split_function_prefix(text: &str) -> Option<(&str, &str)> {
    // A BDF has exactly two colons; the third separates what follows.
    let mut colons = text.match_indices(':').map(|(at, _)| at);
    let _first = colons.next()?;
    let _second = colons.next()?;
    let third = colons.next()?;
    let (bdf, rest) = (&text[..third], &text[third + 1..]);
    crate::kernel::sysfs::net::is_pci_bdf(bdf).then_some((bdf, rest))
}

/// The part after `<if>-`: role, rx queue, tx queue.
fn interface_suffix(suffix: &str) -> Option<(IrqRole, Option<u32>, Option<u32>)> {
    let rxtx = |n: u32| Some((IrqRole::Rxtx, Some(n), Some(n)));
    if let Some(n) = number(suffix) {
        return rxtx(n); // mlx4_en, sfc, bnx2: `<if>-<n>`
    }
    let lower = suffix.to_ascii_lowercase();
    for word in ["txrx-", "rxtx-", "tx-rx-", "fp-", "combined-"] {
        if let Some(n) = lower.strip_prefix(word).and_then(number) {
            return rxtx(n);
        }
    }
    if let Some(n) = lower.strip_prefix('q').and_then(number) {
        return rxtx(n); // be2net
    }
    if let Some(rest) = lower.strip_prefix("tx-") {
        if let Some(n) = number(rest) {
            return Some((IrqRole::Tx, None, Some(n)));
        }
        // qlcnic: `<if>-tx-<n>-rx-<m>`, one vector for tx ring n and rx ring m.
        let (tx, rx) = rest.split_once("-rx-")?;
        return Some((IrqRole::Rxtx, Some(number(rx)?), Some(number(tx)?)));
    }
    if let Some(n) = lower.strip_prefix("rx-").and_then(number) {
        return Some((IrqRole::Rx, Some(n), None));
    }
    if lower.strip_prefix("event-").and_then(number).is_some() {
        return Some((IrqRole::Other, None, None)); // vmxnet3
    }
    None
}

/// A plain decimal number (no sign, no spaces) below [`crate::limits::MAX_QUEUES`]: the
/// numbers in action names are queue numbers, which index per-queue tables, so a name
/// with one no kernel can have is left unclassified.
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|&n| n < crate::limits::MAX_QUEUES)
}

/// gve: of a device's `blocks` notification blocks, the first half serve TX queue `n`, the
/// second half RX queue `n - blocks/2` (`gve_tx_idx_to_ntfy`, `gve_rx_idx_to_ntfy`).
/// Returns the role and queue of `block`.
pub fn split_notify_blocks(block: u32, blocks: u32) -> (IrqRole, u32) {
    let half = blocks / 2;
    if block < half {
        (IrqRole::Tx, block)
    } else {
        (IrqRole::Rx, block - half)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices() -> Vec<KnownDevice<'static>> {
        let plain = |name| KnownDevice {
            name,
            driver: None,
            pci_function: None,
            virtio_device: None,
        };
        let on = |name, bdf| KnownDevice {
            name,
            driver: None,
            pci_function: Some(bdf),
            virtio_device: None,
        };
        vec![
            on("eth1", "0000:02:00.1"),
            on("eth10", "0000:03:00.0"),
            on("eth0", "0000:01:00.0"),
            on("ens5", "0000:00:05.0"),
            on("mlx0", "0000:81:00.0"),
            on("gve0", "0000:00:04.0"),
            on("mana0", "7870:00:00.0"),
            KnownDevice {
                name: "tg0",
                driver: Some("tg3"),
                pci_function: Some("0000:0a:00.0"),
                virtio_device: None,
            },
            KnownDevice {
                name: "eth9",
                driver: Some("virtio_net"),
                pci_function: Some("0000:00:03.0"),
                virtio_device: Some("virtio2"),
            },
            plain("br-lan"),
            plain("br"),
        ]
    }

    fn check(action: &str, expected: Option<(&str, IrqRole, Option<u32>, Option<u32>)>) {
        let devices = devices();
        let names = DeviceNames::new(&devices);
        let got = names
            .classify(action)
            .map(|c| (devices[c.device].name, c.role, c.rx_queue, c.tx_queue));
        assert_eq!(got, expected, "{action}");
    }

    use IrqRole::{Other, Rx, Rxtx, Tx};

    #[test]
    fn intel_style_names() {
        check("eth0-TxRx-3", Some(("eth0", Rxtx, Some(3), Some(3))));
        check("eth0-rx-2", Some(("eth0", Rx, Some(2), None)));
        check("eth0-tx-2", Some(("eth0", Tx, None, Some(2))));
        check("eth0", Some(("eth0", Other, None, None)));
        check("eth1-TxRx-1", Some(("eth1", Rxtx, Some(1), Some(1))));
        check("eth10-TxRx-1", Some(("eth10", Rxtx, Some(1), Some(1))));
        check("eth11-TxRx-1", None);
        check("eth1x", None);
        check("i40e-eth0-TxRx-7", Some(("eth0", Rxtx, Some(7), Some(7))));
        check("ice-eth10-TxRx-0", Some(("eth10", Rxtx, Some(0), Some(0))));
        check("i40e-0000:01:00.0:misc", Some(("eth0", Other, None, None)));
        check(
            "i40e-0000:01:00.0:fdir-TxRx-0",
            Some(("eth0", Other, None, None)),
        );
        check("iavf-0000:03:00.0:mbx", Some(("eth10", Other, None, None)));
        check("ice-0000:09:00.0:misc", None);
    }

    #[test]
    fn other_drivers() {
        check("ens5-Tx-Rx-4", Some(("ens5", Rxtx, Some(4), Some(4))));
        check(
            "ena-mgmnt@pci:0000:00:05.0",
            Some(("ens5", Other, None, None)),
        );
        check(
            "mlx5_comp7@pci:0000:81:00.0",
            Some(("mlx0", Rxtx, Some(7), Some(7))),
        );
        check(
            "mlx5_async0@pci:0000:81:00.0",
            Some(("mlx0", Other, None, None)),
        );
        check(
            "mlx5_pages_eq@pci:0000:81:00.0",
            Some(("mlx0", Other, None, None)),
        );
        check(
            "mlx5_cmd_eq@pci:0000:81:00.0",
            Some(("mlx0", Other, None, None)),
        );
        check("mlx5_comp0@pci:0000:99:00.0", None);
        check(
            "mlx4-comp-2@pci:0000:81:00.0",
            Some(("mlx0", Rxtx, Some(2), Some(2))),
        );
        check(
            "mlx4-5@pci:0000:81:00.0",
            Some(("mlx0", Rxtx, Some(5), Some(5))),
        );
        check(
            "mlx4-async@pci:0000:81:00.0",
            Some(("mlx0", Other, None, None)),
        );
        check("eth0-3", Some(("eth0", Rxtx, Some(3), Some(3))));
        check("eth0-fp-3", Some(("eth0", Rxtx, Some(3), Some(3))));
        check("eth0-q3", Some(("eth0", Rxtx, Some(3), Some(3))));
        check("eth0-tx-0-rx-3", Some(("eth0", Rxtx, Some(3), Some(0))));
        check("tg0-tx-0", Some(("tg0", Tx, None, Some(0))));
        check("tg0-rx-1", Some(("tg0", Rx, Some(0), None)));
        check("tg0-rx-4", Some(("tg0", Rx, Some(3), None)));
        check("tg0-txrx-2", Some(("tg0", Rxtx, Some(1), Some(1))));
        check("eth0-rxtx-1", Some(("eth0", Rxtx, Some(1), Some(1))));
        check("eth0-event-0", Some(("eth0", Other, None, None)));
        check(
            "mana_q3@pci:7870:00:00.0",
            Some(("mana0", Rxtx, Some(3), Some(3))),
        );
        check(
            "mana_hwc@pci:7870:00:00.0",
            Some(("mana0", Other, None, None)),
        );
        check(
            "gve-mgmnt@pci:0000:00:04.0",
            Some(("gve0", Other, None, None)),
        );
        check(
            "gve-ntfy-blk5@pci:0000:00:04.0",
            Some(("gve0", Rxtx, Some(5), Some(5))),
        );
        check("br-lan-TxRx-0", Some(("br-lan", Rxtx, Some(0), Some(0))));
        check("br-lan", Some(("br-lan", Other, None, None)));
        check("br-TxRx-0", Some(("br", Rxtx, Some(0), Some(0))));
    }

    #[test]
    fn virtio_names_belong_to_their_virtio_device_only() {
        check("virtio2-input.0", Some(("eth9", Rx, Some(0), None)));
        check("virtio2-output.3", Some(("eth9", Tx, None, Some(3))));
        check("virtio2-config", Some(("eth9", Other, None, None)));
        check("virtio2-virtqueues", Some(("eth9", Rxtx, None, None)));
        check("virtio3-rx", None);
        check("virtio3-tx", None);
        check("virtio3-event", None);
        check("virtio1-req.0", None);
        check("virtio21-input.0", None);
    }

    #[test]
    fn not_a_nics() {
        for action in [
            "timer",
            "ahci[0000:00:1f.2]",
            "nvme0q1",
            "xhci_hcd",
            "",
            "i40e-",
            "-",
            "eth0-",
            "eth0-TxRx-",
            "eth0-TxRx-x",
            "eth0-lsc",
            "skge@pci:0000:05:00.0",
        ] {
            check(action, None);
        }
    }

    #[test]
    fn gve_blocks_split_tx_then_rx() {
        assert_eq!(split_notify_blocks(0, 8), (Tx, 0));
        assert_eq!(split_notify_blocks(3, 8), (Tx, 3));
        assert_eq!(split_notify_blocks(4, 8), (Rx, 0));
        assert_eq!(split_notify_blocks(7, 8), (Rx, 3));
    }
}
