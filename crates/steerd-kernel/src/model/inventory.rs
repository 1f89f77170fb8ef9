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
    /// For an SR-IOV virtual function (`igbvf`, `ixgbevf`, `iavf`, `mlx5` VFs), its
    /// physical function's PCI address (the `physfn` link of the VF's PCI function): the
    /// VF's receive queues are a pool of the PF's hardware, steered like any NIC's.
    pub physical_function: Option<String>,
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
    /// `threaded` as a mode: 0 disabled, 1 enabled, 2 busy-poll (6.19); `None` where the
    /// file is absent or holds a value this steerd does not know.
    pub threaded_mode: Option<ThreadedMode>,
    /// `napi_defer_hard_irqs`: empty polls before the device's NAPI re-enables its
    /// interrupt (0: no deferral); on 6.13+ writing it sets every NAPI of the device.
    pub napi_defer_hard_irqs: Option<u32>,
    /// `gro_flush_timeout` in ns: the timer that ends a deferral and flushes GRO (0: none).
    pub gro_flush_timeout_ns: Option<u64>,
    /// The RSS indirection table of the default context (entry i: the rx queue hash
    /// bucket i goes to), where the NIC has one and discovery read it
    /// (`kernel::rss::knob`); `None` for devices without one.
    pub rss_table: Option<Vec<u32>>,
    /// The UDP families (`udp4`, `udp6`) the NIC hashes on IP addresses only, without
    /// ports (`ETHTOOL_GRXFH`), read with the table: every flow between two hosts then
    /// shares one queue, which no table step can split.
    pub udp_hashed_on_addresses: Vec<String>,
}

/// How a NAPI instance polls (`threaded` in sysfs, per device; netdev netlink `threaded`,
/// per NAPI, 6.17+; `busy-poll` 6.19+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadedMode {
    /// In softirq context, on the CPU its interrupt fired on.
    Disabled,
    /// In its `napi/DEV-ID` kernel thread, woken by the interrupt.
    Enabled,
    /// In its kernel thread, which polls continuously: it keeps a whole CPU busy.
    BusyPoll,
}

impl ThreadedMode {
    /// The value of `threaded` in sysfs and of the netlink enum (`netdev_napi_threaded`).
    pub fn from_number(value: u64) -> Option<ThreadedMode> {
        match value {
            0 => Some(ThreadedMode::Disabled),
            1 => Some(ThreadedMode::Enabled),
            2 => Some(ThreadedMode::BusyPoll),
            _ => None,
        }
    }

    /// The word the views print: `no`, `yes`, `busy-poll`.
    pub fn word(self) -> &'static str {
        match self {
            ThreadedMode::Disabled => "no",
            ThreadedMode::Enabled => "yes",
            ThreadedMode::BusyPoll => "busy-poll",
        }
    }
}

/// A receive queue's NAPI settings: per NAPI from netdev netlink's `napi-get` where the
/// kernel carries them, else the device's sysfs files (which then hold for every NAPI of
/// the device). `None` is "not on this kernel" (or, off the host, not known), never 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NapiSettings {
    /// `defer-hard-irqs` (6.13+) or the device's `napi_defer_hard_irqs`.
    pub defer_hard_irqs: Option<u32>,
    /// `gro-flush-timeout` in ns (6.13+) or the device's `gro_flush_timeout`.
    pub gro_flush_timeout_ns: Option<u64>,
    /// `irq-suspend-timeout` in ns (6.13+); netlink only, no sysfs file has it.
    pub irq_suspend_timeout_ns: Option<u64>,
    /// `threaded` per NAPI (6.17+), or the device's `threaded`.
    pub threaded: Option<ThreadedMode>,
    /// Whether `threaded` is this NAPI's own, from `napi-get` (6.17+), rather than the
    /// device's file: only such a mode can be switched without the file (`napi-set`), so
    /// only such NAPIs are worth the tick's watch (`engine::napi_modes` in steerd-core).
    #[serde(skip)]
    pub threaded_per_napi: bool,
    /// Whether `napi-get` gave the values for this queue's NAPI (else they are the
    /// device's).
    pub per_napi: bool,
}

impl NapiSettings {
    /// Whether the NAPI polls in a busy-polling thread (`threaded` busy-poll, 6.19), which
    /// never sleeps and keeps its CPU busy.
    pub fn busy_polls(&self) -> bool {
        self.threaded == Some(ThreadedMode::BusyPoll)
    }
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
    /// Its NAPI's settings (deferral, GRO flush and IRQ suspend timeouts, threaded mode).
    pub napi: NapiSettings,
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

/// Bare values for the hand-built inventories of unit tests: only a name and a kind (or a
/// number), everything discovery would fill in left unknown or empty, so that a test sets
/// just the fields it is about (`..NetDevice::bare(..)`) instead of listing all of them.
#[cfg(any(test, feature = "test-support"))]
impl NetDevice {
    pub fn bare(name: &str, kind: DeviceKind) -> NetDevice {
        NetDevice {
            name: name.to_string(),
            ifindex: None,
            driver: None,
            kind,
            operstate: None,
            master: None,
            pci_function: None,
            physical_function: None,
            numa_node: None,
            local_cpus: None,
            rx_queues: Vec::new(),
            tx_queues: Vec::new(),
            irqs: Vec::new(),
            threaded: None,
            threaded_mode: None,
            napi_defer_hard_irqs: None,
            gro_flush_timeout_ns: None,
            rss_table: None,
            udp_hashed_on_addresses: Vec::new(),
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl RxQueue {
    /// Rx queue `index` with no RPS, IRQ or NAPI known (one-word `rps_cpus` width).
    pub fn bare(index: u32) -> RxQueue {
        RxQueue {
            index,
            rps_cpus: None,
            rps_mask_words: 1,
            rps_flow_cnt: None,
            irq: None,
            napi_id: None,
            napi_thread: None,
            napi: NapiSettings::default(),
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Irq {
    /// IRQ `irq` named `name`, serving no device, with no affinity or counts known.
    pub fn bare(irq: u32, name: &str) -> Irq {
        Irq {
            irq,
            name: name.to_string(),
            chip: None,
            device: None,
            queue: None,
            role: IrqRole::Other,
            affinity: None,
            effective_affinity: None,
            affinity_hint: None,
            node: None,
            managed: false,
            per_cpu: Vec::new(),
            total: 0,
        }
    }
}
