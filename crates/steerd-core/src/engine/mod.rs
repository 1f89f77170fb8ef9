//! The engine: the machine model, the load, the policy's memory and the current values of
//! every knob, behind one [`Engine::tick`]`(sample, writer) -> report`.
//!
//! Three programs drive it, and only this makes them agree: the daemon (writing through
//! the actuator, or a dry run), `steerd plan` (a dry run over the same samples the daemon
//! takes) and the simulator (writing into its simulated machine). Each keeps what is its
//! own around the engine — the daemon its event loop, metrics and journal, the simulator
//! its ground truth — and nothing of a tick is written out twice.
//!
//! One tick: take the new sample, update the load, skip the policy when nothing could
//! change (`policy::can_skip`), else decide, write each action through the writer, learn
//! the value read back, and react to a failed write by its kind (give up, back off, stop
//! writing, rediscover). The engine is the one owner of current values: its writes and
//! rediscoveries update them, and the policy reads them from here. It is also the one that
//! stops writing (`writing_stopped`): a writer only writes, and the driver acts on the
//! report's [`Reaction::StopWriting`].

mod move_check;
mod ownership;
mod report;
mod retry;
mod wide;
mod writer;

pub mod napi_modes;
pub mod sampling;

use std::collections::BTreeMap;
use std::time::Instant;

use crate::apply::{FailureKind, WriteFailure};
use crate::config::Config;
use crate::cpuset::CpuSet;
use crate::discover::Machine;
use crate::kernel::procfs::interrupts::Interrupts;
use crate::knob::{Knob, KnobValue};
use crate::load::Load;
use crate::model::inventory::{Inventory, IrqRole, RxQueue};
use crate::model::snapshot::Snapshot;
use crate::policy::{self, Action, DecideInput, Placement, PolicyState};
use move_check::MoveChecks;

pub use move_check::{MoveEffect, MoveVerdict};
pub use ownership::TakenOver;
pub use report::{Outcome, Reaction, TickKind, TickReport};
pub use retry::{BACKOFF_BASE_NS, BACKOFF_MAX_NS, Retries};
pub use writer::{DryRun, Writer, Written};

/// How many times in a row an IRQ affinity write may read back another value before
/// steerd stops proposing it. Seen on a 6.1 x86 guest right after virtio_net reset its
/// vectors (a channel-count change): one write of `0` over the driver's `0-1` read back
/// `0-1` once, apparently while the kernel still moved the vector; a retry is cheap, and
/// a value the kernel really refuses is given up after these few tries.
pub const NOT_TAKEN_RETRIES: u32 = 3;

/// One tick's input: the new counters, and a way to read `proc/interrupts` should the
/// engine need to know where wide-mask vectors fire (rarely: see `wide`).
pub struct Sample<'a> {
    /// The counters just taken. The engine keeps them and hands back the buffer of an
    /// older sample in their place, for the next one: a tick allocates nothing for them.
    pub snapshot: &'a mut Snapshot,
    /// Reads `proc/interrupts`; `None` where it cannot (the simulator).
    pub interrupts: &'a mut dyn FnMut() -> Option<Interrupts>,
}

/// The engine's state across ticks.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    machine: Machine,
    /// Current values of every writable knob.
    placement: Placement,
    load: Load,
    policy: PolicyState,
    previous: Snapshot,
    current: Snapshot,
    /// Samples taken so far (rates need two).
    samples: u64,
    /// Something `decide` reads besides the load changed since it last ran (a new model,
    /// configuration or placement, a write): the next tick must decide.
    decide_needed: bool,
    retries: Retries,
    /// IRQs whose affinity write read back another value, with how many times in a row.
    not_taken: BTreeMap<u32, u32>,
    /// Applied moves of queue vectors being checked, and those that have not taken effect.
    moves: MoveChecks,
    /// Why nothing is written any more, once that is so: the driver said so at the start
    /// ([`Engine::stop_writing`]: a dry run, not root), or a write was not allowed
    /// ([`Reaction::StopWriting`]). From then on every action is a dry run; the writer is
    /// not asked. The one place this is decided.
    writing_stopped: Option<String>,
    /// Skip `decide` on ticks where `policy::can_skip` allows it (on; off only to check
    /// that skipping changes nothing).
    pub skip_idle: bool,
}

impl Engine {
    /// An engine for `machine` under `config`, remembering what an earlier run wrote
    /// (`policy`, from the state file after a crash).
    pub fn new(config: Config, machine: Machine, policy: PolicyState) -> Self {
        let placement = Placement::from_inventory(&machine.inventory);
        let mut engine = Engine {
            config,
            machine,
            placement,
            load: Load::new(),
            policy,
            previous: Snapshot::default(),
            current: Snapshot::default(),
            samples: 0,
            decide_needed: true,
            retries: Retries::default(),
            not_taken: BTreeMap::new(),
            moves: MoveChecks::default(),
            writing_stopped: None,
            skip_idle: true,
        };
        engine.watch_pending_placements();
        engine
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A new configuration takes effect from the next tick, which decides.
    pub fn set_config(&mut self, config: Config) {
        self.config = config;
        self.decide_needed = true;
    }

    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// A fresh model (a rediscovery): current values are read again from it, and the next
    /// tick decides. Returns the old model. What was learnt of a value that is gone (a
    /// backoff, a give-up) goes with it: an IRQ number or a queue that comes back (a NIC
    /// removed and found again, another device given the freed vector) is a new value, and
    /// a write that failed while its IRQ was being freed (EIO from procfs, the errno of a
    /// managed IRQ) must not keep steerd off its successor.
    pub fn replace_machine(&mut self, machine: Machine) -> Machine {
        self.placement = Placement::from_inventory(&machine.inventory);
        self.moves.mark(&mut self.placement);
        let placement = &self.placement;
        self.retries.retain(|knob| placement.value(knob).is_some());
        self.policy
            .retain_targets(|knob| placement.value(knob).is_some());
        self.decide_needed = true;
        let old = std::mem::replace(&mut self.machine, machine);
        self.watch_pending_placements();
        old
    }

    /// Starts checking every queue vector whose placement is pending in the model just
    /// read (`move_check`): its mask is a single online CPU and its effective affinity
    /// another, so its next interrupt, and under saturation its work, goes to the latter.
    fn watch_pending_placements(&mut self) {
        let online = &self.machine.topology.online;
        let single = |cpus: &Option<CpuSet>| {
            cpus.as_ref()
                .filter(|c| c.len() == 1)
                .and_then(CpuSet::first)
                .filter(|&c| online.contains(c))
        };
        let now_ns = self.current.taken_at_ns;
        let inventory = &self.machine.inventory;
        for irq in &inventory.irqs {
            let (Some(to), Some(from)) = (single(&irq.affinity), single(&irq.effective_affinity))
            else {
                continue;
            };
            if let (true, Some((device, queue))) = (from != to, queue_vector(inventory, irq.irq)) {
                self.moves
                    .start_pending(irq.irq, device, queue, from, to, now_ns);
            }
        }
    }

    /// The CPUs of isolated cgroup partitions as just read; a change makes the next tick
    /// decide, so work leaves newly isolated CPUs (or may return) in that tick.
    pub fn set_isolated_partitions(&mut self, cpus: &CpuSet) {
        let topology = &mut self.machine.topology;
        if topology.isolated_partitions != *cpus {
            topology.isolated_partitions = cpus.clone();
            self.decide_needed = true;
        }
    }

    /// Current values as a caller found them (the simulator reads its machine each
    /// tick); the next tick decides only if they differ from what the engine knew.
    pub fn observe_placement(&mut self, mut placement: Placement) {
        self.moves.mark(&mut placement);
        if placement != self.placement {
            self.placement = placement;
            self.decide_needed = true;
        }
    }

    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    pub fn load(&self) -> &Load {
        &self.load
    }

    pub fn policy(&self) -> &PolicyState {
        &self.policy
    }

    /// The latest sample, if any.
    pub fn last_sample(&self) -> Option<&Snapshot> {
        (self.samples >= 1).then_some(&self.current)
    }

    /// The last two samples (earlier, latest), once there are two.
    pub fn last_two_samples(&self) -> Option<(&Snapshot, &Snapshot)> {
        (self.samples >= 2).then_some((&self.previous, &self.current))
    }

    /// Writes nothing from now on, for `why` (`--dry-run`, not running as root): every
    /// action that would be written is a dry run, as after a write that was not allowed.
    pub fn stop_writing(&mut self, why: impl Into<String>) {
        self.writing_stopped = Some(why.into());
    }

    /// Why nothing is written, when it is not ([`Engine::stop_writing`], or the message of
    /// the write that was not allowed).
    pub fn writing_stopped(&self) -> Option<&str> {
        self.writing_stopped.as_deref()
    }

    /// Whether only the baseline sample has been taken: the next tick is the first that
    /// can decide.
    pub fn baseline_only(&self) -> bool {
        self.samples == 1
    }

    /// One tick: see the module's doc.
    pub fn tick(&mut self, sample: Sample<'_>, writer: &mut dyn Writer) -> TickReport {
        std::mem::swap(&mut self.previous, &mut self.current);
        std::mem::swap(&mut self.current, sample.snapshot);
        self.samples += 1;
        if self.samples == 1 {
            return TickReport::without_decision(TickKind::Baseline);
        }
        self.load
            .update(&self.previous, &self.current, self.config.load.smoothing);
        let moves = self.check_moves();
        if self.skip_idle && policy::can_skip(&self.input(), &self.policy, !self.decide_needed) {
            policy::skip_tick(&mut self.policy);
            let mut report = TickReport::without_decision(TickKind::Skipped);
            report.moves = moves;
            return report;
        }
        self.decide_needed = false;
        wide::locate(self, sample.interrupts);
        let started = Instant::now();
        // Field by field, not `self.input()`: the policy state is borrowed mutably beside.
        let input = decide_input(
            &self.machine,
            &self.load,
            &self.config,
            &self.placement,
            self.current.taken_at_ns,
        );
        let plan = policy::decide(&input, &mut self.policy);
        let decide_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut report = TickReport {
            kind: TickKind::Decided,
            outcomes: Vec::with_capacity(plan.actions.len()),
            plan,
            rediscover: false,
            decide_ns,
            moves,
        };
        for action in &report.plan.actions {
            let outcome = if report.rediscover {
                Outcome::Dropped
            } else {
                self.carry_out(action, writer)
            };
            if let Outcome::Failed {
                reaction: Reaction::Rediscover,
                ..
            } = outcome
            {
                report.rediscover = true;
            }
            report.outcomes.push(outcome);
        }
        report
    }

    /// Judges the moves being checked against the new sample (`move_check`); a change of
    /// a mark changes what the policy sees, so the tick decides.
    fn check_moves(&mut self) -> Vec<MoveVerdict> {
        let floor = policy::work_floor(&self.config);
        let checked = self
            .moves
            .check(&self.current, &self.load, floor, &mut self.placement);
        if checked.marks_changed {
            self.decide_needed = true;
        }
        checked.verdicts
    }

    fn input(&self) -> DecideInput<'_> {
        decide_input(
            &self.machine,
            &self.load,
            &self.config,
            &self.placement,
            self.current.taken_at_ns,
        )
    }

    /// Writes one action and learns from the result.
    fn carry_out(&mut self, action: &Action, writer: &mut dyn Writer) -> Outcome {
        let knob = &action.target;
        let now_ns = self.current.taken_at_ns;
        if self.placement.holds(knob, &action.new) == Some(true) {
            // The value the policy wants is there: nothing to write. The policy counts it
            // as its own, so it is not proposed again.
            self.policy.record_applied(action, now_ns);
            return Outcome::Unchanged;
        }
        // Even a dry run or a refused write changes what the next decision should see.
        self.decide_needed = true;
        if !self.may_try(knob, now_ns) {
            return Outcome::Deferred;
        }
        if self.writing_stopped.is_some() {
            return Outcome::DryRun;
        }
        let words = mask_words_in(
            &self.machine.inventory,
            knob,
            self.machine.topology.nr_cpu_ids,
        );
        match writer.write(knob, &action.new, words) {
            Ok(Written::NotWritten) => Outcome::DryRun,
            Ok(Written::Applied(after)) => {
                self.retries.succeeded(knob);
                let moved_from = self.queue_vector_cpu(knob);
                if let Knob::IrqAffinity { irq } = knob {
                    self.not_taken.remove(irq);
                }
                self.policy.record_applied(action, now_ns);
                self.record_value(knob, &after);
                if let Some((irq, from)) = moved_from {
                    self.check_move(irq, from, &after, now_ns);
                }
                Outcome::Applied
            }
            Err(failure) => {
                let reaction = self.react(action, &failure, writer);
                Outcome::Failed { failure, reaction }
            }
        }
    }

    /// Whether a write to `knob` may be attempted at `now_ns`: not failed for good (the
    /// policy's record, the one place a give-up is kept) and past any backoff.
    pub fn may_try(&self, knob: &Knob, now_ns: u64) -> bool {
        self.policy.failed(knob).is_none() && self.retries.may_try(knob, now_ns)
    }

    /// The reaction a failed write's kind calls for.
    fn react(
        &mut self,
        action: &Action,
        failure: &WriteFailure,
        writer: &mut dyn Writer,
    ) -> Reaction {
        let knob = &action.target;
        let now_ns = self.current.taken_at_ns;
        let give_up = |engine: &mut Engine| {
            engine
                .policy
                .record_failed(knob.clone(), failure.message.clone());
            Reaction::GivenUp
        };
        match failure.kind {
            // Not an error: the value is someone else's since steerd wrote it, and the
            // model has not seen it yet. Show the policy what is there; it notes the
            // change and follows `on_external_change` from the next tick.
            FailureKind::ChangedByOthers => {
                if let Some(now) = writer.read(knob) {
                    self.record_value(knob, &now);
                }
                Reaction::TheirsNow
            }
            FailureKind::NotTaken
                if let Knob::IrqAffinity { irq } = knob
                    && self.not_taken.get(irq).copied().unwrap_or(0) < NOT_TAKEN_RETRIES =>
            {
                *self.not_taken.entry(*irq).or_default() += 1;
                self.retries.back_off(knob, now_ns);
                Reaction::Retry
            }
            FailureKind::Managed
            | FailureKind::Bug
            | FailureKind::NotTaken
            | FailureKind::NoVectorSpace => give_up(self),
            FailureKind::NotAllowed => {
                self.writing_stopped = Some(failure.message.clone());
                Reaction::StopWriting
            }
            FailureKind::Vanished => Reaction::Rediscover,
            FailureKind::Transient | FailureKind::Other => {
                self.retries.back_off(knob, now_ns);
                Reaction::Retry
            }
        }
    }

    /// A queue vector's number and the CPU its work is on now, for a write to its mask:
    /// where its next interrupt arrives while its placement was found pending.
    fn queue_vector_cpu(&self, knob: &Knob) -> Option<(u32, u32)> {
        let Knob::IrqAffinity { irq } = knob else {
            return None;
        };
        if let Some(from) = self.moves.pending_from(*irq) {
            return Some((*irq, from));
        }
        let cpu = self
            .placement
            .irqs
            .get(irq)?
            .cpu(&self.machine.topology.online)?;
        Some((*irq, cpu))
    }

    /// Starts checking that a queue vector moved from `from` to the single CPU `value`
    /// names took its queue's work along, when that queue carries work (`move_check`).
    fn check_move(&mut self, irq: u32, from: u32, value: &KnobValue, now_ns: u64) {
        let KnobValue::Cpus(cpus) = value else {
            return;
        };
        let Some(to) = cpus.first().filter(|_| cpus.len() == 1) else {
            return;
        };
        let Some((device, queue)) = queue_vector(&self.machine.inventory, irq) else {
            return;
        };
        let floor = policy::work_floor(&self.config);
        // With per-queue counters every move is checked, an idle queue's once it receives
        // (move_check.rs). Without them: while its interrupts, or the work of the CPU it
        // was on (a saturated NAPI fires nothing), say it receives now.
        let receiving = match self.load.rx_queue_pps(device, queue) {
            Some(_) => true,
            None => {
                self.load.irq_rate(irq) > 0.0
                    || self
                        .load
                        .cpu(from)
                        .is_some_and(|c| c.processed_pps >= floor)
            }
        };
        if to != from && receiving {
            self.moves.start(irq, device, queue, from, to, now_ns);
        }
    }

    /// A value the caller read outside a write (the kernel's rewrite of a NAPI thread as
    /// cgroup partitions change), so the next decision starts from what is really there.
    pub fn observe_value(&mut self, knob: &Knob, value: &KnobValue) {
        self.record_value(knob, value);
        self.decide_needed = true;
    }

    /// Keeps the model in step with a value read back (after a write, or found changed by
    /// someone else), so the next decision starts from what is really there.
    fn record_value(&mut self, knob: &Knob, value: &KnobValue) {
        if let Knob::IrqAffinity { irq } = knob {
            // A new mask: an earlier move's check no longer holds (a move starts anew).
            self.moves.forget(*irq);
        }
        self.placement.set(knob, value);
        let inventory = &mut self.machine.inventory;
        match (knob, value) {
            (Knob::IrqAffinity { irq }, KnobValue::Cpus(cpus)) => {
                if let Ok(index) = inventory.irqs.binary_search_by_key(irq, |i| i.irq) {
                    let entry = &mut inventory.irqs[index];
                    entry.affinity = Some(cpus.clone());
                    // The kernel delivers it to the new mask from the next interrupt on;
                    // until rediscovery reads effective_affinity again, a single-CPU mask
                    // is where it fires, and for a wide mask nobody knows yet (as in the
                    // placement). Without this, steerd_irq_effective_cpu kept the old CPU
                    // for up to a rediscovery period after every move.
                    entry.effective_affinity = (cpus.len() == 1).then(|| cpus.clone());
                }
            }
            (Knob::RpsCpus { device, queue }, KnobValue::Cpus(cpus)) => {
                if let Some(q) = rx_queue_mut(inventory, device, *queue) {
                    q.rps_cpus = Some(cpus.clone());
                }
            }
            (Knob::RpsFlowCnt { device, queue }, KnobValue::Count(n)) => {
                if let Some(q) = rx_queue_mut(inventory, device, *queue) {
                    q.rps_flow_cnt = Some(*n);
                }
            }
            (Knob::RpsSockFlowEntries, KnobValue::Count(n)) => {
                inventory.rps_sock_flow_entries = Some(*n);
            }
            (Knob::NapiThread { pid, .. }, KnobValue::Cpus(cpus)) => {
                let thread = inventory
                    .devices
                    .iter_mut()
                    .flat_map(|d| d.rx_queues.iter_mut())
                    .filter_map(|q| q.napi_thread.as_mut())
                    .find(|t| t.pid == *pid);
                if let Some(thread) = thread {
                    thread.affinity = cpus.clone();
                }
            }
            (Knob::RssIndirection { device }, KnobValue::Table { indirection }) => {
                if let Some(d) = inventory.devices.iter_mut().find(|d| d.name == *device) {
                    d.rss_table = Some(indirection.clone());
                }
            }
            (Knob::XpsCpus { device, queue }, KnobValue::Cpus(cpus)) => {
                let tx = inventory
                    .devices
                    .iter_mut()
                    .find(|d| d.name == *device)
                    .and_then(|d| d.tx_queues.iter_mut().find(|q| q.index == *queue));
                if let Some(tx) = tx {
                    tx.xps_cpus = Some(cpus.clone());
                }
            }
            _ => {}
        }
    }
}

/// What the policy reads, from the engine's parts.
fn decide_input<'a>(
    machine: &'a Machine,
    load: &'a Load,
    config: &'a Config,
    placement: &'a Placement,
    now_ns: u64,
) -> DecideInput<'a> {
    DecideInput {
        topology: &machine.topology,
        inventory: &machine.inventory,
        load,
        config,
        placement,
        now_ns,
    }
}

/// The device and rx queue of `irq` when a move of it moves receive work, so that its
/// move can be checked: an rx (or rx/tx) vector of a known queue without a NAPI thread. A
/// threaded NAPI's work runs in its thread, which follows the vector in the same plan (or
/// spins where the operator pinned it): a silent vector says nothing there.
fn queue_vector(inventory: &Inventory, irq: u32) -> Option<(&str, u32)> {
    let vector = inventory.irq(irq)?;
    let device = vector.device.as_deref()?;
    let queue = vector.queue?;
    if !matches!(vector.role, IrqRole::Rx | IrqRole::Rxtx) {
        return None;
    }
    let threaded = inventory
        .device(device)
        .and_then(|d| d.rx_queues.iter().find(|q| q.index == queue))
        .is_some_and(|q| q.napi_thread.is_some());
    (!threaded).then_some((device, queue))
}

fn rx_queue_mut<'a>(
    inventory: &'a mut Inventory,
    device: &str,
    queue: u32,
) -> Option<&'a mut RxQueue> {
    inventory
        .devices
        .iter_mut()
        .find(|d| d.name == device)?
        .rx_queues
        .iter_mut()
        .find(|q| q.index == queue)
}

/// The width (32-bit words) a knob's mask is printed in: the width the kernel printed an
/// `rps_cpus` in when read, else the one `nr_cpu_ids` gives.
pub fn mask_words_in(inventory: &Inventory, knob: &Knob, nr_cpu_ids: u32) -> u32 {
    let default = nr_cpu_ids.div_ceil(32).max(1);
    match knob {
        Knob::RpsCpus { device, queue } => inventory
            .device(device)
            .and_then(|d| d.rx_queues.iter().find(|q| q.index == *queue))
            .map(|q| q.rps_mask_words)
            .filter(|&w| w > 0)
            .unwrap_or(default),
        _ => default,
    }
}

#[cfg(test)]
mod tests;
