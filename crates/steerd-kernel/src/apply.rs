//! The actuator: the only code that writes kernel values.
//!
//! For every write it: remembers the original value before the first change (in memory and
//! in an atomically replaced state file, so a restart after a crash still knows it), writes
//! the kernel's text form, reads the file back to see whether the kernel took it, and
//! classifies failures so the engine reacts to each kind once instead of retrying in a
//! storm. It never decides *what* to write: that is the policy's job.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use crate::knob::{Knob, KnobValue};
use crate::root::Root;

mod state_file;

pub use state_file::{MAX_STATE_BYTES, StateFileError, trusted_owner};

/// Where the state file lives, relative to the root (so a fake root keeps its own).
pub const DEFAULT_STATE_FILE: &str = "run/steerd/state.json";

/// How a failed write is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// EPERM or EIO on an IRQ: the kernel manages it. Never tried again.
    Managed,
    /// ENOSPC: the target CPU has no free interrupt vector. Choose another CPU.
    NoVectorSpace,
    /// EBUSY, EAGAIN, EINVAL: try again later, with backoff.
    Transient,
    /// ENOENT, ENODEV, ENXIO: the device, queue or IRQ is gone. Rediscover.
    Vanished,
    /// EOVERFLOW: steerd formatted a value wider than the kernel's; a bug in steerd.
    Bug,
    /// EACCES, EROFS, or EPERM on a non-IRQ file: steerd is not allowed to write here.
    NotAllowed,
    /// The write succeeded but reading back shows another value.
    NotTaken,
    /// The value is no longer what steerd last wrote: someone else changed it since. Not
    /// overwritten; it is theirs now (and no longer restored on exit).
    ChangedByOthers,
    /// Anything else.
    Other,
}

impl FailureKind {
    /// Label for metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Managed => "managed",
            FailureKind::NoVectorSpace => "no_vector_space",
            FailureKind::Transient => "transient",
            FailureKind::Vanished => "vanished",
            FailureKind::Bug => "bug",
            FailureKind::NotAllowed => "not_allowed",
            FailureKind::NotTaken => "not_taken",
            FailureKind::ChangedByOthers => "changed_by_others",
            FailureKind::Other => "other",
        }
    }

    fn of(knob: &Knob, err: &io::Error) -> FailureKind {
        FailureKind::of_errno(knob, err.raw_os_error().map(Errno::from_raw))
    }

    /// How a write to `knob` that failed with `errno` is handled: one table for the real
    /// kernel and the simulated one.
    pub fn of_errno(knob: &Knob, errno: Option<Errno>) -> FailureKind {
        if matches!(knob, Knob::IrqAffinity { .. })
            && MANAGED_IRQ_ERRNOS.iter().any(|e| Some(*e) == errno)
        {
            return FailureKind::Managed;
        }
        FailureKind::of_device_errno(errno)
    }

    /// How a failed write that is not to a sysfs or procfs knob (an RSS indirection
    /// table through `SIOCETHTOOL`, `kernel::rss`) is handled: the same errno table,
    /// without the managed-IRQ case.
    pub fn of_device_errno(errno: Option<Errno>) -> FailureKind {
        ERRNO_KINDS
            .iter()
            .find(|(e, _)| Some(*e) == errno)
            .map_or(FailureKind::Other, |(_, kind)| *kind)
    }

    /// Every `(kind, errno)` label pair a counted write failure can carry, so the metrics
    /// export each series at 0 from the start (an alert then sees a rise, not a new series).
    /// `Other` has no fixed errno and `ChangedByOthers` is not counted as an error.
    pub fn label_pairs() -> impl Iterator<Item = (&'static str, String)> {
        let name = |e: &Errno| format!("{e:?}");
        MANAGED_IRQ_ERRNOS
            .iter()
            .map(move |e| (FailureKind::Managed.label(), name(e)))
            .chain(ERRNO_KINDS.iter().map(move |(e, k)| (k.label(), name(e))))
            .chain(std::iter::once((
                FailureKind::NotTaken.label(),
                NO_ERRNO.to_string(),
            )))
    }
}

/// What a write to an IRQ's affinity fails with when the kernel manages the IRQ.
const MANAGED_IRQ_ERRNOS: [Errno; 2] = [Errno::EPERM, Errno::EIO];

/// How each errno of a failed write is handled (after [`MANAGED_IRQ_ERRNOS`] on IRQs).
const ERRNO_KINDS: [(Errno, FailureKind); 13] = [
    (Errno::ENOSPC, FailureKind::NoVectorSpace),
    (Errno::EBUSY, FailureKind::Transient),
    (Errno::EAGAIN, FailureKind::Transient),
    (Errno::EINVAL, FailureKind::Transient),
    (Errno::ENOENT, FailureKind::Vanished),
    (Errno::ENODEV, FailureKind::Vanished),
    (Errno::ENXIO, FailureKind::Vanished),
    (Errno::ESRCH, FailureKind::Vanished),
    (Errno::ENOTDIR, FailureKind::Vanished),
    (Errno::EOVERFLOW, FailureKind::Bug),
    (Errno::EACCES, FailureKind::NotAllowed),
    (Errno::EROFS, FailureKind::NotAllowed),
    (Errno::EPERM, FailureKind::NotAllowed),
];

/// The most a knob's file may hold: an `smp_affinity_list` naming every other one of
/// 65536 CPUs is about 360 KiB, a 65536-CPU `rps_cpus` mask 18 KiB.
const MAX_KNOB_BYTES: u64 = 1 << 20;

/// The errno label of a failure that had none (a write the kernel did not take).
const NO_ERRNO: &str = "none";

/// A write that did not take effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{knob}: {message}")]
pub struct WriteFailure {
    pub knob: Knob,
    pub kind: FailureKind,
    pub errno: Option<i32>,
    pub message: String,
}

impl WriteFailure {
    /// The errno's symbolic name (`EPERM`), or `none`.
    pub fn errno_name(&self) -> String {
        self.errno.map_or(NO_ERRNO.to_string(), |e| {
            format!("{:?}", Errno::from_raw(e))
        })
    }
}

/// What a successful write did: the value before it and the value read back after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBack {
    pub knob: Knob,
    /// The value before this write.
    pub before: KnobValue,
    /// The value the kernel reports after it.
    pub after: KnobValue,
}

/// One remembered knob: its original text, and what steerd last wrote to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    knob: Knob,
    /// The file's text before steerd's first write, as read (trimmed).
    original: String,
    /// The value steerd wrote last (as read back), if any.
    written: Option<KnobValue>,
    /// The value steerd is about to write, saved before the write: after a crash between
    /// the write and the next save, the next start can tell its own write (the file holds
    /// this value) from no write (it holds the old one) and from someone else's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    intended: Option<KnobValue>,
}

/// The state file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StateFile {
    version: u32,
    /// `proc/sys/kernel/random/boot_id` when written: after a reboot every value is the
    /// kernel's default again and the old originals mean nothing.
    boot_id: Option<String>,
    entries: Vec<Remembered>,
}

const STATE_VERSION: u32 = 1;

/// The actuator. One per daemon; it owns the state file.
#[derive(Debug)]
pub struct Actuator {
    root: Root,
    state_path: PathBuf,
    boot_id: Option<String>,
    remembered: BTreeMap<Knob, Remembered>,
    /// Where the cgroup v2 hierarchy is mounted (relative to the root), once the daemon
    /// has found it: its `cpuset.cpus.effective` tells a NAPI thread the kernel
    /// re-affined as partitions changed from one someone else moved
    /// ([`Actuator::kernel_reaffined`]).
    cgroup_mount: Option<PathBuf>,
    /// Whether the cpuset partitions changed a moment ago (the daemon's window after it
    /// saw them change), when 6.1's rewrite is expected too.
    partitions_settling: bool,
    /// The root cgroup's CPUs as the daemon last read them: a fresh read that differs is
    /// a partition change the daemon has not seen yet.
    root_cpus_seen: Option<crate::cpuset::CpuSet>,
    /// Tests only: the step of a write at which the process "dies" (the write stops
    /// there, nothing after it happens), to check that every crash point is recovered.
    #[cfg(test)]
    crash_at: Option<CrashPoint>,
}

/// The steps of a write at which a crash leaves a different trace in the state file and
/// the kernel. Tests make the actuator stop at each one ([`Actuator::crash_point`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CrashPoint {
    /// Before the intent reaches the state file.
    BeforeIntent,
    /// The intent is saved; the kernel has not been written.
    AfterIntent,
    /// The kernel holds the new value; the state file still says "intended".
    AfterKernelWrite,
    /// The state file says "written".
    AfterRecord,
}

impl Actuator {
    /// Opens the actuator, loading the state file a previous run left (after a crash), so
    /// the originals are known and steerd's own earlier writes are not mistaken for an
    /// operator's. A state file from another boot is ignored. A state file that cannot be
    /// parsed is an error: silently dropping it would lose the originals.
    pub fn open(root: Root, state_path: PathBuf) -> Result<Actuator, crate::Error> {
        let boot_id = root
            .read_optional("proc/sys/kernel/random/boot_id")?
            .map(|text| text.trim().to_string());
        let mut actuator = Actuator {
            root,
            state_path,
            boot_id,
            remembered: BTreeMap::new(),
            cgroup_mount: None,
            partitions_settling: false,
            root_cpus_seen: None,
            #[cfg(test)]
            crash_at: None,
        };
        // An unsafe place (a planted link, someone else's directory) is an error: the
        // originals could not be trusted, nor kept.
        if let Some(text) = state_file::read(&actuator.state_path)? {
            let state: StateFile = serde_json::from_str(&text)
                .map_err(|e| crate::Error::parse(&actuator.state_path, e.line(), e.to_string()))?;
            if state.version == STATE_VERSION && state.boot_id == actuator.boot_id {
                // A device name becomes a path under sys/class/net on restore: one that
                // is not an interface name ("..", "a/b") is refused, not followed.
                if let Some(bad) = state
                    .entries
                    .iter()
                    .filter_map(|e| e.knob.device())
                    .find(|d| !crate::knob::is_interface_name(d))
                {
                    return Err(crate::Error::parse(
                        &actuator.state_path,
                        0,
                        format!(
                            "{bad:?} is not a network interface name; the state file was not \
                             written by steerd: move it away and restore the values by hand"
                        ),
                    ));
                }
                for entry in state.entries {
                    actuator.remembered.insert(entry.knob.clone(), entry);
                }
            }
        }
        actuator.settle_interrupted_writes();
        Ok(actuator)
    }

    /// Resolves the writes a previous run started but did not record (it died between
    /// the write and the save): if the file holds the value it meant to write, the write
    /// happened and the value is steerd's; otherwise it did not (or someone else has
    /// changed it since), and what steerd last recorded stands.
    fn settle_interrupted_writes(&mut self) {
        let interrupted: Vec<Knob> = self
            .remembered
            .values()
            .filter(|r| r.intended.is_some())
            .map(|r| r.knob.clone())
            .collect();
        if interrupted.is_empty() {
            return;
        }
        for knob in interrupted {
            let now = self.read(&knob).ok().map(|(_, value)| value);
            if let Some(entry) = self.remembered.get_mut(&knob)
                && let Some(intended) = entry.intended.take()
                && let Some(now) = now
                && knob.took_effect(&intended, &now)
            {
                entry.written = Some(now);
            }
        }
        let _ = self.save();
    }

    /// Tells the actuator where the cgroup v2 hierarchy is mounted (relative to the
    /// root), or that it is not known.
    pub fn set_cgroup_mount(&mut self, mount: Option<PathBuf>) {
        self.cgroup_mount = mount;
    }

    /// Tells the actuator that the cpuset partitions changed a moment ago (or no longer
    /// did): while they settle, a NAPI thread reading exactly the root's CPUs is taken as
    /// the kernel's rewrite too ([`Actuator::kernel_reaffined`]).
    pub fn set_partitions_settling(&mut self, settling: bool) {
        self.partitions_settling = settling;
    }

    /// Tells the actuator the root cgroup's CPUs (`cpuset.cpus.effective`) as the daemon
    /// read them this tick, if it could.
    pub fn set_root_cpus_seen(&mut self, cpus: Option<crate::cpuset::CpuSet>) {
        self.root_cpus_seen = cpus;
    }

    /// Whether `now`, found on a NAPI thread steerd pinned to `ours`, is the kernel's
    /// doing rather than someone else's. A NAPI thread is a kernel thread of the root
    /// cgroup, and when a cpuset partition is made, resized or dissolved the kernel
    /// rewrites it (docs/kernel.md, "Isolated cgroup partitions"). 6.12 gives each such
    /// thread the CPUs it asked for that the root still has, or all the root's CPUs when
    /// none is left (pinned to 2, it read 0-1 once 2-3 were isolated, and 2 again after):
    /// always the kernel's, since only a partition makes that differ from `ours`. 6.1 gives
    /// every one of them the root's CPUs: taken as the kernel's only while the partitions
    /// settle (the daemon's window, or a fresh read of the root's CPUs that differs from
    /// the daemon's), since an operator un-pinning a thread writes the same. The root's
    /// CPUs are read here, at the moment of doubt, because the kernel rewrites threads
    /// just after it publishes a partition, and a tick's earlier read can miss the rewrite
    /// (seen once in CI: the thread was then left alone as someone else's, and not
    /// restored on stop); the set the daemon saw counts too, for a thread rewritten just
    /// before a partition changed again. The kernel's "all the root's CPUs" also holds
    /// possible CPUs that are offline, which `cpuset.cpus.effective` does not list, so only
    /// the thread's online CPUs are compared.
    fn kernel_reaffined(&self, knob: &Knob, ours: &KnobValue, now: &KnobValue) -> bool {
        use crate::kernel::sysfs::cpu::{read_cpulist, read_online_cpus};
        let (Knob::NapiThread { .. }, Some(ours), Some(now)) = (knob, ours.cpus(), now.cpus())
        else {
            return false;
        };
        let Some(mount) = &self.cgroup_mount else {
            return false;
        };
        let Ok(Some(fresh)) = read_cpulist(&self.root, mount.join("cpuset.cpus.effective")) else {
            return false;
        };
        let now = match read_online_cpus(&self.root) {
            Ok(Some(online)) => now.intersection(&online),
            _ => now.clone(),
        };
        let seen = self.root_cpus_seen.as_ref().filter(|seen| **seen != fresh);
        let settling = self.partitions_settling || seen.is_some();
        std::iter::once(&fresh).chain(seen).any(|allowed| {
            let kept = ours.intersection(allowed);
            (!kept.is_empty() && now == kept) || ((kept.is_empty() || settling) && now == *allowed)
        })
    }

    /// The state file's path.
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// What steerd last wrote to `knob` (also in a previous run of this boot).
    pub fn last_written(&self, knob: &Knob) -> Option<&KnobValue> {
        self.remembered.get(knob)?.written.as_ref()
    }

    /// Knobs steerd has changed and would restore, with their original text.
    pub fn changed(&self) -> impl Iterator<Item = (&Knob, &str)> {
        self.remembered
            .values()
            .filter(|r| r.written.is_some())
            .map(|r| (&r.knob, r.original.as_str()))
    }

    /// Reads a knob's current value.
    pub fn read(&self, knob: &Knob) -> Result<(String, KnobValue), WriteFailure> {
        if let Knob::RssIndirection { device } = knob {
            let reading = crate::kernel::rss::knob::read(&self.root, device)
                .map_err(|error| rss_failure(knob, &error))?;
            let value = KnobValue::Table {
                indirection: reading.indirection,
            };
            return Ok((reading.restore_text, value));
        }
        let path = self.root.path(knob.relative_path());
        let text = match crate::limits::read_text_bounded(&path, MAX_KNOB_BYTES) {
            Ok(text) => text,
            Err(crate::Error::Io { source, .. }) => return Err(failure(knob, &source, "read")),
            Err(other) => {
                return Err(WriteFailure {
                    knob: knob.clone(),
                    kind: FailureKind::Other,
                    errno: None,
                    message: other.to_string(),
                });
            }
        };
        let value = knob.parse(&text).map_err(|error| WriteFailure {
            knob: knob.clone(),
            // A NAPI thread's pid that names another process: the thread is gone.
            kind: if matches!(error, crate::knob::KnobError::OtherProcess { .. }) {
                FailureKind::Vanished
            } else {
                FailureKind::Other
            },
            errno: None,
            message: format!("{}: {error}", path.display()),
        })?;
        // The text to write back on restore: the file's own, except for a thread's
        // affinity, read from a status file of many lines and written as a CPU list.
        let text = match knob {
            Knob::NapiThread { .. } => value.to_string(),
            _ => text.trim().to_string(),
        };
        Ok((text, value))
    }

    /// Writes `value` to `knob` and reads it back. `mask_words` is the width (32-bit
    /// groups) to format hex masks in: the width the kernel printed when the file was
    /// read. When to try again after a failure is the engine's to say (its `Retries`, in
    /// `steerd-core`).
    pub fn write(
        &mut self,
        knob: &Knob,
        value: &KnobValue,
        mask_words: u32,
    ) -> Result<ReadBack, WriteFailure> {
        let (original_text, before) = self.read(knob)?;
        // The engine's model learns of others' changes only at the next discovery; until
        // then it may ask to change again a value someone else has set since. Theirs wins.
        let reaffined = self
            .remembered
            .get(knob)
            .and_then(|entry| entry.written.as_ref())
            .filter(|ours| **ours != before)
            .is_some_and(|ours| self.kernel_reaffined(knob, ours, &before));
        if !reaffined
            && let Some(entry) = self.remembered.get_mut(knob)
            && let Some(ours) = entry.written.take_if(|ours| *ours != before)
        {
            let _ = self.save();
            return Err(WriteFailure {
                knob: knob.clone(),
                kind: FailureKind::ChangedByOthers,
                errno: None,
                message: format!(
                    "steerd wrote {ours}, now {before}: changed by someone else; not overwritten"
                ),
            });
        }
        let text = knob
            .format(value, mask_words)
            .map_err(|error| WriteFailure {
                knob: knob.clone(),
                kind: FailureKind::Bug,
                errno: None,
                message: error.to_string(),
            })?;
        // The original (first write only) and the value about to be written reach the
        // state file before the kernel does.
        let created = !self.remembered.contains_key(knob);
        let entry = self
            .remembered
            .entry(knob.clone())
            .or_insert_with(|| Remembered {
                knob: knob.clone(),
                original: original_text,
                written: None,
                intended: None,
            });
        entry.intended = Some(value.clone());
        self.crash_point(knob, CrashPoint::BeforeIntent)?;
        if let Err(err) = self.save() {
            self.forget_intent(knob, created);
            return Err(WriteFailure {
                knob: knob.clone(),
                kind: FailureKind::NotAllowed,
                errno: err.raw_os_error(),
                message: format!(
                    "cannot record the original value in {} ({err}); not writing",
                    self.state_path.display()
                ),
            });
        }
        self.crash_point(knob, CrashPoint::AfterIntent)?;
        if let Err(failure) = write_knob(&self.root, knob, &text, "write") {
            self.forget_intent(knob, created);
            let _ = self.save();
            return Err(failure);
        }
        self.crash_point(knob, CrashPoint::AfterKernelWrite)?;
        let after = match self.read(knob) {
            Ok((_, after)) => after,
            Err(failure) => {
                self.forget_intent(knob, created);
                let _ = self.save();
                return Err(failure);
            }
        };
        let took = knob.took_effect(value, &after);
        if let Some(entry) = self.remembered.get_mut(knob) {
            // An IRQ affinity can read back the old mask right after the write while the
            // kernel moves the vector at its next interrupt (seen on a 6.1 x86 guest in
            // the lab: wrote "1", read "0", and "1" a few seconds later). Recording the
            // read-back would make the late move look like someone else's change, and
            // steerd would then neither retry nor restore it; so the value written is
            // what steerd owns.
            entry.written = Some(match knob {
                Knob::IrqAffinity { .. } if !took => value.clone(),
                _ => after.clone(),
            });
            entry.intended = None;
        }
        // Losing this save loses only the "written" marker, never an original.
        let _ = self.save();
        self.crash_point(knob, CrashPoint::AfterRecord)?;
        if !took {
            return Err(WriteFailure {
                knob: knob.clone(),
                kind: FailureKind::NotTaken,
                errno: None,
                message: format!("wrote {text:?}, the kernel reports {after}"),
            });
        }
        Ok(ReadBack {
            knob: knob.clone(),
            before,
            after,
        })
    }

    /// Tests only: stops a write at `at`, as if the process died there (nothing after it
    /// happens, in memory or on disk). A no-op outside tests.
    #[cfg(test)]
    fn crash_point(&self, knob: &Knob, at: CrashPoint) -> Result<(), WriteFailure> {
        if self.crash_at != Some(at) {
            return Ok(());
        }
        Err(WriteFailure {
            knob: knob.clone(),
            kind: FailureKind::Other,
            errno: None,
            message: format!("crashed at {at:?} (test)"),
        })
    }

    #[cfg(not(test))]
    #[inline(always)]
    fn crash_point(&self, _: &Knob, _: CrashPoint) -> Result<(), WriteFailure> {
        Ok(())
    }

    /// Drops the intent recorded before a write that did not happen; an entry made just
    /// for it (`created`: nothing was ever written, no original to keep) goes too.
    fn forget_intent(&mut self, knob: &Knob, created: bool) {
        if created {
            self.remembered.remove(knob);
        } else if let Some(entry) = self.remembered.get_mut(knob) {
            entry.intended = None;
        }
    }

    /// Puts back every value steerd changed. Values changed by someone else since
    /// steerd's last write are left alone (they are theirs now) unless `force`. Returns
    /// what was restored and what failed; a failure does not stop the others.
    pub fn restore_all(&mut self, force: bool) -> (Vec<Knob>, Vec<WriteFailure>) {
        let mut restored = Vec::new();
        let mut failures = Vec::new();
        let knobs: Vec<Knob> = self.changed().map(|(knob, _)| knob.clone()).collect();
        for knob in knobs {
            match self.restore(&knob, force) {
                Ok(true) => restored.push(knob),
                Ok(false) => {}
                Err(failure) => failures.push(failure),
            }
        }
        if failures.is_empty() {
            self.remembered.clear();
            let _ = fs::remove_file(&self.state_path);
        } else {
            let _ = self.save();
        }
        (restored, failures)
    }

    /// Restores one knob; `Ok(false)` when it was left alone.
    fn restore(&mut self, knob: &Knob, force: bool) -> Result<bool, WriteFailure> {
        let Some(entry) = self.remembered.get(knob).cloned() else {
            return Ok(false);
        };
        let current = match self.read(knob) {
            Ok((_, value)) => value,
            Err(failure) if failure.kind == FailureKind::Vanished => {
                self.remembered.remove(knob);
                return Ok(false);
            }
            Err(failure) => return Err(failure),
        };
        let ours = entry.written.as_ref();
        if !force
            && ours != Some(&current)
            && !ours.is_some_and(|ours| self.kernel_reaffined(knob, ours, &current))
        {
            self.remembered.remove(knob);
            return Ok(false);
        }
        write_knob(&self.root, knob, &entry.original, "restore")?;
        self.remembered.remove(knob);
        Ok(true)
    }

    /// Takes over a knob whose value the driver reset (its device's queue set changed):
    /// the value there now is the driver's, not someone else's choice, so it becomes the
    /// one steerd accounts for (as if steerd had written it) and the original from
    /// before steerd's first write stays. On exit it is restored to that original unless
    /// someone else changes it in the meantime, exactly like a value steerd wrote. A knob
    /// that vanished with its queue keeps only its original. Returns whether steerd had
    /// an entry for the knob.
    pub fn take_over_reset(&mut self, knob: &Knob) -> bool {
        if !self.remembered.contains_key(knob) {
            return false;
        }
        let now = self.read(knob).ok().map(|(_, value)| value);
        if let Some(entry) = self.remembered.get_mut(knob) {
            entry.written = now;
            entry.intended = None;
        }
        let _ = self.save();
        true
    }

    /// Forgets the NAPI threads steerd changed that have ended (`threaded` switched off:
    /// the kernel stops them and their pids vanish, or name another process now). A thread
    /// never comes back under its pid, and a new thread starts with the kernel's default
    /// affinity, so there is nothing left to restore; kept, the entries would make every
    /// read-back find "a changed value" and stay in the state file. IRQs and queue files
    /// are kept: a device that comes back may reuse them. Returns the knobs forgotten.
    pub fn forget_ended_threads(&mut self) -> Vec<Knob> {
        let ended: Vec<Knob> = self
            .remembered
            .keys()
            .filter(|knob| matches!(knob, Knob::NapiThread { .. }))
            .filter(|knob| {
                matches!(self.read(knob), Err(failure) if failure.kind == FailureKind::Vanished)
            })
            .cloned()
            .collect();
        if !ended.is_empty() {
            for knob in &ended {
                self.remembered.remove(knob);
            }
            let _ = self.save();
        }
        ended
    }

    /// Records `value` as a knob's original when steerd has none for it yet, without
    /// owning the knob: the value it held before its driver reset it (a channel-count
    /// change), so that a first write after the reset is restored to the machine as
    /// steerd found it, not to the driver's interim default. `mask_words` is the width
    /// the kernel printed the mask in. Returns whether it was recorded.
    pub fn remember_original(&mut self, knob: &Knob, value: &KnobValue, mask_words: u32) -> bool {
        if self.remembered.contains_key(knob) {
            return false;
        }
        let Ok(original) = knob.format(value, mask_words) else {
            return false;
        };
        self.remembered.insert(
            knob.clone(),
            Remembered {
                knob: knob.clone(),
                original,
                written: None,
                intended: None,
            },
        );
        let _ = self.save();
        true
    }

    /// Forgets everything steerd wrote without restoring (the operator asked to keep the
    /// tuning on exit).
    pub fn forget_all(&mut self) {
        self.remembered.clear();
        let _ = fs::remove_file(&self.state_path);
    }

    fn save(&self) -> io::Result<()> {
        let state = StateFile {
            version: STATE_VERSION,
            boot_id: self.boot_id.clone(),
            entries: self.remembered.values().cloned().collect(),
        };
        let text = serde_json::to_string_pretty(&state).map_err(io::Error::other)?;
        state_file::write(&self.state_path, &text).map_err(|e| match e {
            StateFileError::Io { source, .. } => source,
            unsafe_ => io::Error::new(io::ErrorKind::PermissionDenied, unsafe_.to_string()),
        })
    }
}

/// Writes a knob's text form: a file under the root, for a NAPI thread its affinity
/// (`kernel::napi_threads::set_affinity`), for an RSS table the ethtool request
/// (`kernel::rss::knob`). `what` names the operation in the failure's message.
fn write_knob(root: &Root, knob: &Knob, text: &str, what: &str) -> Result<(), WriteFailure> {
    let written = match knob {
        Knob::NapiThread { pid, name } => crate::cpuset::CpuSet::parse_list(text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
            .and_then(|cpus| crate::kernel::napi_threads::set_affinity(root, *pid, name, &cpus)),
        Knob::RssIndirection { device } => {
            return crate::kernel::rss::knob::write(root, device, text)
                .map_err(|error| rss_failure(knob, &error));
        }
        _ => write_file(&root.path(knob.relative_path()), text),
    };
    written.map_err(|err| gone_is_vanished(root, failure(knob, &err, what)))
}

/// A write to an IRQ refused as by a managed IRQ (EIO, EPERM) whose `/proc/irq/N` is gone
/// by now: the IRQ was being freed under the write (a NIC removed; procfs answers EIO for
/// an entry being taken down, seen in the lab), so it vanished; it is not one to give up
/// on, since its number may come back with the device.
fn gone_is_vanished(root: &Root, mut failure: WriteFailure) -> WriteFailure {
    if let (FailureKind::Managed, Knob::IrqAffinity { irq }) = (failure.kind, &failure.knob)
        && !root.path(format!("proc/irq/{irq}")).exists()
    {
        failure.kind = FailureKind::Vanished;
    }
    failure
}

/// A failed read or write of an RSS table, classified by the ethtool request's errno.
fn rss_failure(knob: &Knob, error: &crate::kernel::rss::RssError) -> WriteFailure {
    WriteFailure {
        knob: knob.clone(),
        kind: error.failure_kind(),
        errno: error.errno().map(|e| e as i32),
        message: error.to_string(),
    }
}

/// One `write(2)` of the whole value with a newline, as `echo value > file` does. No
/// `O_CREAT`: a file that is not there is a vanished device or IRQ, not one to create.
/// Opened as every kernel file is ([`crate::limits::open_regular`]): a FIFO or device
/// standing there is refused, never waited on.
fn write_file(path: &Path, text: &str) -> io::Result<()> {
    let mut file = crate::limits::open_for_writing(path)?;
    file.write_all(format!("{text}\n").as_bytes())
}

fn failure(knob: &Knob, err: &io::Error, what: &str) -> WriteFailure {
    WriteFailure {
        knob: knob.clone(),
        kind: FailureKind::of(knob, err),
        errno: err.raw_os_error(),
        message: format!("{what} {}: {err}", knob.relative_path().display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuSet;

    fn setup() -> (tempfile::TempDir, Actuator) {
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join("sys/class/net/eth0/queues/rx-0");
        fs::create_dir_all(&q).unwrap();
        fs::write(q.join("rps_cpus"), "00\n").unwrap();
        fs::write(q.join("rps_flow_cnt"), "0\n").unwrap();
        fs::create_dir_all(dir.path().join("proc/irq/30")).unwrap();
        fs::write(dir.path().join("proc/irq/30/smp_affinity_list"), "0-7\n").unwrap();
        let root = Root::new(dir.path());
        let state = root.path(DEFAULT_STATE_FILE);
        let actuator = Actuator::open(root, state).unwrap();
        (dir, actuator)
    }

    fn rps() -> Knob {
        Knob::RpsCpus {
            device: "eth0".into(),
            queue: 0,
        }
    }

    fn cpus(list: &str) -> KnobValue {
        KnobValue::Cpus(CpuSet::parse_list(list).unwrap())
    }

    #[test]
    fn writes_reads_back_and_restores() {
        let (dir, mut actuator) = setup();
        let written = actuator.write(&rps(), &cpus("1-2"), 1).unwrap();
        assert_eq!(written.before, cpus(""));
        assert_eq!(written.after, cpus("1-2"));
        let file = dir.path().join("sys/class/net/eth0/queues/rx-0/rps_cpus");
        assert_eq!(fs::read_to_string(&file).unwrap(), "00000006\n");
        assert_eq!(actuator.last_written(&rps()), Some(&cpus("1-2")));
        assert!(actuator.state_path().exists());
        let (restored, failures) = actuator.restore_all(false);
        assert_eq!((restored.len(), failures.len()), (1, 0));
        assert_eq!(fs::read_to_string(&file).unwrap(), "00\n");
        assert!(!actuator.state_path().exists());
    }

    #[test]
    fn a_restart_finds_the_originals() {
        let (dir, mut actuator) = setup();
        let irq = Knob::IrqAffinity { irq: 30 };
        actuator.write(&irq, &cpus("3"), 1).unwrap();
        actuator.write(&irq, &cpus("4"), 1).unwrap();
        drop(actuator); // a crash: nothing restored
        let root = Root::new(dir.path());
        let mut again = Actuator::open(root.clone(), root.path(DEFAULT_STATE_FILE)).unwrap();
        assert_eq!(again.last_written(&irq), Some(&cpus("4")));
        let (restored, _) = again.restore_all(false);
        assert_eq!(restored, vec![irq]);
        assert_eq!(
            fs::read_to_string(dir.path().join("proc/irq/30/smp_affinity_list")).unwrap(),
            "0-7\n"
        );
    }

    /// An RSS table (a fake root's stand-in file for the ethtool request): the default
    /// spread is remembered as `default` in the state file before the first write, and
    /// comes back by a reset after a crash, as the spread over the queues there are.
    #[test]
    fn an_rss_table_is_remembered_as_default_and_restored_after_a_crash() {
        let (dir, mut actuator) = setup();
        for q in 1..4 {
            fs::create_dir_all(dir.path().join(format!("sys/class/net/eth0/queues/rx-{q}")))
                .unwrap();
        }
        let file = dir.path().join("sys/class/net/eth0/rss_indirection");
        let default: Vec<u32> = (0..16).map(|i| i % 4).collect();
        let text = |t: &[u32]| t.iter().map(u32::to_string).collect::<Vec<_>>().join(" ");
        fs::write(&file, text(&default) + "\n").unwrap();
        let knob = Knob::RssIndirection {
            device: "eth0".into(),
        };
        let skewed: Vec<u32> = (0..16).map(|i| [0, 1, 2, 3, 2, 3][i % 6]).collect();
        let value = KnobValue::Table {
            indirection: skewed.clone(),
        };
        let written = actuator.write(&knob, &value, 1).unwrap();
        assert_eq!(written.after, value);
        assert_eq!(fs::read_to_string(&file).unwrap().trim(), text(&skewed));
        let state: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(actuator.state_path()).unwrap()).unwrap();
        let entry = &state["entries"][0];
        assert_eq!(entry["knob"]["knob"], "rss_indirection");
        assert_eq!(entry["original"], "default");
        drop(actuator); // a crash
        let root = Root::new(dir.path());
        let mut again = Actuator::open(root.clone(), root.path(DEFAULT_STATE_FILE)).unwrap();
        assert_eq!(again.last_written(&knob), Some(&value));
        let (restored, failures) = again.restore_all(false);
        assert_eq!((restored, failures.len()), (vec![knob.clone()], 0));
        assert_eq!(fs::read_to_string(&file).unwrap().trim(), text(&default));
        // A table of another size is refused before anything is written.
        let short = KnobValue::Table {
            indirection: vec![0, 1],
        };
        let failure = again.write(&knob, &short, 1).unwrap_err();
        assert!(failure.message.contains("16"), "{}", failure.message);
        assert_eq!(fs::read_to_string(&file).unwrap().trim(), text(&default));
    }

    #[test]
    fn a_thread_the_kernel_reaffined_for_a_partition_is_still_steerds() {
        let (dir, mut actuator) = setup();
        let status = dir.path().join("proc/700/status");
        fs::create_dir_all(status.parent().unwrap()).unwrap();
        let set_status = |cpus: &str| {
            fs::write(
                &status,
                format!("Name:\tnapi/eth0-8193\nCpus_allowed_list:\t{cpus}\n"),
            )
            .unwrap()
        };
        set_status("0-3");
        let cgroup = dir.path().join("sys/fs/cgroup");
        fs::create_dir_all(&cgroup).unwrap();
        let effective = cgroup.join("cpuset.cpus.effective");
        fs::write(&effective, "0-3\n").unwrap();
        actuator.set_cgroup_mount(Some("sys/fs/cgroup".into()));
        let thread = Knob::NapiThread {
            pid: 700,
            name: "napi/eth0-8193".into(),
        };
        actuator.write(&thread, &cpus("2"), 1).unwrap();
        // CPUs 2-3 isolated: the kernel gives the thread the root's remaining CPUs.
        fs::write(&effective, "0-1\n").unwrap();
        set_status("0-1");
        actuator.write(&thread, &cpus("1"), 1).unwrap();
        // 6.1's rewrite (every root thread given the root's CPUs) while the partitions
        // settle; an operator's un-pinning to the same CPUs after that is theirs.
        actuator.set_partitions_settling(true);
        set_status("0-1");
        actuator.write(&thread, &cpus("1"), 1).unwrap();
        actuator.set_partitions_settling(false);
        set_status("0-1");
        let refused = actuator.write(&thread, &cpus("1"), 1).unwrap_err();
        assert_eq!(refused.kind, FailureKind::ChangedByOthers);
        actuator.write(&thread, &cpus("1"), 1).unwrap();
        // A partition the daemon has not seen yet (its last read: 0-3) is settling too.
        actuator.set_root_cpus_seen(Some(CpuSet::parse_list("0-3").unwrap()));
        set_status("0-1");
        actuator.write(&thread, &cpus("1"), 1).unwrap();
        actuator.set_root_cpus_seen(Some(CpuSet::parse_list("0-1").unwrap()));
        // 6.12's "all the root's CPUs" holds offline possible CPUs too (here 4-7).
        fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        fs::write(dir.path().join("sys/devices/system/cpu/online"), "0-3\n").unwrap();
        actuator.write(&thread, &cpus("3"), 1).unwrap();
        set_status("0-1,4-7");
        actuator.write(&thread, &cpus("1"), 1).unwrap();
        // Someone else's choice is not mistaken for the kernel's.
        set_status("0");
        let refused = actuator.write(&thread, &cpus("1"), 1).unwrap_err();
        assert_eq!(refused.kind, FailureKind::ChangedByOthers);
        // Pinned to 1-2 and CPU 2 isolated while steerd is stopping: restored.
        fs::write(&effective, "0-3\n").unwrap();
        set_status("0-3");
        actuator.write(&thread, &cpus("1-2"), 1).unwrap();
        fs::write(&effective, "0-1\n").unwrap();
        set_status("1");
        let other = Knob::NapiThread {
            pid: 701,
            name: "napi/eth0-8194".into(),
        };
        let other_status = dir.path().join("proc/701/status");
        fs::create_dir_all(other_status.parent().unwrap()).unwrap();
        fs::write(
            &other_status,
            "Name:\tnapi/eth0-8194\nCpus_allowed_list:\t0-3\n",
        )
        .unwrap();
        actuator.write(&other, &cpus("1"), 1).unwrap();
        // ... while an operator's change to another thread is left alone.
        fs::write(
            &other_status,
            "Name:\tnapi/eth0-8194\nCpus_allowed_list:\t0\n",
        )
        .unwrap();
        let (restored, failures) = actuator.restore_all(false);
        assert_eq!((restored, failures), (vec![thread], vec![]));
        assert!(fs::read_to_string(&status).unwrap().contains("\t0-3\n"));
        assert!(fs::read_to_string(&other_status).unwrap().contains("\t0\n"));
    }

    #[test]
    fn an_ended_napi_thread_is_forgotten_and_a_living_one_kept() {
        let (dir, mut actuator) = setup();
        let thread = |pid: u32| {
            let name = format!("napi/eth0-{}", 8193 + pid - 700);
            fs::create_dir_all(dir.path().join(format!("proc/{pid}"))).unwrap();
            fs::write(
                dir.path().join(format!("proc/{pid}/status")),
                format!("Name:\t{name}\nCpus_allowed_list:\t0-7\n"),
            )
            .unwrap();
            Knob::NapiThread { pid, name }
        };
        let (ends, lives, irq) = (thread(700), thread(701), Knob::IrqAffinity { irq: 30 });
        for knob in [&ends, &lives, &irq] {
            actuator.write(knob, &cpus("2"), 1).unwrap();
        }
        assert!(actuator.forget_ended_threads().is_empty());
        // `threaded` switched off: the kernel stopped thread 700; its pid now names
        // another process (it may also just vanish).
        fs::write(
            dir.path().join("proc/700/status"),
            "Name:\tbash\nCpus_allowed_list:\t0-7\n",
        )
        .unwrap();
        assert_eq!(actuator.forget_ended_threads(), vec![ends.clone()]);
        assert_eq!(actuator.last_written(&ends), None);
        assert_eq!(actuator.last_written(&lives), Some(&cpus("2")));
        let state = fs::read_to_string(actuator.state_path()).unwrap();
        assert!(!state.contains("napi/eth0-8193") && state.contains("napi/eth0-8194"));
        let (restored, failures) = actuator.restore_all(false);
        assert_eq!((restored.len(), failures.len()), (2, 0), "{failures:?}");
        assert!(
            fs::read_to_string(dir.path().join("proc/700/status"))
                .unwrap()
                .starts_with("Name:\tbash"),
            "the process that has the pid now is not touched"
        );
    }

    #[test]
    fn an_operators_later_change_is_not_undone() {
        let (dir, mut actuator) = setup();
        let irq = Knob::IrqAffinity { irq: 30 };
        actuator.write(&irq, &cpus("3"), 1).unwrap();
        let file = dir.path().join("proc/irq/30/smp_affinity_list");
        fs::write(&file, "5\n").unwrap();
        let (restored, failures) = actuator.restore_all(false);
        assert!(restored.is_empty() && failures.is_empty());
        assert_eq!(fs::read_to_string(&file).unwrap(), "5\n");
    }

    #[test]
    fn a_value_the_driver_reset_is_taken_over_and_the_original_kept() {
        let (dir, mut actuator) = setup();
        let irq = Knob::IrqAffinity { irq: 30 };
        let file = dir.path().join("proc/irq/30/smp_affinity_list");
        actuator.write(&irq, &cpus("3"), 1).unwrap();
        // A channel change: the driver writes its new default over steerd's value.
        fs::write(&file, "2-3\n").unwrap();
        assert!(actuator.take_over_reset(&irq));
        assert_eq!(actuator.last_written(&irq), Some(&cpus("2-3")));
        // A restart in between keeps it all.
        drop(actuator);
        let root = Root::new(dir.path());
        let mut actuator = Actuator::open(root.clone(), root.path(DEFAULT_STATE_FILE)).unwrap();
        // steerd places it again: not "changed by someone else", and on stop the value
        // from before steerd's first write comes back, not the driver's interim one.
        actuator.write(&irq, &cpus("2"), 1).unwrap();
        let (restored, failures) = actuator.restore_all(false);
        assert_eq!((restored, failures), (vec![irq], vec![]));
        assert_eq!(fs::read_to_string(&file).unwrap(), "0-7\n");
    }

    #[test]
    fn a_taken_over_value_is_restored_unless_someone_else_changed_it() {
        let (dir, mut actuator) = setup();
        let file = dir.path().join("sys/class/net/eth0/queues/rx-0/rps_cpus");
        let irq = Knob::IrqAffinity { irq: 30 };
        let irq_file = dir.path().join("proc/irq/30/smp_affinity_list");
        actuator.write(&rps(), &cpus("1"), 1).unwrap();
        actuator.write(&irq, &cpus("3"), 1).unwrap();
        // The queue was removed and added again (mask 0); the driver moved the vector.
        fs::write(&file, "1\n").unwrap();
        fs::write(&irq_file, "1\n").unwrap();
        actuator.take_over_reset(&rps());
        actuator.take_over_reset(&irq);
        // Later an operator sets the vector: theirs, left alone on exit.
        fs::write(&irq_file, "5\n").unwrap();
        let (restored, failures) = actuator.restore_all(false);
        assert_eq!((restored, failures), (vec![rps()], vec![]));
        assert_eq!(fs::read_to_string(&file).unwrap(), "00\n");
        assert_eq!(fs::read_to_string(&irq_file).unwrap(), "5\n");
        assert!(!actuator.state_path().exists());
    }

    #[test]
    fn a_vanished_queue_keeps_only_its_original() {
        let (dir, mut actuator) = setup();
        actuator.write(&rps(), &cpus("1"), 1).unwrap();
        fs::remove_dir_all(dir.path().join("sys/class/net/eth0/queues/rx-0")).unwrap();
        assert!(actuator.take_over_reset(&rps()));
        assert_eq!(actuator.last_written(&rps()), None);
        assert_eq!(actuator.changed().count(), 0);
    }

    #[test]
    fn failures_are_classified() {
        let (dir, mut actuator) = setup();
        let gone = Knob::IrqAffinity { irq: 99 };
        let failure = actuator.write(&gone, &cpus("1"), 1).unwrap_err();
        assert_eq!(failure.kind, FailureKind::Vanished);
        assert_eq!(failure.errno_name(), "ENOENT");
        // A directory in place of the file fails the write with EISDIR: "other".
        let odd = dir.path().join("proc/irq/31/smp_affinity_list");
        fs::create_dir_all(&odd).unwrap();
        let knob = Knob::IrqAffinity { irq: 31 };
        let failure = actuator.write(&knob, &cpus("1"), 1).unwrap_err();
        assert_eq!(failure.kind, FailureKind::Other);
        let bad = actuator.write(&rps(), &cpus("40"), 1).unwrap_err();
        assert_eq!(bad.kind, FailureKind::Bug);
    }

    #[test]
    fn a_value_someone_else_changed_is_not_overwritten() {
        let (dir, mut actuator) = setup();
        let irq = Knob::IrqAffinity { irq: 30 };
        actuator.write(&irq, &cpus("3"), 1).unwrap();
        let file = dir.path().join("proc/irq/30/smp_affinity_list");
        fs::write(&file, "5\n").unwrap();
        let refused = actuator.write(&irq, &cpus("4"), 1).unwrap_err();
        assert_eq!(refused.kind, FailureKind::ChangedByOthers);
        assert_eq!(fs::read_to_string(&file).unwrap(), "5\n");
        // Theirs now: not restored, not held against a later write (override).
        assert_eq!(actuator.last_written(&irq), None);
        actuator.write(&irq, &cpus("4"), 1).unwrap();
        actuator.restore_all(false);
        assert_eq!(fs::read_to_string(&file).unwrap(), "0-7\n");
    }

    #[test]
    fn errno_classes() {
        use nix::libc;
        let irq = Knob::IrqAffinity { irq: 1 };
        let kind = |e| FailureKind::of(&irq, &io::Error::from_raw_os_error(e));
        assert_eq!(kind(libc::EPERM), FailureKind::Managed);
        assert_eq!(kind(libc::EIO), FailureKind::Managed);
        assert_eq!(kind(libc::ENOSPC), FailureKind::NoVectorSpace);
        assert_eq!(kind(libc::EINVAL), FailureKind::Transient);
        assert_eq!(kind(libc::EBUSY), FailureKind::Transient);
        assert_eq!(kind(libc::EOVERFLOW), FailureKind::Bug);
        assert_eq!(kind(libc::ENOENT), FailureKind::Vanished);
        let eperm_rps = FailureKind::of(&rps(), &io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(eperm_rps, FailureKind::NotAllowed);
    }

    #[test]
    fn a_refused_irq_whose_directory_is_gone_vanished() {
        use nix::libc;
        let (dir, _) = setup();
        let root = Root::new(dir.path());
        let refused = |irq| {
            let knob = Knob::IrqAffinity { irq };
            let err = io::Error::from_raw_os_error(libc::EIO);
            gone_is_vanished(&root, failure(&knob, &err, "writing")).kind
        };
        assert_eq!(refused(30), FailureKind::Managed);
        assert_eq!(refused(31), FailureKind::Vanished);
    }

    #[test]
    fn a_crash_between_write_and_save_is_settled_at_the_next_start() {
        let (dir, mut actuator) = setup();
        let irq = Knob::IrqAffinity { irq: 30 };
        let path = dir.path().join("proc/irq/30/smp_affinity_list");
        let state = actuator.state_path().to_path_buf();
        // Record an intent as write_once does, then "crash" before writing or saving again.
        let interrupted = |actuator: &mut Actuator, value: &str| {
            actuator.remembered.insert(
                irq.clone(),
                Remembered {
                    knob: irq.clone(),
                    original: "0-7".into(),
                    written: None,
                    intended: Some(cpus(value)),
                },
            );
            actuator.save().unwrap();
        };
        // 1. The write reached the kernel: the value is steerd's, and restored on stop.
        interrupted(&mut actuator, "3");
        fs::write(&path, "3\n").unwrap();
        let mut after_crash = Actuator::open(Root::new(dir.path()), state.clone()).unwrap();
        assert_eq!(after_crash.last_written(&irq), Some(&cpus("3")));
        let (restored, failures) = after_crash.restore_all(false);
        assert_eq!((restored.len(), failures.len()), (1, 0));
        assert_eq!(fs::read_to_string(&path).unwrap().trim(), "0-7");
        // 2. It did not: nothing is steerd's, nothing to restore.
        interrupted(&mut actuator, "5");
        let after_crash = Actuator::open(Root::new(dir.path()), state).unwrap();
        assert_eq!(after_crash.last_written(&irq), None);
        assert_eq!(after_crash.changed().count(), 0);
    }

    /// The crash-point matrix: a process killed at any step of a first or a later write
    /// of an IRQ affinity or an RPS mask leaves what the next start needs to restore the
    /// value from before steerd's first write, and takes none of its own writes for
    /// someone else's.
    #[test]
    fn a_kill_at_any_step_of_a_write_loses_no_original() {
        let points = [
            CrashPoint::BeforeIntent,
            CrashPoint::AfterIntent,
            CrashPoint::AfterKernelWrite,
            CrashPoint::AfterRecord,
        ];
        let irq = Knob::IrqAffinity { irq: 30 };
        let cases = [
            (irq, "proc/irq/30/smp_affinity_list", "0-7", ["3", "5"]),
            (
                rps(),
                "sys/class/net/eth0/queues/rx-0/rps_cpus",
                "00",
                ["1", "2-3"],
            ),
        ];
        for (knob, file, original, [first, second]) in cases {
            for at in points {
                for later_write in [false, true] {
                    let case = format!("{knob} killed at {at:?}, later write {later_write}");
                    let (dir, mut actuator) = setup();
                    let original_value = actuator.read(&knob).unwrap().1;
                    if later_write {
                        actuator.write(&knob, &cpus(first), 1).unwrap();
                    }
                    actuator.crash_at = Some(at);
                    let value = if later_write { second } else { first };
                    let crashed = actuator.write(&knob, &cpus(value), 1);
                    assert!(crashed.is_err(), "{case}: no crash");
                    drop(actuator); // killed: no restore, no further save
                    let root = Root::new(dir.path());
                    let mut next = Actuator::open(root.clone(), root.path(DEFAULT_STATE_FILE))
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    // The kernel's value is steerd's own whenever steerd changed it.
                    let now = next.read(&knob).unwrap().1;
                    if now != original_value {
                        assert_eq!(next.last_written(&knob), Some(&now), "{case}");
                    }
                    let (restored, failures) = next.restore_all(false);
                    assert!(failures.is_empty(), "{case}: {failures:?}");
                    let text = fs::read_to_string(dir.path().join(file)).unwrap();
                    assert_eq!(text.trim(), original, "{case}: restored {restored:?}");
                    assert!(!next.state_path().exists(), "{case}: state file left");
                }
            }
        }
    }

    /// The state file's format is [`Knob`]'s and [`KnobValue`]'s serde form: a file a
    /// previous version wrote (this text, one knob of each kind) still loads, and its
    /// originals are restored.
    #[test]
    fn a_state_file_in_the_established_format_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let written = [
            ("proc/irq/30/smp_affinity_list", "0-7", "3"),
            ("sys/class/net/eth0/queues/rx-0/rps_cpus", "00", "06"),
            ("sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "0", "4096"),
            ("proc/sys/net/core/rps_sock_flow_entries", "0", "32768"),
        ];
        for (path, _, now) in written {
            let file = dir.path().join(path);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, format!("{now}\n")).unwrap();
        }
        let root = Root::new(dir.path());
        let state = root.path(DEFAULT_STATE_FILE);
        fs::create_dir_all(state.parent().unwrap()).unwrap();
        let text = r#"{
  "version": 1,
  "boot_id": null,
  "entries": [
    {
      "knob": {
        "knob": "irq_affinity",
        "irq": 30
      },
      "original": "0-7",
      "written": [
        3
      ]
    },
    {
      "knob": {
        "knob": "rps_cpus",
        "device": "eth0",
        "queue": 0
      },
      "original": "00",
      "written": [
        1,
        2
      ]
    },
    {
      "knob": {
        "knob": "rps_flow_cnt",
        "device": "eth0",
        "queue": 0
      },
      "original": "0",
      "written": 4096,
      "intended": 4096
    },
    {
      "knob": {
        "knob": "rps_sock_flow_entries"
      },
      "original": "0",
      "written": 32768
    }
  ]
}"#;
        fs::write(&state, text).unwrap();
        let mut actuator = Actuator::open(root, state).unwrap();
        let flow = Knob::RpsFlowCnt {
            device: "eth0".into(),
            queue: 0,
        };
        assert_eq!(
            actuator.last_written(&Knob::IrqAffinity { irq: 30 }),
            Some(&cpus("3"))
        );
        assert_eq!(actuator.last_written(&rps()), Some(&cpus("1-2")));
        assert_eq!(actuator.last_written(&flow), Some(&KnobValue::Count(4096)));
        assert_eq!(
            actuator.last_written(&Knob::RpsSockFlowEntries),
            Some(&KnobValue::Count(32768))
        );
        let (restored, failures) = actuator.restore_all(false);
        assert_eq!((restored.len(), failures.len()), (4, 0), "{failures:?}");
        for (path, original, _) in written {
            let now = fs::read_to_string(dir.path().join(path)).unwrap();
            assert_eq!(now, format!("{original}\n"), "{path}");
        }
    }

    #[test]
    fn a_corrupt_state_file_is_an_error_not_a_silent_loss() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let state = root.path(DEFAULT_STATE_FILE);
        fs::create_dir_all(state.parent().unwrap()).unwrap();
        fs::write(&state, "{ not json").unwrap();
        let err = Actuator::open(root, state).unwrap_err().to_string();
        assert!(err.contains("state.json"), "{err}");
    }

    /// A device name in the state file becomes a path on restore: one that could leave
    /// sys/class/net is refused when the file is loaded, and nothing is written.
    #[test]
    fn a_state_file_device_name_that_is_not_an_interface_is_refused() {
        let (dir, mut actuator) = setup();
        actuator.write(&rps(), &cpus("1"), 1).unwrap();
        let state = actuator.state_path().to_path_buf();
        drop(actuator);
        let text = fs::read_to_string(&state).unwrap();
        for bad in ["../../../etc", "a/b", "..", ""] {
            fs::write(&state, text.replace("\"eth0\"", &format!("{bad:?}"))).unwrap();
            let err = Actuator::open(Root::new(dir.path()), state.clone())
                .unwrap_err()
                .to_string();
            assert!(err.contains("not a network interface name"), "{bad}: {err}");
        }
        assert_eq!(
            fs::read_to_string(dir.path().join("sys/class/net/eth0/queues/rx-0/rps_cpus")).unwrap(),
            "00000002\n"
        );
    }
}
