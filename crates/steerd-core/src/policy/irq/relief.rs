//! Relief, the load-based IRQ rule: from a confirmed hot CPU, move queue vectors, heaviest
//! first, to the coolest CPU that breaks no placement rule, when the predicted drop of the
//! hot CPU's work is at least `hysteresis.min_gain` of it and each target ends up below the
//! source.
//!
//! It is a module of its own because it is the one IRQ rule driven by load rather than by
//! counts: it plans a batch of moves per hot CPU, judges the batch as a whole and undoes it
//! when it does not pay, none of which the placement rules in [`super`] need. It moves
//! vectors through the same [`move_vector`] as they do, and picks targets with the same
//! occupancy rules ([`free_core`]).

use std::collections::HashMap;

use super::{free_core, move_vector};
use crate::cpuset::CpuSet;
use crate::knob::Knob;
use crate::policy::context::Planner;
use crate::policy::hysteresis::{Heat, kilo};
use crate::policy::plan::ReasonKind;

/// One queue vector moved off a hot CPU in the batch being planned: what it takes to undo
/// the move.
#[derive(Debug, Clone, Copy)]
struct PlannedMove {
    slot: usize,
    /// The hot CPU it left.
    from: u32,
    /// Its work, moved with it.
    weight: f64,
}

/// The plan as it stood before a hot CPU's batch: where to roll back to when the batch
/// does not pay.
#[derive(Debug, Clone)]
struct Checkpoint {
    /// The hot CPU's work before the batch.
    work_before: f64,
    actions_before: usize,
    budget_before: u32,
    /// Whether an earlier rule of this tick already moved work off the hot CPU.
    was_relieved: bool,
    /// The CPUs whose streaks this plan restarts, before the batch: an abandoned batch
    /// changes no CPU's work, so it must not restart any streak (it did, and a CPU whose
    /// moves were abandoned tick after tick never had a hot spell longer than one tick).
    touched_before: CpuSet,
}

impl Checkpoint {
    fn take(planner: &Planner, hot_cpu: u32) -> Self {
        Checkpoint {
            work_before: planner.work_of(hot_cpu),
            actions_before: planner.actions.len(),
            budget_before: planner.budget,
            was_relieved: planner.relieved.contains(hot_cpu),
            touched_before: planner.touched.clone(),
        }
    }
}

/// What relieving one hot CPU left for the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Go on with the next hot CPU.
    Continue,
    /// The action budget is spent: the remaining hot CPUs wait for the next tick.
    BudgetSpent,
}

/// Moves queue vectors off confirmed hot CPUs: those in distress (`distress: true`, the
/// fast path) or the others.
pub fn relieve(planner: &mut Planner, distress: bool) {
    let hot_cpus = hot_cpus_busiest_first(planner, distress);
    if hot_cpus.is_empty() {
        return;
    }
    let mut movable = movable_vectors_by_cpu(planner, &hot_cpus);
    for hot_cpu in hot_cpus {
        let Some(candidates) = movable.remove(&hot_cpu) else {
            continue;
        };
        if relieve_cpu(planner, hot_cpu, candidates) == Outcome::BudgetSpent {
            return;
        }
    }
}

/// The confirmed hot CPUs whose distress is `distress`, the busiest first.
fn hot_cpus_busiest_first(planner: &Planner, distress: bool) -> Vec<u32> {
    let mut hot_cpus: Vec<u32> = (0..planner.heat.len() as u32)
        .filter(|&cpu| {
            let heat = planner.heat_of(cpu);
            heat.hot && heat.distress == distress
        })
        .collect();
    hot_cpus.sort_by(|a, b| planner.work_of(*b).total_cmp(&planner.work_of(*a)));
    hot_cpus
}

/// The queue vectors relief may move, by the hot CPU they fire on: those with measured
/// work that nothing blocks and no earlier rule of this tick moved.
fn movable_vectors_by_cpu(planner: &Planner, hot_cpus: &[u32]) -> HashMap<u32, Vec<usize>> {
    let hot_set: CpuSet = hot_cpus.iter().copied().collect();
    let mut on_cpu: HashMap<u32, Vec<usize>> = HashMap::new();
    for (slot, view) in planner.irqs.iter().enumerate() {
        if view.queue_vector
            && view.cpu.is_some_and(|cpu| hot_set.contains(cpu))
            && view.blocker.is_none()
            && view.weight > 0.0
            && !planner.moved.contains(&view.irq.irq)
            && let Some(cpu) = view.cpu
        {
            on_cpu.entry(cpu).or_default().push(slot);
        }
    }
    on_cpu
}

/// Relieves one hot CPU: plans the moves off it greedily, heaviest vector first, each one
/// lowering the pair's maximum, and keeps them only if together they cut its work by
/// `min_gain` (many small vectors stacked on one CPU move together or not at all).
fn relieve_cpu(planner: &mut Planner, hot_cpu: u32, mut candidates: Vec<usize>) -> Outcome {
    candidates.sort_by(|a, b| planner.irqs[*b].weight.total_cmp(&planner.irqs[*a].weight));
    let heat = planner.heat_of(hot_cpu);
    let checkpoint = Checkpoint::take(planner, hot_cpu);
    let batch = plan_batch(planner, hot_cpu, &heat, candidates);
    if batch.is_empty() {
        return Outcome::Continue;
    }
    let gain = checkpoint.work_before - peak_work_after(planner, hot_cpu, &batch);
    if gain < planner.config.hysteresis.min_gain * checkpoint.work_before {
        abandon_batch(planner, hot_cpu, &heat, &batch, &checkpoint, gain);
        return Outcome::Continue;
    }
    explain_batch(planner, hot_cpu, batch.len(), gain, &checkpoint);
    if planner.budget == 0 {
        planner.waiting.push(format!(
            "more moves off CPU {hot_cpu} wait for the next tick (hysteresis.max_actions_per_tick = {})",
            planner.config.hysteresis.max_actions_per_tick
        ));
        return Outcome::BudgetSpent;
    }
    Outcome::Continue
}

/// Moves each candidate (heaviest first) off `hot_cpu` to its [`relief_target`] while the
/// budget lasts, when it has dwelt long enough and the target ends up below the hot CPU;
/// returns the moves made, in order.
fn plan_batch(
    planner: &mut Planner,
    hot_cpu: u32,
    heat: &Heat,
    candidates: Vec<usize>,
) -> Vec<PlannedMove> {
    let dwell = planner.config.hysteresis.irq_dwell.as_nanos() as u64;
    let kind = if heat.distress {
        ReasonKind::Distress
    } else {
        ReasonKind::HotCpu
    };
    let mut batch = Vec::new();
    for slot in candidates {
        let irq = planner.irqs[slot].irq.irq;
        if !planner
            .state
            .dwelt(&Knob::IrqAffinity { irq }, planner.now_ns, dwell)
        {
            planner.waiting.push(format!(
                "irq {irq} ({}) on hot CPU {hot_cpu}: moved less than hysteresis.irq_dwell ago",
                planner.serves(slot)
            ));
            continue;
        }
        let weight = planner.irqs[slot].weight;
        let Some(target) = relief_target(planner, slot, hot_cpu) else {
            continue;
        };
        if target_would_overtake(planner, hot_cpu, target, weight) {
            continue;
        }
        if planner.budget == 0 {
            break;
        }
        planner.budget -= 1;
        let why = format!(
            "{}; its queue brings {} pkt/s there",
            heat.describe(hot_cpu, planner.config),
            kilo(weight)
        );
        move_vector(planner, slot, target, kind, why);
        batch.push(PlannedMove {
            slot,
            from: hot_cpu,
            weight,
        });
    }
    batch
}

/// Whether `target` with `weight` more work would carry at least as much as `hot_cpu`
/// carries now: such a move would not lower the larger of the two.
fn target_would_overtake(planner: &Planner, hot_cpu: u32, target: u32, weight: f64) -> bool {
    planner.work_of(target) + weight >= planner.work_of(hot_cpu)
}

/// The batch's outcome: the most work on `hot_cpu` or any CPU the batch moved a vector to.
fn peak_work_after(planner: &Planner, hot_cpu: u32, batch: &[PlannedMove]) -> f64 {
    batch
        .iter()
        .filter_map(|planned| planner.irqs[planned.slot].cpu)
        .map(|cpu| planner.work_of(cpu))
        .fold(planner.work_of(hot_cpu), f64::max)
}

/// Undoes a batch that cut `hot_cpu`'s work by less than `min_gain`, and says so.
fn abandon_batch(
    planner: &mut Planner,
    hot_cpu: u32,
    heat: &Heat,
    batch: &[PlannedMove],
    checkpoint: &Checkpoint,
    gain: f64,
) {
    undo_moves(planner, batch, checkpoint);
    if !checkpoint.was_relieved {
        planner.relieved.remove(hot_cpu);
    }
    planner.waiting.push(format!(
        "{}; moving its IRQs would cut its work by only {:.0}% (hysteresis.min_gain {:.0}%)",
        heat.describe(hot_cpu, planner.config),
        100.0 * gain / checkpoint.work_before.max(f64::MIN_POSITIVE),
        100.0 * planner.config.hysteresis.min_gain
    ));
}

/// Undoes the moves planned by [`move_vector`] in `batch` (last first), with their actions
/// and budget.
fn undo_moves(planner: &mut Planner, batch: &[PlannedMove], checkpoint: &Checkpoint) {
    for planned in batch.iter().rev() {
        let slot = planned.slot;
        let Some(target) = planner.irqs[slot].cpu else {
            continue;
        };
        planner.release(slot);
        planner.shift_work(Some(target), Some(planned.from), planned.weight);
        planner.irqs[slot].cpu = Some(planned.from);
        planner.claim(slot);
        let irq = planner.irqs[slot].irq.irq;
        planner.moved.remove(&irq);
    }
    planner.actions.truncate(checkpoint.actions_before);
    planner.budget = checkpoint.budget_before;
    planner.touched = checkpoint.touched_before.clone();
}

/// Appends to the reason of each action of a kept batch what the batch as a whole is
/// predicted to do for `hot_cpu`.
fn explain_batch(
    planner: &mut Planner,
    hot_cpu: u32,
    moves: usize,
    gain: f64,
    checkpoint: &Checkpoint,
) {
    let total = format!(
        "; these {moves} moves are predicted to cut CPU {hot_cpu}'s work by {:.0}%",
        100.0 * gain / checkpoint.work_before.max(f64::MIN_POSITIVE)
    );
    for action in &mut planner.actions[checkpoint.actions_before..] {
        action.reason.text.push_str(&total);
    }
}

/// The coolest CPU for a queue vector leaving `hot_cpu` that breaks no placement rule: on
/// its device's node, not `hot_cpu`, with none of the device's vectors, on a core without
/// one while the device has a free core, on an empty core while any is free. Ties go to
/// the core with fewer vectors, then the lower CPU.
fn relief_target(planner: &Planner, slot: usize, hot_cpu: u32) -> Option<u32> {
    let device_index = planner.irqs[slot].device?;
    let device = &planner.devices[device_index];
    let device_has_free_core = free_core(planner, device_index, false).is_some();
    let any_core_free = free_core(planner, device_index, true).is_some();
    // (core load, vectors on the core, CPU): the smallest wins.
    let mut best: Option<(f64, u16, u32)> = None;
    for cpu in device.local.iter() {
        if cpu == hot_cpu || device.on_cpu(cpu) > 0 {
            continue;
        }
        let core = planner.core(cpu);
        if device_has_free_core && device.on_core(core) > 0 {
            continue;
        }
        let vectors_on_core = planner
            .core_vectors
            .get(core as usize)
            .copied()
            .unwrap_or(0);
        if any_core_free && vectors_on_core > 0 {
            continue;
        }
        let key = (planner.core_load(cpu), vectors_on_core, cpu);
        let better = best.is_none_or(|best_key| {
            key.0
                .total_cmp(&best_key.0)
                .then(key.1.cmp(&best_key.1))
                .then(key.2.cmp(&best_key.2))
                .is_lt()
        });
        if better {
            best = Some(key);
        }
    }
    best.map(|(_, _, cpu)| cpu)
}
