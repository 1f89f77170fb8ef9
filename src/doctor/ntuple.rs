//! aRFS available but unused (`ETHTOOL_GFEATURES`: `rx-ntuple-filter`, what `ethtool -k`
//! calls "ntuple-filters"). With ntuple filters on and the RFS tables sized, accelerated
//! RFS has the NIC itself deliver each flow to the queue whose CPU reads its socket, with
//! no cross-CPU hop; two ways to miss it:
//!
//! - the filters are changeable (not `[fixed]`) but off;
//! - they are on while `net.core.rps_sock_flow_entries` or the device's `rps_flow_cnt`
//!   are 0, so aRFS has no socket CPUs to steer by (filters added by hand with
//!   `ethtool -N ... action` still work: that is why this is a note).
//!
//! A note: aRFS also needs the driver's `ndo_rx_flow_steer` and a kernel with
//! `CONFIG_RFS_ACCEL`, which the feature bit does not prove. Physical and virtio NICs, on
//! the host (`--root /`); a failed ioctl is "not checked: why".

use super::ethtool_checks::{PerDevice, physical_or_virtio};
use super::{Context, Finding, Severity};
use crate::kernel::ethtool::{Ethtool, Features};
use crate::model::inventory::NetDevice;

/// The global socket flow table suggested when there is none (as `rfs_tables`).
const SUGGESTED_ENTRIES: u32 = 32768;

/// The RFS tables aRFS steers by, as the tree has them for one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RfsTables {
    /// `net.core.rps_sock_flow_entries`; `None` when the file is absent.
    pub sock_flow_entries: Option<u32>,
    /// The device's rx queues.
    pub queues: usize,
    /// Its rx queues with a `rps_flow_cnt` above 0.
    pub queues_with_table: usize,
}

impl RfsTables {
    fn of(device: &NetDevice, sock_flow_entries: Option<u32>) -> Self {
        RfsTables {
            sock_flow_entries,
            queues: device.rx_queues.len(),
            queues_with_table: device
                .rx_queues
                .iter()
                .filter(|q| q.rps_flow_cnt.unwrap_or(0) > 0)
                .count(),
        }
    }

    /// Both tables are there for aRFS to steer by.
    fn sized(&self) -> bool {
        self.sock_flow_entries.unwrap_or(0) > 0 && self.queues_with_table > 0
    }

    fn describe(&self) -> String {
        let entries = match self.sock_flow_entries {
            Some(entries) => format!("net.core.rps_sock_flow_entries = {entries}"),
            None => "proc/sys/net/core/rps_sock_flow_entries absent".into(),
        };
        format!(
            "{entries}; {} of {} rx queue(s) with an rps_flow_cnt",
            self.queues_with_table, self.queues
        )
    }

    /// The commands that size the tables, where they are missing.
    fn sizing(&self, device: &str) -> Vec<String> {
        let mut commands = Vec::new();
        let entries = match self.sock_flow_entries {
            Some(0) => {
                commands.push(format!(
                    "sysctl -w net.core.rps_sock_flow_entries={SUGGESTED_ENTRIES}"
                ));
                SUGGESTED_ENTRIES
            }
            Some(entries) => entries,
            None => SUGGESTED_ENTRIES,
        };
        if self.queues_with_table == 0 && self.queues > 0 {
            let per_queue = (entries / self.queues as u32).max(1).next_power_of_two();
            commands.push(format!(
                "for f in /sys/class/net/{device}/queues/rx-*/rps_flow_cnt; do echo {per_queue} > $f; done"
            ));
        }
        commands
    }
}

pub fn check(context: &Context) -> Vec<Finding> {
    let entries = context.machine.inventory.rps_sock_flow_entries;
    PerDevice {
        check: "ntuple",
        subject: "ntuple filters (aRFS)",
        matters: "aRFS has the NIC deliver each flow to the CPU that reads it.",
        reads: "features come",
        wanted: physical_or_virtio,
        read: Ethtool::features,
        judge: &|device, features| judge(&device.name, features, &RfsTables::of(device, entries)),
    }
    .run(context)
}

/// The finding for one device, if its ntuple filters could do aRFS and do not.
pub fn judge(device: &str, features: &Features, rfs: &RfsTables) -> Option<Finding> {
    let ntuple = features.get("rx-ntuple-filter")?;
    let evidence = format!(
        "ETHTOOL_GFEATURES on {device}: rx-ntuple-filter (ntuple-filters) {}{}; {}",
        if ntuple.active { "on" } else { "off" },
        if ntuple.fixed() { " [fixed]" } else { "" },
        rfs.describe()
    );
    let finding = |summary: String, why: &str, commands: Vec<String>| Finding {
        check: "ntuple",
        severity: Severity::Info,
        summary,
        evidence: evidence.clone(),
        why: why.into(),
        fix: (!commands.is_empty()).then(|| commands.join("; ")),
    };
    if !ntuple.active && !ntuple.fixed() {
        let mut commands = vec![format!("ethtool -K {device} ntuple on")];
        commands.extend(rfs.sizing(device));
        return Some(finding(
            format!("{device}: ntuple filters available but off: no accelerated RFS"),
            "with ntuple filters on and the RFS tables sized, the NIC itself delivers each \
             flow to the queue of the CPU that reads its socket, saving the cross-CPU hop \
             of RPS/RFS.",
            commands,
        ));
    }
    if ntuple.active && !rfs.sized() && rfs.sock_flow_entries.is_some() {
        return Some(finding(
            format!(
                "{device}: ntuple filters on but the RFS tables are empty: aRFS steers nothing"
            ),
            "aRFS steers by the CPU the RFS tables record for each flow's socket, so without \
             them the NIC keeps hashing flows to queues (filters added by hand still apply).",
            rfs.sizing(device),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ethtool::FeatureState;

    fn ntuple(available: bool, active: bool) -> Features {
        Features::new([(
            "rx-ntuple-filter".to_string(),
            FeatureState {
                available,
                requested: active,
                active,
                never_changed: false,
            },
        )])
    }

    fn rfs(entries: u32, queues_with_table: usize) -> RfsTables {
        RfsTables {
            sock_flow_entries: Some(entries),
            queues: 4,
            queues_with_table,
        }
    }

    #[test]
    fn ntuple_available_but_off_is_a_note_with_every_command_missing() {
        let f = judge("eth0", &ntuple(true, false), &rfs(0, 0)).unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert!(f.summary.contains("available but off"), "{f:?}");
        assert!(
            f.evidence.contains(
                "rx-ntuple-filter (ntuple-filters) off; net.core.rps_sock_flow_entries = 0"
            ),
            "{f:?}"
        );
        assert_eq!(
            f.fix.as_deref(),
            Some(
                "ethtool -K eth0 ntuple on; sysctl -w net.core.rps_sock_flow_entries=32768; \
                 for f in /sys/class/net/eth0/queues/rx-*/rps_flow_cnt; do echo 8192 > $f; done"
            )
        );
        // With the tables already sized, only the ethtool command.
        let f = judge("eth0", &ntuple(true, false), &rfs(32768, 4)).unwrap();
        assert_eq!(f.fix.as_deref(), Some("ethtool -K eth0 ntuple on"));
    }

    #[test]
    fn ntuple_on_with_empty_rfs_tables_is_a_note() {
        let f = judge("eth0", &ntuple(true, true), &rfs(32768, 0)).unwrap();
        assert!(f.summary.contains("aRFS steers nothing"), "{f:?}");
        assert_eq!(
            f.fix.as_deref(),
            Some("for f in /sys/class/net/eth0/queues/rx-*/rps_flow_cnt; do echo 8192 > $f; done")
        );
    }

    #[test]
    fn ntuple_fixed_off_or_on_with_tables_is_fine() {
        assert_eq!(judge("eth0", &ntuple(false, false), &rfs(0, 0)), None);
        assert_eq!(judge("eth0", &ntuple(true, true), &rfs(32768, 4)), None);
        assert_eq!(judge("eth0", &Features::default(), &rfs(0, 0)), None);
    }
}
