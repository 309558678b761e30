//! Conditional GET as crawlers do it: strong validators from the summaries,
//! 304 without a body or a row read, and exactly the changed page
//! invalidated.

use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, header};

async fn validators(app: &TestApp, path: &str) -> (String, String) {
    let response = app.get(path).await;
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(header(&response, "cache-control"), "public, max-age=300");
    assert_eq!(header(&response, "x-robots-tag"), "noindex");
    (
        header(&response, "etag").to_owned(),
        header(&response, "last-modified").to_owned(),
    )
}

#[sqlx::test]
async fn index_and_pages_answer_304_to_current_validators(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 5).await;
    for path in ["/sitemap_index.xml", "/sitemap-1.xml.gz", "/sitemap-1.xml"] {
        let (etag, last_modified) = validators(&app, path).await;
        assert!(
            etag.starts_with('"') && !etag.starts_with("W/"),
            "strong: {etag}"
        );

        let fresh = app.conditional(path, "if-none-match", &etag).await;
        assert_eq!(fresh.status(), 304, "{path}");
        assert_eq!(header(&fresh, "etag"), etag);
        assert_eq!(header(&fresh, "cache-control"), "public, max-age=300");
        assert!(fresh.bytes().await.expect("no body").is_empty());

        let by_date = app
            .conditional(path, "if-modified-since", &last_modified)
            .await;
        assert_eq!(by_date.status(), 304, "{path}");
        let stale = app
            .conditional(path, "if-none-match", "\"something-else\"")
            .await;
        assert_eq!(stale.status(), 200, "{path}");
        let stale_date = app
            .conditional(path, "if-modified-since", "Thu, 01 Jan 2015 00:00:00 GMT")
            .await;
        assert_eq!(stale_date.status(), 200, "{path}");

        // HEAD gives GET's validators; an unconditional request is never a 304.
        let head = app.head(path).await;
        assert_eq!(head.status(), 200);
        assert_eq!(header(&head, "etag"), etag);
        assert_eq!(header(&head, "last-modified"), last_modified);
        assert_eq!(app.get(path).await.status(), 200);
    }
}

#[sqlx::test]
async fn each_representation_has_its_own_etag(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 5).await;
    let (gz, _) = validators(&app, "/sitemap-1.xml.gz").await;
    let (xml, _) = validators(&app, "/sitemap-1.xml").await;
    assert_ne!(gz, xml);
    let cross = app
        .conditional("/sitemap-1.xml", "if-none-match", &gz)
        .await;
    assert_eq!(cross.status(), 200);
}

#[sqlx::test]
async fn a_row_change_invalidates_exactly_its_page_and_the_index(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 2).await;
    app.insert_urls("", "p", 6).await;
    let paths = [
        "/sitemap_index.xml",
        "/sitemap-1.xml.gz",
        "/sitemap-2.xml.gz",
        "/sitemap-3.xml.gz",
    ];
    let mut before = Vec::new();
    for path in paths {
        before.push(validators(&app, path).await.0);
    }
    sqlx::query("UPDATE sitemap_urls SET changefreq = 'hourly' WHERE loc = $1")
        .bind(format!("{BASE_URL}p3"))
        .execute(&app.pool)
        .await
        .expect("update a row of page 2");
    app.fold().await;
    let statuses: Vec<u16> = {
        let mut statuses = Vec::new();
        for (path, etag) in paths.iter().zip(&before) {
            statuses.push(
                app.conditional(path, "if-none-match", etag)
                    .await
                    .status()
                    .as_u16(),
            );
        }
        statuses
    };
    assert_eq!(statuses, [200, 304, 200, 304]);
}

#[sqlx::test]
async fn robots_txt_revalidates_too(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let response = app.get("/robots.txt").await;
    assert_eq!(response.status(), 200);
    let etag = header(&response, "etag").to_owned();
    assert_eq!(
        app.conditional("/robots.txt", "if-none-match", &etag)
            .await
            .status(),
        304
    );
}
