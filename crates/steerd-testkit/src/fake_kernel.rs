//! The fake kernel: a thread that plays the kernel for a generated tree (`fakeroot`),
//! putting each queue's packets where its IRQ affinity and RPS mask send them and
//! rewriting the counters as the kernel would count them, so that a real `steerd run` on
//! the tree sees its writes take effect. Used by the daemon tests (`tests/daemon_support`)
//! and by `examples/decision_churn.rs`, which drives a release daemon outside `cargo test`.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use steerd_kernel::CpuSet;
use steerd_kernel::fakeroot::{FakeCounters, FakeTree};

/// How often the fake kernel advances the counters.
const KERNEL_STEP: Duration = Duration::from_millis(25);

/// The packet rate of one receive queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueLoad {
    pub device: String,
    pub queue: u32,
    pub pps: f64,
}

/// Per-packet costs, as the simulator has them (`steerd_kernel::sim::machine::Costs`): the
/// interrupting CPU spends `IRQ_COST` per packet, the CPU doing the protocol work `WORK_COST`.
const IRQ_COST_S: f64 = 0.4e-6;
const WORK_COST_S: f64 = 1.6e-6;
/// Packets per interrupt (NAPI polls several per interrupt).
const PACKETS_PER_INTERRUPT: f64 = 16.0;
/// `USER_HZ`.
const TICKS_PER_SECOND: f64 = 100.0;

/// The state behind the fake kernel thread.
struct World {
    tree: FakeTree,
    loads: Vec<QueueLoad>,
    /// Per CPU: processed, dropped, squeezed (fractional, accumulated).
    softnet: Vec<[f64; 3]>,
    /// Per CPU: busy (softirq) and idle ticks.
    ticks: Vec<[f64; 2]>,
    irq_counts: BTreeMap<u32, Vec<f64>>,
    last_step: Instant,
    steps: u64,
    /// 6.1 x86 MSI behaviour: `effective_affinity_list` keeps whatever it said (stale),
    /// and a mask of several CPUs delivers to its last CPU (the vector matrix picks any
    /// CPU of the mask; the lowest is not a rule).
    stale_effective: bool,
}

/// The kernel side of the fake machine, advancing its counters in a thread.
pub struct FakeKernel {
    world: Arc<Mutex<World>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeKernel {
    /// Starts the thread. `loads` can be changed later with [`FakeKernel::set_loads`].
    pub fn start(tree: FakeTree, loads: Vec<QueueLoad>) -> FakeKernel {
        let cpus = tree.machine.cpu_count() as usize;
        let world = Arc::new(Mutex::new(World {
            tree,
            loads,
            softnet: vec![[0.0; 3]; cpus],
            ticks: vec![[0.0, 1000.0]; cpus],
            irq_counts: BTreeMap::new(),
            last_step: Instant::now(),
            steps: 0,
            stale_effective: false,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let mut w = world.lock().unwrap();
            w.step();
        }
        let thread = std::thread::spawn({
            let world = world.clone();
            let stop = stop.clone();
            move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(KERNEL_STEP);
                    world.lock().unwrap().step();
                }
            }
        });
        FakeKernel {
            world,
            stop,
            thread: Some(thread),
        }
    }

    /// Leaves `effective_affinity_list` stale and delivers wide masks to their last CPU
    /// (see `World::stale_effective`).
    pub fn set_stale_effective(&self) {
        self.world.lock().unwrap().stale_effective = true;
    }

    pub fn set_loads(&self, loads: Vec<QueueLoad>) {
        self.world.lock().unwrap().loads = loads;
    }

    /// Counter updates written so far.
    pub fn steps(&self) -> u64 {
        self.world.lock().unwrap().steps
    }

    /// Makes a NIC vanish between two counter updates, as a hot-unplug does: its
    /// `sys/class/net` link, its device directory and its `proc/irq/N` directories go, and
    /// the next `proc/interrupts` and `proc/stat` no longer list its IRQs.
    pub fn unplug(&self, device: &str) {
        let mut w = self.world.lock().unwrap();
        let index = w.nic_index(device);
        let root = w.tree.root.clone();
        let class_link = root.join("sys/class/net").join(device);
        let device_dir = fs::canonicalize(&class_link).expect("device dir");
        let pci_dir = fs::canonicalize(class_link.join("device")).expect("pci dir");
        fs::remove_file(&class_link).expect("remove sys/class/net link");
        fs::remove_dir_all(&device_dir).expect("remove the net device");
        fs::remove_dir_all(&pci_dir).expect("remove the PCI function");
        let mut irqs = w.tree.queue_irqs.remove(index);
        irqs.push(w.tree.misc_irqs.remove(index));
        for irq in &irqs {
            fs::remove_dir_all(root.join(format!("proc/irq/{irq}"))).expect("remove proc/irq/N");
            w.irq_counts.remove(irq);
        }
        w.tree.machine.nics.remove(index);
        w.loads.retain(|l| l.device != device);
        w.step();
    }

    /// A channel-count change on a NIC (see [`FakeTree::set_channels`]), between two
    /// counter updates.
    pub fn set_channels(&self, device: &str, active: u32, driver_default: &dyn Fn(u32) -> CpuSet) {
        let w = self.world.lock().unwrap();
        let nic = w.nic_index(device);
        w.tree
            .set_channels(nic, active, driver_default)
            .expect("change the channel count");
    }

    /// Stops the thread (also on drop).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for FakeKernel {
    fn drop(&mut self) {
        self.stop();
    }
}

impl World {
    /// Advances the counters by the time since the last step and writes them.
    /// The index of a NIC of the fake machine, by name.
    fn nic_index(&self, device: &str) -> usize {
        self.tree
            .machine
            .nics
            .iter()
            .position(|n| n.name == device)
            .expect("no such NIC")
    }

    fn step(&mut self) {
        let now = Instant::now();
        let dt = now.duration_since(self.last_step).as_secs_f64();
        self.last_step = now;
        let root = self.tree.root.clone();
        let cpus = self.tree.machine.cpu_count();
        let mut busy = vec![0.0f64; cpus as usize];
        let mut processed = vec![0.0f64; cpus as usize];
        for load in &self.loads {
            let Some(nic) = self
                .tree
                .machine
                .nics
                .iter()
                .position(|n| n.name == load.device)
            else {
                continue;
            };
            let Some(&irq) = self.tree.queue_irqs[nic].get(load.queue as usize) else {
                continue;
            };
            // Where the IRQ fires: the first CPU of its affinity, as x86 picks one.
            let Some(affinity) =
                read_trimmed(&root.join(format!("proc/irq/{irq}/smp_affinity_list")))
                    .and_then(|t| CpuSet::parse_list(&t).ok())
            else {
                continue;
            };
            let pick = if self.stale_effective {
                affinity.last()
            } else {
                affinity.first()
            };
            let Some(irq_cpu) = pick else {
                continue;
            };
            let effective = root.join(format!("proc/irq/{irq}/effective_affinity_list"));
            if !self.stale_effective
                && read_trimmed(&effective).as_deref() != Some(irq_cpu.to_string().as_str())
            {
                let _ = fs::write(&effective, format!("{irq_cpu}\n"));
            }
            let rps = read_trimmed(&root.join(format!(
                "sys/class/net/{}/queues/rx-{}/rps_cpus",
                load.device, load.queue
            )))
            .and_then(|t| CpuSet::parse_mask(&t).ok())
            .unwrap_or_default();
            let packets = load.pps * dt;
            busy[irq_cpu as usize] += packets * IRQ_COST_S;
            let counts = self
                .irq_counts
                .entry(irq)
                .or_insert_with(|| vec![0.0; cpus as usize]);
            counts[irq_cpu as usize] += packets / PACKETS_PER_INTERRUPT;
            // The kernel's RPS: the flow hash picks one CPU of the mask; many flows
            // spread evenly.
            let workers: Vec<u32> = if rps.is_empty() {
                vec![irq_cpu]
            } else {
                rps.iter().filter(|&c| c < cpus).collect()
            };
            for &cpu in &workers {
                let share = packets / workers.len() as f64;
                processed[cpu as usize] += share;
                busy[cpu as usize] += share * WORK_COST_S;
            }
        }
        for cpu in 0..cpus as usize {
            let capacity = dt;
            let served = busy[cpu].min(capacity);
            let served_share = if busy[cpu] > 0.0 {
                served / busy[cpu]
            } else {
                1.0
            };
            let done = processed[cpu] * served_share;
            let lost = processed[cpu] - done;
            self.softnet[cpu][0] += done;
            self.softnet[cpu][1] += lost;
            if served_share < 1.0 {
                self.softnet[cpu][2] += dt * 1000.0;
            }
            let all_ticks = dt * TICKS_PER_SECOND;
            let busy_ticks = all_ticks * (served / capacity.max(1e-9));
            self.ticks[cpu][0] += busy_ticks;
            self.ticks[cpu][1] += all_ticks - busy_ticks;
        }
        let counters = FakeCounters {
            softnet: self
                .softnet
                .iter()
                .map(|s| (s[0] as u64 as u32, s[1] as u64 as u32, s[2] as u64 as u32))
                .collect(),
            cpu_ticks: self
                .ticks
                .iter()
                .map(|t| (0, 0, t[1] as u64, 0, t[0] as u64))
                .collect(),
            irq_counts: self
                .irq_counts
                .iter()
                .map(|(&irq, counts)| (irq, counts.iter().map(|&c| c as u64).collect()))
                .collect(),
        };
        self.tree
            .write_counters(&counters)
            .expect("write the fake counters");
        self.steps += 1;
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|t| t.trim().to_string())
}
