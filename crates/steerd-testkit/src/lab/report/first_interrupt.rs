//! Input vectors whose first interrupt once the traffic began arrived on a CPU outside the
//! mask they had then. On x86 without interrupt remapping a vector's new affinity is
//! applied at its next interrupt, so a placement written while the vector was idle (the
//! driver's at probe, a balancer's before the traffic) still sends that interrupt to the
//! old CPU; the NAPI it schedules there, saturated from its first poll, never re-arms, and
//! the queue's work stays on a CPU its mask does not name (docs/kernel.md, "Under
//! saturation"). In `sat-burst` on QEMU 10 (2026-11-29) virtio-net's own placement (queue N
//! on CPU N) had two such vectors in every run, whatever the balancer: rx-2's work stayed on
//! CPU 3 and rx-3's on CPU 1, and one CPU idled through the burst. A run that has one
//! carries a queue's work where no balancer put it, which its figures must say.

use std::collections::BTreeSet;

use super::parse::{GuestSample, vector_kind};
use crate::lab::isolation::cpus_of;

/// An input vector whose first interrupt in the traffic arrived outside its mask.
#[derive(Debug, Clone, PartialEq)]
pub struct OffMask {
    pub irq: u32,
    /// Its `/proc/interrupts` name (`virtio0-input.2`).
    pub name: String,
    /// Its `smp_affinity_list` in the sample before the interrupt.
    pub mask: String,
    /// The CPUs its count rose on, outside the mask.
    pub cpus: Vec<u32>,
    /// The guest uptime of the sample that first saw it fire.
    pub at: f64,
    /// Its interrupts from that sample to the end of the run (few or none: its NAPI kept
    /// polling where the first one landed).
    pub later: u64,
}

impl OffMask {
    /// One line for the lab's JSON.
    pub fn describe(&self) -> String {
        let cpus: Vec<String> = self.cpus.iter().map(u32::to_string).collect();
        format!(
            "irq {} ({}): mask {}, first interrupt at {:.1} s on CPU {}, {} after it",
            self.irq,
            self.name,
            self.mask,
            self.at,
            cpus.join(","),
            self.later
        )
    }
}

/// How long before the lab's reckoning of the traffic's start (the guest's uptime at ready
/// plus the phase's start, counted on the host) a first interrupt still counts: the guest
/// saw its first packets a little earlier (2026-11-30, QEMU 10: in 2 of 6 `sat-cpu0` runs
/// with no balancer and 1 of 12 `sat-burst` runs the first interrupts fell in the sample
/// that ended just before it, 7.94 s against 8.03 and 36.60 against 36.62, and went
/// unreported). No input vector fires in the idle seconds before.
pub const EARLY_S: f64 = 2.0;

/// The input vectors of `samples` whose first interrupt from [`EARLY_S`] before `traffic`
/// (guest uptime) on rose on a CPU outside the mask of the sample before it.
pub(super) fn off_mask(samples: &[GuestSample], traffic: f64) -> Vec<OffMask> {
    let mut judged: BTreeSet<u32> = BTreeSet::new();
    let mut found = Vec::new();
    for pair in samples.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        if after.up < traffic - EARLY_S {
            continue;
        }
        for (irq, (name, counts)) in &after.interrupts {
            if vector_kind(name) != Some("input") || judged.contains(irq) {
                continue;
            }
            let rose: Vec<u32> = counts
                .iter()
                .filter(|&(&cpu, &n)| n > before.interrupts_on(*irq, cpu))
                .map(|(cpu, _)| *cpu)
                .collect();
            if rose.is_empty() {
                continue;
            }
            judged.insert(*irq);
            let Some(mask) = before.values.get(&format!("irq {irq}")) else {
                continue;
            };
            let allowed = cpus_of(mask, false);
            let outside: Vec<u32> = rose
                .into_iter()
                .filter(|cpu| !allowed.is_empty() && !allowed.contains(cpu))
                .collect();
            if outside.is_empty() {
                continue;
            }
            let total = |s: &GuestSample| -> u64 {
                s.interrupts.get(irq).map_or(0, |(_, c)| c.values().sum())
            };
            let later = samples
                .last()
                .map_or(0, |end| total(end).saturating_sub(total(after)));
            found.push(OffMask {
                irq: *irq,
                name: name.clone(),
                mask: mask.clone(),
                cpus: outside,
                at: after.up,
                later,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A sample at `up` with input vector 29 (mask `mask`) counted `counts` by CPU.
    fn sample(up: f64, mask: &str, counts: &[(u32, u64)]) -> GuestSample {
        let mut s = GuestSample {
            up,
            ..GuestSample::default()
        };
        s.interrupts.insert(
            29,
            (
                "virtio0-input.2".into(),
                counts.iter().copied().collect::<BTreeMap<_, _>>(),
            ),
        );
        s.values.insert("irq 29".into(), mask.into());
        s
    }

    #[test]
    fn a_first_interrupt_on_the_old_cpu_is_found_with_the_silence_after_it() {
        // sat-burst on QEMU 10, none #1: mask 2, effective 3; the burst's one interrupt on
        // CPU 3, then none while rx-2's NAPI polled there.
        let samples = [
            sample(35.0, "2", &[(2, 0), (3, 0)]),
            sample(36.2, "2", &[(2, 0), (3, 0)]),
            sample(37.3, "2", &[(2, 0), (3, 1)]),
            sample(55.0, "2", &[(2, 0), (3, 1)]),
        ];
        let found = off_mask(&samples, 35.5);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].cpus, vec![3]);
        assert_eq!(found[0].later, 0);
        assert_eq!(
            found[0].describe(),
            "irq 29 (virtio0-input.2): mask 2, first interrupt at 37.3 s on CPU 3, 0 after it"
        );
    }

    #[test]
    fn a_first_interrupt_inside_the_mask_or_long_before_the_traffic_is_not() {
        let inside = [
            sample(35.0, "2", &[(2, 0), (3, 0)]),
            sample(37.0, "2", &[(2, 4), (3, 0)]),
            sample(38.0, "3", &[(2, 4), (3, 9)]),
        ];
        assert!(off_mask(&inside, 35.5).is_empty());
        // An interrupt well before the traffic (boot, the idle spell) is not the traffic's.
        let early = [
            sample(10.0, "2", &[(2, 0), (3, 0)]),
            sample(11.0, "2", &[(2, 0), (3, 1)]),
            sample(40.0, "2", &[(2, 0), (3, 1)]),
        ];
        assert!(off_mask(&early, 35.5).is_empty());
        // One a sample before the lab's reckoning of the traffic's start is (sat-cpu0 on
        // QEMU 10, no balancer's run 2: the first interrupts in the sample at 7.94 s, the
        // reckoning 8.03 s).
        let a_sample_early = [
            sample(7.46, "2", &[(2, 0), (3, 0)]),
            sample(7.94, "2", &[(2, 0), (3, 1)]),
            sample(9.72, "2", &[(2, 0), (3, 1)]),
        ];
        assert_eq!(off_mask(&a_sample_early, 8.03).len(), 1);
    }
}
