//! `proc/interrupts`: every IRQ's per-CPU counts, interrupt chip and action name(s).
//!
//! Read at discovery (not every tick: the file grows with IRQs × CPUs and is megabytes on a
//! 1000-CPU machine; the per-tick IRQ totals come from `proc/stat`'s `intr` line). The
//! parser is hand-written over bytes so a counter costs no allocation: one `Vec` of counts
//! and two short strings per line, nothing per counter.
//!
//! Layout (`kernel/irq/proc.c`, `show_interrupts`):
//!
//! * a header of `CPUn` columns, one per **online** CPU, so gaps appear after hot-unplug;
//! * numbered rows: `irq:`, exactly one count per header column, then the chip column
//!   (`IO-APIC-edge` on old kernels, `IR-PCI-MSI 409600-edge` on 4.x+,
//!   `PCI-MSIX-0000:00:03.0   1-edge` on 6.x, `ITS-MSI 524288 Edge` on arm64 GICv3), then
//!   the action names: the last field, or the comma-joined list of a shared line
//!   (`ehci_hcd:usb1, mmc0`), or nothing for an IRQ without an action;
//! * named rows (`NMI:`, `LOC:`, s390's `EXT:`/`I/O:`, arm64's `IPI0:`) with one count per
//!   column and a description, or a single value (`ERR:`, `MIS:`, `Err:`).
//!
//! Counts are `unsigned int` in the kernel and wrap; they are stored as `u64` indexed by CPU
//! id (columns of offline CPUs stay 0), deltas must be taken modulo 2^32.

use std::path::Path;

use crate::error::Error;
use crate::limits::{MAX_INTERRUPT_CELLS, MAX_IRQS};
use crate::root::Root;

/// The parsed file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interrupts {
    /// The CPU id of each count column, in header order (online CPUs, ascending).
    pub cpus: Vec<u32>,
    /// Numbered rows, in file order (ascending IRQ number on every kernel).
    pub lines: Vec<InterruptLine>,
    /// Named rows (`NMI`, `LOC`, `ERR`, ...), in file order.
    pub named: Vec<NamedRow>,
}

/// One numbered row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptLine {
    pub irq: u32,
    /// Counts indexed by CPU id: `per_cpu.len()` is one past the highest header CPU.
    pub per_cpu: Vec<u64>,
    /// Sum of the counts.
    pub total: u64,
    /// The chip column with its hwirq and trigger (`PCI-MSIX-0000:00:03.0 1-edge`),
    /// whitespace collapsed to single spaces; `None` if the row has nothing after the counts.
    pub chip: Option<String>,
    /// The action name(s) as printed: `eth0-TxRx-3`, or `ehci_hcd:usb1, mmc0` for a shared
    /// line; empty for an IRQ without an action.
    pub name: String,
}

impl InterruptLine {
    /// The individual action names of a (possibly shared) line.
    pub fn actions(&self) -> impl Iterator<Item = &str> {
        self.name
            .split(',')
            .map(str::trim)
            .filter(|action| !action.is_empty())
    }
}

/// One named (non-numeric) row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedRow {
    /// The label without its colon: `NMI`, `LOC`, `ERR`, `I/O`, `IPI0`.
    pub label: String,
    /// Counts indexed by CPU id when the row has one per column; empty for a single-value
    /// row such as `ERR:`.
    pub per_cpu: Vec<u64>,
    /// Sum of the counts (for a single-value row, that value).
    pub total: u64,
    /// The text after the counts (`Non-maskable interrupts`), possibly empty.
    pub description: String,
}

impl Interrupts {
    /// The row of IRQ `irq`.
    pub fn line(&self, irq: u32) -> Option<&InterruptLine> {
        self.lines.iter().find(|line| line.irq == irq)
    }

    /// The named row with this label.
    pub fn named(&self, label: &str) -> Option<&NamedRow> {
        self.named.iter().find(|row| row.label == label)
    }
}

/// Reads and parses `proc/interrupts` under `root`.
pub fn read(root: &Root) -> Result<Interrupts, Error> {
    let text = root.read("proc/interrupts")?;
    parse(&text, &root.path("proc/interrupts"))
}

/// Parses the text of a `proc/interrupts` file; `path` names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<Interrupts, Error> {
    let mut lines = text.lines().enumerate();
    let (header_index, header) = lines
        .by_ref()
        .find(|(_, line)| !line.trim().is_empty())
        .ok_or_else(|| Error::parse(path, 0, "empty file: no CPU header"))?;
    let cpus = parse_header(header)
        .map_err(|reason| Error::parse(path, header_index + 1, reason.to_string()))?;
    let width = cpus.last().map_or(0, |&cpu| cpu as usize + 1);
    let mut rows = Rows::default();
    // Every row's per-CPU table is `width` long: bound their sum, not just the file.
    let most_rows = MAX_INTERRUPT_CELLS / width.max(1);
    for (index, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let row = if rows.lines.len() + rows.named.len() >= most_rows {
            Err(RowError::TooManyRows {
                rows: most_rows,
                width,
            })
        } else {
            parse_row(line, &cpus, width, &mut rows)
        };
        row.map_err(|reason| Error::parse(path, index + 1, reason.to_string()))?;
    }
    Ok(Interrupts {
        cpus,
        lines: rows.lines,
        named: rows.named,
    })
}

/// Why a line of `proc/interrupts` does not parse; [`parse`] names the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RowError {
    /// A header field other than `CPUn`.
    #[error("expected a header of CPUn columns, found {token:?}")]
    HeaderNotCpu { token: String },
    /// The kernel prints online CPUs in ascending order.
    #[error("CPU columns are not ascending at {token:?}")]
    HeaderNotAscending { token: String },
    /// A CPU id at or above [`crate::cpuset::MAX_CPUS`].
    #[error("CPU number too large: {token:?}")]
    HeaderCpuTooLarge { token: String },
    #[error("the CPU header has no columns")]
    HeaderEmpty,
    /// Every row is `LABEL:` then counts.
    #[error("a row without a label: {line:?}")]
    NoLabel { line: String },
    #[error("a row with an empty label")]
    EmptyLabel,
    #[error("IRQ number out of range (at most {MAX_IRQS}): {label:?}")]
    IrqOutOfRange { label: String },
    /// A numbered row needs one count per header column.
    #[error("IRQ {irq}: expected {expected} per-CPU counts, found {found}")]
    MissingCounts {
        irq: u32,
        expected: usize,
        found: usize,
    },
    #[error("a count does not fit 64 bits")]
    CountOverflow,
    /// More rows than [`MAX_INTERRUPT_CELLS`] allows at this width.
    #[error(
        "more than {rows} rows of {width} CPU columns \
         ({MAX_INTERRUPT_CELLS} cells, the most steerd accepts)"
    )]
    TooManyRows { rows: usize, width: usize },
}

/// `           CPU0       CPU1       CPU3` → `[0, 1, 3]`.
fn parse_header(header: &str) -> Result<Vec<u32>, RowError> {
    let mut cpus: Vec<u32> = Vec::new();
    for token in header.split_ascii_whitespace() {
        let id = token
            .strip_prefix("CPU")
            .and_then(|digits| digits.parse::<u32>().ok())
            .ok_or_else(|| RowError::HeaderNotCpu {
                token: token.to_string(),
            })?;
        if cpus.last().is_some_and(|&last| last >= id) {
            return Err(RowError::HeaderNotAscending {
                token: token.to_string(),
            });
        }
        if id >= crate::cpuset::MAX_CPUS {
            return Err(RowError::HeaderCpuTooLarge {
                token: token.to_string(),
            });
        }
        cpus.push(id);
    }
    if cpus.is_empty() {
        return Err(RowError::HeaderEmpty);
    }
    Ok(cpus)
}

#[derive(Default)]
struct Rows {
    lines: Vec<InterruptLine>,
    named: Vec<NamedRow>,
}

fn parse_row(line: &str, cpus: &[u32], width: usize, out: &mut Rows) -> Result<(), RowError> {
    let (label, rest) = line.split_once(':').ok_or_else(|| RowError::NoLabel {
        line: shorten(line).to_string(),
    })?;
    let label = label.trim();
    if label.is_empty() {
        return Err(RowError::EmptyLabel);
    }
    let mut cursor = Cursor::new(rest.as_bytes());
    if label.bytes().all(|b| b.is_ascii_digit()) {
        let irq: u32 = label
            .parse()
            .ok()
            .filter(|&irq| irq < MAX_IRQS)
            .ok_or_else(|| RowError::IrqOutOfRange {
                label: label.to_string(),
            })?;
        let mut per_cpu = vec![0u64; width];
        let mut total = 0u64;
        for (column, &cpu) in cpus.iter().enumerate() {
            let count = cursor.number()?.ok_or(RowError::MissingCounts {
                irq,
                expected: cpus.len(),
                found: column,
            })?;
            if let Some(slot) = per_cpu.get_mut(cpu as usize) {
                *slot = count;
            }
            total = total.saturating_add(count);
        }
        let (chip, name) = split_tail(cursor.rest());
        out.lines.push(InterruptLine {
            irq,
            per_cpu,
            total,
            chip,
            name,
        });
    } else {
        let mut counts = Vec::with_capacity(cpus.len());
        while counts.len() < cpus.len() {
            match cursor.number()? {
                Some(count) => counts.push(count),
                None => break,
            }
        }
        let total = counts.iter().fold(0u64, |sum, &c| sum.saturating_add(c));
        let per_cpu = if counts.len() == cpus.len() {
            let mut per_cpu = vec![0u64; width];
            for (&cpu, &count) in cpus.iter().zip(&counts) {
                if let Some(slot) = per_cpu.get_mut(cpu as usize) {
                    *slot = count;
                }
            }
            per_cpu
        } else {
            Vec::new()
        };
        out.named.push(NamedRow {
            label: label.to_string(),
            per_cpu,
            total,
            description: cursor.rest().trim().to_string(),
        });
    }
    Ok(())
}

/// Splits what follows the counts into the chip column and the action name(s).
///
/// The chip column ends with the trigger (`IO-APIC-edge`, `409600-edge`, `Edge`, `Level`,
/// `IO-APIC-fasteoi`): the names are everything after the first such field, which keeps
/// names with spaces (`PCIe PME, pciehp`) whole, and is empty for an IRQ without an
/// action. Without a trigger field (s390's `PCI-MSI  mlx5_async@pci:…`), the name is the
/// last field, extended leftwards over fields ending in a comma (a shared line).
fn split_tail(tail: &str) -> (Option<String>, String) {
    let fields: Vec<&str> = tail.split_ascii_whitespace().collect();
    if fields.is_empty() {
        return (None, String::new());
    }
    let name_start = match fields.iter().position(|field| is_trigger(field)) {
        Some(trigger) => trigger + 1,
        None => {
            let mut start = fields.len() - 1;
            while start > 0 && fields[start - 1].ends_with(',') {
                start -= 1;
            }
            start
        }
    };
    let chip = (name_start > 0).then(|| fields[..name_start].join(" "));
    let name = fields[name_start..].join(" ");
    (chip, name)
}

/// Whether a field is the flow/trigger part of the chip column rather than an action name.
fn is_trigger(field: &str) -> bool {
    const FLOWS: [&str; 8] = [
        "edge",
        "level",
        "fasteoi",
        "simple",
        "percpu",
        "percpu_devid",
        "edge-irq",
        "level-irq",
    ];
    if field == "Edge" || field == "Level" {
        return true;
    }
    match field.rsplit_once('-') {
        Some((_, flow)) => FLOWS.contains(&flow),
        None => false,
    }
}

fn shorten(line: &str) -> &str {
    match line.char_indices().nth(60) {
        Some((cut, _)) => &line[..cut],
        None => line,
    }
}

/// A byte cursor that reads whitespace-separated decimal numbers in place.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, at: 0 }
    }

    /// The next number, or `None` (cursor unmoved) when the next field is not a number.
    fn number(&mut self) -> Result<Option<u64>, RowError> {
        let mut at = self.at;
        while at < self.bytes.len() && self.bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        let mut value: u64 = 0;
        while let Some(&byte) = self.bytes.get(at) {
            if !byte.is_ascii_digit() {
                break;
            }
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(byte - b'0')))
                .ok_or(RowError::CountOverflow)?;
            at += 1;
        }
        let ends_field = self
            .bytes
            .get(at)
            .is_none_or(|byte| byte.is_ascii_whitespace());
        if at == start || !ends_field {
            return Ok(None);
        }
        self.at = at;
        Ok(Some(value))
    }

    fn rest(&self) -> &'a str {
        // `at` only ever advances over ASCII bytes, so it is a char boundary.
        std::str::from_utf8(&self.bytes[self.at..]).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Interrupts, Error> {
        parse(text, Path::new("proc/interrupts"))
    }

    #[test]
    fn x86_new_style_with_msix_chip() {
        let text = "           CPU0       CPU1       \n \
            28:          0          0 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config\n \
            38:          0       1787 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
            NMI:          0          0   Non-maskable interrupts\n\
            ERR:          0\n";
        let parsed = parse_str(text).unwrap();
        assert_eq!(parsed.cpus, vec![0, 1]);
        let line = parsed.line(38).unwrap();
        assert_eq!(line.per_cpu, vec![0, 1787]);
        assert_eq!(line.total, 1787);
        assert_eq!(line.chip.as_deref(), Some("PCI-MSIX-0000:00:03.0 1-edge"));
        assert_eq!(line.name, "virtio2-input.0");
        let nmi = parsed.named("NMI").unwrap();
        assert_eq!(nmi.per_cpu, vec![0, 0]);
        assert_eq!(nmi.description, "Non-maskable interrupts");
        let err = parsed.named("ERR").unwrap();
        assert!(err.per_cpu.is_empty());
        assert_eq!(err.total, 0);
    }

    #[test]
    fn header_gaps_index_counts_by_cpu_id() {
        let text = "   CPU0   CPU2   CPU5\n 10:  1  2  3  IO-APIC-edge  timer\n";
        let parsed = parse_str(text).unwrap();
        assert_eq!(parsed.cpus, vec![0, 2, 5]);
        assert_eq!(parsed.lines[0].per_cpu, vec![1, 0, 2, 0, 0, 3]);
        assert_eq!(parsed.lines[0].total, 6);
    }

    #[test]
    fn shared_lines_and_lines_without_action() {
        let text = "CPU0 CPU1\n\
            16:  4  2  IR-IO-APIC  16-fasteoi   ehci_hcd:usb1, mmc0\n\
            17:  0  0  IO-APIC-fasteoi   uhci_hcd:usb3, pata_marvell, nvidia, eth1\n\
            30:  100  22  IR-PCI-MSI 524288-edge\n\
            52:  0  9   ITS-MSI 507904 Edge\n\
            53:  0  9   ITS-MSI 507905 Edge      nvme1q1\n\
            122:  0  0  IR-PCI-MSI 458752-edge      PCIe PME, pciehp\n\
            123:  0  0  IR-PCI-MSI-edge      eth0-edge\n";
        let parsed = parse_str(text).unwrap();
        let shared = parsed.line(16).unwrap();
        assert_eq!(shared.name, "ehci_hcd:usb1, mmc0");
        assert_eq!(shared.chip.as_deref(), Some("IR-IO-APIC 16-fasteoi"));
        assert_eq!(
            shared.actions().collect::<Vec<_>>(),
            ["ehci_hcd:usb1", "mmc0"]
        );
        assert_eq!(parsed.line(17).unwrap().actions().count(), 4);
        assert_eq!(parsed.line(30).unwrap().name, "");
        assert_eq!(
            parsed.line(30).unwrap().chip.as_deref(),
            Some("IR-PCI-MSI 524288-edge")
        );
        assert_eq!(parsed.line(52).unwrap().name, "");
        assert_eq!(parsed.line(53).unwrap().name, "nvme1q1");
        let pme = parsed.line(122).unwrap();
        assert_eq!(pme.name, "PCIe PME, pciehp");
        assert_eq!(pme.chip.as_deref(), Some("IR-PCI-MSI 458752-edge"));
        assert_eq!(pme.actions().collect::<Vec<_>>(), ["PCIe PME", "pciehp"]);
        assert_eq!(parsed.line(123).unwrap().name, "eth0-edge");
        assert_eq!(
            parsed.line(53).unwrap().chip.as_deref(),
            Some("ITS-MSI 507905 Edge")
        );
    }

    #[test]
    fn s390_and_arm64_named_rows() {
        let text = "           CPU0       CPU1\n\
            EXT:      33396      27506\n\
            I/O:        882        123\n\
            AIO:          0          0\n  \
            3:          7          0   PCI-MSI  mlx5_async@pci:0001:00:00.0\n\
            CLK:      1234       5678   [EXT] Clock Comparator\n\
            IPI0:2768808080 2844211768       Rescheduling interrupts\n\
            Err:          0\n";
        let parsed = parse_str(text).unwrap();
        assert_eq!(parsed.named("I/O").unwrap().total, 1005);
        assert_eq!(
            parsed.named("CLK").unwrap().description,
            "[EXT] Clock Comparator"
        );
        assert_eq!(
            parsed.named("IPI0").unwrap().per_cpu,
            vec![2768808080, 2844211768]
        );
        assert_eq!(parsed.line(3).unwrap().name, "mlx5_async@pci:0001:00:00.0");
        assert_eq!(parsed.line(3).unwrap().chip.as_deref(), Some("PCI-MSI"));
    }

    #[test]
    fn old_style_chip_column() {
        let text = "CPU0\n  0:         45   IO-APIC-edge      timer\n 91: 5 IR-PCI-MSI-edge eth0\n";
        let parsed = parse_str(text).unwrap();
        assert_eq!(
            parsed.line(0).unwrap().chip.as_deref(),
            Some("IO-APIC-edge")
        );
        assert_eq!(parsed.line(91).unwrap().name, "eth0");
    }

    #[test]
    fn malformed_rows_name_the_line() {
        for (text, line) in [
            ("", 0),
            ("CPU0 CPU1\n 1: 5 IO-APIC-edge timer\n", 2),
            ("CPU0\n 1: x IO-APIC-edge timer\n", 2),
            ("CPU0 XYZ\n", 1),
            ("CPU1 CPU0\n", 1),
            ("CPU0\n\n 5: 1 a b\nno colon here\n", 4),
            ("CPU0\n 99999999999: 1 a b\n", 2),
            ("CPU0\n 1: 99999999999999999999999 a b\n", 2),
        ] {
            let err = parse_str(text).unwrap_err();
            match &err {
                Error::Parse { line: at, .. } => assert_eq!(*at, line, "{text:?}: {err}"),
                other => panic!("{other}"),
            }
            assert!(err.to_string().contains("proc/interrupts"), "{err}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong_with_the_line() {
        for (text, message) in [
            ("", "proc/interrupts:0: empty file: no CPU header"),
            (
                "CPU0 XYZ\n",
                "proc/interrupts:1: expected a header of CPUn columns, found \"XYZ\"",
            ),
            (
                "CPU1 CPU0\n",
                "proc/interrupts:1: CPU columns are not ascending at \"CPU0\"",
            ),
            (
                "CPU0 CPU1\n 1: 5 IO-APIC-edge timer\n",
                "proc/interrupts:2: IRQ 1: expected 2 per-CPU counts, found 1",
            ),
            (
                "CPU0\nno colon here\n",
                "proc/interrupts:2: a row without a label: \"no colon here\"",
            ),
            (
                "CPU0\n 99999999999: 1 a b\n",
                "proc/interrupts:2: IRQ number out of range (at most 1048576): \"99999999999\"",
            ),
            (
                "CPU0\n 1: 99999999999999999999999 a b\n",
                "proc/interrupts:2: a count does not fit 64 bits",
            ),
        ] {
            assert_eq!(parse_str(text).unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn never_panics_on_garbage() {
        use proptest::prelude::*;
        proptest!(|(text in "(CPU[0-9] ){0,3}\n([ 0-9a-zA-Z:,.-]{0,40}\n){0,5}")| {
            let _ = parse_str(&text);
        });
    }
}
