//! A throwaway machine for tests: the host's own systemd booted as PID 1 of fresh PID,
//! mount, UTS, IPC, network and cgroup namespaces, on an overlay of `/` whose upper layer
//! is a tmpfs, so that installing units, binaries or packages in it changes nothing on
//! the host. Tests drive it with `nsenter` (`systemctl`, `journalctl`, any command), copy
//! files in through `/proc/PID/root`, and on drop it powers off and everything it made is
//! gone: its mounts lived only in its own mount namespace, and the harness removes the
//! cgroup it booted in and its empty mount point directory.
//!
//! `boot.sh` beside this file builds the root and execs systemd; it keeps what systemd
//! would change on the host out of reach (see its header).
//!
//! ```ignore
//! let machine = systemd_ns::boot_or_skip("my_test")?; // in a test returning TestResult
//! machine.copy_in(Path::new(env!("CARGO_BIN_EXE_steerd")), "/usr/sbin/steerd", 0o755);
//! machine.write("/etc/systemd/system/x.service", "...", 0o644);
//! machine.systemctl(&["daemon-reload"]).ok();
//! assert_eq!(machine.show("x.service", "ActiveState"), "active");
//! ```
//!
//! Every command is bounded in time ([`COMMAND_TIMEOUT`] unless said otherwise); a boot
//! takes 1-3 s, a power-off 1-2 s.

#![allow(dead_code)]

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::suite::{Skip, in_ci, not_here, skip};

/// How long one command in the machine may take before it is killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the boot may take until `systemctl is-system-running` answers.
const BOOT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a power-off may take before the namespace's PID 1 is killed.
const POWEROFF_TIMEOUT: Duration = Duration::from_secs(20);
/// The target the machine boots: basic.target and nothing the host enabled.
const TARGET: &str = "steerd-test.target";

/// What a command printed, and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    /// The command line, for messages.
    pub command: String,
    /// `None` when it was killed (timeout or signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The stdout of a command that must succeed; panics with everything it printed.
    pub fn ok(&self) -> &str {
        assert!(self.success(), "{self}");
        &self.stdout
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` exited with {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.code, self.stdout, self.stderr
        )
    }
}

/// Runs a command with a deadline; a command still running then is killed (and its
/// output so far returned with `code: None`).
pub fn run_bounded(command: &mut Command, timeout: Duration) -> Output {
    let description = format!("{command:?}");
    let mut child = match command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            return Output {
                command: description,
                code: None,
                stdout: String::new(),
                stderr: format!("cannot start: {e}"),
            };
        }
    };
    // Read both pipes on threads so that a chatty command cannot block on a full pipe.
    let stdout = read_on_thread(child.stdout.take());
    let stderr = read_on_thread(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let code = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut stderr = stderr.join().unwrap_or_default();
    if code.is_none() {
        stderr.push_str(&format!("\n[killed after {timeout:?}]"));
    }
    Output {
        command: description,
        code,
        stdout: stdout.join().unwrap_or_default(),
        stderr,
    }
}

fn read_on_thread(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    })
}

/// Polls `condition` every 50 ms until it holds; panics naming `what` after `timeout`.
pub fn wait_until(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The host's systemd binary, if there is one.
fn systemd_binary() -> Option<&'static str> {
    ["/lib/systemd/systemd", "/usr/lib/systemd/systemd"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// Where the host's cgroup2 hierarchy is mounted, if it is.
fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        let mount_point = left.split_whitespace().nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(mount_point))
    })
}

/// This process's cgroup2 path (`0::/path`).
fn own_cgroup2() -> Option<String> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_start_matches('/').to_string())
}

/// Why a machine cannot be booted here, if it cannot (without trying).
pub fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: booting systemd in namespaces needs root".into());
    }
    for tool in ["unshare", "nsenter", "mount", "mknod"] {
        if run_bounded(
            Command::new("sh").args(["-c", &format!("command -v {tool}")]),
            Duration::from_secs(5),
        )
        .code
            != Some(0)
        {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    if systemd_binary().is_none() {
        return Some(
            "no systemd binary at /lib/systemd/systemd or /usr/lib/systemd/systemd".into(),
        );
    }
    if cgroup2_mount().is_none() || own_cgroup2().is_none() {
        return Some("no cgroup2 hierarchy mounted on the host".into());
    }
    None
}

/// Boots a machine, or returns why it cannot: a missing prerequisite (not root, a tool
/// missing; a failure under `CI=true`), or a boot that failed on this machine with every
/// prerequisite present (a skip saying why; under `CI=true` a failure).
pub fn boot_or_skip(test: &str) -> Result<Machine, Skip> {
    if let Some(reason) = skip_reason() {
        return Err(skip(reason).unwrap_err());
    }
    match Machine::boot() {
        Ok(machine) => Ok(machine),
        Err(e) if in_ci() => panic!("{test}: cannot boot systemd in namespaces: {e}"),
        Err(e) => {
            Err(not_here(format!("cannot boot systemd in namespaces here: {e}")).unwrap_err())
        }
    }
}

/// A booted machine. Dropping it powers it off (killing its PID 1 if that does not end
/// it in time) and removes its cgroup and mount point.
pub struct Machine {
    /// The `unshare` process; the machine's PID 1 is its only child.
    unshare: Option<Child>,
    /// The machine's PID 1 (systemd) as the host sees it.
    pid: i32,
    /// The (host) directory the machine's tmpfs was mounted on; empty on the host.
    mount_point: Option<tempfile::TempDir>,
    /// The cgroup the machine booted in (its cgroup namespace's root).
    cgroup: PathBuf,
    /// boot.sh's own output (what went wrong when the boot fails).
    boot_log: PathBuf,
}

impl Machine {
    /// Boots systemd and waits until it has finished starting up (bounded).
    pub fn boot() -> Result<Machine, String> {
        let systemd = systemd_binary().ok_or("no systemd binary")?;
        let cgroup_root = cgroup2_mount().ok_or("no cgroup2 mount")?;
        let own = own_cgroup2().ok_or("no cgroup2 membership")?;
        let mount_point = tempfile::Builder::new()
            .prefix("steerd-sdns-")
            .tempdir()
            .map_err(|e| format!("cannot create a mount point directory: {e}"))?;
        let name = mount_point
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("steerd-sdns")
            .to_string();
        let cgroup = cgroup_root.join(own).join(&name);
        fs::create_dir(&cgroup)
            .map_err(|e| format!("cannot create cgroup {}: {e}", cgroup.display()))?;
        let boot_log = std::env::temp_dir().join(format!("{name}.log"));
        let log = fs::File::create(&boot_log).map_err(|e| format!("boot log: {e}"))?;
        let log2 = log.try_clone().map_err(|e| format!("boot log: {e}"))?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/systemd_ns/boot.sh");
        // The shell moves itself into the fresh cgroup, then becomes `unshare`, whose
        // child becomes PID 1 in the new namespaces. --kill-child: if `unshare` dies,
        // so does the machine.
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(r#"echo 0 > "$1/cgroup.procs" && shift && exec "$@""#)
            .arg("sh")
            .arg(&cgroup)
            .args([
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                "--mount",
                "--uts",
                "--ipc",
                "--net",
                "--cgroup",
                "--propagation",
                "private",
                "--",
                "sh",
            ])
            .arg(&script)
            .arg(mount_point.path())
            .arg(TARGET)
            .arg(systemd)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn();
        let unshare = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = fs::remove_dir(&cgroup);
                return Err(format!("cannot start unshare: {e}"));
            }
        };
        let mut machine = Machine {
            pid: 0,
            unshare: Some(unshare),
            mount_point: Some(mount_point),
            cgroup,
            boot_log,
        };
        machine.wait_for_boot()?;
        Ok(machine)
    }

    fn wait_for_boot(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + BOOT_TIMEOUT;
        let unshare_pid = self.unshare.as_ref().map_or(0, Child::id);
        // PID 1 of the machine: the only child of `unshare`, once it runs systemd.
        loop {
            if let Some(Ok(Some(status))) = self.unshare.as_mut().map(Child::try_wait) {
                return Err(format!(
                    "boot.sh ended ({status}): {}",
                    self.boot_log_text()
                ));
            }
            let children =
                fs::read_to_string(format!("/proc/{unshare_pid}/task/{unshare_pid}/children"))
                    .unwrap_or_default();
            if let Some(pid) = children
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
            {
                let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
                if exe.ends_with("systemd") {
                    self.pid = pid;
                    break;
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("systemd did not start: {}", self.boot_log_text()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Until the manager answers and has finished starting up.
        loop {
            let state = self.run_for(&["systemctl", "is-system-running"], Duration::from_secs(5));
            let state = state.stdout.trim();
            if state == "running" || state == "degraded" {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let jobs = self.run(&["systemctl", "list-jobs", "--no-pager"]);
                return Err(format!(
                    "system state still {state:?} after {BOOT_TIMEOUT:?}\n{jobs}\n{}",
                    self.boot_log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn boot_log_text(&self) -> String {
        fs::read_to_string(&self.boot_log).unwrap_or_default()
    }

    /// The machine's PID 1 as the host sees it.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The host path of a path inside the machine (through `/proc/PID/root`): files
    /// written there land in the machine's tmpfs layer.
    pub fn path(&self, inside: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.pid)).join(inside.trim_start_matches('/'))
    }

    /// Writes a file inside the machine (parents created), with `mode`.
    pub fn write(&self, inside: &str, text: &str, mode: u32) {
        let path = self.path(inside);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir for {inside}: {e}"));
        }
        fs::write(&path, text).unwrap_or_else(|e| panic!("write {inside}: {e}"));
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("chmod {inside}: {e}"));
    }

    /// Copies a host file into the machine (parents created), with `mode`.
    pub fn copy_in(&self, from: &Path, inside: &str, mode: u32) {
        let path = self.path(inside);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir for {inside}: {e}"));
        }
        fs::copy(from, &path)
            .unwrap_or_else(|e| panic!("copy {} to {inside}: {e}", from.display()));
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("chmod {inside}: {e}"));
    }

    /// Runs a command in all of the machine's namespaces (as its root), bounded by
    /// [`COMMAND_TIMEOUT`].
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_for(args, COMMAND_TIMEOUT)
    }

    /// [`Machine::run`] with another time limit.
    pub fn run_for(&self, args: &[&str], timeout: Duration) -> Output {
        let mut command = Command::new("nsenter");
        command
            .args(["-t", &self.pid.to_string(), "-a", "--"])
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("SYSTEMD_PAGER", "")
            .env("SYSTEMD_COLORS", "0");
        run_bounded(&mut command, timeout)
    }

    /// Runs a shell script in the machine.
    pub fn sh(&self, script: &str) -> Output {
        self.run(&["sh", "-c", script])
    }

    /// `systemctl ARGS...` in the machine.
    pub fn systemctl(&self, args: &[&str]) -> Output {
        let mut all = vec!["systemctl", "--no-pager"];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// One property of a unit (`systemctl show -p NAME --value`).
    pub fn show(&self, unit: &str, property: &str) -> String {
        self.systemctl(&["show", "-p", property, "--value", unit])
            .stdout
            .trim()
            .to_string()
    }

    /// The journal of one unit, messages only.
    pub fn journal(&self, unit: &str) -> String {
        self.run(&["journalctl", "--no-pager", "-o", "cat", "-u", unit])
            .stdout
    }

    /// Runs `f` on a thread that has joined the machine's network namespace (to talk
    /// to a service listening on the machine's loopback).
    pub fn in_netns<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/proc/{}/ns/net", self.pid);
        std::thread::spawn(move || {
            let file = fs::File::open(&path).expect("open the machine's netns");
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .expect("join the machine's netns");
            f()
        })
        .join()
        .expect("netns thread")
    }

    /// Powers the machine off and waits for it to end; also done on drop.
    pub fn poweroff(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let Some(mut unshare) = self.unshare.take() else {
            return;
        };
        if self.pid > 0 && matches!(unshare.try_wait(), Ok(None)) {
            let _ = self.run_for(
                &["systemctl", "poweroff", "--no-block"],
                Duration::from_secs(10),
            );
            let deadline = Instant::now() + POWEROFF_TIMEOUT;
            while matches!(unshare.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if matches!(unshare.try_wait(), Ok(None)) {
            eprintln!("systemd_ns: the machine did not power off in time; killing it");
            // SIGKILL to `unshare`: --kill-child kills PID 1, and with it the namespace.
            let _ = unshare.kill();
        }
        let _ = unshare.wait();
        // The cgroups systemd made inside (deepest first); they empty as the last
        // processes are reaped.
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.cgroup.exists() {
            remove_cgroup_tree(&self.cgroup);
            if Instant::now() >= deadline {
                eprintln!(
                    "systemd_ns: could not remove cgroup {}",
                    self.cgroup.display()
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = fs::remove_file(&self.boot_log);
        // The tmpfs was mounted in the machine's own mount namespace: the host's
        // directory is empty.
        self.mount_point.take();
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if std::thread::panicking() && self.unshare.is_some() && self.pid > 0 {
            let journal = self.run_for(
                &[
                    "journalctl",
                    "--no-pager",
                    "-n",
                    "80",
                    "-o",
                    "short-monotonic",
                ],
                Duration::from_secs(10),
            );
            eprintln!(
                "--- the machine's journal (last 80 lines) ---\n{}",
                journal.stdout
            );
        }
        self.shut_down();
    }
}

/// Removes a cgroup directory and every cgroup under it, deepest first.
fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&entry.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}
