//! Receive rings far below what the NIC supports (`ETHTOOL_GRINGPARAM`, what `ethtool -g`
//! shows): a burst longer than the ring is dropped in the NIC before any CPU sees it, and
//! no steering can win those packets back.
//!
//! A note, not a warning: a small ring also means less memory and better cache locality,
//! so it is a trade-off to know about, not a mistake by itself. Needs the ioctl, so only on
//! the host (`--root /`); anything else is "not checked: why".

use super::ethtool_checks::{PerDevice, physical_or_virtio};
use super::{Context, Finding, Severity};
use crate::kernel::ethtool::{Ethtool, RingParams};

/// "Far below": the current RX ring at most this fraction of the maximum.
const SMALL_FRACTION: u32 = 4;

pub fn check(context: &Context) -> Vec<Finding> {
    PerDevice {
        check: "rings",
        subject: "ring sizes",
        matters: "a small RX ring drops bursts in the NIC.",
        reads: "ring sizes come",
        wanted: physical_or_virtio,
        read: Ethtool::ring_params,
        judge: &|device, answer| judge(&device.name, answer),
    }
    .run(context)
}

/// The finding for one device's rings, if they are small.
pub fn judge(device: &str, rings: &RingParams) -> Option<Finding> {
    let (current, max) = (rings.rx_pending, rings.rx_max_pending);
    if current == 0 || current.saturating_mul(SMALL_FRACTION) > max {
        return None;
    }
    Some(Finding {
        check: "rings",
        severity: Severity::Info,
        summary: format!("{device}: RX ring {current} of at most {max}"),
        evidence: format!("ETHTOOL_GRINGPARAM on {device}: rx {current}, rx max {max}"),
        why: "a burst longer than the RX ring is dropped in the NIC before any CPU sees it, \
              so no steering can save those packets."
            .into(),
        fix: Some(format!("ethtool -G {device} rx {max}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_far_below_its_maximum_is_a_note_with_the_ethtool_fix() {
        let f = judge("eth0", &RingParams::new(512, 4096, 512, 4096)).unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(f.fix.as_deref(), Some("ethtool -G eth0 rx 4096"));
    }

    #[test]
    fn a_ring_near_its_maximum_is_fine() {
        assert_eq!(judge("eth0", &RingParams::new(2048, 4096, 512, 4096)), None);
        assert_eq!(judge("eth0", &RingParams::new(256, 256, 256, 256)), None);
    }
}
