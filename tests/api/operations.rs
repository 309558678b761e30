//! What an operator relies on: Prometheus metrics and graceful shutdown.

use futures_util::StreamExt;
use sqlx::PgPool;

use crate::helpers::{BASE_URL, PAGE_READ, TestApp, header, until_a_statement_waits_on_a_lock};

async fn metrics_text(response: reqwest::Response) -> String {
    assert_eq!(response.status(), 200);
    assert!(header(&response, "content-type").starts_with("application/openmetrics-text"));
    response.text().await.expect("metrics")
}

#[sqlx::test]
async fn metrics_name_what_the_service_does(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 10).await;
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ('https://elsewhere.example/x')")
        .execute(&app.pool)
        .await
        .expect("a row left out");
    app.fold().await;
    let etag = header(&app.get("/sitemap-1.xml.gz").await, "etag").to_owned();
    app.page("/sitemap-1.xml.gz").await;
    app.index().await;
    assert_eq!(
        app.conditional("/sitemap-1.xml.gz", "if-none-match", &etag)
            .await
            .status(),
        304
    );
    assert_eq!(app.get("/sitemap-9.xml.gz").await.status(), 404);

    let text = metrics_text(app.metrics().await).await;
    for expected in [
        r#"sitemapd_http_requests_total{route="/sitemap-{n}.xml.gz",status="200"} 2"#,
        r#"sitemapd_http_requests_total{route="/sitemap-{n}.xml.gz",status="304"} 1"#,
        r#"sitemapd_http_requests_total{route="/sitemap-{n}.xml.gz",status="404"} 1"#,
        r#"sitemapd_http_requests_total{route="/sitemap_index.xml",status="200"} 1"#,
        // The second fetch is answered from the page cache.
        r#"sitemapd_page_build_seconds_count 1"#,
        r#"sitemapd_rows_read_total 10"#,
        r#"sitemapd_pages_served_total{source="built"} 1"#,
        r#"sitemapd_pages_served_total{source="memory"} 1"#,
        // and so are its rows: read once
        r#"sitemapd_database_reads_total{read="pages"} 1"#,
        r#"sitemapd_database_reads_total{read="summaries"} "#,
        r#"sitemapd_database_reads_total{read="sites"} "#,
        r#"sitemapd_page_cache_bytes "#,
        r#"sitemapd_rows_left_out_total 0"#,
        r#"sitemapd_response_body_bytes_total{route="/sitemap-{n}.xml.gz"}"#,
        r#"sitemapd_response_body_bytes_total{route="/sitemap_index.xml"}"#,
        r#"sitemapd_skipped_rows{site="default"} 1"#,
        r#"sitemapd_db_connections{state="idle"}"#,
        r#"sitemapd_db_connections{state="in_use"}"#,
    ] {
        assert!(text.contains(expected), "missing {expected} in\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));
    assert!(!text.contains(BASE_URL), "labels never carry raw URLs");
}

#[sqlx::test]
async fn metrics_are_on_the_operators_port_and_public_only_when_asked(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    assert!(!app.settings.metrics_public, "off by default");
    assert_eq!(
        app.get("/metrics").await.status(),
        404,
        "not on the main port"
    );
    let text = metrics_text(app.metrics().await).await;
    assert!(text.contains("sitemapd_db_connections"), "{text}");

    let public = TestApp::spawn_with(pool, |s| s.metrics_public = true).await;
    let text = metrics_text(public.get("/metrics").await).await;
    assert!(text.contains("sitemapd_db_connections"), "{text}");
    metrics_text(public.metrics().await).await;
}

/// The statements running now whose text holds `statement`.
async fn running(pool: &PgPool, statement: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'active' AND strpos(query, $1) > 0
           AND pid <> pg_backend_pid()",
    )
    .bind(statement)
    .fetch_one(pool)
    .await
    .expect("activity")
}

#[sqlx::test]
async fn scrapes_never_leave_counts_running_in_the_database(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let count = "FROM sitemap_lastmod_clamp_counts";
    // A count that cannot finish: its table is locked.
    let mut locker = app.pool.begin().await.expect("transaction");
    sqlx::query("LOCK TABLE sitemap_lastmod_clamp_counts IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *locker)
        .await
        .expect("lock");

    // Scrapes at once, again and again, as a scraper that polls faster
    // than the counts answer: each is answered, with one set of counts
    // running in the database at most, as watched all the while.
    let most = std::cell::Cell::new(0);
    let scraped = std::cell::Cell::new(false);
    let watch = async {
        while !scraped.get() {
            most.set(most.get().max(running(&app.pool, count).await));
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let scrapes = async {
        // Until a count was seen running, three rounds at least: on a busy
        // machine a round's counts may give up before they reach the
        // database.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        for round in 1.. {
            let answers = futures_util::future::join_all((0..4).map(|_| app.metrics())).await;
            for answer in answers {
                metrics_text(answer).await;
            }
            if round >= 3 && most.get() > 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no count reached the database within 60 s"
            );
        }
        scraped.set(true);
    };
    tokio::join!(watch, scrapes);
    assert_eq!(most.get(), 1, "counts running at once");
    // Each set gave up within the count's timeout, in the database too:
    // nothing is left running while the lock is still held.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while running(&app.pool, count).await > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "a count the scrape gave up on still runs"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    locker.rollback().await.expect("unlock");

    // Unlocked, a scrape reads the counts again.
    let text = metrics_text(app.metrics().await).await;
    assert!(text.contains("sitemapd_db_connections"), "{text}");
}

#[sqlx::test]
async fn shutdown_finishes_in_flight_responses_and_refuses_new_ones(pool: PgPool) {
    let mut app = TestApp::spawn_with(pool, |s| s.max_urls = 20_000).await;
    app.insert_hashed_urls(20_000).await;
    let response = app.get("/sitemap-1.xml").await;
    let mut body = response.bytes_stream();
    let mut received = body
        .next()
        .await
        .expect("first chunk")
        .expect("bytes")
        .to_vec();

    let stopped = app.begin_shutdown();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while reqwest::get(app.url("/healthz")).await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "new connections still accepted 5 s into shutdown"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    while let Some(chunk) = body.next().await {
        received.extend_from_slice(&chunk.expect("the in-flight response completes"));
    }
    assert!(String::from_utf8_lossy(&received).ends_with("</urlset>\n"));
    let result = tokio::time::timeout(std::time::Duration::from_secs(10), stopped).await;
    assert!(
        matches!(result, Ok(Ok(Ok(())))),
        "the server stops cleanly: {result:?}"
    );
}

#[sqlx::test]
async fn an_unfinished_response_cannot_hold_shutdown_past_the_grace_period(pool: PgPool) {
    let mut app = TestApp::spawn_with(pool, |s| s.shutdown_grace_seconds = 1).await;
    app.insert_urls("", "p", 10).await;
    // Rows that cannot be read yet keep the response in flight.
    let mut blocker = app.pool.begin().await.expect("transaction");
    sqlx::query("LOCK TABLE sitemap_urls IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .expect("lock");
    let in_flight = tokio::spawn(reqwest::get(app.url("/sitemap-1.xml.gz")));
    until_a_statement_waits_on_a_lock(&app.pool, PAGE_READ).await;

    let started = std::time::Instant::now();
    let stopped = app.begin_shutdown();
    let result = tokio::time::timeout(std::time::Duration::from_secs(10), stopped).await;
    let took = started.elapsed();
    assert!(matches!(result, Ok(Ok(Ok(())))), "stopped: {result:?}");
    assert!(
        took >= std::time::Duration::from_millis(900),
        "it waited for the response: {took:?}"
    );
    // serve() has returned with the response unfinished; the binary would
    // now exit, closing it.
    blocker.rollback().await.expect("unlock");
    in_flight.abort();
}
