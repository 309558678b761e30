//! `GET`/`HEAD` of each site's sitemap index and pages, and of each host's
//! robots.txt, with the validators crawlers revalidate by.

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use time::OffsetDateTime;

use super::api::Caller;
use super::bodies::{HeldChunks, INFLATE_HOLD_BYTES, Inflated};
use super::browse::{self, Audience, Links, ViewQuery};
use super::caching::Validators;
use super::fetches;
use super::host::request_host;
use super::negotiate::negotiate;
use super::{HttpError, HttpState};
use crate::crawlers::Fetch;
use crate::metrics::routes;
use crate::pages::cache::{Chunks, PageKey, Source, total_len};
use crate::pages::codec::{Codec, compress};
use crate::pages::{IndexListing, digest, sitemap_lines};
use crate::site::{HostSites, Site};
use crate::sitemap::name::IndexFile;
use crate::sitemap::{Encoding, IndexWriter, PageName};

const XML: HeaderValue = HeaderValue::from_static("application/xml; charset=utf-8");
const GZIP: HeaderValue = HeaderValue::from_static("application/gzip");
const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
pub(super) const X_ROBOTS_TAG: HeaderName = HeaderName::from_static("x-robots-tag");
/// Keeps sitemap documents themselves out of search results.
pub(super) const NOINDEX: HeaderValue = HeaderValue::from_static("noindex");
/// `.xml` documents are compressed as the client accepts, so caches must
/// keep one copy per `Accept-Encoding`.
const VARY_ACCEPT_ENCODING: HeaderValue = HeaderValue::from_static("accept-encoding");

/// The router's fallback (a `HEAD`, or a method no file allows): what
/// [`answer`] says, for the client its connection put in the request.
pub(super) async fn dispatch(
    State(state): State<HttpState>,
    request: Request,
) -> Result<Response, HttpError> {
    let (request, _) = request.into_parts();
    let peer = request
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |info| info.0);
    // The pipeline refused a request whose `Host` is wrong before routing it.
    let host = request_host(request.version, &request.headers, &request.uri)
        .ok()
        .flatten();
    answer(&state, &request, host.as_deref(), peer).await
}

/// Every request that is not a health check: routed to a site by `host`
/// (the request's, see `host::request_host`) and path, then to its index,
/// one of its pages, or the host's robots.txt. The path is used raw, not
/// percent-decoded, so each document has one URL.
pub(super) async fn answer(
    state: &HttpState,
    request: &Parts,
    host: Option<&str>,
    peer: SocketAddr,
) -> Result<Response, HttpError> {
    let (method, headers, uri) = (&request.method, &request.headers, &request.uri);
    if method != Method::GET && method != Method::HEAD {
        return Err(HttpError::MethodNotAllowed);
    }
    let on_host = state.sites.on_host(host).await?;
    // What a `304` does not take is boxed: the future of every request is
    // as large as its largest branch, and is moved whole.
    if uri.path() == routes::ROBOTS {
        return Box::pin(robots(state, &on_host, headers)).await;
    }
    if let Some(key) = on_host.indexnow_key(uri.path()) {
        return Ok(indexnow_key_file(state, key, headers));
    }
    let routed = on_host.route(uri.path()).ok_or(HttpError::NotFound)?;
    if routed.file == "sitemap.xsl" {
        return Ok(stylesheet(state, headers));
    }
    if routed.file == browse::FILE {
        let Query(query) = Query::<ViewQuery>::try_from_uri(uri)
            .map_err(|rejection| HttpError::BadRequest(rejection.body_text()))?;
        // An operator's token, or the site's own, shows what is left out.
        let audience = match Box::pin(Caller::of(state, headers)).await? {
            Some(caller) if caller.may_touch(&routed.site.name).is_ok() => Audience::Operator,
            _ => Audience::Public,
        };
        return Box::pin(browse::view(
            state,
            routed.site,
            query,
            audience,
            Links::Public,
            headers,
        ))
        .await;
    }
    let served = if let Some((file, encoding)) = IndexFile::parse(routed.file) {
        Box::pin(index(state, &on_host, routed.site, file, encoding, headers)).await
    } else if let Some((name, encoding)) = PageName::parse(routed.file) {
        page(state, routed.site, name, encoding, method, headers).await
    } else {
        return Err(HttpError::NotFound);
    };
    let (response, version) = served.unwrap_or_else(|error| (error.into_response(), None));
    // Whatever the answer, the ledger learns which file was asked for.
    Ok(match &state.crawlers.ledger {
        Some(ledger) => {
            let fetch = Fetch {
                at: OffsetDateTime::now_utc(),
                site: routed.site.clone(),
                file: routed.file.into(),
                crawler: state.crawlers.identify(peer, headers).crawler,
                status: response.status().as_u16(),
                version,
                bytes: 0,
            };
            fetches::record(ledger, fetch, method, response)
        }
        None => response,
    })
}

/// The version of a site's sitemap file that is served now (`None`: it is
/// not served), as the ledger compares what crawlers hold with.
pub(super) async fn current_version(
    state: &HttpState,
    site: &Site,
    file: &str,
) -> Result<Option<OffsetDateTime>, HttpError> {
    if IndexFile::parse(file).is_some() {
        let on_host = state.sites.beside(site).await?;
        let members = on_host.index_members(site);
        let listing = state.pages.indexes.listing(&members).await?;
        if listing.listed().next().is_none() {
            return Ok(None);
        }
        return Ok(listing.pages().map(|(_, entry)| entry.lastmod).max());
    }
    let Some((name, _)) = PageName::parse(file) else {
        return Ok(None);
    };
    Ok(state
        .pages
        .summary(site, &name.section, name.page)
        .await?
        .filter(|summary| summary.url_count > 0)
        .map(|summary| summary.lastmod))
}

/// A sitemap file's response, and the version it serves (its lastmod).
type Served = (Response, Option<OffsetDateTime>);

/// `sitemap_index.xml`: one entry per non-empty page, from the summaries
/// alone, each page's lastmod being when a row of it last changed. As
/// `sitemap_index.xml.gz` it is the same document as a gzip file, sent like
/// the pages' (`application/gzip`, no `Content-Encoding`).
///
/// A site with more pages than an index file may list has several: the
/// root lists the first run of pages, then `sitemap_index-2.xml`, … the
/// next (robots.txt lists them all). With `nested_index`, the root lists
/// `sitemap_index-1.xml`, `-2.xml`, … instead, each with the newest change
/// among the pages up to its last. An emptied page shifts later entries
/// between files, so every file is versioned by the site's newest change.
async fn index(
    state: &HttpState,
    on_host: &HostSites,
    site: &Site,
    file: IndexFile,
    encoding: Encoding,
    request: &HeaderMap,
) -> Result<Served, HttpError> {
    let members = on_host.index_members(site);
    let listing = state.pages.indexes.listing(&members).await?;
    // An index must list at least one sitemap (siteindex.xsd), and so must
    // a page list one URL: a site with none has no valid document to serve.
    if listing.listed().next().is_none() {
        return Err(HttpError::NothingListed(format!(
            "site {} lists no URL yet: its sitemap index appears with its first URL (an index \
             must list at least one sitemap)",
            site.name
        )));
    }
    let capacity = listing.capacity;
    let chunks = listing.chunks();
    let nested = site.nested_index && chunks > 1;
    let chunk = match (file, nested) {
        (IndexFile::Root, true) => None,
        (IndexFile::Root, false) => Some(1),
        (IndexFile::Part(1), false) => return Err(HttpError::NotFound),
        (IndexFile::Part(part), _) if part > chunks => return Err(HttpError::NotFound),
        (IndexFile::Part(part), _) => Some(part),
    };
    // Any change to any page (a new, changed or emptied one) moves the
    // newest change time, so it versions the whole index.
    let newest = listing.pages().map(|(_, entry)| entry.lastmod).max();
    let version = newest.map_or(0, |t| t.unix_timestamp_nanos() as u128 / 1000);
    let representation = Representation::of(encoding, request);
    let settings = digest(&[
        &state.pages.fingerprint,
        &members
            .iter()
            .map(|member| member.base_url.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        &capacity.to_string(),
        &nested.to_string(),
    ]);
    let chunk_tag = chunk.map_or("root".to_owned(), |chunk| chunk.to_string());
    let validators = Validators::new(
        version,
        &[&settings, &chunk_tag, representation.tag()],
        newest,
    );
    if validators.client_is_current(request) {
        let response = validators.not_modified(&state.cache_control, representation.vary());
        return Ok((response, newest));
    }
    let mut out = Vec::with_capacity(128 + capacity * 128);
    let mut writer = IndexWriter::start(&mut out);
    match chunk {
        Some(chunk) => {
            for (listed_site, entry) in listing.listed().skip((chunk - 1) * capacity).take(capacity)
            {
                let name = PageName {
                    section: entry.section.clone(),
                    page: entry.page,
                };
                writer.push(
                    &mut out,
                    &listed_site.base_url,
                    &name.file_name(Encoding::Gzip),
                    entry.lastmod,
                );
            }
        }
        None => {
            for (part, lastmod) in (1..).zip(newest_per_chunk(&listing)) {
                writer.push(
                    &mut out,
                    &site.base_url,
                    &IndexFile::Part(part).file_name(encoding),
                    lastmod,
                );
            }
        }
    }
    writer.finish(&mut out);
    let body = Bytes::from(
        compress(
            representation.codec,
            state.pages.renderer.options.gzip_level,
            out,
        )
        .map_err(crate::pages::render::RenderError::from)?,
    );
    let route = match encoding {
        Encoding::Gzip => routes::INDEX_GZ,
        Encoding::Plain => routes::INDEX,
    };
    state.metrics.body_bytes(route, body.len());
    let length = body.len();
    let held = state.bodies.reserve(length as u64, None)?;
    let body = HeldChunks::new(Chunks::from([body]), held);
    let mut response = (
        [(header::CONTENT_LENGTH, HeaderValue::from(length))],
        Body::from_stream(body),
    )
        .into_response();
    representation.apply(response.headers_mut());
    validators.apply(response.headers_mut(), &state.cache_control);
    Ok((response, newest))
}

/// For each run of `capacity` listed pages, the newest change among all
/// pages (emptied ones included) up to its last: what moves whenever that
/// index file's entries change, or shift because an earlier page emptied.
fn newest_per_chunk(listing: &IndexListing<'_>) -> Vec<OffsetDateTime> {
    let capacity = listing.capacity;
    let mut newest = Vec::new();
    let mut so_far: Option<OffsetDateTime> = None;
    let mut listed = 0;
    for (_, entry) in listing.pages() {
        so_far = so_far.max(Some(entry.lastmod));
        if entry.listed {
            listed += 1;
            if listed % capacity == 0 {
                newest.extend(so_far);
            }
        }
    }
    if listed % capacity != 0 {
        newest.extend(so_far);
    }
    newest
}

/// How a sitemap document is sent: a `.xml.gz` file as it is (gzip by
/// definition, never negotiated), or a `.xml` document compressed on the
/// wire as the client accepts.
#[derive(Debug, Clone, Copy)]
struct Representation {
    encoding: Encoding,
    codec: Codec,
}

impl Representation {
    fn of(encoding: Encoding, request: &HeaderMap) -> Representation {
        let codec = match encoding {
            Encoding::Gzip => Codec::Gzip,
            Encoding::Plain => negotiate(request),
        };
        Representation { encoding, codec }
    }

    /// What tells it apart in an ETag: `gz`, or the wire codec.
    fn tag(self) -> &'static str {
        match self.encoding {
            Encoding::Gzip => "gz",
            Encoding::Plain => self.codec.token(),
        }
    }

    /// What tells a page's representation apart in its ETag: a page's tag
    /// has named a `.xml` document's codec `xml-…` from the start.
    fn page_tag(self) -> &'static str {
        match (self.encoding, self.codec) {
            (Encoding::Gzip, _) => "gz",
            (Encoding::Plain, Codec::Identity) => "xml-identity",
            (Encoding::Plain, Codec::Gzip) => "xml-gzip",
            (Encoding::Plain, Codec::Brotli) => "xml-br",
            (Encoding::Plain, Codec::Zstd) => "xml-zstd",
        }
    }

    /// A `.xml` document varies by `Accept-Encoding`; a file does not.
    fn vary(self) -> Option<HeaderValue> {
        match self.encoding {
            Encoding::Gzip => None,
            Encoding::Plain => Some(VARY_ACCEPT_ENCODING),
        }
    }

    /// The headers every response of it carries: its type, `noindex`, and
    /// for a `.xml` document its `Content-Encoding` and `Vary`.
    fn apply(self, headers: &mut HeaderMap) {
        let content_type = match self.encoding {
            Encoding::Gzip => GZIP,
            Encoding::Plain => XML,
        };
        headers.insert(header::CONTENT_TYPE, content_type);
        headers.insert(X_ROBOTS_TAG, NOINDEX);
        if let Some(vary) = self.vary() {
            if self.codec != Codec::Identity {
                headers.insert(
                    header::CONTENT_ENCODING,
                    HeaderValue::from_static(self.codec.token()),
                );
            }
            headers.insert(header::VARY, vary);
        }
    }
}

/// `sitemap-N.xml[.gz]` and `sitemap-{section}-N.xml[.gz]`. A `.xml.gz` body
/// is a gzip *file*: it carries no `Content-Encoding`, which would make
/// clients decompress it behind the crawler's back.
async fn page(
    state: &HttpState,
    site: &Site,
    name: PageName,
    encoding: Encoding,
    method: &Method,
    request: &HeaderMap,
) -> Result<Served, HttpError> {
    let summary = state
        .pages
        .summary(site, &name.section, name.page)
        .await?
        .ok_or(HttpError::NotFound)?;
    // A page all of whose URLs left, or a news sitemap whose window holds
    // no article: the index leaves it out, and a urlset must list one URL.
    if summary.url_count == 0 {
        return Err(HttpError::NothingListed(format!(
            "{} of site {} lists no URL now (a sitemap must list one at least): the index \
             lists it again when it does",
            name.file_name(encoding),
            site.name
        )));
    }
    let representation = Representation::of(encoding, request);
    let codec = representation.codec;
    let validators = page_validators(state, summary.lastmod, representation.page_tag());
    if validators.client_is_current(request) {
        let response = validators.not_modified(&state.cache_control, representation.vary());
        return Ok((response, Some(summary.lastmod)));
    }
    let route = match (encoding, name.is_news()) {
        (Encoding::Gzip, false) => routes::PAGE_GZ,
        (Encoding::Plain, false) => routes::PAGE_XML,
        (Encoding::Gzip, true) => routes::NEWS_GZ,
        (Encoding::Plain, true) => routes::NEWS_XML,
    };
    let mut response = if method == Method::HEAD {
        // Framed like the GET (streamed, length unknown), without reading rows.
        let no_chunks = futures_util::stream::empty::<Result<Bytes, Infallible>>();
        Body::from_stream(no_chunks).into_response()
    } else {
        // An uncompressed page (for the rare client that accepts no
        // encoding, up to 50 MiB) is inflated from the cached gzip as the
        // client reads it: never rendered ahead of the client, and never
        // holding a database connection while the client takes its time.
        let stored = if codec == Codec::Identity {
            Codec::Gzip
        } else {
            codec
        };
        let key = PageKey {
            site: site.name.clone(),
            section: name.section,
            page: name.page,
            codec: stored,
            version: summary.lastmod,
        };
        let (body, source) = Box::pin(state.pages.cached(key, route)).await?;
        state.metrics.page_served(source.label());
        if codec == Codec::Identity {
            let held = state.bodies.reserve(INFLATE_HOLD_BYTES, Some(&body))?;
            let inflated = Inflated::new(body, held).counted(state.metrics.clone(), route);
            Body::from_stream(inflated).into_response()
        } else {
            let length = total_len(&body);
            if source != Source::Built {
                state.metrics.body_bytes(route, length);
            }
            let held = state.bodies.reserve(0, Some(&body))?;
            (
                [(header::CONTENT_LENGTH, HeaderValue::from(length))],
                Body::from_stream(HeldChunks::new(body, held)),
            )
                .into_response()
        }
    };
    representation.apply(response.headers_mut());
    validators.apply(response.headers_mut(), &state.cache_control);
    Ok((response, Some(summary.lastmod)))
}

fn page_validators(state: &HttpState, changed: OffsetDateTime, representation: &str) -> Validators {
    let version = changed.unix_timestamp_nanos() as u128 / 1000;
    Validators::new(
        version,
        &[&state.pages.fingerprint, representation],
        Some(changed),
    )
}

/// The stylesheet every sitemap document names, so that a person opening one
/// in a browser sees a table rather than raw XML.
const STYLESHEET: &str = include_str!("assets/sitemap.xsl");

fn stylesheet(state: &HttpState, request: &HeaderMap) -> Response {
    let validators = Validators::new(
        u128::from(crc32fast::hash(STYLESHEET.as_bytes())),
        &["xsl"],
        None,
    );
    if validators.client_is_current(request) {
        return validators.not_modified(&state.cache_control, None);
    }
    let content_type = HeaderValue::from_static("text/xsl; charset=utf-8");
    let mut response = ([(header::CONTENT_TYPE, content_type)], STYLESHEET).into_response();
    validators.apply(response.headers_mut(), &state.cache_control);
    response
}

/// `/robots.txt` of a host: the operator's text (from the first site on the
/// host that configures one) followed by a `Sitemap:` line for the index of
/// every site on the host.
async fn robots(
    state: &HttpState,
    on_host: &HostSites,
    request: &HeaderMap,
) -> Result<Response, HttpError> {
    if on_host.is_empty() {
        return Err(HttpError::NotFound);
    }
    let mut announced: Vec<&Site> = on_host
        .all()
        .iter()
        .map(AsRef::as_ref)
        .filter(|site| !on_host.is_held(site))
        .collect();
    announced.sort_by(|a, b| a.base_url.cmp(&b.base_url));
    let mut lines = Vec::new();
    for site in announced {
        let members = on_host.index_members(site);
        let files = state.pages.indexes.announced(&members).await?;
        lines.extend(sitemap_lines(site, &files));
    }
    let body = robots_txt(on_host.robots_txt(), &lines);
    state.metrics.body_bytes(routes::ROBOTS, body.len());
    let validators = Validators::new(
        u128::from(crc32fast::hash(body.as_bytes())),
        &["robots"],
        None,
    );
    if validators.client_is_current(request) {
        return Ok(validators.not_modified(&state.cache_control, None));
    }
    let mut response = ([(header::CONTENT_TYPE, TEXT)], body).into_response();
    validators.apply(response.headers_mut(), &state.cache_control);
    Ok(response)
}

/// An IndexNow key file: the key itself, which engines fetch to check that
/// whoever sends a site's URLs controls the site.
fn indexnow_key_file(state: &HttpState, key: &str, request: &HeaderMap) -> Response {
    state.metrics.body_bytes(routes::INDEXNOW_KEY, key.len());
    let validators = Validators::new(u128::from(crc32fast::hash(key.as_bytes())), &["key"], None);
    if validators.client_is_current(request) {
        return validators.not_modified(&state.cache_control, None);
    }
    let mut response = (
        [(header::CONTENT_TYPE, TEXT), (X_ROBOTS_TAG, NOINDEX)],
        key.to_owned(),
    )
        .into_response();
    validators.apply(response.headers_mut(), &state.cache_control);
    response
}

/// The robots.txt text: `operator`'s, then the `Sitemap:` lines.
fn robots_txt(operator: Option<&str>, lines: &[String]) -> String {
    let mut body = String::new();
    if let Some(text) = operator.filter(|t| !t.trim().is_empty()) {
        body.push_str(text);
        if !text.ends_with('\n') {
            body.push('\n');
        }
        body.push('\n');
    }
    for line in lines {
        body.push_str(line);
        body.push('\n');
    }
    body
}
