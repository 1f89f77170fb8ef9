//! Waking the daemon when a cgroup v2 cpuset partition is made, resized or dissolved, so
//! that it follows the partition within a moment in quiet mode (ticks every
//! `quiet.interval`, 5 s by default) and with a long `interval`, not only at its next tick.
//!
//! The kernel announces nothing on the root's `cpuset.cpus.isolated`, but what changes it
//! does reach inotify: a write to a cgroup's `cpuset.cpus.partition`, `cpuset.cpus`,
//! `cpuset.cpus.exclusive` or `cgroup.subtree_control` (the VFS reports every successful
//! write), the kernel's own `cpuset.cpus.partition` updates (a partition made invalid by a
//! CPU going offline: `kernfs_notify`) and a cgroup created or removed (`mkdir`, `rmdir`).
//! So the watch is one inotify descriptor over the directories of every cgroup that has
//! cpuset files ([`cpuset_cgroups`]), and only those names wake the daemon: writes to
//! `cgroup.procs` or `memory.max`, and `cgroup.events` notifications, are read and
//! dropped. The tick still reads the partitions every interval: the watch makes steerd
//! faster, never the only way it learns.
//!
//! Written on `nix`'s inotify rather than a crate such as `notify`: the daemon already
//! waits on raw descriptors with one `epoll_wait` (`wakeups`), and needs only the names
//! of a few files in directories that come and go.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use crate::kernel::cgroup_isolation::cpuset_cgroups;
use crate::root::Root;

/// The files whose change can change which CPUs are in isolated partitions.
/// `cpuset.cpus.isolated` itself never changes by a write on a kernel; it does in a fake
/// tree, which then goes the same path.
const PARTITION_FILES: [&str; 5] = [
    "cpuset.cpus.partition",
    "cpuset.cpus",
    "cpuset.cpus.exclusive",
    "cgroup.subtree_control",
    "cpuset.cpus.isolated",
];

/// The most cgroup directories watched, the shallowest first. Every watch counts against
/// the user's `fs.inotify.max_user_watches` (8192 on kernels before 5.11), which root's
/// other daemons (systemd among them) share: a node with thousands of pod cgroups must not
/// exhaust it. Partitions made below the watched cgroups are followed at the next tick.
pub const MAX_WATCHED_CGROUPS: usize = 1024;

/// An inotify watch over the cpuset cgroups' directories.
#[derive(Debug)]
pub struct PartitionWatch {
    inotify: Inotify,
    root: Root,
    mount: PathBuf,
    /// The watched directories (relative to the root) by their watch descriptor.
    watched: HashMap<WatchDescriptor, PathBuf>,
    /// Tells this watch from an earlier one that had the same descriptor number.
    generation: u64,
    /// Cpuset cgroups left unwatched at the last set-up: past [`MAX_WATCHED_CGROUPS`], or
    /// once inotify refused more watches (ENOSPC).
    unwatched: usize,
}

/// The next watch's generation.
static GENERATIONS: AtomicU64 = AtomicU64::new(0);

impl PartitionWatch {
    /// Watches every cpuset cgroup of the hierarchy mounted at `mount` (relative to
    /// `root`).
    pub fn new(root: &Root, mount: &Path) -> io::Result<PartitionWatch> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let mut watch = PartitionWatch {
            inotify,
            root: root.clone(),
            mount: mount.to_path_buf(),
            watched: HashMap::new(),
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
            unwatched: 0,
        };
        watch.rewatch()?;
        Ok(watch)
    }

    /// The hierarchy this watch follows.
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// This watch's number, unique in the process.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Cpuset cgroups not watched (see [`MAX_WATCHED_CGROUPS`]).
    pub fn unwatched(&self) -> usize {
        self.unwatched
    }

    /// How many directories are watched.
    pub fn directories(&self) -> usize {
        self.watched.len()
    }

    /// Reads every pending event: whether one can change the isolated partitions. A cgroup
    /// created or removed, or the controller's spread changed, sets the watches up again.
    pub fn drain(&mut self) -> io::Result<bool> {
        let mut partitions = false;
        let mut hierarchy_changed = false;
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
            for event in events {
                let dir_event = event.mask.contains(AddWatchFlags::IN_ISDIR)
                    && event.mask.intersects(
                        AddWatchFlags::IN_CREATE
                            | AddWatchFlags::IN_DELETE
                            | AddWatchFlags::IN_MOVED_FROM
                            | AddWatchFlags::IN_MOVED_TO,
                    );
                let name = event.name.as_deref().and_then(|n| n.to_str());
                let partition_file = name.is_some_and(|n| PARTITION_FILES.contains(&n));
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    // The watch went away with its directory.
                    self.watched.remove(&event.wd);
                }
                partitions |= dir_event || partition_file;
                hierarchy_changed |= dir_event || name == Some("cgroup.subtree_control");
            }
        }
        if hierarchy_changed {
            self.rewatch()?;
        }
        Ok(partitions)
    }

    /// Watches the cpuset cgroups as they are now, and drops the watches of directories
    /// that left.
    fn rewatch(&mut self) -> io::Result<()> {
        let flags = AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_ONLYDIR;
        let mut dirs = cpuset_cgroups(&self.root, &self.mount).map_err(|e| e.into_io())?;
        // The shallowest first: a partition is most often made near the top (a pod's or
        // a slice's cgroup), and the hierarchy's root holds `cpuset.cpus.isolated`.
        dirs.sort_by_key(|dir| dir.components().count());
        let found = dirs.len();
        dirs.truncate(MAX_WATCHED_CGROUPS);
        let keep: HashSet<&PathBuf> = dirs.iter().collect();
        let stale: Vec<WatchDescriptor> = self
            .watched
            .iter()
            .filter(|(_, dir)| !keep.contains(dir))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in stale {
            // EINVAL would only mean the directory and its watch are gone already.
            let _ = self.inotify.rm_watch(wd);
            self.watched.remove(&wd);
        }
        let mut gone = 0;
        for dir in &dirs {
            match self.inotify.add_watch(&self.root.path(dir), flags) {
                // Adding a directory already watched returns its descriptor again.
                Ok(wd) => {
                    self.watched.insert(wd, dir.clone());
                }
                // Removed between the walk and the watch: its parent's event follows.
                Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => gone += 1,
                // The user's watch limit: keep what is watched, leave the rest to ticks.
                Err(nix::errno::Errno::ENOSPC) => break,
                Err(e) => return Err(e.into()),
            }
        }
        self.unwatched = found.saturating_sub(gone + self.watched.len());
        Ok(())
    }
}

impl AsFd for PartitionWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(base: &Path, relative: &str, text: &str) {
        crate::fakeroot::write(base, relative, text).unwrap();
    }

    /// A fake hierarchy: the root enables cpuset for `kubepods`, which enables it for its
    /// pods; `system.slice` has no cpuset files.
    fn hierarchy() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        write(
            base,
            "sys/fs/cgroup/cgroup.subtree_control",
            "cpuset cpu memory\n",
        );
        write(base, "sys/fs/cgroup/cpuset.cpus.isolated", "\n");
        write(
            base,
            "sys/fs/cgroup/kubepods/cgroup.subtree_control",
            "cpuset\n",
        );
        write(
            base,
            "sys/fs/cgroup/kubepods/cpuset.cpus.partition",
            "member\n",
        );
        write(
            base,
            "sys/fs/cgroup/kubepods/pod1/cpuset.cpus.partition",
            "member\n",
        );
        write(base, "sys/fs/cgroup/kubepods/pod1/cgroup.procs", "");
        write(base, "sys/fs/cgroup/system.slice/cgroup.procs", "");
        dir
    }

    #[test]
    fn only_partition_files_and_cgroups_coming_or_going_count() {
        let dir = hierarchy();
        let base = dir.path().join("sys/fs/cgroup");
        let root = Root::new(dir.path());
        let mut watch = PartitionWatch::new(&root, Path::new("sys/fs/cgroup")).unwrap();
        assert_eq!(watch.directories(), 4, "root, kubepods, pod1, system.slice");
        assert!(!watch.drain().unwrap(), "nothing happened yet");

        fs::write(base.join("kubepods/pod1/cgroup.procs"), "42\n").unwrap();
        assert!(!watch.drain().unwrap(), "a process moved: not a partition");

        fs::write(
            base.join("kubepods/pod1/cpuset.cpus.partition"),
            "isolated\n",
        )
        .unwrap();
        assert!(watch.drain().unwrap(), "a partition made");

        fs::create_dir(base.join("kubepods/pod2")).unwrap();
        assert!(watch.drain().unwrap(), "a cgroup created");
        assert_eq!(watch.directories(), 5, "the new pod is watched");
        fs::write(base.join("kubepods/pod2/cpuset.cpus"), "3\n").unwrap();
        assert!(watch.drain().unwrap(), "the new pod's CPUs set");

        fs::remove_file(base.join("kubepods/pod2/cpuset.cpus")).unwrap();
        watch.drain().unwrap();
        fs::remove_dir(base.join("kubepods/pod2")).unwrap();
        assert!(watch.drain().unwrap(), "a cgroup removed");
        assert_eq!(watch.directories(), 4);

        fs::write(base.join("cpuset.cpus.isolated"), "2-3\n").unwrap();
        assert!(
            watch.drain().unwrap(),
            "a fake tree's isolated file written"
        );
    }

    #[test]
    fn the_shallowest_cgroups_are_watched_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("sys/fs/cgroup");
        write(
            dir.path(),
            "sys/fs/cgroup/cgroup.subtree_control",
            "cpuset\n",
        );
        write(
            dir.path(),
            "sys/fs/cgroup/a/cgroup.subtree_control",
            "cpuset\n",
        );
        for i in 0..MAX_WATCHED_CGROUPS + 10 {
            fs::create_dir_all(base.join(format!("a/pod{i}"))).unwrap();
        }
        let root = Root::new(dir.path());
        let watch = PartitionWatch::new(&root, Path::new("sys/fs/cgroup")).unwrap();
        assert_eq!(watch.directories(), MAX_WATCHED_CGROUPS);
        // The root, `a` and the pods: 12 more than the cap.
        assert_eq!(watch.unwatched(), 12);
        assert!(
            watch
                .watched
                .values()
                .any(|d| d == Path::new("sys/fs/cgroup"))
        );
        assert!(
            watch
                .watched
                .values()
                .any(|d| d == Path::new("sys/fs/cgroup/a"))
        );
    }

    #[test]
    fn plain_files_and_a_missing_hierarchy_hold_no_cgroups() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "sys/fs/cgroup/cgroup.subtree_control",
            "cpuset\n",
        );
        fs::write(dir.path().join("sys/fs/cgroup/child"), "not a directory").unwrap();
        let root = Root::new(dir.path());
        // A plain file among the children is no cgroup: the walk skips it.
        let watch = PartitionWatch::new(&root, Path::new("sys/fs/cgroup")).unwrap();
        assert_eq!(watch.directories(), 1);
        let missing = PartitionWatch::new(&root, Path::new("sys/fs/none"));
        assert!(missing.is_ok_and(|w| w.directories() == 0));
    }
}
