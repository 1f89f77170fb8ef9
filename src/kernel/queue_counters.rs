//! Per-queue packet counters for every device, from whichever source has them.
//!
//! New kernels give per-queue counters through the netdev family's `qstats-get` (and
//! drivers that implement it stop duplicating them in `ethtool -S`); old kernels and
//! drivers without `netdev_stat_ops` only have `ethtool -S`, whose names
//! [`super::ethtool_names`] maps to queues. [`QueueCounterSource`] remembers per device
//! which source worked, so a tick costs one netlink dump for the whole machine plus
//! `SIOCETHTOOL` ioctls only for the devices that need them. Devices with neither
//! (veth, bridges, totals-only drivers) are re-probed only every
//! [`QueueCounterSource::REPROBE_TICKS`] ticks.

use std::collections::HashMap;

use crate::error::Error;
use crate::kernel::ethtool::Ethtool;
use crate::kernel::ethtool_names::{self, MappedQueue, QueueStatKey};
use crate::kernel::netlink::{NetdevClient, QueueStats};
use crate::model::snapshot::{QueueCounters, QueueDirection};

/// Where a device's per-queue counters come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterSource {
    /// netdev `qstats-get`.
    Netlink,
    /// `ethtool -S` (SIOCETHTOOL), mapped by driver naming conventions.
    Ethtool,
    /// Neither has per-queue packet counters for this device (as of the last probe).
    Unavailable,
}

/// A device to sample: its name (for ethtool) and ifindex (for netlink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceId<'a> {
    pub name: &'a str,
    pub ifindex: u32,
}

/// What is remembered about one device between ticks.
#[derive(Debug)]
struct DeviceState {
    source: CounterSource,
    /// Ticks since the device was last probed with ethtool while `Unavailable`.
    idle_ticks: u32,
    /// The raw name table of the last ethtool sample, and its classification: when the
    /// names did not change, the classification is reused.
    names: Vec<u8>,
    keys: Vec<Option<QueueStatKey>>,
    mapped: Vec<MappedQueue>,
}

impl DeviceState {
    fn new() -> Self {
        DeviceState {
            source: CounterSource::Unavailable,
            idle_ticks: 0,
            names: Vec::new(),
            keys: Vec::new(),
            mapped: Vec::new(),
        }
    }
}

/// Samples per-queue counters tick after tick, keeping its sockets and buffers.
#[derive(Debug)]
pub struct QueueCounterSource {
    /// `None` when the kernel has no netdev family or no `qstats-get` op.
    netdev: Option<NetdevClient>,
    /// Opened on first need.
    ethtool: Option<Ethtool>,
    devices: HashMap<String, DeviceState>,
    qstats: Vec<QueueStats>,
}

impl QueueCounterSource {
    /// Ticks between two ethtool probes of a device that had no per-queue counters.
    pub const REPROBE_TICKS: u32 = 60;

    /// Connects to the netdev family (in the calling thread's network namespace) when
    /// the kernel offers `qstats-get`; otherwise everything goes through ethtool.
    pub fn new() -> Result<Self, Error> {
        let netdev = NetdevClient::connect()?.filter(|client| client.family().ops.qstats_get);
        Ok(Self::with_netdev(netdev))
    }

    /// A source using the given client (or none: ethtool only).
    pub fn with_netdev(netdev: Option<NetdevClient>) -> Self {
        QueueCounterSource {
            netdev,
            ethtool: None,
            devices: HashMap::new(),
            qstats: Vec::new(),
        }
    }

    /// Whether `qstats-get` is in use.
    pub fn uses_netlink(&self) -> bool {
        self.netdev.is_some()
    }

    /// The source that served `device` at the last sample.
    pub fn source(&self, device: &str) -> Option<CounterSource> {
        self.devices.get(device).map(|state| state.source)
    }

    /// One tick: per-queue counters of `devices` into `out` (cleared first), each device's
    /// queues rx first, then tx, by queue number. Devices without per-queue counters add
    /// nothing. A device that vanished since discovery is skipped, not an error. On an
    /// error the remaining devices are still sampled and the first error is returned.
    pub fn sample(
        &mut self,
        devices: &[DeviceId<'_>],
        out: &mut Vec<QueueCounters>,
    ) -> Result<(), Error> {
        out.clear();
        let mut first_error = None;
        if let Some(netdev) = self.netdev.as_mut() {
            match netdev.queue_stats_into(None, &mut self.qstats) {
                // The dump comes in ifindex order already; a stable sort keeps queue order.
                Ok(()) => self.qstats.sort_by_key(|stats| stats.ifindex),
                Err(error) => {
                    self.qstats.clear();
                    first_error = Some(error);
                }
            }
        }
        self.devices
            .retain(|name, _| devices.iter().any(|device| device.name == name));

        for device in devices {
            let state = self
                .devices
                .entry(device.name.to_owned())
                .or_insert_with(DeviceState::new);
            let start = out.len();
            if push_netlink(&self.qstats, device, out) {
                state.source = CounterSource::Netlink;
                continue;
            }
            if state.source == CounterSource::Unavailable && state.idle_ticks > 0 {
                state.idle_ticks = (state.idle_ticks + 1) % Self::REPROBE_TICKS;
                continue;
            }
            let ethtool = match self.ethtool.as_mut() {
                Some(ethtool) => ethtool,
                None => match Ethtool::new() {
                    Ok(ethtool) => self.ethtool.insert(ethtool),
                    Err(error) => {
                        first_error.get_or_insert(error);
                        continue;
                    }
                },
            };
            match sample_ethtool(ethtool, device.name, state, out) {
                Ok(()) => {}
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
            state.source = if out.len() > start {
                CounterSource::Ethtool
            } else {
                CounterSource::Unavailable
            };
            state.idle_ticks = u32::from(state.source == CounterSource::Unavailable);
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// Per-queue counters of one device, from a fresh [`QueueCounterSource`] (for one-off
/// callers such as `steerd inspect`; the daemon keeps a source across ticks).
pub fn device_queue_counters(name: &str, ifindex: u32) -> Result<Vec<QueueCounters>, Error> {
    let mut source = QueueCounterSource::new()?;
    let mut out = Vec::new();
    source.sample(&[DeviceId { name, ifindex }], &mut out)?;
    Ok(out)
}

/// Appends `device`'s queues from the qstats dump (sorted by ifindex); false when the dump
/// has no queue with a packet counter for it.
fn push_netlink(
    qstats: &[QueueStats],
    device: &DeviceId<'_>,
    out: &mut Vec<QueueCounters>,
) -> bool {
    let begin = qstats.partition_point(|stats| stats.ifindex < device.ifindex);
    let end = qstats.partition_point(|stats| stats.ifindex <= device.ifindex);
    let start = out.len();
    for stats in qstats.get(begin..end).unwrap_or_default() {
        let (Some(direction), Some(packets)) = (stats.direction, stats.packets()) else {
            continue;
        };
        out.push(QueueCounters {
            device: device.name.to_owned(),
            direction,
            queue: stats.queue,
            packets,
            bytes: stats.bytes(),
        });
    }
    sort_queues(out.get_mut(start..).unwrap_or_default());
    out.len() > start
}

/// Appends `name`'s queues from `ethtool -S`, reusing the name classification when the
/// driver's names did not change since the last sample.
fn sample_ethtool(
    ethtool: &mut Ethtool,
    name: &str,
    state: &mut DeviceState,
    out: &mut Vec<QueueCounters>,
) -> Result<(), Error> {
    let Some(stats) = ethtool.sample_if_available(name)? else {
        state.names.clear();
        state.keys.clear();
        return Ok(());
    };
    if stats.raw_names() != state.names.as_slice() {
        state.names.clear();
        state.names.extend_from_slice(stats.raw_names());
        let mut names = Vec::with_capacity(stats.len());
        names.extend(stats.iter().map(|(name, value)| (name.into_owned(), value)));
        ethtool_names::classify_all(
            names.iter().map(|(name, value)| (name.as_str(), *value)),
            &mut state.keys,
        );
    }
    ethtool_names::aggregate(&state.keys, stats.values(), &mut state.mapped);
    for queue in &state.mapped {
        let Some(packets) = queue.packets else {
            continue;
        };
        out.push(QueueCounters {
            device: name.to_owned(),
            direction: queue.direction,
            queue: queue.queue,
            packets,
            bytes: queue.bytes,
        });
    }
    Ok(())
}

fn sort_queues(queues: &mut [QueueCounters]) {
    queues.sort_by_key(|q| {
        (
            match q.direction {
                QueueDirection::Rx => 0u8,
                QueueDirection::Tx => 1,
            },
            q.queue,
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(ifindex: u32, direction: QueueDirection, queue: u32, packets: u64) -> QueueStats {
        let mut s = QueueStats {
            ifindex,
            direction: Some(direction),
            queue,
            ..QueueStats::default()
        };
        match direction {
            QueueDirection::Rx => s.rx_packets = Some(packets),
            QueueDirection::Tx => s.tx_packets = Some(packets),
        }
        s
    }

    #[test]
    fn netlink_rows_are_picked_by_ifindex_and_sorted() {
        let dump = vec![
            stats(2, QueueDirection::Tx, 0, 5),
            stats(2, QueueDirection::Rx, 1, 7),
            stats(2, QueueDirection::Rx, 0, 6),
            stats(3, QueueDirection::Rx, 0, 9),
            QueueStats {
                ifindex: 4,
                direction: Some(QueueDirection::Tx),
                tx_stop: Some(1),
                ..QueueStats::default()
            },
        ];
        let mut out = Vec::new();
        let eth0 = DeviceId {
            name: "eth0",
            ifindex: 2,
        };
        assert!(push_netlink(&dump, &eth0, &mut out));
        let got: Vec<_> = out
            .iter()
            .map(|q| (q.direction, q.queue, q.packets))
            .collect();
        assert_eq!(
            got,
            vec![
                (QueueDirection::Rx, 0, 6),
                (QueueDirection::Rx, 1, 7),
                (QueueDirection::Tx, 0, 5)
            ]
        );
        let no_packets = DeviceId {
            name: "x",
            ifindex: 4,
        };
        assert!(
            !push_netlink(&dump, &no_packets, &mut out),
            "tx-stop alone is no counter"
        );
        let absent = DeviceId {
            name: "y",
            ifindex: 9,
        };
        assert!(!push_netlink(&dump, &absent, &mut out));
    }
}
