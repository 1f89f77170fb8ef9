//! Software interrupt deferral asked for but never done: `napi_defer_hard_irqs` (per
//! device, or `defer-hard-irqs` per NAPI on 6.13+) set while `gro_flush_timeout` is 0.
//!
//! The kernel defers a NAPI's interrupt only by arming a timer: in `napi_complete_done`
//! (net/core/dev.c) an empty poll with deferral left takes `gro_flush_timeout` as the
//! timer's delay and keeps the interrupt masked only when that delay is non-zero. With 0
//! it completes the NAPI as if no deferral were set, so the driver unmasks the interrupt
//! after every poll (NAPI documentation, "Software IRQ coalescing": the timeout sets the
//! timer, `napi_defer_hard_irqs` how many empty polls it is re-armed). The operator tuned
//! for fewer interrupts and gets one per poll, as before.

use super::{Context, Finding, Severity};
use crate::model::inventory::NetDevice;

/// The timeout suggested, in ns: the value the NAPI documentation's examples use.
const SUGGESTED_TIMEOUT_NS: u64 = 200_000;

pub fn check(context: &Context) -> Vec<Finding> {
    context
        .machine
        .inventory
        .devices
        .iter()
        .filter(|device| has_napi(device))
        .filter_map(|device| judge(context, device))
        .collect()
}

/// Whether the device polls with NAPI as far as steerd can tell: it has queue vectors,
/// NAPI ids or threads. Every device has the two sysfs files (`lo`, veth, ifb too), but a
/// device without NAPI has nothing to defer.
fn has_napi(device: &NetDevice) -> bool {
    !device.irqs.is_empty()
        || device.threaded == Some(true)
        || device.rx_queues.iter().any(|q| q.napi_id.is_some())
}

/// Whether a deferral of `defer` polls with a flush timeout of `timeout` ns never happens.
fn inert(defer: Option<u32>, timeout: Option<u64>) -> bool {
    matches!((defer, timeout), (Some(d), Some(0)) if d > 0)
}

/// The finding for one device: its sysfs values when every NAPI has them, else the NAPIs
/// (netdev netlink, 6.13+) whose own values are inert.
fn judge(context: &Context, device: &NetDevice) -> Option<Finding> {
    let name = &device.name;
    let per_napi: Vec<_> = device
        .rx_queues
        .iter()
        .filter(|q| q.napi.per_napi)
        .filter(|q| inert(q.napi.defer_hard_irqs, q.napi.gro_flush_timeout_ns))
        .collect();
    let device_inert = inert(device.napi_defer_hard_irqs, device.gro_flush_timeout_ns);
    let all_napis = device.rx_queues.iter().all(|q| !q.napi.per_napi)
        || per_napi.len() == device.rx_queues.len();
    let why = "napi_defer_hard_irqs keeps the interrupt masked only while the \
               gro_flush_timeout timer runs, so with a timeout of 0 the kernel unmasks it \
               after every poll and the deferral asked for never happens."
        .to_string();
    if device_inert && all_napis {
        let path = context
            .root
            .path(format!("sys/class/net/{name}/gro_flush_timeout"));
        return Some(Finding {
            check: "napi_deferral",
            severity: Severity::Warning,
            summary: format!(
                "{name}: napi_defer_hard_irqs {} with gro_flush_timeout 0: no interrupt is deferred",
                device.napi_defer_hard_irqs.unwrap_or_default()
            ),
            evidence: format!(
                "sys/class/net/{name}/napi_defer_hard_irqs = {}, sys/class/net/{name}/gro_flush_timeout = 0",
                device.napi_defer_hard_irqs.unwrap_or_default()
            ),
            why,
            fix: Some(format!(
                "echo {SUGGESTED_TIMEOUT_NS} > {} (or echo 0 > napi_defer_hard_irqs beside it \
                 to turn the deferral off)",
                path.display()
            )),
        });
    }
    if per_napi.is_empty() {
        return None;
    }
    let evidence: Vec<String> = per_napi
        .iter()
        .map(|q| {
            format!(
                "rx-{} NAPI {}: defer-hard-irqs {}, gro-flush-timeout 0",
                q.index,
                q.napi_id.map_or("?".to_string(), |id| id.to_string()),
                q.napi.defer_hard_irqs.unwrap_or_default()
            )
        })
        .collect();
    let commands: Vec<String> = per_napi
        .iter()
        .filter_map(|q| q.napi_id)
        .map(|id| {
            format!(
                "ynl --family netdev --do napi-set --json '{{\"id\": {id}, \"gro-flush-timeout\": {SUGGESTED_TIMEOUT_NS}}}'"
            )
        })
        .collect();
    Some(Finding {
        check: "napi_deferral",
        severity: Severity::Warning,
        summary: format!(
            "{name}: {} NAPI(s) with defer-hard-irqs set and gro-flush-timeout 0: no interrupt is deferred",
            per_napi.len()
        ),
        evidence: format!("netdev netlink napi-get on {name}: {}", evidence.join("; ")),
        why,
        fix: Some(commands.join("; ")).filter(|c| !c.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, run_check};
    use super::*;

    #[test]
    fn a_deferral_without_a_flush_timeout_is_found_with_the_timeout_to_set() {
        let (_dir, tree) = machine(|_| {});
        tree.set_napi_deferral(0, 2, 0).unwrap();
        let findings = run_check(&tree, check, not_sampled(), None);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let finding = &findings[0];
        assert_eq!(finding.severity, Severity::Warning);
        assert!(finding.summary.starts_with("eth0: napi_defer_hard_irqs 2"));
        assert!(finding.evidence.contains("gro_flush_timeout = 0"));
        let fix = finding.fix.as_deref().unwrap();
        let path = tree.root.join("sys/class/net/eth0/gro_flush_timeout");
        assert!(
            fix.starts_with(&format!("echo 200000 > {}", path.display())),
            "{fix}"
        );
    }

    #[test]
    fn no_deferral_or_a_deferral_with_its_timer_is_fine() {
        let (_dir, tree) = machine(|_| {});
        assert!(run_check(&tree, check, not_sampled(), None).is_empty());
        // `lo` has the files too, but no NAPI to defer.
        super::super::testing::put(&tree, "sys/class/net/lo/napi_defer_hard_irqs", "2\n");
        super::super::testing::put(&tree, "sys/class/net/lo/gro_flush_timeout", "0\n");
        assert!(run_check(&tree, check, not_sampled(), None).is_empty());
        tree.set_napi_deferral(0, 2, 200_000).unwrap();
        assert!(run_check(&tree, check, not_sampled(), None).is_empty());
        tree.set_napi_deferral(0, 0, 200_000).unwrap();
        assert!(run_check(&tree, check, not_sampled(), None).is_empty());
    }

    #[test]
    fn per_napi_values_give_one_napi_set_command_per_napi() {
        let (_dir, tree) = machine(|_| {});
        let root = crate::root::Root::new(&tree.root);
        let mut machine = crate::discover::discover(&root).unwrap();
        // As netdev netlink on 6.13+ reports it: one NAPI deferred without a timer, the
        // device's own files untouched.
        for queue in &mut machine.inventory.devices[0].rx_queues {
            queue.napi_id = Some(8193 + queue.index);
            queue.napi.per_napi = true;
        }
        machine.inventory.devices[0].rx_queues[1]
            .napi
            .defer_hard_irqs = Some(3);
        let findings = check(&Context {
            root: &root,
            machine: &machine,
            samples: not_sampled(),
            daemon: None,
        });
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            findings[0].fix.as_deref(),
            Some(
                "ynl --family netdev --do napi-set --json '{\"id\": 8194, \"gro-flush-timeout\": 200000}'"
            )
        );
        assert!(
            findings[0]
                .evidence
                .contains("rx-1 NAPI 8194: defer-hard-irqs 3")
        );
    }
}
