//! The bounds steerd puts on everything it reads from outside the process that could size
//! its memory: IRQ and queue numbers (they index tables), counts (they size buffers) and
//! whole files (a file that never ends must not be read forever).
//!
//! Each bound is far above what any real kernel produces, so no real machine meets it; its
//! job is to turn a corrupt, hostile or fake input (`rx_queue_4294967295_packets`, a
//! `--root` tree with a `/dev/zero`-like file) into a typed error naming the file, instead
//! of a multi-gigabyte allocation and an abort. CPU numbers have their own bound,
//! [`crate::cpuset::MAX_CPUS`] (65536), next to the type they size.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::Error;

/// Queue numbers are below this (rx and tx, from `ethtool -S` names, netdev netlink and
/// `queues/rx-N`, `queues/tx-N`).
///
/// The kernel cannot address more: `skb->queue_mapping` is a `__u16`, and the rx queue a
/// packet came in on is recorded there as `queue + 1` (`skb_record_rx_queue`), so queue
/// numbers are below 65536 on every kernel. (rtnetlink further refuses more than 4096
/// queues for a software device; hardware drivers allocate their own counts, the largest
/// today a few hundred.) Per-queue tables are indexed by queue number, so one device's
/// table is at most 65536 entries (1 MiB of `Option<u64>`), never 4 G.
pub const MAX_QUEUES: u32 = 1 << 16;

/// IRQ numbers are below this (`proc/interrupts` rows, the `proc/stat` `intr` line).
///
/// Linux allocates IRQ numbers from a bitmap of `IRQ_BITMAP_BITS` = `NR_IRQS` + 8196; the
/// largest `NR_IRQS` (x86-64 with `MAXSMP`: 8192 CPUs × 64 vectors + legacy) is about
/// 533 000, and `proc/stat` prints `nr_irqs` counts (65 960 in the largest real capture
/// we know). 2^20 leaves room and bounds an IRQ-indexed table of `u64` at 8 MiB.
pub const MAX_IRQS: u32 = 1 << 20;

/// The most bytes steerd reads of one procfs or sysfs file.
///
/// The largest real file is `proc/interrupts`: one row per IRQ, 11 bytes per online CPU
/// per row: 12.7 kB a row on 1152 CPUs, so 19 MB with the 1500 IRQs of the sampling
/// benchmark's 1152-CPU tree and about 63 MB with 5000; 256 MiB leaves four times that
/// (20 000 rows on 1152 CPUs, 2 900 rows on 8192). A sysfs attribute is
/// at most a page or, for the CPU-mask attributes of big machines, a few tens of KiB.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The most per-CPU cells (rows × CPU-id width) one parse of `proc/interrupts` may
/// allocate.
///
/// Each numbered row gets a table indexed by CPU id up to the header's highest CPU, so a
/// header `CPU65535` over millions of one-number rows would allocate 512 KiB per 5-byte
/// row. A real file spends at least 11 bytes per cell, so [`MAX_FILE_BYTES`] holds at
/// most 24 M cells; 2^25 (256 MiB of `u64`) leaves room for hot-plug gaps in the header.
pub const MAX_INTERRUPT_CELLS: usize = 1 << 25;

/// The most statistics steerd accepts from one device's `ETHTOOL_GSSET_INFO`.
///
/// Drivers report a few hundred to about 10 000 (mlx5 with 256 channels); each needs 32
/// bytes of name and 8 of value, twice over for the race slack, so 2^18 bounds the
/// buffers at about 20 MiB.
pub const MAX_ETHTOOL_STATS: usize = 1 << 18;

/// Reads a whole file as UTF-8 text, failing with [`Error::TooLarge`] when it holds more
/// than `limit` bytes and with the usual `InvalidData` I/O error when it is not UTF-8 (as
/// `fs::read_to_string` does). Reads at most `limit + 1` bytes whatever the file is.
pub fn read_text_bounded(path: &Path, limit: u64) -> Result<String, Error> {
    read_inner(path, limit).map_err(|err| match err {
        ReadError::Io(source) => Error::io(path, source),
        ReadError::TooLarge => Error::TooLarge {
            path: path.to_path_buf(),
            limit,
        },
    })
}

/// Like [`read_text_bounded`], but `Ok(None)` when the file does not exist (ENOENT, or
/// ENOTDIR for a vanished parent).
pub fn read_optional_bounded(path: &Path, limit: u64) -> Result<Option<String>, Error> {
    match read_inner(path, limit) {
        Ok(text) => Ok(Some(text)),
        Err(ReadError::Io(err)) if crate::root::is_absent(&err) => Ok(None),
        Err(ReadError::Io(source)) => Err(Error::io(path, source)),
        Err(ReadError::TooLarge) => Err(Error::TooLarge {
            path: path.to_path_buf(),
            limit,
        }),
    }
}

/// What a non-regular file is, for the error.
fn kind_name(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "FIFO"
    } else if kind.is_dir() {
        "directory"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else if kind.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// The error for a path that is no regular file: `InvalidInput`, saying what it is.
fn not_regular(kind: &std::fs::FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file (a {})", kind_name(kind)),
    )
}

/// Opens a kernel file (procfs, sysfs, cgroupfs, tracefs) as `options` say, without
/// blocking and without taking a terminal as the controlling one, and refuses anything but
/// a regular file with an `InvalidInput` error saying what it is.
///
/// The one way steerd opens a kernel file, for reading and for writing: opening a FIFO
/// waits for its other end forever (for writing with `O_NONBLOCK` it fails with ENXIO
/// instead), and a device or socket is no kernel attribute. Every procfs, sysfs, cgroupfs
/// and tracefs attribute is a regular file, on which `O_NONBLOCK` changes nothing.
pub fn open_regular(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = options
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(not_regular(&kind));
    }
    Ok(file)
}

/// [`open_regular`] for reading, the error naming the path.
pub fn open_for_reading(path: &Path) -> Result<File, Error> {
    open_regular(path, OpenOptions::new().read(true)).map_err(|e| Error::io(path, e))
}

/// [`open_regular`] for one whole write, as `echo value > file` opens: write-only,
/// truncating, never creating (a file that is not there is a vanished device or IRQ).
pub fn open_for_writing(path: &Path) -> io::Result<File> {
    open_regular(path, OpenOptions::new().write(true).truncate(true))
}

enum ReadError {
    Io(io::Error),
    TooLarge,
}

/// Reads at most `limit + 1` bytes of a file [`open_regular`] accepts, as UTF-8.
fn read_inner(path: &Path, limit: u64) -> Result<String, ReadError> {
    let file = open_regular(path, OpenOptions::new().read(true)).map_err(ReadError::Io)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge);
    }
    String::from_utf8(bytes)
        .map_err(|err| ReadError::Io(io::Error::new(io::ErrorKind::InvalidData, err)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_longer_than_the_limit_is_too_large_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, "x".repeat(101)).unwrap();
        let err = read_text_bounded(&path, 100).unwrap_err();
        assert!(matches!(err, Error::TooLarge { limit: 100, .. }), "{err}");
        assert!(err.to_string().contains("big"), "{err}");
        assert_eq!(read_text_bounded(&path, 101).unwrap().len(), 101);
    }

    #[test]
    fn a_device_or_fifo_is_refused_without_reading_or_waiting() {
        // /dev/zero never returns end-of-file; a FIFO without a writer blocks its open.
        let err = read_text_bounded(Path::new("/dev/zero"), 1 << 16).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let err = read_optional_bounded(Path::new("/dev/zero"), 1 << 16).unwrap_err();
        assert!(err.to_string().contains("/dev/zero"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("smp_affinity_list");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = read_optional_bounded(&fifo, 1 << 16).unwrap_err();
        assert!(
            err.to_string().contains("not a regular file (a FIFO)"),
            "{err}"
        );
        assert!(err.to_string().contains("smp_affinity_list"), "{err}");
    }

    #[test]
    fn absent_is_none_and_not_utf8_is_invalid_data() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_optional_bounded(&dir.path().join("nothing"), 10)
                .unwrap()
                .is_none()
        );
        let path = dir.path().join("binary");
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        let err = read_text_bounded(&path, 10).unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == io::ErrorKind::InvalidData),
            "{err}"
        );
    }
}
