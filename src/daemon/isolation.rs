//! Following isolated cgroup partitions while the daemon runs: Kubernetes' CPU manager,
//! tuned and realtime setups make and dissolve them at any time, and the kernel tells no
//! one (no event for `cpuset.cpus.isolated`). So every tick reads them
//! ([`crate::kernel::cgroup_isolation`]: one small file on 6.8 and later) and a change
//! reaches the engine at once: the CPUs become forbidden, and the same tick's decisions
//! move queue vectors, RPS masks and NAPI threads off them (or back, when dissolved).

use tracing::{error, info};

use super::Daemon;
use crate::cpuset::CpuSet;
use crate::kernel::cgroup_isolation::read_isolated_partitions;

/// What the daemon last knew of isolated partitions.
#[derive(Debug, Default)]
pub(super) struct Isolation {
    /// The last set read without error; kept through failed reads and rediscoveries whose
    /// read failed, so a transient error never gives the CPUs back.
    known: Option<CpuSet>,
    /// The last error, logged once until it changes or clears (never one per tick).
    failing: Option<String>,
}

impl Daemon {
    /// Reads the isolated partitions and hands a change to the engine.
    pub(super) fn follow_isolated_partitions(&mut self) {
        let root = self.options.root.clone();
        match read_isolated_partitions(&root) {
            Ok(cpus) => {
                if self.isolation.failing.take().is_some() {
                    info!("isolated cgroup partitions readable again");
                }
                if self.isolation.known.as_ref() != Some(&cpus) {
                    info!(
                        cpus = %cpus.to_list(),
                        "isolated cgroup partitions: CPUs {}; steerd keeps receive work off them",
                        if cpus.is_empty() { "none".to_string() } else { cpus.to_list() }
                    );
                }
                self.isolation.known = Some(cpus);
            }
            Err(e) => {
                let text = e.to_string();
                if self.isolation.failing.as_deref() != Some(&text) {
                    error!(error = %e, "cannot read isolated cgroup partitions; keeping the last known ones: {e}");
                    self.isolation.failing = Some(text);
                }
            }
        }
        if let Some(known) = &self.isolation.known {
            self.engine.set_isolated_partitions(known);
        }
    }
}
