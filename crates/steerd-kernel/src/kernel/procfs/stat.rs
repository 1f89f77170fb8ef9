//! `proc/stat`: per-CPU time (including `irq` and `softirq`) and every IRQ's total count.
//!
//! This file is read on every tick, so the parser works in place on the bytes the kernel
//! gave us: no `String`, no `Vec` per line, and the caller's output vectors are cleared and
//! refilled (their capacity survives from one tick to the next). The number parser is
//! hand-written for the same reason (`LineCursor`, `leading_decimal`): `str::parse`
//! would need the whole file UTF-8-validated and split first, while this walks the file
//! once, reads eight digits at a time, and keeps the per-number result in registers. The
//! `intr` line alone holds one number per IRQ (thousands on a big machine; 65960 in one
//! real capture). On the generated 1152-CPU file it parses at about 0.9 GB/s here, twice
//! a digit-at-a-time loop (see `benches/sampling.rs`).
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
use crate::limits::MAX_IRQS;
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
    parse_stat_up_to(bytes, path, cpu_times, irq_totals, usize::MAX)
}

/// [`parse_stat`], keeping the counts of IRQ numbers below `irq_limit` only: the `intr`
/// line lists every IRQ number the kernel could allocate (426 on a 2-CPU VM whose
/// highest real IRQ is about 30), and parsing the unused tail was most of a tick's
/// parsing. The rest of the line is still checked to be there, not parsed.
pub fn parse_stat_up_to(
    bytes: &[u8],
    path: &Path,
    cpu_times: &mut Vec<CpuTimes>,
    irq_totals: &mut Vec<u64>,
    irq_limit: usize,
) -> Result<(), Error> {
    cpu_times.clear();
    irq_totals.clear();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::parse(path, 0, "empty file"));
    }
    let mut seen_intr = false;
    let mut cursor = LineCursor::new(bytes);
    let mut line_number = 0usize;
    while !cursor.at_end() {
        line_number += 1;
        if let Some(label) = cursor.field() {
            if let Some(digits) = label.strip_prefix(b"cpu") {
                if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                    let times = parse_cpu_line(digits, &mut cursor)
                        .map_err(|reason| Error::parse(path, line_number, reason.to_string()))?;
                    cpu_times.push(times);
                }
                // else: the aggregate `cpu` line, or a key we do not know
            } else if label == b"intr" {
                parse_intr_line(&mut cursor, irq_totals, irq_limit)
                    .map_err(|reason| Error::parse(path, line_number, reason.to_string()))?;
                seen_intr = true;
            }
        }
        cursor.next_line();
    }
    if cpu_times.is_empty() {
        return Err(Error::parse(path, 0, "no cpuN lines"));
    }
    if !seen_intr {
        return Err(Error::parse(path, 0, "no intr line"));
    }
    Ok(())
}

/// Why a `cpuN` or `intr` line of `proc/stat` does not parse; [`parse_stat`] names the
/// file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LineError {
    /// A field that is not a number, quoted.
    #[error("{}", .error.message(.field))]
    Number { error: NumberError, field: String },
    /// `cpuN` with an `N` that is no CPU number (or at least [`crate::cpuset::MAX_CPUS`]).
    #[error("bad CPU number in `cpu{digits}`")]
    CpuNumber { digits: String },
    #[error("cpu{cpu} has {count} counters, expected at least 4 (user nice system idle)")]
    FewCounters { cpu: u32, count: usize },
    #[error("intr line has no total")]
    NoIntrTotal,
    /// More counts than any kernel has IRQs: a corrupt file, not a table to grow.
    #[error("more than {MAX_IRQS} IRQ counts (the most steerd accepts) at `{field}`")]
    TooManyIrqs { field: String },
}

/// The counters after `cpuN`; `digits` is the `N`.
fn parse_cpu_line(digits: &[u8], cursor: &mut LineCursor<'_>) -> Result<CpuTimes, LineError> {
    let cpu = parse_decimal(digits)
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n < crate::cpuset::MAX_CPUS)
        .ok_or_else(|| LineError::CpuNumber {
            digits: lossy(digits),
        })?;
    let mut values = [0u64; 8];
    let mut count = 0usize;
    while let Some(value) = cursor.decimal().map_err(|e| cursor.bad_number(e))? {
        if let Some(slot) = values.get_mut(count) {
            *slot = value;
        }
        count += 1;
    }
    if count < 4 {
        return Err(LineError::FewCounters { cpu, count });
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
fn parse_intr_line(
    cursor: &mut LineCursor<'_>,
    irq_totals: &mut Vec<u64>,
    irq_limit: usize,
) -> Result<(), LineError> {
    irq_totals.clear();
    cursor
        .decimal()
        .map_err(|e| cursor.bad_number(e))?
        .ok_or(LineError::NoIntrTotal)?;
    let limit = irq_limit.min(MAX_IRQS as usize);
    while irq_totals.len() < limit {
        match cursor.decimal().map_err(|e| cursor.bad_number(e))? {
            Some(count) => irq_totals.push(count),
            None => break,
        }
    }
    // `irq_totals` is indexed by IRQ number: more counts than any kernel has IRQs is a
    // corrupt file, not a table to grow.
    if irq_totals.len() == MAX_IRQS as usize
        && limit == irq_totals.len()
        && let Some(more) = cursor.field()
    {
        return Err(LineError::TooManyIrqs { field: lossy(more) });
    }
    Ok(())
}

/// Walks a whole file line by line in one pass: fields and numbers are taken straight
/// from the bytes, and the end of a line is found by the field scan itself rather than
/// by a separate search for `\n` (which would read every byte twice).
#[derive(Debug)]
pub(crate) struct LineCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Where the field of the last [`LineCursor::decimal`] error starts.
    bad_field_start: usize,
}

impl<'a> LineCursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        LineCursor {
            bytes,
            pos: 0,
            bad_field_start: 0,
        }
    }

    /// Whether the whole file has been consumed.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    #[inline]
    fn skip_blanks(&mut self) {
        self.pos += self.rest().iter().take_while(|&&b| is_blank(b)).count();
    }

    #[inline]
    fn slice(&self, start: usize) -> &'a [u8] {
        self.bytes.get(start..self.pos).unwrap_or_default()
    }

    /// The next field of the current line; `None` at the end of the line.
    pub(crate) fn field(&mut self) -> Option<&'a [u8]> {
        self.skip_blanks();
        let start = self.pos;
        self.pos += self
            .rest()
            .iter()
            .take_while(|&&b| !is_blank(b) && b != b'\n')
            .count();
        (self.pos > start).then(|| self.slice(start))
    }

    /// The next field of the current line as a decimal `u64`; `Ok(None)` at the end of
    /// the line. After an error, [`NumberError::describe`] quotes the offending field.
    /// (The error holds no slice so the result fits in two registers: this is called
    /// once per number.)
    #[inline(always)]
    pub(crate) fn decimal(&mut self) -> Result<Option<u64>, NumberError> {
        self.skip_blanks();
        let start = self.pos;
        let (value, digits) = leading_decimal(self.rest());
        self.pos += digits;
        match self.peek() {
            None | Some(b'\n') => {}
            Some(b) if is_blank(b) => {}
            Some(_) => {
                self.field();
                self.bad_field_start = start;
                return Err(NumberError::NotDecimal);
            }
        }
        if digits == 0 {
            return Ok(None);
        }
        if digits > 19 {
            self.bad_field_start = start;
            return parse_decimal(self.slice(start)).map(Some);
        }
        Ok(Some(value))
    }

    /// The error of the last [`LineCursor::decimal`], quoting its field.
    pub(crate) fn bad_number(&self, error: NumberError) -> LineError {
        LineError::Number {
            error,
            field: lossy(self.slice(self.bad_field_start)),
        }
    }

    /// Moves past the end of the current line (its `\n` included).
    pub(crate) fn next_line(&mut self) {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        match rest.iter().position(|&b| b == b'\n') {
            Some(offset) => self.pos += offset + 1,
            None => self.pos = self.bytes.len(),
        }
    }
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
        self.message(&lossy(field))
    }

    /// A message quoting `shown`, the field as [`lossy`] shows it.
    fn message(self, shown: &str) -> String {
        match self {
            NumberError::Empty => "empty number".to_string(),
            NumberError::NotDecimal => format!("`{shown}` is not a decimal number"),
            NumberError::Overflow => format!("`{shown}` does not fit in 64 bits"),
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

/// The decimal digits at the start of `bytes`: their value and how many there are. Past
/// 19 digits a `u64` may overflow: the value is then meaningless and the caller re-parses
/// with checks. (A pair of words, so it comes back in registers.)
///
/// Eight bytes at a time (SWAR): a digit-by-digit loop is one serial multiply-add per
/// digit, which held `proc/stat` parsing near 450 MB/s; this does three multiplies per
/// eight digits. Up to eight digits (most counters) stay inline.
#[inline(always)]
pub(crate) fn leading_decimal(bytes: &[u8]) -> (u64, usize) {
    let (value, digits) = eight_digits(bytes);
    if digits < 8 {
        return (value, digits);
    }
    longer_decimal(bytes, value)
}

/// [`leading_decimal`] past the first eight digits, which are worth `value`.
fn longer_decimal(bytes: &[u8], mut value: u64) -> (u64, usize) {
    let mut digits = 8;
    loop {
        let (more, count) = eight_digits(bytes.get(digits..).unwrap_or_default());
        if count == 0 {
            return (value, digits);
        }
        if digits + count > 19 {
            let rest = bytes.get(digits..).unwrap_or_default();
            return (
                0,
                digits + rest.iter().take_while(|b| b.is_ascii_digit()).count(),
            );
        }
        value = value * POWERS_OF_TEN[count] + more;
        digits += count;
        if count < 8 {
            return (value, digits);
        }
    }
}

const POWERS_OF_TEN: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// Up to eight ASCII digits at the start of `bytes`: (value, digit count).
#[inline(always)]
fn eight_digits(bytes: &[u8]) -> (u64, usize) {
    const HIGH_NIBBLES: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    const THREES: u64 = 0x3030_3030_3030_3030;
    let raw = match bytes.first_chunk::<8>() {
        Some(chunk) => u64::from_le_bytes(*chunk),
        None => {
            let mut padded = [0u8; 8]; // NUL is not a digit: the run ends there
            for (slot, b) in padded.iter_mut().zip(bytes) {
                *slot = *b;
            }
            u64::from_le_bytes(padded)
        }
    };
    // A byte is a digit when its high nibble is 3 before and after adding 6 (0x30..=0x39).
    // A carry out of a byte can only come from a non-digit, so it cannot disturb the
    // bytes before the first non-digit, which are all that count.
    let not_digit = ((raw & HIGH_NIBBLES) ^ THREES)
        | ((raw.wrapping_add(0x0606_0606_0606_0606) & HIGH_NIBBLES) ^ THREES);
    let count = if not_digit == 0 {
        8
    } else {
        (not_digit.trailing_zeros() / 8) as usize
    };
    if count == 0 {
        return (0, 0);
    }
    // First character in the lowest byte: shifting left drops the bytes after the digits
    // and puts zeros (leading zero digits) in front.
    let digits = (raw & 0x0f0f_0f0f_0f0f_0f0f) << (8 * (8 - count));
    let pairs = (digits.wrapping_mul(1 + (10 << 8))) >> 8 & 0x00ff_00ff_00ff_00ff;
    let quads = (pairs.wrapping_mul(1 + (100 << 16))) >> 16 & 0x0000_ffff_0000_ffff;
    ((quads.wrapping_mul(1 + (10_000 << 32))) >> 32, count)
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
mod limit_tests {
    use super::*;

    #[test]
    fn irq_counts_past_the_limit_are_not_kept() {
        let text = b"cpu0 1 2 3 4\nintr 10 1 2 3 4\nctxt 5\n";
        let (mut cpus, mut irqs) = (Vec::new(), Vec::new());
        parse_stat_up_to(text, Path::new("stat"), &mut cpus, &mut irqs, 2).unwrap();
        assert_eq!(irqs, [1, 2]);
        parse_stat_up_to(text, Path::new("stat"), &mut cpus, &mut irqs, 10).unwrap();
        assert_eq!(irqs, [1, 2, 3, 4]);
        parse_stat_up_to(text, Path::new("stat"), &mut cpus, &mut irqs, 0).unwrap();
        assert!(irqs.is_empty());
        assert_eq!(cpus.len(), 1);
    }
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
    fn leading_decimals_of_every_length() {
        for digits in 0..=25usize {
            let text: String = (0..digits)
                .map(|i| char::from(b'1' + (i % 9) as u8))
                .collect();
            for tail in ["", " 5", "\n", "x", ":"] {
                let input = format!("{text}{tail}");
                let (value, count) = leading_decimal(input.as_bytes());
                assert_eq!(count, digits, "{input:?}");
                if digits <= 19 {
                    let expected = text.parse::<u64>().unwrap_or(0);
                    assert_eq!(value, expected, "{input:?}");
                }
            }
        }
        // Pseudo-random digit strings (zeros included) of every length, against std.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = 1 + (seed % 20) as usize;
            let text: String = (0..len)
                .map(|i| char::from(b'0' + ((seed >> (i * 3)) % 10) as u8))
                .collect();
            let (value, count) = leading_decimal(format!("{text} 1").as_bytes());
            assert_eq!(count, len);
            if len <= 19 {
                assert_eq!(value, text.parse::<u64>().unwrap(), "{text}");
            }
        }
        assert_eq!(leading_decimal(b"00000000000000000007 ").1, 20);
        assert_eq!(
            leading_decimal(b"9999999999999999999"),
            (9_999_999_999_999_999_999, 19)
        );
        assert_eq!(leading_decimal(b"0/"), (0, 1));
        assert_eq!(leading_decimal(b"12\xff3"), (12, 2));
    }

    #[test]
    fn fields_split_on_any_run_of_blanks() {
        let fields: Vec<&[u8]> = Fields::new(b"  cpu  1\t2 \r").collect();
        assert_eq!(fields, [&b"cpu"[..], b"1", b"2"]);
        assert_eq!(Fields::new(b"   ").count(), 0);
    }

    #[test]
    fn cursor_walks_lines_in_one_pass() {
        let mut cursor = LineCursor::new(b"a 1  22\t333\n\nb x9 7\r\nc 99999999999999999999");
        assert_eq!(cursor.field(), Some(&b"a"[..]));
        assert_eq!(cursor.decimal(), Ok(Some(1)));
        assert_eq!(cursor.decimal(), Ok(Some(22)));
        assert_eq!(cursor.decimal(), Ok(Some(333)));
        assert_eq!(cursor.decimal(), Ok(None), "end of line");
        cursor.next_line();
        assert_eq!(cursor.field(), None, "blank line");
        cursor.next_line();
        assert_eq!(cursor.field(), Some(&b"b"[..]));
        assert_eq!(cursor.decimal(), Err(NumberError::NotDecimal));
        assert_eq!(
            cursor.bad_number(NumberError::NotDecimal).to_string(),
            "`x9` is not a decimal number"
        );
        assert_eq!(cursor.decimal(), Ok(Some(7)));
        assert_eq!(cursor.decimal(), Ok(None), "\\r is a blank");
        cursor.next_line();
        assert_eq!(cursor.field(), Some(&b"c"[..]));
        assert_eq!(cursor.decimal(), Err(NumberError::Overflow));
        assert_eq!(
            cursor.bad_number(NumberError::Overflow).to_string(),
            "`99999999999999999999` does not fit in 64 bits"
        );
        assert_eq!(cursor.decimal(), Ok(None));
        cursor.next_line();
        assert!(cursor.at_end(), "no final newline");
        cursor.next_line();
        assert!(cursor.at_end());
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
        // Fits a u32, but would size the per-CPU tables to billions of entries.
        let err = parse("cpu4294967295 1 2 3 4\nintr 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad CPU number in `cpu4294967295`"), "{err}");
    }

    #[test]
    fn vectors_are_reused() {
        let mut stat = Stat::default();
        let text = b"cpu0 1 2 3 4\ncpu1 1 2 3 4\nintr 3 1 2\n";
        let parse_into = |stat: &mut Stat| {
            parse_stat(
                text,
                Path::new("s"),
                &mut stat.cpu_times,
                &mut stat.irq_totals,
            )
            .unwrap()
        };
        parse_into(&mut stat);
        let (cpu_ptr, irq_ptr) = (stat.cpu_times.as_ptr(), stat.irq_totals.as_ptr());
        parse_into(&mut stat);
        assert_eq!(stat.cpu_times.len(), 2);
        assert_eq!(stat.irq_totals, [1, 2]);
        assert_eq!(stat.cpu_times.as_ptr(), cpu_ptr);
        assert_eq!(stat.irq_totals.as_ptr(), irq_ptr);
    }
}
