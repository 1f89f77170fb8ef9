//! `proc/net/softnet_stat`: per-CPU packet-processing counters, the daemon's main work
//! signal (`processed`) and its distress signals (`dropped`, `time_squeeze`).
//!
//! One row per *online* CPU, ascending by CPU id, every column a `%08x` u32 that wraps. The
//! column count grew with kernel versions (docs/kernel.md, "Softnet counters"): 9 (always),
//! 10 (`received_rps`), 11 (`flow_limit_count`), 13 (`backlog_len`, CPU id; 5.10), 15
//! (input/process queue lengths), and a file may mix widths. Rows are parsed by their own
//! width: column 12 is the CPU id when the row has it. Older kernels print no id, so row i
//! belongs to the i-th online CPU: callers pass the online CPUs discovery read from
//! `sys/devices/system/cpu/online` ([`read_softnet`] reads them itself), and this module
//! alone does the mapping, so every reader gives a CPU the same row. Without a list (the
//! file could not be read) rows are numbered 0, 1, 2, ..., which is wrong as soon as a CPU
//! below the last is offline. A row without an id past the last listed CPU is an error:
//! the list is older than the file (a CPU came online since) and no such row can be told
//! whose it is. Extra trailing columns are accepted; a row with fewer than 9 columns is an
//! error.
//!
//! Read every tick: the parser works in place on the bytes, fills the caller's reused
//! vector, and parses hex by hand (`u32::from_str_radix` would need a `&str`, UTF-8
//! validation and a split pass first). Rows in the kernel's exact layout (`%08x` and one
//! space) take a fast path that decodes each column as one 8-byte chunk without a branch
//! per digit (about 2 GB/s here); anything else falls back to a field-by-field parse
//! that also produces the exact error. Columns 13 and 14 (queue lengths) are not kept:
//! `SoftnetRow` has no place for them yet.

use std::path::Path;

use crate::cpuset::CpuSet;
use crate::error::Error;
use crate::kernel::procfs::stat::{Fields, lossy};
use crate::kernel::sysfs::cpu::read_online_cpus;
use crate::model::snapshot::SoftnetRow;
use crate::root::Root;

/// `proc/net/softnet_stat` relative to a [`Root`].
pub const SOFTNET_PATH: &str = "proc/net/softnet_stat";

/// Fewest columns a row may have (kernels since 2.6 print at least these).
pub const MIN_COLUMNS: usize = 9;

/// Columns this reader looks at (0..=12); later ones are counted but not kept.
const KEPT_COLUMNS: usize = 13;

/// How the error for a row without a CPU id past the last online CPU begins
/// ([`outgrew_online`] tells it apart).
const MORE_ROWS_THAN_ONLINE: &str = "more rows than online CPUs";

/// Reads and parses `proc/net/softnet_stat` under `root`, and the online CPUs its rows
/// without a CPU id belong to from `sys/devices/system/cpu/online` (row numbers when that
/// cannot be read). For callers that have not discovered the machine; those that have
/// pass what they read to [`read_softnet_with`].
pub fn read_softnet(root: &Root) -> Result<Vec<SoftnetRow>, Error> {
    let online = read_online_cpus(root).ok().flatten();
    read_softnet_with(root, online.as_ref())
}

/// Reads and parses `proc/net/softnet_stat` under `root`; `online` as for
/// [`parse_softnet`].
pub fn read_softnet_with(root: &Root, online: Option<&CpuSet>) -> Result<Vec<SoftnetRow>, Error> {
    let text = root.read(SOFTNET_PATH)?;
    let mut rows = Vec::new();
    parse_softnet(text.as_bytes(), &root.path(SOFTNET_PATH), online, &mut rows)?;
    Ok(rows)
}

/// Parses the bytes of a `softnet_stat` into `rows` (cleared first, capacity reused).
///
/// A row's CPU is its column 12 when it has one; otherwise row i (counting rows with an
/// id too) is the i-th CPU of `online`, the online CPUs the caller read from
/// `sys/devices/system/cpu/online`, or plain i when it has none (`None`).
///
/// Rows keep file order; on real kernels that is ascending CPU id. Blank lines are
/// skipped and do not count as rows. `path` only names the file in errors. On error
/// `rows` holds the rows parsed so far.
///
/// Errors (naming the file and line): an empty file, a row with fewer than 9 columns, a
/// column that is not hex, a value above `u32::MAX`, a row without a CPU id when every
/// CPU of `online` already has a row ([`outgrew_online`]).
pub fn parse_softnet(
    bytes: &[u8],
    path: &Path,
    online: Option<&CpuSet>,
    rows: &mut Vec<SoftnetRow>,
) -> Result<(), Error> {
    rows.clear();
    let mut row_number = 0u32;
    // Walked one CPU per row, in step with `row_number` (no allocation).
    let mut online_cpus = online.map(CpuSet::iter);
    let mut line_number = 0usize;
    let mut pos = 0usize;
    while pos < bytes.len() {
        line_number += 1;
        let mut columns = [0u32; KEPT_COLUMNS];
        let count = match kernel_formatted_row(bytes, pos, &mut columns) {
            Some((count, next)) => {
                pos = next;
                count
            }
            None => {
                // Anything else (other spacing, short fields, garbage, a blank line):
                // find the line and parse it field by field, for an exact error.
                let rest = bytes.get(pos..).unwrap_or_default();
                let len = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                let line = rest.get(..len).unwrap_or_default();
                pos += len + 1;
                any_row(line, &mut columns)
                    .map_err(|reason| Error::parse(path, line_number, reason.to_string()))?
            }
        };
        if count == 0 {
            continue;
        }
        if count < MIN_COLUMNS {
            return Err(Error::parse(
                path,
                line_number,
                format!("{count} columns, expected at least {MIN_COLUMNS}"),
            ));
        }
        let [
            processed,
            dropped,
            time_squeeze,
            _,
            _,
            _,
            _,
            _,
            _,
            received_rps,
            flow_limit_count,
            backlog_len,
            cpu_index,
        ] = columns;
        let present = |column: usize, value: u32| (count > column).then_some(value);
        let listed = online_cpus.as_mut().map(Iterator::next);
        let cpu = match (present(12, cpu_index), listed) {
            (Some(id), _) => id,
            (None, Some(Some(cpu))) => cpu,
            (None, None) => row_number,
            (None, Some(None)) => {
                let online = online.map(CpuSet::to_list).unwrap_or_default();
                return Err(Error::parse(
                    path,
                    line_number,
                    format!(
                        "{MORE_ROWS_THAN_ONLINE} ({online}), and no CPU id in column 13 to \
                         tell whose row {} is",
                        row_number.saturating_add(1)
                    ),
                ));
            }
        };
        // Rates are kept in tables indexed by CPU id: a stray id in a malformed file
        // must not size them.
        if cpu >= crate::cpuset::MAX_CPUS {
            return Err(Error::parse(
                path,
                line_number,
                format!("CPU id {cpu} in column 13 is too large"),
            ));
        }
        rows.push(SoftnetRow {
            cpu,
            processed,
            dropped,
            time_squeeze,
            received_rps: present(9, received_rps),
            flow_limit_count: present(10, flow_limit_count),
            backlog_len: present(11, backlog_len),
        });
        row_number = row_number.saturating_add(1);
    }
    if rows.is_empty() {
        return Err(Error::parse(path, 0, "empty file"));
    }
    Ok(())
}

/// Whether `err` is [`parse_softnet`]'s error for more rows without a CPU id than online
/// CPUs: the online list is older than the file (a CPU came online since it was read),
/// and reading the list again is the cure.
pub fn outgrew_online(err: &Error) -> bool {
    matches!(err, Error::Parse { reason, .. } if reason.starts_with(MORE_ROWS_THAN_ONLINE))
}

/// The fast path for the kernel's own layout: `%08x` columns separated by one space, the
/// row ending in `\n` or at the end of the file. Fills `columns`, returns the column count
/// and the position after the row; `None` when the row is laid out any other way (the
/// caller then parses it field by field).
#[inline]
fn kernel_formatted_row(
    bytes: &[u8],
    mut pos: usize,
    columns: &mut [u32; KEPT_COLUMNS],
) -> Option<(usize, usize)> {
    let mut count = 0usize;
    loop {
        let chunk: [u8; 8] = bytes.get(pos..pos + 8)?.try_into().ok()?;
        let value = eight_hex_digits(chunk)?;
        if let Some(slot) = columns.get_mut(count) {
            *slot = value;
        }
        count += 1;
        pos += 8;
        match bytes.get(pos) {
            Some(b' ') => pos += 1,
            Some(b'\n') => return Some((count, pos + 1)),
            None => return Some((count, pos)),
            Some(_) => return None,
        }
    }
}

/// Eight hex digits without a branch per digit: invalid digits map to 0xff, whose high
/// nibble survives the OR and is checked once at the end.
#[inline]
fn eight_hex_digits(chunk: [u8; 8]) -> Option<u32> {
    let mut value = 0u32;
    let mut invalid = 0u8;
    for b in chunk {
        let digit = HEX_VALUE[usize::from(b)];
        invalid |= digit;
        value = (value << 4) | u32::from(digit & 0x0f);
    }
    (invalid & 0xf0 == 0).then_some(value)
}

/// Why a `softnet_stat` field is not a column; [`parse_softnet`] names the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum FieldError {
    /// Not hex digits (the kernel prints `%08x`).
    #[error("`{field}` is not a hex number")]
    NotHex { field: String },
    /// Hex, but more than 32 bits of it (the kernel's columns are `unsigned int`).
    #[error("`{field}` does not fit in 32 bits")]
    TooWide { field: String },
}

/// Parses one row of any layout into `columns`; returns the column count (0 for a blank
/// line) or why a field is not a column, quoting it.
fn any_row(line: &[u8], columns: &mut [u32; KEPT_COLUMNS]) -> Result<usize, FieldError> {
    let mut count = 0usize;
    for field in Fields::new(line) {
        let value = parse_hex_u32(field)?;
        if let Some(slot) = columns.get_mut(count) {
            *slot = value;
        }
        count += 1;
    }
    Ok(count)
}

/// 0–15 for a hex digit (either case), 0xff for anything else.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// Parses a hex number without prefix into a `u32`; the error quotes the field.
///
/// The kernel prints exactly 8 digits, so that case is a plain loop; longer fields are
/// accepted when the extra digits are leading zeros.
#[inline]
fn parse_hex_u32(field: &[u8]) -> Result<u32, FieldError> {
    let not_hex = || FieldError::NotHex {
        field: lossy(field),
    };
    let mut digits = field;
    if digits.len() > 8 {
        let zeros = digits.iter().take_while(|&&b| b == b'0').count();
        digits = digits.get(zeros..).unwrap_or_default();
        if digits.len() > 8 {
            return Err(if digits.iter().all(u8::is_ascii_hexdigit) {
                FieldError::TooWide {
                    field: lossy(field),
                }
            } else {
                not_hex()
            });
        }
    }
    let mut value = 0u32;
    for &b in digits {
        let digit = HEX_VALUE[usize::from(b)];
        if digit == 0xff {
            return Err(not_hex());
        }
        value = (value << 4) | u32::from(digit);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<SoftnetRow>, Error> {
        parse_online(text, None)
    }

    fn parse_online(text: &str, online: Option<&str>) -> Result<Vec<SoftnetRow>, Error> {
        let online = online.map(|list| CpuSet::parse_list(list).unwrap());
        let mut rows = Vec::new();
        parse_softnet(
            text.as_bytes(),
            Path::new("softnet_stat"),
            online.as_ref(),
            &mut rows,
        )?;
        Ok(rows)
    }

    /// A row in the kernel's layout: `processed` = `tag`, then `columns - 1` more; a
    /// 13th column (the CPU id) is `cpu`.
    fn row(tag: u32, columns: usize, cpu: u32) -> String {
        let mut values = vec![0u32; columns];
        values[0] = tag;
        if let Some(id) = values.get_mut(12) {
            *id = cpu;
        }
        let fields: Vec<String> = values.iter().map(|v| format!("{v:08x}")).collect();
        format!("{}\n", fields.join(" "))
    }

    #[test]
    fn hex_values() {
        assert_eq!(parse_hex_u32(b"00000000"), Ok(0));
        assert_eq!(parse_hex_u32(b"ffffffff"), Ok(u32::MAX));
        assert_eq!(parse_hex_u32(b"F0000769"), Ok(0xf000_0769));
        assert_eq!(parse_hex_u32(b"0000000000000001"), Ok(1));
        assert_eq!(
            parse_hex_u32(b"100000000"),
            Err(FieldError::TooWide {
                field: "100000000".into()
            })
        );
        assert_eq!(
            parse_hex_u32(b"0x10").unwrap_err().to_string(),
            "`0x10` is not a hex number"
        );
        assert!(matches!(
            parse_hex_u32(b"1g"),
            Err(FieldError::NotHex { .. })
        ));
        assert!(matches!(
            parse_hex_u32(b"00000000g0000000"),
            Err(FieldError::NotHex { .. })
        ));
    }

    #[test]
    fn widths_decide_the_optional_fields() {
        let nine = "00000001 00000002 00000003 0 0 0 0 0 0\n";
        let rows = parse(nine).unwrap();
        assert_eq!(
            rows[0],
            SoftnetRow {
                cpu: 0,
                processed: 1,
                dropped: 2,
                time_squeeze: 3,
                received_rps: None,
                flow_limit_count: None,
                backlog_len: None,
            }
        );
        let huge_cpu = "1 2 3 0 0 0 0 0 0 9 8 7 ffffffff\n";
        assert_eq!(
            parse(huge_cpu).unwrap_err().to_string(),
            "softnet_stat:1: CPU id 4294967295 in column 13 is too large"
        );
        let fifteen = "a b c 0 0 0 0 0 0 9 8 7 00000010 1 2 3 4\n";
        let rows = parse(fifteen).unwrap();
        assert_eq!(rows[0].cpu, 16, "column 12 is the CPU id");
        assert_eq!(
            (
                rows[0].received_rps,
                rows[0].flow_limit_count,
                rows[0].backlog_len
            ),
            (Some(9), Some(8), Some(7))
        );
    }

    #[test]
    fn fast_path_and_fallback_agree() {
        let kernel = "00000001 00000002 00000003 00000000 00000000 00000000 00000000 00000000 00000000 0000000a\n\
                      000000ff 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 0000000b";
        let mut columns = [0u32; KEPT_COLUMNS];
        assert_eq!(
            kernel_formatted_row(kernel.as_bytes(), 0, &mut columns),
            Some((10, 90))
        );
        assert_eq!(&columns[..3], &[1, 2, 3]);
        assert_eq!(
            kernel_formatted_row(kernel.as_bytes(), 90, &mut columns),
            Some((10, kernel.len()))
        );
        let loose = "1  2\t3 0 0 0 0 0 0 A\n  ff 0 0 0 0 0 0 0 0 b  \n";
        assert_eq!(
            kernel_formatted_row(loose.as_bytes(), 0, &mut columns),
            None
        );
        assert_eq!(parse(kernel).unwrap(), parse(loose).unwrap());
        assert_eq!(eight_hex_digits(*b"deadBEEF"), Some(0xdead_beef));
        assert_eq!(eight_hex_digits(*b"0000000g"), None);
        assert_eq!(eight_hex_digits(*b"0000 000"), None);
    }

    #[test]
    fn rows_without_an_id_go_to_the_online_cpus_in_order() {
        // 5.4: 11 columns, one row per online CPU; CPU 6 is offline.
        let old: String = [0, 1, 2, 3, 4, 5, 7]
            .map(|cpu| row(0x100 + cpu, 11, 0))
            .concat();
        let rows = parse_online(&old, Some("0-5,7")).unwrap();
        let cpus: Vec<u32> = rows.iter().map(|r| r.cpu).collect();
        assert_eq!(cpus, [0, 1, 2, 3, 4, 5, 7]);
        assert_eq!(rows[6].processed, 0x107, "the last row is CPU 7's");
        // Without the list, the row number, as before.
        assert_eq!(parse(&old).unwrap()[6].cpu, 6);
        // Both paths agree: the fast one and the field-by-field one.
        let loose = old.replace(' ', "  ");
        assert_eq!(parse_online(&loose, Some("0-5,7")).unwrap(), rows);
    }

    #[test]
    fn rows_with_an_id_keep_it_whatever_the_online_list() {
        let new: String = [0, 1, 2, 3, 4, 5, 7].map(|cpu| row(cpu, 13, cpu)).concat();
        for online in [None, Some("0-5,7"), Some("0-6"), Some("0-2")] {
            let cpus: Vec<u32> = parse_online(&new, online)
                .unwrap()
                .iter()
                .map(|r| r.cpu)
                .collect();
            assert_eq!(cpus, [0, 1, 2, 3, 4, 5, 7], "online {online:?}");
        }
        // A file mixing widths: row i is the i-th online CPU whether or not a row before
        // it had an id.
        let mixed = [row(0, 13, 0), row(1, 11, 0), row(2, 13, 7), row(3, 10, 0)].concat();
        let cpus: Vec<u32> = parse_online(&mixed, Some("0,2,5,9"))
            .unwrap()
            .iter()
            .map(|r| r.cpu)
            .collect();
        assert_eq!(cpus, [0, 2, 7, 9]);
    }

    #[test]
    fn more_rows_without_an_id_than_online_cpus_is_an_error() {
        let eight: String = (0..8).map(|cpu| row(cpu, 11, 0)).collect();
        let err = parse_online(&eight, Some("0-5,7")).unwrap_err();
        assert!(outgrew_online(&err), "{err}");
        assert_eq!(
            err.to_string(),
            "softnet_stat:8: more rows than online CPUs (0-5,7), and no CPU id in column 13 \
             to tell whose row 8 is"
        );
        let err = parse_online(&eight, Some("")).unwrap_err();
        assert!(
            err.to_string().starts_with("softnet_stat:1: more rows"),
            "{err}"
        );
        // Other errors are not this one.
        assert!(!outgrew_online(&parse("1 2 3\n").unwrap_err()));
    }

    #[test]
    fn short_rows_and_garbage_are_errors() {
        let err = parse("1 2 3 4 5 6 7 8 9\n1 2 3 4\n")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "softnet_stat:2: 4 columns, expected at least 9");
        let err = parse("1 2 3 4 5 6 7 8 zz\n").unwrap_err().to_string();
        assert_eq!(err, "softnet_stat:1: `zz` is not a hex number");
        let err = parse("\n\n").unwrap_err().to_string();
        assert_eq!(err, "softnet_stat:0: empty file");
    }
}
