//! Per-queue packet counters for every device, from whichever source has them.
//!
//! New kernels give per-queue counters through the netdev family's `qstats-get` (and
//! drivers that implement it stop duplicating them in `ethtool -S`); old kernels and
//! drivers without `netdev_stat_ops` only have `ethtool -S`, whose names
//! [`super::ethtool_names`] maps to queues. [`QueueCounterSource`] remembers per device
//! which source worked, so a tick costs one netlink dump for the whole machine plus
//! `SIOCETHTOOL` ioctls only for the devices that need them. Devices with neither
//! (veth, bridges, totals-only drivers) are re-probed only every
//! [`QueueCounterSource::REPROBE_TICKS`] ticks. A probe that *failed* is another matter:
//! it says nothing about the device, so it is tried again at the next tick, then after
//! 1, 3, 7 ... ticks while it keeps failing (`ProbeSchedule`); a single failed probe at
//! start must not blind the RSS lever and the queue-aware rules for a minute.

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
    /// When ethtool is asked again while the device is `Unavailable`.
    schedule: ProbeSchedule,
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
            schedule: ProbeSchedule::default(),
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
            if state.source == CounterSource::Unavailable && state.schedule.wait() {
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
            let probe = match sample_ethtool(ethtool, device.name, state, out) {
                Ok(()) if out.len() > start => Probe::Counters,
                Ok(()) => Probe::NoCounters,
                Err(error) => {
                    first_error.get_or_insert(error);
                    Probe::Failed
                }
            };
            state.schedule.after(probe);
            state.source = if probe == Probe::Counters {
                CounterSource::Ethtool
            } else {
                CounterSource::Unavailable
            };
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// What one ethtool probe of a device found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Counters,
    /// The device answered, without per-queue packet counters.
    NoCounters,
    /// The ioctl failed: nothing is known about the device.
    Failed,
}

/// When a device without counters is probed again: an answer without counters holds for
/// [`QueueCounterSource::REPROBE_TICKS`] ticks; a failure is retried at once, then after
/// twice as many ticks each time it fails again, up to the same bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ProbeSchedule {
    /// Ticks still to skip before the next probe.
    skip: u32,
    /// Failed probes in a row.
    failures: u32,
}

impl ProbeSchedule {
    /// Whether this tick goes without a probe (counting it).
    fn wait(&mut self) -> bool {
        if self.skip == 0 {
            return false;
        }
        self.skip -= 1;
        true
    }

    fn after(&mut self, probe: Probe) {
        let most = QueueCounterSource::REPROBE_TICKS - 1;
        (self.skip, self.failures) = match probe {
            Probe::Counters => (0, 0),
            Probe::NoCounters => (most, 0),
            Probe::Failed => {
                let skip = 1u32
                    .checked_shl(self.failures)
                    .map_or(most, |n| (n - 1).min(most));
                (skip, self.failures.saturating_add(1))
            }
        };
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

    /// The ticks on which a device is probed, over `ticks` ticks, when every probe finds
    /// `probe`.
    fn probe_ticks(probe: Probe, ticks: u32) -> Vec<u32> {
        let mut schedule = ProbeSchedule::default();
        (0..ticks)
            .filter(|_| {
                if schedule.wait() {
                    return false;
                }
                schedule.after(probe);
                true
            })
            .collect()
    }

    #[test]
    fn a_failed_probe_is_retried_soon_and_backs_off_while_it_keeps_failing() {
        assert_eq!(probe_ticks(Probe::Failed, 64), vec![0, 1, 3, 7, 15, 31, 63]);
        let far = probe_ticks(Probe::Failed, 1000);
        let gaps: Vec<u32> = far.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g <= QueueCounterSource::REPROBE_TICKS));
        assert_eq!(gaps.last(), Some(&QueueCounterSource::REPROBE_TICKS));
    }

    #[test]
    fn a_device_without_counters_is_probed_every_reprobe_ticks() {
        let every = QueueCounterSource::REPROBE_TICKS;
        assert_eq!(
            probe_ticks(Probe::NoCounters, 2 * every + 1),
            vec![0, every, 2 * every]
        );
        assert_eq!(probe_ticks(Probe::Counters, 3), vec![0, 1, 2]);
    }

    #[test]
    fn counters_after_failures_start_the_backoff_over() {
        let mut schedule = ProbeSchedule::default();
        for _ in 0..5 {
            schedule.after(Probe::Failed);
        }
        schedule.after(Probe::Counters);
        assert_eq!(schedule, ProbeSchedule::default());
        schedule.after(Probe::Failed);
        assert!(
            !schedule.wait(),
            "the first failure after counters is retried at once"
        );
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
