//! Serving at scale: the page cache (never stale, one build per cold page,
//! a disk tier that survives restarts), load shedding that spares cached
//! pages, and replicas (stateless servers over one database, reads from a
//! replica database).

use std::time::Duration;

use futures_util::future::join_all;
use sitemapd::store::Store;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::helpers::{
    BASE_URL, PAGE_READ, TestApp, database_url, exec, gunzip, header,
    until_a_statement_waits_on_a_lock,
};

/// A counter or gauge from `/metrics` (0 when not yet there).
async fn metric(app: &TestApp, series: &str) -> f64 {
    let text = app.metrics().await.text().await.expect("metrics");
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Waits (10 s at most) until `count` pages were built in all.
async fn until_pages_built(app: &TestApp, count: f64, otherwise: &str) {
    let mut waited = Duration::ZERO;
    while metric(app, "sitemapd_page_build_seconds_count").await < count {
        assert!(waited < Duration::from_secs(10), "{otherwise}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
}

async fn built(app: &TestApp) -> f64 {
    metric(app, r#"sitemapd_pages_served_total{source="built"}"#).await
}

async fn gz_body(app: &TestApp, path: &str) -> Vec<u8> {
    let response = app.get(path).await;
    assert_eq!(response.status(), 200, "{path}");
    response.bytes().await.expect("body").to_vec()
}

#[sqlx::test]
async fn an_unchanged_page_is_never_rebuilt_and_a_changed_one_never_served_stale(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 5).await;
    let first = gz_body(&app, "/sitemap-1.xml.gz").await;
    for _ in 0..3 {
        assert_eq!(gz_body(&app, "/sitemap-1.xml.gz").await, first);
    }
    assert_eq!(built(&app).await, 1.0);
    assert_eq!(metric(&app, "sitemapd_rows_read_total").await, 5.0);

    sqlx::query("UPDATE sitemap_urls SET priority = 0.3 WHERE loc = $1")
        .bind(format!("{BASE_URL}p2"))
        .execute(&app.pool)
        .await
        .expect("update");
    app.fold().await;
    let page = app.page("/sitemap-1.xml.gz").await;
    assert_eq!(page.urls[1].priority.as_deref(), Some("0.3"), "never stale");
    assert_eq!(built(&app).await, 2.0);

    // Each encoding of a .xml page is a cache entry of its own; gzip on the
    // wire is the very bytes of the .xml.gz file, and shares its entry.
    for encoding in ["gzip", "br", "zstd", "br"] {
        let response = app
            .get_as(
                "127.0.0.1",
                "/sitemap-1.xml",
                &[("accept-encoding", encoding)],
            )
            .await;
        assert_eq!(header(&response, "content-encoding"), encoding);
    }
    assert_eq!(built(&app).await, 4.0);
}

#[sqlx::test]
async fn concurrent_requests_for_a_cold_page_share_one_build(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_hashed_urls(5_000).await;
    let bodies = join_all((0..16).map(|_| gz_body(&app, "/sitemap-1.xml.gz"))).await;
    assert!(bodies.windows(2).all(|pair| pair[0] == pair[1]));
    assert_eq!(built(&app).await, 1.0);
    assert_eq!(metric(&app, "sitemapd_rows_read_total").await, 5_000.0);
    assert_eq!(
        metric(&app, r#"sitemapd_pages_served_total{source="memory"}"#).await,
        15.0
    );
}

#[sqlx::test]
async fn past_the_build_limit_cold_pages_are_shed_and_cached_ones_still_served(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.max_urls = 10;
        s.max_concurrent_builds = 1;
        s.build_wait_ms = 200;
        s.retry_after_seconds = 7;
    })
    .await;
    app.insert_urls("", "p", 30).await;
    let cached = app.get("/sitemap-3.xml.gz").await;
    let etag = header(&cached, "etag").to_owned();

    // A writer holds the table: the next build blocks on its rows, holding
    // the only build slot.
    let mut writer = app.pool.acquire().await.expect("connection");
    sqlx::raw_sql("BEGIN; LOCK TABLE sitemap_urls IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *writer)
        .await
        .expect("lock");
    let slow = tokio::spawn({
        let url = app.url("/sitemap-1.xml.gz");
        async move { reqwest::get(url).await.expect("request").status() }
    });
    until_a_statement_waits_on_a_lock(&app.pool, PAGE_READ).await;

    let shed = app.get("/sitemap-2.xml.gz").await;
    assert_eq!(shed.status(), 503);
    assert_eq!(header(&shed, "retry-after"), "7");
    assert_eq!(header(&shed, "cache-control"), "no-store");
    assert_eq!(app.get("/sitemap-3.xml.gz").await.status(), 200, "cached");
    let revalidated = app
        .conditional("/sitemap-3.xml.gz", "if-none-match", &etag)
        .await;
    assert_eq!(revalidated.status(), 304);

    sqlx::query("ROLLBACK")
        .execute(&mut *writer)
        .await
        .expect("unlock");
    assert_eq!(slow.await.expect("joined"), 200, "the held build completes");
    assert_eq!(app.get("/sitemap-2.xml.gz").await.status(), 200);
}

#[sqlx::test]
async fn the_disk_tier_survives_a_restart_and_follows_changes(pool: PgPool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let configure = |s: &mut sitemapd::config::Settings| {
        s.page_cache_dir = Some(dir.path().to_owned());
    };
    app_with_rows(&pool).await;
    let first = TestApp::spawn_with(pool.clone(), configure).await;
    let body = gz_body(&first, "/sitemap-1.xml.gz").await;
    assert_eq!(built(&first).await, 1.0);
    drop(first);

    let restarted = TestApp::spawn_with(pool.clone(), configure).await;
    assert_eq!(gz_body(&restarted, "/sitemap-1.xml.gz").await, body);
    assert_eq!(built(&restarted).await, 0.0);
    assert_eq!(
        metric(&restarted, r#"sitemapd_pages_served_total{source="disk"}"#).await,
        1.0
    );
    assert_eq!(metric(&restarted, "sitemapd_rows_read_total").await, 0.0);

    sqlx::query("DELETE FROM sitemap_urls WHERE loc = $1")
        .bind(format!("{BASE_URL}p1"))
        .execute(&pool)
        .await
        .expect("delete");
    let again = TestApp::spawn_with(pool, configure).await;
    let page = again.page("/sitemap-1.xml.gz").await;
    assert_eq!(
        page.urls.len(),
        2,
        "the file of the older version is not served"
    );
    assert_eq!(built(&again).await, 1.0);
}

#[sqlx::test]
async fn warm_up_rebuilds_changed_pages_before_anyone_asks(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.warm_up_interval_ms = 50).await;
    // The first round only notes where things stand.
    tokio::time::sleep(Duration::from_millis(200)).await;
    app.insert_urls("", "w", 3).await;
    until_pages_built(&app, 1.0, "the changed page was not warmed").await;
    let page = app.page("/sitemap-1.xml.gz").await;
    assert_eq!(page.urls.len(), 3);
    assert_eq!(built(&app).await, 0.0, "the crawler met a warm page");
    assert_eq!(metric(&app, "sitemapd_page_build_seconds_count").await, 1.0);
    assert_eq!(
        metric(&app, r#"sitemapd_pages_served_total{source="memory"}"#).await,
        1.0
    );
}

/// A bulk load placed in several folds has its pages warmed once it is all
/// placed, not after every fold.
#[sqlx::test]
async fn warm_up_waits_for_a_backlog_to_be_placed(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.warm_up_interval_ms = 50;
        s.max_urls = 100;
        s.fold_batch_rows = 100;
        // The test folds; the service's loop only at its start.
        s.fold_interval_ms = 3_600_000;
    })
    .await;
    // The first round only notes where things stand.
    tokio::time::sleep(Duration::from_millis(200)).await;
    exec(
        &app.pool,
        &format!(
            "INSERT INTO sitemap_urls (loc) SELECT '{BASE_URL}bulk/' || g FROM generate_series(1, 1000) g"
        ),
    )
    .await;
    // One fold of the backlog (a batch of 100 rows): page 1 is placed, and
    // the pass goes on.
    assert_eq!(
        app.state
            .store
            .fold(sitemapd::store::Turn::Skip)
            .await
            .expect("fold"),
        Some(100)
    );
    assert!(
        app.state
            .store
            .placing_a_backlog()
            .await
            .expect("fold state")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        metric(&app, "sitemapd_page_build_seconds_count").await,
        0.0,
        "a page was warmed while its backlog was being placed"
    );

    app.fold().await;
    until_pages_built(
        &app,
        10.0,
        "the ten pages of the load were not warmed once it was placed",
    )
    .await;
    assert_eq!(built(&app).await, 0.0, "no request built a page");
}

/// A backlog that starts while a round builds its pages stops the round at
/// the next page, and the pages it left are warmed once the backlog is
/// placed.
#[sqlx::test]
async fn warm_up_stops_its_round_when_a_backlog_starts(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.warm_up_interval_ms = 50;
        s.max_urls = 10;
        s.fold_interval_ms = 3_600_000;
    })
    .await;
    // The first round only notes where things stand.
    tokio::time::sleep(Duration::from_millis(200)).await;
    app.insert_urls("", "w", 30).await;
    until_pages_built(&app, 3.0, "the pages were not warmed").await;

    // The rows are held, and the three pages' summaries move on: the next
    // round's first build waits on the rows.
    let mut writer = app.pool.acquire().await.expect("connection");
    sqlx::raw_sql("BEGIN; LOCK TABLE sitemap_urls IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *writer)
        .await
        .expect("lock");
    exec(
        &app.pool,
        "UPDATE sitemap_pages SET lastmod = lastmod + interval '1 second'",
    )
    .await;
    until_a_statement_waits_on_a_lock(&app.pool, PAGE_READ).await;
    // A backlog starts while that build waits.
    exec(
        &app.pool,
        "UPDATE sitemap_fold_state SET removals_left = true",
    )
    .await;
    sqlx::raw_sql("COMMIT")
        .execute(&mut *writer)
        .await
        .expect("unlock");
    until_pages_built(&app, 4.0, "the waiting build did not end").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        metric(&app, "sitemapd_page_build_seconds_count").await,
        4.0,
        "pages were warmed while a backlog was being placed"
    );

    exec(
        &app.pool,
        "UPDATE sitemap_fold_state SET removals_left = false",
    )
    .await;
    until_pages_built(
        &app,
        6.0,
        "the pages the stopped round left were not warmed",
    )
    .await;
    for page in 1..=3 {
        assert_eq!(
            app.get(&format!("/sitemap-{page}.xml.gz")).await.status(),
            200
        );
    }
    assert_eq!(built(&app).await, 0.0, "no request built a page");
}

/// Polls the page's ETag until it differs from `old` (bounded).
async fn etag_after_change(app: &TestApp, path: &str, old: &str) -> String {
    for _ in 0..100 {
        let etag = header(&app.get(path).await, "etag").to_owned();
        if etag != old {
            return etag;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path} still has ETag {old}");
}

#[sqlx::test]
async fn cached_pages_and_304s_need_no_database_round_trip(pool: PgPool) {
    // One connection in all, which the test then holds.
    let single = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_millis(500))
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .expect("one-connection pool");
    let app = TestApp::spawn_on(Store::from_pool(single.clone()), single.clone(), |s| {
        s.max_urls = 10;
        s.summary_max_age_ms = 60_000;
    })
    .await;
    app.insert_urls("", "p", 20).await;
    // The folds' notifications reach the change listener a moment after
    // their commits, and drop the summaries the first request read again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    app.until_summaries_trusted().await;
    let etag = header(&app.get("/sitemap-1.xml.gz").await, "etag").to_owned();
    let held = single.acquire().await.expect("the only connection");

    assert_eq!(app.get("/sitemap-1.xml.gz").await.status(), 200);
    let revalidated = app
        .conditional("/sitemap-1.xml.gz", "if-none-match", &etag)
        .await;
    assert_eq!(revalidated.status(), 304);
    assert_eq!(app.get("/sitemap_index.xml").await.status(), 200);
    assert_eq!(
        app.get("/sitemap-2.xml.gz").await.status(),
        503,
        "a cold page needs the database"
    );
    drop(held);
    assert_eq!(app.get("/sitemap-2.xml.gz").await.status(), 200);
}

#[sqlx::test]
async fn kept_summaries_follow_every_write(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.summary_max_age_ms = 60_000;
        s.api_token_hashes = vec![sitemapd::tokens::hash_of("smd_t")];
    })
    .await;
    app.insert_urls("", "p", 3).await;
    let first = header(&app.get("/sitemap-1.xml.gz").await, "etag").to_owned();

    // A plain SQL write from another client: announced by the schema.
    sqlx::query("UPDATE sitemap_urls SET priority = 0.2 WHERE loc = $1")
        .bind(format!("{BASE_URL}p1"))
        .execute(&app.pool)
        .await
        .expect("update");
    app.fold().await;
    let second = etag_after_change(&app, "/sitemap-1.xml.gz", &first).await;
    let page = app.page("/sitemap-1.xml.gz").await;
    assert_eq!(page.urls[0].priority.as_deref(), Some("0.2"));

    // A write through this server's API is served by the very next request.
    let body = format!("[{{\"loc\": \"{BASE_URL}p4\"}}]");
    let response = app
        .send(
            reqwest::Method::PUT,
            "/api/v1/urls",
            &[
                ("content-type", "application/json"),
                ("authorization", "Bearer smd_t"),
            ],
            body,
        )
        .await;
    assert_eq!(response.status(), 200);
    let response = app.get("/sitemap-1.xml.gz").await;
    assert_ne!(header(&response, "etag"), second);
    assert_eq!(app.page("/sitemap-1.xml.gz").await.urls.len(), 4);
}

#[sqlx::test]
async fn a_change_the_listener_missed_is_seen_once_it_reconnects(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.summary_max_age_ms = 60_000).await;
    app.insert_urls("", "p", 3).await;
    app.until_summaries_trusted().await;
    let first = header(&app.get("/sitemap-1.xml.gz").await, "etag").to_owned();
    // As a restore with triggers off would: no notification.
    let mut conn = app.pool.acquire().await.expect("connection");
    sqlx::raw_sql(
        "SET session_replication_role = replica;
         UPDATE sitemap_pages SET lastmod = lastmod + interval '1 second';
         SET session_replication_role = DEFAULT;",
    )
    .execute(&mut *conn)
    .await
    .expect("silent change");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        header(&app.get("/sitemap-1.xml.gz").await, "etag"),
        first,
        "unannounced, the change is not seen while the summaries are trusted"
    );
    // The listener's connection is lost (its LISTEN is the last thing it
    // asked): what went unheard meanwhile is read anew.
    exec(
        &app.pool,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE query LIKE 'LISTEN%' AND datname = current_database()",
    )
    .await;
    etag_after_change(&app, "/sitemap-1.xml.gz", &first).await;
}

#[sqlx::test]
async fn a_change_to_one_site_costs_no_other_site_a_database_round_trip(pool: PgPool) {
    // One connection in all, which the test then holds.
    let single = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_millis(500))
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .expect("one-connection pool");
    let app = TestApp::spawn_on(Store::from_pool(single.clone()), single.clone(), |s| {
        s.summary_max_age_ms = 60_000;
        for (name, base_url) in [
            ("busy", "https://busy.example.com/"),
            ("quiet", "https://quiet.example.com/"),
        ] {
            s.sites.insert(
                name.into(),
                sitemapd::config::SiteSettings {
                    base_url: base_url.into(),
                    ..sitemapd::config::SiteSettings::default()
                },
            );
        }
    })
    .await;
    for site in ["busy", "quiet"] {
        exec(
            &pool,
            &format!(
                "INSERT INTO sitemap_urls (site, loc)
                 SELECT '{site}', 'https://{site}.example.com/p/' || n FROM generate_series(1, 5) n"
            ),
        )
        .await;
    }
    let elsewhere = Store::from_pool(pool.clone());
    elsewhere
        .fold(sitemapd::store::Turn::Wait)
        .await
        .expect("fold");
    // The fold's notification drops what the first requests read.
    tokio::time::sleep(Duration::from_millis(500)).await;
    app.until_summaries_trusted().await;
    let quiet_page = app
        .get_as("quiet.example.com", "/sitemap-1.xml.gz", &[])
        .await;
    let etag = header(&quiet_page, "etag").to_owned();
    assert_eq!(
        app.get_as("busy.example.com", "/sitemap_index.xml", &[])
            .await
            .status(),
        200
    );
    let held = single.acquire().await.expect("the only connection");

    // The busy tenant writes, and a fold elsewhere announces it.
    exec(
        &pool,
        "UPDATE sitemap_urls SET lastmod = now() WHERE site = 'busy' AND loc LIKE '%/p/1'",
    )
    .await;
    elsewhere
        .fold(sitemapd::store::Turn::Wait)
        .await
        .expect("fold");
    // Its summaries are dropped, so its index needs the database...
    until_its_index_needs_the_database(&app, "busy.example.com").await;
    // ...and the quiet one's index, 304s and cached page need none.
    for _ in 0..3 {
        assert_eq!(
            app.get_as("quiet.example.com", "/sitemap_index.xml", &[])
                .await
                .status(),
            200
        );
        let revalidated = app
            .get_as(
                "quiet.example.com",
                "/sitemap-1.xml.gz",
                &[("if-none-match", &etag)],
            )
            .await;
        assert_eq!(revalidated.status(), 304);
        assert_eq!(
            app.get_as("quiet.example.com", "/sitemap-1.xml.gz", &[])
                .await
                .status(),
            200
        );
    }
    // A notice naming the quiet site drops its summaries too.
    exec(&pool, "NOTIFY sitemapd_pages, 'quiet'").await;
    until_its_index_needs_the_database(&app, "quiet.example.com").await;
    drop(held);
    assert_eq!(
        app.get_as("quiet.example.com", "/sitemap_index.xml", &[])
            .await
            .status(),
        200
    );
}

/// Polls `host`'s index until it is answered `503` (bounded): its summaries
/// were dropped, and the database, whose one connection the test holds, is
/// needed to read them again.
async fn until_its_index_needs_the_database(app: &TestApp, host: &str) {
    for _ in 0..250 {
        if app.get_as(host, "/sitemap_index.xml", &[]).await.status() == 503 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{host}'s summaries were kept");
}

async fn app_with_rows(pool: &PgPool) {
    sqlx::query(
        "INSERT INTO sitemap_urls (loc) SELECT $1 || 'p' || g FROM generate_series(1, 3) g",
    )
    .bind(BASE_URL)
    .execute(pool)
    .await
    .expect("rows");
}

#[sqlx::test]
async fn two_replicas_over_one_database_serve_identical_bytes_and_validators(pool: PgPool) {
    let a = TestApp::spawn(pool.clone()).await;
    let b = TestApp::spawn(pool).await;
    a.insert_urls("blog", "b", 1_000).await;
    for path in [
        "/sitemap_index.xml",
        "/sitemap-blog-1.xml.gz",
        "/robots.txt",
    ] {
        let (ra, rb) = (a.get(path).await, b.get(path).await);
        for name in ["etag", "last-modified", "cache-control", "content-type"] {
            if ra.headers().contains_key(name) || rb.headers().contains_key(name) {
                assert_eq!(header(&ra, name), header(&rb, name), "{path} {name}");
            }
        }
        let (ba, bb) = (ra.bytes().await.expect("a"), rb.bytes().await.expect("b"));
        assert_eq!(ba, bb, "{path}");
    }
    // A validator from one replica is honoured by the other.
    let etag = header(&a.get("/sitemap-blog-1.xml.gz").await, "etag").to_owned();
    let response = b
        .conditional("/sitemap-blog-1.xml.gz", "if-none-match", &etag)
        .await;
    assert_eq!(response.status(), 304);
}

#[sqlx::test]
async fn reads_go_to_the_read_replica_and_writes_to_the_primary(pool: PgPool) {
    // A second database stands in for a replica: it holds what the primary
    // held when it was last replayed.
    let primary_name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&pool)
        .await
        .expect("primary answers");
    // Names are at most 63 bytes: keep the unique end of the test's own.
    let unique = &primary_name[primary_name.len().saturating_sub(24)..];
    let replica_name = format!("replica_{unique}");
    let mut admin = pool.acquire().await.expect("admin connection");
    for statement in [
        format!("DROP DATABASE IF EXISTS \"{replica_name}\""),
        format!("CREATE DATABASE \"{replica_name}\""),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&mut *admin)
            .await
            .expect("replica database");
    }
    let replica_url = database_url(&pool).replace(
        &format!("/{}", pool.connect_options().get_database().expect("name")),
        &format!("/{replica_name}"),
    );
    let replica = PgPoolOptions::new()
        .connect(&replica_url)
        .await
        .expect("replica pool");
    let current: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&replica)
        .await
        .expect("replica answers");
    assert_eq!(current, replica_name);
    let replicated = Store::from_pool(replica.clone());
    replicated.migrate().await.expect("replica schema");
    let mut settings = sitemapd::config::Settings::defaults();
    settings.base_url = BASE_URL.into();
    let config = sitemapd::config::Config::new(settings).expect("valid");
    sitemapd::apply_config(&replicated, &config)
        .await
        .expect("replica configured, as replication would have it");
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1)")
        .bind(format!("{BASE_URL}replayed"))
        .execute(&replica)
        .await
        .expect("replayed row");
    replicated
        .fold(sitemapd::store::Turn::Wait)
        .await
        .expect("replica folded, as replication would have it");

    let store = Store::from_pool(pool.clone()).with_read_pool(replica.clone());
    let app = TestApp::spawn_on(store, pool.clone(), |_| {}).await;
    app.until_reads_on_standby().await;
    app.insert_urls("", "not-yet-replayed-", 2).await;
    assert_eq!(app.served_locs().await, [format!("{BASE_URL}replayed")]);
    let page = gunzip(&gz_body(&app, "/sitemap-1.xml.gz").await);
    assert!(String::from_utf8_lossy(&page).contains("replayed"));
    assert_eq!(app.get("/readyz").await.status(), 200, "both answer");

    drop(app);
    replica.close().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE \"{replica_name}\" WITH (FORCE)"
    )))
    .execute(&mut *admin)
    .await
    .expect("drop the replica database");
}
