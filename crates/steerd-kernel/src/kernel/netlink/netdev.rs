//! A small typed client for the generic-netlink family `"netdev"`: which queues a device
//! has, which NAPI instance (and so which IRQ) serves each, and per-queue packet counters.
//!
//! No crate covers this family (rtnetlink and netlink-packet-route stop at rtnetlink, and
//! the ethtool family carries no per-queue driver counters), so the requests and replies
//! are written here on top of netlink-packet-core (framing, attributes), netlink-packet-generic
//! (the `genlmsghdr` and the controller used to resolve the family) and netlink-sys (the
//! socket), through [`super::genl`]. Replies are walked in place, without a heap allocation per message, because
//! `qstats-get` runs on every daemon tick.
//!
//! Gating: the family itself appeared in 6.2 (`dev-get`), `queue-get`/`napi-get` in 6.8 and
//! `qstats-get` in 6.9; an old kernel has no family at all, which [`NetdevClient::connect`]
//! reports as `Ok(None)`. Which ops exist comes from the controller's ops list, never from
//! the kernel version.
//!
//! This module holds only what is the netdev family's: its numbers, its typed objects,
//! their parsers and the client. The transport under it (socket, request and reply,
//! family lookup through the controller, attribute framing) is [`super::genl`]'s, shared
//! with the ethtool family.
//!
//! Attribute and command numbers are those of the kernel's `include/uapi/linux/netdev.h`
//! (generated from `Documentation/netlink/specs/netdev.yaml`; read from torvalds/linux at
//! 0137891e74576f77a7901718dc0ce08ca074ae74). They are uapi, so they never change. The
//! NAPI settings `defer-hard-irqs` (u32), `gro-flush-timeout` and `irq-suspend-timeout`
//! (`uint`, ns; 6.13) and `threaded` (u32, enum `napi-threaded`: disabled, enabled; 6.17)
//! were read in `netdev.yaml` at torvalds/linux a5a8844af43448cd2b3bf5f0e588396671192157;
//! the third `threaded` value, busy-poll = 2 (6.19), in the merged series' uapi header
//! (`NETDEV_NAPI_THREADED_BUSY_POLL`). A kernel that does not have an attribute leaves
//! it out of the reply: `None` here, "not on this kernel", never 0.

use netlink_packet_core::Emitable;
use netlink_packet_generic::GenlFamily;
use netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, OpAttrs};

use super::genl::{GenlSocket, U32Attr, attr_u32, attr_uint, for_each_attr, kernel_error, missing};
use crate::error::Error;
use crate::model::inventory::ThreadedMode;
use crate::model::snapshot::QueueDirection;

/// The family's registered name (`NETDEV_FAMILY_NAME`).
pub const FAMILY_NAME: &str = "netdev";
/// `NETDEV_FAMILY_VERSION`.
const FAMILY_VERSION: u8 = 1;

/// `enum { NETDEV_CMD_* }` (netdev.h).
pub(super) mod cmd {
    pub const QUEUE_GET: u8 = 10;
    pub const NAPI_GET: u8 = 11;
    pub const QSTATS_GET: u8 = 12;
    pub const NAPI_SET: u8 = 14;
}

/// `enum { NETDEV_A_QUEUE_* }`.
pub(super) mod queue_attr {
    pub const ID: u16 = 1;
    pub const IFINDEX: u16 = 2;
    pub const TYPE: u16 = 3;
    pub const NAPI_ID: u16 = 4;
}

/// `enum { NETDEV_A_NAPI_* }`.
pub(super) mod napi_attr {
    pub const IFINDEX: u16 = 1;
    pub const ID: u16 = 2;
    pub const IRQ: u16 = 3;
    pub const PID: u16 = 4;
    pub const DEFER_HARD_IRQS: u16 = 5;
    pub const GRO_FLUSH_TIMEOUT: u16 = 6;
    pub const IRQ_SUSPEND_TIMEOUT: u16 = 7;
    pub const THREADED: u16 = 8;
}

/// `enum { NETDEV_A_QSTATS_* }` (5-7 are unused: the numbering skips them on purpose).
pub(super) mod qstats_attr {
    pub const IFINDEX: u16 = 1;
    pub const QUEUE_TYPE: u16 = 2;
    pub const QUEUE_ID: u16 = 3;
    pub const SCOPE: u16 = 4;
    pub const RX_PACKETS: u16 = 8;
    pub const RX_BYTES: u16 = 9;
    pub const TX_PACKETS: u16 = 10;
    pub const TX_BYTES: u16 = 11;
    pub const RX_ALLOC_FAIL: u16 = 12;
    pub const RX_HW_DROPS: u16 = 13;
    pub const RX_HW_DROP_OVERRUNS: u16 = 14;
    pub const RX_HW_DROP_RATELIMITS: u16 = 23;
    pub const TX_HW_DROPS: u16 = 24;
    pub const TX_HW_DROP_ERRORS: u16 = 25;
    pub const TX_HW_DROP_RATELIMITS: u16 = 32;
    pub const TX_STOP: u16 = 33;
    pub const TX_WAKE: u16 = 34;
}

/// `enum netdev_queue_type`.
pub(super) const QUEUE_TYPE_RX: u32 = 0;
pub(super) const QUEUE_TYPE_TX: u32 = 1;
/// `enum netdev_qstats_scope`: `NETDEV_QSTATS_SCOPE_QUEUE`.
pub(super) const QSTATS_SCOPE_QUEUE: u32 = 1;

/// Which of the ops steerd uses the running kernel's family offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetdevOps {
    /// `queue-get` (6.8+).
    pub queue_get: bool,
    /// `napi-get` (6.8+).
    pub napi_get: bool,
    /// `qstats-get` (6.9+).
    pub qstats_get: bool,
}

/// The resolved family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetdevFamily {
    /// The dynamically assigned generic-netlink family id (20 on this project's VMs).
    pub id: u16,
    pub version: u32,
    pub ops: NetdevOps,
}

/// One configured queue of a device (`queue-get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetdevQueue {
    pub ifindex: u32,
    pub direction: QueueDirection,
    pub id: u32,
    /// The NAPI instance polling the queue, if the driver registered one.
    pub napi_id: Option<u32>,
}

/// One NAPI instance (`napi-get`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Napi {
    pub id: u32,
    pub ifindex: u32,
    /// The IRQ that schedules it; `None` when the driver did not say (virtio_net on 6.18).
    pub irq: Option<u32>,
    /// The kthread polling it in threaded mode.
    pub pid: Option<u32>,
    /// `defer-hard-irqs` (6.13+).
    pub defer_hard_irqs: Option<u32>,
    /// `gro-flush-timeout`, ns (6.13+).
    pub gro_flush_timeout: Option<u64>,
    /// `irq-suspend-timeout`, ns (6.13+).
    pub irq_suspend_timeout: Option<u64>,
    /// `threaded`, the raw enum (6.17+; 2 is busy-poll, 6.19+).
    pub threaded: Option<u32>,
}

/// A queue with the IRQ of its NAPI instance, from `queue-get` joined with `napi-get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueIrq {
    pub ifindex: u32,
    pub direction: QueueDirection,
    pub queue: u32,
    pub napi_id: Option<u32>,
    /// `None` when the queue has no NAPI or the driver did not report the NAPI's IRQ.
    pub irq: Option<u32>,
    /// The queue's NAPI instance as `napi-get` reported it (its settings), if it did.
    pub napi: Option<Napi>,
}

/// Per-queue counters from `qstats-get` with `scope=queue`. Every counter is optional: a
/// driver reports only what it counts. Values are cumulative (64-bit in the kernel).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub ifindex: u32,
    pub direction: Option<QueueDirection>,
    pub queue: u32,
    pub rx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub tx_packets: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub rx_alloc_fail: Option<u64>,
    pub rx_hw_drops: Option<u64>,
    pub rx_hw_drop_overruns: Option<u64>,
    pub rx_hw_drop_ratelimits: Option<u64>,
    pub tx_hw_drops: Option<u64>,
    pub tx_hw_drop_errors: Option<u64>,
    pub tx_hw_drop_ratelimits: Option<u64>,
    pub tx_stop: Option<u64>,
    pub tx_wake: Option<u64>,
}

impl Napi {
    /// `threaded` as a mode: `None` where the kernel left it out (before 6.17) or sent a
    /// value this steerd does not know. The one reading of it, for discovery and the
    /// tick's watch alike, so that the two never see a NAPI differently.
    pub fn threaded_mode(&self) -> Option<ThreadedMode> {
        ThreadedMode::from_number(self.threaded?.into())
    }
}

impl QueueStats {
    /// Packets of the queue's own direction.
    pub fn packets(&self) -> Option<u64> {
        match self.direction? {
            QueueDirection::Rx => self.rx_packets,
            QueueDirection::Tx => self.tx_packets,
        }
    }

    /// Bytes of the queue's own direction.
    pub fn bytes(&self) -> Option<u64> {
        match self.direction? {
            QueueDirection::Rx => self.rx_bytes,
            QueueDirection::Tx => self.tx_bytes,
        }
    }
}

/// A blocking netdev-family client. Keep one and reuse it: it owns the socket and the
/// send/receive buffers.
pub struct NetdevClient {
    transport: GenlSocket,
    family: NetdevFamily,
}

impl std::fmt::Debug for NetdevClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetdevClient")
            .field("family", &self.family)
            .field("sequence", &self.transport.sequence())
            .finish_non_exhaustive()
    }
}

impl NetdevClient {
    /// Opens a generic-netlink socket (in the calling thread's network namespace) and
    /// resolves the family. `Ok(None)` when the kernel has no netdev family.
    pub fn connect() -> Result<Option<Self>, Error> {
        let mut transport = GenlSocket::open()?;
        let family =
            transport.resolve_family("nlctrl getfamily netdev", FAMILY_NAME, family_from_ctrl)?;
        Ok(family.map(|family| NetdevClient { transport, family }))
    }

    pub fn family(&self) -> &NetdevFamily {
        &self.family
    }

    /// `queue-get` dump: every configured queue of `ifindex` (or of every device that is
    /// up, when `None`). Devices that are down list no queues.
    pub fn queues(&mut self, ifindex: Option<u32>) -> Result<Vec<NetdevQueue>, Error> {
        let op = self.family.ops.queue_get;
        let filter = ifindex.map(|value| U32Attr::new(queue_attr::IFINDEX, value));
        self.dump("netdev queue-get", op, cmd::QUEUE_GET, filter, parse_queue)
    }

    /// `napi-get` do: one NAPI instance by id.
    pub fn napi(&mut self, id: u32) -> Result<Napi, Error> {
        self.require(self.family.ops.napi_get, "netdev napi-get")?;
        let attrs = [U32Attr::new(napi_attr::ID, id)];
        let mut found = None;
        self.request("netdev napi-get", cmd::NAPI_GET, &attrs, false, |attrs| {
            found = Some(parse_napi(attrs)?);
            Ok(())
        })?;
        found.ok_or_else(|| kernel_error("netdev napi-get", format!("no reply for NAPI id {id}")))
    }

    /// `napi-get` dump: the NAPI instances of `ifindex` (or of every device that is up).
    pub fn napis(&mut self, ifindex: Option<u32>) -> Result<Vec<Napi>, Error> {
        let mut napis = Vec::new();
        self.napis_into(ifindex, &mut napis)?;
        Ok(napis)
    }

    /// [`Self::napis`] into a caller's vector (cleared first), so a tick allocates nothing
    /// once the vector has grown (the tick's per-NAPI threaded watch).
    pub fn napis_into(&mut self, ifindex: Option<u32>, out: &mut Vec<Napi>) -> Result<(), Error> {
        self.require(self.family.ops.napi_get, "netdev napi-get")?;
        out.clear();
        let filter = ifindex.map(|value| U32Attr::new(napi_attr::IFINDEX, value));
        self.request(
            "netdev napi-get",
            cmd::NAPI_GET,
            filter.as_slice(),
            true,
            |attrs| {
                out.push(parse_napi(attrs)?);
                Ok(())
            },
        )
    }

    /// `napi-set` do with `threaded` (6.17; `2`, busy-polling, 6.19): switches one NAPI's
    /// threaded mode, as `ynl --family netdev --do napi-set` does. steerd never changes a
    /// NAPI's mode; the lab makes a busy-polling thread in a guest with it, which
    /// `sys/class/net/DEV/threaded` refuses (`2` there: EOPNOTSUPP on 6.19.14).
    pub fn set_napi_threaded(&mut self, id: u32, mode: u32) -> Result<(), Error> {
        let attrs = [
            U32Attr::new(napi_attr::ID, id),
            U32Attr::new(napi_attr::THREADED, mode),
        ];
        self.request("netdev napi-set", cmd::NAPI_SET, &attrs, false, |_| Ok(()))
    }

    /// A dump of one object per reply, optionally filtered by one attribute (a device's
    /// ifindex); `op_present` says whether the kernel's family has the op at all.
    fn dump<T>(
        &mut self,
        what: &str,
        op_present: bool,
        command: u8,
        filter: Option<U32Attr>,
        parse: fn(&[u8]) -> Result<T, Error>,
    ) -> Result<Vec<T>, Error> {
        self.require(op_present, what)?;
        let attrs: Vec<U32Attr> = filter.into_iter().collect();
        let mut found = Vec::new();
        self.request(what, command, &attrs, true, |attrs| {
            found.push(parse(attrs)?);
            Ok(())
        })?;
        Ok(found)
    }

    /// Queue → IRQ for `ifindex` (or every device that is up): one `queue-get` dump and
    /// one `napi-get` dump, joined on the NAPI id. For discovery, where the kernel's own
    /// answer beats a naming convention.
    pub fn queue_irqs(&mut self, ifindex: Option<u32>) -> Result<Vec<QueueIrq>, Error> {
        let queues = self.queues(ifindex)?;
        let napis = self.napis(ifindex)?;
        Ok(join_queue_irqs(queues, napis))
    }

    /// `qstats-get` dump with `scope=queue`: per-queue counters of `ifindex`, or of every
    /// device whose driver reports them when `None` (one dump for the whole machine).
    pub fn queue_stats(&mut self, ifindex: Option<u32>) -> Result<Vec<QueueStats>, Error> {
        let mut stats = Vec::new();
        self.queue_stats_into(ifindex, &mut stats)?;
        Ok(stats)
    }

    /// [`Self::queue_stats`] into a caller's vector (cleared first), so a tick allocates
    /// nothing once the vector has grown.
    pub fn queue_stats_into(
        &mut self,
        ifindex: Option<u32>,
        out: &mut Vec<QueueStats>,
    ) -> Result<(), Error> {
        self.require(self.family.ops.qstats_get, "netdev qstats-get")?;
        out.clear();
        // No allocation on this per-tick path: the attributes live on the stack.
        let attrs = [
            U32Attr::new(qstats_attr::SCOPE, QSTATS_SCOPE_QUEUE),
            U32Attr::new(qstats_attr::IFINDEX, ifindex.unwrap_or(0)),
        ];
        let attrs = if ifindex.is_some() {
            &attrs[..]
        } else {
            &attrs[..1]
        };
        self.request("netdev qstats-get", cmd::QSTATS_GET, attrs, true, |attrs| {
            out.push(parse_queue_stats(attrs)?);
            Ok(())
        })
    }

    fn require(&self, present: bool, what: &str) -> Result<(), Error> {
        if present {
            Ok(())
        } else {
            Err(kernel_error(
                what,
                "EOPNOTSUPP: this kernel's netdev family has no such op",
            ))
        }
    }

    /// Sends one netdev request and walks its reply; `on_reply` gets each reply's
    /// attributes (after the genl header).
    fn request(
        &mut self,
        what: &str,
        command: u8,
        attrs: &[U32Attr],
        dump: bool,
        on_reply: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let request = NetdevRequest { command, attrs };
        self.transport
            .request(what, self.family.id, request, dump, on_reply)
    }
}

/// Joins queues with their NAPI instances (IRQ and settings) on the NAPI id.
pub(super) fn join_queue_irqs(queues: Vec<NetdevQueue>, mut napis: Vec<Napi>) -> Vec<QueueIrq> {
    napis.sort_unstable_by_key(|napi| napi.id);
    queues
        .into_iter()
        .map(|queue| {
            let napi = queue.napi_id.and_then(|id| {
                napis
                    .binary_search_by_key(&id, |napi| napi.id)
                    .ok()
                    .and_then(|index| napis.get(index))
                    .copied()
            });
            QueueIrq {
                ifindex: queue.ifindex,
                direction: queue.direction,
                queue: queue.id,
                napi_id: queue.napi_id,
                irq: napi.and_then(|napi| napi.irq),
                napi,
            }
        })
        .collect()
}

/// Builds the family description from a `CTRL_CMD_NEWFAMILY` reply.
pub(super) fn family_from_ctrl(nlas: &[GenlCtrlAttrs]) -> Result<NetdevFamily, Error> {
    let mut id = None;
    let mut version = 0;
    let mut ops = NetdevOps::default();
    for nla in nlas {
        match nla {
            GenlCtrlAttrs::FamilyId(value) => id = Some(*value),
            GenlCtrlAttrs::Version(value) => version = *value,
            GenlCtrlAttrs::Ops(list) => {
                for op in list {
                    for attr in op {
                        if let OpAttrs::Id(op_id) = attr {
                            match u8::try_from(*op_id) {
                                Ok(cmd::QUEUE_GET) => ops.queue_get = true,
                                Ok(cmd::NAPI_GET) => ops.napi_get = true,
                                Ok(cmd::QSTATS_GET) => ops.qstats_get = true,
                                _ => {}
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let id = id.ok_or_else(|| {
        kernel_error(
            "nlctrl getfamily netdev",
            "reply has no CTRL_ATTR_FAMILY_ID",
        )
    })?;
    Ok(NetdevFamily { id, version, ops })
}

fn queue_direction(what: &str, value: u32) -> Result<QueueDirection, Error> {
    match value {
        QUEUE_TYPE_RX => Ok(QueueDirection::Rx),
        QUEUE_TYPE_TX => Ok(QueueDirection::Tx),
        other => Err(kernel_error(what, format!("unknown queue type {other}"))),
    }
}

/// A queue number from the kernel, checked against [`crate::limits::MAX_QUEUES`]: it
/// indexes per-queue tables, so one no kernel can have is an error, not a table size.
fn queue_number(what: &str, name: &str, value: u32) -> Result<u32, Error> {
    if value < crate::limits::MAX_QUEUES {
        Ok(value)
    } else {
        Err(kernel_error(
            what,
            format!(
                "attribute {name} is {value}, not below {}, the kernel's queue limit",
                crate::limits::MAX_QUEUES
            ),
        ))
    }
}

/// Parses one `queue-get` reply's attributes.
pub(super) fn parse_queue(attrs: &[u8]) -> Result<NetdevQueue, Error> {
    const WHAT: &str = "netdev queue-get";
    let (mut id, mut ifindex, mut direction, mut napi_id) = (None, None, None, None);
    for_each_attr(WHAT, attrs, |kind, value| {
        match kind {
            queue_attr::ID => id = Some(attr_u32(WHAT, "id", value)?),
            queue_attr::IFINDEX => ifindex = Some(attr_u32(WHAT, "ifindex", value)?),
            queue_attr::TYPE => {
                direction = Some(queue_direction(WHAT, attr_u32(WHAT, "type", value)?)?)
            }
            queue_attr::NAPI_ID => napi_id = Some(attr_u32(WHAT, "napi-id", value)?),
            _ => {}
        }
        Ok(())
    })?;
    Ok(NetdevQueue {
        id: queue_number(WHAT, "id", id.ok_or_else(|| missing(WHAT, "id"))?)?,
        ifindex: ifindex.ok_or_else(|| missing(WHAT, "ifindex"))?,
        direction: direction.ok_or_else(|| missing(WHAT, "type"))?,
        napi_id,
    })
}

/// Parses one `napi-get` reply's attributes.
pub(super) fn parse_napi(attrs: &[u8]) -> Result<Napi, Error> {
    const WHAT: &str = "netdev napi-get";
    let (mut id, mut ifindex, mut irq, mut pid) = (None, None, None, None);
    let (mut defer_hard_irqs, mut gro_flush_timeout) = (None, None);
    let (mut irq_suspend_timeout, mut threaded) = (None, None);
    for_each_attr(WHAT, attrs, |kind, value| {
        match kind {
            napi_attr::ID => id = Some(attr_u32(WHAT, "id", value)?),
            napi_attr::IFINDEX => ifindex = Some(attr_u32(WHAT, "ifindex", value)?),
            napi_attr::IRQ => irq = Some(attr_u32(WHAT, "irq", value)?),
            napi_attr::PID => pid = Some(attr_u32(WHAT, "pid", value)?),
            napi_attr::DEFER_HARD_IRQS => {
                defer_hard_irqs = Some(attr_u32(WHAT, "defer-hard-irqs", value)?)
            }
            napi_attr::GRO_FLUSH_TIMEOUT => {
                gro_flush_timeout = Some(attr_uint(WHAT, "gro-flush-timeout", value)?)
            }
            napi_attr::IRQ_SUSPEND_TIMEOUT => {
                irq_suspend_timeout = Some(attr_uint(WHAT, "irq-suspend-timeout", value)?)
            }
            napi_attr::THREADED => threaded = Some(attr_u32(WHAT, "threaded", value)?),
            _ => {}
        }
        Ok(())
    })?;
    if let Some(irq) = irq.filter(|&irq| irq >= crate::limits::MAX_IRQS) {
        return Err(kernel_error(
            WHAT,
            format!(
                "attribute irq is {irq}, not below {}, the most steerd accepts",
                crate::limits::MAX_IRQS
            ),
        ));
    }
    Ok(Napi {
        id: id.ok_or_else(|| missing(WHAT, "id"))?,
        ifindex: ifindex.ok_or_else(|| missing(WHAT, "ifindex"))?,
        irq,
        pid,
        defer_hard_irqs,
        gro_flush_timeout,
        irq_suspend_timeout,
        threaded,
    })
}

/// Parses one `qstats-get` reply's attributes. Unknown attributes (counters added by
/// later kernels) are skipped.
pub(super) fn parse_queue_stats(attrs: &[u8]) -> Result<QueueStats, Error> {
    const WHAT: &str = "netdev qstats-get";
    let mut stats = QueueStats::default();
    let (mut ifindex, mut queue) = (None, None);
    for_each_attr(WHAT, attrs, |kind, value| {
        use qstats_attr::*;
        let slot = match kind {
            IFINDEX => {
                ifindex = Some(attr_u32(WHAT, "ifindex", value)?);
                return Ok(());
            }
            QUEUE_TYPE => {
                let direction = queue_direction(WHAT, attr_u32(WHAT, "queue-type", value)?)?;
                stats.direction = Some(direction);
                return Ok(());
            }
            QUEUE_ID => {
                queue = Some(attr_u32(WHAT, "queue-id", value)?);
                return Ok(());
            }
            RX_PACKETS => (&mut stats.rx_packets, "rx-packets"),
            RX_BYTES => (&mut stats.rx_bytes, "rx-bytes"),
            TX_PACKETS => (&mut stats.tx_packets, "tx-packets"),
            TX_BYTES => (&mut stats.tx_bytes, "tx-bytes"),
            RX_ALLOC_FAIL => (&mut stats.rx_alloc_fail, "rx-alloc-fail"),
            RX_HW_DROPS => (&mut stats.rx_hw_drops, "rx-hw-drops"),
            RX_HW_DROP_OVERRUNS => (&mut stats.rx_hw_drop_overruns, "rx-hw-drop-overruns"),
            RX_HW_DROP_RATELIMITS => (&mut stats.rx_hw_drop_ratelimits, "rx-hw-drop-ratelimits"),
            TX_HW_DROPS => (&mut stats.tx_hw_drops, "tx-hw-drops"),
            TX_HW_DROP_ERRORS => (&mut stats.tx_hw_drop_errors, "tx-hw-drop-errors"),
            TX_HW_DROP_RATELIMITS => (&mut stats.tx_hw_drop_ratelimits, "tx-hw-drop-ratelimits"),
            TX_STOP => (&mut stats.tx_stop, "tx-stop"),
            TX_WAKE => (&mut stats.tx_wake, "tx-wake"),
            _ => return Ok(()),
        };
        *slot.0 = Some(attr_uint(WHAT, slot.1, value)?);
        Ok(())
    })?;
    stats.ifindex = ifindex.ok_or_else(|| missing(WHAT, "ifindex"))?;
    stats.queue = queue_number(
        WHAT,
        "queue-id",
        queue.ok_or_else(|| missing(WHAT, "queue-id"))?,
    )?;
    if stats.direction.is_none() {
        return Err(missing(WHAT, "queue-type"));
    }
    Ok(stats)
}

#[derive(Debug)]
pub(super) struct NetdevRequest<'a> {
    pub(super) command: u8,
    pub(super) attrs: &'a [U32Attr],
}

impl GenlFamily for NetdevRequest<'_> {
    fn family_name() -> &'static str {
        FAMILY_NAME
    }

    fn command(&self) -> u8 {
        self.command
    }

    fn version(&self) -> u8 {
        FAMILY_VERSION
    }
}

impl Emitable for NetdevRequest<'_> {
    fn buffer_len(&self) -> usize {
        self.attrs.buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        self.attrs.emit(buffer)
    }
}
