//! The RSS table lever as a rule (issue 18): on a NIC whose indirection table steerd can
//! read and write, move table entries from hot receive queues to cool ones, one measured
//! step at a time ([`super::rss_table`] holds the pure arithmetic; this is the rule around
//! it: which devices, when, and what the plan says).
//!
//! A step is an experiment, because the kernel does not say which bucket carries which
//! load. The rule proposes a step once the queues' imbalance has held for
//! `hysteresis.confirm_ticks` decisions, writes the whole table in one action (within the
//! action budget), and then measures for `rss.dwell`: each move is kept when the busier of
//! its two queues came down by `hysteresis.min_gain`, and undone otherwise, in one write.
//! A queue whose steps were undone [`MAX_REVERTS`](super::rss_table::MAX_REVERTS) times is
//! left to RPS (one elephant flow: moving entries only moves it).
//!
//! The rule touches only tables it may own: the default context's, whose entries all name
//! existing queues (a channel-count change in flight leaves them naming others: it waits),
//! that is the driver's default spread or steerd's own last write. A table someone else set
//! is left alone and said so, as every other value (`on_external_change`). Entries only go
//! to queues whose interrupt fires on an allowed, NUMA-local CPU.
//!
//! No step is proposed on a device while an RPS change there is on trial
//! ([`super::rps_trial`]): the trial judges the whole machine's work done, which a table
//! step in its window would change too. RPS, outside distress, waits for the lever in
//! turn ([`holds_off_rps`]).
//!
//! `rss.mode: advise` runs the same arithmetic and puts the step in the plan as a note
//! instead of an action; `off` skips the rule.

use std::collections::HashMap;

use super::context::Planner;
use super::hysteresis::kilo;
use super::plan::{NoteKind, ReasonKind};
use super::rps_trial;
use super::rss_table::{self, Backoff, Proposal, StepRules, StepVerdict, TableStep};
use crate::config::RssMode;
use crate::knob::{Knob, KnobValue};

/// What the lever remembers about one device between decisions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceLever {
    /// The table as last seen: a table that changed otherwise than by steerd's own steps
    /// (the driver after `ethtool -L`, a rediscovery) starts the lever's memory over.
    seen: Vec<u32>,
    /// The step written and being measured.
    pending: Option<Pending>,
    /// Per hot queue: reverted steps and how long to wait before the next.
    backoffs: Vec<Backoff>,
    /// Consecutive decisions that proposed a step (the confirmation).
    streak: u32,
    /// The last proposal that was not a step: why RPS may (or must) help instead.
    pub refusal: Option<Proposal>,
    /// Steps written, moves kept and moves undone, for the metrics.
    pub counts: StepCounts,
}

/// The lever's tallies for one device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepCounts {
    pub taken: u64,
    pub kept: u64,
    pub reverted: u64,
}

/// A step written and not yet judged.
#[derive(Debug, Clone, PartialEq)]
struct Pending {
    step: TableStep,
    before_table: Vec<u32>,
    before_pps: Vec<f64>,
    made_at_ns: u64,
}

impl DeviceLever {
    /// Whether the lever is at work on this device: a step being confirmed or measured, or
    /// a hot queue waiting out its back-off before the next step. RPS waits meanwhile
    /// (outside distress), so the two levers do not blur each other's measurements; and
    /// just after an undo the smoothed rates still show load on the queue that briefly
    /// had it, which RPS would take for a hot queue (seen in the lab's elephant run).
    pub fn busy(&self) -> bool {
        self.pending.is_some()
            || self.streak > 0
            || matches!(self.refusal, Some(Proposal::BackingOff { .. }))
    }
}

/// The lever's memory for every device, by name.
pub type Levers = HashMap<String, DeviceLever>;

/// Runs the lever for every device with a table (see the module's doc).
pub fn balance(p: &mut Planner) {
    if p.config.rss.mode == RssMode::Off {
        return;
    }
    for d in 0..p.devices.len() {
        balance_device(p, d);
    }
}

/// What RPS should know about the lever on a device: `None` when the lever does not stand
/// in its way, else why RPS waits for it.
pub fn holds_off_rps(p: &Planner, device: &str) -> Option<String> {
    if p.config.rss.mode != RssMode::Auto {
        return None;
    }
    let lever = p.state.rss.get(device)?;
    lever.busy().then(|| {
        format!("{device}: the RSS table lever is evening out its queues first (a step is confirmed or measured)")
    })
}

/// Why the table lever cannot help a device's hot queue, for RPS's reason: `None` when
/// the device has no settable table or the lever is off.
pub fn why_not_table(p: &Planner, device: &str) -> Option<String> {
    let lever = p.state.rss.get(device)?;
    let text = match lever.refusal.as_ref()? {
        Proposal::OneEntry { queue } => {
            format!("rx-{queue} holds a single table entry: moving it only moves the load")
        }
        Proposal::GaveUp { queue } => format!(
            "table steps for rx-{queue} were undone {} times (one heavy flow moved with its entries)",
            rss_table::MAX_REVERTS
        ),
        Proposal::NoCoolerQueue { queue } => {
            format!("no usable queue is cool enough to take rx-{queue}'s table entries")
        }
        Proposal::BackingOff { .. } | Proposal::Balanced | Proposal::Step(_) => return None,
    };
    Some(text)
}

fn balance_device(p: &mut Planner, d: usize) {
    let dev = p.devices[d].dev;
    let name = dev.name.clone();
    let Some(table) = p.placement.rss_tables.get(&name).cloned() else {
        return;
    };
    let target = Knob::RssIndirection {
        device: name.clone(),
    };
    if p.frozen(&target) || dev.operstate.as_deref() == Some("down") {
        return;
    }
    let queues = dev.rx_queues.len();
    if table.iter().any(|&q| q as usize >= queues) {
        p.waiting.push(format!(
            "{name}: its RSS table names queues beyond its {queues} rx queues (a channel change in flight); not written"
        ));
        return;
    }
    let ours = p.state.written(&target).and_then(KnobValue::table) == Some(table.as_slice());
    let default_spread = crate::knob::is_driver_spread(&table, queues as u32);
    if !ours && !default_spread {
        p.note(
            NoteKind::RssTable,
            Some(target),
            format!("{name} foreign table"),
            format!(
                "{name}: its RSS table is not the driver's default spread and steerd did not set it; left alone"
            ),
        );
        return;
    }
    let Some(pps) = queue_rates(p, &name, queues) else {
        return;
    };
    let usable = usable_queues(p, d, queues);
    let now = p.now_ns;
    let dwell_ns = p.config.rss.dwell.as_nanos() as u64;
    let rules = step_rules(p.config);
    let auto = p.config.rss.mode == RssMode::Auto;
    let mut lever = p.state.rss.remove(&name).unwrap_or_default();
    if lever.seen != table && lever.pending.as_ref().is_none_or(|s| s.step.table != table) && !ours
    {
        // The driver or a rediscovery gave a table the lever did not make: start over.
        let counts = lever.counts;
        lever = DeviceLever {
            counts,
            ..DeviceLever::default()
        };
    }
    lever.seen = table.clone();
    if let Some(pending) = lever.pending.take() {
        if now.saturating_sub(pending.made_at_ns) < dwell_ns {
            p.waiting.push(format!(
                "{name}: measuring the RSS table step made {:.1} s ago (rss.dwell {:?})",
                now.saturating_sub(pending.made_at_ns) as f64 / 1e9,
                p.config.rss.dwell
            ));
            lever.pending = Some(pending);
            p.state.rss.insert(name, lever);
            return;
        }
        if pending.step.table == table {
            // Judged on the last interval's rates alone: every packet in it came after
            // the step (the smoothed rates still carry the time before it).
            let after: Vec<f64> = (0..queues as u32)
                .map(|q| p.load.rx_queue_pps_last(&name, q).unwrap_or(0.0))
                .collect();
            match judge(p, &mut lever, &pending, &after, &target, dwell_ns) {
                Judged::AllKept => {}
                Judged::Undone(undone) => {
                    // The undo is written this tick and the queue backs off: RPS still
                    // waits (the queue that briefly had the load looks hot right now).
                    let queue = pending.step.moves.first().map_or(0, |m| m.from);
                    lever.refusal = Some(Proposal::BackingOff { queue });
                    lever.seen = undone;
                    p.state.rss.insert(name, lever);
                    return;
                }
                Judged::Deferred => {
                    lever.pending = Some(pending);
                    p.state.rss.insert(name, lever);
                    return;
                }
            }
        }
    }
    if auto && rps_trial::running(p.state, &name) {
        // The trial is judged on the whole machine's work done and drops: a table step in
        // its window would be judged with it (the step's own verdict, on queue rates, is
        // not blurred by RPS, so a step already made is still judged above).
        lever.streak = 0;
        p.waiting.push(format!(
            "{name}: an RPS change is on trial; the RSS table takes no step until it is judged"
        ));
        p.state.rss.insert(name, lever);
        return;
    }
    let hottest = pps.iter().copied().fold(0.0, f64::max);
    let floor = p.work_floor();
    let proposal = if hottest < floor {
        Proposal::Balanced
    } else {
        rss_table::propose(&table, &pps, &usable, &lever.backoffs, now, rules)
    };
    if matches!(
        proposal,
        Proposal::OneEntry { .. } | Proposal::GaveUp { .. }
    ) {
        note_udp_hash(p, d);
    }
    let Proposal::Step(step) = proposal else {
        lever.streak = 0;
        lever.refusal = (proposal != Proposal::Balanced).then_some(proposal);
        p.state.rss.insert(name, lever);
        return;
    };
    lever.refusal = None;
    lever.streak += 1;
    let confirm = p.config.hysteresis.confirm_ticks;
    if lever.streak < confirm {
        p.waiting.push(format!(
            "{name}: RSS queue imbalance seen {} of {confirm} times",
            lever.streak
        ));
        p.state.rss.insert(name, lever);
        return;
    }
    let (why, expected) = describe(&name, &step, &pps);
    if !auto {
        lever.streak = 0;
        p.note(
            NoteKind::RssTable,
            Some(target),
            format!("{name} advice {}", moved_summary(&step)),
            format!("{name}: would move RSS table entries ({why}; {expected}); rss.mode is advise, so nothing is written"),
        );
        p.state.rss.insert(name, lever);
        return;
    }
    if !p.spend(&format!("{name} rss table step")) {
        p.state.rss.insert(name, lever);
        return;
    }
    lever.streak = 0;
    lever.counts.taken += 1;
    lever.pending = Some(Pending {
        step: step.clone(),
        before_table: table.clone(),
        before_pps: pps,
        made_at_ns: now,
    });
    p.state.rss.insert(name.clone(), lever);
    p.push(
        target,
        Some(format!("{name} rss")),
        KnobValue::Table { indirection: table },
        KnobValue::Table {
            indirection: step.table,
        },
        (ReasonKind::RssStep, why),
        expected,
    );
}

/// The step and gain rules of the configuration: how much of a queue's table one step may
/// move, and the least gain that keeps a move.
fn step_rules(config: &crate::config::Config) -> StepRules {
    StepRules {
        max_share: config.rss.step,
        min_gain: config.hysteresis.min_gain,
    }
}

/// What judging a measured step came to.
enum Judged {
    /// Every move helped: the lever goes on from the new table.
    AllKept,
    /// The moves that did not help are undone by the planned write of this table.
    Undone(Vec<u32>),
    /// The undoing waits for the action budget: judged again at the next decision.
    Deferred,
}

/// Judges a measured step, counts its verdicts and backs off the queues whose moves did
/// not help; plans the undoing of those moves.
fn judge(
    p: &mut Planner,
    lever: &mut DeviceLever,
    pending: &Pending,
    pps: &[f64],
    target: &Knob,
    dwell_ns: u64,
) -> Judged {
    let rules = step_rules(p.config);
    let verdicts: Vec<StepVerdict> = pending
        .step
        .moves
        .iter()
        .map(|m| rss_table::judge(m, &pending.before_pps, pps, rules))
        .collect();
    let Some(undone) = rss_table::revert(&pending.before_table, &pending.step, &verdicts) else {
        record(p, lever, pending, &verdicts, dwell_ns);
        return Judged::AllKept;
    };
    let Knob::RssIndirection { device } = target else {
        return Judged::AllKept;
    };
    if !p.spend(&format!("{device} rss table revert")) {
        return Judged::Deferred;
    }
    record(p, lever, pending, &verdicts, dwell_ns);
    let moved = |m: &rss_table::Move| format!("rx-{} -> rx-{}", m.from, m.to);
    // The device's total is one fact for the whole step: said once, not per move.
    let why = if verdicts.contains(&StepVerdict::RevertDeviceFell) {
        let all: Vec<String> = pending.step.moves.iter().map(moved).collect();
        format!(
            "RSS table step did not help: the device's queues received {} pkt/s after it, {} before ({})",
            kilo(pps.iter().sum::<f64>()),
            kilo(pending.before_pps.iter().sum::<f64>()),
            all.join(", ")
        )
    } else {
        let what: Vec<String> = pending
            .step
            .moves
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| **v != StepVerdict::Keep)
            .map(|(m, v)| {
                let cause = match v {
                    StepVerdict::RevertMovedHot => "the load moved with the entries",
                    _ => "the entries carried almost nothing",
                };
                format!("{} ({cause})", moved(m))
            })
            .collect();
        format!("RSS table step did not help: {}", what.join(", "))
    };
    p.push(
        target.clone(),
        Some(format!("{device} rss")),
        KnobValue::Table {
            indirection: pending.step.table.clone(),
        },
        KnobValue::Table {
            indirection: undone.clone(),
        },
        (ReasonKind::RssRevert, why),
        format!("{device}'s undone entries go back to their queues; the queue waits longer before another step"),
    );
    Judged::Undone(undone)
}

/// Counts a judged step's verdicts and backs off each queue whose move did not help.
fn record(
    p: &Planner,
    lever: &mut DeviceLever,
    pending: &Pending,
    verdicts: &[StepVerdict],
    dwell_ns: u64,
) {
    for (m, v) in pending.step.moves.iter().zip(verdicts) {
        let slot = m.from as usize;
        if lever.backoffs.len() <= slot {
            lever.backoffs.resize(slot + 1, Backoff::default());
        }
        lever.backoffs[slot].record(*v, p.now_ns, dwell_ns);
        if *v == StepVerdict::Keep {
            lever.counts.kept += 1;
        } else {
            lever.counts.reverted += 1;
        }
    }
}

/// The advice for a hot queue whose load sits in few buckets on a NIC that hashes UDP on
/// addresses only: if those are several flows between the same two hosts, hashing on the
/// ports too spreads them where no table step can. Advice only: the hash fields change
/// which queue every flow lands on, and that is the operator's call.
fn note_udp_hash(p: &mut Planner, d: usize) {
    let dev = p.devices[d].dev;
    if dev.udp_hashed_on_addresses.is_empty() {
        return;
    }
    let name = dev.name.clone();
    let families = dev.udp_hashed_on_addresses.join(" and ");
    let fix: Vec<String> = dev
        .udp_hashed_on_addresses
        .iter()
        .map(|family| format!("ethtool -N {name} rx-flow-hash {family} sdfn"))
        .collect();
    p.note(
        NoteKind::UdpHash,
        None,
        format!("{name} udp hash"),
        format!(
            "{name}: a hot queue's load sits in one table entry or a few, and {families} is hashed on IP addresses only: if these are several UDP flows between the same hosts, `{}` spreads them over the queues (advice; steerd does not change hash fields)",
            fix.join("; ")
        ),
    );
}

/// Each queue's packet rate, or `None` (and a note) when a queue has no counter: the lever
/// measures every step, so it needs all of them.
fn queue_rates(p: &mut Planner, name: &str, queues: usize) -> Option<Vec<f64>> {
    let rates: Option<Vec<f64>> = (0..queues as u32)
        .map(|q| p.load.rx_queue_pps(name, q))
        .collect();
    if rates.is_none() {
        p.note(
            NoteKind::RssTable,
            None,
            format!("{name} no counters"),
            format!("{name}: no per-queue packet counters, so the RSS table lever cannot measure a step; left alone"),
        );
    }
    rates
}

/// Which queues may receive entries: those whose receive interrupt fires on an allowed,
/// NUMA-local CPU of the device.
fn usable_queues(p: &Planner, d: usize, queues: usize) -> Vec<bool> {
    let mut usable = vec![false; queues];
    for &slot in &p.devices[d].vectors {
        let view = &p.irqs[slot];
        if let (Some(q), Some(cpu)) = (view.irq.queue, view.cpu)
            && p.devices[d].local.contains(cpu)
            && let Some(u) = usable.get_mut(q as usize)
        {
            *u = true;
        }
    }
    usable
}

/// The reason and the expected effect of a step, for people.
fn describe(name: &str, step: &TableStep, pps: &[f64]) -> (String, String) {
    let rate = |q: u32| pps.get(q as usize).copied().unwrap_or(0.0);
    let hot: Vec<String> = step
        .moves
        .iter()
        .map(|m| format!("rx-{} {} pkt/s", m.from, kilo(rate(m.from))))
        .collect();
    let why = format!(
        "{name}'s hash fills some queues more than others ({} against {} pkt/s on average); moving table entries evens the hash out, which an IRQ move or RPS cannot",
        hot.join(", "),
        kilo(pps.iter().sum::<f64>() / pps.len().max(1) as f64)
    );
    let expected: Vec<String> = step
        .moves
        .iter()
        .map(|m| {
            format!(
                "{} of rx-{}'s entries to rx-{}: rx-{} {} -> {}, rx-{} {} -> {} pkt/s if its load is spread evenly over its entries",
                m.moved.len(),
                m.from,
                m.to,
                m.from,
                kilo(rate(m.from)),
                kilo(m.expected_pps.0),
                m.to,
                kilo(rate(m.to)),
                kilo(m.expected_pps.1)
            )
        })
        .collect();
    (why, expected.join("; "))
}

/// `rx-0>rx-2:16,rx-1>rx-3:16`: a step's moves, to report each advice once.
fn moved_summary(step: &TableStep) -> String {
    step.moves
        .iter()
        .map(|m| format!("rx-{}>rx-{}:{}", m.from, m.to, m.moved.len()))
        .collect::<Vec<_>>()
        .join(",")
}
