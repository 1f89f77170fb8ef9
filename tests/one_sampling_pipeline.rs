//! One sampling pipeline (issue 32): the daemon (and `steerd plan`, which samples through
//! the daemon's sampler), `steerd top` and `steerd doctor` read the same counters and
//! compute every per-CPU figure (irq+softirq share, packets processed, drops, squeezes,
//! and which NAPI threads count) the same way. Each test runs front ends on one generated
//! tree where the copies once disagreed:
//!
//! * CPU 1 spends 60 % of its time in hard IRQs and 5 % in softirq: the daemon's share is
//!   0.65 (hot, over the 0.60 high watermark); `doctor` once took softirq / total, 0.05,
//!   and called it fine;
//! * CPU 2 runs a busy-polling NAPI thread (`threaded` 2, 6.19) 90 % of the time: the
//!   daemon leaves its time out (spinning, not receive work), share 0; `top` once counted
//!   it, 0.90.

mod common;
mod daemon_support;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::advancing::Advancing;
use steerd::Root;
use steerd::config::Config;
use steerd::discover::discover;
use steerd::doctor::Samples;
use steerd::engine::sampling::{Depth, Sampling};
use steerd::fakeroot::{FakeMachine, FakeNic};
use steerd::load::Load;
use steerd::model::snapshot::Snapshot;
use steerd::top::sample::TopSampler;

/// The CPU busy in hard IRQs.
const IRQ_CPU: u32 = 1;
/// The CPU a busy-polling NAPI thread spins on.
const SPIN_CPU: u32 = 2;
/// The first busy-polling thread's pid.
const THREAD: u32 = 900;

/// A 4-CPU tree with a 4-queue NIC whose NAPI busy-polls, queue `q`'s IRQ pinned to CPU
/// `q` (nothing for `plan` to place), counters at step 1.
fn tree(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    let mut machine = FakeMachine::new(4);
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 4,
    });
    let tree = machine.write(&root).unwrap();
    tree.make_busy_poll(0, THREAD).unwrap();
    for (cpu, irq) in tree.queue_irqs[0].iter().enumerate() {
        let dir = format!("proc/irq/{irq}");
        replace(
            &root,
            &format!("{dir}/smp_affinity"),
            &format!("{:x}\n", 1 << cpu),
        );
        for file in ["smp_affinity_list", "effective_affinity_list"] {
            replace(&root, &format!("{dir}/{file}"), &format!("{cpu}\n"));
        }
    }
    write_kernel(&root, 1, false);
    root
}

/// The counters after `step` steps of 100 ticks per CPU: CPU 0 10 % user; CPU 1 60 % irq,
/// 5 % softirq, processing 1000 packets, and in `distress` dropping 2 and squeezed 3
/// times a step; CPU 2
/// 90 % system, all of it the busy-polling thread `THREAD` (last ran on CPU 2); CPU 3 idle.
/// Files are replaced whole.
fn write_kernel(root: &Path, step: u64, distress: bool) {
    // (user, system, idle, irq, softirq) per CPU and step.
    let times = [
        (10, 0, 90, 0, 0),
        (0, 0, 35, 60, 5),
        (0, 90, 10, 0, 0),
        (0, 0, 100, 0, 0),
    ];
    let mut stat = format!(
        "cpu  {} 0 {} {} 0 {} {} 0 0 0\n",
        10 * step,
        90 * step,
        235 * step,
        60 * step,
        5 * step
    );
    for (cpu, (user, system, idle, irq, softirq)) in times.iter().enumerate() {
        writeln!(
            stat,
            "cpu{cpu} {} 0 {} {} 0 {} {} 0 0 0",
            user * step,
            system * step,
            idle * step,
            irq * step,
            softirq * step
        )
        .unwrap();
    }
    stat.push_str("intr 0\nctxt 1\nbtime 1700000000\n");
    replace(root, "proc/stat", &stat);
    let mut softnet = String::new();
    for cpu in 0..4u64 {
        let (processed, dropped, squeezed) = if cpu == u64::from(IRQ_CPU) {
            let distress = u64::from(distress);
            (1000 * step, 2 * step * distress, 3 * step * distress)
        } else {
            (step, 0, 0)
        };
        writeln!(
            softnet,
            "{processed:08x} {dropped:08x} {squeezed:08x} 00000000 00000000 00000000 00000000 \
             00000000 00000000 00000000 00000000 00000000 {cpu:08x}"
        )
        .unwrap();
    }
    replace(root, "proc/net/softnet_stat", &softnet);
    // The thread's utime 0, stime 90 a step (fields 14 and 15), processor (39) CPU 2.
    let pid = THREAD;
    replace(
        root,
        &format!("proc/{pid}/stat"),
        &format!(
            "{pid} (napi/eth0-8193) R 2 0 0 0 -1 2129984 0 0 0 0 0 {} 0 0 20 0 1 0 100 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 {SPIN_CPU} 0 0 0 0 0 0 0 \
             0 0 0 0 0 0\n",
            90 * step
        ),
    );
}

fn replace(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    let tmp = path.with_extension("new");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, &path).unwrap();
}

/// Per CPU: (irq+softirq share, packets processed/s, drops/s, squeezes/s).
type Figures = Vec<(u32, f64, f64, f64, f64)>;

fn figures(load: &Load) -> Figures {
    load.cpus
        .iter()
        .enumerate()
        .filter(|(_, c)| c.online && c.warm)
        .map(|(cpu, c)| {
            let per_step = |rate: f64| rate * load.interval_secs;
            (
                cpu as u32,
                c.net_share,
                per_step(c.processed_pps).round(),
                per_step(c.dropped_per_sec).round(),
                per_step(c.squeezed_per_sec).round(),
            )
        })
        .collect()
}

/// The daemon's (and `plan`'s) sampler over steps 1 to 2, folded unsmoothed.
fn daemon_load(root: &Root) -> Load {
    write_kernel(root.base(), 1, true);
    let machine = discover(root).unwrap();
    let mut sampling = Sampling::open(root).unwrap();
    sampling.follow(&machine);
    let mut before = Snapshot::default();
    sampling.sample(&mut before, Depth::Full, None).unwrap();
    write_kernel(root.base(), 2, true);
    let mut after = Snapshot::default();
    sampling.sample(&mut after, Depth::Full, None).unwrap();
    let mut load = Load::new();
    load.update(&before, &after, 1.0);
    load
}

/// What the tree says each front end must show, per step.
fn expected() -> Figures {
    vec![
        (0, 0.0, 1.0, 0.0, 0.0),
        (IRQ_CPU, 0.65, 1000.0, 2.0, 3.0),
        (SPIN_CPU, 0.0, 1.0, 0.0, 0.0),
        (3, 0.0, 1.0, 0.0, 0.0),
    ]
}

#[test]
fn the_daemon_counts_irq_time_and_leaves_the_busy_polling_thread_out() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(tree(dir.path()));
    let machine = discover(&root).unwrap();
    let device = machine.inventory.device("eth0").unwrap();
    assert!(
        device
            .rx_queues
            .iter()
            .all(|q| q.napi.busy_polls() && q.napi_thread.is_some()),
        "{device:?}"
    );
    assert_eq!(figures(&daemon_load(&root)), expected());
}

#[test]
fn top_shows_the_daemons_figures() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(tree(dir.path()));
    let daemon = figures(&daemon_load(&root));

    write_kernel(root.base(), 1, true);
    let mut top = TopSampler::open(&root).unwrap();
    write_kernel(root.base(), 2, true);
    top.sample().unwrap();
    // Before: CPU 2's share was 0.90, the busy-polling thread's time.
    assert_eq!(figures(top.load()), daemon);
    let frame = top.frame(None);
    let share = |cpu: u32| {
        frame
            .cpus
            .iter()
            .find(|row| row.cpu == cpu)
            .and_then(|row| row.net_share)
    };
    assert_eq!(share(IRQ_CPU), Some(0.65));
    assert_eq!(share(SPIN_CPU), Some(0.0));
    // The thread still shows where it runs.
    let polled = frame
        .queues
        .iter()
        .find(|q| q.napi_thread_pid == Some(THREAD))
        .expect("the queue polled by the busy-polling thread");
    assert_eq!(polled.napi_thread_cpu, Some(SPIN_CPU));
}

#[test]
fn doctor_reads_the_daemons_figures() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(tree(dir.path()));
    let daemon = figures(&daemon_load(&root));

    // The doctor's readings one step apart, through its own sampler.
    write_kernel(root.base(), 1, true);
    let machine = discover(&root).unwrap();
    let mut sampling = Sampling::open(&root).unwrap().without_queue_counters();
    sampling.follow(&machine);
    let mut before = Snapshot::default();
    sampling.sample(&mut before, Depth::Full, None).unwrap();
    write_kernel(root.base(), 2, true);
    let mut after = Snapshot::default();
    sampling.sample(&mut after, Depth::Full, None).unwrap();
    let samples = Samples::between(before, after);
    assert_eq!(figures(&samples.load), daemon);
    // Before: CPU 1's share was 0.05 (softirq / total), CPU 2's 0.
    let shares: Vec<(u32, f64)> = daemon.iter().map(|f| (f.0, f.1)).collect();
    assert_eq!(samples.shares(), shares);
    let deltas: Vec<(u32, u64, u64)> = daemon
        .iter()
        .map(|f| (f.0, f.3 as u64, f.4 as u64))
        .collect();
    assert_eq!(samples.softnet_deltas(), deltas);
}

/// The binaries' paths on a tree whose counters advance (no drops, so that `plan` acts on
/// the share alone): `doctor` finds CPU 1 hot at the share `plan` names, where it once said
/// 5 % and found nothing.
#[test]
fn doctor_and_plan_call_the_same_cpu_hot_at_the_same_share() {
    let dir = tempfile::tempdir().unwrap();
    let path = tree(dir.path());
    let root = Root::new(&path);
    let kernel_root = path.clone();
    let _kernel = Advancing::start(Duration::from_millis(10), move |step| {
        write_kernel(&kernel_root, step, false)
    });

    let report = steerd::doctor::run(&root, Duration::from_millis(300), None).unwrap();
    let hot: Vec<&str> = report
        .findings
        .iter()
        .filter(|f| f.check == "softirq_share")
        .map(|f| f.summary.as_str())
        .collect();
    assert_eq!(
        hot,
        ["CPU 1 is 65 % busy in irq+softirq with 1 NIC queue IRQ(s) on it"],
        "{report:?}"
    );

    let plan =
        steerd::plan_once::plan(&root, &Config::default(), Duration::from_millis(300)).unwrap();
    let text = plan.to_string();
    assert!(text.contains("CPU 1 hot: irq+softirq share 0.65"), "{text}");
    assert!(!text.contains("CPU 2 hot"), "{text}");
}

/// The binaries, each on its own sampling window over the same advancing tree: `steerd top
/// --format json`, `steerd doctor --format json` and the daemon's `/metrics` give CPU 1
/// the same irq+softirq share (0.65: 60 % irq, 5 % softirq) and CPU 2, whose time is a
/// busy-polling thread's, none.
#[test]
fn top_doctor_and_the_daemon_report_the_same_shares() {
    let dir = tempfile::tempdir().unwrap();
    let path = tree(dir.path());
    let kernel_root = path.clone();
    let _kernel = Advancing::start(Duration::from_millis(10), move |step| {
        write_kernel(&kernel_root, step, false)
    });
    let steerd = |args: &[&str]| -> serde_json::Value {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_steerd"))
            .args(args)
            .arg("--root")
            .arg(&path)
            .output()
            .expect("run steerd");
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", String::from_utf8_lossy(&out.stderr)))
    };

    let top = steerd(&["top", "--format", "json", "--interval", "300ms"]);
    let share = |cpu: u32| {
        top["cpus"]
            .as_array()
            .expect("cpus")
            .iter()
            .find(|row| row["cpu"] == cpu)
            .and_then(|row| row["net_share"].as_f64())
    };
    assert_eq!(share(IRQ_CPU), Some(0.65), "{top}");
    assert_eq!(share(SPIN_CPU), Some(0.0), "{top}");

    let doctor = steerd(&[
        "doctor",
        "--format",
        "json",
        "--metrics-listen",
        "127.0.0.1:1",
    ]);
    let hot: Vec<&str> = doctor["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["check"] == "softirq_share")
        .filter_map(|f| f["summary"].as_str())
        .collect();
    assert_eq!(
        hot,
        ["CPU 1 is 65 % busy in irq+softirq with 1 NIC queue IRQ(s) on it"],
        "{doctor}"
    );

    let daemon = daemon_support::Steerd::start(&path, None);
    let metric = |cpu: u32| daemon.metric(&format!("steerd_cpu_softirq_share{{cpu=\"{cpu}\"}}"));
    daemon_support::wait_until(
        Duration::from_secs(10),
        "the daemon's shares",
        Some(&daemon),
        || metric(IRQ_CPU).is_some_and(|s| (s - 0.65).abs() < 1e-9),
    );
    assert_eq!(metric(SPIN_CPU), Some(0.0));
}
