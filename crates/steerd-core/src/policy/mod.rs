//! The policy engine: from the machine model, the load and the config to a [`Plan`].
//!
//! [`decide`] is pure: it does no I/O and depends only on its inputs and the policy's own
//! [`PolicyState`] (hysteresis streaks, what steerd wrote and when). That is what lets it
//! run on a simulated 1152-CPU machine in tests and benches, and be replayed.
//!
//! One tick runs the rules in order:
//!
//! 1. placement rules, at once and outside the action budget (they are count-based facts
//!    with a single fixed point): IRQs and RPS masks off forbidden CPUs (banned, isolated,
//!    `nohz_full`), queue vectors pinned to one CPU each, IRQs onto their device's NUMA
//!    node, one receive queue vector per CPU and per physical core, NICs offset from each
//!    other (and, last of all, transmit vectors beside their receive vectors, threaded
//!    NAPI polling threads beside their queue's interrupt, and with `xps: follow` each
//!    transmit queue's XPS mask on its receive queue's interrupt CPU);
//! 2. the distress fast path: IRQ moves, then RPS, for CPUs dropping packets;
//! 3. relief of other hot CPUs by IRQ moves;
//! 4. the RSS table lever: entries moved from hot receive queues to cool ones, one
//!    measured step at a time, kept or undone (`rss`);
//! 5. RPS on, widen, narrow, off (with RFS tables alongside); every change that spreads
//!    work is a trial, undone when the machine got worse (`rps_trial`);
//! 6. the global RFS table off once RPS is off everywhere.
//!
//! Steps 2 to 6 share a budget of `hysteresis.max_actions_per_tick` action groups.
//!
//! See `docs/policy.md` for the reasoning and the comparison with irqbalance.

mod context;
mod external;
pub mod hysteresis;
mod irq;
mod napi;
pub mod placement;
pub mod plan;
mod rfs;
mod rps;
pub mod rps_trial;
pub mod rss;
pub mod rss_table;
mod silent;
pub mod state;
mod xps;

use crate::config::Config;
use crate::knob::{Knob, KnobValue};
use crate::load::Load;
use crate::model::inventory::Inventory;
use crate::model::topology::Topology;

pub use context::{RPS_INTERRUPT_SHARE, work_floor};
pub use placement::{IrqAffinity, Placement, RxQueueValues};
pub use plan::{Action, Note, NoteKind, Plan, Reason, ReasonKind};
pub use rfs::flow_cnt_for;
pub use state::PolicyState;

/// Everything `decide` reads.
#[derive(Debug, Clone, Copy)]
pub struct DecideInput<'a> {
    pub topology: &'a Topology,
    pub inventory: &'a Inventory,
    pub load: &'a Load,
    pub config: &'a Config,
    /// Current values of every writable target.
    pub placement: &'a Placement,
    /// CLOCK_MONOTONIC nanoseconds (the latest snapshot's time); dwell times count on it.
    pub now_ns: u64,
}

/// Decides one tick: the actions to take now, with reasons, and notes on what was refused.
/// Updates the hysteresis streaks in `state`; record applied actions with
/// [`PolicyState::record_applied`].
pub fn decide(input: &DecideInput<'_>, state: &mut PolicyState) -> Plan {
    let mut p = context::Planner::new(input, state);
    let misplaced = irq::analyse(&mut p);
    irq::place(&mut p, &misplaced, true);
    irq::place(&mut p, &misplaced, false);
    rps::purge_forbidden(&mut p);
    irq::relieve(&mut p, true);
    rps::plan(&mut p, true);
    irq::relieve(&mut p, false);
    rss::balance(&mut p);
    rps::plan(&mut p, false);
    irq::follow_rx(&mut p);
    napi::follow_irq(&mut p);
    xps::follow(&mut p);
    rfs::settle(&mut p);
    silent::notice(&mut p);
    p.restart_streaks();
    p.state.settled = p.actions.is_empty() && p.waiting.is_empty();
    let idle_reason = p.actions.is_empty().then(|| p.idle_reason());
    Plan {
        actions: p.actions,
        notes: p.notes,
        idle_reason,
    }
}

/// Whether this tick can go without [`decide`], because deciding could not do anything:
/// the last decision was settled (no action, nothing waiting), the caller has changed
/// nothing since (`model_unchanged`: no rediscovery, reload or write), steerd has no
/// RPS mask or RFS table of its own in place (turning those off again is a matter of
/// calm ticks and dwell times, which need `decide`; the calm streaks are used for nothing
/// else), and every online CPU is calm and far from any hot signal (no drops or squeezes,
/// softirq share under the low watermark, receive work under `busy_pps`).
///
/// On an idle server this is almost every tick: the daemon then samples and updates the
/// load only, which is what keeps an idle tick within the CPU budget
/// (docs/performance.md). [`skip_tick`] keeps the hysteresis streaks as `decide` would.
pub fn can_skip(input: &DecideInput<'_>, state: &PolicyState, model_unchanged: bool) -> bool {
    if !(model_unchanged && state.settled) {
        return false;
    }
    let temporary_in_place = state
        .written
        .iter()
        .any(|(target, value)| match (target, value) {
            (Knob::RpsCpus { .. }, KnobValue::Cpus(cpus)) => !cpus.is_empty(),
            (Knob::RpsFlowCnt { .. } | Knob::RpsSockFlowEntries, KnobValue::Count(n)) => *n > 0,
            _ => false,
        });
    if temporary_in_place || rss_lever_may_act(input, state) {
        return false;
    }
    // A busy device's silent queues are said once (a note), which needs `decide`; a set
    // already said needs nothing more.
    let floor = work_floor(input.config);
    if input.load.rx_queues.iter().any(|(device, rates)| {
        crate::silent_queues::find(rates, floor).is_some_and(|found| {
            !state.has_reported(
                plan::NoteKind::SilentQueues,
                &silent::note_key(device, &found),
            )
        })
    }) {
        return false;
    }
    let w = &input.config.watermarks;
    input.load.cpus.iter().all(|load| {
        if !load.online {
            return true;
        }
        load.warm
            && load.dropped_per_sec == 0.0
            && load.squeezed_per_sec == 0.0
            && load.net_share < w.low
            && load.processed_pps < w.busy_pps
    })
}

/// Whether the RSS table lever could act on this tick: it is on, and some device with a
/// table has a queue carrying measured work (the lever evens queues out whether or not a
/// CPU is hot), or a step is being measured.
fn rss_lever_may_act(input: &DecideInput<'_>, state: &PolicyState) -> bool {
    if input.config.rss.mode == crate::config::RssMode::Off {
        return false;
    }
    if state.rss.values().any(rss::DeviceLever::busy) {
        return true;
    }
    let floor = work_floor(input.config);
    input.placement.rss_tables.keys().any(|device| {
        input
            .load
            .rx_queues
            .get(device)
            .is_some_and(|rates| rates.iter().flatten().any(|&pps| pps >= floor))
    })
}

/// Accounts for a tick [`can_skip`] allowed to go without [`decide`]: every CPU was calm
/// with no hot signal, so `decide` would have grown every calm streak and reset the hot
/// and distress streaks (already 0), and changed nothing else.
pub fn skip_tick(state: &mut PolicyState) {
    state.ticks += 1;
    for streak in &mut state.streaks {
        streak.calm = streak.calm.saturating_add(1);
        streak.hot = 0;
        streak.distress = 0;
    }
}

#[cfg(test)]
mod tests;
