//! What `ethtool -i` and `ethtool -S` show: the driver's name and version
//! (`ETHTOOL_GDRVINFO`), and its statistics (`ETH_SS_STATS` names by `ETHTOOL_GSTRINGS`,
//! values by `ETHTOOL_GSTATS`), which steerd samples for per-queue packet counters where
//! the netdev family has no `qstats-get`.
//!
//! A module of its own because the stats are the one reader that runs per tick and the
//! one that copes with a count moving under it: each sample re-reads the count, sizes
//! the [`Ethtool`] buffers with slack, checks the count the kernel wrote back and
//! retries. The transport and the string sets are the parent's.

use std::borrow::Cow;

use nix::errno::Errno;

use super::{AnsweredInPlace, ETH_GSTRING_LEN, Ethtool, Failure, gstring};
use crate::error::Error;

/// Commands (`ethtool.h`).
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
const ETHTOOL_GSTATS: u32 = 0x0000_001d;
/// `enum ethtool_stringset`: `ETH_SS_STATS`.
const ETH_SS_STATS: u32 = 1;
/// How often a sample is retried when the stat count moves under it.
const COUNT_RETRIES: usize = 3;

/// `struct ethtool_drvinfo` (196 bytes).
#[repr(C)]
pub(super) struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    pub(super) n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

impl AnsweredInPlace for EthtoolDrvinfo {}

/// What `ETHTOOL_GDRVINFO` says about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInfo {
    /// The driver's name, e.g. `virtio_net`, `veth`, `mlx5_core`.
    pub driver: String,
    pub version: String,
    pub firmware_version: String,
    /// e.g. `0000:00:03.0`; empty for virtual devices.
    pub bus_info: String,
    /// The stat count at the time of the call (re-read it per sample: it changes).
    pub n_stats: u32,
}

/// One sample of a device's driver statistics, borrowed from the [`Ethtool`] buffers.
#[derive(Debug, Clone, Copy)]
pub struct Stats<'a> {
    pub(super) names: &'a [u8],
    pub(super) values: &'a [u64],
}

impl<'a> Stats<'a> {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The raw name table: `len() * ETH_GSTRING_LEN` bytes, NUL-padded names. Comparing it
    /// with the previous sample's tells whether the names changed.
    pub fn raw_names(&self) -> &'a [u8] {
        self.names
    }

    pub fn values(&self) -> &'a [u64] {
        self.values
    }

    /// The `index`th name, NUL-trimmed (leading spaces kept: vmxnet3 indents its
    /// per-queue names).
    pub fn name(&self, index: usize) -> Option<Cow<'a, str>> {
        let start = index.checked_mul(ETH_GSTRING_LEN)?;
        let field = self.names.get(start..start + ETH_GSTRING_LEN)?;
        Some(gstring(field))
    }

    /// `(name, value)` pairs in the driver's order.
    pub fn iter(&self) -> impl Iterator<Item = (Cow<'a, str>, u64)> + 'a {
        let names = self.names;
        names
            .chunks_exact(ETH_GSTRING_LEN)
            .map(gstring)
            .zip(self.values.iter().copied())
    }
}

impl Ethtool {
    /// `ETHTOOL_GDRVINFO`. Fails with EOPNOTSUPP for devices without a driver (`lo`) and
    /// ENODEV for a device that does not exist (any more).
    pub fn driver_info(&self, ifname: &str) -> Result<DriverInfo, Error> {
        let info = EthtoolDrvinfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            version: [0; 32],
            fw_version: [0; 32],
            bus_info: [0; 32],
            erom_version: [0; 32],
            reserved2: [0; 12],
            n_priv_flags: 0,
            n_stats: 0,
            testinfo_len: 0,
            eedump_len: 0,
            regdump_len: 0,
        };
        let info = self.get(ifname, "ETHTOOL_GDRVINFO", info)?;
        Ok(DriverInfo {
            driver: gstring(&info.driver).into_owned(),
            version: gstring(&info.version).into_owned(),
            firmware_version: gstring(&info.fw_version).into_owned(),
            bus_info: gstring(&info.bus_info).into_owned(),
            n_stats: info.n_stats,
        })
    }

    /// `ETHTOOL_GSSET_INFO` for `ETH_SS_STATS`: the current number of driver stats, `None`
    /// when the device has no stats string set (the kernel answers without the bit).
    pub fn stats_count(&self, ifname: &str) -> Result<Option<u32>, Error> {
        self.count_stats(ifname).map_err(|f| f.into_error(ifname))
    }

    /// One sample of all driver stats (`ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS`,
    /// `ETHTOOL_GSTATS`), borrowed from this client's buffers. A device without stats
    /// (`lo`) is an EOPNOTSUPP error, a vanished one ENODEV.
    pub fn sample(&mut self, ifname: &str) -> Result<Stats<'_>, Error> {
        match self.fill(ifname) {
            Ok(true) => Ok(self.last_sample()),
            Ok(false) => Err(Failure::Errno {
                command: "ETHTOOL_GSSET_INFO",
                errno: Errno::EOPNOTSUPP,
            }
            .into_error(ifname)),
            Err(failure) => Err(failure.into_error(ifname)),
        }
    }

    /// [`Self::sample`], but `Ok(None)` when the device has no driver stats (EOPNOTSUPP,
    /// no string set) or no longer exists (ENODEV): the cases a per-tick caller treats as
    /// "no counters here" rather than as a failure.
    pub fn sample_if_available(&mut self, ifname: &str) -> Result<Option<Stats<'_>>, Error> {
        match self.fill(ifname) {
            Ok(true) => Ok(Some(self.last_sample())),
            Ok(false) => Ok(None),
            Err(failure) if failure.is_absent() => Ok(None),
            Err(failure) => Err(failure.into_error(ifname)),
        }
    }

    /// Owned `(name, value)` pairs: [`Self::sample`] for callers that keep the result.
    pub fn stats(&mut self, ifname: &str) -> Result<Vec<(String, u64)>, Error> {
        let sample = self.sample(ifname)?;
        Ok(sample
            .iter()
            .map(|(name, value)| (name.into_owned(), value))
            .collect())
    }

    /// Reads names and values into the buffers; false when there is no stats string set.
    fn fill(&mut self, ifname: &str) -> Result<bool, Failure> {
        for _ in 0..COUNT_RETRIES {
            let Some(count) = self.count_stats(ifname)? else {
                return Ok(false);
            };
            let count = count as usize;
            if self.read_strings(ifname, count)? && self.read_values(ifname, count)? {
                self.count = count;
                return Ok(true);
            }
        }
        Err(Failure::Other {
            command: "ETHTOOL_GSTATS",
            reason: format!("the stat count kept changing over {COUNT_RETRIES} attempts"),
        })
    }

    /// The last successful sample, still in the buffers.
    fn last_sample(&self) -> Stats<'_> {
        let count = self.count;
        Stats {
            names: self
                .strings
                .get(12..12 + count * ETH_GSTRING_LEN)
                .unwrap_or_default(),
            values: self.values.get(1..1 + count).unwrap_or_default(),
        }
    }

    fn count_stats(&self, ifname: &str) -> Result<Option<u32>, Failure> {
        let Some(count) = self.count_set(ifname, ETH_SS_STATS)? else {
            return Ok(None);
        };
        // The count sizes the name and value buffers: bound it.
        if count as usize > crate::limits::MAX_ETHTOOL_STATS {
            return Err(Failure::Other {
                command: "ETHTOOL_GSSET_INFO",
                reason: format!(
                    "{count} statistics, more than the {} steerd accepts",
                    crate::limits::MAX_ETHTOOL_STATS
                ),
            });
        }
        Ok(Some(count))
    }

    /// `ETHTOOL_GSTRINGS` into `self.strings`; false when the kernel's count differs.
    fn read_strings(&mut self, ifname: &str, count: usize) -> Result<bool, Failure> {
        let mut strings = std::mem::take(&mut self.strings);
        let read = self.strings_into(&mut strings, ifname, ETH_SS_STATS, count);
        self.strings = strings;
        read
    }

    /// `ETHTOOL_GSTATS` into `self.values`; false when the kernel's count differs.
    fn read_values(&mut self, ifname: &str, count: usize) -> Result<bool, Failure> {
        let room = Self::with_slack(count);
        self.values.clear();
        self.values.resize(1 + room, 0);
        // struct ethtool_stats { __u32 cmd; __u32 n_stats; __u64 data[]; }: the two u32
        // fields share the first u64 slot, in memory order.
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
        header[4..].copy_from_slice(&(count as u32).to_ne_bytes());
        if let Some(first) = self.values.first_mut() {
            *first = u64::from_ne_bytes(header);
        }
        let pointer = self.values.as_mut_ptr().cast();
        self.call(ifname, "ETHTOOL_GSTATS", pointer)?;
        let header = self.values.first().copied().unwrap_or(0).to_ne_bytes();
        let written = u32::from_ne_bytes([header[4], header[5], header[6], header[7]]) as usize;
        Ok(written == count)
    }
}
