//! Conversions between the policy's names and values ([`Target`], [`Value`]) and the
//! actuator's ([`Knob`], [`KnobValue`]), which describe the same kernel values twice.
//! Temporary: they go away in a later step of issue 15, when policy and actuator share one
//! type for each.

use crate::knob::{Knob, KnobValue};
use crate::policy::{Target, Value};

/// The policy's name for an actuator knob (the inverse of [`knob_of`]).
pub(super) fn target_of(knob: &Knob) -> Target {
    match knob {
        Knob::IrqAffinity { irq } => Target::IrqAffinity { irq: *irq },
        Knob::RpsCpus { device, queue } => Target::RpsCpus {
            device: device.clone(),
            queue: *queue,
        },
        Knob::RpsFlowCnt { device, queue } => Target::RpsFlowCnt {
            device: device.clone(),
            queue: *queue,
        },
        Knob::RpsSockFlowEntries => Target::RpsSockFlowEntries,
    }
}

/// The actuator's name for a policy target.
pub(super) fn knob_of(target: &Target) -> Knob {
    match target {
        Target::IrqAffinity { irq } => Knob::IrqAffinity { irq: *irq },
        Target::RpsCpus { device, queue } => Knob::RpsCpus {
            device: device.clone(),
            queue: *queue,
        },
        Target::RpsFlowCnt { device, queue } => Knob::RpsFlowCnt {
            device: device.clone(),
            queue: *queue,
        },
        Target::RpsSockFlowEntries => Knob::RpsSockFlowEntries,
    }
}

pub(super) fn knob_value_of(value: &Value) -> KnobValue {
    match value {
        Value::Cpus(cpus) => KnobValue::Cpus(cpus.clone()),
        Value::Count(n) => KnobValue::Count(*n),
    }
}

pub(super) fn policy_value_of(value: &KnobValue) -> Value {
    match value {
        KnobValue::Cpus(cpus) => Value::Cpus(cpus.clone()),
        KnobValue::Count(n) => Value::Count(*n),
    }
}
