//! Softnet drops and time squeezes (`proc/net/softnet_stat`) against the sysctls that
//! bound them: `dropped` counts packets thrown away because a CPU's backlog queue was
//! full (`net.core.netdev_max_backlog`), `time_squeeze` the NET_RX rounds that ran out of
//! budget with work left (`net.core.netdev_budget`).
//!
//! Rates from two readings say it is happening now (a warning); counts since boot with
//! none while we watched are an old burst (a note). The counts while we watched are the
//! daemon's load model's drops and squeezes per second over the window ([`super::sample`]).

use super::{Context, Finding, Severity};
use crate::kernel::procfs::softnet;

/// The kernel's defaults, for the fix when a sysctl cannot be read.
const DEFAULT_BACKLOG: u64 = 1000;
const DEFAULT_BUDGET: u64 = 300;

/// A sysctl that bounds a softnet counter: what the tree says of it, and its value (the
/// kernel's default when it cannot be read).
struct Bound {
    name: &'static str,
    text: String,
    value: u64,
    default: u64,
}

impl Bound {
    /// The command that doubles it (to at least twice the kernel's default).
    fn doubled(&self) -> String {
        format!(
            "sysctl -w net.core.{}={}",
            self.name,
            (self.value * 2).max(self.default * 2)
        )
    }
}

pub fn check(context: &Context) -> Vec<Finding> {
    let sysctl = |name: &'static str, default: u64| -> Bound {
        let path = format!("proc/sys/net/core/{name}");
        let (text, value) = match context.root.read_optional(&path) {
            Ok(Some(text)) => match text.trim().parse::<u64>() {
                Ok(value) => (format!("net.core.{name} = {value}"), value),
                Err(_) => (
                    format!("{path}: {:?} is not a number", text.trim()),
                    default,
                ),
            },
            Ok(None) => (format!("{path} absent"), default),
            Err(e) => (e.to_string(), default),
        };
        Bound {
            name,
            text,
            value,
            default,
        }
    };
    let backlog = sysctl("netdev_max_backlog", DEFAULT_BACKLOG);
    let budget = sysctl("netdev_budget", DEFAULT_BUDGET);

    // (dropped, squeezed, over what, severity)
    let (dropped, squeezed, over, severity) = match &context.samples {
        Ok(samples) => {
            let deltas = samples.softnet_deltas();
            let dropped: u64 = deltas.iter().map(|d| d.1).sum();
            let squeezed: u64 = deltas.iter().map(|d| d.2).sum();
            if dropped + squeezed > 0 {
                let over = format!("in {:.1} s", samples.seconds);
                (dropped, squeezed, over, Severity::Warning)
            } else {
                let (d, s) = totals(&samples.after.softnet);
                let over = format!("since boot (none in the {:.1} s watched)", samples.seconds);
                (d, s, over, Severity::Info)
            }
        }
        Err(why) => match softnet::read_softnet_with(
            context.root,
            context.machine.topology.online_as_read(),
        ) {
            Ok(rows) => {
                let (d, s) = totals(&rows);
                let over = format!("since boot (no rate: {why})");
                (d, s, over, Severity::Info)
            }
            Err(e) => {
                return vec![Finding {
                    check: "softnet",
                    severity: Severity::Info,
                    summary: "not checked: softnet_stat cannot be read".into(),
                    evidence: e.to_string(),
                    why: "softnet drops are packets lost after the NIC delivered them.".into(),
                    fix: None,
                }];
            }
        },
    };
    // Each counter's finding names its softnet_stat column and the sysctl that bounds it.
    let finding = |summary: String, column: &str, bound: &Bound, why: &str| Finding {
        check: "softnet",
        severity,
        summary,
        evidence: format!("proc/net/softnet_stat {column} column; {}", bound.text),
        why: why.into(),
        fix: Some(bound.doubled()),
    };
    let mut findings = Vec::new();
    if dropped > 0 {
        findings.push(finding(
            format!("{dropped} packet(s) dropped from full CPU backlogs {over}"),
            "dropped",
            &backlog,
            "a full backlog (RPS or non-NAPI receive) throws packets away after the NIC \
             delivered them, and TCP answers with retransmits and a smaller window.",
        ));
    }
    if squeezed > 0 {
        findings.push(finding(
            format!("NET_RX ran out of budget {squeezed} time(s) {over}"),
            "time_squeeze",
            &budget,
            "a squeezed softirq leaves packets in the ring until the next round, adding \
             latency and, when the ring fills, drops in the NIC.",
        ));
    }
    findings
}

fn totals(rows: &[crate::model::snapshot::SoftnetRow]) -> (u64, u64) {
    rows.iter().fold((0, 0), |(d, s), row| {
        (d + u64::from(row.dropped), s + u64::from(row.time_squeeze))
    })
}

#[cfg(test)]
mod tests {
    use super::super::sample::{Samples, SamplesError};
    use super::super::testing::{machine, not_sampled, put, run_check};
    use super::*;
    use crate::model::snapshot::{Snapshot, SoftnetRow};

    fn sample(dropped: u32, time_squeeze: u32) -> Snapshot {
        Snapshot {
            softnet: vec![SoftnetRow {
                cpu: 1,
                dropped,
                time_squeeze,
                ..SoftnetRow::default()
            }],
            ..Snapshot::default()
        }
    }

    fn samples(before: Snapshot, mut after: Snapshot) -> Result<Samples, SamplesError> {
        after.taken_at_ns = before.taken_at_ns + 1_000_000_000;
        Ok(Samples::between(before, after))
    }

    #[test]
    fn no_drops_no_squeezes_is_fine() {
        let (_dir, tree) = machine(|_| {});
        assert_eq!(
            run_check(&tree, check, samples(sample(0, 0), sample(0, 0)), None),
            vec![]
        );
        // Totals since boot from the file itself, when sampling failed: all zero.
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);
    }

    #[test]
    fn drops_and_squeezes_now_are_warnings_with_the_sysctl_doubled() {
        let (_dir, tree) = machine(|_| {});
        put(&tree, "proc/sys/net/core/netdev_max_backlog", "1000\n");
        put(&tree, "proc/sys/net/core/netdev_budget", "400\n");
        let f = run_check(&tree, check, samples(sample(5, 7), sample(25, 9)), None);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f.iter().all(|f| f.severity == Severity::Warning));
        assert!(f[0].summary.starts_with("20 packet(s) dropped"), "{f:?}");
        assert!(
            f[0].evidence.contains("net.core.netdev_max_backlog = 1000"),
            "{f:?}"
        );
        assert_eq!(
            f[0].fix.as_deref(),
            Some("sysctl -w net.core.netdev_max_backlog=2000")
        );
        assert!(f[1].summary.contains("2 time(s) in 1.0 s"), "{f:?}");
        assert_eq!(
            f[1].fix.as_deref(),
            Some("sysctl -w net.core.netdev_budget=800")
        );
    }

    #[test]
    fn counts_only_since_boot_are_a_note() {
        let (_dir, tree) = machine(|_| {});
        let f = run_check(&tree, check, samples(sample(3, 0), sample(3, 0)), None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].summary.contains("since boot"), "{f:?}");
    }
}
