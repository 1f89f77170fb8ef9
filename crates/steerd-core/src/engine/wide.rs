//! Where movable queue vectors with a wide mask (one that lets the kernel pick the CPU)
//! really fire: the CPU with the largest rise of their `proc/interrupts` column since the
//! last look, recorded as `fires_on` in the placement.
//!
//! Their `effective_affinity` cannot be trusted (on 6.1 x86 it keeps an older CPU until
//! the vector fires), and their mask does not say. Reading `proc/interrupts` is costly on
//! big machines (one column per CPU on every line), so it is read only on ticks that
//! decide and only while such vectors exist: the policy pins every queue vector it may
//! move to a single CPU (`unpinned`), so in steady state there are none and this costs
//! nothing.

use crate::kernel::procfs::interrupts::Interrupts;
use crate::model::inventory::{Irq, IrqRole};

use super::Engine;

/// Updates `fires_on` of every wide-mask queue vector steerd may move, reading
/// `proc/interrupts` through `read` only if there is one.
pub(super) fn locate(engine: &mut Engine, read: &mut dyn FnMut() -> Option<Interrupts>) {
    let config = &engine.config;
    let placement = &engine.placement;
    let wide = |irq: &Irq| {
        matches!(irq.role, IrqRole::Rx | IrqRole::Rxtx)
            && irq.queue.is_some()
            && !irq.managed
            && config.irq.enabled
            && irq
                .device
                .as_deref()
                .is_some_and(|d| config.manages_irqs_of(d))
            && placement
                .irqs
                .get(&irq.irq)
                .is_some_and(|a| a.affinity.len() > 1)
    };
    let wanted: Vec<u32> = engine
        .machine
        .inventory
        .irqs
        .iter()
        .filter(|irq| wide(irq))
        .map(|irq| irq.irq)
        .collect();
    if wanted.is_empty() {
        return;
    }
    let Some(parsed) = read() else {
        return;
    };
    for irq in wanted {
        let Some(line) = parsed.line(irq) else {
            continue;
        };
        let inventory = &mut engine.machine.inventory;
        let Ok(index) = inventory.irqs.binary_search_by_key(&irq, |i| i.irq) else {
            continue;
        };
        let entry = &mut inventory.irqs[index];
        let busiest = fires_on(&entry.per_cpu, &line.per_cpu);
        entry.per_cpu.clone_from(&line.per_cpu);
        if let Some(values) = engine.placement.irqs.get_mut(&irq) {
            values.fires_on = busiest;
        }
    }
}

/// The CPU whose count rose most between two `proc/interrupts` rows (indexed by CPU id),
/// if any rose.
fn fires_on(before: &[u64], now: &[u64]) -> Option<u32> {
    now.iter()
        .enumerate()
        .map(|(cpu, &count)| {
            let was = before.get(cpu).copied().unwrap_or(0);
            (
                u32::try_from(cpu).unwrap_or(u32::MAX),
                count.saturating_sub(was),
            )
        })
        .filter(|&(_, rise)| rise > 0)
        .max_by_key(|&(cpu, rise)| (rise, std::cmp::Reverse(cpu)))
        .map(|(cpu, _)| cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_vector_fires_where_its_count_rose_most() {
        // CPU 2 took the interrupts since the last look; CPU 0's old count is history.
        assert_eq!(fires_on(&[900, 0, 5, 0], &[900, 1, 80, 0]), Some(2));
        // Nothing rose: not known (the policy falls back to effective_affinity).
        assert_eq!(fires_on(&[7, 3], &[7, 3]), None);
        // A CPU that came online has no earlier column.
        assert_eq!(fires_on(&[4], &[4, 0, 12]), Some(2));
    }
}
