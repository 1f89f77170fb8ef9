//! The daemon: one tick loop, on a thread that waits with one `poll` (see [`wakeups`]),
//! beside the HTTP endpoint on a current-thread tokio runtime of its own.
//!
//! Each tick samples the per-tick counters, updates the load model, asks the policy for a
//! plan and hands the plan to the actuator, then reports (metrics, decision log, journal).
//! Around the loop: discovery at start, again on link events, queue uevents (a
//! channel-count change), CPU hot-plug and a slow timer; SIGHUP (and, with `--watch-config`, a changed file) reloads the configuration;
//! irqbalance's ban file is followed when `cpus.irqbalance_banned_cpus` is on;
//! SIGTERM/SIGINT restore what steerd changed and exit 0; systemd hears READY, RELOADING,
//! WATCHDOG and STOPPING.
//!
//! The loop is deliberately sequential: one tick never overlaps the next, a reload lands
//! between ticks, and shutdown happens after the tick in flight.

pub mod quiet;
pub mod wakeups;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::os::fd::AsFd;

use tracing::{debug, error, info, warn};

use crate::apply::{Actuator, DEFAULT_STATE_FILE, FailureKind, WriteFailure};
use crate::config::{Config, check_config_for};
use crate::decisions::Decision;
use crate::discover::{Machine, discover};
use crate::http::{ServerThread, Shared};
use crate::irqbalance_compat::{self, IrqbalanceBan};
use crate::kernel::link_events::LinkEvents;
use crate::kernel::queue_counters::{DeviceId, QueueCounterSource};
use crate::kernel::queue_events::QueueEvents;
use crate::kernel::sampler::TickSampler;
use crate::knob::{Knob, KnobValue};
use crate::load::Load;
use crate::metrics::{CpuLoadGauges, IrqLabels, QueueLabels};
use crate::model::inventory::IrqRole;
use crate::model::snapshot::Snapshot;
use crate::policy::{self, Action, DecideInput, Placement, PolicyState, Target, Value};
use crate::root::Root;
use crate::status_report::{Calm, NoWrites, Verdict};

/// How often the machine is rediscovered when nothing announced a change: catches what
/// neither a link event nor [`RECHECK_EVERY`] reports (an IRQ steerd never wrote moved by
/// someone else, a new `effective_affinity`). A full discovery costs 2-3 ms of CPU on a
/// small machine, so every 30 s would be most of the daemon's idle CPU budget.
pub const REDISCOVER_EVERY: Duration = Duration::from_secs(300);

/// While idle (the policy had nothing to decide), `proc/stat` is read on every this many
/// ticks, `softnet_stat` on every tick. New receive work shows in `softnet_stat` at once
/// and ends the idle stretch; only a rise of interrupt time without packets (another
/// device's IRQs) is seen up to this many ticks later. In quiet mode, whose ticks are far
/// apart, both files are read on every tick.
pub const STAT_EVERY_IDLE_TICKS: u64 = 5;

/// How often the values steerd wrote are read back to notice someone else's change: one
/// small read per value, and a rediscovery only when one differs.
pub const RECHECK_EVERY: Duration = Duration::from_secs(30);

/// How many times in a row an IRQ affinity write may read back another value before
/// steerd stops proposing it. Seen on a 6.1 x86 guest right after virtio_net reset its
/// vectors (a channel-count change): one write of `0` over the driver's `0-1` read back
/// `0-1` once, apparently while the kernel still moved the vector; a retry is cheap, and
/// a value the kernel really refuses is given up after these few tries.
pub const NOT_TAKEN_RETRIES: u32 = 3;

/// The shortest gap between ticks while a hot signal is being confirmed.
pub const FAST_TICK_MIN: Duration = Duration::from_millis(100);

/// What `steerd run` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub root: Root,
    pub config_path: Option<PathBuf>,
    /// Reload when the configuration file changes, not only on SIGHUP.
    pub watch_config: bool,
    pub dry_run: bool,
    pub interval: Option<Duration>,
    pub metrics_listen: SocketAddr,
    pub state_file: Option<PathBuf>,
}

/// Runs the daemon until SIGTERM or SIGINT. Errors at start-up (unreadable config, no
/// `proc/stat`, port in use) are returned; once running, errors are logged and counted.
pub fn run(options: Options) -> Result<(), String> {
    // Before any thread starts, so that every thread inherits the blocked mask.
    let mut signals = wakeups::Signals::block_and_open()
        .map_err(|e| format!("cannot set up signal handling: {e}"))?;
    let shared = Shared::new();
    let server = ServerThread::start(options.metrics_listen, shared.clone())?;
    let mut daemon = Daemon::start(options, shared, server)?;
    daemon.run(&mut signals)
}

/// The configuration file's text (`None`: no file, the built-in default).
fn read_config_text(path: &Option<PathBuf>) -> Result<Option<String>, Vec<String>> {
    let Some(path) = path else {
        return Ok(None);
    };
    crate::config::read_config_file(path)
        .map(Some)
        .map_err(|e| vec![e.to_string()])
}

/// Checks a configuration text (without the machine: used before discovery).
fn check_config_text(
    path: &Option<PathBuf>,
    text: &Option<String>,
    machine: Option<&Machine>,
) -> Result<Config, Vec<String>> {
    let (Some(path), Some(text)) = (path, text) else {
        return Ok(Config::default());
    };
    let checked = match machine {
        Some(machine) => check_config_for(text, &machine.topology),
        None => crate::config::check_config(text),
    };
    checked.map_err(|errors| {
        errors
            .iter()
            .map(|e| format!("{}: {e}", path.display()))
            .collect()
    })
}

struct Daemon {
    options: Options,
    /// The configuration in effect: the file's (or the default), with `--interval` and
    /// irqbalance's ban applied.
    config: Config,
    /// The configuration as read from the file (or the default), before the overlays.
    file_config: Config,
    /// The text `file_config` was read from, to tell a real change from a touched file.
    config_text: Option<String>,
    /// irqbalance's ban, when `cpus.irqbalance_banned_cpus` is on.
    irqbalance_ban: IrqbalanceBan,
    /// The configuration file and irqbalance's ban files, when followed.
    files: Option<wakeups::FileWatch>,
    /// A followed file changed: look at it at the start of the next tick (an editor's
    /// burst of events becomes one reload, of the finished file).
    files_changed: bool,
    machine: Machine,
    sampler: TickSampler,
    previous: Snapshot,
    current: Snapshot,
    have_previous: bool,
    load: Load,
    policy: PolicyState,
    /// Current values of every writable target, kept in step with steerd's writes.
    placement: Placement,
    actuator: Actuator,
    shared: Arc<Shared>,
    /// Why steerd does not write, when it does not.
    observe_only: Option<String>,
    link_events: Option<LinkEvents>,
    /// Kernel uevents: a network device's queues added or removed (`ethtool -L`).
    queue_events: Option<QueueEvents>,
    /// Per-queue packet counters (netdev qstats, else `ethtool -S`), on the host only.
    queue_source: Option<QueueCounterSource>,
    /// Devices whose per-queue rates tell the policy something: several rx queues served
    /// by distinct IRQs. Single-queue and IRQ-less devices (veth) cost nothing per tick.
    queue_devices: Vec<(String, u32)>,
    tick: u64,
    started: Instant,
    last_discovery: Instant,
    last_recheck: Instant,
    watchdog: Option<Duration>,
    last_watchdog: Instant,
    reported_managed: std::collections::BTreeSet<u32>,
    /// IRQs whose affinity write read back another value, with how many times in a row:
    /// retried with the actuator's backoff up to [`NOT_TAKEN_RETRIES`] times.
    irq_not_taken: std::collections::BTreeMap<u32, u32>,
    /// Set when this tick rediscovered the machine after a write found its target gone.
    plan_stale: bool,
    /// Something `decide` reads besides the load changed since it last ran (discovery,
    /// configuration, a write): the next tick must decide (see `policy::can_skip`).
    decide_needed: bool,
    /// Consecutive ticks that skipped `decide`; while idle (and not in quiet mode),
    /// `proc/stat` is read on every [`STAT_EVERY_IDLE_TICKS`]th tick only.
    idle_ticks: u64,
    /// The online CPUs' load gauges, refreshed on discovery; every tick sets them.
    cpu_gauges: Vec<CpuLoadGauges>,
    /// Quiet mode: longer sleeps while no receive work arrives, woken by the kernel.
    quiet: quiet::Quiet,
    /// This tick skipped `decide` (for quiet mode).
    skipped_this_tick: bool,
    server: Option<ServerThread>,
}

impl Daemon {
    fn start(
        options: Options,
        shared: Arc<Shared>,
        server: ServerThread,
    ) -> Result<Daemon, String> {
        let root = options.root.clone();
        let config_text = read_config_text(&options.config_path).map_err(|e| e.join("\n"))?;
        // Syntax and values first: a broken file is reported before the machine is read.
        check_config_text(&options.config_path, &config_text, None).map_err(|e| e.join("\n"))?;
        let machine = discover(&root).map_err(|e| format!("discovery failed: {e}"))?;
        // Now that the machine is known, check the CPU lists against it.
        let file_config = check_config_text(&options.config_path, &config_text, Some(&machine))
            .map_err(|e| e.join("\n"))?;
        for warning in &machine.warnings {
            warn!(warning = %warning, "discovery: {warning}");
        }
        let sampler = TickSampler::open(&root).map_err(|e| e.to_string())?;
        let state_file = options
            .state_file
            .clone()
            .unwrap_or_else(|| root.path(DEFAULT_STATE_FILE));
        let actuator = Actuator::open(root.clone(), state_file).map_err(|e| e.to_string())?;
        let observe_only = if options.dry_run {
            Some("--dry-run".to_string())
        } else if root.is_host() && !nix::unistd::geteuid().is_root() {
            Some("not running as root".to_string())
        } else {
            None
        };
        match &observe_only {
            Some(why) if options.dry_run => {
                info!(reason = %why, "dry run ({why}): deciding and reporting, writing nothing")
            }
            Some(why) => warn!(
                reason = %why,
                "observe-only: {why}, so deciding and reporting but writing nothing (run steerd as root to steer)"
            ),
            None => {}
        }
        let link_events = subscribe_on_host(&root, LinkEvents::subscribe, || {
            format!(
                "no link events; rediscovering every {}s only",
                REDISCOVER_EVERY.as_secs()
            )
        });
        let queue_events = subscribe_on_host(&root, QueueEvents::subscribe, || {
            format!(
                "no queue uevents; a channel-count change (ethtool -L) is seen only by the read-back every {}s",
                RECHECK_EVERY.as_secs()
            )
        });
        shared
            .metrics
            .observe_only
            .set(i64::from(observe_only.is_some()));
        let now = Instant::now();
        let mut daemon = Daemon {
            policy: policy_state_from(&actuator),
            placement: Placement::default(),
            load: Load::new(),
            config: file_config.clone(),
            file_config,
            config_text,
            irqbalance_ban: IrqbalanceBan::default(),
            files: None,
            files_changed: false,
            options,
            machine,
            sampler,
            previous: Snapshot::default(),
            current: Snapshot::default(),
            have_previous: false,
            actuator,
            shared,
            observe_only,
            link_events,
            queue_events,
            queue_source: None,
            queue_devices: Vec::new(),
            tick: 0,
            started: now,
            last_discovery: now,
            last_recheck: now,
            watchdog: sd_notify::watchdog_enabled(),
            last_watchdog: now,
            reported_managed: Default::default(),
            irq_not_taken: Default::default(),
            plan_stale: false,
            decide_needed: true,
            idle_ticks: 0,
            cpu_gauges: Vec::new(),
            quiet: quiet::Quiet::new(root.is_host()),
            skipped_this_tick: false,
            server: Some(server),
        };
        daemon.start_status();
        daemon.read_irqbalance_ban();
        daemon.apply_overlays();
        daemon.follow_files();
        daemon.after_discovery();
        daemon.export_quiet_state();
        info!(
            devices = daemon.machine.inventory.devices.len(),
            irqs = daemon.machine.inventory.irqs.len(),
            cpus = daemon.machine.topology.online.len(),
            interval_ms = daemon.config.interval.as_millis() as u64,
            listen = %daemon.options.metrics_listen,
            "steerd started"
        );
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status("running"),
        ]);
        Ok(daemon)
    }

    fn run(&mut self, signals: &mut wakeups::Signals) -> Result<(), String> {
        let mut waiter = wakeups::Waiter::new(
            signals,
            self.link_events.as_ref().map(AsFd::as_fd),
            self.queue_events.as_ref().map(AsFd::as_fd),
        )
        .map_err(|e| format!("cannot set up the wake-ups: {e}"))?;
        // The first tick at once: it takes the baseline sample the next one measures from.
        let mut last_tick = Instant::now();
        self.tick_once();
        let mut next_tick = Instant::now() + self.next_tick_in();
        'ticking: loop {
            if let Err(e) = waiter.follow(self.files.as_ref().map(AsFd::as_fd)) {
                warn!(error = %e, "cannot follow the watched files; reload with SIGHUP: {e}");
                self.files = None;
            }
            if let Err(e) = waiter.watch_receive(self.quiet.wake_fd()) {
                // Not expected (epoll_ctl on a new descriptor): stay awake until a reload.
                warn!(error = %e, "cannot wait for receive work; quiet mode off until a reload: {e}");
                self.quiet.give_up(format!("epoll_ctl: {e}"));
                self.export_quiet_state();
                next_tick = next_tick.min(Instant::now() + self.config.interval);
            }
            let mut timeout = next_tick.saturating_duration_since(Instant::now());
            if let Some(ping) = self.until_watchdog_ping() {
                timeout = timeout.min(ping);
            }
            let ready = match waiter.wait(timeout) {
                Ok(ready) => ready,
                Err(e) => {
                    // Not expected (epoll_wait fails only on bad arguments); wait a
                    // tick rather than spin.
                    error!(error = %e, "epoll_wait failed: {e}");
                    std::thread::sleep(timeout);
                    wakeups::Ready::default()
                }
            };
            // Something for the next tick to act on: while asleep in quiet mode, that tick
            // comes now, not at the end of the sleep.
            let mut act_now = false;
            if ready.signal {
                for request in signals.pending() {
                    match request {
                        wakeups::Request::Reload => {
                            self.reload("SIGHUP");
                            act_now = true;
                        }
                        wakeups::Request::Stop(signal) => {
                            info!(signal, "stopping");
                            break 'ticking;
                        }
                    }
                }
            }
            if ready.link {
                let changed = self
                    .link_events
                    .as_mut()
                    .map_or(0, |events| events.drain().unwrap_or(1));
                if changed > 0 {
                    self.rediscover("link event");
                    act_now = true;
                }
            }
            if ready.queues {
                // Most uevents are not about network queues: those cost one `recv` each.
                let changed = self
                    .queue_events
                    .as_mut()
                    .map_or(0, |events| events.drain().unwrap_or(1));
                if changed > 0 {
                    self.rediscover("queues added or removed");
                    act_now = true;
                }
            }
            if ready.files && self.files.as_mut().is_some_and(|files| files.drain()) {
                self.files_changed = true;
                act_now = true;
            }
            if ready.receive && self.quiet.woken_by_receive_work() == quiet::Change::WokeUp {
                // Out of the epoll set at once: until it is closed after the tick, more
                // receive work would end every wait at once.
                if let Some(fd) = self.quiet.retired_fd() {
                    waiter.unwatch_receive(fd);
                }
                self.shared.metrics.quiet_receive_wakeups.inc();
                self.export_quiet_state();
                debug!("receive work ended quiet mode");
                // Tick now: its sample is the baseline the fast follow-up measures from.
                next_tick = next_tick.min(Instant::now().max(last_tick + FAST_TICK_MIN));
            }
            if act_now && self.quiet.is_asleep() {
                next_tick = next_tick.min(Instant::now().max(last_tick + FAST_TICK_MIN));
            }
            let now = Instant::now();
            if now >= next_tick {
                last_tick = now;
                self.tick_once();
                // After the tick: closing them waits for an RCU grace period.
                self.quiet.close_retired();
                // The next deadline keeps the tick's phase; a tick that overran its slot
                // starts the next one a full gap later rather than a burst of catch-ups.
                let gap = self.next_tick_in();
                self.quiet.followed_up();
                next_tick += gap;
                let now = Instant::now();
                if next_tick <= now {
                    next_tick = now + gap;
                }
            }
            self.ping_watchdog();
        }
        self.shutdown();
        Ok(())
    }

    /// The gap to the next tick: the configured interval, or a quarter of it (at least
    /// [`FAST_TICK_MIN`]) while a hot signal awaits confirmation, so that the K
    /// confirming samples come within about a second instead of K intervals.
    fn next_tick_in(&self) -> Duration {
        if let Some(gap) = self.quiet.gap(&self.config) {
            return gap;
        }
        let interval = self.config.interval;
        if self.policy.confirming(self.config.hysteresis.confirm_ticks) {
            (interval / 4).max(FAST_TICK_MIN).min(interval)
        } else {
            interval
        }
    }

    fn tick_once(&mut self) {
        let started = Instant::now();
        self.tick += 1;
        if self.files_changed {
            self.files_changed = false;
            self.look_at_followed_files();
        }
        if self.last_discovery.elapsed() >= REDISCOVER_EVERY {
            self.rediscover("periodic");
        } else if self.last_recheck.elapsed() >= RECHECK_EVERY {
            self.recheck_written();
        }
        std::mem::swap(&mut self.previous, &mut self.current);
        let sampled = if self.idle_ticks > 0
            && !self.idle_ticks.is_multiple_of(STAT_EVERY_IDLE_TICKS)
            && !self.quiet.is_asleep()
        {
            self.current.carry_stat_from(&self.previous);
            self.sampler.sample_softnet_only(&mut self.current)
        } else {
            self.sampler.sample(&mut self.current)
        };
        if let Err(e) = sampled {
            error!(error = %e, "sampling failed; skipping this tick: {e}");
            std::mem::swap(&mut self.previous, &mut self.current);
            self.set_verdict(Verdict::SamplingFailed, None);
            return;
        }
        if self.have_previous && online_cpus_changed(&self.previous, &self.current) {
            self.rediscover("CPU hot-plug");
        }
        self.sample_queues();
        if self.have_previous {
            self.load
                .update(&self.previous, &self.current, self.config.load.smoothing);
            let input = DecideInput {
                topology: &self.machine.topology,
                inventory: &self.machine.inventory,
                load: &self.load,
                config: &self.config,
                placement: &self.placement,
                now_ns: self.current.taken_at_ns,
            };
            if policy::can_skip(&input, &self.policy, !self.decide_needed) {
                policy::skip_tick(&mut self.policy);
                self.set_verdict(Verdict::Calm(self.calm()), None);
                self.idle_ticks += 1;
                self.skipped_this_tick = true;
                self.shared.metrics.ticks_skipped.inc();
                self.export_load();
                self.finish_tick(started);
                return;
            }
            self.decide_needed = false;
            self.idle_ticks = 0;
            self.locate_wide_vectors();
            let input = DecideInput {
                topology: &self.machine.topology,
                inventory: &self.machine.inventory,
                load: &self.load,
                config: &self.config,
                placement: &self.placement,
                now_ns: self.current.taken_at_ns,
            };
            let mut plan = policy::decide(&input, &mut self.policy);
            if plan.actions.is_empty() {
                self.set_verdict(Verdict::NothingToDo, plan.idle_reason.take());
            } else {
                let actions = u32::try_from(plan.actions.len()).unwrap_or(u32::MAX);
                self.set_verdict(Verdict::Acted { actions }, None);
            }
            // A plan repeats every standing note (a managed IRQ, a value someone else
            // set) on every tick, flagged `new` only the first time: log and count
            // that one, or a 1 s tick logs the same line 86400 times a day.
            for note in plan.notes.iter().filter(|note| note.new) {
                info!(note = %note.text, kind = note.kind.as_str(), "policy note ({}): {}", note.kind.as_str(), note.text);
                if note.kind == policy::NoteKind::ExternalChange {
                    self.shared.metrics.external_changes.inc();
                }
            }
            self.plan_stale = false;
            for action in plan.actions {
                // A write found its target gone and the machine was rediscovered: the
                // rest of the plan was made for the old model (a vanished device's
                // other targets would each fail and rediscover again). The next tick
                // decides afresh.
                if self.plan_stale {
                    break;
                }
                self.apply(action);
            }
            self.export_load();
        } else {
            self.set_verdict(Verdict::Baseline, None);
        }
        self.finish_tick(started);
    }

    /// The live state `steerd status` reads, at start.
    fn start_status(&self) {
        let no_writes = match &self.observe_only {
            Some(_) if self.options.dry_run => Some(NoWrites::DryRun),
            Some(why) => Some(NoWrites::ObserveOnly(why.clone())),
            None => None,
        };
        let started_unix = unix_now();
        self.with_status(|status| {
            status.version = env!("CARGO_PKG_VERSION");
            status.started_unix = started_unix;
            status.no_writes = no_writes;
        });
    }

    /// Runs `update` on the live status (a lock, no allocation).
    fn with_status(&self, update: impl FnOnce(&mut crate::status_report::LiveStatus)) {
        match self.shared.status.lock() {
            Ok(mut status) => update(&mut status),
            Err(poisoned) => update(&mut poisoned.into_inner()),
        }
    }

    /// Records this tick's verdict; `reason` is the policy's sentence when it ran.
    fn set_verdict(&self, verdict: Verdict, reason: Option<String>) {
        let tick = self.tick;
        self.with_status(|status| status.record_verdict(verdict, tick, reason));
    }

    /// The numbers of a calm tick's sentence: the thresholds and the busiest CPU (as
    /// `plan` reports it), without allocating.
    fn calm(&self) -> Calm {
        let busiest = self.load.busiest_cpu();
        let w = &self.config.watermarks;
        Calm {
            high_watermark: w.high,
            imbalance: w.imbalance,
            busy_pps: w.busy_pps,
            busiest,
        }
    }

    fn finish_tick(&mut self, started: Instant) {
        let skipped = std::mem::take(&mut self.skipped_this_tick);
        if self.have_previous {
            let change = self.quiet.after_tick(
                &self.config,
                &self.machine.topology,
                skipped,
                &self.previous,
                &self.current,
            );
            if change != quiet::Change::None {
                self.export_quiet_state();
                debug!(?change, "quiet mode");
            }
        }
        self.have_previous = true;
        let (tick, interval_s, quiet_interval_s) = (
            self.tick,
            self.config.interval.as_secs_f64(),
            self.config.quiet.interval.as_secs_f64(),
        );
        let now_unix = unix_now();
        self.with_status(|status| status.record_tick(tick, now_unix, interval_s, quiet_interval_s));
        let metrics = &self.shared.metrics;
        metrics.ticks.inc();
        metrics
            .tick_duration
            .observe(started.elapsed().as_secs_f64());
        // Healthy while the next tick comes within three gaps (a tick may take a
        // rediscovery longer than usual).
        self.shared
            .health
            .beat(self.next_tick_in().max(self.config.interval) * 3 + Duration::from_secs(2));
        self.ping_watchdog();
    }

    fn apply(&mut self, action: Action) {
        self.decide_needed = true;
        let knob = knob_of(&action.target);
        let wanted = knob_value_of(&action.new);
        let mask_words = self.mask_words(&knob);
        let now_ns = self.current.taken_at_ns;
        let outcome = if self.observe_only.is_some() {
            "dry_run".to_string()
        } else if !self.actuator.may_try(&knob, now_ns) {
            return;
        } else {
            match self.actuator.write(&knob, &wanted, mask_words, now_ns) {
                Ok(written) => {
                    if let Knob::IrqAffinity { irq } = knob {
                        self.irq_not_taken.remove(&irq);
                    }
                    self.policy.record_applied(&action, now_ns);
                    self.record_written(&action.target, &written.after);
                    "applied".to_string()
                }
                Err(failure) => {
                    self.on_failure(&action, &failure);
                    format!("failed: {}", failure.message)
                }
            }
        };
        let metrics = &self.shared.metrics;
        let reason = action.reason.kind.as_str();
        if outcome == "applied" || outcome == "dry_run" {
            metrics.count_action(knob.kind(), reason);
        }
        info!(
            target_knob = %knob,
            serves = action.serves.as_deref().unwrap_or(""),
            old = %action.old,
            new = %action.new,
            reason,
            detail = %action.reason.text,
            expected = %action.expected,
            outcome = %outcome,
            // The message says it all on its own: `journalctl -u steerd` shows only it.
            "{knob}: {} -> {} ({reason}: {}) {outcome}",
            action.old,
            action.new,
            action.reason.text
        );
        let unix_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let decision = Decision {
            unix_time,
            tick: self.tick,
            target: knob.to_string(),
            action: knob.kind().to_string(),
            old: action.old.to_string(),
            new: action.new.to_string(),
            reason: reason.to_string(),
            detail: action.reason.text.clone(),
            outcome,
        };
        if let Ok(mut log) = self.shared.decisions.lock() {
            log.push(decision);
        }
    }

    fn on_failure(&mut self, action: &Action, failure: &WriteFailure) {
        if failure.kind == FailureKind::ChangedByOthers {
            // Not an error: someone else set the value since steerd wrote it, and the
            // model has not seen it yet. Show the policy what is there; it notes the
            // change and follows on_external_change from the next tick.
            if let Ok((_, now)) = self.actuator.read(&failure.knob) {
                self.record_written(&action.target, &now);
            }
            return;
        }
        self.shared
            .metrics
            .count_write_error(failure.kind.label(), &failure.errno_name());
        let refused = matches!(
            failure.kind,
            FailureKind::Managed
                | FailureKind::Bug
                | FailureKind::NotTaken
                | FailureKind::NoVectorSpace
        );
        if failure.kind != FailureKind::Vanished {
            let (message, now_unix) = (failure.to_string(), unix_now());
            self.with_status(|status| {
                if refused {
                    status.refusals += 1;
                } else {
                    status.write_errors += 1;
                    status.last_write_error = Some(message);
                    status.last_write_error_unix = now_unix;
                }
            });
        }
        match failure.kind {
            FailureKind::Managed => {
                if let Knob::IrqAffinity { irq } = failure.knob {
                    if self.reported_managed.insert(irq) {
                        warn!(irq, error = %failure, "IRQ is managed by the kernel; never moving it again: {failure}");
                    }
                    self.shared
                        .metrics
                        .unmanageable_irqs
                        .set(self.reported_managed.len() as i64);
                }
                self.policy
                    .record_failed(action.target.clone(), failure.message.clone());
            }
            FailureKind::NotTaken
                if let Knob::IrqAffinity { irq } = failure.knob
                    && self.irq_not_taken.get(&irq).copied().unwrap_or(0) < NOT_TAKEN_RETRIES =>
            {
                *self.irq_not_taken.entry(irq).or_default() += 1;
                warn!(error = %failure, "the kernel did not take this affinity (a move in flight?); retrying later with backoff: {failure}");
            }
            FailureKind::Bug | FailureKind::NotTaken => {
                error!(error = %failure, "the kernel does not take this value; not proposing it again: {failure}");
                self.policy
                    .record_failed(action.target.clone(), failure.message.clone());
            }
            FailureKind::NotAllowed => {
                warn!(error = %failure, "not allowed to write, so observe-only from now on (fix the permission, then restart steerd): {failure}");
                self.observe_only = Some(failure.message.clone());
                self.shared.metrics.observe_only.set(1);
                let why = format!("not allowed to write: {}", failure.message);
                self.with_status(|status| status.no_writes = Some(NoWrites::ObserveOnly(why)));
            }
            FailureKind::Vanished => {
                self.rediscover("a target vanished");
                self.plan_stale = true;
            }
            FailureKind::NoVectorSpace => {
                warn!(error = %failure, "the target CPU has no free interrupt vector; not proposing this move again: {failure}");
                self.policy
                    .record_failed(action.target.clone(), failure.message.clone());
            }
            FailureKind::Transient | FailureKind::Other => {
                warn!(error = %failure, "write failed; retrying later with backoff: {failure}")
            }
            FailureKind::ChangedByOthers => {}
        }
    }

    /// Where the interrupts of movable queue vectors with a wide mask (one that lets the
    /// kernel pick the CPU) arrived since the last look: the CPU with the largest rise of
    /// its `proc/interrupts` column, recorded as `fires_on` in the placement.
    ///
    /// Their `effective_affinity` cannot be trusted (on 6.1 x86 it keeps an older CPU
    /// until the vector fires), and their mask does not say. Reading `proc/interrupts` is
    /// costly on big machines, so it is read only on ticks that decide and only while such
    /// vectors exist: the policy pins every queue vector it may move to a single CPU
    /// (`unpinned`), so in steady state there are none and this costs nothing.
    fn locate_wide_vectors(&mut self) {
        let config = &self.config;
        let wide = |irq: &&crate::model::inventory::Irq| {
            matches!(irq.role, IrqRole::Rx | IrqRole::Rxtx)
                && irq.queue.is_some()
                && !irq.managed
                && config.irq.enabled
                && irq
                    .device
                    .as_deref()
                    .is_some_and(|d| config.manages_irqs_of(d))
                && self
                    .placement
                    .irqs
                    .get(&irq.irq)
                    .is_some_and(|a| a.affinity.len() > 1)
        };
        if !self.machine.inventory.irqs.iter().any(|irq| wide(&irq)) {
            return;
        }
        let wanted: Vec<u32> = self
            .machine
            .inventory
            .irqs
            .iter()
            .filter(wide)
            .map(|irq| irq.irq)
            .collect();
        let parsed = match crate::kernel::procfs::interrupts::read(&self.options.root) {
            Ok(parsed) => parsed,
            Err(e) => {
                debug!(error = %e, "cannot read proc/interrupts to locate wide-mask vectors: {e}");
                return;
            }
        };
        for irq in wanted {
            let Some(line) = parsed.line(irq) else {
                continue;
            };
            let Ok(index) = self
                .machine
                .inventory
                .irqs
                .binary_search_by_key(&irq, |i| i.irq)
            else {
                continue;
            };
            let entry = &mut self.machine.inventory.irqs[index];
            let busiest = fires_on(&entry.per_cpu, &line.per_cpu);
            entry.per_cpu.clone_from(&line.per_cpu);
            if let Some(values) = self.placement.irqs.get_mut(&irq) {
                values.fires_on = busiest;
            }
        }
    }

    /// Per-queue counters of the devices where they matter (see `queue_devices`).
    fn sample_queues(&mut self) {
        let Some(source) = self.queue_source.as_mut() else {
            self.current.queues.clear();
            return;
        };
        let ids: Vec<DeviceId<'_>> = self
            .queue_devices
            .iter()
            .map(|(name, ifindex)| DeviceId {
                name,
                ifindex: *ifindex,
            })
            .collect();
        if let Err(e) = source.sample(&ids, &mut self.current.queues) {
            warn!(error = %e, "per-queue counters: {e}");
        }
    }

    /// Chooses the devices whose per-queue counters are sampled each tick, and opens the
    /// counter source the first time one is needed.
    fn choose_queue_devices(&mut self) {
        self.queue_devices = queue_devices_of(&self.machine.inventory);
        if self.queue_devices.is_empty() || !self.options.root.is_host() {
            self.queue_source = None;
            return;
        }
        if self.queue_source.is_none() {
            match QueueCounterSource::new() {
                Ok(source) => self.queue_source = Some(source),
                Err(e) => {
                    warn!(error = %e, "no per-queue counters; attributing work by IRQ rates: {e}")
                }
            }
        }
    }

    /// Keeps the in-memory model in step with a value read back (after a successful
    /// write, or found changed by someone else), so the next decision starts from what
    /// is really there.
    fn record_written(&mut self, target: &Target, after: &KnobValue) {
        let value = policy_value_of(after);
        self.placement.set(target, &value);
        let inventory = &mut self.machine.inventory;
        match (target, &value) {
            (Target::IrqAffinity { irq }, Value::Cpus(cpus)) => {
                if let Ok(index) = inventory.irqs.binary_search_by_key(irq, |i| i.irq) {
                    let entry = &mut inventory.irqs[index];
                    entry.affinity = Some(cpus.clone());
                    // The kernel delivers it to the new mask from the next interrupt on;
                    // until rediscovery reads effective_affinity again, a single-CPU mask
                    // is where it fires, and for a wide mask nobody knows yet (the
                    // policy's placement does the same). Without this,
                    // steerd_irq_effective_cpu kept the old CPU for up to
                    // REDISCOVER_EVERY after every move.
                    entry.effective_affinity = (cpus.len() == 1).then(|| cpus.clone());
                }
            }
            (Target::RpsCpus { device, queue }, Value::Cpus(cpus)) => {
                if let Some(q) = rx_queue_mut(inventory, device, *queue) {
                    q.rps_cpus = Some(cpus.clone());
                }
            }
            (Target::RpsFlowCnt { device, queue }, Value::Count(n)) => {
                if let Some(q) = rx_queue_mut(inventory, device, *queue) {
                    q.rps_flow_cnt = Some(*n);
                }
            }
            (Target::RpsSockFlowEntries, Value::Count(n)) => {
                inventory.rps_sock_flow_entries = Some(*n);
            }
            _ => {}
        }
        self.export_placement();
    }

    fn mask_words(&self, knob: &Knob) -> u32 {
        mask_words_in(
            &self.machine.inventory,
            knob,
            self.machine.topology.nr_cpu_ids,
        )
    }

    fn rediscover(&mut self, why: &str) {
        if let Some(events) = self.link_events.as_mut() {
            let _ = events.drain();
        }
        if let Some(events) = self.queue_events.as_mut() {
            let _ = events.drain();
        }
        match discover(&self.options.root) {
            Ok(machine) => {
                let resized = queue_sets_changed(&self.machine.inventory, &machine.inventory);
                let changed = machine.inventory.devices.len()
                    != self.machine.inventory.devices.len()
                    || machine.topology.online != self.machine.topology.online;
                if changed {
                    info!(
                        why,
                        devices = machine.inventory.devices.len(),
                        cpus = machine.topology.online.len(),
                        "machine changed"
                    );
                }
                let before = std::mem::replace(&mut self.machine, machine);
                self.after_discovery();
                for device in resized {
                    self.after_queue_change(&before.inventory, &device);
                }
            }
            Err(e) => warn!(why, error = %e, "rediscovery failed; keeping the previous model: {e}"),
        }
        self.last_discovery = Instant::now();
    }

    /// A device's queue set changed (a channel-count change): its driver re-did its
    /// defaults, rewriting the affinity of its vectors (virtio_net: wide masks, then queue N
    /// on CPU N) and adding queues with RPS off. That is not someone else's choice to
    /// respect but a device made anew. Every target of the device that no longer holds
    /// what steerd wrote (or respected), or that steerd never wrote but that changed with
    /// the reset, is forgotten by the policy — no frozen IRQ, no dwell time — and taken
    /// over by the actuator: the driver's value is accounted for as steerd's, and the
    /// original (from before steerd's first write, or else from before the reset) is what
    /// the restore on exit writes back. The next tick places them again and re-applies
    /// steerd's RPS masks.
    fn after_queue_change(&mut self, before: &crate::model::inventory::Inventory, device: &str) {
        let mut targets: Vec<Target> = Vec::new();
        for inventory in [before, &self.machine.inventory] {
            for irq in inventory
                .irqs
                .iter()
                .filter(|i| i.device.as_deref() == Some(device))
            {
                targets.push(Target::IrqAffinity { irq: irq.irq });
            }
            for queue in inventory.device(device).iter().flat_map(|d| &d.rx_queues) {
                for target in [
                    Target::RpsCpus {
                        device: device.to_string(),
                        queue: queue.index,
                    },
                    Target::RpsFlowCnt {
                        device: device.to_string(),
                        queue: queue.index,
                    },
                ] {
                    targets.push(target);
                }
            }
        }
        targets.sort();
        targets.dedup();
        let mut reset = 0;
        let previous = Placement::from_inventory(before);
        for target in targets {
            let knob = knob_of(&target);
            let known = [
                self.policy.written(&target).cloned(),
                self.policy.respected(&target).cloned(),
                self.actuator.last_written(&knob).map(policy_value_of),
            ];
            let now = self.placement.value(&target);
            let was = previous.value(&target);
            let ours_replaced = known
                .iter()
                .flatten()
                .any(|value| self.placement.holds(&target, value) != Some(true));
            let never_ours =
                known.iter().all(Option::is_none) && now.is_some() && was.is_some() && was != now;
            if !(ours_replaced || never_ours) {
                continue;
            }
            if never_ours && let Some(was) = &was {
                let words = mask_words_in(before, &knob, self.machine.topology.nr_cpu_ids);
                self.actuator
                    .remember_original(&knob, &knob_value_of(was), words);
            }
            self.policy.forget_owner(&target);
            self.actuator.take_over_reset(&knob);
            reset += 1;
        }
        let (rx, tx) = self
            .machine
            .inventory
            .device(device)
            .map_or((0, 0), |d| (d.rx_queues.len(), d.tx_queues.len()));
        info!(
            device,
            rx_queues = rx,
            tx_queues = tx,
            reset,
            "{device}: queue set changed (now {rx} rx, {tx} tx); its driver reset {reset} values: placing its queues again"
        );
    }

    /// Rebuilds the placement from a fresh model, and republishes placement metrics. The
    /// policy compares it with what steerd wrote to notice values someone else changed.
    fn after_discovery(&mut self) {
        self.decide_needed = true;
        self.placement = Placement::from_inventory(&self.machine.inventory);
        self.choose_queue_devices();
        let irq_limit = self
            .machine
            .inventory
            .irqs
            .iter()
            .map(|i| i.irq as usize + 1)
            .max();
        self.sampler.set_irq_limit(irq_limit.unwrap_or(0));
        for irq in self
            .machine
            .inventory
            .irqs
            .iter()
            .filter(|i| i.managed && i.device.is_some())
        {
            if self.reported_managed.insert(irq.irq) {
                info!(irq = irq.irq, name = %irq.name, "IRQ {} ({}) is managed by the kernel; steerd leaves it alone", irq.irq, irq.name);
            }
        }
        self.shared
            .metrics
            .unmanageable_irqs
            .set(self.reported_managed.len() as i64);
        self.cpu_gauges = self
            .shared
            .metrics
            .cpu_load_gauges(self.machine.topology.online.iter());
        self.export_placement();
    }

    fn export_placement(&self) {
        let metrics = &self.shared.metrics;
        metrics.irq_effective_cpu.clear();
        for irq in &self.machine.inventory.irqs {
            let Some(device) = &irq.device else { continue };
            let cpu = irq
                .effective_affinity
                .as_ref()
                .and_then(|s| s.first())
                .or_else(|| irq.affinity.as_ref().and_then(|s| s.first()));
            if let Some(cpu) = cpu {
                let role = match irq.role {
                    IrqRole::Rx => "rx",
                    IrqRole::Tx => "tx",
                    IrqRole::Rxtx => "rxtx",
                    IrqRole::Other => "other",
                };
                metrics
                    .irq_effective_cpu
                    .get_or_create(&IrqLabels {
                        irq: irq.irq,
                        device: device.clone(),
                        queue: irq.queue.map_or(String::new(), |q| q.to_string()),
                        role: role.to_string(),
                    })
                    .set(i64::from(cpu));
            }
        }
        metrics.rx_queue_rps_cpus.clear();
        for device in &self.machine.inventory.devices {
            for queue in &device.rx_queues {
                if let Some(cpus) = &queue.rps_cpus {
                    metrics
                        .rx_queue_rps_cpus
                        .get_or_create(&QueueLabels {
                            device: device.name.clone(),
                            queue: queue.index,
                        })
                        .set(cpus.len() as i64);
                }
            }
        }
    }

    fn export_load(&self) {
        for gauges in &self.cpu_gauges {
            let Some(load) = self.load.cpu(gauges.cpu) else {
                continue;
            };
            gauges.processed.set(load.processed_pps);
            gauges.dropped.set(load.dropped_per_sec);
            gauges.squeezed.set(load.squeezed_per_sec);
            gauges.softirq_share.set(load.net_share);
        }
    }

    /// Re-reads the configuration file. Invalid: the running configuration stays, every
    /// error is logged with its key and line, and the failure is counted.
    fn reload(&mut self, why: &str) {
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Reloading, monotonic_now()]);
        let checked = read_config_text(&self.options.config_path).and_then(|text| {
            check_config_text(&self.options.config_path, &text, Some(&self.machine))
                .map(|config| (config, text))
        });
        match checked {
            Ok((config, text)) => {
                let follow_ban_before = self.file_config.cpus.irqbalance_banned_cpus;
                self.file_config = config;
                self.config_text = text;
                if self.file_config.cpus.irqbalance_banned_cpus && !follow_ban_before {
                    self.read_irqbalance_ban();
                }
                self.apply_overlays();
                self.follow_files();
                self.quiet.reloaded();
                self.export_quiet_state();
                self.shared.metrics.count_reload(true);
                info!(why, path = ?self.options.config_path, "configuration reloaded");
            }
            Err(errors) => {
                self.shared.metrics.count_reload(false);
                for e in &errors {
                    error!(why, error = %e, "configuration not reloaded; keeping the previous one: {e}");
                }
            }
        }
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status("running"),
        ]);
    }

    /// The configuration in effect: the file's, with `--interval` and irqbalance's ban laid
    /// over it. A ban that would leave no CPU allowed is refused (logged) and not applied.
    fn apply_overlays(&mut self) {
        let mut config = self.file_config.clone();
        if let Some(interval) = self.options.interval {
            config.interval = interval;
        }
        if config.cpus.irqbalance_banned_cpus && !self.irqbalance_ban.cpus.is_empty() {
            let ban = self
                .irqbalance_ban
                .cpus
                .intersection(&self.machine.topology.possible);
            let mut banned = config.clone();
            banned.cpus.banned = banned.cpus.banned.union(&ban);
            let problems = banned.validate(&self.machine.topology);
            if problems.is_empty() {
                config = banned;
            } else {
                for problem in problems {
                    error!(sources = ?self.irqbalance_ban.sources, error = %problem, "irqbalance's ban not applied: {problem}");
                }
            }
        }
        self.config = config;
        self.decide_needed = true;
    }

    /// Reads irqbalance's ban files (when `cpus.irqbalance_banned_cpus` is on). Returns
    /// whether the ban changed. A file that cannot be read or parsed keeps the last ban.
    fn read_irqbalance_ban(&mut self) -> bool {
        if !self.file_config.cpus.irqbalance_banned_cpus {
            let had_one = !self.irqbalance_ban.cpus.is_empty();
            self.irqbalance_ban = IrqbalanceBan::default();
            return had_one;
        }
        match irqbalance_compat::read_ban(&self.options.root) {
            Ok(ban) if ban == self.irqbalance_ban => false,
            Ok(ban) => {
                info!(
                    cpus = %ban.cpus.to_list(),
                    sources = ?ban.sources,
                    "irqbalance's banned CPUs"
                );
                self.irqbalance_ban = ban;
                true
            }
            Err(e) => {
                error!(error = %e, "cannot read irqbalance's ban; keeping the previous one: {e}");
                false
            }
        }
    }

    /// Sets up (again) the watch on the files steerd follows: the configuration file with
    /// `--watch-config`, irqbalance's ban files with `cpus.irqbalance_banned_cpus`.
    fn follow_files(&mut self) {
        let mut files = Vec::new();
        if self.options.watch_config
            && let Some(path) = &self.options.config_path
        {
            files.push(path.clone());
        }
        if self.file_config.cpus.irqbalance_banned_cpus {
            files.extend(irqbalance_compat::ban_file_paths(&self.options.root));
        }
        self.files = if files.is_empty() {
            None
        } else {
            match wakeups::FileWatch::new(files) {
                Ok(watch) => watch,
                Err(e) => {
                    warn!(error = %e, "cannot watch files; reload with SIGHUP: {e}");
                    None
                }
            }
        };
    }

    /// A followed file changed: reload a configuration whose text changed, and apply a
    /// changed irqbalance ban from this tick on.
    fn look_at_followed_files(&mut self) {
        if self.options.watch_config {
            match read_config_text(&self.options.config_path) {
                Ok(text) if text != self.config_text => self.reload("file changed"),
                Ok(_) => {}
                // Between a delete and a create: the next event brings the new file.
                Err(errors) => {
                    for e in errors {
                        warn!(error = %e, "configuration file changed but cannot be read: {e}");
                    }
                }
            }
        }
        if self.read_irqbalance_ban() {
            self.apply_overlays();
        }
    }

    /// Reads back every value steerd wrote; if one is not what steerd wrote, someone else
    /// changed it (or the device was re-created): rediscover, so the policy sees it.
    fn recheck_written(&mut self) {
        self.last_recheck = Instant::now();
        let changed = self.actuator.changed().any(|(knob, _)| {
            let now = self.actuator.read(knob).ok().map(|(_, value)| value);
            now.as_ref() != self.actuator.last_written(knob)
        });
        if changed {
            self.rediscover("a value steerd wrote changed");
        }
    }

    /// Pings systemd's watchdog at half its timeout. Called from the loop, after whatever
    /// woke it: a loop stuck in a tick stops the pings and systemd restarts steerd.
    fn ping_watchdog(&mut self) {
        if let Some(timeout) = self.watchdog
            && self.last_watchdog.elapsed() >= timeout / 2
        {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
            self.last_watchdog = Instant::now();
        }
    }

    /// How long the loop may sleep before the next watchdog ping is due (with a tick
    /// interval longer than half the watchdog timeout, the loop wakes just to ping).
    fn export_quiet_state(&self) {
        let metrics = &self.shared.metrics;
        let asleep = self.quiet.is_asleep();
        metrics.quiet_mode.set(i64::from(asleep));
        metrics
            .quiet_mode_available
            .set(i64::from(self.quiet.available(&self.config)));
        // Called when the state changes, not on every tick.
        let unavailable = self.quiet.unavailable_reason(&self.config);
        let now_unix = unix_now();
        self.with_status(|status| {
            status.quiet_since_unix = match (asleep, status.quiet_since_unix) {
                (true, Some(since)) => Some(since),
                (true, None) => Some(now_unix),
                (false, _) => None,
            };
            status.quiet_unavailable = unavailable;
        });
    }

    fn until_watchdog_ping(&self) -> Option<Duration> {
        let timeout = self.watchdog?;
        Some((timeout / 2).saturating_sub(self.last_watchdog.elapsed()))
    }

    fn shutdown(&mut self) {
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::Status("restoring"),
        ]);
        if self.config.restore_on_exit {
            let (restored, failures) = self.actuator.restore_all(false);
            info!(
                restored = restored.len(),
                failed = failures.len(),
                "restored original values"
            );
            for failure in failures {
                error!(error = %failure, "could not restore: {failure}");
            }
        } else {
            self.actuator.forget_all();
            info!("leaving the tuning in place (restore_on_exit: false)");
        }
        if let Some(server) = self.server.take() {
            server.stop(Duration::from_secs(2));
        }
        info!(
            ticks = self.tick,
            uptime_s = self.started.elapsed().as_secs(),
            "steerd stopped"
        );
    }
}

fn rx_queue_mut<'a>(
    inventory: &'a mut crate::model::inventory::Inventory,
    device: &str,
    queue: u32,
) -> Option<&'a mut crate::model::inventory::RxQueue> {
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
fn mask_words_in(
    inventory: &crate::model::inventory::Inventory,
    knob: &Knob,
    nr_cpu_ids: u32,
) -> u32 {
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

/// The devices (same name and ifindex in both) whose rx or tx queue set differs between
/// two discoveries. A device that came or went is not listed: it has no history to
/// forget, or nothing left to place.
fn queue_sets_changed(
    before: &crate::model::inventory::Inventory,
    after: &crate::model::inventory::Inventory,
) -> Vec<String> {
    after
        .devices
        .iter()
        .filter(|now| {
            before.device(&now.name).is_some_and(|was| {
                was.ifindex == now.ifindex
                    && (!was
                        .rx_queues
                        .iter()
                        .map(|q| q.index)
                        .eq(now.rx_queues.iter().map(|q| q.index))
                        || !was
                            .tx_queues
                            .iter()
                            .map(|q| q.index)
                            .eq(now.tx_queues.iter().map(|q| q.index)))
            })
        })
        .map(|d| d.name.clone())
        .collect()
}

/// Whether the set of online CPUs changed between two samples. `softnet_stat` has one row
/// per online CPU, so the rows the tick already read tell hot-plug without reading
/// `sys/devices/system/cpu/online` as well.
fn online_cpus_changed(previous: &Snapshot, current: &Snapshot) -> bool {
    previous.softnet.len() != current.softnet.len()
        || previous
            .softnet
            .iter()
            .zip(&current.softnet)
            .any(|(a, b)| a.cpu != b.cpu)
}

/// Devices whose per-queue rates tell the policy something: several rx queues served by
/// distinct IRQs. Single-queue and IRQ-less devices (veth) are left out.
fn queue_devices_of(inventory: &crate::model::inventory::Inventory) -> Vec<(String, u32)> {
    inventory
        .devices
        .iter()
        .filter(|d| {
            let mut irqs: Vec<u32> = d.rx_queues.iter().filter_map(|q| q.irq).collect();
            irqs.sort_unstable();
            irqs.dedup();
            irqs.len() >= 2
        })
        .filter_map(|d| Some((d.name.clone(), d.ifindex?)))
        .collect()
}

/// Wall-clock seconds since the Unix epoch (0 if the clock is before it).
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn monotonic_now() -> sd_notify::NotifyState<'static> {
    sd_notify::NotifyState::monotonic_usec_now().unwrap_or(sd_notify::NotifyState::MonotonicUsec(0))
}

/// The policy's memory of what steerd wrote, from the actuator's state file. After a crash
/// (kill -9) the values the previous run wrote are still steerd's: the policy may narrow
/// or turn off those RPS masks and clear those flow tables again, and notices a later
/// change by someone else — instead of taking every one of them for an operator's. When
/// each was written is not known, so no dwell time holds them.
fn policy_state_from(actuator: &Actuator) -> PolicyState {
    let mut state = PolicyState::default();
    for (knob, _) in actuator.changed() {
        if let Some(value) = actuator.last_written(knob) {
            state
                .written
                .insert(target_of(knob), policy_value_of(value));
        }
    }
    state
}

/// A kernel event source, on the host only (a fake root has no kernel to announce
/// anything); when it cannot be had, one warning saying what is lost, and `None`.
fn subscribe_on_host<T>(
    root: &Root,
    subscribe: fn() -> std::io::Result<T>,
    lost: impl FnOnce() -> String,
) -> Option<T> {
    if !root.is_host() {
        return None;
    }
    match subscribe() {
        Ok(events) => Some(events),
        Err(e) => {
            warn!(error = %e, "{}: {e}", lost());
            None
        }
    }
}

/// The policy's name for an actuator knob (the inverse of [`knob_of`]).
fn target_of(knob: &Knob) -> Target {
    match knob {
        Knob::IrqAffinity { irq } => Target::IrqAffinity { irq: *irq },
        Knob::RpsCpus { device, queue } => Target::RpsCpus {
            device: device.clone(),
            queue: *queue,
        },
        Knob::RpsFlowCnt { device, queue } => Target::RpsFlowCnt {
            device: device.clone(),
            queue: *queue,
        },
        Knob::RpsSockFlowEntries => Target::RpsSockFlowEntries,
    }
}

/// The actuator's name for a policy target.
fn knob_of(target: &Target) -> Knob {
    match target {
        Target::IrqAffinity { irq } => Knob::IrqAffinity { irq: *irq },
        Target::RpsCpus { device, queue } => Knob::RpsCpus {
            device: device.clone(),
            queue: *queue,
        },
        Target::RpsFlowCnt { device, queue } => Knob::RpsFlowCnt {
            device: device.clone(),
            queue: *queue,
        },
        Target::RpsSockFlowEntries => Knob::RpsSockFlowEntries,
    }
}

fn knob_value_of(value: &Value) -> KnobValue {
    match value {
        Value::Cpus(cpus) => KnobValue::Cpus(cpus.clone()),
        Value::Count(n) => KnobValue::Count(*n),
    }
}

fn policy_value_of(value: &KnobValue) -> Value {
    match value {
        KnobValue::Cpus(cpus) => Value::Cpus(cpus.clone()),
        KnobValue::Count(n) => Value::Count(*n),
    }
}

/// The CPU whose count rose most between two `proc/interrupts` rows (indexed by CPU id),
/// if any rose.
fn fires_on(before: &[u64], now: &[u64]) -> Option<u32> {
    now.iter()
        .enumerate()
        .map(|(cpu, &count)| {
            let was = before.get(cpu).copied().unwrap_or(0);
            (cpu as u32, count.saturating_sub(was))
        })
        .filter(|&(_, rise)| rise > 0)
        .max_by_key(|&(cpu, rise)| (rise, std::cmp::Reverse(cpu)))
        .map(|(cpu, _)| cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_vector_fires_where_its_count_rose_most() {
        // CPU 2 took the interrupts since the last look; CPU 0's old count is history.
        assert_eq!(fires_on(&[900, 0, 5, 0], &[900, 1, 80, 0]), Some(2));
        // Nothing rose: not known (the policy falls back to effective_affinity).
        assert_eq!(fires_on(&[7, 3], &[7, 3]), None);
        // A CPU that came online has no earlier column.
        assert_eq!(fires_on(&[4], &[4, 0, 12]), Some(2));
    }
    use crate::fakeroot::{FakeMachine, FakeNic};

    #[test]
    fn hot_plug_is_read_off_the_softnet_rows() {
        use crate::model::snapshot::SoftnetRow;
        let rows = |cpus: &[u32]| Snapshot {
            softnet: cpus
                .iter()
                .map(|&cpu| SoftnetRow {
                    cpu,
                    ..SoftnetRow::default()
                })
                .collect(),
            ..Snapshot::default()
        };
        assert!(!online_cpus_changed(&rows(&[0, 1, 3]), &rows(&[0, 1, 3])));
        assert!(online_cpus_changed(&rows(&[0, 1, 3]), &rows(&[0, 1])));
        assert!(online_cpus_changed(&rows(&[0, 1, 3]), &rows(&[0, 1, 2])));
    }

    #[test]
    fn per_queue_counters_only_for_multi_vector_devices() {
        let dir = tempfile::tempdir().unwrap();
        let mut machine = FakeMachine::new(4);
        for (name, queues) in [("eth0", 4), ("eth1", 1)] {
            machine.nics.push(FakeNic {
                name: name.into(),
                driver: "ixgbe".into(),
                node: None,
                queues,
            });
        }
        machine.write(dir.path()).unwrap();
        let found = discover(&Root::new(dir.path())).unwrap();
        let chosen = queue_devices_of(&found.inventory);
        assert_eq!(
            chosen,
            vec![("eth0".to_string(), 2)],
            "not eth1 (1 queue), not lo"
        );
    }
}
