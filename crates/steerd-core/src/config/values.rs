//! How config values that are not plain numbers are written: durations (`30s`, `1m 30s`,
//! via humantime) and CPU lists (`0-3,8`, the kernel's cpulist form).

/// Durations are strings with a unit; a bare number is refused because `interval: 1` is
/// ambiguous (seconds? ticks?).
pub mod duration {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&humantime::format_duration(*value).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        deserializer.deserialize_any(DurationVisitor)
    }

    struct DurationVisitor;

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a duration with a unit, like \"500ms\", \"30s\" or \"2m\"")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
            humantime::parse_duration(text.trim())
                .map_err(|err| E::custom(format!("invalid duration {text:?}: {err}")))
        }

        fn visit_u64<E: de::Error>(self, value: u64) -> Result<Duration, E> {
            Err(E::custom(format!(
                "a duration needs a unit: write \"{value}s\" or \"{value}ms\""
            )))
        }

        fn visit_i64<E: de::Error>(self, value: i64) -> Result<Duration, E> {
            Err(E::custom(format!(
                "a duration needs a unit and cannot be negative, got {value}"
            )))
        }

        fn visit_f64<E: de::Error>(self, value: f64) -> Result<Duration, E> {
            Err(E::custom(format!(
                "a duration needs a unit: write \"{value}s\""
            )))
        }
    }
}

/// A CPU list: a cpulist string (`"0-3,8"`), a single CPU number, or empty (`""`, `~`).
pub mod cpulist {
    use std::fmt;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    use crate::cpuset::CpuSet;

    pub fn serialize<S: Serializer>(value: &CpuSet, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&value.to_list())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<CpuSet, D::Error> {
        deserializer.deserialize_any(CpuListVisitor)
    }

    pub(super) struct CpuListVisitor;

    impl Visitor<'_> for CpuListVisitor {
        type Value = CpuSet;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a CPU list like \"0-3,8\"")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<CpuSet, E> {
            CpuSet::parse_list(text).map_err(E::custom)
        }

        fn visit_u64<E: de::Error>(self, value: u64) -> Result<CpuSet, E> {
            self.visit_str(&value.to_string())
        }

        fn visit_i64<E: de::Error>(self, value: i64) -> Result<CpuSet, E> {
            self.visit_str(&value.to_string())
        }

        fn visit_unit<E: de::Error>(self) -> Result<CpuSet, E> {
            Ok(CpuSet::new())
        }
    }
}

/// An optional CPU list: absent or `~` is `None`.
pub mod optional_cpulist {
    use std::fmt;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    use crate::cpuset::CpuSet;

    pub fn serialize<S: Serializer>(
        value: &Option<CpuSet>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(set) => serializer.serialize_str(&set.to_list()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<CpuSet>, D::Error> {
        deserializer.deserialize_option(OptionalVisitor)
    }

    struct OptionalVisitor;

    impl<'de> Visitor<'de> for OptionalVisitor {
        type Value = Option<CpuSet>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a CPU list like \"0-3,8\"")
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<Self::Value, D::Error> {
            super::cpulist::deserialize(deserializer).map(Some)
        }
    }
}
