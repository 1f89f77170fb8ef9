//! Queue events: a kobject-uevent netlink socket, so the daemon notices at once when a
//! network device's queue set changes (`ethtool -L`, a driver resizing its channels for
//! XDP). Such a change sends no rtnetlink link event, yet the driver re-does its default
//! IRQ affinities and the re-added `rx-N` queues come back with RPS off (`rps_cpus` 0):
//! without this, steerd would see it only at its next read-back or rediscovery.
//!
//! Why kobject uevents and not the ethtool generic-netlink family's `monitor` group
//! (`ETHTOOL_MSG_CHANNELS_NTF`): the kernel announces every `queues/rx-N` and
//! `queues/tx-N` directory it adds or removes, whatever made the change (the ethtool ioctl,
//! ethtool netlink, the driver itself), with no family or group id to resolve first. The
//! socket needs no privilege beyond the daemon's, and in a network namespace it hears that
//! namespace's devices.
//!
//! The messages are parsed by hand: a kernel uevent is not a netlink message (no
//! `nlmsghdr`, no attributes) but `ACTION@DEVPATH` followed by NUL-separated `KEY=value`
//! lines, and only the first line is needed here; no crate parses it. Discovery re-reads
//! `sys/` after an event, so the message only has to say "a queue came or went".

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use netlink_sys::protocols::NETLINK_KOBJECT_UEVENT;

use super::event_socket::{EventSocket, Received};

/// The multicast group the kernel itself sends uevents to (udev re-sends on group 2).
const KERNEL_UEVENTS: u32 = 1;

/// A non-blocking uevent socket that becomes readable on any kernel uevent; [`drain`]
/// tells whether one of them was a network queue's.
///
/// [`drain`]: QueueEvents::drain
pub struct QueueEvents {
    events: EventSocket,
}

impl QueueEvents {
    /// Subscribes to the kernel's uevents (in the current network namespace for network
    /// devices).
    pub fn subscribe() -> io::Result<QueueEvents> {
        Ok(QueueEvents {
            events: EventSocket::subscribe(NETLINK_KOBJECT_UEVENT, KERNEL_UEVENTS, 16 * 1024)?,
        })
    }

    /// Reads every pending uevent; returns how many announced a network queue added or
    /// removed. An overrun (ENOBUFS: events were lost) counts as one, since a queue event
    /// may have been among them.
    pub fn drain(&mut self) -> io::Result<usize> {
        let mut count = 0;
        self.events.drain(|received| match received {
            Received::Datagram(message) => count += usize::from(is_queue_change(message)),
            Received::Overrun => count += 1,
        })?;
        Ok(count)
    }
}

/// Whether a uevent says a network device's queue came or went: its first line is
/// `add@…/net/<dev>/queues/rx-<n>` or `remove@…` (also `tx-<n>`).
pub fn is_queue_change(message: &[u8]) -> bool {
    let header = message.split(|&b| b == 0).next().unwrap_or_default();
    let Some(at) = header.iter().position(|&b| b == b'@') else {
        return false;
    };
    let (action, devpath) = (&header[..at], &header[at + 1..]);
    if action != b"add" && action != b"remove" {
        return false;
    }
    let Some(slash) = devpath.iter().rposition(|&b| b == b'/') else {
        return false;
    };
    let (parent, leaf) = (&devpath[..slash], &devpath[slash + 1..]);
    let queue = leaf
        .strip_prefix(b"rx-")
        .or_else(|| leaf.strip_prefix(b"tx-"))
        .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit));
    queue && parent.ends_with(b"/queues") && parent.windows(5).any(|w| w == b"/net/")
}

impl AsFd for QueueEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }
}

impl AsRawFd for QueueEvents {
    fn as_raw_fd(&self) -> RawFd {
        self.events.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_uevents_are_told_from_the_rest() {
        // As sent by a 6.1 guest for `ethtool -L eth0 combined 2` on virtio_net, and by
        // 6.18 for a veth.
        let yes: [&[u8]; 4] = [
            b"remove@/devices/pci0000:00/0000:00:03.0/virtio0/net/eth0/queues/rx-3\0ACTION=remove\0DEVPATH=/devices/pci0000:00/0000:00:03.0/virtio0/net/eth0/queues/rx-3\0SUBSYSTEM=queues\0SEQNUM=1234\0",
            b"add@/devices/pci0000:00/0000:00:03.0/virtio0/net/eth0/queues/tx-12\0ACTION=add\0",
            b"add@/devices/virtual/net/veth0/queues/rx-0\0",
            b"remove@/devices/virtual/net/veth0/queues/tx-1",
        ];
        for message in yes {
            assert!(
                is_queue_change(message),
                "{}",
                String::from_utf8_lossy(message)
            );
        }
        let no: [&[u8]; 9] = [
            b"add@/devices/virtual/net/veth0\0ACTION=add\0",
            b"change@/devices/virtual/net/veth0/queues/rx-0\0",
            b"online@/devices/system/cpu/cpu3\0ACTION=online\0",
            b"add@/devices/virtual/block/loop0/queue\0",
            b"add@/devices/virtual/net/veth0/queues/rx-\0",
            b"add@/devices/virtual/net/veth0/queues/rx-1x\0",
            b"add@/devices/virtual/block/queues/rx-1\0",
            // udev's re-sent form (group 2) starts with a binary header.
            b"libudev\0\xfe\xed\xca\xfe",
            b"",
        ];
        for message in no {
            assert!(
                !is_queue_change(message),
                "{}",
                String::from_utf8_lossy(message)
            );
        }
    }
}
