//! The write API, `/api/v1`: upsert and delete batches of records, look one
//! up, and count what each site serves. Off unless tokens are configured.
//!
//! Records go through the same validator as `sitemapd import` and the same
//! one-transaction upsert, so a batch is applied whole or not at all, and
//! every refusal is an RFC 9457 problem document naming what is wrong and
//! where.

mod body;
mod model;

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, middleware};
use serde::Deserialize;
use time::OffsetDateTime;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{IntoParams, IntoResponses, OpenApi};

pub(crate) use model::ApiDoc;
use model::{DeleteSummary, RecordView, Stats, WriteSummary};

use super::HttpState;
use super::error::{HttpError, Problem, RecordError};
use crate::ingest::batch::{self, BatchError, RecordKey};
use crate::ingest::formats::Position;
use crate::ingest::import::{Rejected, write_records};
use crate::ingest::validate::{RECORD_FIELDS, RawRecord, Record, Validator};
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

/// `/api/v1/…`: the operations when tokens are configured, else a `404`
/// saying how to turn the API on.
pub(crate) fn router(state: &HttpState) -> Router<HttpState> {
    if state.api.tokens.is_empty() {
        return Router::new().route("/api/v1/{*rest}", any(api_off));
    }
    Router::new()
        .route(
            "/api/v1/urls",
            get(get_url).put(put_urls).delete(delete_urls),
        )
        .route("/api/v1/stats", get(stats))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/{*rest}", any(unknown_operation))
}

async fn api_off() -> HttpError {
    Problem::new(
        StatusCode::NOT_FOUND,
        "api-off",
        "the write API is off: configure api_token_hashes (see `sitemapd token`)",
    )
    .into()
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

async fn require_token(
    State(state): State<HttpState>,
    request: Request,
    next: Next,
) -> Result<Response, HttpError> {
    match bearer_token(request.headers()) {
        Some(token) if state.api.tokens.admits(token) => Ok(next.run(request).await),
        _ => Err(HttpError::Unauthorized),
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
    headers: HeaderMap,
    body: Body,
) -> Result<Json<WriteSummary>, HttpError> {
    let shape = format!(
        "an object of loc (required), {}",
        RECORD_FIELDS[1..].join(", ")
    );
    let records = read_records::<RawRecord>(&state, &headers, body, &shape).await?;
    let counts = write_records(&state.store, &records).await?;
    show_at_once(&state).await;
    Ok(Json(WriteSummary::new(records.len(), counts)))
}

/// Folds a committed write before answering, and drops this process's
/// summaries before any notification: the next request sees the write. A
/// fold that fails leaves the write to the next round (it is committed, so
/// the request still succeeds).
async fn show_at_once(state: &HttpState) {
    if let Err(error) = state.store.fold(Turn::Wait).await {
        tracing::warn!(%error, "could not fold a write at once; the next round will");
    }
    state.pages.summaries.invalidate();
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
    headers: HeaderMap,
    body: Body,
) -> Result<Json<DeleteSummary>, HttpError> {
    let records = read_records::<RecordKey>(&state, &headers, body, KEY_SHAPE).await?;
    let (sites, locs): (Vec<String>, Vec<String>) = records
        .iter()
        .map(|r| (r.site.clone(), r.loc.clone()))
        .unzip();
    let deleted = state.store.delete_records(&sites, &locs).await?;
    show_at_once(&state).await;
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
    lookup: Result<Query<Lookup>, QueryRejection>,
) -> Result<Json<RecordView>, HttpError> {
    let Query(lookup) = lookup.map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-query",
            format!("{e} (expected ?loc=…[&site=…])"),
        )
    })?;
    let raw = RawRecord {
        loc: Some(lookup.loc),
        site: lookup.site,
        ..RawRecord::default()
    };
    let records = validate(&state, vec![(Position::Index(0), Ok(raw))])?;
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
    let sitemap = record
        .page
        .map(|page| page_url(&state, &record.site, &record.section, page));
    Ok(Json(RecordView::new(record, sitemap)))
}

/// Counts per site, section and page, and rows left out of the sitemaps.
#[utoipa::path(
    get,
    path = "/api/v1/stats",
    responses(
        (status = 200, description = "The counts", body = Stats),
        Unauthorized,
    )
)]
async fn stats(State(state): State<HttpState>) -> Result<Json<Stats>, HttpError> {
    let (sites, clusters) = state.store.stats().await?;
    Ok(Json(Stats::new(sites, clusters, |site, section, page| {
        page_url(&state, site, section, page)
    })))
}

/// The absolute URL of a page (only its file name for a site that is no
/// longer configured).
fn page_url(state: &HttpState, site: &str, section: &str, page: i32) -> String {
    let name = PageName {
        section: section.to_owned(),
        page,
    };
    let base = state
        .sites
        .all()
        .iter()
        .find(|s| s.name == site)
        .map_or("", |s| s.base_url.as_str());
    format!("{base}{}", name.file_name(Encoding::Gzip))
}

/// The body's records, every one valid, or the problem to answer with.
async fn read_records<T>(
    state: &HttpState,
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
    validate(state, elements)
}

fn validate(
    state: &HttpState,
    elements: Vec<(
        Position,
        Result<RawRecord, crate::ingest::validate::FieldError>,
    )>,
) -> Result<Vec<Record>, HttpError> {
    let validator = Validator::new(
        state.sites.all(),
        &state.sites.primary().name,
        "",
        OffsetDateTime::now_utc(),
    );
    batch::validate_all(&validator, elements).map_err(|rejected| invalid(&rejected).into())
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
