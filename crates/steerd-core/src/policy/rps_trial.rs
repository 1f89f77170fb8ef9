//! Every RPS change that spreads work (on, widen) is a trial: it is kept only when the
//! machine did not get worse, and undone when it did (issue 30).
//!
//! Why: whether spreading a receive path over more CPUs delivers more depends on what the
//! policy cannot see. On the veth bed it delivered 1.8x (the other CPU was idle). In the
//! lab's saturated guests it delivered 5-9 % less and dropped 160-250k packets from the
//! RPS backlogs: the guest's "idle" vCPUs share the host's two cores with the busy ones,
//! so there was no spare capacity behind them, only IPIs and queues. The same holds for a
//! VM on an overcommitted host or two hyperthreads of one busy core. So steerd measures:
//! the receive work done (softnet `processed`) and dropped (softnet `dropped`) per second
//! on all CPUs, the mean of the last [`BEFORE_TICKS`] decisions' intervals before the
//! change, against the mean of the intervals since, after [`TRIAL_NS`] and at
//! least [`TRIAL_TICKS`] decisions (after [`EARLY_TICKS`] when the backlogs already lose
//! [`EARLY_LOSS`] of the packets, or the work done already fell by [`EARLY_FALL`] while
//! CPUs stay hot). The change made it worse when backlog drops appeared
//! (at least [`DROPS_SHARE`] of the packets, and twice the share before) and the work done
//! did not rise by [`GAIN_OVER_DROPS`] times as many packets, or when the
//! work done fell by [`PROCESSED_FALL`] while CPUs stayed hot ([`Throughput`]'s
//! `worse_than` says why that is not less traffic). Then the device's masks go back to what they
//! were, in one action group (`rps_undo`), and RPS stays off that device for
//! [`HOLD_NS`], doubled for each undo in a row before it up to [`MAX_HOLD_NS`]
//! ([`hold_after`]): the plan says so each tick. No other RPS change is made to a device
//! while its trial runs.
//!
//! A change that did no harm is still undone, the same way, when it moved no work: the
//! CPUs it added to the masks (those that were not hot when it was made) processed less
//! than [`MOVED_SHARE`] of what the masks send them (each changed queue's packets times the
//! share of its mask they make up) more than before, over the whole trial. Why:
//! in the lab's `sat-burst` on QEMU 10 (2026-11-29) rx-0 got `0,2` and CPU 2 processed
//! nothing more for the rest of the run (its two flows hashed to CPU 0), while CPU 0 now
//! handed its own packets to its own backlog; both runs whose mask was kept so delivered
//! the least of their nine (24k pkt/s, no balancer's median 28.6k). A mask that sends no
//! packet where it says costs that hop and promises what it does not do.

use std::collections::{HashMap, VecDeque};

use super::context::Planner;
use super::hysteresis::kilo;
use super::state::PolicyState;
use crate::cpuset::CpuSet;
use crate::load::Load;

/// How long a trial runs before it is judged.
pub const TRIAL_NS: u64 = 5_000_000_000;
/// ... and in decisions at least (on a slow tick, several samples).
pub const TRIAL_TICKS: u64 = 4;
/// Decisions after which a trial with [`EARLY_LOSS`] of the packets dropped, or whose work
/// done fell by [`EARLY_FALL`] while CPUs stay hot, is judged at once.
pub const EARLY_TICKS: u64 = 2;
/// Backlog loss that ends a trial early.
pub const EARLY_LOSS: f64 = 0.05;
/// A fall of the work done, while CPUs stay hot, that ends a trial early.
pub const EARLY_FALL: f64 = 0.5;
/// The share of packets dropped from the backlogs that counts as harm.
pub const DROPS_SHARE: f64 = 0.01;
/// New backlog drops are harm unless the work done rose by this many times as many
/// packets. Drops alone are not: on the veth bed, whose sender RPS unthrottles, turning
/// RPS on took the work done from 16k to 35k packets/s with 5k/s dropped in the same tick
/// (2026-11-29, `BED_STEERD_LOG=DIR examples/bed`), and an undo on the drops alone gave
/// back the 19k (3.8x the drops; another round 14k for 1k). Twice, not once, because a
/// gain counted in a guest whose vCPUs share the host's cores is partly not real: a
/// `sat-late` trial at 24k -> 27k processed with 1.7k/s dropped (1.7x) was kept in an
/// experiment of 2026-11-28 and delivered no more while dropping 335k packets more over
/// the run (docs/policy.md, "a trial"), and `sat-elephant`'s 14k -> 25k with 37k/s
/// dropped is harm by either measure.
pub const GAIN_OVER_DROPS: f64 = 2.0;
/// A fall of the work done that counts as harm while CPUs stay hot ...
pub const PROCESSED_FALL: f64 = 0.05;
/// ... when it is also this many standard errors of the difference of the two means (the
/// intervals' own spread before and since the change): a fall within the noise is not
/// harm. Why: on the lab's saturated guests one CPU's work swings by a third from one
/// second to the next with nothing changed (`sat-late`, 2026-11-29: 10.6-22.6k pkt/s in
/// the four seconds before a change), so 5 % alone undid changes on noise.
pub const NOISE_SE: f64 = 2.0;
/// The share of what a change's masks send the CPUs it added (each changed queue's packets
/// times the share of its new mask those CPUs make up: RPS hashes flows evenly over a
/// mask) that they must process more than before it, over its trial, for it to count as
/// having moved work. A share of the expected, not of the queue's packets, so that widening
/// a mask of ten CPUs by one is judged like turning RPS on over two.
pub const MOVED_SHARE: f64 = 0.2;
/// How long RPS stays off a device after an undo ...
pub const HOLD_NS: u64 = 300_000_000_000;
/// ... doubled for each undo in a row before it (no trial kept between them), up to an
/// hour. Why: where RPS never helps, a fixed hold tries it again every 300 s for as long
/// as the CPU stays hot, 24 writes an hour that each cost a trial's drops. In the lab's
/// igb guests on 6.19 (2026-11-30, `defaults`) CPU 0 sat at 0.70 irq+softirq with the
/// vCPUs sharing the host's two cores, and every trial there was undone on backlog drops
/// (52k -> 50k pkt/s, 0 -> 2k/s dropped); with the doubling, such a machine sees trials
/// at about 0, 5, 15, 35 and 75 minutes, then one an hour.
pub const MAX_HOLD_NS: u64 = 3_600_000_000_000;

/// The hold after the `undone_in_a_row`-th undo in a row (1 for the first): [`HOLD_NS`],
/// doubled for each before it, at most [`MAX_HOLD_NS`].
pub fn hold_after(undone_in_a_row: u32) -> u64 {
    let doublings = undone_in_a_row.saturating_sub(1).min(16);
    HOLD_NS.saturating_mul(1 << doublings).min(MAX_HOLD_NS)
}
/// How many decisions' intervals before a change its trial's "before" averages. One
/// interval is not enough: on the lab's saturated guests the work done swings by a third
/// from one second to the next (2026-11-29, `sat-late`: 17-37k pkt/s on one CPU pair
/// with nothing changed), and a trial judged one such second against another undid RPS
/// on "25k -> 17k" that was noise.
pub const BEFORE_TICKS: u64 = 4;

/// The machine's receive throughput, per second, as the load has it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Throughput {
    pub processed: f64,
    pub dropped: f64,
}

impl Throughput {
    /// Over the load's last interval alone (unsmoothed), on every online CPU.
    pub fn last(load: &Load) -> Throughput {
        load.cpus
            .iter()
            .filter(|c| c.online)
            .fold(Throughput::default(), |t, c| Throughput {
                processed: t.processed + c.processed_last_pps,
                dropped: t.dropped + c.dropped_per_sec,
            })
    }

    /// The share of the packets reaching the backlogs that were dropped there.
    fn loss(&self) -> f64 {
        let all = self.processed + self.dropped;
        if all > 0.0 { self.dropped / all } else { 0.0 }
    }

    /// Whether the work done since `before` rose by less than [`GAIN_OVER_DROPS`] times
    /// the rise of the backlogs' drops: see that constant.
    fn drops_outweigh_gain(&self, before: &Throughput) -> bool {
        self.processed - before.processed < GAIN_OVER_DROPS * (self.dropped - before.dropped)
    }

    /// Why `self` (after) is worse than `before`, if it is (`noise`: the standard error
    /// of the difference of the two mean work done figures, 0 for single figures):
    /// * backlog drops are at least [`DROPS_SHARE`] of the packets, their share at least
    ///   doubled, and the work done rose by less than [`GAIN_OVER_DROPS`] times their rise
    ///   ([`Self::drops_outweigh_gain`]); or
    /// * the work done fell by [`PROCESSED_FALL`] or more, the share dropped did not fall,
    ///   and a CPU is still hot (`saturated`): less traffic would have cooled the CPUs
    ///   down, so it is the change that costs the work; and the fall is more than
    ///   [`NOISE_SE`] times `noise`. Seen in the lab's `sat-cpu0`: 42k
    ///   -> 34k pkt/s with no softnet drop at all (the packets were lost at the NIC, on the
    ///   host's side of the virtio queue, where the guest cannot count them).
    fn worse_than(&self, before: &Throughput, saturated: bool, noise: f64) -> Option<String> {
        let (was, is) = (before.loss(), self.loss());
        let drops = is >= DROPS_SHARE && is > 2.0 * was && self.drops_outweigh_gain(before);
        let less = saturated
            && is >= was
            && self.processed <= (1.0 - PROCESSED_FALL) * before.processed
            && before.processed - self.processed > NOISE_SE * noise;
        (drops || less).then(|| {
            format!(
                "receive work done {} -> {} pkt/s, backlog drops {} -> {}/s ({:.1}% -> {:.1}% of the packets){}",
                kilo(before.processed),
                kilo(self.processed),
                kilo(before.dropped),
                kilo(self.dropped),
                100.0 * was,
                100.0 * is,
                if drops { "" } else { ", CPUs still hot" }
            )
        })
    }
}

/// A running mean of throughputs, one per decision's interval, with the spread of the
/// work done.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Mean {
    sum: Throughput,
    processed_squares: f64,
    intervals: u32,
}

impl Mean {
    fn add(&mut self, t: Throughput) {
        self.sum.processed += t.processed;
        self.sum.dropped += t.dropped;
        self.processed_squares += t.processed * t.processed;
        self.intervals += 1;
    }

    fn get(&self) -> Option<Throughput> {
        (self.intervals > 0).then(|| Throughput {
            processed: self.sum.processed / f64::from(self.intervals),
            dropped: self.sum.dropped / f64::from(self.intervals),
        })
    }

    /// The variance of the mean work done (the intervals' sample variance over their
    /// number); 0 with fewer than two intervals.
    fn variance_of_mean(&self) -> f64 {
        if self.intervals < 2 {
            return 0.0;
        }
        let n = f64::from(self.intervals);
        let mean = self.sum.processed / n;
        let variance = ((self.processed_squares - n * mean * mean) / (n - 1.0)).max(0.0);
        variance / n
    }
}

/// The machine's throughput over the last [`BEFORE_TICKS`] decisions, by decision number,
/// all with a CPU hot or all with none: what a new trial's "before" averages ([`observe`]
/// adds one a decision). Why one state only: RPS goes on at the first hot decision of a
/// burst, and a mean over the idle seconds before it would flatter any change.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    intervals: VecDeque<(u64, Throughput)>,
    hot: bool,
}

impl Recent {
    fn push(&mut self, tick: u64, t: Throughput, hot: bool) {
        if hot != self.hot {
            self.intervals.clear();
            self.hot = hot;
        }
        self.intervals.push_back((tick, t));
        self.intervals
            .retain(|&(seen, _)| seen + BEFORE_TICKS > tick && seen <= tick);
    }

    /// The intervals kept: those of the last [`BEFORE_TICKS`] decisions up to the latest
    /// ([`Self::push`] drops older ones, and those from before ticks skipped while calm).
    fn mean(&self) -> Mean {
        let mut mean = Mean::default();
        for &(_, t) in &self.intervals {
            mean.add(t);
        }
        mean
    }
}

/// Records this decision's interval (the load's last, unsmoothed): into the recent
/// intervals a new trial's "before" averages, and into every running trial made before
/// this decision (its intervals since the change). Called once a decision, before any rule,
/// with whether some CPU shows a hot signal (`hot`).
pub fn observe(state: &mut PolicyState, load: &Load, hot: bool) {
    let tick = state.ticks;
    let now = Throughput::last(load);
    state.recent_throughput.push(tick, now, hot);
    for trial in state.rps_trials.values_mut() {
        if trial.held_until_ns.is_none() && tick > trial.made_at_tick {
            trial.since.add(now);
            trial.targets_since.add(Throughput {
                processed: processed_on(load, &trial.targets.cpus),
                dropped: 0.0,
            });
        }
    }
}

/// One device's trial.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trial {
    /// The masks before the change, by queue (what an undo writes back).
    before_masks: Vec<(u32, CpuSet)>,
    /// The intervals of the [`BEFORE_TICKS`] decisions up to the change.
    before: Mean,
    /// The intervals since the change (each decision after it adds its own).
    since: Mean,
    /// Where the change is expected to send work ([`Targets`]), what those CPUs processed
    /// in the change's interval, and their work done in each decision's interval since.
    targets: Targets,
    targets_before: f64,
    targets_since: Mean,
    made_at_ns: u64,
    made_at_tick: u64,
    /// Judged and undone: RPS stays off the device until then.
    held_until_ns: Option<u64>,
    /// The device's queue set changed while it ran: it cannot be judged, and is undone.
    void: bool,
    /// After a queue-set change (and a void undo): no RPS change to the device before this
    /// decision, so that the next trial's "before" ([`BEFORE_TICKS`] intervals) measures
    /// the queues the device has now with the masks they hold, not the old queues or a
    /// voided change ([`forget`]).
    measure_until_tick: Option<u64>,
    /// Why it was undone.
    why: String,
}

/// Where a spreading change is expected to send work.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Targets {
    /// The CPUs it adds to the masks that were not hot when it was made (a hot CPU in the
    /// new masks is where the work comes from, or will not take more).
    pub cpus: CpuSet,
    /// What the new masks send them, packets/s: each changed queue's receive rate when the
    /// change was made times the share of its new mask they make up (`None` where the
    /// driver counts no packets per queue: whether work moved is then not judged).
    pub expected_pps: Option<f64>,
}

/// The work done, packets/s, by `cpus` over the load's last interval.
fn processed_on(load: &Load, cpus: &CpuSet) -> f64 {
    cpus.iter()
        .filter_map(|cpu| load.cpu(cpu))
        .map(|c| c.processed_last_pps)
        .sum()
}

impl Trial {
    /// Why the change moved no work, if it did not ([`MOVED_SHARE`]).
    fn moved_nothing(&self) -> Option<String> {
        let expected = self.targets.expected_pps.filter(|&pps| pps > 0.0)?;
        if self.targets.cpus.is_empty() {
            return None;
        }
        let since = self.targets_since.get()?.processed;
        (since - self.targets_before < MOVED_SHARE * expected).then(|| {
            format!(
                "moved no work: CPUs {} processed {} -> {} pkt/s, where the masks send them {} pkt/s",
                self.targets.cpus.to_list(),
                kilo(self.targets_before),
                kilo(since),
                kilo(expected)
            )
        })
    }
}

/// Trials by device name.
pub type Trials = HashMap<String, Trial>;

/// Tallies for the status and the tests: trials kept and undone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrialCounts {
    pub kept: u64,
    pub undone: u64,
}

/// Whether `device` has an RPS change on trial: made and not yet judged.
pub fn running(state: &PolicyState, device: &str) -> bool {
    state
        .rps_trials
        .get(device)
        .is_some_and(|t| t.held_until_ns.is_none())
}

/// Whether a trial was made less than [`EARLY_TICKS`] decisions ago: the daemon then samples
/// at its fast tick, so that plain harm is undone half a second after the change instead of
/// one or two intervals. Why: a trial that harms a saturated guest loses packets from its
/// first samples on (backlogs full), and waiting a whole interval to see it is what most
/// of a trial's drops are. The lab's virtio-net 6.19 `sat-channels` runs (2026-11-30)
/// undid every such trial on backlog drops 1.1-1.3 s after it was made, at 9-21k softnet
/// drops a run; `sat-elephant` loses 27-37k packets in the backlogs a trial. Only the
/// early test sees these short intervals alone: a trial is kept only after [`TRIAL_NS`]
/// and [`TRIAL_TICKS`] decisions, most of them a whole interval long.
pub fn in_early_window(state: &PolicyState) -> bool {
    state.rps_trials.values().any(|t| {
        t.held_until_ns.is_none()
            && !t.void
            && state.ticks.saturating_sub(t.made_at_tick) < EARLY_TICKS
    })
}

/// Starts a trial for `device`'s change from `before_masks`, expected to send work to
/// `targets` (unless one runs: the first change's "before" is what an undo restores).
pub fn start(p: &mut Planner, device: &str, before_masks: Vec<(u32, CpuSet)>, targets: Targets) {
    if running(p.state, device) {
        return;
    }
    let mut before = p.state.recent_throughput.mean();
    if before.intervals == 0 {
        before.add(Throughput::last(p.load));
    }
    let targets_before = processed_on(p.load, &targets.cpus);
    let trial = Trial {
        before_masks,
        before,
        since: Mean::default(),
        targets,
        targets_before,
        targets_since: Mean::default(),
        made_at_ns: p.now_ns,
        made_at_tick: p.state.ticks,
        held_until_ns: None,
        void: false,
        measure_until_tick: None,
        why: String::new(),
    };
    p.state.rps_trials.insert(device.to_string(), trial);
}

/// What the trial of a device says now.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// No trial, or kept: RPS may change the device.
    Free,
    /// Running: no other RPS change until it is judged.
    Running,
    /// Just judged worse: write these masks back (`why` for the reason) and hold RPS off
    /// for `hold_s` seconds.
    Undo {
        masks: Vec<(u32, CpuSet)>,
        why: String,
        hold_s: u64,
    },
    /// Undone earlier: RPS stays off until the hold ends.
    Held { why: String, left_s: u64 },
    /// The device's queue set changed (a trial running then was undone): RPS stays off
    /// while the device is measured as it is now, `decisions_left` more decisions.
    Measuring { decisions_left: u64 },
}

/// Forgets `device`'s trial, running or held, because its queue set changed (or it came
/// back): the throughput before the change says nothing about the device now, and a hold
/// earned by the old queues does not bind the new ones. A running trial is not simply
/// dropped: its masks stay on the queues that remain and would never be judged (the lab's
/// `channels` on virtio-net 6.19, 2026-11-30: RPS over CPUs 0-3 turned on for rx-0 and
/// rx-1 while the device had 2 queues stayed to the end of the run after `ethtool -L`
/// gave it 4 again). It is voided instead: the next decision undoes it ([`judge`]), with
/// no hold. Whatever the device had, a trial or none, RPS is tried on its queues only once
/// [`BEFORE_TICKS`] decisions have measured them as they are now, so that a trial's
/// "before" holds no interval of the old queue set (without that wait, a queue the driver
/// re-created, its mask already 0 so the undo wrote nothing and no dwell held it, got RPS
/// again two decisions after a void undo, judged against intervals of the voided change).
/// A second change while the device is measured starts the measuring over. The device's
/// undos in a row ([`hold_after`]) start over too.
pub fn forget(state: &mut PolicyState, device: &str) {
    // `state.ticks` is the last decision's number: the next one's interval holds the change.
    let measured = measuring_until(state.ticks + 1);
    match state.rps_trials.get_mut(device) {
        Some(trial) if trial.held_until_ns.is_none() => trial.void = true,
        Some(trial) => *trial = measured,
        None => {
            state.rps_trials.insert(device.to_string(), measured);
        }
    }
    state.rps_undone_in_a_row.remove(device);
}

/// A device with no trial whose queues are measured by the [`BEFORE_TICKS`] decisions
/// after `tick`, the first whose interval may hold the queue-set change (or the undo of a
/// voided trial): RPS may be tried again from the next, whose "before" intervals all
/// follow it.
fn measuring_until(tick: u64) -> Trial {
    Trial {
        held_until_ns: Some(0),
        measure_until_tick: Some(tick + BEFORE_TICKS),
        ..Trial::default()
    }
}

/// Judges `device`'s trial when it is due; see the module's doc.
pub fn judge(p: &mut Planner, device: &str) -> Judgement {
    let now = p.now_ns;
    let ticks = p.state.ticks;
    let saturated = p.heat.iter().any(|h| h.signal.is_some());
    let Some(trial) = p.state.rps_trials.get_mut(device) else {
        return Judgement::Free;
    };
    if let Some(until) = trial.held_until_ns {
        if let Some(tick) = trial.measure_until_tick.filter(|&tick| ticks < tick) {
            return Judgement::Measuring {
                decisions_left: tick - ticks,
            };
        }
        if now >= until {
            p.state.rps_trials.remove(device);
            return Judgement::Free;
        }
        return Judgement::Held {
            why: trial.why.clone(),
            left_s: (until - now).div_ceil(1_000_000_000),
        };
    }
    if trial.void {
        let masks = std::mem::take(&mut trial.before_masks);
        *trial = measuring_until(ticks);
        return Judgement::Undo {
            masks,
            why: "could not be judged: the device's queue set changed during its trial".to_string(),
            hold_s: 0,
        };
    }
    // No interval since the change yet: nothing to judge it by.
    let Some(after) = trial.since.get() else {
        return Judgement::Running;
    };
    // `start` measures at least the change's own interval.
    let before = trial.before.get().unwrap_or_default();
    let noise = (trial.before.variance_of_mean() + trial.since.variance_of_mean()).sqrt();
    let due = now.saturating_sub(trial.made_at_ns) >= TRIAL_NS
        && ticks.saturating_sub(trial.made_at_tick) >= TRIAL_TICKS;
    // Plain harm does not wait for the whole trial: in the lab's sat-cpu0 the backlogs
    // lost 14-44 % of the packets from the first samples on, and those 5 s cost more
    // packets than the rest of the run.
    // The same for work that collapses with no backlog drop (docs/policy.md, "a trial").
    let blatant = ticks.saturating_sub(trial.made_at_tick) >= EARLY_TICKS
        && ((after.loss() >= EARLY_LOSS
            && after.loss() > 2.0 * before.loss()
            && after.drops_outweigh_gain(&before))
            || (saturated
                && before.processed > 0.0
                && after.loss() >= before.loss()
                && after.processed <= (1.0 - EARLY_FALL) * before.processed));
    if !due && !blatant {
        return Judgement::Running;
    }
    let worse = after
        .worse_than(&before, saturated, noise)
        .map(|why| format!("made the machine worse: {why}"));
    // Early, only harm is judged: a trial is kept only once it has run its course.
    if !due && worse.is_none() {
        return Judgement::Running;
    }
    let worse = worse.or_else(|| trial.moved_nothing());
    match worse {
        Some(why) => {
            let in_a_row = p
                .state
                .rps_undone_in_a_row
                .entry(device.to_string())
                .or_default();
            *in_a_row += 1;
            let hold = hold_after(*in_a_row);
            trial.held_until_ns = Some(now.saturating_add(hold));
            trial.why = why.clone();
            p.state.rps_trial_counts.undone += 1;
            Judgement::Undo {
                masks: trial.before_masks.clone(),
                why,
                hold_s: hold / 1_000_000_000,
            }
        }
        None => {
            p.state.rps_trials.remove(device);
            p.state.rps_undone_in_a_row.remove(device);
            p.state.rps_trial_counts.kept += 1;
            Judgement::Free
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hold_doubles_with_each_undo_in_a_row_up_to_an_hour() {
        let secs: Vec<u64> = (1..=7).map(|n| hold_after(n) / 1_000_000_000).collect();
        assert_eq!(secs, [300, 600, 1200, 2400, 3600, 3600, 3600]);
        assert_eq!(hold_after(0), HOLD_NS);
        assert_eq!(hold_after(u32::MAX), MAX_HOLD_NS);
    }

    fn t(processed: f64, dropped: f64) -> Throughput {
        Throughput { processed, dropped }
    }

    /// A trial whose added CPUs processed `before` then `since` (one interval each), the
    /// masks sending them `expected`.
    fn trial(before: f64, since: f64, expected: f64) -> Trial {
        let mut trial = Trial {
            targets: Targets {
                cpus: [10].into_iter().collect(),
                expected_pps: Some(expected),
            },
            targets_before: before,
            ..Trial::default()
        };
        trial.targets_since.add(t(since, 0.0));
        trial
    }

    #[test]
    fn work_moved_is_judged_against_what_the_masks_send_the_added_cpus() {
        // sat-burst on QEMU 10: rx-0's `0,2` sent CPU 2 half of 8k pkt/s; it processed none.
        let why = trial(30.0, 40.0, 4_000.0).moved_nothing();
        assert!(why.is_some_and(|w| w.starts_with("moved no work: CPUs 10 processed 30 -> 40")));
        // A mask of ten CPUs widened by one sends the eleventh a tenth of a 45k pkt/s
        // queue: 4k there is work moved, though it is under a tenth of the queue.
        assert_eq!(trial(0.0, 4_000.0, 45_000.0 / 11.0).moved_nothing(), None);
        // No per-queue counters: not judged.
        let mut blind = trial(0.0, 0.0, 1.0);
        blind.targets.expected_pps = None;
        assert_eq!(blind.moved_nothing(), None);
    }

    #[test]
    fn backlog_drops_or_less_work_on_hot_cpus_is_worse() {
        // The lab's sat-defaults: 35k -> 43k processed, 0 -> 19k drops/s.
        assert!(
            t(43_000.0, 19_000.0)
                .worse_than(&t(35_000.0, 0.0), true, 0.0)
                .is_some()
        );
        // The lab's sat-cpu0: 42k -> 34k processed, no drops, CPUs still hot.
        assert!(
            t(34_000.0, 0.0)
                .worse_than(&t(42_000.0, 0.0), true, 0.0)
                .is_some()
        );
        // ... and with every CPU cool again: less traffic, as far as the counters tell.
        assert!(
            t(34_000.0, 0.0)
                .worse_than(&t(42_000.0, 0.0), false, 0.0)
                .is_none()
        );
        // The veth bed: 22k -> 39k, no drops: better.
        assert!(
            t(39_000.0, 0.0)
                .worse_than(&t(22_000.0, 0.0), true, 0.0)
                .is_none()
        );
        // Less work and fewer drops (less traffic, in the fake-root channel test).
        let before = t(1_050_000.0, 260_000.0);
        assert!(
            t(859_000.0, 128_000.0)
                .worse_than(&before, true, 0.0)
                .is_none()
        );
        // The veth bed (2026-11-29): 16k -> 35k, 0 -> 5k drops/s: 3.8x as many packets
        // gained as dropped, so better.
        assert!(
            t(35_000.0, 5_000.0)
                .worse_than(&t(16_000.0, 0.0), true, 0.0)
                .is_none()
        );
        // ... but the same drops with less than twice as much gained: worse (the lab's
        // sat-late, 2026-11-28: 24k -> 27k with 1.7k/s dropped).
        assert!(
            t(25_000.0, 5_000.0)
                .worse_than(&t(16_000.0, 0.0), true, 0.0)
                .is_some()
        );
        assert!(
            t(27_000.0, 1_750.0)
                .worse_than(&t(24_000.0, 0.0), true, 0.0)
                .is_some()
        );
        // A fall of 19 % within the intervals' own spread (a standard error of 5k pkt/s
        // on the difference): not harm; the same fall measured steadily is.
        assert!(
            t(34_000.0, 0.0)
                .worse_than(&t(42_000.0, 0.0), true, 5_000.0)
                .is_none()
        );
        assert!(
            t(34_000.0, 0.0)
                .worse_than(&t(42_000.0, 0.0), true, 1_000.0)
                .is_some()
        );
        // A few drops within the noise: not harm.
        assert!(
            t(42_000.0, 100.0)
                .worse_than(&t(42_000.0, 0.0), true, 0.0)
                .is_none()
        );
    }

    fn mean_of(processed: &[f64]) -> Mean {
        let mut mean = Mean::default();
        for &p in processed {
            mean.add(t(p, 0.0));
        }
        mean
    }

    /// A trial's "before" is the mean of the last BEFORE_TICKS intervals, with their
    /// spread; an interval from before a gap (ticks skipped while calm) is not recent.
    #[test]
    fn the_intervals_before_a_change_are_averaged_with_their_spread() {
        let mut recent = Recent::default();
        // The lab's sat-late, the four seconds before a change (2026-11-29).
        for (tick, p) in [(1, 22_600.0), (2, 20_500.0), (3, 10_600.0), (4, 15_900.0)] {
            recent.push(tick, t(p, 0.0), true);
        }
        let before = recent.mean();
        assert_eq!(before.intervals, 4);
        let mean = before.get().map(|m| m.processed);
        assert!(mean.is_some_and(|m| (m - 17_400.0).abs() < 1.0), "{mean:?}");
        // Sample SD 5.3k over 4 intervals: a standard error of about 2.7k.
        let se = before.variance_of_mean().sqrt();
        assert!((2_500.0..2_900.0).contains(&se), "{se}");
        // Five more intervals: only the last four count.
        recent.push(5, t(30_000.0, 0.0), true);
        assert_eq!(recent.mean().intervals, 4);
        // After ticks skipped while calm, nothing from before them is recent.
        recent.push(20, t(1_000.0, 0.0), true);
        let after_gap = recent.mean();
        assert_eq!(after_gap.intervals, 1);
        assert_eq!(after_gap.variance_of_mean(), 0.0);
        // The first hot decision after calm ones: only its own interval.
        recent.push(21, t(0.0, 0.0), false);
        recent.push(22, t(0.0, 0.0), false);
        recent.push(23, t(20_000.0, 0.0), true);
        let burst = recent.mean();
        assert_eq!(burst.intervals, 1);
        assert_eq!(burst.get().map(|m| m.processed), Some(20_000.0));
        assert_eq!(mean_of(&[]).get(), None);
        assert_eq!(mean_of(&[5.0, 5.0, 5.0]).variance_of_mean(), 0.0);
    }
}
