//! What the bed reads from the host kernel while traffic runs: per-CPU time from
//! `/proc/stat` (the irq+softirq share) and softnet's `processed` and `dropped` per CPU.
//! Both files are global, so the bed runs alone (nothing else of the project at once).

use steerd_kernel::Root;
use steerd_kernel::kernel::procfs::{
    softnet::read_softnet,
    stat::{Stat, read_stat},
};

use crate::lab::{Result, io};

/// `/proc/stat` through steerd's own reader.
fn stat() -> Result<Stat> {
    read_stat(&Root::new("/"))
        .map_err(|e| io("reading /proc/stat")(std::io::Error::other(e.to_string())))
}

/// Per CPU: (irq+softirq jiffies, all jiffies).
pub fn cpu_times() -> Result<Vec<(u64, u64)>> {
    Ok(by_cpu(
        stat()?
            .cpu_times
            .iter()
            .map(|t| (t.cpu, (t.irq + t.softirq, t.total()))),
    ))
}

/// The whole machine's busy share (neither idle nor iowait) over `over`.
pub fn busy_share(over: std::time::Duration) -> Result<f64> {
    let read = || -> Result<(u64, u64)> {
        Ok(stat()?.cpu_times.iter().fold((0, 0), |(busy, all), t| {
            let total = t.total();
            (busy + total.saturating_sub(t.idle + t.iowait), all + total)
        }))
    };
    let (busy0, all0) = read()?;
    std::thread::sleep(over);
    let (busy1, all1) = read()?;
    let all = all1.saturating_sub(all0);
    Ok(if all == 0 {
        0.0
    } else {
        busy1.saturating_sub(busy0) as f64 / all as f64
    })
}

/// Waits, up to `at_most`, for the machine to be [`QUIET`]: a run must not start while the
/// kernel still tears down the previous run's namespaces (3,000 rules and a veth pair, in
/// a kworker) or anything else of the bed's still runs. Returns how long it waited.
pub fn wait_for_quiet(at_most: std::time::Duration) -> Result<std::time::Duration> {
    let started = std::time::Instant::now();
    while started.elapsed() < at_most {
        if busy_share(std::time::Duration::from_millis(500))? < QUIET {
            break;
        }
    }
    Ok(started.elapsed())
}

/// The busy share under which the machine counts as quiet.
pub const QUIET: f64 = 0.15;

/// Per CPU: softnet (`processed`, `dropped`), from steerd's own `softnet_stat` reader.
pub fn softnet() -> Result<Vec<(u64, u64)>> {
    let rows = read_softnet(&Root::new("/"))
        .map_err(|e| io("reading /proc/net/softnet_stat")(std::io::Error::other(e.to_string())))?;
    Ok(by_cpu(rows.iter().map(|r| {
        (r.cpu, (u64::from(r.processed), u64::from(r.dropped)))
    })))
}

/// A process's utime + stime, USER_HZ ticks, from steerd's own `/proc/PID/stat` reader;
/// `None` once it is gone.
pub fn process_ticks(pid: u32) -> Option<u64> {
    steerd_kernel::kernel::napi_threads::read_time(&Root::new("/"), pid).map(|(ticks, _)| ticks)
}

/// A table indexed by CPU id (CPUs without a row read 0).
fn by_cpu(rows: impl Iterator<Item = (u32, (u64, u64))>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (cpu, values) in rows {
        let cpu = cpu as usize;
        if out.len() <= cpu {
            out.resize(cpu + 1, (0, 0));
        }
        out[cpu] = values;
    }
    out
}

/// Per CPU, the irq+softirq share of its time between two readings.
pub fn si_shares(before: &[(u64, u64)], after: &[(u64, u64)]) -> Vec<f64> {
    after
        .iter()
        .zip(before)
        .map(|(a, b)| {
            let all = a.1.saturating_sub(b.1);
            if all == 0 {
                0.0
            } else {
                a.0.saturating_sub(b.0) as f64 / all as f64
            }
        })
        .collect()
}

/// Per CPU, the counters' growth between two readings (32-bit counters wrap).
pub fn softnet_delta(before: &[(u64, u64)], after: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let wrap = |a: u64, b: u64| a.wrapping_sub(b) & 0xffff_ffff;
    after
        .iter()
        .zip(before)
        .map(|(a, b)| (wrap(a.0, b.0), wrap(a.1, b.1)))
        .collect()
}

/// The `q`-quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}
