//! NIC queue IRQs allowed onto isolated (`isolcpus=`, or an isolated cgroup v2 cpuset
//! partition) or `nohz_full` CPUs: those CPUs were set aside for latency-critical work, and a receive interrupt plus its softirq on them
//! is exactly the jitter they were isolated from.

use std::collections::BTreeMap;

use super::{Context, Finding, Severity};
use crate::model::inventory::IrqRole;

pub fn check(context: &Context) -> Vec<Finding> {
    let topology = &context.machine.topology;
    let reserved = topology.set_aside();
    if reserved.is_empty() {
        return Vec::new();
    }
    let allowed_elsewhere = topology.online.difference(&reserved);
    let mut evidence = Vec::new();
    // New affinity -> the IRQs to give it.
    let mut fixes: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut managed = Vec::new();
    for irq in &context.machine.inventory.irqs {
        let (Some(device), Some(affinity)) = (&irq.device, &irq.affinity) else {
            continue;
        };
        if irq.role == IrqRole::Other || !affinity.intersects(&reserved) {
            continue;
        }
        evidence.push(format!(
            "IRQ {} ({device}) smp_affinity_list {} includes {}",
            irq.irq,
            affinity.to_list(),
            affinity.intersection(&reserved).to_list()
        ));
        if irq.managed {
            managed.push(irq.irq);
            continue;
        }
        let mut target = affinity.difference(&reserved);
        if target.is_empty() {
            target = allowed_elsewhere.clone();
        }
        if !target.is_empty() {
            fixes.entry(target.to_list()).or_default().push(irq.irq);
        }
    }
    if evidence.is_empty() {
        return Vec::new();
    }
    let irq_dir = context.root.path("proc/irq");
    let commands: Vec<String> = fixes
        .iter()
        .map(|(list, irqs)| {
            let irqs: Vec<String> = irqs.iter().map(u32::to_string).collect();
            format!(
                "for i in {}; do echo {list} > {}/$i/smp_affinity_list; done",
                irqs.join(" "),
                irq_dir.display()
            )
        })
        .collect();
    let mut evidence = format!(
        "isolated {}, nohz_full {} (sys/devices/system/cpu), isolated cgroup partitions {} \
         (cpuset.cpus.isolated); {}",
        or_none(&topology.isolated.to_list()),
        or_none(&topology.nohz_full.to_list()),
        or_none(&topology.isolated_partitions.to_list()),
        evidence.join("; ")
    );
    if !managed.is_empty() {
        evidence.push_str(&format!(
            "; kernel-managed (cannot be moved from user space; boot with \
             isolcpus=managed_irq,...): {managed:?}"
        ));
    }
    vec![Finding {
        check: "isolated_cpus",
        severity: Severity::Warning,
        summary: format!(
            "{} NIC queue IRQ(s) may fire on isolated or nohz_full CPUs {}",
            evidence.matches("smp_affinity_list").count(),
            reserved.to_list()
        ),
        evidence,
        why: "isolated and nohz_full CPUs are kept free for latency-critical work, and a \
              receive interrupt with its softirq there is the jitter they were isolated from."
            .into(),
        fix: (!commands.is_empty()).then(|| commands.join("; ")),
    }]
}

fn or_none(list: &str) -> &str {
    if list.is_empty() { "none" } else { list }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, run_check};
    use super::*;
    use crate::cpuset::CpuSet;

    #[test]
    fn finds_queue_irqs_allowed_on_isolated_cpus() {
        let (_dir, tree) = machine(|_| {});
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);

        let (_dir, tree) = machine(|m| {
            m.isolated = CpuSet::parse_list("2").unwrap();
            m.nohz_full = CpuSet::parse_list("3").unwrap();
        });
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.summary.starts_with("4 NIC queue IRQ(s)"), "{f:?}");
        assert!(f.evidence.contains("includes 2-3"), "{f:?}");
        let irqs: Vec<String> = tree.queue_irqs[0].iter().map(u32::to_string).collect();
        let fix = f.fix.as_deref().unwrap();
        assert!(
            fix.starts_with(&format!("for i in {}; do echo 0-1 > ", irqs.join(" "))),
            "{fix}"
        );
    }

    #[test]
    fn irqs_kept_off_isolated_cpus_are_fine() {
        let (_dir, tree) = machine(|m| m.isolated = CpuSet::parse_list("3").unwrap());
        for irq in &tree.queue_irqs[0] {
            super::super::testing::put(
                &tree,
                &format!("proc/irq/{irq}/smp_affinity_list"),
                "0-2\n",
            );
        }
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);
    }

    #[test]
    fn an_isolated_cgroup_partition_counts_like_isolcpus() {
        let (_dir, tree) = machine(|_| {});
        let cgroup = tree.root.join("sys/fs/cgroup");
        std::fs::create_dir_all(&cgroup).unwrap();
        std::fs::write(cgroup.join("cpuset.cpus.isolated"), "3\n").unwrap();
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert!(f.summary.ends_with("CPUs 3"), "{f:?}");
        assert!(
            f.evidence
                .contains("isolated cgroup partitions 3 (cpuset.cpus.isolated)"),
            "{f:?}"
        );
        assert!(f.fix.as_deref().unwrap().contains("echo 0-2 > "), "{f:?}");
    }
}
