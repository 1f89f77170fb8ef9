//! Re-reads, between discoveries, the two settings `steerd top` shows that change while
//! it watches: where each NIC queue vector is delivered (`proc/irq/N/effective_affinity_list`,
//! else `smp_affinity_list`) and each receive queue's RPS mask
//! (`sys/class/net/DEV/queues/rx-N/rps_cpus`).
//!
//! Why not rediscover every frame: discovery reads `proc/interrupts`, megabytes on a
//! 1000-CPU machine. These files are a few bytes each, but a 1152-CPU machine has hundreds
//! of queues, so a frame reads at most [`FILES_PER_FRAME`] of them, going round: on a
//! machine with fewer queues every file is read every frame; on the largest, a change shows
//! within a few frames.

use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;

use crate::cpuset::CpuSet;
use crate::discover::Machine;
use crate::root::{Root, is_absent};

use super::frame::{is_queue_vector, shows_device};

/// How many settings files one frame re-reads at most (docs/top-json.md; the cost is in
/// `benches/top.rs`).
pub const FILES_PER_FRAME: usize = 256;

/// A settings file and what it sets in the model.
#[derive(Debug)]
enum Entry {
    /// `irqs[index]`: its effective affinity (or, with `effective` false, its affinity).
    Delivery {
        index: usize,
        path: PathBuf,
        effective: bool,
    },
    /// `devices[device].rx_queues[queue].rps_cpus`.
    Rps {
        device: usize,
        queue: usize,
        path: PathBuf,
    },
}

/// The settings files of one discovered machine, read round-robin.
#[derive(Debug, Default)]
pub struct SettingsFiles {
    entries: Vec<Entry>,
    next: usize,
    text: String,
}

/// What a refresh found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// A file was gone: the IRQ was freed or the queue removed; discover again.
    pub vanished: bool,
    /// Files that could not be read or parsed, with why.
    pub problems: Vec<String>,
}

impl SettingsFiles {
    /// The files for `machine`'s shown devices and their queue vectors.
    pub fn new(root: &Root, machine: &Machine) -> Self {
        let mut entries = Vec::new();
        for (index, irq) in machine.inventory.irqs.iter().enumerate() {
            if !is_queue_vector(irq) {
                continue;
            }
            let effective = irq.effective_affinity.is_some();
            let name = if effective {
                "effective_affinity_list"
            } else {
                "smp_affinity_list"
            };
            entries.push(Entry::Delivery {
                index,
                path: root.path(format!("proc/irq/{}/{name}", irq.irq)),
                effective,
            });
        }
        for (device_index, device) in machine.inventory.devices.iter().enumerate() {
            if !shows_device(device) {
                continue;
            }
            for (queue_index, queue) in device.rx_queues.iter().enumerate() {
                entries.push(Entry::Rps {
                    device: device_index,
                    queue: queue_index,
                    path: root.path(format!(
                        "sys/class/net/{}/queues/rx-{}/rps_cpus",
                        device.name, queue.index
                    )),
                });
            }
        }
        SettingsFiles {
            entries,
            next: 0,
            text: String::new(),
        }
    }

    /// How many files there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Re-reads the next `budget` files (all of them if fewer) into `machine`, which must
    /// be the machine these files were listed from.
    pub fn refresh(&mut self, machine: &mut Machine, budget: usize) -> Refreshed {
        let mut found = Refreshed::default();
        let count = budget.min(self.entries.len());
        for _ in 0..count {
            let Some(entry) = self.entries.get(self.next) else {
                break;
            };
            self.next = (self.next + 1) % self.entries.len();
            let path = match entry {
                Entry::Delivery { path, .. } | Entry::Rps { path, .. } => path,
            };
            match read_small(path, &mut self.text) {
                Ok(()) => {}
                Err(error) if is_absent(&error) => {
                    found.vanished = true;
                    continue;
                }
                Err(error) => {
                    found
                        .problems
                        .push(format!("cannot read {}: {error}", path.display()));
                    continue;
                }
            }
            let parsed = match entry {
                Entry::Delivery { .. } => CpuSet::parse_list(&self.text),
                Entry::Rps { .. } => CpuSet::parse_mask(&self.text),
            };
            let set = match parsed {
                Ok(set) => set,
                Err(error) => {
                    found.problems.push(format!("{}: {error}", path.display()));
                    continue;
                }
            };
            match *entry {
                Entry::Delivery {
                    index, effective, ..
                } => {
                    if let Some(irq) = machine.inventory.irqs.get_mut(index) {
                        if effective {
                            irq.effective_affinity = Some(set);
                        } else {
                            irq.affinity = Some(set);
                        }
                    }
                }
                Entry::Rps { device, queue, .. } => {
                    if let Some(queue) = machine
                        .inventory
                        .devices
                        .get_mut(device)
                        .and_then(|d| d.rx_queues.get_mut(queue))
                    {
                        queue.rps_cpus = Some(set);
                    }
                }
            }
        }
        found
    }
}

/// The longest settings file read: a cpulist or mask of 8192 CPUs fits with room.
const MAX_SETTINGS_BYTES: u64 = 16 * 1024;

/// Reads a small file into `text` (cleared first), reusing its buffer.
fn read_small(path: &std::path::Path, text: &mut String) -> io::Result<()> {
    text.clear();
    File::open(path)?
        .take(MAX_SETTINGS_BYTES)
        .read_to_string(text)?;
    Ok(())
}
