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
    pub fn from_lines(lines: &[String]) -> Option<Result<DoctorRun, String>> {
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

fn parse(json: &str) -> Result<Vec<Finding>, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("doctor's JSON: {e}: {json}"))?;
    let text =
        |f: &serde_json::Value, key: &str| f.get(key).and_then(|v| v.as_str()).map(String::from);
    value
        .get("findings")
        .and_then(|f| f.as_array())
        .ok_or_else(|| format!("doctor's JSON has no findings array: {json}"))?
        .iter()
        .map(|f| {
            Ok(Finding {
                check: text(f, "check").ok_or("a finding without its check")?,
                severity: text(f, "severity").ok_or("a finding without its severity")?,
                summary: text(f, "summary").unwrap_or_default(),
                fix: text(f, "fix"),
            })
        })
        .collect()
}
