//! Where the engine's writes go: the real actuator (files under the root, originals in
//! the state file; the daemon's writer), a dry run (nothing), or the simulated machine. One trait, so that the
//! daemon, `steerd plan` and the simulator run the same tick and differ only here.

use crate::apply::{Actuator, WriteFailure};
use crate::knob::{Knob, KnobValue};

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// The value is in place; this is what reading it back gave.
    Applied(KnobValue),
    /// Nothing was written: a dry run. (Observe-only is the engine's: once it stops
    /// writing, it does not ask the writer.)
    NotWritten,
}

/// A place the engine writes knobs to.
pub trait Writer {
    /// Writes `value` to `knob`, formatting masks `mask_words` 32-bit groups wide (the
    /// width the kernel printed the file in), and says what is there afterwards.
    fn write(
        &mut self,
        knob: &Knob,
        value: &KnobValue,
        mask_words: u32,
    ) -> Result<Written, WriteFailure>;

    /// A knob's current value, when it can be read: after a write found that someone
    /// else changed it, the engine records what is there.
    fn read(&mut self, knob: &Knob) -> Option<KnobValue>;
}

/// Writes nothing: `steerd plan` and the simulator's dry runs. (`steerd run --dry-run` and a
/// daemon that may not write keep the actuator as their writer; the engine stops asking
/// it, `Engine::stop_writing`.)
#[derive(Debug, Clone, Copy, Default)]
pub struct DryRun;

impl Writer for DryRun {
    fn write(&mut self, _: &Knob, _: &KnobValue, _: u32) -> Result<Written, WriteFailure> {
        Ok(Written::NotWritten)
    }

    fn read(&mut self, _: &Knob) -> Option<KnobValue> {
        None
    }
}

/// The real kernel, through the actuator: it writes, reads back and keeps the originals
/// in the state file. Whether to write at all (a dry run, observe-only after a write was
/// not allowed) is the engine's to say, never the actuator's.
impl Writer for Actuator {
    fn write(
        &mut self,
        knob: &Knob,
        value: &KnobValue,
        mask_words: u32,
    ) -> Result<Written, WriteFailure> {
        Actuator::write(self, knob, value, mask_words)
            .map(|read_back| Written::Applied(read_back.after))
    }

    fn read(&mut self, knob: &Knob) -> Option<KnobValue> {
        Actuator::read(self, knob).ok().map(|(_, value)| value)
    }
}
