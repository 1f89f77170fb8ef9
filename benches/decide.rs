//! The cost of one policy decision on the 1152-CPU scenario (8 nodes x 72 cores x 2
//! threads, 4 NICs x 94 queues, 1000+ IRQs with the other vectors), target < 1 ms a tick:
//!
//! * `converged`: `decide()` on the steady state after the policy has placed everything
//!   (what the daemon pays every tick);
//! * `first tick`: `decide()` when every vector sits on CPU 0 and CPU 0 drops packets, so
//!   the plan moves all 376 queue vectors (the worst tick);
//! * `load update`: folding one pair of snapshots into the load model.
//!
//! The machine is the simulator's (`steerd::sim`), driven to each state by the policy
//! itself. After criterion, a short self-timed pass prints one line per case.

use std::hint::black_box;
use std::time::Instant;

use criterion::{BatchSize, Criterion};
use steerd::load::Load;
use steerd::model::inventory::Inventory;
use steerd::policy::{DecideInput, Placement, PolicyState, decide};
use steerd::sim::scenarios;
use steerd::sim::{Controller, SimMachine, Steerd};

/// A frozen moment of the scenario: everything `decide` reads.
struct Moment {
    sim: SimMachine,
    inventory: Inventory,
    placement: Placement,
    load: Load,
    state: PolicyState,
    config: steerd::config::Config,
    now_ns: u64,
}

impl Moment {
    fn input(&self) -> DecideInput<'_> {
        DecideInput {
            topology: &self.sim.topology,
            inventory: &self.inventory,
            load: &self.load,
            config: &self.config,
            placement: &self.placement,
            now_ns: self.now_ns,
        }
    }
}

/// Runs the 1152-CPU scenario for `ticks` ticks under steerd, then freezes the inputs of
/// the next decision (the tick's counters already folded into the load model).
fn moment(ticks: u32) -> Moment {
    let scenario = scenarios::huge_machine();
    let mut sim = scenario.machine.clone();
    let mut policy = Steerd::new(scenario.config.clone());
    let start = sim.snapshot();
    policy.start(&sim, &start);
    let mut prev = start;
    for tick in 0..ticks {
        (scenario.script)(tick, &mut sim);
        let snapshot = sim.step();
        policy.tick(&mut sim, &snapshot);
        prev = snapshot;
    }
    (scenario.script)(ticks, &mut sim);
    let snapshot = sim.step();
    let engine = policy.engine().expect("the scenario ran");
    let mut load = engine.load().clone();
    load.update(&prev, &snapshot, scenario.config.load.smoothing);
    Moment {
        inventory: sim.inventory(),
        placement: sim.placement(),
        now_ns: snapshot.taken_at_ns,
        load,
        state: engine.policy().clone(),
        config: scenario.config,
        sim,
    }
}

fn bench(c: &mut Criterion) {
    let converged = moment(60);
    let first = moment(0);
    let mut group = c.benchmark_group("decide 1152 CPUs, 4 NICs x 94 queues");
    group.bench_function("converged", |b| {
        let input = converged.input();
        let mut state = converged.state.clone();
        b.iter(|| black_box(decide(&input, &mut state)));
    });
    group.bench_function("first tick, all vectors on CPU 0", |b| {
        let input = first.input();
        b.iter_batched(
            || first.state.clone(),
            |mut state| black_box(decide(&input, &mut state)),
            BatchSize::SmallInput,
        );
    });
    let mut sim = converged.sim.clone();
    let before = sim.snapshot();
    let after = sim.step();
    group.bench_function("load update", |b| {
        let mut load = converged.load.clone();
        b.iter(|| load.update(black_box(&before), black_box(&after), 0.5));
    });
    group.finish();
}

/// Mean wall time of `f` over `runs` calls, in microseconds.
fn time_us(runs: u32, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    for _ in 0..runs {
        f();
    }
    started.elapsed().as_secs_f64() * 1e6 / f64::from(runs)
}

fn summary() {
    let converged = moment(60);
    let first = moment(0);
    let input = converged.input();
    let mut state = converged.state.clone();
    let steady = time_us(2000, || {
        black_box(decide(&input, &mut state));
    });
    let first_input = first.input();
    let worst = time_us(200, || {
        let mut state = first.state.clone();
        black_box(decide(&first_input, &mut state));
    });
    let plan = decide(&first_input, &mut first.state.clone());
    println!();
    println!(
        "decide() on 1152 CPUs, 4 NICs x 94 queues, {} IRQs (target < 1 ms a tick):",
        first.inventory.irqs.len()
    );
    println!("  converged:        {steady:8.1} µs per tick");
    println!(
        "  first tick:       {worst:8.1} µs per tick ({} actions planned)",
        plan.actions.len()
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
    summary();
}
