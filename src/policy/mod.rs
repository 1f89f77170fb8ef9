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
//!    `nohz_full`), IRQs onto their device's NUMA node, one queue vector per CPU and per
//!    physical core, NICs offset from each other;
//! 2. the distress fast path: IRQ moves, then RPS, for CPUs dropping packets;
//! 3. relief of other hot CPUs by IRQ moves;
//! 4. RPS on, widen, narrow, off (with RFS tables alongside);
//! 5. the global RFS table off once RPS is off everywhere.
//!
//! Steps 2 to 5 share a budget of `hysteresis.max_actions_per_tick` action groups.
//!
//! See `docs/policy.md` for the reasoning and the comparison with irqbalance.

mod context;
mod external;
pub mod hysteresis;
mod irq;
pub mod placement;
pub mod plan;
mod rfs;
mod rps;
pub mod state;

use crate::config::Config;
use crate::load::Load;
use crate::model::inventory::Inventory;
use crate::model::topology::Topology;

pub use context::RPS_INTERRUPT_SHARE;
pub use placement::{IrqAffinity, Placement, RxQueueValues};
pub use plan::{Action, Note, NoteKind, Plan, Reason, ReasonKind, Target, Value};
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
    rps::plan(&mut p, false);
    rfs::settle(&mut p);
    p.restart_streaks();
    let idle_reason = p.actions.is_empty().then(|| p.idle_reason());
    Plan {
        actions: p.actions,
        notes: p.notes,
        idle_reason,
    }
}

#[cfg(test)]
mod tests;
