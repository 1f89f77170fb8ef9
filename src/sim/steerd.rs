//! Policies that drive a simulated machine: steerd's own, through the same load model and
//! `decide` the daemon uses, writing through the simulated kernel.

use std::time::Instant;

use super::machine::SimMachine;
use crate::config::Config;
use crate::knob::{Knob, KnobValue};
use crate::load::Load;
use crate::model::inventory::Inventory;
use crate::model::snapshot::Snapshot;
use crate::policy::{DecideInput, Note, Placement, PolicyState, can_skip, decide, skip_tick};

/// One write a policy made (or tried) in a tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub target: Knob,
    pub old: KnobValue,
    pub new: KnobValue,
    /// The rule that fired (`ReasonKind` name, or the baseline's).
    pub reason: String,
    /// Whether the simulated kernel accepted the write.
    pub accepted: bool,
}

/// What a policy did in one tick.
#[derive(Debug, Clone, Default)]
pub struct TickActions {
    pub changes: Vec<Change>,
    pub notes: Vec<Note>,
    /// Time spent deciding, in nanoseconds of wall time.
    pub decide_ns: u64,
}

/// A policy run against a simulated machine once per tick.
pub trait Controller {
    fn name(&self) -> &'static str;
    /// Sees the counters before the first tick.
    fn start(&mut self, sim: &SimMachine, snapshot: &Snapshot);
    /// Sees the counters at the end of a tick and writes to the machine.
    fn tick(&mut self, sim: &mut SimMachine, snapshot: &Snapshot) -> TickActions;
}

/// steerd's policy: load model + `decide` + writes, with the policy state kept across
/// ticks exactly as the daemon keeps it.
#[derive(Debug)]
pub struct Steerd {
    pub config: Config,
    pub state: PolicyState,
    pub load: Load,
    /// Skip `decide` on ticks where `policy::can_skip` allows it, as the daemon does
    /// (on by default; off to check that skipping changes nothing).
    pub skip_idle: bool,
    /// Ticks that skipped `decide`.
    pub skipped: u32,
    inventory: Inventory,
    prev: Option<Snapshot>,
    /// The placement `decide` last saw and whether anything was written since: what the
    /// daemon learns from rediscovery and its own writes.
    decided_on: Option<Placement>,
    wrote: bool,
}

impl Steerd {
    pub fn new(config: Config) -> Self {
        Steerd {
            config,
            state: PolicyState::new(),
            load: Load::new(),
            skip_idle: true,
            skipped: 0,
            inventory: Inventory::default(),
            prev: None,
            decided_on: None,
            wrote: false,
        }
    }
}

impl Controller for Steerd {
    fn name(&self) -> &'static str {
        "steerd"
    }

    fn start(&mut self, sim: &SimMachine, snapshot: &Snapshot) {
        self.inventory = sim.inventory();
        self.prev = Some(snapshot.clone());
    }

    fn tick(&mut self, sim: &mut SimMachine, snapshot: &Snapshot) -> TickActions {
        if let Some(prev) = &self.prev {
            self.load.update(prev, snapshot, self.config.load.smoothing);
        }
        self.prev = Some(snapshot.clone());
        let placement = sim.placement();
        let input = DecideInput {
            topology: &sim.topology,
            inventory: &self.inventory,
            load: &self.load,
            config: &self.config,
            placement: &placement,
            now_ns: snapshot.taken_at_ns,
        };
        let model_unchanged = !self.wrote && self.decided_on.as_ref() == Some(&placement);
        if self.skip_idle && can_skip(&input, &self.state, model_unchanged) {
            skip_tick(&mut self.state);
            self.skipped += 1;
            return TickActions::default();
        }
        let started = Instant::now();
        let plan = decide(&input, &mut self.state);
        let decide_ns = started.elapsed().as_nanos() as u64;
        self.wrote = !plan.actions.is_empty();
        self.decided_on = Some(placement.clone());
        let mut changes = Vec::with_capacity(plan.actions.len());
        for action in &plan.actions {
            let accepted = match sim.write(&action.target, &action.new) {
                Ok(()) => {
                    self.state.record_applied(action, snapshot.taken_at_ns);
                    true
                }
                Err(err) => {
                    self.state.record_failed(action.target.clone(), err.0);
                    false
                }
            };
            changes.push(Change {
                target: action.target.clone(),
                old: action.old.clone(),
                new: action.new.clone(),
                reason: action.reason.kind.as_str().to_string(),
                accepted,
            });
        }
        TickActions {
            changes,
            notes: plan.notes,
            decide_ns,
        }
    }
}
