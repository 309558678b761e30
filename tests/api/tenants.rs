//! Sites as data: created, changed and removed through the write API, the
//! command line and plain SQL while replicas serve; tokens per site; the
//! configuration file's sites winning at start.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, binary, exec, header};
use crate::write_api::{TOKEN, spawn_api};

/// How long a change may take to show on every replica.
const PROPAGATION: Duration = Duration::from_secs(1);

pub(crate) async fn as_token(
    app: &TestApp,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let body = body.map_or_else(String::new, |b| b.to_string());
    let response = app
        .send(
            method,
            path,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            body,
        )
        .await;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Creates the site `name` at `base_url` with an operator's token.
pub(crate) async fn create_site(app: &TestApp, name: &str, base_url: &str) {
    let (status, created) = operator(
        app,
        Method::PUT,
        &format!("/api/v1/sites/{name}"),
        Some(json!({ "base_url": base_url })),
    )
    .await;
    assert_eq!(status, 201, "{created}");
}

async fn operator(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    as_token(app, TOKEN, method, path, body).await
}

/// Polls `check` on `app` until it holds, for at most [`PROPAGATION`] plus
/// a margin for a loaded machine; returns how long it took.
async fn until<F, Fut>(what: &str, check: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < PROPAGATION * 5,
            "{what}: not seen after {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn robots_on(app: &TestApp, host: &str) -> (u16, String) {
    let response = app.get_as(host, "/robots.txt", &[]).await;
    (
        response.status().as_u16(),
        response.text().await.expect("body"),
    )
}

async fn status_on(app: &TestApp, host: &str, path: &str) -> u16 {
    app.get_as(host, path, &[]).await.status().as_u16()
}

#[sqlx::test]
async fn sites_written_on_one_replica_show_on_the_other_within_a_second(pool: PgPool) {
    let strict = |s: &mut sitemapd::config::Settings| s.strict_host = true;
    let first = spawn_api(pool.clone(), strict).await;
    let second = spawn_api(pool.clone(), strict).await;
    let host = "shop.example.com";
    assert_eq!(robots_on(&second, host).await.0, 404, "no such site yet");

    let (status, created) = operator(
        &first,
        Method::PUT,
        "/api/v1/sites/shop",
        Some(json!({"base_url": "https://shop.example.com/", "robots_txt": "User-agent: *\nDisallow: /cart/\n"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "shop");
    assert_eq!(
        created["index"],
        "https://shop.example.com/sitemap_index.xml"
    );
    let created_in = until("the created site on the other replica", || async {
        robots_on(&second, host).await
            == (
                200,
                "User-agent: *\nDisallow: /cart/\n\nSitemap: https://shop.example.com/sitemap_index.xml\n"
                    .to_owned(),
            )
    })
    .await;
    assert!(created_in < PROPAGATION, "created: {created_in:?}");

    let (status, written) = operator(
        &first,
        Method::PUT,
        "/api/v1/urls",
        Some(json!([{"site": "shop", "loc": "https://shop.example.com/p/1"}])),
    )
    .await;
    assert_eq!(status, 200, "{written}");
    let page = second
        .get_as(host, "/sitemap-1.xml", &[])
        .await
        .text()
        .await
        .expect("page");
    assert!(page.contains("https://shop.example.com/p/1"), "{page}");

    let (status, _) = operator(
        &first,
        Method::PUT,
        "/api/v1/sites/shop",
        Some(json!({"base_url": "https://shop.example.com/", "index_format": "xml.gz"})),
    )
    .await;
    assert_eq!(status, 200);
    let changed_in = until("the changed site on the other replica", || async {
        robots_on(&second, host).await.1
            == "Sitemap: https://shop.example.com/sitemap_index.xml.gz\n"
    })
    .await;
    assert!(changed_in < PROPAGATION, "changed: {changed_in:?}");
    let (status, again) = operator(
        &first,
        Method::PUT,
        "/api/v1/sites/shop",
        Some(json!({"base_url": "https://shop.example.com/", "index_format": "xml.gz"})),
    )
    .await;
    assert_eq!(
        (status, &again["updated_at"]),
        (200, &changed_at(&pool).await)
    );

    let (status, refused) = operator(&second, Method::DELETE, "/api/v1/sites/shop", None).await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .expect("detail")
            .contains("purge")
    );
    assert_eq!(status_on(&first, host, "/sitemap_index.xml").await, 200);

    let (status, removed) = operator(
        &second,
        Method::DELETE,
        "/api/v1/sites/shop?purge=true",
        None,
    )
    .await;
    assert_eq!((status, removed["deleted_rows"].as_u64()), (200, Some(1)));
    let removed_in = until("the removed site on the other replica", || async {
        status_on(&first, host, "/sitemap_index.xml").await == 404
            && status_on(&first, host, "/sitemap-1.xml").await == 404
            && robots_on(&first, host).await.0 == 404
    })
    .await;
    assert!(removed_in < PROPAGATION, "removed: {removed_in:?}");
    let (status, _) = operator(&first, Method::GET, "/api/v1/sites/shop", None).await;
    assert_eq!(status, 404);
}

async fn changed_at(pool: &PgPool) -> Value {
    let at: time::OffsetDateTime =
        sqlx::query_scalar("SELECT updated_at FROM sitemap_sites WHERE site = 'shop'")
            .fetch_one(pool)
            .await
            .expect("the site");
    json!(
        at.format(&time::format_description::well_known::Rfc3339)
            .expect("formats")
    )
}

#[sqlx::test]
async fn a_site_token_reads_and_writes_only_its_own_site(pool: PgPool) {
    let app = spawn_api(pool.clone(), |_| {}).await;
    let other = spawn_api(pool.clone(), |_| {}).await;
    for (name, base_url) in [
        ("a", "https://a.example.com/"),
        ("b", "https://b.example.com/"),
    ] {
        create_site(&app, name, base_url).await;
    }
    let (status, minted) = operator(&app, Method::POST, "/api/v1/sites/a/tokens", None).await;
    assert_eq!(status, 201, "{minted}");
    let token = minted["token"].as_str().expect("token").to_owned();
    let digest = minted["digest"].as_str().expect("digest").to_owned();
    let stored: String = sqlx::query_scalar("SELECT digest FROM sitemap_site_tokens")
        .fetch_one(&pool)
        .await
        .expect("one digest");
    assert_eq!(stored, digest, "only the digest is kept");

    // Its own site: records, with or without naming it, one lookup, stats.
    let (status, written) = as_token(
        &app,
        &token,
        Method::PUT,
        "/api/v1/urls",
        Some(json!([{"loc": "https://a.example.com/1"}, {"site": "a", "loc": "https://a.example.com/2"}])),
    )
    .await;
    assert_eq!((status, written["inserted"].as_u64()), (200, Some(2)));
    let (status, _) = as_token(
        &app,
        &token,
        Method::GET,
        "/api/v1/urls?site=a&loc=https://a.example.com/1",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, stats) = as_token(&app, &token, Method::GET, "/api/v1/stats", None).await;
    assert_eq!(status, 200);
    let sites: Vec<&str> = stats["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .filter_map(|s| s["site"].as_str())
        .collect();
    assert_eq!(sites, ["a"]);
    let (status, _) = as_token(&app, &token, Method::GET, "/api/v1/sites/a", None).await;
    assert_eq!(status, 200);

    // Anything else: 403, naming the site.
    let refusals = [
        (
            Method::PUT,
            "/api/v1/urls",
            Some(json!([{"site": "b", "loc": "https://b.example.com/1"}])),
        ),
        (
            Method::DELETE,
            "/api/v1/urls",
            Some(json!([{"site": "b", "loc": "https://b.example.com/1"}])),
        ),
        (
            Method::GET,
            "/api/v1/urls?site=b&loc=https://b.example.com/1",
            None,
        ),
        (Method::GET, "/api/v1/stats?site=b", None),
        (Method::GET, "/api/v1/sites/b", None),
        (Method::GET, "/api/v1/sites", None),
        (
            Method::PUT,
            "/api/v1/sites/c",
            Some(json!({"base_url": "https://c.example.com/"})),
        ),
        (
            Method::PUT,
            "/api/v1/sites/a",
            Some(json!({"base_url": "https://evil.example.com/"})),
        ),
        (Method::DELETE, "/api/v1/sites/a", None),
        (Method::POST, "/api/v1/sites/a/tokens", None),
        (Method::GET, "/api/v1/sites/a/tokens", None),
    ];
    for (method, path, body) in refusals {
        let (status, problem) = as_token(&app, &token, method.clone(), path, body).await;
        assert_eq!(status, 403, "{method} {path}: {problem}");
        let detail = problem["detail"].as_str().expect("detail");
        assert!(detail.contains("\"a\""), "{method} {path}: {detail}");
    }
    let b_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_urls WHERE site = 'b'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(b_rows, 0);

    // The site's HTML view shows its token what is left out (an operator's
    // view, private); another site's shows it what the public sees.
    let auth = format!("Bearer {token}");
    let view = |host: &'static str, auth: Option<String>| {
        let app = &app;
        async move {
            let headers: Vec<(&str, &str)> = auth
                .as_deref()
                .map(|auth| ("authorization", auth))
                .into_iter()
                .collect();
            let response = app.get_as(host, "/sitemaps.html", &headers).await;
            assert_eq!(response.status(), 200);
            header(&response, "cache-control").to_owned()
        }
    };
    assert!(
        view("a.example.com", Some(auth.clone()))
            .await
            .contains("private")
    );
    assert_eq!(
        view("b.example.com", Some(auth.clone())).await,
        view("b.example.com", None).await
    );
    assert!(!view("b.example.com", None).await.contains("private"));

    // Revoked on one replica, refused on the other within a second.
    let (status, _) = as_token(&other, &token, Method::GET, "/api/v1/stats", None).await;
    assert_eq!(status, 200, "the other replica admits it first");
    let (status, _) = operator(
        &app,
        Method::DELETE,
        &format!("/api/v1/sites/a/tokens/{digest}"),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let revoked_in = until("the revoked token refused on the other replica", || async {
        as_token(&other, &token, Method::GET, "/api/v1/stats", None)
            .await
            .0
            == 401
    })
    .await;
    assert!(revoked_in < PROPAGATION, "revoked: {revoked_in:?}");
}

#[sqlx::test]
async fn bad_sites_are_refused_naming_the_field_and_change_nothing(pool: PgPool) {
    let app = spawn_api(pool.clone(), |_| {}).await;
    let (status, _) = operator(
        &app,
        Method::PUT,
        "/api/v1/sites/shop",
        Some(json!({"base_url": "https://www.example.com/shop/"})),
    )
    .await;
    assert_eq!(status, 201);
    let before: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_sites")
        .fetch_one(&pool)
        .await
        .expect("count");
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        (
            "ok",
            json!({"base_url": "ftp://www.example.com/"}),
            422,
            "base_url",
        ),
        (
            "ok",
            json!({"base_url": "https://user:pw@www.example.com/"}),
            422,
            "base_url",
        ),
        (
            "ok",
            json!({"base_url": "https://www.example.com/?a=1"}),
            422,
            "base_url",
        ),
        ("ok", json!({"base_url": "not a url"}), 422, "base_url"),
        (
            "Not-A-Slug",
            json!({"base_url": "https://n.example.com/"}),
            422,
            "name",
        ),
        (
            "ok",
            json!({"base_url": "https://r.example.com/", "robots_txt": "#".repeat(512_001)}),
            422,
            "robots_txt",
        ),
        (
            "ok",
            json!({"base_url": "https://k.example.com/", "indexnow_key": "bad key"}),
            422,
            "indexnow_key",
        ),
        (
            "ok",
            json!({"base_url": "https://WWW.example.com/shop"}),
            409,
            "shop",
        ),
        ("ok", json!({"base_url": 5}), 400, "base_url"),
        ("ok", json!({"robots_txt": "x"}), 400, "base_url"),
        (
            "ok",
            json!({"base_url": "https://o.example.com/", "nested_index": "yes"}),
            400,
            "nested_index",
        ),
        (
            "ok",
            json!({"base_url": "https://o.example.com/", "index_format": "zip"}),
            400,
            "index_format",
        ),
        (
            "ok",
            json!({"base_url": "https://o.example.com/", "colour": "blue"}),
            400,
            "colour",
        ),
        ("ok", json!(["https://o.example.com/"]), 400, "JSON object"),
    ];
    for (name, body, expected, named) in cases {
        let (status, problem) = operator(
            &app,
            Method::PUT,
            &format!("/api/v1/sites/{name}"),
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, expected, "{body}: {problem}");
        let text = problem.to_string();
        assert!(text.contains(named), "{body}: {text}");
        assert!(
            problem["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("urn:sitemapd:problem:"))
        );
    }
    let (status, problem) = operator(&app, Method::PUT, "/api/v1/sites/ok", None).await;
    assert_eq!(status, 400, "{problem}");
    let after: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_sites")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(before, after, "nothing was written");
    let (status, _) = operator(&app, Method::DELETE, "/api/v1/sites/nope", None).await;
    assert_eq!(status, 404);
    let (status, page) = operator(&app, Method::GET, "/api/v1/sites?limit=1", None).await;
    assert_eq!(status, 200);
    assert_eq!(page["sites"].as_array().map(Vec::len), Some(1));
    let next = page["next"].as_str().expect("a next page");
    let (_, rest) = operator(
        &app,
        Method::GET,
        &format!("/api/v1/sites?after={next}"),
        None,
    )
    .await;
    assert_eq!(rest["next"], Value::Null);
    let names: Vec<&str> = [&page, &rest]
        .iter()
        .flat_map(|p| p["sites"].as_array().expect("sites"))
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["default", "shop"]);
    let (status, _) = operator(&app, Method::GET, "/api/v1/sites?limit=0", None).await;
    assert_eq!(status, 400);
}

#[sqlx::test]
async fn a_site_inserted_with_sql_serves_the_rows_written_before_it(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.strict_host = true).await;
    exec(
        &pool,
        "INSERT INTO sitemap_urls (site, loc) VALUES ('docs', 'https://docs.example.com/a')",
    )
    .await;
    app.fold().await;
    let reason: Option<String> =
        sqlx::query_scalar("SELECT skip_reason FROM sitemap_placed WHERE site = 'docs'")
            .fetch_one(&pool)
            .await
            .expect("placed");
    assert_eq!(reason.as_deref(), Some("site not configured"));
    assert_eq!(
        status_on(&app, "docs.example.com", "/sitemap_index.xml").await,
        404
    );

    exec(
        &pool,
        "INSERT INTO sitemap_sites (site, origin, path_prefix) VALUES ('docs', 'https://docs.example.com', '/')",
    )
    .await;
    app.fold().await;
    until("the site inserted with SQL", || async {
        status_on(&app, "docs.example.com", "/sitemap_index.xml").await == 200
    })
    .await;
    let page = app
        .get_as("docs.example.com", "/sitemap-1.xml", &[])
        .await
        .text()
        .await
        .expect("page");
    assert!(page.contains("https://docs.example.com/a"), "{page}");

    let refused = sqlx::query(
        "INSERT INTO sitemap_sites (site, origin, path_prefix) VALUES ('Docs', 'https://x.example.com', '/')",
    )
    .execute(&pool)
    .await
    .expect_err("not a slug");
    assert!(
        refused.to_string().contains("sitemap_sites_site_slug"),
        "{refused}"
    );
    let refused = sqlx::query(
        "INSERT INTO sitemap_sites (site, origin, path_prefix) VALUES ('docs2', 'https://docs.example.com', '/')",
    )
    .execute(&pool)
    .await
    .expect_err("a host and path taken");
    assert!(
        refused.to_string().contains("sitemap_sites_host_path"),
        "{refused}"
    );
}

fn run(pool: &PgPool, args: &[&str]) -> (bool, String, String) {
    let output = binary(pool).args(args).output().expect("sitemapd runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[sqlx::test]
async fn the_command_line_adds_sets_lists_and_removes_sites(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.strict_host = true).await;
    let cli = |args: &'static [&'static str]| {
        let pool = pool.clone();
        tokio::task::spawn_blocking(move || run(&pool, args))
    };
    let (ok, out, err) = cli(&[
        "sites",
        "add",
        "blog",
        "--base-url",
        "https://blog.example.com/",
    ])
    .await
    .expect("joined");
    assert!(ok, "{out}{err}");
    until("the site added from the command line", || async {
        status_on(&app, "blog.example.com", "/robots.txt").await == 200
    })
    .await;
    let (ok, _, err) = cli(&[
        "sites",
        "add",
        "blog",
        "--base-url",
        "https://b2.example.com/",
    ])
    .await
    .expect("joined");
    assert!(!ok && err.contains("already exists"), "{err}");
    let (ok, _, err) = cli(&["sites", "add", "bad", "--base-url", "ftp://x.example.com/"])
        .await
        .expect("joined");
    assert!(!ok && err.contains("base_url"), "{err}");
    let (ok, out, err) = cli(&["sites", "set", "blog", "--index-format", "xml.gz"])
        .await
        .expect("joined");
    assert!(ok, "{out}{err}");
    until("the site set from the command line", || async {
        robots_on(&app, "blog.example.com").await.1
            == "Sitemap: https://blog.example.com/sitemap_index.xml.gz\n"
    })
    .await;
    let (ok, out, _) = cli(&["sites", "list"]).await.expect("joined");
    assert!(ok);
    assert_eq!(
        out,
        format!(
            "blog\thttps://blog.example.com/\thttps://blog.example.com/sitemap_index.xml.gz\n\
             default\t{BASE_URL}\t{BASE_URL}sitemap_index.xml\n"
        )
    );
    let (ok, out, err) = cli(&["token", "--site", "blog"]).await.expect("joined");
    assert!(ok, "{out}{err}");
    let digest = out
        .lines()
        .find_map(|line| line.strip_prefix("hash:"))
        .expect("a digest")
        .trim()
        .to_owned();
    let stored: String =
        sqlx::query_scalar("SELECT digest FROM sitemap_site_tokens WHERE site = 'blog'")
            .fetch_one(&pool)
            .await
            .expect("stored");
    assert_eq!(stored, digest);
    let (ok, _, err) = cli(&["token", "--site", "nope"]).await.expect("joined");
    assert!(!ok && err.contains("no site \"nope\""), "{err}");

    exec(
        &pool,
        "INSERT INTO sitemap_urls (site, loc) VALUES ('blog', 'https://blog.example.com/x')",
    )
    .await;
    let (ok, _, err) = cli(&["sites", "remove", "blog"]).await.expect("joined");
    assert!(!ok && err.contains("URL rows"), "{err}");
    let (ok, out, err) = cli(&["sites", "remove", "blog", "--purge"])
        .await
        .expect("joined");
    assert!(ok && out.contains("1 URL rows deleted"), "{out}{err}");
    until("the site removed from the command line", || async {
        status_on(&app, "blog.example.com", "/robots.txt").await == 404
    })
    .await;
    let tokens: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_site_tokens")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(tokens, 0, "a removed site's tokens go with it");
}

#[sqlx::test]
async fn the_configuration_file_wins_for_the_sites_it_names(pool: PgPool) {
    exec(
        &pool,
        "INSERT INTO sitemap_sites (site, origin, path_prefix, robots_txt)
             VALUES ('default', 'https://old.example.com', '/', 'User-agent: *');
         INSERT INTO sitemap_sites (site, origin, path_prefix)
             VALUES ('squatter', 'https://www.example.com', '/');
         INSERT INTO sitemap_sites (site, origin, path_prefix)
             VALUES ('kept', 'https://kept.example.com', '/');",
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    let sites: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT site, origin || path_prefix, robots_txt FROM sitemap_sites ORDER BY site",
    )
    .fetch_all(&pool)
    .await
    .expect("sites");
    assert_eq!(
        sites,
        [
            ("default".to_owned(), BASE_URL.to_owned(), None),
            (
                "kept".to_owned(),
                "https://kept.example.com/".to_owned(),
                None
            ),
        ]
    );
    assert_eq!(
        status_on(&app, "kept.example.com", "/robots.txt").await,
        200
    );
}

/// A purge deletes a site's rows in batches of their own transactions:
/// another site's writer, whose session gives up on any lock it would wait
/// for, writes all the while, and the purged site's rows are seen going in
/// steps, not all at once at the end.
#[sqlx::test]
async fn purging_a_large_site_blocks_neither_it_nor_another_sites_writers(pool: PgPool) {
    let app = spawn_api(pool.clone(), |_| {}).await;
    for (name, base_url) in [
        ("big", "https://big.example.com/"),
        ("busy", "https://busy.example.com/"),
    ] {
        create_site(&app, name, base_url).await;
    }
    exec(
        &pool,
        "INSERT INTO sitemap_urls (site, loc)
         SELECT 'big', 'https://big.example.com/p/' || n FROM generate_series(1, 200000) n",
    )
    .await;
    app.fold().await;

    let writing = tokio::spawn({
        let pool = pool.clone();
        async move {
            // Another site's writer: new rows one at a time. Waiting for a
            // lock is what blocking is; a slow machine is not, so no time
            // is measured.
            let mut writer = pool.acquire().await.expect("a connection");
            sqlx::query("SET lock_timeout = '1s'")
                .execute(&mut *writer)
                .await
                .expect("lock_timeout");
            let mut written = 0;
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(60) {
                sqlx::query("INSERT INTO sitemap_urls (site, loc) VALUES ('busy', $1)")
                    .bind(format!("https://busy.example.com/new/{written}"))
                    .execute(&mut *writer)
                    .await
                    .expect("a writer's insert, never waiting for a lock");
                written += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
                let left: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM sitemap_sites WHERE site = 'big')",
                )
                .fetch_one(&pool)
                .await
                .expect("the site");
                if !left {
                    break;
                }
            }
            written
        }
    });
    let watching = tokio::spawn({
        let pool = pool.clone();
        async move {
            // The counts of the purged site's rows seen on the way.
            let mut seen = vec![];
            loop {
                let left: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM sitemap_urls WHERE site = 'big'")
                        .fetch_one(&pool)
                        .await
                        .expect("count");
                if seen.last() != Some(&left) {
                    seen.push(left);
                }
                if left == 0 {
                    return seen;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let (status, removed) =
        operator(&app, Method::DELETE, "/api/v1/sites/big?purge=true", None).await;
    assert_eq!(status, 200, "{removed}");
    let deleted = removed["deleted_rows"].as_u64().expect("rows");
    let written = writing.await.expect("the writers");
    let seen = watching.await.expect("the watcher");
    assert_eq!(deleted, 200_000);
    assert!(written > 0);
    let between = seen.iter().filter(|&&n| n > 0 && n < 200_000).count();
    assert!(between >= 3, "the purge went in steps: {seen:?}");
    let big: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_urls WHERE site = 'big'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(
        big, 0,
        "the purged site's rows are gone, those written meanwhile too"
    );
}

#[sqlx::test]
async fn a_site_given_a_key_while_serving_pushes_its_changes(pool: PgPool) {
    let receiver = crate::receiver::Receiver::start().await;
    let app = spawn_api(pool.clone(), |s| {
        s.indexnow_endpoint = receiver.url("/indexnow");
        s.indexnow_batch_delay_ms = 50;
    })
    .await;
    for (name, body) in [
        (
            "shop",
            json!({"base_url": "https://shop.example.com/", "indexnow_key": "shop-key-0123"}),
        ),
        ("plain", json!({"base_url": "https://plain.example.com/"})),
    ] {
        let (status, _) = operator(
            &app,
            Method::PUT,
            &format!("/api/v1/sites/{name}"),
            Some(body),
        )
        .await;
        assert_eq!(status, 201);
    }
    let key_file = app
        .get_as("shop.example.com", "/shop-key-0123.txt", &[])
        .await;
    assert_eq!(key_file.text().await.expect("key"), "shop-key-0123");
    for site in ["plain", "shop"] {
        let (status, _) = operator(
            &app,
            Method::PUT,
            "/api/v1/urls",
            Some(json!([{"site": site, "loc": format!("https://{site}.example.com/new")}])),
        )
        .await;
        assert_eq!(status, 200);
    }
    let received = receiver.until(1).await;
    let body = received[0].indexnow();
    assert_eq!(
        (
            body.host.as_str(),
            body.key.as_str(),
            body.url_list.as_slice()
        ),
        (
            "shop.example.com",
            "shop-key-0123",
            ["https://shop.example.com/new".to_owned()].as_slice()
        )
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        receiver.received().len(),
        1,
        "the site without a key pushes nothing"
    );
}

#[sqlx::test]
async fn a_site_created_while_serving_has_its_index_submitted_when_it_changes(pool: PgPool) {
    let receiver = crate::receiver::Receiver::start().await;
    let app = spawn_api(pool.clone(), |s| {
        s.submit_urls = vec![receiver.url("/ping?sitemap={sitemap}")];
        s.submit_interval_seconds = 1;
    })
    .await;
    let (status, _) = operator(
        &app,
        Method::PUT,
        "/api/v1/sites/shop",
        Some(json!({"base_url": "https://shop.example.com/"})),
    )
    .await;
    assert_eq!(status, 201);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        receiver.received().is_empty(),
        "an empty index is not submitted"
    );
    let (status, _) = operator(
        &app,
        Method::PUT,
        "/api/v1/urls",
        Some(json!([{"site": "shop", "loc": "https://shop.example.com/a"}])),
    )
    .await;
    assert_eq!(status, 200);
    let received = receiver.until(1).await;
    assert_eq!(
        received[0].uri.query(),
        Some("sitemap=https%3A%2F%2Fshop.example.com%2Fsitemap_index.xml")
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        receiver.received().len(),
        1,
        "unchanged, it is not submitted again"
    );
}

#[sqlx::test]
async fn a_fold_of_many_small_sites_writes_its_whole_feed_out(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    exec(
        &pool,
        "INSERT INTO sitemap_sites (site, origin, path_prefix)
         SELECT 's' || s, 'https://s' || s || '.example.com', '/' FROM generate_series(1, 3000) s;
         INSERT INTO sitemap_urls (site, loc)
         SELECT 's' || s, 'https://s' || s || '.example.com/' || u
         FROM generate_series(1, 3000) s, generate_series(1, 5) u",
    )
    .await;
    app.fold().await;
    let written = app
        .state
        .store
        .write_out_feed(sitemapd::store::Turn::Wait)
        .await
        .expect("written out");
    let (entries, first, last, kept): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), min(seq), max(seq), (SELECT count(*) FROM sitemap_change_stash)
         FROM sitemap_changes WHERE change = 'added'",
    )
    .fetch_one(&pool)
    .await
    .expect("the feed");
    assert_eq!((entries, kept), (15_000, 0));
    assert_eq!(last - first + 1, entries, "one run of the feed, in order");
    assert!(written.is_some());
}

/// One site's bulk load holds back no other site: a row another site
/// commits after the load is folded between two of the load's batches, and
/// shows in its page while the load is being placed.
#[sqlx::test]
async fn another_sites_row_is_folded_while_a_bulk_load_is_placed(pool: PgPool) {
    const LOAD: i64 = 40_000;
    let app = TestApp::spawn_with(pool.clone(), |s| s.fold_batch_rows = 2_000).await;
    exec(
        &pool,
        "INSERT INTO sitemap_sites (site, origin, path_prefix)
         VALUES ('other', 'https://other.example.com', '/')",
    )
    .await;
    app.fold().await;
    exec(
        &pool,
        &format!(
            "INSERT INTO sitemap_urls (loc) SELECT '{BASE_URL}load/' || g FROM generate_series(1, {LOAD}) g"
        ),
    )
    .await;
    exec(
        &pool,
        "INSERT INTO sitemap_urls (site, loc) VALUES ('other', 'https://other.example.com/fresh')",
    )
    .await;
    until("the other site's row in its page", || async {
        app.get_as("other.example.com", "/sitemap-1.xml", &[])
            .await
            .text()
            .await
            .expect("page")
            .contains("<loc>https://other.example.com/fresh</loc>")
    })
    .await;
    app.fold().await;
    let (fresh, load_added_after): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT seq FROM sitemap_changes WHERE loc = 'https://other.example.com/fresh'),
                (SELECT count(*) FROM sitemap_changes
                 WHERE site = 'default' AND change = 'added'
                   AND seq > (SELECT seq FROM sitemap_changes WHERE loc = 'https://other.example.com/fresh'))",
    )
    .fetch_one(&pool)
    .await
    .expect("the feed");
    assert!(fresh > 0);
    assert!(
        load_added_after > LOAD / 2,
        "the row was folded after {} of the load's {LOAD} rows, not between its first batches",
        LOAD - load_added_after
    );
}
