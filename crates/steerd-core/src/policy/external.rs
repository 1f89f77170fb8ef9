//! Values someone else changed.
//!
//! steerd remembers the last value it wrote to every target; a current value that differs
//! was written by someone else (an administrator, a script, another daemon). With
//! `on_external_change: respect` the target is frozen for as long as steerd runs and every
//! plan says so; with `override` it is only reported. The kernel itself rewrites an IRQ's
//! affinity when all its CPUs go offline: that is forgotten, not reported.

use std::collections::HashSet;

use super::context::Planner;
use super::plan::{Note, NoteKind};
use crate::config::ExternalChange;
use crate::knob::{Knob, KnobValue};

impl Planner<'_> {
    /// Compares what steerd wrote with what is there now; a difference means someone else
    /// wrote. Respected values are frozen; overridden ones are forgotten (steerd may act).
    pub(super) fn notice_external_changes(&mut self) {
        let mut changed = Vec::new();
        for (target, ours) in &self.state.written {
            match self.placement.holds(target, ours) {
                Some(true) => {}
                // The kernel rewrites an IRQ's affinity whose CPUs all went offline: that
                // is not someone else's choice, just forget ours.
                Some(false)
                    if matches!(target, Knob::IrqAffinity { .. })
                        && ours
                            .cpus()
                            .is_some_and(|cpus| !cpus.intersects(&self.topology.online)) =>
                {
                    changed.push((target.clone(), ours.clone(), ours.clone()));
                }
                Some(false) => {
                    if let Some(now) = self.placement.value(target) {
                        changed.push((target.clone(), ours.clone(), now));
                    }
                }
                // The target is gone (device removed): nothing to compare.
                None => changed.push((target.clone(), ours.clone(), ours.clone())),
            }
        }
        for (target, ours, now) in changed {
            self.state.written.remove(&target);
            if now == ours {
                continue;
            }
            let respect = self.config.on_external_change == ExternalChange::Respect;
            let text = format!(
                "{target}: steerd wrote {ours}, now {now}: changed by someone else; {}",
                if respect {
                    "left alone (on_external_change: respect)"
                } else {
                    "may be changed again (on_external_change: override)"
                }
            );
            let new = self
                .state
                .first_report(NoteKind::ExternalChange, format!("{target}={now}"));
            self.notes.push(Note {
                kind: NoteKind::ExternalChange,
                target: Some(target.clone()),
                text,
                new,
            });
            if respect {
                self.state.external.insert(target, now);
            }
        }
        // Values taken over earlier stay noted while they last.
        let noted: HashSet<&Knob> = self
            .notes
            .iter()
            .filter_map(|n| n.target.as_ref())
            .collect();
        let still: Vec<(Knob, KnobValue)> = self
            .state
            .external
            .keys()
            .filter(|target| !noted.contains(target))
            .filter_map(|target| Some((target.clone(), self.placement.value(target)?)))
            .collect();
        for (target, now) in still {
            self.notes.push(Note {
                kind: NoteKind::ExternalChange,
                target: Some(target.clone()),
                text: format!("{target} = {now}: set by someone else; left alone"),
                new: false,
            });
        }
    }
}
