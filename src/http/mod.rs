//! HTTP: routes, shared state, and the policies every response shares.
//!
//! A request flows one way: route → store (summaries, rows) → writer →
//! body. Absolute URLs come from the configured base URL only; nothing in a
//! request (`Host`, `X-Forwarded-*`) reaches them.

pub(crate) mod api;
pub(crate) mod bodies;
mod browse;
pub(crate) mod caching;
pub(crate) mod connections;
mod error;
mod fetches;
mod health;
mod host;
mod ledger;
mod negotiate;
mod public;
mod sitemaps;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub use connections::raise_open_files_limit;
pub(crate) use error::HttpError;
pub(crate) use public::Public;

use crate::metrics::Metrics;
use crate::site::{Directory, SiteDefaults};
use crate::store::{self, Store};

/// What every handler shares; cheap to clone.
#[derive(Debug, Clone)]
pub struct HttpState(Arc<Shared>);

/// What the handlers read, and nothing else.
#[derive(Debug)]
pub struct Shared {
    pub store: Store,
    /// The sites, read as requests name them.
    pub sites: Arc<Directory>,
    /// The primary site's name: the site of records and views that name
    /// none.
    pub(crate) primary: String,
    /// What a site written through the API takes when it does not say.
    pub(crate) site_defaults: SiteDefaults,
    /// The pages: summaries, cache and builds.
    pub pages: Arc<crate::pages::Pages>,
    /// `Cache-Control` of sitemap documents: `public, max-age=` the
    /// setting.
    pub(crate) cache_control: HeaderValue,
    /// Sent with every `503`: when a crawler should come back.
    pub(crate) retry_after: HeaderValue,
    pub(crate) metrics: Arc<Metrics>,
    /// Whether `/metrics` is served on the public listener too
    /// (`metrics_public`); it always is on the operators' one.
    pub(crate) metrics_public: bool,
    pub(crate) api: api::ApiSettings,
    /// What response bodies in flight hold, within `response_memory_bytes`.
    pub(crate) bodies: Arc<bodies::BodyBudget>,
    /// Whether every change committed before the start is placed.
    pub(crate) ready: Arc<AtomicBool>,
    /// Who fetches: the crawler lookups, the ledger and the access log.
    pub(crate) crawlers: Arc<crate::crawlers::Crawlers>,
    /// Held by the scrape of `/metrics` that reads the database's counts.
    pub(crate) scraping: tokio::sync::Mutex<()>,
}

impl HttpState {
    pub fn new(shared: Shared) -> Self {
        HttpState(Arc::new(shared))
    }
}

impl std::ops::Deref for HttpState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The public port's service: its routes in the pipeline every request
/// goes through. A `GET` of any other path goes to `sitemaps::dispatch`
/// without the router, so a route added here is named in `public::routed`.
pub(crate) fn router(state: HttpState) -> Public {
    let mut router = health_routes();
    if state.metrics_public {
        router = router.route("/metrics", get(metrics));
    }
    let routes = router
        .merge(api::router(&state))
        .fallback(sitemaps::dispatch)
        .with_state(state.clone());
    Public::serving_files(state, routes)
}

/// `/healthz` and `/readyz`, which every listener answers.
fn health_routes() -> Router<HttpState> {
    Router::new()
        .route("/healthz", get(health::live))
        .route("/readyz", get(health::ready))
}

/// The operators' port (`metrics_listen`): `/metrics`, the HTML view with
/// what is left out of the sitemaps (`/sitemaps.html?site=NAME`), and the
/// health checks, which answer there however busy the public port is.
pub(crate) fn metrics_router(state: HttpState) -> Router {
    health_routes()
        .route("/metrics", get(metrics))
        .route(crate::metrics::routes::HTML_VIEW, get(operators_view))
        .layer(axum::middleware::map_response_with_state(
            state.clone(),
            |State(state): State<HttpState>, response: Response| async move {
                public::finish_response(&state, response)
            },
        ))
        .with_state(state)
}

/// What a connection past `max_connections` is answered: the health checks
/// as ever, so probes get through a flood, and `503` for anything else.
pub(crate) fn overflow_router(state: HttpState) -> Public {
    let routes = health_routes()
        .fallback(too_many_connections)
        .with_state(state.clone());
    Public::new(state, routes)
}

async fn too_many_connections(State(state): State<HttpState>) -> Response {
    state.metrics.response_refused("connections");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::CONNECTION, HeaderValue::from_static("close")),
        ],
        "too many connections, retry later\n",
    )
        .into_response()
}

/// The HTML view for operators: any site's, by name (default: the primary
/// one), with the rows left out and why.
async fn operators_view(
    State(state): State<HttpState>,
    headers: axum::http::HeaderMap,
    axum::extract::Query(query): axum::extract::Query<browse::ViewQuery>,
) -> Result<Response, HttpError> {
    let name = query.site().unwrap_or(&state.primary);
    let site = state
        .sites
        .named(name)
        .await?
        .ok_or_else(|| HttpError::BadRequest(format!("site={name:?}: no such site")))?;
    let links = browse::Links::Operators { site: &site.name };
    browse::view(
        &state,
        &site,
        query,
        browse::Audience::Operator,
        links,
        &headers,
    )
    .await
}

async fn metrics(State(state): State<HttpState>) -> Response {
    let pool = state.store.pool();
    let now = time::OffsetDateTime::now_utc();
    // One scrape at a time reads the database; one that finds another
    // reading keeps the values last read, so scrapers however frequent or
    // many never have more than one set of counts running.
    let counts = match state.scraping.try_lock() {
        Ok(_reading) => Counts::read(&state, now).await,
        Err(_) => Counts::default(),
    };
    let text = state.metrics.render(crate::metrics::Gauges {
        page_cache_bytes: state.pages.cache.memory_bytes(),
        pool_size: i64::from(pool.size()),
        pool_idle: pool.num_idle() as i64,
        skipped_rows: counts.skipped,
        lastmods_in_future: counts.in_future,
        robots_disallowed: counts.robots,
        audit_urls: counts.audits,
        hreflang_cluster_problems: counts.cluster_problems,
        verified_crawlers: counts.verified_crawlers,
    });
    let content_type =
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8");
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}

/// What a scrape reads from the database; each `None` keeps the value
/// last read (PostgreSQL cancelled it past [`store::COUNT_TIMEOUT`], or
/// another scrape was reading).
#[derive(Default)]
struct Counts {
    skipped: Option<Vec<(String, i64)>>,
    in_future: Option<Vec<(String, i64)>>,
    robots: Option<Vec<(String, bool, i64)>>,
    audits: Option<Vec<(String, String, i64)>>,
    cluster_problems: Option<i64>,
    verified_crawlers: Option<Vec<crate::metrics::CrawlerHeld>>,
}

impl Counts {
    async fn read(state: &HttpState, now: time::OffsetDateTime) -> Counts {
        // Longer than PostgreSQL runs a count, so that a count is over
        // there, cancelled, before the scrape gives up on it and the next
        // may start one.
        let within = store::COUNT_TIMEOUT + std::time::Duration::from_secs(1);
        let (skipped, in_future, robots, audits, cluster_problems, holdings) = tokio::join!(
            tokio::time::timeout(within, state.store.skipped_counts()),
            tokio::time::timeout(within, state.store.lastmods_in_future_counts()),
            tokio::time::timeout(within, state.store.robots_disallowed_counts()),
            tokio::time::timeout(within, state.store.audit_finding_counts()),
            tokio::time::timeout(within, state.store.cluster_problems()),
            tokio::time::timeout(within, ledger::holdings(state, None)),
        );
        Counts {
            skipped: skipped.ok().and_then(Result::ok),
            in_future: in_future.ok().and_then(Result::ok),
            robots: robots.ok().and_then(Result::ok),
            audits: audits.ok().and_then(Result::ok),
            cluster_problems: cluster_problems.ok().and_then(Result::ok),
            verified_crawlers: holdings
                .ok()
                .and_then(Result::ok)
                .map(|holdings| ledger::verified_crawlers(&holdings, now)),
        }
    }
}
