//! The shipped `systemd/steerd.service` in a real systemd (the host's, booted as PID 1 of
//! throwaway namespaces by `systemd_ns`), running the test-built binary as
//! `/usr/sbin/steerd` against fake kernel trees that a fake kernel advances. It checks what
//! the unit promises: `systemd-analyze verify` and `security` pass; the unit stays
//! `activating` until steerd is READY; `systemctl reload` applies a good configuration and
//! keeps the old one on a bad one; the watchdog kills a stopped daemon and systemd
//! restarts it, with its state file kept; `systemctl stop` restores every value; the
//! journal carries each decision with its reason; starting steerd stops irqbalance; and
//! the sandbox lets steerd write the kernel files it tunes and nothing else.
//!
//! Root only; skips with a printed reason otherwise. Every wait is bounded; the machine
//! is powered off and removed on drop, also when a check fails.

mod common;
mod daemon_support;
mod systemd_ns;

use std::path::Path;
use std::time::{Duration, Instant};

use common::suite::{Requirement, TestResult};
use daemon_support::{FakeKernel, QueueLoad, TreeFiles, sample};
use steerd::fakeroot::{FakeMachine, FakeNic, FakeTree};
use systemd_ns::{Machine, wait_until};

/// The unit as shipped, and where the Debian package puts it.
const UNIT: &str = include_str!("../systemd/steerd.service");
const UNIT_PATH: &str = "/lib/systemd/system/steerd.service";
const DROP_IN: &str = "/etc/systemd/system/steerd.service.d/test.conf";
/// The shipped configuration, at the path the unit names.
const CONFIG: &str = include_str!("../config/steerd.yaml");
const CONFIG_PATH: &str = "/etc/steerd/steerd.yaml";
/// The fake trees, inside the machine.
const LARGE_ROOT: &str = "/srv/steerd-large";
const SMALL_ROOT: &str = "/srv/steerd-fake";
/// The watchdog timeout for the test (the shipped one is 30 s).
const TEST_WATCHDOG: &str = "3s";
const WAIT: Duration = Duration::from_secs(20);

/// Prints one check's result, with the time since the test started.
struct Report(Instant);

impl Report {
    fn ok(&self, what: &str) {
        eprintln!("[{:>5.1}s] ok: {what}", self.0.elapsed().as_secs_f64());
    }
}

/// The drop-in that points steerd at a fake tree (and keeps its state file where the
/// shipped unit would: in its RuntimeDirectory).
fn drop_in(root: &str, extra: &str) -> String {
    format!(
        "[Service]\n\
         ExecStart=\n\
         ExecStart=/usr/sbin/steerd run --config {CONFIG_PATH} --root {root} \
         --state-file /run/steerd/state.json --interval 100ms\n\
         ReadWritePaths={root}\n\
         {extra}"
    )
}

fn install_drop_in(machine: &Machine, text: &str) {
    machine.write(DROP_IN, text, 0o644);
    machine.systemctl(&["daemon-reload"]).ok();
}

/// eth0 with 4 queues and eth1 with one, on 4 cores × 2 threads, every queue IRQ on CPU
/// 0: under load steerd spreads the IRQs and turns RPS on for eth1.
fn small_machine() -> FakeMachine {
    let mut machine = FakeMachine::new(4);
    machine.threads_per_core = 2;
    for (name, queues) in [("eth0", 4), ("eth1", 1)] {
        machine.nics.push(FakeNic {
            name: name.into(),
            driver: "ixgbe".into(),
            node: Some(0),
            queues,
        });
    }
    machine
}

fn busy_loads() -> Vec<QueueLoad> {
    let mut loads: Vec<QueueLoad> = (0..4)
        .map(|queue| QueueLoad {
            device: "eth0".into(),
            queue,
            pps: 100_000.0,
        })
        .collect();
    loads.push(QueueLoad {
        device: "eth1".into(),
        queue: 0,
        pps: 400_000.0,
    });
    loads
}

/// steerd's /metrics, fetched on the machine's loopback.
fn metrics(machine: &Machine) -> String {
    machine.in_netns(|| {
        let addr = "127.0.0.1:9847".parse().expect("address");
        steerd::status::get(addr, "/metrics").unwrap_or_default()
    })
}

fn reloads(machine: &Machine, result: &str) -> f64 {
    let series = format!("steerd_config_reloads_total{{result=\"{result}\"}}");
    sample(&metrics(machine), &series).unwrap_or(0.0)
}

fn main_pid(machine: &Machine) -> String {
    machine.show("steerd.service", "MainPID")
}

/// Waits until steerd.service is active/running (after a start, a reload or a restart).
fn wait_running(machine: &Machine, what: &str) {
    wait_until(WAIT, what, || {
        machine.show("steerd.service", "ActiveState") == "active"
            && machine.show("steerd.service", "SubState") == "running"
    });
}

fn steerd_service_under_real_systemd() -> TestResult {
    const TEST: &str = "steerd_service_under_real_systemd";
    Requirement::tool("ip", "apt-get install iproute2").check()?;
    let report = Report(Instant::now());
    let machine = systemd_ns::boot_or_skip(TEST)?;
    report.ok("booted the host's systemd as PID 1 of fresh namespaces");

    machine.copy_in(
        Path::new(env!("CARGO_BIN_EXE_steerd")),
        "/usr/sbin/steerd",
        0o755,
    );
    machine.write(UNIT_PATH, UNIT, 0o644);
    machine.write(CONFIG_PATH, CONFIG, 0o644);
    machine.systemctl(&["daemon-reload"]).ok();

    check_verify_and_security(&machine, &report);
    check_activating_until_ready(&machine, &report);

    // The rest runs on a small tree that a fake kernel keeps counting.
    let tree = small_machine()
        .write(&machine.path(SMALL_ROOT))
        .expect("write the small tree");
    for irq in tree.queue_irqs.iter().flatten() {
        std::fs::write(
            tree.root.join(format!("proc/irq/{irq}/smp_affinity_list")),
            "0\n",
        )
        .expect("stack the IRQs on CPU 0");
    }
    let original = TreeFiles::read(&tree.root);
    let kernel = FakeKernel::start(tree.clone(), busy_loads());
    install_drop_in(
        &machine,
        &drop_in(SMALL_ROOT, &format!("WatchdogSec={TEST_WATCHDOG}\n")),
    );

    check_conflicts_with_irqbalance(&machine, &report);
    wait_until(WAIT, "steerd to change the fake tree", || {
        !TreeFiles::read(&tree.root)
            .changed_since(&original)
            .is_empty()
    });
    report.ok("steerd acts on the fake tree under systemd");
    check_journal_has_decisions(&machine, &report);
    check_sandbox(&machine, &report);
    check_reload(&machine, &report);
    check_watchdog_restart(&machine, &report, &tree, &original);
    check_stop_restores(&machine, &report, &tree, &original);
    check_real_root_dry_run(&machine, &report);
    if std::env::var_os("STEERD_TEST_LOG").is_some() {
        let journal = machine.run(&[
            "journalctl",
            "--no-pager",
            "-o",
            "short-monotonic",
            "-u",
            "steerd.service",
        ]);
        eprintln!("--- journalctl -u steerd ---\n{}", journal.stdout);
        let verbose = machine.run(&[
            "journalctl",
            "--no-pager",
            "-o",
            "verbose",
            "-u",
            "steerd.service",
            "-p",
            "warning",
        ]);
        eprintln!("--- warnings and errors, verbose ---\n{}", verbose.stdout);
    }
    drop(kernel);
    machine.poweroff();
    report.ok("powered off");
    Ok(())
}

/// `systemd-analyze verify` is clean with the binary in place (`--man=no`: the man page
/// comes with the package), and the exposure score is at most 2.5.
fn check_verify_and_security(machine: &Machine, report: &Report) {
    let verify = machine.run(&["systemd-analyze", "verify", "--man=no", UNIT_PATH]);
    assert!(verify.success(), "{verify}");
    let noise: Vec<&str> = verify
        .stdout
        .lines()
        .chain(verify.stderr.lines())
        .filter(|l| l.contains("steerd"))
        .collect();
    assert!(noise.is_empty(), "systemd-analyze verify: {noise:#?}");
    report.ok("systemd-analyze verify --man=no: no findings");
    for offline in [false, true] {
        let mut args = vec!["systemd-analyze", "security", "--no-pager"];
        if offline {
            args.push("--offline=yes");
            args.push(UNIT_PATH);
        } else {
            args.push("steerd.service");
        }
        let out = machine.run(&args);
        let score: f64 = out
            .stdout
            .lines()
            .find_map(|l| {
                l.strip_prefix("→ Overall exposure level for steerd.service: ")?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no score in: {out}"));
        assert!(score <= 2.5, "exposure {score} > 2.5\n{out}");
        report.ok(&format!(
            "systemd-analyze security{}: {score}",
            if offline { " --offline=yes" } else { "" }
        ));
    }
}

/// On a 1152-CPU tree discovery takes long enough to see the unit `activating` with a
/// main PID (steerd running, not READY yet), then `active`.
fn check_activating_until_ready(machine: &Machine, report: &Report) {
    let written = Instant::now();
    FakeMachine::large()
        .write(&machine.path(LARGE_ROOT))
        .expect("write the large tree");
    report.ok(&format!(
        "wrote the 1152-CPU tree in {:.1}s",
        written.elapsed().as_secs_f64()
    ));
    install_drop_in(machine, &drop_in(LARGE_ROOT, ""));
    let started = Instant::now();
    machine
        .systemctl(&["start", "--no-block", "steerd.service"])
        .ok();
    let mut activating_with_pid = None;
    wait_until(Duration::from_secs(60), "steerd.service active", || {
        let state = machine.systemctl(&[
            "show",
            "-p",
            "ActiveState",
            "-p",
            "MainPID",
            "steerd.service",
        ]);
        let text = state.stdout;
        let pid: u32 = text
            .lines()
            .find_map(|l| l.strip_prefix("MainPID="))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        if text.contains("ActiveState=activating") && pid > 0 && activating_with_pid.is_none() {
            activating_with_pid = Some((started.elapsed(), pid));
        }
        assert!(
            !text.contains("ActiveState=failed"),
            "steerd failed to start:\n{}",
            machine.journal("steerd.service")
        );
        text.contains("ActiveState=active")
    });
    let active_after = started.elapsed();
    let (seen_at, pid) = activating_with_pid.unwrap_or_else(|| {
        panic!(
            "never saw steerd.service activating with a main PID (active after {active_after:?})"
        )
    });
    let journal = machine.journal("steerd.service");
    assert!(journal.contains("steerd started"), "{journal}");
    report.ok(&format!(
        "activating with MainPID {pid} at {:.2}s, active (READY) at {:.2}s",
        seen_at.as_secs_f64(),
        active_after.as_secs_f64()
    ));
    machine.systemctl(&["stop", "steerd.service"]).ok();
    assert_eq!(machine.show("steerd.service", "ActiveState"), "inactive");
}

/// A stand-in irqbalance.service runs; starting steerd stops it (Conflicts=).
fn check_conflicts_with_irqbalance(machine: &Machine, report: &Report) {
    machine.write(
        "/etc/systemd/system/irqbalance.service",
        "[Unit]\nDescription=stand-in irqbalance\n[Service]\nExecStart=/bin/sleep infinity\n",
        0o644,
    );
    machine.systemctl(&["daemon-reload"]).ok();
    machine.systemctl(&["start", "irqbalance.service"]).ok();
    assert_eq!(machine.show("irqbalance.service", "ActiveState"), "active");
    let start = machine.systemctl(&["start", "steerd.service"]);
    assert!(
        start.success(),
        "{start}\n{}",
        machine.journal("steerd.service")
    );
    wait_running(machine, "steerd running");
    assert_eq!(
        machine.show("irqbalance.service", "ActiveState"),
        "inactive"
    );
    report.ok("starting steerd.service stopped irqbalance.service (Conflicts=)");
}

/// Every write is in the journal as "knob: old -> new (reason: detail) applied".
fn check_journal_has_decisions(machine: &Machine, report: &Report) {
    let mut lines = Vec::new();
    wait_until(WAIT, "decisions in journalctl -u steerd", || {
        lines = machine
            .journal("steerd.service")
            .lines()
            .filter(|l| l.contains(" -> ") && l.ends_with(") applied"))
            .map(str::to_string)
            .collect();
        !lines.is_empty()
    });
    for line in &lines {
        let (_, why) = line.split_once(" (").expect("a reason in parentheses");
        let (reason, detail) = why.split_once(": ").expect("reason: detail");
        assert!(!reason.is_empty() && detail.len() > 1, "{line}");
    }
    report.ok(&format!(
        "journalctl -u steerd: {} decisions with reasons, e.g. {:?}",
        lines.len(),
        lines[0]
    ));
}

/// The first IRQ of the host whose `smp_affinity_list` takes its own value back, and that
/// value. Writing a file its own value changes nothing; the guard writes it again at the
/// end anyway.
fn writable_host_irq() -> Option<(u32, String)> {
    let mut irqs: Vec<u32> = std::fs::read_dir("/proc/irq")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    irqs.sort_unstable();
    irqs.into_iter().find_map(|irq| {
        let path = format!("/proc/irq/{irq}/smp_affinity_list");
        let value = std::fs::read_to_string(&path).ok()?;
        std::fs::write(&path, &value).ok()?;
        Some((irq, value.trim().to_string()))
    })
}

/// Writes an IRQ's original affinity back on drop.
struct IrqGuard(u32, String);

impl Drop for IrqGuard {
    fn drop(&mut self) {
        let path = format!("/proc/irq/{}/smp_affinity_list", self.0);
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now.trim() != self.1 {
            let _ = std::fs::write(&path, &self.1);
        }
    }
}

/// The sandbox, seen from the running steerd's own mount namespace (`nsenter -t MAINPID
/// -m`): the real kernel files it tunes and /run/steerd are writable, the rest is not. Then
/// the same with the unit's capabilities and system call filter too: a probe unit made
/// from the shipped unit text (only Type and ExecStart changed).
fn check_sandbox(machine: &Machine, report: &Report) {
    // A veth in the machine's network namespace: its queue files are real sysfs files.
    machine
        .run(&[
            "ip",
            "link",
            "add",
            "sdns-veth0",
            "type",
            "veth",
            "peer",
            "name",
            "sdns-veth1",
        ])
        .ok();
    let irq = writable_host_irq();
    let _guard = irq.clone().map(|(n, v)| IrqGuard(n, v));
    let effective = |n: u32| {
        std::fs::read_to_string(format!("/proc/irq/{n}/effective_affinity_list"))
            .map(|t| t.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    let effective_before = irq.as_ref().map(|(n, _)| effective(*n));
    // Each line writes a file its own value back (or creates a file where nothing may be
    // created) and prints "NAME writable", "NAME denied", or "NAME missing" when the file
    // is not there to try.
    let mut script = String::from(
        r#"try() {
    if [ ! -e "$2" ]; then echo "$1 missing"
    elif (eval "$3") 2>/dev/null; then echo "$1 writable"
    else echo "$1 denied"; fi
}
same() { v=$(cat "$1") && echo "$v" > "$1"; }
selected() { v=$(sed 's/.*\[\(.*\)\].*/\1/' "$1") && echo "$v" > "$1"; }
q=/sys/class/net/sdns-veth0/queues/rx-0
rd=${RUNTIME_DIRECTORY:-/run/steerd}
try rps_cpus $q/rps_cpus "same $q/rps_cpus"
try rps_flow_cnt $q/rps_flow_cnt "same $q/rps_flow_cnt"
try run_steerd $rd "echo x > $rd/probe && rm $rd/probe"
try etc /etc "touch /etc/steerd-probe"
try usr /usr "touch /usr/steerd-probe"
try var /var "touch /var/steerd-probe"
try home /home "touch /home/steerd-probe"
try proc_sys_net /proc/sys/net/core/somaxconn "same /proc/sys/net/core/somaxconn"
f=/sys/kernel/mm/transparent_hugepage/defrag
try sys_kernel_mm $f "selected $f"
f=/sys/devices/system/cpu/cpu1/online
try cpu_online $f "same $f"
f=/proc/sys/net/core/tstamp_allow_data
try sysctl_stand_in $f "same $f"
"#,
    );
    if let Some((n, _)) = &irq {
        let f = format!("/proc/irq/{n}/smp_affinity_list");
        script.push_str(&format!("try irq {f} \"same {f}\"\n"));
    }
    // `sysctl_stand_in`: rps_sock_flow_entries exists only in the host's network
    // namespace, so the probe unit adds one ReadWritePaths= line for a per-namespace sysctl
    // instead, to show that one writable file under the read-only /proc/sys works.
    let check = |output: &str, whose: &str, probe: bool| {
        let expected_writable = |name: &str| {
            matches!(name, "rps_cpus" | "rps_flow_cnt" | "run_steerd" | "irq")
                || (probe && name == "sysctl_stand_in")
        };
        let mut seen = Vec::new();
        for line in output.lines() {
            let Some((name, verdict)) = line.split_once(' ') else {
                continue;
            };
            if !matches!(verdict, "writable" | "denied" | "missing") {
                continue;
            }
            // Files of optional kernel features may be missing; the rest must be there.
            let optional = matches!(name, "sys_kernel_mm" | "cpu_online");
            let want = if expected_writable(name) {
                "writable"
            } else {
                "denied"
            };
            if !(optional && verdict == "missing") {
                assert_eq!(verdict, want, "{whose}: {name}\n{output}");
            }
            seen.push(format!("{name}={verdict}"));
        }
        assert!(seen.len() >= 10, "{whose}: too few results\n{output}");
        if probe {
            assert!(
                // CAP_NET_ADMIN (bit 12) and CAP_PERFMON (bit 38).
                output.contains("CapEff:\t0000004000001000"),
                "{whose}: effective capabilities are not exactly CAP_NET_ADMIN and CAP_PERFMON\n{output}"
            );
        }
        seen.join(" ")
    };

    // 1. In the running steerd's mount namespace.
    let pid = main_pid(machine);
    let inside = machine.run(&["nsenter", "-t", &pid, "-m", "sh", "-c", &script]);
    let seen = check(&inside.stdout, "nsenter -t MAINPID -m", false);
    report.ok(&format!("steerd's mount namespace: {seen}"));

    // 2. A probe service with the unit's whole sandbox, capabilities included.
    let probe_unit: String = UNIT
        .lines()
        .filter(|l| {
            ![
                "Type=",
                "ExecStart=",
                "ExecReload=",
                "WatchdogSec=",
                "Restart",
                "NotifyAccess=",
                "RuntimeDirectoryPreserve=",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .map(|l| {
            if l == "[Service]" {
                "[Service]\nType=oneshot\nExecStart=/bin/sh /usr/local/lib/steerd-probe.sh"
                    .to_string()
            } else if l.starts_with("ReadWritePaths=") && l.contains("rps_sock_flow_entries") {
                format!("{l}\nReadWritePaths=/proc/sys/net/core/tstamp_allow_data")
            } else if l == "RuntimeDirectory=steerd" {
                // Its own, so that the probe's stop does not remove steerd's.
                "RuntimeDirectory=steerd-probe".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    machine.write(
        "/usr/local/lib/steerd-probe.sh",
        &format!("{script}grep CapEff /proc/self/status\n"),
        0o755,
    );
    machine.write(
        "/etc/systemd/system/steerd-probe.service",
        &probe_unit,
        0o644,
    );
    machine.systemctl(&["daemon-reload"]).ok();
    let started = machine.systemctl(&["start", "steerd-probe.service"]);
    let output = machine.journal("steerd-probe.service");
    assert!(started.success(), "{started}\n{output}");
    let seen = check(&output, "probe unit", true);
    report.ok(&format!(
        "probe with the unit's sandbox and capabilities (CapEff = CAP_NET_ADMIN CAP_PERFMON): {seen}"
    ));
    match &irq {
        Some((n, value)) => report.ok(&format!(
            "host IRQ {n}: smp_affinity_list {value} written back as is; \
             effective_affinity_list {} before, {} after",
            effective_before.unwrap_or_default(),
            effective(*n)
        )),
        None => eprintln!("NOTE: no host IRQ takes writes here: the /proc/irq check was not run"),
    }
}

/// A changed configuration is applied on `systemctl reload`; a broken one is refused with
/// its key and line, and steerd keeps running on the old one.
fn check_reload(machine: &Machine, report: &Report) {
    let pid = main_pid(machine);
    let ok_before = reloads(machine, "ok");
    let changed = CONFIG.replace("max_actions_per_tick: 32", "max_actions_per_tick: 16");
    assert_ne!(
        changed, CONFIG,
        "the shipped config no longer has max_actions_per_tick: 32"
    );
    machine.write(CONFIG_PATH, &changed, 0o644);
    machine.systemctl(&["reload", "steerd.service"]).ok();
    wait_running(machine, "steerd running after reload");
    wait_until(WAIT, "reloads_total{result=\"ok\"} to rise", || {
        reloads(machine, "ok") > ok_before
    });
    wait_until(WAIT, "\"configuration reloaded\" in the journal", || {
        machine
            .journal("steerd.service")
            .contains("configuration reloaded")
    });
    report.ok(
        "systemctl reload: configuration reloaded, steerd_config_reloads_total{result=\"ok\"} rose",
    );

    let error_before = reloads(machine, "error");
    let broken = changed.replacen("  confirm_ticks: 3\n", "  confirm_ticks: banana\n", 1);
    assert_ne!(
        broken, changed,
        "the shipped config no longer has confirm_ticks: 3"
    );
    machine.write(CONFIG_PATH, &broken, 0o644);
    machine.systemctl(&["reload", "steerd.service"]).ok();
    wait_running(machine, "steerd running after a bad reload");
    wait_until(WAIT, "reloads_total{result=\"error\"} to rise", || {
        reloads(machine, "error") > error_before
    });
    let journal = machine.journal("steerd.service");
    let refused = journal
        .lines()
        .rev()
        .find(|l| l.contains("configuration not reloaded"))
        .unwrap_or_else(|| panic!("no refusal in the journal:\n{journal}"))
        .to_string();
    let verbose = machine
        .run(&[
            "journalctl",
            "--no-pager",
            "-u",
            "steerd.service",
            "-o",
            "verbose",
            "--grep",
            "configuration not reloaded",
        ])
        .stdout;
    // The plain journal line itself (what `journalctl -u steerd` shows) names the line
    // and the key.
    assert!(
        refused.contains("line") && refused.contains("confirm_ticks"),
        "the refusal does not name the line and the key:\n{refused}\n{verbose}"
    );
    assert_eq!(main_pid(machine), pid, "steerd was restarted by a reload");
    assert_eq!(machine.show("steerd.service", "ActiveState"), "active");
    report.ok(&format!(
        "bad config refused, still running as MainPID {pid}: {}",
        verbose
            .lines()
            .find(|l| l.contains("ERROR="))
            .unwrap_or(&refused)
            .trim()
    ));
    machine.write(CONFIG_PATH, CONFIG, 0o644);
    machine.systemctl(&["reload", "steerd.service"]).ok();
    wait_running(machine, "steerd running after the config was put back");
}

/// SIGSTOP: the watchdog (WatchdogSec shortened by the drop-in) kills steerd and systemd
/// restarts it; the state file in /run/steerd survives (RuntimeDirectoryPreserve=restart).
fn check_watchdog_restart(
    machine: &Machine,
    report: &Report,
    tree: &FakeTree,
    original: &TreeFiles,
) {
    assert!(
        !TreeFiles::read(&tree.root)
            .changed_since(original)
            .is_empty()
    );
    let pid = main_pid(machine);
    let restarts: u32 = machine
        .show("steerd.service", "NRestarts")
        .parse()
        .unwrap_or(0);
    let stopped = Instant::now();
    machine.run(&["kill", "-STOP", &pid]).ok();
    wait_until(WAIT, "a restart by the watchdog", || {
        machine
            .show("steerd.service", "NRestarts")
            .parse::<u32>()
            .unwrap_or(0)
            > restarts
    });
    wait_running(machine, "steerd running again");
    let new_pid = main_pid(machine);
    assert_ne!(new_pid, pid);
    let journal = machine.journal("steerd.service");
    assert!(journal.contains("Watchdog timeout"), "{journal}");
    let state = machine.path("/run/steerd/state.json");
    let text = std::fs::read_to_string(&state).expect("the state file after the restart");
    assert!(
        text.contains("\"original\""),
        "no originals in the state file: {text}"
    );
    report.ok(&format!(
        "SIGSTOP: watchdog timeout, restarted in {:.1}s (MainPID {pid} -> {new_pid}), state file kept",
        stopped.elapsed().as_secs_f64()
    ));
}

/// `systemctl stop`: every file holds its original again (also what the killed process
/// wrote: the restarted one found it in the state file), and /run/steerd is gone.
fn check_stop_restores(machine: &Machine, report: &Report, tree: &FakeTree, original: &TreeFiles) {
    let before = TreeFiles::read(&tree.root).changed_since(original).len();
    machine.systemctl(&["stop", "steerd.service"]).ok();
    assert_eq!(machine.show("steerd.service", "ActiveState"), "inactive");
    assert_eq!(machine.show("steerd.service", "Result"), "success");
    let changed = TreeFiles::read(&tree.root).changed_since(original);
    assert!(
        changed.is_empty(),
        "not restored after stop: {changed:#?}\n{}",
        machine.journal("steerd.service")
    );
    assert!(
        !machine.path("/run/steerd").exists(),
        "/run/steerd still exists after stop"
    );
    report.ok(&format!(
        "systemctl stop: all {before} changed files restored, Result=success, /run/steerd removed"
    ));
}

/// The machine's real kernel interfaces under the sandbox: `--dry-run` (writes nothing)
/// on the real root, in the machine's network namespace with multi-queue veths, so that
/// discovery really uses rtnetlink, generic netlink and the ethtool ioctl. The same binary
/// runs beside it without any sandbox (a transient unit); every warning the sandboxed one
/// logs must also appear unsandboxed (a denied socket or system call would show up only
/// in the sandbox).
fn check_real_root_dry_run(machine: &Machine, report: &Report) {
    // The shipped configuration, except that the test's own scrapes (a dozen loopback
    // packets each, every 50 ms) do not count as receive work that keeps steerd awake:
    // what is checked here is that quiet mode's perf events open under the sandbox.
    let config = CONFIG.replace("wake_after_polls: 64", "wake_after_polls: 1000000");
    assert_ne!(
        config, CONFIG,
        "the shipped config no longer has wake_after_polls: 64"
    );
    machine.write(CONFIG_PATH, &config, 0o644);
    machine
        .sh(
            "ip link add sdns-mq0 numtxqueues 4 numrxqueues 4 type veth peer name sdns-mq1 \
             numtxqueues 4 numrxqueues 4 && ip link set sdns-mq0 up && ip link set sdns-mq1 up",
        )
        .ok();
    install_drop_in(
        machine,
        &format!(
            "[Service]\nExecStart=\nExecStart=/usr/sbin/steerd run --config {CONFIG_PATH} \
             --dry-run --interval 100ms\n"
        ),
    );
    machine.systemctl(&["start", "steerd.service"]).ok();
    wait_running(machine, "steerd (real root, dry run) running");
    let plain = machine.run(&[
        "systemd-run",
        "--unit=steerd-plain",
        "-p",
        "Type=notify",
        "/usr/sbin/steerd",
        "run",
        "--config",
        CONFIG_PATH,
        "--dry-run",
        "--interval",
        "100ms",
        "--metrics-listen",
        "127.0.0.1:9848",
        "--state-file",
        "/run/steerd-plain.json",
    ]);
    assert!(plain.success(), "{plain}");
    let metrics_on = |port: u16| {
        machine.in_netns(move || {
            let addr = format!("127.0.0.1:{port}").parse().expect("address");
            steerd::status::get(addr, "/metrics").unwrap_or_default()
        })
    };
    // Both have ticked a while and tried quiet mode: asleep in it, or found it unavailable
    // (the shipped configuration turns it on; it is tried after 3 quiet ticks).
    let settled = |port: u16| {
        let metrics = metrics_on(port);
        let value = |name| sample(&metrics, name).unwrap_or(-1.0);
        value("steerd_ticks_total") >= 5.0
            && (value("steerd_quiet_mode") == 1.0 || value("steerd_quiet_mode_available") == 0.0)
    };
    wait_until(
        WAIT,
        "both daemons ticking and past their quiet-mode attempt",
        || settled(9847) && settled(9848),
    );
    let sandboxed_metrics = metrics_on(9847);
    assert!(
        sandboxed_metrics.contains("steerd_rx_queue_rps_cpus{device=\"sdns-mq0\",queue=\"3\"}"),
        "the sandboxed steerd did not discover sdns-mq0's 4 queues:\n{sandboxed_metrics}"
    );
    // Quiet mode's perf events open under the sandbox whenever they open without it.
    let quiet_available = |metrics: &str| sample(metrics, "steerd_quiet_mode_available");
    let plain_quiet = quiet_available(&metrics_on(9848));
    assert_eq!(
        quiet_available(&sandboxed_metrics),
        plain_quiet,
        "quiet mode under the sandbox differs from without it:\n{sandboxed_metrics}"
    );
    let warnings = |unit: &str| -> Vec<String> {
        let id = machine.show(unit, "InvocationID");
        let out = machine.run(&[
            "journalctl",
            "--no-pager",
            "-o",
            "cat",
            "-p",
            "warning",
            &format!("_SYSTEMD_INVOCATION_ID={id}"),
            "_COMM=steerd",
        ]);
        let mut lines: Vec<String> = out.stdout.lines().map(str::to_string).collect();
        lines.sort();
        lines.dedup();
        lines
    };
    let sandboxed = warnings("steerd.service");
    let unsandboxed = warnings("steerd-plain.service");
    let only_sandboxed: Vec<&String> = sandboxed
        .iter()
        .filter(|w| !unsandboxed.contains(w))
        .collect();
    assert!(
        only_sandboxed.is_empty(),
        "warnings only under the sandbox: {only_sandboxed:#?}\nunsandboxed: {unsandboxed:#?}"
    );
    machine
        .systemctl(&["stop", "steerd.service", "steerd-plain.service"])
        .ok();
    report.ok(&format!(
        "real root, --dry-run: sdns-mq0's 4 queues discovered; quiet mode available {plain_quiet:?} with and without the sandbox; same warnings with and without the sandbox: {sandboxed:?}"
    ));
}

suite_main!(steerd_service_under_real_systemd,);
