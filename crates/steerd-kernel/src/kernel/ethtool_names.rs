//! Which `ethtool -S` driver stats are per-queue packet and byte counters.
//!
//! Drivers name their per-queue counters freely; these are the conventions steerd knows
//! (docs/kernel.md, "Per-queue counters", checked against real captures of 17
//! drivers and the drivers' string tables):
//!
//! | convention | drivers |
//! |---|---|
//! | `rx_queue_<n>_packets`, `tx_queue_<n>_bytes` | ixgbe, igb, igc, ice, virtio_net < 6.10, hv_netvsc |
//! | `rx-<n>.packets`, `rx-<n>.rx_packets`, `tx-<n>.tx_bytes` | i40e (old and new), iavf, sfc |
//! | `rx<n>_packets`, `tx<n>_bytes` | mlx5_core, mlx4_en |
//! | `[<n>]: rx_ucast_packets` (+ mcast, bcast), `[<n>]: rx_bytes` | bnxt_en, bnx2x |
//! | `queue_<n>_rx_cnt`, `queue_<n>_tx_bytes` | ena |
//! | `rxq<n>: rx_pkts`, `txq<n>: tx_bytes` | be2net |
//! | `Rx Queue#: <n>` then indented `ucast pkts rx` (+ mcast, bcast) | vmxnet3 |
//!
//! Matching is by anchored pattern, so device totals (`rx_packets`, `port_rx_packets`,
//! `[hw] rx frames`) are never taken for queue 0, and look-alikes are rejected:
//! `rx_queue_0_xdp_packets` and `rx0_xsk_packets` are not packets, mlx5's `ch<n>_*` are
//! channel event counters, sfc's `tx-xdp-cpu-<n>` are XDP rings. No convention in the table
//! needs the driver's name to be told apart, so none is asked for.
//!
//! Where a driver counts unicast, multicast and broadcast separately (bnxt_en, bnx2x,
//! vmxnet3), the queue's packets (and bytes) are their **sum** — the same sum those drivers
//! report as the device's `rx_packets` in `ndo_get_stats64`. A whole counter for the queue
//! (bnx2x's `[<n>]: rx_bytes`) wins over the sum of parts.
//!
//! bnxt_en numbers its `[<n>]` groups by completion ring, and with separate rx and tx
//! rings the tx rings come after the rx rings; so bracketed indices are renumbered per
//! direction in ascending order (the k-th ring with tx counters is tx queue k). With
//! combined channels (the default, and bnx2x) that is the identity.

use crate::model::snapshot::QueueDirection;

/// Which counter of a queue a stat is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Packets,
    Bytes,
}

/// Whether a stat counts all of the queue's traffic or one cast class of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    Whole,
    Unicast,
    Multicast,
    Broadcast,
}

/// What the number in a stat's name means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexKind {
    /// The queue number itself.
    Queue,
    /// A ring index (bnxt/bnx2x `[<n>]:`), renumbered per direction when aggregating.
    Ring,
}

/// A stat recognised as a per-queue counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueueStatKey {
    pub direction: QueueDirection,
    pub index: u32,
    pub index_kind: IndexKind,
    pub field: Field,
    pub part: Part,
}

/// One queue's counters as mapped from driver stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedQueue {
    pub direction: QueueDirection,
    pub queue: u32,
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
}

/// Classifies one stat name on its own (everything but vmxnet3's block layout, which
/// needs [`Classifier`]). Leading and trailing blanks are ignored.
pub fn classify(name: &str) -> Option<QueueStatKey> {
    let name = name.trim();
    rx_queue_n_field(name)
        .or_else(|| dash_n_dot_field(name))
        .or_else(|| rxn_field(name))
        .or_else(|| bracket_ring(name))
        .or_else(|| ena_queue(name))
        .or_else(|| be2net_queue(name))
}

/// Classifies a driver's stats in the driver's order, following vmxnet3's
/// `Rx Queue#`/`Tx Queue#` blocks (the header's *value* is the queue number).
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    block: Option<(QueueDirection, u32)>,
}

impl Classifier {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn classify(&mut self, name: &str, value: u64) -> Option<QueueStatKey> {
        let trimmed = name.trim();
        let header = match trimmed {
            "Rx Queue#" => Some(QueueDirection::Rx),
            "Tx Queue#" => Some(QueueDirection::Tx),
            _ => None,
        };
        if let Some(direction) = header {
            // A queue number past MAX_QUEUES is no queue (a fuzzed `Tx Queue#: 4294967295`
            // once reached the model): the block's stats are then not per-queue.
            self.block = u32::try_from(value)
                .ok()
                .filter(|&queue| queue < crate::limits::MAX_QUEUES)
                .map(|queue| (direction, queue));
            return None;
        }
        if let Some((direction, queue)) = self.block
            && let Some((field, part)) = vmxnet3_block_stat(trimmed, direction)
        {
            return Some(QueueStatKey {
                direction,
                index: queue,
                index_kind: IndexKind::Queue,
                field,
                part,
            });
        }
        classify(name)
    }
}

/// Classifies every stat of a sample (index-aligned with the driver's list) into `keys`.
pub fn classify_all<'a>(
    stats: impl IntoIterator<Item = (&'a str, u64)>,
    keys: &mut Vec<Option<QueueStatKey>>,
) {
    keys.clear();
    let mut classifier = Classifier::new();
    keys.extend(
        stats
            .into_iter()
            .map(|(name, value)| classifier.classify(name, value)),
    );
}

/// Sums classified stats into per-queue counters (sorted rx first, then by queue).
/// `keys` and `values` are index-aligned; extra entries on either side are ignored.
pub fn aggregate(keys: &[Option<QueueStatKey>], values: &[u64], out: &mut Vec<MappedQueue>) {
    #[derive(Default, Clone, Copy)]
    struct Sums {
        whole: Option<u64>,
        parts: Option<u64>,
    }
    impl Sums {
        fn add(&mut self, part: Part, value: u64) {
            match part {
                Part::Whole => self.whole = Some(value),
                _ => self.parts = Some(self.parts.unwrap_or(0).wrapping_add(value)),
            }
        }
        fn value(self) -> Option<u64> {
            self.whole.or(self.parts)
        }
    }
    struct Entry {
        direction: QueueDirection,
        index: u32,
        ring: bool,
        packets: Sums,
        bytes: Sums,
    }

    let mut entries: Vec<Entry> = Vec::new();
    for (key, &value) in keys.iter().zip(values) {
        let Some(key) = key else { continue };
        let order = (direction_rank(key.direction), key.index);
        let position = match entries
            .binary_search_by_key(&order, |e| (direction_rank(e.direction), e.index))
        {
            Ok(position) => position,
            Err(position) => {
                entries.insert(
                    position,
                    Entry {
                        direction: key.direction,
                        index: key.index,
                        ring: key.index_kind == IndexKind::Ring,
                        packets: Sums::default(),
                        bytes: Sums::default(),
                    },
                );
                position
            }
        };
        if let Some(entry) = entries.get_mut(position) {
            match key.field {
                Field::Packets => entry.packets.add(key.part, value),
                Field::Bytes => entry.bytes.add(key.part, value),
            }
        }
    }

    out.clear();
    let (mut next_rx_ring, mut next_tx_ring) = (0u32, 0u32);
    for entry in entries {
        let queue = if entry.ring {
            let next = match entry.direction {
                QueueDirection::Rx => &mut next_rx_ring,
                QueueDirection::Tx => &mut next_tx_ring,
            };
            let queue = *next;
            *next += 1;
            queue
        } else {
            entry.index
        };
        out.push(MappedQueue {
            direction: entry.direction,
            queue,
            packets: entry.packets.value(),
            bytes: entry.bytes.value(),
        });
    }
}

/// Convenience: classify and aggregate `(name, value)` pairs in the driver's order.
pub fn map_queue_stats<N: AsRef<str>>(stats: &[(N, u64)]) -> Vec<MappedQueue> {
    let mut keys = Vec::with_capacity(stats.len());
    classify_all(stats.iter().map(|(n, v)| (n.as_ref(), *v)), &mut keys);
    let values: Vec<u64> = stats.iter().map(|(_, v)| *v).collect();
    let mut out = Vec::new();
    aggregate(&keys, &values, &mut out);
    out
}

fn direction_rank(direction: QueueDirection) -> u8 {
    match direction {
        QueueDirection::Rx => 0,
        QueueDirection::Tx => 1,
    }
}

/// A queue number: one or more ASCII digits, no sign, below
/// [`crate::limits::MAX_QUEUES`]. Returns the rest.
///
/// The number indexes per-queue tables, so a name with a number no kernel can have
/// (`rx_queue_4294967295_packets`) is not a queue statistic at all: it is left
/// unclassified, like any other name steerd does not know.
fn number(text: &str) -> Option<(u32, &str)> {
    let end = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    if end == 0 {
        return None;
    }
    let (digits, rest) = text.split_at(end);
    let index: u32 = digits.parse().ok()?;
    (index < crate::limits::MAX_QUEUES).then_some((index, rest))
}

/// Strips `rx<sep>`/`tx<sep>` and says which.
fn direction_prefix<'a>(text: &'a str, rx: &str, tx: &str) -> Option<(QueueDirection, &'a str)> {
    if let Some(rest) = text.strip_prefix(rx) {
        Some((QueueDirection::Rx, rest))
    } else {
        text.strip_prefix(tx).map(|rest| (QueueDirection::Tx, rest))
    }
}

fn key(direction: QueueDirection, index: u32, field: Field) -> QueueStatKey {
    QueueStatKey {
        direction,
        index,
        index_kind: IndexKind::Queue,
        field,
        part: Part::Whole,
    }
}

/// `rx_queue_<n>_packets|bytes` (ixgbe, igb, igc, ice, virtio_net < 6.10, hv_netvsc).
fn rx_queue_n_field(name: &str) -> Option<QueueStatKey> {
    prefix_n_underscore_field(name, "rx_queue_", "tx_queue_")
}

/// `<rx prefix><n>_packets|bytes` and the same with the tx prefix.
fn prefix_n_underscore_field(name: &str, rx: &str, tx: &str) -> Option<QueueStatKey> {
    let (direction, rest) = direction_prefix(name, rx, tx)?;
    let (index, rest) = number(rest)?;
    let field = field_named(rest.strip_prefix('_')?, "packets")?;
    Some(key(direction, index, field))
}

/// The counter a stat's last word names: `bytes`, or packets under the driver's word for
/// them (`packets`, be2net's and vmxnet3's `pkts`, ena's `cnt`).
fn field_named(word: &str, packets: &str) -> Option<Field> {
    if word == packets {
        Some(Field::Packets)
    } else if word == "bytes" {
        Some(Field::Bytes)
    } else {
        None
    }
}

/// The `rx_` or `tx_` that some drivers repeat inside a queue's stat name.
fn own_prefix(direction: QueueDirection) -> &'static str {
    match direction {
        QueueDirection::Rx => "rx_",
        QueueDirection::Tx => "tx_",
    }
}

/// `rx-<n>.packets`, `rx-<n>.rx_packets` (and bytes, and tx) — i40e, iavf, sfc.
fn dash_n_dot_field(name: &str) -> Option<QueueStatKey> {
    let (direction, rest) = direction_prefix(name, "rx-", "tx-")?;
    let (index, rest) = number(rest)?;
    let field = rest.strip_prefix('.')?;
    let own = own_prefix(direction);
    let field = field_named(field.strip_prefix(own).unwrap_or(field), "packets")?;
    Some(key(direction, index, field))
}

/// `rx<n>_packets|bytes`, `tx<n>_packets|bytes` — mlx5_core, mlx4_en.
fn rxn_field(name: &str) -> Option<QueueStatKey> {
    prefix_n_underscore_field(name, "rx", "tx")
}

/// `[<n>]: rx_ucast_packets`, `[<n>]: rx_bytes`, ... — bnxt_en, bnx2x (ring-indexed).
fn bracket_ring(name: &str) -> Option<QueueStatKey> {
    let rest = name.strip_prefix('[')?;
    let (index, rest) = number(rest)?;
    let stat = rest.strip_prefix("]:")?.trim_start();
    let (direction, stat) = direction_prefix(stat, "rx_", "tx_")?;
    let (part, field) = match stat {
        "packets" => (Part::Whole, Field::Packets),
        "bytes" => (Part::Whole, Field::Bytes),
        "ucast_packets" => (Part::Unicast, Field::Packets),
        "mcast_packets" => (Part::Multicast, Field::Packets),
        "bcast_packets" => (Part::Broadcast, Field::Packets),
        "ucast_bytes" => (Part::Unicast, Field::Bytes),
        "mcast_bytes" => (Part::Multicast, Field::Bytes),
        "bcast_bytes" => (Part::Broadcast, Field::Bytes),
        _ => return None,
    };
    Some(QueueStatKey {
        direction,
        index,
        index_kind: IndexKind::Ring,
        field,
        part,
    })
}

/// `queue_<n>_rx_cnt`, `queue_<n>_rx_bytes` (and tx) — ena.
fn ena_queue(name: &str) -> Option<QueueStatKey> {
    let rest = name.strip_prefix("queue_")?;
    let (index, rest) = number(rest)?;
    let (direction, stat) = direction_prefix(rest, "_rx_", "_tx_")?;
    let field = field_named(stat, "cnt")?;
    Some(key(direction, index, field))
}

/// `rxq<n>: rx_pkts`, `rxq<n>: rx_bytes`, `txq<n>: tx_pkts` — be2net.
fn be2net_queue(name: &str) -> Option<QueueStatKey> {
    let (direction, rest) = direction_prefix(name, "rxq", "txq")?;
    let (index, rest) = number(rest)?;
    let stat = rest.strip_prefix(':')?.trim_start();
    let field = field_named(stat.strip_prefix(own_prefix(direction))?, "pkts")?;
    Some(key(direction, index, field))
}

/// vmxnet3's per-queue stats inside a `Rx Queue#`/`Tx Queue#` block.
fn vmxnet3_block_stat(name: &str, direction: QueueDirection) -> Option<(Field, Part)> {
    let (kind, rest) = name.split_once(' ')?;
    let part = match kind {
        "ucast" => Part::Unicast,
        "mcast" => Part::Multicast,
        "bcast" => Part::Broadcast,
        _ => return None,
    };
    let suffix = match direction {
        QueueDirection::Rx => " rx",
        QueueDirection::Tx => " tx",
    };
    let field = field_named(rest.strip_suffix(suffix)?, "pkts")?;
    Some((field, part))
}

#[cfg(test)]
mod tests {
    use super::*;
    use QueueDirection::{Rx, Tx};

    fn whole(direction: QueueDirection, index: u32, field: Field) -> Option<QueueStatKey> {
        Some(key(direction, index, field))
    }

    #[test]
    fn every_convention() {
        use Field::*;
        let cases = [
            ("rx_queue_12_packets", whole(Rx, 12, Packets)),
            ("tx_queue_0_bytes", whole(Tx, 0, Bytes)),
            ("rx-3.packets", whole(Rx, 3, Packets)),
            ("rx-3.rx_packets", whole(Rx, 3, Packets)),
            ("tx-11.tx_bytes", whole(Tx, 11, Bytes)),
            ("tx-1.bytes", whole(Tx, 1, Bytes)),
            ("rx15_packets", whole(Rx, 15, Packets)),
            ("tx0_bytes", whole(Tx, 0, Bytes)),
            ("queue_2_rx_cnt", whole(Rx, 2, Packets)),
            ("queue_2_tx_bytes", whole(Tx, 2, Bytes)),
            ("rxq8: rx_pkts", whole(Rx, 8, Packets)),
            ("txq1: tx_bytes", whole(Tx, 1, Bytes)),
        ];
        for (name, expected) in cases {
            assert_eq!(classify(name), expected, "{name}");
        }
        let bnxt = classify("[7]: rx_mcast_packets").unwrap();
        assert_eq!(
            (
                bnxt.direction,
                bnxt.index,
                bnxt.index_kind,
                bnxt.field,
                bnxt.part
            ),
            (Rx, 7, IndexKind::Ring, Packets, Part::Multicast)
        );
        let bnx2x = classify("[0]: tx_bytes").unwrap();
        assert_eq!((bnx2x.direction, bnx2x.part), (Tx, Part::Whole));
    }

    #[test]
    fn look_alikes_are_not_queue_counters() {
        for name in [
            "rx_packets",
            "tx_bytes",
            "rx_queue_0_xdp_packets",
            "rx_queue_0_drops",
            "rx_queue_packets",
            "rx0_xsk_packets",
            "rx0_xdp_drop",
            "ch0_events",
            "tx-xdp-cpu-0.tx_packets",
            "rx-0.tx_packets",
            "rx_packets_phy",
            "port_rx_packets",
            "[hw] rx frames",
            "[0]: tpa_packets",
            "[0]: rx_discards",
            "rxq0: rx_compl",
            "rxq0: tx_pkts",
            "queue_0_rx_refil_partial",
            "rx_64_byte_packets",
            "rx-99999999999.packets",
            "rx_queue_-1_packets",
            "ptp_tx0_packets",
            "",
        ] {
            assert_eq!(classify(name), None, "{name:?}");
        }
    }

    #[test]
    fn a_vmxnet3_header_past_the_queue_limit_maps_nothing() {
        // Found by tests/fuzz_parsers.rs on a mutated vmxnet3 capture.
        let stats = [("Tx Queue#", u64::from(u32::MAX)), ("  ucast pkts tx", 10)];
        assert_eq!(map_queue_stats(&stats), vec![]);
    }

    #[test]
    fn vmxnet3_blocks_take_the_queue_from_the_header_value() {
        let stats = [
            ("Tx Queue#", 0),
            ("  ucast pkts tx", 10),
            ("  mcast pkts tx", 1),
            ("  ucast bytes tx", 1000),
            ("  TSO pkts tx", 99),
            ("Rx Queue#", 1),
            ("  ucast pkts rx", 20),
            ("  bcast pkts rx", 2),
            ("  mcast pkts tx", 555), // wrong direction for the block: ignored
            ("tx timeout count", 0),
        ];
        let mapped = map_queue_stats(&stats);
        assert_eq!(
            mapped,
            vec![
                MappedQueue {
                    direction: Rx,
                    queue: 1,
                    packets: Some(22),
                    bytes: None
                },
                MappedQueue {
                    direction: Tx,
                    queue: 0,
                    packets: Some(11),
                    bytes: Some(1000)
                },
            ]
        );
    }

    #[test]
    fn cast_parts_are_summed_and_a_whole_counter_wins() {
        let stats = [
            ("[0]: rx_bytes", 500),
            ("[0]: rx_ucast_packets", 5),
            ("[0]: rx_mcast_packets", 2),
            ("[0]: rx_bcast_packets", 1),
            ("[0]: rx_ucast_bytes", 400),
            ("[0]: rx_mcast_bytes", 50),
        ];
        let mapped = map_queue_stats(&stats);
        assert_eq!(mapped.len(), 1);
        assert_eq!(mapped[0].packets, Some(8));
        assert_eq!(mapped[0].bytes, Some(500));
    }

    #[test]
    fn bnxt_split_rings_are_renumbered_per_direction() {
        // Two rx-only rings (0, 1) then two tx-only rings (2, 3).
        let stats = [
            ("[0]: rx_ucast_packets", 1),
            ("[1]: rx_ucast_packets", 2),
            ("[2]: tx_ucast_packets", 3),
            ("[3]: tx_ucast_packets", 4),
        ];
        let mapped = map_queue_stats(&stats);
        let tx: Vec<_> = mapped
            .iter()
            .filter(|q| q.direction == Tx)
            .map(|q| (q.queue, q.packets))
            .collect();
        assert_eq!(tx, vec![(0, Some(3)), (1, Some(4))]);
    }

    #[test]
    fn queues_are_sorted_rx_then_tx_by_number() {
        let stats = [
            ("tx_queue_1_packets", 1),
            ("rx_queue_10_packets", 2),
            ("rx_queue_2_packets", 3),
            ("tx_queue_0_packets", 4),
        ];
        let order: Vec<_> = map_queue_stats(&stats)
            .iter()
            .map(|q| (q.direction, q.queue))
            .collect();
        assert_eq!(order, vec![(Rx, 2), (Rx, 10), (Tx, 0), (Tx, 1)]);
    }
}
