//! A simulated NIC: what to simulate ([`NicSpec`]) and the NIC as the machine holds it,
//! its flows each hashed to a bucket and the indirection table that sends buckets to
//! queues. Apart from the machine so the RSS hashing model (skew, elephants, tables) reads
//! as one piece.

use super::rng::Rng;
use crate::cpuset::CpuSet;
use crate::model::inventory::DeviceKind;

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
    pub(super) fn home_queue(&self, bucket: u32) -> u32 {
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

/// The flows of a NIC: an RPS hash each and, for the RSS hash, a queue picked weighted by
/// the skew if any (independently of the RPS hash, as a NIC's Toeplitz hash and the
/// kernel's flow hash are), then one of the buckets the default table sends to that queue,
/// from a mix of the flow's hash. All flows weigh the same but an elephant.
pub(super) fn make_flows(spec: &NicSpec, rng: &mut Rng) -> Vec<Flow> {
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
pub(super) fn default_table(spec: &NicSpec) -> Vec<u32> {
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
