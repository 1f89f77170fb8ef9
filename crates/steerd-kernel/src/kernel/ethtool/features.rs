//! What `ethtool -k` shows: a device's features under the kernel's names
//! (`ETH_SS_FEATURES` by `ETHTOOL_GSTRINGS`) with their states (`ETHTOOL_GFEATURES`).
//!
//! A module of its own because it is the one reader that joins two requests by bit
//! number (a name table and the blocks of state bits); the string set it reads the
//! names from is the parent's, shared with the driver stats.

use super::{ETH_GSTRING_LEN, Ethtool, Failure, gstring};
use crate::error::Error;

/// The command (`ethtool.h`) and the string set of the names.
pub(super) const ETHTOOL_GFEATURES: u32 = 0x0000_003a;
pub(super) const ETH_SS_FEATURES: u32 = 4;
/// The most feature bits steerd accepts from `ETHTOOL_GSSET_INFO` for `ETH_SS_FEATURES`:
/// kernels have 64 (`ETHTOOL_DEV_FEATURE_WORDS` 2); room for growth, and a bound on the
/// buffers a bad answer could size.
const MAX_FEATURES: usize = 1024;

/// One device feature's state from `ETHTOOL_GFEATURES`, as `ethtool -k` prints it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureState {
    /// The device lets it be changed (`hw_features`).
    pub available: bool,
    /// What was asked for (`wanted_features`).
    pub requested: bool,
    /// On now (`features`).
    pub active: bool,
    /// The kernel never lets it change (`NETIF_F_NEVER_CHANGE`).
    pub never_changed: bool,
}

impl FeatureState {
    /// `[fixed]` in `ethtool -k`: not changeable on this device.
    pub fn fixed(self) -> bool {
        !self.available || self.never_changed
    }
}

/// A device's features by kernel name (`rx-gro`, `rx-gro-hw`, `rx-ntuple-filter`, ...):
/// the `ETH_SS_FEATURES` names with their `ETHTOOL_GFEATURES` bits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features(Vec<(String, FeatureState)>);

impl Features {
    /// Features from `(name, state)` pairs (as the ioctl would answer).
    pub fn new(states: impl IntoIterator<Item = (String, FeatureState)>) -> Self {
        Features(states.into_iter().collect())
    }

    /// The state of the feature named `name`, if the kernel has it.
    pub fn get(&self, name: &str) -> Option<FeatureState> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, s)| *s)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, FeatureState)> {
        self.0.iter().map(|(n, s)| (n.as_str(), *s))
    }

    /// Decodes the `ETH_SS_FEATURES` name table (`ETH_GSTRING_LEN` bytes a name, bit `i`
    /// named by entry `i`; empty names are unused bits) with the `ETHTOOL_GFEATURES`
    /// blocks (`[available, requested, active, never_changed]`, 32 bits each, bit `i` in
    /// block `i / 32`). Bits beyond the blocks the kernel filled are left out.
    pub(super) fn decode(names: &[u8], blocks: &[[u32; 4]]) -> Self {
        let mut states = Vec::new();
        for (bit, field) in names.chunks_exact(ETH_GSTRING_LEN).enumerate() {
            let name = gstring(field);
            let Some(block) = blocks.get(bit / 32) else {
                break;
            };
            if name.is_empty() {
                continue;
            }
            let mask = 1u32 << (bit % 32);
            let [available, requested, active, never_changed] = block.map(|w| w & mask != 0);
            states.push((
                name.into_owned(),
                FeatureState {
                    available,
                    requested,
                    active,
                    never_changed,
                },
            ));
        }
        Features(states)
    }
}

impl Ethtool {
    /// The device's features with their names (`ETHTOOL_GSSET_INFO` and
    /// `ETHTOOL_GSTRINGS` for `ETH_SS_FEATURES`, then `ETHTOOL_GFEATURES`): what
    /// `ethtool -k` shows, under the kernel's names (`rx-gro` is "generic-receive-offload",
    /// `rx-ntuple-filter` "ntuple-filters"). Every device answers: the features are the
    /// core's, not the driver's. Hand-written (see the module's doc) so that it needs no
    /// async netlink stack; the names make it robust to the kernel renumbering feature
    /// bits, unlike the legacy `ETHTOOL_GGRO`/`ETHTOOL_GFLAGS`.
    pub fn features(&self, ifname: &str) -> Result<Features, Error> {
        self.read_features(ifname).map_err(|f| f.into_error(ifname))
    }

    fn read_features(&self, ifname: &str) -> Result<Features, Failure> {
        let Some(count) = self.count_set(ifname, ETH_SS_FEATURES)? else {
            return Err(Failure::Other {
                command: "ETHTOOL_GSSET_INFO",
                reason: "no feature string set".into(),
            });
        };
        let count = count as usize;
        if count > MAX_FEATURES {
            return Err(Failure::Other {
                command: "ETHTOOL_GSSET_INFO",
                reason: format!("{count} features, more than the {MAX_FEATURES} steerd accepts"),
            });
        }
        let mut names = Vec::new();
        if !self.strings_into(&mut names, ifname, ETH_SS_FEATURES, count)? {
            return Err(Failure::Other {
                command: "ETHTOOL_GSTRINGS",
                reason: "the feature count changed between calls".into(),
            });
        }
        // struct ethtool_gfeatures { __u32 cmd; __u32 size; struct
        // ethtool_get_features_block features[size]; }: the kernel copies at most `size`
        // blocks (its own count when fewer) and writes its count back into `size`.
        let words = count.div_ceil(32);
        let mut buffer = vec![0u32; 2 + 4 * words];
        buffer[0] = ETHTOOL_GFEATURES;
        buffer[1] = words as u32;
        self.call(ifname, "ETHTOOL_GFEATURES", buffer.as_mut_ptr().cast())?;
        let filled = (buffer[1] as usize).min(words);
        let blocks: Vec<[u32; 4]> = buffer
            .get(2..)
            .unwrap_or_default()
            .chunks_exact(4)
            .take(filled)
            .map(|b| [b[0], b[1], b[2], b[3]])
            .collect();
        let table = names
            .get(12..12 + count * ETH_GSTRING_LEN)
            .unwrap_or_default();
        Ok(Features::decode(table, &blocks))
    }
}
