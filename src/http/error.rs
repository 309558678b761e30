//! The HTTP layer's one error type, and the one place it becomes a response.
//!
//! Crawlers read status codes, not bodies: a missing page is a `404`, and a
//! database in trouble is a short `503` with `Retry-After` (which crawlers
//! understand as "come back later") rather than a `500` or, worse, an empty
//! `200`. Bodies stay generic; the cause goes to the log.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::pages::render::RenderError;
use crate::store;

#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("not found")]
    NotFound,
    /// A sitemap document that would list nothing, which neither schema
    /// allows: why, in a sentence.
    #[error("{0}")]
    NothingListed(String),
    /// A request whose query names something that cannot be: what and why.
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    Render(RenderError),
    /// A read or build that failed for several waiting requests at once.
    #[error("{0}")]
    Shared(String),
    /// Too many pages being built: load shed.
    #[error("overloaded")]
    Overloaded,
    /// Response bodies in flight hold the whole memory budget.
    #[error("response memory budget spent")]
    MemoryBudget,
    /// A write API request without a token the service admits.
    #[error("unauthorized")]
    Unauthorized,
    /// The changes committed before the start are still being placed.
    #[error("not ready")]
    NotReady,
    /// The runtime that answers the request shut down first.
    #[error("stopping")]
    Stopping,
    /// A write API request refused for what it holds.
    #[error("{}: {}", .0.title, .0.detail)]
    Problem(Box<Problem>),
}

/// An RFC 9457 problem document: what the write API answers every refused
/// request with.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct Problem {
    /// Names the kind of problem (`urn:sitemapd:problem:…`).
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) title: String,
    pub(crate) status: u16,
    pub(crate) detail: String,
    /// For `invalid-records`: each broken rule of each rejected record.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) errors: Vec<RecordError>,
}

/// One broken rule of one record.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RecordError {
    /// 0-based index of the record in a JSON array body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) index: Option<u64>,
    /// 1-based line of the record in an NDJSON body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u64>,
    pub(crate) field: String,
    /// The value as received, cut short.
    pub(crate) value: String,
    pub(crate) rule: String,
    /// All of the above in one sentence.
    pub(crate) detail: String,
}

impl Problem {
    /// A problem of kind `urn:sitemapd:problem:{kind}`.
    pub(crate) fn new(status: StatusCode, kind: &str, detail: impl Into<String>) -> Problem {
        Problem {
            kind: format!("urn:sitemapd:problem:{kind}"),
            title: status.canonical_reason().unwrap_or("error").to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            errors: Vec::new(),
        }
    }
}

impl From<RenderError> for HttpError {
    fn from(error: RenderError) -> Self {
        match error {
            RenderError::Overloaded => HttpError::Overloaded,
            error => HttpError::Render(error),
        }
    }
}

impl From<std::sync::Arc<RenderError>> for HttpError {
    fn from(error: std::sync::Arc<RenderError>) -> Self {
        // Shared by every request that waited for the same build.
        match std::sync::Arc::try_unwrap(error) {
            Ok(error) => error.into(),
            Err(shared) => match &*shared {
                RenderError::Overloaded => HttpError::Overloaded,
                error => HttpError::Shared(error.to_string()),
            },
        }
    }
}

impl From<std::sync::Arc<store::Error>> for HttpError {
    fn from(error: std::sync::Arc<store::Error>) -> Self {
        // Shared by every request that waited for the same read.
        match std::sync::Arc::try_unwrap(error) {
            Ok(error) => HttpError::Store(error),
            Err(shared) => HttpError::Shared(shared.to_string()),
        }
    }
}

impl From<Problem> for HttpError {
    fn from(problem: Problem) -> Self {
        HttpError::Problem(Box::new(problem))
    }
}

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

fn problem_response(problem: &Problem) -> Response {
    let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::BAD_REQUEST);
    let body = serde_json::to_vec(problem).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, PROBLEM_JSON)], body).into_response()
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        match self {
            HttpError::NotFound => (StatusCode::NOT_FOUND, "not found\n").into_response(),
            // Not kept by caches: the document appears with its first URL.
            HttpError::NothingListed(why) => (
                StatusCode::NOT_FOUND,
                [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
                format!("{why}\n"),
            )
                .into_response(),
            HttpError::BadRequest(reason) => {
                (StatusCode::BAD_REQUEST, format!("bad request: {reason}\n")).into_response()
            }
            HttpError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                [(header::ALLOW, HeaderValue::from_static("GET, HEAD"))],
                "only GET and HEAD\n",
            )
                .into_response(),
            HttpError::Store(error) => match error.refused_by_a_move() {
                // The write goes through once the proxy sends the site to
                // its new cell: a 503, whose Retry-After says when to try.
                Some(detail) => problem_response(&Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "site-moving",
                    detail,
                )),
                None => unavailable(&error),
            },
            HttpError::Render(error) => unavailable(&error),
            HttpError::Shared(error) => {
                tracing::error!(%error, "answering 503: database unavailable");
                unavailable_response()
            }
            HttpError::Overloaded => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
                "too many sitemap pages being built, retry later\n",
            )
                .into_response(),
            HttpError::MemoryBudget => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
                "too many responses in flight, retry later\n",
            )
                .into_response(),
            HttpError::Unauthorized => {
                let problem = Problem::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "send Authorization: Bearer <token> with an operator's token (its digest in \
                     api_token_hashes) or a site's (`sitemapd token --site NAME`)",
                );
                let mut response = problem_response(&problem);
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"sitemapd\""),
                );
                response
            }
            HttpError::NotReady => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
                "placing the changes committed before the start, retry later\n",
            )
                .into_response(),
            HttpError::Stopping => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
                "the service is stopping, retry later\n",
            )
                .into_response(),
            HttpError::Problem(problem) => problem_response(&problem),
        }
    }
}

fn unavailable(error: &dyn std::error::Error) -> Response {
    tracing::error!(error = %error, "answering 503: database unavailable");
    unavailable_response()
}

fn unavailable_response() -> Response {
    // Retry-After is added by the router's layer, which knows the setting.
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        "database unavailable, retry later\n",
    )
        .into_response()
}
