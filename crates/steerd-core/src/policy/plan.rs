//! What the policy decided: a [`Plan`] of actions, each with its old and new value, its
//! reason and its expected effect, plus notes on what it refused to do and why.
//!
//! Plans serialize to JSON for programs (`steerd plan --format json`, the decision log)
//! and print as text for people. What an action changes is a [`Knob`] with [`KnobValue`]s,
//! the same type the actuator writes and the state file holds, printed and serialised
//! the same way.

use std::fmt;

use serde::Serialize;

use crate::knob::{Knob, KnobValue};

/// Why an action was taken: the rule that fired. Metrics label actions by this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    /// The IRQ may fire on a banned, isolated, `nohz_full` or offline CPU.
    ForbiddenCpu,
    /// The IRQ fires off its device's NUMA node while local CPUs are allowed.
    RemoteNode,
    /// Two queue vectors of one device fire on the same CPU.
    StackedVectors,
    /// Two queue vectors of one device share a physical core while a core is free.
    SharedCore,
    /// Queue vectors of two devices share a core while a core is free.
    DeviceOverlap,
    /// A queue vector's mask spans several CPUs and lets the kernel pick one: it gets a
    /// single CPU by the same rules.
    Unpinned,
    /// A queue's transmit vector joins its receive vector's CPU.
    FollowsRx,
    /// A threaded NAPI's polling thread joins its queue's interrupt CPU.
    NapiThread,
    /// Moving load off a hot CPU (pressure or imbalance).
    HotCpu,
    /// Moving load off a CPU that drops packets or runs out of budget.
    Distress,
    /// RPS turned on for a queue.
    RpsOn,
    /// An RPS mask widened.
    RpsWiden,
    /// An RPS mask narrowed: the pressure is gone.
    RpsNarrow,
    /// RPS turned off: the pressure is gone, or the config says so.
    RpsOff,
    /// RPS turned off on a device whose queue set changed under steerd's masks: they were
    /// chosen for the queues it had. Unlike the other changes it starts no dwell time
    /// ([`PolicyState::record_applied`](super::state::PolicyState::record_applied)).
    RpsReset,
    /// RPS set to the configured static mask.
    RpsStatic,
    /// An RPS change that made the machine worse (less receive work done, or backlog
    /// drops) or moved no work to the CPUs it added, undone after its trial.
    RpsUndo,
    /// RFS flow tables set up alongside RPS.
    RfsOn,
    /// RFS flow tables cleared: RPS is off.
    RfsOff,
    /// RSS indirection entries moved from hot receive queues to cool ones (a measured step).
    RssStep,
    /// A table step that did not help, undone.
    RssRevert,
    /// A transmit queue's XPS mask follows its receive queue's interrupt CPU (`xps:
    /// follow`).
    XpsFollow,
}

impl ReasonKind {
    /// Every reason, so the metrics can export each action's series at 0 from the start.
    pub const ALL: [ReasonKind; 22] = [
        ReasonKind::ForbiddenCpu,
        ReasonKind::RemoteNode,
        ReasonKind::StackedVectors,
        ReasonKind::SharedCore,
        ReasonKind::DeviceOverlap,
        ReasonKind::Unpinned,
        ReasonKind::FollowsRx,
        ReasonKind::NapiThread,
        ReasonKind::HotCpu,
        ReasonKind::Distress,
        ReasonKind::RpsOn,
        ReasonKind::RpsWiden,
        ReasonKind::RpsNarrow,
        ReasonKind::RpsOff,
        ReasonKind::RpsReset,
        ReasonKind::RpsStatic,
        ReasonKind::RpsUndo,
        ReasonKind::RfsOn,
        ReasonKind::RfsOff,
        ReasonKind::RssStep,
        ReasonKind::RssRevert,
        ReasonKind::XpsFollow,
    ];

    /// The kinds of knob ([`Knob::kind`](crate::knob::Knob::kind)) an action with this
    /// reason writes: the `action` label values it is counted under.
    pub fn knob_kinds(self) -> &'static [&'static str] {
        use crate::knob::{
            IRQ_AFFINITY, NAPI_THREAD_AFFINITY, RPS_CPUS, RPS_FLOW_CNT, RPS_SOCK_FLOW_ENTRIES,
            RSS_INDIRECTION, XPS_CPUS,
        };
        match self {
            ReasonKind::ForbiddenCpu
            | ReasonKind::RemoteNode
            | ReasonKind::StackedVectors
            | ReasonKind::SharedCore
            | ReasonKind::DeviceOverlap
            | ReasonKind::Unpinned
            | ReasonKind::FollowsRx
            | ReasonKind::HotCpu
            | ReasonKind::Distress => &[IRQ_AFFINITY],
            ReasonKind::NapiThread => &[NAPI_THREAD_AFFINITY],
            ReasonKind::RpsOn
            | ReasonKind::RpsWiden
            | ReasonKind::RpsNarrow
            | ReasonKind::RpsOff
            | ReasonKind::RpsReset
            | ReasonKind::RpsStatic
            | ReasonKind::RpsUndo => &[RPS_CPUS],
            ReasonKind::RfsOn | ReasonKind::RfsOff => &[RPS_FLOW_CNT, RPS_SOCK_FLOW_ENTRIES],
            ReasonKind::RssStep | ReasonKind::RssRevert => &[RSS_INDIRECTION],
            ReasonKind::XpsFollow => &[XPS_CPUS],
        }
    }

    /// The snake_case name used in JSON and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonKind::ForbiddenCpu => "forbidden_cpu",
            ReasonKind::RemoteNode => "remote_node",
            ReasonKind::StackedVectors => "stacked_vectors",
            ReasonKind::SharedCore => "shared_core",
            ReasonKind::DeviceOverlap => "device_overlap",
            ReasonKind::Unpinned => "unpinned",
            ReasonKind::FollowsRx => "follows_rx",
            ReasonKind::NapiThread => "napi_thread",
            ReasonKind::HotCpu => "hot_cpu",
            ReasonKind::Distress => "distress",
            ReasonKind::RpsOn => "rps_on",
            ReasonKind::RpsWiden => "rps_widen",
            ReasonKind::RpsNarrow => "rps_narrow",
            ReasonKind::RpsOff => "rps_off",
            ReasonKind::RpsReset => "rps_reset",
            ReasonKind::RpsStatic => "rps_static",
            ReasonKind::RpsUndo => "rps_undo",
            ReasonKind::RfsOn => "rfs_on",
            ReasonKind::RfsOff => "rfs_off",
            ReasonKind::RssStep => "rss_step",
            ReasonKind::RssRevert => "rss_revert",
            ReasonKind::XpsFollow => "xps_follow",
        }
    }
}

/// The rule that fired and, for people, the signal and threshold behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reason {
    pub kind: ReasonKind,
    pub text: String,
}

/// One write the policy wants.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    pub target: Knob,
    /// What the target serves, e.g. `eth0 rx-3` for a queue vector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serves: Option<String>,
    pub old: KnobValue,
    pub new: KnobValue,
    pub reason: Reason,
    /// The predicted effect, for people.
    pub expected: String,
}

/// Why the policy did not do something it otherwise would have, or something worth saying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// A kernel-managed (or unwritable) IRQ: never moved.
    Managed,
    /// A value someone else changed after steerd wrote it.
    ExternalChange,
    /// A write failed for good; steerd stopped trying.
    WriteFailed,
    /// A device has no allowed CPU to steer to.
    NoAllowedCpu,
    /// `rps_sock_flow_entries` does not exist (outside the initial network namespace).
    RfsUnavailable,
    /// A CPU is hot and neither an IRQ move nor RPS can help (now).
    CannotRelieve,
    /// An RPS mask steerd did not set is left alone in auto mode.
    ForeignMask,
    /// What the RSS table lever would do (`rss.mode: advise`), or why it leaves a table
    /// alone.
    RssTable,
    /// A hot queue's UDP flows are hashed on IP addresses only: `ethtool -N DEV
    /// rx-flow-hash udp4 sdfn` would spread flows between the same two hosts.
    UdpHash,
    /// A queue vector's move has not taken effect: its NAPI keeps polling on the old CPU.
    MoveNoEffect,
    /// Receive queues of a busy device that the hash or the RSS table stopped feeding
    /// (`crate::silent_queues`).
    SilentQueues,
}

impl NoteKind {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            NoteKind::Managed => "managed",
            NoteKind::ExternalChange => "external_change",
            NoteKind::WriteFailed => "write_failed",
            NoteKind::NoAllowedCpu => "no_allowed_cpu",
            NoteKind::RfsUnavailable => "rfs_unavailable",
            NoteKind::CannotRelieve => "cannot_relieve",
            NoteKind::ForeignMask => "foreign_mask",
            NoteKind::RssTable => "rss_table",
            NoteKind::UdpHash => "udp_hash",
            NoteKind::MoveNoEffect => "move_no_effect",
            NoteKind::SilentQueues => "silent_queues",
        }
    }
}

/// A note in a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    pub kind: NoteKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Knob>,
    pub text: String,
    /// First time this note appears (the daemon logs only new notes).
    pub new: bool,
}

/// The policy's output for one tick.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub notes: Vec<Note>,
    /// Why there is nothing to do, when `actions` is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_reason: Option<String>,
}

impl Plan {
    /// Whether the plan has no action.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.actions.is_empty() {
            writeln!(
                f,
                "nothing to do: {}",
                self.idle_reason.as_deref().unwrap_or("no rule fired")
            )?;
        } else {
            let s = if self.actions.len() == 1 { "" } else { "s" };
            writeln!(f, "{} action{s}:", self.actions.len())?;
            for action in &self.actions {
                write!(f, "  {}", action.target)?;
                if let Some(serves) = &action.serves {
                    write!(f, " ({serves})")?;
                }
                writeln!(f, ": {} -> {}", action.old, action.new)?;
                writeln!(
                    f,
                    "      why:    [{}] {}",
                    action.reason.kind.as_str(),
                    action.reason.text
                )?;
                writeln!(f, "      expect: {}", action.expected)?;
            }
        }
        if !self.notes.is_empty() {
            writeln!(f, "notes:")?;
            for note in &self.notes {
                writeln!(f, "  [{}] {}", note.kind.as_str(), note.text)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Plan {
        Plan {
            actions: vec![Action {
                target: Knob::IrqAffinity { irq: 42 },
                serves: Some("eth0 rx-3".into()),
                old: KnobValue::Cpus([0].into_iter().collect()),
                new: KnobValue::Cpus([5].into_iter().collect()),
                reason: Reason {
                    kind: ReasonKind::StackedVectors,
                    text: "4 queue vectors of eth0 fire on CPU 0".into(),
                },
                expected: "CPU 0 410k -> 310k pkt/s".into(),
            }],
            notes: vec![Note {
                kind: NoteKind::Managed,
                target: Some(Knob::IrqAffinity { irq: 30 }),
                text: "irq 30 is kernel-managed".into(),
                new: true,
            }],
            idle_reason: None,
        }
    }

    #[test]
    fn serializes_to_json_with_tagged_targets() {
        let json = serde_json::to_value(sample()).unwrap();
        let action = &json["actions"][0];
        assert_eq!(action["target"]["knob"], "irq_affinity");
        assert_eq!(action["target"]["irq"], 42);
        assert_eq!(action["old"], serde_json::json!([0]));
        assert_eq!(action["new"], serde_json::json!([5]));
        assert_eq!(action["reason"]["kind"], "stacked_vectors");
        assert_eq!(json["notes"][0]["kind"], "managed");
        let rfs = serde_json::to_value(Knob::RpsFlowCnt {
            device: "eth0".into(),
            queue: 1,
        })
        .unwrap();
        assert_eq!(
            rfs,
            serde_json::json!({"knob": "rps_flow_cnt", "device": "eth0", "queue": 1})
        );
    }

    #[test]
    fn prints_for_people() {
        let text = sample().to_string();
        assert!(
            text.starts_with("1 action:\n  irq 42 affinity (eth0 rx-3): 0 -> 5\n"),
            "{text}"
        );
        assert!(text.contains("[stacked_vectors]"), "{text}");
        assert!(text.contains("[managed] irq 30"), "{text}");
        let empty = Plan {
            idle_reason: Some("no CPU is hot".into()),
            ..Plan::default()
        };
        assert_eq!(empty.to_string(), "nothing to do: no CPU is hot\n");
    }

    #[test]
    fn reason_names_match_serde() {
        for kind in [
            ReasonKind::ForbiddenCpu,
            ReasonKind::Unpinned,
            ReasonKind::FollowsRx,
            ReasonKind::RpsOn,
            ReasonKind::RfsOff,
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        for kind in [NoteKind::ExternalChange, NoteKind::ForeignMask] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }
}
