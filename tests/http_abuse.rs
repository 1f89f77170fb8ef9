//! The HTTP endpoint under abuse: the whole `steerd run` binary on a generated tree (as in
//! daemon_fakeroot.rs), attacked from loopback the way anyone who can reach the port
//! could. The limits are `steerd::http::Limits::DEFAULT` (docs/operations.md, "The HTTP
//! endpoint").
//!
//! Every wait is bounded and the bounds are generous (a loaded 2-core machine): each test
//! asserts the qualitative property (dropped, still answering, still ticking) with a
//! margin several times the expected figure, and prints the figure it measured.

mod daemon_support;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use daemon_support::{FakeKernel, QueueLoad, Steerd};
use steerd::fakeroot::{FakeMachine, FakeNic};
use steerd::http::Limits;

const LIMITS: Limits = Limits::DEFAULT;

/// How long a `/healthz` may take while the endpoint is attacked. Unloaded it takes well
/// under a millisecond; this leaves room for a busy test machine.
const HEALTHZ_BOUND: Duration = Duration::from_secs(1);

/// RSS budget of the daemon (docs/performance.md).
const RSS_BUDGET_KB: u64 = 8 * 1024;

/// What 1,000 connections may add to the peak RSS: 64 connections' buffers (1 MiB) and
/// some room (measured: 1.2 MB in a debug build).
const FLOOD_GROWTH_KB: u64 = 2 * 1024;

struct Lab {
    _dir: tempfile::TempDir,
    _kernel: FakeKernel,
    daemon: Steerd,
}

/// A 4-CPU machine with one busy 4-queue NIC, so the daemon keeps ticking.
fn lab() -> Lab {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    let mut machine = FakeMachine::new(2);
    machine.threads_per_core = 2;
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 4,
    });
    let tree = machine.write(&root).expect("write the tree");
    let loads = (0..4)
        .map(|queue| QueueLoad {
            device: "eth0".into(),
            queue,
            pps: 100_000.0,
        })
        .collect();
    let kernel = FakeKernel::start(tree, loads);
    let daemon = Steerd::start(Path::new(&root), None);
    // The daemon serves before its first tick, and /healthz says 503 "no tick yet" until
    // then: the tests measure a healthy daemon, so wait for the first tick (on a loaded
    // machine it can come a while after the listener).
    daemon_support::wait_until(
        Duration::from_secs(15),
        "the first tick",
        Some(&daemon),
        || {
            request(daemon.addr, "GET /healthz HTTP/1.0\r\n\r\n")
                .0
                .contains(" 200 ")
        },
    );
    Lab {
        _dir: dir,
        _kernel: kernel,
        daemon,
    }
}

/// One request on a new connection; the status line and how long the answer took.
fn request(addr: SocketAddr, head: &str) -> (String, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream.write_all(head.as_bytes()).expect("send");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or_default().to_string();
    (status, started.elapsed())
}

/// The whole answer to one request on a new connection.
fn full_answer(addr: SocketAddr, head: &str) -> String {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream.write_all(head.as_bytes()).expect("send");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// `/healthz` answers 200; how long it took.
fn healthz(addr: SocketAddr) -> Duration {
    let (status, took) = request(addr, "GET /healthz HTTP/1.0\r\n\r\n");
    assert!(status.contains(" 200 "), "GET /healthz: {status:?}");
    took
}

fn ticks(daemon: &Steerd) -> u64 {
    daemon.metric("steerd_ticks_total").unwrap_or(0.0) as u64
}

/// `VmHWM` (peak RSS) of the daemon, in kB.
fn peak_rss_kb(daemon: &Steerd) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid()))
        .expect("read the daemon's /proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// The daemon's open file descriptors.
fn open_fds(daemon: &Steerd) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", daemon.pid()))
        .expect("read the daemon's /proc/PID/fd")
        .count()
}

/// Reads until the server closes the connection (EOF or reset); `None` if it is still
/// open after `patience`.
fn closed_within(stream: &mut TcpStream, patience: Duration) -> Option<Duration> {
    let started = Instant::now();
    stream
        .set_read_timeout(Some(patience.min(Duration::from_millis(100))))
        .expect("timeout");
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(started.elapsed()),
        }
        if started.elapsed() >= patience {
            return None;
        }
    }
}

/// A client sending its request head one byte a second is dropped after the header
/// timeout, and `/healthz` answers quickly meanwhile.
#[test]
fn a_slow_client_is_dropped_after_the_header_timeout() {
    let lab = lab();
    let addr = lab.daemon.addr;
    let head =
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let slow = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        let started = Instant::now();
        for byte in head {
            if stream.write_all(&[*byte]).is_err() {
                return (started.elapsed(), true);
            }
            std::thread::sleep(Duration::from_secs(1));
            // Dropped while sending: the next read sees EOF or a reset at once.
            if closed_within(&mut stream, Duration::from_millis(1)).is_some() {
                return (started.elapsed(), true);
            }
        }
        (started.elapsed(), false)
    });
    let mut worst = Duration::ZERO;
    while !slow.is_finished() {
        worst = worst.max(healthz(addr));
        std::thread::sleep(Duration::from_millis(200));
    }
    let (after, dropped) = slow.join().expect("slow client");
    println!(
        "slow client dropped after {after:?} (limit {:?}); worst /healthz meanwhile {worst:?}",
        LIMITS.header_read_timeout
    );
    assert!(dropped, "a 1 byte/s client was never dropped ({after:?})");
    assert!(
        after <= LIMITS.header_read_timeout + Duration::from_secs(3),
        "dropped only after {after:?}"
    );
    assert!(worst < HEALTHZ_BOUND, "/healthz took {worst:?}");
}

/// A connection that sends nothing at all is closed after the same timeout (the idle
/// keep-alive timeout is the header timeout).
#[test]
fn an_idle_connection_is_closed_after_the_header_timeout() {
    let lab = lab();
    let mut idle = TcpStream::connect(lab.daemon.addr).expect("connect");
    let after = closed_within(&mut idle, LIMITS.header_read_timeout * 4)
        .expect("an idle connection stayed open");
    println!("idle connection closed after {after:?}");
    assert!(
        after >= LIMITS.header_read_timeout - Duration::from_millis(500),
        "closed too early: {after:?}"
    );
}

/// 1,000 idle connections opened at once: `/healthz` still answers within a second, the
/// daemon holds at most `max_connections` of them, and its peak RSS stays in budget.
#[test]
fn a_thousand_idle_connections_neither_lock_out_nor_grow_the_daemon() {
    let lab = lab();
    let addr = lab.daemon.addr;
    let fds_before = open_fds(&lab.daemon);
    let rss_before = peak_rss_kb(&lab.daemon);
    let mut idle = Vec::new();
    for _ in 0..1000 {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(stream) => idle.push(stream),
            // A full listen backlog on a slow machine: the rest of the flood still counts.
            Err(e) => println!("connect: {e}"),
        }
    }
    assert!(idle.len() >= 500, "only {} connections opened", idle.len());
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        worst = worst.max(healthz(addr));
    }
    // Let the accept loop catch up with the backlog, then count what it holds.
    std::thread::sleep(Duration::from_millis(500));
    let held = open_fds(&lab.daemon).saturating_sub(fds_before);
    let still_open = idle
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(1)).is_none())
        .filter(|open| *open)
        .count();
    let rss = peak_rss_kb(&lab.daemon);
    println!(
        "{} connections: worst /healthz {worst:?}; daemon holds {held} more fds, {still_open} \
         left open; peak RSS {rss_before} -> {rss} kB",
        idle.len()
    );
    assert!(worst < HEALTHZ_BOUND, "/healthz took {worst:?}");
    assert!(
        held <= LIMITS.max_connections + 4,
        "the daemon holds {held} more descriptors than before the flood"
    );
    assert!(
        still_open <= LIMITS.max_connections,
        "{still_open} still open"
    );
    // The flood may cost the cap's worth of connection buffers (about 16 KiB each), no
    // more: 1 MiB, asserted with room.
    assert!(
        rss.saturating_sub(rss_before) < FLOOD_GROWTH_KB,
        "peak RSS grew {rss_before} -> {rss} kB"
    );
    // The budget is for the release build (a debug build's code alone is ~5 MB larger).
    if !cfg!(debug_assertions) {
        assert!(
            rss < RSS_BUDGET_KB,
            "peak RSS {rss} kB over the {RSS_BUDGET_KB} kB budget"
        );
    }
}

/// 5,000 sequential requests with 4 threads of 500 more beside them: `/healthz` stays
/// fast and the tick loop keeps ticking.
#[test]
fn a_request_flood_neither_slows_healthz_nor_stops_the_ticks() {
    let lab = lab();
    let addr = lab.daemon.addr;
    let ticks_before = ticks(&lab.daemon);
    let started = Instant::now();
    let flooders: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..500 {
                    let _ = request(addr, "GET /status HTTP/1.0\r\n\r\n");
                }
            })
        })
        .collect();
    let mut worst = Duration::ZERO;
    let mut total = Duration::ZERO;
    for i in 0..5000 {
        let path = ["/metrics", "/status", "/decisions", "/nope"][i % 4];
        let (status, took) = request(addr, &format!("GET {path} HTTP/1.0\r\n\r\n"));
        assert!(!status.is_empty(), "GET {path}: no answer");
        total += took;
        if i % 100 == 0 {
            worst = worst.max(healthz(addr));
        }
    }
    for flooder in flooders {
        flooder.join().expect("flooder");
    }
    let elapsed = started.elapsed();
    let ticks_after = ticks(&lab.daemon);
    println!(
        "7,000 requests in {elapsed:?} (mean {:?} each); worst /healthz {worst:?}; ticks \
         {ticks_before} -> {ticks_after}",
        total / 5000
    );
    assert!(worst < HEALTHZ_BOUND, "/healthz took {worst:?}");
    // 100 ms ticks: at least a quarter of them, however slow the machine.
    let expected = (elapsed.as_millis() / 100 / 4) as u64;
    assert!(
        ticks_after >= ticks_before + expected.max(1),
        "ticks {ticks_before} -> {ticks_after} in {elapsed:?}"
    );
}

/// Any method but GET or HEAD gets 405 on every path before any route runs; HEAD
/// works; a GET with a body gets 413.
#[test]
fn writes_get_405_everywhere_and_change_nothing() {
    let lab = lab();
    let addr = lab.daemon.addr;
    for path in [
        "/",
        "/metrics",
        "/healthz",
        "/status",
        "/decisions",
        "/nope",
    ] {
        for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
            let answer = full_answer(
                addr,
                &format!(
                    "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{{\"x\": \"y\"}}"
                ),
            );
            let status = answer.lines().next().unwrap_or_default();
            assert!(status.contains(" 405 "), "{method} {path}: {status:?}");
            // Refused before any route ran: the refusal's own text, not a handler's.
            assert!(
                answer.ends_with("steerd's endpoint is read-only: GET or HEAD only\n"),
                "{method} {path}: {answer:?}"
            );
            assert!(answer.contains("allow: GET, HEAD"), "{answer:?}");
        }
        let (status, _) = request(addr, &format!("HEAD {path} HTTP/1.0\r\n\r\n"));
        let expected = if path == "/nope" { " 404 " } else { " 200 " };
        assert!(status.contains(expected), "HEAD {path}: {status:?}");
    }
    let (status, _) = request(
        addr,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd",
    );
    assert!(status.contains(" 413 "), "GET with a body: {status:?}");
    healthz(addr);
}

/// A 1 MB header gets 431 (or the connection closed) after at most the limit's worth of
/// bytes, and the endpoint keeps answering.
#[test]
fn a_huge_header_gets_431_or_a_closed_connection() {
    let lab = lab();
    let addr = lab.daemon.addr;
    let mut stream = TcpStream::connect(addr).expect("connect");
    let started = Instant::now();
    let mut head = String::from("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    head.push_str(&"a".repeat(1 << 20));
    head.push_str("\r\n\r\n");
    // The server stops reading past the limit: the write fails or blocks, either is fine.
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = stream.write_all(head.as_bytes());
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let status = String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    println!("1 MB header: {status:?} after {:?}", started.elapsed());
    assert!(
        status.is_empty() || status.contains(" 431 "),
        "a 1 MB header got {status:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // Many headers: 431 too.
    let mut many = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for i in 0..(LIMITS.max_headers + 10) {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let (status, _) = request(addr, &many);
    assert!(status.contains(" 431 "), "too many headers: {status:?}");
    healthz(addr);
}
