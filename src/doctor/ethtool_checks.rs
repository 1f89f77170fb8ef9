//! The frame shared by the checks that read a device through an ethtool ioctl (rings,
//! coalescing, gro, udp_hash, ntuple): the ioctl describes the running machine, so off the host (`--root` other
//! than `/`) nothing is checked and the finding says why; a socket that cannot be opened,
//! or an ioctl a device refuses, is "not checked" for that scope, never an error.

use super::{Context, Finding, Severity};
use crate::kernel::ethtool::Ethtool;
use crate::model::inventory::{DeviceKind, NetDevice};

/// One ethtool-based check: which devices it reads, the ioctl, the judgement of one
/// device's answer, and what its "not checked" finding says.
pub(super) struct PerDevice<'a, T> {
    /// The check's name in findings.
    pub check: &'static str,
    /// What is not checked, as in "not checked: ring sizes of eth0".
    pub subject: &'a str,
    /// Why it matters, in one sentence, for a "not checked" finding.
    pub matters: &'a str,
    /// What the ioctl reads, with its verb ("ring sizes come", "coalescing comes"): the
    /// start of why the check cannot run on a tree that is not the host ([`Self::off_host`]).
    pub reads: &'a str,
    pub wanted: fn(DeviceKind) -> bool,
    pub read: fn(&Ethtool, &str) -> Result<T, crate::Error>,
    /// The finding for one device's answer, if any; given the device so a check can
    /// weigh the answer against what the tree says (its rx queues, their RFS tables).
    pub judge: &'a dyn Fn(&NetDevice, &T) -> Option<Finding>,
}

impl<T> PerDevice<'_, T> {
    /// Why nothing is checked off the host, one sentence for every ethtool check.
    fn off_host(&self) -> String {
        format!(
            "{} from an ethtool ioctl, which describes the running machine, not a --root tree",
            self.reads
        )
    }

    /// "Not checked" for a scope (a device, or all devices), and why.
    fn not_checked(&self, scope: &str, why: String) -> Finding {
        Finding {
            check: self.check,
            severity: Severity::Info,
            summary: format!("not checked: {} of {scope}", self.subject),
            evidence: why,
            why: self.matters.into(),
            fix: None,
        }
    }

    pub(super) fn run(&self, context: &Context) -> Vec<Finding> {
        if !context.root.is_host() {
            return vec![self.not_checked("all devices", self.off_host())];
        }
        let ethtool = match Ethtool::new() {
            Ok(ethtool) => ethtool,
            Err(e) => return vec![self.not_checked("all devices", e.to_string())],
        };
        let mut findings = Vec::new();
        for device in &context.machine.inventory.devices {
            if !(self.wanted)(device.kind) {
                continue;
            }
            match (self.read)(&ethtool, &device.name) {
                Ok(answer) => findings.extend((self.judge)(device, &answer)),
                Err(e) => findings.push(self.not_checked(&device.name, e.to_string())),
            }
        }
        findings
    }
}

/// The devices most ethtool checks read: NICs with hardware queues (physical and virtio);
/// on software devices these settings are a per-setup choice or do not exist.
pub(super) fn physical_or_virtio(kind: DeviceKind) -> bool {
    matches!(kind, DeviceKind::Physical | DeviceKind::Virtio)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, run_check};
    use super::super::{coalescing, gro, ntuple, rings, udp_hash};

    /// Off the host every ethtool check says, once, what it did not check and why.
    #[test]
    fn a_fake_root_is_not_checked_and_says_why() {
        let (_dir, tree) = machine(|_| {});
        let expected = [
            (rings::check as super::super::Check, "ring sizes"),
            (coalescing::check, "interrupt coalescing"),
            (gro::check, "GRO"),
            (udp_hash::check, "UDP hash fields"),
            (ntuple::check, "ntuple filters (aRFS)"),
        ];
        for (check, subject) in expected {
            let f = run_check(&tree, check, not_sampled(), None);
            assert_eq!(f.len(), 1, "{f:?}");
            assert_eq!(
                f[0].summary,
                format!("not checked: {subject} of all devices")
            );
            assert!(f[0].evidence.contains("--root"), "{f:?}");
        }
    }
}
