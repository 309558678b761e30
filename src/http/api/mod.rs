//! The write API, `/api/v1`: upsert and delete batches of records, look one
//! up, count what each site serves, and manage the sites and their tokens.
//!
//! Every operation needs a bearer token: an operator's (`api_token_hashes`)
//! may do everything; a site's (`sitemapd token --site`, or `POST
//! /api/v1/sites/{name}/tokens`) only reads and writes that site's records
//! and reads its stats, and anything else gets `403` naming the site.
//!
//! Records go through the same validator as `sitemapd import` and the same
//! one-transaction upsert, so a batch is applied whole or not at all, and
//! every refusal is an RFC 9457 problem document naming what is wrong and
//! where.

mod body;
mod model;
mod sites;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Extension, Json, middleware};
use serde::Deserialize;
use time::OffsetDateTime;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{IntoParams, IntoResponses, OpenApi};

pub(crate) use model::ApiDoc;
use model::{CrawledFile, CrawlerLedger, DeleteSummary, RecordView, Stats, WriteSummary};

use super::HttpState;
use super::error::{HttpError, Problem, RecordError};
use crate::ingest::batch::{self, BatchError, RecordKey};
use crate::ingest::formats::Position;
use crate::ingest::import::{Rejected, write_records};
use crate::ingest::validate::{RECORD_FIELDS, RawRecord, Record, Validator};
use crate::site::Site;
use crate::sitemap::{Encoding, PageName};
use crate::store::Turn;

/// What a delete batch's elements must be.
const KEY_SHAPE: &str = "a loc string, or an object of loc (required) and site";

/// The write API's limits and the tokens it admits.
#[derive(Debug, Clone)]
pub(crate) struct ApiSettings {
    pub(crate) tokens: crate::tokens::Tokens,
    pub(crate) max_body_bytes: usize,
    pub(crate) max_records: usize,
}

/// `/api/v1/…`.
pub(crate) fn router(state: &HttpState) -> Router<HttpState> {
    Router::new()
        .route(
            "/api/v1/urls",
            get(get_url).put(put_urls).delete(delete_urls),
        )
        .route("/api/v1/stats", get(stats))
        .route("/api/v1/crawlers", get(crawlers))
        .merge(sites::routes())
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/{*rest}", any(unknown_operation))
}

async fn unknown_operation() -> HttpError {
    Problem::new(
        StatusCode::NOT_FOUND,
        "unknown-operation",
        "no such operation: see /api/v1/openapi.json",
    )
    .into()
}

/// The token of an `Authorization: Bearer <token>` header, if the request
/// has one.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

/// Who a request acts for, by its token.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// A token of `api_token_hashes`: anything.
    Operator,
    /// A site's token: that site's records, stats and view details.
    Site(Arc<str>),
}

impl Caller {
    /// Who `headers`' bearer token acts for; `None` without a token the
    /// service knows.
    pub(crate) async fn of(
        state: &HttpState,
        headers: &HeaderMap,
    ) -> Result<Option<Caller>, HttpError> {
        let Some(token) = bearer_token(headers) else {
            return Ok(None);
        };
        if state.api.tokens.admits(token) {
            return Ok(Some(Caller::Operator));
        }
        let digest = crate::tokens::hash_of(token);
        Ok(state.sites.token_site(&digest).await?.map(Caller::Site))
    }

    /// `Ok` when the caller may touch the site `site`'s records.
    pub(crate) fn may_touch(&self, site: &str) -> Result<(), HttpError> {
        match self {
            Caller::Site(own) if **own != *site => Err(Problem::new(
                StatusCode::FORBIDDEN,
                "other-site",
                format!("this token is site {own:?}'s: it may not touch site {site:?}"),
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// `Ok` for an operator: what managing sites needs.
    pub(crate) fn must_operate(&self, what: &str) -> Result<(), HttpError> {
        match self {
            Caller::Operator => Ok(()),
            Caller::Site(own) => Err(Problem::new(
                StatusCode::FORBIDDEN,
                "operators-only",
                format!("this token is site {own:?}'s: {what} needs an operator's token (api_token_hashes)"),
            )
            .into()),
        }
    }
}

async fn require_token(
    State(state): State<HttpState>,
    mut request: Request,
    next: Next,
) -> Result<Response, HttpError> {
    match Caller::of(&state, request.headers()).await? {
        Some(caller) => {
            request.extensions_mut().insert(caller);
            Ok(next.run(request).await)
        }
        None => Err(HttpError::Unauthorized),
    }
}

async fn openapi() -> Response {
    Json(ApiDoc::openapi()).into_response()
}

const PROBLEM_JSON: &str = "application/problem+json";

const NO_TOKEN: (u16, &str) = (401, "No or wrong token");

/// The refusal every operation may answer: its token.
struct Unauthorized;

impl IntoResponses for Unauthorized {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
        problems(&[NO_TOKEN])
    }
}

/// The refusals of every batch operation besides its own `422`: its token,
/// its size, and what its body is.
struct BatchRefusals;

impl IntoResponses for BatchRefusals {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
        problems(&[
            NO_TOKEN,
            (413, "Body or batch too large"),
            (415, "Not JSON or NDJSON, or an unknown Content-Encoding"),
        ])
    }
}

/// Responses of a problem document each, by status.
fn problems(refusals: &[(u16, &str)]) -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
    refusals
        .iter()
        .map(|&(status, description)| {
            let content = ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build();
            let response = ResponseBuilder::new()
                .description(description)
                .content(PROBLEM_JSON, content)
                .build();
            (status.to_string(), RefOr::T(response))
        })
        .collect()
}

/// Upsert a batch of records.
///
/// Keyed by (site, loc). A record identical to its row changes nothing and
/// moves no lastmod. All records are applied, or none.
#[utoipa::path(
    put,
    path = "/api/v1/urls",
    request_body(
        description = "A JSON array of records, or NDJSON (one record a line); gzip with Content-Encoding: gzip.",
        content((Vec<RawRecord> = "application/json"), (RawRecord = "application/x-ndjson"))
    ),
    responses(
        (status = 200, description = "Applied", body = WriteSummary),
        BatchRefusals,
        (status = 422, description = "Invalid records, each error listed; nothing written", body = Problem, content_type = PROBLEM_JSON),
    )
)]
async fn put_urls(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<WriteSummary>, HttpError> {
    let shape = format!(
        "an object of loc (required), {}",
        RECORD_FIELDS[1..].join(", ")
    );
    let records = read_records::<RawRecord>(&state, &caller, &headers, body, &shape).await?;
    let counts = write_records(&state.store, &records).await?;
    show_at_once(&state, &records).await;
    Ok(Json(WriteSummary::new(records.len(), counts)))
}

/// Folds a committed write before answering, has reads go to the primary
/// until the standby has replayed it, and drops this process's summaries
/// of the sites of `records` before any notification: the next request
/// sees the write. A fold that fails leaves the write to the next round (it
/// is committed, so the request still succeeds).
async fn show_at_once(state: &HttpState, records: &[Record]) {
    if let Err(error) = state.store.fold(Turn::Wait).await {
        tracing::warn!(%error, "could not fold a write at once; the next round will");
    }
    if let Err(error) = state.store.note_write().await {
        tracing::warn!(%error, "could not note where the write is in the WAL");
    }
    let mut sites: Vec<&str> = records.iter().map(|r| r.site.as_str()).collect();
    sites.sort_unstable();
    sites.dedup();
    for site in sites {
        state.pages.summaries.invalidate_site(site).await;
    }
}

/// Delete a batch of records by loc.
///
/// All are deleted, or none; locs with no row are counted as absent.
#[utoipa::path(
    delete,
    path = "/api/v1/urls",
    request_body(
        description = "A JSON array of locs (or {loc, site} objects), or NDJSON of them.",
        content((Vec<RecordKey> = "application/json"), (RecordKey = "application/x-ndjson"))
    ),
    responses(
        (status = 200, description = "Deleted", body = DeleteSummary),
        BatchRefusals,
        (status = 422, description = "Invalid locs; nothing deleted", body = Problem, content_type = PROBLEM_JSON),
    )
)]
async fn delete_urls(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<DeleteSummary>, HttpError> {
    let records = read_records::<RecordKey>(&state, &caller, &headers, body, KEY_SHAPE).await?;
    let (sites, locs): (Vec<String>, Vec<String>) = records
        .iter()
        .map(|r| (r.site.clone(), r.loc.clone()))
        .unzip();
    let deleted = state.store.delete_records(&sites, &locs).await?;
    show_at_once(&state, &records).await;
    let received = records.len() as u64;
    Ok(Json(DeleteSummary {
        received,
        deleted,
        absent: received.saturating_sub(deleted),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Lookup {
    /// The record's loc (normalised as on writes, so either spelling finds it).
    loc: String,
    /// Its site (default: the primary site).
    site: Option<String>,
}

/// One record, with the page that serves it.
#[utoipa::path(
    get,
    path = "/api/v1/urls",
    params(Lookup),
    responses(
        (status = 200, description = "The record", body = RecordView),
        Unauthorized,
        (status = 404, description = "No such record", body = Problem, content_type = PROBLEM_JSON),
        (status = 422, description = "Not a valid loc for the site", body = Problem, content_type = PROBLEM_JSON),
    )
)]
async fn get_url(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    lookup: Result<Query<Lookup>, QueryRejection>,
) -> Result<Json<RecordView>, HttpError> {
    let Query(lookup) = lookup.map_err(|e| bad_query(&e, "?loc=…[&site=…]"))?;
    let raw = RawRecord {
        loc: Some(lookup.loc),
        site: lookup.site,
        ..RawRecord::default()
    };
    let records = validate(&state, &caller, vec![(Position::Index(0), Ok(raw))]).await?;
    let key = &records[0];
    let record = state
        .store
        .record(&key.site, &key.loc)
        .await?
        .ok_or_else(|| {
            Problem::new(
                StatusCode::NOT_FOUND,
                "no-such-record",
                format!("site {:?} has no record of {}", key.site, key.loc),
            )
        })?;
    let base = base_url(&state, &record.site).await?;
    let sitemap = record
        .page
        .map(|page| page_url(&base, &record.section, page));
    Ok(Json(RecordView::new(record, sitemap)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct StatsQuery {
    /// Only this site's counts (a site's token gets only its own).
    site: Option<String>,
}

/// The site a read asks about: `?site=`, or without it a site's token's
/// own (an operator's reads every site); `403` for another than the token's.
fn asked_site(
    caller: &Caller,
    query: Result<Query<StatsQuery>, QueryRejection>,
) -> Result<Option<String>, HttpError> {
    let Query(query) = query.map_err(|e| bad_query(&e, "[?site=…]"))?;
    let site = match (caller, query.site) {
        (Caller::Site(own), None) => Some(own.to_string()),
        (_, site) => site,
    };
    if let Some(site) = &site {
        caller.may_touch(site)?;
    }
    Ok(site)
}

/// Counts per site, section and page, and rows left out of the sitemaps.
#[utoipa::path(
    get,
    path = "/api/v1/stats",
    params(StatsQuery),
    responses(
        (status = 200, description = "The counts", body = Stats),
        Unauthorized,
        (status = 403, description = "Another site than the token's", body = Problem, content_type = PROBLEM_JSON),
    )
)]
async fn stats(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<StatsQuery>, QueryRejection>,
) -> Result<Json<Stats>, HttpError> {
    let site = asked_site(&caller, query)?;
    let (sites, clusters) = state.store.stats(site.as_deref()).await?;
    let bases = base_urls(&state, sites.iter().map(|site| site.site.as_str())).await?;
    Ok(Json(Stats::new(sites, clusters, |site, section, page| {
        page_url(bases.get(site).map_or("", String::as_str), section, page)
    })))
}

/// Which crawler took which sitemap file: first and last fetch, last
/// status, the version served and whether it is still the current one,
/// fetches and bytes.
#[utoipa::path(
    get,
    path = "/api/v1/crawlers",
    params(StatsQuery),
    responses(
        (status = 200, description = "The ledger, by site, file and crawler", body = CrawlerLedger),
        Unauthorized,
        (status = 403, description = "Another site than the token's", body = Problem, content_type = PROBLEM_JSON),
    )
)]
async fn crawlers(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<StatsQuery>, QueryRejection>,
) -> Result<Json<CrawlerLedger>, HttpError> {
    let site = asked_site(&caller, query)?;
    let holdings = super::ledger::holdings(&state, site.as_deref()).await?;
    let bases = base_urls(&state, holdings.iter().map(|h| h.row.site.as_str())).await?;
    let files = holdings
        .iter()
        .map(|holding| CrawledFile::new(holding, &bases[&holding.row.site]))
        .collect();
    Ok(Json(CrawlerLedger { files }))
}

/// A query that does not parse: what is wrong, and what was `expected`.
fn bad_query(error: &QueryRejection, expected: &str) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "bad-query",
        format!("{error} (expected {expected})"),
    )
}

/// The base URL of each site named in `sites`, by name (see [`base_url`]).
async fn base_urls<'a>(
    state: &HttpState,
    sites: impl Iterator<Item = &'a str>,
) -> Result<BTreeMap<String, String>, HttpError> {
    let mut bases = BTreeMap::new();
    for site in sites {
        if !bases.contains_key(site) {
            bases.insert(site.to_owned(), base_url(state, site).await?);
        }
    }
    Ok(bases)
}

/// The base URL of the site `name` (empty for a site that no longer
/// exists, whose pages are then named by file name alone).
async fn base_url(state: &HttpState, name: &str) -> Result<String, HttpError> {
    Ok(state
        .sites
        .named(name)
        .await?
        .map_or_else(String::new, |site| site.base_url.clone()))
}

/// The absolute URL of a page of the site at `base`.
fn page_url(base: &str, section: &str, page: i32) -> String {
    let name = PageName {
        section: section.to_owned(),
        page,
    };
    format!("{base}{}", name.file_name(Encoding::Gzip))
}

/// The body's records, every one valid, or the problem to answer with.
async fn read_records<T>(
    state: &HttpState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Body,
    shape: &str,
) -> Result<Vec<Record>, HttpError>
where
    T: serde::de::DeserializeOwned + Into<RawRecord>,
{
    let (bytes, format) = body::read(headers, body, state.api.max_body_bytes).await?;
    let elements =
        batch::elements::<T>(&bytes, format, state.api.max_records, shape).map_err(|error| {
            match error {
                BatchError::Malformed(_) => {
                    Problem::new(StatusCode::BAD_REQUEST, "malformed-body", error.to_string())
                }
                BatchError::TooMany { .. } => Problem::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too-many-records",
                    error.to_string(),
                ),
            }
        })?;
    let elements = elements
        .into_iter()
        .map(|(position, parsed)| (position, parsed.map(Into::into)))
        .collect();
    validate(state, caller, elements).await
}

/// The records, every one valid and of a site the caller may touch, or the
/// problem to answer with. A record names its site, or is the primary
/// site's (a site token's own, for a site token).
async fn validate(
    state: &HttpState,
    caller: &Caller,
    elements: Vec<(
        Position,
        Result<RawRecord, crate::ingest::validate::FieldError>,
    )>,
) -> Result<Vec<Record>, HttpError> {
    let default_site = match caller {
        Caller::Site(own) => own.to_string(),
        Caller::Operator => state.primary.clone(),
    };
    let mut named: Vec<&str> = elements
        .iter()
        .filter_map(|(_, parsed)| parsed.as_ref().ok())
        .map(|raw| raw.site.as_deref().unwrap_or(&default_site))
        .collect();
    named.sort_unstable();
    named.dedup();
    let mut sites: Vec<Site> = Vec::with_capacity(named.len());
    for name in named {
        caller.may_touch(name)?;
        if let Some(site) = state.sites.named(name).await? {
            sites.push(Site::clone(&site));
        }
    }
    // An alternate must be under a site: those of the hosts the batch's
    // alternates name.
    let mut hosts: Vec<String> = elements
        .iter()
        .filter_map(|(_, parsed)| parsed.as_ref().ok())
        .flat_map(alternate_hosts)
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    for host in hosts {
        for site in state.sites.on_host(Some(&host)).await?.all() {
            if !sites.iter().any(|known| known.name == site.name) {
                sites.push(Site::clone(site));
            }
        }
    }
    let validator = Validator::new(&sites, &default_site, "", OffsetDateTime::now_utc())
        .without_listing_sites();
    batch::validate_all(&validator, elements).map_err(|rejected| invalid(&rejected).into())
}

/// The hosts of a record's alternates' hrefs, lower-cased.
fn alternate_hosts(raw: &RawRecord) -> Vec<String> {
    let Some(serde_json::Value::Array(alternates)) = &raw.alternates else {
        return Vec::new();
    };
    alternates
        .iter()
        .filter_map(|alternate| alternate.get("href")?.as_str())
        .filter_map(|href| Some(url::Url::parse(href).ok()?.host_str()?.to_ascii_lowercase()))
        .collect()
}

fn invalid(rejected: &[Rejected]) -> Problem {
    let mut problem = Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid-records",
        format!("{} record(s) invalid; nothing was written", rejected.len()),
    );
    for Rejected { position, errors } in rejected {
        let (index, line) = match position {
            Position::Index(i) => (Some(*i), None),
            Position::Line(n) => (None, Some(*n)),
            Position::Entry { .. } => (None, None),
        };
        problem.errors.extend(errors.iter().map(|e| RecordError {
            index,
            line,
            field: e.field.to_owned(),
            value: e.value.clone(),
            rule: e.rule.to_string(),
            detail: format!("{position}: {e}"),
        }));
    }
    problem
}
