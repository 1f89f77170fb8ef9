//! One IRQ's settings from `proc/irq/<N>/`: where it may fire, where it does fire, the
//! driver's hint, its NUMA node, and whether user space may move it.
//!
//! An IRQ is freed and its directory removed at any moment (a driver unbinding, `ethtool
//! -L`), so a vanished directory is "no settings", not an error. `managed` is read from the
//! mode of `smp_affinity`: since ≈6.12 the kernel creates it 0444 for IRQs user space cannot
//! move (kernel-managed affinity, `IRQD_NO_BALANCING`); older kernels only tell by failing
//! a write, which the actuator records.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::cpuset::CpuSet;
use crate::error::Error;
use crate::root::{Root, is_absent};

/// What `proc/irq/<N>/` says about one IRQ. Files that are absent are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IrqSettings {
    /// `smp_affinity_list`.
    pub affinity: Option<CpuSet>,
    /// `effective_affinity_list`.
    pub effective_affinity: Option<CpuSet>,
    /// `affinity_hint`; an all-zero mask (no hint) is `None`.
    pub affinity_hint: Option<CpuSet>,
    /// `node`; `-1` is `None`.
    pub node: Option<u32>,
    /// `smp_affinity` has no write bit.
    pub managed: bool,
}

/// Reads `proc/irq/<irq>/`; `Ok(None)` when the directory does not exist (the IRQ was
/// freed, or the tree has no `proc/irq`).
pub fn read_irq(root: &Root, irq: u32) -> Result<Option<IrqSettings>, Error> {
    let base = format!("proc/irq/{irq}");
    let dir = root.path(&base);
    let smp_affinity = dir.join("smp_affinity");
    let managed = match fs::metadata(&smp_affinity) {
        Ok(meta) => meta.permissions().mode() & 0o222 == 0,
        Err(err) if is_absent(&err) => {
            if !dir.exists() {
                return Ok(None);
            }
            false
        }
        Err(err) => return Err(Error::io(smp_affinity, err)),
    };
    let list = |name: &str| -> Result<Option<CpuSet>, Error> {
        let relative = format!("{base}/{name}");
        match root.read_optional(&relative)? {
            None => Ok(None),
            Some(text) => CpuSet::parse_list(&text)
                .map(Some)
                .map_err(|err| Error::parse(root.path(&relative), 1, err.to_string())),
        }
    };
    let affinity = list("smp_affinity_list")?;
    let effective_affinity = list("effective_affinity_list")?;
    let hint_path = format!("{base}/affinity_hint");
    let affinity_hint = match root.read_optional(&hint_path)? {
        None => None,
        Some(text) => Some(
            CpuSet::parse_mask(&text)
                .map_err(|err| Error::parse(root.path(&hint_path), 1, err.to_string()))?,
        )
        .filter(|set| !set.is_empty()),
    };
    let node_path = format!("{base}/node");
    let node = match root.read_optional(&node_path)? {
        None => None,
        Some(text) => {
            let value: i64 = text.trim().parse().map_err(|_| {
                Error::parse(
                    root.path(&node_path),
                    1,
                    format!("not a node number: {:?}", text.trim()),
                )
            })?;
            u32::try_from(value).ok()
        }
    };
    Ok(Some(IrqSettings {
        affinity,
        effective_affinity,
        affinity_hint,
        node,
        managed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::write_test_file as write;

    #[test]
    fn reads_settings_and_managed_mode() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "proc/irq/36/smp_affinity", "3\n");
        write(d, "proc/irq/36/smp_affinity_list", "0-1\n");
        write(d, "proc/irq/36/effective_affinity_list", "1\n");
        write(d, "proc/irq/36/affinity_hint", "0\n");
        write(d, "proc/irq/36/node", "-1\n");
        fs::set_permissions(
            d.join("proc/irq/36/smp_affinity"),
            fs::Permissions::from_mode(0o444),
        )
        .unwrap();
        write(d, "proc/irq/38/smp_affinity", "3\n");
        write(d, "proc/irq/38/affinity_hint", "00000002,00000000\n");
        write(d, "proc/irq/38/node", "1\n");
        let root = Root::new(d);
        let managed = read_irq(&root, 36).unwrap().unwrap();
        assert!(managed.managed);
        assert_eq!(managed.affinity.unwrap().to_list(), "0-1");
        assert_eq!(managed.effective_affinity.unwrap().to_list(), "1");
        assert_eq!(managed.affinity_hint, None);
        assert_eq!(managed.node, None);
        let movable = read_irq(&root, 38).unwrap().unwrap();
        assert!(!movable.managed);
        assert_eq!(movable.affinity_hint.unwrap().to_list(), "33");
        assert_eq!(movable.node, Some(1));
        assert_eq!(movable.affinity, None);
        assert_eq!(read_irq(&root, 99).unwrap(), None);
    }

    #[test]
    fn malformed_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "proc/irq/5/node", "x\n");
        let err = read_irq(&Root::new(dir.path()), 5).unwrap_err().to_string();
        assert!(err.contains("proc/irq/5/node:1"), "{err}");
    }
}
