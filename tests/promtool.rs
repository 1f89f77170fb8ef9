//! `promtool check metrics` accepts what `steerd run` serves at `/metrics`.
//!
//! The real binary runs with `--dry-run` on a generated two-CPU tree whose counters this
//! test advances (one CPU hot, so the policy has something to decide and the per-CPU,
//! per-IRQ and action series all have samples), gets a SIGHUP (so the reload counter has
//! one too), and after a few ticks its exposition is piped to Prometheus' own linter.
//! `promtool` comes with Debian's `prometheus` package; without it the test says so and
//! returns. Set `PROMTOOL` to use another binary.

mod common;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::suite::{TestResult, skip};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use steerd::fakeroot::{FakeCounters, FakeMachine, FakeNic, FakeTree};

/// Longest the test waits for the daemon to come up and tick.
const DEADLINE: Duration = Duration::from_secs(20);

fn promtool() -> PathBuf {
    std::env::var_os("PROMTOOL").map_or_else(|| PathBuf::from("promtool"), PathBuf::from)
}

/// `Some(version line)` when promtool runs, `None` when it is not installed.
fn promtool_version() -> Option<String> {
    match Command::new(promtool()).arg("--version").output() {
        Ok(out) => Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => panic!("cannot run {}: {e}", promtool().display()),
    }
}

/// The daemon, killed (SIGKILL) and reaped when dropped, also when the test fails.
struct Daemon {
    child: Child,
    stderr_path: PathBuf,
}

impl Daemon {
    fn start(root: &Path, addr: SocketAddr, log_dir: &Path) -> Daemon {
        let stderr_path = log_dir.join(format!("steerd-{}.stderr", addr.port()));
        let stderr = File::create(&stderr_path).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_steerd"))
            .arg("run")
            .arg("--root")
            .arg(root)
            .args(["--dry-run", "--interval", "100ms", "--metrics-listen"])
            .arg(addr.to_string())
            .arg("--state-file")
            .arg(log_dir.join("state.json"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Daemon { child, stderr_path }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on right now.
fn free_loopback_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
}

/// `GET path` over HTTP/1.0 (so the body is neither chunked nor kept alive): the body of a
/// 200 answer, or `None` when nobody answers or the answer is not a 200.
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.lines().next()?;
    status
        .split_whitespace()
        .nth(1)
        .filter(|code| *code == "200")?;
    Some(body.to_string())
}

/// The value of an unlabelled sample such as `steerd_ticks_total 12`.
fn sample(exposition: &str, name: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let (metric, value) = line.split_once(' ')?;
        (metric == name).then(|| value.trim().parse().ok())?
    })
}

/// Counters for step `n`: CPU0 takes every packet and most of its time in softirq, CPU1
/// idles; the NIC's first queue IRQ fires on CPU0.
fn counters(tree: &FakeTree, n: u64) -> FakeCounters {
    let mut counters = FakeCounters::default();
    let packets = u32::try_from((n * 5_000) % (1 << 32)).unwrap();
    counters.softnet = vec![(packets, 0, (n / 4) as u32), (0, 0, 0)];
    counters.cpu_ticks = vec![(n, n, n, n, 3 * n), (n, n, 5 * n, 0, 0)];
    counters
        .irq_counts
        .insert(tree.queue_irqs[0][0], vec![100 * n, 0]);
    counters
}

fn promtool_accepts_the_metrics_exposition() -> TestResult {
    let Some(version) = promtool_version() else {
        return skip(format!(
            "{} not found (Debian: apt-get install prometheus); the exposition was not linted",
            promtool().display()
        ));
    };
    eprintln!("using {version}");

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let mut machine = FakeMachine::new(2);
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 2,
    });
    let tree = machine.write(&root).unwrap();
    let mut step = 1;
    tree.write_counters(&counters(&tree, step)).unwrap();

    // The port is free when chosen, but another process may take it before steerd binds:
    // then steerd exits at once, and the test tries another port.
    let mut attempt = 0;
    let (mut daemon, addr) = loop {
        attempt += 1;
        let addr = free_loopback_addr();
        let mut daemon = Daemon::start(&root, addr, dir.path());
        let started = Instant::now();
        while started.elapsed() < DEADLINE && !daemon.exited() {
            if http_get(addr, "/metrics").is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !daemon.exited() && http_get(addr, "/metrics").is_some() {
            break (daemon, addr);
        }
        let port_taken = daemon.exited() && daemon.stderr().contains("cannot listen");
        assert!(
            port_taken && attempt < 3,
            "steerd did not serve /metrics within {DEADLINE:?}:\n{}",
            daemon.stderr()
        );
    };

    kill(daemon.pid(), Signal::SIGHUP).unwrap();

    // Advance the counters while steerd ticks, until it has ticked a few times since the
    // reload and counted the reload.
    let started = Instant::now();
    let exposition = loop {
        step += 1;
        tree.write_counters(&counters(&tree, step)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !daemon.exited(),
            "steerd exited early:\n{}",
            daemon.stderr()
        );
        let text = http_get(addr, "/metrics").unwrap_or_default();
        let ticks = sample(&text, "steerd_ticks_total").unwrap_or(0.0);
        if ticks >= 8.0 && text.contains("steerd_config_reloads_total{") {
            break text;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "no 8 ticks and a counted reload within {DEADLINE:?}; last /metrics:\n{text}\n\
             --- steerd stderr ---\n{}",
            daemon.stderr()
        );
    };

    // The exposition has samples in the families that matter, so the linter sees them.
    for family in [
        "steerd_cpu_softnet_processed_per_second{",
        "steerd_cpu_softirq_share{",
        "steerd_irq_effective_cpu{",
        "steerd_rx_queue_rps_cpus{",
        "steerd_tick_duration_seconds_bucket{",
        "steerd_config_reloads_total{",
        "steerd_build_info",
    ] {
        assert!(
            exposition.contains(family),
            "{family} has no sample:\n{exposition}"
        );
    }
    if !exposition.contains("steerd_actions_total{") {
        eprintln!("note: no action was decided, steerd_actions_total has no sample");
    }

    let mut lint = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = lint.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed ({}):\n{}{}\n--- exposition ---\n{exposition}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    Ok(())
}

suite_main!(promtool_accepts_the_metrics_exposition,);
