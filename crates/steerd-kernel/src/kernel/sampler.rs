//! The tick sampler: reads the per-tick kernel files into a reused [`Snapshot`].
//!
//! The daemon wakes every second for months, so a tick must cost close to nothing
//! (docs/kernel.md, "Reading the per-tick files": opening and reading `proc/stat` and
//! `proc/net/softnet_stat` cost 0.105–0.149 ms of CPU per second, the same files kept
//! open and re-read with `pread` 0.082 ms/s). So:
//!
//! * both files are opened once and kept open; each tick re-reads them with `pread` from
//!   offset 0 (a seq_file restarts when read at offset 0), until `pread` returns 0 — a
//!   seq_file may hand out less than a full buffer before the end;
//! * each file has its own byte buffer, grown (doubled) only when the file outgrew it;
//! * parsing fills the snapshot's existing vectors in place ([`parse_stat_up_to`],
//!   [`parse_softnet`]), so in steady state a tick allocates nothing;
//! * `softnet_stat` rows without a CPU id (kernels before 5.10) go to the online CPUs the
//!   caller last read ([`TickSampler::set_online_cpus`]): the sampler does not read
//!   `sys/devices/system/cpu/online` every tick, discovery already has.
//!
//! `taken_at_ns` is the raw `CLOCK_MONOTONIC` (not a per-sampler `Instant` base), so
//! timestamps compare across samplers and with other monotonic clocks in the process.
//! It is taken right after both reads and before parsing, so parse time does not skew it.
//!
//! A fake root (tests, replays) may *replace* a counter file (write a new file and
//! rename it over the old one, as [`crate::fakeroot`] does); a kept-open descriptor
//! would then keep reading the old inode forever. For roots other than `/`, the sampler
//! therefore checks the path's inode each tick and reopens a replaced file (one `stat`
//! per file). On `/`, procfs files are never replaced and the check is off; see
//! [`TickSampler::set_follow_replaced_files`].

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::cpuset::CpuSet;
use crate::error::Error;
use crate::kernel::procfs::softnet::{SOFTNET_PATH, parse_softnet};
use crate::kernel::procfs::stat::{STAT_PATH, parse_stat_up_to};
use crate::limits::MAX_FILE_BYTES;
use crate::model::snapshot::Snapshot;
use crate::root::Root;

/// First buffer size; a 2-CPU `proc/stat` is about 1.2 KiB, a 1152-CPU one about 80 KiB.
const INITIAL_BUFFER: usize = 16 * 1024;

/// Reads `proc/stat` and `proc/net/softnet_stat` every tick from kept-open files.
#[derive(Debug)]
pub struct TickSampler {
    stat: KeptOpenFile,
    softnet: KeptOpenFile,
    follow_replaced_files: bool,
    /// IRQ numbers below this are counted (see [`TickSampler::set_irq_limit`]).
    irq_limit: usize,
    /// Where `softnet_stat` rows without a CPU id go (see [`TickSampler::set_online_cpus`]).
    online: Option<CpuSet>,
}

impl TickSampler {
    /// Opens both per-tick files under `root`. A missing file is an error naming it
    /// (`softnet_stat` exists on every kernel built with networking).
    pub fn open(root: &Root) -> Result<Self, Error> {
        Ok(TickSampler {
            stat: KeptOpenFile::open(root.path(STAT_PATH))?,
            softnet: KeptOpenFile::open(root.path(SOFTNET_PATH))?,
            follow_replaced_files: !root.is_host(),
            irq_limit: usize::MAX,
            online: None,
        })
    }

    /// The online CPUs, as the caller read them from `sys/devices/system/cpu/online`
    /// (`None`: it could not, and rows without a CPU id are numbered as they come). Kept
    /// for every tick: the daemon and `top` set it after each discovery, and a hot-plug
    /// that outdates it shows as a changed row count or as
    /// [`crate::kernel::procfs::softnet::outgrew_online`].
    pub fn set_online_cpus(&mut self, online: Option<&CpuSet>) {
        self.online = online.cloned();
    }

    /// Counts only IRQ numbers below `limit` in `snapshot.irq_totals` (default: all).
    /// The daemon sets it to one past the highest IRQ it knows of after each discovery.
    pub fn set_irq_limit(&mut self, limit: usize) {
        self.irq_limit = limit;
    }

    /// Whether each tick checks that the paths still name the open files and reopens
    /// them if not (default: on for roots other than `/`, off for `/`).
    pub fn set_follow_replaced_files(&mut self, follow: bool) {
        self.follow_replaced_files = follow;
    }

    /// Re-reads both files and fills `snapshot.cpu_times`, `snapshot.irq_totals`,
    /// `snapshot.softnet` and `snapshot.taken_at_ns`. `snapshot.queues` is left alone
    /// (per-queue counters come from netlink or ethtool, elsewhere).
    ///
    /// On error the snapshot's counter vectors may be partly filled; do not use it.
    pub fn sample(&mut self, snapshot: &mut Snapshot) -> Result<(), Error> {
        if self.follow_replaced_files {
            self.stat.reopen_if_replaced()?;
            self.softnet.reopen_if_replaced()?;
        }
        self.stat.read()?;
        self.softnet.read()?;
        snapshot.taken_at_ns = monotonic_now_ns();
        snapshot.stat_taken_at_ns = None;
        parse_stat_up_to(
            self.stat.contents(),
            &self.stat.path,
            &mut snapshot.cpu_times,
            &mut snapshot.irq_totals,
            self.irq_limit,
        )?;
        parse_softnet(
            self.softnet.contents(),
            &self.softnet.path,
            self.online.as_ref(),
            &mut snapshot.softnet,
        )?;
        Ok(())
    }

    /// Re-reads `softnet_stat` only, and fills `snapshot.softnet` and
    /// `snapshot.taken_at_ns`; the caller carries the `proc/stat` part over
    /// ([`Snapshot::carry_stat_from`]). `proc/stat` is the expensive file of the two
    /// (the kernel sums every IRQ's count over every CPU to print it): an idle daemon
    /// reads it every few ticks only.
    pub fn sample_softnet_only(&mut self, snapshot: &mut Snapshot) -> Result<(), Error> {
        if self.follow_replaced_files {
            self.softnet.reopen_if_replaced()?;
        }
        self.softnet.read()?;
        snapshot.taken_at_ns = monotonic_now_ns();
        parse_softnet(
            self.softnet.contents(),
            &self.softnet.path,
            self.online.as_ref(),
            &mut snapshot.softnet,
        )
    }

    /// Bytes read by the last [`TickSampler::sample`] (both files together).
    pub fn last_read_bytes(&self) -> usize {
        self.stat.len + self.softnet.len
    }
}

/// The longest first read that is certainly the whole file when it comes back shorter
/// than asked. A seq_file read stops early only when the kernel's own buffer (at least one
/// 4 KiB page) cannot take the next record; `proc/stat` is a single record and never stops
/// early; `softnet_stat` records are about 120 bytes. So a read of at most a page less
/// 512 bytes that did not fill the caller's buffer reached the end. Longer files get the
/// usual second read that returns 0.
const WHOLE_IN_ONE_READ: usize = 4096 - 512;

/// A file opened once and re-read whole with `pread` from offset 0 into a reused buffer.
///
/// Public so the sampling benchmark can measure the bare cost of the reads apart from
/// parsing.
#[derive(Debug)]
pub struct KeptOpenFile {
    path: PathBuf,
    file: File,
    /// (st_dev, st_ino) of the open file, to notice a replaced path.
    identity: (u64, u64),
    /// Always fully initialised; only `..len` holds the last read.
    buffer: Vec<u8>,
    len: usize,
}

impl KeptOpenFile {
    /// Opens `path` for reading; the error names it.
    pub fn open(path: PathBuf) -> Result<Self, Error> {
        let file = crate::limits::open_for_reading(&path)?;
        let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
        Ok(KeptOpenFile {
            identity: (meta.dev(), meta.ino()),
            path,
            file,
            buffer: vec![0; INITIAL_BUFFER],
            len: 0,
        })
    }

    /// The path the file was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the whole file from offset 0 and returns its bytes. Allocates only when
    /// the file is larger than any earlier read (the buffer doubles).
    pub fn read(&mut self) -> Result<&[u8], Error> {
        let mut filled = 0usize;
        loop {
            if filled == self.buffer.len() {
                // A file that never ends (or a fake tree's huge one) must not grow the
                // buffer without bound.
                if filled as u64 >= MAX_FILE_BYTES {
                    return Err(Error::TooLarge {
                        path: self.path.clone(),
                        limit: MAX_FILE_BYTES,
                    });
                }
                let bigger = (self.buffer.len().max(INITIAL_BUFFER) * 2)
                    .min(usize::try_from(MAX_FILE_BYTES).unwrap_or(usize::MAX));
                self.buffer.resize(bigger, 0);
            }
            let space = self.buffer.get_mut(filled..).unwrap_or_default();
            let asked = space.len();
            match self.file.read_at(space, filled as u64) {
                Ok(0) => break,
                Ok(n) if filled == 0 && n < asked && n <= WHOLE_IN_ONE_READ => {
                    // The whole file: no second read to see EOF (one syscall per file
                    // per tick instead of two).
                    filled = n;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        self.len = filled;
        Ok(self.contents())
    }

    /// The bytes of the last [`KeptOpenFile::read`].
    pub fn contents(&self) -> &[u8] {
        self.buffer.get(..self.len).unwrap_or_default()
    }

    /// Reopens the file if its path now names another inode (a fake tree replaced it).
    /// Keeps the buffer.
    pub fn reopen_if_replaced(&mut self) -> Result<(), Error> {
        let meta = std::fs::metadata(&self.path).map_err(|e| Error::io(&self.path, e))?;
        if (meta.dev(), meta.ino()) != self.identity {
            self.file = crate::limits::open_for_reading(&self.path)?;
            let meta = self.file.metadata().map_err(|e| Error::io(&self.path, e))?;
            self.identity = (meta.dev(), meta.ino());
        }
        Ok(())
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
fn monotonic_now_ns() -> u64 {
    let mut now = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists on
    // Linux, so the call cannot fail (a failure would leave `now` zero, not UB).
    unsafe {
        nix::libc::clock_gettime(nix::libc::CLOCK_MONOTONIC, &mut now);
    }
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const STAT: &str = "cpu  2 0 2 2 0 0 2 0 0 0\n\
                        cpu0 1 0 1 1 0 0 1 0 0 0\n\
                        cpu1 1 0 1 1 0 0 1 0 0 0\n\
                        intr 5 0 2 3\nctxt 1\n";
    const SOFTNET: &str = "00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
                           00000d9a 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000 00000000\n";

    fn tree(stat: &str, softnet: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("proc/net")).unwrap();
        fs::write(dir.path().join("proc/stat"), stat).unwrap();
        if let Some(softnet) = softnet {
            fs::write(dir.path().join("proc/net/softnet_stat"), softnet).unwrap();
        }
        dir
    }

    #[test]
    fn samples_both_files_and_leaves_queues_alone() {
        let dir = tree(STAT, Some(SOFTNET));
        let mut sampler = TickSampler::open(&Root::new(dir.path())).unwrap();
        let mut snapshot = Snapshot::default();
        snapshot.queues.push(crate::model::snapshot::QueueCounters {
            device: "eth0".into(),
            direction: crate::model::snapshot::QueueDirection::Rx,
            queue: 0,
            packets: 7,
            bytes: None,
        });
        sampler.sample(&mut snapshot).unwrap();
        assert_eq!(snapshot.cpu_times.len(), 2);
        assert_eq!(snapshot.irq_totals, [0, 2, 3]);
        assert_eq!(snapshot.softnet.len(), 2);
        assert_eq!(snapshot.softnet[1].cpu, 1);
        assert_eq!(snapshot.softnet[1].processed, 0xd9a);
        assert_eq!(snapshot.queues.len(), 1, "queues are not the sampler's");
        assert!(snapshot.taken_at_ns > 0);
        assert_eq!(sampler.last_read_bytes(), STAT.len() + SOFTNET.len());

        let first = snapshot.taken_at_ns;
        sampler.sample(&mut snapshot).unwrap();
        assert!(snapshot.taken_at_ns >= first, "monotonic");
        assert_eq!(
            snapshot.cpu_times.len(),
            2,
            "vectors are refilled, not appended"
        );
        assert_eq!(snapshot.softnet.len(), 2);
    }

    #[test]
    fn rows_without_a_cpu_id_go_to_the_online_cpus_it_was_given() {
        // Kernels before 5.10: 11 columns, CPU 1 offline.
        let eleven = "00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
                      00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";
        let dir = tree(STAT, Some(eleven));
        let mut sampler = TickSampler::open(&Root::new(dir.path())).unwrap();
        let mut snapshot = Snapshot::default();
        let cpus = |s: &Snapshot| s.softnet.iter().map(|r| r.cpu).collect::<Vec<_>>();
        sampler.set_online_cpus(Some(&CpuSet::parse_list("0,2").unwrap()));
        sampler.sample_softnet_only(&mut snapshot).unwrap();
        assert_eq!(cpus(&snapshot), [0, 2]);
        sampler.set_online_cpus(None);
        sampler.sample(&mut snapshot).unwrap();
        assert_eq!(cpus(&snapshot), [0, 1], "no list: row numbers");
    }

    #[test]
    fn timestamps_are_clock_monotonic() {
        // /proc/uptime's first field is CLOCK_BOOTTIME; CLOCK_MONOTONIC never exceeds it.
        let now_s = monotonic_now_ns() / 1_000_000_000;
        if let Ok(uptime) = fs::read_to_string("/proc/uptime") {
            let boot: f64 = uptime.split(' ').next().unwrap().parse().unwrap();
            assert!(now_s <= boot as u64 + 1, "{now_s} vs uptime {boot}");
        }
        assert!(now_s > 0);
    }

    #[test]
    fn missing_softnet_stat_names_the_file() {
        let dir = tree(STAT, None);
        let err = TickSampler::open(&Root::new(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("proc/net/softnet_stat"), "{err}");
        assert!(err.contains("No such file"), "{err}");
    }

    #[test]
    fn parse_errors_name_the_file_under_the_root() {
        let dir = tree(STAT, Some("1 2 3\n"));
        let mut sampler = TickSampler::open(&Root::new(dir.path())).unwrap();
        let err = sampler.sample(&mut Snapshot::default()).unwrap_err();
        let expected = format!(
            "{}:1: 3 columns, expected at least 9",
            dir.path().join("proc/net/softnet_stat").display()
        );
        assert_eq!(err.to_string(), expected);
    }

    #[test]
    fn files_are_reread_in_place_and_buffers_grow_when_needed() {
        let dir = tree(STAT, Some(SOFTNET));
        let mut sampler = TickSampler::open(&Root::new(dir.path())).unwrap();
        sampler.set_follow_replaced_files(false);
        let mut snapshot = Snapshot::default();
        sampler.sample(&mut snapshot).unwrap();

        // Rewrite in place (same inode, as procfs does) with a file bigger than two
        // initial buffers: 20000 IRQs.
        let padded = format!(
            "cpu0 1 0 1 1\ncpu1 9 9 9 9\nintr 20000{}\n",
            " 1".repeat(20000)
        );
        assert!(padded.len() > 2 * INITIAL_BUFFER);
        fs::write(dir.path().join("proc/stat"), &padded).unwrap();
        sampler.sample(&mut snapshot).unwrap();
        assert_eq!(snapshot.irq_totals.len(), 20000);
        assert_eq!(snapshot.cpu_times[1].user, 9);
        assert_eq!(sampler.stat.contents().len(), padded.len());
        let buffer_ptr = sampler.stat.buffer.as_ptr();
        sampler.sample(&mut snapshot).unwrap();
        assert_eq!(sampler.stat.buffer.as_ptr(), buffer_ptr, "no regrowth");

        // A smaller file afterwards: only its own bytes are parsed.
        fs::write(dir.path().join("proc/stat"), STAT).unwrap();
        sampler.sample(&mut snapshot).unwrap();
        assert_eq!(snapshot.irq_totals, [0, 2, 3]);
    }

    #[test]
    fn replaced_files_are_followed_on_fake_roots() {
        let dir = tree(STAT, Some(SOFTNET));
        let mut sampler = TickSampler::open(&Root::new(dir.path())).unwrap();
        let mut snapshot = Snapshot::default();
        sampler.sample(&mut snapshot).unwrap();
        let replace = |text: &str| {
            let tmp = dir.path().join("proc/.stat.new");
            fs::write(&tmp, text).unwrap();
            fs::rename(&tmp, dir.path().join("proc/stat")).unwrap();
        };
        replace(&STAT.replace("intr 5 0 2 3", "intr 6 1 2 3"));
        sampler.sample(&mut snapshot).unwrap();
        assert_eq!(snapshot.irq_totals, [1, 2, 3]);

        sampler.set_follow_replaced_files(false);
        replace(&STAT.replace("intr 5 0 2 3", "intr 7 2 2 3"));
        sampler.sample(&mut snapshot).unwrap();
        assert_eq!(
            snapshot.irq_totals,
            [1, 2, 3],
            "without following, the old inode is read"
        );
    }

    #[test]
    fn samples_the_real_machine() {
        let Ok(mut sampler) = TickSampler::open(&Root::default()) else {
            eprintln!("skipping: no /proc/stat or /proc/net/softnet_stat here");
            return;
        };
        let mut snapshot = Snapshot::default();
        sampler.sample(&mut snapshot).unwrap();
        assert!(!snapshot.cpu_times.is_empty());
        assert_eq!(
            snapshot.softnet.len(),
            snapshot.cpu_times.len(),
            "both files have one row per online CPU"
        );
        assert!(!snapshot.irq_totals.is_empty());
    }
}
