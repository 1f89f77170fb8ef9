//! The indirection table as a knob ([`crate::knob::Knob::RssIndirection`]): how the
//! actuator reads it, writes it and restores it.
//!
//! On the host the table is the kernel's, reached through `SIOCETHTOOL` (`GRXFHINDIR`,
//! `SRXFHINDIR`: every kernel has them, and they act on context 0, the only one steerd
//! changes). A fake root (tests, the simulator's files) has no kernel behind it, so the
//! table stands in as the file `sys/class/net/DEV/rss_indirection` (entries separated by
//! spaces) and the ring count is the number of `queues/rx-N` directories.
//!
//! A table that is the driver's default spread is remembered as `default`, and restoring
//! `default` resets the table (`ethtool -X DEV default`) rather than writing the same
//! entries: a table written by anyone marks the device as configured
//! (`IFF_RXFH_CONFIGURED`), after which the kernel refuses an `ethtool -L` that would
//! leave entries without a ring and the driver no longer re-spreads the table over a new
//! ring count. The reset gives the operator back exactly the device steerd found.

use std::path::PathBuf;

use super::{ReplyError, RssError};
use crate::kernel::ethtool::Ethtool;
use crate::knob::{self, Knob, RSS_DEFAULT_TEXT};
use crate::root::Root;

/// The largest stand-in file read (a table of [`super::MAX_INDIRECTION`] entries of up to
/// 5 digits each, with room to spare).
const MAX_FAKE_BYTES: u64 = 64 * 1024;

/// A device's table now, with the text to restore it from: `default` when it is the
/// default spread over the device's rx rings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableReading {
    pub indirection: Vec<u32>,
    pub rx_rings: u32,
    /// The text a restore writes back: the entries, or [`RSS_DEFAULT_TEXT`].
    pub restore_text: String,
}

impl TableReading {
    fn new(indirection: Vec<u32>, rx_rings: u32) -> Self {
        let restore_text = if knob::is_default_spread(&indirection, rx_rings) {
            RSS_DEFAULT_TEXT.to_string()
        } else {
            knob::table_text(&indirection)
        };
        TableReading {
            indirection,
            rx_rings,
            restore_text,
        }
    }
}

/// Reads `device`'s table (context 0) under `root`. A device without a table is
/// [`RssError::NoTable`].
pub fn read(root: &Root, device: &str) -> Result<TableReading, RssError> {
    if root.is_host() {
        let ethtool = open()?;
        let rx_rings = super::rx_rings(&ethtool, device)?;
        let indirection = super::read_indirection_only(&ethtool, device)?;
        if indirection.is_empty() {
            return Err(RssError::NoTable {
                device: device.to_string(),
                why: "the driver reports a table of 0 entries".into(),
            });
        }
        return Ok(TableReading::new(indirection, rx_rings));
    }
    let path = fake_path(root, device);
    let text = match crate::limits::read_optional_bounded(&path, MAX_FAKE_BYTES) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(RssError::NoTable {
                device: device.to_string(),
                why: format!("{} does not exist", path.display()),
            });
        }
        Err(error) => {
            return Err(RssError::Kernel {
                device: device.to_string(),
                command: "read",
                errno: None,
                reason: error.to_string(),
            });
        }
    };
    let indirection = knob::parse_table(&text).map_err(|reason| RssError::Malformed {
        device: device.to_string(),
        command: "read",
        reason: ReplyError::TableFile { path, reason },
    })?;
    Ok(TableReading::new(indirection, fake_rx_rings(root, device)))
}

/// Writes `text` (entries separated by white space, or `default`) as `device`'s table.
pub fn write(root: &Root, device: &str, text: &str) -> Result<(), RssError> {
    let reset = text.trim() == RSS_DEFAULT_TEXT;
    let table = if reset {
        None
    } else {
        Some(knob::parse_table(text).map_err(|error| RssError::Rejected {
            device: device.to_string(),
            command: "ETHTOOL_SRXFHINDIR",
            reason: error.to_string(),
        })?)
    };
    if root.is_host() {
        let ethtool = open()?;
        return match &table {
            Some(table) => super::set_indirection(&ethtool, device, table),
            None => super::reset_indirection(&ethtool, device),
        };
    }
    let current = read(root, device)?;
    let entries = match table {
        Some(table) => {
            if table.len() != current.indirection.len() {
                return Err(RssError::Rejected {
                    device: device.to_string(),
                    command: "ETHTOOL_SRXFHINDIR",
                    reason: format!(
                        "a table of {} entries for a device whose table has {}",
                        table.len(),
                        current.indirection.len()
                    ),
                });
            }
            table
        }
        None => knob::default_spread(current.indirection.len(), current.rx_rings),
    };
    let written = crate::limits::open_for_writing(&fake_path(root, device)).and_then(|mut file| {
        use std::io::Write as _;
        file.write_all((knob::table_text(&entries) + "\n").as_bytes())
    });
    written.map_err(|error| RssError::Kernel {
        device: device.to_string(),
        command: "write",
        errno: error.raw_os_error().map(nix::errno::Errno::from_raw),
        reason: error.to_string(),
    })
}

fn open() -> Result<Ethtool, RssError> {
    Ethtool::new().map_err(|error| RssError::Kernel {
        device: String::new(),
        command: "socket",
        errno: None,
        reason: error.to_string(),
    })
}

fn fake_path(root: &Root, device: &str) -> PathBuf {
    root.path(
        Knob::RssIndirection {
            device: device.to_string(),
        }
        .relative_path(),
    )
}

/// The ring count of a fake root's device: its `queues/rx-N` directories.
fn fake_rx_rings(root: &Root, device: &str) -> u32 {
    let dir = root.path(format!("sys/class/net/{device}/queues"));
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(table: &str, rx: u32) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        for q in 0..rx {
            std::fs::create_dir_all(dir.path().join(format!("sys/class/net/eth0/queues/rx-{q}")))
                .unwrap();
        }
        std::fs::write(dir.path().join("sys/class/net/eth0/rss_indirection"), table).unwrap();
        let root = Root::new(dir.path());
        (dir, root)
    }

    #[test]
    fn a_default_spread_is_remembered_as_default_and_restored_by_a_reset() {
        let (_dir, root) = fake("0 1 2 3 0 1 2 3\n", 4);
        let reading = read(&root, "eth0").unwrap();
        assert_eq!(reading.restore_text, "default");
        write(&root, "eth0", "0 0 1 1 2 2 3 3").unwrap();
        let changed = read(&root, "eth0").unwrap();
        assert_eq!(changed.indirection, [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(changed.restore_text, "0 0 1 1 2 2 3 3");
        write(&root, "eth0", "default").unwrap();
        assert_eq!(
            read(&root, "eth0").unwrap().indirection,
            [0, 1, 2, 3, 0, 1, 2, 3]
        );
    }

    #[test]
    fn bad_tables_are_clear_errors() {
        let (_dir, root) = fake("0 1 x 3\n", 4);
        assert!(matches!(
            read(&root, "eth0"),
            Err(RssError::Malformed { .. })
        ));
        assert!(matches!(read(&root, "eth1"), Err(RssError::NoTable { .. })));
        let (_dir, root) = fake("0 1 2 3\n", 4);
        assert!(matches!(
            write(&root, "eth0", "0 1"),
            Err(RssError::Rejected { .. })
        ));
        assert!(matches!(
            write(&root, "eth0", "zero"),
            Err(RssError::Rejected { .. })
        ));
    }
}
