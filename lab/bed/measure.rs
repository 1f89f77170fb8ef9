//! What the bed reads from the host kernel while traffic runs: per-CPU time from
//! `/proc/stat` (the irq+softirq share) and softnet's `processed` and `dropped` per CPU.
//! Both files are global, so the bed runs alone (nothing else of the project at once).

use crate::lab::{Result, io};

/// Per CPU: (irq+softirq jiffies, all jiffies).
pub fn cpu_times() -> Result<Vec<(u64, u64)>> {
    let text = std::fs::read_to_string("/proc/stat").map_err(io("reading /proc/stat"))?;
    Ok(parse_cpu_times(&text))
}

fn parse_cpu_times(text: &str) -> Vec<(u64, u64)> {
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

fn parse_softnet(text: &str) -> Vec<(u64, u64)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lines_give_irq_plus_softirq_and_the_total() {
        let text = "cpu  900 2 3 4 5 6 7 8 0 0\ncpu0 10 0 10 60 0 5 15 0 0 0\ncpu1 1 1 1 1 1 1 1 1 0 0\nintr 5\n";
        assert_eq!(parse_cpu_times(text), vec![(20, 100), (2, 8)]);
        let shares = si_shares(&[(0, 0), (0, 0)], &[(20, 100), (2, 8)]);
        assert_eq!(shares, vec![0.2, 0.25]);
    }

    #[test]
    fn softnet_rows_by_their_cpu_column() {
        let text = "0000000a 00000001 0 0 0 0 0 0 0 0 0 0 00000000 0 0\n\
                    00000014 00000000 0 0 0 0 0 0 0 0 0 0 00000002 0 0\n";
        assert_eq!(parse_softnet(text), vec![(10, 1), (0, 0), (20, 0)]);
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), Some(2.0));
        assert_eq!(quantile(&v, 0.99), Some(4.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
