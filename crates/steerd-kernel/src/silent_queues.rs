//! Receive queues the hash or the RSS table stopped feeding: a device busy enough that an
//! even share would be measured work on every queue, where some queue gets under a quarter
//! of that share. Seen on igb in the lab (docs/lab.md, "igb's silent queues"): with a few
//! flows and the per-boot random RSS key, one queue in three boots got nothing, and two
//! thirds of the work went to one CPU however well the vectors were placed. Neither an IRQ
//! move nor RPS makes such a queue receive again; the table (or more flows) does, so it is
//! said, in the policy's notes and in `steerd top`, rather than left for the operator to
//! find. One owner for the rule, so both say the same.

/// The share of an even split under which a queue counts as silent.
pub const SILENT_SHARE: f64 = 0.25;

/// What was found on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct SilentQueues {
    /// The silent queues, ascending.
    pub queues: Vec<u32>,
    /// The device's packets/s over the queues with a counter, and their number.
    pub total_pps: f64,
    pub counted: usize,
}

impl SilentQueues {
    /// The queues as `rx-2, rx-3`.
    pub fn names(&self) -> String {
        self.queues
            .iter()
            .map(|q| format!("rx-{q}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Why they are silent, as far as the device's RSS table tells (`table`: the table
    /// steerd read, `None` when the device has none it can read): no entry points at some
    /// of them (someone's `ethtool -X`, or a table left from fewer channels), or entries
    /// do and the flows' hash misses them. One text for the policy's note and `doctor`.
    pub fn why(&self, device: &str, table: Option<&[u32]>) -> String {
        let Some(table) = table else {
            return "the NIC's hash sends them no flow (no RSS table to read)".to_string();
        };
        let empty: Vec<String> = self
            .queues
            .iter()
            .filter(|&&q| !table.contains(&q))
            .map(|q| format!("rx-{q}"))
            .collect();
        if empty.is_empty() {
            format!(
                "its RSS table points at them ({} of {} entries), so the flows' hash \
                 misses them: few flows, or a hash key that puts them elsewhere",
                table.iter().filter(|q| self.queues.contains(q)).count(),
                table.len()
            )
        } else {
            format!(
                "its RSS table gives {} no entry (`ethtool -X {device} default` spreads \
                 it over every queue again)",
                empty.join(", ")
            )
        }
    }

    /// Whether some silent queue has no entry in `table`.
    pub fn left_out_of(&self, table: &[u32]) -> bool {
        self.queues.iter().any(|q| !table.contains(q))
    }
}

/// The silent queues of a device from its per-queue packets/s (`None`: no counter), when
/// an even share of its total would reach `floor` (the work a queue must carry to count as
/// measured work); `None` when there are none, or too few queues or packets to say.
pub fn find(rates: &[Option<f64>], floor: f64) -> Option<SilentQueues> {
    let known: Vec<(u32, f64)> = rates
        .iter()
        .enumerate()
        .filter_map(|(q, rate)| Some((u32::try_from(q).ok()?, (*rate)?)))
        .filter(|(_, rate)| rate.is_finite() && *rate >= 0.0)
        .collect();
    if known.len() < 2 {
        return None;
    }
    let total: f64 = known.iter().map(|(_, rate)| rate).sum();
    let even = total / known.len() as f64;
    if even < floor {
        return None;
    }
    let queues: Vec<u32> = known
        .iter()
        .filter(|(_, rate)| *rate < even * SILENT_SHARE)
        .map(|(q, _)| *q)
        .collect();
    (!queues.is_empty()).then_some(SilentQueues {
        queues,
        total_pps: total,
        counted: known.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_under_a_quarter_of_an_even_share_of_a_busy_device_is_silent() {
        // igb in the lab: 8 flows hashed 5:2:1:0 onto four queues.
        let rates = [Some(25_000.0), Some(10_000.0), Some(5_000.0), Some(0.0)];
        let found = find(&rates, 5_000.0).unwrap();
        assert_eq!(found.queues, vec![3]);
        assert_eq!(found.names(), "rx-3");
        assert_eq!(found.counted, 4);
        // Too little traffic to say (an even share under the floor), or an even spread.
        assert_eq!(find(&rates, 20_000.0), None);
        let even = [Some(10_000.0); 4];
        assert_eq!(find(&even, 5_000.0), None);
        // Queues without a counter are left out; one queue alone says nothing.
        assert_eq!(find(&[Some(40_000.0), None], 5_000.0), None);
        let some = [Some(30_000.0), None, Some(100.0)];
        assert_eq!(find(&some, 5_000.0).unwrap().queues, vec![2]);
    }

    #[test]
    fn why_says_what_the_table_shows() {
        let rates = [Some(25_000.0), Some(10_000.0), Some(5_000.0), Some(0.0)];
        let silent = find(&rates, 5_000.0).unwrap();
        let none = silent.why("eth0", None);
        assert!(none.contains("no RSS table to read"), "{none}");
        let left_out: Vec<u32> = (0..128).map(|i| i % 3).collect();
        assert!(silent.left_out_of(&left_out));
        let text = silent.why("eth0", Some(&left_out));
        assert!(
            text.contains("gives rx-3 no entry (`ethtool -X eth0 default`"),
            "{text}"
        );
        let default: Vec<u32> = (0..128).map(|i| i % 4).collect();
        assert!(!silent.left_out_of(&default));
        let text = silent.why("eth0", Some(&default));
        assert!(
            text.contains("points at them (32 of 128 entries)"),
            "{text}"
        );
    }
}
