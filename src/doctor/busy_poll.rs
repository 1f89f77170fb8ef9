//! NAPI threads in busy-poll mode (`threaded` = 2, 6.19) allowed on CPUs that also serve
//! other queues' interrupts.
//!
//! A busy-polling NAPI thread never sleeps: it polls its queue continuously and keeps a
//! whole CPU busy (NAPI documentation, "Threaded NAPI busy polling", which leaves its
//! affinity to user space). On a CPU where steerd places other queues, their receive work
//! competes with a thread that never yields, and the CPU looks hot whatever steerd does.
//! The doctor does not read steerd's configuration: the CPUs it counts as steerd's are
//! those steerd may use with any configuration, online and neither isolated nor
//! `nohz_full`.

use std::collections::BTreeMap;

use super::{Context, Finding, Severity};
use crate::cpuset::CpuSet;

pub fn check(context: &Context) -> Vec<Finding> {
    let inventory = &context.machine.inventory;
    let usable = usable_cpus(&context.machine.topology);
    // Every receive queue whose vector is delivered to a CPU: what steerd placed there.
    let mut queues_on: BTreeMap<u32, Vec<(String, u32, u32)>> = BTreeMap::new();
    for device in &inventory.devices {
        for queue in &device.rx_queues {
            let Some(irq) = queue.irq.and_then(|n| inventory.irq(n)) else {
                continue;
            };
            let Some(cpus) = crate::top::frame::delivered_to(irq) else {
                continue;
            };
            for cpu in cpus.iter() {
                queues_on
                    .entry(cpu)
                    .or_default()
                    .push((device.name.clone(), queue.index, irq.irq));
            }
        }
    }
    // CPUs no queue uses, where a spinning thread harms nobody's interrupts.
    let free: Vec<u32> = usable
        .iter()
        .filter(|c| !queues_on.contains_key(c))
        .collect();

    let mut findings = Vec::new();
    for device in &inventory.devices {
        for queue in &device.rx_queues {
            if !queue.napi.busy_polls() {
                continue;
            }
            let Some(thread) = &queue.napi_thread else {
                continue;
            };
            let mut crowded = Vec::new();
            for cpu in thread.affinity.iter().filter(|&c| usable.contains(c)) {
                let others: Vec<String> = queues_on
                    .get(&cpu)
                    .into_iter()
                    .flatten()
                    .filter(|(d, q, _)| !(d == &device.name && *q == queue.index))
                    .map(|(d, q, irq)| format!("{d} rx-{q} (IRQ {irq})"))
                    .collect();
                if !others.is_empty() {
                    crowded.push(format!("CPU {cpu}: {}", others.join(", ")));
                }
            }
            if crowded.is_empty() {
                continue;
            }
            // A CPU no queue uses, else the last one steerd may use. Pinned there, the
            // thread keeps that CPU to itself while steerd runs (`policy::context::
            // busy_poll_cpus`: steerd moves the queues it manages off it).
            let target = free.first().copied().or_else(|| usable.iter().last());
            let fix = target.map(|cpu| {
                format!(
                    "taskset -pc {cpu} {}; a running steerd then keeps every queue it \
                     manages off CPU {cpu} by itself (without steerd, move the other \
                     queues' IRQs off it, or add {cpu} to cpus.banned)",
                    thread.pid
                )
            });
            findings.push(Finding {
                check: "busy_poll",
                severity: Severity::Warning,
                summary: format!(
                    "{} rx-{}: busy-polling NAPI thread {} may spin on CPUs that serve other queues",
                    device.name, queue.index, thread.name
                ),
                evidence: format!(
                    "{} (pid {}) threaded busy-poll, allowed on {}; {} (CPUs steerd may use: \
                     online, not isolated, not nohz_full: {})",
                    thread.name,
                    thread.pid,
                    thread.affinity.to_list(),
                    crowded.join("; "),
                    usable.to_list()
                ),
                why: "a busy-polling NAPI thread never sleeps, so it takes a whole CPU from \
                      the queues whose interrupts steerd places there."
                    .into(),
                fix,
            });
        }
    }
    findings
}

/// The online CPUs not set aside (isolated, `nohz_full`, isolated cgroup partitions):
/// those steerd may place queues on whatever its configuration bans.
fn usable_cpus(topology: &crate::model::topology::Topology) -> CpuSet {
    topology.online.difference(&topology.set_aside())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{deliver_queue_irqs, machine, not_sampled, run_check};
    use super::*;

    fn pin(tree: &crate::fakeroot::FakeTree, pid: u32, cpus: &str) {
        let path = tree.root.join(format!("proc/{pid}/status"));
        let text = std::fs::read_to_string(&path).unwrap();
        let pinned =
            crate::kernel::napi_threads::with_affinity(&text, &CpuSet::parse_list(cpus).unwrap());
        std::fs::write(path, pinned).unwrap();
    }

    #[test]
    fn a_busy_poll_thread_beside_other_queues_is_found_with_the_cpu_and_queues() {
        let (_dir, tree) = machine(|_| {});
        // eth0's vectors delivered to CPUs 0-3, one queue each.
        deliver_queue_irqs(&tree, |q| q);
        let pids = tree.make_busy_poll(0, 700).unwrap();
        // rx-0's thread pinned where rx-2's interrupt fires.
        pin(&tree, pids[0], "2");
        for (q, &pid) in pids.iter().enumerate().skip(1) {
            pin(&tree, pid, &q.to_string());
        }
        let findings = run_check(&tree, check, not_sampled(), None);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let finding = &findings[0];
        assert_eq!(finding.severity, Severity::Warning);
        assert!(
            finding
                .summary
                .starts_with("eth0 rx-0: busy-polling NAPI thread napi/eth0-8193")
        );
        let irq = tree.queue_irqs[0][2];
        assert!(
            finding
                .evidence
                .contains(&format!("CPU 2: eth0 rx-2 (IRQ {irq})")),
            "{}",
            finding.evidence
        );
        let fix = finding.fix.as_deref().unwrap();
        assert!(
            fix.starts_with(&format!("taskset -pc 3 {}", pids[0])),
            "{fix}"
        );
        assert!(fix.contains("cpus.banned"), "{fix}");
    }

    #[test]
    fn plain_threads_and_a_busy_poll_thread_on_a_cpu_of_its_own_are_fine() {
        let (_dir, tree) = machine(|m| m.isolated = CpuSet::parse_list("3").unwrap());
        // Queues on CPUs 0-2 only: CPU 3 is isolated.
        deliver_queue_irqs(&tree, |q| q % 3);
        let pids = tree.make_threaded(0, 700).unwrap();
        assert!(run_check(&tree, check, not_sampled(), None).is_empty());
        tree.make_busy_poll(0, 700).unwrap();
        for &pid in &pids {
            pin(&tree, pid, "3");
        }
        assert!(run_check(&tree, check, not_sampled(), None).is_empty());
    }
}
