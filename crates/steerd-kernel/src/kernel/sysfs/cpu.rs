//! The CPU topology from `sys/devices/system/cpu` and `sys/devices/system/node`.
//!
//! Missing files mean sensible defaults, not errors, because containers, old kernels and
//! fake trees omit them: no `possible` ⇒ the `cpuN` directories; no `present` ⇒ possible;
//! no `online` ⇒ possible minus `offline`; no `isolated`/`nohz_full` ⇒ empty; no `node*`
//! directory with a `cpulist` ⇒ one node 0 holding every possible CPU. Offline CPUs and gaps
//! in numbering are normal.
//!
//! Per CPU: `core` is the lowest id of `topology/thread_siblings_list` (unique machine-wide,
//! unlike `core_id`), `llc` the lowest id of the `shared_cpu_list` of the highest-level
//! `cache/index*`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::cpuset::CpuSet;
use crate::error::Error;
use crate::model::topology::{Cpu, Node, Topology};
use crate::root::{Root, optional_dir_entries};

const CPU_DIR: &str = "sys/devices/system/cpu";
const NODE_DIR: &str = "sys/devices/system/node";

/// Reads the whole topology under `root`.
pub fn read_topology(root: &Root) -> Result<Topology, Error> {
    let possible = match read_cpulist(root, format!("{CPU_DIR}/possible"))? {
        Some(set) => set,
        None => cpu_dirs(root)?,
    };
    let Some(highest) = possible.last() else {
        return Err(Error::parse(
            root.path(CPU_DIR),
            0,
            "no possible CPUs: neither a `possible` file nor cpuN directories",
        ));
    };
    let present =
        read_cpulist(root, format!("{CPU_DIR}/present"))?.unwrap_or_else(|| possible.clone());
    let (online, online_from_file) = match read_online_cpus(root)? {
        Some(set) => (set, true),
        None => {
            let offline = read_cpulist(root, format!("{CPU_DIR}/offline"))?.unwrap_or_default();
            (possible.difference(&offline), false)
        }
    };
    let isolated = read_cpulist(root, format!("{CPU_DIR}/isolated"))?.unwrap_or_default();
    let nohz_full = read_cpulist(root, format!("{CPU_DIR}/nohz_full"))?.unwrap_or_default();

    let mut nodes = read_nodes(root)?;
    if nodes.is_empty() {
        nodes.push(Node {
            id: 0,
            cpus: possible.clone(),
        });
    }
    let mut node_of: BTreeMap<u32, u32> = BTreeMap::new();
    for node in &nodes {
        for cpu in node.cpus.iter() {
            node_of.entry(cpu).or_insert(node.id);
        }
    }

    let mut cpus = Vec::with_capacity(possible.len());
    for id in possible.iter() {
        let base = format!("{CPU_DIR}/cpu{id}");
        let siblings = read_cpulist(root, format!("{base}/topology/thread_siblings_list"))?;
        let package = read_optional_int(root, &format!("{base}/topology/physical_package_id"))?
            .and_then(|value| u32::try_from(value).ok());
        cpus.push(Cpu {
            id,
            online: online.contains(id),
            core: siblings.as_ref().and_then(CpuSet::first),
            package,
            node: node_of.get(&id).copied(),
            llc: last_level_cache(root, &base)?,
            siblings: siblings.unwrap_or_else(|| std::iter::once(id).collect()),
            isolated: isolated.contains(id),
            nohz_full: nohz_full.contains(id),
        });
    }

    Ok(Topology {
        nr_cpu_ids: highest + 1,
        possible,
        present,
        online,
        online_from_file,
        isolated,
        nohz_full,
        isolated_partitions: CpuSet::new(),
        cpus,
        nodes,
    })
}

/// `sys/devices/system/cpu/online`; `None` when absent.
pub fn read_online_cpus(root: &Root) -> Result<Option<CpuSet>, Error> {
    read_cpulist(root, format!("{CPU_DIR}/online"))
}

/// A cpulist file that may be absent (`None`); `(null)` (some kernels' empty list) is
/// the empty set. Also read by [`crate::kernel::cgroup_isolation`].
pub(crate) fn read_cpulist(
    root: &Root,
    relative: impl AsRef<Path>,
) -> Result<Option<CpuSet>, Error> {
    let relative = relative.as_ref();
    let Some(text) = root.read_optional(relative)? else {
        return Ok(None);
    };
    let text = text.trim();
    if text == "(null)" {
        return Ok(Some(CpuSet::new()));
    }
    CpuSet::parse_list(text)
        .map(Some)
        .map_err(|err| Error::parse(root.path(relative), 1, err.to_string()))
}

fn read_optional_int(root: &Root, relative: &str) -> Result<Option<i64>, Error> {
    let Some(text) = root.read_optional(relative)? else {
        return Ok(None);
    };
    text.trim().parse().map(Some).map_err(|_| {
        Error::parse(
            root.path(relative),
            1,
            format!("not an integer: {:?}", text.trim()),
        )
    })
}

/// The `cpuN` directory numbers, for a tree without a `possible` file.
fn cpu_dirs(root: &Root) -> Result<CpuSet, Error> {
    Ok(numbered_entries(&root.path(CPU_DIR), "cpu")?
        .into_iter()
        .collect())
}

/// `prefix<N>` entries of a directory (absent directory ⇒ none), ascending.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<u32>, Error> {
    let mut numbers = Vec::new();
    for entry in optional_dir_entries(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(number) = name
            .to_str()
            .and_then(|name| name.strip_prefix(prefix))
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u32>().ok())
        else {
            continue;
        };
        if number < crate::cpuset::MAX_CPUS {
            numbers.push(number);
        }
    }
    numbers.sort_unstable();
    Ok(numbers)
}

/// NUMA nodes that have a `cpulist` (memory-only nodes print an empty one).
fn read_nodes(root: &Root) -> Result<Vec<Node>, Error> {
    let mut nodes = Vec::new();
    for id in numbered_entries(&root.path(NODE_DIR), "node")? {
        if let Some(cpus) = read_cpulist(root, format!("{NODE_DIR}/node{id}/cpulist"))? {
            nodes.push(Node { id, cpus });
        }
    }
    Ok(nodes)
}

/// The lowest CPU sharing this CPU's highest-level cache, or `None` without cache info.
fn last_level_cache(root: &Root, cpu_base: &str) -> Result<Option<u32>, Error> {
    let cache_dir = format!("{cpu_base}/cache");
    let mut best: Option<(u32, u32)> = None; // (level, index)
    for index in numbered_entries(&root.path(&cache_dir), "index")? {
        let Some(level) = read_optional_int(root, &format!("{cache_dir}/index{index}/level"))?
        else {
            continue;
        };
        let level = u32::try_from(level).unwrap_or(0);
        if best.is_none_or(|(best_level, _)| level > best_level) {
            best = Some((level, index));
        }
    }
    let Some((_, index)) = best else {
        return Ok(None);
    };
    Ok(
        read_cpulist(root, format!("{cache_dir}/index{index}/shared_cpu_list"))?
            .as_ref()
            .and_then(CpuSet::first),
    )
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    use super::super::write_test_file as write;

    #[test]
    fn a_two_node_smt_machine_with_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "sys/devices/system/cpu/possible", "0-7\n");
        write(d, "sys/devices/system/cpu/present", "0-7\n");
        write(d, "sys/devices/system/cpu/online", "0-2,4-7\n");
        write(d, "sys/devices/system/cpu/isolated", "7\n");
        write(d, "sys/devices/system/cpu/nohz_full", "(null)\n");
        for cpu in 0..8u32 {
            let core = cpu % 4;
            let base = format!("sys/devices/system/cpu/cpu{cpu}");
            if cpu != 3 {
                write(
                    d,
                    &format!("{base}/topology/thread_siblings_list"),
                    &format!("{core},{}\n", core + 4),
                );
                write(
                    d,
                    &format!("{base}/topology/physical_package_id"),
                    &format!("{}\n", core / 2),
                );
            }
            write(d, &format!("{base}/cache/index0/level"), "1\n");
            write(
                d,
                &format!("{base}/cache/index0/shared_cpu_list"),
                &format!("{core},{}\n", core + 4),
            );
            write(d, &format!("{base}/cache/index3/level"), "3\n");
            let llc = if core < 2 { "0-1,4-5" } else { "2-3,6-7" };
            write(
                d,
                &format!("{base}/cache/index3/shared_cpu_list"),
                &format!("{llc}\n"),
            );
        }
        write(d, "sys/devices/system/node/node0/cpulist", "0-1,4-5\n");
        write(d, "sys/devices/system/node/node1/cpulist", "2-3,6-7\n");
        write(d, "sys/devices/system/node/node2/cpulist", "\n");
        let topology = read_topology(&Root::new(d)).unwrap();
        assert_eq!(topology.nr_cpu_ids, 8);
        assert_eq!(topology.online.to_list(), "0-2,4-7");
        assert_eq!(topology.online_as_read(), Some(&topology.online));
        assert!(topology.nohz_full.is_empty());
        assert_eq!(topology.nodes.len(), 3);
        let cpu6 = topology.cpu(6).unwrap();
        assert_eq!(
            (cpu6.core, cpu6.package, cpu6.node, cpu6.llc),
            (Some(2), Some(1), Some(1), Some(2))
        );
        assert_eq!(cpu6.siblings.to_list(), "2,6");
        let cpu3 = topology.cpu(3).unwrap();
        assert!(!cpu3.online);
        assert_eq!((cpu3.core, cpu3.package), (None, None));
        assert_eq!(cpu3.siblings.to_list(), "3");
        assert!(topology.cpu(7).unwrap().isolated);
    }

    #[test]
    fn defaults_for_a_bare_tree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for cpu in [0, 1, 3] {
            fs::create_dir_all(d.join(format!("sys/devices/system/cpu/cpu{cpu}"))).unwrap();
        }
        write(d, "sys/devices/system/cpu/offline", "1\n");
        let topology = read_topology(&Root::new(d)).unwrap();
        assert_eq!(topology.possible.to_list(), "0-1,3");
        assert_eq!(topology.present, topology.possible);
        assert_eq!(topology.online.to_list(), "0,3");
        assert_eq!(topology.online_as_read(), None, "derived, not read");
        assert_eq!(topology.nr_cpu_ids, 4);
        assert_eq!(
            topology.nodes,
            vec![Node {
                id: 0,
                cpus: topology.possible.clone()
            }]
        );
        assert!(
            topology
                .cpus
                .iter()
                .all(|cpu| cpu.node == Some(0) && cpu.llc.is_none())
        );
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_topology(&Root::new(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("sys/devices/system/cpu"), "{err}");
        write(dir.path(), "sys/devices/system/cpu/possible", "0-x\n");
        let err = read_topology(&Root::new(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("possible:1"), "{err}");
    }
}
