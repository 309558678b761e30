//! What a crawler sees when things go wrong: a short 503 it understands, or
//! a connection that breaks; never a truncated sitemap that looks whole.

use futures_util::StreamExt;
use sqlx::{Connection, PgConnection, PgPool};

use crate::helpers::{BASE_URL, TestApp, header};

/// A connection to the server's maintenance database, beside the test's own.
async fn admin(pool: &PgPool) -> PgConnection {
    let options = pool.connect_options().as_ref().clone().database("postgres");
    PgConnection::connect_with(&options)
        .await
        .expect("admin connection")
}

#[sqlx::test]
async fn a_database_outage_is_a_503_with_retry_after_and_service_resumes(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.retry_after_seconds = 17;
        s.db_acquire_timeout_ms = 1000;
    })
    .await;
    app.insert_urls("", "p", 3).await;
    assert_eq!(app.get("/sitemap-1.xml.gz").await.status(), 200);

    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&app.pool)
        .await
        .expect("name");
    let mut admin = admin(&app.pool).await;
    let set_connections =
        |allow: bool| format!("ALTER DATABASE \"{database}\" WITH ALLOW_CONNECTIONS {allow}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(set_connections(false)))
        .execute(&mut admin)
        .await
        .expect("refuse connections");
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
        .bind(&database)
        .execute(&mut admin)
        .await
        .expect("terminate connections");

    for path in [
        "/sitemap_index.xml",
        "/sitemap-1.xml.gz",
        "/sitemap-1.xml",
        "/readyz",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 503, "{path}");
        assert_eq!(header(&response, "retry-after"), "17", "{path}");
    }
    assert_eq!(
        app.get("/healthz").await.status(),
        200,
        "the process itself is fine"
    );

    sqlx::raw_sql(sqlx::AssertSqlSafe(set_connections(true)))
        .execute(&mut admin)
        .await
        .expect("allow connections");
    assert_eq!(app.get("/readyz").await.status(), 200);
    assert_eq!(app.page("/sitemap-1.xml.gz").await.urls.len(), 3);
}

/// Fills page 1 to its limit through folds, then slips rows into it behind
/// their back (as a botched restore of the placements can), so the summary
/// admits a page the writer will find over its limit mid-way. The
/// locs are hashes, which compress poorly, and the page is megabytes long:
/// the server flushes many chunks to the client before the writer meets the
/// smuggled rows at the end.
async fn overfill_first_page(app: &TestApp) {
    app.insert_hashed_urls(20_000).await;
    sqlx::query(
        "WITH smuggled AS (
             INSERT INTO sitemap_urls (loc) SELECT $1 || 'smuggled/' || g FROM generate_series(1, 5) g
             RETURNING id, site, section, loc
         )
         INSERT INTO sitemap_placements (id, site, section, loc_hash, page, bytes)
         SELECT id, site, section, sitemap_loc_hash(loc), 1, 0 FROM smuggled",
    )
    .bind(BASE_URL)
    .execute(&app.pool)
    .await
    .expect("smuggle rows");
}

#[sqlx::test]
async fn a_failure_part_way_through_a_page_is_a_503_never_a_cut_short_sitemap(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 20_000).await;
    overfill_first_page(&app).await;

    // Every form of a page is built whole before its first byte, so the
    // writer's failure part-way is answered before any headers go out; and
    // nothing is cached, so asking again fails the same way.
    for path in ["/sitemap-1.xml", "/sitemap-1.xml.gz", "/sitemap-1.xml"] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 503, "{path}");
        assert!(response.headers().get("retry-after").is_some(), "{path}");
    }
}

#[sqlx::test]
async fn a_slow_client_holds_no_database_connection(pool: PgPool) {
    // One connection in all: if a download held it, nothing else could run.
    let single = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .expect("one-connection pool");
    let app = TestApp::spawn_with(single, |s| s.max_urls = 20_000).await;
    app.insert_hashed_urls(20_000).await;

    // A crawler that takes the first chunk of the page, then stalls.
    let stalled = app.get("/sitemap-1.xml").await;
    assert_eq!(stalled.status(), 200);
    let mut body = stalled.bytes_stream();
    let first = body.next().await.expect("a first chunk").expect("bytes");
    assert!(!first.is_empty());

    // Meanwhile the one connection serves everyone else.
    assert_eq!(app.get("/readyz").await.status(), 200);
    assert_eq!(app.index().await.len(), 1);

    // And the stalled download still completes whole.
    let mut rest = first.to_vec();
    while let Some(chunk) = body.next().await {
        rest.extend_from_slice(&chunk.expect("the rest of the page"));
    }
    assert!(String::from_utf8_lossy(&rest).ends_with("</urlset>\n"));
}

#[sqlx::test]
async fn a_database_that_stops_answering_costs_503s_not_hung_requests(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.db_read_timeout_ms = 500).await;
    app.insert_urls("", "p", 3).await;
    // A lock that no read can pass stands for a database that takes
    // requests and never answers them. A fold running meanwhile may hold
    // one of the tables and want the other: PostgreSQL then cancels one
    // side as a deadlock, and when that is the lock, it is taken again.
    let mut tries = 0;
    let blocker = loop {
        let mut blocker = app.pool.begin().await.expect("transaction");
        match sqlx::query("LOCK TABLE sitemap_pages, sitemap_urls IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *blocker)
            .await
        {
            Ok(_) => break blocker,
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("40P01") && tries < 5 => {
                tries += 1;
            }
            Err(e) => panic!("lock: {e:?}"),
        }
    };
    for path in ["/sitemap_index.xml", "/sitemap-1.xml.gz"] {
        let started = std::time::Instant::now();
        let response = app.get(path).await;
        assert_eq!(response.status(), 503, "{path}");
        assert!(response.headers().get("retry-after").is_some(), "{path}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(3),
            "{path} took {:?}",
            started.elapsed()
        );
    }
    assert_eq!(app.get("/healthz").await.status(), 200);
    blocker.rollback().await.expect("unlock");
    assert_eq!(app.page("/sitemap-1.xml.gz").await.urls.len(), 3);
}
