//! What the policy remembers between ticks: what steerd wrote and when, which values
//! someone else took over, which writes failed for good, and the hysteresis streaks.
//!
//! `decide` reads and updates the streaks; the caller records what was actually written
//! ([`PolicyState::record_applied`]) or failed ([`PolicyState::record_failed`]), so a write
//! that failed is neither remembered as steerd's value nor starts a dwell timer.

use std::collections::{HashMap, HashSet};

use super::hysteresis::Streaks;
use super::plan::{Action, NoteKind, Plan, ReasonKind};
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};

/// The policy's memory.
#[derive(Debug, Clone, Default)]
pub struct PolicyState {
    /// The last value steerd wrote to each target.
    pub(crate) written: HashMap<Knob, KnobValue>,
    /// When (monotonic ns) steerd last changed each target.
    pub(crate) changed_at: HashMap<Knob, u64>,
    /// Targets someone else changed after steerd wrote them, with the value seen then.
    pub(crate) external: HashMap<Knob, KnobValue>,
    /// Targets whose writes failed for good, with why.
    pub(crate) failed: HashMap<Knob, String>,
    /// Hysteresis streaks by CPU id.
    pub(crate) streaks: Vec<Streaks>,
    /// Notes already reported once.
    pub(crate) reported: HashSet<(NoteKind, String)>,
    /// Ticks decided so far.
    pub(crate) ticks: u64,
    /// The RSS table lever's memory, by device.
    pub(crate) rss: super::rss::Levers,
    /// RPS changes on trial, or undone and held off, by device.
    pub(crate) rps_trials: super::rps_trial::Trials,
    /// RPS trials undone in a row (no trial kept since), by device: what doubles the
    /// next hold (`rps_trial::hold_after`).
    pub(crate) rps_undone_in_a_row: HashMap<String, u32>,
    /// RPS trials kept and undone so far.
    pub(crate) rps_trial_counts: super::rps_trial::TrialCounts,
    /// The machine's throughput over the last few decisions: a new trial's "before".
    pub(crate) recent_throughput: super::rps_trial::Recent,
    /// The last decision had no action and nothing waiting (a dwell time, the action
    /// budget): deciding again on the same model could differ only through the load.
    pub(crate) settled: bool,
    /// The CPUs the last decision could use (`None` before the first).
    pub(crate) allowed: Option<CpuSet>,
    /// When (monotonic ns) some CPU last became usable again (a ban lifted, a partition
    /// dissolved, a CPU back online): see [`PolicyState::placement_may_move`].
    pub(crate) cpus_returned_at: Option<u64>,
}

impl PolicyState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a successful write of an action at `now_ns`. An `rps_reset` starts no dwell
    /// time and ends the one running: it takes back masks chosen for queues the device no
    /// longer has, as the driver would have had it re-created them (`forget_owner`), so
    /// RPS may be tried on the new queues once they are measured. With the dwell, the veth
    /// bed (2026-11-30, `examples/bed --channels-at 10:2,22:4`) kept its sender's CPU
    /// saturated for the 30 s of `rps_dwell` after each `ethtool -L`: 17.3k pkt/s
    /// delivered against the hand recipe's 23.6k.
    pub fn record_applied(&mut self, action: &Action, now_ns: u64) {
        self.written
            .insert(action.target.clone(), action.new.clone());
        if action.reason.kind == ReasonKind::RpsReset {
            self.changed_at.remove(&action.target);
        } else {
            self.changed_at.insert(action.target.clone(), now_ns);
        }
        self.external.remove(&action.target);
        self.failed.remove(&action.target);
    }

    /// Records a value written by an earlier run (from the actuator's state file after a
    /// crash): steerd's own, with no time of writing known, so no dwell time holds it.
    pub fn remember_written(&mut self, target: Knob, value: KnobValue) {
        self.written.insert(target, value);
    }

    /// Records every action of a plan as written (the simulator's and tests' shortcut).
    pub fn record_plan(&mut self, plan: &Plan, now_ns: u64) {
        for action in &plan.actions {
            self.record_applied(action, now_ns);
        }
    }

    /// Records a write that failed for good (EPERM/EIO on a managed IRQ, EINVAL on a mask
    /// the kernel refuses): the policy stops proposing it and reports it instead.
    pub fn record_failed(&mut self, target: Knob, why: impl Into<String>) {
        self.failed.insert(target, why.into());
    }

    /// Whether some CPU shows a hot signal that has not yet held for `confirm_ticks`
    /// ticks. The daemon samples sooner while this is so: confirmation still needs K
    /// consecutive samples, but they come quickly, so a real change is acted on within
    /// about a second while an idle machine keeps its slow tick.
    pub fn confirming(&self, confirm_ticks: u32) -> bool {
        self.streaks
            .iter()
            .any(|s| s.hot > 0 && s.hot < confirm_ticks)
    }

    /// Whether an RPS trial is in its first decisions, when plain harm may end it: the
    /// daemon samples sooner then too (`rps_trial::in_early_window`).
    pub fn rps_trial_early(&self) -> bool {
        super::rps_trial::in_early_window(self)
    }

    /// The RSS table lever's tallies by device: steps written, moves kept and undone.
    pub fn rss_counts(&self) -> impl Iterator<Item = (&str, super::rss::StepCounts)> {
        self.rss
            .iter()
            .map(|(name, lever)| (name.as_str(), lever.counts))
    }

    /// RPS trials kept and undone so far.
    pub fn rps_trial_counts(&self) -> super::rps_trial::TrialCounts {
        self.rps_trial_counts
    }

    /// The value steerd last wrote to a target.
    pub fn written(&self, target: &Knob) -> Option<&KnobValue> {
        self.written.get(target)
    }

    /// Targets someone else took over, with the value they set.
    pub fn external(&self) -> impl Iterator<Item = (&Knob, &KnobValue)> {
        self.external.iter()
    }

    /// Forgets whose value a target holds, as for a target of a re-created device: the
    /// driver reset it (its device's queue set changed), so what steerd wrote, and what
    /// someone else set and steerd respected, are gone. No dwell time holds it either: the
    /// next decision places it afresh. A failure for good (a managed IRQ) is kept.
    pub fn forget_owner(&mut self, target: &Knob) {
        self.written.remove(target);
        self.changed_at.remove(target);
        self.external.remove(target);
    }

    /// Keeps what is known of the targets `exists` says are still there and forgets the
    /// rest: what steerd wrote, when, what someone else set, and what failed for good. A
    /// target that comes back (a NIC removed and found again, an IRQ number given to
    /// another device) is a new one, not frozen by a failure or a respected value of the
    /// old one. The engine calls it beside `Retries::retain`, with the same predicate, on
    /// every new model, so a target's backoff and its failure go together.
    pub fn retain_targets(&mut self, exists: impl Fn(&Knob) -> bool) {
        self.written.retain(|target, _| exists(target));
        self.changed_at.retain(|target, _| exists(target));
        self.external.retain(|target, _| exists(target));
        self.failed.retain(|target, _| exists(target));
    }

    /// Whether a write to the target failed for good, and why.
    pub fn failed(&self, target: &Knob) -> Option<&str> {
        self.failed.get(target).map(String::as_str)
    }

    /// Forgets a device's RPS trial (a running one is undone at the next decision) and its
    /// undos in a row: its queue set changed (or it came back). See `rps_trial::forget`.
    pub fn forget_rps_trial(&mut self, device: &str) {
        super::rps_trial::forget(self, device);
    }

    /// The value someone else set on a target steerd leaves alone (`on_external_change:
    /// respect`).
    pub fn respected(&self, target: &Knob) -> Option<&KnobValue> {
        self.external.get(target)
    }

    /// When steerd last changed a target.
    pub fn changed_at(&self, target: &Knob) -> Option<u64> {
        self.changed_at.get(target).copied()
    }

    /// Whether at least `dwell_ns` passed since steerd last changed the target.
    pub(crate) fn dwelt(&self, target: &Knob, now_ns: u64, dwell_ns: u64) -> bool {
        self.changed_at(target)
            .is_none_or(|at| now_ns.saturating_sub(at) >= dwell_ns)
    }

    /// Remembers the CPUs this decision may use, noting when one came back that the last
    /// decision could not use.
    pub(crate) fn note_allowed(&mut self, allowed: &CpuSet, now_ns: u64) {
        if self
            .allowed
            .as_ref()
            .is_some_and(|before| !allowed.difference(before).is_empty())
        {
            self.cpus_returned_at = Some(now_ns);
        }
        self.allowed = Some(allowed.clone());
    }

    /// Whether a placement rule may move the target now: it has dwelt `dwell_ns`, or some
    /// CPU became usable again since steerd last changed it. The dwell damps reactions to
    /// measured load; CPUs handed back are a fact, not a measurement, and an IRQ that was
    /// moved off a partition (or moved just before it) should get its CPU back at once,
    /// not when a timer started for another reason runs out.
    pub(crate) fn placement_may_move(&self, target: &Knob, now_ns: u64, dwell_ns: u64) -> bool {
        self.dwelt(target, now_ns, dwell_ns)
            || matches!(
                (self.changed_at(target), self.cpus_returned_at),
                (Some(changed), Some(returned)) if returned > changed
            )
    }

    /// Whether a note with this key was reported already.
    pub(crate) fn has_reported(&self, kind: NoteKind, key: &str) -> bool {
        self.reported.contains(&(kind, key.to_string()))
    }

    /// Whether a note with this key is reported for the first time (and remembers it).
    pub(crate) fn first_report(&mut self, kind: NoteKind, key: String) -> bool {
        self.reported.insert((kind, key))
    }
}
