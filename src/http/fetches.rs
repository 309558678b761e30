//! Each response's part in the crawler ledger and the access log: who
//! asked (after trusted proxies), which sitemap file and version they were
//! served, the bytes the body sent and how long it took. Recorded when the
//! body ends (sent, or abandoned with its connection), off the request's
//! own work: lookups in memory and a send on a bounded channel.

use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{HOST, USER_AGENT};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::HttpState;
use crate::crawlers::{AccessLine, Crawlers, Fetch, Visitor};

/// Set on a response by the handler of a sitemap file (an index file, a
/// page, a news sitemap): which file of which site was asked for.
#[derive(Debug, Clone)]
pub(crate) struct SitemapFile {
    pub(crate) site: Arc<str>,
    pub(crate) file: Box<str>,
    /// The version served (its lastmod), when the file exists.
    pub(crate) version: Option<OffsetDateTime>,
}

/// Set on the response of a file that exists: the version it served.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServedVersion(pub(crate) OffsetDateTime);

/// What a request's line in the access log says of the request itself.
struct Asked {
    method: String,
    host: Option<String>,
    path: String,
    user_agent: Option<String>,
}

pub(super) async fn watch(
    State(state): State<HttpState>,
    request: Request,
    next: Next,
) -> Response {
    let crawlers = &state.crawlers;
    if !crawlers.watching() {
        return next.run(request).await;
    }
    let started = Instant::now();
    let at = OffsetDateTime::now_utc();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)), |info| info.0);
    let visitor = crawlers.identify(peer, request.headers());
    let asked = crawlers.access_log.is_some().then(|| {
        let text = |name| {
            request
                .headers()
                .get(name)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        };
        Asked {
            method: request.method().to_string(),
            host: text(HOST),
            path: request.uri().path().to_owned(),
            user_agent: text(USER_AGENT),
        }
    });
    let mut response = next.run(request).await;
    let file = response.extensions_mut().remove::<SitemapFile>();
    let fetch = match (&crawlers.ledger, file) {
        (Some(_), Some(file)) => Some(Fetch {
            at,
            site: file.site,
            file: file.file,
            crawler: visitor.crawler,
            status: response.status().as_u16(),
            version: file.version,
            bytes: 0,
        }),
        _ => None,
    };
    if fetch.is_none() && asked.is_none() {
        return response;
    }
    let end = End {
        crawlers: state.crawlers.clone(),
        visitor,
        started,
        at,
        status: response.status().as_u16(),
        fetch,
        asked,
    };
    response.map(|body| {
        Body::new(Watched {
            body,
            bytes: 0,
            end: Some(end),
        })
    })
}

/// What is recorded when the body ends.
struct End {
    crawlers: Arc<Crawlers>,
    visitor: Visitor,
    started: Instant,
    at: OffsetDateTime,
    status: u16,
    fetch: Option<Fetch>,
    asked: Option<Asked>,
}

impl End {
    fn record(self, bytes: u64) {
        if let (Some(ledger), Some(mut fetch)) = (&self.crawlers.ledger, self.fetch) {
            fetch.bytes = bytes;
            ledger.record(fetch);
        }
        if let (Some(log), Some(asked)) = (&self.crawlers.access_log, self.asked) {
            log.log(&AccessLine {
                time: self.at.format(&Rfc3339).unwrap_or_default(),
                client: self.visitor.address,
                method: asked.method,
                host: asked.host,
                path: asked.path,
                status: self.status,
                bytes,
                duration_ms: self.started.elapsed().as_secs_f64() * 1000.0,
                user_agent: asked.user_agent,
                crawler: self.visitor.family.name(),
                verified: self.visitor.crawler.is_verified(),
            });
        }
    }
}

/// A response body that counts what it sends and records the request
/// when it is dropped.
struct Watched {
    body: Body,
    bytes: u64,
    end: Option<End>,
}

impl http_body::Body for Watched {
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

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(end) = self.end.take() {
            end.record(self.bytes);
        }
    }
}
