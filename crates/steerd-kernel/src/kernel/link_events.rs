//! Link events: an rtnetlink socket subscribed to `RTNLGRP_LINK`, so the daemon
//! rediscovers as soon as a device appears, vanishes or changes, instead of waiting for
//! the slow rediscovery timer. A channel-count change sends no link event (`tests/queue_events.rs`):
//! `queue_events` hears that one.
//!
//! Only the fact that *something* changed matters here — discovery re-reads `sys/` — so
//! the messages are drained, not parsed.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use netlink_sys::protocols::NETLINK_ROUTE;

use super::event_socket::EventSocket;

/// `RTMGRP_LINK` from `linux/rtnetlink.h`: the legacy group bit for `RTNLGRP_LINK` (1).
const RTMGRP_LINK: u32 = 1;

/// A non-blocking netlink socket that becomes readable on link changes.
pub struct LinkEvents {
    events: EventSocket,
}

impl LinkEvents {
    /// Subscribes to link events in the current network namespace.
    pub fn subscribe() -> io::Result<LinkEvents> {
        Ok(LinkEvents {
            events: EventSocket::subscribe(NETLINK_ROUTE, RTMGRP_LINK, 64 * 1024)?,
        })
    }

    /// Reads every pending message; returns how many datagrams there were. An overrun
    /// (ENOBUFS: events were lost) counts as a change, since something did change.
    pub fn drain(&mut self) -> io::Result<usize> {
        let mut count = 0;
        self.events.drain(|_| count += 1)?;
        Ok(count)
    }
}

impl AsFd for LinkEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }
}

impl AsRawFd for LinkEvents {
    fn as_raw_fd(&self) -> RawFd {
        self.events.as_raw_fd()
    }
}
