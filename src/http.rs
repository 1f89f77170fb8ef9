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

/// Binds the listener now (so a port clash is an error at start-up, not later).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
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
