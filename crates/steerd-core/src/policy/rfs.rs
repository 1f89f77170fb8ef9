//! RFS rules: the flow tables that let RPS steer a connected socket's packets to the CPU
//! where its reader runs.
//!
//! Both tables must be set for RFS to work on a queue: the global
//! `rps_sock_flow_entries` and each queue's `rps_flow_cnt`, sized entries / queues rounded
//! up to a power of two (the whole table for a single-queue device), as scaling.rst
//! suggests. They are set in the same action group as the RPS mask that needs them, and
//! cleared again (only where steerd set them) when RPS goes off.

use super::context::Planner;
use super::plan::{NoteKind, ReasonKind};
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};

/// A queue's `rps_flow_cnt` for a device with `queues` rx queues.
pub fn flow_cnt_for(entries: u32, queues: usize) -> u32 {
    if queues <= 1 {
        return entries;
    }
    let share = entries / u32::try_from(queues).unwrap_or(u32::MAX);
    share.max(1).next_power_of_two()
}

/// The current value of a count target as this plan leaves it.
fn count(p: &Planner, target: &Knob) -> Option<u32> {
    match p.planned.get(target) {
        Some(KnobValue::Count(n)) => Some(*n),
        _ => p.placement.value(target).and_then(|v| v.count()),
    }
}

fn ours(p: &Planner, target: &Knob, value: u32) -> bool {
    !p.frozen(target) && p.state.written(target) == Some(&KnobValue::Count(value))
}

/// Sets the flow tables for queues whose RPS is being turned on. Where the global table
/// does not exist (a network namespace other than the initial one: the sysctl is the
/// initial namespace's alone) no queue's table is set either: without the global table the
/// kernel never reads a queue's (`get_rps_cpu` needs both), so it would be memory and a
/// finding of `doctor`'s (`rfs_tables`) for nothing. Seen on the veth bed, 2026-11-29:
/// 8192 entries on each of four queues, RFS noted as off in the same tick.
pub fn enable_for(p: &mut Planner, d: usize, changes: &[(u32, CpuSet)]) {
    if !p.config.rfs.enabled {
        return;
    }
    let entries = p.config.rfs.sock_flow_entries;
    let global = Knob::RpsSockFlowEntries;
    let Some(global_now) = count(p, &global) else {
        p.note(
            NoteKind::RfsUnavailable,
            Some(global),
            "rps_sock_flow_entries".to_string(),
            "rps_sock_flow_entries does not exist here (not the initial network namespace?): RFS stays off".to_string(),
        );
        return;
    };
    let name = p.devices[d].dev.name.clone();
    let wanted = flow_cnt_for(entries, p.devices[d].dev.rx_queues.len());
    for (queue, _) in changes {
        let target = Knob::RpsFlowCnt {
            device: name.clone(),
            queue: *queue,
        };
        let Some(current) = count(p, &target) else {
            continue;
        };
        if current == wanted || p.frozen(&target) || (current != 0 && !ours(p, &target, current)) {
            continue;
        }
        p.push(
            target,
            None,
            KnobValue::Count(current),
            KnobValue::Count(wanted),
            (
                ReasonKind::RfsOn,
                format!(
                    "RPS goes on for {name} rx-{queue}; RFS needs a per-queue table of rfs.sock_flow_entries / {} queues",
                    p.devices[d].dev.rx_queues.len()
                ),
            ),
            "connected sockets' packets are steered to the CPU where the reader runs".to_string(),
        );
    }
    if global_now < entries && !p.frozen(&global) {
        p.push(
            global,
            None,
            KnobValue::Count(global_now),
            KnobValue::Count(entries),
            (
                ReasonKind::RfsOn,
                format!("RPS goes on for {name}; RFS needs the global socket flow table"),
            ),
            format!("a global table of {entries} socket flows"),
        );
    }
}

/// Clears the per-queue tables steerd set on queues whose RPS is being turned off.
pub fn disable_for(p: &mut Planner, d: usize, changes: &[(u32, CpuSet)]) {
    let name = p.devices[d].dev.name.clone();
    for (queue, mask) in changes {
        if !mask.is_empty() {
            continue;
        }
        let target = Knob::RpsFlowCnt {
            device: name.clone(),
            queue: *queue,
        };
        let Some(current) = count(p, &target) else {
            continue;
        };
        if current == 0 || !ours(p, &target, current) {
            continue;
        }
        p.push(
            target,
            None,
            KnobValue::Count(current),
            KnobValue::Count(0),
            (
                ReasonKind::RfsOff,
                format!("RPS goes off for {name} rx-{queue}"),
            ),
            "the queue's flow table is freed".to_string(),
        );
    }
}

/// Clears the global table steerd set once no queue anywhere has RPS on.
pub fn settle(p: &mut Planner) {
    if !p.config.rfs.off_when_rps_off {
        return;
    }
    let global = Knob::RpsSockFlowEntries;
    let Some(current) = count(p, &global) else {
        return;
    };
    if current == 0 || !ours(p, &global, current) {
        return;
    }
    let any_on = p.devices.iter().any(|d| {
        d.dev.rx_queues.iter().any(|q| {
            p.rps_mask(&d.dev.name, q.index)
                .is_some_and(|m| !m.is_empty())
        })
    });
    if any_on || !p.spend("rps_sock_flow_entries") {
        return;
    }
    p.push(
        global,
        None,
        KnobValue::Count(current),
        KnobValue::Count(0),
        (
            ReasonKind::RfsOff,
            "RPS is off on every queue; rfs.off_when_rps_off".to_string(),
        ),
        "the global socket flow table is freed".to_string(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_counts_divide_the_table_by_queues() {
        assert_eq!(flow_cnt_for(32768, 1), 32768);
        assert_eq!(flow_cnt_for(32768, 16), 2048);
        assert_eq!(
            flow_cnt_for(32768, 12),
            4096,
            "2730 rounds up to a power of two"
        );
        assert_eq!(flow_cnt_for(4, 4096), 1);
    }
}
