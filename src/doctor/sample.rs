//! Two readings of the per-CPU counters (`proc/stat`, `proc/net/softnet_stat`, the
//! threaded NAPI threads' `proc/PID/stat`) a window apart, for the checks that judge rates
//! rather than totals since boot.
//!
//! Why two: a drop counter that is high since boot may be a week-old burst; one that
//! rises while we watch is happening now.
//!
//! Why the daemon's pipeline: both readings go through the daemon's own sampler
//! ([`Sampling`], the one `steerd plan` uses, with per-queue counters where the host has
//! them, for `silent_queues`) and the interval is folded into its load model
//! ([`Load::update`], unsmoothed, as `steerd top` does). So a CPU's share here is the
//! daemon's irq+softirq share (with the threaded NAPI time the daemon counts,
//! busy-polling threads left out), and its drops and squeezes are the
//! daemon's: `doctor` cannot call a CPU fine that the daemon calls hot, or the reverse,
//! for want of the same arithmetic.

use std::time::Duration;

use crate::discover::Machine;
use crate::engine::sampling::{Depth, Sampling};
use crate::load::Load;
use crate::model::snapshot::Snapshot;
use crate::root::Root;

/// Why the two readings could not be taken: the file that could not be opened or read,
/// with the kernel layer's own message (checks quote it in their evidence as it is).
#[derive(Debug, thiserror::Error)]
pub enum SamplesError {
    /// `proc/stat` or `proc/net/softnet_stat` cannot be opened.
    #[error(transparent)]
    Open(crate::Error),
    /// A reading failed (a file that went away, or that does not parse).
    #[error(transparent)]
    Read(crate::Error),
}

/// Two readings, and the load model of the interval between them.
#[derive(Debug, Clone)]
pub struct Samples {
    pub before: Snapshot,
    pub after: Snapshot,
    /// Seconds between the readings.
    pub seconds: f64,
    /// The interval folded into the daemon's load model, unsmoothed.
    pub load: Load,
}

impl Samples {
    /// Reads the counters of `machine` under `root`, waits `window`, reads again; the
    /// error names the file that could not be read.
    pub fn take(root: &Root, machine: &Machine, window: Duration) -> Result<Samples, SamplesError> {
        let mut sampling = Sampling::open(root).map_err(SamplesError::Open)?;
        sampling.follow(machine);
        let mut before = Snapshot::default();
        sampling
            .sample(&mut before, Depth::Full, None)
            .map_err(SamplesError::Read)?;
        std::thread::sleep(window);
        let mut after = Snapshot::default();
        sampling
            .sample(&mut after, Depth::Full, None)
            .map_err(SamplesError::Read)?;
        Ok(Samples::between(before, after))
    }

    /// The interval between two readings (`after` taken later: `taken_at_ns`), folded into
    /// a load model as `top` does (one [`Load::update`], no smoothing).
    pub fn between(before: Snapshot, after: Snapshot) -> Samples {
        let mut load = Load::new();
        load.update(&before, &after, 1.0);
        Samples {
            seconds: load.interval_secs,
            before,
            after,
            load,
        }
    }

    /// Per CPU with rates (online in both readings): (cpu, irq+softirq share of its time
    /// with the threaded NAPI time the daemon counts, 0..=1), the daemon's
    /// [`crate::load::CpuLoad::net_share`].
    pub fn shares(&self) -> Vec<(u32, f64)> {
        self.warm_cpus()
            .map(|(cpu, c)| (cpu, c.net_share))
            .collect()
    }

    /// Per CPU with rates: (cpu, dropped, time_squeeze) that happened between the
    /// readings, from the load model's per-second rates over its interval (u32 counters
    /// that wrap, as the daemon reads them).
    pub fn softnet_deltas(&self) -> Vec<(u32, u64, u64)> {
        let count = |per_sec: f64| (per_sec * self.load.interval_secs).round() as u64;
        self.warm_cpus()
            .map(|(cpu, c)| (cpu, count(c.dropped_per_sec), count(c.squeezed_per_sec)))
            .collect()
    }

    fn warm_cpus(&self) -> impl Iterator<Item = (u32, &crate::load::CpuLoad)> {
        self.load
            .cpus
            .iter()
            .enumerate()
            .filter(|(_, c)| c.online && c.warm)
            .map(|(cpu, c)| (cpu as u32, c))
    }
}
