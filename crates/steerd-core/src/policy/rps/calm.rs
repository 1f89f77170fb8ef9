//! Narrowing RPS and turning it off: once every CPU a device's steerd-set masks involve
//! has been calm for `calm_ticks` and the masks have dwelt `rps_dwell`, halve them, or
//! clear them when all the work would fit on the interrupting CPUs under the low
//! watermark.
//!
//! It is a module of its own because it is the slow half of the RPS hysteresis, the
//! counterpart of [`super::spread`]: it reads calm rather than heat, changes only masks
//! steerd set, and predicts the work left on fewer CPUs rather than the work taken away.

use super::{apply, steerds_masks, target};
use crate::cpuset::CpuSet;
use crate::policy::context::Planner;
use crate::policy::hysteresis::kilo;
use crate::policy::plan::ReasonKind;

/// Narrows or turns off the masks steerd set, once everything involved is calm.
pub(super) fn calm_down(p: &mut Planner, d: usize) {
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
    let ours = steerds_masks(p, d);
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

/// Half of a mask (rounded up), one CPU per physical core first, lowest ids first, of its
/// online CPUs: the kernel stores only those (`store_rps_map`), so a half that kept a CPU
/// gone offline would read back as someone else's mask (see `super::as_the_kernel_stores`).
/// A mask with no online CPU stays as it is.
fn halve(p: &Planner, mask: &CpuSet) -> CpuSet {
    let online = mask.intersection(&p.topology.online);
    if online.is_empty() {
        return mask.clone();
    }
    let mask = &online;
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
