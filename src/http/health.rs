//! Liveness and readiness, for orchestrators and load balancers.

use std::sync::atomic::Ordering;

use axum::extract::State;

use super::{HttpError, HttpState};

/// `GET /healthz`: the process is up and serving HTTP.
pub(super) async fn live() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: every change committed before the start is placed, so
/// this replica serves what every other one serves, and the database
/// answers.
pub(super) async fn ready(State(state): State<HttpState>) -> Result<&'static str, HttpError> {
    if !state.ready.load(Ordering::Acquire) {
        return Err(HttpError::NotReady);
    }
    state.store.ping().await?;
    Ok("ready\n")
}
