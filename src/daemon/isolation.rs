//! Following isolated cgroup partitions while the daemon runs: Kubernetes' CPU manager,
//! tuned and realtime setups make and dissolve them at any time, and the kernel tells no
//! one (no event for `cpuset.cpus.isolated`). So every tick reads them
//! ([`crate::kernel::cgroup_isolation`]: one small file on 6.8 and later) and a change
//! reaches the engine at once: the CPUs become forbidden, and the same tick's decisions
//! move queue vectors, RPS masks and NAPI threads off them (or back, when dissolved).
//!
//! The kernel itself moves threads when a partition is made or dissolved: a kernel thread
//! of the root cgroup allowed only on CPUs that become isolated is given the root's
//! remaining CPUs, and gets its own mask back on dissolution (measured on 6.12: a NAPI
//! thread steerd pinned to CPU 2 read 0-1 once 2-3 were isolated, and 2 again after).
//! Those rewrites are not an operator's choice: steerd takes them over as the current
//! value (keeping the original from before its first write) instead of leaving the
//! threads alone as changed by someone else, and places them again in the same tick.

use tracing::{error, info};

use super::Daemon;
use crate::cpuset::CpuSet;
use crate::kernel::cgroup_isolation::read_isolated_partitions;
use crate::knob::Knob;

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
                let changed = self.isolation.known.as_ref() != Some(&cpus);
                if changed && self.isolation.known.is_some() {
                    self.take_over_threads_the_kernel_moved();
                }
                if changed {
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

    /// The NAPI threads steerd placed whose allowed CPUs differ from what it wrote, just
    /// after a partition was made or dissolved: the kernel's cpuset update, taken over.
    fn take_over_threads_the_kernel_moved(&mut self) {
        let threads: Vec<Knob> = self
            .actuator
            .changed()
            .map(|(knob, _)| knob)
            .filter(|knob| matches!(knob, Knob::NapiThread { .. }))
            .cloned()
            .collect();
        for knob in threads {
            let Some(ours) = self.engine.policy().written(&knob).cloned() else {
                continue;
            };
            let Ok((_, now)) = self.actuator.read(&knob) else {
                continue;
            };
            if now != ours {
                info!(
                    thread = %knob,
                    "{knob}: the kernel set {now} (was {ours}) as the cgroup partitions changed; placing it again"
                );
                self.engine.policy_mut().forget_owner(&knob);
                self.actuator.take_over_reset(&knob);
            }
        }
    }
}
