//! `CpuSet`: the one type for sets of CPU numbers.
//!
//! The kernel speaks about CPU sets in two text forms, and steerd reads and writes both:
//!
//! * **hex bitmaps** (`smp_affinity`, `rps_cpus`, `xps_cpus`, `local_cpus`,
//!   `flow_limit_cpu_bitmap`): comma-separated 32-bit words, most significant word first,
//!   e.g. `00000000,000000ff`. The kernel prints exactly `nr_cpu_ids` bits and rejects a
//!   *wider* input with `EOVERFLOW`, even when the extra words are all zero, so formatting
//!   for a write always takes the kernel's width ([`CpuSet::to_mask`]).
//! * **cpulists** (`smp_affinity_list`, `online`, `local_cpulist`): `0-3,8,10-11`.
//!
//! Both parsers return an error quoting the input rather than guessing.

use std::fmt;

use serde::{Serialize, Serializer};

/// A set of CPU numbers, stored as a growable bitmap of 64-bit words.
///
/// Equality ignores trailing zero words, so a set parsed from a 256-bit mask equals the
/// same set parsed from a cpulist.
#[derive(Clone, Default)]
pub struct CpuSet {
    words: Vec<u64>,
}

/// A CPU-set text that could not be parsed, or a set that does not fit a width.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    #[error("invalid CPU bitmap {input:?}: {reason}")]
    BadMask { input: String, reason: &'static str },
    #[error("invalid CPU list {input:?}: {reason}")]
    BadList { input: String, reason: &'static str },
    #[error("CPU {cpu} does not fit a mask of {nr_cpu_ids} CPUs")]
    TooWide { cpu: u32, nr_cpu_ids: u32 },
}

/// The largest CPU number steerd accepts in any text form. Linux's `NR_CPUS` tops out at
/// 8192 today; allowing a little more keeps future kernels working while a stray
/// `0-4294967295` cannot make us allocate gigabytes.
pub const MAX_CPUS: u32 = 1 << 16;

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// CPUs `0..n`.
    pub fn first_n(n: u32) -> Self {
        let mut set = Self::new();
        for cpu in 0..n {
            set.insert(cpu);
        }
        set
    }

    /// Adds a CPU.
    pub fn insert(&mut self, cpu: u32) {
        let (word, bit) = (cpu as usize / 64, cpu % 64);
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << bit;
    }

    /// Removes a CPU.
    pub fn remove(&mut self, cpu: u32) {
        if let Some(word) = self.words.get_mut(cpu as usize / 64) {
            *word &= !(1 << (cpu % 64));
        }
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.words
            .get(cpu as usize / 64)
            .is_some_and(|word| word & (1 << (cpu % 64)) != 0)
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set has no CPU.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The lowest CPU, if any.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// The highest CPU, if any.
    pub fn last(&self) -> Option<u32> {
        let (index, word) = self
            .words
            .iter()
            .enumerate()
            .rev()
            .find(|(_, w)| **w != 0)?;
        Some(index as u32 * 64 + 63 - word.leading_zeros())
    }

    /// CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(index, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                Some(index as u32 * 64 + bit)
            })
        })
    }

    /// CPUs in either set.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let len = self.words.len().max(other.words.len());
        let words = (0..len).map(|i| self.word(i) | other.word(i)).collect();
        CpuSet { words }
    }

    /// CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let len = self.words.len().min(other.words.len());
        let words = (0..len).map(|i| self.word(i) & other.word(i)).collect();
        CpuSet { words }
    }

    /// CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let words = (0..self.words.len())
            .map(|i| self.word(i) & !other.word(i))
            .collect();
        CpuSet { words }
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        (0..self.words.len()).all(|i| self.word(i) & !other.word(i) == 0)
    }

    /// Whether the sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        (0..self.words.len().min(other.words.len())).any(|i| self.word(i) & other.word(i) != 0)
    }

    fn word(&self, index: usize) -> u64 {
        self.words.get(index).copied().unwrap_or(0)
    }

    /// Parses a kernel hex bitmap such as `3`, `ff`, `00000000,000000ff`.
    ///
    /// Surrounding whitespace (the trailing newline of a sysfs read) is ignored. Each
    /// comma-separated group holds at most 32 bits (8 hex digits), as in the kernel's
    /// `bitmap_parse()`.
    pub fn parse_mask(text: &str) -> Result<CpuSet, CpuSetError> {
        let input = text.trim();
        let bad = |reason| CpuSetError::BadMask {
            input: input.to_string(),
            reason,
        };
        if input.is_empty() {
            return Err(bad("empty"));
        }
        let groups: Vec<&str> = input.split(',').collect();
        if groups.len() as u64 * 32 > u64::from(MAX_CPUS) {
            return Err(bad("wider than any kernel's CPU count"));
        }
        let mut set = CpuSet::new();
        for (position, group) in groups.iter().rev().enumerate() {
            if group.is_empty() {
                return Err(bad("empty group between commas"));
            }
            if group.len() > 8 {
                return Err(bad("a comma-separated group has more than 8 hex digits"));
            }
            let value = u32::from_str_radix(group, 16).map_err(|_| bad("not a hex number"))?;
            let base = position as u32 * 32;
            let mut rest = value;
            while rest != 0 {
                set.insert(base + rest.trailing_zeros());
                rest &= rest - 1;
            }
        }
        Ok(set)
    }

    /// Parses a cpulist such as `0-3,8,10-11` (also `0-7:2`, the kernel's stride form).
    /// An empty (or all-whitespace) list is the empty set, as the kernel prints it.
    pub fn parse_list(text: &str) -> Result<CpuSet, CpuSetError> {
        let input = text.trim();
        let bad = |reason| CpuSetError::BadList {
            input: input.to_string(),
            reason,
        };
        let mut set = CpuSet::new();
        if input.is_empty() {
            return Ok(set);
        }
        for item in input.split(',') {
            let item = item.trim();
            let (range, stride) = match item.split_once(':') {
                Some((range, stride)) => {
                    let stride: u32 = stride.parse().map_err(|_| bad("bad stride"))?;
                    if stride == 0 {
                        return Err(bad("stride of zero"));
                    }
                    (range, stride)
                }
                None => (item, 1),
            };
            let number = |s: &str| -> Result<u32, CpuSetError> {
                let cpu: u32 = s.trim().parse().map_err(|_| bad("not a CPU number"))?;
                if cpu >= MAX_CPUS {
                    return Err(bad("CPU number too large"));
                }
                Ok(cpu)
            };
            let (low, high) = match range.split_once('-') {
                Some((low, high)) => (number(low)?, number(high)?),
                None => {
                    let cpu = number(range)?;
                    (cpu, cpu)
                }
            };
            if low > high {
                return Err(bad("range runs backwards"));
            }
            for cpu in (low..=high).step_by(stride as usize) {
                set.insert(cpu);
            }
        }
        Ok(set)
    }

    /// Formats as a hex bitmap of exactly `nr_cpu_ids` bits, the way the kernel prints it
    /// and the widest form it accepts: the most significant group has just enough digits
    /// for the bits that remain, the others 8 digits each. A CPU at or above `nr_cpu_ids`
    /// is an error, because the kernel would refuse the write with `EOVERFLOW`.
    pub fn to_mask(&self, nr_cpu_ids: u32) -> Result<String, CpuSetError> {
        if let Some(cpu) = self.last().filter(|&cpu| cpu >= nr_cpu_ids) {
            return Err(CpuSetError::TooWide { cpu, nr_cpu_ids });
        }
        let nr_bits = nr_cpu_ids.max(1);
        let groups = nr_bits.div_ceil(32);
        let top_bits = nr_bits - (groups - 1) * 32;
        let mut out = String::with_capacity(groups as usize * 9);
        for group in (0..groups).rev() {
            let word = (self.word(group as usize / 2) >> ((group % 2) * 32)) as u32;
            if group == groups - 1 {
                let digits = top_bits.div_ceil(4) as usize;
                out.push_str(&format!("{word:0digits$x}"));
            } else {
                out.push_str(&format!(",{word:08x}"));
            }
        }
        Ok(out)
    }

    /// Formats as a cpulist, `0-3,8,10-11`; the empty set is the empty string.
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut cpus = self.iter().peekable();
        while let Some(start) = cpus.next() {
            let mut end = start;
            while cpus.peek() == Some(&(end + 1)) {
                end += 1;
                cpus.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }
}

impl PartialEq for CpuSet {
    fn eq(&self, other: &Self) -> bool {
        let len = self.words.len().max(other.words.len());
        (0..len).all(|i| self.word(i) == other.word(i))
    }
}

impl Eq for CpuSet {}

impl std::hash::Hash for CpuSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let used = self
            .words
            .iter()
            .rposition(|&w| w != 0)
            .map_or(0, |i| i + 1);
        self.words[..used].hash(state);
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut set = CpuSet::new();
        for cpu in iter {
            set.insert(cpu);
        }
        set
    }
}

impl fmt::Display for CpuSet {
    /// Cpulist form, or `-` for the empty set so tables stay readable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            f.write_str("-")
        } else {
            f.write_str(&self.to_list())
        }
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet[{}]", self.to_list())
    }
}

impl Serialize for CpuSet {
    /// CPU sets are arrays of CPU numbers in every JSON steerd prints.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for CpuSet {
    /// An array of CPU numbers, each below [`MAX_CPUS`]: the set is a bitmap, so one huge
    /// number (`[4294967295]` in a corrupt state file) would otherwise allocate 512 MiB.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let cpus = Vec::<u32>::deserialize(deserializer)?;
        if let Some(&cpu) = cpus.iter().find(|&&cpu| cpu >= MAX_CPUS) {
            return Err(serde::de::Error::custom(format!(
                "CPU {cpu} is not below {MAX_CPUS}, the most steerd accepts"
            )));
        }
        Ok(cpus.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Fuzzing finding (state file): `[4294967295]` deserialized into a bitmap of 2^32
    /// bits, a 512 MiB allocation. Now it is an error naming the CPU.
    #[test]
    fn regression_deserialize_rejects_a_cpu_beyond_max_cpus() {
        let err = serde_json::from_str::<CpuSet>("[1, 4294967295]").unwrap_err();
        assert!(err.to_string().contains("4294967295"), "{err}");
        let set: CpuSet = serde_json::from_str("[0, 65535]").unwrap();
        assert_eq!(set.to_list(), "0,65535");
        assert!(serde_json::from_str::<CpuSet>("[65536]").is_err());
    }

    #[test]
    fn parses_kernel_masks() {
        assert_eq!(CpuSet::parse_mask("3\n").unwrap().to_list(), "0-1");
        assert_eq!(
            CpuSet::parse_mask("00000000,000000ff").unwrap().to_list(),
            "0-7"
        );
        assert_eq!(
            CpuSet::parse_mask("00000001,00000000").unwrap().to_list(),
            "32"
        );
        assert!(CpuSet::parse_mask("0").unwrap().is_empty());
        assert_eq!(
            CpuSet::parse_mask("ffffffff,ffffffff,00000000,00000000,ffffffff,ffffffff")
                .unwrap()
                .to_list(),
            "0-63,128-191"
        );
    }

    #[test]
    fn rejects_bad_masks_quoting_them() {
        for bad in ["", "xyz", "1,,2", "123456789", "0x3", ","] {
            let err = CpuSet::parse_mask(bad).unwrap_err();
            assert!(
                err.to_string().contains(&format!("{:?}", bad.trim())),
                "{err}"
            );
        }
    }

    #[test]
    fn parses_cpulists() {
        assert_eq!(CpuSet::parse_list("0-3,8,10-11").unwrap().len(), 7);
        assert_eq!(CpuSet::parse_list("0-7:2").unwrap().to_list(), "0,2,4,6");
        assert!(CpuSet::parse_list("\n").unwrap().is_empty());
        for bad in ["3-1", "a", "1-", "0-7:0", "99999999"] {
            assert!(CpuSet::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_in_the_kernels_width() {
        let both: CpuSet = [0, 1].into_iter().collect();
        assert_eq!(both.to_mask(2).unwrap(), "3");
        assert_eq!(CpuSet::new().to_mask(2).unwrap(), "0");
        assert_eq!(CpuSet::new().to_mask(8).unwrap(), "00");
        assert_eq!(
            CpuSet::new().to_mask(256).unwrap(),
            "00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000"
        );
        let cpu32: CpuSet = [32].into_iter().collect();
        assert_eq!(cpu32.to_mask(36).unwrap(), "1,00000000");
        assert_eq!(
            both.to_mask(1).unwrap_err(),
            CpuSetError::TooWide {
                cpu: 1,
                nr_cpu_ids: 1
            }
        );
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::parse_list("0-7").unwrap();
        let b = CpuSet::parse_list("4-11").unwrap();
        assert_eq!(a.intersection(&b).to_list(), "4-7");
        assert_eq!(a.union(&b).to_list(), "0-11");
        assert_eq!(a.difference(&b).to_list(), "0-3");
        assert!(a.intersects(&b));
        assert!(!a.is_subset(&b));
        assert_eq!(a.last(), Some(7));
        assert_eq!(b.first(), Some(4));
        let mut grown = CpuSet::parse_list("0").unwrap();
        grown.insert(200);
        grown.remove(200);
        assert_eq!(grown, CpuSet::parse_list("0").unwrap());
    }

    fn arbitrary_set() -> impl Strategy<Value = (u32, CpuSet)> {
        (1u32..=8192).prop_flat_map(|nr| {
            proptest::collection::vec(0..nr, 0..64)
                .prop_map(move |cpus| (nr, cpus.into_iter().collect::<CpuSet>()))
        })
    }

    proptest! {
        #[test]
        fn mask_round_trips((nr, set) in arbitrary_set()) {
            let text = set.to_mask(nr).unwrap();
            prop_assert_eq!(text.split(',').count() as u32, nr.div_ceil(32));
            prop_assert_eq!(CpuSet::parse_mask(&text).unwrap(), set);
        }

        #[test]
        fn list_round_trips((_nr, set) in arbitrary_set()) {
            prop_assert_eq!(CpuSet::parse_list(&set.to_list()).unwrap(), set);
        }

        #[test]
        fn garbage_never_panics(text in ".{0,40}") {
            let _ = CpuSet::parse_mask(&text);
            let _ = CpuSet::parse_list(&text);
        }
    }
}
