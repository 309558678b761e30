//! Sitemaps search engines trust: no URL the site's robots.txt disallows,
//! no lastmod in the future, however the row was written.

use std::time::Duration;

use reqwest::Method;
use sqlx::PgPool;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::helpers::{BASE_URL, TestApp, binary, exec, header, kept_counts};
use crate::write_api::{TOKEN, site_stats, spawn_api};

/// The lastmod each loc is served with.
async fn served_lastmods(app: &TestApp) -> Vec<(String, Option<String>)> {
    app.page("/sitemap-1.xml.gz")
        .await
        .urls
        .into_iter()
        .map(|url| (url.loc, url.lastmod))
        .collect()
}

async fn authed(app: &TestApp, path: &str) -> String {
    let auth = format!("Bearer {TOKEN}");
    let response = app
        .send(Method::GET, path, &[("authorization", auth.as_str())], "")
        .await;
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.expect("body")
}

/// A row written by plain SQL with a lastmod next year is served with the
/// moment the fold placed it, and keeps that value on every later read; it
/// is counted as `lastmod-in-future` in the stats and shown with the
/// left-out reasons in the operators' HTML view. Changed to a past lastmod,
/// it is served as written, and no longer counted.
#[sqlx::test]
async fn a_future_lastmod_is_served_as_the_moment_its_row_was_placed(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let before = OffsetDateTime::now_utc();
    exec(
        &app.pool,
        &format!(
            "INSERT INTO sitemap_urls (loc, lastmod) VALUES
                 ('{BASE_URL}future', now() + interval '1 year'),
                 ('{BASE_URL}past', '2020-01-02T03:04:05Z')"
        ),
    )
    .await;
    app.fold().await;
    let after = OffsetDateTime::now_utc();

    let served = served_lastmods(&app).await;
    let future = served[0].1.clone().expect("a lastmod");
    let moment = OffsetDateTime::parse(&future, &Rfc3339).expect("W3C datetime");
    assert!(
        moment >= before - Duration::from_secs(1) && moment <= after,
        "{future} is the fold's moment, between {before} and {after}"
    );
    assert_eq!(
        served[1],
        (
            format!("{BASE_URL}past"),
            Some("2020-01-02T03:04:05+00:00".to_owned())
        )
    );
    // Another row on the page, a second later: the page is built anew,
    // and the clamped row keeps its served lastmod.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    exec(
        &app.pool,
        &format!("INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}later')"),
    )
    .await;
    app.fold().await;
    let rebuilt = served_lastmods(&app).await;
    assert_eq!(rebuilt.len(), 3);
    assert_eq!(rebuilt[..2], served[..], "the same on a page built later");

    let stats = site_stats(&app).await;
    assert_eq!(stats["sites"][0]["lastmods_in_future"], 1, "{stats}");
    assert_eq!(stats["sites"][0]["sections"][0]["lastmods_in_future"], 1);
    assert_eq!(stats["sites"][0]["skipped"], 0, "served, not left out");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        metrics.contains("sitemapd_lastmods_in_future{site=\"default\"} 1\n"),
        "{metrics}"
    );
    let view = authed(&app, "/sitemaps.html").await;
    assert!(
        view.contains("lastmod-in-future") && view.contains(&format!("{BASE_URL}future")),
        "{view}"
    );

    exec(
        &app.pool,
        &format!("UPDATE sitemap_urls SET lastmod = '2021-05-06T07:08:09Z' WHERE loc = '{BASE_URL}future'"),
    )
    .await;
    app.fold().await;
    assert_eq!(
        served_lastmods(&app).await[0].1.as_deref(),
        Some("2021-05-06T07:08:09+00:00")
    );
    let stats = site_stats(&app).await;
    assert_eq!(stats["sites"][0]["lastmods_in_future"], 0, "{stats}");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        !metrics.contains("sitemapd_lastmods_in_future{"),
        "{metrics}"
    );

    // A deleted row's clamp goes with it.
    exec(
        &app.pool,
        &format!("INSERT INTO sitemap_urls (loc, lastmod) VALUES ('{BASE_URL}doomed', now() + interval '1 day')"),
    )
    .await;
    app.fold().await;
    let clamps = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sitemap_lastmod_clamps")
            .fetch_one(&app.pool)
            .await
            .expect("clamps")
    };
    assert_eq!(clamps().await, 1);
    exec(
        &app.pool,
        &format!("DELETE FROM sitemap_urls WHERE loc = '{BASE_URL}doomed'"),
    )
    .await;
    app.fold().await;
    assert_eq!(clamps().await, 0);
}

/// The clamps are counted per site and section as folds write them, which
/// the stats, the metrics and the HTML view read instead of counting the
/// clamps: a row clamped, moved to another section, given a past lastmod,
/// deleted, or truncated with the rest, leaves counts equal to a count of
/// the clamps themselves.
#[sqlx::test]
async fn clamps_are_counted_as_folds_write_them(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    exec(
        &app.pool,
        &format!(
            "INSERT INTO sitemap_sites (site, origin, path_prefix)
             VALUES ('shop', 'https://shop.example.com', '/');
             INSERT INTO sitemap_urls (site, section, loc, lastmod)
             SELECT 'default', s, '{BASE_URL}' || s || n,
                    CASE WHEN n <= 3 THEN now() + interval '1 year' ELSE now() - interval '1 day' END
             FROM unnest(ARRAY['a', 'b']) s, generate_series(1, 4) n;
             INSERT INTO sitemap_urls (site, section, loc, lastmod)
             SELECT 'shop', 'a', 'https://shop.example.com/' || n, now() + interval '1 day'
             FROM generate_series(1, 5) n"
        ),
    )
    .await;
    let counted = || {
        kept_counts(
            &app.pool,
            "SELECT site, section, clamps FROM sitemap_lastmod_clamp_counts ORDER BY 1, 2",
            "SELECT site, section, count(*) FROM sitemap_lastmod_clamps GROUP BY 1, 2 ORDER BY 1, 2",
        )
    };
    app.fold().await;
    assert_eq!(counted().await, ["default/a 3", "default/b 3", "shop/a 5"]);
    let stats = site_stats(&app).await;
    let sites = stats["sites"].as_array().expect("sites");
    let default = sites
        .iter()
        .find(|s| s["site"] == "default")
        .expect("default");
    assert_eq!(default["lastmods_in_future"], 6, "{stats}");
    assert_eq!(default["sections"][1]["lastmods_in_future"], 3, "{stats}");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        metrics.contains("sitemapd_lastmods_in_future{site=\"shop\"} 5\n"),
        "{metrics}"
    );

    exec(
        &app.pool,
        &format!(
            "UPDATE sitemap_urls SET section = 'b' WHERE loc = '{BASE_URL}a1';
             UPDATE sitemap_urls SET lastmod = '2020-01-01Z' WHERE loc IN ('{BASE_URL}b1', '{BASE_URL}b2');
             UPDATE sitemap_urls SET lastmod = lastmod + interval '1 day' WHERE loc = '{BASE_URL}b3'"
        ),
    )
    .await;
    app.fold().await;
    assert_eq!(counted().await, ["default/a 2", "default/b 2", "shop/a 5"]);

    exec(
        &app.pool,
        "DELETE FROM sitemap_urls WHERE site = 'shop' AND loc <> 'https://shop.example.com/1'",
    )
    .await;
    app.fold().await;
    assert_eq!(counted().await, ["default/a 2", "default/b 2", "shop/a 1"]);
    let view = app
        .operators("/sitemaps.html?site=shop")
        .await
        .text()
        .await
        .expect("body");
    assert!(
        view.contains("lastmod-in-future") && view.contains("https://shop.example.com/1"),
        "{view}"
    );

    exec(&app.pool, "TRUNCATE sitemap_urls").await;
    app.fold().await;
    assert!(counted().await.is_empty());
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        !metrics.contains("sitemapd_lastmods_in_future{"),
        "{metrics}"
    );
}

/// Every page's ETag, by path.
async fn etags(app: &TestApp) -> Vec<(String, String)> {
    let mut etags = Vec::new();
    for entry in app.index().await {
        let path = entry.loc.trim_start_matches(BASE_URL).to_owned();
        let response = app.get(&format!("/{path}")).await;
        assert_eq!(response.status(), 200, "{path}");
        etags.push((path, header(&response, "etag").to_owned()));
    }
    etags
}

async fn set_robots(app: &TestApp, settings: &str) {
    exec(
        &app.pool,
        &format!("UPDATE sitemap_sites SET {settings} WHERE site = 'default'"),
    )
    .await;
    app.fold().await;
}

/// A loc the site's robots.txt disallows for `*`, Googlebot or Bingbot is
/// left out with the reason `robots-disallowed` and the rule that matched,
/// in the stats, the operators' HTML view and the metrics. When the text
/// changes, only the pages whose rows changed verdict change; with
/// `robots_check = report` they are listed and reported, with `off` not
/// checked.
#[sqlx::test]
async fn locs_robots_txt_disallows_are_left_out_with_their_rule(pool: PgPool) {
    let app = spawn_api(pool, |s| {
        s.max_urls = 3;
        s.robots_txt = Some(
            "User-agent: *\nDisallow: /cart/\nDisallow: /*?sessionid=\n\n\
             User-agent: Googlebot\nDisallow: /drafts/\n"
                .into(),
        );
    })
    .await;
    let paths = [
        "a1",
        "a2",
        "a3",
        "cart/1",
        "b1",
        "b2",
        "b3",
        "drafts/1",
        "c1",
        "c2",
        "c3",
        "search?sessionid=9",
        "d1",
    ];
    let values: Vec<String> = paths.iter().map(|p| format!("('{BASE_URL}{p}')")).collect();
    exec(
        &app.pool,
        &format!(
            "INSERT INTO sitemap_urls (loc) VALUES {}",
            values.join(", ")
        ),
    )
    .await;
    app.fold().await;
    let listed = |paths: &[&str]| -> Vec<String> {
        paths.iter().map(|p| format!("{BASE_URL}{p}")).collect()
    };
    assert_eq!(
        app.served_locs().await,
        listed(&["a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2", "c3", "d1"])
    );
    let stats = site_stats(&app).await;
    assert_eq!(stats["sites"][0]["robots_disallowed"], 3, "{stats}");
    assert_eq!(stats["sites"][0]["skipped"], 3, "{stats}");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        metrics.contains("sitemapd_robots_disallowed{site=\"default\",listed=\"false\"} 3\n"),
        "{metrics}"
    );
    let view = authed(&app, "/sitemaps.html").await;
    for shown in [
        "robots-disallowed",
        "Disallow: /cart/ (User-agent: *)",
        "Disallow: /drafts/ (User-agent: googlebot)",
        "Disallow: /*?sessionid= (User-agent: *)",
    ] {
        assert!(view.contains(shown), "{shown} in {view}");
    }
    let logged = app.report_skips().await;
    assert!(
        logged.iter().any(|row| row.reason
            == "robots-disallowed: Disallow: /cart/ (User-agent: *)"
            && row.loc.ends_with("/cart/1")),
        "{logged:?}"
    );

    // Googlebot may now read /drafts/, and /b2 is disallowed: the page of
    // /b2 and the page /drafts/1 is placed on change, no other.
    let before = etags(&app).await;
    set_robots(
        &app,
        "robots_txt = E'User-agent: *\\nDisallow: /cart/\\nDisallow: /*?sessionid=\\nDisallow: /b2$\\n'",
    )
    .await;
    let served = app.served_locs().await;
    assert!(
        served.contains(&format!("{BASE_URL}drafts/1")),
        "{served:?}"
    );
    assert!(!served.contains(&format!("{BASE_URL}b2")), "{served:?}");
    assert_eq!(served.len(), 10);
    let after = etags(&app).await;
    let changed: Vec<&str> = after
        .iter()
        .filter(|page| !before.contains(page))
        .map(|(path, _)| path.as_str())
        .collect();
    // Pages of 3: a*, b*, c*, then d1, where /drafts/1 joins it.
    assert_eq!(
        changed,
        ["sitemap-2.xml.gz", "sitemap-4.xml.gz"],
        "before {before:?}, after {after:?}"
    );
    assert_eq!(site_stats(&app).await["sites"][0]["robots_disallowed"], 3);

    // Reported, not left out: every row is listed, no page moves a row.
    set_robots(&app, "robots_check = 'report'").await;
    assert_eq!(app.served_locs().await.len(), 13);
    let stats = site_stats(&app).await;
    assert_eq!(stats["sites"][0]["robots_disallowed"], 3, "{stats}");
    assert_eq!(stats["sites"][0]["skipped"], 0, "{stats}");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        metrics.contains("sitemapd_robots_disallowed{site=\"default\",listed=\"true\"} 3\n"),
        "{metrics}"
    );
    let view = authed(&app, "/sitemaps.html").await;
    assert!(view.contains("robots-disallowed-listed"), "{view}");

    // Agents that do not include Googlebot, then no check at all.
    set_robots(
        &app,
        "robots_check = 'leave-out', robots_check_agents = '{bingbot}'",
    )
    .await;
    assert_eq!(app.served_locs().await.len(), 10);
    set_robots(&app, "robots_check = 'off'").await;
    assert_eq!(app.served_locs().await.len(), 13);
    assert_eq!(site_stats(&app).await["sites"][0]["robots_disallowed"], 0);
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        !metrics.contains("sitemapd_robots_disallowed{"),
        "{metrics}"
    );
}

/// A robots text that is binary or too long, an unknown check, or agents
/// robots.txt cannot name are refused where they are written, naming the
/// site and the setting; nothing is written.
#[sqlx::test]
async fn robots_settings_that_cannot_be_judged_by_are_refused(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let put = |body: serde_json::Value| {
        let app = &app;
        async move {
            let auth = format!("Bearer {TOKEN}");
            let response = app
                .send(
                    Method::PUT,
                    "/api/v1/sites/shop",
                    &[
                        ("authorization", &auth),
                        ("content-type", "application/json"),
                    ],
                    body.to_string(),
                )
                .await;
            let status = response.status().as_u16();
            (status, response.text().await.expect("body"))
        }
    };
    let base = "https://shop.example.org/";
    for (body, named) in [
        (
            serde_json::json!({"base_url": base, "robots_txt": "User-agent: *\n\u{0}\u{1}PNG"}),
            "robots_txt",
        ),
        (
            serde_json::json!({"base_url": base, "robots_txt": "#".repeat(512_001)}),
            "robots_txt",
        ),
        (
            serde_json::json!({"base_url": base, "robots_check": "maybe"}),
            "robots_check",
        ),
        (
            serde_json::json!({"base_url": base, "robots_check_agents": ["Googlebot/2.1"]}),
            "robots_check_agents",
        ),
        (
            serde_json::json!({"base_url": base, "robots_check_agents": []}),
            "robots_check_agents",
        ),
    ] {
        let (status, problem) = put(body).await;
        assert!(status == 400 || status == 422, "{status} {problem}");
        assert!(problem.contains(named), "{named} in {problem}");
    }
    let sites: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_sites WHERE site = 'shop'")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(sites, 0, "nothing written");

    let (status, created) = put(serde_json::json!({
        "base_url": base,
        "robots_txt": "User-agent: *\nDisallow: /cart/\n",
        "robots_check": "report",
        "robots_check_agents": ["*", "Googlebot-News"],
    }))
    .await;
    assert_eq!(status, 201, "{created}");
    let created: serde_json::Value = serde_json::from_str(&created).expect("JSON");
    assert_eq!(created["robots_check"], "report");
    assert_eq!(
        created["robots_check_agents"],
        serde_json::json!(["*", "Googlebot-News"])
    );

    // The command line refuses a binary file, naming the site.
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("robots.txt");
    std::fs::write(&file, "User-agent: *\n\u{7}Disallow: /\n").expect("write");
    let pool = app.pool.clone();
    let output = tokio::task::spawn_blocking(move || {
        binary(&pool)
            .args(["sites", "set", "shop", "--robots-file"])
            .arg(&file)
            .output()
            .expect("sitemapd sites set")
    })
    .await
    .expect("join");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("shop")
            && stderr.contains("robots_txt")
            && stderr.contains("control character"),
        "{stderr}"
    );
    // Plain SQL is held to the same rule.
    let refused =
        sqlx::query("UPDATE sitemap_sites SET robots_txt = E'x\\x01' WHERE site = 'shop'")
            .execute(&app.pool)
            .await
            .expect_err("a CHECK refuses it");
    assert!(
        refused
            .to_string()
            .contains("sitemap_sites_robots_txt_text"),
        "{refused}"
    );
}

/// When a poll every 20 ms (10 s at most) first found `loc` served as
/// `wanted`: the instants that poll began and ended. The change came before
/// its end; how late it came is told by its start, since on a busy machine
/// a crawl of the debug build's pages takes a good part of a second itself.
/// How soon after a window's moment a crawl must find the change: folds
/// come every 250 ms, and a crawl of a machine busy with other tests and a
/// build has taken a second of its own.
const WINDOW_NOTICED: Duration = Duration::from_secs(2);

async fn until_served(app: &TestApp, loc: &str, wanted: bool) -> (OffsetDateTime, OffsetDateTime) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let began = OffsetDateTime::now_utc();
        let served = app.served_locs().await.iter().any(|l| l == loc);
        if served == wanted {
            return (began, OffsetDateTime::now_utc());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{loc} still {}listed",
            if served { "" } else { "not " }
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A row with a visibility window enters the sitemaps when it opens and
/// leaves them when it closes, at the first folds after each moment and with
/// no write: the page's ETag and Last-Modified and the index's lastmod move
/// then, IndexNow is sent the URL, and the news sitemap follows. Outside
/// its window the row is left out with the reason, and stays in the table.
#[sqlx::test]
async fn a_row_enters_and_leaves_the_sitemaps_at_its_window_with_no_write(pool: PgPool) {
    let receiver = crate::receiver::Receiver::start().await;
    let app = spawn_api(pool, |s| {
        s.indexnow_key = Some("0123456789abcdef".into());
        s.indexnow_endpoint = receiver.url("/indexnow");
        s.indexnow_batch_delay_ms = 10;
    })
    .await;
    let timed = format!("{BASE_URL}jobs/nightshift");
    let article = format!("{BASE_URL}news/launch");
    let (opens, closes): (OffsetDateTime, OffsetDateTime) = sqlx::query_as(
        "WITH w AS (SELECT date_trunc('second', now()) + interval '3 s' AS opens),
              written AS (
                  INSERT INTO sitemap_urls (loc, visible_from, visible_until, news)
                  SELECT $1 || 'always', NULL::timestamptz, NULL::timestamptz, NULL::jsonb FROM w
                  UNION ALL SELECT $2, opens, opens + interval '3 s', NULL::jsonb FROM w
                  UNION ALL SELECT $3, opens, NULL,
                                   jsonb_build_object('publication_name', 'The Example Times',
                                                      'language', 'en',
                                                      'publication_date',
                                                      to_char(now() AT TIME ZONE 'UTC' - interval '1 hour',
                                                              'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                                                      'title', 'Launch')
                  FROM w
                  RETURNING visible_from, visible_until)
         SELECT visible_from, visible_until FROM written WHERE visible_until IS NOT NULL",
    )
    .bind(BASE_URL)
    .bind(&timed)
    .bind(&article)
    .fetch_one(&app.pool)
    .await
    .expect("rows");
    app.fold().await;
    assert_eq!(app.served_locs().await, [format!("{BASE_URL}always")]);
    let stats = site_stats(&app).await;
    assert_eq!(stats["sites"][0]["skipped"], 2, "{stats}");
    let view = authed(&app, "/sitemaps.html").await;
    assert!(view.contains("not-yet-visible"), "{view}");
    assert_eq!(app.get("/sitemap_news.xml.gz").await.status(), 404);
    let page = app.get("/sitemap-1.xml.gz").await;
    let (etag, modified) = (
        header(&page, "etag").to_owned(),
        header(&page, "last-modified").to_owned(),
    );
    let index_lastmod = app.index().await[0].lastmod.clone();

    let (sought, entered) = until_served(&app, &timed, true).await;
    assert!(entered >= opens, "listed at {entered}, before {opens}");
    assert!(
        sought - opens < WINDOW_NOTICED,
        "first found by a crawl begun at {sought}, {opens} it opened"
    );
    assert!(app.served_locs().await.contains(&article));
    let page = app.get("/sitemap-1.xml.gz").await;
    assert_ne!(header(&page, "etag"), etag);
    assert_ne!(header(&page, "last-modified"), modified);
    assert_ne!(app.index().await[0].lastmod, index_lastmod);
    let news = app.get("/sitemap_news.xml.gz").await;
    assert_eq!(news.status(), 200, "the article is news once listed");
    // The first batch was the untimed row's, written before.
    let sent = receiver.until(2).await;
    let urls: Vec<String> = sent[1..]
        .iter()
        .flat_map(|r| r.indexnow().url_list)
        .collect();
    assert!(urls.contains(&timed) && urls.contains(&article), "{urls:?}");

    let (sought, left) = until_served(&app, &timed, false).await;
    assert!(left >= closes, "left at {left}, before {closes}");
    assert!(
        sought - closes < WINDOW_NOTICED,
        "first found gone by a crawl begun at {sought}, {closes} it closed"
    );
    let pushed: Vec<String> = receiver
        .until(3)
        .await
        .iter()
        .flat_map(|r| r.indexnow().url_list)
        .collect();
    assert_eq!(
        pushed.iter().filter(|url| **url == timed).count(),
        2,
        "{pushed:?}"
    );
    let view = authed(&app, "/sitemaps.html").await;
    assert!(view.contains("no-longer-visible"), "{view}");
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_urls")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(kept, 3, "no row is lost");

    // A window written to close before it opens is refused.
    let refused = sqlx::query(
        "UPDATE sitemap_urls SET visible_from = now(), visible_until = now() - interval '1 s'",
    )
    .execute(&app.pool)
    .await
    .expect_err("a CHECK refuses it");
    assert!(
        refused.to_string().contains("sitemap_urls_window_order"),
        "{refused}"
    );
}

/// Windows come in through JSON Lines, CSV and the write API as through
/// SQL, and a row outside its window is left out as soon as it is
/// written; a window that closes before it opens is refused with the
/// field and why, and nothing of its batch is written.
#[sqlx::test]
async fn every_writer_takes_windows_and_refuses_reversed_ones(pool: PgPool) {
    use sitemapd::ingest::formats::Format;

    use crate::import::{options, run, write};
    use crate::write_api::put;

    let app = spawn_api(pool, |_| {}).await;
    let dir = tempfile::tempdir().expect("dir");
    let jsonl = write(
        &dir,
        "rows.jsonl",
        &format!(
            "{{\"loc\": \"{BASE_URL}a\", \"visible_until\": \"2020-01-01T00:00:00Z\"}}\n\
             {{\"loc\": \"{BASE_URL}b\", \"visible_from\": \"2099-01-01\"}}\n\
             {{\"loc\": \"{BASE_URL}c\", \"visible_from\": \"2020-01-01\", \"visible_until\": \"2099-01-01\"}}\n"
        ),
    );
    let report = run(&app, &jsonl, &options(Format::Jsonl)).await;
    assert!(report.written && report.invalid == 0, "{report:?}");
    let csv = write(
        &dir,
        "rows.csv",
        &format!(
            "loc,visible_from,visible_until\n{BASE_URL}d,,2020-06-01T00:00:00Z\n{BASE_URL}e,2020-01-01,\n"
        ),
    );
    let report = run(&app, &csv, &options(Format::Csv)).await;
    assert!(report.written && report.invalid == 0, "{report:?}");
    let (status, body) = put(
        &app,
        serde_json::json!([{"loc": format!("{BASE_URL}f"), "visible_from": "2099-06-01T00:00:00Z"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    app.fold().await;
    assert_eq!(
        app.served_locs().await,
        [format!("{BASE_URL}c"), format!("{BASE_URL}e")]
    );
    let encoded: String =
        url::form_urlencoded::byte_serialize(format!("{BASE_URL}f").as_bytes()).collect();
    let record: serde_json::Value =
        serde_json::from_str(&authed(&app, &format!("/api/v1/urls?loc={encoded}")).await)
            .expect("JSON");
    assert_eq!(record["visible_from"], "2099-06-01T00:00:00Z", "{record}");
    assert_eq!(record["skip_reason"], "not-yet-visible", "{record}");

    let reversed = write(
        &dir,
        "reversed.jsonl",
        &format!(
            "{{\"loc\": \"{BASE_URL}g\"}}\n\
             {{\"loc\": \"{BASE_URL}h\", \"visible_from\": \"2030-01-02\", \"visible_until\": \"2030-01-01\"}}\n"
        ),
    );
    let report = run(&app, &reversed, &options(Format::Jsonl)).await;
    assert!(!report.written && report.invalid == 1, "{report:?}");
    let error = &report.rejected[0].errors[0];
    assert_eq!(error.field, "visible_until");
    assert!(
        error.to_string().contains("later than visible_from"),
        "{error}"
    );
    let (status, body) = put(
        &app,
        serde_json::json!([{"loc": format!("{BASE_URL}h"), "visible_from": "2030-01-02", "visible_until": "2030-01-02"}]),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("visible_until"), "{body}");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_urls")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(rows, 6, "nothing of a refused batch is written");
}

/// A site under a path is judged by the robots.txt its host serves, which
/// another site's settings give; when that text changes, the site's rows
/// are judged again.
#[sqlx::test]
async fn a_subfolder_site_is_judged_by_its_hosts_robots_txt(pool: PgPool) {
    let app = spawn_api(pool, |s| {
        s.robots_txt = Some("User-agent: *\nDisallow: /shop/cart/\n".into());
        s.sites.insert(
            "shop".into(),
            sitemapd::config::SiteSettings {
                base_url: format!("{BASE_URL}shop/"),
                ..sitemapd::config::SiteSettings::default()
            },
        );
    })
    .await;
    exec(
        &app.pool,
        &format!(
            "INSERT INTO sitemap_urls (site, loc) VALUES
                 ('shop', '{BASE_URL}shop/cart/1'), ('shop', '{BASE_URL}shop/shoes')"
        ),
    )
    .await;
    app.fold().await;
    let listed = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT u.loc FROM sitemap_urls u JOIN sitemap_placed p ON p.id = u.id
             WHERE u.site = 'shop' AND p.page IS NOT NULL ORDER BY u.loc",
        )
        .fetch_all(&app.pool)
        .await
        .expect("listed")
    };
    assert_eq!(listed().await, [format!("{BASE_URL}shop/shoes")]);
    exec(
        &app.pool,
        "UPDATE sitemap_sites SET robots_txt = E'User-agent: *\\nDisallow: /shop/shoes\\n'
         WHERE site = 'default'",
    )
    .await;
    app.fold().await;
    assert_eq!(listed().await, [format!("{BASE_URL}shop/cart/1")]);
}
