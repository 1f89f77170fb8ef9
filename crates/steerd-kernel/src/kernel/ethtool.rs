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

use std::borrow::Cow;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};

use crate::error::Error;

/// `SIOCETHTOOL` (`include/uapi/linux/sockios.h`).
const SIOCETHTOOL: nix::libc::c_ulong = 0x8946;
/// Commands (`ethtool.h`).
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
const ETHTOOL_GSTRINGS: u32 = 0x0000_001b;
const ETHTOOL_GSTATS: u32 = 0x0000_001d;
const ETHTOOL_GSSET_INFO: u32 = 0x0000_0037;
const ETHTOOL_GRINGPARAM: u32 = 0x0000_0010;
const ETHTOOL_GCOALESCE: u32 = 0x0000_000e;
pub(crate) const ETHTOOL_GRXFH: u32 = 0x0000_0029;
const ETHTOOL_GFEATURES: u32 = 0x0000_003a;
/// `enum ethtool_stringset`: `ETH_SS_STATS`, `ETH_SS_FEATURES`.
const ETH_SS_STATS: u32 = 1;
const ETH_SS_FEATURES: u32 = 4;
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
/// The most feature bits steerd accepts from `ETHTOOL_GSSET_INFO` for `ETH_SS_FEATURES`:
/// kernels have 64 (`ETHTOOL_DEV_FEATURE_WORDS` 2); room for growth, and a bound on the
/// buffers a bad answer could size.
const MAX_FEATURES: usize = 1024;
/// `ETH_GSTRING_LEN`: each stat name is a NUL-padded 32-byte field.
pub const ETH_GSTRING_LEN: usize = 32;
/// `IFNAMSIZ`, including the terminating NUL.
const IFNAMSIZ: usize = 16;
/// How often a sample is retried when the stat count moves under it.
const COUNT_RETRIES: usize = 3;

/// The `#[repr(C)]` request structs of a fixed size that the kernel fills in place, so
/// that [`Ethtool::get`] passes no other type as a command's buffer.
trait AnsweredInPlace {}
impl AnsweredInPlace for EthtoolDrvinfo {}
impl AnsweredInPlace for RingParams {}
impl AnsweredInPlace for Coalesce {}
impl AnsweredInPlace for Rxnfc {}

/// `struct ethtool_drvinfo` (196 bytes).
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

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

/// `struct ethtool_ringparam` (36 bytes): what `ethtool -g` shows.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingParams {
    cmd: u32,
    pub rx_max_pending: u32,
    pub rx_mini_max_pending: u32,
    pub rx_jumbo_max_pending: u32,
    pub tx_max_pending: u32,
    pub rx_pending: u32,
    pub rx_mini_pending: u32,
    pub rx_jumbo_pending: u32,
    pub tx_pending: u32,
}

/// `struct ethtool_coalesce` (92 bytes): what `ethtool -c` shows. Only the receive
/// fields are public; the rest are there for the layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coalesce {
    cmd: u32,
    pub rx_coalesce_usecs: u32,
    pub rx_max_coalesced_frames: u32,
    rx_coalesce_usecs_irq: u32,
    rx_max_coalesced_frames_irq: u32,
    tx: [u32; 5],
    pub use_adaptive_rx_coalesce: u32,
    use_adaptive_tx_coalesce: u32,
    rest: [u32; 11],
}

impl Coalesce {
    /// Receive coalescing as `ethtool -c` prints it: rx-usecs, rx-frames, adaptive-rx.
    pub fn rx(usecs: u32, frames: u32, adaptive: bool) -> Self {
        Coalesce {
            rx_coalesce_usecs: usecs,
            rx_max_coalesced_frames: frames,
            use_adaptive_rx_coalesce: u32::from(adaptive),
            ..Coalesce::default()
        }
    }
}

impl RingParams {
    /// Sizes as `ethtool -g` prints them: current RX and TX, and their maxima.
    pub fn new(rx_pending: u32, rx_max_pending: u32, tx_pending: u32, tx_max_pending: u32) -> Self {
        RingParams {
            rx_pending,
            rx_max_pending,
            tx_pending,
            tx_max_pending,
            ..RingParams::default()
        }
    }
}

/// `struct ethtool_rxnfc` (192 bytes on 64-bit) for `ETHTOOL_GRXFH`: the kernel reads
/// `cmd` and `flow_type` and writes the hashed fields into `data` (only those 16 bytes
/// without `FLOW_RSS`, but the whole struct is there so a kernel that copies more writes
/// into our memory). `fs` (`struct ethtool_rx_flow_spec`, 168 bytes), `rule_cnt` and
/// the padding to 8 are opaque here.
#[repr(C)]
pub(crate) struct Rxnfc {
    cmd: u32,
    flow_type: u32,
    pub(crate) data: u64,
    rest: [u64; 22],
}

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

/// One device feature's state from `ETHTOOL_GFEATURES`, as `ethtool -k` prints it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureState {
    /// The device lets it be changed (`hw_features`).
    pub available: bool,
    /// What was asked for (`wanted_features`).
    pub requested: bool,
    /// On now (`features`).
    pub active: bool,
    /// The kernel never lets it change (`NETIF_F_NEVER_CHANGE`).
    pub never_changed: bool,
}

impl FeatureState {
    /// `[fixed]` in `ethtool -k`: not changeable on this device.
    pub fn fixed(self) -> bool {
        !self.available || self.never_changed
    }
}

/// A device's features by kernel name (`rx-gro`, `rx-gro-hw`, `rx-ntuple-filter`, ...):
/// the `ETH_SS_FEATURES` names with their `ETHTOOL_GFEATURES` bits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features(Vec<(String, FeatureState)>);

impl Features {
    /// Features from `(name, state)` pairs (as the ioctl would answer).
    pub fn new(states: impl IntoIterator<Item = (String, FeatureState)>) -> Self {
        Features(states.into_iter().collect())
    }

    /// The state of the feature named `name`, if the kernel has it.
    pub fn get(&self, name: &str) -> Option<FeatureState> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, s)| *s)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, FeatureState)> {
        self.0.iter().map(|(n, s)| (n.as_str(), *s))
    }

    /// Decodes the `ETH_SS_FEATURES` name table (`ETH_GSTRING_LEN` bytes a name, bit `i`
    /// named by entry `i`; empty names are unused bits) with the `ETHTOOL_GFEATURES`
    /// blocks (`[available, requested, active, never_changed]`, 32 bits each, bit `i` in
    /// block `i / 32`). Bits beyond the blocks the kernel filled are left out.
    fn decode(names: &[u8], blocks: &[[u32; 4]]) -> Self {
        let mut states = Vec::new();
        for (bit, field) in names.chunks_exact(ETH_GSTRING_LEN).enumerate() {
            let name = gstring(field);
            let Some(block) = blocks.get(bit / 32) else {
                break;
            };
            if name.is_empty() {
                continue;
            }
            let mask = 1u32 << (bit % 32);
            let [available, requested, active, never_changed] = block.map(|w| w & mask != 0);
            states.push((
                name.into_owned(),
                FeatureState {
                    available,
                    requested,
                    active,
                    never_changed,
                },
            ));
        }
        Features(states)
    }
}

/// What `ETHTOOL_GDRVINFO` says about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInfo {
    /// The driver's name, e.g. `virtio_net`, `veth`, `mlx5_core`.
    pub driver: String,
    pub version: String,
    pub firmware_version: String,
    /// e.g. `0000:00:03.0`; empty for virtual devices.
    pub bus_info: String,
    /// The stat count at the time of the call (re-read it per sample: it changes).
    pub n_stats: u32,
}

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

/// One sample of a device's driver statistics, borrowed from the [`Ethtool`] buffers.
#[derive(Debug, Clone, Copy)]
pub struct Stats<'a> {
    names: &'a [u8],
    values: &'a [u64],
}

impl<'a> Stats<'a> {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The raw name table: `len() * ETH_GSTRING_LEN` bytes, NUL-padded names. Comparing it
    /// with the previous sample's tells whether the names changed.
    pub fn raw_names(&self) -> &'a [u8] {
        self.names
    }

    pub fn values(&self) -> &'a [u64] {
        self.values
    }

    /// The `index`th name, NUL-trimmed (leading spaces kept: vmxnet3 indents its
    /// per-queue names).
    pub fn name(&self, index: usize) -> Option<Cow<'a, str>> {
        let start = index.checked_mul(ETH_GSTRING_LEN)?;
        let field = self.names.get(start..start + ETH_GSTRING_LEN)?;
        Some(gstring(field))
    }

    /// `(name, value)` pairs in the driver's order.
    pub fn iter(&self) -> impl Iterator<Item = (Cow<'a, str>, u64)> + 'a {
        let names = self.names;
        names
            .chunks_exact(ETH_GSTRING_LEN)
            .map(gstring)
            .zip(self.values.iter().copied())
    }
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

    /// `ETHTOOL_GDRVINFO`. Fails with EOPNOTSUPP for devices without a driver (`lo`) and
    /// ENODEV for a device that does not exist (any more).
    pub fn driver_info(&self, ifname: &str) -> Result<DriverInfo, Error> {
        let info = EthtoolDrvinfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            version: [0; 32],
            fw_version: [0; 32],
            bus_info: [0; 32],
            erom_version: [0; 32],
            reserved2: [0; 12],
            n_priv_flags: 0,
            n_stats: 0,
            testinfo_len: 0,
            eedump_len: 0,
            regdump_len: 0,
        };
        let info = self.get(ifname, "ETHTOOL_GDRVINFO", info)?;
        Ok(DriverInfo {
            driver: gstring(&info.driver).into_owned(),
            version: gstring(&info.version).into_owned(),
            firmware_version: gstring(&info.fw_version).into_owned(),
            bus_info: gstring(&info.bus_info).into_owned(),
            n_stats: info.n_stats,
        })
    }

    /// `ETHTOOL_GRINGPARAM`: the ring sizes (`ethtool -g`). Fails with EOPNOTSUPP for
    /// devices whose driver has no rings to report (`lo`, veth).
    pub fn ring_params(&self, ifname: &str) -> Result<RingParams, Error> {
        let rings = RingParams {
            cmd: ETHTOOL_GRINGPARAM,
            ..RingParams::default()
        };
        self.get(ifname, "ETHTOOL_GRINGPARAM", rings)
    }

    /// `ETHTOOL_GCOALESCE`: interrupt coalescing (`ethtool -c`). Fails with EOPNOTSUPP
    /// where the driver does not report it.
    pub fn coalesce(&self, ifname: &str) -> Result<Coalesce, Error> {
        let coalesce = Coalesce {
            cmd: ETHTOOL_GCOALESCE,
            ..Coalesce::default()
        };
        self.get(ifname, "ETHTOOL_GCOALESCE", coalesce)
    }

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

    /// The device's features with their names (`ETHTOOL_GSSET_INFO` and
    /// `ETHTOOL_GSTRINGS` for `ETH_SS_FEATURES`, then `ETHTOOL_GFEATURES`): what
    /// `ethtool -k` shows, under the kernel's names (`rx-gro` is "generic-receive-offload",
    /// `rx-ntuple-filter` "ntuple-filters"). Every device answers: the features are the
    /// core's, not the driver's. Hand-written (see the module's doc) so that it needs no
    /// async netlink stack; the names make it robust to the kernel renumbering feature
    /// bits, unlike the legacy `ETHTOOL_GGRO`/`ETHTOOL_GFLAGS`.
    pub fn features(&self, ifname: &str) -> Result<Features, Error> {
        self.read_features(ifname).map_err(|f| f.into_error(ifname))
    }

    fn read_features(&self, ifname: &str) -> Result<Features, Failure> {
        let Some(count) = self.count_set(ifname, ETH_SS_FEATURES)? else {
            return Err(Failure::Other {
                command: "ETHTOOL_GSSET_INFO",
                reason: "no feature string set".into(),
            });
        };
        let count = count as usize;
        if count > MAX_FEATURES {
            return Err(Failure::Other {
                command: "ETHTOOL_GSSET_INFO",
                reason: format!("{count} features, more than the {MAX_FEATURES} steerd accepts"),
            });
        }
        let mut names = Vec::new();
        if !self.strings_into(&mut names, ifname, ETH_SS_FEATURES, count)? {
            return Err(Failure::Other {
                command: "ETHTOOL_GSTRINGS",
                reason: "the feature count changed between calls".into(),
            });
        }
        // struct ethtool_gfeatures { __u32 cmd; __u32 size; struct
        // ethtool_get_features_block features[size]; }: the kernel copies at most `size`
        // blocks (its own count when fewer) and writes its count back into `size`.
        let words = count.div_ceil(32);
        let mut buffer = vec![0u32; 2 + 4 * words];
        buffer[0] = ETHTOOL_GFEATURES;
        buffer[1] = words as u32;
        self.call(ifname, "ETHTOOL_GFEATURES", buffer.as_mut_ptr().cast())?;
        let filled = (buffer[1] as usize).min(words);
        let blocks: Vec<[u32; 4]> = buffer
            .get(2..)
            .unwrap_or_default()
            .chunks_exact(4)
            .take(filled)
            .map(|b| [b[0], b[1], b[2], b[3]])
            .collect();
        let table = names
            .get(12..12 + count * ETH_GSTRING_LEN)
            .unwrap_or_default();
        Ok(Features::decode(table, &blocks))
    }

    /// `ETHTOOL_GSSET_INFO` for `ETH_SS_STATS`: the current number of driver stats, `None`
    /// when the device has no stats string set (the kernel answers without the bit).
    pub fn stats_count(&self, ifname: &str) -> Result<Option<u32>, Error> {
        self.count_stats(ifname).map_err(|f| f.into_error(ifname))
    }

    /// One sample of all driver stats (`ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS`,
    /// `ETHTOOL_GSTATS`), borrowed from this client's buffers. A device without stats
    /// (`lo`) is an EOPNOTSUPP error, a vanished one ENODEV.
    pub fn sample(&mut self, ifname: &str) -> Result<Stats<'_>, Error> {
        match self.fill(ifname) {
            Ok(true) => Ok(self.last_sample()),
            Ok(false) => Err(Failure::Errno {
                command: "ETHTOOL_GSSET_INFO",
                errno: Errno::EOPNOTSUPP,
            }
            .into_error(ifname)),
            Err(failure) => Err(failure.into_error(ifname)),
        }
    }

    /// [`Self::sample`], but `Ok(None)` when the device has no driver stats (EOPNOTSUPP,
    /// no string set) or no longer exists (ENODEV): the cases a per-tick caller treats as
    /// "no counters here" rather than as a failure.
    pub fn sample_if_available(&mut self, ifname: &str) -> Result<Option<Stats<'_>>, Error> {
        match self.fill(ifname) {
            Ok(true) => Ok(Some(self.last_sample())),
            Ok(false) => Ok(None),
            Err(failure) if failure.is_absent() => Ok(None),
            Err(failure) => Err(failure.into_error(ifname)),
        }
    }

    /// Owned `(name, value)` pairs: [`Self::sample`] for callers that keep the result.
    pub fn stats(&mut self, ifname: &str) -> Result<Vec<(String, u64)>, Error> {
        let sample = self.sample(ifname)?;
        Ok(sample
            .iter()
            .map(|(name, value)| (name.into_owned(), value))
            .collect())
    }

    /// Reads names and values into the buffers; false when there is no stats string set.
    fn fill(&mut self, ifname: &str) -> Result<bool, Failure> {
        for _ in 0..COUNT_RETRIES {
            let Some(count) = self.count_stats(ifname)? else {
                return Ok(false);
            };
            let count = count as usize;
            if self.read_strings(ifname, count)? && self.read_values(ifname, count)? {
                self.count = count;
                return Ok(true);
            }
        }
        Err(Failure::Other {
            command: "ETHTOOL_GSTATS",
            reason: format!("the stat count kept changing over {COUNT_RETRIES} attempts"),
        })
    }

    /// The last successful sample, still in the buffers.
    fn last_sample(&self) -> Stats<'_> {
        let count = self.count;
        Stats {
            names: self
                .strings
                .get(12..12 + count * ETH_GSTRING_LEN)
                .unwrap_or_default(),
            values: self.values.get(1..1 + count).unwrap_or_default(),
        }
    }

    fn count_stats(&self, ifname: &str) -> Result<Option<u32>, Failure> {
        let Some(count) = self.count_set(ifname, ETH_SS_STATS)? else {
            return Ok(None);
        };
        // The count sizes the name and value buffers: bound it.
        if count as usize > crate::limits::MAX_ETHTOOL_STATS {
            return Err(Failure::Other {
                command: "ETHTOOL_GSSET_INFO",
                reason: format!(
                    "{count} statistics, more than the {} steerd accepts",
                    crate::limits::MAX_ETHTOOL_STATS
                ),
            });
        }
        Ok(Some(count))
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

    /// `ETHTOOL_GSTRINGS` into `self.strings`; false when the kernel's count differs.
    fn read_strings(&mut self, ifname: &str, count: usize) -> Result<bool, Failure> {
        let mut strings = std::mem::take(&mut self.strings);
        let read = self.strings_into(&mut strings, ifname, ETH_SS_STATS, count);
        self.strings = strings;
        read
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

    /// `ETHTOOL_GSTATS` into `self.values`; false when the kernel's count differs.
    fn read_values(&mut self, ifname: &str, count: usize) -> Result<bool, Failure> {
        let room = Self::with_slack(count);
        self.values.clear();
        self.values.resize(1 + room, 0);
        // struct ethtool_stats { __u32 cmd; __u32 n_stats; __u64 data[]; }: the two u32
        // fields share the first u64 slot, in memory order.
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
        header[4..].copy_from_slice(&(count as u32).to_ne_bytes());
        if let Some(first) = self.values.first_mut() {
            *first = u64::from_ne_bytes(header);
        }
        let pointer = self.values.as_mut_ptr().cast();
        self.call(ifname, "ETHTOOL_GSTATS", pointer)?;
        let header = self.values.first().copied().unwrap_or(0).to_ne_bytes();
        let written = u32::from_ne_bytes([header[4], header[5], header[6], header[7]]) as usize;
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
mod tests {
    use super::*;

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
