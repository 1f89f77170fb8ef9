//! The engine's tick on a simulated machine, with writers that fail on purpose: what each
//! kind of failed write leads to, and that a dry run and a settled machine write nothing.

use std::collections::BTreeMap;

use nix::errno::Errno;

use super::*;
use crate::sim::{NicSpec, Shape, Siblings, SimMachine};

/// A writer that records every write and fails those listed, with their errno.
#[derive(Default)]
struct Scripted {
    fail: BTreeMap<Knob, Errno>,
    writes: Vec<Knob>,
}

impl Writer for Scripted {
    fn write(&mut self, knob: &Knob, value: &KnobValue, _: u32) -> Result<Written, WriteFailure> {
        self.writes.push(knob.clone());
        match self.fail.get(knob) {
            Some(&errno) => Err(WriteFailure {
                knob: knob.clone(),
                kind: FailureKind::of_errno(knob, Some(errno)),
                errno: Some(errno as i32),
                message: format!("{errno:?}"),
            }),
            None => Ok(Written::Applied(value.clone())),
        }
    }

    fn read(&mut self, _: &Knob) -> Option<KnobValue> {
        None
    }
}

/// Eight CPUs, one 4-queue NIC with every queue vector on CPU 0 and traffic: the first
/// decision moves three vectors at once (placement rules).
fn stacked() -> (SimMachine, Engine) {
    stacked_on(8)
}

/// [`stacked`] on `cpus` CPUs.
fn stacked_on(cpus: u32) -> (SimMachine, Engine) {
    let mut sim = SimMachine::new(
        &Shape::new(1, cpus, 1, Siblings::Split),
        vec![NicSpec::physical("eth0", 0, 4)],
        7,
    );
    sim.pin_queues("eth0", &[0]);
    sim.set_rate("eth0", 900_000.0);
    let engine = Engine::new(Config::default(), machine_of(&sim), PolicyState::new());
    (sim, engine)
}

/// The model discovery would read from `sim` now.
fn machine_of(sim: &SimMachine) -> Machine {
    Machine {
        topology: sim.topology.clone(),
        inventory: sim.inventory(),
        warnings: Vec::new(),
    }
}

fn tick(engine: &mut Engine, sim: &mut SimMachine, writer: &mut dyn Writer) -> TickReport {
    let mut snapshot = sim.step();
    engine.tick(
        Sample {
            snapshot: &mut snapshot,
            interrupts: &mut || None,
        },
        writer,
    )
}

/// Runs [`stacked`] to its first decision with the first action's write failing with
/// `errno`: the machine, the engine, the writer (its log holds that tick's writes), the
/// failed knob and the tick's report.
fn first_write_fails(errno: Errno) -> (SimMachine, Engine, Scripted, Knob, TickReport) {
    let (mut sim, mut engine) = stacked();
    let mut writer = Scripted::default();
    tick(&mut engine, &mut sim, &mut writer);
    let plan = tick(&mut engine, &mut sim, &mut DryRun).plan;
    let failing = plan.actions[0].target.clone();
    writer.fail.insert(failing.clone(), errno);
    let report = tick(&mut engine, &mut sim, &mut writer);
    (sim, engine, writer, failing, report)
}

fn reaction(outcome: &Outcome) -> Option<Reaction> {
    match outcome {
        Outcome::Failed { reaction, .. } => Some(*reaction),
        _ => None,
    }
}

#[test]
fn the_first_sample_is_a_baseline_and_the_second_decides_and_writes() {
    let (mut sim, mut engine) = stacked();
    let mut writer = Scripted::default();
    assert_eq!(
        tick(&mut engine, &mut sim, &mut writer).kind,
        TickKind::Baseline
    );
    let report = tick(&mut engine, &mut sim, &mut writer);
    assert_eq!(report.kind, TickKind::Decided);
    assert_eq!(report.plan.actions.len(), 3, "{}", report.plan);
    assert!(report.outcomes.iter().all(|o| *o == Outcome::Applied));
    // What was written is now the engine's current value and the policy's own.
    for action in &report.plan.actions {
        assert_eq!(
            engine.placement().holds(&action.target, &action.new),
            Some(true)
        );
        assert_eq!(engine.policy().written(&action.target), Some(&action.new));
    }
}

#[test]
fn a_dry_run_decides_the_same_and_remembers_no_write() {
    let (mut sim, mut engine) = stacked();
    tick(&mut engine, &mut sim, &mut DryRun);
    let report = tick(&mut engine, &mut sim, &mut DryRun);
    assert_eq!(report.plan.actions.len(), 3);
    assert!(report.outcomes.iter().all(|o| *o == Outcome::DryRun));
    assert!(report.outcomes.iter().all(Outcome::counts_as_action));
    for action in &report.plan.actions {
        assert_eq!(engine.policy().written(&action.target), None);
    }
}

#[test]
fn a_managed_irq_is_given_up_and_never_tried_again() {
    let (mut sim, mut engine, mut writer, managed, report) = first_write_fails(Errno::EIO);
    assert_eq!(reaction(&report.outcomes[0]), Some(Reaction::GivenUp));
    assert!(engine.policy().failed(&managed).is_some());
    writer.writes.clear();
    for _ in 0..20 {
        tick(&mut engine, &mut sim, &mut writer);
    }
    assert!(!writer.writes.contains(&managed), "{:?}", writer.writes);
}

/// An IRQ whose write failed with EIO while the NIC was being removed (procfs answers EIO
/// for an entry being taken down, the errno of a managed IRQ) is not given up for good: once
/// a rediscovery no longer finds it, what was learnt of it is forgotten, and the same
/// number coming back with the NIC may be written again. One that is still there stays
/// given up across rediscoveries.
#[test]
fn a_given_up_irq_that_vanishes_is_forgotten() {
    let (_sim, mut engine, _writer, failed, _) = first_write_fails(Errno::EIO);
    let Knob::IrqAffinity { irq } = failed else {
        panic!("not an IRQ: {failed}")
    };
    let same = engine.machine().clone();
    engine.replace_machine(same);
    assert!(!engine.may_try(&failed, u64::MAX));
    let mut without = engine.machine().clone();
    without.inventory.irqs.retain(|i| i.irq != irq);
    assert!(
        engine.policy().failed(&failed).is_some(),
        "still there: still failed"
    );
    let found_again = engine.replace_machine(without);
    // A failure of the old IRQ does not freeze the new one (the policy once kept it after
    // the retries forgot it, so the number that came back was never placed again).
    assert!(engine.policy().failed(&failed).is_none());
    engine.replace_machine(found_again);
    assert!(engine.may_try(&failed, 0));
}

#[test]
fn a_transient_failure_backs_off_then_is_tried_again() {
    let (mut sim, mut engine, mut writer, busy, report) = first_write_fails(Errno::EBUSY);
    assert_eq!(reaction(&report.outcomes[0]), Some(Reaction::Retry));
    writer.fail.clear();
    writer.writes.clear();
    // The simulated ticks are 1 s apart: the first retry waits 2 s, not every tick.
    let report = tick(&mut engine, &mut sim, &mut writer);
    assert!(!writer.writes.contains(&busy));
    assert!(
        report.outcomes.contains(&Outcome::Deferred),
        "{:?}",
        report.outcomes
    );
    for _ in 0..3 {
        tick(&mut engine, &mut sim, &mut writer);
    }
    assert!(writer.writes.contains(&busy), "retried after the backoff");
}

#[test]
fn a_vanished_target_drops_the_rest_of_the_plan_and_asks_for_rediscovery() {
    let (_, _, writer, _, report) = first_write_fails(Errno::ENOENT);
    assert!(report.rediscover);
    assert_eq!(
        writer.writes.len(),
        1,
        "nothing written after the vanished target"
    );
    assert!(report.outcomes[1..].iter().all(|o| *o == Outcome::Dropped));
}

#[test]
fn a_refused_permission_stops_writing() {
    let (_, _, _, _, report) = first_write_fails(Errno::EACCES);
    assert_eq!(reaction(&report.outcomes[0]), Some(Reaction::StopWriting));
}

/// Stopping is the engine's, not the writer's: after a write that was not allowed, no later
/// action of that tick nor of a later one reaches the writer; each is a dry run, and the
/// engine says why it writes nothing.
#[test]
fn after_a_refused_permission_the_writer_is_not_asked_again() {
    let (mut sim, mut engine, mut writer, refused, report) = first_write_fails(Errno::EACCES);
    assert_eq!(
        writer.writes,
        vec![refused],
        "nothing written after the refusal"
    );
    assert!(report.outcomes[1..].iter().all(|o| *o == Outcome::DryRun));
    assert_eq!(engine.writing_stopped(), Some("EACCES"));
    writer.fail.clear();
    writer.writes.clear();
    for _ in 0..5 {
        tick(&mut engine, &mut sim, &mut writer);
    }
    assert!(writer.writes.is_empty(), "{:?}", writer.writes);
}

/// A driver that is told at the start not to write (`--dry-run`, not root) gets the same:
/// every action a dry run, the writer never asked.
#[test]
fn an_engine_told_to_stop_writing_never_asks_the_writer() {
    let (mut sim, mut engine) = stacked();
    engine.stop_writing("--dry-run");
    let mut writer = Scripted::default();
    tick(&mut engine, &mut sim, &mut writer);
    let report = tick(&mut engine, &mut sim, &mut writer);
    assert_eq!(report.plan.actions.len(), 3);
    assert!(report.outcomes.iter().all(|o| *o == Outcome::DryRun));
    assert!(writer.writes.is_empty());
    assert_eq!(engine.writing_stopped(), Some("--dry-run"));
}

#[test]
fn a_settled_idle_machine_skips_the_policy() {
    let (mut sim, mut engine) = stacked();
    sim.set_rate("eth0", 0.0);
    let mut writer = Scripted::default();
    let kinds: Vec<TickKind> = (0..12)
        .map(|_| tick(&mut engine, &mut sim, &mut writer).kind)
        .collect();
    assert_eq!(kinds[0], TickKind::Baseline);
    assert_eq!(kinds.last(), Some(&TickKind::Skipped), "{kinds:?}");
}

#[test]
fn a_write_of_the_value_already_there_is_not_made() {
    let (mut sim, mut engine) = stacked();
    let mut writer = Scripted::default();
    tick(&mut engine, &mut sim, &mut writer);
    let mut action = tick(&mut engine, &mut sim, &mut DryRun).plan.actions[0].clone();
    // The IRQ's mask as it is now (`3 -> 3`, as a stale effective affinity once caused).
    action.new = engine.placement().value(&action.target).unwrap();
    let outcome = engine.carry_out(&action, &mut writer);
    assert_eq!(outcome, Outcome::Unchanged);
    assert!(!outcome.was_attempted() && !outcome.counts_as_action());
    assert!(writer.writes.is_empty(), "{:?}", writer.writes);
}

/// Under saturation a NAPI keeps polling where it ran: vectors moved off CPU 0 whose
/// interrupts then stop while their queues keep receiving are found not to have moved,
/// their work stays counted on CPU 0, they are not moved again (a note says why), RPS
/// takes their queues, and the marks go when the queues fall idle.
#[test]
fn a_move_whose_vector_falls_silent_while_its_queue_receives_did_not_take_effect() {
    // Four CPUs, as the lab's guest: no free CPU for queue 0's vector to go to.
    let (mut sim, mut engine) = stacked_on(4);
    let mut writer = Scripted::default();
    tick(&mut engine, &mut sim, &mut writer);
    let report = tick(&mut engine, &mut sim, &mut writer);
    let moved: Vec<u32> = report
        .plan
        .actions
        .iter()
        .filter_map(|a| match a.target {
            Knob::IrqAffinity { irq } => Some(irq),
            _ => None,
        })
        .collect();
    assert_eq!(moved.len(), 3, "{}", report.plan);
    // The simulated machine is not written (the writer only records), so its queues keep
    // receiving; the moved vectors' interrupt counts are held still, as a saturated NAPI
    // that never re-arms leaves them.
    let mut held: BTreeMap<u32, u64> = BTreeMap::new();
    let silent_tick = |engine: &mut Engine, sim: &mut SimMachine, held: &mut BTreeMap<u32, u64>| {
        let mut snapshot = sim.step();
        for &irq in &moved {
            let total = &mut snapshot.irq_totals[irq as usize];
            *total = *held.entry(irq).or_insert(*total);
        }
        engine.tick(
            Sample {
                snapshot: &mut snapshot,
                interrupts: &mut || None,
            },
            &mut Scripted::default(),
        )
    };
    let mut verdicts = Vec::new();
    let mut last = None;
    let mut later_moves = Vec::new();
    for _ in 0..4 {
        let report = silent_tick(&mut engine, &mut sim, &mut held);
        verdicts.extend(
            report
                .moves
                .iter()
                .filter(|v| moved.contains(&v.irq))
                .cloned(),
        );
        // Moves onto the CPUs the silent vectors' masks hold.
        later_moves.extend(
            report
                .plan
                .actions
                .iter()
                .filter(|a| match (&a.target, &a.new) {
                    (Knob::IrqAffinity { .. }, KnobValue::Cpus(cpus)) => {
                        cpus.iter().any(|c| (1..=3).contains(&c))
                    }
                    _ => false,
                })
                .map(|a| format!("{} -> {} ({})", a.target, a.new, a.reason.text)),
        );
        last = Some(report);
    }
    // Nothing moves in behind them while their masks hold CPUs 1-3 (their work counted
    // on CPU 0): a lab run moved queue 0's vector onto one, and back when they fired.
    assert!(later_moves.is_empty(), "{later_moves:?}");
    assert_eq!(verdicts.len(), 3, "{verdicts:?}");
    for verdict in &verdicts {
        assert!(moved.contains(&verdict.irq));
        assert_eq!(verdict.from, 0);
        assert!(
            matches!(verdict.effect, MoveEffect::NoEffect { queue_pps } if queue_pps > 100_000.0),
            "{verdict:?}"
        );
        assert_eq!(engine.placement().irqs[&verdict.irq].work_stays_on, Some(0));
    }
    let plan = &last.as_ref().map(|r| r.plan.clone()).unwrap_or_default();
    assert!(
        plan.actions
            .iter()
            .all(|a| !matches!(a.target, Knob::IrqAffinity { irq } if moved.contains(&irq))),
        "{plan}"
    );
    assert_eq!(
        plan.notes
            .iter()
            .filter(|n| n.kind == crate::policy::NoteKind::MoveNoEffect)
            .count(),
        3,
        "{plan}"
    );
    // RPS went on for their queues (queues_whose_moves_did_not_take_effect_get_rps), so
    // their packets are processed where RPS sends them and whether their work followed
    // the vectors cannot be told: the marks stay while the queues receive, even once the
    // vectors fire on their new CPUs, and go when the queues fall idle.
    for &irq in &moved {
        let knob = Knob::IrqAffinity { irq };
        let value = engine.placement().value(&knob).expect("a mask");
        sim.write(&knob, &value)
            .expect("the simulated machine takes it");
    }
    for _ in 0..3 {
        let report = tick(&mut engine, &mut sim, &mut DryRun);
        assert!(report.moves.is_empty(), "{:?}", report.moves);
    }
    assert!(
        moved
            .iter()
            .all(|irq| engine.placement().irqs[irq].work_stays_on == Some(0))
    );
    sim.set_rate("eth0", 0.0);
    for _ in 0..6 {
        tick(&mut engine, &mut sim, &mut DryRun);
    }
    assert!(
        moved
            .iter()
            .all(|irq| engine.placement().irqs[irq].work_stays_on.is_none())
    );
}

/// A tick whose writes go into the simulated machine, which then moves the work.
fn tick_written(engine: &mut Engine, sim: &mut SimMachine) -> TickReport {
    let mut snapshot = sim.step();
    engine.tick(
        Sample {
            snapshot: &mut snapshot,
            interrupts: &mut || None,
        },
        &mut crate::sim::steerd::SimWriter { sim },
    )
}

/// A move whose vector keeps firing and whose work follows it is found to have taken
/// effect, once per move.
#[test]
fn a_move_whose_vector_keeps_firing_took_effect() {
    let (mut sim, mut engine) = stacked();
    let mut verdicts: Vec<MoveVerdict> = Vec::new();
    let mut moves = 0;
    for _ in 0..8 {
        let report = tick_written(&mut engine, &mut sim);
        moves += report
            .plan
            .actions
            .iter()
            .filter(|a| matches!(a.target, Knob::IrqAffinity { .. }))
            .count();
        verdicts.extend(report.moves);
    }
    assert!(
        moves >= 3,
        "the first decision's three moves at least: {moves}"
    );
    assert_eq!(verdicts.len(), moves, "{verdicts:?}");
    assert!(
        verdicts
            .iter()
            .all(|v| matches!(v.effect, MoveEffect::TookEffect { .. })),
        "{verdicts:?}"
    );
}

/// A move whose vector fires on its new CPU while the queue's work stays on the old one
/// (QEMU's igb under saturation: the interrupts found the NAPI still scheduled on CPU 0)
/// did not take effect: the machine is not written, so the work stays on CPU 0 while the
/// vectors' interrupt counts go on rising.
#[test]
fn a_move_whose_vector_fires_but_whose_work_stays_did_not_take_effect() {
    let (mut sim, mut engine) = stacked();
    let mut writer = Scripted::default();
    let verdicts: Vec<MoveVerdict> = (0..12)
        .flat_map(|_| tick(&mut engine, &mut sim, &mut writer).moves)
        .collect();
    assert!(!verdicts.is_empty());
    assert!(
        verdicts
            .iter()
            .all(|v| matches!(v.effect, MoveEffect::NoEffect { .. })),
        "{verdicts:?}"
    );
}

/// Vectors moved off a hot CPU whose work stayed there (their moves did not take effect)
/// leave RPS as the lever: each such queue is turned on over the other cores, although
/// none of them alone carries the CPU's heat (lab, igb on 6.1, `sat-cpu0`: CPU 0 at 0.99
/// with "no IRQ move or RPS change is predicted to help" before).
#[test]
fn queues_whose_moves_did_not_take_effect_get_rps() {
    let (mut sim, mut engine) = stacked_on(4);
    let mut writer = Scripted::default();
    let mut rps_on = Vec::new();
    for _ in 0..8 {
        let report = tick(&mut engine, &mut sim, &mut writer);
        rps_on.extend(report.plan.actions.iter().filter_map(|a| match a.target {
            Knob::RpsCpus { queue, .. } if a.reason.kind == crate::policy::ReasonKind::RpsOn => {
                Some(queue)
            }
            _ => None,
        }));
    }
    rps_on.sort();
    assert_eq!(rps_on, vec![1, 2, 3]);
}

/// A device made anew (its driver put every vector on a wide mask again): the engine takes
/// over each of its vectors that no longer holds what steerd wrote, and the one it never
/// wrote that changed with the reset, whose value before is kept as the original; the
/// policy forgets who set them. Values the reset left alone are not taken.
#[test]
fn a_device_made_anew_is_taken_over_by_the_engine() {
    let (mut sim, mut engine) = stacked();
    let mut writer = Scripted::default();
    tick(&mut engine, &mut sim, &mut writer);
    let report = tick(&mut engine, &mut sim, &mut writer);
    let written: Vec<Knob> = report
        .plan
        .actions
        .iter()
        .map(|a| a.target.clone())
        .collect();
    assert_eq!(written.len(), 3);
    let before = engine.machine().inventory.clone();
    let mut renewed = engine.machine().clone();
    let wide = CpuSet::parse_list("0-7").unwrap();
    let mut reset = Vec::new();
    for irq in renewed
        .inventory
        .irqs
        .iter_mut()
        .filter(|i| i.device.as_deref() == Some("eth0") && i.queue.is_some())
    {
        irq.affinity = Some(wide.clone());
        irq.effective_affinity = None;
        reset.push(Knob::IrqAffinity { irq: irq.irq });
    }
    assert!(reset.len() > written.len());
    engine.replace_machine(renewed);
    let taken = engine.take_over_renewed_device(&before, "eth0", &|_| None);
    let knobs: Vec<Knob> = taken.iter().map(|t| t.knob.clone()).collect();
    reset.sort();
    assert_eq!(knobs, reset);
    for t in &taken {
        assert_eq!(engine.policy().written(&t.knob), None);
        let was = Placement::from_inventory(&before).value(&t.knob);
        if written.contains(&t.knob) {
            assert_eq!(t.original, None, "{}", t.knob);
        } else {
            assert_eq!(
                t.original.as_ref().map(|(v, _)| v),
                was.as_ref(),
                "{}",
                t.knob
            );
        }
    }
}

/// The driver's placement, written while the queue was idle, is found pending at
/// discovery (mask CPU 2, effective CPU 3): the burst's first interrupt lands on CPU 3 and a
/// saturated NAPI stays there. steerd checks it like its own moves, counts the queue's work
/// on CPU 3 once the vector stays silent, and a write of its mask before then is checked
/// from CPU 3, where its work would stay.
#[test]
fn a_placement_found_pending_at_discovery_is_checked_like_a_move() {
    let mut sim = queue_per_cpu();
    let pending = sim.irq_of("eth0", 2).expect("queue 2's vector");
    sim.stale_effective = true;
    sim.set_reported_effective(pending, 3);
    sim.set_rate("eth0", 0.0);
    let mut engine = Engine::new(Config::default(), machine_of(&sim), PolicyState::new());
    let knob = Knob::IrqAffinity { irq: pending };
    assert_eq!(engine.queue_vector_cpu(&knob), Some((pending, 3)));
    let mut idle_count = 0;
    for _ in 0..3 {
        let mut snapshot = sim.step();
        idle_count = snapshot.irq_totals[pending as usize];
        let report = engine.tick(
            Sample {
                snapshot: &mut snapshot,
                interrupts: &mut || None,
            },
            &mut DryRun,
        );
        assert!(report.moves.is_empty(), "{:?}", report.moves);
    }
    // A rediscovery that still reads it pending keeps the check it has.
    engine.replace_machine(machine_of(&sim));
    assert_eq!(engine.queue_vector_cpu(&knob), Some((pending, 3)));
    sim.set_rate("eth0", 900_000.0);
    let mut verdicts = Vec::new();
    for _ in 0..4 {
        let mut snapshot = sim.step();
        // One interrupt, on CPU 3, and none after it: the NAPI polls on there.
        snapshot.irq_totals[pending as usize] = idle_count + 1;
        let report = engine.tick(
            Sample {
                snapshot: &mut snapshot,
                interrupts: &mut || None,
            },
            &mut DryRun,
        );
        verdicts.extend(report.moves);
    }
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    let verdict = &verdicts[0];
    assert_eq!((verdict.irq, verdict.from, verdict.to), (pending, 3, 2));
    assert!(verdict.pending, "{verdict:?}");
    assert!(
        matches!(verdict.effect, MoveEffect::NoEffect { .. }),
        "{verdict}"
    );
    let online = &engine.machine().topology.online;
    assert_eq!(engine.placement().irqs[&pending].cpu(online), Some(3));
}

/// A placement whose effective affinity is its mask, or a vector that is not a queue's,
/// is not checked.
#[test]
fn only_a_queue_vector_whose_effective_cpu_differs_is_found_pending() {
    let mut sim = queue_per_cpu();
    let disk = sim.add_other_irq("nvme0q1", false, CpuSet::from_iter([1]), 100.0);
    sim.stale_effective = true;
    sim.set_reported_effective(disk, 2);
    let engine = Engine::new(Config::default(), machine_of(&sim), PolicyState::new());
    assert!(engine.moves.is_empty());
    // The same machine with a queue vector's effective CPU off its mask is.
    let queue = sim.irq_of("eth0", 1).expect("queue 1's vector");
    sim.set_reported_effective(queue, 0);
    let engine = Engine::new(Config::default(), machine_of(&sim), PolicyState::new());
    assert_eq!(engine.moves.pending_from(queue), Some(0));
    assert_eq!(engine.moves.pending_from(disk), None);
}

/// Four CPUs and one 4-queue NIC whose queue N's vector is on CPU N, as virtio-net places
/// them at probe.
fn queue_per_cpu() -> SimMachine {
    let mut sim = SimMachine::new(
        &Shape::new(1, 4, 1, Siblings::Split),
        vec![NicSpec::physical("eth0", 0, 4)],
        7,
    );
    sim.pin_queues("eth0", &[0, 1, 2, 3]);
    sim
}
