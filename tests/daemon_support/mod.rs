//! Harness for running the real `steerd run` on a generated tree.
//!
//! * [`Steerd`]: the child process, killed on drop (also when a test fails), with its
//!   stderr collected line by line, and helpers for signals, `/metrics` and `/decisions`.
//! * [`FakeKernel`]: a thread that plays the kernel for the tree: every few milliseconds
//!   it reads where each queue IRQ fires (`smp_affinity_list`) and each queue's
//!   `rps_cpus`, puts the queue's packets there, and rewrites `proc/stat`,
//!   `proc/net/softnet_stat` and `proc/interrupts` as the kernel would count them. So
//!   the fake machine reacts to steerd's writes, and a test can change the load or pull a
//!   device out while steerd runs.
//! * [`TreeFiles`]: a copy of every writable-looking file of the tree, to compare before
//!   and after.
//!
//! Every wait is bounded: [`wait_until`] polls a condition against a deadline and fails
//! with the daemon's stderr when it runs out.

#![allow(dead_code)]

#[allow(unused_imports)] // not every test that includes the harness runs the fake kernel
pub use steerd_testkit::fake_kernel::{FakeKernel, QueueLoad};

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use steerd::CpuSet;
use steerd::decisions::Decision;

/// The daemon's tick in these tests.
pub const INTERVAL: &str = "100ms";

/// Polls `condition` every 20 ms until it holds; panics naming `what` (and showing the
/// daemon's stderr, when given) once `timeout` has passed.
pub fn wait_until(
    timeout: Duration,
    what: &str,
    daemon: Option<&Steerd>,
    mut condition: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return;
        }
        if Instant::now() >= deadline {
            let log = daemon.map_or(String::new(), |d| d.stderr_text());
            panic!("timed out after {timeout:?} waiting for: {what}\n--- steerd stderr ---\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A loopback address with a port nobody listens on right now.
pub fn free_loopback_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr")
}

/// One stderr line and when the test saw it.
#[derive(Debug, Clone)]
pub struct LogLine {
    pub at: Instant,
    pub text: String,
}

/// A running `steerd run`. Dropping it kills the process (SIGKILL) if it still runs.
pub struct Steerd {
    child: Option<Child>,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<Vec<LogLine>>>,
    reader: Option<JoinHandle<()>>,
}

impl Steerd {
    /// Starts `steerd run --root ROOT --interval 100ms --metrics-listen <free port>`,
    /// with `--config` when given, and waits until `/metrics` answers.
    pub fn start(root: &Path, config: Option<&Path>) -> Steerd {
        Steerd::start_with(root, config, &[])
    }

    pub fn start_with(root: &Path, config: Option<&Path>, extra: &[&str]) -> Steerd {
        Steerd::start_ticking(root, config, INTERVAL, extra)
    }

    /// Started with its tick `interval` instead of [`INTERVAL`].
    pub fn start_ticking(
        root: &Path,
        config: Option<&Path>,
        interval: &str,
        extra: &[&str],
    ) -> Steerd {
        let mut last_error = String::new();
        // The port is free when chosen but another test may take it before steerd binds
        // it: try a few ports.
        for _ in 0..5 {
            let addr = free_loopback_addr();
            let mut command = Command::new(env!("CARGO_BIN_EXE_steerd"));
            command
                .arg("run")
                .arg("--root")
                .arg(root)
                .args(["--interval", interval])
                .arg("--metrics-listen")
                .arg(addr.to_string())
                .args(extra)
                .env_remove("JOURNAL_STREAM")
                .env_remove("NOTIFY_SOCKET")
                .env_remove("WATCHDOG_USEC")
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            if let Some(config) = config {
                command.arg("--config").arg(config);
            }
            let mut child = command.spawn().expect("start steerd");
            let stderr = Arc::new(Mutex::new(Vec::new()));
            let pipe = child.stderr.take().expect("stderr pipe");
            let reader = std::thread::spawn({
                let stderr = stderr.clone();
                move || {
                    for line in BufReader::new(pipe).lines() {
                        let Ok(text) = line else { break };
                        stderr.lock().unwrap().push(LogLine {
                            at: Instant::now(),
                            text,
                        });
                    }
                }
            });
            let mut daemon = Steerd {
                child: Some(child),
                addr,
                stderr,
                reader: Some(reader),
            };
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if steerd::status::get(addr, "/metrics").is_ok() {
                    return daemon;
                }
                if let Some(status) = daemon.try_exit() {
                    last_error = format!("steerd exited with {status}:\n{}", daemon.stderr_text());
                    break;
                }
                if Instant::now() >= deadline {
                    panic!(
                        "steerd did not serve /metrics within 15 s:\n{}",
                        daemon.stderr_text()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !last_error.contains("cannot listen") {
                panic!("{last_error}");
            }
        }
        panic!("could not start steerd: {last_error}");
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("running").id() as i32)
    }

    /// Sends a signal to this daemon (and only to it).
    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal steerd");
    }

    /// The exit status if the process has ended.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().expect("try_wait"))
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        self.try_exit().is_none()
    }

    /// Waits (bounded) for the process to end and for its stderr to be read to the end.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.try_exit() {
                break status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "steerd did not exit within {timeout:?}:\n{}",
                    self.stderr_text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.child = None;
        status
    }

    /// Sends `signal` and waits for the exit.
    pub fn stop(&mut self, signal: Signal) -> ExitStatus {
        self.signal(signal);
        self.wait_exit(Duration::from_secs(10))
    }

    /// Every stderr line so far.
    pub fn stderr_lines(&self) -> Vec<LogLine> {
        self.stderr.lock().unwrap().clone()
    }

    pub fn stderr_text(&self) -> String {
        self.stderr_lines()
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Policy notes logged more than once (the text after the timestamp, with its count).
    /// A standing note (a managed IRQ, a value someone else set) is news once, not on
    /// every tick.
    pub fn repeated_notes(&self) -> Vec<(String, usize)> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for line in self.stderr_lines() {
            if line.text.contains("policy note") {
                let text = line
                    .text
                    .split_once(' ')
                    .map_or(line.text.as_str(), |(_, t)| t);
                *counts.entry(text.to_string()).or_default() += 1;
            }
        }
        counts.into_iter().filter(|(_, n)| *n > 1).collect()
    }

    /// GET `path` from the daemon's HTTP endpoint: the body, or the status line.
    #[allow(dead_code)]
    pub fn get(&self, path: &str) -> Result<String, String> {
        steerd::status::get(self.addr, path).map_err(|e| e.to_string())
    }

    /// The `/metrics` exposition.
    pub fn metrics(&self) -> String {
        steerd::status::get(self.addr, "/metrics")
            .unwrap_or_else(|e| panic!("GET /metrics: {e}\n--- stderr ---\n{}", self.stderr_text()))
    }

    /// The value of one sample: `name` with its labels exactly as exposed (labels in the
    /// order the registry prints them), e.g. `steerd_ticks_total` or
    /// `steerd_config_reloads_total{result="error"}`. `None` when absent.
    pub fn metric(&self, series: &str) -> Option<f64> {
        sample(&self.metrics(), series)
    }

    /// The sum of every sample of a family (all label sets).
    pub fn metric_sum(&self, family: &str) -> f64 {
        family_sum(&self.metrics(), family)
    }

    /// The decision log.
    pub fn decisions(&self) -> Vec<Decision> {
        steerd::status::fetch_decisions(self.addr).unwrap_or_else(|e| {
            panic!(
                "GET /decisions: {e}\n--- stderr ---\n{}",
                self.stderr_text()
            )
        })
    }

    /// Waits until the decision log holds a decision that `matches`, and returns it. A
    /// decision enters the log just after its write, so a test that saw a file change
    /// must wait for the log to catch up (on a loaded machine it can read in between).
    pub fn wait_for_decision(&self, what: &str, matches: impl Fn(&Decision) -> bool) -> Decision {
        let mut found = None;
        wait_until(
            Duration::from_secs(20),
            &format!("a decision: {what}"),
            Some(self),
            || {
                found = self.decisions().into_iter().find(|d| matches(d));
                found.is_some()
            },
        );
        found.unwrap_or_else(|| panic!("no decision: {what}"))
    }

    /// Waits until the daemon has run `more` ticks after now.
    pub fn wait_ticks(&self, more: u64) {
        let start = self.metric("steerd_ticks_total").unwrap_or(0.0) as u64;
        wait_until(
            Duration::from_secs(20),
            &format!("{more} more ticks"),
            Some(self),
            || self.metric("steerd_ticks_total").unwrap_or(0.0) as u64 >= start + more,
        );
    }
}

impl Drop for Steerd {
    /// Kills the daemon if it still runs. When the test failed (or `STEERD_TEST_LOG` is
    /// set), prints its stderr, which `cargo test` shows with the failure.
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("STEERD_TEST_LOG").is_some() {
            eprintln!("--- steerd stderr ---\n{}", self.stderr_text());
        }
        if let Some(mut child) = self.child.take() {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// The value of one exposed sample line (`series value`).
pub fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        let value = rest.strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// The sum over every label set of a family's samples (`family` or `family{...}`).
pub fn family_sum(exposition: &str, family: &str) -> f64 {
    exposition
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(family)?;
            let value = if let Some(labelled) = rest.strip_prefix('{') {
                labelled.split_once("} ")?.1
            } else {
                rest.strip_prefix(' ')?
            };
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .sum()
}

/// The text of every regular file of a tree (symlinks are not followed, so each file is
/// seen once), except the counters and `effective_affinity*` that the fake kernel writes
/// and steerd's own `run/` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFiles(pub BTreeMap<PathBuf, String>);

impl TreeFiles {
    pub fn read(root: &Path) -> TreeFiles {
        let mut files = BTreeMap::new();
        collect(root, root, &mut files);
        TreeFiles(files)
    }

    /// Files whose text differs from `before` (or that appeared): path, before, now.
    pub fn changed_since(&self, before: &TreeFiles) -> Vec<(PathBuf, Option<String>, String)> {
        self.0
            .iter()
            .filter(|(path, text)| before.0.get(*path) != Some(text))
            .map(|(path, text)| (path.clone(), before.0.get(path).cloned(), text.clone()))
            .collect()
    }

    pub fn get(&self, relative: &str) -> Option<&str> {
        self.0.get(Path::new(relative)).map(String::as_str)
    }
}

fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let relative = path.strip_prefix(root).expect("under root").to_path_buf();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let name = relative.to_string_lossy();
        if name == "run"
            || name == "proc/stat"
            || name == "proc/interrupts"
            || name == "proc/net/softnet_stat"
            || name.ends_with(".steerd-tmp")
            || name.contains("effective_affinity")
        {
            continue;
        }
        if meta.is_dir() {
            collect(root, &path, files);
        } else if meta.is_file()
            && let Ok(text) = fs::read_to_string(&path)
        {
            files.insert(relative, text);
        }
    }
}

/// The CPUs a file steerd may write names: a cpulist for `smp_affinity_list`, a mask for
/// `rps_cpus`; `None` for other files.
pub fn cpus_named_by(path: &Path, text: &str) -> Option<CpuSet> {
    let name = path.file_name()?.to_str()?;
    match name {
        "smp_affinity_list" => CpuSet::parse_list(text.trim()).ok(),
        "rps_cpus" | "smp_affinity" => CpuSet::parse_mask(text.trim()).ok(),
        _ => None,
    }
}

/// Writes `text` to `relative` under `root`.
pub fn write_file(root: &Path, relative: &str, text: &str) {
    fs::write(root.join(relative), text).unwrap_or_else(|e| panic!("write {relative}: {e}"));
}

/// Reads a knob under `root`, trimmed. On a fake root steerd's write (open with
/// `O_TRUNC`, then `write`) can be seen half done, as an empty file, where a kernel file
/// would show the old value: an empty read is retried (bounded) until the write lands.
pub fn read_file(root: &Path, relative: &str) -> String {
    for _ in 0..200 {
        let text = fs::read_to_string(root.join(relative))
            .unwrap_or_else(|e| panic!("read {relative}: {e}"));
        if !text.trim().is_empty() {
            return text.trim().to_string();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("{relative} stayed empty");
}
