//! Generic netlink, split in two: the transport every generic-netlink request of steerd's
//! runs on (`genl`: socket, request and reply, family lookup, attribute framing) and the
//! client of the `"netdev"` family on top of it (`netdev`: queues, NAPI instances,
//! per-queue counters).
//!
//! This module exists so that callers name one place: the netdev client and its types
//! (`kernel::netlink::NetdevClient`, `Napi`, `QueueIrq`, `QueueStats`, ...) and, for the
//! ethtool family's code in the crate (`kernel::rss::netlink`, `kernel::ethtool_events`),
//! the transport's free functions are re-exported here.

mod genl;
mod netdev;

pub(crate) use genl::{
    RECV_BUFFER_LEN, align4, getfamily_request, open_socket, receive_reply, send_request,
};
pub use netdev::{
    FAMILY_NAME, Napi, NetdevClient, NetdevFamily, NetdevOps, NetdevQueue, QueueIrq, QueueStats,
};

// What the unit tests and the property tests (`tests.rs`, `fuzz.rs`: both `use super::*`)
// name: the private parts of both halves and the netlink types they build replies with.
#[cfg(test)]
use {
    crate::error::Error,
    crate::model::snapshot::QueueDirection,
    genl::{Progress, U32Attr, errno_error, parse_datagram},
    netdev::{
        NetdevRequest, QSTATS_SCOPE_QUEUE, QUEUE_TYPE_RX, QUEUE_TYPE_TX, cmd, family_from_ctrl,
        join_queue_irqs, napi_attr, parse_napi, parse_queue, parse_queue_stats, qstats_attr,
        queue_attr,
    },
    netlink_packet_core::{
        NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NetlinkHeader, NetlinkMessage,
        NetlinkPayload, ParseableParametrized,
    },
    netlink_packet_generic::GenlMessage,
    netlink_packet_generic::constants::GENL_HDRLEN,
    netlink_packet_generic::ctrl::GenlCtrl,
    netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, OpAttrs},
};

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests;
