//! sitemapd: always-current XML sitemaps served from PostgreSQL.
//!
//! Applications write page records into the `sitemap_urls` table with plain
//! SQL, in transactions of their own that never wait for sitemapd. The
//! service folds what they commit into pages (each row on one page for good)
//! and a summary per page, a few times a second, and serves
//! `/sitemap_index.xml` and the `/sitemap-N.xml.gz` pages from those.
//!
//! # Layout, from the bottom up
//!
//! - [`site`] — a site: its name, base URL, host and path.
//! - [`clock`] — now, as the service has it (tests move it).
//! - [`config`] — settings from `config/default.toml`, a file, the
//!   environment, checked once into a `Config` (sites and tokens parsed).
//! - [`sitemap`] — the protocol, pure: limits, file names, the URL rules, the
//!   XML writer.
//! - [`store`] — every SQL statement; the schema itself is in `migrations/`.
//! - `folder` — the loop that folds committed changes into pages.
//! - `codec` — the compressors: gzip files, and gzip, br or zstd on the wire.
//! - `render` — one page from its rows to its compressed chunks, built whole,
//!   at most a few at once (its build slots).
//! - `cache` — built pages by version, in memory and on disk.
//! - `summaries` — the page summaries in memory between writes, dropped when
//!   the database announces a change.
//! - [`pages`] — the page service over those three: which pages a site has,
//!   and each page's bytes, built once per version.
//! - `warmup` — rebuilds changed pages through the page service in the
//!   background.
//! - [`announce`] — telling search engines what changed: IndexNow pushes
//!   from the change feed, index submissions by GET.
//! - [`ingest`] — import files, and the rules every incoming record is
//!   checked and normalised by (the write API uses them too).
//! - [`http`] — the adapter: connections and their limits, routes, the
//!   write API under `/api/v1`, errors as responses.
//! - [`skips`], `quote`, `metrics`, [`telemetry`], [`tokens`], [`demo`] —
//!   logging rows left out, quoting values, Prometheus metrics, logs, API
//!   tokens, synthetic rows.
//!
//! A request flows one way: [`http`] connection → route → [`pages`]
//! (summaries → cache → `render` → [`store`] rows → [`sitemap`] writer →
//! `codec`) → body. An import flows: [`ingest`] reader → validator →
//! sort → [`store`] (one `COPY`, one writing statement).

pub mod announce;
pub mod clock;
pub mod config;
pub mod demo;
mod fold;
pub mod http;
pub mod ingest;
mod metrics;
pub mod pages;
pub mod progress;
mod quote;
pub mod site;
pub mod sitemap;
pub mod store;
pub mod telemetry;
pub mod tokens;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderValue;
use futures_util::FutureExt;
use tokio::net::TcpListener;

pub use http::{AppState, router as build_app};

use config::Config;
use pages::render::RenderOptions;
use pages::skips::SkipLog;
use pages::{cache, render, skips, summaries, warmup};
use store::Store;

/// Connections the operators' port (`metrics_listen`) serves at once: it
/// answers scrapers and probes, not the public.
const OPERATOR_CONNECTIONS: usize = 64;

/// Connections the IndexNow pusher and the index submitter share: one each.
const ANNOUNCER_CONNECTIONS: u32 = 2;

/// Applies the configuration to the schema: page limits, the sites' base
/// URLs. What every command that reads or writes rows does first.
pub async fn apply_config(store: &Store, config: &Config) -> Result<(), store::Error> {
    let settings = &config.settings;
    let entry_budget = settings.max_bytes - sitemap::DOCUMENT_RESERVE;
    store
        .configure(&config.sites, settings.max_urls, entry_budget)
        .await
}

/// Applies the configuration to the schema and builds the state the routes
/// share.
pub async fn prepare(store: Store, config: &Config) -> Result<AppState, store::Error> {
    let settings = &config.settings;
    let store = store
        .with_read_timeout(Duration::from_millis(settings.db_read_timeout_ms))
        .with_fold_batch_rows(settings.fold_batch_rows);
    apply_config(&store, config).await?;
    // Serve from the first request what was committed before the start.
    store.fold(store::Turn::Wait).await?;
    let fingerprint = pages::fingerprint(settings);
    let metrics = Arc::new(metrics::Metrics::default());
    let pages = pages::Pages {
        renderer: render::Renderer {
            store: store.clone(),
            options: RenderOptions {
                max_urls: settings.max_urls,
                max_bytes: settings.max_bytes,
                gzip_level: settings.gzip_level,
                lastmod_fallback: settings.lastmod_fallback,
            },
            skips: Arc::new(SkipLog::default()),
            metrics: metrics.clone(),
            slots: render::BuildSlots::new(
                settings.max_concurrent_builds as usize,
                Duration::from_millis(settings.build_wait_ms),
            ),
        },
        summaries: Arc::new(summaries::Summaries::new(Duration::from_millis(
            settings.summary_max_age_ms,
        ))),
        // Pages built under other settings are other bytes: kept apart.
        cache: cache::PageCache::new(
            settings.page_cache_bytes,
            settings
                .page_cache_dir
                .as_ref()
                .map(|dir| dir.join(&fingerprint)),
        ),
        fingerprint,
        max_index_entries: settings.max_index_entries as usize,
        max_index_bytes: settings.max_bytes,
        nested_index: settings.nested_index,
        index_format: settings.index_format.encoding(),
    };
    let pages = Arc::new(pages);
    let sites = http::Sites::new(
        config.sites.clone(),
        settings.strict_host,
        settings.proxy_strips_prefix,
    );
    let announcers = announcers(&store, config, &sites, &pages, &metrics).await?;
    Ok(AppState::new(http::App {
        store,
        pages,
        sites,
        announcers,
        cache_max_age: settings.cache_max_age_seconds,
        retry_after: HeaderValue::from(settings.retry_after_seconds),
        skip_report_interval: Duration::from_millis(settings.skip_report_interval_ms),
        bodies: http::bodies::BodyBudget::new(settings.response_memory_bytes, metrics.clone()),
        metrics,
        metrics_apart: settings.metrics_listen.is_some(),
        shutdown_grace: Duration::from_secs(settings.shutdown_grace_seconds),
        api: http::api::ApiSettings {
            tokens: config.tokens.clone(),
            max_body_bytes: usize::try_from(settings.api_max_body_bytes).unwrap_or(usize::MAX),
            max_records: settings.api_max_records as usize,
        },
        fold_interval: Duration::from_millis(settings.fold_interval_ms),
        change_log: store::Retention {
            max_age: settings.change_log_retention,
            max_rows: settings.change_log_max_rows,
        },
        warm_up_interval: (settings.warm_up_interval_ms > 0)
            .then(|| Duration::from_millis(settings.warm_up_interval_ms)),
        connections: http::connections::Limits {
            header_read_timeout: Duration::from_millis(settings.header_read_timeout_ms),
            keep_alive_timeout: Duration::from_millis(settings.keep_alive_timeout_ms),
            write_stall_timeout: Duration::from_millis(settings.write_stall_timeout_ms),
            max_connections: settings.max_connections as usize,
            overflow_connections: (settings.max_connections as usize / 16).clamp(8, 256),
        },
    }))
}

/// The IndexNow pusher (sites with a key, each cursor started at the
/// feed's end the first time) and the index submitter (when `submit_urls`
/// has templates).
async fn announcers(
    store: &Store,
    config: &Config,
    sites: &http::Sites,
    pages: &Arc<pages::Pages>,
    metrics: &Arc<metrics::Metrics>,
) -> Result<announce::Announcers, store::Error> {
    let settings = &config.settings;
    let targets: Vec<_> = config
        .sites
        .iter()
        .filter_map(|site| {
            announce::indexnow::Target::of(site, &config.sites, settings.proxy_strips_prefix)
        })
        .collect();
    if targets.is_empty() && settings.submit_urls.is_empty() {
        return Ok(announce::Announcers::default());
    }
    // Each sender holds a connection while it waits for an engine's answer,
    // up to the request timeout: they get their own, not the service's.
    let store = &store.with_own_pool(ANNOUNCER_CONNECTIONS);
    for target in &targets {
        store.start_indexnow(&target.site).await?;
    }
    let client = announce::client();
    let indexnow = (!targets.is_empty()).then(|| announce::indexnow::Pusher {
        store: store.clone(),
        client: client.clone(),
        endpoint: settings.indexnow_endpoint.clone(),
        batch_delay: Duration::from_millis(settings.indexnow_batch_delay_ms),
        targets,
        metrics: metrics.clone(),
    });
    let submitter = (!settings.submit_urls.is_empty()).then(|| announce::submit::Submitter {
        store: store.clone(),
        client,
        templates: settings.submit_urls.clone(),
        interval: Duration::from_secs(settings.submit_interval_seconds),
        pages: pages.clone(),
        indexes: sites
            .all()
            .iter()
            .filter(|site| !sites.is_held(site))
            .map(|site| announce::submit::SiteIndex {
                site: site.clone(),
                members: sites.index_members(site).into_iter().cloned().collect(),
            })
            .collect(),
        metrics: metrics.clone(),
    });
    Ok(announce::Announcers {
        indexnow,
        submitter,
    })
}

/// Serves until `shutdown` resolves, then stops accepting connections and
/// lets in-flight responses finish for up to the configured grace period,
/// after which it returns even if some are unfinished (the binary then
/// exits, which closes them). `/metrics` is served on
/// `metrics_listener` when given (see `metrics_listen`). Also folds committed
/// changes into pages, reports skipped rows, and warms changed pages (see
/// `warm_up_interval_ms`), in the background while it runs.
pub async fn serve(
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let shutdown = shutdown.shared();
    let reporter = tokio::spawn(skips::report_periodically(
        state.store.clone(),
        state.skip_report_interval,
    ));
    let folder = tokio::spawn(
        fold::Folder {
            store: state.store.clone(),
            summaries: state.pages.summaries.clone(),
            interval: state.fold_interval,
            retention: state.change_log,
        }
        .run(),
    );
    let indexnow = state
        .announcers
        .indexnow
        .clone()
        .map(|pusher| tokio::spawn(pusher.run()));
    let submitter = state
        .announcers
        .submitter
        .clone()
        .map(|submitter| tokio::spawn(submitter.run()));
    let change_listener = (!state.pages.summaries.is_disabled()).then(|| {
        tokio::spawn(summaries::listen(
            state.store.clone(),
            state.pages.summaries.clone(),
        ))
    });
    let warm_up = state.warm_up_interval.map(|interval| {
        tokio::spawn(warmup::run(
            state.pages.clone(),
            state.sites.all().to_vec(),
            interval,
        ))
    });
    let limits = state
        .connections
        .clone()
        .fit_open_files(http::connections::open_files_limit());
    let metrics = metrics_listener.map(|listener| {
        tokio::spawn(http::connections::serve(
            listener,
            http::metrics_router(state.clone()),
            http::metrics_router(state.clone()),
            http::connections::Limits {
                max_connections: OPERATOR_CONNECTIONS,
                overflow_connections: 0,
                ..limits.clone()
            },
            state.metrics.clone(),
            shutdown.clone(),
        ))
    });
    let grace = state.shutdown_grace;
    let server = http::connections::serve(
        listener,
        build_app(state.clone()),
        http::overflow_router(state.clone()),
        limits,
        state.metrics.clone(),
        shutdown.clone(),
    );
    let grace_over = async {
        shutdown.await;
        tokio::time::sleep(grace).await;
    };
    let served = tokio::select! {
        served = server => served,
        () = grace_over => {
            tracing::warn!(grace_seconds = grace.as_secs(), "grace period over: leaving unfinished responses");
            Ok(())
        }
    };
    reporter.abort();
    folder.abort();
    for task in [warm_up, change_listener, indexnow, submitter]
        .into_iter()
        .flatten()
    {
        task.abort();
    }
    if let Some(metrics) = metrics {
        metrics.await.map_err(std::io::Error::other)??;
    }
    served
}
