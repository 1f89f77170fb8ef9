//! CPUs busy in irq+softirq while few NIC queue IRQs land on them: the receive work
//! there arrives some other way (one queue's elephant flows, RPS aimed at it, or another
//! softirq), so moving IRQs will not relieve it; spreading that one queue with RPS will.
//!
//! The share is the daemon's ([`crate::load::CpuLoad::net_share`], through
//! [`super::sample`]): irq+softirq time plus the time of threaded NAPI threads that ran
//! there (busy-polling ones left out), and hot and room are the daemon's default
//! watermarks, so `doctor` calls hot what the daemon calls hot.

use super::one_cpu::{is_queue_irq, lands_on};
use super::{Context, Finding, Severity};
use crate::config::Watermarks;
use crate::cpuset::CpuSet;

/// "Few": at most this many queue IRQs land on the hot CPU.
const FEW_IRQS: usize = 1;

pub fn check(context: &Context) -> Vec<Finding> {
    let samples = match &context.samples {
        Ok(samples) => samples,
        Err(why) => {
            return vec![Finding {
                check: "softirq_share",
                severity: Severity::Info,
                summary: "not checked: proc/stat could not be sampled".into(),
                evidence: why.to_string(),
                why: "irq+softirq load per CPU shows where receive work piles up.".into(),
                fix: None,
            }];
        }
    };
    // A CPU at or above the daemon's high watermark is hot; spreading helps only when
    // some CPU has room, below its low watermark.
    let Watermarks { high, low, .. } = Watermarks::default();
    let shares = samples.shares();
    if !shares.iter().any(|&(_, share)| share < low) {
        return Vec::new();
    }
    let topology = &context.machine.topology;
    let reserved = topology.set_aside();
    let inventory = &context.machine.inventory;
    let mut findings = Vec::new();
    for &(cpu, share) in &shares {
        if share < high {
            continue;
        }
        let landing: Vec<_> = inventory
            .irqs
            .iter()
            .filter(|irq| is_queue_irq(irq) && lands_on(irq).is_some_and(|s| s.contains(cpu)))
            .collect();
        if landing.len() > FEW_IRQS {
            continue;
        }
        let evidence = format!(
            "proc/stat: CPU {cpu} spent {:.0} % in irq+softirq (with threaded NAPI polling, as \
             the daemon counts it) over {:.1} s, at or above the daemon's high watermark \
             {high:.2}; {} NIC queue IRQ(s) land on it{}",
            share * 100.0,
            samples.seconds,
            landing.len(),
            landing
                .first()
                .map(|irq| format!(" (IRQ {}, {})", irq.irq, irq.name))
                .unwrap_or_default()
        );
        let fix = landing.first().and_then(|irq| {
            let device = inventory.device(irq.device.as_deref()?)?;
            let queue = irq.queue?;
            let mut cpus: CpuSet = device
                .local_cpus
                .clone()
                .unwrap_or_else(|| topology.online.clone())
                .intersection(&topology.online)
                .difference(&reserved);
            cpus.remove(cpu);
            let mask = cpus.to_mask(topology.nr_cpu_ids).ok()?;
            (!cpus.is_empty()).then(|| {
                format!(
                    "echo {mask} > {}",
                    context
                        .root
                        .path(format!(
                            "sys/class/net/{}/queues/rx-{queue}/rps_cpus",
                            device.name
                        ))
                        .display()
                )
            })
        });
        findings.push(Finding {
            check: "softirq_share",
            severity: Severity::Warning,
            summary: format!(
                "CPU {cpu} is {:.0} % busy in irq+softirq with {} NIC queue IRQ(s) on it",
                share * 100.0,
                landing.len()
            ),
            evidence,
            why: if landing.is_empty() {
                "the softirq work there comes from RPS or another softirq (see \
                 /proc/softirqs), so moving NIC IRQs will not relieve it."
                    .into()
            } else {
                "one queue's flows saturate this CPU while others have room; RPS spreads that \
                 queue's protocol work over its other local CPUs."
                    .into()
            },
            fix,
        });
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::sample::{Samples, SamplesError};
    use super::super::testing::{deliver_queue_irqs, machine, run_check};
    use super::*;
    use crate::model::snapshot::{CpuTimes, Snapshot};

    /// CPU 1 spends `irq` of its time in hard IRQs and `softirq` in softirq (percent), the
    /// others 5 % in softirq.
    fn split(irq: u64, softirq: u64) -> Result<Samples, SamplesError> {
        let reading = |scale: u64| Snapshot {
            taken_at_ns: scale * 1_000_000_000,
            cpu_times: (0..4)
                .map(|cpu| {
                    let (irq, softirq) = if cpu == 1 { (irq, softirq) } else { (0, 5) };
                    CpuTimes {
                        cpu,
                        irq: irq * scale,
                        softirq: softirq * scale,
                        idle: (100 - irq - softirq) * scale,
                        ..CpuTimes::default()
                    }
                })
                .collect(),
            ..Snapshot::default()
        };
        Ok(Samples::between(reading(1), reading(2)))
    }

    /// CPU 1 spends `hot` of its time in softirq, the others 5 %.
    fn samples(hot: u64) -> Result<Samples, SamplesError> {
        split(0, hot)
    }

    #[test]
    fn a_hot_cpu_with_one_queue_irq_gets_that_queue_spread_by_rps() {
        let (_dir, tree) = machine(|_| {});
        deliver_queue_irqs(&tree, |q| q);
        let f = run_check(&tree, check, samples(80), None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].summary,
            "CPU 1 is 80 % busy in irq+softirq with 1 NIC queue IRQ(s) on it"
        );
        assert!(
            f[0].evidence
                .contains("at or above the daemon's high watermark 0.60"),
            "{f:?}"
        );
        let fix = f[0].fix.as_deref().unwrap();
        // CPUs 0, 2, 3 of node 0's 0-3.
        assert!(fix.starts_with("echo d > "), "{fix}");
        assert!(
            fix.ends_with("sys/class/net/eth0/queues/rx-1/rps_cpus"),
            "{fix}"
        );
    }

    /// The share is the daemon's: hard IRQ time counts as softirq time does, and hot is
    /// the daemon's high watermark (0.60), where softirq / total at 0.50 was once hot.
    #[test]
    fn the_share_is_the_daemons_irq_plus_softirq_share() {
        let (_dir, tree) = machine(|_| {});
        deliver_queue_irqs(&tree, |q| q);
        let f = run_check(&tree, check, split(60, 5), None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].summary,
            "CPU 1 is 65 % busy in irq+softirq with 1 NIC queue IRQ(s) on it"
        );
        let below_high = run_check(&tree, check, split(0, 55), None);
        assert_eq!(below_high, vec![], "the daemon calls 0.55 calm");
    }

    #[test]
    fn no_hot_cpu_or_a_hot_cpu_with_many_irqs_is_fine() {
        let (_dir, tree) = machine(|_| {});
        deliver_queue_irqs(&tree, |q| q);
        assert_eq!(run_check(&tree, check, samples(20), None), vec![]);
        deliver_queue_irqs(&tree, |_| 1);
        assert_eq!(run_check(&tree, check, samples(80), None), vec![]);
    }
}
