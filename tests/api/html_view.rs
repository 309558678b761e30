//! `sitemaps.html`, the view that needs no XSLT: pages with their counts, a
//! page a screen at a time, the finder, and what is left out, shown only to
//! operators.

use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, header};
use crate::write_api::{TOKEN, spawn_api};

/// `n` rows of the default section, `bulk/0` … in id order.
async fn seed_rows(app: &TestApp, n: i32) {
    sqlx::query(
        "INSERT INTO sitemap_urls (loc, lastmod, changefreq, priority)
         SELECT $1 || 'bulk/' || i, timestamptz '2026-03-04 05:06:07+00', 'weekly', 0.5
         FROM generate_series(0, $2 - 1) i ORDER BY i",
    )
    .bind(BASE_URL)
    .bind(n)
    .execute(&app.pool)
    .await
    .expect("rows");
}

/// A row the sitemaps leave out: its loc is outside the site's base URL.
async fn seed_left_out(app: &TestApp) {
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ('https://elsewhere.example.org/stray')")
        .execute(&app.pool)
        .await
        .expect("stray row");
}

async fn html(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let response = app.get_as("www.example.com", path, headers).await;
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

/// The rows of the first table's body.
fn table_rows(document: &str) -> usize {
    document
        .split_once("<tbody>")
        .and_then(|(_, rest)| rest.split_once("</tbody>"))
        .map_or(0, |(rows, _)| rows.matches("<tr>").count())
}

#[sqlx::test]
async fn the_view_lists_every_page_and_shows_one_a_screen_at_a_time(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 2_500).await;
    seed_rows(&app, 2_600).await;
    sqlx::query(
        "INSERT INTO sitemap_urls (section, loc, images) VALUES
         ('blog', $1 || 'post?a=1&b=''q''', '[{\"loc\": \"https://cdn.example.com/1.jpg\"},
                                             {\"loc\": \"https://cdn.example.com/2.jpg\"}]')",
    )
    .bind(BASE_URL)
    .execute(&app.pool)
    .await
    .expect("blog row");
    app.fold().await;

    let response = app.get("/sitemaps.html").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-type"),
        "text/html; charset=utf-8"
    );
    assert_eq!(header(&response, "x-robots-tag"), "noindex");
    assert_eq!(
        header(&response, "cache-control"),
        format!("public, max-age={}", app.settings.cache_max_age_seconds)
    );
    let etag = header(&response, "etag").to_owned();
    assert!(response.headers().get("last-modified").is_some());
    let overview = response.text().await.expect("body");
    assert!(overview.contains(r#"<meta name="robots" content="noindex">"#));
    assert!(overview.contains("2,601 URLs in 3 sitemaps"), "{overview}");
    for (name, urls) in [
        ("sitemap-1", "2,500"),
        ("sitemap-2", "100"),
        ("sitemap-blog-1", "1"),
    ] {
        let row = format!(
            r#"<a href="sitemaps.html?page={name}">{name}</a></td><td class="n">{urls}</td>"#
        );
        assert!(overview.contains(&row), "{row} in {overview}");
        assert!(overview.contains(&format!(r#"href="{BASE_URL}{name}.xml.gz""#)));
    }
    assert!(
        overview.contains(r#"<td class="n">2</td><td class="n">0</td><td class="n">0</td>"#),
        "the blog page's two images: {overview}"
    );
    let revalidated = app
        .get_as(
            "www.example.com",
            "/sitemaps.html",
            &[("if-none-match", &etag)],
        )
        .await;
    assert_eq!(revalidated.status(), 304);

    let (status, screen) = html(&app, "/sitemaps.html?page=sitemap-1&screen=3", &[]).await;
    assert_eq!(status, 200);
    assert!(screen.contains("URLs 2,001–2,500 of 2,500"), "{screen}");
    assert_eq!(table_rows(&screen), 500);
    assert!(screen.contains(&format!(r#"<a href="{BASE_URL}bulk/2000">"#)));
    assert!(screen.contains(&format!(r#"<a href="{BASE_URL}bulk/2499">"#)));
    assert!(screen.contains(r#"rel="prev" href="sitemaps.html?page=sitemap-1&amp;screen=2""#));
    assert!(!screen.contains(r#"rel="next""#), "the last screen");
    assert!(screen.contains("2026-03-04 05:06:07 UTC"));
    let (_, first) = html(&app, "/sitemaps.html?page=sitemap-1", &[]).await;
    assert_eq!(table_rows(&first), 1_000);
    assert!(first.contains("screen 1 of 3"));

    let (_, blog) = html(&app, "/sitemaps.html?page=sitemap-blog-1", &[]).await;
    assert!(
        blog.contains(&format!("{BASE_URL}post?a=1&amp;b='q'")),
        "escaped once: {blog}"
    );

    for (path, status, says) in [
        ("/sitemaps.html?page=sitemap-1&screen=4", 404, "not found"),
        ("/sitemaps.html?page=sitemap-9", 404, "not found"),
        (
            "/sitemaps.html?page=sitemap-1&screen=x",
            400,
            "screen=\"x\": a screen number, from 1",
        ),
        (
            "/sitemaps.html?page=robots",
            400,
            "page=\"robots\": not a sitemap's name",
        ),
    ] {
        let (got, body) = html(&app, path, &[]).await;
        assert_eq!((got, body.contains(says)), (status, true), "{path}: {body}");
    }
}

#[sqlx::test]
async fn the_finder_names_the_page_and_screen_that_hold_a_url(pool: PgPool) {
    let app = spawn_api(pool, |s| s.max_urls = 2_500).await;
    seed_rows(&app, 2_600).await;
    seed_left_out(&app).await;
    app.fold().await;

    let (status, found) = html(&app, "/sitemaps.html?loc=%2Fbulk%2F1500", &[]).await;
    assert_eq!(status, 200);
    assert!(
        found.contains(&format!(
            r#"<code>{BASE_URL}bulk/1500</code> is URL 1,501 of <a href="sitemaps.html?page=sitemap-1&amp;screen=2">sitemap-1.xml.gz</a>"#
        )),
        "{found}"
    );
    assert!(
        found.contains(r#"value="/bulk/1500""#),
        "the form keeps the question"
    );
    let absolute = format!("/sitemaps.html?loc={BASE_URL}bulk/2599");
    let (_, found) = html(&app, &absolute, &[]).await;
    assert!(found.contains("is URL 100 of"), "{found}");
    assert!(found.contains("sitemap-2.xml.gz"), "{found}");

    let (_, absent) = html(&app, "/sitemaps.html?loc=%2Fnowhere", &[]).await;
    assert!(absent.contains("is in none of this site"), "{absent}");

    // A left-out row is not told apart from an absent one, but to operators.
    let stray = "/sitemaps.html?loc=https%3A%2F%2Felsewhere.example.org%2Fstray";
    let (status, public) = html(&app, stray, &[]).await;
    assert_eq!(status, 200);
    assert!(
        public.contains(&format!(
            "is in none of this site's sitemaps (it is not under its base URL {BASE_URL})."
        )),
        "{public}"
    );
    let bearer = format!("Bearer {TOKEN}");
    let (_, operator) = html(&app, stray, &[("authorization", &bearer)]).await;
    assert!(
        operator.contains("is left out of the sitemaps: loc outside the site's base URL"),
        "{operator}"
    );

    let (status, refused) = html(&app, "/sitemaps.html?loc=ftp%3A%2F%2Fx", &[]).await;
    assert_eq!(status, 400);
    assert!(
        refused.contains("<code>ftp://x</code> is not a URL a sitemap can hold: it must be"),
        "{refused}"
    );
}

#[sqlx::test]
async fn what_is_left_out_is_shown_only_to_operators(pool: PgPool) {
    let app = spawn_api(pool, |s| {
        s.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    })
    .await;
    seed_rows(&app, 3).await;
    seed_left_out(&app).await;
    app.fold().await;
    let reason = format!(
        "loc outside the site's base URL {}",
        BASE_URL.trim_end_matches('/')
    );
    let example = "https://elsewhere.example.org/stray";

    let (status, public) = html(&app, "/sitemaps.html", &[]).await;
    assert_eq!(status, 200);
    assert!(!public.contains(example), "{public}");
    assert!(!public.contains("outside the site"), "{public}");
    assert!(public.contains("shown with an API token"), "{public}");
    let (_, wrong_token) = html(&app, "/sitemaps.html", &[("authorization", "Bearer nope")]).await;
    assert!(!wrong_token.contains(example));

    let bearer = format!("Bearer {TOKEN}");
    let response = app
        .get_as(
            "www.example.com",
            "/sitemaps.html",
            &[("authorization", &bearer)],
        )
        .await;
    assert_eq!(header(&response, "cache-control"), "private, no-store");
    assert!(response.headers().get("etag").is_none());
    let operator = response.text().await.expect("body");
    assert!(operator.contains(&reason), "{operator}");
    assert!(
        operator.contains(&format!("<code>{example}</code>")),
        "{operator}"
    );
    assert!(operator.contains(r#"<td class="n">1</td>"#), "{operator}");

    let on_listener = app.operators("/sitemaps.html").await;
    assert_eq!(on_listener.status(), 200);
    assert_eq!(header(&on_listener, "cache-control"), "private, no-store");
    let on_listener = on_listener.text().await.expect("body");
    assert!(on_listener.contains(&reason), "{on_listener}");
    assert!(
        on_listener.contains(r#"<a href="/sitemaps.html?site=default&amp;page=sitemap-1">"#),
        "links stay on the listener: {on_listener}"
    );
    let unknown = app.operators("/sitemaps.html?site=nope").await;
    assert_eq!(unknown.status(), 400);
    assert!(
        unknown
            .text()
            .await
            .expect("body")
            .contains("site=\"nope\": no such site")
    );
}

#[sqlx::test]
async fn news_titles_are_escaped_in_the_news_screen(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let published = (time::OffsetDateTime::now_utc() - time::Duration::hours(1))
        .format(&time::format_description::well_known::Rfc3339)
        .expect("date");
    let news = serde_json::json!({
        "publication_name": "The <Example> Times",
        "language": "en",
        "publication_date": published,
        "title": "<script>alert(1)</script> & more",
    });
    sqlx::query("INSERT INTO sitemap_urls (loc, news) VALUES ($1, $2::jsonb)")
        .bind(format!("{BASE_URL}story"))
        .bind(news.to_string())
        .execute(&app.pool)
        .await
        .expect("article");
    app.fold().await;

    let (_, overview) = html(&app, "/sitemaps.html", &[]).await;
    assert!(
        overview.contains(r#"<a href="sitemaps.html?page=sitemap_news">sitemap_news</a>"#),
        "{overview}"
    );
    let (status, screen) = html(&app, "/sitemaps.html?page=sitemap_news", &[]).await;
    assert_eq!(status, 200);
    assert!(
        screen.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; more"),
        "{screen}"
    );
    assert!(!screen.contains("<script>"), "{screen}");
    assert!(screen.contains("The &lt;Example&gt; Times"), "{screen}");
    assert_eq!(table_rows(&screen), 1);
}

#[sqlx::test]
async fn every_response_is_nosniff_and_the_view_allows_no_script(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    })
    .await;
    seed_rows(&app, 3).await;

    let view = app.get("/sitemaps.html").await;
    assert_eq!(view.status(), 200);
    assert_eq!(header(&view, "x-content-type-options"), "nosniff");
    assert_eq!(header(&view, "referrer-policy"), "no-referrer");
    assert_eq!(header(&view, "x-frame-options"), "DENY");
    let policy = header(&view, "content-security-policy");
    for directive in [
        "default-src 'none'",
        "style-src 'sha256-",
        "img-src 'self' data:",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(directive), "{directive}: {policy}");
    }
    assert!(!policy.contains("script"), "{policy}");

    // An error that quotes its input stays text, and is never sniffed.
    let echoed = app
        .get("/sitemaps.html?page=%3Cimg%20src=x%20onerror=alert(1)%3E")
        .await;
    assert_eq!(echoed.status(), 400);
    assert!(header(&echoed, "content-type").starts_with("text/plain"));
    assert_eq!(header(&echoed, "x-content-type-options"), "nosniff");

    for path in [
        "/sitemap_index.xml",
        "/sitemap-1.xml.gz",
        "/sitemap.xsl",
        "/robots.txt",
        "/healthz",
        "/no-such-sitemap.xml",
    ] {
        let response = app.get(path).await;
        assert_eq!(
            header(&response, "x-content-type-options"),
            "nosniff",
            "{path}"
        );
    }
    let operators = format!(
        "http://{}/metrics",
        app.metrics_addr.expect("metrics listener")
    );
    let metrics = crate::helpers::client()
        .get(operators)
        .send()
        .await
        .expect("metrics");
    assert_eq!(header(&metrics, "x-content-type-options"), "nosniff");
}

/// A query value: printable text with markup in it, controls, long runs,
/// bytes that are no UTF-8, and broken percent escapes.
fn fuzzed_value() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        "[a-z0-9/:.-]{0,12}",
        Just("<x-fuzz onerror=alert(1)>".to_owned()),
        Just("\"'><script>".to_owned()),
        Just("https://www.example.com/a?b=c&d".to_owned()),
        Just("sitemap-1".to_owned()),
        Just("9999999999999999999999".to_owned()),
        Just("-1".to_owned()),
        Just("%".to_owned()),
        Just("%G1".to_owned()),
        Just("%00%0a%0d%1b".to_owned()),
        Just("%FF%FE%C3".to_owned()),
        Just("%E2%80%AE".to_owned()),
        any::<u8>().prop_map(|b| format!("%{b:02X}")),
        (1usize..5000).prop_map(|n| "a".repeat(n)),
    ];
    proptest::collection::vec(piece, 0..4).prop_map(|pieces| pieces.concat())
}

#[sqlx::test]
async fn the_view_answers_any_query_with_200_400_or_404_and_escapes_it(pool: PgPool) {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let app = TestApp::spawn(pool).await;
    seed_rows(&app, 3).await;
    seed_left_out(&app).await;
    let operators = app.metrics_addr.expect("the operators' port");
    let keys = prop_oneof![
        Just("loc"),
        Just("page"),
        Just("screen"),
        Just("site"),
        Just("other"),
        Just(""),
    ];
    let queries = proptest::collection::vec((keys, fuzzed_value()), 0..5);
    let mut runner = TestRunner::deterministic();
    let client = crate::helpers::client();
    for case in 0..300 {
        let pairs = queries.new_tree(&mut runner).expect("a query").current();
        let query: Vec<String> = pairs
            .iter()
            .map(|(key, value)| format!("{key}={}", value.replace(' ', "%20")))
            .collect();
        let host = if case % 2 == 0 {
            app.addr.to_string()
        } else {
            operators.to_string()
        };
        let url = format!("http://{host}/sitemaps.html?{}", query.join("&"));
        let response = client.get(&url).send().await.expect("answered");
        let status = response.status().as_u16();
        let content_type = header(&response, "content-type").to_owned();
        assert_eq!(header(&response, "x-content-type-options"), "nosniff");
        let body = response.text().await.expect("body");
        // The view answers in HTML, a finder's refusal included; a query
        // refused before the view sees it is plain text.
        match status {
            200 => assert!(content_type.starts_with("text/html"), "{url}"),
            400 | 404 => assert!(
                content_type.starts_with("text/html") || content_type.starts_with("text/plain"),
                "{status} {content_type} for {url}"
            ),
            other => panic!("{other} for {url}: {body}"),
        }
        if content_type.starts_with("text/html") {
            assert!(
                !body.contains("<x-fuzz") && !body.contains("<script"),
                "unescaped input in {url}"
            );
        }
    }
}
