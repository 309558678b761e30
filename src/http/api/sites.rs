//! `/api/v1/sites`: create, change, list and remove sites, and mint and
//! revoke their tokens. Operators only, but for a site token reading its
//! own site. A change shows on this replica at once and on the others
//! within a second (see `site::directory`).

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::IntoParams;

use super::model::{MintedToken, SiteDocument, SiteList, SiteRemoved, TokenList, TokenView};
use super::{Caller, PROBLEM_JSON, Unauthorized, bad_query, body};
use crate::http::HttpState;
use crate::http::error::{HttpError, Problem, RecordError};
use crate::site::admin::{Admin, AdminError};
use crate::site::{IndexFormat, RobotsCheck, Site, SiteSpec};
use crate::store::Written;

/// Sites a page of `GET /api/v1/sites` lists, unless asked for fewer.
const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

pub(super) fn routes() -> Router<HttpState> {
    Router::new()
        .route("/api/v1/sites", get(list_sites))
        .route(
            "/api/v1/sites/{name}",
            get(get_site).put(put_site).delete(delete_site),
        )
        .route(
            "/api/v1/sites/{name}/tokens",
            get(list_tokens).post(mint_token),
        )
        .route("/api/v1/sites/{name}/tokens/{digest}", delete(revoke_token))
}

fn admin(state: &HttpState) -> Admin<'_> {
    Admin {
        store: &state.store,
        defaults: state.site_defaults,
        proxy_strips_prefix: state.sites.proxy_strips_prefix(),
    }
}

impl From<AdminError> for HttpError {
    fn from(error: AdminError) -> Self {
        let detail = error.to_string();
        match error {
            AdminError::Store(error) => HttpError::Store(error),
            AdminError::Invalid { site, errors } => {
                let mut problem = Problem::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid-site",
                    format!(
                        "site {site:?} breaks {} rule(s); nothing was written",
                        errors.len()
                    ),
                );
                problem.errors = errors
                    .into_iter()
                    .map(|e| RecordError {
                        index: None,
                        line: None,
                        field: e.field.to_owned(),
                        detail: e.to_string(),
                        value: e.value,
                        rule: e.expected,
                    })
                    .collect();
                problem.into()
            }
            AdminError::Exists(_) | AdminError::Clash { .. } => {
                Problem::new(StatusCode::CONFLICT, "site-conflict", detail).into()
            }
            AdminError::RowsRemain(_) => {
                Problem::new(StatusCode::CONFLICT, "site-has-rows", detail).into()
            }
            AdminError::NoSuchSite(_) => {
                Problem::new(StatusCode::NOT_FOUND, "no-such-site", detail).into()
            }
            AdminError::Random(_) => {
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "no-randomness", detail).into()
            }
        }
    }
}

/// Drops what this replica holds of a site it just wrote, before the
/// notification reaches it, and has reads go to the primary until the
/// standby has replayed the write: the next request sees it.
async fn show_at_once(state: &HttpState, name: &str, hosts: &[&str], removed: bool) {
    if let Err(error) = state.store.note_write().await {
        tracing::warn!(%error, "could not note where the write is in the WAL");
    }
    state.sites.forget_site(name, hosts).await;
    state.pages.summaries.invalidate_site(name).await;
    if removed {
        state.pages.cache.forget_site(name);
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// The last name of the previous page (its `next`).
    after: Option<String>,
    /// Sites per page: 1 to 1000 (default 100).
    limit: Option<u32>,
}

/// Every site, by name, a page at a time.
#[utoipa::path(
    get,
    path = "/api/v1/sites",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of sites", body = SiteList),
        Unauthorized,
        (status = 403, description = "Not an operator's token", body = Problem, content_type = PROBLEM_JSON),
    )
)]
pub(super) async fn list_sites(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<SiteList>, HttpError> {
    caller.must_operate("listing sites")?;
    let Query(query) = query.map_err(|e| bad_query(&e, "[?after=NAME][&limit=1..1000]"))?;
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-query",
            format!("limit={limit}: expected 1 to {MAX_PAGE}"),
        )
        .into());
    }
    let sites = admin(&state).list(query.after.as_deref(), limit).await?;
    let next = (sites.len() == limit as usize)
        .then(|| sites.last().map(|entry| entry.site.name.clone()))
        .flatten();
    Ok(Json(SiteList {
        sites: sites.into_iter().map(SiteDocument::from).collect(),
        next,
    }))
}

/// One site.
#[utoipa::path(
    get,
    path = "/api/v1/sites/{name}",
    params(("name" = String, Path, description = "The site's name")),
    responses(
        (status = 200, description = "The site", body = SiteDocument),
        Unauthorized,
        (status = 403, description = "Another site's token", body = Problem, content_type = PROBLEM_JSON),
        (status = 404, description = "No such site", body = Problem, content_type = PROBLEM_JSON),
    )
)]
pub(super) async fn get_site(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<SiteDocument>, HttpError> {
    caller.may_touch(&name)?;
    Ok(Json(admin(&state).get(&name).await?.into()))
}

/// Create or change a site.
///
/// The body gives every setting; one left out takes its default. A
/// failed request changes nothing.
#[utoipa::path(
    put,
    path = "/api/v1/sites/{name}",
    params(("name" = String, Path, description = "The site's name: what records' `site` names")),
    request_body(content = SiteSpec, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = SiteDocument),
        (status = 200, description = "Changed, or already so", body = SiteDocument),
        Unauthorized,
        (status = 400, description = "Not a JSON object of the site's settings", body = Problem, content_type = PROBLEM_JSON),
        (status = 403, description = "Not an operator's token", body = Problem, content_type = PROBLEM_JSON),
        (status = 409, description = "Another site claims the host and path", body = Problem, content_type = PROBLEM_JSON),
        (status = 422, description = "Settings that break a rule, each named", body = Problem, content_type = PROBLEM_JSON),
    )
)]
pub(super) async fn put_site(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    caller.must_operate("writing a site")?;
    let (bytes, _) = body::read(&headers, body, state.api.max_body_bytes).await?;
    let spec = spec_of(&bytes)?;
    let (site, outcome, before) = admin(&state).put(&name, &spec).await?;
    let old_host = before.as_ref().map_or("", |site| site.host.as_str());
    show_at_once(&state, &name, &[&site.host, old_host], false).await;
    let status = match outcome {
        Written::Created => StatusCode::CREATED,
        Written::Changed | Written::Unchanged => StatusCode::OK,
    };
    let document: SiteDocument = admin(&state).get(&name).await?.into();
    Ok((status, Json(document)).into_response())
}

/// The settings a body gives, each of its type, or a problem naming the
/// first field that is not.
fn spec_of(bytes: &[u8]) -> Result<SiteSpec, Problem> {
    let malformed =
        |detail: String| Problem::new(StatusCode::BAD_REQUEST, "malformed-body", detail);
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| malformed(format!("the body is not JSON: {e}")))?;
    let Value::Object(mut fields) = value else {
        return Err(malformed(format!(
            "the body must be a JSON object of the site's settings ({SETTINGS})"
        )));
    };
    let mut take = |field: &str| fields.remove(field).filter(|value| !value.is_null());
    let wrong = |field: &str, expected: &str, value: &Value| {
        malformed(format!("{field}: expected {expected}, got {value}"))
    };
    let string = |field: &str, value: Option<Value>| match value {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(wrong(field, "a string", &other)),
    };
    let strings = |field: &str, value: Option<Value>| match value {
        None => Ok(None),
        Some(value) => value
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned))
                    .collect::<Option<Vec<String>>>()
            })
            .map(Some)
            .ok_or_else(|| wrong(field, "an array of strings", &value)),
    };
    let boolean = |field: &str, value: Option<Value>| match value {
        None => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(flag)),
        Some(other) => Err(wrong(field, "true or false", &other)),
    };
    let base_url = string("base_url", take("base_url"))?
        .ok_or_else(|| malformed("base_url: required (the site's public base URL)".into()))?;
    let spec = SiteSpec {
        base_url,
        robots_txt: string("robots_txt", take("robots_txt"))?,
        include_subfolder_sites: boolean(
            "include_subfolder_sites",
            take("include_subfolder_sites"),
        )?,
        indexnow_key: string("indexnow_key", take("indexnow_key"))?,
        index_format: match take("index_format") {
            None => None,
            Some(value) => Some(
                value
                    .as_str()
                    .and_then(IndexFormat::parse)
                    .ok_or_else(|| wrong("index_format", "\"xml\" or \"xml.gz\"", &value))?,
            ),
        },
        nested_index: boolean("nested_index", take("nested_index"))?,
        robots_check: match take("robots_check") {
            None => None,
            Some(value) => Some(value.as_str().and_then(RobotsCheck::parse).ok_or_else(|| {
                wrong(
                    "robots_check",
                    "\"leave-out\", \"report\" or \"off\"",
                    &value,
                )
            })?),
        },
        robots_check_agents: strings("robots_check_agents", take("robots_check_agents"))?,
        audit: boolean("audit", take("audit"))?,
        audit_origin: string("audit_origin", take("audit_origin"))?,
        audit_requests_per_second: match take("audit_requests_per_second") {
            None => None,
            Some(value) => Some(
                value
                    .as_f64()
                    .ok_or_else(|| wrong("audit_requests_per_second", "a number", &value))?,
            ),
        },
        audit_user_agent: string("audit_user_agent", take("audit_user_agent"))?,
        audit_interval: string("audit_interval", take("audit_interval"))?,
        audit_leave_out: strings("audit_leave_out", take("audit_leave_out"))?,
    };
    if let Some(unknown) = first_key(&fields) {
        return Err(malformed(format!(
            "{unknown}: not a site setting ({SETTINGS})"
        )));
    }
    Ok(spec)
}

/// The settings a site's body may give.
const SETTINGS: &str = "base_url, robots_txt, include_subfolder_sites, indexnow_key, \
                        index_format, nested_index, robots_check, robots_check_agents, audit, \
                        audit_origin, audit_requests_per_second, audit_user_agent, \
                        audit_interval, audit_leave_out";

fn first_key(fields: &Map<String, Value>) -> Option<&str> {
    fields.keys().next().map(String::as_str)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DeleteQuery {
    /// Also delete the site's URL rows (in short transactions; writers and
    /// folds go on meanwhile).
    purge: Option<bool>,
}

/// Remove a site.
///
/// Refused while it has URL rows, unless `purge=true`. Its documents
/// answer `404` on every replica within a second.
#[utoipa::path(
    delete,
    path = "/api/v1/sites/{name}",
    params(("name" = String, Path, description = "The site's name"), DeleteQuery),
    responses(
        (status = 200, description = "Removed", body = SiteRemoved),
        Unauthorized,
        (status = 403, description = "Not an operator's token", body = Problem, content_type = PROBLEM_JSON),
        (status = 404, description = "No such site", body = Problem, content_type = PROBLEM_JSON),
        (status = 409, description = "The site still has URL rows", body = Problem, content_type = PROBLEM_JSON),
    )
)]
pub(super) async fn delete_site(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    query: Result<Query<DeleteQuery>, QueryRejection>,
) -> Result<Json<SiteRemoved>, HttpError> {
    caller.must_operate("removing a site")?;
    let Query(query) = query.map_err(|e| bad_query(&e, "[?purge=true]"))?;
    let before: Site = Site::clone(&admin(&state).get(&name).await?.site);
    let deleted_rows = admin(&state)
        .remove(&name, query.purge.unwrap_or(false))
        .await?;
    show_at_once(&state, &name, &[&before.host], true).await;
    Ok(Json(SiteRemoved {
        site: name,
        deleted_rows,
    }))
}

/// Mint a token of the site.
///
/// The token is in this answer only; the service keeps its digest.
#[utoipa::path(
    post,
    path = "/api/v1/sites/{name}/tokens",
    params(("name" = String, Path, description = "The site's name")),
    responses(
        (status = 201, description = "Minted", body = MintedToken),
        Unauthorized,
        (status = 403, description = "Not an operator's token", body = Problem, content_type = PROBLEM_JSON),
        (status = 404, description = "No such site", body = Problem, content_type = PROBLEM_JSON),
    )
)]
pub(super) async fn mint_token(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, HttpError> {
    caller.must_operate("minting a site token")?;
    let (token, digest) = admin(&state).mint_token(&name).await?;
    state.sites.forget(&format!("token {digest}")).await;
    Ok((
        StatusCode::CREATED,
        Json(MintedToken {
            site: name,
            token,
            digest,
        }),
    )
        .into_response())
}

/// The site's tokens, by digest.
#[utoipa::path(
    get,
    path = "/api/v1/sites/{name}/tokens",
    params(("name" = String, Path, description = "The site's name")),
    responses(
        (status = 200, description = "The digests", body = TokenList),
        Unauthorized,
        (status = 403, description = "Not an operator's token", body = Problem, content_type = PROBLEM_JSON),
        (status = 404, description = "No such site", body = Problem, content_type = PROBLEM_JSON),
    )
)]
pub(super) async fn list_tokens(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<TokenList>, HttpError> {
    caller.must_operate("listing a site's tokens")?;
    let tokens = admin(&state).tokens(&name).await?;
    Ok(Json(TokenList {
        site: name,
        tokens: tokens
            .into_iter()
            .map(|(digest, created_at)| TokenView::new(digest, created_at))
            .collect(),
    }))
}

/// Revoke a token of the site, by its digest.
///
/// Refused on every replica within a second.
#[utoipa::path(
    delete,
    path = "/api/v1/sites/{name}/tokens/{digest}",
    params(
        ("name" = String, Path, description = "The site's name"),
        ("digest" = String, Path, description = "The token's digest: sha256: and 64 hex digits"),
    ),
    responses(
        (status = 204, description = "Revoked"),
        Unauthorized,
        (status = 403, description = "Not an operator's token", body = Problem, content_type = PROBLEM_JSON),
        (status = 404, description = "No such token of the site", body = Problem, content_type = PROBLEM_JSON),
    )
)]
pub(super) async fn revoke_token(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    Path((name, digest)): Path<(String, String)>,
) -> Result<StatusCode, HttpError> {
    caller.must_operate("revoking a site token")?;
    if !admin(&state).revoke_token(&name, &digest).await? {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "no-such-token",
            format!("site {name:?} has no token of digest {digest:?}"),
        )
        .into());
    }
    state.sites.forget(&format!("token {digest}")).await;
    Ok(StatusCode::NO_CONTENT)
}
