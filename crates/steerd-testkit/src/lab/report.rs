//! Turns a guest's console into the figures of one run (`Metrics`, `analyse`). The console
//! itself is read in `parse` (tc's qdisc statistics in `qdisc`), the threaded-NAPI figures
//! are worked out in `threaded`, and the side-by-side tables and their verdicts (medians
//! over repetitions) are in `tables`, re-exported here.

pub mod first_interrupt;
mod parse;
mod qdisc;
mod tables;
mod threaded;

pub(crate) use tables::restored_verdict;
pub use tables::{median, table, threaded_table, verdicts};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::run::RawRun;
use super::scenario::Scenario;
use parse::{
    GuestSample, hottest_share, irq_cpu, parse, queue_vector, receive_cpus, run_packets,
    rx_threads, single_cpu, softirq_shares, table_line, vector_and_rps_cpus, vector_kind,
};
use threaded::threads;

/// The figures of one run.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Seconds from the reference (balancer start, or the burst after an idle spell) to
    /// the first change of a NIC vector's affinity or an RPS mask.
    pub first_change: Option<f64>,
    /// Changes while idle (before the burst), in scenarios with an idle spell.
    pub idle_changes: usize,
    /// Seconds from the same reference to the daemon's first applied write of a vector's
    /// affinity, an RPS mask or a NAPI thread's CPUs, from its log's wall-clock times
    /// (`lab::guest_clock`): when the change was made, where `first_change` is when a
    /// sample saw it (samples can be seconds apart on a saturated guest). steerd only.
    pub first_write: Option<f64>,
    /// Seconds from the same reference to the daemon's `steerd started` line (its set-up
    /// done): in a saturated TCG guest starting the process alone took 1.5 s (CI at
    /// d2d04a0).
    pub daemon_started: Option<f64>,
    /// Seconds from the first sample in which a CPU's irq+softirq share reached steerd's
    /// high watermark (0.6) to the next change of a NIC value: how fast relief starts. A
    /// sample that saw it, or the daemon's log where that says it wrote one earlier: an RPS
    /// trial undone on harm within half a second can be on and off between two samples.
    pub first_relief: Option<f64>,
    /// What steerd's checks of its queue vector moves found (`took_effect`, `no_effect`,
    /// `took_effect_late`, `unknown`; `pending_` before the result for a placement it
    /// found pending at discovery), counted from its log.
    pub move_checks: BTreeMap<String, usize>,
    /// CPUs the input vectors fired on in the steady window.
    pub input_cpus: usize,
    /// Input vectors that fired in the steady window (each more than 2 % of all input
    /// interrupts, as for `input_cpus`): a queue the NIC sends no flow to has none.
    pub input_vectors: usize,
    /// The busiest CPU's share of softnet `processed` in the steady window.
    pub busiest_processed: f64,
    /// The highest irq+softirq share of a CPU's time in the steady window.
    pub busiest_softirq: f64,
    /// Every CPU's irq+softirq share in the steady window, by CPU.
    pub softirq_shares: Vec<f64>,
    /// UDP datagrams the guest's stack received (`InDatagrams + NoPorts + InErrors`).
    pub udp_received: Option<u64>,
    /// UDP datagrams the sender handed to its sockets (sent or refused): what was offered
    /// in fact. Every one of them the guest did not receive was lost somewhere on the way,
    /// counted (softnet, tap, the NIC) or not (the host's qdisc, a full emulated ring).
    pub udp_sent: Option<u64>,
    /// Packets the guest's NIC reported losing over the run (`rx_missed_errors`,
    /// `rx_fifo_errors`, `rx_over_errors`; not `rx_dropped`, to which the kernel adds its
    /// backlog drops).
    pub nic_dropped: Option<u64>,
    /// Value changes over the run by lever: `irq` (a vector's affinity), `rps` (a
    /// receive queue's mask), `napi` (a NAPI thread's allowed CPUs), from the samples;
    /// `rss` (the NIC's RSS table) from the balancer's log, its applied table writes
    /// ([`rss_table_writes`]): the guest reads the table in the RSS scenarios only.
    pub changes_by_lever: BTreeMap<String, usize>,
    /// Packets processed per second in the steady window (all CPUs).
    pub processed_pps: f64,
    /// UDP datagrams the guest's stack received per datagram sent.
    pub delivered: Option<f64>,
    /// softnet drops over the run, and the tap's.
    pub softnet_dropped: u64,
    pub tap_dropped: u64,
    /// Value changes between samples in the steady window.
    pub late_changes: usize,
    /// All value changes during the run.
    pub changes: usize,
    /// The daemon's CPU seconds and peak RSS (MB), when there is a daemon.
    pub daemon_cpu_s: Option<f64>,
    pub daemon_rss_mb: Option<f64>,
    pub restored: bool,
    pub diffs: Vec<String>,
    /// Seconds after each timed event until every input vector is pinned to one online CPU.
    pub settle: Option<f64>,
    /// Daemon log lines that mention managed IRQs.
    pub managed_lines: usize,
    pub log: Vec<String>,
    /// The guest kernel's release (`uname -r`).
    pub kernel: Option<String>,
    /// Receive NAPI threads seen (threaded NAPI), and transmit ones.
    pub rx_threads: usize,
    pub tx_threads: usize,
    /// Seconds from the balancer's start until every receive NAPI thread is allowed on
    /// exactly the CPU its queue's input IRQ fires on, and stays so to the end of the run;
    /// `None`: never.
    pub threads_pinned: Option<f64>,
    /// Seconds from the balancer's start to the last sample in which a receive thread was
    /// not on its queue's IRQ CPU (the moment of pinning lies between this and
    /// `threads_pinned`; samples can be seconds apart under traffic on a loaded host).
    pub threads_unpinned_last: Option<f64>,
    /// In the steady window: the share of (sample, receive thread) pairs whose thread last
    /// ran on another CPU than its queue's input IRQ.
    pub threads_off_irq_cpu: Option<f64>,
    /// Over the run, by rx queue: its share of the packets received (`ethtool -S`), and the
    /// share of run ticks of the receive thread mapped to it.
    pub queue_packet_shares: Vec<f64>,
    pub thread_tick_shares: Vec<f64>,
    /// The correlation of the two, and whether it is at least 0.8 (a check of the mapping
    /// rule; 6.1's `ethtool -S` has the per-queue packets, 6.12's does not).
    pub mapping_correlation: Option<f64>,
    pub mapping_agrees: Option<bool>,
    /// Whether every queue-to-thread pair steerd logged is the mapping rule's.
    pub mapping_daemon_agrees: Option<bool>,
    /// The CPU that took most input interrupts in the steady window (the IRQ CPU of the
    /// busiest queue), and its share of softnet `processed` there.
    pub irq_cpu: Option<u32>,
    pub irq_cpu_processed: Option<f64>,
    /// The receive queues' RPS masks at the end of the run (`rps_cpus`, queue order).
    pub rps_masks: Vec<String>,
    /// The input vectors' `smp_affinity_list` at the end of the run, by IRQ number.
    pub input_masks: Vec<String>,
    /// Queues that stopped receiving mid-run while the others went on: the lab's fault
    /// (`lab::queue_stall`; scenarios with `rss_watch` or `queue_watch`, where queues are
    /// sampled).
    pub queue_stalls: Vec<super::queue_stall::Stall>,
    /// Input vectors whose first interrupt in the traffic arrived outside their mask, so
    /// their queue's work stayed where no placement put it (`report::first_interrupt`).
    pub first_interrupts_off_mask: Vec<first_interrupt::OffMask>,
    /// The RSS lever's figures (scenarios with `rss_watch`).
    pub rss: Option<super::rss::RssFigures>,
    /// Packets each rx queue received from the balancer's start to the end (`ethtool -S`;
    /// empty where the driver has no per-queue counters).
    pub queue_run_packets: Vec<u64>,
    /// The NIC's RSS table at the start and at the end of the run (`ethtool -x`'s entries
    /// and key; `None` where it has none).
    pub rss_table_start: Option<String>,
    pub rss_table_end: Option<String>,
    /// The cgroup scenarios' figures (`lab/isolation.rs`).
    pub partition: Option<super::isolation::PartitionFigures>,
    /// The transmit steering scenario's figures (`lab/xps.rs`).
    pub xps: Option<super::xps::XpsFigures>,
    /// The busy-polling thread scenario's figures (`lab/busy_poll.rs`).
    pub busy_poll: Option<super::busy_poll::BusyPollFigures>,
    /// The longest time between two of the guest's samples, and the guest uptime at which
    /// it ended: a guest kernel that stalled under the host's load (see [`STALLED_SECS`]).
    pub longest_sample_gap: Option<(f64, f64)>,
    /// The median time between two of the guest's samples: the resolution of every time
    /// the lab takes from samples (asked every 0.5 s or less; a saturated guest on a slow
    /// host printed them 0.9 s apart, 2026-11-29).
    pub median_sample_gap: Option<f64>,
    /// CPUs online in the first and in the last sample (their `cpu` rows of `proc/stat`):
    /// whether a scenario that takes CPUs offline ended with them back.
    pub online_cpus: Option<(usize, usize)>,
}

/// The guest uptimes of the daemon's applied placement writes ([`is_placement_write`]), in
/// log order; none without the `LAB WALL` pair.
fn placement_writes(log: &[String], wall: Option<super::guest_clock::WallAt>) -> Vec<f64> {
    let Some(wall) = wall else {
        return Vec::new();
    };
    log.iter()
        .filter(|l| is_placement_write(l))
        .filter_map(|l| wall.uptime_of(l))
        .collect()
}

/// The knob of a daemon log line that reports an applied write (`irq 27 affinity` in
/// `... INFO irq 27 affinity: 0 -> 2 (...) applied ...`), or `None` for any other line.
fn applied_knob(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once(" INFO ")?;
    rest.contains(") applied")
        .then(|| rest.split(": ").next())
        .flatten()
}

/// Whether a daemon log line is an applied write of what `first_change` counts: a vector's
/// affinity (`irq 27 affinity: 0 -> 2 (...) applied`), an RPS mask, a NAPI thread's CPUs.
fn is_placement_write(line: &str) -> bool {
    applied_knob(line).is_some_and(|knob| {
        (knob.starts_with("irq ") && knob.ends_with(" affinity"))
            || knob.ends_with(" rps_cpus")
            || (knob.starts_with("napi/") && knob.ends_with(" affinity"))
    })
}

/// Whether a daemon log line is an applied write of an RPS mask (`eth0 rx-0 rps_cpus: none
/// -> 0-3 (rps_on: ...) applied`).
fn is_rps_write(line: &str) -> bool {
    applied_knob(line).is_some_and(|knob| knob.ends_with(" rps_cpus"))
}

/// Whether a daemon log line is an applied write of a NIC's RSS table (`eth0 rss
/// indirection: 0 1 -> 0 1 2 3 (rss_step: ...) applied`). Only steerd logs them;
/// irqbalance never writes the table.
pub(super) fn is_table_write(line: &str) -> bool {
    applied_knob(line).is_some_and(|knob| knob.ends_with(" rss indirection"))
}

/// How many RSS table writes a daemon log reports applied.
fn rss_table_writes(log: &[String]) -> usize {
    log.iter().filter(|l| is_table_write(l)).count()
}

/// A gap between two samples at least this long is the guest stalling, not the balancer:
/// the guest samples every [`Scenario`]'s period (0.5 s by default) plus the time a sample
/// takes (0.7-1.2 s apart in six saturated runs, 2026-11-28). In
/// CI at 4f7679a, `rss-elephant`'s guest printed no sample
/// from 17 s to 49 s, and another guest (`doctor-udp`, no balancer running) reported a
/// soft lockup of `kworker/0:1` for 26 s and more under TCG on the loaded host.
pub const STALLED_SECS: f64 = 15.0;

impl Metrics {
    /// The daemon log lines of the run that are warnings or errors (steerd's format:
    /// `... WARN ...`, `... ERROR ...`): issue 31's "no warning per tick" is this count
    /// staying small over a run of some 30 ticks.
    pub fn warnings(&self) -> usize {
        self.log
            .iter()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .count()
    }

    /// The earlier of when a sample saw the first change and when the daemon's log says it
    /// made it: the first change, as exact as the guest's clock where the log has it.
    pub fn first_change_made(&self) -> Option<f64> {
        match (self.first_change, self.first_write) {
            (Some(seen), Some(made)) => Some(seen.min(made)),
            (seen, made) => seen.or(made),
        }
    }

    /// Whether fewer CPUs were online in the last sample than in the first: a scenario
    /// that took CPUs offline ended before they were all back.
    pub fn ended_with_cpus_offline(&self) -> bool {
        self.online_cpus.is_some_and(|(first, last)| last < first)
    }

    /// Why the run measured a stalled guest rather than the balancer: a gap of at least
    /// [`STALLED_SECS`] between two samples. `None` for a sound run.
    pub fn guest_stalled(&self) -> Option<String> {
        let (gap, at) = self.longest_sample_gap?;
        (gap >= STALLED_SECS).then(|| {
            format!("the guest printed no sample for {gap:.1} s (up to uptime {at:.1} s): a stalled guest")
        })
    }

    /// Receive queues that got less than a quarter of an even share of the run's packets:
    /// queues the hash or the table stopped feeding (igb's silent queues, docs/lab.md).
    pub fn silent_queues(&self) -> Option<usize> {
        let total: u64 = self.queue_run_packets.iter().sum();
        let n = self.queue_run_packets.len() as u64;
        (n > 1 && total > 0).then(|| {
            self.queue_run_packets
                .iter()
                .filter(|&&p| p * n * 4 < total)
                .count()
        })
    }
}

/// steerd's built-in high watermark: the irq+softirq share from which a CPU is hot.
pub const HOT_SHARE: f64 = 0.6;

/// steerd's applied `rps_cpus` writes for `reason` (`rps_on`, `rps_undo`, ...), from its
/// log lines ("eth0 rx-1 rps_cpus: A -> B (REASON: ...) applied ...").
pub fn rps_writes<'a>(log: &'a [String], reason: &str) -> impl Iterator<Item = &'a String> {
    let tag = format!("({reason}: ");
    log.iter()
        .filter(move |l| l.contains(" rps_cpus: ") && l.contains(&tag) && l.contains(" applied "))
}

/// steerd's verdicts on its queue vector moves, by result, from its log lines (the
/// `result` field of its "irq N (DEV queue Q): move A -> B ..." lines); those on
/// placements it found pending at discovery (the driver's moves, not its own) are counted
/// apart, as `pending_` and the result.
pub fn move_checks(log: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in log.iter().filter(|l| l.contains("): move ")) {
        let result = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("result="))
            .map(|v| v.trim_matches('"'));
        if let Some(result) = result {
            let key = if line.contains("(found pending at discovery:") {
                format!("pending_{result}")
            } else {
                result.to_string()
            };
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
}

/// The figures of one run of a scenario.
pub fn analyse(s: &Scenario, raw: &RawRun) -> Metrics {
    let (samples, other) = parse(&raw.lines);
    let first = |k: &str| other.get(k).and_then(|v| v.first()).cloned();
    let ready: f64 = first("ready").and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let last = s
        .phases
        .iter()
        .map(|p| (p.start, p.length))
        .max()
        .unwrap_or_default();
    // What a first change answers: the burst after an idle spell, the first event (CPU
    // hot-plug, channels) when the machine starts placed by the driver, else the start.
    let late_start = s
        .events
        .iter()
        .find(|(_, command)| *command == super::saturation::LATE_START);
    // Timed from when the guest ran the event (its `LAB EVENT` line), not from when it was
    // due: the guest's event loop runs it after the sample in progress, 0.5-1.9 s late
    // under load, and a first change timed from when it was due counted that lag as the
    // balancer's (igb on 6.19, `channels`: steerd's placement 0.12 s after it saw the
    // queue set change read as 2.8-3.0 s).
    let events = other.get("event").map_or(&[][..], |v| v);
    let fired_at = |command| super::isolation::event_at(events, command);
    let reference = if let Some((at, command)) = late_start {
        // A balancer started under load: changes are timed from its start.
        fired_at(command).unwrap_or(ready + f64::from(*at))
    } else if last.0 > Duration::from_secs(2) {
        ready + last.0.as_secs_f64()
    } else if let (true, Some((at, command))) = (s.setup.is_empty(), s.events.first()) {
        fired_at(command).unwrap_or(ready + f64::from(*at))
    } else {
        ready
    };
    let end = ready + (last.0 + last.1).as_secs_f64();
    let start = end - s.steady.as_secs_f64();
    let nic_value = |key: &str, sample: &GuestSample| -> bool {
        match key.strip_prefix("irq ") {
            Some(irq) => irq
                .parse()
                .ok()
                .and_then(|irq: u32| sample.interrupts.get(&irq))
                .is_some_and(|(name, _)| vector_kind(name).is_some()),
            None => true,
        }
    };
    let mut m = Metrics {
        tap_dropped: raw.tap_dropped,
        restored: first("restored").as_deref() == Some("yes"),
        diffs: other.get("diff").cloned().unwrap_or_default(),
        log: other.get("log").cloned().unwrap_or_default(),
        ..Metrics::default()
    };
    let hot_at = samples
        .windows(2)
        .find(|pair| pair[1].up >= reference && hottest_share(&pair[0], &pair[1]) >= HOT_SHARE)
        .map(|pair| pair[1].up);
    m.move_checks = move_checks(&m.log);
    let wall = first("wall").and_then(|w| super::guest_clock::WallAt::parse(&w));
    let written = placement_writes(&m.log, wall);
    m.first_write = written.iter().map(|up| up - reference).find(|t| *t >= 0.0);
    m.daemon_started = wall.and_then(|wall| {
        m.log
            .iter()
            .filter(|l| l.contains(" INFO steerd started "))
            .find_map(|l| Some(wall.uptime_of(l)? - reference))
    });
    for pair in samples.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let changed = b
            .values
            .iter()
            .filter(|(k, v)| nic_value(k, b) && a.values.get(*k).is_some_and(|old| old != *v))
            .count();
        if changed == 0 {
            continue;
        }
        m.changes += changed;
        for (k, v) in &b.values {
            if nic_value(k, b) && a.values.get(k).is_some_and(|old| old != v) {
                let lever = k.split(' ').next().unwrap_or(k).to_string();
                *m.changes_by_lever.entry(lever).or_default() += 1;
            }
        }
        if b.up < reference {
            m.idle_changes += changed;
        } else if m.first_change.is_none() {
            m.first_change = Some(b.up - reference);
        }
        if let Some(hot) = hot_at.filter(|&hot| b.up >= hot && m.first_relief.is_none()) {
            m.first_relief = Some(b.up - hot);
        }
        if b.up > start && b.up <= end + 0.5 {
            m.late_changes += changed;
        }
    }
    if let Some(hot) = hot_at
        && let Some(made) = written.iter().find(|&&up| up >= hot)
    {
        let made = made - hot;
        m.first_relief = Some(m.first_relief.map_or(made, |seen| seen.min(made)));
    }
    let table_writes = rss_table_writes(&m.log);
    if table_writes > 0 {
        m.changes_by_lever.insert("rss".into(), table_writes);
    }
    // The daemon's own count of its RPS writes where its log has them: a trial made and
    // undone between two samples (the fast tick of a trial's first decisions undoes
    // plain harm within about half a second) is in no sample.
    let rps_writes = m.log.iter().filter(|l| is_rps_write(l)).count();
    if rps_writes > 0 {
        m.changes_by_lever.insert("rps".into(), rps_writes);
    }
    let window_start = samples.iter().find(|x| x.up >= start);
    let window_end = samples.iter().rev().find(|x| x.up <= end + 0.5);
    if let (Some(a), Some(b)) = (window_start, window_end)
        && b.up > a.up
    {
        let delta =
            |cpu: &u32, now: u64, map: &BTreeMap<u32, (u64, u64)>, pick: fn(&(u64, u64)) -> u64| {
                now.saturating_sub(map.get(cpu).map(pick).unwrap_or(now))
            };
        let processed: Vec<u64> = b
            .softnet
            .iter()
            .map(|(cpu, v)| delta(cpu, v.0, &a.softnet, |x| x.0))
            .collect();
        let total: u64 = processed.iter().sum();
        if total > 0 {
            m.busiest_processed = *processed.iter().max().unwrap_or(&0) as f64 / total as f64;
        }
        m.processed_pps = total as f64 / (b.up - a.up);
        m.softirq_shares = softirq_shares(a, b);
        m.busiest_softirq = m.softirq_shares.iter().copied().fold(0.0, f64::max);
        let mut per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
        let mut per_vector: BTreeMap<u32, u64> = BTreeMap::new();
        for (irq, (name, counts)) in &b.interrupts {
            if vector_kind(name) != Some("input") {
                continue;
            }
            for (cpu, n) in counts {
                let fired = n.saturating_sub(a.interrupts_on(*irq, *cpu));
                *per_cpu.entry(*cpu).or_default() += fired;
                *per_vector.entry(*irq).or_default() += fired;
            }
        }
        let all: u64 = per_cpu.values().sum();
        let counts =
            |of: &BTreeMap<u32, u64>| of.values().filter(|&&n| all > 0 && n * 50 > all).count();
        m.input_cpus = counts(&per_cpu);
        m.input_vectors = counts(&per_vector);
        m.irq_cpu = per_cpu
            .iter()
            .filter(|(_, n)| **n > 0)
            .max_by_key(|(_, n)| **n)
            .map(|(cpu, _)| *cpu);
        if let (Some(cpu), true) = (m.irq_cpu, total > 0) {
            let done = b
                .softnet
                .get(&cpu)
                .map_or(0, |v| delta(&cpu, v.0, &a.softnet, |x| x.0));
            m.irq_cpu_processed = Some(done as f64 / total as f64);
        }
    }
    if let Some(last) = samples.last() {
        m.input_masks = last
            .interrupts
            .iter()
            .filter(|(_, (name, _))| vector_kind(name) == Some("input"))
            .filter_map(|(irq, _)| last.values.get(&format!("irq {irq}")).cloned())
            .collect();
        m.rps_masks = last
            .values
            .iter()
            .filter(|(k, _)| k.starts_with("rps "))
            .map(|(_, v)| v.clone())
            .collect();
    }
    // Each gap between two samples, with the uptime it ended at: the longest, then the
    // median.
    let mut gaps: Vec<(f64, f64)> = samples
        .windows(2)
        .map(|pair| (pair[1].up - pair[0].up, pair[1].up))
        .collect();
    gaps.sort_by(|a, b| a.0.total_cmp(&b.0));
    m.longest_sample_gap = gaps.last().copied();
    m.median_sample_gap = gaps.get(gaps.len() / 2).map(|&(gap, _)| gap);
    m.online_cpus = samples
        .first()
        .zip(samples.last())
        .map(|(a, b)| (a.stat.len(), b.stat.len()));
    if let (Some(a), Some(b)) = (samples.first(), samples.last()) {
        m.softnet_dropped = b
            .softnet
            .iter()
            .map(|(cpu, v)| v.1.saturating_sub(a.softnet.get(cpu).map_or(v.1, |x| x.1)))
            .sum();
    }
    let nic_drops = |k: &str| -> Option<u64> {
        first(k).map(|l| {
            l.split_whitespace()
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
    };
    if let (Some(a), Some(b)) = (nic_drops("nic drops start"), nic_drops("nic drops end")) {
        m.nic_dropped = Some(b.saturating_sub(a));
    }
    // Udp: InDatagrams NoPorts InErrors ... (header line, then values).
    if let Some(snmp) = other.get("snmp") {
        let udp: Vec<&String> = snmp.iter().filter(|l| l.starts_with("Udp:")).collect();
        if let [names, values] = udp[..] {
            let names: Vec<&str> = names.split_whitespace().collect();
            let values: Vec<u64> = values
                .split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse().ok())
                .collect();
            let get = |n: &str| {
                names
                    .iter()
                    .skip(1)
                    .position(|x| *x == n)
                    .and_then(|i| values.get(i))
                    .copied()
                    .unwrap_or(0)
            };
            let received = get("InDatagrams") + get("NoPorts") + get("InErrors");
            m.udp_received = Some(received);
            let attempts = raw.sent.udp_packets + raw.sent.udp_errors;
            m.udp_sent = (attempts > 0).then_some(attempts);
            if raw.sent.udp_packets > 0 {
                m.delivered = Some(received as f64 / raw.sent.udp_packets as f64);
            }
        }
    }
    if let Some(d) = first("daemon") {
        let f: Vec<f64> = d
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if let [ticks, rss_kb] = f[..] {
            m.daemon_cpu_s = Some(ticks / 100.0);
            m.daemon_rss_mb = Some(rss_kb / 1024.0);
        }
    }
    m.managed_lines = m
        .log
        .iter()
        .filter(|l| l.contains("kernel-managed") || l.contains("managed"))
        .count();
    m.settle = settle(&samples, events);
    m.kernel = first("kernel");
    let queues = other.get("queue").cloned().unwrap_or_default();
    m.queue_run_packets = run_packets(other.get("queue start").map_or(&[][..], |v| v), &queues);
    m.rss_table_start = table_line(other.get("table before"));
    m.rss_table_end = table_line(other.get("table after"));
    if super::xps::is_xps(s)
        && let Some(last) = samples.last()
    {
        let mut queues: BTreeMap<u32, super::xps::QueueSides> = BTreeMap::new();
        for (irq, (name, _)) in &last.interrupts {
            if let Some((kind, queue)) = queue_vector(name) {
                let sides = queues.entry(queue).or_default();
                match kind {
                    "input" => sides.rx_cpu = irq_cpu(last, *irq),
                    _ => sides.tx_cpu = irq_cpu(last, *irq),
                }
            }
        }
        for (queue, mask) in &last.xps {
            queues.entry(*queue).or_default().xps =
                Some(super::isolation::cpus_of(mask, true).into_iter().collect());
        }
        let list = |key: &str| other.get(key).cloned().unwrap_or_default();
        m.xps = Some(super::xps::figures(
            &queues,
            run_packets(&list("tx start"), &list("tx end")),
            qdisc::run_requeues(&list("qdisc start"), &list("qdisc end")),
        ));
    }
    if super::isolation::is_cgroup(s) {
        let timeline = |effective| -> Vec<(f64, BTreeSet<u32>)> {
            samples
                .iter()
                .map(|x| (x.up, receive_cpus(x, effective)))
                .collect()
        };
        let quiet = other.get("quiet").cloned().unwrap_or_default();
        let mut figures =
            super::isolation::figures(&timeline(false), events, first("partition"), quiet);
        figures.emptied_effective =
            super::isolation::figures(&timeline(true), events, None, Vec::new()).emptied;
        m.partition = Some(figures);
    }
    if super::busy_poll::is_busy_poll(s) {
        // Queue 0's thread busy-polls; every other receive thread is the balancer's.
        let mut timeline: Vec<(f64, BTreeSet<u32>)> = Vec::new();
        let mut thread_masks: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for x in &samples {
            let mut cpus = vector_and_rps_cpus(x, false);
            for (queue, pid) in rx_threads(x) {
                let Some(thread) = x.threads.get(&pid) else {
                    continue;
                };
                if queue == 0 {
                    thread_masks
                        .entry(queue)
                        .or_default()
                        .push(thread.allowed.clone());
                } else {
                    cpus.extend(super::isolation::cpus_of(&thread.allowed, false));
                }
            }
            timeline.push((x.up, cpus));
        }
        let mut figures = super::busy_poll::figures(&timeline, &thread_masks, events);
        let sampled: Vec<f64> = timeline.iter().map(|(up, _)| *up).collect();
        figures.emptied_made = super::busy_poll::emptied_made(&figures, events, &sampled, &written);
        m.busy_poll = Some(figures);
    }
    threads(&mut m, &samples, &queues, ready, start, end);
    let traffic = ready + s.phases.first().map_or(0.0, |p| p.start.as_secs_f64());
    let (counts, tables) = queue_samples(&samples);
    m.first_interrupts_off_mask = first_interrupt::off_mask(&samples, traffic);
    if s.samples_queues() {
        m.queue_stalls = super::queue_stall::stalls(&counts, &tables, (traffic, f64::INFINITY));
    }
    if s.rss_watch {
        m.rss = Some(super::rss::figures(
            &counts,
            &tables,
            &other,
            traffic,
            (start, end),
        ));
    }
    m
}

/// Each sample's uptime with its per-queue packet counts (`QS`), and with the RSS table
/// (`X`), for the samples that carry them (scenarios with `rss_watch` or `queue_watch`).
fn queue_samples(samples: &[GuestSample]) -> QueueSamples {
    let counts = samples
        .iter()
        .filter_map(|x| Some((x.up, x.queue_packets.clone()?)))
        .filter(|(_, q)| !q.is_empty())
        .collect();
    let tables = samples
        .iter()
        .filter_map(|x| Some((x.up, x.table.clone()?)))
        .collect();
    (counts, tables)
}

/// Per-queue counts and RSS tables by sample uptime ([`queue_samples`]).
type QueueSamples = (Vec<(f64, Vec<u64>)>, Vec<(f64, Vec<u32>)>);

/// The longest time after a timed event until every NIC input vector is pinned to a
/// single online CPU. Events that only look (`run_doctor`) change nothing to settle after.
fn settle(samples: &[GuestSample], events: &[String]) -> Option<f64> {
    let changes: Vec<&String> = events
        .iter()
        .filter(|e| e.split_whitespace().nth(1) != Some("run_doctor"))
        .collect();
    if changes.is_empty() {
        return None;
    }
    let mut worst: Option<f64> = None;
    for event in changes {
        let at: f64 = event.split_whitespace().next()?.parse().ok()?;
        let ok = samples.iter().filter(|x| x.up > at + 0.2).find(|x| {
            let online: BTreeSet<u32> = x.stat.keys().copied().collect();
            x.values.iter().all(|(k, v)| {
                let Some(irq) = k.strip_prefix("irq ").and_then(|i| i.parse::<u32>().ok()) else {
                    return true;
                };
                match x.interrupts.get(&irq) {
                    Some((name, _)) if vector_kind(name) == Some("input") => {
                        single_cpu(v).is_some_and(|c| online.contains(&c))
                    }
                    _ => true,
                }
            })
        });
        let took = ok.map_or(f64::INFINITY, |x| x.up - at);
        worst = Some(worst.map_or(took, |w: f64| w.max(took)));
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::scenario;
    use crate::lab::traffic::Sent;

    fn console(uptimes: &[f64]) -> RawRun {
        RawRun {
            lines: uptimes
                .iter()
                .flat_map(|up| [format!("S {up}"), "E".to_string()])
                .collect(),
            sent: Sent::default(),
            tap_dropped: 0,
        }
    }

    /// CI at 4f7679a: `rss-elephant`'s samples stopped from 17 s to 49 s of uptime.
    #[test]
    fn a_guest_that_printed_no_sample_for_half_a_minute_stalled() {
        let s = scenario::named("sat-defaults", Duration::from_secs(30))
            .expect("sat-defaults is a scenario");
        let sound = analyse(&s, &console(&[16.0, 16.5, 17.2, 19.9, 20.4]));
        let (gap, at) = sound.longest_sample_gap.expect("a gap");
        assert!((gap - 2.7).abs() < 1e-9 && at == 19.9, "{gap} at {at}");
        assert_eq!(sound.guest_stalled(), None);
        let stalled = analyse(&s, &console(&[16.0, 16.5, 17.0, 49.0, 49.5]));
        let why = stalled.guest_stalled().expect("a stall");
        assert!(why.contains("32.0 s") && why.contains("49.0"), "{why}");
        assert_eq!(analyse(&s, &console(&[16.0])).guest_stalled(), None);
    }

    /// CI at bfdf58e: `sat-cpu0`'s first change read 2.52 s from the samples of a
    /// saturated guest, while steerd's log had its first move about a second after its
    /// start. The log's time is set on the samples' clock by `LAB WALL`.
    #[test]
    fn the_first_write_is_timed_from_the_daemons_log() {
        let s = scenario::named("cpu0", Duration::from_secs(30)).expect("cpu0 is a scenario");
        let mut raw = console(&[10.0, 10.5, 13.0]);
        raw.lines.extend(
            [
                "LAB READY 10.0",
                // 1795860140 is 2026-11-28T10:02:20Z.
                "LAB WALL 9.9 10.1 1795860140.000000",
                "LOG 2026-11-28T10:02:20.500000Z  INFO steerd started devices=2",
                "LOG 2026-11-28T10:02:21.030000Z  INFO eth0 rx-2 rps_flow_cnt: 0 -> 8192 (rfs_on: x) applied serves=\"\"",
                "LOG 2026-11-28T10:02:21.100000Z  INFO irq 27 affinity: 0 -> 2 (stacked_vectors: x) applied serves=\"eth0 rx-1\"",
            ]
            .map(String::from),
        );
        let m = analyse(&s, &raw);
        let made = m.first_write.expect("a write");
        assert!((made - 1.1).abs() < 1e-6, "{made}");
        assert_eq!(m.first_change_made(), Some(made));
        let started = m.daemon_started.expect("started");
        assert!((started - 0.5).abs() < 1e-6, "{started}");
        assert!(!is_placement_write(
            "2026-11-28T10:02:21Z  INFO irq 27 affinity: 0 -> 2 (x) failed: gone"
        ));
        assert!(is_placement_write(
            "2026-11-28T10:02:21Z  INFO napi/eth0-8193 (pid 301) affinity: 0-3 -> 1 (napi_thread: x) applied"
        ));
        let table = "2026-11-28T10:02:03.1Z  INFO eth0 rss indirection: 0 1 -> 0 1 2 3 (rss_step: x) applied serves=\"\"";
        let note = "2026-11-28T10:02:20.4Z  INFO policy note (external_change): eth0 rss indirection: steerd wrote 0 1 2 3, now 0 1: changed by someone else; left alone";
        assert_eq!(rss_table_writes(&[table.into(), note.into()]), 1);
    }

    /// virtio-net 6.19, `sat-elephant` (2026-11-30): with a trial's first decisions at the
    /// fast tick, an RPS trial made at 3.4 s was undone before the next sample, and the
    /// run read no change and no relief. The log's writes count.
    #[test]
    fn an_rps_trial_between_two_samples_is_relief_and_counted() {
        let s =
            scenario::named("sat-cpu0", Duration::from_secs(30)).expect("sat-cpu0 is a scenario");
        // CPU 0's irq+softirq: 0 from 10.0 to 10.5, then all of its time.
        let cpu = |softirq: u64, idle: u64| format!("C cpu0 0 0 0 {idle} 0 0 {softirq} 0");
        let mut raw = RawRun {
            lines: [
                ("S 10.0", cpu(0, 100)),
                ("S 10.5", cpu(0, 150)),
                ("S 11.0", cpu(50, 150)),
                ("S 13.0", cpu(250, 150)),
            ]
            .into_iter()
            .flat_map(|(s, c)| [s.to_string(), c, "E".to_string()])
            .collect(),
            sent: Sent::default(),
            tap_dropped: 0,
        };
        raw.lines.extend(
            [
                "LAB READY 10.0",
                // 1795860140 is 2026-11-28T10:02:20Z, at uptime 10.0.
                "LAB WALL 9.9 10.1 1795860140.000000",
                "LOG 2026-11-28T10:02:21.200000Z  INFO eth0 rx-0 rps_cpus: none -> 0-3 (rps_on: x) applied serves=\"\"",
                "LOG 2026-11-28T10:02:21.700000Z  INFO eth0 rx-0 rps_cpus: 0-3 -> none (rps_undo: x) applied serves=\"\"",
            ]
            .map(String::from),
        );
        let m = analyse(&s, &raw);
        assert_eq!(m.first_change, None, "no sample saw it");
        let relief = m.first_relief.expect("relief from the log");
        // Hot in the sample at 11.0 (its interval's share 1.0); written at 11.2.
        assert!((relief - 0.2).abs() < 1e-6, "{relief}");
        assert_eq!(m.changes_by_lever.get("rps"), Some(&2));
        assert!(!is_rps_write(
            "2026-11-28T10:02:21Z  INFO irq 27 affinity: 0 -> 2 (x) applied"
        ));
    }

    /// igb on 6.19, `channels` (2026-11-30): the guest ran `ethtool -L` 1.25 s after it
    /// was due, and steerd placed the new queues 0.12 s after it saw them; timed from when
    /// the event was due, its first change read 2.6-3.0 s.
    #[test]
    fn an_event_scenarios_first_change_is_timed_from_when_the_event_ran() {
        let s =
            scenario::named("channels", Duration::from_secs(30)).expect("channels is a scenario");
        let due = 5.76 + 10.0;
        let mut raw = console(&[15.0, 16.0, 17.5, 18.4]);
        raw.lines.extend(
            [
                "LAB READY 5.76",
                "LAB EVENT 17.01 ethtool -L eth0 combined 2",
                "LAB EVENT 24.43 ethtool -L eth0 combined 4",
                // 1796020781 is 2026-11-30T06:39:41Z, at uptime 5.77.
                "LAB WALL 5.76 5.78 1796020781.000000",
                "LOG 2026-11-30T06:39:53.600000Z  INFO irq 25 affinity: 0-3 -> 3 (unpinned: x) applied serves=\"eth0 rx-0\"",
            ]
            .map(String::from),
        );
        let m = analyse(&s, &raw);
        let made = m.first_write.expect("a write");
        // 06:39:53.6 is uptime 5.77 + 12.6 = 18.37: 1.36 s after the event ran.
        assert!((made - 1.36).abs() < 0.02, "{made}, due at {due}");
        assert_eq!(
            crate::lab::isolation::event_at(&["17.01 ethtool -L x".into()], "ethtool -L y"),
            None
        );
    }

    /// Two real `sat-skew` consoles at 400 rules on QEMU 7.2 (2026-11-29, no balancer;
    /// their samples' `S`, `QS` and `E` lines and the first `X`): in one, rx-0 received
    /// nothing from 29 s to the end while rx-1 went on; the other ran sound to the end.
    #[test]
    fn a_real_stalled_queue_is_found_and_a_sound_run_has_none() {
        let stalls = |text: &str| {
            let lines: Vec<String> = text.lines().map(String::from).collect();
            let (samples, _) = parse::parse(&lines);
            let (counts, tables) = queue_samples(&samples);
            super::super::queue_stall::stalls(&counts, &tables, (12.0, f64::INFINITY))
        };
        let stalled = stalls(include_str!("report/sat-skew-stalled.console"));
        assert_eq!(stalled.len(), 1, "{stalled:?}");
        assert_eq!(stalled[0].queue, 0);
        assert!((27.0..31.0).contains(&stalled[0].from), "{stalled:?}");
        assert!(stalled[0].secs > 20.0, "{stalled:?}");
        let sound = stalls(include_str!("report/sat-skew-sound.console"));
        assert!(sound.is_empty(), "{sound:?}");
    }
}
