//! When a failed write may be tried again: after an exponential backoff for one that may
//! succeed later (EBUSY, EINVAL while a CPU goes offline, a value the kernel did not take).
//! A value the kernel refuses for good (a managed IRQ) is never tried again; that is the
//! policy's record of failures (`PolicyState::failed`), which the engine consults beside
//! this one ([`super::Engine::may_try`]), kept in one place so the two cannot disagree.
//!
//! It lives in the engine, not in a writer, so that the real actuator, a dry run and the
//! simulated machine all retry the same way: the simulator once treated every failed
//! write as permanent, and would have hidden a retry storm.

use std::collections::BTreeMap;

use crate::knob::Knob;

/// The first wait after a failure; it doubles with each failure in a row.
pub const BACKOFF_BASE_NS: u64 = 1_000_000_000;
/// The longest wait between two tries.
pub const BACKOFF_MAX_NS: u64 = 300 * 1_000_000_000;

#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    next_try_ns: u64,
}

/// Knobs backing off after a failure.
#[derive(Debug, Clone, Default)]
pub struct Retries {
    backoff: BTreeMap<Knob, Backoff>,
}

impl Retries {
    /// Whether a write to `knob` is past its backoff at `now_ns`.
    pub fn may_try(&self, knob: &Knob, now_ns: u64) -> bool {
        self.backoff
            .get(knob)
            .is_none_or(|b| now_ns >= b.next_try_ns)
    }

    /// A write succeeded: its backoff starts over.
    pub fn succeeded(&mut self, knob: &Knob) {
        self.backoff.remove(knob);
    }

    /// A write failed in a way that may pass: wait 1, 2, 4 ... s (at most 5 min).
    pub fn back_off(&mut self, knob: &Knob, now_ns: u64) {
        let entry = self.backoff.entry(knob.clone()).or_insert(Backoff {
            failures: 0,
            next_try_ns: 0,
        });
        entry.failures = entry.failures.saturating_add(1);
        let delay = BACKOFF_BASE_NS
            .saturating_mul(1 << entry.failures.min(16))
            .min(BACKOFF_MAX_NS);
        entry.next_try_ns = now_ns.saturating_add(delay);
    }

    /// Keeps what is known of the knobs `exists` says are still there and forgets the rest.
    pub fn retain(&mut self, exists: impl Fn(&Knob) -> bool) {
        self.backoff.retain(|knob, _| exists(knob));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_backs_off_doubling_up_to_the_cap() {
        let knob = Knob::IrqAffinity { irq: 31 };
        let mut retries = Retries::default();
        assert!(retries.may_try(&knob, 0));
        retries.back_off(&knob, 0);
        assert!(!retries.may_try(&knob, 1));
        assert!(retries.may_try(&knob, 2 * BACKOFF_BASE_NS));
        retries.back_off(&knob, 0);
        assert!(!retries.may_try(&knob, 2 * BACKOFF_BASE_NS));
        assert!(retries.may_try(&knob, 4 * BACKOFF_BASE_NS));
        for _ in 0..40 {
            retries.back_off(&knob, 0);
        }
        assert!(retries.may_try(&knob, BACKOFF_MAX_NS));
        retries.succeeded(&knob);
        assert!(retries.may_try(&knob, 0));
    }
}
