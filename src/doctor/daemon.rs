//! The running steerd's own health, from its `/status`: a daemon that only observes,
//! fails its writes or cannot go quiet is not doing what its operator thinks, and the
//! machine checks alone cannot tell.

use super::{Context, Finding, Severity};
use crate::status_report::{Health, StatusReport};

/// What `status_report` puts before the reason quiet mode is unavailable.
const QUIET_UNAVAILABLE: &str = "quiet mode unavailable: ";

pub fn check(context: &Context) -> Vec<Finding> {
    let Some((addr, answer)) = &context.daemon else {
        return Vec::new();
    };
    let report = match answer {
        Ok(report) => report,
        Err(why) => {
            return vec![finding(
                Severity::Info,
                format!("not checked: no steerd answered at {addr}"),
                why.to_string(),
                "without the daemon's /status its own health (writes, errors, quiet mode) is \
                 unknown.",
                None,
            )];
        }
    };
    let mut findings = Vec::new();
    let status = format!("steerd status --metrics-listen {addr}");
    match report.writes.as_str() {
        "observe_only" => findings.push(finding(
            Severity::Error,
            "steerd only observes: it writes nothing".into(),
            format!(
                "{status}: writes observe_only ({})",
                report.writes_reason.as_deref().unwrap_or("no reason given")
            ),
            "an observe-only daemon decides and reports but never moves an IRQ or sets a \
             mask, so the machine stays as unbalanced as it is.",
            Some("systemctl restart steerd".into()),
        )),
        "dry_run" => findings.push(finding(
            Severity::Info,
            "steerd runs with --dry-run: it writes nothing, as asked".into(),
            format!("{status}: writes dry_run"),
            "a dry run is for trying a configuration; left on, nothing is steered.",
            None,
        )),
        _ => {}
    }
    if report.write_errors > 0 || report.refusals > 0 {
        findings.push(finding(
            Severity::Warning,
            format!(
                "steerd had {} write error(s) and {} refusal(s)",
                report.write_errors, report.refusals
            ),
            format!(
                "{status}: last write error: {}",
                report
                    .last_write_error
                    .as_deref()
                    .unwrap_or("none recorded")
            ),
            "a failed write leaves that IRQ or queue where it was, so the plan is only partly \
             applied.",
            None,
        ));
    }
    if let Some(at) = report.mode_reason.find(QUIET_UNAVAILABLE) {
        findings.push(finding(
            Severity::Info,
            "steerd cannot go quiet when idle".into(),
            format!("{status}: {}", &report.mode_reason[at..]),
            "without quiet mode the daemon keeps ticking at full rate on an idle machine, a \
             small constant CPU cost.",
            None,
        ));
    }
    if report.health == Health::Degraded && findings.iter().all(|f| f.severity == Severity::Info) {
        findings.push(degraded(report, &status));
    }
    findings
}

fn degraded(report: &StatusReport, status: &str) -> Finding {
    finding(
        Severity::Warning,
        "steerd reports itself degraded".into(),
        format!("{status}: {}", report.problems.join("; ")),
        "a degraded daemon is not steering as configured.",
        None,
    )
}

fn finding(
    severity: Severity,
    summary: String,
    evidence: String,
    why: &str,
    fix: Option<String>,
) -> Finding {
    Finding {
        check: "daemon",
        severity,
        summary,
        evidence,
        why: why.into(),
        fix,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, run_check};
    use super::*;
    use crate::status_report::{LiveStatus, NoWrites};

    fn live() -> LiveStatus {
        LiveStatus::example()
    }

    fn found(live: LiveStatus) -> Vec<Finding> {
        let (_dir, tree) = machine(|_| {});
        let addr = "127.0.0.1:9847".parse().unwrap();
        let report = live.report(1060.0, Ok(()), Vec::new());
        run_check(&tree, check, not_sampled(), Some((addr, Ok(report))))
    }

    #[test]
    fn a_healthy_daemon_or_none_asked_is_fine() {
        assert_eq!(found(live()), vec![]);
        let (_dir, tree) = machine(|_| {});
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);
    }

    #[test]
    fn an_unreachable_daemon_is_a_note() {
        let (_dir, tree) = machine(|_| {});
        let addr = "127.0.0.1:1".parse().unwrap();
        let f = run_check(
            &tree,
            check,
            not_sampled(),
            Some((
                addr,
                Err(crate::status::FetchError::Unreachable {
                    addr,
                    source: std::io::ErrorKind::ConnectionRefused.into(),
                }),
            )),
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].summary.contains("127.0.0.1:1"), "{f:?}");
        assert!(
            f[0].evidence
                .contains("is it running, and with --metrics-listen 127.0.0.1:1?"),
            "the evidence says what to check: {f:?}"
        );
    }

    #[test]
    fn observe_only_write_errors_and_no_quiet_mode_are_reported() {
        let mut sick = live();
        sick.no_writes = Some(NoWrites::ObserveOnly("not root".into()));
        sick.write_errors = 3;
        sick.last_write_error = Some("proc/irq/24/smp_affinity_list: EIO".into());
        sick.last_write_error_unix = 1050.0;
        sick.quiet_unavailable = Some("no NAPI wake-up counters".into());
        let f = found(sick);
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].evidence.contains("not root"), "{f:?}");
        assert!(f[1].evidence.contains("EIO"), "{f:?}");
        assert!(f[2].evidence.contains("no NAPI wake-up counters"), "{f:?}");
    }
}
