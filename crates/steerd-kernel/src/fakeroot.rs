//! Kernel-shaped fake trees: a generated `proc/` and `sys/` for a machine of any size.
//!
//! Tests, benchmarks and bug reproductions run the real binary with `--root DIR` on such a
//! tree. The layout follows the kernel's: `sys/class/net/<if>` is a symlink into
//! `sys/devices/pci…/<bdf>/net/<if>`, whose `device` link points back at the PCI function
//! with its `numa_node`, `local_cpulist` and `msi_irqs/`; `proc/irq/<n>/` has the affinity
//! files (read-only for managed IRQs, as on ≥6.12 kernels); hex masks are printed in the
//! kernel's width. Counters (`proc/stat`, `proc/net/softnet_stat`, `proc/interrupts`) can
//! be rewritten between ticks with [`FakeTree::write_counters`].

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use crate::cpuset::CpuSet;

/// The shape of a machine to generate.
#[derive(Debug, Clone)]
pub struct FakeMachine {
    /// Physical cores.
    pub cores: u32,
    /// Hardware threads per core (1 = no SMT). Siblings are numbered the way x86 firmware
    /// usually does: core `c` has CPUs `c`, `c + cores`, …
    pub threads_per_core: u32,
    /// NUMA nodes; cores are split into equal contiguous blocks.
    pub nodes: u32,
    pub isolated: CpuSet,
    pub nohz_full: CpuSet,
    pub nics: Vec<FakeNic>,
    /// IRQs that belong to no NIC (a timer, a disk) — the first is managed.
    pub other_irqs: u32,
    /// `proc/sys/net/core/rps_sock_flow_entries`; `None` leaves the file out.
    pub rps_sock_flow_entries: Option<u32>,
}

/// A multi-queue NIC with one combined (`TxRx`) vector per queue plus one misc vector.
#[derive(Debug, Clone)]
pub struct FakeNic {
    pub name: String,
    pub driver: String,
    /// NUMA node of its PCI function; `None` prints `-1`.
    pub node: Option<u32>,
    pub queues: u32,
}

/// Where things ended up in a written tree.
#[derive(Debug, Clone)]
pub struct FakeTree {
    pub root: PathBuf,
    pub machine: FakeMachine,
    /// Per NIC (same order as `machine.nics`): the IRQ of each queue vector.
    pub queue_irqs: Vec<Vec<u32>>,
    /// Per NIC: its misc (non-queue) vector.
    pub misc_irqs: Vec<u32>,
    /// IRQs of no NIC; the first one is managed.
    pub other_irqs: Vec<u32>,
}

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

const FIRST_IRQ: u32 = 24;

impl FakeMachine {
    /// A machine with `cores` cores, no SMT, one node, no NICs.
    pub fn new(cores: u32) -> Self {
        FakeMachine {
            cores,
            threads_per_core: 1,
            nodes: 1,
            isolated: CpuSet::new(),
            nohz_full: CpuSet::new(),
            nics: Vec::new(),
            other_irqs: 2,
            rps_sock_flow_entries: Some(0),
        }
    }

    /// A machine with `cores` cores and one NIC `eth0` of `queues` queues on no node, the
    /// shape most tests start from.
    pub fn with_eth0(cores: u32, driver: &str, queues: u32) -> Self {
        let mut machine = FakeMachine::new(cores);
        machine.nics.push(FakeNic {
            name: "eth0".into(),
            driver: driver.into(),
            node: None,
            queues,
        });
        machine
    }

    /// The 1152-CPU machine of the issues: 576 cores × 2 threads on 8 nodes, 4 NICs × 94
    /// queues (one per node 0–3), plus 700 IRQs of no NIC, so well over 1000 IRQs.
    pub fn large() -> Self {
        let mut machine = FakeMachine::new(576);
        machine.threads_per_core = 2;
        machine.nodes = 8;
        machine.other_irqs = 700;
        machine.nics = (0..4)
            .map(|i| FakeNic {
                name: format!("ens{}f0", i + 1),
                driver: "ice".into(),
                node: Some(i),
                queues: 94,
            })
            .collect();
        machine
    }

    /// Number of logical CPUs.
    pub fn cpu_count(&self) -> u32 {
        self.cores * self.threads_per_core
    }

    /// The core a CPU belongs to, and the NUMA node of that core.
    pub fn core_of(&self, cpu: u32) -> u32 {
        cpu % self.cores
    }

    pub fn node_of(&self, cpu: u32) -> u32 {
        let cores_per_node = self.cores.div_ceil(self.nodes.max(1));
        self.core_of(cpu) / cores_per_node.max(1)
    }

    /// CPUs of a NUMA node.
    pub fn node_cpus(&self, node: u32) -> CpuSet {
        (0..self.cpu_count())
            .filter(|&cpu| self.node_of(cpu) == node)
            .collect()
    }

    /// Writes the tree under `dir` (which should be empty).
    pub fn write(&self, dir: &Path) -> io::Result<FakeTree> {
        let mut tree = FakeTree {
            root: dir.to_path_buf(),
            machine: self.clone(),
            queue_irqs: Vec::new(),
            misc_irqs: Vec::new(),
            other_irqs: Vec::new(),
        };
        let mut next_irq = FIRST_IRQ;
        for _ in &self.nics {
            tree.misc_irqs.push(next_irq);
            next_irq += 1;
        }
        for nic in &self.nics {
            tree.queue_irqs
                .push((next_irq..next_irq + nic.queues).collect());
            next_irq += nic.queues;
        }
        tree.other_irqs = (next_irq..next_irq + self.other_irqs).collect();
        self.write_cpus(dir)?;
        self.write_nics(dir, &tree)?;
        tree.write_irq_dirs()?;
        write(dir, "proc/softirqs", &self.softirqs_text())?;
        if let Some(entries) = self.rps_sock_flow_entries {
            write(
                dir,
                "proc/sys/net/core/rps_sock_flow_entries",
                &format!("{entries}\n"),
            )?;
        }
        tree.write_counters(&FakeCounters::default())?;
        Ok(tree)
    }

    fn write_cpus(&self, dir: &Path) -> io::Result<()> {
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

    fn write_nics(&self, dir: &Path, tree: &FakeTree) -> io::Result<()> {
        let nr_cpu_ids = self.cpu_count();
        let empty_mask = CpuSet::new()
            .to_mask(nr_cpu_ids)
            .map_err(io::Error::other)?;
        for (index, nic) in self.nics.iter().enumerate() {
            let bdf = format!("0000:{:02x}:00.0", index + 1);
            let pci = format!("sys/devices/pci0000:00/{bdf}");
            let local = match nic.node {
                Some(node) => self.node_cpus(node),
                None => CpuSet::first_n(nr_cpu_ids),
            };
            let node_text = nic.node.map_or("-1".to_string(), |n| n.to_string());
            write(dir, &format!("{pci}/numa_node"), &format!("{node_text}\n"))?;
            write(
                dir,
                &format!("{pci}/local_cpulist"),
                &format!("{}\n", local.to_list()),
            )?;
            write(
                dir,
                &format!("{pci}/local_cpus"),
                &format!("{}\n", local.to_mask(nr_cpu_ids).map_err(io::Error::other)?),
            )?;
            let irqs = std::iter::once(tree.misc_irqs[index]).chain(tree.queue_irqs[index].clone());
            for irq in irqs {
                write(dir, &format!("{pci}/msi_irqs/{irq}"), "msix\n")?;
            }
            let driver_dir = format!("sys/bus/pci/drivers/{}", nic.driver);
            fs::create_dir_all(dir.join(&driver_dir))?;
            link(
                dir,
                &format!("../../../bus/pci/drivers/{}", nic.driver),
                &format!("{pci}/driver"),
            )?;
            let net = format!("{pci}/net/{}", nic.name);
            write(dir, &format!("{net}/ifindex"), &format!("{}\n", index + 2))?;
            write(dir, &format!("{net}/operstate"), "up\n")?;
            write(
                dir,
                &format!("{net}/uevent"),
                &format!("INTERFACE={}\nIFINDEX={}\n", nic.name, index + 2),
            )?;
            link(dir, &format!("../../../{bdf}"), &format!("{net}/device"))?;
            // NAPI settings as a fresh device has them: not threaded, no deferral.
            write(dir, &format!("{net}/threaded"), "0\n")?;
            write(dir, &format!("{net}/napi_defer_hard_irqs"), "0\n")?;
            write(dir, &format!("{net}/gro_flush_timeout"), "0\n")?;
            for q in 0..nic.queues {
                write(
                    dir,
                    &format!("{net}/queues/rx-{q}/rps_cpus"),
                    &format!("{empty_mask}\n"),
                )?;
                write(dir, &format!("{net}/queues/rx-{q}/rps_flow_cnt"), "0\n")?;
                write(
                    dir,
                    &format!("{net}/queues/tx-{q}/xps_cpus"),
                    &format!("{empty_mask}\n"),
                )?;
            }
            link(
                dir,
                &format!("../../devices/pci0000:00/{bdf}/net/{}", nic.name),
                &format!("sys/class/net/{}", nic.name),
            )?;
        }
        let lo = "sys/devices/virtual/net/lo";
        write(dir, &format!("{lo}/ifindex"), "1\n")?;
        write(dir, &format!("{lo}/operstate"), "unknown\n")?;
        write(
            dir,
            &format!("{lo}/queues/rx-0/rps_cpus"),
            &format!("{empty_mask}\n"),
        )?;
        write(dir, &format!("{lo}/queues/rx-0/rps_flow_cnt"), "0\n")?;
        link(dir, "../../devices/virtual/net/lo", "sys/class/net/lo")?;
        Ok(())
    }

    fn softirqs_text(&self) -> String {
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

impl FakeTree {
    /// All IRQ numbers in the tree, ascending.
    pub fn all_irqs(&self) -> Vec<u32> {
        let mut irqs: Vec<u32> = self
            .misc_irqs
            .iter()
            .chain(self.queue_irqs.iter().flatten())
            .chain(&self.other_irqs)
            .copied()
            .collect();
        irqs.sort_unstable();
        irqs
    }

    /// The action name of an IRQ, as `proc/interrupts` prints it.
    pub fn irq_name(&self, irq: u32) -> String {
        for (index, nic) in self.machine.nics.iter().enumerate() {
            if self.misc_irqs[index] == irq {
                return nic.name.clone();
            }
            if let Some(q) = self.queue_irqs[index].iter().position(|&i| i == irq) {
                return format!("{}-TxRx-{q}", nic.name);
            }
        }
        match self.other_irqs.iter().position(|&i| i == irq) {
            Some(0) => "nvme0q0".to_string(),
            Some(k) => format!("other{k}"),
            None => format!("irq{irq}"),
        }
    }

    fn chip(&self, irq: u32) -> String {
        for (index, _) in self.machine.nics.iter().enumerate() {
            if self.misc_irqs[index] == irq || self.queue_irqs[index].contains(&irq) {
                return format!("IR-PCI-MSIX-0000:{:02x}:00.0", index + 1);
            }
        }
        "IR-PCI-MSI".to_string()
    }

    fn write_irq_dirs(&self) -> io::Result<()> {
        let n = self.machine.cpu_count();
        let all = CpuSet::first_n(n);
        let full_mask = all.to_mask(n).map_err(io::Error::other)?;
        let empty_mask = CpuSet::new().to_mask(n).map_err(io::Error::other)?;
        write(
            &self.root,
            "proc/irq/default_smp_affinity",
            &format!("{full_mask}\n"),
        )?;
        for irq in self.all_irqs() {
            let base = format!("proc/irq/{irq}");
            let managed = self.other_irqs.first() == Some(&irq);
            let files = [
                ("smp_affinity", format!("{full_mask}\n")),
                ("smp_affinity_list", format!("0-{}\n", n - 1)),
                (
                    "effective_affinity",
                    format!(
                        "{}\n",
                        CpuSet::first_n(1).to_mask(n).map_err(io::Error::other)?
                    ),
                ),
                ("effective_affinity_list", "0\n".to_string()),
                ("affinity_hint", format!("{empty_mask}\n")),
                ("node", "0\n".to_string()),
            ];
            for (name, text) in files {
                let rel = format!("{base}/{name}");
                write(&self.root, &rel, &text)?;
                if managed && name.starts_with("smp_affinity") {
                    fs::set_permissions(self.root.join(&rel), fs::Permissions::from_mode(0o444))?;
                }
            }
        }
        Ok(())
    }

    /// A channel-count change (`ethtool -L <nic> combined <active>`) as a driver such as
    /// virtio_net makes it: the NIC keeps all its vectors, `queues/rx-N` and `tx-N` at or
    /// past `active` are removed, missing ones below it are added with RPS off (mask 0,
    /// flow count 0), and the driver writes its own default affinity (`driver_default`
    /// of the queue index) to the vector of every active queue.
    pub fn set_channels(
        &self,
        nic: usize,
        active: u32,
        driver_default: &dyn Fn(u32) -> CpuSet,
    ) -> io::Result<()> {
        let n = self.machine.cpu_count();
        let name = &self.machine.nics[nic].name;
        let queues = fs::canonicalize(self.root.join("sys/class/net").join(name))?.join("queues");
        let empty_mask = CpuSet::new().to_mask(n).map_err(io::Error::other)?;
        for q in 0..self.machine.nics[nic].queues {
            let (rx, tx) = (
                queues.join(format!("rx-{q}")),
                queues.join(format!("tx-{q}")),
            );
            if q >= active {
                for dir in [rx, tx] {
                    if dir.exists() {
                        fs::remove_dir_all(dir)?;
                    }
                }
                continue;
            }
            if !rx.exists() {
                fs::create_dir_all(&rx)?;
                fs::write(rx.join("rps_cpus"), format!("{empty_mask}\n"))?;
                fs::write(rx.join("rps_flow_cnt"), "0\n")?;
            }
            if !tx.exists() {
                fs::create_dir_all(&tx)?;
                fs::write(tx.join("xps_cpus"), format!("{empty_mask}\n"))?;
            }
            let cpus = driver_default(q);
            let base = self
                .root
                .join(format!("proc/irq/{}", self.queue_irqs[nic][q as usize]));
            // Only the list form, the file steerd reads and writes: a fake tree does not keep
            // `smp_affinity` in step (as for writes steerd makes).
            fs::write(
                base.join("smp_affinity_list"),
                format!("{}\n", cpus.to_list()),
            )?;
        }
        Ok(())
    }

    /// Turns threaded NAPI on for a NIC, as `echo 1 > /sys/class/net/DEV/threaded` does:
    /// one `napi/DEV-ID` kernel thread per receive queue (ids from 8193, in queue order, as
    /// virtio_net registers them) and one transmit-only `napi/DEV-0`, each a
    /// `proc/PID/{comm,status}` allowed on every CPU. Pids are `first_pid` on; returns the
    /// receive threads' pids by queue.
    pub fn make_threaded(&self, nic: usize, first_pid: u32) -> io::Result<Vec<u32>> {
        let name = &self.machine.nics[nic].name;
        write(
            &self.root,
            &format!("sys/class/net/{name}/threaded"),
            "1
",
        )?;
        let all = CpuSet::first_n(self.machine.cpu_count()).to_list();
        let queues = self.machine.nics[nic].queues;
        let mut rx = Vec::new();
        for n in 0..=queues {
            let pid = first_pid + n;
            let id = if n < queues { 8193 + n } else { 0 };
            let comm = format!("napi/{name}-{id}");
            write(
                &self.root,
                &format!("proc/{pid}/comm"),
                &format!("{comm}\n"),
            )?;
            write(
                &self.root,
                &format!("proc/{pid}/status"),
                &format!(
                    "Name:\t{comm}\nUmask:\t0000\nState:\tS (sleeping)\nTgid:\t{pid}\n\
                     Pid:\t{pid}\nPPid:\t2\nCpus_allowed_list:\t{all}\n\
                     Mems_allowed_list:\t0\n"
                ),
            )?;
            // No CPU time yet, last ran on CPU 0.
            write(
                &self.root,
                &format!("proc/{pid}/stat"),
                &format!(
                    "{pid} ({comm}) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 \
                     18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 0 0 0 0 0 0 0 0 \
                     0 0 0 0 0 0\n"
                ),
            )?;
            if n < queues {
                rx.push(pid);
            }
        }
        Ok(rx)
    }

    /// Threaded NAPI in busy-poll mode (6.19, `echo 2 > /sys/class/net/DEV/threaded`): the
    /// threads of [`FakeTree::make_threaded`], each of which polls without pause.
    pub fn make_busy_poll(&self, nic: usize, first_pid: u32) -> io::Result<Vec<u32>> {
        let rx = self.make_threaded(nic, first_pid)?;
        let name = &self.machine.nics[nic].name;
        write(&self.root, &format!("sys/class/net/{name}/threaded"), "2\n")?;
        Ok(rx)
    }

    /// Turns threaded NAPI off again (`echo 0 > /sys/class/net/DEV/threaded`): the kernel
    /// stops the threads, so the `proc/PID` directories of `pids` (and of the transmit-only
    /// thread after them, as [`FakeTree::make_threaded`] numbered it) vanish.
    pub fn make_unthreaded(&self, nic: usize, pids: &[u32]) -> io::Result<()> {
        let name = &self.machine.nics[nic].name;
        write(&self.root, &format!("sys/class/net/{name}/threaded"), "0\n")?;
        let tx = pids.iter().max().map(|&last| last + 1);
        for &pid in pids.iter().chain(tx.iter()) {
            let dir = self.root.join(format!("proc/{pid}"));
            if dir.exists() {
                fs::remove_dir_all(dir)?;
            }
        }
        Ok(())
    }

    /// Software interrupt deferral on a NIC, as `echo N > napi_defer_hard_irqs` and
    /// `echo NS > gro_flush_timeout` in its `sys/class/net/DEV` set it.
    pub fn set_napi_deferral(
        &self,
        nic: usize,
        defer_hard_irqs: u32,
        gro_flush_timeout_ns: u64,
    ) -> io::Result<()> {
        let name = &self.machine.nics[nic].name;
        let dir = format!("sys/class/net/{name}");
        write(
            &self.root,
            &format!("{dir}/napi_defer_hard_irqs"),
            &format!("{defer_hard_irqs}\n"),
        )?;
        write(
            &self.root,
            &format!("{dir}/gro_flush_timeout"),
            &format!("{gro_flush_timeout_ns}\n"),
        )
    }

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

/// Writes `text` to `relative` under `root`, making its directories: the one way tests
/// put a kernel file of their own into a tree.
pub fn write(root: &Path, relative: &str, text: &str) -> io::Result<()> {
    let path = root.join(relative);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, text)
}

fn replace(root: &Path, relative: &str, text: &str) -> io::Result<()> {
    let path = root.join(relative);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension("steerd-tmp");
    fs::write(&temporary, text)?;
    fs::rename(temporary, path)
}

fn link(root: &Path, target: &str, relative: &str) -> io::Result<()> {
    let path = root.join(relative);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    symlink(target, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_kernel_shaped_tree() {
        let dir = tempfile::tempdir().unwrap();
        let mut machine = FakeMachine::new(4);
        machine.threads_per_core = 2;
        machine.nodes = 2;
        machine.nics.push(FakeNic {
            name: "eth0".into(),
            driver: "ixgbe".into(),
            node: Some(1),
            queues: 4,
        });
        let tree = machine.write(dir.path()).unwrap();
        let root = dir.path();
        let dev = fs::canonicalize(root.join("sys/class/net/eth0/device")).unwrap();
        assert!(dev.ends_with("0000:01:00.0"), "{}", dev.display());
        assert_eq!(
            fs::read_to_string(dev.join("local_cpulist")).unwrap(),
            "2-3,6-7\n"
        );
        assert_eq!(
            fs::read_to_string(root.join("sys/class/net/eth0/queues/rx-3/rps_cpus")).unwrap(),
            "00\n"
        );
        assert_eq!(
            fs::read_to_string(
                root.join("sys/devices/system/cpu/cpu5/topology/thread_siblings_list")
            )
            .unwrap(),
            "1,5\n"
        );
        assert_eq!(tree.queue_irqs[0].len(), 4);
        let interrupts = fs::read_to_string(root.join("proc/interrupts")).unwrap();
        assert!(interrupts.contains("eth0-TxRx-3"));
        let managed = tree.other_irqs[0];
        let mode = fs::metadata(root.join(format!("proc/irq/{managed}/smp_affinity")))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o222, 0);
    }

    #[test]
    fn the_large_machine_has_the_promised_size() {
        let machine = FakeMachine::large();
        assert_eq!(machine.cpu_count(), 1152);
        assert_eq!(machine.nics.iter().map(|n| n.queues).sum::<u32>(), 376);
        assert_eq!(machine.node_cpus(7).len(), 144);
    }
}
