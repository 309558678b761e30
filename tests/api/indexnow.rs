//! IndexNow against a fake endpoint on loopback: the key file, what is sent
//! for each kind of change, batching, the endpoint's answers, two hosts,
//! replicas, a restart mid-backlog, a dead endpoint and `sitemapd submit`.

use std::collections::HashSet;
use std::process::Output;
use std::time::Duration;

use sitemapd::config::{Config, Settings, SiteSettings};
use sitemapd::store::Store;
use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, binary, exec, header};
use crate::receiver::{IndexNowBody, OK, Receiver, Reply};

const KEY: &str = "a1b2c3d4-sitemapd-key";
const BLOG_KEY: &str = "blogkey0123456789";

/// The service with a key, pushing to `receiver` after `delay_ms`.
async fn pushing(pool: PgPool, receiver: &Receiver, delay_ms: u64) -> TestApp {
    TestApp::spawn_with(pool, |s| configure(s, receiver, delay_ms)).await
}

fn configure(settings: &mut Settings, receiver: &Receiver, delay_ms: u64) {
    settings.indexnow_key = Some(KEY.into());
    settings.indexnow_endpoint = receiver.url("/indexnow");
    settings.indexnow_batch_delay_ms = delay_ms;
}

/// Also a `blog` site under a path, on a host of its own, with its own key.
async fn with_blog(pool: PgPool, receiver: &Receiver, delay_ms: u64) -> TestApp {
    TestApp::spawn_with(pool, |s| {
        configure(s, receiver, delay_ms);
        s.sites.insert(
            "blog".into(),
            SiteSettings {
                base_url: "https://blog.example.org/news/".into(),
                include_subfolder_sites: false,
                robots_txt: None,
                robots_file: None,
                indexnow_key: Some(BLOG_KEY.into()),
                ..SiteSettings::default()
            },
        );
    })
    .await
}

async fn execute(app: &TestApp, sql: &str) {
    exec(&app.pool, sql).await;
}

async fn metrics(app: &TestApp) -> String {
    app.metrics().await.text().await.expect("metrics")
}

/// Waits (10 s at most) until the metrics hold `line`.
async fn until_metric(app: &TestApp, line: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = metrics(app).await;
        if text.lines().any(|l| l == line) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no `{line}` in\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the default site has nothing left to send.
async fn until_drained(app: &TestApp) {
    until_metric(app, "sitemapd_indexnow_backlog_changes{site=\"default\"} 0").await;
}

#[sqlx::test]
async fn the_key_file_is_served_and_bad_keys_stop_the_start(pool: PgPool) {
    let receiver = Receiver::start().await;
    let app = with_blog(pool, &receiver, 100).await;
    let on = |host: &'static str, path: String| {
        crate::helpers::client()
            .get(app.url(&path))
            .header("host", host)
            .send()
    };
    let key = on("www.example.com", format!("/{KEY}.txt"))
        .await
        .expect("GET");
    assert_eq!(key.status(), 200);
    assert_eq!(header(&key, "content-type"), "text/plain; charset=utf-8");
    assert_eq!(key.text().await.expect("body"), KEY);
    let other = on("www.example.com", "/0000000000000000.txt".into())
        .await
        .expect("GET");
    assert_eq!(other.status(), 404);
    // A site under a path on a host sitemapd does not answer at the root:
    // its key file is under that path.
    let under_path = on("blog.example.org", format!("/news/{BLOG_KEY}.txt"))
        .await
        .expect("GET");
    assert_eq!(under_path.status(), 200);
    assert_eq!(under_path.text().await.expect("body"), BLOG_KEY);
    let wrong_site = on("blog.example.org", format!("/news/{KEY}.txt"))
        .await
        .expect("GET");
    assert_eq!(wrong_site.status(), 404);

    for (key, value) in [
        ("indexnow_key", "short"),
        ("indexnow_key", "has_underscore_0123"),
        ("indexnow_key", &"k".repeat(129)),
    ] {
        let mut settings = Settings::defaults();
        settings.indexnow_key = Some(value.to_owned());
        let error = Config::new(settings).expect_err(value).to_string();
        assert!(
            error.contains(&format!("`{key}`")) && error.contains(value),
            "{error}"
        );
    }
    let mut settings = Settings::defaults();
    settings.sites.insert(
        "blog".into(),
        SiteSettings {
            base_url: "https://blog.example.org/".into(),
            include_subfolder_sites: false,
            robots_txt: None,
            robots_file: None,
            indexnow_key: Some("bad key!".into()),
            ..SiteSettings::default()
        },
    );
    let error = Config::new(settings).expect_err("site key").to_string();
    assert!(
        error.contains("`sites.blog.indexnow_key`") && error.contains("bad key!"),
        "{error}"
    );
    let mut settings = Settings::defaults();
    settings.indexnow_endpoint = "api.indexnow.org".into();
    let error = Config::new(settings).expect_err("endpoint").to_string();
    assert!(error.contains("`indexnow_endpoint`"), "{error}");
}

#[sqlx::test]
async fn plain_sql_changes_go_out_in_commit_order_and_no_ops_do_not(pool: PgPool) {
    let receiver = Receiver::start().await;
    // Committed before the first start: never back-filled.
    sqlx::query(
        "INSERT INTO sitemap_urls (loc, lastmod) VALUES
         ($1 || 'old', '2026-01-01'), ($1 || 'kept', '2026-01-01'), ($1 || 'gone', '2026-01-01')",
    )
    .bind(BASE_URL)
    .execute(&pool)
    .await
    .expect("rows before the start");
    // Long enough for the four folds below to join one batch on a busy
    // machine.
    let app = pushing(pool, &receiver, 5_000).await;

    execute(
        &app,
        &format!("INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}new')"),
    )
    .await;
    app.fold().await;
    execute(
        &app,
        "UPDATE sitemap_urls SET lastmod = '2026-02-02' WHERE loc LIKE '%/old'",
    )
    .await;
    app.fold().await;
    // The same values again: no change, nothing to tell.
    execute(
        &app,
        "UPDATE sitemap_urls SET lastmod = lastmod WHERE loc LIKE '%/kept'",
    )
    .await;
    app.fold().await;
    execute(&app, "DELETE FROM sitemap_urls WHERE loc LIKE '%/gone'").await;
    app.fold().await;

    let received = receiver.until(1).await;
    let first = &received[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.uri.path(), "/indexnow");
    assert_eq!(first.content_type, "application/json; charset=utf-8");
    let body = first.indexnow();
    assert_eq!(
        (
            body.host.as_str(),
            body.key.as_str(),
            body.key_location.as_deref()
        ),
        ("www.example.com", KEY, None)
    );
    // Everything came in one debounced batch, in commit order.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(receiver.received().len(), 1);
    assert_eq!(
        body.url_list,
        ["new", "old", "gone"].map(|path| format!("{BASE_URL}{path}"))
    );
    until_metric(
        &app,
        "sitemapd_indexnow_urls_accepted_total{site=\"default\"} 3",
    )
    .await;
    until_drained(&app).await;
}

#[sqlx::test]
async fn twenty_five_thousand_changes_go_as_three_batches(pool: PgPool) {
    let receiver = Receiver::start().await;
    let app = pushing(pool, &receiver, 200).await;
    app.insert_urls("", "bulk/", 25_000).await;
    let received = receiver.until(3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received_later = receiver.received();
    assert_eq!(received_later.len(), 3, "exactly three POSTs");
    let sizes: Vec<usize> = received
        .iter()
        .map(|r| r.indexnow().url_list.len())
        .collect();
    assert_eq!(sizes, [10_000, 10_000, 5_000]);
    let urls: HashSet<String> = receiver.urls_answered(&[200]).into_iter().collect();
    assert_eq!(urls.len(), 25_000, "each URL once");
    until_metric(
        &app,
        "sitemapd_indexnow_batches_accepted_total{site=\"default\"} 3",
    )
    .await;
}

#[sqlx::test]
async fn throttling_and_failures_retry_the_batch_and_refusals_drop_it(pool: PgPool) {
    let receiver = Receiver::start().await;
    receiver.script(&[
        Reply {
            status: 429,
            retry_after: Some("2"),
        },
        Reply::status(503),
        OK,
        Reply::status(403),
        Reply::status(422),
        Reply::status(202),
    ]);
    let app = pushing(pool, &receiver, 50).await;
    for (n, path) in ["a", "b", "c", "d"].into_iter().enumerate() {
        execute(
            &app,
            &format!("INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}{path}')"),
        )
        .await;
        app.fold().await;
        receiver.until([3, 4, 5, 6][n]).await;
    }
    let received = receiver.received();
    let lists: Vec<Vec<String>> = received.iter().map(|r| r.indexnow().url_list).collect();
    let url = |path: &str| vec![format!("{BASE_URL}{path}")];
    assert_eq!(
        lists,
        [url("a"), url("a"), url("a"), url("b"), url("c"), url("d")]
    );
    // Retry-After was honoured; without it, the wait started at a second.
    assert!(received[1].at - received[0].at >= Duration::from_millis(1_900));
    assert!(received[2].at - received[1].at >= Duration::from_millis(900));
    let text = metrics(&app).await;
    for line in [
        "sitemapd_indexnow_batches_refused_total{site=\"default\",status=\"429\"} 1",
        "sitemapd_indexnow_batches_refused_total{site=\"default\",status=\"503\"} 1",
        "sitemapd_indexnow_batches_refused_total{site=\"default\",status=\"403\"} 1",
        "sitemapd_indexnow_batches_refused_total{site=\"default\",status=\"422\"} 1",
        "sitemapd_indexnow_batches_sent_total{site=\"default\"} 6",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    until_metric(
        &app,
        "sitemapd_indexnow_batches_accepted_total{site=\"default\"} 2",
    )
    .await;
    until_drained(&app).await;
}

#[sqlx::test]
async fn each_host_gets_its_own_posts(pool: PgPool) {
    let receiver = Receiver::start().await;
    let app = with_blog(pool, &receiver, 300).await;
    execute(
        &app,
        &format!(
            "INSERT INTO sitemap_urls (site, loc) VALUES
             ('default', '{BASE_URL}shop/1'), ('blog', 'https://blog.example.org/news/1'),
             ('default', '{BASE_URL}shop/2'), ('blog', 'https://blog.example.org/news/2')"
        ),
    )
    .await;
    app.fold().await;
    let mut bodies: Vec<IndexNowBody> = receiver
        .until(2)
        .await
        .iter()
        .map(|r| r.indexnow())
        .collect();
    bodies.sort_by(|a, b| a.host.cmp(&b.host));
    assert_eq!(
        bodies,
        [
            IndexNowBody {
                host: "blog.example.org".into(),
                key: BLOG_KEY.into(),
                key_location: Some(format!("https://blog.example.org/news/{BLOG_KEY}.txt")),
                url_list: vec![
                    "https://blog.example.org/news/1".into(),
                    "https://blog.example.org/news/2".into()
                ],
            },
            IndexNowBody {
                host: "www.example.com".into(),
                key: KEY.into(),
                key_location: None,
                url_list: vec![format!("{BASE_URL}shop/1"), format!("{BASE_URL}shop/2")],
            },
        ]
    );
}

#[sqlx::test]
async fn replicas_and_restarts_send_each_change_once(pool: PgPool) {
    let receiver = Receiver::start().await;
    // The first replica's first batch is taken, then the endpoint fails.
    receiver.script(&[OK]);
    receiver.by_default(Reply::status(503));
    let mut first = pushing(pool.clone(), &receiver, 50).await;
    let second_replica = pushing(pool.clone(), &receiver, 50).await;
    first.insert_urls("", "many/", 25_000).await;
    receiver.until(2).await;
    // Both replicas go; a new one starts while the backlog waits.
    let mut second = second_replica;
    first
        .begin_shutdown()
        .await
        .expect("joined")
        .expect("stopped");
    second
        .begin_shutdown()
        .await
        .expect("joined")
        .expect("stopped");
    receiver.by_default(OK);
    let restarted = pushing(pool, &receiver, 50).await;
    until_drained(&restarted).await;
    let accepted = receiver.urls_answered(&[200]);
    let distinct: HashSet<&String> = accepted.iter().collect();
    assert_eq!(
        (accepted.len(), distinct.len()),
        (25_000, 25_000),
        "every change accepted once, none lost"
    );
    // Every POST, retries included, was a whole batch of the feed.
    for received in receiver.received() {
        let size = received.indexnow().url_list.len();
        assert!(size == 10_000 || size == 5_000, "a batch of {size}");
    }
}

#[sqlx::test]
async fn a_dead_endpoint_only_grows_the_backlog(pool: PgPool) {
    // Port 1 (tcpmux) is below every port the other tests' servers take
    // (bound to port 0, from the ephemeral range): a port freed by a
    // closed listener was taken again by one of them.
    let dead = "http://127.0.0.1:1/indexnow".to_owned();
    let app = TestApp::spawn_with(pool, |s| {
        s.indexnow_key = Some(KEY.into());
        s.indexnow_endpoint = dead;
        s.indexnow_batch_delay_ms = 50;
    })
    .await;
    app.insert_urls("", "p/", 20).await;
    until_metric(
        &app,
        "sitemapd_indexnow_batches_refused_total{site=\"default\",status=\"error\"} 1",
    )
    .await;
    let text = metrics(&app).await;
    assert!(
        text.contains("sitemapd_indexnow_backlog_changes{site=\"default\"} 20"),
        "{text}"
    );
    assert_eq!(app.get("/readyz").await.status(), 200);
    assert_eq!(app.page("/sitemap-1.xml.gz").await.locs().len(), 20);
}

#[sqlx::test]
async fn a_slow_endpoint_holds_no_connection_serving_needs(pool: PgPool) {
    let receiver = Receiver::start().await;
    receiver.hold_answers(Duration::from_secs(5));
    // One connection for serving, given up on after a second.
    let serving = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(1))
        .connect_with((*pool.connect_options()).clone())
        .await
        .expect("a pool of one");
    let app = TestApp::spawn_on(Store::from_pool(serving), pool, |s| {
        configure(s, &receiver, 50);
    })
    .await;
    execute(
        &app,
        &format!("INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}slow')"),
    )
    .await;
    // The POST is in flight, its answer 5 s away.
    receiver.until(1).await;
    let index = app.get("/sitemap_index.xml").await;
    assert_eq!(index.status(), 200, "serving found its connection");
    assert_eq!(app.get("/readyz").await.status(), 200);
}

async fn run(pool: &PgPool, receiver: &Receiver, args: &[&str]) -> Output {
    let mut command = binary(pool);
    command
        .args(args)
        .env("SITEMAPD_INDEXNOW_KEY", KEY)
        .env("SITEMAPD_INDEXNOW_ENDPOINT", receiver.url("/indexnow"))
        .env(
            "SITEMAPD_SUBMIT_URLS",
            format!("[\"{}\"]", receiver.url("/ping?sitemap={sitemap}")),
        );
    tokio::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .expect("ran")
}

#[sqlx::test]
async fn submit_sends_now_and_its_dry_run_only_says_what(pool: PgPool) {
    let receiver = Receiver::start().await;
    let started = run(&pool, &receiver, &["submit", "--dry-run"]).await;
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    sqlx::query("INSERT INTO sitemap_urls (loc) SELECT $1 || g FROM generate_series(1, 3) g")
        .bind(BASE_URL)
        .execute(&pool)
        .await
        .expect("rows");

    let dry = run(&pool, &receiver, &["submit", "--dry-run"]).await;
    let stdout = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(
        stdout.contains(&format!("POST {} (3 URLs)", receiver.url("/indexnow"))),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("\"{BASE_URL}2\"")) && stdout.contains("\"urlList\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("GET http://127.0.0.1")
            && stdout.contains("sitemap=https%3A%2F%2Fwww.example.com%2Fsitemap_index.xml"),
        "{stdout}"
    );
    assert!(receiver.received().is_empty(), "a dry run sends nothing");

    let sent = run(&pool, &receiver, &["submit"]).await;
    let stdout = String::from_utf8_lossy(&sent.stdout);
    assert!(
        sent.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert!(
        stdout.contains("IndexNow, site default: 3 URLs accepted"),
        "{stdout}"
    );
    assert!(stdout.contains("-> 200"), "{stdout}");
    let received = receiver.received();
    assert_eq!(received.len(), 2, "one POST, one GET");
    assert_eq!(received[0].indexnow().url_list.len(), 3);
    assert_eq!(
        received[1].uri.query(),
        Some("sitemap=https%3A%2F%2Fwww.example.com%2Fsitemap_index.xml")
    );

    let after = run(&pool, &receiver, &["submit", "--dry-run"]).await;
    assert!(
        String::from_utf8_lossy(&after.stdout).contains("IndexNow, site default: nothing waiting")
    );

    receiver.by_default(Reply::status(500));
    let refused = run(&pool, &receiver, &["submit"]).await;
    assert_eq!(refused.status.code(), Some(1), "an endpoint that refused");
    assert!(String::from_utf8_lossy(&refused.stdout).contains("-> 500"));
}
