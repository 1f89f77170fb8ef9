//! One JSON object per lab run (`examples/lab --format json`), one a line, with the
//! fields the veth bed's lines share (`lab/bed`), so scripts can read both the same way.
//!
//! Rates: `offered_pps` is the scenario's UDP rate, `delivered_pps` the UDP datagrams the
//! guest's stack received over the UDP phases' length, `processed_pps` softnet
//! `processed` per second in the steady window. Shares are of the steady window.

use std::collections::BTreeMap;

use serde::Serialize;

use super::report::Metrics;
use super::scenario::Scenario;

/// A run, as printed.
#[derive(Debug, Clone, Serialize)]
pub struct RunLine {
    pub scenario: &'static str,
    pub balancer: &'static str,
    pub rep: u32,
    pub kernel: Option<String>,
    pub offered_pps: u32,
    pub delivered_pps: Option<f64>,
    /// UDP datagrams the sender handed to its sockets per second (what was offered in
    /// fact), and those of them the guest's stack never received: every loss on the way,
    /// counted or not (the tap, the NIC, the backlogs, the host's qdisc, an emulated ring).
    pub sent_pps: Option<f64>,
    pub lost_pps: Option<f64>,
    pub processed_pps: f64,
    pub softnet_drops: u64,
    pub tap_drops: Option<u64>,
    /// What the guest's NIC reported losing (`rx_missed_errors`, `rx_fifo_errors`,
    /// `rx_over_errors`); QEMU's igb and virtio-net report none.
    pub nic_drops: Option<u64>,
    pub busiest_si_share: f64,
    pub si_share: Vec<f64>,
    pub busiest_processed_share: f64,
    pub input_irq_cpus: usize,
    pub first_change_s: Option<f64>,
    /// When steerd made its first change, from its log on the guest's clock (`first_change_s`
    /// is when a sample saw it).
    pub first_write_s: Option<f64>,
    /// Seconds from a CPU first reaching the high watermark (0.6 irq+softirq) to the
    /// next change of a NIC value.
    pub first_relief_s: Option<f64>,
    /// steerd's checks of its queue vector moves, by result (from its log); `pending_`
    /// before the result for a placement found pending at discovery.
    pub irq_move_checks: BTreeMap<String, usize>,
    pub changes: usize,
    pub changes_by_lever: BTreeMap<String, usize>,
    pub changes_after_convergence: usize,
    /// The longest time between two of the guest's samples, seconds: at least
    /// `report::STALLED_SECS` says the guest stalled and the run measured the host.
    pub longest_sample_gap_s: Option<f64>,
    /// Scenarios with timed events (hotplug, channels, NIC removal): the most seconds
    /// after an event until every input vector was on one online CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settle_s: Option<f64>,
    pub rps_cpus: Vec<String>,
    pub restored: bool,
    pub daemon_cpu_s: Option<f64>,
    /// The balancer's log lines that are warnings or errors (`Metrics::warnings`; steerd's
    /// format, so 0 for irqbalance).
    pub warnings: usize,
    /// The emulated NIC (`virtio`, `igb`, `vmxnet3`) and the irqbalance version the lab
    /// compares with; set by the caller, which knows the platform.
    pub nic: &'static str,
    pub irqbalance: Option<String>,
    /// Packets each rx queue received over the run, and how many got less than a quarter
    /// of an even share (`Metrics::silent_queues`).
    pub queue_packets: Vec<u64>,
    pub silent_queues: Option<usize>,
    /// Queues that stopped receiving mid-run while the others went on (`lab::queue_stall`,
    /// a fault of the lab's QEMU): `rx-N from UPTIME s for SECS s`; only where the guest
    /// samples per-queue counters (the RSS and the saturated scenarios).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stalled_queues: Vec<String>,
    /// Input vectors whose first interrupt once the traffic began arrived outside their
    /// mask (`report::first_interrupt`): `irq N (NAME): mask M, first interrupt at UPTIME s
    /// on CPU C, K after it`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub first_interrupts_off_mask: Vec<String>,
    /// The RSS table ("entries... key KEY") at the start and the end of the run.
    pub rss_table_start: Option<String>,
    pub rss_table_end: Option<String>,
    /// The cgroup scenarios (`lab/isolation.rs`): the partition as the kernel took it, and
    /// seconds until it emptied of receive work and until work came back once dissolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_emptied_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_emptied_effective_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_refilled_s: Option<f64>,
    /// `busy-poll` (`lab/busy_poll.rs`): seconds until the pinned busy-polling thread's CPU
    /// had no input vector or RPS mask, and until one came back once it was unpinned; how
    /// many receive NAPI threads the balancer moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_cpu_emptied_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_cpu_refilled_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_threads_moved: Option<usize>,
    /// `cgroup-quiet`: steerd's `steerd_quiet_mode` a second before the partition is made
    /// and before it is dissolved (`1,1`: quiet both times).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_quiet_before: Option<String>,
    /// The transmit steering scenario (`lab/xps.rs`): queues whose transmit vector and XPS
    /// mask agree with the receive placement, of how many; the XPS masks at the end; the
    /// packets each transmit queue sent; its qdisc's requeues (`tc -s qdisc`; empty when
    /// the guest's tc printed none), both over the run in queue order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xps_agreeing: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xps_masks: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_packets: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_requeues_by_queue: Option<Vec<u64>>,
}

fn round(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

/// How long `s` sends UDP, seconds: what its datagram counts are rates over.
fn udp_secs(s: &Scenario) -> f64 {
    s.phases
        .iter()
        .filter(|p| p.udp_pps > 0)
        .map(|p| p.length.as_secs_f64())
        .sum()
}

/// The line of one run of `s` with `balancer`.
pub fn line(s: &Scenario, balancer: &'static str, rep: u32, m: &Metrics) -> RunLine {
    let offered = s.phases.iter().map(|p| p.udp_pps).max().unwrap_or(0);
    let udp_secs = udp_secs(s);
    // A datagram count as a rate over the UDP phases.
    let per_udp_sec = |n: u64| (udp_secs > 0.0).then(|| round(n as f64 / udp_secs, 0));
    RunLine {
        scenario: s.name,
        balancer,
        rep,
        kernel: m.kernel.clone(),
        offered_pps: offered,
        delivered_pps: m.udp_received.and_then(per_udp_sec),
        sent_pps: m.udp_sent.and_then(per_udp_sec),
        lost_pps: m
            .udp_sent
            .zip(m.udp_received)
            .and_then(|(sent, got)| per_udp_sec(sent.saturating_sub(got))),
        processed_pps: round(m.processed_pps, 0),
        softnet_drops: m.softnet_dropped,
        tap_drops: Some(m.tap_dropped),
        nic_drops: m.nic_dropped,
        busiest_si_share: round(m.busiest_softirq, 3),
        si_share: m.softirq_shares.iter().map(|v| round(*v, 3)).collect(),
        busiest_processed_share: round(m.busiest_processed, 3),
        input_irq_cpus: m.input_cpus,
        first_change_s: m.first_change.map(|v| round(v, 1)),
        settle_s: m.settle.map(|v| round(v, 1)),
        first_relief_s: m.first_relief.map(|v| round(v, 1)),
        first_write_s: m.first_write.map(|v| round(v, 2)),
        irq_move_checks: m.move_checks.clone(),
        changes: m.changes,
        changes_by_lever: m.changes_by_lever.clone(),
        changes_after_convergence: m.late_changes,
        longest_sample_gap_s: m.longest_sample_gap.map(|(gap, _)| round(gap, 1)),
        rps_cpus: m.rps_masks.clone(),
        restored: m.restored,
        daemon_cpu_s: m.daemon_cpu_s,
        warnings: m.warnings(),
        nic: "virtio",
        irqbalance: None,
        queue_packets: m.queue_run_packets.clone(),
        silent_queues: m.silent_queues(),
        stalled_queues: m.queue_stalls.iter().map(|s| s.describe()).collect(),
        first_interrupts_off_mask: m
            .first_interrupts_off_mask
            .iter()
            .map(|f| f.describe())
            .collect(),
        rss_table_start: m.rss_table_start.clone(),
        rss_table_end: m.rss_table_end.clone(),
        partition: m.partition.as_ref().and_then(|p| p.state.clone()),
        partition_emptied_s: m
            .partition
            .as_ref()
            .and_then(|p| p.emptied)
            .map(|v| round(v, 1)),
        partition_emptied_effective_s: m
            .partition
            .as_ref()
            .and_then(|p| p.emptied_effective)
            .map(|v| round(v, 1)),
        xps_agreeing: m
            .xps
            .as_ref()
            .map(|x| format!("{}/{}", x.agreeing, x.queues)),
        xps_masks: m.xps.as_ref().map(|x| x.masks.clone()),
        tx_packets: m.xps.as_ref().map(|x| x.tx_packets.clone()),
        tx_requeues_by_queue: m.xps.as_ref().map(|x| x.tx_requeues.clone()),
        partition_refilled_s: m
            .partition
            .as_ref()
            .and_then(|p| p.refilled)
            .map(|v| round(v, 1)),
        partition_quiet_before: m
            .partition
            .as_ref()
            .filter(|p| !p.quiet_before.is_empty())
            .map(|p| p.quiet_before.join(",")),
        busy_cpu_emptied_s: m
            .busy_poll
            .as_ref()
            .and_then(|b| b.emptied)
            .map(|v| round(v, 1)),
        busy_cpu_refilled_s: m
            .busy_poll
            .as_ref()
            .and_then(|b| b.refilled)
            .map(|v| round(v, 1)),
        busy_threads_moved: m.busy_poll.as_ref().map(|b| b.threads_moved),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::report::analyse;
    use crate::lab::run::RawRun;
    use crate::lab::scenario;
    use crate::lab::traffic::Sent;
    use std::time::Duration;

    /// The whole-path figures: what the sender tried, what the guest's UDP counted, what
    /// its NIC said it lost, each per second of the UDP phases.
    #[test]
    fn sent_lost_and_nic_drops_come_from_the_sender_the_guest_and_its_nic() {
        let s = scenario::named("sat-defaults", Duration::from_secs(30))
            .expect("sat-defaults is a scenario");
        let udp_secs = udp_secs(&s);
        assert_eq!(udp_secs, 30.0, "sat-defaults sends for 30 s");
        let lines = [
            "NDB 5 1 0",
            "NDE 105 11 2",
            "P Udp: InDatagrams NoPorts InErrors OutDatagrams",
            "P Udp: 0 900 50 0",
        ];
        let raw = RawRun {
            lines: lines.iter().map(|l| l.to_string()).collect(),
            sent: Sent {
                udp_packets: 1_400,
                udp_errors: 100,
                tcp_bytes: 0,
            },
            tap_dropped: 0,
        };
        let run = line(&s, "none", 1, &analyse(&s, &raw));
        let rate = |n: f64| round(n / udp_secs, 0);
        assert_eq!(run.sent_pps, Some(rate(1_500.0)));
        assert_eq!(run.delivered_pps, Some(rate(950.0)));
        assert_eq!(run.lost_pps, Some(rate(550.0)));
        assert_eq!(run.nic_drops, Some(112));
        // Without the NIC's counters at both ends there is no figure, not a zero.
        let raw = RawRun {
            lines: raw.lines[2..].to_vec(),
            ..raw
        };
        assert_eq!(line(&s, "none", 1, &analyse(&s, &raw)).nic_drops, None);
    }

    /// An XPS run's transmit figures: packets from `TXB`/`TXE`, requeues from the tc dumps
    /// at both ends (`TCB`/`TCE`), each queue's over the run; none without the dumps.
    #[test]
    fn an_xps_run_carries_each_tx_queues_packets_and_requeues() {
        let s = scenario::named("xps-tcp", Duration::from_secs(30)).expect("xps-tcp is a scenario");
        let dump = |tag: &str, requeues: [u64; 2]| {
            vec![
                format!("{tag} qdisc mq 0: root "),
                format!("{tag}  Sent 9 bytes 2 pkt (dropped 0, overlimits 0 requeues 0) "),
                format!("{tag} qdisc fq_codel 0: parent :2 limit 10240p flows 1024 "),
                format!(
                    "{tag}  Sent 9 bytes 1 pkt (dropped 0, overlimits 0 requeues {}) ",
                    requeues[1]
                ),
                format!("{tag}  backlog 0b 0p requeues {}", requeues[1]),
                format!("{tag} qdisc fq_codel 0: parent :1 limit 10240p flows 1024 "),
                format!(
                    "{tag}  Sent 0 bytes 1 pkt (dropped 0, overlimits 0 requeues {}) ",
                    requeues[0]
                ),
                format!("{tag}  backlog 0b 0p requeues {}", requeues[0]),
            ]
        };
        let mut lines: Vec<String> = ["TXB 0 10", "TXB 1 20", "S 1.0", "E", "TXE 0 15", "TXE 1 40"]
            .map(String::from)
            .to_vec();
        lines.extend(dump("TCB", [1, 2]));
        lines.extend(dump("TCE", [1, 9]));
        let raw = RawRun {
            lines,
            sent: Sent::default(),
            tap_dropped: 0,
        };
        let run = line(&s, "steerd", 1, &analyse(&s, &raw));
        assert_eq!(run.tx_packets, Some(vec![5, 20]));
        assert_eq!(run.tx_requeues_by_queue, Some(vec![0, 7]));
        let raw = RawRun {
            lines: raw
                .lines
                .into_iter()
                .filter(|l| !l.starts_with("TCB"))
                .collect(),
            ..raw
        };
        let run = line(&s, "steerd", 1, &analyse(&s, &raw));
        assert_eq!(run.tx_requeues_by_queue, Some(vec![]));
    }
}
