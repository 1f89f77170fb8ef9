//! Link kinds from rtnetlink (`RTM_GETLINK` dump, `IFLA_LINKINFO` → `IFLA_INFO_KIND`).
//!
//! sysfs tells a bond, a bridge, a vlan, loopback and hardware apart, but not a veth from a
//! tun, a dummy or a wireguard device; the link's `kind` does. This is only meaningful when
//! the root is the running machine (`Root::is_host`): a fake tree has no netlink. Discovery
//! treats a failed dump as a warning, never as fatal, since sysfs alone is a usable model.
//!
//! Built on netlink-packet-route + netlink-sys (blocking socket, one dump).

use std::os::fd::AsFd;
use std::time::Duration;

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkInfo, LinkMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use crate::error::Error;
use crate::model::inventory::DeviceKind;

/// One link of the dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub name: Option<String>,
    /// `IFLA_INFO_KIND` (`veth`, `bond`, `vlan`, `bridge`, `tun`, ...); `None` for links
    /// without link info (hardware NICs, loopback).
    pub kind: Option<String>,
}

/// How long a dump may take before it is abandoned.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Dumps every link of the current network namespace.
pub fn dump_links() -> Result<Vec<Link>, Error> {
    let fail = |reason: String| Error::Kernel {
        what: "rtnetlink RTM_GETLINK dump".to_string(),
        reason,
    };
    let mut socket = Socket::new(NETLINK_ROUTE).map_err(|e| fail(format!("socket: {e}")))?;
    let port = socket
        .bind_auto()
        .map_err(|e| fail(format!("bind: {e}")))?
        .port_number();
    socket
        .connect(&SocketAddr::new(0, 0))
        .map_err(|e| fail(format!("connect: {e}")))?;
    let timeout = nix::sys::time::TimeVal::new(TIMEOUT.as_secs() as _, 0);
    nix::sys::socket::setsockopt(
        &socket.as_fd(),
        nix::sys::socket::sockopt::ReceiveTimeout,
        &timeout,
    )
    .map_err(|e| fail(format!("SO_RCVTIMEO: {e}")))?;

    const SEQUENCE: u32 = 1;
    let mut request = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::from(RouteNetlinkMessage::GetLink(LinkMessage::default())),
    );
    request.header.flags = NLM_F_DUMP | NLM_F_REQUEST;
    request.header.sequence_number = SEQUENCE;
    request.finalize();
    let mut bytes = vec![0; request.buffer_len()];
    request.serialize(&mut bytes);
    socket
        .send(&bytes, 0)
        .map_err(|e| fail(format!("send: {e}")))?;

    let mut links = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let size = {
            let mut slice = &mut buffer[..];
            socket
                .recv(&mut slice, 0)
                .map_err(|e| fail(format!("recv: {e}")))?
        };
        let received = buffer
            .get(..size.min(buffer.len()))
            .ok_or_else(|| fail("short read".to_string()))?;
        let mut offset = 0;
        while offset < received.len() {
            let rest = &received[offset..];
            let message: NetlinkMessage<RouteNetlinkMessage> =
                NetlinkMessage::deserialize(rest).map_err(|e| fail(format!("decode: {e}")))?;
            let length = message.header.length as usize;
            if message.header.sequence_number != SEQUENCE
                || (message.header.port_number != 0 && message.header.port_number != port)
            {
                // Not a reply to our request.
            } else {
                match message.payload {
                    NetlinkPayload::Done(_) => return Ok(links),
                    NetlinkPayload::Error(error) => {
                        return Err(fail(format!("kernel error: {}", error.to_io())));
                    }
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link)) => {
                        links.push(link_of(&link));
                    }
                    _ => {}
                }
            }
            if length == 0 {
                break;
            }
            offset += length;
        }
    }
}

fn link_of(message: &LinkMessage) -> Link {
    let mut link = Link {
        ifindex: message.header.index,
        name: None,
        kind: None,
    };
    for attribute in &message.attributes {
        match attribute {
            LinkAttribute::IfName(name) => link.name = Some(name.clone()),
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    if let LinkInfo::Kind(kind) = info {
                        link.kind = Some(kind.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    link
}

/// The kind of a device given what sysfs concluded and the link's `IFLA_INFO_KIND`.
///
/// Netlink refines only what sysfs cannot tell: a software device (`OtherVirtual`)
/// becomes `Veth`, `Bond`, `Vlan` or `Bridge` when the link kind says so; hardware,
/// loopback and devices sysfs already identified keep their kind.
pub fn refine_kind(sysfs_kind: DeviceKind, link_kind: Option<&str>) -> DeviceKind {
    if sysfs_kind != DeviceKind::OtherVirtual {
        return sysfs_kind;
    }
    match link_kind {
        Some("veth") => DeviceKind::Veth,
        Some("bond") => DeviceKind::Bond,
        Some("vlan") => DeviceKind::Vlan,
        Some("bridge") => DeviceKind::Bridge,
        _ => DeviceKind::OtherVirtual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refines_only_software_devices() {
        assert_eq!(
            refine_kind(DeviceKind::OtherVirtual, Some("veth")),
            DeviceKind::Veth
        );
        assert_eq!(
            refine_kind(DeviceKind::OtherVirtual, Some("bond")),
            DeviceKind::Bond
        );
        assert_eq!(
            refine_kind(DeviceKind::OtherVirtual, Some("ifb")),
            DeviceKind::OtherVirtual
        );
        assert_eq!(
            refine_kind(DeviceKind::OtherVirtual, None),
            DeviceKind::OtherVirtual
        );
        assert_eq!(
            refine_kind(DeviceKind::Physical, Some("veth")),
            DeviceKind::Physical
        );
        assert_eq!(
            refine_kind(DeviceKind::Loopback, None),
            DeviceKind::Loopback
        );
    }

    #[test]
    fn dumps_the_hosts_links() {
        // Unprivileged and read-only; a sandbox without netlink just reports an error.
        match dump_links() {
            Ok(links) => {
                let lo = links.iter().find(|l| l.name.as_deref() == Some("lo"));
                assert!(lo.is_some(), "no lo in {links:?}");
                assert_eq!(lo.unwrap().kind, None);
            }
            Err(err) => println!("skipping: rtnetlink unavailable here: {err}"),
        }
    }
}
