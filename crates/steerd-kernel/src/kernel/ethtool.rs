//! Driver statistics through the `SIOCETHTOOL` ioctl: what `ethtool -i` and `ethtool -S`
//! show. steerd needs it for per-queue packet counters on kernels (or drivers) without the
//! netdev family's `qstats-get`; the ethtool *netlink* family does not carry per-queue
//! driver stats, so the ioctl it is.
//!
//! The request structs are hand-written `#[repr(C)]` mirrors of `include/uapi/linux/ethtool.h`
//! (`struct ethtool_drvinfo`, `ethtool_sset_info`, `ethtool_gstrings`, `ethtool_stats`,
//! `ethtool_ringparam`, `ethtool_coalesce`, `ethtool_rxnfc`, `ethtool_gfeatures`); the
//! ioctl itself goes through nix. Hand-written because no maintained crate covers
//! `SIOCETHTOOL`: nix and libc stop at the ioctl number; the crates that issue it
//! (`ethernet-info`, `ethtool_sys`) read link settings only; and the `ethtool` crate
//! speaks the ethtool *netlink* family, asynchronously, which has no per-queue driver
//! stats and carries RSS hash fields only on kernels from 2025 on. One [`Ethtool`] keeps
//! its socket and its buffers, so a sample allocates nothing once they have grown.
//!
//! The count of stats can change between calls (a channel count change, an XDP program),
//! and the kernel fills `ETHTOOL_GSTRINGS`/`ETHTOOL_GSTATS` with *its current* count, not
//! the one the caller sized the buffer for. So every sample re-reads `ETHTOOL_GSSET_INFO`,
//! sizes the buffers with slack, checks the count the kernel wrote back and retries when it
//! moved.
//!
//! This module is the transport: the socket, the one ioctl every request goes through
//! (`Ethtool::call`, also used by `kernel::rss` for the RSS requests), the gets of a
//! fixed-size struct answered in place, the string sets (`ETHTOOL_GSSET_INFO`,
//! `ETHTOOL_GSTRINGS`) that driver stats and features are both named by, and the
//! errors. The readers of each command are in their own modules, one per `ethtool`
//! option, and re-exported here: `stats` (`-i`, `-S`), `settings` (`-g`, `-c`),
//! `flow_hash` (`-n ... rx-flow-hash`) and `features` (`-k`).

mod features;
mod flow_hash;
mod settings;
mod stats;

pub use features::{FeatureState, Features};
pub(crate) use flow_hash::{ETHTOOL_GRXFH, Rxnfc};
pub use flow_hash::{
    FlowHash, RXH_DISCARD, RXH_IP_DST, RXH_IP_SRC, RXH_L2DA, RXH_L3_PROTO, RXH_L4_B_0_1,
    RXH_L4_B_2_3, RXH_VLAN, TCP_V4_FLOW, TCP_V6_FLOW, UDP_V4_FLOW, UDP_V6_FLOW,
};
pub use settings::{Coalesce, RingParams};
pub use stats::{DriverInfo, Stats};

use std::borrow::Cow;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};

use crate::error::Error;

/// `SIOCETHTOOL` (`include/uapi/linux/sockios.h`).
const SIOCETHTOOL: nix::libc::c_ulong = 0x8946;
/// Commands (`ethtool.h`) of the string sets.
const ETHTOOL_GSSET_INFO: u32 = 0x0000_0037;
const ETHTOOL_GSTRINGS: u32 = 0x0000_001b;
/// `ETH_GSTRING_LEN`: each stat name is a NUL-padded 32-byte field.
pub const ETH_GSTRING_LEN: usize = 32;
/// `IFNAMSIZ`, including the terminating NUL.
const IFNAMSIZ: usize = 16;

/// The `#[repr(C)]` request structs of a fixed size that the kernel fills in place, so
/// that [`Ethtool::get`] passes no other type as a command's buffer.
trait AnsweredInPlace {}

/// `struct ethtool_sset_info` with room for the one `data[]` entry we ask for: the kernel
/// writes one `u32` per bit set in the returned `sset_mask`, and we request one bit.
#[repr(C)]
struct EthtoolSsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: [u32; 1],
}

/// `struct ifreq` as used by `SIOCETHTOOL`: the name, then `ifr_data` (a pointer) in the
/// union, padded to the union's size (24 bytes on 64-bit).
#[repr(C)]
struct IfreqData {
    name: [u8; IFNAMSIZ],
    data: *mut nix::libc::c_void,
    _pad: [u8; 24 - std::mem::size_of::<usize>()],
}

nix::ioctl_readwrite_bad!(ethtool_ioctl, SIOCETHTOOL, IfreqData);

/// A `SIOCETHTOOL` client: an `AF_INET` datagram socket (in the calling thread's network
/// namespace) plus reusable buffers.
#[derive(Debug)]
pub struct Ethtool {
    socket: OwnedFd,
    /// `struct ethtool_gstrings` header (12 bytes) + names.
    strings: Vec<u8>,
    /// `struct ethtool_stats` header (8 bytes, one `u64` slot) + values.
    values: Vec<u64>,
    /// Stats in the last successful sample.
    count: usize,
}

/// Why a request failed, before it becomes an [`Error`] naming the device.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The ioctl failed with this errno.
    Errno { command: &'static str, errno: Errno },
    /// Something else (bad name, a count that would not settle, no string set).
    Other {
        command: &'static str,
        reason: String,
    },
}

impl Failure {
    /// ENODEV (the device is gone) or EOPNOTSUPP (no driver stats): "no counters here".
    fn is_absent(&self) -> bool {
        matches!(
            self,
            Failure::Errno {
                errno: Errno::ENODEV | Errno::EOPNOTSUPP,
                ..
            }
        )
    }

    fn into_error(self, ifname: &str) -> Error {
        let (command, reason) = match self {
            Failure::Errno { command, errno } => (command, errno.to_string()),
            Failure::Other { command, reason } => (command, reason),
        };
        Error::Kernel {
            what: format!("SIOCETHTOOL {command} on {ifname}"),
            reason,
        }
    }
}

/// A NUL-padded fixed-size C string field as text.
fn gstring(field: &[u8]) -> Cow<'_, str> {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(field.get(..end).unwrap_or_default())
}

impl Ethtool {
    pub fn new() -> Result<Self, Error> {
        let socket = socket(
            AddressFamily::Inet,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|errno| Error::Kernel {
            what: "socket(AF_INET, SOCK_DGRAM) for SIOCETHTOOL".into(),
            reason: errno.to_string(),
        })?;
        Ok(Ethtool {
            socket,
            strings: Vec::new(),
            values: Vec::new(),
            count: 0,
        })
    }

    /// `ETHTOOL_GSSET_INFO` for one string set: its current size, `None` when the device
    /// has none (the kernel answers without the set's bit).
    fn count_set(&self, ifname: &str, set: u32) -> Result<Option<u32>, Failure> {
        let mut info = EthtoolSsetInfo {
            cmd: ETHTOOL_GSSET_INFO,
            reserved: 0,
            sset_mask: 1 << set,
            data: [0],
        };
        self.call(
            ifname,
            "ETHTOOL_GSSET_INFO",
            (&mut info as *mut EthtoolSsetInfo).cast(),
        )?;
        if info.sset_mask & (1 << set) == 0 {
            return Ok(None);
        }
        Ok(Some(info.data[0]))
    }

    /// Room for `count` entries plus slack, so that a count that grew since
    /// `ETHTOOL_GSSET_INFO` (a channel count change racing with the sample) still lands
    /// inside the buffer; the count check then retries. The ioctl has no length field the
    /// kernel honours, so a count that more than doubles within microseconds would still
    /// overrun: ethtool(8) itself allocates the exact count and has the same exposure.
    fn with_slack(count: usize) -> usize {
        count * 2 + 256
    }

    /// `ETHTOOL_GSTRINGS` for string set `set` into `buffer` (the 12-byte header, then
    /// the names); false when the kernel's count differs from `count`.
    fn strings_into(
        &self,
        buffer: &mut Vec<u8>,
        ifname: &str,
        set: u32,
        count: usize,
    ) -> Result<bool, Failure> {
        let room = Self::with_slack(count);
        let length = 12 + room * ETH_GSTRING_LEN;
        buffer.clear();
        buffer.resize(length, 0);
        // struct ethtool_gstrings { __u32 cmd; __u32 string_set; __u32 len; __u8 data[]; }
        let header = [ETHTOOL_GSTRINGS, set, count as u32];
        for (slot, word) in buffer.chunks_exact_mut(4).zip(header) {
            slot.copy_from_slice(&word.to_ne_bytes());
        }
        let pointer = buffer.as_mut_ptr().cast();
        self.call(ifname, "ETHTOOL_GSTRINGS", pointer)?;
        let written = buffer
            .get(8..12)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_ne_bytes)
            .unwrap_or(u32::MAX) as usize;
        Ok(written == count)
    }

    /// One get of a fixed-size struct the kernel answers in place: the ioctl with
    /// `request` (its `cmd` set) as the buffer, a failure named by `command` and the
    /// device. Shared by the gets that need no sizing (driver info, rings, coalescing,
    /// flow hash fields).
    fn get<T: AnsweredInPlace>(
        &self,
        ifname: &str,
        command: &'static str,
        mut request: T,
    ) -> Result<T, Error> {
        self.call(ifname, command, (&mut request as *mut T).cast())
            .map_err(|f| f.into_error(ifname))?;
        Ok(request)
    }

    /// Issues `SIOCETHTOOL` for `ifname` with `data` as `ifr_data`. `data` must point at
    /// a buffer laid out as `command`'s struct and large enough for all the kernel writes
    /// for it (`kernel::rss` uses it for the RSS requests).
    pub(crate) fn call(
        &self,
        ifname: &str,
        command: &'static str,
        data: *mut nix::libc::c_void,
    ) -> Result<(), Failure> {
        let bytes = ifname.as_bytes();
        if bytes.is_empty() || bytes.len() >= IFNAMSIZ || bytes.contains(&0) {
            return Err(Failure::Other {
                command,
                reason: format!("invalid interface name {ifname:?}"),
            });
        }
        let mut request = IfreqData {
            name: [0; IFNAMSIZ],
            data,
            _pad: [0; 24 - std::mem::size_of::<usize>()],
        };
        if let Some(name) = request.name.get_mut(..bytes.len()) {
            name.copy_from_slice(bytes);
        }
        // SAFETY: `request` is a valid `struct ifreq` the kernel reads; `data` points at a
        // buffer laid out as the command's struct and sized for what the kernel writes
        // (see the slack in `with_slack` for the variable-length ones).
        unsafe { ethtool_ioctl(self.socket.as_raw_fd(), &mut request) }
            .map(|_| ())
            .map_err(|errno| Failure::Errno { command, errno })
    }
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;
    // Besides the re-exports: a request struct and command numbers of the readers' modules.
    use super::features::{ETH_SS_FEATURES, ETHTOOL_GFEATURES};
    use super::stats::EthtoolDrvinfo;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(std::mem::size_of::<EthtoolDrvinfo>(), 196);
        // 4 (cmd) + 5 * 32 (strings) + 12 (reserved2) + 4 (n_priv_flags).
        assert_eq!(std::mem::offset_of!(EthtoolDrvinfo, n_stats), 180);
        assert_eq!(std::mem::size_of::<EthtoolSsetInfo>(), 24);
        assert_eq!(std::mem::size_of::<RingParams>(), 36);
        assert_eq!(std::mem::size_of::<Coalesce>(), 92);
        // cmd + 8 rx/tx fields + stats_block_coalesce_usecs.
        assert_eq!(std::mem::offset_of!(Coalesce, use_adaptive_rx_coalesce), 40);
        assert_eq!(std::mem::offset_of!(IfreqData, data), 16);
        // cmd, flow_type, data (u64), then struct ethtool_rx_flow_spec: flow_type 4,
        // h_u 52, h_ext 20, m_u 52, m_ext 20, ring_cookie (u64, at 152) 8, location 4,
        // padded to 168; then rule_cnt 4, padded to 8.
        assert_eq!(std::mem::offset_of!(Rxnfc, flow_type), 4);
        assert_eq!(std::mem::offset_of!(Rxnfc, data), 8);
        assert_eq!(std::mem::size_of::<Rxnfc>(), 16 + 168 + 8);
        assert_eq!(
            std::mem::size_of::<IfreqData>(),
            std::mem::size_of::<nix::libc::ifreq>()
        );
    }

    #[test]
    fn names_are_nul_trimmed_and_keep_leading_spaces() {
        let mut names = vec![0u8; 2 * ETH_GSTRING_LEN];
        names[..10].copy_from_slice(b"rx_packets");
        names[32..48].copy_from_slice(b"  ucast pkts rx\0");
        let values = [5u64, 6];
        let stats = Stats {
            names: &names,
            values: &values,
        };
        let pairs: Vec<_> = stats.iter().map(|(n, v)| (n.into_owned(), v)).collect();
        assert_eq!(
            pairs,
            vec![("rx_packets".into(), 5), ("  ucast pkts rx".into(), 6)]
        );
        assert_eq!(stats.name(2), None);
    }

    #[test]
    fn rxh_bits_and_flow_types_are_the_kernels() {
        // include/uapi/linux/ethtool.h.
        assert_eq!(
            (RXH_IP_SRC, RXH_IP_DST, RXH_L4_B_0_1, RXH_L4_B_2_3),
            (0x10, 0x20, 0x40, 0x80)
        );
        assert_eq!((UDP_V4_FLOW, UDP_V6_FLOW), (2, 6));
        assert_eq!((TCP_V4_FLOW, TCP_V6_FLOW), (1, 5));
        assert_eq!((ETHTOOL_GRXFH, ETHTOOL_GFEATURES), (0x29, 0x3a));
        assert_eq!(ETH_SS_FEATURES, 4);
    }

    #[test]
    fn flow_hash_fields_read_as_ethtool_prints_them() {
        let addresses = FlowHash(RXH_IP_SRC | RXH_IP_DST);
        assert!(addresses.has_addresses() && !addresses.has_ports());
        assert_eq!(addresses.describe(), "IP SA, IP DA");
        let four_tuple = FlowHash(0xf0);
        assert!(four_tuple.has_addresses() && four_tuple.has_ports());
        assert_eq!(
            four_tuple.describe(),
            "IP SA, IP DA, L4 bytes 0 & 1 [TCP/UDP src port], L4 bytes 2 & 3 [TCP/UDP dst port]"
        );
        assert!(!FlowHash(RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1).has_ports());
        assert_eq!(FlowHash(0).describe(), "None");
        assert_eq!(four_tuple.letters(), "sdfn");
        assert_eq!(addresses.letters(), "sd");
        assert_eq!(FlowHash(RXH_L3_PROTO | RXH_DISCARD).letters(), "tr");
        assert_eq!(FlowHash(0).letters(), "");
    }

    #[test]
    fn features_decode_bit_i_from_block_i_over_32() {
        let mut names = vec![0u8; 40 * ETH_GSTRING_LEN];
        let mut name = |bit: usize, text: &[u8]| {
            names[bit * ETH_GSTRING_LEN..bit * ETH_GSTRING_LEN + text.len()].copy_from_slice(text)
        };
        name(0, b"tx-scatter-gather");
        name(14, b"rx-gro");
        name(36, b"rx-ntuple-filter");
        // bit 14 in word 0: available, requested, active; bit 36 (word 1, bit 4):
        // available only; bit 0: never changed.
        let blocks = [[1 << 14, 1 << 14, 1 << 14, 1], [1 << 4, 0, 0, 0]];
        let features = Features::decode(&names, &blocks);
        let gro = features.get("rx-gro").unwrap();
        assert!(gro.active && gro.requested && !gro.fixed());
        let ntuple = features.get("rx-ntuple-filter").unwrap();
        assert!(ntuple.available && !ntuple.active && !ntuple.fixed());
        assert!(features.get("tx-scatter-gather").unwrap().fixed());
        // Unnamed bits are left out; bits past the filled blocks too.
        assert_eq!(features.iter().count(), 3);
        let one_block = Features::decode(&names, &blocks[..1]);
        assert_eq!(one_block.get("rx-ntuple-filter"), None);
    }

    #[test]
    fn a_full_32_byte_name_has_no_nul() {
        let field = [b'a'; ETH_GSTRING_LEN];
        assert_eq!(gstring(&field).len(), 32);
    }

    #[test]
    fn loopback_has_no_rings_or_coalescing_and_says_which_request_failed() {
        let ethtool = Ethtool::new().unwrap();
        let error = ethtool.ring_params("lo").unwrap_err().to_string();
        assert!(error.contains("ETHTOOL_GRINGPARAM on lo"), "{error}");
        let error = ethtool.coalesce("lo").unwrap_err().to_string();
        assert!(error.contains("ETHTOOL_GCOALESCE on lo"), "{error}");
    }

    /// On a real device (`lo`): the features answer, with GRO among them and ntuple
    /// fixed off; the flow hash is refused with EOPNOTSUPP (loopback has no RSS), and the
    /// error names the request. Skipped, saying why, when not root.
    #[test]
    fn loopback_answers_features_and_refuses_the_flow_hash() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: not root (SIOCETHTOOL on a real device is tested as root)");
            return;
        }
        let ethtool = Ethtool::new().unwrap();
        let features = ethtool.features("lo").unwrap();
        assert!(features.iter().count() > 20, "{features:?}");
        assert!(features.get("rx-gro").is_some(), "{features:?}");
        let ntuple = features.get("rx-ntuple-filter").unwrap();
        assert!(ntuple.fixed() && !ntuple.active, "{ntuple:?}");
        let error = ethtool.rx_flow_hash("lo", UDP_V4_FLOW).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("ETHTOOL_GRXFH on lo"), "{text}");
        assert!(
            text.contains(&Errno::EOPNOTSUPP.to_string()),
            "not EOPNOTSUPP: {text}"
        );
        let error = ethtool.features("no-such-dev0").unwrap_err().to_string();
        assert!(error.contains(&Errno::ENODEV.to_string()), "{error}");
    }

    #[test]
    fn bad_interface_names_are_errors() {
        let ethtool = Ethtool::new().unwrap();
        for name in ["", "a-name-that-is-too-long", "nul\0"] {
            let error = ethtool.driver_info(name).unwrap_err().to_string();
            assert!(error.contains("invalid interface name"), "{error}");
        }
    }
}
