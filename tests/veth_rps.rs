//! steerd on a real kernel (root only): two network namespaces joined by a veth pair with
//! 8 rx queues, a UDP sender pinned to CPU0 sending 256 flows at a bounded rate, a
//! receiver pinned to CPU1, and steerd running in the receiving namespace.
//!
//! Without steerd, all receive work stays on the sending CPU (veth has no IRQs: the whole
//! receive path runs in the sender's context). With steerd, RPS must come on within 5 s,
//! CPU1's share of softnet `processed` must reach 30 %, loss must stay under 1 %, the masks
//! must change at most twice in 20 s, and SIGTERM must bring the original masks back.
//! Everything created is removed by Drop guards, also when an assertion fails.

mod netns;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netns::{Traffic, VethPair, rps_masks, share_on, softnet_processed};

const RATE: u64 = 100_000;
const FLOWS: u16 = 256;

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

#[test]
fn steerd_spreads_veth_receive_work_with_rps() {
    if let Some(why) = netns::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    if cpus_online() < 2 {
        eprintln!("skipping: needs at least 2 online CPUs");
        return;
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
    std::fs::File::create(&config)
        .unwrap()
        .write_all(b"irq:\n  non_queue: leave\n")
        .unwrap();
    let log = std::fs::File::create(dir.path().join("steerd.log")).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", &pair.receiver.name])
        .arg(env!("CARGO_BIN_EXE_steerd"))
        .args([
            "run",
            "--interval",
            "1s",
            "--metrics-listen",
            "127.0.0.1:9847",
        ])
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
        "with steerd: first mask change after {:?} (reaction), {changes} change(s) in {}s, CPU1 share {share_total:.3} over the run and {share_after_enable:.3} after RPS came on, sent {} received {} loss {:.4}",
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
}
