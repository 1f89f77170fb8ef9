//! Threaded NAPI polling threads that are not pinned beside their queue's interrupt while
//! no steerd runs to do it: with `threaded` on, the receive work runs wherever the
//! scheduler puts each `napi/DEV-ID` thread (seen on a 6.12 guest: one thread ran on CPUs
//! 1, 0, 0, 3, 0, 1 in six samples), so moving IRQs does not move the work. The kernel's
//! NAPI documentation recommends pinning each thread to its IRQ's CPU.

use super::{Context, Finding, Severity};

pub fn check(context: &Context) -> Vec<Finding> {
    let daemon_runs = matches!(&context.daemon, Some((_, Ok(_))));
    if daemon_runs {
        return Vec::new();
    }
    let inventory = &context.machine.inventory;
    let mut evidence = Vec::new();
    let mut commands = Vec::new();
    for device in &inventory.devices {
        for queue in &device.rx_queues {
            let Some(thread) = &queue.napi_thread else {
                continue;
            };
            let irq_cpu = queue
                .irq
                .and_then(|n| inventory.irq(n))
                .and_then(|irq| irq.effective_affinity.as_ref().or(irq.affinity.as_ref()))
                .and_then(|cpus| cpus.first());
            let Some(cpu) = irq_cpu else { continue };
            if thread.affinity.len() == 1 && thread.affinity.contains(cpu) {
                continue;
            }
            evidence.push(format!(
                "{} rx-{}: {} (pid {}) allowed on {}, its IRQ fires on CPU {cpu}",
                device.name,
                queue.index,
                thread.name,
                thread.pid,
                thread.affinity.to_list()
            ));
            commands.push(format!("taskset -pc {cpu} {}", thread.pid));
        }
    }
    if evidence.is_empty() {
        return Vec::new();
    }
    vec![Finding {
        check: "napi_threads",
        severity: Severity::Warning,
        summary: format!(
            "{} threaded NAPI receive thread(s) not pinned beside their queue's interrupt",
            evidence.len()
        ),
        evidence: evidence.join("; "),
        why: "with threaded NAPI the receive work runs in these threads, wherever the \
              scheduler puts them, so placing the interrupts does not place the work."
            .into(),
        fix: Some(format!(
            "systemctl start steerd (it pins them and follows the IRQs), or: {}",
            commands.join("; ")
        )),
    }]
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, run_check};
    use super::*;

    #[test]
    fn unpinned_threads_are_found_with_the_command_that_pins_them() {
        let (_dir, tree) = machine(|_| {});
        let pids = tree.make_threaded(0, 700).unwrap();
        let findings = run_check(&tree, check, not_sampled(), None);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let finding = &findings[0];
        assert_eq!(finding.severity, Severity::Warning);
        assert!(
            finding.summary.starts_with("4 threaded NAPI"),
            "{}",
            finding.summary
        );
        let fix = finding.fix.as_deref().unwrap();
        assert!(fix.contains("taskset -pc "), "{fix}");
        assert!(fix.contains(&pids[3].to_string()), "{fix}");
    }

    #[test]
    fn pinned_threads_and_unthreaded_devices_are_fine() {
        let (_dir, tree) = machine(|_| {});
        assert!(run_check(&tree, check, not_sampled(), None).is_empty());
        let pids = tree.make_threaded(0, 700).unwrap();
        for (q, pid) in pids.iter().enumerate() {
            let irq = tree.queue_irqs[0][q];
            let cpu = std::fs::read_to_string(
                tree.root.join(format!("proc/irq/{irq}/smp_affinity_list")),
            )
            .unwrap();
            let cpu = crate::CpuSet::parse_list(&cpu).unwrap().first().unwrap();
            let path = tree.root.join(format!("proc/{pid}/status"));
            let text = std::fs::read_to_string(&path).unwrap();
            let pinned =
                crate::kernel::napi_threads::with_affinity(&text, &crate::CpuSet::from_iter([cpu]));
            std::fs::write(&path, pinned).unwrap();
        }
        assert!(run_check(&tree, check, not_sampled(), None).is_empty());
    }
}
