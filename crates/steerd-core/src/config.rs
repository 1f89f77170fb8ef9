//! steerd's configuration: the YAML schema, its defaults, and its checks.
//!
//! Every knob has a default that works with no file at all; `config/steerd.yaml` is the same
//! defaults written out with comments, and is embedded as [`DEFAULT_YAML`] (a test keeps the
//! two equal). The reference for every key is `docs/config.md`.
//!
//! Reading a file never stops at the first mistake: [`check_config`] returns every error it
//! can find, each naming its key path and line, so `steerd check-config` can print them all.
//! Checks that need the machine (a banned CPU that does not exist) are in
//! [`Config::validate`].

mod check;
mod depth;
mod file;
#[cfg(test)]
mod hostile;
mod locate;
mod values;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;

pub use check::{ConfigError, check_config, check_config_for};
pub use file::{ConfigFileError, MAX_CONFIG_BYTES, read_config_file};

/// The commented default configuration shipped as `config/steerd.yaml`.
pub const DEFAULT_YAML: &str = include_str!("../../../config/steerd.yaml");

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The tick: how often counters are sampled and the policy runs (`--interval`).
    #[serde(with = "values::duration")]
    pub interval: Duration,
    /// Sleeping longer while the network is quiet.
    pub quiet: QuietConfig,
    pub load: LoadConfig,
    pub watermarks: Watermarks,
    pub hysteresis: Hysteresis,
    pub cpus: CpuRules,
    /// Where a device's IRQs and RPS masks may go relative to its NUMA node.
    pub numa: NumaPolicy,
    pub irq: IrqConfig,
    pub rps: RpsConfig,
    pub rfs: RfsConfig,
    /// The RSS indirection table lever.
    pub rss: RssConfig,
    /// Transmit steering: whether each transmit queue's XPS mask follows its receive
    /// queue's interrupt CPU.
    pub xps: XpsMode,
    /// What to do with a value someone else changed after steerd wrote it.
    pub on_external_change: ExternalChange,
    /// On SIGTERM/SIGINT, put back every value steerd changed (and nobody changed since).
    pub restore_on_exit: bool,
    /// Per-device overrides, by name. A key ending in `*` matches names with that prefix;
    /// an exact name wins over a prefix, and a longer prefix over a shorter one.
    pub devices: BTreeMap<String, DeviceConfig>,
}

/// Quiet mode: while no receive work arrives, steerd ticks every `quiet.interval` instead
/// of every `interval`, and the kernel wakes it at the first NAPI polls (see
/// `kernel::napi_wake`), so new traffic is seen within milliseconds, not a tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuietConfig {
    pub enabled: bool,
    /// The longest gap between ticks while quiet; not shorter than `interval`.
    #[serde(with = "values::duration")]
    pub interval: Duration,
    /// Wake after this many NAPI polls on one CPU. Also the most packets a CPU may
    /// receive per `quiet.interval` (as a rate) for steerd to go or stay quiet.
    pub wake_after_polls: u64,
}

/// How the load model smooths rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadConfig {
    /// EWMA weight of the newest sample, in (0, 1]; 1 means no smoothing.
    pub smoothing: f64,
}

/// When a CPU counts as hot, calm, or in distress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Watermarks {
    /// irq+softirq time share at or above which a CPU is hot.
    pub high: f64,
    /// irq+softirq time share below which a CPU is calm.
    pub low: f64,
    /// A CPU doing this many times the mean receive work (softnet `processed`) of the other
    /// allowed CPUs of its node is hot, if it also does at least `busy_pps`.
    pub imbalance: f64,
    /// Packets per second below which receive work is never "hot" by imbalance alone.
    pub busy_pps: f64,
    /// Softnet `dropped` per second at or above which a CPU is in distress.
    pub distress_drops_per_sec: f64,
    /// Softnet `time_squeeze` per second at or above which a CPU is in distress.
    pub distress_squeezes_per_sec: f64,
}

/// The brakes that keep steerd from flapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Hysteresis {
    /// Ticks a condition must hold before steerd acts on it.
    pub confirm_ticks: u32,
    /// Ticks of distress (drops, time_squeeze) before steerd acts: the fast path.
    pub distress_confirm_ticks: u32,
    /// Ticks a device must stay calm before its RPS masks are narrowed or turned off.
    pub calm_ticks: u32,
    /// Minimum time between two moves of the same IRQ.
    #[serde(with = "values::duration")]
    pub irq_dwell: Duration,
    /// Minimum time between two changes of the same queue's RPS mask.
    #[serde(with = "values::duration")]
    pub rps_dwell: Duration,
    /// At most this many actions per tick (one device's RPS change counts as one).
    pub max_actions_per_tick: u32,
    /// Minimum predicted drop of the hot CPU's receive work, as a fraction of it, for a
    /// load-driven IRQ move.
    pub min_gain: f64,
}

/// CPUs that belong to someone else.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuRules {
    /// Never a target; IRQs steerd manages are moved off them.
    #[serde(with = "values::cpulist")]
    pub banned: CpuSet,
    /// Never a target; what someone else put there is left alone.
    #[serde(with = "values::cpulist")]
    pub reserved: CpuSet,
    /// Also ban the CPUs irqbalance's environment file bans (`IRQBALANCE_BANNED_CPULIST` or
    /// `IRQBALANCE_BANNED_CPUS` in `/etc/default/irqbalance` or `/etc/sysconfig/irqbalance`),
    /// following the file as it changes: for tools that steer irqbalance that way (CRI-O).
    pub irqbalance_banned_cpus: bool,
}

/// NUMA placement of a device's IRQs and RPS masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NumaPolicy {
    /// The device's local CPUs; all allowed CPUs if none of them is allowed.
    Prefer,
    /// Only the device's local CPUs; nothing if none is allowed.
    Strict,
    /// Any allowed CPU.
    Ignore,
}

/// IRQ affinity handling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IrqConfig {
    /// Whether steerd moves IRQs at all.
    pub enabled: bool,
    /// Non-queue vectors of NICs and IRQs of other devices.
    pub non_queue: NonQueueIrqs,
}

/// What to do with IRQs that are not NIC queue vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NonQueueIrqs {
    /// Placed by the same rules with low weight: moved off forbidden CPUs and off the
    /// wrong NUMA node, never moved for load.
    Place,
    /// Never touched.
    Leave,
}

/// Receive Packet Steering defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RpsConfig {
    /// The mode of devices not listed under `devices`.
    pub mode: RpsMode,
    /// Leave the CPUs of hot queue IRQs out of RPS masks when enough other CPUs remain.
    pub exclude_busy_irq_cpus: bool,
}

/// How steerd handles a device's RPS masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RpsMode {
    /// Masks are left as they are (steerd turns off only what it turned on).
    Off,
    /// Every rx queue gets the device's configured `rps_cpus`.
    Static,
    /// steerd turns RPS on, widens, narrows and turns it off by load.
    Auto,
}

/// Receive Flow Steering, set up alongside RPS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RfsConfig {
    pub enabled: bool,
    /// `rps_sock_flow_entries` when RPS is on somewhere; a power of two.
    pub sock_flow_entries: u32,
    /// Set the flow tables back to 0 (only those steerd set) once RPS is off everywhere.
    pub off_when_rps_off: bool,
}

/// The RSS indirection table lever: moving table entries from hot receive queues to cool
/// ones (`policy::rss`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RssConfig {
    /// off, advise (say in the plan what it would move, write nothing) or auto.
    pub mode: RssMode,
    /// At most this share of a hot queue's entries moves in one step (0 < step <= 1).
    pub step: f64,
    /// How long a step's effect is measured before it is kept or reverted.
    #[serde(with = "values::duration")]
    pub dwell: Duration,
}

/// Whether steerd sets transmit queues' XPS masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XpsMode {
    /// XPS stays as the driver (or the operator) set it.
    #[default]
    Off,
    /// Each transmit queue's `xps_cpus` holds the CPU its paired receive queue's
    /// interrupt fires on, and the CPUs nearest to it that no other queue's interrupt is
    /// on; kept in step as vectors move.
    Follow,
}

/// Whether steerd changes RSS indirection tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RssMode {
    /// Tables are never read on a tick or written.
    Off,
    /// The plan says which entries steerd would move and why; nothing is written.
    Advise,
    /// steerd moves entries, measures, and keeps or reverts each step.
    Auto,
}

/// What to do with a value that changed since steerd last wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExternalChange {
    /// Leave it, report it, and never touch that target again while it differs.
    Respect,
    /// Treat it like any other value: steerd may change it again.
    Override,
}

/// One device's overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceConfig {
    /// RPS mode for this device; `rps.mode` when absent.
    pub rps: Option<RpsMode>,
    /// The mask for `rps: static`.
    #[serde(with = "values::optional_cpulist")]
    pub rps_cpus: Option<CpuSet>,
    /// Whether steerd moves this device's IRQs.
    pub irqs: IrqHandling,
}

/// Whether steerd moves a device's IRQs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IrqHandling {
    #[default]
    Manage,
    Leave,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Duration::from_secs(1),
            quiet: QuietConfig::default(),
            load: LoadConfig::default(),
            watermarks: Watermarks::default(),
            hysteresis: Hysteresis::default(),
            cpus: CpuRules::default(),
            numa: NumaPolicy::Prefer,
            irq: IrqConfig::default(),
            rps: RpsConfig::default(),
            rfs: RfsConfig::default(),
            rss: RssConfig::default(),
            xps: XpsMode::Off,
            on_external_change: ExternalChange::Respect,
            restore_on_exit: true,
            devices: BTreeMap::new(),
        }
    }
}

impl Default for QuietConfig {
    fn default() -> Self {
        QuietConfig {
            enabled: true,
            interval: Duration::from_secs(5),
            wake_after_polls: 64,
        }
    }
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig { smoothing: 0.5 }
    }
}

impl Default for Watermarks {
    fn default() -> Self {
        Watermarks {
            high: 0.60,
            low: 0.30,
            imbalance: 3.0,
            busy_pps: 50_000.0,
            distress_drops_per_sec: 1.0,
            distress_squeezes_per_sec: 50.0,
        }
    }
}

impl Default for Hysteresis {
    fn default() -> Self {
        Hysteresis {
            confirm_ticks: 3,
            distress_confirm_ticks: 1,
            calm_ticks: 10,
            irq_dwell: Duration::from_secs(10),
            rps_dwell: Duration::from_secs(30),
            max_actions_per_tick: 32,
            min_gain: 0.10,
        }
    }
}

impl Default for IrqConfig {
    fn default() -> Self {
        IrqConfig {
            enabled: true,
            non_queue: NonQueueIrqs::Place,
        }
    }
}

impl Default for RpsConfig {
    fn default() -> Self {
        RpsConfig {
            mode: RpsMode::Auto,
            exclude_busy_irq_cpus: true,
        }
    }
}

impl Default for RssConfig {
    fn default() -> Self {
        RssConfig {
            mode: RssMode::Advise,
            step: 0.5,
            dwell: Duration::from_secs(3),
        }
    }
}

impl Default for RfsConfig {
    fn default() -> Self {
        RfsConfig {
            enabled: true,
            sock_flow_entries: 32768,
            off_when_rps_off: true,
        }
    }
}

impl Config {
    /// Parses a YAML document; every error found, each with its key path and line.
    pub fn from_yaml(text: &str) -> Result<Config, Vec<ConfigError>> {
        check_config(text)
    }

    /// The overrides for a device: an exact key, else the longest matching `prefix*` key.
    pub fn device(&self, name: &str) -> Option<&DeviceConfig> {
        if let Some(exact) = self.devices.get(name) {
            return Some(exact);
        }
        self.devices
            .iter()
            .filter_map(|(key, value)| {
                let prefix = key.strip_suffix('*')?;
                name.starts_with(prefix).then_some((prefix.len(), value))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, value)| value)
    }

    /// The RPS mode of a device.
    pub fn rps_mode(&self, name: &str) -> RpsMode {
        self.device(name)
            .and_then(|d| d.rps)
            .unwrap_or(self.rps.mode)
    }

    /// Whether steerd may move this device's IRQs.
    pub fn manages_irqs_of(&self, name: &str) -> bool {
        self.irq.enabled
            && self
                .device(name)
                .is_none_or(|d| d.irqs == IrqHandling::Manage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_equals_the_built_in_defaults() {
        let parsed = Config::from_yaml(DEFAULT_YAML).unwrap();
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn an_empty_file_is_the_default() {
        assert_eq!(Config::from_yaml("").unwrap(), Config::default());
        assert_eq!(Config::from_yaml("# nothing\n").unwrap(), Config::default());
    }

    #[test]
    fn device_overrides_match_exact_then_longest_prefix() {
        let config = Config::from_yaml(
            "devices:\n  veth*:\n    rps: off\n  vethab*:\n    rps: static\n    rps_cpus: 0-1\n  vethabc:\n    irqs: leave\n",
        )
        .unwrap();
        assert_eq!(config.rps_mode("veth0"), RpsMode::Off);
        assert_eq!(config.rps_mode("vethab1"), RpsMode::Static);
        assert_eq!(config.rps_mode("vethabc"), RpsMode::Auto);
        assert!(!config.manages_irqs_of("vethabc"));
        assert!(config.manages_irqs_of("eth0"));
        assert_eq!(config.rps_mode("eth0"), RpsMode::Auto);
    }
}
