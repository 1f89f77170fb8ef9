//! The policy on simulated machines: the scenarios of issue 3, each run for hundreds of
//! ticks through the same load model and `decide()` the daemon uses, with the assertions
//! the issue lists, and the comparison with the irqbalance-like baseline that
//! `docs/policy.md` shows.

use steerd::cpuset::CpuSet;
use steerd::knob::{Knob, KnobValue};
use steerd::policy::NoteKind;
use steerd::sim::scenarios::{self, vector_cores, vector_cpus};
use steerd::sim::table;
use steerd::sim::{HandRps, NoBalancer, Run, Scenario, SimMachine, Steerd, TickRecord, run};

fn steerd_run(scenario: &Scenario) -> Run {
    let mut policy = Steerd::new(scenario.config.clone());
    run(scenario, &mut policy)
}

/// Ticks at which an accepted change hit this target.
fn change_ticks(run: &Run, target: &Knob) -> Vec<u32> {
    run.changes()
        .filter(|(_, c)| &c.target == target)
        .map(|(tick, _)| tick)
        .collect()
}

fn rps_target(device: &str, queue: u32) -> Knob {
    Knob::RpsCpus {
        device: device.to_string(),
        queue,
    }
}

fn distinct(values: &[Option<u32>]) -> bool {
    let mut seen = std::collections::HashSet::new();
    values.iter().all(|v| v.is_some_and(|v| seen.insert(v)))
}

fn mask(sim: &SimMachine, nic: &str, queue: u32) -> CpuSet {
    sim.rps_mask(nic, queue).cloned().unwrap_or_default()
}

#[test]
fn s1_all_irqs_on_cpu0_spread_over_eight_cores_then_stay_balanced() {
    let scenario = scenarios::all_on_cpu0();
    assert!(
        vector_cpus(&scenario.machine, "eth0", 8)
            .iter()
            .all(|c| *c == Some(0)),
        "set-up: every vector on CPU 0"
    );
    let result = steerd_run(&scenario);
    // CPU 0 drops packets from tick 0: distress is confirmed at once (1 tick); the
    // vectors must be on 8 distinct cores within 2 ticks of that.
    let spread_at = result
        .ticks
        .iter()
        .position(|t| t.goal)
        .expect("never spread");
    assert!(spread_at <= 2, "spread only at tick {spread_at}");
    assert!(distinct(&vector_cores(&result.machine, "eth0", 8)));
    for t in &result.ticks[spread_at..] {
        assert!(
            t.hottest.1 <= 1.25 * t.mean_loaded,
            "tick {}: CPU {} at {:.2} > 1.25 x mean {:.2}",
            t.tick,
            t.hottest.0,
            t.hottest.1,
            t.mean_loaded
        );
        assert!(t.dropped < 1.0, "tick {} dropped {}", t.tick, t.dropped);
    }
    assert!(result.ticks.len() >= 300);
}

#[test]
fn s2_steady_noisy_load_takes_no_action_after_convergence() {
    let scenario = steerd_run(&scenarios::steady_noise());
    let late: Vec<_> = scenario.changes().filter(|(tick, _)| *tick >= 60).collect();
    assert!(late.is_empty(), "actions after convergence: {late:?}");
    assert!(scenario.ticks.len() - 60 >= 300, "300 ticks observed");
    assert!(scenario.actions() <= 8, "{} actions", scenario.actions());
}

#[test]
fn s3_idle_keeps_its_spread_and_a_burst_is_handled_within_two_ticks() {
    let scenario = scenarios::idle_then_burst();
    let before = vector_cores(&scenario.machine, "eth0", 4);
    assert!(distinct(&before));
    let result = steerd_run(&scenario);
    let idle: Vec<_> = result.changes().filter(|(tick, _)| *tick < 605).collect();
    assert!(idle.is_empty(), "changed while idle: {idle:?}");
    let reaction = result.reaction().expect("never relieved");
    assert!(reaction <= 2, "relieved {reaction} ticks after the burst");
    let acted = result
        .changes()
        .map(|(tick, _)| tick)
        .find(|&tick| tick >= 605)
        .expect("no action on the burst");
    assert!(acted <= 606, "first action at tick {acted}");

    // The baseline packs the idle machine onto one CPU and is caught by the burst.
    let comparison = table::compare(scenarios::idle_then_burst());
    let packed = comparison
        .baseline
        .changes()
        .filter(|(tick, _)| *tick < 605)
        .count();
    assert!(packed > 0, "the baseline should pack while idle");
    assert!(comparison.baseline.reaction().is_none_or(|r| r > reaction));
}

/// CPUs no action may target in a scenario: isolated, nohz_full, banned, reserved.
fn forbidden(scenario: &Scenario) -> CpuSet {
    scenario
        .machine
        .topology
        .isolated
        .union(&scenario.machine.topology.nohz_full)
        .union(&scenario.config.cpus.banned)
        .union(&scenario.config.cpus.reserved)
}

#[test]
fn s4_isolated_banned_and_reserved_cpus_are_never_targets_in_any_scenario() {
    for scenario in scenarios::all().into_iter().chain(scenarios::rss()) {
        let forbidden = forbidden(&scenario);
        let result = steerd_run(&scenario);
        for (tick, change) in result.changes() {
            if let KnobValue::Cpus(cpus) = &change.new {
                assert!(
                    !cpus.intersects(&forbidden),
                    "scenario {} tick {tick}: {} -> {} touches forbidden CPUs {}",
                    scenario.id,
                    change.target,
                    change.new,
                    forbidden.to_list()
                );
            }
        }
    }
    let scenario = scenarios::forbidden_cpus();
    let result = steerd_run(&scenario);
    let evicted = CpuSet::from_iter([2, 3, 4, 10, 12]);
    for cpu in vector_cpus(&result.machine, "eth0", 8) {
        assert!(
            !evicted.contains(cpu.unwrap()),
            "a vector stayed on CPU {cpu:?}"
        );
    }
    // Reserved CPU 5 keeps what the driver put there.
    assert_eq!(vector_cpus(&result.machine, "eth0", 8)[5], Some(5));
    // The single-queue NIC got RPS over allowed CPUs only.
    let eth1 = mask(&result.machine, "eth1", 0);
    assert!(eth1.len() >= 4, "eth1 rps_cpus {eth1:?}");
    assert!(!eth1.intersects(&scenarios::forbidden_set()));
    // Distress at the event, RPS at its second interval (`spread::MIN_SPELL`), relief at
    // the next.
    assert!(
        result.reaction().is_some_and(|r| r <= 3),
        "reaction {:?}",
        result.reaction()
    );
}

#[test]
fn s5_a_nic_on_node_1_keeps_its_irqs_and_rps_masks_on_node_1() {
    let scenario = scenarios::numa_remote();
    let node1 = scenario.machine.topology.node_cpus(1);
    let result = steerd_run(&scenario);
    for (tick, change) in result.changes() {
        if let KnobValue::Cpus(cpus) = &change.new {
            assert!(
                cpus.is_subset(&node1),
                "tick {tick}: {} -> {} leaves node 1",
                change.target,
                change.new
            );
        }
    }
    for cpu in vector_cpus(&result.machine, "eth0", 4) {
        assert!(node1.contains(cpu.unwrap()));
    }
    let hot = mask(&result.machine, "eth0", 0);
    assert!(!hot.is_empty() && hot.is_subset(&node1), "rx-0 {hot:?}");
    assert!(result.reaction().is_some_and(|r| r <= 3));
}

#[test]
fn s6_hash_skew_widens_rps_on_the_hot_queues_and_cools_the_hottest_cpu() {
    let result = steerd_run(&scenarios::hash_skew());
    let before = result.ticks[0].hottest.1;
    let (after, _) = result.balance();
    assert!(
        after <= 0.7 * before,
        "hottest CPU {before:.2} -> {after:.2}: less than 30% down"
    );
    for queue in [0, 1] {
        let m = mask(&result.machine, "eth0", queue);
        assert!(m.len() >= 3, "rx-{queue} not widened: {m:?}");
    }
    for queue in [2, 3] {
        assert!(
            mask(&result.machine, "eth0", queue).is_empty(),
            "cool rx-{queue} got RPS"
        );
    }
    // RFS alongside: 32768 / 4 queues.
    let flow = result
        .changes()
        .find(|(_, c)| {
            c.target
                == Knob::RpsFlowCnt {
                    device: "eth0".into(),
                    queue: 0,
                }
        })
        .map(|(_, c)| c.new.clone());
    assert_eq!(flow, Some(KnobValue::Count(8192)));
}

#[test]
fn s7_single_queue_rps_on_within_two_ticks_and_off_again_after_its_dwell() {
    let scenario = scenarios::single_queue();
    let dwell_ticks = scenario.config.hysteresis.rps_dwell.as_secs() as u32;
    let result = steerd_run(&scenario);
    let rx0 = rps_target("eth0", 0);
    let changes: Vec<(u32, KnobValue)> = result
        .changes()
        .filter(|(_, c)| c.target == rx0)
        .map(|(tick, c)| (tick, c.new.clone()))
        .collect();
    assert_eq!(changes.len(), 2, "exactly one on and one off: {changes:?}");
    let (on_tick, on) = &changes[0];
    let (off_tick, off) = &changes[1];
    assert!(
        *on_tick <= scenario.event + 1,
        "RPS on only at tick {on_tick}"
    );
    assert!(
        on.cpus().is_some_and(|m| m.len() >= 4 && !m.contains(1)),
        "{on}"
    );
    assert!(off.cpus().is_some_and(CpuSet::is_empty));
    assert!(*off_tick >= 200, "turned off while loaded, at {off_tick}");
    assert!(
        *off_tick >= on_tick + dwell_ticks,
        "off at {off_tick}, before its dwell time ({dwell_ticks} ticks after {on_tick})"
    );
    assert!(*off_tick <= 200 + 3 * dwell_ticks, "off only at {off_tick}");
    // RFS on with it (the whole table for a single queue) and off with it.
    let flow: Vec<KnobValue> = result
        .changes()
        .filter(|(_, c)| {
            c.target
                == Knob::RpsFlowCnt {
                    device: "eth0".into(),
                    queue: 0,
                }
        })
        .map(|(_, c)| c.new.clone())
        .collect();
    assert_eq!(flow, vec![KnobValue::Count(32768), KnobValue::Count(0)]);
    let global: Vec<KnobValue> = result
        .changes()
        .filter(|(_, c)| c.target == Knob::RpsSockFlowEntries)
        .map(|(_, c)| c.new.clone())
        .collect();
    assert_eq!(global, vec![KnobValue::Count(32768), KnobValue::Count(0)]);
}

#[test]
fn s8_smt_one_queue_vector_per_physical_core() {
    let scenario = scenarios::smt_siblings();
    assert!(!distinct(&vector_cores(&scenario.machine, "eth0", 8)));
    let result = steerd_run(&scenario);
    assert!(distinct(&vector_cores(&result.machine, "eth0", 8)));
    assert!(result.reaction().is_some_and(|r| r <= 2));
    assert!(result.changes().all(|(tick, _)| tick < 3), "kept moving");
}

#[test]
fn s9_managed_and_externally_changed_irqs_are_never_moved_and_are_reported() {
    let scenario = scenarios::managed_and_external();
    let managed = scenario.machine.irq_of("eth0", 3).unwrap();
    let moved_by_admin = scenario.machine.irq_of("eth0", 1).unwrap();
    let result = steerd_run(&scenario);
    let managed_target = Knob::IrqAffinity { irq: managed };
    assert!(change_ticks(&result, &managed_target).is_empty());
    assert!(
        result
            .ticks
            .iter()
            .flat_map(|t| &t.changes)
            .all(|c| c.target != managed_target),
        "a write to the managed IRQ was even attempted"
    );
    let admin_target = Knob::IrqAffinity {
        irq: moved_by_admin,
    };
    let ticks = change_ticks(&result, &admin_target);
    assert!(
        ticks.iter().all(|&t| t < 100),
        "steerd moved the IRQ back: {ticks:?}"
    );
    assert_eq!(
        result.machine.affinity(moved_by_admin),
        Some(&CpuSet::from_iter([7]))
    );
    let managed_note = result.ticks[0]
        .notes
        .iter()
        .find(|n| n.kind == NoteKind::Managed && n.target.as_ref() == Some(&managed_target));
    assert!(managed_note.is_some_and(|n| n.new));
    let external: Vec<(u32, bool)> = result
        .ticks
        .iter()
        .flat_map(|t| {
            t.notes
                .iter()
                .filter(|n| {
                    n.kind == NoteKind::ExternalChange && n.target.as_ref() == Some(&admin_target)
                })
                .map(move |n| (t.tick, n.new))
        })
        .collect();
    assert_eq!(external.first(), Some(&(100, true)), "{external:?}");
    assert!(external[1..].iter().all(|(_, new)| !new));
    assert_eq!(external.len(), 200, "reported in every plan from then on");
}

#[test]
fn s10_1152_cpus_and_four_nics_converge() {
    let scenario = scenarios::huge_machine();
    assert_eq!(scenario.machine.topology.cpus.len(), 1152);
    let result = steerd_run(&scenario);
    assert!(result.reaction().is_some_and(|r| r <= 2));
    let last = result.changes().map(|(tick, _)| tick).max().unwrap_or(0);
    assert!(last < 10, "still changing at tick {last}");
    assert!(result.ticks.last().unwrap().goal);
    // Two NICs on node 0 are offset: no CPU serves more than 2 vectors.
    let mut per_cpu = std::collections::HashMap::new();
    for nic in ["eth0", "eth1"] {
        for cpu in vector_cpus(&result.machine, nic, 94) {
            *per_cpu.entry(cpu.unwrap()).or_insert(0) += 1;
        }
    }
    assert!(per_cpu.values().all(|&n| n <= 2), "{per_cpu:?}");
    let (mean, max) = result.decide_time();
    println!(
        "1152 CPUs, 4 NICs x 94 queues: decide() mean {:.1} µs, max {:.1} µs per tick (this build)",
        mean as f64 / 1e3,
        max as f64 / 1e3
    );
}

#[test]
fn s11_veth_rps_spreads_the_senders_work_with_one_mask_on_every_queue() {
    let result = steerd_run(&scenarios::veth_sender());
    assert!(result.reaction().is_some_and(|r| r <= 4));
    let masks: Vec<CpuSet> = (0..8).map(|q| mask(&result.machine, "veth0", q)).collect();
    assert!(
        masks.iter().all(|m| *m == CpuSet::from_iter([0, 1])),
        "{masks:?}"
    );
    assert_eq!(result.window_actions(), 0);
}

#[test]
fn steerd_beats_the_baseline_on_reaction_and_drops_with_no_more_actions_once_converged() {
    for c in table::compare_all() {
        let id = c.scenario.id;
        // For the RSS lever's scenarios: both steerd runs (rss.mode auto and off) drop no
        // more and act no more once converged; the better of them reacts no later.
        let steerd_runs: Vec<&Run> = c.rss_auto.iter().chain([&c.steerd]).collect();
        let steerd_reaction = steerd_runs
            .iter()
            .filter_map(|r| r.reaction())
            .min()
            .unwrap_or(u32::MAX);
        let baseline_reaction = c.baseline.reaction().unwrap_or(u32::MAX);
        assert!(
            steerd_reaction < u32::MAX,
            "scenario {id}: steerd never reached the goal"
        );
        assert!(
            steerd_reaction <= baseline_reaction,
            "scenario {id}: reaction {steerd_reaction} vs {baseline_reaction}"
        );
        for run in steerd_runs {
            assert!(
                run.dropped() <= c.baseline.dropped() + 1.0,
                "scenario {id} ({}): dropped {} vs {}",
                run.policy,
                run.dropped(),
                c.baseline.dropped()
            );
            assert!(
                run.window_actions() <= c.baseline.window_actions(),
                "scenario {id} ({}): {} actions in the window vs {}",
                run.policy,
                run.window_actions(),
                c.baseline.window_actions()
            );
        }
    }
}

#[test]
fn the_table_in_docs_policy_md_is_current() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policy.md"))
        .expect("docs/policy.md");
    let table = table::markdown(&table::compare_all());
    assert!(
        docs.contains(&table),
        "docs/policy.md has a stale table; regenerate with\n  cargo run --release --example policy_table\nand paste:\n{table}"
    );
}

/// Skipping `decide` on idle ticks (as the daemon does) changes no action in any
/// scenario, and does skip in the ones with idle stretches.
#[test]
fn skipping_idle_ticks_changes_nothing() {
    for scenario in scenarios::all().into_iter().chain(scenarios::rss()) {
        let mut always = Steerd::new(scenario.config.clone());
        always.skip_idle = false;
        let decided = run(&scenario, &mut always);
        let mut skipping = Steerd::new(scenario.config.clone());
        let skipped = run(&scenario, &mut skipping);
        let a: Vec<_> = decided.changes().collect();
        let b: Vec<_> = skipped.changes().collect();
        assert_eq!(
            a, b,
            "scenario {}: skipping idle ticks changed the actions",
            scenario.id
        );
        eprintln!(
            "scenario {:2}: {:3} of {} ticks skipped decide",
            scenario.id, skipping.skipped, scenario.ticks
        );
        if scenario.id == 7 {
            // Idle before the load and again after RPS is off.
            assert!(skipping.skipped > 100, "{}", skipping.skipped);
        }
        if scenario.id == 16 {
            // 300 idle ticks before the burst (the table lever on: it too is idle).
            assert!(skipping.skipped > 250, "{}", skipping.skipped);
        }
    }
}

/// The share of all processed packets done by the busiest CPU, over a run's window.
fn busiest_share(result: &Run) -> f64 {
    let (start, end) = result.window;
    let mut per_cpu: Vec<f64> = Vec::new();
    for t in result
        .ticks
        .iter()
        .filter(|t| t.tick >= start && t.tick < end)
    {
        per_cpu.resize(per_cpu.len().max(t.processed.len()), 0.0);
        for (cpu, p) in t.processed.iter().enumerate() {
            per_cpu[cpu] += p;
        }
    }
    let total: f64 = per_cpu.iter().sum();
    per_cpu.iter().copied().fold(0.0, f64::max) / total.max(1.0)
}

#[test]
fn s12_virtio_inputs_on_cpu0_spread_in_one_tick_outputs_follow_and_nothing_more_changes() {
    let scenario = scenarios::virtio_all_inputs_on_cpu0();
    assert!(
        vector_cpus(&scenario.machine, "eth0", 4)
            .iter()
            .all(|c| *c == Some(0)),
        "set-up: every input on CPU 0"
    );
    let result = steerd_run(&scenario);
    let irq_ticks: std::collections::BTreeSet<u32> = result
        .changes()
        .filter(|(_, c)| matches!(c.target, Knob::IrqAffinity { .. }))
        .map(|(tick, _)| tick)
        .collect();
    assert_eq!(irq_ticks.len(), 1, "IRQ changes in one tick: {irq_ticks:?}");
    let tick = *irq_ticks.first().unwrap();
    assert!(tick <= 1, "placed at tick {tick}");
    assert!(
        result.ticks[tick as usize + 1].goal,
        "spread right after tick {tick}: {:?}",
        vector_cpus(&result.machine, "eth0", 4)
    );
    assert!(scenarios::virtio_spread(&result.machine, "eth0", 4));
    let late: Vec<_> = result.changes().filter(|(tick, _)| *tick >= 30).collect();
    assert!(late.is_empty(), "actions after convergence: {late:?}");
    let share = busiest_share(&result);
    // 8 flows of 75k pkt/s each, hashed unevenly (6 land on one queue with this seed):
    // after RPS spreads the hot queue, the lumps of whole flows still leave one CPU
    // about half of the work. The lab's 0.35 needs an even hash (the RSS table lever).
    eprintln!("busiest CPU's share of processed: {share:.2}");
    assert!(share <= 0.51, "busiest CPU's share {share:.2}");
    let dropping: Vec<u32> = result
        .ticks
        .iter()
        .filter(|t| t.dropped >= 1.0)
        .map(|t| t.tick)
        .collect();
    assert!(
        dropping.iter().all(|&t| t <= 1),
        "drops after the first tick: {dropping:?}"
    );
}

#[test]
fn s13_virtio_after_idle_no_vector_moves_at_all() {
    let result = steerd_run(&scenarios::virtio_idle_then_burst());
    let moves: Vec<_> = result
        .changes()
        .filter(|(_, c)| matches!(c.target, Knob::IrqAffinity { .. }))
        .collect();
    assert!(moves.is_empty(), "vectors moved: {moves:?}");
    let idle: Vec<_> = result.changes().filter(|(tick, _)| *tick < 300).collect();
    assert!(idle.is_empty(), "changed while idle: {idle:?}");
    let late: Vec<_> = result.changes().filter(|(tick, _)| *tick >= 330).collect();
    assert!(late.is_empty(), "actions after convergence: {late:?}");
    assert!(result.reaction() == Some(0), "{:?}", result.reaction());
}

/// Packets delivered per second over a run's window: offered minus dropped (what CPU 0
/// cannot serve the model drops; on the bed the sender leaves it unsent), over the window's
/// seconds (the simulated clock: a tick is `now_ns / ticks`).
fn delivered_pps(result: &Run) -> f64 {
    let (start, end) = result.window;
    let secs_per_tick = result.machine.now_ns() as f64 / 1e9 / result.ticks.len().max(1) as f64;
    let window: Vec<&TickRecord> = result
        .ticks
        .iter()
        .filter(|t| t.tick >= start && t.tick < end)
        .collect();
    let delivered: f64 = window.iter().map(|t| t.offered - t.dropped).sum();
    delivered / (window.len().max(1) as f64 * secs_per_tick)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The veth bed (crates/steerd-testkit/src/lab/bed: 2 CPUs, 3000 rules, 40k pkt/s offered from a sender on CPU 0),
/// measured on this host, medians of 3 rounds (bed-3reps-e08778d): none 22.3k pkt/s
/// delivered, steerd 39.4k, hand 39.6k; steerd/none 1.77 (rounds 1.62, 1.79, 1.77),
/// steerd/hand 1.00; steerd's masks "3" on all four queues. The model, calibrated on the
/// none run alone (`scenarios::veth_bed`), must agree: steerd/none within ±20 % of 1.77,
/// steerd/hand >= 0.95, steerd's masks over both CPUs on every queue.
///
/// As the bed does, it takes the median of per-round ratios, each round with flows hashed
/// anew (`veth_bed_round`): what two CPUs deliver depends on how many of the 64 flows
/// RPS's hash sends to the sender's CPU, and one draw is one draw (round 0 puts 64 % there
/// and gives 1.38 alone; the bed's hand rounds put 43-46 % there).
///
/// Where the model and the bed part (not asserted): steerd acts on the model's first tick,
/// 2.3-3.3 s in on the bed, because the model shows CPU 0's excess as softnet drops
/// (distress, confirmed in one tick) where the bed's sender sends less and drops nothing
/// (pressure, three ticks); and the model's 39 µs of protocol work per packet is the same
/// on every CPU, where the bed did better once RPS moved work off the sender's CPU (its
/// steerd round 1 put 69 % on CPU 0 and still delivered 34.7k; the model gives about 29k
/// for that split), so the model is pessimistic for an unlucky split.
#[test]
fn s18_veth_bed_steerd_delivers_what_rps_by_hand_does_as_the_bed_measured() {
    const ROUNDS: u64 = 9;
    let (mut none, mut steerd, mut hand) = (Vec::new(), Vec::new(), Vec::new());
    let (mut vs_none, mut vs_hand) = (Vec::new(), Vec::new());
    let both = CpuSet::from_iter([0, 1]);
    for round in 0..ROUNDS {
        let scenario = scenarios::veth_bed_round(round);
        let none_run = run(&scenario, &mut NoBalancer);
        let steerd_result = steerd_run(&scenario);
        let hand_run = run(&scenario, &mut HandRps::new());
        let [n, s, h] = [&none_run, &steerd_result, &hand_run].map(delivered_pps);
        let first = steerd_result.changes().map(|(tick, _)| tick).min();
        eprintln!(
            "round {round}: delivered none {n:.0}, steerd {s:.0}, hand {h:.0} pkt/s; \
             steerd/none {:.2}, steerd/hand {:.2}; CPU 0's share of processed under hand {:.2}; \
             steerd's first change at tick {first:?}",
            s / n,
            s / h,
            1.0 - cpu_share(&hand_run, 1),
        );
        assert!(
            (22_000.0..=24_000.0).contains(&n),
            "round {round}: calibration: CPU 0 alone should carry 22-24k pkt/s, carries {n:.0}"
        );
        let masks: Vec<CpuSet> = (0..4)
            .map(|q| mask(&steerd_result.machine, "veth0", q))
            .collect();
        assert!(
            masks.iter().all(|m| both.is_subset(m)),
            "round {round}: {masks:?}"
        );
        assert_eq!(
            steerd_result.window_actions(),
            0,
            "round {round}: still acting"
        );
        none.push(n);
        steerd.push(s);
        hand.push(h);
        vs_none.push(s / n);
        vs_hand.push(s / h);
    }
    let (vs_none, vs_hand) = (median(vs_none), median(vs_hand));
    eprintln!(
        "veth bed (model), medians of {ROUNDS} rounds: delivered none {:.0}, steerd {:.0}, \
         hand {:.0} pkt/s; steerd/none {vs_none:.2} (bed 1.77), steerd/hand {vs_hand:.2} (bed 1.00)",
        median(none),
        median(steerd),
        median(hand),
    );
    assert!(
        (1.77 * 0.8..=1.77 * 1.2).contains(&vs_none),
        "steerd/none {vs_none:.2}, the bed's 1.77 ± 20 %"
    );
    assert!(vs_hand >= 0.95, "steerd/hand {vs_hand:.2}");
}

/// CPU `cpu`'s share of all processed packets over a run's window.
fn cpu_share(result: &Run, cpu: usize) -> f64 {
    let (start, end) = result.window;
    let (mut mine, mut all) = (0.0, 0.0);
    for t in result
        .ticks
        .iter()
        .filter(|t| t.tick >= start && t.tick < end)
    {
        mine += t.processed.get(cpu).copied().unwrap_or(0.0);
        all += t.processed.iter().sum::<f64>();
    }
    mine / all.max(1.0)
}
