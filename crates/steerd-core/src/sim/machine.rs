//! The simulated machine: CPUs, NICs with queues and IRQs, flows, and the counters the
//! readers would read.
//!
//! Each tick, every NIC's offered packets are hashed to queues by RSS: each flow falls in
//! a hash bucket, and the NIC's indirection table sends the bucket to a queue (NICs
//! without a table map buckets to queues one to one). Buckets may be skewed (most flows in
//! the buckets of a few queues) and one flow may carry most packets (an elephant, one
//! heavy bucket). Each queue interrupts the CPU its IRQ fires on, and each flow's protocol
//! work runs on that CPU or, with RPS, on `mask[hash * len >> 32]` as the kernel picks it. Costs (per
//! packet on the interrupting CPU, per packet of protocol work, an IPI batch per NAPI poll
//! that sends to another CPU) add up per CPU; a CPU asked for more than a second of work
//! per second serves a share of it and the rest is dropped: at the NIC ring for packets it
//! polls itself, in the softnet backlog (`dropped`) for packets RPS or veth queued to it.
//! Near saturation it runs out of budget (`time_squeeze`). The result is published as the
//! same counters the kernel keeps: `proc/stat` times in USER_HZ, softnet rows, the `intr`
//! totals, per-queue packet counts where the "driver" has them.
//!
//! Writes go through [`SimMachine::write`], which behaves like the kernel: managed IRQs
//! refuse (EPERM), RPS masks lose isolated CPUs, flow tables round up to powers of two,
//! indirection tables of the wrong size or naming a queue that does not exist are refused
//! (EINVAL) and a table written steers the next ticks' packets.
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

/// The indirection table size of a simulated physical NIC (i40e, ixgbe and mlx5 use 128
/// or more; ethtool's default spread fills it `i % queues`).
pub const DEFAULT_TABLE_SIZE: u32 = 128;

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
    /// RSS weight per queue; `None` for an even hash. It sets how many flows fall in the
    /// hash buckets of each queue (the buckets the default table sends to it), so a table
    /// that moves buckets moves the skew with them.
    pub skew: Option<Vec<f64>>,
    /// Number of flows.
    pub flows: u32,
    /// The share of the NIC's packets one flow carries (an elephant: one heavy hash
    /// bucket, which no table change can split); `None` when all flows are equal.
    pub elephant: Option<f64>,
    /// Entries of the RSS indirection table; `None` for a NIC without a settable table
    /// (its buckets are its queues). At least `queues` entries are kept.
    pub rss_table_size: Option<u32>,
    /// The UDP families (`udp4`, `udp6`) the NIC hashes on addresses only, as discovery
    /// reports them (`ETHTOOL_GRXFH`); shown to the policy, not used by the traffic model
    /// (an elephant stands for what such a hash makes of one host pair).
    pub udp_hashed_on_addresses: Vec<String>,
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
            elephant: None,
            rss_table_size: (queues > 1).then_some(DEFAULT_TABLE_SIZE),
            udp_hashed_on_addresses: Vec::new(),
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
            rss_table_size: None,
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
            elephant: None,
            rss_table_size: None,
            udp_hashed_on_addresses: Vec::new(),
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
    /// Every flow, in the order they were made.
    pub(super) flows: Vec<Flow>,
    /// Hash bucket -> queue: the indirection table of a NIC that has one, else bucket q is
    /// queue q.
    pub(super) table: Vec<u32>,
    /// Per queue: each flow's RPS hash and share of the NIC's traffic, as the table sends
    /// them (derived from `flows` and `table` by [`Nic::route`]).
    pub(super) queue_flows: Vec<Vec<(u32, f64)>>,
    /// Packets offered to each queue in the last tick (ground truth, before drops).
    pub(super) last_queue_packets: Vec<f64>,
    pub(super) rps: Vec<CpuSet>,
    pub(super) flow_cnt: Vec<u32>,
    pub(super) queue_packets: Vec<u64>,
}

/// One flow: its RPS hash (the kernel's `skb->hash`), the hash bucket the NIC's RSS hash
/// puts it in, and its weight (its share of the NIC's packets is its weight over the sum).
#[derive(Debug, Clone, Copy)]
pub(super) struct Flow {
    pub(super) hash: u32,
    pub(super) bucket: u32,
    pub(super) weight: f64,
}

impl Nic {
    /// Whether the NIC has an indirection table a write can change.
    pub(super) fn has_table(&self) -> bool {
        self.spec.rss_table_size.is_some()
    }

    /// The queue the default table sends a bucket to: the queue a bucket "belongs to"
    /// for skew and [`SimMachine::set_queue_shares`].
    fn home_queue(&self, bucket: u32) -> u32 {
        bucket % self.spec.queues.max(1)
    }

    /// Sorts the flows into queues through the table.
    pub(super) fn route(&mut self) {
        let queues = self.spec.queues.max(1) as usize;
        let total: f64 = self.flows.iter().map(|f| f.weight).sum();
        let mut by_queue = vec![Vec::new(); queues];
        if total > 0.0 {
            for flow in &self.flows {
                let queue = self.table.get(flow.bucket as usize).copied();
                if let Some(list) = queue.and_then(|q| by_queue.get_mut(q as usize)) {
                    list.push((flow.hash, flow.weight / total));
                }
            }
        }
        self.queue_flows = by_queue;
    }
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
    /// RPS IPIs sent this tick (each costs its sending CPU `Costs::ipi_batch_ns`).
    pub ipis: f64,
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
            let flows = make_flows(&spec, &mut rng);
            let queues = spec.queues as usize;
            let mut nic = Nic {
                first_irq,
                rate_pps: 0.0,
                flows,
                table: default_table(&spec),
                queue_flows: Vec::new(),
                last_queue_packets: vec![0.0; queues],
                rps: vec![CpuSet::new(); queues],
                flow_cnt: vec![0; queues],
                queue_packets: vec![0; queues],
                spec,
            };
            nic.route();
            built.push(nic);
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

    /// Sets each queue's share of a NIC's packets, as the default table would split them
    /// (`shares[q]` for the flows in the buckets the default table sends to queue q,
    /// shared evenly among them; shares are relative): a change of traffic, say a burst
    /// of new flows that hash to one queue. Replaces any elephant.
    pub fn set_queue_shares(&mut self, nic: &str, shares: &[f64]) {
        let Some(index) = self.nic_index(nic) else {
            return;
        };
        let nic = &mut self.nics[index];
        let mut per_queue = vec![0u32; nic.spec.queues as usize];
        for flow in &nic.flows {
            if let Some(n) = per_queue.get_mut(nic.home_queue(flow.bucket) as usize) {
                *n += 1;
            }
        }
        for i in 0..nic.flows.len() {
            let home = nic.home_queue(nic.flows[i].bucket) as usize;
            let share = shares.get(home).copied().unwrap_or(0.0).max(0.0);
            let flows = per_queue.get(home).copied().unwrap_or(1).max(1);
            nic.flows[i].weight = share / f64::from(flows);
        }
        nic.route();
    }

    /// Sets a NIC's indirection table as someone other than steerd would (`ethtool -X`
    /// by the operator; set-up, not a policy write). Same rules as a write.
    pub fn set_rss_table(&mut self, nic: &str, table: &[u32]) -> Result<(), WriteError> {
        let knob = Knob::RssIndirection {
            device: nic.to_string(),
        };
        let value = KnobValue::Table {
            indirection: table.to_vec(),
        };
        self.write(&knob, &value)
    }

    /// A NIC's indirection table, if it has one.
    pub fn rss_table(&self, nic: &str) -> Option<&[u32]> {
        let nic = &self.nics[self.nic_index(nic)?];
        nic.has_table().then_some(nic.table.as_slice())
    }

    /// Packets offered to each queue of a NIC in the last tick (ground truth).
    pub fn queue_packets(&self, nic: &str) -> Option<&[f64]> {
        Some(&self.nics[self.nic_index(nic)?].last_queue_packets)
    }

    /// The busiest queue's share of a NIC's packets in the last tick (0 when idle).
    pub fn busiest_queue_share(&self, nic: &str) -> f64 {
        let Some(packets) = self.queue_packets(nic) else {
            return 0.0;
        };
        let total: f64 = packets.iter().sum();
        if total <= 0.0 {
            return 0.0;
        }
        packets.iter().copied().fold(0.0, f64::max) / total
    }

    /// Each hash bucket's share of a NIC's packets (ground truth the kernel does not
    /// show; for tests).
    pub fn bucket_shares(&self, nic: &str) -> Option<Vec<f64>> {
        let nic = &self.nics[self.nic_index(nic)?];
        let total: f64 = nic.flows.iter().map(|f| f.weight).sum();
        let mut shares = vec![0.0; nic.table.len()];
        for flow in &nic.flows {
            if let Some(s) = shares.get_mut(flow.bucket as usize) {
                *s += flow.weight / total.max(f64::MIN_POSITIVE);
            }
        }
        Some(shares)
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
            Knob::RssIndirection { device } => {
                self.rss_table(device).map(|table| KnobValue::Table {
                    indirection: table.to_vec(),
                })
            }
            // The simulated machine has no threaded NAPI and no XPS.
            Knob::NapiThread { .. } | Knob::XpsCpus { .. } => None,
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
        use nix::errno::Errno::{EINVAL, ENOENT, EOPNOTSUPP, EOVERFLOW, EPERM};
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
            (Knob::RssIndirection { device }, KnobValue::Table { indirection }) => {
                let Some(index) = self.nic_index(device) else {
                    return fail(ENOENT, "no such device");
                };
                let nic = &mut self.nics[index];
                if !nic.has_table() {
                    return fail(EOPNOTSUPP, "no settable indirection table");
                }
                if indirection.len() != nic.table.len() {
                    return fail(EINVAL, "table size differs from the device's");
                }
                if indirection.iter().any(|&q| q >= nic.spec.queues) {
                    return fail(EINVAL, "entry names a queue the device does not have");
                }
                nic.table.clone_from(indirection);
                nic.route();
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

/// The flows of a NIC: an RPS hash each and, for the RSS hash, a queue picked weighted by
/// the skew if any (independently of the RPS hash, as a NIC's Toeplitz hash and the
/// kernel's flow hash are), then one of the buckets the default table sends to that queue,
/// from a mix of the flow's hash. All flows weigh the same but an elephant.
fn make_flows(spec: &NicSpec, rng: &mut Rng) -> Vec<Flow> {
    let n = spec.flows.max(1);
    let queues = spec.queues.max(1) as usize;
    let weights: Vec<f64> = match &spec.skew {
        Some(w) if w.len() == queues => w.clone(),
        _ => vec![1.0; queues],
    };
    let total: f64 = weights.iter().sum();
    let entries = table_size(spec);
    let mut flows = Vec::with_capacity(n as usize);
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
        let queue = queue as u32;
        let queues = queues as u32;
        // Buckets queue, queue + queues, ... below the table size.
        let buckets = (entries - queue).div_ceil(queues).max(1);
        let bucket = queue + queues * (mix(hash) % buckets);
        flows.push(Flow {
            hash,
            bucket,
            weight: 1.0,
        });
    }
    if let (Some(share), Some(first)) = (spec.elephant, flows.first_mut())
        && n > 1
    {
        let share = share.clamp(0.0, 0.999);
        first.weight = share / (1.0 - share) * f64::from(n - 1);
    }
    flows
}

/// The number of hash buckets: the table size (at least one entry per queue), or one per
/// queue for a NIC without a table.
fn table_size(spec: &NicSpec) -> u32 {
    let queues = spec.queues.max(1);
    spec.rss_table_size.map_or(queues, |size| size.max(queues))
}

/// ethtool's default spread over the NIC's queues (`knob::default_spread`).
fn default_table(spec: &NicSpec) -> Vec<u32> {
    crate::knob::default_spread(table_size(spec) as usize, spec.queues)
}

/// A 32-bit finaliser (murmur3's fmix32): which of its queue's buckets a flow falls in,
/// from its hash's low bits mixed, independent of the high bits RPS uses.
fn mix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::topo::Siblings;
    use nix::errno::Errno;

    fn machine(spec: NicSpec) -> SimMachine {
        SimMachine::new(&Shape::new(1, 4, 2, Siblings::Split), vec![spec], 7)
    }

    fn table_knob() -> Knob {
        Knob::RssIndirection {
            device: "eth0".to_string(),
        }
    }

    fn table(indirection: Vec<u32>) -> KnobValue {
        KnobValue::Table { indirection }
    }

    fn shares(sim: &SimMachine) -> Vec<f64> {
        let packets = sim.queue_packets("eth0").unwrap_or_default();
        let total: f64 = packets.iter().sum();
        packets.iter().map(|p| p / total).collect()
    }

    #[test]
    fn physical_multi_queue_nics_have_the_default_spread_and_others_no_table() {
        let sim = machine(NicSpec::physical("eth0", 0, 4));
        let expected: Vec<u32> = (0..128).map(|i| i % 4).collect();
        assert_eq!(sim.rss_table("eth0"), Some(expected.as_slice()));
        assert_eq!(sim.value(&table_knob()), Some(table(expected.clone())));
        let inventory = sim.inventory();
        assert_eq!(inventory.devices[0].rss_table.as_ref(), Some(&expected));
        assert_eq!(sim.placement().rss_tables.get("eth0"), Some(&expected));
        for spec in [
            NicSpec::physical("eth0", 0, 1),
            NicSpec::virtio("eth0", 4),
            NicSpec::veth("eth0", 4, 0),
        ] {
            let mut sim = machine(spec);
            assert_eq!(sim.rss_table("eth0"), None);
            assert_eq!(sim.value(&table_knob()), None);
            assert!(sim.placement().rss_tables.is_empty());
            let refused = sim.write(&table_knob(), &table(vec![0; 128]));
            assert_eq!(refused.map_err(|e| e.errno), Err(Errno::EOPNOTSUPP));
        }
    }

    #[test]
    fn a_table_of_the_wrong_size_or_naming_a_missing_queue_is_refused() {
        let mut sim = machine(NicSpec::physical("eth0", 0, 4));
        let before = sim.rss_table("eth0").map(<[u32]>::to_vec);
        for bad in [vec![0; 64], vec![0; 129], vec![4; 128], vec![]] {
            let refused = sim.write(&table_knob(), &table(bad));
            assert_eq!(refused.map_err(|e| e.errno), Err(Errno::EINVAL));
        }
        let wrong_kind = sim.write(&table_knob(), &KnobValue::Count(3));
        assert_eq!(wrong_kind.map_err(|e| e.errno), Err(Errno::EINVAL));
        let missing = Knob::RssIndirection {
            device: "eth9".to_string(),
        };
        let refused = sim.write(&missing, &table(vec![0; 128]));
        assert_eq!(refused.map_err(|e| e.errno), Err(Errno::ENOENT));
        assert_eq!(sim.rss_table("eth0").map(<[u32]>::to_vec), before);
    }

    #[test]
    fn skewed_buckets_fill_two_of_four_queues_and_a_table_write_spreads_them() {
        let mut spec = NicSpec::physical("eth0", 0, 4);
        spec.skew = Some(vec![0.475, 0.475, 0.025, 0.025]);
        let mut sim = machine(spec);
        sim.set_rate("eth0", 400_000.0);
        sim.step();
        let before = shares(&sim);
        assert!(before[0] + before[1] > 0.9, "{before:?}");
        // Every other entry of queues 0 and 1 goes to queues 2 and 3: the load follows.
        let spread: Vec<u32> = (0..128u32)
            .map(|i| match (i % 4, (i / 4) % 2) {
                (0, 1) => 2,
                (1, 1) => 3,
                (q, _) => q,
            })
            .collect();
        sim.write(&table_knob(), &table(spread.clone()))
            .expect("a valid table");
        assert_eq!(sim.value(&table_knob()), Some(table(spread)));
        sim.step();
        let after = shares(&sim);
        assert!(after.iter().all(|&s| s < 0.4), "{after:?}");
        assert!(sim.busiest_queue_share("eth0") < 0.4);
        let buckets = sim.bucket_shares("eth0").unwrap_or_default();
        assert_eq!(buckets.len(), 128);
        assert!((buckets.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn an_elephant_is_one_heavy_bucket_and_moves_whole() {
        let mut spec = NicSpec::physical("eth0", 0, 4);
        spec.flows = 256;
        spec.elephant = Some(0.6);
        let mut sim = machine(spec);
        let buckets = sim.bucket_shares("eth0").unwrap_or_default();
        let (heavy, share) = buckets
            .iter()
            .copied()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or_default();
        assert!(share >= 0.6, "{share}");
        sim.set_rate("eth0", 100_000.0);
        sim.step();
        let home = heavy % 4;
        assert!(shares(&sim)[home] > 0.6);
        // Sending only the heavy bucket elsewhere moves the imbalance with it.
        let mut moved: Vec<u32> = (0..128).map(|i| i % 4).collect();
        let to = (home as u32 + 1) % 4;
        moved[heavy] = to;
        sim.write(&table_knob(), &table(moved)).expect("valid");
        sim.step();
        assert!(shares(&sim)[to as usize] > 0.6);
    }

    #[test]
    fn queue_shares_change_the_traffic_without_a_table_write() {
        let mut sim = machine(NicSpec::physical("eth0", 0, 4));
        sim.set_rate("eth0", 100_000.0);
        sim.step();
        assert!(shares(&sim).iter().all(|&s| (s - 0.25).abs() < 0.05));
        sim.set_queue_shares("eth0", &[0.05, 0.05, 0.85, 0.05]);
        sim.step();
        let now = shares(&sim);
        assert!((now[2] - 0.85).abs() < 1e-9, "{now:?}");
    }

    #[test]
    fn rps_ipis_are_counted_and_charged_to_the_sending_cpu() {
        let mut sim = machine(NicSpec::physical("eth0", 0, 1));
        sim.set_rate("eth0", 200_000.0);
        sim.step();
        let alone = sim.truth().busy[0];
        assert_eq!(sim.truth().ipis, 0.0);
        let rps = Knob::RpsCpus {
            device: "eth0".to_string(),
            queue: 0,
        };
        sim.write(&rps, &KnobValue::Cpus(CpuSet::from_iter([1, 2])))
            .expect("valid");
        sim.step();
        let truth = sim.truth();
        assert!(truth.ipis > 0.0);
        // CPU 0 keeps the driver work (0.4 µs a packet) plus an IPI batch per poll.
        let driver = 200_000.0 * 400e-9;
        assert!(truth.busy[0] > driver && truth.busy[0] < alone, "{truth:?}");
    }
}
