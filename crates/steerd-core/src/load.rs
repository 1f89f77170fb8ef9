//! The load model: smoothed rates from two successive snapshots.
//!
//! Counters are cumulative and some wrap, so the policy never sees them; it sees rates:
//!
//! * per CPU, softnet `processed` (the work signal: packets whose protocol work ran there),
//!   `dropped` and `time_squeeze` (distress), `received_rps` (RPS IPIs), and the irq+softirq
//!   share of its time from `proc/stat` (pressure only: it is tick-sampled and misleading on
//!   CPUs that receive RPS IPIs or run veth senders, see docs/kernel.md, "CPU time and
//!   IRQ totals");
//! * per IRQ, interrupts per second (the `intr` line);
//! * per rx queue, packets per second where the driver has per-queue counters.
//!
//! Work and pressure are smoothed with an EWMA; distress is the last interval's raw rate,
//! so the policy can react to it at once. Softnet counters are u32 and wrap; the `intr`
//! totals are the kernel's `unsigned int` sums and wrap too; 64-bit queue counters that go
//! backwards were reset (device re-created) and give no rate that tick. A CPU that appears
//! (hot-add) has no rate until its second sample; one that disappears is offline and idle.
//!
//! Where no per-queue counters exist, [`Load::attribute`] splits a CPU's processed packets
//! among the queue IRQs firing there in proportion to their interrupt rates.

use std::collections::HashMap;

use serde::Serialize;

use crate::limits::MAX_QUEUES;
use crate::model::snapshot::{QueueDirection, Snapshot};

/// Rates derived from snapshots, by CPU id, IRQ number and queue.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Load {
    /// Seconds between the last two snapshots folded in.
    pub interval_secs: f64,
    /// Snapshot pairs folded in so far.
    pub samples: u64,
    /// Indexed by CPU id; CPUs never seen are default (offline, no rates).
    pub cpus: Vec<CpuLoad>,
    /// Interrupts per second, indexed by IRQ number (smoothed).
    pub irq_rates: Vec<f64>,
    /// Received packets per second per rx queue, by device; `None` where the queue has no
    /// counter (smoothed).
    pub rx_queues: HashMap<String, Vec<Option<f64>>>,
    /// The same over the last interval alone, unsmoothed: what the RSS table lever judges
    /// a step by once it has dwelt (a smoothed rate still carries the time before the step,
    /// and a rate that rises fast and falls slowly would flatter a step that moved the load).
    pub rx_queues_last: HashMap<String, Vec<Option<f64>>>,
    #[serde(skip)]
    pub(crate) scratch: Scratch,
}

/// One CPU's rates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuLoad {
    /// Present in the latest snapshot.
    pub online: bool,
    /// Has at least one rate (seen in two successive snapshots).
    pub warm: bool,
    /// Softnet `processed` per second (smoothed): the receive work done on this CPU.
    pub processed_pps: f64,
    /// The same over the last interval alone, unsmoothed: what an RPS trial averages
    /// (`policy::rps_trial`). A rate that rises at once and falls slowly holds the last
    /// peak, so on a saturated CPU whose work swings from tick to tick it would compare a
    /// peak before a change with a decay after it.
    pub processed_last_pps: f64,
    /// Softnet `dropped` per second over the last interval (backlog full).
    pub dropped_per_sec: f64,
    /// Softnet `time_squeeze` per second over the last interval (budget exhausted).
    pub squeezed_per_sec: f64,
    /// Softnet `received_rps` per second (smoothed): RPS IPIs this CPU received.
    pub rps_ipis_per_sec: f64,
    /// irq+softirq share of the CPU's time, with the time of the threaded NAPI threads in
    /// the snapshots that ran here (which threads count is the samplers' one rule,
    /// [`crate::engine::sampling::counts_as_receive_work`]: not busy-polling ones), 0..1
    /// (smoothed). The one per-CPU share: the daemon's high watermark, `plan`, `top` and
    /// `doctor` all read it.
    pub net_share: f64,
    /// Non-idle share of the CPU's time, 0..1 (smoothed).
    pub busy_share: f64,
}

impl CpuLoad {
    /// Whether drops or time squeezes reach the given per-second thresholds.
    pub fn in_distress(&self, drops_per_sec: f64, squeezes_per_sec: f64) -> bool {
        self.dropped_per_sec >= drops_per_sec || self.squeezed_per_sec >= squeezes_per_sec
    }
}

/// A queue vector to attribute work to: which device queue, which IRQ, firing on which CPU.
#[derive(Debug, Clone, Copy)]
pub struct QueueVector<'a> {
    pub device: &'a str,
    pub queue: u32,
    pub irq: u32,
    pub cpu: u32,
}

/// A rate over an interval, or nothing if the counter went backwards.
fn rate_u64(prev: u64, cur: u64, secs: f64) -> Option<f64> {
    (cur >= prev).then(|| (cur - prev) as f64 / secs)
}

/// A rate of a u32 kernel counter that wraps.
fn rate_u32(prev: u32, cur: u32, secs: f64) -> f64 {
    f64::from(cur.wrapping_sub(prev)) / secs
}

/// A rate of an `intr` total: the kernel sums per-CPU `unsigned int`s into an `unsigned
/// int`, so a value below the previous one that fits 32 bits wrapped.
fn rate_intr(prev: u64, cur: u64, secs: f64) -> Option<f64> {
    if cur >= prev {
        Some((cur - prev) as f64 / secs)
    } else if prev <= u64::from(u32::MAX) {
        Some(((cur + (1 << 32)) - prev) as f64 / secs)
    } else {
        None
    }
}

/// No row for this CPU in an [`index_by_cpu`] table.
const NO_ROW: u32 = u32::MAX;

/// Fills `table` with the index of each CPU's row, by CPU id (a dense table: no hashing on
/// the hot path, and no allocation once the table has grown to the highest CPU id).
fn index_by_cpu<T>(rows: &[T], cpu: impl Fn(&T) -> u32, table: &mut Vec<u32>) {
    let len = rows.iter().map(|r| cpu(r) as usize + 1).max().unwrap_or(0);
    table.clear();
    table.resize(len, NO_ROW);
    for (index, row) in rows.iter().enumerate() {
        table[cpu(row) as usize] = index as u32;
    }
}

/// The row of CPU `id` through an [`index_by_cpu`] table.
fn row_of<'a, T>(rows: &'a [T], table: &[u32], id: u32) -> Option<&'a T> {
    let index = *table.get(id as usize)?;
    rows.get(index as usize)
}

/// Working space of [`Load::update`], kept between ticks so that an idle tick allocates
/// nothing: after a second asleep, every allocation is a round of cache misses in the
/// allocator, and an idle tick is most of what steerd does.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    /// Row index by CPU id in the previous snapshot's `cpu_times`, then `softnet`.
    previous_rows: Vec<u32>,
    /// By CPU id: present in the current snapshot.
    seen: Vec<bool>,
    /// By CPU id: got a rate this tick.
    updated: Vec<bool>,
}

/// Folds a new sample into a smoothed value; the first sample is taken as is.
fn smooth(value: &mut f64, sample: f64, alpha: f64, warm: bool) {
    if warm {
        *value += alpha * (sample - *value);
    } else {
        *value = sample;
    }
}

/// Like [`smooth`], but a rise is taken at once: new receive work is acted on a tick
/// sooner (the policy's `confirm_ticks` still guard against a one-tick spike), while a
/// fall is smoothed, so a dip does not narrow RPS masks early. Used for every measure of
/// receive work (per CPU, per IRQ, per queue) alike: the policy compares a CPU's work with
/// the work of the IRQs on it, and the two must rise together.
fn smooth_rising_fast(value: &mut f64, sample: f64, alpha: f64, warm: bool) {
    if warm && sample < *value {
        *value += alpha * (sample - *value);
    } else {
        *value = sample;
    }
}

impl Load {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// The online CPU with the highest irq+softirq share (then the most packets
    /// processed), with that share and its packets/s: the busiest CPU as `plan`, the
    /// daemon's calm verdict and `status` report it.
    pub fn busiest_cpu(&self) -> Option<(u32, f64, f64)> {
        self.cpus
            .iter()
            .enumerate()
            .filter(|(_, c)| c.online)
            .max_by(|a, b| {
                a.1.net_share
                    .total_cmp(&b.1.net_share)
                    .then(a.1.processed_pps.total_cmp(&b.1.processed_pps))
            })
            .map(|(cpu, c)| (cpu as u32, c.net_share, c.processed_pps))
    }

    /// The rates of a CPU, if it was ever seen.
    pub fn cpu(&self, id: u32) -> Option<&CpuLoad> {
        self.cpus.get(id as usize)
    }

    /// Interrupts per second of an IRQ (0 if unknown).
    pub fn irq_rate(&self, irq: u32) -> f64 {
        self.irq_rates.get(irq as usize).copied().unwrap_or(0.0)
    }

    /// Measured packets per second of an rx queue, if it has a counter.
    /// A queue's packet rate over the last interval alone (unsmoothed).
    pub fn rx_queue_pps_last(&self, device: &str, queue: u32) -> Option<f64> {
        self.rx_queues_last
            .get(device)
            .and_then(|queues| queues.get(queue as usize).copied().flatten())
    }

    pub fn rx_queue_pps(&self, device: &str, queue: u32) -> Option<f64> {
        self.rx_queues
            .get(device)
            .and_then(|queues| queues.get(queue as usize).copied().flatten())
    }

    /// Folds the interval between two snapshots in. `smoothing` is the EWMA weight of the
    /// new sample, in (0, 1]. Snapshots out of order (or taken at the same instant) are
    /// ignored.
    pub fn update(&mut self, prev: &Snapshot, cur: &Snapshot, smoothing: f64) {
        if cur.taken_at_ns <= prev.taken_at_ns {
            return;
        }
        let secs = (cur.taken_at_ns - prev.taken_at_ns) as f64 / 1e9;
        let alpha = smoothing.clamp(f64::MIN_POSITIVE, 1.0);
        self.interval_secs = secs;
        self.samples += 1;
        // `proc/stat` may be older than the rest (carried over on an idle tick): its
        // rates span their own interval, and a carried-over reading adds nothing.
        let stat_secs = cur
            .stat_taken_at_ns()
            .saturating_sub(prev.stat_taken_at_ns()) as f64
            / 1e9;
        self.update_cpus(prev, cur, secs, alpha);
        if stat_secs > 0.0 {
            self.update_irqs(prev, cur, stat_secs, alpha);
        }
        self.update_queues(prev, cur, secs, alpha);
    }

    fn update_cpus(&mut self, prev: &Snapshot, cur: &Snapshot, secs: f64, alpha: f64) {
        let highest = cur
            .cpu_times
            .iter()
            .map(|t| t.cpu)
            .chain(cur.softnet.iter().map(|r| r.cpu))
            .max();
        if let Some(highest) = highest
            && self.cpus.len() <= highest as usize
        {
            self.cpus.resize(highest as usize + 1, CpuLoad::default());
        }
        let Scratch {
            previous_rows,
            seen,
            updated,
        } = &mut self.scratch;
        for marks in [&mut *seen, &mut *updated] {
            marks.clear();
            marks.resize(self.cpus.len(), false);
        }

        let thread_ticks = napi_thread_ticks(prev, cur);
        index_by_cpu(&prev.cpu_times, |t| t.cpu, previous_rows);
        for now in &cur.cpu_times {
            let index = now.cpu as usize;
            seen[index] = true;
            let Some(before) = row_of(&prev.cpu_times, previous_rows, now.cpu) else {
                continue;
            };
            let total = now.total().checked_sub(before.total()).filter(|&t| t > 0);
            // Threaded NAPI polls in threads: their time is receive work on the CPU they
            // ran on, though `proc/stat` books it as system time.
            let threads = thread_ticks
                .iter()
                .filter(|(cpu, _)| *cpu == now.cpu)
                .map(|(_, ticks)| ticks)
                .sum::<u64>();
            let net = (now.irq + now.softirq)
                .checked_sub(before.irq + before.softirq)
                .map(|n| n + threads);
            let idle = (now.idle + now.iowait).checked_sub(before.idle + before.iowait);
            let (Some(total), Some(net), Some(idle)) = (total, net, idle) else {
                continue;
            };
            let cpu = &mut self.cpus[index];
            let total = total as f64;
            smooth(
                &mut cpu.net_share,
                (net as f64 / total).min(1.0),
                alpha,
                cpu.warm,
            );
            let busy = (1.0 - idle as f64 / total).clamp(0.0, 1.0);
            smooth(&mut cpu.busy_share, busy, alpha, cpu.warm);
            updated[index] = true;
        }

        index_by_cpu(&prev.softnet, |r| r.cpu, previous_rows);
        for now in &cur.softnet {
            let index = now.cpu as usize;
            seen[index] = true;
            let Some(before) = row_of(&prev.softnet, previous_rows, now.cpu) else {
                continue;
            };
            let cpu = &mut self.cpus[index];
            let processed = rate_u32(before.processed, now.processed, secs);
            smooth_rising_fast(&mut cpu.processed_pps, processed, alpha, cpu.warm);
            cpu.processed_last_pps = processed;
            cpu.dropped_per_sec = rate_u32(before.dropped, now.dropped, secs);
            cpu.squeezed_per_sec = rate_u32(before.time_squeeze, now.time_squeeze, secs);
            if let (Some(b), Some(n)) = (before.received_rps, now.received_rps) {
                smooth(
                    &mut cpu.rps_ipis_per_sec,
                    rate_u32(b, n, secs),
                    alpha,
                    cpu.warm,
                );
            }
            updated[index] = true;
        }

        for (index, cpu) in self.cpus.iter_mut().enumerate() {
            cpu.online = seen[index];
            if !seen[index] {
                *cpu = CpuLoad::default();
            } else if updated[index] {
                cpu.warm = true;
            }
        }
    }

    fn update_irqs(&mut self, prev: &Snapshot, cur: &Snapshot, secs: f64, alpha: f64) {
        if self.irq_rates.len() < cur.irq_totals.len() {
            self.irq_rates.resize(cur.irq_totals.len(), 0.0);
        }
        let warm = self.samples > 1;
        for (irq, &now) in cur.irq_totals.iter().enumerate() {
            let Some(&before) = prev.irq_totals.get(irq) else {
                continue;
            };
            if let Some(rate) = rate_intr(before, now, secs) {
                smooth_rising_fast(&mut self.irq_rates[irq], rate, alpha, warm);
            }
        }
    }

    fn update_queues(&mut self, prev: &Snapshot, cur: &Snapshot, secs: f64, alpha: f64) {
        // No device with per-queue counters (single-queue NICs, veth): nothing to do, and
        // an idle tick need not touch this code at all.
        if prev.queues.is_empty() && cur.queues.is_empty() && self.rx_queues.is_empty() {
            return;
        }
        let mut before: HashMap<&str, Vec<Option<u64>>> = HashMap::new();
        for q in prev
            .queues
            .iter()
            .filter(|q| q.direction == QueueDirection::Rx)
        {
            // Readers refuse queue numbers at or above MAX_QUEUES; a snapshot built some
            // other way must not size these tables either.
            if q.queue >= MAX_QUEUES {
                continue;
            }
            let slots = before.entry(q.device.as_str()).or_default();
            *grown_slot(slots, q.queue as usize, None) = Some(q.packets);
        }
        let mut present: HashMap<&str, Vec<bool>> = HashMap::new();
        for q in cur
            .queues
            .iter()
            .filter(|q| q.direction == QueueDirection::Rx)
        {
            if q.queue >= MAX_QUEUES {
                continue;
            }
            let slot = q.queue as usize;
            let marks = present.entry(q.device.as_str()).or_default();
            *grown_slot(marks, slot, false) = true;
            let Some(rate) = before
                .get(q.device.as_str())
                .and_then(|slots| slots.get(slot).copied().flatten())
                .and_then(|b| rate_u64(b, q.packets, secs))
            else {
                continue;
            };
            if !self.rx_queues.contains_key(&q.device) {
                self.rx_queues.insert(q.device.clone(), Vec::new());
            }
            let Some(rates) = self.rx_queues.get_mut(&q.device) else {
                continue;
            };
            match grown_slot(rates, slot, None) {
                Some(value) => smooth_rising_fast(value, rate, alpha, true),
                empty => *empty = Some(rate),
            }
            let last = self.rx_queues_last.entry(q.device.clone()).or_default();
            *grown_slot(last, slot, None) = Some(rate);
        }
        // Queues (and devices) that vanished have no rate any more.
        for (device, last) in &mut self.rx_queues_last {
            let marks = present.get(device.as_str());
            for (slot, rate) in last.iter_mut().enumerate() {
                if !marks.is_some_and(|m| m.get(slot).copied().unwrap_or(false)) {
                    *rate = None;
                }
            }
        }
        self.rx_queues_last
            .retain(|device, _| present.contains_key(device.as_str()));
        self.rx_queues.retain(|device, rates| {
            let Some(marks) = present.get(device.as_str()) else {
                return false;
            };
            for (slot, rate) in rates.iter_mut().enumerate() {
                if !marks.get(slot).copied().unwrap_or(false) {
                    *rate = None;
                }
            }
            true
        });
    }

    /// Received packets per second for each queue vector: the queue's counter where there
    /// is one; otherwise the processed packets of the vector's CPU (less what measured
    /// queues there account for), split among the unmeasured vectors firing there by their
    /// interrupt rates (evenly when none has a rate).
    ///
    /// With RPS on, the interrupting CPU processes only part of its queue's packets, so an
    /// attributed rate is what that IRQ costs its CPU rather than the queue's traffic; that
    /// is what an IRQ move takes along.
    pub fn attribute(&self, vectors: &[QueueVector<'_>]) -> Vec<f64> {
        let mut out = vec![0.0; vectors.len()];
        let measured: Vec<Option<f64>> = vectors
            .iter()
            .map(|v| self.rx_queue_pps(v.device, v.queue))
            .collect();
        // Per CPU: measured pps, and the interrupt rate and count of unmeasured vectors.
        let cpus = vectors
            .iter()
            .map(|v| v.cpu as usize + 1)
            .max()
            .unwrap_or(0);
        let mut measured_on = vec![0.0; cpus];
        let mut unmeasured_on = vec![(0.0, 0usize); cpus];
        for ((slot, v), measured) in vectors.iter().enumerate().zip(&measured) {
            let cpu = v.cpu as usize;
            match measured {
                Some(pps) => {
                    out[slot] = *pps;
                    measured_on[cpu] += pps;
                }
                None => {
                    unmeasured_on[cpu].0 += self.irq_rate(v.irq);
                    unmeasured_on[cpu].1 += 1;
                }
            }
        }
        for ((slot, v), measured) in vectors.iter().enumerate().zip(&measured) {
            if measured.is_some() {
                continue;
            }
            let cpu = v.cpu as usize;
            let processed = self.cpu(v.cpu).map_or(0.0, |c| c.processed_pps);
            let pool = (processed - measured_on[cpu]).max(0.0);
            let (rate_sum, count) = unmeasured_on[cpu];
            out[slot] = if rate_sum > 0.0 {
                pool * self.irq_rate(v.irq) / rate_sum
            } else {
                pool / count.max(1) as f64
            };
        }
        out
    }
}

/// The CPU time each threaded NAPI thread spent between two samples, by the CPU it ran
/// on last (a thread that moved in between is booked where it is now). Few threads, so a
/// linear search per thread; allocation only while threads exist.
fn napi_thread_ticks(prev: &Snapshot, cur: &Snapshot) -> Vec<(u32, u64)> {
    cur.napi_threads
        .iter()
        .filter_map(|now| {
            let before = prev.napi_threads.iter().find(|t| t.pid == now.pid)?;
            Some((now.cpu, now.ticks.checked_sub(before.ticks)?))
        })
        .collect()
}

/// Slot `index` of a per-queue table, the table grown (with `empty`) to hold it: the
/// tables are as long as the highest queue number seen, which the readers keep below
/// `MAX_QUEUES`. Shared by the rate tables `update_queues` keeps and the ones it builds.
fn grown_slot<T: Clone>(table: &mut Vec<T>, index: usize, empty: T) -> &mut T {
    if table.len() <= index {
        table.resize(index + 1, empty);
    }
    &mut table[index]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::{CpuTimes, QueueCounters, SoftnetRow};

    fn snapshot(at_secs: u64, cpus: &[(u32, u32, u64, u64)]) -> Snapshot {
        // (cpu, processed, softirq ticks, idle ticks)
        Snapshot {
            taken_at_ns: at_secs * 1_000_000_000,
            cpu_times: cpus
                .iter()
                .map(|&(cpu, _, softirq, idle)| CpuTimes {
                    cpu,
                    softirq,
                    idle,
                    ..CpuTimes::default()
                })
                .collect(),
            softnet: cpus
                .iter()
                .map(|&(cpu, processed, _, _)| SoftnetRow {
                    cpu,
                    processed,
                    ..SoftnetRow::default()
                })
                .collect(),
            irq_totals: Vec::new(),
            queues: Vec::new(),
            stat_taken_at_ns: None,
            napi_threads: Vec::new(),
        }
    }

    #[test]
    fn threaded_napi_time_is_receive_work_on_the_cpu_the_thread_ran_on() {
        use crate::model::snapshot::ThreadTime;
        // Two CPUs, no softirq time at all: the work is in a napi thread on CPU 1.
        let mut a = snapshot(10, &[(0, 0, 0, 100), (1, 0, 0, 100)]);
        a.napi_threads = vec![ThreadTime {
            pid: 812,
            cpu: 1,
            ticks: 500,
        }];
        let mut b = snapshot(11, &[(0, 0, 0, 200), (1, 50_000, 0, 140)]);
        b.cpu_times[1].system = 60;
        b.napi_threads = vec![ThreadTime {
            pid: 812,
            cpu: 1,
            ticks: 560,
        }];
        let mut load = Load::new();
        load.update(&a, &b, 1.0);
        assert_eq!(load.cpu(1).unwrap().net_share, 0.6);
        assert_eq!(load.cpu(0).unwrap().net_share, 0.0);
        // A thread that is new (threaded just switched on) has no interval yet.
        let mut c = snapshot(12, &[(0, 0, 0, 300), (1, 50_000, 0, 240)]);
        c.napi_threads = vec![ThreadTime {
            pid: 999,
            cpu: 0,
            ticks: 7,
        }];
        load.update(&b, &c, 1.0);
        assert_eq!(load.cpu(0).unwrap().net_share, 0.0);
    }

    #[test]
    fn a_carried_over_proc_stat_changes_nothing_and_the_next_reading_spans_its_interval() {
        let mut a = snapshot(10, &[(0, 0, 10, 90)]);
        a.irq_totals = vec![0, 1000];
        let mut b = snapshot(11, &[(0, 100, 20, 180)]);
        b.irq_totals = vec![0, 2000];
        let mut load = Load::new();
        load.update(&a, &b, 1.0);
        assert_eq!(load.irq_rate(1), 1000.0);
        let share = load.cpu(0).unwrap().net_share;
        // Second 12: softnet only, proc/stat carried over from second 11.
        let mut c = snapshot(12, &[(0, 300, 0, 0)]);
        c.carry_stat_from(&b);
        load.update(&b, &c, 1.0);
        assert_eq!(load.irq_rate(1), 1000.0, "not pulled to 0 by the copy");
        assert_eq!(load.cpu(0).unwrap().net_share, share);
        assert_eq!(
            load.cpu(0).unwrap().processed_pps,
            200.0,
            "softnet is fresh"
        );
        // Second 13: proc/stat read again; its IRQ rate spans seconds 11 to 13.
        let mut d = snapshot(13, &[(0, 400, 40, 360)]);
        d.irq_totals = vec![0, 8000];
        load.update(&c, &d, 1.0);
        assert_eq!(load.irq_rate(1), 3000.0);
    }

    #[test]
    fn rates_and_shares_from_two_snapshots() {
        let a = snapshot(10, &[(0, 1000, 10, 90), (1, 0, 0, 100)]);
        let b = snapshot(12, &[(0, 201_000, 110, 90), (1, 0, 0, 300)]);
        let mut load = Load::new();
        load.update(&a, &b, 0.5);
        let cpu0 = load.cpu(0).unwrap();
        assert_eq!(cpu0.processed_pps, 100_000.0);
        assert_eq!(cpu0.net_share, 1.0);
        assert_eq!(cpu0.busy_share, 1.0);
        assert!(cpu0.warm && cpu0.online);
        assert_eq!(load.cpu(1).unwrap().net_share, 0.0);
        assert_eq!(load.interval_secs, 2.0);
    }

    #[test]
    fn softnet_counters_wrap() {
        let a = snapshot(1, &[(0, u32::MAX - 99, 0, 0)]);
        let b = snapshot(2, &[(0, 100, 0, 100)]);
        let mut load = Load::new();
        load.update(&a, &b, 1.0);
        assert_eq!(load.cpu(0).unwrap().processed_pps, 200.0);
    }

    #[test]
    fn intr_totals_wrap_at_32_bits_and_resets_give_no_rate() {
        let mut a = snapshot(1, &[]);
        let mut b = snapshot(2, &[]);
        a.irq_totals = vec![u64::from(u32::MAX) - 9, 5_000_000_000, 7];
        b.irq_totals = vec![10, 4, 17];
        let mut load = Load::new();
        load.update(&a, &b, 1.0);
        assert_eq!(load.irq_rate(0), 20.0);
        assert_eq!(load.irq_rate(1), 0.0);
        assert_eq!(load.irq_rate(2), 10.0);
        assert_eq!(load.irq_rate(99), 0.0);
    }

    #[test]
    fn receive_work_rises_at_once_and_falls_smoothed() {
        let mut load = Load::new();
        let s = [
            snapshot(0, &[(0, 0, 0, 0)]),
            snapshot(1, &[(0, 100, 0, 100)]),
            snapshot(2, &[(0, 400, 0, 200)]),
            snapshot(3, &[(0, 500, 0, 300)]),
        ];
        load.update(&s[0], &s[1], 0.5);
        load.update(&s[1], &s[2], 0.5);
        assert_eq!(load.cpu(0).unwrap().processed_pps, 300.0, "a rise at once");
        load.update(&s[2], &s[3], 0.5);
        assert_eq!(
            load.cpu(0).unwrap().processed_pps,
            200.0,
            "a fall weighted by the smoothing: 300 + 0.5 * (100 - 300)"
        );
    }

    #[test]
    fn hot_plug_adds_and_removes_cpus() {
        let mut load = Load::new();
        let a = snapshot(0, &[(0, 0, 0, 0)]);
        let b = snapshot(1, &[(0, 50, 0, 100), (3, 1_000_000, 0, 100)]);
        load.update(&a, &b, 1.0);
        let cpu3 = load.cpu(3).unwrap();
        assert!(cpu3.online && !cpu3.warm, "no rate from one sample");
        assert_eq!(cpu3.processed_pps, 0.0);
        assert!(!load.cpu(1).unwrap().online);
        let c = snapshot(2, &[(0, 150, 0, 200), (3, 1_000_010, 0, 200)]);
        load.update(&b, &c, 1.0);
        assert_eq!(load.cpu(3).unwrap().processed_pps, 10.0);
        let d = snapshot(3, &[(3, 1_000_020, 0, 300)]);
        load.update(&c, &d, 1.0);
        assert_eq!(
            *load.cpu(0).unwrap(),
            CpuLoad::default(),
            "offline CPU is idle"
        );
    }

    #[test]
    fn distress_is_the_raw_last_interval() {
        let mut a = snapshot(0, &[(0, 0, 0, 0)]);
        let mut b = snapshot(1, &[(0, 0, 0, 100)]);
        a.softnet[0].dropped = 10;
        b.softnet[0].dropped = 60;
        b.softnet[0].time_squeeze = 7;
        let mut load = Load::new();
        load.update(&a, &b, 0.1);
        let cpu = load.cpu(0).unwrap();
        assert_eq!(cpu.dropped_per_sec, 50.0);
        assert!(cpu.in_distress(1.0, 50.0));
        assert!(!cpu.in_distress(100.0, 50.0));
    }

    fn queue(device: &str, queue: u32, packets: u64) -> QueueCounters {
        QueueCounters {
            device: device.to_string(),
            direction: QueueDirection::Rx,
            queue,
            packets,
            bytes: None,
        }
    }

    #[test]
    fn queue_rates_and_resets() {
        let mut a = snapshot(0, &[]);
        let mut b = snapshot(1, &[]);
        a.queues = vec![queue("eth0", 0, 100), queue("eth0", 1, 500)];
        b.queues = vec![queue("eth0", 0, 1100), queue("eth0", 1, 10)];
        let mut load = Load::new();
        load.update(&a, &b, 1.0);
        assert_eq!(load.rx_queue_pps("eth0", 0), Some(1000.0));
        assert_eq!(load.rx_queue_pps("eth0", 1), None, "a reset gives no rate");
        let c = snapshot(2, &[]);
        load.update(&b, &c, 1.0);
        assert_eq!(
            load.rx_queue_pps("eth0", 0),
            None,
            "a vanished device has no rate"
        );
    }

    /// Fuzzing finding: a queue number no kernel can have (here u32::MAX, as from a
    /// driver stat `rx_queue_4294967295_packets`) sized the per-queue tables: a 64 GiB
    /// allocation and an abort. Now such a queue is skipped.
    #[test]
    fn regression_huge_queue_number_does_not_size_tables() {
        let mut a = snapshot(0, &[]);
        let mut b = snapshot(1, &[]);
        a.queues = vec![queue("eth0", 0, 100), queue("eth0", u32::MAX, 5)];
        b.queues = vec![queue("eth0", 0, 200), queue("eth0", u32::MAX, 10)];
        let mut load = Load::new();
        load.update(&a, &b, 1.0);
        assert_eq!(load.rx_queue_pps("eth0", 0), Some(100.0));
        assert_eq!(load.rx_queue_pps("eth0", u32::MAX), None);
    }

    #[test]
    fn attribution_splits_processed_by_interrupt_rate() {
        let mut a = snapshot(0, &[(0, 0, 0, 0), (1, 0, 0, 0)]);
        let mut b = snapshot(1, &[(0, 9000, 0, 100), (1, 5000, 0, 100)]);
        a.irq_totals = vec![0; 40];
        b.irq_totals = vec![0; 40];
        b.irq_totals[30] = 300;
        b.irq_totals[31] = 100;
        b.irq_totals[32] = 50;
        a.queues = vec![queue("eth1", 0, 0)];
        b.queues = vec![queue("eth1", 0, 1000)];
        let mut load = Load::new();
        load.update(&a, &b, 1.0);
        let vectors = [
            QueueVector {
                device: "eth0",
                queue: 0,
                irq: 30,
                cpu: 0,
            },
            QueueVector {
                device: "eth0",
                queue: 1,
                irq: 31,
                cpu: 0,
            },
            QueueVector {
                device: "eth1",
                queue: 0,
                irq: 32,
                cpu: 0,
            },
            QueueVector {
                device: "eth0",
                queue: 2,
                irq: 33,
                cpu: 1,
            },
        ];
        let pps = load.attribute(&vectors);
        // CPU 0: 9000 processed, 1000 measured on eth1, 8000 split 3:1.
        assert_eq!(pps, vec![6000.0, 2000.0, 1000.0, 5000.0]);
    }
}
