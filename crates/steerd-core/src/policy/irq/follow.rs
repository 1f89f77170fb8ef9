//! The transmit-follows-receive rule: a queue's separate transmit vector goes to the CPU
//! its receive vector fires on.
//!
//! It is a module of its own because it runs last, after placement and relief have
//! decided where every receive vector fires, and takes no part in their occupancy: it only
//! reads where they put the receive vectors.

use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};
use crate::model::inventory::IrqRole;
use crate::policy::context::Planner;
use crate::policy::plan::ReasonKind;

/// Moves each queue's separate transmit vector (virtio's `output.N`, `eth0-tx-N`) to the
/// CPU its receive vector fires on as planned, in full and outside the budget like the
/// placement rules. Transmit completions are light and belong with the queue pair's
/// receive work (same cache, and XPS maps transmit queues to that CPU); they take no part
/// in the occupancy, so a transmit vector never keeps a receive queue off a CPU. A
/// follower needs no dwell of its own: it moves only when its receive vector did, which
/// has one. Transmit vectors without a receive vector of the same queue number are left
/// where they are (off forbidden CPUs, as any IRQ).
pub fn follow_rx(p: &mut Planner) {
    for d in 0..p.devices.len() {
        if !p.devices[d].manages_irqs {
            continue;
        }
        for &irq_number in &p.devices[d].dev.irqs {
            let Some(slot) = p.slot_of(irq_number) else {
                continue;
            };
            let view = &p.irqs[slot];
            let (IrqRole::Tx, Some(queue), None) = (view.irq.role, view.irq.queue, view.blocker)
            else {
                continue;
            };
            if p.moved.contains(&irq_number) {
                continue;
            }
            let rx = p.devices[d]
                .vectors
                .iter()
                .copied()
                .find(|&s| p.irqs[s].irq.queue == Some(queue));
            let Some(rx) = rx else { continue };
            let Some(to) = p.irqs[rx].will_fire_on.or(p.irqs[rx].cpu) else {
                continue;
            };
            if !p.allowed.contains(to) {
                continue;
            }
            let view = &p.irqs[slot];
            let old = view.affinity.cloned().unwrap_or_default();
            if old.len() == 1 && old.contains(to) {
                continue;
            }
            let serves = p.serves(slot);
            let why = format!(
                "{} fires on CPU {to}; its transmit vector goes with it",
                p.serves(rx)
            );
            let expected = format!("{serves} fires only on CPU {to}, beside its receive queue");
            p.irqs[slot].cpu = Some(to);
            p.moved.insert(irq_number);
            p.push(
                Knob::IrqAffinity { irq: irq_number },
                Some(serves),
                KnobValue::Cpus(old),
                KnobValue::Cpus(CpuSet::from_iter([to])),
                (ReasonKind::FollowsRx, why),
                expected,
            );
        }
    }
}
