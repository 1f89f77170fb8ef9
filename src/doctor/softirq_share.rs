//! CPUs busy in softirq while few NIC queue IRQs land on them: the receive work there
//! arrives some other way (one queue's elephant flows, RPS aimed at it, or another
//! softirq), so moving IRQs will not relieve it; spreading that one queue with RPS will.

use super::one_cpu::{is_queue_irq, lands_on};
use super::{Context, Finding, Severity};
use crate::cpuset::CpuSet;

/// A CPU this busy in softirq (share of its time) is hot.
const HOT_SHARE: f64 = 0.5;

/// "Few": at most this many queue IRQs land on the hot CPU.
const FEW_IRQS: usize = 1;

/// Spreading helps only when some CPU has room: at most this share in softirq.
const ROOM_SHARE: f64 = 0.25;

pub fn check(context: &Context) -> Vec<Finding> {
    let samples = match &context.samples {
        Ok(samples) => samples,
        Err(why) => {
            return vec![Finding {
                check: "softirq_share",
                severity: Severity::Info,
                summary: "not checked: proc/stat could not be sampled".into(),
                evidence: why.clone(),
                why: "softirq load per CPU shows where receive work piles up.".into(),
                fix: None,
            }];
        }
    };
    let shares = samples.softirq_shares();
    if !shares.iter().any(|&(_, share)| share <= ROOM_SHARE) {
        return Vec::new();
    }
    let topology = &context.machine.topology;
    let reserved = topology.set_aside();
    let inventory = &context.machine.inventory;
    let mut findings = Vec::new();
    for &(cpu, share) in &shares {
        if share < HOT_SHARE {
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
            "proc/stat: CPU {cpu} spent {:.0} % in softirq over {:.1} s; {} NIC queue IRQ(s) \
             land on it{}",
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
                "CPU {cpu} is {:.0} % busy in softirq with {} NIC queue IRQ(s) on it",
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
    use super::super::sample::{Sample, Samples};
    use super::super::testing::{deliver_queue_irqs, machine, run_check};
    use super::*;
    use crate::model::snapshot::CpuTimes;

    /// CPU 1 spends `hot` of its time in softirq, the others 5 %.
    fn samples(hot: u64) -> Result<Samples, String> {
        let times = |scale: u64| -> Vec<CpuTimes> {
            (0..4)
                .map(|cpu| {
                    let softirq = if cpu == 1 { hot } else { 5 } * scale;
                    CpuTimes {
                        cpu,
                        softirq,
                        idle: 100 * scale - softirq,
                        ..CpuTimes::default()
                    }
                })
                .collect()
        };
        let sample = |scale| Sample {
            softnet: Vec::new(),
            cpu_times: times(scale),
        };
        Ok(Samples {
            before: sample(1),
            after: sample(2),
            seconds: 1.0,
        })
    }

    #[test]
    fn a_hot_cpu_with_one_queue_irq_gets_that_queue_spread_by_rps() {
        let (_dir, tree) = machine(|_| {});
        deliver_queue_irqs(&tree, |q| q);
        let f = run_check(&tree, check, samples(80), None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].summary,
            "CPU 1 is 80 % busy in softirq with 1 NIC queue IRQ(s) on it"
        );
        let fix = f[0].fix.as_deref().unwrap();
        // CPUs 0, 2, 3 of node 0's 0-3.
        assert!(fix.starts_with("echo d > "), "{fix}");
        assert!(
            fix.ends_with("sys/class/net/eth0/queues/rx-1/rps_cpus"),
            "{fix}"
        );
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
