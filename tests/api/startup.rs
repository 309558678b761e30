//! A restart after a bulk load, through the real binary: alive at once,
//! ready once the backlog is placed, and stopped cleanly midway.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::helpers::{BASE_URL, binary, client, exec, free_port};

const BACKLOG: i64 = 1_000_000;

fn serve(pool: &PgPool, port: u16) -> Child {
    binary(pool)
        .arg("serve")
        .env("SITEMAPD_LISTEN", format!("127.0.0.1:{port}"))
        .env("SITEMAPD_FOLD_BATCH_ROWS", "100000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sitemapd serve starts")
}

/// The status `path` answers with, or `None` while nothing answers.
async fn status(port: u16, path: &str) -> Option<u16> {
    client()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .ok()
        .map(|response| response.status().as_u16())
}

/// Rows on a page, by the summaries and by the placements: always equal.
async fn placed(pool: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT coalesce(sum(url_count), 0)::bigint FROM sitemap_pages),
                (SELECT count(*) FROM sitemap_placed WHERE page IS NOT NULL)",
    )
    .fetch_one(pool)
    .await
    .expect("placed rows")
}

/// Waits until `path` answers `expected`, for `within` at most; returns
/// how long it took.
async fn until_status(port: u16, path: &str, expected: u16, within: Duration) -> Duration {
    let started = Instant::now();
    while status(port, path).await != Some(expected) {
        assert!(started.elapsed() < within, "{path} answers {expected}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

async fn terminate(mut service: Child) -> ExitStatus {
    let pid = service.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    tokio::task::spawn_blocking(move || service.wait().expect("sitemapd exits"))
        .await
        .expect("waited")
}

#[sqlx::test]
async fn a_restart_behind_a_backlog_is_alive_at_once_and_ready_once_it_is_placed(pool: PgPool) {
    exec(
        &pool,
        &format!(
            "INSERT INTO sitemap_urls (loc) SELECT '{BASE_URL}bulk/' || g FROM generate_series(1, {BACKLOG}) g"
        ),
    )
    .await;

    let port = free_port();
    let started = Instant::now();
    let service = serve(&pool, port);
    until_status(port, "/healthz", 200, Duration::from_secs(10)).await;
    let alive_after = started.elapsed();
    eprintln!("/healthz answered 200 {alive_after:?} after the start, {BACKLOG} rows behind");
    assert!(
        alive_after < Duration::from_secs(1),
        "alive within a second: {alive_after:?}"
    );
    assert_eq!(status(port, "/readyz").await, Some(503), "not ready yet");

    // SIGTERM once the first batch shows, with most of the backlog to go.
    loop {
        let (summed, _) = placed(&pool).await;
        if summed > 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "a first batch is placed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status(port, "/readyz").await, Some(503), "still placing");
    let exit = terminate(service).await;
    assert!(exit.success(), "a clean stop: {exit}");
    let (summed, counted) = placed(&pool).await;
    assert_eq!(summed, counted, "every summary matches its placements");
    assert!(
        summed < BACKLOG,
        "stopped midway: {summed} of {BACKLOG} placed"
    );

    // The next start goes on from there.
    let service = serve(&pool, port);
    until_status(port, "/readyz", 200, Duration::from_secs(300)).await;
    assert_eq!(placed(&pool).await, (BACKLOG, BACKLOG), "every row placed");
    let exit = terminate(service).await;
    assert!(exit.success(), "{exit}");
}

#[sqlx::test]
async fn the_binary_serves_metrics_on_the_operators_port_only(pool: PgPool) {
    let (port, operators) = (free_port(), free_port());
    let service = binary(&pool)
        .arg("serve")
        .env("SITEMAPD_LISTEN", format!("127.0.0.1:{port}"))
        .env("SITEMAPD_METRICS_LISTEN", format!("127.0.0.1:{operators}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sitemapd serve starts");
    until_status(port, "/readyz", 200, Duration::from_secs(30)).await;
    assert_eq!(status(port, "/metrics").await, Some(404));
    assert_eq!(status(port, "/sitemaps.html?site=default").await, Some(200));
    assert_eq!(status(operators, "/metrics").await, Some(200));
    assert_eq!(status(operators, "/healthz").await, Some(200));
    assert_eq!(status(operators, "/readyz").await, Some(200));
    let exit = terminate(service).await;
    assert!(exit.success(), "{exit}");
}
