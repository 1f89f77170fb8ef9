//! The CPUs of cgroup v2 isolated cpuset partitions: the run-time successor of `isolcpus=`
//! (Kubernetes' and the tuned/realtime tools' way to set CPUs aside for latency-critical
//! work while the machine runs). The kernel takes them out of the scheduler's load
//! balancing but leaves IRQ affinity and RPS masks alone, so a receive interrupt steered
//! there is exactly the jitter they were isolated from: steerd keeps its work off them.
//!
//! Where: the cgroup v2 hierarchy is found where `proc/self/mountinfo` under the root
//! mounts `cgroup2` (the first such mount), else at `sys/fs/cgroup`, so a fake tree with
//! `sys/fs/cgroup/cpuset.cpus.isolated` goes the same path as a host.
//!
//! What: the root's `cpuset.cpus.isolated` (6.8 and later: every CPU in an isolated
//! partition, whether given by `cpuset.cpus` or `cpuset.cpus.exclusive`). On kernels with
//! isolated partitions but without that file, every cgroup whose `cpuset.cpus.partition`
//! reads `isolated` (not `isolated invalid (...)`) contributes its `cpuset.cpus.effective`;
//! the walk descends only where `cgroup.subtree_control` enables `cpuset` (no other cgroup
//! has cpuset files) and stops at [`MAX_CGROUPS`] directories. No cpuset controller on v2
//! (a v1 or hybrid host) means no isolated partitions.
//!
//! Read every tick by the daemon (one file on 6.8 and later), so a partition made or
//! dissolved is followed within one interval. The kernel sends no notification for the
//! root's `cpuset.cpus.isolated`, but the writes that make, resize and dissolve partitions
//! (and its own `cpuset.cpus.partition` changes) reach inotify watches on the cgroups'
//! directories, which the daemon keeps on [`cpuset_cgroups`] to wake up at once.

use std::path::{Path, PathBuf};

use crate::cpuset::CpuSet;
use crate::error::Error;
use crate::kernel::sysfs::cpu::read_cpulist;
use crate::root::{Root, optional_dir_entries};

/// The most cgroup directories the fallback walk visits; a hierarchy with more cpuset
/// cgroups is an error rather than a tick that reads for seconds.
pub const MAX_CGROUPS: usize = 8192;

/// The cgroup v2 mount, relative to the root (like `sys/fs/cgroup`).
pub fn cgroup2_mount(root: &Root) -> Result<PathBuf, Error> {
    let Some(text) = root.read_optional("proc/self/mountinfo")? else {
        return Ok(PathBuf::from("sys/fs/cgroup"));
    };
    Ok(cgroup2_mount_in(&text).unwrap_or_else(|| PathBuf::from("sys/fs/cgroup")))
}

/// The mount point of the first `cgroup2` line of a mountinfo text, without its leading
/// slash. Fields (proc(5)): id, parent, major:minor, root, mount point, options, optional
/// fields, `-`, type, source, super options; the mount point escapes space, tab, newline
/// and backslash as octal.
fn cgroup2_mount_in(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (mount, after) = line.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let point = mount.split_whitespace().nth(4)?;
        let point = unescape_octal(point);
        Some(PathBuf::from(point.trim_start_matches('/')))
    })
}

/// Undoes mountinfo's `\ooo` escapes.
fn unescape_octal(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes.get(i + 1..i + 4).and_then(|digits| {
            let digits = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(digits, 8).ok()
        });
        match (bytes[i], escaped) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The CPUs of isolated partitions under `root` (empty when there are none, or no cgroup
/// v2 cpuset controller).
pub fn read_isolated_partitions(root: &Root) -> Result<CpuSet, Error> {
    read_isolated_partitions_at(root, &cgroup2_mount(root)?)
}

/// The same, in the hierarchy mounted at `mount` (from [`cgroup2_mount`]): what the daemon
/// reads every tick, having found the mount once (`proc/self/mountinfo` can be long).
pub fn read_isolated_partitions_at(root: &Root, mount: &Path) -> Result<CpuSet, Error> {
    if let Some(set) = read_cpulist(root, mount.join("cpuset.cpus.isolated"))? {
        return Ok(set);
    }
    let mut isolated = CpuSet::new();
    for dir in cpuset_cgroups(root, mount)? {
        if let Some(partition) = root.read_optional(dir.join("cpuset.cpus.partition"))?
            && is_isolated(&partition)
            && let Some(cpus) = read_cpulist(root, dir.join("cpuset.cpus.effective"))?
        {
            isolated = isolated.union(&cpus);
        }
    }
    Ok(isolated)
}

/// The hierarchy's root and every cgroup under it that has cpuset files (relative to the
/// root): the only places a partition can be made. The walk descends only where
/// `cgroup.subtree_control` enables `cpuset` and stops with an error past
/// [`MAX_CGROUPS`] directories.
pub fn cpuset_cgroups(root: &Root, mount: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut found = Vec::new();
    let mut pending = vec![mount.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if found.len() >= MAX_CGROUPS {
            return Err(Error::parse(
                root.path(mount),
                0,
                format!(
                    "more than {MAX_CGROUPS} cgroups with the cpuset controller: isolated \
                     partitions not read (set cpus.banned instead)"
                ),
            ));
        }
        let enables_cpuset = root
            .read_optional(dir.join("cgroup.subtree_control"))?
            .is_some_and(|text| text.split_whitespace().any(|c| c == "cpuset"));
        if enables_cpuset {
            pending.extend(child_dirs(root, &dir)?);
        }
        found.push(dir);
    }
    Ok(found)
}

/// Whether a `cpuset.cpus.partition` text names a valid isolated partition.
fn is_isolated(partition: &str) -> bool {
    partition.trim() == "isolated"
}

/// The child cgroups of `dir` (relative to the root).
fn child_dirs(root: &Root, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut children = Vec::new();
    for entry in optional_dir_entries(&root.path(dir))? {
        let entry = entry?;
        // A cgroup removed between the listing and this look is simply gone.
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            children.push(dir.join(entry.file_name()));
        }
    }
    Ok(children)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(base: &Path, relative: &str, text: &str) {
        crate::fakeroot::write(base, relative, text).unwrap();
    }

    #[test]
    fn the_first_cgroup2_mount_is_the_hierarchy() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                      34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount_in(hybrid),
            Some(PathBuf::from("sys/fs/cgroup/unified"))
        );
        let escaped = "50 1 0:40 / /mnt/my\\040cgroups rw shared:9 - cgroup2 none rw\n";
        assert_eq!(
            cgroup2_mount_in(escaped),
            Some(PathBuf::from("mnt/my cgroups"))
        );
        assert_eq!(cgroup2_mount_in("garbage\n\n - \n"), None);
    }

    #[test]
    fn the_roots_isolated_file_is_read_where_mountinfo_mounts_cgroup2() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "proc/self/mountinfo",
            "9 1 0:9 / /cg rw - cgroup2 cgroup2 rw\n",
        );
        write(dir.path(), "cg/cpuset.cpus.isolated", "2-3\n");
        write(dir.path(), "sys/fs/cgroup/cpuset.cpus.isolated", "1\n");
        let set = read_isolated_partitions(&Root::new(dir.path())).unwrap();
        assert_eq!(set.to_list(), "2-3");
    }

    #[test]
    fn without_mountinfo_sys_fs_cgroup_is_the_hierarchy_and_empty_means_none() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        assert!(read_isolated_partitions(&root).unwrap().is_empty());
        write(dir.path(), "sys/fs/cgroup/cpuset.cpus.isolated", "\n");
        assert!(read_isolated_partitions(&root).unwrap().is_empty());
        write(dir.path(), "sys/fs/cgroup/cpuset.cpus.isolated", "5,7\n");
        assert_eq!(read_isolated_partitions(&root).unwrap().to_list(), "5,7");
    }

    #[test]
    fn without_the_roots_file_valid_isolated_partitions_are_walked() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        write(
            base,
            "sys/fs/cgroup/cgroup.subtree_control",
            "cpu cpuset memory\n",
        );
        write(base, "sys/fs/cgroup/rt/cpuset.cpus.partition", "isolated\n");
        write(base, "sys/fs/cgroup/rt/cpuset.cpus.effective", "3\n");
        write(base, "sys/fs/cgroup/rt/cgroup.subtree_control", "cpuset\n");
        write(
            base,
            "sys/fs/cgroup/rt/inner/cpuset.cpus.partition",
            "isolated\n",
        );
        write(base, "sys/fs/cgroup/rt/inner/cpuset.cpus.effective", "4\n");
        write(
            base,
            "sys/fs/cgroup/broken/cpuset.cpus.partition",
            "isolated invalid (Cpu list in cpuset.cpus not exclusive)\n",
        );
        write(base, "sys/fs/cgroup/broken/cpuset.cpus.effective", "1\n");
        write(
            base,
            "sys/fs/cgroup/member/cpuset.cpus.partition",
            "member\n",
        );
        write(base, "sys/fs/cgroup/member/cpuset.cpus.effective", "0-7\n");
        let set = read_isolated_partitions(&Root::new(base)).unwrap();
        assert_eq!(set.to_list(), "3-4");
        // Without cpuset in the root's subtree_control no child has cpuset files.
        write(base, "sys/fs/cgroup/cgroup.subtree_control", "memory\n");
        assert!(
            read_isolated_partitions(&Root::new(base))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_malformed_or_special_isolated_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "sys/fs/cgroup/cpuset.cpus.isolated",
            "two-three\n",
        );
        let err = read_isolated_partitions(&Root::new(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cpuset.cpus.isolated"), "{err}");
        fs::remove_file(dir.path().join("sys/fs/cgroup/cpuset.cpus.isolated")).unwrap();
        nix::unistd::mkfifo(
            &dir.path().join("sys/fs/cgroup/cpuset.cpus.isolated"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        let err = read_isolated_partitions(&Root::new(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cpuset.cpus.isolated"), "{err}");
    }
}
