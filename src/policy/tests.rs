//! Policy rules on small simulated machines, one rule at a time.

use super::*;
use crate::config::{DeviceConfig, ExternalChange, RpsMode};
use crate::cpuset::CpuSet;
use crate::model::snapshot::Snapshot;
use crate::sim::{NicSpec, Shape, Siblings, SimMachine};

/// A machine, its load after `ticks` ticks of traffic, and the inputs for `decide`.
struct Bench {
    sim: SimMachine,
    inventory: Inventory,
    load: Load,
    config: Config,
    prev: Snapshot,
}

impl Bench {
    fn new(sim: SimMachine, config: Config) -> Self {
        Bench {
            inventory: sim.inventory(),
            prev: sim.snapshot(),
            load: Load::new(),
            config,
            sim,
        }
    }

    fn run(&mut self, ticks: u32) {
        for _ in 0..ticks {
            let now = self.sim.step();
            self.load
                .update(&self.prev, &now, self.config.load.smoothing);
            self.prev = now;
        }
    }

    fn decide(&self, state: &mut PolicyState) -> Plan {
        let placement = self.sim.placement();
        let input = DecideInput {
            topology: &self.sim.topology,
            inventory: &self.inventory,
            load: &self.load,
            config: &self.config,
            placement: &placement,
            now_ns: self.sim.now_ns(),
        };
        decide(&input, state)
    }

    fn apply(&mut self, plan: &Plan, state: &mut PolicyState) {
        for action in &plan.actions {
            if self.sim.write(&action.target, &action.new).is_ok() {
                state.record_applied(action, self.sim.now_ns());
            }
        }
    }
}

fn eight_cpus(nics: Vec<NicSpec>) -> SimMachine {
    SimMachine::new(&Shape::new(1, 8, 1, Siblings::Split), nics, 7)
}

#[test]
fn an_idle_machine_has_nothing_to_do_and_says_why() {
    let mut bench = Bench::new(
        eight_cpus(vec![NicSpec::physical("eth0", 0, 4)]),
        Config::default(),
    );
    bench.run(2);
    let plan = bench.decide(&mut PolicyState::new());
    assert!(plan.is_empty());
    let why = plan.idle_reason.as_deref().unwrap();
    assert!(why.contains("no CPU is hot"), "{why}");
    assert!(plan.to_string().starts_with("nothing to do: "));
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["actions"], serde_json::json!([]));
}

#[test]
fn decide_depends_only_on_its_inputs() {
    let mut sim = eight_cpus(vec![NicSpec::physical("eth0", 0, 4)]);
    sim.pin_queues("eth0", &[0]);
    sim.set_rate("eth0", 900_000.0);
    let mut bench = Bench::new(sim, Config::default());
    bench.run(3);
    let state = PolicyState::new();
    let first = bench.decide(&mut state.clone());
    let second = bench.decide(&mut state.clone());
    assert_eq!(first, second);
    assert_eq!(first.actions.len(), 3, "{first}");
}

#[test]
fn an_externally_changed_irq_is_respected_or_overridden_as_configured() {
    for policy in [ExternalChange::Respect, ExternalChange::Override] {
        let mut sim = eight_cpus(vec![NicSpec::physical("eth0", 0, 2)]);
        sim.set_rate("eth0", 100_000.0);
        let config = Config {
            on_external_change: policy,
            ..Config::default()
        };
        let mut bench = Bench::new(sim, config);
        let mut state = PolicyState::new();
        bench.run(1);
        // steerd put rx-1 on CPU 1 (where the driver had it) ...
        let irq = bench.sim.irq_of("eth0", 1).unwrap();
        let target = Target::IrqAffinity { irq };
        let ours = Action {
            target: target.clone(),
            serves: None,
            old: Value::Cpus(CpuSet::from_iter([1])),
            new: Value::Cpus(CpuSet::from_iter([1])),
            reason: Reason {
                kind: ReasonKind::StackedVectors,
                text: String::new(),
            },
            expected: String::new(),
        };
        state.record_applied(&ours, 0);
        // ... and someone stacked it on rx-0's CPU.
        bench
            .sim
            .write(&target, &Value::Cpus(CpuSet::from_iter([0])))
            .unwrap();
        bench.run(11); // past steerd's own dwell: only the external change can hold it back
        let plan = bench.decide(&mut state);
        let note = plan
            .notes
            .iter()
            .find(|n| n.kind == NoteKind::ExternalChange)
            .expect("reported");
        assert!(note.new && note.text.contains("irq"), "{}", note.text);
        let moved = plan.actions.iter().any(|a| a.target == target);
        assert_eq!(
            moved,
            policy == ExternalChange::Override,
            "{policy:?}: {plan}"
        );
        let again = bench.decide(&mut state);
        if policy == ExternalChange::Respect {
            assert!(
                again
                    .notes
                    .iter()
                    .any(|n| n.kind == NoteKind::ExternalChange && !n.new)
            );
        }
    }
}

#[test]
fn static_rps_uses_the_configured_cpus_less_forbidden_ones_with_rfs() {
    let mut config = Config::default();
    config.cpus.banned = CpuSet::from_iter([3]);
    config.devices.insert(
        "eth0".into(),
        DeviceConfig {
            rps: Some(RpsMode::Static),
            rps_cpus: Some(CpuSet::first_n(4)),
            ..DeviceConfig::default()
        },
    );
    let mut bench = Bench::new(eight_cpus(vec![NicSpec::physical("eth0", 0, 2)]), config);
    bench.run(1);
    let mut state = PolicyState::new();
    let plan = bench.decide(&mut state);
    let masks: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| matches!(a.target, Target::RpsCpus { .. }))
        .collect();
    assert_eq!(masks.len(), 2, "{plan}");
    for action in masks {
        assert_eq!(action.new, Value::Cpus(CpuSet::from_iter([0, 1, 2])));
        assert_eq!(action.reason.kind, ReasonKind::RpsStatic);
    }
    assert!(
        plan.actions
            .iter()
            .any(|a| a.target == Target::RpsSockFlowEntries && a.new == Value::Count(32768))
    );
    assert!(
        plan.actions
            .iter()
            .any(|a| matches!(a.target, Target::RpsFlowCnt { .. }) && a.new == Value::Count(16384))
    );
    bench.apply(&plan, &mut state);
    bench.run(1);
    assert!(
        bench.decide(&mut state).is_empty(),
        "static converges in one tick"
    );
}

#[test]
fn off_mode_clears_only_what_steerd_set() {
    let mut sim = eight_cpus(vec![
        NicSpec::physical("eth0", 0, 1),
        NicSpec::physical("eth1", 0, 1),
    ]);
    let admin = Value::Cpus(CpuSet::from_iter([4, 5]));
    let eth1 = Target::RpsCpus {
        device: "eth1".into(),
        queue: 0,
    };
    sim.write(&eth1, &admin).unwrap();
    let eth0 = Target::RpsCpus {
        device: "eth0".into(),
        queue: 0,
    };
    sim.write(&eth0, &Value::Cpus(CpuSet::from_iter([2, 3])))
        .unwrap();
    sim.pin_queues("eth1", &[1]);
    let mut config = Config::default();
    config.rps.mode = RpsMode::Off;
    let mut bench = Bench::new(sim, config);
    bench.run(1);
    let mut state = PolicyState::new();
    state.record_applied(
        &Action {
            target: eth0.clone(),
            serves: None,
            old: Value::Cpus(CpuSet::new()),
            new: Value::Cpus(CpuSet::from_iter([2, 3])),
            reason: Reason {
                kind: ReasonKind::RpsOn,
                text: String::new(),
            },
            expected: String::new(),
        },
        0,
    );
    let plan = bench.decide(&mut state);
    let targets: Vec<&Target> = plan.actions.iter().map(|a| &a.target).collect();
    assert_eq!(targets, vec![&eth0], "{plan}");
    assert_eq!(plan.actions[0].new, Value::Cpus(CpuSet::new()));
}

#[test]
fn rfs_without_its_global_table_is_a_note_not_an_error() {
    let mut sim = eight_cpus(vec![NicSpec::physical("eth0", 0, 1)]);
    sim.set_rate("eth0", 700_000.0);
    let mut bench = Bench::new(sim, Config::default());
    bench.run(1);
    let mut placement = bench.sim.placement();
    placement.rps_sock_flow_entries = None;
    let input = DecideInput {
        topology: &bench.sim.topology,
        inventory: &bench.inventory,
        load: &bench.load,
        config: &bench.config,
        placement: &placement,
        now_ns: bench.sim.now_ns(),
    };
    let plan = decide(&input, &mut PolicyState::new());
    assert!(
        plan.actions
            .iter()
            .any(|a| a.reason.kind == ReasonKind::RpsOn),
        "{plan}"
    );
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| a.target == Target::RpsSockFlowEntries)
    );
    assert!(
        plan.notes
            .iter()
            .any(|n| n.kind == NoteKind::RfsUnavailable)
    );
}

#[test]
fn the_action_budget_caps_load_driven_changes() {
    let mut sim = eight_cpus(vec![
        NicSpec::physical("eth0", 0, 1),
        NicSpec::physical("eth1", 0, 1),
    ]);
    sim.pin_queues("eth1", &[1]);
    sim.set_rate("eth0", 700_000.0);
    sim.set_rate("eth1", 700_000.0);
    let mut config = Config::default();
    config.hysteresis.max_actions_per_tick = 1;
    let mut bench = Bench::new(sim, config);
    bench.run(1);
    let plan = bench.decide(&mut PolicyState::new());
    let devices: std::collections::HashSet<String> = plan
        .actions
        .iter()
        .filter_map(|a| match &a.target {
            Target::RpsCpus { device, .. } => Some(device.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(devices.len(), 1, "{plan}");
    assert!(plan.notes.is_empty() || plan.idle_reason.is_none());
}

#[test]
fn a_failed_write_is_reported_and_not_retried() {
    let mut sim = eight_cpus(vec![NicSpec::physical("eth0", 0, 2)]);
    sim.pin_queues("eth0", &[0]);
    let mut bench = Bench::new(sim, Config::default());
    bench.run(1);
    let mut state = PolicyState::new();
    let plan = bench.decide(&mut state);
    let action = plan.actions.first().expect("rx-1 leaves CPU 0").clone();
    state.record_failed(action.target.clone(), "EIO: the chip cannot move it");
    let again = bench.decide(&mut state);
    assert!(
        again.actions.iter().all(|a| a.target != action.target),
        "{again}"
    );
    let note = again
        .notes
        .iter()
        .find(|n| n.kind == NoteKind::WriteFailed)
        .expect("reported");
    assert!(note.text.contains("EIO"), "{}", note.text);
}

#[test]
fn an_irq_the_kernel_moved_off_an_offline_cpu_is_not_an_external_change() {
    let mut shape = Shape::new(1, 8, 1, Siblings::Split);
    shape.offline = CpuSet::from_iter([7]);
    let mut sim = SimMachine::new(&shape, vec![NicSpec::physical("eth0", 0, 2)], 7);
    sim.set_rate("eth0", 10_000.0);
    let mut bench = Bench::new(sim, Config::default());
    bench.run(1);
    let irq = bench.sim.irq_of("eth0", 1).unwrap();
    let mut state = PolicyState::new();
    state.record_applied(
        &Action {
            target: Target::IrqAffinity { irq },
            serves: None,
            old: Value::Cpus(CpuSet::from_iter([1])),
            new: Value::Cpus(CpuSet::from_iter([7])),
            reason: Reason {
                kind: ReasonKind::HotCpu,
                text: String::new(),
            },
            expected: String::new(),
        },
        0,
    );
    let plan = bench.decide(&mut state);
    assert!(
        plan.notes
            .iter()
            .all(|n| n.kind != NoteKind::ExternalChange),
        "{plan}"
    );
    assert!(state.written(&Target::IrqAffinity { irq }).is_none());
}
