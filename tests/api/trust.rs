//! Sitemaps search engines trust: no lastmod in the future, however the
//! row was written.

use std::time::Duration;

use reqwest::Method;
use sqlx::PgPool;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::helpers::{BASE_URL, TestApp, exec};
use crate::write_api::{TOKEN, spawn_api};

/// The lastmod each loc is served with.
async fn served_lastmods(app: &TestApp) -> Vec<(String, Option<String>)> {
    app.page("/sitemap-1.xml.gz")
        .await
        .urls
        .into_iter()
        .map(|url| (url.loc, url.lastmod))
        .collect()
}

async fn authed(app: &TestApp, path: &str) -> String {
    let auth = format!("Bearer {TOKEN}");
    let response = app
        .send(Method::GET, path, &[("authorization", auth.as_str())], "")
        .await;
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.expect("body")
}

/// A row written by plain SQL with a lastmod next year is served with the
/// moment the fold placed it, and keeps that value on every later read; it
/// is counted as `lastmod-in-future` in the stats and shown with the
/// left-out reasons in the operators' HTML view. Changed to a past lastmod,
/// it is served as written, and no longer counted.
#[sqlx::test]
async fn a_future_lastmod_is_served_as_the_moment_its_row_was_placed(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let before = OffsetDateTime::now_utc();
    exec(
        &app.pool,
        &format!(
            "INSERT INTO sitemap_urls (loc, lastmod) VALUES
                 ('{BASE_URL}future', now() + interval '1 year'),
                 ('{BASE_URL}past', '2020-01-02T03:04:05Z')"
        ),
    )
    .await;
    app.fold().await;
    let after = OffsetDateTime::now_utc();

    let served = served_lastmods(&app).await;
    let future = served[0].1.clone().expect("a lastmod");
    let moment = OffsetDateTime::parse(&future, &Rfc3339).expect("W3C datetime");
    assert!(
        moment >= before - Duration::from_secs(1) && moment <= after,
        "{future} is the fold's moment, between {before} and {after}"
    );
    assert_eq!(
        served[1],
        (
            format!("{BASE_URL}past"),
            Some("2020-01-02T03:04:05+00:00".to_owned())
        )
    );
    // Another row on the page, a second later: the page is built anew,
    // and the clamped row keeps its served lastmod.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    exec(
        &app.pool,
        &format!("INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}later')"),
    )
    .await;
    app.fold().await;
    let rebuilt = served_lastmods(&app).await;
    assert_eq!(rebuilt.len(), 3);
    assert_eq!(rebuilt[..2], served[..], "the same on a page built later");

    let stats: serde_json::Value =
        serde_json::from_str(&authed(&app, "/api/v1/stats").await).expect("JSON");
    assert_eq!(stats["sites"][0]["lastmods_in_future"], 1, "{stats}");
    assert_eq!(stats["sites"][0]["sections"][0]["lastmods_in_future"], 1);
    assert_eq!(stats["sites"][0]["skipped"], 0, "served, not left out");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        metrics.contains("sitemapd_lastmods_in_future{site=\"default\"} 1\n"),
        "{metrics}"
    );
    let view = authed(&app, "/sitemaps.html").await;
    assert!(
        view.contains("lastmod-in-future") && view.contains(&format!("{BASE_URL}future")),
        "{view}"
    );

    exec(
        &app.pool,
        &format!("UPDATE sitemap_urls SET lastmod = '2021-05-06T07:08:09Z' WHERE loc = '{BASE_URL}future'"),
    )
    .await;
    app.fold().await;
    assert_eq!(
        served_lastmods(&app).await[0].1.as_deref(),
        Some("2021-05-06T07:08:09+00:00")
    );
    let stats: serde_json::Value =
        serde_json::from_str(&authed(&app, "/api/v1/stats").await).expect("JSON");
    assert_eq!(stats["sites"][0]["lastmods_in_future"], 0, "{stats}");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        !metrics.contains("sitemapd_lastmods_in_future{"),
        "{metrics}"
    );
}
