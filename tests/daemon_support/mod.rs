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

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use steerd::CpuSet;
use steerd::decisions::Decision;
use steerd::fakeroot::{FakeCounters, FakeTree};

/// The daemon's tick in these tests.
pub const INTERVAL: &str = "100ms";

/// How often the fake kernel advances the counters.
const KERNEL_STEP: Duration = Duration::from_millis(25);

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
                .args(["--interval", INTERVAL])
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

/// The packet rate of one receive queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueLoad {
    pub device: String,
    pub queue: u32,
    pub pps: f64,
}

/// Per-packet costs, as the simulator has them (`steerd::sim::machine::Costs`): the
/// interrupting CPU spends `IRQ_COST` per packet, the CPU doing the protocol work `WORK_COST`.
const IRQ_COST_S: f64 = 0.4e-6;
const WORK_COST_S: f64 = 1.6e-6;
/// Packets per interrupt (NAPI polls several per interrupt).
const PACKETS_PER_INTERRUPT: f64 = 16.0;
/// `USER_HZ`.
const TICKS_PER_SECOND: f64 = 100.0;

/// The state behind the fake kernel thread.
struct World {
    tree: FakeTree,
    loads: Vec<QueueLoad>,
    /// Per CPU: processed, dropped, squeezed (fractional, accumulated).
    softnet: Vec<[f64; 3]>,
    /// Per CPU: busy (softirq) and idle ticks.
    ticks: Vec<[f64; 2]>,
    irq_counts: BTreeMap<u32, Vec<f64>>,
    last_step: Instant,
    steps: u64,
    /// 6.1 x86 MSI behaviour: `effective_affinity_list` keeps whatever it said (stale),
    /// and a mask of several CPUs delivers to its last CPU (the vector matrix picks any
    /// CPU of the mask; the lowest is not a rule).
    stale_effective: bool,
}

/// The kernel side of the fake machine, advancing its counters in a thread.
pub struct FakeKernel {
    world: Arc<Mutex<World>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeKernel {
    /// Starts the thread. `loads` can be changed later with [`FakeKernel::set_loads`].
    pub fn start(tree: FakeTree, loads: Vec<QueueLoad>) -> FakeKernel {
        let cpus = tree.machine.cpu_count() as usize;
        let world = Arc::new(Mutex::new(World {
            tree,
            loads,
            softnet: vec![[0.0; 3]; cpus],
            ticks: vec![[0.0, 1000.0]; cpus],
            irq_counts: BTreeMap::new(),
            last_step: Instant::now(),
            steps: 0,
            stale_effective: false,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let mut w = world.lock().unwrap();
            w.step();
        }
        let thread = std::thread::spawn({
            let world = world.clone();
            let stop = stop.clone();
            move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(KERNEL_STEP);
                    world.lock().unwrap().step();
                }
            }
        });
        FakeKernel {
            world,
            stop,
            thread: Some(thread),
        }
    }

    /// Leaves `effective_affinity_list` stale and delivers wide masks to their last CPU
    /// (see `World::stale_effective`).
    pub fn set_stale_effective(&self) {
        self.world.lock().unwrap().stale_effective = true;
    }

    pub fn set_loads(&self, loads: Vec<QueueLoad>) {
        self.world.lock().unwrap().loads = loads;
    }

    /// Counter updates written so far.
    pub fn steps(&self) -> u64 {
        self.world.lock().unwrap().steps
    }

    /// Makes a NIC vanish between two counter updates, as a hot-unplug does: its
    /// `sys/class/net` link, its device directory and its `proc/irq/N` directories go, and
    /// the next `proc/interrupts` and `proc/stat` no longer list its IRQs.
    pub fn unplug(&self, device: &str) {
        let mut w = self.world.lock().unwrap();
        let index = w.nic_index(device);
        let root = w.tree.root.clone();
        let class_link = root.join("sys/class/net").join(device);
        let device_dir = fs::canonicalize(&class_link).expect("device dir");
        let pci_dir = fs::canonicalize(class_link.join("device")).expect("pci dir");
        fs::remove_file(&class_link).expect("remove sys/class/net link");
        fs::remove_dir_all(&device_dir).expect("remove the net device");
        fs::remove_dir_all(&pci_dir).expect("remove the PCI function");
        let mut irqs = w.tree.queue_irqs.remove(index);
        irqs.push(w.tree.misc_irqs.remove(index));
        for irq in &irqs {
            fs::remove_dir_all(root.join(format!("proc/irq/{irq}"))).expect("remove proc/irq/N");
            w.irq_counts.remove(irq);
        }
        w.tree.machine.nics.remove(index);
        w.loads.retain(|l| l.device != device);
        w.step();
    }

    /// A channel-count change on a NIC (see [`FakeTree::set_channels`]), between two
    /// counter updates.
    pub fn set_channels(&self, device: &str, active: u32, driver_default: &dyn Fn(u32) -> CpuSet) {
        let w = self.world.lock().unwrap();
        let nic = w.nic_index(device);
        w.tree
            .set_channels(nic, active, driver_default)
            .expect("change the channel count");
    }

    /// Stops the thread (also on drop).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for FakeKernel {
    fn drop(&mut self) {
        self.stop();
    }
}

impl World {
    /// Advances the counters by the time since the last step and writes them.
    /// The index of a NIC of the fake machine, by name.
    fn nic_index(&self, device: &str) -> usize {
        self.tree
            .machine
            .nics
            .iter()
            .position(|n| n.name == device)
            .expect("no such NIC")
    }

    fn step(&mut self) {
        let now = Instant::now();
        let dt = now.duration_since(self.last_step).as_secs_f64();
        self.last_step = now;
        let root = self.tree.root.clone();
        let cpus = self.tree.machine.cpu_count();
        let mut busy = vec![0.0f64; cpus as usize];
        let mut processed = vec![0.0f64; cpus as usize];
        for load in &self.loads {
            let Some(nic) = self
                .tree
                .machine
                .nics
                .iter()
                .position(|n| n.name == load.device)
            else {
                continue;
            };
            let Some(&irq) = self.tree.queue_irqs[nic].get(load.queue as usize) else {
                continue;
            };
            // Where the IRQ fires: the first CPU of its affinity, as x86 picks one.
            let Some(affinity) =
                read_trimmed(&root.join(format!("proc/irq/{irq}/smp_affinity_list")))
                    .and_then(|t| CpuSet::parse_list(&t).ok())
            else {
                continue;
            };
            let pick = if self.stale_effective {
                affinity.last()
            } else {
                affinity.first()
            };
            let Some(irq_cpu) = pick else {
                continue;
            };
            let effective = root.join(format!("proc/irq/{irq}/effective_affinity_list"));
            if !self.stale_effective
                && read_trimmed(&effective).as_deref() != Some(irq_cpu.to_string().as_str())
            {
                let _ = fs::write(&effective, format!("{irq_cpu}\n"));
            }
            let rps = read_trimmed(&root.join(format!(
                "sys/class/net/{}/queues/rx-{}/rps_cpus",
                load.device, load.queue
            )))
            .and_then(|t| CpuSet::parse_mask(&t).ok())
            .unwrap_or_default();
            let packets = load.pps * dt;
            busy[irq_cpu as usize] += packets * IRQ_COST_S;
            let counts = self
                .irq_counts
                .entry(irq)
                .or_insert_with(|| vec![0.0; cpus as usize]);
            counts[irq_cpu as usize] += packets / PACKETS_PER_INTERRUPT;
            // The kernel's RPS: the flow hash picks one CPU of the mask; many flows
            // spread evenly.
            let workers: Vec<u32> = if rps.is_empty() {
                vec![irq_cpu]
            } else {
                rps.iter().filter(|&c| c < cpus).collect()
            };
            for &cpu in &workers {
                let share = packets / workers.len() as f64;
                processed[cpu as usize] += share;
                busy[cpu as usize] += share * WORK_COST_S;
            }
        }
        for cpu in 0..cpus as usize {
            let capacity = dt;
            let served = busy[cpu].min(capacity);
            let served_share = if busy[cpu] > 0.0 {
                served / busy[cpu]
            } else {
                1.0
            };
            let done = processed[cpu] * served_share;
            let lost = processed[cpu] - done;
            self.softnet[cpu][0] += done;
            self.softnet[cpu][1] += lost;
            if served_share < 1.0 {
                self.softnet[cpu][2] += dt * 1000.0;
            }
            let all_ticks = dt * TICKS_PER_SECOND;
            let busy_ticks = all_ticks * (served / capacity.max(1e-9));
            self.ticks[cpu][0] += busy_ticks;
            self.ticks[cpu][1] += all_ticks - busy_ticks;
        }
        let counters = FakeCounters {
            softnet: self
                .softnet
                .iter()
                .map(|s| (s[0] as u64 as u32, s[1] as u64 as u32, s[2] as u64 as u32))
                .collect(),
            cpu_ticks: self
                .ticks
                .iter()
                .map(|t| (0, 0, t[1] as u64, 0, t[0] as u64))
                .collect(),
            irq_counts: self
                .irq_counts
                .iter()
                .map(|(&irq, counts)| (irq, counts.iter().map(|&c| c as u64).collect()))
                .collect(),
        };
        self.tree
            .write_counters(&counters)
            .expect("write the fake counters");
        self.steps += 1;
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|t| t.trim().to_string())
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
