//! `proc/softirqs`: per-CPU counts of each softirq type (HI, TIMER, NET_TX, NET_RX, …).
//!
//! Read at discovery and by `inspect`, not every tick: these are *invocation counts*, not
//! work (docs/kernel.md, "Softnet counters": with RPS the interrupting CPU still raises
//! NET_RX once per batch), so the load signal comes from softnet `processed` and
//! `proc/stat` time instead.
//!
//! The header names one `CPUn` column per *possible* CPU (`for_each_possible_cpu`), so it
//! may be wider than `proc/interrupts`' header (online CPUs only) and list CPUs that are
//! offline (their counts stay 0). Every row must have exactly one count per header column.
//! The kernel's counters are `unsigned int` and wrap at 2^32; they are stored as `u64`.

use std::path::Path;

use crate::error::Error;
use crate::kernel::procfs::stat::{Fields, lossy, parse_decimal};
use crate::root::Root;

/// `proc/softirqs` relative to a [`Root`].
pub const SOFTIRQS_PATH: &str = "proc/softirqs";

/// The whole of `proc/softirqs`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Softirqs {
    /// The CPU of each column, from the header (`CPU0 CPU1 …`).
    pub cpus: Vec<u32>,
    /// One row per softirq type, in file order.
    pub rows: Vec<SoftirqRow>,
}

/// One line: a softirq type and its count on each CPU (same order as [`Softirqs::cpus`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoftirqRow {
    /// `NET_RX`, `TIMER`, … (without the colon).
    pub name: String,
    pub counts: Vec<u64>,
}

impl Softirqs {
    /// The per-CPU counts of the row called `name` (e.g. `"NET_RX"`).
    pub fn row(&self, name: &str) -> Option<&[u64]> {
        self.rows
            .iter()
            .find(|row| row.name == name)
            .map(|row| row.counts.as_slice())
    }

    /// Per-CPU NET_RX counts (column order of [`Softirqs::cpus`]).
    pub fn net_rx(&self) -> Option<&[u64]> {
        self.row("NET_RX")
    }

    /// Per-CPU NET_TX counts (column order of [`Softirqs::cpus`]).
    pub fn net_tx(&self) -> Option<&[u64]> {
        self.row("NET_TX")
    }

    /// The count of softirq `name` on CPU `cpu`, if both are in the file.
    pub fn count(&self, name: &str, cpu: u32) -> Option<u64> {
        let column = self.cpus.iter().position(|&c| c == cpu)?;
        self.row(name)?.get(column).copied()
    }
}

/// Reads and parses `proc/softirqs` under `root`.
pub fn read_softirqs(root: &Root) -> Result<Softirqs, Error> {
    let text = root.read(SOFTIRQS_PATH)?;
    parse_softirqs(text.as_bytes(), &root.path(SOFTIRQS_PATH))
}

/// Parses the bytes of a `proc/softirqs`. `path` only names the file in errors.
///
/// Errors (naming the file and line): an empty file, a header field that is not `CPUn`, a
/// header without rows, a row without a `NAME:` label, a row whose count of numbers differs from the header's, a
/// field that is not a decimal number or does not fit in 64 bits.
pub fn parse_softirqs(bytes: &[u8], path: &Path) -> Result<Softirqs, Error> {
    let mut lines = bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(index, line)| (index + 1, line))
        .filter(|(_, line)| Fields::new(line).next().is_some());
    let Some((header_line, header)) = lines.next() else {
        return Err(Error::parse(path, 0, "empty file"));
    };
    let mut softirqs = Softirqs::default();
    for field in Fields::new(header) {
        let cpu = field
            .strip_prefix(b"CPU")
            .and_then(|digits| parse_decimal(digits).ok())
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                Error::parse(
                    path,
                    header_line,
                    format!("header field `{}` is not CPUn", lossy(field)),
                )
            })?;
        // Callers index per-CPU tables by these ids, as for every other CPU id read.
        if cpu >= crate::cpuset::MAX_CPUS {
            return Err(Error::parse(
                path,
                header_line,
                format!(
                    "CPU id {cpu} is not below {}, the most steerd accepts",
                    crate::cpuset::MAX_CPUS
                ),
            ));
        }
        softirqs.cpus.push(cpu);
    }
    for (line_number, line) in lines {
        let mut fields = Fields::new(line);
        let label = fields.next().unwrap_or_default();
        let name = label
            .strip_suffix(b":")
            .filter(|name| !name.is_empty())
            .ok_or_else(|| {
                Error::parse(
                    path,
                    line_number,
                    format!("`{}` is not a NAME: label", lossy(label)),
                )
            })?;
        let mut counts = Vec::with_capacity(softirqs.cpus.len());
        for field in fields {
            let count = parse_decimal(field)
                .map_err(|e| Error::parse(path, line_number, e.describe(field)))?;
            counts.push(count);
        }
        if counts.len() != softirqs.cpus.len() {
            return Err(Error::parse(
                path,
                line_number,
                format!(
                    "{} has {} counts but the header names {} CPUs",
                    lossy(name),
                    counts.len(),
                    softirqs.cpus.len()
                ),
            ));
        }
        softirqs.rows.push(SoftirqRow {
            name: String::from_utf8_lossy(name).into_owned(),
            counts,
        });
    }
    if softirqs.rows.is_empty() {
        return Err(Error::parse(path, header_line, "a header but no rows"));
    }
    Ok(softirqs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Softirqs, Error> {
        parse_softirqs(text.as_bytes(), Path::new("softirqs"))
    }

    #[test]
    fn header_gives_the_columns() {
        let s = parse(
            "      CPU0  CPU1  CPU3   \n\
             \x20  HI:  1 2 3\n\
             NET_RX:  10 0 30\n\
             NET_TX:  4 5 6\n",
        )
        .unwrap();
        assert_eq!(s.cpus, [0, 1, 3]);
        assert_eq!(s.net_rx(), Some(&[10, 0, 30][..]));
        assert_eq!(s.net_tx(), Some(&[4, 5, 6][..]));
        assert_eq!(s.count("NET_RX", 3), Some(30));
        assert_eq!(s.count("NET_RX", 2), None);
        assert_eq!(s.row("BLOCK"), None);
    }

    #[test]
    fn mismatches_and_garbage_are_errors() {
        let err = parse("CPU0 CPU1\nHI: 1\n").unwrap_err().to_string();
        assert_eq!(
            err,
            "softirqs:2: HI has 1 counts but the header names 2 CPUs"
        );
        let err = parse("CPU0 CPU1\nHI: 1 2 3\n").unwrap_err().to_string();
        assert_eq!(
            err,
            "softirqs:2: HI has 3 counts but the header names 2 CPUs"
        );
        let err = parse("CPU0 X1\n").unwrap_err().to_string();
        assert_eq!(err, "softirqs:1: header field `X1` is not CPUn");
        let err = parse("CPU0\nHI 1\n").unwrap_err().to_string();
        assert_eq!(err, "softirqs:2: `HI` is not a NAME: label");
        let err = parse("CPU0\nHI: 0x1\n").unwrap_err().to_string();
        assert_eq!(err, "softirqs:2: `0x1` is not a decimal number");
        let err = parse(" \n").unwrap_err().to_string();
        assert_eq!(err, "softirqs:0: empty file");
        let err = parse("   CPU0\n").unwrap_err().to_string();
        assert_eq!(err, "softirqs:1: a header but no rows");
    }
}
