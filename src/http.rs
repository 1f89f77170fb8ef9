//! The HTTP endpoint: `/metrics` (OpenMetrics text for clients that ask for it in
//! `Accept`, as Prometheus does; the classic text format otherwise), `/status` (JSON: what
//! `steerd status` prints, docs/status-json.md), `/decisions` (JSON) and `/healthz`.
//!
//! Loopback by default. axum with only its HTTP/1 and tokio features routes the requests;
//! the connections are driven by `limits`, which bounds what any client can make it do
//! (connections, time, header size; no bodies, no methods but GET and HEAD). There is no
//! control API: everything here only reads.

mod limits;

pub use limits::Limits;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};

use crate::decisions::DecisionLog;
use crate::metrics::Metrics;
use crate::status_report::{LiveStatus, LoopStall};

/// What the endpoint serves, shared with the tick loop.
pub struct Shared {
    pub metrics: Metrics,
    pub decisions: Mutex<DecisionLog>,
    /// The tick loop's heartbeat, for `/healthz`.
    pub health: Heartbeat,
    /// What `steerd status` shows, kept by the tick loop.
    pub status: Mutex<LiveStatus>,
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared {
            metrics: Metrics::new(),
            decisions: Mutex::new(DecisionLog::default()),
            health: Heartbeat::default(),
            status: Mutex::new(LiveStatus::default()),
        })
    }

    /// The `/status` report as JSON (schema: docs/status-json.md).
    ///
    /// The decision log is written in place, under its lock, as the JSON it keeps, into a
    /// buffer of one size for every request (the most the log can take, and
    /// [`STATUS_ROOM`] for the rest): cloning every record first and growing the buffer by
    /// doubling made each request's transient memory two to three times the body, and a
    /// buffer sized to each body extended the heap with each new largest one
    /// (docs/performance.md, "Where the memory goes"). The tick loop waits for the lock
    /// only to append a decision.
    pub fn status_json(&self) -> String {
        let now_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let loop_health = self.health.check().map(|_| ());
        let log = match self.decisions.lock() {
            Ok(log) => log,
            Err(poisoned) => poisoned.into_inner(),
        };
        let report = match self.status.lock() {
            Ok(live) => live.report_with(now_unix, loop_health, &*log),
            Err(poisoned) => poisoned
                .into_inner()
                .report_with(now_unix, loop_health, &*log),
        };
        let mut out = Vec::with_capacity(log.json_capacity() + STATUS_ROOM);
        let written = serde_json::to_writer(&mut out, &report);
        drop(report);
        drop(log);
        match written.map(|()| String::from_utf8(out)) {
            Ok(Ok(json)) => json,
            Ok(Err(e)) => format!("{{\"error\":\"{e}\"}}"),
            Err(e) => format!("{{\"error\":\"{e}\"}}"),
        }
    }

    /// The decision log as JSON.
    pub fn decisions_json(&self) -> String {
        match self.decisions.lock() {
            Ok(log) => log.to_json(),
            Err(poisoned) => poisoned.into_inner().to_json(),
        }
    }
}

/// Room in a `/status` buffer for everything but the decision log: a few kB on a machine
/// with a few NICs; a larger report grows its buffer once.
pub const STATUS_ROOM: usize = 16 * 1024;

/// The metrics endpoint on a thread of its own, with its own current-thread runtime.
///
/// The daemon's tick loop is a blocking `poll` loop (see `daemon::wakeups`); the HTTP
/// server is the only async part. On its own thread it sleeps in `epoll_wait` until a
/// scrape arrives, so it costs nothing between scrapes and never delays a tick.
pub struct ServerThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    stopped: std::sync::mpsc::Receiver<()>,
}

/// Why the HTTP endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerStartError {
    #[error(
        "cannot listen on {addr}: {source}; is another steerd running? choose another address with --metrics-listen"
    )]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot start the HTTP thread: {0}")]
    Thread(#[source] std::io::Error),
}

impl ServerThread {
    /// Binds `addr` on the calling thread (a port in use is an error now, not later) and
    /// serves `/metrics` and `/decisions` from a new thread.
    pub fn start(addr: SocketAddr, shared: Arc<Shared>) -> Result<ServerThread, ServerStartError> {
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| ServerStartError::Listen { addr, source })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(ServerStartError::Runtime)?;
        let (stop, stop_requested) = tokio::sync::oneshot::channel::<()>();
        let (done, stopped) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("steerd-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let served = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => {
                            serve(listener, shared, async {
                                let _ = stop_requested.await;
                            })
                            .await
                        }
                        Err(e) => Err(e),
                    };
                    if let Err(e) = served {
                        tracing::error!(error = %e, "metrics endpoint stopped");
                    }
                });
                let _ = done.send(());
            })
            .map_err(ServerStartError::Thread)?;
        Ok(ServerThread {
            stop: Some(stop),
            stopped,
        })
    }

    /// Asks the server to finish the requests in flight and waits up to `patience`.
    pub fn stop(mut self, patience: std::time::Duration) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.stopped.recv_timeout(patience);
    }
}

/// When the tick loop last finished a tick, and how long a gap still counts as healthy:
/// `/healthz` fails when the loop is stuck (the HTTP thread answers on its own, so
/// `/metrics` answering says nothing about the loop).
#[derive(Debug, Default)]
pub struct Heartbeat {
    /// CLOCK_MONOTONIC milliseconds at the end of the last tick; 0 before the first.
    last_tick_ms: std::sync::atomic::AtomicU64,
    /// The longest healthy gap between ticks, in milliseconds.
    max_gap_ms: std::sync::atomic::AtomicU64,
}

impl Heartbeat {
    /// Records a finished tick; `max_gap` is how long until the loop counts as stuck.
    pub fn beat(&self, max_gap: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.last_tick_ms.store(monotonic_ms(), Relaxed);
        self.max_gap_ms.store(max_gap.as_millis() as u64, Relaxed);
    }

    /// `Ok` with the time since the last tick, or `Err` saying why the loop is unhealthy.
    pub fn check(&self) -> Result<std::time::Duration, LoopStall> {
        use std::sync::atomic::Ordering::Relaxed;
        let last = self.last_tick_ms.load(Relaxed);
        if last == 0 {
            return Err(LoopStall::NoTickYet);
        }
        let age_ms = monotonic_ms().saturating_sub(last);
        let limit_ms = self.max_gap_ms.load(Relaxed);
        if age_ms > limit_ms {
            Err(LoopStall::Stalled { age_ms, limit_ms })
        } else {
            Ok(std::time::Duration::from_millis(age_ms))
        }
    }
}

fn monotonic_ms() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| (t.tv_sec() as u64).saturating_mul(1000) + t.tv_nsec() as u64 / 1_000_000)
        .unwrap_or(0)
}

/// `body` with its content type: every answer but `/healthz`'s is one.
fn typed(content_type: &'static str, body: String) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// A GET route answering what `body` makes of the shared state, as JSON (`/status`,
/// `/decisions`).
fn json(shared: Arc<Shared>, body: fn(&Shared) -> String) -> MethodRouter {
    get(move || {
        let shared = shared.clone();
        async move { typed("application/json", body(&shared)) }
    })
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let metrics_state = shared.clone();
    let health_state = shared.clone();
    let status_state = shared.clone();
    let decisions_state = shared;
    let app = Router::new()
        .route(
            "/metrics",
            get(move |headers: axum::http::HeaderMap| {
                let shared = metrics_state.clone();
                async move {
                    let wants_openmetrics = headers
                        .get(header::ACCEPT)
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.contains("application/openmetrics-text"));
                    if wants_openmetrics {
                        typed(
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            shared.metrics.encode(),
                        )
                    } else {
                        typed(
                            "text/plain; version=0.0.4; charset=utf-8",
                            shared.metrics.encode_classic(),
                        )
                    }
                }
            }),
        )
        .route("/decisions", json(decisions_state, Shared::decisions_json))
        .route("/status", json(status_state, Shared::status_json))
        .route(
            "/healthz",
            get(move || {
                let shared = health_state.clone();
                async move {
                    match shared.health.check() {
                        Ok(age) => (
                            axum::http::StatusCode::OK,
                            format!("ok: last tick {} ms ago\n", age.as_millis()),
                        )
                            .into_response(),
                        Err(stall) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("{stall}\n"),
                        )
                            .into_response(),
                    }
                }
            }),
        )
        .route(
            "/",
            get(|| async { "steerd: see /metrics, /status, /decisions and /healthz\n" }),
        );
    limits::serve(listener, app, Limits::DEFAULT, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_fails_before_the_first_tick_and_when_ticks_stop() {
        let health = Heartbeat::default();
        assert_eq!(health.check(), Err(LoopStall::NoTickYet));
        assert_eq!(LoopStall::NoTickYet.to_string(), "no tick yet");
        health.beat(std::time::Duration::from_secs(60));
        assert!(health.check().is_ok());
        health.beat(std::time::Duration::ZERO);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let why = health.check().unwrap_err();
        assert!(
            matches!(why, LoopStall::Stalled { limit_ms: 0, age_ms } if age_ms >= 5),
            "{why}"
        );
        let why = why.to_string();
        assert!(why.starts_with("tick loop stalled: last tick "), "{why}");
        assert!(why.contains("journalctl -u steerd"), "{why}");
    }
}
