//! What the bed reads from the host kernel while traffic runs: per-CPU time from
//! `/proc/stat` (the irq+softirq share) and softnet's `processed` and `dropped` per CPU.
//! Both files are global, so the bed runs alone (nothing else of the project at once).

use crate::lab::{Result, io};

/// Per CPU: (irq+softirq jiffies, all jiffies).
pub fn cpu_times() -> Result<Vec<(u64, u64)>> {
    let text = std::fs::read_to_string("/proc/stat").map_err(io("reading /proc/stat"))?;
    Ok(parse_cpu_times(&text))
}

pub fn parse_cpu_times(text: &str) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        // "cpuN ..." lines; the "cpu  ..." total line has a space where N would be.
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let mut fields = rest.split(' ').filter(|f| !f.is_empty());
        let Some(Ok(cpu)) = (!rest.starts_with(' '))
            .then(|| fields.next().map(str::parse::<usize>))
            .flatten()
        else {
            continue;
        };
        let values: Vec<u64> = fields.filter_map(|f| f.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let all: u64 = values.iter().take(8).sum();
        let si = values.get(5).copied().unwrap_or(0) + values.get(6).copied().unwrap_or(0);
        if out.len() <= cpu {
            out.resize(cpu + 1, (0, 0));
        }
        out[cpu] = (si, all);
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

/// Per CPU: softnet (`processed`, `dropped`).
pub fn softnet() -> Result<Vec<(u64, u64)>> {
    let text = std::fs::read_to_string("/proc/net/softnet_stat")
        .map_err(io("reading /proc/net/softnet_stat"))?;
    Ok(parse_softnet(&text))
}

pub fn parse_softnet(text: &str) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (row, line) in text.lines().enumerate() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let hex = |i: usize| cols.get(i).and_then(|c| u64::from_str_radix(c, 16).ok());
        let cpu = hex(12).map_or(row, |c| c as usize);
        if out.len() <= cpu {
            out.resize(cpu + 1, (0, 0));
        }
        out[cpu] = (hex(0).unwrap_or(0), hex(1).unwrap_or(0));
    }
    out
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
