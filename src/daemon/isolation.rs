//! Following isolated cgroup partitions while the daemon runs: Kubernetes' CPU manager,
//! tuned and realtime setups make and dissolve them at any time, and the kernel has no
//! event for `cpuset.cpus.isolated`. So every tick reads them
//! ([`crate::kernel::cgroup_isolation`]: one small file on 6.8 and later), and an inotify
//! watch on the cpuset cgroups ([`super::partition_watch`]) brings that tick forward when
//! a partition file is written or a cgroup comes or goes. A change reaches the engine at
//! once: the CPUs become forbidden, and the same tick's decisions move queue vectors, RPS
//! masks and NAPI threads off them (or back, when dissolved).
//!
//! The kernel itself moves threads when a partition is made or dissolved: a kernel thread
//! of the root cgroup allowed only on CPUs that become isolated is given the root's
//! remaining CPUs, and gets its own mask back on dissolution (measured on 6.12: a NAPI
//! thread steerd pinned to CPU 2 read 0-1 once 2-3 were isolated, and 2 again after).
//! Those rewrites (and the same for any partition made, resized or removed, seen in the
//! root's `cpuset.cpus.effective`) are not an operator's choice: steerd takes them over as the current
//! value (keeping the original from before its first write) instead of leaving the
//! threads alone as changed by someone else, and places them again in the same tick.
//! The kernel can publish a partition before it has rewritten every thread, so this
//! tick's look can miss a rewrite its own writes then meet: the actuator, told where
//! the hierarchy is, knows the kernel's rule and takes such a thread as still steerd's
//! (`Actuator::kernel_reaffined`).

use std::os::fd::{AsFd, BorrowedFd};

use tracing::{debug, error, info, warn};

use super::Daemon;
use super::partition_watch::PartitionWatch;
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
    /// The inotify watch on the cpuset cgroups of `mount`, once it is known.
    watch: Option<PartitionWatch>,
    /// Why the watch could not be set up (logged once; the tick's read still follows).
    watch_failing: Option<String>,
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
            self.actuator.set_root_cpus_seen(
                effective
                    .as_deref()
                    .and_then(|text| CpuSet::parse_list(text.trim()).ok()),
            );
            self.isolation.root_effective = effective;
            self.watch_partitions(&mount);
            self.actuator.set_cgroup_mount(Some(mount.clone()));
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
                let settling = self.isolation.threads_recheck > 0;
                self.actuator.set_partitions_settling(settling);
                if settling {
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
                // No window stays open through failed reads: an operator un-pinning a
                // thread to the root's CPUs meanwhile is theirs.
                self.actuator.set_partitions_settling(false);
                self.isolation.threads_recheck = self.isolation.threads_recheck.saturating_sub(1);
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

    /// Sets up the watch on the hierarchy at `mount` unless it watches it already, or
    /// failed to since the last rediscovery.
    fn watch_partitions(&mut self, mount: &std::path::Path) {
        let watching = self
            .isolation
            .watch
            .as_ref()
            .is_some_and(|w| w.mount() == mount);
        if watching || self.isolation.watch_failing.is_some() {
            return;
        }
        match PartitionWatch::new(&self.options.root, mount) {
            Ok(watch) => {
                debug!(
                    cgroups = watch.directories(),
                    "watching {} cpuset cgroups for partition changes",
                    watch.directories()
                );
                if watch.unwatched() > 0 {
                    warn!(
                        watched = watch.directories(),
                        unwatched = watch.unwatched(),
                        "watching {} cpuset cgroups for partition changes, not the {} below them (inotify's limits); a partition made there is followed at the next tick",
                        watch.directories(),
                        watch.unwatched()
                    );
                }
                self.isolation.watch = Some(watch);
                self.isolation.watch_failing = None;
            }
            Err(e) => self.stop_watching_partitions(e),
        }
    }

    /// Drops the watch after an error; it is tried again after the next rediscovery.
    pub(super) fn stop_watching_partitions(&mut self, e: std::io::Error) {
        self.isolation.watch = None;
        self.note_watch_failure(e);
    }

    fn note_watch_failure(&mut self, e: std::io::Error) {
        let text = e.to_string();
        if self.isolation.watch_failing.as_deref() != Some(&text) {
            warn!(
                error = %e,
                "cannot watch the cgroup hierarchy; isolated partitions are followed at each tick only: {e}"
            );
            self.isolation.watch_failing = Some(text);
        }
    }

    /// The watch's descriptor and generation, for the event loop.
    pub(super) fn partition_watch_fd(&self) -> Option<(BorrowedFd<'_>, u64)> {
        self.isolation
            .watch
            .as_ref()
            .map(|watch| (watch.as_fd(), watch.generation()))
    }

    /// Reads the watch's events: whether a partition may have changed. A watch that
    /// cannot be set up again is dropped (tried anew after the next rediscovery) and the
    /// answer is yes, since the tick's read is then the way to know.
    pub(super) fn partitions_may_have_changed(&mut self) -> bool {
        let Some(watch) = self.isolation.watch.as_mut() else {
            return false;
        };
        match watch.drain() {
            Ok(changed) => changed,
            Err(e) => {
                self.stop_watching_partitions(e);
                true
            }
        }
    }

    /// Finds the cgroup v2 mount again at the next read (a rediscovery: mounts change
    /// rarely, and a tick should not parse a long mountinfo).
    pub(super) fn forget_cgroup_mount(&mut self) {
        self.isolation.mount = None;
        self.isolation.watch_failing = None;
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
