//! A small typed client for the generic-netlink family `"netdev"`: which queues a device
//! has, which NAPI instance (and so which IRQ) serves each, and per-queue packet counters.
//!
//! No crate covers this family (rtnetlink and netlink-packet-route stop at rtnetlink, and
//! the ethtool family carries no per-queue driver counters), so the requests and replies
//! are written here on top of netlink-packet-core (framing, attributes), netlink-packet-generic
//! (the `genlmsghdr` and the controller used to resolve the family) and netlink-sys (the
//! socket). Replies are walked in place, without a heap allocation per message, because
//! `qstats-get` runs on every daemon tick.
//!
//! Gating: the family itself appeared in 6.2 (`dev-get`), `queue-get`/`napi-get` in 6.8 and
//! `qstats-get` in 6.9; an old kernel has no family at all, which [`NetdevClient::connect`]
//! reports as `Ok(None)`. Which ops exist comes from the controller's ops list, never from
//! the kernel version.
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

use std::os::fd::AsFd;
use std::time::Duration;

use netlink_packet_core::{
    DoneBuffer, Emitable, ErrorBuffer, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE,
    NLMSG_ERROR, NLMSG_NOOP, NLMSG_OVERRUN, NetlinkBuffer, NetlinkHeader, NetlinkMessage,
    NetlinkPayload, Nla, NlaBuffer, NlasIterator, ParseableParametrized, emit_u32,
};
use netlink_packet_generic::constants::GENL_HDRLEN;
use netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, OpAttrs};
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_GENERIC};

use crate::error::Error;
use crate::model::snapshot::QueueDirection;

/// The family's registered name (`NETDEV_FAMILY_NAME`).
pub const FAMILY_NAME: &str = "netdev";
/// `NETDEV_FAMILY_VERSION`.
const FAMILY_VERSION: u8 = 1;

/// `enum { NETDEV_CMD_* }` (netdev.h).
mod cmd {
    pub const QUEUE_GET: u8 = 10;
    pub const NAPI_GET: u8 = 11;
    pub const QSTATS_GET: u8 = 12;
}

/// `enum { NETDEV_A_QUEUE_* }`.
mod queue_attr {
    pub const ID: u16 = 1;
    pub const IFINDEX: u16 = 2;
    pub const TYPE: u16 = 3;
    pub const NAPI_ID: u16 = 4;
}

/// `enum { NETDEV_A_NAPI_* }`.
mod napi_attr {
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
mod qstats_attr {
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
const QUEUE_TYPE_RX: u32 = 0;
const QUEUE_TYPE_TX: u32 = 1;
/// `enum netdev_qstats_scope`: `NETDEV_QSTATS_SCOPE_QUEUE`.
const QSTATS_SCOPE_QUEUE: u32 = 1;

/// How long a reply may take before the request fails (the daemon must never hang on it).
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// Receive buffer: the kernel's dump skbs are at most 32 KiB; twice that leaves room.
pub(crate) const RECV_BUFFER_LEN: usize = 64 * 1024;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HEADER_LEN: usize = 16;

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
    socket: Socket,
    family: NetdevFamily,
    sequence: u32,
    send_buffer: Vec<u8>,
    recv_buffer: Vec<u8>,
}

impl std::fmt::Debug for NetdevClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetdevClient")
            .field("family", &self.family)
            .field("sequence", &self.sequence)
            .finish_non_exhaustive()
    }
}

impl NetdevClient {
    /// Opens a generic-netlink socket (in the calling thread's network namespace) and
    /// resolves the family. `Ok(None)` when the kernel has no netdev family.
    pub fn connect() -> Result<Option<Self>, Error> {
        let socket = open_socket()?;
        let mut client = NetdevClient {
            socket,
            family: NetdevFamily {
                id: 0,
                version: 0,
                ops: NetdevOps::default(),
            },
            sequence: 0,
            send_buffer: Vec::with_capacity(64),
            recv_buffer: Vec::with_capacity(RECV_BUFFER_LEN),
        };
        match client.resolve_family()? {
            Some(family) => {
                client.family = family;
                Ok(Some(client))
            }
            None => Ok(None),
        }
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
        let op = self.family.ops.napi_get;
        let filter = ifindex.map(|value| U32Attr::new(napi_attr::IFINDEX, value));
        self.dump("netdev napi-get", op, cmd::NAPI_GET, filter, parse_napi)
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

    fn next_sequence(&mut self) -> u32 {
        self.sequence = self.sequence.wrapping_add(1);
        if self.sequence == 0 {
            self.sequence = 1;
        }
        self.sequence
    }

    /// `CTRL_CMD_GETFAMILY` for [`FAMILY_NAME`], through netlink-packet-generic's ctrl types.
    /// `None` when the controller answers ENOENT (no such family: a kernel before 6.2).
    fn resolve_family(&mut self) -> Result<Option<NetdevFamily>, Error> {
        const WHAT: &str = "nlctrl getfamily netdev";
        let sequence = self.next_sequence();
        self.send_buffer = getfamily_request(FAMILY_NAME, sequence);
        self.send(WHAT)?;

        let mut family = None;
        let control_id = netlink_packet_generic::constants::GENL_ID_CTRL;
        let outcome = self.receive(WHAT, sequence, control_id, |message_type, genl_payload| {
            let parsed = GenlMessage::<GenlCtrl>::parse_with_param(genl_payload, message_type)
                .map_err(|e| kernel_error(WHAT, format!("malformed reply: {e}")))?;
            family = Some(family_from_ctrl(&parsed.payload.nlas)?);
            Ok(())
        })?;
        match outcome {
            Ok(()) => family
                .map(Some)
                .ok_or_else(|| kernel_error(WHAT, "no family in the reply")),
            Err(code) if code == -(nix::errno::Errno::ENOENT as i32) => Ok(None),
            Err(code) => Err(errno_error(WHAT, code)),
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
        mut on_reply: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let sequence = self.next_sequence();
        let mut genl = GenlMessage::from_payload(NetdevRequest { command, attrs });
        genl.set_resolved_family_id(self.family.id);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { NLM_F_ACK };
        header.sequence_number = sequence;
        let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(genl));
        message.finalize();
        self.send_buffer.clear();
        self.send_buffer.resize(message.buffer_len(), 0);
        message.serialize(&mut self.send_buffer);
        self.send(what)?;
        let family_id = self.family.id;
        self.receive(what, sequence, family_id, |_, genl_payload| {
            let attrs = genl_payload.get(GENL_HDRLEN..).ok_or_else(|| {
                kernel_error(what, "malformed reply: shorter than the genl header")
            })?;
            on_reply(attrs)
        })?
        .map_err(|code| errno_error(what, code))
    }

    fn send(&mut self, what: &str) -> Result<(), Error> {
        send_request(&self.socket, what, &self.send_buffer)
    }

    /// Receives datagrams until the reply to `sequence` is complete. The inner `Err` is
    /// the kernel's (negative) errno for the request.
    fn receive(
        &mut self,
        what: &str,
        sequence: u32,
        family_id: u16,
        mut on_message: impl FnMut(u16, &[u8]) -> Result<(), Error>,
    ) -> Result<Result<(), i32>, Error> {
        receive_reply(
            &self.socket,
            &mut self.recv_buffer,
            what,
            sequence,
            family_id,
            &mut on_message,
        )
    }
}

/// Sends one whole request on a generic-netlink socket (a short send is an error). Shared
/// by every request steerd makes: the netdev client's, and the ethtool family's
/// (`kernel::rss::netlink`: its lookup and `RSS_GET`).
pub(crate) fn send_request(socket: &Socket, what: &str, request: &[u8]) -> Result<(), Error> {
    let sent = socket
        .send(request, 0)
        .map_err(|e| io_error(what, "send", &e))?;
    if sent != request.len() {
        return Err(kernel_error(
            what,
            format!("short send: {sent} of {} bytes", request.len()),
        ));
    }
    Ok(())
}

/// Receives datagrams into `buffer` until the reply to `sequence` is complete, walking
/// each with [`parse_datagram`]; a datagram larger than the buffer's capacity is an error,
/// not a silent truncation. The inner `Err` is the kernel's (negative) errno for the
/// request. Shared, like [`send_request`], by the netdev client and the ethtool family.
pub(crate) fn receive_reply(
    socket: &Socket,
    buffer: &mut Vec<u8>,
    what: &str,
    sequence: u32,
    family_id: u16,
    on_message: &mut impl FnMut(u16, &[u8]) -> Result<(), Error>,
) -> Result<Result<(), i32>, Error> {
    loop {
        buffer.clear();
        let received = socket
            .recv(buffer, nix::libc::MSG_TRUNC)
            .map_err(|e| io_error(what, "recv", &e))?;
        if received > buffer.len() {
            return Err(kernel_error(
                what,
                format!(
                    "reply datagram of {received} bytes exceeds the {}-byte buffer",
                    buffer.len()
                ),
            ));
        }
        match parse_datagram(what, buffer, sequence, family_id, on_message)? {
            Progress::Finished => return Ok(Ok(())),
            Progress::Failed(code) => return Ok(Err(code)),
            Progress::More => continue,
        }
    }
}

pub(crate) fn open_socket() -> Result<Socket, Error> {
    const WHAT: &str = "netlink generic socket";
    let mut socket = Socket::new(NETLINK_GENERIC).map_err(|e| io_error(WHAT, "socket", &e))?;
    socket.bind_auto().map_err(|e| io_error(WHAT, "bind", &e))?;
    socket
        .connect(&SocketAddr::new(0, 0))
        .map_err(|e| io_error(WHAT, "connect", &e))?;
    // Errors with a reason string (extended ACK) are nicer but optional.
    let _ = socket.set_ext_ack(true);
    let timeout = nix::sys::time::TimeVal::new(
        REPLY_TIMEOUT.as_secs() as nix::libc::time_t,
        REPLY_TIMEOUT.subsec_micros() as nix::libc::suseconds_t,
    );
    nix::sys::socket::setsockopt(
        &socket.as_fd(),
        nix::sys::socket::sockopt::ReceiveTimeout,
        &timeout,
    )
    .map_err(|e| kernel_error(WHAT, format!("setsockopt SO_RCVTIMEO: {e}")))?;
    Ok(socket)
}

/// A controller `CTRL_CMD_GETFAMILY` request for the family `name`, serialized: how a
/// generic-netlink family's id, ops and multicast groups are learnt (netdev here, ethtool in
/// `kernel::rss` and `kernel::ethtool_events`).
pub(crate) fn getfamily_request(name: &str, sequence: u32) -> Vec<u8> {
    let mut genl = GenlMessage::from_payload(GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName(name.to_owned())],
    });
    genl.finalize();
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_ACK;
    header.sequence_number = sequence;
    let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(genl));
    message.finalize();
    let mut request = vec![0; message.buffer_len()];
    message.serialize(&mut request);
    request
}

/// Where a reply stands after one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// The reply goes on in further datagrams (multipart dump).
    More,
    /// `NLMSG_DONE`, or the ACK of a non-dump request, was seen.
    Finished,
    /// The kernel refused the request: `NLMSG_ERROR` with this (negative) errno, or a
    /// `NLMSG_DONE` carrying one (a dump that failed midway).
    Failed(i32),
}

/// Walks the netlink messages of one received datagram.
///
/// Messages with another sequence number (a late reply to an earlier, timed-out request)
/// are skipped. `NLMSG_ERROR` with a non-zero code and `NLMSG_DONE` with a negative code
/// give [`Progress::Failed`]; malformed framing is an [`Error::Kernel`] naming `what`.
/// `on_message` gets each message of type `family_id` as `(type, payload starting at the
/// genl header)`.
pub(crate) fn parse_datagram(
    what: &str,
    datagram: &[u8],
    sequence: u32,
    family_id: u16,
    on_message: &mut impl FnMut(u16, &[u8]) -> Result<(), Error>,
) -> Result<Progress, Error> {
    let mut offset = 0;
    let mut progress = Progress::More;
    while offset < datagram.len() {
        let rest = datagram.get(offset..).unwrap_or_default();
        let message = NetlinkBuffer::new_checked(rest)
            .map_err(|e| kernel_error(what, format!("malformed reply at byte {offset}: {e}")))?;
        let length = message.length() as usize;
        offset += align4(length);
        if message.sequence_number() != sequence {
            continue;
        }
        let payload = rest.get(NLMSG_HEADER_LEN..length).unwrap_or_default();
        match message.message_type() {
            NLMSG_NOOP => {}
            NLMSG_ERROR => {
                let error = ErrorBuffer::new_checked(payload)
                    .map_err(|e| kernel_error(what, format!("malformed NLMSG_ERROR: {e}")))?;
                match error.code() {
                    None => progress = Progress::Finished,
                    Some(code) => return Ok(Progress::Failed(code.get())),
                }
            }
            NLMSG_DONE => {
                // The kernel may put a (negative) errno in DONE when a dump fails midway;
                // a zero-length DONE payload is allowed too.
                if payload.len() >= 4 {
                    let done = DoneBuffer::new_checked(payload)
                        .map_err(|e| kernel_error(what, format!("malformed NLMSG_DONE: {e}")))?;
                    if done.code() < 0 {
                        return Ok(Progress::Failed(done.code()));
                    }
                }
                progress = Progress::Finished;
            }
            NLMSG_OVERRUN => return Err(kernel_error(what, "NLMSG_OVERRUN: data lost")),
            message_type if message_type == family_id => {
                on_message(message_type, payload)?;
            }
            other => {
                return Err(kernel_error(
                    what,
                    format!("unexpected netlink message type {other}"),
                ));
            }
        }
    }
    Ok(progress)
}

/// Joins queues with their NAPI instances (IRQ and settings) on the NAPI id.
fn join_queue_irqs(queues: Vec<NetdevQueue>, mut napis: Vec<Napi>) -> Vec<QueueIrq> {
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

/// A netlink length rounded up to the 4-byte alignment of messages and attributes
/// (`NLMSG_ALIGN`, `NLA_ALIGN`).
pub(crate) fn align4(length: usize) -> usize {
    (length + 3) & !3
}

/// Builds the family description from a `CTRL_CMD_NEWFAMILY` reply.
fn family_from_ctrl(nlas: &[GenlCtrlAttrs]) -> Result<NetdevFamily, Error> {
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

/// Iterates over a message's attributes as `(kind, value)`; a truncated or malformed
/// attribute is an error naming `what`.
fn for_each_attr(
    what: &str,
    attrs: &[u8],
    mut f: impl FnMut(u16, &[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    for nla in NlasIterator::new(attrs) {
        let nla: NlaBuffer<&[u8]> =
            nla.map_err(|e| kernel_error(what, format!("malformed attribute: {e}")))?;
        f(nla.kind(), nla.value())?;
    }
    Ok(())
}

fn attr_u32(what: &str, name: &str, value: &[u8]) -> Result<u32, Error> {
    let bytes: [u8; 4] = value.try_into().map_err(|_| {
        kernel_error(
            what,
            format!("attribute {name} has {} bytes, expected 4", value.len()),
        )
    })?;
    Ok(u32::from_ne_bytes(bytes))
}

/// An `NLA_UINT`: 4 bytes when the value fits, else 8.
fn attr_uint(what: &str, name: &str, value: &[u8]) -> Result<u64, Error> {
    match value.len() {
        4 => attr_u32(what, name, value).map(u64::from),
        8 => {
            let bytes: [u8; 8] = value
                .try_into()
                .map_err(|_| kernel_error(what, format!("attribute {name}: bad length")))?;
            Ok(u64::from_ne_bytes(bytes))
        }
        other => Err(kernel_error(
            what,
            format!("attribute {name} has {other} bytes, expected 4 or 8"),
        )),
    }
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
fn parse_queue(attrs: &[u8]) -> Result<NetdevQueue, Error> {
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
fn parse_napi(attrs: &[u8]) -> Result<Napi, Error> {
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
fn parse_queue_stats(attrs: &[u8]) -> Result<QueueStats, Error> {
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

fn missing(what: &str, attribute: &str) -> Error {
    kernel_error(what, format!("reply lacks the {attribute} attribute"))
}

fn kernel_error(what: &str, reason: impl Into<String>) -> Error {
    Error::Kernel {
        what: what.to_owned(),
        reason: reason.into(),
    }
}

/// An error carrying a kernel errno (netlink codes are negative errnos).
fn errno_error(what: &str, code: i32) -> Error {
    let errno = nix::errno::Errno::from_raw(code.saturating_abs());
    kernel_error(what, format!("{errno}"))
}

fn io_error(what: &str, call: &str, error: &std::io::Error) -> Error {
    match error.raw_os_error() {
        Some(code) => kernel_error(
            what,
            format!("{call}: {}", nix::errno::Errno::from_raw(code)),
        ),
        None => kernel_error(what, format!("{call}: {error}")),
    }
}

/// A `u32` request attribute.
#[derive(Debug, Clone, Copy)]
struct U32Attr {
    kind: u16,
    value: u32,
}

impl U32Attr {
    fn new(kind: u16, value: u32) -> Self {
        U32Attr { kind, value }
    }
}

impl Nla for U32Attr {
    fn value_len(&self) -> usize {
        4
    }

    fn kind(&self) -> u16 {
        self.kind
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        // The buffer is sized by value_len(); emit_u32 only fails on a shorter one.
        let _ = emit_u32(buffer, self.value);
    }
}

/// A netdev-family request: a command and its `u32` attributes.
#[derive(Debug)]
struct NetdevRequest<'a> {
    command: u8,
    attrs: &'a [U32Attr],
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

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds netlink messages by hand, the way the kernel lays them out.
    pub(super) struct MessageBuilder {
        pub(super) bytes: Vec<u8>,
    }

    impl MessageBuilder {
        pub(super) fn new() -> Self {
            MessageBuilder { bytes: Vec::new() }
        }

        /// Appends one message; `body` is everything after the 16-byte nlmsghdr (its
        /// length saturates, for the fuzzer).
        pub(super) fn message(
            &mut self,
            message_type: u16,
            flags: u16,
            sequence: u32,
            body: &[u8],
        ) {
            let length = u32::try_from(16 + body.len()).unwrap_or(u32::MAX);
            self.bytes.extend_from_slice(&length.to_ne_bytes());
            self.bytes.extend_from_slice(&message_type.to_ne_bytes());
            self.bytes.extend_from_slice(&flags.to_ne_bytes());
            self.bytes.extend_from_slice(&sequence.to_ne_bytes());
            self.bytes.extend_from_slice(&4242u32.to_ne_bytes());
            self.bytes.extend_from_slice(body);
            while !self.bytes.len().is_multiple_of(4) {
                self.bytes.push(0);
            }
        }
    }

    /// One netlink attribute, padded to 4 bytes (its length saturates, for the fuzzer).
    pub(super) fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let length = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&length.to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        out
    }

    /// A generic netlink body: the genl header, then `attrs`.
    pub(super) fn genl(command: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![command, 1, 0, 0];
        for a in attrs {
            out.extend_from_slice(a);
        }
        out
    }

    const FAMILY: u16 = 20;
    const MULTI: u16 = netlink_packet_core::NLM_F_MULTIPART;

    fn qstats_message(queue_type: u32, queue: u32, values: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut attrs = vec![
            attr(qstats_attr::IFINDEX, &2u32.to_ne_bytes()),
            attr(qstats_attr::QUEUE_TYPE, &queue_type.to_ne_bytes()),
            attr(qstats_attr::QUEUE_ID, &queue.to_ne_bytes()),
        ];
        for (kind, value) in values {
            attrs.push(attr(*kind, value));
        }
        genl(cmd::QSTATS_GET, &attrs)
    }

    fn collect_stats(datagrams: &[Vec<u8>], sequence: u32) -> Result<Vec<QueueStats>, Error> {
        let mut out = Vec::new();
        for datagram in datagrams {
            let progress = parse_datagram(
                "netdev qstats-get",
                datagram,
                sequence,
                FAMILY,
                &mut |_, payload: &[u8]| {
                    out.push(parse_queue_stats(&payload[GENL_HDRLEN..])?);
                    Ok(())
                },
            )?;
            match progress {
                Progress::Finished => return Ok(out),
                Progress::Failed(code) => return Err(errno_error("netdev qstats-get", code)),
                Progress::More => {}
            }
        }
        panic!("the reply never finished");
    }

    #[test]
    fn qstats_values_of_four_and_eight_bytes() {
        let mut m = MessageBuilder::new();
        let big = 5_000_000_000u64;
        m.message(
            FAMILY,
            MULTI,
            7,
            &qstats_message(
                QUEUE_TYPE_RX,
                0,
                &[
                    (qstats_attr::RX_PACKETS, 1234u32.to_ne_bytes().to_vec()),
                    (qstats_attr::RX_BYTES, big.to_ne_bytes().to_vec()),
                    (qstats_attr::RX_HW_DROPS, 3u64.to_ne_bytes().to_vec()),
                ],
            ),
        );
        m.message(NLMSG_DONE, MULTI, 7, &0i32.to_ne_bytes());
        let stats = collect_stats(&[m.bytes], 7).unwrap();
        assert_eq!(stats.len(), 1);
        let s = stats[0];
        assert_eq!(s.ifindex, 2);
        assert_eq!(s.direction, Some(QueueDirection::Rx));
        assert_eq!(s.queue, 0);
        assert_eq!(s.packets(), Some(1234));
        assert_eq!(s.bytes(), Some(big));
        assert_eq!(s.rx_hw_drops, Some(3));
        assert_eq!(s.tx_packets, None);
    }

    #[test]
    fn qstats_unknown_attributes_are_skipped() {
        let mut m = MessageBuilder::new();
        m.message(
            FAMILY,
            MULTI,
            1,
            &qstats_message(
                QUEUE_TYPE_TX,
                3,
                &[
                    (99, vec![1, 2, 3]),
                    (qstats_attr::TX_PACKETS, 10u64.to_ne_bytes().to_vec()),
                    (qstats_attr::TX_STOP, 1u32.to_ne_bytes().to_vec()),
                    (qstats_attr::TX_WAKE, 1u32.to_ne_bytes().to_vec()),
                ],
            ),
        );
        m.message(NLMSG_DONE, MULTI, 1, &[]);
        let stats = collect_stats(&[m.bytes], 1).unwrap();
        assert_eq!(stats[0].direction, Some(QueueDirection::Tx));
        assert_eq!(stats[0].queue, 3);
        assert_eq!(stats[0].packets(), Some(10));
        assert_eq!(stats[0].tx_stop, Some(1));
    }

    #[test]
    fn qstats_value_of_other_length_is_an_error() {
        let mut m = MessageBuilder::new();
        m.message(
            FAMILY,
            MULTI,
            1,
            &qstats_message(QUEUE_TYPE_RX, 0, &[(qstats_attr::RX_PACKETS, vec![1, 2])]),
        );
        let error = collect_stats(&[m.bytes], 1).unwrap_err().to_string();
        assert!(error.contains("rx-packets has 2 bytes"), "{error}");
        assert!(error.starts_with("netdev qstats-get"), "{error}");
    }

    #[test]
    fn truncated_attribute_is_an_error_not_a_panic() {
        // The attribute claims 12 bytes but the message ends after 6.
        let mut body = genl(
            cmd::QSTATS_GET,
            &[attr(qstats_attr::IFINDEX, &1u32.to_ne_bytes())],
        );
        body.extend_from_slice(&12u16.to_ne_bytes());
        body.extend_from_slice(&qstats_attr::RX_PACKETS.to_ne_bytes());
        body.extend_from_slice(&[1, 2]);
        let mut m = MessageBuilder::new();
        m.message(FAMILY, MULTI, 1, &body);
        let error = collect_stats(&[m.bytes], 1).unwrap_err().to_string();
        assert!(error.contains("malformed attribute"), "{error}");
    }

    #[test]
    fn every_truncation_of_a_reply_is_an_error_or_short_not_a_panic() {
        let mut m = MessageBuilder::new();
        m.message(
            FAMILY,
            MULTI,
            1,
            &qstats_message(
                QUEUE_TYPE_RX,
                1,
                &[(qstats_attr::RX_PACKETS, 5u64.to_ne_bytes().to_vec())],
            ),
        );
        let first_message = m.bytes.len();
        m.message(NLMSG_DONE, MULTI, 1, &0i32.to_ne_bytes());
        for cut in 0..m.bytes.len() {
            let result = parse_datagram("t", &m.bytes[..cut], 1, FAMILY, &mut |_, p: &[u8]| {
                parse_queue_stats(p.get(GENL_HDRLEN..).unwrap_or_default()).map(|_| ())
            });
            if cut == 0 || cut == first_message {
                assert_eq!(result.unwrap(), Progress::More, "cut at {cut}");
            } else {
                assert!(result.is_err(), "cut at {cut}: {result:?}");
            }
        }
    }

    #[test]
    fn truncated_message_header_is_an_error() {
        let mut m = MessageBuilder::new();
        m.message(FAMILY, MULTI, 1, &qstats_message(QUEUE_TYPE_RX, 0, &[]));
        let cut = &m.bytes[..m.bytes.len() - 4];
        let error = parse_datagram("netdev qstats-get", cut, 1, FAMILY, &mut |_, _: &[u8]| {
            Ok(())
        })
        .unwrap_err()
        .to_string();
        assert!(error.contains("malformed reply"), "{error}");
    }

    #[test]
    fn multipart_dump_over_several_datagrams_ends_at_done() {
        let mut first = MessageBuilder::new();
        for queue in 0..3 {
            first.message(
                FAMILY,
                MULTI,
                9,
                &qstats_message(
                    QUEUE_TYPE_RX,
                    queue,
                    &[(
                        qstats_attr::RX_PACKETS,
                        u64::from(queue).to_ne_bytes().to_vec(),
                    )],
                ),
            );
        }
        let mut second = MessageBuilder::new();
        second.message(
            FAMILY,
            MULTI,
            9,
            &qstats_message(
                QUEUE_TYPE_TX,
                0,
                &[(qstats_attr::TX_PACKETS, 77u32.to_ne_bytes().to_vec())],
            ),
        );
        second.message(NLMSG_DONE, MULTI, 9, &0i32.to_ne_bytes());
        let stats = collect_stats(&[first.bytes, second.bytes], 9).unwrap();
        assert_eq!(stats.len(), 4);
        assert_eq!(stats[2].packets(), Some(2));
        assert_eq!(stats[3].packets(), Some(77));
    }

    #[test]
    fn stale_sequence_numbers_are_skipped() {
        let mut m = MessageBuilder::new();
        m.message(
            FAMILY,
            MULTI,
            4,
            &qstats_message(QUEUE_TYPE_RX, 0, &[(qstats_attr::RX_PACKETS, vec![0; 8])]),
        );
        m.message(NLMSG_DONE, MULTI, 4, &0i32.to_ne_bytes());
        m.message(
            FAMILY,
            MULTI,
            5,
            &qstats_message(QUEUE_TYPE_RX, 1, &[(qstats_attr::RX_PACKETS, vec![0; 8])]),
        );
        m.message(NLMSG_DONE, MULTI, 5, &0i32.to_ne_bytes());
        let stats = collect_stats(&[m.bytes], 5).unwrap();
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].queue, 1);
    }

    #[test]
    fn nlmsg_error_names_the_op_and_errno() {
        let mut body = (-95i32).to_ne_bytes().to_vec(); // EOPNOTSUPP
        body.extend_from_slice(&[0; 16]); // the offending request's header
        let mut m = MessageBuilder::new();
        m.message(NLMSG_ERROR, 0, 3, &body);
        let error = collect_stats(&[m.bytes], 3).unwrap_err();
        assert_eq!(
            error.to_string(),
            "netdev qstats-get: EOPNOTSUPP: Operation not supported on transport endpoint"
        );
    }

    #[test]
    fn done_with_negative_code_is_an_error() {
        let mut m = MessageBuilder::new();
        m.message(NLMSG_DONE, MULTI, 3, &(-19i32).to_ne_bytes()); // ENODEV
        let error = collect_stats(&[m.bytes], 3).unwrap_err().to_string();
        assert!(error.contains("ENODEV"), "{error}");
    }

    #[test]
    fn ack_finishes_a_do_request() {
        let mut m = MessageBuilder::new();
        m.message(
            FAMILY,
            0,
            2,
            &genl(
                cmd::NAPI_GET,
                &[
                    attr(napi_attr::ID, &8193u32.to_ne_bytes()),
                    attr(napi_attr::IFINDEX, &2u32.to_ne_bytes()),
                    attr(napi_attr::IRQ, &27u32.to_ne_bytes()),
                    attr(17, &0u64.to_ne_bytes()),
                ],
            ),
        );
        let mut ack = 0i32.to_ne_bytes().to_vec();
        ack.extend_from_slice(&[0; 16]);
        m.message(NLMSG_ERROR, 0, 2, &ack);
        let mut napis = Vec::new();
        let progress = parse_datagram(
            "netdev napi-get",
            &m.bytes,
            2,
            FAMILY,
            &mut |_, p: &[u8]| {
                napis.push(parse_napi(&p[GENL_HDRLEN..])?);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(progress, Progress::Finished);
        assert_eq!(
            napis,
            vec![Napi {
                id: 8193,
                ifindex: 2,
                irq: Some(27),
                pid: None,
                ..Napi::default()
            }]
        );
    }

    #[test]
    fn napi_settings_are_parsed_when_the_kernel_has_them() {
        // A 6.19 reply: gro-flush-timeout as an 8-byte uint, irq-suspend-timeout as a
        // 4-byte one (NLA_UINT is 4 bytes when the value fits), threaded = busy-poll.
        let napi = parse_napi(
            &genl(
                cmd::NAPI_GET,
                &[
                    attr(napi_attr::ID, &8193u32.to_ne_bytes()),
                    attr(napi_attr::IFINDEX, &2u32.to_ne_bytes()),
                    attr(napi_attr::PID, &812u32.to_ne_bytes()),
                    attr(napi_attr::DEFER_HARD_IRQS, &2u32.to_ne_bytes()),
                    attr(napi_attr::GRO_FLUSH_TIMEOUT, &200_000u64.to_ne_bytes()),
                    attr(napi_attr::IRQ_SUSPEND_TIMEOUT, &20_000_000u32.to_ne_bytes()),
                    attr(napi_attr::THREADED, &2u32.to_ne_bytes()),
                ],
            )[GENL_HDRLEN..],
        )
        .unwrap();
        assert_eq!(napi.defer_hard_irqs, Some(2));
        assert_eq!(napi.gro_flush_timeout, Some(200_000));
        assert_eq!(napi.irq_suspend_timeout, Some(20_000_000));
        assert_eq!(napi.threaded, Some(2));
        assert_eq!(napi.pid, Some(812));
        // A 6.12 reply has none of them: absent, not 0.
        let old = parse_napi(
            &genl(
                cmd::NAPI_GET,
                &[
                    attr(napi_attr::ID, &8193u32.to_ne_bytes()),
                    attr(napi_attr::IFINDEX, &2u32.to_ne_bytes()),
                ],
            )[GENL_HDRLEN..],
        )
        .unwrap();
        assert_eq!(
            (
                old.defer_hard_irqs,
                old.gro_flush_timeout,
                old.irq_suspend_timeout,
                old.threaded
            ),
            (None, None, None, None)
        );
        let error = parse_napi(&attr(napi_attr::GRO_FLUSH_TIMEOUT, &[1, 2, 3]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("gro-flush-timeout has 3 bytes"), "{error}");
    }

    #[test]
    fn queue_without_napi_and_missing_attributes() {
        let q = parse_queue(
            &genl(
                cmd::QUEUE_GET,
                &[
                    attr(queue_attr::ID, &1u32.to_ne_bytes()),
                    attr(queue_attr::TYPE, &QUEUE_TYPE_TX.to_ne_bytes()),
                    attr(queue_attr::IFINDEX, &5u32.to_ne_bytes()),
                ],
            )[GENL_HDRLEN..],
        )
        .unwrap();
        assert_eq!(
            q,
            NetdevQueue {
                ifindex: 5,
                direction: QueueDirection::Tx,
                id: 1,
                napi_id: None
            }
        );
        let error = parse_queue(&attr(queue_attr::ID, &1u32.to_ne_bytes()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("ifindex"), "{error}");
        let error = parse_queue(&attr(queue_attr::TYPE, &7u32.to_ne_bytes()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown queue type 7"), "{error}");
    }

    #[test]
    fn queues_join_their_napi_irq() {
        let queue = |direction, id, napi_id| NetdevQueue {
            ifindex: 3,
            direction,
            id,
            napi_id,
        };
        let napi = |id, irq| Napi {
            id,
            ifindex: 3,
            irq,
            ..Napi::default()
        };
        let joined = join_queue_irqs(
            vec![
                queue(QueueDirection::Rx, 0, Some(9001)),
                queue(QueueDirection::Rx, 1, Some(9000)),
                queue(QueueDirection::Tx, 0, Some(9001)),
                queue(QueueDirection::Tx, 1, None),
                queue(QueueDirection::Rx, 2, Some(9002)),
            ],
            vec![napi(9000, Some(45)), napi(9001, Some(44)), napi(9002, None)],
        );
        let irqs: Vec<_> = joined.iter().map(|q| q.irq).collect();
        assert_eq!(irqs, vec![Some(44), Some(45), Some(44), None, None]);
    }

    #[test]
    fn family_ops_come_from_the_ctrl_reply() {
        let nlas = vec![
            GenlCtrlAttrs::FamilyName("netdev".into()),
            GenlCtrlAttrs::FamilyId(20),
            GenlCtrlAttrs::Version(1),
            GenlCtrlAttrs::Ops(vec![
                vec![OpAttrs::Id(1), OpAttrs::Flags(6)],
                vec![OpAttrs::Id(10), OpAttrs::Flags(6)],
                vec![OpAttrs::Id(11), OpAttrs::Flags(6)],
            ]),
        ];
        let family = family_from_ctrl(&nlas).unwrap();
        assert_eq!(family.id, 20);
        assert!(family.ops.queue_get && family.ops.napi_get);
        assert!(!family.ops.qstats_get, "a 6.8 kernel has no qstats-get");
    }

    #[test]
    fn request_layout_matches_the_kernel_abi() {
        let attrs = [
            U32Attr::new(qstats_attr::SCOPE, QSTATS_SCOPE_QUEUE),
            U32Attr::new(qstats_attr::IFINDEX, 2),
        ];
        let mut request = GenlMessage::from_payload(NetdevRequest {
            command: cmd::QSTATS_GET,
            attrs: &attrs,
        });
        request.set_resolved_family_id(20);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = 3;
        let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(request));
        message.finalize();
        let mut bytes = vec![0; message.buffer_len()];
        message.serialize(&mut bytes);
        let mut expected = MessageBuilder::new();
        expected.message(20, NLM_F_REQUEST | NLM_F_DUMP, 3, &genl_body_for_test());
        // The port id is 0 in requests (the kernel fills it in).
        expected.bytes[12..16].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(bytes, expected.bytes);

        fn genl_body_for_test() -> Vec<u8> {
            genl(
                cmd::QSTATS_GET,
                &[
                    attr(qstats_attr::SCOPE, &QSTATS_SCOPE_QUEUE.to_ne_bytes()),
                    attr(qstats_attr::IFINDEX, &2u32.to_ne_bytes()),
                ],
            )
        }
    }
}
