//! When a CPU counts as hot, in distress or calm, and for how long it has been.
//!
//! A condition must hold for `confirm_ticks` ticks before the policy acts on it; distress
//! (drops, time_squeeze) needs only `distress_confirm_ticks`; calm must last `calm_ticks`
//! before RPS is narrowed. The streak counters live in the policy state, by CPU id.

use crate::config::Config;
use crate::cpuset::CpuSet;
use crate::load::Load;

/// Consecutive ticks each condition has held on one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streaks {
    pub hot: u32,
    pub distress: u32,
    pub calm: u32,
}

/// Why a CPU is hot right now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HotSignal {
    /// Drops or time squeezes at these rates per second.
    Distress { dropped: f64, squeezed: f64 },
    /// irq+softirq share at or above the high watermark.
    Pressure { share: f64 },
    /// Receive work far above its node's other CPUs.
    Imbalance { pps: f64, ratio: f64 },
}

/// A CPU's condition this tick.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Heat {
    /// The strongest signal this tick, if any.
    pub signal: Option<HotSignal>,
    /// Hot long enough to act on.
    pub hot: bool,
    /// In distress long enough to act on (fast path).
    pub distress: bool,
    /// Calm for `calm_ticks`.
    pub calm: bool,
    /// Hot right now, with the ticks still needed before it counts (0 when confirmed).
    pub ticks_to_confirm: u32,
    /// Ticks in a row with a signal, this one included (0 without one).
    pub spell: u32,
}

impl Heat {
    /// Hot by pressure or distress, not imbalance alone: the signals that justify RPS on a
    /// device with its own IRQs.
    pub fn under_pressure(&self) -> bool {
        self.hot
            && matches!(
                self.signal,
                Some(HotSignal::Distress { .. } | HotSignal::Pressure { .. })
            )
    }

    /// The signal, for people.
    pub fn describe(&self, cpu: u32, config: &Config) -> String {
        let w = &config.watermarks;
        match self.signal {
            Some(HotSignal::Distress { dropped, squeezed }) => format!(
                "CPU {cpu} in distress: {} drops/s, {} time squeezes/s (thresholds {} and {})",
                kilo(dropped),
                kilo(squeezed),
                w.distress_drops_per_sec,
                w.distress_squeezes_per_sec
            ),
            Some(HotSignal::Pressure { share }) => format!(
                "CPU {cpu} hot: irq+softirq share {share:.2} >= high watermark {:.2}",
                w.high
            ),
            Some(HotSignal::Imbalance { pps, ratio }) => format!(
                "CPU {cpu} hot: {} pkt/s processed, {ratio:.1}x its node's other CPUs (imbalance {:.1}, busy {})",
                kilo(pps),
                w.imbalance,
                kilo(w.busy_pps)
            ),
            None => format!("CPU {cpu} calm"),
        }
    }
}

/// Classifies every CPU and advances the streaks. `allowed` CPUs form the peer groups for
/// imbalance (by NUMA node); a CPU outside them is still classified (an isolated CPU can
/// be hot because an IRQ is stuck there).
pub fn classify(
    load: &Load,
    config: &Config,
    allowed: &CpuSet,
    node_of: &[Option<u32>],
    streaks: &mut Vec<Streaks>,
) -> Vec<Heat> {
    let nr = node_of.len();
    if streaks.len() < nr {
        streaks.resize(nr, Streaks::default());
    }
    // Per node: sum of processed pps and count over allowed online CPUs.
    let mut node_sum: Vec<(f64, u32)> = Vec::new();
    for cpu in allowed.iter() {
        let node = node_of.get(cpu as usize).copied().flatten().unwrap_or(0) as usize;
        if node_sum.len() <= node {
            node_sum.resize(node + 1, (0.0, 0));
        }
        let pps = load.cpu(cpu).map_or(0.0, |c| c.processed_pps);
        node_sum[node].0 += pps;
        node_sum[node].1 += 1;
    }
    let w = &config.watermarks;
    let h = &config.hysteresis;
    let mut heat = vec![Heat::default(); nr];
    for (index, slot) in heat.iter_mut().enumerate() {
        let streak = &mut streaks[index];
        let Some(cpu) = load.cpus.get(index).filter(|c| c.online && c.warm) else {
            *streak = Streaks::default();
            continue;
        };
        let node = node_of[index].unwrap_or(0) as usize;
        let (sum, count) = node_sum.get(node).copied().unwrap_or((0.0, 0));
        let mine = if allowed.contains(index as u32) {
            cpu.processed_pps
        } else {
            0.0
        };
        let others = count.saturating_sub(u32::from(allowed.contains(index as u32)));
        let mean_others = if others > 0 {
            ((sum - mine) / f64::from(others)).max(0.0)
        } else {
            0.0
        };
        let ratio = if mean_others > 0.0 {
            cpu.processed_pps / mean_others
        } else if cpu.processed_pps > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let distress = cpu.in_distress(w.distress_drops_per_sec, w.distress_squeezes_per_sec);
        let signal = if distress {
            Some(HotSignal::Distress {
                dropped: cpu.dropped_per_sec,
                squeezed: cpu.squeezed_per_sec,
            })
        } else if cpu.net_share >= w.high {
            Some(HotSignal::Pressure {
                share: cpu.net_share,
            })
        } else if cpu.processed_pps >= w.busy_pps && ratio >= w.imbalance && others > 0 {
            Some(HotSignal::Imbalance {
                pps: cpu.processed_pps,
                ratio,
            })
        } else {
            None
        };
        let calm_now = signal.is_none() && cpu.net_share < w.low;
        streak.hot = if signal.is_some() { streak.hot + 1 } else { 0 };
        streak.distress = if distress { streak.distress + 1 } else { 0 };
        streak.calm = if calm_now { streak.calm + 1 } else { 0 };
        let confirmed_distress = streak.distress >= h.distress_confirm_ticks;
        let confirmed_hot = confirmed_distress || streak.hot >= h.confirm_ticks;
        *slot = Heat {
            signal,
            hot: confirmed_hot,
            distress: confirmed_distress,
            calm: streak.calm >= h.calm_ticks,
            ticks_to_confirm: if signal.is_some() && !confirmed_hot {
                h.confirm_ticks - streak.hot
            } else {
                0
            },
            spell: streak.hot,
        };
    }
    heat
}

/// A rate with a k/M suffix, for people (integer formatting: plans with hundreds of
/// actions format thousands of these).
pub fn kilo(value: f64) -> String {
    let v = if value.is_finite() && value > 0.0 {
        value.round() as u64
    } else {
        0
    };
    if v >= 1_000_000 {
        let hundredths = (v + 5_000) / 10_000;
        format!("{}.{:02}M", hundredths / 100, hundredths % 100)
    } else if v >= 1_000 {
        format!("{}k", (v + 500) / 1_000)
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::CpuLoad;

    fn load(cpus: &[(f64, f64, f64)]) -> Load {
        // (processed pps, net share, dropped/s)
        Load {
            cpus: cpus
                .iter()
                .map(|&(pps, share, dropped)| CpuLoad {
                    online: true,
                    warm: true,
                    processed_pps: pps,
                    net_share: share,
                    dropped_per_sec: dropped,
                    ..CpuLoad::default()
                })
                .collect(),
            ..Load::default()
        }
    }

    fn run(load: &Load, ticks: u32) -> Vec<Heat> {
        let config = Config::default();
        let allowed = CpuSet::first_n(load.cpus.len() as u32);
        let nodes = vec![Some(0); load.cpus.len()];
        let mut streaks = Vec::new();
        let mut heat = Vec::new();
        for _ in 0..ticks {
            heat = classify(load, &config, &allowed, &nodes, &mut streaks);
        }
        heat
    }

    #[test]
    fn pressure_needs_confirmation_distress_does_not() {
        let l = load(&[(10_000.0, 0.9, 0.0), (10_000.0, 0.2, 50.0), (0.0, 0.0, 0.0)]);
        let once = run(&l, 1);
        assert!(!once[0].hot && once[0].ticks_to_confirm == 2);
        assert!(once[1].hot && once[1].distress);
        let thrice = run(&l, 3);
        assert!(thrice[0].hot && thrice[0].under_pressure());
        assert!(!thrice[2].hot);
    }

    #[test]
    fn imbalance_of_processed_work_is_hot_even_with_low_softirq_share() {
        // The veth case: all work on CPU 0, softirq share 0.2.
        let l = load(&[(100_000.0, 0.2, 0.0), (1_000.0, 0.01, 0.0)]);
        let heat = run(&l, 3);
        assert!(heat[0].hot);
        assert!(!heat[0].under_pressure());
        assert!(matches!(heat[0].signal, Some(HotSignal::Imbalance { .. })));
        assert!(!heat[1].hot);
        // Below busy_pps it is not hot at all.
        let quiet = load(&[(10_000.0, 0.2, 0.0), (0.0, 0.0, 0.0)]);
        assert!(!run(&quiet, 3)[0].hot);
    }

    #[test]
    fn kilo_rounds_like_people_read_rates() {
        assert_eq!(kilo(0.4), "0");
        assert_eq!(kilo(999.4), "999");
        assert_eq!(kilo(332_499.0), "332k");
        assert_eq!(kilo(1_234_567.0), "1.23M");
        assert_eq!(kilo(f64::NAN), "0");
    }

    #[test]
    fn calm_takes_calm_ticks() {
        let l = load(&[(1_000.0, 0.05, 0.0)]);
        assert!(!run(&l, 9)[0].calm);
        assert!(run(&l, 10)[0].calm);
    }
}
