//! Faults of the real kernel caught in flight (issue 16): a write to an input vector's
//! affinity that the guest's kernel answers with an error because the machine changed
//! between steerd's decision and the write (a CPU gone offline, the NIC removed).
//!
//! On its own that window is microseconds, so the lab widens it without faking the
//! answer: steerd starts stopped, `strace` attaches and holds steerd's first write to any
//! of the NIC's input `smp_affinity_list` files for [`HOLD_US`] before it enters the
//! kernel (`inject=write:delay_enter`, `when=1`; guest-init.sh's `start_steerd_held`), and
//! the scenario's first event waits until that write is held, then changes the machine.
//! What the write then returns is the kernel's own answer (strace's log, kept in the run's
//! log, shows it), and what steerd does with it is the test: one clear log line, a
//! counted error, no retry storm, no vector taken for kernel-managed, and nothing of its
//! own left unrestored. (The input vectors are spread again once the machine is back by
//! virtio-net itself, which re-places its queues after both events.)

use std::time::Duration;

use super::report::Metrics;
use super::scenario::{NIC_REMOVE, NIC_RESCAN, Scenario, base, udp};

/// Whether `name` is one of this module's scenarios (their verdicts are here, not in
/// `report::verdicts`).
pub fn is_in_flight(name: &str) -> bool {
    name.starts_with("inflight-")
}

/// How long strace holds the write, µs: longer than the event takes under TCG.
pub const HOLD_US: u64 = 4_000_000;

/// steerd's metrics of failed writes (those not zero) and its count of IRQs it takes for
/// kernel-managed, into its log before SIGTERM.
const WRITE_ERRORS: &str = "wget -qO- http://127.0.0.1:9847/metrics | \
     grep -E '^steerd_(write_errors_total|unmanageable_irqs)' | grep -v 'total.* 0$' | \
     sed 's/^/METRIC /' >> /tmp/balancer.log 2>&1";

/// `inflight-offline`: CPUs 1-3 go offline while steerd's first write (an input vector
/// moved off CPU0, necessarily to one of them) is held; the kernel refuses a mask with no
/// online CPU (EINVAL). They come back at 9 s (and virtio-net re-places its queues).
pub fn offline_in_flight() -> Scenario {
    held(
        "inflight-offline",
        "every input on CPU0; steerd's first IRQ write held 4 s by strace while CPUs 1-3 go offline, back at 9 s; 8 UDP flows",
        "wait_held_write; set_cpus_online 0 1 2 3",
        "set_cpus_online 1 1 2 3",
    )
}

/// `inflight-remove`: the NIC's PCI function is removed while steerd's first write is
/// held (its IRQ is freed under the write), and found again at 9 s, usually with the same
/// IRQ numbers and the driver's placement.
pub fn removal_in_flight() -> Scenario {
    let mut s = held(
        "inflight-remove",
        "every input on CPU0; steerd's first IRQ write held 4 s by strace while the NIC is removed, found again at 9 s; 8 UDP flows",
        "wait_held_write",
        NIC_RESCAN,
    );
    // Due at once with the wait: run after it in the same pass of the guest's event loop.
    s.events.insert(1, (0, NIC_REMOVE));
    s
}

/// A scenario whose first event (`change`, at once) comes while steerd's first write is
/// held, `back` at 9 s, the metrics at 22 s; 8 UDP flows for 22 s.
fn held(
    name: &'static str,
    what: &'static str,
    change: &'static str,
    back: &'static str,
) -> Scenario {
    Scenario {
        setup: format!("pin_inputs 0; HOLD_IRQ_WRITE={HOLD_US}"),
        events: vec![(0, change), (9, back), (22, WRITE_ERRORS)],
        duration: Duration::from_secs(24),
        phases: vec![udp(1, 22, 8, super::scenario::UDP_PPS)],
        steady: Duration::from_secs(8),
        ..base(name, what)
    }
}

/// What one held write came to, read from the run's log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeldWrite {
    /// strace's line for the held write, with the kernel's answer.
    pub strace: Option<String>,
    /// The errno the kernel answered (`EINVAL`, `EIO`, ...), if the write failed.
    pub errno: Option<String>,
    /// steerd's log lines about a failed or vanished write.
    pub lines: Vec<String>,
    /// steerd's `steerd_write_errors_total` series that are not zero.
    pub counted: Vec<String>,
    /// strace's lines of every failed write to an input vector (the held one and any
    /// other steerd made to those files while traced).
    pub failed_writes: Vec<String>,
    /// The `failed=` count of steerd's "restored original values" line at SIGTERM.
    pub restore_failed: Option<usize>,
    /// `steerd_unmanageable_irqs`: a vector freed under a write must not count (procfs
    /// answers EIO, the errno of a kernel-managed IRQ, which steerd would never move again
    /// although its number comes back with the device).
    pub unmanageable: Option<f64>,
}

impl HeldWrite {
    pub fn from_log(log: &[String]) -> HeldWrite {
        let strace = log
            .iter()
            .find(|l| l.contains("smp_affinity_list") && l.contains("(DELAYED)"))
            .cloned();
        let errno = strace.as_deref().and_then(|l| {
            let after = l.split("= -1 ").nth(1)?;
            Some(after.split_whitespace().next()?.to_string())
        });
        let lines = log
            .iter()
            .filter(|l| !l.starts_with("METRIC") && !l.contains("(DELAYED)"))
            .filter(|l| {
                l.contains("write failed")
                    || l.contains("vanished under the write")
                    || l.contains("does not take this value")
                    || l.contains("managed by the kernel; never moving")
            })
            .cloned()
            .collect();
        let metrics: Vec<&str> = log
            .iter()
            .filter_map(|l| l.strip_prefix("METRIC "))
            .collect();
        let counted = metrics
            .iter()
            .filter(|m| m.starts_with("steerd_write_errors_total"))
            .map(|m| m.to_string())
            .collect();
        let unmanageable = metrics
            .iter()
            .find_map(|m| m.strip_prefix("steerd_unmanageable_irqs "))
            .and_then(|v| v.trim().parse().ok());
        let failed_writes = log
            .iter()
            .filter(|l| l.contains("smp_affinity_list") && l.contains(") = -1 "))
            .cloned()
            .collect();
        let restore_failed = log
            .iter()
            .find(|l| l.contains("restored original values"))
            .and_then(|l| l.split("failed=").nth(1))
            .and_then(|n| n.split_whitespace().next()?.parse().ok());
        HeldWrite {
            strace,
            errno,
            lines,
            counted,
            failed_writes,
            restore_failed,
            unmanageable,
        }
    }

    /// The failed writes steerd counted (the sum of its `steerd_write_errors_total`
    /// series): strace sees only the input vectors' writes, and a tick may move the
    /// transmit vectors too.
    pub fn counted_total(&self) -> f64 {
        self.counted
            .iter()
            .filter_map(|m| m.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// The most times one file's write failed.
    pub fn most_failures_of_one_irq(&self) -> usize {
        let mut per_file = std::collections::BTreeMap::<&str, usize>::new();
        for line in &self.failed_writes {
            let file = line
                .split('<')
                .nth(1)
                .and_then(|rest| rest.split('>').next())
                .unwrap_or(line);
            *per_file.entry(file).or_default() += 1;
        }
        per_file.values().copied().max().unwrap_or(0)
    }
}

/// The targets of the in-flight scenarios for steerd's runs, each a sentence and whether
/// it holds in every run.
pub fn verdicts(rows: &[(Scenario, &'static str, Vec<Metrics>)]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (s, b, runs) in rows {
        if !is_in_flight(s.name) || *b != "steerd" || runs.is_empty() {
            continue;
        }
        let n = runs.len();
        let held: Vec<HeldWrite> = runs.iter().map(|m| HeldWrite::from_log(&m.log)).collect();
        let count = |ok: &dyn Fn(&HeldWrite, &Metrics) -> bool| {
            held.iter().zip(runs).filter(|(h, m)| ok(h, m)).count()
        };
        let mut every_run = |what: &str, met: usize| {
            out.push((format!("{}: {what} in {met} of {n} runs", s.name), met == n));
        };
        every_run(
            "the held write failed in the kernel",
            count(&|h, _| h.errno.is_some()),
        );
        every_run(
            "one log line per failed write, none failed more than twice (no retry storm)",
            count(&|h, _| {
                !h.lines.is_empty()
                    && h.lines.len() as f64 <= h.counted_total()
                    && h.most_failures_of_one_irq() <= 2
            }),
        );
        every_run(
            "a write error counted in steerd_write_errors_total",
            count(&|h, _| !h.counted.is_empty()),
        );
        every_run(
            "no IRQ taken for kernel-managed (steerd_unmanageable_irqs 0)",
            count(&|h, _| h.unmanageable == Some(0.0)),
        );
        // Judged only where the machine was back before the run ended: on a slow host's
        // TCG guest CPUs 1-3 were still offline 12 s after they were brought back
        // (2026-11-29: steerd saw no CPU come back before SIGTERM). And judged on the
        // vectors that fire: after a rescan on 2026-11-30's host the NIC sent
        // the 8 flows to queues 0 and 1 only, with no balancer as with steerd (their
        // vectors on CPUs 0 and 1, queues 2-3 at 1-2 packets), which no balancer decides.
        let not_back = runs.iter().filter(|m| m.ended_with_cpus_offline()).count();
        every_run(
            &format!(
                "the input vectors that fire on as many CPUs, 3 or more when 3 or more fire, once the machine is back ({not_back} run(s) ended before it was)"
            ),
            count(&|_, m| spread_once_back(m) || m.ended_with_cpus_offline()),
        );
        // The event itself changes the vectors' affinity (virtio-net re-places its queues
        // when a CPU comes online and when the device is found again), so the machine's
        // values are not the snapshot's; what steerd wrote it must put back.
        every_run(
            "steerd's restore at SIGTERM failed none",
            count(&|h, _| h.restore_failed == Some(0)),
        );
    }
    out
}

/// Whether the input vectors that fired in the steady window fired on as many CPUs (at
/// least 3 when 3 or more fired): nothing left stacked by the fault's handling.
fn spread_once_back(m: &Metrics) -> bool {
    m.input_vectors > 0 && m.input_cpus >= m.input_vectors.min(3)
}

/// One run's held write in a few lines, for the lab's log.
pub fn describe(h: &HeldWrite) -> String {
    format!(
        "held write: {}\n  kernel answered {}; failed writes {}; steerd's lines: {:?}\n  counted: {:?}; unmanageable IRQs {:?}; restore failed {:?}",
        h.strace.as_deref().unwrap_or("none seen"),
        h.errno.as_deref().unwrap_or("success"),
        h.failed_writes.len(),
        h.lines,
        h.counted,
        h.unmanageable,
        h.restore_failed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two queues receiving on two CPUs are spread; two vectors on one CPU, or four on
    /// two, are not; nothing firing is not judged spread.
    #[test]
    fn spread_is_judged_on_the_vectors_that_fire() {
        let run = |input_vectors, input_cpus| Metrics {
            input_vectors,
            input_cpus,
            ..Metrics::default()
        };
        for (vectors, cpus, spread) in [
            (2, 2, true),
            (4, 4, true),
            (4, 3, true),
            (4, 2, false),
            (2, 1, false),
            (0, 0, false),
        ] {
            assert_eq!(
                spread_once_back(&run(vectors, cpus)),
                spread,
                "{vectors} vectors on {cpus} CPUs"
            );
        }
    }
}
