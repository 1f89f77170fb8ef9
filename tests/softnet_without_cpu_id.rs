//! Kernels before 5.10 print `softnet_stat` rows without the CPU id column, one row per
//! online CPU. On a machine whose CPU 6 is offline (`online` = `0-5,7`) the seventh row is
//! CPU 7's: every front end must say so, and agree. Each test runs one front end on the
//! same generated tree: the daemon's sampler (shared with `steerd plan`), `plan` itself,
//! `top`, `doctor`, and the daemon binary, which must also follow CPU 6 coming online
//! (a row more than the online list it read) without a failed tick.

mod common;
mod daemon_support;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::advancing::Advancing;
use daemon_support::{Steerd, wait_until};
use steerd::Root;
use steerd::config::Config;
use steerd::discover::discover;
use steerd::doctor::Samples;
use steerd::engine::sampling::{Depth, Sampling};
use steerd::fakeroot::FakeMachine;
use steerd::load::Load;
use steerd::model::snapshot::Snapshot;
use steerd::top::sample::TopSampler;

/// The CPU that is offline until a test brings it online.
const OFFLINE: u32 = 6;
/// The busy CPU, the last one: its row is the one a row-number reader gives to CPU 6.
const BUSY: u32 = 7;

/// An 8-CPU tree (CPU 6 offline) with old-kernel counters at step 1.
fn tree(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    FakeMachine::new(8).write(&root).unwrap();
    write_kernel(&root, 1, false);
    root
}

/// Writes what a pre-5.10 kernel shows at `step`: `online`, `proc/stat` and an 11-column
/// `softnet_stat` (one row per online CPU, ascending). CPU 7 processes 100 packets a
/// step and drops 1; the others process 1. `online` is written before the counters, as
/// the kernel updates it before the rows change. Files are replaced whole.
fn write_kernel(root: &Path, step: u32, cpu6_online: bool) {
    let online: Vec<u32> = (0..8).filter(|&c| cpu6_online || c != OFFLINE).collect();
    let list = if cpu6_online { "0-7" } else { "0-5,7" };
    replace(root, "sys/devices/system/cpu/online", &format!("{list}\n"));
    let flag = if cpu6_online { "1" } else { "0" };
    replace(
        root,
        "sys/devices/system/cpu/cpu6/online",
        &format!("{flag}\n"),
    );
    let ticks = u64::from(step);
    let mut stat = format!("cpu  {} 0 0 {} 0 0 0 0 0 0\n", 8 * ticks, 80 * ticks);
    for cpu in &online {
        writeln!(stat, "cpu{cpu} {ticks} 0 0 {} 0 0 0 0 0 0", 10 * ticks).unwrap();
    }
    stat.push_str("intr 0\nctxt 1\nbtime 1700000000\n");
    replace(root, "proc/stat", &stat);
    let mut softnet = String::new();
    for &cpu in &online {
        let (processed, dropped) = if cpu == BUSY {
            (100 * step, step)
        } else {
            (step, 0)
        };
        writeln!(
            softnet,
            "{processed:08x} {dropped:08x} 00000000 00000000 00000000 00000000 00000000 \
             00000000 00000000 00000000 00000000"
        )
        .unwrap();
    }
    replace(root, "proc/net/softnet_stat", &softnet);
}

fn replace(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    let tmp = path.with_extension("new");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, &path).unwrap();
}

fn cpus(snapshot: &Snapshot) -> Vec<u32> {
    snapshot.softnet.iter().map(|r| r.cpu).collect()
}

/// Asserts a load model gave CPU 7's packets to CPU 7 (the busiest) and, while CPU 6 is
/// offline, nothing to CPU 6.
fn assert_busy_is_cpu7(load: &Load, cpu6_online: bool) {
    let busy = load.cpu(BUSY).expect("CPU 7 in the load model");
    assert!(busy.online && busy.processed_pps > 0.0, "{busy:?}");
    assert_eq!(load.busiest_cpu().map(|b| b.0), Some(BUSY));
    if let Some(cpu6) = load.cpu(OFFLINE).filter(|_| !cpu6_online) {
        assert!(!cpu6.online && cpu6.processed_pps == 0.0, "{cpu6:?}");
    }
}

/// Rewrites the tree's counters every 10 ms (one step each) until dropped; CPU 6 comes
/// online when `cpu6_online` is set.
struct Kernel {
    cpu6_online: Arc<AtomicBool>,
    _advancing: Advancing,
}

impl Kernel {
    fn start(root: &Path) -> Kernel {
        let cpu6_online = Arc::new(AtomicBool::new(false));
        let (root, online) = (root.to_owned(), Arc::clone(&cpu6_online));
        let advancing = Advancing::start(Duration::from_millis(10), move |step| {
            let step = u32::try_from(step).expect("a test's steps fit in u32");
            write_kernel(&root, step, online.load(Ordering::Relaxed))
        });
        Kernel {
            cpu6_online,
            _advancing: advancing,
        }
    }
}

#[test]
fn the_daemons_sampler_gives_the_last_row_to_cpu_7() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(tree(dir.path()));
    let machine = discover(&root).unwrap();
    let mut sampling = Sampling::open(&root).unwrap();
    sampling.follow(&machine);
    let mut before = Snapshot::default();
    sampling.sample(&mut before, Depth::Full, None).unwrap();
    assert_eq!(cpus(&before), [0, 1, 2, 3, 4, 5, 7]);
    assert_eq!(
        (before.softnet[6].processed, before.softnet[6].dropped),
        (100, 1)
    );

    write_kernel(root.base(), 2, false);
    let mut after = Snapshot::default();
    sampling.sample(&mut after, Depth::Full, None).unwrap();
    after.taken_at_ns = before.taken_at_ns + 1_000_000_000;
    let mut load = Load::new();
    load.update(&before, &after, 1.0);
    assert_busy_is_cpu7(&load, false);
    assert_eq!(load.cpu(BUSY).unwrap().dropped_per_sec, 1.0);
}

#[test]
fn plan_finds_cpu_7_dropping() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let _kernel = Kernel::start(&root);
    let plan = steerd::plan_once::plan(
        &Root::new(&root),
        &Config::default(),
        Duration::from_millis(300),
    )
    .unwrap();
    // CPU 7 drops a packet a step: the plan's reason names it, and no other CPU.
    let reason = plan.idle_reason.unwrap_or_default();
    assert!(reason.starts_with("CPU 7 in distress"), "{reason}");
    assert!(!reason.contains("CPU 6"), "{reason}");
}

#[test]
fn top_gives_cpu_7_its_packets_and_follows_cpu_6_coming_online() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let mut top = TopSampler::open(&Root::new(&root)).unwrap();
    write_kernel(&root, 2, false);
    top.sample().unwrap();
    assert_busy_is_cpu7(top.load(), false);

    // CPU 6 comes online: one row more than the online list top discovered.
    write_kernel(&root, 3, true);
    top.sample().unwrap();
    assert_eq!(top.machine().topology.online.to_list(), "0-7");
    write_kernel(&root, 4, true);
    top.sample().unwrap();
    let cpu6 = top.load().cpu(OFFLINE).expect("CPU 6 in the load model");
    assert!(cpu6.online && cpu6.processed_pps > 0.0, "{cpu6:?}");
    assert_busy_is_cpu7(top.load(), true);
}

#[test]
fn doctor_counts_cpu_7_s_drops_on_cpu_7() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(tree(dir.path()));
    let machine = discover(&root).unwrap();
    // The doctor's readings go through the daemon's sampler, per-CPU counters only.
    let mut sampling = Sampling::open(&root).unwrap().without_queue_counters();
    sampling.follow(&machine);
    let mut before = Snapshot::default();
    sampling.sample(&mut before, Depth::Full, None).unwrap();
    assert_eq!(cpus(&before), [0, 1, 2, 3, 4, 5, 7]);
    write_kernel(root.base(), 3, false);
    let mut after = Snapshot::default();
    sampling.sample(&mut after, Depth::Full, None).unwrap();
    let samples = Samples::between(before, after);
    let drops: Vec<(u32, u64)> = samples
        .softnet_deltas()
        .into_iter()
        .filter(|d| d.1 > 0)
        .map(|d| (d.0, d.1))
        .collect();
    assert_eq!(drops, [(BUSY, 2)]);
    assert_busy_is_cpu7(&samples.load, false);
}

#[test]
fn the_daemon_gives_cpu_7_its_packets_and_follows_cpu_6_coming_online() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let kernel = Kernel::start(&root);
    let steerd = Steerd::start(&root, None);
    let processed = |cpu: u32| {
        steerd.metric(&format!(
            "steerd_cpu_softnet_processed_per_second{{cpu=\"{cpu}\"}}"
        ))
    };
    wait_until(
        Duration::from_secs(10),
        "CPU 7 processing packets",
        Some(&steerd),
        || processed(BUSY).is_some_and(|pps| pps > 0.0),
    );
    assert_eq!(processed(OFFLINE), None, "CPU 6 is offline");

    kernel.cpu6_online.store(true, Ordering::Relaxed);
    wait_until(
        Duration::from_secs(10),
        "CPU 6 processing packets",
        Some(&steerd),
        || processed(OFFLINE).is_some_and(|pps| pps > 0.0),
    );
    steerd.wait_ticks(3);
    let log = steerd.stderr_text();
    assert!(log.contains("CPU hot-plug"), "{log}");
    assert!(!log.contains("sampling failed"), "{log}");
    // The older layout is named once, at start.
    assert_eq!(
        log.matches("softnet_stat rows carry no CPU id").count(),
        1,
        "{log}"
    );
    assert!(processed(BUSY).is_some_and(|pps| pps > 0.0));
}
