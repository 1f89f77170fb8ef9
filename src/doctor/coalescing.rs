//! A NIC that interrupts for every received packet (`ETHTOOL_GCOALESCE`: rx-usecs 0,
//! rx-frames at most 1, adaptive-rx off): at high packet rates the CPU spends its time
//! entering and leaving the interrupt instead of processing packets, and no placement of
//! the IRQ fixes that.
//!
//! Physical NICs only (virtio and software devices coalesce differently or not at all, so
//! `ethtool -C` would fail there), and only on the host (`--root /`); a failed ioctl is
//! "not checked: why".

use super::ethtool_checks::PerDevice;
use super::{Context, Finding, Severity};
use crate::kernel::ethtool::{Coalesce, Ethtool};
use crate::model::inventory::DeviceKind;

/// The rx-usecs suggested: a common driver default, about 20 k interrupts/s per queue.
const SUGGESTED_USECS: u32 = 50;

pub fn check(context: &Context) -> Vec<Finding> {
    PerDevice {
        check: "coalescing",
        subject: "interrupt coalescing",
        matters: "a NIC that interrupts for every packet wastes CPU at high rates.",
        reads: "coalescing comes",
        wanted: |kind| kind == DeviceKind::Physical,
        read: Ethtool::coalesce,
        judge: &|device, answer| judge(&device.name, answer),
    }
    .run(context)
}

/// The finding for one device's coalescing, if it interrupts per packet.
pub fn judge(device: &str, coalesce: &Coalesce) -> Option<Finding> {
    if coalesce.rx_coalesce_usecs != 0
        || coalesce.rx_max_coalesced_frames > 1
        || coalesce.use_adaptive_rx_coalesce != 0
    {
        return None;
    }
    Some(Finding {
        check: "coalescing",
        severity: Severity::Info,
        summary: format!("{device}: an interrupt for every received packet"),
        evidence: format!(
            "ETHTOOL_GCOALESCE on {device}: rx-usecs 0, rx-frames {}, adaptive-rx off",
            coalesce.rx_max_coalesced_frames
        ),
        why: "at high packet rates the CPU spends its time entering and leaving the \
              interrupt instead of processing packets, whichever CPU it is placed on."
            .into(),
        fix: Some(format!("ethtool -C {device} rx-usecs {SUGGESTED_USECS}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_per_packet_is_a_note_with_the_ethtool_fix() {
        let f = judge("eth0", &Coalesce::rx(0, 1, false)).unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(f.fix.as_deref(), Some("ethtool -C eth0 rx-usecs 50"));
    }

    #[test]
    fn coalescing_or_adaptive_moderation_is_fine() {
        assert_eq!(judge("eth0", &Coalesce::rx(50, 0, false)), None);
        assert_eq!(judge("eth0", &Coalesce::rx(0, 32, false)), None);
        assert_eq!(judge("eth0", &Coalesce::rx(0, 1, true)), None);
    }
}
