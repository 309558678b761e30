//! `sitemaps.html`: the sitemaps as a person reads them, rendered on the
//! server as plain HTML.
//!
//! The XSL view (`sitemap.xsl`) needs the browser's XSLT, which browsers
//! are removing; this view needs neither XSLT nor JavaScript. It lists a
//! site's sections and pages, shows a page's URLs a screen at a time, and
//! answers "which page holds this URL?". Every value goes through the
//! template's escaping (maud), never pasted into markup.
//!
//! Anyone can read the sitemaps, so anyone can read this view of them; the
//! rows left out and why are shown only to a request with an API token, or
//! on the operators' listener (`metrics_listen`), and such a response is
//! never stored by a shared cache.

mod crawlers;
mod plot;

use std::sync::OnceLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use time::macros::format_description;

use super::caching::Validators;
use super::sitemaps::{NOINDEX, X_ROBOTS_TAG};
use super::{HttpError, HttpState};
use crate::ingest::validate::check_loc;
use crate::metrics::routes;
use crate::site::Site;
use crate::sitemap::{Encoding, PageName};
use crate::store::{BrowsedUrl, Located, NewsFile, SectionPage, SkipGroup};
use crawlers::Crawled;

/// The view's file name under a site's base URL; no sitemap is named so.
pub(super) const FILE: &str = "sitemaps.html";
/// URLs shown per screen of a page.
const SCREEN_URLS: i64 = 1_000;

const HTML: HeaderValue = HeaderValue::from_static("text/html; charset=utf-8");
/// What a response showing refused rows carries: for the asker only.
const PRIVATE: HeaderValue = HeaderValue::from_static("private, no-store");

/// The query a view is asked with.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ViewQuery {
    /// A page to show, by its file name without extension
    /// (`sitemap-blog-2`, `sitemap_news`).
    page: Option<String>,
    /// Which screen of the page, from 1.
    screen: Option<String>,
    /// A URL to look for.
    loc: Option<String>,
    /// On the operators' listener: which site (default: the primary one).
    site: Option<String>,
    /// For operators: the URLs whose audit found this (`not-found`, …).
    finding: Option<String>,
}

impl ViewQuery {
    /// The site the operators' listener was asked about.
    pub(super) fn site(&self) -> Option<&str> {
        self.site.as_deref()
    }
}

/// Who is asking: the public, or an operator (API token, or the operators'
/// listener), who also sees what is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Audience {
    Public,
    Operator,
}

/// How the view links to itself: relative to the site's base URL on the
/// public port; from the root, naming the site, on the operators' listener.
#[derive(Debug, Clone, Copy)]
pub(super) enum Links<'a> {
    Public,
    Operators { site: &'a str },
}

impl Links<'_> {
    fn view(&self, params: &[(&str, &str)]) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Links::Operators { site } = self {
            query.append_pair("site", site);
        }
        for (name, value) in params {
            query.append_pair(name, value);
        }
        let query = query.finish();
        let path = match self {
            Links::Public => FILE.to_owned(),
            Links::Operators { .. } => format!("/{FILE}"),
        };
        if query.is_empty() {
            path
        } else {
            format!("{path}?{query}")
        }
    }
}

/// Answers one request for the view.
pub(super) async fn view(
    state: &HttpState,
    site: &Site,
    query: ViewQuery,
    audience: Audience,
    links: Links<'_>,
    request: &HeaderMap,
) -> Result<Response, HttpError> {
    let screen = match query.screen.as_deref() {
        None => 1,
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| {
                HttpError::BadRequest(format!("screen={text:?}: a screen number, from 1"))
            })?,
    };
    if let Some(finding) = query.finding.as_deref() {
        if audience != Audience::Operator {
            return Err(HttpError::BadRequest(
                "finding=: the audit's findings are shown to operators".into(),
            ));
        }
        let document = audit_view(state, site, finding, screen, links).await?;
        return Ok(respond(
            state,
            StatusCode::OK,
            document,
            None,
            audience,
            request,
        ));
    }
    let (status, document, changed) = match query.page.as_deref() {
        Some(page) => {
            let name = PageName::parse(&format!("{page}.xml"))
                .map(|(name, _)| name)
                .ok_or_else(|| {
                    HttpError::BadRequest(format!(
                        "page={page:?}: not a sitemap's name (e.g. sitemap-1, sitemap-blog-2, sitemap_news)"
                    ))
                })?;
            let (document, changed) = page_view(state, site, &name, screen, links).await?;
            (StatusCode::OK, document, Some(changed))
        }
        None => overview(state, site, query.loc.as_deref(), audience, links).await?,
    };
    Ok(respond(state, status, document, changed, audience, request))
}

fn respond(
    state: &HttpState,
    status: StatusCode,
    document: Markup,
    changed: Option<OffsetDateTime>,
    audience: Audience,
    request: &HeaderMap,
) -> Response {
    let body = document.into_string();
    state.metrics.body_bytes(routes::HTML_VIEW, body.len());
    let headers = [
        (header::CONTENT_TYPE, HTML),
        (X_ROBOTS_TAG, NOINDEX),
        (header::CONTENT_SECURITY_POLICY, content_security_policy()),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ];
    if audience == Audience::Operator || status != StatusCode::OK {
        let mut response = (status, headers, body).into_response();
        if audience == Audience::Operator {
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, PRIVATE);
        }
        return response;
    }
    // The body is built per request (it reads only what it shows), so its
    // own checksum is its version.
    let validators = Validators::new(
        u128::from(crc32fast::hash(body.as_bytes())),
        &["html"],
        changed,
    );
    if validators.client_is_current(request) {
        return validators.not_modified(&state.cache_control, None);
    }
    let mut response = (headers, body).into_response();
    validators.apply(response.headers_mut(), &state.cache_control);
    response
}

/// What the view may load: its own inline style (by its hash), images of
/// its own origin, and nothing else: no script, no frame around it, no
/// form sent elsewhere.
fn content_security_policy() -> HeaderValue {
    static POLICY: OnceLock<HeaderValue> = OnceLock::new();
    POLICY
        .get_or_init(|| {
            let style = BASE64_STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
            let policy = format!(
                "default-src 'none'; style-src 'sha256-{style}'; img-src 'self' data:; \
                 form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
            );
            HeaderValue::from_str(&policy).expect("a policy of ASCII")
        })
        .clone()
}

/// The site's sections and pages, the finder (with its answer, when asked),
/// and for operators what is left out.
async fn overview(
    state: &HttpState,
    site: &Site,
    loc: Option<&str>,
    audience: Audience,
    links: Links<'_>,
) -> Result<(StatusCode, Markup, Option<OffsetDateTime>), HttpError> {
    let store = &state.store;
    let pages = store.site_pages(&site.name).await?;
    let news = store.news_files(&site.name).await?;
    let skipped = match audience {
        Audience::Operator => Some(store.skip_groups(&site.name).await?),
        Audience::Public => None,
    };
    // Who read what is the operators' to see.
    let crawled = match audience {
        Audience::Operator => Some(Crawled::read(state, site).await?),
        Audience::Public => None,
    };
    let crawlers_section = match &crawled {
        Some(crawled) => Some(crawlers::section(state, site, crawled).await?),
        None => None,
    };
    let (status, found) = match loc {
        Some(loc) => {
            let (status, answer) = find(state, site, loc, audience, links).await?;
            (status, Some(answer))
        }
        None => (StatusCode::OK, None),
    };
    let changed = pages
        .iter()
        .map(|p| p.stats.lastmod)
        .chain(news.iter().map(|n| n.lastmod))
        .max();
    let urls: i64 = pages.iter().map(|p| i64::from(p.stats.url_count)).sum();
    let body = html! {
        h1 { "Sitemaps" }
        p.lead {
            (count(urls)) " URLs in " (count(pages.len() as i64)) " sitemaps under "
            a href=(site.base_url) { (site.base_url) }
            ". Crawlers read "
            a href=(format!("{}sitemap_index.xml", site.base_url)) { "sitemap_index.xml" }
            "; robots.txt names it."
        }
        (finder(loc, links))
        @if let Some(found) = found { (found) }
        h2 { "Pages" }
        @if pages.is_empty() {
            p { "No URLs yet: rows written to sitemap_urls show here within seconds." }
        } @else {
            (pages_table(site, &pages, links, crawled.as_ref()))
        }
        @if !news.is_empty() {
            h2 { "News" }
            (news_table(site, &news, links))
        }
        @if let Some(section) = crawlers_section { (section) }
        h2 { "Left out" }
        @match &skipped {
            Some(groups) => (skipped_table(groups, links)),
            None => p.note {
                "Rows left out of the sitemaps, and why, are shown with an API token "
                "(Authorization: Bearer …) or on the operators' listener (metrics_listen)."
            },
        }
    };
    Ok((status, document("Sitemaps", site, &body), changed))
}

/// The form that asks which page holds a URL.
fn finder(loc: Option<&str>, links: Links<'_>) -> Markup {
    html! {
        form.finder method="get" action=(links.view(&[])) {
            @if let Links::Operators { site } = links {
                input type="hidden" name="site" value=(site);
            }
            label for="loc" { "Which sitemap holds this URL?" }
            input #loc type="text" name="loc" size="60" value=[loc]
                placeholder="https://… or /path";
            button type="submit" { "Find" }
        }
    }
}

/// The finder's answer for `loc`: `400` for what is not a URL of the site.
async fn find(
    state: &HttpState,
    site: &Site,
    loc: &str,
    audience: Audience,
    links: Links<'_>,
) -> Result<(StatusCode, Markup), HttpError> {
    let asked = loc.trim();
    let absolute = match asked.strip_prefix('/') {
        Some(path) => format!("{}/{path}", site.origin),
        None => asked.to_owned(),
    };
    let loc = match check_loc(&absolute, None) {
        Ok(loc) => loc,
        Err(rule) => {
            let answer = html! {
                p.answer.refused { code { (asked) } " is not a URL a sitemap can hold: it must be " (rule) "." }
            };
            return Ok((StatusCode::BAD_REQUEST, answer));
        }
    };
    // Rows outside the base URL are stored, and left out: operators are
    // told why, anyone else that the URL is not the site's.
    let outside = check_loc(&loc, Some(site)).is_err();
    let located = state.store.locate(&site.name, &loc).await?;
    let answer = match located {
        Some(Located {
            section,
            page: Some(page),
            position,
            ..
        }) => {
            let name = PageName { section, page };
            let screen = position / SCREEN_URLS + 1;
            html! {
                p.answer.found {
                    code { (loc) } " is URL " (count(position + 1)) " of "
                    a href=(links.view(&[("page", &name.to_string()), ("screen", &screen.to_string())])) {
                        (name.file_name(Encoding::Gzip))
                    }
                    "."
                }
            }
        }
        Some(Located {
            skip_reason: Some(reason),
            ..
        }) if audience == Audience::Operator => html! {
            p.answer.refused { code { (loc) } " is left out of the sitemaps: " (reason) "." }
        },
        Some(Located {
            skip_reason: None, ..
        }) => html! {
            p.answer { code { (loc) } " was written and is not in a page yet: the next fold places it, within seconds." }
        },
        _ => html! {
            p.answer.refused {
                code { (loc) } " is in none of this site's sitemaps"
                @if outside { " (it is not under its base URL " (site.base_url) ")" }
                "."
            }
        },
    };
    Ok((StatusCode::OK, answer))
}

fn pages_table(
    site: &Site,
    pages: &[SectionPage],
    links: Links<'_>,
    crawled: Option<&Crawled>,
) -> Markup {
    html! {
        table {
            thead { tr {
                th { "Section" } th { "Sitemap" } th.n { "URLs" } th.n { "Size" }
                th.n { "Images" } th.n { "Videos" } th.n { "Alternates" }
                th { "Last modified" } th { "Files" }
                @if crawled.is_some() { th { "Read by verified crawlers" } }
            } }
            tbody {
                @for page in pages {
                    @let name = PageName { section: page.section.clone(), page: page.stats.page };
                    tr {
                        td { @if page.section.is_empty() { span.muted { "(default)" } } @else { (page.section) } }
                        td { a href=(links.view(&[("page", &name.to_string())])) { (name) } }
                        td.n { (count(i64::from(page.stats.url_count))) }
                        td.n title="an upper bound: the bytes reserved for its entries" {
                            (size(page.stats.bytes))
                        }
                        td.n { (count(page.stats.images)) }
                        td.n { (count(page.stats.videos)) }
                        td.n { (count(page.stats.alternates)) }
                        td.t { (datetime(page.stats.lastmod)) }
                        td.t { (files(site, &name)) }
                        @if let Some(crawled) = crawled {
                            td.t {
                                (crawlers::page_reads(
                                    crawled.pages.get(&(page.section.clone(), page.stats.page)),
                                ))
                            }
                        }
                    }
                }
            }
        }
    }
}

fn news_table(site: &Site, news: &[NewsFile], links: Links<'_>) -> Markup {
    html! {
        table {
            thead { tr { th { "Sitemap" } th.n { "Articles" } th { "Last modified" } th { "Files" } } }
            tbody {
                @for file in news {
                    @let name = PageName::news(file.file);
                    tr {
                        td { a href=(links.view(&[("page", &name.to_string())])) { (name) } }
                        td.n { (count(i64::from(file.url_count))) }
                        td.t { (datetime(file.lastmod)) }
                        td.t { (files(site, &name)) }
                    }
                }
            }
        }
    }
}

/// One screen of the URLs whose last audit found `finding`, with what
/// each answered.
async fn audit_view(
    state: &HttpState,
    site: &Site,
    finding: &str,
    screen: i64,
    links: Links<'_>,
) -> Result<Markup, HttpError> {
    let first = (screen - 1) * SCREEN_URLS;
    let (total, checks) = state
        .store
        .audited_urls(&site.name, finding, first, SCREEN_URLS)
        .await?;
    let screens = ((total + SCREEN_URLS - 1) / SCREEN_URLS).max(1);
    if screen > screens {
        return Err(HttpError::NotFound);
    }
    let body = html! {
        h1 { "Audit: " (finding) }
        p.lead {
            (count(total)) " URLs of " a href=(links.view(&[])) { (site.base_url) }
            " whose last check found " code { (finding) } "."
        }
        table {
            thead { tr { th { "URL" } th.n { "Status" } th { "Answer" } th.t { "Checked" } } }
            tbody {
                @for check in &checks {
                    tr {
                        td { code { (check.loc) } }
                        td.n { @if let Some(status) = check.status { (status) } }
                        td { (check.said) }
                        td.t { (datetime(check.checked_at)) }
                    }
                }
            }
        }
        @if screens > 1 {
            p {
                "Screen " (screen) " of " (screens) ". "
                @if screen > 1 {
                    a href=(links.view(&[("finding", finding), ("screen", &(screen - 1).to_string())])) { "previous" } " "
                }
                @if screen < screens {
                    a href=(links.view(&[("finding", finding), ("screen", &(screen + 1).to_string())])) { "next" }
                }
            }
        }
    };
    Ok(document(&format!("Audit: {finding}"), site, &body))
}

fn skipped_table(groups: &[SkipGroup], links: Links<'_>) -> Markup {
    html! {
        @if groups.is_empty() {
            p { "No rows are left out." }
        } @else {
            table {
                thead { tr { th { "Reason" } th.n { "Rows" } th { "Examples" } } }
                tbody {
                    @for group in groups {
                        tr {
                            td {
                                (group.reason)
                                // Not left out: served with a corrected lastmod.
                                @if group.reason == "lastmod-in-future" {
                                    " (served, with the moment it was placed as lastmod)"
                                }
                                @if group.reason == "robots-disallowed-listed" {
                                    " (served: the site's robots_check is report)"
                                }
                                @if let Some(finding) = group.reason.strip_prefix("audit: ") {
                                    " (what the live site answered; "
                                    a href=(links.view(&[("finding", finding)])) { "all of them" }
                                    ")"
                                }
                            }
                            td.n { (count(group.rows)) }
                            td {
                                @for (i, example) in group.examples.iter().enumerate() {
                                    code { (example) }
                                    @if let Some(Some(rule)) = group.example_rules.get(i) {
                                        " " span.rule { (rule) }
                                    }
                                    br;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Links to a page's two documents.
fn files(site: &Site, name: &PageName) -> Markup {
    html! {
        a href=(format!("{}{}", site.base_url, name.file_name(Encoding::Plain))) { ".xml" }
        " · "
        a href=(format!("{}{}", site.base_url, name.file_name(Encoding::Gzip))) { ".xml.gz" }
    }
}

/// One screen of a page's URLs; `404` for a page or screen that does not
/// exist.
async fn page_view(
    state: &HttpState,
    site: &Site,
    name: &PageName,
    screen: i64,
    links: Links<'_>,
) -> Result<(Markup, OffsetDateTime), HttpError> {
    let summary = state
        .pages
        .summary(site, &name.section, name.page)
        .await?
        .ok_or(HttpError::NotFound)?;
    let total = i64::from(summary.url_count);
    let screens = ((total + SCREEN_URLS - 1) / SCREEN_URLS).max(1);
    if screen > screens {
        return Err(HttpError::NotFound);
    }
    let first = (screen - 1) * SCREEN_URLS;
    let table = if name.is_news() {
        let rows = state.store.news_rows(&site.name, name.page).await?;
        news_urls(&rows)
    } else {
        let urls = state
            .store
            .browse_page(&site.name, &name.section, name.page, first, SCREEN_URLS)
            .await?;
        page_urls(&urls, first)
    };
    let shown_to = (first + SCREEN_URLS).min(total);
    let screen_link =
        |n: i64| links.view(&[("page", &name.to_string()), ("screen", &n.to_string())]);
    let navigation = html! {
        nav {
            a href=(links.view(&[])) { "All sitemaps" }
            @if screens > 1 {
                " · screen " (screen) " of " (screens) ": "
                @if screen > 1 { a rel="prev" href=(screen_link(screen - 1)) { "previous" } } @else { "previous" }
                " · "
                @if screen < screens { a rel="next" href=(screen_link(screen + 1)) { "next" } } @else { "next" }
            }
        }
    };
    let body = html! {
        h1 { (name.file_name(Encoding::Gzip)) }
        p.lead {
            @if total == 0 { "No URLs: an empty news sitemap, valid for crawlers." }
            @else { "URLs " (count(first + 1)) "–" (count(shown_to)) " of " (count(total)) }
            ". Last modified " (datetime(summary.lastmod)) ". "
            (files(site, name))
        }
        (navigation)
        (table)
        (navigation)
    };
    let title = name.file_name(Encoding::Gzip);
    Ok((document(&title, site, &body), summary.lastmod))
}

fn page_urls(urls: &[BrowsedUrl], first: i64) -> Markup {
    html! {
        table {
            thead { tr {
                th.n { "#" } th { "URL" } th { "Last modified" } th { "Change frequency" }
                th.n { "Priority" } th.n { "Images" } th.n { "Videos" } th.n { "Alternates" } th { "News" }
            } }
            tbody {
                @for (i, url) in urls.iter().enumerate() {
                    tr {
                        td.n { (count(first + i as i64 + 1)) }
                        td.loc { a href=(url.loc) { (url.loc) } }
                        td.t { @if let Some(lastmod) = url.lastmod { (datetime(lastmod)) } }
                        td { @if let Some(changefreq) = &url.changefreq { (changefreq) } }
                        td.n { @if let Some(priority) = url.priority { (format!("{priority:.1}")) } }
                        td.n { (url.images) }
                        td.n { (url.videos) }
                        td.n { (url.alternates) }
                        td { @if url.news { "yes" } }
                    }
                }
            }
        }
    }
}

fn news_urls(rows: &[crate::store::NewsRow]) -> Markup {
    let field = |news: &serde_json::Value, name: &str| {
        news.get(name)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    html! {
        table {
            thead { tr { th.n { "#" } th { "URL" } th { "Title" } th { "Published" } th { "Language" } th { "Publication" } } }
            tbody {
                @for (i, row) in rows.iter().enumerate() {
                    @let news: serde_json::Value = serde_json::from_str(&row.news).unwrap_or_default();
                    tr {
                        td.n { (i + 1) }
                        td.loc { a href=(row.loc) { (row.loc) } }
                        td { (field(&news, "title")) }
                        td.t { (field(&news, "publication_date")) }
                        td { (field(&news, "language")) }
                        td { (field(&news, "publication_name")) }
                    }
                }
            }
        }
    }
}

/// The whole document around `body`.
fn document(title: &str, site: &Site, body: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="robots" content="noindex";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · " (site.base_url) }
                style { (STYLE) }
            }
            body { main { (body) } }
        }
    }
}

const STYLE: &str = "
body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 0; background: #fafafa; }
main { max-width: 1200px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
a { color: #0b57d0; }
.lead { color: #555; }
.muted, .note { color: #777; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #e4e4e4; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; white-space: nowrap; }
.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.t { white-space: nowrap; }
.loc { word-break: break-all; }
nav { margin: 12px 0; }
.finder { margin: 16px 0; display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.finder input { flex: 1; min-width: 280px; padding: 5px; }
.answer { padding: 8px 12px; border-left: 4px solid #999; background: #fff; }
.answer.found { border-color: #1e8e3e; }
.answer.refused { border-color: #d93025; }
code { font-size: 13px; }
.plot { display: block; margin: 8px 0 12px; max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
.read { white-space: nowrap; }
.current { color: #1e8e3e; }
.stale { color: #d93025; }
";

/// A count with thousands separators: 12,345.
fn count(n: i64) -> String {
    indicatif::HumanCount(u64::try_from(n).unwrap_or_default()).to_string()
}

/// Bytes as KiB or MiB, one decimal.
fn size(bytes: i64) -> String {
    const KIB: f64 = 1024.0;
    let bytes = bytes as f64;
    if bytes >= KIB * KIB {
        format!("{:.1} MiB", bytes / KIB / KIB)
    } else if bytes >= KIB {
        format!("{:.1} KiB", bytes / KIB)
    } else {
        format!("{bytes} B")
    }
}

/// A change time on one short line, in UTC.
fn datetime(at: OffsetDateTime) -> String {
    at.to_offset(time::UtcOffset::UTC)
        .format(format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second] UTC"
        ))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_sizes_read_at_a_glance() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(50_000), "50,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(2_048), "2.0 KiB");
        assert_eq!(size(52_428_800), "50.0 MiB");
    }

    #[test]
    fn links_stay_relative_on_the_public_port_and_name_the_site_elsewhere() {
        assert_eq!(Links::Public.view(&[]), "sitemaps.html");
        assert_eq!(
            Links::Public.view(&[("page", "sitemap-blog-2"), ("screen", "3")]),
            "sitemaps.html?page=sitemap-blog-2&screen=3"
        );
        assert_eq!(
            Links::Operators { site: "shop & co" }.view(&[("loc", "/a?b=c")]),
            "/sitemaps.html?site=shop+%26+co&loc=%2Fa%3Fb%3Dc"
        );
    }
}
