//! Submitting a site's index by GET, as the 2008 guide describes, against a
//! loopback receiver: when the index changes, at most once an interval,
//! and again at the next interval after anything but 200.

use std::time::Duration;

use sqlx::PgPool;

use crate::helpers::{TestApp, exec};
use crate::receiver::{Receiver, Reply};

const INDEX: &str = "https%3A%2F%2Fwww.example.com%2Fsitemap_index.xml";

async fn submitting(pool: PgPool, receiver: &Receiver) -> TestApp {
    let template = receiver.url("/ping?sitemap={sitemap}");
    TestApp::spawn_with(pool, |s| {
        s.submit_urls = vec![template];
        s.submit_interval_seconds = 1;
    })
    .await
}

#[sqlx::test]
async fn an_index_is_submitted_when_it_changes_at_most_once_an_interval(pool: PgPool) {
    let receiver = Receiver::start().await;
    let app = submitting(pool, &receiver).await;
    // An empty site has no index worth submitting.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(receiver.received().is_empty());

    app.insert_urls("", "a/", 3).await;
    let first = receiver.until(1).await;
    assert_eq!(first[0].method, "GET");
    assert_eq!(first[0].uri.path(), "/ping");
    assert_eq!(
        first[0].uri.query(),
        Some(format!("sitemap={INDEX}").as_str())
    );
    // Unchanged, it is not submitted again, however many intervals pass.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(receiver.received().len(), 1);

    // Changed twice within an interval: one more submission, a second after the last.
    receiver.script(&[Reply::status(500)]);
    app.insert_urls("", "b/", 1).await;
    app.insert_urls("", "c/", 1).await;
    let refused = receiver.until(2).await;
    assert_eq!(refused[1].status, 500);
    assert!(refused[1].at - first[0].at >= Duration::from_millis(900));
    // Refused: tried again at the next interval, then taken.
    let retried = receiver.until(3).await;
    assert_eq!(retried[2].status, 200);
    assert!(retried[2].at - retried[1].at >= Duration::from_millis(900));
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert_eq!(receiver.received().len(), 3);

    let metrics = app.metrics().await.text().await.expect("metrics");
    for line in [
        "sitemapd_sitemap_submissions_total{site=\"default\",status=\"200\"} 2",
        "sitemapd_sitemap_submissions_total{site=\"default\",status=\"500\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no `{line}` in\n{metrics}"
        );
    }
}

#[sqlx::test]
async fn replicas_submit_a_change_once(pool: PgPool) {
    let receiver = Receiver::start().await;
    let first = submitting(pool.clone(), &receiver).await;
    let _second = submitting(pool, &receiver).await;
    exec(
        &first.pool,
        "INSERT INTO sitemap_urls (loc) VALUES ('https://www.example.com/one')",
    )
    .await;
    receiver.until(1).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(receiver.received().len(), 1, "one GET for one change");
}
