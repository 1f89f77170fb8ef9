//! Receive queues that stop receiving in the middle of a run while the NIC's other queues
//! go on: a fault of the lab, not of a balancer. Under saturation, QEMU 7.2's virtio-net
//! (Debian 12's, the lab's default) leaves one queue with no packet at all for the rest of
//! the run in about a third of the saturated `sat-skew` runs, whatever runs in the guest
//! (2026-11-29: 9 of 27 runs at 400 rules, with no balancer, irqbalance, steerd and the
//! hand recipe alike, always rx-0, 13-36 s into the run; none in 11 unsaturated runs, none
//! in 12 `sat-skew` runs and 30 `sat-burst` runs on QEMU 10: docs/lab.md). That queue's
//! CPU then sits idle and its flows are lost at the tap, so such a run halves what a
//! balancer delivers for reasons of its own, and a comparison of balancers must know which
//! runs had it.
//!
//! Read from the per-queue packet counters the guest samples (`QS`: the RSS scenarios'
//! `rss_watch` and the saturated scenarios' `queue_watch`), with the RSS table where it is
//! sampled: a queue the table no longer points at is silent by the table's choice (the RSS
//! lever's steps), not stalled.

/// A queue that received at least this many packets per second between two samples is
/// carrying flows.
const CARRYING_PPS: f64 = 1_000.0;

/// A queue with no packet for at least this long while its siblings receive has stalled.
pub const STALL_SECS: f64 = 5.0;

/// One stalled queue: which, and from when (the guest's uptime, seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Stall {
    pub queue: usize,
    pub from: f64,
    pub secs: f64,
}

impl Stall {
    /// As the lab's JSON lines give it: `rx-0 from 27.9 s for 26 s`.
    pub fn describe(&self) -> String {
        format!(
            "rx-{} from {:.1} s for {:.0} s",
            self.queue, self.from, self.secs
        )
    }
}

/// The stalls within `window` (uptimes) among `counts` (each sample's uptime and its
/// cumulative packets per queue), given the table samples (`tables`: uptime and entries;
/// empty when not sampled).
pub fn stalls(
    counts: &[(f64, Vec<u64>)],
    tables: &[(f64, Vec<u32>)],
    window: (f64, f64),
) -> Vec<Stall> {
    let rates: Vec<(f64, f64, Vec<f64>)> = counts
        .windows(2)
        .filter(|w| w[1].0 > w[0].0 && w[0].1.len() == w[1].1.len())
        .filter(|w| w[0].0 >= window.0 && w[1].0 <= window.1)
        .map(|w| {
            let dt = w[1].0 - w[0].0;
            let r = w[0]
                .1
                .iter()
                .zip(&w[1].1)
                .map(|(a, b)| b.saturating_sub(*a) as f64 / dt)
                .collect();
            (w[0].0, w[1].0, r)
        })
        .collect();
    let queues = rates.first().map_or(0, |(_, _, r)| r.len());
    let pointed_at = |queue: usize, from: f64, to: f64| {
        tables
            .iter()
            .filter(|(up, _)| *up >= from && *up <= to)
            .all(|(_, t)| t.contains(&(queue as u32)))
    };
    let mut out = Vec::new();
    for queue in 0..queues {
        let mut carried = false;
        let mut silent_from: Option<f64> = None;
        let mut longest: Option<Stall> = None;
        for (from, to, r) in &rates {
            let others: f64 = r
                .iter()
                .enumerate()
                .filter(|(q, _)| *q != queue)
                .map(|(_, v)| v)
                .sum();
            if r[queue] >= CARRYING_PPS {
                carried = true;
                silent_from = None;
            } else if r[queue] == 0.0 && carried && others >= CARRYING_PPS {
                let start = *silent_from.get_or_insert(*from);
                let secs = to - start;
                if secs >= STALL_SECS
                    && pointed_at(queue, start, *to)
                    && longest.as_ref().is_none_or(|s| secs > s.secs)
                {
                    longest = Some(Stall {
                        queue,
                        from: start,
                        secs,
                    });
                }
            } else {
                silent_from = None;
            }
        }
        out.extend(longest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cumulative counts from per-second rates.
    fn counts(rates: &[[u64; 3]]) -> Vec<(f64, Vec<u64>)> {
        let mut total = vec![0u64; 3];
        let mut out = vec![(10.0, total.clone())];
        for (i, r) in rates.iter().enumerate() {
            for (t, v) in total.iter_mut().zip(r) {
                *t += v;
            }
            out.push((11.0 + i as f64, total.clone()));
        }
        out
    }

    #[test]
    fn a_queue_that_stops_while_the_others_receive_has_stalled() {
        let mut rates = vec![[6_000, 6_000, 0]; 5];
        rates.extend(vec![[0, 7_000, 0]; 8]);
        let c = counts(&rates);
        let s = stalls(&c, &[], (0.0, 100.0));
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].queue, 0);
        assert!((s[0].from - 15.0).abs() < 1e-9 && (s[0].secs - 8.0).abs() < 1e-9);
        // Queue 2 never carried flows: silent by the hash, not stalled.
        assert!(s.iter().all(|s| s.queue != 2));
        // A shorter silence, traffic's end, or a window that ends first: no stall.
        assert!(stalls(&c, &[], (0.0, 18.0)).is_empty());
        let mut ended = vec![[6_000, 6_000, 0]; 5];
        ended.extend(vec![[0, 0, 0]; 8]);
        assert!(stalls(&counts(&ended), &[], (0.0, 100.0)).is_empty());
        let mut short = vec![[6_000, 6_000, 0]; 5];
        short.extend(vec![[0, 7_000, 0]; 3]);
        short.extend(vec![[6_000, 6_000, 0]; 5]);
        assert!(stalls(&counts(&short), &[], (0.0, 100.0)).is_empty());
    }

    #[test]
    fn a_queue_the_table_no_longer_points_at_is_not_stalled() {
        let mut rates = vec![[6_000, 6_000, 0]; 5];
        rates.extend(vec![[0, 7_000, 0]; 8]);
        let c = counts(&rates);
        let moved = vec![(12.0, vec![0, 1]), (17.0, vec![1, 1]), (20.0, vec![1, 1])];
        assert!(stalls(&c, &moved, (0.0, 100.0)).is_empty());
        let kept = vec![(12.0, vec![0, 1]), (17.0, vec![0, 1])];
        assert_eq!(stalls(&c, &kept, (0.0, 100.0)).len(), 1);
    }
}
