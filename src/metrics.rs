//! Prometheus metrics: what an operator watches to know the service is
//! healthy and fast. Served at `GET /metrics`, on the main port or on
//! `metrics_listen`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::crawlers::Crawler;
use crate::store::{ReadRouteMetrics, ServingReads};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SiteLabels {
    site: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    site: String,
    finding: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RobotsLabels {
    site: String,
    /// Whether the rows are listed (the site reports them) or left out.
    listed: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SiteStatusLabels {
    site: String,
    /// The answer's status code, or `error` when none came.
    status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CrawlerFetchLabels {
    site: String,
    /// A family, `unverified` or `other`: never a user-agent string.
    crawler: &'static str,
    verified: &'static str,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CrawlerLabels {
    site: String,
    crawler: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TierLabels {
    tier: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadLabels {
    read: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    state: &'static str,
}

/// Request counters (by route and status) each thread keeps at hand.
const RECENT_REQUEST_COUNTERS: usize = 8;

/// A request counter kept by a thread, under its instance, route and status.
type KeptCounter = ((u64, &'static str, u16), Counter);

#[derive(Debug)]
pub(crate) struct Metrics {
    /// Tells one instance's counters kept by a thread from another's.
    id: u64,
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    body_bytes: Family<RouteLabels, Counter>,
    page_build: Histogram,
    rows_read: Counter,
    rows_left_out: Counter,
    skipped_rows: Family<SiteLabels, Gauge>,
    lastmods_in_future: Family<SiteLabels, Gauge>,
    robots_disallowed: Family<RobotsLabels, Gauge>,
    audit_urls: Family<FindingLabels, Gauge>,
    hreflang_cluster_problems: Gauge,
    pool: Family<PoolLabels, Gauge>,
    database_reads: Family<ReadLabels, Counter>,
    read_fallbacks: Counter,
    read_server: Family<ServerLabels, Gauge>,
    pages_served: Family<SourceLabels, Counter>,
    page_cache_bytes: Gauge,
    connections_open: Family<TierLabels, Gauge>,
    connections_closed: Family<ReasonLabels, Counter>,
    response_memory_bytes: Gauge,
    responses_refused: Family<ReasonLabels, Counter>,
    indexnow_batches_sent: Family<SiteLabels, Counter>,
    indexnow_urls_sent: Family<SiteLabels, Counter>,
    indexnow_batches_accepted: Family<SiteLabels, Counter>,
    indexnow_urls_accepted: Family<SiteLabels, Counter>,
    indexnow_batches_refused: Family<SiteStatusLabels, Counter>,
    indexnow_backlog_changes: Family<SiteLabels, Gauge>,
    indexnow_backlog_age_seconds: Family<SiteLabels, Gauge>,
    submissions: Family<SiteStatusLabels, Counter>,
    crawler_fetches: Family<CrawlerFetchLabels, Counter>,
    crawler_last_fetch: Family<CrawlerLabels, Gauge>,
    crawler_stale_version_age: Family<CrawlerLabels, Gauge>,
    crawler_fetches_dropped: Counter,
    access_log_lines_dropped: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("sitemapd");
        let crawler_fetches = Family::<CrawlerFetchLabels, Counter>::default();
        registry.register(
            "crawler_fetches",
            "Fetches of sitemap files by site, crawler family (verified), `unverified` \
             (a family's user agent from an address not its own) or `other`, and status",
            crawler_fetches.clone(),
        );
        let crawler_last_fetch = Family::<CrawlerLabels, Gauge>::default();
        registry.register(
            "crawler_last_fetch_timestamp_seconds",
            "When a verified crawler last fetched one of the site's sitemap files (Unix time)",
            crawler_last_fetch.clone(),
        );
        let crawler_stale_version_age = Family::<CrawlerLabels, Gauge>::default();
        registry.register(
            "crawler_stale_version_age_seconds",
            "Of the site's files a verified crawler last took in a version since replaced, the \
             age of the oldest such version (its lastmod); 0 when it holds every file as served",
            crawler_stale_version_age.clone(),
        );
        let crawler_fetches_dropped = Counter::default();
        registry.register(
            "crawler_fetches_dropped",
            "Fetches left out of the crawler ledger because its writer fell behind",
            crawler_fetches_dropped.clone(),
        );
        let access_log_lines_dropped = Counter::default();
        registry.register(
            "access_log_lines_dropped",
            "Access log lines dropped because its writer fell behind",
            access_log_lines_dropped.clone(),
        );
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template and status (304s included)",
            requests.clone(),
        );
        let body_bytes = Family::<RouteLabels, Counter>::default();
        registry.register(
            "response_body_bytes",
            "Bytes of response bodies produced, by route template",
            body_bytes.clone(),
        );
        let page_build = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "page_build_seconds",
            "Time to read, write and compress one sitemap page",
            page_build.clone(),
        );
        let rows_read = Counter::default();
        registry.register(
            "rows_read",
            "Rows read from sitemap_urls to build pages",
            rows_read.clone(),
        );
        let rows_left_out = Counter::default();
        registry.register(
            "rows_left_out",
            "Rows read but left out of a page because XML cannot carry them",
            rows_left_out.clone(),
        );
        let skipped_rows = Family::<SiteLabels, Gauge>::default();
        registry.register(
            "skipped_rows",
            "Rows not served because their loc is outside their site's base URL or their site is not configured",
            skipped_rows.clone(),
        );
        let lastmods_in_future = Family::<SiteLabels, Gauge>::default();
        registry.register(
            "lastmods_in_future",
            "Rows served with the moment their fold placed them, their lastmod being later",
            lastmods_in_future.clone(),
        );
        let robots_disallowed = Family::<RobotsLabels, Gauge>::default();
        registry.register(
            "robots_disallowed",
            "Rows whose loc the site's robots.txt disallows for a checked agent: left out, or listed where the site reports them",
            robots_disallowed.clone(),
        );
        let audit_urls = Family::<FindingLabels, Gauge>::default();
        registry.register(
            "audit_urls",
            "Audited URLs by what their last check against the live site found",
            audit_urls.clone(),
        );
        let hreflang_cluster_problems = Gauge::default();
        registry.register(
            "hreflang_cluster_problems",
            "hreflang clusters served without links because their input conflicts or is incomplete (see /api/v1/stats)",
            hreflang_cluster_problems.clone(),
        );
        let pool = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "db_connections",
            "Database pool connections by state",
            pool.clone(),
        );
        let database_reads = Family::<ReadLabels, Counter>::default();
        registry.register(
            "database_reads",
            "Reads serving made from the database, by what they read (summaries, sites, pages): those its caches did not spare",
            database_reads.clone(),
        );
        let read_fallbacks = Counter::default();
        registry.register(
            "read_fallbacks",
            "Times the sitemaps' reads left the standby (database_read_url) for the primary: it did not answer, or lagged",
            read_fallbacks.clone(),
        );
        let read_server = Family::<ServerLabels, Gauge>::default();
        registry.register(
            "read_server",
            "Where the sitemaps' reads go now: 1 for that server (primary or standby)",
            read_server.clone(),
        );
        let pages_served = Family::<SourceLabels, Counter>::default();
        registry.register(
            "pages_served",
            "Compressed pages answered, by where their bytes came from (memory, disk, built)",
            pages_served.clone(),
        );
        let page_cache_bytes = Gauge::default();
        registry.register(
            "page_cache_bytes",
            "Bytes of built pages held in memory",
            page_cache_bytes.clone(),
        );
        let connections_open = Family::<TierLabels, Gauge>::default();
        registry.register(
            "connections_open",
            "Client connections open, by tier (regular: within max_connections; overflow: answered once past it)",
            connections_open.clone(),
        );
        let connections_closed = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "connections_closed",
            "Client connections closed, by reason",
            connections_closed.clone(),
        );
        let response_memory_bytes = Gauge::default();
        registry.register(
            "response_memory_bytes",
            "Bytes held by response bodies in flight, counted against response_memory_bytes",
            response_memory_bytes.clone(),
        );
        let responses_refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "responses_refused",
            "Requests answered 503 to protect the service, by reason",
            responses_refused.clone(),
        );
        let indexnow_batches_sent = Family::<SiteLabels, Counter>::default();
        registry.register(
            "indexnow_batches_sent",
            "IndexNow POSTs made, retries included",
            indexnow_batches_sent.clone(),
        );
        let indexnow_urls_sent = Family::<SiteLabels, Counter>::default();
        registry.register(
            "indexnow_urls_sent",
            "URLs in IndexNow POSTs made, retries included",
            indexnow_urls_sent.clone(),
        );
        let indexnow_batches_accepted = Family::<SiteLabels, Counter>::default();
        registry.register(
            "indexnow_batches_accepted",
            "IndexNow POSTs answered 200 or 202",
            indexnow_batches_accepted.clone(),
        );
        let indexnow_urls_accepted = Family::<SiteLabels, Counter>::default();
        registry.register(
            "indexnow_urls_accepted",
            "URLs in IndexNow POSTs answered 200 or 202",
            indexnow_urls_accepted.clone(),
        );
        let indexnow_batches_refused = Family::<SiteStatusLabels, Counter>::default();
        registry.register(
            "indexnow_batches_refused",
            "IndexNow POSTs not accepted, by status (429 and 5xx are retried, 4xx dropped; error: no answer)",
            indexnow_batches_refused.clone(),
        );
        let indexnow_backlog_changes = Family::<SiteLabels, Gauge>::default();
        registry.register(
            "indexnow_backlog_changes",
            "Change feed entries not yet delivered to IndexNow",
            indexnow_backlog_changes.clone(),
        );
        let indexnow_backlog_age_seconds = Family::<SiteLabels, Gauge>::default();
        registry.register(
            "indexnow_backlog_age_seconds",
            "Age of the oldest change not yet delivered to IndexNow (0: none)",
            indexnow_backlog_age_seconds.clone(),
        );
        let submissions = Family::<SiteStatusLabels, Counter>::default();
        registry.register(
            "sitemap_submissions",
            "Index submissions by GET to submit_urls, by status (200 is success; error: no answer)",
            submissions.clone(),
        );
        static INSTANCES: AtomicU64 = AtomicU64::new(0);
        Metrics {
            id: INSTANCES.fetch_add(1, Ordering::Relaxed),
            registry,
            indexnow_batches_sent,
            indexnow_urls_sent,
            indexnow_batches_accepted,
            indexnow_urls_accepted,
            indexnow_batches_refused,
            indexnow_backlog_changes,
            indexnow_backlog_age_seconds,
            submissions,
            connections_open,
            connections_closed,
            response_memory_bytes,
            responses_refused,
            pages_served,
            page_cache_bytes,
            requests,
            body_bytes,
            page_build,
            rows_read,
            rows_left_out,
            skipped_rows,
            lastmods_in_future,
            robots_disallowed,
            audit_urls,
            hreflang_cluster_problems,
            pool,
            database_reads,
            read_fallbacks,
            read_server,
            crawler_fetches,
            crawler_last_fetch,
            crawler_stale_version_age,
            crawler_fetches_dropped,
            access_log_lines_dropped,
        }
    }
}

impl Metrics {
    /// What the standby's watcher moves as it moves the reads.
    pub(crate) fn read_route(&self) -> ReadRouteMetrics {
        let server = |server| {
            self.read_server
                .get_or_create(&ServerLabels { server })
                .clone()
        };
        ReadRouteMetrics {
            fallbacks: self.read_fallbacks.clone(),
            on_primary: server("primary"),
            on_standby: server("standby"),
        }
    }

    /// The counters the store counts serving's reads on.
    pub(crate) fn serving_reads(&self) -> ServingReads {
        let counter = |read| {
            self.database_reads
                .get_or_create(&ReadLabels { read })
                .clone()
        };
        ServingReads {
            summaries: counter("summaries"),
            sites: counter("sites"),
            pages: counter("pages"),
        }
    }

    /// Counts a request. Each thread keeps the counters it used last:
    /// finding one in the family hashes its labels and takes a lock, which
    /// every request paid.
    pub(crate) fn request(&self, route: &'static str, status: u16) {
        thread_local! {
            static RECENT: RefCell<Vec<KeptCounter>> = const { RefCell::new(Vec::new()) };
        }
        let key = (self.id, route, status);
        RECENT.with_borrow_mut(|recent| {
            if let Some((_, counter)) = recent.iter().find(|(kept, _)| *kept == key) {
                counter.inc();
                return;
            }
            let counter = self
                .requests
                .get_or_create(&RequestLabels { route, status })
                .clone();
            counter.inc();
            if recent.len() >= RECENT_REQUEST_COUNTERS {
                recent.remove(0);
            }
            recent.push((key, counter));
        });
    }

    pub(crate) fn body_bytes(&self, route: &'static str, bytes: usize) {
        self.body_bytes
            .get_or_create(&RouteLabels { route })
            .inc_by(bytes as u64);
    }

    pub(crate) fn page_built(&self, took: Duration, rows: u64, left_out: u64) {
        self.page_build.observe(took.as_secs_f64());
        self.rows_read.inc_by(rows);
        self.rows_left_out.inc_by(left_out);
    }

    /// A compressed page was answered, its bytes from `source` (a
    /// [`Source`](crate::pages::cache::Source)'s label).
    pub(crate) fn page_served(&self, source: &'static str) {
        self.pages_served
            .get_or_create(&SourceLabels { source })
            .inc();
    }

    /// A connection was accepted into a tier.
    pub(crate) fn connection_opened(&self, overflow: bool) {
        self.connections_open.get_or_create(&tier(overflow)).inc();
    }

    /// A connection of a tier has ended.
    pub(crate) fn connection_ended(&self, overflow: bool) {
        self.connections_open.get_or_create(&tier(overflow)).dec();
    }

    /// A connection was closed, for `reason` (a close reason's label).
    pub(crate) fn connection_closed(&self, reason: &'static str) {
        self.connections_closed
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// Bytes response bodies hold now.
    pub(crate) fn response_memory(&self, bytes: u64) {
        self.response_memory_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// A request answered `503` to protect the service.
    pub(crate) fn response_refused(&self, reason: &'static str) {
        self.responses_refused
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// An IndexNow POST of `urls` URLs for `site` was made.
    pub(crate) fn indexnow_sent(&self, site: &str, urls: usize) {
        let site = site_labels(site);
        self.indexnow_batches_sent.get_or_create(&site).inc();
        self.indexnow_urls_sent
            .get_or_create(&site)
            .inc_by(urls as u64);
    }

    /// The endpoint accepted a POST of `urls` URLs.
    pub(crate) fn indexnow_accepted(&self, site: &str, urls: usize) {
        let site = site_labels(site);
        self.indexnow_batches_accepted.get_or_create(&site).inc();
        self.indexnow_urls_accepted
            .get_or_create(&site)
            .inc_by(urls as u64);
    }

    /// The endpoint answered a POST with `status` (`None`: no answer).
    pub(crate) fn indexnow_refused(&self, site: &str, status: Option<u16>) {
        self.indexnow_batches_refused
            .get_or_create(&site_status(site, status))
            .inc();
    }

    /// What `site` has not delivered yet: feed entries (`None`: not counted
    /// this time), and the age of the oldest.
    pub(crate) fn indexnow_backlog(&self, site: &str, changes: Option<i64>, age: Duration) {
        let site = site_labels(site);
        if let Some(changes) = changes {
            self.indexnow_backlog_changes
                .get_or_create(&site)
                .set(changes);
        }
        self.indexnow_backlog_age_seconds
            .get_or_create(&site)
            .set(i64::try_from(age.as_secs()).unwrap_or(i64::MAX));
    }

    /// A submission of `site`'s index was answered `status` (`None`: no
    /// answer).
    pub(crate) fn submission(&self, site: &str, status: Option<u16>) {
        self.submissions
            .get_or_create(&site_status(site, status))
            .inc();
    }

    /// `fetches` fetches of `site`'s sitemap files by `crawler`, answered
    /// `status`.
    pub(crate) fn crawler_fetches(&self, site: &str, crawler: Crawler, status: u16, fetches: u64) {
        self.crawler_fetches
            .get_or_create(&CrawlerFetchLabels {
                site: site.to_owned(),
                crawler: crawler.name(),
                verified: if crawler.is_verified() {
                    "true"
                } else {
                    "false"
                },
                status,
            })
            .inc_by(fetches);
    }

    pub(crate) fn crawler_fetch_dropped(&self) {
        self.crawler_fetches_dropped.inc();
    }

    pub(crate) fn access_log_line_dropped(&self) {
        self.access_log_lines_dropped.inc();
    }

    /// The metrics in text form, with `gauges` as read now.
    pub(crate) fn render(&self, gauges: Gauges) -> String {
        self.page_cache_bytes
            .set(i64::try_from(gauges.page_cache_bytes).unwrap_or(i64::MAX));
        self.pool
            .get_or_create(&PoolLabels { state: "idle" })
            .set(gauges.pool_idle);
        self.pool
            .get_or_create(&PoolLabels { state: "in_use" })
            .set(gauges.pool_size - gauges.pool_idle);
        for (site, count) in gauges.skipped_rows.into_iter().flatten() {
            self.skipped_rows
                .get_or_create(&SiteLabels { site })
                .set(count);
        }
        if let Some(counts) = gauges.lastmods_in_future {
            // A site whose rows were all written again drops out.
            self.lastmods_in_future.clear();
            for (site, count) in counts {
                self.lastmods_in_future
                    .get_or_create(&SiteLabels { site })
                    .set(count);
            }
        }
        if let Some(counts) = gauges.robots_disallowed {
            self.robots_disallowed.clear();
            for (site, listed, count) in counts {
                let listed = if listed { "true" } else { "false" };
                self.robots_disallowed
                    .get_or_create(&RobotsLabels { site, listed })
                    .set(count);
            }
        }
        if let Some(counts) = gauges.audit_urls {
            self.audit_urls.clear();
            for (site, finding, count) in counts {
                self.audit_urls
                    .get_or_create(&FindingLabels { site, finding })
                    .set(count);
            }
        }
        if let Some(problems) = gauges.hreflang_cluster_problems {
            self.hreflang_cluster_problems.set(problems);
        }
        if let Some(crawlers) = gauges.verified_crawlers {
            self.crawler_last_fetch.clear();
            self.crawler_stale_version_age.clear();
            for held in crawlers {
                let labels = CrawlerLabels {
                    site: held.site,
                    crawler: held.crawler,
                };
                self.crawler_last_fetch
                    .get_or_create(&labels)
                    .set(held.last_fetch.unix_timestamp());
                self.crawler_stale_version_age
                    .get_or_create(&labels)
                    .set(held.stale_version_age);
            }
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String");
        text
    }
}

/// What the metrics read from elsewhere when scraped.
#[derive(Debug, Default)]
pub(crate) struct Gauges {
    pub(crate) page_cache_bytes: u64,
    pub(crate) pool_size: i64,
    pub(crate) pool_idle: i64,
    /// Rows left out per site; `None` keeps them as last read (the database
    /// did not answer in time).
    pub(crate) skipped_rows: Option<Vec<(String, i64)>>,
    /// Rows served with a corrected lastmod per site; `None` as for
    /// `skipped_rows`.
    pub(crate) lastmods_in_future: Option<Vec<(String, i64)>>,
    /// Rows robots.txt disallows per site and whether they are listed;
    /// `None` as for `skipped_rows`.
    pub(crate) robots_disallowed: Option<Vec<(String, bool, i64)>>,
    /// Audited URLs per site and finding; `None` as for `skipped_rows`.
    pub(crate) audit_urls: Option<Vec<(String, String, i64)>>,
    /// hreflang clusters with a problem; `None` as for `skipped_rows`.
    pub(crate) hreflang_cluster_problems: Option<i64>,
    /// What each verified crawler holds of each site; `None` as for
    /// `skipped_rows`.
    pub(crate) verified_crawlers: Option<Vec<CrawlerHeld>>,
}

/// A verified crawler's fetches of one site, as the ledger holds them.
#[derive(Debug)]
pub(crate) struct CrawlerHeld {
    pub(crate) site: String,
    pub(crate) crawler: &'static str,
    pub(crate) last_fetch: time::OffsetDateTime,
    /// The age in seconds of the oldest version it last took of a file
    /// replaced since (0: none).
    pub(crate) stale_version_age: i64,
}

fn site_labels(site: &str) -> SiteLabels {
    SiteLabels {
        site: site.to_owned(),
    }
}

fn site_status(site: &str, status: Option<u16>) -> SiteStatusLabels {
    SiteStatusLabels {
        site: site.to_owned(),
        status: status.map_or_else(|| "error".to_owned(), |status| status.to_string()),
    }
}

fn tier(overflow: bool) -> TierLabels {
    TierLabels {
        tier: if overflow { "overflow" } else { "regular" },
    }
}

/// Route templates: the one set of labels that logs and metrics both use.
pub(crate) mod routes {
    pub(crate) const INDEX: &str = "/sitemap_index.xml";
    pub(crate) const INDEX_GZ: &str = "/sitemap_index.xml.gz";
    pub(crate) const PAGE_GZ: &str = "/sitemap-{n}.xml.gz";
    pub(crate) const PAGE_XML: &str = "/sitemap-{n}.xml";
    pub(crate) const NEWS_GZ: &str = "/sitemap_news.xml.gz";
    pub(crate) const NEWS_XML: &str = "/sitemap_news.xml";
    pub(crate) const ROBOTS: &str = "/robots.txt";
    pub(crate) const STYLESHEET: &str = "/sitemap.xsl";
    pub(crate) const HTML_VIEW: &str = "/sitemaps.html";
    pub(crate) const INDEXNOW_KEY: &str = "/{key}.txt";
}

/// The route template a request path belongs to, as a label: a handful of
/// values, never the raw path.
pub(crate) fn route_of(path: &str) -> &'static str {
    // By bytes: a `str` search for one character costs every request more.
    let file = match path.bytes().rposition(|b| b == b'/') {
        Some(slash) => &path[slash + 1..],
        None => path,
    };
    match path {
        "/healthz" => "/healthz",
        "/readyz" => "/readyz",
        "/metrics" => "/metrics",
        routes::ROBOTS => routes::ROBOTS,
        _ if path.starts_with("/api/v1/") => "/api/v1",
        _ if file == "sitemap.xsl" => routes::STYLESHEET,
        _ if file == "sitemaps.html" => routes::HTML_VIEW,
        _ if file.ends_with(".txt") => routes::INDEXNOW_KEY,
        _ if file.starts_with("sitemap_index") && file.ends_with(".xml") => routes::INDEX,
        _ if file.starts_with("sitemap_index") && file.ends_with(".xml.gz") => routes::INDEX_GZ,
        _ if file == "sitemap.xml" => routes::INDEX,
        _ if file == "sitemap.xml.gz" => routes::INDEX_GZ,
        _ if file.starts_with("sitemap_news") && file.ends_with(".xml") => routes::NEWS_XML,
        _ if file.starts_with("sitemap_news") && file.ends_with(".xml.gz") => routes::NEWS_GZ,
        _ if file.starts_with("sitemap-") && file.ends_with(".xml.gz") => routes::PAGE_GZ,
        _ if file.starts_with("sitemap-") && file.ends_with(".xml") => routes::PAGE_XML,
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::{Metrics, RECENT_REQUEST_COUNTERS, RequestLabels, route_of};

    #[test]
    fn requests_are_counted_per_instance_past_the_counters_a_thread_keeps() {
        let (first, second) = (Metrics::default(), Metrics::default());
        let count = |metrics: &Metrics, status| {
            metrics
                .requests
                .get_or_create(&RequestLabels {
                    route: "/sitemap-N.xml.gz",
                    status,
                })
                .get()
        };
        let statuses = 200..200 + 2 * RECENT_REQUEST_COUNTERS as u16;
        for _ in 0..3 {
            for status in statuses.clone() {
                first.request("/sitemap-N.xml.gz", status);
            }
        }
        second.request("/sitemap-N.xml.gz", 200);
        for status in statuses {
            assert_eq!(count(&first, status), 3, "status {status}");
        }
        assert_eq!(count(&second, 200), 1);
        assert_eq!(count(&second, 201), 0);
    }

    #[test]
    fn paths_map_to_few_labels() {
        assert_eq!(route_of("/shop/sitemap_index.xml"), "/sitemap_index.xml");
        assert_eq!(route_of("/sitemap.xml"), "/sitemap_index.xml");
        assert_eq!(route_of("/sitemap-blog-3.xml.gz"), "/sitemap-{n}.xml.gz");
        assert_eq!(route_of("/sitemap-3.xml"), "/sitemap-{n}.xml");
        assert_eq!(route_of("/sitemap_news-2.xml.gz"), "/sitemap_news.xml.gz");
        assert_eq!(route_of("/blog/sitemap_news.xml"), "/sitemap_news.xml");
        assert_eq!(route_of("/0123abcd-key.txt"), "/{key}.txt");
        assert_eq!(route_of("/wp-admin/../etc/passwd"), "other");
    }
}
