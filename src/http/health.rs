//! Liveness and readiness, for orchestrators and load balancers.

use axum::extract::State;

use super::{HttpError, HttpState};

/// `GET /healthz`: the process is up and serving HTTP.
pub(super) async fn live() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: the database answers, so sitemaps can be served.
pub(super) async fn ready(State(state): State<HttpState>) -> Result<&'static str, HttpError> {
    state.store.ping().await?;
    Ok("ready\n")
}
