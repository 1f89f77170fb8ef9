//! One screenful of `steerd top` as plain data: per-CPU rows, per-queue rows and the
//! daemon's recent decisions, built from the machine model and the load model.
//!
//! Why a separate, pure step: the live view, the `--once` text and the `--format json`
//! output (docs/top-json.md) all show the same numbers, so they are computed once, here,
//! without I/O, and each renderer only lays them out. Tests build frames from hand-made
//! inputs.

use std::collections::HashMap;

use serde::Serialize;

use crate::cpuset::CpuSet;
use crate::decisions::Decision;
use crate::discover::Machine;
use crate::load::Load;
use crate::model::inventory::{Irq, IrqRole, NetDevice};

/// The JSON's `schema_version` (docs/top-json.md).
pub const SCHEMA_VERSION: u32 = 1;

/// How many of the daemon's decisions a frame keeps, newest last.
pub const RECENT_DECISIONS: usize = 20;

/// One sample, ready to show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Frame {
    pub schema_version: u32,
    /// The `--root` the machine was read under.
    pub root: String,
    /// Seconds between the two samples the rates come from; 0 before the second sample.
    pub interval_secs: f64,
    /// Online CPUs (all of them are in `cpus`).
    pub cpus_online: usize,
    /// Every online CPU, busiest first: by irq+softirq share, then packets processed,
    /// then drops and squeezes, then CPU id.
    pub cpus: Vec<CpuRow>,
    /// Every receive queue of the NICs, busiest first: by packets/s, then its vector's
    /// interrupts/s, then device and queue.
    pub queues: Vec<QueueRow>,
    /// Why `packets_per_sec` and `bytes_per_sec` are unknown for every queue, when they
    /// are (a `--root` tree has no kernel to ask).
    pub queue_rates_unknown: Option<String>,
    /// The running daemon's recent decisions; `None` when no daemon answered.
    pub daemon: Option<DaemonView>,
    /// Problems that did not stop the frame (a failed per-queue sample, a vanished IRQ).
    pub warnings: Vec<String>,
}

/// One CPU's receive work over the last interval. Rates are `None` until the CPU has
/// been seen in two samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuRow {
    pub cpu: u32,
    /// irq+softirq share of the CPU's time, 0..=1 (`proc/stat`).
    pub net_share: Option<f64>,
    /// Non-idle share of the CPU's time, 0..=1 (`proc/stat`).
    pub busy_share: Option<f64>,
    /// Softnet `processed` per second: packets whose protocol work ran here.
    pub processed_per_sec: Option<f64>,
    /// Softnet `dropped` per second (backlog full).
    pub dropped_per_sec: Option<f64>,
    /// Softnet `time_squeeze` per second (budget or time ran out with work left).
    pub squeezed_per_sec: Option<f64>,
    /// The NIC queue vectors whose interrupts are delivered here, most interrupts first.
    pub vectors: Vec<VectorRow>,
}

/// A queue vector firing on a CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VectorRow {
    pub irq: u32,
    pub device: String,
    /// The queue it serves; `None` for a vector that serves all of its device's queues.
    pub queue: Option<u32>,
    /// What it serves: `rx`, `tx` or `rxtx` (a combined vector).
    pub role: IrqRole,
    /// Interrupts per second (all CPUs: the `intr` line of `proc/stat` has totals only).
    pub per_sec: Option<f64>,
    /// Its effective affinity spans several CPUs: it may fire on any of them, and is
    /// listed on each.
    pub shared: bool,
}

/// One receive queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueRow {
    pub device: String,
    pub queue: u32,
    /// The vector that serves it, if known.
    pub irq: Option<u32>,
    /// Where that vector is delivered (effective affinity, else affinity), as a cpulist.
    pub irq_cpus: Option<String>,
    /// That vector's interrupts per second.
    pub irq_per_sec: Option<f64>,
    /// With threaded NAPI, the pid of the thread that polls the queue; `None` otherwise.
    pub napi_thread_pid: Option<u32>,
    /// The CPU that thread last ran on (`proc/PID/stat`, read every frame): where the
    /// queue's receive work runs, whatever CPU its vector fires on.
    pub napi_thread_cpu: Option<u32>,
    /// The queue's RPS mask as a cpulist (empty string: RPS off); `None` if unreadable.
    pub rps_cpus: Option<String>,
    /// Received packets per second (netdev qstats or `ethtool -S`); `None` if unknown.
    pub packets_per_sec: Option<f64>,
    /// Received bytes per second; `None` if unknown.
    pub bytes_per_sec: Option<f64>,
    /// The hash or the RSS table stopped feeding it: it gets under a quarter of an even
    /// share of its busy device's packets ([`crate::silent_queues`], with the default
    /// `watermarks.busy_pps`).
    pub silent: bool,
}

/// What the running daemon said.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DaemonView {
    /// The `--metrics-listen` address it answered at.
    pub address: String,
    /// Its last decisions (at most [`RECENT_DECISIONS`]), newest last.
    pub decisions: Vec<Decision>,
}

/// Everything a frame is built from.
pub struct Inputs<'a> {
    pub root: &'a str,
    pub machine: &'a Machine,
    pub load: &'a Load,
    /// Received bytes per second by (device, queue), where known.
    pub rx_bytes_per_sec: &'a HashMap<(String, u32), f64>,
    /// The CPU each NAPI thread last ran on, by pid, as sampled for this frame (a thread
    /// not in it keeps the CPU discovery saw).
    pub napi_thread_cpus: &'a HashMap<u32, u32>,
    pub queue_rates_unknown: Option<String>,
    pub daemon: Option<DaemonView>,
    pub warnings: Vec<String>,
}

/// Whether `device` is a NIC whose queues `top` lists: it has queue vectors of its own.
pub fn shows_device(device: &NetDevice) -> bool {
    !device.irqs.is_empty() && !device.rx_queues.is_empty()
}

/// Whether an IRQ is a NIC queue vector (not a link or misc vector, not another device's).
pub fn is_queue_vector(irq: &Irq) -> bool {
    irq.device.is_some() && irq.role != IrqRole::Other
}

/// Where a vector is delivered: its effective affinity when the kernel says, else the
/// affinity it may use.
pub fn delivered_to(irq: &Irq) -> Option<&CpuSet> {
    irq.effective_affinity
        .as_ref()
        .filter(|set| !set.is_empty())
        .or(irq.affinity.as_ref())
}

impl Frame {
    /// Builds a frame; pure.
    pub fn build(inputs: Inputs<'_>) -> Frame {
        let Inputs {
            root,
            machine,
            load,
            rx_bytes_per_sec,
            napi_thread_cpus,
            queue_rates_unknown,
            daemon,
            warnings,
        } = inputs;
        let warm = load.samples > 0;
        let irq_rate = |irq: u32| warm.then(|| load.irq_rate(irq));

        let mut cpus: Vec<CpuRow> = load
            .cpus
            .iter()
            .enumerate()
            .filter(|(_, c)| c.online)
            .map(|(id, c)| {
                let rate = |value: f64| c.warm.then_some(value);
                CpuRow {
                    cpu: id as u32,
                    net_share: rate(c.net_share),
                    busy_share: rate(c.busy_share),
                    processed_per_sec: rate(c.processed_pps),
                    dropped_per_sec: rate(c.dropped_per_sec),
                    squeezed_per_sec: rate(c.squeezed_per_sec),
                    vectors: Vec::new(),
                }
            })
            .collect();
        // Row index by CPU id, to place each vector.
        let mut row_of = vec![usize::MAX; load.cpus.len()];
        for (index, row) in cpus.iter().enumerate() {
            row_of[row.cpu as usize] = index;
        }
        for irq in machine.inventory.irqs.iter().filter(|i| is_queue_vector(i)) {
            let Some(set) = delivered_to(irq) else {
                continue;
            };
            let shared = set.len() > 1;
            for cpu in set.iter() {
                let Some(&index) = row_of.get(cpu as usize).filter(|&&i| i != usize::MAX) else {
                    continue;
                };
                cpus[index].vectors.push(VectorRow {
                    irq: irq.irq,
                    device: irq.device.clone().unwrap_or_default(),
                    queue: irq.queue,
                    role: irq.role,
                    per_sec: irq_rate(irq.irq),
                    shared,
                });
            }
        }
        for row in &mut cpus {
            row.vectors.sort_by(|a, b| {
                b.per_sec
                    .unwrap_or(0.0)
                    .total_cmp(&a.per_sec.unwrap_or(0.0))
                    .then(a.irq.cmp(&b.irq))
            });
        }
        cpus.sort_by(|a, b| {
            let key = |r: &CpuRow| {
                (
                    r.net_share.unwrap_or(0.0),
                    r.processed_per_sec.unwrap_or(0.0),
                    r.dropped_per_sec.unwrap_or(0.0) + r.squeezed_per_sec.unwrap_or(0.0),
                )
            };
            let (ka, kb) = (key(a), key(b));
            kb.0.total_cmp(&ka.0)
                .then(kb.1.total_cmp(&ka.1))
                .then(kb.2.total_cmp(&ka.2))
                .then(a.cpu.cmp(&b.cpu))
        });

        let mut queues = Vec::new();
        let silent_floor = crate::policy::work_floor(&crate::config::Config::default());
        for device in machine.inventory.devices.iter().filter(|d| shows_device(d)) {
            for queue in &device.rx_queues {
                let irq = queue.irq.and_then(|n| machine.inventory.irq(n));
                let known = queue_rates_unknown.is_none() && warm;
                let thread = queue.napi_thread.as_ref();
                queues.push(QueueRow {
                    device: device.name.clone(),
                    queue: queue.index,
                    irq: queue.irq,
                    irq_cpus: irq.and_then(delivered_to).map(CpuSet::to_list),
                    irq_per_sec: queue.irq.and_then(irq_rate),
                    napi_thread_pid: thread.map(|t| t.pid),
                    napi_thread_cpu: thread
                        .and_then(|t| napi_thread_cpus.get(&t.pid).copied().or(t.cpu)),
                    rps_cpus: queue.rps_cpus.as_ref().map(CpuSet::to_list),
                    packets_per_sec: known
                        .then(|| load.rx_queue_pps(&device.name, queue.index))
                        .flatten(),
                    bytes_per_sec: known
                        .then(|| {
                            rx_bytes_per_sec
                                .get(&(device.name.clone(), queue.index))
                                .copied()
                        })
                        .flatten(),
                    silent: false,
                });
            }
            if let Some(silent) = load
                .rx_queues
                .get(&device.name)
                .filter(|_| queue_rates_unknown.is_none() && warm)
                .and_then(|rates| crate::silent_queues::find(rates, silent_floor))
            {
                for row in queues.iter_mut().filter(|r| r.device == device.name) {
                    row.silent = silent.queues.contains(&row.queue);
                }
            }
        }
        queues.sort_by(|a, b| {
            let pps = |q: &QueueRow| q.packets_per_sec.unwrap_or(0.0);
            let ips = |q: &QueueRow| q.irq_per_sec.unwrap_or(0.0);
            pps(b)
                .total_cmp(&pps(a))
                .then(ips(b).total_cmp(&ips(a)))
                .then(a.device.cmp(&b.device))
                .then(a.queue.cmp(&b.queue))
        });

        Frame {
            schema_version: SCHEMA_VERSION,
            root: root.to_string(),
            interval_secs: if warm { load.interval_secs } else { 0.0 },
            cpus_online: cpus.len(),
            cpus,
            queues,
            queue_rates_unknown,
            daemon,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::CpuLoad;
    use crate::model::inventory::{DeviceKind, Inventory, RxQueue};
    use crate::model::topology::Topology;

    fn cpu(net_share: f64, processed: f64) -> CpuLoad {
        CpuLoad {
            online: true,
            warm: true,
            processed_pps: processed,
            net_share,
            busy_share: net_share,
            ..CpuLoad::default()
        }
    }

    fn vector(irq: u32, queue: u32, effective: &str) -> Irq {
        Irq {
            device: Some("eth0".into()),
            queue: Some(queue),
            role: IrqRole::Rxtx,
            affinity: CpuSet::parse_list("0-3").ok(),
            effective_affinity: CpuSet::parse_list(effective).ok(),
            ..Irq::bare(irq, &format!("eth0-TxRx-{queue}"))
        }
    }

    fn machine() -> Machine {
        let device = NetDevice {
            ifindex: Some(2),
            driver: Some("ixgbe".into()),
            rx_queues: (0..2)
                .map(|q| RxQueue {
                    rps_cpus: Some(CpuSet::new()),
                    irq: Some(30 + q),
                    ..RxQueue::bare(q)
                })
                .collect(),
            irqs: vec![30, 31],
            ..NetDevice::bare("eth0", DeviceKind::Physical)
        };
        Machine {
            topology: Topology {
                nr_cpu_ids: 4,
                possible: CpuSet::first_n(4),
                present: CpuSet::first_n(4),
                online: CpuSet::first_n(4),
                online_from_file: true,
                isolated: CpuSet::new(),
                nohz_full: CpuSet::new(),
                isolated_partitions: CpuSet::new(),
                cpus: Vec::new(),
                nodes: Vec::new(),
            },
            inventory: Inventory {
                devices: vec![device],
                irqs: vec![vector(30, 0, "2"), vector(31, 1, "1-2")],
                rps_sock_flow_entries: None,
            },
            warnings: Vec::new(),
        }
    }

    /// A load after its second sample (rates known), with these CPUs and no interrupts.
    fn warm_load(cpus: Vec<CpuLoad>) -> Load {
        let mut load = Load::new();
        load.samples = 1;
        load.interval_secs = 1.0;
        load.cpus = cpus;
        load.irq_rates = vec![0.0; 32];
        load
    }

    #[test]
    fn the_busiest_cpu_comes_first_with_the_vectors_delivered_to_it() {
        let machine = machine();
        let mut load = warm_load(vec![
            cpu(0.0, 0.0),
            cpu(0.1, 10.0),
            cpu(0.6, 900.0),
            cpu(0.1, 20.0),
        ]);
        load.irq_rates[30] = 500.0;
        load.irq_rates[31] = 50.0;
        let frame = Frame::build(Inputs {
            root: "/x",
            machine: &machine,
            load: &load,
            rx_bytes_per_sec: &HashMap::new(),
            napi_thread_cpus: &HashMap::new(),
            queue_rates_unknown: Some("a fake root".into()),
            daemon: None,
            warnings: Vec::new(),
        });
        let order: Vec<u32> = frame.cpus.iter().map(|r| r.cpu).collect();
        assert_eq!(order, vec![2, 3, 1, 0]);
        let on_2: Vec<(u32, bool)> = frame.cpus[0]
            .vectors
            .iter()
            .map(|v| (v.irq, v.shared))
            .collect();
        assert_eq!(on_2, vec![(30, false), (31, true)]);
        assert_eq!(frame.cpus[2].vectors.len(), 1, "CPU 1 has the shared one");
        assert_eq!(
            frame.queues[0].queue, 0,
            "the queue with more interrupts first"
        );
        assert_eq!(frame.queues[0].irq_cpus.as_deref(), Some("2"));
        assert_eq!(frame.queues[0].rps_cpus.as_deref(), Some(""));
        assert_eq!(frame.queues[0].packets_per_sec, None);
    }

    /// igb's silent queues (issue 31): a queue the NIC's hash sends no flow while its
    /// device is busy reads "silent" beside its rate; before the second sample, or where
    /// per-queue rates are unknown, no queue does.
    #[test]
    fn a_queue_the_hash_sends_nothing_is_marked_silent() {
        let machine = machine();
        let mut load = warm_load(vec![
            cpu(0.0, 0.0),
            cpu(0.1, 10.0),
            cpu(0.6, 40_000.0),
            cpu(0.0, 0.0),
        ]);
        load.rx_queues
            .insert("eth0".into(), vec![Some(40_000.0), Some(0.0)]);
        let build = |load: &Load, unknown: Option<String>| {
            Frame::build(Inputs {
                root: "/",
                machine: &machine,
                load,
                rx_bytes_per_sec: &HashMap::new(),
                napi_thread_cpus: &HashMap::new(),
                queue_rates_unknown: unknown,
                daemon: None,
                warnings: Vec::new(),
            })
        };
        let frame = build(&load, None);
        let silent: Vec<(u32, bool)> = frame.queues.iter().map(|q| (q.queue, q.silent)).collect();
        assert_eq!(silent, vec![(0, false), (1, true)]);
        let rx_1 = frame.queues.iter().find(|q| q.queue == 1).unwrap();
        assert!(
            super::super::text::queue_cells(rx_1)[7].ends_with(" silent"),
            "{:?}",
            super::super::text::queue_cells(rx_1)
        );
        assert!(
            build(&load, Some("a fake root".into()))
                .queues
                .iter()
                .all(|q| !q.silent)
        );
        load.samples = 0;
        assert!(build(&load, None).queues.iter().all(|q| !q.silent));
    }

    #[test]
    fn rates_are_unknown_before_the_second_sample() {
        let machine = machine();
        let mut load = Load::new();
        load.cpus = vec![CpuLoad {
            online: true,
            ..CpuLoad::default()
        }];
        let frame = Frame::build(Inputs {
            root: "/",
            machine: &machine,
            load: &load,
            rx_bytes_per_sec: &HashMap::new(),
            napi_thread_cpus: &HashMap::new(),
            queue_rates_unknown: None,
            daemon: None,
            warnings: Vec::new(),
        });
        assert_eq!(frame.cpus[0].net_share, None);
        assert_eq!(frame.queues[0].irq_per_sec, None);
        assert_eq!(frame.interval_secs, 0.0);
    }
}
