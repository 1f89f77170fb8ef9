//! Why the daemon reads the machine again (devices, IRQs, queues, CPUs): the words its log
//! uses and the `reason` label of `steerd_rediscoveries_total`. One list, so the metric's
//! series all exist from the start and an operator can tell a kernel notification heard at
//! once (a channel or RSS table change, a queue uevent) from the periodic read that would
//! have found the same change up to `REDISCOVER_EVERY` later.

/// What made the daemon rediscover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rediscovery {
    /// The periodic read (`REDISCOVER_EVERY`).
    Periodic,
    /// A link came, went or changed state (rtnetlink).
    LinkEvent,
    /// A receive or transmit queue was added or removed (a `queues` kobject uevent).
    QueueEvent,
    /// ethtool netlink announced a channel-count change.
    EthtoolChannels,
    /// ethtool netlink announced an RSS table or context change (`ETHTOOL_MSG_RSS_NTF`,
    /// 6.17 and later).
    EthtoolRss,
    /// Both in one batch of notifications.
    EthtoolChannelsAndRss,
    /// The online CPUs changed (softnet rows).
    CpuHotplug,
    /// A device's threaded NAPI was switched on or off.
    ThreadedSwitched,
    /// A multi-queue device's `sys/class/net` directory is gone (or it is being
    /// unregistered), seen by the tick before any link event or failed write said so. Its
    /// own reason: it once read as a `threaded` switch (its `threaded` no longer readable).
    DeviceVanished,
    /// A write found its target gone.
    TargetVanished,
    /// A write found a value steerd had written changed (someone else's, or a driver's
    /// reset not heard yet).
    WriteFoundChanged,
    /// The periodic read-back found a value steerd had written changed, and the model did
    /// not hold it yet.
    ReadBackFoundChanged,
}

impl Rediscovery {
    pub const ALL: [Rediscovery; 12] = [
        Rediscovery::Periodic,
        Rediscovery::LinkEvent,
        Rediscovery::QueueEvent,
        Rediscovery::EthtoolChannels,
        Rediscovery::EthtoolRss,
        Rediscovery::EthtoolChannelsAndRss,
        Rediscovery::CpuHotplug,
        Rediscovery::ThreadedSwitched,
        Rediscovery::DeviceVanished,
        Rediscovery::TargetVanished,
        Rediscovery::WriteFoundChanged,
        Rediscovery::ReadBackFoundChanged,
    ];

    /// The metric's label value.
    pub fn label(self) -> &'static str {
        match self {
            Rediscovery::Periodic => "periodic",
            Rediscovery::LinkEvent => "link_event",
            Rediscovery::QueueEvent => "queue_event",
            Rediscovery::EthtoolChannels => "ethtool_channels",
            Rediscovery::EthtoolRss => "ethtool_rss",
            Rediscovery::EthtoolChannelsAndRss => "ethtool_channels_and_rss",
            Rediscovery::CpuHotplug => "hot_plug",
            Rediscovery::ThreadedSwitched => "threaded_switched",
            Rediscovery::DeviceVanished => "device_vanished",
            Rediscovery::TargetVanished => "target_vanished",
            Rediscovery::WriteFoundChanged => "write_found_changed",
            Rediscovery::ReadBackFoundChanged => "read_back_found_changed",
        }
    }

    /// The log's words.
    pub fn text(self) -> &'static str {
        match self {
            Rediscovery::Periodic => "periodic",
            Rediscovery::LinkEvent => "link event",
            Rediscovery::QueueEvent => "queues added or removed",
            Rediscovery::EthtoolChannels => "channels changed (ethtool notification)",
            Rediscovery::EthtoolRss => "RSS changed (ethtool notification)",
            Rediscovery::EthtoolChannelsAndRss => "channels and RSS changed (ethtool notification)",
            Rediscovery::CpuHotplug => "CPU hot-plug",
            Rediscovery::ThreadedSwitched => "threaded NAPI switched",
            Rediscovery::DeviceVanished => "a device vanished",
            Rediscovery::TargetVanished => "a target vanished",
            Rediscovery::WriteFoundChanged => "a write found a value steerd wrote changed",
            Rediscovery::ReadBackFoundChanged => "the read-back found a value steerd wrote changed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_label() {
        let labels: std::collections::BTreeSet<&str> =
            Rediscovery::ALL.iter().map(|r| r.label()).collect();
        assert_eq!(labels.len(), Rediscovery::ALL.len());
        assert!(
            labels
                .iter()
                .all(|l| l.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        );
    }
}
