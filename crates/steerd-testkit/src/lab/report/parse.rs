//! Reads a guest's console: its tagged lines parsed into counter samples and the other
//! records, and what one sample (or two) says about the NIC's queue vectors, the receive
//! NAPI threads and the CPUs receive work is placed on. The console's format is known here
//! only; the figures are worked out from what this returns.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One sample of the guest's counters.
#[derive(Debug, Default, Clone)]
pub(super) struct GuestSample {
    pub(super) up: f64,
    /// By CPU id: processed, dropped.
    pub(super) softnet: BTreeMap<u32, (u64, u64)>,
    /// By CPU id: irq+softirq ticks, all ticks.
    pub(super) stat: BTreeMap<u32, (u64, u64)>,
    /// Column CPU ids of `/proc/interrupts`.
    pub(super) columns: Vec<u32>,
    /// By IRQ: name and per-CPU counts.
    pub(super) interrupts: BTreeMap<u32, (String, BTreeMap<u32, u64>)>,
    /// By IRQ: smp_affinity_list; by queue: rps_cpus; by NAPI thread (`napi PID`): its
    /// allowed CPUs.
    pub(super) values: BTreeMap<String, String>,
    /// By IRQ: effective_affinity_list.
    pub(super) effective: BTreeMap<u32, String>,
    /// By transmit queue: `xps_cpus` (a hex mask).
    pub(super) xps: BTreeMap<u32, String>,
    /// By pid: every NAPI kernel thread.
    pub(super) threads: BTreeMap<u32, NapiThread>,
    /// The NIC's rx packets per queue and its RSS table (`QS`, `X`; RSS scenarios only).
    pub(super) queue_packets: Option<Vec<u64>>,
    pub(super) table: Option<Vec<u32>>,
}

impl GuestSample {
    /// `irq`'s interrupt count on `cpu` (0 where the sample has none).
    pub(super) fn interrupts_on(&self, irq: u32, cpu: u32) -> u64 {
        self.interrupts
            .get(&irq)
            .and_then(|(_, c)| c.get(&cpu))
            .copied()
            .unwrap_or(0)
    }
}

/// A NAPI kernel thread in one sample (a `T` line).
#[derive(Debug, Default, Clone)]
pub(super) struct NapiThread {
    /// `napi/eth0-8193`.
    pub(super) comm: String,
    /// `Cpus_allowed_list` of its status file.
    pub(super) allowed: String,
    /// The CPU it last ran on (field 39 of its stat file).
    pub(super) last_cpu: Option<u32>,
    /// Its user+system ticks.
    pub(super) ticks: Option<u64>,
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
pub(super) fn run_packets(start: &[String], end: &[String]) -> Vec<u64> {
    run_delta(&queue_counts(start), &queue_counts(end))
}

/// What each queue's counter added from `start` to `end`, in queue order (a queue missing
/// at the start counts from 0).
pub(super) fn run_delta(start: &BTreeMap<u32, u64>, end: &BTreeMap<u32, u64>) -> Vec<u64> {
    end.iter()
        .map(|(q, end)| end.saturating_sub(start.get(q).copied().unwrap_or(0)))
        .collect()
}

/// An RSS table line (`XB`/`XA`: "entries... key KEY"), or `None` when the NIC has none.
pub(super) fn table_line(lines: Option<&Vec<String>>) -> Option<String> {
    let line = lines?.first()?.trim().to_string();
    let entries = line.split(" key").next().unwrap_or_default().trim();
    (!entries.is_empty()).then_some(line)
}

pub(super) fn parse(lines: &[String]) -> (Vec<GuestSample>, HashMap<&'static str, Vec<String>>) {
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
            "NDB" => other
                .entry("nic drops start")
                .or_default()
                .push(rest.to_string()),
            "NDE" => other
                .entry("nic drops end")
                .or_default()
                .push(rest.to_string()),
            "TXB" => other.entry("tx start").or_default().push(rest.to_string()),
            "TXE" => other.entry("tx end").or_default().push(rest.to_string()),
            // tc's lines as printed (`report::qdisc` reads them).
            "TCB" => other
                .entry("qdisc start")
                .or_default()
                .push(rest.to_string()),
            "TCE" => other.entry("qdisc end").or_default().push(rest.to_string()),
            "LAB" => {
                let (kind, rest) = rest.split_once(' ').unwrap_or((rest, ""));
                let key = match kind {
                    "READY" => "ready",
                    "WALL" => "wall",
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
pub(super) fn queue_vector(name: &str) -> Option<(&'static str, u32)> {
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
pub(super) fn vector_kind(name: &str) -> Option<&'static str> {
    queue_vector(name).map(|(kind, _)| kind)
}

pub(super) fn single_cpu(list: &str) -> Option<u32> {
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
pub(super) fn rx_threads(sample: &GuestSample) -> Vec<(u32, u32)> {
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
pub(super) fn input_irqs(sample: &GuestSample) -> BTreeMap<u32, u32> {
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
pub(super) fn irq_cpu(sample: &GuestSample, irq: u32) -> Option<u32> {
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
pub(super) fn receive_cpus(sample: &GuestSample, effective: bool) -> BTreeSet<u32> {
    use crate::lab::isolation::cpus_of;
    let mut cpus = vector_and_rps_cpus(sample, effective);
    for (_, pid) in rx_threads(sample) {
        if let Some(thread) = sample.threads.get(&pid) {
            cpus.extend(cpus_of(&thread.allowed, false));
        }
    }
    cpus
}

/// The CPUs of a sample's receive vectors (as [`receive_cpus`]) and RPS masks, without the
/// NAPI threads: what a balancer places where it may not move a thread (busy-polling ones).
pub(super) fn vector_and_rps_cpus(sample: &GuestSample, effective: bool) -> BTreeSet<u32> {
    use crate::lab::isolation::cpus_of;
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
    cpus
}

/// Whether every receive NAPI thread of a sample is allowed on exactly its queue's IRQ
/// CPU (false when there are none).
pub(super) fn threads_on_irq_cpus(sample: &GuestSample) -> bool {
    let rx = rx_threads(sample);
    let inputs = input_irqs(sample);
    !rx.is_empty()
        && rx.iter().all(|(q, pid)| {
            let cpu = inputs.get(q).and_then(|irq| irq_cpu(sample, *irq));
            let allowed = sample.threads.get(pid).map(|t| t.allowed.as_str());
            cpu.is_some_and(|c| allowed == Some(c.to_string().as_str()))
        })
}

/// Each CPU's irq+softirq share of its time between two samples, by CPU (0 for a CPU
/// with no earlier sample or no time counted).
pub(super) fn softirq_shares(a: &GuestSample, b: &GuestSample) -> Vec<f64> {
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
pub(super) fn hottest_share(a: &GuestSample, b: &GuestSample) -> f64 {
    softirq_shares(a, b).into_iter().fold(0.0, f64::max)
}
