//! Real-kernel test support: network namespaces joined by a veth pair, and bounded UDP
//! traffic between them, with every created object removed by a Drop guard (also when a
//! test fails). Traffic never leaves the namespaces the test made.
//!
//! Addresses come from 198.18.0.0/15, the range RFC 2544 sets aside for benchmarks, and
//! exist only inside the test's own namespaces.

#![allow(dead_code)]

use std::fs::File;
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use nix::sched::{CloneFlags, CpuSet, sched_setaffinity, setns};
use nix::unistd::Pid;

/// `Ok` when real-kernel tests can run here, else the skip saying why (a missing
/// prerequisite: a failure under `CI=true`).
pub fn require() -> crate::common::suite::TestResult {
    match skip_reason() {
        Some(reason) => crate::common::suite::skip(reason),
        None => Ok(()),
    }
}

/// Why real-kernel tests cannot run here, if they cannot.
pub fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: real-kernel tests need CAP_NET_ADMIN (run as root)".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("`ip` not found (apt-get install iproute2)".into());
    }
    None
}

/// Runs `ip` with arguments; panics with its stderr on failure (tests only).
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Adds a veth pair `a`/`b` inside this namespace, each end with `queues` receive and
    /// transmit queues (left down).
    pub fn add_veth(&self, a: &str, b: &str, queues: u32) {
        let q = queues.to_string();
        ip(&[
            "-n",
            &self.name,
            "link",
            "add",
            a,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            b,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ]);
    }

    pub fn create(tag: &str) -> Netns {
        let name = format!("steerd-{tag}-{}", std::process::id());
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        Netns { name }
    }

    /// Runs `f` on a new thread that has entered this namespace, pinned to `cpu`.
    pub fn spawn<T: Send + 'static>(
        &self,
        cpu: Option<usize>,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> thread::JoinHandle<T> {
        let path = format!("/var/run/netns/{}", self.name);
        thread::spawn(move || {
            let file = File::open(&path).expect("open netns");
            setns(&file, CloneFlags::CLONE_NEWNET).expect("setns");
            if let Some(cpu) = cpu {
                let mut set = CpuSet::new();
                set.set(cpu).expect("cpu in range");
                sched_setaffinity(Pid::from_raw(0), &set).expect("pin thread");
            }
            f()
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace also deletes the veth end inside it, and so its peer.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Two namespaces joined by a veth pair: `sender` (198.18.0.1) and `receiver`
/// (198.18.0.2), each end with `queues` rx and tx queues.
pub struct VethPair {
    pub receiver: Netns,
    pub sender: Netns,
    pub sender_if: String,
    pub receiver_if: String,
}

pub const SENDER_ADDR: &str = "198.18.0.1";
pub const RECEIVER_ADDR: &str = "198.18.0.2";

impl VethPair {
    pub fn create(queues: u32) -> VethPair {
        let sender = Netns::create("tx");
        let receiver = Netns::create("rx");
        let q = queues.to_string();
        let (sender_if, receiver_if) = ("veth-tx".to_string(), "veth-rx".to_string());
        ip(&[
            "link",
            "add",
            &sender_if,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            &sender.name,
            "type",
            "veth",
            "peer",
            "name",
            &receiver_if,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            &receiver.name,
        ]);
        for (ns, dev, addr) in [
            (&sender, &sender_if, SENDER_ADDR),
            (&receiver, &receiver_if, RECEIVER_ADDR),
        ] {
            ip(&[
                "-n",
                &ns.name,
                "addr",
                "add",
                &format!("{addr}/30"),
                "dev",
                dev,
            ]);
            ip(&["-n", &ns.name, "link", "set", dev, "up"]);
        }
        VethPair {
            receiver,
            sender,
            sender_if,
            receiver_if,
        }
    }
}

/// Totals of a traffic run.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrafficResult {
    pub sent: u64,
    pub received: u64,
}

impl TrafficResult {
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        1.0 - self.received as f64 / self.sent as f64
    }
}

/// A running UDP flow set: `flows` source ports → one receiver port, paced at `rate`
/// packets per second for at most `duration`, sender pinned to `sender_cpu`, receiver to
/// `receiver_cpu`. Stops by itself; `finish` waits and returns the totals.
pub struct Traffic {
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    sender: Option<thread::JoinHandle<u64>>,
    receiver: Option<thread::JoinHandle<()>>,
}

impl Traffic {
    pub fn start(
        pair: &VethPair,
        flows: u16,
        rate: u64,
        duration: Duration,
        sender_cpu: usize,
        receiver_cpu: usize,
    ) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let receiver = {
            let stop = stop.clone();
            let received = received.clone();
            pair.receiver.spawn(Some(receiver_cpu), move || {
                let socket = UdpSocket::bind((RECEIVER_ADDR, 9000)).expect("bind receiver");
                // A deep buffer (beyond rmem_max: we are root) so that the receiver being
                // descheduled for a while on a busy machine is not counted as loss.
                let _ = nix::sys::socket::setsockopt(
                    &socket,
                    nix::sys::socket::sockopt::RcvBufForce,
                    &(64 << 20),
                );
                socket
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .expect("timeout");
                let _ = ready_tx.send(());
                let mut buf = [0u8; 2048];
                loop {
                    match socket.recv(&mut buf) {
                        Ok(_) => {
                            received.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) if stop.load(Ordering::Relaxed) => break,
                        Err(_) => {}
                    }
                }
            })
        };
        let _ = ready_rx.recv_timeout(Duration::from_secs(5));
        let sender = {
            let stop = stop.clone();
            pair.sender.spawn(Some(sender_cpu), move || {
                let target: SocketAddr = format!("{RECEIVER_ADDR}:9000").parse().expect("addr");
                let sockets: Vec<UdpSocket> = (0..flows)
                    .map(|i| UdpSocket::bind((SENDER_ADDR, 20000 + i)).expect("bind sender"))
                    .collect();
                let payload = [0u8; 64];
                let started = Instant::now();
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed) && started.elapsed() < duration {
                    // Pace in 1 ms slots.
                    let due = (started.elapsed().as_secs_f64() * rate as f64) as u64;
                    while sent < due {
                        let socket = &sockets[(sent % u64::from(flows)) as usize];
                        if socket.send_to(&payload, target).is_ok() {
                            sent += 1;
                        } else {
                            break;
                        }
                    }
                    thread::sleep(Duration::from_millis(1));
                }
                sent
            })
        };
        Traffic {
            stop,
            received,
            sender: Some(sender),
            receiver: Some(receiver),
        }
    }

    /// Waits for the sender to finish, lets the receiver drain, and returns totals.
    pub fn finish(mut self) -> TrafficResult {
        let sent = self.sender.take().map_or(0, |h| h.join().unwrap_or(0));
        thread::sleep(Duration::from_millis(200));
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.receiver.take() {
            let _ = h.join();
        }
        TrafficResult {
            sent,
            received: self.received.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.sender.take() {
            let _ = h.join();
        }
        if let Some(h) = self.receiver.take() {
            let _ = h.join();
        }
    }
}

/// Per-CPU softnet `processed` (global, not per namespace), by CPU id.
pub fn softnet_processed() -> Vec<u64> {
    let text = std::fs::read_to_string("/proc/net/softnet_stat").expect("softnet_stat");
    text.lines()
        .enumerate()
        .map(|(row, line)| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let cpu = cols
                .get(12)
                .and_then(|c| u32::from_str_radix(c, 16).ok())
                .map_or(row, |c| c as usize);
            (cpu, u64::from_str_radix(cols[0], 16).unwrap_or(0))
        })
        .fold(Vec::new(), |mut v, (cpu, processed)| {
            if v.len() <= cpu {
                v.resize(cpu + 1, 0);
            }
            v[cpu] = processed;
            v
        })
}

/// The share of `processed` that ran on `cpu` between two readings.
pub fn share_on(cpu: usize, before: &[u64], after: &[u64]) -> f64 {
    let delta: Vec<u64> = after
        .iter()
        .zip(before)
        .map(|(a, b)| (a.wrapping_sub(*b)) & 0xffff_ffff)
        .collect();
    let total: u64 = delta.iter().sum();
    if total == 0 {
        return 0.0;
    }
    delta.get(cpu).copied().unwrap_or(0) as f64 / total as f64
}

/// Reads `rps_cpus` of every rx queue of `dev` inside namespace `ns` (via `ip netns exec`,
/// which mounts that namespace's /sys).
pub fn rps_masks(ns: &Netns, dev: &str) -> Vec<String> {
    let script = format!("for q in /sys/class/net/{dev}/queues/rx-*; do cat $q/rps_cpus; done");
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "sh", "-c", &script])
        .output()
        .expect("read rps_cpus");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
