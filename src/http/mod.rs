//! HTTP: routes, shared state, and the policies every response shares.
//!
//! A request flows one way: route → store (summaries, rows) → writer →
//! body. Absolute URLs come from the configured base URL only; nothing in a
//! request (`Host`, `X-Forwarded-*`) reaches them.

mod error;
mod health;
mod sitemaps;

use std::sync::Arc;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use tower_http::trace::TraceLayer;

pub use error::HttpError;

use crate::config::Site;
use crate::render::{RenderOptions, SkipLog};
use crate::store::Store;

/// What every handler shares; cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState(Arc<App>);

#[derive(Debug)]
pub struct App {
    pub store: Store,
    pub site: Site,
    pub render: RenderOptions,
    /// Sent with every `503`: when a crawler should come back.
    pub retry_after: HeaderValue,
    /// How often rows left out of the sitemaps are looked for and logged.
    pub skip_report_interval: std::time::Duration,
    pub skips: Arc<SkipLog>,
}

impl AppState {
    pub fn new(app: App) -> Self {
        AppState(Arc::new(app))
    }
}

impl std::ops::Deref for AppState {
    type Target = App;

    fn deref(&self) -> &App {
        &self.0
    }
}

/// The service's routes with their shared layers.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/sitemap_index.xml", get(sitemaps::index))
        .route("/{file}", get(sitemaps::page))
        .route("/healthz", get(health::live))
        .route("/readyz", get(health::ready))
        .fallback(|| async { HttpError::NotFound })
        .layer(axum::middleware::map_response_with_state(state.clone(), add_retry_after))
        .layer(TraceLayer::new_for_http().make_span_with(|request: &Request| {
            let route = request
                .extensions()
                .get::<MatchedPath>()
                .map_or("<unmatched>", MatchedPath::as_str);
            tracing::info_span!("request", method = %request.method(), route, path = %request.uri().path())
        }))
        .with_state(state)
}

async fn add_retry_after(State(state): State<AppState>, mut response: Response) -> Response {
    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .entry(header::RETRY_AFTER)
            .or_insert_with(|| state.retry_after.clone());
    }
    response
}
