//! The CPU topology: which CPUs exist, which are online, how they group into physical
//! cores, last-level-cache domains, packages and NUMA nodes, and which ones belong to
//! someone else (isolated, `nohz_full`).

use serde::Serialize;

use crate::cpuset::CpuSet;

/// The machine's CPUs as the kernel describes them under `sys/devices/system`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Topology {
    /// `nr_cpu_ids`: one past the highest possible CPU. Hex masks are this many bits wide.
    pub nr_cpu_ids: u32,
    pub possible: CpuSet,
    pub present: CpuSet,
    pub online: CpuSet,
    /// Whether `online` is what `sys/devices/system/cpu/online` says, rather than derived
    /// (possible minus `offline`) because that file was absent: see
    /// [`Topology::online_as_read`].
    #[serde(skip)]
    pub online_from_file: bool,
    /// `isolcpus=` CPUs (`sys/devices/system/cpu/isolated`).
    pub isolated: CpuSet,
    /// `nohz_full=` CPUs (`sys/devices/system/cpu/nohz_full`).
    pub nohz_full: CpuSet,
    /// CPUs of cgroup v2 isolated cpuset partitions (the root's `cpuset.cpus.isolated`:
    /// [`crate::kernel::cgroup_isolation`]); they change while the machine runs.
    pub isolated_partitions: CpuSet,
    /// Every possible CPU, ascending by id. Offline CPUs are listed with `online: false` and
    /// whatever the kernel still says about them.
    pub cpus: Vec<Cpu>,
    /// NUMA nodes, ascending by id. A machine without `node*` directories has one node, 0,
    /// holding every possible CPU.
    pub nodes: Vec<Node>,
}

/// One logical CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cpu {
    pub id: u32,
    pub online: bool,
    /// The physical core, named by the lowest CPU id among its hyperthread siblings, so it
    /// is unique machine-wide (the kernel's `core_id` repeats across packages).
    pub core: Option<u32>,
    /// `topology/physical_package_id`.
    pub package: Option<u32>,
    pub node: Option<u32>,
    /// The last-level-cache domain, named by the lowest CPU id sharing that cache.
    pub llc: Option<u32>,
    /// Hyperthread siblings including this CPU (`topology/thread_siblings_list`).
    pub siblings: CpuSet,
    pub isolated: bool,
    pub nohz_full: bool,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    pub id: u32,
    pub cpus: CpuSet,
}

impl Topology {
    /// The online CPUs as read from `sys/devices/system/cpu/online`, `None` when that file
    /// was absent: the list `softnet_stat` rows without a CPU id are mapped to
    /// ([`crate::kernel::procfs::softnet::parse_softnet`]). Not the derived set: a guess
    /// there would turn a tree without the file into errors where row numbers served.
    pub fn online_as_read(&self) -> Option<&CpuSet> {
        self.online_from_file.then_some(&self.online)
    }

    /// The CPUs set aside for someone else's latency-critical work, which steerd keeps its
    /// receive work off whatever its configuration says: `isolcpus=`, `nohz_full=` and
    /// isolated cgroup partitions.
    pub fn set_aside(&self) -> CpuSet {
        self.isolated
            .union(&self.nohz_full)
            .union(&self.isolated_partitions)
    }

    /// Why `cpu` is set aside, for people; `None` when it is not.
    pub fn set_aside_why(&self, cpu: u32) -> Option<&'static str> {
        if self.isolated.contains(cpu) {
            Some("isolated (isolcpus=)")
        } else if self.isolated_partitions.contains(cpu) {
            Some("in an isolated cgroup partition (cpuset.cpus.isolated)")
        } else if self.nohz_full.contains(cpu) {
            Some("nohz_full")
        } else {
            None
        }
    }

    /// The CPU with this id, if it is possible.
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        self.cpus
            .binary_search_by_key(&id, |cpu| cpu.id)
            .ok()
            .map(|index| &self.cpus[index])
    }

    /// The CPUs of a NUMA node (empty if the node is unknown).
    pub fn node_cpus(&self, node: u32) -> CpuSet {
        self.nodes
            .iter()
            .find(|n| n.id == node)
            .map(|n| n.cpus.clone())
            .unwrap_or_default()
    }
}
