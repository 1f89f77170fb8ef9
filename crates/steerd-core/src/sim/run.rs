//! Running a policy on a scenario, tick by tick, and summing up how it did.

use super::machine::SimMachine;
use super::steerd::{Change, Controller};
use crate::config::Config;
use crate::policy::Note;

/// A simulated situation: a machine, a config, a traffic script and a goal.
pub struct Scenario {
    pub id: u32,
    pub name: &'static str,
    pub ticks: u32,
    /// The tick the situation of interest starts (load arrives, a burst).
    pub event: u32,
    pub machine: SimMachine,
    pub config: Config,
    /// Called before each tick: sets rates, writes values "someone else" changes.
    pub script: fn(u32, &mut SimMachine),
    /// Whether the machine is in the state a good policy reaches, judged on a tick's
    /// ground truth (before the policy's writes at the end of that tick).
    pub goal: fn(&SimMachine) -> bool,
    /// What the goal means, for the table.
    pub goal_text: &'static str,
    /// Ticks `[start, end)` over which balance is measured (a loaded stretch).
    pub window: (u32, u32),
}

/// One tick of a run.
#[derive(Debug, Clone)]
pub struct TickRecord {
    pub tick: u32,
    pub changes: Vec<Change>,
    pub notes: Vec<Note>,
    /// Why the policy did nothing this tick, if it said.
    pub idle_reason: Option<String>,
    /// The busiest CPU and its busy share.
    pub hottest: (u32, f64),
    /// Mean busy share of CPUs doing at least 5 % work.
    pub mean_loaded: f64,
    pub dropped: f64,
    pub offered: f64,
    /// Packets processed per CPU.
    pub processed: Vec<f64>,
    /// RPS IPIs sent.
    pub ipis: f64,
    pub goal: bool,
    pub decide_ns: u64,
}

/// A whole run.
pub struct Run {
    pub policy: &'static str,
    pub ticks: Vec<TickRecord>,
    pub machine: SimMachine,
    pub event: u32,
    pub window: (u32, u32),
}

/// Runs `controller` on `scenario`.
pub fn run(scenario: &Scenario, controller: &mut dyn Controller) -> Run {
    let mut sim = scenario.machine.clone();
    let start = sim.snapshot();
    controller.start(&sim, &start);
    let mut ticks = Vec::with_capacity(scenario.ticks as usize);
    for tick in 0..scenario.ticks {
        (scenario.script)(tick, &mut sim);
        let snapshot = sim.step();
        let truth = sim.truth().clone();
        let goal = (scenario.goal)(&sim);
        let actions = controller.tick(&mut sim, &snapshot);
        ticks.push(TickRecord {
            tick,
            changes: actions.changes,
            notes: actions.notes,
            idle_reason: actions.idle_reason,
            hottest: truth.hottest(),
            mean_loaded: truth.mean_loaded(),
            dropped: truth.dropped,
            offered: truth.offered,
            processed: truth.processed,
            ipis: truth.ipis,
            goal,
            decide_ns: actions.decide_ns,
        });
    }
    Run {
        policy: controller.name(),
        ticks,
        machine: sim,
        event: scenario.event,
        window: scenario.window,
    }
}

impl Run {
    /// Ticks from the event to the first tick that meets the goal, if any.
    pub fn reaction(&self) -> Option<u32> {
        self.ticks
            .iter()
            .find(|t| t.tick >= self.event && t.goal)
            .map(|t| t.tick - self.event)
    }

    /// Accepted writes over the whole run.
    pub fn actions(&self) -> usize {
        self.ticks
            .iter()
            .map(|t| t.changes.iter().filter(|c| c.accepted).count())
            .sum()
    }

    /// Accepted writes within the measurement window: a steady stretch after the policy
    /// converged.
    pub fn window_actions(&self) -> usize {
        let (start, end) = self.window;
        self.ticks
            .iter()
            .filter(|t| t.tick >= start && t.tick < end)
            .map(|t| t.changes.iter().filter(|c| c.accepted).count())
            .sum()
    }

    /// Packets dropped over the whole run.
    pub fn dropped(&self) -> f64 {
        self.ticks.iter().map(|t| t.dropped).sum()
    }

    /// Mean over the scenario's window of the hottest CPU's busy share and of the mean
    /// busy share of loaded CPUs.
    pub fn balance(&self) -> (f64, f64) {
        let (start, end) = self.window;
        let tail: Vec<&TickRecord> = self
            .ticks
            .iter()
            .filter(|t| t.tick >= start && t.tick < end)
            .collect();
        let n = tail.len().max(1) as f64;
        let max = tail.iter().map(|t| t.hottest.1).sum::<f64>() / n;
        let mean = tail.iter().map(|t| t.mean_loaded).sum::<f64>() / n;
        (max, mean)
    }

    /// Mean RPS IPIs per tick over the scenario's window (each costs its sending CPU an
    /// IPI batch, `Costs::ipi_batch_ns`).
    pub fn window_ipis(&self) -> f64 {
        let (start, end) = self.window;
        let tail: Vec<f64> = self
            .ticks
            .iter()
            .filter(|t| t.tick >= start && t.tick < end)
            .map(|t| t.ipis)
            .collect();
        tail.iter().sum::<f64>() / tail.len().max(1) as f64
    }

    /// Decision time per tick: mean and maximum, in nanoseconds.
    pub fn decide_time(&self) -> (u64, u64) {
        let n = self.ticks.len().max(1) as u64;
        let sum: u64 = self.ticks.iter().map(|t| t.decide_ns).sum();
        let max = self.ticks.iter().map(|t| t.decide_ns).max().unwrap_or(0);
        (sum / n, max)
    }

    /// Every accepted change, with its tick.
    pub fn changes(&self) -> impl Iterator<Item = (u32, &Change)> {
        self.ticks.iter().flat_map(|t| {
            t.changes
                .iter()
                .filter(|c| c.accepted)
                .map(move |c| (t.tick, c))
        })
    }
}
