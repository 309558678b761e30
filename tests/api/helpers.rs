//! Spawns the real server on a random loopback port over a fresh database,
//! and reads what it serves the way a crawler does: gzip decoded, XML parsed,
//! every document validated against the sitemaps.org schemas.

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use flate2::read::GzDecoder;
use serde::Deserialize;
use sitemapd::App;
use sitemapd::clock::Clock;
use sitemapd::config::{Config, Settings};
use sitemapd::http::HttpState;
use sitemapd::pages::skips;
use sitemapd::store::Store;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub(crate) const BASE_URL: &str = "https://www.example.com/";

pub(crate) struct TestApp {
    pub addr: SocketAddr,
    /// Where `/metrics` listens when `metrics_listen` is set.
    pub metrics_addr: Option<SocketAddr>,
    pub pool: PgPool,
    pub state: HttpState,
    /// Connections past `max_connections` that are still answered once.
    pub overflow_connections: usize,
    pub settings: Settings,
    /// The service's clock: moving it rolls the news window.
    pub clock: Clock,
    client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestApp {
    /// Every site the service has, as records are validated against.
    pub(crate) async fn sites(&self) -> Vec<sitemapd::site::Site> {
        sitemapd::app::all_sites(&self.state.store)
            .await
            .expect("the sites")
    }

    /// Waits (bounded) until the kept summaries are answered from: the
    /// change listener is connected and has heard.
    pub(crate) async fn until_summaries_trusted(&self) {
        for _ in 0..500 {
            if self.state.pages.summaries.trusted() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the change listener was not heard within 5 s");
    }

    /// Waits (bounded) until the sitemaps' reads go to the standby: the
    /// service's watcher has found it answering and keeping up.
    pub(crate) async fn until_reads_on_standby(&self) {
        for _ in 0..1000 {
            if self.state.store.reads_on_standby() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("reads did not go to the standby within 10 s");
    }

    /// The service with its defaults, but serving [`BASE_URL`].
    pub(crate) async fn spawn(pool: PgPool) -> TestApp {
        Self::spawn_with(pool, |_| {}).await
    }

    pub(crate) async fn spawn_with(pool: PgPool, configure: impl FnOnce(&mut Settings)) -> TestApp {
        Self::spawn_on(Store::from_pool(pool.clone()), pool, configure).await
    }

    /// The service over `store` (e.g. one with a read replica); `pool` is
    /// the primary, where tests write.
    pub(crate) async fn spawn_on(
        store: Store,
        pool: PgPool,
        configure: impl FnOnce(&mut Settings),
    ) -> TestApp {
        let mut settings = Settings::defaults();
        settings.base_url = BASE_URL.into();
        // Background rebuilds would make page counts depend on timing; the
        // tests of warm-up turn it on.
        settings.warm_up_interval_ms = 0;
        // Likewise, a write is seen at once only when summaries are read
        // on every request; their tests keep them.
        settings.summary_max_age_ms = 0;
        // The operators' port on a port of each test's own.
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
        // Skipped rows are reported when a test asks (report_skips), never
        // by the background round in the middle of a slow test.
        settings.skip_report_interval_ms = 3_600_000;
        configure(&mut settings);
        let config = Config::new(settings.clone()).expect("test settings are valid");
        let clock = Clock::system();
        let app = App::prepare(store.with_clock(clock.clone()), &config)
            .await
            .expect("service prepares");
        let state = app.state().clone();
        let overflow_connections = app.connection_limits().overflow_connections;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("bound address");
        let metrics_listener = match settings.metrics_listen {
            Some(address) => Some(TcpListener::bind(address).await.expect("bind metrics")),
            None => None,
        };
        let metrics_addr = metrics_listener
            .as_ref()
            .map(|l| l.local_addr().expect("bound address"));
        let (shutdown, stop) = oneshot::channel::<()>();
        let server = tokio::spawn(app.serve(listener, metrics_listener, async {
            let _ = stop.await;
        }));
        let app = TestApp {
            addr,
            metrics_addr,
            pool,
            state,
            overflow_connections,
            settings,
            clock,
            client: client(),
            shutdown: Some(shutdown),
            server: Some(server),
        };
        // What was committed before the start is placed before a test reads.
        app.until_ready().await;
        app
    }

    /// `/metrics`, from the operators' port.
    pub(crate) async fn metrics(&self) -> reqwest::Response {
        self.operators("/metrics").await
    }

    /// A GET of `path` on the operators' port (`metrics_listen`).
    pub(crate) async fn operators(&self, path: &str) -> reqwest::Response {
        let address = self.metrics_addr.expect("the operators' port");
        self.client
            .get(format!("http://{address}{path}"))
            .send()
            .await
            .expect("request sent")
    }

    /// Waits until `/readyz` answers `200` (120 s at most: a debug build on
    /// a slow two-core machine, beside the other tests, took over 30 s to
    /// place a backlog of 25,000 changes).
    pub(crate) async fn until_ready(&self) {
        for _ in 0..2400 {
            if self.get("/readyz").await.status() == 200 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("not ready within 120 s");
    }

    /// Signals shutdown, as SIGTERM does; the handle resolves when the
    /// server has stopped.
    pub(crate) fn begin_shutdown(&mut self) -> tokio::task::JoinHandle<std::io::Result<()>> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        self.server.take().expect("the server is running")
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub(crate) async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    /// A GET as sent through a proxy to `host`, with extra headers.
    pub(crate) async fn get_as(
        &self,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut request = self.client.get(self.url(path)).header("host", host);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("request sent")
    }

    /// A conditional GET: `name` (`if-none-match`, `if-modified-since`)
    /// carrying `value`.
    pub(crate) async fn conditional(
        &self,
        path: &str,
        name: &str,
        value: &str,
    ) -> reqwest::Response {
        self.get_as("127.0.0.1", path, &[(name, value)]).await
    }

    /// Any request, with headers and a body.
    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        let mut request = self.client.request(method, self.url(path)).body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("request sent")
    }

    pub(crate) async fn head(&self, path: &str) -> reqwest::Response {
        self.client
            .head(self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    /// Fetches and checks the index: 200, XML, valid; returns its entries.
    /// A site that lists no URL has none: a `404` saying so, not an index
    /// siteindex.xsd refuses.
    pub(crate) async fn index(&self) -> Vec<IndexEntry> {
        let response = self.get("/sitemap_index.xml").await;
        if response.status() == 404 {
            assert_eq!(header(&response, "cache-control"), "no-store");
            let body = response.text().await.expect("body");
            assert!(body.contains("lists no URL yet"), "{body}");
            return Vec::new();
        }
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "content-type"),
            "application/xml; charset=utf-8"
        );
        let body = response.bytes().await.expect("index body");
        assert_valid(&body, Schema::Index);
        let index: SitemapIndex = parse_xml(&body);
        index.sitemaps
    }

    /// Fetches a `.xml.gz` page and checks it as a crawler would: 200,
    /// `application/gzip` with no Content-Encoding, a gzip file that
    /// decompresses whole, a schema-valid urlset within the limits. Returns
    /// the URLs and the uncompressed size.
    pub(crate) async fn page(&self, path: &str) -> Page {
        let response = self.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            header(&response, "content-type"),
            "application/gzip",
            "{path}"
        );
        assert!(
            response.headers().get("content-encoding").is_none(),
            "{path}"
        );
        let gz = response.bytes().await.expect("page body");
        let xml = gunzip(&gz);
        let page = self.check_urlset(&xml);
        assert!(!page.urls.is_empty(), "no page is served empty ({path})");
        page
    }

    /// The same page uncompressed, from its `.xml` name.
    pub(crate) async fn plain_page(&self, path: &str) -> (Page, Vec<u8>) {
        let response = self.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            header(&response, "content-type"),
            "application/xml; charset=utf-8"
        );
        let xml = response.bytes().await.expect("page body").to_vec();
        (self.check_urlset(&xml), xml)
    }

    #[track_caller]
    fn check_urlset(&self, xml: &[u8]) -> Page {
        let urlset: Urlset = parse_xml(xml);
        assert_valid(xml, Schema::Urlset);
        assert!(urlset.urls.len() <= self.settings.max_urls as usize);
        assert!(xml.len() as u64 <= self.settings.max_bytes);
        Page {
            urls: urlset.urls,
            bytes: xml.len(),
        }
    }

    /// Everything a crawler would collect: every page the index lists,
    /// fetched and checked. Returns (page path, its locs), in index order.
    pub(crate) async fn crawl(&self) -> Vec<(String, Vec<String>)> {
        let mut pages = Vec::new();
        for entry in self.index().await {
            let path = entry
                .loc
                .strip_prefix(BASE_URL)
                .map(|file| format!("/{file}"))
                .unwrap_or_else(|| panic!("index entry {} is not under the base URL", entry.loc));
            let page = self.page(&path).await;
            pages.push((path, page.locs()));
        }
        pages
    }

    /// All locs served, sorted, each as many times as it is served.
    pub(crate) async fn served_locs(&self) -> Vec<String> {
        let mut locs: Vec<String> = self
            .crawl()
            .await
            .into_iter()
            .flat_map(|(_, locs)| locs)
            .collect();
        locs.sort();
        locs
    }

    /// Folds what the test committed into pages, as the service's next
    /// round would; returns the rows folded.
    pub(crate) async fn fold(&self) -> u64 {
        let folded = self
            .state
            .store
            .fold(sitemapd::store::Turn::Wait)
            .await
            .expect("fold")
            .expect("a waiting fold always runs");
        self.state.pages.summaries.invalidate();
        folded
    }

    /// The locs the table holds for the served site, sorted.
    pub(crate) async fn table_locs(&self) -> Vec<String> {
        sqlx::query_scalar(
            "SELECT u.loc FROM sitemap_urls u JOIN sitemap_placed p ON p.id = u.id
             WHERE u.site = 'default' AND p.skip_reason IS NULL ORDER BY u.loc COLLATE \"C\"",
        )
        .fetch_all(&self.pool)
        .await
        .expect("table locs")
    }

    /// Inserts rows `{BASE_URL}{prefix}{i}` for i in 1..=n into a section.
    pub(crate) async fn insert_urls(&self, section: &str, prefix: &str, n: i64) {
        sqlx::query(
            "INSERT INTO sitemap_urls (section, loc)
             SELECT $1, $2 || g FROM generate_series(1, $3::bigint) g",
        )
        .bind(section)
        .bind(format!("{BASE_URL}{prefix}"))
        .bind(n)
        .execute(&self.pool)
        .await
        .expect("insert rows");
        self.fold().await;
    }

    /// Inserts `n` rows whose locs are hashes: long and poorly compressible,
    /// so a page of them is megabytes, even gzipped.
    pub(crate) async fn insert_hashed_urls(&self, n: i64) {
        sqlx::query(
            "INSERT INTO sitemap_urls (loc)
             SELECT $1 || md5(g::text) || '/' || md5((-g)::text) FROM generate_series(1, $2::bigint) g",
        )
        .bind(BASE_URL)
        .bind(n)
        .execute(&self.pool)
        .await
        .expect("hashed rows");
        self.fold().await;
    }

    /// Logs skipped rows now, as the background reporter would.
    pub(crate) async fn report_skips(&self) -> Vec<sitemapd::store::SkippedRow> {
        skips::report_new_skips(&self.state.store, sitemapd::store::Turn::Wait)
            .await
            .expect("skip report")
    }
}

/// A plain HTTP client. The build's reqwest has rustls without a default
/// crypto provider (the service brings its own), so tests install one.
pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// The counts a table keeps (`kept`), checked against a count of what
/// they count (`recount`): each query returns two keys and a count, in the
/// same order. Returns them as `KEY/KEY COUNT`.
pub(crate) async fn kept_counts(
    pool: &PgPool,
    kept: &'static str,
    recount: &'static str,
) -> Vec<String> {
    let read = |sql| async move {
        sqlx::query_as::<_, (String, String, i64)>(sql)
            .fetch_all(pool)
            .await
            .expect(sql)
    };
    let counts = read(kept).await;
    assert_eq!(
        counts,
        read(recount).await,
        "the kept counts against a recount"
    );
    counts
        .into_iter()
        .map(|(first, second, n)| format!("{first}/{second} {n}"))
        .collect()
}

/// Runs `sql` (statements built by the test itself) on `pool`.
pub(crate) async fn exec(pool: &PgPool, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Part of the statement that reads a page's rows, for
/// [`until_a_statement_waits_on_a_lock`].
pub(crate) const PAGE_READ: &str = "FROM sitemap_placed p JOIN sitemap_urls u";

/// Waits until a statement on this test's database whose text contains
/// `statement` is waiting for a lock (polling every 20 ms, for 10 s at
/// most): the moment a blocked request or import has reached the database.
/// Naming the statement keeps the service's own background work (a fold
/// meeting the same lock) from passing for it.
pub(crate) async fn until_a_statement_waits_on_a_lock(pool: &PgPool, statement: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE NOT l.granted AND a.datname = current_database()
               AND strpos(a.query, $1) > 0",
        )
        .bind(statement)
        .fetch_one(pool)
        .await
        .expect("locks");
        if waiting > 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no statement with {statement:?} waited on a lock within 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The test database's URL, for running the binary against it.
pub(crate) fn database_url(pool: &PgPool) -> String {
    let options = pool.connect_options();
    format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().expect("a database")
    )
}

/// The `sitemapd` binary, configured for the test database and [`BASE_URL`].
pub(crate) fn binary(pool: &PgPool) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sitemapd"));
    command
        .env("DATABASE_URL", database_url(pool))
        .env("SITEMAPD_BASE_URL", BASE_URL)
        .env("SITEMAPD_METRICS_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn");
    command
}

/// What `sitemapd robots` prints over the test database, with these
/// environment variables; fails the test if the command fails.
pub(crate) async fn robots_command(pool: &PgPool, env: &[(&str, &str)]) -> String {
    let mut command = binary(pool);
    command.arg("robots").envs(env.iter().copied());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("ran")
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[track_caller]
pub(crate) fn header<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .expect("ASCII header")
}

#[track_caller]
pub(crate) fn gunzip(gz: &[u8]) -> Vec<u8> {
    let mut xml = Vec::new();
    GzDecoder::new(gz)
        .read_to_end(&mut xml)
        .expect("a whole gzip file");
    xml
}

#[derive(Debug)]
pub(crate) struct Page {
    pub urls: Vec<Url>,
    pub bytes: usize,
}

impl Page {
    /// The page's locs, in document order.
    pub(crate) fn locs(self) -> Vec<String> {
        self.urls.into_iter().map(|u| u.loc).collect()
    }
}

#[derive(Debug, Deserialize)]
struct Urlset {
    #[serde(rename = "url", default)]
    urls: Vec<Url>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Url {
    pub loc: String,
    pub lastmod: Option<String>,
    pub changefreq: Option<String>,
    pub priority: Option<String>,
    #[serde(rename = "link", default)]
    pub links: Vec<Link>,
    #[serde(rename = "image", default)]
    pub images: Vec<ImageElement>,
    #[serde(rename = "video", default)]
    pub videos: Vec<VideoElement>,
    #[serde(rename = "news")]
    pub news: Option<NewsElement>,
}

/// A `<news:news>`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct NewsElement {
    pub publication: Publication,
    pub publication_date: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Publication {
    pub name: String,
    pub language: String,
}

/// An `<xhtml:link rel="alternate">`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Link {
    #[serde(rename = "@rel")]
    pub rel: String,
    #[serde(rename = "@hreflang")]
    pub hreflang: String,
    #[serde(rename = "@href")]
    pub href: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct ImageElement {
    #[serde(rename = "loc")]
    pub loc: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct VideoElement {
    #[serde(rename = "title")]
    pub title: String,
    #[serde(rename = "content_loc")]
    pub content_loc: Option<String>,
    #[serde(rename = "tag", default)]
    pub tags: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct SitemapIndex {
    #[serde(rename = "sitemap", default)]
    sitemaps: Vec<IndexEntry>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct IndexEntry {
    pub loc: String,
    pub lastmod: String,
}

#[track_caller]
fn parse_xml<T: for<'de> Deserialize<'de>>(xml: &[u8]) -> T {
    let text = std::str::from_utf8(xml).expect("documents are UTF-8");
    quick_xml::de::from_str(text)
        .unwrap_or_else(|e| panic!("unparsable XML ({e}):\n{}", excerpt(text)))
}

fn excerpt(text: &str) -> &str {
    &text[..text.char_indices().nth(2000).map_or(text.len(), |(i, _)| i)]
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Schema {
    Urlset,
    Index,
}

/// Validates with `xmllint --schema` against the sitemaps.org schemas kept
/// in `tests/fixtures/xsd`, a urlset together with the extensions' schemas.
#[track_caller]
pub(crate) fn assert_valid(xml: &[u8], schema: Schema) {
    let xsd = match schema {
        Schema::Urlset => "sitemap-with-extensions.xsd",
        Schema::Index => "siteindex.xsd",
    };
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/xsd")
        .join(xsd);
    xmllint(xml, &["--schema", xsd.to_str().expect("UTF-8 path")]);
}

#[track_caller]
pub(crate) fn assert_well_formed(xml: &[u8]) {
    xmllint(xml, &[]);
}

#[track_caller]
fn xmllint(xml: &[u8], args: &[&str]) {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), xml).expect("write document");
    let output = Command::new("xmllint")
        .arg("--noout")
        .args(args)
        .arg(file.path())
        .output()
        .expect("xmllint runs (Debian package libxml2-utils)");
    assert!(
        output.status.success(),
        "xmllint rejected the document: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        excerpt(&String::from_utf8_lossy(xml))
    );
}

/// A loopback port nothing listens on, for a server a test starts, below
/// the range the kernel hands to client sockets: one picked there could be
/// taken by an outgoing connection before the server binds it, or between
/// its stop and its restart on the same port.
/// Each test process walks the range from its own place, so that two
/// running at once seldom try the same ports.
pub(crate) fn free_port() -> u16 {
    static TRIED: AtomicU32 = AtomicU32::new(0);
    let clients_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let first = 10_000.min(clients_from / 2);
    let span = clients_from - first;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let tried = TRIED.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(first + (start + tried) % span).expect("a port below 65536");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {first}..{clients_from}");
}
