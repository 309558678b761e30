//! A person opening a sitemap in a browser sees a table, not raw XML:
//! headless Chromium loads the documents from the running server, applies
//! `sitemap.xsl`, and the rendered page is checked (and photographed into
//! `target/`).

use std::path::PathBuf;
use std::process::Command;

use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, assert_well_formed, header};

/// Runs headless Chromium off the test's one runtime thread, which the
/// server needs to answer it.
async fn chromium(action: Vec<String>, url: String) -> String {
    chromium_logged(action, url).await.0
}

/// [`chromium`], with what the browser logged, its console included.
async fn chromium_logged(action: Vec<String>, url: String) -> (String, String) {
    tokio::task::spawn_blocking(move || {
        let profile = tempfile::TempDir::new().expect("profile directory");
        let output = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(&action)
            .arg(&url)
            .output()
            .expect("chromium runs (Debian package chromium)");
        assert!(
            output.status.success(),
            "chromium {action:?} {url}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        (
            String::from_utf8(output.stdout).expect("UTF-8 DOM"),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    })
    .await
    .expect("chromium finished")
}

fn screenshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}

#[sqlx::test]
async fn a_browser_shows_the_index_and_pages_as_tables(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 3).await;
    sqlx::query(
        "INSERT INTO sitemap_urls (loc, lastmod, changefreq, priority) VALUES
         ($1 || 'shoes?size=42&color=red', '2026-03-04 05:06:07+00', 'weekly', 0.8),
         ($1 || 'caf' || chr(233), NULL, NULL, NULL),
         ($1 || 'about', '2025-12-31', 'yearly', 0.3),
         ($1 || 'contact', NULL, 'never', NULL)",
    )
    .bind(BASE_URL)
    .execute(&app.pool)
    .await
    .expect("seed");
    app.fold().await;

    let index = chromium(vec!["--dump-dom".into()], app.url("/sitemap_index.xml")).await;
    assert!(index.contains("<h1>Sitemap index</h1>"), "{index}");
    assert!(index.contains("2 sitemaps"), "{index}");
    assert!(
        index.contains(&format!(r#"href="{BASE_URL}sitemap-1.xml""#)),
        "links to the readable pages: {index}"
    );
    assert!(
        index.contains(&format!("{BASE_URL}sitemap-2.xml.gz")),
        "{index}"
    );

    let page = chromium(vec!["--dump-dom".into()], app.url("/sitemap-1.xml")).await;
    assert!(page.contains("3 URLs"), "{page}");
    assert!(
        page.contains(r#"<a href="sitemap_index.xml">sitemap index</a>"#),
        "{page}"
    );
    for text in [
        format!("{BASE_URL}shoes?size=42&amp;color=red"),
        format!("{BASE_URL}caf%C3%A9"),
        "2026-03-04 05:06:07 UTC".to_owned(),
        "2025-12-31 00:00:00 UTC".to_owned(),
        "<td>weekly</td>".to_owned(),
        "<td>0.8</td>".to_owned(),
    ] {
        assert!(page.contains(&text), "missing {text} in {page}");
    }

    for (name, path) in [
        ("sitemap-index.png", "/sitemap_index.xml"),
        ("sitemap-page.png", "/sitemap-1.xml"),
    ] {
        let file = screenshot_path(name);
        let _ = std::fs::remove_file(&file);
        chromium(
            vec![format!("--screenshot={}", file.display())],
            app.url(path),
        )
        .await;
        let png = std::fs::read(&file).expect("screenshot written");
        assert!(png.starts_with(b"\x89PNG"), "{name} is a PNG");
    }
}

#[sqlx::test]
async fn the_stylesheet_is_served_beside_the_documents(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.base_url = "https://www.example.com/shop/".into()
    })
    .await;
    let response = app
        .get_as("www.example.com", "/shop/sitemap.xsl", &[])
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "text/xsl; charset=utf-8");
    assert!(response.headers().get("etag").is_some());
    assert_well_formed(&response.bytes().await.expect("stylesheet"));
}

#[sqlx::test]
async fn a_browser_shows_each_urls_extensions_and_the_news_articles(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let published = (time::OffsetDateTime::now_utc() - time::Duration::hours(2))
        .date()
        .to_string();
    sqlx::query(
        r#"INSERT INTO sitemap_urls (loc, images, videos, hreflang, hreflang_cluster, news) VALUES
         ($1 || 'en/a', '[{"loc": "https://cdn.example.net/1.jpg"}, {"loc": "https://cdn.example.net/2.jpg"}]',
          '[{"thumbnail_loc": "https://cdn.example.net/t.jpg", "title": "T", "description": "D",
             "content_loc": "https://cdn.example.net/v.mp4"}]',
          '{en,x-default}', 'a', NULL),
         ($1 || 'de/a', NULL, NULL, '{de}', 'a',
          jsonb_build_object('publication_name', 'Die Zeitung', 'language', 'de',
                             'publication_date', $2::text, 'title', 'Nachrichten & mehr'))"#,
    )
    .bind(BASE_URL)
    .bind(&published)
    .execute(&app.pool)
    .await
    .expect("seed");
    app.fold().await;

    let page = chromium(vec!["--dump-dom".into()], app.url("/sitemap-1.xml")).await;
    assert!(
        page.contains("2 URLs · 2 images · 1 videos · 6 alternates"),
        "{page}"
    );
    let rows = page.replace('\n', "");
    for (path, counts) in [("en/a", [2, 1, 3]), ("de/a", [0, 0, 3])] {
        let row = &rows[rows.find(&format!(">{BASE_URL}{path}<")).expect(path)..];
        let cells: String = counts
            .iter()
            .map(|n| format!(r#"<td class="count">{n}</td>"#))
            .collect();
        assert!(
            row.starts_with(&format!(">{BASE_URL}{path}</a></td>")),
            "{row}"
        );
        assert!(
            row[..row.find("</tr>").expect("row end")].ends_with(&cells),
            "{path}: {row}"
        );
    }

    let news = chromium(vec!["--dump-dom".into()], app.url("/sitemap_news.xml")).await;
    assert!(news.contains("<h1>News sitemap</h1>"), "{news}");
    assert!(news.contains("1 articles"), "{news}");
    for text in ["Nachrichten &amp; mehr", "Die Zeitung", &published] {
        assert!(news.contains(text), "missing {text} in {news}");
    }
}

#[sqlx::test]
async fn a_browser_shows_the_html_view_without_xslt(pool: PgPool) {
    let app = crate::write_api::spawn_api(pool, |s| {
        s.max_urls = 1_500;
        s.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    })
    .await;
    sqlx::query(
        "INSERT INTO sitemap_urls (section, loc, lastmod, changefreq, priority, images)
         SELECT CASE WHEN i % 4 = 0 THEN 'blog' ELSE '' END,
                $1 || 'item/' || i || '?color=red&size=' || (i % 7),
                timestamptz '2026-03-04 05:06:07+00' + i * interval '1 minute',
                (ARRAY['daily', 'weekly', NULL])[i % 3 + 1], (i % 10) / 10.0,
                CASE WHEN i % 5 = 0 THEN '[{\"loc\": \"https://cdn.example.com/a.jpg\"}]'::jsonb END
         FROM generate_series(1, 2400) i",
    )
    .bind(BASE_URL)
    .execute(&app.pool)
    .await
    .expect("seed");
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ('https://elsewhere.example.org/stray')")
        .execute(&app.pool)
        .await
        .expect("a row left out");
    app.fold().await;
    let operators = format!(
        "http://{}/sitemaps.html",
        app.metrics_addr.expect("metrics listener")
    );

    let views = [
        (
            "html-view-overview.png",
            app.url("/sitemaps.html"),
            vec![
                "2,400 URLs in 3 sitemaps",
                "sitemap-blog-1",
                "1,500",
                "Which sitemap holds this URL?",
            ],
        ),
        (
            "html-view-page.png",
            app.url("/sitemaps.html?page=sitemap-1&screen=2"),
            vec![
                "URLs 1,001–1,500 of 1,500",
                "screen 2 of 2",
                "color=red&amp;size=",
                "weekly",
            ],
        ),
        (
            "html-view-finder.png",
            app.url("/sitemaps.html?loc=%2Fitem%2F4%3Fcolor%3Dred%26size%3D4"),
            vec!["is URL 1 of", "sitemap-blog-1.xml.gz"],
        ),
        (
            "html-view-operators.png",
            operators,
            vec![
                "loc outside the site's base URL",
                "https://elsewhere.example.org/stray",
            ],
        ),
    ];
    for (screenshot, url, texts) in views {
        let dom = chromium(vec!["--dump-dom".into()], url.clone()).await;
        assert!(dom.contains("<h1>"), "{url}: {dom}");
        for text in texts {
            assert!(dom.contains(text), "{url}: missing {text} in {dom}");
        }
        let file = screenshot_path(screenshot);
        let _ = std::fs::remove_file(&file);
        chromium(vec![format!("--screenshot={}", file.display())], url).await;
        let png = std::fs::read(&file).expect("screenshot written");
        assert!(png.starts_with(b"\x89PNG"), "{screenshot} is a PNG");
    }

    let index = chromium(vec!["--dump-dom".into()], app.url("/sitemap_index.xml")).await;
    assert!(
        index.contains(r#"<a href="sitemaps.html">HTML view</a>"#),
        "the XSL view links to the HTML one: {index}"
    );
}

#[sqlx::test]
async fn the_html_view_and_the_documents_render_under_their_security_headers(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    sqlx::query("INSERT INTO sitemap_urls (loc, lastmod) VALUES ($1 || 'a', '2026-03-04')")
        .bind(BASE_URL)
        .execute(&app.pool)
        .await
        .expect("seed");
    app.fold().await;
    let view = app.get("/sitemaps.html").await;
    let policy = header(&view, "content-security-policy");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert!(!policy.contains("script"), "no script is allowed: {policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let logging = ["--enable-logging=stderr".to_owned(), "--v=0".to_owned()];
    for path in ["/sitemaps.html", "/sitemap_index.xml", "/sitemap-1.xml"] {
        let action = [logging.as_slice(), &["--dump-dom".to_owned()]].concat();
        let (dom, log) = chromium_logged(action, app.url(path)).await;
        assert!(dom.contains("<table"), "{path} renders its table: {dom}");
        assert!(
            !log.contains("Content Security Policy") && !log.contains("X-Content-Type-Options"),
            "{path} loads all it needs under its headers: {log}"
        );
    }
}

#[sqlx::test]
async fn the_crawlers_section_plots_each_crawlers_fetches_beside_the_changes(pool: PgPool) {
    use crate::crawlers::{BINGBOT, GOOGLEBOT, fetch_from, with_ranges};
    let app = TestApp::spawn_with(pool, with_ranges).await;
    app.insert_urls("", "page-", 4).await;
    app.fold().await;
    for (from, user_agent, times) in [("127.0.0.2", GOOGLEBOT, 3), ("127.0.0.3", BINGBOT, 2)] {
        for _ in 0..times {
            let response = fetch_from(
                &app,
                from,
                "/sitemap-1.xml.gz",
                &[("user-agent", user_agent)],
            )
            .await;
            assert_eq!(response.status(), 200);
        }
    }
    let mut counted: i64 = 0;
    for _ in 0..200 {
        counted = sqlx::query_scalar(
            "SELECT coalesce(sum(fetches), 0)::bigint FROM sitemap_crawler_hours",
        )
        .fetch_one(&app.pool)
        .await
        .expect("hourly counts");
        if counted == 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(counted, 5, "the ledger wrote the fetches");

    let operators = app.metrics_addr.expect("the operators' port");
    let url = format!("http://{operators}/sitemaps.html");
    let (dom, log) = chromium_logged(
        vec![
            "--enable-logging=stderr".into(),
            "--v=0".into(),
            "--dump-dom".into(),
        ],
        url.clone(),
    )
    .await;
    assert!(dom.contains(r#"<h2 id="crawlers">Crawlers</h2>"#), "{dom}");
    for series in [
        r#"data-series="googlebot" data-total="3""#,
        r#"data-series="bingbot" data-total="2""#,
        r#"data-series="changes" data-total="4""#,
    ] {
        assert!(dom.contains(series), "the plot holds {series}: {dom}");
    }
    assert_eq!(dom.matches("<polyline").count(), 2, "one line per crawler");
    assert!(
        dom.contains("googlebot ") && dom.contains("current"),
        "the page's row says when Googlebot read it and that it holds the current version"
    );
    assert!(!log.contains("Content Security Policy"), "{log}");
    let file = screenshot_path("crawlers-section.png");
    let _ = std::fs::remove_file(&file);
    chromium(
        vec![format!("--screenshot={}", file.display())],
        format!("{url}#crawlers"),
    )
    .await;
    let png = std::fs::read(&file).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
}
