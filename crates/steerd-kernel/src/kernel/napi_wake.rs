//! A descriptor that becomes readable when the kernel starts receiving again: one perf event
//! per online CPU on the `napi:napi_poll` tracepoint, each waking its reader after every
//! `polls` NAPI polls on its CPU.
//!
//! Why it exists: on an idle machine steerd's whole cost is its 1 s tick, and most of a
//! tick's cost is the wake-up itself, not its work (docs/performance.md). While the network
//! is quiet the daemon sleeps longer (`quiet.interval`) and lets this descriptor wake it
//! within milliseconds of the first receive work, so it reacts to new traffic sooner than a
//! 1 s tick would, at a fraction of the idle cost.
//!
//! Why `napi:napi_poll`: every receive path runs a NAPI poll, whether a driver's in softirq
//! or in its threaded-NAPI kernel thread, the per-CPU backlog that RPS and `netif_rx` feed
//! (veth, loopback, tunnels), or a busy-polling socket. Counting NET_RX softirqs would miss
//! threaded NAPI. A poll handles from 0 (transmit completions only) to 64 packets.
//!
//! Why by hand: the perf crates on crates.io count hardware and software events of a
//! process; none opens a tracepoint on every CPU with a wake-up per sample period. The raw
//! bindings come from `perf-event-open-sys`. Each event has the smallest ring buffer the
//! kernel accepts (one metadata page and one data page), mapped read-only, which makes the
//! kernel overwrite it: steerd never reads a sample, it only needs the wake-up.
//!
//! Costs while open: the tracepoint's probe runs on every NAPI poll of every CPU (tens of
//! nanoseconds), so the daemon holds these events only while the network is quiet and
//! drops them as soon as traffic returns.
//!
//! Needs CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8), `perf_event_open` allowed by any
//! seccomp filter, and the tracepoint's id, which only tracefs tells. systemd mounts tracefs
//! at boot; where nothing did (a bare VM, a fresh `/sys` from `ip netns exec`) and steerd
//! holds CAP_SYS_ADMIN, it mounts tracefs for a moment on a directory of its own, reads the
//! id and unmounts it again, as `perf` would mount it (but perf leaves it mounted). The id
//! of a built-in tracepoint is fixed while the kernel runs, so this happens once per process.

use std::fs;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::OnceLock;

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::poll::PollTimeout;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
use nix::sys::statfs::{TRACEFS_MAGIC, statfs};
use perf_event_open_sys as perf;

/// Where tracefs is mounted: its own mount point since Linux 4.1, and inside debugfs on
/// older systems and some distributions.
pub const TRACEFS_DIRS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// ` (a, b)`: the places tried, for [`WakeError::NoTracepoint`]; empty when none is worth
/// naming.
fn tried_list(tried: &[PathBuf]) -> String {
    if tried.is_empty() {
        return String::new();
    }
    let names: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
    format!(" ({})", names.join(", "))
}

/// The tracepoint, as tracefs names it under `events/`.
pub const TRACEPOINT: &str = "napi/napi_poll";

/// Why the events could not be opened. Each names what failed and what would fix it.
#[derive(Debug, thiserror::Error)]
pub enum WakeError {
    #[error(
        "cannot find the napi:napi_poll tracepoint's id{}: {reason}",
        tried_list(tried)
    )]
    NoTracepoint { tried: Vec<PathBuf>, reason: String },
    #[error(
        "perf_event_open(napi:napi_poll) on CPU {cpu}: {source}{}",
        hint(source)
    )]
    Open { cpu: u32, source: io::Error },
    #[error("mapping the perf ring buffer of CPU {cpu}: {source}{}", hint(source))]
    Map { cpu: u32, source: io::Error },
    #[error("epoll for the perf events: {0}")]
    Epoll(io::Error),
    #[error("no online CPU accepted a perf event")]
    NoCpu,
}

impl WakeError {
    /// The errno behind the error, if any (for a metric label or a test).
    pub fn errno(&self) -> Option<i32> {
        match self {
            WakeError::Open { source, .. }
            | WakeError::Map { source, .. }
            | WakeError::Epoll(source) => source.raw_os_error(),
            _ => None,
        }
    }
}

fn hint(error: &io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc_errno::EACCES | libc_errno::EPERM) => {
            " (needs CAP_PERFMON, or CAP_SYS_ADMIN before Linux 5.8, and perf_event_open \
             allowed by the seccomp filter; see docs/systemd.md)"
        }
        Some(libc_errno::EMFILE | libc_errno::ENFILE) => " (too many open files)",
        _ => "",
    }
}

mod libc_errno {
    pub const EPERM: i32 = nix::libc::EPERM;
    pub const EACCES: i32 = nix::libc::EACCES;
    pub const EMFILE: i32 = nix::libc::EMFILE;
    pub const ENFILE: i32 = nix::libc::ENFILE;
}

/// Reads the tracepoint's id from the first of `tracefs_dirs` that has it.
pub fn tracepoint_id(tracefs_dirs: &[&Path]) -> Result<u64, WakeError> {
    let mut tried = Vec::new();
    let mut errors = Vec::new();
    for dir in tracefs_dirs {
        let path = dir.join("events").join(TRACEPOINT).join("id");
        // Bounded and never blocking, as every kernel file (a tracefs `id` is a few bytes).
        match crate::limits::read_text_bounded(&path, 64).map_err(crate::Error::into_io) {
            Ok(text) => {
                return text
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| WakeError::NoTracepoint {
                        reason: format!("{} holds {:?}, not a number", path.display(), text.trim()),
                        tried: vec![path.clone()],
                    });
            }
            Err(e) => {
                errors.push(e);
                tried.push(path);
            }
        }
    }
    Err(WakeError::NoTracepoint {
        tried,
        reason: most_telling(&errors),
    })
}

/// Why the id cannot be read when tracefs is mounted nowhere and steerd's own mount
/// failed: one sentence, with what to do.
fn unmountable_reason(mount_error: &MountError) -> String {
    if mount_error.denied {
        "tracefs is mounted nowhere and mounting it needs CAP_SYS_ADMIN (run steerd as root, \
         or mount tracefs at /sys/kernel/tracing as systemd does at boot)"
            .to_string()
    } else {
        format!(
            "tracefs is mounted nowhere and mounting it for a moment failed: {} (mount tracefs \
             at /sys/kernel/tracing as systemd does at boot)",
            mount_error.text
        )
    }
}

/// A failed momentary mount: what failed, and whether it was a permission refusal.
#[derive(Debug)]
struct MountError {
    text: String,
    denied: bool,
}

/// The tracepoint's id on this machine: from a mounted tracefs, or else from a mount of
/// steerd's own that lasts only while it reads the id. Found once per process.
fn host_tracepoint_id() -> Result<u64, WakeError> {
    static ID: OnceLock<u64> = OnceLock::new();
    if let Some(id) = ID.get() {
        return Ok(*id);
    }
    let dirs: Vec<&Path> = TRACEFS_DIRS.iter().map(Path::new).collect();
    let id = match tracepoint_id(&dirs) {
        Ok(id) => id,
        Err(WakeError::NoTracepoint { .. }) if !tracefs_mounted(&dirs) => {
            let (id, mount_point) =
                id_from_a_momentary_mount(Path::new(MOUNT_PARENT)).map_err(|mount_error| {
                    // The places tried are beside the point: tracefs is mounted nowhere.
                    WakeError::NoTracepoint {
                        tried: Vec::new(),
                        reason: unmountable_reason(&mount_error),
                    }
                })?;
            tracing::info!(
                mount_point = %mount_point.display(),
                "tracefs is mounted nowhere: mounted it for a moment to read the napi:napi_poll id ({id})"
            );
            id
        }
        Err(e) => return Err(e),
    };
    let _ = ID.set(id);
    Ok(id)
}

/// True when one of `dirs` is a tracefs mount (the first is tracefs's own mount point; the
/// second, inside debugfs, is mounted by the kernel on first access when debugfs is).
fn tracefs_mounted(dirs: &[&Path]) -> bool {
    dirs.iter()
        .any(|dir| statfs(*dir).is_ok_and(|fs| fs.filesystem_type() == TRACEFS_MAGIC))
}

/// Where the momentary mount point is made: `/run`, which only root can write (not `/tmp`,
/// where anyone can create entries and a mistake in the name would be theirs to exploit).
const MOUNT_PARENT: &str = "/run";

/// A new, empty directory `steerd-tracefs.XXXXXX` in `parent` for the momentary mount:
/// `parent` must be a real directory (not a symbolic link) that only its owner, root or
/// steerd's own user, can write; the name is random and made with `mkdtemp`, mode 0700, so
/// nobody can plant it first or look inside.
fn make_mount_point(parent: &Path) -> Result<PathBuf, MountError> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| MountError {
        text: format!("not mounting in {}: {why}", parent.display()),
        denied: false,
    };
    match fs::symlink_metadata(parent) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(refuse("it is a symbolic link".into()));
        }
        Ok(meta) if !meta.is_dir() => return Err(refuse("it is not a directory".into())),
        Ok(meta) => {
            let me = nix::unistd::geteuid().as_raw();
            if meta.uid() != 0 && meta.uid() != me {
                return Err(refuse(format!("it belongs to uid {}", meta.uid())));
            }
            if meta.mode() & 0o022 != 0 {
                return Err(refuse(format!(
                    "others can write it (mode {:o})",
                    meta.mode() & 0o7777
                )));
            }
        }
        // mkdtemp says what is missing.
        Err(_) => {}
    }
    let template = parent.join("steerd-tracefs.XXXXXX");
    nix::unistd::mkdtemp(&template).map_err(|e| MountError {
        text: format!("creating {}: {}", template.display(), io::Error::from(e)),
        denied: false,
    })
}

/// Mounts tracefs on a new directory `steerd-tracefs.XXXXXX` in `parent` (a random name,
/// made with `mkdtemp`, so that nobody can make it first), reads the tracepoint's id, and
/// unmounts and removes it again, whatever the read gave. The mount is in the caller's
/// mount namespace for the few microseconds this takes. Returns the id and where the mount
/// was.
fn id_from_a_momentary_mount(parent: &Path) -> Result<(u64, PathBuf), MountError> {
    let mount_point = make_mount_point(parent)?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if let Err(e) = mount(
        Some("tracefs"),
        &mount_point,
        Some("tracefs"),
        flags,
        None::<&str>,
    ) {
        let _ = fs::remove_dir(&mount_point);
        return Err(MountError {
            text: format!("mount on {}: {}", mount_point.display(), io::Error::from(e)),
            denied: e == nix::errno::Errno::EPERM || e == nix::errno::Errno::EACCES,
        });
    }
    let id = tracepoint_id(&[&mount_point]).map_err(|e| MountError {
        text: e.to_string(),
        denied: false,
    });
    match umount2(&mount_point, MntFlags::MNT_DETACH) {
        // Left mounted: the id is still good; say where the mount is so it can be removed.
        Err(e) => tracing::warn!(
            mount_point = %mount_point.display(),
            "could not unmount the tracefs mounted to read the napi:napi_poll id: {}; \
             `umount {}` removes it",
            io::Error::from(e),
            mount_point.display()
        ),
        Ok(()) => {
            if let Err(e) = fs::remove_dir(&mount_point) {
                tracing::warn!(mount_point = %mount_point.display(), "removing the empty directory tracefs was mounted on: {e}");
            }
        }
    }
    id.map(|id| (id, mount_point))
}

/// Why none of the places had the id: a denied read says more than a missing mount point
/// elsewhere.
fn most_telling(errors: &[io::Error]) -> String {
    if let Some(denied) = errors
        .iter()
        .find(|e| e.kind() == io::ErrorKind::PermissionDenied)
    {
        return format!(
            "{denied} (tracefs is root's alone: run steerd as root; quiet mode also needs CAP_PERFMON)"
        );
    }
    match errors.iter().find(|e| e.kind() != io::ErrorKind::NotFound) {
        Some(other) => other.to_string(),
        None if errors.is_empty() => "no tracefs directory given".to_string(),
        None => "not found: is tracefs mounted, and the kernel built with tracepoints?".to_string(),
    }
}

/// One CPU's event: its descriptor and its read-only ring buffer.
struct CpuEvent {
    fd: OwnedFd,
    /// The mapping's address, kept as a number so that the event stays `Send`: it is never
    /// read, only unmapped.
    ring: usize,
    ring_len: NonZeroUsize,
}

impl Drop for CpuEvent {
    fn drop(&mut self) {
        if let Some(ring) = NonNull::new(self.ring as *mut std::ffi::c_void) {
            // SAFETY: `ring` is the mapping made in `open_cpu`, of `ring_len` bytes, and
            // nothing else refers to it.
            let _ = unsafe { munmap(ring, self.ring_len.get()) };
        }
    }
}

/// The events of every online CPU behind one epoll descriptor, readable after `polls` NAPI
/// polls on any one CPU since it was last drained.
pub struct NapiPollWake {
    epoll: Epoll,
    events: Vec<CpuEvent>,
    /// CPUs that refused an event because they went offline meanwhile (ENODEV).
    skipped: Vec<u32>,
}

impl NapiPollWake {
    /// Opens one event on each of `cpus`, with the tracepoint id found in [`TRACEFS_DIRS`]
    /// (or, when tracefs is mounted nowhere, in a mount of steerd's own for a moment).
    pub fn open(cpus: impl IntoIterator<Item = u32>, polls: u64) -> Result<Self, WakeError> {
        let id = host_tracepoint_id()?;
        Self::open_tracepoint(id, cpus, polls)
    }

    /// Opens one event of tracepoint `id` on each of `cpus`. A CPU that went offline since
    /// the caller looked is skipped; any other failure is an error (and closes what was
    /// opened).
    pub fn open_tracepoint(
        id: u64,
        cpus: impl IntoIterator<Item = u32>,
        polls: u64,
    ) -> Result<Self, WakeError> {
        let epoll =
            Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| WakeError::Epoll(e.into()))?;
        let mut wake = NapiPollWake {
            epoll,
            events: Vec::new(),
            skipped: Vec::new(),
        };
        for cpu in cpus {
            match open_cpu(id, cpu, polls.max(1)) {
                Ok(event) => {
                    wake.epoll
                        .add(
                            event.fd.as_fd(),
                            EpollEvent::new(EpollFlags::EPOLLIN, u64::from(cpu)),
                        )
                        .map_err(|e| WakeError::Epoll(e.into()))?;
                    wake.events.push(event);
                }
                Err(WakeError::Open { source, .. })
                    if source.raw_os_error() == Some(nix::libc::ENODEV) =>
                {
                    wake.skipped.push(cpu);
                }
                Err(e) => return Err(e),
            }
        }
        if wake.events.is_empty() {
            return Err(WakeError::NoCpu);
        }
        Ok(wake)
    }

    /// How many CPUs have an event.
    pub fn cpus(&self) -> usize {
        self.events.len()
    }

    /// CPUs skipped because they were offline when opened.
    pub fn skipped(&self) -> &[u32] {
        &self.skipped
    }

    /// Consumes the readiness of every event; true when one had fired. (Asking perf for
    /// readiness clears it, so after this the descriptor stays quiet until the next
    /// `polls` polls.)
    pub fn drain(&self) -> bool {
        let mut ready = [EpollEvent::empty(); 8];
        let mut any = false;
        while let Ok(count) = self.epoll.wait(&mut ready, PollTimeout::ZERO) {
            if count == 0 {
                break;
            }
            any = true;
        }
        any
    }
}

impl AsFd for NapiPollWake {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.0.as_fd()
    }
}

fn open_cpu(id: u64, cpu: u32, polls: u64) -> Result<CpuEvent, WakeError> {
    let mut attr = perf::bindings::perf_event_attr {
        type_: perf::bindings::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<perf::bindings::perf_event_attr>() as u32,
        config: id,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = polls;
    // A sample is only its 8-byte header; one wake-up per sample.
    attr.sample_type = 0;
    attr.__bindgen_anon_2.wakeup_events = 1;
    let cpu_arg = i32::try_from(cpu).map_err(|_| WakeError::Open {
        cpu,
        source: io::Error::from_raw_os_error(nix::libc::EINVAL),
    })?;
    // SAFETY: `attr` is a fully initialised perf_event_attr of the size it states; pid -1
    // with a CPU asks for every task on that CPU; no group; close-on-exec.
    let raw = unsafe {
        perf::perf_event_open(
            &mut attr,
            -1,
            cpu_arg,
            -1,
            perf::bindings::PERF_FLAG_FD_CLOEXEC as _,
        )
    };
    if raw < 0 {
        return Err(WakeError::Open {
            cpu,
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: `raw` is a descriptor perf_event_open just returned, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let page = page_size();
    let ring_len = NonZeroUsize::new(2 * page).ok_or(WakeError::Map {
        cpu,
        source: io::Error::from_raw_os_error(nix::libc::EINVAL),
    })?;
    // SAFETY: a new shared read-only mapping of the event's ring buffer (one metadata page
    // and one data page, the smallest perf accepts); the kernel decides its address.
    let ring = unsafe {
        mmap(
            None,
            ring_len,
            ProtFlags::PROT_READ,
            MapFlags::MAP_SHARED,
            &fd,
            0,
        )
    }
    .map_err(|e| WakeError::Map {
        cpu,
        source: e.into(),
    })?;
    debug_assert!(fd.as_raw_fd() >= 0);
    Ok(CpuEvent {
        fd,
        ring: ring.as_ptr() as usize,
        ring_len,
    })
}

fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|size| usize::try_from(size).ok())
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_comes_from_the_first_tracefs_that_has_it() {
        let missing = tempfile::tempdir().unwrap();
        let tracefs = tempfile::tempdir().unwrap();
        let dir = tracefs.path().join("events/napi/napi_poll");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("id"), "2291\n").unwrap();
        assert_eq!(
            tracepoint_id(&[missing.path(), tracefs.path()]).unwrap(),
            2291
        );
    }

    #[test]
    fn a_momentary_mount_reads_the_id_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let root = nix::unistd::geteuid().is_root();
        match id_from_a_momentary_mount(dir.path()) {
            Ok((id, point)) => {
                assert!(root, "mounted tracefs without being root");
                assert!(id > 0);
                assert!(point.starts_with(dir.path()), "{}", point.display());
            }
            Err(e) if !root => assert!(e.text.starts_with("mount on ") && e.denied, "{e:?}"),
            Err(e) if !Path::new("/sys/kernel/tracing").exists() => {
                eprintln!("this kernel has no tracefs; only the cleanup was checked ({e:?})");
            }
            Err(e) => panic!("as root: {e:?}"),
        }
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "the mount point was left behind: {left:?}");
        let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!mounts.contains(&*dir.path().to_string_lossy()), "{mounts}");
    }

    #[test]
    fn the_mount_point_is_private_and_only_made_where_only_its_owner_writes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let point = make_mount_point(dir.path()).unwrap();
        let mode = fs::metadata(&point).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", point.display());
        fs::remove_dir(&point).unwrap();
        // A symbolic link planted as the parent is not followed.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        let error = make_mount_point(&link).unwrap_err().text;
        assert!(error.contains("symbolic link"), "{error}");
        // A directory others can write (a world-writable /tmp without PrivateTmp).
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        let error = make_mount_point(&open).unwrap_err().text;
        assert!(error.contains("others can write it (mode 1777)"), "{error}");
        assert_eq!(
            fs::read_dir(&open).unwrap().count(),
            0,
            "nothing made there"
        );
    }

    #[test]
    fn a_momentary_mount_where_no_directory_can_be_made_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("missing");
        let error = id_from_a_momentary_mount(&parent).unwrap_err().text;
        assert!(
            error.contains("creating") && error.contains("missing/steerd-tracefs."),
            "{error}"
        );
    }

    #[test]
    fn a_refused_mount_is_one_short_sentence_saying_what_to_do() {
        let error = WakeError::NoTracepoint {
            tried: Vec::new(),
            reason: unmountable_reason(&MountError {
                text: "mount on /tmp/steerd-tracefs.x: Operation not permitted".into(),
                denied: true,
            }),
        }
        .to_string();
        assert!(error.contains("CAP_SYS_ADMIN") && error.contains("run steerd as root"));
        assert!(!error.contains("(/sys"), "no list of places: {error}");
        assert!(error.len() < 240, "{} characters: {error}", error.len());
    }

    #[test]
    fn no_tracefs_is_an_error_naming_every_place_tried() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let error = tracepoint_id(&[a.path(), b.path()])
            .unwrap_err()
            .to_string();
        assert!(error.contains(&a.path().display().to_string()), "{error}");
        assert!(error.contains(&b.path().display().to_string()), "{error}");
        assert!(error.contains("is tracefs mounted"), "{error}");
    }

    #[test]
    fn a_denied_tracefs_says_so_even_when_another_place_is_missing() {
        use io::ErrorKind::{NotFound, PermissionDenied};
        let reason = most_telling(&[io::Error::from(PermissionDenied), io::Error::from(NotFound)]);
        assert!(reason.contains("run steerd as root"), "{reason}");
        let reason = most_telling(&[io::Error::from(NotFound), io::Error::from(NotFound)]);
        assert!(reason.contains("is tracefs mounted"), "{reason}");
    }

    #[test]
    fn a_malformed_id_is_an_error_naming_the_file() {
        let tracefs = tempfile::tempdir().unwrap();
        let dir = tracefs.path().join("events/napi/napi_poll");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("id"), "napi\n").unwrap();
        let error = tracepoint_id(&[tracefs.path()]).unwrap_err().to_string();
        assert!(error.contains("napi_poll/id holds \"napi\""), "{error}");
    }

    #[test]
    fn a_denied_open_says_what_it_needs() {
        let error = WakeError::Open {
            cpu: 3,
            source: io::Error::from_raw_os_error(nix::libc::EACCES),
        };
        let text = error.to_string();
        assert!(
            text.contains("CPU 3") && text.contains("CAP_PERFMON"),
            "{text}"
        );
        assert_eq!(error.errno(), Some(nix::libc::EACCES));
    }
}
