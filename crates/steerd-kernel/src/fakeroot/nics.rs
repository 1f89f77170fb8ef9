//! The NIC files of a fake machine, laid out as the kernel lays them out: each NIC's PCI
//! function (`numa_node`, `local_cpulist`, `msi_irqs/`, its driver), its net device under
//! it (`sys/class/net/<if>` a symlink there, `device` a link back) with its NAPI settings
//! and `queues/rx-N`, `tx-N`, and the loopback device. Written once by
//! [`FakeMachine::write`]; the one place that knows the sysfs shape of a NIC.

use std::fs;
use std::io;
use std::path::Path;

use super::{FakeMachine, FakeTree, link, write};
use crate::cpuset::CpuSet;

impl FakeMachine {
    pub(super) fn write_nics(&self, dir: &Path, tree: &FakeTree) -> io::Result<()> {
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
}
