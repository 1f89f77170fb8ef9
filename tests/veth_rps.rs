//! steerd on a real kernel (root only): two network namespaces joined by a veth pair with
//! 8 rx queues, a UDP sender pinned to CPU0 sending 256 flows at a bounded rate, a
//! receiver pinned to CPU1, and steerd running in the receiving namespace.
//!
//! Without steerd, all receive work stays on the sending CPU (veth has no IRQs: the whole
//! receive path runs in the sender's context). With steerd, RPS must come on within 5 s,
//! CPU1's share of softnet `processed` must reach 30 %, loss must stay under 1 %, the masks
//! must change at most twice in 20 s, and SIGTERM must bring the original masks back.
//! Everything created is removed by Drop guards, also when an assertion fails.
//!
//! Run twice: with steerd awake (quiet mode off, ticking every second when the traffic
//! starts), and with steerd in quiet mode when the traffic starts (asleep for up to
//! `quiet.interval`, woken by the kernel's NAPI polls). Each prints its reaction time, from
//! the start of the traffic to the first mask change. The two never run at once: both
//! measure CPU1's share of the machine's receive work.

mod common;
mod daemon_support;
mod netns;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::suite::{TestResult, not_here};
use netns::{Netns, Traffic, VethPair, rps_masks, share_on, softnet_processed};

const RATE: u64 = 100_000;
const FLOWS: u16 = 256;
const METRICS: &str = "127.0.0.1:9847";

/// One scenario at a time (see the module's doc).
static SERIAL: Mutex<()> = Mutex::new(());

/// How steerd is when the traffic starts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Start {
    Awake,
    Quiet,
}

/// Kills the daemon if the test ends early; only the PID this test started.
struct Daemon(Option<Child>);

impl Daemon {
    fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.0.take()?;
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn cpus_online() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| steerd::CpuSet::parse_list(&t).ok())
        .map_or(1, |s| s.len())
}

/// steerd's /metrics, scraped from inside `ns` (steerd listens on the namespace's
/// loopback); empty when it does not answer.
fn metrics(ns: &Netns) -> String {
    ns.spawn(None, move || {
        METRICS
            .parse()
            .ok()
            .and_then(|addr| steerd::status::get(addr, "/metrics").ok())
            .unwrap_or_default()
    })
    .join()
    .unwrap_or_default()
}

fn steerd_spreads_veth_receive_work_with_rps() -> TestResult {
    scenario(Start::Awake)
}

fn steerd_in_quiet_mode_wakes_and_spreads_veth_receive_work() -> TestResult {
    scenario(Start::Quiet)
}

fn scenario(start: Start) -> TestResult {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    netns::require()?;
    if cpus_online() < 2 {
        return not_here("needs at least 2 online CPUs");
    }
    let pair = VethPair::create(8);
    let originals = rps_masks(&pair.receiver, &pair.receiver_if);
    assert_eq!(originals.len(), 8);

    // Without steerd: the receive work stays on the sender's CPU.
    let before = softnet_processed();
    let baseline = Traffic::start(&pair, FLOWS, RATE, Duration::from_secs(3), 0, 1).finish();
    let after = softnet_processed();
    let baseline_share = share_on(1, &before, &after);
    eprintln!(
        "without steerd: CPU1 share {baseline_share:.3}, loss {:.4}",
        baseline.loss()
    );
    assert!(
        baseline_share < 0.05,
        "CPU1 share {baseline_share} without steerd"
    );

    // steerd in the receiving namespace. It must not touch the machine's IRQs (their
    // /proc/irq is global): non-queue IRQs are left alone, and the namespace has no NIC.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("steerd.yaml");
    let quiet = match start {
        Start::Awake => "quiet:\n  enabled: false\n",
        Start::Quiet => "",
    };
    std::fs::File::create(&config)
        .unwrap()
        .write_all(format!("irq:\n  non_queue: leave\n{quiet}").as_bytes())
        .unwrap();
    let log = std::fs::File::create(dir.path().join("steerd.log")).unwrap();
    // `ip netns exec` mounts a fresh /sys for the namespace (so that steerd sees its
    // devices), without tracefs, which quiet mode needs for the tracepoint's id: steerd
    // mounts it for a moment itself (kernel::napi_wake), which this test also checks.
    let child = Command::new("ip")
        .args(["netns", "exec", &pair.receiver.name])
        .arg(env!("CARGO_BIN_EXE_steerd"))
        .args(["run", "--interval", "1s", "--metrics-listen", METRICS])
        .arg("--config")
        .arg(&config)
        .arg("--state-file")
        .arg(dir.path().join("state.json"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start steerd");
    let mut daemon = Daemon(Some(child));
    std::thread::sleep(Duration::from_millis(1500)); // discovery and the first sample
    if start == Start::Quiet {
        // Three quiet ticks, then asleep.
        let deadline = Instant::now() + Duration::from_secs(20);
        let softnet_before = softnet_processed();
        loop {
            let text = metrics(&pair.receiver);
            let value = |name| daemon_support::sample(&text, name);
            if value("steerd_quiet_mode") == Some(1.0) {
                // It read the id from a mount of its own (this namespace's /sys has no
                // tracefs), and that mount is gone again.
                let pid = daemon.0.as_ref().map(|c| c.id()).expect("steerd runs");
                let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
                    .expect("steerd's mountinfo");
                assert!(
                    !mounts.contains("steerd-tracefs"),
                    "steerd left its tracefs mount behind:\n{mounts}"
                );
                break;
            }
            if value("steerd_quiet_mode_available") == Some(0.0) {
                let log =
                    std::fs::read_to_string(dir.path().join("steerd.log")).unwrap_or_default();
                // As root steerd finds the tracepoint's id even without tracefs mounted;
                // only a kernel or sandbox without perf events is a reason to skip.
                assert!(
                    !log.contains("tracepoint's id"),
                    "steerd could not find the napi:napi_poll id as root; log:\n{log}"
                );
                eprintln!("steerd's log:\n{log}");
                return not_here(
                    "quiet mode is unavailable here (no napi:napi_poll perf event; steerd's log above)",
                );
            }
            assert!(
                Instant::now() < deadline,
                "steerd did not go quiet within 20 s: ticks {:?}, idle ticks {:?}, packets per CPU \
                 since it started {:?} -> {:?}; log:\n{:?}",
                value("steerd_ticks_total"),
                value("steerd_idle_ticks_total"),
                softnet_before,
                softnet_processed(),
                std::fs::read_to_string(dir.path().join("steerd.log"))
            );
            // Not more often: each scrape is about ten loopback packets, and a CPU that
            // receives more than 12.8 a second (quiet.wake_after_polls per
            // quiet.interval) is not quiet.
            std::thread::sleep(Duration::from_secs(3));
        }
        // Somewhere in its sleep, not just at its start.
        std::thread::sleep(Duration::from_millis(1700));
    }

    let duration = Duration::from_secs(20);
    let before = softnet_processed();
    let started = Instant::now();
    let traffic = Traffic::start(&pair, FLOWS, RATE, duration, 0, 1);
    let mut changes = 0;
    let mut first_change: Option<Duration> = None;
    let mut last = rps_masks(&pair.receiver, &pair.receiver_if);
    let mut at_enable = None;
    while started.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(100));
        let now = rps_masks(&pair.receiver, &pair.receiver_if);
        if now != last {
            changes += 1;
            first_change.get_or_insert(started.elapsed());
            at_enable.get_or_insert_with(softnet_processed);
            eprintln!("{:>6.2}s masks {:?}", started.elapsed().as_secs_f64(), now);
            last = now;
        }
    }
    let result = traffic.finish();
    let after = softnet_processed();
    let log_text = std::fs::read_to_string(dir.path().join("steerd.log")).unwrap_or_default();
    let share_total = share_on(1, &before, &after);
    let share_after_enable = at_enable.as_ref().map_or(0.0, |at| share_on(1, at, &after));
    eprintln!(
        "with steerd ({start:?} at the start): first mask change after {:?} (reaction), {changes} change(s) in {}s, CPU1 share {share_total:.3} over the run and {share_after_enable:.3} after RPS came on, sent {} received {} loss {:.4}",
        first_change,
        duration.as_secs(),
        result.sent,
        result.received,
        result.loss()
    );
    let first_change =
        first_change.unwrap_or_else(|| panic!("RPS never came on; log:\n{log_text}"));
    assert!(
        first_change <= Duration::from_secs(5),
        "RPS came on after {first_change:?}"
    );
    assert!(
        changes <= 2,
        "masks changed {changes} times; log:\n{log_text}"
    );
    assert!(
        share_after_enable >= 0.30,
        "CPU1 share {share_after_enable}"
    );
    assert!(result.loss() < 0.01, "loss {}", result.loss());
    assert!(
        last.iter().all(|m| m != "0"),
        "some queue still without RPS: {last:?}"
    );

    // SIGTERM: the original masks come back.
    let status = daemon.terminate().expect("steerd exited");
    assert!(status.success(), "steerd exit status {status}");
    let restored = rps_masks(&pair.receiver, &pair.receiver_if);
    assert_eq!(restored, originals, "log:\n{log_text}");
    Ok(())
}

suite_main!(
    steerd_spreads_veth_receive_work_with_rps,
    steerd_in_quiet_mode_wakes_and_spreads_veth_receive_work,
);
