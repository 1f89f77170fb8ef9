//! The side-by-side table of steerd and the irqbalance-like baseline over every scenario,
//! as printed in `docs/policy.md` (`cargo run --release --example policy_table`). The
//! scenarios of the RSS table lever (issue 18) run steerd twice: with `rss.mode: auto`
//! (every lever) and `off` (IRQs and RPS only).

use std::fmt::Write as _;

use super::baseline::IrqbalanceLike;
use super::run::{Run, Scenario, run};
use super::scenarios;
use super::steerd::Steerd;
use crate::config::RssMode;

/// The runs of one scenario.
pub struct Comparison {
    pub scenario: Scenario,
    /// steerd with the scenario's config; for an RSS scenario, with `rss.mode: off`.
    pub steerd: Run,
    pub baseline: Run,
    /// For an RSS scenario: steerd with `rss.mode: auto`.
    pub rss_auto: Option<Run>,
}

impl Comparison {
    /// The runs in table order: steerd (auto, then off for an RSS scenario), baseline.
    pub fn runs(&self) -> impl Iterator<Item = &Run> {
        self.rss_auto.iter().chain([&self.steerd, &self.baseline])
    }
}

/// Runs one scenario under both policies.
pub fn compare(scenario: Scenario) -> Comparison {
    let mut steerd = Steerd::new(scenario.config.clone());
    let steerd_run = run(&scenario, &mut steerd);
    let baseline_run = run_baseline(&scenario);
    Comparison {
        scenario,
        steerd: steerd_run,
        baseline: baseline_run,
        rss_auto: None,
    }
}

/// Runs an RSS scenario under the baseline and steerd with `rss.mode: auto` and `off`.
pub fn compare_rss(scenario: Scenario) -> Comparison {
    let mut auto = scenario.config.clone();
    auto.rss.mode = RssMode::Auto;
    let mut off = scenario.config.clone();
    off.rss.mode = RssMode::Off;
    let auto_run = run(&scenario, &mut Steerd::new(auto).named("steerd, rss: auto"));
    let off_run = run(&scenario, &mut Steerd::new(off).named("steerd, rss: off"));
    let baseline_run = run_baseline(&scenario);
    Comparison {
        scenario,
        steerd: off_run,
        baseline: baseline_run,
        rss_auto: Some(auto_run),
    }
}

fn run_baseline(scenario: &Scenario) -> Run {
    let banned = scenario
        .config
        .cpus
        .banned
        .union(&scenario.config.cpus.reserved);
    let mut baseline = IrqbalanceLike::new(banned);
    run(scenario, &mut baseline)
}

/// Runs every scenario: those of issue 3 under both policies, those of the RSS lever
/// under all three.
pub fn compare_all() -> Vec<Comparison> {
    let issue3 = scenarios::all().into_iter().map(compare);
    issue3
        .chain(scenarios::rss().into_iter().map(compare_rss))
        .collect()
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
        "| # | scenario | goal | policy | reaction (ticks) | max / mean busy in window | actions: all (in window) | packets dropped | RPS IPIs/s in window |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for c in comparisons {
        for (index, run) in c.runs().enumerate() {
            let first = index == 0;
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
                "| {id} | {name} | {goal} | {} | {} | {max:.2} / {mean:.2} | {} ({}) | {} | {} |",
                run.policy,
                reaction(run),
                run.actions(),
                run.window_actions(),
                count(run.dropped()),
                count(run.window_ipis())
            );
        }
    }
    out
}
