//! IRQ affinity rules.
//!
//! Two kinds of rule move IRQs:
//!
//! * **Placement** (count-based, applies even when idle, so an idle machine keeps its
//!   spread and is ready for the next burst): a queue vector must not fire on a forbidden
//!   CPU, must be pinned to a single CPU (a wide mask lets the kernel pick, and what it
//!   picked is not reliably visible), should fire on its device's NUMA node, should not
//!   share a CPU with another queue vector of its device, nor a physical core while the
//!   device has a free local core, nor a core used by another device's queue vector while a
//!   core is free. Vectors claim CPUs in a fixed order (unmovable ones first, then by
//!   device name and queue number), so the rules have one fixed point and never chase each
//!   other. An idle vector is never moved onto a CPU that carries measured work while an
//!   idle CPU will do. Only receive (rx and combined) vectors count in the occupancy; a
//!   queue's separate transmit vector follows its receive vector to the same CPU
//!   ([`follow_rx`]), so it never takes a CPU from a receive queue.
//! * **Relief** (load-based, [`relieve`] in `irq/relief.rs`): from a confirmed hot CPU,
//!   move queue vectors, heaviest first, to the coolest CPU that breaks no placement rule,
//!   when the predicted drop of the hot CPU's work is at least `min_gain` of it and the
//!   target ends up below the source.
//!
//! Non-queue vectors and other devices' IRQs are only moved off forbidden CPUs (and NIC
//! non-queue vectors off the wrong node), with wide masks: they carry little work.

mod follow;
mod relief;

pub use follow::follow_rx;
pub use relief::relieve;

use super::context::{Blocker, Planner};
use super::hysteresis::kilo;
use super::plan::{NoteKind, ReasonKind};
use crate::config::NumaPolicy;
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};

/// An IRQ that breaks a placement rule.
#[derive(Debug, Clone)]
pub struct Misplaced {
    pub slot: usize,
    pub kind: ReasonKind,
    pub why: String,
}

/// Claims CPUs for every queue vector in rule order and lists the IRQs that break a rule.
/// Misplaced queue vectors are left unclaimed until [`place`] moves them or gives up.
pub fn analyse(p: &mut Planner) -> Vec<Misplaced> {
    // Unmovable queue vectors are where they are: they claim first.
    for slot in 0..p.irqs.len() {
        let view = &p.irqs[slot];
        let (true, Some(blocker), Some(cpu), Some(_)) =
            (view.queue_vector, view.blocker, view.cpu, view.device)
        else {
            continue;
        };
        let irq = view.irq.irq;
        p.claim(slot);
        if matches!(
            blocker,
            Blocker::Managed | Blocker::Failed | Blocker::NoEffect
        ) {
            let serves = p.serves(slot);
            let target = Knob::IrqAffinity { irq };
            let (kind, text) = if blocker == Blocker::Managed {
                (
                    NoteKind::Managed,
                    format!(
                        "irq {irq} ({serves}) is kernel-managed or read-only: never moved (fires on CPU {cpu})"
                    ),
                )
            } else if blocker == Blocker::NoEffect {
                (
                    NoteKind::MoveNoEffect,
                    format!(
                        "irq {irq} ({serves}): its move has not taken effect, no interrupt since while its queue receives (a saturated NAPI keeps polling on CPU {cpu}); its work is counted there and it is not moved again until it fires"
                    ),
                )
            } else {
                let why = p.state.failed.get(&target).cloned().unwrap_or_default();
                (
                    NoteKind::WriteFailed,
                    format!("irq {irq} ({serves}): a write failed for good ({why}); not retried"),
                )
            };
            p.note(kind, Some(target), format!("irq {irq}"), text);
        }
    }
    let mut misplaced = Vec::new();
    for d in 0..p.devices.len() {
        for index in 0..p.devices[d].vectors.len() {
            let slot = p.devices[d].vectors[index];
            let view = &p.irqs[slot];
            let (None, Some(cpu)) = (view.blocker, view.cpu) else {
                continue;
            };
            match queue_vector_rule(p, slot, d, cpu) {
                None => p.claim(slot),
                Some((kind, why)) => misplaced.push(Misplaced { slot, kind, why }),
            }
        }
    }
    for slot in 0..p.irqs.len() {
        let view = &p.irqs[slot];
        if view.queue_vector || view.blocker.is_some() {
            continue;
        }
        if let Some((kind, why)) = other_irq_rule(p, slot) {
            misplaced.push(Misplaced { slot, kind, why });
        }
    }
    misplaced.sort_by_key(|m| m.kind != ReasonKind::ForbiddenCpu);
    misplaced
}

/// Why a CPU is forbidden, for people.
fn forbidden_why(p: &Planner, cpu: u32) -> &'static str {
    if p.config.cpus.banned.contains(cpu) && p.config.cpus.irqbalance_banned_cpus {
        "banned (cpus.banned, or irqbalance's IRQBALANCE_BANNED_CPUS)"
    } else if p.config.cpus.banned.contains(cpu) {
        "banned (cpus.banned)"
    } else if let Some(why) = p.topology.set_aside_why(cpu) {
        why
    } else if p.busy_poll.contains(cpu) {
        "kept for a pinned busy-polling NAPI thread (threaded busy-poll)"
    } else {
        "offline"
    }
}

/// The reason for an IRQ whose mask allows `stray`, forbidden CPUs (named after the first
/// of them, or `fallback` for an empty set).
fn may_fire_on_forbidden(p: &Planner, stray: &CpuSet, fallback: u32) -> (ReasonKind, String) {
    let first = stray.first().unwrap_or(fallback);
    (
        ReasonKind::ForbiddenCpu,
        format!(
            "may fire on CPU {}, which is {}",
            stray.to_list(),
            forbidden_why(p, first)
        ),
    )
}

/// The placement rule a movable queue vector breaks at `cpu`, given the claims so far.
fn queue_vector_rule(p: &Planner, slot: usize, d: usize, cpu: u32) -> Option<(ReasonKind, String)> {
    let view = &p.irqs[slot];
    let dev = &p.devices[d];
    let name = &dev.dev.name;
    let stray = view
        .affinity
        .filter(|a| a.intersects(&p.evict))
        .map(|a| a.intersection(&p.evict));
    if p.evict.contains(cpu) {
        return Some((
            ReasonKind::ForbiddenCpu,
            format!("fires on CPU {cpu}, which is {}", forbidden_why(p, cpu)),
        ));
    }
    if let Some(stray) = stray {
        return Some(may_fire_on_forbidden(p, &stray, cpu));
    }
    if let Some(mask) = view.affinity.filter(|a| a.len() > 1) {
        return Some((
            ReasonKind::Unpinned,
            format!(
                "its mask {} lets the kernel pick the CPU (now CPU {cpu}); a receive queue gets one CPU of its own",
                mask.to_list()
            ),
        ));
    }
    if let Some(rule) = remote_node(p, d, cpu) {
        return Some(rule);
    }
    if dev.on_cpu(cpu) > 0 {
        return Some((
            ReasonKind::StackedVectors,
            format!("another queue vector of {name} already fires on CPU {cpu}"),
        ));
    }
    let core = p.core(cpu);
    if dev.on_core(core) > 0
        && let Some(free) = free_core(p, d, false)
    {
        return Some((
            ReasonKind::SharedCore,
            format!(
                "another queue vector of {name} fires on core {core} (CPU {cpu}'s core) while core {free} has none"
            ),
        ));
    }
    if p.core_vectors.get(core as usize).copied().unwrap_or(0) > 0
        && let Some(free) = free_core(p, d, true)
    {
        return Some((
            ReasonKind::DeviceOverlap,
            format!(
                "core {core} (CPU {cpu}'s core) already serves another device's queue vector while core {free} serves none"
            ),
        ));
    }
    None
}

/// A local core of device `d` with no queue vector of `d` (`any_device: false`) or of any
/// device (`true`). Claims only grow between moves, so "none" is remembered until the next
/// release.
fn free_core(p: &Planner, d: usize, any_device: bool) -> Option<u32> {
    let dev = &p.devices[d];
    let none = if any_device {
        &dev.no_free_core
    } else {
        &dev.no_free_dev_core
    };
    if none.get() {
        return None;
    }
    let found = dev.local.iter().map(|cpu| p.core(cpu)).find(|&core| {
        if any_device {
            p.core_vectors.get(core as usize).copied().unwrap_or(0) == 0
        } else {
            dev.on_core(core) == 0
        }
    });
    none.set(found.is_none());
    found
}

/// The rule a movable non-queue IRQ breaks, if any.
fn other_irq_rule(p: &Planner, slot: usize) -> Option<(ReasonKind, String)> {
    let view = &p.irqs[slot];
    let affinity = view.affinity?;
    if affinity.intersects(&p.evict) {
        return Some(may_fire_on_forbidden(
            p,
            &affinity.intersection(&p.evict),
            0,
        ));
    }
    remote_node(p, view.device?, view.cpu?)
}

/// An IRQ of device `d` firing on `cpu` off the device's NUMA node while local CPUs are
/// allowed (unless `numa: ignore`).
fn remote_node(p: &Planner, d: usize, cpu: u32) -> Option<(ReasonKind, String)> {
    let dev = &p.devices[d];
    let remote = p.config.numa != NumaPolicy::Ignore
        && !dev.home.contains(cpu)
        && !dev.local.is_empty()
        && dev.local.is_subset(&dev.home);
    remote.then(|| {
        (
            ReasonKind::RemoteNode,
            format!(
                "fires on CPU {cpu}, off {}'s NUMA-local CPUs {}",
                dev.dev.name,
                dev.home.to_list()
            ),
        )
    })
}

/// Moves the misplaced IRQs of one phase: forbidden ones (`forbidden: true`, dwell or not)
/// or the others (after `irq_dwell`, or once CPUs came back since the IRQ last moved).
/// Placement rules act at once and in full, outside the per-tick action budget: the
/// placement is a count-based fact, not a noisy measurement that needs confirming, and the
/// rules have a single fixed point, so they cannot flap.
/// A queue vector not moved claims its current CPU.
pub fn place(p: &mut Planner, misplaced: &[Misplaced], forbidden: bool) {
    let dwell = p.config.hysteresis.irq_dwell.as_nanos() as u64;
    for m in misplaced {
        if (m.kind == ReasonKind::ForbiddenCpu) != forbidden {
            continue;
        }
        let view = &p.irqs[m.slot];
        let irq = view.irq.irq;
        if p.moved.contains(&irq) {
            continue;
        }
        let target = Knob::IrqAffinity { irq };
        let moved = if !forbidden && !p.state.placement_may_move(&target, p.now_ns, dwell) {
            p.waiting.push(format!(
                "irq {irq} ({}): {}; moved less than hysteresis.irq_dwell ago",
                p.serves(m.slot),
                m.why
            ));
            false
        } else if view.queue_vector {
            place_queue_vector(p, m)
        } else {
            place_other(p, m)
        };
        if !moved && p.irqs[m.slot].queue_vector {
            p.claim(m.slot);
        }
    }
}

fn place_queue_vector(p: &mut Planner, m: &Misplaced) -> bool {
    let Some(d) = p.irqs[m.slot].device else {
        return false;
    };
    let from = p.irqs[m.slot].cpu;
    let idle = p.irqs[m.slot].weight < p.work_floor();
    // An unpinned vector already on a good local CPU can be pinned where it is.
    let pin_here = from.filter(|&cpu| {
        m.kind == ReasonKind::Unpinned && p.devices[d].local.contains(cpu) && !p.evict.contains(cpu)
    });
    let must_move = matches!(m.kind, ReasonKind::ForbiddenCpu | ReasonKind::RemoteNode)
        || (m.kind == ReasonKind::Unpinned && pin_here.is_none());
    // An idle vector goes to an idle CPU; only if it must leave and none is free does it
    // take a busy one.
    let found = if idle {
        structural_target(p, d, from, true).or_else(|| {
            must_move
                .then(|| structural_target(p, d, from, false))
                .flatten()
        })
    } else {
        structural_target(p, d, from, false)
    };
    if let Some(here) = pin_here {
        let occupied = occupancy(p, d, here);
        let (to, why) = match found {
            Some((to, key)) if key < occupied => {
                let (_, cured) = occupancy_reason(p, d, here, to, occupied);
                (to, format!("{}; and on CPU {here}: {cured}", m.why))
            }
            _ => (here, m.why.clone()),
        };
        if to != here {
            p.devices[d].search_from = to + 1;
        }
        move_vector(p, m.slot, to, ReasonKind::Unpinned, why);
        return true;
    }
    let Some((to, to_key)) = found else {
        let name = p.devices[d].dev.name.clone();
        let irq = p.irqs[m.slot].irq.irq;
        if p.devices[d].local.is_empty() {
            p.note(
                NoteKind::NoAllowedCpu,
                Some(Knob::IrqAffinity { irq }),
                format!("{name} irq {irq}"),
                format!(
                    "irq {irq} ({}): {}; but {name} has no allowed CPU (numa: strict, bans)",
                    p.serves(m.slot),
                    m.why
                ),
            );
        }
        return false;
    };
    let (kind, why) = match (m.kind, from) {
        (ReasonKind::ForbiddenCpu | ReasonKind::RemoteNode | ReasonKind::Unpinned, _)
        | (_, None) => (m.kind, m.why.clone()),
        (_, Some(cpu)) => {
            // Judged again against the claims made so far this tick: an earlier move may
            // have cured it, or made a better target than the analysis saw.
            let here = occupancy(p, d, cpu);
            if to_key >= here {
                return false;
            }
            occupancy_reason(p, d, cpu, to, here)
        }
    };
    p.devices[d].search_from = to + 1;
    move_vector(p, m.slot, to, kind, why);
    true
}

/// Queue vectors around a CPU, as claimed so far: of the device on the CPU, of the device
/// on its core, of any device on its core. Lower is better, compared in that order.
fn occupancy(p: &Planner, d: usize, cpu: u32) -> (u16, u16, u16) {
    let core = p.core(cpu);
    let dev = &p.devices[d];
    (
        dev.on_cpu(cpu),
        dev.on_core(core),
        p.core_vectors.get(core as usize).copied().unwrap_or(0),
    )
}

/// The placement rule a move from `cpu` to `to` cures, for people.
fn occupancy_reason(
    p: &Planner,
    d: usize,
    cpu: u32,
    to: u32,
    here: (u16, u16, u16),
) -> (ReasonKind, String) {
    let name = &p.devices[d].dev.name;
    let core = p.core(cpu);
    if here.0 > 0 {
        (
            ReasonKind::StackedVectors,
            format!("another queue vector of {name} already fires on CPU {cpu}"),
        )
    } else if here.1 > 0 {
        (
            ReasonKind::SharedCore,
            format!(
                "another queue vector of {name} fires on core {core} (CPU {cpu}'s core) while core {} has none",
                p.core(to)
            ),
        )
    } else {
        (
            ReasonKind::DeviceOverlap,
            format!(
                "core {core} (CPU {cpu}'s core) already serves {} queue vector(s) of other devices; core {} serves fewer",
                here.2,
                p.core(to)
            ),
        )
    }
}

/// The best CPU for a queue vector of device `d`, with its occupancy: fewest vectors of its
/// device on the CPU, then on the core, then vectors of any device on the core, then the
/// least busy core; among equals, the first found from where the last search ended. With
/// `idle_only`, CPUs that carry measured work (see `WORK_FLOOR_SHARE`) are left out: the
/// target for an idle vector.
fn structural_target(
    p: &Planner,
    d: usize,
    from: Option<u32>,
    idle_only: bool,
) -> Option<(u32, (u16, u16, u16))> {
    let dev = &p.devices[d];
    let floor = p.work_floor();
    let mut best: Option<((u16, u16, u16), f64, u32)> = None;
    let start = dev.search_from;
    let order = dev
        .local
        .iter()
        .skip_while(|&c| c < start)
        .chain(dev.local.iter().take_while(|&c| c < start));
    for cpu in order {
        if Some(cpu) == from {
            continue;
        }
        let key = occupancy(p, d, cpu);
        let load = p.core_load(cpu);
        if idle_only && load >= floor {
            continue;
        }
        let better = match &best {
            None => true,
            Some((k, l, _)) => key.cmp(k).then(load.total_cmp(l)).is_lt(),
        };
        if better {
            best = Some((key, load, cpu));
            if key == (0, 0, 0) && load <= 0.0 {
                // Nothing beats an empty, idle core.
                break;
            }
        }
    }
    best.map(|(key, _, cpu)| (cpu, key))
}

fn place_other(p: &mut Planner, m: &Misplaced) -> bool {
    let view = &p.irqs[m.slot];
    let Some(affinity) = view.affinity else {
        return false;
    };
    let new = match (m.kind, view.device) {
        (ReasonKind::RemoteNode, Some(d)) => p.devices[d].local.clone(),
        _ => {
            let kept = affinity
                .difference(&p.evict)
                .intersection(&p.topology.online);
            let kept = kept.difference(&p.config.cpus.reserved);
            if kept.is_empty() {
                view.device
                    .map(|d| p.devices[d].local.clone())
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| p.allowed.clone())
            } else {
                kept
            }
        }
    };
    if new.is_empty() || new == *affinity {
        return false;
    }
    let irq = view.irq.irq;
    let serves = p.serves(m.slot);
    let old = affinity.clone();
    let expected = format!("irq {irq} fires only on CPUs {}", new.to_list());
    p.push(
        Knob::IrqAffinity { irq },
        Some(serves),
        KnobValue::Cpus(old),
        KnobValue::Cpus(new),
        (m.kind, m.why.clone()),
        expected,
    );
    p.moved.insert(irq);
    true
}

/// Moves a queue vector to `to` in the plan and in the working view.
fn move_vector(p: &mut Planner, slot: usize, to: u32, kind: ReasonKind, why: String) {
    let view = &p.irqs[slot];
    let irq = view.irq.irq;
    let weight = view.weight;
    let from = view.cpu;
    let old = view.affinity.cloned().unwrap_or_default();
    let serves = p.serves(slot);
    let to_before = p.work_of(to);
    let expected = match from {
        Some(from) if from == to => {
            format!("{serves} fires only on CPU {to}, where it fires now: no work moves")
        }
        Some(from) if weight > 0.0 => {
            let from_before = p.work_of(from);
            format!(
                "CPU {from} {} -> {} pkt/s; CPU {to} {} -> {} pkt/s",
                kilo(from_before),
                kilo((from_before - weight).max(0.0)),
                kilo(to_before),
                kilo(to_before + weight)
            )
        }
        _ => format!("{serves} fires on CPU {to} (it carries no measured work now)"),
    };
    // With threaded NAPI the work is the thread's: it moves because the thread follows.
    let thread = view
        .device
        .zip(view.irq.queue)
        .and_then(|(d, q)| p.devices[d].dev.rx_queues.iter().find(|rx| rx.index == q))
        .and_then(|rx| Some((rx.napi_thread.as_ref()?, rx.napi.busy_polls())));
    let expected = match thread {
        Some((thread, true)) => format!(
            "{serves}'s interrupt fires on CPU {to}; its work stays with {}, which polls \
             without pause where it is pinned (threaded busy-poll, not moved by steerd)",
            thread.name
        ),
        Some((thread, _)) => format!(
            "{expected}; the work moves with {} (threaded NAPI), pinned to CPU {to} in this plan",
            thread.name
        ),
        None => expected,
    };
    p.release(slot);
    if from != Some(to) {
        p.shift_work(from, Some(to), weight);
        if let Some(from) = from {
            p.relieved.insert(from);
            p.touched.insert(from);
        }
        p.touched.insert(to);
    }
    p.irqs[slot].cpu = Some(to);
    p.claim(slot);
    p.moved.insert(irq);
    p.push(
        Knob::IrqAffinity { irq },
        Some(serves),
        KnobValue::Cpus(old),
        KnobValue::Cpus(CpuSet::from_iter([to])),
        (kind, why),
        expected,
    );
}
