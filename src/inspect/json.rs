//! `steerd inspect --format json`: the model as the documented JSON (`docs/inspect-json.md`),
//! each device with its RSS state.
//!
//! A module of its own because its shape is a public interface with a schema version, kept
//! apart from the text for people, which may change freely.

use serde::Serialize;

use super::{QueueCounts, RssReadings};
use crate::cpuset::CpuSet;
use crate::discover::Machine;
use crate::kernel::rss::{RssError, RssState};
use crate::model::inventory::{Irq, NetDevice};
use crate::model::snapshot::QueueCounters;
use crate::model::topology::{Cpu, Node};

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
pub(super) struct RssJson {
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
    pub(super) fn of(reading: &Result<RssState, RssError>) -> Self {
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
