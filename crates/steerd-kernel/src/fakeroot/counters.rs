//! The counters of a fake tree: `proc/stat`, `proc/net/softnet_stat` and
//! `proc/interrupts`, written from a [`FakeCounters`] and rewritten between ticks, so a
//! test can make load appear where it wants it. Apart because they are the only files
//! that change every tick.

use std::fmt::Write as _;
use std::io;

use super::{FakeTree, replace};

/// Counter values for one moment, to write into `proc/`.
#[derive(Debug, Clone, Default)]
pub struct FakeCounters {
    /// Per CPU: softnet `processed`, `dropped`, `time_squeeze`.
    pub softnet: Vec<(u32, u32, u32)>,
    /// Per CPU: `proc/stat` (user, system, idle, irq, softirq) ticks.
    pub cpu_ticks: Vec<(u64, u64, u64, u64, u64)>,
    /// Per IRQ number: per-CPU interrupt counts. IRQs not listed count zero.
    pub irq_counts: std::collections::BTreeMap<u32, Vec<u64>>,
}

impl FakeTree {
    /// Rewrites `proc/stat`, `proc/net/softnet_stat` and `proc/interrupts` from `counters`
    /// (missing entries count zero). Files are replaced atomically, as a reader of the
    /// real kernel files never sees half a file.
    pub fn write_counters(&self, counters: &FakeCounters) -> io::Result<()> {
        let n = self.machine.cpu_count();
        let irqs = self.all_irqs();
        let max_irq = irqs.last().copied().unwrap_or(0);

        let mut stat = String::new();
        let mut cpu_lines = String::new();
        let mut sum = [0u64; 5];
        for cpu in 0..n {
            let t = counters
                .cpu_ticks
                .get(cpu as usize)
                .copied()
                .unwrap_or_default();
            for (s, v) in sum.iter_mut().zip([t.0, t.1, t.2, t.3, t.4]) {
                *s += v;
            }
            let _ = writeln!(
                cpu_lines,
                "cpu{cpu} {} 0 {} {} 0 {} {} 0 0 0",
                t.0, t.1, t.2, t.3, t.4
            );
        }
        let _ = writeln!(
            stat,
            "cpu  {} 0 {} {} 0 {} {} 0 0 0",
            sum[0], sum[1], sum[2], sum[3], sum[4]
        );
        stat.push_str(&cpu_lines);
        let totals: Vec<u64> = (0..=max_irq)
            .map(|irq| counters.irq_counts.get(&irq).map_or(0, |c| c.iter().sum()))
            .collect();
        let _ = write!(stat, "intr {}", totals.iter().sum::<u64>());
        for total in &totals {
            let _ = write!(stat, " {total}");
        }
        stat.push_str(
            "\nctxt 0\nbtime 1700000000\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n",
        );
        replace(&self.root, "proc/stat", &stat)?;

        let mut softnet = String::new();
        for cpu in 0..n {
            let (processed, dropped, squeeze) = counters
                .softnet
                .get(cpu as usize)
                .copied()
                .unwrap_or_default();
            let _ = writeln!(
                softnet,
                "{processed:08x} {dropped:08x} {squeeze:08x} 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 {cpu:08x} 00000000 00000000"
            );
        }
        replace(&self.root, "proc/net/softnet_stat", &softnet)?;

        let mut interrupts = String::from("     ");
        for cpu in 0..n {
            let _ = write!(interrupts, "      CPU{cpu:<4}");
        }
        interrupts.push('\n');
        for irq in irqs {
            let _ = write!(interrupts, "{irq:>4}:");
            let per_cpu = counters.irq_counts.get(&irq);
            for cpu in 0..n as usize {
                let count = per_cpu.and_then(|c| c.get(cpu)).copied().unwrap_or(0);
                let _ = write!(interrupts, " {count:>10}");
            }
            let _ = writeln!(
                interrupts,
                "  {}  {}-edge      {}",
                self.chip(irq),
                irq,
                self.irq_name(irq)
            );
        }
        interrupts.push_str("NMI:");
        for _ in 0..n {
            interrupts.push_str("          0");
        }
        interrupts.push_str("   Non-maskable interrupts\nERR:          0\n");
        replace(&self.root, "proc/interrupts", &interrupts)
    }
}
