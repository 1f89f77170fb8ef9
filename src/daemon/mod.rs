//! The daemon: one tick loop, on a thread that waits in one epoll (see [`wakeups`]),
//! beside the HTTP endpoint on a current-thread tokio runtime of its own.
//!
//! Each tick samples the counters and hands them to the [`Engine`] with the actuator as its
//! writer (the engine updates the load, asks the policy for a plan and writes it), then
//! reports what the engine did (metrics, decision log, journal).
//! Around the loop: discovery at start, again on link events, queue uevents (a
//! channel-count change), CPU hot-plug and a slow timer; SIGHUP (and, with `--watch-config`, a changed file) reloads the configuration;
//! irqbalance's ban file is followed when `cpus.irqbalance_banned_cpus` is on, and isolated
//! cgroup partitions every tick (`isolation`);
//! SIGTERM/SIGINT restore what steerd changed and exit 0; systemd hears READY, RELOADING,
//! WATCHDOG and STOPPING.
//!
//! The loop is deliberately sequential: one tick never overlaps the next, a reload lands
//! between ticks, and shutdown happens after the tick in flight.
//!
//! Before anything else `steerd run` locks its state file (`instance_lock`): a second
//! daemon with the same state file would fight the first over the same IRQs, so it
//! refuses to start, naming the pid that holds the lock.
//!
//! One `Daemon` holds the loop's state; its methods live with their job: this file starts
//! it, `event_loop` waits and schedules ticks, `tick` runs one, `actions` reports what
//! became of each action and what the engine did about a failure, `discovery` keeps the model in step with the machine,
//! `reload` keeps the configuration in effect, `isolation` follows isolated cgroup
//! partitions, `report` publishes status and metrics,
//! `shutdown` pings the watchdog and restores on exit.

mod actions;
mod busy_poll;
mod discovery;
mod error;
mod event_loop;
pub mod instance_lock;
mod isolation;
mod lasting_failure;
mod partition_watch;
pub mod quiet;
pub mod rediscovery;
mod reload;
mod report;
mod shutdown;
mod tick;
pub mod wakeups;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::apply::{Actuator, DEFAULT_STATE_FILE};
use crate::config::Config;
use crate::discover::discover;
use crate::engine::Engine;
use crate::engine::sampling::Sampling;
use crate::http::{ServerThread, Shared};
use crate::irqbalance_compat::IrqbalanceBan;
use crate::kernel::ethtool_events::EthtoolEvents;
use crate::kernel::link_events::LinkEvents;
use crate::kernel::queue_events::QueueEvents;
use crate::metrics::CpuLoadGauges;
use crate::model::snapshot::Snapshot;
use crate::policy::PolicyState;
use crate::root::Root;
use discovery::ChannelsSet;
use instance_lock::{InstanceLock, LockError};

pub use error::StartError;
use reload::{check_config_text, read_config_text};

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
/// small read per value, and a rediscovery only when one differs. Nothing announces an
/// IRQ affinity, RPS or XPS write, so this bounds how long steerd plans on a placement that
/// is no longer there: at 30 s, Debian's tuned moving every IRQ off an isolated core in
/// the lab (`tuned`, 2026-11-28) went unseen for 19 s. The price is about 3 µs per value
/// steerd wrote and per read-back (an open, read and close of a small procfs or sysfs file,
/// measured with Python on the 2-CPU test host). A 64-queue NIC with RPS and RFS on every
/// queue (128 vectors, 64 masks, 64 flow counts) costs some 75 µs per second, about an
/// awake idle tick's floor (80-95 µs per second, docs/performance.md); the lab's 4-queue
/// guest, under 5 µs per second. Not yet measured on a writing daemon.
pub const RECHECK_EVERY: Duration = Duration::from_secs(10);

/// How often the heap's free pages are handed back (`crate::memory::return_free_pages`),
/// at the end of a tick.
pub const RETURN_FREE_PAGES_EVERY: Duration = Duration::from_secs(30);

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

impl Options {
    /// The state file: `--state-file`, else the default under the root.
    fn state_file(&self) -> PathBuf {
        self.state_file
            .clone()
            .unwrap_or_else(|| self.root.path(DEFAULT_STATE_FILE))
    }
}

/// Runs the daemon until SIGTERM or SIGINT. Errors at start-up (another daemon with the
/// same state file, unreadable config, no `proc/stat`, port in use) are returned; once
/// running, errors are logged and counted.
pub fn run(options: Options) -> Result<(), StartError> {
    crate::memory::one_malloc_arena();
    // First of all: a second daemon with this state file stops here, before it reads or
    // writes anything, and before its HTTP port (most likely the first one's too) would
    // fail with a less helpful "address in use".
    let instance_lock = lock_instance(&options)?;
    // Before any thread starts, so that every thread inherits the blocked mask.
    let mut signals = wakeups::Signals::block_and_open().map_err(StartError::Signals)?;
    let shared = Shared::new();
    let server = ServerThread::start(options.metrics_listen, shared.clone())?;
    let mut daemon = Daemon::start(options, shared, server, instance_lock)?;
    daemon.run(&mut signals)
}

/// Takes the state file's lock ([`instance_lock`]). A user other than root on the real
/// machine only observes (it cannot write a kernel value), so when it may not create the
/// lock (root's `/run/steerd`) it runs without one, as it ran before there was a lock.
fn lock_instance(options: &Options) -> Result<Option<InstanceLock>, StartError> {
    let state_file = options.state_file();
    match InstanceLock::acquire(&state_file) {
        Ok(lock) => Ok(Some(lock)),
        Err(LockError::Held { lock, pid }) => Err(StartError::AnotherDaemon {
            state_file,
            lock,
            pid,
        }),
        Err(e)
            if e.is_permission() && options.root.is_host() && !nix::unistd::geteuid().is_root() =>
        {
            warn!(
                error = %e,
                "not running as root, so observing only and without the state file's lock: {e}"
            );
            Ok(None)
        }
        Err(source) => Err(StartError::InstanceLock { state_file, source }),
    }
}

/// Everything the tick loop keeps from one tick to the next. One owner, on one thread:
/// the methods in this module's files borrow it in turn, never at once.
struct Daemon {
    options: Options,
    /// The model, the load, the policy and current values, behind one tick; its
    /// configuration is the one in effect: the file's (or the default), with `--interval`
    /// and irqbalance's ban applied.
    engine: Engine,
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
    sampling: Sampling,
    /// The buffer the next sample is taken into (the engine hands back an older one).
    next_sample: Snapshot,
    actuator: Actuator,
    shared: Arc<Shared>,
    link_events: Option<LinkEvents>,
    /// Kernel uevents: a network device's queues added or removed (`ethtool -L`).
    queue_events: Option<QueueEvents>,
    /// The ethtool `monitor` group: channel and RSS changes as the kernel makes them.
    ethtool_events: Option<EthtoolEvents>,
    /// Devices (by ifindex) whose channels were set since the last discovery, from ethtool
    /// notifications: their driver may have reset their values even at the same count.
    channels_set: ChannelsSet,
    tick: u64,
    started: Instant,
    last_discovery: Instant,
    last_recheck: Instant,
    last_free_pages: Instant,
    watchdog: Option<Duration>,
    last_watchdog: Instant,
    reported_managed: std::collections::BTreeSet<u32>,
    /// Isolated cgroup partitions as last read, followed every tick.
    isolation: isolation::Isolation,
    /// A sampling failure going on (told once, then counted).
    sampling_failure: lasting_failure::LastingFailure,
    /// A rediscovery failure going on (told once, then counted).
    rediscovery_failure: lasting_failure::LastingFailure,
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
    /// The state file's lock, held until the daemon is dropped (after the restore on
    /// exit): no second daemon starts with the same state file meanwhile. `None` only
    /// for a user other than root that could not create it ([`lock_instance`]).
    _instance_lock: Option<InstanceLock>,
}

impl Daemon {
    fn start(
        options: Options,
        shared: Arc<Shared>,
        server: ServerThread,
        instance_lock: Option<InstanceLock>,
    ) -> Result<Daemon, StartError> {
        let root = options.root.clone();
        let config_text = read_config_text(&options.config_path).map_err(StartError::Config)?;
        // Syntax and values first: a broken file is reported before the machine is read.
        check_config_text(&options.config_path, &config_text, None).map_err(StartError::Config)?;
        // Subscribed before the first discovery: a change between that discovery and the
        // subscription would otherwise go unheard until the 5-minute rediscovery (seen in
        // the lab: eth0 read `down` just before its link came up, and the RSS lever, which
        // leaves a down device alone, stayed idle for the whole run). An event that comes
        // before the discovery costs one more discovery at the first tick.
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
        let ethtool_events = subscribe_on_host(&root, EthtoolEvents::subscribe, || {
            "no ethtool notifications; channel changes are heard from uevents only".to_string()
        })
        .flatten();
        let machine = discover(&root).map_err(|source| StartError::Discovery {
            root: root.path(""),
            source,
        })?;
        // Now that the machine is known, check the CPU lists against it.
        let file_config = check_config_text(&options.config_path, &config_text, Some(&machine))
            .map_err(StartError::Config)?;
        for warning in &machine.warnings {
            warn!(warning = %warning, "discovery: {warning}");
        }
        let sampling = Sampling::open(&root).map_err(StartError::Sampling)?;
        let state_file = options.state_file();
        let actuator = Actuator::open(root.clone(), state_file.clone()).map_err(|source| {
            StartError::StateFile {
                path: state_file,
                source,
            }
        })?;
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
        shared
            .metrics
            .observe_only
            .set(i64::from(observe_only.is_some()));
        let mut engine = Engine::new(file_config.clone(), machine, policy_state_from(&actuator));
        if let Some(why) = observe_only {
            engine.stop_writing(why);
        }
        let now = Instant::now();
        let mut daemon = Daemon {
            engine,
            file_config,
            config_text,
            irqbalance_ban: IrqbalanceBan::default(),
            files: None,
            files_changed: false,
            options,
            sampling,
            next_sample: Snapshot::default(),
            actuator,
            shared,
            link_events,
            queue_events,
            ethtool_events,
            channels_set: ChannelsSet::default(),
            tick: 0,
            started: now,
            last_discovery: now,
            last_recheck: now,
            last_free_pages: now,
            watchdog: sd_notify::watchdog_enabled(),
            last_watchdog: now,
            reported_managed: Default::default(),
            isolation: Default::default(),
            sampling_failure: Default::default(),
            rediscovery_failure: Default::default(),
            idle_ticks: 0,
            cpu_gauges: Vec::new(),
            quiet: quiet::Quiet::new(root.is_host()),
            skipped_this_tick: false,
            server: Some(server),
            _instance_lock: instance_lock,
        };
        daemon.start_status();
        daemon.read_irqbalance_ban();
        daemon.apply_overlays();
        daemon.follow_files();
        daemon.after_discovery();
        daemon.export_quiet_state();
        info!(
            devices = daemon.engine.machine().inventory.devices.len(),
            irqs = daemon.engine.machine().inventory.irqs.len(),
            cpus = daemon.engine.machine().topology.online.len(),
            interval_ms = daemon.engine.config().interval.as_millis() as u64,
            listen = %daemon.options.metrics_listen,
            "steerd started"
        );
        // Once, here: what an older kernel lacks costs precision, not a warning per tick.
        if let Some(note) = crate::kernel::interfaces::KernelInterfaces::read(&root).note() {
            info!("{note}");
        }
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status("running"),
        ]);
        Ok(daemon)
    }
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
            state.remember_written(knob.clone(), value.clone());
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
