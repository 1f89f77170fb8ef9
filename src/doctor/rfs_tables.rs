//! RFS tables sized against each other: the per-queue flow tables (`rps_flow_cnt`) only
//! steer when the global socket flow table (`net.core.rps_sock_flow_entries`) exists, and
//! both should be about the same size (kernel docs: per-queue = global / queues).
//!
//! Three mistakes: per-queue tables with no global table (RFS silently off), per-queue
//! tables far larger than the global one (they index flows the global table has already
//! overwritten), and a global table with no per-queue table (memory for nothing).

use super::{Context, Finding, Severity};

/// "Far exceeds": the per-queue sum larger than this many global tables.
const FAR_EXCEEDS: u64 = 2;

/// The global size suggested when none is set: the kernel docs' value for a moderately
/// loaded server.
const SUGGESTED_ENTRIES: u64 = 32768;

pub fn check(context: &Context) -> Vec<Finding> {
    let Some(entries) = context.machine.inventory.rps_sock_flow_entries else {
        return vec![Finding {
            check: "rfs_tables",
            severity: Severity::Info,
            summary: "not checked: proc/sys/net/core/rps_sock_flow_entries does not exist".into(),
            evidence: "no rps_sock_flow_entries (outside the initial network namespace, or a \
                       kernel without CONFIG_RPS)"
                .into(),
            why: "RFS needs the global table and the per-queue tables sized together.".into(),
            fix: None,
        }];
    };
    let entries = u64::from(entries);
    let mut queues = Vec::new();
    let mut sum = 0u64;
    let mut with_table = 0usize;
    for device in &context.machine.inventory.devices {
        for queue in &device.rx_queues {
            let Some(count) = queue.rps_flow_cnt else {
                continue;
            };
            queues.push(format!("{}/queues/rx-{}", device.name, queue.index));
            sum += u64::from(count);
            with_table += usize::from(count > 0);
        }
    }
    if queues.is_empty() {
        return Vec::new();
    }
    let evidence = format!(
        "net.core.rps_sock_flow_entries = {entries}; rps_flow_cnt summed over {} rx queue(s) \
         = {sum} ({with_table} queue(s) with a table)",
        queues.len()
    );
    let sysctl = |value: u64| format!("sysctl -w net.core.rps_sock_flow_entries={value}");
    let finding = |summary: String, why: &str, fix: String| Finding {
        check: "rfs_tables",
        severity: Severity::Warning,
        summary,
        evidence: evidence.clone(),
        why: why.into(),
        fix: Some(fix),
    };
    if sum > 0 && entries == 0 {
        return vec![finding(
            "rx queues have RFS flow tables but the global socket flow table is 0: RFS is off"
                .into(),
            "without the global table the kernel never records which CPU a flow's socket is \
             read on, so the per-queue tables steer nothing.",
            sysctl(sum.next_power_of_two().max(SUGGESTED_ENTRIES)),
        )];
    }
    if entries > 0 && sum > entries * FAR_EXCEEDS {
        return vec![finding(
            format!("the rx queues' flow tables ({sum}) far exceed the global table ({entries})"),
            "per-queue entries beyond the global table's size point at flows it has already \
             forgotten, so they cost memory and steer to stale CPUs.",
            sysctl(sum.next_power_of_two()),
        )];
    }
    if entries > 0 && sum == 0 {
        let per_queue = (entries / queues.len() as u64).max(1).next_power_of_two();
        let glob = context
            .root
            .path("sys/class/net/*/queues/rx-*/rps_flow_cnt");
        return vec![finding(
            format!(
                "the global socket flow table has {entries} entries but no rx queue has a flow table"
            ),
            "RFS steers only through per-queue tables, so the global table costs memory and \
             does nothing.",
            format!(
                "for f in {}; do echo {per_queue} > $f; done",
                glob.display()
            ),
        )];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, put, run_check};
    use super::*;

    fn flow_cnt(tree: &crate::fakeroot::FakeTree, count: u32) {
        for q in 0..4 {
            put(
                tree,
                &format!("sys/class/net/eth0/queues/rx-{q}/rps_flow_cnt"),
                &format!("{count}\n"),
            );
        }
    }

    fn found(entries: u32, count: u32) -> Vec<Finding> {
        let (_dir, tree) = machine(|m| m.rps_sock_flow_entries = Some(entries));
        flow_cnt(&tree, count);
        run_check(&tree, check, not_sampled(), None)
    }

    #[test]
    fn consistent_tables_or_rfs_off_are_fine() {
        assert_eq!(found(0, 0), vec![]);
        assert_eq!(found(32768, 8192), vec![]);
    }

    #[test]
    fn per_queue_tables_without_a_global_one() {
        let f = found(0, 4096);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].summary.contains("RFS is off"), "{f:?}");
        assert_eq!(
            f[0].fix.as_deref(),
            Some("sysctl -w net.core.rps_sock_flow_entries=32768")
        );
    }

    #[test]
    fn per_queue_tables_far_larger_than_the_global_one() {
        let f = found(4096, 32768);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].summary.contains("far exceed"), "{f:?}");
        assert_eq!(
            f[0].fix.as_deref(),
            Some("sysctl -w net.core.rps_sock_flow_entries=131072")
        );
    }

    #[test]
    fn a_global_table_with_no_per_queue_table() {
        let f = found(32768, 0);
        assert_eq!(f.len(), 1, "{f:?}");
        // eth0's 4 queues and lo's 1.
        assert!(
            f[0].fix.as_deref().unwrap().contains("do echo 8192 > $f"),
            "{f:?}"
        );
    }
}
