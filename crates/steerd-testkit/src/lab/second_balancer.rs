//! A second balancer started beside steerd (issue 33, other tools): irqbalance, as a
//! package upgrade or an operator's `systemctl start irqbalance` would start it, 4 s after
//! steerd, under traffic, stopped at 30 s. irqbalance moves IRQs every 10 s; with
//! `on_external_change: respect` steerd notes each vector it had placed that irqbalance
//! moved and never writes it again while it runs, and `steerd doctor` names irqbalance as
//! an error.
//!
//! Figures, from the guest's console: steerd's `external_change` notes, and steerd's IRQ
//! writes that came after the note of the same IRQ (none, when it respects them), in the
//! order of its log; the doctor's findings (`lab::doctor`).

use std::time::Duration;

use super::scenario::{Scenario, base, udp};

/// The scenario's name.
pub const NAME: &str = "irqbalance-beside";

/// The scenario: every input on CPU0, steerd on its built-in config, irqbalance started
/// at 4 s and stopped at 30 s, doctor at 26 s.
pub fn scenario() -> Scenario {
    Scenario {
        setup: "pin_inputs 0".into(),
        events: vec![
            (4, "start_second_irqbalance"),
            (26, "run_doctor"),
            (30, "stop_second_irqbalance"),
        ],
        duration: Duration::from_secs(40),
        phases: vec![udp(1, 38, 8, 20_000)],
        steady: Duration::from_secs(8),
        ..base(
            NAME,
            "every input on CPU0; irqbalance started beside the balancer at 4 s, stopped at 30 s; steerd doctor at 26 s",
        )
    }
}

/// What steerd did about the second balancer's moves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BesideRun {
    /// The IRQs steerd noted as changed by someone else.
    pub noted: Vec<u32>,
    /// steerd's writes to one of them after its note (`irq N affinity: ... applied`).
    pub rewrites_after_note: usize,
}

/// Reads steerd's log lines (`LOG ...`) of a run, in order.
pub fn figures(lines: &[String]) -> BesideRun {
    let mut run = BesideRun::default();
    for line in lines.iter().filter_map(|l| l.strip_prefix("LOG ")) {
        if let Some(rest) = line
            .split_once("policy note (external_change): irq ")
            .map(|(_, rest)| rest)
        {
            if let Some(irq) = leading_number(rest)
                && !run.noted.contains(&irq)
            {
                run.noted.push(irq);
            }
        } else if let Some(rest) = line.split_once(" INFO irq ").map(|(_, rest)| rest)
            && rest
                .split_once(' ')
                .is_some_and(|(_, message)| message.starts_with("affinity: "))
            && line.contains(") applied")
            && leading_number(rest).is_some_and(|irq| run.noted.contains(&irq))
        {
            // steerd's write of that IRQ's affinity (`irq N affinity: A -> B (...) applied`).
            run.rewrites_after_note += 1;
        }
    }
    run
}

fn leading_number(text: &str) -> Option<u32> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_and_writes_after_them() {
        let lines: Vec<String> = [
            "LOG 2026-11-28T16:13:05.78Z  INFO irq 27 affinity: 0 -> 1 (stacked_vectors: x) applied serves=\"eth0 rx-1\"",
            "LOG 2026-11-28T16:13:15.80Z  INFO policy note (external_change): irq 27 affinity: steerd wrote 1, now 2: changed by someone else; left alone (on_external_change: respect)",
            "LOG 2026-11-28T16:13:16.80Z  INFO irq 29 affinity: 0 -> 2 (stacked_vectors: x) applied serves=\"eth0 rx-2\"",
            "S 12.0",
        ]
        .map(String::from)
        .to_vec();
        let run = figures(&lines);
        assert_eq!(run.noted, vec![27]);
        assert_eq!(run.rewrites_after_note, 0);
        let mut again = lines.clone();
        again.push("LOG 2026-11-28T16:13:17.80Z  INFO irq 27 affinity: 2 -> 1 (stacked_vectors: x) applied serves=\"eth0 rx-1\"".into());
        assert_eq!(figures(&again).rewrites_after_note, 1);
    }
}
