//! The side-by-side table of steerd and the irqbalance-like baseline over every scenario,
//! as printed in `docs/policy.md` (`cargo run --release --example policy_table`).

use std::fmt::Write as _;

use super::baseline::IrqbalanceLike;
use super::run::{Run, Scenario, run};
use super::scenarios;
use super::steerd::Steerd;

/// Both runs of one scenario.
pub struct Comparison {
    pub scenario: Scenario,
    pub steerd: Run,
    pub baseline: Run,
}

/// Runs one scenario under both policies.
pub fn compare(scenario: Scenario) -> Comparison {
    let mut steerd = Steerd::new(scenario.config.clone());
    let steerd_run = run(&scenario, &mut steerd);
    let banned = scenario
        .config
        .cpus
        .banned
        .union(&scenario.config.cpus.reserved);
    let mut baseline = IrqbalanceLike::new(banned);
    let baseline_run = run(&scenario, &mut baseline);
    Comparison {
        scenario,
        steerd: steerd_run,
        baseline: baseline_run,
    }
}

/// Runs every scenario under both policies.
pub fn compare_all() -> Vec<Comparison> {
    scenarios::all().into_iter().map(compare).collect()
}

fn reaction(run: &Run) -> String {
    match run.reaction() {
        Some(ticks) => ticks.to_string(),
        None => "never".to_string(),
    }
}

fn count(value: f64) -> String {
    if value < 0.5 {
        "0".to_string()
    } else if value >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.0}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

/// The markdown table.
pub fn markdown(comparisons: &[Comparison]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| # | scenario | goal | policy | reaction (ticks) | max / mean busy in window | actions: all (in window) | packets dropped |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for c in comparisons {
        for (first, run) in [(true, &c.steerd), (false, &c.baseline)] {
            let (max, mean) = run.balance();
            let (id, name, goal) = if first {
                (
                    c.scenario.id.to_string(),
                    c.scenario.name.to_string(),
                    c.scenario.goal_text.to_string(),
                )
            } else {
                (String::new(), String::new(), String::new())
            };
            let _ = writeln!(
                out,
                "| {id} | {name} | {goal} | {} | {} | {max:.2} / {mean:.2} | {} ({}) | {} |",
                run.policy,
                reaction(run),
                run.actions(),
                run.window_actions(),
                count(run.dropped())
            );
        }
    }
    out
}
