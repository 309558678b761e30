//! Applications write `sitemap_urls` with plain SQL, in their own
//! transactions; once folded (the service does it every `fold_interval_ms`,
//! these tests when they choose), the next request reflects every change.

use sitemapd::pages::skips;
use sitemapd::store::Turn;
use sqlx::PgPool;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::helpers::{BASE_URL, TestApp};

fn lastmod_of(index: &[crate::helpers::IndexEntry], file: &str) -> OffsetDateTime {
    let entry = index
        .iter()
        .find(|e| e.loc == format!("{BASE_URL}{file}"))
        .unwrap_or_else(|| panic!("{file} not in the index"));
    OffsetDateTime::parse(&entry.lastmod, &Rfc3339).expect("W3C datetime")
}

#[sqlx::test]
async fn insert_update_and_delete_each_show_and_move_lastmod_forward(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let exec = |sql: &'static str| {
        let app = &app;
        async move {
            sqlx::query(sql)
                .bind(BASE_URL)
                .execute(&app.pool)
                .await
                .expect(sql);
            app.fold().await;
        }
    };
    exec("INSERT INTO sitemap_urls (loc) VALUES ($1 || 'a'), ($1 || 'b')").await;
    let first = lastmod_of(&app.index().await, "sitemap-1.xml.gz");

    exec(
        "INSERT INTO sitemap_urls (loc, lastmod) VALUES ($1 || 'c', '2020-01-01')
         ON CONFLICT (site, loc) DO UPDATE SET lastmod = excluded.lastmod",
    )
    .await;
    let after_insert = lastmod_of(&app.index().await, "sitemap-1.xml.gz");
    assert!(after_insert > first, "insert: {after_insert} > {first}");
    let urls = app.page("/sitemap-1.xml.gz").await.urls;
    assert_eq!(urls.len(), 3);

    exec("UPDATE sitemap_urls SET changefreq = 'daily' WHERE loc = $1 || 'a'").await;
    let after_update = lastmod_of(&app.index().await, "sitemap-1.xml.gz");
    assert!(
        after_update > after_insert,
        "update: {after_update} > {after_insert}"
    );
    let urls = app.page("/sitemap-1.xml.gz").await.urls;
    assert_eq!(urls[0].changefreq.as_deref(), Some("daily"));

    exec("DELETE FROM sitemap_urls WHERE loc = $1 || 'b'").await;
    let after_delete = lastmod_of(&app.index().await, "sitemap-1.xml.gz");
    assert!(
        after_delete > after_update,
        "delete: {after_delete} > {after_update}"
    );
    let locs: Vec<String> = app.page("/sitemap-1.xml.gz").await.locs();
    assert_eq!(locs, [format!("{BASE_URL}a"), format!("{BASE_URL}c")]);

    // An upsert that changes nothing changes no page.
    exec(
        "INSERT INTO sitemap_urls (loc, lastmod) VALUES ($1 || 'c', '2020-01-01')
         ON CONFLICT (site, loc) DO UPDATE SET lastmod = excluded.lastmod",
    )
    .await;
    assert_eq!(
        lastmod_of(&app.index().await, "sitemap-1.xml.gz"),
        after_delete
    );

    exec("DELETE FROM sitemap_urls").await;
    assert!(
        app.index().await.is_empty(),
        "an emptied page leaves the index"
    );
    assert_eq!(app.get("/sitemap-1.xml.gz").await.status(), 404);
}

#[sqlx::test]
async fn a_change_moves_only_its_own_pages_lastmod(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 2).await;
    app.insert_urls("", "p", 6).await;
    let before = app.index().await;
    sqlx::query("UPDATE sitemap_urls SET priority = 0.3 WHERE loc = $1")
        .bind(format!("{BASE_URL}p3"))
        .execute(&app.pool)
        .await
        .expect("update");
    app.fold().await;
    let after = app.index().await;
    assert_eq!(after[0], before[0]);
    assert!(lastmod_of(&after, "sitemap-2.xml.gz") > lastmod_of(&before, "sitemap-2.xml.gz"));
    assert_eq!(after[2], before[2]);
}

#[sqlx::test]
async fn membership_is_stable_and_new_rows_fill_the_last_page(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 3).await;
    app.insert_urls("", "p", 7).await;
    let loc = |n: &str| format!("{BASE_URL}{n}");
    let before = app.crawl().await;
    assert_eq!(before[0].1, [loc("p1"), loc("p2"), loc("p3")]);
    assert_eq!(before[2].1, [loc("p7")]);

    let sql = [
        "DELETE FROM sitemap_urls WHERE loc = $1 || 'p2'",
        "UPDATE sitemap_urls SET lastmod = now() WHERE loc = $1 || 'p5'",
        "INSERT INTO sitemap_urls (loc) VALUES ($1 || 'n1'), ($1 || 'n2'), ($1 || 'n3')",
    ];
    for statement in sql {
        sqlx::query(statement)
            .bind(BASE_URL)
            .execute(&app.pool)
            .await
            .expect(statement);
        app.fold().await;
    }
    let after = app.crawl().await;
    let pages: Vec<(&str, Vec<String>)> =
        after.iter().map(|(p, l)| (p.as_str(), l.clone())).collect();
    assert_eq!(
        pages,
        [
            ("/sitemap-1.xml.gz", vec![loc("p1"), loc("p3")]),
            ("/sitemap-2.xml.gz", vec![loc("p4"), loc("p5"), loc("p6")]),
            ("/sitemap-3.xml.gz", vec![loc("p7"), loc("n1"), loc("n2")]),
            ("/sitemap-4.xml.gz", vec![loc("n3")]),
        ]
    );

    // A new loc is a new URL: it leaves its page for the end of the section
    // (within a page, rows keep their insertion order).
    sqlx::query("UPDATE sitemap_urls SET loc = $1 || 'p1-renamed' WHERE loc = $1 || 'p1'")
        .bind(BASE_URL)
        .execute(&app.pool)
        .await
        .expect("rename");
    app.fold().await;
    let renamed = app.crawl().await;
    assert_eq!(renamed[0].1, [loc("p3")]);
    assert_eq!(renamed[3].1, [loc("p1-renamed"), loc("n3")]);
}

#[sqlx::test]
async fn concurrent_writers_of_one_section_lose_and_overfill_nothing(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 100).await;
    let writer = |prefix: &'static str| {
        let pool = app.pool.clone();
        async move {
            for batch in 0..10 {
                let mut tx = pool.begin().await.expect("begin");
                sqlx::query(
                    "INSERT INTO sitemap_urls (section, loc)
                     SELECT 'shared', $1 || g FROM generate_series(1, 37) g",
                )
                .bind(format!("{BASE_URL}{prefix}/{batch}/"))
                .execute(&mut *tx)
                .await
                .expect("insert");
                tx.commit().await.expect("commit");
            }
        }
    };
    tokio::join!(writer("left"), writer("right"), writer("middle"));
    app.fold().await;
    let pages = app.crawl().await;
    assert!(pages.iter().all(|(_, locs)| locs.len() <= 100));
    assert_eq!(
        pages.iter().map(|(_, l)| l.len()).sum::<usize>(),
        3 * 10 * 37
    );
    assert_eq!(app.served_locs().await, app.table_locs().await);
    // Packed: every page but the last is full.
    assert!(
        pages[..pages.len() - 1]
            .iter()
            .all(|(_, locs)| locs.len() == 100)
    );
}

#[sqlx::test]
async fn lowering_the_limits_moves_only_the_overflow(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.max_urls = 5).await;
    app.insert_urls("", "p", 12).await;
    let loc = |n: u32| format!("{BASE_URL}p{n}");

    let lowered = TestApp::spawn_with(pool, |s| s.max_urls = 3).await;
    let pages = lowered.crawl().await;
    assert!(pages.iter().all(|(_, locs)| locs.len() <= 3));
    assert_eq!(pages[0].1, [loc(1), loc(2), loc(3)]);
    assert_eq!(pages[1].1, [loc(6), loc(7), loc(8)]);
    assert_eq!(lowered.served_locs().await, lowered.table_locs().await);
}

#[sqlx::test]
async fn the_periodic_skip_report_leaves_its_round_to_a_running_fold(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let outside = "https://elsewhere.example/x";
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1)")
        .bind(outside)
        .execute(&app.pool)
        .await
        .expect("insert");
    app.fold().await;

    // While a fold holds the turn, a round takes nothing and does not wait
    // (waiting would end in the 60 s lock timeout).
    let mut fold = app.pool.acquire().await.expect("connection");
    sqlx::query("SELECT pg_advisory_lock(hashtext('sitemapd'), hashtext('fold turn'))")
        .execute(&mut *fold)
        .await
        .expect("the fold's turn");
    let round = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        skips::report_new_skips(&app.state.store, Turn::Skip),
    )
    .await
    .expect("the round does not wait for the fold")
    .expect("round");
    assert!(round.is_empty(), "{round:?}");
    sqlx::query("SELECT pg_advisory_unlock(hashtext('sitemapd'), hashtext('fold turn'))")
        .execute(&mut *fold)
        .await
        .expect("the turn ends");

    // The row is still to report, once.
    let reported: Vec<String> = app
        .report_skips()
        .await
        .into_iter()
        .map(|row| row.loc)
        .collect();
    assert_eq!(reported, [outside]);
    assert!(app.report_skips().await.is_empty());
}

#[sqlx::test]
async fn rows_outside_the_base_url_are_left_out_counted_and_logged_once(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "ok-", 2).await;
    sqlx::query(
        "INSERT INTO sitemap_urls (site, loc) VALUES
         ('default', 'https://elsewhere.example/x'),
         ('default', 'http://www.example.com/wrong-scheme'),
         ('default', 'https://www.example.com/a/../../etc'),
         ('other', 'https://www.example.com/unconfigured-site')",
    )
    .execute(&app.pool)
    .await
    .expect("insert bad rows");
    app.fold().await;

    assert_eq!(
        app.served_locs().await,
        [format!("{BASE_URL}ok-1"), format!("{BASE_URL}ok-2")]
    );
    let counts = app.state.store.skipped_counts().await.expect("counts");
    assert!(counts.contains(&("default".to_owned(), 3)), "{counts:?}");

    let mut reported: Vec<(String, String)> = app
        .report_skips()
        .await
        .into_iter()
        .map(|row| (row.loc, row.reason))
        .collect();
    reported.sort();
    assert_eq!(reported.len(), 4);
    assert_eq!(reported[0].0, "http://www.example.com/wrong-scheme");
    assert!(
        reported[0].1.contains("outside the site's base URL"),
        "{}",
        reported[0].1
    );
    assert_eq!(reported[3].0, "https://www.example.com/unconfigured-site");
    assert_eq!(reported[3].1, "site not configured");
    assert!(app.report_skips().await.is_empty(), "each is logged once");

    // Fixing a row brings it back.
    sqlx::query(
        "UPDATE sitemap_urls SET loc = $1 || 'fixed' WHERE loc = 'https://elsewhere.example/x'",
    )
    .bind(BASE_URL)
    .execute(&app.pool)
    .await
    .expect("fix");
    app.fold().await;
    assert!(
        app.served_locs()
            .await
            .contains(&format!("{BASE_URL}fixed"))
    );
}

#[sqlx::test]
async fn rows_a_sitemap_cannot_carry_are_left_out_and_never_break_the_page(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    // Through the schema as it stands: each of these passes its CHECK but
    // would make the page invalid against sitemap.xsd as served.
    sqlx::query(
        "INSERT INTO sitemap_urls (loc) VALUES
            ($1 || 'before'), ($1 || '50%-off'), ($1 || 'a[1]')",
    )
    .bind(BASE_URL)
    .execute(&app.pool)
    .await
    .expect("insert");
    app.fold().await;
    // The schema refuses control characters and locs over 2,048 characters
    // as served (2,000 CJK characters are 18,000 once percent-encoded); a
    // database whose constraint was dropped (or predates it) must still get
    // well-formed pages.
    sqlx::query("ALTER TABLE sitemap_urls DROP CONSTRAINT sitemap_urls_loc_url")
        .execute(&app.pool)
        .await
        .expect("drop constraint");
    app.fold().await;
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1 || E'bad\\x01\\x0b'), ($1 || repeat('語', 2000)), ($1 || 'after')")
        .bind(BASE_URL)
        .execute(&app.pool)
        .await
        .expect("insert");
    app.fold().await;
    let locs: Vec<String> = app.page("/sitemap-1.xml.gz").await.locs();
    assert_eq!(
        locs,
        [format!("{BASE_URL}before"), format!("{BASE_URL}after")]
    );
}
