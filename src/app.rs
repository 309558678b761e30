//! The composition root: builds the service from its configuration, then
//! runs it: the listeners, and the background tasks beside them (the fold
//! loop, the change listener, the skip reporter, the warm-up and the
//! announcers), which start with [`App::serve`] and stop with it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::HeaderValue;
use futures_util::FutureExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::announce::{self, Announcers};
use crate::audit::Auditor;
use crate::changes::{self, Followers};
use crate::config::Config;
use crate::crawlers::Crawlers;
use crate::fold::Folder;
use crate::http::{self, HttpState, connections};
use crate::metrics::Metrics;
use crate::pages::render::{BuildSlots, RenderOptions, Renderer};
use crate::pages::skips::{self, SkipLog};
use crate::pages::summaries::Summaries;
use crate::pages::{Indexes, Pages, cache::PageCache, fingerprint, sitemap_lines, warmup};
use crate::site::{Directory, Site};
use crate::sitemap;
use crate::store::{self, ReadRouteMetrics, Retention, Store, Turn};

/// Connections the operators' port (`metrics_listen`) serves at once: it
/// answers scrapers and probes, not the public.
const OPERATOR_CONNECTIONS: usize = 64;

/// Connections the IndexNow pusher and the index submitter share: one each.
const ANNOUNCER_CONNECTIONS: u32 = 2;

/// The service, built and ready to serve.
#[derive(Debug)]
pub struct App {
    state: HttpState,
    folder: Folder,
    /// How often rows left out of the sitemaps are looked for and logged.
    skip_report_interval: Duration,
    /// How often changed pages are rebuilt in the background; `None`: never.
    warm_up_interval: Option<Duration>,
    announcers: Announcers,
    /// The clocks and caps of client connections.
    connections: connections::Limits,
    /// How long in-flight responses may take to finish after shutdown begins.
    shutdown_grace: Duration,
    /// How far behind the primary a standby may be read (`read_max_lag_ms`).
    read_max_lag: Duration,
    /// How long the watchers of the servers wait for each look
    /// (`db_acquire_timeout_ms`).
    server_look_timeout: Duration,
    /// What the standby's watcher counts on.
    read_route: ReadRouteMetrics,
    /// The crawler ledger's, DNS lookups' and access log's tasks, started
    /// with the service and stopped after its last response.
    crawler_tasks: Vec<tokio::task::JoinHandle<()>>,
    crawler_stop: CancellationToken,
}

/// Applies the configuration to the schema: the page limits, and the
/// file's sites, which win over the table's. What every command that reads
/// or writes rows does first.
pub async fn apply_config(store: &Store, config: &Config) -> Result<(), store::Error> {
    let settings = &config.settings;
    let entry_budget = settings.max_bytes - sitemap::DOCUMENT_RESERVE;
    store
        .configure_limits(settings.max_urls, entry_budget)
        .await?;
    store
        .write_configured_sites(&config.sites, settings.proxy_strips_prefix)
        .await
        .map_err(|error| match error {
            store::SiteWriteError::Store(error) => error,
            refused => store::Error::Configuration(refused.to_string()),
        })
}

/// The index files' reader, with summaries of its own that are read afresh
/// each time: what a command that only names index files needs.
pub fn indexes(store: Store, config: &Config) -> Indexes {
    Indexes::new(
        store,
        Arc::new(Summaries::new(Duration::ZERO, 0, false)),
        &config.settings,
    )
}

/// The sites as served, read from `store`, `strict_host` and
/// `proxy_strips_prefix` applied.
pub fn directory(store: Store, config: &Config) -> Directory {
    let settings = &config.settings;
    Directory::new(
        store,
        settings.strict_host,
        settings.proxy_strips_prefix,
        settings.site_cache_bytes,
    )
}

/// The robots.txt `Sitemap:` lines of every site, each announcing its own
/// index unless another site's index lists its pages.
pub async fn robots_lines(store: &Store, config: &Config) -> Result<Vec<String>, store::Error> {
    let directory = directory(store.clone(), config);
    let indexes = indexes(store.clone(), config);
    let mut lines = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let sites = store.list_sites(after.as_deref(), 1000).await?;
        let Some(last) = sites.last() else {
            return Ok(lines);
        };
        after = Some(last.site.name.clone());
        for stored in &sites {
            let site = &stored.site;
            let on_host = directory.beside(site).await.map_err(shared)?;
            if on_host.is_held(site) {
                continue;
            }
            let files = indexes
                .announced(&on_host.index_members(site))
                .await
                .map_err(shared)?;
            lines.extend(sitemap_lines(site, &files));
        }
    }
}

/// Every site, by name: what a command that validates records against
/// them reads.
pub async fn all_sites(store: &Store) -> Result<Vec<Site>, store::Error> {
    store.all_sites().await
}

/// A store error shared by the reads that waited for it, as its text.
fn shared(error: Arc<store::Error>) -> store::Error {
    Arc::try_unwrap(error).unwrap_or_else(|shared| store::Error::Shared(shared.to_string()))
}

impl App {
    /// Applies the configuration to the schema and builds the service.
    /// What was committed before the start is placed once it serves.
    pub async fn prepare(store: Store, config: &Config) -> Result<App, store::Error> {
        let settings = &config.settings;
        let store = store
            .with_read_timeout(Duration::from_millis(settings.db_read_timeout_ms))
            .with_fold_batch_rows(settings.fold_batch_rows)
            .with_fold_memory_bytes(settings.fold_memory_bytes);
        apply_config(&store, config).await?;
        let metrics = Arc::new(Metrics::default());
        let store = store.with_serving_reads(metrics.serving_reads());
        let read_route = metrics.read_route();
        let pages = Arc::new(pages(&store, config, &metrics));
        let sites = Arc::new(directory(store.clone(), config));
        let announcers = announcers_with(&store, config, &sites, &pages.indexes, &metrics);
        let folder = Folder {
            store: store.clone(),
            interval: Duration::from_millis(settings.fold_interval_ms),
            batch_time: Duration::from_millis(settings.fold_batch_ms),
            batch_rows: settings.fold_batch_rows,
            retention: Retention {
                max_age: settings.change_log_retention,
                max_rows: settings.change_log_max_rows,
            },
        };
        let crawler_stop = CancellationToken::new();
        let (crawlers, crawler_tasks) = Crawlers::start(
            &settings.crawler_settings(),
            // its batches wait for no request's connection, nor hold one
            &store.with_own_pool(1),
            &metrics,
            &crawler_stop,
        )
        .map_err(|error| store::Error::Configuration(error.to_string()))?;
        let state = HttpState::new(http::Shared {
            crawlers: Arc::new(crawlers),
            store: store.clone(),
            pages,
            sites,
            primary: config.primary_site().name.clone(),
            site_defaults: settings.site_defaults(),
            cache_control: http::caching::cache_control(settings.cache_max_age_seconds),
            retry_after: HeaderValue::from(settings.retry_after_seconds),
            bodies: http::bodies::BodyBudget::new(settings.response_memory_bytes, metrics.clone()),
            metrics,
            metrics_public: settings.metrics_public,
            api: http::api::ApiSettings {
                tokens: config.tokens.clone(),
                max_body_bytes: usize::try_from(settings.api_max_body_bytes).unwrap_or(usize::MAX),
                max_records: settings.api_max_records as usize,
            },
            ready: Arc::new(AtomicBool::new(false)),
            scraping: tokio::sync::Mutex::new(()),
        });
        Ok(App {
            state,
            folder,
            skip_report_interval: Duration::from_millis(settings.skip_report_interval_ms),
            warm_up_interval: (settings.warm_up_interval_ms > 0)
                .then(|| Duration::from_millis(settings.warm_up_interval_ms)),
            announcers,
            connections: connections::Limits {
                header_read_timeout: Duration::from_millis(settings.header_read_timeout_ms),
                keep_alive_timeout: Duration::from_millis(settings.keep_alive_timeout_ms),
                write_stall_timeout: Duration::from_millis(settings.write_stall_timeout_ms),
                max_connections: settings.max_connections as usize,
                overflow_connections: (settings.max_connections as usize / 16).clamp(8, 256),
            },
            shutdown_grace: Duration::from_secs(settings.shutdown_grace_seconds),
            read_max_lag: Duration::from_millis(settings.read_max_lag_ms),
            server_look_timeout: Duration::from_millis(settings.db_acquire_timeout_ms),
            read_route,
            crawler_tasks,
            crawler_stop,
        })
    }

    /// What the routes share.
    pub fn state(&self) -> &HttpState {
        &self.state
    }

    /// The clocks and caps of client connections.
    pub fn connection_limits(&self) -> &connections::Limits {
        &self.connections
    }

    /// Serves until `shutdown` resolves, then stops accepting connections and
    /// lets in-flight responses finish for up to the configured grace
    /// period, after which it returns even if some are unfinished (the
    /// binary then exits, which closes them). `/metrics` is served on
    /// `metrics_listener` when given (see `metrics_listen`). The background
    /// tasks run while it serves, and are stopped and awaited before it
    /// returns.
    pub async fn serve(
        self,
        listener: TcpListener,
        metrics_listener: Option<TcpListener>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let shutdown = shutdown.shared();
        let tasks = TaskTracker::new();
        let stop = CancellationToken::new();
        self.start_background(&tasks, &stop);
        let state = self.state;
        let limits = self
            .connections
            .fit_open_files(connections::open_files_limit());
        let operators = metrics_listener.map(|listener| {
            tokio::spawn(connections::serve(
                listener,
                connections::RunOn::ThisRuntime,
                http::metrics_router(state.clone()),
                http::metrics_router(state.clone()),
                connections::Limits {
                    max_connections: OPERATOR_CONNECTIONS,
                    overflow_connections: 0,
                    ..limits.clone()
                },
                state.metrics.clone(),
                shutdown.clone(),
            ))
        });
        let grace = self.shutdown_grace;
        let server = connections::serve(
            listener,
            connections::RunOn::ConnectionThreads,
            http::router(state.clone()),
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
        stop.cancel();
        tasks.close();
        tasks.wait().await;
        // After the last response: the ledger writes what it holds.
        self.crawler_stop.cancel();
        for task in self.crawler_tasks {
            let _ = task.await;
        }
        if let Some(operators) = operators {
            operators.await.map_err(std::io::Error::other)??;
        }
        served
    }

    /// Starts every background task on `tasks`, each to end when `stop` is
    /// cancelled.
    fn start_background(&self, tasks: &TaskTracker, stop: &CancellationToken) {
        let start = |task: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>| {
            let stop = stop.clone();
            tasks.spawn(async move {
                stop.run_until_cancelled(task).await;
            });
        };
        let state = &self.state;
        start(Box::pin(catch_up_then_announce(
            state.clone(),
            self.announcers.clone(),
            self.warm_up_interval,
        )));
        start(Box::pin(skips::report_periodically(
            state.store.clone(),
            self.skip_report_interval,
        )));
        start(Box::pin(self.folder.clone().run()));
        // Connections of its own: one holds the auditor's turn.
        start(Box::pin(Auditor::new(state.store.with_own_pool(3)).run()));
        for servers in state.store.followed_servers() {
            start(Box::pin(servers.clone().follow(self.server_look_timeout)));
        }
        if state.store.reads().has_standby() {
            start(Box::pin(state.store.reads().clone().watch(
                self.read_max_lag,
                self.server_look_timeout,
                self.read_route.clone(),
            )));
        }
        start(Box::pin(changes::follow(
            state.store.clone(),
            Followers {
                pages: state.pages.clone(),
                directory: state.sites.clone(),
            },
        )));
    }
}

/// Places the backlog, starts the IndexNow cursors of the sites with a key
/// that have none (at the feed's end: changes committed before it had a
/// key are never pushed), says the service is ready, then runs what starts
/// only then, so no index is submitted half placed. The warm-up's first round takes note of the pages as placed, so
/// a backlog's pages are built when asked for, not all at once.
async fn catch_up_then_announce(
    state: HttpState,
    announcers: Announcers,
    warm_up_interval: Option<Duration>,
) {
    place_the_backlog(&state.store, &state.pages.summaries).await;
    if let Some(pusher) = &announcers.indexnow {
        while let Err(error) = pusher.start_cursors().await {
            tracing::warn!(%error, "IndexNow: could not start the change feed's cursors; retrying");
            tokio::time::sleep(RETRY).await;
        }
    }
    state.ready.store(true, Ordering::Release);
    tracing::info!("ready: the changes committed before the start are placed");
    tokio::join!(
        async {
            if let Some(pusher) = announcers.indexnow {
                pusher.run().await;
            }
        },
        async {
            if let Some(submitter) = announcers.submitter {
                submitter.run().await;
            }
        },
        async {
            if let Some(interval) = warm_up_interval {
                warmup::run(state.pages.clone(), interval).await;
            }
        },
    );
}

/// How long to wait before trying a start-up step again.
const RETRY: Duration = Duration::from_secs(1);

/// Places every change committed before the start, batch by batch beside
/// the fold loop. Until then the service serves the pages already placed,
/// whole, and `/readyz` answers `503`, so a load balancer keeps it out of
/// rotation while it would serve an older index than the replicas beside
/// it. Stopped midway (SIGTERM), the fold under way rolls back whole and
/// the next start goes on from the last one.
async fn place_the_backlog(store: &Store, summaries: &Summaries) {
    tracing::info!("placing the changes committed before the start");
    loop {
        match store.fold(Turn::Wait).await {
            Ok(folded) => {
                summaries.invalidate();
                tracing::info!(
                    rows = folded.unwrap_or(0),
                    "placed the changes committed before the start"
                );
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "could not place the changes committed before the start; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// The page service: summaries, cache and builds, as the settings shape them.
fn pages(store: &Store, config: &Config, metrics: &Arc<Metrics>) -> Pages {
    let settings = &config.settings;
    let fingerprint = fingerprint(settings);
    let summaries = Arc::new(Summaries::new(
        Duration::from_millis(settings.summary_max_age_ms),
        settings.summary_cache_bytes,
        settings.database_read_url.is_some(),
    ));
    Pages {
        renderer: Renderer {
            store: store.clone(),
            options: RenderOptions {
                max_urls: settings.max_urls,
                max_bytes: settings.max_bytes,
                gzip_level: settings.gzip_level,
                lastmod_fallback: settings.lastmod_fallback,
            },
            skips: Arc::new(SkipLog::default()),
            metrics: metrics.clone(),
            slots: BuildSlots::new(
                settings.max_concurrent_builds as usize,
                Duration::from_millis(settings.build_wait_ms),
            ),
            runtime: tokio::runtime::Handle::current(),
        },
        indexes: Indexes::new(store.clone(), summaries.clone(), settings),
        summaries,
        // Pages built under other settings are other bytes: kept apart.
        cache: PageCache::new(
            settings.page_cache_bytes,
            settings
                .page_cache_dir
                .as_ref()
                .map(|dir| dir.join(&fingerprint)),
        ),
        fingerprint,
    }
}

/// The announcers alone, for `sitemapd submit`: the index files read
/// afresh, and metrics nobody scrapes.
pub fn announcers(store: &Store, config: &Config) -> Announcers {
    announcers_with(
        store,
        config,
        &Arc::new(directory(store.clone(), config)),
        &indexes(store.clone(), config),
        &Arc::new(Metrics::default()),
    )
}

/// The IndexNow pusher (any site may be given a key while the service
/// runs, so it always runs) and the index submitter (when `submit_urls`
/// has templates).
fn announcers_with(
    store: &Store,
    config: &Config,
    sites: &Arc<Directory>,
    indexes: &Indexes,
    metrics: &Arc<Metrics>,
) -> Announcers {
    let settings = &config.settings;
    // Each sender holds a connection while it waits for an engine's answer,
    // up to the request timeout: they get their own, not the service's.
    let store = &store.with_own_pool(ANNOUNCER_CONNECTIONS);
    let client = announce::client();
    let indexnow = Some(announce::indexnow::Pusher {
        store: store.clone(),
        client: client.clone(),
        endpoint: settings.indexnow_endpoint.clone(),
        batch_delay: Duration::from_millis(settings.indexnow_batch_delay_ms),
        sites: sites.clone(),
        metrics: metrics.clone(),
    });
    let submitter = (!settings.submit_urls.is_empty()).then(|| announce::submit::Submitter {
        store: store.clone(),
        client,
        templates: settings.submit_urls.clone(),
        interval: Duration::from_secs(settings.submit_interval_seconds),
        index_reader: indexes.clone(),
        sites: sites.clone(),
        metrics: metrics.clone(),
    });
    Announcers {
        indexnow,
        submitter,
    }
}
