//! What one engine tick did, for whoever drives it to log, count and show: whether it
//! decided, the plan, and what became of each action.

use std::fmt;

use super::move_check::MoveVerdict;
use crate::apply::WriteFailure;
use crate::policy::{Action, Plan};

/// How far a tick went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickKind {
    /// The first sample: a rate needs two.
    Baseline,
    /// Nothing could change since the last decision and every CPU is calm: the policy
    /// was not asked (`policy::can_skip`).
    Skipped,
    /// The policy decided; the plan may be empty.
    Decided,
}

/// What the engine did about a failed write, so the driver logs it once, in its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// Someone else set the value since steerd wrote it: it is theirs now.
    TheirsNow,
    /// The kernel refuses it for good: never proposed or tried again.
    GivenUp,
    /// It may pass: tried again after a backoff.
    Retry,
    /// Not allowed to write: the engine writes nothing from now on (every later action
    /// is a dry run; `Engine::writing_stopped` says why).
    StopWriting,
    /// The target is gone: the rest of the plan was dropped; rediscover.
    Rediscover,
}

/// What became of one action.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Written, and read back as intended.
    Applied,
    /// Decided but not written: a dry run or observe-only.
    DryRun,
    /// Tried and failed.
    Failed {
        failure: WriteFailure,
        reaction: Reaction,
    },
    /// Not tried: the knob is backing off after a failure, or was given up on.
    Deferred,
    /// Not written: the knob already holds the value (a no-op write is no action: not
    /// made, not logged, not counted).
    Unchanged,
    /// Not tried: an earlier write of this plan found its target gone, so the plan was
    /// made for a machine that no longer exists.
    Dropped,
}

impl Outcome {
    /// Whether the action counts in `steerd_actions_total` (done, or would be done).
    pub fn counts_as_action(&self) -> bool {
        matches!(self, Outcome::Applied | Outcome::DryRun)
    }

    /// Whether the writer was asked at all (what the decision log records).
    pub fn was_attempted(&self) -> bool {
        !matches!(
            self,
            Outcome::Deferred | Outcome::Dropped | Outcome::Unchanged
        )
    }
}

/// The decision log's and the journal's word for an outcome.
impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Applied => f.write_str("applied"),
            Outcome::DryRun => f.write_str("dry_run"),
            Outcome::Failed { failure, .. } => write!(f, "failed: {}", failure.message),
            Outcome::Deferred => f.write_str("deferred"),
            Outcome::Unchanged => f.write_str("unchanged"),
            Outcome::Dropped => f.write_str("dropped"),
        }
    }
}

/// One tick's account.
#[derive(Debug, Clone)]
pub struct TickReport {
    pub kind: TickKind,
    /// The policy's plan (empty unless `kind` is `Decided`); every note, new or standing.
    pub plan: Plan,
    /// One per action of `plan`, in order.
    pub outcomes: Vec<Outcome>,
    /// A write found its target gone: the machine must be rediscovered.
    pub rediscover: bool,
    /// Wall time `decide` took, in nanoseconds (0 when it did not run).
    pub decide_ns: u64,
    /// What the checks of earlier queue vector moves found this tick (`move_check`).
    pub moves: Vec<MoveVerdict>,
}

impl TickReport {
    pub(super) fn without_decision(kind: TickKind) -> Self {
        TickReport {
            kind,
            plan: Plan::default(),
            outcomes: Vec::new(),
            rediscover: false,
            decide_ns: 0,
            moves: Vec::new(),
        }
    }

    /// Each action with its outcome.
    pub fn actions(&self) -> impl Iterator<Item = (&Action, &Outcome)> {
        self.plan.actions.iter().zip(&self.outcomes)
    }

    /// Whether a write found a value steerd had written changed by someone else since
    /// (the value is theirs now).
    pub fn found_changed(&self) -> bool {
        self.outcomes.iter().any(|outcome| {
            matches!(
                outcome,
                Outcome::Failed {
                    reaction: Reaction::TheirsNow,
                    ..
                }
            )
        })
    }
}
