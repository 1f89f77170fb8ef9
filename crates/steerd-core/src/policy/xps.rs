//! Transmit steering (`xps: follow`): each transmit queue's XPS mask follows its receive
//! queue's interrupt.
//!
//! XPS says which transmit queue a CPU sends on. Left as most drivers set it (one CPU per
//! queue in queue order, or none), a socket on one CPU may send through a queue whose
//! vector, completions and lock live on a CPU far away: cache misses and contention on
//! every packet (seed 001's affinity section; perftune and netutils' autoxps set it
//! statically for the same reason). This rule keeps it where steerd put the receive side:
//! transmit queue N gets the CPU the receive queue N's interrupt fires on (where its
//! transmit vector follows too, `irq::follow_rx`), plus every online CPU with no queue
//! interrupt of the device whose nearest such CPU it is (same core, then last-level
//! cache, then NUMA node; ties to the queue with fewer CPUs so far, then the lower
//! number), so every CPU sends on a nearby queue. Run after every IRQ rule of the tick,
//! so the masks follow moves in the same plan; like the other followers it is outside
//! the action budget. A device whose receive vectors are not all placed on one CPU each
//! waits; a mask someone else set after steerd is frozen like any external change.

use std::collections::BTreeMap;

use super::context::Planner;
use super::plan::ReasonKind;
use crate::config::XpsMode;
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};

pub fn follow(p: &mut Planner) {
    if p.config.xps != XpsMode::Follow {
        return;
    }
    for d in 0..p.devices.len() {
        if !p.devices[d].manages_irqs {
            continue;
        }
        let Some(wanted) = wanted_masks(p, d) else {
            continue;
        };
        let device = p.devices[d].dev.name.clone();
        for (queue, mask) in wanted {
            let target = Knob::XpsCpus {
                device: device.clone(),
                queue,
            };
            let Some(old) = p.placement.xps_cpus(&device, queue).cloned() else {
                continue;
            };
            if old == mask || p.frozen(&target) {
                continue;
            }
            let why = format!(
                "{device} rx-{queue}'s interrupt fires on CPU {}; xps: follow",
                anchor_of(p, d, queue).map_or_else(|| "?".to_string(), |c| c.to_string())
            );
            let expected = format!(
                "sockets on CPUs {} send through {device} tx-{queue}, beside its receive queue",
                mask.to_list()
            );
            p.push(
                target,
                Some(format!("{device} tx-{queue}")),
                KnobValue::Cpus(old),
                KnobValue::Cpus(mask),
                (ReasonKind::XpsFollow, why),
                expected,
            );
        }
    }
}

/// The CPU receive queue `queue` of device `d` has its interrupt on, as this plan leaves
/// it.
fn anchor_of(p: &Planner, d: usize, queue: u32) -> Option<u32> {
    let slot = p.devices[d]
        .vectors
        .iter()
        .copied()
        .find(|&s| p.irqs[s].irq.queue == Some(queue))?;
    p.irqs[slot].will_fire_on.or(p.irqs[slot].cpu)
}

/// Each transmit queue's wanted mask, by queue number: `None` when the device has no
/// transmit queue with an XPS file and a receive queue of its number, or when one of
/// those receive queues' vectors is not placed yet.
fn wanted_masks(p: &Planner, d: usize) -> Option<BTreeMap<u32, CpuSet>> {
    let dev = p.devices[d].dev;
    let mut anchors: Vec<(u32, u32)> = Vec::new();
    for tx in &dev.tx_queues {
        if p.placement.xps_cpus(&dev.name, tx.index).is_none() {
            continue;
        }
        let has_rx = p.devices[d]
            .vectors
            .iter()
            .any(|&s| p.irqs[s].irq.queue == Some(tx.index));
        if !has_rx {
            continue;
        }
        anchors.push((tx.index, anchor_of(p, d, tx.index)?));
    }
    if anchors.is_empty() {
        return None;
    }
    let mut wanted: BTreeMap<u32, CpuSet> = anchors
        .iter()
        .map(|&(queue, cpu)| (queue, CpuSet::from_iter([cpu])))
        .collect();
    let anchored: CpuSet = anchors.iter().map(|&(_, cpu)| cpu).collect();
    for cpu in p.topology.online.iter() {
        if anchored.contains(cpu) {
            continue;
        }
        let nearest = anchors.iter().min_by_key(|&&(queue, anchor)| {
            let taken = wanted.get(&queue).map_or(0, CpuSet::len);
            (distance(p, cpu, anchor), taken, queue)
        });
        if let Some(&(queue, _)) = nearest {
            wanted.entry(queue).or_default().insert(cpu);
        }
    }
    Some(wanted)
}

/// How far apart two CPUs are for cache purposes: 0 the same core, 1 the same
/// last-level cache, 2 the same NUMA node, 3 otherwise.
fn distance(p: &Planner, a: u32, b: u32) -> u8 {
    let core = |c: u32| p.core_of.get(c as usize).copied();
    let llc = |c: u32| p.topology.cpu(c).and_then(|cpu| cpu.llc);
    let node = |c: u32| p.node_of.get(c as usize).copied().flatten();
    if core(a).is_some() && core(a) == core(b) {
        0
    } else if llc(a).is_some() && llc(a) == llc(b) {
        1
    } else if node(a).is_some() && node(a) == node(b) {
        2
    } else {
        3
    }
}
