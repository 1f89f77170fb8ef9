//! Two readings of the per-CPU counters (`proc/net/softnet_stat`, `proc/stat`) a window
//! apart, for the checks that judge rates rather than totals since boot.
//!
//! Why two: a drop counter that is high since boot may be a week-old burst; one that
//! rises while we watch is happening now.

use std::time::{Duration, Instant};

use crate::cpuset::CpuSet;
use crate::kernel::procfs::{softnet, stat};
use crate::model::snapshot::{CpuTimes, SoftnetRow};
use crate::root::Root;

/// One reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    pub softnet: Vec<SoftnetRow>,
    pub cpu_times: Vec<CpuTimes>,
}

/// Two readings and the time between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    pub before: Sample,
    pub after: Sample,
    pub seconds: f64,
}

impl Sample {
    /// Reads both files under `root`; the error names the file. `online` is what
    /// discovery read of `sys/devices/system/cpu/online` ([`Topology::online_as_read`]):
    /// on kernels before 5.10 it says whose `softnet_stat` row is whose.
    ///
    /// [`Topology::online_as_read`]: crate::model::topology::Topology::online_as_read
    pub fn read(root: &Root, online: Option<&CpuSet>) -> Result<Sample, String> {
        Ok(Sample {
            softnet: softnet::read_softnet_with(root, online).map_err(|e| e.to_string())?,
            cpu_times: stat::read_stat(root).map_err(|e| e.to_string())?.cpu_times,
        })
    }
}

impl Samples {
    /// Reads, waits `window`, reads again; `online` as for [`Sample::read`].
    pub fn take(root: &Root, online: Option<&CpuSet>, window: Duration) -> Result<Samples, String> {
        let before = Sample::read(root, online)?;
        let start = Instant::now();
        std::thread::sleep(window);
        let after = Sample::read(root, online)?;
        Ok(Samples {
            before,
            after,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Per CPU: (cpu, dropped, time_squeeze) that happened between the readings (u32
    /// counters that wrap), for CPUs in both.
    pub fn softnet_deltas(&self) -> Vec<(u32, u32, u32)> {
        self.after
            .softnet
            .iter()
            .filter_map(|after| {
                let before = self.before.softnet.iter().find(|b| b.cpu == after.cpu)?;
                Some((
                    after.cpu,
                    after.dropped.wrapping_sub(before.dropped),
                    after.time_squeeze.wrapping_sub(before.time_squeeze),
                ))
            })
            .collect()
    }

    /// Per CPU: (cpu, softirq share of its time, 0..=1) between the readings; CPUs whose
    /// time did not advance are left out.
    pub fn softirq_shares(&self) -> Vec<(u32, f64)> {
        self.after
            .cpu_times
            .iter()
            .filter_map(|after| {
                let before = self.before.cpu_times.iter().find(|b| b.cpu == after.cpu)?;
                let total = after.total().checked_sub(before.total())?;
                let softirq = after.softirq.checked_sub(before.softirq)?;
                (total > 0).then(|| (after.cpu, softirq as f64 / total as f64))
            })
            .collect()
    }
}
