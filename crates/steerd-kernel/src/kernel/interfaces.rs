//! Which of the interfaces steerd prefers the running kernel offers, for one note at
//! start: on an older kernel (5.10, the RHEL 8 and Amazon Linux 2 generation) steerd
//! works through older interfaces, and an operator reading the log should learn that
//! once, with what it costs, rather than never or once per tick.
//!
//! Asked: the generic-netlink netdev family and its `queue-get`/`napi-get` (6.8) and
//! `qstats-get` (6.9) ops, only on the host (a `--root` tree is not the kernel the
//! socket talks to); and whether `softnet_stat` rows carry the CPU id column.

use crate::kernel::netlink::{NetdevClient, NetdevOps};
use crate::root::Root;

/// What was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInterfaces {
    /// `proc/sys/kernel/osrelease`.
    pub release: Option<String>,
    /// The netdev family's ops: `None` when the kernel has none, or when not asked (a
    /// `--root` tree); see `netdev_asked`.
    pub netdev: Option<NetdevOps>,
    pub netdev_asked: bool,
    /// Whether the first `softnet_stat` row has the CPU id column (`None`: no file).
    pub softnet_cpu_id: Option<bool>,
}

impl KernelInterfaces {
    /// Reads them under `root` (netdev netlink on the host only). Failures read as
    /// absent: this is a note, not a check.
    pub fn read(root: &Root) -> Self {
        let netdev_asked = root.is_host();
        let netdev = if netdev_asked {
            NetdevClient::connect()
                .ok()
                .flatten()
                .map(|client| client.family().ops)
        } else {
            None
        };
        let softnet_cpu_id = root
            .read_optional("proc/net/softnet_stat")
            .ok()
            .flatten()
            .and_then(|text| {
                let first = text.lines().next()?.split_whitespace().count();
                Some(first >= 13)
            });
        let release = root
            .read_optional("proc/sys/kernel/osrelease")
            .ok()
            .flatten()
            .map(|text| text.trim().to_string());
        KernelInterfaces {
            release,
            netdev,
            netdev_asked,
            softnet_cpu_id,
        }
    }

    /// What steerd does instead of each interface the kernel lacks, one phrase each.
    pub fn fallbacks(&self) -> Vec<&'static str> {
        let mut fallbacks = Vec::new();
        if self.netdev_asked {
            let ops = self.netdev.unwrap_or_default();
            if !(ops.queue_get && ops.napi_get) {
                fallbacks.push(
                    "no netdev netlink queue-get/napi-get (6.8+): queues are matched to their \
                     IRQs by the drivers' vector names, NAPI settings read per device from sysfs",
                );
            }
            if !ops.qstats_get {
                fallbacks.push(
                    "no netdev qstats-get (6.9+): per-queue packet counters come from \
                     ethtool -S where the driver has them",
                );
            }
        }
        if self.softnet_cpu_id == Some(false) {
            fallbacks.push(
                "softnet_stat rows carry no CPU id: they are mapped to the online CPUs in order",
            );
        }
        fallbacks
    }

    /// The note for the log, `None` when nothing is missing.
    pub fn note(&self) -> Option<String> {
        let fallbacks = self.fallbacks();
        (!fallbacks.is_empty()).then(|| {
            format!(
                "kernel {}: {}",
                self.release.as_deref().unwrap_or("(release unknown)"),
                fallbacks.join("; ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interfaces(netdev: Option<NetdevOps>, cpu_id: Option<bool>) -> KernelInterfaces {
        KernelInterfaces {
            release: Some("5.10.0-35-cloud-amd64".into()),
            netdev,
            netdev_asked: true,
            softnet_cpu_id: cpu_id,
        }
    }

    #[test]
    fn a_5_10_kernel_gets_one_note_naming_every_fallback() {
        let note = interfaces(None, Some(true)).note().unwrap();
        assert!(note.starts_with("kernel 5.10.0-35-cloud-amd64: "), "{note}");
        assert!(note.contains("queue-get/napi-get (6.8+)"), "{note}");
        assert!(note.contains("qstats-get (6.9+)"), "{note}");
        assert!(!note.contains("softnet"), "{note}");
        let all = NetdevOps {
            queue_get: true,
            napi_get: true,
            qstats_get: true,
        };
        assert_eq!(interfaces(Some(all), Some(true)).note(), None);
        let note = interfaces(Some(all), Some(false)).note().unwrap();
        assert!(note.contains("mapped to the online CPUs"), "{note}");
    }

    #[test]
    fn a_tree_is_not_asked_about_netlink() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/net")).unwrap();
        std::fs::write(
            dir.path().join("proc/net/softnet_stat"),
            "00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n",
        )
        .unwrap();
        let found = KernelInterfaces::read(&Root::new(dir.path()));
        assert!(!found.netdev_asked);
        assert_eq!(found.softnet_cpu_id, Some(false));
        assert_eq!(found.fallbacks().len(), 1);
    }
}
