//! Simulated CPU topologies: nodes of cores of hyperthreads, numbered like real machines.

use crate::cpuset::CpuSet;
use crate::model::topology::{Cpu, Node, Topology};

/// How hyperthread siblings are numbered within a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Siblings {
    /// Thread t of core c is CPU `c + t * cores` (Intel servers: 0 and 8 are siblings).
    Split,
    /// Thread t of core c is CPU `c * threads + t` (0 and 1 are siblings).
    Adjacent,
}

/// A machine shape: `nodes` NUMA nodes of `cores` cores of `threads` threads each.
#[derive(Debug, Clone)]
pub struct Shape {
    pub nodes: u32,
    pub cores: u32,
    pub threads: u32,
    pub siblings: Siblings,
    pub isolated: CpuSet,
    pub nohz_full: CpuSet,
    pub offline: CpuSet,
}

impl Shape {
    pub fn new(nodes: u32, cores: u32, threads: u32, siblings: Siblings) -> Self {
        Shape {
            nodes,
            cores,
            threads,
            siblings,
            isolated: CpuSet::new(),
            nohz_full: CpuSet::new(),
            offline: CpuSet::new(),
        }
    }

    /// The CPU id of thread `thread` of core `core` of node `node`.
    pub fn cpu_id(&self, node: u32, core: u32, thread: u32) -> u32 {
        let per_node = self.cores * self.threads;
        node * per_node
            + match self.siblings {
                Siblings::Split => core + thread * self.cores,
                Siblings::Adjacent => core * self.threads + thread,
            }
    }

    /// The topology as the readers would build it.
    pub fn topology(&self) -> Topology {
        let total = self.nodes * self.cores * self.threads;
        let possible = CpuSet::first_n(total);
        let online = possible.difference(&self.offline);
        let mut cpus: Vec<Cpu> = Vec::with_capacity(total as usize);
        let mut nodes = Vec::new();
        for node in 0..self.nodes {
            let mut node_cpus = CpuSet::new();
            for core in 0..self.cores {
                let siblings: CpuSet = (0..self.threads)
                    .map(|t| self.cpu_id(node, core, t))
                    .collect();
                let core_id = siblings.first().unwrap_or(0);
                for id in siblings.iter() {
                    node_cpus.insert(id);
                    cpus.push(Cpu {
                        id,
                        online: online.contains(id),
                        core: Some(core_id),
                        package: Some(node),
                        node: Some(node),
                        llc: Some(self.cpu_id(node, 0, 0)),
                        siblings: siblings.clone(),
                        isolated: self.isolated.contains(id),
                        nohz_full: self.nohz_full.contains(id),
                    });
                }
            }
            nodes.push(Node {
                id: node,
                cpus: node_cpus,
            });
        }
        cpus.sort_by_key(|c| c.id);
        Topology {
            nr_cpu_ids: total,
            possible: possible.clone(),
            present: possible,
            online,
            online_from_file: true,
            isolated: self.isolated.clone(),
            nohz_full: self.nohz_full.clone(),
            isolated_partitions: CpuSet::new(),
            cpus,
            nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_siblings_like_real_machines() {
        let split = Shape::new(1, 8, 2, Siblings::Split).topology();
        assert_eq!(split.cpu(8).unwrap().core, Some(0));
        assert_eq!(split.cpu(3).unwrap().siblings.to_list(), "3,11");
        let adjacent = Shape::new(2, 4, 2, Siblings::Adjacent).topology();
        assert_eq!(adjacent.cpu(1).unwrap().core, Some(0));
        assert_eq!(adjacent.cpu(9).unwrap().node, Some(1));
        assert_eq!(adjacent.node_cpus(1).to_list(), "8-15");
        let big = Shape::new(8, 72, 2, Siblings::Split).topology();
        assert_eq!(big.cpus.len(), 1152);
        assert_eq!(big.cpu(144 + 72).unwrap().core, Some(144));
    }
}
