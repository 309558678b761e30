//! What an operator watches: Prometheus metrics.

use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, header};

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
    let etag = header(&app.get("/sitemap-1.xml.gz").await, "etag").to_owned();
    app.page("/sitemap-1.xml.gz").await;
    app.index().await;
    assert_eq!(
        app.get_as(
            "127.0.0.1",
            "/sitemap-1.xml.gz",
            &[("if-none-match", &etag)]
        )
        .await
        .status(),
        304
    );
    assert_eq!(app.get("/sitemap-9.xml.gz").await.status(), 404);

    let text = metrics_text(app.get("/metrics").await).await;
    for expected in [
        r#"sitemapd_http_requests_total{route="/sitemap-{n}.xml.gz",status="200"} 2"#,
        r#"sitemapd_http_requests_total{route="/sitemap-{n}.xml.gz",status="304"} 1"#,
        r#"sitemapd_http_requests_total{route="/sitemap-{n}.xml.gz",status="404"} 1"#,
        r#"sitemapd_http_requests_total{route="/sitemap_index.xml",status="200"} 1"#,
        r#"sitemapd_page_build_seconds_count 2"#,
        r#"sitemapd_rows_read_total 20"#,
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
async fn metrics_can_have_a_port_of_their_own(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    })
    .await;
    assert_eq!(
        app.get("/metrics").await.status(),
        404,
        "not on the main port"
    );
    let url = format!(
        "http://{}/metrics",
        app.metrics_addr.expect("metrics listener")
    );
    let text = metrics_text(reqwest::get(url).await.expect("metrics port answers")).await;
    assert!(text.contains("sitemapd_db_connections"), "{text}");
}
