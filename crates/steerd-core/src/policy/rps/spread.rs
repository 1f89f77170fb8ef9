//! Turning RPS on and widening it: where a hot CPU cannot be relieved by an IRQ move
//! (one queue carries its work, its vector's move did not take its work along, or the
//! device has no IRQ at all), spread the hot queues' protocol work over CPUs with
//! headroom, over the device's local CPUs or, on a NIC with a queue per core, one CPU per
//! other core ([`per_core_relief`]).
//!
//! It is a module of its own because it is the one RPS rule that decides from heat which
//! queues need spreading and over which CPUs; every change it plans starts a trial
//! (`rps_trial`) through [`super::apply`], which with the rules that narrow, undo or follow
//! the config stays in [`super`].

use super::{apply, note_foreign_mask, owned, queues, target};
use crate::cpuset::CpuSet;
use crate::policy::context::{Planner, RPS_INTERRUPT_SHARE};
use crate::policy::hysteresis::{HotSignal, kilo};
use crate::policy::plan::ReasonKind;

/// Turns RPS on or widens it where a hot CPU cannot be relieved by an IRQ move.
pub(super) fn turn_on(p: &mut Planner, d: usize, distress: bool, unexplained: &[f64]) {
    let name = p.devices[d].dev.name.clone();
    let has_vectors = !p.devices[d].vectors.is_empty();
    let (hot_cpus, hot_queues, why) = if has_vectors {
        let one_per_core = p.devices[d].dev.rx_queues.len() >= p.devices[d].local_cores;
        // A confirmed hot queue decides for the device; queues whose CPUs show the same
        // signal, confirmed or not yet, come along (one decision, one mask).
        let mut hot_cpus = CpuSet::new();
        let mut hot_queues = Vec::new();
        let mut why = String::new();
        let mut first_interval = None;
        for &slot in &p.devices[d].vectors {
            let view = &p.irqs[slot];
            let (Some(cpu), Some(queue)) = (view.cpu, view.irq.queue) else {
                continue;
            };
            let heat = p.heat_of(cpu);
            let signal = matches!(
                heat.signal,
                Some(HotSignal::Distress { .. } | HotSignal::Pressure { .. })
            );
            // A vector whose move did not take effect cannot take its work away by moving
            // again (its NAPI keeps polling here), however small its share of the heat:
            // with every other queue's vector on a CPU of its own, nothing else would
            // relieve this one (lab, igb on 6.1, `sat-cpu0`).
            let stuck = view.will_fire_on.filter(|&mask_cpu| mask_cpu != cpu);
            if !signal
                || p.relieved.contains(cpu)
                || (stuck.is_none() && !carries_the_heat(p, cpu, view.pps))
            {
                continue;
            }
            let decides = heat.under_pressure() && (!distress || heat.distress);
            if decides && heat.spell < min_spell(p) {
                first_interval = Some(cpu);
                continue;
            }
            if decides && why.is_empty() {
                why = match stuck {
                    Some(mask_cpu) => format!(
                        "{}; {name} rx-{queue} brings {} pkt/s there although its IRQ was moved to CPU {mask_cpu} (its NAPI keeps polling on CPU {cpu}), so moving its IRQ cannot help",
                        heat.describe(cpu, p.config),
                        kilo(view.pps)
                    ),
                    None => format!(
                        "{}; {name} rx-{queue} alone brings {} pkt/s there, so moving its IRQ cannot help",
                        heat.describe(cpu, p.config),
                        kilo(view.pps)
                    ),
                };
            }
            hot_cpus.insert(cpu);
            hot_queues.push(queue);
        }
        if why.is_empty() {
            if let Some(cpu) = first_interval {
                p.waiting.push(spell_too_short(&name, cpu));
            }
            return;
        }
        if hot_queues.is_empty() {
            return;
        }
        // The table lever goes first: it evens the hash out at no per-packet cost.
        if !distress && let Some(wait) = crate::policy::rss::holds_off_rps(p, &name) {
            p.waiting.push(wait);
            return;
        }
        let why = format!("{why}; {}", table_lever_cannot(p, &name));
        if one_per_core {
            // Every core already has a queue: only the hot queues spread, each over the
            // other cores, until the RSS indirection lever can even the hash out.
            per_core_relief(p, d, distress, &hot_cpus, &hot_queues, why);
            return;
        }
        // Queues carrying a skewed share are widened with the hot ones.
        let rates: Vec<(u32, f64)> = p.devices[d]
            .vectors
            .iter()
            .filter_map(|&slot| Some((p.irqs[slot].irq.queue?, p.irqs[slot].pps)))
            .collect();
        let mean = rates.iter().map(|r| r.1).sum::<f64>() / rates.len().max(1) as f64;
        for (queue, pps) in rates {
            if pps >= 2.0 * mean && pps >= p.work_floor() && !hot_queues.contains(&queue) {
                hot_queues.push(queue);
            }
        }
        (hot_cpus, hot_queues, why)
    } else {
        let home = &p.devices[d].home;
        let best = (0..p.heat.len() as u32)
            .filter(|&cpu| {
                let heat = p.heat_of(cpu);
                heat.hot
                    && (!distress || heat.distress)
                    && !p.relieved.contains(cpu)
                    && home.contains(cpu)
            })
            .filter(|&cpu| {
                let left = unexplained.get(cpu as usize).copied().unwrap_or(0.0);
                carries_the_heat(p, cpu, left)
            })
            .max_by(|a, b| unexplained[*a as usize].total_cmp(&unexplained[*b as usize]));
        let Some(cpu) = best else {
            return;
        };
        if p.heat_of(cpu).spell < min_spell(p) {
            p.waiting.push(spell_too_short(&name, cpu));
            return;
        }
        let why = format!(
            "{}; {} pkt/s there come from no queue IRQ, and {name} has none: only RPS can spread it",
            p.heat_of(cpu).describe(cpu, p.config),
            kilo(unexplained[cpu as usize])
        );
        let all: Vec<u32> = p.devices[d]
            .dev
            .rx_queues
            .iter()
            .filter(|q| q.rps_cpus.is_some())
            .map(|q| q.index)
            .collect();
        (CpuSet::from_iter([cpu]), all, why)
    };

    let dev_queues = queues(p, d);
    let mask = spread_mask(p, d, &hot_cpus, has_vectors);
    let why = if has_vectors && hot_queues.len() > 1 {
        let list: Vec<String> = hot_queues.iter().map(|q| format!("rx-{q}")).collect();
        format!(
            "{why}; with {} (on CPUs {})",
            list.join(", "),
            hot_cpus.to_list()
        )
    } else {
        why
    };
    if mask.is_empty() || !has_headroom(p, &name, &mask, &hot_cpus) {
        return;
    }
    let dwell = p.config.hysteresis.rps_dwell.as_nanos() as u64;
    let mut changes = Vec::new();
    let mut all_off = true;
    for (queue, current) in &dev_queues {
        let mask = widened(p, d, *queue, current, &mask);
        if !hot_queues.contains(queue) || *current == mask {
            continue;
        }
        let t = target(p, d, *queue);
        if p.frozen(&t) {
            continue;
        }
        if !current.is_empty() && !current.is_subset(&mask) && !owned(p, d, *queue, current) {
            note_foreign_mask(p, &name, *queue, t, current);
            continue;
        }
        if !distress && !p.state.dwelt(&t, p.now_ns, dwell) {
            p.waiting.push(format!(
                "{name} rx-{queue}: RPS changed less than hysteresis.rps_dwell ago"
            ));
            return;
        }
        all_off &= current.is_empty();
        changes.push((*queue, mask.clone()));
    }
    let kind = if all_off {
        ReasonKind::RpsOn
    } else {
        ReasonKind::RpsWiden
    };
    let expected = format!(
        "protocol work of {} spread over CPUs {}; the interrupting CPU keeps about {:.0}% of the per-packet cost plus an IPI per batch",
        if has_vectors {
            format!("{name}'s hot queues")
        } else {
            name.clone()
        },
        mask.to_list(),
        100.0 * RPS_INTERRUPT_SHARE
    );
    apply(p, d, changes, kind, why, expected, true);
}

/// Whether some CPU of `mask` outside `hot` can take work: it shows no hot signal this
/// tick (confirmed or not) and its irq+softirq share is under the high watermark.
/// Spreading onto CPUs that are as busy as the hot one relieves nothing: it queues packets
/// in their backlogs (softnet drops) and adds an IPI per batch. Seen in the lab's
/// `sat-cpu0` (issue 30): once the four queues had a CPU each, every CPU was saturated,
/// and RPS masks chased the heat from CPU to CPU for four seconds while half a million
/// packets were dropped from the backlogs. When none can, the plan says so.
fn has_headroom(p: &mut Planner, name: &str, mask: &CpuSet, hot: &CpuSet) -> bool {
    let high = p.config.watermarks.high;
    let cool = mask
        .iter()
        .any(|cpu| !hot.contains(cpu) && p.load.cpu(cpu).is_some() && !is_full(p, cpu));
    if cool {
        return true;
    }
    p.waiting.push(format!(
        "{name}: RPS over CPUs {} cannot relieve CPUs {}: none of them has headroom (each is hot or at irq+softirq share >= {high:.2})",
        mask.to_list(),
        hot.to_list()
    ));
    false
}

/// The mask a queue gets when `wanted` is proposed: a mask steerd set keeps its CPUs (a
/// widening adds CPUs, it never swaps them: swapping chased the heat from CPU to CPU in
/// the lab's `sat-cpu0`); any other mask is replaced.
fn widened(p: &Planner, d: usize, queue: u32, current: &CpuSet, wanted: &CpuSet) -> CpuSet {
    if !current.is_empty() && owned(p, d, queue, current) {
        current.union(wanted)
    } else {
        wanted.clone()
    }
}

/// Whether `pps` of a hot CPU's receive work (one queue's, or the work no queue IRQ
/// explains) is what makes it hot: at least half of the CPU's work and at least the work
/// floor (`watermarks.busy_pps` x 0.1). No absolute packet rate is asked for: what a
/// packet costs differs a hundredfold between a bare UDP sink and a path through a
/// thousand policy-routing or netfilter rules, and the CPU's irq+softirq time share has
/// already said that the CPU is hot (issue 30: on the veth bed a CPU at 0.91 irq+softirq
/// processed 22k pkt/s, under the 50k `busy_pps`, and RPS never came on). A CPU hot by
/// imbalance alone met `busy_pps` when it was classified.
fn carries_the_heat(p: &Planner, cpu: u32, pps: f64) -> bool {
    pps >= p.work_floor() && pps >= 0.5 * p.work_of(cpu)
}

/// Why the RSS table lever is not the answer for a device's hot queue, for RPS's reason:
/// the plan says which of the three levers it chose and why the others could not help.
fn table_lever_cannot(p: &Planner, name: &str) -> String {
    if let Some(why) = crate::policy::rss::why_not_table(p, name) {
        return format!("the RSS table cannot help: {why}");
    }
    if !p.placement.rss_tables.contains_key(name) {
        return format!("{name} has no RSS table steerd can set");
    }
    match p.config.rss.mode {
        crate::config::RssMode::Auto => "the RSS table is not the answer now".to_string(),
        mode => format!("the RSS table lever is {mode:?} (rss.mode)").to_lowercase(),
    }
}

/// RPS for the hot queues of a NIC with a hardware queue per local core (issue 14): moving
/// a queue's IRQ cannot help (it takes all its work along, and every core already has a
/// queue), so each hot queue's protocol work spreads over the device's other allowed
/// NUMA-local cores, one CPU per core (`per_core_mask`), as the kernel's scaling.rst sets
/// RPS for a queue: the interrupting CPU keeps the driver's share of each packet. Same
/// hysteresis as any RPS change (confirmed pressure, `rps_dwell`, the action budget,
/// calm-down narrowing), and the predicted cut of the hot CPU's work must reach
/// `min_gain`. The RSS indirection table (a later lever) would fix the hash instead.
fn per_core_relief(
    p: &mut Planner,
    d: usize,
    distress: bool,
    hot_cpus: &CpuSet,
    hot_queues: &[u32],
    why: String,
) {
    let name = p.devices[d].dev.name.clone();
    let dwell = p.config.hysteresis.rps_dwell.as_nanos() as u64;
    let min_gain = p.config.hysteresis.min_gain;
    let dev_queues = queues(p, d);
    let mut changes = Vec::new();
    let mut all_off = true;
    let mut spread = CpuSet::new();
    let mut irq_cpus = CpuSet::new();
    for &queue in hot_queues {
        let Some((_, current)) = dev_queues.iter().find(|(q, _)| *q == queue) else {
            continue;
        };
        let vector = p.devices[d]
            .vectors
            .iter()
            .map(|&slot| &p.irqs[slot])
            .find(|view| view.irq.queue == Some(queue));
        let Some((irq_cpu, pps)) = vector.and_then(|v| Some((v.cpu?, v.pps))) else {
            continue;
        };
        let mask = per_core_mask(p, d, irq_cpu, &hot_cpus.union(&saturated_cpus(p)));
        if mask.len() < 2 || *current == mask || mask.is_subset(current) {
            continue;
        }
        if !has_headroom(p, &name, &mask, hot_cpus) {
            continue;
        }
        let mask = widened(p, d, queue, current, &mask);
        let t = target(p, d, queue);
        if p.frozen(&t) {
            continue;
        }
        if !current.is_empty() && !owned(p, d, queue, current) {
            note_foreign_mask(p, &name, queue, t, current);
            continue;
        }
        if !distress && !p.state.dwelt(&t, p.now_ns, dwell) {
            p.waiting.push(format!(
                "{name} rx-{queue}: RPS changed less than hysteresis.rps_dwell ago"
            ));
            continue;
        }
        // The protocol work leaves the interrupting CPU (if it is not in the mask).
        let kept = if mask.contains(irq_cpu) {
            1.0 / mask.len() as f64
        } else {
            0.0
        };
        let cut = pps * (1.0 - RPS_INTERRUPT_SHARE) * (1.0 - kept);
        let work = p.work_of(irq_cpu).max(f64::MIN_POSITIVE);
        if cut < min_gain * work {
            p.waiting.push(format!(
                "{name} rx-{queue}: RPS would cut CPU {irq_cpu}'s work by only {:.0}% (hysteresis.min_gain {:.0}%)",
                100.0 * cut / work,
                100.0 * min_gain
            ));
            continue;
        }
        all_off &= current.is_empty();
        irq_cpus.insert(irq_cpu);
        spread = spread.union(&mask);
        changes.push((queue, mask));
    }
    if changes.is_empty() {
        return;
    }
    let list: Vec<String> = changes.iter().map(|(q, _)| format!("rx-{q}")).collect();
    // `why` names the queue that decided; one group may carry more, each named here so
    // that every change's reason says which queues moved together.
    let why = match list.as_slice() {
        [_] => format!(
            "{why}; {name} has a hardware queue per local core, so its hot queue's protocol work spreads over the other cores (until the RSS table can be evened out)"
        ),
        _ => format!(
            "{why}; {name} has a hardware queue per local core, so the protocol work of its hot queues {} (on CPUs {}) spreads over the other cores (until the RSS table can be evened out)",
            list.join(", "),
            irq_cpus.to_list()
        ),
    };
    let expected = format!(
        "protocol work of {name} {} spread over CPUs {}, one per core; the interrupting CPU keeps about {:.0}% of the per-packet cost plus an IPI per batch",
        list.join(", "),
        spread.to_list(),
        100.0 * RPS_INTERRUPT_SHARE
    );
    let kind = if all_off {
        ReasonKind::RpsOn
    } else {
        ReasonKind::RpsWiden
    };
    apply(p, d, changes, kind, why, expected, true);
}

/// Intervals in a row a CPU must show its hot signal before RPS is turned on for it.
/// Why not at the first: that interval is a spell's onset, where the other CPUs' work has
/// not risen yet (their queues' NAPIs are still starting to poll), so they look as if
/// they had room, and a trial's "before" is that one partial interval. In the lab's
/// `sat-burst` (2026-11-29) RPS went on at a burst's first interval of distress in every
/// run, onto CPUs that were full a second later, and steerd delivered 0.70x no
/// balancer. Pressure is confirmed over `hysteresis.confirm_ticks` anyway; this delays
/// only distress, by one interval.
const MIN_SPELL: u32 = 2;

/// [`MIN_SPELL`], or `hysteresis.confirm_ticks` where that is less: with confirmation
/// set to one tick (`steerd plan`'s one-shot decision, "what would steerd do if this load
/// persisted", or an operator who wants the fastest reaction) RPS does not wait either.
fn min_spell(p: &Planner) -> u32 {
    MIN_SPELL.min(p.config.hysteresis.confirm_ticks)
}

fn spell_too_short(name: &str, cpu: u32) -> String {
    format!(
        "{name}: RPS waits for CPU {cpu}'s second hot interval in a row (the first is the load's onset, when the other CPUs' work has not risen yet)"
    )
}

/// The CPUs already full of receive work: a hot signal this tick (confirmed or not) or
/// an irq+softirq share at the high watermark. They are busy like the hot queue's own CPU,
/// whatever fills them. Why they stay out of a hot queue's mask: RPS hashes each flow to
/// one CPU of the mask, and a flow hashed onto a saturated CPU has its protocol work
/// moved from a CPU of its own onto one that has none to give. Seen in the lab's
/// `sat-late` (2026-11-29): CPU 1 carried one queue whose NAPI polled there, CPU 0 the
/// three others' (irq+softirq 0.98), and RPS for the CPU 1 queue over CPUs 0, 2 and 3
/// ended every run with all the work on CPU 0 and CPU 1 idle (steerd 0.73-0.81x no
/// balancer's packets in 4 of 4 rounds).
fn saturated_cpus(p: &Planner) -> CpuSet {
    p.allowed.iter().filter(|&cpu| is_full(p, cpu)).collect()
}

/// Whether `cpu` is full of receive work: a hot signal this tick (confirmed or not), or an
/// irq+softirq share at the high watermark. The one test of [`has_headroom`] and
/// [`saturated_cpus`].
fn is_full(p: &Planner, cpu: u32) -> bool {
    p.heat_of(cpu).signal.is_some()
        || p.load
            .cpu(cpu)
            .is_some_and(|l| l.net_share >= p.config.watermarks.high)
}

/// One allowed NUMA-local CPU per physical core of device `d` (the lowest of each core),
/// leaving out the cores of the `busy` CPUs (the hot queues' interrupting CPUs and every
/// [`saturated_cpus`] one) when `rps.exclude_busy_irq_cpus` is on and at least two cores
/// remain (else only `irq_cpu`'s core, else none).
fn per_core_mask(p: &Planner, d: usize, irq_cpu: u32, busy: &CpuSet) -> CpuSet {
    let pick = |skip: &dyn Fn(u32) -> bool| {
        let mut cores = std::collections::HashSet::new();
        let mut mask = CpuSet::new();
        for cpu in p.devices[d].local.iter() {
            let core = p.core(cpu);
            if !skip(core) && cores.insert(core) {
                mask.insert(cpu);
            }
        }
        mask
    };
    if !p.config.rps.exclude_busy_irq_cpus {
        return pick(&|_| false);
    }
    let busy_cores: std::collections::HashSet<u32> = busy.iter().map(|c| p.core(c)).collect();
    let without_busy = pick(&|core| busy_cores.contains(&core));
    if without_busy.len() >= 2 {
        return without_busy;
    }
    let own = p.core(irq_cpu);
    let without_own = pick(&|core| core == own);
    if without_own.len() >= 2 {
        return without_own;
    }
    pick(&|_| false)
}

/// The mask for a device: its allowed NUMA-local CPUs (for a device without a node, those
/// of the hot CPU's node), without the busy interrupting CPUs when at least twice as many
/// others remain.
fn spread_mask(p: &Planner, d: usize, busy: &CpuSet, has_vectors: bool) -> CpuSet {
    let dev = &p.devices[d];
    let mut mask = if has_vectors || dev.dev.numa_node.is_some() {
        dev.local.clone()
    } else {
        let node = busy
            .first()
            .and_then(|c| p.node_of.get(c as usize).copied().flatten());
        match node {
            Some(node) => p.topology.node_cpus(node).intersection(&p.allowed),
            None => p.allowed.clone(),
        }
    };
    if mask.is_empty() {
        mask = p.allowed.clone();
    }
    if p.config.rps.exclude_busy_irq_cpus {
        let rest = mask.difference(busy);
        if rest.len() >= 2 * busy.len().max(1) {
            mask = rest;
        }
    }
    mask
}
