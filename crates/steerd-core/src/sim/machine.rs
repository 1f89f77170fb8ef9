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
//! snapshot) in `view.rs`; the NICs, their flows and tables in `nic.rs`; reading knobs
//! back and the write rules in `knobs.rs`.

use std::collections::HashMap;

pub use super::knobs::WriteError;
pub use super::nic::{DEFAULT_TABLE_SIZE, NicSpec};
use super::nic::{Nic, default_table, make_flows};
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

    pub(super) fn nic_index(&self, name: &str) -> Option<usize> {
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
