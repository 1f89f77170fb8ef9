//! GRO off on a NIC (`ETHTOOL_GFEATURES`: `rx-gro`, what `ethtool -k` calls
//! "generic-receive-offload"): without GRO every received segment goes up the stack on
//! its own, so a TCP stream costs the receiving CPU several times the per-packet work and
//! no placement of its IRQ or RPS gives that back.
//!
//! Physical and virtio NICs only (on software devices GRO is a per-setup choice), and only
//! on the host (`--root /`); a failed ioctl is "not checked: why".

use super::ethtool_checks::{PerDevice, physical_or_virtio};
use super::{Context, Finding, Severity};
use crate::kernel::ethtool::{Ethtool, Features};

pub fn check(context: &Context) -> Vec<Finding> {
    PerDevice {
        check: "gro",
        subject: "GRO",
        matters: "without GRO every received segment costs a trip up the stack.",
        reads: "features come",
        wanted: physical_or_virtio,
        read: Ethtool::features,
        judge: &|device, features| judge(&device.name, features),
    }
    .run(context)
}

/// On, off, and `[fixed]` as `ethtool -k` prints them.
fn state(features: &Features, name: &str) -> String {
    match features.get(name) {
        Some(s) => format!(
            "{name} {}{}",
            if s.active { "on" } else { "off" },
            if s.fixed() { " [fixed]" } else { "" }
        ),
        None => format!("{name} absent"),
    }
}

/// The finding for one device's features, if GRO is off.
pub fn judge(device: &str, features: &Features) -> Option<Finding> {
    let gro = features.get("rx-gro")?;
    if gro.active {
        return None;
    }
    let mut evidence = format!(
        "ETHTOOL_GFEATURES on {device}: {} (generic-receive-offload), requested {}; {}; {}",
        state(features, "rx-gro"),
        if gro.requested { "on" } else { "off" },
        state(features, "rx-gro-hw"),
        state(features, "rx-lro"),
    );
    let fix = if gro.fixed() {
        evidence.push_str("; the device does not let GRO be turned on");
        None
    } else {
        Some(format!("ethtool -K {device} gro on"))
    };
    Some(Finding {
        check: "gro",
        severity: Severity::Warning,
        summary: format!("{device}: GRO is off"),
        evidence,
        why: "without GRO every received TCP segment goes up the stack on its own, costing \
              the receiving CPU several times the work per byte, whichever CPU it runs on."
            .into(),
        fix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ethtool::FeatureState;

    fn features(gro_active: bool) -> Features {
        let changeable = |active| FeatureState {
            available: true,
            requested: active,
            active,
            never_changed: false,
        };
        Features::new([
            ("rx-gro".to_string(), changeable(gro_active)),
            ("rx-gro-hw".to_string(), FeatureState::default()),
        ])
    }

    #[test]
    fn gro_off_is_a_warning_with_the_ethtool_fix() {
        let f = judge("eth0", &features(false)).unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.summary, "eth0: GRO is off");
        assert!(
            f.evidence.contains("rx-gro off (generic-receive-offload)"),
            "{f:?}"
        );
        assert!(f.evidence.contains("rx-gro-hw off [fixed]"), "{f:?}");
        assert_eq!(f.fix.as_deref(), Some("ethtool -K eth0 gro on"));
    }

    #[test]
    fn gro_on_or_unknown_is_fine() {
        assert_eq!(judge("eth0", &features(true)), None);
        assert_eq!(judge("eth0", &Features::default()), None);
    }
}
