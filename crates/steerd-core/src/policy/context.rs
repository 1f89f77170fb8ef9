//! One tick's working view of the machine, built from the policy's inputs, and the plan
//! under construction.
//!
//! Everything the rules need is laid out once per tick in flat arrays indexed by CPU id
//! (allowed CPUs, cores, nodes, receive work, queue-vector occupancy), so each rule is a
//! short loop and a 1152-CPU machine decides well under a millisecond. As actions are
//! planned the view is updated (work moves with an IRQ, occupancy follows), so later rules
//! see the machine as it will be.
//!
//! Building the view from the inputs is in [`build`]; this module has what the view is
//! and what the rules ask of it and do to it while they plan.

mod build;

use std::cell::Cell;
use std::collections::{HashMap, HashSet};

use super::hysteresis::{Heat, kilo};
use super::plan::{Action, Note, NoteKind, Reason, ReasonKind};
use super::state::PolicyState;
use crate::config::{Config, RpsMode};
use crate::cpuset::CpuSet;
use crate::knob::{Knob, KnobValue};
use crate::load::Load;
use crate::model::inventory::{DeviceKind, Inventory, Irq, IrqRole, NetDevice};
use crate::model::topology::Topology;

use super::placement::Placement;

/// A CPU "carries measured work" from this share of `watermarks.busy_pps` of receive
/// work up (5k pkt/s by default), and a queue vector below it is idle: placement never
/// moves an idle vector onto such a CPU while an idle one will do, so tidying up never
/// stacks a quiet queue onto the CPU doing the machine's work.
pub const WORK_FLOOR_SHARE: f64 = 0.1;

/// Receive work, packets/s, from which a CPU or a queue carries measured work under
/// `config`: `WORK_FLOOR_SHARE` of `busy_pps`.
pub fn work_floor(config: &Config) -> f64 {
    config.watermarks.busy_pps * WORK_FLOOR_SHARE
}

/// Share of a packet's receive cost that stays on the interrupting CPU once RPS moves the
/// protocol work away (measured 30-36 % on veth at 250k pkt/s; docs/kernel.md, "RPS").
pub const RPS_INTERRUPT_SHARE: f64 = 0.3;

/// Why an IRQ cannot be moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocker {
    /// Kernel-managed or read-only affinity.
    Managed,
    /// A write failed for good.
    Failed,
    /// Someone else changed it after steerd wrote it (and the config says respect).
    External,
    /// The device's config says `irqs: leave`, or `irq.enabled: false`.
    Leave,
    /// A non-queue IRQ with `irq.non_queue: leave`.
    NonQueueLeft,
    /// No readable affinity.
    Unknown,
    /// Its last move has not taken effect: its queue's NAPI keeps polling on the old CPU
    /// (`IrqAffinity::work_stays_on`). Moving it again would not move its work either.
    NoEffect,
}

/// One IRQ as the rules see it.
#[derive(Debug)]
pub struct IrqView<'a> {
    pub irq: &'a Irq,
    /// Index into the planner's devices.
    pub device: Option<usize>,
    /// An rx or combined queue vector of a device.
    pub queue_vector: bool,
    pub affinity: Option<&'a CpuSet>,
    /// The CPU it fires on (planned), which is where its queue's work is; for a vector
    /// whose move has not taken effect, the CPU its work stayed on.
    pub cpu: Option<u32>,
    /// For a vector whose move has not taken effect (`Blocker::NoEffect`): the CPU of its
    /// mask, where it will fire once its NAPI re-arms. It holds that CPU in the occupancy
    /// and its transmit vector stays there, so nothing moves in behind it meanwhile.
    pub will_fire_on: Option<u32>,
    /// Receive work it brings to its CPU, packets/s.
    pub weight: f64,
    /// Its queue's packets/s (measured or attributed).
    pub pps: f64,
    pub blocker: Option<Blocker>,
    /// Counted in the occupancy at `cpu` (queue vectors only).
    pub claimed: bool,
}

/// One network device as the rules see it.
#[derive(Debug)]
pub struct DeviceView<'a> {
    pub dev: &'a NetDevice,
    /// Allowed CPUs for this device under the NUMA policy (may be empty).
    pub local: CpuSet,
    /// The device's NUMA-local CPUs regardless of bans (all CPUs when unknown).
    pub home: CpuSet,
    /// Slots of its rx/combined queue vectors, by queue number.
    pub vectors: Vec<usize>,
    pub rps_mode: RpsMode,
    /// Whether steerd may move its IRQs (config).
    pub manages_irqs: bool,
    /// Physical cores among `local`.
    pub local_cores: usize,
    /// Set when a search found no local core free of this device's vectors, or of any
    /// device's; cleared when a vector leaves a CPU.
    pub no_free_dev_core: Cell<bool>,
    pub no_free_core: Cell<bool>,
    /// Where the next search for a free CPU starts: just after the last one placed, so a
    /// spread of hundreds of vectors does not rescan the filled CPUs each time.
    pub search_from: u32,
    /// Queue vectors claimed per CPU and per core id (sized lazily: devices without
    /// vectors, like hundreds of veths, cost nothing).
    on_cpu: Vec<u16>,
    on_core: Vec<u16>,
}

impl DeviceView<'_> {
    /// Queue vectors of this device claimed on a CPU.
    pub fn on_cpu(&self, cpu: u32) -> u16 {
        self.on_cpu.get(cpu as usize).copied().unwrap_or(0)
    }

    /// Queue vectors of this device claimed on a core.
    pub fn on_core(&self, core: u32) -> u16 {
        self.on_core.get(core as usize).copied().unwrap_or(0)
    }

    fn count(counts: &mut Vec<u16>, index: u32, up: bool) {
        let index = index as usize;
        if counts.len() <= index {
            counts.resize(index + 1, 0);
        }
        counts[index] = if up {
            counts[index].saturating_add(1)
        } else {
            counts[index].saturating_sub(1)
        };
    }
}

/// The working view and the plan being built.
pub struct Planner<'a> {
    pub topology: &'a Topology,
    pub inventory: &'a Inventory,
    pub load: &'a Load,
    pub config: &'a Config,
    pub placement: &'a Placement,
    pub now_ns: u64,
    pub state: &'a mut PolicyState,

    /// Online CPUs steerd may place work on.
    pub allowed: CpuSet,
    /// CPUs steerd moves its IRQs off: banned, set aside (isolated, nohz_full, isolated
    /// cgroup partitions), and those a
    /// busy-polling NAPI thread is pinned to ([`busy_poll_cpus`]).
    pub evict: CpuSet,
    /// CPUs pinned busy-polling NAPI threads spin on.
    pub busy_poll: CpuSet,
    pub core_of: Vec<u32>,
    pub node_of: Vec<Option<u32>>,
    pub heat: Vec<Heat>,
    /// Receive work per CPU as planned, packets/s (change it with `shift_work`).
    pub work: Vec<f64>,
    /// Receive work per core id, the sum over its CPUs.
    pub core_work: Vec<f64>,
    /// Queue vectors claimed per core (all devices).
    pub core_vectors: Vec<u16>,

    pub devices: Vec<DeviceView<'a>>,
    pub irqs: Vec<IrqView<'a>>,

    /// CPUs that planned IRQ moves take work off this tick.
    pub relieved: CpuSet,
    /// CPUs whose work this plan changes: their hot streaks start over, so the next
    /// decision about them waits for a confirmed view of the new situation.
    pub touched: CpuSet,
    /// IRQs moved this tick.
    pub moved: HashSet<u32>,
    /// RPS masks and flow table sizes this plan sets.
    pub planned: HashMap<Knob, KnobValue>,
    /// How many of them are RPS masks (lookups are skipped while there are none).
    pub planned_rps: usize,
    /// Action groups still allowed this tick.
    pub budget: u32,
    pub actions: Vec<Action>,
    pub notes: Vec<Note>,
    /// Why something that could happen did not happen yet (for the idle reason).
    pub waiting: Vec<String>,
}

/// Whether RPS applies to this kind of device (upper devices see packets after the lower
/// device's RPS already ran).
pub fn rps_capable(kind: DeviceKind) -> bool {
    matches!(
        kind,
        DeviceKind::Physical | DeviceKind::Virtio | DeviceKind::Veth | DeviceKind::OtherVirtual
    )
}

/// The CPUs busy-polling NAPI threads (`threaded` busy-poll, 6.19) are pinned to.
///
/// Such a thread never sleeps: it keeps its CPU busy polling its queue, so any other
/// queue's interrupt, NAPI thread or RPS work placed there competes with a thread that
/// never yields, and the CPU looks hot whatever is moved (the NAPI documentation's
/// "Threaded NAPI busy polling" leaves its affinity to user space). steerd leaves these
/// threads where the operator pinned them and keeps everything else off their CPUs. A
/// thread allowed on every online CPU says nothing about where it spins (`steerd doctor`
/// flags it) and reserves nothing.
pub fn busy_poll_cpus(inventory: &Inventory, online: &CpuSet) -> CpuSet {
    let mut cpus = CpuSet::new();
    for queue in inventory.devices.iter().flat_map(|d| &d.rx_queues) {
        if !queue.napi.busy_polls() {
            continue;
        }
        if let Some(thread) = &queue.napi_thread {
            let pinned = thread.affinity.intersection(online);
            if !pinned.is_empty() && pinned != *online {
                cpus = cpus.union(&pinned);
            }
        }
    }
    cpus
}

impl<'a> Planner<'a> {
    /// Physical core of a CPU.
    pub fn core(&self, cpu: u32) -> u32 {
        self.core_of.get(cpu as usize).copied().unwrap_or(cpu)
    }

    /// The slot of an IRQ in `irqs` (built in the inventory's order: by number).
    pub fn slot_of(&self, irq: u32) -> Option<usize> {
        self.irqs
            .binary_search_by_key(&irq, |view| view.irq.irq)
            .ok()
    }

    /// Receive work from which a CPU carries measured work (see [`work_floor`]).
    pub fn work_floor(&self) -> f64 {
        work_floor(self.config)
    }

    /// Receive work of a CPU as planned.
    pub fn work_of(&self, cpu: u32) -> f64 {
        self.work.get(cpu as usize).copied().unwrap_or(0.0)
    }

    /// The work of a CPU plus half that of its hyperthread siblings: how busy its core is.
    pub fn core_load(&self, cpu: u32) -> f64 {
        let own = self.work_of(cpu);
        let core = self
            .core_work
            .get(self.core(cpu) as usize)
            .copied()
            .unwrap_or(own);
        own + 0.5 * (core - own).max(0.0)
    }

    /// Moves `amount` packets/s of planned work from one CPU to another.
    pub fn shift_work(&mut self, from: Option<u32>, to: Option<u32>, amount: f64) {
        for (cpu, sign) in [(from, -1.0), (to, 1.0)] {
            let Some(cpu) = cpu else { continue };
            let core = self.core(cpu) as usize;
            if let Some(w) = self.work.get_mut(cpu as usize) {
                let before = *w;
                *w = (*w + sign * amount).max(0.0);
                let delta = *w - before;
                if let Some(c) = self.core_work.get_mut(core) {
                    *c += delta;
                }
            }
        }
    }

    pub fn heat_of(&self, cpu: u32) -> Heat {
        self.heat.get(cpu as usize).copied().unwrap_or_default()
    }

    /// Counts a queue vector in the occupancy of the CPU it fires on.
    pub fn claim(&mut self, slot: usize) {
        self.occupy(slot, true);
    }

    /// Takes a queue vector out of the occupancy.
    pub fn release(&mut self, slot: usize) {
        if self.occupy(slot, false) {
            for device in &self.devices {
                device.no_free_dev_core.set(false);
                device.no_free_core.set(false);
            }
        }
    }

    /// Counts a queue vector of a device, on a known CPU, in (`claim`) or out of the
    /// occupancy of its CPU and core, per device and over all devices: the one bookkeeping
    /// [`Self::claim`] and [`Self::release`] do in opposite directions. `false` when there
    /// was nothing to do (no device or CPU, or already counted that way).
    fn occupy(&mut self, slot: usize, claim: bool) -> bool {
        let view = &self.irqs[slot];
        let (Some(d), Some(cpu)) = (view.device, view.will_fire_on.or(view.cpu)) else {
            return false;
        };
        if view.claimed == claim {
            return false;
        }
        let core = self.core(cpu);
        let dev = &mut self.devices[d];
        DeviceView::count(&mut dev.on_cpu, cpu, claim);
        DeviceView::count(&mut dev.on_core, core, claim);
        if let Some(n) = self.core_vectors.get_mut(core as usize) {
            if claim {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
            }
        }
        self.irqs[slot].claimed = claim;
        true
    }

    /// Takes one unit of the per-tick budget; false (and a waiting note) when spent.
    pub fn spend(&mut self, what: &str) -> bool {
        if self.budget == 0 {
            self.waiting.push(format!(
                "{what}: waits for the next tick (hysteresis.max_actions_per_tick = {})",
                self.config.hysteresis.max_actions_per_tick
            ));
            return false;
        }
        self.budget -= 1;
        true
    }

    /// Adds an action to the plan (budget already spent by the caller).
    pub fn push(
        &mut self,
        target: Knob,
        serves: Option<String>,
        old: KnobValue,
        new: KnobValue,
        reason: (ReasonKind, String),
        expected: String,
    ) {
        // Later rules look up planned masks and counts; IRQ moves live in the view.
        match target {
            Knob::IrqAffinity { .. } => {}
            Knob::RpsCpus { .. } => {
                self.planned_rps += 1;
                self.planned.insert(target.clone(), new.clone());
            }
            _ => {
                self.planned.insert(target.clone(), new.clone());
            }
        }
        self.actions.push(Action {
            target,
            serves,
            old,
            new,
            reason: Reason {
                kind: reason.0,
                text: reason.1,
            },
            expected,
        });
    }

    /// Adds a note, marking whether it is new.
    pub fn note(&mut self, kind: NoteKind, target: Option<Knob>, key: String, text: String) {
        let new = self.state.first_report(kind, key);
        self.notes.push(Note {
            kind,
            target,
            text,
            new,
        });
    }

    /// `eth0 rx-3` for a queue vector (`eth0 tx-3` for a transmit vector), the IRQ's name
    /// otherwise.
    pub fn serves(&self, slot: usize) -> String {
        let view = &self.irqs[slot];
        match (view.device, view.irq.queue) {
            (Some(d), Some(q)) if view.irq.role == IrqRole::Tx => {
                format!("{} tx-{q}", self.devices[d].dev.name)
            }
            (Some(d), Some(q)) => format!("{} rx-{q}", self.devices[d].dev.name),
            _ => view.irq.name.clone(),
        }
    }

    /// Whether the target is frozen (taken over by someone else, or failed for good).
    pub fn frozen(&self, target: &Knob) -> bool {
        (!self.state.external.is_empty() && self.state.external.contains_key(target))
            || (!self.state.failed.is_empty() && self.state.failed.contains_key(target))
    }

    /// The current RPS mask of a queue as this plan leaves it.
    pub fn rps_mask(&self, device: &str, queue: u32) -> Option<CpuSet> {
        if self.planned_rps > 0 {
            let target = Knob::RpsCpus {
                device: device.to_string(),
                queue,
            };
            if let Some(KnobValue::Cpus(set)) = self.planned.get(&target) {
                return Some(set.clone());
            }
        }
        self.placement
            .rx_queue(device, queue)
            .and_then(|q| q.rps_cpus.clone())
    }

    /// Restarts the hot and distress streaks of the CPUs this plan changes.
    pub fn restart_streaks(&mut self) {
        for cpu in self.touched.iter() {
            if let Some(streak) = self.state.streaks.get_mut(cpu as usize) {
                streak.hot = 0;
                streak.distress = 0;
            }
        }
    }

    /// The hottest CPU, for the idle reason.
    pub fn hottest(&self) -> Option<(u32, f64, f64)> {
        self.load.busiest_cpu()
    }

    /// Text for "why nothing happened".
    pub fn idle_reason(&self) -> String {
        if let Some(first) = self.waiting.first() {
            return first.clone();
        }
        let hot: Vec<u32> = (0..self.heat.len() as u32)
            .filter(|&c| self.heat_of(c).hot)
            .collect();
        if let Some(&cpu) = hot.first() {
            let heat = self.heat_of(cpu).describe(cpu, self.config);
            // RPS acts on measured work: a CPU hot with fewer packets than that (a very
            // high cost per packet: docs/policy.md, "RPS's trigger") gets none, and the
            // plan says so rather than pointing at notes it may not have.
            let work = self.work_of(cpu);
            if work > 0.0 && work < self.work_floor() {
                return format!(
                    "{heat}, but it processes {} pkt/s, under the {} pkt/s from which steerd counts receive work as measured (watermarks.busy_pps x {WORK_FLOOR_SHARE}): RPS is not tried for it, and no IRQ move is predicted to help",
                    kilo(work),
                    kilo(self.work_floor())
                );
            }
            let see_notes = if self.notes.is_empty() {
                ""
            } else {
                " (see notes)"
            };
            return format!(
                "{heat}, and no IRQ move or RPS change is predicted to help{see_notes}"
            );
        }
        if self.load.samples == 0 {
            return "no load measured yet: rates need two samples".to_string();
        }
        crate::status_report::no_cpu_is_hot(
            self.config.watermarks.high,
            self.config.watermarks.imbalance,
            self.config.watermarks.busy_pps,
            self.hottest(),
        )
    }
}
