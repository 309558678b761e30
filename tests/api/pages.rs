use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, gunzip, header};

#[sqlx::test]
async fn exactly_50000_urls_fit_one_page(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "item/", 50_000).await;

    let index = app.index().await;
    assert_eq!(index.len(), 1);
    let page = app.page("/sitemap-1.xml.gz").await;
    assert_eq!(page.urls.len(), 50_000);
}

#[sqlx::test]
async fn url_50001_opens_a_second_page(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "item/", 50_001).await;

    let pages = app.crawl().await;
    let sizes: Vec<(&str, usize)> = pages
        .iter()
        .map(|(path, locs)| (path.as_str(), locs.len()))
        .collect();
    assert_eq!(
        sizes,
        [("/sitemap-1.xml.gz", 50_000), ("/sitemap-2.xml.gz", 1)]
    );
    assert_eq!(pages[1].1, [format!("{BASE_URL}item/50001")]);
    assert_eq!(app.served_locs().await, app.table_locs().await);
}

#[sqlx::test]
async fn the_byte_limit_cuts_pages_of_long_urls(pool: PgPool) {
    const MAX_BYTES: u64 = 64 * 1024;
    let app = TestApp::spawn_with(pool, |s| s.max_bytes = MAX_BYTES).await;
    // 2,000-character locs: 50,000 of them would be ~100 MB, far over 50 MiB;
    // here 100 of them are ~200 KB, over a 64 KiB limit.
    let padding = "x".repeat(2000 - BASE_URL.len() - "long//".len() - 3);
    sqlx::query(
        "INSERT INTO sitemap_urls (loc) SELECT $1 || 'long/' || lpad(g::text, 3, '0') || '/' || $2
         FROM generate_series(1, 100) g",
    )
    .bind(BASE_URL)
    .bind(&padding)
    .execute(&app.pool)
    .await
    .expect("insert long rows");
    app.fold().await;

    let pages = app.crawl().await;
    assert!(
        pages.len() >= 4,
        "100 × 2 KB must need several 64 KiB pages, got {}",
        pages.len()
    );
    for (i, (path, _)) in pages.iter().enumerate() {
        let (page, xml) = app.plain_page(&path.replace(".xml.gz", ".xml")).await;
        assert!(xml.len() as u64 <= MAX_BYTES, "{path}: {} bytes", xml.len());
        // Pages are packed: each but the last holds as much as fits.
        if i + 1 < pages.len() {
            assert!(
                page.bytes as u64 > MAX_BYTES / 2,
                "{path}: only {} bytes",
                page.bytes
            );
        }
    }
    assert_eq!(app.served_locs().await, app.table_locs().await);
}

#[sqlx::test]
async fn locs_are_escaped_and_round_trip(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let stored_and_served = [
        ("a?x=1&y=2", "a?x=1&y=2"),
        ("q?expr=<b>&quote=\"it's\"", "q?expr=<b>&quote=\"it's\""),
        (
            "already%20encoded/%C3%A9t%C3%A9",
            "already%20encoded/%C3%A9t%C3%A9",
        ),
        (
            "caf\u{e9}/stra\u{df}e/\u{65e5}\u{672c}",
            "caf%C3%A9/stra%C3%9Fe/%E6%97%A5%E6%9C%AC",
        ),
        (
            "emoji-\u{1F600}?q=%F0%9F%98%80",
            "emoji-%F0%9F%98%80?q=%F0%9F%98%80",
        ),
        ("amp-entity-&amp;-literal", "amp-entity-&amp;-literal"),
    ];
    for (stored, _) in stored_and_served {
        sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1)")
            .bind(format!("{BASE_URL}{stored}"))
            .execute(&app.pool)
            .await
            .expect("insert");
        app.fold().await;
    }
    let page = app.page("/sitemap-1.xml.gz").await;
    let served: Vec<&str> = page.urls.iter().map(|u| u.loc.as_str()).collect();
    let expected: Vec<String> = stored_and_served
        .iter()
        .map(|(_, served)| format!("{BASE_URL}{served}"))
        .collect();
    assert_eq!(served, expected);

    let (_, raw) = app.plain_page("/sitemap-1.xml").await;
    let raw = String::from_utf8(raw).expect("UTF-8");
    assert!(raw.contains("a?x=1&amp;y=2</loc>"), "{raw}");
    assert!(raw.contains("amp-entity-&amp;amp;-literal</loc>"), "{raw}");
    assert!(raw.is_ascii(), "non-ASCII is percent-encoded");
}

#[sqlx::test]
async fn optional_fields_are_rendered_in_protocol_form(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    sqlx::query(
        "INSERT INTO sitemap_urls (loc, lastmod, changefreq, priority) VALUES
         ($1 || 'full', '2026-03-04 05:06:07.891+02', 'weekly', 0.8),
         ($1 || 'bare', NULL, NULL, NULL),
         ($1 || 'date-only', '2025-12-31', NULL, 1)",
    )
    .bind(BASE_URL)
    .execute(&app.pool)
    .await
    .expect("insert");
    app.fold().await;
    let urls = app.page("/sitemap-1.xml.gz").await.urls;
    let full = &urls[0];
    assert_eq!(full.lastmod.as_deref(), Some("2026-03-04T03:06:07+00:00"));
    assert_eq!(full.changefreq.as_deref(), Some("weekly"));
    assert_eq!(full.priority.as_deref(), Some("0.8"));
    assert_eq!(
        (&urls[1].lastmod, &urls[1].changefreq, &urls[1].priority),
        (&None, &None, &None)
    );
    assert_eq!(urls[2].priority.as_deref(), Some("1.0"));
}

#[sqlx::test]
async fn lastmod_falls_back_to_updated_at_only_when_configured(pool: PgPool) {
    sqlx::query(
        "INSERT INTO sitemap_urls (loc, updated_at) VALUES ($1 || 'x', '2026-01-02 03:04:05+00')",
    )
    .bind(BASE_URL)
    .execute(&pool)
    .await
    .expect("insert");
    let off = TestApp::spawn(pool.clone()).await;
    assert_eq!(off.page("/sitemap-1.xml.gz").await.urls[0].lastmod, None);
    let on = TestApp::spawn_with(pool, |s| s.lastmod_fallback = true).await;
    assert_eq!(
        on.page("/sitemap-1.xml.gz").await.urls[0]
            .lastmod
            .as_deref(),
        Some("2026-01-02T03:04:05+00:00")
    );
}

#[sqlx::test]
async fn plain_and_gzip_forms_serve_the_same_document(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("blog", "post/", 3000).await;
    let gz = app
        .get("/sitemap-blog-1.xml.gz")
        .await
        .bytes()
        .await
        .expect("gz body");
    let (_, xml) = app.plain_page("/sitemap-blog-1.xml").await;
    assert_eq!(gunzip(&gz), xml);
}

#[sqlx::test]
async fn head_answers_like_get_without_a_body(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 10).await;
    for path in ["/sitemap-1.xml.gz", "/sitemap-1.xml"] {
        let get = app.get(path).await;
        let head = app.head(path).await;
        assert_eq!(head.status(), get.status());
        for name in ["content-type", "x-robots-tag"] {
            assert_eq!(header(&head, name), header(&get, name), "{path} {name}");
        }
        assert!(head.headers().get("content-encoding").is_none());
        assert!(head.bytes().await.expect("empty").is_empty());
    }
    assert_eq!(app.head("/sitemap-2.xml.gz").await.status(), 404);
}

#[sqlx::test]
async fn anything_but_an_existing_page_is_a_404(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 3).await;
    app.insert_urls("blog", "b", 3).await;
    for path in [
        "/sitemap-0.xml.gz",
        "/sitemap-007.xml.gz",
        "/sitemap-01.xml",
        "/sitemap-+5.xml.gz",
        "/sitemap--1.xml.gz",
        "/sitemap-abc.xml.gz",
        "/sitemap-1000000000000000000000000000000.xml.gz",
        "/sitemap-2147483648.xml.gz",
        "/sitemap-2.xml.gz",
        "/sitemap-missing-1.xml.gz",
        "/sitemap-blog-2.xml",
        "/sitemap-Blog-1.xml",
        "/sitemap-%31.xml.gz",
        "/sitemap-1.xml.gz.gz",
        "/sitemap-1.xml/",
        "/sitemap-1.txt",
        "/index.html",
        "/a/b/sitemap-1.xml.gz",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 404, "{path}");
    }
    assert_eq!(app.get("/sitemap-1.xml.gz").await.status(), 200);
    assert_eq!(app.get("/sitemap-blog-1.xml").await.status(), 200);
}
