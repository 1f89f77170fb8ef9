//! The RSS table lever (issue 18) on simulated machines: the four scenarios of
//! `sim::scenarios::rss`, each run with `rss.mode: auto` (every lever) and `off` (IRQs and
//! RPS only), with what a good outcome looks like for each.

use steerd::config::RssMode;
use steerd::knob::{Knob, KnobValue};
use steerd::policy::NoteKind;
use steerd::sim::scenarios;
use steerd::sim::{Run, Scenario, Steerd, run};

fn with_mode(scenario: &Scenario, mode: RssMode) -> Run {
    let mut config = scenario.config.clone();
    config.rss.mode = mode;
    run(scenario, &mut Steerd::new(config))
}

fn table_knob() -> Knob {
    Knob::RssIndirection {
        device: "eth0".to_string(),
    }
}

/// Ticks of accepted table writes, with their reason.
fn table_writes(result: &Run) -> Vec<(u32, String)> {
    result
        .changes()
        .filter(|(_, c)| c.target == table_knob())
        .map(|(tick, c)| (tick, c.reason.clone()))
        .collect()
}

fn default_table() -> Vec<u32> {
    (0..128).map(|i| i % 4).collect()
}

/// The busiest queue's share of the NIC's packets at the end of the run.
fn busiest_queue(result: &Run) -> f64 {
    result.machine.busiest_queue_share("eth0")
}

#[test]
fn set_up_the_hash_fills_two_of_four_queues_and_the_elephant_is_one_bucket() {
    let mut skew = scenarios::rss_skew_2of4().machine;
    skew.set_rate("eth0", 1_000_000.0);
    skew.step();
    let packets = skew.queue_packets("eth0").unwrap_or_default().to_vec();
    let total: f64 = packets.iter().sum();
    assert!(
        (packets[0] + packets[1]) / total >= 0.93,
        "queues 0 and 1 should carry ~95%: {packets:?}"
    );
    assert_eq!(skew.rss_table("eth0"), Some(default_table().as_slice()));

    let elephant = scenarios::rss_elephant().machine;
    let buckets = elephant.bucket_shares("eth0").unwrap_or_default();
    let heaviest = buckets.iter().copied().fold(0.0, f64::max);
    assert!(
        heaviest >= 0.55,
        "one bucket carries the elephant: {heaviest}"
    );
}

#[test]
fn rss_skew_2of4_the_table_evens_the_queues_and_rps_alone_cannot() {
    let scenario = scenarios::rss_skew_2of4();
    let auto = with_mode(&scenario, RssMode::Auto);
    let writes = table_writes(&auto);
    assert!(!writes.is_empty(), "no table step");
    assert!(writes.len() <= 3, "table writes: {writes:?}");
    // The queues even out (0.475 -> at most 0.30 for the busiest) and stay so.
    let share = busiest_queue(&auto);
    assert!(share <= 0.30, "busiest queue's share {share:.2}");
    let reaction = auto.reaction().expect("the goal was never met");
    assert!(
        reaction <= 10,
        "queues even and no CPU hot only at {reaction}"
    );
    assert_eq!(auto.window_actions(), 0);

    // RPS alone relieves the drops but leaves the hash where it was.
    let off = with_mode(&scenario, RssMode::Off);
    assert!(table_writes(&off).is_empty());
    assert!(busiest_queue(&off) >= 0.45, "{:.2}", busiest_queue(&off));
    assert_eq!(off.reaction(), None);
    let late_drops: f64 = off.ticks.iter().skip(5).map(|t| t.dropped).sum();
    assert!(late_drops < 1.0, "RPS left drops: {late_drops}");
}

/// What a good outcome of rss-skew-2of4 also asks: once the table evened the queues, no
/// CPU above 80 % (the hash is even, so there is room for everyone). Not met now: the RPS
/// masks set in the first tick's distress stay after the table step, RPS then spreads the
/// cool queues over the same CPUs, and one-queue-per-core RPS never widens onto SMT
/// siblings, so CPU 2 stays at 0.95 (time_squeeze, "no IRQ move or RPS change is predicted
/// to help"). A policy matter (`policy::rps`), left for it.
#[test]
#[ignore = "policy: RPS masks outlive the table step and never widen onto SMT siblings"]
fn rss_skew_2of4_no_cpu_stays_hot_once_the_queues_are_even() {
    let auto = with_mode(&scenarios::rss_skew_2of4(), RssMode::Auto);
    let (max, _) = auto.balance();
    assert!(max < 0.8, "busiest CPU at {max:.2} in the window");
}

#[test]
fn rss_elephant_the_lever_gives_up_after_two_undone_steps_and_rps_takes_it() {
    let scenario = scenarios::rss_elephant();
    let auto = with_mode(&scenario, RssMode::Auto);
    let writes = table_writes(&auto);
    let steps = writes.iter().filter(|(_, r)| r == "rss_step").count();
    let undone = writes.iter().filter(|(_, r)| r == "rss_revert").count();
    assert!(steps <= 2 && undone == steps, "table writes: {writes:?}");
    assert!(writes.iter().all(|&(tick, _)| tick < 100), "{writes:?}");
    // Every step was undone: the driver's spread is back, the elephant where it was.
    assert_eq!(
        auto.machine.rss_table("eth0"),
        Some(default_table().as_slice())
    );
    // Once the lever gave the queue up, the plan gives the real fix: hash UDP on ports.
    let advice = auto
        .ticks
        .iter()
        .flat_map(|t| &t.notes)
        .find(|n| n.kind == NoteKind::UdpHash && n.new);
    assert!(
        advice.is_some_and(|n| n.text.contains("sdfn")),
        "no udp_hash advice: {advice:?}"
    );
    for result in [&auto, &with_mode(&scenario, RssMode::Off)] {
        assert!(
            result.reaction().is_some_and(|r| r <= 10),
            "{}",
            result.policy
        );
        let (max, _) = result.balance();
        assert!(max <= 0.8, "busiest CPU {max:.2}");
        // RPS carries the elephant's queue (queue 2 with this seed).
        let rps = result
            .machine
            .rps_mask("eth0", 2)
            .cloned()
            .unwrap_or_default();
        assert!(!rps.is_empty(), "no RPS on the elephant's queue");
        assert_eq!(result.window_actions(), 0);
    }
}

#[test]
fn rss_burst_after_idle_nothing_changes_while_idle_and_the_burst_is_relieved_at_once() {
    let scenario = scenarios::rss_burst_after_idle();
    for mode in [RssMode::Auto, RssMode::Off] {
        let result = with_mode(&scenario, mode);
        let idle: Vec<_> = result.changes().filter(|(tick, _)| *tick < 300).collect();
        assert!(idle.is_empty(), "{mode:?}: changed while idle: {idle:?}");
        let reaction = result.reaction().expect("never relieved");
        assert!(
            reaction <= 2,
            "{mode:?}: relieved {reaction} ticks after the burst"
        );
        assert_eq!(result.window_actions(), 0, "{mode:?}");
        let late_drops: f64 = result.ticks[305..].iter().map(|t| t.dropped).sum();
        assert!(
            late_drops < 1.0,
            "{mode:?}: drops after the burst: {late_drops}"
        );
    }
}

#[test]
fn rss_operator_table_is_never_written_and_said_to_be_left_alone() {
    let scenario = scenarios::rss_operator_table();
    let result = with_mode(&scenario, RssMode::Auto);
    let attempted: Vec<_> = result
        .ticks
        .iter()
        .flat_map(|t| &t.changes)
        .filter(|c| c.target == table_knob())
        .collect();
    assert!(attempted.is_empty(), "table writes: {attempted:?}");
    assert_eq!(
        result.machine.rss_table("eth0"),
        Some(scenarios::operator_table().as_slice())
    );
    let left_alone = result.ticks.iter().flat_map(|t| &t.notes).find(|n| {
        n.kind == NoteKind::RssTable && n.target.as_ref() == Some(&table_knob()) && n.new
    });
    assert!(left_alone.is_some(), "the plan never said so");
    // RPS still relieves the three hot queues.
    assert!(
        result.reaction().is_some_and(|r| r <= 5),
        "reaction {:?}",
        result.reaction()
    );
    assert_eq!(result.window_actions(), 0);
}

#[test]
fn a_table_write_from_the_policy_round_trips_through_the_simulated_kernel() {
    let result = with_mode(&scenarios::rss_skew_2of4(), RssMode::Auto);
    let (_, last) = result
        .changes()
        .filter(|(_, c)| c.target == table_knob())
        .last()
        .expect("a table write");
    let KnobValue::Table { indirection } = &last.new else {
        panic!("not a table: {}", last.new);
    };
    assert_eq!(
        result.machine.rss_table("eth0"),
        Some(indirection.as_slice())
    );
    assert_eq!(
        result.machine.placement().rss_tables.get("eth0"),
        Some(indirection)
    );
}
