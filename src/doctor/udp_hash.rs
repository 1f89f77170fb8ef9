//! UDP hashed on addresses only (`ETHTOOL_GRXFH` for `udp4`/`udp6`, what `ethtool -n DEV
//! rx-flow-hash udp4` shows: "IP SA, IP DA" without the L4 ports): every UDP flow between
//! two hosts then lands on one receive queue, so a multi-queue NIC serving a few peers
//! (DNS resolvers, QUIC or game servers behind a load balancer) receives on one CPU.
//!
//! A note, not a warning: many NICs default to it on purpose, since fragments carry no
//! ports and hashing them differently from the first fragment spreads one datagram over
//! queues. Only with several rx queues (one queue has nothing to spread), on physical and
//! virtio NICs, on the host (`--root /`); a failed ioctl is "not checked: why". A device
//! that reports no fields at all ("None": no RSS, e.g. virtio without the RSS feature) is
//! not judged: the queue is chosen elsewhere.

use super::ethtool_checks::{PerDevice, physical_or_virtio};
use super::{Context, Finding, Severity};
use crate::kernel::ethtool::{Ethtool, FlowHash, UDP_V4_FLOW, UDP_V6_FLOW};

/// The RSS hash fields for UDP over IPv4 and, when the driver reports it, over IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHash {
    pub udp4: FlowHash,
    pub udp6: Option<FlowHash>,
}

impl UdpHash {
    fn read(ethtool: &Ethtool, device: &str) -> Result<Self, crate::Error> {
        Ok(UdpHash {
            udp4: ethtool.rx_flow_hash(device, UDP_V4_FLOW)?,
            udp6: ethtool.rx_flow_hash(device, UDP_V6_FLOW).ok(),
        })
    }
}

pub fn check(context: &Context) -> Vec<Finding> {
    PerDevice {
        check: "udp_hash",
        subject: "UDP hash fields",
        matters: "UDP hashed on addresses only puts all flows between two hosts on one queue.",
        reads: "hash fields come",
        wanted: physical_or_virtio,
        read: UdpHash::read,
        judge: &|device, hash| judge(&device.name, device.rx_queues.len(), hash),
    }
    .run(context)
}

/// Hashed on both addresses, and not on both ports.
fn addresses_only(hash: FlowHash) -> bool {
    hash.has_addresses() && !hash.has_ports()
}

/// The finding for one device's UDP hash fields, if UDP is hashed on addresses only while
/// the device has `rx_queues` (at least two) to spread over.
pub fn judge(device: &str, rx_queues: usize, hash: &UdpHash) -> Option<Finding> {
    if rx_queues < 2 {
        return None;
    }
    let families: Vec<&str> = [("udp4", Some(hash.udp4)), ("udp6", hash.udp6)]
        .into_iter()
        .filter(|(_, fields)| fields.is_some_and(addresses_only))
        .map(|(family, _)| family)
        .collect();
    if families.is_empty() {
        return None;
    }
    let udp6 = match hash.udp6 {
        Some(fields) => fields.describe(),
        None => "not reported".into(),
    };
    Some(Finding {
        check: "udp_hash",
        severity: Severity::Info,
        summary: format!(
            "{device}: {} hashed on IP addresses only, over {rx_queues} rx queues",
            families.join(" and ")
        ),
        evidence: format!(
            "ETHTOOL_GRXFH on {device}: udp4 {}; udp6 {udp6}; sys/class/net/{device}/queues \
             has {rx_queues} rx queues",
            hash.udp4.describe()
        ),
        why: "without the ports in the hash every UDP flow between two hosts lands on one \
              queue and one CPU, however many queues the NIC has (the trade-off: fragments \
              carry no ports, so one datagram's fragments may then take different queues)."
            .into(),
        fix: Some(
            families
                .iter()
                .map(|family| format!("ethtool -N {device} rx-flow-hash {family} sdfn"))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ethtool::{RXH_IP_DST, RXH_IP_SRC};

    const ADDRESSES: FlowHash = FlowHash(RXH_IP_SRC | RXH_IP_DST);
    const FOUR_TUPLE: FlowHash = FlowHash(0xf0);

    #[test]
    fn udp_on_addresses_only_over_several_queues_is_a_note_with_the_fix() {
        let hash = UdpHash {
            udp4: ADDRESSES,
            udp6: Some(FOUR_TUPLE),
        };
        let f = judge("eth0", 4, &hash).unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(
            f.summary,
            "eth0: udp4 hashed on IP addresses only, over 4 rx queues"
        );
        assert!(
            f.evidence.contains("udp4 IP SA, IP DA; udp6 IP SA"),
            "{f:?}"
        );
        assert_eq!(
            f.fix.as_deref(),
            Some("ethtool -N eth0 rx-flow-hash udp4 sdfn")
        );
        let both = judge(
            "eth0",
            4,
            &UdpHash {
                udp4: ADDRESSES,
                udp6: Some(ADDRESSES),
            },
        )
        .unwrap();
        assert_eq!(
            both.fix.as_deref(),
            Some("ethtool -N eth0 rx-flow-hash udp4 sdfn; ethtool -N eth0 rx-flow-hash udp6 sdfn")
        );
    }

    #[test]
    fn ports_in_the_hash_one_queue_or_no_rss_is_fine() {
        let four = UdpHash {
            udp4: FOUR_TUPLE,
            udp6: None,
        };
        assert_eq!(judge("eth0", 4, &four), None);
        let addresses = UdpHash {
            udp4: ADDRESSES,
            udp6: Some(ADDRESSES),
        };
        assert_eq!(judge("eth0", 1, &addresses), None);
        let none = UdpHash {
            udp4: FlowHash(0),
            udp6: Some(FlowHash(0)),
        };
        assert_eq!(judge("eth0", 4, &none), None);
    }
}
