//! `steerd status`: fetches `/status` from a running daemon and prints it (text, or the
//! JSON of docs/status-json.md); the exit code says healthy (0), degraded (1) or
//! unreachable (2).
//!
//! One blocking HTTP/1.0 GET on loopback, written by hand: pulling in an HTTP client crate
//! for a single request to our own server would double the dependency tree.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::decisions::Decision;
use crate::status_report::StatusReport;

/// How many decisions the text report shows, newest last.
pub const RECENT_DECISIONS: usize = 20;

/// Exit code when the daemon cannot be reached or does not answer as steerd does.
pub const UNREACHABLE: u8 = 2;

/// Fetches the decision log from the daemon at `addr`.
pub fn fetch_decisions(addr: SocketAddr) -> Result<Vec<Decision>, String> {
    let body = get(addr, "/decisions")?;
    serde_json::from_str(&body).map_err(|e| format!("unexpected answer from {addr}: {e}"))
}

/// The longest answer read: `/status` with its 256 decisions is well under 1 MiB.
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// Fetches the status report from the daemon at `addr`.
pub fn fetch_status(addr: SocketAddr) -> Result<StatusReport, String> {
    let body = get(addr, "/status")?;
    serde_json::from_str(&body).map_err(|e| {
        format!("unexpected answer from {addr}/status ({e}); is it a steerd of this version?")
    })
}

/// GETs `path` and returns the body of a 200 answer.
pub fn get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
        format!(
            "cannot reach steerd at {addr} ({e}); is it running, and with --metrics-listen {addr}?"
        )
    })?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut response = String::new();
    // Bounded: whatever answers at `addr` (perhaps not steerd) must not stream forever
    // into memory.
    (&mut stream)
        .take(MAX_RESPONSE_BYTES + 1)
        .read_to_string(&mut response)
        .map_err(|e| format!("{addr}: {e}"))?;
    if response.len() as u64 > MAX_RESPONSE_BYTES {
        return Err(format!(
            "{addr}{path}: the answer is longer than {MAX_RESPONSE_BYTES} bytes; is it a steerd?"
        ));
    }
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(format!("{addr}{path}: {status}"));
    }
    Ok(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that answers 200 and then never stops sending must not make
    /// `steerd status` read forever.
    #[test]
    fn an_answer_that_never_ends_is_cut_and_refused() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            let chunk = vec![b'x'; 1 << 16];
            let _ = peer.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
            // Until the client hangs up.
            while peer.write_all(&chunk).is_ok() {}
        });
        let err = get(addr, "/status").unwrap_err();
        assert!(err.contains("longer than"), "{err}");
        server.join().unwrap();
    }
}
