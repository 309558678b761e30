//! Past one database server: replicas over clusters the tests start
//! themselves (see `clusters`).

use std::time::{Duration, Instant};

use reqwest::Method;
use sitemapd::store::{Store, Turn};
use sqlx::PgPool;

use crate::clusters::Cluster;
use crate::helpers::{BASE_URL, TestApp, exec};
use crate::write_api::{TOKEN, put};

/// Lines of a server's log that report an error.
fn errors(log: &str) -> Vec<&str> {
    log.lines().filter(|line| line.contains("ERROR:")).collect()
}

/// Waits (10 s at most) until `standby` has replayed all `primary` wrote.
async fn until_replayed(primary: &PgPool, standby: &PgPool) {
    let written: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(primary)
        .await
        .expect("the primary's position");
    let started = Instant::now();
    loop {
        let replayed: bool = sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn")
            .bind(&written)
            .fetch_one(standby)
            .await
            .expect("the standby's position");
        if replayed {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the standby did not replay"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Replicas take turns folding without an error in PostgreSQL's log: the
/// one whose turn it is not hears so from a try-lock, where a failed
/// `LOCK … NOWAIT` logged an ERROR each time (about 3 a second with two
/// replicas).
#[tokio::test]
async fn replicas_taking_turns_leave_no_error_in_the_servers_log() {
    let cluster = Cluster::primary();
    let pool = cluster.migrated("sitemapd").await;
    let busy = |s: &mut sitemapd::config::Settings| {
        s.fold_interval_ms = 10;
        s.skip_report_interval_ms = 20;
    };
    let first = TestApp::spawn_with(pool.clone(), busy).await;
    let second = TestApp::spawn_with(pool.clone(), busy).await;

    // A turn held elsewhere is refused, not waited for.
    let mut holder = pool.acquire().await.expect("connection");
    exec_on_conn(
        &mut holder,
        "SELECT pg_advisory_lock(hashtext('sitemapd'), hashtext('fold turn'))",
    )
    .await;
    assert_eq!(
        first.state.store.fold(Turn::Skip).await.expect("fold"),
        None
    );
    exec_on_conn(
        &mut holder,
        "SELECT pg_advisory_unlock(hashtext('sitemapd'), hashtext('fold turn'))",
    )
    .await;
    drop(holder);

    for round in 0..60 {
        exec(
            &pool,
            &format!(
                "INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}r{round}'), ('https://elsewhere.example/{round}')"
            ),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    first.fold().await;
    assert_eq!(second.served_locs().await.len(), 60);

    let log = cluster.log();
    assert!(
        log.contains("database system is ready to accept connections"),
        "the cluster's own log: {log}"
    );
    assert_eq!(
        errors(&log),
        Vec::<&str>::new(),
        "errors in the server's log"
    );
}

/// The read path over a real hot standby: the index, pages, the news
/// sitemap, the HTML view, URL lookups and stats answer from it, and
/// nothing sent to it is refused in recovery (its log has no error). The
/// primary holds no row the standby serves: the page is the standby's.
#[tokio::test]
async fn the_read_path_runs_on_a_hot_standby() {
    let primary = Cluster::primary();
    let pool = primary.migrated("sitemapd").await;
    let standby = Cluster::standby_of(&primary);
    let replica = standby.pool("sitemapd").await;
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&replica)
        .await
        .expect("the standby answers");
    assert!(in_recovery, "a hot standby");

    let store = Store::from_pool(pool.clone()).with_read_pool(replica.clone());
    let app = TestApp::spawn_on(store, pool.clone(), |s| {
        s.api_token_hashes = vec![sitemapd::tokens::hash_of(TOKEN)];
        s.summary_max_age_ms = 1000;
        s.warm_up_interval_ms = 50;
    })
    .await;
    app.insert_urls("", "page-", 3).await;
    let published = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("a date");
    sqlx::query("INSERT INTO sitemap_urls (section, loc, news) VALUES ('news', $1, $2::jsonb)")
        .bind(format!("{BASE_URL}story"))
        .bind(
            serde_json::json!({
                "publication_name": "The Example Times",
                "language": "en",
                "publication_date": published,
                "title": "A story",
            })
            .to_string(),
        )
        .execute(&pool)
        .await
        .expect("an article");
    app.fold().await;
    until_replayed(&pool, &replica).await;
    app.until_reads_on_standby().await;

    let auth = format!("Bearer {TOKEN}");
    let mut bodies = Vec::new();
    for path in [
        "/sitemap_index.xml",
        "/sitemap-1.xml",
        "/sitemap_news.xml",
        "/sitemaps.html",
        "/sitemaps.html?page=sitemap-1",
        &format!("/sitemaps.html?loc={BASE_URL}page-2"),
        &format!("/api/v1/urls?loc={BASE_URL}page-2"),
        "/api/v1/stats",
    ] {
        let response = app
            .send(Method::GET, path, &[("authorization", &auth)], "")
            .await;
        let status = response.status().as_u16();
        let body = response.text().await.expect("body");
        assert_eq!(status, 200, "{path}: {body}");
        bodies.push(body);
    }
    assert!(bodies[1].contains(&format!("<loc>{BASE_URL}page-2</loc>")));
    assert!(bodies[2].contains("<news:title>A story</news:title>"));
    assert!(bodies[6].contains("page-2"), "{}", bodies[6]);
    // Rows the standby has not replayed are not in its pages yet.
    sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&replica)
        .await
        .expect("replay paused");
    app.insert_urls("", "unreplayed-", 1).await;
    app.fold().await;
    let page = app.get("/sitemap-1.xml").await.text().await.expect("page");
    assert!(
        page.contains("page-3") && !page.contains("unreplayed-"),
        "{page}"
    );
    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&replica)
        .await
        .expect("replay resumed");

    let log = standby.log();
    assert!(
        log.contains("database system is ready to accept read-only connections"),
        "{log}"
    );
    assert_eq!(
        errors(&log),
        Vec::<&str>::new(),
        "the standby refused statements"
    );
}

async fn exec_on_conn(conn: &mut sqlx::PgConnection, sql: &'static str) {
    sqlx::query(sql).execute(conn).await.expect(sql);
}

async fn page(app: &TestApp) -> String {
    app.get("/sitemap-1.xml").await.text().await.expect("page")
}

/// Waits (bounded) until `check` holds; returns how long it took.
async fn until(what: &str, limit: Duration, check: impl Fn() -> bool) -> Duration {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

/// A standby that is down costs nothing visible. `serve` starts while it
/// is down and reads from the primary; once it answers, reads go to it;
/// stopped again, reads are back on the primary within the acquire
/// timeout, `/readyz` stays `200`, and each move is counted.
#[tokio::test]
async fn a_standby_that_is_down_sends_reads_to_the_primary_until_it_answers() {
    const ACQUIRE_TIMEOUT: Duration = Duration::from_millis(500);
    let primary = Cluster::primary();
    let pool = primary.migrated("sitemapd").await;
    let standby = Cluster::standby_of(&primary);
    standby.stop();
    let replica = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_lazy(&standby.url("sitemapd"))
        .expect("a lazy pool");
    let store = Store::from_pool(pool.clone()).with_read_pool(replica.clone());
    let app = TestApp::spawn_on(store, pool.clone(), |s| {
        s.db_acquire_timeout_ms = ACQUIRE_TIMEOUT.as_millis() as u64;
        s.api_token_hashes = vec![sitemapd::tokens::hash_of(TOKEN)];
    })
    .await;
    app.insert_urls("", "page-", 2).await;
    app.fold().await;
    assert!(page(&app).await.contains("page-2"), "read from the primary");
    assert_eq!(app.get("/readyz").await.status(), 200);
    assert!(!app.state.store.reads_on_standby());

    standby.start();
    app.until_reads_on_standby().await;
    until_replayed(&pool, &replica).await;
    assert!(page(&app).await.contains("page-2"));

    standby.stop();
    // Before the watcher has looked: the read fails on the standby, and is
    // read once more on the primary.
    assert!(app.state.store.reads_on_standby());
    let auth = format!("Bearer {TOKEN}");
    let headers = [("authorization", auth.as_str())];
    let (index, stats) = tokio::join!(
        app.get("/sitemap_index.xml"),
        app.send(Method::GET, "/api/v1/stats", &headers, "")
    );
    assert_eq!(
        (index.status().as_u16(), stats.status().as_u16()),
        (200, 200),
        "a read the standby failed is read on the primary"
    );
    let moved = until("reads back on the primary", ACQUIRE_TIMEOUT * 4, || {
        !app.state.store.reads_on_standby()
    })
    .await;
    assert!(moved <= ACQUIRE_TIMEOUT * 2, "{moved:?}");
    app.insert_urls("", "while-down-", 1).await;
    app.fold().await;
    assert!(page(&app).await.contains("while-down-1"));
    assert_eq!(app.get("/readyz").await.status(), 200);
    let metrics = app.metrics().await.text().await.expect("metrics");
    for expected in [
        "sitemapd_read_fallbacks_total 1\n",
        r#"sitemapd_read_server{server="primary"} 1"#,
        r#"sitemapd_read_server{server="standby"} 0"#,
    ] {
        assert!(
            metrics.contains(expected),
            "missing {expected} in\n{metrics}"
        );
    }
}

/// A write through the API is in the next fetch of its page on the same
/// replica, though reads go to a standby that has not replayed it: until
/// the standby has replayed past the write, reads go to the primary.
#[tokio::test]
async fn a_write_through_the_api_is_read_back_before_the_standby_replays_it() {
    let primary = Cluster::primary();
    let pool = primary.migrated("sitemapd").await;
    let standby = Cluster::standby_of(&primary);
    let replica = standby.pool("sitemapd").await;
    let store = Store::from_pool(pool.clone()).with_read_pool(replica.clone());
    let app = TestApp::spawn_on(store, pool.clone(), |s| {
        s.api_token_hashes = vec![sitemapd::tokens::hash_of(TOKEN)];
    })
    .await;
    app.insert_urls("", "before-", 1).await;
    app.fold().await;
    until_replayed(&pool, &replica).await;
    app.until_reads_on_standby().await;
    assert!(page(&app).await.contains("before-1"));

    sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&replica)
        .await
        .expect("replay paused");
    let (status, body) = put(
        &app,
        serde_json::json!([{ "loc": format!("{BASE_URL}written") }]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let on_standby: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sitemap_urls WHERE loc LIKE '%/written'")
            .fetch_one(&replica)
            .await
            .expect("the standby answers");
    assert_eq!(on_standby, 0, "the standby has not replayed the write");
    assert!(
        page(&app)
            .await
            .contains(&format!("<loc>{BASE_URL}written</loc>")),
        "the write is read back"
    );

    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&replica)
        .await
        .expect("replay resumed");
    until_replayed(&pool, &replica).await;
    until("reads back on the standby", Duration::from_secs(5), || {
        app.state.store.reads_go_to_standby()
    })
    .await;
    assert!(page(&app).await.contains("written"));
}

/// The service over a `database_url` naming `primary` and `standby`
/// (`target_session_attrs=read-write`), with the write API's token and a
/// 1 s acquire timeout, and `configure`'s settings.
async fn following_both(
    primary: &Cluster,
    standby: &Cluster,
    pool: PgPool,
    configure: impl FnOnce(&mut sitemapd::config::Settings),
) -> TestApp {
    let mut settings = sitemapd::config::Settings::defaults();
    settings.database_url = sitemapd::config::DatabaseUrl::new(format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/sitemapd?target_session_attrs=read-write",
        primary.port(),
        standby.port()
    ));
    settings.db_acquire_timeout_ms = 1000;
    let store = Store::connect(&settings, sitemapd::store::Workload::Serving)
        .await
        .expect("connects to the primary of the two");
    TestApp::spawn_on(store, pool, |s| {
        s.api_token_hashes = vec![sitemapd::tokens::hash_of(TOKEN)];
        s.db_acquire_timeout_ms = 1000;
        configure(s);
    })
    .await
}

/// Failover without a restart: `database_url` names the primary and its
/// standby (`target_session_attrs=read-write`). The primary stops and the
/// standby is promoted: within 10 s the service serves from the new
/// primary, folds there and takes API writes, with no restart; meanwhile
/// it answers `200` or `503` with `Retry-After`, never a cut page; and no
/// row is placed twice.
#[tokio::test]
async fn the_service_follows_a_promoted_standby_without_a_restart() {
    let primary = Cluster::primary();
    let pool = primary.migrated("sitemapd").await;
    let standby = Cluster::standby_of(&primary);
    let app = following_both(&primary, &standby, pool.clone(), |_| {}).await;
    let write = |name: &'static str| {
        let app = &app;
        async move {
            put(
                app,
                serde_json::json!([{ "loc": format!("{BASE_URL}{name}") }]),
            )
            .await
            .0
        }
    };
    assert_eq!(write("before").await, 200);
    let replica = standby.pool("sitemapd").await;
    until_replayed(&pool, &replica).await;

    primary.stop();
    let stopped = Instant::now();
    standby.promote();
    let mut answers = std::collections::BTreeMap::new();
    loop {
        assert!(
            stopped.elapsed() < Duration::from_secs(10),
            "not served from the new primary within 10 s: {answers:?}"
        );
        let response = app.get("/sitemap-1.xml").await;
        let status = response.status().as_u16();
        *answers.entry(status).or_insert(0) += 1;
        match status {
            200 => {
                let page = response.text().await.expect("page");
                assert!(
                    page.trim_end().ends_with("</urlset>"),
                    "a whole page: {page}"
                );
                if page.contains("before") && write("after").await == 200 {
                    break;
                }
            }
            503 => assert!(response.headers().contains_key("retry-after")),
            other => panic!("{other} while the primary moved: {answers:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let page = page(&app).await;
    assert!(page.contains("after") && page.contains("before"), "{page}");

    let promoted = standby.pool("sitemapd").await;
    let (rows, placed, twice): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM sitemap_urls),
                (SELECT count(*) FROM sitemap_placed WHERE page IS NOT NULL),
                (SELECT count(*) - count(DISTINCT id) FROM sitemap_placed)",
    )
    .fetch_one(&promoted)
    .await
    .expect("the new primary");
    assert_eq!((rows, placed, twice), (2, 2, 0), "each row placed once");
}

/// `database_read_url` may name several hosts too: the reads' pool follows
/// the one that answers, here the standby named after a host where nothing
/// listens.
#[tokio::test]
async fn a_read_url_of_several_hosts_reads_from_the_one_that_answers() {
    let primary = Cluster::primary();
    let pool = primary.migrated("sitemapd").await;
    let standby = Cluster::standby_of(&primary);
    // Nothing listens on port 1; a freed ephemeral port may be another
    // test's by the time it is dialled.
    let nothing = 1;
    let mut settings = sitemapd::config::Settings::defaults();
    settings.database_url = sitemapd::config::DatabaseUrl::new(primary.url("sitemapd"));
    settings.database_read_url = Some(sitemapd::config::DatabaseUrl::new(format!(
        "postgres://postgres@127.0.0.1:{nothing},127.0.0.1:{}/sitemapd",
        standby.port()
    )));
    settings.db_acquire_timeout_ms = 500;
    let store = Store::connect(&settings, sitemapd::store::Workload::Serving)
        .await
        .expect("connects, though the first read host is down");
    let app = TestApp::spawn_on(store, pool.clone(), |s| s.db_acquire_timeout_ms = 500).await;
    app.until_reads_on_standby().await;
    app.insert_urls("", "page-", 1).await;
    app.fold().await;
    let replica = standby.pool("sitemapd").await;
    until_replayed(&pool, &replica).await;
    assert!(page(&app).await.contains("page-1"));
}

/// A page whose read the standby ends part way (here its backend is
/// terminated, as a recovery conflict or a shutdown would) is read on from
/// the primary after the last row the standby sent: a complete `200`, each
/// URL once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_the_standby_stops_reading_part_way_is_read_on_from_the_primary() {
    const PAGE_URLS: usize = 10_000;
    const PAGES: usize = 5;
    let primary = Cluster::primary();
    let pool = primary.migrated("sitemapd").await;
    let standby = Cluster::standby_of(&primary);
    let replica = standby.pool("sitemapd").await;
    let store = Store::from_pool(pool.clone()).with_read_pool(replica.clone());
    let app = TestApp::spawn_on(store, pool.clone(), |s| s.max_urls = PAGE_URLS as u32).await;
    app.insert_urls("", "row-", (PAGE_URLS * PAGES) as i64)
        .await;
    app.fold().await;
    until_replayed(&pool, &replica).await;
    app.until_reads_on_standby().await;

    let mut cut_short = 0;
    for page in 1..=PAGES {
        let killer = tokio::spawn({
            let replica = replica.clone();
            async move {
                let started = Instant::now();
                while started.elapsed() < Duration::from_secs(3) {
                    let killed: i64 = sqlx::query_scalar(
                        "SELECT count(*) FROM (
                             SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                             WHERE state = 'active' AND pid <> pg_backend_pid()
                               AND query LIKE '%sitemap_placed p JOIN sitemap_urls u%') t",
                    )
                    .fetch_one(&replica)
                    .await
                    .expect("the standby answers");
                    if killed > 0 {
                        return true;
                    }
                    tokio::task::yield_now().await;
                }
                false
            }
        });
        let response = app.get(&format!("/sitemap-{page}.xml")).await;
        assert_eq!(response.status().as_u16(), 200);
        let body = response.text().await.expect("a whole body");
        let locs: Vec<&str> = body
            .split("<loc>")
            .skip(1)
            .map(|rest| rest.split_once("</loc>").expect("closed").0)
            .collect();
        let unique: std::collections::BTreeSet<&&str> = locs.iter().collect();
        assert_eq!(
            (locs.len(), unique.len()),
            (PAGE_URLS, PAGE_URLS),
            "page {page}: every URL once"
        );
        cut_short += usize::from(killer.await.expect("joined"));
    }
    assert!(cut_short > 0, "no page read was cut short on the standby");
    eprintln!("{cut_short} of {PAGES} page reads cut short on the standby");
}

/// The standby made synchronous as docs/scaling.md says
/// (`synchronous_standby_names`): the API writes acknowledged just before
/// the primary stops are on the promoted standby, and IndexNow resumes at
/// its cursor there, so every URL reaches the endpoint once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronous_standby_keeps_every_acknowledged_write_and_sends_each_url_once() {
    let primary = Cluster::primary();
    let pool = primary.migrated("sitemapd").await;
    let standby = Cluster::standby_of(&primary);
    for statement in [
        "ALTER SYSTEM SET synchronous_standby_names = '*'",
        "SELECT pg_reload_conf()",
    ] {
        sqlx::query(statement)
            .execute(&pool)
            .await
            .expect(statement);
    }
    let started = Instant::now();
    loop {
        let synchronous: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync')",
        )
        .fetch_one(&pool)
        .await
        .expect("the primary answers");
        if synchronous {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no synchronous standby"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let receiver = crate::receiver::Receiver::start().await;
    let app = following_both(&primary, &standby, pool.clone(), |s| {
        s.indexnow_key = Some("failover-key-0123".into());
        s.indexnow_endpoint = receiver.url("/indexnow");
        s.indexnow_batch_delay_ms = 1500;
    })
    .await;
    // The status alone: while the primary moves, a 503's body is text.
    let auth = format!("Bearer {TOKEN}");
    let write = |name: String| {
        let (app, auth) = (&app, &auth);
        async move {
            app.send(
                Method::PUT,
                "/api/v1/urls",
                &[
                    ("content-type", "application/json"),
                    ("authorization", auth.as_str()),
                ],
                serde_json::json!([{ "loc": format!("{BASE_URL}{name}") }]).to_string(),
            )
            .await
            .status()
            .as_u16()
        }
    };
    let sent = || {
        let mut urls = receiver.urls_answered(&[200]);
        urls.sort();
        urls
    };
    let until_sent = |n: usize| async move {
        let started = Instant::now();
        while sent().len() < n {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{n} URLs expected, sent: {:?}",
                sent()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    for i in 0..10 {
        assert_eq!(write(format!("first-{i}")).await, 200);
    }
    until_sent(10).await;
    // The cursor's advance is committed (and, synchronously, on the
    // standby) once the batch after it can be claimed.
    let started = Instant::now();
    loop {
        let caught_up: bool = sqlx::query_scalar(
            "SELECT delivered_through = (SELECT max(seq) FROM sitemap_changes)
             FROM sitemap_indexnow_cursors",
        )
        .fetch_one(&pool)
        .await
        .expect("the cursor");
        if caught_up {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the cursor did not advance"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Acknowledged, then the primary stops before the pusher's next batch.
    for i in 0..5 {
        assert_eq!(write(format!("second-{i}")).await, 200);
    }
    primary.stop();
    standby.promote();
    let stopped = Instant::now();
    while write("third".to_owned()).await != 200 {
        assert!(
            stopped.elapsed() < Duration::from_secs(10),
            "no write taken by the new primary within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until_sent(16).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut expected: Vec<String> = (0..10)
        .map(|i| format!("{BASE_URL}first-{i}"))
        .chain((0..5).map(|i| format!("{BASE_URL}second-{i}")))
        .chain([format!("{BASE_URL}third")])
        .collect();
    expected.sort();
    assert_eq!(sent(), expected, "each URL sent once");
    let promoted = standby.pool("sitemapd").await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_urls")
        .fetch_one(&promoted)
        .await
        .expect("the new primary");
    assert_eq!(rows, 16, "every acknowledged write");
}
