//! Several sites behind one service: routed by Host and path prefix,
//! isolated from each other, their URLs from configuration alone.

use sitemapd::config::{Settings, SiteSettings};
use sqlx::PgPool;

use crate::helpers::{TestApp, header};

const WWW: &str = "https://www.example.com/";
const SHOP: &str = "https://www.example.com/shop/";
const BLOG: &str = "https://blog.example.org/";

/// A further site at `base_url`, with nothing else set.
fn site_at(base_url: &str) -> SiteSettings {
    SiteSettings {
        base_url: base_url.into(),
        include_subfolder_sites: false,
        indexnow_key: None,
        robots_txt: None,
        robots_file: None,
        ..SiteSettings::default()
    }
}

fn three_sites(settings: &mut Settings) {
    settings.base_url = WWW.into();
    settings.robots_txt = Some("User-agent: *\nDisallow: /admin/".into());
    settings.strict_host = true;
    for (name, base_url) in [("shop", SHOP), ("blog", BLOG)] {
        settings.sites.insert(name.into(), site_at(base_url));
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
    let response = crate::helpers::client()
        .post(app.url("/sitemap_index.xml"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 405);
    assert_eq!(header(&response, "allow"), "GET, HEAD");
}

/// Google's example ("Using Sitemap Index Files"): the index at
/// www.example.com/sitemap_index.xml may list the sitemaps of
/// www.example.com/site1/ and www.example.com/sitemap2/, never those of
/// site1.example.com or site2.example.com.
fn subfolder_sites(settings: &mut Settings) {
    settings.base_url = WWW.into();
    settings.include_subfolder_sites = true;
    settings.strict_host = true;
    settings.max_urls = 1;
    for (name, base_url) in [
        ("site1", "https://www.example.com/site1/"),
        ("sitemap2", "https://www.example.com/sitemap2/"),
        ("sub1", "https://site1.example.com/"),
        ("sub2", "https://site2.example.com/"),
    ] {
        settings.sites.insert(name.into(), site_at(base_url));
    }
}

async fn index_locs(app: &TestApp, host: &str, path: &str) -> (Vec<String>, reqwest::Response) {
    let response = app.get_as(host, path, &[]).await;
    assert_eq!(response.status(), 200, "{host}{path}");
    let etag_response = app.get_as(host, path, &[]).await;
    let xml = response.bytes().await.expect("index");
    crate::helpers::assert_valid(&xml, crate::helpers::Schema::Index);
    let locs = String::from_utf8(xml.to_vec())
        .expect("UTF-8")
        .split("<loc>")
        .skip(1)
        .map(|entry| entry.split("</loc>").next().expect("closed").to_owned())
        .collect();
    (locs, etag_response)
}

#[sqlx::test]
async fn a_root_index_lists_its_subfolder_sites_and_never_other_hosts(pool: PgPool) {
    let app = TestApp::spawn_with(pool, subfolder_sites).await;
    for (site, base) in [
        ("default", WWW),
        ("site1", "https://www.example.com/site1/"),
        ("sitemap2", "https://www.example.com/sitemap2/"),
        ("sub1", "https://site1.example.com/"),
        ("sub2", "https://site2.example.com/"),
    ] {
        sqlx::query("INSERT INTO sitemap_urls (site, loc) VALUES ($1, $2 || 'a'), ($1, $2 || 'b')")
            .bind(site)
            .bind(base)
            .execute(&app.pool)
            .await
            .expect("rows");
    }
    app.fold().await;

    let (locs, response) = index_locs(&app, "www.example.com", "/sitemap_index.xml").await;
    let expected: Vec<String> = [
        "https://www.example.com/sitemap-1.xml.gz",
        "https://www.example.com/sitemap-2.xml.gz",
        "https://www.example.com/site1/sitemap-1.xml.gz",
        "https://www.example.com/site1/sitemap-2.xml.gz",
        "https://www.example.com/sitemap2/sitemap-1.xml.gz",
        "https://www.example.com/sitemap2/sitemap-2.xml.gz",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(locs, expected);
    // Each listed page is served where the index says.
    for loc in &locs {
        let path = loc
            .strip_prefix("https://www.example.com")
            .expect("same host");
        assert_eq!(
            app.get_as("www.example.com", path, &[]).await.status(),
            200,
            "{path}"
        );
    }
    // The subfolder sites keep their own indexes too; other hosts only theirs.
    let (site1, _) = index_locs(&app, "www.example.com", "/site1/sitemap_index.xml").await;
    assert_eq!(site1, expected[2..4]);
    let (sub1, _) = index_locs(&app, "site1.example.com", "/sitemap_index.xml").await;
    assert_eq!(
        sub1,
        [
            "https://site1.example.com/sitemap-1.xml.gz",
            "https://site1.example.com/sitemap-2.xml.gz"
        ]
    );

    // robots.txt needs the root index alone for the subfolder sites.
    let robots = app
        .get_as("www.example.com", "/robots.txt", &[])
        .await
        .text()
        .await
        .expect("robots");
    let lines: Vec<&str> = robots
        .lines()
        .filter(|l| l.starts_with("Sitemap:"))
        .collect();
    assert_eq!(
        lines,
        ["Sitemap: https://www.example.com/sitemap_index.xml"]
    );

    // A change in a subfolder site moves the root index's version and that
    // page's lastmod; a crawler holding the old ETag gets the new index.
    let etag = header(&response, "etag").to_owned();
    assert_eq!(
        app.get_as(
            "www.example.com",
            "/sitemap_index.xml",
            &[("if-none-match", &etag)]
        )
        .await
        .status(),
        304
    );
    sqlx::query(
        "UPDATE sitemap_urls SET lastmod = now() WHERE site = 'sitemap2' AND loc LIKE '%/b'",
    )
    .execute(&app.pool)
    .await
    .expect("update");
    app.fold().await;
    let changed = app
        .get_as(
            "www.example.com",
            "/sitemap_index.xml",
            &[("if-none-match", &etag)],
        )
        .await;
    assert_eq!(changed.status(), 200);
    assert_ne!(header(&changed, "etag"), etag);

    // Past max_index_entries the root splits, its subfolder sites' pages included.
    let split = TestApp::spawn_with(app.pool.clone(), |s| {
        subfolder_sites(s);
        s.max_index_entries = 4;
    })
    .await;
    let (first, _) = index_locs(&split, "www.example.com", "/sitemap_index.xml").await;
    let (second, _) = index_locs(&split, "www.example.com", "/sitemap_index-2.xml").await;
    assert_eq!([first, second].concat(), expected);
}
