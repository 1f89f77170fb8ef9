//! The simulated kernel's knobs: what reading one back gives and which writes it accepts
//! or refuses, with the errno the real kernel returns, so the engine meets the same rules
//! here as on a real machine.

use super::machine::SimMachine;
use crate::knob::{Knob, KnobValue};

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
