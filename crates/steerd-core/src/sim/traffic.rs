//! One tick of simulated traffic, in four steps: the work each CPU is asked for, what it
//! can serve, where packets were processed or dropped, and the counters that result.

use std::collections::BTreeMap;

use super::machine::{SimMachine, TickTruth};
use crate::cpuset::CpuSet;
use crate::model::snapshot::Snapshot;

/// USER_HZ: `proc/stat` ticks per second.
const USER_HZ: f64 = 100.0;

/// Packets going from the CPU that receives them to the CPU that processes them.
#[derive(Debug, Clone, Copy)]
struct Stream {
    from: u32,
    to: u32,
    packets: f64,
    /// Queued to a softnet backlog (RPS, veth) rather than polled in place.
    backlog: bool,
}

/// The work one tick asks of every CPU, and what it sets in motion.
#[derive(Debug, Default)]
struct Demand {
    /// Nanoseconds of irq+softirq work per CPU.
    net: Vec<f64>,
    /// Nanoseconds of system time per CPU (veth transmit).
    sys: Vec<f64>,
    /// Packets each CPU hands to other CPUs through RPS.
    rps_out: Vec<f64>,
    streams: Vec<Stream>,
    /// (CPU, RPS IPIs it receives).
    ipis: Vec<(u32, f64)>,
    /// (IRQ, interrupts).
    interrupts: Vec<(u32, f64)>,
    /// (NIC, queue, interrupting CPU, packets arriving).
    arrivals: Vec<(usize, usize, u32, f64)>,
    /// (NIC, queue, packets the hash sent it), for every queue with traffic.
    offered: Vec<(usize, usize, f64)>,
}

/// Where the packets of a tick ended up.
#[derive(Debug, Default)]
struct Outcome {
    processed: Vec<f64>,
    softnet_drops: Vec<f64>,
    dropped: f64,
    offered: f64,
}

impl SimMachine {
    /// Runs one tick of traffic and returns the counters at its end.
    pub fn step(&mut self) -> Snapshot {
        let demand = self.demand();
        let (served, busy) = self.serve(&demand);
        let outcome = account(&demand.streams, &served);
        self.publish(&demand, &served, &outcome);
        for nic in &mut self.nics {
            nic.last_queue_packets.iter_mut().for_each(|p| *p = 0.0);
        }
        for &(index, queue, packets) in &demand.offered {
            self.nics[index].last_queue_packets[queue] = packets;
        }
        self.now_ns += self.tick_ns;
        self.last = TickTruth {
            busy,
            processed: outcome.processed,
            dropped: outcome.dropped,
            offered: outcome.offered,
            ipis: demand.ipis.iter().map(|(_, n)| n).sum(),
        };
        self.snapshot()
    }

    fn secs(&self) -> f64 {
        self.tick_ns as f64 / 1e9
    }

    /// The work every NIC's traffic asks of every CPU this tick.
    fn demand(&mut self) -> Demand {
        let nr = self.topology.nr_cpu_ids as usize;
        let mut demand = Demand {
            net: vec![0.0; nr],
            sys: vec![0.0; nr],
            rps_out: vec![0.0; nr],
            ..Demand::default()
        };
        let housekeeping = self.topology.online.difference(&self.topology.isolated);
        for index in 0..self.nics.len() {
            let queues = self.nics[index].spec.queues as usize;
            let noise: Vec<f64> = (0..queues)
                .map(|_| 1.0 + self.noise * self.rng.signed_unit())
                .collect();
            for (queue, factor) in noise.into_iter().enumerate() {
                self.queue_demand(index, queue, factor, &housekeeping, &mut demand);
            }
        }
        // One IPI batch per softirq run of the sending CPU, whatever the queue.
        let secs = self.secs();
        for (cpu, packets) in demand.rps_out.iter().enumerate() {
            if *packets > 0.0 {
                demand.net[cpu] +=
                    self.costs.polls(packets / secs) * secs * self.costs.ipi_batch_ns;
            }
        }
        demand
    }

    /// One queue's packets: interrupt and driver work on the interrupting CPU (the sender's
    /// CPU for veth), protocol work there or, with RPS, on `mask[hash * len >> 32]`.
    fn queue_demand(
        &self,
        index: usize,
        queue: usize,
        factor: f64,
        housekeeping: &CpuSet,
        demand: &mut Demand,
    ) {
        let nic = &self.nics[index];
        let costs = &self.costs;
        let secs = self.secs();
        let flows = &nic.queue_flows[queue];
        let share: f64 = flows.iter().map(|f| f.1).sum();
        let pps = nic.rate_pps * share * factor;
        if pps <= 0.0 {
            return;
        }
        let packets = pps * secs;
        demand.offered.push((index, queue, packets));
        let (source, veth) = match (nic.first_irq, nic.spec.sender_cpu) {
            (Some(first), _) => {
                let irq = first + queue as u32;
                let Some(cpu) = self.effective_cpu(irq) else {
                    return;
                };
                demand.interrupts.push((irq, costs.polls(pps) * secs));
                demand.net[cpu as usize] += packets * costs.irq_ns;
                demand.arrivals.push((index, queue, cpu, packets));
                (cpu, false)
            }
            (None, Some(sender)) => {
                demand.sys[sender as usize] += packets * costs.veth_xmit_ns;
                (sender, true)
            }
            (None, None) => return,
        };
        let mask: Vec<u32> = nic.rps[queue].intersection(housekeeping).iter().collect();
        if mask.is_empty() {
            demand.net[source as usize] += packets * costs.proto_ns;
            demand.streams.push(Stream {
                from: source,
                to: source,
                packets,
                backlog: veth,
            });
            return;
        }
        let mut targets: BTreeMap<u32, f64> = BTreeMap::new();
        for &(hash, flow_share) in flows {
            let pick = ((u64::from(hash) * mask.len() as u64) >> 32) as usize;
            *targets.entry(mask[pick]).or_default() += flow_share;
        }
        let polls = costs.polls(pps) * secs;
        for (target, flow_share) in targets {
            let to_packets = packets * flow_share / share;
            demand.net[target as usize] += to_packets * costs.proto_ns;
            if target != source {
                demand.rps_out[source as usize] += to_packets;
                demand.ipis.push((target, polls.min(to_packets)));
            }
            demand.streams.push(Stream {
                from: source,
                to: target,
                packets: to_packets,
                backlog: true,
            });
        }
    }

    /// The share of its demand each CPU serves (work beyond its capacity is not done),
    /// and how busy each CPU is.
    fn serve(&self, demand: &Demand) -> (Vec<f64>, Vec<f64>) {
        let cap = self.tick_ns as f64;
        let nr = demand.net.len();
        let mut served = vec![1.0; nr];
        let mut busy = vec![0.0; nr];
        for cpu in 0..nr {
            let asked = demand.net[cpu] + demand.sys[cpu];
            let app = self.app_load.get(cpu).copied().unwrap_or(0.0);
            let room = (cap * (1.0 - app)).max(cap * 0.05);
            if asked > room {
                served[cpu] = room / asked;
            }
            busy[cpu] = (asked.min(room) / cap + app).min(1.0);
        }
        (served, busy)
    }

    /// Adds the tick to the kernel-style counters.
    fn publish(&mut self, demand: &Demand, served: &[f64], outcome: &Outcome) {
        let cap = self.tick_ns as f64;
        let secs = self.secs();
        self.fired_on.clear();
        for &(irq, count) in &demand.interrupts {
            if let Some(total) = self.counters.irq_totals.get_mut(irq as usize) {
                *total += count as u64;
            }
            if count >= 1.0 {
                // It fired: its effective affinity is current again.
                self.reported_effective.remove(&irq);
                if let Some(cpu) = self.effective_cpu(irq) {
                    self.fired_on.insert(irq, cpu);
                }
            }
        }
        for other in &self.others {
            if let Some(total) = self.counters.irq_totals.get_mut(other.irq as usize) {
                *total += (other.rate * secs) as u64;
            }
        }
        for &(index, queue, cpu, packets) in &demand.arrivals {
            let received = packets * served[cpu as usize];
            self.nics[index].queue_packets[queue] += received as u64;
        }
        for &(cpu, count) in &demand.ipis {
            let row = &mut self.counters.softnet[cpu as usize];
            row.received_rps = Some(row.received_rps.unwrap_or(0).wrapping_add(count as u32));
        }
        for cpu in self.topology.online.iter() {
            let c = cpu as usize;
            let row = &mut self.counters.softnet[c];
            row.processed = row
                .processed
                .wrapping_add(outcome.processed[c].round() as u32);
            row.dropped = row
                .dropped
                .wrapping_add(outcome.softnet_drops[c].round() as u32);
            // Near saturation softirq runs end on budget or time: time_squeeze.
            let load = (demand.net[c] + demand.sys[c]) / cap;
            if load > 0.9 {
                row.time_squeeze = row
                    .time_squeeze
                    .wrapping_add(((load - 0.9) * 2000.0 * secs) as u32);
            }
            let net = (demand.net[c] * served[c] / cap).min(1.0);
            let sys = (demand.sys[c] * served[c] / cap).min(1.0 - net);
            let app = self.app_load[c].min(1.0 - net - sys).max(0.0);
            let idle = (1.0 - net - sys - app).max(0.0);
            let t = &mut self.counters.times[c];
            for (slot, share) in [app, sys, idle, net].into_iter().enumerate() {
                t[slot] += share * USER_HZ * secs;
            }
        }
    }
}

/// Follows each stream through the CPUs' served shares: a packet is lost at the NIC ring
/// when its interrupting CPU cannot poll it, or in the target's backlog (softnet
/// `dropped`) when the processing CPU cannot keep up.
fn account(streams: &[Stream], served: &[f64]) -> Outcome {
    let nr = served.len();
    let mut out = Outcome {
        processed: vec![0.0; nr],
        softnet_drops: vec![0.0; nr],
        ..Outcome::default()
    };
    for s in streams {
        out.offered += s.packets;
        let (from, to) = (s.from as usize, s.to as usize);
        if from == to {
            let done = s.packets * served[from];
            out.processed[from] += done;
            out.dropped += s.packets - done;
            if s.backlog {
                out.softnet_drops[from] += s.packets - done;
            }
        } else {
            let delivered = s.packets * served[from];
            let done = delivered * served[to];
            out.processed[to] += done;
            out.dropped += s.packets - done;
            out.softnet_drops[to] += delivered - done;
        }
    }
    out
}
