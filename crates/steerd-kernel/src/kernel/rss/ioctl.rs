//! The `SIOCETHTOOL` path to a NIC's RSS state, which every kernel has: the ring count
//! (`ETHTOOL_GRXRINGS`), the table with its key and function (`ETHTOOL_GRSSH`, falling
//! back to the table alone by `ETHTOOL_GRXFHINDIR`), the flow types' hash fields
//! (`ETHTOOL_GRXFH`), and the writes of the table (`ETHTOOL_SRXFHINDIR`).
//!
//! It is a module of its own because it is one of two transports: [`super::read`] tries
//! `ETHTOOL_MSG_RSS_GET` ([`super::netlink`]) first and comes here where the kernel lacks
//! it, while the ring count, the hash fields and every write are ioctls on every kernel.
//! What the state and the errors are is the parent's; the structs' layouts and what the
//! kernel checks are described there.

use nix::errno::Errno;

use super::{
    FlowHashes, HashFunction, MAX_INDIRECTION, MAX_KEY, ReplyError, RssError, RssSource, RssState,
    check_entries,
};
use crate::kernel::ethtool::{
    ETHTOOL_GRXFH, Ethtool, FlowHash, Rxnfc, TCP_V4_FLOW, TCP_V6_FLOW, UDP_V4_FLOW, UDP_V6_FLOW,
};
use crate::limits::MAX_QUEUES;

/// Commands (`include/uapi/linux/ethtool.h`; `ETHTOOL_GRXFH` is `kernel::ethtool`'s).
const ETHTOOL_GRXRINGS: u32 = 0x0000_002d;
const ETHTOOL_GRXFHINDIR: u32 = 0x0000_0038;
const ETHTOOL_SRXFHINDIR: u32 = 0x0000_0039;
const ETHTOOL_GRSSH: u32 = 0x0000_0046;
/// `sizeof(struct ethtool_rxfh)`: cmd, rss_context, indir_size, key_size (u32 each),
/// `hfunc`, `input_xfrm`, `rsvd8[2]` (u8 each), `rsvd32` (u32); `rss_config[]` follows.
pub const RXFH_HEADER_LEN: usize = 24;
/// `sizeof(struct ethtool_rxfh_indir)`: cmd, size; `ring_index[]` follows.
pub const RXFH_INDIR_HEADER_LEN: usize = 8;
/// How often a read is tried again when the table's size changed under it (a channel
/// count change between the size query and the read).
const SIZE_RETRIES: usize = 3;

/// What the header of an `ETHTOOL_GRSSH` reply says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxfhHeader {
    pub indir_size: u32,
    pub key_size: u32,
    pub hash_function: HashFunction,
    pub input_xfrm: u8,
}

/// The table (and key) of an `ETHTOOL_GRSSH` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rxfh {
    pub header: RxfhHeader,
    pub indirection: Vec<u32>,
    pub key: Vec<u8>,
}

fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    let word = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_ne_bytes(word.try_into().ok()?))
}

/// Checks a table size and a key size the kernel reported against the caps.
fn check_sizes(indir_size: u32, key_size: u32) -> Result<(), ReplyError> {
    if indir_size > MAX_INDIRECTION {
        return Err(ReplyError::TableTooLarge {
            entries: indir_size as usize,
        });
    }
    if key_size > MAX_KEY {
        return Err(ReplyError::KeyTooLarge {
            bytes: key_size as usize,
        });
    }
    Ok(())
}

/// The header of an `ETHTOOL_GRSSH` reply (`struct ethtool_rxfh`), sizes checked against
/// [`MAX_INDIRECTION`] and [`MAX_KEY`].
pub fn parse_rxfh_header(reply: &[u8]) -> Result<RxfhHeader, ReplyError> {
    let short = || ReplyError::ShorterThanHeader {
        len: reply.len(),
        name: "ethtool_rxfh",
        needed: RXFH_HEADER_LEN,
    };
    let field = |offset| u32_at(reply, offset).ok_or_else(short);
    let indir_size = field(8)?;
    let key_size = field(12)?;
    let hfunc = reply.get(16).copied().unwrap_or(0);
    let input_xfrm = reply.get(17).copied().unwrap_or(0);
    if reply.len() < RXFH_HEADER_LEN {
        return Err(short());
    }
    check_sizes(indir_size, key_size)?;
    Ok(RxfhHeader {
        indir_size,
        key_size,
        hash_function: HashFunction(u32::from(hfunc)),
        input_xfrm,
    })
}

/// A whole `ETHTOOL_GRSSH` reply to a request for `indir_size` entries and `key_size` key
/// bytes: the header must report those sizes (else the device's changed in between), and
/// the buffer must hold them.
pub fn parse_rxfh(reply: &[u8], indir_size: u32, key_size: u32) -> Result<Rxfh, ReplyError> {
    let header = parse_rxfh_header(reply)?;
    if (header.indir_size, header.key_size) != (indir_size, key_size) {
        return Err(ReplyError::SizesChanged {
            asked_entries: indir_size,
            asked_key: key_size,
            entries: header.indir_size,
            key: header.key_size,
        });
    }
    let table_end = RXFH_HEADER_LEN + indir_size as usize * 4;
    let key_end = table_end + key_size as usize;
    let (Some(table), Some(key)) = (
        reply.get(RXFH_HEADER_LEN..table_end),
        reply.get(table_end..key_end),
    ) else {
        return Err(ReplyError::ShorterThanTableAndKey {
            len: reply.len(),
            entries: indir_size,
            key_bytes: key_size,
        });
    };
    let indirection: Vec<u32> = table
        .chunks_exact(4)
        .filter_map(|w| w.try_into().ok().map(u32::from_ne_bytes))
        .collect();
    check_entries(&indirection)?;
    Ok(Rxfh {
        header,
        indirection,
        key: key.to_vec(),
    })
}

/// An `ETHTOOL_GRXFHINDIR` reply (`struct ethtool_rxfh_indir`) to a request for `asked`
/// entries: the table's size and, with `asked` > 0, its entries.
pub fn parse_rxfh_indir(reply: &[u8], asked: u32) -> Result<(u32, Vec<u32>), ReplyError> {
    let size = u32_at(reply, 4).ok_or(ReplyError::ShorterThanHeader {
        len: reply.len(),
        name: "ethtool_rxfh_indir",
        needed: RXFH_INDIR_HEADER_LEN,
    })?;
    check_sizes(size, 0)?;
    if asked == 0 {
        return Ok((size, Vec::new()));
    }
    if size != asked {
        return Err(ReplyError::SizeChanged { asked, size });
    }
    let end = RXFH_INDIR_HEADER_LEN + size as usize * 4;
    let table = reply
        .get(RXFH_INDIR_HEADER_LEN..end)
        .ok_or(ReplyError::ShorterThanTable {
            len: reply.len(),
            entries: size,
        })?;
    let entries: Vec<u32> = table
        .chunks_exact(4)
        .filter_map(|w| w.try_into().ok().map(u32::from_ne_bytes))
        .collect();
    check_entries(&entries)?;
    Ok((size, entries))
}

/// A `u32` buffer (the kernel's structs are `u32`-aligned) of at least `bytes` bytes.
fn words(bytes: usize) -> Vec<u32> {
    vec![0u32; bytes.div_ceil(4)]
}

fn as_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// A retry is worth it: the sizes moved between the size query and the read.
fn size_moved(error: &RssError) -> bool {
    matches!(
        error,
        RssError::Kernel {
            errno: Some(Errno::EINVAL),
            ..
        }
    ) || matches!(error, RssError::Malformed { reason, .. } if reason.is_size_change())
}

/// [`super::read`] through the ioctls only (`ETHTOOL_GRSSH`, else `ETHTOOL_GRXFHINDIR`), for
/// kernels without `RSS_GET` and to compare the two paths.
pub fn read_ioctl(ethtool: &Ethtool, device: &str) -> Result<RssState, RssError> {
    let rx_rings = rx_rings(ethtool, device)?;
    let state = read_by_ioctl(ethtool, device, rx_rings)?;
    with_hash_fields(ethtool, device, state)
}

/// A state with a table, completed with the flow types' hash fields; a table of 0
/// entries (virtio-net without the RSS feature) is [`RssError::NoTable`].
pub(super) fn with_hash_fields(
    ethtool: &Ethtool,
    device: &str,
    mut state: RssState,
) -> Result<RssState, RssError> {
    if state.indirection.is_empty() {
        return Err(RssError::NoTable {
            device: device.to_string(),
            why: "the driver reports a table of 0 entries".into(),
        });
    }
    state.flow_hash = flow_hashes(ethtool, device);
    Ok(state)
}

/// The table alone by `ETHTOOL_GRXFHINDIR`, the request kernels before 3.16 have (and
/// [`super::read`] falls back to): to compare with what the newer requests give.
pub fn read_indirection_only(ethtool: &Ethtool, device: &str) -> Result<Vec<u32>, RssError> {
    grxfhindir(ethtool, device)
}

pub(super) fn read_by_ioctl(
    ethtool: &Ethtool,
    device: &str,
    rx_rings: u32,
) -> Result<RssState, RssError> {
    match grssh(ethtool, device) {
        Ok(rxfh) => Ok(RssState {
            rx_rings,
            indirection: rxfh.indirection,
            key: rxfh.key,
            hash_function: rxfh.header.hash_function,
            input_xfrm: u32::from(rxfh.header.input_xfrm),
            flow_hash: FlowHashes::default(),
            source: RssSource::Grssh,
        }),
        // A kernel before 3.16 knows no GRSSH (an unknown command is EOPNOTSUPP too): the
        // older table-only request. A driver without get_rxfh refuses both.
        Err(RssError::NoTable { .. }) => Ok(RssState {
            rx_rings,
            indirection: grxfhindir(ethtool, device)?,
            key: Vec::new(),
            hash_function: HashFunction(0),
            input_xfrm: 0,
            flow_hash: FlowHashes::default(),
            source: RssSource::Grxfhindir,
        }),
        Err(error) => Err(error),
    }
}

/// `ETHTOOL_GRXRINGS`: the rings the hash spreads over. EOPNOTSUPP (no `get_rxnfc`: no
/// RSS at all) is [`RssError::NoTable`], as ethtool(8) gives up there too.
pub fn rx_rings(ethtool: &Ethtool, device: &str) -> Result<u32, RssError> {
    let mut request = Rxnfc::new(ETHTOOL_GRXRINGS, 0);
    ethtool
        .call(
            device,
            "ETHTOOL_GRXRINGS",
            (&mut request as *mut Rxnfc).cast(),
        )
        .map_err(|f| RssError::of_failure(device, f, false))?;
    u32::try_from(request.data)
        .ok()
        .filter(|&rings| rings < MAX_QUEUES)
        .ok_or_else(|| RssError::Malformed {
            device: device.to_string(),
            command: "ETHTOOL_GRXRINGS",
            reason: ReplyError::RingCount {
                rings: request.data,
            },
        })
}

/// Builds the error for a reply of `command` on `device` that does not hold together.
fn malformed_reply<'a>(
    device: &'a str,
    command: &'static str,
) -> impl Fn(ReplyError) -> RssError + Copy + 'a {
    move |reason| RssError::Malformed {
        device: device.to_string(),
        command,
        reason,
    }
}

/// `ETHTOOL_GRSSH`, twice: with sizes 0 to learn them, then with a buffer of exactly
/// those sizes (the kernel refuses any other with EINVAL); again when they moved.
fn grssh(ethtool: &Ethtool, device: &str) -> Result<Rxfh, RssError> {
    const COMMAND: &str = "ETHTOOL_GRSSH";
    let malformed = malformed_reply(device, COMMAND);
    let mut last = None;
    for _ in 0..SIZE_RETRIES {
        let mut header = words(RXFH_HEADER_LEN);
        header[0] = ETHTOOL_GRSSH;
        ethtool
            .call(device, COMMAND, header.as_mut_ptr().cast())
            .map_err(|f| RssError::of_failure(device, f, false))?;
        let sizes = parse_rxfh_header(&as_bytes(&header)).map_err(malformed)?;
        if sizes.indir_size == 0 && sizes.key_size == 0 {
            return Ok(Rxfh {
                header: sizes,
                indirection: Vec::new(),
                key: Vec::new(),
            });
        }
        let length = RXFH_HEADER_LEN + sizes.indir_size as usize * 4 + sizes.key_size as usize;
        let mut buffer = words(length);
        buffer[0] = ETHTOOL_GRSSH;
        buffer[2] = sizes.indir_size;
        buffer[3] = sizes.key_size;
        // The kernel writes the header and exactly `indir_size` entries and `key_size`
        // bytes: it refuses sizes other than its own with EINVAL.
        let answer = ethtool
            .call(device, COMMAND, buffer.as_mut_ptr().cast())
            .map_err(|f| RssError::of_failure(device, f, false))
            .and_then(|()| {
                parse_rxfh(&as_bytes(&buffer), sizes.indir_size, sizes.key_size).map_err(malformed)
            });
        match answer {
            Err(error) if size_moved(&error) => last = Some(error),
            answer => return answer,
        }
    }
    Err(last.unwrap_or_else(|| malformed(ReplyError::SizesKeptChanging)))
}

/// `ETHTOOL_GRXFHINDIR`, twice: size 0 to learn the size, then that many entries.
fn grxfhindir(ethtool: &Ethtool, device: &str) -> Result<Vec<u32>, RssError> {
    const COMMAND: &str = "ETHTOOL_GRXFHINDIR";
    let malformed = malformed_reply(device, COMMAND);
    let mut last = None;
    for _ in 0..SIZE_RETRIES {
        let mut header = [ETHTOOL_GRXFHINDIR, 0];
        ethtool
            .call(device, COMMAND, header.as_mut_ptr().cast())
            .map_err(|f| RssError::of_failure(device, f, false))?;
        let (size, _) = parse_rxfh_indir(&as_bytes(&header), 0).map_err(malformed)?;
        if size == 0 {
            return Ok(Vec::new());
        }
        let mut buffer = words(RXFH_INDIR_HEADER_LEN + size as usize * 4);
        buffer[0] = ETHTOOL_GRXFHINDIR;
        buffer[1] = size;
        // The kernel writes `size` entries when the buffer has room for at least its
        // own count, and refuses (EINVAL) otherwise.
        let answer = ethtool
            .call(device, COMMAND, buffer.as_mut_ptr().cast())
            .map_err(|f| RssError::of_failure(device, f, false))
            .and_then(|()| {
                parse_rxfh_indir(&as_bytes(&buffer), size)
                    .map(|(_, entries)| entries)
                    .map_err(malformed)
            });
        match answer {
            Err(error) if size_moved(&error) => last = Some(error),
            answer => return answer,
        }
    }
    Err(last.unwrap_or_else(|| malformed(ReplyError::SizesKeptChanging)))
}

/// `ETHTOOL_GRXFH` for tcp4, udp4, tcp6 and udp6; a type the driver refuses is `None`.
fn flow_hashes(ethtool: &Ethtool, device: &str) -> FlowHashes {
    let read = |flow_type| {
        let mut request = Rxnfc::new(ETHTOOL_GRXFH, flow_type);
        ethtool
            .call(device, "ETHTOOL_GRXFH", (&mut request as *mut Rxnfc).cast())
            .ok()
            .map(|()| FlowHash(request.data))
    };
    FlowHashes {
        tcp4: read(TCP_V4_FLOW),
        udp4: read(UDP_V4_FLOW),
        tcp6: read(TCP_V6_FLOW),
        udp6: read(UDP_V6_FLOW),
    }
}

/// Writes `table` as `device`'s indirection table (context 0) with `ETHTOOL_SRXFHINDIR`,
/// leaving the key and the hash function as they are. Checked first, without writing:
/// the table has the device's size and names only rings below its ring count; a table
/// that does not is [`RssError::Rejected`]. Needs CAP_NET_ADMIN ([`RssError::NotPermitted`]);
/// a driver that cannot set it gives [`RssError::NotSettable`] (or
/// [`RssError::NoTable`] when it has none to begin with).
pub fn set_indirection(ethtool: &Ethtool, device: &str, table: &[u32]) -> Result<(), RssError> {
    const COMMAND: &str = "ETHTOOL_SRXFHINDIR";
    let rejected = |reason| RssError::Rejected {
        device: device.to_string(),
        command: COMMAND,
        reason,
    };
    let rings = rx_rings(ethtool, device)?;
    let size = match grxfhindir_size(ethtool, device)? {
        0 => {
            return Err(RssError::NoTable {
                device: device.to_string(),
                why: "the driver reports a table of 0 entries".into(),
            });
        }
        size => size,
    };
    if table.len() != size as usize {
        return Err(rejected(format!(
            "a table of {} entries for a device whose table has {size}",
            table.len()
        )));
    }
    if let Some((at, ring)) = table.iter().enumerate().find(|(_, ring)| **ring >= rings) {
        return Err(rejected(format!(
            "entry {at} names ring {ring}; the device has {rings} rx rings"
        )));
    }
    let mut buffer = Vec::with_capacity(2 + table.len());
    buffer.extend([ETHTOOL_SRXFHINDIR, size]);
    buffer.extend_from_slice(table);
    ethtool
        .call(device, COMMAND, buffer.as_mut_ptr().cast())
        .map_err(|f| RssError::of_failure(device, f, true))
}

/// Puts `device`'s table back to the driver's default spread (`ETHTOOL_SRXFHINDIR` with
/// size 0, what `ethtool -X DEV default` does).
pub fn reset_indirection(ethtool: &Ethtool, device: &str) -> Result<(), RssError> {
    let mut request = [ETHTOOL_SRXFHINDIR, 0];
    ethtool
        .call(device, "ETHTOOL_SRXFHINDIR", request.as_mut_ptr().cast())
        .map_err(|f| RssError::of_failure(device, f, true))
}

/// The device's table size (`ETHTOOL_GRXFHINDIR` with size 0).
fn grxfhindir_size(ethtool: &Ethtool, device: &str) -> Result<u32, RssError> {
    let mut header = [ETHTOOL_GRXFHINDIR, 0];
    ethtool
        .call(device, "ETHTOOL_GRXFHINDIR", header.as_mut_ptr().cast())
        .map_err(|f| RssError::of_failure(device, f, true))?;
    parse_rxfh_indir(&as_bytes(&header), 0)
        .map(|(size, _)| size)
        .map_err(|reason| RssError::Malformed {
            device: device.to_string(),
            command: "ETHTOOL_GRXFHINDIR",
            reason,
        })
}
#[cfg(test)]
mod tests {
    use super::*;

    /// A GRSSH reply as the kernel lays it out.
    fn rxfh_reply(indir: &[u32], key: &[u8], hfunc: u8) -> Vec<u8> {
        let mut reply = Vec::new();
        for word in [ETHTOOL_GRSSH, 0, indir.len() as u32, key.len() as u32] {
            reply.extend(word.to_ne_bytes());
        }
        reply.extend([hfunc, 0, 0, 0, 0, 0, 0, 0]);
        for entry in indir {
            reply.extend(entry.to_ne_bytes());
        }
        reply.extend(key);
        reply
    }

    #[test]
    fn commands_and_layouts_are_the_kernels() {
        // include/uapi/linux/ethtool.h.
        assert_eq!(
            (ETHTOOL_GRXRINGS, ETHTOOL_GRXFHINDIR, ETHTOOL_SRXFHINDIR),
            (0x2d, 0x38, 0x39)
        );
        assert_eq!(ETHTOOL_GRSSH, 0x46);
        // ETH_RSS_HASH_TOP, _XOR, _CRC32 are bits 0, 1 and 2 (include/linux/ethtool.h).
        assert_eq!(
            (
                HashFunction::TOEPLITZ.0,
                HashFunction::XOR.0,
                HashFunction::CRC32.0
            ),
            (1, 2, 4)
        );
        assert_eq!(RXFH_HEADER_LEN, 24);
    }

    #[test]
    fn a_grssh_reply_parses_and_its_sizes_are_checked() {
        let key: Vec<u8> = (0..40).collect();
        let table: Vec<u32> = (0..128).map(|i| i % 4).collect();
        let reply = rxfh_reply(&table, &key, 1);
        let header = parse_rxfh_header(&reply).unwrap();
        assert_eq!((header.indir_size, header.key_size), (128, 40));
        let rxfh = parse_rxfh(&reply, 128, 40).unwrap();
        assert_eq!(rxfh.indirection, table);
        assert_eq!(rxfh.key, key);
        assert_eq!(rxfh.header.hash_function.name(), "toeplitz");
        // The device's size moved since the size query.
        let error = parse_rxfh(&reply, 64, 40).unwrap_err();
        assert!(error.is_size_change(), "{error}");
        assert_eq!(
            error.to_string(),
            "sizes changed: asked for 64 entries and 40 key bytes, the device has 128 and 40"
        );
        // Truncated: an error, not a panic.
        let error = parse_rxfh(&reply[..reply.len() - 1], 128, 40).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "{} bytes, too short for 128 entries and 40 key bytes",
                reply.len() - 1
            )
        );
        assert!(!error.is_size_change());
        assert_eq!(
            parse_rxfh_header(&reply[..23]).unwrap_err().to_string(),
            "23 bytes, shorter than struct ethtool_rxfh (24)"
        );
    }

    #[test]
    fn sizes_above_the_caps_are_refused_before_they_size_a_buffer() {
        let mut reply = rxfh_reply(&[], &[], 1);
        reply[8..12].copy_from_slice(&(MAX_INDIRECTION + 1).to_ne_bytes());
        let error = parse_rxfh_header(&reply).unwrap_err();
        assert_eq!(
            error.to_string(),
            "indirection table of 4097 entries, more than the 4096 steerd accepts"
        );
        let mut reply = rxfh_reply(&[], &[], 1);
        reply[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(
            parse_rxfh_header(&reply).unwrap_err(),
            ReplyError::KeyTooLarge {
                bytes: u32::MAX as usize
            }
        );
        let mut indir = Vec::new();
        indir.extend(ETHTOOL_GRXFHINDIR.to_ne_bytes());
        indir.extend(u32::MAX.to_ne_bytes());
        assert!(parse_rxfh_indir(&indir, 0).is_err());
        // An entry beyond any queue number.
        let reply = rxfh_reply(&[0, u32::MAX], &[], 1);
        assert_eq!(
            parse_rxfh(&reply, 2, 0).unwrap_err().to_string(),
            format!("entry 1 names ring {}, beyond any queue number", u32::MAX)
        );
    }

    #[test]
    fn a_grxfhindir_reply_parses() {
        let mut reply = Vec::new();
        for word in [ETHTOOL_GRXFHINDIR, 4, 0, 1, 0, 1] {
            reply.extend(u32::to_ne_bytes(word));
        }
        assert_eq!(parse_rxfh_indir(&reply, 0).unwrap(), (4, vec![]));
        assert_eq!(parse_rxfh_indir(&reply, 4).unwrap(), (4, vec![0, 1, 0, 1]));
        assert_eq!(
            parse_rxfh_indir(&reply, 8).unwrap_err(),
            ReplyError::SizeChanged { asked: 8, size: 4 }
        );
        assert_eq!(
            parse_rxfh_indir(&reply[..20], 4).unwrap_err().to_string(),
            "20 bytes, too short for 4 entries"
        );
        assert_eq!(
            parse_rxfh_indir(&reply[..7], 0).unwrap_err().to_string(),
            "7 bytes, shorter than struct ethtool_rxfh_indir (8)"
        );
    }
}
