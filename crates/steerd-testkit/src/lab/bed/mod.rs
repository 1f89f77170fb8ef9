//! The veth throughput bed: where spreading receive work over more CPUs can deliver more
//! packets, unlike the QEMU guest, whose vCPUs share the host's cores with QEMU and the
//! sender (docs/lab.md, "Saturation").
//!
//! On the host kernel, in two namespaces of its own joined by a multi-queue veth pair, a
//! UDP sender pinned to one CPU sends many flows to one application in the receiver's
//! namespace, whose input route lookup scans never-matching policy-routing rules (a
//! per-packet cost in the softirq path, like netfilter rules). veth has no IRQ: without
//! RPS the whole receive path runs on the sender's CPU and throttles it. Each run takes
//! one balancer (`none`, `steerd` with its built-in configuration in the receiver's
//! namespace, `hand`: RPS over every online CPU on every queue, the seeds' recipe) and
//! measures packets delivered to the application, drops, the irq+softirq share of every
//! CPU and a light request/response probe's latency, and checks that every mask is back
//! after the balancer stops. irqbalance is not a balancer here: veth has no IRQ to move.
//!
//! `examples/bed.rs` is its command line (`scripts/bed.sh`); `tests/veth_bed.rs` its short
//! form in CI.

pub mod measure;
pub mod netns;
pub mod report;
pub mod traffic;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{LabError, Result, io};
use netns::BedNet;
use traffic::Traffic;

/// What steers the receiver's queues in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BedBalancer {
    None,
    Steerd,
    Hand,
}

impl BedBalancer {
    pub const ALL: [BedBalancer; 3] = [BedBalancer::None, BedBalancer::Steerd, BedBalancer::Hand];

    pub fn name(self) -> &'static str {
        match self {
            BedBalancer::None => "none",
            BedBalancer::Steerd => "steerd",
            BedBalancer::Hand => "hand",
        }
    }

    pub fn parse(s: &str) -> Option<BedBalancer> {
        Self::ALL.into_iter().find(|b| b.name() == s)
    }
}

/// The bed's shape and load.
#[derive(Debug, Clone)]
pub struct BedConfig {
    pub queues: u32,
    pub rules: u32,
    pub flows: u16,
    pub rate: u32,
    pub length: Duration,
    pub sender_cpu: usize,
    pub steerd: PathBuf,
    /// The probe's echo connects to the prober (`traffic::echo`): the runs then say which
    /// CPU received the probe's requests (`probe_rx_share`).
    pub connected_echo: bool,
    /// Changes of the receiver's receive queues during each run, in time order, the last
    /// back to `queues` (`--channels-at`; [`ChannelChange::check`]).
    pub channel_changes: Vec<ChannelChange>,
}

/// A change of the receiver's receive queue count during a run (`ethtool -L bed-rx rx N`),
/// as an operator's `ethtool -L` on a NIC: the kernel removes the queues above N with
/// their masks and re-creates them with empty masks (`rps_cpus` 0) when the count comes
/// back. Why the bed has it: a queue-set change is where steerd forgets what its RPS
/// trials learnt and turns off the masks it set for the old queues (docs/policy.md, "a
/// trial"); the lab's guests never kept a mask before such a change, the bed keeps one in
/// every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelChange {
    pub at: Duration,
    pub rx_queues: u32,
}

impl ChannelChange {
    /// `SECS:N[,SECS:N...]`: at SECS seconds into the traffic, N receive queues.
    pub fn parse_list(text: &str) -> std::result::Result<Vec<ChannelChange>, String> {
        text.split(',')
            .map(|item| {
                let (at, n) = item
                    .split_once(':')
                    .ok_or(format!("{item:?}: expected SECS:QUEUES"))?;
                let at: f64 = at
                    .parse()
                    .map_err(|e| format!("{item:?}: seconds {at:?}: {e}"))?;
                if !at.is_finite() || at < 0.0 {
                    return Err(format!("{item:?}: seconds must be 0 or more"));
                }
                let rx_queues = n
                    .parse()
                    .map_err(|e| format!("{item:?}: queues {n:?}: {e}"))?;
                Ok(ChannelChange {
                    at: Duration::from_secs_f64(at),
                    rx_queues,
                })
            })
            .collect()
    }

    /// Why `changes` cannot run on `config`'s bed, or `None`: in time order within the
    /// traffic, each count between 1 and the veth's `queues`, the last back to `queues` (so
    /// that every run ends with the queues whose masks it checks are restored).
    pub fn check(changes: &[ChannelChange], config: &BedConfig) -> Option<String> {
        let last = changes.last()?;
        if let Some(c) = changes
            .iter()
            .find(|c| c.rx_queues == 0 || c.rx_queues > config.queues)
        {
            return Some(format!(
                "{} rx queues at {:?}: the veth has 1 to {}",
                c.rx_queues, c.at, config.queues
            ));
        }
        if changes.windows(2).any(|w| w[1].at <= w[0].at) || last.at >= config.length {
            return Some(format!(
                "the changes must be in time order and within the {:?} of traffic",
                config.length
            ));
        }
        (last.rx_queues != config.queues).then(|| {
            format!(
                "the last change must bring the receiver back to its {} queues",
                config.queues
            )
        })
    }
}

/// The defaults make a load one CPU cannot carry and two can, on these 2-CPU machines:
/// with 3,000 rules the sender's CPU alone delivered 20-23k pkt/s at 0.88-0.91
/// irq+softirq, and RPS over both CPUs 40k of 40k offered (docs/lab.md). With 1,000
/// rules one CPU here delivered 49k: the cost per rule differs between hosts, so
/// `--rules` and `--rate` are flags, and the short test checks that `none` is saturated.
impl Default for BedConfig {
    fn default() -> Self {
        BedConfig {
            queues: 4,
            rules: 3000,
            flows: 64,
            rate: 40_000,
            length: Duration::from_secs(20),
            sender_cpu: 0,
            steerd: PathBuf::from("target/release/steerd"),
            connected_echo: false,
            channel_changes: Vec::new(),
        }
    }
}

/// One run's figures (one JSON line with `--format json`). Rates are over the steady
/// window: the second half of the traffic.
#[derive(Debug, Clone, Serialize)]
pub struct BedRun {
    /// `veth-bed`, or `veth-bed-channels` with channel changes (`--channels-at`).
    pub scenario: &'static str,
    pub balancer: &'static str,
    pub rep: u32,
    pub offered_pps: u32,
    pub sent_pps: f64,
    pub delivered_pps: f64,
    /// Delivered over the whole traffic, not only the steady window: what a balancer's
    /// slow start, or a pause after a channel change, cost.
    pub delivered_run_pps: f64,
    /// softnet `dropped` (backlog full) over the whole run, every CPU.
    pub softnet_drops: u64,
    /// veth has no tap: always `null`; kept so that lab and bed lines share their fields.
    pub tap_drops: Option<u64>,
    /// The receiver's UDP `RcvbufErrors` over the run (the application's socket full).
    pub rcvbuf_errors: u64,
    /// Packets due that the sender could not send in time, over the run.
    pub not_sent: u64,
    pub busiest_si_share: f64,
    pub si_share: Vec<f64>,
    pub processed_share: Vec<f64>,
    /// Seconds from the traffic's start to the first `rps_cpus` change (`hand`: written
    /// before the traffic, 0; `none`: `null`).
    pub first_change_s: Option<f64>,
    pub changes_after_convergence: u32,
    pub restored: bool,
    pub probe_p50_us: Option<f64>,
    pub probe_p99_us: Option<f64>,
    pub probe_lost: u32,
    /// By CPU, the share of the steady window's answered probes whose request that CPU's
    /// receive path delivered to the echo (`SO_INCOMING_CPU`): with RPS, whose backlog it
    /// queued in. The probe is one flow, so RPS sends all of it to one CPU of the mask.
    /// `null` unless the echo is connected (`--connected-echo`): the kernel records the
    /// CPU only for a connected socket.
    pub probe_rx_share: Option<Vec<f64>>,
    /// The receiver's masks in the steady window, queue by queue.
    pub rps_cpus: Vec<String>,
    /// steerd's own CPU time over the steady window, in CPUs (0.02: 2 % of one CPU);
    /// `null` for `none` and `hand`. On a saturated bed it is taken from the packets.
    pub balancer_cpu: Option<f64>,
    /// How long the run waited, before making its namespaces, for the machine to be quiet
    /// (`measure::wait_for_quiet`: at most 15 s).
    pub waited_for_quiet_s: f64,
    /// steerd's undo of an RPS trial during the run, as its log gives it (masks and
    /// reason), or `null`: an undone trial leaves the bed as `none` left it.
    pub rps_undone: Option<String>,
    /// The masks steerd turned off because their device's queue set changed (its
    /// `rps_reset` writes, from its log); `null` for `none` and `hand`.
    pub rps_resets: Option<u32>,
}

/// `balancers` in the order round `rep` runs them: as given in odd rounds, with `steerd`
/// and `hand` swapped in even ones. The bed has an order effect of its own: on 2026-11-29's
/// host, three rounds in the order none, steerd, hand read steerd/hand 0.78, 0.88, 1.07,
/// and three in the order none, hand, steerd 1.13, 1.11, 1.09 (`examples/bed --balancers`),
/// so a comparison of the two always in one order measured the order.
pub fn round_order(balancers: &[BedBalancer], rep: u32) -> Vec<BedBalancer> {
    let mut order = balancers.to_vec();
    if rep.is_multiple_of(2) {
        let at = |b| order.iter().position(|&o| o == b);
        if let (Some(s), Some(h)) = (at(BedBalancer::Steerd), at(BedBalancer::Hand)) {
            order.swap(s, h);
        }
    }
    order
}

/// Why the bed cannot run on this machine, or `None` when it can.
pub fn unavailable(config: &BedConfig) -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (network namespaces, veth, RPS masks)".into());
    }
    if super::which("ip").is_none() {
        return Some("ip not found (apt-get install iproute2)".into());
    }
    let online = online_cpus();
    if online < 2 || config.sender_cpu >= online {
        return Some(format!(
            "needs at least 2 online CPUs and the sender's CPU {} among them ({online} online)",
            config.sender_cpu
        ));
    }
    if !config.channel_changes.is_empty() && super::which("ethtool").is_none() {
        return Some("channel changes need ethtool (apt-get install ethtool)".into());
    }
    ChannelChange::check(&config.channel_changes, config)
}

/// The number of CPUs online (`/sys/devices/system/cpu/online`), at least 1.
pub fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| steerd_kernel::CpuSet::parse_list(t.trim()).ok())
        .map_or(1, |s| s.len())
}

/// Runs the bed once with `balancer`.
pub fn run(config: &BedConfig, balancer: BedBalancer, rep: u32) -> Result<BedRun> {
    let waited_for_quiet = measure::wait_for_quiet(Duration::from_secs(15))?;
    let net = BedNet::create(config.queues, config.rules)?;
    let originals = net.rps_masks()?;
    let work = tempfile::tempdir().map_err(io("making a temporary directory"))?;
    let mut daemon = None;
    let mut first_change = None;
    match balancer {
        BedBalancer::None => {}
        BedBalancer::Hand => {
            let all = hex_mask(online_cpus())?;
            for q in 0..config.queues {
                net.write_queue(q, "rps_cpus", &all)?;
            }
            first_change = Some(0.0);
        }
        BedBalancer::Steerd => {
            daemon = Some(Steerd::start(&config.steerd, &net, work.path())?);
            // Discovery and the first samples before the load.
            std::thread::sleep(Duration::from_millis(1500));
        }
    }
    let before_run = measure::softnet()?;
    let rcvbuf_before = net.udp_counter("RcvbufErrors")?;
    let steerd_pid = daemon.as_ref().and_then(Steerd::pid);
    let traffic = Traffic::start(
        &net,
        config.flows,
        config.rate,
        config.length,
        config.sender_cpu,
        config.connected_echo,
    )?;
    let half = config.length / 2;
    let mut last = net.rps_masks()?;
    let mut changes_after = 0u32;
    let mut window: Option<Reading> = None;
    let mut steady_masks = last.clone();
    let mut channel_changes = config.channel_changes.iter().peekable();
    while traffic.started.elapsed() < config.length {
        std::thread::sleep(Duration::from_millis(100));
        let at = traffic.started.elapsed();
        while let Some(change) = channel_changes.next_if(|c| at >= c.at) {
            net.set_rx_queues(change.rx_queues)?;
        }
        let masks = net.rps_masks()?;
        if masks != last {
            // The queues both readings have: a queue the kernel removed or re-created is
            // the channel change's doing, not the balancer's.
            let changed = masks.iter().zip(&last).filter(|(a, b)| a != b).count() as u32;
            if changed > 0 && first_change.is_none() {
                first_change = Some(at.as_secs_f64());
            }
            if window.is_some() {
                changes_after += changed;
            }
            last = masks;
        }
        if window.is_none() && at >= half {
            window = Some(Reading::take(&traffic, steerd_pid)?);
            steady_masks = last.clone();
        }
    }
    let end = Reading::take(&traffic, steerd_pid)?;
    let done = traffic.finish()?;
    let after_run = measure::softnet()?;
    let rcvbuf_errors = net
        .udp_counter("RcvbufErrors")?
        .saturating_sub(rcvbuf_before);

    // Stop the balancer and see what is left.
    let mut steerd_log = Vec::new();
    match balancer {
        BedBalancer::Steerd => {
            if let Some(mut d) = daemon.take() {
                d.stop()?;
                steerd_log = d.log_lines();
                d.keep_log(rep)?;
            }
        }
        BedBalancer::Hand => {
            for (q, original) in originals.iter().enumerate() {
                net.write_queue(q as u32, "rps_cpus", original)?;
            }
        }
        BedBalancer::None => {}
    }
    let restored = net.rps_masks()? == originals;

    let start =
        window.ok_or_else(|| LabError::Guest("the traffic ended before its window".into()))?;
    let secs = end.at.duration_since(start.at).as_secs_f64().max(1e-3);
    let si_share = measure::si_shares(&start.cpu_times, &end.cpu_times);
    let processed = measure::softnet_delta(&start.softnet, &end.softnet);
    let total_processed: u64 = processed.iter().map(|p| p.0).sum();
    let processed_share: Vec<f64> = processed
        .iter()
        .map(|p| p.0 as f64 / total_processed.max(1) as f64)
        .collect();
    let softnet_drops = measure::softnet_delta(&before_run, &after_run)
        .iter()
        .map(|p| p.1)
        .sum();
    let steady_probes: Vec<_> = done.probes.iter().filter(|p| p.at >= half).collect();
    let mut rtts: Vec<f64> = steady_probes
        .iter()
        .filter_map(|p| p.rtt)
        .map(|d| d.as_secs_f64() * 1e6)
        .collect();
    rtts.sort_by(f64::total_cmp);
    let mut probe_rx = vec![0u32; si_share.len()];
    for cpu in steady_probes.iter().filter_map(|p| p.rx_cpu) {
        if let Some(count) = probe_rx.get_mut(cpu as usize) {
            *count += 1;
        }
    }
    let answered = rtts.len().max(1) as f64;
    let length = config.length.as_secs_f64();
    Ok(BedRun {
        scenario: if config.channel_changes.is_empty() {
            "veth-bed"
        } else {
            "veth-bed-channels"
        },
        balancer: balancer.name(),
        rep,
        offered_pps: config.rate,
        sent_pps: round(done.sent.sent as f64 / length, 0),
        delivered_pps: round(
            end.delivered.saturating_sub(start.delivered) as f64 / secs,
            0,
        ),
        delivered_run_pps: round(end.delivered as f64 / length, 0),
        softnet_drops,
        tap_drops: None,
        rcvbuf_errors,
        not_sent: done.sent.not_sent,
        busiest_si_share: round(si_share.iter().copied().fold(0.0, f64::max), 3),
        si_share: si_share.into_iter().map(|s| round(s, 3)).collect(),
        processed_share: processed_share.into_iter().map(|s| round(s, 3)).collect(),
        first_change_s: first_change.map(|s| round(s, 1)),
        changes_after_convergence: changes_after,
        restored,
        probe_p50_us: measure::quantile(&rtts, 0.5).map(|v| round(v, 0)),
        probe_p99_us: measure::quantile(&rtts, 0.99).map(|v| round(v, 0)),
        probe_lost: (steady_probes.len() - rtts.len()) as u32,
        probe_rx_share: config.connected_echo.then(|| {
            probe_rx
                .iter()
                .map(|&n| round(f64::from(n) / answered, 3))
                .collect()
        }),
        rps_cpus: steady_masks,
        balancer_cpu: match (start.steerd_ticks, end.steerd_ticks) {
            (Some(a), Some(b)) => Some(round(b.saturating_sub(a) as f64 / clock_ticks() / secs, 3)),
            _ => None,
        },
        waited_for_quiet_s: round(waited_for_quiet.as_secs_f64(), 1),
        rps_undone: crate::lab::report::rps_writes(&steerd_log, "rps_undo")
            .next()
            .map(|line| {
                line.split_once(" INFO ")
                    .map_or(line.as_str(), |(_, l)| l)
                    .to_string()
            }),
        rps_resets: (balancer == BedBalancer::Steerd)
            .then(|| crate::lab::report::rps_writes(&steerd_log, "rps_reset").count() as u32),
    })
}

/// USER_HZ, the unit of `/proc/PID/stat`'s times (100 where sysconf cannot say).
fn clock_ticks() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&t| t > 0)
        .map_or(100.0, |t| t as f64)
}

/// The counters at one edge of the steady window.
struct Reading {
    at: Instant,
    delivered: u64,
    cpu_times: Vec<(u64, u64)>,
    softnet: Vec<(u64, u64)>,
    /// steerd's utime + stime (USER_HZ ticks), when it runs.
    steerd_ticks: Option<u64>,
}

impl Reading {
    fn take(traffic: &Traffic, steerd: Option<u32>) -> Result<Reading> {
        Ok(Reading {
            at: Instant::now(),
            delivered: traffic.delivered.load(std::sync::atomic::Ordering::Relaxed),
            cpu_times: measure::cpu_times()?,
            softnet: measure::softnet()?,
            steerd_ticks: steerd.and_then(measure::process_ticks),
        })
    }
}

fn round(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

/// The kernel's hex mask for CPUs 0..n (`3` for two CPUs).
fn hex_mask(n: usize) -> Result<String> {
    steerd_kernel::CpuSet::first_n(n as u32)
        .to_mask(n as u32)
        .map_err(|e| LabError::Guest(format!("a mask of {n} CPUs: {e}")))
}

/// steerd in the receiver's namespace (`ip netns exec`, which mounts that namespace's
/// `/sys`), on its built-in configuration but for `irq.non_queue: leave`: `/proc/irq` is
/// the host's, and the bed must not move the host's own IRQs (the namespace has no NIC,
/// so no queue IRQ is steerd's to move either way).
struct Steerd {
    child: Option<Child>,
    log: PathBuf,
}

impl Steerd {
    fn start(binary: &Path, net: &BedNet, dir: &Path) -> Result<Steerd> {
        let config = dir.join("steerd.yaml");
        std::fs::write(&config, "irq:\n  non_queue: leave\n")
            .map_err(io("writing the bed's steerd.yaml"))?;
        let log = dir.join("steerd.log");
        let stderr = std::fs::File::create(&log).map_err(io("creating steerd's log"))?;
        let binary = std::fs::canonicalize(binary)
            .map_err(io(format!("finding steerd at {}", binary.display())))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &net.receiver.name])
            .arg(&binary)
            .args(["run", "--config"])
            .arg(&config)
            .arg("--state-file")
            .arg(dir.join("state.json"))
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(io("starting steerd"))?;
        Ok(Steerd {
            child: Some(child),
            log,
        })
    }

    /// steerd's PID: `ip netns exec` execs it in place, so the child is steerd.
    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// steerd's log so far, line by line (empty when unreadable: the figures it gives are
    /// extras, and a stop that failed has said why already).
    fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Copies steerd's log to `$BED_STEERD_LOG/steerd-REP.log` when that is set (as
    /// `LAB_CONSOLE` keeps the lab's consoles): every decision of the run, for a round
    /// whose figures need explaining.
    fn keep_log(&self, rep: u32) -> Result<()> {
        let Some(dir) = std::env::var_os("BED_STEERD_LOG") else {
            return Ok(());
        };
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let kept = dir.join(format!("steerd-{rep}.log"));
        std::fs::copy(&self.log, &kept)
            .map_err(io(format!("copying steerd's log to {}", kept.display())))?;
        Ok(())
    }

    /// SIGTERM, then up to 10 s for steerd to restore and exit.
    fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                if !status.success() {
                    return Err(LabError::Guest(format!(
                        "steerd exited {status}; its log:\n{}",
                        std::fs::read_to_string(&self.log).unwrap_or_default()
                    )));
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(LabError::Guest(
            "steerd did not exit within 10 s of SIGTERM".into(),
        ))
    }
}

impl Drop for Steerd {
    fn drop(&mut self) {
        // Only the PID this bed started.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_changes_parse_and_are_checked_against_the_bed() {
        let config = BedConfig::default();
        let changes = ChannelChange::parse_list("10:2,15.5:4").expect("parses");
        assert_eq!(
            changes,
            vec![
                ChannelChange {
                    at: Duration::from_secs(10),
                    rx_queues: 2
                },
                ChannelChange {
                    at: Duration::from_millis(15_500),
                    rx_queues: 4
                },
            ]
        );
        assert_eq!(ChannelChange::check(&changes, &config), None);
        assert_eq!(ChannelChange::check(&[], &config), None);
        for bad in ["10", "x:2", "10:y", "-1:2", "inf:2"] {
            assert!(ChannelChange::parse_list(bad).is_err(), "{bad}");
        }
        for (list, why) in [
            ("10:2", "back to its 4 queues"),
            ("10:0,12:4", "the veth has 1 to 4"),
            ("10:5,12:4", "the veth has 1 to 4"),
            ("12:2,10:4", "time order"),
            ("10:2,20:4", "time order"),
        ] {
            let changes = ChannelChange::parse_list(list).expect("parses");
            let said = ChannelChange::check(&changes, &config).unwrap_or_default();
            assert!(said.contains(why), "{list}: {said}");
        }
    }
}
