//! The floor of sitemapd's HTTP stack, for `scripts/bench_static.sh`: hyper
//! on the same runtime, answering every request with the `304` sitemapd
//! sends for a page, and doing nothing else. What sitemapd's `304`s cost
//! above this is its own.
//!
//!     cargo run --release --example http_floor -- 127.0.0.1:18830

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use hyper::header::{CACHE_CONTROL, ETAG, HeaderValue, LAST_MODIFIED, X_CONTENT_TYPE_OPTIONS};
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// A body with nothing in it, as a `304` has.
struct Empty;

impl http_body::Body for Empty {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        true
    }
}

async fn not_modified(_: Request<hyper::body::Incoming>) -> Result<Response<Empty>, Infallible> {
    let mut response = Response::new(Empty);
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    let headers = response.headers_mut();
    headers.insert(
        ETAG,
        HeaderValue::from_static("\"661365e59ff5c-434e4e8a-gz\""),
    );
    headers.insert(
        LAST_MODIFIED,
        HeaderValue::from_static("Thu, 26 Nov 2026 23:33:19 GMT"),
    );
    headers.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    Ok(response)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18830".to_owned());
    let listener = tokio::net::TcpListener::bind(listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        tokio::spawn(http1::Builder::new().serve_connection(
            TokioIo::new(stream),
            hyper::service::service_fn(not_modified),
        ));
    }
}
