//! Property tests of the netdev netlink parsers over arbitrary and mutated replies: they
//! must return `Ok` or an error, never panic, and what they accept must respect
//! [`crate::limits`]. They live inside the module because the parsers are private.
//! `PROPTEST_CASES` raises the case count (`scripts/fuzz.sh`).

use proptest::prelude::*;

use super::tests::{MessageBuilder, attr, genl};
use super::*;
use crate::limits::{MAX_IRQS, MAX_QUEUES};

/// `cases` per run, unless `PROPTEST_CASES` says otherwise.
fn budget(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config
}

const FAMILY: u16 = 20;

/// One multipart netlink message of `message_type` around `body` (genl header and
/// attributes).
fn message(message_type: u16, sequence: u32, body: &[u8]) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    builder.message(
        message_type,
        netlink_packet_core::NLM_F_MULTIPART,
        sequence,
        body,
    );
    builder.bytes
}

/// A well-formed dump: a queue, a NAPI and a qstats reply, then DONE.
fn valid_dump() -> Vec<u8> {
    let u32_attr = |kind, value: u32| attr(kind, &value.to_ne_bytes());
    // One reply of the family, sequence 1, to `command`.
    let reply = |command, attrs: &[Vec<u8>]| message(FAMILY, 1, &genl(command, attrs));
    let mut bytes = reply(
        cmd::QUEUE_GET,
        &[
            u32_attr(queue_attr::ID, 3),
            u32_attr(queue_attr::IFINDEX, 2),
            u32_attr(queue_attr::TYPE, QUEUE_TYPE_RX),
            u32_attr(queue_attr::NAPI_ID, 8193),
        ],
    );
    bytes.extend(reply(
        cmd::NAPI_GET,
        &[
            u32_attr(napi_attr::ID, 8193),
            u32_attr(napi_attr::IFINDEX, 2),
            u32_attr(napi_attr::IRQ, 45),
            u32_attr(napi_attr::PID, 812),
        ],
    ));
    bytes.extend(reply(
        cmd::QSTATS_GET,
        &[
            u32_attr(qstats_attr::IFINDEX, 2),
            u32_attr(qstats_attr::QUEUE_TYPE, QUEUE_TYPE_RX),
            u32_attr(qstats_attr::QUEUE_ID, 3),
            attr(qstats_attr::RX_PACKETS, &5_000_000_000u64.to_ne_bytes()),
            attr(qstats_attr::RX_BYTES, &77u32.to_ne_bytes()),
        ],
    ));
    bytes.extend(message(NLMSG_DONE, 1, &0i32.to_ne_bytes()));
    bytes
}

/// Walks `datagram` the way the client does, handing every family message to all three
/// attribute parsers (whichever its command), and checks what they accept.
fn walk(datagram: &[u8]) -> Result<Progress, Error> {
    parse_datagram("fuzz", datagram, 1, FAMILY, &mut |_, payload: &[u8]| {
        let attrs = payload.get(GENL_HDRLEN..).unwrap_or_default();
        check_parsers(attrs);
        Ok(())
    })
}

fn check_parsers(attrs: &[u8]) {
    if let Ok(queue) = parse_queue(attrs) {
        assert!(queue.id < MAX_QUEUES, "{queue:?}");
    }
    if let Ok(napi) = parse_napi(attrs) {
        assert!(napi.irq.is_none_or(|irq| irq < MAX_IRQS), "{napi:?}");
    }
    if let Ok(stats) = parse_queue_stats(attrs) {
        assert!(stats.queue < MAX_QUEUES, "{stats:?}");
    }
}

/// An edit of a byte string: what the mutated-input properties apply.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize, usize),
    Truncate(usize),
    /// Overwrites 4 aligned bytes with a huge u32 (a queue id, a length, a type).
    Huge(usize, u32),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, bit)| Edit::Flip(at, 1 << (bit % 8))),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Insert(at, b)),
        (any::<usize>(), 1usize..16).prop_map(|(at, n)| Edit::Delete(at, n)),
        any::<usize>().prop_map(Edit::Truncate),
        (
            any::<usize>(),
            prop::sample::select(vec![u32::MAX, MAX_QUEUES, MAX_IRQS, 1 << 31, 0xffff])
        )
            .prop_map(|(at, v)| Edit::Huge(at, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    let len = bytes.len().max(1);
    match *edit {
        Edit::Flip(at, mask) => {
            if let Some(b) = bytes.get_mut(at % len) {
                *b ^= mask;
            }
        }
        Edit::Insert(at, b) => bytes.insert(at % (bytes.len() + 1), b),
        Edit::Delete(at, n) => {
            let start = at % len;
            let end = (start + n).min(bytes.len());
            if start < end {
                bytes.drain(start..end);
            }
        }
        Edit::Truncate(at) => bytes.truncate(at % len),
        Edit::Huge(at, value) => {
            let start = (at % len) & !3;
            if let Some(slot) = bytes.get_mut(start..start + 4) {
                slot.copy_from_slice(&value.to_ne_bytes());
            }
        }
    }
}

proptest! {
    #![proptest_config(budget(512))]

    #[test]
    fn datagram_of_arbitrary_bytes_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..512)
    ) {
        let _ = walk(&bytes);
    }

    #[test]
    fn attributes_of_arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..256)
    ) {
        check_parsers(&bytes);
    }

    /// Well-framed attributes with arbitrary kinds and values: the parsers' own checks
    /// (lengths, types, limits) rather than the framing's.
    #[test]
    fn arbitrary_attributes_never_panic(
        attrs in proptest::collection::vec(
            (0u16..40, proptest::collection::vec(any::<u8>(), 0..12)), 0..12)
    ) {
        let bytes: Vec<u8> = attrs.iter().flat_map(|(k, v)| attr(*k, v)).collect();
        check_parsers(&bytes);
    }

    #[test]
    fn mutated_valid_dumps_never_panic(
        edits in proptest::collection::vec(edit(), 1..6)
    ) {
        let mut bytes = valid_dump();
        for e in &edits {
            apply(&mut bytes, e);
        }
        let _ = walk(&bytes);
    }

    /// The generic-netlink controller's reply (the netdev family's id and ops), parsed
    /// by netlink-packet-generic and then read by `family_from_ctrl`.
    #[test]
    fn ctrl_replies_of_arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..256)
    ) {
        if let Ok(parsed) = GenlMessage::<GenlCtrl>::parse_with_param(&bytes[..], 0x10) {
            let _ = family_from_ctrl(&parsed.payload.nlas);
        }
    }
}

#[test]
fn the_valid_dump_parses() {
    assert_eq!(walk(&valid_dump()).unwrap(), Progress::Finished);
}

/// The netlink half of the `update_queues` finding: a queue id no kernel can have used
/// to pass through to the per-queue tables.
#[test]
fn regression_queue_id_beyond_max_queues_is_an_error() {
    let u32_attr = |kind, value: u32| attr(kind, &value.to_ne_bytes());
    let queue = [
        u32_attr(queue_attr::ID, u32::MAX),
        u32_attr(queue_attr::IFINDEX, 2),
        u32_attr(queue_attr::TYPE, QUEUE_TYPE_RX),
    ]
    .concat();
    let err = parse_queue(&queue).unwrap_err().to_string();
    assert!(err.contains("4294967295"), "{err}");
    let stats = [
        u32_attr(qstats_attr::IFINDEX, 2),
        u32_attr(qstats_attr::QUEUE_TYPE, QUEUE_TYPE_RX),
        u32_attr(qstats_attr::QUEUE_ID, MAX_QUEUES),
    ]
    .concat();
    let err = parse_queue_stats(&stats).unwrap_err().to_string();
    assert!(err.contains("queue-id"), "{err}");
    let napi = [
        u32_attr(napi_attr::ID, 1),
        u32_attr(napi_attr::IFINDEX, 2),
        u32_attr(napi_attr::IRQ, u32::MAX),
    ]
    .concat();
    assert!(parse_napi(&napi).is_err());
}
