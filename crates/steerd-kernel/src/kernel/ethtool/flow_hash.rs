//! What `ethtool -n DEV rx-flow-hash TYPE` shows: the header fields a NIC's RSS hash
//! covers for one flow type (`ETHTOOL_GRXFH`), with the `RXH_*` bits and flow types, and
//! `struct ethtool_rxnfc`, which `kernel::rss` sends for `ETHTOOL_GRXRINGS` too.
//!
//! A module of its own because the hash fields have several readers: doctor and discovery
//! ask one flow type at a time, `kernel::rss` all four with the rest of a NIC's RSS state.

use super::{AnsweredInPlace, Ethtool};
use crate::error::Error;

/// The command (`ethtool.h`).
pub(crate) const ETHTOOL_GRXFH: u32 = 0x0000_0029;
/// Flow types for `ETHTOOL_GRXFH` (`ethtool.h`, "L2-L4 network traffic flow types").
pub const TCP_V4_FLOW: u32 = 0x01;
pub const UDP_V4_FLOW: u32 = 0x02;
pub const TCP_V6_FLOW: u32 = 0x05;
pub const UDP_V6_FLOW: u32 = 0x06;
/// The fields an RSS hash covers (`RXH_*` bits of `ethtool_rxnfc.data`).
pub const RXH_L2DA: u64 = 1 << 1;
pub const RXH_VLAN: u64 = 1 << 2;
pub const RXH_L3_PROTO: u64 = 1 << 3;
pub const RXH_IP_SRC: u64 = 1 << 4;
pub const RXH_IP_DST: u64 = 1 << 5;
/// Source port for TCP/UDP/SCTP.
pub const RXH_L4_B_0_1: u64 = 1 << 6;
/// Destination port for TCP/UDP/SCTP.
pub const RXH_L4_B_2_3: u64 = 1 << 7;
pub const RXH_DISCARD: u64 = 1 << 31;

/// `struct ethtool_rxnfc` (192 bytes on 64-bit) for `ETHTOOL_GRXFH`: the kernel reads
/// `cmd` and `flow_type` and writes the hashed fields into `data` (only those 16 bytes
/// without `FLOW_RSS`, but the whole struct is there so a kernel that copies more writes
/// into our memory). `fs` (`struct ethtool_rx_flow_spec`, 168 bytes), `rule_cnt` and
/// the padding to 8 are opaque here.
#[repr(C)]
pub(crate) struct Rxnfc {
    cmd: u32,
    pub(super) flow_type: u32,
    pub(crate) data: u64,
    rest: [u64; 22],
}

impl AnsweredInPlace for Rxnfc {}

impl Rxnfc {
    /// A request for `cmd` (`ETHTOOL_GRXFH`, `ETHTOOL_GRXRINGS`, ...) on `flow_type`.
    pub(crate) fn new(cmd: u32, flow_type: u32) -> Self {
        Rxnfc {
            cmd,
            flow_type,
            data: 0,
            rest: [0; 22],
        }
    }
}

/// The fields a NIC's RSS hash covers for one flow type (`ETHTOOL_GRXFH`, what
/// `ethtool -n DEV rx-flow-hash udp4` shows): `RXH_*` bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowHash(pub u64);

impl FlowHash {
    /// Both IP addresses are hashed.
    pub fn has_addresses(self) -> bool {
        self.0 & (RXH_IP_SRC | RXH_IP_DST) == RXH_IP_SRC | RXH_IP_DST
    }

    /// Both L4 ports are hashed.
    pub fn has_ports(self) -> bool {
        self.0 & (RXH_L4_B_0_1 | RXH_L4_B_2_3) == RXH_L4_B_0_1 | RXH_L4_B_2_3
    }

    /// The fields in the letters `ethtool -N DEV rx-flow-hash TYPE` takes: `sd` for both
    /// addresses, `sdfn` with both ports (`m` L2 destination, `v` VLAN, `t` L3 protocol,
    /// `r` discard); empty when nothing is hashed.
    pub fn letters(self) -> String {
        const LETTERS: [(u64, char); 8] = [
            (RXH_L2DA, 'm'),
            (RXH_VLAN, 'v'),
            (RXH_L3_PROTO, 't'),
            (RXH_IP_SRC, 's'),
            (RXH_IP_DST, 'd'),
            (RXH_L4_B_0_1, 'f'),
            (RXH_L4_B_2_3, 'n'),
            (RXH_DISCARD, 'r'),
        ];
        LETTERS
            .iter()
            .filter(|(bit, _)| self.0 & bit != 0)
            .map(|(_, letter)| *letter)
            .collect()
    }

    /// The fields as `ethtool -n` names them: "IP SA, IP DA", or "None".
    pub fn describe(self) -> String {
        const NAMES: [(u64, &str); 8] = [
            (RXH_L2DA, "L2DA"),
            (RXH_VLAN, "VLAN tag"),
            (RXH_L3_PROTO, "L3 proto"),
            (RXH_IP_SRC, "IP SA"),
            (RXH_IP_DST, "IP DA"),
            (RXH_L4_B_0_1, "L4 bytes 0 & 1 [TCP/UDP src port]"),
            (RXH_L4_B_2_3, "L4 bytes 2 & 3 [TCP/UDP dst port]"),
            (RXH_DISCARD, "Discard all packets of this flow type"),
        ];
        let names: Vec<&str> = NAMES
            .iter()
            .filter(|(bit, _)| self.0 & bit != 0)
            .map(|(_, name)| *name)
            .collect();
        if names.is_empty() {
            "None".into()
        } else {
            names.join(", ")
        }
    }
}

impl Ethtool {
    /// `ETHTOOL_GRXFH`: the fields the RSS hash covers for `flow_type` ([`UDP_V4_FLOW`],
    /// [`UDP_V6_FLOW`], ...), what `ethtool -n DEV rx-flow-hash udp4` shows. Fails with
    /// EOPNOTSUPP where the driver does not report it (`lo`, veth, virtio without RSS on
    /// older kernels). Hand-written (see the module's doc): the ethtool netlink family
    /// reports hash fields only on kernels from 2025 on (`ETHTOOL_A_RSS_FLOW_HASH`), and
    /// no crate wraps either.
    pub fn rx_flow_hash(&self, ifname: &str, flow_type: u32) -> Result<FlowHash, Error> {
        let request = self.get(
            ifname,
            "ETHTOOL_GRXFH",
            Rxnfc::new(ETHTOOL_GRXFH, flow_type),
        )?;
        Ok(FlowHash(request.data))
    }
}
