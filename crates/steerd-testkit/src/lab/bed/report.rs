//! The bed's verdict: per balancer the medians over the rounds, and steerd's ratios to
//! `none` and `hand` taken within each round (the machine is shared and noisy: a round's
//! runs follow each other within a minute) and then their median, against the targets of
//! issue 30: at least 1.25x none's delivered packets, at least 0.95x hand's, probe p99 at
//! most none's, every run restored. No balancer can deliver more than is offered: where
//! 1.25x none's packets is more than [`OFFERED_CAP`] of the offered rate (a host fast
//! enough that one CPU already carries 80 % of it), that share of the offered rate is the
//! target instead (seen 2026-11-28: none 31.9-33.9k of 40k, steerd and hand both 39.5k).
//!
//! The p99 target over `none` is issue 30's, printed and counted in [`BedVerdict::met`],
//! but not a guard of CI's short form ([`BedVerdict::guards_met`]): on a 2-CPU host `none`
//! leaves the second CPU idle for the probe while delivering about half the packets, and
//! on a slow host spreading the load over both CPUs costs the probe more than it saves
//! (2026-11-29, a 2-CPU EPYC VM: steerd/none p99 1.11, 1.45, 1.16 in three rounds; the
//! hand recipe's p99 was higher still in each). CI's latency guard is the expert's own
//! recipe doing the same spreading: steerd's p99 at most [`MAX_P99_OVER_HAND`] of hand's.

use super::BedRun;

/// Delivered packets, steerd over `none`, at least this.
pub const MIN_OVER_NONE: f64 = 1.25;
/// The share of the offered rate that counts as all of it, for the target over `none`.
pub const OFFERED_CAP: f64 = 0.97;
/// Delivered packets, steerd over `hand`, at least this (issue 30's target).
pub const MIN_OVER_HAND: f64 = 0.95;
/// Delivered packets, steerd over `hand`, at least this: CI's guard, a gross regression.
/// One round's ratio is two runs' noise on a shared 2-CPU host (about 15 % per run on
/// 2026-11-29's: steerd/hand 0.87-1.29 over four rounds of the same build, median 1.03),
/// so the guard catches steerd not spreading, or undoing its spread, and the 0.95 target
/// is judged on the median of rounds (`examples/bed --reps N`; docs/lab.md).
pub const MIN_OVER_HAND_GUARD: f64 = 0.70;

/// steerd's probe p99 over the hand recipe's, at most this: both put RPS on every queue
/// over every CPU, so their ratio is two runs' noise around 1.0, and on a shared 2-CPU
/// host that noise is wide (2026-11-29, nine rounds: 0.09 to 11.85, a single host stall
/// of 50-100 ms moving a 12-s run's p99; 1.35 in a round without one). What it catches is
/// steerd doubling the probe's tail (churn, a wrong mask), not a few tens of percent.
pub const MAX_P99_OVER_HAND: f64 = 2.0;

/// The printed verdict: whether every check is met (issue 30's targets and CI's guards),
/// and whether CI's guards are (all but the p99 target over `none` and the 0.95x hand
/// target, which CI holds at [`MIN_OVER_HAND_GUARD`]).
#[derive(Debug, Clone)]
pub struct BedVerdict {
    pub text: String,
    /// Every check: the delivered targets, p99 at most none's and at most
    /// [`MAX_P99_OVER_HAND`] of hand's, every run restored (`examples/bed --check`).
    pub met: bool,
    /// CI's guards: the same without the p99 target over `none` and with steerd/hand
    /// delivered held to [`MIN_OVER_HAND_GUARD`] (`tests/veth_bed.rs`).
    pub guards_met: bool,
}

/// Whether a check is one of CI's guards or issue 30's target alone.
#[derive(Clone, Copy, PartialEq)]
enum Held {
    ByCi,
    IssueTargetOnly,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn of<'a>(runs: &'a [BedRun], balancer: &str) -> Vec<&'a BedRun> {
    runs.iter().filter(|r| r.balancer == balancer).collect()
}

/// steerd's per-round ratio of `figure` to `other`'s, for the rounds holding both.
fn ratios(runs: &[BedRun], other: &str, figure: impl Fn(&BedRun) -> Option<f64>) -> Vec<f64> {
    of(runs, "steerd")
        .into_iter()
        .filter_map(|s| {
            let o = runs
                .iter()
                .find(|r| r.balancer == other && r.rep == s.rep)?;
            let (a, b) = (figure(s)?, figure(o)?);
            (b > 0.0).then_some(a / b)
        })
        .collect()
}

/// steerd's delivered packets per round over what it must deliver: 1.25x `none`'s, or
/// [`OFFERED_CAP`] of the offered rate where that is less.
fn over_target(runs: &[BedRun]) -> Vec<f64> {
    of(runs, "steerd")
        .into_iter()
        .filter_map(|s| {
            let none = runs
                .iter()
                .find(|r| r.balancer == "none" && r.rep == s.rep)?;
            let needed =
                (MIN_OVER_NONE * none.delivered_pps).min(OFFERED_CAP * f64::from(s.offered_pps));
            (needed > 0.0).then_some(s.delivered_pps / needed)
        })
        .collect()
}

/// Medians per balancer, ratios, and the targets.
pub fn judge(runs: &[BedRun]) -> BedVerdict {
    let mut text = String::from(
        "balancer  runs  delivered pkt/s  softnet drops  busiest si  probe p50/p99 us  first change s  changes after  restored  own cpu\n",
    );
    for balancer in ["none", "steerd", "hand"] {
        let these = of(runs, balancer);
        if these.is_empty() {
            continue;
        }
        let m = |f: &dyn Fn(&BedRun) -> Option<f64>| {
            median(these.iter().filter_map(|r| f(r)).collect())
                .map_or("-".to_string(), |v| format!("{v:.0}"))
        };
        let share = median(these.iter().map(|r| r.busiest_si_share).collect()).unwrap_or(0.0);
        let first = median(these.iter().filter_map(|r| r.first_change_s).collect())
            .map_or("-".to_string(), |v| format!("{v:.1}"));
        let own_cpu = median(these.iter().filter_map(|r| r.balancer_cpu).collect())
            .map_or("-".to_string(), |v| format!("{v:.3}"));
        text.push_str(&format!(
            "{balancer:<8}  {:>4}  {:>15}  {:>13}  {:>10.2}  {:>16}  {:>14}  {:>13}  {:>3}/{:<3}  {own_cpu:>7}\n",
            these.len(),
            m(&|r| Some(r.delivered_pps)),
            m(&|r| Some(r.softnet_drops as f64)),
            share,
            format!("{}/{}", m(&|r| r.probe_p50_us), m(&|r| r.probe_p99_us)),
            first,
            these
                .iter()
                .map(|r| r.changes_after_convergence)
                .max()
                .unwrap_or(0),
            these.iter().filter(|r| r.restored).count(),
            these.len()
        ));
    }
    for undone in of(runs, "steerd").iter().filter(|r| r.rps_undone.is_some()) {
        text.push_str(&format!(
            "round {}: steerd undid its RPS trial: {}\n",
            undone.rep,
            undone.rps_undone.as_deref().unwrap_or_default()
        ));
    }
    let restored = runs.iter().all(|r| r.restored);
    let (mut met, mut guards_met) = (restored, restored);
    let mut check = |held: Held, name: &str, value: Option<f64>, ok: &dyn Fn(f64) -> bool| {
        let (shown, pass) = match value {
            Some(v) => (format!("{v:.2}"), ok(v)),
            None => ("not measured".to_string(), false),
        };
        met &= pass;
        if held == Held::ByCi {
            guards_met &= pass;
        }
        let verdict = match (pass, held) {
            (true, _) => "met",
            (false, Held::ByCi) => "NOT met",
            (false, Held::IssueTargetOnly) => "NOT met; issue 30's target, not a CI guard",
        };
        text.push_str(&format!("{name}: {shown} ({verdict})\n"));
    };
    if !of(runs, "steerd").is_empty() {
        if !of(runs, "none").is_empty() {
            let over_none = median(ratios(runs, "none", |r| Some(r.delivered_pps)))
                .map_or("-".to_string(), |v| format!("{v:.2}"));
            check(
                Held::ByCi,
                &format!(
                    "steerd/none delivered {over_none}; over its target, 1.25x none or 0.97 of the offered rate where that is less (median of rounds, target >= 1.00)"
                ),
                median(over_target(runs)),
                &|v| v >= 1.0,
            );
            check(
                Held::IssueTargetOnly,
                "steerd/none probe p99 (median of rounds, target <= 1.00)",
                median(ratios(runs, "none", |r| r.probe_p99_us)),
                &|v| v <= 1.0,
            );
        }
        if !of(runs, "hand").is_empty() {
            let over_hand = median(ratios(runs, "hand", |r| Some(r.delivered_pps)));
            check(
                Held::IssueTargetOnly,
                &format!("steerd/hand delivered (median of rounds, target >= {MIN_OVER_HAND:.2})"),
                over_hand,
                &|v| v >= MIN_OVER_HAND,
            );
            check(
                Held::ByCi,
                &format!(
                    "steerd/hand delivered (median of rounds, CI guard >= {MIN_OVER_HAND_GUARD:.2})"
                ),
                over_hand,
                &|v| v >= MIN_OVER_HAND_GUARD,
            );
            check(
                Held::ByCi,
                &format!(
                    "steerd/hand probe p99 (median of rounds, target <= {MAX_P99_OVER_HAND:.2})"
                ),
                median(ratios(runs, "hand", |r| r.probe_p99_us)),
                &|v| v <= MAX_P99_OVER_HAND,
            );
        }
    }
    text.push_str(&format!(
        "restored: {} of {} runs\n",
        runs.iter().filter(|r| r.restored).count(),
        runs.len()
    ));
    BedVerdict {
        text,
        met,
        guards_met,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(balancer: &'static str, delivered_pps: f64) -> BedRun {
        BedRun {
            scenario: "veth-bed",
            balancer,
            rep: 1,
            offered_pps: 40_000,
            sent_pps: delivered_pps,
            delivered_pps,
            delivered_run_pps: delivered_pps,
            softnet_drops: 0,
            tap_drops: None,
            rcvbuf_errors: 0,
            not_sent: 0,
            busiest_si_share: 0.9,
            si_share: vec![0.9, 0.1],
            processed_share: vec![0.9, 0.1],
            first_change_s: Some(2.0),
            changes_after_convergence: 0,
            restored: true,
            probe_p50_us: Some(100.0),
            probe_p99_us: Some(1_000.0),
            probe_lost: 0,
            probe_rx_share: None,
            rps_cpus: vec![],
            balancer_cpu: None,
            waited_for_quiet_s: 0.0,
            rps_undone: None,
            rps_resets: None,
        }
    }

    /// 1.25x none's packets where the bed has room for them; 0.97 of the offered rate
    /// where it has not (CI, 2026-11-28: none 33.9k of 40k, steerd and hand 39.6k).
    #[test]
    fn the_target_over_none_is_capped_by_the_offered_rate() {
        let verdict = |none: f64, steerd: f64| {
            judge(&[
                run("none", none),
                run("steerd", steerd),
                run("hand", steerd),
            ])
            .met
        };
        assert!(verdict(33_930.0, 39_572.0));
        assert!(!verdict(33_930.0, 38_000.0));
        assert!(verdict(20_000.0, 25_000.0));
        assert!(!verdict(20_000.0, 24_000.0));
    }

    /// A p99 above none's misses issue 30's target but no CI guard; above 2x hand's it
    /// misses a guard too.
    #[test]
    fn latency_over_none_is_the_issues_target_and_over_hand_a_guard() {
        let with_p99 = |balancer, p99| BedRun {
            probe_p99_us: Some(p99),
            ..run(balancer, 30_000.0)
        };
        let none = BedRun {
            probe_p99_us: Some(1_000.0),
            ..run("none", 20_000.0)
        };
        let slower = judge(&[
            none.clone(),
            with_p99("steerd", 1_200.0),
            with_p99("hand", 1_300.0),
        ]);
        assert!(!slower.met && slower.guards_met, "{}", slower.text);
        assert!(slower.text.contains("not a CI guard"), "{}", slower.text);
        let worse = judge(&[none, with_p99("steerd", 2_700.0), with_p99("hand", 1_300.0)]);
        assert!(!worse.met && !worse.guards_met, "{}", worse.text);
    }
}
