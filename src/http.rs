//! The HTTP endpoint: `/metrics` (OpenMetrics text for clients that ask for it in
//! `Accept`, as Prometheus does; the classic text format otherwise) and `/decisions` (JSON).
//!
//! Loopback by default. axum with only its HTTP/1 and tokio features: a small, well-kept
//! server that shares the daemon's current-thread runtime.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::decisions::DecisionLog;
use crate::metrics::Metrics;

/// What the endpoint serves, shared with the tick loop.
pub struct Shared {
    pub metrics: Metrics,
    pub decisions: Mutex<DecisionLog>,
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared {
            metrics: Metrics::new(),
            decisions: Mutex::new(DecisionLog::default()),
        })
    }

    /// The decision log as JSON.
    pub fn decisions_json(&self) -> String {
        match self.decisions.lock() {
            Ok(log) => log.to_json(),
            Err(poisoned) => poisoned.into_inner().to_json(),
        }
    }
}

/// The metrics endpoint on a thread of its own, with its own current-thread runtime.
///
/// The daemon's tick loop is a blocking `poll` loop (see `daemon::wakeups`); the HTTP
/// server is the only async part. On its own thread it sleeps in `epoll_wait` until a
/// scrape arrives, so it costs nothing between scrapes and never delays a tick.
pub struct ServerThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    stopped: std::sync::mpsc::Receiver<()>,
}

impl ServerThread {
    /// Binds `addr` on the calling thread (a port in use is an error now, not later) and
    /// serves `/metrics` and `/decisions` from a new thread.
    pub fn start(addr: SocketAddr, shared: Arc<Shared>) -> Result<ServerThread, String> {
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
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
            .map_err(|e| format!("cannot start the HTTP thread: {e}"))?;
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

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let metrics_state = shared.clone();
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
                        (
                            [(
                                header::CONTENT_TYPE,
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            )],
                            shared.metrics.encode(),
                        )
                            .into_response()
                    } else {
                        (
                            [(
                                header::CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8",
                            )],
                            shared.metrics.encode_classic(),
                        )
                            .into_response()
                    }
                }
            }),
        )
        .route(
            "/decisions",
            get(move || {
                let shared = decisions_state.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        shared.decisions_json(),
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/",
            get(|| async { "steerd: see /metrics and /decisions\n" }),
        );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
