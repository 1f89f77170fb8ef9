//! The sampling side of `steerd top`: the daemon's own readers and load model, driven
//! frame by frame, without the daemon.
//!
//! Why reuse rather than read anew: `top` must show what the daemon sees, and be as cheap
//! (docs/top-json.md gives the measured cost on the 1152-CPU tree). So a frame is one
//! [`TickSampler::sample`] (`proc/stat` and `softnet_stat`, kept open), on the host one
//! [`QueueCounterSource::sample`] (netdev qstats, else `ethtool -S`), the NAPI threads
//! the daemon counts as receive work (its rule, [`counts_as_receive_work`]), one
//! [`Load::update`] with no smoothing (a live view shows the last interval, as `top`
//! does), and a bounded re-read of the settings that change ([`super::settings`]).
//! Discovery runs at start, every [`REDISCOVER_EVERY`], and when a vector or queue vanished.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::discover::{Machine, discover};
use crate::engine::sampling::{counts_as_receive_work, read_napi_thread};
use crate::kernel::procfs::softnet::outgrew_online;
use crate::kernel::queue_counters::{DeviceId, QueueCounterSource};
use crate::kernel::sampler::TickSampler;
use crate::load::Load;
use crate::model::snapshot::{QueueCounters, QueueDirection, Snapshot};
use crate::root::Root;

use super::TopError;
use super::frame::{DaemonView, Frame, Inputs, shows_device};
use super::settings::{FILES_PER_FRAME, SettingsFiles};

/// How often the whole machine is discovered again (devices, queues, IRQs): discovery
/// reads `proc/interrupts` and costs about 70 ms on the 1152-CPU tree, 0.12 % of a CPU
/// spread over a minute.
pub const REDISCOVER_EVERY: Duration = Duration::from_secs(60);

/// Why queue rates are unknown on a `--root` tree.
const NOT_THE_HOST: &str = "--root is not this machine: per-queue counters come from netdev \
                            netlink or ethtool on the running machine only";

/// Per-queue counters, or why there are none.
enum QueueRates {
    Host(QueueCounterSource),
    Unknown(String),
}

/// Samples a machine frame after frame.
pub struct TopSampler {
    root: Root,
    machine: Machine,
    settings: SettingsFiles,
    ticks: TickSampler,
    previous: Snapshot,
    current: Snapshot,
    load: Load,
    queue_rates: QueueRates,
    rx_bytes_per_sec: HashMap<(String, u32), f64>,
    /// The CPU each threaded NAPI receive thread last ran on, by pid, this frame.
    napi_thread_cpus: HashMap<u32, u32>,
    discovered_at: Instant,
    rediscover: bool,
    warnings: Vec<String>,
}

impl TopSampler {
    /// Discovers the machine under `root` and takes the first sample. The error says
    /// which file could not be read.
    pub fn open(root: &Root) -> Result<Self, TopError> {
        let machine = discover(root).map_err(|source| TopError::Machine {
            root: root.base().to_path_buf(),
            source,
        })?;
        let ticks = TickSampler::open(root).map_err(|source| TopError::OpenCounters {
            root: root.base().to_path_buf(),
            source,
        })?;
        let queue_rates = if root.is_host() {
            match QueueCounterSource::new() {
                Ok(source) => QueueRates::Host(source),
                // No netdev family socket: ethtool alone still has most drivers' queues.
                Err(_) => QueueRates::Host(QueueCounterSource::with_netdev(None)),
            }
        } else {
            QueueRates::Unknown(NOT_THE_HOST.to_string())
        };
        let mut sampler = TopSampler {
            root: root.clone(),
            settings: SettingsFiles::new(root, &machine),
            machine,
            ticks,
            previous: Snapshot::default(),
            current: Snapshot::default(),
            load: Load::new(),
            queue_rates,
            rx_bytes_per_sec: HashMap::new(),
            napi_thread_cpus: HashMap::new(),
            discovered_at: Instant::now(),
            rediscover: false,
            warnings: Vec::new(),
        };
        sampler.follow_machine();
        sampler.read_counters()?;
        Ok(sampler)
    }

    /// The machine as last discovered (with refreshed settings).
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The load model.
    pub fn load(&self) -> &Load {
        &self.load
    }

    /// Takes the next sample and folds it into the load model. An error means the
    /// per-tick files could not be read (the root went away).
    pub fn sample(&mut self) -> Result<(), TopError> {
        self.warnings.clear();
        if self.rediscover || self.discovered_at.elapsed() >= REDISCOVER_EVERY {
            self.rediscover()?;
        }
        std::mem::swap(&mut self.previous, &mut self.current);
        self.read_counters()?;
        self.load.update(&self.previous, &self.current, 1.0);
        self.update_rx_bytes();
        let refreshed = self.settings.refresh(&mut self.machine, FILES_PER_FRAME);
        self.rediscover |= refreshed.vanished;
        self.warnings.extend(refreshed.problems);
        Ok(())
    }

    /// The frame of the last sample, with the daemon's view if one answered.
    pub fn frame(&self, daemon: Option<DaemonView>) -> Frame {
        let unknown = match &self.queue_rates {
            QueueRates::Host(_) => None,
            QueueRates::Unknown(why) => Some(why.clone()),
        };
        let mut warnings = self.machine.warnings.clone();
        warnings.extend(self.warnings.iter().cloned());
        Frame::build(Inputs {
            root: &self.root.base().to_string_lossy(),
            machine: &self.machine,
            load: &self.load,
            rx_bytes_per_sec: &self.rx_bytes_per_sec,
            napi_thread_cpus: &self.napi_thread_cpus,
            queue_rates_unknown: unknown,
            daemon,
            warnings,
        })
    }

    fn rediscover(&mut self) -> Result<(), TopError> {
        self.machine = discover(&self.root).map_err(|source| TopError::Machine {
            root: self.root.base().to_path_buf(),
            source,
        })?;
        self.settings = SettingsFiles::new(&self.root, &self.machine);
        self.discovered_at = Instant::now();
        self.rediscover = false;
        self.follow_machine();
        Ok(())
    }

    /// Points the tick sampler at the discovered machine: the IRQs it counts, and the
    /// online CPUs `softnet_stat` rows without a CPU id belong to (as the daemon does).
    fn follow_machine(&mut self) {
        let limit = self
            .machine
            .inventory
            .irqs
            .iter()
            .map(|irq| irq.irq as usize + 1)
            .max()
            .unwrap_or(0);
        self.ticks.set_irq_limit(limit);
        self.ticks
            .set_online_cpus(self.machine.topology.online_as_read());
    }

    /// Reads `proc/stat`, `softnet_stat` and (on the host) the queue counters into
    /// `self.current`. A CPU that came online since the last discovery, on a kernel whose
    /// `softnet_stat` rows carry no CPU id, outdates the online list the rows are mapped to:
    /// discover again and read once more rather than fail.
    fn read_counters(&mut self) -> Result<(), TopError> {
        let mut sampled = self.ticks.sample(&mut self.current);
        if sampled.as_ref().is_err_and(outgrew_online) {
            self.rediscover()?;
            sampled = self.ticks.sample(&mut self.current);
        }
        sampled.map_err(TopError::Counters)?;
        self.read_napi_threads();
        self.current.queues.clear();
        if let QueueRates::Host(source) = &mut self.queue_rates {
            let devices: Vec<DeviceId<'_>> = self
                .machine
                .inventory
                .devices
                .iter()
                .filter(|d| shows_device(d))
                .filter_map(|d| {
                    Some(DeviceId {
                        name: &d.name,
                        ifindex: d.ifindex?,
                    })
                })
                .collect();
            if let Err(error) = source.sample(&devices, &mut self.current.queues) {
                self.warnings.push(format!("per-queue counters: {error}"));
            }
        }
        Ok(())
    }

    /// One `proc/PID/stat` per NAPI thread (none without threaded NAPI): the CPU it ran
    /// on, for the queue table, and, for the threads whose time is receive work by the
    /// daemon's rule ([`counts_as_receive_work`]: not a busy-polling one), its CPU time for
    /// the load, so `top` shows the share the daemon acts on. A thread that is gone
    /// (`threaded` switched off) asks for a rediscovery.
    fn read_napi_threads(&mut self) {
        self.current.napi_threads.clear();
        self.napi_thread_cpus.clear();
        let queues = self
            .machine
            .inventory
            .devices
            .iter()
            .flat_map(|d| &d.rx_queues);
        for queue in queues {
            let Some(thread) = queue.napi_thread.as_ref() else {
                continue;
            };
            match read_napi_thread(&self.root, thread.pid) {
                Some(time) => {
                    self.napi_thread_cpus.insert(time.pid, time.cpu);
                    if counts_as_receive_work(queue) {
                        self.current.napi_threads.push(time);
                    }
                }
                None => self.rediscover = true,
            }
        }
    }

    /// Received bytes per second per rx queue over the last interval, where both samples
    /// have a byte counter (the load model keeps packets only).
    fn update_rx_bytes(&mut self) {
        self.rx_bytes_per_sec.clear();
        let secs = self
            .current
            .taken_at_ns
            .saturating_sub(self.previous.taken_at_ns) as f64
            / 1e9;
        if secs <= 0.0 {
            return;
        }
        let rx = |q: &&QueueCounters| q.direction == QueueDirection::Rx;
        let before: HashMap<(&str, u32), u64> = self
            .previous
            .queues
            .iter()
            .filter(rx)
            .filter_map(|q| Some(((q.device.as_str(), q.queue), q.bytes?)))
            .collect();
        for now in self.current.queues.iter().filter(rx) {
            let (Some(now_bytes), Some(&before_bytes)) =
                (now.bytes, before.get(&(now.device.as_str(), now.queue)))
            else {
                continue;
            };
            // A counter that went backwards was reset: no rate this time.
            if let Some(delta) = now_bytes.checked_sub(before_bytes) {
                self.rx_bytes_per_sec
                    .insert((now.device.clone(), now.queue), delta as f64 / secs);
            }
        }
    }
}
