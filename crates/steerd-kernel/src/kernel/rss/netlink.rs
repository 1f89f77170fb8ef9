//! `ETHTOOL_MSG_RSS_GET` over the ethtool generic-netlink family: the RSS state as
//! ethtool(8) reads it on kernels from 6.2 on. Why this path exists next to the ioctls:
//! it names RSS contexts, carries `input_xfrm`, and is where the kernel adds what is new
//! (per-flow hash fields, `ETHTOOL_A_RSS_FLOW_HASH`, in 2025); the ioctls stay for the
//! kernels before it.
//!
//! The family is resolved by name through the generic-netlink controller, as
//! `kernel::netlink` does for `netdev`, and an op the family lacks is "not here"
//! (`Ok(None)`), never an error; the socket and the walk over a reply's messages are
//! `kernel::netlink`'s. Numbers are those of `include/uapi/linux/ethtool_netlink_generated.h`
//! (torvalds/linux at 1176978ed851952652ddea3685e2f71a0e5d61ff; `ethtool_netlink.h` before
//! 6.14): `ETHTOOL_MSG_RSS_GET` is 38 among the user-to-kernel messages, and its reply
//! `ETHTOOL_MSG_RSS_GET_REPLY` 38 among the kernel-to-user ones.

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_REQUEST, NlaBuffer, NlasIterator, ParseableParametrized,
};
use netlink_packet_generic::GenlMessage;
use netlink_packet_generic::constants::GENL_HDRLEN;
use netlink_packet_generic::ctrl::GenlCtrl;
use netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, OpAttrs};
use netlink_sys::Socket;
use nix::errno::Errno;

use super::{
    FlowHashes, HashFunction, MAX_INDIRECTION, MAX_KEY, ReplyError, RssError, RssSource, RssState,
    check_entries,
};
use crate::error::Error;
use crate::kernel::netlink::{
    RECV_BUFFER_LEN, align4, getfamily_request, open_socket, receive_reply, send_request,
};

/// The family's registered name (`ETHTOOL_GENL_NAME`) and version.
const FAMILY_NAME: &str = "ethtool";
const FAMILY_VERSION: u8 = 1;
/// `ETHTOOL_MSG_RSS_GET`.
const MSG_RSS_GET: u8 = 38;
/// `ETHTOOL_A_HEADER_*`: the request header's attributes.
const A_HEADER_DEV_NAME: u16 = 2;
/// `ETHTOOL_A_RSS_*`.
const A_RSS_HEADER: u16 = 1;
const A_RSS_CONTEXT: u16 = 2;
const A_RSS_HFUNC: u16 = 3;
const A_RSS_INDIR: u16 = 4;
const A_RSS_HKEY: u16 = 5;
const A_RSS_INPUT_XFRM: u16 = 6;
/// `NLA_F_NESTED`.
const NLA_F_NESTED: u16 = 1 << 15;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HEADER_LEN: usize = 16;

/// What one `RSS_GET` reply says (context 0 unless `context` says otherwise).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetlinkRss {
    pub context: u32,
    pub indirection: Vec<u32>,
    pub key: Vec<u8>,
    pub hash_function: HashFunction,
    pub input_xfrm: u32,
}

impl NetlinkRss {
    pub(super) fn into_state(self, rx_rings: u32) -> RssState {
        RssState {
            rx_rings,
            indirection: self.indirection,
            key: self.key,
            hash_function: self.hash_function,
            input_xfrm: self.input_xfrm,
            flow_hash: FlowHashes::default(),
            source: RssSource::Netlink,
        }
    }
}

/// The attributes of an `ETHTOOL_MSG_RSS_GET_REPLY` (after the genl header). Unknown
/// attributes are skipped (new kernels add some); known ones of the wrong length, a
/// table or key above the caps, and an entry beyond any queue number are errors.
pub fn parse_reply(attrs: &[u8]) -> Result<NetlinkRss, ReplyError> {
    let u32_of = |name: &'static str, value: &[u8]| -> Result<u32, ReplyError> {
        <[u8; 4]>::try_from(value)
            .map(u32::from_ne_bytes)
            .map_err(|_| ReplyError::AttributeLength {
                name,
                len: value.len(),
            })
    };
    let mut rss = NetlinkRss::default();
    for nla in NlasIterator::new(attrs) {
        let nla: NlaBuffer<&[u8]> = nla.map_err(|e| ReplyError::Attribute {
            reason: e.to_string(),
        })?;
        let value = nla.value();
        match nla.kind() & !NLA_F_NESTED {
            A_RSS_CONTEXT => rss.context = u32_of("ETHTOOL_A_RSS_CONTEXT", value)?,
            A_RSS_HFUNC => rss.hash_function = HashFunction(u32_of("ETHTOOL_A_RSS_HFUNC", value)?),
            A_RSS_INPUT_XFRM => rss.input_xfrm = u32_of("ETHTOOL_A_RSS_INPUT_XFRM", value)?,
            A_RSS_INDIR => rss.indirection = parse_indirection(value)?,
            A_RSS_HKEY if value.len() > MAX_KEY as usize => {
                return Err(ReplyError::KeyTooLarge { bytes: value.len() });
            }
            A_RSS_HKEY => rss.key = value.to_vec(),
            _ => {}
        }
    }
    Ok(rss)
}

fn parse_indirection(value: &[u8]) -> Result<Vec<u32>, ReplyError> {
    if !value.len().is_multiple_of(4) {
        return Err(ReplyError::PartialEntry { len: value.len() });
    }
    if value.len() / 4 > MAX_INDIRECTION as usize {
        return Err(ReplyError::TableTooLarge {
            entries: value.len() / 4,
        });
    }
    let table: Vec<u32> = value
        .chunks_exact(4)
        .filter_map(|w| w.try_into().ok().map(u32::from_ne_bytes))
        .collect();
    check_entries(&table)?;
    Ok(table)
}

/// `device`'s RSS state by `RSS_GET` (context 0), in the calling thread's network
/// namespace. `Ok(None)` when the kernel has no ethtool family or no `RSS_GET` in it
/// (kernels before 6.2, or built without `CONFIG_ETHTOOL_NETLINK`): use the ioctls.
pub fn read(device: &str) -> Result<Option<NetlinkRss>, RssError> {
    let kernel = |reason: String| RssError::Kernel {
        device: device.to_string(),
        command: "ETHTOOL_MSG_RSS_GET",
        errno: None,
        reason,
    };
    let netlink = |error: Error| kernel(error.to_string());
    let mut socket = open_socket().map_err(netlink)?;
    let Some(family) = resolve(&mut socket).map_err(netlink)? else {
        return Ok(None);
    };
    let request = rss_get_request(family, 2, device);
    send(&mut socket, &request).map_err(netlink)?;
    let mut reply = None;
    let mut malformed = None;
    let outcome = receive(&mut socket, 2, family, |payload| {
        let attrs = payload.get(GENL_HDRLEN..).unwrap_or_default();
        match parse_reply(attrs) {
            Ok(rss) => reply = Some(rss),
            Err(reason) => malformed = Some(reason),
        }
    })
    .map_err(netlink)?;
    if let Some(reason) = malformed {
        return Err(RssError::Malformed {
            device: device.to_string(),
            command: "ETHTOOL_MSG_RSS_GET",
            reason,
        });
    }
    match outcome {
        Ok(()) => reply
            .map(Some)
            .ok_or_else(|| kernel("no reply to ETHTOOL_MSG_RSS_GET".into())),
        Err(code) => Err(RssError::of_errno(
            device,
            "ETHTOOL_MSG_RSS_GET",
            Errno::from_raw(code.saturating_abs()),
            false,
        )),
    }
}

/// The ethtool family's id when it has `RSS_GET`, by `CTRL_CMD_GETFAMILY`.
fn resolve(socket: &mut Socket) -> Result<Option<u16>, Error> {
    Ok(ethtool_family(socket)?.and_then(|nlas| family_with_rss_get(&nlas)))
}

/// What the generic-netlink controller says of the ethtool family (its id, ops and
/// multicast groups), by `CTRL_CMD_GETFAMILY`; `None` on a kernel without ethtool netlink.
/// Also used by `kernel::ethtool_events` to find the `monitor` group. Errors are
/// [`Error::Kernel`] naming the request (`nlctrl getfamily ethtool`) or netlink's.
pub(crate) fn ethtool_family(socket: &mut Socket) -> Result<Option<Vec<GenlCtrlAttrs>>, Error> {
    const GETFAMILY: &str = "nlctrl getfamily ethtool";
    let getfamily = |reason: String| Error::Kernel {
        what: GETFAMILY.to_string(),
        reason,
    };
    send(socket, &getfamily_request(FAMILY_NAME, 1))?;
    let control = netlink_packet_generic::constants::GENL_ID_CTRL;
    let mut found = None;
    let mut error = None;
    let outcome =
        receive(
            socket,
            1,
            control,
            |payload| match GenlMessage::<GenlCtrl>::parse_with_param(payload, control) {
                Ok(parsed) => found = Some(parsed.payload.nlas),
                Err(e) => error = Some(getfamily(format!("malformed controller reply: {e}"))),
            },
        )?;
    if let Some(error) = error {
        return Err(error);
    }
    match outcome {
        Ok(()) => Ok(found),
        // No such family: a kernel without ethtool netlink.
        Err(code) if code == -(Errno::ENOENT as i32) => Ok(None),
        Err(code) => Err(getfamily(
            Errno::from_raw(code.saturating_abs()).to_string(),
        )),
    }
}

/// The family id, if its ops list `RSS_GET`.
fn family_with_rss_get(nlas: &[GenlCtrlAttrs]) -> Option<u16> {
    let mut id = None;
    let mut has_rss_get = false;
    for nla in nlas {
        match nla {
            GenlCtrlAttrs::FamilyId(value) => id = Some(*value),
            GenlCtrlAttrs::Ops(ops) => {
                has_rss_get = ops
                    .iter()
                    .flatten()
                    .any(|attr| matches!(attr, OpAttrs::Id(op) if *op == u32::from(MSG_RSS_GET)));
            }
            _ => {}
        }
    }
    id.filter(|_| has_rss_get)
}

/// An `RSS_GET` request for `device` by name: nlmsghdr, genlmsghdr, then
/// `ETHTOOL_A_RSS_HEADER` nesting `ETHTOOL_A_HEADER_DEV_NAME`.
fn rss_get_request(family: u16, sequence: u32, device: &str) -> Vec<u8> {
    let mut name = device.as_bytes().to_vec();
    name.push(0);
    let name_attr_len = 4 + name.len();
    let nest_len = 4 + align4(name_attr_len);
    let length = NLMSG_HEADER_LEN + GENL_HDRLEN + nest_len;
    let mut out = Vec::with_capacity(length);
    out.extend((length as u32).to_ne_bytes());
    out.extend(family.to_ne_bytes());
    out.extend((NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    out.extend(sequence.to_ne_bytes());
    out.extend(0u32.to_ne_bytes());
    out.extend([MSG_RSS_GET, FAMILY_VERSION, 0, 0]);
    out.extend((nest_len as u16).to_ne_bytes());
    out.extend((A_RSS_HEADER | NLA_F_NESTED).to_ne_bytes());
    out.extend((name_attr_len as u16).to_ne_bytes());
    out.extend(A_HEADER_DEV_NAME.to_ne_bytes());
    out.extend(&name);
    out.resize(length, 0);
    out
}

/// What the shared netlink helpers name in their errors.
const WHAT: &str = "ethtool netlink";

fn send(socket: &mut Socket, request: &[u8]) -> Result<(), Error> {
    send_request(socket, WHAT, request)
}

/// Receives until the reply to `sequence` is complete; the inner `Err` is the kernel's
/// negative errno.
fn receive(
    socket: &mut Socket,
    sequence: u32,
    family: u16,
    mut on_message: impl FnMut(&[u8]),
) -> Result<Result<(), i32>, Error> {
    let mut buffer = Vec::with_capacity(RECV_BUFFER_LEN);
    receive_reply(
        socket,
        &mut buffer,
        WHAT,
        sequence,
        family,
        &mut |_, payload| {
            on_message(payload);
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(((4 + value.len()) as u16).to_ne_bytes());
        out.extend(kind.to_ne_bytes());
        out.extend(value);
        out.resize(align4(out.len()), 0);
        out
    }

    #[test]
    fn a_reply_parses_and_unknown_attributes_are_skipped() {
        let table: Vec<u8> = (0u32..8).flat_map(|i| (i % 2).to_ne_bytes()).collect();
        let mut attrs = attr(A_RSS_HEADER | NLA_F_NESTED, &attr(1, &3u32.to_ne_bytes()));
        attrs.extend(attr(A_RSS_HFUNC, &1u32.to_ne_bytes()));
        attrs.extend(attr(A_RSS_INDIR, &table));
        attrs.extend(attr(A_RSS_HKEY, &[0xab; 40]));
        attrs.extend(attr(A_RSS_INPUT_XFRM, &1u32.to_ne_bytes()));
        attrs.extend(attr(99, b"new in a later kernel"));
        let rss = parse_reply(&attrs).unwrap();
        assert_eq!(rss.indirection, vec![0, 1, 0, 1, 0, 1, 0, 1]);
        assert_eq!(rss.key, vec![0xab; 40]);
        assert_eq!(rss.hash_function, HashFunction::TOEPLITZ);
        assert_eq!((rss.input_xfrm, rss.context), (1, 0));
    }

    #[test]
    fn bad_lengths_and_sizes_are_errors_not_panics() {
        assert_eq!(
            parse_reply(&attr(A_RSS_INDIR, &[0; 7])).unwrap_err(),
            ReplyError::PartialEntry { len: 7 }
        );
        assert_eq!(
            parse_reply(&attr(A_RSS_HFUNC, &[0; 2]))
                .unwrap_err()
                .to_string(),
            "ETHTOOL_A_RSS_HFUNC has 2 bytes, expected 4"
        );
        assert_eq!(
            parse_reply(&attr(A_RSS_HKEY, &[0; 257])).unwrap_err(),
            ReplyError::KeyTooLarge { bytes: 257 }
        );
        let big = vec![0u8; (MAX_INDIRECTION as usize + 1) * 4];
        assert_eq!(
            parse_reply(&attr(A_RSS_INDIR, &big))
                .unwrap_err()
                .to_string(),
            "indirection table of 4097 entries, more than the 4096 steerd accepts"
        );
        let beyond: Vec<u8> = [0u32, u32::MAX]
            .iter()
            .flat_map(|e| e.to_ne_bytes())
            .collect();
        assert_eq!(
            parse_reply(&attr(A_RSS_INDIR, &beyond)).unwrap_err(),
            ReplyError::RingBeyondQueues {
                at: 1,
                ring: u32::MAX
            }
        );
        // Truncated mid-attribute.
        let attrs = attr(A_RSS_HKEY, &[1; 40]);
        assert!(matches!(
            parse_reply(&attrs[..10]),
            Err(ReplyError::Attribute { .. })
        ));
    }

    #[test]
    fn the_request_names_the_device_in_a_nested_header() {
        let request = rss_get_request(21, 2, "eth0");
        assert_eq!(request.len(), 16 + 4 + 4 + 12);
        assert_eq!(u32::from_ne_bytes(request[..4].try_into().unwrap()), 36);
        assert_eq!(u16::from_ne_bytes(request[4..6].try_into().unwrap()), 21);
        assert_eq!(request[16], MSG_RSS_GET);
        assert_eq!(&request[28..32], b"eth0");
        assert_eq!(request[32], 0);
    }
}
