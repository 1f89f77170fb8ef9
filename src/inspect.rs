//! `steerd inspect`: the whole machine model, for people (text) and programs (JSON).
//!
//! The JSON shape is a public interface, documented in `docs/inspect-json.md`; add fields
//! freely, but never rename or remove one without bumping `schema`.
//!
//! Besides the discovered model, `inspect` reads each device's RSS state (its indirection
//! table, key, hash function and hash fields; `kernel::rss`) through ethtool requests,
//! which describe the running machine: on a tree that is not the host (`--root` other than
//! `/`) it is not read, and shows as nothing in the text and `null` in the JSON, like the
//! other host-only answers (netdev netlink's NAPI ids). The daemon never reads it per tick.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cpuset::CpuSet;
use crate::discover::Machine;
use crate::kernel::rss::{RssError, RssState};
use crate::model::inventory::{Irq, IrqRole, NetDevice};
use crate::model::snapshot::{QueueCounters, QueueDirection};
use crate::model::topology::{Cpu, Node, Topology};
use crate::root::Root;

/// Version of the JSON layout below.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct InspectJson<'a> {
    schema: u32,
    root: &'a str,
    nr_cpu_ids: u32,
    possible: &'a CpuSet,
    online: &'a CpuSet,
    isolated: &'a CpuSet,
    nohz_full: &'a CpuSet,
    isolated_partitions: &'a CpuSet,
    cpus: &'a [Cpu],
    nodes: &'a [Node],
    devices: Vec<DeviceJson<'a>>,
    irqs: &'a [Irq],
    rps_sock_flow_entries: Option<u32>,
    queue_counters: &'a [QueueCounters],
    queue_counters_unknown: Option<&'a str>,
    warnings: &'a [String],
}

/// Per-queue packet counters, cumulative, as `inspect` shows them: the ones the daemon
/// samples every tick (netdev `qstats-get`, else `ethtool -S`), read once. Only the
/// running kernel has them, so a `--root` tree has none, and says why.
#[derive(Debug, Clone, Default)]
pub struct QueueCounts {
    /// Every queue that has a packet counter, of the devices with queue vectors.
    pub counters: Vec<QueueCounters>,
    /// Why there are none, when they could not be read at all.
    pub unknown: Option<String>,
}

impl QueueCounts {
    /// Reads the counters of every device with queue vectors, on the host; a fake root
    /// gets none, and a failed read is the reason, not an error (the model stands alone).
    pub fn read(root: &Root, machine: &Machine) -> QueueCounts {
        if !root.is_host() {
            return QueueCounts {
                counters: Vec::new(),
                unknown: Some(
                    "a --root tree: per-queue counters come from the running kernel".into(),
                ),
            };
        }
        let devices: Vec<crate::kernel::queue_counters::DeviceId<'_>> = machine
            .inventory
            .devices
            .iter()
            .filter(|d| !d.irqs.is_empty())
            .filter_map(|d| {
                Some(crate::kernel::queue_counters::DeviceId {
                    name: &d.name,
                    ifindex: d.ifindex?,
                })
            })
            .collect();
        let mut counters = Vec::new();
        let read = crate::kernel::queue_counters::QueueCounterSource::new()
            .and_then(|mut source| source.sample(&devices, &mut counters));
        QueueCounts {
            unknown: read
                .err()
                .filter(|_| counters.is_empty())
                .map(|e| e.to_string()),
            counters,
        }
    }

    /// A receive queue's packets, when its driver counts them.
    fn rx_packets(&self, device: &str, queue: u32) -> Option<u64> {
        self.counters
            .iter()
            .find(|c| c.device == device && c.direction == QueueDirection::Rx && c.queue == queue)
            .map(|c| c.packets)
    }
}

/// A device as the model has it, plus its RSS state.
#[derive(Serialize)]
struct DeviceJson<'a> {
    #[serde(flatten)]
    device: &'a NetDevice,
    rss: Option<RssJson>,
}

/// One device's RSS state in the JSON (docs/inspect-json.md, "RSS"): every field is
/// there, `null` where it does not apply.
#[derive(Serialize)]
struct RssJson {
    /// `ok`, `no_table` (the NIC has none steerd can use), or `error`.
    status: &'static str,
    /// Why not `ok`.
    reason: Option<String>,
    source: Option<crate::kernel::rss::RssSource>,
    rx_rings: Option<u32>,
    table_size: Option<usize>,
    indirection: Option<Vec<u32>>,
    shares: Option<Vec<f64>>,
    default_spread: Option<bool>,
    key: Option<String>,
    hash_function: Option<String>,
    input_xfrm: Option<u32>,
    flow_hash: Option<std::collections::BTreeMap<&'static str, Option<String>>>,
}

impl RssJson {
    fn of(reading: &Result<RssState, RssError>) -> Self {
        let state = reading.as_ref().ok();
        let (status, reason) = match reading {
            Ok(_) => ("ok", None),
            Err(error) if error.is_not_settable() => ("no_table", Some(error.to_string())),
            Err(error) => ("error", Some(error.to_string())),
        };
        RssJson {
            status,
            reason,
            source: state.map(|s| s.source),
            rx_rings: state.map(|s| s.rx_rings),
            table_size: state.map(|s| s.indirection.len()),
            indirection: state.map(|s| s.indirection.clone()),
            shares: state.map(RssState::shares),
            default_spread: state.map(RssState::is_default_spread),
            key: state.map(RssState::key_hex),
            hash_function: state.map(|s| s.hash_function.name()),
            input_xfrm: state.map(|s| s.input_xfrm),
            flow_hash: state.map(|s| {
                s.flow_hash
                    .iter()
                    .into_iter()
                    .map(|(name, fields)| (name, fields.map(|f| f.letters())))
                    .collect()
            }),
        }
    }
}

/// Each device's RSS state, read when `inspect` runs; nothing off the host.
#[derive(Debug, Default)]
pub struct RssReadings {
    by_device: Vec<(String, Result<RssState, RssError>)>,
}

impl RssReadings {
    /// Reads every device's RSS state when `root` is the host (the ethtool requests
    /// describe the running machine); none otherwise.
    pub fn read(root: &Root, machine: &Machine) -> Self {
        if !root.is_host() {
            return RssReadings::default();
        }
        let ethtool = crate::kernel::ethtool::Ethtool::new();
        let by_device = machine
            .inventory
            .devices
            .iter()
            .map(|device| {
                let reading = match &ethtool {
                    Ok(ethtool) => crate::kernel::rss::read(ethtool, &device.name),
                    Err(error) => Err(RssError::Kernel {
                        device: device.name.clone(),
                        command: "SIOCETHTOOL",
                        errno: None,
                        reason: error.to_string(),
                    }),
                };
                (device.name.clone(), reading)
            })
            .collect();
        RssReadings { by_device }
    }

    /// Readings given directly (tests).
    pub fn new(by_device: Vec<(String, Result<RssState, RssError>)>) -> Self {
        RssReadings { by_device }
    }

    fn get(&self, device: &str) -> Option<&Result<RssState, RssError>> {
        self.by_device
            .iter()
            .find(|(name, _)| name == device)
            .map(|(_, reading)| reading)
    }
}

/// One device's RSS line for people: `rss: 128 entries over 4 rx rings, q0 0.50 q1 0.50
/// q2 0 q3 0, hfunc toeplitz, tcp4 sdfn udp4 sd ...`, or why there is none.
fn rss_line(reading: &Result<RssState, RssError>) -> String {
    let state = match reading {
        Ok(state) => state,
        Err(RssError::NoTable { why, .. }) => return format!("rss: none, no RSS table ({why})"),
        Err(error) => return format!("rss: not read ({error})"),
    };
    let shares = share_runs(&state.shares());
    let hashed: Vec<String> = state
        .flow_hash
        .iter()
        .into_iter()
        .filter_map(|(name, fields)| fields.map(|f| format!("{name} {}", f.letters())))
        .collect();
    let mut line = format!(
        "rss: {} entries over {} rx rings{}, {}, hfunc {}",
        state.indirection.len(),
        state.rx_rings,
        if state.is_default_spread() {
            " (default spread)"
        } else {
            ""
        },
        shares,
        state.hash_function,
    );
    if !hashed.is_empty() {
        let _ = write!(line, ", hashed on {}", hashed.join(" "));
    }
    line
}

/// Each queue's share of the table as `q0 0.50 q1 0.50 q2 0 q3 0`; three or more queues in
/// a row with the same (printed) share as one run, `q0-63 0.02`, so that a NIC with many
/// queues keeps a short line.
fn share_runs(shares: &[f64]) -> String {
    let printed: Vec<String> = shares
        .iter()
        .map(|&share| {
            if share == 0.0 {
                "0".to_string()
            } else {
                format!("{share:.2}")
            }
        })
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut start = 0;
    while start < printed.len() {
        let end = start
            + printed[start..]
                .iter()
                .take_while(|p| **p == printed[start])
                .count();
        if end - start >= 3 {
            out.push(format!("q{start}-{} {}", end - 1, printed[start]));
        } else {
            out.extend((start..end).map(|q| format!("q{q} {}", printed[q])));
        }
        start = end;
    }
    out.join(" ")
}

/// The model as pretty-printed JSON, with the per-queue counters read for it and each
/// device's RSS state from `rss`.
pub fn to_json(machine: &Machine, root: &str, counts: &QueueCounts, rss: &RssReadings) -> String {
    let topology = &machine.topology;
    let view = InspectJson {
        schema: SCHEMA_VERSION,
        root,
        nr_cpu_ids: topology.nr_cpu_ids,
        possible: &topology.possible,
        online: &topology.online,
        isolated: &topology.isolated,
        nohz_full: &topology.nohz_full,
        isolated_partitions: &topology.isolated_partitions,
        cpus: &topology.cpus,
        nodes: &topology.nodes,
        devices: machine
            .inventory
            .devices
            .iter()
            .map(|device| DeviceJson {
                device,
                rss: rss.get(&device.name).map(RssJson::of),
            })
            .collect(),
        irqs: &machine.inventory.irqs,
        rps_sock_flow_entries: machine.inventory.rps_sock_flow_entries,
        queue_counters: &counts.counters,
        queue_counters_unknown: counts.unknown.as_deref(),
        warnings: &machine.warnings,
    };
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string_pretty(&view).unwrap_or_default()
}

/// The model as tables for people: one per device (queues, their IRQs, where each fires,
/// RPS/XPS masks, RSS state from `rss`, and per receive queue its NAPI: id, threads,
/// deferral, packets), then IRQs of no NIC in summary, then CPUs by node and core.
pub fn to_text(machine: &Machine, counts: &QueueCounts, rss: &RssReadings) -> String {
    let mut out = String::new();
    let topology = &machine.topology;
    let inventory = &machine.inventory;
    let _ = writeln!(
        out,
        "CPUs: {} online of {} possible (nr_cpu_ids {}), isolated {}, nohz_full {}, \
         isolated cgroup partitions {}",
        topology.online.len(),
        topology.possible.len(),
        topology.nr_cpu_ids,
        topology.isolated,
        topology.nohz_full,
        topology.isolated_partitions
    );
    let _ = writeln!(
        out,
        "RFS: rps_sock_flow_entries {}",
        inventory
            .rps_sock_flow_entries
            .map_or("n/a (not in this network namespace)".to_string(), |v| v
                .to_string())
    );
    for device in &inventory.devices {
        out.push('\n');
        device_table(&mut out, device, inventory);
        if let Some(reading) = rss.get(&device.name) {
            let _ = writeln!(out, "  {}", rss_line(reading));
        }
        napi_table(&mut out, device, counts);
    }
    let foreign: Vec<&Irq> = inventory
        .irqs
        .iter()
        .filter(|i| i.device.is_none())
        .collect();
    let managed = foreign.iter().filter(|i| i.managed).count();
    let _ = writeln!(
        out,
        "\nIRQs of no network device: {} ({} managed by the kernel)",
        foreign.len(),
        managed
    );
    for irq in &foreign {
        let _ = writeln!(
            out,
            "  {:>5} {:<28} fires on {:<10} allowed {}{}",
            irq.irq,
            truncate(&irq.name, 28),
            show(&irq.effective_affinity),
            show(&irq.affinity),
            if irq.managed { "  managed" } else { "" }
        );
    }
    out.push_str("\nCPUs by node and core (* isolated, ^ isolated cgroup partition, ~ nohz_full, ! offline)\n");
    for node in &topology.nodes {
        let _ = writeln!(out, "  node {}: {}", node.id, node.cpus);
        let mut cores: Vec<(u32, Vec<&Cpu>)> = Vec::new();
        for cpu in topology.cpus.iter().filter(|c| node.cpus.contains(c.id)) {
            let core = cpu.core.unwrap_or(cpu.id);
            match cores.iter_mut().find(|(id, _)| *id == core) {
                Some((_, cpus)) => cpus.push(cpu),
                None => cores.push((core, vec![cpu])),
            }
        }
        let mut line = String::new();
        for (core, cpus) in cores {
            let threads: Vec<String> = cpus.iter().map(|c| cpu_label(c, topology)).collect();
            let item = format!("core {core}: {}", threads.join(" "));
            if line.len() + item.len() > 96 {
                let _ = writeln!(out, "    {line}");
                line.clear();
            }
            if !line.is_empty() {
                line.push_str(" | ");
            }
            line.push_str(&item);
        }
        if !line.is_empty() {
            let _ = writeln!(out, "    {line}");
        }
    }
    for warning in &machine.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    out
}

fn device_table(
    out: &mut String,
    device: &NetDevice,
    inventory: &crate::model::inventory::Inventory,
) {
    let kind = serde_json::to_value(device.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{} ({}, {}, {}){}{}  node {}  local CPUs {}",
        device.name,
        device.driver.as_deref().unwrap_or("no driver"),
        kind,
        device.operstate.as_deref().unwrap_or("?"),
        device
            .pci_function
            .as_deref()
            .map_or(String::new(), |p| format!(" pci {p}")),
        device
            .master
            .as_deref()
            .map_or(String::new(), |m| format!(" master {m}")),
        device.numa_node.map_or("-".to_string(), |n| n.to_string()),
        show(&device.local_cpus),
    );
    queue_row(
        out,
        [
            "queue",
            "irq",
            "vector",
            "fires on",
            "allowed",
            "rps/xps cpus",
            "flow cnt",
        ]
        .map(String::from),
    );
    let irq_cells = |number: Option<u32>| match number.and_then(|n| inventory.irq(n)) {
        Some(irq) => [
            irq.irq.to_string(),
            truncate(&irq.name, 24),
            show(&irq.effective_affinity),
            show(&irq.affinity),
        ],
        None => ["-", "-", "-", "-"].map(String::from),
    };
    for queue in &device.rx_queues {
        let [irq, name, fires, allowed] = irq_cells(queue.irq);
        let flow_cnt = queue
            .rps_flow_cnt
            .map_or("-".to_string(), |v| v.to_string());
        let rx = format!("rx-{}", queue.index);
        queue_row(
            out,
            [
                rx,
                irq,
                name,
                fires,
                allowed,
                show(&queue.rps_cpus),
                flow_cnt,
            ],
        );
    }
    for queue in &device.tx_queues {
        let [irq, name, fires, allowed] = irq_cells(queue.irq);
        let xps = queue
            .xps_cpus
            .as_ref()
            .map_or("n/a".to_string(), |s| s.to_string());
        let tx = format!("tx-{}", queue.index);
        queue_row(out, [tx, irq, name, fires, allowed, xps, String::new()]);
    }
    let others: Vec<&Irq> = device
        .irqs
        .iter()
        .filter_map(|&n| inventory.irq(n))
        .filter(|irq| irq.role == IrqRole::Other || irq.queue.is_none())
        .collect();
    for irq in others {
        let _ = writeln!(
            out,
            "  {:<8} {:>5}  {:<24} {:<10} {:<12}{}",
            "other",
            irq.irq,
            truncate(&irq.name, 24),
            show(&irq.effective_affinity),
            show(&irq.affinity),
            if irq.managed { "  managed" } else { "" }
        );
    }
}

/// Per receive queue, its NAPI: id, threaded or not and the polling thread (pid, the CPU
/// it last ran on, where it may run), the deferral settings, and the packets received.
/// Only for devices with queue vectors, NAPI ids or threads (not for every veth).
fn napi_table(out: &mut String, device: &NetDevice, counts: &QueueCounts) {
    let has_napi = !device.irqs.is_empty()
        || device.threaded == Some(true)
        || device.rx_queues.iter().any(|q| q.napi_id.is_some());
    if !has_napi || device.rx_queues.is_empty() {
        return;
    }
    let source = if device.rx_queues.iter().any(|q| q.napi.per_napi) {
        "per NAPI from netdev netlink napi-get".to_string()
    } else {
        format!(
            "the device's sys/class/net/{} files, for every NAPI",
            device.name
        )
    };
    let _ = writeln!(
        out,
        "  NAPI settings: {source}; n/a: not on this kernel (or not known off the host)"
    );
    let _ = writeln!(
        out,
        "  {:<8} {:>7}  {:<9} {:<16} {:>7} {:>4}  {:<8} {:>5} {:>12} {:>12} {:>12}",
        "queue",
        "napi id",
        "threaded",
        "thread",
        "pid",
        "cpu",
        "allowed",
        "defer",
        "gro flush ns",
        "irq susp. ns",
        "packets"
    );
    let known = |value: Option<String>| value.unwrap_or_else(|| "n/a".to_string());
    for queue in &device.rx_queues {
        let thread = queue.napi_thread.as_ref();
        let _ = writeln!(
            out,
            "  {:<8} {:>7}  {:<9} {:<16} {:>7} {:>4}  {:<8} {:>5} {:>12} {:>12} {:>12}",
            format!("rx-{}", queue.index),
            queue.napi_id.map_or("-".to_string(), |id| id.to_string()),
            known(queue.napi.threaded.map(|mode| mode.word().to_string())),
            thread.map_or("-".to_string(), |t| truncate(&t.name, 16)),
            thread.map_or("-".to_string(), |t| t.pid.to_string()),
            thread
                .and_then(|t| t.cpu)
                .map_or("-".to_string(), |cpu| cpu.to_string()),
            thread.map_or("-".to_string(), |t| t.affinity.to_list()),
            known(queue.napi.defer_hard_irqs.map(|v| v.to_string())),
            known(queue.napi.gro_flush_timeout_ns.map(|v| v.to_string())),
            known(queue.napi.irq_suspend_timeout_ns.map(|v| v.to_string())),
            counts
                .rx_packets(&device.name, queue.index)
                .map_or("-".to_string(), |p| p.to_string()),
        );
    }
}

/// One line of a device's queue table: queue, IRQ, vector, fires on, allowed, RPS or XPS
/// CPUs, flow count.
fn queue_row(
    out: &mut String,
    [queue, irq, vector, fires, allowed, steering, flow_cnt]: [String; 7],
) {
    let _ = writeln!(
        out,
        "  {queue:<8} {irq:>5}  {vector:<24} {fires:<10} {allowed:<12} {steering:<14} {flow_cnt:>8}"
    );
}

fn cpu_label(cpu: &Cpu, topology: &Topology) -> String {
    let mut label = cpu.id.to_string();
    if cpu.isolated {
        label.push('*');
    }
    if topology.isolated_partitions.contains(cpu.id) {
        label.push('^');
    }
    if cpu.nohz_full {
        label.push('~');
    }
    if !cpu.online {
        label.push('!');
    }
    label
}

fn show(set: &Option<CpuSet>) -> String {
    set.as_ref().map_or("?".to_string(), |s| s.to_string())
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let kept: String = text.chars().take(width.saturating_sub(1)).collect();
        format!("{kept}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ethtool::FlowHash;
    use crate::kernel::rss::{FlowHashes, HashFunction, RssSource};

    fn skewed() -> RssState {
        RssState {
            rx_rings: 4,
            indirection: [0, 1].repeat(64),
            key: vec![0x6d, 0x5a],
            hash_function: HashFunction::TOEPLITZ,
            input_xfrm: 0,
            flow_hash: FlowHashes {
                tcp4: Some(FlowHash(0xf0)),
                udp4: Some(FlowHash(0x30)),
                tcp6: None,
                udp6: None,
            },
            source: RssSource::Grssh,
        }
    }

    #[test]
    fn the_rss_line_shows_each_queues_share_the_function_and_the_hash_fields() {
        assert_eq!(
            rss_line(&Ok(skewed())),
            "rss: 128 entries over 4 rx rings, q0 0.50 q1 0.50 q2 0 q3 0, hfunc toeplitz, \
             hashed on tcp4 sdfn udp4 sd"
        );
        let mut default = skewed();
        default.indirection = (0..128).map(|i| i % 4).collect();
        default.flow_hash = FlowHashes::default();
        assert_eq!(
            rss_line(&Ok(default)),
            "rss: 128 entries over 4 rx rings (default spread), q0-3 0.25, hfunc toeplitz"
        );
        // 94 queues over 128 entries: 34 queues hold 2 entries, 60 hold 1.
        let mut many = skewed();
        many.rx_rings = 94;
        many.indirection = (0..128).map(|i| i % 94).collect();
        many.flow_hash = FlowHashes::default();
        assert_eq!(
            rss_line(&Ok(many)),
            "rss: 128 entries over 94 rx rings (default spread), q0-33 0.02 q34-93 0.01, \
             hfunc toeplitz"
        );
        assert_eq!(
            share_runs(&[0.5, 0.5, 0.0, 0.0]),
            "q0 0.50 q1 0.50 q2 0 q3 0"
        );
        assert_eq!(share_runs(&[0.0; 3]), "q0-2 0");
        assert_eq!(share_runs(&[]), "");
        let none = RssError::of_errno(
            "veth0",
            "ETHTOOL_GRXRINGS",
            nix::errno::Errno::EOPNOTSUPP,
            false,
        );
        assert_eq!(
            rss_line(&Err(none)),
            "rss: none, no RSS table (ETHTOOL_GRXRINGS: EOPNOTSUPP)"
        );
    }

    #[test]
    fn the_rss_json_has_the_whole_table_the_key_in_hex_and_null_where_it_does_not_apply() {
        let json = serde_json::to_value(RssJson::of(&Ok(skewed()))).unwrap();
        assert_eq!(json["status"], "ok");
        assert_eq!(json["reason"], serde_json::Value::Null);
        assert_eq!(json["source"], "grssh");
        assert_eq!(json["table_size"], 128);
        assert_eq!(json["indirection"].as_array().unwrap().len(), 128);
        assert_eq!(json["shares"], serde_json::json!([0.5, 0.5, 0.0, 0.0]));
        assert_eq!(json["default_spread"], false);
        assert_eq!(json["key"], "6d5a");
        assert_eq!(json["hash_function"], "toeplitz");
        assert_eq!(
            json["flow_hash"],
            serde_json::json!({"tcp4": "sdfn", "udp4": "sd", "tcp6": null, "udp6": null})
        );
        let none = RssError::of_errno(
            "veth0",
            "ETHTOOL_GRXRINGS",
            nix::errno::Errno::EOPNOTSUPP,
            false,
        );
        let json = serde_json::to_value(RssJson::of(&Err(none))).unwrap();
        assert_eq!(json["status"], "no_table");
        assert_eq!(json["indirection"], serde_json::Value::Null);
        let gone = RssError::of_errno("eth9", "ETHTOOL_GRXRINGS", nix::errno::Errno::ENODEV, false);
        let json = serde_json::to_value(RssJson::of(&Err(gone))).unwrap();
        assert_eq!(json["status"], "error");
        assert!(json["reason"].as_str().unwrap().contains("ENODEV"));
    }
}
