//! The saturated scenarios (`sat-*`, issue 30): the table's scenarios with a receive path
//! that fills the CPUs it runs on, so the load-driven levers (hot-CPU relief, RPS for a hot
//! queue, the RSS table, NAPI threads under load) have something to relieve.
//!
//! The cost: [`RULES`] policy-routing rules that never match (`ip rule add from
//! 10.200.X.Y table 100`), added in the guest's set-up. Every received packet's input
//! route lookup scans them in the softirq path, on the CPU that processes the packet (after
//! RPS), the way a long netfilter chain (kube-proxy's iptables mode) or conntrack costs a
//! busy server. It needs no extra tool (busybox's `ip` has `rule`) and leaves the
//! transmit path alone. With every input vector on CPU0 and 60k UDP packets/s offered, a
//! 6.1 guest processed about 16k/s with two CPUs at 0.90 irq+softirq (docs/lab.md).
//!
//! The guest's vCPUs share the host's 2 cores with QEMU and the sender, so spreading work
//! over more guest CPUs cannot deliver more packets here: these scenarios show whether and
//! how fast the levers act, and what they do to the guest's work; the veth bed
//! (`lab/bed`) is where delivered packets are judged.
//!
//! The hand recipe here is the seeds' ("queues one per core, RPS over all local cores, RFS
//! sized"): `hand_place`, then `hand_rps` (every rx queue's `rps_cpus` over all CPUs,
//! `rps_sock_flow_entries` 32768 and each queue's `rps_flow_cnt` its share).

use std::time::Duration;

use super::scenario::{CHANNEL_CHANGES, Scenario, THREADED_ON, UDP_PPS, base, udp};

/// Never-matching policy-routing rules in every saturated guest.
pub const RULES: u32 = 1000;

/// When `sat-late`'s balancer starts: the CPUs have been saturated for 5 s, so every
/// vector it moves is moved under load (docs/policy.md, "When a move does not move the
/// work").
pub const LATE_START_S: u32 = 6;

/// The guest command that starts a held-back balancer (`hold_balancer` in the set-up);
/// the report times first changes from it.
pub const LATE_START: &str = "start_late_balancer";

/// The guest shell that adds the rules (before the snapshot: the machine as found).
pub fn add_rules() -> String {
    format!("add_rules {RULES}")
}

/// `s` with `rules` never-matching rules in place of [`RULES`] (`lab --rules N`); a
/// scenario without them is returned as it is. Why: on a host whose TCG guests are several
/// times slower, a thousand rules left every queue under steerd's work floor (2026-11-29:
/// 4-7k pkt/s delivered in `sat-cpu0` by every balancer), so RPS and its trial never ran;
/// fewer rules saturate the guest at a rate where they do.
pub fn with_rules(mut s: Scenario, rules: u32) -> Scenario {
    let ours = add_rules();
    if s.setup.contains(&ours) {
        s.setup = s.setup.replacen(&ours, &format!("add_rules {rules}"), 1);
    }
    s
}

/// Every `sat-` scenario; `idle` is `sat-burst`'s idle spell, `rss_length` `sat-skew`'s
/// traffic.
pub fn all(idle: Duration, rss_length: Duration) -> Vec<Scenario> {
    let idle_s = idle.as_secs();
    let sat = |setup: &str, s: Scenario| Scenario {
        setup: if setup.is_empty() {
            add_rules()
        } else {
            format!("{}; {setup}", add_rules())
        },
        hand_rps: true,
        queue_watch: true,
        ..s
    };
    let mut skew = super::rss::skew(rss_length);
    skew.name = "sat-skew";
    skew.what = "rss=on, 32 UDP flows hashed onto queues 0-1 only (seed 002), saturating rules; steerd on its built-in config";
    // steerd's built-in configuration, as in every `sat-` scenario (the RSS lever advises):
    // `rss-skew` turns the lever on, and under saturation its steps left QEMU 7.2's
    // software RSS delivering 2k pkt/s for the rest of the run, undone or not (docs/lab.md,
    // "Saturation").
    skew.setup = super::rss::hash_setup();
    skew.steerd_args = String::new();
    let skew_setup = skew.setup.clone();
    vec![
        sat(
            "pin_inputs 0",
            base(
                "sat-cpu0",
                "every input vector on CPU0, 8 UDP flows, saturating rules",
            ),
        ),
        sat(
            "",
            base(
                "sat-defaults",
                "the driver's placement (queue N on CPU N), 8 UDP flows, saturating rules",
            ),
        ),
        sat(&skew_setup, skew),
        sat(
            "",
            Scenario {
                phases: vec![udp(1, 30, 1, UDP_PPS)],
                ..base(
                    "sat-elephant",
                    "the driver's placement, one UDP flow, saturating rules",
                )
            },
        ),
        sat(
            "",
            Scenario {
                duration: Duration::from_secs(idle_s + 22),
                phases: vec![udp(idle_s, 20, 8, UDP_PPS)],
                steady: Duration::from_secs(10),
                ..base(
                    "sat-burst",
                    "the driver's placement, idle, then 8 UDP flows, saturating rules",
                )
            },
        ),
        // Not one of issue 30's either: a queue-set change under saturation, where steerd
        // undoes or turns off the RPS masks it set for the old queues and measures the new
        // ones before another trial (docs/policy.md, "a trial").
        sat(
            "",
            Scenario {
                events: CHANNEL_CHANGES.to_vec(),
                steady: Duration::from_secs(8),
                ..base(
                    "sat-channels",
                    "the driver's placement, ethtool -L eth0 combined 2 at 10 s, 4 at 18 s, 8 UDP flows, saturating rules",
                )
            },
        ),
        sat(
            "pin_inputs 0; hold_balancer",
            Scenario {
                events: vec![(LATE_START_S, LATE_START)],
                ..base(
                    "sat-late",
                    "every input vector on CPU0, 8 UDP flows, saturating rules; the balancer starts at 6 s, under saturation",
                )
            },
        ),
        // Not one of issue 30's: a probe of the lab itself. Three steerd runs of 99 were
        // lost on 2026-11-29 to guest crashes suspected of live kernel text patching under
        // TCG, which RPS on and off does (the `rps_needed` static key); this flips it five
        // times a second under the same load, with no balancer (docs/lab.md, "Guest
        // failures").
        sat(
            "pin_inputs 0; rps_flip &",
            base(
                "rps-flip",
                "every input vector on CPU0, 8 UDP flows, saturating rules, RPS and RFS on and off every 0.2 s",
            ),
        ),
        sat(
            &format!("{THREADED_ON}; pin_inputs 0"),
            Scenario {
                threaded: true,
                ..base(
                    "sat-threaded",
                    "threaded NAPI on, every input vector on CPU0, 8 UDP flows, saturating rules",
                )
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::platform::Nic;
    use crate::lab::scenario::Balancer;

    #[test]
    fn rules_are_set_in_the_saturated_scenarios_only() {
        let sat = all(Duration::from_secs(1), Duration::from_secs(1));
        let cpu0 = sat.iter().find(|s| s.name == "sat-cpu0").cloned();
        let cpu0 = with_rules(cpu0.expect("sat-cpu0"), 150);
        assert!(cpu0.setup.starts_with("add_rules 150"), "{}", cpu0.setup);
        assert!(!cpu0.setup.contains(&add_rules()), "{}", cpu0.setup);
        let plain = super::super::scenario::all(Duration::from_secs(1))
            .into_iter()
            .find(|s| s.name == "cpu0")
            .expect("cpu0");
        assert_eq!(with_rules(plain.clone(), 150).setup, plain.setup);
    }

    #[test]
    fn every_saturated_scenario_samples_its_queues_so_a_stalled_run_is_seen() {
        for s in all(Duration::from_secs(1), Duration::from_secs(1)) {
            assert!(s.queue_watch, "{}", s.name);
            assert!(
                super::super::scenario::guest_env(&s, Balancer::None, &[], Nic::Virtio)
                    .contains("QUEUE_WATCH=1"),
                "{}",
                s.name
            );
        }
    }
}
