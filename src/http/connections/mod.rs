//! Client connections: accepted, limited, timed out, and counted.
//!
//! sitemapd is often reachable straight from the internet, so no client may
//! hold a connection, a file descriptor or memory for longer than it takes
//! part. Each connection is bounded by three clocks: its request headers must
//! arrive within `header_read_timeout_ms` (slowloris), it is closed after
//! `keep_alive_timeout_ms` with nothing asked of it, and a client that
//! accepts no bytes of its response for `write_stall_timeout_ms` is dropped
//! (see `io`).
//!
//! At most `max_connections` are served in full at once. A few more, the
//! overflow, are each answered one request by a small router (health checks
//! answer as ever, anything else `503` with `Retry-After`) and closed, so an
//! orchestrator's probes still get through a flood; past those, a connection
//! is answered `503` and closed the moment it is accepted. All of it fits the
//! process's open-files limit, which is raised to its hard limit at start.

mod io;
mod shutdown;
mod threads;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulConnection;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use io::{Clocks, CloseReason, ConnectionState, GuardedStream, InFlight};
use shutdown::Shutdown;

use crate::metrics::Metrics;

/// The clocks and caps of one listener.
#[derive(Debug, Clone)]
pub struct Limits {
    pub(crate) header_read_timeout: Duration,
    pub(crate) keep_alive_timeout: Duration,
    pub(crate) write_stall_timeout: Duration,
    /// Connections served in full at once.
    pub(crate) max_connections: usize,
    /// Connections past those that are still answered once.
    pub overflow_connections: usize,
}

/// What answers the requests of a listener's connections, each with the
/// address of the client that sent it.
///
/// The public port's pipeline answers sitemap files straight from hyper's
/// request: a `304` goes through no tower service call, and its request
/// gets no boxed body nor an extensions map to carry the client's address,
/// each a part of what it cost.
pub(crate) trait Answers: Clone + Send + Sync + 'static {
    fn answer(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> impl Future<Output = Response> + Send + use<Self>;
}

/// A router answers with the client's address in the request's
/// extensions, where its handlers read it.
impl Answers for Router {
    fn answer(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> impl Future<Output = Response> + Send + use<> {
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(ConnectInfo(peer));
        let router = self.clone();
        async move {
            router
                .oneshot(request)
                .await
                .unwrap_or_else(|never| match never {})
        }
    }
}

/// The overflow's header timeout at most: a probe sends its request at once.
const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// Descriptors kept for everything but client connections: database
/// connections, disk-cache files, listeners, logs.
const RESERVED_FILES: u64 = 256;

impl Limits {
    /// Lowered, if need be, so that every connection it admits has a file
    /// descriptor under `open_files` (the soft limit).
    pub(crate) fn fit_open_files(mut self, open_files: u64) -> Limits {
        let available = usize::try_from(open_files.saturating_sub(RESERVED_FILES))
            .unwrap_or(usize::MAX)
            .max(2);
        let wanted = self.max_connections + self.overflow_connections;
        if wanted > available {
            let overflow = (available / 16).clamp(1, self.overflow_connections.max(1));
            tracing::warn!(
                max_connections = self.max_connections,
                open_files,
                lowered_to = available - overflow,
                "max_connections does not fit the open-files limit: lowered"
            );
            self.max_connections = available - overflow;
            self.overflow_connections = overflow;
        }
        self
    }
}

/// Raises the soft open-files limit to the hard one, so that connections,
/// not descriptors, are what the caps count; logs both.
pub fn raise_open_files_limit() {
    match rlimit::getrlimit(rlimit::Resource::NOFILE) {
        Ok((soft, hard)) => {
            let raised = rlimit::increase_nofile_limit(hard).unwrap_or(soft);
            tracing::info!(soft_before = soft, soft = raised, hard, "open files limit");
        }
        Err(error) => tracing::warn!(%error, "open files limit unknown"),
    }
}

/// The soft open-files limit in force (1,024, the usual default, if it
/// cannot be read).
pub(crate) fn open_files_limit() -> u64 {
    rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft)
}

/// Where a listener's connections are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunOn {
    /// The process's connection threads, one per core (`threads`): the
    /// public listener, where the request rate is.
    ConnectionThreads,
    /// The runtime the listener is served from: the operators' port.
    ThisRuntime,
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then
/// stops accepting and returns once every open connection has finished its
/// response (idle ones are closed at once). Connections past
/// `max_connections` are served one request by `overflow`.
pub(crate) async fn serve<A: Answers>(
    listener: TcpListener,
    run_on: RunOn,
    app: A,
    overflow: A,
    limits: Limits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let regular = Arc::new(Semaphore::new(limits.max_connections));
    let extra = Arc::new(Semaphore::new(limits.overflow_connections));
    let refusal = refusal_bytes();
    let graceful = Shutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(&error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let (router, permit, overflowing) = if let Ok(permit) = regular.clone().try_acquire_owned()
        {
            (app.clone(), permit, false)
        } else if let Ok(permit) = extra.clone().try_acquire_owned() {
            (overflow.clone(), permit, true)
        } else {
            refuse(&stream, &refusal);
            metrics.connection_closed(CloseReason::Refused.label());
            tracing::info!(%peer, reason = CloseReason::Refused.label(), "connection closed");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (metrics, closing) = (metrics.clone(), graceful.clone());
        metrics.connection_opened(overflowing);
        let (admitted, limits) = (graceful.admit(), limits.clone());
        let served = move |stream: TcpStream| async move {
            let (state, connection) = connection(stream, peer, router, &limits, overflowing);
            let result = admitted.watch(connection).await;
            let reason = close_reason(&state, &result, overflowing, closing.begun());
            metrics.connection_closed(reason.label());
            metrics.connection_ended(overflowing);
            log_close(peer, reason, result.err());
            drop(permit);
        };
        match run_on {
            RunOn::ThisRuntime => drop(tokio::spawn(served(stream))),
            // Moved as a plain socket, and registered with the reactor of
            // the runtime that will serve it.
            RunOn::ConnectionThreads => match stream.into_std() {
                Ok(stream) => threads::spawn(async move {
                    match TcpStream::from_std(stream) {
                        Ok(stream) => served(stream).await,
                        Err(error) => {
                            tracing::warn!(%peer, %error, "could not serve an accepted connection")
                        }
                    }
                }),
                Err(error) => {
                    tracing::warn!(%peer, %error, "could not serve an accepted connection")
                }
            },
        }
    }
    drop(listener);
    graceful.begin_and_wait().await;
    Ok(())
}

/// An accepted connection as hyper serves it, with the clocks on its
/// socket, and the state those clocks record.
fn connection<A: Answers>(
    stream: TcpStream,
    peer: SocketAddr,
    answers: A,
    limits: &Limits,
    overflowing: bool,
) -> (
    Arc<ConnectionState>,
    impl GracefulConnection<Error = hyper::Error> + Send + 'static,
) {
    let state = ConnectionState::new();
    let header_timeout = if overflowing {
        limits.header_read_timeout.min(OVERFLOW_HEADER_TIMEOUT)
    } else {
        limits.header_read_timeout
    };
    let stream = GuardedStream::new(
        stream,
        state.clone(),
        Clocks {
            write_stall: limits.write_stall_timeout,
            keep_alive: limits.keep_alive_timeout,
            header_read: header_timeout,
        },
    );
    let requests = state.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let in_flight = requests.begin_request();
        let answered = answers.answer(request, peer);
        async move {
            let response = answered.await;
            Ok::<_, Infallible>(response.map(|body| Tracked { body, in_flight }))
        }
    });
    let mut builder = http1::Builder::new();
    builder.keep_alive(!overflowing);
    (
        state,
        builder.serve_connection(TokioIo::new(stream), service),
    )
}

/// A response body that marks its request done when it is dropped: sent
/// whole, or abandoned with its connection.
struct Tracked {
    body: Body,
    in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracked")
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

fn close_reason(
    state: &ConnectionState,
    result: &Result<(), hyper::Error>,
    overflowing: bool,
    shutting_down: bool,
) -> CloseReason {
    if let Some(reason) = state.timed_out() {
        return reason;
    }
    match result {
        Err(error) if error.is_parse() || error.is_parse_too_large() => CloseReason::BadRequest,
        Err(_) => CloseReason::Error,
        Ok(()) if overflowing => CloseReason::OverCapacity,
        Ok(()) if shutting_down => CloseReason::Shutdown,
        Ok(()) => CloseReason::Client,
    }
}

fn log_close(peer: SocketAddr, reason: CloseReason, error: Option<hyper::Error>) {
    match reason {
        CloseReason::Client | CloseReason::Shutdown => {
            tracing::debug!(%peer, reason = reason.label(), "connection closed");
        }
        _ => match error {
            Some(error) => {
                tracing::info!(%peer, reason = reason.label(), %error, "connection closed");
            }
            None => tracing::info!(%peer, reason = reason.label(), "connection closed"),
        },
    }
}

/// What a connection past every limit is sent before it is closed.
fn refusal_bytes() -> Bytes {
    let body = "too many connections, retry later\n";
    Bytes::from(format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         retry-after: 5\r\ncache-control: no-store\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    ))
}

/// Answers `503` if the socket takes it at once, and closes: waiting for
/// this client is what the limits exist to avoid.
fn refuse(stream: &TcpStream, refusal: &[u8]) {
    let _ = stream.try_write(refusal);
}

/// Accepting can fail for the connection alone (it was reset while queued)
/// or for the process (out of descriptors): the latter gets a pause, so the
/// loop does not spin while it lasts.
async fn accept_failed(error: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused
    ) {
        return;
    }
    tracing::error!(%error, "accepting a connection failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}
