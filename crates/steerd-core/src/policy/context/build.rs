//! The working view built once per tick from the policy's inputs: which CPUs steerd may
//! use and which it clears (bans, isolation, busy-polling NAPI threads), the receive work
//! per CPU and core, each device's local CPUs under the NUMA policy, each IRQ's CPU and
//! what blocks it, and the work each queue vector brings to its CPU.
//!
//! A module of its own because building runs once, before any rule, and reads every
//! input, while the rest of the view is what the rules use and update as they plan.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};

use super::{Blocker, DeviceView, IrqView, Planner, RPS_INTERRUPT_SHARE, busy_poll_cpus};
use crate::config::{NonQueueIrqs, NumaPolicy};
use crate::cpuset::CpuSet;
use crate::knob::Knob;
use crate::load::QueueVector;
use crate::model::inventory::{IrqRole, NetDevice};
use crate::policy::DecideInput;
use crate::policy::hysteresis;
use crate::policy::placement::IrqAffinity;
use crate::policy::state::PolicyState;

impl<'a> Planner<'a> {
    pub fn new(input: &DecideInput<'a>, state: &'a mut PolicyState) -> Self {
        let topology = input.topology;
        let config = input.config;
        let nr = (topology.nr_cpu_ids as usize)
            .max(topology.cpus.last().map_or(0, |c| c.id as usize + 1))
            .max(input.load.cpus.len());
        let mut core_of: Vec<u32> = (0..nr as u32).collect();
        let mut node_of = vec![None; nr];
        for cpu in &topology.cpus {
            if let Some(core) = cpu.core {
                core_of[cpu.id as usize] = core;
            }
            node_of[cpu.id as usize] = cpu.node;
        }
        let mut evict = config.cpus.banned.union(&topology.set_aside());
        let mut allowed = topology
            .online
            .difference(&evict)
            .difference(&config.cpus.reserved);
        let busy_poll = busy_poll_cpus(input.inventory, &topology.online);
        if !busy_poll.is_empty() && !allowed.difference(&busy_poll).is_empty() {
            evict = evict.union(&busy_poll);
            allowed = allowed.difference(&busy_poll);
        }
        let mut work = vec![0.0; nr];
        let mut core_work = vec![0.0; nr];
        for (cpu, slot) in work.iter_mut().enumerate() {
            *slot = input.load.cpu(cpu as u32).map_or(0.0, |c| c.processed_pps);
            if let Some(core) = core_work.get_mut(core_of[cpu] as usize) {
                *core += *slot;
            }
        }
        state.ticks += 1;
        state.note_allowed(&allowed, input.now_ns);
        let heat = hysteresis::classify(input.load, config, &allowed, &node_of, &mut state.streaks);
        let hot = heat.iter().any(|h| h.signal.is_some());
        crate::policy::rps_trial::observe(state, input.load, hot);
        let mut planner = Planner {
            topology,
            inventory: input.inventory,
            load: input.load,
            config,
            placement: input.placement,
            now_ns: input.now_ns,
            state,
            allowed,
            evict,
            busy_poll,
            core_of,
            node_of,
            heat,
            work,
            core_work,
            core_vectors: vec![0; nr],
            devices: Vec::new(),
            irqs: Vec::new(),
            relieved: CpuSet::new(),
            touched: CpuSet::new(),
            moved: HashSet::new(),
            planned: HashMap::new(),
            planned_rps: 0,
            budget: config.hysteresis.max_actions_per_tick,
            actions: Vec::new(),
            notes: Vec::new(),
            waiting: Vec::new(),
        };
        planner.notice_external_changes();
        planner.build_devices();
        planner.build_irqs();
        planner
    }

    fn build_devices(&mut self) {
        let config = self.config;
        for dev in &self.inventory.devices {
            let home = self.home_cpus(dev);
            let local = match config.numa {
                NumaPolicy::Ignore => self.allowed.clone(),
                NumaPolicy::Prefer => {
                    let local = home.intersection(&self.allowed);
                    if local.is_empty() {
                        self.allowed.clone()
                    } else {
                        local
                    }
                }
                NumaPolicy::Strict => home.intersection(&self.allowed),
            };
            let mut cores: Vec<u32> = local.iter().map(|c| self.core(c)).collect();
            cores.sort_unstable();
            cores.dedup();
            let local_cores = cores.len();
            self.devices.push(DeviceView {
                dev,
                local,
                home,
                vectors: Vec::new(),
                rps_mode: config.rps_mode(&dev.name),
                manages_irqs: config.manages_irqs_of(&dev.name),
                local_cores,
                no_free_dev_core: Cell::new(false),
                no_free_core: Cell::new(false),
                search_from: 0,
                on_cpu: Vec::new(),
                on_core: Vec::new(),
            });
        }
    }

    /// A device's NUMA-local CPUs: `local_cpus`, else its node's CPUs, else all online.
    fn home_cpus(&self, dev: &NetDevice) -> CpuSet {
        if let Some(local) = dev.local_cpus.as_ref().filter(|s| !s.is_empty()) {
            return local.intersection(&self.topology.online);
        }
        if let Some(node) = dev.numa_node {
            let cpus = self.topology.node_cpus(node);
            if !cpus.is_empty() {
                return cpus.intersection(&self.topology.online);
            }
        }
        self.topology.online.clone()
    }

    fn build_irqs(&mut self) {
        let by_name: HashMap<&str, usize> = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.dev.name.as_str(), i))
            .collect();
        let config = self.config;
        // Current values by IRQ number, gathered once without hashing.
        let highest = self.inventory.irqs.last().map_or(0, |irq| irq.irq as usize);
        let mut current_of: Vec<Option<&IrqAffinity>> = vec![None; highest + 1];
        for (&irq, values) in &self.placement.irqs {
            if let Some(slot) = current_of.get_mut(irq as usize) {
                *slot = Some(values);
            }
        }
        for irq in &self.inventory.irqs {
            let device = irq.device.as_deref().and_then(|n| by_name.get(n).copied());
            let queue_vector = device.is_some()
                && irq.queue.is_some()
                && matches!(irq.role, IrqRole::Rx | IrqRole::Rxtx);
            let current = current_of.get(irq.irq as usize).copied().flatten();
            let affinity = current.map(|a| &a.affinity).or(irq.affinity.as_ref());
            // Where it fires: a single-CPU mask is the answer, whatever a (possibly stale)
            // effective affinity says; a wide mask needs where its interrupts arrive.
            let cpu = match current {
                Some(values) => values.cpu(&self.topology.online),
                None => irq.affinity.as_ref().and_then(|affinity| {
                    IrqAffinity {
                        affinity: affinity.clone(),
                        effective: irq.effective_affinity.clone(),
                        ..IrqAffinity::default()
                    }
                    .cpu(&self.topology.online)
                }),
            };
            let will_fire_on = current
                .filter(|values| values.work_stays_on.is_some() && values.affinity.len() == 1)
                .and_then(|values| values.affinity.first())
                .filter(|&c| self.topology.online.contains(c));
            let target = Knob::IrqAffinity { irq: irq.irq };
            // A queue's transmit vector is placed with its queue (it follows the receive
            // vector), not left alone as a non-queue IRQ.
            let tx_vector = device.is_some() && irq.queue.is_some() && irq.role == IrqRole::Tx;
            let blocker = if irq.managed {
                Some(Blocker::Managed)
            } else if !self.state.failed.is_empty() && self.state.failed.contains_key(&target) {
                Some(Blocker::Failed)
            } else if !self.state.external.is_empty() && self.state.external.contains_key(&target) {
                Some(Blocker::External)
            } else if will_fire_on.is_some_and(|c| self.allowed.contains(c)) {
                // (A mask CPU banned or isolated since: the placement rules move it.)
                Some(Blocker::NoEffect)
            } else if affinity.is_none() {
                Some(Blocker::Unknown)
            } else if !config.irq.enabled || device.is_some_and(|d| !self.devices[d].manages_irqs) {
                Some(Blocker::Leave)
            } else if !queue_vector && !tx_vector && config.irq.non_queue == NonQueueIrqs::Leave {
                Some(Blocker::NonQueueLeft)
            } else {
                None
            };
            let slot = self.irqs.len();
            if queue_vector && let Some(d) = device {
                self.devices[d].vectors.push(slot);
            }
            self.irqs.push(IrqView {
                irq,
                device,
                queue_vector,
                affinity,
                cpu,
                will_fire_on,
                weight: 0.0,
                pps: 0.0,
                blocker,
                claimed: false,
            });
        }
        let irqs = &self.irqs;
        for device in &mut self.devices {
            device
                .vectors
                .sort_by_key(|&slot| (irqs[slot].irq.queue, irqs[slot].irq.irq));
        }
        self.weigh_vectors();
    }

    /// Receive work each queue vector brings to its CPU.
    fn weigh_vectors(&mut self) {
        let mut slots = Vec::new();
        let mut vectors = Vec::new();
        for (slot, view) in self.irqs.iter().enumerate() {
            let (true, Some(cpu), Some(queue), Some(d)) =
                (view.queue_vector, view.cpu, view.irq.queue, view.device)
            else {
                continue;
            };
            slots.push(slot);
            vectors.push(QueueVector {
                device: &self.devices[d].dev.name,
                queue,
                irq: view.irq.irq,
                cpu,
            });
        }
        let rates = self.load.attribute(&vectors);
        for ((slot, vector), pps) in slots.iter().zip(&vectors).zip(rates) {
            let measured = self
                .load
                .rx_queue_pps(vector.device, vector.queue)
                .is_some();
            let rps_on = self
                .placement
                .rx_queue(vector.device, vector.queue)
                .and_then(|q| q.rps_cpus.as_ref())
                .is_some_and(|m| m.len() > 1 || (m.len() == 1 && !m.contains(vector.cpu)));
            let view = &mut self.irqs[*slot];
            view.pps = pps;
            view.weight = if measured && rps_on {
                pps * RPS_INTERRUPT_SHARE
            } else {
                pps
            };
        }
    }
}
