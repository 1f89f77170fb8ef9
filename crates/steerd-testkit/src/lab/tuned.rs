//! The tuned scenarios (issue 33, other tools): Debian's tuned, started under traffic in
//! the guest with a profile of the lab's, `steerd-lab`, which is `cpu-partitioning`'s
//! `[scheduler]` section alone (`isolated_cores=3`): that plugin moves every IRQ it can off
//! the isolated core when the profile is applied (and puts them back when tuned stops).
//! The whole `cpu-partitioning` also flips static keys (`net.core.busy_poll`, `rtentsk`),
//! and one TCG guest of nine took an int3 oops while the kernel patched them under
//! traffic (6.12, 2026-11-28), so the lab leaves those parts out. With steerd's default `on_external_change: respect`
//! the vectors stay where tuned put them and `steerd doctor` names tuned and the setting
//! that stops it; with `override` steerd puts its own placement back.
//!
//! tuned runs chrooted in the root `scripts/lab-tuned.sh` builds (the lab copies it into
//! the guest at `/tuned`, `Lab::add_tree`), with the guest's /proc, /sys and /dev, and
//! without D-Bus or its socket (`--no-dbus --no-socket`): the guest has neither bus nor
//! systemd. Its `etc/tuned` and `usr/lib/tuned` are bound over the guest's, where
//! `steerd doctor` reads the active profile and the profiles it includes.
//!
//! Figures, from the guest's samples: when tuned's writes first show (a receive vector's
//! mask no longer a single CPU, the isolated core left out), and whether the receive
//! vectors then stay on tuned's masks (respect) or are back on one CPU each (override)
//! until tuned stops.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::isolation::cpus_of;
use super::scenario::{Scenario, base, udp};

/// The core tuned's profile isolates.
pub const ISOLATED: u32 = 3;
/// When tuned starts, steerd doctor runs and tuned stops, seconds after the balancer
/// starts. Python under TCG takes seconds to start tuned and apply the profile: its moves
/// showed 4.9-6.0 s after the start on 2026-11-28's host, 13.4-27.7 s on 2026-11-29's
/// slower one (six runs), where CI at 435bdbc saw none before the stop at 30 s (then the
/// schedule's end). 46 s are left to the doctor now, and with `override` steerd's put-back
/// (within `RECHECK_EVERY` + 4 s of tuned's move) must come before the stop.
pub const START_AT: u32 = 4;
pub const DOCTOR_AT: u32 = 50;
pub const STOP_AT: u32 = 54;
/// The scenarios' names.
pub const RESPECT: &str = "tuned";
pub const OVERRIDE: &str = "tuned-override";

/// Whether the scenario needs the tuned root in the guest.
pub fn needs_tuned(s: &Scenario) -> bool {
    s.name == RESPECT || s.name == OVERRIDE
}

/// The scenarios: steerd on its built-in config (`respect`), and with `override`.
pub fn all() -> Vec<Scenario> {
    let tuned = |name, what, config: &str| Scenario {
        setup: format!(
            "mkdir -p /etc/steerd; echo '{config}' > /etc/steerd/steerd.yaml; pin_inputs 0"
        ),
        steerd_args: "--config /etc/steerd/steerd.yaml".into(),
        events: vec![
            (START_AT, "start_tuned"),
            (DOCTOR_AT, "run_doctor"),
            (STOP_AT, "stop_tuned"),
        ],
        duration: Duration::from_secs(u64::from(STOP_AT) + 10),
        phases: vec![udp(1, u64::from(STOP_AT) + 8, 8, 20_000)],
        steady: Duration::from_secs(8),
        ..base(name, what)
    };
    vec![
        tuned(
            RESPECT,
            "every input on CPU0; tuned with cpu-partitioning's scheduler section (isolated_cores=3) started at 4 s, stopped at 54 s; steerd doctor at 50 s",
            "on_external_change: respect",
        ),
        tuned(
            OVERRIDE,
            "as tuned, steerd with on_external_change: override",
            "on_external_change: override",
        ),
    ]
}

/// What one run of a tuned scenario showed, from the guest's console lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TunedRun {
    /// tuned's log said the profile was applied (`LAB TUNED applied`).
    pub applied: bool,
    /// Seconds after tuned started of the last sample before tuned's log said so: when a
    /// run that saw no move had tuned apply its profile (after the stop, on a slow guest).
    pub applied_after_s: Option<f64>,
    /// The IRQs a balancer had put on the isolated core alone before tuned started (the
    /// ones tuned moves that someone placed): by number.
    pub targets: Vec<u32>,
    /// Seconds after tuned started at which the first sample showed one of them moved.
    pub moved_after_s: Option<f64>,
    /// Their masks in that sample (tuned's).
    pub tuned_masks: Vec<String>,
    /// Whether every sample from then until tuned stopped kept them all off the isolated
    /// core, as tuned wants. Not "on tuned's masks": a transmit vector steerd had never
    /// written is not someone else's change of steerd's value, and steerd moves it beside
    /// its receive vector (which tuned's mask let fire on CPU 0) as any other.
    pub kept_off_isolated: bool,
    /// Seconds after they moved at which every one was back on a single CPU, before tuned
    /// stopped (`None`: not while tuned ran).
    pub back_after_s: Option<f64>,
    /// steerd's `external_change` notes naming one of them.
    pub external_notes: usize,
}

/// Reads a tuned run from its console lines: samples (`S uptime`, then `A irq mask
/// effective`), events (`LAB EVENT uptime command`), tuned's own lines and steerd's log
/// (`LOG ...`).
pub fn figures(lines: &[String]) -> TunedRun {
    /// Where a sample falls, by the order of the console's lines: the guest prints a
    /// sample and then the events that fell due. The order is what counts: consoles
    /// recorded before 2026-11-29 stamped `LAB EVENT` with the uptime read before that
    /// sample, so their uptimes alone would misplace the sample taken just before tuned
    /// starts.
    #[derive(Clone, Copy, PartialEq)]
    enum Phase {
        Before,
        Running,
        After,
    }
    let mut samples: Vec<(f64, Phase, BTreeMap<u32, String>)> = Vec::new();
    let mut phase = Phase::Before;
    let mut started = None;
    let mut run = TunedRun::default();
    for line in lines {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("S"), Some(t), None, None) => {
                if let Ok(t) = t.parse() {
                    samples.push((t, phase, BTreeMap::new()));
                }
            }
            (Some("A"), Some(irq), Some(mask), _) => {
                if let (Some(last), Ok(irq)) = (samples.last_mut(), irq.parse()) {
                    last.2.insert(irq, mask.to_string());
                }
            }
            (Some("LAB"), Some("EVENT"), Some(t), Some("start_tuned")) => {
                started = t.parse::<f64>().ok();
                phase = Phase::Running;
            }
            (Some("LAB"), Some("EVENT"), _, Some("stop_tuned")) => phase = Phase::After,
            (Some("LAB"), Some("TUNED"), Some("applied"), _) => {
                run.applied = true;
                // The last sample since tuned started (0 when none came in between).
                run.applied_after_s = started.map(|started| {
                    samples
                        .iter()
                        .rev()
                        .find(|(_, p, _)| *p != Phase::Before)
                        .map_or(0.0, |(t, _, _)| (t - started).max(0.0))
                });
            }
            _ => {}
        }
    }
    let Some(started) = started else {
        return run;
    };
    let Some((_, _, before)) = samples.iter().rev().find(|(_, p, _)| *p == Phase::Before) else {
        return run;
    };
    let isolated = ISOLATED.to_string();
    run.targets = before
        .iter()
        .filter(|(_, mask)| **mask == isolated)
        .map(|(irq, _)| *irq)
        .collect();
    // The targets' masks in a sample, each as its CPUs (a target the sample lacks is
    // left out, not read as a change).
    let cpus = |sample: &BTreeMap<u32, String>| -> Vec<BTreeSet<u32>> {
        run.targets
            .iter()
            .filter_map(|irq| sample.get(irq))
            .map(|mask| cpus_of(mask, false))
            .collect()
    };
    let while_running: Vec<(f64, &BTreeMap<u32, String>)> = samples
        .iter()
        .filter(|(_, p, _)| *p == Phase::Running)
        .map(|(t, _, sample)| (*t, sample))
        .collect();
    // tuned's move: a mask of several CPUs that leaves the isolated core out (steerd
    // moving a vector to another single CPU is not tuned's doing).
    let Some(moved) = while_running.iter().position(|(_, s)| {
        cpus(s)
            .iter()
            .any(|c| c.len() > 1 && !c.contains(&ISOLATED))
    }) else {
        return run;
    };
    let (moved_at, moved_sample) = while_running[moved];
    run.moved_after_s = Some(moved_at - started);
    run.tuned_masks = run
        .targets
        .iter()
        .filter_map(|irq| moved_sample.get(irq).cloned())
        .collect();
    let after = &while_running[moved..];
    run.kept_off_isolated = after
        .iter()
        .all(|(_, s)| cpus(s).iter().all(|c| !c.contains(&ISOLATED)));
    run.back_after_s = after
        .iter()
        .find(|(_, s)| {
            let cpus = cpus(s);
            cpus.len() == run.targets.len() && cpus.iter().all(|c| c.len() == 1)
        })
        .map(|(t, _)| t - moved_at);
    run.external_notes = lines
        .iter()
        .filter(|l| l.starts_with("LOG ") && l.contains("policy note (external_change)"))
        .filter(|l| {
            run.targets
                .iter()
                .any(|irq| l.contains(&format!("(external_change): irq {irq} ")))
        })
        .count();
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(|l| l.trim().to_string()).collect()
    }

    /// The lab's first runs (2026-11-28, 6.12): queue 3's vectors (31, 32) on CPU 3,
    /// tuned's scheduler plugin moves them to 0-2; steerd respects, or puts them back.
    #[test]
    fn tuned_moves_and_what_the_balancer_did_after() {
        let respected = lines(
            "S 9.0\nA 31 3 3\nA 32 3 3\nA 24 0-3 0\nLAB EVENT 9.4 start_tuned\n\
             S 10.0\nA 31 3 3\nA 32 3 3\nLAB TUNED applied comm tuned profile steerd-lab\n\
             S 15.7\nA 31 0-2 0\nA 32 0-2 0\nA 24 0-2 0\n\
             LOG 2026-11-28T16:13:35.8Z  INFO policy note (external_change): irq 31 affinity: steerd wrote 3, now 0-2: changed by someone else\n\
             S 30.0\nA 31 0-2 0\nA 32 0 0\nLAB EVENT 35.2 stop_tuned\nS 38.4\nA 31 3 3\nA 32 3 3",
        );
        // The scenario's description says the schedule's times.
        let what = all()[0].what;
        for at in [START_AT, STOP_AT, DOCTOR_AT] {
            assert!(what.contains(&format!(" {at} s")), "{what}");
        }
        let run = figures(&respected);
        assert!(run.applied);
        assert!((run.applied_after_s.unwrap() - 0.6).abs() < 1e-9);
        assert_eq!(run.targets, vec![31, 32]);
        assert!((run.moved_after_s.unwrap() - 6.3).abs() < 1e-9);
        assert_eq!(run.tuned_masks, vec!["0-2", "0-2"]);
        assert!(run.kept_off_isolated);
        assert_eq!(run.back_after_s, None);
        assert_eq!(run.external_notes, 1);

        let overridden = lines(
            "S 9.0\nA 31 3 3\nA 32 3 3\nLAB EVENT 9.4 start_tuned\n\
             S 15.7\nA 31 0-2 0\nA 32 0-2 0\nS 20.2\nA 31 3 3\nA 32 3 3\n\
             LAB EVENT 35.2 stop_tuned",
        );
        let run = figures(&overridden);
        assert!(!run.applied);
        assert!(!run.kept_off_isolated);
        assert!((run.back_after_s.unwrap() - 4.5).abs() < 1e-9);
        // The sample printed just before the start event carries a later uptime than
        // the event (the guest reads the time, samples, then runs the events): it is the
        // last one before tuned. A move by steerd to another single CPU is not tuned's.
        let steerd_moved = lines(
            "S 9.5\nA 31 3 3\nLAB EVENT 9.4 start_tuned\nS 10.0\nA 31 2 2\n\
             S 11.0\nA 31 2 2\nLAB EVENT 35.2 stop_tuned",
        );
        let run = figures(&steerd_moved);
        assert_eq!(run.targets, vec![31]);
        assert_eq!(run.moved_after_s, None);
        // tuned never ran: nothing moved.
        let run = figures(&lines(
            "S 9.0\nA 31 3 3\nLAB EVENT 9.4 start_tuned\nS 12.0\nA 31 3 3\nLAB EVENT 35.2 stop_tuned",
        ));
        assert_eq!(run.moved_after_s, None);
    }
}
