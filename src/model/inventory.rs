//! The network devices, their queues, and the IRQs that serve them.

use serde::Serialize;

use crate::cpuset::CpuSet;

/// Everything steerd can steer, as found at discovery.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Inventory {
    /// Network devices, sorted by name.
    pub devices: Vec<NetDevice>,
    /// Every numbered IRQ in `proc/interrupts`, sorted by number.
    pub irqs: Vec<Irq>,
    /// `proc/sys/net/core/rps_sock_flow_entries`; `None` where the file does not exist
    /// (outside the initial network namespace).
    pub rps_sock_flow_entries: Option<u32>,
}

/// What sort of network device this is; it decides which levers apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// A NIC behind a PCI (or platform) function with its own IRQs.
    Physical,
    /// virtio_net: a PCI function with per-queue MSI-X vectors (or one shared vector).
    Virtio,
    Veth,
    Bond,
    Vlan,
    Bridge,
    Loopback,
    /// Any other software device (tun, ifb, dummy, wireguard, ...).
    OtherVirtual,
}

/// One network device under `sys/class/net`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetDevice {
    pub name: String,
    pub ifindex: Option<u32>,
    /// The bound driver's name (`device/driver` link), e.g. `ixgbe`, `virtio_net`.
    pub driver: Option<String>,
    pub kind: DeviceKind,
    /// `operstate`: `up`, `down`, `unknown`, ...
    pub operstate: Option<String>,
    /// The master device for a bond slave or bridge port.
    pub master: Option<String>,
    /// The PCI function behind the device (`0000:03:00.0`), also for virtio.
    pub pci_function: Option<String>,
    /// NUMA node of the hardware; `None` when unknown (`numa_node` = -1) or virtual.
    pub numa_node: Option<u32>,
    /// CPUs local to the hardware; every CPU when unknown.
    pub local_cpus: Option<CpuSet>,
    pub rx_queues: Vec<RxQueue>,
    pub tx_queues: Vec<TxQueue>,
    /// Every IRQ attributed to this device (queue vectors and others), ascending.
    pub irqs: Vec<u32>,
    /// `threaded`: its NAPI polls in kernel threads; `None` where the file is absent.
    pub threaded: Option<bool>,
}

/// One `queues/rx-N` directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RxQueue {
    pub index: u32,
    /// `rps_cpus`; `None` when the file is absent (kernel without CONFIG_RPS).
    pub rps_cpus: Option<CpuSet>,
    /// Groups (32-bit words) in the `rps_cpus` text as read back: the width to write.
    #[serde(skip)]
    pub rps_mask_words: u32,
    pub rps_flow_cnt: Option<u32>,
    /// The IRQ whose vector serves this queue, when known.
    pub irq: Option<u32>,
    /// The NAPI instance polling this queue, when the kernel says (netdev netlink).
    pub napi_id: Option<u32>,
    /// The thread polling it, when the device's NAPI is threaded.
    pub napi_thread: Option<crate::kernel::napi_threads::NapiThread>,
}

/// One `queues/tx-N` directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TxQueue {
    pub index: u32,
    /// `xps_cpus`; `None` when not applicable (the read fails with ENOENT on a
    /// single-TX-queue device) or absent.
    pub xps_cpus: Option<CpuSet>,
    pub irq: Option<u32>,
}

/// What an IRQ does for a NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IrqRole {
    /// A receive queue vector.
    Rx,
    /// A transmit queue vector.
    Tx,
    /// A combined receive+transmit vector (`TxRx`, mlx5 `comp`, virtio `input` paired...).
    Rxtx,
    /// A NIC's non-queue vector (link, misc, fdir, async, mailbox, config), or an IRQ that
    /// belongs to no NIC (then `device` is `None`).
    Other,
}

/// One numbered line of `proc/interrupts`, joined with `proc/irq/N/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Irq {
    pub irq: u32,
    /// The action name(s) as printed: the last field, or the comma-joined list of a
    /// shared line (`uhci_hcd:usb3, eth1`).
    pub name: String,
    /// The interrupt chip column and hwirq, e.g. `PCI-MSIX-0000:00:03.0 1-edge`.
    pub chip: Option<String>,
    /// The device this IRQ serves, when it serves a network device.
    pub device: Option<String>,
    /// The queue number, for a queue vector.
    pub queue: Option<u32>,
    pub role: IrqRole,
    /// `smp_affinity_list`: CPUs the IRQ may be delivered to.
    pub affinity: Option<CpuSet>,
    /// `effective_affinity_list`: where it is actually delivered.
    pub effective_affinity: Option<CpuSet>,
    /// `affinity_hint` (the driver's suggestion); `None` when the hint is empty.
    pub affinity_hint: Option<CpuSet>,
    /// `node`; `None` for -1.
    pub node: Option<u32>,
    /// Whether user space cannot move this IRQ: its `smp_affinity` is read-only (kernel
    /// managed, ≈6.12+). Older kernels only tell by failing a write (EIO/EPERM); the
    /// actuator records that.
    pub managed: bool,
    /// Per-CPU counts from `proc/interrupts`, indexed by CPU id (offline CPUs are 0).
    #[serde(skip)]
    pub per_cpu: Vec<u64>,
    /// Sum of the per-CPU counts.
    pub total: u64,
}

impl Inventory {
    pub fn device(&self, name: &str) -> Option<&NetDevice> {
        self.devices.iter().find(|d| d.name == name)
    }

    pub fn irq(&self, number: u32) -> Option<&Irq> {
        self.irqs
            .binary_search_by_key(&number, |irq| irq.irq)
            .ok()
            .map(|index| &self.irqs[index])
    }
}
