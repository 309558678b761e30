//! All SQL: connecting, migrating, applying configuration, folding changes
//! into pages, and the reads the sitemaps are made of.
//!
//! Applications write `sitemap_urls` with plain SQL and take no lock beyond
//! their own rows; folds (see [`fold`]) place what they committed into pages
//! and keep one summary per page. So every read here is either O(pages) (the
//! index) or one ordered index range of a page's placements.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use prometheus_client::metrics::counter::Counter;
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool, Postgres};
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::config::Settings;
use crate::site::Site;
use crate::sitemap::name::NEWS_SECTION;

mod audits;
mod binary_copy;
mod browse;
mod crawlers;
mod fold;
mod import;
pub(crate) mod moves;
mod numbering;
mod push;
mod reads;
mod records;
mod removals;
mod robots;
mod servers;
mod sites;
mod turn;

pub(crate) use audits::{AuditRecord, DueRow};
pub(crate) use browse::{BrowsedUrl, Located, NewsFile, SectionPage, SkipGroup};
pub(crate) use crawlers::{FileFetches, HourKey, LedgerRow};
pub(crate) use fold::FIRST_BATCH_ROWS;
pub use fold::{FoldBatch, Retention, Turn, fold_in};
pub(crate) use import::{Filled, ImportCounts};
pub use moves::ServedDigest;
pub(crate) use push::ChangeBatch;
pub(crate) use reads::ReadRouteMetrics;
use reads::Reads;
pub(crate) use records::{ClusterStats, SiteStats, StoredRecord};
pub use removals::RemovalsCursor;
pub(crate) use servers::Servers;
pub(crate) use sites::SiteWriteError;
pub use sites::{StoredSite, Written};

/// A database failure. Before a response's first byte it becomes a `503`.
///
/// The message carries the cause's own text (so one log field says it all);
/// the cause is not also chained as a source, which would print it twice.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("database: {0}")]
    Database(sqlx::Error),
    #[error("migrating the database: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// The database did not answer in time: what a network partition looks
    /// like, where packets are dropped rather than connections refused.
    #[error("database: no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The configuration file's sites could not be written as they are.
    #[error("configuration: {0}")]
    Configuration(String),
    /// A read that failed for several callers waiting on it, as its text.
    #[error("{0}")]
    Shared(String),
    /// A serving read that failed, with the server that failed it.
    #[error("{server}: {error}")]
    OnServer { server: String, error: Box<Error> },
    /// A site's move found the cells holding different rows.
    #[error("moving a site: {0}")]
    Move(String),
    #[error("reading a fold's rows: {0}")]
    FoldRows(#[from] binary_copy::FormatError),
    #[error(
        "migrating the database: it has applied migration {newest_applied} but not the older \
         {missing} ({description}); applying it now would build another schema than a fresh \
         database gets, so nothing was applied. A migration's version must be above every \
         version already released (migrations/README.md)"
    )]
    MigrationOutOfOrder {
        missing: i64,
        description: String,
        newest_applied: i64,
    },
}

impl Error {
    /// Whether the server could not be reached at all (refused, unknown
    /// host, no answer), as opposed to refusing what was asked.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            Error::Database(sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut)
        )
    }
}

impl Error {
    /// Whether a write met a row whose key exists.
    pub(crate) fn is_unique_violation(&self) -> bool {
        matches!(self, Error::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
    }
}

impl Error {
    /// The refusal of a write to a site moving between cells (SQLSTATE
    /// SD001, raised by `sitemap_urls_refuse_moving_sites`), as the
    /// database words it.
    pub(crate) fn refused_by_a_move(&self) -> Option<String> {
        match self {
            Error::Database(sqlx::Error::Database(error))
                if error.code().as_deref() == Some("SD001") =>
            {
                Some(error.message().to_owned())
            }
            _ => None,
        }
    }
}

impl Error {
    /// This error, naming the server of `pool` that failed the read (its
    /// host, port and role), so a log line never blames the other one.
    fn on(self, pool: &PgPool, standby: bool) -> Error {
        let options = pool.connect_options();
        let role = if standby { "standby" } else { "primary" };
        Error::OnServer {
            server: format!(
                "the {role} at {}:{}",
                options.get_host(),
                options.get_port()
            ),
            error: Box::new(self),
        }
    }
}

impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        Error::Database(error)
    }
}

impl Error {
    /// Whether the server failed the statement, not the statement itself:
    /// another server may answer it.
    fn is_the_servers(&self) -> bool {
        match self {
            Error::Timeout(_) => true,
            Error::Database(sqlx::Error::Database(error)) => error.code().is_some_and(|code| {
                // serialization_failure (a recovery conflict on a standby),
                // operator intervention (shutdown) and connection exceptions
                code == "40001" || code.starts_with("57P") || code.starts_with("08")
            }),
            Error::Database(
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed,
            ) => true,
            _ => false,
        }
    }
}

impl From<sqlx::migrate::MigrateError> for Error {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        Error::Migrate(error)
    }
}

/// The first of `known` migrations that the database lacks although it has
/// applied a newer one: sqlx would apply it after those, out of the order a
/// fresh database gets.
fn out_of_order<'a>(
    applied: &[i64],
    known: impl IntoIterator<Item = (i64, &'a str)>,
) -> Option<Error> {
    let newest_applied = *applied.iter().max()?;
    known
        .into_iter()
        .find(|(version, _)| *version < newest_applied && !applied.contains(version))
        .map(|(missing, description)| Error::MigrationOutOfOrder {
            missing,
            description: description.to_owned(),
            newest_applied,
        })
}

/// Handle to the database; cheap to clone (it shares its pools).
///
/// Writes, migrations and configuration go to the primary; the sitemaps'
/// reads (summaries and rows) go to `read`, which is the primary too unless
/// a read replica is configured. A page's summary and rows are read from the
/// same server, so a replica that lags serves an older page whole, with the
/// validators of that older page, never a mix.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    read: Reads,
    /// The servers `database_url` names, when it names several.
    primary_servers: Option<Servers>,
    /// The servers `database_read_url` names, when it names several.
    read_servers: Option<Servers>,
    /// How long a read for serving waits for the database's next answer.
    read_timeout: Duration,
    /// Where the news sitemap's window ends: now, as the service has it.
    clock: Clock,
    /// Most changed rows one fold reads (`fold_batch_rows`).
    fold_batch_rows: u64,
    /// Most bytes one fold holds of the rows it places
    /// (`fold_memory_bytes`).
    fold_memory_bytes: u64,
    /// Where this process's last fold took removals from.
    removals_cursor: Arc<RemovalsCursor>,
    /// The oldest transaction's horizon when the feed's last vacuum left
    /// it as due as before (see [`Store::reclaim_feed_space`]).
    feed_vacuum_held_at: Arc<Mutex<Option<String>>>,
    serving_reads: ServingReads,
}

/// The reads serving makes, counted for the metrics: each is one the
/// caches in front of it did not spare.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServingReads {
    /// A site's page summaries.
    pub(crate) summaries: Counter,
    /// The sites of a host, a name or a token.
    pub(crate) sites: Counter,
    /// A page's rows, or a news sitemap's.
    pub(crate) pages: Counter,
}

/// [`Store::read_timeout`] until configured.
const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a count that `/metrics` reports may run in PostgreSQL.
pub(crate) const COUNT_TIMEOUT: Duration = Duration::from_secs(2);

/// [`Store::fold_batch_rows`] until configured: `fold_batch_rows`' default.
const DEFAULT_FOLD_BATCH_ROWS: u64 = 1_000_000;

/// [`Store::fold_memory_bytes`] until configured: `fold_memory_bytes`'
/// default.
const DEFAULT_FOLD_MEMORY_BYTES: u64 = 48 << 20;

/// A page of a site as the summaries have it: the index lists the non-empty
/// ones, and the newest change among all of them versions the index.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct IndexEntry {
    pub(crate) section: String,
    pub(crate) page: i32,
    pub(crate) url_count: i32,
    pub(crate) lastmod: OffsetDateTime,
    /// Whether the index lists it: a page while it holds a URL, the first
    /// news sitemap while its site has news records, even when empty.
    pub(crate) listed: bool,
}

/// A page that changed, as the warm-up rebuilds it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct ChangedPage {
    pub(crate) site: String,
    pub(crate) section: String,
    pub(crate) page: i32,
    pub(crate) lastmod: OffsetDateTime,
}

/// One row of a page, as the writer needs it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct UrlRow {
    pub(crate) id: i64,
    pub(crate) loc: String,
    pub(crate) lastmod: Option<OffsetDateTime>,
    pub(crate) changefreq: Option<String>,
    pub(crate) priority: Option<f32>,
    pub(crate) updated_at: OffsetDateTime,
    /// The extensions as stored (JSON), parsed by the renderer.
    pub(crate) images: Option<String>,
    pub(crate) videos: Option<String>,
    /// The links of the cluster the row was folded into, if it is served.
    pub(crate) hreflangs: Option<Vec<String>>,
    pub(crate) hrefs: Option<Vec<String>>,
    /// Bytes the row's page reserved for its entry.
    pub(crate) reserved: i32,
}

/// One article of a news sitemap.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct NewsRow {
    pub(crate) id: i64,
    pub(crate) loc: String,
    /// The `news` column as stored (JSON).
    pub(crate) news: String,
}

/// Which extensions a page's entries carry, as its summary counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct PageExtensions {
    pub(crate) alternates: bool,
    pub(crate) images: bool,
    pub(crate) videos: bool,
}

/// A row left out of every sitemap, with the reason the schema recorded.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SkippedRow {
    pub(crate) id: i64,
    pub(crate) site: String,
    pub(crate) section: String,
    pub loc: String,
    pub reason: String,
}

/// What `demo` writes: synthetic rows under a site's base URL.
#[derive(Debug, Clone)]
pub(crate) struct DemoBatch<'a> {
    pub(crate) site: &'a Site,
    /// Sections to spread rows over, round robin; `""` is the default section.
    pub(crate) sections: &'a [String],
    /// Numbers the rows' URLs; consecutive batches continue one another.
    pub(crate) first: i64,
    pub(crate) count: i64,
}

/// What a process's statements are for, which decides what is worth a
/// warning in its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// The service: a statement slower than a second is news (sqlx warns).
    Serving,
    /// `import` and `demo`: their statements move millions of rows and are
    /// slow by design, so sqlx's slow-statement warning stays off.
    Bulk,
}

impl Workload {
    fn apply(self, options: PgConnectOptions) -> PgConnectOptions {
        match self {
            Workload::Serving => options,
            Workload::Bulk => options.log_slow_statements(log::LevelFilter::Off, Duration::ZERO),
        }
    }
}

impl Store {
    /// Connects to the configured database, creating it first if missing.
    pub async fn connect(settings: &Settings, workload: Workload) -> Result<Store, Error> {
        let url = settings.database_url.expose();
        let acquire_timeout = Duration::from_millis(settings.db_acquire_timeout_ms);
        let servers = Servers::parse(url)?.map(|options| workload.apply(options));
        if servers.several() {
            let options = servers.find(acquire_timeout).await?;
            let pool = pool_options(settings).connect_with(options).await?;
            servers.moves(&pool);
            return Self::with_reads(Store::new(pool, Some(servers)), settings, workload);
        }
        let options = servers.first();
        // Asked of the server only when connecting fails: every connection
        // costs a handshake (about 90 ms here with TLS, two of its writes
        // each waiting for a delayed ACK).
        let pool = match open_pool(settings, options.clone()).await {
            Err(sqlx::Error::Database(error))
                if error.code().as_deref() == Some(NO_SUCH_DATABASE) =>
            {
                tracing::info!(database_url = %settings.database_url.redacted(), "creating database");
                match Postgres::create_database(url).await {
                    Err(sqlx::Error::Database(error))
                        if error.code().as_deref() == Some(DATABASE_EXISTS) => {}
                    created => created?,
                }
                open_pool(settings, options).await?
            }
            connected => connected?,
        };
        Self::with_reads(Store::new(pool, None), settings, workload)
    }

    /// `store` with its sitemaps' reads on `database_read_url`'s server
    /// once usable, on the primary until then and without one. Of several
    /// servers, its pool follows one that fits, as the primary's does.
    fn with_reads(store: Store, settings: &Settings, workload: Workload) -> Result<Store, Error> {
        let Some(read_url) = &settings.database_read_url else {
            return Ok(store);
        };
        let servers = Servers::parse(read_url.expose())?.map(|options| workload.apply(options));
        let standby = pool_options(settings).connect_lazy_with(servers.first());
        servers.moves(&standby);
        Ok(Store {
            read: Reads::with_standby(store.pool.clone(), standby, read_url.redacted()),
            read_servers: servers.several().then_some(servers),
            ..store
        })
    }

    fn new(pool: PgPool, primary_servers: Option<Servers>) -> Store {
        Store {
            read: Reads::primary_only(pool.clone()),
            pool,
            primary_servers,
            read_servers: None,
            read_timeout: DEFAULT_READ_TIMEOUT,
            clock: Clock::system(),
            fold_batch_rows: DEFAULT_FOLD_BATCH_ROWS,
            fold_memory_bytes: DEFAULT_FOLD_MEMORY_BYTES,
            removals_cursor: Arc::default(),
            feed_vacuum_held_at: Arc::default(),
            serving_reads: ServingReads::default(),
        }
    }

    /// The servers `database_url` and `database_read_url` name, where
    /// they name several: the service's pools follow the one that fits.
    pub(crate) fn followed_servers(&self) -> impl Iterator<Item = &Servers> {
        self.primary_servers.iter().chain(&self.read_servers)
    }

    /// One pool for reads and writes.
    pub fn from_pool(pool: PgPool) -> Store {
        Store::new(pool, None)
    }

    /// Ends the news sitemap's window at `clock`'s now rather than the
    /// system's.
    pub fn with_clock(self, clock: Clock) -> Store {
        Store { clock, ..self }
    }

    /// Bounds how long each read made for serving (a health check, the
    /// summaries, a page's next row) waits for the database: a database that
    /// stops answering without closing its connections then gets `503`s
    /// rather than requests that hang.
    pub(crate) fn with_read_timeout(self, read_timeout: Duration) -> Store {
        Store {
            read_timeout,
            ..self
        }
    }

    /// Has each fold read at most `rows` changed rows and commit: a bulk
    /// load shows page by page and its fold's working space stays bounded.
    pub fn with_fold_batch_rows(self, rows: u64) -> Store {
        Store {
            fold_batch_rows: rows.max(1),
            ..self
        }
    }

    /// Has each fold hold at most `bytes` of the rows it places (their
    /// ids, sizes and locs, numbered in memory): one that would hold more
    /// folds fewer rows.
    pub fn with_fold_memory_bytes(self, bytes: u64) -> Store {
        Store {
            fold_memory_bytes: bytes.max(1),
            ..self
        }
    }

    /// Counts the reads serving makes on `serving_reads` from now on.
    pub(crate) fn with_serving_reads(self, serving_reads: ServingReads) -> Store {
        Store {
            serving_reads,
            ..self
        }
    }

    /// Sends the sitemaps' reads to `read` (a standby) from now on, once
    /// the service's watcher finds it usable ([`Store::reads_on_standby`]).
    pub fn with_read_pool(self, read: PgPool) -> Store {
        let options = read.connect_options();
        let name = format!(
            "{}/{}",
            servers::name(&options),
            options.get_database().unwrap_or_default()
        );
        Store {
            read: Reads::with_standby(self.pool.clone(), read, name),
            ..self
        }
    }

    /// Notes a write of this process: reads go to the primary until the
    /// standby has replayed it.
    pub(crate) async fn note_write(&self) -> Result<(), Error> {
        Ok(self.read.note_write().await?)
    }

    /// Whether the sitemaps' reads go to the standby now: it answers and
    /// keeps up.
    pub fn reads_on_standby(&self) -> bool {
        self.read.on_standby()
    }

    /// Whether the next read goes to the standby: it is usable, and has
    /// replayed this process's last write.
    pub fn reads_go_to_standby(&self) -> bool {
        self.read.pool_for_read().1
    }

    /// Where the sitemaps' reads go, for the watcher to move them.
    pub(crate) fn reads(&self) -> &Reads {
        &self.read
    }

    /// The same database through a pool of its own, of `connections` at
    /// most, for background work that holds a connection while it waits on
    /// something else (a search engine's answer): serving and writes never
    /// wait for it.
    pub(crate) fn with_own_pool(&self, connections: u32) -> Store {
        let options = (*self.pool.connect_options()).clone();
        let pool = PgPoolOptions::new()
            .max_connections(connections)
            .connect_lazy_with(options);
        if let Some(servers) = &self.primary_servers {
            servers.moves(&pool);
        }
        Store {
            read: Reads::primary_only(pool.clone()),
            pool,
            ..self.clone()
        }
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies the migrations in `migrations/`, built into the binary, after
    /// making sure none of those it lacks sorts before one it has applied.
    pub async fn migrate(&self) -> Result<(), Error> {
        let migrator = sqlx::migrate!();
        let applied: Vec<i64> = match sqlx::query_scalar::<_, Option<String>>(
            "SELECT to_regclass('_sqlx_migrations')::text",
        )
        .fetch_one(&self.pool)
        .await?
        {
            Some(_) => {
                sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                    .fetch_all(&self.pool)
                    .await?
            }
            None => Vec::new(),
        };
        let known = migrator
            .iter()
            .map(|migration| (migration.version, migration.description.as_ref()));
        if let Some(error) = out_of_order(&applied, known) {
            return Err(error);
        }
        migrator.run(&self.pool).await?;
        Ok(())
    }

    /// Writes the page limits into the schema, which takes off their pages
    /// only the rows they no longer admit (the next fold places them
    /// again). Takes turns with folds, and with replicas starting at once.
    pub(crate) async fn configure_limits(
        &self,
        max_urls: u32,
        entry_budget: u64,
    ) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        turn::lock_fold_state(&mut tx).await?;
        sqlx::query("SELECT sitemap_configure_limits($1, $2)")
            .bind(i32::try_from(max_urls).unwrap_or(i32::MAX))
            .bind(i64::try_from(entry_budget).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether the primary answers: reads go there when the standby does
    /// not.
    pub(crate) async fn ping(&self) -> Result<(), Error> {
        self.in_time(sqlx::query("SELECT 1").execute(&self.pool))
            .await?;
        Ok(())
    }

    /// Every page of a site, emptied ones included, in index order: its
    /// sections' pages, then its news sitemaps.
    pub(crate) async fn index(&self, site: &str) -> Result<Vec<IndexEntry>, Error> {
        self.serving_reads.summaries.inc();
        self.serving_read(|pool| {
            sqlx::query_as(
                "SELECT * FROM (
                     SELECT section, page, url_count, lastmod, url_count > 0 AS listed
                     FROM sitemap_pages WHERE site = $1
                     UNION ALL
                     SELECT $2, file, url_count, lastmod, listed
                     FROM sitemap_news_files WHERE site = $1
                 ) e
                 ORDER BY e.section = $2, e.section, e.page",
            )
            .bind(site)
            .bind(NEWS_SECTION)
            .fetch_all(pool)
        })
        .await
    }

    /// When the newest change to any page was.
    pub(crate) async fn newest_page_change(&self) -> Result<Option<OffsetDateTime>, Error> {
        self.serving_read(|pool| {
            sqlx::query_scalar(
                "SELECT greatest((SELECT max(lastmod) FROM sitemap_pages),
                                 (SELECT max(lastmod) FROM sitemap_news_files))",
            )
            .fetch_one(pool)
        })
        .await
    }

    /// Up to `limit` pages that an index lists, of sites that exist,
    /// changed after `after`, newest first.
    pub(crate) async fn pages_changed_after(
        &self,
        after: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<ChangedPage>, Error> {
        self.serving_read(|pool| {
            sqlx::query_as(
                "SELECT * FROM (
                     (SELECT site, section, page, lastmod FROM sitemap_pages
                      WHERE lastmod > $1 AND url_count > 0 ORDER BY lastmod DESC LIMIT $2)
                     UNION ALL
                     (SELECT site, $3, file, lastmod FROM sitemap_news_files
                      WHERE lastmod > $1 AND listed ORDER BY lastmod DESC LIMIT $2)
                 ) c
                 WHERE EXISTS (SELECT 1 FROM sitemap_sites s WHERE s.site = c.site)
                 ORDER BY lastmod DESC LIMIT $2",
            )
            .bind(after)
            .bind(limit)
            .bind(NEWS_SECTION)
            .fetch_all(pool)
        })
        .await
    }

    /// The rows of one page in a stable order, streamed as PostgreSQL sends
    /// them; the connection returns to the pool when the stream ends or is
    /// dropped. A row that takes longer than the read timeout ends it with
    /// [`Error::Timeout`]. When the standby fails the read part way (it
    /// stopped answering, or cancelled the query for a recovery conflict),
    /// the rows after the last one it sent are read on the primary, once:
    /// the page is built before any of it is sent, and each row comes once.
    pub(crate) fn page_rows<'a>(
        &'a self,
        site: &'a str,
        section: &'a str,
        page: i32,
    ) -> impl Stream<Item = Result<UrlRow, Error>> + Send + 'a {
        self.serving_reads.pages.inc();
        let read = move |pool: &'a PgPool, after_id: i64| {
            // A row whose site, section or loc changed since it was placed
            // is another URL: it leaves this page now, and the next fold
            // places it. A lastmod in the future is served as the moment
            // its fold placed it.
            sqlx::query_as(
                "SELECT u.id, u.loc,
                        sitemap_served_lastmod(u.lastmod, c.written_lastmod, c.served_lastmod)
                            AS lastmod,
                        u.changefreq, u.priority, u.updated_at,
                        u.images::text AS images, u.videos::text AS videos,
                        k.hreflangs, k.hrefs, p.bytes AS reserved
                 FROM sitemap_placed p JOIN sitemap_urls u ON u.id = p.id
                 LEFT JOIN sitemap_clusters k ON k.cluster = p.cluster AND k.problem IS NULL
                 LEFT JOIN sitemap_lastmod_clamps c ON c.id = u.id
                 WHERE p.site = $1 AND p.section = $2 AND p.page = $3 AND p.id > $4
                   AND u.site = p.site AND u.section = p.section
                   AND sitemap_loc_hash(u.loc) = p.loc_hash
                 ORDER BY p.id",
            )
            .bind(site)
            .bind(section)
            .bind(page)
            .bind(after_id)
            .fetch(pool)
        };
        let (pool, on_standby) = self.read.pool_for_read();
        struct Reading<'p, S> {
            rows: S,
            pool: &'p PgPool,
            on_standby: bool,
            last_id: i64,
        }
        let reading = Reading {
            rows: read(pool, i64::MIN),
            pool,
            on_standby,
            last_id: i64::MIN,
        };
        futures_util::stream::unfold(Some(reading), move |reading| async move {
            let mut reading = reading?;
            loop {
                let error = match tokio::time::timeout(self.read_timeout, reading.rows.next()).await
                {
                    Ok(Some(Ok(row))) => {
                        let row: UrlRow = row;
                        reading.last_id = row.id;
                        return Some((Ok(row), Some(reading)));
                    }
                    Ok(Some(Err(error))) => Error::from(error),
                    Ok(None) => return None,
                    Err(_) => Error::Timeout(self.read_timeout),
                };
                if !(reading.on_standby && error.is_the_servers()) {
                    return Some((Err(error.on(reading.pool, reading.on_standby)), None));
                }
                tracing::debug!(%error, "a page's read failed on the standby: the rest on the primary");
                reading.pool = self.read.primary();
                reading.rows = read(reading.pool, reading.last_id);
                reading.on_standby = false;
            }
        })
    }

    /// Which extensions the entries of a page carry (none, for a page that
    /// does not exist).
    pub(crate) async fn page_extensions(
        &self,
        site: &str,
        section: &str,
        page: i32,
    ) -> Result<PageExtensions, Error> {
        let found = self
            .serving_read(|pool| {
                sqlx::query_as(
                "SELECT alternates > 0 AS alternates, images > 0 AS images, videos > 0 AS videos
                 FROM sitemap_pages WHERE site = $1 AND section = $2 AND page = $3",
            )
            .bind(site)
            .bind(section)
            .bind(page)
            .fetch_optional(pool)
            })
            .await?;
        Ok(found.unwrap_or_default())
    }

    /// The articles of a site's `file`-th news sitemap, in order, as its
    /// last listing placed them.
    pub(crate) async fn news_rows(&self, site: &str, file: i32) -> Result<Vec<NewsRow>, Error> {
        self.serving_reads.pages.inc();
        self.serving_read(|pool| {
            sqlx::query_as(
                "SELECT u.id, u.loc, u.news::text AS news
                 FROM sitemap_news_windows w
                 CROSS JOIN LATERAL sitemap_news_listing(w.site, w.window_end) a
                 JOIN sitemap_urls u ON u.id = a.id
                 WHERE w.site = $1
                   AND a.n > ($2::bigint - 1) * w.per_file AND a.n <= $2::bigint * w.per_file
                 ORDER BY a.n",
            )
            .bind(site)
            .bind(file)
            .fetch_all(pool)
        })
        .await
    }

    /// A read made for serving, on the reads' server, within the read
    /// timeout. When that is the standby and the read failed there in a way
    /// the primary would not fail (the standby stopped answering, or
    /// cancelled the query for a recovery conflict, SQLSTATE 40001), it is
    /// read once more on the primary: nothing of it was sent yet. The
    /// standby's watcher moves the reads that follow.
    async fn serving_read<'a, T, Fut>(
        &'a self,
        read: impl Fn(&'a PgPool) -> Fut,
    ) -> Result<T, Error>
    where
        Fut: Future<Output = Result<T, sqlx::Error>>,
    {
        let (pool, on_standby) = self.read.pool_for_read();
        match self.in_time(read(pool)).await {
            Err(error) if on_standby && error.is_the_servers() => {
                tracing::debug!(%error, "a read failed on the standby: read on the primary");
                let primary = self.read.primary();
                self.in_time(read(primary))
                    .await
                    .map_err(|error| error.on(primary, false))
            }
            result => result.map_err(|error| error.on(pool, on_standby)),
        }
    }

    /// `read` within the read timeout.
    async fn in_time<T>(
        &self,
        read: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, Error> {
        tokio::time::timeout(self.read_timeout, read)
            .await
            .map_err(|_| Error::Timeout(self.read_timeout))?
            .map_err(Error::from)
    }

    /// Rows left out of the sitemaps that have not been reported yet, marked
    /// reported in the same transaction, so each is logged once by whichever
    /// replica takes it. Takes its turn with folds, which write the same
    /// placements; `None` when `turn` is [`Turn::Skip`] and a fold holds it.
    pub(crate) async fn take_unreported_skips(
        &self,
        limit: i64,
        turn: Turn,
    ) -> Result<Option<Vec<SkippedRow>>, Error> {
        let Some(mut held) = turn::HeldTurn::take(&self.pool, turn).await? else {
            return Ok(None);
        };
        let mut tx = held.begin(false).await?;
        let skipped = sqlx::query_as(
            "UPDATE sitemap_placements p SET skip_logged = true
             FROM (SELECT id FROM sitemap_placements
                   WHERE skip_reason IS NOT NULL AND NOT skip_logged
                   ORDER BY id LIMIT $1) t, sitemap_urls u
             WHERE p.id = t.id AND u.id = p.id
             RETURNING p.id, p.site, p.section, u.loc, concat_ws(': ', p.skip_reason, p.robots_rule) AS reason",
        )
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        held.release().await?;
        Ok(Some(skipped))
    }

    /// How many rows each site has left out of its sitemaps.
    pub async fn skipped_counts(&self) -> Result<Vec<(String, i64)>, Error> {
        self.count(
            "SELECT site, count(*) FROM sitemap_placements WHERE skip_reason IS NOT NULL GROUP BY site",
        )
        .await
    }

    /// Rows whose loc robots.txt disallows, per site and whether they are
    /// listed (the site reports them) or left out.
    pub(crate) async fn robots_disallowed_counts(&self) -> Result<Vec<(String, bool, i64)>, Error> {
        self.count(
            "SELECT site, page IS NOT NULL, count(*) FROM sitemap_placements
             WHERE robots_rule IS NOT NULL GROUP BY 1, 2",
        )
        .await
    }

    /// Audited URLs per site and finding.
    pub(crate) async fn audit_finding_counts(&self) -> Result<Vec<(String, String, i64)>, Error> {
        self.count("SELECT site, finding, urls FROM sitemap_audit_finding_counts")
            .await
    }

    /// Rows served with a corrected lastmod, per site (`lastmod-in-future`),
    /// as of the last fold.
    pub(crate) async fn lastmods_in_future_counts(&self) -> Result<Vec<(String, i64)>, Error> {
        self.count(
            "SELECT site, sum(clamps)::bigint FROM sitemap_lastmod_clamp_counts GROUP BY site",
        )
        .await
    }

    /// How many hreflang clusters are served without links.
    pub(crate) async fn cluster_problems(&self) -> Result<i64, Error> {
        let problems = self
            .count::<(i64,)>("SELECT count(*) FROM sitemap_clusters WHERE problem IS NOT NULL")
            .await?;
        Ok(problems.first().map_or(0, |&(problems,)| problems))
    }

    /// The rows of a count `/metrics` reports, which PostgreSQL cancels
    /// past [`COUNT_TIMEOUT`]: a count over millions of rows can take
    /// longer than a scrape waits, and a query the scrape gave up on would
    /// run on, beside the next scrape's.
    async fn count<T>(&self, sql: &'static str) -> Result<Vec<T>, Error>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT set_config('statement_timeout', $1, true)")
            .bind(format!("{}ms", COUNT_TIMEOUT.as_millis()))
            .execute(&mut *tx)
            .await?;
        let rows = sqlx::query_as(sql).fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// The highest row id so far (0 for an empty table), where demo data
    /// continues numbering from.
    pub(crate) async fn max_row_id(&self) -> Result<i64, Error> {
        Ok(
            sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM sitemap_urls")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Writes one batch of synthetic rows in one statement, generated by the
    /// server itself (no data crosses the wire). Realistic shapes: a path of
    /// two words and a number, lastmod spread over two years, changefreq and
    /// priority on some rows. Returns the rows written.
    pub(crate) async fn seed_demo(&self, batch: &DemoBatch<'_>) -> Result<u64, Error> {
        let done = sqlx::query(
            "INSERT INTO sitemap_urls (site, section, loc, lastmod, changefreq, priority)
             SELECT $1, s.section,
                    $2 || coalesce(nullif(s.section, ''), 'pages') || '/'
                       || w.words[1 + (g * 31) % 40] || '-' || w.words[1 + (g * 17 + 7) % 40] || '-' || g,
                    date_trunc('second', now() - make_interval(secs => ((g * 7919) % 63072000)::double precision)),
                    (ARRAY['daily', 'weekly', 'monthly', NULL])[1 + g % 4],
                    CASE WHEN g % 3 = 0 THEN ((g % 11) / 10.0)::real END
             FROM generate_series($4::bigint, $4::bigint + $5::bigint - 1) AS g
             CROSS JOIN LATERAL (SELECT ($3::text[])[1 + g % cardinality($3::text[])] AS section) s
             CROSS JOIN (SELECT ARRAY[
                 'alpine', 'harbor', 'copper', 'meadow', 'lantern', 'orbit', 'willow', 'granite',
                 'velvet', 'summit', 'river', 'ember', 'falcon', 'prairie', 'cobalt', 'juniper',
                 'canyon', 'saffron', 'tundra', 'marble', 'cedar', 'glacier', 'indigo', 'meteor',
                 'orchid', 'pebble', 'quartz', 'raven', 'sierra', 'thistle', 'umber', 'vista',
                 'wander', 'yarrow', 'zephyr', 'basalt', 'coral', 'dune', 'fjord', 'grove'
             ] AS words) w
             ON CONFLICT (site, loc) DO NOTHING",
        )
        .bind(&batch.site.name)
        .bind(&batch.site.base_url)
        .bind(batch.sections)
        .bind(batch.first)
        .bind(batch.count)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}

/// SQLSTATE `invalid_catalog_name`: the database named does not exist.
const NO_SUCH_DATABASE: &str = "3D000";
/// SQLSTATE `duplicate_database`: another process created it first.
const DATABASE_EXISTS: &str = "42P04";

/// A pool holding two connections, opened at once. Every command starts
/// with queries one after another, and sqlx gives a connection back to
/// its pool only after a round trip of its own: the second query would
/// open a second connection, one handshake after the other.
async fn open_pool(settings: &Settings, options: PgConnectOptions) -> Result<PgPool, sqlx::Error> {
    let pool = pool_options(settings).connect_lazy_with(options);
    let opened = if settings.db_max_connections >= 2 {
        tokio::try_join!(pool.acquire(), pool.acquire())?;
        2
    } else {
        pool.acquire().await?;
        1
    };
    // Back in the pool after their round trips, or given up on.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(100);
    while pool.num_idle() < opened && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(pool)
}

fn pool_options(settings: &Settings) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(settings.db_max_connections)
        .acquire_timeout(Duration::from_millis(settings.db_acquire_timeout_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_read_names_the_server_and_its_role() {
        let standby = PgPoolOptions::new()
            .connect_lazy("postgres://sitemapd@standby.example:5433/sitemapd")
            .expect("a lazy pool");
        let primary = PgPoolOptions::new()
            .connect_lazy("postgres://sitemapd@primary.example/sitemapd")
            .expect("a lazy pool");
        let timeout = || Error::Timeout(Duration::from_millis(10));
        assert_eq!(
            timeout().on(&standby, true).to_string(),
            "the standby at standby.example:5433: database: no answer within 10 ms"
        );
        assert_eq!(
            timeout().on(&primary, false).to_string(),
            "the primary at primary.example:5432: database: no answer within 10 ms"
        );
    }

    fn known() -> Vec<(i64, &'static str)> {
        vec![(1, "schema"), (2, "feed"), (3, "runs")]
    }

    #[test]
    fn a_database_missing_only_newer_migrations_is_in_order() {
        for applied in [&[][..], &[1], &[1, 2], &[1, 2, 3]] {
            assert!(out_of_order(applied, known()).is_none(), "{applied:?}");
        }
    }

    #[test]
    fn a_missing_migration_older_than_an_applied_one_is_named() {
        let error = out_of_order(&[1, 3], known()).expect("refused");
        assert!(matches!(
            error,
            Error::MigrationOutOfOrder {
                missing: 2,
                newest_applied: 3,
                ..
            }
        ));
        let message = error.to_string();
        assert!(
            message.contains("migration 3 but not the older 2 (feed)"),
            "{message}"
        );
    }
}
