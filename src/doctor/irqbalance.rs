//! irqbalance running beside steerd: two balancers overwrite each other's IRQ affinity
//! every few seconds, so neither placement holds (a process named `irqbalance` in
//! `proc/*/comm`).

use super::{Context, Finding, Severity};

pub fn check(context: &Context) -> Vec<Finding> {
    let proc_dir = context.root.path("proc");
    let pids = match super::processes::named(context.root, "irqbalance") {
        Ok(pids) => pids,
        Err(e) => {
            return vec![Finding {
                check: "irqbalance",
                severity: Severity::Info,
                summary: "not checked: the process list cannot be read".into(),
                evidence: format!("{}: {e}", proc_dir.display()),
                why: "irqbalance beside steerd would undo its placements.".into(),
                fix: None,
            }];
        }
    };
    if pids.is_empty() {
        return Vec::new();
    }
    let listed: Vec<String> = pids.iter().map(|p| format!("proc/{p}/comm")).collect();
    vec![Finding {
        check: "irqbalance",
        severity: Severity::Error,
        summary: format!("irqbalance is running (pid {})", pids[0]),
        evidence: format!("{} = irqbalance", listed.join(", ")),
        why: "irqbalance rewrites the IRQ affinity steerd sets, so neither placement holds \
              and the receive load moves back and forth."
            .into(),
        fix: Some("systemctl disable --now irqbalance".into()),
    }]
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, put, run_check};
    use super::*;

    #[test]
    fn finds_a_running_irqbalance_and_not_other_processes() {
        let (_dir, tree) = machine(|_| {});
        put(&tree, "proc/1/comm", "systemd\n");
        put(&tree, "proc/812/comm", "sshd\n");
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);

        put(&tree, "proc/977/comm", "irqbalance\n");
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].severity, Severity::Error);
        assert!(found[0].evidence.contains("proc/977/comm"), "{found:?}");
        assert_eq!(
            found[0].fix.as_deref(),
            Some("systemctl disable --now irqbalance")
        );
    }
}
