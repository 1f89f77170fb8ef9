//! The generic-netlink transport under every netlink request steerd makes: the socket
//! (bound, connected to the kernel, with a reply timeout), one request sent whole, its
//! reply received and walked datagram by datagram (multipart dumps, ACKs, errnos, late
//! replies to a timed-out request skipped), a family resolved by name through the
//! controller (`nlctrl`), and the attribute framing (walking attributes, reading `u32`
//! and `NLA_UINT` values, emitting `u32` ones).
//!
//! It exists apart from the families it carries so that none of this is written twice:
//! the netdev client ([`super::netdev`]) runs on [`GenlSocket`], and the ethtool family's
//! code (`kernel::rss::netlink`, `kernel::ethtool_events`) on the free functions, which
//! [`super`] re-exports to the crate. Nothing here knows a family's commands or
//! attributes.

use std::fmt::Debug;
use std::os::fd::AsFd;
use std::time::Duration;

use netlink_packet_core::{
    DoneBuffer, Emitable, ErrorBuffer, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE,
    NLMSG_ERROR, NLMSG_NOOP, NLMSG_OVERRUN, NetlinkBuffer, NetlinkHeader, NetlinkMessage,
    NetlinkPayload, Nla, NlaBuffer, NlasIterator, ParseableParametrized, emit_u32,
};
use netlink_packet_generic::constants::{GENL_HDRLEN, GENL_ID_CTRL};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_GENERIC};

use crate::error::Error;

/// How long a reply may take before the request fails (the daemon must never hang on it).
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// Receive buffer: the kernel's dump skbs are at most 32 KiB; twice that leaves room.
pub(crate) const RECV_BUFFER_LEN: usize = 64 * 1024;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HEADER_LEN: usize = 16;

/// A blocking generic-netlink socket with its sequence numbers and its send and receive
/// buffers: one family's client keeps one and reuses it, so a request allocates nothing
/// once the buffers have grown.
pub(super) struct GenlSocket {
    socket: Socket,
    sequence: u32,
    send_buffer: Vec<u8>,
    recv_buffer: Vec<u8>,
}

impl GenlSocket {
    /// Opens the socket ([`open_socket`]) in the calling thread's network namespace.
    pub(super) fn open() -> Result<Self, Error> {
        Ok(GenlSocket {
            socket: open_socket()?,
            sequence: 0,
            send_buffer: Vec::with_capacity(64),
            recv_buffer: Vec::with_capacity(RECV_BUFFER_LEN),
        })
    }

    /// The sequence number of the last request sent (0 before the first).
    pub(super) fn sequence(&self) -> u32 {
        self.sequence
    }

    fn next_sequence(&mut self) -> u32 {
        self.sequence = self.sequence.wrapping_add(1);
        if self.sequence == 0 {
            self.sequence = 1;
        }
        self.sequence
    }

    /// `CTRL_CMD_GETFAMILY` for the family `name`, through netlink-packet-generic's ctrl
    /// types; `from_ctrl` reads what the family's client needs from the controller's
    /// attributes. `None` when the controller answers ENOENT (the kernel has no such family).
    pub(super) fn resolve_family<T>(
        &mut self,
        what: &str,
        name: &str,
        mut from_ctrl: impl FnMut(&[GenlCtrlAttrs]) -> Result<T, Error>,
    ) -> Result<Option<T>, Error> {
        let sequence = self.next_sequence();
        self.send_buffer = getfamily_request(name, sequence);
        self.send(what)?;

        let mut family = None;
        let outcome = self.receive(
            what,
            sequence,
            GENL_ID_CTRL,
            |message_type, genl_payload| {
                let parsed = GenlMessage::<GenlCtrl>::parse_with_param(genl_payload, message_type)
                    .map_err(|e| kernel_error(what, format!("malformed reply: {e}")))?;
                family = Some(from_ctrl(&parsed.payload.nlas)?);
                Ok(())
            },
        )?;
        match outcome {
            Ok(()) => family
                .map(Some)
                .ok_or_else(|| kernel_error(what, "no family in the reply")),
            Err(code) if code == -(nix::errno::Errno::ENOENT as i32) => Ok(None),
            Err(code) => Err(errno_error(what, code)),
        }
    }

    /// Sends one request of the family `family_id` (`payload`: its command, version and
    /// attributes) and walks its reply; `on_reply` gets each reply's attributes (after the
    /// genl header). A dump (`dump: true`) ends at `NLMSG_DONE`, any other request at its ACK.
    pub(super) fn request<F>(
        &mut self,
        what: &str,
        family_id: u16,
        payload: F,
        dump: bool,
        mut on_reply: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error>
    where
        F: GenlFamily + Emitable + Debug,
    {
        let sequence = self.next_sequence();
        let mut genl = GenlMessage::from_payload(payload);
        genl.set_resolved_family_id(family_id);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { NLM_F_ACK };
        header.sequence_number = sequence;
        let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(genl));
        message.finalize();
        self.send_buffer.clear();
        self.send_buffer.resize(message.buffer_len(), 0);
        message.serialize(&mut self.send_buffer);
        self.send(what)?;
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

/// A netlink length rounded up to the 4-byte alignment of messages and attributes
/// (`NLMSG_ALIGN`, `NLA_ALIGN`).
pub(crate) fn align4(length: usize) -> usize {
    (length + 3) & !3
}

/// Iterates over a message's attributes as `(kind, value)`; a truncated or malformed
/// attribute is an error naming `what`.
pub(super) fn for_each_attr(
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

pub(super) fn attr_u32(what: &str, name: &str, value: &[u8]) -> Result<u32, Error> {
    let bytes: [u8; 4] = value.try_into().map_err(|_| {
        kernel_error(
            what,
            format!("attribute {name} has {} bytes, expected 4", value.len()),
        )
    })?;
    Ok(u32::from_ne_bytes(bytes))
}

/// An `NLA_UINT`: 4 bytes when the value fits, else 8.
pub(super) fn attr_uint(what: &str, name: &str, value: &[u8]) -> Result<u64, Error> {
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

pub(super) fn missing(what: &str, attribute: &str) -> Error {
    kernel_error(what, format!("reply lacks the {attribute} attribute"))
}

pub(super) fn kernel_error(what: &str, reason: impl Into<String>) -> Error {
    Error::Kernel {
        what: what.to_owned(),
        reason: reason.into(),
    }
}

/// An error carrying a kernel errno (netlink codes are negative errnos).
pub(super) fn errno_error(what: &str, code: i32) -> Error {
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
pub(super) struct U32Attr {
    kind: u16,
    value: u32,
}

impl U32Attr {
    pub(super) fn new(kind: u16, value: u32) -> Self {
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
