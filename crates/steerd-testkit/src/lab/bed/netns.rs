//! The bed's two network namespaces joined by a multi-queue veth pair, the per-packet cost
//! in the receiver's (never-matching policy-routing rules), and a private view of the
//! receiver's `/sys`: a detached sysfs mount made from inside that namespace, which lives
//! only as long as its file descriptor and never appears in any mount table.
//!
//! Dropping the value deletes both namespaces, and with them the veth pair and the rules.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::lab::netns::enter;
use crate::lab::{LabError, Result, io, run_cmd};

/// The sender's and the receiver's addresses: RFC 2544's benchmark range, only inside the
/// bed's namespaces.
pub const SENDER_ADDR: &str = "198.18.0.1";
pub const RECEIVER_ADDR: &str = "198.18.0.2";
pub const SENDER_IF: &str = "bed-tx";
pub const RECEIVER_IF: &str = "bed-rx";

/// One namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    fn create(name: String) -> Result<Netns> {
        run_cmd("ip", &["netns", "add", &name])?;
        let ns = Netns { name };
        run_cmd("ip", &["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs `f` on a thread inside this namespace and returns its result.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let name = self.name.clone();
        std::thread::spawn(move || {
            enter(&name)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(LabError::Guest("a bed thread panicked".into())))
    }

    /// Spawns `f` on a thread that first enters this namespace and, when `cpu` is given,
    /// pins itself there.
    pub fn spawn<T: Send + 'static>(
        &self,
        cpu: Option<usize>,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> std::thread::JoinHandle<Result<T>> {
        let name = self.name.clone();
        std::thread::spawn(move || {
            enter(&name)?;
            if let Some(cpu) = cpu {
                pin(cpu)?;
            }
            f()
        })
    }
}

/// Pins the calling thread to one CPU.
pub fn pin(cpu: usize) -> Result<()> {
    let mut set = nix::sched::CpuSet::new();
    let pinned = set
        .set(cpu)
        .and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set));
    pinned.map_err(|e| LabError::Io {
        what: format!("pinning a bed thread to CPU {cpu}"),
        source: e.into(),
    })
}

impl Drop for Netns {
    fn drop(&mut self) {
        if !self.name.is_empty() {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.name])
                .output();
        }
    }
}

/// The bed's network: sender and receiver namespaces, the veth pair between them, and the
/// receiver's sysfs.
#[derive(Debug)]
pub struct BedNet {
    pub sender: Netns,
    pub receiver: Netns,
    /// The receiver namespace's sysfs, a detached mount (see the module's doc).
    sysfs: OwnedFd,
}

impl BedNet {
    /// Creates `steerd-bed-PID-tx` and `-rx`, the veth pair with `queues` queues on each
    /// end, and `rules` never-matching policy-routing rules in the receiver.
    pub fn create(queues: u32, rules: u32) -> Result<BedNet> {
        let pid = std::process::id();
        let sender = Netns::create(format!("steerd-bed-{pid}-tx"))?;
        let receiver = Netns::create(format!("steerd-bed-{pid}-rx"))?;
        let q = queues.to_string();
        run_cmd(
            "ip",
            &[
                "link",
                "add",
                SENDER_IF,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                &sender.name,
                "type",
                "veth",
                "peer",
                "name",
                RECEIVER_IF,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                &receiver.name,
            ],
        )?;
        for (ns, dev, addr) in [
            (&sender, SENDER_IF, SENDER_ADDR),
            (&receiver, RECEIVER_IF, RECEIVER_ADDR),
        ] {
            run_cmd(
                "ip",
                &[
                    "-n",
                    &ns.name,
                    "addr",
                    "add",
                    &format!("{addr}/30"),
                    "dev",
                    dev,
                ],
            )?;
            run_cmd("ip", &["-n", &ns.name, "link", "set", dev, "up"])?;
        }
        add_rules(&receiver, rules)?;
        let sysfs = receiver.run(detached_sysfs)?;
        Ok(BedNet {
            sender,
            receiver,
            sysfs,
        })
    }

    /// A path inside the receiver namespace's `/sys` (`class/net/...`).
    pub fn sys(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/{rel}", self.sysfs.as_raw_fd()))
    }

    /// The receiver's `rps_cpus` masks, queue by queue, as the kernel prints them: the
    /// queues it has now (a channel change removes and re-creates them).
    pub fn rps_masks(&self) -> Result<Vec<String>> {
        let dir = self.sys(&format!("class/net/{RECEIVER_IF}/queues"));
        let mut queues: Vec<u32> = std::fs::read_dir(&dir)
            .map_err(io(format!("listing {RECEIVER_IF}'s queues")))?
            .filter_map(|entry| {
                let name = entry.ok()?.file_name();
                name.to_str()?.strip_prefix("rx-")?.parse().ok()
            })
            .collect();
        queues.sort_unstable();
        queues
            .into_iter()
            .map(|q| {
                let path = self.sys(&format!("class/net/{RECEIVER_IF}/queues/rx-{q}/rps_cpus"));
                std::fs::read_to_string(&path)
                    .map(|t| t.trim().to_string())
                    .map_err(io(format!("reading {RECEIVER_IF} rx-{q} rps_cpus")))
            })
            .collect()
    }

    /// Gives the receiver `n` receive queues (`ethtool -L bed-rx rx N` in its namespace).
    pub fn set_rx_queues(&self, n: u32) -> Result<()> {
        let n = n.to_string();
        run_cmd(
            "ip",
            &[
                "netns",
                "exec",
                &self.receiver.name,
                "ethtool",
                "-L",
                RECEIVER_IF,
                "rx",
                &n,
            ],
        )
        .map(drop)
    }

    /// Writes one receive queue's file (`rps_cpus`, `rps_flow_cnt`).
    pub fn write_queue(&self, queue: u32, file: &str, value: &str) -> Result<()> {
        let path = self.sys(&format!("class/net/{RECEIVER_IF}/queues/rx-{queue}/{file}"));
        std::fs::write(&path, value).map_err(io(format!(
            "writing {value} to {RECEIVER_IF} rx-{queue} {file}"
        )))
    }

    /// The receiver namespace's `/proc/net/snmp` counter `Udp: NAME`.
    pub fn udp_counter(&self, name: &'static str) -> Result<u64> {
        self.receiver.run(move || {
            let text = std::fs::read_to_string("/proc/thread-self/net/snmp")
                .map_err(io("reading /proc/thread-self/net/snmp"))?;
            snmp_value(&text, "Udp:", name).ok_or_else(|| {
                LabError::Guest(format!("no Udp: {name} in the receiver's /proc/net/snmp"))
            })
        })
    }
}

/// `count` rules `from 10.200.X.Y table 100` in `ns`: no packet of the bed comes from
/// 10.200.0.0/16, so each received packet's input route lookup scans them all, in the
/// softirq path, on the CPU that processes the packet (after RPS).
fn add_rules(ns: &Netns, count: u32) -> Result<()> {
    if count == 0 {
        return Ok(());
    }
    let mut batch = String::new();
    for i in 0..count {
        batch.push_str(&format!(
            "rule add from 10.200.{}.{} table 100 pref {}\n",
            i / 250,
            i % 250 + 1,
            1000 + i
        ));
    }
    let mut child = Command::new("ip")
        .args(["-n", &ns.name, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io("running ip -batch"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(batch.as_bytes())
            .map_err(io("feeding ip -batch"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(io("waiting for ip -batch"))?;
    if !out.status.success() {
        return Err(LabError::Command {
            command: format!("ip -n {} -batch - ({count} rules)", ns.name),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// A sysfs mount of the calling thread's network namespace, not attached anywhere
/// (`fsopen`/`fsconfig`/`fsmount`, Linux 5.2): nix has no wrapper for the new mount API,
/// hence the raw syscalls.
fn detached_sysfs() -> Result<OwnedFd> {
    use nix::libc;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    let failed = |what: &str| LabError::Io {
        what: format!("{what} (a detached sysfs of the receiver's namespace)"),
        source: std::io::Error::last_os_error(),
    };
    // SAFETY: plain syscalls on a NUL-terminated literal and descriptors we own.
    unsafe {
        let fs = libc::syscall(libc::SYS_fsopen, c"sysfs".as_ptr(), libc::FSOPEN_CLOEXEC);
        if fs < 0 {
            return Err(failed("fsopen"));
        }
        let fs = OwnedFd::from_raw_fd(fs as i32);
        let created = libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        );
        if created < 0 {
            return Err(failed("fsconfig"));
        }
        let mount = libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), libc::FSMOUNT_CLOEXEC, 0);
        if mount < 0 {
            return Err(failed("fsmount"));
        }
        Ok(OwnedFd::from_raw_fd(mount as i32))
    }
}

/// The value of `name` in `/proc/net/snmp`'s two `section` lines (names, then values).
pub fn snmp_value(text: &str, section: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(section));
    let names = lines.next()?;
    let values = lines.next()?;
    let at = names.split_whitespace().position(|n| n == name)?;
    values.split_whitespace().nth(at)?.parse().ok()
}
