//! Unit tests of the transport's reply walking and the netdev parsers, on replies built
//! by hand the way the kernel lays them out; [`MessageBuilder`], [`attr`] and [`genl`] are
//! shared with the property tests (`fuzz.rs`).

use super::*;

/// Builds netlink messages by hand, the way the kernel lays them out.
pub(super) struct MessageBuilder {
    pub(super) bytes: Vec<u8>,
}

impl MessageBuilder {
    pub(super) fn new() -> Self {
        MessageBuilder { bytes: Vec::new() }
    }

    /// Appends one message; `body` is everything after the 16-byte nlmsghdr (its
    /// length saturates, for the fuzzer).
    pub(super) fn message(&mut self, message_type: u16, flags: u16, sequence: u32, body: &[u8]) {
        let length = u32::try_from(16 + body.len()).unwrap_or(u32::MAX);
        self.bytes.extend_from_slice(&length.to_ne_bytes());
        self.bytes.extend_from_slice(&message_type.to_ne_bytes());
        self.bytes.extend_from_slice(&flags.to_ne_bytes());
        self.bytes.extend_from_slice(&sequence.to_ne_bytes());
        self.bytes.extend_from_slice(&4242u32.to_ne_bytes());
        self.bytes.extend_from_slice(body);
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }
}

/// One netlink attribute, padded to 4 bytes (its length saturates, for the fuzzer).
pub(super) fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let length = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&length.to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out
}

/// A generic netlink body: the genl header, then `attrs`.
pub(super) fn genl(command: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![command, 1, 0, 0];
    for a in attrs {
        out.extend_from_slice(a);
    }
    out
}

const FAMILY: u16 = 20;
const MULTI: u16 = netlink_packet_core::NLM_F_MULTIPART;

fn qstats_message(queue_type: u32, queue: u32, values: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut attrs = vec![
        attr(qstats_attr::IFINDEX, &2u32.to_ne_bytes()),
        attr(qstats_attr::QUEUE_TYPE, &queue_type.to_ne_bytes()),
        attr(qstats_attr::QUEUE_ID, &queue.to_ne_bytes()),
    ];
    for (kind, value) in values {
        attrs.push(attr(*kind, value));
    }
    genl(cmd::QSTATS_GET, &attrs)
}

fn collect_stats(datagrams: &[Vec<u8>], sequence: u32) -> Result<Vec<QueueStats>, Error> {
    let mut out = Vec::new();
    for datagram in datagrams {
        let progress = parse_datagram(
            "netdev qstats-get",
            datagram,
            sequence,
            FAMILY,
            &mut |_, payload: &[u8]| {
                out.push(parse_queue_stats(&payload[GENL_HDRLEN..])?);
                Ok(())
            },
        )?;
        match progress {
            Progress::Finished => return Ok(out),
            Progress::Failed(code) => return Err(errno_error("netdev qstats-get", code)),
            Progress::More => {}
        }
    }
    panic!("the reply never finished");
}

#[test]
fn qstats_values_of_four_and_eight_bytes() {
    let mut m = MessageBuilder::new();
    let big = 5_000_000_000u64;
    m.message(
        FAMILY,
        MULTI,
        7,
        &qstats_message(
            QUEUE_TYPE_RX,
            0,
            &[
                (qstats_attr::RX_PACKETS, 1234u32.to_ne_bytes().to_vec()),
                (qstats_attr::RX_BYTES, big.to_ne_bytes().to_vec()),
                (qstats_attr::RX_HW_DROPS, 3u64.to_ne_bytes().to_vec()),
            ],
        ),
    );
    m.message(NLMSG_DONE, MULTI, 7, &0i32.to_ne_bytes());
    let stats = collect_stats(&[m.bytes], 7).unwrap();
    assert_eq!(stats.len(), 1);
    let s = stats[0];
    assert_eq!(s.ifindex, 2);
    assert_eq!(s.direction, Some(QueueDirection::Rx));
    assert_eq!(s.queue, 0);
    assert_eq!(s.packets(), Some(1234));
    assert_eq!(s.bytes(), Some(big));
    assert_eq!(s.rx_hw_drops, Some(3));
    assert_eq!(s.tx_packets, None);
}

#[test]
fn qstats_unknown_attributes_are_skipped() {
    let mut m = MessageBuilder::new();
    m.message(
        FAMILY,
        MULTI,
        1,
        &qstats_message(
            QUEUE_TYPE_TX,
            3,
            &[
                (99, vec![1, 2, 3]),
                (qstats_attr::TX_PACKETS, 10u64.to_ne_bytes().to_vec()),
                (qstats_attr::TX_STOP, 1u32.to_ne_bytes().to_vec()),
                (qstats_attr::TX_WAKE, 1u32.to_ne_bytes().to_vec()),
            ],
        ),
    );
    m.message(NLMSG_DONE, MULTI, 1, &[]);
    let stats = collect_stats(&[m.bytes], 1).unwrap();
    assert_eq!(stats[0].direction, Some(QueueDirection::Tx));
    assert_eq!(stats[0].queue, 3);
    assert_eq!(stats[0].packets(), Some(10));
    assert_eq!(stats[0].tx_stop, Some(1));
}

#[test]
fn qstats_value_of_other_length_is_an_error() {
    let mut m = MessageBuilder::new();
    m.message(
        FAMILY,
        MULTI,
        1,
        &qstats_message(QUEUE_TYPE_RX, 0, &[(qstats_attr::RX_PACKETS, vec![1, 2])]),
    );
    let error = collect_stats(&[m.bytes], 1).unwrap_err().to_string();
    assert!(error.contains("rx-packets has 2 bytes"), "{error}");
    assert!(error.starts_with("netdev qstats-get"), "{error}");
}

#[test]
fn truncated_attribute_is_an_error_not_a_panic() {
    // The attribute claims 12 bytes but the message ends after 6.
    let mut body = genl(
        cmd::QSTATS_GET,
        &[attr(qstats_attr::IFINDEX, &1u32.to_ne_bytes())],
    );
    body.extend_from_slice(&12u16.to_ne_bytes());
    body.extend_from_slice(&qstats_attr::RX_PACKETS.to_ne_bytes());
    body.extend_from_slice(&[1, 2]);
    let mut m = MessageBuilder::new();
    m.message(FAMILY, MULTI, 1, &body);
    let error = collect_stats(&[m.bytes], 1).unwrap_err().to_string();
    assert!(error.contains("malformed attribute"), "{error}");
}

#[test]
fn every_truncation_of_a_reply_is_an_error_or_short_not_a_panic() {
    let mut m = MessageBuilder::new();
    m.message(
        FAMILY,
        MULTI,
        1,
        &qstats_message(
            QUEUE_TYPE_RX,
            1,
            &[(qstats_attr::RX_PACKETS, 5u64.to_ne_bytes().to_vec())],
        ),
    );
    let first_message = m.bytes.len();
    m.message(NLMSG_DONE, MULTI, 1, &0i32.to_ne_bytes());
    for cut in 0..m.bytes.len() {
        let result = parse_datagram("t", &m.bytes[..cut], 1, FAMILY, &mut |_, p: &[u8]| {
            parse_queue_stats(p.get(GENL_HDRLEN..).unwrap_or_default()).map(|_| ())
        });
        if cut == 0 || cut == first_message {
            assert_eq!(result.unwrap(), Progress::More, "cut at {cut}");
        } else {
            assert!(result.is_err(), "cut at {cut}: {result:?}");
        }
    }
}

#[test]
fn truncated_message_header_is_an_error() {
    let mut m = MessageBuilder::new();
    m.message(FAMILY, MULTI, 1, &qstats_message(QUEUE_TYPE_RX, 0, &[]));
    let cut = &m.bytes[..m.bytes.len() - 4];
    let error = parse_datagram("netdev qstats-get", cut, 1, FAMILY, &mut |_, _: &[u8]| {
        Ok(())
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("malformed reply"), "{error}");
}

#[test]
fn multipart_dump_over_several_datagrams_ends_at_done() {
    let mut first = MessageBuilder::new();
    for queue in 0..3 {
        first.message(
            FAMILY,
            MULTI,
            9,
            &qstats_message(
                QUEUE_TYPE_RX,
                queue,
                &[(
                    qstats_attr::RX_PACKETS,
                    u64::from(queue).to_ne_bytes().to_vec(),
                )],
            ),
        );
    }
    let mut second = MessageBuilder::new();
    second.message(
        FAMILY,
        MULTI,
        9,
        &qstats_message(
            QUEUE_TYPE_TX,
            0,
            &[(qstats_attr::TX_PACKETS, 77u32.to_ne_bytes().to_vec())],
        ),
    );
    second.message(NLMSG_DONE, MULTI, 9, &0i32.to_ne_bytes());
    let stats = collect_stats(&[first.bytes, second.bytes], 9).unwrap();
    assert_eq!(stats.len(), 4);
    assert_eq!(stats[2].packets(), Some(2));
    assert_eq!(stats[3].packets(), Some(77));
}

#[test]
fn stale_sequence_numbers_are_skipped() {
    let mut m = MessageBuilder::new();
    m.message(
        FAMILY,
        MULTI,
        4,
        &qstats_message(QUEUE_TYPE_RX, 0, &[(qstats_attr::RX_PACKETS, vec![0; 8])]),
    );
    m.message(NLMSG_DONE, MULTI, 4, &0i32.to_ne_bytes());
    m.message(
        FAMILY,
        MULTI,
        5,
        &qstats_message(QUEUE_TYPE_RX, 1, &[(qstats_attr::RX_PACKETS, vec![0; 8])]),
    );
    m.message(NLMSG_DONE, MULTI, 5, &0i32.to_ne_bytes());
    let stats = collect_stats(&[m.bytes], 5).unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].queue, 1);
}

#[test]
fn nlmsg_error_names_the_op_and_errno() {
    let mut body = (-95i32).to_ne_bytes().to_vec(); // EOPNOTSUPP
    body.extend_from_slice(&[0; 16]); // the offending request's header
    let mut m = MessageBuilder::new();
    m.message(NLMSG_ERROR, 0, 3, &body);
    let error = collect_stats(&[m.bytes], 3).unwrap_err();
    assert_eq!(
        error.to_string(),
        "netdev qstats-get: EOPNOTSUPP: Operation not supported on transport endpoint"
    );
}

#[test]
fn done_with_negative_code_is_an_error() {
    let mut m = MessageBuilder::new();
    m.message(NLMSG_DONE, MULTI, 3, &(-19i32).to_ne_bytes()); // ENODEV
    let error = collect_stats(&[m.bytes], 3).unwrap_err().to_string();
    assert!(error.contains("ENODEV"), "{error}");
}

#[test]
fn ack_finishes_a_do_request() {
    let mut m = MessageBuilder::new();
    m.message(
        FAMILY,
        0,
        2,
        &genl(
            cmd::NAPI_GET,
            &[
                attr(napi_attr::ID, &8193u32.to_ne_bytes()),
                attr(napi_attr::IFINDEX, &2u32.to_ne_bytes()),
                attr(napi_attr::IRQ, &27u32.to_ne_bytes()),
                attr(17, &0u64.to_ne_bytes()),
            ],
        ),
    );
    let mut ack = 0i32.to_ne_bytes().to_vec();
    ack.extend_from_slice(&[0; 16]);
    m.message(NLMSG_ERROR, 0, 2, &ack);
    let mut napis = Vec::new();
    let progress = parse_datagram(
        "netdev napi-get",
        &m.bytes,
        2,
        FAMILY,
        &mut |_, p: &[u8]| {
            napis.push(parse_napi(&p[GENL_HDRLEN..])?);
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(progress, Progress::Finished);
    assert_eq!(
        napis,
        vec![Napi {
            id: 8193,
            ifindex: 2,
            irq: Some(27),
            pid: None,
            ..Napi::default()
        }]
    );
}

#[test]
fn napi_settings_are_parsed_when_the_kernel_has_them() {
    // A 6.19 reply: gro-flush-timeout as an 8-byte uint, irq-suspend-timeout as a
    // 4-byte one (NLA_UINT is 4 bytes when the value fits), threaded = busy-poll.
    let napi = parse_napi(
        &genl(
            cmd::NAPI_GET,
            &[
                attr(napi_attr::ID, &8193u32.to_ne_bytes()),
                attr(napi_attr::IFINDEX, &2u32.to_ne_bytes()),
                attr(napi_attr::PID, &812u32.to_ne_bytes()),
                attr(napi_attr::DEFER_HARD_IRQS, &2u32.to_ne_bytes()),
                attr(napi_attr::GRO_FLUSH_TIMEOUT, &200_000u64.to_ne_bytes()),
                attr(napi_attr::IRQ_SUSPEND_TIMEOUT, &20_000_000u32.to_ne_bytes()),
                attr(napi_attr::THREADED, &2u32.to_ne_bytes()),
            ],
        )[GENL_HDRLEN..],
    )
    .unwrap();
    assert_eq!(napi.defer_hard_irqs, Some(2));
    assert_eq!(napi.gro_flush_timeout, Some(200_000));
    assert_eq!(napi.irq_suspend_timeout, Some(20_000_000));
    assert_eq!(napi.threaded, Some(2));
    assert_eq!(napi.pid, Some(812));
    // A 6.12 reply has none of them: absent, not 0.
    let old = parse_napi(
        &genl(
            cmd::NAPI_GET,
            &[
                attr(napi_attr::ID, &8193u32.to_ne_bytes()),
                attr(napi_attr::IFINDEX, &2u32.to_ne_bytes()),
            ],
        )[GENL_HDRLEN..],
    )
    .unwrap();
    assert_eq!(
        (
            old.defer_hard_irqs,
            old.gro_flush_timeout,
            old.irq_suspend_timeout,
            old.threaded
        ),
        (None, None, None, None)
    );
    let error = parse_napi(&attr(napi_attr::GRO_FLUSH_TIMEOUT, &[1, 2, 3]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("gro-flush-timeout has 3 bytes"), "{error}");
}

#[test]
fn queue_without_napi_and_missing_attributes() {
    let q = parse_queue(
        &genl(
            cmd::QUEUE_GET,
            &[
                attr(queue_attr::ID, &1u32.to_ne_bytes()),
                attr(queue_attr::TYPE, &QUEUE_TYPE_TX.to_ne_bytes()),
                attr(queue_attr::IFINDEX, &5u32.to_ne_bytes()),
            ],
        )[GENL_HDRLEN..],
    )
    .unwrap();
    assert_eq!(
        q,
        NetdevQueue {
            ifindex: 5,
            direction: QueueDirection::Tx,
            id: 1,
            napi_id: None
        }
    );
    let error = parse_queue(&attr(queue_attr::ID, &1u32.to_ne_bytes()))
        .unwrap_err()
        .to_string();
    assert!(error.contains("ifindex"), "{error}");
    let error = parse_queue(&attr(queue_attr::TYPE, &7u32.to_ne_bytes()))
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown queue type 7"), "{error}");
}

#[test]
fn queues_join_their_napi_irq() {
    let queue = |direction, id, napi_id| NetdevQueue {
        ifindex: 3,
        direction,
        id,
        napi_id,
    };
    let napi = |id, irq| Napi {
        id,
        ifindex: 3,
        irq,
        ..Napi::default()
    };
    let joined = join_queue_irqs(
        vec![
            queue(QueueDirection::Rx, 0, Some(9001)),
            queue(QueueDirection::Rx, 1, Some(9000)),
            queue(QueueDirection::Tx, 0, Some(9001)),
            queue(QueueDirection::Tx, 1, None),
            queue(QueueDirection::Rx, 2, Some(9002)),
        ],
        vec![napi(9000, Some(45)), napi(9001, Some(44)), napi(9002, None)],
    );
    let irqs: Vec<_> = joined.iter().map(|q| q.irq).collect();
    assert_eq!(irqs, vec![Some(44), Some(45), Some(44), None, None]);
}

#[test]
fn family_ops_come_from_the_ctrl_reply() {
    let nlas = vec![
        GenlCtrlAttrs::FamilyName("netdev".into()),
        GenlCtrlAttrs::FamilyId(20),
        GenlCtrlAttrs::Version(1),
        GenlCtrlAttrs::Ops(vec![
            vec![OpAttrs::Id(1), OpAttrs::Flags(6)],
            vec![OpAttrs::Id(10), OpAttrs::Flags(6)],
            vec![OpAttrs::Id(11), OpAttrs::Flags(6)],
        ]),
    ];
    let family = family_from_ctrl(&nlas).unwrap();
    assert_eq!(family.id, 20);
    assert!(family.ops.queue_get && family.ops.napi_get);
    assert!(!family.ops.qstats_get, "a 6.8 kernel has no qstats-get");
}

#[test]
fn request_layout_matches_the_kernel_abi() {
    let attrs = [
        U32Attr::new(qstats_attr::SCOPE, QSTATS_SCOPE_QUEUE),
        U32Attr::new(qstats_attr::IFINDEX, 2),
    ];
    let mut request = GenlMessage::from_payload(NetdevRequest {
        command: cmd::QSTATS_GET,
        attrs: &attrs,
    });
    request.set_resolved_family_id(20);
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = 3;
    let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(request));
    message.finalize();
    let mut bytes = vec![0; message.buffer_len()];
    message.serialize(&mut bytes);
    let mut expected = MessageBuilder::new();
    expected.message(20, NLM_F_REQUEST | NLM_F_DUMP, 3, &genl_body_for_test());
    // The port id is 0 in requests (the kernel fills it in).
    expected.bytes[12..16].copy_from_slice(&0u32.to_ne_bytes());
    assert_eq!(bytes, expected.bytes);

    fn genl_body_for_test() -> Vec<u8> {
        genl(
            cmd::QSTATS_GET,
            &[
                attr(qstats_attr::SCOPE, &QSTATS_SCOPE_QUEUE.to_ne_bytes()),
                attr(qstats_attr::IFINDEX, &2u32.to_ne_bytes()),
            ],
        )
    }
}
