//! `GET`/`HEAD` of the sitemap index and of each page.

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::{AppState, HttpError};
use crate::render::{PageRequest, render_page};
use crate::sitemap::{Encoding, IndexWriter, PageName};

const XML: HeaderValue = HeaderValue::from_static("application/xml; charset=utf-8");
const GZIP: HeaderValue = HeaderValue::from_static("application/gzip");
const X_ROBOTS_TAG: HeaderName = HeaderName::from_static("x-robots-tag");
/// Keeps sitemap documents themselves out of search results.
const NOINDEX: HeaderValue = HeaderValue::from_static("noindex");

/// `/sitemap_index.xml`: one entry per non-empty page, from the summaries
/// alone, each page's lastmod being when a row of it last changed.
pub async fn index(State(state): State<AppState>) -> Result<Response, HttpError> {
    let entries = state.store.index(&state.site.name).await?;
    let mut out = Vec::with_capacity(128 + entries.len() * 128);
    let mut writer = IndexWriter::start(&mut out, &state.site.base_url);
    for entry in entries {
        let name = PageName {
            section: entry.section,
            page: entry.page,
        };
        writer.push(&mut out, &name.file_name(Encoding::Gzip), entry.lastmod);
    }
    writer.finish(&mut out);
    Ok(([(header::CONTENT_TYPE, XML), (X_ROBOTS_TAG, NOINDEX)], out).into_response())
}

/// `/sitemap-N.xml[.gz]` and `/sitemap-{section}-N.xml[.gz]`.
///
/// The name is taken from the raw path, not a percent-decoded one, so each
/// page has exactly one URL. A `.xml.gz` body is a gzip *file*: it carries no
/// `Content-Encoding`, which would make clients decompress it behind the
/// crawler's back.
pub async fn page(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
) -> Result<Response, HttpError> {
    let file = uri.path().trim_start_matches('/');
    let (name, encoding) = PageName::parse(file).ok_or(HttpError::NotFound)?;
    state
        .store
        .page_summary(&state.site.name, &name.section, name.page)
        .await?
        .ok_or(HttpError::NotFound)?;
    let content_type = match encoding {
        Encoding::Gzip => GZIP,
        Encoding::Plain => XML,
    };
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (X_ROBOTS_TAG, NOINDEX),
    ];
    if method == Method::HEAD {
        // Framed like the GET (streamed, length unknown), without reading rows.
        let no_chunks = futures_util::stream::empty::<Result<Bytes, Infallible>>();
        return Ok((headers, Body::from_stream(no_chunks)).into_response());
    }
    let request = PageRequest {
        site: state.site.name.clone(),
        section: name.section,
        page: name.page,
        encoding,
    };
    let chunks = render_page(
        state.store.clone(),
        request,
        state.render,
        state.skips.clone(),
    )
    .await?;
    Ok((headers, Body::from_stream(chunks)).into_response())
}
