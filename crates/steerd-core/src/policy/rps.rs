//! RPS rules: when to turn a device's receive steering on, widen it, narrow it and turn
//! it off.
//!
//! RPS is the second lever, used when moving IRQs cannot relieve a hot CPU: one queue
//! carries the work (a single-queue NIC, a hash that fills 2 of 4 queues) or there is no
//! IRQ at all (veth, where the receive work runs on the sending CPU). It has a price (an
//! IPI per batch on the interrupting CPU), so in `auto` mode:
//!
//! * **on / widen** when a queue's interrupting CPU is under pressure or in distress and
//!   its device has fewer queues than local cores; on a NIC with a queue per core, only the
//!   hot queue, over the other local cores, one CPU per core ([`per_core_relief`]: until
//!   the RSS table lever lands, the hash cannot be evened out); for devices without IRQs,
//!   when a hot CPU's work is not explained by any queue IRQ. The mask is the device's allowed NUMA-local CPUs, leaving out the busy
//!   interrupting CPUs when enough others remain. Hot queues and queues carrying a skewed
//!   share are widened; a device without IRQs gets the same mask on every queue (veth maps
//!   a packet on queue k to rx-(k-1)'s mask).
//! * **narrow / off** only when every CPU involved has been calm for `calm_ticks`, the
//!   mask has dwelt `rps_dwell`, and the work predicted on the remaining CPUs stays under the
//!   low watermark: slower than it was turned on. Only masks steerd set are narrowed.

use super::context::{Planner, rps_capable};
use super::hysteresis::{HotSignal, kilo};
use super::plan::{NoteKind, ReasonKind};
use super::rfs;
use super::rps_trial::{self, Judgement};
use crate::config::RpsMode;
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};

/// RPS rules for every device: the distress fast path (`distress: true`) or the rest.
pub fn plan(p: &mut Planner, distress: bool) {
    let unexplained = unexplained_work(p);
    for d in 0..p.devices.len() {
        let dev = p.devices[d].dev;
        if !rps_capable(dev.kind)
            || dev.operstate.as_deref() == Some("down")
            || dev.rx_queues.iter().all(|q| q.rps_cpus.is_none())
        {
            continue;
        }
        match p.devices[d].rps_mode {
            RpsMode::Static if !distress => static_masks(p, d),
            RpsMode::Off if !distress => off_by_config(p, d),
            RpsMode::Auto => {
                let name = dev.name.clone();
                match rps_trial::judge(p, &name) {
                    Judgement::Free => {
                        turn_on(p, d, distress, &unexplained);
                        if !distress {
                            calm_down(p, d);
                        }
                    }
                    Judgement::Running => p.waiting.push(format!(
                        "{name}: an RPS change is on trial (judged {} s after it was made)",
                        rps_trial::TRIAL_NS / 1_000_000_000
                    )),
                    Judgement::Undo { masks, why } => undo(p, d, masks, why),
                    Judgement::Held { why, left_s } => {
                        p.waiting.push(format!(
                            "{name}: RPS was undone ({why}); held off for {left_s} s more"
                        ));
                        if !distress {
                            calm_down(p, d);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Masks steerd set that now include a forbidden CPU lose it (the forbidden phase).
pub fn purge_forbidden(p: &mut Planner) {
    for d in 0..p.devices.len() {
        let mut changes = Vec::new();
        for (queue, current) in queues(p, d) {
            let ours = owned(p, d, queue, &current);
            if ours && current.intersects(&p.evict) {
                changes.push((queue, current.difference(&p.evict)));
            }
        }
        if !changes.is_empty() {
            let name = p.devices[d].dev.name.clone();
            let why = format!(
                "the mask steerd set includes CPUs {} that are now banned, isolated or nohz_full",
                p.evict.to_list()
            );
            let expected = format!("{name} steers no packet to forbidden CPUs");
            apply(
                p,
                d,
                changes,
                ReasonKind::ForbiddenCpu,
                why,
                expected,
                false,
            );
        }
    }
}

/// Receive work per CPU not explained by the queue vectors firing there: work that came
/// through RPS, or from a device with no IRQ (veth: the sender's CPU).
fn unexplained_work(p: &Planner) -> Vec<f64> {
    let mut left = p.work.clone();
    for view in &p.irqs {
        if let (true, Some(cpu)) = (view.queue_vector, view.cpu)
            && let Some(w) = left.get_mut(cpu as usize)
        {
            *w = (*w - view.weight).max(0.0);
        }
    }
    left
}

/// The device's rx queues that have an `rps_cpus` file, with their mask as planned.
fn queues(p: &Planner, d: usize) -> Vec<(u32, CpuSet)> {
    let dev = p.devices[d].dev;
    if p.planned_rps == 0 {
        // The common case, without a lookup per queue.
        let current = p.placement.rx_queues.get(&dev.name);
        return dev
            .rx_queues
            .iter()
            .filter(|q| q.rps_cpus.is_some())
            .filter_map(|q| {
                let values = current?.get(q.index as usize)?;
                Some((q.index, values.rps_cpus.clone()?))
            })
            .collect();
    }
    dev.rx_queues
        .iter()
        .filter(|q| q.rps_cpus.is_some())
        .filter_map(|q| Some((q.index, p.rps_mask(&dev.name, q.index)?)))
        .collect()
}

fn target(p: &Planner, d: usize, queue: u32) -> Knob {
    Knob::RpsCpus {
        device: p.devices[d].dev.name.clone(),
        queue,
    }
}

/// Whether steerd set this queue's current mask.
fn owned(p: &Planner, d: usize, queue: u32, current: &CpuSet) -> bool {
    let t = target(p, d, queue);
    !p.frozen(&t) && p.state.written(&t) == Some(&KnobValue::Cpus(current.clone()))
}

/// Plans one device's mask changes (one action group, with its RFS tables), counted in the
/// per-tick budget when `capped`.
fn apply(
    p: &mut Planner,
    d: usize,
    changes: Vec<(u32, CpuSet)>,
    kind: ReasonKind,
    why: String,
    expected: String,
    capped: bool,
) -> bool {
    if changes.is_empty() {
        return false;
    }
    let name = p.devices[d].dev.name.clone();
    if capped && !p.spend(&format!("{name} RPS ({})", kind.as_str())) {
        return false;
    }
    let turning_on = matches!(
        kind,
        ReasonKind::RpsOn | ReasonKind::RpsWiden | ReasonKind::RpsStatic
    );
    let olds: Vec<(u32, CpuSet)> = changes
        .iter()
        .map(|(queue, _)| (*queue, p.rps_mask(&name, *queue).unwrap_or_default()))
        .collect();
    if matches!(kind, ReasonKind::RpsOn | ReasonKind::RpsWiden) {
        rps_trial::start(p, &name, olds.clone());
    }
    for ((queue, new), (_, old)) in changes.iter().zip(olds) {
        p.touched = p.touched.union(&old).union(new);
        let irq_cpu = p.devices[d]
            .vectors
            .iter()
            .find(|&&slot| p.irqs[slot].irq.queue == Some(*queue))
            .and_then(|&slot| p.irqs[slot].cpu);
        if let Some(cpu) = irq_cpu {
            p.touched.insert(cpu);
        }
        p.push(
            Knob::RpsCpus {
                device: name.clone(),
                queue: *queue,
            },
            None,
            KnobValue::Cpus(old),
            KnobValue::Cpus(new.clone()),
            (kind, why.clone()),
            expected.clone(),
        );
    }
    if turning_on {
        rfs::enable_for(p, d, &changes);
    } else {
        rfs::disable_for(p, d, &changes);
    }
    true
}

/// Writes back the masks from before a trial that made the machine worse, where they are
/// still steerd's, in one action group outside the budget (it takes a harm away).
fn undo(p: &mut Planner, d: usize, masks: Vec<(u32, CpuSet)>, why: String) {
    let name = p.devices[d].dev.name.clone();
    let current: std::collections::HashMap<u32, CpuSet> = queues(p, d).into_iter().collect();
    let changes: Vec<(u32, CpuSet)> = masks
        .into_iter()
        .filter(|(queue, before)| {
            current
                .get(queue)
                .is_some_and(|now| now != before && owned(p, d, *queue, now))
        })
        .collect();
    let why = format!(
        "the RPS change on {name} made the machine worse: {why}; undone, RPS held off {name} for {} s",
        rps_trial::HOLD_NS / 1_000_000_000
    );
    let expected = format!("{name}'s masks as they were before the change");
    apply(p, d, changes, ReasonKind::RpsUndo, why, expected, false);
}

fn static_masks(p: &mut Planner, d: usize) {
    let name = p.devices[d].dev.name.clone();
    let Some(wanted) = p.config.device(&name).and_then(|c| c.rps_cpus.clone()) else {
        return;
    };
    let mask = wanted.intersection(&p.allowed);
    if mask.is_empty() {
        p.note(
            NoteKind::NoAllowedCpu,
            None,
            format!("{name} static"),
            format!(
                "{name}: rps_cpus {} has no allowed CPU (banned, reserved, isolated or offline); left as is",
                wanted.to_list()
            ),
        );
        return;
    }
    let changes: Vec<(u32, CpuSet)> = queues(p, d)
        .into_iter()
        .filter(|(queue, current)| *current != mask && !p.frozen(&target(p, d, *queue)))
        .map(|(queue, _)| (queue, mask.clone()))
        .collect();
    let why = format!("devices.{name}: rps: static, rps_cpus {}", wanted.to_list());
    let expected = format!(
        "{name} steers received packets over CPUs {}",
        mask.to_list()
    );
    apply(p, d, changes, ReasonKind::RpsStatic, why, expected, true);
}

fn off_by_config(p: &mut Planner, d: usize) {
    let changes: Vec<(u32, CpuSet)> = queues(p, d)
        .into_iter()
        .filter(|(queue, current)| !current.is_empty() && owned(p, d, *queue, current))
        .map(|(queue, _)| (queue, CpuSet::new()))
        .collect();
    let name = p.devices[d].dev.name.clone();
    let why = format!("RPS mode of {name} is off in the config; clearing the masks steerd set");
    let expected = format!("{name}'s packets are processed on the interrupting CPU again");
    apply(p, d, changes, ReasonKind::RpsOff, why, expected, true);
}

/// Turns RPS on or widens it where a hot CPU cannot be relieved by an IRQ move.
fn turn_on(p: &mut Planner, d: usize, distress: bool, unexplained: &[f64]) {
    let name = p.devices[d].dev.name.clone();
    let has_vectors = !p.devices[d].vectors.is_empty();
    let (hot_cpus, hot_queues, why) = if has_vectors {
        let one_per_core = p.devices[d].dev.rx_queues.len() >= p.devices[d].local_cores;
        // A confirmed hot queue decides for the device; queues whose CPUs show the same
        // signal, confirmed or not yet, come along (one decision, one mask).
        let mut hot_cpus = CpuSet::new();
        let mut hot_queues = Vec::new();
        let mut why = String::new();
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
            return;
        }
        if hot_queues.is_empty() {
            return;
        }
        // The table lever goes first: it evens the hash out at no per-packet cost.
        if !distress && let Some(wait) = super::rss::holds_off_rps(p, &name) {
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
        100.0 * super::context::RPS_INTERRUPT_SHARE
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
    let cool = mask.iter().any(|cpu| {
        !hot.contains(cpu)
            && p.heat_of(cpu).signal.is_none()
            && p.load.cpu(cpu).is_some_and(|l| l.net_share < high)
    });
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
    if let Some(why) = super::rss::why_not_table(p, name) {
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
        let mask = per_core_mask(p, d, irq_cpu, hot_cpus);
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
        let cut = pps * (1.0 - super::context::RPS_INTERRUPT_SHARE) * (1.0 - kept);
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
        spread = spread.union(&mask);
        changes.push((queue, mask));
    }
    if changes.is_empty() {
        return;
    }
    let list: Vec<String> = changes.iter().map(|(q, _)| format!("rx-{q}")).collect();
    let why = format!(
        "{why}; {name} has a hardware queue per local core, so its hot queue's protocol work spreads over the other cores (until the RSS table can be evened out)"
    );
    let expected = format!(
        "protocol work of {name} {} spread over CPUs {}, one per core; the interrupting CPU keeps about {:.0}% of the per-packet cost plus an IPI per batch",
        list.join(", "),
        spread.to_list(),
        100.0 * super::context::RPS_INTERRUPT_SHARE
    );
    let kind = if all_off {
        ReasonKind::RpsOn
    } else {
        ReasonKind::RpsWiden
    };
    apply(p, d, changes, kind, why, expected, true);
}

/// One allowed NUMA-local CPU per physical core of device `d` (the lowest of each core),
/// leaving out the cores of the hot interrupting CPUs when `rps.exclude_busy_irq_cpus`
/// is on and at least two cores remain (else only `irq_cpu`'s core, else none).
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

/// Narrows or turns off the masks steerd set, once everything involved is calm.
fn calm_down(p: &mut Planner, d: usize) {
    let any_mask = p.planned_rps > 0
        || p.placement
            .rx_queues
            .get(&p.devices[d].dev.name)
            .is_some_and(|queues| {
                queues
                    .iter()
                    .any(|q| q.rps_cpus.as_ref().is_some_and(|m| !m.is_empty()))
            });
    if !any_mask {
        return;
    }
    let name = p.devices[d].dev.name.clone();
    let ours: Vec<(u32, CpuSet)> = queues(p, d)
        .into_iter()
        .filter(|(queue, current)| {
            !current.is_empty()
                && owned(p, d, *queue, current)
                && !p.planned.contains_key(&target(p, d, *queue))
        })
        .collect();
    if ours.is_empty() {
        return;
    }
    let mut spread = CpuSet::new();
    for (_, mask) in &ours {
        spread = spread.union(mask);
    }
    let mut sinks = CpuSet::new();
    for &slot in &p.devices[d].vectors {
        let view = &p.irqs[slot];
        if let (Some(cpu), Some(queue)) = (view.cpu, view.irq.queue)
            && ours.iter().any(|(q, _)| *q == queue)
        {
            sinks.insert(cpu);
        }
    }
    let involved = spread.union(&sinks);
    if !involved.iter().all(|cpu| p.heat_of(cpu).calm) {
        return;
    }
    let dwell = p.config.hysteresis.rps_dwell.as_nanos() as u64;
    if ours
        .iter()
        .any(|(queue, _)| !p.state.dwelt(&target(p, d, *queue), p.now_ns, dwell))
    {
        p.waiting.push(format!(
            "{name}: calm, but its RPS masks changed less than hysteresis.rps_dwell ago"
        ));
        return;
    }
    let share = |set: &CpuSet| -> f64 {
        set.iter()
            .map(|c| p.load.cpu(c).map_or(0.0, |l| l.net_share))
            .sum()
    };
    let pps = |set: &CpuSet| -> f64 { set.iter().map(|c| p.work_of(c)).sum() };
    let only_sinks = sinks.difference(&spread);
    let (s, w) = (share(&spread), pps(&spread));
    let (s_sink, w_sink) = (share(&only_sinks), pps(&only_sinks));
    let n_sinks = sinks.len().max(1) as f64;
    let low = p.config.watermarks.low;
    let quiet = p.config.watermarks.busy_pps / 2.0;
    let calm_ticks = p.config.hysteresis.calm_ticks;
    let off_share = (s + s_sink) / n_sinks;
    let off_pps = (w + w_sink) / n_sinks;
    if off_share < low && off_pps < quiet {
        let changes = ours.iter().map(|(q, _)| (*q, CpuSet::new())).collect();
        let why = format!(
            "CPUs {} calm for {calm_ticks} ticks; all of {name}'s receive work on its interrupting CPU would be share {off_share:.2} < low {low:.2}, {} < {} pkt/s",
            involved.to_list(),
            kilo(off_pps),
            kilo(quiet)
        );
        let expected =
            format!("{name}'s packets are processed on the interrupting CPU again, without IPIs");
        apply(p, d, changes, ReasonKind::RpsOff, why, expected, true);
        return;
    }
    let k = spread.len();
    if k < 2 {
        return;
    }
    let half = k.div_ceil(2) as f64;
    if s / half < low && w / half < quiet {
        let changes: Vec<(u32, CpuSet)> = ours
            .iter()
            .map(|(q, mask)| (*q, halve(p, mask)))
            .filter(|(q, mask)| ours.iter().any(|(oq, old)| oq == q && old != mask))
            .collect();
        let why = format!(
            "CPUs {} calm for {calm_ticks} ticks; on half as many CPUs the work is predicted at share {:.2} < low {low:.2}, {} < {} pkt/s each",
            spread.to_list(),
            s / half,
            kilo(w / half),
            kilo(quiet)
        );
        let expected = format!("{name} steers over half as many CPUs, with fewer IPIs");
        apply(p, d, changes, ReasonKind::RpsNarrow, why, expected, true);
    }
}

/// Half of a mask (rounded up), one CPU per physical core first, lowest ids first.
fn halve(p: &Planner, mask: &CpuSet) -> CpuSet {
    let keep = mask.len().div_ceil(2);
    let mut kept = CpuSet::new();
    let mut cores = std::collections::HashSet::new();
    for cpu in mask.iter() {
        if kept.len() < keep && cores.insert(p.core(cpu)) {
            kept.insert(cpu);
        }
    }
    for cpu in mask.iter() {
        if kept.len() < keep {
            kept.insert(cpu);
        }
    }
    kept
}

/// Notes once that a queue's mask was set by someone else: auto mode leaves it.
fn note_foreign_mask(p: &mut Planner, name: &str, queue: u32, t: Knob, current: &CpuSet) {
    p.note(
        NoteKind::ForeignMask,
        Some(t),
        format!("{name} rx-{queue}"),
        format!(
            "{name} rx-{queue} rps_cpus {} was not set by steerd: auto mode leaves it",
            current.to_list()
        ),
    );
}
