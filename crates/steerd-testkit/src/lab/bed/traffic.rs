//! The bed's traffic, bounded in time and packets, only between its two namespaces:
//!
//! * the **load**: UDP from many source ports (flows) to one receiving application,
//!   paced in 1 ms slices from a sender pinned to one CPU. On veth the receive work of a
//!   packet runs in its sender's context (no IRQ) unless RPS sends it elsewhere, so the
//!   receive path competes with the sender for its CPU, the way packet processing steals
//!   time from applications. A sender that falls behind does not catch up in a burst:
//!   what it could not send in time is counted as not sent.
//! * the **application**: one UDP socket that reads every datagram it can and counts
//!   them: what it reads is "delivered".
//! * the **probe**: a light request/response exchange (one 32-byte request every 5 ms, an
//!   echo in the receiver), sent from the load's CPU and timed there: the latency a
//!   user's RPC through the loaded receive path would see (RSS++'s measure).

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::netns::{BedNet, RECEIVER_ADDR, SENDER_ADDR};
use crate::lab::{Result, io};

const LOAD_PORT: u16 = 9000;
const PROBE_PORT: u16 = 9100;
const PROBE_EVERY: Duration = Duration::from_millis(5);
const PROBE_TIMEOUT: Duration = Duration::from_millis(200);

/// What the sender did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sent {
    pub sent: u64,
    /// Packets due that the sender could not send in time (its CPU was busy).
    pub not_sent: u64,
    pub errors: u64,
}

/// One probe's outcome, stamped with when it was sent (from the traffic's start).
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    pub at: Duration,
    /// `None` when no answer came within the timeout.
    pub rtt: Option<Duration>,
    /// The CPU whose receive path delivered the request to the echo (`SO_INCOMING_CPU`,
    /// sent back in the answer): with RPS, the CPU whose backlog the request queued in.
    pub rx_cpu: Option<u32>,
}

/// Running traffic: counters readable while it runs, and the threads to join.
pub struct Traffic {
    pub started: Instant,
    /// Datagrams the receiving application has read so far.
    pub delivered: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    sender: Option<JoinHandle<Result<Sent>>>,
    app: Option<JoinHandle<Result<()>>>,
    echo: Option<JoinHandle<Result<()>>>,
    prober: Option<JoinHandle<Result<Vec<Probe>>>>,
}

/// What the traffic did, once it ended.
pub struct Done {
    pub sent: Sent,
    pub delivered: u64,
    pub probes: Vec<Probe>,
}

impl Traffic {
    /// Starts the application and the echo (`connected_echo`: see [`echo`]), then the load
    /// (`flows` flows at `rate` pkt/s for `length`, from a thread pinned to `sender_cpu`)
    /// and the probe.
    pub fn start(
        net: &BedNet,
        flows: u16,
        rate: u32,
        length: Duration,
        sender_cpu: usize,
        connected_echo: bool,
    ) -> Result<Traffic> {
        let stop = Arc::new(AtomicBool::new(false));
        let delivered = Arc::new(AtomicU64::new(0));
        let app_socket = net.receiver.run(|| bind(RECEIVER_ADDR, LOAD_PORT))?;
        let echo_socket = net.receiver.run(|| bind(RECEIVER_ADDR, PROBE_PORT))?;
        let app = {
            let (stop, delivered) = (stop.clone(), delivered.clone());
            std::thread::spawn(move || application(app_socket, &stop, &delivered))
        };
        let echo = {
            let stop = stop.clone();
            std::thread::spawn(move || echo(echo_socket, connected_echo, &stop))
        };
        let started = Instant::now();
        let sender = {
            let stop = stop.clone();
            net.sender.spawn(Some(sender_cpu), move || {
                send_load(flows, rate, started, length, &stop)
            })
        };
        // The probe sends from the load's CPU: on veth a packet's receive path starts on
        // its sender's CPU, so this is the receive path the load is on (a NIC's probe
        // arrives through the loaded queues the same way). From an idle CPU it would
        // measure a path the load never touches.
        let prober = {
            let stop = stop.clone();
            net.sender
                .spawn(Some(sender_cpu), move || probe(started, length, &stop))
        };
        Ok(Traffic {
            started,
            delivered,
            stop,
            sender: Some(sender),
            app: Some(app),
            echo: Some(echo),
            prober: Some(prober),
        })
    }

    /// Waits for the load's end, lets the application drain for a moment, and stops.
    pub fn finish(mut self) -> Result<Done> {
        let sent = join(self.sender.take())?.unwrap_or_default();
        let probes = join(self.prober.take())?.unwrap_or_default();
        std::thread::sleep(Duration::from_millis(300));
        self.stop.store(true, Ordering::Relaxed);
        join(self.app.take())?;
        join(self.echo.take())?;
        Ok(Done {
            sent,
            delivered: self.delivered.load(Ordering::Relaxed),
            probes,
        })
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for handle in [self.app.take(), self.echo.take()].into_iter().flatten() {
            let _ = handle.join();
        }
        if let Some(h) = self.sender.take() {
            let _ = h.join();
        }
        if let Some(h) = self.prober.take() {
            let _ = h.join();
        }
    }
}

fn join<T>(handle: Option<JoinHandle<Result<T>>>) -> Result<Option<T>> {
    match handle.map(JoinHandle::join) {
        None => Ok(None),
        Some(Ok(result)) => result.map(Some),
        Some(Err(_)) => Err(crate::lab::LabError::Guest(
            "a traffic thread panicked".into(),
        )),
    }
}

fn bind(addr: &str, port: u16) -> Result<UdpSocket> {
    let socket = UdpSocket::bind((addr, port)).map_err(io(format!("binding {addr}:{port}")))?;
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(io("setting a read timeout"))?;
    Ok(socket)
}

/// Reads and counts until told to stop. Its receive buffer is deep (forced past
/// `rmem_max`: the bed runs as root) so that a moment without the CPU is not loss.
fn application(socket: UdpSocket, stop: &AtomicBool, delivered: &AtomicU64) -> Result<()> {
    let _ =
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::RcvBufForce, &(32 << 20));
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if socket.recv(&mut buf).is_ok() {
            delivered.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Answers each request with its first 8 bytes (the probe's sequence number) and the CPU
/// whose receive path delivered it, 4 bytes, little-endian (`u32::MAX`: unknown). With
/// `connect`, it connects to the first prober it hears, as an RPC server's connection is:
/// Linux records a UDP socket's receiving CPU (`SO_INCOMING_CPU`) only once it is
/// connected (RFS, which would steer such a flow, needs the global table that a
/// namespace cannot reach, so the bed has none). Unconnected (the bed's default, the
/// measure its figures were taken with) every answer pays an output route lookup through
/// the receiver's rules, and the CPU is unknown.
fn echo(socket: UdpSocket, connect: bool, stop: &AtomicBool) -> Result<()> {
    let mut buf = [0u8; 64];
    let mut connected = false;
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            if n < 8 {
                continue;
            }
            if connect && !connected {
                socket
                    .connect(from)
                    .map_err(io("connecting the echo to the probe"))?;
                connected = true;
            }
            // Unconnected, the kernel records no CPU: no call each request to learn that.
            let cpu = connected
                .then(|| incoming_cpu(&socket))
                .flatten()
                .unwrap_or(u32::MAX);
            let mut answer = [0u8; 12];
            answer[..8].copy_from_slice(&buf[..8]);
            answer[8..].copy_from_slice(&cpu.to_le_bytes());
            let _ = socket.send_to(&answer, from);
        }
    }
    Ok(())
}

/// The CPU whose receive path last delivered a packet to `socket` (`SO_INCOMING_CPU`, Linux
/// 3.19 on). By hand: nix 0.31 has no accessor for this option.
fn incoming_cpu(socket: &UdpSocket) -> Option<u32> {
    use nix::libc;
    use std::os::fd::AsRawFd;
    let mut cpu: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the descriptor is the open socket's, and `cpu` is a `c_int` whose size
    // `len` gives.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_INCOMING_CPU,
            (&mut cpu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    u32::try_from(cpu).ok().filter(|_| rc == 0)
}

/// The load: one connected socket per flow, paced in 1 ms slices.
fn send_load(
    flows: u16,
    rate: u32,
    started: Instant,
    length: Duration,
    stop: &AtomicBool,
) -> Result<Sent> {
    let sockets = (0..flows)
        .map(|i| {
            let socket = UdpSocket::bind((SENDER_ADDR, 20000 + i))
                .map_err(io(format!("binding sender port {}", 20000 + i)))?;
            socket
                .connect((RECEIVER_ADDR, LOAD_PORT))
                .map_err(io("connecting a load socket"))?;
            Ok(socket)
        })
        .collect::<Result<Vec<_>>>()?;
    let payload = [0u8; 18];
    let mut sent = Sent::default();
    // At most 10 ms of packets owed at once: a sender that lost its CPU for longer does
    // not make up for it in a burst.
    let most_owed = u64::from(rate) / 100 + 1;
    let mut flow = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let elapsed = started.elapsed();
        if elapsed >= length {
            break;
        }
        let due = (elapsed.as_secs_f64() * f64::from(rate)) as u64;
        let done = sent.sent + sent.not_sent + sent.errors;
        let owed = due.saturating_sub(done);
        if owed > most_owed {
            sent.not_sent += owed - most_owed;
        }
        for _ in 0..owed.min(most_owed) {
            match sockets[flow % sockets.len()].send(&payload) {
                Ok(_) => sent.sent += 1,
                Err(_) => sent.errors += 1,
            }
            flow += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(sent)
}

/// One request every [`PROBE_EVERY`], each waiting at most [`PROBE_TIMEOUT`] for its echo.
fn probe(started: Instant, length: Duration, stop: &AtomicBool) -> Result<Vec<Probe>> {
    let socket = UdpSocket::bind((SENDER_ADDR, 0)).map_err(io("binding the probe"))?;
    socket
        .connect((RECEIVER_ADDR, PROBE_PORT))
        .map_err(io("connecting the probe"))?;
    socket
        .set_read_timeout(Some(PROBE_TIMEOUT))
        .map_err(io("setting the probe's timeout"))?;
    let mut probes = Vec::new();
    let mut seq: u64 = 0;
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) && started.elapsed() < length {
        seq += 1;
        let mut request = [0u8; 32];
        request[..8].copy_from_slice(&seq.to_le_bytes());
        let at = started.elapsed();
        let sent_at = Instant::now();
        let (mut rtt, mut rx_cpu) = (None, None);
        if socket.send(&request).is_ok() {
            while let Ok(n) = socket.recv(&mut buf) {
                // An answer to an earlier, timed-out request is skipped.
                if n >= 12 && buf[..8] == seq.to_le_bytes() {
                    rtt = Some(sent_at.elapsed());
                    let cpu = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
                    rx_cpu = (cpu != u32::MAX).then_some(cpu);
                    break;
                }
            }
        }
        probes.push(Probe { at, rtt, rx_cpu });
        if let Some(wait) = PROBE_EVERY.checked_sub(sent_at.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    Ok(probes)
}
