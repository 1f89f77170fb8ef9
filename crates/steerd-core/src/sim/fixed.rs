//! Two controllers that never decide anything, the ends the veth throughput bed
//! (`crates/steerd-testkit/src/lab/bed`) measures steerd against, so that the simulator can be run on the bed's
//! terms ([`super::scenarios::veth_bed`]): [`NoBalancer`] (the bed's `none`) and
//! [`HandRps`] (the bed's `hand`).

use super::machine::SimMachine;
use super::steerd::{Change, Controller, TickActions};
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};
use crate::model::snapshot::Snapshot;

/// No balancer at all: nothing is ever written. It exists for the bed's `none` run, the
/// floor steerd's delivered packets are compared with (on a veth, without RPS all receive
/// work stays on the sender's CPU).
#[derive(Debug, Default)]
pub struct NoBalancer;

impl Controller for NoBalancer {
    fn name(&self) -> &'static str {
        "none"
    }

    fn start(&mut self, _sim: &SimMachine, _snapshot: &Snapshot) {}

    fn tick(&mut self, _sim: &mut SimMachine, _snapshot: &Snapshot) -> TickActions {
        TickActions::default()
    }
}

/// RPS by hand: every online CPU in the mask of every rx queue of every NIC, written once
/// and never changed, the seeds' recipe and the bed's `hand` run, the ceiling steerd is
/// compared with. steerd with `rps: static` is not used for it: static masks wait for the
/// engine's first non-distress plan, and steerd also sets RFS tables, which the hand recipe
/// does not. A controller first acts at the end of tick 0 ([`Controller::start`] cannot
/// write), so the masks steer packets from tick 1 on; the bed writes them before its
/// traffic starts, and both measure a window well after that.
#[derive(Debug, Default)]
pub struct HandRps {
    written: bool,
}

impl HandRps {
    pub fn new() -> Self {
        HandRps::default()
    }
}

impl Controller for HandRps {
    fn name(&self) -> &'static str {
        "hand"
    }

    fn start(&mut self, _sim: &SimMachine, _snapshot: &Snapshot) {}

    fn tick(&mut self, sim: &mut SimMachine, _snapshot: &Snapshot) -> TickActions {
        if self.written {
            return TickActions::default();
        }
        self.written = true;
        let all = KnobValue::Cpus(sim.topology.online.clone());
        let targets: Vec<Knob> = sim
            .nics
            .iter()
            .flat_map(|nic| {
                (0..nic.spec.queues).map(|queue| Knob::RpsCpus {
                    device: nic.spec.name.clone(),
                    queue,
                })
            })
            .collect();
        let changes = targets
            .into_iter()
            .map(|target| {
                let old = sim
                    .value(&target)
                    .unwrap_or_else(|| KnobValue::Cpus(CpuSet::new()));
                let accepted = sim.write(&target, &all).is_ok();
                Change {
                    target,
                    old,
                    new: all.clone(),
                    reason: "hand".to_string(),
                    accepted,
                }
            })
            .collect();
        TickActions {
            changes,
            ..TickActions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::machine::NicSpec;
    use crate::sim::topo::{Shape, Siblings};

    fn machine() -> SimMachine {
        let shape = Shape::new(1, 2, 1, Siblings::Split);
        SimMachine::new(&shape, vec![NicSpec::veth("veth0", 4, 0)], 7)
    }

    #[test]
    fn none_writes_nothing_and_hand_writes_every_queue_once() {
        let mut sim = machine();
        let snapshot = sim.snapshot();
        let mut none = NoBalancer;
        none.start(&sim, &snapshot);
        for _ in 0..3 {
            let snapshot = sim.step();
            assert!(none.tick(&mut sim, &snapshot).changes.is_empty());
        }
        assert!((0..4).all(|q| sim.rps_mask("veth0", q).is_some_and(CpuSet::is_empty)));

        let mut hand = HandRps::new();
        hand.start(&sim, &snapshot);
        let snapshot = sim.step();
        let first = hand.tick(&mut sim, &snapshot);
        assert_eq!(first.changes.len(), 4);
        assert!(first.changes.iter().all(|c| c.accepted));
        let both = CpuSet::from_iter([0, 1]);
        assert!((0..4).all(|q| sim.rps_mask("veth0", q) == Some(&both)));
        let snapshot = sim.step();
        assert!(hand.tick(&mut sim, &snapshot).changes.is_empty());
    }
}
