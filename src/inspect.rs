//! `steerd inspect`: the whole machine model, for people (text) and programs (JSON).
//!
//! The JSON shape is a public interface, documented in `docs/inspect-json.md`; add fields
//! freely, but never rename or remove one without bumping `schema`.
//!
//! Besides the discovered model, `inspect` reads each device's RSS state (its indirection
//! table, key, hash function and hash fields; `kernel::rss`) through ethtool requests,
//! which describe the running machine: on a tree that is not the host (`--root` other than
//! `/`) it is not read, and shows as nothing in the text and `null` in the JSON, like the
//! other host-only answers (netdev netlink's NAPI ids). The daemon never reads it per tick.
//!
//! This module reads what both outputs show besides the model (the per-queue counters,
//! the RSS state); the two outputs are in `text` and `json`, re-exported here.

mod json;
mod text;

pub use json::{SCHEMA_VERSION, to_json};
pub use text::to_text;

use crate::discover::Machine;
use crate::kernel::rss::{RssError, RssState};
use crate::model::snapshot::{QueueCounters, QueueDirection};
use crate::root::Root;

/// Per-queue packet counters, cumulative, as `inspect` shows them: the ones the daemon
/// samples every tick (netdev `qstats-get`, else `ethtool -S`), read once. Only the
/// running kernel has them, so a `--root` tree has none, and says why.
#[derive(Debug, Clone, Default)]
pub struct QueueCounts {
    /// Every queue that has a packet counter, of the devices with queue vectors.
    pub counters: Vec<QueueCounters>,
    /// Why there are none, when they could not be read at all.
    pub unknown: Option<String>,
}

impl QueueCounts {
    /// Reads the counters of every device with queue vectors, on the host; a fake root
    /// gets none, and a failed read is the reason, not an error (the model stands alone).
    pub fn read(root: &Root, machine: &Machine) -> QueueCounts {
        if !root.is_host() {
            return QueueCounts {
                counters: Vec::new(),
                unknown: Some(
                    "a --root tree: per-queue counters come from the running kernel".into(),
                ),
            };
        }
        let devices: Vec<crate::kernel::queue_counters::DeviceId<'_>> = machine
            .inventory
            .devices
            .iter()
            .filter(|d| !d.irqs.is_empty())
            .filter_map(|d| {
                Some(crate::kernel::queue_counters::DeviceId {
                    name: &d.name,
                    ifindex: d.ifindex?,
                })
            })
            .collect();
        let mut counters = Vec::new();
        let read = crate::kernel::queue_counters::QueueCounterSource::new()
            .and_then(|mut source| source.sample(&devices, &mut counters));
        QueueCounts {
            unknown: read
                .err()
                .filter(|_| counters.is_empty())
                .map(|e| e.to_string()),
            counters,
        }
    }

    /// A receive queue's packets, when its driver counts them.
    fn rx_packets(&self, device: &str, queue: u32) -> Option<u64> {
        self.counters
            .iter()
            .find(|c| c.device == device && c.direction == QueueDirection::Rx && c.queue == queue)
            .map(|c| c.packets)
    }
}

/// Each device's RSS state, read when `inspect` runs; nothing off the host.
#[derive(Debug, Default)]
pub struct RssReadings {
    by_device: Vec<(String, Result<RssState, RssError>)>,
}

impl RssReadings {
    /// Reads every device's RSS state when `root` is the host (the ethtool requests
    /// describe the running machine); none otherwise.
    pub fn read(root: &Root, machine: &Machine) -> Self {
        if !root.is_host() {
            return RssReadings::default();
        }
        let ethtool = crate::kernel::ethtool::Ethtool::new();
        let by_device = machine
            .inventory
            .devices
            .iter()
            .map(|device| {
                let reading = match &ethtool {
                    Ok(ethtool) => crate::kernel::rss::read(ethtool, &device.name),
                    Err(error) => Err(RssError::Kernel {
                        device: device.name.clone(),
                        command: "SIOCETHTOOL",
                        errno: None,
                        reason: error.to_string(),
                    }),
                };
                (device.name.clone(), reading)
            })
            .collect();
        RssReadings { by_device }
    }

    /// Readings given directly (tests).
    pub fn new(by_device: Vec<(String, Result<RssState, RssError>)>) -> Self {
        RssReadings { by_device }
    }

    fn get(&self, device: &str) -> Option<&Result<RssState, RssError>> {
        self.by_device
            .iter()
            .find(|(name, _)| name == device)
            .map(|(_, reading)| reading)
    }
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::json::RssJson;
    use super::text::{rss_line, share_runs};
    use super::*;
    use crate::kernel::ethtool::FlowHash;
    use crate::kernel::rss::{FlowHashes, HashFunction, RssSource};

    fn skewed() -> RssState {
        RssState {
            rx_rings: 4,
            indirection: [0, 1].repeat(64),
            key: vec![0x6d, 0x5a],
            hash_function: HashFunction::TOEPLITZ,
            input_xfrm: 0,
            flow_hash: FlowHashes {
                tcp4: Some(FlowHash(0xf0)),
                udp4: Some(FlowHash(0x30)),
                tcp6: None,
                udp6: None,
            },
            source: RssSource::Grssh,
        }
    }

    #[test]
    fn the_rss_line_shows_each_queues_share_the_function_and_the_hash_fields() {
        assert_eq!(
            rss_line(&Ok(skewed())),
            "rss: 128 entries over 4 rx rings, q0 0.50 q1 0.50 q2 0 q3 0, hfunc toeplitz, \
             hashed on tcp4 sdfn udp4 sd"
        );
        let mut default = skewed();
        default.indirection = (0..128).map(|i| i % 4).collect();
        default.flow_hash = FlowHashes::default();
        assert_eq!(
            rss_line(&Ok(default)),
            "rss: 128 entries over 4 rx rings (default spread), q0-3 0.25, hfunc toeplitz"
        );
        // 94 queues over 128 entries: 34 queues hold 2 entries, 60 hold 1.
        let mut many = skewed();
        many.rx_rings = 94;
        many.indirection = (0..128).map(|i| i % 94).collect();
        many.flow_hash = FlowHashes::default();
        assert_eq!(
            rss_line(&Ok(many)),
            "rss: 128 entries over 94 rx rings (default spread), q0-33 0.02 q34-93 0.01, \
             hfunc toeplitz"
        );
        assert_eq!(
            share_runs(&[0.5, 0.5, 0.0, 0.0]),
            "q0 0.50 q1 0.50 q2 0 q3 0"
        );
        assert_eq!(share_runs(&[0.0; 3]), "q0-2 0");
        assert_eq!(share_runs(&[]), "");
        let none = RssError::of_errno(
            "veth0",
            "ETHTOOL_GRXRINGS",
            nix::errno::Errno::EOPNOTSUPP,
            false,
        );
        assert_eq!(
            rss_line(&Err(none)),
            "rss: none, no RSS table (ETHTOOL_GRXRINGS: EOPNOTSUPP)"
        );
    }

    #[test]
    fn the_rss_json_has_the_whole_table_the_key_in_hex_and_null_where_it_does_not_apply() {
        let json = serde_json::to_value(RssJson::of(&Ok(skewed()))).unwrap();
        assert_eq!(json["status"], "ok");
        assert_eq!(json["reason"], serde_json::Value::Null);
        assert_eq!(json["source"], "grssh");
        assert_eq!(json["table_size"], 128);
        assert_eq!(json["indirection"].as_array().unwrap().len(), 128);
        assert_eq!(json["shares"], serde_json::json!([0.5, 0.5, 0.0, 0.0]));
        assert_eq!(json["default_spread"], false);
        assert_eq!(json["key"], "6d5a");
        assert_eq!(json["hash_function"], "toeplitz");
        assert_eq!(
            json["flow_hash"],
            serde_json::json!({"tcp4": "sdfn", "udp4": "sd", "tcp6": null, "udp6": null})
        );
        let none = RssError::of_errno(
            "veth0",
            "ETHTOOL_GRXRINGS",
            nix::errno::Errno::EOPNOTSUPP,
            false,
        );
        let json = serde_json::to_value(RssJson::of(&Err(none))).unwrap();
        assert_eq!(json["status"], "no_table");
        assert_eq!(json["indirection"], serde_json::Value::Null);
        let gone = RssError::of_errno("eth9", "ETHTOOL_GRXRINGS", nix::errno::Errno::ENODEV, false);
        let json = serde_json::to_value(RssJson::of(&Err(gone))).unwrap();
        assert_eq!(json["status"], "error");
        assert!(json["reason"].as_str().unwrap().contains("ENODEV"));
    }
}
