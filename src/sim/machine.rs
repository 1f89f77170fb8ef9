//! The simulated machine: CPUs, NICs with queues and IRQs, flows, and the counters the
//! readers would read.
//!
//! Each tick, every NIC's offered packets are hashed to queues (RSS, optionally skewed),
//! each queue interrupts the CPU its IRQ fires on, and each flow's protocol work runs on
//! that CPU or, with RPS, on `mask[hash * len >> 32]` as the kernel picks it. Costs (per
//! packet on the interrupting CPU, per packet of protocol work, an IPI batch per NAPI poll
//! that sends to another CPU) add up per CPU; a CPU asked for more than a second of work
//! per second serves a share of it and the rest is dropped: at the NIC ring for packets it
//! polls itself, in the softnet backlog (`dropped`) for packets RPS or veth queued to it.
//! Near saturation it runs out of budget (`time_squeeze`). The result is published as the
//! same counters the kernel keeps: `proc/stat` times in USER_HZ, softnet rows, the `intr`
//! totals, per-queue packet counts where the "driver" has them.
//!
//! Writes go through [`SimMachine::write`], which behaves like the kernel: managed IRQs
//! refuse (EPERM), RPS masks lose isolated CPUs, flow tables round up to powers of two.
//! The tick itself is in `traffic.rs`; what the policy sees (inventory, placement,
//! snapshot) in `view.rs`.

use std::collections::HashMap;

use super::rng::Rng;
use super::topo::Shape;
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};
use crate::model::inventory::DeviceKind;
use crate::model::snapshot::SoftnetRow;
use crate::model::topology::Topology;

/// What receive work costs, in nanoseconds.
#[derive(Debug, Clone)]
pub struct Costs {
    /// Per packet on the interrupting CPU (driver poll, GRO, RPS enqueue).
    pub irq_ns: f64,
    /// Per packet of protocol work (IP, UDP/TCP, socket), where RPS puts it.
    pub proto_ns: f64,
    /// Per NAPI poll that sends RPS IPIs (about 7 µs per batch; docs/kernel.md, "RPS").
    pub ipi_batch_ns: f64,
    /// Per packet on a veth sender (transmit path), charged as system time.
    pub veth_xmit_ns: f64,
    /// Polls per second a queue does at low rates (one packet per interrupt) before
    /// batching starts.
    pub min_polls: f64,
    /// Packets per poll at high rates (the NAPI weight).
    pub batch: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            irq_ns: 400.0,
            proto_ns: 1600.0,
            ipi_batch_ns: 7000.0,
            veth_xmit_ns: 800.0,
            min_polls: 10_000.0,
            batch: 64.0,
        }
    }
}

impl Costs {
    /// NAPI polls (and interrupts) per second for a queue receiving `pps`.
    pub fn polls(&self, pps: f64) -> f64 {
        if pps <= self.min_polls {
            pps
        } else {
            (pps / self.batch).max(self.min_polls)
        }
    }
}

/// A NIC to simulate.
#[derive(Debug, Clone)]
pub struct NicSpec {
    pub name: String,
    pub kind: DeviceKind,
    pub driver: String,
    /// NUMA node; `None` for virtual devices.
    pub node: Option<u32>,
    pub queues: u32,
    /// Whether per-queue packet counters exist (qstats / ethtool -S).
    pub queue_counters: bool,
    /// Queues whose IRQ is kernel-managed.
    pub managed_queues: Vec<u32>,
    /// For veth: the CPU the sender runs on (all receive work starts there).
    pub sender_cpu: Option<u32>,
    /// RSS weight per queue; `None` for an even hash.
    pub skew: Option<Vec<f64>>,
    /// Number of flows.
    pub flows: u32,
    /// Separate receive and transmit vectors per queue (virtio_net's `input.N` and
    /// `output.N`) instead of one combined `TxRx` vector.
    pub separate_tx: bool,
}

impl NicSpec {
    /// A physical multi-queue NIC with per-queue counters.
    pub fn physical(name: &str, node: u32, queues: u32) -> Self {
        NicSpec {
            name: name.to_string(),
            kind: DeviceKind::Physical,
            driver: "ixgbe".to_string(),
            node: Some(node),
            queues,
            queue_counters: true,
            managed_queues: Vec::new(),
            sender_cpu: None,
            skew: None,
            flows: 1024,
            separate_tx: false,
        }
    }

    /// A virtio_net NIC in a guest: no NUMA node, an `input.N` (rx) and an `output.N` (tx)
    /// MSI-X vector per queue pair, per-queue counters (`ethtool -S`).
    pub fn virtio(name: &str, queues: u32) -> Self {
        NicSpec {
            kind: DeviceKind::Virtio,
            driver: "virtio_net".to_string(),
            node: None,
            separate_tx: true,
            ..NicSpec::physical(name, 0, queues)
        }
    }

    /// A veth whose peer's sender runs on `sender_cpu`.
    pub fn veth(name: &str, queues: u32, sender_cpu: u32) -> Self {
        NicSpec {
            name: name.to_string(),
            kind: DeviceKind::Veth,
            driver: "veth".to_string(),
            node: None,
            queues,
            queue_counters: false,
            managed_queues: Vec::new(),
            sender_cpu: Some(sender_cpu),
            skew: None,
            flows: 256,
            separate_tx: false,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Nic {
    pub(super) spec: NicSpec,
    /// IRQ of queue q is `first_irq + q`, for NICs with IRQs; with separate transmit
    /// vectors, queue q's tx vector is `first_irq + queues + q`; the non-queue vector
    /// comes last.
    pub(super) first_irq: Option<u32>,
    pub(super) rate_pps: f64,
    /// Per queue: each flow's RPS hash and share of the NIC's traffic.
    pub(super) queue_flows: Vec<Vec<(u32, f64)>>,
    pub(super) rps: Vec<CpuSet>,
    pub(super) flow_cnt: Vec<u32>,
    pub(super) queue_packets: Vec<u64>,
}

/// A non-NIC IRQ (timer, storage...).
#[derive(Debug, Clone)]
pub struct OtherIrq {
    pub irq: u32,
    pub name: String,
    pub managed: bool,
    pub rate: f64,
}

/// Ground truth of one tick, for judging a policy.
#[derive(Debug, Clone, Default)]
pub struct TickTruth {
    /// Busy share of each CPU, 0..1 (receive work plus application load).
    pub busy: Vec<f64>,
    /// Packets processed per CPU.
    pub processed: Vec<f64>,
    /// Packets dropped anywhere this tick.
    pub dropped: f64,
    /// Packets offered this tick.
    pub offered: f64,
}

impl TickTruth {
    /// The busiest CPU and its busy share.
    pub fn hottest(&self) -> (u32, f64) {
        self.busy
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or((0, 0.0), |(cpu, busy)| (cpu as u32, *busy))
    }

    /// Mean busy share of the CPUs doing at least 5 % work.
    pub fn mean_loaded(&self) -> f64 {
        let loaded: Vec<f64> = self.busy.iter().copied().filter(|&b| b >= 0.05).collect();
        if loaded.is_empty() {
            0.0
        } else {
            loaded.iter().sum::<f64>() / loaded.len() as f64
        }
    }
}

/// Cumulative counters, as the kernel keeps them.
#[derive(Debug, Clone, Default)]
pub(super) struct Counters {
    pub(super) softnet: Vec<SoftnetRow>,
    /// user, system, idle, softirq in USER_HZ ticks, kept fractional.
    pub(super) times: Vec<[f64; 4]>,
    pub(super) irq_totals: Vec<u64>,
}

/// The simulated machine.
#[derive(Debug, Clone)]
pub struct SimMachine {
    pub topology: Topology,
    pub costs: Costs,
    /// Multiplicative noise on each queue's rate per tick: 0.1 means ±10 %.
    pub noise: f64,
    /// Application (non-network) busy share per CPU.
    pub app_load: Vec<f64>,
    pub(super) nics: Vec<Nic>,
    pub(super) others: Vec<OtherIrq>,
    pub(super) affinity: HashMap<u32, CpuSet>,
    /// Models the 6.1 x86 MSI quirk: `effective_affinity` is updated only when the vector
    /// next fires, so after a write it keeps naming the old CPU while the vector is idle.
    pub stale_effective: bool,
    /// The `effective_affinity` the kernel reports, where it differs from where the IRQ
    /// fires (stale).
    pub(super) reported_effective: HashMap<u32, u32>,
    /// Per IRQ, the CPU its interrupts arrived on in the last tick (IRQs that fired).
    pub(super) fired_on: HashMap<u32, u32>,
    pub(super) sock_flow_entries: u32,
    pub(super) rng: Rng,
    pub(super) tick_ns: u64,
    pub(super) now_ns: u64,
    pub(super) counters: Counters,
    pub(super) last: TickTruth,
}

/// Why the simulated kernel refused a write: the errno the real kernel returns in that
/// case, so the engine classifies and reacts to it as it would to the real one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteError {
    pub errno: nix::errno::Errno,
    pub why: &'static str,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.errno, self.why)
    }
}

impl SimMachine {
    /// A machine of `shape` with these NICs; IRQs are numbered from 32 in NIC order.
    pub fn new(shape: &Shape, nics: Vec<NicSpec>, seed: u64) -> Self {
        let topology = shape.topology();
        let nr = topology.nr_cpu_ids as usize;
        let mut rng = Rng::new(seed);
        let mut next_irq = 32;
        let mut built = Vec::new();
        for spec in nics {
            let first_irq = if spec.kind == DeviceKind::Veth {
                None
            } else {
                let first = next_irq;
                let vectors = if spec.separate_tx { 2 } else { 1 };
                next_irq += vectors * spec.queues + 1;
                Some(first)
            };
            let queue_flows = make_flows(&spec, &mut rng);
            let queues = spec.queues as usize;
            built.push(Nic {
                first_irq,
                rate_pps: 0.0,
                queue_flows,
                rps: vec![CpuSet::new(); queues],
                flow_cnt: vec![0; queues],
                queue_packets: vec![0; queues],
                spec,
            });
        }
        let mut machine = SimMachine {
            costs: Costs::default(),
            noise: 0.0,
            app_load: vec![0.0; nr],
            nics: built,
            others: Vec::new(),
            affinity: HashMap::new(),
            stale_effective: false,
            reported_effective: HashMap::new(),
            fired_on: HashMap::new(),
            sock_flow_entries: 0,
            rng,
            tick_ns: 1_000_000_000,
            now_ns: 0,
            counters: Counters::default(),
            last: TickTruth::default(),
            topology,
        };
        // Drivers spread queue IRQs over the node's CPUs in order (queue q -> q-th CPU).
        for index in 0..machine.nics.len() {
            let node_cpus = machine.home(index);
            let list: Vec<u32> = node_cpus.iter().collect();
            for q in 0..machine.nics[index].spec.queues {
                let cpu = list[q as usize % list.len().max(1)];
                for irq in [machine.queue_irq(index, q), machine.tx_irq(index, q)]
                    .into_iter()
                    .flatten()
                {
                    machine.affinity.insert(irq, CpuSet::from_iter([cpu]));
                }
            }
            if let Some(misc) = machine.misc_irq(index) {
                // The NIC's non-queue (link/misc/config) vector.
                machine.affinity.insert(misc, node_cpus.clone());
            }
        }
        machine.others.push(OtherIrq {
            irq: 1,
            name: "timer".to_string(),
            managed: true,
            rate: 100.0,
        });
        machine.affinity.insert(1, CpuSet::from_iter([0]));
        let online = machine.topology.online.clone();
        machine.others.push(OtherIrq {
            irq: 9,
            name: "acpi".to_string(),
            managed: false,
            rate: 1.0,
        });
        machine.affinity.insert(9, online);
        machine.counters = machine.zero_counters();
        machine
    }

    fn zero_counters(&self) -> Counters {
        let nr = self.topology.nr_cpu_ids as usize;
        let max_irq = self.affinity.keys().copied().max().unwrap_or(0) as usize;
        Counters {
            softnet: (0..nr as u32)
                .map(|cpu| SoftnetRow {
                    cpu,
                    received_rps: Some(0),
                    flow_limit_count: Some(0),
                    backlog_len: Some(0),
                    ..SoftnetRow::default()
                })
                .collect(),
            times: vec![[0.0; 4]; nr],
            irq_totals: vec![0; max_irq + 1],
        }
    }

    /// The NUMA-local CPUs of a NIC (all online CPUs for virtual devices).
    pub(super) fn home(&self, nic: usize) -> CpuSet {
        match self.nics[nic].spec.node {
            Some(node) => self
                .topology
                .node_cpus(node)
                .intersection(&self.topology.online),
            None => self.topology.online.clone(),
        }
    }

    pub(super) fn queue_irq(&self, nic: usize, queue: u32) -> Option<u32> {
        self.nics[nic].first_irq.map(|first| first + queue)
    }

    /// The separate transmit vector of a queue, for NICs that have them.
    pub(super) fn tx_irq(&self, nic: usize, queue: u32) -> Option<u32> {
        let nic = &self.nics[nic];
        let first = nic.first_irq.filter(|_| nic.spec.separate_tx)?;
        Some(first + nic.spec.queues + queue)
    }

    /// The non-queue vector of a NIC with IRQs.
    pub(super) fn misc_irq(&self, nic: usize) -> Option<u32> {
        let nic = &self.nics[nic];
        let vectors = if nic.spec.separate_tx { 2 } else { 1 };
        Some(nic.first_irq? + vectors * nic.spec.queues)
    }

    /// The transmit vector serving a queue of a NIC with separate rx and tx vectors.
    pub fn tx_irq_of(&self, nic: &str, queue: u32) -> Option<u32> {
        self.tx_irq(self.nic_index(nic)?, queue)
    }

    /// Sets what `effective_affinity` reports for an IRQ until it next fires (set-up:
    /// the stale value a 6.1 kernel shows after someone else's write). Only kept while
    /// [`SimMachine::stale_effective`] is on.
    pub fn set_reported_effective(&mut self, irq: u32, cpu: u32) {
        self.reported_effective.insert(irq, cpu);
    }

    /// The CPU `effective_affinity` names: where the IRQ fires, or a stale CPU (see
    /// [`SimMachine::stale_effective`]).
    pub fn reported_effective(&self, irq: u32) -> Option<u32> {
        match self.reported_effective.get(&irq) {
            Some(&cpu) if self.stale_effective => Some(cpu),
            _ => self.effective_cpu(irq),
        }
    }

    /// The CPU an IRQ's interrupts arrived on in the last tick, if it fired.
    pub fn fired_on(&self, irq: u32) -> Option<u32> {
        self.fired_on.get(&irq).copied()
    }

    fn nic_index(&self, name: &str) -> Option<usize> {
        self.nics.iter().position(|n| n.spec.name == name)
    }

    /// The IRQ serving a queue of a NIC.
    pub fn irq_of(&self, nic: &str, queue: u32) -> Option<u32> {
        self.queue_irq(self.nic_index(nic)?, queue)
    }

    /// Sets a NIC's offered load.
    pub fn set_rate(&mut self, nic: &str, pps: f64) {
        if let Some(index) = self.nic_index(nic) {
            self.nics[index].rate_pps = pps;
        }
    }

    /// Sets every queue IRQ of a NIC to fire on `cpus` (set-up, not a policy write).
    pub fn pin_queues(&mut self, nic: &str, cpus: &[u32]) {
        let Some(index) = self.nic_index(nic) else {
            return;
        };
        for q in 0..self.nics[index].spec.queues {
            if let Some(irq) = self.queue_irq(index, q) {
                let cpu = cpus[q as usize % cpus.len()];
                self.affinity.insert(irq, CpuSet::from_iter([cpu]));
            }
        }
    }

    /// Adds a non-NIC IRQ (storage, USB...) with the next free number; returns it.
    pub fn add_other_irq(&mut self, name: &str, managed: bool, affinity: CpuSet, rate: f64) -> u32 {
        let irq = self.affinity.keys().copied().max().unwrap_or(0) + 1;
        self.others.push(OtherIrq {
            irq,
            name: name.to_string(),
            managed,
            rate,
        });
        self.affinity.insert(irq, affinity);
        if self.counters.irq_totals.len() <= irq as usize {
            self.counters.irq_totals.resize(irq as usize + 1, 0);
        }
        irq
    }

    /// Where an IRQ is allowed to fire.
    pub fn affinity(&self, irq: u32) -> Option<&CpuSet> {
        self.affinity.get(&irq)
    }

    /// The CPU an IRQ fires on: the lowest online CPU of its mask.
    pub fn effective_cpu(&self, irq: u32) -> Option<u32> {
        self.affinity
            .get(&irq)?
            .intersection(&self.topology.online)
            .first()
    }

    /// A knob's value as the simulated kernel holds it (what reading it back gives).
    pub fn value(&self, knob: &Knob) -> Option<KnobValue> {
        match knob {
            Knob::IrqAffinity { irq } => self.affinity(*irq).cloned().map(KnobValue::Cpus),
            Knob::RpsCpus { device, queue } => {
                self.rps_mask(device, *queue).cloned().map(KnobValue::Cpus)
            }
            Knob::RpsFlowCnt { device, queue } => self.nics[self.nic_index(device)?]
                .flow_cnt
                .get(*queue as usize)
                .map(|&n| KnobValue::Count(n)),
            Knob::RpsSockFlowEntries => Some(KnobValue::Count(self.sock_flow_entries)),
            // The simulated machine has no threaded NAPI, and (yet) no RSS tables.
            Knob::NapiThread { .. } | Knob::RssIndirection { .. } => None,
        }
    }

    /// A queue's RPS mask.
    pub fn rps_mask(&self, nic: &str, queue: u32) -> Option<&CpuSet> {
        self.nics[self.nic_index(nic)?].rps.get(queue as usize)
    }

    /// Ground truth of the last tick.
    pub fn truth(&self) -> &TickTruth {
        &self.last
    }

    /// The current time, CLOCK_MONOTONIC-like.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Writes a value, as the kernel would accept or refuse it.
    pub fn write(&mut self, target: &Knob, value: &KnobValue) -> Result<(), WriteError> {
        use nix::errno::Errno::{EINVAL, ENOENT, EOVERFLOW, EPERM};
        let fail = |errno, why| Err(WriteError { errno, why });
        match (target, value) {
            (Knob::IrqAffinity { irq }, KnobValue::Cpus(cpus)) => {
                if !self.affinity.contains_key(irq) {
                    return fail(ENOENT, "no such IRQ");
                }
                if self.irq_is_managed(*irq) {
                    return fail(EPERM, "kernel-managed IRQ");
                }
                if !cpus.intersects(&self.topology.online) {
                    return fail(EINVAL, "no online CPU in the mask");
                }
                if cpus.last().is_some_and(|c| c >= self.topology.nr_cpu_ids) {
                    return fail(EOVERFLOW, "mask wider than nr_cpu_ids");
                }
                if self.stale_effective
                    && !self.reported_effective.contains_key(irq)
                    && let Some(before) = self.effective_cpu(*irq)
                {
                    // The kernel updates effective_affinity at the next interrupt.
                    self.reported_effective.insert(*irq, before);
                }
                self.affinity.insert(*irq, cpus.clone());
                Ok(())
            }
            (Knob::RpsCpus { device, queue }, KnobValue::Cpus(cpus)) => {
                let housekeeping = self.topology.online.difference(&self.topology.isolated);
                let Some(index) = self.nic_index(device) else {
                    return fail(ENOENT, "no such device");
                };
                let Some(slot) = self.nics[index].rps.get_mut(*queue as usize) else {
                    return fail(ENOENT, "no such queue");
                };
                let kept = cpus.intersection(&housekeeping);
                if !cpus.is_empty() && kept.is_empty() {
                    return fail(EINVAL, "no housekeeping CPU in the mask");
                }
                *slot = kept;
                Ok(())
            }
            (Knob::RpsFlowCnt { device, queue }, KnobValue::Count(n)) => {
                let Some(index) = self.nic_index(device) else {
                    return fail(ENOENT, "no such device");
                };
                let Some(slot) = self.nics[index].flow_cnt.get_mut(*queue as usize) else {
                    return fail(ENOENT, "no such queue");
                };
                *slot = if *n == 0 { 0 } else { n.next_power_of_two() };
                Ok(())
            }
            (Knob::RpsSockFlowEntries, KnobValue::Count(n)) => {
                self.sock_flow_entries = if *n == 0 { 0 } else { n.next_power_of_two() };
                Ok(())
            }
            _ => fail(EINVAL, "wrong kind of value"),
        }
    }

    pub(super) fn irq_is_managed(&self, irq: u32) -> bool {
        if let Some(other) = self.others.iter().find(|o| o.irq == irq) {
            return other.managed;
        }
        self.nics.iter().any(|nic| {
            nic.first_irq.is_some_and(|first| {
                irq >= first
                    && irq < first + nic.spec.queues
                    && nic.spec.managed_queues.contains(&(irq - first))
            })
        })
    }
}

/// Flows of a NIC, by queue: an RPS hash each and an even share of the traffic; the queue
/// is picked by RSS, weighted by the skew if any (independently of the RPS hash, as a NIC's
/// Toeplitz hash and the kernel's flow hash are).
fn make_flows(spec: &NicSpec, rng: &mut Rng) -> Vec<Vec<(u32, f64)>> {
    let n = spec.flows.max(1);
    let queues = spec.queues.max(1) as usize;
    let weights: Vec<f64> = match &spec.skew {
        Some(w) if w.len() == queues => w.clone(),
        _ => vec![1.0; queues],
    };
    let total: f64 = weights.iter().sum();
    let mut by_queue = vec![Vec::new(); queues];
    for _ in 0..n {
        let hash = rng.next_u32();
        let mut pick = rng.unit() * total;
        let mut queue = queues - 1;
        for (q, w) in weights.iter().enumerate() {
            if pick < *w {
                queue = q;
                break;
            }
            pick -= w;
        }
        by_queue[queue].push((hash, 1.0 / f64::from(n)));
    }
    by_queue
}
