//! What every request on the public port goes through, around its route:
//! the `Host` check, the access log, the count by route and status, and the
//! headers every response carries.
//!
//! One service in plain code rather than a stack of middlewares: each layer
//! of a stack cost every request a clone of a boxed service and a boxed
//! future, which a `304` (a few microseconds in all) felt. For the same
//! reason a `GET` of a sitemap file goes to its handler straight, not
//! through the router's fallback.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use tokio::runtime::Handle;
use tracing::Instrument;

use super::connections::Answers;
use super::{HttpState, fetches, host, sitemaps};
use crate::metrics::route_of;
use crate::runtime::run_on;

/// The public port's routes inside the pipeline every request goes through.
#[derive(Clone)]
pub(crate) struct Public {
    state: HttpState,
    routes: Arc<Routes>,
    /// Whether files are answered here too, and `routes` only answers what
    /// [`routed`] names.
    files: bool,
}

/// The router, and where it answers: the shared runtime, since the API's
/// handlers take the CPU for as long as their batches need, which on a
/// connection thread would hold up every other connection of that thread.
/// Held together so that a request clones one `Arc` for both.
struct Routes {
    router: Router,
    runtime: Handle,
}

impl Routes {
    fn new(router: Router) -> Arc<Routes> {
        Arc::new(Routes {
            router,
            runtime: Handle::current(),
        })
    }

    /// The router's answer, on its runtime (`None`: that runtime stopped).
    /// Boxed where it is made: the route's future is kilobytes, which every
    /// request's future, a file's too, would carry otherwise.
    fn answer(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = Option<Response>> + Send + '_>> {
        let answered = self.router.answer(request, peer);
        Box::pin(run_on(&self.runtime, answered))
    }
}

impl Public {
    /// `routes` answers every request.
    pub(crate) fn new(state: HttpState, routes: Router) -> Public {
        Public {
            state,
            routes: Routes::new(routes),
            files: false,
        }
    }

    /// Sitemap files are answered by their handler, the rest by `routes`
    /// (whose fallback is the same handler).
    pub(crate) fn serving_files(state: HttpState, routes: Router) -> Public {
        Public {
            state,
            routes: Routes::new(routes),
            files: true,
        }
    }
}

/// Whether a request on `route` is one of the router's own, not a file's.
fn routed(route: &str) -> bool {
    matches!(route, "/healthz" | "/readyz" | "/metrics" | "/api/v1")
}

impl Answers for Public {
    fn answer(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> impl Future<Output = Response> + Send + use<> {
        // Boxed: the request's future is kilobytes, and hyper moves what
        // this returns; copying it whole on each move cost more than the
        // allocation.
        Box::pin(respond(self.clone(), request, peer))
    }
}

async fn respond(public: Public, request: Request<Incoming>, peer: SocketAddr) -> Response {
    let Public {
        state,
        routes,
        files,
    } = public;
    let route = route_of(request.uri().path());
    // Per request at DEBUG: a line per request at INFO cost a third of the
    // rate of `304`s (formatting it, and the lock on the output).
    let span = tracing::debug_span!(
        "request",
        method = %request.method(),
        route,
        path = %request.uri().path()
    );
    // An async fn of its own, not a block instrumented where it is
    // written: this future kept a copy of such a block in each of the
    // expression's temporaries, 12 KB in all, moved on every request.
    let response = file_or_route(&state, &routes, files, request, peer, route)
        .instrument(span)
        .await;
    state.metrics.request(route, response.status().as_u16());
    finish_response(&state, response)
}

/// The request's answer: its file's, or the router's.
async fn file_or_route(
    state: &HttpState,
    routes: &Routes,
    files: bool,
    request: Request<Incoming>,
    peer: SocketAddr,
    route: &'static str,
) -> Response {
    let (request, body) = request.into_parts();
    let asked = fetches::Asked::of(state, &request, peer);
    let response = match host::request_host(request.version, &request.headers, &request.uri) {
        Err(problem) => bad_host(problem),
        // A `HEAD` goes through the router, which frames its answer.
        Ok(host) if files && request.method == Method::GET && !routed(route) => {
            sitemaps::answer(state, &request, host.as_deref(), peer)
                .await
                .into_response()
        }
        Ok(_) => routes
            .answer(Request::from_parts(request, body), peer)
            .await
            .unwrap_or_else(|| super::HttpError::Stopping.into_response()),
    };
    tracing::debug!(status = response.status().as_u16(), "answered");
    match asked {
        Some(asked) => fetches::log_when_sent(asked, response),
        None => response,
    }
}

/// `400` for a request whose `Host` is missing, repeated or malformed, which
/// could otherwise be routed by a guess.
fn bad_host(problem: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONNECTION, HeaderValue::from_static("close"))],
        format!("bad request: {problem}\n"),
    )
        .into_response()
}

/// What every response of both listeners carries: `Retry-After` on a
/// `503`, and `nosniff`, so each is taken for its declared type and an
/// error that quotes the request stays text, whatever the request put in it.
pub(super) fn finish_response(state: &HttpState, mut response: Response) -> Response {
    let unavailable = response.status() == StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    if unavailable {
        headers
            .entry(header::RETRY_AFTER)
            .or_insert_with(|| state.retry_after.clone());
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
