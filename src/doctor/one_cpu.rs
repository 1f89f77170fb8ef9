//! A multi-queue NIC whose receive queue IRQs all land on one CPU: the queues exist to
//! spread receive work over CPUs, and stacked on one they give one CPU's worth of receive
//! capacity however many queues there are. Only vectors that carry receive work count: on
//! virtio-net (separate `input` and `output` vectors) every input vector on CPU0 with the
//! outputs spread is the stacked case, seen in the lab's `doctor` scenario.

use super::{Context, Finding, Severity};
use crate::cpuset::CpuSet;
use crate::model::inventory::{Irq, IrqRole};

/// Where an IRQ is delivered: `effective_affinity_list` when the kernel says, else its
/// `smp_affinity_list` when that is a single CPU; `None` when unknown.
pub fn lands_on(irq: &Irq) -> Option<CpuSet> {
    match (&irq.effective_affinity, &irq.affinity) {
        (Some(effective), _) if !effective.is_empty() => Some(effective.clone()),
        (_, Some(affinity)) if affinity.len() == 1 => Some(affinity.clone()),
        _ => None,
    }
}

/// Whether the IRQ is one of a NIC's queue vectors.
pub fn is_queue_irq(irq: &Irq) -> bool {
    irq.device.is_some() && irq.role != IrqRole::Other
}

/// Whether the IRQ is one of a NIC's queue vectors that carries receive work.
fn is_receive_queue_irq(irq: &Irq) -> bool {
    irq.device.is_some() && matches!(irq.role, IrqRole::Rx | IrqRole::Rxtx)
}

pub fn check(context: &Context) -> Vec<Finding> {
    let inventory = &context.machine.inventory;
    let topology = &context.machine.topology;
    let usable = topology.online.difference(&topology.set_aside());
    let mut findings = Vec::new();
    for device in &inventory.devices {
        let queue_irqs: Vec<&Irq> = device
            .irqs
            .iter()
            .filter_map(|&n| inventory.irq(n))
            .filter(|irq| is_receive_queue_irq(irq))
            .collect();
        if queue_irqs.len() < 2 {
            continue;
        }
        let Some(landing) = queue_irqs
            .iter()
            .map(|irq| lands_on(irq))
            .collect::<Option<Vec<CpuSet>>>()
        else {
            continue;
        };
        let all = landing.iter().fold(CpuSet::new(), |all, s| all.union(s));
        if all.len() != 1 {
            continue;
        }
        let mut spread: Vec<u32> = device
            .local_cpus
            .as_ref()
            .map_or(usable.clone(), |local| local.intersection(&usable))
            .iter()
            .collect();
        if spread.len() < 2 {
            spread = usable.iter().collect();
        }
        let irq_dir = context.root.path("proc/irq");
        let fix = (spread.len() >= 2).then(|| {
            queue_irqs
                .iter()
                .zip(spread.iter().cycle())
                .map(|(irq, cpu)| {
                    format!(
                        "echo {cpu} > {}/{}/smp_affinity_list",
                        irq_dir.display(),
                        irq.irq
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        });
        let numbers: Vec<String> = queue_irqs.iter().map(|irq| irq.irq.to_string()).collect();
        findings.push(Finding {
            check: "one_cpu",
            severity: Severity::Warning,
            summary: format!(
                "{}: all {} receive queue IRQs land on CPU {}",
                device.name,
                queue_irqs.len(),
                all.to_list()
            ),
            evidence: format!(
                "proc/irq/{{{}}}/effective_affinity_list (or a one-CPU smp_affinity_list) = {}",
                numbers.join(","),
                all.to_list()
            ),
            why: "queues on one CPU give one CPU's worth of receive capacity however many \
                  queues the NIC has, and that CPU's softirq load caps the NIC's throughput."
                .into(),
            fix,
        });
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::testing::{deliver_queue_irqs, machine, not_sampled, put, run_check};
    use super::*;

    #[test]
    fn finds_a_nic_stacked_on_one_cpu_and_spreads_it() {
        // The fake tree delivers every IRQ to CPU 0 (effective_affinity_list 0).
        let (_dir, tree) = machine(|_| {});
        let f = run_check(&tree, check, not_sampled(), None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].summary, "eth0: all 4 receive queue IRQs land on CPU 0");
        let fix = f[0].fix.as_deref().unwrap();
        let last = tree.queue_irqs[0][3];
        assert!(
            fix.ends_with(&format!(
                "echo 3 > {}/proc/irq/{last}/smp_affinity_list",
                tree.root.display()
            )),
            "{fix}"
        );
    }

    #[test]
    fn receive_vectors_on_one_cpu_are_found_when_transmit_vectors_are_spread() {
        // As virtio-net with every input vector on CPU0: queues 0 and 1 carry receive
        // work and land on CPU 0; queues 2 and 3 are transmit-only vectors on CPU 1.
        let (_dir, tree) = machine(|_| {});
        let interrupts = std::fs::read_to_string(tree.root.join("proc/interrupts")).unwrap();
        let interrupts = interrupts
            .replace("eth0-TxRx-2", "eth0-tx-2")
            .replace("eth0-TxRx-3", "eth0-tx-3");
        put(&tree, "proc/interrupts", &interrupts);
        for irq in &tree.queue_irqs[0][2..] {
            put(
                &tree,
                &format!("proc/irq/{irq}/effective_affinity_list"),
                "1\n",
            );
        }
        let f = run_check(&tree, check, not_sampled(), None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].summary, "eth0: all 2 receive queue IRQs land on CPU 0");
    }

    #[test]
    fn queue_irqs_on_several_cpus_are_fine() {
        let (_dir, tree) = machine(|_| {});
        deliver_queue_irqs(&tree, |q| q % 2);
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);
    }
}
