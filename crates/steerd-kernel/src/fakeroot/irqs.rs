//! The IRQs of a written tree: their numbers and names (as `proc/interrupts` prints them,
//! with their interrupt chip) and their `proc/irq/N` directories with the affinity files,
//! read-only for the managed one. Apart because both the tree's first writing and every
//! rewrite of the counters need them.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;

use super::{FakeTree, write};
use crate::cpuset::CpuSet;

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

    pub(super) fn chip(&self, irq: u32) -> String {
        for (index, _) in self.machine.nics.iter().enumerate() {
            if self.misc_irqs[index] == irq || self.queue_irqs[index].contains(&irq) {
                return format!("IR-PCI-MSIX-0000:{:02x}:00.0", index + 1);
            }
        }
        "IR-PCI-MSI".to_string()
    }

    pub(super) fn write_irq_dirs(&self) -> io::Result<()> {
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
}
