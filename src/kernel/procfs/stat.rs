//! `proc/stat`: per-CPU time (including `irq` and `softirq`) and every IRQ's total count.
//!
//! This file is read on every tick, so the parser works in place on the bytes the kernel
//! gave us: no `String`, no `Vec` per line, and the caller's output vectors are cleared and
//! refilled (their capacity survives from one tick to the next). The decimal number parser
//! is hand-written for the same reason: `str::parse` needs UTF-8 validation first and a
//! generic tokenizer would cost more than the work itself; the `intr` line alone holds one
//! number per IRQ (thousands on a big machine).
//!
//! The lines used:
//!
//! * `cpuN user nice system idle iowait irq softirq steal guest guest_nice` in USER_HZ
//!   ticks, one per online CPU. Kernels before 2.6.11 print fewer fields; missing ones are
//!   0. At least `user nice system idle` must be there. Extra (future) fields must still
//!   be numbers. The aggregate `cpu` line is skipped.
//! * `intr TOTAL C0 C1 C2 …`: the grand total, then one count per IRQ number from 0.
//!
//! Every other line (`ctxt`, `btime`, `softirq`, …) is skipped.

use std::path::Path;

use crate::error::Error;
use crate::model::snapshot::CpuTimes;
use crate::root::Root;

/// `proc/stat` relative to a [`Root`].
pub const STAT_PATH: &str = "proc/stat";

/// The counters of one `proc/stat`, for callers that read it once (the tick sampler
/// parses straight into a [`crate::model::snapshot::Snapshot`] instead).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stat {
    /// One entry per `cpuN` line, in file order (ascending CPU id on real kernels).
    pub cpu_times: Vec<CpuTimes>,
    /// The `intr` line without its grand total: index = IRQ number.
    pub irq_totals: Vec<u64>,
}

/// Reads and parses `proc/stat` under `root`.
pub fn read_stat(root: &Root) -> Result<Stat, Error> {
    let text = root.read(STAT_PATH)?;
    let mut stat = Stat::default();
    parse_stat(
        text.as_bytes(),
        &root.path(STAT_PATH),
        &mut stat.cpu_times,
        &mut stat.irq_totals,
    )?;
    Ok(stat)
}

/// Parses the bytes of a `proc/stat` into `cpu_times` and `irq_totals`.
///
/// Both vectors are cleared first and reused, so a caller that keeps them between ticks
/// allocates only when the machine grows (more CPUs, more IRQs). `path` is used only to
/// name the file in errors. On error the vectors hold whatever was parsed so far.
///
/// Errors: an empty file, no `cpuN` line, no `intr` line, a `cpuN` line with fewer than
/// four counters, a field that is not a decimal number, or a number above `u64::MAX` —
/// each naming the file and the line (from 1).
pub fn parse_stat(
    bytes: &[u8],
    path: &Path,
    cpu_times: &mut Vec<CpuTimes>,
    irq_totals: &mut Vec<u64>,
) -> Result<(), Error> {
    cpu_times.clear();
    irq_totals.clear();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::parse(path, 0, "empty file"));
    }
    let mut seen_intr = false;
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_number = index + 1;
        let mut fields = Fields::new(line);
        let Some(label) = fields.next() else {
            continue;
        };
        if let Some(digits) = label.strip_prefix(b"cpu") {
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                continue; // the aggregate `cpu` line, or a key we do not know
            }
            let times = parse_cpu_line(digits, fields)
                .map_err(|reason| Error::parse(path, line_number, reason))?;
            cpu_times.push(times);
        } else if label == b"intr" {
            parse_intr_line(fields, irq_totals)
                .map_err(|reason| Error::parse(path, line_number, reason))?;
            seen_intr = true;
        }
    }
    if cpu_times.is_empty() {
        return Err(Error::parse(path, 0, "no cpuN lines"));
    }
    if !seen_intr {
        return Err(Error::parse(path, 0, "no intr line"));
    }
    Ok(())
}

/// The counters after `cpuN`; `digits` is the `N`.
fn parse_cpu_line(digits: &[u8], fields: Fields<'_>) -> Result<CpuTimes, String> {
    let cpu = parse_decimal(digits)
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("bad CPU number in `cpu{}`", lossy(digits)))?;
    let mut values = [0u64; 8];
    let mut count = 0usize;
    for field in fields {
        let value = parse_decimal(field).map_err(|e| e.describe(field))?;
        if let Some(slot) = values.get_mut(count) {
            *slot = value;
        }
        count += 1;
    }
    if count < 4 {
        return Err(format!(
            "cpu{cpu} has {count} counters, expected at least 4 (user nice system idle)"
        ));
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] = values;
    Ok(CpuTimes {
        cpu,
        user,
        nice,
        system,
        idle,
        iowait,
        irq,
        softirq,
        steal,
    })
}

/// The numbers after `intr`: the grand total (checked, then dropped), then per-IRQ counts.
fn parse_intr_line(mut fields: Fields<'_>, irq_totals: &mut Vec<u64>) -> Result<(), String> {
    irq_totals.clear();
    let total = fields
        .next()
        .ok_or_else(|| "intr line has no total".to_string())?;
    parse_decimal(total).map_err(|e| e.describe(total))?;
    for field in fields {
        irq_totals.push(parse_decimal(field).map_err(|e| e.describe(field))?);
    }
    Ok(())
}

/// Why a field is not a number. Kept small and `Copy` so the happy path carries no
/// `String`; the message is built only when an error is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberError {
    Empty,
    NotDecimal,
    Overflow,
}

impl NumberError {
    /// A message quoting the field.
    pub(crate) fn describe(self, field: &[u8]) -> String {
        match self {
            NumberError::Empty => "empty number".to_string(),
            NumberError::NotDecimal => format!("`{}` is not a decimal number", lossy(field)),
            NumberError::Overflow => format!("`{}` does not fit in 64 bits", lossy(field)),
        }
    }
}

/// Parses an unsigned decimal number (ASCII digits only, no sign) into a `u64`.
///
/// Up to 19 digits cannot overflow a `u64`, so that common case runs without checked
/// arithmetic; longer numbers (leading zeros included) take the checked path.
#[inline]
pub(crate) fn parse_decimal(field: &[u8]) -> Result<u64, NumberError> {
    if field.is_empty() {
        return Err(NumberError::Empty);
    }
    if field.len() <= 19 {
        let mut value = 0u64;
        for &b in field {
            let digit = b.wrapping_sub(b'0');
            if digit > 9 {
                return Err(NumberError::NotDecimal);
            }
            value = value * 10 + u64::from(digit);
        }
        return Ok(value);
    }
    let mut value = 0u64;
    let mut overflow = false;
    for &b in field {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return Err(NumberError::NotDecimal);
        }
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
    }
    if overflow {
        Err(NumberError::Overflow)
    } else {
        Ok(value)
    }
}

/// The whitespace-separated fields of one line, as byte slices into it (no allocation).
#[derive(Debug, Clone)]
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    pub(crate) fn new(line: &'a [u8]) -> Self {
        Fields { rest: line }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|b| !is_blank(*b))?;
        let rest = self.rest.get(start..).unwrap_or_default();
        let len = rest.iter().position(|b| is_blank(*b)).unwrap_or(rest.len());
        let (field, after) = rest.split_at(len);
        self.rest = after;
        Some(field)
    }
}

#[inline]
fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

/// Kernel text for an error message (lossy: the input may be any bytes).
pub(crate) fn lossy(bytes: &[u8]) -> String {
    const MAX: usize = 64;
    let shown = bytes.get(..MAX).unwrap_or(bytes);
    let mut text = String::from_utf8_lossy(shown).into_owned();
    if bytes.len() > MAX {
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Stat, Error> {
        let mut stat = Stat::default();
        parse_stat(
            text.as_bytes(),
            Path::new("proc/stat"),
            &mut stat.cpu_times,
            &mut stat.irq_totals,
        )?;
        Ok(stat)
    }

    #[test]
    fn decimal_numbers() {
        assert_eq!(parse_decimal(b"0"), Ok(0));
        assert_eq!(parse_decimal(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_decimal(b"00000000000000000000000042"),
            Ok(42),
            "leading zeros take the checked path"
        );
        assert_eq!(
            parse_decimal(b"18446744073709551616"),
            Err(NumberError::Overflow)
        );
        assert_eq!(
            parse_decimal(b"99999999999999999999999"),
            Err(NumberError::Overflow)
        );
        assert_eq!(parse_decimal(b"12a"), Err(NumberError::NotDecimal));
        assert_eq!(parse_decimal(b"-1"), Err(NumberError::NotDecimal));
        assert_eq!(parse_decimal(b""), Err(NumberError::Empty));
    }

    #[test]
    fn fields_split_on_any_run_of_blanks() {
        let fields: Vec<&[u8]> = Fields::new(b"  cpu  1\t2 \r").collect();
        assert_eq!(fields, [&b"cpu"[..], b"1", b"2"]);
        assert_eq!(Fields::new(b"   ").count(), 0);
    }

    #[test]
    fn modern_lines_with_guest_fields() {
        let stat = parse(
            "cpu  3 0 3 8 0 0 2 0 0 0\n\
             cpu0 1 0 2 3 4 5 6 7 8 9\n\
             cpu3 10 11 12 13 14 15 16 17 0 0\n\
             intr 9 1 0 8\nctxt 5\nsoftirq 1 2 3\n",
        )
        .unwrap();
        assert_eq!(stat.cpu_times.len(), 2);
        let cpu3 = stat.cpu_times[1];
        assert_eq!(cpu3.cpu, 3, "CPU id comes from the label, not the line");
        assert_eq!(
            (cpu3.user, cpu3.idle, cpu3.irq, cpu3.softirq, cpu3.steal),
            (10, 13, 15, 16, 17)
        );
        assert_eq!(stat.irq_totals, [1, 0, 8]);
    }

    #[test]
    fn old_kernels_with_four_fields_fill_zeros() {
        let stat = parse("cpu0 1 2 3 4\nintr 0\n").unwrap();
        let t = stat.cpu_times[0];
        assert_eq!((t.user, t.nice, t.system, t.idle), (1, 2, 3, 4));
        assert_eq!((t.iowait, t.irq, t.softirq, t.steal), (0, 0, 0, 0));
        assert!(stat.irq_totals.is_empty());
    }

    #[test]
    fn errors_name_file_and_line() {
        let err = parse("cpu0 1 2 3\nintr 0\n").unwrap_err().to_string();
        assert_eq!(
            err,
            "proc/stat:1: cpu0 has 3 counters, expected at least 4 (user nice system idle)"
        );
        let err = parse("cpu0 1 2 3 4\nintr 7 1 x2 3\n")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "proc/stat:2: `x2` is not a decimal number");
        let err = parse("cpu0 1 2 3 4\nintr\n").unwrap_err().to_string();
        assert_eq!(err, "proc/stat:2: intr line has no total");
        let err = parse("cpu0 1 2 3 4\n").unwrap_err().to_string();
        assert_eq!(err, "proc/stat:0: no intr line");
        let err = parse("intr 0\n").unwrap_err().to_string();
        assert_eq!(err, "proc/stat:0: no cpuN lines");
        let err = parse("").unwrap_err().to_string();
        assert_eq!(err, "proc/stat:0: empty file");
        let err = parse("cpu99999999999 1 2 3 4\nintr 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad CPU number"), "{err}");
    }

    #[test]
    fn vectors_are_reused() {
        let mut stat = Stat::default();
        let text = b"cpu0 1 2 3 4\ncpu1 1 2 3 4\nintr 3 1 2\n";
        parse_stat(
            text,
            Path::new("s"),
            &mut stat.cpu_times,
            &mut stat.irq_totals,
        )
        .unwrap();
        let (cpu_ptr, irq_ptr) = (stat.cpu_times.as_ptr(), stat.irq_totals.as_ptr());
        parse_stat(
            text,
            Path::new("s"),
            &mut stat.cpu_times,
            &mut stat.irq_totals,
        )
        .unwrap();
        assert_eq!(stat.cpu_times.len(), 2);
        assert_eq!(stat.irq_totals, [1, 2]);
        assert_eq!(stat.cpu_times.as_ptr(), cpu_ptr);
        assert_eq!(stat.irq_totals.as_ptr(), irq_ptr);
    }
}
