//! The side-by-side tables in markdown, medians over each scenario's runs, and the issue's
//! targets judged on those medians. They read many runs' `Metrics`, never a console.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::Metrics;
use crate::lab::scenario::Scenario;

/// Every scenario's restore target as a verdict line: every value back after SIGTERM in
/// every run.
pub(crate) fn restored_verdict(s: &Scenario, runs: &[Metrics]) -> (String, bool) {
    let restored = runs.iter().filter(|m| m.restored).count();
    (
        format!(
            "{}: every value restored after SIGTERM in {restored} of {} runs",
            s.name,
            runs.len()
        ),
        restored == runs.len(),
    )
}

/// The median of the present values.
pub fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values
        .into_iter()
        .flatten()
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn show(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The side-by-side table: one row per scenario and balancer, medians of its runs (the
/// threaded-NAPI scenarios are left to `threaded_table`).
pub fn table(rows: &[(Scenario, &'static str, Vec<Metrics>)]) -> String {
    let mut out = String::new();
    let rows: Vec<_> = rows
        .iter()
        .filter(|(s, _, _)| !s.threaded && !s.rss_watch)
        .collect();
    if rows.is_empty() {
        return out;
    }
    out.push_str(
        "| scenario | balancer | runs | first change (s) | input IRQ CPUs | busiest CPU processed share | busiest CPU irq+softirq share | processed pkt/s | delivered/offered | drops softnet/tap | changes after convergence | settle after event (s) | daemon CPU s / RSS MB | restored |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (s, balancer, runs) in rows {
        let med = |f: fn(&Metrics) -> Option<f64>| median(runs.iter().map(f));
        let restored = runs.iter().filter(|m| m.restored).count();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} / {} | {}/{} |",
            s.name,
            balancer,
            runs.len(),
            show(med(|m| m.first_change), 1),
            show(med(|m| Some(m.input_cpus as f64)), 0),
            show(med(|m| Some(m.busiest_processed)), 2),
            show(med(|m| Some(m.busiest_softirq)), 2),
            show(med(|m| Some(m.processed_pps)), 0),
            show(med(|m| m.delivered), 2),
            show(med(|m| Some(m.softnet_dropped as f64)), 0),
            show(med(|m| Some(m.tap_dropped as f64)), 0),
            show(med(|m| Some(m.late_changes as f64)), 0),
            show(med(|m| m.settle), 1),
            show(med(|m| m.daemon_cpu_s), 2),
            show(med(|m| m.daemon_rss_mb), 1),
            restored,
            runs.len(),
        );
    }
    out
}

/// The median of values where `None` means "never" (ranked after every time).
fn median_or_never(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values
        .into_iter()
        .map(|x| x.unwrap_or(f64::INFINITY))
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2]).filter(|x| x.is_finite())
}

/// The kernel release without Debian's suffix (`6.12.117+deb12-cloud-amd64` -> `6.12.117`).
fn short_kernel(runs: &[Metrics]) -> String {
    let k: BTreeSet<&str> = runs
        .iter()
        .filter_map(|m| m.kernel.as_deref())
        .map(|k| k.split(['+', '-']).next().unwrap_or(k))
        .collect();
    if k.is_empty() {
        "-".into()
    } else {
        k.into_iter().collect::<Vec<_>>().join(", ")
    }
}

/// The threaded-NAPI table (issue 20): one row per threaded scenario and balancer, medians
/// of its runs. "rx threads on their IRQ CPU" is the median of the runs' times, "never"
/// counted as the longest; each run's time follows in brackets.
pub fn threaded_table(rows: &[(Scenario, &'static str, Vec<Metrics>)]) -> String {
    let mut out = String::new();
    let rows: Vec<_> = rows.iter().filter(|(s, _, _)| s.threaded).collect();
    if rows.is_empty() {
        return out;
    }
    out.push_str(
        "| scenario | kernel | balancer | runs | NAPI threads rx/tx | rx threads on their IRQ CPU (s) | rx thread samples off their IRQ CPU | input IRQ CPUs | busiest CPU processed share | processed pkt/s | delivered/offered | changes after convergence | daemon CPU s / RSS MB | restored |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (s, balancer, runs) in rows {
        let med = |f: fn(&Metrics) -> Option<f64>| median(runs.iter().map(f));
        let restored = runs.iter().filter(|m| m.restored).count();
        let each: Vec<String> = runs
            .iter()
            .map(|m| {
                m.threads_pinned
                    .map_or("never".into(), |t| format!("{t:.1}"))
            })
            .collect();
        let pinned = median_or_never(runs.iter().map(|m| m.threads_pinned))
            .map_or("never".into(), |t| format!("{t:.1}"));
        let pinned = if runs.len() > 1 {
            format!("{pinned} ({})", each.join(", "))
        } else {
            pinned
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {}/{} |",
            s.name,
            short_kernel(runs),
            balancer,
            runs.len(),
            show(med(|m| Some(m.rx_threads as f64)), 0),
            show(med(|m| Some(m.tx_threads as f64)), 0),
            pinned,
            show(med(|m| m.threads_off_irq_cpu), 2),
            show(med(|m| Some(m.input_cpus as f64)), 0),
            show(med(|m| Some(m.busiest_processed)), 2),
            show(med(|m| Some(m.processed_pps)), 0),
            show(med(|m| m.delivered), 2),
            show(med(|m| Some(m.late_changes as f64)), 0),
            show(med(|m| m.daemon_cpu_s), 2),
            show(med(|m| m.daemon_rss_mb), 1),
            restored,
            runs.len(),
        );
    }
    out
}

/// The targets, judged on the table's medians: each a sentence and whether it holds.
pub fn verdicts(rows: &[(Scenario, &'static str, Vec<Metrics>)]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let find = |name: &str, balancer: &str| {
        rows.iter()
            .find(|(s, b, runs)| s.name == name && *b == balancer && !runs.is_empty())
    };
    for (s, b, runs) in rows {
        // The RSS lever's own scenarios have their verdicts in `rss::verdicts`; a threaded
        // one with the lever on is held to the threaded targets too.
        // The in-flight fault scenarios have theirs in `faults::verdicts` (strace holds
        // a write for seconds there, so the reaction times are not steerd's).
        if *b != "steerd"
            || runs.is_empty()
            || (s.rss_watch && !s.threaded)
            || crate::lab::faults::is_in_flight(s.name)
            || crate::lab::busy_poll::is_busy_poll(s)
        {
            continue;
        }
        let med = |f: fn(&Metrics) -> Option<f64>| median(runs.iter().map(f));
        let busiest = med(|m| Some(m.busiest_processed)).unwrap_or(1.0);
        if let Some((_, _, irqb)) = find(s.name, "irqbalance") {
            let theirs = median(irqb.iter().map(|m| Some(m.busiest_processed))).unwrap_or(1.0);
            out.push((
                format!(
                    "{}: steerd's busiest-CPU share {busiest:.2} <= irqbalance's {theirs:.2}",
                    s.name
                ),
                busiest <= theirs + 0.005,
            ));
        }
        if s.spread
            && let Some((_, _, hand)) = find(s.name, "hand")
        {
            let theirs = median(hand.iter().map(|m| Some(m.busiest_processed))).unwrap_or(1.0);
            out.push((
                format!("{}: steerd's busiest-CPU share {busiest:.2} within 10 % of the hand placement's {theirs:.2}", s.name),
                busiest <= theirs * 1.10 + 0.005,
            ));
        }
        if let Some(first) = med(|m| m.first_change) {
            out.push((
                format!("{}: first change after {first:.1} s (< 2 s)", s.name),
                first < 2.0,
            ));
        }
        let late = med(|m| Some(m.late_changes as f64)).unwrap_or(0.0);
        out.push((
            format!("{}: {late:.0} changes after convergence (0)", s.name),
            late == 0.0,
        ));
        if s.name == "idle-burst" {
            let idle = runs.iter().map(|m| m.idle_changes).max().unwrap_or(0);
            out.push((
                format!("{}: {idle} changes while idle (0)", s.name),
                idle == 0,
            ));
        }
        out.push(restored_verdict(s, runs));
        if !s.events.is_empty()
            && s.name != "kill9"
            && let Some(settle) = med(|m| m.settle)
        {
            out.push((
                format!("{}: every input vector on one online CPU {settle:.1} s after each event (<= 2 ticks)", s.name),
                settle <= 2.5,
            ));
        }
        if s.threaded {
            let pinned = median_or_never(runs.iter().map(|m| m.threads_pinned));
            out.push((
                format!(
                    "{}: every rx NAPI thread on its queue's IRQ CPU {} after the start (<= 2 ticks)",
                    s.name,
                    pinned.map_or("never".into(), |t| format!("{t:.1} s"))
                ),
                pinned.is_some_and(|t| t <= 2.5),
            ));
            out.push((
                format!(
                    "{}: steerd's busiest-CPU share {busiest:.2} <= 0.40",
                    s.name
                ),
                busiest <= 0.405,
            ));
        }
        if s.vm.blk_queues.is_some() {
            let lines = runs.iter().map(|m| m.managed_lines).max().unwrap_or(0);
            let managed = s.vm.blk_queues.unwrap_or(0) as usize;
            out.push((
                format!("{}: {lines} log lines about managed IRQs (at most one per managed IRQ, {managed})", s.name),
                lines <= managed,
            ));
        }
    }
    out.extend(crate::lab::rss::verdicts(rows));
    out.extend(crate::lab::faults::verdicts(rows));
    out.extend(crate::lab::busy_poll::verdicts(rows));
    out
}
