//! Policies that drive a simulated machine: steerd's own is the daemon's engine
//! ([`crate::engine`]) with the simulated kernel as its writer, so a scenario runs the
//! very tick the daemon runs — the same skipping, writes, read-backs, backoff and
//! reactions to refused writes.

use super::machine::{SimMachine, WriteError};
use crate::apply::{FailureKind, WriteFailure};
use crate::config::Config;
use crate::discover::Machine;
use crate::engine::{DryRun, Engine, Outcome, Sample, TickKind, Writer, Written};
use crate::knob::{Knob, KnobValue};
use crate::model::snapshot::Snapshot;
use crate::policy::{Note, PolicyState};

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
    /// Why nothing was done, when the policy decided and did nothing (steerd's plan says).
    pub idle_reason: Option<String>,
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

/// steerd: the engine, started on the simulated machine's model.
#[derive(Debug)]
pub struct Steerd {
    /// The policy's name in tables ("steerd" unless [`Steerd::named`]).
    name: &'static str,
    config: Config,
    engine: Option<Engine>,
    /// Skip `decide` on ticks where `policy::can_skip` allows it, as the daemon does
    /// (on by default; off to check that skipping changes nothing).
    pub skip_idle: bool,
    /// Ticks that skipped `decide`.
    pub skipped: u32,
    /// The buffer samples are handed to the engine in.
    buffer: Snapshot,
}

impl Steerd {
    pub fn new(config: Config) -> Self {
        Steerd {
            name: "steerd",
            config,
            engine: None,
            skip_idle: true,
            skipped: 0,
            buffer: Snapshot::default(),
        }
    }

    /// The same policy under another name, for a table that runs steerd with several
    /// configs (`rss.mode: off` and `auto`).
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The engine, once started.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }

    /// The engine (made on the first sample), shown the machine's current values: the
    /// simulator's rediscovery (its traffic moves where wide-mask vectors fire, a script
    /// may write values).
    fn engine_for<'a>(
        engine: &'a mut Option<Engine>,
        config: &Config,
        skip_idle: bool,
        sim: &SimMachine,
    ) -> &'a mut Engine {
        let engine = engine.get_or_insert_with(|| {
            let machine = Machine {
                topology: sim.topology.clone(),
                inventory: sim.inventory(),
                warnings: Vec::new(),
            };
            Engine::new(config.clone(), machine, PolicyState::new())
        });
        engine.skip_idle = skip_idle;
        engine.observe_placement(sim.placement());
        engine
    }
}

impl Controller for Steerd {
    fn name(&self) -> &'static str {
        self.name
    }

    fn start(&mut self, sim: &SimMachine, snapshot: &Snapshot) {
        // The baseline sample: the engine decides nothing on it, so nothing is written.
        self.buffer.clone_from(snapshot);
        let engine = Self::engine_for(&mut self.engine, &self.config, self.skip_idle, sim);
        let sample = Sample {
            snapshot: &mut self.buffer,
            interrupts: &mut || None,
        };
        engine.tick(sample, &mut DryRun);
    }

    fn tick(&mut self, sim: &mut SimMachine, snapshot: &Snapshot) -> TickActions {
        self.buffer.clone_from(snapshot);
        let engine = Self::engine_for(&mut self.engine, &self.config, self.skip_idle, sim);
        let sample = Sample {
            snapshot: &mut self.buffer,
            interrupts: &mut || None,
        };
        let report = engine.tick(sample, &mut SimWriter { sim });
        if report.kind == TickKind::Skipped {
            self.skipped += 1;
        }
        let changes = report
            .actions()
            .filter(|(_, outcome)| outcome.was_attempted())
            .map(|(action, outcome)| Change {
                target: action.target.clone(),
                old: action.old.clone(),
                new: action.new.clone(),
                reason: action.reason.kind.as_str().to_string(),
                accepted: *outcome == Outcome::Applied,
            })
            .collect();
        TickActions {
            changes,
            notes: report.plan.notes,
            idle_reason: report.plan.idle_reason,
            decide_ns: report.decide_ns,
        }
    }
}

/// The simulated kernel as the engine's writer.
pub(crate) struct SimWriter<'a> {
    pub(crate) sim: &'a mut SimMachine,
}

impl Writer for SimWriter<'_> {
    fn write(
        &mut self,
        knob: &Knob,
        value: &KnobValue,
        _mask_words: u32,
    ) -> Result<Written, WriteFailure> {
        match self.sim.write(knob, value) {
            Ok(()) => Ok(Written::Applied(
                self.sim.value(knob).unwrap_or_else(|| value.clone()),
            )),
            Err(WriteError { errno, why }) => Err(WriteFailure {
                knob: knob.clone(),
                kind: FailureKind::of_errno(knob, Some(errno)),
                errno: Some(errno as i32),
                message: format!("{errno:?}: {why}"),
            }),
        }
    }

    fn read(&mut self, knob: &Knob) -> Option<KnobValue> {
        self.sim.value(knob)
    }
}
