//! The threaded-NAPI figures of a run (issue 20): when every receive NAPI thread sat on its
//! queue's IRQ CPU, how often one ran elsewhere, and checks of the queue-to-thread mapping
//! rule. One question of its own, asked of every run that has receive NAPI threads.

use std::collections::BTreeMap;

use super::Metrics;
use super::parse::{GuestSample, input_irqs, irq_cpu, rx_threads, threads_on_irq_cpus};

/// The threaded-NAPI figures: threads seen, when every receive thread sat on its queue's
/// IRQ CPU for good, how often one ran elsewhere in the steady window, and the mapping
/// check (per-queue packets against the mapped threads' run ticks).
pub(super) fn threads(
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
