//! Reading a config text and checking it, collecting every error with its key and line.
//!
//! serde stops at the first error, so after a failed read each top-level section is read
//! again on its own (the others skipped): one error per broken section, each still carrying
//! yaml_serde's line. Values that read fine are then checked for range and consistency,
//! and, when the machine is known, against its CPUs.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::de::{self, DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::depth::{MAX_NESTING, too_deep};
use super::locate::line_of;
use super::{Config, RpsMode, values};
use crate::cpuset::CpuSet;
use crate::model::topology::Topology;

/// One thing wrong with a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The key path, like `cpus.banned`; empty for the document as a whole.
    pub key: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            line: None,
            message: message.into(),
        }
    }

    /// Turns a yaml_serde error into key, line and message.
    fn from_yaml(err: &yaml_serde::Error) -> Self {
        let line = err.location().map(|l| l.line());
        let text = err.to_string();
        let text = strip_location(&text);
        let (key, message) = split_path(text);
        let key = match message.strip_prefix("unknown field `") {
            Some(rest) => {
                let field = rest.split('`').next().unwrap_or_default();
                if key.is_empty() {
                    field.to_string()
                } else {
                    format!("{key}.{field}")
                }
            }
            None => key.to_string(),
        };
        ConfigError {
            key,
            line,
            message: reworded(message),
        }
    }
}

/// yaml_serde's words for its own limits, turned into what happened and what to do.
fn reworded(message: &str) -> String {
    match message {
        "recursion limit exceeded" => "nested more than 128 levels deep; a steerd \
             configuration needs 4 at most (is this the right file?)"
            .to_string(),
        "repetition limit exceeded" => "too many alias expansions (`*name` references \
             to `&name` anchors, as in a YAML \"billion laughs\" bomb); write the values out \
             instead"
            .to_string(),
        _ => message.to_string(),
    }
}

/// Drops yaml_serde's trailing ` at line L column C`: the line is kept separately.
fn strip_location(text: &str) -> &str {
    match text.rfind(" at line ") {
        Some(at)
            if text[at + 9..]
                .split(" column ")
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            &text[..at]
        }
        _ => text,
    }
}

/// Splits yaml_serde's `path.to.key: message` prefix.
fn split_path(text: &str) -> (&str, &str) {
    match text.split_once(": ") {
        Some((path, message))
            if !path.is_empty() && !path.contains(' ') && !path.contains('`') && path != "." =>
        {
            (path, message)
        }
        _ => ("", text),
    }
}

/// Reads and checks a config text without knowing the machine.
pub fn check_config(text: &str) -> Result<Config, Vec<ConfigError>> {
    check(text, None)
}

/// Reads a config text and checks it against the machine's CPUs too.
pub fn check_config_for(text: &str, topology: &Topology) -> Result<Config, Vec<ConfigError>> {
    check(text, Some(topology))
}

fn check(text: &str, topology: Option<&Topology>) -> Result<Config, Vec<ConfigError>> {
    if let Some(line) = too_deep(text, MAX_NESTING) {
        return Err(vec![ConfigError {
            key: String::new(),
            line: Some(line),
            message: reworded("recursion limit exceeded"),
        }]);
    }
    let read = read(text);
    // Sections that did not read are at their defaults: their checks would be noise.
    let keep = |e: &ConfigError| {
        let section = e.key.split('.').next().unwrap_or_default();
        !read.broken.contains(&section)
    };
    let mut errors = read.errors;
    errors.extend(read.config.check_values().into_iter().filter(keep));
    if let Some(topology) = topology {
        errors.extend(read.config.validate(topology).into_iter().filter(keep));
    }
    if errors.is_empty() {
        return Ok(read.config);
    }
    for error in &mut errors {
        error.line = error.line.or_else(|| line_of(text, &error.key));
    }
    errors.sort_by_key(|e| e.line.unwrap_or(usize::MAX));
    errors.dedup();
    Err(errors)
}

/// What reading a text gave: the config (sections that failed to read at their
/// defaults), the errors, and the top-level sections that failed.
struct Read {
    config: Config,
    errors: Vec<ConfigError>,
    broken: Vec<&'static str>,
}

/// Deserializes the whole text; on failure, each section on its own to find every error
/// and keep every section that reads.
fn read(text: &str) -> Read {
    let done = |config| Read {
        config,
        errors: Vec::new(),
        broken: Vec::new(),
    };
    if is_empty_document(text) {
        return done(Config::default());
    }
    let first = match yaml_serde::from_str::<Config>(text) {
        Ok(config) => return done(config),
        Err(err) => err,
    };
    let mut read = Read {
        config: Config::default(),
        errors: Vec::new(),
        broken: Vec::new(),
    };
    // A syntax error leaves nothing to read section by section. Past one of the parser's
    // limits (nesting, alias expansions), that is the error to report: the first one
    // (an unknown key, say) may be met before the document's real problem.
    if let Err(err) = yaml_serde::from_str::<yaml_serde::Value>(text) {
        let text = err.to_string();
        let past_a_limit = strip_location(&text) != reworded(strip_location(&text));
        read.errors.push(ConfigError::from_yaml(if past_a_limit {
            &err
        } else {
            &first
        }));
        read.broken.push("");
        return read;
    }
    let mut results = vec![("", probe::<TopLevelKeys>(text, None).map(drop))];
    results.extend(read_sections(text, &mut read.config));
    for (name, result) in results {
        if let Err(err) = result {
            read.broken.push(name);
            read.errors.push(ConfigError::from_yaml(&err));
        }
    }
    read.errors.dedup();
    if read.errors.is_empty() {
        read.errors.push(ConfigError::from_yaml(&first));
        read.broken.push("");
    }
    read
}

/// Reads one top-level section and hands its value to `set` when it is present.
fn section<T: DeserializeOwned>(
    text: &str,
    name: &'static str,
    set: impl FnOnce(T),
) -> Result<(), yaml_serde::Error> {
    if let Some(value) = probe::<T>(text, Some(name))? {
        set(value);
    }
    Ok(())
}

/// Whether the text holds no value at all (empty, comments only, or `~`).
fn is_empty_document(text: &str) -> bool {
    matches!(
        yaml_serde::from_str::<yaml_serde::Value>(text),
        Ok(yaml_serde::Value::Null)
    )
}

/// The `interval` value alone, for probing.
#[derive(Deserialize)]
struct Interval(#[serde(with = "values::duration")] Duration);

/// Declares the configuration's top-level keys once, and from that one list the key
/// names for probing unknown keys (`TopLevelKeys`, whose serde error names the expected
/// keys) and the per-section reads (`read_sections`). A key given with a type is read as
/// that newtype and unwrapped (`interval`, a duration in text). A test checks the list
/// against the fields of `Config`.
macro_rules! top_level_keys {
    ($($key:ident $(as $newtype:ident)?),* $(,)?) => {
        /// Only the top-level key names, for probing unknown keys.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct TopLevelKeys {
            $($key: Option<IgnoredAny>,)*
        }

        /// The keys, in the order of the list.
        #[cfg(test)]
        const TOP_LEVEL_KEYS: &[&str] = &[$(stringify!($key)),*];

        /// Reads every section on its own into `config`: each key's name and result.
        fn read_sections(
            text: &str,
            config: &mut Config,
        ) -> Vec<(&'static str, Result<(), yaml_serde::Error>)> {
            vec![$(
                (
                    stringify!($key),
                    section(text, stringify!($key), |value $(: $newtype)?| {
                        config.$key = top_level_keys!(@unwrap value $($newtype)?)
                    }),
                ),
            )*]
        }
    };
    (@unwrap $value:ident) => { $value };
    (@unwrap $value:ident $newtype:ident) => { $value.0 };
}

top_level_keys!(
    interval as Interval,
    quiet,
    load,
    watermarks,
    hysteresis,
    cpus,
    numa,
    irq,
    rps,
    rfs,
    rss,
    xps,
    on_external_change,
    restore_on_exit,
    devices,
);

/// Reads one top-level section as `T` (or, with `None`, the whole document as `T`),
/// skipping the rest; the error, if any, keeps its line and key path.
fn probe<T: DeserializeOwned>(
    text: &str,
    section: Option<&'static str>,
) -> Result<Option<T>, yaml_serde::Error> {
    let deserializer = yaml_serde::Deserializer::from_str(text);
    match section {
        None => T::deserialize(deserializer).map(Some),
        Some(name) => deserializer.deserialize_map(SectionVisitor::<T> {
            name,
            marker: PhantomData,
        }),
    }
}

struct SectionVisitor<T> {
    name: &'static str,
    marker: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> Visitor<'de> for SectionVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping of settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == self.name {
                found = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
}

impl Config {
    /// Range and consistency checks that need no machine.
    fn check_values(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let mut fail = |key: &str, message: String| errors.push(ConfigError::new(key, message));

        if self.interval < Duration::from_millis(100) || self.interval > Duration::from_secs(3600) {
            fail(
                "interval",
                format!(
                    "{} is out of range: use 100ms to 1h",
                    humantime::format_duration(self.interval)
                ),
            );
        }
        let quiet = &self.quiet;
        if quiet.interval < Duration::from_millis(100) || quiet.interval > Duration::from_secs(3600)
        {
            fail(
                "quiet.interval",
                format!(
                    "{} is out of range: use 100ms to 1h (a value not above `interval` turns quiet mode off)",
                    humantime::format_duration(quiet.interval)
                ),
            );
        }
        if quiet.wake_after_polls == 0 || quiet.wake_after_polls > 1 << 32 {
            fail(
                "quiet.wake_after_polls",
                format!(
                    "{} is out of range: use 1 to 4294967296",
                    quiet.wake_after_polls
                ),
            );
        }
        let smoothing = self.load.smoothing;
        if !(smoothing > 0.0 && smoothing <= 1.0) {
            fail(
                "load.smoothing",
                format!("{smoothing} is out of range: the newest sample's weight is in (0, 1]"),
            );
        }
        let w = &self.watermarks;
        if !(w.high > 0.0 && w.high <= 1.0) {
            fail("watermarks.high", format!("{} must be in (0, 1]", w.high));
        }
        if !(w.low >= 0.0 && w.low < w.high) {
            fail(
                "watermarks.low",
                format!(
                    "{} must be at least 0 and below watermarks.high ({})",
                    w.low, w.high
                ),
            );
        }
        if w.imbalance.is_nan() || w.imbalance <= 1.0 {
            fail(
                "watermarks.imbalance",
                format!("{} must be above 1", w.imbalance),
            );
        }
        for (key, value) in [
            ("watermarks.busy_pps", w.busy_pps),
            (
                "watermarks.distress_drops_per_sec",
                w.distress_drops_per_sec,
            ),
            (
                "watermarks.distress_squeezes_per_sec",
                w.distress_squeezes_per_sec,
            ),
        ] {
            if !(value.is_finite() && value > 0.0) {
                fail(key, format!("{value} must be a positive number"));
            }
        }
        let h = &self.hysteresis;
        for (key, value) in [
            ("hysteresis.confirm_ticks", h.confirm_ticks),
            (
                "hysteresis.distress_confirm_ticks",
                h.distress_confirm_ticks,
            ),
            ("hysteresis.calm_ticks", h.calm_ticks),
            ("hysteresis.max_actions_per_tick", h.max_actions_per_tick),
        ] {
            if value == 0 {
                fail(key, "must be at least 1".to_string());
            }
        }
        if h.distress_confirm_ticks > h.confirm_ticks {
            fail(
                "hysteresis.distress_confirm_ticks",
                format!(
                    "{} is slower than hysteresis.confirm_ticks ({}): distress must be acted on at least as fast",
                    h.distress_confirm_ticks, h.confirm_ticks
                ),
            );
        }
        if !(h.min_gain >= 0.0 && h.min_gain < 1.0) {
            fail(
                "hysteresis.min_gain",
                format!("{} must be in [0, 1)", h.min_gain),
            );
        }
        if !(self.rss.step > 0.0 && self.rss.step <= 1.0) {
            fail(
                "rss.step",
                format!(
                    "{} must be in (0, 1]: the share of a hot queue's table entries one step moves",
                    self.rss.step
                ),
            );
        }
        if self.rss.dwell < self.interval {
            fail(
                "rss.dwell",
                format!(
                    "{:?} is shorter than interval ({:?}): a step needs at least one sample to be judged",
                    self.rss.dwell, self.interval
                ),
            );
        }
        let entries = self.rfs.sock_flow_entries;
        if !entries.is_power_of_two() || entries > 1 << 29 {
            fail(
                "rfs.sock_flow_entries",
                format!(
                    "{entries} must be a power of two from 1 to 536870912 (the kernel's limit)"
                ),
            );
        }
        for (name, device) in &self.devices {
            let key = format!("devices.{name}");
            if name.is_empty() || name.trim_end_matches('*').contains('*') {
                fail(
                    &key,
                    "a device key is a name, or a prefix followed by one `*`".to_string(),
                );
            }
            let mode = device.rps.unwrap_or(self.rps.mode);
            match (&device.rps_cpus, mode) {
                (None, RpsMode::Static) => fail(
                    &format!("{key}.rps"),
                    "`rps: static` needs `rps_cpus`".to_string(),
                ),
                (Some(cpus), RpsMode::Static) if cpus.is_empty() => fail(
                    &format!("{key}.rps_cpus"),
                    "is empty: use `rps: off` to leave RPS off".to_string(),
                ),
                (Some(_), RpsMode::Off | RpsMode::Auto) => fail(
                    &format!("{key}.rps_cpus"),
                    "applies only with `rps: static`".to_string(),
                ),
                _ => {}
            }
        }
        errors
    }

    /// Checks against the machine: every CPU named must exist, and some CPU must be left
    /// for steering. Lines are not known here; [`check_config_for`] adds them.
    pub fn validate(&self, topology: &Topology) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let possible = &topology.possible;
        let mut unknown = |key: String, cpus: &CpuSet| {
            let missing = cpus.difference(possible);
            if !missing.is_empty() {
                errors.push(ConfigError::new(
                    key,
                    format!(
                        "CPU {} does not exist (this machine's CPUs are {})",
                        missing.to_list(),
                        possible.to_list()
                    ),
                ));
            }
        };
        unknown("cpus.banned".to_string(), &self.cpus.banned);
        unknown("cpus.reserved".to_string(), &self.cpus.reserved);
        for (name, device) in &self.devices {
            if let Some(cpus) = &device.rps_cpus {
                unknown(format!("devices.{name}.rps_cpus"), cpus);
            }
        }
        let left = topology
            .online
            .difference(&self.cpus.banned)
            .difference(&self.cpus.reserved)
            .difference(&topology.set_aside());
        if left.is_empty() {
            errors.push(ConfigError::new(
                "cpus.banned",
                format!(
                    "with cpus.banned, cpus.reserved, isolated (isolcpus= or cgroup partitions) and nohz_full CPUs left out, no online CPU (of {}) remains for steering",
                    topology.online.to_list()
                ),
            ));
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::topology::{Cpu, Node};

    #[test]
    fn the_top_level_keys_are_the_fields_of_config() {
        let yaml = yaml_serde::to_value(Config::default()).unwrap();
        let mut fields: Vec<String> = yaml
            .as_mapping()
            .unwrap()
            .keys()
            .map(|key| key.as_str().unwrap().to_string())
            .collect();
        let mut keys: Vec<String> = TOP_LEVEL_KEYS.iter().map(|k| k.to_string()).collect();
        fields.sort();
        keys.sort();
        assert_eq!(keys, fields);
    }

    fn machine(n: u32) -> Topology {
        let all = CpuSet::first_n(n);
        Topology {
            nr_cpu_ids: n,
            possible: all.clone(),
            present: all.clone(),
            online: all.clone(),
            online_from_file: true,
            isolated: CpuSet::new(),
            nohz_full: CpuSet::new(),
            isolated_partitions: CpuSet::new(),
            cpus: (0..n)
                .map(|id| Cpu {
                    id,
                    online: true,
                    core: Some(id),
                    package: Some(0),
                    node: Some(0),
                    llc: Some(0),
                    siblings: [id].into_iter().collect(),
                    isolated: false,
                    nohz_full: false,
                })
                .collect(),
            nodes: vec![Node { id: 0, cpus: all }],
        }
    }

    #[test]
    fn reads_durations_and_cpulists() {
        let config = check_config(
            "interval: 500ms\nhysteresis:\n  irq_dwell: 1m 30s\ncpus:\n  banned: 0-2,5\n  reserved: 7\n",
        )
        .unwrap();
        assert_eq!(config.interval, Duration::from_millis(500));
        assert_eq!(config.hysteresis.irq_dwell, Duration::from_secs(90));
        assert_eq!(config.cpus.banned.to_list(), "0-2,5");
        assert_eq!(config.cpus.reserved.to_list(), "7");
    }

    #[test]
    fn an_unknown_key_names_itself_and_its_line() {
        let errors = check_config("interval: 1s\nwatermarks:\n  hihg: 0.5\n").unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "watermarks.hihg");
        assert_eq!(errors[0].line, Some(3));
        assert!(errors[0].message.contains("unknown field"), "{}", errors[0]);

        let errors = check_config("# top\nintervall: 1s\n").unwrap_err();
        assert_eq!(errors[0].key, "intervall");
        assert_eq!(errors[0].line, Some(2));
    }

    #[test]
    fn every_broken_section_is_reported() {
        let text = "\
interval: 30
watermarks:
  high: lots
cpus:
  banned: 3-1
numa: nearby
bogus: 1
";
        let errors = check_config(text).unwrap_err();
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        for key in [
            "bogus",
            "interval",
            "watermarks.high",
            "cpus.banned",
            "numa",
        ] {
            assert!(keys.contains(&key), "{key} missing from {shown:#?}");
        }
        for error in &errors {
            assert!(error.line.is_some(), "{error}");
        }
        let interval = errors.iter().find(|e| e.key == "interval").unwrap();
        assert_eq!(interval.line, Some(1));
        assert!(interval.message.contains("30s"), "{interval}");
        let banned = errors.iter().find(|e| e.key == "cpus.banned").unwrap();
        assert_eq!(banned.line, Some(5));
        assert!(banned.message.contains("3-1"), "{banned}");
    }

    #[test]
    fn a_syntax_error_has_a_line() {
        let errors = check_config("cpus:\n  banned: [1\nrps: {\n").unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].line.is_some(), "{}", errors[0]);
    }

    #[test]
    fn out_of_range_values_name_key_and_line() {
        let text = "\
watermarks:
  high: 0.5
  low: 0.7
hysteresis:
  confirm_ticks: 0
  min_gain: 1.5
rfs:
  sock_flow_entries: 1000
devices:
  eth0:
    rps: static
  eth1:
    rps_cpus: 1-3
";
        let errors = check_config(text).unwrap_err();
        let found: Vec<(String, Option<usize>)> =
            errors.iter().map(|e| (e.key.clone(), e.line)).collect();
        for expected in [
            ("watermarks.low", 3),
            ("hysteresis.confirm_ticks", 5),
            ("hysteresis.min_gain", 6),
            ("rfs.sock_flow_entries", 8),
            ("devices.eth0.rps", 11),
            ("devices.eth1.rps_cpus", 13),
        ] {
            assert!(
                found.contains(&(expected.0.to_string(), Some(expected.1))),
                "{expected:?} not in {found:?}"
            );
        }
    }

    #[test]
    fn a_banned_cpu_that_does_not_exist_names_the_key() {
        let text = "cpus:\n  banned: 2,40-41\n";
        assert!(check_config(text).is_ok());
        let errors = check_config_for(text, &machine(16)).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "cpus.banned");
        assert_eq!(errors[0].line, Some(2));
        assert!(
            errors[0].to_string().contains("CPU 40-41 does not exist"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn machine_checks_still_run_on_the_sections_that_read() {
        let text = "interval: 30\ncpus:\n  banned: 77\nwatermarks:\n  hgh: 1\n";
        let errors = check_config_for(text, &machine(16)).unwrap_err();
        let found: Vec<(&str, Option<usize>)> =
            errors.iter().map(|e| (e.key.as_str(), e.line)).collect();
        assert_eq!(
            found,
            vec![
                ("interval", Some(1)),
                ("cpus.banned", Some(3)),
                ("watermarks.hgh", Some(5))
            ],
            "{errors:#?}"
        );
    }

    #[test]
    fn banning_everything_is_an_error() {
        let errors = check_config_for("cpus:\n  banned: 0-3\n", &machine(4)).unwrap_err();
        assert!(errors[0].message.contains("no online CPU"), "{}", errors[0]);
    }
}
