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
//!   hot queue, over the other local cores, one CPU per core (`spread::per_core_relief`: until
//!   the RSS table lever lands, the hash cannot be evened out); for devices without IRQs,
//!   when a hot CPU's work is not explained by any queue IRQ. The mask is the device's allowed NUMA-local CPUs, leaving out the busy
//!   interrupting CPUs when enough others remain. Hot queues and queues carrying a skewed
//!   share are widened; a device without IRQs gets the same mask on every queue (veth maps
//!   a packet on queue k to rx-(k-1)'s mask).
//! * **narrow / off** only when every CPU involved has been calm for `calm_ticks`, the
//!   mask has dwelt `rps_dwell`, and the work predicted on the remaining CPUs stays under the
//!   low watermark: slower than it was turned on. Only masks steerd set are narrowed.
//!
//! On and widen are in [`spread`], narrow and off in [`calm`]; this module runs them per
//! device with the trial's verdict (`rps_trial`), and holds what every RPS rule shares:
//! the queues and their planned masks, whose mask is steerd's, one device's changes as one
//! action group ([`apply`]) and the undo of a trial that made things worse, plus the
//! `static` and `off` modes and the purge of forbidden CPUs.

mod calm;
mod spread;

use calm::calm_down;
use spread::turn_on;

use super::context::{Planner, rps_capable};
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
                    Judgement::Undo { masks, why, hold_s } => undo(p, d, masks, why, hold_s),
                    Judgement::Held { why, left_s } => wait(
                        p,
                        d,
                        distress,
                        format!("{name}: RPS was undone ({why}); held off for {left_s} s more"),
                    ),
                    Judgement::Measuring { decisions_left } => {
                        clear_for_new_queues(p, d);
                        wait(
                            p,
                            d,
                            distress,
                            format!(
                                "{name}: its queue set changed; measuring its queues as they \
                                 are for {decisions_left} more decisions before an RPS trial"
                            ),
                        )
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

/// The device's queues whose current mask steerd set and which no rule of this decision
/// has changed yet, with that mask (empty masks left out).
fn steerds_masks(p: &Planner, d: usize) -> Vec<(u32, CpuSet)> {
    queues(p, d)
        .into_iter()
        .filter(|(queue, current)| {
            !current.is_empty()
                && owned(p, d, *queue, current)
                && !p.planned.contains_key(&target(p, d, *queue))
        })
        .collect()
}

/// Whether steerd set this queue's current mask.
fn owned(p: &Planner, d: usize, queue: u32, current: &CpuSet) -> bool {
    let t = target(p, d, queue);
    !p.frozen(&t) && p.state.written(&t) == Some(&KnobValue::Cpus(current.clone()))
}

/// The masks as the kernel will store them, the changes that then change nothing left out:
/// `store_rps_map` keeps only the CPUs online when a mask is written, so a mask planned with
/// a CPU gone offline since (a widening keeps the CPUs of the mask it widens, an undo
/// writes back the masks from before) would read back without it, and steerd took that
/// for someone else's change and let the queue go (the lab's `hotplug` on virtio-net 6.19,
/// 2026-11-30: "steerd wrote 1-3, now 1-2" with CPU 3 offline, the mask then kept to the
/// end of the run). A change whose online CPUs are those the queue's mask already has
/// (`current`) is no change.
fn as_the_kernel_stores(
    changes: Vec<(u32, CpuSet)>,
    online: &CpuSet,
    current: impl Fn(u32) -> CpuSet,
) -> Vec<(u32, CpuSet)> {
    changes
        .into_iter()
        .map(|(queue, mask)| (queue, mask.intersection(online)))
        .filter(|(queue, mask)| *mask != current(*queue).intersection(online))
        .collect()
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
    let name = p.devices[d].dev.name.clone();
    let changes = as_the_kernel_stores(changes, &p.topology.online, |queue| {
        p.rps_mask(&name, queue).unwrap_or_default()
    });
    if changes.is_empty() {
        return false;
    }
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
        let targets = trial_targets(p, &name, &changes, &olds);
        rps_trial::start(p, &name, olds.clone(), targets);
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

/// Where a spreading change of `name`'s masks from `olds` to `changes` is expected to send
/// work (`rps_trial::Targets`): the CPUs it adds that are not hot now, and how many packets
/// the new masks send them (RPS hashes a queue's flows evenly over its mask).
fn trial_targets(
    p: &Planner,
    name: &str,
    changes: &[(u32, CpuSet)],
    olds: &[(u32, CpuSet)],
) -> rps_trial::Targets {
    let had: CpuSet = olds.iter().flat_map(|(_, old)| old.iter()).collect();
    let cpus: CpuSet = changes
        .iter()
        .flat_map(|(_, new)| new.iter())
        .filter(|&cpu| !had.contains(cpu))
        .filter(|&cpu| p.heat.get(cpu as usize).is_none_or(|h| h.signal.is_none()))
        .collect();
    let expected_pps = changes
        .iter()
        .map(|(queue, new)| {
            let share = new.intersection(&cpus).len() as f64 / new.len().max(1) as f64;
            p.load.rx_queue_pps(name, *queue).map(|pps| pps * share)
        })
        .sum::<Option<f64>>();
    rps_trial::Targets { cpus, expected_pps }
}

/// Writes back the masks from before a trial that made the machine worse (or moved no
/// work), where they are still steerd's, in one action group outside the budget (it takes
/// a harm away).
fn undo(p: &mut Planner, d: usize, masks: Vec<(u32, CpuSet)>, why: String, hold_s: u64) {
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
    let why = if hold_s > 0 {
        format!("the RPS change on {name} {why}; undone, RPS held off {name} for {hold_s} s")
    } else {
        format!("the RPS change on {name} {why}; undone")
    };
    let expected = format!("{name}'s masks as they were before the change");
    apply(p, d, changes, ReasonKind::RpsUndo, why, expected, false);
}

/// Turns off the masks steerd set on a device whose queue set changed, at the first
/// decision that measures it (`rps_trial::forget`): they were chosen, and judged if a trial
/// kept them, for the queues it had. The driver gives the queues it adds no mask, and those
/// that remain keep theirs, so a mask spread for a hot queue of two stayed on it once the
/// device had a queue per core, sending its work to CPUs now busy with their own queues,
/// and nothing narrowed it while they stayed hot (the lab's `channels` on virtio-net 6.19,
/// 2026-11-30: rx-1's `0,2-3`, set by a kept trial before `ethtool -L`, to the end of the
/// run). Off, the queues are measured as the driver left them, and RPS is tried on them
/// afresh, on trial, if a CPU is still hot, with no `rps_dwell` to wait out
/// ([`ReasonKind::RpsReset`]). Outside the action budget: like an undo, it takes back a
/// change whose grounds are gone.
fn clear_for_new_queues(p: &mut Planner, d: usize) {
    let changes: Vec<(u32, CpuSet)> = steerds_masks(p, d)
        .into_iter()
        .map(|(queue, _)| (queue, CpuSet::new()))
        .collect();
    if changes.is_empty() {
        return;
    }
    let name = p.devices[d].dev.name.clone();
    let why = format!(
        "{name}'s queue set changed: the RPS masks steerd set were chosen for the queues it had"
    );
    let expected = format!("{name}'s queues as its driver left them, measured before RPS again");
    apply(p, d, changes, ReasonKind::RpsReset, why, expected, false);
}

/// RPS waits on the device (held after an undo, or measuring it after a queue-set
/// change): the plan says why, and masks it set are still narrowed as CPUs cool down.
fn wait(p: &mut Planner, d: usize, distress: bool, why: String) {
    p.waiting.push(why);
    if !distress {
        calm_down(p, d);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[u32]) -> CpuSet {
        cpus.iter().copied().collect()
    }

    #[test]
    fn masks_are_planned_as_the_kernel_stores_them() {
        let online = set(&[0, 1, 2]);
        // rx-3 had 2-3 (CPU 3 online then); CPU 3 is gone.
        let current = |queue: u32| {
            if queue == 3 {
                set(&[2, 3])
            } else {
                CpuSet::new()
            }
        };
        // A widening by CPU 1 writes 1-2, not 1-3, which would read back as 1-2.
        assert_eq!(
            as_the_kernel_stores(vec![(3, set(&[1, 2, 3]))], &online, current),
            vec![(3, set(&[1, 2]))]
        );
        // The same online CPUs as now: nothing to write.
        assert!(as_the_kernel_stores(vec![(3, set(&[2]))], &online, current).is_empty());
        // An undo to "none" stays a change.
        assert_eq!(
            as_the_kernel_stores(vec![(3, CpuSet::new())], &online, current),
            vec![(3, CpuSet::new())]
        );
    }
}
