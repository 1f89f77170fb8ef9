//! An irqbalance-like baseline, to compare steerd with on the same simulated machines.
//!
//! It follows irqbalance's habits (irqbalance.c, irqlist.c, placement.c) in simplified form:
//!
//! * it wakes every 10 s (`--interval` default) and does nothing in between;
//! * at its first pass it places every IRQ by count: the least used core, then CPU, of the
//!   device's NUMA node, never a banned or isolated CPU;
//! * afterwards it estimates each IRQ's load as its share of its CPU's interrupts times the
//!   CPU's irq+softirq time, and migrates IRQs off CPUs whose load exceeds the average by a
//!   standard deviation, never the only IRQ of a CPU, heaviest first, until the CPU is down
//!   to the average; migrated IRQs go to the least loaded CPU of the node;
//! * when the machine is idle it packs IRQs onto one CPU (power-save), and has to spread
//!   them again at the next pass after load returns;
//! * it knows nothing of RPS or RFS and does not look at drops or time_squeeze.

use std::collections::HashMap;

use super::machine::SimMachine;
use super::steerd::{Change, Controller, TickActions};
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};
use crate::model::inventory::IrqRole;
use crate::model::snapshot::Snapshot;

/// Busy share under which every CPU counts as idle for power-save.
const IDLE_SHARE: f64 = 0.05;

/// The baseline's state.
#[derive(Debug)]
pub struct IrqbalanceLike {
    /// Ticks between passes.
    pub interval: u32,
    /// CPUs never used (IRQBALANCE_BANNED_CPUS, plus isolated and nohz_full).
    pub banned: CpuSet,
    ticks: u32,
    last: Option<Snapshot>,
    placed: bool,
}

impl IrqbalanceLike {
    pub fn new(banned: CpuSet) -> Self {
        IrqbalanceLike {
            interval: 10,
            banned,
            ticks: 0,
            last: None,
            placed: false,
        }
    }
}

/// One IRQ the baseline balances.
struct Managed {
    irq: u32,
    allowed: CpuSet,
    cpu: Option<u32>,
    load: f64,
}

impl Controller for IrqbalanceLike {
    fn name(&self) -> &'static str {
        "irqbalance-like"
    }

    fn start(&mut self, _sim: &SimMachine, snapshot: &Snapshot) {
        self.last = Some(snapshot.clone());
    }

    fn tick(&mut self, sim: &mut SimMachine, snapshot: &Snapshot) -> TickActions {
        let pass = self.ticks.is_multiple_of(self.interval);
        self.ticks += 1;
        if !pass {
            return TickActions::default();
        }
        let Some(last) = self.last.replace(snapshot.clone()) else {
            return TickActions::default();
        };
        let topology = sim.topology.clone();
        let banned = self
            .banned
            .union(&topology.isolated)
            .union(&topology.nohz_full);
        let usable = topology.online.difference(&banned);
        let inventory = sim.inventory();
        let mut irqs: Vec<Managed> = inventory
            .irqs
            .iter()
            .filter(|irq| irq.device.is_some() && !irq.managed)
            .map(|irq| {
                let device = irq
                    .device
                    .as_deref()
                    .and_then(|name| inventory.device(name));
                let local = device
                    .and_then(|d| d.local_cpus.clone())
                    .unwrap_or_else(|| topology.online.clone());
                let allowed = local.intersection(&usable);
                Managed {
                    irq: irq.irq,
                    allowed: if allowed.is_empty() {
                        usable.clone()
                    } else {
                        allowed
                    },
                    cpu: sim.effective_cpu(irq.irq),
                    load: if irq.role == IrqRole::Other { 0.0 } else { 1.0 },
                }
            })
            .collect();

        // CPU irq+softirq share over the interval, and each IRQ's share of it.
        let share = cpu_shares(&last, snapshot);
        let mut per_cpu_interrupts: HashMap<u32, f64> = HashMap::new();
        let deltas: Vec<f64> = irqs
            .iter()
            .map(|m| {
                let now = snapshot
                    .irq_totals
                    .get(m.irq as usize)
                    .copied()
                    .unwrap_or(0);
                let then = last.irq_totals.get(m.irq as usize).copied().unwrap_or(0);
                now.saturating_sub(then) as f64
            })
            .collect();
        for (m, delta) in irqs.iter().zip(&deltas) {
            if let Some(cpu) = m.cpu {
                *per_cpu_interrupts.entry(cpu).or_default() += delta;
            }
        }
        for (m, delta) in irqs.iter_mut().zip(&deltas) {
            if let Some(cpu) = m.cpu {
                let total = per_cpu_interrupts.get(&cpu).copied().unwrap_or(0.0);
                let cpu_share = share.get(&cpu).copied().unwrap_or(0.0);
                m.load = if total > 0.0 {
                    cpu_share * delta / total
                } else {
                    0.0
                };
            }
        }

        let mut moves: Vec<(u32, CpuSet)> = Vec::new();
        let idle = share.values().all(|&s| s < IDLE_SHARE);
        if !self.placed {
            // First pass: everything is new and placed by count.
            self.placed = true;
            let mut count: HashMap<u32, u32> = HashMap::new();
            let mut order: Vec<usize> = (0..irqs.len()).collect();
            order.sort_by_key(|&i| irqs[i].irq);
            for i in order {
                let cpu = least_used(&topology, &irqs[i].allowed, &count, &HashMap::new());
                if let Some(cpu) = cpu {
                    *count.entry(cpu).or_default() += 1;
                    if irqs[i].cpu != Some(cpu) {
                        moves.push((irqs[i].irq, CpuSet::from_iter([cpu])));
                    }
                }
            }
        } else if idle {
            // Power-save: pack onto the first usable CPU.
            if let Some(first) = usable.first() {
                for m in &irqs {
                    if m.cpu != Some(first) && m.allowed.contains(first) {
                        moves.push((m.irq, CpuSet::from_iter([first])));
                    }
                }
            }
        } else {
            moves = rebalance(&topology, &irqs, &share);
        }

        let mut changes = Vec::new();
        for (irq, cpus) in moves {
            let target = Knob::IrqAffinity { irq };
            let old = sim.affinity(irq).cloned().unwrap_or_default();
            if old == cpus {
                continue;
            }
            let value = KnobValue::Cpus(cpus);
            let accepted = sim.write(&target, &value).is_ok();
            changes.push(Change {
                target,
                old: KnobValue::Cpus(old),
                new: value,
                reason: "irqbalance".to_string(),
                accepted,
            });
        }
        TickActions {
            changes,
            notes: Vec::new(),
            idle_reason: None,
            decide_ns: 0,
        }
    }
}

/// irq+softirq share of each online CPU between two snapshots.
fn cpu_shares(last: &Snapshot, now: &Snapshot) -> HashMap<u32, f64> {
    let before: HashMap<u32, _> = last.cpu_times.iter().map(|t| (t.cpu, t)).collect();
    now.cpu_times
        .iter()
        .filter_map(|t| {
            let b = before.get(&t.cpu)?;
            let total = t.total().checked_sub(b.total()).filter(|&x| x > 0)?;
            let net = (t.irq + t.softirq).saturating_sub(b.irq + b.softirq);
            Some((t.cpu, net as f64 / total as f64))
        })
        .collect()
}

/// The allowed CPU with the least load (then fewest IRQs) on the least loaded core.
fn least_used(
    topology: &crate::model::topology::Topology,
    allowed: &CpuSet,
    count: &HashMap<u32, u32>,
    load: &HashMap<u32, f64>,
) -> Option<u32> {
    let core_of = |cpu: u32| topology.cpu(cpu).and_then(|c| c.core).unwrap_or(cpu);
    let mut core_load: HashMap<u32, (f64, u32)> = HashMap::new();
    for cpu in allowed.iter() {
        let entry = core_load.entry(core_of(cpu)).or_default();
        entry.0 += load.get(&cpu).copied().unwrap_or(0.0);
        entry.1 += count.get(&cpu).copied().unwrap_or(0);
    }
    allowed.iter().min_by(|&a, &b| {
        let (ca, cb) = (core_load[&core_of(a)], core_load[&core_of(b)]);
        ca.0.total_cmp(&cb.0)
            .then(ca.1.cmp(&cb.1))
            .then(
                load.get(&a)
                    .copied()
                    .unwrap_or(0.0)
                    .total_cmp(&load.get(&b).copied().unwrap_or(0.0)),
            )
            .then(
                count
                    .get(&a)
                    .copied()
                    .unwrap_or(0)
                    .cmp(&count.get(&b).copied().unwrap_or(0)),
            )
            .then(a.cmp(&b))
    })
}

/// Migrates IRQs off overloaded CPUs (load - stddev >= average, more than one IRQ) onto
/// the least loaded CPUs.
fn rebalance(
    topology: &crate::model::topology::Topology,
    irqs: &[Managed],
    share: &HashMap<u32, f64>,
) -> Vec<(u32, CpuSet)> {
    let mut on_cpu: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, m) in irqs.iter().enumerate() {
        if let Some(cpu) = m.cpu {
            on_cpu.entry(cpu).or_default().push(i);
        }
    }
    // Balance within each group of CPUs that IRQs may use (a NUMA node).
    let mut groups: Vec<CpuSet> = Vec::new();
    for m in irqs {
        if !groups.contains(&m.allowed) {
            groups.push(m.allowed.clone());
        }
    }
    let mut load: HashMap<u32, f64> = share.clone();
    let mut count: HashMap<u32, u32> = on_cpu.iter().map(|(c, v)| (*c, v.len() as u32)).collect();
    let mut moves = Vec::new();
    for group in groups {
        let cpus: Vec<u32> = group.iter().collect();
        if cpus.is_empty() {
            continue;
        }
        let loads: Vec<f64> = cpus
            .iter()
            .map(|c| load.get(c).copied().unwrap_or(0.0))
            .collect();
        let avg = loads.iter().sum::<f64>() / loads.len() as f64;
        let std =
            (loads.iter().map(|l| (l - avg).powi(2)).sum::<f64>() / loads.len() as f64).sqrt();
        let mut migrating: Vec<usize> = Vec::new();
        for &cpu in &cpus {
            let cpu_load = load.get(&cpu).copied().unwrap_or(0.0);
            let Some(list) = on_cpu.get(&cpu) else {
                continue;
            };
            if cpu_load - std < avg || list.len() < 2 {
                continue;
            }
            let mut sorted: Vec<usize> = list
                .iter()
                .copied()
                .filter(|&i| irqs[i].allowed == group)
                .collect();
            sorted.sort_by(|&a, &b| irqs[b].load.total_cmp(&irqs[a].load));
            let mut adjustment = cpu_load;
            for i in sorted {
                if adjustment <= avg {
                    break;
                }
                adjustment -= irqs[i].load;
                *load.entry(cpu).or_default() -= irqs[i].load;
                *count.entry(cpu).or_default() -= 1;
                migrating.push(i);
            }
        }
        migrating.sort_by(|&a, &b| irqs[b].load.total_cmp(&irqs[a].load));
        for i in migrating {
            if let Some(cpu) = least_used(topology, &group, &count, &load) {
                *load.entry(cpu).or_default() += irqs[i].load;
                *count.entry(cpu).or_default() += 1;
                moves.push((irqs[i].irq, CpuSet::from_iter([cpu])));
            }
        }
    }
    moves
}
