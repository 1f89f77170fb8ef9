//! Kernel-shaped fake trees: a generated `proc/` and `sys/` for a machine of any size.
//!
//! Tests, benchmarks and bug reproductions run the real binary with `--root DIR` on such a
//! tree. The layout follows the kernel's: `sys/class/net/<if>` is a symlink into
//! `sys/devices/pci…/<bdf>/net/<if>`, whose `device` link points back at the PCI function
//! with its `numa_node`, `local_cpulist` and `msi_irqs/`; `proc/irq/<n>/` has the affinity
//! files (read-only for managed IRQs, as on ≥6.12 kernels); hex masks are printed in the
//! kernel's width. Counters (`proc/stat`, `proc/net/softnet_stat`, `proc/interrupts`) can
//! be rewritten between ticks with [`FakeTree::write_counters`].
//!
//! This file holds the shapes ([`FakeMachine`], [`FakeNic`], [`FakeTree`]), the writing of
//! a tree and the file helpers every part uses. The parts of the tree are in their own
//! modules: `cpus` (CPU topology, NUMA nodes, `proc/softirqs`), `nics` (each NIC's PCI
//! function, net device and queues), `irqs` (`proc/irq/N` and the IRQs' names),
//! `nic_changes` (what a test changes on a NIC between ticks) and `counters` (the
//! `proc/` counters rewritten between ticks).

mod counters;
mod cpus;
mod irqs;
mod nic_changes;
mod nics;

pub use counters::FakeCounters;

use std::fs;
use std::io;
use std::os::unix::fs::symlink;
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

/// A real file whose read answers EINVAL, as a net device's attributes do while the
/// kernel unregisters it: `/proc/self/clear_refs` (as root; others may not open it), for a
/// test to link a fake attribute to. `None` where it does not answer so (not root): the
/// caller skips, saying why.
pub fn einval_file() -> Option<&'static Path> {
    let file = Path::new("/proc/self/clear_refs");
    let answer = fs::read(file).map_err(|e| e.raw_os_error());
    (answer == Err(Some(nix::libc::EINVAL))).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
