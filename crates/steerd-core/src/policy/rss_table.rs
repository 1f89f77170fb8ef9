//! The RSS lever's pure core (issue 18): which indirection-table entries to move from a hot
//! receive queue to a cool one, and whether a step that was made helped.
//!
//! The kernel does not say which table entry (hash bucket) carries which load: only each
//! queue's packet rate is known. So a step is an experiment. [`propose`] moves a share of
//! each hot queue's entries to a cool usable queue (the hottest to the coolest, and so on,
//! all in one table write), sized as if the hot queue's load were spread evenly over its
//! entries, and states that expectation. After a confirmed
//! window the caller measures again and [`judge`] keeps the step when the busier of the two
//! queues came down by the minimum gain, or reverts it: when the moved entries carried
//! nothing, or carried the one heavy bucket (an elephant flow, which moving entries cannot
//! split; the imbalance just changes queue). [`Backoff`] makes a reverted queue wait longer
//! each time and, after [`MAX_REVERTS`], hands it to RPS: a table step can never oscillate.
//! A reverted move's entries go back in the next step's write ([`revert`],
//! [`rates_after_verdicts`]), so an undo costs no write of its own.
//!
//! The rule around it is [`super::rss`], which [`super::decide`] runs on every decision
//! (unless `rss.mode` is `off`): it takes the table discovery read, calls [`propose`] once
//! the imbalance is confirmed, puts the step in the plan as one table write (a note with
//! `rss.mode: advise`), and after `rss.dwell` calls [`judge`] and [`revert`]. The tests here run the whole loop against modelled
//! bucket loads (many flows filling 2 of 4 queues: 0.30 within 3 writes; one elephant:
//! given up after 2 reverts).
//!
//! No I/O here, like the rest of the policy: the table comes from `ETHTOOL_GRXFHINDIR` or
//! ethtool netlink `RSS_GET`, the rates from the per-queue counters, the write is a knob.

/// One queue pair of a step: `moved` (entry indices, ascending) go from queue `from` to
/// queue `to`.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub from: u32,
    pub to: u32,
    pub moved: Vec<usize>,
    /// The two queues' packet rates expected after the move, if the hot queue's load is
    /// spread evenly over its entries: `(from, to)`.
    pub expected_pps: (f64, f64),
}

/// A proposed table change, written as one table: each hot queue paired with a cool one
/// (the hottest with the coolest, the next with the next), `table` the whole table after.
#[derive(Debug, Clone, PartialEq)]
pub struct TableStep {
    pub moves: Vec<Move>,
    pub table: Vec<u32>,
}

/// What [`propose`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Proposal {
    /// No usable queue is busier than the even share by more than the minimum gain.
    Balanced,
    /// Move entries.
    Step(TableStep),
    /// The hottest queue holds a single entry: moving it only moves the load (RPS can
    /// split it across CPUs instead).
    OneEntry { queue: u32 },
    /// No usable queue is cool enough to take the hottest queue's entries with a gain.
    NoCoolerQueue { queue: u32 },
    /// The hottest queue's steps were reverted [`MAX_REVERTS`] times: its load sits in
    /// one bucket or a few the lever cannot find, so it is RPS's (and no step will be
    /// tried again: no oscillation).
    GaveUp { queue: u32 },
    /// The hottest queue waits out its back-off after a reverted step.
    BackingOff { queue: u32 },
}

/// How big a step may be and how much it must promise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRules {
    /// At most this share of a hot queue's entries moves in one step (0 < share <= 1).
    pub max_share: f64,
    /// A hot queue must be busier than the even share by this fraction, and a kept move
    /// must bring the busier of its two queues below the hot queue's old rate by it.
    pub min_gain: f64,
}

impl Default for StepRules {
    fn default() -> Self {
        StepRules {
            max_share: 0.5,
            min_gain: 0.10,
        }
    }
}

/// The next step for a table given each queue's packet rate (`pps[q]`, queue order) and
/// which queues may receive entries (`usable[q]`: its IRQ on an allowed, NUMA-local CPU).
/// Queues missing from `pps` or `usable` count as idle and unusable. `backoffs[q]` says
/// whether hot queue `q` may give entries at `now_ns`, and how many of its steps were
/// reverted: a retry shifts its pick (with as many entries as the failed step, it moves
/// none of the same; with another count some may overlap) (missing: none yet).
pub fn propose(
    table: &[u32],
    pps: &[f64],
    usable: &[bool],
    backoffs: &[Backoff],
    now_ns: u64,
    rules: StepRules,
) -> Proposal {
    let backoff = |q: u32| backoffs.get(q as usize).copied().unwrap_or_default();
    let usable_queue = |q: u32| usable.get(q as usize).copied().unwrap_or(false);
    let rate = |q: u32| pps.get(q as usize).copied().unwrap_or(0.0).max(0.0);
    // The queues that share the load: those the table sends to (usable or not: a hot
    // queue on a forbidden CPU still gives entries away) and those that may receive.
    let mut queues: Vec<u32> = table
        .iter()
        .copied()
        .chain((0..usable.len() as u32).filter(|&q| usable_queue(q)))
        .collect();
    queues.sort_unstable();
    queues.dedup();
    if queues.len() < 2 {
        return Proposal::Balanced;
    }
    let total: f64 = queues.iter().map(|&q| rate(q)).sum();
    let even = total / queues.len() as f64;
    if total <= 0.0 {
        return Proposal::Balanced;
    }
    // Hot queues, hottest first; cool ones (usable only), coolest first.
    let mut hot: Vec<u32> = queues
        .iter()
        .copied()
        .filter(|&q| table.contains(&q) && rate(q) > even * (1.0 + rules.min_gain))
        .collect();
    hot.sort_by(|&a, &b| rate(b).total_cmp(&rate(a)).then(a.cmp(&b)));
    let mut cool: Vec<u32> = queues
        .iter()
        .copied()
        .filter(|&q| usable_queue(q) && rate(q) < even)
        .collect();
    cool.sort_by(|&a, &b| rate(a).total_cmp(&rate(b)).then(a.cmp(&b)));
    let Some(&hottest) = hot.first() else {
        return Proposal::Balanced;
    };
    let mut next = table.to_vec();
    let mut moves = Vec::new();
    let mut first_refusal = None;
    let mut cool = cool.into_iter().peekable();
    for from in hot.into_iter().filter(|&q| backoff(q).may_step(now_ns)) {
        let entries: Vec<usize> = (0..table.len()).filter(|&i| table[i] == from).collect();
        if entries.len() < 2 {
            first_refusal.get_or_insert(Proposal::OneEntry { queue: from });
            continue;
        }
        // The partner is taken only when a move is made: a refused pair leaves it for the
        // next hot queue.
        let Some(&to) = cool.peek() else { break };
        match size_move(&entries, rate(from), rate(to), backoff(from).reverts, rules) {
            Some((moved, expected_pps)) => {
                cool.next();
                for &i in &moved {
                    next[i] = to;
                }
                moves.push(Move {
                    from,
                    to,
                    moved,
                    expected_pps,
                });
            }
            None => {
                first_refusal.get_or_insert(Proposal::NoCoolerQueue { queue: from });
            }
        }
    }
    if moves.is_empty() {
        return first_refusal.unwrap_or(if backoff(hottest).gave_up() {
            Proposal::GaveUp { queue: hottest }
        } else if !backoff(hottest).may_step(now_ns) {
            Proposal::BackingOff { queue: hottest }
        } else {
            Proposal::NoCoolerQueue { queue: hottest }
        });
    }
    Proposal::Step(TableStep { moves, table: next })
}

/// Which of a hot queue's `entries` to move to a queue at `cool_pps`: what would bring
/// the two level, at most `max_share` of the entries, at least one, never all of them;
/// `None` when the least move cannot gain `min_gain`. After `reverts` failed steps the
/// pick is shifted, so a retry of the same size tries other entries.
fn size_move(
    entries: &[usize],
    hot_pps: f64,
    cool_pps: f64,
    reverts: u32,
    rules: StepRules,
) -> Option<(Vec<usize>, (f64, f64))> {
    let per_entry = hot_pps / entries.len() as f64;
    let level = (hot_pps - cool_pps) / 2.0;
    let wanted = (level / per_entry).round() as usize;
    let cap = ((entries.len() as f64 * rules.max_share.clamp(0.0, 1.0)).floor() as usize).max(1);
    let count = wanted.clamp(1, cap).min(entries.len() - 1);
    let moved_pps = per_entry * count as f64;
    let after = (hot_pps - moved_pps, cool_pps + moved_pps);
    (after.0.max(after.1) <= hot_pps * (1.0 - rules.min_gain))
        .then(|| (spread_pick(entries, count, reverts as usize), after))
}

/// `count` of `entries`, evenly spaced over them and shifted by `shift`: a heavy bucket is
/// no likelier to be among them than any other, a table stays interleaved as ethtool's
/// default is, and with half the entries a shift of one picks the other half.
fn spread_pick(entries: &[usize], count: usize, shift: usize) -> Vec<usize> {
    let n = entries.len();
    let mut picked: Vec<usize> = (0..count)
        .map(|k| entries[(k * n / count + shift) % n])
        .collect();
    picked.sort_unstable();
    picked.dedup();
    picked
}

/// Whether a step helped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepVerdict {
    /// The busier of the two queues is below the hot queue's old rate by the minimum gain.
    Keep,
    /// The moved entries carried (almost) nothing: the hot queue is as busy as before.
    RevertNoEffect,
    /// The load moved with the entries: the queue that took them is now the hot one (one
    /// heavy bucket).
    RevertMovedHot,
    /// The device's queues together received less than [`DEVICE_KEPT`] of their packets
    /// before the step: the step is taken to have cost the NIC its traffic.
    RevertDeviceFell,
}

/// The least share of the device's receive rate before a step that its queues must keep
/// over the window after it, or the step is undone whatever the shares say. Why: judged on
/// shares alone, a step after which the NIC delivered almost nothing looks like a perfect
/// spread. In the lab (`sat-skew` at 400 rules, QEMU 7.2's virtio-net RSS in software,
/// 2026-11-29) every table step under saturation was followed within 2 s by the guest's
/// queues receiving a steady 2k pkt/s among them, from 15k, evenly: kept, and steerd
/// delivered 0.39x no balancer. A third, because a sender that slowed to half during a
/// window was seen too, and must not undo a good step on its own.
pub const DEVICE_KEPT: f64 = 1.0 / 3.0;

/// Judges one move of a step from the queues' rates before it (`before`) and over the
/// confirmed window after it (`after`). The rates after are scaled to the total before, so
/// the verdict is on how the traffic is shared: a fall in total traffic during the window
/// (seen in the lab: a stalled sender halved it) does not pass for a good step, nor a rise
/// for a bad one. A fall below [`DEVICE_KEPT`] of the total undoes the step.
pub fn judge(step: &Move, before: &[f64], after: &[f64], rules: StepRules) -> StepVerdict {
    let at = |v: &[f64], q: u32| v.get(q as usize).copied().unwrap_or(0.0).max(0.0);
    let total = |v: &[f64]| v.iter().map(|r| r.max(0.0)).sum::<f64>();
    if total(after) < DEVICE_KEPT * total(before) {
        return StepVerdict::RevertDeviceFell;
    }
    let scale = match (total(before), total(after)) {
        (b, a) if b > 0.0 && a > 0.0 => b / a,
        _ => 1.0,
    };
    let old_hot = at(before, step.from);
    let (from, to) = (at(after, step.from) * scale, at(after, step.to) * scale);
    if from.max(to) <= old_hot * (1.0 - rules.min_gain) {
        StepVerdict::Keep
    } else if to > from {
        StepVerdict::RevertMovedHot
    } else {
        StepVerdict::RevertNoEffect
    }
}

/// The table after a step's verdicts: the kept moves stay, the others go back to their
/// hot queue. `None` when every move is kept (nothing to write).
pub fn revert(before: &[u32], step: &TableStep, verdicts: &[StepVerdict]) -> Option<Vec<u32>> {
    if before.len() != step.table.len() {
        // Not the table the step was made on: the whole old table, to be safe.
        return Some(before.to_vec());
    }
    let mut table = step.table.clone();
    let mut changed = false;
    for (m, v) in step.moves.iter().zip(verdicts) {
        if *v != StepVerdict::Keep {
            for &i in &m.moved {
                if let (Some(slot), Some(&old)) = (table.get_mut(i), before.get(i)) {
                    *slot = old;
                    changed = true;
                }
            }
        }
    }
    changed.then_some(table)
}

/// The queues' rates expected once a step's reverted moves are undone: measured after the
/// step for the kept moves' queues, as before it for the reverted ones (their entries are
/// back where they were). The next step can then be written with the undoing, in one table.
pub fn rates_after_verdicts(
    before: &[f64],
    after: &[f64],
    step: &TableStep,
    verdicts: &[StepVerdict],
) -> Vec<f64> {
    let mut rates = after.to_vec();
    for (m, v) in step.moves.iter().zip(verdicts) {
        if *v != StepVerdict::Keep {
            for q in [m.from, m.to] {
                if let (Some(slot), Some(&old)) =
                    (rates.get_mut(q as usize), before.get(q as usize))
                {
                    *slot = old;
                }
            }
        }
    }
    rates
}

/// After this many reverted steps in a row for one hot queue, its table entries are left
/// alone and RPS takes the queue (one flow, or buckets too uneven to move).
pub const MAX_REVERTS: u32 = 2;

/// The back-off of one hot queue: each revert doubles the wait before the next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backoff {
    pub reverts: u32,
    /// CLOCK_MONOTONIC ns before which no step is proposed for the queue.
    pub until_ns: u64,
}

impl Backoff {
    /// Records a verdict at `now_ns` with the lever's dwell time.
    pub fn record(&mut self, verdict: StepVerdict, now_ns: u64, dwell_ns: u64) {
        match verdict {
            StepVerdict::Keep => *self = Backoff::default(),
            StepVerdict::RevertNoEffect
            | StepVerdict::RevertMovedHot
            | StepVerdict::RevertDeviceFell => {
                self.reverts = self.reverts.saturating_add(1);
                let factor = 1u64 << self.reverts.min(16);
                self.until_ns = now_ns.saturating_add(dwell_ns.saturating_mul(factor));
            }
        }
    }

    /// Whether a step may be proposed at `now_ns`.
    pub fn may_step(&self, now_ns: u64) -> bool {
        self.reverts < MAX_REVERTS && now_ns >= self.until_ns
    }

    /// Whether the table lever gave up on the queue: RPS's turn.
    pub fn gave_up(&self) -> bool {
        self.reverts >= MAX_REVERTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ethtool's default table: entry i on queue i % queues.
    fn default_table(entries: usize, queues: u32) -> Vec<u32> {
        (0..entries as u32).map(|i| i % queues).collect()
    }

    fn first_try(table: &[u32], pps: &[f64], usable: &[bool]) -> Proposal {
        propose(table, pps, usable, &[], 0, StepRules::default())
    }

    fn step(p: Proposal) -> TableStep {
        match p {
            Proposal::Step(s) => s,
            other => panic!("expected a step, got {other:?}"),
        }
    }

    #[test]
    fn an_even_load_needs_no_step() {
        let table = default_table(128, 4);
        let p = first_try(&table, &[100.0, 105.0, 98.0, 102.0], &[true; 4]);
        assert_eq!(p, Proposal::Balanced);
    }

    #[test]
    fn two_hot_queues_give_entries_to_the_two_coolest_in_one_table() {
        // A hash that fills queues 0 and 1 of a 128-entry table, 32 entries each.
        let table = default_table(128, 4);
        let s = step(first_try(&table, &[500.0, 480.0, 10.0, 10.0], &[true; 4]));
        let pairs: Vec<(u32, u32, usize)> = s
            .moves
            .iter()
            .map(|m| (m.from, m.to, m.moved.len()))
            .collect();
        // Level would be (500 - 10) / 2 = 245 pps at 15.6 pps per entry: 16, the cap.
        assert_eq!(pairs, [(0, 2, 16), (1, 3, 16)]);
        assert_eq!(s.moves[0].expected_pps, (250.0, 260.0));
        assert_eq!(s.moves[1].expected_pps, (240.0, 250.0));
        let count = |q| s.table.iter().filter(|&&x| x == q).count();
        assert_eq!([count(0), count(1), count(2), count(3)], [16, 16, 48, 48]);
        // Spread over queue 0's entries, not the first 16 of them.
        assert_eq!(s.moves[0].moved[..3], [0, 8, 16]);
    }

    #[test]
    fn a_small_imbalance_moves_few_entries() {
        let table = default_table(128, 4);
        let s = step(first_try(&table, &[160.0, 100.0, 100.0, 80.0], &[true; 4]));
        assert_eq!(s.moves.len(), 1);
        let m = &s.moves[0];
        // (160 - 80) / 2 = 40 pps at 5 pps per entry.
        assert_eq!((m.from, m.to, m.moved.len()), (0, 3, 8));
        assert_eq!(m.expected_pps, (120.0, 120.0));
    }

    #[test]
    fn unusable_queues_never_receive_entries() {
        // Queue 2's IRQ sits on a forbidden or remote CPU.
        let table = default_table(128, 4);
        let s = step(first_try(
            &table,
            &[500.0, 200.0, 0.0, 100.0],
            &[true, true, false, true],
        ));
        assert_eq!(s.moves.len(), 1);
        assert_eq!(s.moves[0].to, 3);
    }

    #[test]
    fn a_hot_queue_on_a_forbidden_cpu_still_gives_entries_away() {
        // Queue 0's IRQ sits on a forbidden CPU: it may not receive entries, but its load
        // counts and it is relieved like any other.
        let table = default_table(128, 4);
        let s = step(first_try(
            &table,
            &[500.0, 100.0, 100.0, 50.0],
            &[false, true, true, true],
        ));
        assert_eq!((s.moves[0].from, s.moves[0].to), (0, 3));
    }

    #[test]
    fn a_revert_on_another_table_size_goes_back_whole() {
        let table = default_table(128, 4);
        let s = step(first_try(&table, &[500.0, 480.0, 10.0, 10.0], &[true; 4]));
        let shorter = default_table(64, 4);
        let verdicts = [StepVerdict::Keep, StepVerdict::RevertNoEffect];
        assert_eq!(revert(&shorter, &s, &verdicts), Some(shorter.clone()));
    }

    #[test]
    fn a_fall_in_total_traffic_is_not_taken_for_a_good_step() {
        let table = default_table(128, 4);
        let s = step(first_try(&table, &[500.0, 480.0, 10.0, 10.0], &[true; 4]));
        let before = [500.0, 480.0, 10.0, 10.0];
        // Nothing moved with the entries, but the sender slowed to half.
        let halved = [250.0, 240.0, 5.0, 5.0];
        assert_eq!(
            judge(&s.moves[0], &before, &halved, StepRules::default()),
            StepVerdict::RevertNoEffect
        );
        // The step worked, and the sender doubled meanwhile.
        let doubled = [500.0, 480.0, 500.0, 480.0];
        assert_eq!(
            judge(&s.moves[0], &before, &doubled, StepRules::default()),
            StepVerdict::Keep
        );
    }

    /// The lab's `sat-skew` at 400 rules: after the step the queues received 2k pkt/s
    /// among them, evenly, from 15k on two queues. Shares alone would keep it.
    #[test]
    fn a_step_after_which_the_device_received_almost_nothing_is_undone() {
        let table = default_table(128, 4);
        let before = [7_500.0, 7_500.0, 0.0, 0.0];
        let s = step(first_try(&table, &before, &[true; 4]));
        let collapsed = [400.0, 400.0, 400.0, 800.0];
        for m in &s.moves {
            assert_eq!(
                judge(m, &before, &collapsed, StepRules::default()),
                StepVerdict::RevertDeviceFell
            );
        }
        let spread = [3_800.0, 3_700.0, 3_700.0, 3_800.0];
        assert_eq!(
            judge(&s.moves[0], &before, &spread, StepRules::default()),
            StepVerdict::Keep
        );
    }

    #[test]
    fn a_queue_with_one_entry_cannot_be_split() {
        let table = vec![0, 1, 1, 1, 2, 2, 3, 3];
        assert_eq!(
            first_try(&table, &[900.0, 10.0, 10.0, 10.0], &[true; 4]),
            Proposal::OneEntry { queue: 0 }
        );
    }

    #[test]
    fn no_step_without_a_queue_to_gain_from() {
        // Two busy queues with 4 entries each: one entry (30 pps) is the least that can
        // move, and it would leave the busier queue at 115, less than 10 % below 120.
        let table = default_table(8, 2);
        assert_eq!(
            first_try(&table, &[120.0, 85.0], &[true; 2]),
            Proposal::NoCoolerQueue { queue: 0 }
        );
    }

    #[test]
    fn a_queue_backing_off_keeps_its_entries() {
        let table = default_table(128, 4);
        let waiting = Backoff {
            reverts: 1,
            until_ns: 1_000,
        };
        let pps = [500.0, 480.0, 10.0, 10.0];
        let p = propose(
            &table,
            &pps,
            &[true; 4],
            &[waiting],
            999,
            StepRules::default(),
        );
        let s = step(p);
        assert_eq!(s.moves.len(), 1);
        assert_eq!((s.moves[0].from, s.moves[0].to), (1, 2));
        // Once the wait is over, the retry moves the other half of queue 0's entries.
        let p = propose(
            &table,
            &pps,
            &[true; 4],
            &[waiting],
            1_000,
            StepRules::default(),
        );
        let first = step(first_try(&table, &pps, &[true; 4]));
        let retry = step(p);
        assert_eq!(retry.moves[0].from, 0);
        assert!(
            retry.moves[0]
                .moved
                .iter()
                .all(|i| !first.moves[0].moved.contains(i)),
            "{:?} / {:?}",
            retry.moves[0].moved,
            first.moves[0].moved
        );
    }

    #[test]
    fn malformed_inputs_are_balanced_not_a_panic() {
        assert_eq!(first_try(&[], &[], &[]), Proposal::Balanced);
        assert_eq!(
            first_try(&[7, 7], &[1.0], &[true, true]),
            Proposal::Balanced
        );
        assert_eq!(
            first_try(&[0, 1], &[f64::NAN, -5.0], &[true, true]),
            Proposal::Balanced
        );
        let rules = StepRules {
            max_share: 7.0,
            min_gain: 0.1,
        };
        let p = propose(
            &default_table(4, 2),
            &[100.0, 0.0],
            &[true; 2],
            &[],
            0,
            rules,
        );
        assert!(
            step(p).moves[0].moved.len() < 2,
            "never all of a queue's entries"
        );
    }

    #[test]
    fn a_move_that_levelled_its_queues_is_kept() {
        let table = default_table(128, 4);
        let before = [500.0, 480.0, 10.0, 10.0];
        let s = step(first_try(&table, &before, &[true; 4]));
        let after = [260.0, 240.0, 255.0, 245.0];
        for m in &s.moves {
            assert_eq!(
                judge(m, &before, &after, StepRules::default()),
                StepVerdict::Keep
            );
        }
        assert_eq!(
            revert(&table, &s, &[StepVerdict::Keep, StepVerdict::Keep]),
            None
        );
    }

    #[test]
    fn moving_the_elephant_or_nothing_is_reverted_and_only_that_move() {
        let table = default_table(128, 4);
        let before = [500.0, 480.0, 10.0, 10.0];
        let s = step(first_try(&table, &before, &[true; 4]));
        // Queue 0's heavy bucket moved to queue 2; queue 1's moved entries were empty.
        let after = [5.0, 478.0, 505.0, 12.0];
        let rules = StepRules::default();
        let verdicts = [
            judge(&s.moves[0], &before, &after, rules),
            judge(&s.moves[1], &before, &after, rules),
        ];
        assert_eq!(
            verdicts,
            [StepVerdict::RevertMovedHot, StepVerdict::RevertNoEffect]
        );
        assert_eq!(revert(&table, &s, &verdicts), Some(table.clone()));
        assert_eq!(
            rates_after_verdicts(&before, &after, &s, &verdicts),
            before.to_vec()
        );
        // One kept, one reverted: only the reverted one's entries go back.
        let mixed = [StepVerdict::Keep, StepVerdict::RevertNoEffect];
        let undone = revert(&table, &s, &mixed).expect("a table to write");
        assert!(s.moves[0].moved.iter().all(|&i| undone[i] == 2));
        assert!(s.moves[1].moved.iter().all(|&i| undone[i] == 1));
    }

    /// Each queue's rate when bucket `i` carries `load[i]` and the table sends it to
    /// `table[i]`.
    fn queue_rates(table: &[u32], load: &[f64], queues: usize) -> Vec<f64> {
        let mut pps = vec![0.0; queues];
        for (i, &q) in table.iter().enumerate() {
            pps[q as usize] += load[i];
        }
        pps
    }

    /// Runs the lever against a known bucket load as the daemon would: a step, a
    /// measurement, the verdicts, and the reverted moves undone in the next step's write.
    /// Returns the table writes made, the busiest queue's share at the end, the queues'
    /// back-offs and the writes made when the busiest share first fell to 0.30 or less.
    fn converge(
        mut table: Vec<u32>,
        load: &[f64],
        queues: usize,
    ) -> (u32, f64, Vec<Backoff>, Option<u32>) {
        let rules = StepRules::default();
        let mut backoffs = vec![Backoff::default(); queues];
        let mut writes = 0;
        let mut rates = queue_rates(&table, load, queues);
        let mut undo_pending = false;
        let busiest = |table: &[u32]| {
            let pps = queue_rates(table, load, queues);
            pps.iter().copied().fold(0.0, f64::max) / pps.iter().sum::<f64>()
        };
        let mut reached = (busiest(&table) <= 0.30).then_some(0);
        for _ in 0..20 {
            let Proposal::Step(s) =
                propose(&table, &rates, &vec![true; queues], &backoffs, 0, rules)
            else {
                break;
            };
            writes += 1;
            undo_pending = false;
            let after = queue_rates(&s.table, load, queues);
            let verdicts: Vec<StepVerdict> = s
                .moves
                .iter()
                .map(|m| judge(m, &rates, &after, rules))
                .collect();
            for (m, v) in s.moves.iter().zip(&verdicts) {
                backoffs[m.from as usize].record(*v, 0, 0);
            }
            let next_rates = rates_after_verdicts(&rates, &after, &s, &verdicts);
            match revert(&table, &s, &verdicts) {
                Some(undone) => {
                    table = undone;
                    undo_pending = true;
                }
                None => table = s.table,
            }
            rates = next_rates;
            // An undo is written with the next step, or alone at the end.
            if reached.is_none() && busiest(&table) <= 0.30 {
                reached = Some(writes + u32::from(undo_pending));
            }
        }
        writes += u32::from(undo_pending);
        (writes, busiest(&table), backoffs, reached)
    }

    /// `flows` equal flows in buckets of a 128-entry table that sends everything to queues
    /// 0 and 1 (`ethtool -X DEV weight 1 1 0 0`, the lab's `skew-2of4`), buckets from a
    /// fixed pseudo-random sequence.
    fn skewed_flows(seed: u64, flows: usize) -> (Vec<u32>, Vec<f64>) {
        let table: Vec<u32> = (0..128).map(|i| i % 2).collect();
        let mut load = vec![0.0; 128];
        let mut x = seed;
        for _ in 0..flows {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            load[(x >> 57) as usize] += 1.0;
        }
        (table, load)
    }

    /// The lab target on a model of it: with many flows behind a table that fills
    /// 2 of 4 queues, the busiest queue's share falls from 0.5 to at most 0.30 within 3
    /// table writes, and the lever stops (it settles: at most 6 writes in all). With 64
    /// flows in 128 buckets (half the buckets empty) the even-load guess is cruder: 0.30
    /// within 3 writes in at least 45 of 50 hashes, and it still stops.
    #[test]
    fn two_of_four_skew_with_many_flows_spreads_within_three_writes() {
        for flows in [64, 256, 1024] {
            let mut met = 0;
            for seed in 0..50 {
                let (table, load) = skewed_flows(seed, flows);
                let (writes, busiest, _, reached) = converge(table, &load, 4);
                assert!(writes <= 6, "{flows} flows, seed {seed}: {writes} writes");
                if reached.is_some_and(|w| w <= 3) && busiest <= 0.30 {
                    met += 1;
                } else {
                    eprintln!(
                        "{flows} flows, seed {seed}: 0.30 after {reached:?} writes, {busiest:.3} at the end"
                    );
                }
            }
            let wanted = if flows < 256 { 45 } else { 50 };
            assert!(met >= wanted, "{flows} flows: {met} of 50");
        }
    }

    #[test]
    fn a_queue_that_gave_up_or_backs_off_says_so() {
        let table = default_table(128, 4);
        let pps = [500.0, 10.0, 10.0, 10.0];
        let gave_up = Backoff {
            reverts: MAX_REVERTS,
            until_ns: 0,
        };
        let rules = StepRules::default();
        assert_eq!(
            propose(&table, &pps, &[true; 4], &[gave_up], 5, rules),
            Proposal::GaveUp { queue: 0 }
        );
        let waiting = Backoff {
            reverts: 1,
            until_ns: 10,
        };
        assert_eq!(
            propose(&table, &pps, &[true; 4], &[waiting], 5, rules),
            Proposal::BackingOff { queue: 0 }
        );
    }

    #[test]
    fn one_elephant_is_left_to_rps_after_two_reverts() {
        // One heavy bucket on queue 0 and light ones everywhere.
        let table = default_table(128, 4);
        let mut load = vec![0.01; 128];
        load[8] = 100.0;
        let (writes, _, backoffs, _) = converge(table, &load, 4);
        assert!(backoffs[0].gave_up(), "{backoffs:?}");
        assert!(writes <= 3, "{writes} writes (2 steps, the last undone)");
    }

    #[test]
    fn reverts_back_off_and_then_give_up_to_rps() {
        let dwell = 10_000_000_000;
        let mut b = Backoff::default();
        assert!(b.may_step(0));
        b.record(StepVerdict::RevertMovedHot, 100, dwell);
        assert!(!b.may_step(100 + 2 * dwell - 1));
        assert!(b.may_step(100 + 2 * dwell));
        assert!(!b.gave_up());
        b.record(StepVerdict::RevertNoEffect, 200, dwell);
        assert!(b.gave_up());
        assert!(
            !b.may_step(u64::MAX),
            "no step after giving up: no oscillation"
        );
        b.record(StepVerdict::Keep, 300, dwell);
        assert_eq!(b, Backoff::default());
        // A huge dwell saturates instead of wrapping.
        b.record(StepVerdict::RevertNoEffect, u64::MAX - 1, u64::MAX);
        assert_eq!(b.until_ns, u64::MAX);
    }
}
