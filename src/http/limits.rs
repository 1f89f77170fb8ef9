//! The HTTP endpoint's connection handling, with limits: anyone who can reach the port can
//! talk to it, so no client may make it do work beyond a small, fixed amount.
//!
//! `axum::serve` has no connection cap, no header timeout and no lifetime bound, so this
//! drives hyper's HTTP/1 connection itself:
//!
//! - at most [`Limits::max_connections`] connections at once; one more closes the oldest
//!   (see [`Slots`] for why the oldest rather than the newest);
//! - the request head (line and headers) must arrive within
//!   [`Limits::header_read_timeout`]. hyper starts that clock whenever it waits for a head,
//!   so it is also the idle keep-alive timeout, and a client sending one byte a second is
//!   dropped after it;
//! - a head larger than [`Limits::max_header_bytes`] or with more than
//!   [`Limits::max_headers`] fields gets `431` and the connection is closed;
//! - no request carries a body: a method other than GET or HEAD gets `405` (on every path)
//!   and a request announcing a body `413`, both before any route runs, and both close
//!   the connection;
//! - a connection lives at most [`Limits::connection_lifetime`], whatever it does (a client
//!   that stops reading its answers cannot hold one forever).
//!
//! The figures are in docs/operations.md ("The HTTP endpoint").

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

/// The endpoint's limits. [`Limits::DEFAULT`] is what the daemon uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; one more closes the oldest.
    pub max_connections: usize,
    /// Time to send a whole request head, counted from when the server starts waiting
    /// for it (a new connection, or the end of the previous answer).
    pub header_read_timeout: Duration,
    /// Bytes of request line and headers.
    pub max_header_bytes: usize,
    /// Header fields in one request.
    pub max_headers: usize,
    /// The longest a connection may stay open.
    pub connection_lifetime: Duration,
    /// How long a stop waits for the answers in flight.
    pub shutdown_grace: Duration,
}

impl Limits {
    /// 64 connections (a Prometheus or two, `steerd status`, an operator's curl need a
    /// handful); 5 s for a head (a scraper sends its ~200 bytes in one packet); 8 KiB of
    /// head (Prometheus sends ~300 bytes); 32 fields; 30 s per connection (every answer
    /// is computed in memory in well under a second).
    pub const DEFAULT: Limits = Limits {
        max_connections: 64,
        header_read_timeout: Duration::from_secs(5),
        max_header_bytes: 8 * 1024,
        max_headers: 32,
        connection_lifetime: Duration::from_secs(30),
        shutdown_grace: Duration::from_secs(2),
    };
}

/// hyper's smallest read buffer (it refuses less). Bounds the memory of one connection
/// whatever the client sends: 64 connections hold at most 1 MiB of buffers.
const MAX_BUF_BYTES: usize = 16 * 1024;

/// Serves `app` on `listener` under `limits` until `shutdown` resolves, then lets the
/// answers in flight finish for up to `limits.shutdown_grace`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes)
        .max_headers(limits.max_headers)
        .max_buf_size(MAX_BUF_BYTES.max(limits.max_header_bytes));
    let slots = Slots::new(limits.max_connections);
    let (stopping, stop_seen) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            // Reaps finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before accept: wait
                    // a moment rather than spin, and keep serving.
                    tracing::debug!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (slot, mut evicted, closed_one) = slots.take();
        if closed_one {
            // Lets the closed connection's task run and free its buffers before the next
            // accept, so a flood holds at most the cap's worth of them.
            tokio::task::yield_now().await;
        }
        let connection = http.serve_connection(TokioIo::new(stream), guarded(app.clone()));
        let mut stop_seen = stop_seen.clone();
        let slots = slots.clone();
        let lifetime = limits.connection_lifetime;
        let grace = limits.shutdown_grace;
        connections.spawn(async move {
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = tokio::time::sleep(lifetime) => {}
                _ = &mut evicted => {}
                _ = stop_seen.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(grace, connection.as_mut()).await;
                }
            }
            slots.release(slot);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    let _ = tokio::time::timeout(limits.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

/// The open connections, oldest first, each with the switch that closes it.
///
/// At the cap, a new connection closes the *oldest* one rather than being refused:
/// refusing would let a few idle sockets lock every scraper (and `/healthz`) out for a
/// whole header timeout, again and again, while an honest request's bytes arrive with its
/// connection and are answered within a millisecond, long before a flood could reach the
/// cap again and close it. Memory stays bounded either way.
#[derive(Clone)]
struct Slots {
    cap: usize,
    open: Arc<Mutex<OpenConnections>>,
}

#[derive(Default)]
struct OpenConnections {
    next: u64,
    by_age: BTreeMap<u64, oneshot::Sender<()>>,
}

impl Slots {
    fn new(cap: usize) -> Slots {
        Slots {
            cap: cap.max(1),
            open: Arc::default(),
        }
    }

    /// A slot for a new connection, the signal that it is closed in turn, and whether
    /// the oldest connection was closed to make room.
    fn take(&self) -> (u64, oneshot::Receiver<()>, bool) {
        let (close, closed) = oneshot::channel();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let mut closed_one = false;
        while open.by_age.len() >= self.cap {
            if let Some((_, oldest)) = open.by_age.pop_first() {
                let _ = oldest.send(());
                closed_one = true;
            }
        }
        let id = open.next;
        open.next += 1;
        open.by_age.insert(id, close);
        (id, closed, closed_one)
    }

    fn release(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.by_age.remove(&id);
    }
}

/// `app` behind the method and body checks: what reaches a route is a GET or HEAD
/// without a body.
fn guarded(
    app: Router,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone {
    let app = TowerToHyperService::new(app);
    hyper::service::service_fn(move |request: Request<Incoming>| {
        let app = app.clone();
        async move {
            match refusal(&request) {
                Some(answer) => Ok(answer),
                None => app.call(request).await,
            }
        }
    })
}

/// The answer to a request no route may see, or `None` for a plain GET or HEAD.
pub fn refusal<B>(request: &Request<B>) -> Option<Response<Body>> {
    let method = request.method();
    if method != Method::GET && method != Method::HEAD {
        return Some(closing(
            StatusCode::METHOD_NOT_ALLOWED,
            "steerd's endpoint is read-only: GET or HEAD only\n",
        ));
    }
    let headers = request.headers();
    let announces_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() != b"0");
    if announces_body {
        return Some(closing(
            StatusCode::PAYLOAD_TOO_LARGE,
            "steerd's endpoint accepts no request body\n",
        ));
    }
    None
}

/// A plain-text answer that closes the connection (the unread body, if any, is dropped
/// with it).
fn closing(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut answer = Response::new(Body::from(text));
    *answer.status_mut() = status;
    let headers = answer.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder().method(method).uri("/metrics");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("a valid request")
    }

    #[test]
    fn at_the_cap_the_oldest_connection_is_closed() {
        let slots = Slots::new(2);
        let (first, mut first_closed, _) = slots.take();
        let (_second, mut second_closed, closed_one) = slots.take();
        assert!(!closed_one);
        assert!(first_closed.try_recv().is_err(), "closed below the cap");
        let (third, _, closed_one) = slots.take();
        assert!(closed_one);
        assert_eq!(first_closed.try_recv(), Ok(()), "the oldest was not closed");
        assert!(second_closed.try_recv().is_err());
        // A connection that ended on its own frees its slot: nobody is closed for the next.
        slots.release(third);
        let (_fourth, _, _) = slots.take();
        assert!(second_closed.try_recv().is_err(), "closed with a free slot");
        slots.release(first);
        assert_eq!(slots.open.lock().unwrap().by_age.len(), 2);
    }

    #[test]
    fn only_bodiless_get_and_head_pass() {
        assert!(refusal(&request(Method::GET, &[])).is_none());
        assert!(refusal(&request(Method::HEAD, &[])).is_none());
        assert!(refusal(&request(Method::GET, &[("content-length", "0")])).is_none());
        for method in [
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
            Method::OPTIONS,
            Method::TRACE,
        ] {
            let answer = refusal(&request(method.clone(), &[])).expect("refused");
            assert_eq!(answer.status(), StatusCode::METHOD_NOT_ALLOWED, "{method}");
            assert_eq!(answer.headers()[header::ALLOW], "GET, HEAD");
            assert_eq!(answer.headers()[header::CONNECTION], "close");
        }
        for body in [("content-length", "5"), ("transfer-encoding", "chunked")] {
            let answer = refusal(&request(Method::GET, &[body])).expect("refused");
            assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE, "{body:?}");
        }
    }
}
