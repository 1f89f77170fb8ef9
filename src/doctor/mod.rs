//! `steerd doctor`: reads the machine (and the running daemon, if one answers) once and
//! says what is wrong with its receive steering, each finding with its evidence, why it
//! matters and the command that fixes it.
//!
//! Why a separate command: `inspect` prints facts and `status` the daemon's view; neither
//! judges the machine's own settings (a second balancer or a second steerd, isolated CPUs
//! taking NIC IRQs, RFS tables sized against each other), which is what an operator asks
//! first. Each check is its own module reading only [`Context`], so one can be added or
//! tested alone.

pub mod busy_poll;
pub mod coalescing;
pub mod daemon;
mod ethtool_checks;
pub mod gro;
pub mod irqbalance;
pub mod isolated;
pub mod napi_deferral;
pub mod napi_threads;
pub mod ntuple;
pub mod one_cpu;
pub mod processes;
pub mod report;
pub mod rfs_tables;
pub mod rings;
pub mod sample;
pub mod silent_queues;
pub mod softirq_share;
pub mod softnet;
pub mod steerd_daemons;
pub mod tuned;
pub mod udp_hash;

use std::net::SocketAddr;
use std::time::Duration;

use crate::discover::Machine;
use crate::root::Root;
use crate::status::FetchError;
use crate::status_report::StatusReport;

pub use report::{Finding, Report, Severity};
pub use sample::{Samples, SamplesError};

/// What every check reads: gathered once, so checks stay pure and testable.
pub struct Context<'a> {
    pub root: &'a Root,
    pub machine: &'a Machine,
    /// Two samples of the per-CPU counters folded into the daemon's load model (the same
    /// sampler and arithmetic as the daemon, `plan` and `top`), or why they could not be
    /// taken.
    pub samples: Result<Samples, SamplesError>,
    /// The daemon's `/status` and where it was asked, or why it did not answer.
    pub daemon: Option<(SocketAddr, Result<StatusReport, FetchError>)>,
}

/// A check: the findings it makes from the context.
type Check = fn(&Context) -> Vec<Finding>;

/// Every check, in the order its findings are printed.
pub const CHECKS: &[(&str, Check)] = &[
    ("irqbalance", irqbalance::check),
    ("tuned", tuned::check),
    ("steerd_daemons", steerd_daemons::check),
    ("isolated_cpus", isolated::check),
    ("rfs_tables", rfs_tables::check),
    ("softnet", softnet::check),
    ("softirq_share", softirq_share::check),
    ("one_cpu", one_cpu::check),
    ("rings", rings::check),
    ("coalescing", coalescing::check),
    ("gro", gro::check),
    ("udp_hash", udp_hash::check),
    ("silent_queues", silent_queues::check),
    ("ntuple", ntuple::check),
    ("napi_threads", napi_threads::check),
    ("napi_deferral", napi_deferral::check),
    ("busy_poll", busy_poll::check),
    ("daemon", daemon::check),
];

/// Runs every check on the machine under `root`, sampling counters over `window`, and
/// asking the daemon at `daemon` (if given) for its status.
pub fn run(
    root: &Root,
    window: Duration,
    daemon: Option<SocketAddr>,
) -> Result<Report, crate::Error> {
    let machine = crate::discover::discover(root)?;
    let samples = Samples::take(root, &machine, window);
    let daemon = daemon.map(|addr| (addr, crate::status::fetch_status(addr)));
    let context = Context {
        root,
        machine: &machine,
        samples,
        daemon,
    };
    Ok(check_all(&context))
}

/// Runs every check on a gathered context.
pub fn check_all(context: &Context) -> Report {
    let mut findings = Vec::new();
    for (_, check) in CHECKS {
        findings.extend(check(context));
    }
    Report::new(
        context.root.base().to_string_lossy().into_owned(),
        CHECKS.iter().map(|(name, _)| name.to_string()).collect(),
        findings,
    )
}

#[cfg(test)]
pub(crate) mod testing {
    //! A fake root and a context over it, for the checks' tests.
    use super::*;
    use crate::fakeroot::{FakeMachine, FakeNic, FakeTree};

    /// A 4-CPU machine with one 4-queue NIC, written into a temporary directory.
    pub fn machine(edit: impl FnOnce(&mut FakeMachine)) -> (tempfile::TempDir, FakeTree) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut machine = FakeMachine::new(4);
        machine.nics.push(FakeNic {
            name: "eth0".into(),
            driver: "ixgbe".into(),
            node: Some(0),
            queues: 4,
        });
        machine.rps_sock_flow_entries = Some(0);
        edit(&mut machine);
        let tree = machine.write(dir.path()).expect("fake tree");
        (dir, tree)
    }

    /// Writes `text` to `relative` under the tree's root.
    pub fn put(tree: &FakeTree, relative: &str, text: &str) {
        let path = tree.root.join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    /// Delivers eth0's queue vector `q` to CPU `cpu_of(q)` (its
    /// `effective_affinity_list`): where the checks see its queues' interrupts land.
    pub fn deliver_queue_irqs(tree: &FakeTree, cpu_of: impl Fn(usize) -> usize) {
        for (q, irq) in tree.queue_irqs[0].iter().enumerate() {
            put(
                tree,
                &format!("proc/irq/{irq}/effective_affinity_list"),
                &format!("{}\n", cpu_of(q)),
            );
        }
    }

    /// No samples, as when `proc/stat` cannot be read: for the checks that do not use them.
    pub fn not_sampled() -> Result<Samples, SamplesError> {
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        Err(SamplesError::Open(crate::Error::io("proc/stat", missing)))
    }

    /// Runs one check over the tree, with the given samples and daemon answer.
    pub fn run_check(
        tree: &FakeTree,
        check: Check,
        samples: Result<Samples, SamplesError>,
        daemon: Option<(SocketAddr, Result<StatusReport, FetchError>)>,
    ) -> Vec<Finding> {
        let root = Root::new(&tree.root);
        let machine = crate::discover::discover(&root).expect("discover");
        check(&Context {
            root: &root,
            machine: &machine,
            samples,
            daemon,
        })
    }
}
