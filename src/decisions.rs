//! The decision log: the last N things steerd did or refused to do, with their reasons.
//!
//! Served as JSON at `/decisions` and printed by `steerd status`. Bounded by count and by
//! bytes, so a daemon that runs for months holds a small, constant amount of memory for it
//! however long its records' texts are.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// At most this many records are kept.
pub const CAPACITY: usize = 256;

/// At most this many bytes of records are kept ([`Decision::footprint`]: the record and its
/// texts), the oldest records evicted first; the newest record is always kept.
///
/// Measured with `scripts/decision-memory.sh` (docs/performance.md, "Where the memory
/// goes"): a typical record holds about 390 bytes on the heap (256 of them held 98 kB), so
/// the count alone let the log take 100 kB of a 5 MB daemon, and records with long texts
/// (masks of a 1152-CPU machine, RSS tables) could take several times that. 64 KiB keeps
/// about 160 typical records, minutes to hours of history, at 1.3 % of the RSS; and it
/// bounds what `/status` and `/decisions` serialize on each request (about 1.3 bytes of
/// JSON per byte of record).
pub const BYTE_BUDGET: usize = 64 * 1024;

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

impl Decision {
    /// The bytes the record holds: its own size and its texts' heap buffers (malloc's
    /// per-chunk overhead, 8 to 16 bytes per text, not counted).
    pub fn footprint(&self) -> usize {
        std::mem::size_of::<Decision>()
            + [
                &self.target,
                &self.action,
                &self.old,
                &self.new,
                &self.reason,
                &self.detail,
                &self.outcome,
            ]
            .iter()
            .map(|text| text.capacity())
            .sum::<usize>()
    }
}

/// A bounded, oldest-first log: at most [`CAPACITY`] records and [`BYTE_BUDGET`] bytes.
#[derive(Debug)]
pub struct DecisionLog {
    records: VecDeque<Decision>,
    /// The sum of the records' [`Decision::footprint`].
    bytes: usize,
    capacity: usize,
    byte_budget: usize,
}

impl Default for DecisionLog {
    fn default() -> Self {
        DecisionLog::with_limits(CAPACITY, BYTE_BUDGET)
    }
}

impl DecisionLog {
    /// A log of at most `capacity` records and `byte_budget` bytes (the newest record is
    /// kept even when it alone is larger).
    pub fn with_limits(capacity: usize, byte_budget: usize) -> Self {
        DecisionLog {
            records: VecDeque::new(),
            bytes: 0,
            capacity: capacity.max(1),
            byte_budget,
        }
    }

    /// Appends `decision`, evicting the oldest records while the log is over either bound.
    pub fn push(&mut self, decision: Decision) {
        self.bytes += decision.footprint();
        self.records.push_back(decision);
        while self.records.len() > 1
            && (self.records.len() > self.capacity || self.bytes > self.byte_budget)
        {
            if let Some(old) = self.records.pop_front() {
                self.bytes -= old.footprint();
            }
        }
    }

    /// The bytes the records hold (see [`Decision::footprint`]).
    pub fn bytes(&self) -> usize {
        self.bytes
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
        let mut out = Vec::with_capacity(self.json_size_hint());
        match serde_json::to_writer(&mut out, self) {
            Ok(()) => String::from_utf8(out).unwrap_or_else(|_| "[]".to_string()),
            Err(_) => "[]".to_string(),
        }
    }

    /// About how long the log's JSON is, a little more rather than less, so that a buffer
    /// of that size is allocated once instead of doubled (and copied) on the way: the
    /// texts, some escaping, and about 130 bytes of keys and numbers per record.
    pub fn json_size_hint(&self) -> usize {
        let texts = self.bytes - self.records.len() * std::mem::size_of::<Decision>();
        texts + texts / 8 + self.records.len() * 160 + 16
    }
}

/// The records as a JSON array, oldest first: `/decisions`, and `/status` serializes the
/// log in place with it instead of cloning every record.
impl Serialize for DecisionLog {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.records.iter())
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
        with_detail(tick, "CPU0 at 95%")
    }

    fn with_detail(tick: u64, detail: &str) -> Decision {
        Decision {
            unix_time: 0.0,
            tick,
            target: "irq 1 affinity".into(),
            action: "irq_affinity".into(),
            old: "0".into(),
            new: "1".into(),
            reason: "hot_cpu".into(),
            detail: detail.into(),
            outcome: "applied".into(),
        }
    }

    fn ticks(log: &DecisionLog) -> Vec<u64> {
        log.records().map(|d| d.tick).collect()
    }

    #[test]
    fn evicts_the_oldest_records_past_the_byte_budget_keeping_the_order() {
        let one = decision(0).footprint();
        let mut log = DecisionLog::with_limits(100, 3 * one + one / 2);
        for tick in 0..5 {
            log.push(decision(tick));
        }
        assert_eq!(ticks(&log), vec![2, 3, 4]);
        assert_eq!(log.bytes(), 3 * one);
        // A record twice as long pushes out two old ones.
        let long = with_detail(5, &"x".repeat(one + 16));
        let long_bytes = long.footprint();
        assert!(long_bytes >= 2 * one);
        log.push(long);
        assert_eq!(ticks(&log), vec![4, 5]);
        assert_eq!(log.bytes(), one + long_bytes);
        log.push(decision(6));
        assert_eq!(ticks(&log), vec![5, 6]);
        assert_eq!(log.bytes(), long_bytes + one);
    }

    #[test]
    fn keeps_the_newest_record_even_when_it_alone_is_over_the_budget() {
        let mut log = DecisionLog::with_limits(10, 10);
        log.push(decision(1));
        log.push(decision(2));
        assert_eq!(ticks(&log), vec![2]);
        assert_eq!(log.bytes(), decision(2).footprint());
    }

    #[test]
    fn evicts_by_count_within_the_byte_budget_keeping_the_order() {
        let mut log = DecisionLog::with_limits(4, usize::MAX);
        for tick in 0..7 {
            log.push(decision(tick));
        }
        assert_eq!(ticks(&log), vec![3, 4, 5, 6]);
        assert_eq!(log.bytes(), 4 * decision(0).footprint());
    }

    #[test]
    fn the_json_size_hint_is_not_below_the_json() {
        let mut log = DecisionLog::default();
        for tick in 0..50 {
            log.push(with_detail(tick, "quote \" and\ttab, CPU0 at 95%"));
        }
        let json = log.to_json();
        assert!(
            json.len() <= log.json_size_hint(),
            "{} > {}",
            json.len(),
            log.json_size_hint()
        );
        assert_eq!(
            serde_json::to_string(&log.records().collect::<Vec<_>>()).unwrap(),
            json
        );
    }

    #[test]
    fn keeps_the_newest_capacity_records() {
        let mut log = DecisionLog::with_limits(CAPACITY, usize::MAX);
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
