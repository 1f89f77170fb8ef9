//! The doctor's report: findings with severity, evidence, why and fix; the text people
//! read, the JSON programs read (docs/doctor-json.md), and the exit status.
//!
//! Why one shape for every check: a finding that does not say what was measured and what
//! to type next is a guess; forcing every check through these fields keeps them honest.

use std::fmt::Write as _;

use serde::Serialize;

/// The version of the doctor JSON; raised on an incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// How bad a finding is; the worst decides the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing (including "not checked: why"); exit 0.
    Info,
    /// Costs throughput or latency; exit 1.
    Warning,
    /// Steering is broken or fought over; exit 2.
    Error,
}

impl Severity {
    fn word(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One thing the doctor found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The check that found it (one of the report's `checks`).
    pub check: &'static str,
    pub severity: Severity,
    /// What is wrong, in one line.
    pub summary: String,
    /// What was measured, with the files it came from.
    pub evidence: String,
    /// Why it matters, one sentence.
    pub why: String,
    /// The command that fixes it; `None` when there is nothing to run (a note).
    pub fix: Option<String>,
}

/// Everything one run found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub schema_version: u32,
    /// The `--root` the machine was read under.
    pub root: String,
    /// The checks run, in order.
    pub checks: Vec<String>,
    /// Errors, warnings, infos: counts.
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
    /// Worst first, then in check order.
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn new(root: String, checks: Vec<String>, mut findings: Vec<Finding>) -> Self {
        // Stable: within one severity, check order survives.
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        let count = |s| findings.iter().filter(|f| f.severity == s).count();
        Report {
            schema_version: SCHEMA_VERSION,
            root,
            checks,
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            infos: count(Severity::Info),
            findings,
        }
    }

    /// 2 with an error, 1 with a warning, else 0.
    pub fn exit_code(&self) -> u8 {
        match self.findings.iter().map(|f| f.severity).max() {
            Some(Severity::Error) => 2,
            Some(Severity::Warning) => 1,
            _ => 0,
        }
    }

    /// The report for people.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for finding in &self.findings {
            let _ = writeln!(
                out,
                "{}: [{}] {}",
                finding.severity.word(),
                finding.check,
                finding.summary
            );
            let _ = writeln!(out, "  evidence: {}", finding.evidence);
            let _ = writeln!(out, "  why:      {}", finding.why);
            if let Some(fix) = &finding.fix {
                let _ = writeln!(out, "  fix:      {fix}");
            }
            out.push('\n');
        }
        let _ = write!(
            out,
            "{} error(s), {} warning(s), {} note(s) from {} checks ({}) under {}",
            self.errors,
            self.warnings,
            self.infos,
            self.checks.len(),
            self.checks.join(", "),
            self.root
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: Severity) -> Finding {
        Finding {
            check: "x",
            severity,
            summary: "s".into(),
            evidence: "e".into(),
            why: "w".into(),
            fix: None,
        }
    }

    #[test]
    fn the_worst_finding_decides_the_exit_status_and_comes_first() {
        let report = |s: &[Severity]| {
            Report::new(
                "/".into(),
                vec!["x".into()],
                s.iter().map(|&s| finding(s)).collect(),
            )
        };
        assert_eq!(report(&[]).exit_code(), 0);
        assert_eq!(report(&[Severity::Info]).exit_code(), 0);
        assert_eq!(report(&[Severity::Info, Severity::Warning]).exit_code(), 1);
        let worst = report(&[Severity::Warning, Severity::Error, Severity::Info]);
        assert_eq!(worst.exit_code(), 2);
        assert_eq!(worst.findings[0].severity, Severity::Error);
        assert_eq!((worst.errors, worst.warnings, worst.infos), (1, 1, 1));
        assert!(
            worst
                .to_text()
                .ends_with("1 error(s), 1 warning(s), 1 note(s) from 1 checks (x) under /")
        );
    }
}
