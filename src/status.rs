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

/// Why an answer from the daemon could not be had; each message says what to check.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(
        "cannot reach steerd at {addr} ({source}); is it running, and with --metrics-listen {addr}?"
    )]
    Unreachable {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{addr}{path}: {source}")]
    Io {
        addr: SocketAddr,
        path: String,
        source: std::io::Error,
    },
    #[error("{addr}{path}: the answer is longer than {MAX_RESPONSE_BYTES} bytes; is it a steerd?")]
    TooLong { addr: SocketAddr, path: String },
    #[error("{addr}{path}: not an HTTP answer; is it a steerd?")]
    NotHttp { addr: SocketAddr, path: String },
    /// The daemon answered with another status than 200 (its status line).
    #[error("{addr}{path}: {status}")]
    Status {
        addr: SocketAddr,
        path: String,
        status: String,
    },
    #[error("unexpected answer from {addr}{path} ({source}); is it a steerd of this version?")]
    Unexpected {
        addr: SocketAddr,
        path: String,
        source: serde_json::Error,
    },
}

/// Fetches the decision log from the daemon at `addr`.
pub fn fetch_decisions(addr: SocketAddr) -> Result<Vec<Decision>, FetchError> {
    fetch_json(addr, "/decisions")
}

/// The longest answer read: `/status` with its decision log (at most 64 KiB of records) is
/// well under 1 MiB.
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// Fetches the status report from the daemon at `addr`.
pub fn fetch_status(addr: SocketAddr) -> Result<StatusReport, FetchError> {
    fetch_json(addr, "/status")
}

fn fetch_json<T: serde::de::DeserializeOwned>(
    addr: SocketAddr,
    path: &str,
) -> Result<T, FetchError> {
    let body = get(addr, path)?;
    serde_json::from_str(&body).map_err(|source| FetchError::Unexpected {
        addr,
        path: path.to_string(),
        source,
    })
}

/// GETs `path` and returns the body of a 200 answer.
pub fn get(addr: SocketAddr, path: &str) -> Result<String, FetchError> {
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|source| FetchError::Unreachable { addr, source })?;
    let io = |source| FetchError::Io {
        addr,
        path: path.to_string(),
        source,
    };
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(io)?;
    let mut response = String::new();
    // Bounded: whatever answers at `addr` (perhaps not steerd) must not stream forever
    // into memory.
    (&mut stream)
        .take(MAX_RESPONSE_BYTES + 1)
        .read_to_string(&mut response)
        .map_err(io)?;
    if response.len() as u64 > MAX_RESPONSE_BYTES {
        return Err(FetchError::TooLong {
            addr,
            path: path.to_string(),
        });
    }
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        return Err(FetchError::NotHttp {
            addr,
            path: path.to_string(),
        });
    };
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(FetchError::Status {
            addr,
            path: path.to_string(),
            status: status.to_string(),
        });
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
        assert!(matches!(err, FetchError::TooLong { .. }), "{err}");
        assert!(err.to_string().contains("longer than"), "{err}");
        server.join().unwrap();
    }
}
