//! `steerd doctor` run inside the guest (the `doctor` and `doctor-udp` scenarios, issue 17):
//! its JSON report and exit status, taken back from the guest's `DOC` and `DOCTOR EXIT`
//! console lines, so a test and the lab's command line can show real findings on a real
//! virtio-net.

/// One finding as `docs/doctor-json.md` describes it (the fields the lab prints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub check: String,
    pub severity: String,
    pub summary: String,
    pub fix: Option<String>,
}

/// Why the guest's doctor report could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DoctorJsonError {
    /// The `DOC` lines do not hold JSON (doctor failed before printing its report, or the
    /// console cut a line).
    #[error("doctor's JSON: {source}: {json}")]
    NotJson {
        json: String,
        source: serde_json::Error,
    },
    #[error("doctor's JSON has no findings array: {json}")]
    NoFindings { json: String },
    /// A finding without a field docs/doctor-json.md says every finding has.
    #[error("a finding without its {0}")]
    MissingField(&'static str),
}

/// What the guest's `steerd doctor --format json` printed and how it exited.
#[derive(Debug, Clone)]
pub struct DoctorRun {
    pub exit: Option<i32>,
    pub findings: Vec<Finding>,
    /// Its standard error, line by line (empty when it wrote none).
    pub stderr: Vec<String>,
}

impl DoctorRun {
    /// The doctor run in a guest's console lines; `None` when the scenario ran none, an
    /// error when the JSON does not parse.
    pub fn from_lines(lines: &[String]) -> Option<Result<DoctorRun, DoctorJsonError>> {
        let exit = lines
            .iter()
            .find_map(|l| l.strip_prefix("DOCTOR EXIT "))?
            .trim()
            .parse()
            .ok();
        let json: String = lines
            .iter()
            .filter_map(|l| l.strip_prefix("DOC "))
            .collect::<Vec<_>>()
            .join("\n");
        let stderr = lines
            .iter()
            .filter_map(|l| l.strip_prefix("DOCERR "))
            .map(str::to_string)
            .collect();
        Some(parse(&json).map(|findings| DoctorRun {
            exit,
            findings,
            stderr,
        }))
    }
}

fn parse(json: &str) -> Result<Vec<Finding>, DoctorJsonError> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|source| DoctorJsonError::NotJson {
            json: json.to_string(),
            source,
        })?;
    let text =
        |f: &serde_json::Value, key: &str| f.get(key).and_then(|v| v.as_str()).map(String::from);
    value
        .get("findings")
        .and_then(|f| f.as_array())
        .ok_or_else(|| DoctorJsonError::NoFindings {
            json: json.to_string(),
        })?
        .iter()
        .map(|f| {
            Ok(Finding {
                check: text(f, "check").ok_or(DoctorJsonError::MissingField("check"))?,
                severity: text(f, "severity").ok_or(DoctorJsonError::MissingField("severity"))?,
                summary: text(f, "summary").unwrap_or_default(),
                fix: text(f, "fix"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(doc: &[&str]) -> Result<DoctorRun, DoctorJsonError> {
        let mut lines: Vec<String> = doc.iter().map(|l| format!("DOC {l}")).collect();
        lines.push("DOCTOR EXIT 2".into());
        DoctorRun::from_lines(&lines).expect("a doctor run")
    }

    #[test]
    fn a_report_that_does_not_hold_together_says_why() {
        let not_json = run(&["{"]).unwrap_err();
        assert!(matches!(not_json, DoctorJsonError::NotJson { .. }));
        assert!(
            not_json.to_string().starts_with("doctor's JSON: "),
            "{not_json}"
        );
        assert!(not_json.to_string().ends_with(": {"), "{not_json}");
        assert_eq!(
            run(&["{}"]).unwrap_err().to_string(),
            "doctor's JSON has no findings array: {}"
        );
        assert_eq!(
            run(&[r#"{"findings": [{"severity": "info"}]}"#])
                .unwrap_err()
                .to_string(),
            "a finding without its check"
        );
        let found = run(&[r#"{"findings": [{"check": "gro", "severity": "info"}]}"#]).unwrap();
        assert_eq!(found.exit, Some(2));
        assert_eq!(found.findings[0].check, "gro");
    }
}
