//! What the daemon's tick thread waits on, all at once, with one `epoll_wait`: a signalfd
//! for SIGHUP/SIGTERM/SIGINT, the rtnetlink link-event socket, the kobject-uevent socket
//! that announces queues added and removed (a channel-count change), the ethtool netlink
//! `monitor` socket (channel and RSS changes, `kernel::ethtool_events`), an inotify descriptor
//! for the files steerd follows, another on the cpuset cgroups (`partition_watch`), in quiet
//! mode the NAPI-poll perf events, and, as the wait's timeout, the next tick's deadline.
//!
//! Why a plain blocking wait and not the async runtime: on an idle 1 s tick the runtime's
//! own work per wake-up (its timer wheel waking early at a slot boundary and again at the
//! deadline, an eventfd round trip, re-polling every `select!` branch) cost more than the
//! whole CPU budget of the daemon (docs/performance.md). Here an idle tick is one
//! `epoll_wait` that times out at the tick's deadline, and the tick's own `pread`s. (A
//! timerfd would add a wake-up source and an 8-byte `read` per tick, a tenth of an idle
//! tick's CPU time as measured with perf.)

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::poll::PollTimeout;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// What a signal asks of the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// SIGHUP: re-read the configuration.
    Reload,
    /// SIGTERM or SIGINT: restore and exit.
    Stop(&'static str),
}

/// SIGHUP, SIGTERM and SIGINT, read from a signalfd instead of run as handlers.
pub struct Signals {
    fd: SignalFd,
    mask: SigSet,
}

impl Signals {
    /// Blocks the three signals in the calling thread and opens a signalfd for them. Call
    /// it before any other thread starts: threads inherit the mask, so no thread ever runs
    /// the default action (exit without restoring) for them.
    pub fn block_and_open() -> io::Result<Signals> {
        let mut mask = SigSet::empty();
        for signal in [Signal::SIGHUP, Signal::SIGTERM, Signal::SIGINT] {
            mask.add(signal);
        }
        mask.thread_block()?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
        Ok(Signals { fd, mask })
    }

    /// The requests of every signal that arrived, in order. Two SIGHUPs that arrive
    /// between two reads are one (the kernel keeps one pending signal per number).
    pub fn pending(&mut self) -> Vec<Request> {
        let mut requests = Vec::new();
        while let Ok(Some(info)) = self.fd.read_signal() {
            let request = match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGHUP) => Request::Reload,
                Ok(Signal::SIGTERM) => Request::Stop("SIGTERM"),
                Ok(Signal::SIGINT) => Request::Stop("SIGINT"),
                _ => continue,
            };
            requests.push(request);
        }
        requests
    }
}

impl AsFd for Signals {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        let _ = self.mask.thread_unblock();
    }
}

/// Follows files by watching their directories: a file that is replaced (an editor's
/// rename, a Kubernetes ConfigMap's `..data` symlink swap, CRI-O rewriting
/// `/etc/sysconfig/irqbalance`) is seen as well as one written in place. The watch only
/// says "something changed near these files"; the daemon reads them and compares.
pub struct FileWatch {
    inotify: Inotify,
    files: Vec<PathBuf>,
    watches: Vec<(PathBuf, WatchDescriptor)>,
}

impl FileWatch {
    /// Watches the directories of `files` (and, for a symbolic link, of its target). For a
    /// directory that does not exist yet (`/etc/sysconfig` on Debian until CRI-O writes
    /// there), its nearest existing ancestor is watched, and the directory itself once it
    /// appears. `None` when nothing could be watched.
    pub fn new(files: Vec<PathBuf>) -> io::Result<Option<FileWatch>> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let mut watch = FileWatch {
            inotify,
            files,
            watches: Vec::new(),
        };
        watch.rewatch();
        Ok((!watch.watches.is_empty()).then_some(watch))
    }

    /// Reads every pending event; true when there was one. Watches are set up again
    /// afterwards, since a symbolic link may now point into another directory.
    pub fn drain(&mut self) -> bool {
        let mut any = false;
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
            // IN_IGNORED only says a watch went away (its directory was removed, or
            // `rewatch` dropped it); the directory's own events came before it.
            any |= events
                .iter()
                .any(|event| event.mask != AddWatchFlags::IN_IGNORED);
        }
        if any {
            self.rewatch();
        }
        any
    }

    fn rewatch(&mut self) {
        let flags = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_ATTRIB;
        let mut dirs: Vec<PathBuf> = Vec::new();
        for file in &self.files {
            dirs.extend(file.parent().and_then(nearest_existing));
            if let Ok(target) = std::fs::canonicalize(file) {
                dirs.extend(target.parent().map(Path::to_path_buf));
            }
        }
        dirs.sort();
        dirs.dedup();
        let (kept, gone): (Vec<_>, Vec<_>) = self
            .watches
            .drain(..)
            .partition(|(dir, _)| dirs.contains(dir));
        for (_, watch) in gone {
            let _ = self.inotify.rm_watch(watch);
        }
        self.watches = kept;
        for dir in dirs {
            // Adding a directory already watched returns its descriptor again (no event);
            // one that vanished since is watched anew if it came back.
            if let Ok(watch) = self.inotify.add_watch(&dir, flags) {
                self.watches.retain(|(d, _)| d != &dir);
                self.watches.push((dir, watch));
            } else {
                self.watches.retain(|(d, _)| d != &dir);
            }
        }
    }
}

/// `dir`, or its nearest ancestor that exists.
fn nearest_existing(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|d| d.is_dir()).map(Path::to_path_buf)
}

impl AsFd for FileWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }
}

/// Which of the sources are ready after [`Waiter::wait`] (none: the timeout passed).
#[derive(Debug, Default, Clone, Copy)]
pub struct Ready {
    pub signal: bool,
    pub link: bool,
    /// A uevent arrived (a network queue may have come or gone).
    pub queues: bool,
    /// An ethtool notification arrived (channels or RSS may have changed).
    pub ethtool: bool,
    pub files: bool,
    /// A cpuset cgroup's directory had an event (a partition may have changed).
    pub partitions: bool,
    /// Receive work, in quiet mode.
    pub receive: bool,
}

const SIGNAL: u64 = 1;
const LINK: u64 = 2;
const FILES: u64 = 3;
const RECEIVE: u64 = 4;
const QUEUES: u64 = 5;
const ETHTOOL: u64 = 6;
const PARTITIONS: u64 = 7;

/// One epoll instance over every source. epoll rather than `poll(2)`: the sources stay
/// registered between waits, where `poll` would add and remove a wait-queue entry on each
/// of them at every wake-up (a fifth of an idle tick's kernel time, measured with perf).
pub struct Waiter {
    epoll: Epoll,
    /// The file watch's descriptor as registered (it changes when the watch is rebuilt).
    files: Option<RawFd>,
    /// The partition watch registered, by its generation (see `follow_partitions`).
    partitions: Option<u64>,
    /// Whether quiet mode's descriptor is registered.
    receive: bool,
}

impl Waiter {
    /// `link`: the rtnetlink link-event socket; `queues`: the uevent socket; `ethtool`:
    /// the ethtool `monitor` socket (each may be missing when its subscription failed or
    /// the kernel has none).
    pub fn new(
        signals: &Signals,
        link: Option<BorrowedFd<'_>>,
        queues: Option<BorrowedFd<'_>>,
        ethtool: Option<BorrowedFd<'_>>,
    ) -> io::Result<Waiter> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        epoll.add(signals, EpollEvent::new(EpollFlags::EPOLLIN, SIGNAL))?;
        if let Some(link) = link {
            epoll.add(link, EpollEvent::new(EpollFlags::EPOLLIN, LINK))?;
        }
        if let Some(queues) = queues {
            epoll.add(queues, EpollEvent::new(EpollFlags::EPOLLIN, QUEUES))?;
        }
        if let Some(ethtool) = ethtool {
            epoll.add(ethtool, EpollEvent::new(EpollFlags::EPOLLIN, ETHTOOL))?;
        }
        Ok(Waiter {
            epoll,
            files: None,
            partitions: None,
            receive: false,
        })
    }

    /// Registers the file watch's descriptor if it is not the one registered (a closed
    /// descriptor leaves the epoll set by itself).
    pub fn follow(&mut self, files: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let raw = files.map(|fd| fd.as_raw_fd());
        if raw == self.files {
            return Ok(());
        }
        if let Some(fd) = files {
            self.epoll
                .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, FILES))?;
        }
        self.files = raw;
        Ok(())
    }

    /// Registers the partition watch's descriptor unless the watch of this `generation`
    /// is registered. By generation, not descriptor number: a watch dropped and set up
    /// again within one tick can get the same number, and the closed one left the set.
    pub fn follow_partitions(&mut self, watch: Option<(BorrowedFd<'_>, u64)>) -> io::Result<()> {
        let generation = watch.map(|(_, generation)| generation);
        if generation == self.partitions {
            return Ok(());
        }
        if let Some((fd, _)) = watch {
            self.epoll
                .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, PARTITIONS))?;
        }
        self.partitions = generation;
        Ok(())
    }

    /// Registers quiet mode's descriptor while there is one. Call it before every wait:
    /// closing the descriptor takes it out of the epoll set by itself, so `None` once
    /// between two descriptors is all it takes to register the next.
    pub fn watch_receive(&mut self, receive: Option<BorrowedFd<'_>>) -> io::Result<()> {
        match receive {
            Some(fd) if !self.receive => {
                self.epoll
                    .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, RECEIVE))?;
                self.receive = true;
            }
            Some(_) => {}
            None => self.receive = false,
        }
        Ok(())
    }

    /// Takes quiet mode's descriptor out of the set while it is still open (a retired one,
    /// closed later).
    pub fn unwatch_receive(&mut self, receive: BorrowedFd<'_>) {
        if self.receive {
            // ENOENT would only mean it was not registered; nothing to undo either way.
            let _ = self.epoll.delete(receive);
            self.receive = false;
        }
    }

    /// Blocks until a source is readable or `timeout` passes. The timeout is rounded up
    /// to whole milliseconds (what `epoll_wait` takes), so the wait never ends before it:
    /// an early end would cost a second wake-up for the remaining fraction.
    pub fn wait(&self, timeout: Duration) -> io::Result<Ready> {
        let millis = timeout.as_nanos().div_ceil(1_000_000);
        let timeout = PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX);
        let mut events = [EpollEvent::empty(); 7];
        let count = match self.epoll.wait(&mut events, timeout) {
            Ok(count) => count,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(e.into()),
        };
        let mut ready = Ready::default();
        for event in events.iter().take(count) {
            match event.data() {
                SIGNAL => ready.signal = true,
                LINK => ready.link = true,
                QUEUES => ready.queues = true,
                ETHTOOL => ready.ethtool = true,
                FILES => ready.files = true,
                PARTITIONS => ready.partitions = true,
                RECEIVE => ready.receive = true,
                _ => {}
            }
        }
        Ok(ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_never_ends_before_its_timeout() {
        let signals = Signals::block_and_open().unwrap();
        let waiter = Waiter::new(&signals, None, None, None).unwrap();
        for timeout in [Duration::from_micros(300), Duration::from_micros(20_500)] {
            let started = std::time::Instant::now();
            let ready = waiter.wait(timeout).unwrap();
            assert!(
                !ready.signal
                    && !ready.link
                    && !ready.queues
                    && !ready.ethtool
                    && !ready.files
                    && !ready.receive
            );
            assert!(started.elapsed() >= timeout, "{timeout:?}");
        }
    }

    #[test]
    fn a_file_replaced_by_rename_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("steerd.yaml");
        std::fs::write(&file, "interval: 1s\n").unwrap();
        let mut watch = FileWatch::new(vec![file.clone()]).unwrap().unwrap();
        assert!(!watch.drain(), "nothing happened yet");
        let staged = dir.path().join(".steerd.yaml.tmp");
        std::fs::write(&staged, "interval: 2s\n").unwrap();
        std::fs::rename(&staged, &file).unwrap();
        assert!(watch.drain());
        assert!(!watch.drain(), "drained");
    }

    #[test]
    fn a_kubernetes_style_symlink_swap_is_seen() {
        // kubelet: steerd.yaml -> ..data/steerd.yaml, ..data -> ..<timestamp>; an update
        // writes a new timestamped directory and renames a new ..data over the old one.
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("..2026_11_23_01");
        std::fs::create_dir(&first).unwrap();
        std::fs::write(first.join("steerd.yaml"), "interval: 1s\n").unwrap();
        std::os::unix::fs::symlink("..2026_11_23_01", dir.path().join("..data")).unwrap();
        let file = dir.path().join("steerd.yaml");
        std::os::unix::fs::symlink("..data/steerd.yaml", &file).unwrap();
        let mut watch = FileWatch::new(vec![file.clone()]).unwrap().unwrap();
        let second = dir.path().join("..2026_11_23_02");
        std::fs::create_dir(&second).unwrap();
        std::fs::write(second.join("steerd.yaml"), "interval: 2s\n").unwrap();
        std::os::unix::fs::symlink("..2026_11_23_02", dir.path().join("..data_tmp")).unwrap();
        std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
        assert!(watch.drain());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "interval: 2s\n");
    }

    #[test]
    fn a_file_in_a_directory_created_later_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("etc/sysconfig/irqbalance");
        let mut watch = FileWatch::new(vec![file.clone()]).unwrap().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        assert!(watch.drain(), "etc/ appeared");
        std::fs::create_dir(dir.path().join("etc/sysconfig")).unwrap();
        assert!(watch.drain(), "etc/sysconfig/ appeared");
        assert!(!watch.drain());
        std::fs::write(&file, "IRQBALANCE_BANNED_CPUS=2\n").unwrap();
        assert!(watch.drain(), "the file itself");
    }
}
