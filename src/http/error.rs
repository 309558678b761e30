//! The HTTP layer's one error type, and the one place it becomes a response.
//!
//! Crawlers read status codes, not bodies: a missing page is a `404`, and a
//! database in trouble is a short `503` with `Retry-After` (which crawlers
//! understand as "come back later") rather than a `500` or, worse, an empty
//! `200`. Bodies stay generic; the cause goes to the log.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::render::RenderError;
use crate::store;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("not found")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    Render(#[from] RenderError),
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        match self {
            HttpError::NotFound => (StatusCode::NOT_FOUND, "not found\n").into_response(),
            HttpError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                [(header::ALLOW, HeaderValue::from_static("GET, HEAD"))],
                "only GET and HEAD\n",
            )
                .into_response(),
            HttpError::Store(error) => unavailable(&error),
            HttpError::Render(error) => unavailable(&error),
        }
    }
}

fn unavailable(error: &dyn std::error::Error) -> Response {
    tracing::error!(error = %error, "answering 503: database unavailable");
    // Retry-After is added by the router's layer, which knows the setting.
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        "database unavailable, retry later\n",
    )
        .into_response()
}
