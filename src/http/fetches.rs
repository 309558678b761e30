//! Each request's part in the crawler ledger and the access log.
//!
//! A sitemap file's fetch is recorded by its handler as it answers
//! (`record`): the body's length is known then, except for a page inflated
//! as the client reads it, whose fetch is recorded when its body ends. The
//! access log's line is written when any response's body ends (sent, or
//! abandoned with its connection), with the bytes it sent.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::http::Method;
use axum::http::header::{CONTENT_LENGTH, HOST, USER_AGENT};
use axum::http::request::Parts;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::HttpState;
use crate::crawlers::{AccessLine, AccessLog, Fetch, LedgerSender, Visitor};

/// Records `fetch` in the ledger with the bytes `response` sends: at once
/// when its length is known, else when its body ends.
pub(super) fn record(
    ledger: &LedgerSender,
    mut fetch: Fetch,
    method: &Method,
    response: Response,
) -> Response {
    // A `304`'s empty body says its length itself; a page's is in its
    // header.
    let length = http_body::Body::size_hint(response.body())
        .exact()
        .or_else(|| {
            response
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        });
    match (method == Method::HEAD, length) {
        (true, _) => {
            ledger.record(fetch);
            response
        }
        (false, Some(length)) => {
            fetch.bytes = length;
            ledger.record(fetch);
            response
        }
        (false, None) => {
            let ledger = ledger.clone();
            response.map(|body| {
                Body::new(Counted {
                    body,
                    bytes: 0,
                    done: Some(Box::new(move |bytes| {
                        fetch.bytes = bytes;
                        ledger.record(fetch);
                    })),
                })
            })
        }
    }
}

/// What a request's access log line says of the request itself.
pub(super) struct Asked {
    log: AccessLog,
    at: OffsetDateTime,
    started: Instant,
    visitor: Visitor,
    method: String,
    host: Option<String>,
    path: String,
    user_agent: Option<String>,
}

impl Asked {
    /// What the access log will say of `request`; `None` when the log is
    /// off.
    pub(super) fn of(state: &HttpState, request: &Parts, peer: SocketAddr) -> Option<Asked> {
        let log = state.crawlers.access_log.clone()?;
        let headers = &request.headers;
        let text = |name| {
            headers
                .get(name)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        };
        Some(Asked {
            log,
            at: OffsetDateTime::now_utc(),
            started: Instant::now(),
            visitor: state.crawlers.identify(peer, headers),
            method: request.method.to_string(),
            host: text(HOST),
            path: request.uri.path().to_owned(),
            user_agent: text(USER_AGENT),
        })
    }
}

/// Writes the access log's line of `asked` when `response`'s body ends.
pub(super) fn log_when_sent(asked: Asked, response: Response) -> Response {
    let status = response.status().as_u16();
    response.map(|body| {
        Body::new(Counted {
            body,
            bytes: 0,
            done: Some(Box::new(move |bytes| {
                asked.log.log(&AccessLine {
                    time: asked.at.format(&Rfc3339).unwrap_or_default(),
                    client: asked.visitor.address,
                    method: asked.method,
                    host: asked.host,
                    path: asked.path,
                    status,
                    bytes,
                    duration_ms: asked.started.elapsed().as_secs_f64() * 1000.0,
                    user_agent: asked.user_agent,
                    crawler: asked.visitor.family.name(),
                    verified: asked.visitor.crawler.is_verified(),
                });
            })),
        })
    })
}

/// What is done with the bytes a body sent when it ends.
type Done = Box<dyn FnOnce(u64) + Send>;

/// A response body that counts what it sends and, when dropped (sent
/// whole, or abandoned with its connection), hands the count on.
struct Counted {
    body: Body,
    bytes: u64,
    done: Option<Done>,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.bytes += data.len() as u64;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            done(self.bytes);
        }
    }
}
