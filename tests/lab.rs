//! The real-NIC lab's short form (the full table is `scripts/lab.sh`, `docs/lab.md`): a real
//! guest kernel with a 4-queue virtio-net NIC under QEMU, steerd and the real irqbalance on
//! the same traffic. Needs root, QEMU, busybox, cpio, irqbalance, ethtool and a cloud
//! kernel in /boot (`scripts/test` installs them as root); reported as ignored with the
//! reason otherwise (a failure under `CI=true`).

mod common;

#[path = "../lab/mod.rs"]
#[allow(dead_code)]
mod lab;

use std::path::Path;
use std::time::Duration;

use common::suite::{TestResult, skip};
use lab::report::{Metrics, analyse};
use lab::scenario::{self, Balancer, Scenario};

fn scenario(name: &str) -> Scenario {
    scenario::all(Duration::from_secs(60))
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

fn show(m: &Metrics) -> String {
    format!(
        "first change {:?}, busiest {:.2}, input CPUs {}, late changes {}, settle {:?}, restored {} {:?}\n  log: {}",
        m.first_change,
        m.busiest_processed,
        m.input_cpus,
        m.late_changes,
        m.settle,
        m.restored,
        m.diffs,
        m.log.join("\n  log: ")
    )
}

fn run(lab: &mut lab::run::Lab, s: &Scenario, b: Balancer) -> Metrics {
    let raw = lab
        .run(s, b)
        .unwrap_or_else(|e| panic!("{} with {}: {e}", s.name, b.name()));
    let m = analyse(s, &raw);
    eprintln!("{} {}: {}", s.name, b.name(), show(&m));
    m
}

/// steerd against irqbalance on every input vector starting on CPU0, then kill -9 and a
/// restart, then CPU hot-unplug and re-online under traffic (about 4 minutes).
fn real_nic_lab_short_form() -> TestResult {
    // The same list `examples/lab.rs` checks; each missing part is a prerequisite
    // `scripts/test` installs as root, so a failure under CI=true.
    if let Some(why) = lab::unavailable() {
        return skip(why);
    }
    let work = tempfile::tempdir().expect("a temporary directory");
    let mut lab = lab::run::Lab::build(work.path(), Path::new(env!("CARGO_BIN_EXE_steerd")))
        .expect("the guest image builds");

    // Every input vector on CPU0: steerd spreads at least as well as irqbalance (one run
    // each, so 0.02 of slack), within 2 s, and then leaves things alone.
    let cpu0 = scenario("cpu0");
    let theirs = run(&mut lab, &cpu0, Balancer::Irqbalance);
    let ours = run(&mut lab, &cpu0, Balancer::Steerd);
    assert!(
        ours.busiest_processed <= theirs.busiest_processed + 0.02,
        "steerd's busiest CPU carries {:.2} of the work, irqbalance's {:.2}",
        ours.busiest_processed,
        theirs.busiest_processed
    );
    assert_eq!(ours.input_cpus, 4, "{}", show(&ours));
    assert!(
        ours.first_change.is_some_and(|t| t < 2.0),
        "{}",
        show(&ours)
    );
    assert_eq!(ours.late_changes, 0, "{}", show(&ours));
    assert!(ours.restored, "{}", show(&ours));

    // kill -9 and a restart: the new daemon finds the originals and restores them.
    let kill9 = run(&mut lab, &scenario("kill9"), Balancer::Steerd);
    assert!(kill9.restored, "{}", show(&kill9));

    // CPU 3 offline and back under traffic: every input vector on one online CPU within 2
    // ticks of each event.
    let hotplug = run(&mut lab, &scenario("hotplug"), Balancer::Steerd);
    assert!(
        hotplug.settle.is_some_and(|s| s <= 2.5),
        "{}",
        show(&hotplug)
    );
    assert!(hotplug.restored, "{}", show(&hotplug));
    Ok(())
}

suite_main!(real_nic_lab_short_form);
