//! `steerd plan`: sample over a window, decide once, print the plan. Writes nothing.
//!
//! It runs the daemon's engine on the daemon's samplers (per-tick and per-queue counters)
//! with a dry-run writer, so it decides as the daemon would. The daemon confirms a load
//! condition over several ticks before acting; a one-shot plan answers "what would steerd
//! do if this load persisted", so it decides with confirmation set to one tick and no
//! smoothing, and says so in its output.

use std::time::Duration;

use crate::config::Config;
use crate::discover::discover;
use crate::engine::sampling::{Depth, Sampling};
use crate::engine::{DryRun, Engine, Sample};
use crate::model::snapshot::Snapshot;
use crate::policy::{Plan, PolicyState};
use crate::root::Root;

/// Samples `window` apart, then decides once.
pub fn plan(root: &Root, config: &Config, window: Duration) -> Result<Plan, crate::Error> {
    let machine = discover(root)?;
    let mut sampling = Sampling::open(root)?;
    sampling.follow(&machine);
    let mut one_shot = config.clone();
    one_shot.hysteresis.confirm_ticks = 1;
    one_shot.hysteresis.distress_confirm_ticks = 1;
    one_shot.load.smoothing = 1.0;
    let mut engine = Engine::new(one_shot, machine, PolicyState::new());
    let mut buffer = Snapshot::default();
    let mut report = None;
    for sample in 0..2 {
        if sample > 0 {
            std::thread::sleep(window);
        }
        sampling.sample(&mut buffer, Depth::Full, None)?;
        report = Some(engine.tick(
            Sample {
                snapshot: &mut buffer,
                interrupts: &mut || sampling.interrupts(),
            },
            &mut DryRun,
        ));
    }
    Ok(report.map(|report| report.plan).unwrap_or_default())
}
