//! The decision log: the last N things steerd did or refused to do, with their reasons.
//!
//! Served as JSON at `/decisions` (and inside `/status`), printed by `steerd status`. Its
//! memory is fixed when the daemon starts: the records are kept as their JSON, one after
//! another in a ring of [`BYTE_BUDGET`] bytes that is allocated and touched up front, the
//! oldest overwritten first, with an index of at most [`CAPACITY`] spans. So a daemon that
//! runs for months holds the same memory for it on its first minute as on its last: the
//! hour's soak (docs/reliability.md) saw VmRSS step when a log of records with their own
//! heap texts filled, minutes in, and the heap's holes stayed.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// At most this many records are kept.
pub const CAPACITY: usize = 256;

/// The bytes of JSON the log keeps, the oldest records overwritten first.
///
/// Measured with `scripts/decision-memory.sh` (docs/performance.md, "Where the memory
/// goes"): a typical record is about 300 bytes of JSON, so 64 KiB keeps about 200 of them,
/// minutes to hours of history, at about 1.3 % of the RSS; and it bounds what `/status`
/// and `/decisions` write on each request. A record longer than the whole ring (masks of a
/// machine with thousands of CPUs) is kept with its texts replaced by their length.
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
    /// The record with its long texts replaced by their length: what the log keeps of a
    /// record whose JSON is longer than the whole ring.
    fn shortened(&self) -> Decision {
        let cut = |text: &str| format!("({} bytes, too long for the decision log)", text.len());
        Decision {
            old: cut(&self.old),
            new: cut(&self.new),
            detail: cut(&self.detail),
            ..self.clone()
        }
    }
}

/// Where one record's JSON lies in the ring.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: usize,
    len: usize,
}

/// A bounded, oldest-first log: at most [`CAPACITY`] records in [`BYTE_BUDGET`] bytes.
#[derive(Debug)]
pub struct DecisionLog {
    /// The records' JSON; a record never wraps around the end (the end's unused bytes are
    /// skipped when the next record would not fit).
    ring: Vec<u8>,
    /// The records, oldest first.
    spans: VecDeque<Span>,
    /// Where the next record goes.
    next: usize,
    capacity: usize,
    /// The JSON of the record being added (kept, so adding allocates nothing once it has
    /// held the longest record).
    scratch: Vec<u8>,
}

impl Default for DecisionLog {
    fn default() -> Self {
        DecisionLog::with_limits(CAPACITY, BYTE_BUDGET)
    }
}

impl DecisionLog {
    /// A log of at most `capacity` records and `byte_budget` bytes of JSON, all of it
    /// allocated and written once now, so that the pages are the process's from the start
    /// (a zeroed allocation would be mapped only as records fill it).
    pub fn with_limits(capacity: usize, byte_budget: usize) -> Self {
        let capacity = capacity.max(1);
        let mut spans = VecDeque::with_capacity(capacity);
        spans.resize(capacity, Span::default());
        spans.clear();
        DecisionLog {
            ring: vec![b' '; byte_budget],
            spans,
            next: 0,
            capacity,
            scratch: Vec::new(),
        }
    }

    /// Appends `decision`, overwriting the oldest records where its JSON goes and while
    /// more than `capacity` are kept.
    pub fn push(&mut self, decision: Decision) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let ring = self.ring.len();
        // Whether `record`'s JSON, written into `json`, fits the ring.
        let encodes = |json: &mut Vec<u8>, record: &Decision| {
            json.clear();
            serde_json::to_writer(&mut *json, record).is_ok() && json.len() <= ring
        };
        if encodes(&mut scratch, &decision) || encodes(&mut scratch, &decision.shortened()) {
            self.place(&scratch);
        }
        self.scratch = scratch;
    }

    fn place(&mut self, json: &[u8]) {
        let len = json.len();
        let wrapped = self.next + len > self.ring.len();
        let start = if wrapped { 0 } else { self.next };
        let end = start + len;
        while let Some(oldest) = self.spans.front() {
            // The oldest records lie from `next` on: those past `next` when the record
            // wraps (the ring's end is skipped), then those the record overwrites.
            let skipped = wrapped && oldest.start >= self.next;
            let overwritten = oldest.start < end && start < oldest.start + oldest.len;
            if skipped || overwritten || self.spans.len() >= self.capacity {
                self.spans.pop_front();
            } else {
                break;
            }
        }
        self.ring[start..end].copy_from_slice(json);
        self.spans.push_back(Span { start, len });
        self.next = end;
    }

    /// The bytes of JSON the records take.
    pub fn bytes(&self) -> usize {
        self.spans.iter().map(|s| s.len).sum()
    }

    /// Each record's JSON, oldest first.
    fn json_records(&self) -> impl Iterator<Item = &[u8]> {
        self.spans
            .iter()
            .map(|s| &self.ring[s.start..s.start + s.len])
    }

    /// The records, oldest first, read back from their JSON.
    pub fn records(&self) -> Vec<Decision> {
        self.json_records()
            .filter_map(|json| serde_json::from_slice(json).ok())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// JSON array, oldest first.
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(self.json_capacity());
        out.push(b'[');
        for (i, json) in self.json_records().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(json);
        }
        out.push(b']');
        String::from_utf8(out).unwrap_or_else(|_| "[]".to_string())
    }

    /// The most the log's JSON array can take (every byte of the ring, the commas and the
    /// brackets): the size of every buffer the log is written into, whatever it holds now.
    /// A buffer sized to the current JSON grows with the log and varies by a few hundred
    /// bytes from one request to the next, and each new largest one extended the heap a
    /// little (`scripts/decision-memory.sh`: 8 kB every 40 s); one size for all is freed
    /// and reused.
    pub fn json_capacity(&self) -> usize {
        self.ring.len() + self.capacity + 1
    }
}

/// The records as a JSON array, oldest first, written as they are kept: `/status` embeds
/// the log with it. (Each record is checked as JSON on the way; the ring holds only what
/// `push` wrote, so none is left out.)
impl Serialize for DecisionLog {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            self.json_records().filter_map(|json| {
                serde_json::from_slice::<&serde_json::value::RawValue>(json).ok()
            }),
        )
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

    fn json_len(d: &Decision) -> usize {
        serde_json::to_vec(d).unwrap().len()
    }

    fn ticks(log: &DecisionLog) -> Vec<u64> {
        log.records().iter().map(|d| d.tick).collect()
    }

    #[test]
    fn overwrites_the_oldest_records_past_the_byte_budget_keeping_the_order() {
        // Ticks 0..=9 have JSON of one length.
        let one = json_len(&decision(0));
        let mut log = DecisionLog::with_limits(100, 3 * one + one / 2);
        for tick in 0..5 {
            log.push(decision(tick));
        }
        assert_eq!(ticks(&log), vec![2, 3, 4]);
        assert_eq!(log.bytes(), 3 * one);
        // A record twice as long does not fit before the end: it goes to the start,
        // over the two oldest, and the one left after the end goes too.
        let long = with_detail(5, &"x".repeat(one + 16));
        let long_len = json_len(&long);
        assert!(long_len >= 2 * one && long_len < 3 * one);
        log.push(long.clone());
        assert_eq!(ticks(&log), vec![5]);
        log.push(decision(6));
        assert_eq!(ticks(&log), vec![5, 6]);
        assert_eq!(log.records()[0], long);
        assert_eq!(log.bytes(), long_len + one);
    }

    #[test]
    fn a_record_longer_than_the_log_is_kept_with_its_texts_shortened() {
        let one = json_len(&decision(0));
        let mut log = DecisionLog::with_limits(10, 2 * one);
        log.push(decision(1));
        log.push(with_detail(2, &"x".repeat(4 * one)));
        let kept = log.records();
        assert_eq!(kept.last().map(|d| d.tick), Some(2));
        let last = &kept[kept.len() - 1];
        assert!(
            last.detail.contains("too long for the decision log"),
            "{last:?}"
        );
        assert!(log.bytes() <= 2 * one);
        // One that cannot be kept even shortened is not kept; the others stay.
        let mut tiny = DecisionLog::with_limits(10, 10);
        tiny.push(decision(1));
        assert!(tiny.is_empty());
    }

    #[test]
    fn evicts_by_count_within_the_byte_budget_keeping_the_order() {
        let mut log = DecisionLog::with_limits(4, BYTE_BUDGET);
        for tick in 0..7 {
            log.push(decision(tick));
        }
        assert_eq!(ticks(&log), vec![3, 4, 5, 6]);
        assert_eq!(log.bytes(), 4 * json_len(&decision(0)));
    }

    /// Records of many lengths, through many laps of the ring: what is kept is always the
    /// newest records, in order, the newest among them, within both bounds.
    #[test]
    fn keeps_a_newest_run_of_records_through_many_laps() {
        let mut log = DecisionLog::with_limits(20, 4096);
        let mut seed = 7u64;
        for tick in 0..3000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            log.push(with_detail(tick, &"d".repeat((seed >> 33) as usize % 900)));
            let kept = ticks(&log);
            assert_eq!(kept.last(), Some(&tick));
            let first = kept[0];
            assert_eq!(kept, (first..=tick).collect::<Vec<_>>());
            assert!(kept.len() <= 20 && log.bytes() <= 4096);
            assert_eq!(log.len(), kept.len());
        }
    }

    #[test]
    fn the_json_is_the_records_within_the_buffer_size() {
        let mut log = DecisionLog::default();
        for tick in 0..50 {
            log.push(with_detail(tick, "quote \" and\ttab, CPU0 at 95%"));
        }
        let json = log.to_json();
        assert!(json.len() <= log.json_capacity());
        assert_eq!(serde_json::to_string(&log.records()).unwrap(), json);
        assert_eq!(serde_json::to_string(&log).unwrap(), json);
        assert_eq!(DecisionLog::default().to_json(), "[]");
    }

    /// A full ring of the shortest records, each apart: the JSON still fits the buffer.
    #[test]
    fn a_log_full_of_short_records_fits_the_buffer() {
        let mut log = DecisionLog::with_limits(CAPACITY, 4096);
        for tick in 0..1000 {
            log.push(with_detail(tick, ""));
        }
        assert!(log.to_json().len() <= log.json_capacity());
    }

    #[test]
    fn keeps_the_newest_capacity_records() {
        let mut log = DecisionLog::with_limits(CAPACITY, usize::MAX >> 40);
        for tick in 0..(CAPACITY as u64 + 10) {
            log.push(decision(tick));
        }
        assert_eq!(log.len(), CAPACITY);
        assert_eq!(log.records().first().map(|d| d.tick), Some(10));
        let parsed: Vec<Decision> = serde_json::from_str(&log.to_json()).unwrap();
        assert_eq!(parsed.len(), CAPACITY);
        assert!(to_text(&parsed[..1]).contains("CPU0 at 95%"));
    }
}
