//! Threaded NAPI: the kernel threads that poll a device's queues when
//! `/sys/class/net/DEV/threaded` is 1, found by their names, with where they may run.
//!
//! With threaded NAPI the receive work runs wherever the scheduler puts `napi/DEV-ID`, not
//! on the CPU of the queue's interrupt, so steerd pins each receive thread to its queue's
//! IRQ CPU. The kernel names each thread `napi/<device>-<napi id>` (`napi_kthread_create`);
//! transmit-only NAPIs have no id (`napi/eth0-0`, seen on virtio_net with 6.12) and are
//! left alone. Threads are found by a scan of `proc/*/comm`, done only at discovery and
//! only when some device is threaded: netdev netlink's `napi-get` also reports the thread
//! id, but not on 6.1, whose NAPI threads are just as real.
//!
//! The name is also the thread's identity: a pid can be reused by an unrelated process
//! once the thread is gone (`threaded` set back to 0), so every read checks that the pid
//! still names the same thread ([`parse_status`]) and steerd never touches anything else.
//! `comm` holds at most 15 bytes: a device whose thread names are cut short
//! (`napi/enp94s0f0np0-8193`) cannot be matched by name and is not pinned.

use std::path::Path;

use crate::Root;
use crate::cpuset::{CpuSet, CpuSetError};
use crate::error::Error;
use crate::model::inventory::ThreadedMode;

/// The longest `comm` the kernel keeps (`TASK_COMM_LEN` - 1).
pub const COMM_MAX: usize = 15;

/// The most bytes read of a `proc/PID/status` (about 1.5 KiB on 6.x; a 65536-CPU
/// `Cpus_allowed` mask adds 18 KiB).
const MAX_STATUS_BYTES: u64 = 256 * 1024;

/// The most bytes read of a `proc/PID/comm`.
const MAX_COMM_BYTES: u64 = 64;

/// One NAPI polling thread.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NapiThread {
    pub pid: u32,
    /// Its name (`napi/eth0-8193`), which identifies it.
    pub name: String,
    /// The NAPI id in its name (0 for a transmit-only NAPI).
    pub napi_id: u32,
    /// Where it may run (`Cpus_allowed_list`).
    pub affinity: CpuSet,
    /// The CPU it last ran on (`proc/PID/stat` field 39), when read.
    pub cpu: Option<u32>,
}

/// The thread name of a device's NAPI, as `comm` shows it; `None` when `comm` would cut it
/// short (it could then not be told from another device's).
pub fn thread_name(device: &str, napi_id: u32) -> Option<String> {
    let name = format!("napi/{device}-{napi_id}");
    (name.len() <= COMM_MAX).then_some(name)
}

/// The NAPI id a thread name gives for `device`, if it is one of that device's threads.
pub fn napi_id_of(comm: &str, device: &str) -> Option<u32> {
    comm.strip_prefix("napi/")?
        .strip_prefix(device)?
        .strip_prefix('-')?
        .parse()
        .ok()
}

/// Every NAPI thread of `devices` under `root`, by pid. A process that ends during the
/// scan is skipped; a `proc` that cannot be listed is the error.
pub fn scan(root: &Root, devices: &[&str]) -> Result<Vec<NapiThread>, Error> {
    let proc_dir = root.path("proc");
    let entries = std::fs::read_dir(&proc_dir).map_err(|e| Error::io(&proc_dir, e))?;
    let mut threads = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let comm_path = entry.path().join("comm");
        let Ok(Some(comm)) = crate::limits::read_optional_bounded(&comm_path, MAX_COMM_BYTES)
        else {
            continue;
        };
        let comm = comm.trim_end_matches('\n');
        let Some(napi_id) = devices.iter().find_map(|d| napi_id_of(comm, d)) else {
            continue;
        };
        if let Ok(Some(affinity)) = read_affinity(root, pid, comm) {
            threads.push(NapiThread {
                pid,
                name: comm.to_string(),
                napi_id,
                affinity,
                cpu: read_time(root, pid).map(|(_, cpu)| cpu),
            });
        }
    }
    threads.sort_by_key(|t| t.pid);
    Ok(threads)
}

/// Where thread `pid` may run, if `pid` is still the thread called `name`; `None` when it
/// is gone or is another process now.
pub fn read_affinity(root: &Root, pid: u32, name: &str) -> Result<Option<CpuSet>, Error> {
    let path = status_path(root, pid);
    let Some(text) = crate::limits::read_optional_bounded(&path, MAX_STATUS_BYTES)? else {
        return Ok(None);
    };
    match parse_status(&text, name) {
        Ok(found) => Ok(found),
        Err(reason) => Err(Error::parse(&path, 0, reason.to_string())),
    }
}

/// `proc/PID/status`.
pub fn status_path(root: &Root, pid: u32) -> std::path::PathBuf {
    root.path(format!("proc/{pid}/status"))
}

/// Why a `proc/PID/status` text does not say where its thread may run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusError {
    #[error("no Name line")]
    NoName,
    #[error("no Cpus_allowed_list line")]
    NoCpusAllowed,
    /// A `Cpus_allowed_list` that is not a CPU list.
    #[error(transparent)]
    Cpus(#[from] CpuSetError),
}

/// `Cpus_allowed_list` of a `proc/PID/status` text, when its `Name` is `name` (`None`
/// when it names another process). An error when the lines are missing or malformed.
pub fn parse_status(text: &str, name: &str) -> Result<Option<CpuSet>, StatusError> {
    let field = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
            .map(str::trim)
    };
    let found = field("Name").ok_or(StatusError::NoName)?;
    if found != name {
        return Ok(None);
    }
    let list = field("Cpus_allowed_list").ok_or(StatusError::NoCpusAllowed)?;
    Ok(Some(CpuSet::parse_list(list)?))
}

/// A `proc/PID/status` text with `Cpus_allowed_list` set to `cpus`: how a fake root (a
/// tree, not a kernel) takes an affinity write, so tests run the daemon's real path up to
/// the system call.
pub fn with_affinity(text: &str, cpus: &CpuSet) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.lines() {
        if line.starts_with("Cpus_allowed_list:") {
            out.push_str(&format!("Cpus_allowed_list:\t{}\n", cpus.to_list()));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Lets thread `pid` run only on `cpus`, if `pid` is still the thread called `name`
/// (else ESRCH: it is gone, and whoever has the pid now is not touched). On the host, with
/// `sched_setaffinity`; on a fake root, by rewriting its status file as the kernel would
/// show the new affinity. Between the name check and the call the thread could end and its
/// pid be reused: pids are not reused that fast (the kernel hands them out in order).
pub fn set_affinity(root: &Root, pid: u32, name: &str, cpus: &CpuSet) -> std::io::Result<()> {
    let gone = || std::io::Error::from_raw_os_error(nix::libc::ESRCH);
    let path = status_path(root, pid);
    // Bounded, as every read of a kernel file (`read_affinity`).
    let text = match crate::limits::read_optional_bounded(&path, MAX_STATUS_BYTES) {
        Ok(Some(text)) => text,
        Ok(None) => return Err(gone()),
        // The errno stays, so the write failure is classified as the kernel's answer.
        Err(e) => return Err(e.into_io()),
    };
    match parse_status(&text, name) {
        Ok(Some(_)) => {}
        Ok(None) => return Err(gone()),
        Err(reason) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, reason)),
    }
    if !root.is_host() {
        use std::io::Write as _;
        return crate::limits::open_for_writing(&path)?
            .write_all(with_affinity(&text, cpus).as_bytes());
    }
    let mut set = nix::sched::CpuSet::new();
    for cpu in cpus.iter() {
        set.set(cpu as usize).map_err(std::io::Error::from)?;
    }
    let pid = i32::try_from(pid).map_err(|_| gone())?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &set)
        .map_err(std::io::Error::from)
}

/// A thread's CPU time (utime + stime, USER_HZ ticks) and the CPU it last ran on, from
/// `proc/PID/stat`; `None` when it is gone or the line is not as expected. The name in
/// parentheses may hold spaces and parentheses, so fields are counted after the last `)`.
pub fn read_time(root: &Root, pid: u32) -> Option<(u64, u32)> {
    let path = root.path(format!("proc/{pid}/stat"));
    let text = crate::limits::read_optional_bounded(&path, MAX_STATUS_BYTES)
        .ok()
        .flatten()?;
    parse_stat(&text)
}

/// (utime + stime, processor) of a `proc/PID/stat` line.
pub fn parse_stat(text: &str) -> Option<(u64, u32)> {
    let (_, after_name) = text.rsplit_once(')')?;
    // Fields from 3 (`state`) on: utime is field 14, stime 15, processor 39.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let cpu: u32 = fields.get(36)?.parse().ok()?;
    Some((utime.saturating_add(stime), cpu))
}

/// `dir/threaded`'s text, bounded as every kernel file; `None` when absent.
fn read_threaded(device_dir: &Path) -> Result<Option<String>, Error> {
    crate::limits::read_optional_bounded(&device_dir.join("threaded"), MAX_STATUS_BYTES)
}

/// `dir/threaded` as a mode: 0, 1, or 2 (busy-poll, 6.19: `threaded_show` prints the
/// device's `threaded` byte in decimal, net/core/net-sysfs.c); `None` when absent,
/// unreadable, empty or a value not known here.
pub fn threaded_mode(device_dir: &Path) -> Option<ThreadedMode> {
    let text = read_threaded(device_dir).ok().flatten()?;
    ThreadedMode::from_number(text.trim().parse().ok()?)
}

/// Whether `dir/threaded` says the device's NAPI runs in threads.
pub fn is_threaded(device_dir: &Path) -> Option<bool> {
    read_is_threaded(device_dir).ok().flatten()
}

/// [`is_threaded`] with the failed read kept apart from the absent file: the tick's check
/// (`Sampling::device_changed` in steerd-core) must tell a device the kernel is
/// unregistering (its attributes answer EINVAL or ENODEV while its directory is still
/// there) from one whose `threaded` was switched.
pub fn read_is_threaded(device_dir: &Path) -> Result<Option<bool>, Error> {
    Ok(
        read_threaded(device_dir)?.and_then(|text| match text.trim() {
            "0" => Some(false),
            "" => None,
            // 1, and on 6.19+ 2 (busy-poll threads): threads either way.
            _ => Some(true),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_names_give_their_device_and_id() {
        assert_eq!(napi_id_of("napi/eth0-8193", "eth0"), Some(8193));
        assert_eq!(napi_id_of("napi/eth0-0", "eth0"), Some(0));
        assert_eq!(napi_id_of("napi/eth10-8193", "eth1"), None);
        assert_eq!(napi_id_of("kworker/0:1", "eth0"), None);
        assert_eq!(thread_name("eth0", 8193).as_deref(), Some("napi/eth0-8193"));
        assert_eq!(thread_name("enp94s0f0np0", 8193), None, "cut short by comm");
    }

    #[test]
    fn stat_gives_thread_time_and_its_cpu() {
        // A 6.12 guest's napi thread, and a name with a space and a parenthesis.
        let line = "812 (napi/eth0-8193) S 2 0 0 0 -1 2129984 0 0 0 0 0 3141 0 0 20 0 1 0 \
                    1160 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 3 0 0 \
                    0 0 0 0 0 0 0 0 0 0 0";
        assert_eq!(parse_stat(line), Some((3141, 3)));
        let odd = line.replace("(napi/eth0-8193)", "(a b) c)");
        assert_eq!(parse_stat(&odd), Some((3141, 3)));
        assert_eq!(parse_stat("812 (x) S 2"), None);
    }

    #[test]
    fn status_is_read_only_for_the_named_thread() {
        let text = "Name:\tnapi/eth0-8193\nState:\tS (sleeping)\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n";
        let cpus = parse_status(text, "napi/eth0-8193").unwrap().unwrap();
        assert_eq!(cpus.to_list(), "0-3");
        assert_eq!(parse_status(text, "napi/eth0-8194").unwrap(), None);
        assert_eq!(parse_status("State:\tS\n", "x"), Err(StatusError::NoName));
        assert_eq!(
            parse_status("Name:\tx\n", "x"),
            Err(StatusError::NoCpusAllowed)
        );
        assert!(matches!(
            parse_status("Name:\tx\nCpus_allowed_list:\tzz\n", "x"),
            Err(StatusError::Cpus(_))
        ));
        let moved = with_affinity(text, &CpuSet::from_iter([2]));
        assert_eq!(
            parse_status(&moved, "napi/eth0-8193").unwrap(),
            Some(CpuSet::from_iter([2]))
        );
        assert!(moved.contains("State:\tS (sleeping)\n"));
    }
}
