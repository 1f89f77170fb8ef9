//! The busy-polling NAPI thread scenario (issue 31: Linux 6.19's threaded mode `2`). A
//! NAPI in that mode polls in a kernel thread that never sleeps, so the thread keeps a
//! whole CPU busy and its queue's interrupt stays masked. A user pins such a thread to a
//! CPU of its own; a balancer must then keep every other queue's interrupt, NAPI thread and
//! RPS mask off that CPU, and must not move the busy-polling thread itself (steerd's
//! `forbidden_cpu` rule: "kept for a pinned busy-polling NAPI thread", docs/policy.md).
//! irqbalance knows nothing of NAPI threads, so the scenario shows what each balancer
//! makes of the same pin.
//!
//! Set-up: threaded NAPI on for the device, then queue 0's NAPI switched to busy-polling
//! with `napi-set` (examples/napi_set.rs: on 6.19.14 `sys/class/net/DEV/threaded` refuses
//! `2` with EOPNOTSUPP), so one thread spins, not eight. Figures, from the guest's samples:
//! how long after the pin no input vector's `smp_affinity_list`, RPS mask or other
//! queue's receive NAPI thread includes the CPU (`emptied`), how long after the thread is
//! allowed everywhere again one is placed there (`refilled`), and whether the busy-polling
//! thread's allowed CPUs were changed by anyone but the guest (`threads_moved`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::isolation::{event_at, kept_off};
use super::report::Metrics;
use super::scenario::{Scenario, base};

/// The CPU queue 0's busy-polling thread is pinned to.
pub const BUSY_CPU: u32 = 3;
/// When the thread is pinned and allowed everywhere again, seconds after the balancer
/// starts.
pub const PIN_AT: u32 = 10;
pub const UNPIN_AT: u32 = 22;
const PIN: &str = "pin_busy_thread 3";
const UNPIN: &str = "unpin_busy_thread";

/// The scenario: threaded NAPI in busy-poll mode, every input vector starting on the CPU
/// the thread will be pinned to.
pub fn scenario() -> Scenario {
    Scenario {
        setup: format!("busy_poll_on; pin_inputs {BUSY_CPU}"),
        events: vec![(PIN_AT, PIN), (UNPIN_AT, UNPIN)],
        duration: Duration::from_secs(32),
        steady: Duration::from_secs(8),
        ..base(
            "busy-poll",
            "threaded NAPI, queue 0's busy-polling (napi-set, Linux 6.19), every input vector on CPU 3; queue 0's thread pinned to CPU 3 at 10 s and allowed everywhere at 22 s, 8 UDP flows",
        )
    }
}

/// Whether the scenario is this one.
pub fn is_busy_poll(s: &Scenario) -> bool {
    s.events.iter().any(|(_, command)| *command == PIN)
}

/// The busy-poll figures of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BusyPollFigures {
    /// Seconds from the pin to the first sample with no input vector, RPS mask or other
    /// queue's NAPI thread on the busy thread's CPU (and none after, while it stays
    /// pinned); `None`: never.
    pub emptied: Option<f64>,
    /// Seconds from the unpin to the first sample with an input vector or RPS mask there
    /// again; `None`: not in the run.
    pub refilled: Option<f64>,
    /// Busy-polling threads (queue 0's) whose allowed CPUs took a value other than their
    /// first one and the pin's `3`: moved by the balancer.
    pub threads_moved: usize,
    /// When the balancer made the CPU free, from its log on the guest's clock: seconds
    /// from the pin to its last placement write before the sample that first saw the CPU
    /// free had read its files, that is before the next sample started. (`emptied` is
    /// when that sample came: seconds later on a loaded host, CI at bfdf58e: 2.76 s seen,
    /// the writes 0.9 s after steerd noticed the pin.) `None`
    /// without the daemon's log times, or when no write came between the two.
    pub emptied_made: Option<f64>,
}

impl BusyPollFigures {
    /// When the CPU was made free: from the log where it says, else from the samples.
    pub fn emptied_by(&self) -> Option<f64> {
        self.emptied_made.or(self.emptied)
    }
}

/// [`BusyPollFigures::emptied_made`] from the figures, the guest's events, the uptimes of
/// the samples and those of the balancer's placement writes. A sample's uptime is read
/// when it starts and its files over the next second or two, so the write that made the
/// CPU free may come after the uptime of the sample that first saw it free, up to the
/// next sample's (CI at 6da45dd: steerd's writes 0.2 s after that sample's uptime).
pub fn emptied_made(
    f: &BusyPollFigures,
    events: &[String],
    samples: &[f64],
    writes: &[f64],
) -> Option<f64> {
    let pinned = event_at(events, PIN)?;
    let seen = pinned + f.emptied?;
    let seen_by = samples
        .iter()
        .copied()
        .find(|&up| up > seen)
        .unwrap_or(seen);
    writes
        .iter()
        .filter(|&&up| up >= pinned && up <= seen_by)
        .map(|up| up - pinned)
        .reduce(f64::max)
}

/// The figures from each sample's time and the CPUs of its receive work other than the
/// busy-polling thread, that thread's allowed CPUs per sample (by queue: 0), and the
/// guest's event lines.
pub fn figures(
    timeline: &[(f64, BTreeSet<u32>)],
    thread_masks: &BTreeMap<u32, Vec<String>>,
    events: &[String],
) -> BusyPollFigures {
    let cpu = BTreeSet::from([BUSY_CPU]);
    let (emptied, refilled) = match event_at(events, PIN) {
        Some(pinned) => kept_off(timeline, &cpu, pinned, event_at(events, UNPIN)),
        None => (None, None),
    };
    let pinned = BUSY_CPU.to_string();
    let threads_moved = thread_masks
        .iter()
        .filter(|(queue, masks)| {
            let first = masks.first();
            **queue == 0 && masks.iter().any(|m| Some(m) != first && *m != pinned)
        })
        .count();
    BusyPollFigures {
        emptied,
        refilled,
        threads_moved,
        emptied_made: None,
    }
}

/// The scenario's verdicts for steerd: the thread's CPU emptied within 2 ticks of the pin,
/// no busy-polling thread moved, everything restored.
pub fn verdicts(rows: &[(Scenario, &'static str, Vec<Metrics>)]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (s, b, runs) in rows {
        if !is_busy_poll(s) || *b != "steerd" || runs.is_empty() {
            continue;
        }
        let figures: Vec<&BusyPollFigures> =
            runs.iter().filter_map(|m| m.busy_poll.as_ref()).collect();
        let emptied = super::report::median(figures.iter().map(|f| f.emptied_by()));
        let in_time = figures
            .iter()
            .filter(|f| f.emptied_by().is_some_and(|t| t <= 2.5))
            .count();
        out.push((
            format!(
                "{}: CPU {BUSY_CPU} free of other receive work {} after the pin in {in_time} of {} runs (<= 2 ticks)",
                s.name,
                emptied.map_or("never".into(), |t| format!("{t:.1} s")),
                runs.len()
            ),
            in_time == runs.len(),
        ));
        let moved = figures.iter().map(|f| f.threads_moved).max().unwrap_or(0);
        out.push((
            format!(
                "{}: {moved} busy-polling threads moved by steerd (0)",
                s.name
            ),
            moved == 0,
        ));
        out.push(super::report::restored_verdict(s, runs));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::isolation::cpus_of;

    #[test]
    fn the_busy_cpu_is_emptied_and_refilled_and_a_moved_thread_counts() {
        let sample = |up: f64, cpus: &str| (up, cpus_of(cpus, false));
        let events = vec![
            "20.2 pin_busy_thread 3".to_string(),
            "32.2 unpin_busy_thread".to_string(),
        ];
        let timeline = vec![
            sample(19.0, "0-3"),
            sample(20.5, "1,3"),
            sample(21.0, "1-2"),
            sample(31.0, "1-2"),
            sample(33.0, "1,3"),
        ];
        let masks = |queue0: &[&str], queue1: &[&str]| {
            BTreeMap::from([
                (0, queue0.iter().map(|m| m.to_string()).collect()),
                (1, queue1.iter().map(|m| m.to_string()).collect()),
            ])
        };
        let pinned_only = masks(&["0-3", "3", "3", "0-3"], &[]);
        let f = figures(&timeline, &pinned_only, &events);
        assert!((f.emptied.unwrap() - 0.8).abs() < 1e-9, "{f:?}");
        assert!((f.refilled.unwrap() - 0.8).abs() < 1e-9, "{f:?}");
        assert_eq!(f.threads_moved, 0);
        let moved = masks(&["0-3", "3", "2"], &[]);
        assert_eq!(figures(&timeline, &moved, &events).threads_moved, 1);
        assert_eq!(figures(&timeline, &pinned_only, &[]).emptied, None);
    }

    #[test]
    fn the_write_that_freed_the_cpu_may_come_while_the_sample_that_saw_it_reads() {
        let events = vec!["20.0 pin_busy_thread 3".to_string()];
        let f = BusyPollFigures {
            emptied: Some(2.0),
            ..BusyPollFigures::default()
        };
        let samples = [19.0, 20.5, 22.0, 23.9];
        // The sample at 22.0 saw the CPU free; steerd wrote at 20.6 and 22.3.
        let made = emptied_made(&f, &events, &samples, &[19.5, 20.6, 22.3, 24.5]);
        assert!((made.expect("a write") - 2.3).abs() < 1e-9, "{made:?}");
        assert_eq!(emptied_made(&f, &events, &samples, &[19.5, 24.5]), None);
    }
}
