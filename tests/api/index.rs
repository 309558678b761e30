use sqlx::PgPool;

use crate::helpers::{BASE_URL, Schema, TestApp, assert_valid, gunzip, header, robots_command};

/// siteindex.xsd wants one sitemap at least, so a site with no URL has no
/// valid index: a `404` that says why, kept by no cache, until its first
/// URL; then `/sitemap.xml`, the name tools try first, is the same document
/// with the same validators.
#[sqlx::test]
async fn an_empty_site_has_no_index_until_its_first_url_and_sitemap_xml_is_the_index(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    for path in [
        "/sitemap_index.xml",
        "/sitemap.xml",
        "/sitemap_index.xml.gz",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(header(&response, "cache-control"), "no-store", "{path}");
        let body = response.text().await.expect("body");
        assert!(
            body.contains("site default lists no URL yet"),
            "{path}: {body}"
        );
    }
    assert!(app.index().await.is_empty());

    app.insert_urls("", "first-", 1).await;
    app.fold().await;
    let index = app.get("/sitemap_index.xml").await;
    let alias = app.get("/sitemap.xml").await;
    assert_eq!(
        (index.status().as_u16(), alias.status().as_u16()),
        (200, 200)
    );
    for name in ["etag", "last-modified", "content-type"] {
        assert_eq!(header(&index, name), header(&alias, name), "{name}");
    }
    let (index, alias) = (
        index.bytes().await.expect("index"),
        alias.bytes().await.expect("alias"),
    );
    assert_eq!(index, alias);
    assert_valid(&alias, Schema::Index);
    let gz = app.get("/sitemap.xml.gz").await;
    assert_eq!(gz.status(), 200);
    assert_eq!(gunzip(&gz.bytes().await.expect("gz")), index.to_vec());
}

#[sqlx::test]
async fn one_row_gives_one_page_holding_it(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "only-", 1).await;

    let index = app.index().await;
    assert_eq!(index.len(), 1);
    assert_eq!(index[0].loc, format!("{BASE_URL}sitemap-1.xml.gz"));

    let page = app.page("/sitemap-1.xml.gz").await;
    assert_eq!(page.urls.len(), 1);
    assert_eq!(page.urls[0].loc, format!("{BASE_URL}only-1"));
}

#[sqlx::test]
async fn index_urls_come_from_configuration_never_from_the_request(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 1).await;
    let response = crate::helpers::client()
        .get(app.url("/sitemap_index.xml"))
        .header("host", "evil.example")
        .header("x-forwarded-host", "evil.example")
        .header("x-forwarded-proto", "http")
        .header("forwarded", "host=evil.example;proto=http")
        .send()
        .await
        .expect("request sent");
    let body = response.text().await.expect("body");
    assert!(!body.contains("evil"), "{body}");
    assert!(
        body.contains(&format!("<loc>{BASE_URL}sitemap-1.xml.gz</loc>")),
        "{body}"
    );
}

#[sqlx::test]
async fn sections_get_pages_of_their_own(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "home/", 2).await;
    app.insert_urls("blog", "blog/", 3).await;
    app.insert_urls("news-de", "news/", 1).await;

    let locs: Vec<String> = app.index().await.into_iter().map(|e| e.loc).collect();
    assert_eq!(
        locs,
        [
            format!("{BASE_URL}sitemap-1.xml.gz"),
            format!("{BASE_URL}sitemap-blog-1.xml.gz"),
            format!("{BASE_URL}sitemap-news-de-1.xml.gz"),
        ]
    );
    let blog = app.page("/sitemap-blog-1.xml.gz").await;
    assert_eq!(blog.urls.len(), 3);
    assert!(
        blog.urls
            .iter()
            .all(|u| u.loc.starts_with(&format!("{BASE_URL}blog/")))
    );
    assert_eq!(app.served_locs().await, app.table_locs().await);
}

#[sqlx::test]
async fn index_carries_the_protocol_headers(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "page-", 1).await;
    app.fold().await;
    let response = app.get("/sitemap_index.xml").await;
    assert_eq!(header(&response, "x-robots-tag"), "noindex");
    assert!(response.headers().get("content-encoding").is_none());

    let head = app.head("/sitemap_index.xml").await;
    assert_eq!(head.status(), 200);
    assert_eq!(
        header(&head, "content-type"),
        "application/xml; charset=utf-8"
    );
    assert_eq!(
        header(&head, "content-length"),
        header(&response, "content-length")
    );
    assert!(head.bytes().await.expect("no body").is_empty());
}

#[sqlx::test]
async fn more_pages_than_an_index_lists_make_several_indexes(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.max_urls = 1;
        s.max_index_entries = 2;
    })
    .await;
    app.insert_urls("", "p", 5).await;
    let mut listed = Vec::new();
    for path in [
        "/sitemap_index.xml",
        "/sitemap_index-2.xml",
        "/sitemap_index-3.xml",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        let xml = response.bytes().await.expect("index");
        crate::helpers::assert_valid(&xml, crate::helpers::Schema::Index);
        let text = String::from_utf8(xml.to_vec()).expect("UTF-8");
        assert!(
            !text.contains("sitemap_index"),
            "never a nested index: {text}"
        );
        listed.push(text.matches("<sitemap>").count());
    }
    assert_eq!(listed, [2, 2, 1]);
    for path in [
        "/sitemap_index-4.xml",
        "/sitemap_index-1.xml",
        "/sitemap_index-02.xml",
    ] {
        assert_eq!(app.get(path).await.status(), 404, "{path}");
    }
    let robots = app.get("/robots.txt").await.text().await.expect("robots");
    assert_eq!(
        robots,
        format!(
            "Sitemap: {BASE_URL}sitemap_index.xml\nSitemap: {BASE_URL}sitemap_index-2.xml\nSitemap: {BASE_URL}sitemap_index-3.xml\n"
        )
    );
}

#[sqlx::test]
async fn the_index_is_also_a_gzip_file_announced_as_configured(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.max_urls = 2;
        s.max_index_entries = 2;
        s.index_format = sitemapd::site::IndexFormat::XmlGz;
    })
    .await;
    app.insert_urls("", "p", 5).await;
    for (plain, gzip) in [
        ("/sitemap_index.xml", "/sitemap_index.xml.gz"),
        ("/sitemap_index-2.xml", "/sitemap_index-2.xml.gz"),
    ] {
        let xml = app.get(plain).await;
        let xml_etag = header(&xml, "etag").to_owned();
        let xml = xml.bytes().await.expect("index");
        let response = app.get(gzip).await;
        assert_eq!(response.status(), 200, "{gzip}");
        assert_eq!(header(&response, "content-type"), "application/gzip");
        assert!(response.headers().get("content-encoding").is_none());
        assert!(response.headers().get("vary").is_none());
        let etag = header(&response, "etag").to_owned();
        assert_ne!(etag, xml_etag, "a representation of its own");
        let document = gunzip(&response.bytes().await.expect("gzip index"));
        assert_eq!(document, xml, "the same document as {plain}");
        assert_valid(&document, Schema::Index);
        // Its <loc>s are the pages' own names.
        assert!(String::from_utf8_lossy(&document).contains(".xml.gz</loc>"));
        assert_eq!(
            app.conditional(gzip, "if-none-match", &etag).await.status(),
            304
        );
    }
    assert_eq!(app.get("/sitemap_index-3.xml.gz").await.status(), 404);
    let robots = app.get("/robots.txt").await.text().await.expect("robots");
    assert_eq!(
        robots,
        format!(
            "Sitemap: {BASE_URL}sitemap_index.xml.gz\nSitemap: {BASE_URL}sitemap_index-2.xml.gz\n"
        )
    );
}

#[sqlx::test]
async fn sitemapd_robots_names_the_configured_index_format(pool: PgPool) {
    assert_eq!(
        robots_command(&pool, &[("SITEMAPD_INDEX_FORMAT", "xml.gz")]).await,
        format!("Sitemap: {BASE_URL}sitemap_index.xml.gz\n")
    );
}

#[sqlx::test]
async fn each_index_file_keeps_within_max_bytes_under_a_long_base_url(pool: PgPool) {
    let base_url = format!("https://www.example.com/{}", "deep/".repeat(150));
    let max_bytes = sitemapd::sitemap::MIN_MAX_BYTES;
    let app = TestApp::spawn_with(pool, |s| {
        s.base_url = base_url.clone();
        s.max_urls = 1;
        s.max_bytes = max_bytes;
    })
    .await;
    // Enough pages for two full index files and part of a third.
    let capacity = sitemapd::sitemap::IndexWriter::capacity(&base_url, max_bytes);
    assert!(capacity < 100, "this base URL fits {capacity} entries");
    let pages = 2 * capacity + 3;
    sqlx::query(
        "INSERT INTO sitemap_urls (loc) SELECT $1 || 'p' || g FROM generate_series(1, $2) g",
    )
    .bind(&base_url)
    .bind(pages as i64)
    .execute(&app.pool)
    .await
    .expect("rows");
    app.fold().await;

    let robots = app.get("/robots.txt").await.text().await.expect("robots");
    let parts: Vec<&str> = robots
        .lines()
        .filter_map(|line| line.strip_prefix("Sitemap: "))
        .collect();
    assert_eq!(parts.len(), 3, "{robots}");
    let mut listed = Vec::new();
    for part in parts {
        let path = part
            .strip_prefix("https://www.example.com")
            .expect("under the base URL")
            .to_owned();
        let response = app.get(&path).await;
        assert_eq!(response.status(), 200, "{path}");
        let xml = response.bytes().await.expect("index");
        assert!(xml.len() as u64 <= max_bytes, "{path}: {} bytes", xml.len());
        assert_valid(&xml, Schema::Index);
        let text = String::from_utf8(xml.to_vec()).expect("UTF-8");
        listed.extend(
            text.split("<loc>")
                .skip(1)
                .map(|entry| entry.split("</loc>").next().expect("closed").to_owned()),
        );
    }
    let expected: Vec<String> = (1..=pages)
        .map(|page| format!("{base_url}sitemap-{page}.xml.gz"))
        .collect();
    assert_eq!(listed, expected, "every page listed once, in order");
}

/// The `<loc>`s and `<lastmod>`s of an index document, validated.
async fn index_entries(app: &TestApp, path: &str) -> Vec<(String, String)> {
    let response = app.get(path).await;
    assert_eq!(response.status(), 200, "{path}");
    let body = response.bytes().await.expect("index");
    let xml = if path.ends_with(".gz") {
        gunzip(&body)
    } else {
        body.to_vec()
    };
    assert_valid(&xml, Schema::Index);
    String::from_utf8(xml)
        .expect("UTF-8")
        .split("<sitemap>")
        .skip(1)
        .map(|entry| {
            let field = |tag: &str| {
                entry
                    .split(&format!("<{tag}>"))
                    .nth(1)
                    .and_then(|rest| rest.split(&format!("</{tag}>")).next())
                    .expect("present")
                    .to_owned()
            };
            (field("loc"), field("lastmod"))
        })
        .collect()
}

#[sqlx::test]
async fn a_nested_index_lists_the_index_files_with_their_lastmods(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.max_urls = 1;
        s.max_index_entries = 2;
        s.nested_index = true;
    })
    .await;
    app.insert_urls("", "p", 5).await;
    let locs = |entries: &[(String, String)]| -> Vec<String> {
        entries.iter().map(|(loc, _)| loc.clone()).collect()
    };

    let root = index_entries(&app, "/sitemap_index.xml").await;
    assert_eq!(
        locs(&root),
        [
            "sitemap_index-1.xml",
            "sitemap_index-2.xml",
            "sitemap_index-3.xml"
        ]
        .map(|file| format!("{BASE_URL}{file}"))
    );
    let gz_root = index_entries(&app, "/sitemap_index.xml.gz").await;
    assert_eq!(gz_root[0].0, format!("{BASE_URL}sitemap_index-1.xml.gz"));
    for (part, pages) in [(1, vec![1, 2]), (2, vec![3, 4]), (3, vec![5])] {
        let entries = index_entries(&app, &format!("/sitemap_index-{part}.xml")).await;
        let expected: Vec<String> = pages
            .iter()
            .map(|page| format!("{BASE_URL}sitemap-{page}.xml.gz"))
            .collect();
        assert_eq!(locs(&entries), expected, "part {part}");
        // A part's lastmod is the newest of its pages' (and those before).
        let newest = entries
            .iter()
            .map(|(_, lastmod)| lastmod)
            .max()
            .expect("entries");
        assert!(&root[part - 1].1 >= newest, "part {part}");
    }
    assert_eq!(app.get("/sitemap_index-4.xml").await.status(), 404);
    let robots = app.get("/robots.txt").await.text().await.expect("robots");
    assert_eq!(
        robots
            .lines()
            .filter(|l| l.starts_with("Sitemap:"))
            .collect::<Vec<_>>(),
        [format!("Sitemap: {BASE_URL}sitemap_index.xml")],
        "robots.txt names the root alone"
    );

    // A change on page 5 moves part 3 alone.
    let etag = header(&app.get("/sitemap_index.xml").await, "etag").to_owned();
    sqlx::query("UPDATE sitemap_urls SET lastmod = now() WHERE loc = $1")
        .bind(format!("{BASE_URL}p5"))
        .execute(&app.pool)
        .await
        .expect("update");
    app.fold().await;
    let after = index_entries(&app, "/sitemap_index.xml").await;
    assert_eq!(after[..2], root[..2]);
    assert!(after[2].1 > root[2].1, "{} > {}", after[2].1, root[2].1);
    assert_ne!(header(&app.get("/sitemap_index.xml").await, "etag"), etag);

    // Pages that fit one index are listed by the root itself.
    sqlx::query("DELETE FROM sitemap_urls WHERE loc <> ALL($1)")
        .bind([format!("{BASE_URL}p1"), format!("{BASE_URL}p2")])
        .execute(&app.pool)
        .await
        .expect("delete");
    app.fold().await;
    assert_eq!(
        locs(&index_entries(&app, "/sitemap_index.xml").await),
        [
            format!("{BASE_URL}sitemap-1.xml.gz"),
            format!("{BASE_URL}sitemap-2.xml.gz")
        ]
    );
    assert_eq!(app.get("/sitemap_index-1.xml").await.status(), 404);
}
