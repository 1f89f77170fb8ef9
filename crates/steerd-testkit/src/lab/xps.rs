//! The transmit steering scenario (issue 33, `xps: follow`): 4 TCP flows into the guest,
//! every input vector on CPU0, steerd with `xps: follow`. The guest answers every segment
//! with ACKs sent from the CPU that processed it, so where its transmit queues' vectors and
//! XPS masks are decides which transmit queue each ACK goes out on.
//!
//! Figures, from the guest's last sample and its `ethtool -S` counters: how many queues
//! agree with the receive placement (the transmit vector fires on the receive vector's
//! CPU, and that CPU is in the transmit queue's XPS mask), the XPS masks at the end, the
//! packets each transmit queue sent over the run and its qdisc's requeues over the run
//! (`tc -s qdisc`, `report::qdisc`): where ACKs went, and whether any queue pushed back.

use std::collections::BTreeMap;

use super::scenario::{Scenario, base, udp};
use super::traffic::Phase;

/// The configuration steerd runs with in the guest.
const CONFIG: &str = "xps: follow";
/// The scenarios' names.
const NAME: &str = "xps-tcp";
const REVERSED: &str = "xps-tcp-reversed";

/// The scenarios: every input vector on CPU0; and every queue's vectors on CPU 3 - N, a
/// spread the driver's XPS (queue N on CPU N, virtio-net) does not match.
pub fn all() -> Vec<Scenario> {
    let tcp = |name, what, placement: &str| Scenario {
        phases: vec![Phase {
            tcp_ports: vec![5001, 5002, 5003, 5004],
            ..udp(1, 30, 0, 0)
        }],
        setup: format!(
            "mkdir -p /etc/steerd; echo '{CONFIG}' > /etc/steerd/steerd.yaml; {placement}"
        ),
        steerd_args: "--config /etc/steerd/steerd.yaml".into(),
        ..base(name, what)
    };
    vec![
        tcp(
            NAME,
            "every input vector on CPU0, 4 TCP flows; steerd with xps: follow",
            "pin_inputs 0",
        ),
        tcp(
            REVERSED,
            "queue N's vectors on CPU 3 - N (the driver's XPS has tx-N on CPU N), 4 TCP flows; steerd with xps: follow",
            "nic_vectors | while read -r irq kind q; do echo $((3 - q)) > /proc/irq/$irq/smp_affinity_list; done",
        ),
    ]
}

/// Whether the scenario is one of these.
pub fn is_xps(s: &Scenario) -> bool {
    s.name == NAME || s.name == REVERSED
}

/// One queue as the last sample shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSides {
    /// The CPU the receive (input) vector fires on, and the transmit (output) vector's.
    pub rx_cpu: Option<u32>,
    pub tx_cpu: Option<u32>,
    /// The transmit queue's XPS mask, as a CPU list (`None`: no file).
    pub xps: Option<Vec<u32>>,
}

/// The run's transmit figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XpsFigures {
    /// Queues whose transmit vector fires on the receive vector's CPU and whose XPS mask
    /// holds that CPU.
    pub agreeing: usize,
    pub queues: usize,
    /// The XPS masks at the end, by queue, as CPU lists.
    pub masks: Vec<String>,
    /// Packets each transmit queue sent over the run.
    pub tx_packets: Vec<u64>,
    /// Requeues of each transmit queue's qdisc over the run (empty: the guest's tc
    /// printed none).
    pub tx_requeues: Vec<u64>,
}

/// The figures from the last sample's queues, and the packets each transmit queue sent and
/// its qdisc's requeues over the run.
pub fn figures(
    queues: &BTreeMap<u32, QueueSides>,
    tx_packets: Vec<u64>,
    tx_requeues: Vec<u64>,
) -> XpsFigures {
    let agreeing = queues
        .values()
        .filter(|q| match (q.rx_cpu, q.tx_cpu, &q.xps) {
            (Some(rx), Some(tx), Some(xps)) => rx == tx && xps.contains(&rx),
            _ => false,
        })
        .count();
    let masks = queues
        .values()
        .map(|q| match &q.xps {
            None => "-".to_string(),
            Some(cpus) if cpus.is_empty() => "none".to_string(),
            Some(cpus) => cpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        })
        .collect();
    XpsFigures {
        agreeing,
        queues: queues.len(),
        masks,
        tx_packets,
        tx_requeues,
    }
}
