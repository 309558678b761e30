//! The news sitemap: the last 48 hours of articles, newest first, a thousand
//! to a file, rolling with the clock and no write, and out of the index
//! while the window is empty.

use std::time::Duration;

use serde_json::json;
use sqlx::PgPool;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::helpers::{BASE_URL, TestApp, header};

fn loc(path: &str) -> String {
    format!("{BASE_URL}{path}")
}

/// A W3C datetime `hours_ago` before now.
fn published(hours_ago: f64) -> String {
    let at = OffsetDateTime::now_utc() - time::Duration::seconds_f64(hours_ago * 3600.0);
    at.replace_nanosecond(0)
        .expect("whole seconds")
        .format(&Rfc3339)
        .expect("formats")
}

/// Inserts `count` articles at `{prefix}{i}`, article i published
/// `hours_ago(i)` before now.
async fn insert_articles(
    app: &TestApp,
    section: &str,
    prefix: &str,
    count: usize,
    hours_ago: impl Fn(usize) -> f64,
) {
    let locs: Vec<String> = (1..=count).map(|i| loc(&format!("{prefix}{i}"))).collect();
    let news: Vec<String> = (1..=count)
        .map(|i| {
            json!({
                "publication_name": "The Example Times",
                "language": "en",
                "publication_date": published(hours_ago(i)),
                "title": format!("Story {i} & <more>"),
            })
            .to_string()
        })
        .collect();
    sqlx::query(
        "INSERT INTO sitemap_urls (section, loc, news)
         SELECT $1, l, n::jsonb FROM unnest($2::text[], $3::text[]) AS a(l, n)",
    )
    .bind(section)
    .bind(&locs)
    .bind(&news)
    .execute(&app.pool)
    .await
    .expect("articles");
    app.fold().await;
}

/// The index entry of `file`, if listed.
async fn listed(app: &TestApp, file: &str) -> Option<String> {
    app.index()
        .await
        .into_iter()
        .find(|e| e.loc == loc(file))
        .map(|e| e.lastmod)
}

/// The news sitemap's articles (checked as a crawler would), its ETag and
/// Last-Modified.
async fn news(app: &TestApp, file: &str) -> (Vec<String>, String, String) {
    let path = format!("/{file}");
    let response = app.get(&path).await;
    let etag = header(&response, "etag").to_owned();
    let modified = header(&response, "last-modified").to_owned();
    let urls = app.page(&path).await.urls;
    for url in &urls {
        let news = url.news.as_ref().expect("every entry has its news element");
        assert_eq!(news.publication.name, "The Example Times");
        assert_eq!(news.publication.language, "en");
        assert!(news.title.ends_with(" & <more>"), "{}", news.title);
        assert!(url.lastmod.is_none() && url.images.is_empty());
    }
    (urls.into_iter().map(|u| u.loc).collect(), etag, modified)
}

#[sqlx::test]
async fn articles_leave_the_news_sitemap_as_they_age_without_a_write(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    insert_articles(&app, "", "a", 3, |i| [1.0, 30.0, 47.0][i - 1]).await;
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1)")
        .bind(loc("plain"))
        .execute(&app.pool)
        .await
        .expect("a plain page");
    app.fold().await;

    let (articles, etag, modified) = news(&app, "sitemap_news.xml.gz").await;
    assert_eq!(articles, [loc("a1"), loc("a2"), loc("a3")], "newest first");
    let index_lastmod = listed(&app, "sitemap_news.xml.gz")
        .await
        .expect("listed in the index");
    let page: Vec<String> = app.page("/sitemap-1.xml.gz").await.locs();
    for article in &articles {
        assert!(page.contains(article), "{article} is in its page too");
    }
    let (plain, _) = app.plain_page("/sitemap_news.xml").await;
    assert_eq!(plain.urls.len(), 3, "the .xml form lists the same");

    // Two hours on, the 47-hour-old article has aged out: the background
    // folds notice with no write. (A request that read the version just
    // before a fold committed may carry the new articles under the old
    // ETag, never the reverse: wait for the ETag.)
    tokio::time::sleep(Duration::from_millis(1100)).await;
    app.clock.advance(time::Duration::hours(2));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (articles, etag2, modified2) = loop {
        let seen = news(&app, "sitemap_news.xml.gz").await;
        if seen.1 != etag || tokio::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(articles, [loc("a1"), loc("a2")]);
    assert_ne!(etag, etag2);
    assert_ne!(modified, modified2);
    let index_lastmod2 = listed(&app, "sitemap_news.xml.gz").await.expect("listed");
    assert!(
        index_lastmod2 > index_lastmod,
        "{index_lastmod2} > {index_lastmod}"
    );
    let (unchanged, _, _) = news(&app, "sitemap_news.xml.gz").await;
    assert_eq!(unchanged, articles);

    // Past everything: no article in the window, and a urlset must list
    // one URL, so the news sitemap leaves the index and answers 404 until
    // an article comes.
    app.clock.advance(time::Duration::hours(48));
    app.fold().await;
    assert!(listed(&app, "sitemap_news.xml.gz").await.is_none());
    for path in ["/sitemap_news.xml.gz", "/sitemap_news.xml"] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(header(&response, "cache-control"), "no-store");
        let body = response.text().await.expect("body");
        assert!(body.contains("of site default lists no URL now"), "{body}");
    }
    assert_eq!(
        app.page("/sitemap-1.xml.gz").await.urls.len(),
        4,
        "aged-out articles stay in their pages"
    );
}

#[sqlx::test]
async fn past_a_thousand_articles_the_news_sitemap_splits(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    // Article i is i minutes old: 2,500 in the window.
    insert_articles(&app, "", "n", 2_500, |i| i as f64 / 60.0).await;
    let files = [
        "sitemap_news.xml.gz",
        "sitemap_news-2.xml.gz",
        "sitemap_news-3.xml.gz",
    ];
    let mut all = Vec::new();
    for (file, expected) in files.iter().zip([1_000, 1_000, 500]) {
        let (articles, _, _) = news(&app, file).await;
        assert_eq!(articles.len(), expected, "{file}");
        assert!(listed(&app, file).await.is_some(), "{file} listed");
        all.extend(articles);
    }
    let expected: Vec<String> = (1..=2_500).map(|i| loc(&format!("n{i}"))).collect();
    assert_eq!(all, expected, "newest first, across the files");
    for missing in [
        "/sitemap_news-4.xml.gz",
        "/sitemap_news-1.xml.gz",
        "/sitemap_news-02.xml.gz",
    ] {
        assert_eq!(app.get(missing).await.status(), 404, "{missing}");
    }

    // Fewer articles: the third file empties and leaves the index.
    sqlx::query("DELETE FROM sitemap_urls WHERE loc = ANY($1)")
        .bind(expected[..600].to_vec())
        .execute(&app.pool)
        .await
        .expect("delete");
    app.fold().await;
    assert!(listed(&app, "sitemap_news-3.xml.gz").await.is_none());
    assert_eq!(app.get("/sitemap_news-3.xml.gz").await.status(), 404);
    let (first, _, _) = news(&app, "sitemap_news.xml.gz").await;
    assert_eq!(first[0], expected[600]);
}

#[sqlx::test]
async fn a_lowered_max_bytes_splits_news_sitemaps_sooner(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_bytes = 30_000).await;
    insert_articles(&app, "", "long/article/with/a/long/path/", 200, |i| {
        i as f64 / 60.0
    })
    .await;
    let mut files = 0;
    let mut seen = 0;
    for entry in app.index().await {
        let Some(file) = entry.loc.strip_prefix(BASE_URL) else {
            continue;
        };
        if file.starts_with("sitemap_news") {
            let xml = crate::helpers::gunzip(
                &app.get(&format!("/{file}"))
                    .await
                    .bytes()
                    .await
                    .expect("body"),
            );
            assert!(xml.len() <= 30_000, "{file}: {} bytes", xml.len());
            seen += news(&app, file).await.0.len();
            files += 1;
        }
    }
    assert_eq!(seen, 200, "every article in one of the files");
    assert!(files > 1, "{files} files");
}

#[sqlx::test]
async fn a_section_named_news_is_a_section_of_its_own(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    insert_articles(&app, "news", "n", 2, |i| i as f64).await;
    let index: Vec<String> = app.index().await.into_iter().map(|e| e.loc).collect();
    assert_eq!(
        index,
        [loc("sitemap-news-1.xml.gz"), loc("sitemap_news.xml.gz")],
        "pages first, then the news sitemap"
    );
    assert_eq!(app.page("/sitemap-news-1.xml.gz").await.urls.len(), 2);
    assert_eq!(news(&app, "sitemap_news.xml.gz").await.0.len(), 2);

    // No news records, no news sitemap.
    sqlx::query("UPDATE sitemap_urls SET news = NULL")
        .execute(&app.pool)
        .await
        .expect("unset");
    app.fold().await;
    assert!(listed(&app, "sitemap_news.xml.gz").await.is_none());
    assert_eq!(app.get("/sitemap_news.xml.gz").await.status(), 404);
}

#[sqlx::test]
async fn the_byte_bound_of_a_news_entry_holds_as_written(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let odd = json!({
        "publication_name": "L'\u{e9}cho & \"Co\" <daily>",
        "language": "zh-cn",
        "publication_date": published(2.0),
        "title": "\u{1F600} caf\u{e9} 'quoted' & \"doubly\" <tagged>".repeat(20),
    });
    sqlx::query("INSERT INTO sitemap_urls (loc, news) VALUES ($1, $2::jsonb)")
        .bind(loc("caf\u{e9}?a=1&b=2"))
        .bind(odd.to_string())
        .execute(&app.pool)
        .await
        .expect("article");
    app.fold().await;
    let (page, xml) = app.plain_page("/sitemap_news.xml").await;
    assert_eq!(page.urls.len(), 1);
    let news = page.urls[0].news.as_ref().expect("news");
    assert_eq!(news.title, odd["title"].as_str().expect("title"));
    assert_eq!(
        news.publication.name,
        odd["publication_name"].as_str().expect("name")
    );
    let xml = String::from_utf8(xml).expect("UTF-8");
    let entry = &xml[xml.find("<url>").expect("entry")..];
    let entry = &entry[..entry.find("</url>\n").expect("end") + "</url>\n".len()];
    let bound: i32 =
        sqlx::query_scalar("SELECT sitemap_news_entry_bytes(loc, news) FROM sitemap_urls")
            .fetch_one(&app.pool)
            .await
            .expect("bound");
    assert!(
        entry.len() <= bound as usize,
        "{} bytes written, {bound} allowed",
        entry.len()
    );
}
