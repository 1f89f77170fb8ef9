//! `steerd plan`: sample over a window, decide once, print the plan. Writes nothing.
//!
//! The daemon confirms a load condition over several ticks before acting; a one-shot plan
//! answers "what would steerd do if this load persisted", so it decides with confirmation
//! set to one tick and no smoothing, and says so in its output.

use std::time::Duration;

use crate::config::Config;
use crate::discover::discover;
use crate::kernel::sampler::TickSampler;
use crate::load::Load;
use crate::model::snapshot::Snapshot;
use crate::policy::{self, DecideInput, Placement, Plan, PolicyState};
use crate::root::Root;

/// Samples `window` apart, then decides once.
pub fn plan(root: &Root, config: &Config, window: Duration) -> Result<Plan, String> {
    let machine = discover(root).map_err(|e| format!("discovery failed: {e}"))?;
    let mut sampler = TickSampler::open(root).map_err(|e| e.to_string())?;
    let mut first = Snapshot::default();
    let mut second = Snapshot::default();
    sampler.sample(&mut first).map_err(|e| e.to_string())?;
    std::thread::sleep(window);
    sampler.sample(&mut second).map_err(|e| e.to_string())?;

    let mut one_shot = config.clone();
    one_shot.hysteresis.confirm_ticks = 1;
    one_shot.hysteresis.distress_confirm_ticks = 1;
    one_shot.load.smoothing = 1.0;
    let mut load = Load::new();
    load.update(&first, &second, one_shot.load.smoothing);
    let placement = Placement::from_inventory(&machine.inventory);
    let input = DecideInput {
        topology: &machine.topology,
        inventory: &machine.inventory,
        load: &load,
        config: &one_shot,
        placement: &placement,
        now_ns: second.taken_at_ns,
    };
    Ok(policy::decide(&input, &mut PolicyState::new()))
}
