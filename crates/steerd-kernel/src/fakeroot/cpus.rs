//! The CPU files of a fake machine: `sys/devices/system/cpu` (possible, present, online,
//! isolated, `nohz_full`, each CPU's topology and last-level cache), the NUMA nodes'
//! cpulists and `proc/softirqs`, written once by [`FakeMachine::write`]. Apart from the
//! NICs because they depend only on the machine's cores, threads and nodes.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use super::{FakeMachine, write};
use crate::cpuset::CpuSet;

impl FakeMachine {
    pub(super) fn write_cpus(&self, dir: &Path) -> io::Result<()> {
        let n = self.cpu_count();
        let all = format!("0-{}\n", n - 1);
        let cpu_dir = "sys/devices/system/cpu";
        for file in ["possible", "present", "online"] {
            write(dir, &format!("{cpu_dir}/{file}"), &all)?;
        }
        write(
            dir,
            &format!("{cpu_dir}/isolated"),
            &format!("{}\n", self.isolated.to_list()),
        )?;
        write(
            dir,
            &format!("{cpu_dir}/nohz_full"),
            &format!("{}\n", self.nohz_full.to_list()),
        )?;
        let cores_per_package = self.cores.div_ceil(self.nodes.max(1));
        let node_lists: Vec<String> = (0..self.nodes.max(1))
            .map(|node| self.node_cpus(node).to_list())
            .collect();
        for cpu in 0..n {
            let core = self.core_of(cpu);
            let siblings: CpuSet = (0..self.threads_per_core)
                .map(|t| core + t * self.cores)
                .collect();
            let llc = &node_lists[self.node_of(cpu) as usize];
            let base = format!("{cpu_dir}/cpu{cpu}");
            write(
                dir,
                &format!("{base}/topology/thread_siblings_list"),
                &format!("{}\n", siblings.to_list()),
            )?;
            write(
                dir,
                &format!("{base}/topology/core_id"),
                &format!("{}\n", core % cores_per_package),
            )?;
            write(
                dir,
                &format!("{base}/topology/physical_package_id"),
                &format!("{}\n", self.node_of(cpu)),
            )?;
            write(dir, &format!("{base}/cache/index3/level"), "3\n")?;
            write(
                dir,
                &format!("{base}/cache/index3/shared_cpu_list"),
                &format!("{llc}\n"),
            )?;
            if cpu > 0 {
                write(dir, &format!("{base}/online"), "1\n")?;
            }
        }
        for (node, list) in node_lists.iter().enumerate() {
            write(
                dir,
                &format!("sys/devices/system/node/node{node}/cpulist"),
                &format!("{list}\n"),
            )?;
        }
        Ok(())
    }

    pub(super) fn softirqs_text(&self) -> String {
        let n = self.cpu_count();
        let mut out = String::from("      ");
        for cpu in 0..n {
            let _ = write!(out, " {:>10}", format!("CPU{cpu}"));
        }
        out.push('\n');
        for row in [
            "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
            "RCU",
        ] {
            let _ = write!(out, "{:>12}:", row);
            for _ in 0..n {
                out.push_str("          0");
            }
            out.push('\n');
        }
        out
    }
}
