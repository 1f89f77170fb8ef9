//! `steerd inspect` for people: per device its queue table (IRQs, where each fires, RPS
//! and XPS masks), its RSS line and its NAPI table, then the IRQs of no NIC, then the
//! CPUs by node and core.
//!
//! A module of its own because the tables and their column layout are a concern of
//! their own, apart from what is read and from the JSON.

use std::fmt::Write as _;

use super::{QueueCounts, RssReadings};
use crate::cpuset::CpuSet;
use crate::discover::Machine;
use crate::kernel::rss::{RssError, RssState};
use crate::model::inventory::{Irq, IrqRole, NetDevice};
use crate::model::topology::{Cpu, Topology};

/// One device's RSS line for people: `rss: 128 entries over 4 rx rings, q0 0.50 q1 0.50
/// q2 0 q3 0, hfunc toeplitz, tcp4 sdfn udp4 sd ...`, or why there is none.
pub(super) fn rss_line(reading: &Result<RssState, RssError>) -> String {
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
pub(super) fn share_runs(shares: &[f64]) -> String {
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
        "{} ({}, {}, {}){}{}{}  node {}  local CPUs {}",
        device.name,
        device.driver.as_deref().unwrap_or("no driver"),
        kind,
        device.operstate.as_deref().unwrap_or("?"),
        device
            .pci_function
            .as_deref()
            .map_or(String::new(), |p| format!(" pci {p}")),
        device
            .physical_function
            .as_deref()
            .map_or(String::new(), |pf| virtual_function_of(pf, inventory)),
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

/// " VF of pf0 (0000:01:00.0)": the physical function by its device name where this
/// namespace has it (a PF may live elsewhere, or have no netdev), else by its address.
/// Where several netdevs share the PF's function (switchdev representors), the first
/// discovered is named.
fn virtual_function_of(pf: &str, inventory: &crate::model::inventory::Inventory) -> String {
    match inventory
        .devices
        .iter()
        .find(|d| d.pci_function.as_deref() == Some(pf))
    {
        Some(parent) => format!(" VF of {} ({pf})", parent.name),
        None => format!(" VF of {pf}"),
    }
}
