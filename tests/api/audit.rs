//! The URL audit against a live site: Debian's nginx on loopback serving
//! fixtures of every kind, reached through `audit_origin`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::helpers::{BASE_URL, exec, kept_counts};
use crate::proxy::Nginx;
use crate::write_api::{TOKEN, site_stats, spawn_api};

/// The fixtures, one `location` each: what a URL under `/KIND/N` answers.
const FIXTURES: &str = r#"
events {}
http {
    log_format audit '$msec $request_time $http_host $http_user_agent $uri';
    access_log PREFIX/access.log audit;
    default_type text/html;
    server {
        listen 127.0.0.1:PORT;
        absolute_redirect off;
        location /ok/ { return 200 '<!doctype html><title>ok</title><p>fine'; }
        location ~ ^/moved/(\d+)$ { return 301 /ok/$1; }
        location ~ ^/loop/(\d+)$ { return 302 /loop/$1; }
        location /missing/ { return 404; }
        location /gone/ { return 410; }
        location /noindex-header/ {
            add_header X-Robots-Tag "noindex, nofollow" always;
            return 200 '<!doctype html><p>hidden';
        }
        location /noindex-meta/ {
            return 200 '<!doctype html><head><meta name="robots" content="noindex"></head>';
        }
        location ~ ^/canonical-html/(\d+)$ {
            return 200 '<!doctype html><head><link rel="canonical" href="/ok/$1"></head>';
        }
        location ~ ^/canonical-header/(\d+)$ {
            add_header Link '</ok/$1>; rel="canonical"' always;
            return 200 '<!doctype html><p>copy';
        }
        location /garbage/ {
            default_type application/octet-stream;
            root PREFIX;
            try_files /garbage.bin =500;
        }
        location /endless/ { root PREFIX; try_files /endless.html =500; }
        location /slow/ { limit_rate 2k; root PREFIX; try_files /endless.html =500; }
    }
}
"#;

/// Kinds with 10,000 URLs each, and the finding each is to get.
const KINDS: [(&str, &str); 10] = [
    ("ok", "ok"),
    ("moved", "redirect"),
    ("loop", "redirect"),
    ("missing", "not-found"),
    ("gone", "gone"),
    ("noindex-header", "noindex"),
    ("noindex-meta", "noindex"),
    ("canonical-html", "canonical-elsewhere"),
    ("canonical-header", "canonical-elsewhere"),
    ("garbage", "ok"),
];

async fn fixtures() -> Nginx {
    let garbage: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let endless = format!(
        "<!doctype html><head><title>long</title></head><body>{}<meta name=robots content=noindex>",
        "<p>filler</p>".repeat(400_000)
    );
    Nginx::launch_config(
        &[
            ("garbage.bin", garbage),
            ("endless.html", endless.into_bytes()),
        ],
        |port, dir| {
            FIXTURES
                .replace("PORT", &port.to_string())
                .replace("PREFIX", &dir.display().to_string())
        },
    )
    .await
}

/// Inserts `count` rows `{BASE_URL}{kind}/{i}`.
async fn insert(pool: &PgPool, kind: &str, count: i64) {
    sqlx::query(
        "INSERT INTO sitemap_urls (loc) SELECT $1 || g FROM generate_series(1, $2::bigint) g",
    )
    .bind(format!("{BASE_URL}{kind}/"))
    .bind(count)
    .execute(pool)
    .await
    .expect("rows");
}

async fn findings(pool: &PgPool) -> BTreeMap<String, i64> {
    sqlx::query_as::<_, (String, i64)>("SELECT finding, count(*) FROM sitemap_audits GROUP BY 1")
        .fetch_all(pool)
        .await
        .expect("findings")
        .into_iter()
        .collect()
}

/// Waits until `wanted` URLs are checked (300 s at most: a debug build on a
/// slow two-core machine, beside the other tests, took over 120 s for
/// 100,006).
async fn until_checked(pool: &PgPool, wanted: i64) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let checked: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_audits")
            .fetch_one(pool)
            .await
            .expect("count");
        if checked >= wanted {
            return;
        }
        assert!(Instant::now() < deadline, "{checked} of {wanted} checked");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn audited(port: u16, rate: u32) -> impl FnOnce(&mut sitemapd::config::Settings) {
    move |s| {
        s.audit = Some(true);
        s.audit_origin = Some(format!("http://127.0.0.1:{port}"));
        s.audit_requests_per_second = Some(f64::from(rate));
        s.audit_user_agent = Some("sitemapd-test-audit".into());
    }
}

/// 10,000 URLs of each kind, checked through the audit origin with the
/// site's Host: every finding right, every answer that breaks the limits
/// (an endless body, a slow drip, garbage, a redirect loop) handled within
/// them, nothing fetched that is not the site's, and the findings in the
/// stats, the metrics and the operators' HTML view.
#[sqlx::test]
async fn every_kind_of_answer_gets_its_finding(pool: PgPool) {
    let nginx = fixtures().await;
    for (kind, _) in KINDS {
        insert(&pool, kind, 10_000).await;
    }
    insert(&pool, "endless", 3).await;
    insert(&pool, "slow", 2).await;
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ('https://elsewhere.example/page')")
        .execute(&pool)
        .await
        .expect("a row of another host");
    let app = spawn_api(pool, audited(nginx.port(), 5000)).await;
    let started = Instant::now();
    until_checked(&app.pool, 100_006).await;
    let took = started.elapsed();

    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for (_, finding) in KINDS {
        *expected.entry(finding.to_owned()).or_default() += 10_000;
    }
    // The endless page's noindex lies past the 256 KiB read; the slow drip
    // is cut at 10 s with what came.
    *expected.entry("ok".into()).or_default() += 5;
    *expected.entry("error".into()).or_default() += 1;
    assert_eq!(findings(&app.pool).await, expected, "after {took:?}");

    let (location, canonical): (Option<String>, Option<String>) = sqlx::query_as(
        "SELECT (SELECT location FROM sitemap_audits WHERE loc = $1 || 'moved/7'),
                (SELECT canonical FROM sitemap_audits WHERE loc = $1 || 'canonical-html/7')",
    )
    .bind(BASE_URL)
    .fetch_one(&app.pool)
    .await
    .expect("details");
    assert_eq!(location.as_deref(), Some("/ok/7"));
    assert_eq!(canonical.as_deref(), Some(&*format!("{BASE_URL}ok/7")));
    let log = std::fs::read_to_string(nginx.prefix().join("access.log")).expect("access log");
    assert!(
        log.lines()
            .all(|line| line.contains(" www.example.com sitemapd-test-audit ")),
        "every request names the site's host and the audit's agent"
    );
    assert!(
        !log.contains("elsewhere"),
        "another host's URL is never fetched"
    );
    assert_eq!(log.lines().count(), 100_005, "each URL fetched once");

    let auth = format!("Bearer {TOKEN}");
    let stats = site_stats(&app).await;
    assert_eq!(stats["sites"][0]["audit"]["redirect"], 20_000, "{stats}");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        metrics.contains("sitemapd_audit_urls{site=\"default\",finding=\"gone\"} 10000\n"),
        "{metrics}"
    );
    let view = app
        .send(
            reqwest::Method::GET,
            "/sitemaps.html",
            &[("authorization", &auth)],
            "",
        )
        .await
        .text()
        .await
        .expect("view");
    assert!(
        view.contains("audit: not-found") && view.contains("missing/1"),
        "{view}"
    );
    // Every URL behind a finding, a screen at a time.
    let listing = |query: &'static str| {
        let auth = auth.clone();
        let app = &app;
        async move {
            let response = app
                .send(
                    reqwest::Method::GET,
                    &format!("/sitemaps.html?{query}"),
                    &[("authorization", &auth)],
                    "",
                )
                .await;
            let status = response.status().as_u16();
            (status, response.text().await.expect("listing"))
        }
    };
    let (status, moved) = listing("finding=redirect&screen=20").await;
    assert_eq!(status, 200, "{moved}");
    assert!(
        moved.contains("20,000 URLs") && moved.contains("Screen 20 of 20"),
        "{moved}"
    );
    assert!(
        moved.contains("loop/10000") && moved.contains("→ /loop/10000"),
        "{moved}"
    );
    assert_eq!(listing("finding=redirect&screen=21").await.0, 404);
    let public = app.get("/sitemaps.html?finding=gone").await;
    assert_eq!(public.status(), 400, "findings are for operators");
}

/// The audit never sends a site more than its `audit_requests_per_second`.
#[sqlx::test]
async fn the_rate_limit_holds(pool: PgPool) {
    let nginx = fixtures().await;
    insert(&pool, "ok", 150).await;
    let app = spawn_api(pool, audited(nginx.port(), 50)).await;
    until_checked(&app.pool, 150).await;
    let log = std::fs::read_to_string(nginx.prefix().join("access.log")).expect("access log");
    // When each request came: logged when answered, less how long that took.
    let mut times: Vec<f64> = log
        .lines()
        .map(|line| {
            let mut fields = line
                .split(' ')
                .map(|f| f.parse::<f64>().unwrap_or(f64::NAN));
            let (logged, took) = (fields.next().expect("msec"), fields.next().expect("took"));
            logged - took
        })
        .collect();
    times.sort_by(f64::total_cmp);
    assert_eq!(times.len(), 150);
    // The auditor sends at most 50 in any second; nginx sees each request
    // a little after it was sent, later still on a busy machine, so sends
    // further apart can arrive together. Any 0.75 s at nginx holds requests
    // sent within one second as long as none was held up more than 0.25 s
    // on its way: at most 50, and one more for each edge of the window.
    for (i, start) in times.iter().enumerate() {
        let within = times[i..].iter().take_while(|t| **t < start + 0.75).count();
        assert!(within <= 52, "{within} requests in the 0.75 s from {start}");
    }
    // Paced, they span 2.98 s; a busy machine can hold the first up, or
    // hurry none, by a few tenths. Unpaced, they take a few milliseconds.
    let span = times[149] - times[0];
    assert!(
        span >= 2.5,
        "150 requests at 50 a second take 3 s, not {span:.2} s"
    );
}

/// With `audit_leave_out`, a URL whose check found one of those findings
/// is left out with the reason `audit: FINDING` and stays in the table; it
/// comes back when its row changes to a URL that passes, or when the site
/// no longer leaves the finding out.
#[sqlx::test]
async fn findings_the_site_leaves_out_are_left_out_until_they_go(pool: PgPool) {
    let nginx = fixtures().await;
    for kind in ["ok", "missing", "moved"] {
        insert(&pool, kind, 2).await;
    }
    let app = spawn_api(pool, |s| {
        audited(nginx.port(), 100)(s);
        s.audit_leave_out = Some(vec!["not-found".into(), "redirect".into()]);
    })
    .await;
    until_checked(&app.pool, 6).await;
    app.fold().await;
    let listed = |paths: &[&str]| -> Vec<String> {
        paths.iter().map(|p| format!("{BASE_URL}{p}")).collect()
    };
    assert_eq!(app.served_locs().await, listed(&["ok/1", "ok/2"]));
    let reasons: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT skip_reason FROM sitemap_placements WHERE skip_reason IS NOT NULL ORDER BY 1",
    )
    .fetch_all(&app.pool)
    .await
    .expect("reasons");
    assert_eq!(reasons, ["audit: not-found", "audit: redirect"]);

    // The row now names a page that answers: listed at once, checked again.
    sqlx::query("UPDATE sitemap_urls SET loc = $1 WHERE loc = $2")
        .bind(format!("{BASE_URL}ok/9"))
        .bind(format!("{BASE_URL}missing/1"))
        .execute(&app.pool)
        .await
        .expect("rename");
    app.fold().await;
    assert_eq!(app.served_locs().await, listed(&["ok/1", "ok/2", "ok/9"]));

    sqlx::query("UPDATE sitemap_sites SET audit_leave_out = '{}' WHERE site = 'default'")
        .execute(&app.pool)
        .await
        .expect("report only");
    app.fold().await;
    assert_eq!(
        app.served_locs().await,
        listed(&["missing/2", "moved/1", "moved/2", "ok/1", "ok/2", "ok/9"])
    );
}

/// The findings are counted as checks are written, whoever writes them:
/// the counts equal a recount after new checks, rechecks that change a
/// finding or keep it, a check given to another site, deletes and a
/// truncation, and the stats, the metrics, the view and the listing of a
/// finding's URLs read them.
#[sqlx::test]
async fn findings_are_counted_as_checks_are_written(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let counted = || {
        kept_counts(
            &app.pool,
            "SELECT site, finding, urls FROM sitemap_audit_finding_counts ORDER BY 1, 2",
            "SELECT site, finding, count(*) FROM sitemap_audits GROUP BY 1, 2 ORDER BY 1, 2",
        )
    };
    // Written as the auditor writes them: one upsert per batch of checks.
    let upsert = |site: &'static str, checks: Vec<(i64, &'static str)>| {
        let pool = app.pool.clone();
        async move {
            let (ids, findings): (Vec<i64>, Vec<&str>) = checks.into_iter().unzip();
            sqlx::query(
                "INSERT INTO sitemap_audits AS a (id, site, loc, row_updated_at, checked_at,
                                                 noindex, finding)
                 SELECT c.id, $1, $2 || c.id, now(), now(), false, c.finding
                 FROM unnest($3::bigint[], $4::text[]) AS c(id, finding)
                 ON CONFLICT (id) DO UPDATE SET
                     site = excluded.site, checked_at = excluded.checked_at,
                     finding = excluded.finding",
            )
            .bind(site)
            .bind(BASE_URL)
            .bind(ids)
            .bind(findings)
            .execute(&pool)
            .await
            .expect("checks");
        }
    };
    let findings = |from: i64, to: i64, finding: &'static str| {
        (from..=to).map(move |id| (id, finding)).collect::<Vec<_>>()
    };
    exec(
        &app.pool,
        "INSERT INTO sitemap_sites (site, origin, path_prefix)
         VALUES ('shop', 'https://shop.example.com', '/')",
    )
    .await;
    // The stats list the sites that have rows.
    insert(&app.pool, "ok", 1).await;
    app.fold().await;
    upsert(
        "default",
        [
            findings(1, 4, "ok"),
            findings(5, 7, "not-found"),
            findings(8, 10, "redirect"),
        ]
        .concat(),
    )
    .await;
    upsert("shop", findings(11, 13, "gone")).await;
    assert_eq!(
        counted().await,
        [
            "default/not-found 3",
            "default/ok 4",
            "default/redirect 3",
            "shop/gone 3"
        ]
    );
    let stats = site_stats(&app).await;
    let sites = stats["sites"].as_array().expect("sites");
    let default = sites
        .iter()
        .find(|s| s["site"] == "default")
        .expect("default");
    assert_eq!(default["audit"]["not-found"], 3, "{stats}");
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        metrics.contains("sitemapd_audit_urls{site=\"shop\",finding=\"gone\"} 3\n"),
        "{metrics}"
    );

    // Rechecks: two URLs now answer, one answers as before, one is new.
    upsert(
        "default",
        vec![(5, "ok"), (6, "ok"), (1, "ok"), (14, "error")],
    )
    .await;
    assert_eq!(
        counted().await,
        [
            "default/error 1",
            "default/not-found 1",
            "default/ok 6",
            "default/redirect 3",
            "shop/gone 3"
        ]
    );

    exec(
        &app.pool,
        "UPDATE sitemap_audits SET site = 'shop' WHERE id = 8",
    )
    .await;
    exec(
        &app.pool,
        "DELETE FROM sitemap_audits WHERE id IN (7, 11, 12)",
    )
    .await;
    assert_eq!(
        counted().await,
        [
            "default/error 1",
            "default/ok 6",
            "default/redirect 2",
            "shop/gone 1",
            "shop/redirect 1"
        ]
    );
    let view = app
        .operators("/sitemaps.html")
        .await
        .text()
        .await
        .expect("view");
    assert!(
        view.contains("audit: redirect") && !view.contains("audit: not-found"),
        "{view}"
    );
    let listing = app
        .operators("/sitemaps.html?finding=redirect")
        .await
        .text()
        .await
        .expect("listing");
    assert!(
        listing.contains("2 URLs") && listing.contains(&format!("{BASE_URL}10")),
        "{listing}"
    );

    exec(&app.pool, "TRUNCATE sitemap_audits").await;
    assert!(counted().await.is_empty());
    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(!metrics.contains("sitemapd_audit_urls{"), "{metrics}");
}
