//! Installing the Debian package (and the RPM) in a real systemd (the host's, booted as PID 1 of
//! throwaway namespaces by `systemd_ns`), with dpkg, as an operator would on a server where
//! irqbalance runs. It checks what the package promises:
//!
//! - `dpkg -i` on a machine with irqbalance enabled and running stops and disables it, and
//!   says so; steerd is then enabled and active, and answers `steerd status`;
//! - `/etc/steerd/steerd.yaml` is a conffile: an operator's edit survives a reinstall;
//! - `dpkg -r` stops steerd and keeps its configuration;
//! - `dpkg --purge` removes the configuration and enables and starts irqbalance again, and
//!   says so;
//! - where irqbalance was disabled before steerd came, purging steerd leaves it disabled;
//! - under a `policy-rc.d` that forbids service actions (an image build), the package starts
//!   and stops nothing, but still leaves irqbalance disabled and steerd enabled for the
//!   next boot.
//!
//! The RPM's scriptlets get the same check with `rpm -i` and `rpm -e` (Debian's rpm, its
//! database inside the machine).
//!
//! steerd runs here on the machine's real `/proc` and `/sys`, with the unit as shipped: the
//! machine's network namespace holds only `lo`, which has no IRQ, so steerd has nothing of
//! the host's to move; the test checks that every host IRQ's affinity is the same after it.
//! irqbalance is a stand-in (`sleep`), so that no real irqbalance moves host IRQs either.
//!
//! Root only; skips with a printed reason when it is not root, cannot boot systemd, or the
//! packaging tools are missing. Every command is bounded in time; the machine and
//! everything installed in it vanish on drop, also when a check fails.

mod common;
mod daemon_support;
mod package_build;
mod systemd_ns;

use std::collections::BTreeMap;
use std::fs;
use std::time::{Duration, Instant};

use common::suite::{Requirement, Skip, TestResult};
use daemon_support::{FakeKernel, QueueLoad};
use steerd::cpuset::CpuSet;
use steerd::fakeroot::{FakeMachine, FakeNic, FakeTree};
use systemd_ns::{Machine, Output, wait_until};

/// Where the package lands in the machine before `dpkg -i`.
const DEB_INSIDE: &str = "/root/steerd.deb";
/// Where the RPM lands in the machine.
const RPM_INSIDE: &str = "/root/steerd.rpm";
/// dpkg runs maintainer scripts and triggers (man-db): allow more than one command's time.
const PACKAGE_TIMEOUT: Duration = Duration::from_secs(180);
const WAIT: Duration = Duration::from_secs(20);
/// What postinst says when it stops irqbalance, and postrm when it gives it back.
const STOPPING_MESSAGE: &str = "steerd: stopping and disabling irqbalance.service";
const ENABLING_MESSAGE: &str = "steerd: enabling irqbalance.service again";
/// Debian's way for image builds and chroots to forbid maintainer scripts' service actions.
const POLICY_RC_D: &str = "/usr/sbin/policy-rc.d";
/// A stand-in for Debian's irqbalance unit, enabled the way the real one is.
const IRQBALANCE_STAND_IN: &str = "[Unit]\n\
    Description=stand-in irqbalance for steerd's package test\n\
    [Service]\n\
    ExecStart=/bin/sleep infinity\n\
    [Install]\n\
    WantedBy=multi-user.target\n";

/// Prints one check's result, with the time since the test started.
struct Report(Instant);

impl Report {
    fn ok(&self, what: &str) {
        eprintln!("[{:>5.1}s] ok: {what}", self.0.elapsed().as_secs_f64());
    }
}

/// Every host IRQ's `smp_affinity_list`, to show the test moved none.
fn host_irq_affinities() -> BTreeMap<String, String> {
    let mut affinities = BTreeMap::new();
    if let Ok(entries) = fs::read_dir("/proc/irq") {
        for entry in entries.flatten() {
            if let Ok(list) = fs::read_to_string(entry.path().join("smp_affinity_list")) {
                affinities.insert(entry.file_name().to_string_lossy().into_owned(), list);
            }
        }
    }
    affinities
}

fn dpkg(machine: &Machine, args: &[&str]) -> Output {
    let mut all = vec!["dpkg", "--force-confold"];
    all.extend_from_slice(args);
    let out = machine.run_for(&all, PACKAGE_TIMEOUT);
    assert!(out.success(), "{out}");
    out
}

/// `rpm` in the machine. Debian's rpm keeps its database in `~/.rpmdb` and knows none of
/// the packages dpkg installed: `--nodeps` (the package needs only /bin/sh and libc).
fn rpm(machine: &Machine, args: &[&str]) -> Output {
    let mut all = vec!["rpm", "--nodeps"];
    all.extend_from_slice(args);
    let out = machine.run_for(&all, PACKAGE_TIMEOUT);
    assert!(out.success(), "{out}");
    out
}

/// Everything a command printed.
fn said(out: &Output) -> String {
    format!("{}{}", out.stdout, out.stderr)
}

/// The line of `text` holding `message`, for the report.
fn line_with<'a>(text: &'a str, message: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(message))
        .unwrap_or_default()
}

/// A machine where irqbalance (the stand-in) is enabled and running, and service actions
/// are allowed: no policy-rc.d (container images often ship one that forbids everything;
/// removing it in the machine's overlay leaves the host's alone).
fn server_with_irqbalance(machine: &Machine) {
    if exists(machine, POLICY_RC_D) {
        fs::remove_file(machine.path(POLICY_RC_D)).expect("remove policy-rc.d in the machine");
    }
    machine.write(
        "/etc/systemd/system/irqbalance.service",
        IRQBALANCE_STAND_IN,
        0o644,
    );
    machine
        .systemctl(&["enable", "--now", "irqbalance.service"])
        .ok();
    assert_eq!(is_enabled(machine, "irqbalance.service"), "enabled");
    assert_eq!(machine.show("irqbalance.service", "ActiveState"), "active");
}

/// A booted machine holding `package` at `inside`, with irqbalance enabled and running,
/// and every host IRQ's affinity before it (to compare after). Holds [`ONE_MACHINE`].
/// A skip when systemd cannot boot here.
struct Booted {
    machine: Machine,
    host_irqs_before: BTreeMap<String, String>,
    _one: std::sync::MutexGuard<'static, ()>,
}

fn boot_with_package(test: &str, package: &std::path::Path, inside: &str) -> Result<Booted, Skip> {
    let one = ONE_MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let host_irqs_before = host_irq_affinities();
    let machine = systemd_ns::boot_or_skip(test)?;
    machine.copy_in(package, inside, 0o644);
    server_with_irqbalance(&machine);
    Ok(Booted {
        machine,
        host_irqs_before,
        _one: one,
    })
}

impl Booted {
    /// Powers the machine off and checks no host IRQ moved.
    fn finish(self, report: &Report) {
        self.machine.poweroff();
        assert_eq!(
            host_irq_affinities(),
            self.host_irqs_before,
            "a host IRQ's affinity changed during the test"
        );
        report.ok("every host IRQ's smp_affinity_list is as before");
    }
}

/// After installing on a machine with irqbalance running: the installer said it stops
/// irqbalance, irqbalance is disabled and stopped, steerd enabled, active and answering.
fn assert_replaced_irqbalance(machine: &Machine, install: &Output, report: &Report) {
    let printed = said(install);
    assert!(printed.contains(STOPPING_MESSAGE), "{install}");
    assert_eq!(is_enabled(machine, "irqbalance.service"), "disabled");
    wait_for_state(machine, "irqbalance.service", "inactive");
    wait_for_state(machine, "steerd.service", "active");
    assert_eq!(is_enabled(machine, "steerd.service"), "enabled");
    let status = machine.run(&["steerd", "status"]);
    assert!(status.success(), "steerd status: {status}");
    report.ok(&format!(
        "irqbalance stopped and disabled, saying {:?}; steerd enabled, active and answering `steerd status`",
        line_with(&printed, STOPPING_MESSAGE)
    ));
}

/// After removing steerd from a machine whose irqbalance it had disabled: the remover said
/// it enables irqbalance again, and irqbalance is enabled and running. Returns that line.
fn assert_gave_irqbalance_back(machine: &Machine, remove: &Output) -> String {
    let printed = said(remove);
    assert!(printed.contains(ENABLING_MESSAGE), "{remove}");
    assert_eq!(is_enabled(machine, "irqbalance.service"), "enabled");
    wait_for_state(machine, "irqbalance.service", "active");
    line_with(&printed, ENABLING_MESSAGE).to_string()
}

/// One machine at a time: the two tests of this file would otherwise boot two at once.
static ONE_MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn is_enabled(machine: &Machine, unit: &str) -> String {
    machine
        .systemctl(&["is-enabled", unit])
        .stdout
        .trim()
        .to_string()
}

fn wait_for_state(machine: &Machine, unit: &str, state: &str) {
    let deadline = Instant::now() + WAIT;
    while machine.show(unit, "ActiveState") != state {
        if Instant::now() >= deadline {
            let status = machine.systemctl(&["status", unit]);
            panic!("{unit} not {state} after {WAIT:?}:\n{status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn exists(machine: &Machine, inside: &str) -> bool {
    machine.path(inside).exists()
}

fn installing_the_deb_replaces_irqbalance_and_purging_gives_it_back() -> TestResult {
    let report = Report(Instant::now());
    let (deb, _) = package_build::packages()?;
    report.ok(&format!("built {}", deb.display()));
    let booted = boot_with_package("package_install", deb, DEB_INSIDE)?;
    let machine = &booted.machine;
    report.ok("booted systemd in fresh namespaces");

    // dpkg -i: irqbalance stopped and disabled, with a message; steerd enabled and active.
    let install = dpkg(machine, &["-i", DEB_INSIDE]);
    assert_replaced_irqbalance(machine, &install, &report);
    let conffiles = machine
        .run(&["dpkg-query", "-W", "-f=${Conffiles}", "steerd"])
        .ok()
        .to_string();
    assert!(
        conffiles.contains("/etc/steerd/steerd.yaml"),
        "conffiles: {conffiles}"
    );
    report.ok("/etc/steerd/steerd.yaml is a conffile");

    // An operator's edit survives a reinstall, which restarts steerd and says nothing
    // about irqbalance (already disabled).
    let edited = machine.path("/etc/steerd/steerd.yaml");
    let mut config = fs::read_to_string(&edited).expect("read the installed config");
    config.push_str("# edited by the operator\n");
    fs::write(&edited, &config).expect("edit the installed config");
    let reinstall = dpkg(machine, &["-i", DEB_INSIDE]);
    assert!(!said(&reinstall).contains(STOPPING_MESSAGE), "{reinstall}");
    assert_eq!(
        fs::read_to_string(&edited).expect("read the config after reinstall"),
        config
    );
    wait_for_state(machine, "steerd.service", "active");
    report.ok("a reinstall keeps the operator's config, and steerd runs again");

    // dpkg -r: steerd stopped, its configuration kept, irqbalance still off.
    dpkg(machine, &["-r", "steerd"]);
    wait_for_state(machine, "steerd.service", "inactive");
    assert!(exists(machine, "/etc/steerd/steerd.yaml"));
    assert!(!exists(machine, "/usr/sbin/steerd"));
    assert_eq!(is_enabled(machine, "irqbalance.service"), "disabled");
    report.ok("dpkg -r stopped steerd and kept /etc/steerd/steerd.yaml");

    // dpkg --purge: configuration gone, irqbalance enabled and running again, with a message.
    let purge = dpkg(machine, &["--purge", "steerd"]);
    let message = assert_gave_irqbalance_back(machine, &purge);
    assert!(!exists(machine, "/etc/steerd"), "/etc/steerd left behind");
    assert!(
        !exists(machine, "/var/lib/steerd"),
        "/var/lib/steerd left behind"
    );
    report.ok(&format!(
        "dpkg --purge removed /etc/steerd and gave irqbalance back, saying {message:?}"
    ));

    // Where irqbalance was off before steerd came, it stays off after the purge.
    machine
        .systemctl(&["disable", "--now", "irqbalance.service"])
        .ok();
    let install = dpkg(machine, &["-i", DEB_INSIDE]);
    assert!(!said(&install).contains(STOPPING_MESSAGE), "{install}");
    wait_for_state(machine, "steerd.service", "active");
    let purge = dpkg(machine, &["--purge", "steerd"]);
    assert!(!said(&purge).contains(ENABLING_MESSAGE), "{purge}");
    assert_eq!(is_enabled(machine, "irqbalance.service"), "disabled");
    assert_eq!(
        machine.show("irqbalance.service", "ActiveState"),
        "inactive"
    );
    report.ok("with irqbalance disabled beforehand, install and purge leave it disabled");

    // An image build: policy-rc.d forbids starting and stopping services. Nothing is
    // started or stopped, but the next boot runs steerd and not irqbalance.
    machine
        .systemctl(&["enable", "--now", "irqbalance.service"])
        .ok();
    machine.write(POLICY_RC_D, "#!/bin/sh\nexit 101\n", 0o755);
    let install = dpkg(machine, &["-i", DEB_INSIDE]);
    assert!(said(&install).contains(STOPPING_MESSAGE), "{install}");
    assert_eq!(is_enabled(machine, "irqbalance.service"), "disabled");
    assert_eq!(machine.show("irqbalance.service", "ActiveState"), "active");
    assert_eq!(is_enabled(machine, "steerd.service"), "enabled");
    assert_eq!(machine.show("steerd.service", "ActiveState"), "inactive");
    dpkg(machine, &["--purge", "steerd"]);
    assert_eq!(is_enabled(machine, "irqbalance.service"), "enabled");
    report.ok(
        "under a denying policy-rc.d the package starts and stops nothing, \
         and leaves steerd enabled and irqbalance disabled for the next boot",
    );

    booted.finish(&report);
    Ok(())
}

/// The RPM's scriptlets in the same real systemd: `rpm -i` stops and disables irqbalance
/// with a message and starts steerd; `rpm -e` stops steerd, removes the unmodified
/// configuration, and enables and starts irqbalance again with a message.
fn installing_the_rpm_replaces_irqbalance_and_erasing_gives_it_back() -> TestResult {
    let report = Report(Instant::now());
    let (_, package) = package_build::packages()?;
    Requirement::tool("rpm", "apt-get install rpm").check()?;
    report.ok(&format!("built {}", package.display()));
    let booted = boot_with_package("package_install (rpm)", package, RPM_INSIDE)?;
    let machine = &booted.machine;
    report.ok("booted systemd in fresh namespaces");

    let install = rpm(machine, &["-i", RPM_INSIDE]);
    assert_replaced_irqbalance(machine, &install, &report);

    let erase = rpm(machine, &["-e", "steerd"]);
    let message = assert_gave_irqbalance_back(machine, &erase);
    wait_for_state(machine, "steerd.service", "inactive");
    assert!(!exists(machine, "/usr/sbin/steerd"));
    assert!(!exists(machine, "/etc/steerd/steerd.yaml"));
    assert!(!exists(machine, "/var/lib/steerd"));
    report.ok(&format!(
        "rpm -e stopped steerd, removed its files and gave irqbalance back, saying {message:?}"
    ));

    booted.finish(&report);
    Ok(())
}

/// The fake tree the CRI-O test's steerd steers, inside the machine.
const CRIO_ROOT: &str = "/srv/steerd-crio";

/// What CRI-O's high-performance hooks do to irqbalance's environment file for a pod
/// annotated `irq-load-balancing.crio.io: "disable"` (internal/runtimehandlerhooks,
/// `updateIrqBalanceConfigFile`): the `IRQBALANCE_BANNED_CPUS=` line replaced in place
/// (`os.WriteFile`: truncated and written, not renamed) with the banned mask, quoted.
fn crio_writes_ban(machine: &Machine, banned: &CpuSet, cpus: u32) {
    let path = machine.path(&format!("{CRIO_ROOT}/etc/sysconfig/irqbalance"));
    let text = fs::read_to_string(&path).expect("read the ban file");
    let mask = banned.to_mask(cpus).expect("mask");
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            if line.starts_with("IRQBALANCE_BANNED_CPUS=") {
                format!("IRQBALANCE_BANNED_CPUS=\"{mask}\"")
            } else {
                line.to_string()
            }
        })
        .collect();
    fs::write(&path, lines.join("\n")).expect("write the ban file in place");
}

/// Issue 33: Kubernetes' CRI-O and steerd installed from its package, in a real systemd.
/// For a pod with `irq-load-balancing.crio.io: "disable"` CRI-O writes the pod's CPUs into
/// `IRQBALANCE_BANNED_CPUS` and runs `systemctl restart irqbalance.service`, and again with
/// the CPUs taken out when the pod goes. With the package's drop-in the restart is refused
/// (without it, starting irqbalance would stop steerd: the units conflict); steerd keeps
/// running under the same PID, moves the queue IRQs off the pod's CPUs within 2 s, and
/// gives them back when the pod goes. steerd runs here on a fake tree (`--root`, a drop-in)
/// that a fake kernel keeps busy, and follows the ban file under it.
fn a_crio_pod_bans_its_cpus_and_steerd_keeps_running() -> TestResult {
    let report = Report(Instant::now());
    let (deb, _) = package_build::packages()?;
    let booted = boot_with_package("package_install (CRI-O)", deb, DEB_INSIDE)?;
    let machine = &booted.machine;
    let install = dpkg(machine, &["-i", DEB_INSIDE]);
    assert_replaced_irqbalance(machine, &install, &report);

    // A fake machine: eth0 with 4 queues on 4 cores x 2 threads, every queue IRQ on CPU 0.
    let mut fake = FakeMachine::new(4);
    fake.threads_per_core = 2;
    fake.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 4,
    });
    let tree: FakeTree = fake
        .write(&machine.path(CRIO_ROOT))
        .expect("write the fake tree");
    for irq in tree.queue_irqs.iter().flatten() {
        fs::write(
            tree.root.join(format!("proc/irq/{irq}/smp_affinity_list")),
            "0\n",
        )
        .expect("stack the IRQs on CPU 0");
    }
    // irqbalance's environment file as Debian ships it, which CRI-O edits.
    machine.write(
        &format!("{CRIO_ROOT}/etc/sysconfig/irqbalance"),
        "# irqbalance's environment\nIRQBALANCE_BANNED_CPUS=\n",
        0o644,
    );
    let loads = (0..4)
        .map(|queue| QueueLoad {
            device: "eth0".into(),
            queue,
            pps: 100_000.0,
        })
        .collect();
    let kernel = FakeKernel::start(tree.clone(), loads);
    machine.write(
        "/etc/steerd/crio.yaml",
        "cpus:\n  irqbalance_banned_cpus: true\n",
        0o644,
    );
    machine.write(
        "/etc/systemd/system/steerd.service.d/crio-test.conf",
        &format!(
            "[Service]\nExecStart=\nExecStart=/usr/sbin/steerd run --config /etc/steerd/crio.yaml \
             --root {CRIO_ROOT} --state-file /run/steerd/state.json --interval 100ms\n\
             ReadWritePaths={CRIO_ROOT}\n"
        ),
        0o644,
    );
    machine.systemctl(&["daemon-reload"]).ok();
    machine.systemctl(&["restart", "steerd.service"]).ok();
    wait_for_state(machine, "steerd.service", "active");
    let irqs: Vec<u32> = tree.queue_irqs.iter().flatten().copied().collect();
    let cpus_of_irqs = || -> CpuSet {
        irqs.iter()
            .filter_map(|irq| {
                let text =
                    fs::read_to_string(tree.root.join(format!("proc/irq/{irq}/smp_affinity_list")))
                        .ok()?;
                CpuSet::parse_list(text.trim()).ok()
            })
            .fold(CpuSet::new(), |all, cpus| all.union(&cpus))
    };
    wait_until(
        Duration::from_secs(20),
        "steerd spreads eth0's IRQs",
        || cpus_of_irqs().len() >= 4,
    );
    let pid = machine.show("steerd.service", "MainPID");
    report.ok(&format!(
        "steerd (pid {pid}) spread eth0's queue IRQs over CPUs {}",
        cpus_of_irqs().to_list()
    ));

    // The pod starts on whole cores, as the CPU manager's full-pcpus-only gives them:
    // cores 2 and 3 (CPUs 2-3 and their siblings 6-7), so eth0's four IRQs must share
    // cores 0 and 1 while it runs, and spread back once it goes.
    let pod = CpuSet::parse_list("2-3,6-7").expect("pod CPUs");
    assert!(
        cpus_of_irqs().intersects(&pod),
        "{}",
        cpus_of_irqs().to_list()
    );
    let written = Instant::now();
    crio_writes_ban(machine, &pod, fake.cpu_count());
    let restart = machine.systemctl(&["restart", "irqbalance.service"]);
    assert!(
        !restart.success(),
        "irqbalance.service restarted: {restart}"
    );
    assert!(said(&restart).contains("refuse manual start"), "{restart}");
    wait_until(
        Duration::from_secs(10),
        "eth0's IRQs off the pod's CPUs",
        || !cpus_of_irqs().intersects(&pod),
    );
    let emptied = written.elapsed();
    assert_eq!(machine.show("steerd.service", "ActiveState"), "active");
    assert_eq!(
        machine.show("steerd.service", "MainPID"),
        pid,
        "steerd restarted"
    );
    assert_eq!(
        machine.show("irqbalance.service", "ActiveState"),
        "inactive"
    );
    assert!(
        emptied <= Duration::from_secs(2),
        "the pod's CPUs emptied after {emptied:?}"
    );
    report.ok(&format!(
        "pod on CPUs {}: `systemctl restart irqbalance.service` refused, steerd still pid {pid}, \
         the pod's CPUs emptied of queue IRQs {} ms after the ban was written",
        pod.to_list(),
        emptied.as_millis()
    ));

    // The pod goes: CRI-O writes the ban without its CPUs and restarts irqbalance again.
    let written = Instant::now();
    crio_writes_ban(machine, &CpuSet::new(), fake.cpu_count());
    let restart = machine.systemctl(&["restart", "irqbalance.service"]);
    assert!(
        !restart.success(),
        "irqbalance.service restarted: {restart}"
    );
    // No sooner than `hysteresis.irq_dwell` (10 s) after the IRQs moved for the ban: the
    // dwell that keeps steerd from moving a vector back and forth holds them until then.
    wait_until(
        Duration::from_secs(30),
        "eth0's IRQs back on the pod's CPUs",
        || cpus_of_irqs().intersects(&pod),
    );
    assert_eq!(
        machine.show("steerd.service", "MainPID"),
        pid,
        "steerd restarted"
    );
    report.ok(&format!(
        "the pod gone: its CPUs got queue IRQs again {} ms after the ban was cleared (the moved \
         IRQs' 10 s dwell), steerd still pid {pid}",
        written.elapsed().as_millis()
    ));
    let journal = machine.journal("steerd.service");
    assert!(journal.contains("irqbalance's banned CPUs"), "{journal}");

    // Purging gives irqbalance back, startable again: the drop-in went with the package.
    machine.systemctl(&["stop", "steerd.service"]).ok();
    drop(kernel);
    let purge = dpkg(machine, &["--purge", "steerd"]);
    assert_gave_irqbalance_back(machine, &purge);
    report.ok("purged: irqbalance.service enabled and running again");
    booted.finish(&report);
    Ok(())
}

suite_main!(
    installing_the_deb_replaces_irqbalance_and_purging_gives_it_back,
    installing_the_rpm_replaces_irqbalance_and_erasing_gives_it_back,
    a_crio_pod_bans_its_cpus_and_steerd_keeps_running,
);
