//! The crawler ledger through the real server: who fetched which sitemap
//! file, verified by the ranges in `tests/fixtures/crawler-ranges` (where
//! 127.0.0.2 is Googlebot's and 127.0.0.3 Bingbot's), behind trusted
//! proxies or not, across a restart and two replicas, in the API, the
//! metrics, the operators' view and the access log.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, binary, client, exec, header};
use crate::tenants::{as_token, create_site};
use crate::write_api::{TOKEN, spawn_api};
use reqwest::Method;

pub(crate) const GOOGLEBOT: &str =
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
pub(crate) const BINGBOT: &str =
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)";

fn ranges_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crawler-ranges")
}

pub(crate) fn with_ranges(settings: &mut sitemapd::config::Settings) {
    settings.crawler_ranges_dir = Some(ranges_dir());
}

/// A GET of `path` sent from the loopback address `from`.
pub(crate) async fn fetch_from(
    app: &TestApp,
    from: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = client_from(from).get(app.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

/// A client whose connections come from the loopback address `from`.
fn client_from(from: &str) -> reqwest::Client {
    let _ = client();
    let from: IpAddr = from.parse().expect("an address");
    reqwest::Client::builder()
        .local_address(from)
        .build()
        .expect("a client")
}

/// The status of a GET of `path` from `from` with `user_agent`.
async fn status_from(app: &TestApp, from: &str, path: &str, user_agent: &str) -> u16 {
    fetch_from(app, from, path, &[("user-agent", user_agent)])
        .await
        .status()
        .as_u16()
}

/// The ledger as the API gives it, once `done` holds of it (within 10 s).
async fn until_ledger(app: &TestApp, query: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut files = Vec::new();
    for _ in 0..200 {
        let response = app
            .get_as(
                "127.0.0.1",
                &format!("/api/v1/crawlers{query}"),
                &[("authorization", &format!("Bearer {TOKEN}"))],
            )
            .await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.expect("JSON");
        files = body["files"].as_array().expect("files").clone();
        if done(&files) {
            return files;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the ledger did not come to hold what was expected within 10 s: {files:#?}");
}

fn row<'a>(files: &'a [Value], file: &str, crawler: &str) -> Option<&'a Value> {
    files
        .iter()
        .find(|f| f["file"] == file && f["crawler"] == crawler)
}

fn fetches(files: &[Value], file: &str, crawler: &str) -> i64 {
    row(files, file, crawler).map_or(0, |f| f["fetches"].as_i64().expect("a count"))
}

async fn seed(app: &TestApp, n: i64) {
    app.insert_urls("", "page-", n).await;
    app.fold().await;
}

#[sqlx::test]
async fn a_crawler_from_its_ranges_is_verified_and_the_same_user_agent_elsewhere_is_not(
    pool: PgPool,
) {
    let app = spawn_api(pool, with_ranges).await;
    seed(&app, 3).await;
    let page = fetch_from(
        &app,
        "127.0.0.2",
        "/sitemap-1.xml.gz",
        &[("user-agent", GOOGLEBOT)],
    )
    .await;
    assert_eq!(page.status(), 200);
    let etag = header(&page, "etag").to_owned();
    let page_bytes = page.bytes().await.expect("page").len() as i64;
    for from in ["127.0.0.1", "127.0.0.3"] {
        assert_eq!(
            status_from(&app, from, "/sitemap-1.xml.gz", GOOGLEBOT).await,
            200
        );
    }
    assert_eq!(
        status_from(&app, "127.0.0.3", "/sitemap_index.xml", BINGBOT).await,
        200
    );
    let scrapy = fetch_from(
        &app,
        "127.0.0.1",
        "/sitemap_index.xml",
        &[("user-agent", "Scrapy/2.11 (+https://scrapy.org)")],
    )
    .await;
    assert_eq!(scrapy.status(), 200);

    let files = until_ledger(&app, "", |files| {
        fetches(files, "sitemap-1.xml.gz", "googlebot") == 1
            && fetches(files, "sitemap-1.xml.gz", "unverified") == 2
            && fetches(files, "sitemap_index.xml", "bingbot") == 1
            && fetches(files, "sitemap_index.xml", "other") == 1
    })
    .await;
    let google = row(&files, "sitemap-1.xml.gz", "googlebot").expect("Googlebot's row");
    assert_eq!(google["verified"], true);
    assert_eq!(google["last_status"], 200);
    assert_eq!(google["bytes"], page_bytes);
    assert_eq!(google["holds_current"], true);
    assert_eq!(google["url"], format!("{BASE_URL}sitemap-1.xml.gz"));
    assert_eq!(google["served_version"], google["current_version"]);
    let spoofed = row(&files, "sitemap-1.xml.gz", "unverified").expect("the spoofs' row");
    assert_eq!(spoofed["verified"], false);
    assert!(
        row(&files, "sitemap-1.xml.gz", "bingbot").is_none(),
        "Googlebot's user agent from Bingbot's address is no Bingbot"
    );
    assert_eq!(files.len(), 4, "{files:#?}");

    // A change: Googlebot now holds an older version, until it revalidates.
    exec(
        &app.pool,
        &format!("UPDATE sitemap_urls SET lastmod = now() WHERE loc = '{BASE_URL}page-2'"),
    )
    .await;
    app.fold().await;
    let files = until_ledger(&app, "", |files| {
        row(files, "sitemap-1.xml.gz", "googlebot").is_some_and(|f| f["holds_current"] == false)
    })
    .await;
    assert_ne!(
        row(&files, "sitemap-1.xml.gz", "googlebot").expect("there")["current_version"],
        google["served_version"]
    );
    let stale = fetch_from(
        &app,
        "127.0.0.2",
        "/sitemap-1.xml.gz",
        &[("user-agent", GOOGLEBOT), ("if-none-match", &etag)],
    )
    .await;
    assert_eq!(stale.status(), 200, "the page changed");
    let current_etag = header(&stale, "etag").to_owned();
    let revalidated = fetch_from(
        &app,
        "127.0.0.2",
        "/sitemap-1.xml.gz",
        &[("user-agent", GOOGLEBOT), ("if-none-match", &current_etag)],
    )
    .await;
    assert_eq!(revalidated.status(), 304);
    // An uncompressed page is inflated as it is sent: its bytes are
    // counted as they go.
    let plain = fetch_from(
        &app,
        "127.0.0.2",
        "/sitemap-1.xml",
        &[("user-agent", GOOGLEBOT)],
    )
    .await;
    assert_eq!(plain.status(), 200);
    assert!(plain.headers().get("content-length").is_none(), "streamed");
    let plain_bytes = plain.bytes().await.expect("page").len() as i64;
    let files = until_ledger(&app, "", |files| {
        row(files, "sitemap-1.xml", "googlebot").is_some_and(|f| f["bytes"] == plain_bytes)
    })
    .await;
    assert_eq!(
        row(&files, "sitemap-1.xml", "googlebot").expect("there")["fetches"],
        1
    );
    assert_eq!(
        status_from(&app, "127.0.0.2", "/sitemap-9.xml.gz", GOOGLEBOT).await,
        404
    );
    assert_eq!(
        status_from(&app, "127.0.0.1", "/sitemap-8.xml.gz", GOOGLEBOT).await,
        404
    );
    let files = until_ledger(&app, "", |files| {
        fetches(files, "sitemap-1.xml.gz", "googlebot") == 3
            && fetches(files, "sitemap-9.xml.gz", "googlebot") == 1
    })
    .await;
    let google = row(&files, "sitemap-1.xml.gz", "googlebot").expect("there");
    assert_eq!(google["last_status"], 304);
    assert_eq!(google["holds_current"], true);
    assert_eq!(
        row(&files, "sitemap-9.xml.gz", "googlebot").expect("there")["last_status"],
        404
    );
    assert!(
        row(&files, "sitemap-8.xml.gz", "unverified").is_none(),
        "a file that does not exist gets a row only for a verified crawler"
    );

    let metrics = app.metrics().await.text().await.expect("metrics");
    for line in [
        r#"sitemapd_crawler_fetches_total{site="default",crawler="googlebot",verified="true",status="200"} 3"#,
        r#"sitemapd_crawler_fetches_total{site="default",crawler="googlebot",verified="true",status="304"} 1"#,
        r#"sitemapd_crawler_fetches_total{site="default",crawler="googlebot",verified="true",status="404"} 1"#,
        r#"sitemapd_crawler_fetches_total{site="default",crawler="unverified",verified="false",status="200"} 2"#,
        r#"sitemapd_crawler_fetches_total{site="default",crawler="unverified",verified="false",status="404"} 1"#,
        r#"sitemapd_crawler_fetches_total{site="default",crawler="other",verified="false",status="200"} 1"#,
        r#"sitemapd_crawler_stale_version_age_seconds{site="default",crawler="googlebot"} 0"#,
    ] {
        assert!(metrics.contains(line), "missing {line} in\n{metrics}");
    }
    assert!(
        metrics.contains(
            r#"sitemapd_crawler_last_fetch_timestamp_seconds{site="default",crawler="googlebot"}"#
        ),
        "{metrics}"
    );
    assert!(
        !metrics.contains(
            r#"sitemapd_crawler_last_fetch_timestamp_seconds{site="default",crawler="unverified"}"#
        ),
        "only verified crawlers have a last fetch: {metrics}"
    );
}

#[sqlx::test]
async fn forwarded_addresses_count_only_from_trusted_proxies(pool: PgPool) {
    let app = spawn_api(pool, |s| {
        with_ranges(s);
        s.trusted_proxies = vec!["127.0.0.5/32".into()];
    })
    .await;
    seed(&app, 2).await;
    for (from, forwarded) in [
        // Googlebot's address, claimed by a client that is not a proxy…
        ("127.0.0.1", ("x-forwarded-for", "127.0.0.2")),
        ("127.0.0.1", ("forwarded", "for=127.0.0.2")),
        // …and the same through the trusted proxy.
        ("127.0.0.5", ("x-forwarded-for", "203.0.113.7, 127.0.0.2")),
        (
            "127.0.0.5",
            ("forwarded", "for=\"127.0.0.2:50312\";proto=https"),
        ),
    ] {
        let response = fetch_from(
            &app,
            from,
            "/sitemap-1.xml.gz",
            &[("user-agent", GOOGLEBOT), forwarded],
        )
        .await;
        assert_eq!(response.status(), 200);
    }
    let files = until_ledger(&app, "?site=default", |files| {
        fetches(files, "sitemap-1.xml.gz", "unverified") == 2
            && fetches(files, "sitemap-1.xml.gz", "googlebot") == 2
    })
    .await;
    assert_eq!(files.len(), 2, "{files:#?}");
}

#[sqlx::test]
async fn two_replicas_write_one_ledger_and_it_survives_a_restart(pool: PgPool) {
    let mut first = spawn_api(pool.clone(), with_ranges).await;
    let mut second = spawn_api(pool.clone(), with_ranges).await;
    seed(&first, 2).await;
    const EACH: usize = 200;
    let googlebot = client_from("127.0.0.2");
    let mut requests = Vec::new();
    for app in [&first, &second] {
        for _ in 0..EACH {
            requests.push(
                googlebot
                    .get(app.url("/sitemap-1.xml.gz"))
                    .header("user-agent", GOOGLEBOT)
                    .send(),
            );
        }
    }
    for response in futures_util::future::join_all(requests).await {
        assert_eq!(response.expect("sent").status(), 200);
    }
    // Stopped, each writes what it holds.
    for app in [&mut first, &mut second] {
        app.begin_shutdown().await.expect("joined").expect("served");
    }
    let (fetched, hours): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT fetches FROM sitemap_crawler_ledger
                 WHERE file = 'sitemap-1.xml.gz' AND crawler = 'googlebot'),
                (SELECT sum(fetches)::bigint FROM sitemap_crawler_hours WHERE crawler = 'googlebot')",
    )
    .fetch_one(&pool)
    .await
    .expect("the ledger");
    assert_eq!(fetched, 2 * EACH as i64);
    assert_eq!(hours, 2 * EACH as i64);

    let restarted = spawn_api(pool, with_ranges).await;
    let files = until_ledger(&restarted, "", |files| !files.is_empty()).await;
    assert_eq!(
        fetches(&files, "sitemap-1.xml.gz", "googlebot"),
        2 * EACH as i64
    );
    fetch_from(
        &restarted,
        "127.0.0.2",
        "/sitemap-1.xml.gz",
        &[("user-agent", GOOGLEBOT)],
    )
    .await;
    until_ledger(&restarted, "", |files| {
        fetches(files, "sitemap-1.xml.gz", "googlebot") == 2 * EACH as i64 + 1
    })
    .await;
}

#[sqlx::test]
async fn a_sites_token_reads_its_own_ledger_only(pool: PgPool) {
    let app = spawn_api(pool, with_ranges).await;
    create_site(&app, "shop", "https://shop.example.com/").await;
    exec(
        &app.pool,
        "INSERT INTO sitemap_urls (site, loc) VALUES ('shop', 'https://shop.example.com/a');
         INSERT INTO sitemap_urls (loc) VALUES ('https://www.example.com/a')",
    )
    .await;
    app.fold().await;
    for host in ["shop.example.com", "www.example.com"] {
        let response = fetch_from(
            &app,
            "127.0.0.2",
            "/sitemap-1.xml.gz",
            &[("user-agent", GOOGLEBOT), ("host", host)],
        )
        .await;
        assert_eq!(response.status(), 200, "{host}");
    }
    let all = until_ledger(&app, "", |files| files.len() == 2).await;
    assert_eq!(
        all.iter()
            .map(|f| f["site"].as_str().expect("there"))
            .collect::<Vec<_>>(),
        ["default", "shop"]
    );
    let (status, minted) =
        as_token(&app, TOKEN, Method::POST, "/api/v1/sites/shop/tokens", None).await;
    assert_eq!(status, 201, "{minted}");
    let token = minted["token"].as_str().expect("a token");
    let (status, own) = as_token(&app, token, Method::GET, "/api/v1/crawlers", None).await;
    assert_eq!(status, 200, "{own}");
    let own = own["files"].as_array().expect("files");
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(own[0]["site"], "shop");
    assert_eq!(own[0]["url"], "https://shop.example.com/sitemap-1.xml.gz");
    let (status, refused) = as_token(
        &app,
        token,
        Method::GET,
        "/api/v1/crawlers?site=default",
        None,
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(app.get("/api/v1/crawlers").await.status(), 401);
    let openapi: Value = app
        .get("/api/v1/openapi.json")
        .await
        .json()
        .await
        .expect("the OpenAPI document");
    assert!(
        openapi["paths"]["/api/v1/crawlers"]["get"].is_object(),
        "{openapi}"
    );
    assert!(openapi["components"]["schemas"]["CrawledFile"].is_object());
}

#[sqlx::test]
async fn ranges_that_do_not_read_are_refused_at_the_start_by_name(pool: PgPool) {
    let dir = tempfile::tempdir().expect("a directory");
    std::fs::write(
        dir.path().join("googlebot.json"),
        r#"{"prefixes":[{"ipv4Prefix":"66.249.64/27"}]}"#,
    )
    .expect("written");
    let config = sitemapd::config::Config::new({
        let mut settings = sitemapd::config::Settings::defaults();
        settings.base_url = BASE_URL.into();
        settings.crawler_ranges_dir = Some(dir.path().to_owned());
        settings
    })
    .expect("settings");
    let error = sitemapd::App::prepare(sitemapd::store::Store::from_pool(pool), &config)
        .await
        .expect_err("refused");
    let text = error.to_string();
    assert!(
        text.contains("googlebot.json: prefix 0 (\"66.249.64/27\"): not an address/length"),
        "{text}"
    );
    let bad_proxy = sitemapd::config::Config::new({
        let mut settings = sitemapd::config::Settings::defaults();
        settings.base_url = BASE_URL.into();
        settings.trusted_proxies = vec!["10.0.0.0/33".into()];
        settings
    })
    .expect_err("refused")
    .to_string();
    assert!(
        bad_proxy.contains("trusted_proxies") && bad_proxy.contains("10.0.0.0/33"),
        "{bad_proxy}"
    );
}

#[sqlx::test]
async fn ranges_changed_on_disk_are_read_again(pool: PgPool) {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("googlebot.json");
    std::fs::write(&path, r#"{"prefixes":[{"ipv4Prefix":"66.249.64.0/27"}]}"#).expect("written");
    let app = spawn_api(pool, |s| s.crawler_ranges_dir = Some(dir.path().to_owned())).await;
    seed(&app, 1).await;
    fetch_from(
        &app,
        "127.0.0.2",
        "/sitemap-1.xml.gz",
        &[("user-agent", GOOGLEBOT)],
    )
    .await;
    until_ledger(&app, "", |files| {
        fetches(files, "sitemap-1.xml.gz", "unverified") == 1
    })
    .await;
    std::fs::write(
        &path,
        r#"{"prefixes":[{"ipv4Prefix":"66.249.64.0/27"},{"ipv4Prefix":"127.0.0.0/29"}]}"#,
    )
    .expect("rewritten");
    // Read again within the 5 s between looks.
    let mut verified = false;
    for _ in 0..80 {
        fetch_from(
            &app,
            "127.0.0.2",
            "/sitemap-1.xml.gz",
            &[("user-agent", GOOGLEBOT)],
        )
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let files = until_ledger(&app, "", |_| true).await;
        if fetches(&files, "sitemap-1.xml.gz", "googlebot") > 0 {
            verified = true;
            break;
        }
    }
    assert!(verified, "the new range verified Googlebot within 8 s");
}

/// `sitemapd serve` as deployed, with its access log in `file`.
fn serve_logging(pool: &PgPool, port: u16, file: &std::path::Path) -> Child {
    binary(pool)
        .arg("serve")
        .env("SITEMAPD_LISTEN", format!("127.0.0.1:{port}"))
        .env("SITEMAPD_ACCESS_LOG", "json")
        .env("SITEMAPD_ACCESS_LOG_FILE", file)
        .env("SITEMAPD_TRUSTED_PROXIES", r#"["127.0.0.1"]"#)
        .env("SITEMAPD_CRAWLER_RANGES_DIR", ranges_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sitemapd serve starts")
}

/// The lines of `file` once `done` holds of them (within 10 s).
async fn lines_of(file: &std::path::Path, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut lines = Vec::new();
    for _ in 0..200 {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        lines = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect();
        if done(&lines) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{}: not as expected within 10 s: {lines:#?}",
        file.display()
    );
}

fn of_path(lines: &[Value], path: &str) -> usize {
    lines.iter().filter(|line| line["path"] == path).count()
}

#[sqlx::test]
async fn the_access_log_has_a_json_line_per_request_and_reopens_on_sighup(pool: PgPool) {
    exec(
        &pool,
        &format!("INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}a'), ('{BASE_URL}b')"),
    )
    .await;
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("access.log");
    let port = crate::helpers::free_port();
    let mut service = serve_logging(&pool, port, &file);
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let mut ready = false;
    for _ in 0..300 {
        if let Ok(response) = client().get(url("/readyz")).send().await {
            ready = response.status() == 200;
            if ready {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "ready within 15 s");
    let page = client()
        .get(url("/sitemap-1.xml.gz"))
        .header("user-agent", GOOGLEBOT)
        .header("host", "www.example.com")
        .header("x-forwarded-for", "127.0.0.2")
        .send()
        .await
        .expect("sent");
    assert_eq!(page.status(), 200);
    let length = page.bytes().await.expect("page").len();
    let lines = lines_of(&file, |lines| of_path(lines, "/sitemap-1.xml.gz") == 1).await;
    let line = lines
        .iter()
        .find(|line| line["path"] == "/sitemap-1.xml.gz")
        .expect("the page's line");
    assert_eq!(line["client"], "127.0.0.2");
    assert_eq!(line["host"], "www.example.com");
    assert_eq!(line["method"], "GET");
    assert_eq!(line["status"], 200);
    assert_eq!(line["bytes"], length);
    assert_eq!(line["user_agent"], GOOGLEBOT);
    assert_eq!(line["crawler"], "googlebot");
    assert_eq!(line["verified"], true);
    assert!(line["duration_ms"].as_f64().is_some());
    assert!(line["time"].as_str().is_some_and(|t| t.ends_with('Z')));

    // logrotate: the file is moved away, then SIGHUP.
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&file, &rotated).expect("moved");
    let pid = service.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .expect("kill")
            .success()
    );
    // The signal is taken in the background: requests until a line lands
    // in the new file (bounded), none of them lost.
    let mut sent = 0;
    for _ in 0..100 {
        let response = client()
            .get(url("/sitemap_index.xml"))
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200);
        sent += 1;
        if file.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(file.exists(), "a new access.log after SIGHUP");
    // Every request has its line, in one file or the other.
    let mut logged = 0;
    for _ in 0..200 {
        logged = of_path(&lines_of(&rotated, |_| true).await, "/sitemap_index.xml")
            + of_path(&lines_of(&file, |_| true).await, "/sitemap_index.xml");
        if logged == sent {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(logged, sent);
    let after = lines_of(&file, |lines| of_path(lines, "/sitemap_index.xml") >= 1).await;
    assert!(after.iter().all(|line| line["path"] != "/sitemap-1.xml.gz"));
    let _ = service.kill();
    let _ = service.wait();
}
