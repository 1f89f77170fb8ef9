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
//! Those rewrites (and the same for any partition made, resized or removed, seen in the
//! root's `cpuset.cpus.effective`) are not an operator's choice: steerd takes them over as the current
//! value (keeping the original from before its first write) instead of leaving the
//! threads alone as changed by someone else, and places them again in the same tick.

use tracing::{error, info};

use super::Daemon;
use crate::cpuset::CpuSet;
use crate::kernel::cgroup_isolation::{cgroup2_mount, read_isolated_partitions_at};
use crate::knob::Knob;

/// What the daemon last knew of isolated partitions.
#[derive(Debug, Default)]
pub(super) struct Isolation {
    /// The last set read without error; kept through failed reads and rediscoveries whose
    /// read failed, so a transient error never gives the CPUs back.
    known: Option<CpuSet>,
    /// The last error, logged once until it changes or clears (never one per tick).
    failing: Option<String>,
    /// Where the cgroup v2 hierarchy is mounted, found from `proc/self/mountinfo` on the
    /// first read and again after each rediscovery ([`Daemon::forget_cgroup_mount`]).
    mount: Option<std::path::PathBuf>,
    /// The root cgroup's `cpuset.cpus.effective` as last read: it changes with every
    /// partition made, resized or removed, isolated or not, and with it the kernel rewrites
    /// the root cgroup's kernel threads.
    root_effective: Option<String>,
    /// Ticks left in which NAPI threads the kernel may have rewritten are looked at (the
    /// kernel can show the new partitions a moment before it has rewritten every task).
    threads_recheck: u8,
}

/// Ticks after a cpuset change in which the kernel's rewrites of NAPI threads are taken
/// over.
const THREADS_RECHECK_TICKS: u8 = 2;

impl Daemon {
    /// Reads the isolated partitions and hands a change to the engine.
    pub(super) fn follow_isolated_partitions(&mut self) {
        let root = self.options.root.clone();
        let mount = match self.isolation.mount.clone() {
            Some(mount) => Ok(mount),
            None => cgroup2_mount(&root),
        };
        let read = mount.and_then(|mount| {
            let cpus = read_isolated_partitions_at(&root, &mount)?;
            let effective = root
                .read_optional(mount.join("cpuset.cpus.effective"))
                .ok()
                .flatten();
            if self.isolation.root_effective.is_some() && self.isolation.root_effective != effective
            {
                self.isolation.threads_recheck = THREADS_RECHECK_TICKS;
            }
            self.isolation.root_effective = effective;
            self.isolation.mount = Some(mount);
            Ok(cpus)
        });
        match read {
            Ok(cpus) => {
                if self.isolation.failing.take().is_some() {
                    info!("isolated cgroup partitions readable again");
                }
                let changed = self.isolation.known.as_ref() != Some(&cpus);
                if changed && self.isolation.known.is_some() {
                    self.isolation.threads_recheck = THREADS_RECHECK_TICKS;
                }
                if self.isolation.threads_recheck > 0 {
                    self.isolation.threads_recheck -= 1;
                    self.take_over_threads_the_kernel_moved();
                }
                if changed && !cpus.is_empty() {
                    info!(
                        cpus = %cpus.to_list(),
                        "isolated cgroup partitions: CPUs {}; steerd keeps receive work off them",
                        cpus.to_list()
                    );
                } else if changed && self.isolation.known.is_some() {
                    info!(
                        "isolated cgroup partitions: none any more; every CPU may take receive work again"
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

    /// Finds the cgroup v2 mount again at the next read (a rediscovery: mounts change
    /// rarely, and a tick should not parse a long mountinfo).
    pub(super) fn forget_cgroup_mount(&mut self) {
        self.isolation.mount = None;
    }

    /// After a rediscovery: the partitions as the daemon knows them, not as the discovery
    /// read them (whose failed read left none), so a transient error never gives the CPUs
    /// back.
    pub(super) fn keep_known_partitions(&mut self) {
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
                self.engine.take_over(&knob, &now);
                self.actuator.take_over_reset(&knob);
            }
        }
    }
}
