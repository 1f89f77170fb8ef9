//! Ethtool events: a generic-netlink socket in the ethtool family's `monitor` multicast
//! group, so the daemon hears a channel change (`ETHTOOL_MSG_CHANNELS_NTF`) and, from Linux
//! 6.17, an RSS change (`ETHTOOL_MSG_RSS_NTF`, and the creation and deletion of RSS
//! contexts) the moment the kernel makes it, whoever asked for it (the ethtool ioctl sends
//! the notification too).
//!
//! Why beside the kobject uevents of `queue_events`: those announce queue directories that
//! come and go, so they miss an RSS table rewritten by someone else, and a channel change
//! that keeps the queue count (a driver may still reset its vectors' affinities on it);
//! this socket hears both and starts a rediscovery at once. A channel notification names
//! its device (`ETHTOOL_A_CHANNELS_HEADER` → `ETHTOOL_A_HEADER_DEV_INDEX`), so that
//! rediscovery takes the values a same-count channel set reset as the driver's, not as
//! someone else's change to respect.
//! On a kernel without ethtool netlink's channel messages (before 5.7) or without the
//! group, [`EthtoolEvents::subscribe`] answers `Ok(None)` (or hears nothing) and the
//! periodic rediscovery and the uevents stay the fallback.
//!
//! Only the command of each message is read (the first byte after `nlmsghdr`), and for a
//! channel notification its device's ifindex: discovery re-reads `sys/` after an event, so
//! the message only has to say what kind of change came, and where.
//! No crate covers the ethtool family's notifications, hence this small walk over
//! netlink-packet-core's framing.
//!
//! Command numbers count `ETHTOOL_MSG_*` of the kernel-to-user enum in
//! `include/uapi/linux/ethtool_netlink_generated.h` (`ethtool_netlink.h` before 6.14):
//! `CHANNELS_NTF` is 19 since 5.7; after `RSS_GET_REPLY` (38, as `kernel::rss` uses) come
//! `PLCA_GET_CFG_REPLY`, `PLCA_GET_STATUS_REPLY`, `PLCA_NTF`, `MM_GET_REPLY`, `MM_NTF`,
//! `MODULE_FW_FLASH_NTF`, `PHY_GET_REPLY`, `PHY_NTF`, `TSCONFIG_GET_REPLY`,
//! `TSCONFIG_SET_REPLY`, `PSE_NTF` (49), then `RSS_NTF` (50, 6.17), `RSS_CREATE_ACT_REPLY`,
//! `RSS_CREATE_NTF` (52) and `RSS_DELETE_NTF` (53). They are uapi, so they never change.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use netlink_packet_core::NetlinkBuffer;
use netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, McastGrpAttrs};

use super::event_socket::{EventSocket, Received};
use crate::kernel::netlink::{RECV_BUFFER_LEN, open_socket};

/// `ETHTOOL_MCGRP_MONITOR_NAME`.
const MONITOR_GROUP: &str = "monitor";
/// `ETHTOOL_MSG_CHANNELS_NTF`.
const CHANNELS_NTF: u8 = 19;
/// `ETHTOOL_MSG_RSS_NTF`, `ETHTOOL_MSG_RSS_CREATE_NTF`, `ETHTOOL_MSG_RSS_DELETE_NTF`.
const RSS_NTFS: [u8; 3] = [50, 52, 53];
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HEADER_LEN: usize = 16;

/// What the notifications drained so far said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heard {
    /// Channel-count changes.
    pub channels: usize,
    /// RSS table, key or context changes.
    pub rss: usize,
    /// The ifindexes the channel notifications named (each once, at most
    /// [`MAX_NAMED_DEVICES`]).
    pub channel_devices: Vec<u32>,
    /// Some channel notification's device is unknown (an overrun, a message without its
    /// header, more devices than are kept): every device may have had its channels set.
    pub channels_anywhere: bool,
}

/// The most devices one drain remembers by ifindex; beyond, `channels_anywhere`.
pub const MAX_NAMED_DEVICES: usize = 64;
/// `ETHTOOL_A_CHANNELS_HEADER`, and in it `ETHTOOL_A_HEADER_DEV_INDEX`.
const CHANNELS_HEADER: u16 = 1;
const HEADER_DEV_INDEX: u16 = 1;
/// `sizeof(struct genlmsghdr)`.
const GENL_HEADER_LEN: usize = 4;

impl Heard {
    /// Whether anything steerd acts on changed.
    pub fn any(&self) -> bool {
        self.channels + self.rss > 0
    }
}

/// A non-blocking socket in the ethtool `monitor` group.
pub struct EthtoolEvents {
    events: EventSocket,
    family: u16,
}

impl EthtoolEvents {
    /// Joins the ethtool family's `monitor` group (in the current network namespace);
    /// `Ok(None)` when the kernel has no ethtool netlink or no such group.
    pub fn subscribe() -> io::Result<Option<EthtoolEvents>> {
        let mut socket = open_socket().map_err(io::Error::other)?;
        let Some(nlas) =
            crate::kernel::rss::netlink::ethtool_family(&mut socket).map_err(io::Error::other)?
        else {
            return Ok(None);
        };
        let Some((family, group)) = monitor_group(&nlas) else {
            return Ok(None);
        };
        socket.add_membership(group)?;
        Ok(Some(EthtoolEvents {
            events: EventSocket::new(socket, RECV_BUFFER_LEN)?,
            family,
        }))
    }

    /// Reads every pending notification and says which kinds of change they were. An
    /// overrun (ENOBUFS: more came than the socket holds) counts as a change of each kind.
    pub fn drain(&mut self) -> io::Result<Heard> {
        let mut heard = Heard::default();
        let family = self.family;
        self.events.drain(|received| match received {
            Received::Datagram(datagram) => count(datagram, family, &mut heard),
            Received::Overrun => {
                heard.channels += 1;
                heard.rss += 1;
                heard.channels_anywhere = true;
            }
        })?;
        Ok(heard)
    }
}

impl AsFd for EthtoolEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }
}

/// The family id and the `monitor` group's id, from the controller's answer.
fn monitor_group(nlas: &[GenlCtrlAttrs]) -> Option<(u16, u32)> {
    let mut family = None;
    let mut group = None;
    for nla in nlas {
        match nla {
            GenlCtrlAttrs::FamilyId(id) => family = Some(*id),
            GenlCtrlAttrs::McastGroups(groups) => {
                group = groups.iter().find_map(|attrs| {
                    let named = attrs
                        .iter()
                        .any(|a| matches!(a, McastGrpAttrs::Name(n) if n == MONITOR_GROUP));
                    let id = attrs.iter().find_map(|a| match a {
                        McastGrpAttrs::Id(id) => Some(*id),
                        _ => None,
                    });
                    id.filter(|_| named)
                });
            }
            _ => {}
        }
    }
    Some((family?, group?))
}

/// Counts the channel and RSS notifications among the messages of one datagram; anything
/// else (other families, other commands, a truncated tail) is skipped.
fn count(datagram: &[u8], family: u16, heard: &mut Heard) {
    let mut offset = 0;
    while offset + NLMSG_HEADER_LEN <= datagram.len() {
        let Ok(message) = NetlinkBuffer::new_checked(&datagram[offset..]) else {
            return;
        };
        let length = message.length() as usize;
        if message.message_type() == family
            && let Some(&command) = message.payload().first()
        {
            if command == CHANNELS_NTF {
                heard.channels += 1;
                let attrs = message.payload().get(GENL_HEADER_LEN..).unwrap_or_default();
                match attribute(attrs, CHANNELS_HEADER).and_then(|h| u32_attr(h, HEADER_DEV_INDEX))
                {
                    Some(ifindex) if heard.channel_devices.contains(&ifindex) => {}
                    Some(ifindex) if heard.channel_devices.len() < MAX_NAMED_DEVICES => {
                        heard.channel_devices.push(ifindex);
                    }
                    _ => heard.channels_anywhere = true,
                }
            } else if RSS_NTFS.contains(&command) {
                heard.rss += 1;
            }
        }
        // Messages are 4-byte aligned; a length under the header's would loop forever.
        let step = (length.max(NLMSG_HEADER_LEN) + 3) & !3;
        offset = offset.saturating_add(step);
    }
}

/// The payload of the first attribute of `kind` among netlink attributes (length u16,
/// type u16 with the nested and byte-order flags masked off, payload, 4-byte aligned).
fn attribute(mut attrs: &[u8], kind: u16) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let length = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let found = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if length < 4 || length > attrs.len() {
            return None;
        }
        if found == kind {
            return Some(&attrs[4..length]);
        }
        attrs = attrs.get((length + 3) & !3..)?;
    }
    None
}

fn u32_attr(attrs: &[u8], kind: u16) -> Option<u32> {
    let bytes: [u8; 4] = attribute(attrs, kind)?.get(..4)?.try_into().ok()?;
    Some(u32::from_ne_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One message: nlmsghdr (length, type, flags, seq, pid), then genl (cmd, version, 0).
    fn message(kind: u16, command: u8) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&20u32.to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&[command, 1, 0, 0]);
        m
    }

    #[test]
    fn counts_channel_and_rss_notifications_of_the_family_only() {
        let mut datagram = message(30, CHANNELS_NTF);
        datagram.extend(message(30, 50));
        datagram.extend(message(30, 13)); // FEATURES_NTF
        datagram.extend(message(31, CHANNELS_NTF)); // another family
        let mut heard = Heard::default();
        count(&datagram, 30, &mut heard);
        assert_eq!((heard.channels, heard.rss), (1, 1));
        assert!(heard.channels_anywhere, "a notification without its header");
    }

    /// A CHANNELS_NTF as the kernel sends it: genl header, then the nested header
    /// attribute with the device's ifindex and name.
    fn channels_ntf(ifindex: u32) -> Vec<u8> {
        let mut index = Vec::new();
        index.extend_from_slice(&8u16.to_ne_bytes());
        index.extend_from_slice(&HEADER_DEV_INDEX.to_ne_bytes());
        index.extend_from_slice(&ifindex.to_ne_bytes());
        let mut name = Vec::new();
        name.extend_from_slice(&9u16.to_ne_bytes());
        name.extend_from_slice(&2u16.to_ne_bytes());
        name.extend_from_slice(b"eth0\0\0\0\0");
        let mut header = Vec::new();
        let inner = [name, index].concat();
        header.extend_from_slice(&((4 + inner.len()) as u16).to_ne_bytes());
        header.extend_from_slice(&(CHANNELS_HEADER | 0x8000).to_ne_bytes());
        header.extend(inner);
        let mut m = message(30, CHANNELS_NTF);
        m.extend(header);
        let length = m.len() as u32;
        m[..4].copy_from_slice(&length.to_ne_bytes());
        m
    }

    #[test]
    fn a_channel_notification_names_its_device() {
        let mut datagram = channels_ntf(2);
        datagram.extend(channels_ntf(7));
        datagram.extend(channels_ntf(2));
        let mut heard = Heard::default();
        count(&datagram, 30, &mut heard);
        assert_eq!(heard.channels, 3);
        assert_eq!(heard.channel_devices, [2, 7]);
        assert!(!heard.channels_anywhere);
        // A header cut short names nothing: every device may have changed.
        let mut cut = channels_ntf(2);
        let len = cut.len() - 2;
        cut.truncate(len);
        cut[..4].copy_from_slice(&(len as u32).to_ne_bytes());
        let mut heard = Heard::default();
        count(&cut, 30, &mut heard);
        assert!(heard.channels_anywhere && heard.channel_devices.is_empty());
    }

    #[test]
    fn malformed_datagrams_are_skipped_not_a_panic_or_a_loop() {
        let mut heard = Heard::default();
        count(&[], 30, &mut heard);
        count(&[0; 15], 30, &mut heard);
        let mut zero_length = message(30, CHANNELS_NTF);
        zero_length[..4].copy_from_slice(&0u32.to_ne_bytes());
        count(&zero_length, 30, &mut heard);
        let mut too_long = message(30, CHANNELS_NTF);
        too_long[..4].copy_from_slice(&4000u32.to_ne_bytes());
        count(&too_long, 30, &mut heard);
        assert_eq!(heard, Heard::default());
    }

    #[test]
    fn the_monitor_group_is_found_by_name() {
        let nlas = vec![
            GenlCtrlAttrs::FamilyId(30),
            GenlCtrlAttrs::McastGroups(vec![
                vec![McastGrpAttrs::Name("other".into()), McastGrpAttrs::Id(3)],
                vec![McastGrpAttrs::Name("monitor".into()), McastGrpAttrs::Id(7)],
            ]),
        ];
        assert_eq!(monitor_group(&nlas), Some((30, 7)));
        assert_eq!(monitor_group(&nlas[..1]), None);
    }
}
