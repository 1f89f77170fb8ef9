//! The non-blocking netlink socket under each of the daemon's kernel event sources
//! (`link_events`, `queue_events`, `ethtool_events`). They differ in what they join and
//! in what a datagram means to them, not in how they read: so one place subscribes, keeps
//! the receive buffer (draining allocates nothing once it is there), reads until the
//! socket is empty, and tells an overrun apart from a datagram.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use netlink_sys::{Socket, SocketAddr};

/// What one read from an [`EventSocket`] gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received<'a> {
    /// One datagram (one or more netlink messages, or one uevent).
    Datagram(&'a [u8]),
    /// An overrun (ENOBUFS): the kernel dropped events the socket had no room for, so
    /// something changed that no datagram will tell.
    Overrun,
}

/// A non-blocking netlink socket that becomes readable when the kernel sends an event.
pub struct EventSocket {
    socket: Socket,
    /// Kept between reads, with room for the largest datagram expected.
    buffer: Vec<u8>,
}

impl EventSocket {
    /// A new `protocol` socket bound to the legacy multicast `groups` bitmask (in the
    /// current network namespace), reading datagrams of up to `buffer_len` bytes.
    pub fn subscribe(protocol: isize, groups: u32, buffer_len: usize) -> io::Result<Self> {
        let mut socket = Socket::new(protocol)?;
        socket.bind(&SocketAddr::new(0, groups))?;
        EventSocket::new(socket, buffer_len)
    }

    /// `socket`, already in the groups it listens to, made non-blocking.
    pub fn new(socket: Socket, buffer_len: usize) -> io::Result<Self> {
        socket.set_non_blocking(true)?;
        Ok(EventSocket {
            socket,
            buffer: Vec::with_capacity(buffer_len),
        })
    }

    /// Reads every pending datagram, handing each (and each overrun) to `on_received`,
    /// until the socket is empty; any other receive error ends the drain.
    pub fn drain(&mut self, mut on_received: impl FnMut(Received<'_>)) -> io::Result<()> {
        loop {
            self.buffer.clear();
            match self.socket.recv(&mut self.buffer, 0) {
                Ok(0) => return Ok(()),
                Ok(_) => on_received(Received::Datagram(&self.buffer)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOBUFS) => {
                    on_received(Received::Overrun);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl AsFd for EventSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

impl AsRawFd for EventSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use netlink_sys::protocols::NETLINK_ROUTE;

    use super::*;

    /// Datagrams another socket sends to ours are handed over whole, one by one, and an
    /// empty socket ends the drain (no privilege needed: unicast to our own port).
    #[test]
    fn drains_every_pending_datagram_then_stops() {
        let mut events = EventSocket::subscribe(NETLINK_ROUTE, 0, 4096).expect("socket");
        let mut ours = SocketAddr::new(0, 0);
        events.socket.get_address(&mut ours).expect("address");
        let mut sender = Socket::new(NETLINK_ROUTE).expect("socket");
        sender.bind_auto().expect("bind");
        for payload in [&[1u8; 20][..], &[2u8; 36][..]] {
            sender.send_to(payload, &ours, 0).expect("send");
        }
        let mut got = Vec::new();
        events
            .drain(|received| match received {
                Received::Datagram(bytes) => got.push(bytes.to_vec()),
                Received::Overrun => panic!("no overrun expected"),
            })
            .expect("drain");
        assert_eq!(got, vec![vec![1u8; 20], vec![2u8; 36]]);
        events.drain(|_| panic!("nothing left")).expect("drain");
    }
}
