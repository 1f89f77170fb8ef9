//! The decision log: the last N things steerd did or refused to do, with their reasons.
//!
//! Served as JSON at `/decisions` and printed by `steerd status`. Bounded, so a daemon
//! that runs for months holds a constant amount of memory for it.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// How many records are kept.
pub const CAPACITY: usize = 256;

/// One decision and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Wall-clock time, seconds since the Unix epoch.
    pub unix_time: f64,
    /// The tick it was decided in.
    pub tick: u64,
    /// What was changed, e.g. `irq 38 affinity`, `eth0 rx-0 rps_cpus`.
    pub target: String,
    /// The kind of knob written (the `action` metric label), e.g. `irq_affinity`, `rps_cpus`.
    pub action: String,
    pub old: String,
    pub new: String,
    /// The rule that fired (the `reason` metric label), e.g. `stacked_vectors`, `rps_on`.
    pub reason: String,
    /// The reason for people: which signal, which threshold, which CPU.
    pub detail: String,
    /// `applied`, `dry_run`, or `failed: <why>`.
    pub outcome: String,
}

/// A bounded, oldest-first log.
#[derive(Debug, Default)]
pub struct DecisionLog {
    records: VecDeque<Decision>,
}

impl DecisionLog {
    pub fn push(&mut self, decision: Decision) {
        if self.records.len() == CAPACITY {
            self.records.pop_front();
        }
        self.records.push_back(decision);
    }

    /// The records, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &Decision> {
        self.records.iter()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// JSON array, oldest first.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.records).unwrap_or_else(|_| "[]".to_string())
    }
}

/// Renders decisions for people, newest last.
pub fn to_text(decisions: &[Decision]) -> String {
    if decisions.is_empty() {
        return "no decisions yet\n".to_string();
    }
    let mut out = String::new();
    for d in decisions {
        out.push_str(&format!(
            "tick {:>6}  {:<28} {} -> {}  [{}: {}] {}\n",
            d.tick, d.target, d.old, d.new, d.reason, d.detail, d.outcome
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(tick: u64) -> Decision {
        Decision {
            unix_time: 0.0,
            tick,
            target: "irq 1 affinity".into(),
            action: "irq_affinity".into(),
            old: "0".into(),
            new: "1".into(),
            reason: "hot_cpu".into(),
            detail: "CPU0 at 95%".into(),
            outcome: "applied".into(),
        }
    }

    #[test]
    fn keeps_the_newest_capacity_records() {
        let mut log = DecisionLog::default();
        for tick in 0..(CAPACITY as u64 + 10) {
            log.push(decision(tick));
        }
        assert_eq!(log.len(), CAPACITY);
        assert_eq!(log.records().next().map(|d| d.tick), Some(10));
        let parsed: Vec<Decision> = serde_json::from_str(&log.to_json()).unwrap();
        assert_eq!(parsed.len(), CAPACITY);
        assert!(to_text(&parsed[..1]).contains("CPU0 at 95%"));
    }
}
