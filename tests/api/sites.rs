//! Several sites behind one service: routed by Host and path prefix,
//! isolated from each other, their URLs from configuration alone.

use sitemapd::config::{Settings, SiteSettings};
use sqlx::PgPool;

use crate::helpers::{TestApp, header};

const WWW: &str = "https://www.example.com/";
const SHOP: &str = "https://www.example.com/shop/";
const BLOG: &str = "https://blog.example.org/";

fn three_sites(settings: &mut Settings) {
    settings.base_url = WWW.into();
    settings.robots_txt = Some("User-agent: *\nDisallow: /admin/".into());
    settings.strict_host = true;
    for (name, base_url) in [("shop", SHOP), ("blog", BLOG)] {
        settings.sites.insert(
            name.into(),
            SiteSettings {
                base_url: base_url.into(),
                robots_txt: None,
                robots_file: None,
            },
        );
    }
}

async fn seed(app: &TestApp) {
    for (site, base, n) in [("default", WWW, 3), ("shop", SHOP, 2), ("blog", BLOG, 1)] {
        sqlx::query("INSERT INTO sitemap_urls (site, loc) SELECT $1, $2 || 'p' || g FROM generate_series(1, $3) g")
            .bind(site)
            .bind(base)
            .bind(n)
            .execute(&app.pool)
            .await
            .expect("seed");
        app.fold().await;
    }
    // A row filed under the wrong site: outside its base URL, never served.
    sqlx::query("INSERT INTO sitemap_urls (site, loc) VALUES ('blog', $1)")
        .bind(format!("{WWW}intruder"))
        .execute(&app.pool)
        .await
        .expect("seed");
    app.fold().await;
}

async fn body(response: reqwest::Response) -> String {
    assert_eq!(response.status(), 200, "{}", response.url());
    response.text().await.expect("body")
}

#[sqlx::test]
async fn sites_on_hosts_and_under_a_prefix_are_isolated(pool: PgPool) {
    let app = TestApp::spawn_with(pool, three_sites).await;
    seed(&app).await;

    let www = body(
        app.get_as("www.example.com", "/sitemap_index.xml", &[])
            .await,
    )
    .await;
    assert!(
        www.contains(&format!("<loc>{WWW}sitemap-1.xml.gz</loc>")),
        "{www}"
    );
    assert!(!www.contains("shop/") && !www.contains("blog."), "{www}");

    let shop = body(
        app.get_as("www.example.com", "/shop/sitemap_index.xml", &[])
            .await,
    )
    .await;
    assert!(
        shop.contains(&format!("<loc>{SHOP}sitemap-1.xml.gz</loc>")),
        "{shop}"
    );
    assert_eq!(shop.matches("<sitemap>").count(), 1);

    let blog = body(
        app.get_as("BLOG.example.org:443", "/sitemap_index.xml", &[])
            .await,
    )
    .await;
    assert!(
        blog.contains(&format!("<loc>{BLOG}sitemap-1.xml.gz</loc>")),
        "{blog}"
    );

    let shop_page = body(
        app.get_as("www.example.com", "/shop/sitemap-1.xml", &[])
            .await,
    )
    .await;
    assert_eq!(shop_page.matches("<url>").count(), 2);
    assert!(shop_page.contains(&format!("{SHOP}p1")));
    let blog_page = body(app.get_as("blog.example.org", "/sitemap-1.xml", &[]).await).await;
    assert_eq!(
        blog_page.matches("<url>").count(),
        1,
        "the intruder is left out: {blog_page}"
    );

    for (host, path) in [
        ("evil.example", "/sitemap_index.xml"),
        ("127.0.0.1", "/sitemap_index.xml"),
        ("blog.example.org", "/shop/sitemap_index.xml"),
        ("www.example.com", "/shop/sitemap-2.xml"),
        ("www.example.com", "/blog/sitemap_index.xml"),
    ] {
        assert_eq!(
            app.get_as(host, path, &[]).await.status(),
            404,
            "{host}{path}"
        );
    }
}

#[sqlx::test]
async fn a_proxy_that_strips_the_prefix_is_served_too(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.base_url = "https://www.example.com/catalog/".into();
        s.proxy_strips_prefix = true;
    })
    .await;
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ('https://www.example.com/catalog/x')")
        .execute(&app.pool)
        .await
        .expect("seed");
    app.fold().await;
    let index = body(
        app.get_as("www.example.com", "/sitemap_index.xml", &[])
            .await,
    )
    .await;
    assert!(
        index.contains("<loc>https://www.example.com/catalog/sitemap-1.xml.gz</loc>"),
        "{index}"
    );
    assert_eq!(
        app.get_as("www.example.com", "/sitemap-1.xml.gz", &[])
            .await
            .status(),
        200
    );
}

#[sqlx::test]
async fn hostile_forwarding_headers_change_no_url(pool: PgPool) {
    let app = TestApp::spawn_with(pool, three_sites).await;
    seed(&app).await;
    let hostile = [
        ("x-forwarded-host", "evil.example"),
        ("x-forwarded-proto", "http"),
        ("x-forwarded-prefix", "/evil"),
        ("forwarded", "for=1.2.3.4;host=evil.example;proto=http"),
    ];
    let plain = body(
        app.get_as("www.example.com", "/sitemap_index.xml", &[])
            .await,
    )
    .await;
    let attacked = body(
        app.get_as("www.example.com", "/sitemap_index.xml", &hostile)
            .await,
    )
    .await;
    assert_eq!(plain, attacked);
    let robots = body(app.get_as("www.example.com", "/robots.txt", &hostile).await).await;
    assert!(!robots.contains("evil"), "{robots}");
    // Forwarding headers never pick a site either.
    let to_blog = [("x-forwarded-host", "blog.example.org")];
    assert_eq!(
        app.get_as("evil.example", "/sitemap_index.xml", &to_blog)
            .await
            .status(),
        404
    );
}

#[sqlx::test]
async fn robots_txt_appends_every_sitemap_of_the_host(pool: PgPool) {
    let app = TestApp::spawn_with(pool, three_sites).await;
    let response = app.get_as("www.example.com", "/robots.txt", &[]).await;
    assert_eq!(
        header(&response, "content-type"),
        "text/plain; charset=utf-8"
    );
    assert_eq!(
        body(response).await,
        format!(
            "User-agent: *\nDisallow: /admin/\n\nSitemap: {WWW}sitemap_index.xml\nSitemap: {SHOP}sitemap_index.xml\n"
        )
    );
    assert_eq!(
        body(app.get_as("blog.example.org", "/robots.txt", &[]).await).await,
        format!("Sitemap: {BLOG}sitemap_index.xml\n")
    );
    assert_eq!(
        app.get_as("evil.example", "/robots.txt", &[])
            .await
            .status(),
        404
    );
}

#[sqlx::test]
async fn only_get_and_head_are_answered(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let response = reqwest::Client::new()
        .post(app.url("/sitemap_index.xml"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 405);
    assert_eq!(header(&response, "allow"), "GET, HEAD");
}
