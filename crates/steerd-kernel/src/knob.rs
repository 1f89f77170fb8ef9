//! `Knob`: one kernel value steerd may change, and how it is spelled on disk.
//!
//! The one type for these values: the policy names knobs in its plans, the actuator writes
//! them, the state file remembers their originals, metrics label them and the decision log
//! prints them. Keeping the path and text format in one place means the kernel's rules
//! (cpulist for IRQs, kernel-width hex masks for RPS, power-of-two rounding for flow
//! counts) are applied the same way everywhere, and a knob prints (`irq 38 affinity`,
//! `eth0 rx-0 rps_cpus`) and serialises (`{"knob": "irq_affinity", "irq": 38}`, also the
//! state file's form) one way.

use std::cmp::Ordering;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;

/// [`Knob::kind`] of an IRQ's affinity.
pub const IRQ_AFFINITY: &str = "irq_affinity";
/// [`Knob::kind`] of a receive queue's RPS mask.
pub const RPS_CPUS: &str = "rps_cpus";
/// [`Knob::kind`] of a receive queue's RFS flow table size.
pub const RPS_FLOW_CNT: &str = "rps_flow_cnt";
/// [`Knob::kind`] of the global RFS socket flow table size.
pub const RPS_SOCK_FLOW_ENTRIES: &str = "rps_sock_flow_entries";
/// [`Knob::kind`] of a threaded NAPI's polling thread's CPU affinity.
pub const NAPI_THREAD_AFFINITY: &str = "napi_thread_affinity";
/// [`Knob::kind`] of a NIC's RSS indirection table (default context).
pub const RSS_INDIRECTION: &str = "rss_indirection";
/// [`Knob::kind`] of a transmit queue's XPS mask.
pub const XPS_CPUS: &str = "xps_cpus";

/// The text a default-spread RSS table is remembered as: restoring it resets the table
/// (`ethtool -X DEV default`), so the driver spreads it again after a channel change, as
/// it did before steerd wrote one.
pub const RSS_DEFAULT_TEXT: &str = "default";

/// Whether `name` can be a network interface's name, by the kernel's own rule
/// (`dev_valid_name`): 1 to 15 bytes, not `.` or `..`, no `/`, `:` or white space. Names
/// read back from the state file become paths, so nothing else may pass.
pub fn is_interface_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c == '\0')
}

/// A knob's text that cannot be read as its value, or a value that cannot be written to
/// it. Either is a bug in steerd or a kernel file of another shape than steerd knows:
/// the write is not attempted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnobError {
    /// A CPU list or mask that does not parse, or does not fit the file's width.
    #[error(transparent)]
    CpuSet(#[from] crate::cpuset::CpuSetError),
    /// A flow count that is not a number.
    #[error("not a count: {0:?}")]
    NotACount(String),
    /// An IRQ affinity with no CPU (the kernel refuses it).
    #[error("an affinity needs at least one CPU")]
    NoCpu,
    /// A CPU set for a count, or a count for a CPU set.
    #[error("a {kind} cannot hold {value}")]
    WrongKind { kind: &'static str, value: String },
    /// The pid of a NAPI thread names another process now: the thread is gone.
    #[error("pid {pid} is no longer {name}")]
    OtherProcess { pid: u32, name: String },
    /// A `proc/PID/status` without the lines steerd reads.
    #[error(transparent)]
    Status(#[from] crate::kernel::napi_threads::StatusError),
    /// An RSS indirection table's text that is not entries (queue numbers) or `default`.
    #[error("not an indirection table: {0:?}")]
    NotATable(String),
}

/// A writable kernel value. Serialised tagged by `knob` (`{"knob": "rps_cpus", "device":
/// "eth0", "queue": 0}`): the state file holds this form, so a variant's name and fields
/// never change; new kinds of knob are new variants.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "knob", rename_all = "snake_case")]
pub enum Knob {
    /// `proc/irq/<irq>/smp_affinity_list`.
    IrqAffinity { irq: u32 },
    /// `sys/class/net/<device>/queues/rx-<queue>/rps_cpus`.
    RpsCpus { device: String, queue: u32 },
    /// `sys/class/net/<device>/queues/rx-<queue>/rps_flow_cnt`.
    RpsFlowCnt { device: String, queue: u32 },
    /// `proc/sys/net/core/rps_sock_flow_entries`.
    RpsSockFlowEntries,
    /// The CPU affinity of a threaded NAPI's polling thread: read from
    /// `proc/<pid>/status` (`Cpus_allowed_list`), written with `sched_setaffinity`. The
    /// thread's name (`napi/eth0-8193`) is part of the knob: a pid whose name differs is
    /// another process, never written (`kernel::napi_threads`).
    NapiThread { pid: u32, name: String },
    /// The RSS indirection table of a NIC's default context: read with
    /// `ETHTOOL_GRXFHINDIR`, written with `ETHTOOL_SRXFHINDIR` (`kernel::rss`). In a fake
    /// root (tests) it stands in as the file `sys/class/net/<device>/rss_indirection`,
    /// the entries separated by spaces.
    RssIndirection { device: String },
    /// `sys/class/net/<device>/queues/tx-<queue>/xps_cpus`: the CPUs that transmit on this
    /// queue (`xps: follow`).
    XpsCpus { device: String, queue: u32 },
}

/// A value for a knob: a CPU set (affinity, RPS mask) or a count (flow tables).
/// Serialised untagged (`[0, 1]`, `4096`), in plans and in the state file.
///
/// An enum that can grow: future kinds of knob with values of another shape (an RSS
/// indirection table, a set of hash fields) add a variant here, with its own untagged
/// form that does not parse as an existing one, so state files written before still load.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KnobValue {
    Cpus(CpuSet),
    Count(u32),
    /// An RSS indirection table: entry i sends hash bucket i to queue `indirection[i]`.
    /// Serialised as `{"indirection": [0, 1, ...]}`, which no other form parses as.
    Table {
        indirection: Vec<u32>,
    },
}

impl KnobValue {
    /// The CPU set, if this is one.
    pub fn cpus(&self) -> Option<&CpuSet> {
        match self {
            KnobValue::Cpus(set) => Some(set),
            _ => None,
        }
    }

    /// The count, if this is one.
    pub fn count(&self) -> Option<u32> {
        match self {
            KnobValue::Count(n) => Some(*n),
            _ => None,
        }
    }

    /// The indirection table, if this is one.
    pub fn table(&self) -> Option<&[u32]> {
        match self {
            KnobValue::Table { indirection } => Some(indirection),
            _ => None,
        }
    }
}

impl Knob {
    /// The file, relative to the root.
    pub fn relative_path(&self) -> PathBuf {
        match self {
            Knob::IrqAffinity { irq } => format!("proc/irq/{irq}/smp_affinity_list").into(),
            Knob::RpsCpus { device, queue } => {
                format!("sys/class/net/{device}/queues/rx-{queue}/rps_cpus").into()
            }
            Knob::RpsFlowCnt { device, queue } => {
                format!("sys/class/net/{device}/queues/rx-{queue}/rps_flow_cnt").into()
            }
            Knob::RpsSockFlowEntries => "proc/sys/net/core/rps_sock_flow_entries".into(),
            Knob::NapiThread { pid, .. } => format!("proc/{pid}/status").into(),
            Knob::RssIndirection { device } => {
                format!("sys/class/net/{device}/rss_indirection").into()
            }
            Knob::XpsCpus { device, queue } => {
                format!("sys/class/net/{device}/queues/tx-{queue}/xps_cpus").into()
            }
        }
    }

    /// Short name of the kind of knob, for metric labels and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Knob::IrqAffinity { .. } => IRQ_AFFINITY,
            Knob::RpsCpus { .. } => RPS_CPUS,
            Knob::RpsFlowCnt { .. } => RPS_FLOW_CNT,
            Knob::RpsSockFlowEntries => RPS_SOCK_FLOW_ENTRIES,
            Knob::NapiThread { .. } => NAPI_THREAD_AFFINITY,
            Knob::RssIndirection { .. } => RSS_INDIRECTION,
            Knob::XpsCpus { .. } => XPS_CPUS,
        }
    }

    /// The network device this knob belongs to, if any.
    pub fn device(&self) -> Option<&str> {
        match self {
            Knob::RpsCpus { device, .. }
            | Knob::RpsFlowCnt { device, .. }
            | Knob::RssIndirection { device }
            | Knob::XpsCpus { device, .. } => Some(device),
            _ => None,
        }
    }

    /// Whether this knob holds a CPU set (else a count).
    pub fn holds_cpus(&self) -> bool {
        matches!(
            self,
            Knob::IrqAffinity { .. }
                | Knob::RpsCpus { .. }
                | Knob::NapiThread { .. }
                | Knob::XpsCpus { .. }
        )
    }

    /// Parses the text the kernel prints for this knob.
    pub fn parse(&self, text: &str) -> Result<KnobValue, KnobError> {
        match self {
            Knob::IrqAffinity { .. } => Ok(KnobValue::Cpus(CpuSet::parse_list(text)?)),
            Knob::RpsCpus { .. } | Knob::XpsCpus { .. } => {
                Ok(KnobValue::Cpus(CpuSet::parse_mask(text)?))
            }
            Knob::NapiThread { pid, name } => {
                match crate::kernel::napi_threads::parse_status(text, name) {
                    Ok(Some(cpus)) => Ok(KnobValue::Cpus(cpus)),
                    Ok(None) => Err(KnobError::OtherProcess {
                        pid: *pid,
                        name: name.clone(),
                    }),
                    Err(reason) => Err(KnobError::Status(reason)),
                }
            }
            Knob::RssIndirection { .. } => {
                parse_table(text).map(|indirection| KnobValue::Table { indirection })
            }
            Knob::RpsFlowCnt { .. } | Knob::RpsSockFlowEntries => text
                .trim()
                .parse::<u32>()
                .map(KnobValue::Count)
                .map_err(|_| KnobError::NotACount(text.trim().chars().take(64).collect())),
        }
    }

    /// The text to write for `value`. Hex masks are formatted `mask_words` 32-bit groups
    /// wide — the width the kernel printed when we read the file — because a wider write
    /// fails with EOVERFLOW.
    pub fn format(&self, value: &KnobValue, mask_words: u32) -> Result<String, KnobError> {
        match (self, value) {
            (Knob::IrqAffinity { .. } | Knob::NapiThread { .. }, KnobValue::Cpus(cpus)) => {
                if cpus.is_empty() {
                    return Err(KnobError::NoCpu);
                }
                Ok(cpus.to_list())
            }
            (Knob::RpsCpus { .. } | Knob::XpsCpus { .. }, KnobValue::Cpus(cpus)) => {
                Ok(cpus.to_mask(mask_words.max(1) * 32)?)
            }
            (Knob::RpsFlowCnt { .. } | Knob::RpsSockFlowEntries, KnobValue::Count(n)) => {
                Ok(n.to_string())
            }
            (Knob::RssIndirection { .. }, KnobValue::Table { indirection }) => {
                if indirection.is_empty() {
                    return Err(KnobError::NotATable(String::new()));
                }
                Ok(table_text(indirection))
            }
            _ => Err(KnobError::WrongKind {
                kind: self.kind(),
                value: value.to_string(),
            }),
        }
    }

    /// Whether the value read back after a write means the write took effect. The kernel
    /// rounds flow counts up to a power of two and ANDs RPS masks with the housekeeping
    /// CPUs, so exact equality is not always the test.
    pub fn took_effect(&self, wanted: &KnobValue, read_back: &KnobValue) -> bool {
        match (wanted, read_back) {
            (KnobValue::Count(w), KnobValue::Count(r)) => {
                *r == *w || (*w > 0 && u64::from(*r) == u64::from(*w).next_power_of_two())
            }
            // The kernel keeps only housekeeping CPUs of an RPS mask and only online CPUs
            // of an XPS map.
            (KnobValue::Cpus(w), KnobValue::Cpus(r)) => match self {
                Knob::RpsCpus { .. } | Knob::XpsCpus { .. } => {
                    r.is_subset(w) && (w.is_empty() || !r.is_empty())
                }
                _ => r == w,
            },
            (KnobValue::Table { .. }, KnobValue::Table { .. }) => wanted == read_back,
            _ => false,
        }
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Knob::IrqAffinity { irq } => write!(f, "irq {irq} affinity"),
            Knob::RpsCpus { device, queue } => write!(f, "{device} rx-{queue} rps_cpus"),
            Knob::RpsFlowCnt { device, queue } => write!(f, "{device} rx-{queue} rps_flow_cnt"),
            Knob::RpsSockFlowEntries => f.write_str("rps_sock_flow_entries"),
            Knob::NapiThread { pid, name } => write!(f, "{name} (pid {pid}) affinity"),
            Knob::RssIndirection { device } => write!(f, "{device} rss indirection"),
            Knob::XpsCpus { device, queue } => write!(f, "{device} tx-{queue} xps_cpus"),
        }
    }
}

/// A CPU set as a cpulist (`0-3,8`, `none` when empty), a count as its number: the form
/// plans, log lines and the decision log's `old` and `new` show.
impl fmt::Display for KnobValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobValue::Cpus(cpus) if cpus.is_empty() => f.write_str("none"),
            KnobValue::Cpus(cpus) => f.write_str(&cpus.to_list()),
            KnobValue::Count(n) => write!(f, "{n}"),
            KnobValue::Table { indirection } => f.write_str(&table_summary(indirection)),
        }
    }
}

/// The most entries an indirection table may have: the kernel's tables hold at most a
/// few thousand (mlx5: 2048; `ETH_RXFH_INDIR_NO_CHANGE` aside), and a text that claims
/// more is not a table.
pub const MAX_TABLE_ENTRIES: usize = 65_536;

/// ethtool's default spread (`ethtool_rxfh_indir_default`): entry `i` sends to queue
/// `i % queues`. What drivers set up and `ethtool -X DEV default` restores.
pub fn default_spread(entries: usize, queues: u32) -> Vec<u32> {
    (0..entries as u32).map(|i| i % queues.max(1)).collect()
}

/// Whether `table` is the [`default_spread`] over `queues` (a table that is not was set
/// by someone, or by steerd).
pub fn is_default_spread(table: &[u32], queues: u32) -> bool {
    queues > 0
        && !table.is_empty()
        && table
            .iter()
            .enumerate()
            .all(|(i, &q)| q as usize == i % queues as usize)
}

/// Whether `table` is a spread a driver sets up by itself over `queues`: ethtool's
/// [`default_spread`], or the block layout igb, igc and others write (`(i * queues) /
/// entries`: a run of queue 0, then of queue 1, ...; seen on QEMU's igb, docs/kernel.md).
/// A table that is neither was set by someone. Only the round-robin one is what a reset to
/// "default" writes back, so restores keep using [`is_default_spread`].
pub fn is_driver_spread(table: &[u32], queues: u32) -> bool {
    let n = table.len() as u64;
    is_default_spread(table, queues)
        || (queues > 0
            && n > 0
            && table
                .iter()
                .enumerate()
                .all(|(i, &q)| u64::from(q) == i as u64 * u64::from(queues) / n))
}

/// Reads a table's text: entries separated by white space.
pub(crate) fn parse_table(text: &str) -> Result<Vec<u32>, KnobError> {
    let bad = || KnobError::NotATable(text.trim().chars().take(64).collect());
    let entries: Vec<u32> = text
        .split_whitespace()
        .take(MAX_TABLE_ENTRIES + 1)
        .map(|word| word.parse::<u32>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if entries.is_empty() || entries.len() > MAX_TABLE_ENTRIES {
        return Err(bad());
    }
    Ok(entries)
}

/// A table's text: its entries separated by spaces (the state file's and a fake root's
/// form).
pub(crate) fn table_text(entries: &[u32]) -> String {
    let mut text = String::with_capacity(entries.len() * 3);
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(&e.to_string());
    }
    text
}

/// A table for people: its size and how many entries each queue holds
/// (`128 entries: q0 32 q1 32 q2 32 q3 32`), which is what a move changes.
fn table_summary(entries: &[u32]) -> String {
    let queues = entries.iter().map(|&q| q as usize + 1).max().unwrap_or(0);
    let mut counts = vec![0usize; queues.min(MAX_TABLE_ENTRIES)];
    for &q in entries {
        if let Some(c) = counts.get_mut(q as usize) {
            *c += 1;
        }
    }
    let mut text = format!("{} entries:", entries.len());
    for (q, c) in counts.iter().enumerate() {
        text.push_str(&format!(" q{q} {c}"));
    }
    text
}

impl KnobValue {
    /// The order of kinds of value, for sorting values of different kinds.
    fn rank(&self) -> u8 {
        match self {
            KnobValue::Cpus(_) => 0,
            KnobValue::Count(_) => 1,
            KnobValue::Table { .. } => 2,
        }
    }
}

impl PartialOrd for KnobValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KnobValue {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (KnobValue::Count(a), KnobValue::Count(b)) => a.cmp(b),
            (KnobValue::Cpus(a), KnobValue::Cpus(b)) => a.iter().cmp(b.iter()),
            (KnobValue::Table { indirection: a }, KnobValue::Table { indirection: b }) => a.cmp(b),
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_drivers_block_layout_is_a_driver_spread_but_not_ethtools_default() {
        let block: Vec<u32> = (0..128u32).map(|i| i * 4 / 128).collect();
        assert!(is_driver_spread(&block, 4));
        assert!(!is_default_spread(&block, 4));
        assert!(is_driver_spread(&default_spread(128, 4), 4));
        let mut skewed = block.clone();
        skewed[5] = 3;
        assert!(!is_driver_spread(&skewed, 4));
        assert!(!is_driver_spread(&[], 4));
        assert!(!is_driver_spread(&block, 0));
    }

    use super::*;

    fn rps(q: u32) -> Knob {
        Knob::RpsCpus {
            device: "eth0".into(),
            queue: q,
        }
    }

    #[test]
    fn paths_follow_the_kernel_layout() {
        assert_eq!(
            Knob::IrqAffinity { irq: 42 }.relative_path(),
            PathBuf::from("proc/irq/42/smp_affinity_list")
        );
        assert_eq!(
            rps(3).relative_path(),
            PathBuf::from("sys/class/net/eth0/queues/rx-3/rps_cpus")
        );
    }

    #[test]
    fn masks_are_written_in_the_width_read() {
        let cpus = KnobValue::Cpus([1].into_iter().collect());
        assert_eq!(rps(0).format(&cpus, 1).unwrap(), "00000002");
        assert_eq!(
            rps(0).format(&cpus, 8).unwrap().split(',').count(),
            8,
            "256-bit host"
        );
        let too_wide = KnobValue::Cpus([40].into_iter().collect());
        assert!(rps(0).format(&too_wide, 1).is_err());
        assert!(
            Knob::IrqAffinity { irq: 1 }
                .format(&KnobValue::Cpus(CpuSet::new()), 1)
                .is_err()
        );
        assert!(rps(0).format(&KnobValue::Count(3), 1).is_err());
    }

    #[test]
    fn read_back_rules() {
        let flow = Knob::RpsFlowCnt {
            device: "eth0".into(),
            queue: 0,
        };
        assert!(flow.took_effect(&KnobValue::Count(1000), &KnobValue::Count(1024)));
        assert!(!flow.took_effect(&KnobValue::Count(1000), &KnobValue::Count(512)));
        let both = KnobValue::Cpus(CpuSet::parse_list("0-1").unwrap());
        let one = KnobValue::Cpus(CpuSet::parse_list("1").unwrap());
        assert!(rps(0).took_effect(&both, &one), "housekeeping AND");
        assert!(!Knob::IrqAffinity { irq: 1 }.took_effect(&both, &one));
        assert_eq!(rps(0).parse("3\n").unwrap(), both);
        assert!(flow.parse("abc").is_err());
    }
}
