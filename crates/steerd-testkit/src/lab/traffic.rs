//! Traffic from the host's side of the tap to the guest, bounded in packets and time:
//! UDP flows (one connected socket per flow, paced in 1 ms slices) and TCP flows (one
//! connection per flow to a listener in the guest). A flow is its port pair, so the tap's
//! flow hash (or the guest's RSS table with `rss=on`) decides its queue.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use super::netns::{GUEST_ADDR, HOST_ADDR, LabNetns};
use super::{Result, io};

/// One burst of traffic: when it starts after the guest is ready, and what it sends.
#[derive(Debug, Clone)]
pub struct Phase {
    pub start: Duration,
    pub length: Duration,
    /// UDP flows as (source port, destination port) and the total packets/s over them.
    pub udp_flows: Vec<(u16, u16)>,
    pub udp_pps: u32,
    /// TCP destination ports (each a listener in the guest).
    pub tcp_ports: Vec<u16>,
}

/// What was sent.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sent {
    pub udp_packets: u64,
    pub udp_errors: u64,
    pub tcp_bytes: u64,
}

/// `n` UDP flows to port 9000 from distinct source ports.
pub fn udp_flows(n: u16) -> Vec<(u16, u16)> {
    (0..n).map(|i| (40000 + 7 * i, 9000 + i)).collect()
}

/// How many times a phase tries to connect to a guest's TCP port, [`CONNECT_TIMEOUT`] each.
/// Why more than once: a guest under TCG that has just carried a saturating phase can take
/// longer than one timeout to answer a SYN (the 5-minute soak in a CI-style run at 07a4645:
/// "connection timed out" at its TCP phase, a first in the runs on record; the same test
/// passed alone right after, in 314 s).
pub const CONNECT_TRIES: u32 = 3;
/// See [`CONNECT_TRIES`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A TCP connection to `addr`, tried [`CONNECT_TRIES`] times; the last error otherwise.
fn connect(addr: &SocketAddr) -> std::io::Result<TcpStream> {
    let mut tries = 1;
    loop {
        match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
            Err(e) if tries < CONNECT_TRIES => {
                eprintln!("lab: connecting to {addr} (try {tries} of {CONNECT_TRIES}): {e}");
                tries += 1;
            }
            result => return result,
        }
    }
}

/// Sends one phase from a thread inside the namespace; returns what it sent.
pub fn send(ns: &LabNetns, phase: &Phase, t0: Instant) -> Result<Sent> {
    ns.enter_thread()?;
    let start = t0 + phase.start;
    if let Some(wait) = start.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    let end = start + phase.length;
    let mut sent = Sent::default();
    let tcp = phase
        .tcp_ports
        .iter()
        .map(|&port| {
            let addr: SocketAddr = format!("{GUEST_ADDR}:{port}")
                .parse()
                .expect("a literal address");
            let stream =
                connect(&addr).map_err(io(format!("connecting to the guest's TCP port {port}")))?;
            stream
                .set_write_timeout(Some(Duration::from_millis(5)))
                .map_err(io("setting a write timeout"))?;
            stream.set_nodelay(true).map_err(io("TCP_NODELAY"))?;
            Ok(stream)
        })
        .collect::<Result<Vec<_>>>()?;
    let udp = phase
        .udp_flows
        .iter()
        .map(|&(sport, dport)| {
            let sock = UdpSocket::bind((HOST_ADDR, sport))
                .map_err(io(format!("binding UDP port {sport}")))?;
            sock.connect((GUEST_ADDR, dport))
                .map_err(io("connecting a UDP socket"))?;
            sock.set_nonblocking(true).map_err(io("O_NONBLOCK"))?;
            Ok(sock)
        })
        .collect::<Result<Vec<_>>>()?;
    let payload = [0u8; 18];
    let chunk = [0u8; 16384];
    let budget = u64::from(phase.udp_pps) * phase.length.as_secs().max(1) + 1;
    let slice = Duration::from_millis(1);
    let per_slice = f64::from(phase.udp_pps) / 1000.0;
    let mut owed = 0.0;
    let mut next = start;
    let mut flow = 0usize;
    let mut tcp_streams = tcp;
    while Instant::now() < end {
        owed += per_slice;
        while owed >= 1.0 && !udp.is_empty() && sent.udp_packets < budget {
            owed -= 1.0;
            match udp[flow % udp.len()].send(&payload) {
                Ok(_) => sent.udp_packets += 1,
                Err(_) => sent.udp_errors += 1,
            }
            flow += 1;
        }
        for stream in &mut tcp_streams {
            if let Ok(n) = stream.write(&chunk) {
                sent.tcp_bytes += n as u64;
            }
        }
        next += slice;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    Ok(sent)
}
