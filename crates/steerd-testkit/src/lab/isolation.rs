//! The cgroup scenarios (issue 33): an isolated cgroup v2 cpuset partition made under
//! traffic and dissolved again, as Kubernetes' CPU manager or a realtime set-up does
//! while the machine runs. The kernel takes the partition's CPUs out of scheduler load
//! balancing but leaves IRQ affinity, RPS masks and NAPI threads where they are, so
//! whatever a balancer placed there stays unless the balancer follows the partition.
//!
//! Figures, from the guest's samples: how long after the partition is made no receive
//! vector's `smp_affinity_list`, receive queue RPS mask or receive NAPI thread's allowed
//! CPUs includes a partition CPU (`emptied`: what a balancer writes), how long until no
//! `effective_affinity_list` does either (`emptied_effective`: on x86 a vector's move
//! completes at its next interrupt, which a NAPI polling under saturation may not take
//! for seconds), and how long after it is dissolved a receive vector or NAPI thread is
//! placed on one again (`refilled`). Timed to the samples, 0.5 to 1 s apart.

use std::collections::BTreeSet;
use std::time::Duration;

use steerd_kernel::cpuset::CpuSet;

use super::saturation::add_rules;
use super::scenario::{Scenario, THREADED_ON, base};

/// The partition's CPUs.
pub const PARTITION: &str = "2-3";
/// When the partition is made and dissolved, seconds after the balancer starts.
pub const ISOLATE_AT: u32 = 12;
pub const DISSOLVE_AT: u32 = 22;
const ISOLATE: &str = "isolate_partition 2-3";
const DISSOLVE: &str = "dissolve_partition";
/// The guest shell that prints `LAB QUIET` with steerd's `steerd_quiet_mode` gauge (`-`
/// when nothing answers), a second before each partition event of `cgroup-quiet`.
const REPORT_QUIET: &str = "report_quiet";

/// The cgroup scenarios: threaded NAPI (vectors and threads to move), and the same under
/// the saturating rules (RPS masks too, where a balancer sets them under load).
pub fn all() -> Vec<Scenario> {
    let cgroup = |name, what, setup: String| Scenario {
        setup,
        threaded: true,
        events: vec![(ISOLATE_AT, ISOLATE), (DISSOLVE_AT, DISSOLVE)],
        duration: Duration::from_secs(32),
        steady: Duration::from_secs(8),
        ..base(name, what)
    };
    vec![
        Scenario {
            // No traffic: steerd is in quiet mode (5 s ticks) when the partition is made
            // and when it is dissolved, so only its watch on the cgroups can be in time.
            phases: Vec::new(),
            // Dissolved 20 s after it was made: steerd, woken to empty it, needs a few
            // idle ticks to go quiet again (in one run it was still awake 9 s after).
            events: vec![
                (ISOLATE_AT - 1, REPORT_QUIET),
                (ISOLATE_AT, ISOLATE),
                (ISOLATE_AT + 19, REPORT_QUIET),
                (ISOLATE_AT + 20, DISSOLVE),
            ],
            duration: Duration::from_secs(42),
            threaded: false,
            ..cgroup(
                "cgroup-quiet",
                "no traffic (steerd in quiet mode), every input vector on CPU0, CPUs 2-3 made an isolated cgroup partition at 12 s and dissolved at 32 s",
                "pin_inputs 0".into(),
            )
        },
        cgroup(
            "cgroup-isolated",
            "threaded NAPI, every input vector on CPU0, CPUs 2-3 made an isolated cgroup partition at 12 s and dissolved at 22 s, 8 UDP flows",
            format!("{THREADED_ON}; pin_inputs 0"),
        ),
        Scenario {
            hand_rps: true,
            ..cgroup(
                "sat-cgroup-isolated",
                "cgroup-isolated under the saturating rules",
                format!("{}; {THREADED_ON}; pin_inputs 0", add_rules()),
            )
        },
    ]
}

/// The partition's figures of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionFigures {
    /// What the kernel made of the partition (`isolated`, or `isolated invalid (why)`),
    /// and the root's `cpuset.cpus.isolated` then (`-` before 6.8).
    pub state: Option<String>,
    /// Seconds from the partition's creation to the first sample with no receive vector,
    /// RPS mask or NAPI thread on its CPUs (and none after, while it stands); `None`:
    /// never emptied.
    pub emptied: Option<f64>,
    /// The same, counting where the kernel still delivers each vector
    /// (`effective_affinity_list`).
    pub emptied_effective: Option<f64>,
    /// Seconds from its dissolution to the first sample with a receive vector or NAPI
    /// thread placed on its CPUs again; `None`: not in the run.
    pub refilled: Option<f64>,
    /// steerd's `steerd_quiet_mode` a second before each event, where the scenario asks
    /// (`cgroup-quiet`): `1` quiet, `0` awake, `-` no answer.
    pub quiet_before: Vec<String>,
}

/// Whether the scenario is one of these.
pub fn is_cgroup(s: &Scenario) -> bool {
    s.events.iter().any(|(_, command)| *command == ISOLATE)
}

/// The figures from each sample's time and receive CPUs (see `report::parse::receive_cpus`) and the
/// guest's event lines ("uptime command").
pub fn figures(
    timeline: &[(f64, BTreeSet<u32>)],
    events: &[String],
    state: Option<String>,
    quiet_before: Vec<String>,
) -> PartitionFigures {
    let partition: BTreeSet<u32> = CpuSet::parse_list(PARTITION)
        .map(|set| set.iter().collect())
        .unwrap_or_default();
    let Some(isolated) = event_at(events, ISOLATE) else {
        return PartitionFigures {
            state,
            quiet_before,
            ..PartitionFigures::default()
        };
    };
    let (emptied, refilled) = kept_off(timeline, &partition, isolated, event_at(events, DISSOLVE));
    PartitionFigures {
        state,
        emptied,
        emptied_effective: None,
        refilled,
        quiet_before,
    }
}

/// When the guest ran `command`, by its event line ("uptime command").
pub fn event_at(events: &[String], command: &str) -> Option<f64> {
    events.iter().find_map(|line| {
        let (up, cmd) = line.split_once(' ')?;
        (cmd == command).then(|| up.parse().ok())?
    })
}

/// How long after `from` work left `cpus` for good (the first sample from which no later
/// one, until `until`, touches them; `None`: never), and how long after `until` work was
/// placed there again (`None`: not in the run). One rule for every set of CPUs a balancer
/// must keep work off: an isolated partition, a pinned busy-polling NAPI thread's CPU.
pub fn kept_off(
    timeline: &[(f64, BTreeSet<u32>)],
    cpus: &BTreeSet<u32>,
    from: f64,
    until: Option<f64>,
) -> (Option<f64>, Option<f64>) {
    let standing_until = until.unwrap_or(f64::INFINITY);
    let touches = |placed: &BTreeSet<u32>| !placed.is_disjoint(cpus);
    let standing: Vec<&(f64, BTreeSet<u32>)> = timeline
        .iter()
        .filter(|(up, _)| *up > from && *up < standing_until)
        .collect();
    let last_touching = standing.iter().rposition(|(_, placed)| touches(placed));
    let emptied = match last_touching {
        None => standing.first(),
        Some(i) => standing.get(i + 1),
    }
    .map(|(up, _)| up - from);
    let refilled = until.and_then(|until| {
        timeline
            .iter()
            .find(|(up, placed)| *up > until && touches(placed))
            .map(|(up, _)| up - until)
    });
    (emptied, refilled)
}

/// The CPUs a list (`0-3,5`) or a hex mask (`0000000f`, `00,0000000f`) names; empty when
/// it is neither.
pub fn cpus_of(text: &str, hex: bool) -> BTreeSet<u32> {
    let set = if hex {
        CpuSet::parse_mask(text)
    } else {
        CpuSet::parse_list(text)
    };
    set.map(|set| set.iter().collect()).unwrap_or_default()
}
