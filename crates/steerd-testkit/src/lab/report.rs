//! Turns a guest's console into the figures of the side-by-side table, and the table
//! itself (medians over repetitions).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use super::run::RawRun;
use super::scenario::Scenario;

/// One sample of the guest's counters.
#[derive(Debug, Default, Clone)]
struct GuestSample {
    up: f64,
    /// By CPU id: processed, dropped.
    softnet: BTreeMap<u32, (u64, u64)>,
    /// By CPU id: irq+softirq ticks, all ticks.
    stat: BTreeMap<u32, (u64, u64)>,
    /// Column CPU ids of `/proc/interrupts`.
    columns: Vec<u32>,
    /// By IRQ: name and per-CPU counts.
    interrupts: BTreeMap<u32, (String, BTreeMap<u32, u64>)>,
    /// By IRQ: smp_affinity_list; by queue: rps_cpus; by NAPI thread (`napi PID`): its
    /// allowed CPUs.
    values: BTreeMap<String, String>,
    /// By IRQ: effective_affinity_list.
    effective: BTreeMap<u32, String>,
    /// By transmit queue: `xps_cpus` (a hex mask).
    xps: BTreeMap<u32, String>,
    /// By pid: every NAPI kernel thread.
    threads: BTreeMap<u32, NapiThread>,
    /// The NIC's rx packets per queue and its RSS table (`QS`, `X`; RSS scenarios only).
    queue_packets: Option<Vec<u64>>,
    table: Option<Vec<u32>>,
}

/// A NAPI kernel thread in one sample (a `T` line).
#[derive(Debug, Default, Clone)]
struct NapiThread {
    /// `napi/eth0-8193`.
    comm: String,
    /// `Cpus_allowed_list` of its status file.
    allowed: String,
    /// The CPU it last ran on (field 39 of its stat file).
    last_cpu: Option<u32>,
    /// Its user+system ticks.
    ticks: Option<u64>,
}

/// The figures of one run.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Seconds from the reference (balancer start, or the burst after an idle spell) to
    /// the first change of a NIC vector's affinity or an RPS mask.
    pub first_change: Option<f64>,
    /// Changes while idle (before the burst), in scenarios with an idle spell.
    pub idle_changes: usize,
    /// Seconds from the first sample in which a CPU's irq+softirq share reached steerd's
    /// high watermark (0.6) to the next change of a NIC value: how fast relief starts.
    pub first_relief: Option<f64>,
    /// What steerd's checks of its queue vector moves found (`took_effect`, `no_effect`,
    /// `took_effect_late`, `unknown`), counted from its log.
    pub move_checks: BTreeMap<String, usize>,
    /// CPUs the input vectors fired on in the steady window.
    pub input_cpus: usize,
    /// The busiest CPU's share of softnet `processed` in the steady window.
    pub busiest_processed: f64,
    /// The highest irq+softirq share of a CPU's time in the steady window.
    pub busiest_softirq: f64,
    /// Every CPU's irq+softirq share in the steady window, by CPU.
    pub softirq_shares: Vec<f64>,
    /// UDP datagrams the guest's stack received (`InDatagrams + NoPorts + InErrors`).
    pub udp_received: Option<u64>,
    /// Value changes over the run by lever: `irq` (a vector's affinity), `rps` (a
    /// receive queue's mask), `napi` (a NAPI thread's allowed CPUs).
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
}

impl Metrics {
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

/// Per-queue counts from `Q`/`QB` (or `TXB`/`TXE`) lines ("queue packets"), in queue order.
fn queue_counts(lines: &[String]) -> BTreeMap<u32, u64> {
    lines
        .iter()
        .filter_map(|l| {
            let (q, p) = l.split_once(' ')?;
            Some((q.parse().ok()?, p.trim().parse().ok()?))
        })
        .collect()
}

/// Packets each queue counted between the `start` and `end` lines, in queue order.
fn run_packets(start: &[String], end: &[String]) -> Vec<u64> {
    let at_start = queue_counts(start);
    queue_counts(end)
        .iter()
        .map(|(q, end)| end.saturating_sub(at_start.get(q).copied().unwrap_or(0)))
        .collect()
}

/// An RSS table line (`XB`/`XA`: "entries... key KEY"), or `None` when the NIC has none.
fn table_line(lines: Option<&Vec<String>>) -> Option<String> {
    let line = lines?.first()?.trim().to_string();
    let entries = line.split(" key").next().unwrap_or_default().trim();
    (!entries.is_empty()).then_some(line)
}

fn parse(lines: &[String]) -> (Vec<GuestSample>, HashMap<&'static str, Vec<String>>) {
    let mut samples = Vec::new();
    let mut cur: Option<GuestSample> = None;
    let mut other: HashMap<&'static str, Vec<String>> = HashMap::new();
    for line in lines {
        let (tag, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let f: Vec<&str> = rest.split_whitespace().collect();
        match tag {
            "S" => {
                cur = Some(GuestSample {
                    up: f.first().and_then(|v| v.parse().ok()).unwrap_or(0.0),
                    ..GuestSample::default()
                })
            }
            "E" => samples.extend(cur.take()),
            "N" => {
                if let Some(s) = cur.as_mut() {
                    let hex = |i: usize| f.get(i).and_then(|v| u64::from_str_radix(v, 16).ok());
                    let cpu = if f.len() >= 13 {
                        hex(12)
                    } else {
                        Some(s.softnet.len() as u64)
                    };
                    if let (Some(cpu), Some(p), Some(d)) = (cpu, hex(0), hex(1)) {
                        s.softnet.insert(cpu as u32, (p, d));
                    }
                }
            }
            "C" => {
                if let Some(s) = cur.as_mut() {
                    let cpu = f
                        .first()
                        .and_then(|c| c.strip_prefix("cpu"))
                        .and_then(|c| c.parse().ok());
                    let n: Vec<u64> = f
                        .iter()
                        .skip(1)
                        .take(8)
                        .filter_map(|v| v.parse().ok())
                        .collect();
                    if let (Some(cpu), true) = (cpu, n.len() == 8) {
                        s.stat.insert(cpu, (n[5] + n[6], n.iter().sum()));
                    }
                }
            }
            "H" => {
                if let Some(s) = cur.as_mut() {
                    s.columns = f
                        .iter()
                        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
                        .collect();
                }
            }
            "I" => {
                if let Some(s) = cur.as_mut() {
                    let irq = f.first().and_then(|v| v.trim_end_matches(':').parse().ok());
                    let counts: BTreeMap<u32, u64> = s
                        .columns
                        .iter()
                        .zip(f.iter().skip(1))
                        .filter_map(|(&cpu, v)| Some((cpu, v.parse().ok()?)))
                        .collect();
                    if let (Some(irq), Some(name)) = (irq, f.last()) {
                        s.interrupts.insert(irq, (name.to_string(), counts));
                    }
                }
            }
            "A" => {
                if let (Some(s), Some(irq), Some(aff)) = (cur.as_mut(), f.first(), f.get(1)) {
                    s.values.insert(format!("irq {irq}"), aff.to_string());
                    if let (Ok(n), Some(eff)) = (irq.parse(), f.get(2)) {
                        s.effective.insert(n, eff.to_string());
                    }
                }
            }
            "T" => {
                if let (Some(s), Some(Ok(pid)), Some(comm), Some(allowed)) = (
                    cur.as_mut(),
                    f.first().map(|p| p.parse()),
                    f.get(1),
                    f.get(2),
                ) {
                    s.values.insert(format!("napi {pid}"), allowed.to_string());
                    s.threads.insert(
                        pid,
                        NapiThread {
                            comm: comm.to_string(),
                            allowed: allowed.to_string(),
                            last_cpu: f.get(3).and_then(|v| v.parse().ok()),
                            ticks: f.get(4).and_then(|v| v.parse().ok()),
                        },
                    );
                }
            }
            "QS" => {
                if let Some(s) = cur.as_mut() {
                    s.queue_packets = Some(f.iter().filter_map(|v| v.parse().ok()).collect());
                }
            }
            "X" => {
                if let Some(s) = cur.as_mut() {
                    s.table = Some(f.iter().filter_map(|v| v.parse().ok()).collect());
                }
            }
            "M" => other.entry("metric").or_default().push(rest.to_string()),
            "XB" => other
                .entry("table before")
                .or_default()
                .push(rest.to_string()),
            "XA" => other
                .entry("table after")
                .or_default()
                .push(rest.to_string()),
            "R" => {
                if let (Some(s), Some(q), Some(mask)) = (cur.as_mut(), f.get(1), f.get(2)) {
                    s.values.insert(format!("rps {q}"), mask.to_string());
                }
            }
            "XP" => {
                if let (Some(s), Some(Ok(q)), Some(mask)) =
                    (cur.as_mut(), f.get(1).map(|q| q.parse()), f.get(2))
                {
                    s.xps.insert(q, mask.to_string());
                }
            }
            "TXB" => other.entry("tx start").or_default().push(rest.to_string()),
            "TXE" => other.entry("tx end").or_default().push(rest.to_string()),
            "LAB" => {
                let (kind, rest) = rest.split_once(' ').unwrap_or((rest, ""));
                let key = match kind {
                    "READY" => "ready",
                    "EVENT" => "event",
                    "DAEMON" => "daemon",
                    "RESTORED" => "restored",
                    "DIFF" => "diff",
                    "KERNEL" => "kernel",
                    "PARTITION" => "partition",
                    "QUIET" => "quiet",
                    _ => continue,
                };
                other.entry(key).or_default().push(rest.to_string());
            }
            "P" => other.entry("snmp").or_default().push(rest.to_string()),
            "Q" => other.entry("queue").or_default().push(rest.to_string()),
            "QB" => other
                .entry("queue start")
                .or_default()
                .push(rest.to_string()),
            "LOG" => other.entry("log").or_default().push(rest.to_string()),
            _ => {}
        }
    }
    (samples, other)
}

/// A NIC queue vector's kind and queue, from its name as each driver gives it: virtio-net
/// `virtio0-input.2` and `virtio0-output.2`, igb `eth0-rx-2` and `eth0-tx-2` (or one
/// `eth0-TxRx-2`), vmxnet3 `eth0-rxtx-2`. A vector that serves a receive queue is `input`,
/// whether or not it also serves the transmit queue beside it: its CPU is where that queue's
/// receive work runs.
fn queue_vector(name: &str) -> Option<(&'static str, u32)> {
    let (_, what) = name.split_once('-')?;
    let (kind, queue) = what.split_once('.').or_else(|| what.split_once('-'))?;
    let kind = match kind {
        "input" | "rx" | "TxRx" | "rxtx" => "input",
        "output" | "tx" => "output",
        _ => return None,
    };
    Some((kind, queue.parse().ok()?))
}

/// A NIC queue vector's kind (`input` or `output`, see `queue_vector`).
fn vector_kind(name: &str) -> Option<&'static str> {
    queue_vector(name).map(|(kind, _)| kind)
}

fn single_cpu(list: &str) -> Option<u32> {
    list.parse().ok()
}

/// The receive NAPI threads of a sample in queue order: (queue, pid).
///
/// The mapping rule: a thread is named `napi/DEV-ID` after its NAPI id. virtio-net adds
/// queue N's receive NAPI (which gets the next id from the kernel's global counter) and
/// then its transmit NAPI (which gets none: transmit NAPIs are not busy-polled, so all of
/// them are `napi/eth0-0`), for N = 0, 1, ..., so the receive ids are consecutive in queue
/// order (8193-8196 for 4 queues) and the Nth smallest id is rx queue N. busybox has no
/// netdev netlink to ask `queue-get` for the id; `mapping_agrees` checks the rule on the
/// traffic.
fn rx_threads(sample: &GuestSample) -> Vec<(u32, u32)> {
    let mut by_id: Vec<(u64, u32)> = sample
        .threads
        .iter()
        .filter_map(|(pid, t)| {
            let id: u64 = t.comm.rsplit_once('-')?.1.parse().ok()?;
            (id != 0).then_some((id, *pid))
        })
        .collect();
    by_id.sort();
    by_id
        .into_iter()
        .enumerate()
        .map(|(q, (_, pid))| (q as u32, pid))
        .collect()
}

/// The input vector of each queue in a sample: queue -> IRQ.
fn input_irqs(sample: &GuestSample) -> BTreeMap<u32, u32> {
    sample
        .interrupts
        .iter()
        .filter_map(|(irq, (name, _))| match queue_vector(name)? {
            ("input", q) => Some((q, *irq)),
            _ => None,
        })
        .collect()
}

/// The CPU an IRQ fires on: its affinity when that is one CPU, else its effective
/// affinity when that is one CPU.
fn irq_cpu(sample: &GuestSample, irq: u32) -> Option<u32> {
    sample
        .values
        .get(&format!("irq {irq}"))
        .and_then(|v| single_cpu(v))
        .or_else(|| sample.effective.get(&irq).and_then(|v| single_cpu(v)))
}

/// The CPUs receive work is placed on in a sample: every receive vector's
/// `smp_affinity_list` (and with `effective`, its `effective_affinity_list`: where the
/// kernel delivers it until a move completes), every receive queue's RPS mask and every
/// receive NAPI thread's allowed CPUs.
fn receive_cpus(sample: &GuestSample, effective: bool) -> BTreeSet<u32> {
    use super::isolation::cpus_of;
    let mut cpus = BTreeSet::new();
    for irq in input_irqs(sample).values() {
        if let Some(list) = sample.values.get(&format!("irq {irq}")) {
            cpus.extend(cpus_of(list, false));
        }
        if let Some(list) = sample.effective.get(irq).filter(|_| effective) {
            cpus.extend(cpus_of(list, false));
        }
    }
    for (key, mask) in &sample.values {
        if key.starts_with("rps ") {
            cpus.extend(cpus_of(mask, true));
        }
    }
    for (_, pid) in rx_threads(sample) {
        if let Some(thread) = sample.threads.get(&pid) {
            cpus.extend(cpus_of(&thread.allowed, false));
        }
    }
    cpus
}

/// Whether every receive NAPI thread of a sample is allowed on exactly its queue's IRQ
/// CPU (false when there are none).
fn threads_on_irq_cpus(sample: &GuestSample) -> bool {
    let rx = rx_threads(sample);
    let inputs = input_irqs(sample);
    !rx.is_empty()
        && rx.iter().all(|(q, pid)| {
            let cpu = inputs.get(q).and_then(|irq| irq_cpu(sample, *irq));
            let allowed = sample.threads.get(pid).map(|t| t.allowed.as_str());
            cpu.is_some_and(|c| allowed == Some(c.to_string().as_str()))
        })
}

/// steerd's built-in high watermark: the irq+softirq share from which a CPU is hot.
const HOT_SHARE: f64 = 0.6;

/// Each CPU's irq+softirq share of its time between two samples, by CPU (0 for a CPU
/// with no earlier sample or no time counted).
fn softirq_shares(a: &GuestSample, b: &GuestSample) -> Vec<f64> {
    b.stat
        .iter()
        .map(|(cpu, &(busy, all))| {
            let (busy_then, all_then) = a.stat.get(cpu).copied().unwrap_or((busy, all));
            let all = all.saturating_sub(all_then);
            if all > 0 {
                busy.saturating_sub(busy_then) as f64 / all as f64
            } else {
                0.0
            }
        })
        .collect()
}

/// The highest irq+softirq share of a CPU's time between two samples.
fn hottest_share(a: &GuestSample, b: &GuestSample) -> f64 {
    softirq_shares(a, b).into_iter().fold(0.0, f64::max)
}

/// steerd's verdicts on its queue vector moves, by result, from its log lines (the
/// `result` field of its "irq N (DEV queue Q): move A -> B ..." lines).
pub fn move_checks(log: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in log.iter().filter(|l| l.contains("): move ")) {
        let result = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("result="))
            .map(|v| v.trim_matches('"'));
        if let Some(result) = result {
            *counts.entry(result.to_string()).or_default() += 1;
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
    let reference = if let Some((at, _)) = late_start {
        // A balancer started under load: changes are timed from its start.
        ready + f64::from(*at)
    } else if last.0 > Duration::from_secs(2) {
        ready + last.0.as_secs_f64()
    } else if let (true, Some((at, _))) = (s.setup.is_empty(), s.events.first()) {
        ready + f64::from(*at)
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
        for (irq, (name, counts)) in &b.interrupts {
            if vector_kind(name) != Some("input") {
                continue;
            }
            for (cpu, n) in counts {
                let before = a
                    .interrupts
                    .get(irq)
                    .and_then(|(_, c)| c.get(cpu))
                    .copied()
                    .unwrap_or(0);
                *per_cpu.entry(*cpu).or_default() += n.saturating_sub(before);
            }
        }
        let all: u64 = per_cpu.values().sum();
        m.input_cpus = per_cpu
            .values()
            .filter(|&&n| all > 0 && n * 50 > all)
            .count();
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
    if let (Some(a), Some(b)) = (samples.first(), samples.last()) {
        m.softnet_dropped = b
            .softnet
            .iter()
            .map(|(cpu, v)| v.1.saturating_sub(a.softnet.get(cpu).map_or(v.1, |x| x.1)))
            .sum();
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
    m.settle = settle(&samples, other.get("event"));
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
        ));
    }
    if super::isolation::is_cgroup(s) {
        let timeline = |effective| -> Vec<(f64, BTreeSet<u32>)> {
            samples
                .iter()
                .map(|x| (x.up, receive_cpus(x, effective)))
                .collect()
        };
        let events = other.get("event").map_or(&[][..], |v| v);
        let quiet = other.get("quiet").cloned().unwrap_or_default();
        let mut figures =
            super::isolation::figures(&timeline(false), events, first("partition"), quiet);
        figures.emptied_effective =
            super::isolation::figures(&timeline(true), events, None, Vec::new()).emptied;
        m.partition = Some(figures);
    }
    threads(&mut m, &samples, &queues, ready, start, end);
    if s.rss_watch {
        let counts: Vec<(f64, Vec<u64>)> = samples
            .iter()
            .filter_map(|x| Some((x.up, x.queue_packets.clone()?)))
            .filter(|(_, q)| !q.is_empty())
            .collect();
        let tables: Vec<(f64, Vec<u32>)> = samples
            .iter()
            .filter_map(|x| Some((x.up, x.table.clone()?)))
            .collect();
        let traffic = ready + s.phases.first().map_or(0.0, |p| p.start.as_secs_f64());
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

/// The threaded-NAPI figures: threads seen, when every receive thread sat on its queue's
/// IRQ CPU for good, how often one ran elsewhere in the steady window, and the mapping
/// check (per-queue packets against the mapped threads' run ticks).
fn threads(
    m: &mut Metrics,
    samples: &[GuestSample],
    queues: &[String],
    ready: f64,
    start: f64,
    end: f64,
) {
    let Some(last) = samples.last() else { return };
    m.rx_threads = rx_threads(last).len();
    m.tx_threads = last.threads.len() - m.rx_threads;
    if m.rx_threads == 0 {
        return;
    }
    // The first sample from which every later one has the threads on their IRQ CPUs.
    let mut from = None;
    for x in samples.iter().rev() {
        if !threads_on_irq_cpus(x) {
            m.threads_unpinned_last = Some((x.up - ready).max(0.0));
            break;
        }
        from = Some(x.up);
    }
    m.threads_pinned = from.map(|up| (up - ready).max(0.0));
    let window: Vec<&GuestSample> = samples
        .iter()
        .filter(|x| x.up >= start && x.up <= end + 0.5)
        .collect();
    let (mut off, mut all) = (0u32, 0u32);
    for x in &window {
        let inputs = input_irqs(x);
        for (q, pid) in rx_threads(x) {
            let cpu = inputs.get(&q).and_then(|irq| irq_cpu(x, *irq));
            if let (Some(cpu), Some(ran)) = (cpu, x.threads.get(&pid).and_then(|t| t.last_cpu)) {
                all += 1;
                off += u32::from(cpu != ran);
            }
        }
    }
    if all > 0 {
        m.threads_off_irq_cpu = Some(f64::from(off) / f64::from(all));
    }
    // Over the whole run: each queue's packets (ethtool -S) and its thread's run ticks.
    let packets: BTreeMap<u32, u64> = queues
        .iter()
        .filter_map(|l| {
            let (q, n) = l.split_once(' ')?;
            Some((q.parse().ok()?, n.trim().parse().ok()?))
        })
        .collect();
    let ticks: BTreeMap<u32, u64> = rx_threads(last)
        .into_iter()
        .filter_map(|(q, pid)| Some((q, last.threads.get(&pid)?.ticks?)))
        .collect();
    let shares = |v: &BTreeMap<u32, u64>| -> Vec<f64> {
        let all: u64 = v.values().sum();
        v.values()
            .map(|&n| if all > 0 { n as f64 / all as f64 } else { 0.0 })
            .collect()
    };
    m.queue_packet_shares = shares(&packets);
    m.thread_tick_shares = shares(&ticks);
    // The mapping holds when the threads' run ticks follow their queues' packets: a
    // correlation of at least 0.8 (a swap of a busy and a quiet queue makes it negative;
    // near-equal queues make an argmax comparison flip on noise).
    if packets.len() == ticks.len() && ticks.values().any(|&t| t > 0) {
        let r = correlation(&m.queue_packet_shares, &m.thread_tick_shares);
        m.mapping_agrees = r.map(|r| r >= 0.8);
        m.mapping_correlation = r;
    }
    // steerd's own mapping, where it logs one ("eth0 rx-0 is polled by napi/eth0-8193"):
    // on kernels whose netdev netlink gives each queue its NAPI id (6.8 and later), the
    // kernel's answer.
    let ours: BTreeMap<u32, String> = rx_threads(last)
        .into_iter()
        .filter_map(|(q, pid)| Some((q, last.threads.get(&pid)?.comm.clone())))
        .collect();
    let mut daemon = BTreeMap::new();
    for line in &m.log {
        let Some((before, after)) = line.split_once(" is polled by ") else {
            continue;
        };
        let queue = before
            .rsplit_once(" rx-")
            .and_then(|(_, q)| q.parse::<u32>().ok());
        let thread = after.split([' ', ')']).next();
        if let (Some(q), Some(t)) = (queue, thread) {
            daemon.insert(q, t.to_string());
        }
    }
    if !daemon.is_empty() {
        m.mapping_daemon_agrees = Some(daemon.iter().all(|(q, t)| ours.get(q) == Some(t)));
    }
}

/// The longest time after a timed event until every NIC input vector is pinned to a
/// single online CPU. Events that only look (`run_doctor`) change nothing to settle after.
fn settle(samples: &[GuestSample], events: Option<&Vec<String>>) -> Option<f64> {
    let changes: Vec<&String> = events?
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

/// Pearson's correlation of two equally long series; `None` when one is flat.
fn correlation(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

/// The median of the present values.
pub fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values
        .into_iter()
        .flatten()
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn show(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The side-by-side table: one row per scenario and balancer, medians of its runs (the
/// threaded-NAPI scenarios are left to `threaded_table`).
pub fn table(rows: &[(Scenario, &'static str, Vec<Metrics>)]) -> String {
    let mut out = String::new();
    let rows: Vec<_> = rows
        .iter()
        .filter(|(s, _, _)| !s.threaded && !s.rss_watch)
        .collect();
    if rows.is_empty() {
        return out;
    }
    out.push_str(
        "| scenario | balancer | runs | first change (s) | input IRQ CPUs | busiest CPU processed share | busiest CPU irq+softirq share | processed pkt/s | delivered/offered | drops softnet/tap | changes after convergence | settle after event (s) | daemon CPU s / RSS MB | restored |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (s, balancer, runs) in rows {
        let med = |f: fn(&Metrics) -> Option<f64>| median(runs.iter().map(f));
        let restored = runs.iter().filter(|m| m.restored).count();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} / {} | {}/{} |",
            s.name,
            balancer,
            runs.len(),
            show(med(|m| m.first_change), 1),
            show(med(|m| Some(m.input_cpus as f64)), 0),
            show(med(|m| Some(m.busiest_processed)), 2),
            show(med(|m| Some(m.busiest_softirq)), 2),
            show(med(|m| Some(m.processed_pps)), 0),
            show(med(|m| m.delivered), 2),
            show(med(|m| Some(m.softnet_dropped as f64)), 0),
            show(med(|m| Some(m.tap_dropped as f64)), 0),
            show(med(|m| Some(m.late_changes as f64)), 0),
            show(med(|m| m.settle), 1),
            show(med(|m| m.daemon_cpu_s), 2),
            show(med(|m| m.daemon_rss_mb), 1),
            restored,
            runs.len(),
        );
    }
    out
}

/// The median of values where `None` means "never" (ranked after every time).
fn median_or_never(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values
        .into_iter()
        .map(|x| x.unwrap_or(f64::INFINITY))
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2]).filter(|x| x.is_finite())
}

/// The kernel release without Debian's suffix (`6.12.117+deb12-cloud-amd64` -> `6.12.117`).
fn short_kernel(runs: &[Metrics]) -> String {
    let k: BTreeSet<&str> = runs
        .iter()
        .filter_map(|m| m.kernel.as_deref())
        .map(|k| k.split(['+', '-']).next().unwrap_or(k))
        .collect();
    if k.is_empty() {
        "-".into()
    } else {
        k.into_iter().collect::<Vec<_>>().join(", ")
    }
}

/// The threaded-NAPI table (issue 20): one row per threaded scenario and balancer, medians
/// of its runs. "rx threads on their IRQ CPU" is the median of the runs' times, "never"
/// counted as the longest; each run's time follows in brackets.
pub fn threaded_table(rows: &[(Scenario, &'static str, Vec<Metrics>)]) -> String {
    let mut out = String::new();
    let rows: Vec<_> = rows.iter().filter(|(s, _, _)| s.threaded).collect();
    if rows.is_empty() {
        return out;
    }
    out.push_str(
        "| scenario | kernel | balancer | runs | NAPI threads rx/tx | rx threads on their IRQ CPU (s) | rx thread samples off their IRQ CPU | input IRQ CPUs | busiest CPU processed share | processed pkt/s | delivered/offered | changes after convergence | daemon CPU s / RSS MB | restored |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (s, balancer, runs) in rows {
        let med = |f: fn(&Metrics) -> Option<f64>| median(runs.iter().map(f));
        let restored = runs.iter().filter(|m| m.restored).count();
        let each: Vec<String> = runs
            .iter()
            .map(|m| {
                m.threads_pinned
                    .map_or("never".into(), |t| format!("{t:.1}"))
            })
            .collect();
        let pinned = median_or_never(runs.iter().map(|m| m.threads_pinned))
            .map_or("never".into(), |t| format!("{t:.1}"));
        let pinned = if runs.len() > 1 {
            format!("{pinned} ({})", each.join(", "))
        } else {
            pinned
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {}/{} |",
            s.name,
            short_kernel(runs),
            balancer,
            runs.len(),
            show(med(|m| Some(m.rx_threads as f64)), 0),
            show(med(|m| Some(m.tx_threads as f64)), 0),
            pinned,
            show(med(|m| m.threads_off_irq_cpu), 2),
            show(med(|m| Some(m.input_cpus as f64)), 0),
            show(med(|m| Some(m.busiest_processed)), 2),
            show(med(|m| Some(m.processed_pps)), 0),
            show(med(|m| m.delivered), 2),
            show(med(|m| Some(m.late_changes as f64)), 0),
            show(med(|m| m.daemon_cpu_s), 2),
            show(med(|m| m.daemon_rss_mb), 1),
            restored,
            runs.len(),
        );
    }
    out
}

/// The targets, judged on the table's medians: each a sentence and whether it holds.
pub fn verdicts(rows: &[(Scenario, &'static str, Vec<Metrics>)]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let find = |name: &str, balancer: &str| {
        rows.iter()
            .find(|(s, b, runs)| s.name == name && *b == balancer && !runs.is_empty())
    };
    for (s, b, runs) in rows {
        // The RSS lever's own scenarios have their verdicts in `rss::verdicts`; a threaded
        // one with the lever on is held to the threaded targets too.
        // The in-flight fault scenarios have theirs in `faults::verdicts` (strace holds
        // a write for seconds there, so the reaction times are not steerd's).
        if *b != "steerd"
            || runs.is_empty()
            || (s.rss_watch && !s.threaded)
            || super::faults::is_in_flight(s.name)
        {
            continue;
        }
        let med = |f: fn(&Metrics) -> Option<f64>| median(runs.iter().map(f));
        let busiest = med(|m| Some(m.busiest_processed)).unwrap_or(1.0);
        if let Some((_, _, irqb)) = find(s.name, "irqbalance") {
            let theirs = median(irqb.iter().map(|m| Some(m.busiest_processed))).unwrap_or(1.0);
            out.push((
                format!(
                    "{}: steerd's busiest-CPU share {busiest:.2} <= irqbalance's {theirs:.2}",
                    s.name
                ),
                busiest <= theirs + 0.005,
            ));
        }
        if s.spread
            && let Some((_, _, hand)) = find(s.name, "hand")
        {
            let theirs = median(hand.iter().map(|m| Some(m.busiest_processed))).unwrap_or(1.0);
            out.push((
                format!("{}: steerd's busiest-CPU share {busiest:.2} within 10 % of the hand placement's {theirs:.2}", s.name),
                busiest <= theirs * 1.10 + 0.005,
            ));
        }
        if let Some(first) = med(|m| m.first_change) {
            out.push((
                format!("{}: first change after {first:.1} s (< 2 s)", s.name),
                first < 2.0,
            ));
        }
        let late = med(|m| Some(m.late_changes as f64)).unwrap_or(0.0);
        out.push((
            format!("{}: {late:.0} changes after convergence (0)", s.name),
            late == 0.0,
        ));
        if s.name == "idle-burst" {
            let idle = runs.iter().map(|m| m.idle_changes).max().unwrap_or(0);
            out.push((
                format!("{}: {idle} changes while idle (0)", s.name),
                idle == 0,
            ));
        }
        let restored = runs.iter().filter(|m| m.restored).count();
        out.push((
            format!(
                "{}: every value restored after SIGTERM in {restored} of {} runs",
                s.name,
                runs.len()
            ),
            restored == runs.len(),
        ));
        if !s.events.is_empty()
            && s.name != "kill9"
            && let Some(settle) = med(|m| m.settle)
        {
            out.push((
                format!("{}: every input vector on one online CPU {settle:.1} s after each event (<= 2 ticks)", s.name),
                settle <= 2.5,
            ));
        }
        if s.threaded {
            let pinned = median_or_never(runs.iter().map(|m| m.threads_pinned));
            out.push((
                format!(
                    "{}: every rx NAPI thread on its queue's IRQ CPU {} after the start (<= 2 ticks)",
                    s.name,
                    pinned.map_or("never".into(), |t| format!("{t:.1} s"))
                ),
                pinned.is_some_and(|t| t <= 2.5),
            ));
            out.push((
                format!(
                    "{}: steerd's busiest-CPU share {busiest:.2} <= 0.40",
                    s.name
                ),
                busiest <= 0.405,
            ));
        }
        if s.vm.blk_queues.is_some() {
            let lines = runs.iter().map(|m| m.managed_lines).max().unwrap_or(0);
            let managed = s.vm.blk_queues.unwrap_or(0) as usize;
            out.push((
                format!("{}: {lines} log lines about managed IRQs (at most one per managed IRQ, {managed})", s.name),
                lines <= managed,
            ));
        }
    }
    out.extend(super::rss::verdicts(rows));
    out.extend(super::faults::verdicts(rows));
    out
}
