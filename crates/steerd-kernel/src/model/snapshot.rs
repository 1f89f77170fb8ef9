//! One tick's counters, as read from the per-tick files.
//!
//! Counters are raw kernel values: cumulative, and for softnet u32 that wrap. Rates are
//! taken between two snapshots (see the load model), where wrap is handled.

use serde::Serialize;

/// Per-tick counters for the whole machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC, nanoseconds, when the sample was taken.
    pub taken_at_ns: u64,
    /// `proc/stat` per-CPU time lines, ascending by CPU id (online CPUs only).
    pub cpu_times: Vec<CpuTimes>,
    /// `proc/net/softnet_stat`, one row per online CPU, ascending by CPU id.
    pub softnet: Vec<SoftnetRow>,
    /// The `intr` line of `proc/stat`: total count per IRQ number (index = IRQ).
    pub irq_totals: Vec<u64>,
    /// Per-queue packet counters, where the driver exposes them.
    pub queues: Vec<QueueCounters>,
    /// When `cpu_times` and `irq_totals` were read, if not at `taken_at_ns`: the daemon
    /// re-reads `proc/stat` only every few ticks while idle and carries the last reading
    /// over (see [`Snapshot::stat_taken_at_ns`]).
    pub stat_taken_at_ns: Option<u64>,
    /// CPU time of threaded NAPI polling threads, read with `proc/stat` (and carried over
    /// with it): their receive work is thread time, not softirq time.
    pub napi_threads: Vec<ThreadTime>,
}

/// One thread's CPU time so far and where it last ran (`proc/PID/stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ThreadTime {
    pub pid: u32,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// utime + stime, in USER_HZ ticks (as `proc/stat`).
    pub ticks: u64,
}

impl Snapshot {
    /// When `cpu_times` and `irq_totals` were read.
    pub fn stat_taken_at_ns(&self) -> u64 {
        self.stat_taken_at_ns.unwrap_or(self.taken_at_ns)
    }

    /// Carries `previous`'s `proc/stat` part over into this snapshot (for a tick that
    /// read `softnet_stat` only). Reuses this snapshot's vectors: no allocation.
    pub fn carry_stat_from(&mut self, previous: &Snapshot) {
        self.cpu_times.clone_from(&previous.cpu_times);
        self.irq_totals.clone_from(&previous.irq_totals);
        self.napi_threads.clone_from(&previous.napi_threads);
        self.stat_taken_at_ns = Some(previous.stat_taken_at_ns());
    }
}

/// One `cpuN` line of `proc/stat`, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    pub cpu: u32,
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// All time the CPU accounted (guest time is already inside user/nice).
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
}

/// One row of `proc/net/softnet_stat`. Fields absent on older kernels are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SoftnetRow {
    /// The CPU id: column 12 when present, else the row number.
    pub cpu: u32,
    pub processed: u32,
    pub dropped: u32,
    pub time_squeeze: u32,
    pub received_rps: Option<u32>,
    pub flow_limit_count: Option<u32>,
    pub backlog_len: Option<u32>,
}

/// Direction of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueDirection {
    Rx,
    Tx,
}

/// Cumulative counters of one device queue (64-bit in both sources).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueCounters {
    pub device: String,
    pub direction: QueueDirection,
    pub queue: u32,
    pub packets: u64,
    pub bytes: Option<u64>,
}
