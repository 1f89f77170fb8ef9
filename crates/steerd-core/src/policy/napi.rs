//! Threaded NAPI: a queue's polling thread goes to the CPU of the queue's interrupt.
//!
//! With `threaded` on, the receive work of a queue runs in its `napi/DEV-ID` thread,
//! wherever the scheduler puts it; moving the IRQ alone moves nothing but the interrupt.
//! The kernel's NAPI documentation recommends pinning each thread to the CPU that services
//! its interrupt and leaves that to user space. This rule does it for every queue whose
//! IRQ steerd places, after every IRQ rule of the tick, so a thread follows its IRQ in the
//! same plan. Like a transmit vector following its receive vector, it is a placement
//! fact, outside the action budget. A thread someone else pinned elsewhere after steerd is
//! frozen like any external change (`on_external_change`). A busy-polling thread is not
//! moved: it spins wherever the operator pinned it, and the planner keeps other work off
//! that CPU.

use super::context::Planner;
use super::plan::ReasonKind;
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};

pub fn follow_irq(p: &mut Planner) {
    for d in 0..p.devices.len() {
        // Threads are attached only to queues whose NAPI is threaded: the whole device's
        // (`threaded`) or a single NAPI's (netdev netlink `napi-set`, 6.17+).
        if !p.devices[d].manages_irqs {
            continue;
        }
        for queue in &p.devices[d].dev.rx_queues {
            let Some(thread) = &queue.napi_thread else {
                continue;
            };
            // A busy-polling thread spins where the operator put it; its CPU is kept
            // free of other work instead (`context::busy_poll_cpus`).
            if queue.napi.busy_polls() {
                continue;
            }
            let rx = p.devices[d]
                .vectors
                .iter()
                .copied()
                .find(|&s| p.irqs[s].irq.queue == Some(queue.index));
            let Some(to) = rx.and_then(|s| p.irqs[s].will_fire_on.or(p.irqs[s].cpu)) else {
                continue;
            };
            if !p.allowed.contains(to) {
                continue;
            }
            let target = Knob::NapiThread {
                pid: thread.pid,
                name: thread.name.clone(),
            };
            let Some(KnobValue::Cpus(old)) = p.placement.value(&target) else {
                continue;
            };
            if (old.len() == 1 && old.contains(to)) || p.frozen(&target) {
                continue;
            }
            let device = &p.devices[d].dev.name;
            let why = format!(
                "{device} rx-{} is polled by {} (threaded NAPI); its interrupt fires on CPU {to}",
                queue.index, thread.name
            );
            let expected = format!(
                "{device} rx-{}'s receive work runs on CPU {to}, with its interrupt, instead of \
                 wherever the scheduler puts {}",
                queue.index, thread.name
            );
            p.push(
                target,
                Some(format!("{device} rx-{}", queue.index)),
                KnobValue::Cpus(old),
                KnobValue::Cpus(CpuSet::from_iter([to])),
                (ReasonKind::NapiThread, why),
                expected,
            );
        }
    }
}
