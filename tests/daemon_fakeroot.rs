//! The whole `steerd run` binary on a generated tree that a fake kernel advances tick by
//! tick (see `daemon_support`): what it writes, what it never writes, what it restores,
//! how it recovers from kill -9, how it reloads, and how it survives a device vanishing.
//!
//! Each test starts its own daemon on its own tree in a temporary directory, on a free
//! loopback port, at a 100 ms tick; every wait is bounded.

mod daemon_support;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use daemon_support::{
    FakeKernel, INTERVAL, QueueLoad, Steerd, TreeFiles, cpus_named_by, read_file, wait_until,
    write_file,
};
use nix::sys::signal::Signal;
use steerd::CpuSet;
use steerd::fakeroot::{FakeMachine, FakeNic, FakeTree};

const WAIT: Duration = Duration::from_secs(10);
const STATE_FILE: &str = "run/steerd/state.json";

/// A generated tree in a temporary directory (`DIR/root`, the config beside it), with a
/// copy of its files as generated.
struct Machine {
    dir: tempfile::TempDir,
    root: std::path::PathBuf,
    tree: FakeTree,
    original: TreeFiles,
}

impl Machine {
    /// Writes `machine`, lets `prepare` change the tree (the "operator's" settings before
    /// steerd starts), and records every file.
    fn new(machine: FakeMachine, prepare: impl FnOnce(&Path, &FakeTree)) -> Machine {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let tree = machine.write(&root).unwrap();
        prepare(&root, &tree);
        let original = TreeFiles::read(&root);
        Machine {
            dir,
            root,
            tree,
            original,
        }
    }

    fn root(&self) -> &Path {
        &self.root
    }

    /// Writes the config file (outside the tree) and returns its path.
    fn config(&self, text: &str) -> std::path::PathBuf {
        let path = self.dir.path().join("steerd.yaml");
        fs::write(&path, text).unwrap();
        path
    }

    /// CPUs an IRQ may fire on (`smp_affinity_list`).
    fn irq_cpus(&self, irq: u32) -> CpuSet {
        CpuSet::parse_list(&read_file(
            self.root(),
            &format!("proc/irq/{irq}/smp_affinity_list"),
        ))
        .unwrap()
    }

    /// Every CPU the IRQs' masks allow.
    fn cpus_of_irqs(&self, irqs: &[u32]) -> CpuSet {
        irqs.iter()
            .flat_map(|&irq| self.irq_cpus(irq).iter().collect::<Vec<_>>())
            .collect()
    }

    /// A receive queue's RPS mask, and its text.
    fn rps(&self, device: &str, queue: u32) -> (CpuSet, String) {
        let text = read_file(
            self.root(),
            &format!("sys/class/net/{device}/queues/rx-{queue}/rps_cpus"),
        );
        (CpuSet::parse_mask(&text).unwrap(), text)
    }

    /// CPUs a (fake) thread may run on: `Cpus_allowed_list` of its `proc/PID/status`.
    fn thread_cpus(&self, pid: u32) -> CpuSet {
        let status = read_file(self.root(), &format!("proc/{pid}/status"));
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_default()
            .trim()
            .to_string();
        CpuSet::parse_list(&list).unwrap()
    }

    /// Whether each of the first NIC's receive threads (`pids`, in queue order) is allowed
    /// on exactly the one CPU its queue's IRQ is pinned to.
    fn threads_beside_irqs(&self, pids: &[u32]) -> bool {
        self.queue_irqs(0).iter().zip(pids).all(|(&irq, &pid)| {
            let cpus = self.irq_cpus(irq);
            cpus.len() == 1 && self.thread_cpus(pid) == cpus
        })
    }

    /// How many distinct affinities a NIC's queue IRQs have (4 for 4 queues spread).
    fn distinct_irq_cpus(&self, nic: usize) -> usize {
        self.queue_irqs(nic)
            .iter()
            .map(|&irq| self.irq_cpus(irq).to_list())
            .collect::<BTreeSet<_>>()
            .len()
    }

    fn queue_irqs(&self, nic: usize) -> Vec<u32> {
        self.tree.queue_irqs[nic].clone()
    }

    /// Files that differ from the tree as generated.
    fn changed(&self) -> Vec<(std::path::PathBuf, Option<String>, String)> {
        TreeFiles::read(self.root()).changed_since(&self.original)
    }

    fn assert_all_restored(&self, daemon: &Steerd) {
        let changed = self.changed();
        assert!(
            changed.is_empty(),
            "files not restored: {changed:#?}\n--- stderr ---\n{}",
            daemon.stderr_text()
        );
        assert_eq!(TreeFiles::read(self.root()), self.original);
    }
}

/// `cores` cores × 2 threads (CPU c and c + cores are siblings), one node; eth0 with 4
/// queues, eth1 with a single queue.
fn two_nics(cores: u32) -> FakeMachine {
    let mut machine = FakeMachine::new(cores);
    machine.threads_per_core = 2;
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 4,
    });
    machine.nics.push(FakeNic {
        name: "eth1".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 1,
    });
    machine
}

/// Puts every queue IRQ on CPU 0, as irqbalance's power-save packing leaves them.
fn all_queue_irqs_on_cpu0(root: &Path, tree: &FakeTree) {
    for irq in tree.queue_irqs.iter().flatten() {
        write_file(root, &format!("proc/irq/{irq}/smp_affinity_list"), "0\n");
    }
}

fn load(device: &str, queue: u32, pps: f64) -> QueueLoad {
    QueueLoad {
        device: device.into(),
        queue,
        pps,
    }
}

/// 100k pkt/s on each of eth0's queues, 400k pkt/s on eth1's single queue: with every
/// IRQ on CPU 0 that CPU is far beyond its capacity; eth1's queue alone keeps its CPU at
/// about 0.8 irq+softirq share, which only RPS can relieve.
fn busy() -> Vec<QueueLoad> {
    let mut loads: Vec<QueueLoad> = (0..4).map(|q| load("eth0", q, 100_000.0)).collect();
    loads.push(load("eth1", 0, 400_000.0));
    loads
}

/// `(device, "rx-N", file)` of a `sys/devices/.../net/<device>/queues/rx-N/<file>` path.
fn queue_file(path: &str) -> Option<(&str, &str, &str)> {
    let (_, rest) = path.split_once("/net/")?;
    let mut parts = rest.split('/');
    let device = parts.next()?;
    (parts.next()? == "queues").then_some(())?;
    let queue = parts.next()?;
    let file = parts.next()?;
    Some((device, queue, file))
}

fn core_of(machine: &FakeMachine, cpu: u32) -> u32 {
    machine.core_of(cpu)
}

/// 1. Stacked queue IRQs are spread over distinct cores, a single-queue NIC under load
///    gets RPS (in the kernel's mask width) and RFS, and every write is in `/decisions`
///    with its reason and counted in `steerd_actions_total`.
#[test]
fn spreads_stacked_irqs_and_turns_on_rps_under_load() {
    // 40 CPUs, so the kernel prints rps_cpus in two 32-bit words ("00,00000000").
    let m = Machine::new(two_nics(20), all_queue_irqs_on_cpu0);
    assert_eq!(m.rps("eth1", 0).1, "00,00000000");
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start(m.root(), None);
    let eth0 = m.queue_irqs(0);
    let machine = &m.tree.machine;
    wait_until(
        WAIT,
        "eth0's queue IRQs on distinct cores and RPS on for eth1",
        Some(&daemon),
        || {
            let cores: BTreeSet<u32> = eth0
                .iter()
                .filter_map(|&irq| m.irq_cpus(irq).first())
                .map(|cpu| core_of(machine, cpu))
                .collect();
            cores.len() == eth0.len() && !m.rps("eth1", 0).0.is_empty()
        },
    );
    // The IRQ files: one CPU each, distinct cores; all but at most one moved off CPU 0.
    let mut moved = 0;
    for &irq in &eth0 {
        let cpus = m.irq_cpus(irq);
        assert_eq!(cpus.len(), 1, "irq {irq}: {}", cpus.to_list());
        if cpus.to_list() != "0" {
            moved += 1;
        }
    }
    assert!(moved >= eth0.len() - 1, "only {moved} IRQs moved");
    // RPS in the tree's width: as many comma-separated words as the kernel printed.
    let (mask, text) = m.rps("eth1", 0);
    assert_eq!(text.split(',').count(), 2, "rps_cpus {text:?}");
    assert!(text.split(',').all(|w| w.len() == 8), "rps_cpus {text:?}");
    assert!(mask.iter().all(|cpu| cpu < 40), "{text}");
    // RFS with it.
    wait_until(WAIT, "RFS tables", Some(&daemon), || {
        read_file(m.root(), "proc/sys/net/core/rps_sock_flow_entries") != "0"
            && read_file(m.root(), "sys/class/net/eth1/queues/rx-0/rps_flow_cnt") != "0"
    });
    let entries: u32 = read_file(m.root(), "proc/sys/net/core/rps_sock_flow_entries")
        .parse()
        .unwrap();
    let flow_cnt: u32 = read_file(m.root(), "sys/class/net/eth1/queues/rx-0/rps_flow_cnt")
        .parse()
        .unwrap();
    assert!(entries.is_power_of_two() && flow_cnt.is_power_of_two());

    // Every file that changed was written by a decision that says why.
    let changed: Vec<(String, String, String)> = m
        .changed()
        .into_iter()
        .map(|(path, _, now)| {
            let path = path.to_string_lossy().into_owned();
            let target = if let Some(irq) = path
                .strip_prefix("proc/irq/")
                .and_then(|p| p.strip_suffix("/smp_affinity_list"))
            {
                format!("irq {irq} affinity")
            } else if let Some((device, queue, file)) = queue_file(&path) {
                format!("{device} {queue} {file}")
            } else if path == "proc/sys/net/core/rps_sock_flow_entries" {
                "rps_sock_flow_entries".to_string()
            } else {
                panic!("steerd changed an unexpected file: {path} = {now:?}");
            };
            (path, target, now)
        })
        .collect();
    // A decision enters the log just after its write: let the log catch up with the files
    // (on a loaded machine the test can read a file between the two).
    let mut decisions = daemon.decisions();
    wait_until(
        WAIT,
        "a decision for every changed file",
        Some(&daemon),
        || {
            decisions = daemon.decisions();
            changed.iter().all(|(_, target, _)| {
                decisions
                    .iter()
                    .any(|d| d.outcome == "applied" && &d.target == target)
            })
        },
    );
    let applied: Vec<_> = decisions
        .iter()
        .filter(|d| d.outcome == "applied")
        .collect();
    for d in &applied {
        assert!(!d.reason.is_empty() && !d.detail.is_empty(), "{d:?}");
    }
    for (path, target, now) in changed {
        let last = applied
            .iter()
            .rev()
            .find(|d| d.target == target)
            .unwrap_or_else(|| panic!("no applied decision for {target} ({path}): {decisions:#?}"));
        if path.ends_with("smp_affinity_list") {
            assert_eq!(last.new, now.trim(), "{target}");
        }
    }
    let rps_on = applied
        .iter()
        .find(|d| d.target == "eth1 rx-0 rps_cpus")
        .unwrap();
    assert_eq!(rps_on.reason, "rps_on");
    assert_eq!(rps_on.old, "none");
    assert_eq!(rps_on.new, mask.to_list());

    // The counters agree with the log (read between two equal reads of the log, so no
    // tick ran in between).
    let (decisions, metrics) = (0..50)
        .find_map(|_| {
            let before = daemon.decisions();
            let metrics = daemon.metrics();
            (daemon.decisions() == before).then_some((before, metrics))
        })
        .expect("the decision log never held still for two reads");
    let actions = daemon_support::family_sum(&metrics, "steerd_actions_total");
    assert_eq!(actions as usize, decisions.len(), "{metrics}");
    let rps_on = decisions
        .iter()
        .filter(|d| d.action == "rps_cpus" && d.reason == "rps_on")
        .count();
    assert!(rps_on >= 1);
    assert_eq!(
        daemon_support::sample(
            &metrics,
            "steerd_actions_total{action=\"rps_cpus\",reason=\"rps_on\"}"
        ),
        Some(rps_on as f64),
        "{metrics}"
    );
    let irq_actions: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("steerd_actions_total{action=\"irq_affinity\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(irq_actions >= moved as f64, "{metrics}");
    assert_eq!(
        daemon_support::family_sum(&metrics, "steerd_write_errors_total"),
        0.0
    );
    // Placement metrics follow the writes.
    for &irq in &eth0 {
        let cpu = m.irq_cpus(irq).first().unwrap();
        let series = metrics
            .lines()
            .find(|l| l.starts_with(&format!("steerd_irq_effective_cpu{{irq=\"{irq}\",")))
            .unwrap_or_else(|| panic!("no effective CPU series for irq {irq}\n{metrics}"));
        assert!(
            series.ends_with(&format!(" {cpu}")),
            "{series}: file says {cpu}"
        );
    }
    assert_eq!(
        daemon_support::sample(
            &metrics,
            "steerd_rx_queue_rps_cpus{device=\"eth1\",queue=\"0\"}"
        ),
        Some(mask.len() as f64)
    );
    assert_eq!(daemon.repeated_notes(), vec![]);
}

/// 2. Banned (config) and isolated / nohz_full (kernel) CPUs never appear in a file
///    steerd writes, while IRQs found on them are moved off.
#[test]
fn never_writes_banned_or_isolated_cpus() {
    let mut machine = two_nics(4);
    machine.isolated = CpuSet::parse_list("3").unwrap();
    machine.nohz_full = CpuSet::parse_list("7").unwrap();
    let m = Machine::new(machine, |root, tree| {
        all_queue_irqs_on_cpu0(root, tree);
        // One queue IRQ on a banned CPU, one on the isolated one.
        let eth0 = &tree.queue_irqs[0];
        write_file(
            root,
            &format!("proc/irq/{}/smp_affinity_list", eth0[1]),
            "1\n",
        );
        write_file(
            root,
            &format!("proc/irq/{}/smp_affinity_list", eth0[2]),
            "3\n",
        );
    });
    let config = m.config("cpus:\n  banned: \"1,6\"\n");
    let forbidden = CpuSet::parse_list("1,3,6,7").unwrap();
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start(m.root(), Some(&config));
    let eth0 = m.queue_irqs(0);
    let check = || {
        for (path, _, now) in m.changed() {
            if let Some(cpus) = cpus_named_by(&path, &now) {
                assert!(
                    !cpus.intersects(&forbidden),
                    "{} = {now:?} names a forbidden CPU\n--- stderr ---\n{}",
                    path.display(),
                    daemon.stderr_text()
                );
            }
        }
    };
    wait_until(
        WAIT,
        "queue IRQs off forbidden CPUs and RPS on for eth1",
        Some(&daemon),
        || {
            check();
            eth0.iter()
                .all(|&irq| !m.irq_cpus(irq).intersects(&forbidden))
                && !m.rps("eth1", 0).0.is_empty()
        },
    );
    // Keep watching for a while under load.
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        check();
        std::thread::sleep(Duration::from_millis(50));
    }
    for d in daemon.decisions() {
        if let Ok(cpus) = CpuSet::parse_list(&d.new) {
            assert!(!cpus.intersects(&forbidden), "{d:?}");
        }
    }
    // The non-queue vectors were moved off the forbidden CPUs too (keeping wide masks).
    let misc = m.irq_cpus(m.tree.misc_irqs[0]);
    assert!(
        !misc.intersects(&forbidden) && misc.len() > 1,
        "{}",
        misc.to_list()
    );
    assert_eq!(daemon.repeated_notes(), vec![]);
}

/// 3. SIGTERM: exit 0, every file steerd changed has its original text again, and the
///    state file is gone.
#[test]
fn sigterm_restores_every_file_and_removes_the_state_file() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let mut kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), None);
    wait_until(
        WAIT,
        "IRQ moves, RPS and RFS written",
        Some(&daemon),
        || {
            let changed: Vec<String> = m
                .changed()
                .iter()
                .map(|c| c.0.to_string_lossy().into_owned())
                .collect();
            [
                "smp_affinity_list",
                "rps_cpus",
                "rps_flow_cnt",
                "rps_sock_flow_entries",
            ]
            .iter()
            .all(|name| changed.iter().any(|p| p.ends_with(name)))
        },
    );
    let state = m.root().join(STATE_FILE);
    assert!(state.exists(), "no state file while values are changed");
    let changed = m.changed().len();
    let status = daemon.stop(Signal::SIGTERM);
    kernel.stop();
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr_text());
    m.assert_all_restored(&daemon);
    assert!(!state.exists(), "the state file is still there");
    let log = daemon.stderr_text();
    let restored = log
        .lines()
        .find(|l| l.contains("restored original values"))
        .unwrap_or_else(|| panic!("no restore line:\n{log}"));
    assert!(restored.contains("failed=0"), "{restored}");
    let count: usize = restored
        .split("restored=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(count >= changed, "{restored}: {changed} files were changed");
}

/// 4. kill -9, then a new run on the same tree: it reads the state file, takes its own
///    earlier writes as its own (no external change; it narrows or turns off the RPS it
///    set once the load is gone) and on SIGTERM restores the values from before the FIRST run.
#[test]
fn recovers_after_kill_9() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut first = Steerd::start(m.root(), None);
    wait_until(WAIT, "RPS on for eth1", Some(&first), || {
        !m.rps("eth1", 0).0.is_empty()
            && read_file(m.root(), "proc/sys/net/core/rps_sock_flow_entries") != "0"
    });
    // Between ticks: no write in flight, each one recorded in the state file. (A kill
    // between a write and the state file's update loses steerd's knowledge of that one
    // write; the original is recorded before the write, so it is never lost.)
    first.wait_ticks(3);
    let status = first.stop(Signal::SIGKILL);
    assert_eq!(status.code(), None, "killed by a signal");
    let state = m.root().join(STATE_FILE);
    let saved: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&state).expect("state file left behind")).unwrap();
    let entries = saved["entries"].as_array().unwrap();
    let after_first = m.changed();
    assert!(
        entries.len() >= after_first.len(),
        "{} entries for {} changed files: {saved:#}",
        entries.len(),
        after_first.len()
    );

    let mut second = Steerd::start(m.root(), None);
    second.wait_ticks(10);
    // Load keeps going: nothing steerd wrote looks foreign to it.
    assert_eq!(
        second.metric("steerd_external_changes_total"),
        Some(0.0),
        "{}",
        second.stderr_text()
    );
    // The load stops: the mask it set is narrowed or turned off again, as a mask set in
    // this run would be (one someone else set never is).
    let wide = m.rps("eth1", 0).0;
    kernel.set_loads(Vec::new());
    wait_until(
        Duration::from_secs(15),
        "eth1's RPS mask narrowed or off once calm",
        Some(&second),
        || {
            let now = m.rps("eth1", 0).0;
            now.is_subset(&wide) && now != wide
        },
    );
    second.wait_for_decision("eth1 rx-0's RPS narrowed or turned off", |d| {
        d.target == "eth1 rx-0 rps_cpus"
            && ["rps_narrow", "rps_off"].contains(&d.reason.as_str())
            && d.outcome == "applied"
    });
    let log = second.stderr_text();
    for word in ["external_change", "foreign_mask"] {
        assert!(!log.contains(word), "second run logged {word}:\n{log}");
    }
    assert_eq!(second.metric("steerd_external_changes_total"), Some(0.0));
    let status = second.stop(Signal::SIGTERM);
    assert_eq!(status.code(), Some(0));
    m.assert_all_restored(&second);
    assert!(!state.exists());
}

/// Issue 33, two balancers on one machine: a second `steerd run` with the same state file
/// refuses to start. It exits non-zero within seconds with a message naming the lock file,
/// the first daemon's pid and what to do, and changes nothing: not the tree, not the state
/// file, not the lock file (the first is stopped meanwhile, so any change would be the
/// second's). Given the first one's port, it still says why, not "address in use": the lock
/// comes first. The first runs on. Once the first is killed with -9 its lock dies with it:
/// a new daemon locks the same file, takes over the state file, and restores on SIGTERM
/// what the first changed.
#[test]
fn a_second_daemon_with_the_same_state_file_refuses_to_start() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut first = Steerd::start(m.root(), None);
    let state = m.root().join(STATE_FILE);
    let lock = m.root().join(format!("{STATE_FILE}.lock"));
    wait_until(WAIT, "the first daemon's writes", Some(&first), || {
        state.exists() && !m.changed().is_empty()
    });
    assert_eq!(
        fs::read_to_string(&lock).unwrap(),
        format!("{}\n", first.pid())
    );
    assert_eq!(
        fs::metadata(&lock).unwrap().permissions().mode() & 0o7777,
        0o600
    );

    // What `steerd doctor` (src/doctor/steerd_daemons.rs) knows a daemon by: `comm` is
    // `exe` after the daemon executed itself again through /proc/self/exe (`steerd` where
    // it did not), `argv[0]` still names steerd, and the subcommand is `run`.
    let comm = fs::read_to_string(format!("/proc/{}/comm", first.pid())).unwrap();
    let cmdline = fs::read(format!("/proc/{}/cmdline", first.pid())).unwrap();
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    eprintln!("the first daemon's comm: {comm:?}");
    assert!(["exe\n", "steerd\n"].contains(&comm.as_str()), "{comm:?}");
    assert!(args[0].ends_with(b"/steerd"), "{cmdline:?}");
    assert_eq!(args[1], b"run");

    first.signal(Signal::SIGSTOP);
    wait_until(WAIT, "the first daemon stopped", Some(&first), || {
        all_threads_stopped(first.pid().as_raw())
    });
    let tree = TreeFiles::read(m.root());
    let state_text = fs::read(&state).unwrap();
    let started = Instant::now();
    let (code, stderr) = run_to_exit(
        &[
            "run".as_ref(),
            "--root".as_ref(),
            m.root().as_os_str(),
            "--interval".as_ref(),
            INTERVAL.as_ref(),
            "--metrics-listen".as_ref(),
            first.addr.to_string().as_ref(),
        ],
        Duration::from_secs(5),
    );
    let took = started.elapsed();
    assert_eq!(code, Some(1), "{stderr}");
    for needle in [
        format!(
            "another steerd daemon is running with the state file {}",
            state.display()
        ),
        format!("its lock {} is held by pid {}", lock.display(), first.pid()),
        "systemctl stop steerd".to_string(),
        format!("kill {}", first.pid()),
        "--state-file".to_string(),
    ] {
        assert!(stderr.contains(&needle), "{needle:?} not in:\n{stderr}");
    }
    assert!(!stderr.contains("cannot listen"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(TreeFiles::read(m.root()), tree, "the second daemon wrote");
    assert_eq!(
        fs::read(&state).unwrap(),
        state_text,
        "the state file changed"
    );
    assert_eq!(
        fs::read_to_string(&lock).unwrap(),
        format!("{}\n", first.pid())
    );
    eprintln!("the second daemon exited in {took:?}: {stderr}");

    first.signal(Signal::SIGCONT);
    first.wait_ticks(3);
    assert!(first.is_running(), "{}", first.stderr_text());

    let status = first.stop(Signal::SIGKILL);
    assert_eq!(status.code(), None, "killed by a signal");
    assert!(lock.exists(), "the lock file stays; only the lock died");
    let mut third = Steerd::start(m.root(), None);
    third.wait_ticks(3);
    assert_eq!(
        fs::read_to_string(&lock).unwrap(),
        format!("{}\n", third.pid())
    );
    let status = third.stop(Signal::SIGTERM);
    assert_eq!(status.code(), Some(0), "{}", third.stderr_text());
    m.assert_all_restored(&third);
    assert!(!state.exists());
}

/// Whether every thread of `pid` is stopped (`T` in `/proc/PID/task/TID/stat`).
fn all_threads_stopped(pid: i32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        })
    })
}

/// Runs `steerd ARGS` expecting it to exit within `timeout` (killed and failed if not):
/// its exit code and stderr.
fn run_to_exit(args: &[&std::ffi::OsStr], timeout: Duration) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_steerd"))
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start steerd");
    let deadline = Instant::now() + timeout;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "steerd {args:?} still ran after {timeout:?}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// 5. SIGHUP: a valid new config (a newly banned core) takes effect at the next ticks; a
///    broken one is refused as a whole, with its key and line logged and counted, and the
///    old one stays in force.
#[test]
fn sighup_reloads_good_and_refuses_bad_configs() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let config = m.config("# test config\nrps:\n  mode: auto\n");
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start(m.root(), Some(&config));
    let eth0 = m.queue_irqs(0);
    let machine = &m.tree.machine;
    // Cores (other than CPU 0's) that carry one of eth0's vectors now.
    let used_cores = || -> Vec<u32> {
        let cores: BTreeSet<u32> = eth0
            .iter()
            .filter_map(|&irq| m.irq_cpus(irq).first())
            .map(|cpu| core_of(machine, cpu))
            .filter(|&core| core != 0)
            .collect();
        cores.into_iter().collect()
    };
    let whole_core = |core: u32| -> CpuSet { [core, core + machine.cores].into_iter().collect() };
    wait_until(
        WAIT,
        "eth0 on two cores besides CPU 0's",
        Some(&daemon),
        || used_cores().len() >= 2,
    );

    // Ban a whole core that one of eth0's vectors uses.
    let banned = whole_core(used_cores()[0]);
    fs::write(
        &config,
        format!(
            "rps:\n  mode: auto\ncpus:\n  banned: \"{}\"\n",
            banned.to_list()
        ),
    )
    .unwrap();
    let reloaded_at = Instant::now();
    daemon.signal(Signal::SIGHUP);
    wait_until(WAIT, "eth0 off the banned core", Some(&daemon), || {
        eth0.iter().all(|&irq| !m.irq_cpus(irq).intersects(&banned))
    });
    assert!(
        reloaded_at.elapsed() < Duration::from_secs(3),
        "took {:?}",
        reloaded_at.elapsed()
    );
    assert_eq!(
        daemon.metric("steerd_config_reloads_total{result=\"ok\"}"),
        Some(1.0)
    );
    daemon.wait_for_decision("a vector moved off the banned core", |d| {
        d.reason == "forbidden_cpu" && d.outcome == "applied"
    });

    // A broken file that would also ban another used core: refused as a whole, so that
    // core keeps its vectors and the first ban stays.
    let other = whole_core(
        *used_cores()
            .iter()
            .find(|&&core| !banned.contains(core))
            .expect("another used core"),
    );
    let other_vectors: Vec<(u32, String)> = eth0
        .iter()
        .map(|&irq| (irq, m.irq_cpus(irq).to_list()))
        .filter(|(irq, _)| m.irq_cpus(*irq).intersects(&other))
        .collect();
    fs::write(
        &config,
        format!(
            "rps:\n  mode: auto\ncpus:\n  banned: \"{}\"\nhysteresis:\n  confirm_ticks: lots\n",
            banned.union(&other).to_list()
        ),
    )
    .unwrap();
    daemon.signal(Signal::SIGHUP);
    wait_until(WAIT, "the reload error counted", Some(&daemon), || {
        daemon.metric("steerd_config_reloads_total{result=\"error\"}") == Some(1.0)
    });
    let log = daemon.stderr_text();
    let line = log
        .lines()
        .find(|l| l.contains("configuration not reloaded"))
        .unwrap_or_else(|| panic!("no reload error logged:\n{log}"));
    assert!(
        line.contains("hysteresis.confirm_ticks") && line.contains("line 6"),
        "{line}"
    );
    daemon.wait_ticks(10);
    for (irq, cpus) in &other_vectors {
        assert_eq!(
            &m.irq_cpus(*irq).to_list(),
            cpus,
            "irq {irq} moved: part of the broken config was applied\n{}",
            daemon.stderr_text()
        );
    }
    for &irq in &eth0 {
        assert!(
            !m.irq_cpus(irq).intersects(&banned),
            "irq {irq} on {} after a failed reload\n{}",
            m.irq_cpus(irq).to_list(),
            daemon.stderr_text()
        );
    }
    assert_eq!(
        daemon.metric("steerd_config_reloads_total{result=\"ok\"}"),
        Some(1.0)
    );
}

/// 6. A device vanishes while steerd runs and still has it in its model: no crash, no
///    error storm, `/metrics` keeps answering, the device is dropped from the model, and
///    SIGTERM still restores the rest. eth1 has one queue, so the tick's look at each
///    multi-queue device (`Sampling::device_changed`) passes it by: the failed write is
///    what finds it gone (`target_vanished`). A multi-queue device is found gone by the
///    tick before any write: `notices_a_multi_queue_device_vanishing_before_writing`.
#[test]
fn survives_a_device_vanishing() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let config = m.config("rps:\n  mode: auto\n");
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), Some(&config));
    wait_until(WAIT, "RPS and RFS on for eth1", Some(&daemon), || {
        !m.rps("eth1", 0).0.is_empty()
            && read_file(m.root(), "sys/class/net/eth1/queues/rx-0/rps_flow_cnt") != "0"
            && read_file(m.root(), "proc/sys/net/core/rps_sock_flow_entries") != "0"
    });
    // Steady: no write to eth1 in flight.
    daemon.wait_ticks(3);
    let eth1_irq = m.queue_irqs(1)[0];
    let eth1_cpu = m.irq_cpus(eth1_irq).first().unwrap();
    let lines_before = daemon.stderr_lines().len();
    let unplugged_at = Instant::now();
    kernel.unplug("eth1");
    // Ban the CPU eth1's vector was on: the next tick wants to move the vanished IRQ,
    // finds it gone (ENOENT) and rediscovers.
    fs::write(
        &config,
        format!("rps:\n  mode: auto\ncpus:\n  banned: \"{eth1_cpu}\"\n"),
    )
    .unwrap();
    daemon.signal(Signal::SIGHUP);
    wait_until(WAIT, "eth1 dropped from the metrics", Some(&daemon), || {
        !daemon.metrics().contains("device=\"eth1\"")
    });
    ticks_on_after_an_unplug(&mut daemon, unplugged_at, lines_before);
    // One failed write found the device gone; the rest of that plan (eth1's other
    // vector) was dropped with the old model instead of failing one write at a time.
    // Unless the read-back of steerd's values (every RECHECK_EVERY) fell due between the
    // unplug and that write, about one run in a hundred at 100 ms ticks: then it found
    // them gone first, and no write failed.
    let metrics = daemon.metrics();
    let by_write = daemon.stderr_text().contains("vanished under the write");
    assert_eq!(
        daemon_support::family_sum(&metrics, "steerd_write_errors_total"),
        if by_write { 1.0 } else { 0.0 },
        "{metrics}"
    );
    if by_write {
        assert_eq!(
            daemon_support::sample(
                &metrics,
                "steerd_write_errors_total{kind=\"vanished\",errno=\"ENOENT\"}"
            ),
            Some(1.0)
        );
    }
    // Counted as the write's (or the read-back's) finding, once.
    assert_eq!(
        daemon_support::sample(
            &metrics,
            "steerd_rediscoveries_total{reason=\"target_vanished\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    for reason in ["device_vanished", "threaded_switched"] {
        let series = format!("steerd_rediscoveries_total{{reason=\"{reason}\"}}");
        assert_eq!(
            daemon_support::sample(&metrics, &series),
            Some(0.0),
            "{metrics}"
        );
    }
    stop_after_a_device_vanished(daemon, kernel, &m, 0);
}

/// 6b. A multi-queue device vanishes (its PCI function removed): the tick, which looks at
///     each multi-queue device's `sys/class/net` directory before it decides, finds it
///     gone and rediscovers before any write to it. Counted as `device_vanished`, never as
///     `threaded_switched`: the gone device's unreadable `threaded` once read as a switch
///     (igb in a 6.19 QEMU guest, the tick ahead of the rtnetlink event). No write fails,
///     ticks go on, the device's series leave `/metrics`, SIGTERM restores the rest.
#[test]
fn notices_a_multi_queue_device_vanishing_before_writing() {
    // `threaded` 0 as a real kernel (5.12 and later) has it: the file whose absence, once
    // the device is gone, read as a switch.
    let m = Machine::new(two_nics(4), |root, tree| {
        all_queue_irqs_on_cpu0(root, tree);
        for nic in &tree.machine.nics {
            write_file(root, &format!("sys/class/net/{}/threaded", nic.name), "0\n");
        }
    });
    let config = m.config("rps:\n  mode: auto\n");
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), Some(&config));
    let eth0 = m.queue_irqs(0);
    wait_until(
        WAIT,
        "eth0's vectors spread, RPS on for eth1",
        Some(&daemon),
        || {
            eth0.iter()
                .filter(|&&irq| m.irq_cpus(irq).to_list() != "0")
                .count()
                >= eth0.len() - 1
                && !m.rps("eth1", 0).0.is_empty()
        },
    );
    // Steady: no write to eth0 in flight.
    daemon.wait_ticks(3);
    assert!(daemon.metrics().contains("device=\"eth0\""));
    let lines_before = daemon.stderr_lines().len();
    let unplugged_at = Instant::now();
    kernel.unplug("eth0");
    wait_until(WAIT, "the vanished device counted", Some(&daemon), || {
        daemon.metric("steerd_rediscoveries_total{reason=\"device_vanished\"}") >= Some(1.0)
    });
    wait_until(WAIT, "eth0 dropped from the metrics", Some(&daemon), || {
        !daemon.metrics().contains("device=\"eth0\"")
    });
    let after = ticks_on_after_an_unplug(&mut daemon, unplugged_at, lines_before);
    let metrics = daemon.metrics();
    // Found once, by the tick: no write reached the gone device, and the model without it
    // is not found changed again every tick.
    for (reason, times) in [
        ("device_vanished", 1.0),
        ("threaded_switched", 0.0),
        ("target_vanished", 0.0),
    ] {
        let series = format!("steerd_rediscoveries_total{{reason=\"{reason}\"}}");
        assert_eq!(
            daemon_support::sample(&metrics, &series),
            Some(times),
            "{series}\n{metrics}\n{}",
            daemon.stderr_text()
        );
    }
    assert_eq!(
        daemon_support::family_sum(&metrics, "steerd_write_errors_total"),
        0.0,
        "{metrics}"
    );
    assert!(
        after
            .iter()
            .any(|l| l.contains("machine changed") && l.contains("a device vanished")),
        "{}",
        after.join("\n")
    );
    assert!(
        !after.iter().any(|l| l.contains("threaded NAPI switched")),
        "{}",
        after.join("\n")
    );
    stop_after_a_device_vanished(daemon, kernel, &m, 1);
}

/// The 3 s after a device was unplugged at `unplugged_at`: steerd keeps running and
/// ticking (10 ticks or more) with /metrics answering all along, and logs at most 12 lines
/// after the first `lines_before`; returns those lines.
fn ticks_on_after_an_unplug(
    daemon: &mut Steerd,
    unplugged_at: Instant,
    lines_before: usize,
) -> Vec<String> {
    let until = unplugged_at + Duration::from_secs(3);
    let ticks_at_unplug = daemon.metric("steerd_ticks_total").unwrap();
    while Instant::now() < until {
        assert!(
            daemon.is_running(),
            "steerd died:\n{}",
            daemon.stderr_text()
        );
        assert!(daemon.metric("steerd_ticks_total").is_some());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(daemon.metric("steerd_ticks_total").unwrap() >= ticks_at_unplug + 10.0);
    let after: Vec<String> = daemon.stderr_lines()[lines_before..]
        .iter()
        .map(|l| l.text.clone())
        .collect();
    assert!(
        after.len() <= 12,
        "{} log lines in 3 s after the unplug:\n{}",
        after.len(),
        after.join("\n")
    );
    after
}

/// After a device vanished: no note repeated, SIGTERM ends the daemon with status 0 and
/// nothing failed to restore, and what is left of the tree has its original text again,
/// the remaining NIC's (number `nic`) queue vectors on CPU 0 as the set-up put them.
fn stop_after_a_device_vanished(
    mut daemon: Steerd,
    mut kernel: FakeKernel,
    m: &Machine,
    nic: usize,
) {
    assert_eq!(daemon.repeated_notes(), vec![]);
    let status = daemon.stop(Signal::SIGTERM);
    kernel.stop();
    assert_eq!(status.code(), Some(0));
    let log = daemon.stderr_text();
    assert!(log.contains("failed=0"), "{log}");
    let changed = m.changed();
    assert!(changed.is_empty(), "not restored: {changed:#?}");
    for irq in m.queue_irqs(nic) {
        assert_eq!(m.irq_cpus(irq).to_list(), "0");
    }
}

/// 7. A queue IRQ the kernel manages (read-only `smp_affinity*`, as on kernels since
///    6.12): never written, counted once in `steerd_unmanageable_irqs`, reported once,
///    and the device's other vectors placed around it.
#[test]
fn leaves_a_managed_irq_alone() {
    use std::os::unix::fs::PermissionsExt;
    let mut managed = 0;
    let m = Machine::new(two_nics(4), |root, tree| {
        all_queue_irqs_on_cpu0(root, tree);
        managed = tree.queue_irqs[0][1];
        for name in ["smp_affinity", "smp_affinity_list"] {
            let path = root.join(format!("proc/irq/{managed}/{name}"));
            fs::set_permissions(path, fs::Permissions::from_mode(0o444)).unwrap();
        }
    });
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start(m.root(), None);
    let others: Vec<u32> = m
        .queue_irqs(0)
        .into_iter()
        .filter(|&irq| irq != managed)
        .collect();
    wait_until(
        WAIT,
        "the other vectors off CPU 0's core",
        Some(&daemon),
        || {
            others
                .iter()
                .filter(|&&irq| core_of(&m.tree.machine, m.irq_cpus(irq).first().unwrap()) != 0)
                .count()
                == others.len()
        },
    );
    daemon.wait_ticks(10);
    assert_eq!(m.irq_cpus(managed).to_list(), "0");
    assert_eq!(daemon.metric("steerd_unmanageable_irqs"), Some(1.0));
    assert!(
        daemon
            .decisions()
            .iter()
            .all(|d| d.target != format!("irq {managed} affinity")),
        "{:#?}",
        daemon.decisions()
    );
    let log = daemon.stderr_text();
    let reports = log
        .lines()
        .filter(|l| l.contains("policy note (managed)"))
        .count();
    assert_eq!(
        reports, 1,
        "the managed IRQ reported {reports} times:\n{log}"
    );
    assert_eq!(daemon.repeated_notes(), vec![]);
    assert_eq!(daemon.metric_sum("steerd_write_errors_total"), 0.0);
}

/// 8. A value someone else changes after steerd wrote it is theirs: noticed at the next
///    read-back (every `RECHECK_EVERY`, 10 s, when no event says so: this test waits for it), counted and
///    logged once, never reverted while steerd runs, and left as they set it on exit.
#[test]
fn respects_an_operators_change() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), None);
    let eth0 = m.queue_irqs(0);
    wait_until(WAIT, "eth0 rx-1 moved off CPU 0", Some(&daemon), || {
        m.irq_cpus(eth0[1]).to_list() != "0"
    });
    daemon.wait_ticks(3);
    let path = format!("proc/irq/{}/smp_affinity_list", eth0[1]);
    // Onto the CPU of another of eth0's vectors: steerd's own placement rules would move
    // it away at once, were it steerd's.
    let theirs = m.irq_cpus(eth0[2]).to_list();
    write_file(m.root(), &path, &format!("{theirs}\n"));
    wait_until(
        steerd::daemon::REDISCOVER_EVERY + Duration::from_secs(10),
        "the external change noticed",
        Some(&daemon),
        || daemon.metric("steerd_external_changes_total") == Some(1.0),
    );
    daemon.wait_ticks(10);
    assert_eq!(read_file(m.root(), &path), theirs, "reverted");
    assert_eq!(
        daemon.metric("steerd_external_changes_total"),
        Some(1.0),
        "counted more than once:\n{}",
        daemon.stderr_text()
    );
    let log = daemon.stderr_text();
    let notes = log
        .lines()
        .filter(|l| l.contains("external_change"))
        .count();
    assert_eq!(notes, 1, "{log}");
    assert_eq!(daemon.repeated_notes(), vec![]);
    let status = daemon.stop(Signal::SIGTERM);
    assert_eq!(status.code(), Some(0));
    assert_eq!(read_file(m.root(), &path), theirs, "undone on exit");
    for (changed, _, _) in m.changed() {
        assert_eq!(changed.to_string_lossy(), path, "not restored");
    }
}

/// 8b. Until the next rediscovery steerd's model still holds the value it wrote. If it
///     wants to change that value again in the meantime (here: a reload bans its CPU),
///     it must find that someone else changed it and leave it to them, not overwrite it.
#[test]
fn does_not_overwrite_an_operators_change_it_has_not_seen_yet() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let config = m.config("rps:\n  mode: auto\n");
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start(m.root(), Some(&config));
    let eth0 = m.queue_irqs(0);
    wait_until(WAIT, "eth0 rx-1 moved off CPU 0", Some(&daemon), || {
        m.irq_cpus(eth0[1]).to_list() != "0"
    });
    daemon.wait_ticks(3);
    let ours = m.irq_cpus(eth0[1]).first().unwrap();
    let path = format!("proc/irq/{}/smp_affinity_list", eth0[1]);
    let theirs = if ours == 7 { "6" } else { "7" };
    write_file(m.root(), &path, &format!("{theirs}\n"));
    fs::write(
        &config,
        format!("rps:\n  mode: auto\ncpus:\n  banned: \"{ours}\"\n"),
    )
    .unwrap();
    daemon.signal(Signal::SIGHUP);
    wait_until(WAIT, "the external change noticed", Some(&daemon), || {
        assert_eq!(
            read_file(m.root(), &path),
            theirs,
            "overwritten\n{}",
            daemon.stderr_text()
        );
        daemon.metric("steerd_external_changes_total") == Some(1.0)
    });
    daemon.wait_ticks(10);
    assert_eq!(read_file(m.root(), &path), theirs, "overwritten");
    assert_eq!(daemon.metric("steerd_external_changes_total"), Some(1.0));
    // The write that found it read the machine again at once (a channel change not heard
    // yet would be taken over there, not counted above).
    assert!(
        daemon
            .metric("steerd_rediscoveries_total{reason=\"write_found_changed\"}")
            .is_some_and(|n| n >= 1.0),
        "{}",
        daemon.metrics()
    );
    assert_eq!(daemon.metric_sum("steerd_write_errors_total"), 0.0);
    assert_eq!(daemon.repeated_notes(), vec![]);
}

/// 9. `--dry-run` decides and reports everything and writes nothing (no state file either).
#[test]
fn dry_run_writes_nothing() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start_with(m.root(), None, &["--dry-run"]);
    wait_until(WAIT, "dry-run decisions", Some(&daemon), || {
        daemon.decisions().len() >= 3
    });
    daemon.wait_ticks(5);
    assert!(daemon.decisions().iter().all(|d| d.outcome == "dry_run"));
    assert_eq!(daemon.metric("steerd_observe_only"), Some(1.0));
    assert!(m.changed().is_empty(), "{:#?}", m.changed());
    assert!(!m.root().join(STATE_FILE).exists());
    assert_eq!(daemon.stop(Signal::SIGTERM).code(), Some(0));
    assert!(m.changed().is_empty());
}

/// `steerd run` executes itself once more, before anything else, without glibc's
/// per-thread cache (src/memory.rs says why): the process started is the one that runs,
/// with the marker that stops a second exec in its environment, and it works.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn runs_again_once_without_glibcs_thread_cache() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start_with(m.root(), None, &["--dry-run"]);
    daemon.wait_ticks(2);
    let environ = std::fs::read(format!("/proc/{}/environ", daemon.pid())).expect("environ");
    assert!(
        environ
            .split(|&b| b == 0)
            .any(|var| var == b"STEERD_WITHOUT_THREAD_CACHE=1"),
        "{}",
        String::from_utf8_lossy(&environ)
    );
    assert_eq!(daemon.stop(Signal::SIGTERM).code(), Some(0));
}

/// 11. irqbalance's ban file (`cpus.irqbalance_banned_cpus: true`) and the configuration
///     file (`--watch-config`) are followed while running: a CPU that CRI-O bans in
///     `/etc/sysconfig/irqbalance` is left by steerd's IRQs within a few ticks, and a
///     configuration renamed over the old one is applied, with no restart and no SIGHUP.
#[test]
fn follows_irqbalances_ban_file_and_a_watched_config_without_restart() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let config = m.config("cpus:\n  irqbalance_banned_cpus: true\n");
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start_with(m.root(), Some(&config), &["--watch-config"]);
    let pid = daemon.pid();
    let eth0 = m.queue_irqs(0);
    let machine = &m.tree.machine;
    let cpus_of_eth0 = || -> CpuSet {
        eth0.iter()
            .filter_map(|&irq| m.irq_cpus(irq).first())
            .collect()
    };
    // On distinct CPUs (not necessarily distinct cores yet: a distress move may land on
    // a sibling, which placement repairs only after the IRQ's dwell time).
    wait_until(WAIT, "eth0's queue IRQs spread", Some(&daemon), || {
        cpus_of_eth0().len() == eth0.len()
    });

    // What CRI-O does: write the mask of the CPUs to keep IRQs off (here every CPU eth0's
    // IRQs are on but the lowest), by writing a new file and renaming it into place.
    let occupied = cpus_of_eth0();
    let banned: CpuSet = occupied.iter().skip(1).collect();
    assert!(!banned.is_empty());
    let sysconfig = m.root().join("etc/sysconfig");
    fs::create_dir_all(&sysconfig).unwrap();
    let staged = sysconfig.join(".irqbalance.new");
    fs::write(
        &staged,
        format!(
            "# written by a test as CRI-O would\nIRQBALANCE_BANNED_CPUS=\"{}\"\n",
            banned.to_mask(machine.cpu_count()).unwrap()
        ),
    )
    .unwrap();
    let written_at = Instant::now();
    fs::rename(&staged, sysconfig.join("irqbalance")).unwrap();
    wait_until(
        WAIT,
        "eth0's queue IRQs off the banned CPUs",
        Some(&daemon),
        || !cpus_of_eth0().intersects(&banned),
    );
    let took = written_at.elapsed();
    eprintln!(
        "ban of CPUs {} followed in {} ms (100 ms ticks)",
        banned.to_list(),
        took.as_millis()
    );
    assert!(
        daemon.stderr_text().contains("irqbalance's banned CPUs"),
        "{}",
        daemon.stderr_text()
    );
    // No IRQ steerd moved goes back onto a banned CPU, under load, for a while.
    let until = Instant::now() + Duration::from_millis(1000);
    while Instant::now() < until {
        assert!(!cpus_of_eth0().intersects(&banned));
        std::thread::sleep(Duration::from_millis(50));
    }

    // A new configuration renamed over the old one: CPU 0 banned as well.
    let staged = config.with_extension("yaml.new");
    fs::write(
        &staged,
        "cpus:\n  irqbalance_banned_cpus: true\n  banned: \"0\"\n",
    )
    .unwrap();
    fs::rename(&staged, &config).unwrap();
    wait_until(
        WAIT,
        "the renamed configuration reloaded",
        Some(&daemon),
        || daemon.metric("steerd_config_reloads_total{result=\"ok\"}") == Some(1.0),
    );
    wait_until(
        WAIT,
        "eth0's queue IRQs off CPU 0 too",
        Some(&daemon),
        || {
            let now = cpus_of_eth0();
            !now.contains(0) && !now.intersects(&banned)
        },
    );
    assert_eq!(
        daemon.metric("steerd_config_reloads_total{result=\"ok\"}"),
        Some(1.0),
        "{}",
        daemon.metrics()
    );
    assert_eq!(daemon.pid(), pid, "no restart");
    let health = daemon.get("/healthz").expect("healthy while ticking");
    assert!(health.starts_with("ok: last tick"), "{health}");
    // Touching the file without changing it reloads nothing.
    fs::write(
        &config,
        "cpus:\n  irqbalance_banned_cpus: true\n  banned: \"0\"\n",
    )
    .unwrap();
    daemon.wait_ticks(5);
    assert_eq!(
        daemon.metric("steerd_config_reloads_total{result=\"ok\"}"),
        Some(1.0)
    );
}

/// Issue 33: `xps: follow`. Under load, once eth0's receive vectors are spread, each of
/// its transmit queues sends from the CPU its receive queue's interrupt fires on and that
/// CPU's sibling (4 cores x 2 threads). After kill -9 a new run takes the masks as its own
/// (no external change), and its SIGTERM puts every XPS mask back as it was before the
/// first run.
#[test]
fn xps_follows_the_receive_vectors_and_is_restored() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let config = m.config("xps: follow\n");
    let mut kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), Some(&config));
    let eth0 = m.queue_irqs(0);
    let xps = |queue: usize| -> CpuSet {
        CpuSet::parse_mask(&read_file(
            m.root(),
            &format!("sys/class/net/eth0/queues/tx-{queue}/xps_cpus"),
        ))
        .unwrap()
    };
    let cores = m.tree.machine.cores;
    let follows = || {
        eth0.iter().enumerate().all(|(queue, &irq)| {
            let cpus = m.irq_cpus(irq);
            let Some(cpu) = cpus.first().filter(|_| cpus.len() == 1) else {
                return false;
            };
            let core = cpu % cores;
            xps(queue) == CpuSet::from_iter([core, core + cores])
        })
    };
    // A distress move may first land a vector on another's sibling; placement spreads
    // them over the cores once the moved IRQ's dwell (10 s) has passed, and XPS follows.
    wait_until(
        Duration::from_secs(30),
        "each eth0 tx queue's XPS on its rx vector's core",
        Some(&daemon),
        follows,
    );
    let masks: Vec<String> = (0..eth0.len()).map(|q| xps(q).to_list()).collect();
    eprintln!("eth0 XPS masks by tx queue: {masks:?}");
    // The decision log is published at the end of the tick that wrote the files.
    wait_until(WAIT, "an xps_follow decision", Some(&daemon), || {
        daemon
            .decisions()
            .iter()
            .any(|d| d.reason == "xps_follow" && d.action == "xps_cpus")
    });
    daemon.wait_ticks(3);
    let status = daemon.stop(Signal::SIGKILL);
    assert_eq!(status.code(), None, "killed by a signal");
    let mut second = Steerd::start(m.root(), Some(&config));
    second.wait_ticks(10);
    assert!(follows(), "{}", second.stderr_text());
    assert_eq!(
        second.metric("steerd_external_changes_total"),
        Some(0.0),
        "{}",
        second.stderr_text()
    );
    let status = second.stop(Signal::SIGTERM);
    kernel.stop();
    assert_eq!(status.code(), Some(0), "{}", second.stderr_text());
    m.assert_all_restored(&second);
}

/// Issue 33: CPUs of an isolated cgroup partition (the root's `cpuset.cpus.isolated`, here
/// at `sys/fs/cgroup` of the fake tree) become forbidden while the daemon runs: queue
/// vectors and RPS masks leave them, the reason says why, and they are used again once the
/// partition is dissolved. No restart, no reload.
#[test]
fn follows_isolated_cgroup_partitions_without_restart() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start(m.root(), None);
    let pid = daemon.pid();
    let queue_irqs: Vec<u32> = m.queue_irqs(0).into_iter().chain(m.queue_irqs(1)).collect();
    // Cores 2 and 3 (CPUs 2-3 and their siblings 6-7) will be isolated.
    let isolated = CpuSet::parse_list("2-3,6-7").unwrap();
    wait_until(
        WAIT,
        "queue IRQs spread onto cores 2-3 and RPS on for eth1",
        Some(&daemon),
        || m.cpus_of_irqs(&queue_irqs).intersects(&isolated) && !m.rps("eth1", 0).0.is_empty(),
    );
    let cgroup = m.root().join("sys/fs/cgroup");
    fs::create_dir_all(&cgroup).unwrap();
    let written_at = Instant::now();
    fs::write(cgroup.join("cpuset.cpus.isolated"), "2-3,6-7\n").unwrap();
    let off_isolated = || {
        !m.cpus_of_irqs(&queue_irqs).intersects(&isolated)
            && (0..4).all(|q| !m.rps("eth0", q).0.intersects(&isolated))
            && !m.rps("eth1", 0).0.intersects(&isolated)
    };
    wait_until(
        WAIT,
        "queue IRQs and RPS masks off the isolated partition",
        Some(&daemon),
        off_isolated,
    );
    eprintln!(
        "isolated partition 2-3,6-7 emptied in {} ms (100 ms ticks)",
        written_at.elapsed().as_millis()
    );
    let stderr = daemon.stderr_text();
    assert!(
        stderr.contains("isolated cgroup partitions: CPUs 2-3,6-7"),
        "{stderr}"
    );
    // The decision log is published at the end of the tick that wrote the files.
    wait_until(
        WAIT,
        "a decision naming the partition",
        Some(&daemon),
        || {
            daemon
                .decisions()
                .iter()
                .any(|d| d.detail.contains("isolated cgroup partition"))
        },
    );
    // Under load nothing goes back while the partition stands.
    let until = Instant::now() + Duration::from_millis(1000);
    while Instant::now() < until {
        assert!(off_isolated(), "{}", daemon.stderr_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Dissolved: the cores are steerd's to use again, and the stacked vectors spread back.
    fs::write(cgroup.join("cpuset.cpus.isolated"), "\n").unwrap();
    wait_until(WAIT, "queue IRQs back on cores 2-3", Some(&daemon), || {
        m.cpus_of_irqs(&queue_irqs).intersects(&isolated)
    });
    assert_eq!(daemon.pid(), pid, "no restart");
    assert_eq!(daemon.repeated_notes(), vec![]);
}

/// Issue 33: a partition made or dissolved is followed at once, not at the next tick: the
/// daemon watches the cpuset cgroups' directories (`daemon::partition_watch`). Here the tick
/// is 10 s, so only the watch can move the vectors within 2 s (on a host the same holds in
/// quiet mode, whose ticks are 5 s apart).
#[test]
fn follows_a_partition_between_slow_ticks() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let cgroup = m.root().join("sys/fs/cgroup");
    fs::create_dir_all(&cgroup).unwrap();
    fs::write(cgroup.join("cpuset.cpus.isolated"), "\n").unwrap();
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start_ticking(m.root(), None, "10s", &[]);
    let queue_irqs: Vec<u32> = m.queue_irqs(0).into_iter().chain(m.queue_irqs(1)).collect();
    let isolated = CpuSet::parse_list("2-3,6-7").unwrap();
    // The first decision comes a quarter interval after the start.
    wait_until(
        Duration::from_secs(6),
        "queue IRQs spread onto cores 2-3",
        Some(&daemon),
        || m.cpus_of_irqs(&queue_irqs).intersects(&isolated),
    );
    // Past the placement's tick, well before the next one.
    std::thread::sleep(Duration::from_millis(500));
    let ticks = daemon.metric("steerd_ticks_total").unwrap_or(0.0);
    let written_at = Instant::now();
    fs::write(cgroup.join("cpuset.cpus.isolated"), "2-3,6-7\n").unwrap();
    wait_until(
        Duration::from_secs(2),
        "queue IRQs off the partition within 2 s",
        Some(&daemon),
        || !m.cpus_of_irqs(&queue_irqs).intersects(&isolated),
    );
    let emptied = written_at.elapsed();
    fs::write(cgroup.join("cpuset.cpus.isolated"), "\n").unwrap();
    let dissolved_at = Instant::now();
    wait_until(
        Duration::from_secs(2),
        "queue IRQs back on cores 2-3 within 2 s",
        Some(&daemon),
        || m.cpus_of_irqs(&queue_irqs).intersects(&isolated),
    );
    eprintln!(
        "10 s ticks: partition emptied in {} ms, refilled in {} ms, {} ticks in between",
        emptied.as_millis(),
        dissolved_at.elapsed().as_millis(),
        daemon.metric("steerd_ticks_total").unwrap_or(0.0) - ticks
    );
}

/// 9. Issue 14: a queue vector with a wide mask whose `effective_affinity_list` is stale
///    (names rx-1's CPU) is located by its `proc/interrupts` counts (CPU 3) and pinned
///    there, with nothing moving; the stale value never makes a stacked vector out of it.
#[test]
fn pins_a_wide_mask_vector_where_its_interrupts_arrive() {
    let mut machine = FakeMachine::new(4);
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 4,
    });
    let m = Machine::new(machine, |root, tree| {
        let irqs = &tree.queue_irqs[0];
        for (q, cpus) in ["0", "1", "2", "1-3"].iter().enumerate() {
            write_file(
                root,
                &format!("proc/irq/{}/smp_affinity_list", irqs[q]),
                &format!("{cpus}\n"),
            );
            let stale = if q == 3 { "1" } else { cpus };
            write_file(
                root,
                &format!("proc/irq/{}/effective_affinity_list", irqs[q]),
                &format!("{stale}\n"),
            );
        }
    });
    let kernel = FakeKernel::start(m.tree.clone(), Vec::new());
    kernel.set_stale_effective();
    kernel.set_loads((0..4).map(|q| load("eth0", q, 20_000.0)).collect());
    let rx3 = m.queue_irqs(0)[3];
    let mut steerd = Steerd::start(m.root(), None);
    wait_until(WAIT, "rx-3 pinned", Some(&steerd), || {
        m.irq_cpus(rx3).len() == 1
    });
    assert_eq!(m.irq_cpus(rx3).to_list(), "3", "{}", steerd.stderr_text());
    let pin = steerd.wait_for_decision("rx-3's pin", |d| d.target == format!("irq {rx3} affinity"));
    assert_eq!(pin.reason, "unpinned");
    assert!(pin.detail.contains("now CPU 3"), "{}", pin.detail);
    steerd.wait_ticks(3);
    let moves: Vec<_> = steerd
        .decisions()
        .into_iter()
        .filter(|d| d.target.ends_with("affinity"))
        .collect();
    assert_eq!(moves.len(), 1, "{moves:#?}");
    let status = steerd.stop(Signal::SIGTERM);
    assert_eq!(status.code(), Some(0));
    m.assert_all_restored(&steerd);
}

/// 11. A channel-count change (`ethtool -L eth0 combined 2`, later `combined 4`) with a
///     driver that, like virtio_net, rewrites its vectors' affinities itself (wide masks
///     at 2 queues, its 4-queue default at 4) and brings rx-2 and rx-3 back with RPS off.
///     On a fake root no uevent announces it: the read-back of steerd's values finds it
///     (every `RECHECK_EVERY`). The driver's values are not "someone else's": nothing is
///     frozen or counted as an external change; every active vector is pinned to a single
///     CPU again, the hot queue's RPS comes back, and SIGTERM restores the values from
///     before steerd's first write.
#[test]
fn places_again_after_a_channel_count_change() {
    // The driver's 4-queue default is the machine as steerd found it (as in the lab,
    // where it is queue N on CPU N): here every vector on CPU 0.
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let config = m.config("rps:\n  mode: auto\n");
    let eth0_hot = |q2: f64| {
        let mut loads = busy();
        loads[2].pps = q2;
        loads
    };
    let mut kernel = FakeKernel::start(m.tree.clone(), eth0_hot(400_000.0));
    let mut daemon = Steerd::start(m.root(), Some(&config));
    let eth0 = m.queue_irqs(0);
    let pinned_apart = |active: usize| {
        let cpus: Vec<CpuSet> = eth0[..active].iter().map(|&irq| m.irq_cpus(irq)).collect();
        cpus.iter().all(|c| c.len() == 1) && (0..active).all(|i| (0..i).all(|j| cpus[i] != cpus[j]))
    };
    wait_until(WAIT, "eth0 spread and RPS on rx-2", Some(&daemon), || {
        pinned_apart(4) && !m.rps("eth0", 2).0.is_empty()
    });
    daemon.wait_ticks(3);

    // combined 2: queues 2 and 3 go, the driver spreads queues 0 and 1 over wide masks.
    kernel.set_loads(vec![
        load("eth0", 0, 300_000.0),
        load("eth0", 1, 300_000.0),
        load("eth1", 0, 400_000.0),
    ]);
    kernel.set_channels("eth0", 2, &|q| {
        CpuSet::parse_list(["0-3", "4-7"][q as usize]).unwrap()
    });
    let wide = m.irq_cpus(eth0[0]);
    assert_eq!(wide.len(), 4);
    wait_until(
        steerd::daemon::RECHECK_EVERY + WAIT,
        "eth0's two vectors pinned again",
        Some(&daemon),
        || pinned_apart(2),
    );

    // combined 4: rx-2 and rx-3 come back with RPS off, every vector on CPU 0 again.
    kernel.set_loads(eth0_hot(400_000.0));
    kernel.set_channels("eth0", 4, &|_| CpuSet::parse_list("0").unwrap());
    assert!(m.rps("eth0", 2).0.is_empty());
    wait_until(
        steerd::daemon::RECHECK_EVERY + WAIT,
        "eth0 spread again and RPS back on rx-2",
        Some(&daemon),
        || pinned_apart(4) && !m.rps("eth0", 2).0.is_empty(),
    );
    assert_eq!(
        daemon.metric("steerd_external_changes_total"),
        Some(0.0),
        "the driver's reset taken for someone else's change:\n{}",
        daemon.stderr_text()
    );
    let log = daemon.stderr_text();
    assert!(log.matches("eth0: queue set changed").count() >= 2, "{log}");
    let status = daemon.stop(Signal::SIGTERM);
    kernel.stop();
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr_text());
    m.assert_all_restored(&daemon);
}

/// Runs `steerd status` against `daemon` (or `addr`): its exit code and stdout+stderr.
fn status(addr: std::net::SocketAddr, extra: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_steerd"))
        .arg("status")
        .arg("--metrics-listen")
        .arg(addr.to_string())
        .args(extra)
        .output()
        .expect("run steerd status");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The field paths docs/status-json.md documents: `name` at the top level,
/// `last_tick.name`, `decisions[].name`.
fn documented_status_fields() -> BTreeSet<String> {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/status-json.md"))
        .unwrap();
    let mut prefix = None;
    let mut fields = BTreeSet::new();
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            prefix = match heading {
                "Top level" => Some(""),
                "`last_tick`" => Some("last_tick."),
                "Decision" => Some("decisions[]."),
                _ => None,
            };
            continue;
        }
        let (Some(prefix), Some(row)) = (prefix, line.strip_prefix("| `")) else {
            continue;
        };
        let cell = row.split(" |").next().unwrap_or_default();
        for name in cell.split(", ") {
            fields.insert(format!("{prefix}{}", name.trim_matches('`')));
        }
    }
    fields
}

/// The field paths of a `/status` report, named as [`documented_status_fields`] does.
fn status_fields(report: &serde_json::Value) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    let object = report.as_object().expect("a JSON object");
    for (key, value) in object {
        fields.insert(key.clone());
        if key == "last_tick" {
            for inner in value.as_object().expect("last_tick object").keys() {
                fields.insert(format!("last_tick.{inner}"));
            }
        }
        if key == "decisions" {
            for decision in value.as_array().expect("decisions array") {
                for inner in decision.as_object().expect("decision object").keys() {
                    fields.insert(format!("decisions[].{inner}"));
                }
            }
        }
    }
    fields
}

/// 12. `steerd status` says how an idle daemon is (healthy, uptime, ticks, awake,
///     steering, and why it does nothing in `plan`'s words), then how a busy one is (its
///     decisions), exits 0 for both, and 2 once the daemon is gone; `--format json`
///     prints exactly the fields docs/status-json.md documents.
#[test]
fn status_reports_an_idle_then_a_busy_daemon_and_exits_by_health() {
    let m = Machine::new(two_nics(4), |_, _| {});
    let kernel = FakeKernel::start(m.tree.clone(), Vec::new());
    let mut daemon = Steerd::start(m.root(), None);
    daemon.wait_ticks(5);
    let (code, idle) = status(daemon.addr, &[]);
    eprintln!("--- idle ---\n{idle}");
    assert_eq!(code, 0, "{idle}");
    for needle in [
        "steerd 0.1.0: healthy",
        "uptime:     ",
        "ticks:      ",
        "mode:       awake: ticking every 100ms",
        "writes:     steering",
        "nothing to do: no CPU is hot (high watermark 0.60",
        "errors:     0 write error(s), 0 refusal(s)",
    ] {
        assert!(idle.contains(needle), "{needle:?} not in:\n{idle}");
    }

    let before = daemon.decisions().len();
    kernel.set_loads(busy());
    wait_until(WAIT, "decisions for the load", Some(&daemon), || {
        daemon
            .decisions()
            .iter()
            .skip(before)
            .any(|d| d.reason != "stacked_vectors")
    });
    let (code, busy_text) = status(daemon.addr, &[]);
    eprintln!("--- busy ---\n{busy_text}");
    assert_eq!(code, 0, "{busy_text}");
    assert!(busy_text.contains("decisions:  "), "{busy_text}");
    assert!(busy_text.contains("] applied"), "{busy_text}");

    let (code, json) = status(daemon.addr, &["--format", "json"]);
    assert_eq!(code, 0, "{json}");
    let report: serde_json::Value = serde_json::from_str(&json).expect(&json);
    assert_eq!(report["health"], "healthy");
    assert_eq!(report["writes"], "steering");
    assert!(report["ticks"].as_u64().unwrap() >= 5);
    assert_eq!(status_fields(&report), documented_status_fields(), "{json}");

    assert_eq!(daemon.stop(Signal::SIGTERM).code(), Some(0));
    let (code, gone) = status(daemon.addr, &[]);
    assert_eq!(code, 2, "{gone}");
    assert!(gone.contains("cannot reach steerd"), "{gone}");
}

/// 13. A dry run is healthy and says so; its decisions are `dry_run`.
#[test]
fn status_of_a_dry_run_says_it_writes_nothing() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let _kernel = FakeKernel::start(m.tree.clone(), busy());
    let daemon = Steerd::start_with(m.root(), None, &["--dry-run"]);
    wait_until(WAIT, "dry-run decisions", Some(&daemon), || {
        !daemon.decisions().is_empty()
    });
    let (code, text) = status(daemon.addr, &[]);
    eprintln!("{text}");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("writes:     dry run (--dry-run): decides and reports, writes nothing"),
        "{text}"
    );
    assert!(text.contains("] dry_run"), "{text}");
}

/// 14. Every metric the shipped alert rules and dashboard query exists on a fresh, idle
///     daemon that has changed nothing and failed at nothing: the counters whose label
///     values are known in advance (actions by reason and lever, write errors by kind,
///     reloads by result) are exported at 0 from the first scrape, so `increase()` and
///     the alerts see a rise from 0 instead of a series that appears with its first event.
#[test]
fn a_fresh_daemon_exports_every_metric_the_rules_and_dashboard_use() {
    let m = Machine::new(two_nics(4), |_, _| {});
    let _kernel = FakeKernel::start(m.tree.clone(), Vec::new());
    let daemon = Steerd::start(m.root(), None);
    daemon.wait_ticks(2);
    let text = daemon.metrics();
    // Sample names, and family names (a histogram's samples carry a suffix).
    let exposed: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| match l.strip_prefix("# TYPE ") {
            Some(family) => family.split(' ').next(),
            None if l.starts_with('#') => None,
            None => l.split(['{', ' ']).next(),
        })
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut used = BTreeSet::new();
    for file in [
        "packaging/prometheus/steerd-rules.yml",
        "packaging/grafana/steerd.json",
    ] {
        let body = fs::read_to_string(root.join(file)).unwrap();
        for (at, _) in body.match_indices("steerd_") {
            let name: String = body[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            used.insert((file, name));
        }
    }
    assert!(used.len() >= 10, "{used:?}");
    let missing: Vec<_> = used
        .iter()
        .filter(|(_, name)| !exposed.contains(name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "not on a fresh daemon: {missing:?}\n{text}"
    );
    for series in [
        "steerd_actions_total{action=\"irq_affinity\",reason=\"stacked_vectors\"}",
        "steerd_actions_total{action=\"rps_cpus\",reason=\"rps_on\"}",
        "steerd_write_errors_total{kind=\"managed\",errno=\"EIO\"}",
        "steerd_write_errors_total{kind=\"no_vector_space\",errno=\"ENOSPC\"}",
        "steerd_config_reloads_total{result=\"error\"}",
    ] {
        assert_eq!(daemon.metric(series), Some(0.0), "{series} in:\n{text}");
    }
}

/// 15. kill -9 at random moments, again and again, while steerd places vectors and turns
///     RPS on and off (the load flips every run so each run has writes to make): the run
///     after the last kill still owns every value steerd wrote (no external change) and
///     on SIGTERM puts back every value from before the first run. The exact steps of a
///     write are covered by the actuator's crash-point matrix; this is the whole binary.
#[test]
fn repeated_kill_9_at_random_moments_loses_no_original() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let state = m.root().join(STATE_FILE);
    // A fixed xorshift sequence: the same delays on every run of the test.
    let mut seed: u64 = 0x5eed_cafe_f00d_d00d;
    let mut next_delay = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        Duration::from_millis(20 + seed % 1500)
    };
    let (mut kills, mut in_flight) = (0, 0);
    for round in 0..12 {
        kernel.set_loads(if round % 2 == 0 { busy() } else { Vec::new() });
        let mut daemon = Steerd::start(m.root(), None);
        std::thread::sleep(next_delay());
        let status = daemon.stop(Signal::SIGKILL);
        assert_eq!(status.code(), None, "killed by a signal");
        kills += 1;
        // A write in flight: its intent is in the state file.
        if fs::read_to_string(&state).is_ok_and(|text| text.contains("\"intended\"")) {
            in_flight += 1;
        }
    }
    let mut last = Steerd::start(m.root(), None);
    last.wait_ticks(5);
    assert_eq!(
        last.metric("steerd_external_changes_total"),
        Some(0.0),
        "{}",
        last.stderr_text()
    );
    let status = last.stop(Signal::SIGTERM);
    assert_eq!(status.code(), Some(0));
    m.assert_all_restored(&last);
    eprintln!("{kills} kills, {in_flight} with a write in flight, every original restored");
}

/// 14. Threaded NAPI (`threaded` = 1): each receive queue's `napi/eth0-N` thread is pinned
///     to its queue's IRQ CPU (the transmit-only `napi/eth0-0` is left alone), counted as
///     `napi_thread` actions; after kill -9 a new run takes the pins as its own, and
///     SIGTERM brings every thread's original affinity back (the fake root takes the
///     affinity into the thread's `proc/PID/status`, as the kernel shows it).
#[test]
fn pins_threaded_napi_threads_beside_their_irqs_and_restores_them() {
    let mut pids = Vec::new();
    let m = Machine::new(two_nics(4), |root, tree| {
        all_queue_irqs_on_cpu0(root, tree);
        pids = tree.make_threaded(0, 4000).unwrap();
    });
    let tx_thread = format!("proc/{}/status", pids[3] + 1);
    let pinned = || m.threads_beside_irqs(&pids);
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut first = Steerd::start(m.root(), None);
    wait_until(
        WAIT,
        "every eth0 receive thread on its IRQ's CPU",
        Some(&first),
        pinned,
    );
    first.wait_for_decision("a thread pinned", |d| {
        d.action == "napi_thread_affinity" && d.reason == "napi_thread" && d.outcome == "applied"
    });
    assert!(
        first
            .metric("steerd_actions_total{action=\"napi_thread_affinity\",reason=\"napi_thread\"}")
            >= Some(4.0)
    );
    assert_eq!(
        read_file(m.root(), &tx_thread),
        m.original.get(&tx_thread).unwrap().trim_end(),
        "the transmit-only thread is left alone"
    );
    first.wait_ticks(3);
    first.stop(Signal::SIGKILL);

    let mut second = Steerd::start(m.root(), None);
    second.wait_ticks(5);
    assert!(pinned(), "{}", second.stderr_text());
    assert_eq!(second.metric("steerd_external_changes_total"), Some(0.0));
    let status = second.stop(Signal::SIGTERM);
    drop(kernel);
    assert_eq!(status.code(), Some(0), "{}", second.stderr_text());
    m.assert_all_restored(&second);
    for &pid in &pids {
        assert_eq!(m.thread_cpus(pid), CpuSet::parse_list("0-7").unwrap());
    }
}

/// 15. A channel-count change on a driver whose NAPI keeps its IRQ affinity across resets
///     (the kernel records each affinity write per NAPI and re-applies it after `ethtool
///     -L`: 6.15+ for drivers that opt in, ice and idpf; iavf in 6.17). The values the
///     kernel puts back are steerd's own: the change is seen (the read-back finds the
///     removed queues' RPS masks gone), nothing is counted as an external change and no
///     IRQ is rewritten.
#[test]
fn a_kernel_kept_affinity_after_a_channel_change_is_taken_as_steerds_own() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    // A static RPS mask: steerd's values in the queues' directories, which the read-back
    // finds gone, then reset, so each change is seen. No traffic: nothing but the
    // placement rules moves an IRQ.
    let config = m.config("devices:\n  eth0:\n    rps: static\n    rps_cpus: \"4-7\"\n");
    let mut kernel = FakeKernel::start(m.tree.clone(), Vec::new());
    let mut daemon = Steerd::start(m.root(), Some(&config));
    let eth0 = m.queue_irqs(0);
    let spread = || {
        let cpus: Vec<CpuSet> = eth0.iter().map(|&irq| m.irq_cpus(irq)).collect();
        cpus.iter().all(|c| c.len() == 1) && (0..4).all(|i| (0..i).all(|j| cpus[i] != cpus[j]))
    };
    wait_until(WAIT, "eth0 spread, static RPS on", Some(&daemon), || {
        spread() && !m.rps("eth0", 3).0.is_empty()
    });
    daemon.wait_ticks(5);
    let placed: Vec<CpuSet> = eth0.iter().map(|&irq| m.irq_cpus(irq)).collect();
    let irq_writes = |daemon: &Steerd| {
        daemon
            .decisions()
            .iter()
            .filter(|d| d.action == "irq_affinity" && d.outcome == "applied")
            .count()
    };
    let before = irq_writes(&daemon);
    let resets = |daemon: &Steerd| {
        daemon
            .stderr_text()
            .matches("eth0: queue set changed")
            .count()
    };
    // combined 2: the kernel puts steerd's affinity back on the vectors that stay. On a
    // fake root no uevent announces it: the read-back finds rx-2's and rx-3's RPS gone.
    kernel.set_channels("eth0", 2, &|q| placed[q as usize].clone());
    wait_until(
        steerd::daemon::RECHECK_EVERY + WAIT,
        "the channel change seen",
        Some(&daemon),
        || resets(&daemon) == 1,
    );
    daemon.wait_ticks(5);
    let after: Vec<CpuSet> = eth0[..2].iter().map(|&irq| m.irq_cpus(irq)).collect();
    assert_eq!(after, placed[..2], "the kernel-kept placement stands");
    assert_eq!(irq_writes(&daemon), before, "no IRQ rewritten");
    assert_eq!(
        daemon.metric("steerd_external_changes_total"),
        Some(0.0),
        "the kernel's re-applied values taken for someone else's:\n{}",
        daemon.stderr_text()
    );
    let status = daemon.stop(Signal::SIGTERM);
    kernel.stop();
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr_text());
    // The removed queues' files are gone; every other file has its original text.
    let changed = m.changed();
    assert!(changed.is_empty(), "not restored: {changed:#?}");
}

/// 16. A NAPI thread the operator pins elsewhere while steerd runs (`taskset -pc`, which
///     the fake root shows in the thread's `proc/PID/status`) is someone else's choice,
///     like an IRQ moved by hand: the read-back finds it, it is counted and noted as an
///     external change, steerd does not move it back (`on_external_change: respect`, the
///     default), and on SIGTERM it stays where the operator put it while every other
///     thread and IRQ gets its original back.
#[test]
fn a_napi_thread_the_operator_pins_elsewhere_is_respected_and_kept_on_exit() {
    let mut pids = Vec::new();
    let m = Machine::new(two_nics(4), |root, tree| {
        all_queue_irqs_on_cpu0(root, tree);
        pids = tree.make_threaded(0, 4000).unwrap();
    });
    let status = |pid: u32| format!("proc/{pid}/status");
    let pinned = || m.threads_beside_irqs(&pids);
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), None);
    wait_until(
        WAIT,
        "every eth0 receive thread on its IRQ's CPU",
        Some(&daemon),
        pinned,
    );
    daemon.wait_ticks(3);

    // The operator moves rx-1's thread off its IRQ's CPU.
    let theirs = pids[1];
    let writes_to_theirs = |daemon: &Steerd| {
        daemon
            .decisions()
            .iter()
            .filter(|d| d.target.contains(&format!("pid {theirs}")) && d.outcome == "applied")
            .count()
    };
    let ours = writes_to_theirs(&daemon);
    assert!(ours >= 1);
    let irq_cpu = m.irq_cpus(m.queue_irqs(0)[1]).first().unwrap();
    let elsewhere = CpuSet::from_iter([(irq_cpu + 1) % 8]);
    let text = read_file(m.root(), &status(theirs));
    write_file(
        m.root(),
        &status(theirs),
        &steerd::kernel::napi_threads::with_affinity(&text, &elsewhere),
    );
    let operator_text = read_file(m.root(), &status(theirs));
    wait_until(
        steerd::daemon::RECHECK_EVERY + WAIT,
        "the operator's pin seen as an external change",
        Some(&daemon),
        || daemon.metric("steerd_external_changes_total") >= Some(1.0),
    );
    daemon.wait_ticks(10);
    assert_eq!(
        m.thread_cpus(theirs),
        elsewhere,
        "moved back:\n{}",
        daemon.stderr_text()
    );
    assert_eq!(daemon.metric("steerd_external_changes_total"), Some(1.0));
    let stderr = daemon.stderr_text();
    assert!(
        stderr.contains(&format!("napi/eth0-8194 (pid {theirs}) affinity"))
            && stderr.contains("changed by someone else"),
        "{stderr}"
    );
    assert_eq!(
        writes_to_theirs(&daemon),
        ours,
        "no write to the thread after the operator's"
    );

    let exit = daemon.stop(Signal::SIGTERM);
    drop(kernel);
    assert_eq!(exit.code(), Some(0), "{}", daemon.stderr_text());
    // Everything steerd changed is back, except the operator's thread, which is theirs.
    let changed: Vec<_> = m.changed().into_iter().map(|(path, _, _)| path).collect();
    assert_eq!(
        changed,
        vec![std::path::PathBuf::from(status(theirs))],
        "{}",
        daemon.stderr_text()
    );
    assert_eq!(read_file(m.root(), &status(theirs)), operator_text);
    for &pid in pids.iter().filter(|&&p| p != theirs) {
        assert_eq!(m.thread_cpus(pid), CpuSet::parse_list("0-7").unwrap());
    }
}

/// 17. Threaded NAPI switched on while steerd runs, then off again (`echo 1`, `echo 0 >
///     /sys/class/net/eth0/threaded`). On: the threads are seen at the next tick (the
///     tick notices `threaded` changed and rediscovers) and pinned beside their IRQs. Off:
///     the kernel stops the threads and their pids vanish; steerd writes to none of them,
///     logs no warning or error about them, keeps none of them in its state file, and
///     exits with every file as it found it (the thread directories gone).
#[test]
fn napi_threads_that_appear_and_vanish_between_ticks_are_followed_quietly() {
    let m = Machine::new(two_nics(4), all_queue_irqs_on_cpu0);
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), None);
    wait_until(WAIT, "eth0's IRQs spread", Some(&daemon), || {
        m.distinct_irq_cpus(0) == 4
    });
    daemon.wait_ticks(3);

    let pids = m.tree.make_threaded(0, 5000).unwrap();
    let pinned = || m.threads_beside_irqs(&pids);
    // The tick notices `threaded` at once; 2 s is twenty 100 ms ticks.
    wait_until(
        Duration::from_secs(2),
        "the new threads pinned beside their IRQs",
        Some(&daemon),
        pinned,
    );
    let pinned_writes = |daemon: &Steerd| {
        daemon
            .decisions()
            .iter()
            .filter(|d| d.action == "napi_thread_affinity")
            .count()
    };
    // One per thread, and more if an IRQ moved since (its thread follows).
    daemon.wait_ticks(3);
    let writes = pinned_writes(&daemon);
    assert!(writes >= 4, "{}", daemon.stderr_text());

    m.tree.make_unthreaded(0, &pids).unwrap();
    let lines_before = daemon.stderr_lines().len();
    let state_names_threads = || {
        fs::read_to_string(m.root().join(STATE_FILE)).is_ok_and(|text| text.contains("napi/eth0"))
    };
    wait_until(
        steerd::daemon::RECHECK_EVERY + WAIT,
        "the vanished threads forgotten by the state file",
        Some(&daemon),
        || !state_names_threads(),
    );
    daemon.wait_ticks(10);
    assert_eq!(
        pinned_writes(&daemon),
        writes,
        "nothing written to a vanished thread"
    );
    let after: Vec<String> = daemon.stderr_lines()[lines_before..]
        .iter()
        .map(|l| l.text.clone())
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(
        after.is_empty(),
        "warnings after the threads went: {after:#?}"
    );
    assert_eq!(daemon.metric("steerd_external_changes_total"), Some(0.0));

    let exit = daemon.stop(Signal::SIGTERM);
    drop(kernel);
    assert_eq!(exit.code(), Some(0), "{}", daemon.stderr_text());
    // `threaded` is back to 0 and the threads' directories are gone: as generated.
    m.assert_all_restored(&daemon);
}

/// 18b. The same pin made while steerd runs (an operator's `taskset`: no event, and the
///     model learns a thread's CPUs otherwise only at rediscovery, every 30 s): every
///     vector and RPS mask leaves the pinned thread's CPU within a few ticks, and the log
///     says why.
#[test]
fn a_busy_polling_thread_pinned_while_steerd_runs_is_followed_at_the_next_tick() {
    let mut pids = Vec::new();
    let m = Machine::new(two_nics(4), |root, tree| {
        all_queue_irqs_on_cpu0(root, tree);
        pids = tree.make_busy_poll(0, 4000).unwrap();
    });
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), None);
    let vectors: Vec<u32> = (0..2).flat_map(|nic| m.queue_irqs(nic)).collect();
    wait_until(WAIT, "eth0's vectors spread", Some(&daemon), || {
        m.distinct_irq_cpus(0) == 4
    });
    daemon.wait_ticks(3);
    // The CPU of a vector steerd placed: the pin must move it.
    let spin = m
        .irq_cpus(m.queue_irqs(0)[1])
        .iter()
        .next()
        .expect("a placed vector");
    let status = format!("proc/{}/status", pids[0]);
    let text = read_file(m.root(), &status);
    write_file(
        m.root(),
        &status,
        &steerd::kernel::napi_threads::with_affinity(&text, &CpuSet::from_iter([spin])),
    );
    // 100 ms ticks: 2 s is 20 of them, and a fifteenth of the rediscovery period.
    wait_until(
        Duration::from_secs(2),
        "every vector and RPS mask off the pinned busy-polling thread's CPU",
        Some(&daemon),
        || {
            vectors.iter().all(|&irq| !m.irq_cpus(irq).contains(spin))
                && [("eth0", 4), ("eth1", 1)].iter().all(|&(device, queues)| {
                    (0..queues).all(|queue| !m.rps(device, queue).0.contains(spin))
                })
        },
    );
    let stderr = daemon.stderr_text();
    assert!(
        stderr.contains("busy-polling) is now allowed on CPUs"),
        "{stderr}"
    );
    assert_eq!(m.thread_cpus(pids[0]), CpuSet::from_iter([spin]));
    let status = daemon.stop(Signal::SIGTERM);
    drop(kernel);
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr_text());
}

/// 18. Threaded NAPI in busy-poll mode (`threaded` = 2, 6.19) with the operator's pin of
///     rx-0's thread to CPU 5: a busy-polling thread never sleeps, so steerd leaves every
///     busy-polling thread where it is (no `napi_thread` write), keeps every queue vector
///     of both NICs and every RPS mask off CPU 5, and still spreads the vectors over the
///     other CPUs; SIGTERM brings every original back.
#[test]
fn a_pinned_busy_polling_napi_thread_keeps_its_cpu_to_itself() {
    const SPIN_CPU: u32 = 5;
    let mut pids = Vec::new();
    let m = Machine::new(two_nics(4), |root, tree| {
        all_queue_irqs_on_cpu0(root, tree);
        pids = tree.make_busy_poll(0, 4000).unwrap();
        let status = format!("proc/{}/status", pids[0]);
        let text = read_file(root, &status);
        write_file(
            root,
            &status,
            &steerd::kernel::napi_threads::with_affinity(&text, &CpuSet::from_iter([SPIN_CPU])),
        );
    });
    let kernel = FakeKernel::start(m.tree.clone(), busy());
    let mut daemon = Steerd::start(m.root(), None);
    let vectors: Vec<u32> = (0..2).flat_map(|nic| m.queue_irqs(nic)).collect();
    wait_until(WAIT, "eth0's vectors spread", Some(&daemon), || {
        m.distinct_irq_cpus(0) == 4
    });
    daemon.wait_ticks(8);
    let stderr = daemon.stderr_text();
    for &irq in &vectors {
        assert!(
            !m.irq_cpus(irq).contains(SPIN_CPU),
            "IRQ {irq} on the busy-poll CPU:\n{stderr}"
        );
    }
    for (device, queues) in [("eth0", 4), ("eth1", 1)] {
        for queue in 0..queues {
            assert!(
                !m.rps(device, queue).0.contains(SPIN_CPU),
                "{device} rx-{queue}'s RPS mask uses the busy-poll CPU:\n{stderr}"
            );
        }
    }
    assert_eq!(m.thread_cpus(pids[0]), CpuSet::from_iter([SPIN_CPU]));
    for &pid in &pids[1..] {
        assert_eq!(m.thread_cpus(pid), CpuSet::parse_list("0-7").unwrap());
    }
    assert!(
        !daemon
            .decisions()
            .iter()
            .any(|d| d.action == "napi_thread_affinity"),
        "a busy-polling thread was moved:\n{stderr}"
    );
    let status = daemon.stop(Signal::SIGTERM);
    drop(kernel);
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr_text());
    m.assert_all_restored(&daemon);
}
