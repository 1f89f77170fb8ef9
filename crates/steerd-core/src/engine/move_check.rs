//! Whether a queue vector's move moved its work.
//!
//! Writing an IRQ's affinity changes where its *next* interrupt is delivered, and a NAPI
//! is scheduled on the CPU its interrupt arrives on. A NAPI that finds a full budget of
//! packets on every poll never re-arms its interrupt, so under saturation it keeps polling
//! where it ran, whatever the mask says (docs/kernel.md, "Under saturation"): the move's
//! expected effect ("CPU 0 40k -> 20k pkt/s") does not happen, and a policy that believed
//! the mask would think the CPU relieved and look no further.
//!
//! On x86 a written mask takes effect at the vector's next interrupt, which still arrives
//! on the old CPU; a move made while the queue is idle (steerd's first placement, before
//! traffic) therefore sends the first interrupt of the traffic to the old CPU, and under
//! saturation the NAPI stays there for good (lab, igb on 6.1, `sat-cpu0`: every queue
//! vector moved off CPU 0 before the traffic, CPU 0 at 0.96 irq+softirq and the others idle
//! for the whole run, with irqbalance as with steerd).
//!
//! So every applied move of a queue vector is checked, from counters already sampled, once
//! its queue carries work (a queue idle at the write is watched until it does, when its
//! driver counts packets per queue): the vector's interrupt count (`proc/stat`'s `intr` line)
//! rising by [`MIN_INTERRUPTS`] after the write says its interrupts arrive under the new
//! single-CPU mask (on x86 the first one may still land on the old CPU, which moves the
//! vector); none for [`CHECK_NS`] while the queue keeps receiving says its work stayed on
//! the old CPU. Such a vector is marked in the placement (`IrqAffinity::work_stays_on`):
//! the load counts its work where it is, the policy does not move it again, and RPS can
//! spread what it brings. The mark goes when its interrupts come back (the move took
//! effect late), when its queue falls idle (its NAPI completes and re-arms on the new
//! CPU), or when anyone writes its mask again.
//!
//! A move steerd did not write is checked the same way when it is found pending at
//! discovery: a queue vector whose single-CPU mask is not the single CPU of its
//! `effective_affinity` has not fired since someone (the driver at probe, another tool)
//! wrote that mask, and its next interrupt still arrives on the effective CPU (lab,
//! virtio-net on 6.1, `sat-burst`: `input.2` with mask 2 and effective CPU 3 in 36 of 36
//! runs; the burst's first interrupts landed on CPU 3 and the saturated NAPI stayed there,
//! so CPU 1 polled two queues while CPU 2 idled). Such a check waits for its queue to
//! receive however long that takes, is dropped without a verdict once the vector fires
//! while its queue is idle (its NAPI re-armed on the new CPU), and is not judged where the
//! driver counts no packets per queue.

use std::collections::BTreeMap;
use std::fmt;

use crate::load::Load;
use crate::model::snapshot::Snapshot;
use crate::policy::Placement;

/// Interrupts after the write that show the vector fires under its new mask.
pub const MIN_INTERRUPTS: u64 = 2;

/// How long a receiving queue's vector may stay silent after a move before the move is
/// said not to have taken effect: a few ticks (the default tick is 250 ms), so that a
/// busy but not saturated NAPI, which re-arms within milliseconds, is never misjudged.
pub const CHECK_NS: u64 = 2_000_000_000;

/// The share of its queue's packet rate a vector's new CPU must process for the queue's
/// work to count as moved there. Interrupts alone do not show it: under QEMU's igb model
/// (lab, 6.1, `sat-cpu0`) the moved vectors fired on CPUs 1-3 thousands of times while
/// CPU 0 went on polling all four queues at 0.999 irq+softirq and CPUs 1-3 processed
/// nothing (the device raised interrupts while the NAPI was still scheduled on CPU 0, so
/// they found it scheduled and did nothing).
pub const WORK_SHARE: f64 = 0.5;

/// Whether a moved queue's work shows on its new CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Work {
    /// Its new CPU processes at least [`WORK_SHARE`] of the queue's packets.
    Followed,
    /// It does not, while the queue receives with RPS off for it (so softnet `processed`
    /// counts where the NAPI polls).
    Stayed,
    /// Cannot be told: no per-queue or per-CPU rates, an idle queue, or RPS on for it
    /// (its packets are processed where RPS sends them).
    Unknown,
}

/// Whether RPS is on for `m`'s queue: its packets are then processed where RPS sends them.
fn rps_on(m: &Move, placement: &Placement) -> bool {
    placement
        .rx_queue(&m.device, m.queue)
        .and_then(|values| values.rps_cpus.as_ref())
        .is_some_and(|cpus| !cpus.is_empty())
}

fn work(m: &Move, load: &Load, placement: &Placement, floor: f64) -> Work {
    let rps_on = rps_on(m, placement);
    let queue_pps = load
        .rx_queue_pps(&m.device, m.queue)
        .filter(|&p| p >= floor);
    let processed = load.cpu(m.to).filter(|c| c.warm).map(|c| c.processed_pps);
    match (queue_pps, processed) {
        (Some(queue_pps), Some(processed)) if !rps_on => {
            if processed >= queue_pps * WORK_SHARE {
                Work::Followed
            } else {
                Work::Stayed
            }
        }
        _ => Work::Unknown,
    }
}

/// A move being checked, or one that has not taken effect.
#[derive(Debug, Clone, PartialEq)]
struct Move {
    device: String,
    queue: u32,
    from: u32,
    to: u32,
    written_ns: u64,
    /// The vector's interrupt count in the first sample read after the write (`None`
    /// until then): interrupts counted earlier may predate the write.
    count_at: Option<u64>,
    /// Found pending at discovery, not written by steerd (see the module's doc).
    pending: bool,
}

impl Move {
    /// A move from `cpus.0` to `cpus.1`, not yet read after `written_ns`.
    fn new(device: &str, queue: u32, cpus: (u32, u32), written_ns: u64, pending: bool) -> Self {
        Move {
            device: device.to_string(),
            queue,
            from: cpus.0,
            to: cpus.1,
            written_ns,
            count_at: None,
            pending,
        }
    }
}

/// What a check found, for the driver to log and count.
#[derive(Debug, Clone, PartialEq)]
pub struct MoveVerdict {
    pub irq: u32,
    pub device: String,
    pub queue: u32,
    pub from: u32,
    pub to: u32,
    pub effect: MoveEffect,
    /// A placement found pending at discovery, not a move steerd wrote.
    pub pending: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MoveEffect {
    /// Its interrupts arrive on the new CPU, `after_s` seconds after the write at most.
    TookEffect { after_s: f64 },
    /// No interrupt for `CHECK_NS` while its queue received `queue_pps`: its NAPI keeps
    /// polling on `from`.
    NoEffect { queue_pps: f64 },
    /// A move that had not taken effect did, `after_s` seconds after the write.
    TookEffectLate { after_s: f64 },
    /// No interrupt for `CHECK_NS`, and the queue's packets are not counted (the driver
    /// has no per-queue counters): whether it still receives is not known.
    Unknown,
}

impl MoveEffect {
    /// Every result's label, for metrics that exist from the start.
    pub const LABELS: [&'static str; 4] =
        ["took_effect", "no_effect", "took_effect_late", "unknown"];

    /// The metric label of the result.
    pub fn label(&self) -> &'static str {
        match self {
            MoveEffect::TookEffect { .. } => "took_effect",
            MoveEffect::NoEffect { .. } => "no_effect",
            MoveEffect::TookEffectLate { .. } => "took_effect_late",
            MoveEffect::Unknown => "unknown",
        }
    }
}

/// What one [`MoveChecks::check`] found.
#[derive(Debug, Default)]
pub struct Checked {
    pub verdicts: Vec<MoveVerdict>,
    /// A vector was marked or unmarked in the placement: what the policy sees changed.
    pub marks_changed: bool,
}

/// The moves being checked and those that have not taken effect, by IRQ number.
#[derive(Debug, Default)]
pub struct MoveChecks {
    checking: BTreeMap<u32, Move>,
    no_effect: BTreeMap<u32, Move>,
}

impl MoveChecks {
    /// Starts checking a move of `irq` (a vector of `device`'s queue `queue`) from the CPU
    /// it fired on to `to`, written at `now_ns`. A move of a vector already being checked,
    /// or marked, replaces it.
    pub fn start(&mut self, irq: u32, device: &str, queue: u32, from: u32, to: u32, now_ns: u64) {
        self.no_effect.remove(&irq);
        let m = Move::new(device, queue, (from, to), now_ns, false);
        self.checking.insert(irq, m);
    }

    /// Starts checking a placement found pending at `now_ns`: `irq`'s mask is the single
    /// CPU `to` while its next interrupt still arrives on `from` (its effective affinity).
    /// A vector already being checked or marked keeps what was learnt of it.
    pub fn start_pending(
        &mut self,
        irq: u32,
        device: &str,
        queue: u32,
        from: u32,
        to: u32,
        now_ns: u64,
    ) {
        if !self.checking.contains_key(&irq) && !self.no_effect.contains_key(&irq) {
            let m = Move::new(device, queue, (from, to), now_ns, true);
            self.checking.insert(irq, m);
        }
    }

    /// Where `irq`'s next interrupt arrives when its placement was found pending and has
    /// not settled: a new write to its mask moves its work from there, not from its mask.
    pub fn pending_from(&self, irq: u32) -> Option<u32> {
        self.checking
            .get(&irq)
            .filter(|m| m.pending)
            .map(|m| m.from)
    }

    /// Forgets `irq` (its mask was written or found changed): what it was checked for no
    /// longer holds. The caller clears the placement's mark.
    pub fn forget(&mut self, irq: u32) {
        self.checking.remove(&irq);
        self.no_effect.remove(&irq);
    }

    /// Whether nothing is being checked or marked.
    pub fn is_empty(&self) -> bool {
        self.checking.is_empty() && self.no_effect.is_empty()
    }

    /// Judges every move against the latest sample and load; marks and unmarks vectors in
    /// `placement`. `floor` is the queue rate, packets/s, below which a queue is idle. A
    /// move whose mask is no longer the one written, or whose count went backwards (a new
    /// IRQ descriptor), is dropped without a verdict.
    pub fn check(
        &mut self,
        sample: &Snapshot,
        load: &Load,
        floor: f64,
        placement: &mut Placement,
    ) -> Checked {
        let mut checked = Checked::default();
        if self.is_empty() {
            return checked;
        }
        let read_at = sample.stat_taken_at_ns();
        let count_of = |irq: u32| sample.irq_totals.get(irq as usize).copied();
        let secs = |m: &Move| read_at.saturating_sub(m.written_ns) as f64 / 1e9;
        let mut judged = Vec::new();
        for (&irq, m) in &mut self.checking {
            if !mask_holds(placement, irq, m) {
                judged.push((irq, None));
                continue;
            }
            // A reading taken before the write (proc/stat carried over while idle) says
            // nothing about it.
            let Some(count) = count_of(irq).filter(|_| read_at > m.written_ns) else {
                continue;
            };
            let Some(count_at) = m.count_at else {
                m.count_at = Some(count);
                continue;
            };
            let rate = load.rx_queue_pps(&m.device, m.queue);
            let idle = rate.is_some_and(|pps| pps < floor);
            let effect = if count < count_at {
                None
            } else if m.pending && (idle || rate.is_none()) {
                // Interrupts while it is not saturated: the first arrived on the old CPU
                // and moved the vector, its NAPI completed, and the next came under the
                // mask. Settled, nothing to report. Else its 2 s start with the traffic.
                if count - count_at >= MIN_INTERRUPTS {
                    judged.push((irq, None));
                } else {
                    m.written_ns = read_at;
                }
                continue;
            } else if idle {
                // An idle queue says nothing (a few interrupts, no work to follow): the
                // check starts again from this sample, and its first packets will show
                // where its interrupts and its work go.
                m.written_ns = read_at;
                m.count_at = Some(count);
                continue;
            } else if count - count_at >= MIN_INTERRUPTS
                && work(m, load, placement, floor) != Work::Stayed
            {
                Some(MoveEffect::TookEffect { after_s: secs(m) })
            } else if read_at.saturating_sub(m.written_ns) < CHECK_NS {
                continue;
            } else {
                match load.rx_queue_pps(&m.device, m.queue) {
                    Some(pps) => Some(MoveEffect::NoEffect { queue_pps: pps }),
                    None => Some(MoveEffect::Unknown),
                }
            };
            judged.push((irq, effect));
        }
        for (irq, effect) in judged {
            let Some(m) = self.checking.remove(&irq) else {
                continue;
            };
            let Some(effect) = effect else {
                continue;
            };
            checked.verdicts.push(verdict(irq, &m, effect));
            if let MoveEffect::NoEffect { .. } = effect {
                if let Some(values) = placement.irqs.get_mut(&irq) {
                    values.work_stays_on = Some(m.from);
                    checked.marks_changed = true;
                }
                let count_at = count_of(irq);
                self.no_effect.insert(irq, Move { count_at, ..m });
            }
        }
        let mut settled = Vec::new();
        for (&irq, m) in &self.no_effect {
            let now = count_of(irq);
            // Back on its new CPU when it fires there and its work shows there; with RPS
            // on for its queue (brought in by the mark) the work cannot be told apart, so
            // the mark stays until the queue falls idle or the mask is written.
            let idle = load
                .rx_queue_pps(&m.device, m.queue)
                .is_none_or(|pps| pps < floor);
            let rose = now
                .zip(m.count_at)
                .is_some_and(|(now, then)| now >= then && now - then >= MIN_INTERRUPTS)
                && !idle
                && !rps_on(m, placement)
                && work(m, load, placement, floor) != Work::Stayed;
            let reset = now.zip(m.count_at).is_some_and(|(now, then)| now < then);
            if rose {
                let after_s = secs(m);
                checked
                    .verdicts
                    .push(verdict(irq, m, MoveEffect::TookEffectLate { after_s }));
            }
            if rose || idle || reset || !mask_holds(placement, irq, m) {
                settled.push(irq);
            }
        }
        for irq in settled {
            self.no_effect.remove(&irq);
            if let Some(values) = placement.irqs.get_mut(&irq)
                && values.work_stays_on.take().is_some()
            {
                checked.marks_changed = true;
            }
        }
        checked
    }

    /// Marks again, in a placement read afresh (a rediscovery, the simulator's view), the
    /// vectors whose move has not taken effect; forgets every move whose vector is gone or
    /// whose mask is no longer the one written.
    pub fn mark(&mut self, placement: &mut Placement) {
        self.checking
            .retain(|&irq, m| mask_holds(placement, irq, m));
        self.no_effect
            .retain(|&irq, m| mask_holds(placement, irq, m));
        for (irq, m) in &self.no_effect {
            if let Some(values) = placement.irqs.get_mut(irq) {
                values.work_stays_on = Some(m.from);
            }
        }
    }
}

/// The journal's sentence for a verdict.
impl fmt::Display for MoveVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let MoveVerdict {
            irq,
            device,
            queue,
            from,
            to,
            effect,
            pending,
        } = self;
        write!(
            f,
            "irq {irq} ({device} queue {queue}): move {from} -> {to} "
        )?;
        if *pending {
            write!(
                f,
                "(found pending at discovery: mask {to}, effective CPU {from}) "
            )?;
        }
        // A pending placement's clock starts when its queue begins to receive: it says
        // nothing of when the mask was written.
        let (since, late_since) = if *pending {
            (
                "after its queue began to receive",
                "after its queue began to receive",
            )
        } else {
            (
                "after the write (or after its queue began to receive)",
                "after the write",
            )
        };
        match effect {
            MoveEffect::TookEffect { .. } if *pending => write!(
                f,
                "took effect, its interrupts arrive on CPU {to}"
            ),
            MoveEffect::TookEffect { after_s } => write!(
                f,
                "took effect, its interrupts arrive on CPU {to} ({after_s:.1} s after the write)"
            ),
            MoveEffect::NoEffect { queue_pps } => write!(
                f,
                "did not take effect: in the 2 s {since} its work did not arrive on CPU {to} while the queue received {queue_pps:.0} pkt/s, its NAPI keeps polling on CPU {from} (saturated); its work is counted on CPU {from}, it is not moved again until its work follows, and RPS may spread it"
            ),
            MoveEffect::TookEffectLate { after_s } => write!(
                f,
                "took effect late, its interrupts arrive on CPU {to} ({after_s:.1} s {late_since})"
            ),
            MoveEffect::Unknown => f.write_str(
                "not verified: under 2 interrupts in the 2 s after the write, and the driver counts no packets per queue",
            ),
        }
    }
}

/// Whether `irq`'s mask is still the single CPU the move wrote.
fn mask_holds(placement: &Placement, irq: u32, m: &Move) -> bool {
    placement
        .irqs
        .get(&irq)
        .is_some_and(|v| v.affinity.len() == 1 && v.affinity.contains(m.to))
}

fn verdict(irq: u32, m: &Move, effect: MoveEffect) -> MoveVerdict {
    MoveVerdict {
        irq,
        device: m.device.clone(),
        queue: m.queue,
        from: m.from,
        to: m.to,
        effect,
        pending: m.pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::CpuSet;
    use crate::policy::placement::IrqAffinity;

    const SEC: u64 = 1_000_000_000;

    fn sample(at_ns: u64, count: u64) -> Snapshot {
        Snapshot {
            taken_at_ns: at_ns,
            irq_totals: vec![0, 0, count],
            ..Snapshot::default()
        }
    }

    fn load_with(pps: Option<f64>) -> Load {
        let mut load = Load::new();
        load.rx_queues.insert("eth0".into(), vec![pps]);
        load
    }

    fn placement_on(cpu: u32) -> Placement {
        let mut placement = Placement::default();
        placement.irqs.insert(
            2,
            IrqAffinity {
                affinity: CpuSet::from_iter([cpu]),
                ..IrqAffinity::default()
            },
        );
        placement
    }

    /// Runs samples (seconds after the write, interrupt count) through a check of a move
    /// of IRQ 2 from CPU 0 to CPU 1 written at 10 s; returns every verdict's effect.
    fn run(samples: &[(f64, u64)], load: &Load, placement: &mut Placement) -> Vec<MoveEffect> {
        let mut checks = MoveChecks::default();
        checks.start(2, "eth0", 0, 0, 1, 10 * SEC);
        samples
            .iter()
            .flat_map(|&(after, count)| {
                let at = 10 * SEC + (after * 1e9) as u64;
                checks
                    .check(&sample(at, count), load, 1000.0, placement)
                    .verdicts
            })
            .map(|v| v.effect)
            .collect()
    }

    #[test]
    fn interrupts_after_the_write_say_the_move_took_effect() {
        let mut placement = placement_on(1);
        // 500 interrupts counted in the first sample after the write may predate it.
        let effects = run(
            &[(0.25, 500), (0.5, 501), (0.75, 540)],
            &load_with(Some(40_000.0)),
            &mut placement,
        );
        assert_eq!(effects, vec![MoveEffect::TookEffect { after_s: 0.75 }]);
        assert_eq!(placement.irqs[&2].work_stays_on, None);
    }

    #[test]
    fn a_silent_vector_of_a_receiving_queue_did_not_move_until_it_fires() {
        let mut placement = placement_on(1);
        let load = load_with(Some(40_000.0));
        let mut checks = MoveChecks::default();
        checks.start(2, "eth0", 0, 0, 1, 10 * SEC);
        let mut at = |after: f64, count: u64, placement: &mut Placement| {
            let at = 10 * SEC + (after * 1e9) as u64;
            checks
                .check(&sample(at, count), &load, 1000.0, placement)
                .verdicts
        };
        assert!(at(0.25, 500, &mut placement).is_empty());
        // One interrupt (the one the old CPU takes on x86) is not yet the new CPU's.
        assert!(at(1.5, 501, &mut placement).is_empty());
        let verdicts = at(2.5, 501, &mut placement);
        assert_eq!(
            verdicts[0].effect,
            MoveEffect::NoEffect {
                queue_pps: 40_000.0
            }
        );
        assert_eq!(placement.irqs[&2].work_stays_on, Some(0));
        // Its work counts on CPU 0 until its interrupts come back.
        assert!(at(5.0, 502, &mut placement).is_empty());
        assert_eq!(placement.irqs[&2].work_stays_on, Some(0));
        let verdicts = at(9.0, 520, &mut placement);
        assert_eq!(
            verdicts[0].effect,
            MoveEffect::TookEffectLate { after_s: 9.0 }
        );
        assert_eq!(placement.irqs[&2].work_stays_on, None);
    }

    /// A move written while the queue was idle: traffic starts later, its first interrupt
    /// lands on the old CPU (x86), and a saturated NAPI stays there.
    #[test]
    fn a_move_of_an_idle_queue_is_judged_once_the_queue_receives() {
        let mut placement = placement_on(1);
        let mut checks = MoveChecks::default();
        checks.start(2, "eth0", 0, 0, 1, 10 * SEC);
        let idle = load_with(Some(0.0));
        let busy = load_with(Some(40_000.0));
        let mut at = |after: f64, count: u64, load: &Load, placement: &mut Placement| {
            let at = 10 * SEC + (after * 1e9) as u64;
            checks
                .check(&sample(at, count), load, 1000.0, placement)
                .verdicts
        };
        // Idle for 5 s: nothing to judge, however long.
        for (after, count) in [(0.25, 7), (1.0, 7), (3.0, 7), (5.0, 7)] {
            assert!(at(after, count, &idle, &mut placement).is_empty());
        }
        // Traffic: one interrupt (on the old CPU), then silence while the queue receives.
        assert!(at(5.25, 8, &busy, &mut placement).is_empty());
        assert!(at(6.5, 8, &busy, &mut placement).is_empty());
        let verdicts = at(7.25, 8, &busy, &mut placement);
        assert_eq!(
            verdicts.first().map(|v| v.effect),
            Some(MoveEffect::NoEffect {
                queue_pps: 40_000.0
            })
        );
        assert_eq!(placement.irqs[&2].work_stays_on, Some(0));
    }

    /// Runs samples (seconds after discovery at 0 s, interrupt count, load) through a
    /// check of IRQ 2's placement found pending: mask CPU 1, effective CPU 0.
    fn run_pending(
        checks: &mut MoveChecks,
        samples: &[(f64, u64, &Load)],
        placement: &mut Placement,
    ) -> Vec<MoveVerdict> {
        samples
            .iter()
            .flat_map(|&(after, count, load)| {
                let at = (after * 1e9) as u64;
                checks
                    .check(&sample(at, count), load, 1000.0, placement)
                    .verdicts
            })
            .collect()
    }

    /// The driver's placement of an idle queue, found pending: the burst's first
    /// interrupt lands on the effective CPU and a saturated NAPI stays there.
    #[test]
    fn a_placement_found_pending_is_judged_once_its_queue_receives() {
        let mut placement = placement_on(1);
        let mut checks = MoveChecks::default();
        checks.start_pending(2, "eth0", 0, 0, 1, 0);
        assert_eq!(checks.pending_from(2), Some(0));
        let (idle, busy) = (load_with(Some(0.0)), load_with(Some(40_000.0)));
        let quiet = run_pending(
            &mut checks,
            &[
                (0.25, 7, &idle),
                (30.0, 7, &idle),
                (30.25, 8, &busy),
                (31.5, 8, &busy),
            ],
            &mut placement,
        );
        assert!(quiet.is_empty(), "{quiet:?}");
        let verdicts = run_pending(&mut checks, &[(32.5, 8, &busy)], &mut placement);
        assert_eq!(
            verdicts
                .iter()
                .map(|v| (v.effect, v.pending, v.from))
                .collect::<Vec<_>>(),
            vec![(
                MoveEffect::NoEffect {
                    queue_pps: 40_000.0
                },
                true,
                0
            )]
        );
        assert_eq!(placement.irqs[&2].work_stays_on, Some(0));
        let line = verdicts[0].to_string();
        assert!(
            line.contains("move 0 -> 1 (found pending at discovery: mask 1, effective CPU 0) did not take effect: in the 2 s after its queue began to receive"),
            "{line}"
        );
        // Marked now: a new write moves its work from where the mark says.
        assert_eq!(checks.pending_from(2), None);
    }

    #[test]
    fn a_placement_found_pending_that_fires_unsaturated_settles_without_a_verdict() {
        let mut placement = placement_on(1);
        let (idle, light) = (load_with(Some(0.0)), load_with(Some(500.0)));
        let mut checks = MoveChecks::default();
        checks.start_pending(2, "eth0", 0, 0, 1, 0);
        // Two interrupts while the queue is light: the first moved the vector, the NAPI
        // re-armed and the second came under the mask.
        let verdicts = run_pending(
            &mut checks,
            &[(0.25, 7, &idle), (5.0, 8, &light), (6.0, 9, &light)],
            &mut placement,
        );
        assert!(verdicts.is_empty() && checks.is_empty(), "{verdicts:?}");
        // Without per-queue counters it is never called unknown: it waits, and settles
        // the same way.
        let uncounted = load_with(None);
        let mut checks = MoveChecks::default();
        checks.start_pending(2, "eth0", 0, 0, 1, 0);
        let waiting = run_pending(
            &mut checks,
            &[(0.25, 7, &uncounted), (10.0, 7, &uncounted)],
            &mut placement,
        );
        assert!(waiting.is_empty() && !checks.is_empty(), "{waiting:?}");
        let settled = run_pending(&mut checks, &[(11.0, 9, &uncounted)], &mut placement);
        assert!(settled.is_empty() && checks.is_empty(), "{settled:?}");
        assert_eq!(placement.irqs[&2].work_stays_on, None);
        // A vector steerd moved keeps its own check.
        checks.start(2, "eth0", 0, 3, 1, 0);
        checks.start_pending(2, "eth0", 0, 0, 1, 0);
        assert_eq!(checks.pending_from(2), None);
    }

    #[test]
    fn a_move_of_an_idle_queue_whose_interrupts_follow_took_effect() {
        let mut placement = placement_on(1);
        let busy = load_with(Some(40_000.0));
        let mut checks = MoveChecks::default();
        checks.start(2, "eth0", 0, 0, 1, 10 * SEC);
        checks.check(
            &sample(10 * SEC + SEC / 4, 7),
            &load_with(Some(0.0)),
            1000.0,
            &mut placement,
        );
        checks.check(
            &sample(14 * SEC, 7),
            &load_with(Some(0.0)),
            1000.0,
            &mut placement,
        );
        let verdicts = checks
            .check(
                &sample(14 * SEC + SEC / 4, 90),
                &busy,
                1000.0,
                &mut placement,
            )
            .verdicts;
        assert!(matches!(
            verdicts.first().map(|v| v.effect),
            Some(MoveEffect::TookEffect { .. })
        ));
        assert_eq!(placement.irqs[&2].work_stays_on, None);
    }

    #[test]
    fn an_idle_queue_or_an_uncounted_one_is_not_called_stuck() {
        let mut placement = placement_on(1);
        let idle = run(
            &[(0.25, 7), (3.0, 7)],
            &load_with(Some(10.0)),
            &mut placement,
        );
        assert!(idle.is_empty(), "{idle:?}");
        // A marked vector whose queue falls idle loses its mark (its NAPI re-arms), and
        // the engine is told so that it decides again.
        let mut checks = MoveChecks::default();
        checks.start(2, "eth0", 0, 0, 1, 0);
        let busy = load_with(Some(40_000.0));
        checks.check(&sample(SEC / 4, 7), &busy, 1000.0, &mut placement);
        let marked = checks.check(&sample(3 * SEC, 7), &busy, 1000.0, &mut placement);
        assert!(marked.marks_changed);
        let unmarked = checks.check(
            &sample(4 * SEC, 7),
            &load_with(Some(10.0)),
            1000.0,
            &mut placement,
        );
        assert!(unmarked.marks_changed && unmarked.verdicts.is_empty());
        assert_eq!(placement.irqs[&2].work_stays_on, None);
        let uncounted = run(&[(0.25, 7), (3.0, 7)], &load_with(None), &mut placement);
        assert_eq!(uncounted, vec![MoveEffect::Unknown]);
        assert_eq!(placement.irqs[&2].work_stays_on, None);
    }

    #[test]
    fn a_reading_from_before_the_write_or_a_count_that_went_back_says_nothing() {
        let load = load_with(Some(40_000.0));
        let mut placement = placement_on(1);
        let mut checks = MoveChecks::default();
        checks.start(2, "eth0", 0, 0, 1, 10 * SEC);
        // proc/stat carried over from before the write (idle ticks read it less often).
        let mut stale = sample(12 * SEC, 500);
        stale.stat_taken_at_ns = Some(9 * SEC);
        for _ in 0..3 {
            let checked = checks.check(&stale, &load, 1000.0, &mut placement);
            assert!(checked.verdicts.is_empty());
        }
        assert!(
            !checks.is_empty(),
            "still waiting for a reading after the write"
        );
        checks.check(&sample(13 * SEC, 500), &load, 1000.0, &mut placement);
        // A new IRQ descriptor counts from 0: the move is dropped, not judged.
        let checked = checks.check(&sample(16 * SEC, 3), &load, 1000.0, &mut placement);
        assert!(checked.verdicts.is_empty(), "{:?}", checked.verdicts);
        assert!(checks.is_empty());
    }

    #[test]
    fn a_mark_is_kept_across_a_rediscovery_only_while_the_mask_is_the_one_written() {
        let load = load_with(Some(40_000.0));
        let mut checks = MoveChecks::default();
        checks.start(2, "eth0", 0, 0, 1, 0);
        let mut placement = placement_on(1);
        checks.check(&sample(SEC / 4, 9), &load, 1000.0, &mut placement);
        checks.check(&sample(3 * SEC, 9), &load, 1000.0, &mut placement);
        assert_eq!(placement.irqs[&2].work_stays_on, Some(0));
        let mut fresh = placement_on(1);
        checks.mark(&mut fresh);
        assert_eq!(fresh.irqs[&2].work_stays_on, Some(0));
        // Someone else moved it: the move is forgotten, and not marked again if the mask
        // comes back.
        let mut moved_by_others = placement_on(3);
        checks.mark(&mut moved_by_others);
        assert_eq!(moved_by_others.irqs[&2].work_stays_on, None);
        assert!(checks.is_empty());
        checks.mark(&mut fresh);
        let mut back = placement_on(1);
        checks.mark(&mut back);
        assert_eq!(back.irqs[&2].work_stays_on, None);
    }
}
